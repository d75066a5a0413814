"""Scans one by one on real parts: what an unchanged account costs, and the guards (failed
listing, empty listing, grace period, mass removal held until a second scan agrees)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from celery import Celery
from pydantic import SecretStr
from reconcile_support import differences, ground_truth, index_state

from ncindex import names
from ncindex.accounts import REFUSED_RECHECK_SECONDS, held_until, record_refused, refused_accounts
from ncindex.documents import DocType, path_fields
from ncindex.errors import BrokerUnavailable, NextcloudUnavailable
from ncindex.index.indexing import Indexer
from ncindex.ingest.events import index_node
from ncindex.ingest.queueing import enqueue
from ncindex.ingest.viewers import viewers_of
from ncindex.nextcloud.client import API_HEADERS, NOTES_API
from ncindex.progress import FailingDocuments, Progress
from ncindex.sources.note import notes_settings
from ncindex.sync.deleted import CONFIRM_SECONDS, Deleted, check_deleted
from ncindex.sync.paging import ListingPages
from ncindex.sync.reconcile import Reconciler, ScanState
from support import Stack, wait_until

USERS = ["alice", "bob", "carol"]
#: The notes scan's PROPFIND of the notes folder, in a whole reconcile's WebDAV count.
NOTES_FOLDER = 1


class Recorder:
    """A producer that records the tasks it is asked to send (nothing runs them)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any], str | None]] = []

    def send_task(self, name: str, **options: Any) -> None:
        self.sent.append((name, options.get("kwargs", {}), options.get("queue")))

    @property
    def files(self) -> list[int]:
        """The file ids of the index tasks sent, in order (an ``ncindex.index_nodes`` batch
        counts each of its files)."""
        ids: list[int] = []
        for _, kwargs, _ in self.sent:
            ids += kwargs["file_ids"] if "file_ids" in kwargs else [kwargs["file_id"]]
        return ids


def scan_state(stack: Stack, doc_type: DocType, user: str = "alice") -> ScanState:
    """``user``'s scan state of ``doc_type`` in the stack's Redis."""
    return ScanState(stack.services.redis, user, doc_type, stack.settings.names)


def reconciler(stack: Stack, producer: Any) -> Reconciler:
    return Reconciler(stack.services, Indexer(stack.services), producer)


def fill(stack: Stack, files: int = 12, notes: int = 6) -> None:
    """Files in two folders with a subfolder each, and notes; indexed through the webhooks."""
    for i in range(files):
        sub = "/Sub" if i % 3 == 0 else ""
        stack.sim.put_file("alice", f"/Docs/F{i % 2}{sub}/f{i}.md", f"# File {i}\nreef {i}")
    for i in range(notes):
        stack.sim.put_file("alice", f"/Notes/Cat/n{i}.md", f"# Note {i}\nanchor {i}")
    stack.settle()


def test_an_unchanged_account_costs_one_request_per_doc_type(rstack: Stack) -> None:
    """One request per doc type, and for notes one more: the PROPFIND asking whether the
    notes folder is there before the Notes list, which would create it."""
    fill(rstack)
    rstack.sim.drop_rate = 1.0  # from here on only the scans see changes
    rstack.reconcile(["alice"])  # clean: stores folder etags and pruneBefore
    rec = reconciler(rstack, Recorder())
    rstack.sim.reset_request_counts()
    for doc_type, requests in ((DocType.FILE, 1), (DocType.NOTE, 2)):
        report = rec.scan("alice", doc_type)
        assert report.clean and report.requests == requests, report.summary()
    assert rstack.sim.request_count() == 3

    rstack.sim.put_file("alice", "/Docs/F0/Sub/f0.md", "# File 0\nchanged deep down")
    rstack.sim.reset_request_counts()
    files = rec.scan("alice", DocType.FILE)
    # root (Depth 0, changed) → root, /Docs, /Docs/F0, /Docs/F0/Sub; /Docs/F1 and /Notes
    # are skipped
    assert files.requests == 5
    assert [(c.reason, c.path) for c in files.index] == [("changed", "/Docs/F0/Sub/f0.md")]
    rstack.sim.put_file("alice", "/Notes/Cat/n1.md", "# Note 1\nchanged")
    notes = rec.scan("alice", DocType.NOTE)
    assert notes.requests == 2
    assert [(c.reason, c.path) for c in notes.index] == [("changed", "/Notes/Cat/n1.md")]
    # the folders above the change stay dirty until a scan finds them in sync again
    assert (
        "/Docs/F0"
        not in ScanState(
            rstack.services.redis, "alice", DocType.FILE, rstack.settings.names
        ).folders()
    )


def test_a_failed_listing_enqueues_nothing(rstack: Stack) -> None:
    fill(rstack, files=4, notes=2)
    rstack.sim.drop_rate = 1.0
    for i in range(4):
        rstack.sim.delete("alice", f"/Docs/F{i % 2}{'/Sub' if i % 3 == 0 else ''}/f{i}.md")
    rstack.sim.faults.set("webdav", status=503)
    recorder = Recorder()
    report = reconciler(rstack, recorder).scan("alice", DocType.FILE)
    assert report.error is not None and "NextcloudUnavailable" in report.error
    assert recorder.sent == [] and not report.remove
    assert (
        ScanState(
            rstack.services.redis, "alice", DocType.FILE, rstack.settings.names
        ).missing_since()
        == {}
    )


def test_an_empty_listing_is_held_until_a_second_scan_agrees(rstack: Stack) -> None:
    fill(rstack, files=4, notes=0)
    rstack.sim.drop_rate = 1.0
    rstack.sim.delete("alice", "/Docs")
    recorder = Recorder()
    rec = reconciler(rstack, recorder)
    report = rec.scan("alice", DocType.FILE)
    assert report.guard == "empty_listing"
    assert len(report.held) == 4 and report.remove == [] and recorder.sent == []
    # a second empty listing agrees: each removal goes out as a re-check by id
    second = rec.scan("alice", DocType.FILE)
    assert len(second.remove) == 4 and second.held == []
    assert set(recorder.files) == {int(c.doc_id) for c in second.remove}


def test_an_unchanged_folder_holding_nothing_indexed_does_not_unguard_an_empty_listing(
    rstack: Stack,
) -> None:
    fill(rstack, files=4, notes=0)
    # a GIF: no extractor reads it (a JPEG is OCR'd since issue 23), so nothing is indexed there
    rstack.sim.put_file("alice", "/Photos/cat.gif", b"GIF89a")
    rstack.sim.drop_rate = 1.0
    rec = reconciler(rstack, Recorder())
    assert rec.scan("alice", DocType.FILE).clean  # stores the folder etags
    rstack.sim.delete("alice", "/Docs")  # the root now lists only the unchanged /Photos
    report = rec.scan("alice", DocType.FILE)
    assert report.guard == "empty_listing" and len(report.held) == 4 and report.remove == []


def test_a_failed_publish_does_not_mark_new_documents_tried(
    rstack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(rstack, files=2, notes=0)
    rstack.sim.drop_rate = 1.0
    rstack.sim.put_file("alice", "/Docs/new.md", b"# New\nlagoon")

    class Broken(Recorder):
        def send_task(self, name: str, **options: Any) -> None:
            raise ConnectionError("broker went away")

    with pytest.raises(BrokerUnavailable):
        reconciler(rstack, Broken()).scan("alice", DocType.FILE)
    assert scan_state(rstack, DocType.FILE).tried() == {}
    recorder = Recorder()
    again = reconciler(rstack, recorder).scan("alice", DocType.FILE)
    assert [c.path for c in again.index] == ["/Docs/new.md"] and again.unindexable == []
    assert len(recorder.sent) == 1


def test_a_mass_removal_is_held_until_a_second_scan_agrees(rstack: Stack) -> None:
    rstack.settings.reconcile_max_removal_share = 0.5
    rstack.settings.reconcile_guard_min_docs = 3
    fill(rstack, files=12, notes=0)
    rstack.sim.drop_rate = 1.0
    rstack.sim.delete("alice", "/Docs/F0")  # 6 of 12 files, plus one more below
    rstack.sim.delete("alice", "/Docs/F1/f1.md")
    recorder = Recorder()
    rec = reconciler(rstack, recorder)
    first = rec.scan("alice", DocType.FILE)
    assert first.guard == "mass_removal" and len(first.held) == 7 and first.remove == []
    assert recorder.sent == []
    second = rec.scan("alice", DocType.FILE)
    assert len(second.remove) == 7 and second.held == []
    assert set(recorder.files) == {int(c.doc_id) for c in second.remove}
    assert {q for _, _, q in recorder.sent} == {"index"}


def test_a_daily_full_walk_repairs_what_changes_no_folder_etag(rstack: Stack) -> None:
    fill(rstack, files=4, notes=0)
    rstack.sim.drop_rate = 1.0
    rec = reconciler(rstack, Recorder())
    assert rec.scan("alice", DocType.FILE).clean  # the first scan walks everything
    lost = rstack.sim.file_id("alice", "/Docs/F1/f1.md")
    rstack.services.store.delete_document(f"file:{lost}")  # e.g. an older store restored
    recorder = Recorder()
    rec = reconciler(rstack, recorder)
    skipped = rec.scan("alice", DocType.FILE)
    assert skipped.requests == 1 and skipped.index == []  # every folder etag unchanged
    state = scan_state(rstack, DocType.FILE)
    state.set_full_walk_at(time.time() - rstack.settings.reconcile_full_walk_seconds)  # a day on
    full = rec.scan("alice", DocType.FILE)
    assert [(c.reason, c.path) for c in full.index] == [("new", "/Docs/F1/f1.md")]
    assert recorder.files == [lost]
    assert time.time() - state.full_walk_at() < 60  # and the next full walk is a day away


def test_index_rules_widened_relist_what_they_left_out(rstack: Stack) -> None:
    """An admin removes an exclude glob (or adds a MIME type, lifts a tag gate) and restarts:
    the files the old rules left out were not indexed until the daily full walk, as every
    folder etag was unchanged (each scan cost its one request). A scan whose rules differ
    from those the last listing was judged by now lists every folder (and every note)."""
    rstack.settings.index_exclude_globs = ["/Private/**"]
    rstack.sim.put_file("alice", "/Private/diary.md", "# Diary\nkelp forests at dawn")
    rstack.sim.put_file("alice", "/Docs/plan.md", "# Plan\nreef survey")
    rstack.settle()
    diary = rstack.sim.file_id("alice", "/Private/diary.md")
    rstack.sim.drop_rate = 1.0  # from here on only the scans see changes
    first = reconciler(rstack, Recorder()).scan("alice", DocType.FILE)
    assert first.clean and diary not in [int(c.doc_id) for c in first.index]
    unchanged = reconciler(rstack, Recorder()).scan("alice", DocType.FILE)
    assert unchanged.requests == 1 and unchanged.index == []  # the same rules: one request
    rstack.settings.index_exclude_globs = []
    recorder = Recorder()
    widened = reconciler(rstack, recorder).scan("alice", DocType.FILE)
    assert [(c.reason, c.path) for c in widened.index] == [("new", "/Private/diary.md")]
    assert recorder.files == [diary]
    # recorded: the next scan judges by them and skips unchanged folders again
    assert (
        scan_state(rstack, DocType.FILE).rules()
        == Indexer(rstack.services).eligibility.fingerprint()
    )


def test_note_extensions_changed_relist_the_notes_folder(rstack: Stack) -> None:
    """``note_extensions`` decides whether a file in the notes folder is a note or a file
    (``classify``), yet was not in the rules fingerprint: an admin who drops ``txt`` from it
    and restarts had ``/Notes/todo.txt`` stay a note, and not a file, until the daily full
    walk, as the notes folder's etag was unchanged. The file scan now lists every folder."""
    rstack.sim.put_file("alice", "/Notes/todo.txt", "# Todo\nkelp forests at dawn")
    rstack.settle()
    todo = rstack.sim.file_id("alice", "/Notes/todo.txt")
    rstack.sim.drop_rate = 1.0  # from here on only the scans see changes
    first = reconciler(rstack, Recorder()).scan("alice", DocType.FILE)
    assert first.clean and first.index == []  # a note: not the file scan's
    unchanged = reconciler(rstack, Recorder()).scan("alice", DocType.FILE)
    assert unchanged.requests == 1 and unchanged.index == []
    rstack.settings.note_extensions = ["markdown", "md", "note", "org"]
    recorder = Recorder()
    changed = reconciler(rstack, recorder).scan("alice", DocType.FILE)
    assert [(c.reason, c.path) for c in changed.index] == [("new", "/Notes/todo.txt")]
    assert recorder.files == [todo]


def test_a_redis_restarted_empty_does_not_forget_a_finished_first_indexing(
    rstack: Stack,
) -> None:
    """Redis restarted without its data beside a full index: the first scans after it find
    every document indexed and send nothing. Before, alice's first indexing then showed
    ``not_started`` (``ncindex status``, ``GET /v1/status``) until a change started a "first
    indexing" of that one document; the scan now records it done, with what she holds."""
    fill(rstack, files=4, notes=2)
    rstack.sim.drop_rate = 1.0
    progress = Progress(rstack.services.redis, rstack.settings.names)
    assert progress.first_indexing("alice")["done_at"] is not None
    rstack.services.redis.flushdb()  # Redis restarted empty
    recorder = Recorder()
    rec = reconciler(rstack, recorder)
    for doc_type in (DocType.FILE, DocType.NOTE):
        assert rec.scan("alice", doc_type).clean
    assert recorder.sent == []  # nothing to do: everything is indexed
    first = progress.first_indexing("alice")
    assert first["started_at"] is not None and first["done_at"] is not None, first
    assert first["finished"] == 6
    assert rec.scan("bob", DocType.FILE).clean  # bob holds nothing: nothing recorded
    assert progress.first_indexing("bob")["started_at"] is None


def test_a_document_in_two_versions_is_found_indexed_once(rstack: Stack) -> None:
    """The scan that records a first indexing found done (Redis restarted empty) counted
    first chunks: a document whose new version was being written beside its old one (new
    point ids, the old deleted after) counted twice. It counts documents
    (``document_counts``), as ``ncindex status`` does."""
    from dataclasses import replace

    fill(rstack, files=2, notes=1)
    rstack.sim.drop_rate = 1.0
    store = rstack.services.store
    key = sorted({p["doc_key"] for p in store.scroll(None, ["doc_key"])})[0]
    (first,) = [
        p for p in store.document_points(key, with_vectors=True) if p.payload["chunk_index"] == 0
    ]
    older = {"indexed_at": first.payload["indexed_at"] - 1}  # the old version, not yet deleted
    store.upsert([replace(first, id=str(uuid.uuid4()), payload=first.payload | older)])
    rstack.services.redis.flushdb()  # Redis restarted empty
    rec = reconciler(rstack, Recorder())
    for doc_type in (DocType.FILE, DocType.NOTE):
        assert rec.scan("alice", doc_type).clean
    progress = Progress(rstack.services.redis, rstack.settings.names)
    assert progress.first_indexing("alice")["finished"] == 3


def test_an_index_emptied_beside_a_kept_redis_is_relisted_at_once(rstack: Stack) -> None:
    """A new or wiped store (``var/qdrant`` deleted, Redis kept): the folder etags and the
    Notes marker say nothing changed, but nothing is indexed any more — the next scan lists
    everything instead of waiting a day for the full walk."""
    fill(rstack, files=4, notes=2)
    rstack.sim.drop_rate = 1.0
    rec = reconciler(rstack, Recorder())
    for doc_type in (DocType.FILE, DocType.NOTE):
        assert rec.scan("alice", doc_type).clean
    progress = Progress(rstack.services.redis, rstack.settings.names)
    assert progress.first_indexing("alice")["done_at"] is not None
    for key in {p["doc_key"] for p in rstack.services.store.scroll(None, ["doc_key"])}:
        rstack.services.store.delete_document(key)
    recorder = Recorder()
    rec = reconciler(rstack, recorder)
    files = rec.scan("alice", DocType.FILE)
    notes = rec.scan("alice", DocType.NOTE)
    # the rebuild is a first indexing again: started by the relisting, not yet done
    first = progress.first_indexing("alice")
    assert first["started_at"] is not None and first["done_at"] is None, first
    assert first["finished"] == 0
    assert sorted(c.path for c in files.index) == [
        "/Docs/F0/Sub/f0.md", "/Docs/F0/f2.md", "/Docs/F1/Sub/f3.md", "/Docs/F1/f1.md"
    ]  # fmt: skip
    assert len(notes.index) == 2
    assert len(recorder.files) == 6


def test_a_file_in_two_nested_shares_is_not_moved_on_every_scan(
    rstack: Stack, producer: Celery
) -> None:
    rstack.settings.reconcile_full_walk_seconds = 0  # every scan lists every folder
    rstack.sim.put_file("alice", "/Proj/Sub/x.md", b"# X\nreef knot")
    rstack.sim.share("alice", "/Proj", "bob")
    rstack.sim.share("alice", "/Proj/Sub", "bob")  # bob sees x.md at two paths
    rstack.settle()
    rec = reconciler(rstack, producer)
    rec.scan("bob", DocType.FILE)  # gives bob access, at one of the two paths
    rstack.settle()
    key = f"file:{rstack.sim.file_id('alice', '/Proj/Sub/x.md')}"
    paths = rstack.points(key)[0].payload["paths"]
    # whichever of the two Nextcloud names when the file is read by id, the scan agrees
    for bobs in ("/Sub/x.md", "/Proj/Sub/x.md"):
        rstack.services.store.set_payload(key, path_fields(paths | {"bob": bobs}))
        again = rec.scan("bob", DocType.FILE)
        assert again.index == [] and again.clean, (bobs, again.to_json())


def test_a_missing_document_waits_for_the_grace_period(rstack: Stack) -> None:
    rstack.settings.reconcile_grace_seconds = 600
    fill(rstack, files=3, notes=0)
    rstack.sim.drop_rate = 1.0
    rstack.sim.delete("alice", "/Docs/F1/f1.md")
    recorder = Recorder()
    rec = reconciler(rstack, recorder)
    first = rec.scan("alice", DocType.FILE)
    assert len(first.waiting) == 1 and first.remove == [] and recorder.sent == []
    state = scan_state(rstack, DocType.FILE)
    state.set_missing({k: v - 601 for k, v in state.missing_since().items()})  # time passes
    second = rec.scan("alice", DocType.FILE)
    assert [c.path for c in second.waiting] == []
    assert [c.indexed_path for c in second.remove] == ["/Docs/F1/f1.md"]
    assert len(recorder.sent) == 1


def test_a_file_an_access_rule_blocks_counts_as_missing(rstack: Stack) -> None:
    rstack.settings.reconcile_grace_seconds = 600
    fill(rstack, files=3, notes=0)
    rstack.sim.drop_rate = 1.0
    # an admin's rule (no event, no new etag): a scan sees it once its folder is listed again
    rstack.sim.block_access("alice", "/Docs/F1/f1.md")
    rstack.sim.put_file("alice", "/Docs/F1/new.md", b"# New\nreef")
    recorder = Recorder()
    rec = reconciler(rstack, recorder)
    first = rec.scan("alice", DocType.FILE)
    assert [c.indexed_path for c in first.waiting] == ["/Docs/F1/f1.md"]
    state = scan_state(rstack, DocType.FILE)
    state.set_missing({k: v - 601 for k, v in state.missing_since().items()})  # time passes
    second = rec.scan("alice", DocType.FILE)
    assert [c.indexed_path for c in second.remove] == ["/Docs/F1/f1.md"]


@pytest.mark.parametrize(
    ("key", "value"),
    [(":marker", "not-a-number"), (":held", "{garbage"), (":held", '{"a": 1}')],
)
def test_unreadable_scan_state_is_dropped_not_fatal(rstack: Stack, key: str, value: str) -> None:
    fill(rstack, files=2, notes=2)
    for doc_type in (DocType.FILE, DocType.NOTE):
        state = scan_state(rstack, doc_type)
        rstack.services.redis.set(state.base + key, value)
        rstack.services.redis.hset(state.base + ":missing", "7", "garbage")
        rstack.services.redis.hset(state.base + ":tried", "8", "etag|notatime")
        rstack.services.redis.hset("ncindex:reconcile:last", state.field, "{oops")
        report = reconciler(rstack, Recorder()).scan("alice", doc_type)
        assert report.error is None
        assert state.last() is not None  # recorded anew
        assert state.marker() is None or isinstance(state.marker(), int)  # readable
        assert state.held() is None and "8" not in state.tried()


def test_a_note_in_a_dot_folder_is_a_file_and_scanned_once(rstack: Stack) -> None:
    """Notes 6.0.2 leaves notes in dot-folders out of its list (NotesService::gatherNoteFiles):
    such a note was indexed as a note, so every notes scan found it missing and checked it
    again. It is a file (what the file walk lists), and a second scan finds nothing to do."""
    hidden = rstack.sim.put_file("alice", "/Notes/.attachments.7/inline.md", "# Inline\nkelp")
    rstack.settle()
    assert rstack.points(f"file:{hidden}") and not rstack.points(f"note:{hidden}")
    rstack.reconcile(["alice"])
    rec = reconciler(rstack, None)
    for doc_type in (DocType.NOTE, DocType.FILE):
        report = rec.scan("alice", doc_type, apply=False)
        assert report.index == [] and report.remove == [] and not report.waiting, doc_type


def test_a_dry_run_changes_nothing(rstack: Stack) -> None:
    fill(rstack, files=3, notes=2)
    rstack.sim.drop_rate = 1.0
    rstack.sim.put_file("alice", "/Docs/new.md", "# New\nbeacon")
    rec = reconciler(rstack, None)
    before = dict(rstack.services.redis.hgetall("ncindex:reconcile:last"))
    for _ in range(2):
        report = rec.scan("alice", DocType.FILE, apply=False)
        assert [(c.reason, c.path) for c in report.index] == [("new", "/Docs/new.md")]
        assert report.enqueued == 0 and not report.applied
    assert scan_state(rstack, DocType.FILE).folders() == {}
    assert dict(rstack.services.redis.hgetall("ncindex:reconcile:last")) == before
    # nor does it record an account refused (401), or clear one: the refusal list was written
    keys = rstack.settings.names
    rstack.sim.tree.users["carol"].passwords.clear()  # carol's app password revoked
    rstack.sim.tree.users["carol"].token_logins.clear()
    assert "NextcloudAuthError" in str(rec.scan("carol", DocType.FILE, apply=False).error)
    record_refused(rstack.services.redis, keys, "bob", "an earlier 401")
    assert rec.scan("bob", DocType.FILE, apply=False).error is None
    assert list(refused_accounts(rstack.services.redis, keys)) == ["bob"]


def test_a_share_gives_the_sharee_access_without_embedding_again(rstack: Stack) -> None:
    fill(rstack, files=4, notes=0)
    rstack.sim.share("alice", "/Docs/F1", "bob", "/From Alice")
    embedded = rstack.services.embedder.dense_embedded
    rstack.reconcile(USERS)
    assert rstack.services.embedder.dense_embedded == embedded
    assert differences(ground_truth(rstack, USERS), index_state(rstack)) == {}
    shared = [d for d in index_state(rstack).values() if "user:bob" in d["acl"]]
    assert len(shared) == 2
    assert all(d["paths"]["bob"].startswith("/From Alice/") for d in shared)


def test_deck_cards_and_news_items_are_reconciled(rstack: Stack) -> None:
    sim = rstack.sim  # no Deck card events (Deck < 1.18) and News has none at all
    board = sim.deck_create_board("alice", "Harbour")
    column = sim.deck_create_stack("alice", board, "To do")
    cards = [
        sim.deck_create_card("alice", column, f"Card {i}", f"Paint the hull, part {i}")
        for i in range(3)
    ]
    later = sim.deck_create_stack("alice", board, "Later")
    shelved = sim.deck_create_card("alice", later, "Shelved", "Caulk the deck")
    sim.deck_share_board("alice", board, "bob")
    # bob keeps a board of his own: a listing with no card at all would never remove any
    own = sim.deck_create_stack("bob", sim.deck_create_board("bob", "Bob's"), "Mine")
    sim.deck_create_card("bob", own, "Bob's card", "Varnish the oars")
    feed = sim.news_add_feed("alice", "https://blog.example.test/feed", "Harbour blog")
    items = [
        sim.news_add_item("alice", feed, f"Tides {i}", f"<p>Spring tide {i}</p>") for i in (0, 1)
    ]
    rstack.reconcile(["alice", "bob"])
    state = index_state(rstack)
    assert {f"deck_card:{c}" for c in cards} < {k for k in state if k.startswith("deck_card:")}
    assert all(state[f"deck_card:{c}"]["acl"] == {"user:alice", "user:bob"} for c in cards)
    assert f"deck_card:{shelved}" in state
    assert {k for k in state if k.startswith("news_item:")} == {f"news_item:{i}" for i in items}
    etag = state[f"deck_card:{cards[0]}"]["etag"]

    # Deck's card ETag is the md5 of lastModified in whole seconds: an edit within the second
    # of the card's creation keeps it (as in Deck), so edit in a later second
    created = sim.tree.now()
    wait_until(lambda: sim.tree.now() > created, timeout=3)
    sim.deck_update_card("alice", cards[0], description="Paint the keel")
    sim.deck_archive_card("alice", cards[1])
    sim.deck_unshare_board("alice", board, "bob")
    # a deleted stack's cards still answer their GET (Deck only marks the stack)
    sim.deck_delete_stack("alice", later)
    sim.news_purge_item("alice", items[0])
    rstack.reconcile(["alice", "bob"])
    state = index_state(rstack)
    kept = {f"deck_card:{cards[0]}", f"deck_card:{cards[2]}"}
    assert {k for k in state if k.startswith("deck_card:")} & {
        f"deck_card:{c}" for c in cards
    } == kept
    assert all(state[k]["acl"] == {"user:alice"} for k in kept)
    assert state[f"deck_card:{cards[0]}"]["etag"] != etag
    assert f"deck_card:{shelved}" not in state
    assert {k for k in state if k.startswith("news_item:")} == {f"news_item:{items[1]}"}

    rstack.sim.reset_request_counts()
    rec = reconciler(rstack, Recorder())
    deck_scan = rec.scan("alice", DocType.DECK_CARD)
    news_scan = rec.scan("alice", DocType.NEWS_ITEM)
    assert deck_scan.clean and deck_scan.requests == 2  # boards, one board's stacks
    assert news_scan.clean and news_scan.requests == 1


def test_last_scan_is_recorded_with_the_time_it_was_in_sync(rstack: Stack) -> None:
    fill(rstack, files=2, notes=1)
    started = time.time()
    rstack.reconcile(["alice"])
    state = scan_state(rstack, DocType.FILE)
    last = state.last()
    assert last is not None and last["clean"] and last["in_sync_at"] >= int(started)


def test_a_document_that_cannot_be_indexed_is_not_sent_again_until_it_changes(
    rstack: Stack,
) -> None:
    fill(rstack, files=2, notes=1)
    rstack.sim.drop_rate = 1.0
    rstack.sim.put_file("alice", "/Docs/F1/empty.md", b"")  # no text: never indexed
    rstack.reconcile(["alice"])
    recorder = Recorder()
    rec = reconciler(rstack, recorder)
    again = rec.scan("alice", DocType.FILE)
    assert [c.path for c in again.unindexable] == ["/Docs/F1/empty.md"]
    assert again.clean and recorder.sent == []
    rstack.sim.put_file("alice", "/Docs/F1/empty.md", "# Not empty any more\ncoral")
    changed = rec.scan("alice", DocType.FILE)
    assert [(c.reason, c.path) for c in changed.index] == [("new", "/Docs/F1/empty.md")]
    assert len(recorder.sent) == 1


def test_a_move_inside_a_share_reaches_the_sharee_through_stored_folder_etags(
    rstack: Stack,
) -> None:
    fill(rstack, files=6, notes=0)
    rstack.sim.share("alice", "/Docs/F1", "bob", "/From Alice")
    rstack.reconcile(["alice", "bob"])
    rstack.reconcile(["alice", "bob"])  # clean: folder etags stored
    bob = scan_state(rstack, DocType.FILE, "bob")
    assert "/" in bob.folders() and "/From Alice" in bob.folders()
    rstack.sim.drop_rate = 1.0
    rstack.sim.move("alice", "/Docs/F1/f1.md", "/Docs/F1/Sub/f1-moved.md")
    report = reconciler(rstack, None).scan("bob", DocType.FILE, apply=False)
    # "changed" rather than "moved": the simulator, like Nextcloud's propagator, gives a moved
    # file a new etag
    assert [(c.indexed_path, c.path) for c in report.index] == [
        ("/From Alice/f1.md", "/From Alice/Sub/f1-moved.md")
    ]
    embedded = rstack.services.embedder.dense_embedded
    rstack.reconcile(["alice", "bob"])
    assert differences(ground_truth(rstack, USERS), index_state(rstack)) == {}
    assert rstack.services.embedder.dense_embedded == embedded


def test_an_app_that_is_not_installed_is_skipped_not_failed(rstack: Stack) -> None:
    fill(rstack, files=2, notes=0)
    rstack.sim.faults.set("news", status=404)
    recorder = Recorder()
    report = reconciler(rstack, recorder).scan("alice", DocType.NEWS_ITEM)
    assert report.error is None and report.unavailable is not None
    assert not report.clean and recorder.sent == []
    rstack.sim.faults.set("webdav", status=404)
    files = reconciler(rstack, recorder).scan("alice", DocType.FILE)
    assert files.error is not None and files.unavailable is None and recorder.sent == []


def test_a_scan_of_a_disabled_app_keeps_its_documents(rstack: Stack) -> None:
    """Guard (passes on the simulator before its disabled-app answers were corrected too):
    Notes disabled, its API is an unregistered route — for the client's ``Accept:
    application/json`` an empty 404 (nextcloud/server ``OC::handleRequest``). The scan
    reports the app unavailable, sends nothing and evicts none of the notes it had indexed;
    enabled again, the next scan finds them all in place."""
    fill(rstack, files=2, notes=3)
    rstack.reconcile(["alice"])
    before = index_state(rstack)
    assert sum(key.startswith("note:") for key in before) == 3
    rstack.sim.disable_app("notes")
    recorder = Recorder()
    report = reconciler(rstack, recorder).scan("alice", DocType.NOTE)
    assert report.error is None and report.unavailable is not None
    assert recorder.sent == [] and index_state(rstack) == before
    rstack.sim.enable_app("notes")
    again = reconciler(rstack, recorder).scan("alice", DocType.NOTE)
    assert again.unavailable is None and again.remove == [] and recorder.sent == []


def _recheck(stack: Stack, producer: Celery, user: str, path_owner: str, path: str) -> None:
    """The re-check a verification drop enqueues (``ncindex.index_node``), run by the worker."""
    file_id = stack.sim.file_id(path_owner, path)
    assert file_id is not None
    producer.send_task(
        names.INDEX_NODE, kwargs={"user": user, "file_id": file_id}, queue=names.INDEX
    )
    stack.settle()


def test_a_share_given_back_is_restored_by_the_next_scan_whatever_the_etags(
    rstack: Stack, producer: Celery
) -> None:
    fill(rstack, files=4, notes=0)
    rstack.sim.share("alice", "/Docs/F1", "bob", "/From Alice")
    rstack.reconcile(["alice", "bob"])
    rstack.reconcile(["alice", "bob"])  # clean: folder etags stored
    assert "/From Alice" in scan_state(rstack, DocType.FILE, "bob").folders()
    rstack.sim.drop_rate = 1.0
    # unshared, a search as bob drops the file, its re-check takes bob's access away …
    rstack.sim.unshare("alice", "/Docs/F1", "bob")
    _recheck(rstack, producer, "bob", "alice", "/Docs/F1/f1.md")
    bob_docs = [d for d in index_state(rstack).values() if "user:bob" in d["acl"]]
    assert len(bob_docs) == 1  # f3 still (nobody searched it), f1 gone for bob
    # … and the share comes back: the mount point's own etag (alice's folder) is unchanged
    rstack.sim.share("alice", "/Docs/F1", "bob", "/From Alice")
    rstack.reconcile(["alice", "bob"])
    assert differences(ground_truth(rstack, USERS), index_state(rstack)) == {}
    assert list(scan_state(rstack, DocType.FILE, "bob").lost()) == [
        str(rstack.sim.file_id("alice", "/Docs/F1/f1.md"))
    ]
    rstack.reconcile(["alice", "bob"])  # finds it back in bob's index
    assert scan_state(rstack, DocType.FILE, "bob").lost() == {}


def test_the_files_sharing_app_disabled_takes_the_shares_away_until_enabled(
    rstack: Stack,
) -> None:
    """With files_sharing disabled Nextcloud mounts no user share (its ``MountProvider`` is
    not registered): the shared files leave bob's view, and the folders above the mount
    point report new etags. bob's next scan finds them missing and takes his access away
    (alice keeps hers); enabled again, the next scan gives it back. (The share poll, whose
    route is gone meanwhile, keeps its state: ``test_share_poll``.)"""
    fill(rstack, files=4, notes=0)
    rstack.sim.put_file("bob", "/own.md", "# Own\nbob's own")
    rstack.sim.share("alice", "/Docs/F1", "bob", "/From Alice")
    rstack.settle()
    rstack.reconcile(["alice", "bob"])
    rstack.reconcile(["alice", "bob"])  # clean: folder etags stored

    def bobs_shared() -> list[str]:
        paths = [d["paths"].get("bob", "") for d in index_state(rstack).values()]
        return sorted(p for p in paths if p.startswith("/From Alice/"))

    assert bobs_shared() == ["/From Alice/Sub/f3.md", "/From Alice/f1.md"]
    rstack.sim.disable_app("files_sharing")
    try:
        rstack.reconcile(["alice", "bob"])
        assert bobs_shared() == []
        assert differences(ground_truth(rstack, USERS), index_state(rstack)) == {}
    finally:
        rstack.sim.enable_app("files_sharing")
    rstack.reconcile(["alice", "bob"])
    assert bobs_shared() == ["/From Alice/Sub/f3.md", "/From Alice/f1.md"]
    assert differences(ground_truth(rstack, USERS), index_state(rstack)) == {}


def test_an_access_rule_lifted_is_repaired_by_the_next_scan(
    rstack: Stack, producer: Celery
) -> None:
    fill(rstack, files=3, notes=0)
    rstack.reconcile(["alice"])
    rstack.reconcile(["alice"])  # clean: folder etags stored
    rstack.sim.drop_rate = 1.0
    rstack.sim.block_access("alice", "/Docs/F1/f1.md")  # no event, no etag changes
    _recheck(rstack, producer, "alice", "alice", "/Docs/F1/f1.md")
    assert "file:" + str(rstack.sim.file_id("alice", "/Docs/F1/f1.md")) not in index_state(rstack)
    rstack.sim.block_access("alice", "/Docs/F1/f1.md", blocked=False)  # no etag changes either
    rstack.reconcile(["alice"])
    assert differences(ground_truth(rstack, ["alice"]), index_state(rstack)) == {}


def test_lost_access_is_never_held_as_unindexable(rstack: Stack) -> None:
    fill(rstack, files=4, notes=0)
    rstack.sim.drop_rate = 1.0
    rstack.sim.share("alice", "/Docs/F1", "bob", "/From Alice")
    recorder = Recorder()
    rec = reconciler(rstack, recorder)
    first = rec.scan("bob", DocType.FILE)  # sends the new shares' tasks (recorded, not run)
    assert sorted(c.path for c in first.index) == ["/From Alice/Sub/f3.md", "/From Alice/f1.md"]
    rstack.sim.unshare("alice", "/Docs/F1", "bob")
    # the task's work, run here (the recorder's debounce claims keep the workers "busy")
    f1 = rstack.sim.file_id("alice", "/Docs/F1/f1.md")
    assert f1 is not None
    assert Indexer(rstack.services).index_node("bob", f1).action == "evicted"
    rstack.sim.share("alice", "/Docs/F1", "bob", "/From Alice")  # back, same file etags
    again = rec.scan("bob", DocType.FILE)
    assert [c.path for c in again.index] == ["/From Alice/f1.md"]
    # f3's task never ran and nothing took its access: that one waits as before
    assert [c.path for c in again.unindexable] == ["/From Alice/Sub/f3.md"]


def test_a_scan_repairs_tag_drift_that_no_etag_shows(rstack: Stack) -> None:
    rstack.settings.index_required_tags = ["searchable"]
    rstack.settings.index_excluded_tags = ["secret"]
    searchable = rstack.sim.create_tag("searchable")
    secret = rstack.sim.create_tag("secret")
    paths = [f"/Docs/F{i % 2}/t{i}.md" for i in range(4)]
    for i, path in enumerate(paths):
        rstack.sim.put_file("alice", path, f"# Tagged {i}\nreef {i}")
        rstack.sim.assign_tag("alice", path, searchable)
    rstack.settle()
    rstack.reconcile(["alice"])
    rstack.reconcile(["alice"])  # clean: every folder etag stored
    ids = [rstack.sim.file_id("alice", p) for p in paths]
    assert all(rstack.points(f"file:{i}") for i in ids)
    rstack.sim.drop_rate = 1.0  # the tag events are lost
    rstack.sim.unassign_tag("alice", paths[0], searchable)
    rstack.sim.assign_tag("alice", paths[1], secret)
    report = reconciler(rstack, None).scan("alice", DocType.FILE, apply=False)
    assert sorted((c.reason, c.path) for c in report.index) == [
        ("tags", paths[0]),
        ("tags", paths[1]),
    ]
    assert report.requests == 1 + 1 + 2  # root unchanged; tag ids; one REPORT per tag
    rstack.reconcile(["alice"])
    assert not rstack.points(f"file:{ids[0]}") and not rstack.points(f"file:{ids[1]}")
    assert rstack.points(f"file:{ids[2]}") and rstack.points(f"file:{ids[3]}")
    # and back: tagged again, the excluded tag taken away (no events, no etags)
    rstack.sim.assign_tag("alice", paths[0], searchable)
    rstack.sim.unassign_tag("alice", paths[1], secret)
    again = reconciler(rstack, None).scan("alice", DocType.FILE, apply=False)
    assert sorted((c.reason, c.path) for c in again.index) == [("new", p) for p in paths[:2]]
    rstack.reconcile(["alice"])
    assert all(rstack.points(f"file:{i}") for i in ids)
    assert reconciler(rstack, None).scan("alice", DocType.FILE, apply=False).index == []


def test_a_disabled_account_is_recorded_refused_not_retried_as_an_outage(rstack: Stack) -> None:
    """``occ user:disable carol``: Nextcloud's WebDAV answers her app password 503 (nextcloud/
    server ``apps/dav/lib/Connector/Sabre/Auth.php`` ``check`` wraps the ``LoginException`` of
    ``Session::completeLogin``). Her scan is a refusal — recorded for ``ncindex status`` and
    ``/readyz``, not retried — instead of an outage retried for ever while /status.php says
    Nextcloud is fine."""
    keys = rstack.settings.names
    rstack.sim.put_file("carol", "/Docs/c.md", "# C\ncoral")
    rstack.sim.disable_user("carol")
    report = reconciler(rstack, Recorder()).scan("carol", DocType.FILE, apply=True)
    # a NextcloudAuthError of its own kind (AccountDisabled: not a 401, the app password lives)
    assert report.error is not None and report.error.startswith("AccountDisabled"), report
    assert not report.retryable
    assert list(refused_accounts(rstack.services.redis, keys)) == ["carol"]


def test_a_refused_app_password_is_not_sent_again_until_it_changes(rstack: Stack) -> None:
    """carol's app password is revoked (or carol deleted). Each refused Basic login counts
    against ncindex's address in Nextcloud's brute-force protection (nextcloud/server
    ``lib/private/User/Session.php`` ``logClientIn`` → ``handleLoginFailed`` →
    ``Throttler::registerAttempt('login', …)``), and then every login from that address waits
    up to 25 s before it is checked (``sleepDelayOrThrowOnMax``), then gets 429: scans and
    events must not keep sending it. A new app password is tried at once."""
    sim, keys = rstack.sim, rstack.settings.names
    shared = sim.put_file("alice", "/Docs/s.md", "# S\nsalt")
    sim.tree.users["carol"].passwords.clear()
    sim.tree.users["carol"].token_logins.clear()
    rec = reconciler(rstack, Recorder())

    def refused_logins() -> int:
        return sum(1 for _, _, status in sim.request_log if status == 401)

    first = rec.scan("carol", DocType.FILE, apply=True)
    assert first.error is not None and first.error.startswith("NextcloudAuthError")
    assert refused_logins() == 1
    for doc_type in (DocType.FILE, DocType.NOTE):
        held = rec.scan("carol", doc_type, apply=True)
        assert held.error is not None and held.error.startswith("AccountHeld"), held
        assert not held.retryable
    found = viewers_of(rstack.services, shared)
    assert found.seen == ["alice"] and "carol" not in found.unseen + list(found.failed)
    assert refused_logins() == 1
    assert list(refused_accounts(rstack.services.redis, keys)) == ["carol"]
    assert "credential" not in refused_accounts(rstack.services.redis, keys)["carol"]
    sim.add_app_password("carol", "carol-new-app-password")
    rstack.settings.accounts["carol"] = SecretStr("carol-new-app-password")
    assert rec.scan("carol", DocType.FILE, apply=True).error is None
    assert refused_accounts(rstack.services.redis, keys) == {}


def test_a_task_that_gets_through_after_the_hold_clears_the_refusal(rstack: Stack) -> None:
    """carol's app password is refused once (an account disabled for an hour, a user backend
    that failed): her credential is held back 30 minutes (``ncindex.accounts.held_until``).
    Once the hold ended, an index task of hers gets through with the same credential: her
    refusal entry goes — ``/readyz`` and ``ncindex status`` no longer list her — and so does
    its count, so a later, unrelated refusal is held back 30 minutes again, not an hour
    (before: only a reconcile listing cleared it; the entry and its ``times`` stayed until
    then). A client of an account without an entry writes nothing to Redis after its
    request; an answer of a public path (capabilities) says nothing of the credential and
    clears nothing."""
    sim, keys, services = rstack.sim, rstack.settings.names, rstack.services
    sim.drop_rate = 1.0  # the indexer is driven by hand here
    carol = sim.tree.users["carol"]
    passwords, logins = set(carol.passwords), dict(carol.token_logins)
    carol.passwords.clear()
    carol.token_logins.clear()
    rec = reconciler(rstack, Recorder())
    refused = rec.scan("carol", DocType.FILE, apply=True)
    assert refused.error is not None and refused.error.startswith("NextcloudAuthError")
    first = REFUSED_RECHECK_SECONDS[0]
    raw = services.redis.hget(keys.refused_accounts, "carol")
    entry = json.loads(raw)
    assert entry["times"] == 1
    entry["at"] -= first + 1  # the hold has ended
    services.redis.hset(keys.refused_accounts, "carol", json.dumps(entry))
    carol.passwords |= passwords
    carol.token_logins.update(logins)

    # a public path's answer proves nothing: the entry stays
    client = services.account("carol")
    client.ocs("GET", "/ocs/v2.php/cloud/capabilities")
    assert list(refused_accounts(services.redis, keys)) == ["carol"]

    fid = sim.put_file("carol", "/Docs/c.md", "# C\ncoral")
    assert Indexer(services).index_node("carol", fid).action == "indexed"
    assert refused_accounts(services.redis, keys) == {}

    # the next refusal, whenever it comes, is a first one again: held 30 minutes
    carol.passwords.clear()
    carol.token_logins.clear()
    again = rec.scan("carol", DocType.FILE, apply=True)
    assert again.error is not None and again.error.startswith("NextcloudAuthError")
    raw = services.redis.hget(keys.refused_accounts, "carol")
    at = json.loads(raw)["at"]
    assert json.loads(raw)["times"] == 1
    assert held_until(raw, services.credential_of("carol"), now=at) == at + first

    # an account without an entry: nothing is run after its first answer
    alice = services.account("alice")
    alice.notes_settings()
    assert alice.guard is None and alice.accepted is None


def test_documents_whose_tasks_were_refused_are_sent_again_once_the_account_works(
    rstack: Stack,
) -> None:
    """A scan queues carol's new files, and her app password is revoked in Settings ›
    Security before their tasks run: each task is refused (401), recorded as her account's
    refusal, and indexes nothing. Once she has a new app password configured, the next scan
    sends them again and they are found — before, the scan held them back as "unindexable"
    for a day (its hold for a version a task was already sent for: meant for a file with no
    text, not for a task Nextcloud refused to answer), so ncindex did not recover by itself."""
    sim, keys, services = rstack.sim, rstack.settings.names, rstack.services
    sim.drop_rate = 1.0  # no webhook: the scan alone finds them
    paths = ["/Docs/c1.md", "/Docs/c2.md"]
    ids = [sim.put_file("carol", p, f"# C\ncoral {i}") for i, p in enumerate(paths)]
    recorder = Recorder()
    first = reconciler(rstack, recorder).scan("carol", DocType.FILE, apply=True)
    assert sorted(c.path for c in first.index) == paths and sorted(recorder.files) == ids
    revoke(rstack, "carol")
    for name, kwargs, queue in recorder.sent:
        rstack.celery.send_task(name, kwargs=kwargs, queue=queue)
    rstack.wait_idle()
    sent_again_once_renewed(rstack, ids, paths)
    rstack.reconcile(["carol"])
    assert all(rstack.points(f"file:{i}") for i in ids)
    assert refused_accounts(services.redis, keys) == {}


def test_a_webhook_for_a_revoked_account_keeps_its_document_and_is_not_sent_again(
    rstack: Stack,
) -> None:
    """carol's app password is revoked, then she edits an indexed file: the webhook's task
    is refused (WebDAV 401, Sabre ``NotAuthenticated``). That is not "the file is gone": the
    version indexed stays hers, the refusal is recorded, and not retried; the next edit's
    task sends nothing as her (held back). With a new app password, the next scan indexes
    what she wrote meanwhile. A guard: this held before the change it came with."""
    sim, keys = rstack.sim, rstack.settings.names
    fid = sim.put_file("carol", "/Docs/c.md", "# C\ncoral reef")
    rstack.settle()
    doc_key = f"file:{fid}"
    assert acl(rstack, doc_key) == ["user:carol"]
    carol = sim.tree.users["carol"]
    carol.passwords.clear()
    carol.token_logins.clear()
    sim.reset_request_counts()
    sim.put_file("carol", "/Docs/c.md", "# C\nkelp forest")
    rstack.settle()
    assert sum(1 for r in sim.request_log if r[2] == 401) == 1
    assert list(refused_accounts(rstack.services.redis, keys)) == ["carol"]
    assert acl(rstack, doc_key) == ["user:carol"]
    sim.put_file("carol", "/Docs/c.md", "# C\nsea grass")
    rstack.settle()
    assert sum(1 for r in sim.request_log if r[2] == 401) == 1  # held back: nothing sent
    assert acl(rstack, doc_key) == ["user:carol"]

    sim.add_app_password("carol", "carol-new-app-password")
    rstack.settings.accounts["carol"] = SecretStr("carol-new-app-password")
    rstack.reconcile(["carol"])
    assert refused_accounts(rstack.services.redis, keys) == {}
    assert "sea grass" in " ".join(p.payload.get("text", "") for p in rstack.points(doc_key))


class RunsRefused:
    """A producer whose tasks run at once on the stack's worker, ``user``'s app password
    revoked just before the first: a worker as fast as can be, every task refused before the
    scan that queued it returns."""

    def __init__(self, stack: Stack, user: str) -> None:
        self.stack, self.user = stack, user

    def send_task(self, name: str, **options: Any) -> None:
        revoke(self.stack, self.user)
        self.stack.celery.send_task(name, kwargs=options.get("kwargs"), queue=options.get("queue"))
        self.stack.wait_idle()


def test_documents_whose_tasks_were_refused_before_their_scan_returned_are_sent_again(
    rstack: Stack,
) -> None:
    """As above, but each task is refused while the scan that queued it is still running (a
    fast worker, a scan with more to do after its queueing): the refusal's forgetting must not
    be undone by the scan recording what it sent right after queueing it. Before, the scan's
    ``set_tried`` wrote back the versions the refused tasks had just forgotten, and once carol
    had a new app password the next scan held her new files back as unindexable for a day."""
    sim = rstack.sim
    sim.drop_rate = 1.0  # no webhook: the scan alone finds them
    paths = ["/Docs/c1.md", "/Docs/c2.md"]
    ids = [sim.put_file("carol", p, f"# C\ncoral {i}") for i, p in enumerate(paths)]
    first = reconciler(rstack, RunsRefused(rstack, "carol")).scan("carol", DocType.FILE, apply=True)
    assert sorted(c.path for c in first.index) == paths
    sent_again_once_renewed(rstack, ids, paths)


def revoke(stack: Stack, user: str) -> None:
    """Revoke every app password and login token of ``user`` (Settings › Security)."""
    account = stack.sim.tree.users[user]
    account.passwords.clear()
    account.token_logins.clear()


def sent_again_once_renewed(stack: Stack, ids: list[int], paths: list[str]) -> None:
    """carol's refusal is recorded and none of her files ``ids`` indexed; once she has a new
    app password configured, a scan sends each of them (``paths``) again, none held back as
    unindexable."""
    keys, services = stack.settings.names, stack.services
    assert list(refused_accounts(services.redis, keys)) == ["carol"]
    assert not any(stack.points(f"file:{i}") for i in ids)
    stack.sim.add_app_password("carol", "carol-new-app-password")
    stack.settings.accounts["carol"] = SecretStr("carol-new-app-password")
    again = reconciler(stack, Recorder()).scan("carol", DocType.FILE, apply=False)
    assert sorted(c.path for c in again.index) == paths and again.unindexable == []


def acl(stack: Stack, doc_key: str) -> list[str]:
    """The ``acl`` of ``doc_key``'s first point (``[]`` when the index holds none)."""
    points = stack.points(doc_key)
    return sorted(points[0].payload["acl"]) if points else []


def heard_missing_long_ago(stack: Stack, user: str) -> None:
    """Make the first "does not exist" about ``user`` :data:`CONFIRM_SECONDS` old."""
    key = stack.settings.names.key("missing-user", user)
    assert stack.services.redis.exists(key)
    stack.services.redis.set(key, time.time() - CONFIRM_SECONDS)


def test_a_deleted_users_documents_leave_the_index(rstack: Stack) -> None:
    """``occ user:delete carol``: Nextcloud removes her home without any file event
    (nextcloud/server ``lib/private/User/User.php`` ``delete``) and webhook_listeners cannot
    deliver ``UserDeletedEvent`` (not ``IWebhookCompatibleEvent``); ncindex only sees her app
    password refused. Her refused scan asks Nextcloud as the webhook admin
    (``GET /ocs/v2.php/cloud/users/carol`` → OCS 404 "User does not exist",
    ``AUserDataOCSController::getUserData``) and forgets her: her private file is deleted,
    her file shared with bob too (his share ended with her home), and ``user:carol`` leaves
    the acl of alice's file shared with her. On the old code all three kept her."""
    sim, keys = rstack.sim, rstack.settings.names
    private = sim.put_file("carol", "/Mine/diary.md", "# Diary\nprivate walrus")
    own = sim.put_file("carol", "/Mine/plan.md", "# Plan\nshared narwhal")
    sim.share("carol", "/Mine/plan.md", "bob")
    theirs = sim.put_file("alice", "/Docs/s.md", "# S\nshared salt")
    sim.share("alice", "/Docs/s.md", "carol")
    rstack.settle()
    rstack.reconcile(USERS)
    assert acl(rstack, f"file:{private}") == ["user:carol"]
    assert acl(rstack, f"file:{own}") == ["user:bob", "user:carol"]
    assert acl(rstack, f"file:{theirs}") == ["user:alice", "user:carol"]

    sim.delete_user("carol")
    rec = reconciler(rstack, Recorder())
    first = rec.scan("carol", DocType.FILE, apply=True)
    assert first.error is not None and first.error.startswith("NextcloudAuthError"), first
    # heard once: nothing forgotten until a check CONFIRM_SECONDS later hears it again
    assert (first.user_deleted, first.forgotten) == ("unconfirmed", 0), first.summary()
    assert acl(rstack, f"file:{private}") == ["user:carol"]
    heard_missing_long_ago(rstack, "carol")
    report = rec.scan("carol", DocType.FILE, apply=True)
    assert rstack.points(f"file:{private}") == []
    assert rstack.points(f"file:{own}") == []
    assert acl(rstack, f"file:{theirs}") == ["user:alice"]
    assert (report.user_deleted, report.forgotten) == ("forgotten", 3), report.summary()
    entry = refused_accounts(rstack.services.redis, keys)["carol"]
    assert entry["deleted"]["documents"] == 3
    # the next refused scan (held: nothing sent as carol) asks again: forgetting her took
    # her missing-user mark too (a carol created again starts clean), so it is heard anew,
    # and confirmed later, finding nothing left
    again = rec.scan("carol", DocType.NOTE, apply=True)
    assert again.error is not None and again.error.startswith("AccountHeld"), again
    assert (again.user_deleted, again.forgotten) == ("unconfirmed", 0)
    heard_missing_long_ago(rstack, "carol")
    again = rec.scan("carol", DocType.NOTE, apply=True)
    assert (again.user_deleted, again.forgotten) == ("forgotten", 0)
    assert refused_accounts(rstack.services.redis, keys)["carol"]["deleted"]["documents"] == 3


def test_a_refused_scan_asks_nextcloud_about_the_user_once(rstack: Stack) -> None:
    """carol is deleted in Nextcloud and her scan is refused. Its refusal asked the webhook
    admin why (``GET /ocs/v2.php/cloud/users/carol``, for the entry's ``cause``), and its
    deleted-user check then asked the same again: two identical requests, one answer. The
    check now reads the refusal's answer; it asks itself only when the refusal did not (or
    got no answer) — the next refused scan, held back, still asks and is heard."""
    sim, keys = rstack.sim, rstack.settings.names
    sim.put_file("carol", "/Mine/diary.md", "# Diary\nprivate walrus")
    rstack.settle()
    rstack.reconcile(USERS)
    sim.delete_user("carol")
    sim.request_log.clear()
    rec = reconciler(rstack, Recorder())
    first = rec.scan("carol", DocType.FILE, apply=True)
    assert (first.user_deleted, first.forgotten) == ("unconfirmed", 0), first.summary()
    asked = [p for _, p, _ in sim.request_log if p.startswith("/ocs/v2.php/cloud/users/")]
    assert asked == ["/ocs/v2.php/cloud/users/carol"]
    assert refused_accounts(rstack.services.redis, keys)["carol"]["cause"] == "deleted"
    sim.request_log.clear()
    again = rec.scan("carol", DocType.NOTE, apply=True)  # held: the refusal asks nothing
    assert again.error is not None and again.error.startswith("AccountHeld"), again
    assert again.user_deleted == "unconfirmed"
    asked = [p for _, p, _ in sim.request_log if p.startswith("/ocs/v2.php/cloud/users/")]
    assert asked == ["/ocs/v2.php/cloud/users/carol"]


def redis_of(stack: Stack, user: str) -> tuple[list[str], dict[str, list[str]]]:
    """The stack's Redis keys naming ``user``, the hashes with a field naming ``user`` in its
    name or value (those fields), besides the throughput buckets (per-user counts that expire
    within 15 minutes), and the sets with a member naming ``user`` (those members)."""
    client, mark = stack.services.redis, user.encode()
    keys = sorted(k.decode() for k in client.scan_iter(match=f"*{user}*"))
    fields: dict[str, list[str]] = {}
    for key in client.scan_iter(_type="hash"):
        if b":throughput:" not in key:
            named = [f.decode() for f, v in client.hgetall(key).items() if mark in f + v]
            if named:
                fields[key.decode()] = sorted(named)
    for key in client.scan_iter(_type="set"):
        if members := sorted(m.decode() for m in client.smembers(key) if mark in m):
            fields[key.decode()] = members
    return keys, fields


def test_a_forgotten_user_leaves_no_redis_state_behind(rstack: Stack) -> None:
    """``ncindex forget carol`` after ``occ user:delete carol``, carol scanned before: every
    Redis key of hers goes — scan state (folder etags, external walk time, folders recorded
    unreachable, tried versions, Notes marker), last scans, first indexing, Notes settings,
    lost-access marks, debounce claims, the missing-user mark — and the failing entry of a
    task run as her, so a carol created again starts clean (before: all of it stayed; her
    scans compared the new account with the old one's folder etags, so unchanged-looking
    folders were skipped, and her first indexing showed as done). What stays is her refusal
    entry: it holds the refused credential back from Nextcloud's brute-force protection and
    tells ``ncindex status`` of the deletion."""
    sim, client, keys = rstack.sim, rstack.services.redis, rstack.settings.names
    sim.put_file("carol", "/Mine/diary.md", "# Diary\nprivate walrus")
    sim.put_file("carol", "/Notes/Cat/n.md", "# Note\nanchor")
    theirs = sim.put_file("alice", "/Docs/s.md", "# S\nshared salt")
    sim.share("alice", "/Docs/s.md", "carol")
    sim.mkdir("carol", "/Away")
    sim.make_storage_unavailable("carol", "/Away")  # recorded unreachable by her scan
    rstack.settle()
    rstack.reconcile(USERS)
    indexer = Indexer(rstack.services)
    sim.unshare("alice", "/Docs/s.md", "carol")
    indexer.index_node("carol", theirs)  # her access lost: marked for her scans
    enqueue(Recorder(), client, [index_node("carol", theirs)], 60, keys=keys)  # a claim
    failing = FailingDocuments(client, keys)
    failing.failed(
        f"node:{theirs}", "carol", names.INDEX_NODE, {}, NextcloudUnavailable("503"), retrying=True
    )
    before, before_fields = redis_of(rstack, "carol")
    assert {
        keys.scan_state("file", "carol") + ":folders",
        keys.scan_state("file", "carol") + ":external_walk",
        keys.scan_state("file", "carol") + ":unreachable",
        keys.scan_state("note", "carol") + ":marker",
        keys.lost_access("file", "carol"),
        keys.first_indexing("carol"),
        keys.notes_settings("carol"),
        keys.debounce_prefix + f"index:carol:{theirs}",
    } <= set(before), before
    assert {keys.last_scans, keys.failing, keys.progress_users} <= set(before_fields)

    sim.delete_user("carol")
    found, _ = check_deleted(rstack.services, indexer, "carol", held_back=False, confirm=False)
    assert found is Deleted.FORGOTTEN
    assert redis_of(rstack, "carol") == ([], {keys.refused_accounts: ["carol"]})
    assert redis_of(rstack, "alice")[0] != []  # only carol's went


def test_a_refused_user_is_never_forgotten_on_an_unclear_answer(rstack: Stack) -> None:
    """carol's app password is revoked but she exists (the admin is told her details): her
    documents stay. And while Nextcloud's OCS answers 503 (or times out) nothing is decided
    either: only OCS 404 "User does not exist" evicts."""
    sim = rstack.sim
    private = sim.put_file("carol", "/Mine/diary.md", "# Diary\nprivate walrus")
    rstack.settle()
    rstack.reconcile(["carol"])
    assert acl(rstack, f"file:{private}") == ["user:carol"]
    sim.tree.users["carol"].passwords.clear()
    sim.tree.users["carol"].token_logins.clear()
    rec = reconciler(rstack, Recorder())
    exists = rec.scan("carol", DocType.FILE, apply=True)
    assert (exists.user_deleted, exists.forgotten) == ("exists", 0), exists.summary()
    assert acl(rstack, f"file:{private}") == ["user:carol"]

    sim.delete_user("carol")
    sim.faults.set("ocs", status=503)
    try:
        unclear = rec.scan("carol", DocType.FILE, apply=True)
    finally:
        sim.faults.clear()
    assert (unclear.user_deleted, unclear.forgotten) == ("unknown", 0), unclear.summary()
    assert acl(rstack, f"file:{private}") == ["user:carol"]
    assert "deleted" not in refused_accounts(rstack.services.redis, rstack.settings.names)["carol"]


def test_an_admin_refused_while_asking_about_a_deleted_user_is_held_back(rstack: Stack) -> None:
    """carol is deleted, and the webhook admin's app password is refused too: her refused
    scans cannot ask whether she exists (nothing forgotten). The admin's refusal must be
    recorded like those of its own requests, so the next check holds the credential back
    instead of sending it again with every refused scan of carol (each refused login counts
    against ncindex's address in Nextcloud's brute-force protection: nextcloud/server
    ``lib/private/User/Session.php`` ``logClientIn`` → ``Throttler::registerAttempt``)."""
    sim, keys = rstack.sim, rstack.settings.names
    sim.delete_user("carol")
    sim.tree.users["admin"].passwords.clear()
    sim.tree.users["admin"].token_logins.clear()
    rec = reconciler(rstack, Recorder())
    first = rec.scan("carol", DocType.FILE, apply=True)
    assert (first.user_deleted, first.forgotten) == ("unknown", 0), first.summary()
    assert "admin" in refused_accounts(rstack.services.redis, keys)
    before = sim.request_count()
    again = rec.scan("carol", DocType.NOTE, apply=True)
    assert again.user_deleted == "unknown"
    assert sim.request_count() == before  # carol held, and the admin held: nothing sent


def test_a_deleted_users_deck_boards_leave_the_index_for_everyone(rstack: Stack) -> None:
    """Deck deletes the boards a deleted user owned (nextcloud/deck
    ``lib/Listeners/ParticipantCleanupListener.php`` ``handle``, ``UserDeletedEvent``:
    ``BoardMapper::findAllByOwner`` then ``delete``; no Deck event) and their ACL entries on
    the others. So when carol is forgotten, the card on her board shared with bob leaves
    the index (bob's access ended with her board), while the card on alice's board shared with
    carol and bob only loses ``user:carol``. On the old code bob kept carol's card (until his
    Deck scan)."""
    sim = rstack.sim
    hers = sim.deck_create_board("carol", "Carol's")
    her_card = sim.deck_create_card(
        "carol", sim.deck_create_stack("carol", hers, "To do"), "Walrus", "Feed the walrus"
    )
    sim.deck_share_board("carol", hers, "bob")
    theirs = sim.deck_create_board("alice", "Alice's")
    their_card = sim.deck_create_card(
        "alice", sim.deck_create_stack("alice", theirs, "To do"), "Salt", "Buy salt"
    )
    sim.deck_share_board("alice", theirs, "carol")
    sim.deck_share_board("alice", theirs, "bob")
    rstack.reconcile(USERS)
    assert acl(rstack, f"deck_card:{her_card}") == ["user:bob", "user:carol"]
    assert acl(rstack, f"deck_card:{their_card}") == ["user:alice", "user:bob", "user:carol"]

    sim.delete_user("carol")
    rec = reconciler(rstack, Recorder())
    assert rec.scan("carol", DocType.DECK_CARD, apply=True).user_deleted == "unconfirmed"
    heard_missing_long_ago(rstack, "carol")
    report = rec.scan("carol", DocType.DECK_CARD, apply=True)
    assert report.user_deleted == "forgotten", report.summary()
    assert rstack.points(f"deck_card:{her_card}") == []
    assert acl(rstack, f"deck_card:{their_card}") == ["user:alice", "user:bob"]


def test_a_folder_whose_storage_cannot_be_reached_fails_nothing_and_keeps_its_files(
    rstack: Stack,
) -> None:
    """An external storage whose server is away is still listed in its parent, and its
    PROPFIND answers 503 "Storage is temporarily not available" (nextcloud/server
    apps/dav/lib/Connector/Sabre/ObjectTree.php getNodeForPath): that answer was an outage of
    Nextcloud, so every scan of the user failed (retried, failing again) for as long as the
    storage stayed away. The walk now skips the folder and keeps what is indexed below it."""
    fill(rstack, files=4, notes=0)
    rstack.sim.drop_rate = 1.0
    rstack.settings.reconcile_full_walk_seconds = 0  # every scan lists every folder
    rstack.reconcile(["alice"])
    f1 = {
        f"file:{rstack.sim.file_id('alice', p)}" for p in ("/Docs/F1/f1.md", "/Docs/F1/Sub/f3.md")
    }
    assert f1 <= set(index_state(rstack))
    rstack.sim.make_storage_unavailable("alice", "/Docs/F1")
    new = rstack.sim.put_file("alice", "/Docs/F0/new.md", b"# New\nkelp")
    rstack.reconcile(["alice"])
    assert {f"file:{new}", *f1} <= set(index_state(rstack))
    rstack.sim.make_storage_unavailable("alice", "/Docs/F1", unavailable=False)
    rstack.sim.put_file("alice", "/Docs/F1/Sub/f3.md", b"# File 3\nchanged meanwhile")
    rstack.reconcile(["alice"])
    assert differences(ground_truth(rstack, ["alice"]), index_state(rstack)) == {}


def test_an_account_without_a_notes_folder_gets_none_from_a_scan(rstack: Stack) -> None:
    """The Notes list creates the notes folder of a user who never opened Notes (nextcloud/notes
    lib/Controller/Helper.php getNotesAndCategories: NotesService::getAll with
    $autoCreateNotesFolder; lib/Service/NoteUtil.php getOrCreateNotesFolder newFolder), so
    every scanned account found an empty "Notes" folder in its files. The scan now asks
    WebDAV first (PROPFIND Depth 0 of the folder GET /settings names, which creates none):
    missing, the account has no notes, and a folder deleted with its notes indexed takes them
    out as a deleted folder's files go (held by the empty-listing guard until a second scan
    agrees)."""
    fill(rstack, files=2, notes=0)
    rec = reconciler(rstack, Recorder())
    report = rec.scan("alice", DocType.NOTE)
    assert report.error is None and report.listed == 0, report.summary()
    assert rstack.sim.node("alice", "/Notes") is None

    fill(rstack, files=0, notes=2)
    rstack.sim.drop_rate = 1.0  # from here on only the scans see changes
    assert rec.scan("alice", DocType.NOTE).listed == 2
    rstack.sim.delete("alice", "/Notes")
    first = rec.scan("alice", DocType.NOTE)
    assert (first.guard, len(first.held), first.remove) == ("empty_listing", 2, [])
    second = rec.scan("alice", DocType.NOTE)
    assert len(second.remove) == 2 and not second.held, second.summary()
    assert rstack.sim.node("alice", "/Notes") is None


def move_notes_folder(stack: Stack, user: str, target: str) -> None:
    """``user``'s notes folder, ``/Notes`` and held in ncindex's cache of their Notes
    settings, is moved in Files to ``target`` and picked there in the Notes app
    (``PUT /settings``: nextcloud/notes ``SettingsService::setPublic`` stores the new
    ``notesPath`` and moves nothing); the events are not delivered."""
    client = stack.services.account(user)
    assert notes_settings(stack.services, client).notes_path == "Notes"  # cached now
    stack.sim.drop_rate = 1.0
    stack.sim.move(user, "/Notes", target)
    answer = client.request(
        "PUT", f"{NOTES_API}/settings", json={"notesPath": target}, headers=API_HEADERS
    )
    assert answer.json()["notesPath"] == target.strip("/")


def test_a_notes_folder_moved_and_picked_anew_is_not_taken_for_gone(rstack: Stack) -> None:
    """For the five minutes ncindex kept the old folder in its cache of the user's Notes
    settings, a notes scan found it missing (404) and took every note for gone: held by the
    empty-listing guard, then removed by the second scan and indexed again once the cache
    expired. The scan now asks the settings again before it believes a cached folder
    missing, and lists the notes of the folder the Notes app uses."""
    fill(rstack, files=0, notes=3)
    rstack.sim.drop_rate = 1.0
    rstack.reconcile(["alice"])
    move_notes_folder(rstack, "alice", "/Journal")
    report = reconciler(rstack, Recorder()).scan("alice", DocType.NOTE)
    assert report.listed == 3 and report.remove == [] and not report.held, report.summary()
    assert report.requests == 3  # the cached folder, the picked one, the Notes list
    assert notes_settings(rstack.services, rstack.services.account("alice")).notes_path == (
        "Journal"
    )


def test_a_note_reread_while_the_cached_notes_folder_is_old_stays_a_note(rstack: Stack) -> None:
    """A note re-read in the five minutes its user's old notes folder was still cached (the
    moved folder's event, a scan's task) was outside that folder, so taken for a file: the
    note was evicted and a file indexed in its place, until a scan after the cache expired
    turned it back. A note is now taken away only on the Notes settings asked anew."""
    fill(rstack, files=0, notes=2)
    note = rstack.sim.file_id("alice", "/Notes/Cat/n0.md")
    assert f"note:{note}" in index_state(rstack)
    move_notes_folder(rstack, "alice", "/Journal")
    Indexer(rstack.services).index_node("alice", note)
    held = index_state(rstack)
    assert f"file:{note}" not in held
    assert held[f"note:{note}"]["paths"] == {"alice": "/Journal/Cat/n0.md"}


def test_a_notes_folder_whose_storage_cannot_be_reached_keeps_its_notes(rstack: Stack) -> None:
    """A notes folder on an external storage files_external holds as failed (a FailedStorage
    mount: nextcloud/server lib/private/Files/Cache/FailedCache.php, an empty folder) made
    the Notes list answer 200 [], and every indexed note of the user went, after the grace
    period and the second scan the empty-listing guard waits for. The scan now asks WebDAV
    first: 503 "Storage is temporarily not available" (apps/dav ObjectTree::getNodeForPath)
    skips the Notes list for this scan and keeps what is indexed, as the file walk keeps an
    unreachable folder's files."""
    fill(rstack, files=0, notes=3)
    rstack.sim.drop_rate = 1.0
    rstack.reconcile(["alice"])
    notes = {k for k in index_state(rstack) if k.startswith("note:")}
    assert len(notes) == 3
    rec = reconciler(rstack, Recorder())
    rstack.sim.make_storage_unavailable("alice", "/Notes", failed=True)
    for _ in range(2):
        report = rec.scan("alice", DocType.NOTE)
        assert (report.remove, report.held, report.waiting) == ([], [], []), report.summary()
        assert report.error is None and report.unreachable == 1, report.summary()
    assert notes <= set(index_state(rstack))
    rstack.sim.make_storage_unavailable("alice", "/Notes", unavailable=False)
    back = rec.scan("alice", DocType.NOTE)
    assert back.clean and back.listed == 3 and back.unreachable == 0, back.summary()


@pytest.mark.parametrize("page_requests", [None, 1], ids=["one_page", "paged"])
def test_a_storage_that_answers_again_is_walked_by_the_next_scan(
    rstack: Stack, page_requests: int | None
) -> None:
    """A folder skipped because its storage answered 503 "Storage is temporarily not
    available" (nextcloud/server apps/dav/lib/Connector/Sabre/ObjectTree.php getNodeForPath)
    changed no etag when it came back, nor did a file put on it meanwhile (View.php
    getCacheEntry: noticed only when its folder is looked at), so the scans after stopped at
    the root's unchanged etag and the file waited for the next external or full walk. The
    scans now record the folders they skipped so (Redis, with the user's scan state), ask
    each of them once per scan whether it answers (PROPFIND Depth 0; not a walk while it
    stays broken: two requests for an otherwise unchanged account) and walk those that do,
    whatever their etags, and the folders above them."""
    rstack.settings.reconcile_external_walk_seconds = 86_400
    if page_requests is not None:
        rstack.settings.reconcile_page_requests = page_requests
    rstack.sim.external_storage("Ext", ["alice"])
    rstack.sim.put_file("alice", "/Ext/Reports/q1.md", "# Q1\nkelp")
    fill(rstack, files=2, notes=0)
    rstack.sim.drop_rate = 1.0
    rstack.reconcile(["alice"])
    rstack.reconcile(["alice"])  # clean: every folder etag stored
    state = scan_state(rstack, DocType.FILE)
    assert state.unreachable() == {}
    rstack.sim.make_storage_unavailable("alice", "/Ext")
    state.set_full_walk_at(0)  # the skip happens on a full walk ...
    rstack.reconcile(["alice"])
    assert set(state.unreachable()) == {"/Ext"}
    since = state.unreachable()["/Ext"]
    for _ in range(2):  # ... and the scans after, while it stays away, walk nothing
        rstack.sim.reset_request_counts()
        rstack.reconcile(["alice"])
        # /Ext, then / Depth 0; and the notes folder
        assert rstack.sim.request_count("webdav", "PROPFIND") == 2 + NOTES_FOLDER
        assert state.unreachable() == {"/Ext": since}
    new = rstack.sim.add_unnoticed("alice", "/Ext/Reports/q2.md", "# Q2\nreef")
    rstack.sim.make_storage_unavailable("alice", "/Ext", unavailable=False)
    rstack.reconcile(["alice"])
    assert f"file:{new}" in index_state(rstack)
    assert differences(ground_truth(rstack, ["alice"]), index_state(rstack)) == {}
    assert state.unreachable() == {}
    rstack.sim.reset_request_counts()
    rstack.reconcile(["alice"])  # the folders above the new file, dirty until now
    rstack.sim.reset_request_counts()
    rstack.reconcile(["alice"])
    # back to the root's etag; and the notes scan's PROPFIND of the notes folder
    assert rstack.sim.request_count("webdav", "PROPFIND") == 1 + NOTES_FOLDER


def test_asking_unreachable_folders_again_keeps_to_the_page_request_limit(rstack: Stack) -> None:
    """The folders recorded unreachable are asked again (PROPFIND Depth 0) at the start of a
    scan, before its walk: each request counts against ``reconcile_page_requests``, as every
    request of a page does (ListingPages.next: "at most limit requests"). Before, every
    recorded folder was asked on the first page, whatever the limit: three away storages and
    a limit of two made a first page of four requests. Now a page asks at most ``limit - 1``
    (the root's Depth 0 is the last), the longest away first; the others stay recorded, and
    the next external walk walks them whatever their etags."""
    rstack.settings.reconcile_external_walk_seconds = 86_400
    rstack.settings.reconcile_page_requests = 2
    for name in ("ExtA", "ExtB", "ExtC"):
        rstack.sim.external_storage(name, ["alice"])
        rstack.sim.put_file("alice", f"/{name}/r.md", f"# {name}\nkelp")
    fill(rstack, files=2, notes=0)
    rstack.sim.drop_rate = 1.0
    rstack.reconcile(["alice"])
    rstack.reconcile(["alice"])
    state = scan_state(rstack, DocType.FILE)
    for name in ("ExtA", "ExtB", "ExtC"):
        rstack.sim.make_storage_unavailable("alice", f"/{name}")
    state.set_full_walk_at(0)
    rstack.reconcile(["alice"])
    assert set(state.unreachable()) == {"/ExtA", "/ExtB", "/ExtC"}
    first = ListingPages(state, rstack.settings.reconcile_page_requests)
    report = reconciler(rstack, Recorder()).scan("alice", DocType.FILE, pages=first)
    assert report.requests <= 2, report.summary()
    first.discard()
    rstack.reconcile(["alice"])  # whole scans: each asks one, the others stay recorded
    assert set(state.unreachable()) == {"/ExtA", "/ExtB", "/ExtC"}
    rstack.sim.make_storage_unavailable("alice", "/ExtC", unavailable=False)
    new = rstack.sim.add_unnoticed("alice", "/ExtC/q2.md", "# Q2\nreef")
    state.set_external_walk_at(0)  # one not asked is walked by the external walk
    rstack.reconcile(["alice"])
    assert f"file:{new}" in index_state(rstack)
    assert set(state.unreachable()) == {"/ExtA", "/ExtB"}


def test_a_document_on_a_storage_that_cannot_be_reached_is_still_found_verified(
    rstack: Stack,
) -> None:
    """What a searching user sees of a document on a storage that answers 503 "Storage is
    temporarily not available" — a federated share whose server is away, or gone for good
    (apps/files_sharing/lib/External/Storage.php checkStorageAvailability: no Nextcloud at
    the remote is StorageNotAvailableException, the share is kept): the scans keep it and
    report the folder (unreachable_folders), and the search shows it verified, not
    fail-open — Nextcloud's SEARCH still answers it from its file cache (the Availability
    wrapper, lib/private/Files/Storage/Wrapper/Availability.php, does not wrap getCache),
    as its own search does; the mount is still the user's. It leaves the index when the
    mount does (test_a_removed_storage_is_evicted_and_forgotten)."""
    rstack.sim.federated_share("Remote", "alice")
    doc = rstack.sim.put_file("alice", "/Remote/minutes.md", "# Minutes\nwalrus committee")
    fill(rstack, files=2, notes=0)
    rstack.sim.drop_rate = 1.0
    rstack.reconcile(["alice"])
    rstack.sim.make_storage_unavailable("alice", "/Remote")
    scan_state(rstack, DocType.FILE).set_full_walk_at(0)
    report = reconciler(rstack, Recorder()).scan("alice", DocType.FILE)
    assert report.summary()["unreachable_folders"] == 1 and not report.remove, report.summary()
    body = rstack.search_as("alice", "walrus committee")
    found = [r for r in body["results"] if r["doc_id"] == str(doc)]
    assert found and found[0]["verified"] and found[0]["path"] == "/Remote/minutes.md"
    assert body["verification"]["errors"] == 0 and body["verification"]["dropped"] == 0


def test_a_document_on_a_failed_external_storage_is_hidden_and_comes_back(rstack: Stack) -> None:
    """An external storage files_external has marked unavailable is mounted as a
    FailedStorage until its next recheck (apps/files_external/lib/Config/ConfigAdapter.php
    getAvailableStorages; Availability::RECHECK_TTL_SEC 600), whose FailedCache answers no
    SEARCH (lib/private/Files/Cache/FailedCache.php searchQuery): a searching user does not
    see its documents (verify-on-read drops them, as Nextcloud's own search leaves them
    out), and the re-check by id removes their access; once the storage answers again the
    next scan indexes them again (the folder recorded unreachable, and the lost-access
    marks, walk it)."""
    rstack.sim.external_storage("Ext", ["alice"])
    doc = rstack.sim.put_file("alice", "/Ext/minutes.md", "# Minutes\nwalrus committee")
    fill(rstack, files=2, notes=0)
    rstack.sim.drop_rate = 1.0
    rstack.reconcile(["alice"])
    rstack.reconcile(["alice"])
    rstack.sim.make_storage_unavailable("alice", "/Ext", failed=True)
    body = rstack.search_as("alice", "walrus committee")
    assert str(doc) not in [r["doc_id"] for r in body["results"]]
    assert body["verification"]["dropped"] == 1, body["verification"]
    rstack.wait_idle()  # the re-check by id the drop sent
    assert f"file:{doc}" not in index_state(rstack)
    scan_state(rstack, DocType.FILE).set_full_walk_at(0)
    rstack.reconcile(["alice"])  # skips /Ext, records it
    assert f"file:{doc}" not in index_state(rstack)
    rstack.sim.make_storage_unavailable("alice", "/Ext", unavailable=False)
    rstack.reconcile(["alice"])
    assert f"file:{doc}" in index_state(rstack)
    assert rstack.found("alice", "walrus committee", f"file:{doc}") is not None


@pytest.mark.parametrize("away", [False, True], ids=["reachable", "away"])
@pytest.mark.parametrize("kind", ["external", "federated"])
def test_a_removed_storage_is_evicted_and_forgotten(rstack: Stack, kind: str, away: bool) -> None:
    """An external storage the admin removes (or takes from the user) is no longer mounted
    for them (nextcloud/server apps/files_external/lib/Config/ConfigAdapter.php
    getMountsForUser mounts only the configured storages; StoragesService::removeStorage
    drops its file cache), nor is a federated share Nextcloud removes once its server says
    the share is gone (apps/files_sharing/lib/External/Storage.php
    checkStorageAvailability → Manager::removeShare): it is gone from its parent's listing
    and from SEARCH, so the next scan removes the user's access to what was indexed on it,
    and the record of it as unreachable (when it was away as it was removed) is dropped."""
    rstack.settings.reconcile_external_walk_seconds = 86_400
    if kind == "external":
        rstack.sim.external_storage("Ext", ["alice"])
    else:
        rstack.sim.federated_share("Ext", "alice")
    on_it = rstack.sim.put_file("alice", "/Ext/Reports/q1.md", "# Q1\nkelp")
    fill(rstack, files=4, notes=0)
    rstack.sim.drop_rate = 1.0
    rstack.reconcile(["alice"])
    rstack.reconcile(["alice"])
    assert f"file:{on_it}" in index_state(rstack)
    state = scan_state(rstack, DocType.FILE)
    if away:
        rstack.sim.make_storage_unavailable("alice", "/Ext")
        state.set_full_walk_at(0)
        rstack.reconcile(["alice"])
        assert f"file:{on_it}" in index_state(rstack)  # kept while it is away
        assert set(state.unreachable()) == {"/Ext"}
    if kind == "external":
        rstack.sim.external_storage("Ext", [])
    else:
        rstack.sim.remove_federated_share("Ext")
    rstack.reconcile(["alice"])
    assert f"file:{on_it}" not in index_state(rstack)
    assert differences(ground_truth(rstack, ["alice"]), index_state(rstack)) == {}
    assert state.unreachable() == {}


@pytest.mark.parametrize(
    ("kind", "mount", "page_requests"),
    [("external", "Ext", None), ("external", "Mounts/Ext", 1), ("federated", "Remote", None)],
)
def test_a_file_put_on_an_external_storage_outside_nextcloud_is_found_by_the_next_scan(
    rstack: Stack, kind: str, mount: str, page_requests: int | None
) -> None:
    """A file written straight to an external storage (not through Nextcloud) fires no event
    and changes no etag the user's folders show: Nextcloud notices it only when its folder is
    looked at (lib/private/Files/View.php getCacheEntry: the storage's watcher), and the
    mount root's etag reaches the folders above from the file cache alone (View::getFileInfo
    → addSubMounts). With the root's etag unchanged every scan stopped at one request, so the
    file waited for the daily full walk. Folders on an external storage (nc:mount-type
    external, apps/files_external/lib/Config/ExternalMountPoint.php getMountType) and those
    above them are now walked at every scan — across pages too (a folder above kept
    unsettled on a later page than its own). A federated share's storage behaves alike
    (apps/files_sharing/lib/External/Storage.php hasUpdated: the remote root's etag, when
    looked at); it is known by nc:is-federated, its mount type being a local share's.
    reconcile_external_walk_seconds 0 walks them so at every scan."""
    rstack.settings.reconcile_external_walk_seconds = 0
    if page_requests is not None:
        rstack.settings.reconcile_page_requests = page_requests
    rstack.sim.mkdir("alice", "/Mounts")
    if kind == "external":
        rstack.sim.external_storage(mount, ["alice"])
    else:
        rstack.sim.federated_share(mount, "alice")
    rstack.sim.put_file("alice", f"/{mount}/Reports/q1.md", "# Q1\nkelp")
    fill(rstack, files=2, notes=0)
    rstack.sim.drop_rate = 1.0
    rstack.reconcile(["alice"])
    rstack.reconcile(["alice"])  # clean: every folder etag stored
    assert differences(ground_truth(rstack, ["alice"]), index_state(rstack)) == {}
    root = rstack.sim.node("alice", "/")
    assert root is not None
    etag = root.etag
    new = rstack.sim.add_unnoticed("alice", f"/{mount}/Reports/q2.md", "# Q2\nreef")
    assert root.etag == etag  # nothing above shows it
    rstack.reconcile(["alice"])
    assert f"file:{new}" in index_state(rstack)
    assert differences(ground_truth(rstack, ["alice"]), index_state(rstack)) == {}


@pytest.mark.parametrize(("mount", "page_requests"), [("Ext", None), ("Mounts/Ext", 1)])
def test_an_external_storage_is_walked_whatever_its_etags_once_per_external_walk_period(
    rstack: Stack, mount: str, page_requests: int | None
) -> None:
    """Walking the folders on and above an external storage at every scan cost a PROPFIND
    per folder, scan and user (and Nextcloud a look at the remote storage for each): a share
    of 10,000 folders mounted for 100 users, a million requests per scan period. They are
    walked whatever their etags once every reconcile_external_walk_seconds now, decided when
    a scan starts and kept across its pages; the scans between make only the requests their
    etags call for (one Depth 0 request with the root's etag unchanged)."""
    period = 3600
    rstack.settings.reconcile_external_walk_seconds = period
    if page_requests is not None:
        rstack.settings.reconcile_page_requests = page_requests
    rstack.sim.mkdir("alice", "/Mounts")
    rstack.sim.external_storage(mount, ["alice"])
    rstack.sim.put_file("alice", f"/{mount}/Reports/Q/q1.md", "# Q1\nkelp")
    fill(rstack, files=2, notes=0)
    rstack.sim.drop_rate = 1.0
    rstack.reconcile(["alice"])
    rstack.reconcile(["alice"])  # clean: every folder etag stored
    assert differences(ground_truth(rstack, ["alice"]), index_state(rstack)) == {}
    new = rstack.sim.add_unnoticed("alice", f"/{mount}/Reports/Q/q2.md", "# Q2\nreef")
    rstack.sim.reset_request_counts()
    rstack.reconcile(["alice"])  # within the period: the etags decide
    assert rstack.sim.request_count("webdav", "PROPFIND") == 1 + NOTES_FOLDER
    assert f"file:{new}" not in index_state(rstack)
    state = scan_state(rstack, DocType.FILE)
    state.set_external_walk_at(time.time() - period)  # an hour on
    rstack.sim.reset_request_counts()
    rstack.reconcile(["alice"])
    # /, the folders down to the storage's and every folder on it
    walked = 1 + len(mount.split("/")) + 2
    assert rstack.sim.request_count("webdav", "PROPFIND") == walked + NOTES_FOLDER
    assert f"file:{new}" in index_state(rstack)
    assert differences(ground_truth(rstack, ["alice"]), index_state(rstack)) == {}
    assert time.time() - (state.external_walk_at() or 0) < 60  # the next one an hour away
    rstack.reconcile(["alice"])  # walks the folders above the new file, dirty until now
    rstack.sim.reset_request_counts()
    rstack.reconcile(["alice"])
    assert rstack.sim.request_count("webdav", "PROPFIND") == 1 + NOTES_FOLDER
