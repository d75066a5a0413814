"""Copying a shard folder while it is written: settle, copy without the lock, catch up."""

from __future__ import annotations

import mmap
import os
import shutil
import time
from pathlib import Path

import pytest

from ncindex.store import shard_copy


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _no_margin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Watermarks without the margin, a clock tick after the files were written: only a
    real stamp, not the margin, makes a file look changed (``os.utime`` cannot backdate a
    file: it moves the change time)."""
    monkeypatch.setattr(shard_copy, "MTIME_MARGIN_NS", 0)
    time.sleep(0.05)


def _skip_unless_stamping(folder: Path) -> None:
    if not shard_copy.stamps_mapped_writes(folder):
        pytest.skip(f"{folder}'s filesystem does not stamp writes through maps (tmpfs)")


def test_a_write_through_a_map_after_settling_is_caught_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trap the settling closes: a mapped page dirtied before the copy and written again
    after it. ``settle`` writes the page back, so the second write stamps the file."""
    _skip_unless_stamping(tmp_path)
    live, copy = tmp_path / "live", tmp_path / "copy"
    (live / "segment").mkdir(parents=True)
    (live / "segment" / "unchanged.dat").write_bytes(b"u" * 10_000)
    mapped_file = live / "segment" / "mapped.dat"
    mapped_file.write_bytes(b"\0" * mmap.PAGESIZE)
    with open(mapped_file, "r+b") as fh, mmap.mmap(fh.fileno(), mmap.PAGESIZE) as mapped:
        mapped[0] = 1  # dirty before the watermark
        _no_margin(monkeypatch)
        since = shard_copy.settle(live)
        shard_copy.copy_while_written(live, copy)
        mapped[1] = 2  # the same page, written after the copy
        assert mapped_file.stat().st_mtime_ns >= since, "the mapped write was stamped"
        copied = shard_copy.catch_up(live, copy, since)
    assert _tree(copy) == _tree(live)
    assert (copy / "segment" / "mapped.dat").read_bytes()[:2] == b"\x01\x02"
    assert copied == mmap.PAGESIZE, "only the mapped file is copied again"


def test_catch_up_copies_only_what_changed_and_removes_what_went(tmp_path: Path) -> None:
    live, copy = tmp_path / "live", tmp_path / "copy"
    (live / "old_segment").mkdir(parents=True)
    (live / "old_segment" / "vectors.dat").write_bytes(b"v" * 50_000)
    (live / "kept.dat").write_bytes(b"k" * 20_000)
    (live / "swapped").mkdir()
    (live / "swapped" / "inside.dat").write_bytes(b"i")
    (live / "empty_index").mkdir()
    since = shard_copy.settle(live)
    shard_copy.copy_while_written(live, copy)
    # meanwhile: a segment merged away, a new one written, a file grown, one rewritten
    shutil.rmtree(live / "old_segment")
    (live / "new_segment").mkdir()
    (live / "new_segment" / "vectors.dat").write_bytes(b"n" * 3_000)
    (live / "kept.dat").write_bytes(b"K" * 20_000)
    shutil.rmtree(live / "swapped")
    (live / "swapped").write_bytes(b"s" * 7)  # a folder replaced by a file of its name

    copied = shard_copy.catch_up(live, copy, since)

    assert _tree(copy) == _tree(live)
    assert not (copy / "old_segment").exists() and (copy / "empty_index").is_dir()
    assert copied == 3_000 + 20_000 + 7


def test_an_unchanged_file_is_not_copied_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, copy = tmp_path / "live", tmp_path / "copy"
    live.mkdir()
    (live / "big.dat").write_bytes(b"b" * 100_000)
    with open(live / "preallocated.dat", "wb") as sparse:  # as Edge preallocates its files
        sparse.truncate(16 << 20)
        sparse.write(b"head")
        sparse.seek(8 << 20)
        sparse.write(b"middle")
    _no_margin(monkeypatch)
    since = shard_copy.settle(live)
    shard_copy.copy_while_written(live, copy)
    assert shard_copy.catch_up(live, copy, since) == 0
    assert _tree(copy) == _tree(live)
    held = (live / "preallocated.dat").stat().st_blocks * 512
    if held < 1 << 20:  # the filesystem keeps holes: so does the copy
        assert (copy / "preallocated.dat").stat().st_blocks * 512 <= held


def test_a_file_that_vanishes_during_the_copy_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, copy = tmp_path / "live", tmp_path / "copy"
    live.mkdir()
    for name in ("a.dat", "b.dat"):
        (live / name).write_bytes(b"x" * 100)
    real_copy = shard_copy.copy_file

    def copy_after_a_merge(source: Path, target: Path) -> None:
        if Path(source).name == "a.dat":
            Path(source).unlink()  # the engine removed it between the listing and the copy
        real_copy(source, target)

    monkeypatch.setattr(shard_copy, "copy_file", copy_after_a_merge)
    shard_copy.copy_while_written(live, copy)
    assert _tree(copy) == {"b.dat": b"x" * 100}


def test_tmpfs_does_not_stamp_mapped_writes() -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm (tmpfs) on this machine")
    assert shard_copy.stamps_mapped_writes(shm) is False


def test_a_folder_that_cannot_be_listed_fails_the_catch_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``os.walk`` skips a folder it cannot list; the catch-up must not take that for files
    that went (it would delete them from the copy)."""
    live, copy = tmp_path / "live", tmp_path / "copy"
    (live / "segments" / "s1").mkdir(parents=True)
    (live / "segments" / "s1" / "v.dat").write_bytes(b"v")
    since = shard_copy.settle(live)
    shard_copy.copy_while_written(live, copy)
    real_scandir = os.scandir

    def too_many_open_files(path: object) -> object:
        if str(path).endswith("segments") and str(live) in str(path):
            raise OSError(24, "Too many open files")
        return real_scandir(path)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", too_many_open_files)
    with pytest.raises(OSError, match="Too many open files"):
        shard_copy.catch_up(live, copy, since)
    monkeypatch.undo()
    assert (copy / "segments" / "s1" / "v.dat").exists()
