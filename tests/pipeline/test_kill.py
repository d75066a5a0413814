"""A real ``celery worker`` process SIGKILLed in the middle of a 50-document burst, then
restarted: every document ends up indexed exactly once, in its last version, with no
duplicate and no stale point.

Parts: the simulator and the webhook receiver run in this process (over HTTP, as in
production); the worker is ``celery -A workers.worker worker --pool=solo`` in a subprocess,
configured only through ``NCINDEX_*`` environment variables, and it owns the Qdrant Edge
folder (Edge allows one process per folder). The test reads that folder itself only after
the last worker has exited.

The unacked messages of the killed worker come back after ``visibility_timeout`` (30 s here)
— the Redis transport's recovery path — and the lock the killed task held expires after
``lock_ttl``; both are set short through the environment.
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

from ncindex.deadletter import DELIVERIES_PREFIX
from ncindex.documents import text_hash
from ncindex.queueing import celery_app
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.store import model_slug
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.testing import NextcloudSimulator, serve_simulator
from ncindex.webhooks import register
from support import PASSWORDS, wait_until
from webhook_receiver import create_app as create_receiver_app

ADMIN = ("admin", "admin-app-pw")
ROOT = Path(__file__).resolve().parents[2]
DOCS = 50


def body(i: int, version: int) -> str:
    return (
        f"Field report {i}, version {version}. The survey team counted {i * 7 + version} "
        f"oystercatchers on sandbank number {i}; the tide was {version * 10 + i} cm."
    )


class Deployment:
    """Simulator + receiver here, worker processes started and killed at will."""

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
            debounce_seconds=0.3,
        )
        self.env = os.environ | {
            "NCINDEX_NEXTCLOUD_URL": self.sim_server.url,
            "NCINDEX_ACCOUNTS": json.dumps(accounts),
            "NCINDEX_REDIS_URL": redis_url,
            "NCINDEX_MODEL_DIR": str(model_dir),
            "NCINDEX_QDRANT_PATH": str(self.qdrant),
            "NCINDEX_TASK_SOFT_TIME_LIMIT": "20",
            "NCINDEX_TASK_TIME_LIMIT": "25",
            "NCINDEX_VISIBILITY_TIMEOUT": "30",
            "NCINDEX_LOCK_TTL": "28",
            "NCINDEX_LOG_JSON": "true",
        }
        self.receiver.app = create_receiver_app(self.settings, producer=celery_app(self.settings))
        threading.Thread(target=self.receiver.serve_forever, daemon=True).start()
        self.worker: subprocess.Popen[bytes] | None = None
        self.logs: list[Path] = []

    def start_worker(self) -> None:
        log = self.qdrant.parent / f"worker-{len(self.logs)}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            self.worker = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "workers.worker",
                    "worker",
                    "--pool=solo",
                    "-Q",
                    "ingest,index,evict",
                    "--loglevel=INFO",
                    "--without-mingle",
                    "--without-gossip",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def kill_worker(self) -> None:
        assert self.worker is not None
        self.worker.send_signal(signal.SIGKILL)
        self.worker.wait(timeout=10)

    def stop_worker(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            self.worker.send_signal(signal.SIGTERM)  # warm shutdown
            self.worker.wait(timeout=60)

    def close(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            self.kill_worker()
        self.receiver.shutdown()
        self.sim_server.close()

    def downloads(self) -> int:
        return self.sim.request_count("webdav", "GET")

    def in_flight(self) -> list[bytes]:
        """Delivery counts of documents a task is working on right now."""
        client = redis.Redis.from_url(self.settings.redis_url)
        return list(client.scan_iter(f"{DELIVERIES_PREFIX}*", count=1000))

    def settled(self) -> bool:
        client = redis.Redis.from_url(self.settings.redis_url)
        busy = any(client.llen(q) for q in ("ingest", "index", "evict"))
        busy |= bool(client.hlen("unacked")) or bool(client.zcard("unacked_index"))
        busy |= any(True for _ in client.scan_iter("ncindex:debounce:*", count=1000))
        return not busy


@pytest.fixture
def deployment(redis_url: str, model_dir: Path, tmp_path: Path) -> Iterator[Deployment]:
    redis.Redis.from_url(redis_url).flushdb()
    dep = Deployment(redis_url, model_dir, tmp_path)
    yield dep
    dep.close()


def test_sigkill_mid_burst_then_restart_indexes_every_document_once(
    deployment: Deployment,
) -> None:
    dep = deployment
    services = Services(dep.settings)  # only its HTTP client is used (webhook registration)
    register(services.account(ADMIN[0]), dep.settings)
    services.close()
    dep.sim.faults.set("webdav", delay=0.2, method="GET")  # each document takes a moment
    dep.start_worker()
    ids = [dep.sim.put_file("alice", f"/Field/report-{i:02}.txt", body(i, 1)) for i in range(DOCS)]
    wait_until(lambda: dep.downloads() >= 15, 120, interval=0.02)
    # a second version of ten documents arrives while the first burst is being worked on
    for i in range(10):
        dep.sim.put_file("alice", f"/Field/report-{i:02}.txt", body(i, 2))
    # kill while a task is inside its work (its delivery count exists only then)
    wait_until(dep.in_flight, 60, interval=0.01)
    dep.kill_worker()
    at_kill = dep.downloads()
    assert at_kill < DOCS, "the worker finished before it could be killed mid-burst"
    assert dep.in_flight(), "no task was in flight when the worker was killed"
    dep.start_worker()
    dep.sim.flush_deliveries(timeout=10)
    wait_until(dep.settled, 180, interval=0.5)
    dep.stop_worker()
    assert dep.worker is not None and dep.worker.returncode == 0

    store = QdrantEdgeStore(dep.qdrant, model_slug(dep.settings.dense_model))
    try:
        total = 0
        for i, file_id in enumerate(ids):
            points = store.document_points(f"file:{file_id}")
            expected = body(i, 2 if i < 10 else 1)
            assert points, f"document {i} missing"
            payloads = [p.payload for p in points]
            assert {p["content_hash"] for p in payloads} == {text_hash(expected)}, i
            assert [p["chunk_index"] for p in payloads] == list(range(len(points))), i
            assert all(p["chunk_count"] == len(points) for p in payloads), i
            assert payloads[0]["acl"] == ["user:alice"]
            total += len(points)
        assert store.count() == total  # nothing else: no duplicate, no stale version
    finally:
        store.close()
    log = b"".join(p.read_bytes() for p in dep.logs)
    assert b"dead_letter" not in log
