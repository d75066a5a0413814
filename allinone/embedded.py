"""``ncindex up``: everything in one process on the embedded engine (DESIGN §10).

One process because the embedded store (Qdrant Edge) allows one process per folder: the
receiver, the search API and the MCP server share one HTTP port (the MCP server, ASGI, runs
under uvicorn on a loopback port the HTTP port relays ``/mcp`` to), a Celery worker runs in a
thread of the same process, and the store lives under ``data_dir``. Redis is used where one
answers at ``redis_url``; otherwise a private ``redis-server`` is started. Without a Nextcloud
configured
the Nextcloud simulator is started with the bundled sample corpus, written before the worker and
beat start (tasks a Redis kept from an earlier run are consumed at once, and must find their
users); the webhooks are registered through its OCS API, the reconcile pass at start indexes
the corpus and the deliveries what changes later — a newcomer sees it work.

Beat runs in a thread of the same process (:func:`workers.beat.start_embedded_beat`), and one
reconcile pass is requested at start, after the sample corpus is written; so is the rewrite of
BM25 vectors an older analyzer made, when a sample of the store holds any
(:func:`rewrite_older_analyzer`).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
import structlog
from celery import Celery
from celery.worker import state
from pydantic import SecretStr
from qdrant_client import models
from werkzeug.serving import BaseWSGIServer, make_server

from mcp_server import create_app as create_mcp_app
from ncindex import names
from ncindex.accounts import clear_refused
from ncindex.index.reindex import analyzer_upgrade_due, sample_analyzers
from ncindex.ingest.queueing import PUBLISH_RETRY, check_redis
from ncindex.ingest.registration import register, rescan_once_listening, untried_line
from ncindex.redis_server import RedisProcess, reachable, start_redis
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.store import VectorStore
from ncindex.store.edge_optimizer import EdgeOptimizer
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.sync.reconcile import request_scans, scan_types
from ncindex.sync.status import settled
from ncindex.telemetry import QueueCollector, register_queue_metrics, unregister_queue_metrics
from ncindex.web.asgi import ServedAsgi, serve_in_thread
from ncindex.web.dispatch import dispatch, forward_to
from ncindex.web.proxies import trusted_wsgi
from ncindex.web.server_errors import ProblemRequestHandler
from search_api import create_app as create_search_app
from webhook_receiver import create_app as create_receiver_app
from workers.beat import start_embedded_beat
from workers.celery_app import create_celery
from workers.heartbeat import connect_task_hooks

log = structlog.get_logger(__name__)

#: The namespace of ``ncindex up`` when ``NCINDEX_NAMESPACE`` is not set.
NAMESPACE = "ncindex-up"
#: How long a stop waits before it puts the messages of tasks still running back (seconds),
#: whatever the grace: the consumer's loop reads Celery's stop flag at least every second and
#: takes messages until then — one put back before would be taken again at once, its message
#: left unacknowledged for the visibility timeout (seen: with one task running and room for
#: another).
FLAG_READ_SECONDS = 1.5


class EmbeddedWorker:
    """A Celery worker consuming every queue in a daemon thread of this process (thread pool of
    ``concurrency``), started again ``restart_after`` seconds after it stops on an error, until
    :meth:`stop`.

    A standalone ``celery worker`` stops on an "unrecoverable error" and exits, so that its
    supervisor (Kubernetes, systemd) starts a new one; in this process nothing else would. One
    such error, seen: Redis lost while the worker held a delayed task (kombu restoring the
    unacked message raises ``AttributeError``), after which nothing was indexed any more.

    The app is made the process default first: Celery's thread pool looks tasks up through
    the current app, which would otherwise be Celery's default app.
    """

    def __init__(self, celery: Celery, concurrency: int = 2, *, restart_after: float = 5.0):
        self.celery = celery
        self.concurrency = concurrency
        self.restart_after = restart_after
        self.stopping = threading.Event()
        self.controller: Any = None
        celery.set_default()
        celery.set_current()
        state.should_stop = state.should_terminate = None  # a stop of an earlier one is over
        self.thread = threading.Thread(target=self._run, name="celery-worker", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            self.controller = self.celery.WorkController(
                pool_cls="threads",
                concurrency=self.concurrency,
                loglevel="WARNING",
                without_heartbeat=True,
                without_mingle=True,
                without_gossip=True,
            )
            self.controller.start()
            if self.stopping.wait(0):
                return
            log.error(
                "worker_stopped", exitcode=self.controller.exitcode, restart_in=self.restart_after
            )
            self.stopping.wait(self.restart_after)

    def stop(self, grace: float) -> bool:
        """Stop the worker and wait for its thread; whether it stopped in ``grace`` seconds
        (plus the few seconds of a cold shutdown).

        Warm shutdown first, as ``celery worker`` does on SIGTERM: Celery's own flag
        (``celery.worker.state.should_stop``, read by the consumer's loop at least every
        second) makes the worker stop taking messages, let the running tasks finish, stop its
        pool — tasks received but not started (a debounce countdown, prefetch) are cancelled
        unrun — and close its broker connection, whereupon kombu's Redis transport puts every
        unacknowledged message back on its queue at once (``QoS.restore_unacked_once``), so
        the next start resumes them instead of waiting out the visibility timeout. When tasks
        still run after ``grace`` seconds (at least :data:`FLAG_READ_SECONDS`, once the
        consumer has stopped taking messages), their messages are put back at once
        (:meth:`_restore_unacked`) and the process exits without waiting for them; they run
        again on the next start (indexing is idempotent: a document's unchanged chunks are
        kept).
        """
        self.stopping.set()
        state.should_stop = 0  # EX_OK: the flag Celery's SIGTERM handler sets
        self.thread.join(max(grace, FLAG_READ_SECONDS))
        if not self.thread.is_alive():
            return True
        log.warning("worker_stop_grace_over", grace=grace)
        self._restore_unacked()
        return False

    def _restore_unacked(self) -> None:
        """Put the messages of the tasks still running back on their queues now (kombu's
        ``QoS.restore_unacked_once`` on the task consumer's channel, what closing it would
        do), since the tasks themselves cannot be stopped: their threads end with the
        process. They run again on the next start."""
        consumer = getattr(self.controller, "consumer", None)
        channel = getattr(getattr(consumer, "task_consumer", None), "channel", None)
        qos = getattr(channel, "qos", None)
        if qos is None:
            return
        try:
            qos.restore_unacked_once()
        except Exception as exc:  # a task acking meanwhile: what is left comes back later
            log.warning("worker_restore_failed", error=repr(exc))


def start_worker(
    celery: Celery, concurrency: int = 2, *, restart_after: float = 5.0
) -> EmbeddedWorker:
    """Start an :class:`EmbeddedWorker` (see there)."""
    return EmbeddedWorker(celery, concurrency, restart_after=restart_after)


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
    worker: EmbeddedWorker | None = None
    #: the queue-depth, reserved and index-lag gauges this process serves at ``/metrics``
    queue_metrics: QueueCollector | None = None
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

    def sample_current(self) -> bool:
        """Whether every sample document is in the store and nothing is left to do: the
        simulator has no delivery to send, and no task waits, runs or is debounced
        (:func:`ncindex.sync.status.settled`) — the start's reconcile pass included, so on a
        restart the re-checks of what is already stored are over too."""
        if self.sample is None or self.simulator is None:
            return False
        if self.simulator.engine.pending() or not settled(self.services.redis, self.settings.names):
            return False
        return self.documents_indexed() >= self.sample.documents

    def close(self, grace: float | None = None) -> bool:
        """Stop in the order that loses nothing: beat (no new ticks) and the store's optimiser,
        the HTTP server and the MCP server (no new webhooks or searches), the worker
        (:meth:`EmbeddedWorker.stop`: running tasks finish within ``grace`` seconds — default
        ``settings.shutdown_grace`` — the others go back to their queues), then the simulator,
        the clients and the store the tasks used, and a private Redis last. Returns whether
        the worker stopped within the grace period: when not, its tasks still run in the
        threads of Celery's pool, which the interpreter joins at exit (``concurrent.futures``
        registers that join), so the caller ends the process with ``os._exit``."""
        grace = self.settings.shutdown_grace if grace is None else grace
        steps: dict[str, float] = {}
        clock = time.monotonic()

        def done(step: str) -> None:
            nonlocal clock
            steps[step] = round(time.monotonic() - clock, 3)
            clock = time.monotonic()

        if self.beat is not None:
            self.beat.stop()
        if self.optimizer is not None:
            self.optimizer.stop()
        done("beat")
        self.server.shutdown()
        self.server.server_close()
        if self.mcp is not None:
            self.mcp.close()
        done("http")
        stopped = self.worker.stop(grace) if self.worker is not None else True
        done("worker")
        # when tasks still run in the worker's threads, closing their clients and store
        # under them would only add errors: the process exits and the OS releases them
        if stopped:
            if self.simulator_server is not None:
                self.simulator_server.close()
            if self.queue_metrics is not None:
                unregister_queue_metrics(self.queue_metrics)
            self.services.close()
        done("clients")
        if self.redis is not None:
            self.redis.stop()
        done("redis")
        log.info("stopped", worker_in_grace=stopped, seconds=steps)
        return stopped


def rewrite_older_analyzer(celery: Celery, store: VectorStore) -> Counter[str] | None:
    """Queue ``ncindex.reindex_analyzer`` (what ``ncindex reindex --analyzer`` queues) when
    :func:`~ncindex.index.reindex.sample_analyzers` finds points of an older analyzer version
    in ``store``: the analyzer version → documents sampled, or ``None`` when none is older (an
    empty store too). ``ncindex doctor`` and ``ncindex status`` cannot read the embedded store
    while ``ncindex up`` holds it, so an upgrade of ``ncindex up`` starts the rewrite itself.
    Raises ``StoreUnavailable``, or kombu's errors when the broker refuses the message."""
    counts = sample_analyzers(store)
    due = analyzer_upgrade_due(counts)
    if due is None:
        return None
    celery.send_task(names.REINDEX_ANALYZER, queue=names.INDEX, retry_policy=PUBLISH_RETRY)
    log.info("analyzer_rewrite_requested", sampled=dict(counts), why=due)
    return counts


def edge_stores(services: Services) -> list[QdrantEdgeStore]:
    """The embedded engine's shards this process serves: the live model's and, while a model
    change keeps one, the mirror model's."""
    view = services.models.view()
    handles = [view.live] if view.mirror is None else [view.live, view.mirror]
    return [h.store for h in handles if isinstance(h.store, QdrantEdgeStore)]


def local_url(host: str, port: int) -> str:
    """``http://host:port`` for the address the server listens on, as this machine reaches it:
    a wildcard (``0.0.0.0``, ``::``) is no address to send to, so it becomes the loopback one,
    and an IPv6 address is bracketed (RFC 3986 §3.2.2)."""
    wildcards = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104 (read, not bound)
    host = wildcards.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def missing_for_nextcloud(settings: Settings) -> list[str]:
    """The settings ``ncindex up`` needs with a configured Nextcloud that ``settings`` lack,
    each as ``"<variable> (what it is for)"``, in the order of the README; empty when none."""
    missing = []
    if not settings.webhook_secret.get_secret_value():
        missing.append("NCINDEX_WEBHOOK_SECRET (the secret Nextcloud's deliveries carry)")
    if not settings.accounts:
        missing.append(
            "NCINDEX_ACCOUNTS or NCINDEX_ACCOUNTS_FILE (no Nextcloud accounts configured)"
        )
    return missing


def start(settings: Settings, *, load_sample: bool = True) -> Embedded:
    """Start the embedded deployment and return once it serves HTTP.

    With no ``nextcloud_url`` the simulator is started (accounts and Nextcloud URL are taken
    from it; the webhook secret too, unless one is set) and, with ``load_sample``, the sample
    corpus is written into it before the worker and beat start (no webhook is registered yet:
    the reconcile pass requested at the end indexes it in the background), and a refusal or
    missing-user mark a Redis kept of its accounts is cleared (they were just made with these
    credentials). Raises ``queueing.RedisTooOld`` when the Redis it would use is older than
    7.0, ``ValueError`` naming ``NCINDEX_HOST`` and ``NCINDEX_PORT`` when it cannot listen
    there or every setting :func:`missing_for_nextcloud` finds missing, and what the webhook
    registration raises; a start that fails stops what it had started (the worker, beat, the
    HTTP port, the simulator, the store, a private redis-server) before it raises.

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
    simulator = simulator_server = sample = None
    # what to close, last first, should the start fail: the private redis-server above all
    started: list[Callable[[], object]] = [private_redis.stop] if private_redis else []
    try:
        if not settings.nextcloud_url:
            from ncindex.simulator import NextcloudSimulator, serve_simulator
            from ncindex.simulator.sample import (
                SAMPLE_ACCOUNTS,
                add_sample_users,
                load_sample_corpus,
            )

            simulator = NextcloudSimulator(delivery_delay=(0.2, 1.0))
            admin_password = secrets.token_urlsafe(16)
            simulator.add_user("admin", password=admin_password, display_name="Admin", admin=True)
            # the accounts (and corpus) exist before the worker and beat start: tasks a Redis
            # kept from a run stopped mid-way are consumed at once, and a scan refused for a
            # user not yet added was taken for a deleted user (the admin's lookup said so)
            if load_sample:
                sample = load_sample_corpus(simulator)
            else:  # the configured accounts exist, with no files
                add_sample_users(simulator)
            simulator_server = serve_simulator(simulator, host="127.0.0.1", port=0)
            started.append(simulator_server.close)
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
        missing = missing_for_nextcloud(settings)
        if missing:  # said before a worker starts, not by the registration; all at once
            raise ValueError(
                f"a configured Nextcloud (NCINDEX_NEXTCLOUD_URL={settings.nextcloud_url}) "
                f"needs settings that are not set: {'; '.join(missing)}"
            )
        try:
            server = make_server(
                settings.host,
                settings.port,
                lambda e, s: [],
                threaded=True,
                request_handler=ProblemRequestHandler,
            )
        except SystemExit:  # werkzeug printed why (address in use, unknown host) and exits
            raise ValueError(
                f"cannot listen on {settings.host}:{settings.port} (NCINDEX_HOST, NCINDEX_PORT)"
            ) from None
        started.append(server.server_close)
        settings = settings.model_copy(
            update={"public_url": local_url(server.host, server.port)}
            if settings.public_url == Settings.model_fields["public_url"].default
            else {}
        )
        services = Services(settings)
        started.append(services.close)
        services.store  # noqa: B018  (open the store and load the models before serving)
        if simulator is not None:  # its accounts were just made with these credentials: a
            # refusal or "does not exist" a Redis kept from an earlier run is of another
            # simulator (one that had not added them yet), and would hold them back for hours
            for user in settings.accounts:
                clear_refused(services.redis, settings.names, user)
                services.redis.delete(settings.names.missing_user(user))
    except BaseException:
        for close in reversed(started):
            close()
        raise
    celery = create_celery(settings, services)
    connect_task_hooks()
    worker = start_worker(celery)
    beat = start_embedded_beat(celery, settings)
    # the relay to the MCP server sends REMOTE_ADDR as X-Forwarded-For: the client's, behind
    # trusted proxies (the search API and receiver apply the same rule themselves); the MCP
    # server trusts that one hop
    mcp = serve_in_thread(
        create_mcp_app(settings, services=services, producer=celery, proxy_hops=1)
    )
    server.app = trusted_wsgi(
        dispatch(
            create_receiver_app(settings, producer=celery, redis_client=services.redis),
            create_search_app(settings, services=services, producer=celery),
            forward_to(mcp.url),
        ),
        settings.trusted_proxy_hops,
    )
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    embedded = Embedded(settings, services, server, simulator, simulator_server, private_redis)
    try:  # a failure from here on (Nextcloud refusing the registration…) stops it all
        embedded.mcp = mcp
        embedded.beat = beat
        embedded.worker = worker
        # the gauges gunicorn's workers serve (deploy/gunicorn.conf.py), so /metrics is the same
        embedded.queue_metrics = register_queue_metrics(
            settings.redis_url, settings.names, settings.accounts
        )
        if not settings.qdrant_url:
            embedded.optimizer = EdgeOptimizer(
                lambda: edge_stores(services),
                after_points=settings.edge_optimize_after_points,
                check_seconds=settings.edge_optimize_check_seconds,
            )
            embedded.optimizer.start()
        # sent even while a refusal holds the admin's credential back: starting is the
        # operator's request to try it, and a registration that works clears the refusal
        result = register(services.account(settings.webhook_admin, held_back=False), settings)
        clear_refused(services.redis, settings.names, settings.webhook_admin)
        embedded.webhooks = result
        log.info(
            "webhooks_registered",
            created=len(result.created),
            updated=len(result.updated),
            kept=len(result.kept),
            refused=[o.event_class for o in result.refused],
        )
        for line in result.missing_lines():
            log.warning("webhook_refused", detail=line)
        for failure in result.failed:  # not registered, not renewed or not removed
            log.warning("webhook_failed", action=failure.action, detail=failure.line("register"))
        untried = untried_line(result.untried, "register")
        if untried is not None:  # Nextcloud could not be reached: the rest were not asked
            log.warning("webhook_untried", count=len(result.untried), detail=untried)
        due = rescan_once_listening(services.redis, result, settings)
        if due is not None:  # webhook_listeners' 5-minute cache: the scans beat sends then
            log.info("listening_rescan_due", at=due, classes=len(result.first_registered))
        embedded.sample = sample
        # One reconcile pass now: it catches up on what changed while ncindex was down and, for
        # the sample, gives bob the folder alice shares with him (share changes fire no webhook).
        # It is the whole pass a Redis found without its marker asks for, so the marker is set:
        # beat's rescan_if_forgotten would otherwise queue every scan again a minute later.
        services.redis.set(settings.names.remembered, int(time.time()), nx=True)
        queued = request_scans(
            celery,
            services.redis,
            list(settings.accounts),
            scan_types(),
            pending_seconds=60,
            keys=settings.names,
        )
        log.info("reconcile_requested", scans=queued)
        rewrite_older_analyzer(celery, services.store)
    except BaseException:
        embedded.close(grace=0)
        raise
    return embedded
