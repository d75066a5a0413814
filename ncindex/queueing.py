"""Enqueue planned actions on the broker, with per-document debounce (DESIGN §5).

One save fires several events (Created + Written, or Written twice). The first event for a
debounce key sets ``ncindex:debounce:<key>`` in Redis (``SET NX`` with an expiry) and sends
its task with a countdown of ``debounce_seconds``; repeats inside the window find the key and
are coalesced. The operation is part of the key (``index:…``, ``evict:…``), so a pending index
never swallows a delete. The task deletes the key when it starts, before it reads Nextcloud,
so an event arriving while it runs schedules a fresh run.

Tasks are sent by name (``send_task``), so the receiver never imports the workers' code,
fastembed or the vector store.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any, Protocol

import redis
from celery import Celery
from kombu import Queue

from ncindex.errors import TransientError
from ncindex.events import Action
from ncindex.settings import Settings

DEBOUNCE_PREFIX = "ncindex:debounce:"
QUEUES = ("ingest", "index", "evict", "reconcile")
#: Publishing retries briefly, then fails: the receiver must answer 503, not hang.
PUBLISH_RETRY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}


def celery_app(settings: Settings) -> Celery:
    """A Celery app on ``settings.redis_url`` without tasks (a producer; the workers add
    theirs): late acks, reject-on-worker-lost, prefetch 1, JSON only, worker task events, time
    limits below the Redis visibility timeout (DESIGN §6), unacked messages of a dead worker
    swept back every tenth of the visibility timeout.

    Workers send task events (Flower's task list and its ``/metrics``); the producer sends no
    ``task-sent`` event: it would cost a second publish per queued task and nothing reads it."""
    app = Celery("ncindex", broker=settings.redis_url, set_as_current=False)
    # kombu restores a dead worker's unacked messages in sweeps every ``interval × throttle``
    # seconds (default 10 × 10): sweep every tenth of the visibility timeout (1–10 s) instead,
    # so a killed worker's tasks come back soon after the timeout, not up to 100 s later.
    transport = {
        "visibility_timeout": settings.visibility_timeout,
        "unacked_restore_interval": max(1, min(10, settings.visibility_timeout // 10)),
        "unacked_restore_throttle": 1,
        # a Redis that accepts connections but does not answer must fail a publish in
        # seconds (the receiver answers 503), not hold the request; above BRPOP's 1 s poll
        "socket_timeout": 2,
        "socket_connect_timeout": 2,
    }
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        result_backend=None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_soft_time_limit=settings.task_soft_time_limit,
        task_time_limit=settings.task_time_limit,
        broker_transport_options=transport,
        result_backend_transport_options=transport,
        visibility_timeout=settings.visibility_timeout,
        worker_send_task_events=True,
        task_send_sent_event=False,
        task_default_queue="ingest",
        task_queues=[Queue(name) for name in QUEUES],
        broker_connection_retry_on_startup=True,
        broker_connection_timeout=2,
        worker_hijack_root_logger=False,
    )
    return app


class Producer(Protocol):
    """What sends a task: ``celery.Celery.send_task`` has this shape."""

    def send_task(self, name: str, **options: Any) -> Any: ...


class BrokerUnavailable(TransientError):
    """Raised when the broker or Redis did not take a task; nothing was acknowledged."""


def debounce_key(action: Action) -> str | None:
    """The Redis key that coalesces ``action``, or ``None`` if it is never coalesced."""
    return DEBOUNCE_PREFIX + action.debounce_key if action.debounce_key else None


def enqueue(
    producer: Producer,
    redis_client: redis.Redis,
    actions: Iterable[Action],
    debounce_seconds: float,
) -> tuple[int, int]:
    """Send each action's task; returns ``(queued, coalesced)``.

    The debounce keys of all actions are claimed in one Redis round trip (a pipeline of
    ``SET NX PX``; ``debounce_seconds`` in seconds, the keys live four times as long, at least
    1 s). Raises :class:`BrokerUnavailable` when Redis or the broker fails; the debounce keys
    claimed for tasks that could not be sent are removed again, so nothing is swallowed.
    """
    actions = list(actions)
    keys = [debounce_key(action) for action in actions]
    debounced = debounce_seconds > 0
    claimed = [True] * len(actions)
    wanted = [i for i, key in enumerate(keys) if key and debounced]
    if wanted:
        ttl_ms = max(1000, int(debounce_seconds * 1000) * 4)
        pipe = redis_client.pipeline(transaction=False)
        for i in wanted:
            pipe.set(keys[i], 1, nx=True, px=ttl_ms)
        try:
            answers = pipe.execute()
        except redis.RedisError as exc:
            raise BrokerUnavailable(f"redis: {exc}") from exc
        for i, answer in zip(wanted, answers, strict=True):
            claimed[i] = bool(answer)
    queued = 0
    for i, (action, key) in enumerate(zip(actions, keys, strict=True)):
        if not claimed[i]:
            continue
        kwargs = dict(action.kwargs)
        if key:
            kwargs["debounce_key"] = key
        try:
            producer.send_task(
                action.task,
                kwargs=kwargs,
                queue=action.queue,
                countdown=debounce_seconds if key and debounced else None,
                retry_policy=PUBLISH_RETRY,
            )
        except Exception as exc:  # kombu/redis raise several types; none may be acknowledged
            unsent = [keys[j] for j in wanted if j >= i and claimed[j]]
            if unsent:
                with contextlib.suppress(redis.RedisError):
                    redis_client.delete(*unsent)
            raise BrokerUnavailable(f"broker: {exc}") from exc
        queued += 1
    return queued, len(actions) - claimed.count(True)


def clear_debounce(redis_client: redis.Redis, key: str | None) -> None:
    """Called by a task as it starts: later events for the same document schedule anew."""
    if key and key.startswith(DEBOUNCE_PREFIX):
        redis_client.delete(key)
