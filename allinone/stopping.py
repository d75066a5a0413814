"""How ``ncindex up`` is told to stop: SIGTERM and SIGINT, without a lock in the handler.

The handler only counts the signal and, once the grace period of an orderly stop has passed,
ends the process (``os._exit``); the main thread learns of the signal from
:func:`signal.set_wakeup_fd` — the interpreter writes the signal number to a pipe, which
:meth:`StopSignals.wait` reads with ``select``. An earlier version called
``threading.Event.set()`` from the handler: a second signal arriving while the first ``set()``
held the event's lock re-entered it on the same thread and hung the process for good (seen with
SIGTERM sent to ``make run``'s process group, which reaches ``make`` and ``ncindex`` and is
passed on by ``make``).

The same signal delivered again — to the process and to its group, or repeated by a supervisor —
during the grace period changes nothing; one arriving after it forces the exit at once.
A watchdog thread, started with the handlers, forces it too when the stop takes longer than
``grace + margin`` seconds after the first signal, so the stop is bounded even when no second
signal comes (also while ``ncindex up`` is still starting).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from types import FrameType

#: The signals that stop ``ncindex up``.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: Exit status of a forced exit (grace period over): the one ``timeout(1)`` uses.
FORCED_EXIT = 124
#: How often :meth:`StopSignals.wait` and the watchdog look at the signal count, seconds (the
#: wake-up pipe ends a wait sooner; another thread waiting may have read it first).
POLL_SECONDS = 0.5


class StopSignals:
    """SIGTERM/SIGINT handlers for the main thread of ``ncindex up``.

    ``grace`` (seconds) is how long an orderly stop may take after the first signal before a
    further signal ends the process; the watchdog ends it ``margin`` seconds after that.
    Must be created in the main thread (:func:`signal.signal` requires it); :meth:`restore`
    puts the previous handlers back.
    """

    def __init__(self, grace: float, margin: float = 5.0) -> None:
        self.grace = grace
        self.margin = margin
        #: signals received so far (written only by the handler)
        self.count = 0
        #: processes to SIGTERM before a forced exit (a private redis-server, which runs in
        #: a process group of its own); ``os.kill`` is a system call, safe in a handler
        self.children: list[int] = []
        #: ``time.monotonic()`` of the first signal, ``None`` before it
        self.first_at: float | None = None
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._previous = {sig: signal.signal(sig, self._handle) for sig in STOP_SIGNALS}
        self._restored = False
        threading.Thread(target=self._watch, name="stop-watchdog", daemon=True).start()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        """Count the signal; after the grace period, exit at once. Takes no lock, allocates
        nothing that another thread could hold."""
        self.count += 1
        if self.first_at is None:
            self.first_at = time.monotonic()
        elif time.monotonic() - self.first_at > self.grace:
            self._exit()

    def _exit(self) -> None:
        """The forced exit: SIGTERM to :attr:`children`, then ``os._exit``."""
        for pid in self.children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        os._exit(FORCED_EXIT)

    @property
    def received(self) -> bool:
        """Whether a stop signal has arrived."""
        return self.first_at is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a stop signal arrives or ``timeout`` seconds pass; whether one has."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.received:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            with contextlib.suppress(InterruptedError):
                step = POLL_SECONDS if left is None else min(left, POLL_SECONDS)
                ready, _, _ = select.select([self._read], [], [], step)
                if ready:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._read, 512)
        return self.received

    def _watch(self) -> None:
        """Watchdog thread: ends the process ``grace + margin`` seconds after the first
        signal, writing one line to stderr first. It polls :attr:`first_at` (no lock)."""
        limit = self.grace + self.margin
        while not self._restored:
            if self.first_at is not None and time.monotonic() - self.first_at > limit:
                with contextlib.suppress(OSError):
                    os.write(2, f"stop took over {limit:g} s; exiting\n".encode())
                self._exit()
            time.sleep(POLL_SECONDS)

    def restore(self) -> None:
        """Put back the handlers and wake-up fd found at creation, stop the watchdog, close
        the pipe."""
        self._restored = True
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(self._previous_fd)
        os.close(self._read)
        os.close(self._write)
