"""The share poll (:mod:`ncindex.sync.shares`): Nextcloud sends no webhook for a share, so a
file or folder shared with an account reaches its index, and one unshared leaves it, at the
next poll of its shares (one OCS request) rather than at its next file scan. No scan runs in
these tests."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from pydantic import SecretStr
from structlog.testing import capture_logs

from ncindex import names
from ncindex.accounts import refused_accounts
from ncindex.errors import NextcloudProtocolError
from ncindex.index.indexing import Indexer
from ncindex.ingest.events import Action
from ncindex.ingest.queueing import send_actions
from ncindex.sync.shares import SeenShare, note_move, poll_user, seen_shares
from support import Stack

WORDS = "quokka lighthouse ledger"


def sender(stack: Stack) -> Callable[[list[Action]], None]:
    """What sends a poll's actions to the stack's worker, as ``poll_shares`` sends them."""

    def send(actions: list[Action]) -> None:
        send_actions(
            stack.celery,
            stack.services.redis,
            actions,
            keys=stack.settings.names,
            countdown=None,
            key_seconds=60,
            batch_docs=stack.settings.index_batch_docs,
        )

    return send


def poll(stack: Stack, user: str) -> int:
    """One poll of ``user``'s shares, its tasks sent to the stack's worker and run to the
    end; returns how many actions it sent."""
    sent = poll_user(Indexer(stack.services), user, sender(stack))
    stack.wait_idle()
    return sent


def poll_task(stack: Stack) -> list[dict[str, object]]:
    """One run of the ``poll_shares`` task on the stack's worker (its once-per-period lock
    released first), run to the end; the warnings it logged."""
    stack.services.redis.delete(stack.settings.names.lock("poll-shares"))
    with capture_logs() as logs:
        stack.celery.send_task(names.POLL_SHARES, queue=names.RECONCILE)
        stack.wait_idle()
    return [e for e in logs if e["log_level"] == "warning"]


def acl(stack: Stack, doc_key: str) -> list[str]:
    (first,) = [p.payload for p in stack.points(doc_key) if p.payload["chunk_index"] == 0]
    return list(first["acl"])


def alices_file(stack: Stack, path: str) -> str:
    """``path`` written by alice and indexed for her (its webhook delivered); its doc key."""
    stack.sim.put_file("alice", path, f"# Harbour plan\n{WORDS} for the spring.".encode())
    stack.settle()
    doc_key = f"file:{stack.sim.file_id('alice', path)}"
    assert acl(stack, doc_key) == ["user:alice"]
    return doc_key


def test_a_folder_shared_is_found_by_its_recipient_after_one_poll(stack: Stack) -> None:
    doc_key = alices_file(stack, "/Proj/plan.md")
    assert poll(stack, "bob") == 0  # the first poll notes what is shared: nothing yet
    stack.sim.share("alice", "/Proj", "bob")  # no event
    assert stack.found("bob", WORDS, doc_key) is None
    assert poll(stack, "bob") == 1  # the folder, walked as bob
    assert "user:bob" in acl(stack, doc_key)
    found = stack.found("bob", WORDS, doc_key)
    assert found is not None and found["path"] == "/Proj/plan.md"
    assert poll(stack, "bob") == 0  # nothing changed since


def test_a_folder_unshared_leaves_the_recipients_acl_after_one_poll(stack: Stack) -> None:
    doc_key = alices_file(stack, "/Proj/plan.md")
    poll(stack, "bob")
    stack.sim.share("alice", "/Proj", "bob")
    poll(stack, "bob")
    assert "user:bob" in acl(stack, doc_key)
    stack.sim.unshare("alice", "/Proj", "bob")  # no event
    assert poll(stack, "bob") == 1  # the one document bob held below the share, re-read
    assert acl(stack, doc_key) == ["user:alice"]
    assert stack.found("bob", WORDS, doc_key) is None
    assert stack.found("alice", WORDS, doc_key) is not None


def test_a_file_shared_then_unshared_follows_its_share(stack: Stack) -> None:
    doc_key = alices_file(stack, "/Docs/plan.md")
    poll(stack, "bob")
    stack.sim.share("alice", "/Docs/plan.md", "bob")
    poll(stack, "bob")
    found = stack.found("bob", WORDS, doc_key)
    assert found is not None and found["path"] == "/plan.md"  # mounted at bob's top
    stack.sim.unshare("alice", "/Docs/plan.md", "bob")
    poll(stack, "bob")
    assert acl(stack, doc_key) == ["user:alice"]


@pytest.mark.parametrize(
    ("moved", "to"),
    [("/Shares/Proj", "/Archive/Proj"), ("/Shares", "/Archive")],
    ids=["mount", "above"],
)
def test_a_share_moved_by_its_recipient_then_unshared_within_one_poll_is_rechecked(
    stack: Stack, moved: str, to: str
) -> None:
    """Bob moves the share's mount, or a folder of his above it (its ``path`` changes; his
    ``NodeRenamedEvent`` moves his paths in the index) and alice unshares it, both between
    two polls: the poll's state knew the share at its old path only, where the index holds
    nothing of bob's any more. Before, its re-check looked there alone and bob kept the
    document."""
    doc_key = alices_file(stack, "/Proj/plan.md")
    stack.sim.mkdir("bob", "/Shares")
    stack.settle()
    poll(stack, "bob")
    stack.sim.share("alice", "/Proj", "bob", "/Shares/Proj")
    poll(stack, "bob")
    stack.sim.move("bob", moved, to)  # the mount moved, the event delivered
    stack.settle()
    found = stack.found("bob", WORDS, doc_key)
    assert found is not None and found["path"] == "/Archive/Proj/plan.md"
    stack.sim.unshare("alice", "/Proj", "bob")
    poll(stack, "bob")
    assert acl(stack, doc_key) == ["user:alice"]
    assert stack.found("bob", WORDS, doc_key) is None


def test_a_share_moved_then_unshared_before_its_documents_were_re_pathed_is_rechecked(
    stack: Stack,
) -> None:
    """The move's task notes the share's new path before it re-paths bob's documents; a poll
    between the two, which finds the share gone, re-checks the path the documents are still
    at (the one the share was moved from) as well as its new one."""
    doc_key = alices_file(stack, "/Proj/plan.md")
    poll(stack, "bob")
    stack.sim.share("alice", "/Proj", "bob")
    poll(stack, "bob")
    stack.sim.drop_rate = 1.0  # bob's NodeRenamedEvent is not delivered: nothing re-pathed
    stack.sim.move("bob", "/Proj", "/Archive/Proj")
    note_move(Indexer(stack.services), "bob", "/Proj", "/Archive/Proj")  # the task's first step
    stack.sim.unshare("alice", "/Proj", "bob")
    assert "user:bob" in acl(stack, doc_key)  # (no search here: its verify-on-read re-reads)
    poll(stack, "bob")
    assert acl(stack, doc_key) == ["user:alice"]


def test_an_unshared_file_still_seen_through_another_share_stays(stack: Stack) -> None:
    """Unsharing the file leaves bob the folder share above it: the re-read by id finds it."""
    doc_key = alices_file(stack, "/Proj/plan.md")
    poll(stack, "bob")
    stack.sim.share("alice", "/Proj", "bob")
    stack.sim.share("alice", "/Proj/plan.md", "bob")
    poll(stack, "bob")
    stack.sim.unshare("alice", "/Proj/plan.md", "bob")
    poll(stack, "bob")
    assert "user:bob" in acl(stack, doc_key)
    assert stack.found("bob", WORDS, doc_key) is not None


def test_the_beat_task_polls_every_account(stack: Stack) -> None:
    doc_key = alices_file(stack, "/Proj/plan.md")
    poll(stack, "bob")
    poll(stack, "carol")
    stack.sim.share("alice", "/Proj", "bob")
    stack.sim.share("alice", "/Proj", "carol")
    stack.celery.send_task(names.POLL_SHARES, queue=names.RECONCILE)
    stack.wait_idle()
    assert acl(stack, doc_key) == ["user:alice", "user:bob", "user:carol"]


def test_a_poll_costs_one_request_per_account(stack: Stack) -> None:
    """The beat's poll of an unchanged deployment: one GET of the shares API per account and
    nothing else (no task sent, no other request)."""
    alices_file(stack, "/Proj/plan.md")
    stack.sim.share("alice", "/Proj", "bob")
    for user in stack.settings.accounts:
        poll(stack, user)
    stack.sim.reset_request_counts()
    stack.celery.send_task(names.POLL_SHARES, queue=names.RECONCILE)
    stack.wait_idle()
    shares = ("GET", "/ocs/v2.php/apps/files_sharing/api/v1/shares", 200)
    assert list(stack.sim.request_log) == [shares] * len(stack.settings.accounts)


def test_a_share_listed_without_what_the_poll_reads_is_a_protocol_error() -> None:
    """``formatShare`` gives ``id``, ``item_source``, ``path`` and ``item_type``: a share
    without them is not guessed at (the account's poll fails, its state is kept)."""
    share = {"id": "7", "item_source": 42, "path": "/Proj", "item_type": "folder"}
    assert seen_shares([share]) == {"7": SeenShare(42, "/Proj", True)}
    broken_shares = (
        {"item_source": None},
        {"path": "Proj"},
        {"item_type": "link"},
        {"id": None},
        {"attributes": 5},
    )
    for broken in broken_shares:
        with pytest.raises(NextcloudProtocolError):
            seen_shares([share | broken])


def test_two_polls_of_an_account_never_overlap(stack: Stack) -> None:
    """Poll A lists a share and sends its walk; the share goes, another comes, and poll B
    (a beat tick while A ran past its task lock) lists before A keeps its state. B used to
    run, keep its listing after A's, and the gone share was stored as never seen: bob kept it
    in the index until the next file scan. B now leaves bob to A, whose state makes the next
    poll re-check what bob lost."""
    doc_key = alices_file(stack, "/Proj/plan.md")
    stack.sim.put_file("alice", "/Docs/other.md", b"# Other\nnothing shared yet")
    stack.settle()
    poll(stack, "bob")  # first poll: nothing shared yet
    stack.sim.share("alice", "/Proj", "bob")
    a_sent, go = threading.Event(), threading.Event()

    send = sender(stack)

    def send_then_wait(actions: list[Action]) -> None:
        send(actions)
        a_sent.set()
        assert go.wait(60)

    def send_then_let_a_finish(actions: list[Action]) -> None:
        send(actions)
        go.set()
        a.join(60)

    a = threading.Thread(target=poll_user, args=(Indexer(stack.services), "bob", send_then_wait))
    a.start()
    assert a_sent.wait(60)
    stack.wait_idle()
    assert "user:bob" in acl(stack, doc_key)  # A's walk of the share, done
    stack.sim.unshare("alice", "/Proj", "bob")
    stack.sim.share("alice", "/Docs/other.md", "bob")
    poll_user(Indexer(stack.services), "bob", send_then_let_a_finish)
    go.set()
    a.join(60)
    assert not a.is_alive()
    stack.wait_idle()
    poll(stack, "bob")
    assert acl(stack, doc_key) == ["user:alice"]
    assert stack.found("bob", WORDS, doc_key) is None


def test_an_account_whose_listing_fails_leaves_the_others_polled(stack: Stack) -> None:
    """A 5xx for the first account's listing is logged and skipped: the accounts after it
    are polled in the same run, and its own state is kept for the next poll."""
    doc_key = alices_file(stack, "/Proj/plan.md")
    for user in stack.settings.accounts:
        poll(stack, user)
    first, *others = stack.settings.accounts
    seen = stack.services.redis.get(stack.settings.names.shares_seen(first))
    for user in others:
        stack.sim.share("alice", "/Proj", user)
    stack.sim.reset_request_counts()
    stack.sim.faults.set("ocs", status=503, times=1)
    stack.celery.send_task(names.POLL_SHARES, queue=names.RECONCILE)
    stack.wait_idle()
    shares = "/ocs/v2.php/apps/files_sharing/api/v1/shares"
    assert next(r for r in stack.sim.request_log if r[1] == shares) == ("GET", shares, 503)
    assert stack.services.redis.get(stack.settings.names.shares_seen(first)) == seen
    assert set(acl(stack, doc_key)) == {"user:alice"} | {f"user:{u}" for u in others}


def test_a_revoked_app_password_is_polled_once_keeps_the_state_and_recovers(stack: Stack) -> None:
    """bob's app password is revoked (Settings › Security) while a folder is shared with him:
    his listing is OCS 997, HTTP 401 (nextcloud/server ``ocs/v1.php`` catches the
    ``LoginException`` of ``Session::tryBasicAuthLogin``). That is no empty share list: his
    access and his poll state are kept, his account is recorded refused, and the next polls
    send nothing as him (each refused login counts against ncindex's address in Nextcloud's
    brute-force protection) while the others are polled. Once he has a new app password, the
    next poll sees what changed meanwhile (the folder unshared) and takes his access away.
    A guard: this held before the change it came with."""
    keys = stack.settings.names
    doc_key = alices_file(stack, "/Proj/plan.md")
    for user in stack.settings.accounts:
        poll(stack, user)
    stack.sim.share("alice", "/Proj", "bob")
    poll(stack, "bob")
    assert "user:bob" in acl(stack, doc_key)
    seen = stack.services.redis.get(keys.shares_seen("bob"))
    bob = stack.sim.tree.users["bob"]
    bob.passwords.clear()
    bob.token_logins.clear()
    stack.sim.unshare("alice", "/Proj", "bob")  # no event; ncindex cannot see it as bob now
    shares = "/ocs/v2.php/apps/files_sharing/api/v1/shares"
    stack.sim.reset_request_counts()
    poll_task(stack)
    poll_task(stack)
    refused = [r for r in stack.sim.request_log if r == ("GET", shares, 401)]
    answered = [r for r in stack.sim.request_log if r == ("GET", shares, 200)]
    assert len(refused) == 1  # the second poll sent nothing as bob
    assert len(answered) == 2 * (len(stack.settings.accounts) - 1)
    assert list(refused_accounts(stack.services.redis, keys)) == ["bob"]
    assert stack.services.redis.get(keys.shares_seen("bob")) == seen
    assert "user:bob" in acl(stack, doc_key)  # a 401 is not "nothing is shared with him"

    stack.sim.add_app_password("bob", "bob-new-app-password")
    stack.settings.accounts["bob"] = SecretStr("bob-new-app-password")
    poll_task(stack)
    assert acl(stack, doc_key) == ["user:alice"]
    assert refused_accounts(stack.services.redis, keys) == {}


VIEW_ONLY = [{"scope": "permissions", "key": "download", "value": False}]
DOWNLOAD = [{"scope": "permissions", "key": "download", "value": True}]


def test_a_share_made_view_only_leaves_the_recipients_acl_after_one_poll(stack: Stack) -> None:
    """A share made view-only (``updateShare`` with attributes) fires no event and changes no
    etag: its recipient kept the text in the index until the daily full walk, as the poll
    compared id, file, path and type only. Its attributes are compared too: the documents
    below it are re-read as the recipient, who may no longer read them; made downloadable
    again, the folder is walked and they come back."""
    doc_key = alices_file(stack, "/Proj/plan.md")
    poll(stack, "bob")
    stack.sim.share("alice", "/Proj", "bob")
    poll(stack, "bob")
    assert "user:bob" in acl(stack, doc_key)
    stack.sim.share("alice", "/Proj", "bob", attributes=VIEW_ONLY)  # the same share, updated
    assert poll(stack, "bob") == 2  # the folder walked, its one document re-read
    assert acl(stack, doc_key) == ["user:alice"]
    stack.sim.share("alice", "/Proj", "bob", attributes=DOWNLOAD)
    poll(stack, "bob")
    assert "user:bob" in acl(stack, doc_key)


def test_a_state_kept_before_attributes_were_compared_is_read(stack: Stack) -> None:
    """The release before kept three fields a share (file id, path, folder?): such a state is
    read, a share without attributes unchanged, and rewritten with four."""
    import json

    alices_file(stack, "/Proj/plan.md")
    stack.sim.share("alice", "/Proj", "bob")
    poll(stack, "bob")
    key = stack.settings.names.shares_seen("bob")
    kept = json.loads(stack.services.redis.get(key))
    stack.services.redis.set(key, json.dumps({k: v[:3] for k, v in kept.items()}))
    assert poll(stack, "bob") == 0
    assert json.loads(stack.services.redis.get(key)) == kept


def test_the_sharing_api_off_is_warned_of_once_not_per_account_and_poll(stack: Stack) -> None:
    """With the sharing API off (``shareapi_enabled`` no, OCS 404 "Share API is disabled";
    the files_sharing app disabled answers 404 alike) every poll warned for every account,
    every 120 s for good: the deployment warns once an hour, naming the
    setting that turns the poll off, and again at once after a poll that succeeded."""
    assert len(stack.settings.accounts) > 1
    try:
        stack.sim.sharing_enabled = False
        (first,) = poll_task(stack)
        assert first["event"] == "share_poll_sharing_off"
        assert "NCINDEX_SHARE_POLL_SECONDS=0" in str(first["hint"])
        assert poll_task(stack) == []  # the next polls say nothing more
        stack.sim.sharing_enabled = True
        assert poll_task(stack) == []
        stack.sim.sharing_enabled = False  # off again: said at once
        assert [e["event"] for e in poll_task(stack)] == ["share_poll_sharing_off"]
    finally:
        stack.sim.sharing_enabled = True


def test_the_files_sharing_app_disabled_is_warned_of_and_keeps_the_state(stack: Stack) -> None:
    """With the files_sharing app disabled its routes are not registered: the share poll's
    request gets Nextcloud's answer to an unknown OCS route (998, HTTP 404 in v2; the
    simulator answered it as if the app were enabled). The poll warns, once, as for sharing
    turned off, sends nothing and keeps what it had seen: the share is not taken for gone, and
    finds nothing new once the app is back and the share is still there. (Meanwhile the share
    is not mounted, so bob's file scan takes his access away and gives it back:
    ``test_scans.py::test_the_files_sharing_app_disabled_takes_the_shares_away_until_enabled``.)"""
    doc_key = alices_file(stack, "/Proj/plan.md")
    poll(stack, "bob")
    stack.sim.share("alice", "/Proj", "bob")
    poll(stack, "bob")
    assert "user:bob" in acl(stack, doc_key)
    seen = stack.settings.names.shares_seen("bob")
    kept = stack.services.redis.get(seen)
    try:
        stack.sim.disable_app("files_sharing")
        assert [e["event"] for e in poll_task(stack)] == ["share_poll_sharing_off"]
        assert poll_task(stack) == []
        assert stack.services.redis.get(seen) == kept
        assert "user:bob" in acl(stack, doc_key)
    finally:
        stack.sim.enable_app("files_sharing")
    assert poll(stack, "bob") == 0
