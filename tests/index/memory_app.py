"""The workers' app (:mod:`workers.worker`) for the tests of a pool process recycled past
``NCINDEX_WORKER_MAX_MEMORY_PER_CHILD``: ``celery -A memory_app worker`` with this folder on
``PYTHONPATH``.

Each run of ``ncindex.index_node`` appends a JSON line to the Redis list :data:`RUNS_KEY`
after it: ``file_id``, ``pid`` (the pool process that ran it) and ``maxrss_kib``, its peak
resident size so far (``getrusage``'s ``ru_maxrss``, the figure billiard compares with the
bound). With ``MEMORY_TEST_BALLAST_MIB`` set, the run of the file whose id is in the Redis
key :data:`BALLAST_KEY` first writes that many MiB and frees them, as a document whose
extraction took memory for a moment does: its peak stays, its present size falls back.
"""

from __future__ import annotations

import json
import os
import resource
from typing import Any

import redis
from celery.signals import task_postrun, task_prerun

from ncindex import names
from workers.worker import app

RUNS_KEY = "memory-test:runs"
BALLAST_KEY = "memory-test:ballast-file"


def _redis() -> redis.Redis:
    return redis.Redis.from_url(app.ncindex_services.settings.redis_url)


@task_prerun.connect
def _ballast(task: Any, kwargs: dict[str, Any] | None = None, **_: Any) -> None:
    mib = os.environ.get("MEMORY_TEST_BALLAST_MIB")
    if task.name != names.INDEX_NODE or not mib:
        return
    ballast = _redis().get(BALLAST_KEY)
    if ballast is not None and int(ballast) == (kwargs or {}).get("file_id"):
        block = bytearray(b"\x01") * (int(mib) << 20)  # every page written: resident
        del block  # returned to the system (an mmap'd block): only the peak is left


@task_postrun.connect
def _note_run(task: Any, kwargs: dict[str, Any] | None = None, **_: Any) -> None:
    if task.name != names.INDEX_NODE:
        return
    run = {
        "file_id": (kwargs or {}).get("file_id"),
        "pid": os.getpid(),
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    _redis().rpush(RUNS_KEY, json.dumps(run))
