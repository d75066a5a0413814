"""What the search page offers as filters: the caller's folders and tags (``GET /v1/folders``,
``GET /v1/tags``).

Both are read from the index, restricted to the documents whose ``acl`` names the caller, so
a caller never learns another user's folder or tag: folders come from the caller's own
``folder_ancestors`` keys (``"{caller}:{folder}"``, the caller's view, a shared folder under
the name it has in the caller's files), tags from the documents the caller can read. Both are
the engine's facets of one point per document (``chunk_index`` 0), so a listing costs the
engine a pass over the caller's documents, not a read of their payloads into Python. Like
search candidates before verify-on-read, they reflect the index, which may trail Nextcloud by
the sync delay.
"""

from __future__ import annotations

from qdrant_client import models

from ncindex.documents import principal
from ncindex.store.port import VectorStore


def _caller_documents(user: str) -> models.Filter:
    return models.Filter(
        must=[
            models.FieldCondition(key="acl", match=models.MatchValue(value=principal(user))),
            models.FieldCondition(key="chunk_index", match=models.MatchValue(value=0)),
        ]
    )


def caller_folders(store: VectorStore, user: str) -> list[str]:
    """Every folder holding an indexed document ``user`` can read, in ``user``'s view
    (``"/Documents/Oncology"``; the root ``"/"`` left out), sorted: the ``folder_ancestors``
    values of those documents (a facet, counted in the engine) that are ``user``'s keys.
    Raises ``StoreUnavailable``."""
    prefix = f"{user}:"
    keys = store.facet_values("folder_ancestors", _caller_documents(user))
    return sorted(k[len(prefix) :] for k in keys if k.startswith(prefix) and k != prefix + "/")


def caller_tags(store: VectorStore, user: str) -> list[str]:
    """Every system tag on an indexed document ``user`` can read, sorted. Raises
    ``StoreUnavailable``."""
    return sorted(store.facet_values("tags", _caller_documents(user)))
