"""``NextcloudClient.confirming_early``: a cached credential's confirmation (OCS ``cloud/user``)
sent beside checks that got no answer in time, on ``httpx.MockTransport``. The tests follow the
order of events (a stalled check is let go once the question arrives), never the clock."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx
import pytest

from ncindex.errors import NextcloudAuthError, NextcloudUnavailable, NotFound
from ncindex.nextcloud.apps import get_deck_card
from ncindex.nextcloud.client import (
    CONFIRM_SECONDS,
    NextcloudClient,
    early_confirm_seconds,
    make_http,
)
from ncindex.settings import Settings

USER = {"ocs": {"meta": {"status": "ok", "statuscode": 200}, "data": {"id": "alice"}}}
REFUSED = {"ocs": {"meta": {"statuscode": 997}, "data": []}}
QUESTION = "/ocs/v2.php/cloud/user"
HELD_SECONDS = 10.0
"""The longest a stalled check waits for the question before it times out all the same (a
bound for a failing test, never reached by a passing one)."""


def cached_client(
    handler: Callable[[httpx.Request], httpx.Response], http_timeout: float
) -> NextcloudClient:
    """A per-request client (``stop_when_unanswered``) whose credential came from the cache
    (``confirmed`` false), its requests timing out after ``http_timeout`` seconds."""
    settings = Settings(nextcloud_url="https://cloud.example.test/", http_timeout=http_timeout)
    http = make_http(settings, transport=httpx.MockTransport(handler))
    client = NextcloudClient.for_account(http, "alice", "pw")
    client.stop_when_unanswered = True
    client.confirmed = False
    return client


def test_the_wait_before_asking_is_half_the_timeout_or_what_the_question_leaves() -> None:
    assert early_confirm_seconds(2.0) == 1.0
    assert early_confirm_seconds(10.0) == 10.0 - CONFIRM_SECONDS
    assert early_confirm_seconds(0.5) == 0.25


@pytest.mark.parametrize("refused", [False, True], ids=["accepted", "revoked"])
def test_a_check_without_an_answer_has_the_question_sent_beside_it(refused: bool) -> None:
    """A Deck check that gets no answer (stalled in front of Nextcloud's login check): the
    question goes out while it still waits — the check is let go only once the question
    arrived — and ``confirm`` takes its answer, asking nothing more: accepted, the search
    goes on; revoked, ``NextcloudAuthError`` (the refusal of 9d091dd kept)."""
    events: list[str] = []
    asked = threading.Event()

    def nextcloud(request: httpx.Request) -> httpx.Response:
        if request.url.path == QUESTION:
            events.append("question")
            asked.set()
            return httpx.Response(401 if refused else 200, json=REFUSED if refused else USER)
        events.append("check sent")
        asked.wait(HELD_SECONDS)
        events.append("check timed out")
        raise httpx.ReadTimeout("deck", request=request)

    client = cached_client(nextcloud, http_timeout=0.2)
    with client.confirming_early(), pytest.raises(NextcloudUnavailable):
        get_deck_card(client, 1, 2, 3)
    if refused:
        with pytest.raises(NextcloudAuthError):
            client.confirm()
    else:
        client.confirm()
        assert client.confirmed
    assert events == ["check sent", "question", "check timed out"], events


def test_checks_answered_in_time_leave_nothing_to_ask() -> None:
    """A check answered 2xx (a WebDAV ``PROPFIND``: the credential confirmed) before the wait
    is over: the timer fires (0.1 s) and sends nothing while a Deck check still waits well
    past it (1 s), nor does ``confirm`` — a healthy Nextcloud is asked nothing more."""
    events: list[str] = []

    def nextcloud(request: httpx.Request) -> httpx.Response:
        if request.url.path == QUESTION:
            events.append("question")
            return httpx.Response(200, json=USER)
        if request.method == "PROPFIND":
            events.append("propfind answered")
            return httpx.Response(207, content=b'<d:multistatus xmlns:d="DAV:"/>')
        events.append("card check")
        threading.Event().wait(1.0)
        raise httpx.ReadTimeout("deck", request=request)

    client = cached_client(nextcloud, http_timeout=0.2)
    with client.confirming_early():
        client.request("PROPFIND", "/remote.php/dav/files/alice/", headers={"Depth": "0"})
        with pytest.raises(NextcloudUnavailable):
            get_deck_card(client, 1, 2, 3)
    client.confirm()
    assert events == ["propfind answered", "card check"], events


def test_checks_over_before_the_wait_leave_the_question_to_confirm() -> None:
    """Checks whose answers confirm nothing (a note's 404), over before the wait
    (``http_timeout`` 10 s: 8 s): the timer is stopped as the block ends, and ``confirm``
    asks once, as before."""
    sent: list[str] = []

    def nextcloud(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        if request.url.path == QUESTION:
            return httpx.Response(200, json=USER)
        return httpx.Response(404, json={"errorType": "Exception"})

    client = cached_client(nextcloud, http_timeout=10.0)
    with client.confirming_early(), pytest.raises(NotFound):
        client.get_note(7)
    client.confirm()
    assert sent == ["/index.php/apps/notes/api/v1/notes/7", QUESTION], sent
