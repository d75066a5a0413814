"""Faults on real parts, search side: Nextcloud failing or hanging while results are verified
(fail-open, counted in ``verification.errors``; a 403 drops; the context endpoint fails closed),
Nextcloud down while authenticating (503, not 401), and the vector store unreachable or closed
(503 problem+json, ``/readyz`` 503, and recovery once it is back).
"""

from __future__ import annotations

import asyncio
import base64
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from rel_support import Flaky, visible_keys
from starlette.testclient import TestClient

from mcp_server.app import create_app as create_mcp_app
from ncindex.redis_breaker import RedisBreaker, RedisSkipped
from ncindex.redis_server import RedisProcess
from ncindex.web.asgi import serve_in_thread
from support import PASSWORDS, Clock, Stack

# --- search verification against a failing Nextcloud: fail-open, counted ----------------------


@pytest.mark.parametrize(
    "fault",
    [{"status": 503}, {"status": 502}, {"timeout": True}],
    ids=["503", "502", "hang"],
)
def test_verification_fails_open_and_counts_errors(
    corpus_stack: Stack, fault: dict[str, Any]
) -> None:
    auth = ("alice", PASSWORDS["alice"])
    body = {"query": "lighthouse harbour oyster", "limit": 20}
    healthy = corpus_stack.search.post("/v1/search", json=body, auth=auth).get_json()
    assert healthy["results"] and healthy["verification"]["errors"] == 0
    families = ("webdav", "dav-search", "notes")
    try:
        for family in families:
            corpus_stack.sim.faults.set(family, **fault)
        response = corpus_stack.search.post("/v1/search", json=body, auth=auth)
    finally:
        corpus_stack.sim.faults.clear()
    assert response.status_code == 200, response.get_json()
    answer = response.get_json()
    keys = [f"{r['doc_type']}:{r['doc_id']}" for r in answer["results"]]
    assert keys == [f"{r['doc_type']}:{r['doc_id']}" for r in healthy["results"]]
    assert answer["verification"]["errors"] >= 1, answer["verification"]
    assert answer["verification"]["dropped"] == 0


def test_verification_drops_what_nextcloud_refuses(corpus_stack: Stack) -> None:
    # 403 is an answer, not an outage: the user may not see it (DESIGN §9: 404/403 drop)
    auth = ("alice", PASSWORDS["alice"])
    body = {"query": "lighthouse harbour oyster", "limit": 20}
    try:
        for family in ("webdav", "dav-search", "notes"):
            corpus_stack.sim.faults.set(family, status=403)
        response = corpus_stack.search.post("/v1/search", json=body, auth=auth)
    finally:
        corpus_stack.sim.faults.clear()
    assert response.status_code == 200, response.get_json()
    answer = response.get_json()
    shown = {r["doc_type"] for r in answer["results"]}
    assert not shown & {"file", "note"}, answer["results"]
    assert answer["verification"]["dropped"] >= 1, answer["verification"]
    assert answer["verification"]["errors"] == 0


def test_context_fails_closed_when_nextcloud_cannot_confirm(corpus_stack: Stack) -> None:
    auth = ("alice", PASSWORDS["alice"])
    key = next(iter(sorted(visible_keys(corpus_stack.sim, "alice"))))
    doc_type, doc_id = key.split(":")
    try:
        for family in ("webdav", "dav-search", "notes"):
            corpus_stack.sim.faults.set(family, status=503)
        response = corpus_stack.search.get(f"/v1/documents/{doc_type}/{doc_id}/context", auth=auth)
    finally:
        corpus_stack.sim.faults.clear()
    assert response.status_code == 503, response.get_json()
    assert response.get_json()["code"] == "backend_unavailable"


def test_nextcloud_down_for_authentication_is_503_not_401(corpus_stack: Stack) -> None:
    try:
        corpus_stack.sim.faults.set("ocs", status=503)
        response = corpus_stack.search.post(
            "/v1/search", json={"query": "x"}, auth=("alice", PASSWORDS["alice"])
        )
    finally:
        corpus_stack.sim.faults.clear()
    assert response.status_code == 503, response.get_json()
    assert response.get_json()["code"] == "backend_unavailable"


# --- the vector store unreachable to search ----------------------------------------------------


def test_search_answers_503_while_the_store_is_down(corpus_stack: Stack) -> None:
    store = corpus_stack.services.store
    auth = ("bob", PASSWORDS["bob"])
    flaky = [Flaky(store, name) for name in ("branch", "document_points", "count")]
    try:
        response = corpus_stack.search.post("/v1/search", json={"query": "oyster"}, auth=auth)
        assert response.status_code == 503, response.get_json()
        assert response.mimetype == "application/problem+json"
        assert response.get_json()["code"] == "backend_unavailable"
        assert response.headers["Retry-After"]
        key = sorted(visible_keys(corpus_stack.sim, "bob"))[0]
        doc_type, doc_id = key.split(":")
        context = corpus_stack.search.get(f"/v1/documents/{doc_type}/{doc_id}/context", auth=auth)
        assert context.status_code == 503 and context.get_json()["code"] == "backend_unavailable"
        ready = corpus_stack.search.get("/readyz")
        assert ready.status_code == 503, ready.data
        rpc = corpus_stack.search.post(
            "/rcp/retrieve",
            json={"jsonrpc": "2.0", "id": 1, "method": "retrieve", "params": {"query": "x"}},
            auth=auth,
        )
        assert rpc.status_code in (200, 503)
        assert rpc.get_json()["error"]["code"] in (-32010, -32001), rpc.get_json()
    finally:
        for f in flaky:
            f.heal()
    again = corpus_stack.search.post("/v1/search", json={"query": "oyster"}, auth=auth)
    assert again.status_code == 200 and again.get_json()["results"]


def test_search_answers_503_when_the_store_is_closed(fresh_stack: Stack, tmp_path: Path) -> None:
    fresh_stack.services.store.close()
    response = fresh_stack.search.post(
        "/v1/search", json={"query": "oyster"}, auth=("alice", PASSWORDS["alice"])
    )
    assert response.status_code == 503, response.get_json()
    assert response.get_json()["code"] == "backend_unavailable"
    # what failed, not where: the store's folder is no business of a caller's
    ready = fresh_stack.search.get("/readyz")
    assert ready.status_code == 503
    for answer in (response.get_data(as_text=True), ready.get_data(as_text=True)):
        assert str(tmp_path) not in answer and "qdrant" not in answer.lower(), answer


# --- Redis stalled: the login cache and the rate limit fail open, without waiting each time ----


def test_a_stalled_redis_is_skipped_after_its_first_timeout(
    make_stack: Callable[..., Stack], private_redis: RedisProcess
) -> None:
    stack = make_stack(user_cache_seconds=60, search_rate_limit="600/minute")
    # a result to verify: a search that asks Nextcloud nothing else confirms a cached login
    # with one more cloud/user request (NextcloudClient.confirm), which this count would take
    # for a cache miss
    stack.sim.put_file("alice", "/Oysters.md", "Oyster beds line the harbour.")
    with stack.worker():
        stack.settle()
    clock = Clock()
    breaker = stack.services.redis_breaker = RedisBreaker(
        private_redis.url, reset_seconds=1, clock=clock
    )
    auth = ("alice", PASSWORDS["alice"])
    search = {"query": "oyster"}

    def logins() -> int:  # the OCS user lookups that confirm a login with Nextcloud
        return sum("cloud/user" in path for _, path, _ in list(stack.sim.request_log))

    assert stack.search.post("/v1/search", json=search, auth=auth).status_code == 200
    found = stack.search.post("/v1/search", json=search, auth=auth).get_json()
    assert [r["title"] for r in found["results"]] == ["Oysters.md"]
    assert logins() == 1  # the second search found the login in the cache
    private_redis.process.send_signal(signal.SIGSTOP)
    try:
        stalled = [stack.search.post("/v1/search", json=search, auth=auth) for _ in range(3)]
        assert [r.status_code for r in stalled] == [200, 200, 200], stalled[0].get_json()
        assert breaker.open  # opened by the first timeout; the others did not wait
        with pytest.raises(RedisSkipped):
            breaker.call("get", "anything")
    finally:
        private_redis.process.send_signal(signal.SIGCONT)
    # each stalled search asked Nextcloud for the login instead (fail-open)
    assert logins() == 4
    clock.now += 1.2  # past reset_seconds: the next call to succeed closes the breaker again
    assert stack.search.post("/v1/search", json=search, auth=auth).status_code == 200
    assert not breaker.open


def test_a_redis_outage_keeps_the_search_api_ready_while_it_answers(
    make_stack: Callable[..., Stack], private_redis: RedisProcess
) -> None:
    """Searches are answered with Redis down (login cache and rate limit fail open), but
    ``/readyz`` was 503 (``"redis": "fail: ConnectionError"``): behind the chart's
    readinessProbe every replica left the Service, and a degraded search became an outage."""
    stack = make_stack()
    auth = ("alice", PASSWORDS["alice"])
    assert stack.search.get("/readyz").status_code == 200
    private_redis.stop()
    assert stack.search.post("/v1/search", json={"query": "oyster"}, auth=auth).status_code == 200
    ready = stack.search.get("/readyz")
    assert ready.status_code == 200, ready.get_json()
    assert ready.get_json()["redis_outage"] == "ConnectionError"
    private_redis.start_again()
    ready = stack.search.get("/readyz")
    assert ready.status_code == 200 and ready.get_json()["redis_outage"] is None


def test_a_redis_outage_keeps_the_mcp_server_ready(
    make_stack: Callable[..., Stack], private_redis: RedisProcess
) -> None:
    """The MCP server's ``/readyz`` asked Redis itself: an outage of the one Redis every
    replica shares made each of them unready (503), where the search API and the receiver
    stay ready and name the outage (``SharedRedis``)."""
    stack = make_stack()
    app = create_mcp_app(stack.settings, services=stack.services, producer=stack.celery)
    with TestClient(app, base_url="http://127.0.0.1") as http:
        assert http.get("/readyz").status_code == 200
        private_redis.stop()
        ready = http.get("/readyz")
        assert ready.status_code == 200, ready.json()
        assert ready.json()["redis_outage"] == "ConnectionError"
        private_redis.start_again()
        ready = http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["redis_outage"] is None


def outage_begins(redis_server: RedisProcess, outage: str) -> None:
    """Stop ``redis_server`` (connections refused) or stall it (SIGSTOP: connections open, no
    answer)."""
    if outage == "stopped":
        redis_server.stop()
    else:
        redis_server.process.send_signal(signal.SIGSTOP)


def outage_ends(redis_server: RedisProcess, outage: str) -> None:
    """Undo :func:`outage_begins`: a stopped Redis comes back empty (it saves nothing)."""
    if outage == "stopped":
        redis_server.start_again()
    else:
        redis_server.process.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("outage", ["stopped", "stalled"])
def test_rcp_sessions_answer_through_a_redis_outage(
    make_stack: Callable[..., Stack], private_redis: RedisProcess, outage: str
) -> None:
    """RCP sessions live in Redis; while it is stopped or stalled they live in the process's
    memory, and a session the process knows nothing of (begun before the outage, or in another
    process) is answered as initialized (spec §5.2's stateless HTTP server), as REST and MCP
    searches are answered. Once Redis answers, what the process did is written to it.

    Before: every RCP call but ``info``, ``ping`` and a credential-less ``shutdown`` was
    -32010 for as long as Redis did not answer, ``initialize`` included: an RCP client could
    not search at all."""
    stack = make_stack(user_cache_seconds=60, search_rate_limit="600/minute")
    stack.sim.put_file("alice", "/Oysters.md", "Oyster beds line the harbour.")
    with stack.worker():
        stack.settle()
    clock = Clock()
    breaker = stack.services.redis_breaker = RedisBreaker(
        private_redis.url, reset_seconds=1, clock=clock
    )
    auth = ("alice", PASSWORDS["alice"])

    def rpc(method: str, session: str | None = None) -> dict[str, Any]:
        params = {"query": "oyster"} if method == "retrieve" else {}
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        headers = {"RCP-Session": session} if session else {}
        answer = stack.search.post(f"/rcp/{method}", json=message, auth=auth, headers=headers)
        assert answer.status_code == 200, answer.get_json()
        return dict(answer.get_json())

    def titles(session: str | None = None) -> list[str]:
        reply = rpc("retrieve", session)
        assert "result" in reply, reply
        return [hit["meta"]["title"] for hit in reply["result"]["hits"]]

    def code(reply: dict[str, Any]) -> int:
        return int(reply["error"]["code"])

    assert "result" in rpc("initialize", "begun-before-the-outage")
    assert titles("begun-before-the-outage") == ["Oysters.md"]
    outage_begins(private_redis, outage)
    try:
        assert titles("begun-before-the-outage") == ["Oysters.md"]  # was -32010
        # a header-less client, as the SDK's HttpTransport: initialize, then search
        begun = rpc("initialize")
        assert "result" in begun, begun
        token = begun["result"]["_meta"]["session"]
        assert titles() == ["Oysters.md"]
        assert titles(token) == ["Oysters.md"]
        assert code(rpc("initialize")) == -32600  # spec §13 holds in the process that began it
        # shutdown ends the header-less session and the named one, in memory
        assert "result" in rpc("initialize", "ended-in-the-outage")
        assert rpc("shutdown", "ended-in-the-outage")["result"] == {}
        assert code(rpc("retrieve", "ended-in-the-outage")) == -32001
        assert code(rpc("retrieve")) == -32001
        assert breaker.open  # no call waited for Redis but the first
    finally:
        outage_ends(private_redis, outage)
    clock.now += 1.2  # past reset_seconds: the next call tries Redis again
    # what the process did is written to Redis: the session begun in the outage lives on,
    # the one ended in it stays ended
    assert titles(token) == ["Oysters.md"]
    assert not breaker.open
    assert code(rpc("retrieve", "ended-in-the-outage")) == -32001
    assert code(rpc("retrieve")) == -32001
    redis_client = redis.Redis.from_url(private_redis.url)
    marks = {
        key.decode().rsplit(":", 1)[1]: redis_client.get(key) for key in redis_client.keys("*:s:*")
    }
    redis_client.close()
    # a session used in the outage is renewed where Redis kept it, never created: a Redis that
    # came back empty lost it, as it lost every other; the ended ones are tombstones ("-<µs>")
    kept = {"begun-before-the-outage"} if outage == "stalled" else set()
    assert {sid for sid, mark in marks.items() if mark[:1] == b"+"} == {token} | kept
    assert {sid for sid, mark in marks.items() if mark[:1] == b"-"} == {"ended-in-the-outage", "-"}
    if outage == "stalled":
        assert titles("begun-before-the-outage") == ["Oysters.md"]
    else:
        assert code(rpc("retrieve", "begun-before-the-outage")) == -32001


@pytest.mark.parametrize("outage", ["stopped", "stalled"])
def test_rcp_calls_count_against_the_rate_limits_through_a_redis_outage(
    make_stack: Callable[..., Stack], private_redis: RedisProcess, outage: str
) -> None:
    """While Redis does not answer, RCP calls count in the process's memory as REST calls do:
    a caller's own limit, and the refused credentials of an address. (Counted before the
    change too, each call then answered -32010; what is new is the ``initialize`` answered.)"""
    stack = make_stack(user_cache_seconds=60, search_rate_limit="3/minute")
    stack.services.redis_breaker = RedisBreaker(private_redis.url, reset_seconds=1, clock=Clock())

    def rpc(method: str, user: str, password: str) -> Any:
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}
        return stack.search.post(f"/rcp/{method}", json=message, auth=(user, password))

    outage_begins(private_redis, outage)
    try:
        alice = [rpc(m, "alice", PASSWORDS["alice"]) for m in ("initialize", "shutdown") * 2]
        # made-up names: each its own caller's limit, all one address's refused credentials
        refused = [rpc("initialize", f"mallory{n}", "guess") for n in range(4)]
    finally:
        outage_ends(private_redis, outage)
    assert [r.status_code for r in alice] == [200, 200, 200, 429]
    assert "result" in alice[2].get_json()
    assert alice[3].get_json()["error"]["code"] == -32011
    assert alice[3].headers["Retry-After"]
    assert [r.status_code for r in refused] == [401, 401, 401, 429]
    assert refused[3].get_json()["error"]["code"] == -32011


# --- Redis down: the MCP tools answer what the search API answers without it -----------------

MCP_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("search", {"query": "oyster chowder"}),
    ("fetch", {"path": "/Projects/Oysters.md"}),
    ("list_filters", {}),
    ("list_folders", {}),
    ("list_tags", {}),
    ("list_values", {"field": "category"}),
    ("index_status", {}),
]


def mcp_calls(
    url: str, user: str, calls: list[tuple[str, dict[str, Any]]] = MCP_CALLS
) -> list[tuple[Any, float]]:
    """Each of ``calls`` (tool, arguments) made in order in one session of the MCP SDK's own
    client as ``user``: its result and how long it took, seconds."""
    token = base64.b64encode(f"{user}:{PASSWORDS[user]}".encode()).decode()

    async def main() -> list[tuple[Any, float]]:
        async with (
            create_mcp_http_client(headers={"Authorization": f"Basic {token}"}) as http,
            Client(streamable_http_client(url, http_client=http), cache=None) as client,
        ):
            out = []
            for tool, arguments in calls:
                began = time.monotonic()
                result = await client.call_tool(tool, arguments)
                out.append((result, time.monotonic() - began))
            return out

    return asyncio.run(main())


@pytest.mark.parametrize("outage", ["stopped", "stalled"])
def test_the_mcp_tools_answer_through_a_redis_outage_as_the_search_api_does(
    make_stack: Callable[..., Stack], private_redis: RedisProcess, outage: str
) -> None:
    """Redis stopped (connections refused) or stalled (SIGSTOP: connections open, no answer):
    the search API answers searches, context and the folder, tag and category lists (its login
    cache and rate limits fail open), and ``GET /v1/status``, which Redis alone can answer,
    503 ``backend_unavailable``. The MCP tools, answered by the same code, must answer the same
    as before the outage, and ``index_status`` a tool error ``backend_unavailable`` with
    ``retry_after`` — none an unhandled error, none waiting on Redis call after call.

    Before: the answers were right, but on a stalled Redis each MCP call waited 1 s for the
    rate limit's two Redis calls (no fallback, no breaker), ``index_status`` 6 s (the 5 s socket
    timeout of ``Services.redis``; ``/v1/status`` 5 s), and its tool error said nothing of
    when to retry."""
    stack = make_stack(user_cache_seconds=60, search_rate_limit="600/minute")
    stack.sim.put_file("alice", "/Projects/Oysters.md", "Oyster beds line the harbour.")
    stack.sim.put_file("alice", "/Notes/Recipes/Chowder.md", "# Chowder\nOyster chowder, leeks.")
    stack.sim.assign_tag("alice", "/Projects/Oysters.md", stack.sim.create_tag("shellfish"))
    with stack.worker():
        stack.settle()
    served = serve_in_thread(
        create_mcp_app(stack.settings, services=stack.services, producer=stack.celery)
    )
    auth = ("alice", PASSWORDS["alice"])
    try:
        healthy = mcp_calls(f"{served.url}/mcp", "alice")
        assert not any(result.is_error for result, _ in healthy), healthy
        if outage == "stopped":
            private_redis.stop()
        else:
            private_redis.process.send_signal(signal.SIGSTOP)
        down = mcp_calls(f"{served.url}/mcp", "alice")
        doc_type, _, doc_id = down[1][0].structured_content["id"].partition(":")
        began = time.monotonic()
        rest = {
            path: stack.search.get(path, auth=auth)
            for path in ("/v1/folders", "/v1/tags", "/v1/categories", "/v1/status",
                         f"/v1/documents/{doc_type}/{doc_id}/context")
        }  # fmt: skip
        rest["search"] = stack.search.post("/v1/search", json=MCP_CALLS[0][1], auth=auth)
        rest_seconds = time.monotonic() - began
    finally:
        served.close()
        private_redis.process.send_signal(signal.SIGCONT)
    timings = {
        tool: round(seconds, 2) for (tool, _), (_, seconds) in zip(MCP_CALLS, down, strict=True)
    }
    # the call that met the outage first (the session's initialize) waited for the breaker's
    # and the rate limit's timeouts; before, every call waited 1 s, index_status 6 s
    assert sum(timings.values()) < 3.0, timings
    assert rest_seconds < 3.0, rest_seconds  # before: /v1/status alone 5 s
    answers = {tool: result for (tool, _), (result, _) in zip(MCP_CALLS, down, strict=True)}
    for (tool, _), (before, _) in zip(MCP_CALLS, healthy, strict=True):
        if tool != "index_status":
            assert not answers[tool].is_error, (tool, answers[tool].content)
            assert answers[tool].structured_content == before.structured_content, tool
    # ... as the search API answers them now
    assert {path: r.status_code for path, r in rest.items()} == {path: 200 for path in rest} | {
        "/v1/status": 503
    }
    assert [r["id"] for r in answers["search"].structured_content["results"]] == [
        f"{r['doc_type']}:{r['doc_id']}" for r in rest["search"].get_json()["results"]
    ]
    fetched = answers["fetch"].structured_content
    assert fetched["text"] == "".join(
        c["text"] for c in rest[f"/v1/documents/{doc_type}/{doc_id}/context"].get_json()["chunks"]
    )
    assert answers["list_folders"].structured_content == rest["/v1/folders"].get_json()
    assert answers["list_tags"].structured_content == rest["/v1/tags"].get_json()
    assert [v["value"] for v in answers["list_values"].structured_content["values"]] == rest[
        "/v1/categories"
    ].get_json()["categories"]
    status = rest["/v1/status"]
    assert status.get_json()["code"] == "backend_unavailable"
    assert status.headers["Retry-After"] == "5"
    refused = answers["index_status"]
    assert refused.is_error
    assert refused.structured_content == {
        "code": "backend_unavailable",
        "field": None,
        "detail": "Redis is unavailable",
        "retry_after": 5,
    }


def test_a_result_dropped_while_redis_stalls_is_answered_without_waiting_for_its_recheck(
    make_stack: Callable[..., Stack], private_redis: RedisProcess
) -> None:
    """A result verification drops is handed to its re-check, queued in Redis: on a stalled
    Redis that waited out ``Services.redis``'s 5 s socket timeout inside the search, 6 s for
    each MCP ``search`` or ``fetch`` and each ``POST /v1/search`` that met the deleted file,
    every time. Now the re-check is skipped while the breaker is open (a scan catches it)."""
    stack = make_stack(user_cache_seconds=60, search_rate_limit="600/minute")
    stack.sim.put_file("alice", "/Projects/Oysters.md", "Oyster beds line the harbour.")
    stack.sim.put_file("alice", "/Projects/Clams.md", "Oyster and clam beds.")
    with stack.worker():
        stack.settle()
    served = serve_in_thread(
        create_mcp_app(stack.settings, services=stack.services, producer=stack.celery)
    )
    auth = ("alice", PASSWORDS["alice"])
    search = ("search", {"query": "oyster"})
    try:
        ((found, _),) = mcp_calls(f"{served.url}/mcp", "alice", [search])
        gone = next(r["id"] for r in found.structured_content["results"] if "Clams" in r["path"])
        private_redis.process.send_signal(signal.SIGSTOP)
        stack.sim.delete("alice", "/Projects/Clams.md")  # its event cannot be queued either
        calls = [search, ("fetch", {"id": gone}), search]
        down = mcp_calls(f"{served.url}/mcp", "alice", calls)
        began = time.monotonic()
        rest = [stack.search.post("/v1/search", json=search[1], auth=auth) for _ in range(2)]
        rest_seconds = time.monotonic() - began
    finally:
        served.close()
        private_redis.process.send_signal(signal.SIGCONT)
    timings = [round(seconds, 2) for _, seconds in down]
    assert sum(timings) < 2.0, timings  # before: 6 s each
    assert rest_seconds < 2.0, rest_seconds  # before: 12 s
    for result in (down[0][0], down[2][0], *(r.get_json() for r in rest)):
        answer = result if isinstance(result, dict) else result.structured_content
        assert answer["verification"]["dropped"] == 1, answer["verification"]
        assert [r["path"] for r in answer["results"]] == ["/Projects/Oysters.md"]
    assert down[1][0].is_error and down[1][0].structured_content["code"] == "not_found"
