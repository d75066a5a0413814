"""The rate limit's caller key (:func:`ncindex.web.ratelimit.caller_key_for`), and the MCP
server's limits (:class:`ncindex.web.ratelimit.CallerLimit`) through a Redis outage."""

from __future__ import annotations

import base64
import signal
import time

from ncindex.redis_server import RedisProcess
from ncindex.settings import Settings
from ncindex.web.ratelimit import CallerLimit, caller_key_for


def basic(login: str) -> str:
    return "Basic " + base64.b64encode(login.encode()).decode()


def test_a_login_counts_against_one_bucket_however_it_is_cased() -> None:
    # Nextcloud finds a login case-insensitively, so BOB's guesses are guesses at bob's password
    keys = {caller_key_for(basic(f"{name}:guess"), "10.0.0.1") for name in ("bob", "BOB", "Bob")}
    assert len(keys) == 1
    assert keys.pop().startswith("user:")


def test_other_users_addresses_and_tokens_count_apart() -> None:
    assert caller_key_for(basic("bob:x"), "10.0.0.1") == caller_key_for(basic("bob:y"), "10.0.0.2")
    assert caller_key_for(basic("bob:x"), "10.0.0.1") != caller_key_for(basic("rob:x"), "10.0.0.1")
    assert caller_key_for("Bearer AbC", None) != caller_key_for("Bearer abc", None)
    assert caller_key_for(None, "10.0.0.1") == "addr:10.0.0.1"


def test_the_mcp_limits_count_in_memory_while_redis_stalls_as_the_search_apis_do(
    private_redis: RedisProcess,
) -> None:
    """A stalled Redis let every MCP request through uncounted, each after waiting out its
    Redis calls' timeouts (0.5 s apiece, 1 s a request), where the search API's flask-limiter
    counts in memory until Redis answers. Now :class:`CallerLimit` does the same: the limit
    still holds, only the request that meets the outage waits, and the counts go back to Redis
    at the first ping that finds it."""
    settings = Settings(redis_url=private_redis.url, namespace="rl", search_rate_limit="3/minute")
    limit = CallerLimit(settings)
    alice = basic("alice:pw")
    assert limit.hit(alice, "192.0.2.1") is None  # one in Redis
    private_redis.process.send_signal(signal.SIGSTOP)
    try:
        began = time.monotonic()
        stalled = [limit.hit(alice, "192.0.2.1") for _ in range(6)]
        took = time.monotonic() - began
    finally:
        private_redis.process.send_signal(signal.SIGCONT)
    # this process counted three from the outage on, then refused the rest
    assert stalled[:3] == [None, None, None], stalled
    assert all(retry is not None and 1 <= retry <= 60 for retry in stalled[3:]), stalled
    assert took < 1.5, took  # the first waited for Redis (0.5 s); before, each of the six
    time.sleep(1.1)  # past the first ping's second: Redis answers, and counts again
    bob = basic("bob:pw")
    assert [limit.hit(bob, "192.0.2.2") for _ in range(3)] == [None, None, None]
    # counted in Redis: another process (replica) sees bob's three
    assert CallerLimit(settings).hit(bob, "192.0.2.2") is not None
