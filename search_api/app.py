"""The search API's app factory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from flask import Flask, Response, request
from flask_limiter import RequestLimit
from flask_limiter.errors import RateLimitExceeded
from werkzeug.exceptions import HTTPException

from ncindex.ingest.queueing import Producer, celery_app
from ncindex.nextcloud.client import NextcloudClient
from ncindex.runtime import Services
from ncindex.search import rcp as rcp_server
from ncindex.search.rcp_sessions import RcpSessions
from ncindex.search.wiring import service_factory
from ncindex.settings import Settings
from ncindex.telemetry import metrics_payload
from ncindex.text.ocr import ocr_status
from ncindex.web.auth import confirmed, forget_caller, resolve_caller
from ncindex.web.health import SharedRedis, health_blueprint, shared_reports
from ncindex.web.problems import MAX_BODY_BYTES, install_error_handlers, problem, read_body
from ncindex.web.proxies import trusted_wsgi
from ncindex.web.ratelimit import (
    REFUSED_SCOPE,
    SCOPE,
    address_key,
    breach_detail,
    create_limiter,
    refused,
    retry_after_seconds,
)
from search_api.facets import facets_blueprint
from search_api.openapi import openapi_blueprint
from search_api.rcp import rcp_blueprint, request_id, rpc_error_response
from search_api.search import search_blueprint
from search_api.status import status_blueprint
from search_api.ui import install_session_auth, ui_blueprint

log = structlog.get_logger(__name__)


def create_app(
    settings: Settings | None = None,
    *,
    services: Services | None = None,
    producer: Producer | None = None,
) -> Flask:
    """Build the search API: ``POST /v1/search``, ``GET /v1/filters``,
    ``GET /v1/documents/<doc_type>/<doc_id>/context``, ``GET /v1/folders``, ``GET /v1/tags``,
    ``GET /v1/categories``, ``GET /v1/owners``, ``GET /v1/status``, ``POST /rcp/<method>``,
    ``GET /openapi.json``, ``/livez``, ``/readyz``, ``/metrics``, and the search page
    (``GET /``, ``/ui/…``, :mod:`search_api.ui`).

    ``services`` (default: built from ``settings``) provides the store, embedder, Redis and the
    Nextcloud client; ``producer`` sends the re-check tasks for dropped results. The model and
    store are opened on first use, not here, so the process starts fast. Search, context, the
    folder, tag, category and owner lists, ``GET /v1/status``, RCP calls (but ``info`` and
    ``ping``) and the page's sign-in routes share one per-caller rate limit
    (``settings.search_rate_limit``), and refused credentials count against the client's address
    at the same rate (callers whose credentials Nextcloud confirmed within
    ``user_cache_seconds`` are exempt from it).
    """
    settings = settings or (services.settings if services else Settings())
    services = services or Services(settings)
    producer = producer or celery_app(settings)

    app = Flask(__name__)
    app.wsgi_app = trusted_wsgi(app.wsgi_app, settings.trusted_proxy_hops)  # type: ignore[method-assign]
    service = service_factory(services, producer)

    def authenticate(authorization: str | None) -> NextcloudClient:
        return resolve_caller(services, authorization)

    def on_breach(limit: RequestLimit) -> Response:
        retry = retry_after_seconds(limit)
        headers = {"Retry-After": str(retry)}
        if request.path.startswith("/rcp/"):
            try:  # answered with the request's id where it can be read (not for a batch)
                id_ = request_id(read_body(request, MAX_BODY_BYTES))
            except HTTPException:  # too large or unreadable: the 429 stands, its id unknown
                id_ = None
            response = rpc_error_response(
                429,
                -32011,
                "rate limited",
                {"retryable": True, "retryAfterMs": retry * 1000},
                id_=id_,
            )
            response.headers.update(headers)
            return response
        return problem(429, "rate_limited", breach_detail([limit.limit]), headers=headers)

    install_error_handlers(app)
    limiter = create_limiter(app, settings, on_breach)
    shared = None
    if limiter:
        per_caller = limiter.shared_limit(settings.search_rate_limit, scope=SCOPE)
        # callers Nextcloud confirmed recently are exempt: a flood of bad credentials from
        # an address many share (a NAT, a proxy) must not lock them out
        per_address_refused = limiter.shared_limit(
            settings.search_rate_limit,
            scope=REFUSED_SCOPE,
            key_func=address_key,
            deduct_when=refused,
            exempt_when=lambda: confirmed(services, request.headers.get("Authorization")),
        )

        def shared(view: Callable[..., Any]) -> Callable[..., Any]:
            return per_caller(per_address_refused(view))

    @app.errorhandler(RateLimitExceeded)
    def _rate_limited(exc: RateLimitExceeded) -> Response:
        if exc.response is not None:
            return exc.response
        return problem(429, "rate_limited", exc.description or "", headers={"Retry-After": "60"})

    sessions = RcpSessions(lambda: services.redis_breaker, settings.names)
    server = rcp_server.RcpServer(
        service,
        authenticate,
        sessions,
        citation_base=settings.nextcloud_url,
        forget=lambda authorization: forget_caller(services, authorization),
    )
    app.register_blueprint(search_blueprint(services, service, shared))
    app.register_blueprint(rcp_blueprint(server, shared))
    app.register_blueprint(
        facets_blueprint(services, lambda: services.models.view().live.store, shared)
    )
    app.register_blueprint(ui_blueprint(services, shared, settings))
    install_session_auth(app, services)
    app.register_blueprint(status_blueprint(services, shared))
    app.register_blueprint(openapi_blueprint())

    def ready_store() -> None:
        services.store.count()

    def ready_model() -> None:
        services.embedder.embed_query_sparse("ready")

    redis_ready = SharedRedis(services.redis.ping)
    app.register_blueprint(
        health_blueprint(
            {"redis": redis_ready, "store": ready_store, "model": ready_model},
            {
                **shared_reports(redis_ready, services.redis, settings.names, settings.accounts),
                "ocr": lambda: ocr_status(settings),
            },
        )
    )

    @app.get("/metrics")
    def metrics() -> Response:
        body, content_type = metrics_payload()
        return Response(body, content_type=content_type)

    app.extensions["ncindex_services"] = services
    app.extensions["ncindex_search"] = service
    return app
