"""Fuzzing: webhook envelopes against the receiver, filter trees against ``/v1/search``, and
schemathesis against the search API's ``/openapi.json``.

Properties: the receiver answers any bytes or JSON with 202 or a 4xx problem+json carrying
``code``, and every valid envelope with 202; the search API answers any filter tree with 200
or a 4xx problem+json carrying ``code`` and ``field``; no schemathesis case yields a 5xx.
``NCINDEX_HYPOTHESIS_PROFILE=rel-fuzz`` (``make fuzz``) runs ≥ 10,000 cases per property.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import schemathesis
from hypothesis import assume, given
from hypothesis import strategies as st
from pydantic import SecretStr
from rel_support import fuzz_settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from ncindex.ingest.events import NODE_NS, SINGLE_NODE, TAG_EVENTS, TWO_NODE
from ncindex.ingest.queueing import celery_app
from ncindex.search.filter_fields import filters_document
from ncindex.settings import Settings
from ncindex.sources.deck_card import ACL_CREATED, ACL_DELETED, DECK_SUBSCRIBED
from support import PASSWORDS, Stack
from webhook_receiver import create_app

PROBLEM = "application/problem+json"
RECEIVER_CODES = {"invalid_json", "invalid_envelope", "payload_too_large", "invalid_value"}
SEARCH_CODES = {
    "invalid_json",
    "invalid_value",
    "invalid_filter",
    "unknown_field",
    "unsupported_operator",
    "payload_too_large",
}

# --- the receiver -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def receiver(redis_url: str) -> Iterator[tuple[Any, Settings]]:
    """The receiver app (test client) with a real Celery producer on database 15 of the
    session's Redis (the module's ``corpus_stack`` worker consumes database 0)."""
    url = redis_url.rsplit("/", 1)[0] + "/15"
    settings = Settings(
        redis_url=url,
        webhook_secret=SecretStr(secrets.token_urlsafe(12)),
        accounts={"alice": SecretStr("pw"), "bob": SecretStr("pw")},
        webhook_max_body_bytes=16_384,
        debounce_seconds=0,
    )
    app = create_app(settings, producer=celery_app(settings))
    yield app.test_client(), settings
    redis.Redis.from_url(url).flushdb()  # the queued tasks of the fuzzed envelopes


def deliver(receiver: tuple[Any, Settings], body: bytes) -> Any:
    """POST ``body`` to ``/hooks/nextcloud`` with the right secret and no Content-Type."""
    client, settings = receiver
    headers = {settings.webhook_secret_header: settings.webhook_secret.get_secret_value()}
    return client.post("/hooks/nextcloud", data=body, headers=headers)


def assert_receiver_answer(response: Any, body: Any) -> None:
    """202, or a 4xx problem+json with a known ``code`` (never a 5xx)."""
    if response.status_code == 202:
        answer = response.get_json()
        assert isinstance(answer.get("queued"), int), answer
        return
    assert 400 <= response.status_code < 500, (response.status_code, body, response.data[:300])
    assert response.mimetype == PROBLEM, response.data[:300]
    problem = response.get_json()
    assert problem["code"] in RECEIVER_CODES, problem
    assert problem["status"] == response.status_code


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
CLASSES = [
    *(NODE_NS + n for n in sorted(SINGLE_NODE | TWO_NODE)),
    *TAG_EVENTS,
    *DECK_SUBSCRIBED,
    "OCP\\Calendar\\Events\\CalendarObjectCreatedEvent",
    "\\" + NODE_NS + "NodeWrittenEvent",
]
USERS = st.sampled_from(["alice", "bob", "mallory", ""])
# Path text includes lone surrogates, NUL, and escapes that JSON can carry.
path_text = st.text(
    alphabet=st.characters(codec=None, exclude_categories=()), min_size=0, max_size=40
)
paths = st.one_of(
    st.builds(lambda u, p: f"/{u}/files/{p}", USERS, path_text),
    st.builds(lambda u, p: f"/{u}/files_trashbin/{p}", USERS, path_text),
    path_text,
)
ids = st.one_of(
    st.integers(min_value=0, max_value=2**63), st.integers(min_value=-5, max_value=2**70)
)
nodes = st.fixed_dictionaries(
    {"path": paths},
    optional={"id": st.one_of(ids, json_scalars), "extra": json_values},
)
event_bodies = st.fixed_dictionaries(
    {"class": st.one_of(st.sampled_from(CLASSES), st.text(max_size=20))},
    optional={
        "node": st.one_of(nodes, json_values),
        "source": nodes,
        "target": nodes,
        "objectType": st.sampled_from(["files", "calendar", ""]),
        "objectIds": st.one_of(
            st.lists(st.one_of(ids.map(str), ids, json_scalars), max_size=5), json_values
        ),
        "card": st.one_of(st.fixed_dictionaries({"id": st.one_of(ids, json_scalars)}), json_values),
    },
)
user_objects = st.one_of(
    st.none(),
    st.fixed_dictionaries({"uid": USERS}, optional={"displayName": json_scalars}),
    json_values,
)
envelopes = st.fixed_dictionaries(
    {"event": st.one_of(event_bodies, json_values)},
    optional={"user": user_objects, "time": st.one_of(ids, json_scalars), "x": json_values},
)


def encode(value: Any) -> bytes:
    """JSON as PHP writes it (slashes escaped); lone surrogates as ``\\uXXXX`` escapes."""
    return json.dumps(value).replace("/", "\\/").encode()


@fuzz_settings()
@given(body=st.binary(max_size=300))
def test_any_bytes_get_202_or_a_4xx_problem(receiver: Any, body: bytes) -> None:
    assert_receiver_answer(deliver(receiver, body), body)


@fuzz_settings()
@given(value=json_values)
def test_any_json_gets_202_or_a_4xx_problem(receiver: Any, value: Any) -> None:
    body = encode(value)
    assert_receiver_answer(deliver(receiver, body), body)


@fuzz_settings()
@given(envelope=envelopes)
def test_envelope_shaped_json_gets_202_or_a_4xx_problem(receiver: Any, envelope: Any) -> None:
    body = encode(envelope)
    assert_receiver_answer(deliver(receiver, body), body)


@pytest.mark.parametrize("depth", [100, 1_000, 5_000])
@pytest.mark.parametrize("opener", [b"[", b'{"a": ', b'{"event": {"node": '])
def test_deeply_nested_json_is_a_400_not_a_500(receiver: Any, opener: bytes, depth: int) -> None:
    """Nesting past Python's recursion limit is refused as a problem, never a 500."""
    body = opener * depth
    response = deliver(receiver, body)
    assert_receiver_answer(response, body[:40])
    assert response.status_code in (400, 413)  # 413 when the nesting is over the body limit


safe_paths = st.text(
    alphabet=st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=40
).filter(lambda p: not {".", ".."} & set(p.split("/")))  # Nextcloud has no such segments
valid_nodes = st.fixed_dictionaries(
    {
        "id": st.integers(min_value=0, max_value=2**53),
        "path": st.builds(lambda p: f"/alice/files/{p}", safe_paths),
    }
)
valid_envelopes = st.one_of(
    st.builds(
        lambda cls, node, t: {
            "event": {"class": NODE_NS + cls, "node": node},
            "user": {"uid": "alice", "displayName": "Alice"},
            "time": t,
        },
        st.sampled_from(sorted(SINGLE_NODE)),
        valid_nodes,
        st.integers(min_value=0, max_value=2**40),
    ),
    st.builds(
        lambda cls, source, target, user: {
            "event": {"class": NODE_NS + cls, "source": source, "target": target},
            "user": user,
            "time": 1767225601,
        },
        st.sampled_from(sorted(TWO_NODE)),
        valid_nodes,
        valid_nodes,
        st.sampled_from([None, {"uid": "alice"}]),
    ),
    st.builds(
        lambda cls, object_ids: {
            "event": {"class": cls, "objectType": "files", "objectIds": object_ids},
            "user": {"uid": "bob"},
            "time": 1767225601,
        },
        st.sampled_from(TAG_EVENTS),
        st.lists(st.integers(min_value=0, max_value=2**53).map(str), max_size=5),
    ),
    st.builds(
        lambda cls, card_id: {
            "event": {"class": cls, "card": {"id": card_id, "title": "t"}},
            "user": {"uid": "alice"},
            "time": 1767225601,
        },
        st.sampled_from([c for c in DECK_SUBSCRIBED if c not in (ACL_CREATED, ACL_DELETED)]),
        st.integers(min_value=0, max_value=2**53),
    ),
    st.builds(  # a board shared or unshared: the ACL entry, its board's id (nextcloud/deck Acl)
        lambda cls, board_id, participant: {
            "event": {
                "class": cls,
                "acl": {"id": 1, "boardId": board_id, "type": 0, "participant": participant},
            },
            "user": {"uid": "alice"},
            "time": 1767225601,
        },
        st.sampled_from([ACL_CREATED, ACL_DELETED]),
        st.one_of(st.integers(min_value=0, max_value=2**53), st.integers(0, 99).map(str)),
        st.sampled_from(["bob", {"uid": "bob", "displayname": "Bob"}]),
    ),
)


@fuzz_settings()
@given(envelope=valid_envelopes)
def test_valid_envelopes_are_accepted(receiver: Any, envelope: dict[str, Any]) -> None:
    response = deliver(receiver, encode(envelope))
    assert response.status_code == 202, (envelope, response.get_json())


# --- filter trees against /v1/search ----------------------------------------------------------

DOC = filters_document()
FIELD_NAMES = [f["name"] for f in DOC["fields"]]
OPERATORS = DOC["operators"]


def typed_values(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values that fit the field's type (mostly), and some that do not."""
    kind = spec["type"]
    if kind == "int":
        one = st.integers(min_value=-(2**64), max_value=2**64)
    elif kind == "date":
        one = st.one_of(
            st.integers(min_value=-(2**40), max_value=2**40),
            st.floats(allow_nan=False, allow_infinity=False),
            st.datetimes().map(lambda d: d.isoformat()),
            st.text(max_size=25),
        )
    elif spec.get("values"):
        one = st.sampled_from(spec["values"])
    else:
        one = st.text(max_size=25)
    return st.one_of(one, st.lists(one, max_size=4), json_scalars)


def leaf_for(spec: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A leaf on an advertised field: its own operators mostly, any operator sometimes."""
    ops = st.one_of(st.sampled_from(spec["operators"]), st.sampled_from(OPERATORS))
    return st.fixed_dictionaries(
        {"field": st.just(spec["name"]), "op": ops},
        optional={"value": typed_values(spec)},
    )


advertised_leaves = st.one_of([leaf_for(spec) for spec in DOC["fields"]])
wild_leaves = st.fixed_dictionaries(
    {},
    optional={
        "field": st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=12), json_scalars),
        "op": st.one_of(st.sampled_from(OPERATORS), st.text(max_size=6), json_scalars),
        "value": json_values,
        "extra": json_scalars,
    },
)
trees = st.recursive(
    st.one_of(advertised_leaves, wild_leaves, json_scalars),
    lambda inner: st.one_of(
        st.builds(lambda xs: {"and": xs}, st.lists(inner, max_size=4)),
        st.builds(lambda xs: {"or": xs}, st.lists(inner, max_size=4)),
        st.builds(lambda x: {"not": x}, inner),
        st.builds(lambda xs: {"and": xs, "or": xs}, st.lists(inner, max_size=2)),
    ),
    max_leaves=14,
)


def assert_search_answer(response: Any, body: Any) -> None:
    """200, or a 4xx problem+json with a known ``code`` and a ``field``."""
    if response.status_code == 200:
        assert isinstance(response.get_json()["results"], list)
        return
    assert 400 <= response.status_code < 500, (response.status_code, body, response.data[:300])
    assert response.mimetype == PROBLEM
    problem = response.get_json()
    assert problem["code"] in SEARCH_CODES, (body, problem)
    assert isinstance(problem.get("field"), str) and problem["field"], (body, problem)


@fuzz_settings(ci_examples=150)
@given(tree=trees, user=st.sampled_from(["alice", "bob"]))
def test_any_filter_tree_gets_200_or_a_4xx_with_code_and_field(
    corpus_stack: Stack, tree: Any, user: str
) -> None:
    body = {"query": "lighthouse harbour", "filter": tree}
    response = corpus_stack.search.post("/v1/search", json=body, auth=(user, PASSWORDS[user]))
    assert_search_answer(response, body)


def _conjunctions(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda xs: {"and": xs}, st.lists(inner, min_size=1, max_size=3))


@fuzz_settings(ci_examples=100)
@given(tree=st.recursive(advertised_leaves, _conjunctions, max_leaves=6))
def test_well_typed_trees_on_advertised_fields(corpus_stack: Stack, tree: Any) -> None:
    """Trees that use only advertised fields still never make a 5xx; a 400 names the field."""
    body = {"query": "oyster", "filter": tree, "limit": 5}
    response = corpus_stack.search.post("/v1/search", json=body, auth=("alice", "alice-app-pw"))
    assert_search_answer(response, body)


search_params = st.fixed_dictionaries(
    {"query": st.one_of(st.text(max_size=40), json_scalars)},
    optional={
        "limit": json_scalars,
        "doc_types": st.one_of(
            st.lists(st.sampled_from(["note", "file", "deck_card", "news_item", "x"])),
            json_values,
        ),
        "modified_after": typed_values({"type": "date"}),
        "modified_before": typed_values({"type": "date"}),
        "path_prefixes": st.one_of(st.lists(path_text, max_size=3), json_values),
        "tags": st.one_of(st.lists(st.text(max_size=8), max_size=3), json_values),
        "category": json_scalars,
        "mime_types": st.one_of(st.lists(st.text(max_size=12), max_size=3), json_values),
        "fusion": st.one_of(st.sampled_from(["rrf", "dbsf"]), json_scalars),
        "score_threshold": json_scalars,
        "filter": trees,
    },
)


@fuzz_settings(ci_examples=100)
@given(body=search_params)
def test_any_search_body_gets_200_or_a_4xx(corpus_stack: Stack, body: Any) -> None:
    response = corpus_stack.search.post("/v1/search", json=body, auth=("bob", PASSWORDS["bob"]))
    assert_search_answer(response, body)


# --- schemathesis against /openapi.json -------------------------------------------------------


@pytest.fixture(scope="module")
def case_strategy(corpus_stack: Stack) -> st.SearchStrategy[Any]:
    """schemathesis cases (valid and invalid data) for every operation of the search API's
    ``/openapi.json``, loaded from the app in-process. (Its pytest plugin's ``from_fixture``
    does not run on pytest 9, so the strategies are drawn by a plain hypothesis test.)"""
    schema = schemathesis.openapi.from_wsgi("/openapi.json", corpus_stack.search_app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/v1/search", "/v1/filters", "/rcp/{method}"}
    return st.one_of(
        [
            op.as_strategy(generation_mode=mode)
            for op in operations
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
        ]
    )


@fuzz_settings(ci_examples=80)
@given(data=st.data())
def test_openapi_no_5xx_and_every_rejection_has_a_code(
    case_strategy: st.SearchStrategy[Any], data: st.DataObject
) -> None:
    """Every generated request (as alice): never a 5xx; a 4xx is problem+json with a code
    (JSON-RPC errors on ``/rcp/…`` carry an integer ``error.code`` instead)."""
    case = data.draw(case_strategy)
    # schemathesis leaves a "?" in a path parameter unescaped: no client can send that in a
    # path (werkzeug's test client raises), so such a case is not a request at all
    assume("?" not in case.formatted_path)
    headers = dict(case.headers or {}) | {"Authorization": _basic("alice")}
    response = case.call(headers=headers)
    case.validate_response(response, checks=[not_a_server_error])
    if 400 <= response.status_code < 500:
        what = (case.method, case.formatted_path, case.body, response.text[:300])
        body = response.json()
        if case.path.startswith("/rcp/") and "error" in body:
            assert isinstance(body["error"].get("code"), int), what
        else:  # also /rcp/<a method name the router cannot match, e.g. with a newline>
            assert _content_type(response).startswith(PROBLEM), what
            assert response.json()["code"], what


def _spec_valid(schema: dict[str, Any], value: Any) -> bool:
    """``value`` valid by ``schema``. jsonschema matches ``pattern`` with Python's
    ``re.search``, whose ``$`` also matches before a final newline (ECMA-262's does not):
    callers draw no value ending in one."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema).is_valid(value)


@fuzz_settings(ci_examples=200)
@given(
    value=st.one_of(
        st.builds(lambda d, sep: d.isoformat(sep=sep), st.datetimes(), st.sampled_from("Tt ")),
        st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()),
        st.text(alphabet="0123456789-:TtZz .,+W", max_size=30),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
    )
)
def test_openapi_times_are_the_ones_the_server_takes(value: Any) -> None:
    """``modified_after``/``modified_before`` of ``SearchRequest`` in ``/openapi.json`` take
    what the server takes (:func:`ncindex.search.filters.request_tree`): nothing the document
    refuses is taken, and what it takes is refused only for a date that does not exist."""
    from datetime import datetime

    from ncindex.errors import FilterError
    from ncindex.search.filters import request_tree
    from search_api.openapi import openapi_document

    schema = openapi_document()["components"]["schemas"]["SearchRequest"]
    for name in ("modified_after", "modified_before"):
        try:
            request_tree(**{name: value})
            taken = True
        except FilterError as exc:
            assert exc.field == name
            taken = False
        valid = _spec_valid(schema["properties"][name], value)
        assert valid or not taken, (name, value)
        if valid and not taken:  # the pattern's digits name no day or time (2026-13-01)
            with pytest.raises(ValueError):
                datetime.fromisoformat(value.upper())


@fuzz_settings(ci_examples=200)
@given(value=st.text(max_size=12).filter(lambda v: not v.endswith("\n")))
def test_openapi_doc_ids_and_rcp_methods_are_the_ones_the_server_takes(value: str) -> None:
    """The context endpoint's ``doc_id`` and ``/rcp/{method}`` in ``/openapi.json`` are
    valid exactly when the server takes them: ``checked_doc_id`` refuses none of the first,
    and the router sends the second to the RCP server (no 404 or redirect)."""
    from urllib.parse import quote

    from flask import Flask

    from ncindex.errors import InputError
    from ncindex.search.rcp import HttpAnswer
    from ncindex.search.service import checked_doc_id
    from search_api.openapi import openapi_document
    from search_api.rcp import rcp_blueprint

    paths = openapi_document()["paths"]
    context = paths["/v1/documents/{doc_type}/{doc_id}/context"]["get"]["parameters"]
    try:
        checked_doc_id(value, "doc_id")
        taken = True
    except InputError:
        taken = False
    doc_id = next(p["schema"] for p in context if p["name"] == "doc_id")
    assert _spec_valid(doc_id, value) is taken, value

    class Answering:
        def handle_http(self, *_: Any) -> HttpAnswer:
            return HttpAnswer(204, None)

    app = Flask(__name__)
    app.register_blueprint(rcp_blueprint(Answering()))  # type: ignore[arg-type]
    status = app.test_client().post(f"/rcp/{quote(value, safe='/')}", data=b"{}").status_code
    method = paths["/rcp/{method}"]["post"]["parameters"][0]["schema"]
    assert _spec_valid(method, value) is (status == 204), (value, status)


def _content_type(response: Any) -> str:
    """The Content-Type of a schemathesis response (header names and values vary in shape)."""
    for name, value in response.headers.items():
        if name.lower() == "content-type":
            return value[0] if isinstance(value, list) else str(value)
    return ""


def _basic(user: str) -> str:
    import base64

    token = base64.b64encode(f"{user}:{PASSWORDS[user]}".encode()).decode()
    return f"Basic {token}"


# --- RCP/1 over HTTP and the context endpoint -------------------------------------------------

RCP_METHODS = ["initialize", "retrieve", "info", "ping", "shutdown", "notifications/x", "nope"]
rpc_params = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "query": st.one_of(st.text(max_size=30), json_scalars),
            "k": json_scalars,
            "mode": st.one_of(st.sampled_from(["hybrid", "dense", "sparse", "x"]), json_scalars),
            "filter": trees,
            "fusion": json_scalars,
            "minScore": json_scalars,
            "includeText": json_scalars,
            "nonce": json_scalars,
        },
    ),
)
rpc_messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.one_of(st.just("2.0"), json_scalars),
        "id": st.one_of(st.integers(), st.text(max_size=5), json_values),
        "method": st.one_of(st.sampled_from(RCP_METHODS), json_scalars),
        "params": rpc_params,
    },
)


@fuzz_settings(ci_examples=100)
@given(
    path=st.sampled_from(RCP_METHODS),
    message=st.one_of(rpc_messages, st.lists(rpc_messages, max_size=3), json_values),
    initialize=st.booleans(),
)
def test_rcp_any_message_gets_a_json_rpc_answer_never_an_internal_error(
    corpus_stack: Stack, path: str, message: Any, initialize: bool
) -> None:
    client = corpus_stack.search
    auth = ("alice", PASSWORDS["alice"])
    if initialize:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
        assert client.post("/rcp/initialize", json=init, auth=auth).status_code == 200
    if isinstance(message, dict) and message.get("method") in RCP_METHODS:
        path = message["method"]
    response = client.post(f"/rcp/{path}", data=json.dumps(message), auth=auth)
    assert response.status_code in (200, 204, 400, 401, 413, 429), response.data[:300]
    if response.status_code == 204:
        return
    answer = response.get_json()
    for reply in answer if isinstance(answer, list) else [answer]:
        assert reply["jsonrpc"] == "2.0"
        if "error" in reply:
            assert isinstance(reply["error"]["code"], int)
            assert reply["error"]["code"] != -32603, (message, reply)  # a bug, caught
        else:
            assert "result" in reply, reply


@fuzz_settings(ci_examples=60)
@given(
    doc_type=st.one_of(st.sampled_from(["note", "file", "deck_card", "news_item"]), path_text),
    doc_id=path_text,
    args=st.dictionaries(st.sampled_from(["chunk_index", "window", "x"]), path_text, max_size=3),
)
def test_context_any_path_gets_200_or_a_4xx(
    corpus_stack: Stack, doc_type: str, doc_id: str, args: dict[str, str]
) -> None:
    from urllib.parse import quote, unquote

    def part(value: str) -> str:
        return quote(value, safe="", errors="surrogatepass")

    path = f"/v1/documents/{part(doc_type)}/{part(doc_id)}/context"
    query = "&".join(f"{part(k)}={part(v)}" for k, v in args.items())
    response = corpus_stack.search.get(
        f"{path}?{query}" if query else path, auth=("alice", PASSWORDS["alice"])
    )
    # 308: an empty segment ("//", also from an encoded "/") is merged by the router, redirected
    assert response.status_code in (200, 308, 400, 404, 405), (path, args, response.data[:300])
    if response.status_code == 308:
        assert "//" in unquote(path, errors="surrogatepass"), path
        return
    if response.status_code != 200:
        assert response.mimetype == PROBLEM and response.get_json()["code"]
