"""Reading an embedded shard's files into the page cache when it opens, ahead of the searches.

Qdrant Edge keeps the original dense vectors, the payloads and the payload indexes
memory-mapped on disk (:class:`~ncindex.store.layout.CollectionLayout`), so a search reads
from disk whatever of them it touches for the first time: the payloads of the candidates it
verifies (and, for points whose ids name no document, of every hit it groups), the originals
of the candidates it rescores, the index entries its filter checks. A
store that has just opened (a restart, or the swap after an optimisation) answers its first
thousands of searches so: at a million chunks the engine query 1.5× as slow at the median
and 1.75× at the p95 as once the kernel's page cache holds those files (:data:`ORDER`).
Elasticsearch offers the same remedy as ``index.store.preload``.

:func:`preload` reads a shard's segment files through a reused 1 MiB buffer, so that the
kernel keeps them in its page cache (``posix_fadvise(POSIX_FADV_WILLNEED)`` would spare the
copy, but Linux reads no more than the device's read-ahead window per call: 8 MiB on this
machine, 128 KiB by default), the files the searches touch most first, skipping those that
would pass a share of the memory available at that moment. The reading itself keeps nothing
in this process; the searches after it map more of the cached pages, which shows as resident
memory (README, Collection layout). The page cache stays the kernel's to evict: on a machine
without room for the store less is gained, and nothing is pinned. The write-ahead log is not
read.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

#: Parts of an Edge segment folder (``<shard>/segments/<uuid>/…``) that are read, in order:
#: the payloads (of the candidates a search verifies; before point ids named their documents
#: also every grouped hit's ``doc_key``, when this order was measured), the original dense
#: vectors every dense search rescores on, the BM25 vectors a filtered BM25 scan scores, the
#: payload indexes a filter checks (names as qdrant-edge-py 0.9 writes them). Not read: the
#: int8 quantised vectors (``quantized.*`` beside the originals, kept in RAM), the HNSW graph,
#: the BM25 inverted index and the id tracker, which Edge reads as it opens the shard. The
#: first two are what a cold query waited for while it read every hit's ``doc_key``: at a
#: million chunks of one user its p50 / p95 read 32.7 / 46.1 ms with nothing read ahead,
#: 24.2 / 33.5 with the payloads, 31.0 / 46.6 with the originals, 20.8 / 26.4 with both and
#: 22.3 / 26.5 with every segment file (benchmarks/scale_reading.md).
ORDER: tuple[str, ...] = (
    "payload_storage",
    "vector_storage-dense",
    "vector_storage-bm25",
    "payload_index",
)

CHUNK = 1 << 20
"""Bytes read per call by :func:`read_through`."""


@dataclass(frozen=True)
class Preloaded:
    """What one :func:`preload` read: ``files`` and their ``bytes`` (a file it was told to stop
    in counted whole), ``skipped_bytes`` of the files left out because they would have passed
    the budget, ``budget_bytes`` the budget, ``seconds`` the time the reading took,
    ``stopped`` whether it was told to stop before the end."""

    files: int
    bytes: int
    skipped_bytes: int
    budget_bytes: int
    seconds: float
    stopped: bool


def segment_files(shard: Path) -> list[Path]:
    """The files of the :data:`ORDER` parts of each segment under ``shard / "segments"`` but
    the quantised vectors, in that order, then by path; what a folder removed meanwhile held is
    left out (an empty list where ``segments`` is missing)."""
    root = shard / "segments"
    ranked = []
    for folder, _, names in os.walk(root):  # a folder that vanishes is skipped, not raised
        parts = Path(folder).relative_to(root).parts
        if len(parts) < 2 or parts[1] not in ORDER:
            continue
        for name in names:
            if not name.startswith("quantized"):
                path = Path(folder) / name
                ranked.append((ORDER.index(parts[1]), str(path), path))
    return [path for _, _, path in sorted(ranked)]


def available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    """The memory the kernel reports available (``MemAvailable`` of ``meminfo``, which it
    gives in kB), bytes; 0 where that cannot be read (not Linux). The machine's, not a
    container's memory limit."""
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def read_through(path: Path, stop: threading.Event | None = None) -> None:
    """Read ``path`` from start to end into one reused buffer of :data:`CHUNK` bytes (the
    kernel keeps what it read in its page cache; nothing is kept here), ending early once
    ``stop`` is set. Raises ``OSError``."""
    buffer = bytearray(CHUNK)
    with open(path, "rb", buffering=0) as handle:
        while handle.readinto(buffer):
            if stop is not None and stop.is_set():
                return


def preload(
    shard: Path,
    share: float,
    *,
    available: Callable[[], int] = available_bytes,
    read: Callable[[Path], None] | None = None,
    stop: threading.Event | None = None,
) -> Preloaded:
    """Read ``shard``'s segment files (:func:`segment_files`) in order, so that the kernel's
    page cache holds them, skipping each file that would take the total past ``share`` of
    :func:`available` (asked once, at the start) and going on with the next. ``read`` reads
    one file (default: :func:`read_through`); a file that vanished or cannot be read is
    skipped. Ends early once ``stop`` is set (the default reader checks it after each chunk)."""
    began = time.monotonic()
    budget = int(max(0.0, share) * available())
    reader = read or (lambda path: read_through(path, stop))
    done = skipped = files = 0
    for path in segment_files(shard):
        if stop is not None and stop.is_set():
            break
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if done + size > budget:
            skipped += size
            continue
        try:
            reader(path)
        except OSError:
            continue
        done += size
        files += 1
    stopped = stop is not None and stop.is_set()
    return Preloaded(files, done, skipped, budget, round(time.monotonic() - began, 3), stopped)


class Preloading:
    """:func:`preload` of ``shard`` within ``share`` running in a daemon thread, so that an
    open or a swap does not wait for it; logged as ``store_preloaded`` when it ends (a failure
    as ``store_preload_failed``: it is only a warm-up)."""

    def __init__(self, shard: Path, share: float) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(shard, share), name="ncindex-preload", daemon=True
        )
        self._thread.start()

    def _run(self, shard: Path, share: float) -> None:
        try:
            done = preload(shard, share, stop=self._stop)
        except Exception as exc:  # a thread's error would only be printed; say it once
            log.warning("store_preload_failed", shard=str(shard), error=repr(exc))
            return
        log.info(
            "store_preloaded",
            shard=str(shard),
            files=done.files,
            mib=round(done.bytes / 2**20),
            skipped_mib=round(done.skipped_bytes / 2**20),
            budget_mib=round(done.budget_bytes / 2**20),
            seconds=done.seconds,
            stopped=done.stopped,
        )

    def stop(self) -> None:
        """Ask the reading to end after the chunk it is reading (the shard is closed or
        replaced)."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (``None``: until it ends); ``True`` once it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()


def preload_in_background(shard: Path, share: float) -> Preloading | None:
    """A :class:`Preloading` of ``shard`` within ``share``; ``None`` (nothing started) where
    ``share`` is 0 or less."""
    return Preloading(shard, share) if share > 0 else None
