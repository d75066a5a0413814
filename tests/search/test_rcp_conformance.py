"""RCP/1 conformance of ``/rcp``: the MUSTs of the spec's L0 and L1 levels and L2's ``hybrid``
mode (spec ``1ay1/rcp`` ``spec/rcp-1.0.md`` §4.1, §4.2, §4.5, §7.1, §13, §14.1–§14.3), over real
HTTP, as a client that sends no ``RCP-Session`` header — the way the SDK's ``HttpTransport``
and the public checker talk — plus the ways such a client starts a fresh session.

Written from the spec, not from the checker: each step sends one JSON-RPC request and states
what the spec requires of the answer."""

from __future__ import annotations

import json
from http.client import HTTPConnection
from typing import Any
from urllib.parse import urlsplit

from test_rcp import basic

from search_support import Served

RETRIEVE = {"query": "lighthouse lens", "k": 3}


class Wire:
    """One credential's raw JSON-RPC over HTTP: ``POST /rcp/<method>``, optional
    ``RCP-Session`` header; answers ``(HTTP status, parsed body or None)``."""

    def __init__(self, served: Served, user: str, session: str | None = None) -> None:
        self.url = urlsplit(served.url)
        self.authorization = basic(user)
        self.session = session
        self.next_id = 0

    def post(self, method: str, params: Any = None, *, notify: bool = False) -> tuple[int, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self.next_id += 1
            message["id"] = f"r{self.next_id}" if self.next_id % 2 else self.next_id
        headers = {"Content-Type": "application/json", "Authorization": self.authorization}
        if self.session:
            headers["RCP-Session"] = self.session
        conn = HTTPConnection(self.url.hostname or "127.0.0.1", self.url.port, timeout=30)
        try:
            conn.request("POST", f"/rcp/{method}", json.dumps(message), headers)
            response = conn.getresponse()
            status, body = response.status, response.read()
        finally:
            conn.close()
        reply = json.loads(body) if body.strip() else None
        if reply is not None and not notify:
            assert reply["jsonrpc"] == "2.0" and reply["id"] == message["id"]  # §4.2: same type
        return status, reply

    def call(self, method: str, params: Any = None) -> dict[str, Any]:
        status, reply = self.post(method, params)
        assert status == 200, (status, reply)
        return reply

    def code(self, method: str, params: Any = None) -> int | None:
        return self.call(method, params).get("error", {}).get("code")


def certify(wire: Wire) -> dict[str, Any]:
    """Walk one session through the spec's MUSTs in order; returns the ``initialize`` result.
    Fails the test at the first MUST broken."""
    # §14.1.1: info and ping before initialize; ping echoes the nonce
    assert wire.call("info")["result"]["server"]["name"] == "ncindex"
    assert wire.call("ping", {"nonce": 4242})["result"] == {"nonce": 4242}
    # §4.1 / §14.1.5: params MUST be an object, whatever the method: else -32602
    assert wire.code("info", ["x"]) == wire.code("ping", ["x"]) == -32602
    # §14.1.3: gated methods before initialize are -32001
    assert wire.code("retrieve", RETRIEVE) == -32001
    # §4.5: notifications are never answered, whatever the method
    for method in ("retrieve", "info", "no/such/method", "notifications/cancel"):
        status, reply = wire.post(method, {"id": 999}, notify=True)
        assert reply is None and status == 204, method
    # §13: a failed negotiation leaves the session uninitialized, and may be retried
    assert wire.code("initialize", {"protocolVersion": 0}) == -32002
    assert wire.code("retrieve", RETRIEVE) == -32001
    init = wire.call("initialize", {"protocolVersion": 1, "client": {"name": "t"}})["result"]
    assert init["protocolVersion"] >= 1 and init["server"]["name"]
    caps = init["capabilities"]
    assert {"retrieve", "filter", "citations"} <= caps.keys()  # §14.1.2, §14.2
    # §13: a second initialize after a successful one is -32600
    again = wire.call("initialize", {"protocolVersion": 1})
    assert again["error"]["code"] == -32600 and "shutdown" in again["error"]["data"]["hint"]
    # §13.2: info reports the session's capability set
    assert wire.call("info")["result"]["capabilities"] == caps
    # §14.1.4: unknown method -32004, un-advertised capability -32003, option -32005
    assert wire.code("no/such/method") == -32004
    assert "index" not in caps and wire.code("index/add", {"documents": []}) == -32003
    assert wire.code("retrieve", {**RETRIEVE, "mmr": {"lambda": 0.5}}) == -32005
    # §14.1.5 / §14.1.7: malformed params -32602; unknown fields and _meta tolerated
    assert wire.code("retrieve", {"query": 5}) == -32602
    tolerant = wire.call("retrieve", {**RETRIEVE, "x-unknown": 1, "_meta": {"trace": "t"}})
    assert isinstance(tolerant["result"]["hits"], list)
    # §14.2 (L1): hits ranked by descending score, unique ids, k honoured and clamped to maxK,
    # k < 1 and a funnel violation are -32602, every advertised mode answers
    for mode in caps["retrieve"]["modes"]:
        hits = wire.call("retrieve", {**RETRIEVE, "mode": mode})["result"]["hits"]
        assert 1 <= len(hits) <= 3, mode
        scores = [h["score"] for h in hits]
        assert all(isinstance(s, float) for s in scores) and scores == sorted(scores)[::-1]
        assert len({h["id"] for h in hits}) == len(hits)
    assert set(caps["retrieve"]["modes"]) == {"dense", "sparse", "hybrid"}  # L2 hybrid: above
    huge = wire.call("retrieve", {"query": "lighthouse", "k": caps["retrieve"]["maxK"] + 1000})
    assert len(huge["result"]["hits"]) <= caps["retrieve"]["maxK"]
    assert wire.code("retrieve", {"query": "lighthouse", "k": -5}) == -32602
    assert wire.code("retrieve", {"query": "lighthouse", "k": 10, "candidateK": 2}) == -32602
    # §14: the declared level is what the checks above prove (L1; L2 needs more than hybrid)
    assert init["_meta"]["conformance"] == "L1"
    return init


def test_a_header_less_client_certifies_and_can_run_again_after_shutdown(served: Served) -> None:
    alice = Wire(served, "alice")
    certify(alice)
    assert alice.call("shutdown")["result"] == {}
    assert alice.code("retrieve", RETRIEVE) == -32001  # shutdown ended the session
    certify(alice)  # a second run starts afresh: the checker can be run again
    alice.call("shutdown")


def test_sessions_are_per_credential_and_per_session_id(served: Served) -> None:
    alice, bob = Wire(served, "alice"), Wire(served, "bob")
    alice.call("initialize")
    assert alice.code("initialize") == -32600
    assert bob.code("retrieve", RETRIEVE) == -32001  # alice's session is not bob's
    assert "result" in bob.call("initialize")
    # a client-chosen RCP-Session starts a session of its own, beside the implicit one
    mine = Wire(served, "alice", session="alice-worker-2")
    assert mine.code("retrieve", RETRIEVE) == -32001
    init = mine.call("initialize")["result"]
    assert init["_meta"]["session"] == "alice-worker-2"
    assert mine.code("initialize") == -32600
    assert mine.call("retrieve", RETRIEVE)["result"]["hits"]
    # the same id under another credential is another session: no hijack, no interference
    bob_same_id = Wire(served, "bob", session="alice-worker-2")
    assert bob_same_id.code("retrieve", RETRIEVE) == -32001
    assert "result" in bob_same_id.call("initialize")
    assert mine.call("retrieve", RETRIEVE)["result"]["hits"]
    # the token an implicit initialize hands out names that session for header clients
    carol = Wire(served, "carol")
    token = carol.call("initialize")["result"]["_meta"]["session"]
    with_token = Wire(served, "carol", session=token)
    assert with_token.code("initialize") == -32600
    assert with_token.call("retrieve", RETRIEVE)["result"]["hits"] == []
    # shutdown with a header ends that session and the implicit one
    with_token.call("shutdown")
    assert with_token.code("retrieve", RETRIEVE) == -32001
    assert carol.code("retrieve", RETRIEVE) == -32001


def test_a_malformed_session_header_is_refused(served: Served) -> None:
    """Braces among them: a session's key is ``…:s:{<credential hash>}:<id>``, the braces its
    Redis Cluster hash tag, so an id may hold none (guard: refused before too)."""
    braces = ("{" + "0" * 64 + "}", "x}:{y-session", "{the-session}")
    for value in ("short", "x" * 129, "has space in it", "-", *braces):
        reply = Wire(served, "alice", session=value).call("initialize")
        assert reply["error"]["code"] == -32600, value
        assert reply["error"]["data"]["field"] == "RCP-Session"
