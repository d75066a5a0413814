"""Fixtures of the reliability tests.

* ``corpus_stack`` — one :class:`rel_support.LongStack` per module on the session's Redis,
  holding the fixture corpus (private documents of alice and bob, a folder alice shares with
  bob, a document with hostile markup), indexed through the real pipeline (simulator
  webhooks → receiver over HTTP → Redis → Celery worker → Qdrant Edge), then one reconcile
  pass (share changes fire no webhook). Tests must not change it.
* ``private_redis`` — a redis-server of the test's own, to stop and restart.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from rel_support import LongStack, build_stack, seed_corpus

from ncindex.embedding import Embedder
from ncindex.redis_server import RedisProcess, start_redis


@pytest.fixture(scope="module")
def corpus_stack(
    redis_url: str,
    embedder: Embedder,
    model_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LongStack]:
    """The indexed fixture corpus on the whole stack (read-only for the tests)."""
    redis.Redis.from_url(redis_url).flushdb()
    built = build_stack(redis_url, embedder, model_dir, tmp_path_factory.mktemp("corpus-stack"))
    try:
        with built.worker():
            seed_corpus(built.sim)
            built.settle()
            built.reconcile()  # the share fired no event: a scan adds bob to the shared docs
            yield built
    finally:
        built.close()


@pytest.fixture
def private_redis() -> Iterator[RedisProcess]:
    """A redis-server of this test's own (stop and restart it at will)."""
    server = start_redis()
    yield server
    server.stop()
