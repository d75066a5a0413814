"""Security: the webhook secret is compared in constant time; every endpoint that needs
credentials answers 401 without them; user B never receives user A's private documents, for
any query and filter (a property test through the whole stack); the context endpoint refuses
documents the caller cannot read; snippets are XSS-safe; body and field size limits hold, also
for chunked uploads without Content-Length; rate limits answer 429 and an RCP batch cannot
multiply them; a Nextcloud session cookie is never replayed; malformed credentials and odd
Nextcloud answers at login are 401, never echoing the credential.
"""

from __future__ import annotations

import base64
import hmac
import json
import re
import secrets
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr
from rel_support import (
    ALICE_PRIVATE,
    BOB_PRIVATE,
    SHARED,
    fuzz_settings,
    keys_of,
    snippet_is_safe,
    visible_keys,
)
from werkzeug.serving import make_server

import webhook_receiver.hooks
from ncindex.search.rcp import MAX_BATCH
from ncindex.settings import Settings
from search_api import create_app as create_search_app
from support import PASSWORDS, Stack, check_hints_leak_nothing
from webhook_receiver import create_app as create_receiver_app

WRITTEN = "OCP\\Files\\Events\\Node\\NodeWrittenEvent"
RECEIVER_PUBLIC = {"/livez", "/readyz", "/metrics", "/static/<path:filename>"}
SEARCH_PUBLIC = {"/livez", "/readyz", "/metrics", "/v1/filters", "/openapi.json"}
SEARCH_PUBLIC |= {"/static/<path:filename>"}
# the search page and its sign-in: no credential yet, state changes need the session's CSRF
# token (tests/search/test_ui_session.py, tests/search/test_search_page.py)
SEARCH_PUBLIC |= {"/", "/ui/static/<path:filename>", "/ui/session", "/ui/logout"}
SEARCH_PUBLIC |= {"/ui/login/flow", "/ui/login/poll", "/ui/login/cancel", "/ui/login/password"}
# RCP discovery and liveness (spec §14.1.1: answered at any time), outside the rate limit too
SEARCH_PUBLIC |= {"/rcp/<any(info, ping):method>"}
BAD_CREDENTIALS: list[dict[str, str]] = [
    {},
    {"Authorization": "Basic " + base64.b64encode(b"alice:wrong").decode()},
    {"Authorization": "Basic " + base64.b64encode(b"mallory:alice-app-pw").decode()},
    {"Authorization": "Basic !!!not-base64"},
    {"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()},
    {"Authorization": "Bearer not-a-token"},
    {"Authorization": "Token abc"},
    {"Authorization": "Basic"},
]


class RecordingProducer:
    """Stand-in for Celery's ``send_task`` that records what was sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_task(self, name: str, **_: Any) -> None:
        self.sent.append(name)


def envelope(file_id: int = 7) -> bytes:
    """A valid NodeWrittenEvent for alice."""
    body = {
        "event": {"class": WRITTEN, "node": {"id": file_id, "path": "/alice/files/a.md"}},
        "user": {"uid": "alice"},
        "time": 1767225601,
    }
    return json.dumps(body).encode()


@pytest.fixture
def receiver(redis_url: str) -> tuple[Any, Settings, RecordingProducer]:
    """The receiver app with a recording producer, on the session's Redis."""
    settings = Settings(
        redis_url=redis_url,
        webhook_secret=SecretStr(secrets.token_urlsafe(16)),
        accounts={"alice": SecretStr("pw")},
        webhook_max_body_bytes=4096,
        debounce_seconds=0,
    )
    producer = RecordingProducer()
    return create_receiver_app(settings, producer=producer).test_client(), settings, producer


# --- the webhook secret -----------------------------------------------------------------------


def test_webhook_secret_is_checked_with_compare_digest(
    receiver: tuple[Any, Settings, RecordingProducer], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, settings, producer = receiver
    secret = settings.webhook_secret.get_secret_value()
    calls: list[tuple[Any, Any]] = []
    verdict: dict[str, bool | None] = {"force": None}
    compare_digest = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        real = compare_digest(a, b)
        return real if verdict["force"] is None else bool(verdict["force"])

    monkeypatch.setattr(webhook_receiver.hooks.hmac, "compare_digest", spy)
    header = settings.webhook_secret_header

    assert client.post("/hooks/nextcloud", data=envelope(), headers={header: secret}).status_code
    assert calls and {bytes(x) for x in calls[-1]} == {secret.encode()}
    calls.clear()
    response = client.post("/hooks/nextcloud", data=envelope(), headers={header: "nope"})
    assert response.status_code == 401 and len(calls) == 1
    # compare_digest's verdict is the only verdict: forcing it flips the answer both ways
    verdict["force"] = False
    assert (
        client.post("/hooks/nextcloud", data=envelope(), headers={header: secret}).status_code
        == 401
    )
    verdict["force"] = True
    sent = len(producer.sent)
    assert (
        client.post("/hooks/nextcloud", data=envelope(8), headers={header: "nope"}).status_code
        == 202
    )
    assert len(producer.sent) == sent + 1


@pytest.mark.parametrize(
    "value",
    ["", " ", "x", "\u00e9", "secret\x00", "a" * 10_000],
)
def test_odd_secret_headers_are_401_not_500(
    receiver: tuple[Any, Settings, RecordingProducer], value: str
) -> None:
    client, settings, _ = receiver
    response = client.post(
        "/hooks/nextcloud",
        data=envelope(),
        headers={settings.webhook_secret_header: value},
    )
    assert response.status_code == 401
    assert response.get_json()["code"] == "unauthenticated"


# --- 401 on every endpoint that needs credentials ---------------------------------------------


def _concrete(rule: str) -> str:
    return (
        rule.replace("<doc_type>", "file")
        .replace("<path:doc_id>", "1")
        .replace("<path:method>", "retrieve")
    )


def test_every_receiver_endpoint_needing_the_secret_is_401_without_it(
    receiver: tuple[Any, Settings, RecordingProducer],
) -> None:
    client, settings, producer = receiver
    app = client.application
    guarded = [r for r in app.url_map.iter_rules() if r.rule not in RECEIVER_PUBLIC]
    assert {r.rule for r in guarded} == {"/hooks/nextcloud"}
    for rule in guarded:
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            for headers in ({}, {settings.webhook_secret_header: "wrong"}):
                response = client.open(_concrete(rule.rule), method=method, data=envelope(),
                                       headers=headers)  # fmt: skip
                assert response.status_code == 401, (rule.rule, method, headers)
                assert response.get_json()["code"] == "unauthenticated"
    assert producer.sent == []


def _rpc(method: str, params: dict[str, Any] | None = None) -> bytes:
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    return json.dumps(message).encode()


def test_every_search_endpoint_needing_credentials_is_401_without_them(
    corpus_stack: Stack,
) -> None:
    client = corpus_stack.search
    app = corpus_stack.search_app
    guarded = [r for r in app.url_map.iter_rules() if r.rule not in SEARCH_PUBLIC]
    assert {r.rule for r in guarded} == {
        "/v1/search",
        "/v1/documents/<doc_type>/<path:doc_id>/context",
        "/v1/folders",
        "/v1/tags",
        "/v1/categories",
        "/v1/owners",
        "/rcp/<path:method>",
        "/v1/status",
    }, "a new endpoint: decide whether it needs credentials"
    shared_id = sorted(keys_of(corpus_stack.sim, "alice", SHARED))[0].split(":")[1]
    requests = {
        "/v1/search": ("POST", json.dumps({"query": "lighthouse"}).encode()),
        "/v1/documents/<doc_type>/<path:doc_id>/context": ("GET", None),
        "/v1/folders": ("GET", None),
        "/v1/tags": ("GET", None),
        "/v1/categories": ("GET", None),
        "/v1/owners": ("GET", None),
        "/v1/status": ("GET", None),
    }
    for rule in guarded:
        for headers in BAD_CREDENTIALS:
            if rule.rule.startswith("/rcp/"):
                for method in ("initialize", "retrieve"):
                    params = {"query": "lighthouse"} if method == "retrieve" else {}
                    response = client.post(f"/rcp/{method}", data=_rpc(method, params),
                                           headers=headers)  # fmt: skip
                    assert response.status_code == 401, (method, headers, response.data)
                    assert response.get_json()["error"]["code"] == -32012
                continue
            verb, body = requests[rule.rule]
            path = _concrete(rule.rule).replace("/file/1/", f"/file/{shared_id}/")
            response = client.open(path, method=verb, data=body, headers=headers)
            assert response.status_code == 401, (rule.rule, headers, response.get_json())
            assert response.mimetype == "application/problem+json"
            assert response.get_json()["code"] == "unauthenticated"
            assert response.headers["WWW-Authenticate"].startswith("Basic")
    for headers in BAD_CREDENTIALS:  # open by design (RCP discovery and liveness)
        for method in ("info", "ping"):
            response = client.post(f"/rcp/{method}", data=_rpc(method), headers=headers)
            assert response.status_code == 200 and "result" in response.get_json()


# --- user B never receives user A's private documents -----------------------------------------

WORDS = [
    "lighthouse",
    "harbour",
    "oyster",
    "budget",
    "compressor",
    "diary",
    "salary",
    "secret",
    "recipe",
    "soup",
    "tulips",
    "lens",
    "keeper",
    "report",
    "minutes",
    "plan",
    "garden",
    "alice",
    "bob",
    "private",
    "shared",
    "script",
    "alert",
]
queries = st.one_of(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
    # what a search takes: no NUL, and a printable character besides spaces (else 400)
    st.text(min_size=1, max_size=30).filter(
        lambda q: "\x00" not in q and any(c.isprintable() and not c.isspace() for c in q)
    ),
)
PRIVATE_PATHS = [*ALICE_PRIVATE, *BOB_PRIVATE, *SHARED, "/Private", "/Notes", "/Work", "/Shared"]
filters = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"field": st.sampled_from(["path_prefix", "path"]), "op": st.sampled_from(["eq", "in"])},
    ).flatmap(
        lambda leaf: st.sampled_from(PRIVATE_PATHS).map(
            lambda p: leaf | {"value": [p] if leaf["op"] == "in" else p}
        )
    ),
    st.builds(
        lambda u: {"field": "owner", "op": "eq", "value": u}, st.sampled_from(["alice", "bob"])
    ),
    st.builds(
        lambda u: {"not": {"field": "owner", "op": "eq", "value": u}},
        st.sampled_from(["alice", "bob", "carol"]),
    ),
    st.just(
        {
            "or": [
                {"field": "doc_type", "op": "in", "value": ["note", "file"]},
                {"field": "owner", "op": "exists", "value": True},
            ]
        }
    ),
    st.just({"not": {"field": "size", "op": "lt", "value": 0}}),
)
extras = st.fixed_dictionaries(
    {},
    optional={
        "doc_types": st.lists(st.sampled_from(["note", "file"]), min_size=1, max_size=2),
        "path_prefixes": st.lists(st.sampled_from(PRIVATE_PATHS), min_size=1, max_size=3),
        "fusion": st.sampled_from(["rrf", "dbsf"]),
    },
)


@fuzz_settings(ci_examples=60)
@given(
    user=st.sampled_from(["alice", "bob", "carol"]),
    query=queries,
    flt=filters,
    extra=extras,
)
def test_no_user_ever_receives_another_users_private_documents(
    corpus_stack: Stack, user: str, query: str, flt: Any, extra: dict[str, Any]
) -> None:
    sim = corpus_stack.sim
    body: dict[str, Any] = {"query": query, "limit": 100, **extra}
    if flt is not None:
        body["filter"] = flt
    response = corpus_stack.search.post("/v1/search", json=body, auth=(user, PASSWORDS[user]))
    assert response.status_code == 200, (body, response.get_json())
    answer = response.get_json()
    # a hint names a path or owner only others' documents hold as it names one nobody's
    check_hints_leak_nothing(
        body,
        answer,
        lambda again: corpus_stack.search.post(
            "/v1/search", json=again, auth=(user, PASSWORDS[user])
        ).get_json(),
    )
    got = {f"{r['doc_type']}:{r['doc_id']}" for r in answer["results"]}
    assert got <= visible_keys(sim, user), (user, body, got - visible_keys(sim, user))
    if user != "alice":
        assert not got & keys_of(sim, "alice", ALICE_PRIVATE)
        assert not got & keys_of(sim, "alice", SHARED) if user == "carol" else True
    if user != "bob":
        assert not got & keys_of(sim, "bob", BOB_PRIVATE)
    # the store's ACL filter kept them out; verify-on-read had nothing to drop
    assert answer["verification"]["dropped"] == 0, answer["verification"]
    for result in answer["results"]:
        path = result.get("path")
        assert path is None or path == sim.path_of(user, int(result["doc_id"])), result


def test_rcp_retrieve_never_returns_another_users_documents(corpus_stack: Stack) -> None:
    client = corpus_stack.search
    auth = ("bob", PASSWORDS["bob"])
    assert client.post("/rcp/initialize", data=_rpc("initialize"), auth=auth).status_code == 200
    response = client.post(
        "/rcp/retrieve", data=_rpc("retrieve", {"query": "alice diary salary recipe", "k": 50}),
        auth=auth,
    )  # fmt: skip
    assert response.status_code == 200, response.data
    hits = {hit["id"] for hit in response.get_json()["result"]["hits"]}
    assert hits and hits <= visible_keys(corpus_stack.sim, "bob")


# --- the context endpoint ---------------------------------------------------------------------


def _context(stack: Stack, user: str, key: str, **args: Any) -> Any:
    doc_type, doc_id = key.split(":")
    return stack.search.get(
        f"/v1/documents/{doc_type}/{doc_id}/context",
        query_string=args,
        auth=(user, PASSWORDS[user]),
    )


@fuzz_settings(ci_examples=30)
@given(
    user=st.sampled_from(["bob", "carol"]),
    path=st.sampled_from(sorted(ALICE_PRIVATE)),
    chunk_index=st.integers(min_value=0, max_value=5),
    window=st.integers(min_value=0, max_value=20),
)
def test_context_refuses_documents_the_caller_cannot_read(
    corpus_stack: Stack, user: str, path: str, chunk_index: int, window: int
) -> None:
    key = next(iter(keys_of(corpus_stack.sim, "alice", {path: ""})))
    response = _context(corpus_stack, user, key, chunk_index=chunk_index, window=window)
    assert response.status_code == 404, response.get_json()
    assert response.get_json()["code"] == "not_found"
    assert ALICE_PRIVATE[path][:20] not in response.get_data(as_text=True)


def test_context_serves_readable_documents(corpus_stack: Stack) -> None:
    for key in keys_of(corpus_stack.sim, "alice", SHARED):
        for user in ("alice", "bob"):
            response = _context(corpus_stack, user, key)
            assert response.status_code == 200, (user, key, response.get_json())
        assert _context(corpus_stack, "carol", key).status_code == 404


# --- snippets are XSS-safe --------------------------------------------------------------------

hostile_queries = st.one_of(
    st.sampled_from(
        [
            "<script>alert(1)</script> lighthouse",
            "hostile script alert img onerror",
            '"><mark>x</mark> harbour',
            "&lt;script&gt; lighthouse &amp;",
            "mark fake marks quotes",
            "<img src=x onerror=alert(1)>",
        ]
    ),
    st.text(alphabet="<>&\"'/ =abclrmkpistghouse", min_size=1, max_size=40).filter(str.strip),
)


@fuzz_settings(ci_examples=40)
@given(query=hostile_queries)
def test_snippets_are_escaped_for_hostile_text_and_queries(corpus_stack: Stack, query: str) -> None:
    response = corpus_stack.search.post(
        "/v1/search", json={"query": query, "limit": 100}, auth=("alice", PASSWORDS["alice"])
    )
    assert response.status_code == 200, response.get_json()
    assert response.mimetype == "application/json"
    for result in response.get_json()["results"]:
        assert snippet_is_safe(result["snippet"]), (query, result["snippet"])


def test_hostile_document_snippet_is_escaped_and_marked(corpus_stack: Stack) -> None:
    key = next(iter(keys_of(corpus_stack.sim, "alice", {"/Private/hostile.md": ""})))
    answer = corpus_stack.search.post(
        "/v1/search",
        json={"query": "hostile script alert lighthouse", "limit": 100},
        auth=("alice", PASSWORDS["alice"]),
    ).get_json()
    snippet = next(
        r["snippet"] for r in answer["results"] if f"{r['doc_type']}:{r['doc_id']}" == key
    )
    assert snippet_is_safe(snippet), snippet
    assert "&lt;script&gt;" in snippet or "&lt;" in snippet, snippet
    assert re.search(r"<mark>[^<]*</mark>", snippet), snippet


# --- body and field size limits ---------------------------------------------------------------


def _chunks(data: bytes, size: int = 1000) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.fixture
def served_search(corpus_stack: Stack) -> Iterator[str]:
    """The corpus stack's search app over real HTTP (werkzeug, threaded); its base URL."""
    httpd = make_server("127.0.0.1", 0, corpus_stack.search_app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.port}"
    httpd.shutdown()
    thread.join(timeout=5)


def _oversized(corpus_stack: Stack, endpoint: str) -> tuple[str, bytes, dict[str, str]]:
    """URL, an over-the-limit body and the headers for ``endpoint`` (receiver/search/rcp)."""
    settings = corpus_stack.settings
    if endpoint == "receiver":
        raw = json.loads(envelope(10**9))
        raw["padding"] = "x" * (settings.webhook_max_body_bytes + 10)
        secret = {settings.webhook_secret_header: settings.webhook_secret.get_secret_value()}
        return f"{corpus_stack.receiver_url}/hooks/nextcloud", json.dumps(raw).encode(), secret
    body = json.dumps({"query": "lighthouse", "pad": "x" * 70_000}).encode()
    return f"/{'v1/search' if endpoint == 'search' else 'rcp/retrieve'}", body, {}


def _too_large(endpoint: str, response: httpx.Response) -> bool:
    if response.status_code != 413:
        return False
    if endpoint == "rcp":
        return response.json()["error"]["code"] == -32013
    return response.json()["code"] == "payload_too_large"


@pytest.mark.parametrize("endpoint", ["receiver", "search", "rcp"])
def test_body_limit_with_content_length(
    corpus_stack: Stack, served_search: str, endpoint: str
) -> None:
    url, body, headers = _oversized(corpus_stack, endpoint)
    url = url if url.startswith("http") else served_search + url
    with httpx.Client(timeout=30, auth=("alice", PASSWORDS["alice"])) as client:
        response = client.post(url, content=body, headers=headers)
    assert _too_large(endpoint, response), response.text[:300]


@pytest.mark.parametrize("endpoint", ["receiver", "search", "rcp"])
def test_body_limit_without_content_length(
    corpus_stack: Stack, served_search: str, endpoint: str
) -> None:
    url, body, headers = _oversized(corpus_stack, endpoint)
    url = url if url.startswith("http") else served_search + url
    with httpx.Client(timeout=30, auth=("alice", PASSWORDS["alice"])) as client:
        response = client.post(url, content=_chunks(body, 65_536), headers=headers)
    assert "content-length" not in {k.lower() for k in response.request.headers}
    assert _too_large(endpoint, response), response.text[:300]


def test_small_chunked_bodies_are_read_whole(corpus_stack: Stack, served_search: str) -> None:
    settings = corpus_stack.settings
    secret = {settings.webhook_secret_header: settings.webhook_secret.get_secret_value()}
    with httpx.Client(timeout=30, auth=("alice", PASSWORDS["alice"])) as client:
        hook = client.post(
            f"{corpus_stack.receiver_url}/hooks/nextcloud",
            content=_chunks(envelope(10**9), 7),
            headers=secret,
        )
        assert hook.status_code == 202, hook.text[:300]
        found = client.post(f"{served_search}/v1/search", content=_chunks(b'{"query": "oy"}', 3))
        assert found.status_code == 200, found.text[:300]


LEAF = {"field": "owner", "op": "eq", "value": "alice"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x" * 1001}, "query"),
        ({"query": "x", "limit": 101}, "limit"),
        ({"query": "x", "category": "c" * 1025}, "category"),
        ({"query": "x", "filter": {"field": "owner", "op": "in", "value": ["a"] * 257}}, None),
        ({"query": "x", "filter": {"and": [LEAF] * 65}}, None),
        ({"query": "x", "filter": json.loads('{"not": ' * 9 + json.dumps(LEAF) + "}" * 9)}, None),
        ({"query": "x", "path_prefixes": ["/a"] * 10_000}, "path_prefixes"),
        ({"query": "x", "tags": ["t" * 100_000]}, None),
    ],
)
def test_field_limits_are_400_naming_the_field(
    corpus_stack: Stack, body: dict[str, Any], field: str | None
) -> None:
    response = corpus_stack.search.post("/v1/search", json=body, auth=("alice", PASSWORDS["alice"]))
    assert response.status_code in (400, 413), response.get_json()
    problem = response.get_json()
    assert problem["code"] in ("invalid_value", "invalid_filter", "payload_too_large"), problem
    if response.status_code == 400:
        assert problem["field"].startswith(field or "filter"), problem


def test_context_doc_id_and_window_limits(corpus_stack: Stack) -> None:
    auth = ("alice", PASSWORDS["alice"])
    client = corpus_stack.search
    response = client.get("/v1/documents/file/" + "1" * 300 + "/context", auth=auth)
    assert response.status_code == 400 and response.get_json()["field"] == "doc_id"
    response = client.get("/v1/documents/file/1/context?window=21", auth=auth)
    assert response.status_code == 400 and response.get_json()["field"] == "window"
    response = client.get("/v1/documents/file/1/context?chunk_index=-1", auth=auth)
    assert response.status_code == 400 and response.get_json()["field"] == "chunk_index"


# --- rate limits ------------------------------------------------------------------------------


# flask-limiter's Redis keys: "LIMITS:LIMITER/ncindex:ratelimit/<caller>/search/5/1/minute"
RATE_LIMIT_KEYS = "LIMITS:*ncindex:ratelimit/*"


@pytest.fixture
def limited(corpus_stack: Stack) -> Iterator[Any]:
    """A second search app on the corpus stack's services with a 5/minute limit (counters in
    the stack's Redis, cleared before and after)."""
    client = corpus_stack.services.redis
    for key in client.scan_iter(RATE_LIMIT_KEYS):
        client.delete(key)
    settings = corpus_stack.settings.model_copy(update={"search_rate_limit": "5/minute"})
    app = create_search_app(settings, services=corpus_stack.services, producer=RecordingProducer())
    yield app.test_client()
    for key in client.scan_iter(RATE_LIMIT_KEYS):
        client.delete(key)


def test_rate_limit_is_429_per_caller_across_endpoints(limited: Any, corpus_stack: Stack) -> None:
    alice = ("alice", PASSWORDS["alice"])
    codes = [limited.post("/v1/search", json={"query": "oyster"}, auth=alice).status_code
             for _ in range(5)]  # fmt: skip
    assert codes == [200] * 5
    response = limited.post("/v1/search", json={"query": "oyster"}, auth=alice)
    assert response.status_code == 429
    assert response.get_json()["code"] == "rate_limited"
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    key = sorted(keys_of(corpus_stack.sim, "alice", SHARED))[0]
    doc_type, doc_id = key.split(":")
    assert limited.get(f"/v1/documents/{doc_type}/{doc_id}/context", auth=alice).status_code == 429
    rpc = limited.post("/rcp/retrieve", data=_rpc("retrieve", {"query": "x"}), auth=alice)
    assert rpc.status_code == 429 and rpc.get_json()["error"]["code"] == -32011
    bob = ("bob", PASSWORDS["bob"])
    assert limited.post("/v1/search", json={"query": "oyster"}, auth=bob).status_code == 200
    assert limited.get("/v1/filters").status_code == 200


def test_anonymous_flood_is_rate_limited(limited: Any) -> None:
    codes = [limited.post("/v1/search", json={"query": "x"}).status_code for _ in range(8)]
    assert codes[:5] == [401] * 5
    assert 429 in codes[5:], codes


def test_password_guessing_is_rate_limited(limited: Any) -> None:
    codes = []
    for guess in range(12):
        token = base64.b64encode(f"alice:guess-{guess}".encode()).decode()
        response = limited.post(
            "/v1/search", json={"query": "x"}, headers={"Authorization": f"Basic {token}"}
        )
        codes.append(response.status_code)
    assert 429 in codes, codes


def test_the_pages_sign_in_counts_against_the_login_name_from_any_address(limited: Any) -> None:
    """Its request carries the login name in its body, not in an Authorization header, so
    only the client's address was counted: guesses at bob's app password from many addresses
    were never stopped. Nextcloud finds a login whatever its case."""
    from ncindex.web.session import CSRF_HEADER

    csrf = limited.get("/ui/session").get_json()["csrf"]
    codes = []
    for i, name in enumerate(["bob", "BOB", "Bob", "bob", "bOb", "bob", "bob"]):
        response = limited.post(
            "/ui/login/password",
            json={"login_name": name, "app_password": f"guess-{i}"},
            headers={CSRF_HEADER: csrf},
            environ_base={"REMOTE_ADDR": f"198.51.100.{i + 1}"},
        )
        codes.append(response.status_code)
    assert codes[:5] == [401] * 5 and codes[5:] == [429] * 2, codes
    assert response.get_json()["field"] == "login_name" and response.headers["Retry-After"]


@pytest.mark.parametrize("kind", ["bearer", "basic"])
def test_made_up_credentials_are_rate_limited_per_address(limited: Any, kind: str) -> None:
    # each made-up token or user name is a caller of its own: refused credentials count
    # against the client address, so the flood stops before Nextcloud sees all of it
    codes = []
    for n in range(8):
        secret = secrets.token_urlsafe(12)
        if kind == "basic":
            secret = base64.b64encode(f"nobody-{n}:{secret}".encode()).decode()
        header = {"Authorization": f"{kind.title()} {secret}"}
        codes.append(limited.post("/v1/search", json={"query": "x"}, headers=header).status_code)
    assert codes[:5] == [401] * 5
    assert codes[5:] == [429] * 3, codes


@pytest.mark.parametrize("method", ["retrieve", "initialize"])
def test_rcp_batches_of_refused_credentials_count_per_address_as_rest_401s(
    limited: Any, method: str
) -> None:
    """A batch is answered HTTP 200 (one array, each message its own -32012) even when every
    message was refused, so the per-address count of refused credentials, which counted only
    401 answers, never counted one: made-up credentials could be tried batch after batch,
    each one refused login in Nextcloud, without being slowed. A refused batch now counts
    once (one Nextcloud login: the batch asks once), as a refused REST request does, and once
    the address is over the limit a batch is refused as REST is: HTTP 429, -32011 with
    ``retryAfterMs``, ``Retry-After``; the REST API shares the count."""
    statuses, replies = [], []
    for n in range(7):  # from the same address, each batch a made-up user of its own
        made_up = base64.b64encode(f"nobody-{n}:{secrets.token_urlsafe(12)}".encode()).decode()
        batch = [
            {"jsonrpc": "2.0", "id": i, "method": method, "params": {"query": "x"}}
            for i in range(MAX_BATCH)
        ]
        response = limited.post(
            f"/rcp/{method}", data=json.dumps(batch), headers={"Authorization": f"Basic {made_up}"}
        )
        statuses.append(response.status_code)
        replies.append(response)
    assert statuses == [200] * 5 + [429] * 2, statuses  # one count per batch, not per message
    for refused in replies[:5]:
        assert [r["error"]["code"] for r in refused.get_json()] == [-32012] * MAX_BATCH
    limited_reply = replies[5]
    assert 1 <= int(limited_reply.headers["Retry-After"]) <= 60
    body = limited_reply.get_json()
    assert body["id"] is None and body["error"]["code"] == -32011, body
    assert body["error"]["data"]["retryable"] is True and body["error"]["data"]["retryAfterMs"]
    # REST draws on the same count for this address
    rest = limited.post("/v1/search", json={"query": "x"}, headers={"Authorization": "Bearer x"})
    assert rest.status_code == 429 and rest.get_json()["code"] == "rate_limited"


def test_a_flood_of_refused_credentials_does_not_lock_out_confirmed_callers(
    limited: Any, corpus_stack: Stack
) -> None:
    from ncindex.runtime import Services

    # the corpus stack caches no logins: this app does (user_cache_seconds), as deployed
    settings = corpus_stack.settings.model_copy(
        update={"search_rate_limit": "5/minute", "user_cache_seconds": 60}
    )
    services = Services(
        settings, store=corpus_stack.services.store, embedder=corpus_stack.services.embedder
    )
    app = create_search_app(settings, services=services, producer=RecordingProducer())
    http = app.test_client()
    alice = ("alice", PASSWORDS["alice"])
    assert http.post("/v1/search", json={"query": "oyster"}, auth=alice).status_code == 200
    codes = []
    for n in range(8):  # from the same address
        made_up = base64.b64encode(f"nobody-{n}:{secrets.token_urlsafe(12)}".encode()).decode()
        header = {"Authorization": f"Basic {made_up}"}
        codes.append(http.post("/v1/search", json={"query": "x"}, headers=header).status_code)
    assert codes[5:] == [429] * 3, codes  # the address's budget for refusals is spent
    # alice was confirmed before the flood; bob was not (his first search needs a login)
    assert http.post("/v1/search", json={"query": "oyster"}, auth=alice).status_code == 200
    bob = ("bob", PASSWORDS["bob"])
    assert http.post("/v1/search", json={"query": "oyster"}, auth=bob).status_code == 429
    for key in corpus_stack.services.redis.scan_iter("ncindex:auth:*"):
        corpus_stack.services.redis.delete(key)


def _limited_behind(corpus_stack: Stack, hops: int) -> Any:
    """A search app like ``limited``'s (5/minute) trusting ``hops`` proxies."""
    settings = corpus_stack.settings.model_copy(
        update={"search_rate_limit": "5/minute", "trusted_proxy_hops": hops}
    )
    app = create_search_app(settings, services=corpus_stack.services, producer=RecordingProducer())
    return app.test_client()


def _session_codes(http: Any, forwarded_for: str, n: int = 6) -> list[int]:
    """Status codes of ``n`` cookie-less ``GET /ui/session`` (counted per address) arriving
    from the proxy at 10.0.0.2 with ``X-Forwarded-For: forwarded_for``."""
    return [
        http.get(
            "/ui/session",
            headers={"X-Forwarded-For": forwarded_for},
            environ_base={"REMOTE_ADDR": "10.0.0.2"},
        ).status_code
        for _ in range(n)
    ]


def test_behind_a_trusted_proxy_each_client_address_has_its_own_count(
    limited: Any, corpus_stack: Stack
) -> None:
    """Behind an ingress every request came from its address: all anonymous callers shared one
    count, so one of them locked out the rest. With ``trusted_proxy_hops`` 1 the client is the
    address the proxy appended to ``X-Forwarded-For``; what the client wrote left of it is
    not trusted."""
    http = _limited_behind(corpus_stack, 1)
    assert _session_codes(http, "198.51.100.7") == [200] * 5 + [429]
    # another client behind the same proxy, and one forging the first one's address
    assert _session_codes(http, "198.51.100.8", 5) == [200] * 5
    assert _session_codes(http, "198.51.100.7, 203.0.113.9", 5) == [200] * 5
    # refused credentials count per client address too
    codes = [
        http.post(
            "/v1/search",
            json={"query": "x"},
            headers={"Authorization": f"Bearer {n}", "X-Forwarded-For": "203.0.113.50"},
            environ_base={"REMOTE_ADDR": "10.0.0.2"},
        ).status_code
        for n in range(6)
    ]
    assert codes == [401] * 5 + [429]
    other = {"Authorization": "Bearer other", "X-Forwarded-For": "203.0.113.51"}
    response = http.post(
        "/v1/search", json={"query": "x"}, headers=other, environ_base={"REMOTE_ADDR": "10.0.0.2"}
    )
    assert response.status_code == 401


def test_without_trusted_proxies_a_forged_forwarded_for_is_ignored(
    limited: Any, corpus_stack: Stack
) -> None:
    """The default trusts no ``X-Forwarded-For``: a client changing it at every request still
    draws on its own address's one count."""
    http = _limited_behind(corpus_stack, 0)
    codes = [c for i in range(6) for c in _session_codes(http, f"198.51.100.{i + 1}", 1)]
    assert codes == [200] * 5 + [429]


def test_rate_limit_counters_are_the_fixtures_keys(limited: Any, corpus_stack: Stack) -> None:
    """The ``limited`` fixture clears counters by :data:`RATE_LIMIT_KEYS`: it must match the
    keys the limiter writes, or counts leak from one rate-limit test into the next."""
    assert limited.post("/v1/search", json={"query": "x"}).status_code == 401
    counters = list(corpus_stack.services.redis.scan_iter("*ratelimit*"))
    assert counters and counters == list(corpus_stack.services.redis.scan_iter(RATE_LIMIT_KEYS))


def test_an_rcp_batch_cannot_multiply_the_rate_limit(limited: Any) -> None:
    """A batch counts once against the limit, so a large one is refused whole (-32013): one
    unit of a 5/minute limit buys at most ``MAX_BATCH`` retrieves."""
    alice = ("alice", PASSWORDS["alice"])
    assert limited.post("/rcp/initialize", data=_rpc("initialize"), auth=alice).status_code == 200
    batch = [
        {"jsonrpc": "2.0", "id": i, "method": "retrieve", "params": {"query": f"lighthouse {i}"}}
        for i in range(30)
    ]
    response = limited.post("/rcp/retrieve", data=json.dumps(batch), auth=alice)
    assert response.status_code == 200
    reply = response.get_json()
    assert isinstance(reply, dict) and reply["error"]["code"] == -32013, reply
    allowed = limited.post("/rcp/retrieve", data=json.dumps(batch[:MAX_BATCH]), auth=alice)
    assert sum("result" in r for r in allowed.get_json()) <= MAX_BATCH


class CookieSettingNextcloud(httpx.BaseTransport):
    """Forwards to the simulator and, like Nextcloud answering Basic auth, sets a session
    cookie on every answer; records each request's ``Cookie`` header."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.cookies: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.cookies.append(request.headers.get("Cookie"))
        response = self.inner.handle_request(request)
        content = response.read()
        headers = {"Content-Type": response.headers.get("Content-Type", "")}
        response.close()
        cookie = f"nc_session_id={secrets.token_hex(8)}; Path=/; HttpOnly"
        return httpx.Response(
            response.status_code, headers=[*headers.items(), ("Set-Cookie", cookie)],
            content=content,
        )  # fmt: skip

    def close(self) -> None:
        self.inner.close()


def test_a_nextcloud_session_cookie_is_never_sent_again(corpus_stack: Stack) -> None:
    """The search app's one pooled Nextcloud client must not replay a cookie set on alice's
    login with bob's or an anonymous caller's requests (Nextcloud may honour the session)."""
    from ncindex.runtime import Services

    transport = CookieSettingNextcloud()
    services = Services(
        corpus_stack.settings,
        http_transport=transport,
        store=corpus_stack.services.store,
        embedder=corpus_stack.services.embedder,
    )
    app = create_search_app(corpus_stack.settings, services=services, producer=RecordingProducer())
    client = app.test_client()
    try:
        for auth in (("alice", PASSWORDS["alice"]), ("bob", PASSWORDS["bob"])):
            assert client.post("/v1/search", json={"query": "diary"}, auth=auth).status_code == 200
        junk = {"Authorization": "Bearer junk"}
        assert client.post("/v1/search", json={"query": "diary"}, headers=junk).status_code == 401
    finally:
        services.http.close()  # not services.close(): the store and embedder are the stack's
    assert len(transport.cookies) > 3 and not any(transport.cookies), transport.cookies


@pytest.mark.parametrize("status", [400, 403, 404, 405, 412, 431])
def test_an_odd_nextcloud_answer_at_login_is_401(corpus_stack: Stack, status: int) -> None:
    sim = corpus_stack.sim
    alice = ("alice", PASSWORDS["alice"])
    sim.faults.set("ocs", status=status)
    try:
        search = corpus_stack.search.post("/v1/search", json={"query": "x"}, auth=alice)
        rpc = corpus_stack.search.post("/rcp/initialize", data=_rpc("initialize"), auth=alice)
    finally:
        sim.faults.clear()
    assert search.status_code == 401 and search.get_json()["code"] == "unauthenticated"
    assert rpc.status_code == 401 and rpc.get_json()["error"]["code"] == -32012


@pytest.mark.parametrize(
    "suffix",
    [" \x01", "\x7f", " \xe9", "x" * 9_000, "x" * 70_000],
    ids=["control", "del", "latin1", "9k", "70k"],
)
def test_a_malformed_authorization_is_401_without_nextcloud_and_never_echoed(
    corpus_stack: Stack, suffix: str
) -> None:
    """Such a header reached httpx, whose refusal (quoting the credential) was a 503 detail."""
    credential = base64.b64encode(f"alice:{PASSWORDS['alice']}".encode()).decode()
    headers = {"Authorization": f"Basic {credential}{suffix}"}
    key = sorted(keys_of(corpus_stack.sim, "alice", SHARED))[0].replace(":", "/")
    before = corpus_stack.sim.request_count("ocs")
    client = corpus_stack.search
    answers = [
        client.post("/v1/search", json={"query": "x"}, headers=headers),
        client.get(f"/v1/documents/{key}/context", headers=headers),
        client.post("/rcp/initialize", data=_rpc("initialize"), headers=headers),
    ]
    assert [a.status_code for a in answers] == [401] * 3
    assert not any(credential in a.get_data(as_text=True) for a in answers)
    assert corpus_stack.sim.request_count("ocs") == before
