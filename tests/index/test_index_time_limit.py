"""An index task cut off by the hard time limit (its pool process killed, as a run stuck in
native code is) is run again, not dropped."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import redis

from ncindex.progress import Progress
from support import WorkerDeployment, check_indexed_once

TEXT = "The lighthouse keeper logs the tides at dawn and dusk."
RECEIVED = re.compile(rb"ncindex\.index_node\[[^\]]+\] received")


def deployment(redis_url: str, model_dir: Path, tmp_path: Path, stall: str) -> WorkerDeployment:
    """Alice's deployment on a ``prefork`` worker of :mod:`time_limit_app` (soft limit 5 s,
    hard 6 s, visibility timeout 12 s, locks 7 s) whose ``ncindex.index_node`` runs stall
    past the hard limit (``stall``: ``1`` the first run, ``every`` each)."""
    redis.Redis.from_url(redis_url).flushdb()
    dep = WorkerDeployment(
        redis_url, model_dir, tmp_path, debounce_seconds=0.3, limits=(5, 6, 12, 7),
        pool="prefork", app="time_limit_app", extract_seconds=1,
    )  # fmt: skip
    here = str(Path(__file__).parent)
    dep.env["PYTHONPATH"] = os.pathsep.join([here, dep.env.get("PYTHONPATH", "")])
    dep.env["TIME_LIMIT_TEST_STALL_INDEX_NODE"] = stall
    return dep


def test_an_index_task_the_hard_time_limit_killed_is_run_again(
    redis_url: str, model_dir: Path, tmp_path: Path
) -> None:
    """The first run of a file's ``ncindex.index_node`` ignores the soft limit and is killed
    by the hard one (Celery: ``TimeLimitExceeded``). Celery acknowledges a message whose task
    timed out while ``task_acks_on_failure_or_timeout`` holds (its default, even with
    ``acks_late``: celery ``celery/worker/request.py`` ``Request.on_timeout``), so before,
    the file's accepted change was dropped: not indexed, no failure recorded, shown pending
    by ``ncindex status`` for a week, and held back by the next scans as ``unindexable``
    for a day. Its message now goes back to the queue (at once on Celery 5.7; after the
    visibility timeout on 5.5), and the
    run after it indexes the file (the killed run counts towards the dead letter, as a
    worker lost does)."""
    dep = deployment(redis_url, model_dir, tmp_path, "1")
    try:
        dep.start_worker()
        file_id = dep.sim.put_file("alice", "/Tides.txt", TEXT)
        dep.sim.flush_deliveries(timeout=10)
        dep.wait_idle(60)
        time.sleep(0.5)
        dep.wait_idle(60)
        pending = Progress(dep.redis, dep.settings.names).pending("alice", time.time())
        dep.stop_worker()
    finally:
        dep.close()
    log = dep.logs[0].read_bytes()
    assert b"Hard time limit" in log
    assert len(RECEIVED.findall(log)) == 2  # the message came back once
    check_indexed_once(dep.qdrant, dep.settings.dense_model, {file_id: TEXT})
    assert pending == 0


@pytest.mark.parametrize("where", ["native", "python"])
def test_an_index_task_the_hard_time_limit_always_kills_is_parked(
    redis_url: str, model_dir: Path, tmp_path: Path, where: str
) -> None:
    """Every run of the file's task is killed by the hard limit: its message comes back (it
    is not acknowledged) until the runs that never ended reach ``dead_letter_after``; the
    next run parks the file in the dead letter instead of running it, and nothing is
    queued again (no endless loop holding a worker)."""
    dep = deployment(redis_url, model_dir, tmp_path, f"every {where}")
    dep.env["NCINDEX_DEAD_LETTER_AFTER"] = "2"  # two runs cut off, then parked
    try:
        dep.start_worker()
        file_id = dep.sim.put_file("alice", "/Tides.txt", TEXT)
        dep.sim.flush_deliveries(timeout=10)
        dep.wait_idle(90)
        time.sleep(0.5)
        dep.wait_idle(30)
        parked = dep.redis.hget(dep.settings.names.deadletter, f"node:{file_id}")
        dep.stop_worker()
    finally:
        dep.close()
    log = dep.logs[0].read_bytes()
    runs = 2
    assert log.count(b"Hard time limit") == runs
    assert len(RECEIVED.findall(log)) == runs + 1
    assert parked is not None
    assert "worker lost" in json.loads(parked)["reason"]
