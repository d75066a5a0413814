"""Shared fixtures: a real Redis, the offline models, a real embedder, and the whole stack
(simulator over HTTP → receiver over HTTP → Redis → in-process Celery worker → store → search).

Redis: the tests start their own ``redis-server`` on a free port when the binary exists
(``make test`` installs it), else they use ``NCINDEX_TEST_REDIS_URL``; ``private_redis`` is a
server of one test's own, for the tests that stop it. ``empty_store`` is an empty store folder
with its payload indexes, for the stacks and search APIs that copy it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ncindex.embedding.embedder import Embedder
from ncindex.embedding.models import install_models
from ncindex.redis_server import RedisProcess, start_redis
from ncindex.settings import Settings
from ncindex.store import model_slug
from ncindex.store.qdrant_edge import QdrantEdgeStore
from support import Stack, build_stack
from webhook_receiver.hooks import Receiver


@pytest.fixture(autouse=True)
def receivers_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every webhook receiver a test makes is closed after it (:meth:`Receiver.close`): the
    thread a delivery refused 503 starts goes on trying its Redis every 5 s, so one whose
    Redis the test stopped logged ``missed_rescan_not_sent`` for the rest of the session, into
    later tests' captured logs."""
    made: list[Receiver] = []
    init = Receiver.__init__

    def recorded(self: Receiver, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)  # type: ignore[arg-type]
        made.append(self)

    monkeypatch.setattr(Receiver, "__init__", recorded)
    yield
    for receiver in made:
        receiver.close()


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


@pytest.fixture(scope="session")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed, empty Qdrant Edge folder with every payload index (creating the indexes
    takes seconds; stacks copy this folder instead), for the default dense model. It asks for
    no other fixture, so a module that overrides ``model_dir`` or ``embedder`` (at module
    scope) still gets it in ``stack``."""
    settings = Settings()
    install_models(settings.model_dir)
    root = tmp_path_factory.mktemp("empty-store")
    store = QdrantEdgeStore(root, model_slug(settings.dense_model))
    store.ensure_collection(Embedder(settings).declared_dim)
    store.close()
    return root


@pytest.fixture
def stack(
    redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path, empty_store: Path
) -> Iterator[Stack]:
    """The whole stack (:func:`support.build_stack`) on a flushed Redis, its store a copy of
    ``empty_store``."""
    redis.Redis.from_url(redis_url).flushdb()
    with build_stack(redis_url, embedder, model_dir, tmp_path, template=empty_store) as built:
        yield built


@pytest.fixture
def subpath_stack(
    redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path, empty_store: Path
) -> Iterator[Stack]:
    """:func:`stack` against a Nextcloud installed under ``/nextcloud`` (every route and
    href starts with it; ``NCINDEX_NEXTCLOUD_URL`` is ``http://127.0.0.1:PORT/nextcloud``)."""
    redis.Redis.from_url(redis_url).flushdb()
    with build_stack(
        redis_url, embedder, model_dir, tmp_path, web_root="/nextcloud", template=empty_store
    ) as built:
        yield built
