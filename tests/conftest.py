"""Shared fixtures: a real Redis, the offline models, a real embedder, and the whole stack
(simulator over HTTP → receiver over HTTP → Redis → in-process Celery worker → store → search).

Redis: the tests start their own ``redis-server`` on a free port when the binary exists
(``make test`` installs it), else they use ``NCINDEX_TEST_REDIS_URL``; ``private_redis`` is a
server of one test's own, for the tests that stop it.
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery.contrib.testing.worker import start_worker
from pydantic import SecretStr
from werkzeug.serving import make_server

from ncindex.embedding.embedder import Embedder
from ncindex.embedding.models import install_models
from ncindex.ingest.registration import register
from ncindex.redis_server import RedisProcess, start_redis
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.store import model_slug
from ncindex.store.qdrant_edge import QdrantEdgeStore
from search_api import create_app as create_search_app
from support import PASSWORDS, Stack
from webhook_receiver import create_app as create_receiver_app
from workers.celery_app import create_celery

ADMIN = ("admin", "admin-app-pw")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisProcess | None]:
    """A private redis-server for the session (``None`` when using NCINDEX_TEST_REDIS_URL)."""
    try:
        server = start_redis()
    except FileNotFoundError:
        if not os.environ.get("NCINDEX_TEST_REDIS_URL"):
            raise
        yield None
        return
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: RedisProcess | None) -> str:
    """URL of the session's Redis."""
    return redis_server.url if redis_server else os.environ["NCINDEX_TEST_REDIS_URL"]


@pytest.fixture
def private_redis() -> Iterator[RedisProcess]:
    """A redis-server of this test's own (stop, SIGSTOP or restart it at will)."""
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The offline models, assembled from the installed packages (idempotent)."""
    settings = Settings()
    install_models(settings.model_dir)
    return settings.model_dir


@pytest.fixture(scope="session")
def embedder(model_dir: Path) -> Embedder:
    """One loaded embedder for the session (loading takes about a second)."""
    embedder = Embedder(Settings(model_dir=model_dir))
    embedder.load()
    return embedder


@pytest.fixture
def stack(redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path) -> Iterator[Stack]:
    """Simulator (users alice, bob, carol; admin) → receiver → Redis → Celery worker →
    Qdrant Edge in a temporary folder → search API; webhooks registered through OCS."""
    yield from _build_stack(redis_url, embedder, model_dir, tmp_path)


@pytest.fixture
def subpath_stack(
    redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path
) -> Iterator[Stack]:
    """:func:`stack` against a Nextcloud installed under ``/nextcloud`` (every route and
    href starts with it; ``NCINDEX_NEXTCLOUD_URL`` is ``http://127.0.0.1:PORT/nextcloud``)."""
    yield from _build_stack(redis_url, embedder, model_dir, tmp_path, web_root="/nextcloud")


def _build_stack(
    redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path, web_root: str = ""
) -> Iterator[Stack]:
    """Build, yield and tear down the whole stack (see :func:`stack`)."""
    redis.Redis.from_url(redis_url).flushdb()
    sim = NextcloudSimulator(delivery_delay=(0.0, 0.0), web_root=web_root)
    sim.add_user(ADMIN[0], password=ADMIN[1], display_name="Admin", admin=True)
    for user, password in PASSWORDS.items():
        sim.add_user(user, password=password, display_name=user.title())
    sim_server = serve_simulator(sim, host="127.0.0.1", port=0)
    receiver_server = make_server("127.0.0.1", 0, lambda e, s: [], threaded=True)
    receiver_url = f"http://127.0.0.1:{receiver_server.port}"
    settings = Settings(
        nextcloud_url=sim_server.url,
        accounts={u: SecretStr(p) for u, p in (PASSWORDS | dict([ADMIN])).items()},
        admin_user=ADMIN[0],
        webhook_secret=SecretStr(secrets.token_urlsafe(16)),
        public_url=receiver_url,
        redis_url=redis_url,
        model_dir=model_dir,
        data_dir=tmp_path,
        debounce_seconds=0.3,
        user_cache_seconds=0,
    )
    store = QdrantEdgeStore(tmp_path / "qdrant", model_slug(settings.dense_model))
    store.ensure_collection(embedder.dense_dim)
    services = Services(settings, store=store, embedder=embedder)
    celery = create_celery(settings, services)
    receiver_server.app = create_receiver_app(settings, producer=celery)
    threading.Thread(target=receiver_server.serve_forever, daemon=True).start()
    search_app = create_search_app(settings, services=services, producer=celery)
    register(services.account(ADMIN[0]), settings)
    with start_worker(
        celery, pool="solo", perform_ping_check=False, shutdown_timeout=30, loglevel="WARNING"
    ):
        yield Stack(settings, sim, services, search_app.test_client(), receiver_url)
    receiver_server.shutdown()
    sim_server.close()
    services.close()
