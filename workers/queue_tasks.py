"""The fan-out task: a worker sends the tasks of a large envelope's actions.

The receiver hands an envelope of more than :data:`ncindex.ingest.queueing.FAN_OUT` actions (a tag
event on thousands of files) to ``ncindex.send_actions`` tasks of that many each, so that it
answers Nextcloud in time; each task sends its part's tasks with the receiver's debounce, as
the receiver would have.
"""

from __future__ import annotations

from typing import Any

import structlog
from celery import shared_task

from ncindex import names
from ncindex.ingest.events import Action
from ncindex.ingest.queueing import send_actions
from workers.base import NcindexTask
from workers.tasks import RETRY

log = structlog.get_logger(__name__)


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
    )
    log.info("fan_out_sent", task_id=self.request.id, queued=queued, coalesced=coalesced)
    return {"queued": queued, "coalesced": coalesced}
