"""The Nextcloud client on ``httpx.MockTransport``: formats parsed from reference examples and
errors translated into the ncindex tree."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from ncindex.errors import (
    FileUnavailable,
    Forbidden,
    NextcloudAuthError,
    NextcloudProtocolError,
    NextcloudRefused,
    NextcloudUnavailable,
    NotFound,
    StorageUnavailable,
    TooLarge,
)
from ncindex.nextcloud.client import CONFIRM_SECONDS, NextcloudClient, make_http
from ncindex.nextcloud.webdav import DavEntry, parse_multistatus
from ncindex.settings import Settings

MULTISTATUS = b"""<?xml version="1.0"?>
<d:multistatus xmlns:d="DAV:" xmlns:s="http://sabredav.org/ns" xmlns:oc="http://owncloud.org/ns" xmlns:nc="http://nextcloud.org/ns">
 <d:response>
  <d:href>/remote.php/dav/files/alice/Projects/</d:href>
  <d:propstat><d:prop><oc:fileid>1500</oc:fileid>
    <d:getlastmodified>Tue, 06 Jan 2026 09:15:00 GMT</d:getlastmodified>
    <d:getetag>"677c3f1e2ab40"</d:getetag><oc:size>48213</oc:size>
    <d:resourcetype><d:collection/></d:resourcetype><oc:permissions>RGDNVCK</oc:permissions>
   </d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat>
  <d:propstat><d:prop><d:getcontenttype/><d:getcontentlength/></d:prop>
   <d:status>HTTP/1.1 404 Not Found</d:status></d:propstat>
 </d:response>
 <d:response>
  <d:href>/remote.php/dav/files/alice/Projects/Design%20Doc.pdf</d:href>
  <d:propstat><d:prop><oc:fileid>1532</oc:fileid>
    <d:getlastmodified>Tue, 06 Jan 2026 09:14:58 GMT</d:getlastmodified>
    <d:getetag>"677c3f1c0d2e9"</d:getetag><d:getcontenttype>application/pdf</d:getcontenttype>
    <d:getcontentlength>48213</d:getcontentlength><oc:size>48213</oc:size>
    <nc:system-tags>
     <nc:system-tag oc:id="4" oc:can-assign="true">Confidential</nc:system-tag>
    </nc:system-tags>
    <d:resourcetype/><oc:permissions>RGDNVW</oc:permissions>
   </d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat>
 </d:response>
</d:multistatus>"""


def client_for(handler) -> NextcloudClient:
    settings = Settings(nextcloud_url="https://cloud.example.test/")
    http = make_http(settings, transport=httpx.MockTransport(handler))
    return NextcloudClient.for_account(http, "alice", "pw")


def test_propfind_parses_the_reference_multistatus() -> None:
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["method"], seen["depth"], seen["path"] = (
            request.method,
            request.headers["Depth"],
            request.url.raw_path.decode(),
        )
        return httpx.Response(207, content=MULTISTATUS)

    folder, pdf = client_for(handler).propfind("/Projects", depth=1)
    assert seen == {
        "method": "PROPFIND",
        "depth": "1",
        "path": "/remote.php/dav/files/alice/Projects",
    }
    assert folder.is_folder and folder.path == "/Projects" and folder.content_type is None
    assert pdf.path == "/Projects/Design Doc.pdf"
    assert pdf.file_id == 1532 and pdf.etag == "677c3f1c0d2e9"
    assert pdf.modified_at == 1767690898  # Tue, 06 Jan 2026 09:14:58 GMT
    assert pdf.size == 48213 and pdf.tags == ["Confidential"] and not pdf.is_folder
    assert pdf.permissions == "RGDNVW" and pdf.readable


@pytest.mark.parametrize(
    ("permissions", "readable"),
    [("RGDNVW", True), ("SRG", True), ("MG", True), ("R", False), ("SR", False), ("", True)],
)
def test_read_permission_is_the_g_letter(permissions: str, readable: bool) -> None:
    # no oc:permissions in the answer says nothing: it counts as readable
    entry = DavEntry("/a.md", 7, "e1", 0, False, permissions=permissions)
    assert entry.readable is readable


@pytest.mark.parametrize(
    ("attributes", "readable"),
    [
        ('[{"scope":"permissions","key":"download","value":false}]', False),
        ('[{"scope":"permissions","key":"download","value":true}]', True),
        ("[]", True),
        (None, True),
    ],
)
def test_a_view_only_share_is_not_readable(attributes: str | None, readable: bool) -> None:
    # nc:share-attributes (FilesPlugin: json_encode(getShareAttributes())); ViewOnlyPlugin
    # refuses the bytes when permissions/download is false
    prop = "" if attributes is None else f"<nc:share-attributes>{attributes}</nc:share-attributes>"
    body = (
        '<?xml version="1.0"?><d:multistatus xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns"'
        ' xmlns:nc="http://nextcloud.org/ns"><d:response>'
        "<d:href>/remote.php/dav/files/bob/a.md</d:href><d:propstat><d:prop>"
        f"<oc:fileid>7</oc:fileid><oc:permissions>SRGDNVW</oc:permissions>{prop}"
        "</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>"
    )
    (entry,) = parse_multistatus(body.encode(), "bob")
    assert entry.readable is readable


def test_share_attributes_that_are_not_a_list_are_a_protocol_error() -> None:
    body = (
        '<?xml version="1.0"?><d:multistatus xmlns:d="DAV:" xmlns:nc="http://nextcloud.org/ns">'
        "<d:response><d:href>/remote.php/dav/files/bob/a.md</d:href><d:propstat><d:prop>"
        "<nc:share-attributes>{</nc:share-attributes>"
        "</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>"
    )
    with pytest.raises(NextcloudProtocolError):
        parse_multistatus(body.encode(), "bob")


def test_search_by_id_with_empty_multistatus_is_not_found() -> None:
    empty = b'<?xml version="1.0"?><d:multistatus xmlns:d="DAV:"/>'
    client = client_for(lambda r: httpx.Response(207, content=empty))
    with pytest.raises(NotFound):
        client.find_by_id(1532)


def test_search_by_id_sends_an_rfc5323_query_for_oc_fileid() -> None:
    bodies = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content.decode())
        return httpx.Response(207, content=MULTISTATUS)

    entry = client_for(handler).find_by_id(1500)
    assert entry.file_id == 1500
    assert "<oc:fileid/></d:prop><d:literal>1500</d:literal>" in bodies[0]
    assert "<d:href>/files/alice</d:href>" in bodies[0]


def test_a_file_reached_through_two_mounts_is_read_through_the_one_that_allows_it() -> None:
    # alice sees bob's file in his folder shared with her view-only and through a share of
    # the file itself: one SEARCH entry per mount, each with its own share attributes
    def response(path: str, attributes: str) -> str:
        return (
            f"<d:response><d:href>/remote.php/dav/files/alice{path}</d:href><d:propstat>"
            f"<d:prop><oc:fileid>7</oc:fileid><oc:permissions>SG</oc:permissions>"
            f"<nc:share-attributes>{attributes}</nc:share-attributes></d:prop>"
            "<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
        )

    view_only = '[{"scope":"permissions","key":"download","value":false}]'
    body = (
        '<?xml version="1.0"?><d:multistatus xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns"'
        ' xmlns:nc="http://nextcloud.org/ns">'
        f"{response('/P/a.md', view_only)}{response('/a.md', '[]')}</d:multistatus>"
    ).encode()
    client = client_for(lambda r: httpx.Response(207, content=body))
    one = client.find_by_id(7)
    assert (one.path, one.readable) == ("/a.md", True)
    assert client.find_by_ids([7])[7] == one


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, NextcloudAuthError),
        (404, NotFound),
        (500, NextcloudUnavailable),
        (503, NextcloudUnavailable),
        (429, NextcloudUnavailable),
        (423, NextcloudUnavailable),  # Locked: a file being uploaded or edited
        (403, Forbidden),
        (400, NextcloudProtocolError),
    ],
)
def test_status_codes_are_translated(status: int, error: type[Exception]) -> None:
    client = client_for(lambda r: httpx.Response(status, json={"errorType": "Exception"}))
    with pytest.raises(error):
        client.get_note(1)


@pytest.mark.parametrize(
    ("status", "headers", "error"),
    [
        (423, {}, FileUnavailable),  # Sabre File::get: FileLocked
        (503, {}, FileUnavailable),  # File::get: ServiceUnavailable, this file cannot be opened
        (503, {"X-Nextcloud-Maintenance-Mode": "1"}, NextcloudUnavailable),
        (502, {}, NextcloudUnavailable),  # a proxy without Nextcloud behind it
        (429, {}, NextcloudUnavailable),
    ],
)
def test_a_download_nextcloud_cannot_open_is_that_files_failure(
    status: int, headers: dict[str, str], error: type[Exception]
) -> None:
    client = client_for(lambda r: httpx.Response(status, headers=headers, text="<d:error/>"))
    with pytest.raises(error) as raised:
        client.download("/a.txt", 1000)
    assert type(raised.value) is error


@pytest.mark.parametrize("exc", [httpx.ConnectError("refused"), httpx.ReadTimeout("slow")])
def test_transport_errors_are_unavailable(exc: Exception) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    with pytest.raises(NextcloudUnavailable):
        client_for(handler).get_note(1)


@pytest.mark.parametrize("stop", [False, True])
def test_a_client_told_so_stops_at_the_first_request_without_an_answer(stop: bool) -> None:
    """``stop_when_unanswered`` (an RCP batch's client): after a request that timed out, the
    next ones to the same part of Nextcloud (the Notes API) raise ``NextcloudUnavailable``
    (``unreachable``) without being sent; an error answer (503) does not stop it, and a client
    not told so sends every request. A request to another part (OCS ``cloud/user``) is sent:
    the stop is its endpoint family's (it stopped every request before; see
    ``test_stop_families.py``)."""
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        if request.url.path.endswith("/notes/1"):
            return httpx.Response(503)
        raise httpx.ReadTimeout("slow")

    client = client_for(handler)
    client.stop_when_unanswered = stop
    with pytest.raises(NextcloudUnavailable):
        client.get_note(1)  # answered 503: not a stop
    for _ in range(2):
        with pytest.raises(NextcloudUnavailable) as raised:
            client.get_note(2)
        assert raised.value.unreachable
    with pytest.raises(NextcloudUnavailable):
        client.current_user()  # sent: OCS is not the Notes API
    assert len(sent) == (3 if stop else 4), sent


@pytest.mark.parametrize(
    ("failure", "stops"),
    [
        (httpx.ConnectError("refused"), True),
        (httpx.ConnectTimeout("no route"), True),
        (httpx.RemoteProtocolError("Server disconnected without sending a response."), False),
        (httpx.ReadError("connection reset by peer"), False),
    ],
)
def test_only_a_silent_nextcloud_stops_the_client(failure: Exception, stops: bool) -> None:
    """A connection refused or never made stops a client told to stop (Nextcloud is down);
    a connection reset or closed mid-exchange does not: a keep-alive connection the web
    server closed as it was reused fails one request of a Nextcloud that answers the next, and
    it left the rest of a search's checks unsent (their results unconfirmed)."""
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        if len(sent) == 1:
            raise failure
        return httpx.Response(503)

    client = client_for(handler)
    client.stop_when_unanswered = True
    for _ in range(2):
        with pytest.raises(NextcloudUnavailable):
            client.get_note(1)
    assert len(sent) == (1 if stops else 2), sent
    assert (client.unanswered is not None) is stops


def test_a_confirmation_timing_out_sooner_than_the_client_does_not_stop_it() -> None:
    """:meth:`~NextcloudClient.confirm` waits :data:`CONFIRM_SECONDS` (2 s), not the client's
    ``http_timeout`` (10 s by default): its timing out says Nextcloud is slower than 2 s, not
    that it does not answer. It stopped a client told to stop at the first request without
    an answer, so after a cached credential's confirmation timed out every later check of an
    RCP batch went unsent (its hits unconfirmed) though Nextcloud answered them within the
    client's timeout. A request waiting the client's own timeout still stops it."""
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        if request.url.path.endswith("/cloud/user"):
            raise httpx.ReadTimeout("slower than CONFIRM_SECONDS")
        if request.url.path.endswith("/notes/2"):
            raise httpx.ReadTimeout("no answer")
        return httpx.Response(
            200,
            json={
                "id": 1,
                "title": "t",
                "content": "c",
                "etag": "e",
                "modified": 1,
                "category": "",
            },
        )

    client = client_for(handler)
    client.stop_when_unanswered = True
    assert client.http.timeout.read is not None and client.http.timeout.read > CONFIRM_SECONDS
    client.confirmed = False
    client.confirm()  # fail-open: the answer stands
    assert client.unanswered is None
    assert client.get_note(1) is not None  # sent, and answered
    with pytest.raises(NextcloudUnavailable):
        client.get_note(2)  # the client's own timeout: no answer
    with pytest.raises(NextcloudUnavailable, match="not sent"):
        client.get_note(1)
    assert [path.rsplit("/", 1)[-1] for path in sent] == ["user", "1", "2"]


def test_conditional_note_get_returns_none_on_304() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["If-None-Match"] == '"0f3b"'
        return httpx.Response(304)

    assert client_for(handler).get_note(1532, etag="0f3b") is None


@pytest.mark.parametrize(
    "body",
    [{"errorType": "Exception"}, {"errorType": "Doctrine\\DBAL\\Exception"}, "<html>500</html>"],
)
def test_a_notes_500_is_transient(body: object) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(body, str):
            return httpx.Response(500, text=body)
        return httpx.Response(500, json=body)

    with pytest.raises(NextcloudUnavailable):
        client_for(handler).get_note(7)


def test_a_note_answered_with_error_true_is_a_refusal() -> None:
    # nextcloud/notes Note::getData: HTTP 200, the content's exception caught
    note = {
        "id": 7,
        "title": "Secret",
        "modified": 1767225600,
        "category": "",
        "favorite": False,
        "readonly": True,
        "internalPath": "/Notes/Secret.md",
        "shareTypes": [],
        "isShared": False,
        "error": True,
        "errorType": "OCP\\Files\\NotPermittedException",
        "content": "Error: OCP\\Files\\NotPermittedException",
        "etag": "0f3b6c2d9e8a7b1c4d5e6f708192a3b4",
    }

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=note)

    with pytest.raises(Forbidden):
        client_for(handler).get_note(7)


def test_an_ocs_400_is_refused_with_nextclouds_reason() -> None:
    message = (
        "OCP\\Files\\Events\\Node\\NodeRestoredEvent is not an event class compatible with webhooks"
    )

    def handler(request: httpx.Request) -> httpx.Response:
        meta = {"status": "failure", "statuscode": 400, "message": message}
        return httpx.Response(400, json={"ocs": {"meta": meta, "data": []}})

    with pytest.raises(NextcloudRefused) as refused:
        client_for(handler).create_webhook({"event": "x"})
    assert (refused.value.status, refused.value.message) == (400, message)


def test_note_json_from_the_reference() -> None:
    note = {
        "id": 1532,
        "title": "Plan",
        "modified": 1767225600,
        "category": "Work",
        "favorite": False,
        "readonly": False,
        "internalPath": "/Notes/Work/Plan.md",
        "shareTypes": [],
        "isShared": False,
        "error": False,
        "errorType": "",
        "content": "# Plan\n- ship it",
        "etag": "0f3b6c2d9e8a7b1c4d5e6f708192a3b4",
    }
    got = client_for(lambda r: httpx.Response(200, json=note)).get_note(1532)
    assert (got.title, got.category, got.content) == ("Plan", "Work", "# Plan\n- ship it")


def test_download_stops_past_the_size_cap() -> None:
    client = client_for(lambda r: httpx.Response(200, content=b"x" * 5000))
    with pytest.raises(TooLarge):
        client.download("/big.txt", max_bytes=1000)
    assert client.download("/big.txt", max_bytes=5000) == b"x" * 5000


def test_ocs_current_user() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["OCS-APIRequest"] == "true"
        return httpx.Response(
            200,
            json={"ocs": {"meta": {"status": "ok", "statuscode": 200}, "data": {"id": "alice"}}},
        )

    client = client_for(handler)
    client.user = None
    assert client.current_user() == "alice"


def test_the_shared_client_never_sends_a_cookie_nextcloud_set() -> None:
    """Nextcloud sets session cookies on Basic-auth requests; the pooled client is shared by
    every caller, so a cookie set on alice's request must not ride along with bob's."""
    seen: list[tuple[str | None, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.headers.get("Authorization"), request.headers.get("Cookie")))
        headers = [
            ("Set-Cookie", "oc_sessionPassphrase=secret; path=/; secure; HttpOnly"),
            ("Set-Cookie", "nc_session_id=abc; path=/; HttpOnly"),
        ]
        return httpx.Response(200, headers=headers, json={"ocs": {"data": {"id": "x"}}})

    settings = Settings(nextcloud_url="https://cloud.example.test/")
    http = make_http(settings, transport=httpx.MockTransport(handler))
    alice = NextcloudClient.for_account(http, "alice", "pw")
    bob = NextcloudClient.for_account(http, "bob", "pw")
    for client in (alice, bob, alice):
        client.current_user()
    assert len(seen) == 3 and all(cookie is None for _, cookie in seen), seen
    assert not list(http.cookies.jar)


def test_a_header_httpx_refuses_is_not_echoed() -> None:
    """h11 refuses e.g. a header value with trailing spaces and quotes it in its message."""

    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.LocalProtocolError("Illegal header value b'Basic c2VjcmV0  '")

    with pytest.raises(NextcloudProtocolError) as caught:
        client_for(handler).get_note(1)
    assert "c2VjcmV0" not in str(caught.value)


def test_retry_after_is_read_as_seconds_or_an_http_date() -> None:
    from ncindex.nextcloud.client import retry_after_seconds

    assert retry_after_seconds("120") == 120.0
    assert retry_after_seconds("Thu, 01 Jan 2026 00:02:00 GMT", now=1_767_225_600) == 120.0
    assert retry_after_seconds("Thu, 01 Jan 2026 00:00:00 GMT", now=1_767_225_700) == 0.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None


def _sabre_503(message: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<d:error xmlns:d="DAV:" xmlns:s="http://sabredav.org/ns">\n'
        "  <s:exception>Sabre\\DAV\\Exception\\ServiceUnavailable</s:exception>\n"
        f"  <s:message>{message}</s:message>\n"
        "</d:error>\n"
    ).encode()


@pytest.mark.parametrize("text", ["User disabled", "Account disabled", "Benutzer deaktiviert"])
def test_a_disabled_accounts_dav_503_is_a_refused_login_not_an_outage(text: str) -> None:
    """nextcloud/server ``apps/dav/lib/Connector/Sabre/Auth.php`` ``check`` answers the
    ``LoginException`` of a disabled account (``Session::completeLogin``) with a 503: the
    account is refused, which no retry mends (the text is translated: only the class counts)."""
    body = _sabre_503(f"OC\\User\\LoginException: {text}")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            503, content=body, headers={"Content-Type": "application/xml; charset=utf-8"}
        )

    client = client_for(handler)
    with pytest.raises(NextcloudAuthError, match="account disabled"):
        client.find_by_ids([1532])
    with pytest.raises(NextcloudAuthError):
        client.download("/Projects/Design Doc.pdf", 1_000_000)  # a streamed answer


def test_other_dav_503s_stay_outages() -> None:
    answers = [
        (_sabre_503("Doctrine\\DBAL\\Exception: database is locked"), "application/xml"),
        # apps/dav MaintenancePlugin::checkMaintenanceMode during occ maintenance:mode
        (_sabre_503("System is in maintenance mode."), "application/xml; charset=utf-8"),
        (_sabre_503("OC\\User\\LoginException: x"), "text/html"),  # not Sabre's body
        (b"<html>OC\\User\\LoginException: x</html>", "text/html; charset=UTF-8"),
        (b"<d:error", "application/xml"),
    ]
    for content, ctype in answers:

        def handler(request: httpx.Request, content=content, ctype=ctype) -> httpx.Response:
            return httpx.Response(503, content=content, headers={"Content-Type": ctype})

        with pytest.raises(NextcloudUnavailable):
            client_for(handler).find_by_ids([1532])


def test_a_folder_on_a_storage_that_cannot_be_reached_is_no_outage() -> None:
    """nextcloud/server ``apps/dav/lib/Connector/Sabre/ObjectTree.php`` ``getNodeForPath``
    answers a path on an unavailable storage (``StorageNotAvailableException``, a
    ``FailedStorage``: an external storage whose server is away) 503 "Storage is temporarily
    not available": that storage's failure (``StorageUnavailable``), not Nextcloud's; the
    same answer in maintenance mode stays an outage, and a file's download stays
    ``FileUnavailable``."""
    body = _sabre_503("Storage is temporarily not available")

    def answer(headers: dict[str, str]) -> Callable[[httpx.Request], httpx.Response]:
        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(
                503,
                content=body,
                headers={"Content-Type": "application/xml; charset=utf-8", **headers},
            )

        return handler

    with pytest.raises(StorageUnavailable):
        client_for(answer({})).propfind("/External/Reports", depth=1)
    with pytest.raises(NextcloudUnavailable) as caught:
        client_for(answer({"X-Nextcloud-Maintenance-Mode": "1"})).propfind("/External", depth=1)
    assert not isinstance(caught.value, StorageUnavailable) and caught.value.maintenance
    with pytest.raises(FileUnavailable):
        client_for(answer({})).download("/External/a.pdf", 1_000_000)


def test_a_long_dav_error_without_a_length_is_not_read_whole() -> None:
    """A streamed 5xx whose body has no ``Content-Length`` (chunked) is read only as far as a
    Sabre error body can reach (64 KiB) before it is judged an outage; before, it was read
    whole to look for a disabled account's login error (found by review)."""
    pulled: list[int] = []

    def chunks():
        for _ in range(10_000):  # 10 MB if read whole
            pulled.append(1)
            yield b"<d:error>" + b"x" * 991

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            503, stream=_Chunked(chunks()), headers={"Content-Type": "application/xml"}
        )

    with pytest.raises(FileUnavailable):  # a 503 out of maintenance: this file's failure
        client_for(handler).download("/Big.pdf", 1_000_000)
    assert len(pulled) < 100


class _Chunked(httpx.SyncByteStream):
    """A response body given chunk by chunk, with no length."""

    def __init__(self, parts) -> None:
        self.parts = parts

    def __iter__(self):
        yield from self.parts


def _ocs(status: int, code: int, message: str) -> httpx.Response:
    meta = {"status": "failure", "statuscode": code, "message": message}
    return httpx.Response(status, json={"ocs": {"meta": meta, "data": []}})


def test_only_ocs_404_user_does_not_exist_says_a_user_is_gone() -> None:
    """``GET /ocs/v2.php/cloud/users/{uid}``: OCS 404 with the message "User does not exist"
    alone is ``False`` (nextcloud/server ``AUserDataOCSController::getUserData``: no user
    from ``IUserManager::get``)."""
    client = client_for(lambda request: _ocs(404, 404, "User does not exist"))
    assert client.user_exists("carol") is False


@pytest.mark.parametrize(
    "response",
    [
        # getUserData for an admin: IUser::getHome threw NoUserException (an LDAP user no
        # longer found in LDAP: still a Nextcloud user with files and shares), rethrown as
        # OCSNotFoundException with its own message — OCS 404, HTTP 404 under v2
        _ocs(404, 404, "carol is not a valid user anymore"),
        _ocs(404, 998, ""),  # UsersController::getUser: not the caller's to see
        httpx.Response(404, text="<html><body>404 Not Found</body></html>"),  # a proxy
        httpx.Response(404, content=b""),
        httpx.Response(404, json={"ocs": {"meta": "404"}}),
        _ocs(200, 404, "User does not exist"),  # a v1 answer: no user's data
    ],
)
def test_any_other_answer_about_a_user_is_no_answer(response: httpx.Response) -> None:
    client = client_for(lambda request: response)
    with pytest.raises(NextcloudProtocolError):
        client.user_exists("carol")
