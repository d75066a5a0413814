"""Fixtures of the vector-store contract suite (data and factories: ``store_corpus``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from store_corpus import CORPUS, DIM, ENGINES, make_store

from ncindex.store import VectorStore


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """Each engine name in turn."""
    return request.param


@pytest.fixture
def store(engine: str, tmp_path: Path) -> Iterator[VectorStore]:
    """An empty store of ``engine`` with its collection ensured (dense dimension ``DIM``)."""
    s = make_store(engine, tmp_path / "qdrant")
    s.ensure_collection(DIM)
    yield s
    s.close()


@pytest.fixture
def loaded(store: VectorStore) -> VectorStore:
    """``store`` holding ``CORPUS``."""
    store.upsert(CORPUS)
    return store


@pytest.fixture(scope="module", params=ENGINES)
def corpus_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VectorStore]:
    """A store of each engine holding ``CORPUS``, shared by a module's read-only tests."""
    s = make_store(request.param, tmp_path_factory.mktemp("qdrant"))
    s.ensure_collection(DIM)
    s.upsert(CORPUS)
    yield s
    s.close()
