"""The MCP server (``mcp_server``), driven by the official ``mcp`` SDK's own client over real
HTTP (uvicorn on a free port) against the search fixture's simulator, store and Redis: the
tools and their schemas, search with filters, fetch, bad arguments, credentials, protocol
versions, the shared rate limit, DNS-rebinding protection and the cross-user property."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import re
import unicodedata
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp.client._probe as mcp_probe
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.testclient import TestClient
from test_api import BUDGET, DIARY, FOGHORN, GARDEN, LIGHT, OLD, SECRET, STALLED
from werkzeug.test import Client as WerkzeugClient

from mcp_server import create_app
from mcp_server.app import with_portless
from mcp_server.tools import MAX_PATH_CHECKS, stitched
from mcp_server.tools import output_schema as mcp_output_schema
from ncindex.accounts import Lookup, record_refused
from ncindex.documents import DocRef, point_id
from ncindex.embedding.embedder import Embedder
from ncindex.index.deadletter import DeadLetter, DeadLetters
from ncindex.progress import Progress
from ncindex.search.filter_fields import filters_document
from ncindex.search.service import ContextChunk, ContextResponse
from ncindex.settings import Settings
from ncindex.store.port import PointRecord
from ncindex.text.chunking import Chunker
from ncindex.web.asgi import ServedAsgi, serve_in_thread
from ncindex.web.dispatch import forward_to
from ncindex.web.problems import MAX_BODY_BYTES
from ncindex.web.proxies import trusted_wsgi
from search_support import FILES, PASSWORDS, T0, Api, build_api
from support import check_hints_leak_nothing

LIGHT_DIR = "/Projects/Lighthouse/"
TOOLS = {"search", "fetch", "list_filters", "list_folders", "list_tags", "list_values",
         "index_status"}  # fmt: skip


def basic(user: str, password: str | None = None) -> str:
    token = base64.b64encode(f"{user}:{password or PASSWORDS[user]}".encode()).decode()
    return f"Basic {token}"


@pytest.fixture(scope="module")
def mcp_url(ro_api: Api) -> Iterator[str]:
    """``ro_api``'s stack behind the MCP server, served by uvicorn; its ``/mcp`` URL (shared
    by the module's tests, which must not change it)."""
    app = create_app(ro_api.settings, services=ro_api.services, producer=ro_api.producer)
    served = serve_in_thread(app)
    yield f"{served.url}/mcp"
    served.close()


@contextlib.asynccontextmanager
async def session(url: str, authorization: str | None) -> AsyncIterator[Client]:
    """An SDK client session against ``url`` sending ``authorization`` on every request."""
    headers = {"Authorization": authorization} if authorization else None
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    """A tool's result; its ``structuredContent`` (an error's too)."""
    result = await client.call_tool(tool, arguments)
    return result


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def served_calls(api: Api, user: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """The results of ``calls`` (tool, arguments), made in order in one SDK client session
    as ``user`` against ``api``'s stack behind an MCP server of their own."""
    served = serve_in_thread(create_app(api.settings, services=api.services, producer=api.producer))

    async def main() -> list[Any]:
        async with session(f"{served.url}/mcp", basic(user)) as client:
            return [await call(client, tool, arguments) for tool, arguments in calls]

    try:
        return run(main())
    finally:
        served.close()


def ids(result: Any) -> list[str]:
    assert not result.is_error, result.content
    return [r["id"] for r in result.structured_content["results"]]


def test_tools_are_listed_read_only_with_their_schemas(mcp_url: str) -> None:
    async def main() -> Any:
        async with session(mcp_url, basic("alice")) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in run(main())}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.annotations.read_only_hint is True
        assert tool.annotations.destructive_hint is False
        assert tool.input_schema["type"] == "object"
    search = tools["search"].input_schema
    assert search["required"] == ["query"]
    assert {"query", "limit", "doc_types", "modified_after", "modified_before", "path_prefixes",
            "tags", "category", "mime_types", "filter", "fusion",
            "score_threshold"} <= set(search["properties"])  # fmt: skip
    assert search["additionalProperties"] is False
    assert {"FilterNode", "FilterLeaf", "DocType"} <= set(search["$defs"])
    fetch = tools["fetch"].input_schema
    assert {"id", "doc_type", "doc_id", "path", "chunk_index", "window", "offset",
            "max_chars"} == set(fetch["properties"])  # fmt: skip
    assert tools["list_filters"].input_schema["properties"] == {}


def test_published_bounds_are_json_schema_keywords(mcp_url: str) -> None:
    """``limit``'s 1–100 and ``chunk_index``'s 0–1,000,000 were published as ``ge``/``le``,
    which JSON Schema does not know, so a client validating by the schema let 0 and 1000 by."""

    async def main() -> Any:
        async with session(mcp_url, basic("alice")) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in run(main())}
    search = Draft202012Validator(tools["search"].input_schema)
    fetch = Draft202012Validator(tools["fetch"].input_schema)
    for limit in (0, 1000, 101):
        assert not search.is_valid({"query": "x", "limit": limit}), limit
    assert search.is_valid({"query": "x", "limit": 100})
    for bad in ({"chunk_index": -1}, {"chunk_index": 1_000_001}, {"chunk_index": 0, "window": 21},
                {"max_chars": 0}, {"max_chars": 100_001}, {"offset": -1}):  # fmt: skip
        assert not fetch.is_valid({"id": "file:1", **bad}), bad
    assert fetch.is_valid({"id": "file:1", "chunk_index": 3, "window": 20})
    listed = json.dumps([t.input_schema for t in tools.values()])
    assert '"ge"' not in listed and '"le"' not in listed


def test_fetch_schema_says_id_or_doc_type_with_doc_id_and_every_default_is_accepted(
    mcp_url: str, ro_api: Api
) -> None:
    """The schema showed ``window`` default 2, and a call with that default filled in (with
    ``chunk_index`` at its default, null) was refused ``invalid_value (window)``: now
    ``window``'s default is null (2 when ``chunk_index`` is given). The rule that
    ``doc_type`` and ``doc_id`` go together is in the schema (``dependentRequired``; a
    top-level ``anyOf`` would make Claude's and OpenAI's APIs refuse every tool)."""
    key = ro_api.keys[LIGHT]

    async def main() -> tuple[Any, list[Any]]:
        async with session(mcp_url, basic("alice")) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            fetch = tools["fetch"].input_schema
            defaults = {n: p["default"] for n, p in fetch["properties"].items() if "default" in p}
            calls = [{**defaults, "id": key}, {"id": key, "chunk_index": None, "window": None},
                     {"id": key, "chunk_index": 0, "window": None}]  # fmt: skip
            return tools, [await call(client, "fetch", a) for a in calls]

    tools, results = run(main())
    for result in results:
        assert not result.is_error, result.content
    fetch = tools["fetch"].input_schema
    assert fetch["properties"]["window"]["default"] is None
    valid = Draft202012Validator(fetch).is_valid
    assert valid({"id": "file:1"}) and valid({"doc_type": "file", "doc_id": "1"})
    assert not valid({"doc_type": "file"}) and not valid({"doc_id": "1"})
    for tool in tools.values():
        assert not {"anyOf", "oneOf", "allOf"} & set(tool.input_schema), tool.name


def test_null_is_left_out_for_every_optional_argument(mcp_url: str, ro_api: Api) -> None:
    """An LLM sends ``null`` for an optional argument it does not use (a tool schema made
    strict — every property required, the optional ones nullable — asks it to). Every
    optional argument but ``search``'s ``explain`` and ``fetch``'s ``max_chars`` took it as
    left out; those two were refused ``invalid_value``. Now each optional property of each
    tool takes ``null``, as its schema says, and answers as without it."""
    key = ro_api.keys[LIGHT]
    required = {
        "search": {"query": "lighthouse lens"},
        "fetch": {"id": key},
        "list_folders": {},
        "list_tags": {},
    }

    async def main() -> list[tuple[str, str, Any, Any]]:
        async with session(mcp_url, basic("alice")) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            out = []
            for name, base in required.items():
                schema = tools[name].input_schema
                plain = await call(client, name, base)
                optional = set(schema["properties"]) - set(schema.get("required", [])) - set(base)
                for prop in sorted(optional):
                    nulled = await call(client, name, {**base, prop: None})
                    if prop not in schema.get("dependentRequired", {}):  # present: its pair too
                        assert Draft202012Validator(schema).is_valid({**base, prop: None}), prop
                    out.append((name, prop, plain, nulled))
            return out

    calls = run(main())
    assert {prop for _, prop, _, _ in calls} >= {
        "explain",
        "max_chars",
        "limit",
        "window",
        "offset",
    }
    for name, prop, plain, nulled in calls:
        assert not nulled.is_error, (name, prop, nulled.structured_content)
        if name != "search":
            assert nulled.structured_content == plain.structured_content, (name, prop)
        else:
            assert ids(nulled) == ids(plain), prop
            assert all("explain" not in r for r in nulled.structured_content["results"])


def test_tool_descriptions_name_tools_not_rest_endpoints(mcp_url: str) -> None:
    """The descriptions sent the model to ``POST /v1/search`` and ``GET /v1/filters``, which it
    cannot call, and ``search``'s schema description was a Python docstring."""

    async def main() -> Any:
        async with session(mcp_url, basic("alice")) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in run(main())}
    listed = json.dumps([t.model_dump(mode="json") for t in tools.values()], ensure_ascii=False)
    assert "/v1/" not in listed and "``" not in listed
    search = tools["search"].description
    for said in ("`list_filters`", "1–100", "one per document", "Unix seconds",
                 "not a similarity", "under another `limit`"):  # fmt: skip
        assert said in search, said
    assert "`list_filters`" in tools["search"].input_schema["properties"]["filter"]["description"]
    assert "max_chars" in tools["fetch"].description
    assert "next_offset" in tools["fetch"].description


def test_search_with_filters_is_the_verified_search(mcp_url: str, ro_api: Api) -> None:
    keys = ro_api.keys

    async def main() -> dict[str, Any]:
        async with session(mcp_url, basic("alice")) as client:
            return {
                "plain": await call(client, "search", {"query": "lighthouse lens foghorn"}),
                "prefix": await call(
                    client,
                    "search",
                    {"query": "lighthouse", "path_prefixes": ["/Projects/Lighthouse"]},
                ),
                "tree": await call(
                    client,
                    "search",
                    {
                        "query": "lighthouse",
                        "filter": {"field": "tags", "op": "contains", "value": "finance"},
                    },
                ),
                "category": await call(client, "search", {"query": "foghorn", "category": "Work"}),
                "limit": await call(client, "search", {"query": "lighthouse", "limit": 2.0}),
            }

    out = run(main())
    assert set(ids(out["plain"])) == {keys[LIGHT], keys[OLD], keys[BUDGET], keys[DIARY],
                                      keys[FOGHORN]}  # fmt: skip
    assert ids(out["prefix"]) == [keys[LIGHT]]
    assert ids(out["tree"]) == [keys[BUDGET]]
    assert ids(out["category"]) == [keys[FOGHORN]]
    assert len(ids(out["limit"])) == 2
    body = out["plain"].structured_content
    assert body["verification"]["dropped"] == 0 and body["degraded"] is False
    for r in body["results"]:
        doc_type, doc_id = r["id"].split(":")
        assert (r["doc_type"], r["doc_id"]) == (doc_type, doc_id)
        route = {"file": "f", "note": "apps/notes/note"}[doc_type]
        assert r["url"] == f"{ro_api.settings.nextcloud_url}/index.php/{route}/{doc_id}"
        assert r["title"] and r["path"] and isinstance(r["score"], float)
        assert "explain" not in r  # only when asked for, as the search API
        assert "<mark>" not in r["snippet"] and r["matches"]
        for m in r["matches"]:  # plain-text offsets that land on a query word
            word = r["snippet"][m["start"] : m["end"]].lower()
            assert word.startswith(("lighthouse", "lens", "foghorn")), word


def test_fetch_pages_by_max_chars_and_sends_a_window_once(mcp_url: str, ro_api: Api) -> None:
    """``fetch`` with ``max_chars`` cuts the text and says where to read on (``next_offset``,
    given back as ``offset``); a window of chunks (``chunk_index``) carried its text twice, in
    ``text`` and in ``chunks``. The text content is the structured content."""
    key = ro_api.keys[LIGHT]
    whole = "Lighthouse plan: polish the lighthouse lens and replace the brass fittings."

    async def main() -> tuple[list[Any], Any, Any]:
        async with session(mcp_url, basic("alice")) as client:
            pages = [await call(client, "fetch", {"id": key, "max_chars": 30})]
            while pages[-1].structured_content.get("next_offset") is not None:
                offset = pages[-1].structured_content["next_offset"]
                pages.append(
                    await call(client, "fetch", {"id": key, "max_chars": 30, "offset": offset})
                )
                assert len(pages) < 5, pages[-1]
            window = await call(client, "fetch", {"id": key, "chunk_index": 0})
            past = await call(client, "fetch", {"id": key, "offset": len(whole)})
            return pages, window, past

    pages, window, past = run(main())
    bodies = [p.structured_content for p in pages]
    assert [(b["char_start"], b["char_end"], b["truncated"]) for b in bodies] == [
        (0, 30, True), (30, 60, True), (60, len(whole), False)
    ]  # fmt: skip
    assert "".join(b["text"] for b in bodies) == whole
    for result in [*pages, window]:
        assert json.loads(result.content[0].text) == result.structured_content
    chunk = window.structured_content["chunks"][0]
    assert chunk == {"chunk_index": 0, "char_start": 0, "char_end": len(whole)}
    assert window.structured_content["text"] == whole
    assert past.is_error and past.structured_content["field"] == "offset"


def test_fetch_whole_text_and_a_window(mcp_url: str, ro_api: Api) -> None:
    key = ro_api.keys[LIGHT]

    async def main() -> tuple[Any, Any, Any]:
        async with session(mcp_url, basic("alice")) as client:
            whole = await call(client, "fetch", {"id": key})
            doc_type, doc_id = key.split(":")
            window = await call(
                client, "fetch", {"doc_type": doc_type, "doc_id": doc_id, "chunk_index": 0}
            )
            past = await call(client, "fetch", {"id": key, "chunk_index": 7})
            return whole, window, past

    whole, window, past = run(main())
    assert not whole.is_error
    body = whole.structured_content
    assert body["id"] == key and body["title"]
    assert body["text"] == ("Lighthouse plan: polish the lighthouse lens and replace the brass "
                            "fittings.")  # fmt: skip
    assert body["url"].endswith(f"/index.php/f/{key.split(':')[1]}")
    assert body["metadata"]["path"] == LIGHT and body["metadata"]["chunk_count"] == 1
    assert window.structured_content["chunks"][0]["chunk_index"] == 0
    assert past.is_error and past.structured_content["field"] == "chunk_index"


def test_a_window_before_the_last_chunk_says_the_document_goes_on(api: Api) -> None:
    """``fetch`` with ``chunk_index`` answered ``truncated: false`` and ``next_offset: null``
    for a window ending before the document's last chunk, which the schema describes as "the
    text goes on" / "where to read on": an agent took the window's end for the document's.
    Now a window short of the end is ``truncated`` with the ``offset`` that reads on from
    it, and only one that reaches the last chunk is not."""
    parts = [f"Keeper log {i}: the lighthouse lens was polished on day {i}." for i in range(4)]
    key = api.index_parts("alice", "/Projects/Lighthouse/log.md", parts)
    served = serve_in_thread(create_app(api.settings, services=api.services, producer=api.producer))

    async def main() -> list[Any]:
        async with session(f"{served.url}/mcp", basic("alice")) as client:
            first = await call(client, "fetch", {"id": key, "chunk_index": 0, "window": 1})
            body = first.structured_content
            rest = await call(client, "fetch", {"id": key, "offset": body["next_offset"]})
            last = await call(client, "fetch", {"id": key, "chunk_index": 3, "window": 1})
            return [first, rest, last]

    try:
        first, rest, last = (r.structured_content for r in run(main()))
    finally:
        served.close()
    text = "\n\n".join(parts)
    assert [c["chunk_index"] for c in first["chunks"]] == [0, 1]
    assert first["truncated"] is True and first["next_offset"] == first["char_end"]
    assert first["text"] + rest["text"] == text and rest["truncated"] is False
    assert rest["next_offset"] is None
    assert [c["chunk_index"] for c in last["chunks"]] == [2, 3]
    assert last["truncated"] is False and last["next_offset"] is None
    assert last["char_end"] == len(text)


BAD_ARGUMENTS = [
    ("search", {}, "invalid_value", "query"),
    ("search", {"query": "x", "limit": 0}, "invalid_value", "limit"),
    ("search", {"query": "x", "colour": "red"}, "unknown_field", "colour"),
    ("search", {"query": "x", "doc_types": ["spreadsheet"]}, "invalid_value", "doc_types[0]"),
    ("search", {"query": "x", "filter": {"field": "acl", "op": "eq", "value": "user:bob"}},
     "unknown_field", "filter.field"),
    ("search", {"query": "x", "filter": {"and": [{"field": "doc_type", "op": "eq",
                                                  "value": "note"},
                                                 {"field": "nope", "op": "eq", "value": 1}]}},
     "unknown_field", "filter.and[1].field"),
    ("search", {"query": "x", "filter": {"field": "size", "op": "regex", "value": 1}},
     "unsupported_operator", "filter.op"),
    ("search", {"query": "x", "filter": {"field": "doc_type", "op": "eq", "value": "note",
                                         "valu": 1}},
     "invalid_filter", "filter.valu"),  # strict, unlike RCP
    ("search", {"query": "x", "modified_after": "yesterday"}, "invalid_value",
     "modified_after"),
    ("search", {"query": "x", "filter": {}}, "invalid_filter", "filter"),  # not "no filter"
    ("search", {"query": "x", "category": "work"}, "invalid_value", "category"),  # 'Work'
    ("search", {"query": "x", "filter": {"and": [
        {"field": "modified_at", "op": "gte", "value": "2026-01-01"},
        {"field": "modified_at", "op": "lt", "value": "2026-01-01"}]}},
     "invalid_value", "filter.and[1].value"),
    ("fetch", {}, "invalid_value", "id"),
    ("fetch", {"doc_type": "file"}, "invalid_value", "doc_id"),
    ("fetch", {"doc_id": "1"}, "invalid_value", "doc_type"),
    ("fetch", {"id": "file"}, "invalid_value", "id"),
    ("fetch", {"id": "file:1", "doc_id": "1"}, "invalid_value", "id"),
    ("fetch", {"id": "file:1", "window": 99}, "invalid_value", "window"),
    ("fetch", {"id": "file:1", "window": 1}, "invalid_value", "window"),
    ("fetch", {"id": "file:1", "chunk_index": 0, "offset": 5}, "invalid_value", "offset"),
    ("fetch", {"id": "file:1", "max_chars": 0}, "invalid_value", "max_chars"),
    ("fetch", {"id": "file:999999"}, "not_found", "id"),
    # an id with a space was looked up and answered not_found: the id right, the document gone
    ("fetch", {"id": "file:1 "}, "invalid_value", "id"),
    ("fetch", {"id": "file: 1"}, "invalid_value", "id"),
    ("fetch", {"doc_type": "file", "doc_id": "1\n"}, "invalid_value", "doc_id"),
    # the SDK's message ends with the path, which the text said twice
    ("search", {"query": "x", "filter": {"field": "tags", "op": "in", "value": "finance"}},
     "invalid_value", "filter.value"),
    ("search", {"query": "x", "filter": {"and": {"field": "size", "op": "eq", "value": 1}}},
     "invalid_filter", "filter.and"),
    ("list_filters", {"x": 1}, "unknown_field", "x"),
    ("list_folders", {"limit": 0}, "invalid_value", "limit"),
    ("list_folders", {"offset": -1}, "invalid_value", "offset"),
    ("list_tags", {"limit": 1001}, "invalid_value", "limit"),
    ("list_tags", {"page": 2}, "unknown_field", "page"),
]  # fmt: skip


def test_bad_arguments_are_tool_errors_naming_the_field(mcp_url: str) -> None:
    async def main() -> list[Any]:
        async with session(mcp_url, basic("alice")) as client:
            return [await call(client, tool, arguments) for tool, arguments, _, _ in BAD_ARGUMENTS]

    for result, (tool, arguments, code, field) in zip(run(main()), BAD_ARGUMENTS, strict=True):
        assert result.is_error, (tool, arguments)
        error = result.structured_content
        assert (error["code"], error["field"]) == (code, field), (tool, arguments, error)
        assert result.content[0].text.startswith(f"{code} ({field}): ")
        assert result.content[0].text.count(f"({field})") == 1, result.content[0].text


def test_an_unknown_argument_is_answered_first_with_the_arguments_the_tool_takes(
    mcp_url: str, ro_api: Api
) -> None:
    """An agent that wrote ``q`` for ``query`` was told ``query`` was missing, and then, with
    both, that ``q`` was "Extra inputs are not permitted", without the names it may use: two
    wrong calls, and guesses (``page``, ``offset``, ``cursor`` for a next page) learnt
    nothing. Now an unknown argument is the error answered, whatever else is wrong, and its
    detail lists the tool's arguments (the input schema's properties); the search API's body
    the same."""
    calls = [
        ("search", {"q": "lighthouse"}),
        ("search", {"query": "lighthouse", "page": 2}),
        ("fetch", {"identifier": ro_api.keys[LIGHT]}),
        ("list_folders", {"prefix": "/Projects"}),
        ("list_filters", {"verbose": True}),
    ]

    async def main() -> tuple[dict[str, Any], list[Any]]:
        async with session(mcp_url, basic("alice")) as client:
            tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            return tools, [await call(client, tool, arguments) for tool, arguments in calls]

    schemas, results = run(main())
    for (tool, arguments), result in zip(calls, results, strict=True):
        assert result.is_error, (tool, arguments)
        error = result.structured_content
        (unknown,) = set(arguments) - set(schemas[tool]["properties"])
        assert (error["code"], error["field"]) == ("unknown_field", unknown), error
        names = list(schemas[tool]["properties"])
        if names:
            assert error["detail"].endswith(f"expected one of: {', '.join(names)}"), error
        else:
            assert error["detail"] == "none is accepted here", error
    response = ro_api.post("alice", {"q": "lighthouse"})
    assert response.status_code == 400
    body = response.get_json()
    assert (body["code"], body["field"]) == ("unknown_field", "q")
    assert "expected one of: query, limit, " in body["detail"]


def test_a_result_names_its_owner_as_the_owner_filter_takes_it(mcp_url: str, ro_api: Api) -> None:
    """Asked "what did alice write about the lighthouse?", an agent searching as bob could
    filter on ``owner`` but not tell, from a result, whose document it was: no result carried
    the owner. Now each result has ``owner`` (a user id), and filtering on that value finds
    the same document; bob's own document says bob."""
    shared = ro_api.keys[LIGHT]

    async def main() -> tuple[Any, Any]:
        async with session(mcp_url, basic("bob")) as client:
            found = await call(client, "search", {"query": "lighthouse lens", "limit": 20})
            owners = {r["id"]: r["owner"] for r in found.structured_content["results"]}
            leaf = {"field": "owner", "op": "eq", "value": owners[shared]}
            again = await call(client, "search", {"query": "lighthouse lens", "filter": leaf})
            return found, again

    found, again = run(main())
    owners = {r["id"]: r["owner"] for r in found.structured_content["results"]}
    assert owners[shared] == "alice"
    assert "bob" in owners.values()  # his own documents
    assert shared in ids(again) and {r["owner"] for r in again.structured_content["results"]} == {
        "alice"
    }
    response = ro_api.post("bob", {"query": "lighthouse lens", "limit": 20})
    assert {r["owner"] for r in response.get_json()["results"]} == set(owners.values())


def test_a_date_in_another_format_is_refused_with_examples_that_work(mcp_url: str) -> None:
    """``modified_after: "12/01/2025"`` (or ``"last month"``) was refused "is not an RFC 3339
    time", leaving an agent to recall that format. Now the detail shows examples, and each of
    them is accepted, as a top-level argument and in the filter tree."""
    leaf = {"field": "modified_at", "op": "gte", "value": "12/01/2025"}
    bad = [{"modified_after": "12/01/2025"}, {"modified_before": "last month"}, {"filter": leaf}]

    async def main() -> tuple[list[Any], list[Any]]:
        async with session(mcp_url, basic("alice")) as client:
            refused = [await call(client, "search", {"query": "lens", **a}) for a in bad]
            detail = refused[0].structured_content["detail"]
            examples = re.findall(r"\d{4}-\d{2}-\d{2}[^ ,)]*", detail.split("(", 1)[1])
            assert len(examples) == 3, detail
            accepted = [
                await call(client, "search", {"query": "lens", **args})
                for e in examples
                for args in (
                    {"modified_after": e},
                    {"filter": {"field": "modified_at", "op": "gte", "value": e}},
                )
            ]
            return refused, accepted

    refused, accepted = run(main())
    for result, arguments in zip(refused, bad, strict=True):
        error = result.structured_content
        assert result.is_error and error["code"] == "invalid_value", error
        assert "such as 2026-01-31, 2026-01-31T09:30:00Z" in error["detail"], (arguments, error)
    for result in accepted:
        assert not result.is_error, result.content


def test_mode_sparse_answers_nothing_for_words_no_document_holds(mcp_url: str, ro_api: Api) -> None:
    """A hybrid search answers its nearest documents whatever the query, so an agent could not
    tell "nothing matches" from weak matches; RCP's ``retrieve`` could ask for one ranking
    (``mode``), ``search`` and ``POST /v1/search`` could not. Now ``mode: sparse`` ranks by the
    query's words alone (none in any document: no result, and the dense half is not asked),
    ``dense`` by meaning alone, and another mode is refused naming ``mode``."""
    nonsense = "xyzzy plugh qwertyuiop"

    async def main() -> list[Any]:
        async with session(mcp_url, basic("alice")) as client:
            return [
                await call(client, "search", {"query": nonsense}),
                await call(client, "search", {"query": nonsense, "mode": "sparse"}),
                await call(
                    client, "search", {"query": "foghorn", "mode": "sparse", "explain": True}
                ),
                await call(
                    client, "search", {"query": "foghorn", "mode": "dense", "explain": True}
                ),
                await call(client, "search", {"query": "foghorn", "mode": "keyword"}),
            ]

    hybrid, sparse, words, meaning, bad = run(main())
    assert ids(hybrid) and ids(sparse) == []
    assert ro_api.keys[FOGHORN] in ids(words)
    assert all("foghorn" in r["snippet"].lower() for r in words.structured_content["results"])
    assert all(r["explain"]["dense"] is None for r in words.structured_content["results"])
    assert ids(meaning) and all(
        r["explain"]["sparse"] is None for r in meaning.structured_content["results"]
    )
    assert bad.is_error and (bad.structured_content["code"], bad.structured_content["field"]) == (
        "invalid_value",
        "mode",
    )
    assert ro_api.found("alice", {"query": nonsense, "mode": "sparse"}) == []


def test_an_empty_list_filter_is_refused_saying_to_leave_it_out(mcp_url: str) -> None:
    """An agent sending ``tags: []`` for "no tag filter" was told "List should have at least 1
    item after validation, not 0", which does not say that leaving the key out is the way to
    ask for any. Now the detail says so, for each list argument of ``search``."""
    lists = ["doc_types", "path_prefixes", "tags", "mime_types"]

    async def main() -> list[Any]:
        async with session(mcp_url, basic("alice")) as client:
            return [await call(client, "search", {"query": "lens", name: []}) for name in lists]

    for name, result in zip(lists, run(main()), strict=True):
        error = result.structured_content
        assert result.is_error and (error["code"], error["field"]) == ("invalid_value", name)
        assert error["detail"].endswith("give at least one value, or leave it out"), error


def test_list_filters_and_index_status(mcp_url: str, ro_api: Api) -> None:
    names = ro_api.settings.names
    client = redis.Redis.from_url(ro_api.settings.redis_url)
    # none pending before (a re-check an earlier test's search sent to the recording producer,
    # which never runs it, stays pending), then one document queued and one parked, alice's
    client.delete(names.pending("alice"), names.pending("bob"))
    Progress(client, names).queued("alice", ["node:4243"])
    DeadLetters(client, names).park(
        DeadLetter("node:4242", "alice", "corrupt PDF", "etag-1", "ncindex.index_node")
    )

    async def main() -> tuple[Any, Any, Any]:
        async with session(mcp_url, basic("alice")) as alice:
            filters = await call(alice, "list_filters", {})
            mine = await call(alice, "index_status", {})
        async with session(mcp_url, basic("bob")) as bob:
            theirs = await call(bob, "index_status", {})
        return filters, mine, theirs

    try:
        filters, mine, theirs = run(main())
    finally:
        client.delete(names.pending("alice"))
        DeadLetters(client, names).release("node:4242")
    assert filters.structured_content == filters_document()
    # alice can read her four files and a note (one file is shared with bob); bob his two and
    # the share
    status = mine.structured_content
    assert status["user"] == "alice"
    assert {t: v["indexed"] for t, v in status["doc_types"].items()} == {
        "note": 1, "file": 4, "deck_card": 0, "news_item": 0
    }  # fmt: skip
    assert (status["pending"], status["failed"]) == (1, 1)
    assert [e["reason"] for e in status["dead_letter"]] == ["corrupt PDF"]
    assert theirs.structured_content["user"] == "bob"
    assert sum(v["indexed"] for v in theirs.structured_content["doc_types"].values()) == 3
    assert theirs.structured_content["pending"] == theirs.structured_content["failed"] == 0
    assert theirs.structured_content["dead_letter"] == []


PAGES = [{}, {"limit": 1}, {"offset": 1, "limit": 2}, {"offset": 2.0, "limit": None},
         {"offset": 1000}]  # fmt: skip


def test_list_folders_and_tags_answer_what_rest_answers(api: Api) -> None:
    """An agent had no way to learn the folders and tags it may filter on (``GET /v1/folders``
    and ``GET /v1/tags`` were REST only), so a folder or tag it guessed matched nothing, without
    a hint. ``list_folders`` and ``list_tags`` answer each caller exactly what those endpoints
    answer them, page by page (the same lists held to Nextcloud as the caller — a tag made
    invisible since goes from both —, the same ``offset``/``limit``), and a listed folder and
    tag are values ``search`` finds documents under."""
    sim = api.sim
    sim.create_tag("urgent")
    finance = sim.create_tag("finance")
    served = serve_in_thread(create_app(api.settings, services=api.services, producer=api.producer))
    url = f"{served.url}/mcp"

    def rest(user: str, name: str, page: dict[str, Any]) -> Any:
        query = "&".join(f"{k}={int(v)}" for k, v in page.items() if v is not None)
        response = api.client.get(f"/v1/{name}?{query}", auth=(user, PASSWORDS[user]))
        assert response.status_code == 200, response.get_json()
        return response.get_json()

    async def lists(user: str) -> dict[tuple[str, int], Any]:
        async with session(url, basic(user)) as client:
            return {
                (name, i): await call(client, f"list_{name}", page)
                for name in ("folders", "tags")
                for i, page in enumerate(PAGES)
            }

    async def searches() -> tuple[Any, Any]:
        async with session(url, basic("alice")) as client:
            return (
                await call(
                    client, "search", {"query": "lighthouse", "path_prefixes": ["/Private"]}
                ),
                await call(client, "search", {"query": "budget", "tags": ["finance"]}),
            )

    def agree(user: str) -> dict[tuple[str, int], Any]:
        answers = run(lists(user))
        for (name, i), result in answers.items():
            assert not result.is_error, (user, name, result.content)
            body = result.structured_content
            assert body == rest(user, name, PAGES[i]), (user, name, PAGES[i])
            assert json.loads(result.content[0].text) == body
        return {key: result.structured_content for key, result in answers.items()}

    try:
        alice, bob = agree("alice"), agree("bob")
        assert {"/Private", "/Projects", "/Projects/Lighthouse"} <= set(
            alice["folders", 0]["folders"]
        )
        assert alice["folders", 0]["total"] == len(alice["folders", 0]["folders"])
        assert alice["folders", 0]["next_offset"] is None
        assert alice["folders", 1]["next_offset"] == 1 and len(alice["folders", 1]["folders"]) == 1
        assert alice["tags", 0] == {"tags": ["finance", "urgent"], "total": 2, "next_offset": None}
        assert alice["tags", 1] == {"tags": ["finance"], "total": 2, "next_offset": 1}
        assert "/Private" in bob["folders", 0]["folders"]  # his own: the same name, another folder
        assert "/Projects" not in bob["folders", 0]["folders"]
        assert bob["tags", 0]["tags"] == ["urgent"]
        in_private, tagged = run(searches())
        assert ids(in_private) == [api.keys[DIARY]]
        assert ids(tagged) == [api.keys[BUDGET]]
        sim.tags.tags[finance].user_visible = False  # no event says so: held to Nextcloud
        assert agree("alice")["tags", 0]["tags"] == ["urgent"]
    finally:
        served.close()


def test_every_tool_declares_an_output_schema_its_results_validate_against(
    mcp_url: str, ro_api: Api
) -> None:
    """No tool declared an ``outputSchema``, so a client could not validate a result and
    nothing in the protocol said what its fields are. Now each does, with the units and what
    ``score`` is in its field descriptions, and every kind of answer — a search with and
    without ``explain``, a whole, a paged and a windowed fetch, the filters, a status with a
    parked document — validates against it (checked here with ``jsonschema``, as the SDK
    client also does before returning it) and names no field the schema leaves out."""
    key = ro_api.keys[LIGHT]
    names = ro_api.settings.names
    client = redis.Redis.from_url(ro_api.settings.redis_url)
    DeadLetters(client, names).park(
        DeadLetter("node:4242", "alice", "corrupt PDF", "etag-1", "ncindex.index_node")
    )
    calls = [
        ("search", {"query": "lighthouse lens foghorn"}),
        ("search", {"query": "lighthouse", "explain": True, "doc_types": ["file"]}),
        ("fetch", {"id": key}),
        ("fetch", {"id": key, "max_chars": 30}),
        ("fetch", {"id": key, "chunk_index": 0}),
        ("list_filters", {}),
        ("list_folders", {"limit": 1}),
        ("list_tags", {}),
        ("index_status", {}),
        ("list_values", {"field": "mime_type"}),
        ("fetch", {"path": LIGHT}),
    ]

    async def main() -> tuple[Any, list[Any]]:
        async with session(mcp_url, basic("alice")) as alice:
            tools = {t.name: t for t in (await alice.list_tools()).tools}
            return tools, [await call(alice, tool, arguments) for tool, arguments in calls]

    try:
        tools, results = run(main())
    finally:
        DeadLetters(client, names).release("node:4242")
    assert set(tools) == TOOLS
    schemas = {name: tool.output_schema for name, tool in tools.items()}
    for name, schema in schemas.items():
        assert schema is not None, name
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["description"], name
    listed = json.dumps(schemas, ensure_ascii=False)
    assert "/v1/" not in listed and "``" not in listed and ":class:" not in listed
    result = schemas["search"]["$defs"]["ToolSearchResult"]["properties"]
    assert "not a similarity" in result["score"]["description"]
    assert "Unix seconds" in result["modified_at"]["description"]
    assert "characters" in result["char_start"]["description"]
    fetched = schemas["fetch"]["properties"]
    assert "characters" in fetched["char_start"]["description"]
    for (tool, arguments), answer in zip(calls, results, strict=True):
        assert not answer.is_error, (tool, arguments, answer.content)
        body = answer.structured_content
        Draft202012Validator(schemas[tool]).validate(body)
        assert set(body) <= set(schemas[tool]["properties"]), (tool, arguments)
    searched, explained = results[0].structured_content, results[1].structured_content
    assert searched["results"] and explained["results"]
    for r in searched["results"] + explained["results"]:
        assert set(r) <= set(result), r
    assert all("explain" in r for r in explained["results"])
    assert results[3].structured_content["truncated"] is True
    assert results[4].structured_content["chunks"]
    assert len(results[6].structured_content["folders"]) == 1
    assert results[6].structured_content["next_offset"] == 1
    assert results[8].structured_content["dead_letter"]
    for name in ("list_folders", "list_tags"):
        described = tools[name].description
        assert all(said in described for said in ("1–1,000", "default 200", "next_offset")), name


def test_a_tool_error_reaches_the_sdk_client_as_an_error_not_a_schema_failure(
    mcp_url: str,
) -> None:
    """A tool error's ``structuredContent`` is ``{code, field, detail}``, not the tool's
    ``outputSchema``; the SDK client validates only successful results against that schema
    (``ClientSession.call_tool``: not when ``is_error``), so the error reaches the caller as
    an error result rather than a validation ``RuntimeError``."""

    async def main() -> tuple[Any, Any]:
        async with session(mcp_url, basic("alice")) as alice:
            tools = {t.name: t for t in (await alice.list_tools()).tools}
            return tools["fetch"], await call(alice, "fetch", {"id": "file:999999"})

    fetch, result = run(main())
    assert fetch.output_schema is not None
    assert result.is_error
    assert result.structured_content["code"] == "not_found"
    assert not Draft202012Validator(fetch.output_schema).is_valid(result.structured_content)


def test_bad_or_missing_credentials_are_401(mcp_url: str) -> None:
    """401 with ``WWW-Authenticate``: problem+json for curl (``Accept: */*``), a JSON-RPC
    error with the same ``code`` and ``field`` in ``data`` for an MCP client's ``Accept``."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for authorization in (None, basic("alice", "wrong"), basic("mallory", "x"), "Token abc"):
        for accept in ("*/*", "application/json, text/event-stream"):
            headers = {"Accept": accept}
            if authorization:
                headers["Authorization"] = authorization
            response = httpx.post(mcp_url, json=body, headers=headers, timeout=30)
            assert response.status_code == 401, authorization
            assert response.headers["WWW-Authenticate"].startswith("Basic")
            if accept == "*/*":
                assert response.headers["Content-Type"] == "application/problem+json"
                problem = response.json()
            else:
                assert response.headers["Content-Type"] == "application/json"
                problem = response.json()["error"]["data"]
            assert problem["code"] == "unauthenticated"
            assert problem["field"] == "Authorization"  # as the search API's 401

        async def main(authorization: str | None = authorization) -> None:
            async with session(mcp_url, authorization) as client:
                await client.list_tools()

        with pytest.raises(BaseException) as caught:  # the SDK client cannot even start
            run(main())
        error = mcp_error(caught.value)
        assert error.error.data["code"] == "unauthenticated", error
        assert error.error.data["field"] == "Authorization"


def test_a_basic_credential_holding_a_control_character_is_400_unsent(
    mcp_url: str, ro_api: Api
) -> None:
    """A Basic credential whose password or login name holds a control character (a line
    break pasted with it, a C1 control) was sent to Nextcloud and answered 401: the gate
    answers 400 ``invalid_value`` on ``Authorization`` (problem+json, or in the JSON-RPC
    error's ``data``), and Nextcloud is not asked (failed on main: 401)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    before = ro_api.sim.request_count("ocs")
    for user, password in (("alice", PASSWORDS["alice"] + "\n"), ("al\u0085ice", "pw")):
        for accept in ("*/*", "application/json, text/event-stream"):
            headers = {"Accept": accept, "Authorization": basic(user, password)}
            response = httpx.post(mcp_url, json=body, headers=headers, timeout=30)
            assert response.status_code == 400, response.text
            problem = response.json() if accept == "*/*" else response.json()["error"]["data"]
            assert (problem["code"], problem["field"]) == ("invalid_value", "Authorization")
    assert ro_api.sim.request_count("ocs") == before


def refusal_seen_by_the_sdk(url: str, authorization: str) -> MCPError:
    """The ``MCPError`` the SDK's own client raises when the gate refuses its first
    request."""

    async def main() -> None:
        async with session(url, authorization) as client:
            await client.call_tool("search", {"query": "lens"})

    with pytest.raises(BaseException) as caught:
        run(main())
    return mcp_error(caught.value)


def test_the_sdk_client_sees_why_the_gate_refused_it(
    redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path, empty_store: Path
) -> None:
    """Refused credentials, a used-up rate limit and a Nextcloud that cannot confirm the
    caller reach an agent on the SDK's own client as ``MCPError`` whose ``data`` names the
    product's code and field (and when to retry). They were problem+json bodies, which the
    SDK's client replaces with a bare -32603 "Server returned an error response"
    (``mcp.client.streamable_http``, ``_handle_post_request``): no code, no field, no
    ``Retry-After``; so an agent could not tell a wrong app password from an outage."""
    redis.Redis.from_url(redis_url).flushdb()
    api, sim_server = build_api(tmp_path, redis_url, embedder, model_dir, empty_store)
    served: ServedAsgi | None = None
    try:
        api.settings.search_rate_limit = "3/minute"
        served = serve_in_thread(
            create_app(api.settings, services=api.services, producer=api.producer)
        )
        url = f"{served.url}/mcp"

        refused = refusal_seen_by_the_sdk(url, basic("alice", "wrong"))
        assert refused.error.code == -32600
        assert refused.error.data["code"] == "unauthenticated"
        assert refused.error.data["field"] == "Authorization"
        assert refused.error.data["status"] == 401

        api.sim.faults.set("ocs", status=503)  # cloud/user cannot say who the caller is
        down = refusal_seen_by_the_sdk(url, basic("bob"))
        assert down.error.code == -32603
        assert down.error.data["code"] == "backend_unavailable"
        assert down.error.data["status"] == 503 and down.error.data["retry_after"] == 5
        api.sim.faults.clear()

        for _ in range(3):  # carol's three requests a minute: initialize, then two calls
            with contextlib.suppress(BaseException):
                refusal_seen_by_the_sdk(url, basic("carol"))
        limited = refusal_seen_by_the_sdk(url, basic("carol"))
        assert limited.error.data["code"] == "rate_limited"
        assert limited.error.data["status"] == 429
        assert 1 <= limited.error.data["retry_after"] <= 60
        assert "more than 3 requests per 1 minute" in limited.error.message
    finally:
        if served is not None:
            served.close()
        sim_server.close()
        api.services.close()


def test_a_foreign_host_origin_or_content_type_is_a_problem_naming_the_header(
    mcp_url: str,
) -> None:
    """DNS-rebinding protection: a ``Host`` outside ``mcp_allowed_hosts`` is 421, an
    ``Origin`` outside ``mcp_allowed_origins`` 403; a body not sent as JSON 400 — each
    problem+json with its code and the header as ``field`` (the SDK's transport answered the
    three in plain text)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    headers = {
        "Authorization": basic("alice"),
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    for extra, status, code, field in (
        ({"Host": "evil.example:80"}, 421, "host_not_allowed", "Host"),
        ({"Origin": "http://evil.example"}, 403, "origin_not_allowed", "Origin"),
        ({"Content-Type": "text/plain"}, 400, "invalid_value", "Content-Type"),
    ):
        response = httpx.post(mcp_url, content=body, headers={**headers, **extra})
        assert response.status_code == status, response.text
        # an MCP client's Accept: a JSON-RPC error the SDK's client reads, with the request's id
        assert response.headers["Content-Type"] == "application/json"
        assert response.json()["id"] == 1 and response.json()["error"]["code"] == -32600
        problem = response.json()["error"]["data"]
        assert (problem["status"], problem["code"], problem["field"]) == (status, code, field)
        plain = {**headers, **extra, "Accept": "*/*"}  # curl's: problem+json
        response = httpx.post(mcp_url, content=body, headers=plain)
        assert response.headers["Content-Type"] == "application/problem+json"
        problem = response.json()
        assert (problem["status"], problem["code"], problem["field"]) == (status, code, field)


INSPECTOR = "http://localhost:6274"
"""The MCP Inspector's default origin: a browser-based client, allowed by default
(``http://localhost:*``)."""
TRANSPORT_HEADERS = (
    "authorization, content-type, mcp-session-id, mcp-protocol-version, last-event-id"
)


def preflight(
    url: str, origin: str, method: str = "POST", headers: str = TRANSPORT_HEADERS
) -> httpx.Response:
    """The ``OPTIONS`` a browser sends before a cross-origin request with ``headers``."""
    asked = {"Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers}
    return httpx.options(url, headers={"Origin": origin, **asked}, timeout=30)


def cors_headers(response: httpx.Response) -> list[str]:
    return [name for name in response.headers if name.lower().startswith("access-control-")]


def test_a_browser_client_on_an_allowed_origin_gets_cors_answers(mcp_url: str) -> None:
    """A browser-based client (an inspector on localhost) could not call ``/mcp``: its
    preflight was 405 and no answer named its origin. Now the preflight is answered with the
    transport's methods and headers, and every answer names the origin and exposes
    ``Mcp-Session-Id``; never ``*``, never with credentials."""
    answer = preflight(mcp_url, INSPECTOR)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Access-Control-Allow-Origin"] == INSPECTOR
    assert "Access-Control-Allow-Credentials" not in answer.headers
    methods = {m.strip() for m in answer.headers["Access-Control-Allow-Methods"].split(",")}
    assert {"GET", "POST", "DELETE"} <= methods
    allowed = {h.strip().lower() for h in answer.headers["Access-Control-Allow-Headers"].split(",")}
    assert {h.strip() for h in TRANSPORT_HEADERS.split(",")} <= allowed
    # the SDK's client sending that Origin: every answer is readable by the page
    answers: list[Any] = []

    async def record(response: Any) -> None:
        answers.append(response.headers)

    async def main() -> list[Any]:
        headers = {"Authorization": basic("alice"), "Origin": INSPECTOR}
        async with create_mcp_http_client(headers=headers) as http:
            http.event_hooks["response"].append(record)
            async with Client(streamable_http_client(mcp_url, http_client=http), cache=None) as c:
                return (await c.list_tools()).tools

    assert {t.name for t in run(main())} == TOOLS
    assert answers
    for headers in answers:
        assert headers["Access-Control-Allow-Origin"] == INSPECTOR
        assert "mcp-session-id" in headers["Access-Control-Expose-Headers"].lower()
    # a refusal is readable too: the page sees the 401 and its challenge
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json", "Origin": INSPECTOR}
    refused = httpx.post(mcp_url, json=body, headers=headers, timeout=30)
    assert refused.status_code == 401
    assert refused.headers["Access-Control-Allow-Origin"] == INSPECTOR
    assert "www-authenticate" in refused.headers["Access-Control-Expose-Headers"].lower()
    # a method or a header the transport does not use: 400 naming what was asked
    for asked, field in (
        ({"method": "PUT"}, "Access-Control-Request-Method"),
        ({"headers": "authorization, x-api-key"}, "Access-Control-Request-Headers"),
    ):
        odd = preflight(mcp_url, INSPECTOR, **asked)
        assert odd.status_code == 400 and odd.json()["field"] == field, odd.text


def test_another_origin_gets_no_cors_headers(mcp_url: str) -> None:
    """An origin outside ``mcp_allowed_origins``: its preflight is 403 ``origin_not_allowed``
    as its ``POST`` is, neither with a CORS header (the browser refuses both)."""
    evil = "http://evil.example"
    answer = preflight(mcp_url, evil)
    assert answer.status_code == 403 and cors_headers(answer) == []
    assert (answer.json()["code"], answer.json()["field"]) == ("origin_not_allowed", "Origin")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Authorization": basic("alice"), "Accept": "application/json", "Origin": evil}
    posted = httpx.post(mcp_url, json=body, headers=headers, timeout=30)
    assert posted.status_code == 403 and cors_headers(posted) == []
    assert posted.json()["error"]["data"]["code"] == "origin_not_allowed"  # JSON-RPC: MCP Accept


def test_with_portless_adds_the_name_of_each_any_port_entry() -> None:
    assert with_portless(["a.example:*", "b.example", "[::1]:*", "[::1]"]) == [
        "a.example:*", "a.example", "b.example", "[::1]:*", "[::1]"
    ]  # fmt: skip
    assert with_portless(["https://a.example:*"]) == ["https://a.example:*", "https://a.example"]
    assert with_portless([]) == []


def test_a_custom_any_port_host_is_answered_without_a_port(ro_api: Api) -> None:
    """``NCINDEX_MCP_ALLOWED_HOSTS=["search.example.org:*"]`` answers ``Host:
    search.example.org`` (a client on port 443 behind a proxy sends no port), as it does
    ``search.example.org:8443``; the SDK alone refused it 421. The same for origins."""
    settings = ro_api.settings.model_copy(
        update={
            "mcp_allowed_hosts": ["search.example.org:*"],
            "mcp_allowed_origins": ["https://search.example.org:*"],
        }
    )
    served = serve_in_thread(
        create_app(settings, services=ro_api.services, producer=ro_api.producer)
    )
    try:
        url = f"{served.url}/mcp"
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Authorization": basic("alice"), "Accept": "application/json"}

        def status(host: str, origin: str | None = None) -> int:
            sent = {**headers, "Host": host, **({"Origin": origin} if origin else {})}
            return httpx.post(url, json=body, headers=sent, timeout=30).status_code

        assert status("search.example.org") == 200
        assert status("search.example.org:8443") == 200
        assert status("search.example.org", "https://search.example.org") == 200
        assert status("search.example.org", "https://search.example.org:8443") == 200
        assert status("search.example.org.evil.example") == 421
        assert status("127.0.0.1") == 421  # not listed here
        assert status("search.example.org", "https://evil.example") == 403
        # the same origins, and only they, get CORS answers
        for origin in ("https://search.example.org", "https://search.example.org:8443"):
            answer = preflight(url, origin)
            assert answer.status_code == 200, (origin, answer.text)
            assert answer.headers["Access-Control-Allow-Origin"] == origin
        for origin in ("https://search.example.org.evil.example", "http://search.example.org",
                       "http://localhost:6274"):  # fmt: skip
            assert cors_headers(preflight(url, origin)) == [], origin
    finally:
        served.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "localhost:80"])
def test_a_loopback_host_is_answered_with_or_without_a_port(mcp_url: str, host: str) -> None:
    """The default ``mcp_allowed_hosts``: a ``Host`` without a port (a client on port 80, a
    proxy that drops it) was refused 421 "Invalid Host header" by the SDK's ``name:*``."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Authorization": basic("alice"), "Accept": "application/json, text/event-stream"}
    response = httpx.post(mcp_url, json=body, headers={**headers, "Host": host})
    assert response.status_code == 200, response.text
    foreign = httpx.post(mcp_url, json=body, headers={**headers, "Host": "evil.example"})
    assert foreign.status_code == 421
    # so is a page on that host's port 80, whose browser sends its Origin without a port
    page = {**headers, "Host": host, "Origin": f"http://{host.removesuffix(':80')}"}
    assert httpx.post(mcp_url, json=body, headers=page).status_code == 200


def test_the_rate_limit_is_the_search_apis(
    redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path, empty_store: Path
) -> None:
    redis.Redis.from_url(redis_url).flushdb()
    api, sim_server = build_api(tmp_path, redis_url, embedder, model_dir, empty_store)
    served: ServedAsgi | None = None
    try:
        api.settings.search_rate_limit = "4/minute"
        served = serve_in_thread(
            create_app(api.settings, services=api.services, producer=api.producer)
        )
        url = f"{served.url}/mcp"
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Accept": "application/json, text/event-stream"}

        def post(user: str) -> httpx.Response:
            return httpx.post(url, json=body, headers={**headers, "Authorization": basic(user)})

        assert [post("alice").status_code for _ in range(3)] == [200] * 3
        # the fourth request of alice's is a search on the REST API: one shared count
        search_api = __import__("search_api").create_app(
            api.settings, services=api.services, producer=api.producer
        )
        rest = search_api.test_client().post(
            "/v1/search", json={"query": "lens"}, auth=("alice", PASSWORDS["alice"])
        )
        assert rest.status_code == 200
        limited = post("alice")
        assert limited.status_code == 429
        refused = limited.json()["error"]["data"]  # an MCP client's Accept: JSON-RPC
        assert refused["code"] == "rate_limited"
        assert refused["detail"] == "more than 4 requests per 1 minute"  # as REST's
        assert 1 <= int(limited.headers["Retry-After"]) <= 60
        assert post("bob").status_code == 200  # per caller
        # refused credentials count per client address too, as on the REST API: five made-up
        # names (five callers) from one address, the fifth is stopped before Nextcloud
        codes = [
            httpx.post(
                url, json=body, headers={**headers, "Authorization": basic(f"mallory{i}", "x")}
            ).status_code
            for i in range(5)
        ]
        assert codes == [401, 401, 401, 401, 429]
    finally:
        if served is not None:
            served.close()
        sim_server.close()
        api.services.close()


def test_an_app_password_revoked_within_the_user_cache_is_refused_at_once(
    redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path, empty_store: Path
) -> None:
    """An agent's app password is revoked in Nextcloud (``DELETE /ocs/v2.php/core/apppassword``,
    nextcloud/server ``core/Controller/AppPasswordController.php`` ``deleteAppPassword``) a few
    seconds after ncindex confirmed it. The next tool call that asks Nextcloud is refused
    (``unauthenticated``, field ``Authorization``) and from then on every request is a 401:
    the cached user id was kept for ``user_cache_seconds`` (60 by default), so the revoked
    password still passed the gate, ``index_status`` still answered, and each search sent
    Nextcloud another request it refused. The search API and RCP drop it the same way."""
    redis.Redis.from_url(redis_url).flushdb()
    api, sim_server = build_api(tmp_path, redis_url, embedder, model_dir, empty_store)
    served: ServedAsgi | None = None
    try:
        api.settings.user_cache_seconds = 60
        served = serve_in_thread(
            create_app(api.settings, services=api.services, producer=api.producer)
        )
        url = f"{served.url}/mcp"
        api.sim.add_app_password("alice", "agent-pw")
        agent = basic("alice", "agent-pw")

        async def status_and_search() -> tuple[Any, Any]:
            async with session(url, agent) as client:
                status = await call(client, "index_status", {})
                return status, await call(client, "search", {"query": "lighthouse lens"})

        status, found = run(status_and_search())
        assert not status.is_error and ids(found)  # confirmed: now in the user cache
        revoked = httpx.delete(
            f"{api.settings.nextcloud_url}/ocs/v2.php/core/apppassword",
            auth=("alice", "agent-pw"),
            headers={"OCS-APIRequest": "true"},
        )
        assert revoked.status_code == 200, revoked.text

        async def search() -> Any:
            async with session(url, agent) as client:
                return await call(client, "search", {"query": "lighthouse lens"})

        refused = run(search())  # the gate still had it cached; Nextcloud refused the search
        assert refused.is_error
        assert refused.structured_content["code"] == "unauthenticated"
        assert refused.structured_content["field"] == "Authorization"

        async def status_again() -> Any:
            async with session(url, agent) as client:
                return await call(client, "index_status", {})

        with pytest.raises(BaseException) as caught:  # at once, not 60 s later
            run(status_again())
        assert mcp_error(caught.value).error.data["status"] == 401

        # the search API: a search refused after the cache confirmed it drops it too
        api.sim.add_app_password("alice", "rest-pw")
        auth = ("alice", "rest-pw")
        assert api.client.get("/v1/status", auth=auth).status_code == 200
        httpx.delete(
            f"{api.settings.nextcloud_url}/ocs/v2.php/core/apppassword",
            auth=auth,
            headers={"OCS-APIRequest": "true"},
        )
        assert api.client.post("/v1/search", json={"query": "lens"}, auth=auth).status_code == 401
        assert api.client.get("/v1/status", auth=auth).status_code == 401

        # RCP: a retrieve refused after the cache confirmed the credentials drops them too
        api.sim.add_app_password("alice", "rcp-pw")
        auth = ("alice", "rcp-pw")

        def rcp(method: str, params: dict[str, Any]) -> Any:
            message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            return api.client.post(f"/rcp/{method}", json=message, auth=auth)

        assert "result" in rcp("initialize", {"protocolVersion": 1}).get_json()
        assert "result" in rcp("retrieve", {"query": "lens"}).get_json()
        httpx.delete(
            f"{api.settings.nextcloud_url}/ocs/v2.php/core/apppassword",
            auth=auth,
            headers={"OCS-APIRequest": "true"},
        )
        assert rcp("retrieve", {"query": "lens"}).status_code == 401
        assert rcp("initialize", {"protocolVersion": 1}).status_code == 401
    finally:
        if served is not None:
            served.close()
        sim_server.close()
        api.services.close()


def test_readyz_counts_the_configured_refused_accounts_and_names_none(api: Api) -> None:
    """The MCP server's ``/readyz`` listed accounts no longer configured, which the search
    API's, the receiver's and the gauge leave out: both apps now count the configured ones.
    Neither says why an account is refused, nor which: ``/readyz`` is public (probes read its
    status alone; the search API's is served beside the search page), and the cause — a user
    disabled or deleted in Nextcloud — is what Nextcloud shows only to its admins
    (nextcloud/server ``apps/provisioning_api/lib/Controller/AUserDataOCSController.php``
    ``getUserData``: ``enabled`` for an admin, a delegated admin or the user's group admin);
    ``accounts_refused_causes`` told anyone who could reach the search page, and the list of
    user ids in ``accounts_refused`` told them which users exist. ``ncindex status`` and
    ``ncindex doctor`` name them for the operator."""
    keys = api.settings.names
    client = api.services.redis
    disabled = Lookup(answered=True, account={"id": "alice", "enabled": False})
    record_refused(client, keys, "alice", "GET …: HTTP 401", credential="x", lookup=disabled)
    record_refused(client, keys, "bob", "GET …: HTTP 401", credential="y")  # not asked
    record_refused(client, keys, "zed", "GET …: HTTP 401", credential="z")  # not configured
    app = create_app(api.settings, services=api.services, producer=api.producer)
    with TestClient(app, base_url="http://127.0.0.1") as http:
        mcp = http.get("/readyz").json()
    rest = api.client.get("/readyz").get_json()
    for ready in (mcp, rest):
        assert ready["accounts_refused"] == 2, ready
        said = json.dumps(ready)
        assert not {"disabled", "alice", "bob", "zed"} & set(re.findall(r"\w+", said)), said


def revoked_while_cached(
    api: Api, authorization: str, tool: str, arguments: dict[str, Any], revoke: Any
) -> tuple[Any, Any]:
    """``tool``'s results to ``arguments`` as ``authorization`` against ``api``'s stack behind
    an MCP server of its own: once (the credential confirmed, then cached), and again in a
    new session after ``revoke()``."""
    served = serve_in_thread(create_app(api.settings, services=api.services, producer=api.producer))

    async def once() -> Any:
        async with session(f"{served.url}/mcp", authorization) as client:
            return await call(client, tool, arguments)

    try:
        first = run(once())
        revoke()
        return first, run(once())
    finally:
        served.close()


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
@pytest.mark.parametrize(
    ("tool", "arguments"), [("list_values", {"field": "owner"}), ("index_status", {})]
)
def test_a_tool_answered_from_the_index_refuses_an_app_password_revoked_while_cached(
    api: Api, tool: str, arguments: dict[str, Any]
) -> None:
    """bob's app password is revoked while the credential cache holds it. ``list_values``
    (the index's facet counts) and ``index_status`` (Redis) ask Nextcloud nothing, so they
    kept answering it for the rest of the cache's 60 s. A tool's answer now waits for
    Nextcloud to have accepted the credential during the request, asking OCS ``cloud/user``
    when nothing did: ``unauthenticated``, as a search's refusal is."""

    def revoke() -> None:
        account = api.sim.tree.users["bob"]
        account.passwords.clear()
        account.token_logins.clear()

    first, refused = revoked_while_cached(api, basic("bob"), tool, arguments, revoke)
    assert not first.is_error, first.content
    assert refused.is_error, refused.structured_content
    assert refused.structured_content["code"] == "unauthenticated"


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
def test_a_search_tool_asks_once_about_a_cached_credential_nextcloud_does_not_answer(
    api: Api,
) -> None:
    """bob's credential is cached and his search has nothing to check (a category none of
    his documents holds), so it is confirmed with OCS ``cloud/user``; Nextcloud answers 503.
    The search confirms it (fail-open: the answer stands), and the tool call confirmed it
    again after the handler: two requests to a Nextcloud that is down, each waiting for its
    answer. Now a client asks once."""

    def down() -> None:
        api.sim.faults.set("ocs", status=503)
        api.sim.request_log.clear()

    query = {"query": "lighthouse", "category": "Nowhere"}
    first, second = revoked_while_cached(api, basic("bob"), "search", query, down)
    api.sim.faults.clear()
    assert not first.is_error and not second.is_error, second.content
    assert second.structured_content["results"] == []
    asked = [p for _, p, _ in api.sim.request_log if p == "/ocs/v2.php/cloud/user"]
    assert asked == ["/ocs/v2.php/cloud/user"]


@pytest.mark.parametrize("api", [{"http_timeout": 0.5, "user_cache_seconds": 60}], indirect=True)
def test_a_search_tool_nextcloud_does_not_answer_waits_for_it_once(api: Api) -> None:
    """bob's credential is cached, then Nextcloud stops answering. His search tool's checks
    (one WebDAV ``SEARCH``) timed out (``settings.http_timeout``; its results kept
    unconfirmed), and then the cached credential's confirmation (OCS ``cloud/user``) is
    asked once (``CONFIRM_SECONDS``; a part of Nextcloud stalled before its login check would
    refuse nothing else) and gets no answer: the answer stands. The gate's client, made for
    the one HTTP request carrying the tool call, stops each family at its first request
    without an answer, so nothing else is sent (the tool confirms in the search and after it:
    asked once). The faults count the requests that reached Nextcloud."""
    faults: dict[str, Any] = {}

    def stall() -> None:
        faults.update({f: api.sim.faults.set(f, timeout=True, times=10) for f in STALLED})

    try:
        first, stalled = revoked_while_cached(
            api, basic("bob"), "search", {"query": "lighthouse"}, stall
        )
    finally:
        api.sim.faults.clear()
    assert not first.is_error and not stalled.is_error, stalled.content
    answer = stalled.structured_content
    assert answer["results"] and answer["verification"]["errors"] >= 1, answer["verification"]
    reached = {family: 10 - (fault.times or 0) for family, fault in faults.items()}
    assert reached == {"webdav": 0, "dav-search": 1, "notes": 0, "ocs": 1}, reached


@pytest.mark.parametrize("api", [{"http_timeout": 0.5, "user_cache_seconds": 60}], indirect=True)
def test_the_next_tool_call_of_an_mcp_session_asks_a_nextcloud_that_stalled_again(api: Api) -> None:
    """One MCP session (the SDK's client) calls the search tool three times: answered, then
    with Nextcloud stalled (the gate's client for that POST stops at its first request
    without an answer: results unconfirmed), then with Nextcloud answering again — asked, and
    confirmed. The gate keeps the client in the ASGI scope of one POST, never with the
    session, the server's state or the credential cache (a guard: a client kept so would stay
    stopped for good after one timeout)."""
    served = serve_in_thread(create_app(api.settings, services=api.services, producer=api.producer))

    async def three() -> list[Any]:
        out = []
        async with session(f"{served.url}/mcp", basic("bob")) as client:
            out.append(await call(client, "search", {"query": "lighthouse"}))
            for family in STALLED:
                api.sim.faults.set(family, timeout=True, times=10)
            try:
                out.append(await call(client, "search", {"query": "lighthouse"}))
            finally:
                api.sim.faults.clear()
            out.append(await call(client, "search", {"query": "lighthouse"}))
        return out

    try:
        answers = run(three())
    finally:
        served.close()
    errors = [answer.structured_content["verification"]["errors"] for answer in answers]
    assert all(answer.structured_content["results"] for answer in answers), answers
    assert errors[0] == 0 and errors[1] >= 1 and errors[2] == 0, errors


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
def test_fetch_of_a_card_with_a_bearer_token_revoked_while_cached_on_nextcloud_30(
    api: Api,
) -> None:
    """Deck's ``#[CORS]`` API answers Nextcloud 30's Bearer caller 401 "CORS requires basic
    auth" for a good token and a revoked one alike (nextcloud/server
    ``CORSMiddleware::beforeController``, #44365, #46760). ``fetch`` reads through the
    context's check, so a revoked token is ``unauthenticated`` — confirmed through OCS, whose
    ``Session::tryTokenLogin`` checks it — and a good one ``not_found``. A guard: this held
    before the change it came with (the context confirmed a drop already)."""
    api.sim.version = "30.0.5"
    key = api.index_card("alice", "Harbour", "To do", ("Tar the ketch", "Tar the hull."))

    def revoke() -> None:
        account = api.sim.tree.users["alice"]
        account.passwords.clear()
        account.token_logins.clear()

    bearer = f"Bearer {PASSWORDS['alice']}"
    good, refused = revoked_while_cached(api, bearer, "fetch", {"id": key}, revoke)
    assert good.is_error and good.structured_content["code"] == "not_found", good.content
    assert refused.is_error and refused.structured_content["code"] == "unauthenticated"
    assert "ketch" not in json.dumps(refused.structured_content).lower()


def test_an_mcp_callers_requests_carry_the_callers_address_for_nextclouds_brute_force_count(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nextcloud counts a refused login against the address it came from and then slows down
    every login from there (nextcloud/server ``lib/private/User/Session.php``
    ``logClientIn`` → ``Throttler::registerAttempt('login', $remoteAddress)``); with ncindex
    in its ``trusted_proxies`` it takes the address from ``X-Forwarded-For``
    (``lib/private/AppFramework/Http/Request.php`` ``getRemoteAddress``). The search API sends
    its caller's address so; the MCP server sent none (its gate resolves the caller outside a
    Flask request), so an MCP client's wrong or revoked password was charged to ncindex's
    address. It now sends the address its gate saw, past its trusted proxies."""
    api.settings.trusted_proxy_hops = 1
    sent: list[str | None] = []
    request = api.services.http.request

    def spy(method: str, url: str, **kwargs: Any) -> Any:
        if str(url).endswith("/cloud/user"):
            sent.append(dict(kwargs.get("headers") or {}).get("X-Forwarded-For"))
        return request(method, url, **kwargs)

    monkeypatch.setattr(api.services.http, "request", spy)
    app = create_app(api.settings, services=api.services, producer=api.producer)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": basic("bob", "not-his-password"),
        "X-Forwarded-For": "198.51.100.7",
    }
    with TestClient(app, base_url="http://127.0.0.1") as http:
        assert http.post("/mcp", json=body, headers=headers).status_code == 401
    assert sent == ["198.51.100.7"]


@pytest.mark.parametrize("hops", [0, 1])
def test_refused_credentials_count_per_client_behind_trusted_proxies(
    hops: int,
    redis_url: str,
    embedder: Embedder,
    model_dir: Path,
    tmp_path: Path,
    empty_store: Path,
) -> None:
    """Behind an ingress every request came from its address (uvicorn under gunicorn reads
    no ``X-Forwarded-For``: deploy/gunicorn.conf.py), so one client's made-up credentials locked
    every anonymous client out. With ``trusted_proxy_hops`` 1 the address the proxy appended
    is the client's; with 0 (the default) a forged ``X-Forwarded-For`` changes nothing.
    Starlette's test client, not uvicorn: its peer is not loopback, as an ingress's is not."""
    redis.Redis.from_url(redis_url).flushdb()
    api, sim_server = build_api(tmp_path, redis_url, embedder, model_dir, empty_store)
    try:
        api.settings.search_rate_limit = "4/minute"
        api.settings.trusted_proxy_hops = hops
        app = create_app(api.settings, services=api.services, producer=api.producer)
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        with TestClient(app, base_url="http://127.0.0.1") as http:

            def post(i: int, forwarded_for: str) -> int:
                headers = {
                    "Accept": "application/json, text/event-stream",
                    "Authorization": basic(f"mallory{i}", "x"),
                    "X-Forwarded-For": forwarded_for,
                }
                return http.post("/mcp", json=body, headers=headers).status_code

            if hops:
                assert [post(i, "198.51.100.7") for i in range(5)] == [401] * 4 + [429]
                assert post(5, "198.51.100.8") == 401  # another client, its own count
                assert post(6, "198.51.100.7, 198.51.100.9") == 401  # the client wrote the left
            else:
                codes = [post(i, f"198.51.100.{i + 1}") for i in range(5)]
                assert codes == [401] * 4 + [429]
    finally:
        sim_server.close()
        api.services.close()


def test_served_by_uvicorn_a_loopback_client_cannot_forge_its_address(
    redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path, empty_store: Path
) -> None:
    """With ``trusted_proxy_hops`` 0, served by uvicorn (``ncindex up``, the tests): uvicorn
    took ``X-Forwarded-For`` from any loopback peer as the client's address (its own
    ``proxy_headers``, on by default), so a client on the host got a fresh count per forged
    address. Now only the app's :class:`TrustedProxies` reads the header."""
    redis.Redis.from_url(redis_url).flushdb()
    api, sim_server = build_api(tmp_path, redis_url, embedder, model_dir, empty_store)
    served: ServedAsgi | None = None
    try:
        api.settings.search_rate_limit = "4/minute"
        app = create_app(api.settings, services=api.services, producer=api.producer)
        served = serve_in_thread(app)
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        codes = [
            httpx.post(
                f"{served.url}/mcp",
                json=body,
                headers={
                    "Accept": "application/json, text/event-stream",
                    "Authorization": basic(f"mallory{i}", "x"),
                    "X-Forwarded-For": f"198.51.100.{i + 1}",
                },
                timeout=30,
            ).status_code
            for i in range(5)
        ]
        assert codes == [401] * 4 + [429]
    finally:
        if served is not None:
            served.close()
        sim_server.close()
        api.services.close()


@pytest.mark.parametrize("hops", [0, 1])
def test_behind_the_relay_of_ncindex_up_the_address_is_the_fronts(
    hops: int,
    redis_url: str,
    embedder: Embedder,
    model_dir: Path,
    tmp_path: Path,
    empty_store: Path,
) -> None:
    """``ncindex up``: its HTTP port resolves the client address (``trusted_proxy_hops``) and
    relays ``/mcp`` with it in ``X-Forwarded-For`` to the MCP server, which trusts that one
    hop (``proxy_hops=1``). Clients reaching the front through a proxy at 10.0.0.2: with hops
    0 they share that proxy's count whatever they forge, with 1 each has its own."""
    redis.Redis.from_url(redis_url).flushdb()
    api, sim_server = build_api(tmp_path, redis_url, embedder, model_dir, empty_store)
    served: ServedAsgi | None = None
    relay = httpx.Client(timeout=30)
    try:
        api.settings.search_rate_limit = "4/minute"
        app = create_app(api.settings, services=api.services, producer=api.producer, proxy_hops=1)
        served = serve_in_thread(app)
        front = WerkzeugClient(trusted_wsgi(forward_to(served.url, relay), hops))
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}

        def post(i: int, client: str) -> int:
            headers = {
                "Accept": "application/json, text/event-stream",
                "Authorization": basic(f"mallory{i}", "x"),
                "X-Forwarded-For": client,
                "Host": "127.0.0.1",
            }
            environ = {"REMOTE_ADDR": "10.0.0.2"}
            return front.post("/mcp", json=body, headers=headers, environ_base=environ).status_code

        assert [post(i, "198.51.100.7") for i in range(5)] == [401] * 4 + [429]
        assert post(5, "198.51.100.8") == (401 if hops else 429)
    finally:
        relay.close()
        if served is not None:
            served.close()
        sim_server.close()
        api.services.close()


ALICE_ONLY = {LIGHT, OLD, BUDGET, DIARY, FOGHORN} - {LIGHT}  # LIGHT is shared with bob


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    query=st.sampled_from(["lighthouse", "diary lens", "budget foghorn", "plan", "private"]),
    extra=st.sampled_from(
        [
            {},
            {"path_prefixes": ["/Private"]},
            {"path_prefixes": ["/Projects"]},
            {"doc_types": ["file", "note"]},
            {"filter": {"field": "owner", "op": "eq", "value": "alice"}},
            {"filter": {"not": {"field": "owner", "op": "eq", "value": "bob"}}},
            {"category": "Work"},
            {"fusion": "rrf", "limit": 100},
            {"filter": {"field": "path", "op": "eq", "value": "/Private/diary.md"}},
            {
                "filter": {
                    "or": [
                        {"field": "category", "op": "eq", "value": "WORK"},
                        {"field": "category", "op": "eq", "value": "HOME"},
                    ]
                }
            },
        ]
    ),
)
def test_bob_never_gets_alices_private_documents(
    mcp_url: str, ro_api: Api, query: str, extra: dict[str, Any]
) -> None:
    private = {ro_api.keys[p] for p in ALICE_ONLY}

    arguments = {"query": query, **extra}

    async def main() -> list[Any]:
        async with session(mcp_url, basic("bob")) as bob:
            found = await call(bob, "search", arguments)
            fetched = [await call(bob, "fetch", {"id": key}) for key in sorted(private)]
            status = await call(bob, "index_status", {})
            return [found, *fetched, status]

    async def again(swapped: dict[str, Any]) -> Any:
        async with session(mcp_url, basic("bob")) as bob:
            return (await call(bob, "search", swapped)).structured_content

    found, *fetched, status = run(main())
    assert not found.is_error, found.content
    assert private.isdisjoint(ids(found))
    # alice's /Projects, Work and diary are hinted to bob as a folder, category and path nobody
    # has are; bob's own category in another case, under an `or`, as his spelling alone
    check_hints_leak_nothing(
        arguments,
        found.structured_content,
        lambda swapped: run(again(swapped)),
        held={"Home", "urgent"},  # on the documents bob can read: his, and alice's shared plan
    )
    assert all(f.is_error and f.structured_content["code"] == "not_found" for f in fetched)
    assert status.structured_content["user"] == "bob"
    # a result names its owner, as Nextcloud names it to any reader (nextcloud/server
    # apps/dav/lib/Connector/Sabre/FilesPlugin.php handleGetProperties, oc:owner-id): alice
    # only on what she shares with bob, and nowhere else
    shared = {ro_api.keys[p] for o, p, *_ in FILES if o == "alice" and p.startswith(LIGHT_DIR)}
    results = found.structured_content["results"]
    assert all(r["owner"] == "bob" or r["id"] in shared for r in results)
    rest = [{k: v for k, v in r.items() if k != "owner"} for r in results]
    assert "alice" not in str(rest) + str(status.structured_content)
    assert ro_api.keys[SECRET] not in private and ro_api.keys[GARDEN] not in private


def chunked(model_dir: Path, text: str, tokens: int, overlap: int) -> ContextResponse:
    """``text`` cut by the real chunker, as the context read answers its chunks."""
    chunker = Chunker.from_settings(
        Settings(model_dir=model_dir, chunk_tokens=tokens, chunk_overlap_tokens=overlap)
    )
    chunks = chunker.chunk_text(text, markdown=False)
    return ContextResponse(
        doc_type="file",
        doc_id="1",
        title="t",
        chunk_count=len(chunks),
        chunks=[
            ContextChunk(chunk_index=c.index, text=c.text, char_start=c.char_start,
                         char_end=c.char_end)
            for c in chunks
        ],
    )  # fmt: skip


def test_fetch_stitches_overlapping_chunks_back_into_the_text(model_dir: Path) -> None:
    """``fetch``'s whole text from the real chunker's overlapping chunks: every word once, in
    order, and every chunk's ``char_start``/``char_end`` index its text in the stitched one.
    A gap the chunker trimmed (here blank lines and indents between paragraphs) was one
    newline whatever its length, so every later offset pointed before its character."""
    text = "\n\n   \n".join(f"Keeper {i} polishes lens {i}. " * 3 for i in range(40))
    overlapping, apart = chunked(model_dir, text, 60, 30), chunked(model_dir, text, 60, 0)
    assert any(b.char_start < a.char_end for a, b in itertools.pairwise(overlapping.chunks))
    assert any(b.char_start > a.char_end + 1 for a, b in itertools.pairwise(apart.chunks))
    for context in (overlapping, apart):
        assert len(context.chunks) > 5
        whole = stitched(context)
        assert whole.split() == text.split()
        first = context.chunks[0].char_start
        for c in context.chunks:
            assert whole[c.char_start - first : c.char_end - first] == c.text, c.chunk_index


def test_fetch_cuts_a_long_text_at_the_default_and_pages_through_it(model_dir: Path) -> None:
    """A 288,011-character file came back whole from ``fetch``. Now at most ``max_chars``
    (20,000 unless asked) from ``offset``, saying where the text starts, whether it was cut
    and where to read on; the pages put together are the text, and a chunk's offsets (a
    search result's) index the page that holds them. A window of chunks (``chunk_index``)
    starts at its first chunk's offset and sends each chunk's text once."""
    from mcp_server.tools import FetchArgs, fetch_body

    text = "\n\n".join(f"Keeper {i} polishes lens {i}. " * 40 for i in range(40))
    context = chunked(model_dir, text, 200, 20)
    assert len(text) > 40_000
    default = FetchArgs.model_validate({"id": "file:1"}).max_chars
    pages, offset = [], 0
    while True:
        page = fetch_body("file:1", None, context, offset, default, True)
        assert page["char_start"] == offset and page["char_end"] == offset + len(page["text"])
        pages.append(page)
        if not page["truncated"]:
            assert page["next_offset"] is None
            break
        assert len(page["text"]) == default == 20_000
        offset = page["next_offset"]
    assert len(pages) == 3 and "".join(p["text"] for p in pages).split() == text.split()
    for c in context.chunks:
        (page,) = [p for p in pages if p["char_start"] <= c.char_start < p["char_end"]]
        start = c.char_start - page["char_start"]
        assert page["text"][start : start + len(c.text)] == c.text[: len(page["text"]) - start]
    window = context.model_copy(update={"chunks": context.chunks[3:6]})
    body = fetch_body("file:1", None, window, 0, default, False)
    assert body["char_start"] == context.chunks[3].char_start and body["truncated"]
    assert body["next_offset"] == context.chunks[5].char_end  # chunks after the window
    assert [c["chunk_index"] for c in body["chunks"]] == [3, 4, 5]
    assert all("text" not in c for c in body["chunks"])
    for c in context.chunks[3:6]:
        assert body["text"][c.char_start - body["char_start"] :].startswith(c.text)


def test_only_post_is_served_and_its_body_is_strict_json(mcp_url: str) -> None:
    """A GET (the transport's SSE stream) or DELETE is 405 with ``Allow: POST`` at once, not a
    held connection; ``NaN``, a key named twice or a body past 64 KiB is refused before the
    transport reads it (its parser would let the first two by)."""
    headers = {"Authorization": basic("alice"), "Accept": "application/json, text/event-stream"}
    for method in ("GET", "DELETE"):
        answer = httpx.request(method, mcp_url, headers=headers, timeout=10)
        assert answer.status_code == 405 and answer.headers["Allow"] == "POST", method
        assert answer.json()["code"] == "method_not_allowed"
    call_ = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search", '
    for body, why in (
        (call_ + '"arguments": {"query": "x", "score_threshold": NaN}}}', "NaN is not valid JSON"),
        (call_ + '"arguments": {"query": "x", "query": "y"}}}', "'query' appears twice"),
        ('{"jsonrpc": "2.0", "id": 1, ', "Parse error"),
    ):
        answer = httpx.post(
            mcp_url, content=body, headers={**headers, "Content-Type": "application/json"}
        )
        assert answer.status_code == 400, body
        error = answer.json()
        assert error["id"] is None and error["error"]["code"] == -32700, error
        assert why in error["error"]["message"], error
    big = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": "a" * 70_000}}
    answer = httpx.post(mcp_url, json=big, headers=headers)
    assert answer.status_code == 413
    refused = answer.json()["error"]["data"]  # an MCP client's Accept: JSON-RPC
    assert (refused["code"], refused["field"]) == ("payload_too_large", "body")
    assert refused["limit"] == MAX_BODY_BYTES, refused  # machine-readable, as REST's
    fine = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    assert httpx.post(mcp_url, json=fine, headers=headers).status_code == 200


SUPPORTED = [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS]
"""Every protocol version the SDK's transport serves (handshake era, then 2026-07-28)."""
JSON_POST = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def envelope(method: str, version: str, params: dict[str, Any]) -> tuple[dict[str, Any], dict]:
    """A 2026-07-28 request (body with the ``_meta`` envelope, and its headers) at ``version``,
    as the specification has clients send it (basic/transports/streamable-http, "Request
    Metadata")."""
    meta = {PROTOCOL_VERSION_META_KEY: version, CLIENT_CAPABILITIES_META_KEY: {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    headers = {"Mcp-Protocol-Version": version, "Mcp-Method": method}
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    return body, headers


def mcp_error(exc: BaseException) -> MCPError:
    """The ``MCPError`` in ``exc`` or in the exception groups around it (the SDK's client
    raises one from its task groups when it cannot connect)."""
    if isinstance(exc, MCPError):
        return exc
    for inner in exc.exceptions if isinstance(exc, BaseExceptionGroup) else ():
        with contextlib.suppress(LookupError):
            return mcp_error(inner)
    raise LookupError(repr(exc))


def test_an_unsupported_protocol_version_is_400_naming_the_header_and_the_versions(
    mcp_url: str,
) -> None:
    """An ``Mcp-Protocol-Version`` the server does not speak is HTTP 400 with the JSON-RPC
    ``UnsupportedProtocolVersionError`` (-32022), whatever the body: ``data`` lists every
    version served (``supported``), the ``requested`` one, the code and the header as
    ``field``. The SDK's transport answered a handshake-era body with a -32602 about the
    2026-07-28 ``_meta`` envelope, and a 2026-07-28 body with -32022 listing 2026-07-28 alone.
    The versions it serves are still served, to the SDK's client in each of its modes."""
    headers = {"Authorization": basic("alice"), **JSON_POST}
    tools_list = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    modern, modern_headers = envelope("tools/list", "2099-01-01", {})
    for body, extra, requested, request_id in (
        (tools_list, {"Mcp-Protocol-Version": "1999-01-01"}, "1999-01-01", 1),
        (tools_list, {"Mcp-Protocol-Version": "banana"}, "banana", 1),
        (initialized, {"Mcp-Protocol-Version": "1999-01-01"}, "1999-01-01", None),
        (modern, modern_headers, "2099-01-01", 1),
    ):
        answer = httpx.post(mcp_url, json=body, headers={**headers, **extra}, timeout=30)
        assert answer.status_code == 400, answer.text
        assert answer.headers["Content-Type"] == "application/json"
        reply = answer.json()
        assert reply["id"] == request_id and reply["error"]["code"] == -32022, reply
        data = reply["error"]["data"]
        assert data["supported"] == SUPPORTED and data["requested"] == requested
        assert (data["code"], data["field"]) == ("unsupported_protocol_version",
                                                 "Mcp-Protocol-Version")  # fmt: skip
        assert "Mcp-Protocol-Version" in reply["error"]["message"]
        assert requested in reply["error"]["message"] and "2025-11-25" in data["detail"]

    async def fixed_header() -> None:  # a client configured to send a version of its own
        fixed = {"Authorization": basic("alice"), "Mcp-Protocol-Version": "1999-01-01"}
        async with (
            create_mcp_http_client(headers=fixed) as http,
            Client(streamable_http_client(mcp_url, http_client=http), mode="legacy") as client,
        ):
            await client.list_tools()

    async def discover_at(version: str) -> MCPError:
        async with session(mcp_url, basic("alice")) as client:
            with pytest.raises(MCPError) as refused:
                await client.session.send_discover(version)
            return refused.value

    with pytest.raises(BaseException) as caught:
        run(fixed_header())
    error = mcp_error(caught.value)
    assert error.code == -32022 and error.data["field"] == "Mcp-Protocol-Version"
    assert error.data["requested"] == "1999-01-01" and error.data["supported"] == SUPPORTED
    refused = run(discover_at("2099-01-01"))
    assert refused.code == -32022 and refused.data["supported"] == SUPPORTED
    assert refused.data["code"] == "unsupported_protocol_version"

    async def tools_in(mode: str) -> set[str]:
        async with (
            create_mcp_http_client(headers={"Authorization": basic("alice")}) as http,
            Client(streamable_http_client(mcp_url, http_client=http), mode=mode) as client,
        ):
            return {t.name for t in (await client.list_tools()).tools}

    for mode in ("auto", "legacy", *MODERN_PROTOCOL_VERSIONS):
        assert run(tools_in(mode)) == TOOLS, mode
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        extra = {"Mcp-Protocol-Version": version}
        answer = httpx.post(mcp_url, json=tools_list, headers={**headers, **extra}, timeout=30)
        assert answer.status_code == 200 and "result" in answer.json(), (version, answer.text)


def test_a_newer_sdk_client_falls_back_to_a_version_this_server_speaks(
    mcp_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's client, connecting, probes at its newest 2026-era version and on -32022 picks
    one from ``supported`` (``mcp.client._probe.negotiate_auto``). A client whose only modern
    version is one this server does not speak (here the SDK's own client made to probe at
    2099-01-01) could not connect: the list named 2026-07-28 alone, which the client reads as
    a server of that era only. With the handshake versions listed it falls back to
    ``initialize``."""
    monkeypatch.setattr(mcp_probe, "LATEST_MODERN_VERSION", "2099-01-01")
    monkeypatch.setattr(mcp_probe, "MODERN_PROTOCOL_VERSIONS", ("2099-01-01",))

    async def main() -> tuple[Any, set[str]]:
        async with session(mcp_url, basic("alice")) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            return client.session.initialize_result, tools

    initialized, tools = run(main())
    assert initialized.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS and tools == TOOLS


def test_tool_arguments_that_are_not_an_object_are_invalid_params_naming_the_field(
    mcp_url: str,
) -> None:
    """A ``tools/call`` whose ``arguments`` is an array, a string, a number or a boolean is a
    protocol error, JSON-RPC -32602 (MCP spec, server/tools, "Error Handling"), that names
    ``arguments`` and says it must be an object, in the message and in ``data`` as a tool
    error's ``{code, field, detail}``; the SDK answered "Invalid request parameters" with
    empty ``data``. Sent by raw HTTP: the SDK's client refuses such arguments itself. HTTP 200
    for a handshake-era request, 400 for a 2026-07-28 one (the SDK's status per error code).
    ``null`` still reaches the tool as no arguments."""
    headers = {"Authorization": basic("alice"), **JSON_POST}
    for arguments, kind in (([1, 2], "an array"), ("x", "a string"), (3, "a number"),
                            (True, "a boolean")):  # fmt: skip
        params = {"name": "search", "arguments": arguments}
        legacy = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        modern, modern_headers = envelope("tools/call", "2026-07-28", params)
        for body, extra, status in (
            (legacy, {"Mcp-Protocol-Version": "2025-11-25"}, 200),
            (modern, modern_headers, 400),
        ):
            answer = httpx.post(mcp_url, json=body, headers={**headers, **extra}, timeout=30)
            assert answer.status_code == status, answer.text
            error = answer.json()["error"]
            assert error["code"] == -32602, error
            assert error["data"] == {
                "code": "invalid_value",
                "field": "arguments",
                "detail": f"must be an object (the tool's arguments by name), not {kind}",
            }
            assert "`arguments` must be an object" in error["message"]
    params = {"name": "search", "arguments": None}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    result = httpx.post(mcp_url, json=body, headers=headers, timeout=30).json()["result"]
    assert result["isError"] and result["structuredContent"]["field"] == "query"


def test_starlettes_own_404_and_405_are_problems(mcp_url: str) -> None:
    """The MCP server alone (``mcp_server.asgi:app`` under gunicorn) answered an unknown path
    and a ``POST /livez`` in Starlette's plain text."""
    base = mcp_url.removesuffix("/mcp")
    missing = httpx.get(f"{base}/nope")
    assert (missing.status_code, missing.headers["Content-Type"]) == (
        404,
        "application/problem+json",
    )
    assert missing.json()["code"] == "not_found"
    wrong = httpx.post(f"{base}/livez")
    assert (wrong.status_code, wrong.headers["Content-Type"]) == (405, "application/problem+json")
    assert wrong.json()["code"] == "method_not_allowed" and "GET" in wrong.headers["Allow"]


def test_a_tool_call_without_a_known_tool_name_is_invalid_params_naming_the_field(
    mcp_url: str,
) -> None:
    """A ``tools/call`` without ``name``, with a ``name`` that is not a string, or naming no
    tool of this server is JSON-RPC -32602 whose ``data`` is ``{code, field: "name",
    detail}``, as for ``arguments`` that is not an object; the SDK answered the first two
    "Invalid request parameters" with ``data`` ``""``, and an unknown tool had no ``data``.
    Sent by raw HTTP: the SDK's client sends a name it was given as a string."""
    headers = {"Authorization": basic("alice"), **JSON_POST}
    tools = "search, fetch, list_filters, list_folders, list_tags, list_values, index_status"
    for params, detail in (
        ({}, f"missing: the tool to call, one of {tools}"),
        ({"name": None}, f"missing: the tool to call, one of {tools}"),
        ({"name": 5}, f"must be a string, the tool to call, one of {tools}; not a number"),
        ({"name": ["search"]}, f"must be a string, the tool to call, one of {tools}; not an array"),
        ({"name": "nope", "arguments": {}}, f"unknown tool 'nope'; one of {tools}"),
    ):
        legacy = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        answer = httpx.post(mcp_url, json=legacy, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        error = answer.json()["error"]
        assert error["code"] == -32602, error
        assert error["data"] == {"code": "invalid_value", "field": "name", "detail": detail}
        assert f"`name` {detail}" in error["message"], error
    named = {"name": "nope", "arguments": {}}
    modern, modern_headers = envelope("tools/call", "2026-07-28", named)
    answer = httpx.post(mcp_url, json=modern, headers={**headers, **modern_headers}, timeout=30)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["data"]["field"] == "name"


def test_params_that_are_not_an_object_are_invalid_params_with_the_requests_id(
    mcp_url: str,
) -> None:
    """A request whose ``params`` is an array, a string, a number or a boolean is JSON-RPC
    -32602 naming ``params`` in ``data`` (``{code, field, detail}``, as for ``name`` and
    ``arguments``) and answered with the request's ``id`` (JSON-RPC 2.0 §5: it could be read),
    whatever the method and the protocol era; HTTP 400, as the SDK's transports answered. They
    answered with ``id`` ``null`` and no ``data``: the handshake-era one -32602 with pydantic's
    dump of the body as the message, the 2026-07-28 one -32600. A notification gets the same
    error with ``id`` ``null``; ``params`` absent or ``null`` still reaches the method."""
    headers = {"Authorization": basic("alice"), **JSON_POST}
    for method, request_id in (("tools/call", 41), ("tools/list", "list-7")):
        eras: list[dict[str, str]] = [
            {},
            {"Mcp-Protocol-Version": "2025-11-25"},
            {"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method},
        ]
        for params, kind in (([1, 2], "an array"), ("x", "a string"), (3, "a number"),
                             (False, "a boolean")):  # fmt: skip
            body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            for extra in eras:
                answer = httpx.post(mcp_url, json=body, headers={**headers, **extra}, timeout=30)
                assert answer.status_code == 400, (extra, answer.text)
                assert answer.headers["Content-Type"] == "application/json"
                reply = answer.json()
                assert reply["id"] == request_id, reply
                error = reply["error"]
                assert error["code"] == -32602, error
                detail = f"must be an object (the method's parameters by name), not {kind}"
                data = {"code": "invalid_value", "field": "params", "detail": detail}
                assert error["data"] == data, error
                assert error["message"] == f"Invalid request parameters: `params` {detail}"
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized", "params": [1]}
    answer = httpx.post(mcp_url, json=notification, headers=headers, timeout=30)
    assert answer.status_code == 400, answer.text
    reply = answer.json()
    assert reply["id"] is None and reply["error"]["data"]["field"] == "params", reply
    for body in ({"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                 {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": None}):  # fmt: skip
        answer = httpx.post(mcp_url, json=body, headers=headers, timeout=30)
        assert answer.status_code == 200 and answer.json()["id"] == 3, answer.text
        assert {t["name"] for t in answer.json()["result"]["tools"]} == TOOLS


def test_a_body_that_is_no_request_object_is_invalid_request_naming_the_field(
    mcp_url: str,
) -> None:
    """A body that is not one JSON-RPC request or notification object is HTTP 400, JSON-RPC
    -32600 (JSON-RPC 2.0 §5.1) with ``data`` ``{code, field, detail}`` naming ``body`` (an
    array: MCP has no batches; a scalar), ``jsonrpc``, ``method`` or ``id``, with the
    request's id where it can be read, in either protocol era. The SDK answered the first three
    -32602 with pydantic's dump of the body and no ``data``; an ``id`` that is no string or
    integer (``1.5``, ``1.0``, ``true``, ``null``, an object, an array: MCP's requests carry a
    string or integer id, never null) it read as a notification: HTTP 202 with no body, so the
    request never ran and its client got no answer at all."""
    headers = {"Authorization": basic("alice"), **JSON_POST}
    eras: list[dict[str, str]] = [
        {},
        {"Mcp-Protocol-Version": "2025-11-25"},
        {"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
    ]
    listing = {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}}
    cases: list[tuple[Any, str, Any]] = [
        ([listing], "body", None),
        ([], "body", None),
        (7, "body", None),
        (None, "body", None),
        ({**listing, "jsonrpc": "1.0"}, "jsonrpc", 4),
        ({"jsonrpc": "2.0", "id": 4, "params": {}}, "method", 4),
        ({**listing, "method": 5}, "method", 4),
        *(({**listing, "id": bad}, "id", None) for bad in (1.5, 1.0, True, None, {}, [7])),
    ]
    for body, field, answered_id in cases:
        for extra in eras:
            sent = json.dumps(body).encode()  # as written: httpx sends no body for json=None
            answer = httpx.post(mcp_url, content=sent, headers={**headers, **extra}, timeout=30)
            what = (body, extra, answer.status_code, answer.text)
            assert answer.status_code == 400, what
            reply = answer.json()
            assert reply["id"] == answered_id, what
            assert reply["error"]["code"] == -32600, what
            assert reply["error"]["data"]["field"] == field, what
            assert reply["error"]["data"]["code"] == "invalid_value", what
    for request_id in (0, -3, "", "list-1"):  # a string or an integer is answered as ever
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
        answer = httpx.post(mcp_url, json=body, headers=headers, timeout=30)
        assert answer.status_code == 200 and answer.json()["id"] == request_id, answer.text


def test_the_readme_python_client_runs_as_written(mcp_url: str, capsys) -> None:
    """README's snippet was one line calling ``create_mcp_http_client``, which mcp 2.3 has only
    in the private ``mcp.shared._httpx_utils``, without its imports. The snippet, its imports
    included, runs against the server (only the URL changed) and prints the search's result."""
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    after = readme.split("From Python, the SDK's client", 1)[1]
    snippet = after.split("```python\n", 1)[1].split("```", 1)[0]
    assert "_httpx_utils" not in snippet and "import" in snippet
    exec(snippet.replace("http://127.0.0.1:8080/mcp", mcp_url), {})
    printed = capsys.readouterr().out
    assert "'results'" in printed, printed


def test_a_lone_surrogate_is_a_parse_error_never_a_500(mcp_url: str) -> None:
    """A lone surrogate (``"\\ud800"`` in the JSON) is refused by the transport's parser as
    -32700, but a message the gate refuses itself (``params`` not an object) was answered with
    its id echoed, which UTF-8 cannot carry: a 500. The gate now refuses such a body as the
    transport does, -32700 with id null, naming where the surrogate is."""
    headers = {
        "Authorization": basic("alice"),
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    for body, where in (
        (b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "tools/list", "params": 5}', "id"),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"\\udc00": 1}}',
            "params.\\udc00",
        ),
    ):
        answer = httpx.post(mcp_url, content=body, headers=headers, timeout=30)
        assert answer.status_code == 400, answer.text
        error = answer.json()
        assert error["id"] is None and error["error"]["code"] == -32700, error
        assert error["error"]["message"].endswith(f"in {where}"), error


def test_a_search_result_carries_its_link_once_as_url(mcp_url: str, ro_api: Api) -> None:
    """Each result carried both ``url`` and ``open_url`` with the same link (``open_url``
    came with the REST result model, 54a13a9, which the tool's result extends), tokens spent
    twice in every answer. Now ``url`` alone, in the answer and in the output schema; the
    REST result keeps ``open_url``."""

    async def main() -> tuple[Any, Any]:
        async with session(mcp_url, basic("alice")) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            return tools["search"], await call(client, "search", {"query": "lighthouse"})

    tool, result = run(main())
    results = result.structured_content["results"]
    assert results and all(r["url"] and "open_url" not in r for r in results)
    assert "open_url" not in json.dumps(tool.output_schema)
    rest = ro_api.post("alice", {"query": "lighthouse"}).get_json()["results"]
    assert {r["doc_id"]: r["open_url"] for r in rest} == {r["doc_id"]: r["url"] for r in results}


def test_the_search_description_states_the_servers_default_limit(ro_api: Api) -> None:
    """The ``search`` tool said "default 10" whatever ``NCINDEX_SEARCH_DEFAULT_LIMIT`` was;
    its description and its ``limit`` argument's now state the server's setting."""
    settings = ro_api.settings.model_copy(update={"search_default_limit": 3})
    served = serve_in_thread(
        create_app(settings, services=ro_api.services, producer=ro_api.producer)
    )

    async def main() -> Any:
        async with session(f"{served.url}/mcp", basic("alice")) as client:
            return {t.name: t for t in (await client.list_tools()).tools}["search"]

    try:
        tool = run(main())
    finally:
        served.close()
    assert "default 3)" in tool.description and "default 10" not in tool.description
    limit = tool.input_schema["properties"]["limit"]["description"]
    assert "(3 when left out or null)" in limit and "10 " not in limit


def test_list_values_counts_the_callers_own_documents_only(mcp_url: str) -> None:
    """An agent could not learn the MIME types, note categories or doc types there are, so it
    guessed (``application/pdf``) and matched nothing. ``list_values`` lists a field's values
    on the caller's documents with their counts, filtered by the caller's ``acl`` as every
    search is: bob's private note's category never reaches alice, nor hers him. A listed
    value is one ``search`` finds documents by. ``owner`` too (no tool listed owners): the
    owners of the caller's documents alone, as ``GET /v1/owners``."""
    fields = ("doc_type", "mime_type", "category", "owner")

    async def main(user: str) -> dict[str, Any]:
        async with session(mcp_url, basic(user)) as client:
            out = {f: await call(client, "list_values", {"field": f}) for f in fields}
            out["page"] = await call(client, "list_values", {"field": "doc_type", "limit": 1})
            out["bad"] = await call(client, "list_values", {"field": "size"})
            out["search"] = await call(
                client, "search", {"query": "lighthouse", "mime_types": ["text/plain"]}
            )
            return out

    alice, bob = run(main("alice")), run(main("bob"))

    def values(out: dict[str, Any], field: str) -> dict[str, int]:
        result = out[field]
        assert not result.is_error, result.content
        body = result.structured_content
        assert body["field"] == field and body["total"] == len(body["values"])
        return {v["value"]: v["count"] for v in body["values"]}

    # alice: four files (one text/plain) and a note of category Work; bob: his file, the
    # share of alice's plan and his note of category Home
    assert values(alice, "doc_type") == {"file": 4, "note": 1}
    assert values(alice, "mime_type") == {"text/markdown": 4, "text/plain": 1}
    assert values(alice, "category") == {"Work": 1}
    assert values(bob, "doc_type") == {"file": 2, "note": 1}
    assert values(bob, "category") == {"Home": 1}
    assert values(alice, "owner") == {"alice": 5}
    assert values(bob, "owner") == {"bob": 2, "alice": 1}  # alice's shared plan among his
    assert [v["value"] for v in alice["doc_type"].structured_content["values"]] == ["file", "note"]
    page = alice["page"].structured_content
    assert page == {"field": "doc_type", "values": [{"value": "file", "count": 4}], "total": 2,
                    "next_offset": 1}  # fmt: skip
    assert alice["bad"].is_error and alice["bad"].structured_content["field"] == "field"
    assert len(ids(alice["search"])) == 1


def test_index_status_tells_the_servers_time_for_relative_time_filters(mcp_url: str) -> None:
    """Nothing told an agent the server's "now", so "last month" was reckoned from whatever
    clock the client had. ``index_status`` answers ``now`` (ISO 8601, UTC, a value
    ``modified_after`` takes), and the time arguments' descriptions say where to find it."""
    import time
    from datetime import datetime

    async def main() -> tuple[Any, Any, Any]:
        async with session(mcp_url, basic("alice")) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            status = await call(client, "index_status", {})
            now = status.structured_content["now"]
            searched = await call(client, "search", {"query": "lighthouse", "modified_after": now})
            return tools, status, searched

    before = time.time()
    tools, status, searched = run(main())
    now = status.structured_content["now"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", now), now
    assert before - 1 <= datetime.fromisoformat(now).timestamp() <= time.time() + 1
    assert not searched.is_error and ids(searched) == []  # nothing changed since now
    assert "now" in tools["index_status"].output_schema["properties"]
    for name in ("modified_after", "modified_before"):
        described = tools["search"].input_schema["properties"][name]["description"]
        assert "`now`" in described and "`index_status`" in described, name


def test_fetch_by_path_reads_what_the_caller_has_there(api: Api) -> None:
    """``fetch`` took only an id, so an agent given a path had to search with a ``path``
    filter first. It now takes ``path`` (in the caller's own view), looked up in the index as
    the caller and checked with Nextcloud like any fetch: a share under the sharee's name for
    it, nothing of another user's, and a file moved away since it was indexed is not found
    at its old path."""
    served = serve_in_thread(create_app(api.settings, services=api.services, producer=api.producer))
    url = f"{served.url}/mcp"

    async def fetch(user: str, arguments: dict[str, Any]) -> Any:
        async with session(url, basic(user)) as client:
            return await call(client, "fetch", arguments)

    try:
        mine = run(fetch("alice", {"path": LIGHT, "max_chars": 10}))
        shared = run(fetch("bob", {"path": "/Lighthouse/plan.md"}))
        theirs = run(fetch("bob", {"path": DIARY}))
        relative = run(fetch("alice", {"path": "Private/diary.md/"}))
        dots = run(fetch("alice", {"path": "/Projects/../Private/diary.md"}))
        both = run(fetch("alice", {"path": LIGHT, "id": api.keys[LIGHT]}))
        api.sim.move("alice", "/Private/diary.md", "/Private/old-diary.md")
        moved = run(fetch("alice", {"path": DIARY}))
    finally:
        served.close()
    body = mine.structured_content
    assert not mine.is_error, mine.content
    assert body["id"] == api.keys[LIGHT] and body["metadata"]["path"] == LIGHT
    assert body["text"] == "Lighthouse" and body["next_offset"] == 10
    assert shared.structured_content["id"] == api.keys[LIGHT]
    assert shared.structured_content["metadata"]["path"] == "/Lighthouse/plan.md"
    assert relative.structured_content["id"] == api.keys[DIARY]
    for refused, code in ((theirs, "not_found"), (dots, "invalid_value"),
                          (both, "invalid_value"), (moved, "not_found")):  # fmt: skip
        assert refused.is_error and refused.structured_content["code"] == code, refused.content
    assert theirs.structured_content["field"] == dots.structured_content["field"] == "path"
    assert moved.structured_content["field"] == "path"


def test_fetch_of_a_card_names_its_board_and_stack_as_they_are_now(api: Api) -> None:
    """``search`` names a Deck card's board and stack; ``fetch`` of the card did not, although
    its check (the context endpoint's) makes the same board GET. Its ``metadata`` now names
    them as that GET gives them (a board renamed since the card was indexed shows its name
    now), under the tool's output schema; a file's are null."""
    key = api.index_card("alice", "Harbour", "To do", ("Tar the ketch", "Tar the hull."))
    api.rename_board(key, "Harbour works")
    served = serve_in_thread(create_app(api.settings, services=api.services, producer=api.producer))

    async def fetch(arguments: dict[str, Any]) -> Any:
        async with session(f"{served.url}/mcp", basic("alice")) as client:
            return await call(client, "fetch", arguments)

    try:
        card, file = run(fetch({"id": key})), run(fetch({"id": api.keys[LIGHT]}))
    finally:
        served.close()
    assert not card.is_error, card.content
    metadata = card.structured_content["metadata"]
    assert (metadata["board_title"], metadata["stack_title"]) == ("Harbour works", "To do")
    assert card.structured_content["text"].startswith("Tar the ketch")
    metadata = file.structured_content["metadata"]
    assert (metadata["board_title"], metadata["stack_title"]) == (None, None)


def test_a_card_result_names_the_board_id_the_board_filter_takes(api: Api) -> None:
    """``list_filters`` offers ``board_id`` and ``stack_id`` (and ``feed_id``), but no answer
    named a card's board or stack by id — results carried only their titles, which no filter
    takes — so an agent that found a card could not ask for the other cards of its board. A
    result now carries the ids the filters match, and so does ``fetch``'s ``metadata``; a
    file's are null. (Its ``snippet_title_chars`` says how much of its snippet is its title:
    a file has none.)"""
    harbour = api.index_card("alice", "Harbour", "To do", ("Tar the ketch", "Tar its hull."))
    api.index_card("alice", "Garden", "Later", ("Tar the fence", "Tar the garden fence."))
    args = {"query": "tar the ketch hull", "doc_types": ["deck_card"], "limit": 1}
    (card,) = served_calls(api, "alice", [("search", args)])
    (result,) = card.structured_content["results"]
    leaf = {"field": "board_id", "op": "eq", "value": result["board_id"]}
    board, file, fetched, fetched_file = served_calls(
        api,
        "alice",
        [
            ("search", {"query": "tar", "filter": leaf}),
            ("search", {"query": "lighthouse lens", "limit": 1}),
            ("fetch", {"id": harbour}),
            ("fetch", {"id": api.keys[LIGHT]}),
        ],
    )
    assert result["id"] == harbour and result["board_title"] == "Harbour", result
    assert result["board_id"] is not None and result["stack_id"] is not None
    assert ids(board) == [harbour]
    (other,) = file.structured_content["results"]
    assert (other["board_id"], other["stack_id"], other["feed_id"]) == (None, None, None)
    assert result["snippet"][: result["snippet_title_chars"]] == "Tar the ketch"
    assert other["snippet_title_chars"] == 0
    metadata = fetched.structured_content["metadata"]
    assert (metadata["board_id"], metadata["stack_id"]) == (result["board_id"], result["stack_id"])
    metadata = fetched_file.structured_content["metadata"]
    assert (metadata["board_id"], metadata["stack_id"], metadata["feed_id"]) == (None, None, None)


def test_snippet_title_chars_is_required_and_never_negative_in_both_schemas(api: Api) -> None:
    """Every result carries ``snippet_title_chars`` (``SearchResult``: REST, and MCP's
    ``ToolSearchResult`` after it), a count from 0, but ``/openapi.json`` and the MCP
    ``search`` tool's ``outputSchema`` gave it a default and neither ``required`` nor a
    ``minimum``: a client generated from either made it optional, and a negative count passed.
    Both now require it, with ``minimum`` 0; real answers (a card's count, a file's 0)
    validate against them, and a result without it, or with -1, does not."""
    api.index_card("alice", "Harbour", "To do", ("Tar the ketch", "Tar its hull."))
    query = {"query": "tar the ketch hull", "limit": 20}
    rest = api.post("alice", query)
    assert rest.status_code == 200, rest.get_json()
    (mcp,) = served_calls(api, "alice", [("search", query)])
    assert not mcp.is_error, mcp.content
    components = api.client.get("/openapi.json").get_json()["components"]
    tool = mcp_output_schema("search")  # the search tool's outputSchema as listed
    checks = [
        (
            rest.get_json(),
            {"$ref": "#/components/schemas/SearchResponse", "components": components},
            components["schemas"]["SearchResult"],
        ),
        (mcp.structured_content, tool, tool["$defs"]["ToolSearchResult"]),
    ]
    for body, schema, result in checks:
        assert "snippet_title_chars" in result["required"]
        field = result["properties"]["snippet_title_chars"]
        assert (field["type"], field["minimum"], "default" in field) == ("integer", 0, False)
        Draft202012Validator(schema).validate(body)
        counts = {r["doc_type"]: r["snippet_title_chars"] for r in body["results"]}
        assert counts["deck_card"] == len("Tar the ketch") and counts["file"] == 0, counts
        first = {k: v for k, v in body["results"][0].items() if k != "snippet_title_chars"}
        for broken in ({"snippet_title_chars": -1}, {}):
            bad = body | {"results": [first | broken]}
            assert not Draft202012Validator(schema).is_valid(bad), broken


def test_fetch_by_a_moved_documents_old_path_names_where_it_is_and_re_reads_it(api: Api) -> None:
    """A file moved in Nextcloud while its event was lost: the index still has it at its old
    path. ``fetch`` by that path checks it with Nextcloud (a ``SEARCH`` by file id, whose
    ``href`` is the node's path in the caller's view now) and does not answer it under a path
    where Nextcloud has nothing: ``not_found``, as before, now naming its id and the path it
    is at, and the document is handed to its re-read (``ncindex.index_node`` as the caller)
    as a search that finds it moved hands it — before, nothing was sent, and the index kept
    the old path until the next scan."""
    served = serve_in_thread(create_app(api.settings, services=api.services, producer=api.producer))
    moved_to = "/Private/old-diary.md"
    api.sim.move("alice", DIARY, moved_to)  # the index is not told

    async def fetch(arguments: dict[str, Any]) -> Any:
        async with session(f"{served.url}/mcp", basic("alice")) as client:
            return await call(client, "fetch", arguments)

    try:
        moved = run(fetch({"path": DIARY}))
    finally:
        served.close()
    body = moved.structured_content
    assert moved.is_error and (body["code"], body["field"]) == ("not_found", "path"), body
    assert api.keys[DIARY] in body["detail"] and moved_to in body["detail"], body["detail"]
    file_id = int(DocRef.parse(api.keys[DIARY]).doc_id)
    sent = [(name, kwargs["user"], kwargs["file_id"]) for name, kwargs in api.producer.sent]
    assert sent == [("ncindex.index_node", "alice", file_id)]


def test_fetch_by_the_path_a_search_result_gives_a_moved_document_reads_it(api: Api) -> None:
    """A file moved in Nextcloud before the index learnt of it: ``search`` names it at the
    path its check gives, where it is now, and ``fetch`` by that path answered ``not_found``
    ("search to find the document"), as did the path the ``not_found`` of its old path told
    the agent to fetch it by. The path is now asked of Nextcloud (``PROPFIND``) when the
    index has nothing there, and the document there read; a file there the index does not
    hold, and a path where Nextcloud has nothing, are still ``not_found``."""
    moved_to = "/Private/old-diary.md"
    api.sim.move("alice", DIARY, moved_to)  # the index is not told
    api.sim.put_file("alice", "/Private/unindexed.md", b"Not in the index.", mtime=T0)
    found, old, new, unindexed, nothing = served_calls(
        api,
        "alice",
        [
            ("search", {"query": "diary lens glow", "limit": 1}),
            ("fetch", {"path": DIARY}),
            ("fetch", {"path": moved_to}),
            ("fetch", {"path": "/Private/unindexed.md"}),
            ("fetch", {"path": "/Private/nothing.md"}),
        ],
    )
    (result,) = found.structured_content["results"]
    assert (result["id"], result["path"]) == (api.keys[DIARY], moved_to)
    assert moved_to in old.structured_content["detail"]
    assert not new.is_error, new.content
    body = new.structured_content
    assert (body["id"], body["metadata"]["path"]) == (api.keys[DIARY], moved_to)
    assert body["text"] == FILES[3][2]
    for missing in (unindexed, nothing):
        error = missing.structured_content
        assert missing.is_error and (error["code"], error["field"]) == ("not_found", "path")


def test_fetch_by_path_says_what_nextcloud_has_there_that_the_index_does_not(api: Api) -> None:
    """A path where the index has nothing of the caller's was answered "no document you can
    read is at this path … search to find the document" even where Nextcloud has a file
    (not indexed yet, or skipped: searching will not find it) or an empty folder. Nextcloud
    is now asked what is there, and the answer says so: ``not_found`` naming the file's
    state and where to look (``index_status``), ``invalid_value`` for a folder."""
    api.sim.put_file("alice", "/Private/unindexed.md", b"Not in the index.", mtime=T0)
    api.sim.mkdir("alice", "/Empty")
    file, folder = served_calls(
        api, "alice", [("fetch", {"path": "/Private/unindexed.md"}), ("fetch", {"path": "/Empty"})]
    )
    error = file.structured_content
    assert file.is_error and (error["code"], error["field"]) == ("not_found", "path"), error
    assert "the index holds no document of yours" in error["detail"], error["detail"]
    assert "index_status" in error["detail"]
    error = folder.structured_content
    assert folder.is_error and (error["code"], error["field"]) == ("invalid_value", "path")
    assert error["detail"].startswith("is a folder"), error["detail"]


def test_fetch_takes_the_node_subject_index_status_names_a_file_or_note_by(
    mcp_url: str, ro_api: Api
) -> None:
    """``index_status`` names a file or note by ``node:<file id>`` (its ``truncated``,
    ``skipped_documents``, ``dead_letter`` and ``failing`` subjects), which ``fetch`` refused
    as "not of a known type": an agent could not read the document a ``truncated`` entry
    names by the id it was given. ``fetch`` now takes it, for a file and for a note, and
    answers the document's own ``id``."""
    file_id = DocRef.parse(ro_api.keys[LIGHT]).doc_id
    note_id = DocRef.parse(ro_api.keys[FOGHORN]).doc_id

    async def main() -> list[Any]:
        async with session(mcp_url, basic("alice")) as client:
            ids = (f"node:{file_id}", f"node:{note_id}", "node:12x", "node:999999")
            return [await call(client, "fetch", {"id": i, "max_chars": 10}) for i in ids]

    file, note, bad, missing = run(main())
    assert not file.is_error and not note.is_error, (file.content, note.content)
    assert file.structured_content["id"] == ro_api.keys[LIGHT]
    assert note.structured_content["id"] == ro_api.keys[FOGHORN]
    assert note.structured_content["metadata"]["doc_type"] == "note"
    for refused, code in ((bad, "invalid_value"), (missing, "not_found")):
        error = refused.structured_content
        assert refused.is_error and (error["code"], error["field"]) == (code, "id"), error


def test_fetch_by_path_reads_the_document_there_now_when_the_index_has_two(api: Api) -> None:
    """A file deleted and another uploaded at its path (a new file id) while the deletion's
    event was lost leaves the index with two documents at that path until the next scan:
    ``fetch`` by path answered ``invalid_value`` listing both ids, the one gone included.
    Each is now checked with Nextcloud, and the one still there is read."""
    api.sim.delete("alice", DIARY)
    new_key = api.index_parts("alice", DIARY, ["A new diary: the tide came in early."])
    old_key = api.keys[DIARY]
    assert new_key != old_key
    served = serve_in_thread(create_app(api.settings, services=api.services, producer=api.producer))

    async def fetch(arguments: dict[str, Any]) -> Any:
        async with session(f"{served.url}/mcp", basic("alice")) as client:
            return await call(client, "fetch", arguments)

    try:
        found = run(fetch({"path": DIARY}))
        old = run(fetch({"id": old_key}))
    finally:
        served.close()
    assert not found.is_error, found.content
    assert found.structured_content["id"] == new_key
    assert found.structured_content["text"] == "A new diary: the tide came in early."
    assert old.is_error and old.structured_content["code"] == "not_found"


def test_list_values_holds_tags_to_those_the_caller_can_see(api: Api) -> None:
    """``list_values`` of ``tags`` counts the caller's tagged documents, and, like
    ``list_tags``, leaves out a tag the caller cannot see in Nextcloud now (made invisible
    since: no event says so)."""
    sim = api.sim
    sim.create_tag("urgent")
    finance = sim.create_tag("finance")
    served = serve_in_thread(create_app(api.settings, services=api.services, producer=api.producer))

    async def tags(user: str) -> dict[str, int]:
        async with session(f"{served.url}/mcp", basic(user)) as client:
            result = await call(client, "list_values", {"field": "tags"})
        assert not result.is_error, result.content
        return {v["value"]: v["count"] for v in result.structured_content["values"]}

    try:
        alice, bob = run(tags("alice")), run(tags("bob"))
        sim.tags.tags[finance].user_visible = False
        hidden = run(tags("alice"))
    finally:
        served.close()
    # alice: her plan (urgent) and budget (finance); bob: the plan shared with him and his
    # garden note, both urgent
    assert alice == {"urgent": 1, "finance": 1}
    assert bob == {"urgent": 2}
    assert hidden == {"urgent": 1}


def test_list_values_counts_a_document_written_in_two_versions_once(api: Api) -> None:
    """A new version of a document is written beside the old one (new point ids) and the old
    one deleted after; an old one whose deletion failed stays until the next write. In that
    window the document has two first chunks, and ``list_values`` and ``index_status``'s
    ``indexed`` counted points, so they counted the document twice (alice: five files of
    four). The window is made here by
    writing a new version of alice's plan, with another MIME type, and not deleting the
    old: each document counts once, by the values of its newest version."""
    key = api.keys[LIGHT]
    old = api.store.document_points(key, with_vectors=True)
    ref = DocRef.parse(key)
    changed = {"content_hash": "v2", "mime_type": "text/x-plan"}
    new = [
        PointRecord(
            point_id(ref, "v2", int(p.payload["chunk_index"])),
            {**p.payload, **changed, "indexed_at": int(p.payload["indexed_at"]) + 60},
            dense=p.dense,
            sparse=p.sparse,
        )
        for p in old
    ]
    api.store.upsert(new)
    served = serve_in_thread(create_app(api.settings, services=api.services, producer=api.producer))

    async def counts(field: str) -> dict[str, int]:
        async with session(f"{served.url}/mcp", basic("alice")) as client:
            result = await call(client, "list_values", {"field": field})
        assert not result.is_error, result.content
        return {v["value"]: v["count"] for v in result.structured_content["values"]}

    async def indexed() -> dict[str, int]:
        async with session(f"{served.url}/mcp", basic("alice")) as client:
            result = await call(client, "index_status", {})
        assert not result.is_error, result.content
        return {t: s["indexed"] for t, s in result.structured_content["doc_types"].items()}

    try:
        assert len(api.store.document_points(key)) == 2 * len(old)  # the window is open
        doc_types, mime_types = run(counts("doc_type")), run(counts("mime_type"))
        status = run(indexed())
    finally:
        served.close()
    assert doc_types == {"file": 4, "note": 1}
    assert mime_types == {"text/markdown": 3, "text/plain": 1, "text/x-plan": 1}
    assert status == {"file": 4, "note": 1, "deck_card": 0, "news_item": 0}


def test_fetch_by_path_checks_a_bounded_number_of_documents_and_says_so(api: Api) -> None:
    """Every document the index had at a path was checked with Nextcloud, one request each,
    so a path the index held many stale entries at (a file deleted and replaced there, the
    events lost, time after time) made one call do as many requests. At most
    ``MAX_PATH_CHECKS`` are checked, the most recently indexed first; when none of those is
    there and more remain, the answer is ``too_many_documents`` naming ``path`` and listing
    the ids not checked; when one of those is there, it is read."""
    keys = []
    for i in range(MAX_PATH_CHECKS + 3):
        api.sim.delete("alice", DIARY)
        keys.append(api.index_parts("alice", DIARY, [f"Diary number {i}."]))
        api.store.set_payload(keys[-1], {"indexed_at": T0 + 1 + i})
    served = serve_in_thread(create_app(api.settings, services=api.services, producer=api.producer))

    async def fetch() -> Any:
        async with session(f"{served.url}/mcp", basic("alice")) as client:
            api.sim.reset_request_counts()
            return await call(client, "fetch", {"path": DIARY})

    try:
        newest = run(fetch())
        api.sim.delete("alice", DIARY)  # every document the index has there is stale now
        stale = run(fetch())
        checks = api.sim.request_count("dav-search")  # one verifying SEARCH per document
    finally:
        served.close()
    assert not newest.is_error, newest.content
    assert newest.structured_content["id"] == keys[-1]
    assert stale.is_error, stale.content
    body = stale.structured_content
    assert body["code"] == "too_many_documents" and body["field"] == "path"
    listed = body["detail"].split("not checked: ")[1].split(".")[0].split(", ")
    assert sorted(listed) == sorted([api.keys[DIARY], *keys[:3]])  # the oldest indexed
    assert checks == MAX_PATH_CHECKS


def test_fetch_and_search_say_what_is_wrong_with_an_odd_path_or_range(mcp_url: str) -> None:
    """Arguments an agent plausibly sends that could never match were answered as if they
    might: ``fetch`` of a folder's path was ``not_found`` (as if nothing were there), a path
    with a line break copied along ``not_found`` too (no Nextcloud name holds one), and a
    search from a day to the same day found nothing. Each is now ``invalid_value`` naming
    the argument and saying what to send instead; a WebDAV path is still ``not_found``, now
    saying which form of path to send."""
    one_day = {"modified_after": "2026-01-01", "modified_before": "2026-01-01"}

    async def main() -> list[Any]:
        async with session(mcp_url, basic("alice")) as client:
            return [
                await call(client, "fetch", {"path": "/Projects/Lighthouse/"}),
                await call(client, "fetch", {"path": "/"}),
                await call(client, "fetch", {"path": LIGHT + "\n"}),
                await call(client, "search", {"query": "lighthouse", **one_day}),
                await call(client, "fetch", {"path": "/remote.php/dav/files/alice" + LIGHT}),
            ]

    folder, root, broken, day, webdav = run(main())
    for result in (folder, root, broken, day):
        assert result.is_error and result.structured_content["code"] == "invalid_value"
    assert [r.structured_content["field"] for r in (folder, root, broken, day)] == [
        "path", "path", "path", "modified_before"
    ]  # fmt: skip
    assert '`path_prefixes` ["/Projects/Lighthouse"]' in folder.structured_content["detail"]
    assert "is a folder" in root.structured_content["detail"]
    assert "control character U+000A" in broken.structured_content["detail"]
    # a path of another form than the caller's own is not found, saying which form to send
    assert webdav.is_error and webdav.structured_content["code"] == "not_found"
    assert "not a WebDAV or web URL" in webdav.structured_content["detail"]


def test_a_filter_value_selecting_nothing_names_the_tool_that_lists_it(
    api: Api,
) -> None:
    """A search that finds nothing because a folder, tag, category or owner value holds none
    of the caller's documents answers the empty list with a ``hints`` entry naming it (as the
    search API does), and the way to list the values is the tool caller's own
    (``list_folders``, ``list_tags``, ``list_values``; an exact path the folders
    ``list_folders`` lists). A tag or category that must hold in another case, or a
    tag typed decomposed (NFD) where it was created precomposed, stays a tool error naming the
    stored spelling and the tool that lists them, not ``GET /v1/tags``, an endpoint a tool
    caller does not have."""
    nfc = unicodedata.normalize("NFC", "Überprüfung")
    api.sim.assign_tag("alice", BUDGET, api.sim.create_tag(nfc))
    api.store.set_payload(api.keys[BUDGET], {"tags": [nfc]})
    api.sim.create_tag("urgent")
    hinted = [
        ({"path_prefixes": ["/Nowhere"]}, "path_prefixes[0]",
         "no indexed document you can read is at or under '/Nowhere' (`list_folders` lists "
         "them)"),
        ({"tags": ["nowhere"]}, "tags[0]",
         "no indexed document you can read has the tag 'nowhere' (`list_tags` lists them)"),
        ({"category": "Home"}, "category",
         "no indexed note you can read has the category 'Home' (`list_values` with field "
         "`category` lists them)"),
        ({"filter": {"field": "owner", "op": "eq", "value": "bob"}}, "filter.value",
         "no indexed document you can read is owned by 'bob' (`list_values` with field "
         "`owner` lists them)"),
        ({"filter": {"field": "path", "op": "eq", "value": "/Private/gone.md"}}, "filter.value",
         "no indexed document you can read is at the path '/Private/gone.md' (`list_folders` "
         "lists the folders holding yours)"),
        # under an `or` another branch may match: the other spelling is a hint, not an error
        ({"doc_types": ["deck_card"], "filter": {"or": [
            {"field": "category", "op": "eq", "value": "WORK"},
            {"field": "tags", "op": "contains", "value": "urgent"}]}}, "filter.or[0].value",
         "no document you can read has the category 'WORK', matched as spelt, case, Unicode "
         "form and all; yours is spelt 'Work' (`list_values` with field `category` lists "
         "them)"),
    ]  # fmt: skip
    refused = [
        ({"tags": ["URGENT"]}, "tags[0]",
         "no document you can read has the tag 'URGENT', matched as spelt, case, Unicode form "
         "and all; yours is spelt 'urgent' (`list_tags` lists them)"),
        ({"tags": [unicodedata.normalize("NFD", nfc)]}, "tags[0]",
         f"no document you can read has the tag {unicodedata.normalize('NFD', nfc)!r}, matched "
         f"as spelt, case, Unicode form and all; yours is spelt {nfc!r} (`list_tags` lists "
         "them)"),
        ({"category": "work"}, "category",
         "no document you can read has the category 'work', matched as spelt, case, Unicode "
         "form and all; yours is spelt 'Work' (`list_values` with field `category` lists "
         "them)"),
    ]  # fmt: skip
    cases = hinted + refused
    results = served_calls(
        api,
        "alice",
        [("search", {"query": "lighthouse", **body}) for body, _, _ in cases]
        + [("search", {"query": "lighthouse", "tags": [nfc]})],
    )
    for result, (body, field, detail) in zip(results, hinted, strict=False):
        assert not result.is_error, (body, result.content)
        answer = result.structured_content
        assert answer["results"] == [], body
        assert answer["hints"] == [{"code": "selects_nothing", "field": field, "detail": detail}], (
            body
        )
    for result, (body, field, detail) in zip(results[len(hinted) :], refused, strict=False):
        assert result.is_error, body
        error = result.structured_content
        assert (error["code"], error["field"], error["detail"]) == (
            "invalid_value",
            field,
            detail,
        ), body
    assert ids(results[-1]) == [api.keys[BUDGET]]
    assert results[-1].structured_content["hints"] == []
