"""Celery tasks: thin wrappers that take ids, call :mod:`ncindex.index.indexing`, and report.

Every task is idempotent (it re-reads Nextcloud), holds the document's Redis lock, retries
transient errors with capped exponential backoff and jitter (``RETRY``: delays drawn up to
2, 4, 8 … seconds, capped at 300 s, at most 8 retries), and treats a vanished document as
success.

Poison documents (DESIGN §6): while holding the lock, a task counts a delivery of its document
in Redis (:class:`ncindex.index.deadletter.Deliveries`) and forgets it when it ends. A document
whose earlier ``dead_letter_after`` runs never ended (each killed its worker) is parked in the dead
letter instead of being processed again; so is one that ran past the soft time limit. It stays
parked until its etag changes. A task of many files (``ncindex.index_nodes``) counts its own
deliveries: one whose earlier delivery never ended hands each file to a task of its own, which
counts and parks it alone.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis
import structlog
from celery import shared_task
from celery.exceptions import Retry, SoftTimeLimitExceeded

from ncindex import names
from ncindex.documents import DocRef, DocType
from ncindex.errors import BrokerUnavailable, LockBusy, NextcloudAuthError, TransientError
from ncindex.index.deadletter import Deliveries, node_subject
from ncindex.index.indexing import BatchResult, Indexer
from ncindex.index.locks import document_locks
from ncindex.index.steps import Outcome
from ncindex.ingest.events import index_folder, resolve_node
from ncindex.ingest.events import index_node as index_node_action
from ncindex.ingest.queueing import PUBLISH_RETRY, clear_debounce, enqueue
from ncindex.progress import FailingDocuments, Progress
from ncindex.settings import Settings
from ncindex.sources.registry import SOURCES
from ncindex.sync.reconcile import forget_tried
from ncindex.sync.shares import note_move
from workers.base import NcindexTask

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
#: The options of the tasks that count their runs (:func:`guarded`, :func:`_index_batch`):
#: :data:`RETRY`, and a message whose run the hard time limit killed goes back to the queue
#: instead of being acknowledged (Celery 5.7 rejects it with ``requeue``, so it is back at
#: once; 5.5, which pyproject also admits, leaves it unacknowledged until the visibility
#: timeout). Celery acknowledges it
#: while ``acks_on_failure_or_timeout`` holds, its default even with ``acks_late`` (celery
#: ``celery/worker/request.py`` ``Request.on_timeout``; ``reject_on_worker_lost`` covers a
#: process lost otherwise, not this), so the document's change was dropped: not indexed, no
#: failure recorded, left pending. The killed run never ends its count, so a document the
#: limit always cuts off is parked after ``dead_letter_after`` runs, as one that kills its
#: worker is. A failed run's message is rejected unqueued instead of acknowledged: gone alike.
COUNTED = RETRY | {"acks_on_failure_or_timeout": False}


def _start(task: NcindexTask, debounce_key: str | None) -> Indexer:
    """The worker's indexer, once the task's debounce key (if any) is deleted: an event
    arriving from now on schedules a fresh run."""
    indexer = task.indexer
    clear_debounce(indexer.services.redis, indexer.settings.names, debounce_key)
    return indexer


#: What a task does for a document, given a callback to note the version (etag) it works on.
Work = Callable[[Callable[[str], None]], Outcome]
#: Parks a document: ``park(reason, runs, etag)``; with ``etag`` (the version the unfinished
#: runs noted) it parks only while the document is still that version, else returns ``None``.
Park = Callable[[str, int, str | None], Outcome | None]


def _deliveries(indexer: Indexer) -> Deliveries:
    """The run counts of the worker's Redis; a count lives ten lock lifetimes (at least an
    hour) after its run started."""
    ttl = max(indexer.settings.lock_ttl * 10, 3600)
    return Deliveries(indexer.services.redis, indexer.settings.names, ttl=ttl)


def guarded(indexer: Indexer, subject: str, work: Work, park: Park) -> Outcome:
    """Run ``work`` for ``subject`` with its run counted (caller holds the lock).

    When ``dead_letter_after`` earlier runs never ended, ``park(reason, lost, etag)`` is
    called with the version they noted and its outcome returned — unless the document has
    changed since (``park`` returns ``None``): then the count starts again from this run and
    ``work`` runs, so a fixed version is not parked for its predecessor's crashes. When
    ``work`` passes the soft time limit, ``park(reason, runs, None)`` parks what is current.

    The run's count is forgotten when it ends by returning or raising an ``Exception``; one
    ended by another ``BaseException`` — ``SystemExit`` from the ``SIGTERM`` billiard sends
    at the hard time limit, which Python unwinds — keeps it, as a process killed outright
    does: its message comes back (:data:`COUNTED`), and a document the limit always cuts
    off is parked instead of being run again for good.
    """
    deliveries = _deliveries(indexer)
    count, noted = deliveries.start(subject)
    with _counted(deliveries, subject):
        lost = count - 1
        if lost >= indexer.settings.dead_letter_after:
            outcome = park(f"worker lost {lost} times while processing it", lost, noted)
            if outcome is not None:
                return outcome
            log.info("poison_version_replaced", subject=subject, lost=lost, etag=noted)
            deliveries.restart(subject)
        try:
            return work(lambda etag: deliveries.working_on(subject, etag))
        except SoftTimeLimitExceeded:
            limit = indexer.settings.task_soft_time_limit
            parked = park(f"processing exceeded the soft time limit of {limit} s", count, None)
            assert parked is not None  # without an etag, what is current is parked
            return parked


@contextmanager
def _counted(deliveries: Deliveries, subject: str) -> Iterator[None]:
    """Forget ``subject``'s run count when the block returns or raises an ``Exception``;
    keep it when a ``BaseException`` that is none (``SystemExit``, ``KeyboardInterrupt``)
    cuts the run off: the run did not end, it was killed (:func:`guarded`)."""
    try:
        yield
    except Exception:
        deliveries.finish(subject)
        raise
    else:
        deliveries.finish(subject)


@contextmanager
def refused_account(indexer: Indexer, user: str) -> Iterator[None]:
    """Inside the block, a 401 for ``user``'s account is recorded (:mod:`ncindex.accounts`:
    reported by ``/readyz``, ``ncindex status`` and a gauge) and re-raised: the error is
    permanent, so the task ends without a retry. Such a task (or one held back) indexed
    nothing, so the versions ``user``'s scans sent tasks for are forgotten
    (:func:`~ncindex.sync.reconcile.forget_tried`): the next scan that gets through sends them
    again."""
    try:
        yield
    except NextcloudAuthError as exc:
        indexer.services.account_refused(user, exc)
        forget_tried(indexer.services.redis, indexer.settings.names, user)
        raise


def _walk_folder(task: NcindexTask, user: str, outcome: Outcome) -> None:
    """A ``folder`` outcome (a folder created, copied, restored or moved into view): queue
    ``ncindex.index_folder`` for what lies below it (:mod:`ncindex.sync.subtree`)."""
    if outcome.action != "folder" or outcome.path is None:
        return
    settings = task.indexer.settings
    enqueue(
        task.app,
        task.indexer.services.redis,
        [index_folder(user, [outcome.path])],
        settings.debounce_seconds,
        keys=settings.names,
    )


def _ask_viewers(task: NcindexTask, user: str, file_id: int, outcome: Outcome) -> None:
    """An outcome with ``viewers`` (a document new to the index, or a node moved, that other
    accounts may see too): queue ``ncindex.resolve_node`` to ask Nextcloud which of them do
    and index it for them (a ``folder`` outcome names the folder's path in ``user``'s view,
    so that those who do not see it lose what they held below it)."""
    if not outcome.viewers:
        return
    settings = task.indexer.settings
    folder = (user, outcome.path) if outcome.action == "folder" and outcome.path else None
    enqueue(
        task.app,
        task.indexer.services.redis,
        [resolve_node(file_id, outcome.viewers, folder)],
        settings.debounce_seconds,
        keys=settings.names,
    )


@contextmanager
def tracked(
    task: NcindexTask, user: str, subject: str, kwargs: dict[str, Any]
) -> Iterator[list[Outcome]]:
    """Record how the run of ``task`` for ``subject`` as ``user`` ends
    (:mod:`ncindex.progress`): the block appends its :class:`Outcome`; an outcome ends the
    document's pending entry, counts in the throughput and its skip rule, and clears its
    failures; an exception is counted as a failure of the document (``retrying`` while Celery
    will retry it: then it stays pending) — except :class:`LockBusy`, another run holding the
    document, which only ends the pending entry once no retry follows. A Redis error here is
    only logged."""
    indexer = task.indexer
    keys = indexer.settings.names
    client = indexer.services.redis
    done: list[Outcome] = []
    try:
        yield done
    except Exception as exc:
        retrying = isinstance(exc, (TransientError, Retry)) and (
            task.request.retries < (task.max_retries or 0)
        )
        with _quiet("failure_not_recorded"):
            if not isinstance(exc, LockBusy):
                FailingDocuments(client, keys).failed(
                    subject, user, task.name, kwargs, exc, retrying=retrying
                )
            if not retrying:
                Progress(client, keys).finished(user, subject, "failed")
        raise
    with _quiet("progress_not_recorded"):
        for outcome in done:
            Progress(client, keys).finished(
                user,
                subject,
                outcome.action,
                outcome.embedded,
                outcome.reason,
                clear_failures=True,
                truncated=outcome.truncated,
                path=outcome.path if outcome.action == "ineligible" else None,
            )
        if not done:
            FailingDocuments(client, keys).clear(subject)


@contextmanager
def _quiet(event: str) -> Iterator[None]:
    """Log, never raise, a Redis error: what shows progress must not fail a task."""
    try:
        yield
    except redis.RedisError as exc:
        log.warning(event, error=str(exc))


def _done(outcome: Outcome) -> str:
    log.info(
        "task_done",
        action=outcome.action,
        doc_key=outcome.doc_key,
        embedded=outcome.embedded,
        reason=outcome.reason,
    )
    return outcome.action


@shared_task(bind=True, base=NcindexTask, name=names.INDEX_NODE, **COUNTED)
def index_node(self: NcindexTask, user: str, file_id: int, debounce_key: str | None = None) -> str:
    """Index file/note ``file_id`` as seen by ``user`` (or evict it if gone)."""
    indexer = _start(self, debounce_key)
    subject = node_subject(file_id)
    with (
        tracked(self, user, subject, {"user": user, "file_id": file_id}) as done,
        refused_account(indexer, user),
        indexer.lock(file_id),
    ):
        outcome = guarded(
            indexer,
            subject,
            lambda note: indexer.index_node(user, file_id, on_version=note),
            lambda reason, n, etag: indexer.park_node(user, file_id, reason, n, etag),
        )
        done.append(outcome)
    _walk_folder(self, user, outcome)
    _ask_viewers(self, user, file_id, outcome)
    return _done(outcome)


@shared_task(bind=True, base=NcindexTask, name=names.INDEX_NODES, **COUNTED)
def index_nodes(
    self: NcindexTask,
    user: str,
    file_ids: list[int],
    debounce_keys: list[str | None] | None = None,
) -> dict[str, int]:
    """Index files/notes ``file_ids`` as seen by ``user`` in one run
    (:meth:`~ncindex.index.indexing.Indexer.index_nodes`: one embedding run, one write), as
    :func:`index_node` would each. Returns counts per outcome action, ``own_task``: the
    files handed to an ``ncindex.index_node`` task each, and ``sent_on``: the files not
    started in time, sent on in another batch (:func:`_index_batch`). A publish that
    fails (handing files on, or a folder's walk) retries this task, which runs the batch
    again: what it wrote is unchanged then, and its files' progress, recorded by the first
    run to finish the batch (:meth:`~ncindex.names.Names.batch_recorded`), is not recorded
    again."""
    started = time.monotonic()  # the soft time limit runs from about here
    indexer = _start(self, None)
    clear_debounce(indexer.services.redis, indexer.settings.names, *(debounce_keys or []))
    ids = [int(i) for i in dict.fromkeys(file_ids)]
    # a redelivered message keeps its task id, and so does a retry
    run = self.request.id or hashlib.sha256(f"{user}:{ids}".encode()).hexdigest()
    batch = _index_batch(self, user, ids, run, _start_by(indexer.settings, started))
    with _quiet("progress_not_recorded"):
        progress = Progress(indexer.services.redis, indexer.settings.names)
        if batch.outcomes and _first_to_record(indexer, run):
            for file_id, outcome in batch.outcomes.items():
                progress.finished(
                    user,
                    node_subject(file_id),
                    outcome.action,
                    outcome.embedded,
                    outcome.reason,
                    clear_failures=True,
                    truncated=outcome.truncated,
                    path=outcome.path if outcome.action == "ineligible" else None,
                )
    _hand_on(self, user, batch.alone)
    _send_on(self, user, batch.later)
    for file_id, outcome in batch.outcomes.items():
        _walk_folder(self, user, outcome)
        _ask_viewers(self, user, file_id, outcome)
    counts: dict[str, int] = {"own_task": len(batch.alone), "sent_on": len(batch.later)}
    for outcome in batch.outcomes.values():
        counts[outcome.action] = counts.get(outcome.action, 0) + 1
    log.info("batch_done", files=len(ids), **counts)
    return counts


def _start_by(settings: Settings, started: float) -> float:
    """The ``time.monotonic()`` instant after which a batch task that started at ``started``
    starts no more files (:meth:`~ncindex.index.indexing.Indexer.index_nodes`), seconds: a
    quarter of the soft time limit in (the write of what was read then has time), and no
    later than what a file may need before the soft limit — its extraction, up to
    ``extract_max_seconds``, and an eighth of the soft limit for its look-up and download
    and the batch's embedding and write. A file started later could be cut off by the soft
    limit mid-read (settings only keep the cap below the whole limit), and that sends every
    file of the batch to a task of its own to be read again."""
    soft = settings.task_soft_time_limit
    return started + min(soft / 4, soft - settings.extract_max_seconds - soft / 8)


def _first_to_record(indexer: Indexer, run: str) -> bool:
    """``True`` for the first run of batch task ``run`` to ask (it records its files'
    progress); the mark lives as long as a run count (:func:`_deliveries`). Raises
    ``redis.RedisError``."""
    key = indexer.settings.names.batch_recorded(run)
    return bool(indexer.services.redis.set(key, 1, nx=True, ex=_deliveries(indexer).ttl))


def _index_batch(
    task: NcindexTask, user: str, ids: list[int], run: str, start_by: float
) -> BatchResult:
    """The batch of :func:`index_nodes` (``run``: the task's id), no file but the first
    started after ``start_by`` (``time.monotonic()`` seconds, :func:`_start_by`): the outcome
    of each file it finished, the files it did not start in time (``later``), and the files
    left to a task of their own — those another run holds (their lock is busy), those
    :meth:`~ncindex.index.indexing.Indexer.index_nodes` left, and all of them when an earlier
    delivery of this very task never ended (a file in it may kill the worker: alone, each is
    counted and parked as :func:`guarded` does; that count is kept until the task ends, so a
    retry of it hands them on again), when anything failed around the files (the locks, the
    model view) or when the soft time limit passed while a file was read (one passed in the
    batch's write or recheck hands on only the files not finished:
    :meth:`~ncindex.index.indexing.Indexer.index_nodes`). A refused account (a permanent error)
    fails the run of each file this run held, recorded as ``index_node`` records it, hands
    the others on, and is raised."""
    indexer = task.indexer
    deliveries = _deliveries(indexer)
    batch = f"nodes:{run}"
    count, _ = deliveries.start(batch)
    if count > 1:
        log.warning("batch_lost_before", runs=count - 1, files=len(ids))
        return BatchResult({}, list(ids), [])
    held: set[int | str] = set()
    with _counted(deliveries, batch):  # a SystemExit (the hard time limit) keeps the count
        try:
            with refused_account(indexer, user), document_locks(indexer.services, ids) as held:
                done = indexer.index_nodes(user, [i for i in ids if i in held], start_by=start_by)
            alone = [i for i in ids if i not in held or i in done.alone]
            return BatchResult(done.outcomes, alone, done.later)
        except NextcloudAuthError as exc:  # permanent: each held file's run failed
            with _quiet("failure_not_recorded"):
                keys = indexer.settings.names
                for file_id in (i for i in ids if i in held):
                    subject, kwargs = node_subject(file_id), {"user": user, "file_id": file_id}
                    FailingDocuments(indexer.services.redis, keys).failed(
                        subject, user, names.INDEX_NODE, kwargs, exc, retrying=False
                    )
                    Progress(indexer.services.redis, keys).finished(user, subject, "failed")
            _hand_on(task, user, [i for i in ids if i not in held])
            raise
        except Exception as exc:  # the soft time limit too: each file to its own task
            log.info("left_to_own_task", files=len(ids), error=f"{type(exc).__name__}: {exc}")
            return BatchResult({}, list(ids), [])


def _hand_on(task: NcindexTask, user: str, file_ids: list[int]) -> None:
    """Send an ``ncindex.index_node`` task for each of ``file_ids`` (``user``'s); raises
    :class:`BrokerUnavailable` when a publish fails (the batch task retries)."""
    for file_id in file_ids:
        _send(task, names.INDEX_NODE, {"user": user, "file_id": file_id})


def _send_on(task: NcindexTask, user: str, file_ids: list[int]) -> None:
    """Send ``file_ids`` (``user``'s files a batch did not start in time) on in one
    ``ncindex.index_nodes`` task, a lone file as ``ncindex.index_node`` (as
    :func:`ncindex.ingest.queueing.send_gathered` sends one): each is read once, by that
    task, with the whole of its time. Raises :class:`BrokerUnavailable` when the publish
    fails (the batch task retries)."""
    if len(file_ids) > 1:
        _send(task, names.INDEX_NODES, {"user": user, "file_ids": file_ids})
    else:
        _hand_on(task, user, file_ids)


def _send(task: NcindexTask, name: str, kwargs: dict[str, Any]) -> None:
    """Publish task ``name`` with ``kwargs`` on the ``index`` queue; raises
    :class:`BrokerUnavailable` when the publish fails."""
    try:
        task.app.send_task(name, kwargs=kwargs, queue=names.INDEX, retry_policy=PUBLISH_RETRY)
    except Exception as exc:  # kombu/redis raise several types
        raise BrokerUnavailable(f"broker: {exc}") from exc


@shared_task(bind=True, base=NcindexTask, name=names.EVICT_NODE, **RETRY)
def evict_node(
    self: NcindexTask,
    user: str,
    path: str,
    file_id: int | None = None,
    debounce_key: str | None = None,
) -> str:
    """Something at ``path`` (file id ``file_id`` if known) was deleted in ``user``'s view."""
    indexer = _start(self, debounce_key)
    with (
        refused_account(indexer, user),
        indexer.lock(file_id if file_id is not None else f"{user}:{path}"),
    ):
        outcome = indexer.evict_node(user, path, file_id)
    return _done(outcome)


@shared_task(bind=True, base=NcindexTask, name=names.MOVE_PATH, **RETRY)
def move_path(
    self: NcindexTask,
    user: str,
    source: str,
    target: str,
    file_id: int | None = None,
    debounce_key: str | None = None,
) -> str:
    """A file or folder moved from ``source`` to ``target`` in ``user``'s view: the shares
    the share poll keeps for ``user`` that it moves are noted first
    (:func:`ncindex.sync.shares.note_move`), then its documents are re-pathed, without
    embedding (:meth:`~ncindex.index.indexing.Indexer.move_path`; this task runs on the
    ``ingest`` queue, in the light worker group, which does not load the dense model); the
    files whose re-read may embed go to ``ncindex.index_node`` on the ``index`` queue,
    debounced like the receiver's."""
    indexer = _start(self, debounce_key)
    note_move(indexer, user, source, target)
    with refused_account(indexer, user):
        outcome = indexer.move_path(user, source, target, file_id)
    settings = indexer.settings
    enqueue(
        self.app,
        indexer.services.redis,
        [index_node_action(user, i) for i in outcome.reindex],
        settings.debounce_seconds,
        keys=settings.names,
    )
    _walk_folder(self, user, outcome)
    if file_id is not None:
        _ask_viewers(self, user, file_id, outcome)
    return _done(outcome)


@shared_task(bind=True, base=NcindexTask, name=names.INDEX_DOCUMENT, **COUNTED)
def index_document(
    self: NcindexTask, user: str, doc_type: str, doc_id: str | int, debounce_key: str | None = None
) -> str:
    """Index document ``doc_type``/``doc_id`` (``deck_card``, ``news_item``; ``file`` and
    ``note`` are passed to ``index_node``) as seen by ``user``, or evict it if gone."""
    if SOURCES[DocType(doc_type)].node:
        return index_node.run(user, int(doc_id), debounce_key)
    indexer = _start(self, debounce_key)
    ref = DocRef(DocType(doc_type), str(doc_id))

    def park(reason: str, deliveries: int, etag: str | None) -> Outcome:
        # the etag is not known without reading the document again, which is what kills
        # the worker: park under an empty etag, released by the next change event (no
        # version is noted for these documents, so ``etag`` is None)
        indexer.deadletters.put(
            ref.key, user, "", reason, names.INDEX_DOCUMENT, doc_type=doc_type, doc_id=doc_id
        )
        return Outcome("dead_letter", ref.key, reason=reason)

    kwargs = {"user": user, "doc_type": doc_type, "doc_id": doc_id}
    with (
        tracked(self, user, ref.key, kwargs) as done,
        refused_account(indexer, user),
        indexer.lock(ref.key),
    ):
        outcome = guarded(
            indexer, ref.key, lambda note: indexer.index_document(user, doc_type, doc_id), park
        )
        done.append(outcome)
    return _done(outcome)


@shared_task(bind=True, base=NcindexTask, name=names.EVICT_DOCUMENT, **RETRY)
def evict_document(
    self: NcindexTask, user: str, doc_type: str, doc_id: str | int, debounce_key: str | None = None
) -> str:
    """``user`` reported document ``doc_type``/``doc_id`` deleted (Deck card events)."""
    indexer = _start(self, debounce_key)
    with refused_account(indexer, user), indexer.lock(f"{doc_type}:{doc_id}"):
        outcome = indexer.evict_document(user, doc_type, doc_id)
    return _done(outcome)
