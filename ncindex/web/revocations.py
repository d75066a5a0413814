"""App passwords that Login Flow v2 made for the search page and nothing will use: deleted in
Nextcloud, durably.

A Login Flow's app password (nextcloud/server ``core/Service/LoginFlowV2Service.php``
``flowDone``) is ncindex's to delete once no session can use it: a cancel, another sign-in,
a flow's credentials that arrive for a session that no longer waits for them, a sign-out, and a
session that expired (an abandoned page's held credentials, a signed-in session nobody came
back to). Deleting it is ``DELETE /ocs/v2.php/core/apppassword`` signed in with it
(nextcloud/server ``core/Controller/AppPasswordController.php`` ``deleteAppPassword``), which
can fail (Nextcloud down) or never be sent (the worker killed first).

So every flow credential ncindex keeps has an entry in two Redis records, written in the same
Lua step that stores, moves or drops the credential in a session (:mod:`ncindex.web.session`):

* :attr:`~ncindex.names.Names.ui_revoke` — a sorted set: member the ``Basic`` credential, score
  when it is next looked at (Unix ms, Redis's clock);
* :attr:`~ncindex.names.Names.ui_revoke_owner` — a hash: the credential → the key of the
  session that holds it (as ``flow_authorization`` or ``authorization``). A credential without
  an owner is one nobody will use: to delete;
* :attr:`~ncindex.names.Names.ui_revoke_user` — a hash: the credential → the user id a session
  signed in with it as (written when the sign-in records it held, kept when it is dropped,
  forgotten with its entry): :func:`account_disabled` asks about that user, as the
  credential's login name may be another (an e-mail address, an LDAP login: nextcloud/server
  ``core/Service/LoginFlowV2Service.php`` ``flowDone`` makes the app password under the login
  name of the user's web session).

A request that drops a credential records it ownerless and due :data:`RETRY_SECONDS` later, then
deletes it at once (:meth:`Revocations.delete`); a definitive answer forgets the entry. A
credential Nextcloud answered 401 — revoked, or its stored login password expired (the user's
password changed outside Nextcloud: ``Session::checkTokenCredentials`` →
``PublicKeyTokenProvider::markPasswordInvalid``; ``checkToken`` then throws
``TokenPasswordExpiredException``, which ``Session::logClientIn`` answers as a plain refusal,
OCS 997, as it answers a token that does not exist: nothing tells them apart) — is kept
instead, ownerless and marked (:data:`REFUSED_MARK` in
:attr:`~ncindex.names.Names.ui_revoke_user`), due :data:`REFUSED_RETRY_SECONDS` later, in the
step that drops it (:meth:`~ncindex.web.session.UiSessions.refused`,
``release_flow(invalid=True)``) or by the delete refused so: an expired one is revived by the
user's next Login Flow or web login (``core/Service/LoginFlowV2Service.php`` ``flowDone`` →
``PublicKeyTokenProvider::generateToken`` → ``updatePasswords``: ``setPasswordInvalid(false)``),
when that delete goes through; a marked entry's next 401 forgets it. One delete a day later, not
one a minute: a delete of a revoked one is one more refused login
(``Session::logClientIn`` → ``handleLoginFailed`` → ``Throttler::registerAttempt``), charged to
the address of the caller whose request met the first 401 (:data:`REFUSED_MARK`) when Nextcloud
trusts ncindex as a proxy, else to ncindex's own, slowing every login ncindex makes from there —
unless the
webhook admin says the account is disabled (:func:`account_disabled`: OCS answers a disabled
account 401 too, and its app password works again once it is enabled), when it is kept, and a
delete refused so keeps it due :data:`DISABLED_RETRY_SECONDS` later. A failed
or never-sent delete is left to :meth:`Revocations.sweep`, which beat runs every
:data:`RETRY_SECONDS` (``ncindex.revoke_app_passwords``, ``workers/beat.py``): for each due
entry, atomically, an owner session that still exists and still holds the credential makes it
due again when that session would expire (``PTTL``; a use meanwhile renews the session, and the
next look finds it again); otherwise the owner is dropped, the entry made due a retry later, and
the app password deleted. So an app password a live session holds is never deleted, and one no
session holds is deleted once Nextcloud answers. A typed-in app password is the user's: never
recorded, and a sign-in typing one the record holds (a flow's: Nextcloud's login page can finish
a flow with an app password the user has, README) forgets it. The sweep reads session keys it
is not given in ``KEYS`` (a standalone Redis, as ncindex uses, allows it; a Redis Cluster would
not).
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Callable
from typing import TYPE_CHECKING

import redis
import structlog

from ncindex.accounts import Cause, cause_of
from ncindex.errors import (
    NcindexError,
    NextcloudAuthError,
    NextcloudUnavailable,
    PermanentError,
    TransientError,
    refused_with_401,
)
from ncindex.names import Names
from ncindex.nextcloud.client import NextcloudClient, basic_login
from ncindex.nextcloud.loginflow import delete_app_password
from ncindex.redis_breaker import RedisBreaker

if TYPE_CHECKING:  # beat imports RETRY_SECONDS: the services' imports are not its
    from ncindex.runtime import Services

log = structlog.get_logger(__name__)

RETRY_SECONDS = 60
"""How long an entry waits before the sweep looks at it again, seconds: after a request
recorded it (the request deletes it meanwhile) and after a failed delete; also beat's period."""
SWEEP_BATCH = 100
"""At most this many due entries are looked at per sweep (the rest are due at the next)."""
REFUSED_RETRY_SECONDS = 24 * 3600
"""How long an entry whose app password Nextcloud answered 401 (for no disabled account) waits
for its one more delete, seconds: a day, so that an app password whose stored login password
expired — revived by the user's next Login Flow or web login — is deleted once they signed in
again, while a revoked one's last try, one more refused login (charged to the caller's
address: :data:`REFUSED_MARK`), falls outside the 12 hours over which Nextcloud's brute-force
protection counts the first
(nextcloud/server ``lib/private/Security/Bruteforce/Throttler.php`` ``getAttempts``,
``$maxAgeHours = 12``, which ``getDelay`` uses; read at 05fc7308, newer releases not read)."""
REFUSED_MARK = "#401"
"""Appended to a credential, the field of :attr:`~ncindex.names.Names.ui_revoke_user` that
says Nextcloud answered it 401 once already (:meth:`Revocations.delete`): a credential, a
``Basic`` header of a token68 (:func:`~ncindex.web.auth.normalized_authorization`), holds no
``#``. Its value is the address of the caller whose request met that 401 (``""``: none, or
an entry written before it was kept), sent as ``X-Forwarded-For`` with the delete a day
later: each delete of a revoked app password is one more refused login, which Nextcloud
charges to that header's address when it trusts ncindex as a proxy (nextcloud/server
``lib/private/AppFramework/Http/Request.php`` ``getRemoteAddress``), not to ncindex's own,
whose every login it would slow down (``Session::logClientIn`` →
``Throttler::sleepDelayOrThrowOnMax``) — a user who signs in with a Login Flow and revokes
that app password in Nextcloud, again and again, charged one such refusal to ncindex's own
address each time, a day later, and more than 10 within 30 minutes have Nextcloud refuse
every login from it with 429 (``MaxDelayReached``)."""
DISABLED_RETRY_SECONDS = 3600
"""How long an entry whose delete Nextcloud refused because its account is disabled waits
before the sweep asks again, seconds: the account may stay disabled for long, and each ask is
a ``DELETE`` answered 401 and a lookup as the webhook admin (:func:`account_disabled`). The
``DELETE`` is no counted refused login: ``Session::completeLogin`` throws its
``LoginException`` before ``logClientIn`` could call ``handleLoginFailed``."""

# Lua helpers for the scripts that change a session (ncindex.web.session): the last three KEYS
# of such a script are the sorted set, the owner hash and the user hash; ``now`` is Redis's
# clock in ms.
LUA = (
    "local RZ, RO, RU = KEYS[#KEYS - 2], KEYS[#KEYS - 1], KEYS[#KEYS] "
    "local function revoke(auth, at) "
    "redis.call('ZADD', RZ, at, auth) redis.call('HDEL', RO, auth) end "
    "local function hold(auth, key, at) "
    "redis.call('ZADD', RZ, at, auth) redis.call('HSET', RO, auth, key) end "
    "local function forget(auth) redis.call('ZREM', RZ, auth) redis.call('HDEL', RO, auth) "
    f"redis.call('HDEL', RU, auth, auth .. '{REFUSED_MARK}') end "
    # answered 401 at `now` (a recorded credential only: a typed one never is): kept ownerless,
    # due REFUSED_RETRY_SECONDS later, marked with the caller's address (`addr`, "" for none)
    # so that the next 401 forgets it and that delete is charged to that address
    "local function refused(auth, now, addr) if redis.call('ZSCORE', RZ, auth) then "
    f"redis.call('HSET', RU, auth .. '{REFUSED_MARK}', addr) "
    f"revoke(auth, now + {REFUSED_RETRY_SECONDS * 1000}) end end "
)
_NOW = "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000) "
# KEYS sorted set, owner hash; ARGV batch, retry ms → the credentials to delete now
_DUE = (
    _NOW + "local out = {} "
    "for _, auth in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, "
    "'LIMIT', 0, tonumber(ARGV[1]))) do "
    "local key = redis.call('HGET', KEYS[2], auth) local ttl = -2 "
    "if key and (redis.call('HGET', key, 'flow_authorization') == auth "
    "or redis.call('HGET', key, 'authorization') == auth) then ttl = redis.call('PTTL', key) end "
    "if ttl == -2 then redis.call('HDEL', KEYS[2], auth) table.insert(out, auth) end "
    "if ttl <= 0 then ttl = tonumber(ARGV[2]) end "
    "redis.call('ZADD', KEYS[1], now + ttl, auth) end return out"
)
# KEYS sorted set, owner hash, user hash; ARGV credential: forgotten unless a session holds it
# again
_DONE = (
    "if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then redis.call('ZREM', KEYS[1], ARGV[1]) "
    f"redis.call('HDEL', KEYS[3], ARGV[1], ARGV[1] .. '{REFUSED_MARK}') end return 1"
)

# KEYS sorted set, user hash; ARGV credential, ms, address ("" for none) → 1 when its entry is
# there and was not marked refused: marked with the address, and due ms later (REFUSED_MARK);
# else 0
_REFUSED_ONCE = (
    "if not redis.call('ZSCORE', KEYS[1], ARGV[1]) or "
    f"redis.call('HSETNX', KEYS[2], ARGV[1] .. '{REFUSED_MARK}', ARGV[3]) == 0 then return 0 end "
    "redis.call('ZINCRBY', KEYS[1], ARGV[2], ARGV[1]) return 1"
)


class Revocations:
    """The record of flow app passwords to delete (see the module docstring). ``caller``
    makes a Nextcloud client signed in with a ``Basic`` credential
    (:meth:`ncindex.runtime.Services.caller`)."""

    def __init__(
        self,
        redis: RedisBreaker,
        names: Names,
        caller: Callable[[str], NextcloudClient],
        disabled: Callable[[str], bool | None] = lambda user: False,
    ) -> None:
        self.redis = redis
        self.keys = (names.ui_revoke, names.ui_revoke_owner, names.ui_revoke_user)
        self.caller = caller
        self.disabled = disabled

    def delete(self, authorization: str, address: str | None = None) -> bool:
        """Delete the app password of ``authorization`` in Nextcloud: whether it was,
        charging a refusal to ``address`` (the caller's IP address, sent as
        ``X-Forwarded-For``; default: the one its :data:`REFUSED_MARK` recorded, else none,
        ncindex's own) and recording it with a first 401. Any
        answer of Nextcloud settles it and forgets its entry: deleted; a second 401 (the
        first one — revoked, or its login password expired, which a login revives — keeps it,
        marked, due :data:`REFUSED_RETRY_SECONDS` later: the module docstring); 403, no app
        password; any other 4xx or an answer in no known shape
        (logged, as ``PermanentError``: asking again would get the same) — except a 401 for
        an account ``disabled`` says is disabled (asked with the user id a session signed in
        with it as, recorded in :attr:`~ncindex.names.Names.ui_revoke_user`; else, a flow's
        credential refused before any sign-in, with its login name: the user id unless the
        user signs in with another, such as an e-mail address): OCS
        answers a disabled account's login 401 as it does a revoked app password's
        (nextcloud/server ``ocs/v1.php`` turns ``Session::completeLogin``'s
        ``LoginException`` "User disabled" into OCS 997 Unauthorised), yet that app password
        stands and works again once the account is enabled (``Session::checkTokenCredentials``
        invalidates a disabled user's token only for a session whose user is known before
        the login, never for a Basic login). Its entry stays, due
        :data:`DISABLED_RETRY_SECONDS` later — so does one whose lookup got no answer
        (``disabled`` returned ``None``: a disabled account's would otherwise be lost for a
        passing failure; a revoked one's costs one more refused login an hour while the
        lookup fails). A failure to reach Nextcloud
        (``TransientError``: a timeout, 5xx, 423, 429) leaves it for :meth:`sweep`. Never
        raises for Redis or Nextcloud failures."""
        return bool(self._delete(authorization, address))

    def _delete(self, authorization: str, address: str | None = None) -> bool | None:
        """:meth:`delete`, ``None`` when Nextcloud did not answer (the delete, or the lookup
        of a 401's account: its entry is already due an hour later)."""
        client = self.caller(authorization)
        client.forwarded_for = address or self._refused_from(authorization)
        try:
            delete_app_password(client)
        except PermanentError as exc:
            disabled = refused_with_401(exc) and self.disabled(self._user_of(authorization))
            first = disabled is False and refused_with_401(exc)
            if first and self._first_refusal(authorization, address):
                return False  # kept for one more delete (_first_refusal)
            if disabled is not False:  # disabled, or not told (no answer): asked again later
                log.info("app_password_kept_account_disabled", told=disabled is True)
                later = (DISABLED_RETRY_SECONDS - RETRY_SECONDS) * 1000
                with contextlib.suppress(redis.RedisError):  # the sweep asks again sooner
                    self.redis.call(
                        "zadd", self.keys[0], {authorization: later}, xx=True, incr=True
                    )
                return False if disabled else None
            log.info("app_password_not_deleted", reason=type(exc).__name__)
            deleted = False
        except TransientError as exc:
            log.warning("app_password_delete_failed", error=str(exc))
            return None
        else:
            deleted = True
        with contextlib.suppress(redis.RedisError):  # the sweep's next delete settles it
            self.redis.call("eval", _DONE, len(self.keys), *self.keys, authorization)
        return deleted

    def _refused_from(self, authorization: str) -> str | None:
        """The IP address :data:`REFUSED_MARK` recorded for ``authorization``, else ``None``
        (not marked, marked without one, or Redis not answering)."""
        try:
            marked = self.redis.call("hget", self.keys[2], authorization + REFUSED_MARK)
        except redis.RedisError:
            return None
        try:
            return str(ipaddress.ip_address((marked or b"").decode()))
        except ValueError:
            return None

    def _first_refusal(self, authorization: str, address: str | None) -> bool:
        """Whether this 401 is the first Nextcloud gave ``authorization``'s delete (no
        :data:`REFUSED_MARK` yet): then it is marked, with ``address``, and its entry kept, due
        :data:`REFUSED_RETRY_SECONDS` later, for one more delete. An app password whose stored
        login password expired answers 401 as a revoked one does and is revived by the
        user's next login (see the module docstring); the second 401 forgets it. ``False``
        when Redis does not answer (the entry is forgotten, as before)."""
        later = (REFUSED_RETRY_SECONDS - RETRY_SECONDS) * 1000
        keys = (self.keys[0], self.keys[2])
        try:
            kept = self.redis.call(
                "eval", _REFUSED_ONCE, 2, *keys, authorization, later, address or ""
            )
        except redis.RedisError:
            return False
        if kept:
            log.info("app_password_kept_refused_once")
        return bool(kept)

    def _user_of(self, authorization: str) -> str:
        """The user id a session signed in with ``authorization`` as
        (:attr:`~ncindex.names.Names.ui_revoke_user`), else its login name
        (:func:`~ncindex.nextcloud.client.basic_login`): a flow's credential refused before
        it signed anyone in, or Redis not answering."""
        try:
            user = self.redis.call("hget", self.keys[2], authorization)
        except redis.RedisError:
            user = None
        return user.decode() if user else basic_login(authorization)

    def sweep(self, batch: int = SWEEP_BATCH) -> int:
        """Delete the app passwords of due entries no live session holds (see the module
        docstring): how many were deleted. The first delete Nextcloud does not answer ends
        the sweep, and so does the first lookup of a refused delete's account that gets no
        answer (:func:`account_disabled` ``None``): the step that took the batch made all of it
        due a retry later, and a timeout per entry would hold a worker ``batch`` times
        ``NCINDEX_HTTP_TIMEOUT``. That
        entry is made due a millisecond after the rest of its batch, which would otherwise
        come after it again (equal scores sort by member): one credential Nextcloud never
        answers for (its user's backend down) does not stop the others' deletes.
        Raises ``redis.RedisError`` when Redis fails."""
        due = self.redis.call("eval", _DUE, 2, *self.keys[:2], batch, RETRY_SECONDS * 1000)
        deleted = 0
        for auth in due:
            done = self._delete(auth.decode())
            if done is None:
                self.redis.call("zadd", self.keys[0], {auth: 1}, xx=True, incr=True)
                break
            deleted += done
        return deleted


def revocations(services: Services) -> Revocations:
    """The :class:`Revocations` of ``services``' Redis (the breaker's short timeouts) and
    Nextcloud: the search page's, and beat's sweep; a delete refused for a disabled account
    is told by :func:`account_disabled`."""
    return Revocations(
        services.redis_breaker,
        services.settings.names,
        services.caller,
        lambda user: account_disabled(services, user),
    )


def account_disabled(services: Services, user: str, timeout: float | None = None) -> bool | None:
    """Whether Nextcloud says ``user`` (a user id) is a disabled account, asked as the webhook
    admin within ``timeout`` seconds (default: the HTTP client's; a page's request gives it
    :data:`~ncindex.nextcloud.client.CONFIRM_SECONDS`, as its ``cloud/user`` question, so a
    stalled lookup does not hold the page): ``GET /ocs/v2.php/cloud/users/{uid}`` answers
    ``enabled: false`` (:meth:`~ncindex.nextcloud.client.NextcloudClient.user_account`,
    :func:`ncindex.accounts.cause_of`). Asked when Nextcloud answered a user's app password
    401, which OCS answers alike for a revoked app password and a disabled account
    (nextcloud/server ``lib/private/User/Session.php`` ``completeLogin`` throws
    ``LoginException`` "User disabled", ``ocs/v1.php`` catches it as OCS 997 Unauthorised):
    the webhook admin's request is no login with the refused credential, so no more refused
    logins are counted against ncindex's address than the one that was (a WebDAV probe with
    it would tell a disabled account by its 503, but for a revoked app password it is one
    more login ``Session::logClientIn`` refuses and ``handleLoginFailed`` counts:
    ``Throttler::registerAttempt``). ``None`` when Nextcloud gave no answer in time (or a
    5xx, 423, 429: ``NextcloudUnavailable``, logged): a page keeps the entry then, for the
    sweep (:meth:`Revocations.delete` asks again, without the page's timeout, and keeps it
    an hour more while the account is disabled or the lookup gets no answer); so does a
    refused Login Flow poll. ``False`` when it cannot be told otherwise: no user, no webhook
    admin configured, the admin held back or refused (recorded, as
    :meth:`~ncindex.runtime.Services.refusal_lookup` does), an answer in no known shape
    (logged), a user that does not exist, or an admin who is shown no ``enabled``. Never
    raises."""
    settings = services.settings
    if not user or not settings.accounts:
        return False
    admin = settings.webhook_admin
    if admin not in settings.accounts:
        return False
    try:
        return cause_of(services.account(admin).user_account(user, timeout)) == Cause.DISABLED
    except NextcloudUnavailable as exc:
        log.warning("account_state_unknown", user=user, admin=admin, error=str(exc))
        return None
    except NcindexError as exc:
        log.warning("account_state_unknown", user=user, admin=admin, error=str(exc))
        if isinstance(exc, NextcloudAuthError):  # held back from now on, as its own requests
            with contextlib.suppress(redis.RedisError):
                services.account_refused(admin, exc)
        return False
