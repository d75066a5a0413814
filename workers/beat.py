"""The beat schedule, as data from settings (DESIGN §7), and the entry module for beat.

``celery -A workers.beat beat`` runs the one beat of a distributed deployment; ``ncindex up``
runs the same schedule in a thread (:func:`start_embedded_beat`).

One entry per doc type that has a source (:data:`ncindex.sources.registry.SOURCES`):
``reconcile-<doc_type>`` sends ``ncindex.reconcile_check`` every
``reconcile_periods[doc_type]`` seconds to the ``reconcile`` queue; a type listed in
``reconcile_disable`` has no entry; each message ``expires`` a little under the period, so
ticks that waited through an outage do not pile up. The check task holds a Redis lock that
expires before the next tick (:func:`check_lock_seconds`), so two beats or a backlog never
stack scans. ``outage-requeue`` sends ``ncindex.outage_requeue`` every minute: tasks that gave
up during a Nextcloud outage are sent again as soon as it answers (:mod:`workers.base`).
``rescan-if-forgotten`` sends ``ncindex.rescan_if_forgotten`` every minute: a Redis found
without the deployment's marker (a first start, or restarted empty) has every account scanned
at once (:func:`ncindex.sync.reconcile.rescan_if_forgotten`), and the scan a first webhook
registration asked for is sent once due (:func:`ncindex.sync.reconcile.rescan_if_due`).
``poll-shares`` sends ``ncindex.poll_shares`` every ``share_poll_seconds`` (none when it is 0,
or when files and notes are both in ``reconcile_disable``): Nextcloud sends no webhook for a
share, so what is shared with an account, or unshared, is acted on then
(:mod:`ncindex.sync.shares`) rather than at the next file scan.
``sweep-gathered`` sends
``ncindex.sweep_gathered`` every minute: gathered index actions that no flush is on its way to
send are sent (:func:`ncindex.ingest.queueing.sweep_gathered`).
``revoke-app-passwords`` sends ``ncindex.revoke_app_passwords`` every minute: the search
page's Login Flow app passwords that no live session holds — a delete that failed or never ran,
an abandoned page's, an expired session's — are deleted in Nextcloud
(:mod:`ncindex.web.revocations`).

The beat of ``celery -A workers.beat beat`` sends its reconcile checks and share poll at its
first tick, then every period (Celery's in-memory schedule would wait a whole period, and again
after every restart: a beat restarted more often than the period never scanned); the check's
lock keeps that to one scan a period. ``ncindex up`` requests its own scans as it starts.
"""

from __future__ import annotations

import signal
import threading
from datetime import datetime, timedelta
from types import FrameType
from typing import Any

import click
from celery import Celery
from celery.beat import Service
from kombu.utils.functional import retry_over_time

from ncindex import names
from ncindex.settings import Settings, settings_or_exit
from ncindex.sources.registry import NODE_TYPES, SOURCES
from ncindex.web import revocations

OUTAGE_REQUEUE_SECONDS = 60
"""How often ``ncindex.outage_requeue`` asks whether Nextcloud is back (when tasks wait)."""
FORGOTTEN_CHECK_SECONDS = 60
"""How often ``ncindex.rescan_if_forgotten`` looks for the deployment's marker in Redis."""
SWEEP_GATHERED_SECONDS = 60
"""How often ``ncindex.sweep_gathered`` looks for gathered actions no flush will send."""


def expires_seconds(period: float) -> float:
    """How long a tick stays valid: a little under ``period`` (90 %, at least 1 s less)."""
    return max(1.0, min(period * 0.9, period - 1))


def check_lock_seconds(period: float) -> int:
    """Expiry of the check task's lock: shorter than ``period`` (80 %, at least 1 s)."""
    return max(1, int(period * 0.8))


def beat_schedule(settings: Settings, *, scan_now: datetime | None = None) -> dict[str, Any]:
    """The beat schedule: ``reconcile-<doc_type>`` entries for the enabled types with a
    source, ``poll-shares`` (when on), ``outage-requeue``, ``rescan-if-forgotten``,
    ``sweep-gathered`` and ``revoke-app-passwords``. With ``scan_now`` (the beat's clock
    now) the reconcile entries and the share poll are due at the first tick (``last_run_at`` a
    period before it)."""
    schedule: dict[str, dict[str, Any]] = {}
    for doc_type, period in sorted(settings.reconcile_periods.items()):
        if doc_type in settings.reconcile_disable or doc_type not in SOURCES:
            continue
        schedule[f"reconcile-{doc_type}"] = {
            "task": names.RECONCILE_CHECK,
            "schedule": timedelta(seconds=period),
            "kwargs": {"doc_type": doc_type},
            "options": {"queue": names.RECONCILE, "expires": expires_seconds(period)},
        }
        if scan_now is not None:
            schedule[f"reconcile-{doc_type}"]["last_run_at"] = scan_now - timedelta(seconds=period)
    if settings.share_poll_seconds and any(
        t.value not in settings.reconcile_disable for t in NODE_TYPES
    ):
        every = settings.share_poll_seconds
        schedule["poll-shares"] = {
            "task": names.POLL_SHARES,
            "schedule": timedelta(seconds=every),
            "options": {"queue": names.RECONCILE, "expires": expires_seconds(every)},
        }
        if scan_now is not None:
            schedule["poll-shares"]["last_run_at"] = scan_now - timedelta(seconds=every)
    for name, task, every in (
        ("outage-requeue", names.OUTAGE_REQUEUE, OUTAGE_REQUEUE_SECONDS),
        ("rescan-if-forgotten", names.RESCAN_IF_FORGOTTEN, FORGOTTEN_CHECK_SECONDS),
        ("sweep-gathered", names.SWEEP_GATHERED, SWEEP_GATHERED_SECONDS),
        ("revoke-app-passwords", names.REVOKE_APP_PASSWORDS, revocations.RETRY_SECONDS),
    ):
        schedule[name] = {
            "task": task,
            "schedule": timedelta(seconds=every),
            "options": {"queue": names.INGEST, "expires": expires_seconds(every)},
        }
    return schedule


def configure_beat(app: Celery, settings: Settings, *, scan_at_start: bool = False) -> Celery:
    """Put :func:`beat_schedule` on ``app`` with the in-memory scheduler (the schedule is
    data; nothing is worth persisting across restarts), its reconcile checks due at the first
    tick with ``scan_at_start``. Returns ``app``."""
    app.conf.beat_schedule = beat_schedule(settings, scan_now=app.now() if scan_at_start else None)
    app.conf.beat_scheduler = "celery.beat:Scheduler"
    app.conf.beat_max_loop_interval = MAX_LOOP_SECONDS
    return app


def start_embedded_beat(app: Celery, settings: Settings) -> Any:
    """Run beat in a daemon thread of this process (``ncindex up``); returns the thread,
    whose ``stop()`` ends it."""
    from celery.beat import EmbeddedService

    configure_beat(app, settings)
    service = EmbeddedService(app, thread=True, scheduler_cls="celery.beat:Scheduler")
    service.start()
    return service


#: The longest beat sleeps between two looks at its schedule and its stop flag, seconds
#: (Celery's default is 300): a stop signal that arrives while it sends a tick's task is seen
#: within this time.
MAX_LOOP_SECONDS = 5


class _StopFlag(threading.Event):
    """Beat's shutdown event (``Service._is_shutdown``), also set by :class:`_StopOnce`
    without a lock: beat's loop asks ``is_set()`` before each pass."""

    def __init__(self) -> None:
        super().__init__()
        self.signalled = False

    def is_set(self) -> bool:
        return self.signalled or super().is_set()


class _StopOnce:
    """SIGTERM/SIGINT handler of ``celery beat`` that takes no lock.

    Celery's own (``celery.apps.beat.Beat.install_sync_handler``) closes the scheduler, sets
    a ``threading.Event`` and raises ``SystemExit`` wherever the main thread happens to be;
    seen with SIGTERM, SIGTERM, SIGINT sent to beat's process group: beat slept on and never
    exited. This one marks :class:`_StopFlag` (a plain attribute) and raises ``SystemExit``
    only when the main thread was interrupted in beat's loop itself (``Service.start``,
    i.e. while it sleeps between passes) or while it waits for the broker (kombu's
    ``retry_over_time``, in which Celery's ``Scheduler._ensure_connected`` tries up to
    ``broker_connection_max_retries`` (100) times, up to 30 s apart: with Redis down, a beat
    given SIGTERM, SIGTERM, SIGINT stayed until its supervisor's SIGKILL), which that loop
    catches to save its schedule and return; elsewhere — sending a tick's task — the loop ends
    after that pass. Later signals do nothing."""

    def __init__(self, flag: _StopFlag) -> None:
        self.flag = flag
        self.raised = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.flag.signalled = True
        if self.raised or frame is None:
            return
        if frame.f_code is Service.start.__code__ or _waiting_for_broker(frame):
            self.raised = True
            raise SystemExit(0)


def _waiting_for_broker(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside kombu's ``retry_over_time`` (connecting again and again to
    a broker that does not answer: nothing is half-sent there)."""
    while frame is not None:
        if frame.f_code is retry_over_time.__code__:
            return True
        frame = frame.f_back
    return False


def _install_stop_handler(service: Service) -> None:
    """Give ``service`` a :class:`_StopFlag` and make :class:`_StopOnce` the SIGTERM and
    SIGINT handler (main thread only, as any signal handler)."""
    flag = _StopFlag()
    service._is_shutdown = flag
    handler = _StopOnce(flag)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _ignore_stop_signals() -> None:
    """SIGTERM and SIGINT ignored from now on (beat has stopped; the process only exits).

    Python puts back the default action of every signal it handles as the interpreter
    finalizes (``_PySignal_Fini`` in CPython's ``Modules/signalmodule.c``; an ignored signal
    stays ignored), and finalizing beat's interpreter takes a while (0.6 s idle, about 2 s
    under load here, most of it collecting garbage): a SIGTERM then, such as a supervisor's
    second, killed a beat that had already stopped (exit status -15 instead of 0)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _beat_program(beat_class: type, level: str) -> type:
    """``beat_class`` (Celery's ``app.Beat``, the program of ``celery beat``) as ncindex runs it.

    - It logs at ``level`` (``NCINDEX_LOG_LEVEL``, INFO unset) unless ``celery beat`` was given
      ``--loglevel``: Celery's own default is WARNING (``celery/bin/beat.py``), so beat of the
      Procfile and compose logged no "Scheduler" line while the settings said INFO.
    - :class:`_StopOnce` is its SIGTERM/SIGINT handler from where Celery would install its own
      (``install_sync_handler``, before ``Service.start`` logs "beat: Starting..."): installed
      at Celery's ``beat_init`` signal instead, it left Celery's handler in place for the
      ~40 ms ``Service.start`` takes to build the scheduler after that line.
    - Once its scheduler has stopped, SIGTERM and SIGINT are ignored
      (:func:`_ignore_stop_signals`)."""

    class Beat(beat_class):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            context = click.get_current_context(silent=True)
            given = context is not None and context.get_parameter_source("loglevel") not in (
                None,
                click.core.ParameterSource.DEFAULT,
            )
            if not given:
                kwargs["loglevel"] = level
            super().__init__(*args, **kwargs)

        def install_sync_handler(self, service: Service) -> None:
            _install_stop_handler(service)

        def start_scheduler(self) -> None:
            try:
                super().start_scheduler()
            finally:
                _ignore_stop_signals()

    return Beat


def __getattr__(name: str) -> Any:
    """``app`` for ``celery -A workers.beat beat``: the workers' app with the schedule, built
    from the environment on first access."""
    if name == "app":
        from workers.celery_app import create_celery

        settings = settings_or_exit()
        app = configure_beat(create_celery(settings), settings, scan_at_start=True)
        app.Beat = _beat_program(app.Beat, settings.log_level)
        globals()["app"] = app
        return app
    raise AttributeError(name)
