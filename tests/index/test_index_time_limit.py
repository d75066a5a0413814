"""An index task cut off by the hard time limit (its pool process killed, as a run stuck in
native code is) is run again, not dropped."""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
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
    past the hard limit (``stall``: ``1`` the first run, ``every …`` each, ``by file`` as
    its hash says)."""
    redis.Redis.from_url(redis_url).flushdb()
    dep = WorkerDeployment(
        redis_url, model_dir, tmp_path, debounce_seconds=0.3, limits=(5, 6, 12, 7),
        pool="prefork", app="time_limit_app", extract_seconds=1,
    )  # fmt: skip
    here = str(Path(__file__).parent)
    dep.env["PYTHONPATH"] = os.pathsep.join([here, dep.env.get("PYTHONPATH", "")])
    dep.env["TIME_LIMIT_TEST_STALL_INDEX_NODE"] = stall
    # every file its own ncindex.index_node, the task that stalls: a batch (ncindex.index_nodes,
    # which a scan or two gathered deliveries send) would index the file without it
    dep.env["NCINDEX_INDEX_BATCH_DOCS"] = "1"
    return dep


def created_unnoticed(dep: WorkerDeployment, path: str) -> int:
    """Create alice's ``path`` (:data:`TEXT`) with its events dropped; returns its file id.
    Writing it again then sends one ``NodeWritten``, so the file gets exactly one
    ``ncindex.index_node`` message: a new file's ``NodeCreated`` and ``NodeWritten`` coalesce
    into one task only when the second reaches the receiver within the 0.3 s debounce, and
    under load it did not (a third receipt in the log: the second event's own message)."""
    dep.sim.drop_rate = 1.0
    file_id = dep.sim.put_file("alice", path, TEXT)
    dep.sim.drop_rate = 0.0
    return file_id


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
        file_id = created_unnoticed(dep, "/Tides.txt")
        dep.sim.put_file("alice", "/Tides.txt", TEXT)  # one event: NodeWritten
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


WAYS = ("native", "python")
STALL_BY_FILE = "time-limit-test:stall-by-file"  # file id -> "every native" | "every python"


@dataclass
class Parked:
    """What one file whose every run the hard limit killed left: the ``ncindex.index_node``
    task id that parked it (``""``: none logged parking it), its dead-letter entry (``None``:
    not parked), and the worker's whole log."""

    task_id: str
    entry: bytes | None
    log: bytes


@pytest.fixture(scope="module")
def parked_files(
    redis_url: str, model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Parked]:
    """One file per way of being stuck (:data:`WAYS`), each run of its task stalling past
    the hard limit, one after the other on one worker (Qdrant Edge: one pool process) with
    ``dead_letter_after`` 2 (two runs cut off, then parked); keyed by the way. The next
    file is put once the worker is idle again."""
    dep = deployment(redis_url, model_dir, tmp_path_factory.mktemp("parked"), "by file")
    dep.env["NCINDEX_DEAD_LETTER_AFTER"] = "2"  # two runs cut off, then parked
    dep.env["TIME_LIMIT_TEST_STALL_BY_FILE"] = STALL_BY_FILE
    ids: dict[str, int] = {}
    try:
        dep.start_worker()
        for way in WAYS:
            # the file's way is set before its one event is sent (its task cannot run first)
            ids[way] = created_unnoticed(dep, f"/Tides-{way}.txt")
            dep.redis.hset(STALL_BY_FILE, str(ids[way]), f"every {way}")
            dep.sim.put_file("alice", f"/Tides-{way}.txt", TEXT)  # one event: NodeWritten
            dep.sim.flush_deliveries(timeout=10)
            dep.wait_idle(90)
            time.sleep(0.5)
            dep.wait_idle(30)
        entries = {
            way: dep.redis.hget(dep.settings.names.deadletter, f"node:{ids[way]}") for way in WAYS
        }
        dep.stop_worker()
    finally:
        dep.close()
    log = dep.logs[0].read_bytes()
    events = [json.loads(line) for line in log.splitlines() if line.startswith(b"{")]
    parking = {
        e["file_id"]: e["task_id"]
        for e in events
        if e["event"] == "dead_letter" and e.get("task") == "ncindex.index_node"
    }
    return {way: Parked(parking.get(ids[way], ""), entries[way], log) for way in WAYS}


@pytest.mark.parametrize("where", WAYS)
def test_an_index_task_the_hard_time_limit_always_kills_is_parked(
    parked_files: dict[str, Parked], where: str
) -> None:
    """Every run of the file's task is killed by the hard limit: its message comes back (it
    is not acknowledged) until the runs that never ended reach ``dead_letter_after``; the
    next run parks the file in the dead letter instead of running it, and nothing is
    queued again (no endless loop holding a worker). Both ways share one worker
    (:func:`parked_files`): the log's totals are both files' runs."""
    parked = parked_files[where]
    assert parked.task_id
    log, task = parked.log, re.escape(parked.task_id.encode())
    runs = 2
    killed = rb"Hard time limit \(\d+s\) exceeded for ncindex\.index_node\[%s\]" % task
    assert len(re.findall(killed, log)) == runs
    assert len(re.findall(rb"ncindex\.index_node\[%s\] received" % task, log)) == runs + 1
    assert log.count(b"Hard time limit") == runs * len(WAYS)
    assert len(RECEIVED.findall(log)) == (runs + 1) * len(WAYS)
    assert parked.entry is not None
    assert "worker lost" in json.loads(parked.entry)["reason"]
