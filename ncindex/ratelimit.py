"""Per-caller rate limits for the search endpoints, on flask-limiter with Redis storage.

One shared limit (``settings.search_rate_limit``, e.g. ``"600/minute"``) covers
``POST /v1/search``, the context endpoint and ``POST /rcp/…``. The key is a SHA-256 of the
caller's ``Authorization`` header — the same key the user-id cache uses, so no request to
Nextcloud is needed to count and the credential itself is never stored — or the client
address when there is no header. A breach answers 429 through ``on_breach`` (problem+json
``rate_limited`` for the REST API, JSON-RPC ``-32011`` for RCP) with ``Retry-After`` in
seconds. If Redis cannot be reached the counters fall back to this process's memory until it
answers again (errors are swallowed): rate limiting protects capacity, it is not access
control.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

import limits
from flask import Flask, Response, request
from flask_limiter import Limiter, RequestLimit

from ncindex.settings import Settings

SCOPE = "search"
"""The shared limit's scope name (one bucket per caller across the limited endpoints)."""


def caller_key() -> str:
    """The rate-limit key of the current request: ``cred:<sha256 of Authorization>`` or
    ``addr:<remote address>``."""
    authorization = request.headers.get("Authorization")
    if authorization:
        return "cred:" + hashlib.sha256(authorization.encode("utf-8", "replace")).hexdigest()
    return f"addr:{request.remote_addr or '?'}"


def retry_after_seconds(limit: RequestLimit) -> int:
    """Whole seconds until ``limit``'s window resets (at least 1)."""
    return max(1, int(limit.reset_at - time.time()))


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
        storage_uri=settings.redis_url,
        storage_options={"socket_connect_timeout": 2, "socket_timeout": 2},
        strategy="moving-window",
        swallow_errors=True,
        in_memory_fallback_enabled=True,
        headers_enabled=False,
        on_breach=on_breach,
        key_prefix="ncindex:ratelimit",
    )
