"""Verify-on-read: every doc_type has a verifier; the Deck and News verifiers read Nextcloud's
answers as documented (Deck: 403 means gone; News: no single-item GET)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from ncindex.documents import DocType
from ncindex.errors import NextcloudAuthError
from ncindex.nextcloud.apps import find_news_item, get_deck_card
from ncindex.nextcloud.client import HeaderAuth, NextcloudClient
from ncindex.search.verify import VERIFIERS, Verdict, VerificationCounts, VerifyOnRead
from ncindex.simulator import NextcloudSimulator, serve_simulator


def test_every_doc_type_has_a_verifier() -> None:
    assert set(VERIFIERS) == {t.value for t in DocType}


def client_for(handler: Any) -> tuple[NextcloudClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    http = httpx.Client(
        base_url="https://cloud.example.test", transport=httpx.MockTransport(record)
    )
    return NextcloudClient.for_account(http, "alice", "pw"), seen


CARD = {"id": 81, "title": "Fix lens", "stackId": 5, "deletedAt": 0, "lastModified": 1767225600}


BOARD = {"id": 3, "stacks": [{"id": 5, "boardId": 3, "deletedAt": 0}]}


def deck(status: int, body: Any = None) -> Any:
    """Deck answering the card GET with ``status`` (and ``body``), its board's GET with
    :data:`BOARD`."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/boards/3"):
            return httpx.Response(200, json=BOARD)
        if status == 304:
            return httpx.Response(304)
        return httpx.Response(status, json=body if body is not None else CARD)

    return handler


def deck_payload(**extra: Any) -> dict[str, Any]:
    return {"doc_type": "deck_card", "doc_id": "81", "doc_key": "deck_card:81", "board_id": "3",
            "stack_id": "5", "etag": "abc", **extra}  # fmt: skip


@pytest.mark.parametrize(
    ("status", "body", "verdict"),
    [
        (200, None, Verdict.KEPT),
        (304, None, Verdict.KEPT),
        (403, {"status": 403, "message": "Permission denied"}, Verdict.DROPPED),
        (403, {"status": 403, "message": "Card is deleted"}, Verdict.DROPPED),
        (404, {"status": 404}, Verdict.DROPPED),
        (200, {**CARD, "deletedAt": 1767225700}, Verdict.DROPPED),
        (503, {"message": "maintenance"}, Verdict.ERROR),
        (400, {"status": 400, "message": "bad"}, Verdict.ERROR),
    ],
)
def test_deck_card_verdicts(status: int, body: Any, verdict: Verdict) -> None:
    client, seen = client_for(deck(status, body))
    counts = VerificationCounts()
    (checked,) = VerifyOnRead(2).check(client, [deck_payload()], counts)
    assert checked.verdict is verdict
    (request,) = [r for r in seen if "/cards/" in r.url.path]
    assert request.method == "GET"
    assert request.url.path == "/index.php/apps/deck/api/v1.0/boards/3/stacks/5/cards/81"
    assert request.headers["OCS-APIRequest"] == "true"
    assert request.headers["If-None-Match"] == '"abc"'
    assert request.headers["Authorization"].startswith("Basic ")


def test_deck_card_without_board_is_unverified() -> None:
    client, seen = client_for(deck(200))
    counts = VerificationCounts()
    (checked,) = VerifyOnRead(2).check(client, [deck_payload(board_id=None)], counts)
    assert checked.verdict is Verdict.UNVERIFIED and not seen and counts.unverified == 1


def test_a_card_payload_it_cannot_read_leaves_the_other_cards_checked_against_their_board() -> None:
    # one card with an unreadable board_id is dropped (nobody checked it); the card of a
    # stack deleted since (6 is not among board 3's live stacks) is still found out
    client, seen = client_for(deck(304))
    counts = VerificationCounts()
    payloads = [deck_payload(board_id="three"), deck_payload(stack_id="6", doc_key="deck_card:82")]
    checked = VerifyOnRead(2).check(client, payloads, counts)
    assert [(c.verdict, c.reason) for c in checked] == [
        (Verdict.DROPPED, None),
        (Verdict.INELIGIBLE, "stack_deleted"),
    ]
    assert [r.url.path for r in seen].count("/index.php/apps/deck/api/v1.0/boards/3") == 1


def test_deck_card_returns_the_card() -> None:
    client, _ = client_for(deck(200))
    assert get_deck_card(client, 3, 5, 81)["title"] == "Fix lens"
    client, _ = client_for(deck(304))
    assert get_deck_card(client, 3, 5, 81, etag="abc") is None


def news(items: list[dict[str, Any]], status: int = 200) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=json.dumps({"items": items}).encode())

    return handler


NEWS_PAYLOAD = {
    "doc_type": "news_item",
    "doc_id": "90211",
    "doc_key": "news_item:90211",
    "feed_id": "7",
}


@pytest.mark.parametrize(
    ("items", "status", "verdict"),
    [
        ([{"id": 90211, "feedId": 7, "title": "Release 2.0"}], 200, Verdict.KEPT),
        ([{"id": 90187, "feedId": 7}], 200, Verdict.DROPPED),  # purged: the next older one
        ([], 200, Verdict.DROPPED),
        ([], 404, Verdict.DROPPED),
        ([], 500, Verdict.ERROR),
    ],
)
def test_news_item_verdicts(items: list[dict[str, Any]], status: int, verdict: Verdict) -> None:
    client, seen = client_for(news(items, status))
    (checked,) = VerifyOnRead(2).check(client, [NEWS_PAYLOAD], VerificationCounts())
    assert checked.verdict is verdict
    (request,) = seen
    assert request.url.path == "/index.php/apps/news/api/v1-3/items"
    assert dict(request.url.params) == {
        "type": "0",
        "id": "7",
        "batchSize": "1",
        "offset": "90212",
        "getRead": "true",
    }


def test_news_item_is_returned() -> None:
    client, _ = client_for(news([{"id": 90211, "title": "Release 2.0"}]))
    assert find_news_item(client, 90211, 7)["title"] == "Release 2.0"


def test_bad_answers_keep_the_candidate_and_unreadable_payloads_drop_it() -> None:
    """An answer of the wrong shape is Nextcloud's fault: the result stays (fail-open, counted
    in ``errors``). A payload the check cannot read is nobody's check: the result goes."""
    client, _ = client_for(lambda r: httpx.Response(200, content=b"<html>"))
    payloads = [deck_payload(), NEWS_PAYLOAD, {**NEWS_PAYLOAD, "doc_id": "not-a-number"}]
    counts = VerificationCounts()
    verdicts = VerifyOnRead(2).check(client, payloads, counts)
    assert [c.verdict for c in verdicts] == [Verdict.ERROR, Verdict.ERROR, Verdict.DROPPED]
    assert counts.errors == 2 and counts.kept == 2 and counts.dropped == 1


def test_unknown_type_is_kept_and_counted() -> None:
    client, _ = client_for(deck(200))
    counts = VerificationCounts()
    (checked,) = VerifyOnRead(2).check(client, [{"doc_type": "mail", "doc_key": "mail:1"}], counts)
    assert checked.verdict is Verdict.UNVERIFIED and counts.unverified == 1


def test_rejected_credentials_fail_the_search() -> None:
    client, _ = client_for(lambda r: httpx.Response(401))
    with pytest.raises(NextcloudAuthError):
        VerifyOnRead(2).check(client, [deck_payload()], VerificationCounts())


@pytest.mark.parametrize(
    ("version", "verdict"), [("33.0.2", Verdict.KEPT), ("30.0.5", Verdict.DROPPED)]
)
def test_a_bearer_callers_news_and_deck_results_are_checked_not_failed(
    version: str, verdict: Verdict
) -> None:
    """The News and Deck APIs are #[CORS]: nextcloud/server CORSMiddleware logs a Bearer caller
    out unless the request passes the CSRF check, which OCS-APIRequest does from Nextcloud 31
    (nextcloud/server#46760), and answers 401 "CORS requires basic auth". News requests went
    without the header, so a Bearer caller's News result was a 401 — the caller's credentials
    taken as rejected, the whole search failed. Now the header is sent (kept from 31), and
    before 31 Nextcloud's refusal drops the result it cannot check (fail-closed)."""
    sim = NextcloudSimulator(seed=1, version=version)
    sim.add_user("alice", "alice-pw", "Alice Adams")
    feed = sim.news_add_feed("alice", "https://blog.example.test/feed", "Blog")
    item = sim.news_add_item("alice", feed, "Release 2.0", "<p>out now</p>")
    board = sim.deck.create_board("alice", "Plans")
    stack = sim.deck.create_stack("alice", board.id, "To do")
    card = sim.deck.create_card("alice", stack.id, "Fix lens")
    payloads = [
        {"doc_type": "news_item", "doc_id": str(item), "doc_key": f"news_item:{item}",
         "feed_id": str(feed)},
        deck_payload(doc_id=str(card.id), doc_key=f"deck_card:{card.id}",
                     board_id=str(board.id), stack_id=str(stack.id)),
    ]  # fmt: skip
    with serve_simulator(sim) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        client = NextcloudClient(http, HeaderAuth("Bearer alice-pw"), "alice")
        checked = VerifyOnRead(2).check(client, payloads, VerificationCounts())
    sim.close()
    assert [c.verdict for c in checked] == [verdict, verdict]
