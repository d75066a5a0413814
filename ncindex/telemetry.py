"""Structured logs and Prometheus metrics (DESIGN §12).

Logging is configured once per process (:func:`configure_logging`): structlog over the
standard library, one JSON object per line, with context variables (``task_id``, ``doc_key``,
``user``) merged in. Gunicorn's own loggers (``gunicorn.error``, ``gunicorn.access``) get the
same formatter through :func:`gunicorn_logconfig` (its ``logconfig_dict``), and Celery's through
the worker hooks in ``workers/heartbeat.py``; an access line carries ``method``, ``path``,
``status``, ``duration_ms`` as fields.

Metrics are module-level Prometheus collectors; :func:`metrics_payload` renders them,
aggregating across gunicorn workers when ``PROMETHEUS_MULTIPROC_DIR`` is set (the gunicorn
config in ``deploy/`` sets it and marks exited workers dead). :class:`QueueCollector` adds
gauges read from Redis at scrape time:

* ``ncindex_queue_depth{queue}`` — messages waiting in each Celery queue (``LLEN``);
* ``ncindex_tasks_reserved`` — messages taken by a worker and not yet acknowledged (kombu's
  ``unacked`` hash: running tasks, and debounced tasks waiting for their countdown);
* ``ncindex_index_lag_seconds`` — how far the index is behind, as a lower bound: 0 when
  nothing is waiting or reserved; otherwise the larger of the age of the oldest reservation
  and, while messages wait, the time since the later of two stamps: a worker last finished a
  task (:attr:`~ncindex.names.Names.last_task_done`, stamped by the workers) and a scrape
  first saw messages waiting (:attr:`~ncindex.names.Names.waiting_since`, stamped here,
  cleared once the queues are empty). A change waiting behind a stuck or absent worker (even
  one that never ran) therefore shows a growing lag, and a busy but progressing queue a small one;
* ``ncindex_dead_letter_documents`` and ``ncindex_failing_documents`` — documents parked in the
  dead letter, and documents whose last task run failed (:mod:`ncindex.progress`);
* ``ncindex_indexing_documents_per_second`` and ``ncindex_indexing_chunks_per_second`` — what
  the workers finished (documents) and embedded (chunks) per second over the last
  :data:`~ncindex.progress.RATE_SECONDS` (the workers serve no ``/metrics`` of their own; they
  record these in Redis).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import redis
import structlog
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ncindex.accounts import refused_configured
from ncindex.names import QUEUES, Names
from ncindex.progress import Progress

WEBHOOK_EVENTS = Counter(
    "ncindex_webhook_events_total",
    "Webhook deliveries by outcome (queued, coalesced, ignored, rejected).",
    ["outcome", "reason"],
)
SEARCHES = Counter("ncindex_searches_total", "Search requests by outcome.", ["outcome"])
TASKS = Counter(
    "ncindex_tasks_total",
    "Celery task runs by task and outcome (ok, retry, failed).",
    ["task", "outcome"],
)
TASK_SECONDS = Histogram("ncindex_task_seconds", "Celery task run time by task, seconds.", ["task"])
SEARCH_SECONDS = Histogram("ncindex_search_seconds", "Search latency by stage, seconds.", ["stage"])
MCP_TOOL_CALLS = Counter(
    "ncindex_mcp_tool_calls_total",
    "MCP tool calls by tool and outcome (ok, or the error code).",
    ["tool", "outcome"],
)
VERIFICATIONS = Counter(
    "ncindex_verifications_total",
    "Verify-on-read results by doc_type and result (kept, dropped, error, unverified).",
    ["doc_type", "result"],
)

_configured = False
_extra_collectors: list[Collector] = []

_ACCESS_FIELDS = {
    "h": "remote",
    "m": "method",
    "U": "path",
    "q": "query",
    "s": "status",
    "B": "bytes",
    "M": "duration_ms",
    "a": "user_agent",
}


def _gunicorn_access_fields(
    logger: Any, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Turn a ``gunicorn.access`` record's atoms into fields (``event`` becomes ``request``)."""
    args = event_dict.pop("positional_args", None)  # the formatter passes foreign args here
    record = event_dict.get("_record")
    if record is not None and record.name == "gunicorn.access":
        atoms = args if isinstance(args, Mapping) else {}
        event_dict["event"] = "request"
        for atom, field in _ACCESS_FIELDS.items():
            value = atoms.get(atom, "-")
            if value in ("-", "", None):
                continue
            if field in ("status", "bytes", "duration_ms"):
                try:
                    value = int(value)
                except (TypeError, ValueError):
                    continue
            event_dict[field] = value
    return event_dict


def _shared_processors() -> list[Any]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def console_colors(stream: Any, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether console text written to ``stream`` (a file object) gets ANSI colours: only
    when it is a terminal (``isatty()``), and never while ``NO_COLOR`` is set to anything but
    the empty string (https://no-color.org). A redirected log stays plain text."""
    if environ.get("NO_COLOR", ""):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def json_formatter(json_lines: bool = True) -> logging.Formatter:
    """The stdlib formatter of every ncindex process: structlog's ``ProcessorFormatter``
    rendering one JSON object per line (or console text), for stdlib and structlog records.
    Every ncindex handler writes to stderr, so console text is coloured only when stderr is
    a terminal and ``NO_COLOR`` is unset (:func:`console_colors`)."""
    renderer = (
        structlog.processors.JSONRenderer()
        if json_lines
        else structlog.dev.ConsoleRenderer(colors=console_colors(sys.stderr))
    )
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*_shared_processors(), _gunicorn_access_fields],
        pass_foreign_args=True,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )


def bind_task_context(task_id: str | None, task: str, **fields: Any) -> None:
    """Start a task's log context afresh: ``task_id``, ``task`` (its name) and ``fields`` on
    every line it logs. A pool thread keeps its context from one task to the next, so what
    an earlier task bound is cleared first."""
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(task_id=task_id, task=task, **fields)


def configure_logging(level: str = "INFO", *, json_lines: bool = True) -> None:
    """Route structlog and stdlib logging to stderr as JSON lines (or console text);
    calling it again changes nothing."""
    global _configured
    if _configured:
        return
    _configured = True
    structlog.configure(
        processors=[*_shared_processors(), structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(json_formatter(json_lines))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # one line per Nextcloud request would drown everything else at INFO
    for chatty in ("httpx", "httpcore"):
        logging.getLogger(chatty).setLevel(max(root.level, logging.WARNING))


def gunicorn_logconfig(level: str = "INFO", *, json_lines: bool = True) -> dict[str, Any]:
    """A ``logconfig_dict`` for gunicorn: its error and access loggers propagate to a root
    handler with :func:`json_formatter`, so the master's lines match the app's."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "json": {"()": "ncindex.telemetry.json_formatter", "json_lines": json_lines}
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"level": level.upper(), "handlers": ["console"]},
        "loggers": {
            "gunicorn.error": {"level": level.upper(), "handlers": [], "propagate": True},
            "gunicorn.access": {"level": "INFO", "handlers": [], "propagate": True},
        },
    }


class QueueCollector(Collector):
    """Queue-depth, reserved-task and index-lag gauges read from Redis at each scrape (see the
    module docstring for their definitions), and ``ncindex_account_refused{user}`` for the
    ``accounts`` (the configured user ids) Nextcloud refused
    (:func:`ncindex.accounts.refused_configured`: an entry of a user no longer configured is
    not reported). A Redis error yields
    ``ncindex_queue_metrics_up 0`` and no other gauge, never a failed scrape."""

    def __init__(
        self,
        client: redis.Redis,
        queues: Sequence[str],
        clock: Any = time.time,
        *,
        keys: Names,
        accounts: Collection[str],
    ) -> None:
        self.client = client
        self.keys = keys
        self.accounts = accounts
        self.queues = tuple(queues)
        self.clock = clock

    def read(self) -> dict[str, Any]:
        """``{"depth": {queue: n}, "reserved": n, "lag": seconds}`` from one pipeline, and one
        command that stamps or clears :attr:`~ncindex.names.Names.waiting_since`."""
        keys = self.keys
        pipe = self.client.pipeline(transaction=False)
        for queue in self.queues:
            pipe.llen(keys.queue_list(queue))
        pipe.hlen(keys.unacked)
        pipe.zrange(keys.unacked_index, 0, 0, withscores=True)
        pipe.get(keys.last_task_done)
        *depths, reserved, oldest, last_done = pipe.execute()
        now = float(self.clock())
        depth = dict(zip(self.queues, (int(d) for d in depths), strict=True))
        lag = 0.0
        if reserved and oldest:
            lag = max(lag, now - float(oldest[0][1]))
        if any(depth.values()):
            first_seen = self.client.set(keys.waiting_since, now, nx=True, get=True)
            since = max(float(first_seen or now), float(last_done or 0))
            lag = max(lag, now - since)
        else:
            self.client.delete(keys.waiting_since)
        return {"depth": depth, "reserved": int(reserved), "lag": max(0.0, lag)}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The gauges of one scrape."""
        up = GaugeMetricFamily("ncindex_queue_metrics_up", "Whether Redis answered the scrape.")
        try:
            values = self.read()
        except redis.RedisError:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        depth = GaugeMetricFamily(
            "ncindex_queue_depth", "Messages waiting in each Celery queue.", labels=["queue"]
        )
        for queue, n in values["depth"].items():
            depth.add_metric([queue], n)
        yield depth
        yield GaugeMetricFamily(
            "ncindex_tasks_reserved",
            "Messages taken by a worker and not yet acknowledged.",
            value=values["reserved"],
        )
        yield GaugeMetricFamily(
            "ncindex_index_lag_seconds",
            "Lower bound of how far the index is behind Nextcloud, seconds.",
            value=values["lag"],
        )
        refused = GaugeMetricFamily(
            "ncindex_account_refused",
            "1 for each configured account whose credentials Nextcloud refused (HTTP 401).",
            labels=["user"],
        )
        try:
            users = refused_configured(self.client, self.keys, self.accounts)
        except redis.RedisError:
            users = []
        for user in users:
            refused.add_metric([user], 1)
        yield refused
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.hlen(self.keys.deadletter)
            pipe.hlen(self.keys.failing)
            parked, failing = pipe.execute()
            rates = Progress(self.client, self.keys).rates(now=float(self.clock()))
        except redis.RedisError:
            return
        for name, text, value in (
            ("ncindex_dead_letter_documents", "Documents parked in the dead letter.", parked),
            ("ncindex_failing_documents", "Documents whose last task run failed.", failing),
            (
                "ncindex_indexing_documents_per_second",
                "Documents the workers finished per second over the last 5 minutes.",
                rates.documents_per_second,
            ),
            (
                "ncindex_indexing_chunks_per_second",
                "Chunks the workers embedded per second over the last 5 minutes.",
                rates.chunks_per_second,
            ),
        ):
            yield GaugeMetricFamily(name, text, value=value)


def register_queue_metrics(
    redis_url: str, keys: Names, accounts: Collection[str], queues: Iterable[str] | None = None
) -> QueueCollector:
    """Serve :class:`QueueCollector` gauges of deployment ``keys`` (its configured
    ``accounts``' user ids) from :func:`metrics_payload` in this process."""
    client = redis.Redis.from_url(redis_url, socket_timeout=2, socket_connect_timeout=2)
    queues = tuple(queues) if queues is not None else QUEUES
    collector = QueueCollector(client, queues, keys=keys, accounts=accounts)
    _extra_collectors.append(collector)
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        REGISTRY.register(collector)
    return collector


def unregister_queue_metrics(collector: QueueCollector) -> None:
    """Stop serving ``collector`` (from :func:`register_queue_metrics`) and close its Redis
    client: what ``ncindex up`` does when it stops."""
    if collector in _extra_collectors:
        _extra_collectors.remove(collector)
        if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            REGISTRY.unregister(collector)
    collector.client.close()


def mark_process_dead(pid: int) -> None:
    """Gunicorn ``child_exit`` hook body: drop a dead worker's live gauges (its counters stay
    counted) when metrics are multiprocess."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)


def metrics_payload() -> tuple[bytes, str]:
    """The Prometheus exposition text and its content type."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        for collector in _extra_collectors:
            registry.register(collector)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST
