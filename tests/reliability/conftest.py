"""Fixtures of the reliability tests.

* ``corpus_stack`` — one :class:`support.Stack` per session on the session's Redis,
  holding the fixture corpus (private documents of alice and bob, a folder alice shares with
  bob, a document with hostile markup), indexed through the real pipeline (simulator
  webhooks → receiver over HTTP → Redis → Celery worker → Qdrant Edge), then one reconcile
  pass (share changes fire no webhook). Tests must not change it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from rel_support import STACK_SETTINGS, seed_corpus

from ncindex.embedding.embedder import Embedder
from ncindex.redis_server import RedisProcess
from support import Stack, build_stack


@pytest.fixture(scope="session")
def corpus_stack(
    redis_url: str,
    embedder: Embedder,
    model_dir: Path,
    empty_store: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    """The indexed fixture corpus on the whole stack (read-only for the tests). Its worker
    runs only while the corpus is indexed, so tests may start workers of their own."""
    redis.Redis.from_url(redis_url).flushdb()
    tmp = tmp_path_factory.mktemp("corpus-stack")
    built = build_stack(
        redis_url, embedder, model_dir, tmp, worker=False, template=empty_store, **STACK_SETTINGS
    )
    try:
        with built.worker():
            seed_corpus(built.sim)
            built.settle()
            built.reconcile()  # the share fired no event: a scan adds bob to the shared docs
        yield built
    finally:
        built.close()


@pytest.fixture
def make_stack(
    private_redis: RedisProcess,
    embedder: Embedder,
    model_dir: Path,
    tmp_path: Path,
    empty_store: Path,
) -> Iterator[Callable[..., Stack]]:
    """Builds this test's one empty stack on a Redis of its own (``private_redis``), with
    :class:`Settings` overrides as keywords; closed after the test. No worker is started (the
    session's ``corpus_stack`` worker, on the session's Redis, must not take its tasks)."""
    built: list[Stack] = []

    def make(**overrides: object) -> Stack:
        assert not built, "one stack per test: they would share tmp_path"
        settings = STACK_SETTINGS | overrides
        stack = build_stack(
            private_redis.url, embedder, model_dir, tmp_path, worker=False,
            template=empty_store, **settings,
        )  # fmt: skip
        built.append(stack)
        return built[0]

    yield make
    for stack in built:
        stack.close()


@pytest.fixture
def fresh_stack(make_stack: Callable[..., Stack]) -> Stack:
    """An empty stack with the default settings (see :func:`make_stack`)."""
    return make_stack()
