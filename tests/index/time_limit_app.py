"""The workers' app (:mod:`workers.worker`) for the tests of a reindex step cut off by a time
limit: ``celery -A time_limit_app worker`` with this folder on ``PYTHONPATH``.

The first run of ``ncindex.reindex_model`` in the deployment (marked in Redis) is where the
limit strikes. With ``TIME_LIMIT_TEST_IGNORE_SOFT`` set, that run's pool process ignores
the soft-limit signal (``SIGUSR1``, billiard's ``SIG_SOFT_TIMEOUT``): a step stuck in native
code (an ONNX Runtime call) is not interrupted by it either, so the hard limit kills the
process; unset, the soft limit raises ``SoftTimeLimitExceeded`` in the step. With
``TIME_LIMIT_TEST_STALL_EVERY_RUN`` set, every run of it ignores the soft limit and its build
never ends (as a model load that hangs would), so the hard limit kills each run. With
``TIME_LIMIT_TEST_STALL_INDEX_NODE`` set, the first run of ``ncindex.index_node`` in the
deployment ignores the soft limit and stalls until the hard limit kills its process (a file
whose embedding or extraction is stuck in native code, once); set to ``every``, every run
of it does; set to ``by file``, each file's runs stall as the Redis hash named by
``TIME_LIMIT_TEST_STALL_BY_FILE`` says (file id → ``every native`` or ``every python``; a
file not in it does not stall), so one worker serves files stuck in different ways.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import redis
from celery.signals import task_prerun

from ncindex import names
from ncindex.index.reindex import Reindexer
from workers.worker import app

FIRST_RUN_KEY = "time-limit-test:first-reindex-run"
FIRST_INDEX_RUN_KEY = "time-limit-test:first-index-node-run"


def _stuck_in_python(*_: Any, **__: Any) -> Any:
    """A run stuck in Python code that outlives the soft limit (it ignores ``SIGUSR1``, as
    code that swallows ``SoftTimeLimitExceeded`` does): billiard's ``SIGTERM`` at the hard
    limit ends its process as Python unwinds it."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    time.sleep(3600)


def _stuck_in_native_code(*_: Any, **__: Any) -> Any:
    """A run stuck where no Python signal handler runs (an ONNX Runtime call): neither the
    soft limit's ``SIGUSR1`` nor billiard's ``SIGTERM`` unwinds it, its process is SIGKILLed
    (locks and run counts left as they were)."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(3600)


@task_prerun.connect
def _first_run_outlives_soft_limit(
    task_id: str, task: Any, kwargs: dict[str, Any] | None = None, **_: Any
) -> None:
    if task.name == names.INDEX_NODE and os.environ.get("TIME_LIMIT_TEST_STALL_INDEX_NODE"):
        client = redis.Redis.from_url(app.ncindex_services.settings.redis_url)
        stall = os.environ["TIME_LIMIT_TEST_STALL_INDEX_NODE"]
        if stall == "by file":  # the file's own way, from the hash the test named
            file_id = (kwargs or {}).get("file_id")
            own = client.hget(os.environ["TIME_LIMIT_TEST_STALL_BY_FILE"], str(file_id))
            stall = own.decode() if own else ""
        if not stall:  # and a stall an earlier file's run left in this process is undone
            vars(task.indexer).pop("index_node", None)
            return
        if stall.startswith("every") or client.set(FIRST_INDEX_RUN_KEY, task_id, nx=True):
            stuck = _stuck_in_python if stall.endswith("python") else _stuck_in_native_code
            # the limits' signals are ignored from the run's start, not only once the stall
            # is reached: under load the run's work before it outlasted the 5 s soft limit
            # (seen: SoftTimeLimitExceeded, no hard limit), which parked the file instead
            signal.signal(signal.SIGUSR1, signal.SIG_IGN)
            if stuck is _stuck_in_native_code:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            task.indexer.index_node = stuck
        return
    if task.name == names.REINDEX_MODEL and os.environ.get("TIME_LIMIT_TEST_STALL_EVERY_RUN"):
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        Reindexer.build = lambda *_: time.sleep(3600)  # type: ignore[method-assign,assignment,return-value]
        return
    if task.name != names.REINDEX_MODEL or not os.environ.get("TIME_LIMIT_TEST_IGNORE_SOFT"):
        return
    client = redis.Redis.from_url(app.ncindex_services.settings.redis_url)
    if client.set(FIRST_RUN_KEY, task_id, nx=True):
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
