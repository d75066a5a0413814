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
  ``failed`` for anything else raised, ``ok`` otherwise;
- outages (:meth:`NcindexTask.retry`): a retry waits at least the answer's ``Retry-After``
  (Nextcloud's maintenance mode sends 120 s), and a task keeps retrying until
  :data:`OUTAGE_PATIENCE_SECONDS` have passed since its first failure, whatever its retry
  count; one that still gives up on an unavailable Nextcloud is kept
  (:func:`~ncindex.ingest.queueing.park_for_outage`) and sent again as soon as Nextcloud
  answers: after the next task that succeeds, or by ``ncindex.outage_requeue`` (beat, every
  minute), which asks ``/status.php``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import redis
import structlog
from celery import Task
from celery.exceptions import Retry
from celery.utils.time import get_exponential_backoff_interval

from ncindex.errors import BrokerUnavailable, NextcloudUnavailable, TransientError
from ncindex.ingest.queueing import park_for_outage, requeue_parked
from ncindex.telemetry import TASK_SECONDS, TASKS, bind_task_context

if TYPE_CHECKING:
    from ncindex.index.indexing import Indexer
    from ncindex.runtime import Services

log = structlog.get_logger(__name__)

OUTAGE_PATIENCE_SECONDS = 900
"""A task retrying transient failures gives up no sooner than this after its first one (the
issue's 15 minutes: a Nextcloud upgrade in maintenance mode takes minutes)."""

#: Keyword arguments bound to a task's log lines when it has them (ids, never content).
LOG_FIELDS = (
    "user",
    "file_id",
    "path",
    "source",
    "target",
    "doc_type",
    "doc_id",
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
            self._requeue_after_outage()
            return result
        except (Retry, TransientError):
            outcome = "retry"
            raise
        finally:
            seconds = time.monotonic() - started
            TASKS.labels(self.name, outcome).inc()
            TASK_SECONDS.labels(self.name).observe(seconds)
            log.info("task_finished", outcome=outcome, seconds=round(seconds, 3))

    def retry(
        self,
        args: Any = None,
        kwargs: Any = None,
        exc: Exception | None = None,
        throw: bool = True,
        eta: Any = None,
        countdown: float | None = None,
        max_retries: int | None = None,
        **options: Any,
    ) -> Any:
        """Celery's ``retry``, patient with outages: the countdown is at least the failure's
        ``Retry-After``; while :data:`OUTAGE_PATIENCE_SECONDS` have not passed since the first
        failure the retry count does not end the task; a task that gives up on an
        unavailable Nextcloud is parked to be sent again once it answers."""
        if isinstance(exc, TransientError) and self.request.id:
            if isinstance(exc, NextcloudUnavailable) and exc.retry_after is not None:
                countdown = max(countdown or 0.0, exc.retry_after)
            elapsed = time.time() - self._first_failure()
            limit = self.max_retries if max_retries is None else max_retries
            if elapsed + (countdown or 0.0) < OUTAGE_PATIENCE_SECONDS:
                max_retries = self.request.retries + 1  # not the end yet
            elif limit is not None and self.request.retries >= limit:
                self._give_up(exc, args, kwargs)
        return super().retry(args, kwargs, exc, throw, eta, countdown, max_retries, **options)

    def retry_part(self, exc: TransientError, kwargs: dict[str, Any]) -> Retry:
        """Retry ``exc`` as ``autoretry_for`` would (this task's ``retry_backoff``,
        ``retry_backoff_max`` and ``retry_jitter``; through :meth:`retry`, so outages are
        waited out and parked alike), but with ``kwargs``: the part of the call that
        ``exc`` stopped, when the rest is done. Raises ``Retry`` (or ``exc`` once the
        retries are spent); the return type lets callers write ``raise task.retry_part(…)``."""
        countdown = get_exponential_backoff_interval(
            factor=int(max(1.0, float(self.retry_backoff))),
            retries=self.request.retries,
            maximum=int(self.retry_backoff_max),
            full_jitter=bool(self.retry_jitter),
        )
        retry: Retry = self.retry(kwargs=kwargs, exc=exc, countdown=countdown)
        return retry

    def _first_failure(self) -> float:
        """Unix time of this task's first transient failure (kept in Redis for a day)."""
        client = self.services.redis
        key = self.services.settings.names.retrying_since(str(self.request.id))
        client.set(key, repr(time.time()), nx=True, ex=86_400)
        raw = client.get(key)
        return float(raw) if raw else time.time()

    def _give_up(self, exc: BaseException, args: Any, kwargs: Any) -> None:
        """The last retry failed: keep the task for :func:`requeue_parked` when Nextcloud was
        the one unavailable. Once a run: when :meth:`retry_part` gave up with the part of the
        call still to do, the error it raises reaches Celery's ``autoretry_for``, whose
        :meth:`retry` gives up again with the whole call, which must not replace the part."""
        if not isinstance(exc, NextcloudUnavailable) or getattr(self.request, "parked", False):
            return
        call = dict(self.request.kwargs or {}) if kwargs is None else dict(kwargs)
        if args or self.request.args:
            return  # every ncindex task is sent with keyword arguments only
        queue = (self.request.delivery_info or {}).get("routing_key")
        park_for_outage(
            self.services.redis,
            self.services.settings.names,
            str(self.request.id),
            self.name,
            call,
            queue,
        )
        self.request.parked = True
        log.warning("outage_parked", error=str(exc))

    def _requeue_after_outage(self) -> None:
        """After a task succeeded (Nextcloud answers again, for most tasks), send what gave
        up during an outage; a failure here never fails the task."""
        try:
            names = self.services.settings.names
            if self.services.redis.hlen(names.outage_parked):
                requeue_parked(self.app, self.services.redis, names)
        except (BrokerUnavailable, redis.exceptions.RedisError) as exc:
            log.warning("outage_requeue_failed", error=str(exc))
