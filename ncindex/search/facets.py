"""What the search page offers as filters: the caller's folders and tags (``GET /v1/folders``,
``GET /v1/tags``).

Both are read from the index, restricted to the documents whose ``acl`` names the caller, so
a caller never learns another user's folder or tag: folders come from the caller's own
``folder_ancestors`` keys (``"{caller}:{folder}"``, the caller's view, a shared folder under
the name it has in the caller's files), tags from the documents the caller can read. One point
per document is read (``chunk_index`` 0). Like search candidates before verify-on-read, they
reflect the index, which may trail Nextcloud by the sync delay.
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
    (``"/Documents/Oncology"``; the root ``"/"`` left out), sorted. Raises
    ``StoreUnavailable``."""
    prefix = f"{user}:"
    folders: set[str] = set()
    for payload in store.scroll(_caller_documents(user), ["folder_ancestors"]):
        for key in payload.get("folder_ancestors") or []:
            if key.startswith(prefix) and key != prefix + "/":
                folders.add(key[len(prefix) :])
    return sorted(folders)


def caller_tags(store: VectorStore, user: str) -> list[str]:
    """Every system tag on an indexed document ``user`` can read, sorted. Raises
    ``StoreUnavailable``."""
    tags: set[str] = set()
    for payload in store.scroll(_caller_documents(user), ["tags"]):
        tags.update(str(t) for t in payload.get("tags") or [])
    return sorted(tags)
