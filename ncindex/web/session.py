"""Sessions of the search page: the caller's Nextcloud credential kept server-side in Redis.

The browser holds only a random session id in a cookie (:data:`COOKIE`, ``HttpOnly`` so page
scripts cannot read it, ``SameSite=Strict`` so other sites' pages cannot send it, ``Secure``
when the page is served over TLS). Redis holds, under :meth:`ncindex.names.Names.ui_session`
of a SHA-256 of that id (a Redis dump names no cookie), a hash of:

* ``csrf`` — the CSRF token every state-changing request must echo in :data:`CSRF_HEADER`
  (the page reads it from ``GET /ui/session``; a token is no credential);
* ``authorization`` — ``Basic base64(login name:app password)``, once signed in;
* ``user`` — the Nextcloud user id that credential resolved to;
* ``origin`` — ``flow`` (an app password Login Flow v2 made for ncindex, deleted at sign-out)
  or ``typed`` (one the user made and typed in; theirs to keep);
* ``poll_token`` — the Login Flow v2 poll token while a sign-in is under way, with its
  ``login_url`` and ``flow_started`` (Unix seconds);
* ``flow_authorization`` — the ``Basic`` credential that flow gave, until Nextcloud confirmed
  it (then it is the signed-in session's ``authorization``) or refused it: Nextcloud gives it
  once, so a check that failed is made again with it (taken out by the poll checking it,
  :meth:`UiSessions.take`, so that two polls at once do not both sign in).

A signed-in session lives ``settings.ui_session_seconds`` after its last use, one not signed
in :data:`ANONYMOUS_SECONDS` (enough for a Login Flow v2 sign-in; every visit of the page makes
one, so they must not pile up in Redis). Signing in replaces the session id (no fixation).
Redis failures raise ``redis.RedisError`` (callers answer 503).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from ncindex.names import Names
from ncindex.redis_breaker import RedisBreaker

COOKIE = "ncindex_session"
"""The session cookie's name."""
CSRF_HEADER = "X-CSRF-Token"
"""The header carrying the session's CSRF token on state-changing requests."""
ANONYMOUS_SECONDS = 20 * 60
"""Lifetime of a session not signed in, seconds (guess: about as long as Nextcloud keeps an
unfinished Login Flow v2; its cleanup job was not read)."""


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
        session_id = secrets.token_urlsafe(32)
        record = {"csrf": secrets.token_urlsafe(32), **fields}
        key = self._key(session_id)
        self.redis.call("hset", key, mapping=record)
        self.redis.call("expire", key, self._ttl(record))
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

    def take(self, session_id: str, field: str) -> bool:
        """Remove ``field``: whether this call removed it. Of calls made at the same time one
        does (Redis ``HDEL`` is atomic and answers how many fields it removed)."""
        return bool(self.redis.call("hdel", self._key(session_id), field))

    def delete(self, session_id: str) -> None:
        """Forget the session."""
        self.redis.call("delete", self._key(session_id))


def csrf_ok(record: dict[str, str], sent: str | None) -> bool:
    """Whether ``sent`` is the session's CSRF token (compared in constant time, as UTF-8
    bytes). A header with non-ASCII characters (WSGI servers hand header bytes over decoded
    as latin-1, PEP 3333) is simply no match: ``hmac.compare_digest`` raises ``TypeError``
    for such ``str`` arguments, which was a 500."""
    if not sent:
        return False
    expected = record.get("csrf", "").encode()
    return hmac.compare_digest(expected, sent.encode("utf-8", "surrogatepass"))
