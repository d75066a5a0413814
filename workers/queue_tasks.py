"""Ingest tasks: the fan-out of a large envelope's actions, and the resolution of an event that
came without a configured user.

The receiver hands an envelope of more than :data:`ncindex.ingest.queueing.FAN_OUT` actions (a tag
event on thousands of files) to ``ncindex.send_actions`` tasks of that many each, so that it
answers Nextcloud in time; each task sends its part's tasks with the receiver's debounce, as
the receiver would have.
"""

from __future__ import annotations

from typing import Any

import structlog
from celery import Task, shared_task

from ncindex.accounts import viewers_of
from ncindex.ingest.events import Action, index_node
from ncindex.ingest.queueing import FAN_OUT_TASK, clear_debounce, enqueue, send_actions
from ncindex.telemetry import bind_task_context
from workers.tasks import RETRY

log = structlog.get_logger(__name__)


@shared_task(bind=True, name=FAN_OUT_TASK, ignore_result=True, **RETRY)
def send_actions_task(
    self: Task,
    actions: list[dict[str, Any]],
    countdown: float | None,
    key_seconds: float | None,
) -> dict[str, int]:
    """Send ``actions`` (``dataclasses.asdict`` of :class:`~ncindex.ingest.events.Action`, at most
    ``FAN_OUT``) with ``countdown`` and debounce keys living ``key_seconds`` (seconds; ``None``:
    no debounce). Returns ``{"queued": n, "coalesced": m}``; a broker or Redis failure is
    retried (``BrokerUnavailable`` is transient), which may send a part twice (idempotent)."""
    services = self.app.ncindex_services  # type: ignore[attr-defined]
    queued, coalesced = send_actions(
        self.app,
        services.redis,
        [Action(**action) for action in actions],
        countdown=countdown,
        key_seconds=key_seconds,
    )
    log.info("fan_out_sent", task_id=self.request.id, queued=queued, coalesced=coalesced)
    return {"queued": queued, "coalesced": coalesced}


@shared_task(bind=True, name="ncindex.resolve_node", ignore_result=True, **RETRY)
def resolve_node(self: Task, file_id: int, debounce_key: str | None = None) -> dict[str, Any]:
    """Index file ``file_id`` for each configured account that can see it: the event named
    no configured user (``"user": null``, or an unconfigured view). One SEARCH by id per
    account (:func:`ncindex.accounts.viewers_of`); the ``ncindex.index_node`` tasks go out
    debounced like the receiver's. Returns ``{"viewers": [...], "queued", "coalesced"}``."""
    services = self.app.ncindex_services  # type: ignore[attr-defined]
    bind_task_context(self.request.id, self.name, file_id=file_id)
    clear_debounce(services.redis, debounce_key)
    viewers = viewers_of(services, int(file_id))
    queued, coalesced = enqueue(
        self.app,
        services.redis,
        [index_node(user, int(file_id)) for user in viewers],
        services.settings.debounce_seconds,
    )
    log.info("node_resolved", file_id=file_id, viewers=viewers, queued=queued)
    return {"viewers": viewers, "queued": queued, "coalesced": coalesced}
