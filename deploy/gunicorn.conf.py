"""Gunicorn settings for both HTTP apps (``gunicorn -c deploy/gunicorn.conf.py
webhook_receiver.wsgi:app`` / ``search_api.wsgi:app``); the image has it at
``/etc/ncindex/gunicorn.conf.py``. Command-line flags override what is set here.

* Listens on ``$HOST:$PORT`` (default ``0.0.0.0:8080``); ``GUNICORN_WORKERS`` (2),
  ``GUNICORN_THREADS`` (4), ``GUNICORN_TIMEOUT`` (60 s, also the graceful-shutdown time); a
  value that is not a whole number in range (each at least 1, ``PORT`` at most 65535) stops
  the process with one line naming the variable.
* Logs: gunicorn's error and access loggers render through ncindex's structlog formatter, one
  JSON object per line on stderr (``ncindex.telemetry.gunicorn_logconfig``).
* Metrics: Prometheus multiprocess mode. ``PROMETHEUS_MULTIPROC_DIR`` is used when set (the
  chart points it at an emptyDir) and otherwise created here, before anything imports
  ``prometheus_client``; it is emptied when the master starts, a dead worker's live gauges are
  dropped in ``child_exit``, and each worker serves the queue gauges (Redis at
  ``NCINDEX_REDIS_URL``) from ``/metrics``.
* Errors: a request gunicorn cannot parse (request line, headers) is answered problem+json
  with a ``code`` (``ncindex.web.server_errors``), not gunicorn's HTML page; a body whose
  chunked framing breaks is read by the app, which answers 400 ``invalid_value`` (``body``).
* Forwarded headers: gunicorn and its uvicorn worker trust none (``forwarded_allow_ips``);
  the apps apply ``NCINDEX_TRUSTED_PROXY_HOPS`` themselves (``ncindex.web.proxies``).
* Signals: a worker treats SIGINT and SIGQUIT as SIGTERM (``_quit_as_term``: gunicorn's
  own handler of them can deadlock); the master's SIGINT/SIGQUIT still stop quickly, its
  SIGTERM gracefully, both within ``graceful_timeout``.
* Garbage collection: each worker freezes what it has loaded (``gc.freeze`` once the app is
  imported), so no full collection walks Flask, Celery and pydantic again: in the receiver
  such a walk took 51 ms, stalling every request the worker held (one in 10,000 deliveries,
  measured in-process; none with the freeze).
"""

import gc
import os
import shutil
import signal
import tempfile
from pathlib import Path

if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="ncindex-prometheus-")

# Imported only now: prometheus_client reads PROMETHEUS_MULTIPROC_DIR when first imported.
from ncindex import telemetry
from ncindex.settings import settings_or_exit
from ncindex.web import server_errors

server_errors.install_in_gunicorn()

_settings = settings_or_exit()


def _whole(name, default, low, high=None):
    """The whole number in the variable ``name`` (``default`` when unset), from ``low`` to
    ``high``; otherwise the process stops with one line naming the variable (``GUNICORN_WORKERS
    =two`` was a traceback, ``0`` a master that listened with no worker to answer)."""
    text = os.environ.get(name, "").strip() or str(default)
    value = int(text) if text.isascii() and text.isdigit() else None
    if value is None or value < low or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise SystemExit(f"ncindex: {name} must be a whole number {bounds}")
    return value


bind = f"{os.environ.get('HOST', '0.0.0.0')}:{_whole('PORT', 8080, 1, 65535)}"  # noqa: S104
workers = _whole("GUNICORN_WORKERS", 2, 1)
threads = _whole("GUNICORN_THREADS", 4, 1)
timeout = _whole("GUNICORN_TIMEOUT", 60, 1)
graceful_timeout = timeout
keepalive = 5
# Heartbeat files of gunicorn's own worker watchdog: on tmpfs when there is one.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None  # noqa: S108
# Gunicorn ≥ 27 opens a control socket under $HOME; one per host would collide, none is used.
control_socket_disable = True
# No peer is trusted with forwarded headers here: NCINDEX_TRUSTED_PROXY_HOPS alone decides whose
# X-Forwarded-For/-Proto count (ncindex.web.proxies). gunicorn's default, 127.0.0.1 and ::1, let
# anything on the host (a sidecar) set the scheme, and the uvicorn worker, given this list,
# took its X-Forwarded-For as the client's address: a per-address rate limit it could dodge
forwarded_allow_ips = ""
logconfig_dict = telemetry.gunicorn_logconfig(_settings.log_level, json_lines=_settings.log_json)


def on_starting(server):
    """Stop with one line when the app is the webhook receiver and ``NCINDEX_WEBHOOK_SECRET``
    is unset (its workers failed to boot, each with a traceback, and gunicorn exited 3); then
    empty the multiprocess directory: files of an earlier run would be counted again."""
    app_uri = getattr(server.app, "app_uri", None) or ""
    if app_uri.startswith("webhook_receiver") and not _settings.webhook_secret.get_secret_value():
        raise SystemExit(
            "ncindex: setting NCINDEX_WEBHOOK_SECRET: must be set for the webhook receiver"
        )
    directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    directory.mkdir(parents=True, exist_ok=True)
    for entry in directory.iterdir():
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def post_worker_init(worker):
    """Serve the queue-depth and index-lag gauges from this worker's ``/metrics``; make
    SIGINT and SIGQUIT stop this worker as SIGTERM does (:func:`_quit_as_term`); then move
    everything loaded so far out of the garbage collector's generations (``gc.freeze``)."""
    telemetry.register_queue_metrics(_settings.redis_url, _settings.names, _settings.accounts)
    _quit_as_term(worker)
    gc.collect()
    gc.freeze()


def child_exit(server, worker):
    """A worker exited: its counters stay counted, its live gauges go."""
    telemetry.mark_process_dead(worker.pid)


def _quit_as_term(worker):
    """Give a worker's SIGINT and SIGQUIT the handler of SIGTERM (finish the requests in
    hand, then exit; gunicorn's master bounds it by ``graceful_timeout``).

    Gunicorn's gthread worker (27.0.1, ``workers/gthread.py``, ``handle_quit``) shuts its
    thread pool down inside the signal handler, which takes the pool's ``_shutdown_lock``;
    when the signal arrives while the worker's main thread holds that lock (``submit`` of an
    accepted connection), the handler waits for itself for ever. Seen with SIGTERM, SIGTERM,
    SIGINT sent to the process group (a shell's Ctrl-C, honcho, ``make``): the worker never
    exited, and the master waited out ``graceful_timeout`` each time. SIGTERM's handler only
    sets a flag and writes to a pipe."""
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, worker.handle_exit)
