"""The base class of every ncindex Celery task, in the manner of pypi/warehouse's
``WarehouseTask``: one place for what each task did by hand before.

- typed access to the process's services: :attr:`NcindexTask.services` and
  :attr:`NcindexTask.indexer` (built once per worker by :func:`workers.celery_app.create_celery`);
- the log context bound for the task's lifetime: ``task_id``, ``task`` and the identifying
  keyword arguments (:data:`LOG_FIELDS`), on every line it logs;
- timing and outcome counts: ``ncindex_tasks_total{task, outcome}`` and
  ``ncindex_task_seconds{task}`` (:mod:`ncindex.telemetry`), and one ``task_finished`` line;
- retry classification: an outcome is ``retry`` for a :class:`~ncindex.errors.TransientError`
  (what ``autoretry_for`` retries: :data:`workers.tasks.RETRY`) or Celery's ``Retry``,
  ``failed`` for anything else raised, ``ok`` otherwise.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import structlog
from celery import Task
from celery.exceptions import Retry

from ncindex.errors import TransientError
from ncindex.telemetry import TASK_SECONDS, TASKS, bind_task_context

if TYPE_CHECKING:
    from ncindex.index.indexing import Indexer
    from ncindex.runtime import Services

log = structlog.get_logger(__name__)

#: Keyword arguments bound to a task's log lines when it has them (ids, never content).
LOG_FIELDS = (
    "user",
    "file_id",
    "path",
    "source",
    "target",
    "doc_type",
    "doc_id",
    "feed_id",
    "model",
)


class NcindexTask(Task):
    """Base of the ncindex tasks (``@shared_task(bind=True, base=NcindexTask, …)``)."""

    @property
    def services(self) -> Services:
        """The worker's :class:`~ncindex.runtime.Services`."""
        services: Services = self.app.ncindex_services
        return services

    @property
    def indexer(self) -> Indexer:
        """The worker's :class:`~ncindex.index.indexing.Indexer` (on :attr:`services`)."""
        indexer: Indexer = self.app.ncindex_indexer
        return indexer

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fields = {k: kwargs[k] for k in LOG_FIELDS if k in kwargs}
        bind_task_context(self.request.id, self.name, **fields)
        started = time.monotonic()
        outcome = "failed"
        try:
            result = super().__call__(*args, **kwargs)
            outcome = "ok"
            return result
        except (Retry, TransientError):
            outcome = "retry"
            raise
        finally:
            seconds = time.monotonic() - started
            TASKS.labels(self.name, outcome).inc()
            TASK_SECONDS.labels(self.name).observe(seconds)
            log.info("task_finished", outcome=outcome, seconds=round(seconds, 3))
