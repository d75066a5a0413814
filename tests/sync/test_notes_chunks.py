"""The Notes list paged by its chunk cursor: only its last chunk names every note
(nextcloud/notes ``lib/Controller/NotesApiController.php`` ``index`` adds ``{"id"}`` of each
note not in the chunk), so a note deleted after an earlier chunk listed it is judged by the
last one — in one listing and across the pages of a scan kept in Redis. A note changed after
its chunk comes again, whole, in a later one (``Helper::getNotesAndCategories`` orders the
chunks by the meta ``lastUpdate``), and that later entry is the one kept."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
import redis

from ncindex.documents import DocType
from ncindex.names import Names
from ncindex.nextcloud.client import NextcloudClient
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.sources.base import Listing, Source
from ncindex.sources.registry import SOURCES
from ncindex.sync.paging import ListingPages
from ncindex.sync.reconcile import ScanState


class _Context:
    """What the Notes listing reads of its context: its settings (one note a chunk, keys in
    the namespace of the scan state's user) and its Redis, where the user's Notes settings
    are cached (under :meth:`~ncindex.names.Names.notes_settings`)."""

    def __init__(self, state: ScanState) -> None:
        self.redis = state.redis
        namespace = state.field.split(":")[0]  # the test's own user id, "alice-<hex>"
        self.settings = Settings(reconcile_notes_chunk_size=1, namespace=namespace)


class _Clock:
    """A clock the test moves: the Notes meta ``lastUpdate`` is in whole seconds."""

    def __init__(self) -> None:
        self.now = 1_780_000_000.0

    def __call__(self) -> float:
        return self.now


Served = tuple[NextcloudSimulator, _Clock, NextcloudClient, ScanState]


@pytest.fixture
def clocked(redis_url: str) -> Iterator[Served]:
    clock = _Clock()
    sim = NextcloudSimulator(seed=1, clock=clock)
    sim.add_user("alice", "alice-pw", "Alice Adams")
    client = redis.Redis.from_url(redis_url)
    state = ScanState(client, f"alice-{uuid.uuid4().hex[:8]}", DocType.NOTE, Names())
    with serve_simulator(sim) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        yield sim, clock, NextcloudClient.for_account(http, "alice", "alice-pw"), state
    for key in client.scan_iter(state.base + "*"):
        client.delete(key)
    client.delete(Names(state.field.split(":")[0]).notes_settings("alice"))
    client.close()
    sim.close()


@pytest.fixture
def notes(clocked: Served) -> tuple[NextcloudSimulator, NextcloudClient, ScanState]:
    sim, _, client, state = clocked
    return sim, client, state


def _three_notes(sim: NextcloudSimulator) -> list[str]:
    return [str(sim.put_file("alice", f"/Notes/N{i}.md", f"# N{i}".encode())) for i in range(3)]


def test_a_note_deleted_after_its_chunk_is_not_listed(notes) -> None:
    sim, client, state = notes
    ids = _three_notes(sim)
    source = SOURCES[DocType.NOTE]
    first = source.list(_Context(state), client, state, limit=2)  # PROPFIND, a chunk
    assert first.cursor is not None and set(first.docs) == {ids[0]}
    sim.delete("alice", "/Notes/N0.md")
    done = source.list(_Context(state), client, state, resume=first)
    assert done.cursor is None and set(done.docs) == set(ids[1:])


def test_a_note_deleted_after_its_page_is_not_in_the_paged_listing(notes) -> None:
    sim, client, state = notes
    ids = _three_notes(sim)
    source = SOURCES[DocType.NOTE]
    pages = ListingPages(state, limit=2)  # the first: the folder's PROPFIND and a chunk
    page, whole = pages.next(source, _Context(state), client, state)
    assert whole is None and set(page.docs) == {ids[0]}
    sim.delete("alice", "/Notes/N0.md")
    while whole is None:
        page, whole = pages.next(source, _Context(state), client, state)
    assert set(whole.docs) == set(ids[1:])
    assert whole.docs[ids[1]].etag is not None  # listed whole by an earlier page


def _page_through(
    pages: ListingPages, source: Source, client: NextcloudClient, state: ScanState
) -> Listing:
    whole = None
    while whole is None:
        _, whole = pages.next(source, _Context(state), client, state)
    return whole


def test_a_note_changed_after_its_page_is_listed_as_it_is_now(clocked) -> None:
    """nextcloud/notes ``Helper::getNotesAndCategories`` orders the chunks by the meta
    ``lastUpdate`` (then id), which ``MetaService::updateIfNeeded`` moves to now when a
    note's etag changes: a note edited after its chunk was listed comes again, whole, in a
    later chunk, with its new etag — the one the paged listing must keep."""
    sim, clock, client, state = clocked
    ids = _three_notes(sim)
    source = SOURCES[DocType.NOTE]
    pages = ListingPages(state, limit=2)  # the first: the folder's PROPFIND and a chunk
    page, whole = pages.next(source, _Context(state), client, state)
    assert whole is None and set(page.docs) == {ids[0]}
    before = page.docs[ids[0]].etag
    clock.now += 5
    sim.put_file("alice", "/Notes/N0.md", b"# N0\n\nedited")
    whole = _page_through(pages, source, client, state)
    note = client.get_note(int(ids[0]))
    assert note is not None
    now = note.etag
    assert now != before
    assert whole.docs[ids[0]].etag == now


def test_a_note_renamed_after_its_page_is_listed_at_its_new_path_only(clocked) -> None:
    """A note renamed after its chunk was listed (its title is in its etag:
    ``MetaService::generateEtag``) comes again in a later chunk at its new ``internalPath``;
    the old path is gone and must not stay with it."""
    sim, clock, client, state = clocked
    ids = _three_notes(sim)
    source = SOURCES[DocType.NOTE]
    pages = ListingPages(state, limit=2)  # the first: the folder's PROPFIND and a chunk
    page, whole = pages.next(source, _Context(state), client, state)
    assert whole is None and page.docs[ids[0]].path == "/Notes/N0.md"
    clock.now += 5
    sim.move("alice", "/Notes/N0.md", "/Notes/Renamed.md")
    whole = _page_through(pages, source, client, state)
    seen = whole.docs[ids[0]]
    assert seen.path == "/Notes/Renamed.md" and not seen.at("/Notes/N0.md")
