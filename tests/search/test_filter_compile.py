"""Each filter field and operator, compiled to Qdrant and run on Qdrant Edge over the fixture
corpus, matches exactly the documents the reference evaluator says (known answers), and so
does any generated tree."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from search_corpus import T0, USERS, Doc, expected

from ncindex.errors import FilterError
from ncindex.search.filters import (
    build_filter,
    field_verdict,
    parse_tree,
    path_verdict,
    request_tree,
)
from ncindex.store.qdrant_edge import QdrantEdgeStore


def matched(store: QdrantEdgeStore, user: str, tree: dict[str, Any] | None) -> set[str]:
    flt = build_filter(user, parse_tree(tree))
    return {p["doc_key"] for p in store.scroll(flt, ["doc_key"])}


DAY = 86_400
CASES: list[dict[str, Any]] = [
    {"field": "doc_type", "op": "eq", "value": "note"},
    {"field": "doc_type", "op": "ne", "value": "file"},
    {"field": "doc_type", "op": "in", "value": ["deck_card", "news_item"]},
    {"field": "doc_type", "op": "nin", "value": ["note", "file", "deck_card"]},
    {"field": "doc_id", "op": "eq", "value": "1004"},
    {"field": "doc_id", "op": "eq", "value": 1004},
    {"field": "doc_id", "op": "in", "value": ["1000", 1001, "1002"]},
    {"field": "owner", "op": "eq", "value": "bob"},
    {"field": "owner", "op": "ne", "value": "bob"},
    {"field": "owner", "op": "nin", "value": ["alice", "carol"]},
    {"field": "owner", "op": "exists", "value": True},
    {"field": "title", "op": "contains", "value": "budget"},
    {"field": "title", "op": "contains", "value": "Reef REPORT"},
    {"field": "title", "op": "contains", "value": "lighthouse review"},
    {"field": "title", "op": "exists"},
    {"field": "mime_type", "op": "eq", "value": "application/pdf"},
    {"field": "mime_type", "op": "in", "value": ["text/plain", "text/markdown"]},
    {"field": "mime_type", "op": "exists", "value": False},
    {"field": "mime_type", "op": "ne", "value": "text/plain"},
    {"field": "category", "op": "eq", "value": "Work"},
    {"field": "category", "op": "eq", "value": ""},
    {"field": "category", "op": "exists", "value": True},
    {"field": "category", "op": "nin", "value": ["Work"]},
    {"field": "tags", "op": "contains", "value": "urgent"},
    {"field": "tags", "op": "in", "value": ["review", "finance"]},
    {"field": "tags", "op": "nin", "value": ["urgent"]},
    {"field": "tags", "op": "exists", "value": True},
    {"field": "tags", "op": "exists", "value": False},
    {"field": "modified_at", "op": "gt", "value": T0 + 10 * DAY},
    {"field": "modified_at", "op": "gte", "value": "2026-01-11T00:00:00Z"},
    {"field": "modified_at", "op": "lt", "value": "2026-01-05T12:00:00+02:00"},
    {"field": "modified_at", "op": "lte", "value": "2026-01-05"},
    {"field": "modified_at", "op": "eq", "value": T0 + 3 * DAY},
    {"field": "modified_at", "op": "ne", "value": "2026-01-04T00:00:00"},
    {"field": "size", "op": "gt", "value": 2000},
    {"field": "size", "op": "lte", "value": 500.5},
    {"field": "size", "op": "eq", "value": 1300},
    {"field": "size", "op": "in", "value": [100, 500, 900]},
    {"field": "size", "op": "nin", "value": [100]},
    {"field": "size", "op": "exists", "value": False},
    {"field": "board_id", "op": "eq", "value": "1"},
    {"field": "board_id", "op": "eq", "value": 2},
    {"field": "stack_id", "op": "in", "value": ["10", "12"]},
    {"field": "stack_id", "op": "exists"},
    {"field": "feed_id", "op": "ne", "value": "7"},
    {"field": "path", "op": "eq", "value": "/Projects/doc-1.md"},
    {"field": "path", "op": "in", "value": ["Projects/Lighthouse/doc-29.md", "/doc-25.md"]},
    {"field": "path", "op": "exists", "value": True},
    {"field": "path", "op": "exists", "value": False},
    {"field": "path", "op": "nin", "value": ["/Projects/doc-1.md"]},
    {"field": "path_prefix", "op": "eq", "value": "/Projects/Lighthouse"},
    {"field": "path_prefix", "op": "eq", "value": "/Projects/Lighthouse/"},
    {"field": "path_prefix", "op": "eq", "value": "/Projects"},
    {"field": "path_prefix", "op": "eq", "value": "/"},
    {"field": "path_prefix", "op": "eq", "value": "/Projects/doc-1.md"},
    {"field": "path_prefix", "op": "in", "value": ["/Archive", "/Notes"]},
    {"field": "path_prefix", "op": "ne", "value": "/Projects"},
    {"field": "path_prefix", "op": "nin", "value": ["/Projects", "/Notes"]},
    {"field": "path_prefix", "op": "eq", "value": "/Shared with bob"},
    {
        "and": [
            {"field": "doc_type", "op": "eq", "value": "file"},
            {
                "or": [
                    {"field": "tags", "op": "contains", "value": "urgent"},
                    {"field": "size", "op": "lt", "value": 1000},
                ]
            },
            {"not": {"field": "path_prefix", "op": "eq", "value": "/Projects/Lighthouse-old"}},
        ]
    },
    {"not": {"not": {"field": "owner", "op": "eq", "value": "carol"}}},
    {
        "or": [
            {"field": "doc_type", "op": "eq", "value": "news_item"},
            {"field": "category", "op": "eq", "value": "Home"},
        ]
    },
]


@pytest.mark.parametrize("tree", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("user", USERS)
def test_known_answers(
    corpus: QdrantEdgeStore, corpus_docs: list[Doc], tree: dict[str, Any], user: str
) -> None:
    """A generated tree matches what the reference says; one bounding a field to an empty
    range among conditions that must hold together (in a branch of an ``or`` or ``not``
    too) is refused instead (``filters.refuse_empty_range``), naming the bound."""
    try:
        parse_tree(tree)
    except FilterError as exc:
        assert exc.code == "invalid_value" and "so nothing can match" in str(exc), exc
        reject()
    assert matched(corpus, user, tree) == expected(corpus_docs, tree, user)


def test_cases_are_discriminating(corpus_docs: list[Doc]) -> None:
    """Each case selects some but not all of some user's documents (else it tests little);
    the exceptions are the always-true ``exists`` checks."""

    def trivial(tree: dict[str, Any]) -> bool:
        return all(
            expected(corpus_docs, tree, u) in (set(), expected(corpus_docs, None, u)) for u in USERS
        )

    weak = [t for t in CASES if trivial(t)]
    assert weak == [
        {"field": "owner", "op": "exists", "value": True},
        {"field": "title", "op": "contains", "value": "lighthouse review"},  # all words: none
        {"field": "title", "op": "exists"},
    ], weak


def test_strict_prefix_never_matches_a_sibling(
    corpus: QdrantEdgeStore, corpus_docs: list[Doc]
) -> None:
    tree = {"field": "path_prefix", "op": "eq", "value": "/Projects/Lighthouse"}
    keys = matched(corpus, "alice", tree)
    assert keys
    for key in keys:
        path = next(d for d in corpus_docs if d.key == key).payload["paths"]["alice"]
        assert path.startswith("/Projects/Lighthouse/")


def test_paths_are_the_callers_own_view(corpus: QdrantEdgeStore, corpus_docs: list[Doc]) -> None:
    # bob sees alice's shares under "/Shared with bob"; alice's path means nothing for bob
    shared = matched(
        corpus, "bob", {"field": "path_prefix", "op": "eq", "value": "/Shared with bob"}
    )
    assert shared and all(d.payload["owner"] != "bob" for d in corpus_docs if d.key in shared)
    assert not matched(
        corpus, "carol", {"field": "path_prefix", "op": "eq", "value": "/Shared with bob"}
    )


# --- generated trees ------------------------------------------------------------------------

LEAVES = st.sampled_from([c for c in CASES if "field" in c])


def trees(depth: int) -> st.SearchStrategy[dict[str, Any]]:
    if depth == 0:
        return LEAVES
    sub = trees(depth - 1)
    return st.one_of(
        LEAVES,
        st.lists(sub, min_size=1, max_size=3).map(lambda c: {"and": c}),
        st.lists(sub, min_size=1, max_size=3).map(lambda c: {"or": c}),
        sub.map(lambda c: {"not": c}),
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tree=trees(3), user=st.sampled_from(USERS))
def test_generated_trees_match_the_reference(
    corpus: QdrantEdgeStore, corpus_docs: list[Doc], tree: dict[str, Any], user: str
) -> None:
    assert matched(corpus, user, tree) == expected(corpus_docs, tree, user)


def test_path_verdict_judges_the_path_leaves_alone() -> None:
    """Kleene logic over the path leaves; other leaves are unknown (``None``)."""
    tree = request_tree(path_prefixes=["/Projects"], doc_types=["file"])
    assert path_verdict(tree, "/Projects/a.md") is None  # doc_type decides
    assert path_verdict(tree, "/Projects") is None
    assert path_verdict(tree, "/Projects-old/a.md") is False
    either = parse_tree(
        {"or": [
            {"field": "path_prefix", "op": "eq", "value": "/A"},
            {"field": "doc_type", "op": "eq", "value": "note"},
        ]}
    )  # fmt: skip
    assert path_verdict(either, "/A/x.md") is True
    assert path_verdict(either, "/B/x.md") is None
    negated = parse_tree({"not": {"field": "path", "op": "in", "value": ["/A/x.md", "/B.md"]}})
    assert path_verdict(negated, "/A/x.md") is False and path_verdict(negated, "/C.md") is True
    assert path_verdict(parse_tree({"field": "path", "op": "ne", "value": "/A"}), "/A") is False
    assert (
        path_verdict(parse_tree({"field": "path_prefix", "op": "eq", "value": "/"}), "/z") is True
    )
    assert path_verdict(None, "/anything") is True


def test_field_verdict_judges_the_leaves_of_the_fields_given_alone() -> None:
    """A Deck card found in another stack (``Checked.moved_to``) is held to the tree's
    ``stack_id``/``board_id`` leaves with its values now; other leaves are unknown."""
    now = {"stack_id": "7", "board_id": "2"}
    stack_is = parse_tree({"field": "stack_id", "op": "eq", "value": "5"})
    assert field_verdict(stack_is, now) is False
    assert field_verdict(parse_tree({"field": "stack_id", "op": "eq", "value": 7}), now) is True
    either = parse_tree(
        {"or": [
            {"field": "board_id", "op": "in", "value": ["2", "3"]},
            {"field": "doc_type", "op": "eq", "value": "note"},
        ]}
    )  # fmt: skip
    assert field_verdict(either, now) is True
    assert field_verdict(either, {"stack_id": "7", "board_id": "4"}) is None  # doc_type decides
    assert field_verdict(parse_tree({"not": {"field": "stack_id", "op": "nin", "value": ["7"]}}),
                         now) is True  # fmt: skip
    assert field_verdict(parse_tree({"field": "board_id", "op": "ne", "value": "2"}), now) is False
    assert field_verdict(parse_tree({"field": "stack_id", "op": "exists", "value": False}),
                         now) is False  # fmt: skip
    assert field_verdict(request_tree(doc_types=["deck_card"]), now) is None
    assert field_verdict(stack_is, {}) is None  # nothing known of the card's stack
    assert field_verdict(None, now) is True
