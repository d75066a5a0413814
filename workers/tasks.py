"""Celery tasks: thin wrappers that take ids, call :mod:`ncindex.indexing`, and report.

Every task is idempotent (it re-reads Nextcloud), holds the document's Redis lock, retries
transient errors with capped exponential backoff and jitter, and treats a vanished document
as success.
"""

from __future__ import annotations

from typing import Any

import structlog
from celery import Task, shared_task

from ncindex.errors import TransientError
from ncindex.indexing import Indexer
from ncindex.queueing import clear_debounce

log = structlog.get_logger(__name__)

RETRY = {
    "autoretry_for": (TransientError,),
    "retry_backoff": 2,
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": 8,
    "acks_late": True,
    "reject_on_worker_lost": True,
}


def _start(task: Task, debounce_key: str | None, **fields: Any) -> Indexer:
    indexer: Indexer = task.app.ncindex_indexer  # type: ignore[attr-defined]
    structlog.contextvars.bind_contextvars(task_id=task.request.id, task=task.name, **fields)
    clear_debounce(indexer.services.redis, debounce_key)
    return indexer


@shared_task(bind=True, name="ncindex.index_node", **RETRY)
def index_node(self: Task, user: str, file_id: int, debounce_key: str | None = None) -> str:
    """Index file/note ``file_id`` as seen by ``user`` (or evict it if gone)."""
    indexer = _start(self, debounce_key, user=user, file_id=file_id)
    with indexer.lock(file_id):
        outcome = indexer.index_node(user, file_id)
    log.info("task_done", action=outcome.action, doc_key=outcome.doc_key, embedded=outcome.embedded)
    return outcome.action


@shared_task(bind=True, name="ncindex.evict_node", **RETRY)
def evict_node(
    self: Task, user: str, path: str, file_id: int | None = None, debounce_key: str | None = None
) -> str:
    """Something at ``path`` (file id ``file_id`` if known) was deleted in ``user``'s view."""
    indexer = _start(self, debounce_key, user=user, file_id=file_id, path=path)
    with indexer.lock(file_id if file_id is not None else f"{user}:{path}"):
        outcome = indexer.evict_node(user, path, file_id)
    log.info("task_done", action=outcome.action)
    return outcome.action


@shared_task(bind=True, name="ncindex.move_path", **RETRY)
def move_path(
    self: Task,
    user: str,
    source: str,
    target: str,
    file_id: int | None = None,
    debounce_key: str | None = None,
) -> str:
    """A file or folder moved from ``source`` to ``target`` in ``user``'s view."""
    indexer = _start(self, debounce_key, user=user, source=source, target=target)
    outcome = indexer.move_path(user, source, target, file_id)
    log.info("task_done", action=outcome.action)
    return outcome.action
