"""A document gone for one user (404 for that user) loses that user's access only."""

from __future__ import annotations

from ncindex.indexing import Indexer
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
