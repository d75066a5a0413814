"""Celery tasks of reconciliation (DESIGN §7): thin wrappers around :mod:`ncindex.sync.reconcile`.

``ncindex.reconcile_check`` is what beat sends (see :mod:`workers.beat`): it takes a Redis lock
that expires before the next tick and is never released early, so overlapping beats or ticks
delivered late after a backlog run at most one check per period; it then queues one
``ncindex.reconcile_scan`` per account, skipping those already queued.
``ncindex.reconcile_scan`` scans one user and doc type under a per-(user, type) lock; if a scan
of the same user and type is running it returns at once.
"""

from __future__ import annotations

import contextlib
from typing import Any

import redis
import structlog
from celery import Task, shared_task

from ncindex.sync.reconcile import Reconciler, request_scans
from ncindex.telemetry import bind_task_context
from workers.beat import check_lock_seconds

log = structlog.get_logger(__name__)


def reconciler_for(task: Task) -> Reconciler:
    """A :class:`Reconciler` on the app's services, sending tasks through the app."""
    app = task.app
    return Reconciler(app.ncindex_services, app.ncindex_indexer, app)  # type: ignore[attr-defined]


@shared_task(bind=True, name="ncindex.reconcile_check", ignore_result=True)
def reconcile_check(self: Task, doc_type: str) -> int:
    """Queue a scan of ``doc_type`` for every configured account, at most once per period."""
    bind_task_context(self.request.id, self.name, doc_type=doc_type)
    services = self.app.ncindex_services  # type: ignore[attr-defined]
    settings = services.settings
    period = settings.reconcile_periods.get(doc_type, 900)
    lock = services.redis.lock(
        f"ncindex:lock:reconcile-check:{doc_type}", timeout=check_lock_seconds(period)
    )
    if not lock.acquire(blocking=False):
        log.info("reconcile_check_skipped", doc_type=doc_type, reason="locked")
        return 0
    queued = request_scans(self.app, services.redis, list(settings.accounts), [doc_type], period)
    log.info("reconcile_check", doc_type=doc_type, queued=queued)
    return queued


@shared_task(bind=True, name="ncindex.reconcile_scan", ignore_result=True, acks_late=True)
def reconcile_scan(
    self: Task, user: str, doc_type: str, pending_key: str | None = None
) -> dict[str, Any]:
    """Scan ``user``'s documents of ``doc_type`` and enqueue what differs."""
    reconciler = reconciler_for(self)
    client = reconciler.services.redis
    bind_task_context(self.request.id, self.name, user=user, doc_type=doc_type)
    if pending_key:
        client.delete(pending_key)
    lock = client.lock(
        f"ncindex:lock:reconcile:{doc_type}:{user}",
        timeout=reconciler.settings.task_time_limit + 60,
    )
    if not lock.acquire(blocking=False):
        log.info("reconcile_scan_skipped", reason="running")
        return {"skipped": "running"}
    try:
        return reconciler.scan(user, doc_type, apply=True).summary()
    finally:
        with contextlib.suppress(redis.exceptions.LockError):
            lock.release()
