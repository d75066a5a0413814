"""The evaluation's pure parts: BEIR loading, subsets and splits, and the metrics."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evaluation import evaluate, load_beir
from evaluation.beir import DatasetError, note_content, sample_dataset
from evaluation.cache import VectorCache


def write_beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": f"Title {i}", "text": f"text {i}"} for i in range(6)]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    queries = [{"_id": q, "text": f"query {q}"} for q in ("q1", "q2", "q3", "q4")]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        "q1\td0\t1\nq1\td1\t2\nq2\td2\t1\n"
        "q3\tmissing\t1\n"  # a judged document not in the corpus: dropped
        "q4\td3\t0\n"  # not relevant: q4 is not judged
    )
    return folder


def test_load_beir(tmp_path: Path) -> None:
    data = load_beir(write_beir(tmp_path / "ds"))
    assert len(data.corpus) == 6 and data.corpus["d1"].title == "Title 1"
    assert data.qrels == {"q1": {"d0": 1, "d1": 2}, "q2": {"d2": 1}}
    assert set(data.queries) == {"q1", "q2"}


def test_load_beir_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError):
        load_beir(tmp_path)
    folder = write_beir(tmp_path / "bad")
    (folder / "queries.jsonl").write_text("{not json\n")
    with pytest.raises(DatasetError, match=r"queries\.jsonl:1"):
        load_beir(folder)


def test_subset_and_split_are_deterministic() -> None:
    data = sample_dataset()
    assert (len(data.corpus), len(data.qrels)) == (360, 300)
    a, b = data.subset(20, 60), data.subset(20, 60)
    assert a.corpus.keys() == b.corpus.keys() and a.qrels == b.qrels
    assert len(a.corpus) == 60 and len(a.qrels) == 20
    assert all(d in a.corpus for docs in a.qrels.values() for d in docs)
    tune, test = data.split()
    assert len(tune) == len(test) == 150 and not set(tune) & set(test)
    with pytest.raises(ValueError):
        data.subset(300, 10)


def test_metrics_average_over_every_judged_query() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}, "q4": {"d": 1, "e": 1}}
    run = {
        "q1": ["a", "x"],  # hit at rank 1
        "q2": ["x", "b"],  # hit at rank 2
        "q3": [],  # no result
        # q4 missing from the run entirely
    }
    m = evaluate(run, qrels)
    assert m.queries == 4
    assert m.mrr_at_10 == pytest.approx((1 + 0.5) / 4)
    assert m.recall_at_10 == pytest.approx(2 / 4)
    assert m.ndcg_at_10 == pytest.approx((1 + 1 / math.log2(3)) / 4)
    assert m.zero_result_rate == pytest.approx(2 / 4)


def test_metrics_keep_the_given_order_not_the_ids() -> None:
    # trec_eval would sort equal scores by document id; ranks must come from the list order
    qrels = {"q": {"a": 1}}
    assert evaluate({"q": ["z", "a"]}, qrels).mrr_at_10 == pytest.approx(0.5)
    assert evaluate({"q": ["a", "z"]}, qrels).mrr_at_10 == pytest.approx(1.0)


def test_recall_at_100_from_the_deeper_page() -> None:
    qrels = {"q": {"a": 1, "b": 1}}
    m = evaluate({"q": ["a"]}, qrels, {"q": ["a", *map(str, range(50)), "b"]})
    assert (m.recall_at_10, m.recall_at_100) == (0.5, 1.0)


def test_note_content() -> None:
    assert note_content("A  title\n", "Body.") == "# A title\n\nBody.\n"
    assert note_content("", " Body. ") == "Body.\n"


def test_vector_cache_round_trip(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def embed(texts):
        calls.append(list(texts))
        return [[float(len(t)), 0.5] for t in texts]

    cache = VectorCache(tmp_path / "c.sqlite", "model@1")
    assert cache.dense(["ab", "abc", "ab"], embed) == [[2.0, 0.5], [3.0, 0.5], [2.0, 0.5]]
    assert calls == [["ab", "abc"]]
    assert cache.dense(["abc"], embed) == [[3.0, 0.5]] and len(calls) == 1
    cache.close()
    other = VectorCache(tmp_path / "c.sqlite", "model@2")  # another model never reads these
    other.dense(["abc"], embed)
    assert len(calls) == 2
    other.close()
