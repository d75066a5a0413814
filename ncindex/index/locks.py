"""The one Redis lock helper of every task (DESIGN §6): a document's indexing, the reconcile
scans, the model changes.

:func:`hold` takes a named lock (a key of :meth:`ncindex.names.Names.lock`) with an expiry and
a wait, and says whether it got it; :func:`document_lock` is the lock the indexing operations
and ``ncindex reindex`` hold for one document, built on it, and :func:`document_locks` the
same locks of many documents that are free now (a task indexing several at once).

A lock lost while held (expired, or Redis flushed or restarted) is logged on release, never
raised: the block's own exception, or its finished work, is what the caller reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager

import redis
import structlog
from redis.lock import Lock

from ncindex.documents import DocRef
from ncindex.errors import LockBusy
from ncindex.runtime import Services
from ncindex.sources.registry import NODE_TYPES

log = structlog.get_logger(__name__)


@contextmanager
def hold(
    client: redis.Redis, name: str, *, ttl: float, wait: float, owner: str | None = None
) -> Iterator[bool]:
    """Take the Redis lock ``name`` (it expires ``ttl`` seconds after it is taken); yields
    ``True`` once held, released on exit, or ``False`` when another holder still held it after
    ``wait`` seconds (``0``: do not wait) — then nothing is released. Redis errors while taking
    it are raised (``redis.RedisError``).

    ``owner`` (a Celery task id) is stored as the lock's value, and a lock found held under
    the same owner is taken over at once (its expiry starts again): an earlier run of the
    same task took it and never released it — its worker died, and Celery delivered the
    message again, which keeps its task id."""
    lock = client.lock(name, timeout=ttl)
    held = (owner is not None and _take_over(lock, owner)) or lock.acquire(
        blocking=wait > 0, blocking_timeout=wait if wait > 0 else None, token=owner
    )
    try:
        yield bool(held)
    finally:
        if held:
            try:
                lock.release()
            except redis.exceptions.LockError as exc:
                log.warning("lock_lost", lock=name, error=str(exc))


def _take_over(lock: Lock, owner: str) -> bool:
    """Hold ``lock`` if it is held under ``owner`` now (one atomic check-and-extend, redis-py's
    ``Lock.reacquire``); ``False`` when it is free or another's."""
    lock.local.token = owner.encode()
    try:
        lock.reacquire()
    except redis.exceptions.LockNotOwnedError:
        lock.local.token = None
        return False
    log.warning("lock_taken_over", lock=lock.name, owner=owner)
    return True


def document_key(subject: DocRef | int | str) -> int | str:
    """What a document's lock is named after: a note or file locks its file id (either type,
    one file), any other :class:`DocRef` its ``doc_key``; an ``int`` or ``str`` is taken as
    that already (a file id, a ``doc_key``, or ``"<user>:<path>"`` for a path without an id)."""
    if isinstance(subject, DocRef):
        return subject.doc_id if subject.doc_type in NODE_TYPES else subject.key
    return subject


@contextmanager
def document_lock(
    services: Services, subject: DocRef | int | str, *, wait: float = 5.0
) -> Iterator[None]:
    """The per-document lock (``<namespace>:lock:node:<key>``, :func:`document_key`, expiry
    ``lock_ttl`` seconds, above the task hard limit); raises :class:`LockBusy` when not taken
    within ``wait`` seconds. While it is held, this thread keeps the model view read when it
    was taken (:meth:`~ncindex.embedding.live_models.LiveModels.pinned`): a document is
    embedded and written for one model, and ``ncindex reindex``, copying under the same lock,
    sees it whole."""
    key = document_key(subject)
    name = services.settings.names.lock("node", key)
    with hold(services.redis, name, ttl=services.settings.lock_ttl, wait=wait) as held:
        if not held:
            raise LockBusy(f"node {key} is locked")
        with services.models.pinned():
            yield


@contextmanager
def document_locks(services: Services, subjects: Iterable[int | str]) -> Iterator[set[int | str]]:
    """The :func:`document_lock` of each of ``subjects`` (file ids or doc keys) that is
    free now, taken without waiting; yields the subjects held (the others are another run's:
    the caller leaves them to a task of their own). The model view is pinned once for all
    of them. Redis errors while taking them are raised (those taken are released)."""
    held: set[int | str] = set()
    with ExitStack() as stack:
        for subject in subjects:
            name = services.settings.names.lock("node", document_key(subject))
            lock = hold(services.redis, name, ttl=services.settings.lock_ttl, wait=0)
            if stack.enter_context(lock):
                held.add(subject)
        stack.enter_context(services.models.pinned())
        yield held
