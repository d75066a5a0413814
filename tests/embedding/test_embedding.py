"""The embedder on the REAL offline model through fastembed (no mocks)."""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from ncindex.embedding.embedder import CALL_COST_TOKENS, Embedder, _token_batches
from ncindex.embedding.models import install_models
from ncindex.errors import ModelError
from ncindex.settings import Settings
from ncindex.store.port import SparseVector

TEXTS = [
    "The cat sat on the mat.",
    "A kitten is resting on a rug in the living room.",
    "Quarterly revenue grew by twelve percent in the Lisbon office, driven by new contracts "
    "with three logistics companies and a renewed maintenance agreement for the warehouse.",
    "Kubernetes restarts a pod when its liveness probe fails.",
    "",
    "Grüße aus Zürich 😀",
    "budget " * 300,  # longer than the model's 256 tokens: truncated by the model
]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    install_models(root)
    return root


@pytest.fixture(scope="module")
def embedder(models_dir: Path) -> Embedder:
    emb = Embedder(Settings(model_dir=models_dir, embed_batch_size=3, embed_threads=2))
    emb.load()
    return emb


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_dimension_is_read_from_the_model(embedder: Embedder, models_dir: Path) -> None:
    config = json.loads((models_dir / "all-MiniLM-L6-v2" / "config.json").read_text())
    assert embedder.dense_dim == config["hidden_size"] == 384
    assert embedder.model_name == "sentence-transformers/all-MiniLM-L6-v2"
    assert embedder.max_tokens == 256
    assert embedder.loaded


def test_embed_documents_shapes_order_and_counter(embedder: Embedder) -> None:
    before = embedder.dense_embedded
    out = embedder.embed_documents(TEXTS)
    assert embedder.dense_embedded - before == len(TEXTS)
    assert len(out) == len(TEXTS)
    for dense, sparse in out:
        assert len(dense) == embedder.dense_dim
        assert all(isinstance(x, float) for x in dense)
        assert math.isclose(math.sqrt(sum(x * x for x in dense)), 1.0, abs_tol=1e-4)
        assert isinstance(sparse, SparseVector)
        assert len(sparse.indices) == len(sparse.values)
        assert len(set(sparse.indices)) == len(sparse.indices)
    # batching by length (batch size 3 here) gives each text the vector it gets alone
    for text, (dense, sparse) in zip(TEXTS, out, strict=True):
        alone_dense, alone_sparse = embedder.embed_documents([text])[0]
        assert cosine(dense, alone_dense) > 0.9999
        assert sparse == alone_sparse
    assert embedder.dense_embedded - before == 2 * len(TEXTS)


def test_token_batches_pad_little_and_cover_every_text_once() -> None:
    # a document's chunks: two long ones and a short last one; padding it to 200 tokens
    # would cost 180 slots, more than a call of its own
    assert _token_batches([200, 200, 20], 16) == [[2], [0, 1]]
    # equal lengths: full batches, shortest first
    assert _token_batches([10] * 20, 16) == [list(range(16)), [16, 17, 18, 19]]
    # close lengths share a call: a second call would cost more than the padding
    assert _token_batches([100, 100 - CALL_COST_TOKENS // 2], 16) == [[1, 0]]
    assert _token_batches([], 16) == []
    lengths = [(i * 37) % 230 + 3 for i in range(100)]
    batches = _token_batches(lengths, 8)
    assert sorted(i for b in batches for i in b) == list(range(100))
    assert all(1 <= len(b) <= 8 for b in batches)
    longest = [max(lengths[i] for i in b) for b in batches]
    assert longest == sorted(longest)  # runs of the length order
    padded = sum(len(b) * m for b, m in zip(batches, longest, strict=True))
    assert padded + CALL_COST_TOKENS * len(batches) <= sum(lengths) * 1.2


def test_concurrent_calls_share_out_the_cores(models_dir: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    assert Embedder(Settings(model_dir=models_dir)).concurrent_calls == 1  # all cores per call
    one = Embedder(Settings(model_dir=models_dir, embed_threads=1))
    assert one.concurrent_calls == cores
    assert Embedder(Settings(model_dir=models_dir, embed_threads=cores + 1)).concurrent_calls == 1


def test_empty_input(embedder: Embedder) -> None:
    before = embedder.dense_embedded
    assert embedder.embed_documents([]) == []
    assert embedder.dense_embedded == before


def test_dense_vectors_carry_meaning(embedder: Embedder) -> None:
    cat, kitten, revenue, _, _, _, _ = (d for d, _ in embedder.embed_documents(TEXTS))
    assert cosine(cat, kitten) > cosine(cat, revenue) + 0.2
    query = embedder.embed_query_dense("where is the kitty sleeping")
    assert cosine(query, kitten) > cosine(query, revenue)


def test_sparse_is_the_analyzers_bm25(embedder: Embedder) -> None:
    [(_, doc)] = embedder.embed_documents(["the invoices and the invoice for Lisbon"])
    query = embedder.embed_query_sparse("Lisbon invoice")
    assert set(query.indices) <= set(doc.indices)  # stems match: invoices ~ invoice
    assert query.values == [1.0] * len(query.indices)
    assert len(doc.indices) == 2  # 'the', 'and', 'for' are stop words; invoice(s) one stem
    [(_, only_stopwords)] = embedder.embed_documents(["the and of to"])
    assert only_stopwords.indices == []
    # content words are kept (the 1,333-word list used before dropped these)
    assert len(embedder.embed_query_sparse("hello world").indices) == 2
    assert embedder.analyzer_version == "en-7"


def test_embed_query_uses_query_embed_for_both(embedder: Embedder) -> None:
    dense, sparse = embedder.embed_query("budget review")
    assert dense == embedder.embed_query_dense("budget review")
    assert sparse == embedder.embed_query_sparse("budget review")
    assert len(dense) == embedder.dense_dim


def test_tokenizer_for_chunking(embedder: Embedder) -> None:
    tokenizer = embedder.tokenizer
    assert tokenizer is embedder.tokenizer
    assert tokenizer.truncation is None and tokenizer.padding is None
    assert len(tokenizer.encode("word " * 300).ids) == 302


def test_threads_share_one_embedder(embedder: Embedder) -> None:
    texts = [f"document number {i} about topic {i % 5}" for i in range(24)]
    expected = embedder.embed_documents(texts)
    expected_query = embedder.embed_query("topic 3")
    before = embedder.dense_embedded
    results: dict[int, object] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            results[n] = (embedder.embed_documents(texts), embedder.embed_query("topic 3"))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert embedder.dense_embedded - before == 4 * len(texts)
    for docs, query in results.values():  # type: ignore[misc]
        for (d, s), (ed, es) in zip(docs, expected, strict=True):
            assert cosine(d, ed) > 0.9999 and s == es
        assert cosine(query[0], expected_query[0]) > 0.9999


def test_concurrent_first_use_loads_once(models_dir: Path) -> None:
    emb = Embedder(Settings(model_dir=models_dir))
    assert not emb.loaded
    dims: list[int] = []
    threads = [threading.Thread(target=lambda: dims.append(emb.dense_dim)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert dims == [384] * 4


def test_sparse_works_when_dense_model_is_broken(tmp_path: Path) -> None:
    paths = install_models(tmp_path)
    (paths.dense_dir / "model.onnx").write_bytes(b"not an onnx file")
    emb = Embedder(Settings(model_dir=tmp_path))
    sparse = emb.embed_query_sparse("degraded search still works")
    assert sparse.indices
    with pytest.raises(ModelError, match="dense model"):
        emb.embed_query_dense("dense fails")
    with pytest.raises(ModelError):
        emb.embed_documents(["x"])
    assert emb.dense_embedded == 0


def test_a_soft_time_limit_while_the_model_loads_is_not_a_model_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Celery's soft time limit raised inside a lazy model load is the task running out of
    time: it reaches the task as itself (parked as overrunning), not as a broken model."""
    import fastembed

    def out_of_time(*args: object, **kwargs: object) -> None:
        raise SoftTimeLimitExceeded()

    install_models(tmp_path)
    monkeypatch.setattr(fastembed.TextEmbedding, "__init__", out_of_time)
    with pytest.raises(SoftTimeLimitExceeded):
        Embedder(Settings(model_dir=tmp_path)).embed_query_dense("late")


def test_missing_packaged_model_is_built_from_packages(tmp_path: Path) -> None:
    emb = Embedder(Settings(model_dir=tmp_path / "fresh"))
    assert len(emb.embed_query_dense("Lisbon invoice")) == 384
    assert emb.paths.dense_ready()


def test_missing_other_model_is_an_error(tmp_path: Path) -> None:
    emb = Embedder(Settings(model_dir=tmp_path, dense_model="BAAI/bge-small-en-v1.5"))
    with pytest.raises(ModelError, match=r"bge-small-en-v1\.5"):
        emb.load()
