"""Telemetry pieces in one process: the queue gauges and the index-lag definition over a real
Redis (kombu's own key layout, filled by really sending tasks), the gunicorn log config through
``logging.config.dictConfig``, and the heartbeat probe."""

from __future__ import annotations

import io
import json
import logging
import logging.config
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest

from ncindex import telemetry
from ncindex.ingest.queueing import celery_app
from ncindex.names import QUEUES, Names
from ncindex.redis_server import RedisProcess, start_redis
from ncindex.settings import Settings
from workers import heartbeat


@pytest.fixture(scope="module")
def server() -> Iterator[RedisProcess]:
    """A private Redis."""
    proc = start_redis()
    yield proc
    proc.stop()


@pytest.fixture
def client(server: RedisProcess) -> Iterator[redis.Redis]:
    """A flushed client."""
    conn = redis.Redis.from_url(server.url)
    conn.flushdb()
    yield conn
    conn.close()


class Clock:
    """A settable clock."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("namespace", ["ncindex", "second"])
def test_queue_depth_counts_what_celery_really_enqueued(
    server: RedisProcess, client: redis.Redis, namespace: str
) -> None:
    settings = Settings(redis_url=server.url, namespace=namespace)
    app = celery_app(settings)
    for _ in range(3):
        app.send_task("ncindex.index_node", kwargs={"user": "a", "file_id": 1}, queue="index")
    app.send_task("ncindex.evict_node", kwargs={"user": "a", "path": "/x"}, queue="evict")
    # the namespace's lists hold them (outside the default namespace: "second:index")
    assert client.llen(settings.names.queue_list("index")) == 3
    collector = telemetry.QueueCollector(client, QUEUES, keys=settings.names, accounts=())
    values = collector.read()
    assert values["depth"] == {"ingest": 0, "index": 3, "evict": 1, "reconcile": 0}
    assert values["reserved"] == 0
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    assert 'ncindex_queue_depth{queue="index"} 3.0' in text
    assert "ncindex_queue_metrics_up 1.0" in text


def test_index_lag_definition(client: redis.Redis) -> None:
    clock = Clock(10_000.0)
    keys = Names()
    collector = telemetry.QueueCollector(client, ("index",), clock=clock, keys=keys, accounts=())
    assert collector.read()["lag"] == 0  # nothing waiting, nothing reserved

    client.set(keys.last_task_done, "9900")
    assert collector.read()["lag"] == 0  # idle: a long-ago last task is no lag

    client.rpush("index", "message")
    assert collector.read()["lag"] == 0  # seen waiting just now: no bound yet
    clock.now = 10_100.0
    assert collector.read()["lag"] == 100  # waiting for 100 s, and nothing finished since

    client.set(keys.last_task_done, "10080")
    assert collector.read()["lag"] == 20  # a task finished 20 s ago: the queue moves

    client.hset("unacked", "tag", "message-body")
    client.zadd("unacked_index", {"tag": 9_700.0})
    assert collector.read()["lag"] == 400  # a reservation 400 s old is the larger

    client.delete("index")
    clock.now = 10_150.0
    assert collector.read()["lag"] == 450  # only the reservation remains
    assert not client.exists(keys.waiting_since)  # nothing waits: the stamp is gone

    client.delete("unacked", "unacked_index", keys.last_task_done)
    client.rpush("index", "message")
    assert collector.read()["lag"] == 0
    clock.now = 10_450.0
    assert collector.read()["lag"] == 300  # no worker has ever finished a task: still a lag


def test_redis_down_is_reported_not_raised() -> None:
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    registry = CollectorRegistry()
    registry.register(telemetry.QueueCollector(dead, QUEUES, keys=Names(), accounts=()))
    text = generate_latest(registry).decode()
    assert "ncindex_queue_metrics_up 0.0" in text
    assert "ncindex_queue_depth" not in text


def test_gunicorn_logconfig_renders_json_with_access_fields() -> None:
    from gunicorn.glogging import SafeAtoms

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    stream = io.StringIO()
    try:
        config = telemetry.gunicorn_logconfig("INFO")
        config["handlers"]["console"]["stream"] = stream
        logging.config.dictConfig(config)
        logging.getLogger("gunicorn.error").info("Booting worker with pid: %s", 42)
        atoms = {
            "h": "10.0.0.1",
            "m": "POST",
            "U": "/hooks/nextcloud",
            "q": "",
            "s": "202",
            "B": "13",
            "M": 7,
            "a": "Nextcloud",
        }
        logging.getLogger("gunicorn.access").info("%(h)s %(r)s %(s)s", SafeAtoms(atoms))
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
        for name in ("gunicorn.error", "gunicorn.access"):
            logging.getLogger(name).handlers.clear()
    booting, access = (json.loads(line) for line in stream.getvalue().splitlines())
    assert booting["event"] == "Booting worker with pid: 42"
    assert booting["logger"] == "gunicorn.error" and booting["level"] == "info"
    assert "positional_args" not in booting
    assert access == access | {
        "event": "request",
        "method": "POST",
        "path": "/hooks/nextcloud",
        "status": 202,
        "bytes": 13,
        "duration_ms": 7,
        "remote": "10.0.0.1",
        "logger": "gunicorn.access",
    }
    assert "query" not in access


def test_heartbeat_probe(tmp_path: Path) -> None:
    beat = tmp_path / "hb"
    assert heartbeat.main([str(beat), "--max-age", "60"]) == 1  # missing
    beat.write_text("x")
    assert heartbeat.main([str(beat), "--max-age", "60"]) == 0
    old = time.time() - 120
    os.utime(beat, (old, old))
    assert heartbeat.main([str(beat), "--max-age", "60"]) == 1  # stale
    assert heartbeat.is_fresh(beat, 60, now=old + 30)


class _Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _console_line(monkeypatch: pytest.MonkeyPatch, stream: io.StringIO) -> str:
    """One record rendered as console text by the formatter made while stderr is ``stream``."""
    monkeypatch.setattr("sys.stderr", stream)
    formatter = telemetry.json_formatter(json_lines=False)
    record = logging.LogRecord("ncindex.x", logging.INFO, __file__, 1, "indexed", None, None)
    return formatter.format(record)


def test_console_text_is_coloured_only_on_a_terminal_without_no_color(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `ncindex up > file` with NCINDEX_LOG_JSON=false wrote ANSI escapes into the file
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert "\x1b[" not in _console_line(monkeypatch, io.StringIO())
    assert "\x1b[" in _console_line(monkeypatch, _Terminal())
    monkeypatch.setenv("NO_COLOR", "1")  # https://no-color.org: any non-empty value
    assert "\x1b[" not in _console_line(monkeypatch, _Terminal())
    monkeypatch.setenv("NO_COLOR", "")
    assert "\x1b[" in _console_line(monkeypatch, _Terminal())
