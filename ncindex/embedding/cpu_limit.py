"""How many CPUs this process may use, counting a container's CPU limit.

ONNX Runtime sizes its intra-op thread pool, when not told, to the host's physical cores
(``CreateThreadPoolHelper`` → ``GetNumPhysicalCpuCores``): a cgroup CPU quota is invisible to it
(microsoft/onnxruntime#29510), so a pod limited to 2 CPUs on a 32-core node ran 32 threads,
throttled by the quota. :func:`limited_cpus` is the count to give it instead when the process
is limited: the CPUs of its affinity mask (a cpuset) and, under cgroup v2, the quota of
``/sys/fs/cgroup/cpu.max`` rounded up.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
"""cgroup v2's CPU bandwidth limit of this process's cgroup, as a container sees it:
``"<quota> <period>"`` in microseconds, or ``"max <period>"`` for no limit (the kernel's
Documentation/admin-guide/cgroup-v2.rst, "cpu.max")."""


def quota_cpus(text: str) -> int | None:
    """The CPUs a ``cpu.max`` line allows, rounded up (``"200000 100000"`` → 2, ``"150000
    100000"`` → 2, ``"50000 100000"`` → 1), or ``None`` for ``"max …"`` and for a line that is
    not two positive whole numbers (nothing is assumed from an unreadable limit)."""
    parts = text.split()
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    quota, period = int(parts[0]), int(parts[1])
    if quota <= 0 or period <= 0:
        return None
    return max(1, math.ceil(quota / period))


def usable_cpus(cpu_max: Path = CPU_MAX) -> int:
    """The CPUs this process may use: its affinity mask's size (``os.sched_getaffinity``),
    lowered to ``cpu_max``'s quota (:func:`quota_cpus`) when that file sets one; at least 1."""
    cpus = len(os.sched_getaffinity(0))
    try:
        quota = quota_cpus(cpu_max.read_text(encoding="ascii"))
    except (OSError, UnicodeDecodeError):
        quota = None  # cgroup v1, or not Linux: the affinity mask only
    return max(1, min(cpus, quota) if quota is not None else cpus)


def limited_cpus(cpu_max: Path = CPU_MAX) -> int | None:
    """:func:`usable_cpus` when it is below the machine's CPU count (``os.cpu_count``: a
    cpuset or a quota limits this process), else ``None``: unlimited, ONNX Runtime's own
    default (physical cores) stands."""
    cpus = usable_cpus(cpu_max)
    return cpus if cpus < (os.cpu_count() or cpus) else None
