"""The registry of sources: every indexed doc type has a source that lists, fetches and
verifies, and the reconciler, indexer, verifier and event router find it there."""

from __future__ import annotations

from typing import Any

import pytest

from ncindex.documents import DocType
from ncindex.ingest.events import COST_WITHOUT, DOCUMENT_EVENTS, reindex_action
from ncindex.search.verify import VERIFIERS
from ncindex.sources.base import Fetched, Listing, Source
from ncindex.sources.registry import NODE_TYPES, SOURCES
from ncindex.sync.reconcile import scan_types

OPERATIONS = ("list", "fetch", "verify")


def missing_operations(cls: type) -> list[str]:
    """The operations of :data:`OPERATIONS` that source class ``cls`` does not implement: all
    of them for a class that is not a :class:`Source`, else those still abstract."""
    if not issubclass(cls, Source):
        return list(OPERATIONS)
    return [
        name for name in OPERATIONS if getattr(getattr(cls, name), "__isabstractmethod__", False)
    ]


@pytest.mark.parametrize("doc_type", list(DocType))
def test_every_indexed_doc_type_has_a_source_with_list_fetch_and_verify(
    doc_type: DocType,
) -> None:
    source = SOURCES.get(doc_type)
    assert source is not None, f"{doc_type.value} has no entry in sources.registry.SOURCES"
    assert source.doc_type is doc_type
    assert missing_operations(type(source)) == []


def test_the_check_finds_a_source_without_verify() -> None:
    class ListsAndFetches(Source):  # a pretend doc type's source that forgot verify
        doc_type = DocType.NEWS_ITEM

        def list(self, ctx: Any, client: Any, memory: Any) -> Listing:
            return Listing()

        def fetch(
            self, ctx: Any, client: Any, ref: Any, current: Any, entry: Any = None
        ) -> Fetched:
            return Fetched(None)

    assert missing_operations(ListsAndFetches) == ["verify"]
    assert missing_operations(object) == list(OPERATIONS)
    with pytest.raises(TypeError):  # nor can a registry entry be made of it
        ListsAndFetches()  # type: ignore[abstract]


def test_the_reconciler_verifier_and_router_use_the_registry() -> None:
    assert scan_types() == list(SOURCES)
    assert {t: VERIFIERS[t.value] for t in SOURCES} == {t: s.verify for t, s in SOURCES.items()}
    assert set(NODE_TYPES) == {DocType.NOTE, DocType.FILE}
    for source in SOURCES.values():
        for route in source.events:
            assert DOCUMENT_EVENTS[route.event_class] == (source, route)
            assert COST_WITHOUT[route.event_class] == route.cost_without


@pytest.mark.parametrize(
    ("doc_type", "task", "kwargs"),
    [
        (DocType.FILE, "ncindex.index_node", {"user": "alice", "file_id": 7}),
        (DocType.NOTE, "ncindex.index_node", {"user": "alice", "file_id": 7}),
        (
            DocType.DECK_CARD,
            "ncindex.index_document",
            {"user": "alice", "doc_type": "deck_card", "doc_id": 7},
        ),
        (
            DocType.NEWS_ITEM,
            "ncindex.index_document",
            {"user": "alice", "doc_type": "news_item", "doc_id": 7},
        ),
    ],
)
def test_a_scan_change_is_routed_by_the_source(
    doc_type: DocType, task: str, kwargs: dict[str, Any]
) -> None:
    action = reindex_action("alice", doc_type, "7")
    assert (action.task, action.kwargs) == (task, kwargs)
