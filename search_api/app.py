"""The search API's app factory."""

from __future__ import annotations

import structlog
from flask import Flask, Response

from ncindex.documents import DocRef
from ncindex.health import health_blueprint
from ncindex.problems import install_error_handlers
from ncindex.queueing import PUBLISH_RETRY, Producer, celery_app
from ncindex.runtime import Services
from ncindex.search import SearchService
from ncindex.settings import Settings
from ncindex.telemetry import metrics_payload
from search_api.search import search_blueprint

log = structlog.get_logger(__name__)


def create_app(
    settings: Settings | None = None,
    *,
    services: Services | None = None,
    producer: Producer | None = None,
) -> Flask:
    """Build the search API: ``POST /v1/search``, ``/livez``, ``/readyz``, ``/metrics``.

    ``services`` (default: built from ``settings``) provides the store, embedder, Redis and
    the Nextcloud client; ``producer`` sends the re-check tasks for dropped results. The
    model and store are opened on first use, not here, so the process starts fast.
    """
    settings = settings or (services.settings if services else Settings())
    services = services or Services(settings)
    producer = producer or celery_app(settings)

    def on_drop(user: str, ref: DocRef) -> None:
        if user not in settings.accounts or not ref.doc_id.isdigit():
            return
        try:
            producer.send_task(
                "ncindex.index_node",
                kwargs={"user": user, "file_id": int(ref.doc_id)},
                queue="index",
                retry_policy=PUBLISH_RETRY,
            )
        except Exception as exc:  # fire and forget: reconcile catches what this misses
            log.warning("drop_enqueue_failed", doc_key=ref.key, error=str(exc))

    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024
    holder: dict[str, SearchService] = {}

    def service() -> SearchService:
        if "svc" not in holder:
            holder["svc"] = SearchService(settings, services.store, services.embedder, on_drop)
        return holder["svc"]

    install_error_handlers(app)
    app.register_blueprint(search_blueprint(services, service))

    def ready_store() -> None:
        services.store.count()

    def ready_model() -> None:
        services.embedder.embed_query_sparse("ready")

    app.register_blueprint(
        health_blueprint({"redis": services.redis.ping, "store": ready_store, "model": ready_model})
    )

    @app.get("/metrics")
    def metrics() -> Response:
        body, content_type = metrics_payload()
        return Response(body, content_type=content_type)

    app.extensions["ncindex_services"] = services
    return app
