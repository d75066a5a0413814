"""Reading an embedded shard's files into the page cache when it opens, ahead of the searches.

Qdrant Edge keeps the original dense vectors, the payloads and the payload indexes
memory-mapped on disk (:class:`~ncindex.store.layout.CollectionLayout`), so a search reads
from disk whatever of them it touches for the first time: the payloads of the hits it
groups, the originals of the candidates it rescores, the index entries its filter checks. A
store that has just opened (a restart, or the swap after an optimisation) answers its first
thousands of searches so: at a million chunks the engine query 1.5× as slow at the median
and 1.75× at the p95 as once the kernel's page cache holds those files (:data:`ORDER`).
Elasticsearch offers the same remedy as ``index.store.preload``.

:func:`preload` reads a shard's segment files through a reused 1 MiB buffer, so the kernel
keeps them in its page cache while this process's resident memory does not grow
(``posix_fadvise(POSIX_FADV_WILLNEED)`` would spare the copy, but Linux reads no more than
the device's read-ahead window per call: 8 MiB on this machine, 128 KiB by default), the
files the searches touch most first, while they fit within a share of the memory available
at that moment. The page cache stays the kernel's to evict: on a machine without room for
the store less is gained, and nothing is pinned. The write-ahead log is not read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

#: Parts of an Edge segment folder (``<shard>/segments/<uuid>/…``) that are read, in order:
#: the payloads a search reads its hits' ``doc_key`` from, the original dense vectors every
#: dense search rescores on, the BM25 vectors a filtered BM25 scan scores, the payload indexes
#: a filter checks (names as qdrant-edge-py 0.9 writes them; the rest — the HNSW graph, the
#: BM25 inverted index, the id tracker — Edge reads into RAM as it opens the shard). The first
#: two are what a cold query waits for: at a million chunks of one user its p50 / p95 read
#: 32.7 / 46.1 ms with nothing read ahead, 24.2 / 33.5 with the payloads, 31.0 / 46.6 with the
#: originals, 20.8 / 26.4 with both and 22.3 / 26.5 with every segment file
#: (benchmarks/scale_reading.md).
ORDER: tuple[str, ...] = (
    "payload_storage",
    "vector_storage-dense",
    "vector_storage-bm25",
    "payload_index",
)


@dataclass(frozen=True)
class Preloaded:
    """What one :func:`preload` asked for: ``files`` and their ``bytes`` within the budget,
    ``skipped_bytes`` the files left out because they did not fit, ``budget_bytes`` the budget,
    ``seconds`` the time the requests took (the kernel may still be reading after)."""

    files: int
    bytes: int
    skipped_bytes: int
    budget_bytes: int
    seconds: float


def segment_files(shard: Path) -> list[Path]:
    """The files of the :data:`ORDER` parts of each segment under ``shard / "segments"``, in
    that order, then by path; an empty list where the folder is missing."""
    root = shard / "segments"
    if not root.is_dir():
        return []
    ranked = []
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if len(parts) > 2 and parts[1] in ORDER and path.is_file():
            ranked.append((ORDER.index(parts[1]), str(path), path))
    return [path for _, _, path in sorted(ranked)]


def available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    """The memory the kernel reports available (``MemAvailable`` of ``/proc/meminfo``, which it
    gives in kB), bytes; 0 where that cannot be read (not Linux). The machine's, not a
    container's memory limit."""
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def preload(
    shard: Path,
    share: float,
    *,
    available: Callable[[], int] = available_bytes,
    read: Callable[[Path], None] | None = None,
) -> Preloaded:
    """Ask the kernel to read ``shard``'s segment files (:func:`segment_files`) into the page
    cache, in order, skipping a file that would take the total past ``share`` of
    :func:`available_bytes` (read once, at the start). ``read`` reads one file through
    (default: :func:`read_through`); a file that vanished or cannot be read is skipped."""
    began = time.monotonic()
    budget = int(max(0.0, share) * available())
    asked = skipped = files = 0
    for path in segment_files(shard):
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if asked + size > budget:
            skipped += size
            continue
        try:
            (read or read_through)(path)
        except OSError:
            continue
        asked += size
        files += 1
    return Preloaded(files, asked, skipped, budget, round(time.monotonic() - began, 3))


def preload_in_background(shard: Path, share: float) -> threading.Thread | None:
    """:func:`preload` in a daemon thread (the kernel's reads are started from it, so an open
    or a swap does not wait for them), logged as ``store_preloaded``; ``None`` (nothing
    started) where ``share`` is 0 or less."""
    if share <= 0:
        return None

    def run() -> None:
        done = preload(shard, share)
        log.info(
            "store_preloaded",
            shard=str(shard),
            files=done.files,
            mb=round(done.bytes / 2**20),
            skipped_mb=round(done.skipped_bytes / 2**20),
            budget_mb=round(done.budget_bytes / 2**20),
            seconds=done.seconds,
        )

    thread = threading.Thread(target=run, name="ncindex-preload", daemon=True)
    thread.start()
    return thread


CHUNK = 1 << 20
"""Bytes read per call by :func:`read_through`."""


def read_through(path: Path) -> None:
    """Read ``path`` from start to end into one reused buffer of :data:`CHUNK` bytes (the
    kernel keeps what it read in its page cache; nothing is kept here). Raises ``OSError``."""
    buffer = bytearray(CHUNK)
    with open(path, "rb", buffering=0) as handle:
        while handle.readinto(buffer):
            pass
