"""Documents, chunks and the point payload they become (DESIGN §4).

A *document* is one Nextcloud object (a note, a file, a Deck card, a News item) identified by
``(doc_type, doc_id)``; its ``doc_key`` is ``"{doc_type}:{doc_id}"`` because ids are unique
only within a type. A document's extracted text is cut into *chunks*; each chunk becomes one
*point* in the vector store whose payload carries the document's metadata.

Paths are per user: a shared file sits at a different path for each user who sees it, so the
payload keeps ``paths`` (user → path, for display), ``file_path`` (``"{user}:{path}"`` keys for
exact lookups) and ``folder_ancestors`` (``"{user}:{folder}"`` keys for strict path-prefix
filters). Paths are relative to the user's files root and start with ``/``.
"""

from __future__ import annotations

import hashlib
import posixpath
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class DocType(StrEnum):
    """The kinds of document ncindex indexes."""

    NOTE = "note"
    FILE = "file"
    DECK_CARD = "deck_card"
    NEWS_ITEM = "news_item"


@dataclass(frozen=True, slots=True)
class DocRef:
    """Identity of one document: its type and its id within that type (a string)."""

    doc_type: DocType
    doc_id: str

    @property
    def key(self) -> str:
        """The grouping key ``"{doc_type}:{doc_id}"``."""
        return f"{self.doc_type.value}:{self.doc_id}"

    @classmethod
    def parse(cls, key: str) -> DocRef:
        """Parse a ``doc_key``; raises ``ValueError`` for an unknown type or a missing id."""
        doc_type, sep, doc_id = key.partition(":")
        if not sep or not doc_id:
            raise ValueError(f"not a doc_key: {key!r}")
        return cls(DocType(doc_type), doc_id)


@dataclass(slots=True)
class SourceDocument:
    """A document as read from Nextcloud by one user, before chunking.

    ``modified_at`` is Unix seconds; ``size`` is bytes; ``path`` is the document's path in
    ``user``'s view (files and notes) or ``None``; ``text`` is the extracted plain text;
    ``owner`` is the owner's user id, ``None`` for a file no user owns (a group folder's,
    :attr:`~ncindex.nextcloud.webdav.DavEntry.mounted`); ``markdown`` says whether that
    text is markdown (the chunker then splits on its headings,
    lists and code blocks; it is not stored); ``truncated`` says that a bound
    (``max_document_chars``, pages, rows, seconds) cut the text short, or that part of the
    document could not be read (a PDF page), so what lies beyond it cannot be found
    (recorded for ``GET /v1/status`` and ``ncindex status``, not stored);
    ``extra`` holds the doc type's own payload fields.
    """

    ref: DocRef
    user: str
    owner: str | None
    title: str
    text: str
    etag: str
    modified_at: int
    path: str | None = None
    mime_type: str | None = None
    size: int | None = None
    category: str | None = None
    tags: list[str] = field(default_factory=list)
    url: str | None = None
    markdown: bool = False
    truncated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        """SHA-256 hex digest of the extracted text (changes iff the text changes)."""
        return text_hash(self.text)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One piece of a document's text with its character offsets into that text.

    ``text == document_text[char_start:char_end]`` always holds; ``index`` counts from 0.
    """

    index: int
    text: str
    char_start: int
    char_end: int


#: The types whose indexed text is :func:`titled_text`: a Deck card's and a News item's.
TITLED_TYPES = frozenset({DocType.DECK_CARD, DocType.NEWS_ITEM})


def titled_text(title: str, body: str) -> str:
    """The text a document of :data:`TITLED_TYPES` is indexed as: ``"{title}\\n\\n{body}"``,
    whitespace stripped at the ends, so that a search for the title's words finds it; its
    :func:`opening_title` characters are the title."""
    return f"{title}\n\n{body}".strip()


def opening_title(doc_type: str, title: str) -> str:
    """The title a document of ``doc_type`` titled ``title`` has at the start of its indexed
    text, as written there: ``title`` stripped (:func:`titled_text`) for :data:`TITLED_TYPES`,
    ``""`` for the others, whose text is the document's own (a note's or a file's)."""
    return title.strip() if doc_type in TITLED_TYPES else ""


def text_hash(text: str) -> str:
    """SHA-256 hex digest of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def point_id(ref: DocRef, content_hash: str, chunk_index: int) -> str:
    """Deterministic point id carrying its document: an RFC 9562 version 8 (custom) UUID whose
    first 64 bits are the first 8 bytes of SHA-256 of ``doc_key`` and whose last 64 those of
    SHA-256 of ``"{doc_key}:{content_hash}:{index}"``, with the version (4 bits) and variant
    (2 bits) written over them: 60 bits name the document (:func:`point_document`), 62 the
    chunk of that version.

    A new version of a document gets new ids, so it can be written beside the old one before
    the old one is deleted (DESIGN §4). The search groups hits by document from their ids
    alone, without reading payloads (:func:`point_document`). Points written before this
    scheme carry version 5 ids (``uuid5`` of ``"{doc_key}:{content_hash}:{index}"`` in the
    namespace ``5b7c1e52-8f0e-4c53-9d0a-6a4f3e2b1c90``), which name no document; they keep
    them until their document's text changes (``ncindex reindex`` copies points with their
    ids).
    """
    head = hashlib.sha256(ref.key.encode("utf-8")).digest()[:8]
    tail = hashlib.sha256(f"{ref.key}:{content_hash}:{chunk_index}".encode()).digest()[:8]
    value = int.from_bytes(head + tail, "big")
    value = (value & ~(0xF << 76)) | (0x8 << 76)  # version 8 (RFC 9562 §5.8)
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # variant 10 (RFC 9562 §4.1)
    return str(uuid.UUID(int=value))


def point_document(pid: str) -> str | None:
    """The document part of a point id written by :func:`point_id` — its first 18 characters
    (``"xxxxxxxx-xxxx-8xxx"``, the ``doc_key``'s 60-bit hash and the version digit), equal
    for every point of one document and, but for a hash collision (about 1 in 2⁶⁰ for a
    pair of documents), different between documents — or ``None`` for an id that carries no
    document (a uuid5 id of an earlier scheme, or anything not a canonical version 8 UUID
    string: lower-case hex, hyphenated, as both Qdrant engines return ids)."""
    if len(pid) == 36 and pid[14] == "8" and pid[19] in "89ab":
        return pid[:18]
    return None


def principal(user: str) -> str:
    """The ``acl`` entry for a Nextcloud user id: ``"user:{uid}"``."""
    return f"user:{user}"


def path_key(user: str, path: str) -> str:
    """The ``file_path`` entry for ``path`` in ``user``'s view: ``"{user}:{path}"``."""
    return f"{user}:{path}"


def folder_ancestors(user: str, path: str) -> list[str]:
    """Every folder above ``path`` in ``user``'s view, as ``"{user}:{folder}"`` keys.

    ``folder_ancestors("alice", "/Projects/2026/spec.md")`` is
    ``["alice:/", "alice:/Projects", "alice:/Projects/2026"]``. A path-prefix filter for
    ``/Projects`` is then one keyword match on ``"alice:/Projects"``, strict by construction
    (``/Projects`` never matches ``/Projects-old``).
    """
    folder = posixpath.dirname(normalize_path(path))
    out = [f"{user}:{folder}"]
    while folder != "/":
        folder = posixpath.dirname(folder)
        out.append(f"{user}:{folder}")
    return out[::-1]


def has_dot_segment(path: str) -> bool:
    """Whether ``path`` has a ``.`` or ``..`` segment (Nextcloud refuses such paths; a
    filter must not be read as another folder than it names)."""
    return not {".", ".."}.isdisjoint(path.split("/"))


def normalize_path(path: str) -> str:
    """``path`` with a leading ``/``, no trailing ``/`` and no ``.``/``..``/empty segments."""
    norm = posixpath.normpath("/" + path.strip("/"))
    return "/" if norm in ("/", "//") else norm


def build_payload(
    doc: SourceDocument,
    chunk: Chunk,
    chunk_count: int,
    *,
    acl: list[str],
    paths: dict[str, str],
    indexed_at: int,
    embedding_model: str,
    analyzer: str,
) -> dict[str, Any]:
    """The payload of one point (DESIGN §4).

    ``acl`` is the list of principals that may see the document; ``paths`` maps each user in
    it to the document's path in that user's view (empty for types without paths);
    ``analyzer`` is the version of the BM25 analysis chain that made the sparse vector
    (``ncindex.embedding.analyzer.ANALYZER_VERSION``).
    """
    payload: dict[str, Any] = {
        "doc_type": doc.ref.doc_type.value,
        "doc_id": doc.ref.doc_id,
        "doc_key": doc.ref.key,
        "acl": sorted(acl),
        "owner": doc.owner,
        "title": doc.title,
        "text": chunk.text,
        "chunk_index": chunk.index,
        "chunk_count": chunk_count,
        "char_start": chunk.char_start,
        "char_end": chunk.char_end,
        "content_hash": doc.content_hash,
        "etag": doc.etag,
        "modified_at": int(doc.modified_at),
        "indexed_at": int(indexed_at),
        "embedding_model": embedding_model,
        "analyzer": analyzer,
        "mime_type": doc.mime_type,
        "size": doc.size,
        "tags": list(doc.tags),
        "category": doc.category,
        "url": doc.url,
    }
    payload.update(path_fields(paths))
    payload.update(doc.extra)
    return payload


def path_fields(paths: dict[str, str]) -> dict[str, Any]:
    """The path part of a payload for a user → path map: ``paths``, ``file_path``,
    ``folder_ancestors`` (all empty when ``paths`` is empty)."""
    return {
        "paths": dict(sorted(paths.items())),
        "file_path": sorted(path_key(u, p) for u, p in paths.items()),
        "folder_ancestors": sorted({a for u, p in paths.items() for a in folder_ancestors(u, p)}),
    }
