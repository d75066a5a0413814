"""A document gone for one user (404 for that user) loses that user's access only."""

from __future__ import annotations

from ncindex.index.indexing import Indexer
from support import Stack, wait_until


def test_unshared_file_is_evicted_for_the_sharee_only(stack: Stack) -> None:
    file_id = stack.sim.put_file("alice", "/Shared/plan.txt", b"Rebuild the stone bridge in June.")
    key = f"file:{file_id}"
    wait_until(lambda: stack.points(key), 15)
    stack.sim.share("alice", "/Shared/plan.txt", "bob")
    indexer = Indexer(stack.services)
    assert indexer.index_node("bob", file_id).action == "updated"  # no embedding: same text
    payload = stack.points(key)[0].payload
    assert payload["acl"] == ["user:alice", "user:bob"]
    assert payload["paths"] == {"alice": "/Shared/plan.txt", "bob": "/plan.txt"}
    stack.sim.unshare("alice", "/Shared/plan.txt", "bob")
    assert indexer.index_node("bob", file_id).action == "evicted"  # bob's WebDAV SEARCH: none
    payload = stack.points(key)[0].payload
    assert payload["acl"] == ["user:alice"] and payload["paths"] == {"alice": "/Shared/plan.txt"}
    assert payload["file_path"] == ["alice:/Shared/plan.txt"]


def test_a_file_blocked_by_an_access_rule_leaves_the_index(stack: Stack, monkeypatch) -> None:
    from ncindex.nextcloud.client import NextcloudClient

    stack.sim.drop_rate = 1.0  # the indexer is driven by hand here
    file_id = stack.sim.put_file("alice", "/Vault/plan.txt", b"Rebuild the stone bridge in June.")
    key = f"file:{file_id}"
    indexer = Indexer(stack.services)
    assert indexer.index_node("alice", file_id).action == "indexed"
    # an admin's files_accesscontrol rule: no event, same etag, listed without read permission
    stack.sim.block_access("alice", "/Vault")
    outcome = indexer.index_node("alice", file_id)
    assert (outcome.action, outcome.reason) == ("ineligible", "not readable")
    assert not stack.points(key)  # alice was its only reader

    # the rule lifted, the file changed, and a rule applied again between lookup and download
    stack.sim.block_access("alice", "/Vault", blocked=False)
    stack.sim.put_file("alice", "/Vault/plan.txt", b"Rebuild the stone bridge in July.")
    assert indexer.index_node("alice", file_id).action == "indexed"
    stack.sim.put_file("alice", "/Vault/plan.txt", b"Rebuild the stone bridge in August.")
    download = NextcloudClient.download

    def blocked_meanwhile(client: NextcloudClient, path: str, limit: int) -> bytes:
        stack.sim.block_access("alice", "/Vault")
        return download(client, path, limit)

    monkeypatch.setattr(NextcloudClient, "download", blocked_meanwhile)
    outcome = indexer.index_node("alice", file_id)
    assert (outcome.action, outcome.reason) == ("ineligible", "download refused")
    assert not stack.points(key)  # the July text is not left searchable


def test_a_sharee_delete_rechecks_the_owner_at_once(stack: Stack) -> None:
    stack.sim.mkdir("alice", "/Shared")
    file_id = stack.sim.put_file("alice", "/Shared/plan.txt", b"Rebuild the stone bridge in June.")
    key = f"file:{file_id}"
    wait_until(lambda: stack.points(key), 15)
    stack.sim.share("alice", "/Shared", "bob")
    stack.sim.share("alice", "/Shared", "carol")
    indexer = Indexer(stack.services)
    for user in ("bob", "carol"):
        indexer.index_node(user, file_id)
    assert stack.points(key)[0].payload["acl"] == ["user:alice", "user:bob", "user:carol"]
    stack.sim.drop_rate = 1.0  # alice's and carol's own events never come
    stack.sim.delete("bob", "/Shared/plan.txt")  # to alice's trash (Trashbin::move2trash)
    assert indexer.evict_node("bob", "/Shared/plan.txt", file_id).action == "evicted"
    assert stack.points(key) == []  # alice and carol re-checked by id at once: gone for all


def test_a_sharee_delete_keeps_what_the_owner_still_has(stack: Stack) -> None:
    file_id = stack.sim.put_file("alice", "/Shared/plan.txt", b"Rebuild the stone bridge in June.")
    key = f"file:{file_id}"
    wait_until(lambda: stack.points(key), 15)
    stack.sim.share("alice", "/Shared/plan.txt", "bob")
    indexer = Indexer(stack.services)
    indexer.index_node("bob", file_id)
    stack.sim.drop_rate = 1.0
    stack.sim.delete("bob", "/plan.txt")  # the share's mount point: bob unshares himself
    assert indexer.evict_node("bob", "/plan.txt", file_id).action == "evicted"
    payload = stack.points(key)[0].payload
    assert payload["acl"] == ["user:alice"] and payload["paths"] == {"alice": "/Shared/plan.txt"}


def test_a_group_folder_file_has_no_owner_and_outlives_a_member_leaving(stack: Stack) -> None:
    stack.sim.drop_rate = 1.0  # the indexer is driven by hand here
    stack.sim.group_folder("Team", ["alice", "bob"])
    file_id = stack.sim.put_file("alice", "/Team/plan.txt", b"Rebuild the stone bridge in June.")
    key = f"file:{file_id}"
    indexer = Indexer(stack.services)
    assert indexer.index_node("alice", file_id).action == "indexed"
    # oc:owner-id said alice (GroupFolderStorage::getOwner: the mount's user); M says mounted
    assert stack.points(key)[0].payload.get("owner") is None
    stack.services.store.set_payload(key, {"owner": "alice"})  # as stored before this was known
    assert indexer.index_node("bob", file_id).action == "updated"  # same etag: metadata only
    assert all(p.payload.get("owner") is None for p in stack.points(key))
    stack.sim.group_folder("Team", ["bob"])  # alice leaves the group
    assert indexer.index_node("alice", file_id).action == "evicted"
    payload = stack.points(key)[0].payload
    assert payload["acl"] == ["user:bob"] and payload["paths"] == {"bob": "/Team/plan.txt"}
