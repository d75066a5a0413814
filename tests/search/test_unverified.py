"""NCINDEX_UNVERIFIED_RESULTS: what a search shows of a result Nextcloud could not confirm.

Bob loses the share of ``/Projects/Lighthouse`` (no event reaches the index) and Nextcloud
then fails the verification request (the simulator answers the WebDAV SEARCH with 503): the
lost file's check fails transiently, as do his own documents'. ``show`` keeps them whole
(DESIGN §9's fail-open), ``hide_text`` keeps them without their text, ``drop`` leaves them
out; every answer says that they were not confirmed — ``POST /v1/search``, RCP/1 ``retrieve``
and the MCP ``search`` tool alike, since all three ask the same search service.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_api import LIGHT
from test_mcp import basic, call, run, session
from test_rcp import raw

from mcp_server import create_app
from ncindex.web.asgi import serve_in_thread
from search_support import Api, Served

QUERY = "lighthouse lens"


def lost_share_during_an_outage(api: Api) -> str:
    """Bob's share of LIGHT is gone (no event) and every WebDAV SEARCH (files' and notes'
    verification) answers 503; LIGHT's doc_key."""
    api.sim.unshare("alice", "/Projects/Lighthouse", "bob")
    api.sim.faults.set("dav-search", status=503)
    return api.keys[LIGHT]


def search(api: Api) -> dict[str, Any]:
    response = api.post("bob", {"query": QUERY, "limit": 10, "explain": True})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def by_key(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{r['doc_type']}:{r['doc_id']}": r for r in body["results"]}


def retrieve(served: Served) -> dict[str, Any]:
    """RCP ``initialize`` then ``retrieve`` (with the chunk text) as bob; the result."""
    init = {"protocolVersion": 1, "client": {"name": "t", "version": "1"}, "capabilities": {}}
    assert "result" in raw(served, "bob", "initialize", init)
    reply = raw(served, "bob", "retrieve", {"query": QUERY, "k": 10, "includeText": True})
    assert "result" in reply, reply
    return reply["result"]


def mcp_search(api: Api) -> dict[str, Any]:
    """The MCP ``search`` tool's structured result as bob."""
    app = create_app(api.settings, services=api.services, producer=api.producer)
    served = serve_in_thread(app)
    try:

        async def go() -> Any:
            async with session(f"{served.url}/mcp", basic("bob")) as client:
                return await call(client, "search", {"query": QUERY, "limit": 10})

        result = run(go())
    finally:
        served.close()
    assert not result.is_error, result.content
    return result.structured_content


def test_checks_that_succeed_mark_results_verified(api: Api) -> None:
    body = search(api)
    assert body["results"] and all(r["verified"] for r in body["results"])
    assert body["verification"]["errors"] == 0 and body["verification"]["withheld"] == 0


@pytest.mark.parametrize("api", [{"unverified_results": "show"}], indirect=True)
def test_show_keeps_unconfirmed_results_whole_and_says_so(served: Served) -> None:
    api = served.api
    lost = lost_share_during_an_outage(api)
    body = search(api)
    found = by_key(body)
    assert lost in found  # the design's default: fail-open
    assert "<mark>" in found[lost]["snippet"] and found[lost]["char_start"] == 0
    assert not any(r["verified"] for r in body["results"])
    assert body["verification"]["errors"] == len(body["results"])
    assert body["verification"]["withheld"] == 0
    hits = {h["id"]: h for h in retrieve(served)["hits"]}
    assert hits[lost]["text"] and hits[lost]["meta"]["verified"] is False


@pytest.mark.parametrize("api", [{"unverified_results": "hide_text"}], indirect=True)
def test_hide_text_keeps_unconfirmed_results_without_their_text(served: Served) -> None:
    api = served.api
    lost = lost_share_during_an_outage(api)
    body = search(api)
    found = by_key(body)
    assert lost in found and found[lost]["title"] == "plan"
    assert found[lost]["path"] == "/Lighthouse/plan.md" and found[lost]["open_url"]
    for r in body["results"]:
        assert r["snippet"] == "" and r["char_start"] is None and r["char_end"] is None
        assert r["explain"]["matched_terms"] == [] and r["explain"]["feedback_terms"] == []
        assert r["verified"] is False and r["explain"]["verified_at"] is None
    assert body["verification"]["errors"] == len(body["results"])

    result = retrieve(served)
    hits = {h["id"]: h for h in result["hits"]}
    assert lost in hits and hits[lost]["text"] == "" and hits[lost]["meta"]["snippet"] == ""
    assert "start" not in hits[lost]["citation"] and hits[lost]["meta"]["verified"] is False
    assert any("not confirmed" in note for note in result["usage"]["notes"])

    answer = mcp_search(api)
    tools = {r["id"]: r for r in answer["results"]}
    assert lost in tools and tools[lost]["snippet"] == "" and tools[lost]["matches"] == []
    assert tools[lost]["verified"] is False and tools[lost]["char_start"] is None

    api.sim.faults.clear()  # Nextcloud back: the lost share is dropped, the rest shown whole
    body = search(api)
    assert lost not in by_key(body) and body["verification"]["dropped"] == 1
    assert all(r["verified"] and r["snippet"] for r in body["results"])


@pytest.mark.parametrize("api", [{"unverified_results": "drop"}], indirect=True)
def test_drop_leaves_unconfirmed_results_out_and_counts_them(served: Served) -> None:
    api = served.api
    lost_share_during_an_outage(api)
    body = search(api)
    assert body["results"] == []
    verification = body["verification"]
    assert verification["errors"] >= 3 and verification["withheld"] == verification["errors"]

    result = retrieve(served)
    assert result["hits"] == []
    assert result["_meta"]["verification"]["withheld"] == verification["withheld"]
    assert any("left out" in note for note in result["usage"]["notes"])

    answer = mcp_search(api)
    assert answer["results"] == [] and answer["verification"]["withheld"] >= 3
