"""The bound on a prefork pool process's memory (``NCINDEX_WORKER_MAX_MEMORY_PER_CHILD``,
Celery's ``worker_max_memory_per_child``, KiB) as a ``celery worker`` sees it, logged where a
bound that cannot work shows (:mod:`workers.heartbeat` connects these for a worker):

* :func:`check_reachable`, in the main process at start: ``worker_memory_bound_unreachable``
  (warning) when the bound is at or past the memory the worker may have (its cgroup's
  ``memory.max``, else the machine's): a pool process's peak never passes it, the OOM killer
  ends the container first, and no process is ever replaced.
* :func:`check_fresh`, in a new pool process: ``pool_process_past_memory_bound`` (error) when
  its peak resident size is already past the bound (a pool process starts with its worker's
  peak): it is replaced after every task, and each new one loads the model again (4.8 s).
* :func:`count_task` after each task and :func:`note_recycled` when a pool process leaves to be
  replaced: ``pool_process_recycled`` (warning) with its ``pid``, ``peak_kib`` and ``tasks``
  run; ``tasks`` of 1 on line after line is a bound below what one task leaves behind.

billiard's own line on a replaced process goes to the ``multiprocessing`` logger, which logs
nothing here. billiard compares ``getrusage(RUSAGE_SELF).ru_maxrss`` (KiB on Linux) with the
bound after each task (``billiard/pool.py`` ``Worker.workloop``, ``billiard/compat.py``
``mem_rss``).
"""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Any

import structlog

SETTING = "NCINDEX_WORKER_MAX_MEMORY_PER_CHILD"
CGROUP = Path("/sys/fs/cgroup")

_log = structlog.get_logger(__name__)
_tasks_run = 0  # in this (pool) process


def pool_bound(worker: Any) -> int | None:
    """The bound billiard applies in ``worker``'s pool processes, KiB (its
    ``max_memory_per_child``: ``--max-memory-per-child``, else the app's), or ``None``: none
    set, or a pool other than prefork. The solo and threads pools run tasks in the worker's
    own process and ignore the bound (``celery/concurrency/solo.py`` even sends
    ``worker_process_init`` in the worker itself, its model loaded), so nothing is said of it
    there."""
    from celery.concurrency.prefork import TaskPool

    pool_cls = getattr(worker, "pool_cls", None)
    if not (isinstance(pool_cls, type) and issubclass(pool_cls, TaskPool)):
        return None
    bound = getattr(worker, "max_memory_per_child", None)
    return int(bound) if bound else None


def memory_limit_kib(cgroup: Path = CGROUP) -> int:
    """The memory this process may have, KiB: the smallest of its cgroup's limit (v2
    ``memory.max``, v1 ``memory/memory.limit_in_bytes``, under ``cgroup``; ``max`` or a file
    that cannot be read is no limit) and the machine's physical memory."""
    limits = [os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")]
    for path in (cgroup / "memory.max", cgroup / "memory" / "memory.limit_in_bytes"):
        try:
            text = path.read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    return min(limits) // 1024


def check_reachable(bound_kib: int | None, concurrency: int | None, limit_kib: int) -> None:
    """Warn ``worker_memory_bound_unreachable`` when ``bound_kib`` (``None`` or 0: no bound) is
    at or past ``limit_kib`` (:func:`memory_limit_kib`), naming the setting, both figures and
    the pool's ``concurrency``."""
    if bound_kib and bound_kib >= limit_kib:
        _log.warning(
            "worker_memory_bound_unreachable",
            setting=SETTING,
            bound_kib=bound_kib,
            limit_kib=limit_kib,
            concurrency=concurrency,
            reason="a pool process's peak stays under the memory limit: none is replaced",
        )


def check_fresh(bound_kib: int | None) -> None:
    """In a new pool process: log ``pool_process_past_memory_bound`` at error level when its
    peak resident size (``ru_maxrss``, KiB) is already past ``bound_kib`` (``None`` or 0: no
    bound)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if bound_kib and peak > bound_kib:
        _log.error(
            "pool_process_past_memory_bound",
            setting=SETTING,
            bound_kib=bound_kib,
            peak_kib=peak,
            reason="replaced after every task: raise the bound or set 0",
        )


def count_task(**kwargs: Any) -> None:
    """``task_postrun``: one more task run in this process."""
    global _tasks_run
    _tasks_run += 1


def note_recycled(pid: int | None = None, exitcode: int | None = None, **kwargs: Any) -> None:
    """``worker_process_shutdown``: when this pool process leaves to be replaced (billiard's
    ``EX_RECYCLE``: its peak was past the bound after a task), log ``pool_process_recycled``
    at warning level with its ``pid``, ``peak_kib`` (``ru_maxrss``, the figure billiard
    compared) and the ``tasks`` it ran."""
    from billiard.pool import EX_RECYCLE

    if exitcode == EX_RECYCLE:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        _log.warning("pool_process_recycled", pid=pid, peak_kib=peak, tasks=_tasks_run)
