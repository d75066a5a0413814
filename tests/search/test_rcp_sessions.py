"""``RcpSessions`` of two processes (two workers or replicas: each its own sessions object and
circuit breaker) on one real redis-server, through an outage and after it; breakers and
lifetimes on clocks the tests advance by hand."""

from __future__ import annotations

import signal

from ncindex.names import Names
from ncindex.redis_breaker import RedisBreaker
from ncindex.redis_server import RedisProcess
from ncindex.search.rcp_sessions import RcpSessions
from support import Clock

CRED = "c" * 64  # a credential's SHA-256, as RcpServer keys sessions


def process(url: str, clock: Clock, ttl: int = 3600) -> RcpSessions:
    """One process's sessions on the Redis at ``url``, its breaker reset after 1 s."""
    breaker = RedisBreaker(url, reset_seconds=1, clock=clock)
    return RcpSessions(lambda: breaker, Names(), ttl=ttl, clock=clock)


def test_a_session_begun_during_an_outage_works_in_another_process_and_after_it(
    private_redis: RedisProcess,
) -> None:
    clock = Clock()
    a, b = process(private_redis.url, clock), process(private_redis.url, clock)
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
