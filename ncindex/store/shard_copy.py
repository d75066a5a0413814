"""Copy a live Qdrant Edge shard folder while it is written, holding writes only for the
files that changed during the copy.

Edge writes its files both with ``write`` and through shared memory maps. A write through a
map to a page that is already dirty changes the file without touching its modification time,
so "copy, then copy again what changed" is unsound as it stands. It becomes sound after
:func:`settle`: with writes held, every file is ``fsync``-ed, which writes each dirty page back
and write-protects it (Linux ``page_mkclean``), so the next write through a map faults and the
filesystem stamps the file's modification time then (ext4, XFS and btrfs do, in their
``page_mkwrite``; tmpfs does not). So after ``settle`` a file whose modification time is older
than the returned watermark has not changed since. :func:`stamps_mapped_writes` checks the
filesystem does this before the two-pass copy is used.
"""

from __future__ import annotations

import mmap
import os
import shutil
import time
import uuid
from pathlib import Path

MTIME_MARGIN_NS = 2_000_000_000
"""Files stamped up to this long before the watermark count as changed (nanoseconds): a
small step back of the wall clock between the watermark and a later write cannot hide it."""

_PROBE_PAUSE_SECONDS = 0.05
"""Pause between the probe's two writes: longer than the filesystem clock's tick (one jiffy,
at most 10 ms), so a stamped write shows a later time."""

_STAMPING: dict[int, bool] = {}
"""Per device (``st_dev``): whether writes through a map stamp the modification time."""


def stamps_mapped_writes(folder: Path) -> bool:
    """Whether the filesystem holding ``folder`` stamps a file's modification time when a
    clean, ``fsync``-ed page of it is written through a shared map (probed once per device
    with a 4,096-byte file in ``folder``, removed after). ``False`` on tmpfs. Raises
    ``OSError`` if ``folder`` cannot be written."""
    device = folder.stat().st_dev
    if device not in _STAMPING:
        probe = folder / f".mtime-probe-{uuid.uuid4().hex}"
        try:
            with open(probe, "w+b") as fh:
                fh.truncate(mmap.PAGESIZE)
                with mmap.mmap(fh.fileno(), mmap.PAGESIZE) as mapped:
                    mapped[0] = 1
                    mapped.flush()
                    os.fsync(fh.fileno())
                    before = os.fstat(fh.fileno()).st_mtime_ns
                    time.sleep(_PROBE_PAUSE_SECONDS)
                    mapped[1] = 1
                    after = os.fstat(fh.fileno()).st_mtime_ns
        finally:
            probe.unlink(missing_ok=True)
        _STAMPING[device] = after > before
    return _STAMPING[device]


def settle(folder: Path) -> int:
    """``fsync`` every file under ``folder`` and return the watermark (Unix nanoseconds, the
    filesystem's own clock, less :data:`MTIME_MARGIN_NS`): a file changed after this call has
    a modification time at or past it. Call it with writes held. Raises ``OSError``."""
    for path in _files(folder):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    marker = folder / f".watermark-{uuid.uuid4().hex}"
    try:
        marker.touch()
        stamp = marker.stat().st_mtime_ns
    finally:
        marker.unlink(missing_ok=True)
    return stamp - MTIME_MARGIN_NS


def copy_while_written(source: Path, destination: Path) -> None:
    """Copy the folder ``source`` to ``destination`` (which must not exist) as it is being
    written: a file or folder that vanishes meanwhile is skipped (:func:`catch_up` settles
    it). Raises ``OSError`` for any other failure."""
    destination.mkdir(parents=True)
    for path in _files(source):
        target = destination / path.relative_to(source)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        except FileNotFoundError:
            if path.exists():
                raise


def catch_up(source: Path, destination: Path, since_ns: int) -> int:
    """Make ``destination`` (a copy of ``source`` taken after :func:`settle` returned
    ``since_ns``) equal ``source`` again: copy each file of ``source`` stamped at or after
    ``since_ns``, missing from the copy or of another size, and remove what ``source`` no
    longer has. Call it with writes held. Returns the bytes copied. Raises ``OSError``."""
    copied = 0
    kept: set[Path] = set()
    for path in _files(source):
        relative = path.relative_to(source)
        kept.add(relative)
        target = destination / relative
        status = path.stat()
        if (
            status.st_mtime_ns >= since_ns
            or not target.exists()
            or target.stat().st_size != status.st_size
        ):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            copied += status.st_size
    for path in sorted(_files(destination), reverse=True):
        if path.relative_to(destination) not in kept:
            path.unlink()
    for folder in sorted((p for p in destination.rglob("*") if p.is_dir()), reverse=True):
        if not (source / folder.relative_to(destination)).is_dir():
            shutil.rmtree(folder)
    return copied


def _files(folder: Path) -> list[Path]:
    """Every regular file under ``folder``, at any depth (folders that vanish while listed
    are skipped)."""
    found: list[Path] = []
    for root, _dirs, names in os.walk(folder):
        found.extend(Path(root) / name for name in names)
    return found
