"""``RedisBreaker`` on a real redis-server: calls run concurrently, outages open it for its
reset period (on an injected clock, advanced by hand), other errors pass through without
opening it."""

from __future__ import annotations

import signal
import threading

import pytest
import redis

from ncindex.redis_breaker import RedisBreaker, RedisSkipped
from ncindex.redis_server import RedisProcess
from support import Clock, wait_until


def test_a_call_in_flight_does_not_hold_up_the_others(private_redis: RedisProcess) -> None:
    breaker = RedisBreaker(private_redis.url)
    # a client that may wait longer than the blocking pop below (the breaker's own gives 0.5 s)
    breaker.client = redis.Redis.from_url(private_redis.url, socket_timeout=30)
    popped: list[object] = []
    waiter = threading.Thread(
        target=lambda: popped.append(breaker.call("blpop", ["queue"], timeout=20))
    )
    waiter.start()
    watcher = redis.Redis.from_url(private_redis.url)
    wait_until(lambda: watcher.info("clients")["blocked_clients"] == 1, timeout=10)
    # with a lock held for the whole command (pybreaker's CircuitBreaker.call) this push
    # waited for the pop's 20 s to run out
    breaker.call("lpush", "queue", "x")
    waiter.join(timeout=30)
    assert popped == [(b"queue", b"x")]
    assert not breaker.open


def test_an_unreachable_redis_opens_it_and_later_calls_skip(private_redis: RedisProcess) -> None:
    url = private_redis.url
    private_redis.stop()
    breaker = RedisBreaker(url, reset_seconds=60)
    with pytest.raises(RedisSkipped) as first:
        breaker.call("get", "k")
    assert isinstance(first.value.__cause__, redis.ConnectionError)
    assert breaker.open
    with pytest.raises(RedisSkipped):
        breaker.call("get", "k")


def test_a_command_error_passes_through_and_leaves_it_closed(private_redis: RedisProcess) -> None:
    breaker = RedisBreaker(private_redis.url)
    breaker.call("set", "k", "v")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        breaker.call("lpush", "k", "x")
    assert not breaker.open
    assert breaker.call("get", "k") == b"v"


def test_after_its_reset_period_a_call_tries_redis_and_success_closes_it(
    private_redis: RedisProcess,
) -> None:
    clock = Clock()
    breaker = RedisBreaker(private_redis.url, reset_seconds=5, clock=clock)
    breaker.call("set", "k", "v")
    private_redis.process.send_signal(signal.SIGSTOP)
    try:
        with pytest.raises(RedisSkipped) as opening:
            breaker.call("get", "k")  # waits out the 0.5 s timeout, opens it
        assert isinstance(opening.value.__cause__, redis.TimeoutError)
        clock.now += 4.9
        with pytest.raises(RedisSkipped, match="breaker open"):
            breaker.call("get", "k")  # skipped at once: Redis is not asked
        clock.now += 0.2
        with pytest.raises(RedisSkipped) as trial:
            breaker.call("get", "k")  # past the period: tried, timed out, open again
        assert isinstance(trial.value.__cause__, redis.TimeoutError)
    finally:
        private_redis.process.send_signal(signal.SIGCONT)
    with pytest.raises(RedisSkipped, match="breaker open"):
        breaker.call("get", "k")  # a new period began with the failed trial
    assert breaker.open
    clock.now += 5
    assert breaker.call("get", "k") == b"v"
    assert not breaker.open
