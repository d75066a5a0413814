"""The search's in-process fusion (:mod:`ncindex.search.fusion`) against Qdrant's own: the
branches each engine returns, fused here, rank and score as the engine's fused query does."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from qdrant_client import models as m
from store_corpus import CORPUS, DIM, ENGINES, make_store, unit_vector

from ncindex.search.fusion import fuse
from ncindex.store import Fusion, Hit, SparseVector


def hit(point: str, score: float) -> Hit:
    return Hit(point, score, {"doc_key": f"doc:{point}"})


def test_dbsf_normalises_each_branch_by_its_sample_deviation() -> None:
    """Scores 1, 2, 3: mean 2, sample σ 1, so (s − (2 − 3)) / 6 → 1/3, 1/2, 2/3; a branch of
    one hit scores 0.5 (qdrant ``distr_norm``)."""
    ranking = fuse([[hit("c", 3.0), hit("b", 2.0), hit("a", 1.0)], [hit("a", 9.0)]], Fusion.DBSF)
    scores = {h.id: h.score for h in ranking}
    assert scores == pytest.approx({"c": 2 / 3, "b": 1 / 2, "a": 1 / 3 + 0.5})
    assert [h.id for h in ranking] == ["a", "c", "b"]
    assert ranking[0].payload == {"doc_key": "doc:a"}
    # equal scores have no spread: 0.5 each; an empty branch adds nothing
    flat = fuse([[hit("x", 0.7), hit("y", 0.7)], []], Fusion.DBSF)
    assert [(h.id, h.score) for h in flat] == [("x", 0.5), ("y", 0.5)]


def test_rrf_matches_qdrants_own_example() -> None:
    """qdrant ``reciprocal_rank_fusion.rs``, ``test_rrf_scoring`` (k = 2)."""
    branches = [
        [hit("2", 0.9), hit("1", 0.8)],
        [hit("1", 0.7), hit("2", 0.6), hit("3", 0.5)],
        [hit("5", 0.9), hit("3", 0.5), hit("1", 0.4)],
    ]
    ranking = fuse(branches, Fusion.RRF, rrf_k=2)
    assert [h.id for h in ranking] == ["1", "2", "3", "5"]
    assert [h.score for h in ranking] == pytest.approx([1.0833334, 0.8333334, 0.5833334, 0.5])


def test_ties_are_ordered_by_point_id() -> None:
    ranking = fuse([[hit("b", 1.0)], [hit("a", 1.0)]], Fusion.RRF)
    assert [h.id for h in ranking] == ["a", "b"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fusion", list(Fusion))
@pytest.mark.parametrize("filtered", [False, True])
@pytest.mark.parametrize("halves", ["both", "dense", "sparse"])
def test_fusing_the_branches_gives_the_engines_fused_query(
    tmp_path: Path, engine: str, fusion: Fusion, filtered: bool, halves: str
) -> None:
    """The branches asked one by one and fused here give the points and scores of the
    engine's fused query over the same branches (same depths, same filter), in its order up
    to ties."""
    store = make_store(engine, tmp_path)
    store.ensure_collection(DIM)
    store.upsert(CORPUS)
    flt = (
        m.Filter(must=[m.FieldCondition(key="acl", match=m.MatchAny(any=["user:alice"]))])
        if filtered
        else None
    )
    rng = random.Random(5)
    try:
        for _ in range(4):
            dense = unit_vector(rng) if halves != "sparse" else None
            sparse = (
                SparseVector(sorted(rng.sample(range(12), 3)), [1.0, 0.5, 0.25])
                if halves != "dense"
                else None
            )
            engine_hits = store.query(
                dense=dense, sparse=sparse, flt=flt, limit=len(CORPUS), prefetch_limit=7,
                dense_prefetch_limit=5, fusion=fusion, fields=("doc_key",),
            )  # fmt: skip
            branches = []
            if dense is not None:
                branches.append(store.branch(dense=dense, flt=flt, limit=5))
            if sparse is not None:
                branches.append(store.branch(sparse=sparse, flt=flt, limit=7))
            ours = fuse(branches, fusion)
            theirs = {h.id: h.score for h in engine_hits}
            assert {h.id for h in ours} == theirs.keys()
            for h in ours:
                assert h.score == pytest.approx(theirs[h.id], rel=1e-5, abs=1e-6)
                assert h.payload["doc_key"]
            assert [round(h.score, 5) for h in ours] == sorted(
                (round(s, 5) for s in theirs.values()), reverse=True
            )
    finally:
        store.close()
