"""The fusion parameters tuned by the quality benchmark reach both store engines alike: the RRF
constant ``rrf_k`` (a hit at 0-based rank r of a branch scores weight / (r + k)) and the
``(dense, sparse)`` branch weights."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from ncindex.store import Fusion, PointRecord, SparseVector, VectorStore
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.store.qdrant_server import QdrantServerStore
from ncindex.store.schema import RRF_K, rrf_parameters

IDS = [f"00000000-0000-4000-8000-00000000000{i}" for i in range(3)]


def _points() -> list[PointRecord]:
    # dense ranks a > b > c; sparse ranks c > b > a
    dense = [[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]]
    sparse = [0.1, 0.5, 0.9]
    return [
        PointRecord(
            IDS[i],
            {"doc_key": f"note:{i}", "acl": ["user:eval"]},
            dense=dense[i],
            sparse=SparseVector([7], [sparse[i]]),
        )
        for i in range(3)
    ]


@pytest.fixture(params=["edge", "server"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    s: VectorStore
    if request.param == "edge":
        s = QdrantEdgeStore(tmp_path / "edge", "m")
    else:
        s = QdrantServerStore(QdrantClient(":memory:"), "ncindex", "m")
    s.ensure_collection(2)
    s.upsert(_points())
    yield s
    s.close()


def _query(store: VectorStore, **kw: object) -> list[tuple[str, float]]:
    hits = store.query(
        dense=[1.0, 0.0],
        sparse=SparseVector([7], [1.0]),
        flt=None,
        limit=3,
        prefetch_limit=3,
        fusion=Fusion.RRF,
        **kw,  # type: ignore[arg-type]
    )
    return [(h.payload["doc_key"], round(h.score, 6)) for h in hits]


def test_rrf_constant(store: VectorStore) -> None:
    for k in (RRF_K, 1, 60):
        scores = dict(_query(store, rrf_k=k))
        assert scores["note:1"] == pytest.approx(2 / (1 + k), abs=1e-6)
        assert scores["note:0"] == pytest.approx(1 / k + 1 / (2 + k), abs=1e-6)


def test_weights_favour_a_branch(store: VectorStore) -> None:
    # a weight w turns rank position p (1-based) into p / w: with k=1, dense's best scores
    # 3 + 1/3 against sparse's best 1 + 1 when dense weighs 3
    assert _query(store, rrf_k=1, weights=(3.0, 1.0))[0][0] == "note:0"  # dense's best
    assert _query(store, rrf_k=1, weights=(1.0, 3.0))[0][0] == "note:2"  # sparse's best
    assert _query(store, rrf_k=1, weights=(3.0, 1.0))[0][1] == pytest.approx(3 + 1 / 3, abs=1e-5)


def test_one_branch_drops_its_weight(store: VectorStore) -> None:
    hits = store.query(
        dense=None,
        sparse=SparseVector([7], [1.0]),
        flt=None,
        limit=3,
        prefetch_limit=3,
        fusion=Fusion.RRF,
        weights=(2.0, 1.0),
    )
    assert [h.payload["doc_key"] for h in hits] == ["note:2", "note:1", "note:0"]


def test_bad_parameters_are_rejected(store: VectorStore) -> None:
    with pytest.raises(ValueError):
        store.query(
            dense=[1.0, 0.0],
            sparse=None,
            flt=None,
            limit=3,
            prefetch_limit=3,
            fusion=Fusion.DBSF,
            weights=(1.0, 1.0),
        )
    for bad in ({"rrf_k": 0}, {"weights": (1.0,)}, {"weights": (-1.0, 1.0)}):
        with pytest.raises(ValueError):
            _query(store, **bad)


def test_rrf_parameters_defaults() -> None:
    assert rrf_parameters(True, None, None, (True, True)) == (RRF_K, None)
    assert rrf_parameters(True, 5, (2, 1), (False, True)) == (5, [1.0])
