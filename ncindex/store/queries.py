"""Every filter ncindex builds for itself (not from a caller's request): the first chunks of
documents, a user's documents, one doc type. Typed ``qdrant_client.models`` conditions, as
the store engines take them (:mod:`ncindex.store.port`); a caller's filters are compiled in
:mod:`ncindex.search.filters`, which uses :func:`acl_condition` here too.

One point of each document has ``chunk_index`` 0 and carries what describes the whole
document (title, etag, acl, paths …), so "the documents" are those points — but for a
document held in two versions for a while, which :func:`document_counts` counts once.
"""

from __future__ import annotations

from typing import Any

from qdrant_client import models

from ncindex.documents import DocType, principal
from ncindex.store.port import VectorStore

#: The first chunk of each document.
FIRST_CHUNK = models.FieldCondition(key="chunk_index", match=models.MatchValue(value=0))


def acl_condition(user: str) -> models.FieldCondition:
    """``acl`` contains the principal of ``user``: what ``user`` may read."""
    return models.FieldCondition(key="acl", match=models.MatchValue(value=principal(user)))


def doc_type_condition(doc_type: DocType) -> models.FieldCondition:
    """``doc_type`` is ``doc_type``."""
    return models.FieldCondition(key="doc_type", match=models.MatchValue(value=doc_type.value))


def first_chunks(*conditions: models.Condition) -> models.Filter:
    """The first chunks of the documents that match every one of ``conditions``."""
    return models.Filter(must=[*conditions, FIRST_CHUNK])


COUNT_ATTEMPTS = 3
"""Times :func:`document_counts` reads the counts when a document's versions change between
its reads (its old version deleted, or a newer written, meanwhile)."""


def document_counts(store: VectorStore, field: str, flt: models.Filter) -> dict[str, int]:
    """Each value of the keyword-indexed ``field`` held by a document whose first chunk
    matches ``flt`` (a :func:`~ncindex.store.queries.first_chunks` filter) → how many such
    documents hold it, each document counted once.

    The engine's facet counts points, and a document can have two first chunks: a new
    version is written beside the old one (new point ids, :func:`~ncindex.documents.point_id`)
    and the old one deleted after (``ncindex.index.steps``, ``ncindex reindex``'s copy into
    the collection it builds), and an old version whose deletion failed stays until the
    document's next write; one text written under both id schemes has two as well. A
    document is its ``doc_key``; so a second facet, of ``doc_key`` under the same filter,
    finds the documents with more than one first chunk (none outside such a window), and
    those alone are read (``doc_key``, ``field``, ``indexed_at``) to count each once, by the
    values of its newest version (greatest ``indexed_at``; the version
    :meth:`~ncindex.search.service.SearchService.context` reads). A version deleted or
    written between the reads is seen by the numbers of points disagreeing — the exact
    count taken before the values' facet against the ``doc_key`` facet's total, and that
    facet's count of a document against the versions read — and the counts are read
    again, up to :data:`COUNT_ATTEMPTS` times (then the last reading is answered). (Without
    the first comparison a version written between the two facets left its document
    counted nowhere, one deleted there counted it twice.) A version written and another
    deleted both within those reads leave the totals equal and can go unseen: Qdrant reads
    no snapshot.
    The ``doc_key`` facet answers one value per matching document, so it is asked for
    approximate counts (:meth:`~ncindex.store.port.VectorStore.facet_counts`: exact but for a
    point two segments hold for a moment, which is then read once more and the counts read
    again); for 100,000 documents on Qdrant Edge exact ones took 3–7 s, approximate 0.3–0.4 s.
    Exactness costs a count and a second facet of the engine and a hit per document read
    into Python, not their payloads.
    Raises ``StoreUnavailable``."""
    for _ in range(COUNT_ATTEMPTS):
        total = store.count(flt)
        counts = store.facet_counts(field, flt)
        per_document = store.facet_counts("doc_key", flt, exact=False)
        steady = sum(per_document.values()) == total
        twice = {k: n for k, n in per_document.items() if n > 1}
        if not twice:
            if steady:
                break
            continue
        versions: dict[str, list[dict[str, Any]]] = {key: [] for key in twice}
        found = _with_documents(flt, sorted(twice))
        for payload in store.scroll(found, ["doc_key", field, "indexed_at"]):
            versions[str(payload["doc_key"])].append(payload)
        for points in versions.values():
            for point in points:
                for value in _values(point, field):
                    counts[value] = counts.get(value, 0) - 1
            if points:
                newest = max(points, key=lambda p: p.get("indexed_at") or 0)
                for value in _values(newest, field):
                    counts[value] = counts.get(value, 0) + 1
        counts = {value: n for value, n in counts.items() if n > 0}
        if steady and all(len(versions[key]) == n for key, n in twice.items()):
            break
    return counts


def _with_documents(flt: models.Filter, doc_keys: list[str]) -> models.Filter:
    """``flt`` restricted to the points of ``doc_keys``."""
    keys = models.FieldCondition(key="doc_key", match=models.MatchAny(any=doc_keys))
    return flt.model_copy(update={"must": [*_conditions(flt.must), keys]})


def _conditions(must: Any) -> list[Any]:
    return [] if must is None else list(must) if isinstance(must, list) else [must]


def _values(payload: dict[str, Any], field: str) -> set[str]:
    """The values of ``field`` in ``payload`` as a facet counts them: each once, as text."""
    value = payload.get(field)
    if value is None:
        return set()
    return {str(v) for v in value} if isinstance(value, list) else {str(value)}
