"""The worker ``ncindex up`` runs in its own process comes back after an unrecoverable error.

Seen with kombu 5.7 / redis-py 8.1: Redis lost while the worker holds a delayed task (a
debounced index task waits out its countdown unacked) ⇒ "Unrecoverable error:
AttributeError('NoneType' object has no attribute 'hostname')" and the worker stops. A
standalone ``celery worker`` then exits for its supervisor to restart; in ``ncindex up``
nothing did, and nothing was indexed again."""

from __future__ import annotations

import contextlib
import time

import redis
from celery import Celery

from ncindex.embedded import start_worker
from ncindex.queueing import celery_app
from ncindex.redis_server import RedisProcess
from ncindex.settings import Settings
from support import wait_until


def test_the_worker_is_started_again_after_redis_is_lost_under_a_delayed_task(
    private_redis: RedisProcess,
) -> None:
    app: Celery = celery_app(Settings(redis_url=private_redis.url))
    ran: list[int] = []

    @app.task(name="probe.note_run", acks_late=True)
    def note_run(n: int) -> None:
        ran.append(n)

    start_worker(app, concurrency=1, restart_after=0.5)
    check = redis.Redis.from_url(private_redis.url)
    wait_until(lambda: check.exists("_kombu.binding.ingest"), timeout=30)
    app.send_task("probe.note_run", args=[1], countdown=30, queue="ingest")
    wait_until(lambda: check.hlen("unacked"), timeout=30)  # held by the worker, waiting
    private_redis.process.kill()
    private_redis.process.wait()
    time.sleep(2)
    private_redis.start_again()  # empty: the delayed task is gone with it (reconcile's job)
    # the worker stopped on the error and was started again: it takes new work
    deadline = time.monotonic() + 60
    while 2 not in ran and time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # the producer may still be reconnecting
            app.send_task("probe.note_run", args=[2], queue="ingest")
        time.sleep(5)
    assert 2 in ran, ran
    check.close()
    app.close()
