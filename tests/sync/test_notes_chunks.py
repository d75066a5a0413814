"""The Notes list paged by its chunk cursor: only its last chunk names every note
(nextcloud/notes ``lib/Controller/NotesApiController.php`` ``index`` adds ``{"id"}`` of each
note not in the chunk), so a note deleted after an earlier chunk listed it is judged by the
last one — in one listing and across the pages of a scan kept in Redis."""

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
from ncindex.sources.registry import SOURCES
from ncindex.sync.paging import ListingPages
from ncindex.sync.reconcile import ScanState


class _Context:
    """What the Notes listing reads of its context: its settings (one note a chunk)."""

    settings = Settings(reconcile_notes_chunk_size=1)


@pytest.fixture
def notes(redis_url: str) -> Iterator[tuple[NextcloudSimulator, NextcloudClient, ScanState]]:
    sim = NextcloudSimulator(seed=1)
    sim.add_user("alice", "alice-pw", "Alice Adams")
    client = redis.Redis.from_url(redis_url)
    state = ScanState(client, f"alice-{uuid.uuid4().hex[:8]}", DocType.NOTE, Names())
    with serve_simulator(sim) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        yield sim, NextcloudClient.for_account(http, "alice", "alice-pw"), state
    for key in client.scan_iter(state.base + "*"):
        client.delete(key)
    client.close()
    sim.close()


def _three_notes(sim: NextcloudSimulator) -> list[str]:
    return [str(sim.put_file("alice", f"/Notes/N{i}.md", f"# N{i}".encode())) for i in range(3)]


def test_a_note_deleted_after_its_chunk_is_not_listed(notes) -> None:
    sim, client, state = notes
    ids = _three_notes(sim)
    source = SOURCES[DocType.NOTE]
    first = source.list(_Context(), client, state, limit=1)
    assert first.cursor is not None and set(first.docs) == {ids[0]}
    sim.delete("alice", "/Notes/N0.md")
    done = source.list(_Context(), client, state, resume=first)
    assert done.cursor is None and set(done.docs) == set(ids[1:])


def test_a_note_deleted_after_its_page_is_not_in_the_paged_listing(notes) -> None:
    sim, client, state = notes
    ids = _three_notes(sim)
    source = SOURCES[DocType.NOTE]
    pages = ListingPages(state, limit=1)
    page, whole = pages.next(source, _Context(), client, state)
    assert whole is None and set(page.docs) == {ids[0]}
    sim.delete("alice", "/Notes/N0.md")
    while whole is None:
        page, whole = pages.next(source, _Context(), client, state)
    assert set(whole.docs) == set(ids[1:])
    assert whole.docs[ids[1]].etag is not None  # listed whole by an earlier page
