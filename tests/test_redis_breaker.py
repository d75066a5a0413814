"""``RedisBreaker`` on a real redis-server: calls run concurrently, outages open it, other
errors pass through without opening it."""

from __future__ import annotations

import threading

import pytest
import redis

from ncindex.redis_breaker import RedisBreaker, RedisSkipped
from ncindex.redis_server import RedisProcess
from support import wait_until


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
    # with pybreaker's CircuitBreaker.call this push waited for the pop's 20 s to run out
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
    assert isinstance(first.value.__cause__.__context__, redis.ConnectionError)
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
