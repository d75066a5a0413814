"""Fail fast on a Redis that stopped answering, for the search API's calls.

The search API asks Redis for its login cache and the refusal-limit exemption; both fail open
(Nextcloud is asked instead; the caller is not exempt). RCP sessions are kept in the process's
memory meanwhile (:class:`~ncindex.search.rcp_sessions.RcpSessions`). Without a breaker each
such call waits for its socket timeout on a stalled Redis (SIGSTOP, a failover, a full network
buffer): one search took 15–24 s, and each RCP call waited out the 5 s socket timeout.
:class:`RedisBreaker` opens on the first connection error or timeout: for
:data:`RESET_SECONDS` its calls raise :class:`RedisSkipped` at once; then calls try Redis
again (the first to succeed closes it, a failure opens it for another period). Its calls time
out after :data:`TIMEOUT_SECONDS`, as the rate limiter's do (flask-limiter then counts in
memory and checks Redis again with a backoff).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import redis

#: How long the breaker stays open before one call tries Redis again, seconds.
RESET_SECONDS = 5.0
#: Connect and read timeout of such calls (and of the rate limiter's), seconds: Redis answers
#: them in well under a millisecond when healthy.
TIMEOUT_SECONDS = 0.5


class RedisSkipped(redis.ConnectionError):
    """Raised instead of calling Redis while the breaker is open (a ``redis.RedisError``, so
    callers that fail open on Redis errors need nothing more)."""


class RedisBreaker:
    """Commands to the Redis at ``url`` (:data:`TIMEOUT_SECONDS` timeouts) behind a circuit
    breaker, thread-safe: ``call("get", key)``.

    A connection error or timeout opens it for ``reset_seconds``, measured on ``clock``
    (seconds, monotonic; tests pass one they advance by hand). Other errors (a wrong type, a
    script error) say nothing about Redis's reachability and do not open it.

    Raises what the command raises, or :class:`RedisSkipped` while open (the call that opens
    it raises :class:`RedisSkipped` too, chained to the timeout or connection error)."""

    def __init__(
        self,
        url: str,
        reset_seconds: float = RESET_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = redis.Redis.from_url(
            url, socket_timeout=TIMEOUT_SECONDS, socket_connect_timeout=TIMEOUT_SECONDS
        )
        self.reset_seconds = reset_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._opened_at: float | None = None  # on ``clock``; None: closed

    @property
    def open(self) -> bool:
        """Whether it is open: calls are skipped, or (once ``reset_seconds`` have passed) the
        next calls try Redis and the first to succeed closes it."""
        return self._opened_at is not None

    def call(self, command: str, *args: Any, **kwargs: Any) -> Any:
        """``client.<command>(*args, **kwargs)``, unless the breaker is open.

        The lock covers only the state checks, not the command: every thread's Redis call
        would otherwise wait for the one in flight (a trial call on a stalled Redis held them
        all for its timeout, as ``pybreaker``'s ``CircuitBreaker.call`` did)."""
        with self._lock:
            opened_at = self._opened_at
            if opened_at is not None and self._clock() - opened_at < self.reset_seconds:
                raise RedisSkipped(f"redis skipped for {self.reset_seconds} s: breaker open")
        try:
            result = getattr(self.client, command)(*args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            with self._lock:
                self._opened_at = self._clock()
            raise RedisSkipped(f"redis skipped for {self.reset_seconds} s: {exc}") from exc
        except Exception:
            self._answered(opened_at)  # Redis answered, with an error
            raise
        self._answered(opened_at)
        return result

    def _answered(self, opened_at: float | None) -> None:
        """A call begun in state ``opened_at`` did not meet an outage: close the breaker,
        unless another call opened it (again) meanwhile."""
        with self._lock:
            if self._opened_at == opened_at:
                self._opened_at = None

    def close(self) -> None:
        """Close the client's connections."""
        self.client.close()
