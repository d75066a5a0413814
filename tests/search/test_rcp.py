"""The RCP/1 server, driven by the RCP SDK's own client over real HTTP with the caller's
Nextcloud credentials in the ``Authorization`` header."""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime
from http.client import HTTPConnection
from types import SimpleNamespace
from typing import Any

import pytest
import rcp
import redis
from flask import Flask
from test_api import DIARY, LIGHT, SECRET

from ncindex.search.filter_fields import FIELD_TYPES, filters_document
from ncindex.search.links import open_link
from ncindex.search.rcp import MAX_BATCH, HttpAnswer, RcpServer, _rfc3339
from ncindex.web.problems import MAX_BODY_BYTES
from search_api import rcp as rcp_http
from search_api.rcp import rcp_blueprint
from search_support import PASSWORDS, Api, Served, serve


@pytest.fixture
def served(ro_served: Served) -> Served:
    """The search API over real HTTP, one for the module (:func:`search_support.ro_served`,
    Redis emptied for each test: the RCP sessions): the tests that use it change neither the
    simulator, the store nor the settings; those that do take :func:`own_served`."""
    return ro_served


@pytest.fixture
def own_served(api: Api) -> Iterator[Served]:
    """A search API of the test's own over real HTTP (the package's ``served``)."""
    yield from serve(api)


def basic(user: str, password: str | None = None) -> str:
    token = base64.b64encode(f"{user}:{password or PASSWORDS[user]}".encode()).decode()
    return f"Basic {token}"


class AuthHttpTransport(rcp.HttpTransport):
    """The SDK's HTTP transport plus an ``Authorization`` (and optional ``RCP-Session``)
    header — the SDK's own sends no headers of its own. Same status mapping as the SDK."""

    def __init__(self, base_url: str, authorization: str | None, session: str | None = None):
        super().__init__(base_url)
        self.authorization = authorization
        self.session = session
        self.last_status = 0

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        url = urllib.parse.urlsplit(f"{self._base}/{request.get('method', '')}")
        body = json.dumps(request, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        if self.authorization:
            headers["Authorization"] = self.authorization
        if self.session:
            headers["RCP-Session"] = self.session
        conn = HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=30)
        try:
            conn.request("POST", url.path, body=body, headers=headers)
            response = conn.getresponse()
            status, data = response.status, response.read()
        finally:
            conn.close()
        self.last_status = status
        if status == 429:
            raise rcp.RcpError(rcp.Errc.RATE_LIMITED, "HTTP 429")
        if status == 503:
            raise rcp.RcpError(rcp.Errc.BACKEND_UNAVAILABLE, "HTTP 503")
        if (status < 200 or status >= 300) and not data.strip():
            raise rcp.RcpError(rcp.Errc.BACKEND_UNAVAILABLE, f"HTTP {status}")
        return json.loads(data) if data.strip() else {}


class Client(rcp.Client):
    """``rcp.Client`` connected over :class:`AuthHttpTransport`."""

    def connect_with(self, transport: AuthHttpTransport) -> Client:
        self._transport = transport
        self._handshake()
        return self


def connect(served: Served, user: str) -> Client:
    return Client().connect_with(AuthHttpTransport(f"{served.url}/rcp", basic(user)))


def raw(served: Served, user: str | None, method: str, params: Any = None, **extra: Any) -> Any:
    transport = AuthHttpTransport(f"{served.url}/rcp", basic(user) if user else None)
    message = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params or {}, **extra}
    return transport.call(message)


def error_of(reply: dict[str, Any]) -> tuple[int, Any]:
    return reply["error"]["code"], reply["error"].get("data")


def test_open_methods_need_no_credentials(served: Served) -> None:
    info = raw(served, None, "info")["result"]
    assert info["server"]["name"] == "ncindex" and info["protocolVersion"] == 1
    assert raw(served, None, "ping", {"nonce": "n-1"})["result"] == {"nonce": "n-1"}
    assert raw(served, None, "ping")["result"] == {}
    assert raw(served, None, "shutdown")["result"] == {}


def test_initialize_advertises_retrieve_and_the_filter_table(served: Served) -> None:
    client = connect(served, "alice")
    caps = client.capabilities
    assert client.supports(rcp.Capability.Retrieve) and client.supports(rcp.Capability.Filter)
    assert caps["retrieve"]["maxK"] == 100
    assert caps["retrieve"]["modes"] == ["dense", "sparse", "hybrid"]
    # spec §6.2: core enum values are reserved (§6.1/§7.7 list rrf, weighted, convex); DBSF is
    # a vendor method, under x-ncindex (it sat in retrieve.fusion, outside the schema's enum)
    assert caps["retrieve"]["fusion"] == ["rrf"]
    assert caps["retrieve"]["x-ncindex"] == {"fusion": ["dbsf"]}
    assert client.search("lighthouse", 1, {"fusion": {"method": "dbsf"}})["hits"]
    assert caps["filter"]["fields"] == dict(FIELD_TYPES)
    advertised = caps["filter"]["x-ncindex"]["fieldOperators"]
    assert advertised == {f["name"]: f["operators"] for f in filters_document()["fields"]}
    assert caps["filter"]["operators"] == filters_document()["operators"]
    assert "acl" not in caps["filter"]["fields"]
    client.shutdown()


def test_retrieve_is_the_verified_search(own_served: Served) -> None:
    served = own_served  # unshares a folder
    keys = served.api.keys
    alice = connect(served, "alice")
    hits = alice.retrieve("lighthouse lens foghorn", k=20)
    ids = {h["id"] for h in hits}
    assert ids == {keys[LIGHT], keys[DIARY], keys["/Projects/Lighthouse-old/plan.md"],
                   keys["/Projects/budget.txt"], keys["/Notes/Work/Foghorn.md"]}  # fmt: skip
    top = hits[0]
    assert top["text"] and top["chunk"]["docId"] == top["id"]
    doc_type, doc_id = top["id"].split(":")
    route = {"file": "f", "note": "apps/notes/note"}[doc_type]
    assert top["citation"]["uri"].endswith(f"/index.php/{route}/{doc_id}")
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)

    found = alice.search(
        "lighthouse",
        k=5,
        opts={"filter": {"field": "path_prefix", "op": "eq", "value": "/Projects/Lighthouse"}},
    )
    assert [h["id"] for h in found["hits"]] == [keys[LIGHT]]
    assert found["usage"]["candidates"] >= 1

    # bob sees the share and his own, never alice's private diary — under any mode
    bob = connect(served, "bob")
    for mode in ("hybrid", "dense", "sparse"):
        bob_ids = {h["id"] for h in bob.search("lighthouse diary lens", 50, {"mode": mode})["hits"]}
        assert keys[DIARY] not in bob_ids and keys[SECRET] in bob_ids
    # the drop path: unshared documents disappear from RCP answers too
    served.api.sim.unshare("alice", "/Projects/Lighthouse", "bob")
    assert keys[LIGHT] not in {h["id"] for h in bob.retrieve("lighthouse lens", 20)}
    alice.shutdown()
    bob.shutdown()


def test_a_card_hit_names_its_board_and_stack_in_meta(own_served: Served) -> None:
    """``POST /v1/search`` and MCP name a Deck card's board and stack; an RCP hit did not.
    RCP/1 gives a hit a free-form ``meta`` object (spec §7.7, "Hit": ``"meta"?: object``),
    which holds the search result's other fields; the titles are there now, as the search's
    check read them (a board renamed since the card was indexed shows its name now), null
    for a file. So is ``snippet_title_chars``, the snippet's first characters that are the
    card's title (0 for a file)."""
    api = own_served.api
    key = api.index_card("alice", "Harbour", "To do", ("Tar the ketch", "Tar the hull."))
    api.rename_board(key, "Harbour works")
    alice = connect(own_served, "alice")
    hits = {h["id"]: h for h in alice.retrieve("tar the ketch hull lighthouse", k=20)}
    meta = hits[key]["meta"]
    assert (meta["board_title"], meta["stack_title"]) == ("Harbour works", "To do")
    file = hits[api.keys[LIGHT]]["meta"]
    assert (file["board_title"], file["stack_title"]) == (None, None)
    assert (meta["snippet_title_chars"], file["snippet_title_chars"]) == (13, 0)
    assert meta["snippet"].startswith("<mark>Tar</mark> the <mark>ketch</mark>\n")
    alice.shutdown()


@pytest.mark.parametrize(
    ("params", "code", "data"),
    [
        (
            {"filter": {"field": "acl", "op": "eq", "value": "user:bob"}},
            -32602,
            {"field": "filter.field", "code": "unknown_field"},
        ),
        (
            {
                "filter": {
                    "and": [
                        {"field": "doc_type", "op": "eq", "value": "note"},
                        {"field": "nope", "op": "eq", "value": 1},
                    ]
                }
            },
            -32602,
            {"field": "filter.and[1].field", "code": "unknown_field"},
        ),
        (
            {"filter": {"field": "size", "op": "regex", "value": "x"}},
            -32005,
            {"field": "filter.op", "option": "regex"},
        ),
        (
            {"filter": {"field": "size", "op": "gt", "value": "big"}},
            -32602,
            {"field": "filter.value"},
        ),
        (
            {"filter": {"field": "doc_type", "op": "gt", "value": "note"}},
            -32602,
            {"field": "filter.op"},
        ),
        ({"filter": {"and": []}}, -32602, {"field": "filter.and"}),
        (  # §4.6: a time is RFC 3339 or epoch ms; Unix seconds were read
            {"filter": {"field": "modified_at", "op": "gte", "value": 1767225600}},
            -32602,
            {"field": "filter.value", "code": "invalid_value"},
        ),
        ({"filter": [1]}, -32602, {"field": "filter"}),
        ({"k": 0}, -32602, {"field": "k"}),
        ({"k": "10"}, -32602, {"field": "k"}),
        ({"k": 5, "candidateK": 2}, -32602, {"field": "candidateK"}),
        ({"k": 2.5}, -32602, {"field": "k"}),
        ({"k": 5.0, "candidateK": 2.0}, -32602, {"field": "candidateK"}),
        ({"query": 5}, -32602, {"field": "query"}),
        ({"query": ""}, -32602, {"field": "query"}),
        ({"query": " \t "}, -32602, {"field": "query"}),
        (
            {"query": {"type": "image", "mimeType": "image/png", "data": "AA=="}},
            -32005,
            {"option": "image"},
        ),
        (
            {"query": {"type": "text", "text": "x", "uri": "https://example.org/q.txt"}},
            -32602,
            {"field": "query.uri"},
        ),
        (
            {"query": [{"type": "text", "text": "x", "uri": "file:///etc/hosts"}]},
            -32602,
            {"field": "query[0].uri"},
        ),
        ({"mode": "colbert"}, -32005, {"field": "mode", "option": "colbert"}),
        ({"fusion": {"method": "weighted"}}, -32005, {"option": "weighted"}),
        ({"rerank": {"method": "cross-encoder"}}, -32005, {"option": "rerank"}),
        # §7.7.2: an unadvertised unit, and tokenBudget, follow the strict rule (were ignored)
        ({"unit": "document"}, -32005, {"field": "unit", "option": "document"}),
        ({"unit": 3}, -32602, {"field": "unit"}),
        ({"tokenBudget": 500}, -32005, {"option": "tokenBudget"}),
        ({"tokenBudget": 0}, -32602, {"field": "tokenBudget"}),
        # §3.3/§7.7: candidateK >= rerank.topN >= k, whether or not rerank is offered (-32005)
        ({"k": 5, "rerank": {"topN": 2}}, -32602, {"field": "rerank.topN"}),
        ({"k": 5, "candidateK": 10, "rerank": {"topN": 20}}, -32602, {"field": "candidateK"}),
        ({"rerank": {"topN": "10"}}, -32602, {"field": "rerank.topN"}),
        ({"minScore": "high"}, -32602, {"field": "minScore"}),
        ({"includeText": "yes"}, -32602, {"field": "includeText"}),
        ({"_meta": {"explain": "yes"}}, -32602, {"field": "_meta.explain"}),
        ({"_meta": [1]}, -32602, {"field": "_meta"}),
    ],
)
def test_bad_retrieve_params(
    served: Served, params: dict[str, Any], code: int, data: dict[str, Any]
) -> None:
    client = connect(served, "carol")
    with pytest.raises(rcp.RcpError) as caught:
        client.call("retrieve", {"query": "lighthouse", **params})
    assert caught.value.code == code, caught.value
    assert data.items() <= (caught.value.data or {}).items(), caught.value.data


def test_malformed_params_are_named(served: Served) -> None:
    """``params`` that is no object is -32602 with ``data.field`` ``params``, as every other
    -32602 names its field; a query's message is the validator's own, without pydantic's
    "Value error, " prefix (as in the search API's problems)."""
    client = connect(served, "carol")
    assert error_of(raw(served, "carol", "retrieve", ["lighthouse"])) == (
        -32602,
        {"field": "params"},
    )
    with pytest.raises(rcp.RcpError) as caught:
        client.call("retrieve", {"query": " \t "})
    assert caught.value.data == {"field": "query"}
    assert str(caught.value.message) == "query: must contain a printable non-space character"


def test_params_must_be_an_object_for_every_method(served: Served) -> None:
    """Spec §4.1: ``params`` MUST be an object. ``info``, ``ping``, ``initialize`` and
    ``shutdown`` answered any other value as if it were ``{}`` (only ``retrieve`` refused it);
    now each is -32602 naming ``params`` and does nothing (no session started or ended).
    Absent or ``null`` params are ``{}`` (§4.6: ``null`` is read as absent)."""
    for method in ("info", "ping", "shutdown", "initialize"):
        for params in ([1], "x", 5, True):
            assert error_of(raw(served, "carol", method, params)) == (
                -32602,
                {"field": "params"},
            ), (method, params)
    assert error_of(raw(served, "carol", "retrieve", {"query": "x"}))[0] == -32001  # none began
    client = connect(served, "carol")
    assert error_of(raw(served, "carol", "shutdown", ["now"]))[0] == -32602
    assert client.retrieve("lighthouse") == []  # the session was not ended

    def null_params(method: str) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": None}
        return post_raw(served, json.dumps(body).encode(), method, user="carol")[1]

    assert null_params("info")["result"]["server"]["name"] == "ncindex"
    assert null_params("ping")["result"] == {}
    # a retrieve whose params are null has no query (it was refused for its params)
    assert error_of(null_params("retrieve")) == (-32602, {"field": "query"})
    assert null_params("shutdown")["result"] == {}


def test_ping_nonce_and_protocol_version_are_typed(served: Served) -> None:
    """Spec §7.15: ``ping`` echoes its ``nonce``, a string or a number (the schema's
    PingParams); an object, array or boolean was echoed, now -32602 naming ``nonce``, and a
    ``null`` one, absent by §4.6, is not echoed back as ``null``. §7.1: ``protocolVersion`` is
    an integer; ``"abc"``, ``"1"``, ``true`` and ``1.5`` were read as version 1 (the SDK's
    ``negotiate_version``) and started a session; now -32602 naming it, and none starts."""
    for nonce in (0, "n", 2.5):
        assert raw(served, None, "ping", {"nonce": nonce})["result"] == {"nonce": nonce}
    assert raw(served, None, "ping", {"nonce": None})["result"] == {}
    for nonce in ({"a": 1}, [1], True):
        assert error_of(raw(served, None, "ping", {"nonce": nonce})) == (
            -32602,
            {"field": "nonce"},
        ), nonce
    for version in ("abc", "1", True, 1.5, [1], {"v": 1}):
        assert error_of(raw(served, "carol", "initialize", {"protocolVersion": version})) == (
            -32602,
            {"field": "protocolVersion"},
        ), version
    assert error_of(raw(served, "carol", "retrieve", {"query": "x"}))[0] == -32001
    assert (
        raw(served, "carol", "initialize", {"protocolVersion": 1.0})["result"]["protocolVersion"]
        == 1
    )
    raw(served, "carol", "shutdown")
    assert (
        raw(served, "carol", "initialize", {"protocolVersion": None})["result"]["protocolVersion"]
        == 1
    )


def test_initialize_client_and_capabilities_are_typed(served: Served) -> None:
    """Spec §7.1 and the schema's InitializeParams: ``client`` is a PeerInfo (an object, its
    ``name`` and ``version`` strings) and ``capabilities`` an object. Any value was accepted
    and started a session; now a wrong type is -32602 naming the field, and none starts.
    ``null`` is absent (§4.6); unknown keys of either are tolerated (§4.6, §6.2)."""
    wrong = [
        ({"client": "cli"}, "client"),
        ({"client": ["cli"]}, "client"),
        ({"client": 5}, "client"),
        ({"client": True}, "client"),
        ({"client": {"name": 5}}, "client.name"),
        ({"client": {"name": "cli", "version": 1.0}}, "client.version"),
        ({"capabilities": "streaming"}, "capabilities"),
        ({"capabilities": ["streaming"]}, "capabilities"),
        ({"capabilities": 0}, "capabilities"),
        ({"capabilities": False}, "capabilities"),
    ]
    for params, field_ in wrong:
        answer = raw(served, "carol", "initialize", {"protocolVersion": 1, **params})
        assert error_of(answer) == (-32602, {"field": field_}), params
        assert field_ in answer["error"]["message"]
    assert error_of(raw(served, "carol", "retrieve", {"query": "x"}))[0] == -32001  # none began
    fine = {
        "protocolVersion": 1,
        "client": {"name": "cli", "version": "1.0", "x-extra": [1]},
        "capabilities": {"streaming": {}, "x-vendor": True},
    }
    assert raw(served, "carol", "initialize", fine)["result"]["protocolVersion"] == 1
    raw(served, "carol", "shutdown")
    nulls = {"protocolVersion": 1, "client": None, "capabilities": None}
    assert raw(served, "carol", "initialize", nulls)["result"]["protocolVersion"] == 1
    raw(served, "carol", "shutdown")


def test_lenient_options_and_clamping(served: Served) -> None:
    client = connect(served, "alice")
    result = client.call(
        "retrieve",
        {
            "query": "lighthouse",
            "k": 500,
            "strict": False,
            "rerank": {"method": "llm"},
            "minScore": 0.0,
        },
    )
    assert len(result["hits"]) <= 100
    assert any("clamped" in n for n in result["usage"]["notes"])
    assert any("rerank" in n for n in result["usage"]["notes"])
    # an unknown param is tolerated (spec §14.1.7), and named, so a misspelling is noticed
    misspelt = client.call("retrieve", {"query": "lighthouse", "minscore": 0.9})
    assert misspelt["hits"]
    assert "unknown parameter 'minscore' ignored" in misspelt["usage"]["notes"]
    no_text = client.call("retrieve", {"query": "lighthouse", "includeText": False})
    assert no_text["hits"] and all("text" not in h for h in no_text["hits"])


def test_unoffered_spec_params_are_named_as_such(served: Served) -> None:
    """With ``strict: false`` an unadvertised ``unit`` and ``tokenBudget`` are dropped and
    noted like ``rerank`` (§7.7.2); ``chunk``/``passage`` are served (§6.1: no ``units``
    advertised means those). ``seed`` (§7.7.1: MUST be ignored, SHOULD be noted),
    ``indexVersion``, ``sessionId``, ``level`` and ``includeVectors`` are spec params, never
    refused: noted as not supported, where the notes called them unknown."""
    client = connect(served, "alice")
    lenient = client.call(
        "retrieve",
        {"query": "lighthouse", "strict": False, "unit": "document", "tokenBudget": 100},
    )
    assert lenient["hits"]
    assert lenient["usage"]["notes"] == [
        "unit 'document' is not supported; ignored",
        "'tokenBudget' is not supported; ignored",
    ]
    for unit in ("chunk", "passage"):
        assert "notes" not in client.call("retrieve", {"query": "x", "unit": unit})["usage"]
    unread = {"seed": 7, "indexVersion": "v1", "sessionId": "s", "level": 1}
    answered = client.call("retrieve", {"query": "lighthouse", "includeVectors": True, **unread})
    assert answered["usage"]["notes"] == [
        f"'{name}' is not supported; ignored"
        for name in ("includeVectors", "indexVersion", "level", "seed", "sessionId")
    ]
    assert all("vector" not in h for h in answered["hits"])
    quiet = client.call("retrieve", {"query": "x", "includeVectors": False})
    assert "notes" not in quiet["usage"]
    client.shutdown()


def test_unknown_keys_of_fusion_and_query_blocks_are_ignored_and_noted(served: Served) -> None:
    """Spec §4.6: unknown fields in any object are ignored, never rejected; ncindex names
    them in ``usage.notes`` as it does unknown params and filter keys. A key of ``fusion``
    other than ``weights``/``rrfK``, and any key of a query's Content block, was dropped
    without a word; ``fusion.alpha`` (the spec's, for ``convex``) joins ``weights``/``rrfK``."""
    client = connect(served, "alice")
    plain = client.call("retrieve", {"query": "lighthouse lens", "k": 3, "fusion": "rrf"})
    noted = client.call(
        "retrieve",
        {
            "query": [
                {"type": "text", "text": "lighthouse", "lang": "en"},
                {"type": "text", "text": "lens", "mimeType": "text/plain", "x-hint": 1},
            ],
            "k": 3,
            "fusion": {"method": "rrf", "x-ncindex-k": 5, "alpha": 0.3},
        },
    )
    assert [h["id"] for h in noted["hits"]] == [h["id"] for h in plain["hits"]]
    assert noted["usage"]["notes"] == [
        "unknown parameter 'query[0].lang' ignored",
        "'query[1].mimeType' is not read for a text block; ignored",
        "unknown parameter 'query[1].x-hint' ignored",
        "unknown parameter 'fusion.x-ncindex-k' ignored",
        "fusion weights/rrfK/alpha are fixed by the server (RRF k=10); ignored",
    ]
    one = client.call("retrieve", {"query": {"type": "text", "text": "lens", "x": 1}, "k": 1})
    assert one["usage"]["notes"] == ["unknown parameter 'query.x' ignored"]
    client.shutdown()


def test_a_null_param_is_absent(served: Served) -> None:
    """Spec §4.6: a ``null`` where the schema lists no ``null`` MUST be treated as absent.
    ``k``, ``mode``, ``strict``, ``includeText`` and ``_meta.explain`` were -32602 when
    ``null``, ``modality: null`` -32005 (option ``'None'``); each now takes its default, and the
    keys of ``fusion`` and of a query block likewise."""
    client = connect(served, "alice")
    plain = client.call("retrieve", {"query": "lighthouse", "fusion": {"method": "rrf"}})
    nulls = {
        "k": None,
        "candidateK": None,
        "mode": None,
        "modality": None,
        "strict": None,
        "includeText": None,
        "minScore": None,
        "filter": None,
        "rerank": None,
        "fusion": {"method": "rrf", "weights": None, "rrfK": None},
        "_meta": {"explain": None},
    }
    answered = client.call(
        "retrieve", {"query": {"type": "text", "text": "lighthouse", "mimeType": None}, **nulls}
    )
    assert [h["id"] for h in answered["hits"]] == [h["id"] for h in plain["hits"]]
    assert all(h["text"] for h in answered["hits"]) and "explain" not in answered["_meta"]
    assert "notes" not in answered["usage"]
    client.shutdown()


def test_unknown_keys_of_filter_nodes_are_ignored_and_noted_unlike_rest(served: Served) -> None:
    """A filter node's key the tree does not define (a misspelt ``valu``, a key beside ``and``)
    is ignored and named in ``usage.notes``, as spec §4.6 requires of unknown fields in any
    object; it was -32602 ``invalid_filter``. The filter still holds as written without the
    key, and an unknown field *name* is still refused (§4.6's one exception, §8).
    ``POST /v1/search`` stays strict: 400 ``invalid_filter`` naming the key."""
    client = connect(served, "alice")
    leaf = {"field": "path_prefix", "op": "eq", "value": "/Projects/Lighthouse"}
    plain = client.call("retrieve", {"query": "lighthouse", "k": 5, "filter": leaf})
    tolerant = client.call(
        "retrieve",
        {"query": "lighthouse", "k": 5, "filter": {"and": [{**leaf, "valu": 1}], "x-hint": 2}},
    )
    assert [h["id"] for h in tolerant["hits"]] == [h["id"] for h in plain["hits"]]
    assert [h["id"] for h in plain["hits"]] == [served.api.keys[LIGHT]]
    assert tolerant["usage"]["notes"] == [
        "unknown filter key 'filter.x-hint' ignored",
        "unknown filter key 'filter.and[0].valu' ignored",
    ]
    assert "notes" not in plain["usage"]
    with pytest.raises(rcp.RcpError) as caught:
        client.call("retrieve", {"query": "x", "filter": {**leaf, "field": "nope", "valu": 1}})
    assert caught.value.code == -32602
    assert caught.value.data["code"] == "unknown_field"
    assert caught.value.data["field"] == "filter.field"
    client.shutdown()
    rest = served.api.client.post(
        "/v1/search",
        json={"query": "lighthouse", "filter": {**leaf, "valu": 1}},
        auth=("alice", PASSWORDS["alice"]),
    )
    assert rest.status_code == 400
    assert (rest.get_json()["code"], rest.get_json()["field"]) == ("invalid_filter", "filter.valu")


def test_times_are_rfc_3339_in_filters_and_hits(served: Served) -> None:
    """Spec §4.6: a point in time is an RFC 3339 string or integer epoch milliseconds, the
    server declaring which it accepts. RCP read a filter's number as Unix seconds and gave
    ``meta.modified_at`` in Unix seconds; both are RFC 3339 now (declared in the filter
    capability), so a hit's time can be written back into a filter."""
    client = connect(served, "alice")
    assert client.capabilities["filter"]["x-ncindex"]["dateEncoding"] == (
        "RFC 3339 string (naive means UTC)"
    )
    top = client.call("retrieve", {"query": "lighthouse lens", "k": 1})["hits"][0]
    rest = served.api.client.post(
        "/v1/search",
        json={"query": "lighthouse lens", "limit": 1},
        auth=("alice", PASSWORDS["alice"]),
    ).get_json()["results"][0]
    when = datetime.fromtimestamp(rest["modified_at"], UTC)
    assert top["meta"]["modified_at"] == when.strftime("%Y-%m-%dT%H:%M:%SZ")
    since = {"field": "modified_at", "op": "gte", "value": top["meta"]["modified_at"]}
    after = {**since, "op": "gt"}
    for tree, kept in ((since, True), (after, False)):
        hits = client.retrieve("lighthouse lens", 20, {"filter": tree})
        assert (top["id"] in {h["id"] for h in hits}) is kept, tree
    client.shutdown()
    # Nextcloud keeps any mtime (MtimeSanitizer); past year 9999 no RFC 3339 string holds it
    assert _rfc3339(253402300799) == "9999-12-31T23:59:59Z" and _rfc3339(253402300800) is None


def test_counts_may_be_written_as_whole_floats(served: Served) -> None:
    """``k: 2.0`` is the integer 2, as JSON counts numbers and as ``limit: 2.0`` is to
    ``POST /v1/search`` and MCP's ``search``; RCP alone answered -32602 "'k' MUST be an
    integer"."""
    client = connect(served, "alice")
    whole = client.call("retrieve", {"query": "lighthouse", "k": 2})
    written = client.call("retrieve", {"query": "lighthouse", "k": 2.0, "candidateK": 5.0})
    assert len(whole["hits"]) == 2
    assert [h["id"] for h in written["hits"]] == [h["id"] for h in whole["hits"]]
    client.shutdown()


def test_k_defaults_to_the_search_default_limit(own_served: Served) -> None:
    """Without ``k``, ``retrieve`` answers ``NCINDEX_SEARCH_DEFAULT_LIMIT`` hits, as
    ``POST /v1/search`` without ``limit`` does; it answered 10 whatever the setting."""
    served = own_served  # changes a setting
    served.api.settings.search_default_limit = 2
    client = connect(served, "alice")
    hits = client.call("retrieve", {"query": "lighthouse"})["hits"]
    rest = served.api.client.post(
        "/v1/search", json={"query": "lighthouse"}, auth=("alice", PASSWORDS["alice"])
    )
    assert len(hits) == len(rest.get_json()["results"]) == 2
    client.shutdown()


def test_explain_in_meta(served: Served) -> None:
    client = connect(served, "alice")
    plain = client.call("retrieve", {"query": "lighthouse lens"})
    assert "explain" not in plain["_meta"]
    result = client.call("retrieve", {"query": "lighthouse lens", "_meta": {"explain": True}})
    explained = result["_meta"]["explain"]
    assert [e["id"] for e in explained] == [h["id"] for h in result["hits"]]
    first = explained[0]
    assert first["fused_score"] == result["hits"][0]["score"]
    assert first["dense"]["rank"] >= 1 and first["sparse"]["rank"] >= 1
    assert {m["term"] for m in first["matched_terms"]} <= {"lighthous", "len"}
    # the feedback expansion's terms the chunk holds, never the query's own
    assert {f["term"] for f in first["feedback_terms"]}.isdisjoint({"lighthous", "len"})
    assert first["filters"] == {} and first["verified_at"] > 0


def test_gating_and_unknown_methods(served: Served) -> None:
    client = connect(served, "alice")
    with pytest.raises(rcp.RcpError) as caught:
        client.call("embed", {"inputs": ["x"]})
    assert caught.value.code == -32003
    with pytest.raises(rcp.RcpError) as caught:
        client.call("frobnicate", {})
    assert caught.value.code == -32004
    conn = HTTPConnection("127.0.0.1", int(served.url.rsplit(":", 1)[1]), timeout=10)
    body = b'{"jsonrpc":"2.0","id":1,"method":"retrieve","params":{"query":"x"}}'
    conn.request("POST", "/rcp/ping", body=body, headers={"Authorization": basic("alice")})
    reply = json.loads(conn.getresponse().read())
    conn.close()
    assert error_of(reply)[0] == -32600  # body method differs from the path
    client.shutdown()


def test_not_initialized_and_shutdown(served: Served) -> None:
    assert error_of(raw(served, "carol", "retrieve", {"query": "lighthouse"}))[0] == -32001
    client = connect(served, "carol")
    assert client.retrieve("lighthouse") == []  # carol has no documents
    client.shutdown()
    assert error_of(raw(served, "carol", "retrieve", {"query": "lighthouse"}))[0] == -32001
    # a reconnect from the same credential simply starts again
    again = connect(served, "carol")
    assert again.retrieve("lighthouse") == []


def test_a_shutdown_with_a_made_up_credential_is_refused_and_writes_nothing(
    served: Served,
) -> None:
    """``shutdown`` ended the sessions of whatever ``Authorization`` it was sent, unchecked,
    each leaving a tombstone key in Redis for an hour (the session's and the header-less
    one's), and a made-up credential is a caller of its own for the rate limiter: anyone could
    grow Redis at their request rate. Before: 20 such calls, each ``{}``, left 40 keys; now
    each is -32012 (HTTP 401, so counted as a refused login) and leaves none. Without
    ``Authorization`` it ends nothing and is ``{}`` (spec §13: callable at any time; the public
    conformance checker sends it so), and a confirmed caller's ``shutdown`` ends its session."""
    store = redis.Redis.from_url(served.api.settings.redis_url)
    shutdown = {"jsonrpc": "2.0", "id": 1, "method": "shutdown", "params": {}}
    try:
        answers = []
        for n in range(20):
            made_up = basic(f"nobody-{n}", "guessed") if n % 2 else f"Bearer made-up-{n}"
            transport = AuthHttpTransport(f"{served.url}/rcp", made_up, f"session-{n:04}")
            code = transport.call(shutdown).get("error", {}).get("code")  # was none: {}
            answers.append((transport.last_status, code))
        assert len(store.keys("*:rcp:s:*")) == 0  # was 40
        assert answers == [(401, -32012)] * 20
        assert raw(served, None, "shutdown")["result"] == {}
        assert store.keys("*:rcp:s:*") == []
        connect(served, "carol").shutdown()  # its token's session lives on, the implicit ended
        assert sorted(mark[:1] for mark in store.mget(store.keys("*:rcp:s:*"))) == [b"+", b"-"]
    finally:
        store.close()
    assert error_of(raw(served, "carol", "retrieve", {"query": "lighthouse"}))[0] == -32001


def test_unauthenticated(served: Served) -> None:
    for authorization in (None, basic("alice", "wrong"), "Token x"):
        transport = AuthHttpTransport(f"{served.url}/rcp", authorization)
        with pytest.raises(rcp.RcpError) as caught:
            Client().connect_with(transport)
        assert caught.value.code == -32012
        assert transport.last_status == 401


def test_refusals_name_the_field_at_fault(served: Served) -> None:
    """-32012 for missing or wrong credentials and -32002 for a protocol version in common
    with none came without ``data``: nothing said which part of the request was at fault
    (spec §12.1 ``data.field``), as REST's 401 names ``Authorization``."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    for authorization in (None, basic("alice", "wrong"), "Token x"):
        transport = AuthHttpTransport(f"{served.url}/rcp", authorization)
        reply = transport.call(init)
        assert transport.last_status == 401, reply
        assert error_of(reply) == (-32012, {"field": "Authorization"}), reply
    reply = raw(served, "alice", "initialize", {"protocolVersion": -5})
    assert error_of(reply) == (-32002, {"field": "protocolVersion"}), reply


def test_session_token(served: Served) -> None:
    first = raw(served, "bob", "initialize", {"protocolVersion": 1})["result"]
    token = first["_meta"]["session"]
    transport = AuthHttpTransport(f"{served.url}/rcp", basic("bob"), session=token)
    again = transport.call({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    assert error_of(again)[0] == -32600  # no re-negotiation within a session
    reply = transport.call(
        {"jsonrpc": "2.0", "id": "a", "method": "retrieve", "params": {"query": "garden"}}
    )
    assert reply["id"] == "a" and reply["result"]["hits"]
    stolen = AuthHttpTransport(f"{served.url}/rcp", basic("carol"), session=token)
    assert (
        error_of(
            stolen.call({"jsonrpc": "2.0", "id": 2, "method": "retrieve", "params": {"query": "x"}})
        )[0]
        == -32001
    )


def test_notifications_batches_and_parse_errors(served: Served) -> None:
    def post(body: bytes, method: str = "ping") -> tuple[int, bytes]:
        conn = HTTPConnection("127.0.0.1", int(served.url.rsplit(":", 1)[1]), timeout=10)
        conn.request("POST", f"/rcp/{method}", body=body, headers={"Authorization": basic("alice")})
        response = conn.getresponse()
        status, data = response.status, response.read()
        conn.close()
        return status, data

    assert post(b'{"jsonrpc":"2.0","method":"ping","params":{}}') == (204, b"")
    for body in (b"{not json", b""):  # an empty body is not JSON either
        status, data = post(body)
        assert status == 200 and json.loads(data)["error"]["code"] == -32700, body
    status, data = post(b"[]")
    assert json.loads(data)["error"]["code"] == -32600
    status, data = post(
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"ping"},5]'
    )
    replies = json.loads(data)
    assert status == 200 and len(replies) == 2
    assert replies[0] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert replies[1]["error"]["code"] == -32600
    status, data = post(b'{"jsonrpc":"2.0","id":null,"method":"ping"}')
    assert json.loads(data)["error"]["code"] == -32600
    status, data = post(
        b'{"jsonrpc":"2.0","id":3,"method":"notifications/cancel","params":{"id":1}}',
        "notifications/cancel",
    )
    assert json.loads(data)["error"]["code"] == -32600
    # JSON-RPC 2.0 §4: "jsonrpc" MUST be exactly "2.0"
    for version in (b'"jsonrpc":"1.0",', b'"jsonrpc":2.0,', b""):
        status, data = post(b"{" + version + b'"id":4,"method":"ping"}')
        assert status == 200 and json.loads(data)["error"]["code"] == -32600, version


def post_raw(
    served: Served, body: bytes, method: str = "ping", user: str = "alice"
) -> tuple[int, Any]:
    """POST ``body`` to ``/rcp/<method>`` as ``user``; the status and the parsed answer."""
    conn = HTTPConnection("127.0.0.1", int(served.url.rsplit(":", 1)[1]), timeout=30)
    try:
        conn.request("POST", f"/rcp/{method}", body=body, headers={"Authorization": basic(user)})
        response = conn.getresponse()
        status, data = response.status, response.read()
    finally:
        conn.close()
    return status, json.loads(data) if data.strip() else None


def test_a_malformed_message_names_the_member_at_fault(served: Served) -> None:
    """-32600 for a wrong ``jsonrpc``, ``method`` or ``id``, -32004 for an unknown method and
    -32003 for one not offered said which member was wrong in the message text alone, with no
    ``data``; -32602 names its parameter in ``data.field``, and so do these now."""
    init = {"protocolVersion": 1, "client": {"name": "t", "version": "1"}, "capabilities": {}}
    assert "result" in raw(served, "alice", "initialize", init)
    cases = [
        ("ping", b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', -32600, "jsonrpc"),
        ("ping", b'{"id": 1, "method": "ping"}', -32600, "jsonrpc"),
        ("ping", b'{"jsonrpc": "2.0", "id": 1}', -32600, "method"),
        ("ping", b'{"jsonrpc": "2.0", "id": 1, "method": 5}', -32600, "method"),
        ("ping", b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600, "id"),
        ("ping", b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}', -32600, "id"),
        ("ping", b'{"jsonrpc": "2.0", "id": 1, "method": "info"}', -32600, "method"),
        ("retrieve", b'{"jsonrpc": "2.0", "id": 1, "method": "search"}', -32600, "method"),
        ("nosuch", b'{"jsonrpc": "2.0", "id": 1, "method": "nosuch"}', -32004, "method"),
        ("rerank", b'{"jsonrpc": "2.0", "id": 1, "method": "rerank"}', -32003, "method"),
        (
            "notifications/cancel",
            b'{"jsonrpc": "2.0", "id": 1, "method": "notifications/cancel"}',
            -32600,
            "id",
        ),
    ]
    for method, body, code, field in cases:
        status, reply = post_raw(served, body, method)
        assert status == 200, body
        assert reply["error"]["code"] == code, (body, reply)
        assert reply["error"].get("data", {}).get("field") == field, (body, reply)
    status, replies = post_raw(served, b'[5, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]')
    assert replies[0]["error"]["data"] == {"field": "message"} and "result" in replies[1]


@pytest.mark.parametrize(
    ("method", "body"),
    [
        ("ping", b'{"jsonrpc": "2.0", "id": 1e309, "method": "ping"}'),
        ("info", b'{"jsonrpc": "2.0", "id": -1e309, "method": "info"}'),
        ("ping", b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"nonce": 1e309}}'),
        ("ping", b'[{"jsonrpc": "2.0", "id": 1e309, "method": "ping"}]'),
        (
            "retrieve",
            b'{"jsonrpc": "2.0", "id": 2, "method": "retrieve", "params": '
            b'{"query": "x", "minScore": 1e400}}',
        ),
    ],
    ids=["id-inf", "id-neg-inf", "nonce-inf", "batch-id-inf", "min-score-inf"],
)
def test_a_number_beyond_float_range_is_a_parse_error(
    served: Served, method: str, body: bytes
) -> None:
    """``1e309`` is valid JSON that Python reads as infinity; echoed back it made a 500."""
    status, reply = post_raw(served, body, method)
    assert status == 200 and reply["error"]["code"] == -32700, (status, reply)
    assert reply["id"] is None


def test_a_body_too_large_is_413_as_openapi_says(served: Served) -> None:
    """A body past ``MAX_BODY_BYTES`` is HTTP 413 with -32013, a status ``/openapi.json``
    did not list for ``/rcp/{method}``."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "a" * MAX_BODY_BYTES}}
    status, reply = post_raw(served, json.dumps(message).encode())
    assert (status, reply["error"]["code"]) == (413, -32013)
    # the body and the limit named (werkzeug's message said neither)
    assert reply["error"]["data"] == {"field": "body", "limit": MAX_BODY_BYTES}, reply
    assert str(MAX_BODY_BYTES) in reply["error"]["message"], reply
    documented = served.api.client.get("/openapi.json").get_json()["paths"]["/rcp/{method}"]
    assert "-32013" in documented["post"]["responses"]["413"]["description"]


@pytest.mark.parametrize(
    ("headers", "body", "field"),
    [
        ({"Content-Length": "abc"}, b"{}", "Content-Length"),
        ({"Transfer-Encoding": "chunked"}, b"zz\r\n{}\r\n0\r\n\r\n", "body"),
    ],
    ids=["content-length", "chunked-framing"],
)
def test_a_body_that_cannot_be_read_names_its_field(
    served: Served, headers: dict[str, str], body: bytes, field: str
) -> None:
    """A body the server cannot read whole (REST: 400 ``invalid_value`` with ``field``) was
    -32600 with no ``data``: the part at fault named nowhere, where -32013 names ``body``."""
    conn = HTTPConnection("127.0.0.1", int(served.url.rsplit(":", 1)[1]), timeout=30)
    try:
        conn.request(
            "POST", "/rcp/ping", body=body, headers={"Authorization": basic("alice"), **headers}
        )
        response = conn.getresponse()
        status, reply = response.status, json.loads(response.read())
    finally:
        conn.close()
    assert (status, reply["error"]["code"]) == (400, -32600), reply
    assert reply["error"]["data"] == {"field": field}, reply


def test_batches_are_capped(served: Served) -> None:
    """A batch counts once against the rate limit, so its size is bounded: a larger one is
    -32013 PayloadTooLarge (spec §12: "Request exceeds a server limit (… batch size …)"; §11
    allows -32602), where it was -32600, the code of a malformed request."""
    ping = {"jsonrpc": "2.0", "method": "ping"}
    full = [ping | {"id": i} for i in range(MAX_BATCH)]
    status, replies = post_raw(served, json.dumps(full).encode())
    assert status == 200 and [r["id"] for r in replies] == list(range(MAX_BATCH))
    status, reply = post_raw(served, json.dumps([*full, ping | {"id": "x"}]).encode())
    assert status == 200 and reply["id"] is None
    assert reply["error"]["code"] == -32013 and "batch too large" in reply["error"]["message"]
    assert reply["error"]["data"] == {"maxBatch": MAX_BATCH}
    retrieves = [
        {"jsonrpc": "2.0", "id": i, "method": "retrieve", "params": {"query": "lighthouse"}}
        for i in range(MAX_BATCH + 20)
    ]
    status, reply = post_raw(served, json.dumps(retrieves).encode(), "retrieve")
    assert status == 200 and reply["error"]["code"] == -32013  # not one search is run


def test_a_non_finite_number_in_a_reply_is_answered_as_a_finite_sentinel() -> None:
    """Spec §4.6: a server that would emit NaN or Infinity "MUST substitute a finite sentinel
    or omit the field"; the whole reply was -32603 instead (and before that a 500)."""
    hits = [{"id": "a", "score": float("nan")}, {"id": "b", "score": float("-inf")}]

    class InfiniteServer:
        def handle_http(self, *_: Any) -> HttpAnswer:
            result = {"hits": hits, "_meta": {"x": (1.5, float("inf"))}}
            return HttpAnswer(200, {"jsonrpc": "2.0", "id": 1, "result": result})

    app = Flask(__name__)
    app.register_blueprint(rcp_blueprint(InfiniteServer()))  # type: ignore[arg-type]
    response = app.test_client().post("/rcp/ping", data=b"{}")
    assert response.status_code == 200
    assert response.get_json()["result"] == {
        "hits": [{"id": "a", "score": 0.0}, {"id": "b", "score": 0.0}],
        "_meta": {"x": [1.5, 0.0]},
    }


def test_a_citation_links_the_document_as_mcps_url_does() -> None:
    """``citation.uri`` is the link MCP's ``search`` gives as ``url``; a Deck card's citation
    had none (only files and notes were linked)."""
    base = "https://cloud.example"
    server = RcpServer(lambda: None, lambda _: None, None, citation_base=base)  # type: ignore[arg-type]
    hit = SimpleNamespace(path=None, char_start=0, char_end=5)
    for doc_type, doc_id, url in (
        ("file", "12", None),
        ("note", "13", None),
        ("deck_card", "7", None),
        ("news_item", "9", "https://news.example/9"),
    ):
        citation = server._citation(doc_type, doc_id, "Title", url, hit)
        assert citation["uri"] == open_link(base, doc_type, doc_id, url), doc_type
    deck = server._citation("deck_card", "7", "Card", None, hit)
    assert deck["uri"] == f"{base}/index.php/apps/deck/card/7"


def test_openapi_describes_the_request_ids_the_server_takes_and_echoes(ro_api: Any) -> None:
    """The server takes a string or any number as a request's ``id`` (JSON-RPC 2.0 §4) and
    answers with it, ``1.5`` included (``RcpServer._one``), and refuses a null one (-32600);
    ``/openapi.json`` said ``integer | string | null`` for both the request's and the
    response's ``id``, so a client checked against it refused the server's own answer
    (schemathesis: ``response_schema_conformance``) and sent null ids the server refuses."""
    from jsonschema import Draft202012Validator

    doc = ro_api.client.get("/openapi.json").get_json()

    def validator(model: str) -> Draft202012Validator:
        ref = f"#/components/schemas/{model}"
        return Draft202012Validator({"$ref": ref, "components": doc["components"]})

    for request_id in (1.5, -2.0e-3, 7, "a"):
        message = {"jsonrpc": "2.0", "id": request_id, "method": "ping"}
        validator("JsonRpcRequest").validate(message)
        answer = ro_api.client.post("/rcp/ping", json=message)
        assert answer.status_code == 200 and answer.get_json()["id"] == request_id
        validator("JsonRpcResponse").validate(answer.get_json())
    null_id = {"jsonrpc": "2.0", "id": None, "method": "ping"}  # refused by both
    assert not validator("JsonRpcRequest").is_valid(null_id)
    answer = ro_api.client.post("/rcp/ping", json=null_id).get_json()
    assert answer["error"]["code"] == -32600 and answer["error"]["data"] == {"field": "id"}


def test_a_query_parameter_is_refused_not_ignored(ro_api: Any) -> None:
    """``POST /rcp/retrieve?k=3`` ran the body's retrieve with the default ``k``: the query
    string was ignored without a word. Any query parameter is now HTTP 400, -32600 naming it
    in ``data.field``, with the request's id; nothing is run (open methods too)."""
    auth = {"Authorization": basic("alice"), "RCP-Session": "query-refused-1"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    assert ro_api.client.post("/rcp/initialize", json=init, headers=auth).status_code == 200
    for path, method in (("/rcp/retrieve?k=3", "retrieve"), ("/rcp/ping?x=1", "ping")):
        message = {"jsonrpc": "2.0", "id": 9, "method": method, "params": {"query": "lens"}}
        answer = ro_api.client.post(path, json=message, headers=auth)
        assert answer.status_code == 400, answer.get_json()
        reply = answer.get_json()
        assert reply["id"] == 9 and "result" not in reply
        assert reply["error"]["code"] == -32600
        assert reply["error"]["data"] == {"field": path.rsplit("?", 1)[1].split("=")[0]}


def test_a_request_id_with_a_lone_surrogate_is_invalid_not_echoed(ro_api: Any) -> None:
    """``"id": "\\ud800"`` is JSON text Python reads as a lone surrogate; it was answered
    (``ping``'s ``{}``) with the same escape in the reply, which strict JSON readers refuse
    (RFC 8259 §8.2). It is -32600 naming ``id``, answered with id null; so is a jsonrpc or
    method error of such a message (null id, not the surrogate)."""
    for body in (
        b'{"jsonrpc": "2.0", "id": "a\\ud800", "method": "ping"}',
        b'{"jsonrpc": "2.0", "id": "\\udfff", "method": "info"}',
    ):
        reply = ro_api.client.post(f"/rcp/{json.loads(body)['method']}", data=body).get_json()
        assert reply["id"] is None and "result" not in reply, reply
        assert reply["error"]["code"] == -32600 and reply["error"]["data"] == {"field": "id"}
    body = b'{"jsonrpc": "1.0", "id": "\\ud800", "method": "ping"}'
    reply = ro_api.client.post("/rcp/ping", data=body).get_json()
    assert reply["id"] is None and reply["error"]["data"] == {"field": "jsonrpc"}


def strictly_readable(text: bytes) -> Any:
    """``text`` read as JSON by a reader that refuses a lone surrogate escape (RFC 8259
    §8.2), as strict parsers do: every string must be valid Unicode."""
    value = json.loads(text)
    json.dumps(value, ensure_ascii=False).encode("utf-8")  # UnicodeEncodeError on a surrogate
    return value


@pytest.mark.parametrize(
    ("method", "params", "code", "field"),
    [
        ("retrieve", '{"query": "lens", "mode": "\\ud800"}', -32602, "mode"),
        (
            "retrieve",
            '{"query": "lens", "fusion": {"method": "a\\udfff"}}',
            -32602,
            "fusion.method",
        ),
        ("retrieve", '{"query": "lens", "fusion": "\\ud800"}', -32602, "fusion"),
        ("retrieve", '{"query": "lens", "unit": "\\ud800"}', -32602, "unit"),
        ("retrieve", '{"query": "lens", "unit": "\\ud800", "strict": false}', -32602, "unit"),
        ("retrieve", '{"query": "lens", "x\\ud800": 1}', -32602, "x\\ud800"),
        (
            "retrieve",
            '{"query": {"type": "text", "text": "x", "\\udc00": 1}}',
            -32602,
            "query.\\udc00",
        ),
        (
            "retrieve",
            '{"query": "lens", "filter": {"and": [{"x\\ud800": 1}]}}',
            -32602,
            "filter.and[0].x\\ud800",
        ),
        ("ping", '{"nonce": "\\ud800"}', -32602, "nonce"),
        ("ping", '"\\ud800"', -32602, "params"),
    ],
    ids=[
        "mode",
        "fusion-method",
        "fusion",
        "unit",
        "unit-lenient",
        "param-name",
        "block-key",
        "filter-key",
        "nonce",
        "params",
    ],
)
def test_a_lone_surrogate_in_params_is_refused_never_echoed(
    ro_api: Any, method: str, params: str, code: int, field: str
) -> None:
    """A lone surrogate (``"\\ud800"`` in the JSON) in a param was echoed back: an unsupported
    mode, fusion or unit in ``data.option``, an unknown param or key in ``usage.notes``, a
    ping's nonce in its result; strict JSON readers refuse such an answer. Any param holding
    one, as a value or a key, is now -32602 ``invalid_value`` naming it (a key with the
    escape written out), before anything reads it; the answer is strictly readable."""
    auth = {"Authorization": basic("alice"), "RCP-Session": "surrogate-params-1"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    ro_api.client.post("/rcp/shutdown", json=init | {"method": "shutdown"}, headers=auth)
    assert ro_api.client.post("/rcp/initialize", json=init, headers=auth).status_code == 200
    body = f'{{"jsonrpc": "2.0", "id": 5, "method": "{method}", "params": {params}}}'
    answer = ro_api.client.post(f"/rcp/{method}", data=body.encode(), headers=auth)
    reply = strictly_readable(answer.data)
    assert answer.status_code == 200 and reply["id"] == 5 and "result" not in reply, reply
    assert reply["error"]["code"] == code
    assert reply["error"]["data"] == {"field": field, "code": "invalid_value"}


def test_a_lone_surrogate_in_another_member_is_an_invalid_request(ro_api: Any) -> None:
    """Outside ``params`` (and ``id``, answered with id null), a member holding a lone
    surrogate is -32600 naming it: the method (which the path cannot match) or any other."""
    for body, field in (
        (b'{"jsonrpc": "2.0", "id": 2, "method": "ping\\ud800"}', "method"),
        (b'{"jsonrpc": "2.0", "id": 2, "method": "ping", "x": ["\\ud800"]}', "x[0]"),
    ):
        reply = strictly_readable(ro_api.client.post("/rcp/ping", data=body).data)
        assert reply["id"] == 2 and reply["error"]["code"] == -32600, reply
        assert reply["error"]["data"] == {"field": field, "code": "invalid_value"}


def test_an_answer_outside_the_server_never_echoes_a_lone_surrogate_id(ro_api: Any) -> None:
    """The HTTP layer's own answers (a query parameter's 400, the rate limit's 429) carried
    the request's id read with ``json.loads``, a lone surrogate included; they now carry it
    only when the server would (:func:`~ncindex.search.rcp.answerable_id`), else null."""
    assert rcp_http.request_id(b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}') is None
    assert rcp_http.request_id(b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}') == 1.5
    assert rcp_http.request_id(b'{"id": NaN}') is None
    body = b'{"jsonrpc": "2.0", "id": "a\\udfff", "method": "ping"}'
    answer = ro_api.client.post("/rcp/ping?x=1", data=body)
    reply = strictly_readable(answer.data)
    assert answer.status_code == 400 and reply["id"] is None
    assert reply["error"]["data"] == {"field": "x"}


def test_openapi_states_the_doc_ids_times_and_rcp_methods_the_server_takes(ro_api: Any) -> None:
    """``/openapi.json`` was looser than the server: ``doc_id`` had no pattern though
    ``checked_doc_id`` refuses whitespace and control characters (``"208 "`` is 400);
    ``modified_after``/``modified_before`` were any string or number, though the server takes
    RFC 3339 strings and Unix seconds within years 1–9999; ``/rcp/<method>`` took any string,
    though a newline in it is a 404 from the router. Each sample is now valid by the document
    exactly when the server takes it."""
    from urllib.parse import quote

    from jsonschema import Draft202012Validator

    doc = ro_api.client.get("/openapi.json").get_json()
    auth = {"Authorization": basic("alice")}

    def param(path: str, name: str) -> Draft202012Validator:
        params = doc["paths"][path]["get" if "documents" in path else "post"]["parameters"]
        return Draft202012Validator(next(p["schema"] for p in params if p["name"] == name))

    doc_id = param("/v1/documents/{doc_type}/{doc_id}/context", "doc_id")
    for value in ("208", "ab-c_1.x", "ü1", "x" * 256, "208 ", " 208", "a\tb", "a\x00b", "a\x85",
                  "a\u200bb", "\ufeff1", "a\u202eb", "\ue000", "a\u3000b", "x" * 257):  # fmt: skip
        answer = ro_api.client.get(f"/v1/documents/file/{quote(value)}/context", headers=auth)
        refused = answer.status_code == 400 and answer.get_json()["field"] == "doc_id"
        assert doc_id.is_valid(value) is not refused, (value, answer.get_json())

    search = doc["components"]["schemas"]["SearchRequest"]
    times = Draft202012Validator(search["properties"]["modified_after"])
    for value in ("2026-01-01", "2026-01-01T00:00:00Z", "2026-01-01t00:00:00z", "2026-01-01 12:30",
                  "2026-01-01T00:00:00.5+02:00", "2026-W05", "20260101", " 2026-01-01",
                  "2026-01-01T12", "2026-01-01T00:00:00+0200", 5, 1.5, -1, 253402300799,
                  253402300800, -253402300800, "5"):  # fmt: skip
        for name in ("modified_after", "modified_before"):
            body = {"query": "lighthouse", name: value}
            answer = ro_api.client.post("/v1/search", json=body, headers=auth)
            refused = answer.status_code == 400 and answer.get_json()["field"] == name
            assert times.is_valid(value) is not refused, (name, value, answer.get_json())

    method = param("/rcp/{method}", "method")
    # no sample ends in a newline: jsonschema reads a pattern with Python's re.search, whose
    # "$" also matches before a final newline (ECMA-262's, the document's, does not)
    for value in ("ping", "a/b", "a b", "\n", "a\rb", "a\nb", "/a", "//"):
        answer = ro_api.client.post(f"/rcp/{quote(value, safe='/')}", data=b"{}")
        routed = answer.status_code not in (404, 308)
        assert method.is_valid(value) is routed, (value, answer.status_code)


def test_a_filter_value_selecting_nothing_is_hinted_in_rcp_meta(ro_served: Served) -> None:
    """A ``retrieve`` that finds nothing because a folder, path or owner value holds none of the
    caller's documents answers no hits and, in the result's ``_meta.hints`` (spec §4.4:
    implementation-specific data), the search API's hint naming the filter's value (RCP is
    served beside it and names its listings); one that finds something has no hints."""
    client = connect(ro_served, "alice")
    for leaf, field, detail in [
        ({"field": "path_prefix", "op": "in", "value": ["/Nowhere"]}, "filter.value[0]",
         "no indexed document you can read is at or under '/Nowhere' (GET /v1/folders lists "
         "them)"),
        ({"field": "owner", "op": "eq", "value": "bob"}, "filter.value",
         "no indexed document you can read is owned by 'bob' (GET /v1/owners lists them)"),
        ({"field": "path", "op": "eq", "value": "/Nowhere/plan.md"}, "filter.value",
         "no indexed document you can read is at the path '/Nowhere/plan.md' (GET /v1/folders "
         "lists the folders holding yours)"),
    ]:  # fmt: skip
        answer = client.call("retrieve", {"query": "lighthouse", "filter": leaf})
        assert answer["hits"] == [], answer
        assert answer["_meta"]["hints"] == [
            {"code": "selects_nothing", "field": field, "detail": detail}
        ], answer
    found = client.call(
        "retrieve",
        {
            "query": "lighthouse",
            "filter": {"field": "path_prefix", "op": "eq", "value": "/Private"},
        },
    )
    assert found["hits"] and found["_meta"]["hints"] == []
    client.shutdown()


def test_a_tag_in_another_case_is_named_in_rcp_too(served: Served) -> None:
    """A ``retrieve`` whose tag is written in another case than the caller's documents hold
    it, finding nothing, is -32602 naming the filter's value and the stored spelling, as the
    search API's 400; a reversed range in the filter is refused as there."""
    served.api.sim.create_tag("urgent")
    client = connect(served, "alice")
    with pytest.raises(rcp.RcpError) as caught:
        client.call(
            "retrieve",
            {"query": "lighthouse", "filter": {"field": "tags", "op": "in", "value": ["URGENT"]}},
        )
    assert caught.value.code == -32602, caught.value
    data = caught.value.data or {}
    assert (data.get("field"), data.get("code")) == ("filter.value[0]", "invalid_value"), data
    assert "'urgent'" in data["detail"]
    late, early = "2026-02-01T00:00:00Z", "2026-01-01T00:00:00Z"
    at = [
        {"field": "modified_at", "op": "gte", "value": late},
        {"field": "modified_at", "op": "lt", "value": early},
    ]
    with pytest.raises(rcp.RcpError) as caught:
        client.call("retrieve", {"query": "lighthouse", "filter": {"and": at}})
    assert (caught.value.data or {}).get("field") == "filter.and[0].value", caught.value
    client.shutdown()


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
@pytest.mark.parametrize(
    "params",
    [
        {"query": "lighthouse", "filter": {"field": "category", "op": "eq", "value": "Nowhere"}},
        {"query": "lighthouse"},
    ],
    ids=["nothing-to-check", "candidates"],
)
def test_a_batch_with_a_credential_revoked_while_cached_asks_nextcloud_once(
    api: Api, params: dict[str, Any]
) -> None:
    """bob's app password is revoked while the credential cache holds it, and a batch of
    retrieves comes with it. Each retrieve asked Nextcloud again — its ``cloud/user``
    confirmation (a search with nothing to check) or its results' checks — though the first
    refusal had settled it: a batch counts once against the rate limits, while every refused
    login counts against the sender's address in Nextcloud's brute-force protection
    (nextcloud/server ``lib/private/User/Session.php`` ``logClientIn`` →
    ``Throttler::registerAttempt``). The first refusal now answers the rest: one request to
    Nextcloud, every reply -32012 (Unauthorized)."""
    auth = {"Authorization": basic("bob"), "RCP-Session": "revoked-batch-1"}
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    assert api.client.post("/rcp/initialize", json=init, headers=auth).status_code == 200
    account = api.sim.tree.users["bob"]
    account.passwords.clear()
    account.token_logins.clear()
    api.sim.request_log.clear()
    batch = [
        {"jsonrpc": "2.0", "id": i, "method": "retrieve", "params": params}
        for i in range(MAX_BATCH)
    ]
    replies = api.client.post("/rcp/retrieve", json=batch, headers=auth).get_json()
    assert [r["error"]["code"] for r in replies] == [-32012] * MAX_BATCH, replies
    assert len(api.sim.request_log) == 1, api.sim.request_log


def test_a_batch_with_a_wrong_password_asks_nextcloud_once(api: Api) -> None:
    """A batch of retrieves with a password Nextcloud refuses resolved the credential once per
    message: ten refused logins at Nextcloud for one HTTP request, which the refused-credentials
    limit does not count (a batch is answered 200). The first refusal now answers the rest."""
    auth = {"Authorization": basic("bob", "not-his-password")}
    batch = [
        {"jsonrpc": "2.0", "id": i, "method": "retrieve", "params": {"query": "lighthouse"}}
        for i in range(MAX_BATCH)
    ]
    api.sim.request_log.clear()
    replies = api.client.post("/rcp/retrieve", json=batch, headers=auth).get_json()
    assert [r["error"]["code"] for r in replies] == [-32012] * MAX_BATCH, replies
    assert [p for _, p, _ in api.sim.request_log] == ["/ocs/v2.php/cloud/user"]


@pytest.mark.parametrize("api", [{"user_cache_seconds": 60}], indirect=True)
def test_initialize_refuses_a_credential_revoked_while_cached(api: Api) -> None:
    """``initialize`` authenticates the caller, but with a credential from the credential
    cache it asked Nextcloud nothing: bob's app password, revoked a moment after a search,
    started a session. It now asks OCS ``cloud/user`` then (nextcloud/server
    ``apps/provisioning_api/lib/Controller/UsersController.php`` ``getCurrentUser``):
    -32012, HTTP 401, and the credential is dropped from the cache."""
    assert api.post("bob", {"query": "lighthouse"}).status_code == 200  # cached now
    account = api.sim.tree.users["bob"]
    account.passwords.clear()
    account.token_logins.clear()
    auth = {"Authorization": basic("bob"), "RCP-Session": "revoked-init-1"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    answer = api.client.post("/rcp/initialize", json=init, headers=auth)
    assert answer.status_code == 401, answer.get_json()
    assert answer.get_json()["error"]["code"] == -32012
    assert api.post("bob", {"query": "lighthouse"}).status_code == 401


@pytest.mark.parametrize("api", [{"http_timeout": 0.5}], indirect=True)
@pytest.mark.parametrize("fault", [{"status": 503}, {"timeout": True}], ids=["503", "hang"])
def test_a_batch_with_nextcloud_unable_to_authenticate_asks_nextcloud_once(
    api: Api, fault: dict[str, Any]
) -> None:
    """Nextcloud answers OCS with 503, or not at all (``settings.http_timeout``), while a batch
    of retrieves comes. Each message asked again, and a stalled Nextcloud was waited for once
    per message: ten timeouts for one HTTP request. The first failure now answers the rest,
    the same -32010 (retryable). The fault counts the requests that reached Nextcloud (each
    takes one of its ``times``; a hung one is logged only once released)."""
    auth = {"Authorization": basic("bob")}
    batch = [
        {"jsonrpc": "2.0", "id": i, "method": "retrieve", "params": {"query": "lighthouse"}}
        for i in range(MAX_BATCH)
    ]
    switch = api.sim.faults.set("ocs", times=MAX_BATCH, **fault)
    try:
        replies = api.client.post("/rcp/retrieve", json=batch, headers=auth).get_json()
    finally:
        api.sim.faults.clear()
    first = replies[0]["error"]
    assert first["code"] == -32010 and first["data"]["retryable"] is True, first
    assert [r["error"] for r in replies] == [first] * MAX_BATCH, replies
    assert switch.times == MAX_BATCH - 1  # one request reached Nextcloud


@pytest.mark.parametrize("api", [{"http_timeout": 0.5, "user_cache_seconds": 60}], indirect=True)
@pytest.mark.parametrize("cached", [False, True], ids=["asked", "cached"])
def test_a_batch_whose_first_search_nextcloud_does_not_answer_waits_for_it_once(
    api: Api, cached: bool
) -> None:
    """bob is signed in (``initialize``), then Nextcloud stops answering while a batch of
    retrieves comes. Each message's search sent its own checks (one WebDAV ``SEARCH``) and
    waited ``settings.http_timeout`` for them before keeping its hits unconfirmed: ten
    timeouts for one HTTP request. The batch's client now stops at the first request that got
    no answer: the later messages' checks fail at once, and each message answers as the
    first one did (hits kept unconfirmed, fail-open). With his credential from the cache the
    first search's confirmation (OCS ``cloud/user``) is sent once — no other answer confirmed
    the credential, and a part of Nextcloud stalled before its login check would refuse none
    — and gets no answer either: its answer stands, and no later message asks again (before:
    not sent at all). The faults count the requests that reached Nextcloud (each takes one of its
    ``times``). The next batch, Nextcloud answering again, is asked: the stopped client was
    the stalled batch's alone (a guard: one kept with the RCP session or the credential cache
    would stay stopped for good)."""
    auth = {"Authorization": basic("bob")}
    start = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    assert "result" in api.client.post("/rcp/initialize", json=start, headers=auth).get_json()
    if not cached:
        for key in api.services.redis.scan_iter(api.settings.names.auth_prefix + "*"):
            api.services.redis.delete(key)  # the batch resolves bob with Nextcloud (answered)
    batch = [
        {"jsonrpc": "2.0", "id": i, "method": "retrieve", "params": {"query": "lighthouse"}}
        for i in range(MAX_BATCH)
    ]
    checks = api.sim.faults.set("dav-search", times=MAX_BATCH, timeout=True)
    confirms = api.sim.faults.set("ocs", times=MAX_BATCH, timeout=True) if cached else None
    try:
        replies = api.client.post("/rcp/retrieve", json=batch, headers=auth).get_json()
    finally:
        api.sim.faults.clear()
    assert checks.times == MAX_BATCH - 1  # one request reached Nextcloud
    assert confirms is None or confirms.times == MAX_BATCH - 1  # once: its answer stands
    for reply in replies:
        hits = reply["result"]["hits"]
        assert hits and not any(hit["meta"]["verified"] for hit in hits), reply
        assert any("not confirmed" in note for note in reply["result"]["usage"]["notes"])
    # the next HTTP request of the same RCP session has a client of its own: asked, confirmed
    again = api.client.post("/rcp/retrieve", json=batch[:2], headers=auth).get_json()
    for reply in again:
        hits = reply["result"]["hits"]
        assert hits and all(hit["meta"]["verified"] for hit in hits), reply


@pytest.mark.parametrize("api", [{"http_timeout": 5.0, "user_cache_seconds": 60}], indirect=True)
def test_a_batch_s_checks_go_on_after_a_cached_credential_s_confirmation_timed_out(
    api: Api,
) -> None:
    """bob's credential comes from the cache, and the first message finds nothing, so its
    search asks Nextcloud nothing but the credential's confirmation (OCS ``cloud/user``,
    within ``CONFIRM_SECONDS``: 2 s), which Nextcloud takes 2.5 s to answer, within the
    client's ``http_timeout`` (5 s). The confirmation's timing out stopped the batch's
    client, so the later messages' checks were never sent and their hits came back
    unconfirmed though Nextcloud would have answered them; a confirmation's timeout is no
    stop now, and their hits are confirmed."""
    auth = {"Authorization": basic("bob")}
    start = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    assert "result" in api.client.post("/rcp/initialize", json=start, headers=auth).get_json()
    nowhere = {"field": "path_prefix", "op": "in", "value": ["/Nowhere"]}
    batch = [
        {"jsonrpc": "2.0", "id": i, "method": "retrieve", "params": {"query": "lighthouse"}}
        for i in range(3)
    ]
    batch[0]["params"]["filter"] = nowhere
    api.sim.faults.set("ocs", delay=2.5, times=1)
    try:
        replies = api.client.post("/rcp/retrieve", json=batch, headers=auth).get_json()
    finally:
        api.sim.faults.clear()
    assert replies[0]["result"]["hits"] == [], replies[0]
    for reply in replies[1:]:
        hits = reply["result"]["hits"]
        assert hits and all(hit["meta"]["verified"] for hit in hits), reply
