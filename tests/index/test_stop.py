"""A real ``celery worker`` process stopped by SIGTERM — sent to its process group, twice, as
a supervisor or ``make`` may — in the middle of a 50-document burst, then started again:

- it exits 0 on its own, having let the running task finish;
- nothing stays reserved: at once, not after the visibility timeout (900 s here, far longer
  than the test), no message is left in ``unacked`` — tasks received but not started (a
  debounce countdown) were put back on their queue when the worker closed its connection;
- after the restart every document is indexed exactly once, in its last version, with no
  duplicate and no stale point;
- neither run logged anything at error level.

Parts as in ``test_kill.py``: simulator and receiver in this process over HTTP, the worker a
subprocess configured through ``NCINDEX_*`` variables, owning the Qdrant Edge folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from test_kill import DOCS, body

from support import ROOT, WorkerDeployment, check_indexed_once, error_lines, wait_until


@pytest.fixture
def deployment(redis_url: str, model_dir: Path, tmp_path: Path) -> Iterator[WorkerDeployment]:
    redis.Redis.from_url(redis_url).flushdb()
    dep = WorkerDeployment(
        redis_url, model_dir, tmp_path, debounce_seconds=0.3, limits=(20, 25, 900, 60)
    )
    yield dep
    dep.close()


def status(dep: WorkerDeployment) -> dict:
    """``ncindex status --json`` of the deployment, as an operator runs it."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ncindex"), "status", "--json"],
        env=dep.env | {"PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def test_sigterm_mid_burst_then_restart_indexes_every_document_once(
    deployment: WorkerDeployment,
) -> None:
    dep = deployment
    dep.sim.faults.set("webdav", delay=0.2, method="GET")  # each document takes a moment
    dep.start_worker()
    ids = [dep.sim.put_file("alice", f"/Field/report-{i:02}.txt", body(i, 1)) for i in range(DOCS)]
    wait_until(lambda: dep.downloads() >= 10, 120, interval=0.02)
    for i in range(10):  # a second version of ten documents while the burst is worked on
        dep.sim.put_file("alice", f"/Field/report-{i:02}.txt", body(i, 2))
    assert dep.worker is not None
    os.killpg(dep.worker.pid, signal.SIGTERM)
    os.killpg(dep.worker.pid, signal.SIGTERM)  # again: changes nothing
    assert dep.worker.wait(timeout=60) == 0
    assert dep.downloads() < DOCS + 10, "the worker finished before it was stopped"
    # nothing reserved, right away: what the worker held went back to its queue
    assert dep.redis.hlen(dep.settings.names.unacked) == 0
    assert dep.redis.zcard(dep.settings.names.unacked_index) == 0
    assert status(dep)["reserved"] == 0
    waiting = sum(dep.redis.llen(dep.settings.names.queue_list(q)) for q in dep.queues)
    assert waiting > 0, "nothing was left to do after the stop: the burst was not interrupted"

    dep.sim.faults.clear()  # the rest of the burst need not take a moment per document
    dep.start_worker()
    dep.sim.flush_deliveries(timeout=10)
    dep.wait_idle(180)
    dep.stop_worker()
    assert dep.worker is not None and dep.worker.returncode == 0
    assert status(dep)["reserved"] == 0

    expected = {fid: body(i, 2 if i < 10 else 1) for i, fid in enumerate(ids)}
    check_indexed_once(dep.qdrant, dep.settings.dense_model, expected)
    for log in dep.logs:
        assert error_lines(log.read_text(errors="replace")) == [], log
