"""Fault switches: make a path family answer 5xx, answer late, or hang until the client gives up.

Families are the request families counted by the simulator (``webdav``, ``dav-search``, ``ocs``,
``notes``, ``deck``, ``news``, ``systemtags``, ``status``). Example::

    sim.faults.set("notes", status=503)            # every Notes request → 503
    sim.faults.set("webdav", delay=2.0, times=1)   # next WebDAV request answers 2 s late
    sim.faults.set("ocs", timeout=True)            # hang (until cleared or 300 s)
    sim.faults.clear()
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

__all__ = ["Fault", "FaultInjector"]


@dataclass
class Fault:
    """One switch: ``status`` (HTTP code to answer), ``delay`` (seconds), ``timeout`` (hang).

    ``times`` limits how many requests it affects (None = until cleared); ``method`` limits it
    to one HTTP method.
    """

    status: int | None = None
    delay: float = 0.0
    timeout: bool = False
    times: int | None = None
    method: str | None = None
    release: threading.Event = field(default_factory=threading.Event, repr=False)


class FaultInjector:
    """Thread-safe registry of :class:`Fault` switches per family."""

    HANG_SECONDS = 300.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: dict[str, Fault] = {}

    def set(
        self,
        family: str,
        *,
        status: int | None = None,
        delay: float = 0.0,
        timeout: bool = False,
        times: int | None = None,
        method: str | None = None,
    ) -> Fault:
        """Install a fault for ``family`` (replacing the previous one); returns it."""
        fault = Fault(status, float(delay), timeout, times, method.upper() if method else None)
        with self._lock:
            old = self._faults.get(family)
            if old is not None:
                old.release.set()
            self._faults[family] = fault
        return fault

    def clear(self, family: str | None = None) -> None:
        """Remove the fault of ``family`` (or all) and release requests hanging on it."""
        with self._lock:
            names = [family] if family else list(self._faults)
            for name in names:
                fault = self._faults.pop(name, None)
                if fault is not None:
                    fault.release.set()

    def take(self, family: str, method: str) -> Fault | None:
        """The fault that applies to this request (consuming one of its ``times``), if any."""
        with self._lock:
            fault = self._faults.get(family)
            if fault is None or (fault.method and fault.method != method.upper()):
                return None
            if fault.times is not None:
                fault.times -= 1
                if fault.times <= 0:
                    del self._faults[family]
            return fault

    def active(self) -> dict[str, Fault]:
        """A snapshot of the installed faults by family."""
        with self._lock:
            return dict(self._faults)
