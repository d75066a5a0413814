"""A Celery app for worker subprocesses in the deploy tests: ncindex's own broker and
reliability settings (:func:`ncindex.ingest.queueing.celery_app`, from ``NCINDEX_*`` variables), the
worker hooks of :mod:`workers.heartbeat`, and one task, ``deploytest.slow``, that records each
run in Redis so a test can see a run start, finish, or happen again after a lost worker.

``celery -A slow_app worker`` with this folder on ``PYTHONPATH``. Kombu's unacked-restore sweep
runs every second here, so a message left by a killed worker comes back soon after the
visibility timeout.
"""

from __future__ import annotations

import time

import redis
import structlog

import workers.heartbeat  # noqa: F401  (the hooks under test)
from ncindex.ingest.queueing import celery_app
from ncindex.settings import Settings

settings = Settings()
app = celery_app(settings)
app.conf.broker_transport_options = {
    **app.conf.broker_transport_options,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}
log = structlog.get_logger("deploytest")


def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.redis_url)


@app.task(name="deploytest.slow", bind=True, acks_late=True, reject_on_worker_lost=True)
def slow(self, key: str, seconds: float, first_run_seconds: float | None = None) -> int:
    """Sleep, recording ``<key>:started`` (a list of worker hostnames) and ``<key>:finished``.

    ``first_run_seconds`` replaces ``seconds`` on the first run only (a run that is meant to
    be cut off)."""
    client = _redis()
    run = client.rpush(f"{key}:started", self.request.hostname or "?")
    structlog.contextvars.bind_contextvars(doc_key=key)
    log.info("slow_started", run=run)
    time.sleep(first_run_seconds if run == 1 and first_run_seconds is not None else seconds)
    client.rpush(f"{key}:finished", self.request.hostname or "?")
    log.info("slow_finished", run=run)
    return run
