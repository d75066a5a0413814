"""CI gate on retrieval quality: the product's default settings on a fixed slice of the SciFact
sample that ships in the repository (``ncindex/simulator/data``), through the library path of
``ncindex eval`` (the product's chunker, embedder, Qdrant Edge and search service).

The thresholds sit a little under the figures measured when they were set (see
benchmarks/RESULTS.md, "Quality"), so a change that makes retrieval worse — chunking, text,
BM25 analyzer, fusion, prefetch depth, grouping — fails CI. If a change makes it better, raise them.
120 documents (about 310 chunks) are embedded: about 35 s of CPU on two cores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation import MODES
from evaluation.beir import sample_dataset
from evaluation.library import LibraryIndex
from ncindex.embedding.embedder import Embedder
from ncindex.settings import Settings

QUERIES, DOCS = 100, 120
"""The slice: 100 claims chosen by a fixed hash, their judged abstracts, distractors to 120."""

MEASURED = {
    # mode: (nDCG@10, Recall@10, MRR@10) measured on the slice when the gate was set
    # (defaults: 200-token chunks, 32 overlap, headings attached, RRF k=10, DBSF default;
    # BM25 analyzer en-2 of issue 19: against the 1,333-word stop list of before, the default
    # hybrid_dbsf rose from 0.8978 and bm25 alone fell from 0.8528 and rrf from 0.9026 on this
    # slice of SciFact, while on NPL the hybrid rose by 0.10; benchmarks/RESULTS.md).
    # BM25 feedback for DBSF (NCINDEX_BM25_FEEDBACK_DOCS=3) moved hybrid_dbsf on this slice
    # from (0.8995, 0.99, 0.8701), within the noise of 100 queries; on the full collections it
    # raised Recall@10 (SciFact test 0.877 → 0.893, NPL test 0.273 → 0.301; "Fusion tuning").
    # Analyzer en-3 (accent folding, elision, CJK bigrams) left every figure as it was.
    "bm25": (0.8403, 0.94, 0.8102),
    "dense": (0.8816, 0.98, 0.8528),
    "hybrid_rrf": (0.8926, 0.99, 0.8625),
    "hybrid_dbsf": (0.8981, 0.99, 0.8675),
}
MARGIN = 0.015
"""How far under the measured figure a metric may fall before the gate fails."""


@pytest.fixture(scope="module")
def scores(embedder: Embedder, model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    data = sample_dataset().subset(QUERIES, DOCS)
    settings = Settings(model_dir=model_dir)  # the product defaults
    index = LibraryIndex(settings, embedder, tmp_path_factory.mktemp("gate"))
    try:
        index.index(data)
        metrics = index.evaluate(data, tuple(MODES), deep=False)  # 10-result pages only
    finally:
        index.close()
    return {mode: m.as_dict() for mode, m in metrics.items()}


@pytest.mark.parametrize("mode", list(MODES))
def test_quality_does_not_drop(scores, mode: str) -> None:
    got = scores[mode]
    ndcg, recall, mrr = MEASURED[mode]
    assert got["ndcg@10"] >= ndcg - MARGIN
    assert got["recall@10"] >= recall - MARGIN
    assert got["mrr@10"] >= mrr - MARGIN
    assert got["zero_result_rate"] == 0.0


def test_default_hybrid_beats_each_half(scores) -> None:
    default = scores[f"hybrid_{Settings().fusion}"]
    for half in ("bm25", "dense"):
        assert default["ndcg@10"] > scores[half]["ndcg@10"], (half, scores)
