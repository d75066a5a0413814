"""A fixture corpus with every filterable field varied, and an independent reference
evaluator of the filter language (the oracle the compiled Qdrant filters are checked against).

Documents have one chunk each; their payloads are built with the real
:func:`ncindex.documents.build_payload`. Users: alice, bob, carol.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from ncindex.documents import (
    Chunk,
    DocRef,
    DocType,
    SourceDocument,
    build_payload,
    normalize_path,
    point_id,
    principal,
)
from ncindex.embedding.analyzer import ANALYZER_VERSION
from ncindex.embedding.embedder import Embedder
from ncindex.search.filters import parse_time
from ncindex.store.port import PointRecord, VectorStore

USERS = ("alice", "bob", "carol")
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z

TOPICS = [
    "The lighthouse lens must be polished every spring before the storms arrive.",
    "Vitamin D supplements improved bone density in elderly patients.",
    "The quarterly budget review moved the foghorn compressor to next year.",
    "Coral reefs bleach when the ocean temperature rises for several weeks.",
    "A new espresso machine arrived in the office kitchen on Monday.",
    "Deep learning models need careful evaluation on held-out data.",
    "Migratory birds navigate using the magnetic field of the earth.",
    "The bicycle lane on the river road will be repaved in April.",
]
TITLE_WORDS = ["Lighthouse plan", "Budget review", "Reef report", "Office notes", "Bird survey"]
FOLDERS = ["/Projects", "/Projects/Lighthouse", "/Projects/Lighthouse-old", "/Archive/2025", "/"]
TAGS = ["urgent", "review", "finance"]
MIMES = ["text/markdown", "text/plain", "application/pdf"]
CATEGORIES = ["Work", "Home", ""]


@dataclass
class Doc:
    """One fixture document: its payload and, for convenience, its key."""

    key: str
    payload: dict[str, Any]
    text: str = field(repr=False, default="")


def make_docs(count: int = 64, seed: int = 7) -> list[Doc]:
    """``count`` documents cycling through types, with owners, sharing, folders, tags, dates,
    sizes… drawn from a seeded generator (so every user gets a varied set)."""
    rng = random.Random(seed)
    docs = []
    types = list(DocType)
    for i in range(count):
        doc_type = types[i % len(types)]
        owner = rng.choice(USERS)
        sharees = [u for u in USERS if u != owner and rng.random() < 0.3]
        users = [owner, *sharees]
        text = f"{rng.choice(TOPICS)} Item number {i}."
        title = f"{rng.choice(TITLE_WORDS)} {i}"
        paths: dict[str, str] = {}
        extra: dict[str, Any] = {}
        mime = size = category = url = None
        tags: list[str] = []
        if doc_type in (DocType.FILE, DocType.NOTE):
            folder = rng.choice(FOLDERS) if doc_type is DocType.FILE else "/Notes"
            name = f"doc-{i}.md"
            paths[owner] = normalize_path(f"{folder}/{name}")
            for s in sharees:  # a share sits elsewhere in the sharee's view
                paths[s] = normalize_path(f"/Shared with {s}/{name}")
            tags = [t for t in TAGS if rng.random() < 0.4]
        if doc_type is DocType.FILE:
            mime = rng.choice(MIMES)
            size = 100 * rng.randint(1, 30)
        if doc_type is DocType.NOTE:
            category = rng.choice(CATEGORIES)
        if doc_type is DocType.DECK_CARD:
            extra = {"board_id": str(rng.randint(1, 2)), "stack_id": str(rng.randint(10, 12))}
        if doc_type is DocType.NEWS_ITEM:
            extra = {"feed_id": str(rng.randint(7, 8))}
            url = f"https://news.example.test/{i}"
        source = SourceDocument(
            ref=DocRef(doc_type, str(1000 + i)),
            user=owner,
            owner=owner,
            title=title,
            text=text,
            etag=f"etag{i}",
            modified_at=T0 + 86_400 * i,
            path=paths.get(owner),
            mime_type=mime,
            size=size,
            category=category,
            tags=tags,
            url=url,
            extra=extra,
        )
        payload = build_payload(
            source,
            Chunk(0, text, 0, len(text)),
            1,
            acl=[principal(u) for u in users],
            paths=paths,
            indexed_at=T0,
            embedding_model="test",
            analyzer=ANALYZER_VERSION,
        )
        docs.append(Doc(source.ref.key, payload, text))
    return docs


def index_docs(store: VectorStore, embedder: Embedder, docs: list[Doc]) -> None:
    """Embed the documents' texts and write one point per document."""
    vectors = embedder.embed_documents([d.text for d in docs])
    store.upsert(
        [
            PointRecord(
                id=point_id(DocRef.parse(d.key), d.payload["content_hash"], 0),
                payload=d.payload,
                dense=dense,
                sparse=sparse,
            )
            for d, (dense, sparse) in zip(docs, vectors, strict=True)
        ]
    )


# --- the reference evaluator ----------------------------------------------------------------


def visible(doc: Doc, user: str) -> bool:
    """``user`` is in the document's ``acl``."""
    return principal(user) in doc.payload["acl"]


def _values(doc: Doc, name: str, user: str) -> list[Any]:
    p = doc.payload
    if name == "path":
        path = p["paths"].get(user)
        return [] if path is None else [path]
    value = p.get(name)
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _norm(name: str, value: Any) -> Any:
    if name == "modified_at":
        return parse_time(value)
    if name in ("path", "path_prefix"):
        return normalize_path(value)
    if name in ("doc_id", "board_id", "stack_id", "feed_id") and isinstance(value, int):
        return str(value)
    return value


def _eq(doc: Doc, name: str, value: Any, user: str) -> bool:
    value = _norm(name, value)
    if name == "path_prefix":
        path = doc.payload["paths"].get(user)
        if path is None:
            return False
        return path == value or path.startswith(value.rstrip("/") + "/")
    return value in _values(doc, name, user)


def matches(tree: dict[str, Any] | None, doc: Doc, user: str) -> bool:
    """Whether ``doc`` satisfies the RCP filter ``tree`` in ``user``'s view (semantics as
    documented in :mod:`ncindex.search.filters`)."""
    if tree is None:
        return True
    if "and" in tree:
        return all(matches(c, doc, user) for c in tree["and"])
    if "or" in tree:
        return any(matches(c, doc, user) for c in tree["or"])
    if "not" in tree:
        return not matches(tree["not"], doc, user)
    name, op, value = tree["field"], tree["op"], tree.get("value", True)
    if op == "eq":
        return _eq(doc, name, value, user)
    if op == "ne":
        return not _eq(doc, name, value, user)
    if op == "in":
        return any(_eq(doc, name, v, user) for v in value)
    if op == "nin":
        return not any(_eq(doc, name, v, user) for v in value)
    if op == "exists":
        return bool(_values(doc, name, user)) is value
    if op == "contains":
        if name == "title":
            return _words(value) <= _words(doc.payload["title"])
        return value in _values(doc, name, user)
    bound = _norm(name, value)
    have = _values(doc, name, user)
    compare = {
        "gt": lambda a: a > bound,
        "gte": lambda a: a >= bound,
        "lt": lambda a: a < bound,
        "lte": lambda a: a <= bound,
    }[op]
    return any(compare(a) for a in have)


def expected(docs: list[Doc], tree: dict[str, Any] | None, user: str) -> set[str]:
    """Keys of the documents ``user`` may see that satisfy ``tree``."""
    return {d.key for d in docs if visible(d, user) and matches(tree, d, user)}
