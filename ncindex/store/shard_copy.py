"""Copy a live Qdrant Edge shard folder while it is written, holding writes only for the
files that changed during the copy.

Edge writes its files both with ``write`` and through shared memory maps. A write through a
map to a page that is already dirty changes the file without touching its modification time,
so "copy, then copy again what changed" is unsound as it stands. It becomes sound after
:func:`settle`: with writes held, every file is ``fsync``-ed, which writes each dirty page back
and write-protects it (Linux ``page_mkclean``), so the next write through a map faults and the
filesystem stamps the file's modification time then (ext4, XFS and btrfs do, in their
``page_mkwrite``; tmpfs does not). So after ``settle`` a file whose modification and change
times are older than the returned watermark has not changed since (a change time moves when a
file is renamed into place). :func:`stamps_mapped_writes` checks the
filesystem does this before the two-pass copy is used.
"""

from __future__ import annotations

import errno
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
    """Whether the filesystem holding ``folder`` (probe the folder itself: a mount point
    under it would be another filesystem) stamps a file's modification time when a
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


def write_back(folder: Path) -> None:
    """``fsync`` every file under ``folder`` (files that vanish meanwhile are skipped), so a
    later :func:`settle` has little left to write. Needs no lock. Raises ``OSError`` for any
    failure but a vanished file or folder."""
    for relative in _tree(folder, tolerate_vanished=True)[0]:
        _fsync(folder / relative)


def settle(folder: Path) -> int:
    """``fsync`` every file under ``folder`` and return the watermark (Unix nanoseconds, the
    filesystem's own clock, read from a marker file made beside ``folder`` before the files
    are written back, less :data:`MTIME_MARGIN_NS`): a file changed after this call has a
    modification or change time (:func:`_stamp`) at or past it. Call it with writes held.
    A file that vanishes while listed (the engine's write-ahead log renames its segments from
    its own thread) is skipped: its successor is stamped by the rename. Raises ``OSError``
    for any other failure, a folder that cannot be listed included."""
    marker = folder.parent / f".{folder.name}.watermark-{uuid.uuid4().hex}"
    try:
        marker.touch()
        stamp = _stamp(marker.stat())
    finally:
        marker.unlink(missing_ok=True)
    write_back(folder)
    return stamp - MTIME_MARGIN_NS


def copy_file(source: str | Path, target: str | Path) -> None:
    """Copy the file ``source`` to ``target`` (created or truncated), then its mode and times,
    as ``shutil.copy2`` does, but keeping its holes: only the data regions that
    ``lseek(SEEK_DATA)`` and ``lseek(SEEK_HOLE)`` find are read and written, and the copy is
    given the source's size. Edge preallocates its segment files sparse (an empty collection
    is ~650 KB of data in ~284 MB of files); ``shutil.copy2`` writes every hole out as zeros.
    Where the filesystem does not report holes the whole file is one data region. Raises
    ``OSError`` as ``shutil.copy2`` does (``FileNotFoundError`` for a missing source)."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        size = os.fstat(src.fileno()).st_size
        offset = 0
        while offset < size:
            try:
                start = os.lseek(src.fileno(), offset, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # only a hole from offset to the end
                    break
                raise
            end = os.lseek(src.fileno(), start, os.SEEK_HOLE)
            os.lseek(dst.fileno(), start, os.SEEK_SET)
            while start < end:
                sent = os.sendfile(dst.fileno(), src.fileno(), start, end - start)
                if not sent:  # the source shrank meanwhile
                    break
                start += sent
            offset = end
        dst.truncate(size)
    shutil.copystat(source, target)


def copy_while_written(source: Path, destination: Path) -> None:
    """Copy the folder ``source`` to ``destination`` (which must not exist) as it is being
    written: a file or folder that vanishes meanwhile is skipped (:func:`catch_up` settles
    it). Raises ``OSError`` for any other failure."""
    destination.mkdir(parents=True)
    files, folders = _tree(source, tolerate_vanished=True)
    for folder in folders:
        (destination / folder).mkdir(parents=True, exist_ok=True)
    for relative in files:
        path, target = source / relative, destination / relative
        try:  # its folder was made above: the listing gives every file's folder
            copy_file(path, target)
        except FileNotFoundError:
            if path.exists():
                raise


def catch_up(source: Path, destination: Path, since_ns: int) -> int:
    """Make ``destination`` (a copy of ``source`` taken after :func:`settle` returned
    ``since_ns``) equal ``source`` again: remove what ``source`` no longer has (or has as
    another kind: a folder for a file or the reverse), then copy each file of ``source``
    stamped at or after ``since_ns`` (:func:`_stamp`), missing from the copy or of another
    size, and make its empty folders. Call it with writes held. A file that vanishes
    meanwhile (renamed by the write-ahead log's own thread) makes it start again, at most
    :data:`_CATCH_UP_TRIES` times. Returns the bytes copied. Raises ``OSError`` for any
    other failure, a folder that cannot be listed included."""
    for _ in range(_CATCH_UP_TRIES - 1):
        try:
            return _catch_up_once(source, destination, since_ns)
        except FileNotFoundError:
            continue
    return _catch_up_once(source, destination, since_ns)


_CATCH_UP_TRIES = 3
"""Passes :func:`catch_up` makes when files vanish under it before it gives up."""


def _catch_up_once(source: Path, destination: Path, since_ns: int) -> int:
    files, folders = (set(found) for found in _tree(source, tolerate_vanished=False))
    copied_files, copied_folders = _tree(destination, tolerate_vanished=False)
    for relative in sorted(copied_files, reverse=True):
        if relative not in files:
            (destination / relative).unlink()
    for relative in sorted(copied_folders, reverse=True):
        if relative not in folders and (destination / relative).exists():
            shutil.rmtree(destination / relative)
    for folder in sorted(folders):
        (destination / folder).mkdir(parents=True, exist_ok=True)
    copied = 0
    for relative in sorted(files):
        path, target = source / relative, destination / relative
        status = path.stat()
        if (
            _stamp(status) >= since_ns
            or not target.exists()
            or target.stat().st_size != status.st_size
        ):
            copy_file(path, target)
            copied += status.st_size
    return copied


def _stamp(status: os.stat_result) -> int:
    """The later of a file's modification and change times (ns): the change time also moves
    when a file written earlier is renamed into place, and cannot be set back."""
    return max(status.st_mtime_ns, status.st_ctime_ns)


def _fsync(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _tree(folder: Path, tolerate_vanished: bool) -> tuple[list[Path], list[Path]]:
    """Every file and every folder under ``folder``, at any depth, relative to it, from one
    ``os.walk`` that raises when a folder cannot be listed (``os.walk`` skips it silently by
    default), except a folder that vanished, with ``tolerate_vanished``."""

    def fail(error: OSError) -> None:
        if not (tolerate_vanished and isinstance(error, FileNotFoundError)):
            raise error

    files: list[Path] = []
    folders: list[Path] = []
    for root, dirs, names in os.walk(folder, onerror=fail):
        here = Path(root).relative_to(folder)
        files.extend(here / name for name in names)
        folders.extend(here / name for name in dirs)
    return files, folders
