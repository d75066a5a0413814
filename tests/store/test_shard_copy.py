"""Copying a shard folder while it is written: settle, copy without the lock, catch up."""

from __future__ import annotations

import mmap
import os
import shutil
from pathlib import Path

import pytest

from ncindex.store import shard_copy


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_write_through_a_map_after_settling_is_caught_up(tmp_path: Path) -> None:
    """The trap the settling closes: a mapped page dirtied before the copy and written again
    after it. ``settle`` writes the page back, so the second write stamps the file."""
    assert shard_copy.stamps_mapped_writes(tmp_path)
    live, copy = tmp_path / "live", tmp_path / "copy"
    (live / "segment").mkdir(parents=True)
    (live / "segment" / "unchanged.dat").write_bytes(b"u" * 10_000)
    mapped_file = live / "segment" / "mapped.dat"
    mapped_file.write_bytes(b"\0" * mmap.PAGESIZE)
    with open(mapped_file, "r+b") as fh, mmap.mmap(fh.fileno(), mmap.PAGESIZE) as mapped:
        mapped[0] = 1  # dirty before the watermark
        since = shard_copy.settle(live)
        shard_copy.copy_while_written(live, copy)
        mapped[1] = 2  # the same page, written after the copy
        copied = shard_copy.catch_up(live, copy, since)
    assert _tree(copy) == _tree(live)
    assert copied >= mmap.PAGESIZE
    assert (copy / "segment" / "mapped.dat").read_bytes()[:2] == b"\x01\x02"


def test_catch_up_copies_only_what_changed_and_removes_what_went(tmp_path: Path) -> None:
    live, copy = tmp_path / "live", tmp_path / "copy"
    (live / "old_segment").mkdir(parents=True)
    (live / "old_segment" / "vectors.dat").write_bytes(b"v" * 50_000)
    (live / "kept.dat").write_bytes(b"k" * 20_000)
    old = os.stat(live / "kept.dat").st_mtime_ns - 10 * shard_copy.MTIME_MARGIN_NS
    for path in (live / "kept.dat", live / "old_segment" / "vectors.dat"):
        os.utime(path, ns=(old, old))  # written long before the copy
    since = shard_copy.settle(live)
    shard_copy.copy_while_written(live, copy)
    # meanwhile: a segment merged away, a new one written, a file grown, one rewritten
    shutil.rmtree(live / "old_segment")
    (live / "new_segment").mkdir()
    (live / "new_segment" / "vectors.dat").write_bytes(b"n" * 3_000)
    (live / "kept.dat").write_bytes(b"K" * 20_000)

    copied = shard_copy.catch_up(live, copy, since)

    assert _tree(copy) == _tree(live)
    assert not (copy / "old_segment").exists()
    assert copied == 3_000 + 20_000


def test_an_unchanged_file_is_not_copied_again(tmp_path: Path) -> None:
    live, copy = tmp_path / "live", tmp_path / "copy"
    live.mkdir()
    (live / "big.dat").write_bytes(b"b" * 100_000)
    old = os.stat(live / "big.dat").st_mtime_ns - 10 * shard_copy.MTIME_MARGIN_NS
    os.utime(live / "big.dat", ns=(old, old))
    since = shard_copy.settle(live)
    shard_copy.copy_while_written(live, copy)
    assert shard_copy.catch_up(live, copy, since) == 0


def test_a_file_that_vanishes_during_the_copy_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, copy = tmp_path / "live", tmp_path / "copy"
    live.mkdir()
    for name in ("a.dat", "b.dat"):
        (live / name).write_bytes(b"x" * 100)
    real_copy = shutil.copy2

    def copy_after_a_merge(source: Path, target: Path) -> object:
        if Path(source).name == "a.dat":
            Path(source).unlink()  # the engine removed it between the listing and the copy
        return real_copy(source, target)

    monkeypatch.setattr(shard_copy.shutil, "copy2", copy_after_a_merge)
    shard_copy.copy_while_written(live, copy)
    assert _tree(copy) == {"b.dat": b"x" * 100}


def test_tmpfs_does_not_stamp_mapped_writes() -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm (tmpfs) on this machine")
    assert shard_copy.stamps_mapped_writes(shm) is False
