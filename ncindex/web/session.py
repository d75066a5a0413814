"""Sessions of the search page: the caller's Nextcloud credential kept server-side in Redis.

The browser holds only a random session id in a cookie (:data:`COOKIE`, ``HttpOnly`` so page
scripts cannot read it, ``SameSite=Strict`` so other sites' pages cannot send it, ``Secure``
when the page is served over TLS). Redis holds, under :meth:`ncindex.names.Names.ui_session`
of a SHA-256 of that id (a Redis dump names no cookie), a hash of:

* ``csrf`` — the CSRF token every state-changing request must echo in :data:`CSRF_HEADER`
  (the page reads it from ``GET /ui/session``; a token is no credential);
* ``authorization`` — ``Basic base64(login name:app password)``, once signed in;
* ``user`` — the Nextcloud user id that credential resolved to;
* ``origin`` — ``flow`` (an app password Login Flow v2 made for ncindex, deleted at sign-out
  or once the session expired) or ``typed`` (one the user made and typed in; theirs to keep);
* ``poll_token`` — the Login Flow v2 poll token while a sign-in is under way, with its
  ``login_url`` and ``flow_started`` (Unix seconds);
* ``flow_authorization`` — the ``Basic`` credential that flow gave, stored the moment a poll
  received it (:meth:`UiSessions.receive_flow`, which drops ``poll_token``: Nextcloud hands
  it out once and deletes the flow, nextcloud/server ``core/Service/LoginFlowV2Service.php``
  ``poll``), until a sign-in with it replaced the session, Nextcloud refused it, or the sign-in
  was cancelled or replaced by another (:meth:`UiSessions.end_flow`, :meth:`UiSessions.replace`:
  these hand it back, for its app password to be deleted in Nextcloud). So a worker killed
  while checking it loses nothing. The same Lua step that stores, moves or drops a flow's
  credential records it in :mod:`ncindex.web.revocations` — held by this session, or (dropped)
  to delete — so that its app password is deleted once no live session holds it, even when
  the caller's own delete fails or never runs, or the session expires;
* ``flow_check`` — ``"<claim> <deadline>"``: the poll checking ``flow_authorization`` (a random
  claim) and until when (Unix milliseconds, on Redis's clock: one clock for every worker),
  :data:`FLOW_CHECK_SECONDS` after it claimed it. Another poll meanwhile does not check it; one
  after the deadline does (the worker that claimed it died). Only the poll whose claim is there
  can turn it into a signed-in session (:meth:`UiSessions.replace` with ``claim``): a claim
  taken over, or removed by a cancel, makes that poll's sign-in fail, so that one sign-in makes
  one session and a cancel wins over a check under way.

A signed-in session lives ``settings.ui_session_seconds`` after its last use, one not signed
in :data:`ANONYMOUS_SECONDS` (enough for a Login Flow v2 sign-in; every visit of the page makes
one, so they must not pile up in Redis). Signing in replaces the session id (no fixation).
Redis failures raise ``redis.RedisError`` (callers answer 503).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any, NamedTuple

from ncindex.names import Names
from ncindex.redis_breaker import RedisBreaker
from ncindex.web.revocations import LUA, RETRY_SECONDS

COOKIE = "ncindex_session"
"""The session cookie's name."""
CSRF_HEADER = "X-CSRF-Token"
"""The header carrying the session's CSRF token on state-changing requests."""
ANONYMOUS_SECONDS = 20 * 60
"""Lifetime of a session not signed in, seconds (guess: about as long as Nextcloud keeps an
unfinished Login Flow v2; its cleanup job was not read)."""
FLOW_CHECK_SECONDS = 60
"""How long a poll holds the flow's credentials it checks (``flow_check``), seconds: far more
than one check takes (one Nextcloud request, ``NCINDEX_HTTP_TIMEOUT`` 10 s by default, and a
few Redis calls), so that only a poll whose worker died lets the next poll check them. A check
slower than this lets a second poll check too; still only one of them signs in."""
_RETRY_MS = RETRY_SECONDS * 1000
FLOW_FIELDS = ("poll_token", "login_url", "flow_started", "flow_authorization", "flow_check")
"""The session fields of a Login Flow under way (see the module docstring)."""

# Redis Lua scripts (EVAL): each reads and changes one session atomically, and with it the record
# of flow app passwords to delete (ncindex.web.revocations: its three keys come last in KEYS).
# ``now`` is Redis's clock in milliseconds; a claim is ``"<claim> <deadline ms>"`` in
# ``flow_check``; ``retry`` the ms before the sweep looks at a credential a request deletes.
_NOW = "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000) "
# KEYS[1] session; ARGV lifetime s, then field, value … → a new session and its lifetime in one
# step (two calls left a session without one, for good, when the worker died between them)
_CREATE = "redis.call('HSET', KEYS[1], unpack(ARGV, 2)) redis.call('EXPIRE', KEYS[1], ARGV[1]) "
_OURS = (
    "local function ours(key, claim) local held = redis.call('HGET', key, 'flow_check') "
    "return held and string.sub(held, 1, #claim + 1) == claim .. ' ' end "
)
# KEYS[1] session; ARGV poll token, authorization, claim, lease ms, retry ms → 1 stored and
# claimed (held by the session), 2 already held (another poll received the same), 0 not this
# session's flow any more (the credential recorded to delete)
_RECEIVE = (
    _NOW + LUA + "local auth = redis.call('HGET', KEYS[1], 'flow_authorization') "
    "if auth == ARGV[2] then return 2 end "
    "if redis.call('HGET', KEYS[1], 'poll_token') ~= ARGV[1] or auth then "
    "revoke(ARGV[2], now + tonumber(ARGV[5])) return 0 end "
    "redis.call('HSET', KEYS[1], 'flow_authorization', ARGV[2], "
    "'flow_check', ARGV[3] .. ' ' .. (now + tonumber(ARGV[4]))) "
    "redis.call('HDEL', KEYS[1], 'poll_token') "
    "hold(ARGV[2], KEYS[1], now + redis.call('PTTL', KEYS[1])) return 1"
)
# KEYS[1] session; ARGV claim, lease ms → the credential, now claimed; nil: none, or claimed
_CLAIM = (
    _NOW + "local auth = redis.call('HGET', KEYS[1], 'flow_authorization') "
    "if not auth then return false end "
    "local held = redis.call('HGET', KEYS[1], 'flow_check') "
    "if held and now < tonumber(string.match(held, ' (%d+)$')) then return false end "
    "redis.call('HSET', KEYS[1], 'flow_check', ARGV[1] .. ' ' .. (now + tonumber(ARGV[2]))) "
    "return auth"
)
# KEYS[1] session; ARGV claim, what becomes of the flow ('keep' only the claim ends, 'refused'
# drop it kept for one more delete a day later: answered 401, 'revoke' drop it recorded to
# delete), retry ms, the caller's address ("" for none), the flow fields → 1, or 0 when the
# claim is not there
_RELEASE = (
    _NOW + LUA + _OURS + "if not ours(KEYS[1], ARGV[1]) then return 0 end "
    "if ARGV[2] == 'keep' then redis.call('HDEL', KEYS[1], 'flow_check') return 1 end "
    "local auth = redis.call('HGET', KEYS[1], 'flow_authorization') "
    "if auth and ARGV[2] == 'revoke' then revoke(auth, now + tonumber(ARGV[3])) "
    "elseif auth then refused(auth, now, ARGV[4]) end "
    "redis.call('HDEL', KEYS[1], unpack(ARGV, 5)) return 1"
)
# KEYS[1] session; ARGV retry ms, number of fields to drop, those fields, then field/value
# pairs to set → the flow credential it dropped, recorded to delete ('' for none); nil: no
# such session
_END_FLOW = (
    _NOW + LUA + "if redis.call('EXISTS', KEYS[1]) == 0 then return false end "
    "local auth = redis.call('HGET', KEYS[1], 'flow_authorization') or '' "
    "if auth ~= '' then revoke(auth, now + tonumber(ARGV[1])) end "
    "local n = tonumber(ARGV[2]) redis.call('HDEL', KEYS[1], unpack(ARGV, 3, n + 2)) "
    "if #ARGV > n + 2 then redis.call('HSET', KEYS[1], unpack(ARGV, n + 3)) end return auth"
)
# Drop the flow credentials of session KEYS[1] (its ``flow_authorization``, and its
# ``authorization`` when a flow gave it) but ``keep``: recorded to delete, and into ``out``.
_DROP_FLOW_CREDENTIALS = (
    "local function drop(key, keep, out, at) "
    "local held = {redis.call('HGET', key, 'flow_authorization')} "
    "if redis.call('HGET', key, 'origin') == 'flow' then "
    "table.insert(held, redis.call('HGET', key, 'authorization')) end "
    "for _, auth in ipairs(held) do if auth and auth ~= keep then "
    "revoke(auth, at) table.insert(out, auth) end end end "
)
# KEYS[1] old session, KEYS[2] new one; ARGV claim ('' for none), ttl s, retry ms, field/value
# pairs → the old session's flow credentials the new one does not hold, recorded to delete
# (a list); nil: the claim is not there any more. The new session's credential is never
# dropped, whatever its origin: typed, it is the user's (they typed a flow's app password they
# knew, one Nextcloud's login page took: README), and the record forgets it
_REPLACE = (
    _NOW
    + LUA
    + _OURS
    + _DROP_FLOW_CREDENTIALS
    + "if ARGV[1] ~= '' and not ours(KEYS[1], ARGV[1]) then return false end "
    "redis.call('HSET', KEYS[2], unpack(ARGV, 4)) redis.call('EXPIRE', KEYS[2], ARGV[2]) "
    "local new = redis.call('HGET', KEYS[2], 'authorization') "
    "local flow = redis.call('HGET', KEYS[2], 'origin') == 'flow' "
    "local out = {} drop(KEYS[1], new, out, now + tonumber(ARGV[3])) "
    "redis.call('DEL', KEYS[1]) "
    "if flow then hold(new, KEYS[2], now + tonumber(ARGV[2]) * 1000) "
    "local user = redis.call('HGET', KEYS[2], 'user') "
    "if user then redis.call('HSET', RU, new, user) end "
    "elseif new then forget(new) end return out"
)
# KEYS[1] session; ARGV 1 when Nextcloud answered its credential 401, else 0, the caller's
# address ("" for none: revocations.REFUSED_MARK) → signed out
# (authorization, user, origin dropped); a recorded credential answered 401 kept for one more
# delete a day later (revocations.REFUSED_RETRY_SECONDS), any other kept there for the sweep
# (its owner, this session, no longer holds it)
_REFUSED = (
    _NOW + LUA + "local auth = redis.call('HGET', KEYS[1], 'authorization') "
    "if auth and ARGV[1] == '1' then refused(auth, now, ARGV[2]) end "
    "redis.call('HDEL', KEYS[1], 'authorization', 'user', 'origin') return 1"
)
# KEYS[1] session; ARGV retry ms → its flow credentials, recorded to delete (a list)
_SIGN_OUT = (
    _NOW
    + LUA
    + _DROP_FLOW_CREDENTIALS
    + "local out = {} drop(KEYS[1], false, out, now + tonumber(ARGV[1])) "
    "redis.call('DEL', KEYS[1]) return out"
)


class UiSessions:
    """Search-page sessions in Redis (see the module docstring); ``ttl`` in seconds."""

    def __init__(self, redis: RedisBreaker, names: Names, ttl: int) -> None:
        self.redis = redis
        self.names = names
        self.ttl = ttl

    def _key(self, session_id: str) -> str:
        return self.names.ui_session(hashlib.sha256(session_id.encode()).hexdigest())

    def create(self, **fields: str) -> tuple[str, dict[str, str]]:
        """A new session: ``(session id, record)``; the record has a fresh ``csrf`` and
        ``fields``. Ids and tokens are 256-bit random (``secrets.token_urlsafe(32)``)."""
        session_id, record = _new(fields)
        pairs = [item for field in record.items() for item in field]
        self._eval(_CREATE, session_id, self._ttl(record), *pairs)
        return session_id, record

    def _ttl(self, record: dict[str, str]) -> int:
        return self.ttl if record.get("user") else min(self.ttl, ANONYMOUS_SECONDS)

    def load(self, session_id: str | None) -> dict[str, str] | None:
        """The record of ``session_id`` (its lifetime renewed), or ``None`` for no, a malformed
        or an expired id."""
        if not session_id or len(session_id) > 64:
            return None
        key = self._key(session_id)
        raw = self.redis.call("hgetall", key)
        if not raw:
            return None
        record = {k.decode(): v.decode() for k, v in raw.items()}
        self.redis.call("expire", key, self._ttl(record))
        return record

    def update(self, session_id: str, **fields: str | None) -> None:
        """Set ``fields`` (a ``None`` value removes that field)."""
        key = self._key(session_id)
        keep = {k: v for k, v in fields.items() if v is not None}
        drop = [k for k, v in fields.items() if v is None]
        if keep:
            self.redis.call("hset", key, mapping=keep)
        if drop:
            self.redis.call("hdel", key, *drop)

    def refused(self, session_id: str, *, invalid: bool, address: str | None = None) -> None:
        """Sign the session out because its credential was refused (a ``/v1/`` call answered
        401, or Nextcloud answered ``GET /ui/session``'s confirmation 401: the app password
        revoked): ``authorization``, ``user`` and ``origin`` go, the session stays (not signed
        in, its CSRF token kept). ``invalid`` (Nextcloud answered the credential 401:
        :func:`~ncindex.errors.refused_with_401`): in the same step the record of
        :mod:`ncindex.web.revocations` keeps a Login Flow's credential ownerless for one more
        delete :data:`~ncindex.web.revocations.REFUSED_RETRY_SECONDS` later, marked so that
        its 401 then forgets it, as :meth:`release_flow` keeps a flow's credential refused so:
        its app password is revoked, or its stored login password expired — revived by the
        user's next login — and nothing tells the two apart; a delete of a revoked one is one
        more refused login, charged to ``address`` when Nextcloud trusts ncindex as a proxy,
        else to ncindex's own, which Nextcloud's brute-force protection counts against every
        login ncindex makes from there (nextcloud/server
        ``lib/private/User/Session.php`` ``logClientIn`` → ``handleLoginFailed`` →
        ``lib/private/Security/Bruteforce/Throttler.php`` ``registerAttempt``), so one a day
        later, not one a minute. The caller
        says ``invalid`` false for a disabled account's 401 too
        (:func:`~ncindex.web.revocations.account_disabled`): that app password works again
        once the account is enabled; and when that lookup got no answer (the sweep asks
        again). Otherwise (a 404 or 403 of a proxy, an answer in no
        known shape, a disabled account's 401 or WebDAV 503: the app password may stand) a
        Login Flow's credential keeps its entry, owned by this session, which no longer holds
        it: the sweep deletes it once due, as every app password no live session holds.
        Either way the session is signed out. ``address``: the caller's IP address, which the
        delete a day later is charged to (:data:`~ncindex.web.revocations.REFUSED_MARK`)."""
        self._eval(_REFUSED, session_id, int(invalid), address or "")

    def receive_flow(self, session_id: str, poll_token: str, authorization: str) -> str | None:
        """Store ``authorization``, just received for the flow of ``poll_token``, as
        ``flow_authorization``, claimed by the caller for its check (see the module docstring):
        the claim, ``""`` when the session already holds these very credentials (another poll
        received them too; it checks them), ``None`` when the session has no such flow any
        more (cancelled, another flow started, signed in another way, expired): recorded to
        delete (:mod:`ncindex.web.revocations`), the caller deletes their app password, nobody
        would use it."""
        claim = secrets.token_hex(8)
        done = self._eval(
            _RECEIVE, session_id, poll_token, authorization, claim, self._lease, _RETRY_MS
        )
        return {1: claim, 2: ""}.get(int(done))

    def claim_flow(self, session_id: str) -> tuple[str, str] | None:
        """``(flow_authorization, claim)`` for the caller to check, or ``None`` when there is
        none or another poll's claim has not run out."""
        claim = secrets.token_hex(8)
        authorization = self._eval(_CLAIM, session_id, claim, self._lease)
        return (authorization.decode(), claim) if authorization else None

    def release_flow(
        self,
        session_id: str,
        claim: str,
        *,
        refused: bool,
        invalid: bool = False,
        address: str | None = None,
    ) -> bool:
        """End the caller's check of the flow's credentials without a sign-in: ``refused``
        forgets the flow, otherwise they stay for the next poll. A refused flow's credential
        is recorded to delete, for the caller to delete now — unless ``invalid`` (Nextcloud
        answered 401: revoked, or its login password expired), when the record keeps it for
        one more delete a day later, as :meth:`refused` does, and the caller deletes nothing
        now: another refusal (a 403, a 404, an answer in no known shape) does not say the app
        password is gone. Whether the claim was still there (``False``: the sign-in was cancelled or
        replaced meanwhile, nothing changed). ``address`` as :meth:`refused` takes it."""
        fate = "keep" if not refused else "refused" if invalid else "revoke"
        addr = address or ""
        return bool(self._eval(_RELEASE, session_id, claim, fate, _RETRY_MS, addr, *FLOW_FIELDS))

    def end_flow(self, session_id: str, **fields: str) -> str | None:
        """Forget the session's Login Flow (all :data:`FLOW_FIELDS`, a claim too: the poll
        holding it signs in no more) and set ``fields``, at once: the flow credential it
        forgot, recorded to delete, for the caller to delete now (``""`` for none), ``None``
        when the session is gone."""
        pairs = [x for item in fields.items() for x in item]
        done = self._eval(_END_FLOW, session_id, _RETRY_MS, len(FLOW_FIELDS), *FLOW_FIELDS, *pairs)
        return None if done is None else done.decode()

    def replace(self, old_id: str, **fields: str) -> Replaced:
        """Sign in: a new session of ``fields`` (as :meth:`create`) instead of ``old_id``, at
        once (no moment with neither; a new id, no fixation). Its credential, when ``origin``
        is ``flow``, is recorded as held by the new session, with its ``user`` (the user id:
        :attr:`~ncindex.names.Names.ui_revoke_user`), otherwise (typed: the user's) no
        longer recorded at all; the old session's flow credentials (held, or signed in with)
        other than the new session's are recorded to delete and returned, for the caller to
        delete now."""
        replaced = self._replace(old_id, "", fields)
        assert replaced is not None  # without a claim there is none to lose
        return replaced

    def replace_claimed(self, old_id: str, claim: str, **fields: str) -> Replaced | None:
        """:meth:`replace` by the poll holding ``claim`` on the flow's credentials: ``None``
        (nothing changed) when that claim is not there any more — the sign-in was cancelled
        or replaced, or another poll took the check over."""
        return self._replace(old_id, claim, fields)

    def _replace(self, old_id: str, claim: str, fields: dict[str, str]) -> Replaced | None:
        new_id, record = _new(fields)
        pairs = [x for item in record.items() for x in item]
        keys = (self._key(old_id), self._key(new_id), *self._revoke_keys)
        ttl = self._ttl(record)
        dropped = self.redis.call("eval", _REPLACE, len(keys), *keys, claim, ttl, _RETRY_MS, *pairs)
        if dropped is None:
            return None
        return Replaced(new_id, record, [auth.decode() for auth in dropped])

    @property
    def _lease(self) -> int:
        return FLOW_CHECK_SECONDS * 1000

    @property
    def _revoke_keys(self) -> tuple[str, str, str]:
        return (self.names.ui_revoke, self.names.ui_revoke_owner, self.names.ui_revoke_user)

    def _eval(self, script: str, session_id: str, *args: str | int) -> Any:
        keys = (self._key(session_id), *self._revoke_keys)
        return self.redis.call("eval", script, len(keys), *keys, *args)

    def sign_out(self, session_id: str) -> list[str]:
        """Forget the session: its flow credentials (a Login Flow's ``authorization``, held
        ``flow_authorization``), recorded to delete, for the caller to delete now."""
        return [auth.decode() for auth in self._eval(_SIGN_OUT, session_id, _RETRY_MS)]


class Replaced(NamedTuple):
    """A sign-in's new session (:meth:`UiSessions.replace`): its id and record, and the old
    session's flow credentials recorded to delete (``Basic`` credentials, maybe none)."""

    session_id: str
    record: dict[str, str]
    dropped: list[str]


def _new(fields: dict[str, str]) -> tuple[str, dict[str, str]]:
    return secrets.token_urlsafe(32), {"csrf": secrets.token_urlsafe(32), **fields}


def csrf_ok(record: dict[str, str], sent: str | None) -> bool:
    """Whether ``sent`` is the session's CSRF token (compared in constant time, as UTF-8
    bytes). A header with non-ASCII characters (WSGI servers hand header bytes over decoded
    as latin-1, PEP 3333) is simply no match: ``hmac.compare_digest`` raises ``TypeError``
    for such ``str`` arguments, which was a 500."""
    if not sent:
        return False
    expected = record.get("csrf", "").encode()
    return hmac.compare_digest(expected, sent.encode("utf-8", "surrogatepass"))
