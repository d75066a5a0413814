"""RCP/1 sessions: the ``initialize`` state of :mod:`ncindex.search.rcp`, in Redis, and in this
process's memory while Redis does not answer.

The spec is ``spec/rcp-1.0.md`` of the ``1ay1/rcp`` repository. §13: a gated method before a
successful ``initialize`` is -32001, a second ``initialize`` after one is -32600. §5.2
(Sessions): "HTTP is request-scoped, so ``initialize`` state does not persist across
connections by default. A stateless HTTP server MAY treat every request as implicitly
initialized at its advertised capabilities and answer ``initialize``/``info`` idempotently
[...] A stateful HTTP server MAY issue a session token in ``initialize.result._meta.session``
and require it (e.g. header ``RCP-Session``)". ncindex is the stateful kind while Redis
answers, and falls back towards the stateless kind while it does not (:class:`RcpSessions`).

A session holds no rights: every call is authenticated with its own ``Authorization`` header
before its session is looked at, and a session's key is scoped by that credential, so
answering a call whose session cannot be looked up gives the caller nothing Nextcloud would
not give them. Nor does it hold negotiated state to keep: this server speaks RCP/1 only and
its capabilities do not depend on the client's.

Why not a signed, self-describing session token that any replica can read without Redis: a
client that sends no ``RCP-Session`` header (the SDK's ``HttpTransport``, the public
conformance checker) has nowhere to carry one, nor does one that names its own session; and
``shutdown`` must end a session, which a token cannot undo without state kept somewhere.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import rcp
import redis
import structlog

from ncindex.errors import RpcError
from ncindex.names import Names
from ncindex.redis_breaker import RedisBreaker

log = structlog.get_logger(__name__)

SESSION_SECONDS = 3600
"""Idle lifetime of an RCP session, seconds."""

MAX_LOCAL_SESSIONS = 50_000
"""Most sessions a process keeps in memory during an outage (460 bytes each with a 128-character
``RCP-Session`` id, 23 MB in all, measured with ``tracemalloc``); beyond it the one used
longest ago is forgotten. A bound is needed: every call is authenticated first, but a caller
names its own sessions (``RCP-Session``), so one credential could add a session per request
during an outage, at the rate its limit allows, and so could every other."""

IMPLICIT = "-"
"""Session id of a client that sends no ``RCP-Session`` header (never a valid header value)."""

RESTART_HINT = (
    "send 'shutdown' and then 'initialize', or 'initialize' with a new RCP-Session header"
)

State = Literal["started", "used", "ended"]
"""What this process did to a session while Redis did not answer: ``started`` it
(``initialize``), ``used`` it without knowing whether it was started (a session begun before
the outage, or in another process), or ``ended`` it (``shutdown``)."""


@dataclass(slots=True)
class _Local:
    """One session's state in this process's memory during an outage, kept until ``until``
    (seconds on the sessions' clock): the idle lifetime of a ``started`` or ``used`` session,
    from its last use; a tombstone's for an ``ended`` one. ``at``: when it was started or
    ended, microseconds since the Unix epoch on this host's wall clock (0 for ``used``)."""

    state: State
    until: float
    at: int


_MARK: dict[State, str] = {"started": "+", "ended": "-", "used": "u"}
"""How :data:`_WRITE_BACK` is told what was done."""


class _Lua:
    """A Lua script, run by ``EVALSHA`` (one round trip that does not send the script), or by
    ``EVAL`` when Redis does not hold it (restarted, ``SCRIPT FLUSH``), which loads it."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()

    def __call__(self, breaker: RedisBreaker, keys: Sequence[str], *args: str | int) -> Any:
        """The script's answer; raises what ``breaker.call`` raises."""
        try:
            return breaker.call("evalsha", self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            return breaker.call("eval", self.source, len(keys), *keys, *args)


# A session's key holds "+<µs>" (started at that time, microseconds since the Unix epoch) or
# "-<µs>" (ended: a tombstone, kept for the session lifetime). Every script's KEYS are sessions
# of one credential, in one Redis Cluster hash slot ({<credential hash>} in the key).
# ``read(key)`` is the key's mark and time (nil, 0 when absent).
_READ = (
    "local function read(key) local v = redis.call('GET', key) "
    "if not v then return nil, 0 end "
    "return string.sub(v, 1, 1), tonumber(string.sub(v, 2)) or 0 end "
)
# A live action is timed max(ARGV[2], the key's time + 1): ARGV[2] the time its call was made,
# µs on the calling host's wall clock (not Redis's when the script runs: a script sent to a
# stalled Redis runs once it resumes, after the calls the caller answered from memory
# meanwhile), and after whatever it replaces, even a time from a host whose clock is ahead.
_NOW = "local now = tonumber(ARGV[2]) "
_STAMP = "string.format('%s%.0f', mark, math.max(now, at + 1))"
# KEYS sessions, the first the one initialized; ARGV[1] lifetime s, ARGV[2] the call's time µs
# → 0 when KEYS[1] is live (nothing done: a second initialize), else 1: each started then
_START = _Lua(
    _READ
    + _NOW
    + "if read(KEYS[1]) == '+' then return 0 end local mark = '+' "
    + "for _, key in ipairs(KEYS) do local _, at = read(key) "
    + f"redis.call('SET', key, {_STAMP}, 'EX', ARGV[1]) end return 1"
)
# KEYS[1] session; ARGV[1] lifetime s → 1 live (its lifetime renewed), else 0
_LOOK_UP = _Lua(
    "local v = redis.call('GET', KEYS[1]) if v and string.sub(v, 1, 1) == '+' then "
    "redis.call('EXPIRE', KEYS[1], ARGV[1]) return 1 end return 0"
)
# KEYS sessions; ARGV[1] tombstone lifetime s, ARGV[2] the call's time µs → each ended then
_END = _Lua(
    _READ
    + _NOW
    + "local mark = '-' for _, key in ipairs(KEYS) do local _, at = read(key) "
    + f"redis.call('SET', key, {_STAMP}, 'EX', ARGV[1]) end return 1"
)
# KEYS[1] session; ARGV[1] what a process did during an outage: "+" started or "-" ended it at
# ARGV[2] µs (that host's clock), or "u" used it; ARGV[3] the lifetime it has left, ms. A start
# or end newer than the key's is written (last writer wins by action time; a live start keeps
# the longer lifetime); an older one, or a use, only lengthens a live session's lifetime (never
# creates one). → 1 written or lengthened, else 0
_WRITE_BACK = _Lua(
    _READ
    + "local mark, at = read(KEYS[1]) local did, left = ARGV[1], tonumber(ARGV[3]) "
    + "local live = mark == '+' and did ~= '-' "
    + "if live then left = math.max(left, redis.call('PTTL', KEYS[1])) end "
    + "if did ~= 'u' and (not mark or at < tonumber(ARGV[2])) then "
    + "redis.call('SET', KEYS[1], did .. ARGV[2], 'PX', left) return 1 end "
    + "if live then redis.call('PEXPIRE', KEYS[1], left) return 1 end return 0"
)


def already_initialized() -> RpcError:
    """-32600 for a second ``initialize`` on an initialized session (spec §13), with a hint
    saying how to start afresh."""
    return RpcError(
        rcp.Errc.INVALID_REQUEST,
        "already initialized; re-negotiation is not permitted mid-session",
        {"hint": RESTART_HINT},
    )


class RcpSessions:
    """``initialize`` state in Redis, one key per session: ``…:s:{<credential hash>}:<id>``,
    where the id is the ``RCP-Session`` value or :data:`IMPLICIT` for a header-less client.
    It holds ``+<µs>`` while the session is live, expiring after ``ttl`` seconds unused, and
    ``-<µs>`` once it ended (a tombstone, kept ``ttl`` seconds): the time the session was
    last started or ended, microseconds since the Unix epoch. Each call is one Lua script
    (``EVALSHA``, one round trip) over sessions of one credential, in one Redis Cluster hash
    slot (the braces). Commands go through the
    :class:`~ncindex.redis_breaker.RedisBreaker` that ``breaker`` returns, so a stalled Redis
    fails them fast rather than once per socket timeout.

    While Redis does not answer (any ``redis.RedisError``, the breaker's ``RedisSkipped``
    among them) the sessions are kept in this process's memory, thread-safe, and a call is
    never refused for want of Redis:

    * a session this process started (``initialize``) or ended (``shutdown``) during the
      outage behaves as with Redis: a second ``initialize`` is -32600, a gated method after
      ``shutdown`` -32001;
    * a session it knows nothing of — begun before the outage, or in another process (another
      worker, another replica) during it, or never — is answered as spec §5.2's stateless HTTP
      server answers every request: implicitly initialized, its ``initialize`` accepted. It
      cannot be told from one never begun, and refusing it would end every session at the
      outage's start; its caller is authenticated all the same. A ``shutdown`` in one process
      is therefore not seen by another until Redis answers again;
    * once a Redis call succeeds again, this process writes what it did to Redis first
      (:meth:`_write_back`), last writer wins by the time of each start and end: a session it
      started or ended is set so (with the lifetime left) unless Redis holds a later start or
      end of it, made live or written back by another process; one it used has its lifetime
      lengthened if Redis holds it live, never created. So a session begun here during the
      outage and ended in another process after it stays ended, and one ended here and begun
      again in another process after it stays begun, in whatever order the processes write
      back. Until a process has written back, another may answer a session begun in it
      during the outage -32001, which spec §12.2 has a client answer with ``initialize`` (its
      session is not in Redis, so that succeeds). One thread writes back at a time, in the
      order the sessions were last touched; a call meanwhile on a session not yet written
      back is answered from memory and written back after, one on any other session goes to
      Redis.

    Clocks: a start or end is timed by the wall clock of the host that made the call (``wall``,
    seconds since the epoch) when it made it, the one clock there is during an outage, and
    the one that orders a call's script after it ran late: a script sent to a stalled Redis
    (SIGSTOP, a failover) times out, the call is answered from memory, and Redis runs the
    script once it resumes; timed then, it would follow the calls answered from memory after
    it (a ``shutdown`` after the ``initialize`` that timed out) and win their write-back. A
    live start or end is never timed before the time the key holds, so it follows whatever it
    replaced. A host whose clock is ``d`` ahead of another's has its actions counted ``d``
    late against that host's: a start and an end less than ``d`` apart, one written back
    from an outage and one made on the other host, may be ordered wrongly, as before this
    ordering existed. A
    tombstone lasts ``ttl``: a write-back more than ``ttl`` after the end it should lose to
    (a process cut off from Redis that long, its session used meanwhile) sets the session
    again. A ``shutdown`` leaves tombstones even for sessions Redis does not hold (the
    session may be in a process's memory, which no other process can tell): a key per ended
    session for ``ttl``; :class:`~ncindex.search.rcp.RcpServer` authenticates the caller
    first, so only a credential Nextcloud accepts can add keys, at its rate limit, as each
    ``initialize`` with a new ``RCP-Session`` does.

    The memory holds at most ``max_local`` sessions (:data:`MAX_LOCAL_SESSIONS`; the one used
    longest ago is forgotten, and is then unknown, as above), and a call costs the same however
    many it holds: they are kept in the order they expire. An outage is logged once, when met
    (``rcp_session_store_failed``, warning; ``rcp_sessions_memory_full`` once the bound is
    reached), and its end once (``rcp_session_store_recovered``), not once per call.

    ``clock`` (seconds, monotonic) times the memory's lifetimes; tests pass one they advance."""

    def __init__(
        self,
        breaker: Callable[[], RedisBreaker],
        keys: Names,
        ttl: int = SESSION_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        max_local: int = MAX_LOCAL_SESSIONS,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._breaker = breaker
        self.prefix = keys.rcp_prefix
        self.ttl = ttl
        self.max_local = max_local
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # held by the one thread writing back
        # by Redis key, in the order they expire (each recorded for ``ttl`` from its last
        # use); empty while Redis answers
        self._local: OrderedDict[str, _Local] = OrderedDict()
        self._failing = False  # an outage was logged, its end not yet
        self._full = False  # the bound was met during this outage (logged)

    def start(self, cred: str, session: str | None) -> str:
        """Start the session named ``session`` (``None``: the implicit one, which also
        gets a new token naming it for clients that send the header from now on);
        returns the id to hand back in ``_meta.session``. Raises ``RpcError(-32600)``
        when that session is already initialized (atomic: ``SET NX``; during an outage, when
        this process started it)."""
        token = session or secrets.token_urlsafe(24)
        at = self._now()
        keys = [self._key(cred, sid) for sid in dict.fromkeys((session or IMPLICIT, token))]
        try:
            self._write_back(keys[0])
            if not _START(self._breaker(), keys, self.ttl, at):
                raise already_initialized()
            self._answered()
        except redis.RedisError as exc:
            self._outage("start", exc)
            with self._lock:
                local = self._recorded(keys[0])
                if local is not None and local.state == "started":
                    raise already_initialized() from None
                for key in keys:
                    self._record(key, "started", at)
        return token

    def active(self, cred: str, session: str | None) -> bool:
        """Whether the session is initialized (a gated method may run); refreshes its idle
        lifetime. During an outage, false only for a session this process ended."""
        return self._look_up(cred, session, unknown=True)

    def started(self, cred: str, session: str | None) -> bool:
        """Whether an ``initialize`` on the session would be a second one (spec §13: -32600);
        refreshes its idle lifetime. As :meth:`active`, but during an outage true only for a
        session this process started: one it knows nothing of may be initialized afresh."""
        return self._look_up(cred, session, unknown=False)

    def _look_up(self, cred: str, session: str | None, *, unknown: bool) -> bool:
        """Whether Redis holds the session (its lifetime renewed); during an outage, its state
        in memory, ``unknown`` when there is none (noted as used)."""
        key = self._key(cred, session or IMPLICIT)
        try:
            self._write_back(key)
            live = bool(_LOOK_UP(self._breaker(), [key], self.ttl))
            self._answered()
            return live
        except redis.RedisError as exc:
            self._outage("look_up", exc)
            with self._lock:
                local = self._recorded(key)
                if local is None:
                    self._record(key, "used", 0)
                    return unknown
                if local.state == "ended":
                    return False
                self._record(key, local.state, local.at)  # a use: its time is unchanged
                return local.state == "started" or unknown

    def end(self, cred: str, session: str | None) -> None:
        """End the implicit session and, when named, ``session``. Ending what is not
        live is a no-op."""
        keys = sorted({self._key(cred, IMPLICIT), self._key(cred, session or IMPLICIT)})
        at = self._now()
        try:
            self._write_back(*keys)
            _END(self._breaker(), keys, self.ttl, at)
            self._answered()
        except redis.RedisError as exc:
            self._outage("end", exc)
            with self._lock:
                for key in keys:
                    self._record(key, "ended", at)

    def _key(self, cred: str, sid: str) -> str:
        """``…:s:{<cred>}:<sid>``: the braces make the credential the Redis Cluster hash tag, so
        the keys of one script (sessions of one credential) share a slot."""
        return f"{self.prefix}s:{{{cred}}}:{sid}"

    def _now(self) -> int:
        """This host's wall clock, microseconds since the Unix epoch: the time of a start or
        end, sent with its script or kept in memory during an outage."""
        return int(self._wall() * 1_000_000)

    def _recorded(self, key: str) -> _Local | None:
        """``key``'s live record in memory (the expired are dropped first). Under the lock."""
        self._expire()
        return self._local.get(key)

    def _record(self, key: str, state: State, at: int) -> None:
        """Hold ``key`` in ``state``, started or ended at ``at`` (µs, :meth:`_now`), for ``ttl``
        from now (so last in expiry order), dropping the expired, and the oldest beyond
        ``max_local``. Under the lock."""
        self._expire()
        self._local[key] = _Local(state, self._clock() + self.ttl, at)
        self._local.move_to_end(key)
        while len(self._local) > self.max_local:
            self._local.popitem(last=False)
            if not self._full:
                self._full = True
                log.warning("rcp_sessions_memory_full", sessions=self.max_local)

    def _expire(self) -> None:
        """Drop the sessions whose lifetime is over: the first ones. Under the lock."""
        now = self._clock()
        while self._local:
            key, local = next(iter(self._local.items()))
            if local.until > now:
                return
            del self._local[key]

    def _write_back(self, *keys: str) -> None:
        """Write what this process did during an outage to Redis, each session once, oldest
        first, before the caller's command on ``keys``: raises ``redis.RedisError`` when Redis
        still does not answer (what is not written yet stays in memory, and the caller falls
        back to it), and :class:`_WritingBack` while another thread writes back one of
        ``keys`` (the caller is answered from memory, written back after: its command must not
        reach Redis before the older one). Returns at once while another thread writes back
        none of ``keys``: the caller's command cannot overtake one of its own sessions'."""
        if not self._local:  # the common case: no outage since the last write-back
            return
        if not self._writing.acquire(blocking=False):
            with self._lock:
                if all(key not in self._local for key in keys):
                    return
            raise _WritingBack("another thread is writing sessions back")
        try:
            written = applied = 0
            while True:
                with self._lock:
                    self._expire()
                    if not self._local:
                        break
                    key, local = next(iter(self._local.items()))
                left_ms = max(1, math.ceil((local.until - self._clock()) * 1000))
                applied += _WRITE_BACK(
                    self._breaker(), [key], _MARK[local.state], local.at, left_ms
                )
                written += 1
                with self._lock:
                    if self._local.get(key) is local:  # else touched meanwhile: now later on
                        del self._local[key]
        finally:
            self._writing.release()
        self._answered()
        log.info("rcp_sessions_written_back", sessions=written, applied=applied)

    def _answered(self) -> None:
        """A Redis call succeeded: log the end of an outage that was logged."""
        if self._failing:
            with self._lock:
                ended, self._failing, self._full = self._failing, False, False
            if ended:
                log.info("rcp_session_store_recovered")

    def _outage(self, operation: str, exc: redis.RedisError) -> None:
        """A call is answered from memory: log the outage when this is its first."""
        if isinstance(exc, _WritingBack):
            return
        with self._lock:
            met, self._failing = not self._failing, True
        if met:
            log.warning("rcp_session_store_failed", operation=operation, error=str(exc))


class _WritingBack(redis.RedisError):
    """Raised by :meth:`RcpSessions._write_back` while another thread writes back (not an
    outage, and not logged as one)."""
