"""The receiver's app factory."""

from __future__ import annotations

import redis
import structlog
from flask import Flask, Response

from ncindex.ingest.queueing import Producer, celery_app, check_redis
from ncindex.settings import Settings, weak_webhook_secret
from ncindex.telemetry import metrics_payload
from ncindex.text.ocr import ocr_status
from ncindex.web.health import SharedRedis, health_blueprint, shared_reports
from ncindex.web.problems import install_error_handlers
from ncindex.web.proxies import trusted_wsgi
from webhook_receiver.hooks import Receiver, hooks_blueprint

log = structlog.get_logger(__name__)


def create_app(
    settings: Settings | None = None,
    *,
    producer: Producer | None = None,
    redis_client: redis.Redis | None = None,
) -> Flask:
    """Build the receiver: ``POST /hooks/nextcloud``, ``/livez``, ``/readyz`` (its Redis
    check: :class:`~ncindex.web.health.SharedRedis`), ``/metrics``. Asks Redis once (2 s timeouts).

    ``producer`` sends tasks by name (default: a task-less Celery app on ``redis_url``).
    Raises ``ValueError`` when no webhook secret is configured: an open receiver would let
    anyone trigger work. A short or placeholder secret is accepted with a warning logged
    (``webhook_secret_weak``, the rule ``ncindex doctor`` warns by:
    :func:`~ncindex.settings.weak_webhook_secret`).
    """
    settings = settings or Settings()
    if not settings.webhook_secret.get_secret_value():
        raise ValueError("NCINDEX_WEBHOOK_SECRET must be set")
    weakness = weak_webhook_secret(settings)
    if weakness:
        log.warning("webhook_secret_weak", problem=weakness)
    client = redis_client or redis.Redis.from_url(
        settings.redis_url, socket_timeout=2, socket_connect_timeout=2
    )
    app = Flask(__name__)
    app.wsgi_app = trusted_wsgi(app.wsgi_app, settings.trusted_proxy_hops)  # type: ignore[method-assign]
    receiver = Receiver(settings, producer or celery_app(settings), client)
    app.extensions["ncindex_receiver"] = receiver
    install_error_handlers(app)
    app.register_blueprint(hooks_blueprint(receiver))
    redis_ready = SharedRedis(lambda: check_redis(client))
    app.register_blueprint(
        health_blueprint(
            {"redis": redis_ready},
            {
                **shared_reports(redis_ready, client, settings.names, settings.accounts),
                "ocr": lambda: ocr_status(settings),
            },
        )
    )

    @app.get("/metrics")
    def metrics() -> Response:
        body, content_type = metrics_payload()
        return Response(body, content_type=content_type)

    return app
