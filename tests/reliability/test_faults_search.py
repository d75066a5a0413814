"""Faults on real parts, search side: Nextcloud failing or hanging while results are verified
(fail-open, counted in ``verification.errors``; a 403 drops; the context endpoint fails closed),
Nextcloud down while authenticating (503, not 401), and the vector store unreachable or closed
(503 problem+json, ``/readyz`` 503, and recovery once it is back).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rel_support import Flaky, visible_keys
from starlette.testclient import TestClient

from mcp_server.app import create_app as create_mcp_app
from ncindex.redis_breaker import RedisBreaker, RedisSkipped
from ncindex.redis_server import RedisProcess
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


def test_rcp_sessions_on_a_stalled_redis_fail_fast_and_retryable(
    make_stack: Callable[..., Stack], private_redis: RedisProcess
) -> None:
    stack = make_stack()
    clock = Clock()
    breaker = stack.services.redis_breaker = RedisBreaker(
        private_redis.url, reset_seconds=1, clock=clock
    )
    auth = ("alice", PASSWORDS["alice"])

    def rpc(method: str, session: str | None = None) -> Any:
        params = {"query": "oyster"} if method == "retrieve" else {}
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        headers = {"RCP-Session": session} if session else {}
        return stack.search.post(f"/rcp/{method}", json=message, auth=auth, headers=headers)

    session = rpc("initialize").get_json()["result"]["_meta"]["session"]
    assert "result" in rpc("retrieve", session).get_json()
    private_redis.process.send_signal(signal.SIGSTOP)
    try:
        stalled = [rpc("retrieve", session) for _ in range(3)]
        errors = [r.get_json()["error"] for r in stalled]
        assert [e["code"] for e in errors] == [-32010] * 3, errors
        assert all(e["data"]["retryable"] for e in errors)
        assert breaker.open  # opened by the first timeout: the others did not wait for theirs
    finally:
        private_redis.process.send_signal(signal.SIGCONT)
    clock.now += 1.2  # past reset_seconds: the next call to succeed closes the breaker again
    assert "result" in rpc("retrieve", session).get_json()  # the session outlived the stall
    assert not breaker.open
