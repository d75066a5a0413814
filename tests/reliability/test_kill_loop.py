"""A real ``celery worker`` process SIGKILLed again and again during a delivery burst (a crash
loop), restarted after each kill: every document ends up indexed exactly once in its last
version, nothing is parked, and no Redis bookkeeping (locks, delivery counts, unacked
messages, debounce keys) is left behind. And a running worker whose Redis is stopped and
restarted (empty) mid-burst: it reconnects, and one reconcile restores what was lost.

Long (each kill waits for the Redis visibility timeout to bring the unacked message back): it
runs with ``NCINDEX_RELIABILITY_LONG=1`` (``make fuzz`` sets it), not in ``make test``.
Approach as in ``tests/index/test_kill.py``: simulator and receiver in this process over
HTTP, the worker in a subprocess configured only through ``NCINDEX_*`` variables, owning the
Qdrant Edge folder, which the test opens only after the last worker has exited.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ncindex.documents import DocType, text_hash
from ncindex.ingest.queueing import celery_app
from ncindex.names import Names
from ncindex.redis_server import RedisProcess
from ncindex.store import model_slug
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.sync.reconcile import pending_key, request_scans
from support import WorkerDeployment, wait_until

pytestmark = pytest.mark.skipif(
    os.environ.get("NCINDEX_RELIABILITY_LONG") != "1",
    reason="long crash-loop test: NCINDEX_RELIABILITY_LONG=1 (make fuzz)",
)
DOCS = 40
KILLS = 4


def body(i: int, version: int) -> str:
    """Document ``i``'s text in ``version``."""
    return f"Crash-loop log {i} v{version}: {i * 11 + version} terns on reef {i}, tide {version}."


@pytest.fixture
def loop(
    private_redis: RedisProcess, model_dir: Path, tmp_path: Path
) -> Iterator[WorkerDeployment]:
    """A worker deployment on a Redis of its own, with short limits for a crash loop."""
    built = WorkerDeployment(
        private_redis.url,
        model_dir,
        tmp_path,
        debounce_seconds=0.2,
        limits=(8, 10, 15, 12),
        queues=("ingest", "index", "evict", "reconcile"),
    )
    yield built
    built.close()


def test_worker_crash_loop_during_a_burst_loses_nothing(loop: WorkerDeployment) -> None:
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
    loop.wait_idle(240)
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
    assert loop.redis.hlen(Names().deadletter) == 0, loop.redis.hgetall(Names().deadletter)
    assert loop.in_flight() == []  # no delivery counter leaked
    assert list(loop.redis.scan_iter("ncindex:lock:*")) == []  # no lock leaked


def check_index(loop: WorkerDeployment, expected: dict[int, str]) -> None:
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
    loop: WorkerDeployment, private_redis: RedisProcess
) -> None:
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
    loop.wait_idle(180)
    assert loop.worker is not None and loop.worker.poll() is None, "the worker died"
    producer = celery_app(loop.settings)
    assert request_scans(producer, loop.redis, ["alice"], [DocType.FILE], 60, keys=Names()) == 1
    wait_until(lambda: not loop.redis.exists(pending_key(Names(), "alice", DocType.FILE)), 120, 0.5)
    loop.wait_idle(180)
    loop.stop_worker()
    assert loop.worker.returncode == 0
    assert [d for d in loop.sim.deliveries if d.status == 503], "no delivery met the outage"
    check_index(loop, expected)
    assert loop.redis.hlen(Names().deadletter) == 0
    assert list(loop.redis.scan_iter("ncindex:lock:*")) == []
