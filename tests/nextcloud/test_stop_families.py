"""``NextcloudClient.stop_when_unanswered`` keyed by endpoint family
(:mod:`ncindex.nextcloud.families`), on ``httpx.MockTransport`` with a Nextcloud installed in a
sub-folder (web root ``/nextcloud``): a timeout stops the requests of its family only, a
connection that could not be made stops every request."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from ncindex.errors import NextcloudAuthError, NextcloudUnavailable, NotFound
from ncindex.nextcloud.apps import get_deck_card
from ncindex.nextcloud.client import NextcloudClient, make_http
from ncindex.nextcloud.families import endpoint_family
from ncindex.settings import Settings

ROOT = "https://cloud.example.test/nextcloud"
EMPTY_MULTISTATUS = b'<?xml version="1.0"?><d:multistatus xmlns:d="DAV:"/>'
USER = {"ocs": {"meta": {"status": "ok", "statuscode": 200}, "data": {"id": "alice"}}}


@pytest.mark.parametrize(
    ("path", "family"),
    [
        ("/remote.php/dav/files/alice/Notes/a.md", "remote.php"),
        ("/remote.php/dav/", "remote.php"),
        ("/remote.php/dav/systemtags/", "remote.php"),
        ("/remote.php/webdav/a.md", "remote.php"),
        ("/index.php/apps/deck/api/v1.0/boards/1/stacks/2/cards/3", "apps/deck"),
        ("/apps/deck/api/v1.0/boards/1", "apps/deck"),  # the front controller on
        ("/ocs/v2.php/apps/deck/api/v1.0/boards", "apps/deck"),  # Deck's own OCS routes
        ("/index.php/apps/notes/api/v1/notes/3", "apps/notes"),
        ("/index.php/apps/news/api/v1-3/items", "apps/news"),
        ("/ocs/v2.php/apps/files_sharing/api/v1/shares", "apps/files_sharing"),
        ("/ocs/v2.php/cloud/user", "ocs"),
        ("/ocs/v1.php/cloud/capabilities", "ocs"),
        ("/index.php/login/v2", "index.php"),
        ("/login/v2/poll", "index.php"),
        ("/index.php/apps", "index.php"),
        ("/", "index.php"),
        ("/status.php", "status.php"),
    ],
)
def test_a_path_s_endpoint_family_is_the_part_of_nextcloud_that_serves_it(
    path: str, family: str
) -> None:
    assert endpoint_family(path) == family


def client_for(handler: Callable[[httpx.Request], httpx.Response]) -> NextcloudClient:
    """A per-request client (``stop_when_unanswered``) of a Nextcloud under ``/nextcloud``."""
    settings = Settings(nextcloud_url=ROOT + "/")
    http = make_http(settings, transport=httpx.MockTransport(handler))
    client = NextcloudClient.for_account(http, "alice", "pw")
    client.stop_when_unanswered = True
    return client


def answering(stalled: Callable[[httpx.Request], Exception | None], sent: list[str]) -> Callable:
    """A Nextcloud that raises what ``stalled`` gives for a request and otherwise answers:
    WebDAV an empty multistatus, a note 404, OCS ``cloud/user``; each path reached is kept in
    ``sent``."""

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        failure = stalled(request)
        if failure is not None:
            raise failure
        if request.url.path.startswith("/nextcloud/remote.php/"):
            return httpx.Response(207, content=EMPTY_MULTISTATUS)
        if request.url.path.startswith("/nextcloud/ocs/v2.php/cloud/user"):
            return httpx.Response(200, json=USER)
        return httpx.Response(404, json={"errorType": "Exception"})

    return handler


def deck(request: httpx.Request) -> Exception | None:
    """Deck's API never answers (a board too big to build within the client's timeout)."""
    return httpx.ReadTimeout("deck") if "/apps/deck/" in request.url.path else None


def test_a_stalled_app_stops_its_own_requests_and_no_other() -> None:
    """Deck's card GET times out: the client's later Deck requests are not sent — through
    ``index.php`` or Deck's OCS routes, by a path or an absolute URL under the web root —
    while WebDAV, the Notes API and OCS are still asked. Before, the timeout stopped every
    later request of the client, so a search's files and notes checked after a stalled
    Deck came back unconfirmed though WebDAV answered."""
    sent: list[str] = []
    client = client_for(answering(deck, sent))
    with pytest.raises(NextcloudUnavailable, match="timed out"):
        get_deck_card(client, 1, 2, 3)
    for url in (
        "/index.php/apps/deck/api/v1.0/boards/1",
        "/ocs/v2.php/apps/deck/api/v1.0/boards",
        f"{ROOT}/index.php/apps/deck/api/v1.0/boards/1",
    ):
        with pytest.raises(NextcloudUnavailable, match="not sent") as raised:
            client.request("GET", url)
        assert raised.value.unreachable
    assert client.find_by_ids([7]) == {}  # WebDAV answers
    with pytest.raises(NotFound):
        client.get_note(7)  # the Notes API answers
    assert client.current_user() == "alice"  # OCS answers
    assert sent == [
        "/nextcloud/index.php/apps/deck/api/v1.0/boards/1/stacks/2/cards/3",
        "/nextcloud/remote.php/dav/",
        "/nextcloud/index.php/apps/notes/api/v1/notes/7",
        "/nextcloud/ocs/v2.php/cloud/user",
    ], sent
    assert list(client.stalled) == ["apps/deck"] and client.unanswered is None


@pytest.mark.parametrize(
    "failure", [httpx.ConnectError("refused"), httpx.ConnectTimeout("no route")]
)
def test_a_connection_not_made_stops_every_family(failure: Exception) -> None:
    """A connection that could not be made is the server, not one part of it: after it no
    request of the client is sent, whatever its family (a guard: so it was before)."""
    sent: list[str] = []
    client = client_for(answering(lambda r: failure if not sent[1:] else None, sent))
    with pytest.raises(NextcloudUnavailable):
        get_deck_card(client, 1, 2, 3)
    with pytest.raises(NextcloudUnavailable, match="not sent"):
        client.find_by_ids([7])
    with pytest.raises(NextcloudUnavailable, match="not sent"):
        client.current_user()
    assert len(sent) == 1 and client.unanswered is not None


@pytest.mark.parametrize("answered_first", [False, True], ids=["nothing-answered", "answered"])
def test_a_cached_credential_is_confirmed_after_a_stall(answered_first: bool) -> None:
    """A cached credential (``confirmed`` false) whose request met a stalled Deck asks OCS
    ``cloud/user`` to confirm it, whether or not anything else of the request was answered
    (a note's 404 shows nothing of the credential). Nothing answered, the confirmation was
    not sent: a Deck that stalls in front of Nextcloud's login check (its PHP-FPM pool stuck)
    refuses no revoked credential, so its search's results were shown to one (failed on
    the old client: ``cloud/user`` not in ``sent``)."""
    sent: list[str] = []
    client = client_for(answering(deck, sent))
    client.confirmed = False
    if answered_first:
        with pytest.raises(NotFound):
            client.get_note(7)
    with pytest.raises(NextcloudUnavailable):
        get_deck_card(client, 1, 2, 3)
    client.confirm()
    assert client.confirmed
    assert "/nextcloud/ocs/v2.php/cloud/user" in sent, sent


def test_a_revoked_credential_whose_only_check_stalled_is_refused_by_ocs() -> None:
    """A revoked cached credential whose request asked Deck alone, which stalls before
    Nextcloud's login check: OCS answers the confirmation 401, and ``confirm`` raises
    ``NextcloudAuthError`` (before: not asked, the answer stood)."""
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        if "/apps/deck/" in request.url.path:
            raise httpx.ReadTimeout("deck")
        return httpx.Response(401, json={"ocs": {"meta": {"statuscode": 997}, "data": []}})

    client = client_for(handler)
    client.confirmed = False
    with pytest.raises(NextcloudUnavailable):
        get_deck_card(client, 1, 2, 3)
    with pytest.raises(NextcloudAuthError):
        client.confirm()
    assert sent[-1] == "/nextcloud/ocs/v2.php/cloud/user", sent


def test_a_confirmation_is_not_sent_once_ocs_itself_stalled() -> None:
    """OCS stalled earlier in the request (a capabilities GET timed out): the confirmation
    is not sent, and the answer stands — no second wait for a family that gave no answer (a
    guard: passes on the old client too)."""
    sent: list[str] = []
    ocs = lambda r: httpx.ReadTimeout("ocs") if "/ocs/" in r.url.path else None  # noqa: E731
    client = client_for(answering(ocs, sent))
    client.confirmed = False
    with pytest.raises(NextcloudUnavailable):
        client.ocs("GET", "/ocs/v2.php/cloud/capabilities")
    client.confirm()
    assert client.confirmed and sent == ["/nextcloud/ocs/v2.php/cloud/capabilities"], sent


def test_a_stall_is_keyed_by_family_under_a_two_level_web_root() -> None:
    """A Nextcloud under ``/a/b`` (a web root of two folders) whose Deck stalls, asked by a
    relative path, by an absolute URL under the web root with a query string, and through
    Deck's OCS routes: each is Deck's. The other apps' OCS routes (the sharing API, Notes
    under OCS), the server's own (``cloud/users/{id}``, ``core/apppassword``) and WebDAV by
    an absolute URL are still sent. A guard of :meth:`NextcloudClient._family` (passing on
    the commit that made it)."""
    root = "https://cloud.example.test/a/b"
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        if "/apps/deck/" in request.url.path:
            raise httpx.ReadTimeout("deck")
        return httpx.Response(200, json=USER)

    http = make_http(Settings(nextcloud_url=root), transport=httpx.MockTransport(handler))
    client = NextcloudClient.for_account(http, "alice", "pw")
    client.stop_when_unanswered = True
    with pytest.raises(NextcloudUnavailable, match="timed out"):
        client.request("GET", f"{root}/index.php/apps/deck/api/v1.0/boards?details=true")
    for url in (
        "/index.php/apps/deck/api/v1.0/boards/1",
        "/ocs/v1.php/apps/deck/api/v1.0/boards?format=json",
        f"{root}/ocs/v2.php/apps/deck/api/v1.0/boards",
    ):
        with pytest.raises(NextcloudUnavailable, match="not sent"):
            client.request("GET", url)
    for url in (
        "/ocs/v2.php/apps/files_sharing/api/v1/shares?shared_with_me=true",
        "/ocs/v2.php/apps/notes/api/v1/notes",
        "/ocs/v2.php/cloud/users/bob",
        "/ocs/v2.php/core/apppassword",
        f"{root}/remote.php/dav/files/alice/?x=1",
    ):
        client.request("GET", url)
    assert list(client.stalled) == ["apps/deck"], client.stalled
    assert len(sent) == 6, sent
