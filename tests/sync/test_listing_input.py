"""Scanners given answers Nextcloud should not send (JSON not shaped as its apps', a cursor
that does not move, a folder listing its own ancestor, an empty multistatus): each is a
``NextcloudProtocolError`` that the scan records, never a bare Python exception and never an
endless loop. Answers come from an ``httpx.MockTransport`` behind the real client."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import redis

from ncindex.documents import DocType
from ncindex.errors import NextcloudProtocolError
from ncindex.names import Names
from ncindex.nextcloud.client import NextcloudClient, make_http
from ncindex.settings import Settings
from ncindex.sources.registry import SOURCES
from ncindex.sync.reconcile import ScanState

BOARDS = "/index.php/apps/deck/api/v1.0/boards"
ITEMS = "/index.php/apps/news/api/v1-3/items"
NOTES = "/index.php/apps/notes/api/v1/notes"


@pytest.fixture
def state(redis_url: str) -> Iterator[Callable[[DocType], ScanState]]:
    client = redis.Redis.from_url(redis_url)
    made: list[ScanState] = []

    def make(doc_type: DocType) -> ScanState:
        made.append(ScanState(client, "probe-user", doc_type, Names()))
        return made[-1]

    yield make
    for s in made:
        for key in client.scan_iter(s.base + "*"):
            client.delete(key)
    client.close()


def client_for(routes: dict[str, Callable[[httpx.Request], httpx.Response]]) -> NextcloudClient:
    def handler(request: httpx.Request) -> httpx.Response:
        for prefix, answer in routes.items():
            if request.url.path.startswith(prefix):
                return answer(request)
        return httpx.Response(404)

    http = make_http(
        Settings(nextcloud_url="https://cloud.example.test/"),
        transport=httpx.MockTransport(handler),
    )
    return NextcloudClient.for_account(http, "probe-user", "pw")


def deck(stacks: Any) -> dict[str, Callable[[httpx.Request], httpx.Response]]:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == BOARDS:
            return httpx.Response(200, json=[{"id": 1, "deletedAt": 0}])
        return httpx.Response(200, json=stacks)

    return {BOARDS: answer}


ODD_DECK = {
    "card without id": [{"cards": [{"title": "x"}]}],
    "card id null": [{"cards": [{"id": None}]}],
    "card not an object": [{"cards": ["x"]}],
    "cards an object": [{"cards": {"id": 1}}],
    "lastModified a word": [{"cards": [{"id": 3, "lastModified": "yesterday"}]}],
}


@pytest.mark.parametrize("stacks", ODD_DECK.values(), ids=ODD_DECK.keys())
def test_odd_deck_json_is_a_protocol_error(stacks: Any, state) -> None:
    with pytest.raises(NextcloudProtocolError):
        SOURCES[DocType.DECK_CARD].list(None, client_for(deck(stacks)), state(DocType.DECK_CARD))


@pytest.mark.parametrize("board", [{"title": "no id"}, {"id": None}, {"id": 1.5}])
def test_a_board_without_an_id_is_a_protocol_error(board: dict, state) -> None:
    routes = {BOARDS: lambda r: httpx.Response(200, json=[board])}
    with pytest.raises(NextcloudProtocolError):
        SOURCES[DocType.DECK_CARD].list(None, client_for(routes), state(DocType.DECK_CARD))


@pytest.mark.parametrize("status", [403, 404])
def test_a_board_gone_since_the_board_list_is_skipped(status: int, state) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == BOARDS:
            return httpx.Response(200, json=[{"id": 1}, {"id": 2}])
        if request.url.path == f"{BOARDS}/1/stacks":
            return httpx.Response(status, json={"status": status, "message": "Permission denied"})
        return httpx.Response(200, json=[{"cards": [{"id": 20, "ETag": "e20"}]}])

    listing = SOURCES[DocType.DECK_CARD].list(
        None, client_for({BOARDS: answer}), state(DocType.DECK_CARD)
    )
    assert list(listing.docs) == ["20"]  # board 1's cards count as missing


@pytest.mark.parametrize("item", [{"title": "no id"}, {"id": None}, {"id": 4, "lastModified": "x"}])
def test_odd_news_json_is_a_protocol_error(item: dict, state) -> None:
    routes = {ITEMS: lambda r: httpx.Response(200, json={"items": [item]})}
    with pytest.raises(NextcloudProtocolError):
        SOURCES[DocType.NEWS_ITEM].list(None, client_for(routes), state(DocType.NEWS_ITEM))


class _Context:
    """What the sources' listings read of their context here: its settings, and its Redis
    (the scan state's), where the Notes settings are cached."""

    settings = Settings(reconcile_notes_chunk_size=2, namespace="probe-listing-input")

    def __init__(self, memory: ScanState | None = None) -> None:
        self.redis = None if memory is None else memory.redis


def test_a_notes_cursor_that_does_not_move_ends_the_scan(state) -> None:
    calls = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        body = json.dumps([{"id": len(calls), "etag": "e"}])
        return httpx.Response(200, content=body, headers={"X-Notes-Chunk-Cursor": "1:2:3"})

    routes = {  # no Notes settings (404): the notes folder is "Notes"; it is there
        "/remote.php/dav/files/probe-user/Notes": lambda r: httpx.Response(
            207, content=_multistatus(("/Notes/", "n"))
        ),
        NOTES: answer,
    }
    notes = state(DocType.NOTE)
    try:
        with pytest.raises(NextcloudProtocolError):
            SOURCES[DocType.NOTE].list(_Context(notes), client_for(routes), notes)
    finally:
        notes.redis.delete(_Context.settings.names.notes_settings("probe-user"))
    assert len(calls) == 2  # the second answer repeated the cursor


def _multistatus(*entries: tuple[str, str]) -> bytes:
    parts = "".join(
        f"<d:response><d:href>/remote.php/dav/files/probe-user{href}</d:href><d:propstat><d:prop>"
        f"<d:getetag>&quot;{etag}&quot;</d:getetag><d:resourcetype><d:collection/></d:resourcetype>"
        "</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
        for href, etag in entries
    )
    return f'<?xml version="1.0"?><d:multistatus xmlns:d="DAV:">{parts}</d:multistatus>'.encode()


def test_a_folder_listing_its_ancestor_is_walked_once(state) -> None:
    calls = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if request.url.path.rstrip("/").endswith("/Docs"):  # lists / again as a child
            return httpx.Response(207, content=_multistatus(("/Docs/", "d"), ("/", "r")))
        return httpx.Response(207, content=_multistatus(("/", "r"), ("/Docs/", "d")))

    listing = SOURCES[DocType.FILE].list(
        None, client_for({"/remote.php/dav/files/": answer}), state(DocType.FILE)
    )
    assert set(listing.folders) == {"/", "/Docs"} and len(calls) == 2


def test_an_empty_multistatus_for_the_root_check_is_a_protocol_error(state) -> None:
    files = state(DocType.FILE)
    files.set_folders({"/": "r"})  # a clean scan was stored: the root is checked at Depth 0
    files.set_full_walk_at(time.time())
    routes = {"/remote.php/dav/files/": lambda r: httpx.Response(207, content=_multistatus())}
    with pytest.raises(NextcloudProtocolError):
        SOURCES[DocType.FILE].list(_Context(), client_for(routes), files)
