"""An on-disk cache of dense chunk vectors, so evaluation sweeps never embed a text twice.

Embedding is the slow part (SciFact: ~10,000 chunks at ~38 chunks/s, minutes); BM25 is cheap
(~3,000 chunks/s) and depends on the stopword list being compared, so it is not cached.

Key: ``(model identity, SHA-256 of the exact text embedded)``. The text is the chunk as the
chunking settings cut it, so the key covers those settings without naming them — and a chunk
that two settings cut alike (a short abstract is one chunk at any size) is embedded once. The
model identity is the model name and the SHA-256 of its ``model.onnx``, so a changed model never
reads stale vectors. Storage: one SQLite file, vectors as little-endian float32 (what the ONNX
model produces, so a cached vector equals a fresh one exactly).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ncindex.documents import text_hash


def model_identity(model_name: str, dense_dir: Path) -> str:
    """``"{model_name}@{sha256(model.onnx)[:16]}"``; raises ``OSError`` if the file is missing."""
    digest = hashlib.sha256()
    with open(Path(dense_dir) / "model.onnx", "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return f"{model_name}@{digest.hexdigest()[:16]}"


class VectorCache:
    """Dense vectors by ``(model, text hash)`` in the SQLite file ``path`` (created with its
    folder if missing). Thread-safe; :meth:`close` when done. ``OSError``/``sqlite3.Error`` for
    an unwritable path."""

    def __init__(self, path: Path, model: str) -> None:
        self.path = Path(path)
        self.model = model
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        with self._lock, self._db:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS dense (model TEXT NOT NULL, hash TEXT NOT NULL, "
                "vector BLOB NOT NULL, PRIMARY KEY (model, hash))"
            )

    def get_many(self, hashes: Sequence[str]) -> dict[str, list[float]]:
        """The cached vectors among ``hashes`` (hash → vector)."""
        out: dict[str, list[float]] = {}
        unique = sorted(set(hashes))
        with self._lock:
            for start in range(0, len(unique), 500):
                part = unique[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT hash, vector FROM dense WHERE model = ? AND hash IN ({marks})",  # noqa: S608
                    [self.model, *part],
                )
                for h, blob in rows:
                    out[h] = np.frombuffer(blob, dtype="<f4").astype(float).tolist()
        return out

    def put_many(self, items: dict[str, list[float]]) -> None:
        """Store ``hash → vector`` pairs (float32)."""
        rows = [(self.model, h, np.asarray(v, dtype="<f4").tobytes()) for h, v in items.items()]
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO dense VALUES (?, ?, ?)", rows)

    def dense(
        self, texts: Sequence[str], embed: Callable[[Sequence[str]], list[list[float]]]
    ) -> list[list[float]]:
        """Vectors of ``texts`` in order: cached ones read, the rest embedded with ``embed``
        (called once, with the missing texts, deduplicated) and stored."""
        hashes = [text_hash(t) for t in texts]
        found = self.get_many(hashes)
        missing: dict[str, str] = {}
        for h, t in zip(hashes, texts, strict=True):
            if h not in found:
                missing.setdefault(h, t)
        self.hits += len(texts) - sum(1 for h in hashes if h in missing)
        self.misses += len(missing)
        if missing:
            fresh = embed(list(missing.values()))
            new = dict(zip(missing, fresh, strict=True))
            self.put_many(new)
            found.update(new)
        return [found[h] for h in hashes]

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
