"""``ncindex up``: everything in one process on the embedded engine (DESIGN §10).

One process because the embedded store (Qdrant Edge) allows one process per folder: the
receiver, the search API and the MCP server share one HTTP port (the MCP server, ASGI, runs
under uvicorn on a loopback port the HTTP port relays ``/mcp`` to), a Celery worker runs in a
thread of the same process, and the store lives under ``data_dir``. Redis is used where one
answers at ``redis_url``; otherwise a private ``redis-server`` is started. Without a Nextcloud
configured
the Nextcloud simulator is started with the bundled sample corpus, the webhooks are registered
through its OCS API, and its deliveries index the corpus — a newcomer sees it work.

Beat runs in a thread of the same process (:func:`workers.beat.start_embedded_beat`), and one
reconcile pass is requested at start, after the sample corpus is written.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

import redis
import structlog
from celery import Celery
from pydantic import SecretStr
from qdrant_client import models
from werkzeug.serving import BaseWSGIServer, make_server

from mcp_server import create_app as create_mcp_app
from ncindex.ingest.queueing import check_redis
from ncindex.ingest.registration import register
from ncindex.redis_server import RedisProcess, reachable, start_redis
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.store.edge_optimizer import EdgeOptimizer
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.sync.reconcile import request_scans, scan_types
from ncindex.web.asgi import ServedAsgi, serve_in_thread
from ncindex.web.dispatch import dispatch, forward_to
from ncindex.web.server_errors import ProblemRequestHandler
from search_api import create_app as create_search_app
from webhook_receiver import create_app as create_receiver_app
from workers.beat import start_embedded_beat
from workers.celery_app import create_celery

log = structlog.get_logger(__name__)

#: The namespace of ``ncindex up`` when ``NCINDEX_NAMESPACE`` is not set.
NAMESPACE = "ncindex-up"


def start_worker(
    celery: Celery, concurrency: int = 2, *, restart_after: float = 5.0
) -> threading.Thread:
    """Run a Celery worker consuming every queue in a daemon thread of this process, and start
    it again ``restart_after`` seconds after it stops.

    A standalone ``celery worker`` stops on an "unrecoverable error" and exits, so that its
    supervisor (Kubernetes, systemd) starts a new one; in this process nothing else would. One
    such error, seen: Redis lost while the worker held a delayed task (kombu restoring the
    unacked message raises ``AttributeError``), after which nothing was indexed any more.

    The app is made the process default first: Celery's thread pool looks tasks up through
    the current app, which would otherwise be Celery's default app.
    """
    celery.set_default()
    celery.set_current()

    def run() -> None:
        while True:
            worker = celery.WorkController(
                pool_cls="threads",
                concurrency=concurrency,
                loglevel="WARNING",
                without_heartbeat=True,
                without_mingle=True,
                without_gossip=True,
            )
            worker.start()
            log.error("worker_stopped", exitcode=worker.exitcode, restart_in=restart_after)
            time.sleep(restart_after)

    thread = threading.Thread(target=run, name="celery-worker", daemon=True)
    thread.start()
    return thread


@dataclass
class Embedded:
    """A running embedded deployment; :meth:`close` stops what it started."""

    settings: Settings
    services: Services
    server: BaseWSGIServer
    simulator: Any = None
    simulator_server: Any = None
    redis: RedisProcess | None = None
    sample: Any = None
    beat: Any = None
    #: the :class:`~ncindex.ingest.registration.RegisterResult` of start-up: what Nextcloud refused
    webhooks: Any = None
    #: the embedded engine's background optimiser (None on a Qdrant server)
    optimizer: EdgeOptimizer | None = None
    #: the MCP server (uvicorn on a loopback port; the HTTP port relays ``/mcp`` to it)
    mcp: ServedAsgi | None = None

    @property
    def url(self) -> str:
        """Base URL of the HTTP port (receiver, search API, MCP server at ``/mcp``)."""
        return f"http://{self.server.host}:{self.server.port}"

    def documents_indexed(self) -> int:
        """Number of documents in the store (points with ``chunk_index`` 0)."""
        first_chunks = models.Filter(
            must=[models.FieldCondition(key="chunk_index", match=models.MatchValue(value=0))]
        )
        return self.services.store.count(first_chunks)

    def close(self) -> None:
        """Stop beat, the optimiser, the HTTP server, the simulator, the store and a private
        Redis."""
        if self.beat is not None:
            self.beat.stop()
        if self.optimizer is not None:
            self.optimizer.stop()
        self.server.shutdown()
        if self.mcp is not None:
            self.mcp.close()
        if self.simulator_server is not None:
            self.simulator_server.close()
        self.services.close()
        if self.redis is not None:
            self.redis.stop()


def edge_stores(services: Services) -> list[QdrantEdgeStore]:
    """The embedded engine's shards this process serves: the live model's and, while a model
    change keeps one, the mirror model's."""
    view = services.models.view()
    handles = [view.live] if view.mirror is None else [view.live, view.mirror]
    return [h.store for h in handles if isinstance(h.store, QdrantEdgeStore)]


def start(settings: Settings, *, load_sample: bool = True) -> Embedded:
    """Start the embedded deployment and return once it serves HTTP.

    With no ``nextcloud_url`` the simulator is started (accounts and Nextcloud URL are taken
    from it; the webhook secret too, unless one is set) and, with ``load_sample``, the sample
    corpus is written into it after the webhooks are registered, so its deliveries index it in
    the background. Raises ``queueing.RedisTooOld`` when the Redis it would use is older than
    7.0.

    Unless ``NCINDEX_NAMESPACE`` is set, its Redis keys are under :data:`NAMESPACE` rather than
    the default namespace, so a ``make run`` against a shared Redis never takes a distributed
    deployment's tasks or locks (nor the other way round).
    """
    if "namespace" not in settings.model_fields_set:
        settings = settings.model_copy(update={"namespace": NAMESPACE})
    private_redis = None
    if not reachable(settings.redis_url):
        private_redis = start_redis()
        settings = settings.model_copy(update={"redis_url": private_redis.url})
    try:
        with redis.Redis.from_url(settings.redis_url, socket_timeout=2) as client:
            check_redis(client)
    except Exception:
        if private_redis is not None:
            private_redis.stop()
        raise
    simulator = simulator_server = None
    if not settings.nextcloud_url:
        from ncindex.simulator import NextcloudSimulator, serve_simulator
        from ncindex.simulator.sample import SAMPLE_ACCOUNTS

        simulator = NextcloudSimulator(delivery_delay=(0.2, 1.0))
        admin_password = secrets.token_urlsafe(16)
        simulator.add_user("admin", password=admin_password, display_name="Admin", admin=True)
        simulator_server = serve_simulator(simulator, host="127.0.0.1", port=0)
        settings = settings.model_copy(
            update={
                "nextcloud_url": simulator_server.url,
                "accounts": {u: SecretStr(p) for u, p in SAMPLE_ACCOUNTS.items()}
                | {"admin": SecretStr(admin_password)},
                "admin_user": "admin",
                # a chosen secret is kept, so deliveries can be sent by hand too
                "webhook_secret": settings.webhook_secret
                if settings.webhook_secret.get_secret_value()
                else SecretStr(secrets.token_urlsafe(24)),
            }
        )
    if not settings.webhook_secret.get_secret_value():
        raise ValueError("NCINDEX_WEBHOOK_SECRET must be set when a Nextcloud is configured")
    server = make_server(
        settings.host,
        settings.port,
        lambda e, s: [],
        threaded=True,
        request_handler=ProblemRequestHandler,
    )
    settings = settings.model_copy(
        update={"public_url": f"http://{server.host}:{server.port}"}
        if settings.public_url == Settings.model_fields["public_url"].default
        else {}
    )
    services = Services(settings)
    services.store  # noqa: B018  (open the store and load the models before serving)
    celery = create_celery(settings, services)
    start_worker(celery)
    beat = start_embedded_beat(celery, settings)
    mcp = serve_in_thread(create_mcp_app(settings, services=services, producer=celery))
    server.app = dispatch(
        create_receiver_app(settings, producer=celery, redis_client=services.redis),
        create_search_app(settings, services=services, producer=celery),
        forward_to(mcp.url),
    )
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    embedded = Embedded(settings, services, server, simulator, simulator_server, private_redis)
    embedded.mcp = mcp
    embedded.beat = beat
    if not settings.qdrant_url:
        embedded.optimizer = EdgeOptimizer(
            lambda: edge_stores(services),
            after_points=settings.edge_optimize_after_points,
            check_seconds=settings.edge_optimize_check_seconds,
        )
        embedded.optimizer.start()
    result = register(services.account(settings.webhook_admin), settings)
    embedded.webhooks = result
    log.info(
        "webhooks_registered",
        created=len(result.created),
        kept=len(result.kept),
        refused=[o.event_class for o in result.refused],
    )
    for line in result.missing_lines():
        log.warning("webhook_refused", detail=line)
    if simulator is not None and load_sample:
        from ncindex.simulator.sample import load_sample_corpus

        embedded.sample = load_sample_corpus(simulator)
    # One reconcile pass now: it catches up on what changed while ncindex was down and, for
    # the sample, gives bob the folder alice shares with him (share changes fire no webhook).
    queued = request_scans(
        celery,
        services.redis,
        list(settings.accounts),
        scan_types(),
        pending_seconds=60,
        keys=settings.names,
    )
    log.info("reconcile_requested", scans=queued)
    return embedded
