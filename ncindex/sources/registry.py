"""The registry of document sources: doc type → its :class:`~ncindex.sources.base.Source`.

The reconciler, the indexer, the verifier and the event router look a doc type up here
instead of branching on it. A new doc type is one module in :mod:`ncindex.sources` (a
``Source`` subclass: list, fetch, verify, its etag formula and event routes) and one entry
below (its ``DocType`` member in :mod:`ncindex.documents` names it);
``tests/sources/test_registry.py`` fails when a doc type lacks a source or an operation.
"""

from __future__ import annotations

from ncindex.documents import DocType
from ncindex.sources import deck_card, file, news_item, note
from ncindex.sources.base import Source

SOURCES: dict[DocType, Source] = {
    DocType.NOTE: note.SOURCE,
    DocType.FILE: file.SOURCE,
    DocType.DECK_CARD: deck_card.SOURCE,
    DocType.NEWS_ITEM: news_item.SOURCE,
}
"""Every indexed doc type's source, in a stable order."""

NODE_TYPES = tuple(t for t, s in SOURCES.items() if s.node)
"""The doc types that are files in the user's files (indexed by file id)."""
