"""Worker process hooks for ``celery -A workers.worker worker``: a liveness file, JSON logs
with the task bound, and the "last task finished" stamp behind the index-lag gauge.

Imported by :mod:`workers.worker`, it connects one Celery signal, ``celeryd_init`` (sent only
when a ``celery worker`` starts, not by in-process test workers), whose handler connects the
rest for that process:

* it adds :class:`Heartbeat`, a consumer bootstep that touches
  ``NCINDEX_HEARTBEAT_FILE`` every ``NCINDEX_HEARTBEAT_INTERVAL`` seconds (default 15) from the
  consumer's timer, i.e. from the process that talks to the broker. It starts once the consumer
  is connected and stops (removing the file) when the consumer stops, so the file goes stale
  when the worker loses the broker for good or its event loop hangs; a long task in a pool
  process does not stop it. The Kubernetes probe runs ``python -m workers.heartbeat FILE
  --max-age SECONDS`` (exit 0 when fresh, 1 when stale or missing) instead of ``celery inspect
  ping``, which needs the broker and a round trip through every worker. Without
  ``NCINDEX_HEARTBEAT_FILE`` no file is written (``ncindex up``, tests).
* ``setup_logging`` routes Celery's logging through :func:`ncindex.telemetry.configure_logging`
  (the app sets ``worker_hijack_root_logger=False``; a receiver for this signal also stops
  Celery from adding its own handlers and redirecting stdout).
* ``worker_process_init``: a prefork pool process moves to a process group of its own, so a
  signal to the worker's process group does not kill a running task
  (:func:`_shield_pool_process`), and says so when it starts past ``worker_max_memory_per_child``;
  ``worker_process_shutdown``: one that leaves to be replaced, past it, says so; the worker
  says at start when the bound is past its memory limit (:mod:`workers.pool_memory`).
* ``task_prerun``/``task_postrun`` (:func:`connect_task_hooks`, which ``ncindex up`` calls
  too) bind ``task_id`` and ``task`` to structlog's context for the
  task's lines and clear it afterwards (pool processes are reused), and stamp
  :attr:`ncindex.names.Names.last_task_done` in Redis.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from celery import bootsteps, signals

# Only the standard library and these two Celery modules at import: the probe
# (``python -m workers.heartbeat``) runs every few seconds in every worker pod. Everything
# else is imported by the handlers, which run only in a worker.

HEARTBEAT_FILE_ENV = "NCINDEX_HEARTBEAT_FILE"
HEARTBEAT_INTERVAL_ENV = "NCINDEX_HEARTBEAT_INTERVAL"

_redis_clients: dict[str, Any] = {}


class Heartbeat(bootsteps.StartStopStep):
    """Consumer step touching the liveness file on the consumer's timer."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        path = os.environ.get(HEARTBEAT_FILE_ENV)
        self.path = Path(path) if path else None
        self.interval = heartbeat_interval()
        self.tref: Any = None

    def touch(self) -> None:
        """Write the current time into the file (its mtime is what the probe reads)."""
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(f"{time.time():.3f}\n", encoding="ascii")

    def start(self, parent: Any) -> None:
        """Touch now and every ``interval`` seconds."""
        if self.path is None:
            return
        self.touch()
        self.tref = parent.timer.call_repeatedly(self.interval, self.touch, priority=10)

    def stop(self, parent: Any) -> None:
        """Stop touching and remove the file: a stopped consumer is not alive."""
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    shutdown = stop


def heartbeat_interval() -> float:
    """``NCINDEX_HEARTBEAT_INTERVAL`` in seconds (15 when unset or empty); a value that is not
    a finite number above 0 raises ``SystemExit`` with one line naming the variable (it was a
    traceback from the consumer's start, or a timer that never or always fired)."""
    text = os.environ.get(HEARTBEAT_INTERVAL_ENV, "").strip() or "15"
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise SystemExit(f"ncindex: {HEARTBEAT_INTERVAL_ENV} must be a number of seconds above 0")
    return value


def is_fresh(path: Path, max_age: float, now: float | None = None) -> bool:
    """Whether ``path`` exists and was modified within ``max_age`` seconds."""
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return False
    return (now if now is not None else time.time()) - mtime <= max_age


@signals.celeryd_init.connect
def _install(sender: Any = None, instance: Any = None, **kwargs: Any) -> None:
    """A ``celery worker`` is starting: add the heartbeat step to it and connect the logging,
    task-context and pool-memory handlers (``weak=False``: the module keeps no other
    reference); once it is set up, warn when its pool processes' memory bound
    (``--max-memory-per-child``, else the app's) is past its memory limit."""
    from workers import pool_memory

    if instance is not None and Heartbeat not in instance.app.steps["consumer"]:
        instance.app.steps["consumer"].add(Heartbeat)
    use_json_logging()
    connect_task_hooks()

    def bound() -> int | None:  # set up after this
        return pool_memory.pool_bound(instance)

    def set_up(**_: Any) -> None:  # once the worker's logging is
        concurrency = getattr(instance, "concurrency", None)
        pool_memory.check_reachable(bound(), concurrency, pool_memory.memory_limit_kib())

    def pool_process_started(**_: Any) -> None:
        _shield_pool_process()
        pool_memory.check_fresh(bound())

    signals.celeryd_after_setup.connect(set_up, weak=False)
    signals.worker_process_init.connect(pool_process_started, weak=False)
    signals.task_postrun.connect(pool_memory.count_task, weak=False)
    signals.worker_process_shutdown.connect(pool_memory.note_recycled, weak=False)


def _shield_pool_process(**kwargs: Any) -> None:
    """In a prefork pool process: leave the worker's process group for one of its own.

    A signal sent to the worker's process group — honcho, ``make``, a shell's Ctrl-C — reached
    the pool processes as well as the main one, and Celery resets SIGTERM to its default in
    them: the one running a task died with it (``WorkerLostError`` logged at error level, the
    task run again). Now only the main process hears it: its warm shutdown lets the task
    finish, then stops the pool. Its own signals still reach the pool processes by pid (and
    billiard signals the whole group of a process that leads one, as this one then does); a
    pool process outliving the main one gets SIGKILL (Celery sets ``PR_SET_PDEATHSIG``).
    The solo and thread pools send this signal in the main process, which stays where it is."""
    from billiard.process import current_process

    if current_process().name != "MainProcess":
        os.setpgid(0, 0)


def connect_task_hooks() -> None:
    """Connect the ``task_prerun``/``task_postrun`` handlers (log context, the "last task
    finished" stamp of the index-lag gauge) in this process; ``ncindex up`` calls it for its
    in-process worker. Connecting again changes nothing."""
    signals.task_prerun.connect(_bind_task, weak=False, dispatch_uid="ncindex-bind-task")
    signals.task_postrun.connect(_task_done, weak=False, dispatch_uid="ncindex-task-done")


def use_json_logging() -> None:
    """Make the next Celery logging set-up in this process (worker or ``celery beat``) use
    :func:`ncindex.telemetry.configure_logging` instead of Celery's own handlers; for beat,
    call it from the module named by ``celery -A``."""
    signals.setup_logging.connect(_setup_logging, weak=False)


def _setup_logging(loglevel: Any = None, **kwargs: Any) -> None:
    """JSON logs for the worker; the level and format come from the app's settings."""
    from celery import current_app

    from ncindex.telemetry import configure_logging

    services = getattr(current_app, "ncindex_services", None)
    settings = getattr(services, "settings", None)
    level = settings.log_level if settings is not None else "INFO"
    configure_logging(level, json_lines=settings.log_json if settings is not None else True)


def _bind_task(task_id: str | None = None, task: Any = None, **kwargs: Any) -> None:
    from ncindex.telemetry import bind_task_context

    bind_task_context(task_id, getattr(task, "name", None) or "?")


def _task_done(task: Any = None, **kwargs: Any) -> None:
    import redis
    import structlog

    from ncindex.names import Names

    structlog.contextvars.clear_contextvars()
    app = getattr(task, "app", None)
    # the product's Redis URL (redis-py's form), not broker_url: that is kombu's form
    # (``redis+socket://`` for a unix socket, without the URL's query), which redis-py misreads
    url = app.conf.get("ncindex_redis_url") if app is not None else None
    namespace = app.conf.get("ncindex_namespace") if app is not None else None
    if url is None or namespace is None:
        return
    client = _redis_clients.get(url)
    if client is None:
        client = _redis_clients[url] = redis.Redis.from_url(
            url, socket_timeout=2, socket_connect_timeout=2
        )
    with contextlib.suppress(redis.RedisError):  # a metric must never fail a task
        client.set(Names(namespace).last_task_done, f"{time.time():.3f}")


def main(argv: list[str] | None = None) -> int:
    """Probe: exit 0 when the heartbeat file is fresh, 1 otherwise."""
    parser = argparse.ArgumentParser(prog="python -m workers.heartbeat", description=__doc__)
    parser.add_argument("path", type=Path)
    parser.add_argument("--max-age", type=float, default=90.0, help="seconds")
    args = parser.parse_args(argv)
    fresh = is_fresh(args.path, args.max_age)
    if not fresh:
        print(f"heartbeat {args.path} missing or older than {args.max_age}s", file=sys.stderr)
    return 0 if fresh else 1


if __name__ == "__main__":
    sys.exit(main())
