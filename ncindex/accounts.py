"""The configured accounts Nextcloud refuses (HTTP 401), recorded per deployment.

Nextcloud accepts an app password only with the login name it was created under (nextcloud/server
``lib/private/User/Session.php``, ``validateTokenLoginName``), and LDAP or e-mail logins differ
from the user id; a revoked app password fails the same way. Such an account answers HTTP 401 to
every request, so every task for it would fail. When a task or a scan meets that 401 it records
the account here (Redis hash :attr:`ncindex.names.Names.refused_accounts`: user id →
``{"at": Unix seconds, "where": request}``); ``/readyz`` of both apps, ``ncindex status`` and the
gauge ``ncindex_account_refused{user}`` report it, and the task ends (``NextcloudAuthError`` is
permanent: never retried). The next request that the account gets through — a reconcile scan's
listing — clears it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis
import structlog

from ncindex.names import Names
from ncindex.redis_replies import as_text

log = structlog.get_logger(__name__)


def record_refused(
    client: redis.Redis, keys: Names, user: str, where: str, now: float | None = None
) -> None:
    """Note that Nextcloud answered 401 for account ``user`` of deployment ``keys``
    (``where``: the request, cut to 300 characters; ``now``: Unix seconds)."""
    entry = {"at": int(time.time() if now is None else now), "where": where[:300]}
    client.hset(keys.refused_accounts, user, json.dumps(entry))
    log.warning("account_refused", user=user, where=where)


def clear_refused(client: redis.Redis, keys: Names, user: str) -> None:
    """Forget a refusal of ``user`` (its credentials worked again)."""
    client.hdel(keys.refused_accounts, user)


def refused_accounts(client: redis.Redis, keys: Names) -> dict[str, dict[str, Any]]:
    """User id → ``{"at", "where"}`` of every account of deployment ``keys`` that Nextcloud
    refused (401), by user id; an unreadable entry reads as ``{}``. Raises
    ``redis.RedisError`` when Redis cannot be asked."""
    out: dict[str, dict[str, Any]] = {}
    for raw_user, raw in sorted(client.hgetall(keys.refused_accounts).items()):
        try:
            entry = json.loads(raw)
        except ValueError:
            entry = {}
        out[as_text(raw_user, "replace")] = entry if isinstance(entry, dict) else {}
    return out
