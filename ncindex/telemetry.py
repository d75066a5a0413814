"""Structured logs and Prometheus metrics (DESIGN §12).

Logging is configured once per process (:func:`configure_logging`): structlog over the
standard library, one JSON object per line, with context variables (``task_id``, ``doc_key``,
``user``) merged in. Metrics are module-level Prometheus collectors; :func:`metrics_payload`
renders them, aggregating across gunicorn workers when ``PROMETHEUS_MULTIPROC_DIR`` is set.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

WEBHOOK_EVENTS = Counter(
    "ncindex_webhook_events_total",
    "Webhook deliveries by outcome (queued, coalesced, ignored, rejected).",
    ["outcome", "reason"],
)
SEARCHES = Counter("ncindex_searches_total", "Search requests by outcome.", ["outcome"])
SEARCH_SECONDS = Histogram("ncindex_search_seconds", "Search latency by stage, seconds.", ["stage"])
VERIFICATIONS = Counter(
    "ncindex_verifications_total",
    "Verify-on-read results by doc_type and result (kept, dropped, error, unverified).",
    ["doc_type", "result"],
)

_configured = False


def configure_logging(level: str = "INFO", *, json_lines: bool = True) -> None:
    """Route structlog and stdlib logging to stderr as JSON lines (or console text);
    calling it again changes nothing."""
    global _configured
    if _configured:
        return
    _configured = True
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer = (
        structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def metrics_payload() -> tuple[bytes, str]:
    """The Prometheus exposition text and its content type."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST
