"""Fail fast on a Redis that stopped answering, for the search API's calls.

The search API asks Redis for its login cache and the refusal-limit exemption; both fail open
(Nextcloud is asked instead; the caller is not exempt). RCP sessions cannot do without Redis:
their calls fail with a retryable error. Without a breaker each such call waits for its socket
timeout on a stalled Redis (SIGSTOP, a failover, a full network buffer): one search took
15–24 s, and each RCP call waited out the 5 s socket timeout before its error.
:class:`RedisBreaker` opens on the first connection error or timeout (``pybreaker``): for
:data:`RESET_SECONDS` its calls raise :class:`RedisSkipped` at once; then calls try Redis
again (the first to succeed closes it, a failure opens it for another period). Its calls time
out after :data:`TIMEOUT_SECONDS`, as the rate limiter's do (flask-limiter then counts in
memory and checks Redis again with a backoff).
"""

from __future__ import annotations

from typing import Any

import pybreaker
import redis

#: How long the breaker stays open before one call tries Redis again, seconds.
RESET_SECONDS = 5.0
#: Connect and read timeout of such calls (and of the rate limiter's), seconds: Redis answers
#: them in well under a millisecond when healthy.
TIMEOUT_SECONDS = 0.5


class RedisSkipped(redis.ConnectionError):
    """Raised instead of calling Redis while the breaker is open (a ``redis.RedisError``, so
    callers that fail open on Redis errors need nothing more)."""


def _not_an_outage(exc: BaseException) -> bool:
    """Errors that say nothing about Redis's reachability (a wrong type, a script error) do
    not open the breaker."""
    return not isinstance(exc, (redis.ConnectionError, redis.TimeoutError))


class RedisBreaker:
    """Commands to the Redis at ``url`` (:data:`TIMEOUT_SECONDS` timeouts) behind a circuit
    breaker, thread-safe: ``call("get", key)``.

    Raises what the command raises, or :class:`RedisSkipped` while open (the call that opens
    it raises :class:`RedisSkipped` too, chained to the timeout or connection error)."""

    def __init__(self, url: str, reset_seconds: float = RESET_SECONDS) -> None:
        self.client = redis.Redis.from_url(
            url, socket_timeout=TIMEOUT_SECONDS, socket_connect_timeout=TIMEOUT_SECONDS
        )
        self._breaker = pybreaker.CircuitBreaker(
            fail_max=1, reset_timeout=reset_seconds, exclude=[_not_an_outage], name="redis"
        )

    @property
    def open(self) -> bool:
        """Whether calls are being skipped."""
        return self._breaker.current_state == pybreaker.STATE_OPEN

    def call(self, command: str, *args: Any, **kwargs: Any) -> Any:
        """``client.<command>(*args, **kwargs)``, unless the breaker is open.

        Runs through pybreaker's ``calling()`` context, not ``CircuitBreaker.call``: the
        latter holds the breaker's lock for the whole command, so every thread's Redis call
        would wait for the one in flight (a trial call on a stalled Redis held them all for
        its timeout). Here the lock covers only the state checks; calls run concurrently."""
        try:
            with self._breaker.calling():
                return getattr(self.client, command)(*args, **kwargs)
        except pybreaker.CircuitBreakerError as exc:
            raise RedisSkipped(f"redis skipped for {self._breaker.reset_timeout} s: {exc}") from exc

    def close(self) -> None:
        """Close the client's connections."""
        self.client.close()
