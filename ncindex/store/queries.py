"""Every filter ncindex builds for itself (not from a caller's request): the first chunks of
documents, a user's documents, one doc type. Typed ``qdrant_client.models`` conditions, as
the store engines take them (:mod:`ncindex.store.port`); a caller's filters are compiled in
:mod:`ncindex.search.filters`, which uses :func:`acl_condition` here too.

One point of each document has ``chunk_index`` 0 and carries what describes the whole
document (title, etag, acl, paths …), so "the documents" are those points.
"""

from __future__ import annotations

from qdrant_client import models

from ncindex.documents import DocType, principal

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
