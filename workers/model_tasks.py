"""Celery tasks of model changes: thin wrappers around :mod:`ncindex.index.reindex`.

They run where the collections are (a worker; on Qdrant Edge the one process that holds the
store), on the ``index`` queue (:data:`ncindex.names.INDEX`: they embed), one at a time (a
Redis lock). ``ncindex.reindex_model`` builds for at most half the soft time limit per run and
queues itself again until the new model is complete, then switches to it;
``ncindex.reindex_finish`` drops the second model; ``ncindex.reindex_analyzer`` rewrites the
BM25 vectors an older analyzer made, queueing itself again until none is left. A permanent
failure is recorded as the ``failed`` state for ``ncindex reindex`` to show. A step cut off by
a time limit goes back to the queue and resumes (:data:`REQUEUED`).
"""

from __future__ import annotations

import time
from typing import Any

import structlog
from celery import shared_task
from celery.exceptions import Reject, SoftTimeLimitExceeded

from ncindex import names
from ncindex.errors import PermanentError, TransientError
from ncindex.index.locks import hold
from ncindex.index.reindex import Reindexer
from workers.base import NcindexTask
from workers.tasks import RETRY

log = structlog.get_logger(__name__)

#: The reindex tasks' options: :data:`workers.tasks.RETRY`, and a message whose run the hard
#: time limit killed goes back to the queue instead of being acknowledged (Celery
#: ``celery/worker/request.py`` ``Request.on_timeout``: with ``acks_late`` it acknowledges it
#: while ``acks_on_failure_or_timeout``, default on, holds; ``reject_on_worker_lost`` covers a
#: process lost otherwise, not this). Nothing else sends a step again, so the reindex stayed
#: unfinished. A failed run's message is rejected unqueued instead of acknowledged: gone alike.
REQUEUED = RETRY | {"acks_on_failure_or_timeout": False}

#: Runs of one step's message (its first delivery and those a time limit sent back) before the
#: step is recorded ``failed`` instead of run again: a step that can never finish within the
#: time limit (a model load that hangs, a collection drop that never ends) would otherwise go
#: back to the queue for good and hold a worker.
STEP_RUNS = 4

#: How long a message's run count is kept, seconds: well beyond any redelivery.
STEP_RUNS_TTL = 86_400


def _reindexer(task: NcindexTask) -> Reindexer:
    return Reindexer(task.services, task.indexer)


def _locked(task: NcindexTask, reindexer: Reindexer, step: str, model: str, work: Any) -> Any:
    """Run ``work`` under the one reindex lock (:func:`ncindex.index.locks.hold`, expiry above
    the task hard limit, 5 s wait), owned by ``task``'s id: a run of a message whose earlier
    run died holding it (Celery delivers it again, ``reject_on_worker_lost``) takes it over
    and resumes, where it would have waited for the lock to expire, given up, and left the
    reindex stalled. A permanent failure is recorded as ``model``'s ``failed`` state. Returns
    ``work``'s result, or why it did not run or failed. A run that reaches the soft time
    limit puts its message back (:class:`~celery.exceptions.Reject` with ``requeue``): like
    a run the hard limit killed (:data:`REQUEUED`), its next run resumes the step; the
    message's run past :data:`STEP_RUNS` records the ``failed`` state instead, and releases the
    lock the run before it was killed holding (held until its expiry before). A run ended by a
    :class:`~ncindex.errors.TransientError` is not counted: Celery retries it under the same
    task id (``Task.retry``), up to ``max_retries`` of :data:`~workers.tasks.RETRY`."""
    settings = reindexer.settings
    name = settings.names.lock("reindex")
    ttl = settings.task_time_limit + 60
    owner = task.request.id
    runs_key = settings.names.key("reindex", "runs", owner)
    client = reindexer.services.redis
    runs, _ = client.pipeline().incr(runs_key).expire(runs_key, STEP_RUNS_TTL).execute()
    with hold(reindexer.services.redis, name, ttl=ttl, wait=5, owner=owner) as held:
        if int(runs) > STEP_RUNS:  # the lock the last run died holding is released on exit
            error = f"the {step} step was cut off by the task time limit {STEP_RUNS} times"
            reindexer.record(model, "failed", error=error)
            log.warning("reindex_failed", step=step, error=error)
            return {"failed": error}
        if not held:
            log.info("reindex_step_skipped", step=step, reason="another step runs")
            return {"skipped": "another reindex step runs"}
        try:
            return work()
        except PermanentError as exc:
            reindexer.record(model, "failed", error=str(exc))
            log.warning("reindex_failed", step=step, error=str(exc))
            return {"failed": str(exc)}
        except TransientError:  # retried (autoretry_for, same task id): not cut off
            client.decr(runs_key)
            raise
        except SoftTimeLimitExceeded as exc:
            log.warning("reindex_step_requeued", step=step, reason="soft time limit")
            raise Reject(exc, requeue=True) from exc


@shared_task(bind=True, base=NcindexTask, name=names.REINDEX_MODEL, ignore_result=True, **REQUEUED)
def reindex_model(self: NcindexTask, model: str) -> dict[str, Any]:
    """Build ``model``'s collection (resuming), then switch to it when complete."""
    reindexer = _reindexer(self)

    def work() -> dict[str, Any]:
        reindexer.start(model)
        deadline = time.monotonic() + reindexer.settings.task_soft_time_limit / 2
        report = reindexer.build(deadline)
        if report.remaining:
            self.apply_async(kwargs={"model": model}, queue=names.INDEX)
            return {"remaining": report.remaining}
        return {"switched": reindexer.switch().active}

    return _locked(self, reindexer, "build", model, work)


@shared_task(
    bind=True, base=NcindexTask, name=names.REINDEX_ANALYZER, ignore_result=True, **REQUEUED
)
def reindex_analyzer(self: NcindexTask) -> dict[str, Any]:
    """Rewrite the BM25 vectors of the current analyzer's older versions (resuming)."""
    reindexer = _reindexer(self)

    def work() -> dict[str, Any]:
        deadline = time.monotonic() + reindexer.settings.task_soft_time_limit / 2
        report = reindexer.reanalyze(deadline)
        if report.remaining:
            self.apply_async(queue=names.INDEX)
        return {"rewritten": report.copied, "remaining": report.remaining}

    return _locked(self, reindexer, "reanalyze", "", work)


@shared_task(bind=True, base=NcindexTask, name=names.REINDEX_FINISH, ignore_result=True, **REQUEUED)
def reindex_finish(self: NcindexTask) -> dict[str, Any]:
    """Stop mirroring and drop the second model's collection."""
    reindexer = _reindexer(self)
    return _locked(self, reindexer, "finish", "", lambda: {"dropped": reindexer.finish()})
