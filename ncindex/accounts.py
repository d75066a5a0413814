"""The configured accounts Nextcloud refuses (HTTP 401), recorded per deployment.

Nextcloud accepts an app password only with the login name it was created under (nextcloud/server
``lib/private/User/Session.php``, ``validateTokenLoginName``), and LDAP or e-mail logins differ
from the user id; a revoked app password fails the same way. Such an account answers HTTP 401 to
every request, so every task for it would fail. When a task or a scan meets that 401 it records
the account here (Redis hash :attr:`ncindex.names.Names.refused_accounts`: user id →
``{"at": Unix seconds, "where": request}``); ``ncindex status`` and the gauge
``ncindex_account_refused{user}`` report it, ``/readyz`` of the three apps counts it (a number,
never the user id: it answers anyone), and the task ends (``NextcloudAuthError`` is
permanent: never retried); ``/readyz`` and the gauge only while the account is configured
(:func:`refused_configured`). The next request that the account gets through — a reconcile scan's
listing, or any task's request (:func:`clear_refused_if`, below) — clears it.

Nextcloud's brute-force protection counts each refused login against the address it came from
(nextcloud/server ``lib/private/User/Session.php`` ``logClientIn`` → ``handleLoginFailed`` →
``Throttler::registerAttempt('login', $remoteAddress)``), and then makes *every* login from
that address wait before its password is even checked (``sleepDelayOrThrowOnMax`` at the top of
``logClientIn``: 0.1 s × 2^attempts of the last 12 hours, up to 25 s; HTTP 429 once more than 10
came in 30 minutes; ``lib/private/Security/Bruteforce/Throttler.php``). ncindex logs in afresh
on every request (it keeps no cookie), so an account whose app password was revoked or whose
user was deleted would, asked by every scan and task, soon slow down or stop every account's
requests from this machine. So a refusal is recorded with a fingerprint of the credential it
refused (:func:`credential_fingerprint`), and :func:`held_until` keeps that credential from
being sent again for a while (:data:`REFUSED_RECHECK_SECONDS`, longer after each refusal of it)
— unless the configured credential changes: a new app password is tried at once. A request
that Nextcloud accepts clears its account's entry too (:func:`clear_refused_if`, run by the
client of ``ncindex.runtime.Services.account`` only when it had read an entry before its first
request: no Redis write for an account without one).

Why Nextcloud refused is told apart where the webhook admin can see it (:func:`cause_of`):
the first refusal of a credential asks Nextcloud once about the user
(:meth:`ncindex.runtime.Services.account_refused`), and the entry keeps the answer as
``cause``, which ``ncindex status`` and the ``account_refused`` warning show
(:func:`cause_text`): each cause needs another fix in Nextcloud.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import redis
import structlog

from ncindex.names import Names
from ncindex.redis_replies import as_text

log = structlog.get_logger(__name__)


REFUSED_RECHECK_SECONDS = (1800, 6 * 3600)
"""How long a credential Nextcloud refused is not sent again (seconds): the first value after a
first refusal, doubled after each further refusal of the same credential, up to the second. A
credential refused for good is then tried twice in Nextcloud's 12-hour window (at most 0.4 s
more on each login from this machine), and a refusal that passes (an account disabled for an
hour, a user backend that failed) ends within half an hour."""


class Cause(StrEnum):
    """Why Nextcloud refuses an account, as its webhook admin can tell (:func:`cause_of`)."""

    DISABLED = "disabled"
    """The user exists but is disabled (``occ user:disable``, the admin's Accounts page)."""
    DELETED = "deleted"
    """Nextcloud says the user does not exist."""
    REFUSED = "refused"
    """The user exists and is enabled: the app password (or its login name) is refused."""


def cause_of(account: Mapping[str, Any] | None) -> Cause | None:
    """The :class:`Cause` of a refusal, from the user's data as the webhook admin got it
    (:meth:`ncindex.nextcloud.client.NextcloudClient.user_account`; ``None``: no such user).
    nextcloud/server ``apps/provisioning_api/lib/Controller/AUserDataOCSController.php``
    ``getUserData`` gives ``enabled`` (a boolean) only to an admin, a delegated admin of the
    Users setting or a subadmin of the user's group, and ``lib/private/User/Session.php``
    ``completeLogin`` refuses every login of a disabled user; without ``enabled`` (the
    webhook admin is none of these) the cause is unknown: ``None``."""
    if account is None:
        return Cause.DELETED
    enabled = account.get("enabled")
    if enabled is False:
        return Cause.DISABLED
    return Cause.REFUSED if enabled is True else None


@dataclass(frozen=True, slots=True)
class Lookup:
    """What the webhook admin's ``GET /ocs/v2.php/cloud/users/{uid}`` said of a refused
    account's user (:meth:`ncindex.runtime.Services.account_refused`): ``answered`` false when
    Nextcloud gave no clear answer (unreachable, the admin refused or held back, an answer not
    its format); else ``account``, the user's data
    (:meth:`~ncindex.nextcloud.client.NextcloudClient.user_account`), ``None`` when Nextcloud
    says there is no such user."""

    answered: bool
    account: Mapping[str, Any] | None = None

    @property
    def cause(self) -> Cause | None:
        """The refusal's :class:`Cause` as this answer tells it (:func:`cause_of`); ``None``
        for no answer, or one that does not tell."""
        return cause_of(self.account) if self.answered else None


def cause_text(cause: Cause | str | None, user: str) -> str | None:
    """What the operator reads of a refusal of account ``user`` with ``cause`` (the value
    recorded in its entry), and what to do about it; ``None`` for no (or an unknown) cause."""
    if cause == Cause.DISABLED:
        return (
            "disabled in Nextcloud (enable the user, then `ncindex release "
            f"{user}` sends its app password again at once)"
        )
    if cause == Cause.DELETED:
        # not read from the 401 itself: nextcloud/server apps/dav/lib/Connector/Sabre/Auth.php
        # validateUserPass returns false for any failed Session::logClientIn — unknown user
        # and wrong password alike — and Sabre answers both 401. It is the webhook admin's
        # GET /ocs/v2.php/cloud/users/{uid} answering OCS 404 "User does not exist"
        # (apps/provisioning_api/lib/Controller/AUserDataOCSController.php getUserData), once:
        # a user deleted, or a user backend away for a while (ncindex.sync.deleted)
        return (
            "deleted in Nextcloud, as far as its admin was told (the user does not exist: "
            f"`ncindex forget {user}` takes its documents out of the index, then remove the "
            f"account; if the user is back — a user backend that was away — `ncindex release "
            f"{user}` ends the hold)"
        )
    if cause == Cause.REFUSED:
        return (
            "app password refused (revoked or changed: set a new one in NCINDEX_ACCOUNTS or "
            "NCINDEX_ACCOUNTS_FILE, or the login name it was made under in NCINDEX_LOGINS); "
            "the user exists and is enabled"
        )
    return None


def credential_fingerprint(login: str, password: str) -> str:
    """A short SHA-256 of ``login`` and ``password`` (16 hex digits): says whether the
    configured credential is still the one refused, without storing it."""
    return hashlib.sha256(f"{login}\0{password}".encode()).hexdigest()[:16]


def refused_entry(raw: bytes | str | None) -> dict[str, Any]:
    """A refusal entry as shown (:func:`refused_accounts`' shape without ``held_until``): the
    raw value read from :attr:`~ncindex.names.Names.refused_accounts` without the credential's
    fingerprint, and with ``cause`` always (a :class:`Cause` value, or ``None``: none recorded,
    as in an entry written before causes were, or one this version does not know); ``{}``
    when absent or unreadable."""
    entry = _entry(raw)
    entry.pop("credential", None)  # for hold_of alone: never shown
    if entry:
        cause = entry.get("cause")
        entry["cause"] = cause if cause in [c.value for c in Cause] else None  # unhashable JSON too
    return entry


def _entry(raw: bytes | str | None) -> dict[str, Any]:
    """A refusal entry read from Redis (``{}`` when absent or unreadable)."""
    if raw is None:
        return {}
    try:
        entry = json.loads(raw)
    except ValueError:
        return {}
    return entry if isinstance(entry, dict) else {}


def record_refused(
    client: redis.Redis,
    keys: Names,
    user: str,
    where: str,
    now: float | None = None,
    *,
    credential: str | None = None,
    lookup: Lookup | None = None,
) -> None:
    """Note that Nextcloud answered 401 for account ``user`` of deployment ``keys``
    (``where``: the request, cut to 300 characters; ``now``: Unix seconds; ``credential``: the
    :func:`credential_fingerprint` of what was refused, which :func:`held_until` then holds
    back; ``times`` counts the refusals of that same credential in a row, each after the hold
    of the one before had ended: a refusal while that credential is held is of a request sent
    before the hold began — tasks in flight at once when the password was revoked, or the
    account disabled — and lengthens nothing, else a burst of them held an account that is let
    in again an hour later for up to six hours). ``lookup``: what Nextcloud's admin was asked
    of the user about this refusal (:class:`Lookup`), whose cause (:func:`cause_of`) is stored
    as ``cause`` — none when it gave no answer, for a cause told before may have changed since
    (a user enabled again whose app password was then revoked) and must not be shown as this
    refusal's; ``None`` (not asked: a refusal of a request sent before the hold began, or one
    another process asked about) keeps the ``cause`` of a refusal of the same credential
    before. The entry's ``deleted`` note (:func:`record_deleted`) is kept."""
    at = int(time.time() if now is None else now)
    entry: dict[str, Any] = {"at": at, "where": where[:300]}
    raw = client.hget(keys.refused_accounts, user)
    before = _entry(raw)
    if isinstance(before.get("deleted"), dict):  # the user's deletion outlives each refusal
        entry["deleted"] = before["deleted"]
    if credential is not None:
        times = before.get("times") if before.get("credential") == credential else 0
        times = times if isinstance(times, int) and times > 0 else 0
        entry["credential"] = credential
        entry["times"] = times if times and held_until(raw, credential, at) else times + 1
    if lookup is not None:
        if lookup.cause is not None:
            entry["cause"] = lookup.cause.value
    elif before.get("cause") is not None and before.get("credential") == credential:
        entry["cause"] = before["cause"]
    client.hset(keys.refused_accounts, user, json.dumps(entry))
    told = cause_text(entry.get("cause"), user)
    log.warning("account_refused", user=user, where=where, **({"cause": told} if told else {}))


@dataclass(frozen=True, slots=True)
class Hold:
    """A refused credential held back (:func:`hold_of`): ``since`` (Unix seconds, Nextcloud's
    last refusal of it), ``until`` (Unix seconds, when it is sent again), ``refusal`` (the
    refused request and the answer, as recorded), ``times`` (its refusals in a row)."""

    since: float
    until: float
    refusal: str
    times: int


def hold_of(
    entry: bytes | str | None, credential: str | None = None, now: float | None = None
) -> Hold | None:
    """The hold of a refused credential, given its account's refusal ``entry`` (the raw value
    in :attr:`~ncindex.names.Names.refused_accounts`, ``None`` when there is none): set when
    Nextcloud refused the credential of fingerprint ``credential`` (``None``: the one the entry
    names, whichever is configured) within :data:`REFUSED_RECHECK_SECONDS` (by how many times
    in a row) before ``now`` (Unix seconds), so that it is not sent again (see the module
    docstring); ``None`` otherwise — also for a refusal recorded without a fingerprint, or an
    unreadable one."""
    data = _entry(entry)
    try:
        at = float(data["at"])
        times = max(int(data.get("times", 1)), 1)
    except (KeyError, TypeError, ValueError):
        return None
    refused = data.get("credential")
    if refused is None or (credential is not None and refused != credential):
        return None
    first, longest = REFUSED_RECHECK_SECONDS
    until: float = at + min(longest, first * 2 ** min(times - 1, 16))
    if (time.time() if now is None else now) >= until:
        return None
    return Hold(since=at, until=until, refusal=str(data.get("where", "")), times=times)


def held_until(
    entry: bytes | str | None, credential: str, now: float | None = None
) -> float | None:
    """Until when (Unix seconds) the credential of fingerprint ``credential`` is held back
    (:func:`hold_of`), or ``None``."""
    hold = hold_of(entry, credential, now)
    return None if hold is None else hold.until


def record_deleted(
    client: redis.Redis, keys: Names, user: str, documents: int, now: float | None = None
) -> None:
    """Note on refused account ``user``'s entry that Nextcloud said the user no longer exists
    and that the index forgot them: ``"deleted": {"at": Unix seconds, "documents": how many
    documents changed}`` (:func:`refused_accounts` shows it, ``ncindex status`` prints it).
    ``documents`` adds up over the checks of one refusal (a later check finds nothing left).
    An account with no refusal entry gets one (``where``: the check). Raises
    ``redis.RedisError``."""
    entry = _entry(client.hget(keys.refused_accounts, user))
    at = int(time.time() if now is None else now)
    if not entry:
        entry = {"at": at, "where": "cloud/users: user does not exist"}
    before = entry.get("deleted")
    counted = before.get("documents") if isinstance(before, dict) else 0
    total = (counted if isinstance(counted, int) else 0) + documents
    entry["deleted"] = {"at": at, "documents": total}
    client.hset(keys.refused_accounts, user, json.dumps(entry))


def clear_refused(client: redis.Redis, keys: Names, user: str) -> None:
    """Forget a refusal of ``user`` (its credentials worked again), and the claim that it was
    asked about (:attr:`~ncindex.names.Names.refusal_asked`): a later refusal is a new one."""
    client.hdel(keys.refused_accounts, user)
    client.delete(keys.refusal_asked(user))


_CLEAR_IF_SAME = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('DEL', KEYS[2])
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""


def clear_refused_if(client: redis.Redis, keys: Names, user: str, entry: bytes | str) -> bool:
    """Forget ``user``'s refusal entry if it is still ``entry`` (the raw value read before a
    request that Nextcloud then accepted: the credential works), in one Redis script: a
    refusal recorded meanwhile — a request of the same credential refused after it, a
    ``deleted`` note (:func:`record_deleted`) — changed the entry and stays. Without this only
    a reconcile listing cleared it (:func:`clear_refused`), and a task that got through after
    the hold ended left ``times`` counting, so the next refusal of the credential, however
    much later, was held back twice as long. The claim that the refusal was asked about
    (:attr:`~ncindex.names.Names.refusal_asked`) goes with it: else a new refusal of the same
    credential within the claim's 30 minutes (a user enabled again, then their app password
    revoked) was not asked about and named no cause. Returns whether it was removed. Raises
    ``redis.RedisError``."""
    removed = client.eval(
        _CLEAR_IF_SAME, 2, keys.refused_accounts, keys.refusal_asked(user), user, entry
    )
    if removed:
        log.info("account_refusal_cleared", user=user)
    return bool(removed)


def refused_accounts(
    client: redis.Redis,
    keys: Names,
    now: float | None = None,
    credentials: Mapping[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """User id → ``{"at", "where"}`` (and ``times``, the refusals in a row of one credential;
    ``cause``, a :class:`Cause` value, when Nextcloud's admin told why;
    ``held_until``, Unix seconds, while that credential is held back at ``now``
    (:func:`hold_of`), else ``None``; ``deleted``, ``{"at", "documents"}``, once Nextcloud said
    the user does not exist and the index forgot them: :func:`record_deleted`) of every
    account of deployment ``keys`` that Nextcloud refused (401), by user id (the credential's
    fingerprint left out); an unreadable entry reads as ``{}``. ``credentials`` maps user ids
    to the :func:`credential_fingerprint` configured for them now: an account whose
    configured credential is not the one refused (a new app password) is not held
    (``held_until`` ``None``: it is tried at once) and, given ``credentials``, has
    ``replaced`` true (the refusal is of the credential it had before: processes started since
    the change send the new one, the next request accepted clears the entry; those started
    before still send the old one) and ``configured`` whether it is among them at all; an
    account not in it is held while the refused credential is. Raises ``redis.RedisError``
    when Redis cannot be asked."""
    out: dict[str, dict[str, Any]] = {}
    for raw_user, raw in sorted(client.hgetall(keys.refused_accounts).items()):
        user = as_text(raw_user, "replace")
        entry = refused_entry(raw)
        if entry:
            configured = (credentials or {}).get(user)
            hold = hold_of(raw, configured, now)
            entry["held_until"] = None if hold is None else hold.until
            if credentials is not None:
                entry["configured"] = user in credentials
                refused = _entry(raw).get("credential")
                entry["replaced"] = None not in (configured, refused) and configured != refused
        out[user] = entry
    return out


def refused_configured(client: redis.Redis, keys: Names, accounts: Collection[str]) -> list[str]:
    """The user ids, sorted, among ``accounts`` (those configured now) that have a refusal
    entry in deployment ``keys``: what the gauge ``ncindex_account_refused`` reports and
    ``/readyz``'s ``accounts_refused`` counts. An entry of an account no longer configured (a
    deleted user forgotten and removed from the accounts) stays, so its dead credential is not sent
    again should it be configured again, but nothing is left to do about it: it is not
    reported. Raises ``redis.RedisError``."""
    return sorted(set(refused_accounts(client, keys)) & set(accounts))
