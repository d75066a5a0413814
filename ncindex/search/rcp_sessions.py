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

import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

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
"""Most sessions a process keeps in memory during an outage (420 bytes each with a 128-character
``RCP-Session`` id, 21 MB in all, measured with ``tracemalloc``); beyond it the one used
longest ago is forgotten. A bound is needed:
``shutdown`` ends the sessions of whatever ``Authorization`` header it is sent, unchecked, so
during an outage anyone could add to the memory at the rate of their requests (the per-caller
rate limit counts a made-up Bearer token or user name as a caller of its own)."""

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
    from its last use; a tombstone's for an ``ended`` one."""

    state: State
    until: float


def already_initialized() -> RpcError:
    """-32600 for a second ``initialize`` on an initialized session (spec §13), with a hint
    saying how to start afresh."""
    return RpcError(
        rcp.Errc.INVALID_REQUEST,
        "already initialized; re-negotiation is not permitted mid-session",
        {"hint": RESTART_HINT},
    )


class RcpSessions:
    """``initialize`` state in Redis, one key per session: ``…:s:<credential hash>:<id>``,
    where the id is the ``RCP-Session`` value or :data:`IMPLICIT` for a header-less client,
    expiring after ``ttl`` seconds unused. Commands go through the
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
      (:meth:`_write_back`): a session it started is set (with its idle lifetime left), one it
      used has its lifetime renewed if Redis holds it, one it ended is deleted. Until a process
      has done so, another may answer a session begun in it during the outage -32001, which
      spec §12.2 has a client answer with ``initialize`` (its session is not in Redis, so that
      succeeds). One thread writes back at a time, in the order the sessions were last
      touched; a call meanwhile on a session not yet written back is answered from memory and
      written back after (so a ``shutdown`` then is not undone by the write-back of its
      ``initialize``), one on any other session goes to Redis. Between
      processes there is no such order: each writes back at its next call, without knowing
      what was done to a session in Redis since, so a session begun here during the outage
      and ended in another process after it is set again (a later ``initialize`` -32600), and
      one ended here and begun again in another process during it may be deleted by this
      process's write-back (-32001). Telling them apart needs the time of each action kept
      in Redis, tombstones included; not done.

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
    ) -> None:
        self._breaker = breaker
        self.prefix = keys.rcp_prefix
        self.ttl = ttl
        self.max_local = max_local
        self._clock = clock
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
        key = self._key(cred, session or IMPLICIT)
        token = session or secrets.token_urlsafe(24)
        try:
            self._write_back(key)
            fresh = self._breaker().call("set", key, "1", ex=self.ttl, nx=True)
            if not fresh:
                raise already_initialized()
            if session is None:
                self._breaker().call("set", self._key(cred, token), "1", ex=self.ttl)
            self._answered()
        except redis.RedisError as exc:
            self._outage("start", exc)
            with self._lock:
                if self._recorded(key) == "started":
                    raise already_initialized() from None
                self._record(key, "started")
                self._record(self._key(cred, token), "started")
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
            live = bool(self._breaker().call("expire", key, self.ttl))
            self._answered()
            return live
        except redis.RedisError as exc:
            self._outage("look_up", exc)
            with self._lock:
                state = self._recorded(key)
                if state == "ended":
                    return False
                self._record(key, state or "used")
                return state == "started" or unknown

    def end(self, cred: str, session: str | None) -> None:
        """End the implicit session and, when named, ``session``. Ending what is not
        live is a no-op."""
        keys = sorted({self._key(cred, IMPLICIT), self._key(cred, session or IMPLICIT)})
        try:
            self._write_back(*keys)
            self._breaker().call("delete", *keys)
            self._answered()
        except redis.RedisError as exc:
            self._outage("end", exc)
            with self._lock:
                for key in keys:
                    self._record(key, "ended")

    def _key(self, cred: str, sid: str) -> str:
        return f"{self.prefix}s:{cred}:{sid}"

    def _recorded(self, key: str) -> State | None:
        """The live state of ``key`` in memory (the expired are dropped first). Under the
        lock."""
        self._expire()
        local = self._local.get(key)
        return None if local is None else local.state

    def _record(self, key: str, state: State) -> None:
        """Hold ``key`` in ``state`` for ``ttl`` from now (so last in expiry order), dropping
        the expired, and the oldest beyond ``max_local``. Under the lock."""
        self._expire()
        self._local[key] = _Local(state, self._clock() + self.ttl)
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
            written = 0
            while True:
                with self._lock:
                    self._expire()
                    if not self._local:
                        break
                    key, local = next(iter(self._local.items()))
                left = max(1, math.ceil(local.until - self._clock()))
                if local.state == "ended":
                    self._breaker().call("delete", key)
                elif local.state == "started":
                    self._breaker().call("set", key, "1", ex=left)
                else:  # used: renewed if Redis holds it, never created
                    self._breaker().call("expire", key, left)
                written += 1
                with self._lock:
                    if self._local.get(key) is local:  # else touched meanwhile: now later on
                        del self._local[key]
        finally:
            self._writing.release()
        self._answered()
        log.info("rcp_sessions_written_back", sessions=written)

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
