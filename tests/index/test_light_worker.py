"""A move processed by a worker of the light group alone (``-Q ingest,evict,reconcile``, as
the chart's ``light`` group, the Procfile's ``worker_light`` and compose's ``worker-light``
run it) loads no embedding model: the re-path writes payloads only, and what may embed — a
moved file the index did not hold — goes to ``ncindex.index_node`` on the ``index`` queue,
which the index worker then runs.

Before, ``ncindex.move_path`` indexed such a file in the light worker, and any read of the
store there loaded the live dense model (``LiveModels`` loaded it with every read of the
pointers): a light pool process peaked at 394-512 MB on a move against ~141 MB on its other
tasks, and four of them under the group's 1 GiB limit could be OOM-killed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import redis

from ncindex import names
from ncindex.store import model_slug
from ncindex.store.qdrant_edge import QdrantEdgeStore
from support import WorkerDeployment, check_indexed_once, wait_until

RUNS_KEY = "light-test:runs"  # light_app.RUNS_KEY
LIGHT = (names.INGEST, names.EVICT, names.RECONCILE)


def test_a_move_in_a_light_only_worker_loads_no_model_and_hands_embedding_on(
    redis_url: str, model_dir: Path, tmp_path: Path
) -> None:
    """/Docs/kept.txt is indexed by a worker of every queue; /Drafts/new.txt is created with
    its events dropped (not indexed). With a prefork light-only worker, both are moved into
    /Archive: its two ``move_path`` runs load no dense model (before: one each), kept.txt's
    payload has its new path at once, and new.txt waits on the ``index`` queue as an
    ``ncindex.index_node`` (before: indexed in the light worker, nothing queued). An index
    worker then indexes it there; both files are indexed once, with their own text."""
    redis.Redis.from_url(redis_url).flushdb()
    dep = WorkerDeployment(
        redis_url, model_dir, tmp_path, debounce_seconds=0.3, limits=(60, 90, 180, 120),
        queues=(*LIGHT, names.INDEX), pool="prefork", app="light_app",
    )  # fmt: skip
    here = str(Path(__file__).parent)
    dep.env["PYTHONPATH"] = os.pathsep.join([here, dep.env.get("PYTHONPATH", "")])
    texts = {
        "kept": "The ferry to the outer isles leaves at seven when the sea allows.",
        "new": "Lobster pots are hauled on Tuesdays and mended on Sundays.",
    }
    try:
        dep.start_worker()
        kept = dep.sim.put_file("alice", "/Docs/kept.txt", texts["kept"])
        dep.sim.mkdir("alice", "/Archive")
        dep.sim.drop_rate = 1.0
        new = dep.sim.put_file("alice", "/Drafts/new.txt", texts["new"])
        dep.sim.drop_rate = 0.0
        dep.sim.flush_deliveries(timeout=10)
        dep.wait_idle(120)
        dep.stop_worker()

        dep.queues = LIGHT
        dep.start_worker()
        dep.sim.move("alice", "/Docs/kept.txt", "/Archive/kept.txt")
        dep.sim.move("alice", "/Drafts/new.txt", "/Archive/new.txt")
        dep.sim.flush_deliveries(timeout=10)
        runs = wait_until(lambda: (moves := dep.redis.lrange(RUNS_KEY, 0, -1))[1:] and moves, 60)
        queued = [
            json.loads(m)
            for m in dep.redis.lrange(dep.settings.names.queue_list(names.INDEX), 0, -1)
        ]
        dep.stop_worker()

        dep.queues = (names.INDEX,)
        dep.start_worker()
        dep.wait_idle(120)
        dep.stop_worker()
    finally:
        dep.close()
    runs = [json.loads(run) for run in runs]
    assert [run["loads"] for run in runs] == [0, 0], runs
    assert [m["headers"]["task"] for m in queued] == [names.INDEX_NODE], queued
    check_indexed_once(
        dep.qdrant, dep.settings.dense_model, {kept: texts["kept"], new: texts["new"]}
    )
    store = QdrantEdgeStore(dep.qdrant, model_slug(dep.settings.dense_model))
    try:
        paths = {
            fid: store.document_points(f"file:{fid}")[0].payload["paths"] for fid in (kept, new)
        }
    finally:
        store.close()
    assert paths == {kept: {"alice": "/Archive/kept.txt"}, new: {"alice": "/Archive/new.txt"}}
