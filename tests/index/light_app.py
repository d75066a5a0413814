"""The workers' app (:mod:`workers.worker`) for the tests of the light worker group:
``celery -A light_app worker`` with this folder on ``PYTHONPATH``.

Each run of ``ncindex.move_path`` appends a JSON line to the Redis list :data:`RUNS_KEY`
after it: ``pid`` (the pool process that ran it), ``maxrss_kib`` (its peak resident size so
far, ``getrusage``'s ``ru_maxrss``, the figure billiard compares with
``worker_max_memory_per_child``) and ``loads``: how many times a dense model was loaded in
that process so far (each :class:`~ncindex.embedding.embedder.Embedder` load that found it
not loaded yet is counted).
"""

from __future__ import annotations

import json
import os
import resource
from typing import Any

import redis
from celery.signals import task_postrun

from ncindex import names
from ncindex.embedding.embedder import Embedder
from workers.worker import app

RUNS_KEY = "light-test:runs"
_loads: list[str] = []
_load_dense = Embedder._load_dense


def _counted_load(self: Embedder) -> Any:
    if not self.loaded:
        _loads.append(self.model_name)
    return _load_dense(self)


Embedder._load_dense = _counted_load  # type: ignore[method-assign]


@task_postrun.connect
def _note_run(task: Any, **_: Any) -> None:
    if task.name != names.MOVE_PATH:
        return
    run = {
        "pid": os.getpid(),
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "loads": len(_loads),
    }
    client = redis.Redis.from_url(app.ncindex_services.settings.redis_url)
    client.rpush(RUNS_KEY, json.dumps(run))
