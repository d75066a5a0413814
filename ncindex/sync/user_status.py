"""One user's view of the index: what ``index_status`` of the MCP server answers (a minimal
version of the per-user status; a fuller one keeps this name and signature).

Only the caller's own counts, never another user's:

* ``doc_types`` — per doc type, ``indexed``: documents whose ``acl`` lists the user (their
  points with ``chunk_index`` 0, counted in the live collection);
* ``pending`` — index and evict tasks waiting out their debounce window or queued for the
  user (the debounce claims ``<namespace>:debounce:{index,evict}:<user>:…`` of
  :mod:`ncindex.ingest.events`; a task deletes its claim when it starts);
* ``failed`` — the user's parked documents (the dead letter, :mod:`ncindex.index.deadletter`).
"""

from __future__ import annotations

from typing import Any

from qdrant_client import models

from ncindex.documents import DocType, principal
from ncindex.index.deadletter import DeadLetters
from ncindex.runtime import Services

_GLOB_SPECIALS = "\\*?[]"


def user_status(services: Services, user_id: str) -> dict[str, Any]:
    """``{"user", "doc_types": {doc_type: {"indexed": n}}, "documents": n, "pending": n,
    "failed": n}`` for ``user_id`` (a Nextcloud user id). Raises ``StoreUnavailable`` when the
    store cannot be read and ``redis.RedisError`` when Redis cannot."""
    acl = models.FieldCondition(key="acl", match=models.MatchValue(value=principal(user_id)))
    head = models.FieldCondition(key="chunk_index", match=models.MatchValue(value=0))
    store = services.models.view().live.store
    doc_types: dict[str, dict[str, int]] = {}
    for doc_type in DocType:
        kind = models.FieldCondition(key="doc_type", match=models.MatchValue(value=doc_type))
        count = store.count(models.Filter(must=[acl, head, kind]))
        doc_types[doc_type.value] = {"indexed": count}
    keys = services.settings.names
    escaped = "".join(f"\\{c}" if c in _GLOB_SPECIALS else c for c in user_id)
    pending = sum(
        1
        for operation in ("index", "evict")
        for _ in services.redis.scan_iter(
            match=f"{keys.debounce_prefix}{operation}:{escaped}:*", count=500
        )
    )
    failed = sum(1 for e in DeadLetters(services.redis, keys).entries() if e.user == user_id)
    return {
        "user": user_id,
        "doc_types": doc_types,
        "documents": sum(v["indexed"] for v in doc_types.values()),
        "pending": pending,
        "failed": failed,
    }
