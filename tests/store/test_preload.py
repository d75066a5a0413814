"""A shard's files are read into the page cache when it opens: in the order searches touch
them, within the share of available memory the layout allows, in the background.

Residency in the page cache is read with util-linux's ``fincore``; a file is put out of it
with ``posix_fadvise(POSIX_FADV_DONTNEED)`` after ``sync`` (clean, unmapped pages go).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from ncindex.settings import Settings
from ncindex.store import open_store
from ncindex.store.layout import DEFAULT_LAYOUT
from ncindex.store.port import PointRecord, SparseVector
from ncindex.store.preload import (
    Preloading,
    available_bytes,
    preload,
    read_through,
    segment_files,
)
from ncindex.store.qdrant_edge import QdrantEdgeStore

DIM = 8

needs_fincore = pytest.mark.skipif(
    shutil.which("fincore") is None, reason="util-linux's fincore reads page-cache residency"
)


def _tree(root: Path, sizes: dict[str, int]) -> Path:
    """A shard folder holding ``sizes`` (path under the shard → bytes)."""
    for rel, size in sizes.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    return root


SEGMENT = "segments/0b7c1d2e-0000-4000-8000-000000000001"
SHARD = {
    "wal/open-1": 50,
    "edge_config.json": 5,
    f"{SEGMENT}/payload_index/acl-map/page_0.dat": 40,
    f"{SEGMENT}/payload_index/acl-null/flags.dat": 10,
    f"{SEGMENT}/segment.json": 3,
    f"{SEGMENT}/vector_storage-bm25/store/page_0.dat": 30,
    f"{SEGMENT}/payload_storage/page_0.dat": 20,
    f"{SEGMENT}/vector_storage-dense/matrix.dat": 100,
    f"{SEGMENT}/vector_storage-dense/quantized.data": 25,
    f"{SEGMENT}/vector_index-bm25/postings.dat": 10,
}


def test_segment_files_come_in_the_order_searches_touch_them(tmp_path: Path) -> None:
    shard = _tree(tmp_path, SHARD)
    names = [str(p.relative_to(shard / SEGMENT)) for p in segment_files(shard)]
    assert names == [  # not the int8 vectors, nor what Edge reads as it opens the shard
        "payload_storage/page_0.dat",
        "vector_storage-dense/matrix.dat",
        "vector_storage-bm25/store/page_0.dat",
        "payload_index/acl-map/page_0.dat",
        "payload_index/acl-null/flags.dat",
    ]
    assert segment_files(tmp_path / "missing") == []


def test_preload_reads_in_order_while_the_files_fit_the_share(tmp_path: Path) -> None:
    shard = _tree(tmp_path, SHARD)
    read: list[str] = []
    done = preload(
        shard, 0.5, available=lambda: 320, read=lambda p: read.append(p.parent.name + "/" + p.name)
    )
    # a budget of 160 bytes: the payloads (20), the originals (100), the BM25 vectors (30);
    # one payload index file (40) would pass it and is skipped, the next (10) still fits
    assert read == [
        "payload_storage/page_0.dat",
        "vector_storage-dense/matrix.dat",
        "store/page_0.dat",
        "acl-null/flags.dat",
    ]
    assert (done.files, done.bytes, done.skipped_bytes, done.budget_bytes) == (4, 160, 40, 160)


def test_a_file_that_cannot_be_read_is_skipped_and_not_counted(tmp_path: Path) -> None:
    shard = _tree(tmp_path, SHARD)

    def read(path: Path) -> None:
        if path.name == "matrix.dat":
            raise PermissionError(path)

    done = preload(shard, 1.0, available=lambda: 10_000, read=read)
    assert (done.files, done.bytes, done.skipped_bytes) == (4, 100, 0)


def test_nothing_is_read_without_a_share_of_memory(tmp_path: Path) -> None:
    shard = _tree(tmp_path, SHARD)
    done = preload(shard, 0.0, available=lambda: 10_000, read=lambda p: pytest.fail(str(p)))
    assert (done.files, done.bytes, done.skipped_bytes) == (0, 0, 200)


def test_a_shard_removed_while_it_is_read_ends_the_reading_quietly(tmp_path: Path) -> None:
    shard = _tree(tmp_path / "shard", SHARD)
    read: list[Path] = []

    def read_and_remove(path: Path) -> None:
        read.append(path)
        shutil.rmtree(shard)  # a swap's retired folder, a dropped model

    done = preload(shard, 1.0, available=lambda: 10_000, read=read_and_remove)
    assert [p.name for p in read] == ["page_0.dat"] and done.files == 1
    assert segment_files(shard) == []


def test_a_reading_told_to_stop_reads_no_further_file(tmp_path: Path) -> None:
    shard = _tree(tmp_path, SHARD)
    stop = threading.Event()
    read: list[Path] = []

    def read_then_stop(path: Path) -> None:
        read.append(path)
        stop.set()

    done = preload(shard, 1.0, available=lambda: 10_000, read=read_then_stop, stop=stop)
    assert len(read) == 1 and done.stopped and done.files == 1


def test_a_failed_reading_is_logged_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("engine layout changed")

    monkeypatch.setattr("ncindex.store.preload.preload", fail)
    with capture_logs() as logs:
        assert Preloading(tmp_path, 0.5).wait(timeout=10)
    assert [e["event"] for e in logs] == ["store_preload_failed"]
    assert "engine layout changed" in logs[0]["error"]


def test_available_memory_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683364 kB\nMemAvailable:    1000 kB\n")
    assert available_bytes(meminfo) == 1_024_000
    assert available_bytes(tmp_path / "missing") == 0
    meminfo.write_text("MemTotal:       24683364 kB\n")
    assert available_bytes(meminfo) == 0
    assert available_bytes() > 0  # this machine's


def _evict(path: Path) -> None:
    os.sync()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _skip_unless_evicted(paths: list[Path]) -> None:
    """Skip where the page cache keeps files ``DONTNEED`` was asked to drop (tmpfs keeps
    every page): residency cannot tell a reading there."""
    if sum(map(_resident, paths)):
        pytest.skip("this filesystem keeps files in the page cache (tmpfs?)")


#: Share of a file read ahead that must still be in the page cache when ``fincore`` looks:
#: the kernel may reclaim some of the freshly read pages before then (a full CI run once saw
#: 8,435 of the 8,449 pages resident). With nothing read ahead a page or two are.
KEPT = 0.95


def _resident(path: Path) -> int:
    """Bytes of ``path`` in the page cache (``fincore``)."""
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return int(out.split()[0])


@needs_fincore
def test_read_through_leaves_the_whole_file_in_the_page_cache(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(3 * 2**20 + 5))
    _evict(path)
    _skip_unless_evicted([path])
    read_through(path)
    assert _resident(path) >= KEPT * path.stat().st_size


def _store(root: Path, share: float) -> QdrantEdgeStore:
    layout = dataclasses.replace(DEFAULT_LAYOUT, preload_share=share)
    return QdrantEdgeStore(root, "m", layout=layout)


@needs_fincore
@pytest.mark.parametrize("share", [0.5, 0.0])
def test_an_opened_store_reads_its_original_vectors_ahead(tmp_path: Path, share: float) -> None:
    store = _store(tmp_path, share)
    store.ensure_collection(DIM)
    store.upsert(
        [
            PointRecord(
                id=f"00000000-0000-4000-8000-{i:012d}",
                dense=[float((i + k) % 5) + 0.5 for k in range(DIM)],
                sparse=SparseVector(indices=[i % 7], values=[1.0]),
                payload={"doc_key": f"note:{i}", "acl": ["user:alice"]},
            )
            for i in range(300)
        ]
    )
    store.close()
    originals = [p for p in segment_files(store.shard_path) if "vector_storage-dense" in p.parts]
    assert originals and sum(p.stat().st_size for p in originals) > 0
    for path in segment_files(store.shard_path):
        _evict(path)
    _skip_unless_evicted(originals)

    reopened = _store(tmp_path, share)
    assert reopened.count(None) == 300  # the first call loads the shard
    assert reopened.preloaded(timeout=30)
    resident = sum(map(_resident, originals))
    reopened.close()
    size = sum(p.stat().st_size for p in originals)
    if share:
        assert resident >= KEPT * size
    else:  # the load itself reads a page or two of them (headers, flags)
        assert resident < size / 4


def test_the_setting_reaches_the_embedded_store(tmp_path: Path) -> None:
    store = open_store(Settings(data_dir=tmp_path, qdrant_preload_share=0.25), model_slug="m")
    assert isinstance(store, QdrantEdgeStore)
    assert store.layout.preload_share == 0.25
    # off unless asked, and for the optimiser's child, which opens its copy so
    assert Settings().qdrant_preload_share == 0.0
    assert QdrantEdgeStore(tmp_path / "copy", "m").layout.preload_share == 0.0
