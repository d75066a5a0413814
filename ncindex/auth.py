"""Authenticate search callers with their own Nextcloud credentials (DESIGN §3).

The caller's ``Authorization`` header (Basic with an app password, or a Bearer token Nextcloud
accepts) is resolved to a user id through ``GET /ocs/v2.php/cloud/user``. The answer is cached
in Redis for ``user_cache_seconds`` under a SHA-256 of the header — never the credential itself.
"""

from __future__ import annotations

import contextlib
import hashlib

import redis

from ncindex.errors import NextcloudAuthError, PermanentError
from ncindex.nextcloud.client import NextcloudClient
from ncindex.runtime import Services

AUTH_PREFIX = "ncindex:auth:"


class Unauthenticated(PermanentError):
    """Raised when a caller sent no usable credentials or Nextcloud rejected them."""


def resolve_caller(services: Services, authorization: str | None) -> NextcloudClient:
    """A client acting as the caller, with ``client.user`` resolved.

    Raises :class:`Unauthenticated` for a missing, malformed or rejected header and
    ``NextcloudUnavailable`` when Nextcloud cannot be asked.
    """
    scheme, _, credential = (authorization or "").partition(" ")
    if scheme.lower() not in ("basic", "bearer") or not credential.strip():
        raise Unauthenticated("send Authorization: Basic (app password) or Bearer")
    assert authorization is not None
    client = services.caller(authorization)
    key = AUTH_PREFIX + hashlib.sha256(authorization.encode()).hexdigest()
    ttl = services.settings.user_cache_seconds
    try:
        cached = services.redis.get(key) if ttl else None
    except redis.RedisError:
        cached = None
    if cached is not None:
        client.user = cached.decode()
        return client
    try:
        user = client.current_user()
    except NextcloudAuthError as exc:
        raise Unauthenticated("Nextcloud rejected the credentials") from exc
    if ttl:
        with contextlib.suppress(redis.RedisError):
            services.redis.set(key, user, ex=ttl)
    return client
