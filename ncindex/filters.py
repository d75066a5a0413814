"""The one place that builds Qdrant filters for search (DESIGN §9).

Every search is scoped to the caller's principal through ``acl``; the other parts come from the
request. Filters are typed ``qdrant_client.models`` objects, never strings, and the same filter
is applied in both prefetch branches so it holds before fusion.
"""

from __future__ import annotations

from collections.abc import Sequence

from qdrant_client import models

from ncindex.documents import DocType, principal


def search_filter(user: str, doc_types: Sequence[DocType] | None = None) -> models.Filter:
    """Filter for ``user``'s search: ``acl`` contains ``user:<uid>`` and, when given,
    ``doc_type`` is one of ``doc_types``."""
    must: list[models.Condition] = [
        models.FieldCondition(key="acl", match=models.MatchValue(value=principal(user)))
    ]
    if doc_types:
        must.append(
            models.FieldCondition(
                key="doc_type", match=models.MatchAny(any=sorted(t.value for t in doc_types))
            )
        )
    return models.Filter(must=must)
