"""``POST /v1/search``, ``GET /v1/filters``, the context endpoint, ``/openapi.json`` and the
rate limit, over the Nextcloud simulator with real verification."""

from __future__ import annotations

import base64
import html
import json
import re
import threading
import time
import unicodedata
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from ncindex.embedding import analyzer
from ncindex.embedding.embedder import Embedder
from ncindex.search import service as service_module
from ncindex.search.filter_fields import filters_document
from ncindex.text.snippets import plain_snippet
from ncindex.web.problems import MAX_BODY_BYTES
from search_support import PASSWORDS, Api, Served, build_api

LIGHT = "/Projects/Lighthouse/plan.md"
OLD = "/Projects/Lighthouse-old/plan.md"
BUDGET = "/Projects/budget.txt"
DIARY = "/Private/diary.md"
FOGHORN = "/Notes/Work/Foghorn.md"
SECRET = "bob:/Private/bob-secret.md"
GARDEN = "bob:/Notes/Home/Garden.md"
Q = "lighthouse lens foghorn"


def test_plain_search_sees_own_and_shared_only(ro_api: Api) -> None:
    k = ro_api.keys
    assert set(ro_api.found("alice", {"query": Q, "limit": 50})) == {
        k[LIGHT],
        k[OLD],
        k[BUDGET],
        k[DIARY],
        k[FOGHORN],
    }
    assert set(ro_api.found("bob", {"query": Q, "limit": 50})) == {k[LIGHT], k[SECRET], k[GARDEN]}
    assert ro_api.found("carol", {"query": Q}) == []


@pytest.mark.parametrize(
    ("user", "body", "want"),
    [
        ("alice", {"path_prefixes": ["/Projects/Lighthouse"]}, [LIGHT]),
        ("alice", {"path_prefixes": ["/Projects/Lighthouse/"]}, [LIGHT]),
        ("alice", {"path_prefixes": ["Projects/Lighthouse"]}, [LIGHT]),  # from the root
        ("alice", {"path_prefixes": ["/Projects/Lighthouse", "/Private"]}, [LIGHT, DIARY]),
        ("alice", {"path_prefixes": [LIGHT]}, [LIGHT]),
        ("alice", {"path_prefixes": ["/Projects"]}, [LIGHT, OLD, BUDGET]),
        ("bob", {"path_prefixes": ["/Lighthouse"]}, [LIGHT]),
        ("bob", {"path_prefixes": ["/Projects/Lighthouse"]}, []),
        ("alice", {"doc_types": ["note"]}, [FOGHORN]),
        ("bob", {"doc_types": ["note", "file"], "path_prefixes": ["/Notes"]}, [GARDEN]),
        (
            "alice",
            {"modified_after": "2026-01-11", "modified_before": 1767225600 + 86400 * 31},
            [OLD, BUDGET, DIARY],
        ),
        ("alice", {"modified_after": "2026-01-31T00:00:00"}, [DIARY, FOGHORN]),
        ("alice", {"modified_before": "2026-01-01T00:00:01Z"}, [LIGHT]),
        ("alice", {"tags": ["urgent", "finance"]}, [LIGHT, BUDGET]),
        ("bob", {"tags": ["urgent"]}, [LIGHT, GARDEN]),
        ("alice", {"category": "Work"}, [FOGHORN]),
        ("alice", {"mime_types": ["text/plain"]}, [BUDGET]),
        (
            "alice",
            {
                "filter": {
                    "not": {"field": "path_prefix", "op": "in", "value": ["/Projects", "/Notes"]}
                }
            },
            [DIARY],
        ),
        ("alice", {"filter": {"field": "title", "op": "contains", "value": "Foghorn"}}, [FOGHORN]),
        ("alice", {"filter": {"field": "path", "op": "eq", "value": BUDGET}}, [BUDGET]),
        ("bob", {"filter": {"field": "owner", "op": "ne", "value": "bob"}}, [LIGHT]),
        (
            "alice",
            {
                "doc_types": ["file"],
                "filter": {
                    "or": [
                        {"field": "tags", "op": "exists"},
                        {"field": "size", "op": "lt", "value": 64},
                    ]
                },
            },
            [LIGHT, BUDGET, OLD],
        ),
    ],
)
def test_filters_through_http(
    ro_api: Api, user: str, body: dict[str, Any], want: list[str]
) -> None:
    found = ro_api.found(user, {"query": Q, "limit": 50, **body})
    assert set(found) == {ro_api.keys[w] for w in want}


def test_results_carry_the_callers_path_and_safe_snippets(ro_api: Api) -> None:
    body = ro_api.post("bob", {"query": "polish the lighthouse lens"}).get_json()
    light = next(r for r in body["results"] if r["doc_id"] == ro_api.keys[LIGHT].split(":")[1])
    assert light["path"] == "/Lighthouse/plan.md"
    base = ro_api.settings.nextcloud_url
    assert light["open_url"] == f"{base}/index.php/f/{light['doc_id']}"
    for r in body["results"]:  # the one link rule the page, MCP and RCP share
        route = {"file": "f", "note": "apps/notes/note"}[r["doc_type"]]
        assert r["open_url"] == f"{base}/index.php/{route}/{r['doc_id']}"
    assert "<mark>" in light["snippet"] and "<script" not in light["snippet"]
    assert body["verification"]["checked"] >= 1 and body["degraded"] is False
    assert set(body["timings_ms"]) >= {"embed", "query", "verify", "total"}


def test_explain_says_why(ro_api: Api) -> None:
    body = {"query": "lighthouse lens", "tags": ["urgent"], "limit": 5}
    plain = ro_api.post("alice", body).get_json()
    assert all("explain" not in r for r in plain["results"])
    assert "explain" not in plain["timings_ms"]  # nothing computed when not asked
    before = time.time()
    explained = ro_api.post("alice", {**body, "explain": True}).get_json()
    assert [r["doc_id"] for r in explained["results"]] == [r["doc_id"] for r in plain["results"]]
    light = explained["results"][0]
    assert light["doc_id"] == ro_api.keys[LIGHT].split(":")[1]
    why = light["explain"]
    assert why["fused_score"] == light["score"]
    assert why["dense"]["rank"] >= 1 and -1.0 <= why["dense"]["score"] <= 1.0
    assert why["sparse"]["rank"] >= 1 and why["sparse"]["score"] > 0
    # offsets into the snippet's plain text: the snippet without tags, entities unescaped
    plain_text = html.unescape(re.sub(r"</?mark>", "", light["snippet"]))
    assert why["matched_terms"]
    for m in why["matched_terms"]:
        word = plain_text[m["start"] : m["end"]].lower()
        assert word.startswith(m["term"][:4]), (word, m)
    marked = re.findall(r"<mark>(.*?)</mark>", light["snippet"])
    assert len(marked) == len(why["matched_terms"])
    assert why["filters"] == {"field": "tags", "op": "in", "value": ["urgent"]}
    assert before - 1 <= why["verified_at"] <= time.time() + 1
    # a query of stop words only has no BM25 term: no sparse rank, still an answer
    stops = ro_api.post("alice", {"query": "the of and", "explain": True})
    assert stops.status_code == 200
    assert all(r["explain"]["sparse"] is None for r in stops.get_json()["results"])


def test_explain_names_the_feedback_terms_a_bm25_match_came_from(ro_api: Api) -> None:
    """A result holding no word of the query can still rank in the BM25 branch: the hybrid
    DBSF search expands the query with terms of the best first results that hold a query
    word (feedback), and those match. ``explain`` gave such a result a ``sparse`` rank and
    score with ``matched_terms`` empty, a BM25 match with no words; ``feedback_terms`` names
    the expansion terms in the result's chunk, with the word as written. Never the query's own
    terms; none without feedback (RRF), nor when no first result holds a query word (the
    dense half alone then ranks: its documents lend no terms)."""
    lens = ro_api.post("alice", {"query": "lens", "explain": True}).get_json()["results"]
    by_feedback = [r for r in lens
                   if r["explain"]["sparse"] and not r["explain"]["matched_terms"]]  # fmt: skip
    assert by_feedback  # alice's lighthouse notes that do not say "lens"
    for r in by_feedback:
        why = r["explain"]
        assert why["feedback_terms"], r
        text = html.unescape(re.sub(r"</?mark>", "", r["snippet"]))  # the whole (short) text
        for f in why["feedback_terms"]:
            assert f["word"] in text and analyzer.terms(f["word"])[0] == f["term"], f
    words = {f["word"].lower() for r in by_feedback for f in r["explain"]["feedback_terms"]}
    assert "lighthouse" in words  # the word alice's documents saying "lens" share
    # the query's own terms are matched_terms, not feedback_terms
    own = ro_api.post("alice", {"query": "lighthouse lens", "explain": True}).get_json()
    expanded = [f["term"] for r in own["results"] for f in r["explain"]["feedback_terms"]]
    assert expanded and not {"lighthous", "len"} & set(expanded)
    body = {"query": "Hatzegopteryx thambema Quetzalcoatlus", "explain": True}
    unmatched = ro_api.post("alice", body).get_json()["results"]
    assert unmatched and all(r["explain"]["sparse"] is None for r in unmatched)
    assert all(r["explain"]["feedback_terms"] == [] for r in unmatched)
    rrf = {"query": "lighthouse lens", "explain": True, "fusion": "rrf"}
    ranked = ro_api.post("alice", rrf).get_json()["results"]
    assert any(r["explain"]["sparse"] for r in ranked)
    assert all(r["explain"]["feedback_terms"] == [] for r in ranked)


BAD: list[tuple[Any, str, str]] = [
    ({"query": "x", "explain": "yes"}, "invalid_value", "explain"),
    ({"query": ""}, "invalid_value", "query"),
    ({"query": "   "}, "invalid_value", "query"),
    ({"query": "\u0000"}, "invalid_value", "query"),
    ({"query": "reef\u0000knot"}, "invalid_value", "query"),
    ({"query": "\u200b\u0007 "}, "invalid_value", "query"),
    ({"query": 5}, "invalid_value", "query"),
    ({"query": "x" * 1001}, "invalid_value", "query"),
    ({"query": "\ud800"}, "invalid_value", "query"),
    ({}, "invalid_value", "query"),
    ({"query": "x", "limit": 0}, "invalid_value", "limit"),
    ({"query": "x", "limit": 101}, "invalid_value", "limit"),
    ({"query": "x", "limit": "ten"}, "invalid_value", "limit"),
    ({"query": "x", "limit": 2.5}, "invalid_value", "limit"),
    ({"query": "x", "limit": "2"}, "invalid_value", "limit"),
    ({"query": "x", "limit": 1e300}, "invalid_value", "limit"),
    ({"query": "x", "unknown": 1}, "unknown_field", "unknown"),
    ({"query": "x", "doc_types": ["mail"]}, "invalid_value", "doc_types[0]"),
    ({"query": "x", "doc_types": "note"}, "invalid_value", "doc_types"),
    # an empty any-of list would match nothing; it is refused, never read as "no filter"
    ({"query": "x", "doc_types": []}, "invalid_value", "doc_types"),
    ({"query": "x", "path_prefixes": []}, "invalid_value", "path_prefixes"),
    ({"query": "x", "tags": []}, "invalid_value", "tags"),
    ({"query": "x", "mime_types": []}, "invalid_value", "mime_types"),
    ({"query": "x", "fusion": "max"}, "invalid_value", "fusion"),
    ({"query": "x", "score_threshold": 1.5}, "invalid_value", "score_threshold"),
    ({"query": "x", "score_threshold": "high"}, "invalid_value", "score_threshold"),
    ({"query": "x", "score_threshold": "0.5"}, "invalid_value", "score_threshold"),
    ({"query": "x", "score_threshold": True}, "invalid_value", "score_threshold"),
    # a guard (so they were): below 0, and not one number
    ({"query": "x", "score_threshold": -0.1}, "invalid_value", "score_threshold"),
    ({"query": "x", "score_threshold": [0.5]}, "invalid_value", "score_threshold"),
    ({"query": "x", "score_threshold": "abc"}, "invalid_value", "score_threshold"),
    ({"query": "x", "modified_after": "last week"}, "invalid_value", "modified_after"),
    ({"query": "x", "modified_after": True}, "invalid_value", "modified_after"),
    ({"query": "x", "modified_after": [2026]}, "invalid_value", "modified_after"),
    (
        {"query": "x", "modified_after": "2026-02-01", "modified_before": "2026-01-01"},
        "invalid_value",
        "modified_after",
    ),
    ({"query": "x", "path_prefixes": "/Projects"}, "invalid_value", "path_prefixes"),
    ({"query": "x", "path_prefixes": [None]}, "invalid_value", "path_prefixes[0]"),
    (
        {"query": "x", "path_prefixes": ["/a", "/Notes/../Documents"]},
        "invalid_value",
        "path_prefixes[1]",
    ),
    ({"query": "x", "path_prefixes": ["/a"] * 65}, "invalid_value", "path_prefixes"),
    ({"query": "x", "tags": [1]}, "invalid_value", "tags[0]"),
    ({"query": "x", "category": ["Work"]}, "invalid_value", "category"),
    ({"query": "x", "mime_types": ["a\x00b"]}, "invalid_value", "mime_types[0]"),
    ({"query": "x", "filter": []}, "invalid_filter", "filter"),
    # an empty tree searched everything: refused as an empty any-of list is
    ({"query": "x", "filter": {}}, "invalid_filter", "filter"),
    # a range in the tree that holds no time, as modified_after > modified_before
    (
        {
            "query": "x",
            "filter": {
                "and": [
                    {"field": "modified_at", "op": "gte", "value": "2026-02-01"},
                    {"field": "modified_at", "op": "lt", "value": "2026-01-01"},
                ]
            },
        },
        "invalid_value",
        "filter.and[0].value",
    ),
    ({"query": "x", "filter": "doc_type = note"}, "invalid_filter", "filter"),
    ({"query": "x", "filter": {"and": []}}, "invalid_filter", "filter.and"),
    (
        {"query": "x", "filter": {"field": "size", "op": "gt", "value": 0, "valu": 5}},
        "invalid_filter",
        "filter.valu",
    ),
    (
        {"query": "x", "filter": {"not": {"field": "size", "op": "gt", "value": 0}, "bogus": 1}},
        "invalid_filter",
        "filter.bogus",
    ),
    (
        {"query": "x", "filter": {"field": "acl", "op": "eq", "value": "user:bob"}},
        "unknown_field",
        "filter.field",
    ),
    (
        {
            "query": "x",
            "filter": {
                "and": [
                    {"field": "doc_type", "op": "eq", "value": "note"},
                    {"field": "nope", "op": "eq", "value": 1},
                ]
            },
        },
        "unknown_field",
        "filter.and[1].field",
    ),
    (
        {"query": "x", "filter": {"field": "size", "op": "like", "value": 1}},
        "unsupported_operator",
        "filter.op",
    ),
    (
        {"query": "x", "filter": {"field": "size", "op": "gt", "value": "big"}},
        "invalid_value",
        "filter.value",
    ),
    (
        {"query": "x", "filter": {"field": "size", "op": "in", "value": list(range(300))}},
        "invalid_value",
        "filter.value",
    ),
]


@pytest.mark.parametrize(("body", "code", "field"), BAD)
def test_bad_input_is_a_problem_with_code_and_field(
    ro_api: Api, body: Any, code: str, field: str
) -> None:
    response = ro_api.client.post(
        "/v1/search", data=json.dumps(body), auth=("alice", PASSWORDS["alice"])
    )
    assert response.status_code == 400, response.get_json()
    assert response.mimetype == "application/problem+json"
    problem = response.get_json()
    assert (problem["code"], problem["field"]) == (code, field), problem
    assert problem["status"] == 400 and problem["type"].endswith(code)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"[1, 2]",
        b'"query"',
        b'{"query": NaN}',
        b'{"query": "x", "limit": Infinity}',
        b'{"query": "x", "query": "y"}',
        b'{"query": "x", "filter": {"field": "size", "op": "gt", "op": "lt", "value": 1}}',
        b'{"query": "x", "score_threshold": 1e400}',
        b"\xff\xfe",
        b"[" * 5000,
    ],
)
def test_unparsable_bodies(ro_api: Api, raw: bytes) -> None:
    response = ro_api.client.post("/v1/search", data=raw, auth=("alice", PASSWORDS["alice"]))
    assert response.status_code == 400
    assert response.get_json()["code"] == "invalid_json"


def test_too_deep_json_and_too_large_bodies(ro_api: Api) -> None:
    deep = '{"query": "x", "filter": ' + '{"not": ' * 3000 + "{}" + "}" * 3001
    response = ro_api.client.post("/v1/search", data=deep, auth=("alice", PASSWORDS["alice"]))
    assert response.status_code == 400 and response.get_json()["code"] in (
        "invalid_filter",
        "invalid_json",
    )
    big = b'{"query": "' + b"x" * 70_000 + b'"}'
    response = ro_api.client.post("/v1/search", data=big, auth=("alice", PASSWORDS["alice"]))
    assert response.status_code == 413 and response.get_json()["code"] == "payload_too_large"
    # the limit, said and machine-readable (werkzeug's text named none)
    problem = response.get_json()
    assert (problem["field"], problem["limit"]) == ("body", MAX_BODY_BYTES), problem
    assert str(MAX_BODY_BYTES) in problem["detail"], problem


def test_unauthenticated(ro_api: Api) -> None:
    for auth in (None, ("alice", "wrong"), ("mallory", "pw")):
        response = ro_api.client.post("/v1/search", json={"query": "x"}, auth=auth)
        assert response.status_code == 401
        assert response.get_json()["code"] == "unauthenticated"
        assert response.get_json()["field"] == "Authorization"
        assert response.headers["WWW-Authenticate"].startswith("Basic")
    response = ro_api.client.post(
        "/v1/search", json={"query": "x"}, headers={"Authorization": "Token abc"}
    )
    assert response.status_code == 401
    # without usable credentials a bad body, or a bad context path, is a 401 too (not a 400)
    for body in (b'{"query": ""}', b"{", b'{"query": "x", "lmit": 3}'):
        assert ro_api.client.post("/v1/search", data=body).status_code == 401, body
    assert ro_api.client.get("/v1/documents/nope/1/context").status_code == 401
    for path in (  # nor a parameter
        "/v1/folders?limit=abc", "/v1/tags?x=1", "/v1/categories?x=1", "/v1/owners?limit=0",
        "/v1/status?x=1",
    ):  # fmt: skip
        assert ro_api.client.get(path).status_code == 401, path
    assert ro_api.client.post("/v1/search?x=1", json={"query": "x"}).status_code == 401


def test_a_validators_message_is_given_as_it_is(ro_api: Api) -> None:
    response = ro_api.post("alice", {"query": "\u200b"})
    assert response.get_json()["detail"] == "must contain a printable non-space character"


def test_a_whole_float_is_an_integer_as_json_schema_counts(ro_api: Api) -> None:
    """``"limit": 2.0`` is the integer 2 (JSON Schema 2020-12 core §4.2.1; tool callers
    write it); 2.5 and "2" stay refused (above)."""
    response = ro_api.post("alice", {"query": "lighthouse", "limit": 2.0})
    assert response.status_code == 200 and len(response.get_json()["results"]) == 2


def test_a_wrong_method_is_405_with_allow(ro_api: Api) -> None:
    response = ro_api.client.put("/v1/search", json={"query": "x"})
    assert response.status_code == 405 and response.get_json()["code"] == "method_not_allowed"
    assert set(response.headers["Allow"].split(", ")) == {"POST", "OPTIONS"}
    assert response.headers["Content-Type"] == "application/problem+json"


body_values = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20),
    st.lists(st.one_of(st.text(max_size=10), st.integers(), st.none()), max_size=3),
    st.dictionaries(st.sampled_from(["field", "op", "value", "not"]), st.text(max_size=9)),
)  # fmt: skip
body_keys = st.sampled_from(
    ["query", "limit", "doc_types", "modified_after", "modified_before", "path_prefixes", "tags",
     "category", "mime_types", "filter", "fusion", "score_threshold", "extra"]
)  # fmt: skip


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(extra=st.dictionaries(body_keys, body_values, max_size=4))
def test_no_input_makes_a_500(ro_api: Api, extra: dict[str, Any]) -> None:
    body = {"query": "lighthouse", **extra}
    response = ro_api.post("alice", body)
    assert response.status_code in (200, 400), (body, response.get_json())
    if response.status_code == 400:
        assert response.get_json()["code"] in (
            "invalid_json", "invalid_value", "invalid_filter", "unknown_field",
            "unsupported_operator",
        )  # fmt: skip


def test_unshared_document_is_dropped_and_rechecked(api: Api) -> None:
    light = api.keys[LIGHT]
    assert light in api.found("bob", {"query": Q})
    api.sim.unshare("alice", "/Projects/Lighthouse", "bob")
    body = api.post("bob", {"query": Q}).get_json()
    assert light not in [f"{r['doc_type']}:{r['doc_id']}" for r in body["results"]]
    assert body["verification"]["dropped"] == 1
    file_id = int(light.split(":")[1])
    # as a file's own events are: index_node, under the file's key (ingest.events.index_node)
    recheck = {
        "user": "bob",
        "file_id": file_id,
        "debounce_key": f"{api.services.settings.names.debounce_prefix}index:bob:{file_id}",
    }
    assert ("ncindex.index_node", recheck) in api.producer.sent
    assert light in api.found("alice", {"query": Q})  # alice still has it


def test_deleted_document_is_dropped(api: Api) -> None:
    api.sim.delete("alice", BUDGET)
    body = api.post("alice", {"query": "budget foghorn compressor euros"}).get_json()
    assert api.keys[BUDGET] not in [f"{r['doc_type']}:{r['doc_id']}" for r in body["results"]]
    assert body["verification"]["dropped"] >= 1


def test_dense_failure_is_reported_as_degraded(
    ro_api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(text: str) -> list[float]:
        raise RuntimeError("dense model crashed")

    monkeypatch.setattr(ro_api.services.embedder, "embed_query_dense", broken)
    body = ro_api.post("alice", {"query": "lighthouse lens"}).get_json()
    assert body["degraded"] is True and body["results"]


def test_filters_endpoint(ro_api: Api) -> None:
    response = ro_api.client.get("/v1/filters")
    assert response.status_code == 200
    assert response.get_json() == filters_document()


def context(api: Api, user: str | None, key: str, query: str = "") -> Any:
    doc_type, doc_id = key.split(":")
    auth = (user, PASSWORDS[user]) if user else None
    return api.client.get(f"/v1/documents/{doc_type}/{doc_id}/context{query}", auth=auth)


def test_context_only_after_verification(api: Api) -> None:
    light = api.keys[LIGHT]
    response = context(api, "alice", light, "?chunk_index=0&window=3")
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["path"] == LIGHT and body["chunk_count"] == 1
    assert body["chunks"][0]["text"].startswith("Lighthouse plan")
    assert context(api, "bob", light).get_json()["path"] == "/Lighthouse/plan.md"
    for user, key in (("carol", light), ("bob", api.keys[DIARY]), ("alice", SECRET_KEY(api))):
        response = context(api, user, key)
        assert response.status_code == 404 and response.get_json()["code"] == "not_found"
    api.sim.unshare("alice", "/Projects/Lighthouse", "bob")
    assert context(api, "bob", light).status_code == 404  # the index still lists bob
    assert api.producer.sent  # … and the drop was sent for a re-check


def test_a_cards_context_names_its_board_and_stack_as_they_are_now(api: Api) -> None:
    """A search result names a Deck card's board and stack; its context (the search page's
    "Show context") did not, although its check makes the same board GET
    (``DeckCardSource.settle``). It now names them as that GET gives them: a board renamed
    since the card was indexed shows its name now. A file's are null."""
    key = api.index_card("alice", "Harbour", "To do", ("Tar the ketch", "Tar the hull."))
    api.rename_board(key, "Harbour works")
    response = context(api, "alice", key)
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert (body["board_title"], body["stack_title"]) == ("Harbour works", "To do")
    assert body["chunks"][0]["text"].startswith("Tar the ketch")
    file = context(api, "alice", api.keys[LIGHT]).get_json()
    assert (file["board_title"], file["stack_title"]) == (None, None)


def SECRET_KEY(api: Api) -> str:
    return api.keys[SECRET]


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/documents/mail/1/context", "doc_type"),
        ("/v1/documents/file/1/context?chunk_index=-1", "chunk_index"),
        ("/v1/documents/file/1/context?chunk_index=x", "chunk_index"),
        ("/v1/documents/file/1/context?chunk_index=%D9%A1", "chunk_index"),  # Arabic-Indic 1
        ("/v1/documents/file/1/context?chunk_index=1_0", "chunk_index"),
        ("/v1/documents/file/1/context?window=%201", "window"),
        ("/v1/documents/file/1/context?window=99", "window"),
        ("/v1/documents/file/" + "9" * 300 + "/context", "doc_id"),
        # no document's id holds a space: "1 " was looked up and answered 404 not_found
        ("/v1/documents/file/1%20/context", "doc_id"),
        ("/v1/documents/file/%091/context", "doc_id"),
    ],
)
def test_context_bad_input(ro_api: Api, path: str, field: str) -> None:
    response = ro_api.client.get(path, auth=("alice", PASSWORDS["alice"]))
    assert response.status_code == 400
    assert (response.get_json()["code"], response.get_json()["field"]) == ("invalid_value", field)


def _get_as_alice(served: Served, target: str) -> tuple[int, Any]:
    """GET ``target`` as sent (over real HTTP, not unquoted by a test client) as alice; the
    status and the parsed answer."""
    conn = HTTPConnection("127.0.0.1", int(served.url.rsplit(":", 1)[1]), timeout=30)
    try:
        token = base64.b64encode(f"alice:{PASSWORDS['alice']}".encode()).decode()
        conn.request("GET", target, headers={"Authorization": f"Basic {token}"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/documents/note/%ff%fe/context", "doc_id"),
        ("/v1/documents/note/1%C3/context", "doc_id"),  # a sequence cut short
        ("/v1/documents/n%FFte/1/context", "doc_type"),
    ],
)
def test_context_path_bytes_that_are_no_utf8(ro_served: Served, path: str, field: str) -> None:
    """Percent-escapes of bytes that are no UTF-8, over real HTTP (werkzeug's test client
    unquotes them to U+FFFD itself): werkzeug decoded them to U+FFFD, an id looked up and
    answered 404 ``not_found``, where any other impossible id is 400 ``invalid_value``."""
    status, problem = _get_as_alice(ro_served, path)
    assert (status, problem["code"], problem["field"]) == (400, "invalid_value", field), problem


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/documents/file/1/context?windw=3", "windw"),
        ("/v1/folders?lmit=3", "lmit"),
        ("/v1/tags?offset=0&page=2", "page"),
        ("/v1/categories?lmit=3", "lmit"),
        ("/v1/owners?offset=0&page=2", "page"),
    ],
)
def test_a_misspelt_query_parameter_is_refused_not_ignored(
    ro_api: Api, path: str, field: str
) -> None:
    response = ro_api.client.get(path, auth=("alice", PASSWORDS["alice"]))
    assert response.status_code == 400
    assert (response.get_json()["code"], response.get_json()["field"]) == ("unknown_field", field)


def test_categories_and_owners_are_listed_like_folders(ro_api: Api) -> None:
    """No REST endpoint listed note categories or owners, so a search API caller told that a
    category or owner selects nothing could learn theirs nowhere. ``GET /v1/categories`` and
    ``GET /v1/owners`` answer as ``GET /v1/folders`` does (the caller's credentials, a page
    ``{name: [...], total, next_offset}`` with ``offset``/``limit``, the same errors), from
    the documents the caller can read alone: alice's note is in ``Work``, bob's in ``Home``;
    bob reads alice's shared folder, so alice owns documents he can read, and carol reads
    none. A category or owner only another user's documents hold is never listed."""
    for user, categories, owners in [
        ("alice", ["Work"], ["alice"]),
        ("bob", ["Home"], ["alice", "bob"]),
        ("carol", [], []),
    ]:
        auth = (user, PASSWORDS[user])
        for name, values in (("categories", categories), ("owners", owners)):
            response = ro_api.client.get(f"/v1/{name}", auth=auth)
            assert response.status_code == 200, (user, name, response.get_json())
            want = {name: values, "total": len(values), "next_offset": None}
            assert response.get_json() == want, (user, name)
    bob = ("bob", PASSWORDS["bob"])
    paged = ro_api.client.get("/v1/owners?limit=1", auth=bob).get_json()
    assert paged == {"owners": ["alice"], "total": 2, "next_offset": 1}
    paged = ro_api.client.get("/v1/owners?limit=1&offset=1", auth=bob).get_json()
    assert paged == {"owners": ["bob"], "total": 2, "next_offset": None}
    for path, code, field in [
        ("/v1/categories?limit=0", "invalid_value", "limit"),
        ("/v1/owners?offset=-1", "invalid_value", "offset"),
        ("/v1/owners?limit=abc", "invalid_value", "limit"),
        ("/v1/categories?owner=bob", "unknown_field", "owner"),
    ]:
        response = ro_api.client.get(path, auth=bob)
        assert response.status_code == 400, path
        assert response.mimetype == "application/problem+json", path
        assert (response.get_json()["code"], response.get_json()["field"]) == (code, field), path
    for name in ("categories", "owners"):
        response = ro_api.client.get(f"/v1/{name}")
        assert response.status_code == 401 and response.get_json()["code"] == "unauthenticated"


def test_a_query_parameter_given_twice_is_refused(ro_api: Api) -> None:
    response = ro_api.client.get("/v1/folders?limit=1&limit=2", auth=("alice", PASSWORDS["alice"]))
    assert response.status_code == 400
    body = response.get_json()
    assert (body["code"], body["field"], body["detail"]) == (
        "invalid_value",
        "limit",
        "given more than once",
    )


def test_a_search_takes_no_query_parameter(ro_api: Api) -> None:
    # a ?limit=3 beside the body would otherwise be ignored without a word
    response = ro_api.client.post(
        "/v1/search?limit=3", json={"query": "x"}, auth=("alice", PASSWORDS["alice"])
    )
    assert response.status_code == 400
    assert (response.get_json()["code"], response.get_json()["field"]) == ("unknown_field", "limit")


def test_context_chunk_past_the_end(ro_api: Api) -> None:
    response = context(ro_api, "alice", ro_api.keys[LIGHT], "?chunk_index=5")
    assert response.status_code == 400 and response.get_json()["field"] == "chunk_index"
    assert context(ro_api, None, ro_api.keys[LIGHT]).status_code == 401


def test_openapi_document(ro_api: Api) -> None:
    doc = ro_api.client.get("/openapi.json").get_json()
    assert doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) >= {
        "/v1/search",
        "/v1/filters",
        "/v1/documents/{doc_type}/{doc_id}/context",
        "/rcp/{method}",
        "/v1/status",
        "/v1/folders",
        "/v1/tags",
        "/v1/categories",
        "/v1/owners",
    }
    for name in ("folders", "tags", "categories", "owners"):  # each listing, one page shape
        get = doc["paths"][f"/v1/{name}"]["get"]
        page = get["responses"]["200"]["content"]["application/json"]["schema"]
        assert set(page["properties"]) == {name, "total", "next_offset"}, name
        assert {p["name"] for p in get["parameters"]} == {"offset", "limit"}, name
        assert set(get["responses"]) == {"200", "400", "401", "429", "503"}, name
        assert get["security"] == doc["paths"]["/v1/search"]["post"]["security"], name
    schemas = doc["components"]["schemas"]
    request = schemas["SearchRequest"]["properties"]
    assert set(request) == {
        "query", "limit", "doc_types", "modified_after", "modified_before", "path_prefixes",
        "tags", "category", "mime_types", "filter", "mode", "fusion", "score_threshold",
        "explain",
    }  # fmt: skip
    result = schemas["SearchResult"]
    assert "explain" in result["properties"] and "explain" not in result.get("required", [])
    assert set(schemas["Explain"]["properties"]) == {
        "dense", "sparse", "title", "fused_score", "matched_terms", "feedback_terms",
        "filters", "verified_at",
    }  # fmt: skip
    assert set(schemas["FeedbackTerm"]["properties"]) == {"term", "word"}
    # an empty answer's hints (the filter values that select nothing), documented as answered
    hints = schemas["SearchResponse"]["properties"]["hints"]
    assert hints["items"] == {"$ref": "#/components/schemas/SearchHint"}, hints
    assert set(schemas["SearchHint"]["properties"]) == {"code", "field", "detail"}
    assert schemas["SearchHint"]["properties"]["code"]["const"] == "selects_nothing"
    assert set(schemas["FilterLeaf"]["properties"]["field"]["enum"]) == {
        f["name"] for f in filters_document()["fields"]
    }

    def refs(node: Any) -> list[str]:
        if isinstance(node, dict):
            return [v for k, v in node.items() if k == "$ref"] + [
                r for v in node.values() for r in refs(v)
            ]
        if isinstance(node, list):
            return [r for v in node for r in refs(v)]
        return []

    for ref in refs(doc):
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas, ref


def test_the_path_filters_say_a_path_is_read_from_the_root_without_its_slash(
    ro_api: Api,
) -> None:
    """``path_prefixes: ["Documents"]`` is read as ``/Documents`` (a guard in
    ``test_filters_through_http``), which neither ``/openapi.json`` nor ``/v1/filters`` said: a
    caller could not tell whether it was read so or matched nothing."""
    doc = ro_api.client.get("/openapi.json").get_json()
    described = doc["components"]["schemas"]["SearchRequest"]["properties"]["path_prefixes"]
    fields = {f["name"]: f for f in ro_api.client.get("/v1/filters").get_json()["fields"]}
    for text in (described["description"], fields["path_prefix"]["description"]):
        assert "without a leading `/`" in text and "`Projects/` is `/Projects`" in text, text
    assert "without a leading `/`" in fields["path"]["description"]


def test_openapi_bounds_every_integer_query_parameter_as_the_endpoint_does(ro_api: Api) -> None:
    """Each integer query parameter's ``maximum`` in ``/openapi.json`` is the endpoint's own:
    the value is in range, one more is 400 naming the parameter. ``chunk_index`` (1,000,000) and
    ``offset`` (100,000,000) had no ``maximum``, so a schema-valid request was refused."""
    doc = ro_api.client.get("/openapi.json").get_json()
    doc_type, doc_id = ro_api.keys[LIGHT].split(":")
    auth = ("alice", PASSWORDS["alice"])
    checked = []
    for path, item in doc["paths"].items():
        operation = item.get("get")
        if operation is None:
            continue
        url = path.format(doc_type=doc_type, doc_id=doc_id)
        for param in operation.get("parameters", []):
            schema = param["schema"]
            if param["in"] != "query" or schema.get("type") != "integer":
                continue
            top = schema["maximum"]
            taken = ro_api.client.get(f"{url}?{param['name']}={top}", auth=auth).get_json()
            # in range (chunk_index 1,000,000 is past this document's last chunk: another 400)
            assert not str(taken.get("detail")).startswith("must be"), (path, taken)
            refused = ro_api.client.get(f"{url}?{param['name']}={top + 1}", auth=auth)
            assert refused.status_code == 400, (path, param["name"])
            assert refused.get_json()["field"] == param["name"]
            checked.append((path, param["name"]))
    # chunk_index, window; offset, limit of folders, tags, categories and owners
    assert len(checked) == 10, checked


def test_rate_limit(
    redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path, empty_store: Path
) -> None:
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    api, server = build_api(tmp_path, redis_url, embedder, model_dir, empty_store)
    try:
        api.settings.search_rate_limit = "3/minute"
        from search_api import create_app

        app = create_app(api.settings, services=api.services, producer=api.producer)
        client = app.test_client()
        auth = ("alice", PASSWORDS["alice"])
        codes = [
            client.post("/v1/search", json={"query": "lens"}, auth=auth).status_code
            for _ in range(3)
        ]
        assert codes == [200, 200, 200]
        response = client.post("/v1/search", json={"query": "lens"}, auth=auth)
        assert response.status_code == 429
        assert response.get_json()["code"] == "rate_limited"
        assert response.get_json()["detail"] == "more than 3 requests per 1 minute"
        assert 1 <= int(response.headers["Retry-After"]) <= 60
        # the limit is per caller: bob is unaffected; the context endpoint shares alice's
        assert (
            client.post(
                "/v1/search", json={"query": "lens"}, auth=("bob", PASSWORDS["bob"])
            ).status_code
            == 200
        )
        assert context_status(client, auth, api.keys[LIGHT]) == 429
        # so does the caller's status
        assert client.get("/v1/status", auth=auth).status_code == 429
        assert client.get("/v1/status", auth=("bob", PASSWORDS["bob"])).status_code == 200
        # and the search page's folder and tag lists
        assert client.get("/v1/folders", auth=auth).status_code == 429
        assert client.get("/v1/tags", auth=auth).status_code == 429
        assert client.get("/v1/categories", auth=auth).status_code == 429
        assert client.get("/v1/owners", auth=auth).status_code == 429
        assert client.get("/v1/filters").status_code == 200  # not limited
        # RCP shares the limit and answers JSON-RPC -32011 with the HTTP 429
        retrieve = {"jsonrpc": "2.0", "id": 1, "method": "retrieve", "params": {"query": "x"}}
        rcp_reply = client.post("/rcp/retrieve", json=retrieve, auth=auth)
        assert rcp_reply.status_code == 429 and rcp_reply.headers["Retry-After"]
        error = rcp_reply.get_json()["error"]
        assert error["code"] == -32011 and error["data"]["retryAfterMs"] >= 1000
        assert rcp_reply.get_json()["id"] == 1  # the request's own id (JSON-RPC 2.0 §5)
        batch = client.post("/rcp/retrieve", json=[{**retrieve, "id": 2}], auth=auth)
        assert batch.status_code == 429 and batch.get_json()["id"] is None
        # but not RCP's liveness check and identity, open without credentials (spec §14.1.1:
        # answered at any time), sent with them or not
        for method in ("ping", "info"):
            for sent in (auth, None):
                message = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {"nonce": "n"}}
                reply = client.post(f"/rcp/{method}", json=message, auth=sent)
                assert reply.status_code == 200 and "result" in reply.get_json(), reply.get_json()
        # nor do they count: bob's pings leave him the one request of three he has left
        bob = ("bob", PASSWORDS["bob"])
        ping = {"jsonrpc": "2.0", "id": 4, "method": "ping"}
        pings = [client.post("/rcp/ping", json=ping, auth=bob).status_code for _ in range(4)]
        assert pings == [200] * 4
        searches = [
            client.post("/v1/search", json={"query": "lens"}, auth=bob).status_code
            for _ in range(3)
        ]
        assert searches == [200, 429, 429]  # his search and status above used two of three
        # a page's session without a cookie is one more session in Redis: counted per address
        fresh = [app.test_client().get("/ui/session").status_code for _ in range(4)]
        assert fresh == [200, 200, 200, 429]
    finally:
        server.close()
        api.services.close()


def context_status(client: Any, auth: tuple[str, str], key: str) -> int:
    doc_type, doc_id = key.split(":")
    return client.get(f"/v1/documents/{doc_type}/{doc_id}/context", auth=auth).status_code


def test_openapi_bounds_limit_with_json_schema_keywords(ro_api: Api) -> None:
    """``SearchRequest.limit``'s 1–100 was published as ``ge``/``le``, which JSON Schema does
    not know: a client validating by ``/openapi.json`` let 0 and 1000 by."""
    doc = ro_api.client.get("/openapi.json").get_json()
    schemas = doc["components"]["schemas"]
    limit = Draft202012Validator(schemas["SearchRequest"]["properties"]["limit"])
    assert not limit.is_valid(0) and not limit.is_valid(1000) and not limit.is_valid(101)
    assert limit.is_valid(1) and limit.is_valid(100) and limit.is_valid(None)


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
def test_a_disabled_account_is_served_nothing_while_its_credential_is_cached(api: Api) -> None:
    """An admin disables alice (``occ user:disable``) just after she searched: her app password
    is still in the credential cache, and Nextcloud's WebDAV answers the checks of her files
    503 (nextcloud/server ``apps/dav/lib/Connector/Sabre/Auth.php`` ``check`` wraps the
    ``LoginException`` of ``Session::completeLogin`` in ``ServiceUnavailable``). That is a
    refused login, not an outage: the search is 401, not her private files shown unverified."""
    query = {"query": "private diary lighthouse lens", "doc_types": ["file"]}
    assert api.keys[DIARY] in api.found("alice", query)
    api.sim.disable_user("alice")
    response = api.post("alice", query)
    assert response.status_code == 401, response.get_json()
    assert "diary" not in response.get_data(as_text=True).lower()


def test_a_card_result_says_how_many_of_its_snippets_characters_are_its_title(api: Api) -> None:
    """A Deck card's text is ``"{title}\\n\\n{description}"`` (ncindex/sources/deck_card.py
    fetch_card): the search page showed the title as written and the description as Markdown,
    and found where the title ended in the snippet by re-doing the server's cleaning in
    JavaScript, which broke where the two disagreed. The result says it:
    ``snippet_title_chars``, code points of the snippet's plain text (an emoji one; the title's
    byte order mark dropped and its double space one, as the snippet has them); 0 for a file."""
    title = "# Ketch  \ufeff\U0001fa77 *tar*"
    api.index_card("alice", "Harbour", "To do", (title, "**Tar** the ketch hull."))
    answer = api.post("alice", {"query": "tar the ketch hull", "limit": 20}).get_json()
    results = {r["doc_type"]: r for r in answer["results"]}
    card = results["deck_card"]
    text, _ = plain_snippet(card["snippet"])
    assert card["snippet_title_chars"] == 15, card
    assert text[:15] == "# Ketch \U0001fa77 *tar*" and text[15] == "\n", text
    assert results["file"]["snippet_title_chars"] == 0


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
def test_a_card_searched_with_an_app_password_revoked_while_cached_is_not_shown(
    api: Api,
) -> None:
    """alice's app password is revoked just after she searched (still in the credential
    cache) and she searches Deck again: the card's check (nextcloud/deck's API at
    ``index.php``) is refused 401 ``{"message": ""}`` (nextcloud/server ``index.php`` catches
    the ``LoginException`` of ``Session::tryBasicAuthLogin``). The search is 401 — not the card
    shown unverified — and the refusal is no verdict on the card: no re-check is sent that
    could take it out of her index. A guard: this held before the change it came with."""
    key = api.index_card("alice", "Harbour", "To do", ("Tar the ketch", "Tar the hull."))
    query = {"query": "tar the ketch hull", "doc_types": ["deck_card"]}
    assert key in api.found("alice", query)
    api.producer.sent.clear()
    alice = api.sim.tree.users["alice"]
    alice.passwords.clear()
    alice.token_logins.clear()
    response = api.post("alice", query)
    assert response.status_code == 401, response.get_json()
    assert "ketch" not in response.get_data(as_text=True).lower()
    assert api.producer.sent == []
    assert api.store.document_points(key)


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
def test_a_bearer_token_revoked_while_cached_is_401_on_nextcloud_30_not_fewer_results(
    api: Api,
) -> None:
    """Before Nextcloud 31 ``OCS-APIRequest`` does not pass the CSRF check (nextcloud/server
    #46760), so Deck's ``#[CORS]`` API logs a Bearer caller out and answers 401 "CORS requires
    basic auth" (``CORSMiddleware::beforeController`` reads Basic credentials alone: the same
    401 for a good token and a revoked one, nextcloud/server#44365); ncindex drops the card it
    cannot check. alice's token is revoked while still in the credential cache: her search
    answered 200 with the card dropped, as for a good token. That refusal now sends one OCS
    ``GET /ocs/v2.php/cloud/user`` with the token (its ``tryTokenLogin`` checks it): revoked,
    the search is 401; good, it is the 200 it was."""
    api.sim.version = "30.0.5"
    key = api.index_card("alice", "Harbour", "To do", ("Tar the ketch", "Tar the hull."))
    query = {"query": "tar the ketch hull", "doc_types": ["deck_card"]}
    assert key in api.found("alice", query)  # Basic: checked and shown
    bearer = {"Authorization": f"Bearer {PASSWORDS['alice']}"}
    good = api.client.post("/v1/search", json=query, headers=bearer)
    assert good.status_code == 200, good.get_json()
    assert good.get_json()["results"] == []  # Deck would not check it: dropped
    alice = api.sim.tree.users["alice"]
    alice.passwords.clear()
    alice.token_logins.clear()
    api.sim.request_log.clear()
    revoked = api.client.post("/v1/search", json=query, headers=bearer)
    assert revoked.status_code == 401, revoked.get_json()
    asked = [(m, p) for m, p, _ in api.sim.request_log if p.startswith("/ocs/")]
    assert asked == [("GET", "/ocs/v2.php/cloud/user")]


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
def test_the_listings_refuse_an_app_password_revoked_while_cached(api: Api) -> None:
    """bob's app password is revoked (a lost phone's, in Settings › Security) just after he
    listed his folders, and his share of alice's Lighthouse folder is revoked too: his
    credential is still in the credential cache. ``GET /v1/folders`` and ``/v1/tags`` ask
    Nextcloud as bob, which refuses him (401); they answered the index's list unchecked
    instead — the revoked share's ``/Lighthouse`` among them, more than bob himself is
    shown — and kept the credential cached, so ``/v1/owners`` and ``/v1/categories``, which
    ask Nextcloud nothing, went on answering it. Now the refusal is a 401, as a search's is,
    and drops the cached credential: the next listing asks Nextcloud, which refuses it."""
    bob = ("bob", PASSWORDS["bob"])
    first = api.client.get("/v1/folders", auth=bob)
    assert first.status_code == 200 and "/Lighthouse" in first.get_json()["folders"]
    api.sim.unshare("alice", "/Projects/Lighthouse", "bob")
    account = api.sim.tree.users["bob"]
    account.passwords.clear()
    account.token_logins.clear()
    for path in ("/v1/folders", "/v1/tags", "/v1/owners"):
        response = api.client.get(path, auth=bob)
        assert response.status_code == 401, (path, response.get_json())
        assert response.get_json()["code"] == "unauthenticated", path
        assert "Lighthouse" not in response.get_data(as_text=True), path


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
def test_a_bearer_token_revoked_while_cached_is_401_for_a_context_on_nextcloud_30(
    api: Api,
) -> None:
    """The context endpoint checks its document as a search does, and Deck's ``#[CORS]`` API
    answers Nextcloud 30's Bearer caller the same 401 "CORS requires basic auth" for a good
    token and a revoked one (nextcloud/server ``CORSMiddleware::beforeController``, #44365,
    #46760). A search then confirms the token through OCS (``GET /ocs/v2.php/cloud/user``);
    the context did not: alice's token, revoked while still in the credential cache, got 404
    for her card, as a good token does, not 401."""
    api.sim.version = "30.0.5"
    key = api.index_card("alice", "Harbour", "To do", ("Tar the ketch", "Tar the hull."))
    doc_type, doc_id = key.split(":", 1)
    path = f"/v1/documents/{doc_type}/{doc_id}/context"
    bearer = {"Authorization": f"Bearer {PASSWORDS['alice']}"}
    good = api.client.get(path, headers=bearer)
    assert good.status_code == 404, good.get_json()  # Deck would not check it
    alice = api.sim.tree.users["alice"]
    alice.passwords.clear()
    alice.token_logins.clear()
    revoked = api.client.get(path, headers=bearer)
    assert revoked.status_code == 401, revoked.get_json()


def revoke_every_credential(api: Api, user: str) -> None:
    """``user``'s app passwords and login tokens revoked in the simulator (Settings ›
    Security), while ncindex's credential cache still holds them."""
    account = api.sim.tree.users[user]
    account.passwords.clear()
    account.token_logins.clear()


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
@pytest.mark.parametrize("path", ["/v1/owners", "/v1/categories", "/v1/status"])
def test_a_listing_from_the_index_refuses_an_app_password_revoked_while_cached(
    api: Api, path: str
) -> None:
    """bob's app password is revoked (a lost phone's) just after he listed. The owners, the
    note categories and his index status are read from the index and Redis alone, so no
    request to Nextcloud refused him: they answered the revoked password for the rest of the
    credential cache's 60 s. Such a listing now asks Nextcloud's OCS ``cloud/user`` when its
    credential came from the cache (nextcloud/server ``apps/provisioning_api/lib/Controller/
    UsersController.php`` ``getCurrentUser``, 401 when no login succeeded): 401, and the
    next request is refused at once (dropped from the cache)."""
    bob = ("bob", PASSWORDS["bob"])
    assert api.client.get(path, auth=bob).status_code == 200  # confirmed: now cached
    revoke_every_credential(api, "bob")
    api.sim.request_log.clear()
    response = api.client.get(path, auth=bob)
    assert response.status_code == 401, response.get_json()
    assert response.get_json()["code"] == "unauthenticated"
    asked = [(m, p) for m, p, _ in api.sim.request_log]
    assert asked == [("GET", "/ocs/v2.php/cloud/user")]


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
def test_a_listing_with_a_confirmed_cached_credential_asks_nextcloud_once_a_request(
    api: Api,
) -> None:
    """The confirmation costs one OCS request to a listing that asks Nextcloud nothing else,
    and none to one whose own requests Nextcloud answered as the caller (the folders' check):
    the answers are those of a credential still good."""
    bob = ("bob", PASSWORDS["bob"])
    first = api.client.get("/v1/owners", auth=bob)
    assert first.status_code == 200
    api.sim.request_log.clear()
    again = api.client.get("/v1/owners", auth=bob)
    assert again.get_json() == first.get_json()
    assert [p for _, p, _ in api.sim.request_log] == ["/ocs/v2.php/cloud/user"]
    api.sim.request_log.clear()
    folders = api.client.get("/v1/folders", auth=bob)
    assert folders.status_code == 200
    assert "/ocs/v2.php/cloud/user" not in [p for _, p, _ in api.sim.request_log]


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
def test_a_search_that_asks_nextcloud_nothing_refuses_a_credential_revoked_while_cached(
    api: Api,
) -> None:
    """A search whose filter the caller's documents do not meet has no result to check, so
    no request of its own met Nextcloud's refusal of an app password revoked while the
    credential cache held it: it answered 200 with its ``hints`` (read from the index).
    It now asks OCS ``cloud/user`` then, and is 401."""
    query = {"query": "lighthouse", "category": "Nowhere"}
    first = api.post("bob", query)
    assert first.status_code == 200 and first.get_json()["results"] == []
    revoke_every_credential(api, "bob")
    response = api.post("bob", query)
    assert response.status_code == 401, response.get_json()


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
def test_a_cached_credential_is_confirmed_within_the_listings_check_time(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The confirmation of a cached credential waited for Nextcloud as long as any request
    (``NCINDEX_HTTP_TIMEOUT``, 10 s) though its answer stands when none comes: a Nextcloud
    that stalls made ``/v1/owners`` (answered at once before) wait 10 s, and ``/v1/folders``
    12 s where its checks share 2 (``CHECK_SECONDS``). It now waits as long as a listing's
    check, whatever asks it (``CONFIRM_SECONDS``). Seen in the timeout the request is sent
    with (no clock is read)."""
    from ncindex.nextcloud.client import CONFIRM_SECONDS
    from ncindex.search.facets import CHECK_SECONDS

    bob = ("bob", PASSWORDS["bob"])
    assert api.client.get("/v1/owners", auth=bob).status_code == 200  # cached now
    sent: list[Any] = []
    request = api.services.http.request

    def spy(method: str, url: str, **kwargs: Any) -> Any:
        if str(url).endswith("/cloud/user"):
            sent.append(kwargs.get("timeout"))
        return request(method, url, **kwargs)

    monkeypatch.setattr(api.services.http, "request", spy)
    assert api.client.get("/v1/owners", auth=bob).status_code == 200
    assert sent == [CONFIRM_SECONDS] and CONFIRM_SECONDS <= CHECK_SECONDS


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
def test_the_page_refuses_a_typed_app_password_revoked_while_cached(api: Api) -> None:
    """bob's app password, used with the API a moment ago, is revoked (a lost phone's) and
    then typed into the search page's sign-in. ``POST /ui/login/password`` resolved it from
    the credential cache, asking Nextcloud nothing, and signed the page in with it: a
    sign-in the module says is 401 when Nextcloud refuses the password. It now asks OCS
    ``cloud/user`` (nextcloud/server ``apps/provisioning_api/lib/Controller/
    UsersController.php`` ``getCurrentUser``): 401 naming ``app_password``, no session."""
    from ncindex.web.session import CSRF_HEADER

    assert api.client.get("/v1/owners", auth=("bob", PASSWORDS["bob"])).status_code == 200
    revoke_every_credential(api, "bob")
    csrf = api.client.get("/ui/session").get_json()["csrf"]
    typed = {"login_name": "bob", "app_password": PASSWORDS["bob"]}
    refused = api.client.post("/ui/login/password", json=typed, headers={CSRF_HEADER: csrf})
    assert refused.status_code == 401, refused.get_json()
    assert refused.get_json()["field"] == "app_password"
    assert api.client.get("/ui/session").get_json()["user"] is None
    again = api.client.get("/v1/owners", auth=("bob", PASSWORDS["bob"]))
    assert again.status_code == 401  # dropped from the cache: refused at once


def test_status_documents_now_where_its_other_fields_are(ro_api: Api) -> None:
    """``GET /v1/status`` answered ``now`` but the published schema said only "ISO 8601":
    no ``format``, no example, and neither the endpoint's summary nor ``modified_after``'s
    description said that a relative time is reckoned from it. The schema now says
    ``date-time`` (RFC 3339, UTC, to the second) with an example, and the answer is one a
    search's ``modified_after`` takes as it is."""
    from datetime import datetime

    doc = ro_api.client.get("/openapi.json").get_json()
    now_schema = doc["components"]["schemas"]["UserStatus"]["properties"]["now"]
    assert now_schema["format"] == "date-time" and now_schema["type"] == "string"
    assert "not Unix seconds" in now_schema["description"]
    assert "`now`" in doc["paths"]["/v1/status"]["get"]["summary"]
    request = doc["components"]["schemas"]["SearchRequest"]["properties"]
    for name in ("modified_after", "modified_before"):
        assert "`now` in `GET /v1/status`" in request[name]["description"], name
    before = time.time()
    body = ro_api.client.get("/v1/status", auth=("alice", PASSWORDS["alice"])).get_json()
    now = body["now"]
    for example in [*now_schema["examples"], now]:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", example), example
    assert before - 1 <= datetime.fromisoformat(now).timestamp() <= time.time() + 1
    assert ro_api.found("alice", {"query": "lighthouse", "modified_before": now})


def test_a_tag_or_category_in_another_case_is_named_not_silently_empty(api: Api) -> None:
    """``"URGENT"`` found nothing, silently, where the tag is ``urgent``: Nextcloud matches tag
    names and note categories (folder names) as spelt, so ncindex does too, and a search that
    finds nothing says which spelling the caller's documents hold, and how the search API
    lists them (``GET /v1/tags``, ``GET /v1/categories``; the MCP tools are not this caller's);
    one that no value holds in any case, or whose value selects documents that
    the rest of the search rules out, is still an empty answer, and one that finds something
    is answered."""
    api.sim.create_tag("urgent")  # system tags the caller can see (list_values holds to them)
    api.sim.create_tag("finance")
    for body, field, stored in [
        ({"tags": ["URGENT"]}, "tags[0]", "'urgent'"),
        ({"tags": ["nowhere", "Urgent"]}, "tags[1]", "'urgent'"),
        ({"tags": ["URGENT"], "doc_types": ["deck_card"]}, "tags[0]", "'urgent'"),
        ({"category": "work"}, "category", "'Work'"),
        (
            {"filter": {"field": "tags", "op": "contains", "value": "Urgent"}},
            "filter.value",
            "'urgent'",
        ),
        (
            {"filter": {"and": [{"field": "category", "op": "in", "value": ["WORK"]}]}},
            "filter.and[0].value[0]",
            "'Work'",
        ),
    ]:
        response = api.post("alice", {"query": Q, **body})
        assert response.status_code == 400, (body, response.get_json())
        problem = response.get_json()
        assert (problem["code"], problem["field"]) == ("invalid_value", field), problem
        assert stored in problem["detail"] and "MCP" not in problem["detail"], problem
        tags = field.startswith(("tags", "filter.v"))
        listing = "(GET /v1/tags lists them)" if tags else "(GET /v1/categories lists them)"
        assert problem["detail"].endswith(listing), problem
    for body in (
        {"tags": ["nowhere"]},
        {"filter": {"not": {"field": "tags", "op": "contains", "value": "URGENT"}}, "tags": ["x"]},
        {"tags": ["finance"], "doc_types": ["note"]},
        {
            "filter": {"not": {"field": "tags", "op": "contains", "value": "URGENT"}},
            "tags": ["finance"],
            "doc_types": ["note"],
        },
    ):
        response = api.post("alice", {"query": Q, **body})
        assert response.status_code == 200 and response.get_json()["results"] == [], body
    assert api.found("alice", {"query": Q, "tags": ["URGENT", "finance"]})


def test_another_spelling_where_another_branch_may_match_is_a_hint_not_an_error(
    api: Api,
) -> None:
    """A tag or category spelt otherwise than the caller's documents have it was refused
    (400) wherever it sat in the tree, even under an ``or`` whose other branch may match, or
    beside a value of the same list that the documents hold: ``URGENT`` or ``urgent``, written
    by a caller who does not know which spelling the tag has, was an error, where the
    selects-nothing hint looks only at values that must hold. Such a search is well formed and
    answered; when it finds nothing, the spelling is a hint after any others (same code, the
    value's path, the error's detail). Where the value must hold and its list holds nothing
    else the caller's documents have, it stays the error (the case test above)."""
    api.sim.create_tag("urgent")  # system tags the caller can see (list_values holds to them)
    api.sim.create_tag("finance")
    tags = "(GET /v1/tags lists them)"
    categories = "(GET /v1/categories lists them)"
    for body, hints in [
        (
            {"filter": {"or": [{"field": "tags", "op": "contains", "value": "URGENT"},
                               {"field": "tags", "op": "contains", "value": "urgent"}]},
             "doc_types": ["deck_card"]},
            [("filter.or[0].value", "tag 'URGENT'", f"spelt 'urgent' {tags}")],
        ),
        (
            {"tags": ["URGENT", "finance"], "doc_types": ["deck_card"]},
            [("tags[0]", "tag 'URGENT'", f"spelt 'urgent' {tags}")],
        ),
        (
            {"doc_types": ["news_item"], "filter": {"and": [
                {"field": "path_prefix", "op": "eq", "value": "/Nowhere"},
                {"or": [{"field": "category", "op": "in", "value": ["WORK"]},
                        {"field": "doc_type", "op": "eq", "value": "file"}]}]}},
            [("filter.and[0].value", "'/Nowhere'", "(GET /v1/folders lists them)"),
             ("filter.and[1].or[0].value[0]", "category 'WORK'", f"spelt 'Work' {categories}")],
        ),
    ]:  # fmt: skip
        response = api.post("alice", {"query": Q, **body})
        assert response.status_code == 200, (body, response.get_json())
        answer = response.get_json()
        assert answer["results"] == [], body
        got = [(h["code"], h["field"]) for h in answer["hints"]]
        assert got == [("selects_nothing", field) for field, _, _ in hints], answer
        for hint, (_, named, said) in zip(answer["hints"], hints, strict=True):
            assert named in hint["detail"] and hint["detail"].endswith(said), hint


NOTHING_SELECTED = [
    # (user, body, field, detail): a filter value none of the caller's documents holds
    ("alice", {"path_prefixes": ["/Nowhere"]}, "path_prefixes[0]",
     "no indexed document you can read is at or under '/Nowhere' (GET /v1/folders lists them)"),
    # alice's folder; bob has it shared as /Lighthouse: his own view only
    ("bob", {"path_prefixes": ["/Projects/Lighthouse"]}, "path_prefixes[0]",
     "no indexed document you can read is at or under '/Projects/Lighthouse' "
     "(GET /v1/folders lists them)"),
    ("alice", {"path_prefixes": ["/Nowhere", "/Gone"]}, "path_prefixes",
     "no indexed document you can read is at or under any of '/Nowhere', '/Gone' "
     "(GET /v1/folders lists them)"),
    ("alice", {"tags": ["nowhere"]}, "tags[0]",
     "no indexed document you can read has the tag 'nowhere' (GET /v1/tags lists them)"),
    # bob's category, on a note alice cannot read: told as one nobody has
    ("alice", {"category": "Home"}, "category",
     "no indexed note you can read has the category 'Home' (GET /v1/categories lists them)"),
    ("alice", {"category": "Nowhere"}, "category",
     "no indexed note you can read has the category 'Nowhere' (GET /v1/categories lists them)"),
    # bob owns two documents, neither of which alice can read; zed owns nothing
    ("alice", {"filter": {"field": "owner", "op": "eq", "value": "bob"}}, "filter.value",
     "no indexed document you can read is owned by 'bob' (GET /v1/owners lists them)"),
    ("alice", {"filter": {"field": "owner", "op": "eq", "value": "zed"}}, "filter.value",
     "no indexed document you can read is owned by 'zed' (GET /v1/owners lists them)"),
    # an exact path: a file's whole path; nothing lists files, so the folders holding yours
    ("alice", {"filter": {"field": "path", "op": "eq", "value": "/Projects/gone.md"}},
     "filter.value",
     "no indexed document you can read is at the path '/Projects/gone.md' "
     "(GET /v1/folders lists the folders holding yours)"),
    # alice's diary, which bob cannot read: told as a path nobody has
    ("bob", {"filter": {"field": "path", "op": "eq", "value": "/Private/diary.md"}},
     "filter.value",
     "no indexed document you can read is at the path '/Private/diary.md' "
     "(GET /v1/folders lists the folders holding yours)"),
    ("alice", {"filter": {"and": [
        {"field": "doc_type", "op": "eq", "value": "file"},
        {"field": "path", "op": "in", "value": ["/a.md", "/b.md"]}]}},
     "filter.and[1].value",
     "no indexed document you can read is at the path any of '/a.md', '/b.md' "
     "(GET /v1/folders lists the folders holding yours)"),
    ("alice", {"doc_types": ["file"], "filter": {"and": [
        {"field": "size", "op": "gt", "value": 1},
        {"field": "path_prefix", "op": "in", "value": ["/Nowhere"]}]}},
     "filter.and[1].value[0]",
     "no indexed document you can read is at or under '/Nowhere' (GET /v1/folders lists them)"),
]  # fmt: skip


@pytest.mark.parametrize(("user", "body", "field", "detail"), NOTHING_SELECTED)
def test_a_filter_value_selecting_nothing_is_hinted_beside_the_empty_answer(
    ro_api: Api, user: str, body: dict[str, Any], field: str, detail: str
) -> None:
    """A folder, owner, category or tag that none of the caller's documents has answered a
    bare empty list, which an agent could not tell from a query nothing matches. The search
    is well formed (an empty folder, a category not used yet), so it is still answered, 200
    with no results, and ``hints`` names such a value and how the search API lists the
    caller's values; only the caller's documents are looked at, so a value only another
    user's documents hold (bob's category, alice's folder under the name bob does not have it
    by, bob as owner to alice) reads exactly as one that nobody's do."""
    response = ro_api.post(user, {"query": Q, **body})
    assert response.status_code == 200, (body, response.get_json())
    answer = response.get_json()
    assert answer["results"] == [], body
    assert answer["hints"] == [{"code": "selects_nothing", "field": field, "detail": detail}]


def test_a_filter_value_that_selects_something_leaves_an_empty_answer_empty(
    ro_api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No hint (``hints`` empty) where the value is not why nothing was found: the folder,
    owner, category or tag selects documents the rest of the search rules out, a list holds a
    value that selects some, or the value sits under an ``or`` or a ``not``; and a search that
    finds something never asks whether its values select anything."""
    for body in (
        {"path_prefixes": ["/Private"], "doc_types": ["note"]},
        {"path_prefixes": ["/Nowhere", "/Private"], "doc_types": ["note"]},
        {"category": "Work", "doc_types": ["file"]},
        {"tags": ["finance"], "doc_types": ["note"]},
        {"filter": {"field": "owner", "op": "eq", "value": "alice"}, "doc_types": ["deck_card"]},
        {"filter": {"or": [
            {"field": "owner", "op": "eq", "value": "zed"},
            {"field": "doc_type", "op": "eq", "value": "deck_card"}]}},
        {"filter": {"not": {"field": "path_prefix", "op": "eq", "value": "/Nowhere"}},
         "doc_types": ["deck_card"]},
    ):  # fmt: skip
        response = ro_api.post("alice", {"query": Q, **body})
        assert response.status_code == 200, (body, response.get_json())
        assert response.get_json()["results"] == [], body
        assert response.get_json()["hints"] == [], body
    asked: list[Any] = []
    monkeypatch.setattr(service_module, "selects", lambda *args: asked.append(args) or True)
    assert ro_api.found("alice", {"query": Q, "path_prefixes": ["/Projects"], "tags": ["urgent"]})
    assert asked == []
    assert ro_api.found("alice", {"query": Q, "doc_types": ["deck_card"], "tags": ["urgent"]}) == []
    assert len(asked) == 1


def test_a_tag_typed_decomposed_is_named_as_stored(api: Api) -> None:
    """``Überprüfung`` typed decomposed (NFD: ``U`` + U+0308, as macOS keyboards and file
    names give it) matched nothing, with no hint, where the tag was created precomposed
    (NFC). Nextcloud stores a tag's name as sent and looks it up as spelt
    (``SystemTagManager::createTag``, ``getTag``), so both forms may exist as two tags: the
    search keeps matching as spelt and names the spelling the caller's documents hold."""
    nfc = unicodedata.normalize("NFC", "Überprüfung")
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfc != nfd
    api.sim.assign_tag("alice", BUDGET, api.sim.create_tag(nfc))
    api.store.set_payload(api.keys[BUDGET], {"tags": [nfc]})
    assert api.found("alice", {"query": Q, "tags": [nfc]}) == [api.keys[BUDGET]]
    response = api.post("alice", {"query": Q, "tags": [nfd]})
    assert response.status_code == 400, response.get_json()
    problem = response.get_json()
    assert (problem["code"], problem["field"]) == ("invalid_value", "tags[0]"), problem
    assert f"spelt {nfc!r} (GET /v1/tags lists them)" in problem["detail"], problem


STALLED = ("webdav", "dav-search", "notes", "ocs")
"""The families a stalled Nextcloud leaves unanswered in the tests below."""


@pytest.mark.parametrize("api", [{"http_timeout": 0.5, "user_cache_seconds": 60}], indirect=True)
def test_a_search_nextcloud_does_not_answer_waits_for_it_once(api: Api) -> None:
    """bob's credential is cached, then Nextcloud stops answering. His search sends its checks
    (one WebDAV ``SEARCH``), keeps its results unconfirmed once they time out
    (``settings.http_timeout``; fail-open), and then asks OCS ``cloud/user`` once to confirm
    the cached credential (``CONFIRM_SECONDS``), which gets no answer either: the answer
    stands. The client made for one HTTP request stops each family at its first request
    without an answer, so nothing else is sent. The faults count the requests that reached
    Nextcloud (each takes one of its ``times``). The next request has a client of its own:
    Nextcloud answering again, it is asked and confirms the results."""
    body = {"query": "lighthouse"}
    assert api.post("bob", body).status_code == 200  # confirmed, and cached
    faults = {family: api.sim.faults.set(family, timeout=True, times=10) for family in STALLED}
    try:
        response = api.post("bob", body)
    finally:
        api.sim.faults.clear()
    reached = {family: 10 - (fault.times or 0) for family, fault in faults.items()}
    assert response.status_code == 200, response.get_json()
    answer = response.get_json()
    assert answer["results"] and answer["verification"]["errors"] >= 1, answer["verification"]
    assert reached == {"webdav": 0, "dav-search": 1, "notes": 0, "ocs": 1}, reached
    again = api.post("bob", body).get_json()
    assert again["results"] and again["verification"]["errors"] == 0, again["verification"]


@pytest.mark.parametrize(
    "api",
    [{"http_timeout": 0.5, "user_cache_seconds": 60, "unverified_results": "drop"}],
    indirect=True,
)
def test_a_search_nextcloud_does_not_answer_withholds_what_it_could_not_confirm(
    api: Api,
) -> None:
    """With ``NCINDEX_UNVERIFIED_RESULTS=drop`` a search whose checks get no answer (the
    client stopped after the first: the rest unsent) withholds every candidate it could not
    confirm: a 200 with no results, each candidate counted once in ``errors`` and in
    ``withheld`` — the same counts a search whose every check timed out gives (a guard of the
    stop's failures being met as timeouts are)."""
    body = {"query": "lighthouse lens foghorn", "limit": 50}
    answered = api.post("alice", body).get_json()["verification"]
    for family in STALLED:
        api.sim.faults.set(family, timeout=True, times=10)
    try:
        response = api.post("alice", body)
    finally:
        api.sim.faults.clear()
    assert response.status_code == 200, response.get_json()
    answer = response.get_json()
    counts = answer["verification"]
    assert answer["results"] == [], answer["results"]
    assert counts["checked"] == answered["checked"] >= 2, (counts, answered)
    assert counts["errors"] == counts["withheld"] == counts["checked"], counts


CARD_TEXT = ("Lighthouse lens", "Polish the lighthouse lens and check the foghorn before winter.")
"""A Deck card the searches over notes, files and cards below find beside alice's files."""


def verified_by_type(answer: dict[str, Any]) -> dict[str, set[bool]]:
    """doc_type → the ``verified`` values of a search answer's results of that type."""
    kinds: dict[str, set[bool]] = {}
    for result in answer["results"]:
        kinds.setdefault(result["doc_type"], set()).add(result["verified"])
    return kinds


@pytest.mark.parametrize(
    "api",
    [{"http_timeout": 0.5, "user_cache_seconds": 60, "verify_concurrency": 1}],
    indirect=True,
)
def test_a_search_confirms_its_notes_and_files_while_deck_alone_stalls(api: Api) -> None:
    """alice searches her notes, files and a Deck card while Deck's API alone stalls (a big
    board past the client's timeout); her checks go out one after another (one verifier
    thread, as when a page's Deck requests fill the pool), Deck's board GET first. Its timeout
    stopped every later request of the search's client, so the one WebDAV ``SEARCH`` that
    checks the note and the files was never sent and they came back unconfirmed though
    WebDAV answers. The stop is Deck's alone now: the note and the files are confirmed, the
    card is kept unconfirmed, and its card GET is not sent after the board GET timed out."""
    card = api.index_card("alice", "Harbour", "Doing", CARD_TEXT)
    body = {"query": Q, "limit": 10}
    answered = api.post("alice", body).get_json()  # confirmed, and the credential cached
    assert verified_by_type(answered) == {"file": {True}, "note": {True}, "deck_card": {True}}
    deck = api.sim.faults.set("deck", timeout=True, times=10)
    try:
        response = api.post("alice", body)
    finally:
        api.sim.faults.clear()
    assert response.status_code == 200, response.get_json()
    answer = response.get_json()
    assert verified_by_type(answer) == {"file": {True}, "note": {True}, "deck_card": {False}}
    assert card in {f"{r['doc_type']}:{r['doc_id']}" for r in answer["results"]}
    assert 10 - (deck.times or 0) == 1  # the board GET reached Deck; the card GET was not sent


@pytest.mark.parametrize("api", [{"http_timeout": 0.5, "user_cache_seconds": 60}], indirect=True)
def test_a_search_over_notes_files_and_cards_nextcloud_does_not_answer_asks_it_once(
    api: Api,
) -> None:
    """Nextcloud stalls whole while alice searches her notes, files and a Deck card (her
    credential cached). The search's checks go out at once: the WebDAV ``SEARCH`` of the note
    and the files, Deck's board GET and card GET; they time out together (one timeout), and
    then the cached credential's confirmation (OCS ``cloud/user``) is sent once and gets no
    answer either (``CONFIRM_SECONDS`` more): nothing else. The faults count the requests
    that reached Nextcloud (before: ``ocs`` 0, the confirmation left unsent when nothing had
    answered)."""
    api.index_card("alice", "Harbour", "Doing", CARD_TEXT)
    body = {"query": Q, "limit": 10}
    assert api.post("alice", body).status_code == 200  # confirmed, and cached
    faults = {f: api.sim.faults.set(f, timeout=True, times=10) for f in (*STALLED, "deck")}
    try:
        response = api.post("alice", body)
    finally:
        api.sim.faults.clear()
    reached = {family: 10 - (fault.times or 0) for family, fault in faults.items()}
    assert response.status_code == 200, response.get_json()
    answer = response.get_json()
    assert verified_by_type(answer) == {"file": {False}, "note": {False}, "deck_card": {False}}
    assert reached == {"webdav": 0, "dav-search": 1, "notes": 0, "ocs": 1, "deck": 2}, reached


@pytest.mark.parametrize(
    "api",
    [{"http_timeout": 0.5, "user_cache_seconds": 60, "verify_concurrency": 1}],
    indirect=True,
)
@pytest.mark.parametrize("doc_types", [None, ["deck_card"]], ids=["webdav", "deck-alone"])
def test_a_revoked_credential_whose_deck_check_stalls_is_refused(
    api: Api, doc_types: list[str] | None
) -> None:
    """alice's app password is revoked while the credential cache holds it, and Deck's API
    stalls before Nextcloud's login check (the simulator's fault answers nothing, as a Deck
    behind a stuck PHP-FPM pool); ``NCINDEX_UNVERIFIED_RESULTS=show``.

    ``webdav``: her search over notes, files and a card sends its Deck board GET first (one
    verifier thread). The timeout stopped every later request of the search's client: the
    WebDAV ``SEARCH`` was never sent, the confirmation not either, and the revoked
    credential got the note, the files and the card, unconfirmed but with their text. With
    the stop Deck's alone, WebDAV is asked and refuses the credential (nextcloud/server
    ``apps/dav/lib/Connector/Sabre/Auth.php`` ``validateUserPass``): 401. A guard of 03ac732
    (failing on the client before it).

    ``deck-alone``: her search asks Deck alone (``doc_types``). No answer refused the
    credential, and the confirmation was left unsent because nothing had answered: the card
    was shown with its text (seen on the old client: ``assert 200 == 401``). OCS
    ``cloud/user`` is asked now, and refuses it: 401, nothing shown."""
    api.index_card("alice", "Harbour", "Doing", CARD_TEXT)
    body: dict[str, Any] = {"query": Q, "limit": 10}
    if doc_types:
        body["doc_types"] = doc_types
    first = api.post("alice", body)  # confirmed, and cached
    assert first.status_code == 200 and first.get_json()["results"], first.get_json()
    revoke_every_credential(api, "alice")
    deck = api.sim.faults.set("deck", timeout=True, times=10)
    try:
        response = api.post("alice", body)
    finally:
        api.sim.faults.clear()
    assert response.status_code == 401, response.get_json()
    assert "lighthouse" not in response.get_data(as_text=True).lower()
    assert 10 - (deck.times or 0) == 1  # the board GET reached Deck


@pytest.mark.parametrize("api", [{"http_timeout": 2.0, "user_cache_seconds": 60}], indirect=True)
def test_a_cached_credential_whose_checks_get_no_answer_is_confirmed_beside_them(
    api: Api,
) -> None:
    """alice's credential is cached; her search asks Deck alone, which hangs. The
    confirmation (OCS ``cloud/user``) was sent only once the Deck check had timed out (2 s),
    then waited for (``CONFIRM_SECONDS``): a Nextcloud stalled whole cost the two one after
    the other. It now goes out once the check has waited half its timeout without an
    answer, beside it. The Deck fault is let go once OCS was asked: the check still waiting
    then gets its answer, and the card is confirmed (failed on the old search: the check
    had timed out before OCS was asked, the card unconfirmed). OCS is asked once."""
    from support import wait_until

    api.index_card("alice", "Harbour", "Doing", CARD_TEXT)
    body = {"query": Q, "limit": 10, "doc_types": ["deck_card"]}
    assert api.post("alice", body).status_code == 200  # confirmed, and cached
    asked = api.sim.request_count("ocs")
    api.sim.faults.set("deck", timeout=True)

    def let_deck_go_once_ocs_is_asked() -> None:
        wait_until(lambda: api.sim.request_count("ocs") > asked, timeout=30, interval=0.01)
        api.sim.faults.clear("deck")

    watcher = threading.Thread(target=let_deck_go_once_ocs_is_asked, daemon=True)
    watcher.start()
    try:
        response = api.post("alice", body)
    finally:
        watcher.join(30)
        api.sim.faults.clear()
    assert response.status_code == 200, response.get_json()
    assert verified_by_type(response.get_json()) == {"deck_card": {True}}
    assert api.sim.request_count("ocs") == asked + 1


@pytest.mark.parametrize(
    "target",
    [
        "/v1/documents/note/%C3%A9t%C3%A9/context",  # UTF-8 escaped: été
        "/v1/documents/note/%E2%82%AC%F0%9F%98%80/context",  # three and four bytes: €😀
    ],
)
def test_context_path_escapes_of_utf8_are_looked_up(ro_served: Served, target: str) -> None:
    """Guard of the UTF-8 check of the context path (``RAW_URI``, ``PATH_INFO``): an id whose
    escapes are UTF-8 is looked up (404 ``not_found``: no such note), not refused 400."""
    status, problem = _get_as_alice(ro_served, target)
    assert (status, problem["code"]) == (404, "not_found"), problem
