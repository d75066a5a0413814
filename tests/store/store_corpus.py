"""Shared data of the vector-store tests: both engines and a small real-shaped corpus.

The corpus is built with :func:`ncindex.documents.build_payload` (so payloads have the real
shape) with random unit dense vectors of dimension ``DIM`` and sparse vectors made of a few
shared "common token" indices plus one index unique to each point (``UNIQUE_BASE + n``).
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient

from ncindex.documents import (
    Chunk,
    DocRef,
    DocType,
    SourceDocument,
    build_payload,
    point_id,
    principal,
)
from ncindex.embedding.analyzer import ANALYZER_VERSION
from ncindex.store import PointRecord, SparseVector, VectorStore
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.store.qdrant_server import QdrantServerStore

DIM = 8
UNIQUE_BASE = 1000
ENGINES = ("server", "edge")
PREFIX = "ncx"
SLUG = "test-model"
T0 = 1_700_000_000


def unit_vector(rng: random.Random, dim: int = DIM) -> list[float]:
    """A random unit vector of ``dim`` floats."""
    v = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


# (ref, user, owner, acl users, paths, title, modified offset, n chunks, extra fields)
_DOCS: list[dict[str, Any]] = [
    dict(ref=DocRef(DocType.FILE, "101"), owner="alice", users=["alice"],
         paths={"alice": "/Projects/2026/spec.md"}, title="Quarterly report spec",
         mime_type="text/markdown", tags=["urgent"], size=1200, chunks=3),
    dict(ref=DocRef(DocType.FILE, "102"), owner="alice", users=["alice"],
         paths={"alice": "/Projects-old/notes.txt"}, title="Old reports archive",
         mime_type="text/plain", tags=[], size=300, chunks=2),
    dict(ref=DocRef(DocType.FILE, "103"), owner="alice", users=["alice", "bob"],
         paths={"alice": "/Projects/budget.pdf", "bob": "/Shared/budget.pdf"},
         title="Budget 2026", mime_type="application/pdf", tags=["draft", "finance"],
         size=90_000, chunks=1),
    dict(ref=DocRef(DocType.FILE, "104"), owner="bob", users=["alice", "bob"],
         paths={"alice": "/Projects/2026/deep/x.md", "bob": "/x.md"}, title="Deep dive",
         mime_type="text/markdown", tags=["finance"], size=5000, chunks=2),
    dict(ref=DocRef(DocType.NOTE, "201"), owner="alice", users=["alice"],
         paths={"alice": "/Notes/Ideas/idea.md"}, title="Ideas for the quarterly report",
         mime_type="text/markdown", category="Ideas", chunks=2),
    dict(ref=DocRef(DocType.NOTE, "202"), owner="alice", users=["alice"],
         paths={"alice": "/Notes/todo.md"}, title="Todo", mime_type="text/markdown", chunks=1),
    dict(ref=DocRef(DocType.DECK_CARD, "301"), owner="bob", users=["bob"], paths={},
         title="Fix the report generator", tags=["urgent"], chunks=1,
         extra={"board_id": "5", "stack_id": "9"}),
    dict(ref=DocRef(DocType.NEWS_ITEM, "401"), owner="alice", users=["alice"], paths={},
         title="Report: markets rally", url="https://news.example/1", chunks=2,
         extra={"feed_id": "7"}),
]  # fmt: skip


def build_corpus(seed: int = 7) -> list[PointRecord]:
    """The corpus: one point per chunk of ``_DOCS``, each with both vectors."""
    rng = random.Random(seed)
    points: list[PointRecord] = []
    n = 0
    for i, spec in enumerate(_DOCS):
        text = " ".join(f"{spec['title']} part {c}." for c in range(spec["chunks"]))
        doc = SourceDocument(
            ref=spec["ref"],
            user=spec["users"][0],
            owner=spec["owner"],
            title=spec["title"],
            text=text,
            etag=f"etag-{i}",
            modified_at=T0 + 100 * i,
            mime_type=spec.get("mime_type"),
            size=spec.get("size"),
            category=spec.get("category"),
            tags=list(spec.get("tags", [])),
            url=spec.get("url"),
            extra=dict(spec.get("extra", {})),
        )
        for c in range(spec["chunks"]):
            chunk = Chunk(index=c, text=f"chunk {c} of {spec['title']}", char_start=c, char_end=c)
            payload = build_payload(
                doc,
                chunk,
                spec["chunks"],
                acl=[principal(u) for u in spec["users"]],
                paths=spec["paths"],
                indexed_at=T0 + 10_000 + n,
                embedding_model="test/model",
                analyzer=ANALYZER_VERSION,
            )
            common = sorted(rng.sample(range(12), 3))
            sparse = SparseVector(
                indices=[*common, UNIQUE_BASE + n],
                values=[round(rng.uniform(0.1, 2.0), 3) for _ in range(4)],
            )
            points.append(
                PointRecord(
                    id=point_id(doc.ref, doc.content_hash, c),
                    payload=payload,
                    dense=unit_vector(rng),
                    sparse=sparse,
                )
            )
            n += 1
    return points


CORPUS = build_corpus()


def make_store(engine: str, path: Path, slug: str = SLUG) -> VectorStore:
    """A fresh store of ``engine`` (``"server"``: qdrant-client ``:memory:``; ``"edge"``: a
    shard under ``path``), without a collection yet."""
    if engine == "server":
        return QdrantServerStore(QdrantClient(":memory:"), PREFIX, slug)
    return QdrantEdgeStore(path, slug)
