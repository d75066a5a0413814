"""The configured accounts as Nextcloud sees them: which it refuses, and which can see a node.

**Refused accounts.** Nextcloud accepts an app password only with the login name it was
created under (nextcloud/server ``lib/private/User/Session.php``, ``validateTokenLoginName``),
and LDAP or e-mail logins differ from the user id; a revoked app password fails the same way.
Such an account answers HTTP 401 to every request, so every task for it would fail. When a
task or a scan meets that 401 it records the account here (Redis hash
:data:`REFUSED_KEY`: user id → ``{"at": Unix seconds, "where": request}``); ``/readyz`` of both
apps, ``ncindex status`` and the gauge ``ncindex_account_refused{user}`` report it, and the
task ends (``NextcloudAuthError`` is permanent: never retried). The next request that the
account gets through — a reconcile scan's listing — clears it.

**Viewers of a node.** An event without a configured session user (``"user": null`` from occ,
cron, a workflow rule, an admin; or the view of an unconfigured user) says which file changed
but not as whom to read it: :func:`viewers_of` asks each configured account with a WebDAV
SEARCH by file id (one request per account) and returns those that see it.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import redis
import structlog

from ncindex.errors import NextcloudAuthError, NotFound

if TYPE_CHECKING:
    from ncindex.runtime import Services

log = structlog.get_logger(__name__)

REFUSED_KEY = "ncindex:accounts:refused"


def record_refused(client: redis.Redis, user: str, where: str, now: float | None = None) -> None:
    """Note that Nextcloud answered 401 for account ``user`` (``where``: the request)."""
    entry = {"at": int(time.time() if now is None else now), "where": where[:300]}
    client.hset(REFUSED_KEY, user, json.dumps(entry))
    log.warning("account_refused", user=user, where=where)


def clear_refused(client: redis.Redis, user: str) -> None:
    """Forget a refusal of ``user`` (its credentials worked again)."""
    client.hdel(REFUSED_KEY, user)


def refused_accounts(client: redis.Redis) -> dict[str, dict[str, Any]]:
    """User id → ``{"at", "where"}`` of every account Nextcloud refused (401), by user id;
    an unreadable entry reads as ``{}``."""
    out: dict[str, dict[str, Any]] = {}
    for raw_user, raw in sorted(client.hgetall(REFUSED_KEY).items()):
        try:
            entry = json.loads(raw)
        except ValueError:
            entry = {}
        out[raw_user.decode("utf-8", errors="replace")] = entry if isinstance(entry, dict) else {}
    return out


def viewers_of(services: Services, file_id: int) -> list[str]:
    """The configured accounts (user ids, in configuration order) that can see ``file_id``.

    One WebDAV SEARCH by id per account; an account Nextcloud refuses (401) is recorded and
    skipped. Transient errors propagate (``NextcloudUnavailable``): the caller retries."""
    viewers = []
    for user in services.settings.accounts:
        try:
            services.account(user).find_by_id(file_id)
        except NotFound:
            continue
        except NextcloudAuthError as exc:
            record_refused(services.redis, user, str(exc))
            continue
        viewers.append(user)
    return viewers
