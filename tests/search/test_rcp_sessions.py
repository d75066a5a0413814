"""``RcpSessions`` of two processes (two workers or replicas: each its own sessions object and
circuit breaker) on one real redis-server, through an outage and after it; breakers and
lifetimes on clocks the tests advance by hand."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

import pytest
import redis
from redis.crc import key_slot
from structlog.testing import capture_logs

from ncindex.names import Names
from ncindex.redis_breaker import RedisBreaker
from ncindex.redis_server import RedisProcess
from ncindex.search.rcp_sessions import RcpSessions
from support import Clock

CRED = "c" * 64  # a credential's SHA-256, as RcpServer keys sessions


def process(
    url: str, clock: Clock, ttl: int = 3600, wall: Callable[[], float] = time.time
) -> RcpSessions:
    """One process's sessions on the Redis at ``url``, its breaker reset after 1 s; ``wall``
    its host's wall clock."""
    breaker = RedisBreaker(url, reset_seconds=1, clock=clock)
    return RcpSessions(lambda: breaker, Names(), ttl=ttl, clock=clock, wall=wall)


def two_processes(url: str) -> tuple[Clock, RcpSessions, RcpSessions]:
    """Two processes' sessions (A, B) on the Redis at ``url``, on one clock."""
    clock = Clock()
    return clock, process(url, clock), process(url, clock)


def test_a_session_begun_during_an_outage_works_in_another_process_and_after_it(
    private_redis: RedisProcess,
) -> None:
    clock, a, b = two_processes(private_redis.url)
    a.start(CRED, "begun-before")
    private_redis.stop()
    # B knows nothing of these sessions: it answers them as initialized (spec §5.2)
    assert b.active(CRED, "begun-before")
    a.start(CRED, "begun-in-a")
    assert b.active(CRED, "begun-in-a")
    assert a.started(CRED, "begun-in-a") and not b.started(CRED, "begun-in-a")
    a.start(CRED, "ended-in-a")
    a.end(CRED, "ended-in-a")
    assert not a.active(CRED, "ended-in-a")
    assert b.active(CRED, "ended-in-a")  # a shutdown holds in the process that answered it
    private_redis.start_again()  # empty
    clock.now += 1.2  # past the breakers' reset: their next calls try Redis
    # until A has written back, B finds no session begun in A: -32001, initialize again
    assert not b.active(CRED, "begun-in-a")
    assert a.active(CRED, "begun-in-a")  # A's first call writes back what it did
    assert b.active(CRED, "begun-in-a")
    assert not b.active(CRED, "ended-in-a")
    assert not a._local


def test_a_session_in_memory_expires_and_is_not_written_back(
    private_redis: RedisProcess,
) -> None:
    clock = Clock()
    a = process(private_redis.url, clock, ttl=10)
    private_redis.process.send_signal(signal.SIGSTOP)
    try:
        a.start(CRED, "idle-session")
        clock.now += 5
        assert a.started(CRED, "idle-session")  # a use renews it: 10 s from now
        clock.now += 9
        assert a.started(CRED, "idle-session")
        clock.now += 11  # idle past its lifetime: unknown again, so initialize may start it
        assert not a.started(CRED, "idle-session")
        a.start(CRED, "short-lived")
        clock.now += 11
    finally:
        private_redis.process.send_signal(signal.SIGCONT)
    # expired in memory, so not written to Redis: a call now needs a new initialize
    assert not a.active(CRED, "short-lived")
    assert not a.active(CRED, "idle-session")
    assert not a._local


def test_an_outage_is_logged_once_not_once_per_call(private_redis: RedisProcess) -> None:
    clock = Clock()
    a = process(private_redis.url, clock)
    private_redis.stop()
    with capture_logs() as logs:
        a.start(CRED, "session-one")
        for _ in range(5):
            assert a.active(CRED, "session-one")
        a.end(CRED, "session-one")
    assert [e["event"] for e in logs].count("rcp_session_store_failed") == 1
    private_redis.start_again()
    clock.now += 1.2
    with capture_logs() as logs:
        assert not a.active(CRED, "session-one")  # written back: ended
        private_redis.stop()
        clock.now += 1.2
        a.start(CRED, "session-two")
        assert a.started(CRED, "session-two")
    events = [e["event"] for e in logs]
    assert events.count("rcp_session_store_recovered") == 1
    assert events.count("rcp_session_store_failed") == 1  # the second outage's


def test_memory_holds_at_most_max_local_sessions_the_oldest_forgotten(
    private_redis: RedisProcess,
) -> None:
    """A caller names its own sessions (``RCP-Session``), so each of its calls during an
    outage may add one to the memory: it is bounded."""
    clock = Clock()
    breaker = RedisBreaker(private_redis.url, reset_seconds=1, clock=clock)
    a = RcpSessions(lambda: breaker, Names(), clock=clock, max_local=4)
    private_redis.stop()
    for n in range(10):
        a.end(f"{n:064x}", f"session-{n}")  # an ended named session and the implicit one
    assert len(a._local) == 4
    assert not a.active(f"{9:064x}", "session-9")  # the newest are remembered
    assert a.active(f"{0:064x}", "session-0")  # the oldest forgotten: unknown, as §5.2


class _HeldSet:
    """A breaker whose first script once ``armed`` waits for ``release`` (a write-back caught
    mid-way)."""

    def __init__(self, breaker: RedisBreaker) -> None:
        self.breaker = breaker
        self.reached, self.release = threading.Event(), threading.Event()
        self.armed = self.held = False

    def call(self, command: str, *args: object, **kwargs: object) -> object:
        if command == "evalsha" and self.armed and not self.held:
            self.held = True
            self.reached.set()
            assert self.release.wait(10)
        return self.breaker.call(command, *args, **kwargs)


def _begun_in_an_outage(private_redis: RedisProcess, clock: Clock) -> tuple[RcpSessions, _HeldSet]:
    """A process that began ``begun-in-outage`` while Redis was stopped, Redis back (empty)
    and its breaker's reset passed; its breaker holds the next script once armed."""
    held = _HeldSet(RedisBreaker(private_redis.url, reset_seconds=1, clock=clock))
    a = RcpSessions(lambda: held, Names(), clock=clock)  # type: ignore[arg-type,return-value]
    private_redis.stop()
    a.start(CRED, "begun-in-outage")
    private_redis.start_again()
    clock.now += 1.2
    return a, held


def test_a_shutdown_during_another_threads_write_back_is_not_undone(
    private_redis: RedisProcess,
) -> None:
    clock = Clock()
    a, held = _begun_in_an_outage(private_redis, clock)
    held.armed = True
    # one thread's call writes back, and is caught before its write of the session reaches Redis
    writer = threading.Thread(target=a.active, args=(CRED, "another-session"))
    writer.start()
    assert held.reached.wait(10)
    a.end(CRED, "begun-in-outage")  # the client ends it meanwhile, on another thread
    held.release.set()
    writer.join(10)
    assert not a.active(CRED, "begun-in-outage")  # a call after shutdown: -32001
    assert not a.started(CRED, "begun-in-outage")  # initialize may start it afresh


def test_a_session_redis_holds_is_asked_of_redis_during_another_threads_write_back(
    private_redis: RedisProcess,
) -> None:
    """A session with nothing to write back is looked up in Redis while another thread
    writes back, so a second ``initialize`` on it is -32600 (spec §13) as with no outage."""
    clock = Clock()
    a, held = _begun_in_an_outage(private_redis, clock)
    process(private_redis.url, clock).start(CRED, "begun-after")  # in another process
    held.armed = True
    writer = threading.Thread(target=a.active, args=(CRED, "another-session"))
    writer.start()
    assert held.reached.wait(10)
    try:
        assert a.started(CRED, "begun-after")
        assert not a.active(CRED, "never-begun")
    finally:
        held.release.set()
        writer.join(10)
    assert a.started(CRED, "begun-in-outage")


def _outage_over(private_redis: RedisProcess, clock: Clock) -> None:
    """Redis comes back (empty), and the breakers' reset passes: their next calls try it."""
    private_redis.start_again()
    clock.now += 1.2


def test_a_session_begun_in_an_outage_and_ended_in_another_process_after_it_stays_ended(
    private_redis: RedisProcess,
) -> None:
    """Before: A's write-back set the session again, whatever B did to it since (a later
    ``initialize`` -32600, a gated call answered after ``shutdown``)."""
    clock, a, b = two_processes(private_redis.url)
    private_redis.stop()
    a.start(CRED, "begun-in-a")
    _outage_over(private_redis, clock)
    # the client's next calls reach B, which has not heard of the session: it starts it again
    # and ends it, before A has written back
    assert not b.active(CRED, "begun-in-a")
    b.start(CRED, "begun-in-a")
    b.end(CRED, "begun-in-a")
    assert not a.active(CRED, "another-session")  # A's first call writes back
    assert not a._local
    assert not b.active(CRED, "begun-in-a")  # was: live again
    assert not a.started(CRED, "begun-in-a")  # initialize may start it (was: -32600)


def test_a_session_ended_in_an_outage_and_begun_in_another_process_after_it_stays_begun(
    private_redis: RedisProcess,
) -> None:
    """Before: A's write-back deleted the session B began after A ended it (-32001)."""
    clock, a, b = two_processes(private_redis.url)
    a.start(CRED, "ended-in-a")
    private_redis.stop()
    a.end(CRED, "ended-in-a")
    _outage_over(private_redis, clock)
    b.start(CRED, "ended-in-a")  # Redis came back empty: B starts it afresh
    assert not a.active(CRED, "another-session")  # A's first call writes back
    assert b.active(CRED, "ended-in-a")  # was: deleted
    assert a.started(CRED, "ended-in-a")


@pytest.mark.parametrize("a_first", [True, False], ids=["a-writes-back-first", "b-first"])
@pytest.mark.parametrize("ended_last", [True, False], ids=["ended-last", "begun-last"])
def test_the_later_of_a_start_and_an_end_in_two_processes_outages_wins(
    private_redis: RedisProcess, a_first: bool, ended_last: bool
) -> None:
    """A ends a session and B starts it, both in their memory during the outage; once Redis
    answers, the later of the two holds, whichever process writes back first. Before: the
    one written back last held (each order failed once)."""
    clock, wall = Clock(), Clock(time.time())  # one true time; the hosts' clocks agree
    a = process(private_redis.url, clock, wall=wall)
    b = process(private_redis.url, clock, wall=wall)
    private_redis.stop()
    first, second = (b.start, a.end) if ended_last else (a.end, b.start)
    first(CRED, "both")
    wall.now += 0.5
    second(CRED, "both")
    _outage_over(private_redis, clock)
    for writer in (a, b) if a_first else (b, a):
        writer.active(CRED, "another-session")
    assert not a._local and not b._local
    assert a.active(CRED, "both") is not ended_last
    assert b.started(CRED, "both") is not ended_last


def test_a_credentials_sessions_share_one_redis_cluster_hash_slot(
    private_redis: RedisProcess,
) -> None:
    """A header-less ``initialize`` starts two sessions and ``shutdown`` ends two, each in one
    script, which a Redis Cluster runs only on keys of one slot. Before: the keys had no hash
    tag (most pairs in two slots)."""
    a = process(private_redis.url, Clock())
    token = a.start(CRED, None)
    a.end(CRED, "named-session")
    client = redis.Redis.from_url(private_redis.url)
    try:
        keys = client.keys("*:s:*")
    finally:
        client.close()
    assert {key.decode().rsplit(":", 1)[1] for key in keys} == {"-", token, "named-session"}
    assert len({key_slot(key) for key in keys}) == 1


def _wait_for_mark(url: str, sid: str, mark: bytes) -> None:
    """Return once Redis holds session ``sid`` of :data:`CRED` as ``mark`` (``+`` live, ``-``
    ended); waits up to 10 s."""
    client = redis.Redis.from_url(url)
    try:
        for _ in range(200):
            if any((client.get(key) or b"")[:1] == mark for key in client.keys(f"*:{sid}")):
                return
            time.sleep(0.05)
    finally:
        client.close()
    raise AssertionError(f"{sid}: Redis never held it as {mark!r}")


@pytest.mark.parametrize("stalled", ["start", "end"])
def test_a_script_run_late_after_a_stall_does_not_undo_what_the_client_did_after_it(
    private_redis: RedisProcess, stalled: str
) -> None:
    """A script sent to a stalled Redis (SIGSTOP) times out, so the process answers from its
    memory; but Redis runs it once resumed. The client's next call (answered from memory, the
    breaker open) undoes it: ``shutdown`` after the ``initialize`` that timed out, or
    ``initialize`` after the ``shutdown``. Before: the late script was timed by Redis's clock
    when it ran, after the client's next call, so that call lost the write-back (a session
    ended by the client live again, one begun ended). Now each script carries the time its
    call was made."""
    clock = Clock()
    a = process(private_redis.url, clock)
    # a connection open, so the script reaches Redis; both scripts loaded, so EVALSHA runs
    a.start(CRED, "pooled-connection")
    a.end(CRED, "pooled-connection")
    if stalled == "end":
        a.start(CRED, "the-session")
    private_redis.process.send_signal(signal.SIGSTOP)
    try:
        if stalled == "start":
            a.start(CRED, "the-session")  # times out: started in memory, and in Redis later
            a.end(CRED, "the-session")
        else:
            a.end(CRED, "the-session")  # times out: ended in memory, and in Redis later
            a.start(CRED, "the-session")
    finally:
        private_redis.process.send_signal(signal.SIGCONT)
    _wait_for_mark(private_redis.url, "the-session", b"+" if stalled == "start" else b"-")
    clock.now += 1.2  # past the breaker's reset: the next call writes back
    assert not a.active(CRED, "another-session")
    assert not a._local
    assert a.active(CRED, "the-session") is (stalled == "end")
    assert a.started(CRED, "the-session") is (stalled == "end")
