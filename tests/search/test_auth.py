"""Caller authentication (``ncindex.web.auth``) against ``httpx.MockTransport``: malformed headers
are refused before Nextcloud is asked, any answer but the user's id is 401, and no message
quotes the credential. Also how the simulator answers a header werkzeug cannot parse."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest
import redis
from werkzeug.test import Client

from ncindex.errors import NextcloudProtocolError, NextcloudUnavailable, Unauthenticated
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator
from ncindex.web.auth import MAX_AUTHORIZATION_CHARS, resolve_caller

CREDENTIAL = base64.b64encode(b"alice:alice-app-pw").decode()
VALID = f"Basic {CREDENTIAL}"
USER_JSON = {"ocs": {"meta": {"status": "ok", "statuscode": 200}, "data": {"id": "alice"}}}


class Nextcloud:
    """A MockTransport handler answering ``cloud/user`` with ``status`` and ``content``;
    records the ``Authorization`` header of each request."""

    def __init__(self, status: int = 200, content: bytes = json.dumps(USER_JSON).encode()):
        self.status, self.content = status, content
        self.seen: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request.headers.get("Authorization"))
        return httpx.Response(self.status, content=self.content)


def services_for(nextcloud: Nextcloud) -> Services:
    settings = Settings(nextcloud_url="https://cloud.example.test", user_cache_seconds=0)
    return Services(settings, http_transport=httpx.MockTransport(nextcloud))


def test_a_valid_header_resolves_the_user() -> None:
    nextcloud = Nextcloud()
    assert resolve_caller(services_for(nextcloud), VALID).user == "alice"
    assert nextcloud.seen == [VALID]


@pytest.mark.parametrize(
    "header",
    [VALID + "  ", VALID + "\t", "basic " + CREDENTIAL, "BASIC   " + CREDENTIAL],
    ids=["trailing-spaces", "trailing-tab", "lower-scheme", "upper-scheme-spaces"],
)
def test_spelling_is_normalized_before_it_is_sent(header: str) -> None:
    nextcloud = Nextcloud()
    assert resolve_caller(services_for(nextcloud), header).user == "alice"
    assert nextcloud.seen == [VALID]


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Basic",
        "Basic ",
        "Token " + CREDENTIAL,
        "Digest username=alice",
        VALID + " \x01",
        VALID + "\x7f",
        VALID + " \xe9",
        "Basic \xff\xfe\xfd",
        VALID.replace(" ", "\t"),
        VALID[:12] + "*" + VALID[13:],
        VALID + ", " + VALID,
        "Basic " + "A" * MAX_AUTHORIZATION_CHARS,
    ],
    ids=[
        "none",
        "empty",
        "scheme-only",
        "scheme-space",
        "other-scheme",
        "auth-params",
        "control-char",
        "del",
        "latin1",
        "non-ascii",
        "tab-separator",
        "not-token68",
        "two-credentials",
        "too-long",
    ],
)
def test_malformed_headers_are_refused_without_asking_nextcloud(header: str | None) -> None:
    nextcloud = Nextcloud()
    with pytest.raises(Unauthenticated) as caught:
        resolve_caller(services_for(nextcloud), header)
    assert nextcloud.seen == []
    assert CREDENTIAL not in str(caught.value)


@pytest.mark.parametrize("status", [400, 403, 404, 405, 412, 431])
def test_odd_statuses_at_login_are_unauthenticated(status: int) -> None:
    nextcloud = Nextcloud(status, b"<html><body>nope</body></html>")
    with pytest.raises(Unauthenticated) as caught:
        resolve_caller(services_for(nextcloud), VALID)
    assert nextcloud.seen == [VALID] and CREDENTIAL not in str(caught.value)


@pytest.mark.parametrize(
    "content",
    [b"<html>maintenance</html>", b'{"ocs": {"data": []}}', b'{"ocs": {"data": {"uid": 1}}}'],
    ids=["html", "no-id", "wrong-key"],
)
def test_an_unparsable_login_answer_is_unauthenticated(content: bytes) -> None:
    with pytest.raises(Unauthenticated):
        resolve_caller(services_for(Nextcloud(200, content)), VALID)


@pytest.mark.parametrize("status", [500, 503, 429])
def test_nextcloud_down_at_login_is_unavailable(status: int) -> None:
    with pytest.raises(NextcloudUnavailable):
        resolve_caller(services_for(Nextcloud(status, b"")), VALID)


@pytest.mark.parametrize(
    ("path", "headers", "check"),
    [
        (
            "/ocs/v2.php/cloud/user",
            {"OCS-APIRequest": "true", "Accept": "application/json"},
            lambda r: r.json["ocs"]["meta"]["statuscode"] == 997,
        ),
        (
            "/remote.php/dav/files/alice/",
            {},
            lambda r: b"NotAuthenticated" in r.data,
        ),
        (
            "/index.php/apps/notes/api/v1/notes",
            {},
            # nextcloud/server CORSMiddleware (before SecurityMiddleware) refuses it first
            lambda r: r.json == {"message": "CORS requires basic auth"},
        ),
    ],
    ids=["ocs", "webdav", "notes"],
)
def test_simulator_answers_a_non_ascii_authorization_with_its_401(
    path: str, headers: dict[str, str], check: object
) -> None:
    """werkzeug cannot parse such a header (it raised: HTTP 500); Nextcloud answers 401."""
    sim = NextcloudSimulator()
    sim.add_user("alice", password="alice-pw")
    try:
        for raw in ("Basic \xff\xfe\xfd", "Basic YWxpY2U6\x80"):
            response = Client(sim).open(
                path,
                method="PROPFIND" if "/dav/" in path else "GET",
                headers=headers,
                environ_overrides={"HTTP_AUTHORIZATION": raw},
            )
            assert response.status_code == 401, (raw, response.data[:200])
            assert check(response), response.data[:300]  # type: ignore[operator]
    finally:
        sim.close()


def test_a_callers_requests_carry_the_callers_address_for_nextclouds_brute_force_count() -> None:
    """Nextcloud counts a refused login against the address it came from
    (``Session::logClientIn`` → ``Throttler::registerAttempt('login', $remoteAddress)``) and
    then slows down every login from there; relayed by ncindex, a caller's wrong password
    would slow down everyone's. With ncindex in its ``trusted_proxies``, Nextcloud takes the
    address from ``X-Forwarded-For`` (``Request::getRemoteAddress``): each of the caller's
    requests carries the address the search API saw (not one the caller wrote)."""
    import flask

    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("X-Forwarded-For"))
        return httpx.Response(200, content=json.dumps(USER_JSON).encode())

    services = services_for(Nextcloud())
    services = Services(services.settings, http_transport=httpx.MockTransport(handler))
    app = flask.Flask(__name__)
    environ = {"REMOTE_ADDR": "203.0.113.7"}
    with app.test_request_context(
        environ_base=environ, headers={"X-Forwarded-For": "198.51.100.1"}
    ):
        client = resolve_caller(services, VALID)
        with pytest.raises(NextcloudProtocolError):  # a JSON answer: only its header counts
            client.find_by_ids([1])
    assert seen == ["203.0.113.7", "203.0.113.7"]
    resolve_caller(services, VALID)  # no request (a task, the CLI): nobody to stand for
    assert seen[-1] is None


@pytest.mark.parametrize(
    ("forwarded", "sent"),
    [
        ("Ã©", None),  # the bytes of "é" as a WSGI server hands them over (latin-1)
        ("not-an-address", None),
        ("198.51.100.4", "198.51.100.4"),
        ("2001:db8::7", "2001:db8::7"),
    ],
)
def test_a_forwarded_address_that_is_no_ip_address_is_not_sent_on(
    redis_url: str, forwarded: str, sent: str | None
) -> None:
    """Behind a trusted proxy (``trusted_proxy_hops`` 1) the caller's address is what the proxy
    wrote in ``X-Forwarded-For``. Sent on to Nextcloud as written, a non-ASCII value made
    every request to Nextcloud raise ``UnicodeEncodeError``: the page's sign-in and
    ``GET /v1/folders`` answered 500 and a search dropped every result. Nextcloud skips a value
    that is no IP address (``Request::getRemoteAddress``, ``FILTER_VALIDATE_IP``), so such a
    value is not sent; an IP address still is."""
    from search_api import create_app

    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("X-Forwarded-For"))
        return httpx.Response(200, content=json.dumps(USER_JSON).encode())

    settings = Settings(
        nextcloud_url="https://cloud.example.test",
        redis_url=redis_url,
        namespace="auth-forwarded",
        trusted_proxy_hops=1,
        user_cache_seconds=0,
    )
    services = Services(settings, http_transport=httpx.MockTransport(handler))
    client = create_app(settings, services=services).test_client()
    headers = {"X-Forwarded-For": forwarded}
    csrf = client.get("/ui/session", headers=headers).get_json()["csrf"]
    typed = {"login_name": "alice", "app_password": "alice-app-pw"}
    signed = client.post(
        "/ui/login/password", json=typed, headers={**headers, "X-CSRF-Token": csrf}
    )
    assert signed.status_code == 200, signed.get_json()
    assert signed.get_json()["user"] == "alice"
    assert seen == [sent]
    services.close()
    keys = redis.Redis.from_url(redis_url)
    for key in keys.scan_iter("auth-forwarded:*"):
        keys.delete(key)


CONTROLS = [
    ("alice", "alice-app-pw\n"),  # a line break pasted with the app password
    ("alice", "alice-app\x00pw"),
    ("alice", "alice-app\u0085pw"),  # a C1 control (NEL), in UTF-8
    ("al\tice", "alice-app-pw"),
    ("alice\u009b", "alice-app-pw"),
]
"""Basic credentials (login name, password) holding a control character (Unicode's Cc)."""


def lenient(token: str) -> str:
    """``token`` as Nextcloud still reads it (PHP's non-strict ``base64_decode``, which
    ``OC::handleAuthHeaders`` uses): its padding dropped and a ``-`` (no base64 character,
    skipped) put in."""
    return f"{token[:4]}-{token[4:].rstrip('=')}"


@pytest.mark.parametrize("form", ["canonical", "lenient"])
@pytest.mark.parametrize(("login", "password"), CONTROLS)
def test_a_basic_credential_holding_a_control_character_is_400_unsent(
    redis_url: str, tmp_path: Path, login: str, password: str, form: str
) -> None:
    """A Basic credential whose login name or password holds a control character (RFC 7617
    §2; PRECIS, RFC 8264 §9.12) was sent to Nextcloud, and answered 401 as a wrong password:
    400 ``invalid_value`` on ``Authorization`` from every search API route that takes one
    (``/v1/`` and RCP, -32600 with ``data.field``), and Nextcloud is not asked (failed on
    main: 401, and ``cloud/user`` asked). So for its base64 written without padding and with
    a character outside the alphabet (``lenient``), which Nextcloud decodes all the same
    (failed on 6ff912d, whose strict decode skipped the check: 200/503, ``cloud/user``
    asked)."""
    from search_api import create_app

    nextcloud = Nextcloud()
    settings = Settings(
        nextcloud_url="https://cloud.example.test",
        redis_url=redis_url,
        namespace="auth-cc",
        data_dir=tmp_path,  # the old code opened the store there
    )
    services = Services(settings, http_transport=httpx.MockTransport(nextcloud))
    client = create_app(settings, services=services).test_client()
    token = base64.b64encode(f"{login}:{password}".encode()).decode()
    headers = {"Authorization": f"Basic {token if form == 'canonical' else lenient(token)}"}
    answers = [
        client.post("/v1/search", json={"query": "x"}, headers=headers),
        client.get("/v1/documents/note/1/context", headers=headers),
        client.get("/v1/owners", headers=headers),
        client.get("/v1/status", headers=headers),
    ]
    for answer in answers:
        assert answer.status_code == 400, (answer.request.path, answer.get_json())
        problem = answer.get_json()
        assert (problem["code"], problem["field"]) == ("invalid_value", "Authorization"), problem
        assert "control character U+" in problem["detail"], problem
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    error = client.post("/rcp/initialize", json=rpc, headers=headers).get_json()["error"]
    assert (error["code"], error["data"]["field"]) == (-32600, "Authorization"), error
    assert nextcloud.seen == []
    services.close()
    keys = redis.Redis.from_url(redis_url)
    for key in keys.scan_iter("auth-cc:*"):
        keys.delete(key)
