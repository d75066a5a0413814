"""What both vector-store engines share: the payload indexes, names and the document filters.

Kept apart from :mod:`ncindex.store.port` (the interface) so the engines agree on one list of
indexed fields (DESIGN §4) and on how a document's points are selected.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from enum import StrEnum
from types import MappingProxyType
from typing import TypeVar

from qdrant_client import models

T = TypeVar("T")

RRF_K = 10
"""Reciprocal-rank-fusion constant: a hit at 0-based rank ``r`` of one branch scores
``1 / (r + RRF_K)``. Qdrant's default is 2; on SciFact (benchmarks/RESULTS.md, "Quality
tuning") k=2 was the worst of 2, 10, 20, 60 and k=10 the best on the tuning half of the
queries, so both engines are given 10."""

UPSERT_BATCH = 256
"""Points per write request (bounds request size; a version is complete only after all)."""


class IndexKind(StrEnum):
    """The kind of payload index a field gets."""

    KEYWORD = "keyword"
    INTEGER = "integer"
    TEXT = "text"


PAYLOAD_INDEXES: Mapping[str, IndexKind] = MappingProxyType(
    {
        **{
            name: IndexKind.KEYWORD
            for name in (
                "doc_type",
                "doc_id",
                "doc_key",
                "acl",
                "owner",
                "mime_type",
                "tags",
                "category",
                "file_path",
                "folder_ancestors",
                "board_id",
                "stack_id",
                "feed_id",
            )
        },
        **{name: IndexKind.INTEGER for name in ("modified_at", "size", "chunk_index")},
        "title": IndexKind.TEXT,
    }
)
"""Every payload field a filter reads (DESIGN §4) → the index it gets: the public filter fields
(``ncindex.search.filter_fields.FIELDS``) and those the product filters on itself — ``acl``
(every search), ``doc_key`` (a document's points), ``file_path`` and ``folder_ancestors``
(``path``, ``path_prefix``), ``chunk_index`` (first chunks, context windows). Fields only
read back (``content_hash``, ``etag``, ``indexed_at``, ``embedding_model``) get none: their
indexes served no filter and took 4 % of the disk and 3 % of a search process's memory at
100,000 chunks (``benchmarks/scale_reading.md``). Times are integer seconds."""


TEXT_ASCII_FOLDING = True
"""Whether the full-text index of ``title`` folds letters to ASCII (Qdrant's ``TextIndexParams``
``ascii_folding``, on the title and the query alike): so a query word meets a title word as
the BM25 analyzer's folded forms meet them in a text (``ncindex.embedding.analyzer``:
``Munchen`` finds ``München``, ``Strasse`` ``Straße``, ``cafe`` ``Café``), and the title filter
``contains`` folds too. An index made before without it is made again by ``ensure_collection``
from the stored titles (:func:`text_index_differs`; no point is rewritten)."""


def text_index_differs(kind: IndexKind, ascii_folding: bool | None) -> bool:
    """Whether an existing payload index of ``kind`` whose parameters say ``ascii_folding``
    (``None``: unset, Qdrant's default ``false``) is not the index :data:`TEXT_ASCII_FOLDING`
    asks for; ``False`` for every kind but :attr:`IndexKind.TEXT`."""
    return kind is IndexKind.TEXT and bool(ascii_folding) != TEXT_ASCII_FOLDING


def rrf_parameters(
    fusion_is_rrf: bool,
    rrf_k: int | None,
    weights: Sequence[float] | None,
    present: Sequence[bool],
) -> tuple[int, list[float] | None]:
    """The RRF constant and the weights of the branches ``present`` (``(dense, sparse)``
    flags) for one query: ``rrf_k`` or :data:`RRF_K`, and ``weights`` cut to the branches that
    run (``None`` when not given). Raises ``ValueError`` for weights with DBSF, weights not of
    length 2, a negative weight, or ``rrf_k`` below 1."""
    k = RRF_K if rrf_k is None else int(rrf_k)
    if k < 1:
        raise ValueError(f"rrf_k must be at least 1, not {k}")
    if weights is None:
        return k, None
    if not fusion_is_rrf:
        raise ValueError("branch weights apply to RRF only")
    if len(weights) != 2 or any(w < 0 for w in weights):
        raise ValueError(f"weights must be two non-negative numbers (dense, sparse): {weights}")
    return k, [float(w) for w, on in zip(weights, present, strict=True) if on]


def model_slug(model_name: str) -> str:
    """A collection-safe slug of an embedding model name.

    The last path segment, lower-cased, with every run of characters other than ``a-z0-9``
    replaced by ``-``: ``"sentence-transformers/all-MiniLM-L6-v2"`` → ``"all-minilm-l6-v2"``.
    Raises ``ValueError`` when nothing is left.
    """
    last = model_name.strip().rstrip("/").rsplit("/", 1)[-1]
    slug = re.sub(r"[^a-z0-9]+", "-", last.lower()).strip("-")
    if not slug:
        raise ValueError(f"cannot make a model slug of {model_name!r}")
    return slug


def collection_name(prefix: str, slug: str) -> str:
    """The collection of one embedding model: ``"{prefix}-{slug}"``."""
    return f"{prefix}-{slug}"


def document_filter(doc_key: str, keep: Collection[str] | None = None) -> models.Filter:
    """The points of ``doc_key``; with ``keep`` (point ids), all but those."""
    return models.Filter(
        must=[models.FieldCondition(key="doc_key", match=models.MatchValue(value=doc_key))],
        must_not=[models.HasIdCondition(has_id=sorted(keep))] if keep else None,
    )


def documents_filter(doc_keys: Sequence[str]) -> models.Filter:
    """The points of every document in ``doc_keys``."""
    return models.Filter(
        must=[models.FieldCondition(key="doc_key", match=models.MatchAny(any=list(doc_keys)))]
    )


def batches(items: Sequence[T], size: int = UPSERT_BATCH) -> list[Sequence[T]]:
    """``items`` cut into consecutive lists of at most ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]
