"""A prefork pool process whose peak resident size passed ``NCINDEX_WORKER_MAX_MEMORY_PER_CHILD``
is replaced after its task, and the task's work is kept.

Extraction can leave memory behind in a pool process (libxml2's per-thread dictionary keeps
every element name it parsed); Celery's ``worker_max_memory_per_child`` bounds that. billiard
checks it in the pool process after each task, once the task's result is sent to the main
process (``billiard/pool.py`` ``Worker.workloop``: ``mem_rss()``, ``ru_maxrss``), so the
message is acknowledged as done and the process then exits to be replaced.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import redis

from support import WorkerDeployment, check_indexed_once

#: The bound of the test, KiB: above a pool process that indexed a short text file (390 MB
#: peak here), below one that also wrote the ballast.
BOUND_KIB = 700_000
BALLAST_MIB = 600
RUNS_KEY = "memory-test:runs"  # memory_app.RUNS_KEY
BALLAST_KEY = "memory-test:ballast-file"  # memory_app.BALLAST_KEY


def test_a_pool_process_past_the_memory_bound_is_replaced_and_its_task_kept(
    redis_url: str, model_dir: Path, tmp_path: Path
) -> None:
    """Three files indexed one after the other on a prefork worker of one pool process; the
    second file's run writes :data:`BALLAST_MIB` and frees it (its peak passes the bound, its
    present size falls back). The third file is indexed by another process than the second
    (before, with no bound, by the same one: the test failed there), the first and second by
    one; all three are indexed exactly once (the second's run was not lost nor run again)."""
    redis.Redis.from_url(redis_url).flushdb()
    dep = WorkerDeployment(
        redis_url, model_dir, tmp_path, debounce_seconds=0.3, limits=(60, 90, 180, 120),
        pool="prefork", app="memory_app",
    )  # fmt: skip
    here = str(Path(__file__).parent)
    dep.env["PYTHONPATH"] = os.pathsep.join([here, dep.env.get("PYTHONPATH", "")])
    dep.env["NCINDEX_WORKER_MAX_MEMORY_PER_CHILD"] = str(BOUND_KIB)
    dep.env["MEMORY_TEST_BALLAST_MIB"] = str(BALLAST_MIB)
    dep.env["NCINDEX_INDEX_BATCH_DOCS"] = "1"  # every file its own ncindex.index_node
    texts = {
        "/Tides.txt": "The lighthouse keeper logs the tides at dawn and dusk.",
        "/Gulls.txt": "Herring gulls nest on the north cliff from April.",
        "/Fog.txt": "The foghorn sounds twice a minute when visibility drops.",
    }
    ids: dict[str, int] = {}
    try:
        dep.start_worker()
        for path, text in texts.items():
            # created with its events dropped, then written again: one NodeWritten, one run
            # (a new file's NodeCreated and NodeWritten are two runs unless they coalesce)
            dep.sim.drop_rate = 1.0
            ids[path] = dep.sim.put_file("alice", path, text)
            dep.sim.drop_rate = 0.0
            if path == "/Gulls.txt":
                dep.redis.set(BALLAST_KEY, ids[path])
            dep.sim.put_file("alice", path, text)
            dep.sim.flush_deliveries(timeout=10)
            dep.wait_idle(120)
        runs = [json.loads(run) for run in dep.redis.lrange(RUNS_KEY, 0, -1)]
        dep.stop_worker()
    finally:
        dep.close()
    pids = {run["file_id"]: run["pid"] for run in runs}
    assert len(runs) == 3, runs  # one run each: the task past the bound was not run again
    tides, gulls, fog = (pids[ids[path]] for path in texts)
    assert tides == gulls, runs
    assert gulls != fog, runs
    peaks = {run["file_id"]: run["maxrss_kib"] for run in runs}
    assert peaks[ids["/Tides.txt"]] < BOUND_KIB < peaks[ids["/Gulls.txt"]], runs
    lines = [json.loads(line) for line in dep.logs[0].read_bytes().splitlines() if line[:1] == b"{"]
    recycled = [line for line in lines if line["event"] == "pool_process_recycled"]
    assert [(line["pid"], line["peak_kib"] > BOUND_KIB) for line in recycled] == [(gulls, True)]
    check_indexed_once(dep.qdrant, dep.settings.dense_model, {ids[p]: t for p, t in texts.items()})
