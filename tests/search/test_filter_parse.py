"""Filter validation: every malformed shape gives its code and field; nothing else escapes."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qdrant_client import models

from ncindex.errors import FilterError
from ncindex.search.filter_fields import (
    ALL_OPERATORS,
    FIELD_TYPES,
    FIELDS,
    MAX_FILTER_DEPTH,
    MAX_LIST_VALUES,
    RCP_DATE_ENCODING,
    filters_document,
    rcp_filter_capability,
)
from ncindex.search.filters import (
    HTTP_LISTINGS,
    build_filter,
    filter_depth,
    other_spellings,
    parse_rcp_tree,
    parse_tree,
    request_tree,
)


def nested(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"field": "size", "op": "eq", "value": 1}
    for _ in range(levels - 1):
        node = {"not": node}
    return node


MALFORMED: list[tuple[Any, str, str]] = [
    # shape
    ([{"field": "size", "op": "eq", "value": 1}], "invalid_filter", "filter"),
    ("size = 1", "invalid_filter", "filter"),
    (42, "invalid_filter", "filter"),
    ({"and": []}, "invalid_filter", "filter.and"),
    ({"or": []}, "invalid_filter", "filter.or"),
    ({"and": {"field": "size", "op": "eq", "value": 1}}, "invalid_filter", "filter.and"),
    ({"and": [1]}, "invalid_filter", "filter.and[0]"),
    ({"and": [{"field": "size", "op": "eq", "value": 1}], "or": []}, "invalid_filter", "filter"),
    (
        {"not": {"field": "size", "op": "eq", "value": 1}, "field": "size"},
        "invalid_filter",
        "filter",
    ),
    ({"foo": 1}, "invalid_filter", "filter"),
    ({"field": "", "op": "eq", "value": 1}, "invalid_filter", "filter"),
    ({"field": None, "op": "eq", "value": 1}, "invalid_filter", "filter"),
    ({"field": ["size"], "op": "eq", "value": 1}, "invalid_filter", "filter"),
    (nested(MAX_FILTER_DEPTH + 1), "invalid_filter", "filter" + ".not" * MAX_FILTER_DEPTH),
    (
        {"or": [{"field": "size", "op": "eq", "value": i} for i in range(65)]},
        "invalid_filter",
        "filter",
    ),
    # fields
    ({"field": "acl", "op": "eq", "value": "user:bob"}, "unknown_field", "filter.field"),
    (
        {"field": "folder_ancestors", "op": "eq", "value": "bob:/"},
        "unknown_field",
        "filter.field",
    ),
    ({"field": "file_path", "op": "eq", "value": "bob:/x"}, "unknown_field", "filter.field"),
    ({"field": "text", "op": "contains", "value": "x"}, "unknown_field", "filter.field"),
    (
        {
            "and": [
                {"field": "size", "op": "eq", "value": 1},
                {"not": {"field": "nope", "op": "eq", "value": 1}},
            ]
        },
        "unknown_field",
        "filter.and[1].not.field",
    ),
    ({"field": "tâgs", "op": "eq", "value": 1}, "unknown_field", "filter.field"),
    # operators
    ({"field": "size", "op": "regex", "value": "1"}, "unsupported_operator", "filter.op"),
    ({"field": "size", "value": 1}, "unsupported_operator", "filter.op"),
    ({"field": "size", "op": None, "value": 1}, "unsupported_operator", "filter.op"),
    ({"field": "size", "op": ["eq"], "value": 1}, "unsupported_operator", "filter.op"),
    (
        {"or": [{"field": "size", "op": {"x": 1}, "value": 1}]},
        "unsupported_operator",
        "filter.or[0].op",
    ),
    ({"field": "size", "op": "EQ", "value": 1}, "unsupported_operator", "filter.op"),
    ({"field": "doc_type", "op": "gt", "value": "note"}, "unsupported_operator", "filter.op"),
    ({"field": "doc_type", "op": "contains", "value": "note"}, "unsupported_operator", "filter.op"),
    ({"field": "title", "op": "eq", "value": "x"}, "unsupported_operator", "filter.op"),
    ({"field": "tags", "op": "eq", "value": "x"}, "unsupported_operator", "filter.op"),
    ({"field": "modified_at", "op": "in", "value": [1]}, "unsupported_operator", "filter.op"),
    ({"not": {"field": "path_prefix", "op": "exists"}}, "unsupported_operator", "filter.not.op"),
    # values
    ({"field": "size", "op": "eq"}, "invalid_value", "filter.value"),
    ({"field": "size", "op": "eq", "value": "12"}, "invalid_value", "filter.value"),
    ({"field": "size", "op": "eq", "value": True}, "invalid_value", "filter.value"),
    ({"field": "size", "op": "eq", "value": None}, "invalid_value", "filter.value"),
    ({"field": "size", "op": "eq", "value": 1.5}, "invalid_value", "filter.value"),
    ({"field": "size", "op": "ne", "value": 0.5}, "invalid_value", "filter.value"),
    ({"field": "size", "op": "gt", "value": 10**30}, "invalid_value", "filter.value"),
    ({"field": "size", "op": "gt", "value": float("inf")}, "invalid_value", "filter.value"),
    ({"field": "size", "op": "gt", "value": float("nan")}, "invalid_value", "filter.value"),
    ({"field": "size", "op": "eq", "value": [1]}, "invalid_value", "filter.value"),
    ({"field": "size", "op": "in", "value": []}, "invalid_value", "filter.value"),
    ({"field": "size", "op": "in", "value": 3}, "invalid_value", "filter.value"),
    ({"field": "size", "op": "in", "value": [1, [2]]}, "invalid_value", "filter.value"),
    ({"field": "size", "op": "in", "value": [1, "2"]}, "invalid_value", "filter.value[1]"),
    (
        {"field": "size", "op": "in", "value": list(range(MAX_LIST_VALUES + 1))},
        "invalid_value",
        "filter.value",
    ),
    ({"field": "doc_type", "op": "eq", "value": "spreadsheet"}, "invalid_value", "filter.value"),
    ({"field": "doc_type", "op": "eq", "value": 1}, "invalid_value", "filter.value"),
    ({"field": "owner", "op": "eq", "value": {"a": 1}}, "invalid_value", "filter.value"),
    ({"field": "owner", "op": "eq", "value": "\ud800"}, "invalid_value", "filter.value"),
    ({"field": "owner", "op": "eq", "value": "a\x00b"}, "invalid_value", "filter.value"),
    ({"field": "owner", "op": "eq", "value": "x" * 1025}, "invalid_value", "filter.value"),
    ({"field": "modified_at", "op": "gt", "value": "yesterday"}, "invalid_value", "filter.value"),
    ({"field": "modified_at", "op": "gt", "value": "2026-13-01"}, "invalid_value", "filter.value"),
    ({"field": "modified_at", "op": "gt", "value": 1e20}, "invalid_value", "filter.value"),
    ({"field": "modified_at", "op": "gt", "value": False}, "invalid_value", "filter.value"),
    ({"field": "tags", "op": "exists", "value": "false"}, "invalid_value", "filter.value"),
    ({"field": "tags", "op": "exists", "value": 0}, "invalid_value", "filter.value"),
    ({"field": "title", "op": "contains", "value": "   "}, "invalid_value", "filter.value"),
    ({"field": "path_prefix", "op": "eq", "value": ""}, "invalid_value", "filter.value"),
    ({"field": "path", "op": "in", "value": ["/a", 3.5]}, "invalid_value", "filter.value[1]"),
    ({"field": "path", "op": "eq", "value": "/a/./b.md"}, "invalid_value", "filter.value"),
    ({"field": "path_prefix", "op": "eq", "value": "/a/.."}, "invalid_value", "filter.value"),
    # keys a node cannot have are refused, not dropped (the SDK ignores them)
    ({"field": "size", "op": "gt", "value": 0, "op2": "lt"}, "invalid_filter", "filter.op2"),
    ({"field": "tags", "op": "exists", "valu": False}, "invalid_filter", "filter.valu"),
    ({"and": [{"field": "size", "op": "gt", "value": 0}], "x": 1}, "invalid_filter", "filter.x"),
    (
        {"or": [{"not": {"field": "size", "op": "gt", "value": 0, "field2": "x"}}]},
        "invalid_filter",
        "filter.or[0].not.field2",
    ),
]


@pytest.mark.parametrize(("tree", "code", "field"), MALFORMED)
def test_malformed_filter_gives_its_code_and_field(tree: Any, code: str, field: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse_tree(tree)
    assert (caught.value.code, caught.value.field) == (code, field), caught.value


def test_rcps_reading_ignores_unknown_keys_and_lists_them() -> None:
    """As RCP/1 reads a filter (spec §4.6), a node's keys the tree does not define are set
    aside and listed by path, node before children; the tree is the one without them. The
    rest is refused as :func:`parse_tree` refuses it: an unknown field name, a node that is
    no leaf or combinator without the unknown keys, a leaf and a combinator in one node, a
    value misspelt away from an operator that needs one."""
    size = {"field": "size", "op": "gt", "value": 0}
    tree = {"or": [{"not": {**size, "field2": "x"}}, {**size, "op2": "lt", "valu": 5}], "x": 1}
    clean = {"or": [{"not": size}, size]}
    node, ignored = parse_rcp_tree(tree)
    assert node == parse_tree(clean)
    assert ignored == [
        "filter.x",
        "filter.or[0].not.field2",
        "filter.or[1].op2",
        "filter.or[1].valu",
    ]
    assert parse_rcp_tree(clean) == (parse_tree(clean), [])
    assert parse_rcp_tree(None) == parse_rcp_tree({}) == (None, [])
    for raw, code, field in (
        ({"field": "nope", "op": "eq", "value": 1, "valu": 1}, "unknown_field", "filter.field"),
        ({"foo": 1}, "invalid_filter", "filter"),
        ({"and": [{"foo": 1}]}, "invalid_filter", "filter.and[0]"),
        ({"not": size, "field": "size"}, "invalid_filter", "filter"),
        ({"field": "size", "op": "gt", "valu": 0}, "invalid_value", "filter.value"),
    ):
        with pytest.raises(FilterError) as caught:
            parse_rcp_tree(raw)
        assert (caught.value.code, caught.value.field) == (code, field), raw


def test_rcps_reading_takes_a_date_as_rfc_3339_only() -> None:
    """RCP/1 §4.6 writes a point in time as an RFC 3339 string or integer epoch
    *milliseconds*, the server declaring which; a number was read as Unix seconds, neither of
    the two (epoch milliseconds were "out of range"). As RCP reads a filter a date written as
    a number is ``invalid_value`` naming it; ``parse_tree`` (REST, MCP) still reads seconds."""
    when = {"field": "modified_at", "op": "gte", "value": "2026-01-01T00:00:00Z"}
    size = {"field": "size", "op": "gt", "value": 5}
    node, _ = parse_rcp_tree({"and": [when, size]})
    assert node == parse_tree({"and": [when, size]})
    seconds = {**when, "value": 1767225600}
    assert parse_tree(seconds) == parse_tree(when)
    for raw, field in (
        (seconds, "filter.value"),
        ({**when, "value": 1767225600000}, "filter.value"),
        ({**when, "value": 1.5}, "filter.value"),
        ({"not": {"or": [size, when, seconds]}}, "filter.not.or[2].value"),
    ):
        with pytest.raises(FilterError) as caught:
            parse_rcp_tree(raw)
        assert (caught.value.code, caught.value.field) == ("invalid_value", field), raw
        assert "RFC 3339" in caught.value.detail
    with pytest.raises(FilterError) as caught:  # the operator is checked first
        parse_rcp_tree({**seconds, "op": "contains"})
    assert caught.value.code == "unsupported_operator"
    assert rcp_filter_capability()["x-ncindex"]["dateEncoding"] == RCP_DATE_ENCODING
    # a date's value is a scalar (the check reads one): no date field takes a list or exists
    for f in FIELDS.values():
        assert f.type != "date" or not {"in", "nin", "exists"} & set(f.operators), f.name


def test_an_unknown_field_is_named_by_its_key_and_its_value_in_the_detail() -> None:
    """An unknown field's error points at the leaf's ``field`` key, as every other error
    points at a key (``filter.and[1].op``), and the detail names the value and the fields
    there are; it named the value as if it were a key (``filter.and[1].nope``), from the
    SDK's path."""
    tree = {
        "and": [
            {"field": "doc_type", "op": "eq", "value": "note"},
            {"field": "nope", "op": "eq", "value": 1},
        ]
    }
    with pytest.raises(FilterError) as caught:
        parse_tree(tree)
    assert (caught.value.code, caught.value.field) == ("unknown_field", "filter.and[1].field")
    assert caught.value.detail == f"unknown field 'nope'; one of {', '.join(FIELD_TYPES)}"
    # a value that looks like a path is still the value (the leaf is found by the SDK's path)
    dotted = {"or": [{"field": "size", "op": "eq", "value": 1}, {"field": "or[0].x", "op": "eq",
                                                                  "value": 1}]}  # fmt: skip
    with pytest.raises(FilterError) as caught:
        parse_tree(dotted)
    assert caught.value.field == "filter.or[1].field"
    assert caught.value.detail.startswith("unknown field 'or[0].x'; one of doc_type, ")
    with pytest.raises(FilterError) as caught:
        parse_tree({"field": "x" * 100, "op": "eq", "value": 1})
    assert caught.value.detail.startswith(f"unknown field '{'x' * 64}…'; one of ")


def test_operator_outside_the_language_carries_the_option() -> None:
    with pytest.raises(FilterError) as caught:
        parse_tree({"field": "size", "op": "regex", "value": "1"})
    assert caught.value.option == "regex"
    with pytest.raises(FilterError) as caught:
        parse_tree({"field": "doc_type", "op": "gt", "value": "note"})
    assert caught.value.option is None  # a known operator, just not for this field
    with pytest.raises(FilterError) as caught:
        parse_tree({"field": "size", "value": 1})
    assert caught.value.detail.startswith("missing operator; one of "), caught.value


def test_absent_filter_is_no_filter() -> None:
    assert parse_tree(None) is None
    assert build_filter("alice", None) == build_filter("alice", parse_tree(None))


def test_an_empty_filter_is_refused_as_an_empty_list_is() -> None:
    """``filter: {}`` searched everything, silently: an agent that built a filter and ended
    with nothing meant some condition. Refused as ``tags: []`` is (leave it out for none);
    RCP/1 reads ``{}`` as no filter, and so does its ``retrieve``."""
    with pytest.raises(FilterError) as caught:
        parse_tree({})
    assert (caught.value.code, caught.value.field) == ("invalid_filter", "filter")
    assert "leave filter out" in caught.value.detail
    with pytest.raises(FilterError) as caught:
        request_tree(doc_types=["note"], filter={})
    assert (caught.value.code, caught.value.field) == ("invalid_filter", "filter")
    assert parse_rcp_tree({}) == (None, [])


def test_depth_limit_is_inclusive() -> None:
    assert parse_tree(nested(MAX_FILTER_DEPTH)) is not None


def test_convenience_parameters_are_checked() -> None:
    with pytest.raises(FilterError) as caught:
        request_tree(modified_after="2026-02-01T00:00:00Z", modified_before="2026-01-01")
    assert (caught.value.code, caught.value.field) == ("invalid_value", "modified_after")
    with pytest.raises(FilterError) as caught:
        request_tree(modified_before="soon")
    assert caught.value.field == "modified_before"
    with pytest.raises(FilterError) as caught:
        request_tree(path_prefixes=["/ok", "\ud800"])
    assert caught.value.field == "path_prefixes[1]"
    with pytest.raises(FilterError) as caught:
        request_tree(tags=["x"] * (MAX_LIST_VALUES + 1))
    assert caught.value.field == "tags"
    # naive times are UTC: equal bounds (an empty interval) are refused as reversed ones are
    # (test_a_time_range_of_no_time_is_refused), a second apart they are not
    with pytest.raises(FilterError):
        request_tree(modified_after="2026-01-01", modified_before="2026-01-01T00:00:00+00:00")
    assert request_tree(modified_after="2026-01-01", modified_before="2026-01-01T00:00:01+00:00")


def test_times_parse_as_documented() -> None:
    tree = request_tree(modified_after="2026-01-01T01:00:00+01:00", modified_before=1767225601)
    flt = build_filter("alice", tree)
    text = repr(flt)
    assert "gte=1767225600.0" in text and "lt=1767225601.0" in text
    lower = build_filter("alice", request_tree(modified_after="2026-01-01t00:00:00z"))
    assert "gte=1767225600.0" in repr(lower)  # RFC 3339 §5.6: "t" and "z" may be lower case


def test_compiled_filter_is_typed_and_always_scoped_to_the_caller() -> None:
    tree = parse_tree(
        {
            "or": [
                {"field": "path_prefix", "op": "eq", "value": "/A/"},
                {"field": "tags", "op": "nin", "value": ["x"]},
            ]
        }
    )
    flt = build_filter("alice", tree)
    assert isinstance(flt, models.Filter)
    assert flt.must[0] == models.FieldCondition(
        key="acl", match=models.MatchValue(value="user:alice")
    )
    assert "alice:/A" in repr(flt) and "bob" not in repr(flt)
    assert filter_depth(flt) <= MAX_FILTER_DEPTH + 3


def test_one_table_drives_the_endpoint_and_rcp() -> None:
    doc = filters_document()
    cap = rcp_filter_capability()
    assert {f["name"]: f["type"] for f in doc["fields"]} == cap["fields"] == dict(FIELD_TYPES)
    assert {f["name"]: f["operators"] for f in doc["fields"]} == cap["x-ncindex"]["fieldOperators"]
    assert doc["operators"] == cap["operators"] == list(ALL_OPERATORS)
    assert "acl" not in FIELDS and "folder_ancestors" not in FIELDS and "file_path" not in FIELDS
    for f in FIELDS.values():  # every advertised operator is accepted for its field
        for op in f.operators:
            value: Any = {
                "date": "2026-01-01",
                "int": 1,
                "keyword": f.values[0] if f.values else "text/x" if f.name == "mime_type" else "/x",
                "text": "word",
            }[f.type]
            if op in ("in", "nin"):
                value = [value]
            if op == "exists":
                value = True
            assert parse_tree({"field": f.name, "op": op, "value": value}) is not None


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from([*FIELDS, *ALL_OPERATORS, "and", "or", "not", "acl"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["and", "or", "not", "field", "op", "value", "x"]), children, max_size=4
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_arbitrary_input_is_accepted_or_refused_with_a_code(raw: Any) -> None:
    try:
        tree = parse_tree(raw)
    except FilterError as exc:
        assert exc.code in (
            "invalid_filter",
            "unknown_field",
            "unsupported_operator",
            "invalid_value",
        )
        assert exc.field.startswith("filter")
        return
    build_filter("alice", tree)  # whatever parses also compiles


def test_mime_types_match_whatever_their_case() -> None:
    """MIME types are case-insensitive (RFC 2045); Nextcloud stores them lower case."""
    tree = request_tree(mime_types=["TEXT/Markdown"])
    leaf = parse_tree({"field": "mime_type", "op": "in", "value": ["Application/PDF"]})
    assert tree is not None and tree.value == ("text/markdown",)  # type: ignore[union-attr]
    assert leaf is not None and leaf.value == ("application/pdf",)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"mime_types": ["text/plain", "text/*"]}, "mime_types[1]"),
        ({"filter": {"field": "mime_type", "op": "eq", "value": "image/*"}}, "filter.value"),
        ({"filter": {"field": "mime_type", "op": "in", "value": ["*/*"]}}, "filter.value[0]"),
    ],
)
def test_a_mime_type_pattern_is_refused_not_matched_against_nothing(
    params: dict[str, Any], field: str
) -> None:
    """The engine matches a keyword whole: ``text/*`` would silently match no file."""
    with pytest.raises(FilterError) as caught:
        request_tree(**params)
    assert (caught.value.code, caught.value.field) == ("invalid_value", field)
    assert "text/plain" in str(caught.value)


def test_a_path_typed_decomposed_is_matched_composed() -> None:
    """Nextcloud keeps paths in NFC; a prefix typed as e + U+0301 must still match ``Café``."""
    tree = request_tree(path_prefixes=["/Cafe\u0301/"])
    leaf = parse_tree({"field": "path", "op": "eq", "value": "Cafe\u0301.md"})
    assert tree is not None and tree.value == ("/Caf\u00e9",)  # type: ignore[union-attr]
    assert leaf is not None and leaf.value == "/Caf\u00e9.md"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"path_prefixes": ["/Projects\t"]}, "path_prefixes[0]"),
        ({"path_prefixes": ["/Projects", "/Notes\n"]}, "path_prefixes[1]"),
        ({"filter": {"field": "path", "op": "eq", "value": "/a\x1fb.md"}}, "filter.value"),
        ({"filter": {"field": "path_prefix", "op": "eq", "value": "/Pro\rjects"}}, "filter.value"),
    ],
)
def test_a_path_with_a_control_character_is_refused(params: dict[str, Any], field: str) -> None:
    """No Nextcloud name holds U+0000–U+001F (FilenameValidator::checkForbiddenCharacters),
    so a path with a tab or line break (copied along with it) matched nothing, silently."""
    with pytest.raises(FilterError) as caught:
        request_tree(**params)
    assert (caught.value.code, caught.value.field) == ("invalid_value", field)
    assert "control character" in str(caught.value)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"mime_types": ["garbage"]}, "mime_types[0]"),
        ({"mime_types": ["text/plain; charset=utf-8"]}, "mime_types[0]"),
        ({"tags": ["ok", " "]}, "tags[1]"),
        ({"filter": {"field": "tags", "op": "contains", "value": ""}}, "filter.value"),
        ({"category": "   "}, "category"),
        ({"filter": {"field": "category", "op": "eq", "value": "\t"}}, "filter.value"),
    ],
)
def test_a_value_no_document_can_hold_is_refused(params: dict[str, Any], field: str) -> None:
    """A MIME type is ``type/subtype`` (RFC 6838 §4.2) and a system tag has a name: anything
    else would match nothing, silently."""
    with pytest.raises(FilterError) as caught:
        request_tree(**params)
    assert (caught.value.code, caught.value.field) == ("invalid_value", field)


@pytest.mark.parametrize(
    "params",
    [
        {"category": "\u3000"},
        {"filter": {"field": "category", "op": "eq", "value": "\u00a0"}},
        {"path_prefixes": ["\u3000"]},
        {"filter": {"field": "path", "op": "eq", "value": "\u2003"}},
    ],
)
def test_a_name_of_a_unicode_space_is_not_blank(params: dict[str, Any]) -> None:
    """Nextcloud calls a name blank when PHP's ``trim`` leaves nothing of it (FilenameValidator
    ::validateFilename), and ``trim`` takes off ASCII space and controls only: a folder (a
    notes category) named U+3000, the ideographic space, or U+00A0 is valid. Python's
    ``strip`` refused such a category or path as blank."""
    request_tree(**params)


@pytest.mark.parametrize(
    ("after", "before"),
    [("2026-01-01", "2026-01-01"), ("2026-01-01T00:00:00Z", 1_767_225_600)],
)
def test_a_time_range_of_no_time_is_refused(after: Any, before: Any) -> None:
    """``modified_after`` equal to ``modified_before`` (an agent meaning "on that day") is
    the interval ``[t, t)``, which holds no time: it matched nothing, silently."""
    with pytest.raises(FilterError) as caught:
        request_tree(modified_after=after, modified_before=before)
    assert (caught.value.code, caught.value.field) == ("invalid_value", "modified_before")
    assert "next day" in str(caught.value)


T1, T2 = "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"


def _at(op: str, value: Any, field: str = "modified_at") -> dict[str, Any]:
    return {"field": field, "op": op, "value": value}


@pytest.mark.parametrize(
    ("tree", "field", "said"),
    [
        ({"and": [_at("gte", T2), _at("lt", T1)]}, "filter.and[0].value", "is later than"),
        ({"and": [_at("lt", T1), _at("gt", T2)]}, "filter.and[1].value", "is later than"),
        ({"and": [_at("gte", T1), _at("lt", T1)]}, "filter.and[1].value", "next day"),
        ({"and": [_at("gt", T1), _at("lte", T1)]}, "filter.and[1].value", "next day"),
        # through nested and-groups, inside an or's branch and a not
        (
            {"and": [_at("gte", T2), {"and": [_at("exists", True, "tags"), _at("lte", T1)]}]},
            "filter.and[0].value",
            "is later than",
        ),
        (
            {"or": [_at("eq", T1), {"and": [_at("gte", T2), _at("lt", T1)]}]},
            "filter.or[1].and[0].value",
            "is later than",
        ),
        ({"not": {"and": [_at("gt", T2), _at("lt", T1)]}}, "filter.not.and[0].value", "later"),
        (
            {"and": [_at("gte", 100, "size"), _at("lt", 10, "size")]},
            "filter.and[0].value",
            "greater",
        ),
    ],
)
def test_a_range_in_the_filter_that_holds_nothing_is_refused(
    tree: dict[str, Any], field: str, said: str
) -> None:
    """A reversed or empty range written in the tree matched nothing, silently, where
    ``modified_after``/``modified_before`` are refused: it is refused the same way, naming
    the bound's path, on REST/MCP and on RCP."""
    for parse in (parse_tree, lambda raw: parse_rcp_tree(raw)[0]):
        with pytest.raises(FilterError) as caught:
            parse(tree)
        assert (caught.value.code, caught.value.field) == ("invalid_value", field)
        assert said in caught.value.detail


def test_ranges_that_hold_something_are_taken() -> None:
    for tree in (
        {"and": [_at("gte", T1), _at("lte", T1)]},  # [t, t]: that instant
        {"and": [_at("gte", T1), _at("lt", T2)]},
        {"or": [_at("gte", T2), _at("lt", T1)]},  # either side: not one range
        {"and": [_at("gte", T2), {"or": [_at("lt", T1), _at("exists", True, "tags")]}]},
        {"and": [_at("gte", 200, "size"), _at("lt", T1)]},  # two fields
    ):
        assert parse_tree(tree) is not None, tree


def test_the_convenience_bounds_and_the_filter_make_one_range() -> None:
    """``modified_after`` later than a ``lt`` in the filter holds no time either."""
    with pytest.raises(FilterError) as caught:
        request_tree(modified_after=T2, filter=_at("lt", T1))
    assert (caught.value.code, caught.value.field) == ("invalid_value", "modified_after")
    assert "filter.value" in caught.value.detail
    with pytest.raises(FilterError) as caught:
        request_tree(
            modified_before=T1, filter={"and": [_at("exists", True, "tags"), _at("gte", T1)]}
        )
    assert (caught.value.code, caught.value.field) == ("invalid_value", "modified_before")
    assert request_tree(modified_after=T1, filter=_at("lt", T2)) is not None


_NFC = unicodedata.normalize("NFC", "Überprüfung")
_NFD = unicodedata.normalize("NFD", "Überprüfung")


def _tag(value: str) -> dict[str, Any]:
    return {"field": "tags", "op": "contains", "value": value}


@pytest.mark.parametrize(
    ("tree", "error", "hints"),
    [
        ({"not": _tag("URGENT")}, None, []),  # a value that must not hold decides nothing
        ({"not": {"not": _tag("URGENT")}}, None, []),  # nor under two: not read as must-hold
        ({"not": _tag(_NFD)}, None, []),
        ({"and": [{"and": [_tag(_NFD)]}]}, "filter.and[0].and[0].value", []),
        ({"field": "tags", "op": "in", "value": ["URGENT", "URGENT"]}, "filter.value[0]", []),
        ({"field": "tags", "op": "in", "value": ["URGENT", "urgent"]}, None, ["filter.value[0]"]),
        ({"and": [{"or": [_tag("URGENT"), _tag("x")]}]}, None, ["filter.and[0].or[0].value"]),
        ({"field": "tags", "op": "nin", "value": ["URGENT"]}, None, []),
    ],
)
def test_another_spelling_is_an_error_only_where_it_must_hold(
    tree: dict[str, Any], error: str | None, hints: list[str]
) -> None:
    """filters.other_spellings over trees: a tag the caller holds only as ``urgent`` or in NFC
    is an error naming the value where it must hold (through ``and`` alone, none of its list
    held), a hint under an ``or`` or beside a held value of its list, and nothing under a
    ``not`` (however deep) or for ``nin``. The caller's values alone decide (``stored``); a
    guard: it passes on the code it came with (d14fbf2)."""
    stored = {"tags": ["urgent", _NFC]}
    node = parse_tree(tree)
    if error is not None:
        with pytest.raises(FilterError) as raised:
            other_spellings(node, lambda f: stored.get(f, []), HTTP_LISTINGS)
        assert (raised.value.code, raised.value.field) == ("invalid_value", error)
        return
    got = other_spellings(node, lambda f: stored.get(f, []), HTTP_LISTINGS)
    assert [field for field, _ in got] == hints
