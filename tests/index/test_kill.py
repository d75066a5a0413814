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

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ncindex.documents import text_hash
from ncindex.store import model_slug
from ncindex.store.qdrant_edge import QdrantEdgeStore
from support import WorkerDeployment, wait_until

DOCS = 50


def body(i: int, version: int) -> str:
    return (
        f"Field report {i}, version {version}. The survey team counted {i * 7 + version} "
        f"oystercatchers on sandbank number {i}; the tide was {version * 10 + i} cm."
    )


@pytest.fixture
def deployment(redis_url: str, model_dir: Path, tmp_path: Path) -> Iterator[WorkerDeployment]:
    redis.Redis.from_url(redis_url).flushdb()
    # the killed task's message comes back after the visibility timeout (14 s) and its lock
    # after the lock TTL (13 s): both bound the restart; the solo pool enforces no time limit
    dep = WorkerDeployment(
        redis_url, model_dir, tmp_path, debounce_seconds=0.3, limits=(10, 12, 14, 13)
    )
    yield dep
    dep.close()


def test_sigkill_mid_burst_then_restart_indexes_every_document_once(
    deployment: WorkerDeployment,
) -> None:
    dep = deployment
    dep.sim.faults.set("webdav", delay=0.2, method="GET")  # each document takes a moment
    dep.start_worker()
    ids = [dep.sim.put_file("alice", f"/Field/report-{i:02}.txt", body(i, 1)) for i in range(DOCS)]
    wait_until(lambda: dep.downloads() >= 15, 120, interval=0.02)
    # a second version of ten documents arrives while the first burst is being worked on
    for i in range(10):
        dep.sim.put_file("alice", f"/Field/report-{i:02}.txt", body(i, 2))
    # kill while a task is inside its work (its delivery count exists only then): freeze the
    # worker first, so a task that ends between the look and the kill is not taken for one
    # killed mid-work (the worker runs its tasks in its own process: solo pool)
    assert dep.worker is not None
    while True:
        wait_until(dep.in_flight, 60, interval=0.01)
        dep.worker.send_signal(signal.SIGSTOP)
        if dep.in_flight():
            break
        dep.worker.send_signal(signal.SIGCONT)
    dep.kill_worker()
    at_kill = dep.downloads()
    assert at_kill < DOCS, "the worker finished before it could be killed mid-burst"
    assert dep.in_flight(), "no task was in flight when the worker was killed"
    dep.start_worker()
    dep.sim.flush_deliveries(timeout=10)
    dep.wait_idle(180)
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
