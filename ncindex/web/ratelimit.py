"""Per-caller rate limits for the search endpoints, on flask-limiter with Redis storage.

One shared limit (``settings.search_rate_limit``, e.g. ``"600/minute"``) covers
``POST /v1/search``, the context endpoint, ``GET /v1/folders``, ``/v1/tags``,
``/v1/categories``, ``/v1/owners``, ``/v1/status``, ``POST /rcp/…`` but ``info`` and
``ping``, the search page's sign-in routes and ``/mcp`` (:class:`CallerLimit`); README,
"Rate limit", lists them. The key (:func:`caller_key`) is a hash of the Basic user name, of
a Bearer header, or the client address when there is no header — no request to Nextcloud is
needed to count and no credential is stored; behind reverse proxies the client address is
the one they forwarded (``settings.trusted_proxy_hops``, :mod:`ncindex.web.proxies`). A second
limit of the same rate counts refused credentials (401 answers, and RCP batches whose
credential was refused: :func:`mark_refused`) per client address
(:func:`address_key`, :func:`refused`), so a flood of made-up names or tokens — each its own
caller — is stopped before it makes Nextcloud throttle ncindex's own address (Nextcloud's
brute-force protection counts failed logins per address); callers whose credentials Nextcloud
confirmed recently (``ncindex.web.auth.confirmed``) are exempt from it, so such a flood from an
address many share does not lock them out. A breach
answers 429 through ``on_breach`` (problem+json ``rate_limited`` for the REST API, JSON-RPC
``-32011`` for RCP) with ``Retry-After`` in seconds. If Redis cannot be reached the counters
fall back to this process's memory until it answers again (errors are swallowed), for the
search API (flask-limiter's ``in_memory_fallback_enabled``) and the MCP server
(:class:`CallerLimit`) alike: rate limiting protects capacity, it is not access control, so a
Redis outage neither refuses requests nor lifts the limits (each process counts its own).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any

import limits
import limits.storage
import limits.strategies
import structlog
from flask import Flask, Response, g, request
from flask_limiter import Limiter, RequestLimit
from flask_limiter.constants import MAX_BACKEND_CHECKS

from ncindex.nextcloud.client import basic_login
from ncindex.redis_breaker import TIMEOUT_SECONDS
from ncindex.settings import Settings

log = structlog.get_logger(__name__)

SCOPE = "search"
"""The shared limit's scope name (one bucket per caller across the limited endpoints)."""

REFUSED_SCOPE = "refused"
"""Scope of the second limit: refused credentials (401 answers, :func:`mark_refused`) per
client address."""


def caller_key() -> str:
    """The rate-limit key of the current Flask request (:func:`caller_key_for`)."""
    return caller_key_for(request.headers.get("Authorization"), request.remote_addr)


def caller_key_for(authorization: str | None, address: str | None) -> str:
    """The rate-limit key of a request with this ``Authorization`` header from ``address``.

    Basic credentials count against the claimed user name in lower case (``user:<hash>``), so
    guessing a user's password from any number of clients shares one bucket however the name
    is cased — Nextcloud's database user backend finds a login case-insensitively
    (nextcloud/server ``lib/private/User/Database.php`` ``checkPassword``: ``WHERE
    LOWER(`uid`) = LOWER(?)``), so ``BOB`` and ``bob`` are one account; other credentials (Bearer
    tokens, long random values that cannot be guessed) against a SHA-256 of the header
    (``cred:<hex>``); no credentials against the client address (``addr:<ip>``). The price:
    a flood of wrong passwords for a user name also slows that user's own searches.
    """
    if not authorization:
        return f"addr:{address or '?'}"
    name = basic_login(authorization)
    if name:
        return "user:" + hashlib.sha256(name.lower().encode()).hexdigest()
    return "cred:" + hashlib.sha256(authorization.encode("utf-8", "replace")).hexdigest()


def address_key() -> str:
    """The client address of the current request (``addr:<ip>``)."""
    return f"addr:{request.remote_addr or '?'}"


_REFUSED = "ncindex_credentials_refused"
"""The ``flask.g`` attribute :func:`mark_refused` sets."""


def mark_refused() -> None:
    """Count the current request against :data:`REFUSED_SCOPE` though its answer is no
    HTTP 401: an RCP batch whose credential was refused is answered 200 (JSON-RPC answers a
    batch with one array, each message its own -32012), yet it was one refused login in
    Nextcloud — a Basic login it refuses (a made-up password, a revoked app password:
    ``isTokenPassword`` finds no token, ``login`` fails) is one
    ``Throttler::registerAttempt('login', $remoteAddress)`` (nextcloud/server
    ``lib/private/User/Session.php`` ``tryBasicAuthLogin`` → ``logClientIn`` →
    ``handleLoginFailed``), after which ``lib/private/Security/Bruteforce/Throttler.php``
    ``sleepDelayOrThrowOnMax`` slows every login from that address — and, uncounted, it let a
    client try credentials batch after batch without being slowed. Call it inside the view."""
    setattr(g, _REFUSED, True)


def refused(response: Response) -> bool:
    """Whether ``response`` refused the caller's credentials (HTTP 401, or a request the view
    marked with :func:`mark_refused`): only those count against :data:`REFUSED_SCOPE`, once
    per request."""
    return response.status_code == 401 or bool(g.get(_REFUSED))


def retry_after_seconds(limit: RequestLimit) -> int:
    """Whole seconds until ``limit``'s window resets (at least 1)."""
    return max(1, int(limit.reset_at - time.time()))


def storage_uri(redis_url: str) -> str:
    """The storage URI under which the ``limits`` library reaches the Redis at ``redis_url``
    (``NCINDEX_REDIS_URL``, redis-py's form): the same URL, but ``unix://`` as
    ``redis+unix://``. ``limits.storage.storage_from_string`` picks the storage by scheme
    (``limits/storage/redis.py`` ``RedisStorage.STORAGE_SCHEME``: ``redis``, ``rediss``,
    ``redis+unix``; ``unix`` is "unknown storage scheme") and gives ``redis.from_url`` the URL
    with ``redis+unix`` put back to ``unix``, query included."""
    if redis_url.startswith("unix://"):
        return "redis+" + redis_url
    return redis_url


def _storage_options(settings: Settings) -> dict[str, Any]:
    return {
        "socket_connect_timeout": TIMEOUT_SECONDS,
        "socket_timeout": TIMEOUT_SECONDS,
        "key_prefix": settings.names.limits_prefix,
    }


def breach_detail(items: list[limits.RateLimitItem]) -> str:
    """A 429's ``detail`` for the limits ``items`` (the breached one, or all a limit string
    sets): ``"more than 600 requests per 1 minute"``, several joined by ``" or "``."""
    parts = [
        f"{item.amount} requests per {item.multiples} {item.GRANULARITY.name}"
        + ("s" if item.multiples != 1 else "")
        for item in items
    ]
    return "more than " + " or ".join(parts)


class CallerLimit:
    """The search API's two limits for an app that is not Flask (the MCP server): the shared
    per-caller limit (:data:`SCOPE`) and the per-address count of refused credentials
    (:data:`REFUSED_SCOPE`), with the same limit string, storage, moving window and counter
    keys as :func:`create_limiter`'s, so a caller's requests to ``/mcp`` and to ``/v1/search``
    draw on one count. Each method answers ``None`` when the request is within every limit,
    else the whole seconds (at least 1) until the tightest breached window has room again.

    When Redis fails (an error or a timeout, :data:`~ncindex.redis_breaker.TIMEOUT_SECONDS`)
    the request is counted in this process's memory instead, and so are the next ones, until a
    ping finds Redis again; the pings are spaced as flask-limiter spaces the search API's
    (``Limiter.__should_check_backend``: 1, 2, 4, … 32 seconds after the last, then from 1
    again, :data:`flask_limiter.constants.MAX_BACKEND_CHECKS`). That is the search API's choice
    (``in_memory_fallback_enabled``, ``Limiter._check_request_limit``): an outage neither
    refuses requests nor lifts the limits, and no request waits for Redis's timeout but the
    one that meets the outage and the pings. Before, every request was let through uncounted
    and waited for each of its Redis calls' timeouts on a stalled Redis (1 s a request)."""

    def __init__(self, settings: Settings) -> None:
        self.items = limits.parse_many(settings.search_rate_limit)
        self.storage = limits.storage.storage_from_string(
            storage_uri(settings.redis_url), **_storage_options(settings)
        )
        self.strategy = limits.strategies.MovingWindowRateLimiter(self.storage)
        self.fallback = limits.strategies.MovingWindowRateLimiter(limits.storage.MemoryStorage())
        self.prefix = settings.names.ratelimit_prefix
        self._lock = threading.Lock()
        self._dead = False  # Redis failed: count in memory until a ping finds it again
        self._checked_at = 0.0  # monotonic seconds: the last ping, or the failure
        self._checks = 0  # pings since the failure (the next waits 2 ** _checks seconds)

    def hit(self, authorization: str | None, address: str | None) -> int | None:
        """Count one request against the caller's limit."""
        return self._apply("hit", caller_key_for(authorization, address), SCOPE)

    def refused_exceeded(self, address: str | None) -> int | None:
        """Whether ``address`` has used up its refused-credentials limit (not counted)."""
        return self._apply("test", f"addr:{address or '?'}", REFUSED_SCOPE)

    def count_refused(self, address: str | None) -> None:
        """Count one refused credential (an HTTP 401 answer) against ``address``."""
        self._apply("hit", f"addr:{address or '?'}", REFUSED_SCOPE)

    def _apply(self, method: str, key: str, scope: str) -> int | None:
        strategy = self._current()
        try:
            return self._run(strategy, method, key, scope)
        except Exception as exc:  # the storage failed: count in memory from now on
            log.warning("rate_limit_storage_failed", error=f"{type(exc).__name__}: {exc}")
            if strategy is self.fallback:  # memory failed too: let the request through
                return None
            with self._lock:
                self._dead, self._checked_at, self._checks = True, time.monotonic(), 0
            return self._run(self.fallback, method, key, scope)

    def _run(
        self, strategy: limits.strategies.RateLimiter, method: str, key: str, scope: str
    ) -> int | None:
        for item in sorted(self.items):
            if not getattr(strategy, method)(item, self.prefix, key, scope):
                reset = strategy.get_window_stats(item, self.prefix, key, scope)[0]
                return max(1, int(reset - time.time()))
        return None

    def _current(self) -> limits.strategies.RateLimiter:
        """The Redis counters, or while Redis is down this process's; pings Redis when the
        next ping is due (and goes back to Redis when it answers)."""
        with self._lock:
            if not self._dead:
                return self.strategy
            now = time.monotonic()
            if now - self._checked_at <= 2**self._checks:
                return self.fallback
            self._checked_at = now
            self._checks = 0 if self._checks >= MAX_BACKEND_CHECKS else self._checks + 1
        if not self.storage.check():
            return self.fallback
        log.info("rate_limit_storage_recovered")
        with self._lock:
            self._dead, self._checks = False, 0
        return self.strategy


def create_limiter(
    app: Flask, settings: Settings, on_breach: Callable[[RequestLimit], Response]
) -> Limiter | None:
    """A limiter bound to ``app`` storing counters in ``settings.redis_url``, or ``None``
    when ``settings.search_rate_limit`` is empty (no limit). Raises ``ValueError`` for a limit
    string flask-limiter cannot parse."""
    if not settings.search_rate_limit.strip():
        return None
    limits.parse_many(settings.search_rate_limit)  # ValueError early, not on first request
    return Limiter(
        caller_key,
        app=app,
        storage_uri=storage_uri(settings.redis_url),
        storage_options=_storage_options(settings),
        strategy="moving-window",
        swallow_errors=True,
        in_memory_fallback_enabled=True,
        headers_enabled=False,
        on_breach=on_breach,
        key_prefix=settings.names.ratelimit_prefix,
    )
