"""Ingest tasks: the fan-out of a large envelope's actions, and the resolution of an event that
came without a configured user.

The receiver hands an envelope of more than :data:`ncindex.ingest.queueing.FAN_OUT` actions (a tag
event on thousands of files) to ``ncindex.send_actions`` tasks of that many each, so that it
answers Nextcloud in time; each task sends its part's tasks with the receiver's debounce, as
the receiver would have.
"""

from __future__ import annotations

import secrets
from typing import Any

import structlog
from celery import shared_task

from ncindex import names
from ncindex.documents import DocType
from ncindex.errors import NcindexError, TransientError
from ncindex.ingest.events import Action, index_document, index_node
from ncindex.ingest.queueing import (
    clear_debounce,
    enqueue,
    requeue_parked,
    send_actions,
    send_gathered,
    sweep_gathered,
)
from ncindex.ingest.viewers import viewers_of
from ncindex.nextcloud.server_status import server_status
from workers.base import NcindexTask
from workers.tasks import RETRY

log = structlog.get_logger(__name__)

#: Why ``ncindex.resolve_node`` indexed a node for nobody (its ``node_resolved`` line).
NO_VIEWER = "no configured account can see it (NCINDEX_ACCOUNTS): not indexed"


@shared_task(bind=True, base=NcindexTask, name=names.SEND_ACTIONS, ignore_result=True, **RETRY)
def send_actions_task(
    self: NcindexTask,
    actions: list[dict[str, Any]],
    countdown: float | None,
    key_seconds: float | None,
) -> dict[str, int]:
    """Send ``actions`` (``dataclasses.asdict`` of :class:`~ncindex.ingest.events.Action`, at most
    ``FAN_OUT``) with ``countdown`` and debounce keys living ``key_seconds`` (seconds; ``None``:
    no debounce). Returns ``{"queued": n, "coalesced": m}``; a broker or Redis failure is
    retried (``BrokerUnavailable`` is transient), which may send a part twice (idempotent)."""
    services = self.services
    queued, coalesced = send_actions(
        self.app,
        services.redis,
        [Action(**action) for action in actions],
        keys=services.settings.names,
        countdown=countdown,
        key_seconds=key_seconds,
        batch_docs=services.settings.index_batch_docs,
    )
    log.info("fan_out_sent", task_id=self.request.id, queued=queued, coalesced=coalesced)
    return {"queued": queued, "coalesced": coalesced}


@shared_task(bind=True, base=NcindexTask, name=names.FLUSH_GATHERED, ignore_result=True, **RETRY)
def flush_gathered(self: NcindexTask, user: str) -> dict[str, int]:
    """Send the index actions gathered for ``user`` since the last flush, in batches
    (:func:`~ncindex.ingest.queueing.send_gathered`). Returns ``{"sent": n}``; a broker or
    Redis failure is retried (``BrokerUnavailable`` is transient) and sends what this run
    took again (idempotent tasks)."""
    services = self.services
    sent = send_gathered(
        self.app,
        services.redis,
        user,
        keys=services.settings.names,
        run=self.request.id or secrets.token_hex(8),  # a task id (no ":"), or a direct call
        batch_docs=services.settings.index_batch_docs,
    )
    log.info("gathered_sent", user=user, sent=sent)
    return {"sent": sent}


@shared_task(bind=True, base=NcindexTask, name=names.SWEEP_GATHERED, ignore_result=True)
def sweep_gathered_task(self: NcindexTask) -> int:
    """Beat, every minute: a flush for each user whose gathered actions no flush is on its
    way to send (:func:`~ncindex.ingest.queueing.sweep_gathered`). Returns how many were
    sent."""
    return sweep_gathered(self.app, self.services.redis, keys=self.services.settings.names)


@shared_task(bind=True, base=NcindexTask, name=names.RESOLVE_NODE, ignore_result=True, **RETRY)
def resolve_node(
    self: NcindexTask,
    file_id: int,
    debounce_key: str | None = None,
    among: list[str] | None = None,
    folder: list[str] | None = None,
) -> dict[str, Any]:
    """Index file ``file_id`` for each configured account that can see it, and take it from
    each the index has it for (its ``acl``) that no longer does: the event named
    no configured user (``"user": null``, or an unconfigured view: an owner ncindex has no
    account for deleting a shared file, or moving it out of the share, reaches the sharees
    only so); or, with ``among``, for
    each of those accounts that can (a document new to the index, or a node moved, that they
    may see too: :attr:`~ncindex.index.steps.Outcome.viewers`) — and take the others of
    ``among``, whom Nextcloud does not show it, out of its ``acl`` (a file moved out of a
    folder shared with them); with ``folder`` (``[user, path]``: the node is a folder at
    ``path`` in ``user``'s view), those others also lose what they held below it
    (:meth:`~ncindex.index.indexing.Indexer.leave_folder`: a folder moved out of one shared
    with them). One SEARCH by id per account asked
    (:func:`ncindex.ingest.viewers.viewers_of`); the ``ncindex.index_node`` tasks go out
    debounced like the receiver's. Returns ``{"viewers": [...], "queued", "coalesced"}``.

    An account whose SEARCH failed does not hold up the others, whose work is done first
    (:func:`_ask_again`): a transient failure is retried for the failed accounts alone; a
    permanent one leaves the node to that account's next scan and is raised."""
    services = self.services
    keys = services.settings.names
    clear_debounce(services.redis, keys, debounce_key)
    found = viewers_of(services, int(file_id), among)
    viewers, unseen = found.seen, found.unseen
    if among is None and unseen:
        # an event in an unconfigured view (the owner deleting a shared file, or moving it out
        # of a folder shared with them): Nextcloud tells no one else, so the accounts the
        # index has it for that no longer see it are the ones to take it from
        held = {u for u, _ in self.indexer.access.holders(int(file_id), besides="")}
        unseen = [u for u in unseen if u in held]
    if unseen:
        indexer = self.indexer
        with indexer.lock(int(file_id)):
            for user in unseen:  # nothing marked for scans: nothing is left for them to find
                indexer.access.remove_node(user, int(file_id), lost=None)
        if among is not None and folder is not None:
            for user in unseen:
                indexer.leave_folder(user, folder[0], folder[1])
    queued, coalesced = enqueue(
        self.app,
        services.redis,
        [index_node(user, int(file_id)) for user in viewers],
        services.settings.debounce_seconds,
        keys=keys,
    )
    # nobody: an unconfigured user's own file, say, out of the index by design (no failure)
    nobody = {} if viewers or unseen or found.failed else {"reason": NO_VIEWER}
    log.info("node_resolved", file_id=file_id, viewers=viewers, queued=queued, **nobody)
    if found.failed:
        _ask_again(self, int(file_id), found.failed, folder)
    return {"viewers": viewers, "queued": queued, "coalesced": coalesced}


def _ask_again(
    task: NcindexTask, file_id: int, failed: dict[str, NcindexError], folder: list[str] | None
) -> None:
    """After ``ncindex.resolve_node`` did the work of the accounts that answered: the
    accounts whose SEARCH failed (``failed``: user id → error; each logged). Those whose
    failure may pass (``TransientError``: Nextcloud unavailable for them) are asked again by
    a retry of this task with ``among`` them alone (:meth:`NcindexTask.retry_part`: the
    backoff, the outage patience and the parking of every retry), so the others' tasks are
    not sent twice; with ``folder`` as before. When none may pass (``PermanentError``: an
    answer not in Nextcloud's format, which asking again would not change), the first is
    raised: the task is failed, and the node is left to each such account's next scan,
    which lists their files whatever the events said. Raises ``Retry`` or that error."""
    for user, exc in failed.items():
        log.warning(
            "viewer_unknown", file_id=file_id, user=user, error=f"{type(exc).__name__}: {exc}"
        )
    passing = {user: exc for user, exc in failed.items() if isinstance(exc, TransientError)}
    if not passing:
        raise next(iter(failed.values()))
    kwargs: dict[str, Any] = {"file_id": file_id, "among": list(passing)}
    if folder is not None:
        kwargs["folder"] = folder
    raise task.retry_part(next(iter(passing.values())), kwargs)


@shared_task(bind=True, base=NcindexTask, name=names.INDEX_RELATED, ignore_result=True, **RETRY)
def index_related(
    self: NcindexTask,
    user: str,
    doc_type: str,
    field: str,
    value: int,
    debounce_key: str | None = None,
) -> dict[str, int]:
    """Re-read as ``user`` every indexed document of ``doc_type`` whose payload ``field``
    is ``value`` (a Deck board shared or unshared: its cards by ``board_id``; each one's
    ``acl`` is then the board's, and one ``user`` no longer sees loses ``user``): one
    ``ncindex.index_document`` each, debounced like the receiver's. Returns ``{"queued",
    "coalesced"}``; a store, broker or Redis failure is retried."""
    services = self.services
    keys = services.settings.names
    clear_debounce(services.redis, keys, debounce_key)
    ids = self.indexer.related(DocType(doc_type), field, str(value))
    queued, coalesced = enqueue(
        self.app,
        services.redis,
        [index_document(user, doc_type, int(doc_id)) for doc_id in ids],
        services.settings.debounce_seconds,
        keys=keys,
    )
    log.info("related_reread", doc_type=doc_type, field=field, value=value, queued=queued)
    return {"queued": queued, "coalesced": coalesced}


@shared_task(bind=True, base=NcindexTask, name=names.OUTAGE_REQUEUE, ignore_result=True)
def outage_requeue(self: NcindexTask) -> int:
    """Beat, every minute: when tasks gave up during a Nextcloud outage
    (:func:`~ncindex.ingest.queueing.park_for_outage`), ask ``GET /status.php`` and, once
    Nextcloud can serve again (:attr:`~ncindex.nextcloud.server_status.ServerStatus.problem`:
    it answers, installed, neither in maintenance nor waiting for its upgrade), send them
    again. Returns how many were sent (0 while Nextcloud is still away)."""
    services = self.services
    if not services.redis.hlen(services.settings.names.outage_parked):
        return 0
    problem = server_status(services.http, services.settings.nextcloud_url).problem
    if problem is not None:
        log.info("outage_continues", problem=problem)
        return 0
    return requeue_parked(self.app, services.redis, services.settings.names)
