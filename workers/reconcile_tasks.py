"""Celery tasks of reconciliation (DESIGN §7): thin wrappers around :mod:`ncindex.sync.reconcile`.

``ncindex.reconcile_check`` is what beat sends (see :mod:`workers.beat`): it takes a Redis lock
that expires before the next tick and is never released early, so overlapping beats or ticks
delivered late after a backlog run at most one check per period; it then queues one
``ncindex.reconcile_scan`` per account, skipping those already queued.
``ncindex.reconcile_scan`` scans one user and doc type under a per-(user, type) lock; if a scan
of the same user and type is running it returns at once. One run lists one page of the listing
(``reconcile_page_requests`` requests); while the listing is unfinished it sends itself on with
``page``, the number of the page to list next (:mod:`ncindex.sync.paging`).
``ncindex.poll_shares`` (beat, every ``share_poll_seconds``) polls each account's shares
(:mod:`ncindex.sync.shares`).
"""

from __future__ import annotations

from typing import Any

import structlog
from celery import shared_task

from ncindex import names
from ncindex.documents import DocType
from ncindex.errors import AccountHeld, NcindexError, NotFound
from ncindex.ingest.events import Action
from ncindex.ingest.events import index_folder as index_folder_action
from ncindex.ingest.queueing import clear_debounce, send_actions
from ncindex.sync.paging import ListingPages
from ncindex.sync.reconcile import (
    FORGOTTEN_PENDING_SECONDS,
    Reconciler,
    ScanState,
    enabled_scan_types,
    request_scans,
    rescan_if_due,
    rescan_if_forgotten,
    scan_lock,
    scan_lock_seconds,
)
from ncindex.sync.shares import poll_user, sharing_off_warning_due
from ncindex.sync.subtree import walk_subtree
from workers.base import NcindexTask
from workers.beat import check_lock_seconds
from workers.tasks import RETRY, refused_account

log = structlog.get_logger(__name__)


#: How many times a scan whose listing failed for a reason that may pass is run again
#: (:func:`scan_retry_seconds` apart: about 5 minutes in all) before it waits for its period.
SCAN_RETRIES = 5

#: How many times a continuation page that found the scan lock held waits for it (counted
#: apart from :data:`SCAN_RETRIES`) before it gives up.
SCAN_LOCK_WAITS = 3


def scan_retry_seconds(retries: int) -> float:
    """The wait before the scan's retry number ``retries`` (0 for the first), seconds: 10 s
    doubled each time, at most 120 s."""
    return float(min(120, 10 * 2**retries))


def reconciler_for(task: NcindexTask) -> Reconciler:
    """A :class:`Reconciler` on the worker's services, sending tasks through the app."""
    return Reconciler(task.services, task.indexer, task.app)


@shared_task(bind=True, base=NcindexTask, name=names.RECONCILE_CHECK, ignore_result=True)
def reconcile_check(self: NcindexTask, doc_type: str) -> int:
    """Queue a scan of ``doc_type`` for every configured account, at most once per period."""
    services = self.services
    settings = services.settings
    period = settings.reconcile_periods.get(doc_type, 900)
    lock = services.redis.lock(
        settings.names.lock("reconcile-check", doc_type), timeout=check_lock_seconds(period)
    )
    if not lock.acquire(blocking=False):
        log.info("reconcile_check_skipped", doc_type=doc_type, reason="locked")
        return 0
    queued = request_scans(
        self.app, services.redis, list(settings.accounts), [doc_type], period, keys=settings.names
    )
    log.info("reconcile_check", doc_type=doc_type, queued=queued)
    return queued


@shared_task(bind=True, base=NcindexTask, name=names.RESCAN_IF_FORGOTTEN, ignore_result=True)
def rescan_if_forgotten_task(self: NcindexTask) -> int:
    """Scan every account at once when Redis lost this deployment's state (beat, every
    minute: :func:`ncindex.sync.reconcile.rescan_if_forgotten`), or once the scan a first
    webhook registration asked for is due (:func:`ncindex.sync.reconcile.rescan_if_due`)."""
    services = self.services
    forgotten = rescan_if_forgotten(self.app, services.redis, services.settings)
    return forgotten + rescan_if_due(self.app, services.redis, services.settings)


@shared_task(bind=True, base=NcindexTask, name=names.RESCAN_USERS, ignore_result=True, **RETRY)
def rescan_users(self: NcindexTask, users: list[str]) -> int:
    """Scan ``users`` (those of them configured) for every enabled doc type: the receiver
    refused deliveries for them while the broker was down, and Nextcloud never retries one.
    Returns how many scans were queued."""
    services = self.services
    settings = services.settings
    wanted = [u for u in users if u in settings.accounts]
    types = enabled_scan_types(settings)
    queued = request_scans(
        self.app, services.redis, wanted, types, FORGOTTEN_PENDING_SECONDS, keys=settings.names
    )
    log.info("missed_deliveries_rescanned", users=len(wanted), scans=queued)
    return queued


def retried_kwargs(task: NcindexTask) -> dict[str, Any]:
    """The running scan's keyword arguments for its retry, without ``pending_key``: the
    marker was deleted when the scan first ran, so a marker found at the retry is a newer
    request's (its scan queued already), which deleting again would let a third request queue
    another scan beside it."""
    return {**(task.request.kwargs or {}), "pending_key": None}


@shared_task(
    bind=True,
    base=NcindexTask,
    name=names.RECONCILE_SCAN,
    ignore_result=True,
    acks_late=True,
    max_retries=None,  # bounded by ``failures`` and ``lock_waits``, each on its own
)
def reconcile_scan(
    self: NcindexTask,
    user: str,
    doc_type: str,
    pending_key: str | None = None,
    page: int | None = None,
    failures: int = 0,
    lock_waits: int = 0,
) -> dict[str, Any]:
    """Scan ``user``'s documents of ``doc_type`` and enqueue what differs, one page of the
    listing per run: while it is unfinished, the next run is sent with ``page`` (the pages
    listed so far). A run sent with a ``page`` listed already returns at once (stale); one
    that finds the scan lock held waits for it (a dead worker's lock expires) by retrying,
    so a paged scan is not dropped halfway, up to :data:`SCAN_LOCK_WAITS` times. A listing
    that failed for a reason that may pass (Nextcloud or the store unavailable:
    ``ScanReport.retryable``) is run again after :func:`scan_retry_seconds`, up to
    :data:`SCAN_RETRIES` times, instead of waiting for the doc type's next period (up to an
    hour); the failure is recorded meanwhile. The two are counted apart, in the retried
    call's ``failures`` and ``lock_waits`` (Celery's ``request.retries`` counts both, and its
    default ``max_retries`` of 3 would end the task before either limit). Returns the
    report's summary (a page's while the listing is unfinished) or ``{"skipped": reason}``."""
    reconciler = reconciler_for(self)
    settings = reconciler.settings
    client = reconciler.services.redis
    if pending_key:
        client.delete(pending_key)
    with scan_lock(client, settings.names, user, doc_type, ttl=settings.lock_ttl, wait=0) as held:
        if not held:
            if page is not None and lock_waits < SCAN_LOCK_WAITS:
                wait = scan_lock_seconds(client, settings.names, user, doc_type)
                again = {**retried_kwargs(self), "lock_waits": lock_waits + 1}
                raise self.retry(kwargs=again, countdown=wait + 1)
            log.info("reconcile_scan_skipped", reason="running")
            return {"skipped": "running"}
        state = ScanState(client, user, DocType(doc_type), settings.names)
        pages = ListingPages(state, settings.reconcile_page_requests, page)
        if pages.stale():
            log.info("reconcile_scan_skipped", reason="stale", page=page)
            return {"skipped": "stale"}
        report = reconciler.scan(user, doc_type, apply=True, pages=pages)
    if report.retryable and failures < SCAN_RETRIES:
        # sent with the same page: the pages kept are listed on from where they stopped
        again = {**retried_kwargs(self), "failures": failures + 1}
        raise self.retry(kwargs=again, countdown=scan_retry_seconds(failures))
    if report.partial:  # sent once the lock is free, so the next page can take it at once
        self.app.send_task(
            names.RECONCILE_SCAN,
            kwargs={"user": user, "doc_type": report.doc_type, "page": report.pages},
            queue=names.RECONCILE,
        )
    return report.summary()


@shared_task(bind=True, base=NcindexTask, name=names.INDEX_FOLDER, ignore_result=True, **RETRY)
def index_folder(
    self: NcindexTask, user: str, folders: list[str], debounce_key: str | None = None
) -> dict[str, int]:
    """Index what lies below ``folders`` in ``user``'s view (a folder created, copied, restored
    or moved into view): one bounded step of :func:`ncindex.sync.subtree.walk_subtree`, the
    ``ncindex.index_node`` tasks it finds sent debounced, and the folders left handed to the
    next ``ncindex.index_folder`` (paged like a scan). Returns the step's counts."""
    indexer = self.indexer
    settings = indexer.settings
    clear_debounce(indexer.services.redis, settings.names, debounce_key)
    with refused_account(indexer, user):
        step = walk_subtree(indexer, user, folders)
    actions = list(step.actions)
    if step.remaining:
        actions.append(index_folder_action(user, step.remaining))
    queued, _ = send_actions(
        self.app,
        indexer.services.redis,
        actions,
        keys=settings.names,
        countdown=settings.debounce_seconds,
        key_seconds=max(60.0, settings.debounce_seconds),
        batch_docs=settings.index_batch_docs,
    )
    counts = {"listed": step.listed, "files": step.files, "queued": queued}
    log.info("folder_walked", user=user, remaining=len(step.remaining), **counts)
    return counts


@shared_task(bind=True, base=NcindexTask, name=names.POLL_SHARES, ignore_result=True)
def poll_shares(self: NcindexTask) -> int:
    """Poll every configured account's shares (beat, every ``share_poll_seconds``:
    :mod:`ncindex.sync.shares`), at most once per period (a lock that expires before the
    next tick; a run that outlasts it overlaps the next, which leaves each account another
    run is polling to that one: :func:`~ncindex.sync.shares.poll_user`). An account whose
    listing fails (Nextcloud unavailable, its app password refused or held back, the sharing
    API off) is skipped until the next poll; its state is kept. The sharing API off (404) is
    warned of once per :data:`~ncindex.sync.shares.SHARING_OFF_WARN_SECONDS` per deployment
    (and at once after a poll that succeeded), not per account and poll.
    Returns how many actions were sent."""
    indexer = self.indexer
    settings = indexer.settings
    period = settings.share_poll_seconds or 60
    lock = indexer.services.redis.lock(
        settings.names.lock("poll-shares"), timeout=check_lock_seconds(period)
    )
    if not lock.acquire(blocking=False):
        return 0

    def send(actions: list[Action]) -> None:
        send_actions(
            self.app,
            indexer.services.redis,
            actions,
            keys=settings.names,
            countdown=None,
            key_seconds=max(60, period),
            batch_docs=settings.index_batch_docs,
        )

    sent = 0
    for user in settings.accounts:
        try:
            with refused_account(indexer, user):
                sent += poll_user(indexer, user, send)
        except AccountHeld:
            continue  # Nextcloud refused its app password lately: nothing was sent
        except NotFound as exc:  # the sharing API is off: said once an hour, not per account
            if sharing_off_warning_due(indexer.services.redis, settings.names):
                log.warning(
                    "share_poll_sharing_off",
                    user=user,
                    error=str(exc),
                    hint="Nextcloud's sharing API answers 404 (the files_sharing app disabled, "
                    "or sharing turned off): set NCINDEX_SHARE_POLL_SECONDS=0 to turn the "
                    "share poll off; said again hourly while it lasts",
                )
        except NcindexError as exc:
            log.warning("share_poll_failed", user=user, error=str(exc))
    return sent
