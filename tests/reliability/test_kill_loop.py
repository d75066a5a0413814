"""A real ``celery worker`` process SIGKILLed again and again during a delivery burst (a crash
loop), restarted after each kill: every document ends up indexed exactly once in its last
version, nothing is parked, and no Redis bookkeeping (locks, delivery counts, unacked
messages, debounce keys) is left behind. And a running worker whose Redis is stopped and
restarted (empty) mid-burst: it reconnects, and one reconcile restores what was lost.

Long (each kill waits for the Redis visibility timeout to bring the unacked message back): it
runs with ``NCINDEX_RELIABILITY_LONG=1`` (``make fuzz`` sets it), not in ``make test``.
Approach as in ``tests/pipeline/test_kill.py``: simulator and receiver in this process over
HTTP, the worker in a subprocess configured only through ``NCINDEX_*`` variables, owning the
Qdrant Edge folder, which the test opens only after the last worker has exited.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from pydantic import SecretStr
from werkzeug.serving import make_server

from ncindex.deadletter import DEADLETTER_KEY, DELIVERIES_PREFIX
from ncindex.documents import DocType, text_hash
from ncindex.queueing import celery_app
from ncindex.reconcile import pending_key, request_scans
from ncindex.redis_server import RedisProcess
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.store import model_slug
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.testing import NextcloudSimulator, serve_simulator
from ncindex.webhooks import register
from support import PASSWORDS, wait_until
from webhook_receiver import create_app as create_receiver_app

pytestmark = pytest.mark.skipif(
    os.environ.get("NCINDEX_RELIABILITY_LONG") != "1",
    reason="long crash-loop test: NCINDEX_RELIABILITY_LONG=1 (make fuzz)",
)
ADMIN = ("admin", "admin-app-pw")
ROOT = Path(__file__).resolve().parents[2]
DOCS = 40
KILLS = 4


def body(i: int, version: int) -> str:
    """Document ``i``'s text in ``version``."""
    return f"Crash-loop log {i} v{version}: {i * 11 + version} terns on reef {i}, tide {version}."


class CrashLoop:
    """Simulator + receiver here; worker subprocesses started and SIGKILLed at will."""

    def __init__(self, redis_url: str, model_dir: Path, tmp: Path) -> None:
        self.sim = NextcloudSimulator()
        self.sim.add_user(ADMIN[0], password=ADMIN[1], display_name="Admin", admin=True)
        self.sim.add_user("alice", password=PASSWORDS["alice"])
        self.sim_server = serve_simulator(self.sim, host="127.0.0.1", port=0)
        self.receiver = make_server("127.0.0.1", 0, lambda e, s: [], threaded=True)
        accounts = {"alice": PASSWORDS["alice"], ADMIN[0]: ADMIN[1]}
        self.qdrant = tmp / "qdrant"
        self.settings = Settings(
            nextcloud_url=self.sim_server.url,
            accounts={u: SecretStr(p) for u, p in accounts.items()},
            admin_user=ADMIN[0],
            webhook_secret=SecretStr(secrets.token_urlsafe(16)),
            public_url=f"http://127.0.0.1:{self.receiver.port}",
            redis_url=redis_url,
            model_dir=model_dir,
            qdrant_path=self.qdrant,
            debounce_seconds=0.2,
        )
        self.env = os.environ | {
            "NCINDEX_NEXTCLOUD_URL": self.sim_server.url,
            "NCINDEX_ACCOUNTS": json.dumps(accounts),
            "NCINDEX_REDIS_URL": redis_url,
            "NCINDEX_MODEL_DIR": str(model_dir),
            "NCINDEX_QDRANT_PATH": str(self.qdrant),
            "NCINDEX_TASK_SOFT_TIME_LIMIT": "8",
            "NCINDEX_TASK_TIME_LIMIT": "10",
            "NCINDEX_VISIBILITY_TIMEOUT": "15",
            "NCINDEX_LOCK_TTL": "12",
            "NCINDEX_LOG_JSON": "true",
        }
        self.receiver.app = create_receiver_app(self.settings, producer=celery_app(self.settings))
        threading.Thread(target=self.receiver.serve_forever, daemon=True).start()
        self.worker: subprocess.Popen[bytes] | None = None
        self.logs: list[Path] = []
        self.redis = redis.Redis.from_url(redis_url)

    def start_worker(self) -> None:
        """Start ``celery worker`` (solo pool) on the ingest, index and evict queues."""
        log = self.qdrant.parent / f"worker-{len(self.logs)}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            self.worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "workers.worker", "worker",
                 "--pool=solo", "-Q", "ingest,index,evict,reconcile", "--loglevel=INFO",
                 "--without-mingle", "--without-gossip"],
                cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def kill_worker(self) -> None:
        """SIGKILL the worker and reap it."""
        assert self.worker is not None
        self.worker.send_signal(signal.SIGKILL)
        self.worker.wait(timeout=10)

    def stop_worker(self) -> None:
        """SIGTERM (warm shutdown) and wait."""
        if self.worker is not None and self.worker.poll() is None:
            self.worker.send_signal(signal.SIGTERM)
            self.worker.wait(timeout=60)

    def in_flight(self) -> list[bytes]:
        """Delivery counters of the documents a task is working on right now."""
        return list(self.redis.scan_iter(f"{DELIVERIES_PREFIX}*", count=1000))

    def settled(self) -> bool:
        """No queued, unacked or debounced work."""
        busy = any(self.redis.llen(q) for q in ("ingest", "index", "evict", "reconcile"))
        busy |= bool(self.redis.hlen("unacked")) or bool(self.redis.zcard("unacked_index"))
        busy |= any(True for _ in self.redis.scan_iter("ncindex:debounce:*", count=1000))
        return not busy

    def close(self) -> None:
        """Kill any worker, stop the servers."""
        if self.worker is not None and self.worker.poll() is None:
            self.kill_worker()
        self.receiver.shutdown()
        self.sim_server.close()


@pytest.fixture
def loop(private_redis: RedisProcess, model_dir: Path, tmp_path: Path) -> Iterator[CrashLoop]:
    """A :class:`CrashLoop` on a Redis of its own."""
    built = CrashLoop(private_redis.url, model_dir, tmp_path)
    yield built
    built.close()


def test_worker_crash_loop_during_a_burst_loses_nothing(loop: CrashLoop) -> None:
    services = Services(loop.settings)  # only its HTTP client is used (webhook registration)
    register(services.account(ADMIN[0]), loop.settings)
    services.close()
    loop.sim.faults.set("webdav", delay=0.15, method="GET")  # each document takes a moment
    loop.start_worker()
    ids = [loop.sim.put_file("alice", f"/Reef/log-{i:02}.txt", body(i, 1)) for i in range(DOCS)]
    kills = 0
    for round_ in range(KILLS):
        if round_ == 1:  # second versions arrive while the loop is crashing
            for i in range(10):
                loop.sim.put_file("alice", f"/Reef/log-{i:02}.txt", body(i, 2))
        wait_until(loop.in_flight, 120, interval=0.01)  # kill inside a task
        loop.kill_worker()
        kills += 1
        loop.start_worker()
    loop.sim.flush_deliveries(timeout=30)
    wait_until(loop.settled, 240, interval=0.5)
    loop.stop_worker()
    assert loop.worker is not None and loop.worker.returncode == 0
    assert kills == KILLS

    store = QdrantEdgeStore(loop.qdrant, model_slug(loop.settings.dense_model))
    try:
        total = 0
        for i, file_id in enumerate(ids):
            points = store.document_points(f"file:{file_id}")
            assert points, f"document {i} lost"
            payloads = [p.payload for p in points]
            expected = body(i, 2 if i < 10 else 1)
            assert {p["content_hash"] for p in payloads} == {text_hash(expected)}, i
            assert sorted(p["chunk_index"] for p in payloads) == list(range(len(points))), i
            total += len(points)
        assert store.count() == total  # no duplicate, no stale version
    finally:
        store.close()
    assert loop.redis.hlen(DEADLETTER_KEY) == 0, loop.redis.hgetall(DEADLETTER_KEY)
    assert loop.in_flight() == []  # no delivery counter leaked
    assert list(loop.redis.scan_iter("ncindex:lock:*")) == []  # no lock leaked


def check_index(loop: CrashLoop, expected: dict[int, str]) -> None:
    """After the last worker exited: every file id holds exactly ``expected[id]``'s text."""
    store = QdrantEdgeStore(loop.qdrant, model_slug(loop.settings.dense_model))
    try:
        total = 0
        for file_id, text in expected.items():
            points = store.document_points(f"file:{file_id}")
            assert points, f"file {file_id} lost"
            assert {p.payload["content_hash"] for p in points} == {text_hash(text)}, file_id
            total += len(points)
        assert store.count() == total  # no duplicate, no stale version
    finally:
        store.close()


def test_running_worker_survives_a_redis_restart_and_one_reconcile_converges(
    loop: CrashLoop, private_redis: RedisProcess
) -> None:
    services = Services(loop.settings)
    register(services.account(ADMIN[0]), loop.settings)
    services.close()
    loop.sim.faults.set("webdav", delay=0.1, method="GET")
    loop.start_worker()
    expected: dict[int, str] = {}
    for i in range(20):
        expected[loop.sim.put_file("alice", f"/Reef/a-{i:02}.txt", body(i, 1))] = body(i, 1)
    wait_until(loop.in_flight, 120, interval=0.01)  # the worker is inside a task
    private_redis.stop()  # queue, unacked messages, locks and counters: all gone
    for i in range(20, 30):  # written while Redis is down: deliveries answered 503, lost
        expected[loop.sim.put_file("alice", f"/Reef/a-{i:02}.txt", body(i, 1))] = body(i, 1)
    loop.sim.flush_deliveries(timeout=30)
    private_redis.start_again()
    for i in range(30, 40):  # after the restart: the same worker must take these
        expected[loop.sim.put_file("alice", f"/Reef/a-{i:02}.txt", body(i, 1))] = body(i, 1)
    loop.sim.flush_deliveries(timeout=30)
    wait_until(loop.settled, 180, interval=0.5)
    assert loop.worker is not None and loop.worker.poll() is None, "the worker died"
    producer = celery_app(loop.settings)
    assert request_scans(producer, loop.redis, ["alice"], [DocType.FILE], 60) == 1
    wait_until(lambda: not loop.redis.exists(pending_key("alice", DocType.FILE)), 120, 0.5)
    wait_until(loop.settled, 180, interval=0.5)
    loop.stop_worker()
    assert loop.worker.returncode == 0
    assert [d for d in loop.sim.deliveries if d.status == 503], "no delivery met the outage"
    check_index(loop, expected)
    assert loop.redis.hlen(DEADLETTER_KEY) == 0
    assert list(loop.redis.scan_iter("ncindex:lock:*")) == []
