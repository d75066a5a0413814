"""The index manifest: what the vector store holds for one user and doc type (DESIGN §7).

Reconciliation compares a source listing with this manifest. It is read with one filtered
scroll of payloads only (no vectors): ``doc_key``, ``etag``, ``acl``, ``paths`` and the other
:data:`MANIFEST_FIELDS` of the first chunk of every document whose ``acl`` names the user.
Reading the first chunk only gives one record per document; while a new version is being
written beside the old one a document may briefly show two first chunks, and then its etag is
reported as unknown (``None``), which makes the scan re-check it — harmless, since every task
re-reads Nextcloud.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from qdrant_client import models

from ncindex.documents import DocType
from ncindex.store.port import VectorStore
from ncindex.store.queries import acl_condition, doc_type_condition, first_chunks

MANIFEST_FIELDS = (
    "doc_key",
    "etag",
    "acl",
    "paths",
    "tags",
    "indexed_at",
    "mime_type",
    "extractor",
    "extractor_version",
)


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One indexed document as the store knows it: ``doc_id``, ``etag`` (``None`` when two
    versions disagree), ``acl`` principals and ``path``, the document's path in the user's
    view (``None`` for types without paths), ``tags`` the system tags it was indexed with,
    ``indexed_at`` when that version was written (Unix seconds; ``None`` if not recorded);
    ``mime_type``, ``extractor`` and ``extractor_version`` as its payload has them (``None``
    when absent: :mod:`ncindex.text.versions` reads them)."""

    doc_id: str
    etag: str | None
    acl: tuple[str, ...]
    path: str | None
    tags: tuple[str, ...] = ()
    indexed_at: int | None = None
    mime_type: str | None = None
    extractor: str | None = None
    extractor_version: int | None = None


def manifest_filter(user: str, doc_type: DocType) -> models.Filter:
    """First chunks of the documents of ``doc_type`` that ``user`` may see."""
    return first_chunks(doc_type_condition(doc_type), acl_condition(user))


def load_manifest(store: VectorStore, user: str, doc_type: DocType) -> dict[str, ManifestEntry]:
    """``doc_id`` → :class:`ManifestEntry` for every document of ``doc_type`` in ``user``'s
    ``acl``. Raises ``StoreUnavailable`` when the store fails."""
    out: dict[str, ManifestEntry] = {}
    prefix = f"{doc_type.value}:"
    for payload in store.scroll(manifest_filter(user, doc_type), MANIFEST_FIELDS):
        key = str(payload.get("doc_key", ""))
        if not key.startswith(prefix):
            continue
        doc_id = key[len(prefix) :]
        etag = payload.get("etag")
        previous = out.get(doc_id)
        if previous is not None and previous.etag != etag:
            etag = None
        paths = payload.get("paths") or {}
        out[doc_id] = ManifestEntry(
            doc_id=doc_id,
            etag=None if etag is None else str(etag),
            acl=tuple(payload.get("acl") or ()),
            path=paths.get(user),
            tags=tuple(str(t) for t in payload.get("tags") or ()),
            indexed_at=_int_or_none(payload.get("indexed_at")),
            mime_type=_str_or_none(payload.get("mime_type")),
            extractor=_str_or_none(payload.get("extractor")),
            extractor_version=_int_or_none(payload.get("extractor_version")),
        )
    return out


def _int_or_none(value: object) -> int | None:
    """``value`` as an int when it is a number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return int(value)


def _str_or_none(value: object) -> str | None:
    """``value`` when it is a string, else ``None``."""
    return value if isinstance(value, str) else None
