"""The two paths of ``ncindex eval`` agree: the product (simulator → webhooks → Celery worker →
Qdrant Edge → ``/v1/search`` over HTTP) and the library path (same parts in-process) return the
same documents in the same order for the same queries, so the fast path can stand in for the
product in benchmarks and tuning."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation import MODES, evaluate
from evaluation.beir import sample_dataset
from evaluation.library import LIMITS, LibraryIndex
from evaluation.product import PRODUCT_MODES, ProductHarness
from ncindex.embedding.embedder import Embedder
from ncindex.settings import Settings

pytestmark = pytest.mark.slow


def test_product_and_library_paths_agree(
    embedder: Embedder, model_dir: Path, redis_url: str, tmp_path: Path
) -> None:
    # 20 claims of the bundled SciFact sample with their judged abstracts plus distractors
    data = sample_dataset().subset(20, 60)
    settings = Settings(model_dir=model_dir)
    runs: dict[str, dict[str, dict[int, dict[str, list[str]]]]] = {
        path: {m: {limit: {} for limit in LIMITS} for m in PRODUCT_MODES}
        for path in ("product", "library")
    }
    with ProductHarness(
        settings, tmp_path / "product", embedder=embedder, redis_url=redis_url
    ) as harness:
        expected = harness.add_documents(data)
        assert harness.wait_indexed(expected, stall_seconds=60) == expected
        for qid, text in data.queries.items():
            for mode in PRODUCT_MODES:
                for limit in LIMITS:
                    runs["product"][mode][limit][qid] = harness.search(
                        text, limit, MODES[mode].fusion.value
                    )
        points = harness.services.store.count()

    index = LibraryIndex(settings, embedder, tmp_path / "library")
    try:
        # the product's doc ids (file ids), so that equal fused scores break ties alike
        doc_ids = {corpus: key.split(":")[1] for key, corpus in harness.corpus_of.items()}
        stats = index.index(data, doc_ids=doc_ids)
        assert (stats.documents, stats.chunks) == (expected, points)  # same chunks
        for qid, text in data.queries.items():
            for mode in PRODUCT_MODES:
                for limit in LIMITS:
                    runs["library"][mode][limit][qid] = index.search(text, MODES[mode], limit)
    finally:
        index.close()

    for mode in PRODUCT_MODES:
        product, library = runs["product"][mode], runs["library"][mode]
        # Same documents in the same order. Vectors of the same text embedded in another batch
        # may differ in the last float bits, so allow a swap of near-equal neighbours in at
        # most one query; the metrics must then still agree to two decimals.
        same = sum(product[10][q] == library[10][q] for q in data.queries)
        assert same >= len(data.queries) - 1, (mode, product[10], library[10])
        for q in data.queries:
            assert set(product[10][q]) == set(library[10][q])
            assert len(product[100][q]) == len(library[100][q]) == len(data.corpus)
        p = evaluate(product[10], data.qrels, product[100]).as_dict()
        lib = evaluate(library[10], data.qrels, library[100]).as_dict()
        assert p == pytest.approx(lib, abs=0.01), (mode, p, lib)
        assert p["ndcg@10"] > 0.7 and p["zero_result_rate"] == 0.0
