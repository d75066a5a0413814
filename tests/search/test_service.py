"""SearchService over the fixture corpus, with stand-in verifiers: fusion, score_threshold,
tie order, degraded answers, modes, over-fetch and refill."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import Mock

import pytest
from qdrant_client import models
from search_corpus import Doc, expected, index_docs, make_docs

from ncindex.documents import DocRef, point_document, point_id, titled_text
from ncindex.embedding.analyzer import term_id, terms
from ncindex.embedding.embedder import Embedder
from ncindex.errors import SearchUnavailable
from ncindex.nextcloud.client import NextcloudClient
from ncindex.search import service as service_module
from ncindex.search.service import ROUND_FIELDS, Mode, SearchRequest, SearchService
from ncindex.search.verify import Checked, Verdict, VerifyOnRead
from ncindex.settings import Settings
from ncindex.store.port import Hit, PointRecord, SparseVector
from ncindex.store.qdrant_edge import QdrantEdgeStore


def client_of(user: str) -> NextcloudClient:
    return NextcloudClient(None, None, user)  # type: ignore[arg-type]  # verifiers are stand-ins


class Verifiers:
    """Stand-in verifiers: drop the doc_keys in ``gone``, keep the rest; record checks."""

    def __init__(self) -> None:
        self.gone: set[str] = set()
        self.checked: list[str] = []

    def __call__(self, client: NextcloudClient, payload: dict[str, Any]) -> Checked:
        self.checked.append(payload["doc_key"])
        return Checked(Verdict.DROPPED if payload["doc_key"] in self.gone else Verdict.KEPT)


@pytest.fixture
def verifiers() -> Verifiers:
    return Verifiers()


def make_service(
    store: QdrantEdgeStore, embedder: Embedder, verifiers: Verifiers, **settings: Any
) -> tuple[SearchService, list[tuple[str, str]]]:
    drops: list[tuple[str, str]] = []
    service = SearchService(
        Settings(**settings),
        lambda: (store, embedder),
        lambda user, ref: drops.append((user, ref.key)),
    )
    service.verifier = VerifyOnRead(
        4, {t: verifiers for t in ("note", "file", "deck_card", "news_item")}
    )
    return service, drops


@pytest.fixture
def service(
    corpus: QdrantEdgeStore, embedder: Embedder, verifiers: Verifiers
) -> Iterator[SearchService]:
    svc, _ = make_service(corpus, embedder, verifiers)
    yield svc
    svc.close()


def keys(response: Any) -> list[str]:
    return [r.doc_key for r in response.results]


@pytest.mark.parametrize("fusion", ["rrf", "dbsf"])
def test_both_fusions_rank_the_topic_first(
    service: SearchService, corpus_docs: list[Doc], fusion: str
) -> None:
    response = service.search(
        client_of("alice"),
        SearchRequest(query="coral reefs bleach ocean temperature", fusion=fusion),
    )
    top = next(d for d in corpus_docs if d.key == keys(response)[0])
    assert "Coral reefs" in top.text
    scores = [r.score for r in response.results]
    assert scores == sorted(scores, reverse=True)
    assert not response.degraded
    # RRF over two branches peaks at 2/(k+1) < 1.0; DBSF at 2.0
    assert 0 < scores[0] <= (1.0 if fusion == "rrf" else 2.0)


def test_results_are_filtered_and_visible_only(
    service: SearchService, corpus_docs: list[Doc]
) -> None:
    tree = {"field": "doc_type", "op": "in", "value": ["note", "file"]}
    response = service.search(
        client_of("bob"), SearchRequest(query="lighthouse budget review", limit=100, filter=tree)
    )
    assert set(keys(response)) == expected(corpus_docs, tree, "bob")


@pytest.mark.parametrize("fusion", ["rrf", "dbsf"])
@pytest.mark.parametrize("threshold", [0.0, 0.5, 0.9, 1.0])
def test_score_threshold_is_relative_to_the_best(
    service: SearchService, fusion: str, threshold: float
) -> None:
    query = "vitamin D bone density"
    full = service.search(client_of("alice"), SearchRequest(query=query, limit=100, fusion=fusion))
    cut = service.search(
        client_of("alice"),
        SearchRequest(query=query, limit=100, fusion=fusion, score_threshold=threshold),
    )
    best = full.results[0].score
    want = [r.doc_key for r in full.results if r.score >= threshold * best - 1e-6]
    assert keys(cut) == want
    assert keys(cut)[0] == full.results[0].doc_key  # the best always passes


def test_threshold_counts_from_the_best_kept_result(
    service: SearchService, verifiers: Verifiers
) -> None:
    query = "vitamin D bone density"
    full = service.search(client_of("alice"), SearchRequest(query=query, limit=100))
    verifiers.gone = {full.results[0].doc_key}
    cut = service.search(
        client_of("alice"), SearchRequest(query=query, limit=100, score_threshold=0.9)
    )
    assert keys(cut)[0] == full.results[1].doc_key
    assert all(r.score >= 0.9 * full.results[1].score - 1e-6 for r in cut.results)


def test_min_score_is_absolute(service: SearchService) -> None:
    query = "espresso machine office kitchen"
    full = service.search(client_of("carol"), SearchRequest(query=query, limit=100))
    scores = sorted({r.score for r in full.results}, reverse=True)
    floor = (scores[len(scores) // 2] + scores[len(scores) // 2 + 1]) / 2  # between two scores
    cut = service.search(client_of("carol"), SearchRequest(query=query, limit=100), min_score=floor)
    assert keys(cut) == [r.doc_key for r in full.results if r.score >= floor]


def tied_store(docs: list[Doc], embedder: Embedder, tmp_path: Path) -> QdrantEdgeStore:
    """An Edge store of ``docs`` given the same text and visibility (alice's): equal DBSF
    scores for every one of them."""
    for d in docs:
        d.text = "Identical text about migratory birds and magnetic fields."
        d.payload["text"] = d.text
        d.payload["acl"] = ["user:alice"]
    store = QdrantEdgeStore(tmp_path / "q", "test-model")
    store.ensure_collection(embedder.dense_dim)
    index_docs(store, embedder, docs)
    return store


def test_ties_break_by_document(embedder: Embedder, verifiers: Verifiers, tmp_path: Path) -> None:
    """Sixteen tied documents, a page of ten: the ten whose ids' document parts come first,
    returned in ``doc_key`` order, the same page search after search."""
    docs = make_docs(16)
    store = tied_store(docs, embedder, tmp_path)
    svc, _ = make_service(store, embedder, verifiers)
    request = SearchRequest(query="migratory birds", limit=10, fusion="dbsf")
    first = svc.search(client_of("alice"), request)
    assert len({r.score for r in first.results}) == 1
    pid = {d.key: point_id(DocRef.parse(d.key), d.payload["content_hash"], 0) for d in docs}
    by_id = sorted(docs, key=lambda d: point_document(pid[d.key]) or "")
    assert keys(first) == sorted(d.key for d in by_id[:10])
    assert keys(svc.search(client_of("alice"), request)) == keys(first)
    svc.close()
    store.close()


def legacy_id(key: str, content_hash: str, chunk_index: int) -> str:
    """A point id of the earlier scheme (``uuid5``; :func:`~ncindex.documents.point_id`
    names its namespace), which names no document."""
    namespace = uuid.UUID("5b7c1e52-8f0e-4c53-9d0a-6a4f3e2b1c90")
    return str(uuid.uuid5(namespace, f"{key}:{content_hash}:{chunk_index}"))


def test_points_of_the_earlier_id_scheme_are_grouped_by_their_doc_key(
    embedder: Embedder, verifiers: Verifiers, tmp_path: Path
) -> None:
    """A store written partly before ids named their documents: four documents of two uuid5
    points each, four of the new scheme, and one document both ways (an old version under a
    uuid5 id beside its new one, as a write leaves them until the old is deleted). Every
    document is shown once; the round reads the ``doc_key`` of the uuid5 points alone."""
    docs = make_docs(8)
    store = tied_store(docs, embedder, tmp_path)
    dense, sparse = embedder.embed_documents([docs[0].text])[0]
    legacy = []
    for d in docs[:4]:
        old = {**d.payload, "content_hash": "old"} if d is docs[0] else None
        if old is None:
            store.delete_document(d.key)
        for i, payload in enumerate([old or d.payload, {**(old or d.payload), "chunk_index": 1}]):
            pid = legacy_id(d.key, payload["content_hash"], i)
            legacy.append(pid)
            store.upsert([PointRecord(id=pid, payload=payload, dense=dense, sparse=sparse)])
    assert point_document(legacy[0]) is None
    recording = Recording(store)
    svc = recording_service(recording, embedder, verifiers)
    page = svc.search(client_of("alice"), SearchRequest(query="migratory birds", fusion="dbsf"))
    assert sorted(keys(page)) == sorted(d.key for d in docs)
    (round_read,) = [ids for ids, fields in recording.reads if fields == ROUND_FIELDS]
    assert sorted(round_read) == sorted(legacy)
    svc.close()
    store.close()


def test_a_result_says_how_much_of_its_snippet_is_the_title_its_text_opens_with(
    embedder: Embedder, verifiers: Verifiers, tmp_path: Path
) -> None:
    """``snippet_title_chars``: a Deck card's and a News item's text opens with its title
    (:func:`~ncindex.documents.titled_text`), which the search page shows as written; the
    result says how many of its snippet's characters (code points) it is. A chunk that starts
    inside a long title holds the rest of it; a note's text is its own even where it begins
    with its title's words (0), and so is a text that does not open with its title (0)."""
    docs = make_docs(8)  # note, file, deck_card, news_item, twice
    body = "Migratory birds follow magnetic fields."
    title = "*Tar* the \U0001fa77 ketch"
    chunks = {
        0: ("Harbour", f"Harbour\n\n{body}", 0),  # a note: its title is not its text's
        1: ("plan.md", body, 0),
        2: (title, titled_text(title, body), 0),  # a card: 17 code points of title
        3: ("Birds over the harbour", f"the harbour\n\n{body}", 11),  # a second chunk
        6: ("Ketch", body, 0),  # a card whose text does not open with its title
        7: ("Gulls", f"{body} Gulls", 40),  # a chunk past the title
    }
    for i, d in enumerate(docs):
        d.payload["title"], d.text, d.payload["char_start"] = chunks.get(i, ("x", body, 0))
        d.payload["text"] = d.text
        d.payload["acl"] = ["user:alice"]
    store = QdrantEdgeStore(tmp_path / "q", "test-model")
    store.ensure_collection(embedder.dense_dim)
    index_docs(store, embedder, docs)
    svc, _ = make_service(store, embedder, verifiers)
    page = svc.search(client_of("alice"), SearchRequest(query="migratory birds", limit=20))
    counts = {r.doc_key: r.snippet_title_chars for r in page.results}
    wanted = [0, 0, 17, 11, 0, 0, 0, 0]
    assert [counts[d.key] for d in docs] == wanted
    card = next(r for r in page.results if r.doc_key == docs[2].key)
    assert card.snippet.startswith("*Tar* the \U0001fa77 ketch\n")
    svc.close()
    store.close()


def test_rounds_reach_every_tied_document(
    embedder: Embedder, verifiers: Verifiers, tmp_path: Path
) -> None:
    """Every round reads one page deeper into the same ranking, whose ties are ordered by
    point id (:mod:`ncindex.search.fusion`; Qdrant's own fused query orders them anew on every
    call): 72 tied documents, 66 of them dropped, and three rounds of 24 hits find all six
    kept ones, search after search."""
    docs = make_docs(72)
    store = tied_store(docs, embedder, tmp_path)
    # limit 6, over-fetch 1: 24 chunk hits a round, 72 in three
    svc, _ = make_service(store, embedder, verifiers, search_overfetch=1)
    kept = sorted(d.key for d in docs)[::12]
    verifiers.gone = {d.key for d in docs} - set(kept)
    request = SearchRequest(query="migratory birds", limit=6, fusion="dbsf")
    for _ in range(3):
        page = svc.search(client_of("alice"), request)
        assert sorted(keys(page)) == kept
    svc.close()
    store.close()


def test_dense_failure_degrades_to_sparse(
    service: SearchService, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(text: str) -> list[float]:
        raise RuntimeError("onnx session died")

    monkeypatch.setattr(service.live()[1], "embed_query_dense", broken)
    response = service.search(client_of("alice"), SearchRequest(query="lighthouse lens polished"))
    assert response.degraded
    assert response.results and "lighthouse" in response.results[0].snippet.lower()
    with pytest.raises(SearchUnavailable):
        service.search(client_of("alice"), SearchRequest(query="lighthouse"), mode="dense")
    assert service.search(
        client_of("alice"), SearchRequest(query="lighthouse"), mode="sparse"
    ).results


@pytest.mark.parametrize("mode", ["dense", "sparse"])
def test_single_half_modes(service: SearchService, mode: str) -> None:
    response = service.search(
        client_of("alice"), SearchRequest(query="coral reef bleaching"), mode=mode
    )  # type: ignore[arg-type]
    assert response.results and not response.degraded


def test_drops_refill_the_page_across_rounds(
    corpus: QdrantEdgeStore, embedder: Embedder, verifiers: Verifiers, corpus_docs: list[Doc]
) -> None:
    # overfetch 1, limit 3: 12 chunk hits per round; dropping alice's 14 best documents forces
    # reading the second page of the same ranking.
    svc, drops = make_service(corpus, embedder, verifiers, search_overfetch=1)
    request = SearchRequest(query="lighthouse lens budget foghorn", limit=3)
    ranking = keys(svc.search(client_of("alice"), request.model_copy(update={"limit": 100})))
    assert len(ranking) > 17
    verifiers.gone = set(ranking[:14])
    verifiers.checked.clear()
    page = svc.search(client_of("alice"), request)
    assert keys(page) == ranking[14:17]
    assert page.verification.dropped == 14 and page.verification.kept == 3
    assert verifiers.checked == ranking[:17]  # in rank order, nothing verified twice
    assert sorted(k for _, k in drops) == sorted(ranking[:14])
    assert {u for u, _ in drops} == {"alice"}
    assert page.candidates > 12  # more than one round was read
    svc.close()
    # every round reads the one ranking: each branch asked once (the BM25 one again with
    # feedback), however many rounds
    store = Recording(corpus)
    svc = recording_service(store, embedder, verifiers, search_overfetch=1)
    verifiers.checked.clear()
    assert keys(svc.search(client_of("alice"), request)) == ranking[14:17]
    assert [half for half, *_ in store.branches] == ["dense", "sparse", "sparse"]
    svc.close()


def test_verification_only_checks_what_the_page_needs(
    service: SearchService, verifiers: Verifiers
) -> None:
    service.search(client_of("alice"), SearchRequest(query="lighthouse", limit=2))
    assert len(verifiers.checked) == 2


def test_context_after_verification(
    service: SearchService, corpus_docs: list[Doc], verifiers: Verifiers
) -> None:
    from ncindex.errors import DocumentNotFound

    doc = next(d for d in corpus_docs if d.payload["owner"] == "alice")
    ref = DocRef.parse(doc.key)
    body = service.context(client_of("alice"), ref, 0, 2)
    assert [c.text for c in body.chunks] == [doc.text]
    outsider = next(u for u in ("bob", "carol") if f"user:{u}" not in doc.payload["acl"])
    with pytest.raises(DocumentNotFound):
        service.context(client_of(outsider), ref, 0, 2)
    verifiers.gone = {doc.key}
    with pytest.raises(DocumentNotFound):
        service.context(client_of("alice"), ref, 0, 2)
    with pytest.raises(DocumentNotFound):
        service.context(client_of("alice"), DocRef.parse("file:999999"), 0, 2)


class Recording:
    """The store, recording every branch query as ``(half, vector, limit, fields)``, the
    payload keys of its hits, every fused query (the search asks none: it fuses in the
    process) and every read of payloads; ``deleted`` ids read as gone when their whole payloads
    are read (deleted since the round read their ``doc_key``), ``vanished`` ids at every read
    (deleted since the branches found them)."""

    def __init__(self, store: QdrantEdgeStore) -> None:
        self.store = store
        self.branches: list[tuple[str, Any, int, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.hit_keys: list[set[str]] = []
        self.fused: list[Any] = []
        self.reads: list[tuple[list[str], Any]] = []
        self.deleted: set[str] = set()
        self.vanished: set[str] = set()

    def query(self, **kwargs: Any) -> Any:
        self.fused.append(kwargs)
        return self.store.query(**kwargs)

    def branch(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        half = "dense" if kwargs.get("dense") is not None else "sparse"
        vector = kwargs.get(half)
        self.branches.append((half, vector, kwargs["limit"], kwargs.get("fields")))
        hits = self.store.branch(**kwargs)
        self.hit_keys.append({k for h in hits for k in h.payload})
        return hits

    def retrieve(self, ids: Any, fields: Any = None) -> Any:
        self.reads.append((list(ids), fields))
        read = self.store.retrieve(ids, fields)
        read = {i: p for i, p in read.items() if i not in self.vanished}
        if fields is not None:
            return read
        return {i: p for i, p in read.items() if i not in self.deleted}

    def whole(self) -> list[list[str]]:
        """The ids of every read of whole payloads."""
        return [ids for ids, fields in self.reads if fields is None]

    def sparse(self) -> list[Any]:
        return [vector for half, vector, _, _ in self.branches if half == "sparse"]

    def limits(self) -> list[tuple[str, int]]:
        return sorted((half, limit) for half, _, limit, _ in self.branches)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def recording_service(
    store: Recording, embedder: Embedder, verifiers: Verifiers, **settings: Any
) -> SearchService:
    """A service on ``store`` with ``settings``; the title branch off unless asked for (the
    tests reading ``store.branches`` count the dense and BM25 branches; the title branch is
    tested on its own)."""
    settings.setdefault("title_branch", False)
    svc = SearchService(Settings(**settings), lambda: (store, embedder))  # type: ignore[arg-type,return-value]
    svc.verifier = VerifyOnRead(
        4, {t: verifiers for t in ("note", "file", "deck_card", "news_item")}
    )
    return svc


@pytest.mark.parametrize("docs", [0, 3])
def test_hybrid_search_expands_the_bm25_query_by_feedback(
    corpus: QdrantEdgeStore, embedder: Embedder, verifiers: Verifiers, docs: int
) -> None:
    """Each branch is asked once with the query's own vectors and fused in the process; with
    feedback the BM25 branch is asked once more, with the expanded query, and fused with the
    dense branch already in hand (no second dense query); ``explain`` ranks results in the
    branches fused, asking nothing more."""
    recording = Recording(corpus)
    svc = recording_service(recording, embedder, verifiers, bm25_feedback_docs=docs)
    query = "lighthouse lens"
    response = svc.search(client_of("alice"), SearchRequest(query=query, explain=True))
    own = embedder.embed_query_sparse(query)
    halves = [half for half, *_ in recording.branches]
    assert recording.fused == []
    if docs == 0:
        assert halves == ["dense", "sparse"] and recording.sparse() == [own]
        assert "feedback" not in response.timings_ms
    else:
        assert halves == ["dense", "sparse", "sparse"]
        first, expanded = recording.sparse()
        assert first == own  # the first ranking asks with the query's own terms
        assert set(own.indices) < set(expanded.indices)  # then with feedback terms added
        texts, fields = recording.reads[0]  # the first ranking's best chunks' texts, read
        assert len(texts) == 3 * 4 and fields == ("doc_key", "text")
        assert "feedback" in response.timings_ms
    expanded_hits = {h.id for h in corpus.branch(sparse=recording.sparse()[-1], flt=None,
                                                 limit=360)}  # fmt: skip
    explained = [r for r in response.results if r.explain and r.explain.sparse]
    assert explained and all(r._point_id in expanded_hits for r in explained)
    # one half alone, or RRF: no feedback pass
    recording.branches.clear()
    svc.search(client_of("alice"), SearchRequest(query=query), mode="sparse")
    svc.search(client_of("alice"), SearchRequest(query=query, fusion="rrf"))
    assert recording.sparse() == [own, own]
    svc.close()


@pytest.mark.parametrize(
    ("share", "dense_depth"), [(1.0, 360), (0.5, 180), (0.55, 198), (0.34, 123), (0.01, 4)]
)
def test_the_dense_branch_is_its_share_of_the_pool(
    corpus: QdrantEdgeStore, embedder: Embedder, verifiers: Verifiers, share: float,
    dense_depth: int,
) -> None:  # fmt: skip
    """A 10-result page draws on a pool of 360 (10 × over-fetch 3 × 4 chunks × 3 rounds):
    the expanded BM25 branch is 360 deep, the first pass's BM25 branch (which only picks
    the feedback documents) ``bm25_feedback_first_depth`` (60), the dense one
    ``dense_prefetch_share`` of the pool, rounded up, asked once."""
    store = Recording(corpus)
    svc = recording_service(store, embedder, verifiers, dense_prefetch_share=share)
    svc.search(client_of("alice"), SearchRequest(query="lighthouse lens", explain=True))
    assert store.limits() == [("dense", dense_depth), ("sparse", 60), ("sparse", 360)]
    svc.close()


@pytest.mark.parametrize(
    ("first", "fusion", "mode", "limits"),
    [
        (12, "dbsf", "hybrid", [("dense", 180), ("sparse", 12), ("sparse", 360)]),
        (3000, "dbsf", "hybrid", [("dense", 180), ("sparse", 360), ("sparse", 360)]),  # ≤ pool
        (12, "rrf", "hybrid", [("dense", 180), ("sparse", 360)]),  # no feedback: the pool
        (12, "dbsf", "sparse", [("sparse", 360)]),  # one half: no feedback, the pool
        (12, "dbsf", "degraded", [("sparse", 360)]),  # hybrid whose dense embedding failed
    ],
)
def test_the_first_pass_bm25_branch_is_shallow_only_before_feedback(
    corpus: QdrantEdgeStore, embedder: Embedder, verifiers: Verifiers, first: int,
    fusion: str, mode: str, limits: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Only a search expanded by feedback asks its first BM25 branch
    ``bm25_feedback_first_depth`` deep (never deeper than the pool); a ranking's BM25
    branch — the expanded one, or the only one of a search without feedback — is always the
    pool's depth."""
    if mode == "degraded":
        monkeypatch.setattr(embedder, "embed_query_dense", Mock(side_effect=RuntimeError("x")))
    store = Recording(corpus)
    svc = recording_service(store, embedder, verifiers, bm25_feedback_first_depth=first)
    response = svc.search(
        client_of("alice"), SearchRequest(query="lighthouse lens", fusion=fusion),
        mode="sparse" if mode == "sparse" else "hybrid",
    )  # fmt: skip
    assert response.degraded is (mode == "degraded")
    assert store.limits() == limits
    svc.close()


@pytest.mark.parametrize(
    ("first", "limits"),
    [
        (60, [("dense", 180), ("sparse", 60), ("sparse", 360)]),
        (3000, [("dense", 180), ("sparse", 360)]),  # already the pool's depth: asked once
    ],
)
def test_with_no_feedback_document_left_the_query_own_bm25_branch_is_over_the_pool(
    corpus: QdrantEdgeStore, embedder: Embedder, verifiers: Verifiers, first: int,
    limits: list[tuple[str, int]],
) -> None:  # fmt: skip
    """When every feedback document vanished between the first ranking and the read of its
    texts, nothing expands the query: the ranking's BM25 branch is the query's own terms over
    the whole pool — asked again when the first pass asked fewer, not again otherwise."""
    store = Recording(corpus)
    svc = recording_service(store, embedder, verifiers, bm25_feedback_first_depth=first)
    request = SearchRequest(query="lighthouse lens")
    own = embedder.embed_query_sparse(request.query)
    found = corpus.branch(sparse=own, flt=None, limit=360)
    found += corpus.branch(dense=embedder.embed_query_dense(request.query), flt=None, limit=360)
    store.vanished = {h.id for h in found}
    svc.search(client_of("alice"), request)
    assert store.limits() == limits
    assert all(vector == own for vector in store.sparse())
    svc.close()


class DenseDrift(Recording):
    """:class:`Recording` whose dense branch rates the ``drifted`` points far above the rest
    (score 5.0): the dense half placing a document that holds no query word at the top of
    the first ranking, as it placed an invoice PDF for the query ``invitation.eml``."""

    def __init__(self, store: QdrantEdgeStore, drifted: set[str]) -> None:
        super().__init__(store)
        self.drifted = drifted

    def branch(self, **kwargs: Any) -> Any:
        hits = super().branch(**kwargs)
        if kwargs.get("dense") is None:
            return hits
        hits = [service_module.Hit(h.id, 5.0 if h.id in self.drifted else h.score, h.payload)
                for h in hits]  # fmt: skip
        return sorted(hits, key=lambda h: -h.score)


def test_a_document_matching_only_densely_lends_no_feedback_terms(
    corpus: QdrantEdgeStore, corpus_docs: list[Doc], embedder: Embedder, verifiers: Verifiers
) -> None:
    """Feedback documents are taken only among first-ranking documents holding a query term:
    a document the dense half alone put on top (no word of the query in it) would otherwise
    fill the expansion with its own words and outrank, on BM25 alone, the documents that
    match the query (a real search: ``invitation.eml`` expanded by an invoice's numbers)."""
    espresso = [d for d in corpus_docs if "espresso" in d.text]
    drifted = {point_id(DocRef.parse(d.key), d.payload["content_hash"], 0) for d in espresso}
    store = DenseDrift(corpus, drifted)
    svc = recording_service(store, embedder, verifiers)
    response = svc.search(client_of("alice"), SearchRequest(query="lighthouse lens"))
    assert response.results[0].doc_key in {d.key for d in espresso}  # the drift is on top
    first, expanded = store.sparse()
    added = set(expanded.indices) - set(first.indices)
    assert {term_id(t) for t in terms("polished storms")} <= added  # a lighthouse text's
    assert not {term_id(t) for t in terms("espresso kitchen")} & added
    svc.close()


@pytest.mark.parametrize(("mode", "query"), [("dense", "lighthouse lens"), ("hybrid", "the of")])
def test_a_dense_half_answering_alone_draws_on_the_whole_pool(
    corpus: QdrantEdgeStore, embedder: Embedder, verifiers: Verifiers, mode: Mode, query: str
) -> None:
    """Where every hit comes from the dense half (``dense`` mode, or a query with no BM25 terms
    left: stop words only) its branch is the whole pool, not its share: a share of 0.02
    (8 of 360) would leave a 10-result page short."""
    store = Recording(corpus)
    svc = recording_service(store, embedder, verifiers, dense_prefetch_share=0.02)
    page = svc.search(client_of("alice"), SearchRequest(query=query), mode=mode)
    assert store.limits() == [("dense", 360)]
    assert len(page.results) == 10
    svc.close()


def test_payloads_are_read_only_for_what_is_verified(
    corpus: QdrantEdgeStore, embedder: Embedder, verifiers: Verifiers
) -> None:
    store = Recording(corpus)
    svc = recording_service(store, embedder, verifiers)
    request = SearchRequest(query="lighthouse lens budget foghorn", limit=3)
    page = svc.search(client_of("alice"), request)
    # the branches return no payload; the feedback documents' texts are read, the round is
    # grouped by the documents its ids name (nothing read), whole payloads for the batch
    # verified alone
    assert store.hit_keys == [set(), set(), set()]
    assert [fields for _, fields in store.reads] == [("doc_key", "text"), None]
    (verified,) = store.whole()
    assert len(verified) == len(verifiers.checked) == 3
    assert all(r.title and r.snippet for r in page.results)  # from the whole payloads
    assert "payloads" in page.timings_ms
    # a point deleted between the query and the read is passed over; the page still fills
    store.deleted = {verified[0]}
    store.reads.clear()
    again = svc.search(client_of("alice"), request)
    assert keys(again)[:2] == keys(page)[1:] and len(again.results) == 3
    assert keys(page)[0] not in keys(again)
    assert [len(r) for r in store.whole()] == [3, 1]  # the batch, then one for the place left
    svc.close()


def test_a_point_deleted_after_the_ranking_is_passed_over(
    corpus: QdrantEdgeStore, embedder: Embedder, verifiers: Verifiers
) -> None:
    """A point the branches returned but deleted before its payload is read is passed over;
    the page still fills."""
    store = Recording(corpus)
    svc = recording_service(store, embedder, verifiers)
    request = SearchRequest(query="lighthouse lens budget foghorn", limit=3)
    page = svc.search(client_of("alice"), request)
    store.vanished = {page.results[0]._point_id}
    again = svc.search(client_of("alice"), request)
    assert len(again.results) == 3
    assert page.results[0]._point_id not in {r._point_id for r in again.results}
    svc.close()


def test_a_rewritten_document_whose_old_point_goes_after_the_ranking_is_read_from_its_new_one(
    embedder: Embedder, verifiers: Verifiers, tmp_path: Path
) -> None:
    """A rewrite writes the new version, then deletes the old: a search ranking both can find
    the old point gone when it reads the payloads. The document is still shown, read from its
    new point (the next hit of its group), not dropped from the page."""
    docs = make_docs(8)
    store = tied_store(docs, embedder, tmp_path)
    doc = docs[0]
    ref = DocRef.parse(doc.key)
    dense, sparse = embedder.embed_documents([doc.text])[0]
    new = point_id(ref, "new", 0)
    store.upsert([PointRecord(new, {**doc.payload, "content_hash": "new"}, dense, sparse)])
    recording = Recording(store)
    svc = recording_service(recording, embedder, verifiers)
    request = SearchRequest(query="migratory birds", fusion="dbsf")
    (before,) = [r for r in svc.search(client_of("alice"), request).results if r.doc_key == doc.key]
    recording.vanished = {before._point_id}
    page = svc.search(client_of("alice"), request)
    assert sorted(keys(page)) == sorted(d.key for d in docs)
    (after,) = [r for r in page.results if r.doc_key == doc.key]
    assert after._point_id != before._point_id
    assert {before._point_id, after._point_id} == {
        new,
        point_id(ref, doc.payload["content_hash"], 0),
    }
    svc.close()
    store.close()


def test_a_document_with_no_point_left_in_its_slice_can_come_back_in_a_later_one() -> None:
    """Where none of a document's hits in a slice is stored any more, the document is passed
    over there and a later slice's hits of it are candidates again (its new version ranked
    deeper)."""
    ref = DocRef.parse("file:1")
    gone, later = point_id(ref, "old", 0), point_id(ref, "new", 0)
    other = point_id(DocRef.parse("file:2"), "h", 0)
    payloads = {later: {"doc_key": ref.key}, other: {"doc_key": "file:2"}}
    store = Mock()
    store.retrieve.side_effect = lambda ids, fields=None: {
        i: payloads[i] for i in ids if i in payloads
    }
    documents = service_module._Documents()
    first = documents.slice([service_module.Hit(gone, 0.9, {}), service_module.Hit(other, 0.8, {})])
    assert [h.id for h in documents.read(store, first)] == [other]
    second = documents.slice([service_module.Hit(later, 0.5, {})])
    assert [h.id for h in documents.read(store, second)] == [later]


def test_snippets_are_built_while_the_page_is_checked(
    corpus: QdrantEdgeStore, embedder: Embedder, verifiers: Verifiers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The page's snippets are built while its checks are in flight: each check here waits
    (up to 3 s) for a snippet to have been built, which only happens at once when the two
    overlap; what is dropped is still dropped, and the page is the one checked after."""
    built = threading.Event()
    original = service_module.snippet

    def noting(text: str, query: str, **kwargs: Any) -> Any:
        built.set()
        return original(text, query, **kwargs)

    waited: list[bool] = []

    def check_after_a_snippet(client: NextcloudClient, payload: dict[str, Any]) -> Checked:
        waited.append(built.wait(3))
        return verifiers(client, payload)

    svc, drops = make_service(corpus, embedder, verifiers)
    request = SearchRequest(query="lighthouse lens")
    first = keys(svc.search(client_of("alice"), request))
    verifiers.gone.add(first[0])
    expected = svc.search(client_of("alice"), request)
    monkeypatch.setattr(service_module, "snippet", noting)
    svc.verifier = VerifyOnRead(
        4, {t: check_after_a_snippet for t in ("note", "file", "deck_card", "news_item")}
    )
    page = svc.search(client_of("alice"), request)
    assert waited and all(waited)
    assert keys(page) == keys(expected) and first[0] not in keys(page)
    assert [r.snippet for r in page.results] == [r.snippet for r in expected.results]
    assert any("<mark>" in r.snippet for r in page.results)
    assert ("alice", first[0]) in drops
    svc.close()


def test_a_document_held_under_both_id_schemes_is_one_document_where_its_doc_key_is_read() -> None:
    """Until the clean-up deletes the older points, one text can be held under both id
    schemes: the context endpoint's current version has each chunk once (the point whose id
    names its document), and the feedback documents, grouped by the ``doc_key`` they read,
    count it once."""
    ref = DocRef.parse("file:5")
    new = [point_id(ref, "h", i) for i in range(2)]
    old = [legacy_id(ref.key, "h", i) for i in range(2)]
    points = [
        PointRecord(pid, {"doc_key": ref.key, "content_hash": "h", "chunk_index": i % 2})
        for i, pid in enumerate(old + new)
    ]
    assert [p.id for p in service_module._current_version(points)] == new
    hits = [service_module.Hit(p.id, 1.0 - i / 10, p.payload) for i, p in enumerate(points)]
    assert len(service_module.group_hits(hits)) == 2  # by id: the uuid5 points by doc_key
    assert len(service_module.group_hits(hits, key=lambda h: h.payload["doc_key"])) == 1


@pytest.mark.parametrize(
    ("text", "query", "marked"),
    [
        ("Wir treffen uns in München am Marienplatz.", "munchen", "München"),
        ("Die Überweisung ist angekommen.", "Uberweisung", "Überweisung"),
        ("北京烤鸭很好吃，我们明天再去。", "烤鸭", "烤鸭"),
        ("Nous avons visité l'église du village.", "église", "église"),
        # en-7: a zero-width space inside a word, hyphens, apostrophes other than ' and ’
        ("Bitte die Rech\u200bnung bis Freitag prüfen.", "Rechnung", "Rechnung"),
        ("Bitte die Rechnung bis Freitag prüfen.", "Rech\u200bnung", "Rechnung"),
        ("Schick mir bitte eine E-Mail mit dem Angebot.", "email", "E-Mail"),
        ("Please send me an email with the offer.", "e-mail", "email"),
        ("Termin mit Frau O\u2018Neill am Montag.", "O'Neill", "O\u2018Neill"),
        ("Termin mit Frau O\u02bcNeill am Montag.", "O\u2019Neill", "O\u02bcNeill"),
    ],
)
def test_bm25_finds_words_as_typed_in_other_languages(
    embedder: Embedder, verifiers: Verifiers, tmp_path: Path, text: str, query: str, marked: str
) -> None:
    """Analyzer en-3 end to end (Qdrant Edge, the real embedder, the service's snippets): a
    query without diacritics finds the word with them, a CJK word is found inside a longer
    run, an elided article does not hide its word; the snippet marks the word as written.
    And en-7: a word with a zero-width space inside (copied from a web page or a PDF) is the
    word without it, ``email`` finds ``E-Mail`` and ``e-mail`` finds ``email``, and
    ``O'Neill`` finds ``O‘Neill`` and ``OʼNeill``."""
    docs = make_docs(8)
    for d in docs:
        d.payload["acl"] = ["user:alice"]
    docs[3].text = docs[3].payload["text"] = text
    store = QdrantEdgeStore(tmp_path / "q", "test-model")
    store.ensure_collection(embedder.dense_dim)
    index_docs(store, embedder, docs)
    svc, _ = make_service(store, embedder, verifiers)
    page = svc.search(client_of("alice"), SearchRequest(query=query), mode="sparse")
    assert keys(page) == [docs[3].key]
    assert f"<mark>{marked}</mark>" in page.results[0].snippet
    hybrid = svc.search(client_of("alice"), SearchRequest(query=query))
    assert keys(hybrid)[0] == docs[3].key
    svc.close()
    store.close()


def test_a_file_is_found_by_its_name_which_its_text_does_not_hold(
    embedder: Embedder, verifiers: Verifiers, tmp_path: Path
) -> None:
    """A person looks a file up by its name: ``Kassenbuch`` for ``Kassenbuch 2026.ods``, whose
    cells hold only amounts and dates. The name is the document's ``title``, not in its text,
    so neither half found it before the title branch; now it ranks first, and ``explain``
    shows its rank there. With ``title_branch`` off the search is the two branches it was."""
    docs = make_docs(8)
    for d in docs:
        d.payload["acl"] = ["user:alice"]
    docs[5].payload["title"] = "Kassenbuch 2026.ods"
    docs[5].text = docs[5].payload["text"] = "Datum Betrag 2026-01-04 120,00 2026-01-09 80,50"
    docs[2].text = docs[2].payload["text"] = "Das Kassenbuch liegt im Büro."  # a mention
    store = QdrantEdgeStore(tmp_path / "q", "test-model")
    store.ensure_collection(embedder.dense_dim)
    index_docs(store, embedder, docs)
    svc, _ = make_service(store, embedder, verifiers)
    page = svc.search(client_of("alice"), SearchRequest(query="Kassenbuch 2026", explain=True))
    assert keys(page)[0] == docs[5].key
    assert page.results[0].explain is not None and page.results[0].explain.title is not None
    assert page.results[0].explain.title.rank == 1
    assert svc.search(client_of("alice"), SearchRequest(query="kassenbuch")).results[0].doc_key in {
        docs[5].key,
        docs[2].key,
    }
    svc.close()
    recording = Recording(store)
    recorded = recording_service(recording, embedder, verifiers, title_branch=True)
    recorded.search(client_of("alice"), SearchRequest(query="Kassenbuch 2026"))
    titled = [b for b in recording.calls if "MatchText" in repr(b["flt"])]
    (dense,) = [b for b in recording.calls if b.get("dense") is not None and b not in titled]
    assert len(titled) == 1 and titled[0]["dense"] == dense["dense"]
    assert titled[0]["limit"] == dense["limit"]
    recorded.close()
    off, _ = make_service(store, embedder, verifiers, title_branch=False)
    page = off.search(client_of("alice"), SearchRequest(query="Kassenbuch 2026", explain=True))
    assert all(r.explain is not None and r.explain.title is None for r in page.results)
    off.close()
    store.close()


@pytest.mark.parametrize(
    ("title", "query"),
    [
        ("Angebot Müller 2026.pdf", "Mueller Angebot"),
        ("Angebot Mueller 2026.pdf", "Müller Angebot"),
        ("Steuerbüro Jahresabschluss.odt", "Steuerbuero"),
        ("Angebot Müller 2026.pdf", "Mu\u0308ller Angebot"),  # pasted decomposed
        ("İstanbul Reise.pdf", "İstanbul"),  # not lowercased to i and U+0307 before Qdrant
        ("Reise München Plan.pdf", "Munchen Reise"),  # folded to ASCII, as BM25's terms
        ("Kosten Hauptstraße 5.ods", "Hauptstrasse Kosten"),
        ("Café Menü.md", "cafe menu"),
        # en-7: a query word with a hyphen or an invisible character inside is asked for
        # joined or in its parts; every apostrophe is '
        ("Email Vorlage.odt", "E-Mail Vorlage"),
        ("E-Mail Vorlage.odt", "e-mail Vorlage"),
        ("Rechnung Mai.pdf", "Rech\u200bnung Mai"),
        ("Rech\u200bnung Mai.pdf", "Rech\u200bnung Mai"),
        ("O'Neill Vertrag.pdf", "O\u02bcNeill Vertrag"),
    ],
)
def test_the_title_branch_meets_a_word_as_bm25_meets_it(
    embedder: Embedder, verifiers: Verifiers, tmp_path: Path, title: str, query: str
) -> None:
    """A German without umlauts on the keyboard types ``Mueller`` for ``Müller``: BM25 meets
    the two in a text (analyzer en-5), and the title branch now meets them in a title too
    (each query word asked for in its spellings, :func:`ncindex.embedding.analyzer.spellings`),
    where it asked Qdrant's title index for ``mueller`` alone and missed ``Müller``. A word
    pasted decomposed is read composed (NFC) as BM25 reads it, and ``İstanbul`` goes to
    Qdrant as typed (Python lowercased it to ``i`` and a combining dot, which Qdrant's word
    tokenizer cut off, so the title ``İstanbul`` did not match its own name). And the title
    index folds to ASCII (``ncindex.store.schema.TEXT_ASCII_FOLDING``) as BM25's folded forms
    do, so ``Munchen`` finds the title ``München``."""
    docs = make_docs(8)
    for d in docs:
        d.payload["acl"] = ["user:alice"]
    docs[5].payload["title"] = title
    docs[5].text = docs[5].payload["text"] = "Datum Betrag 2026-01-04 120,00 2026-01-09 80,50"
    store = QdrantEdgeStore(tmp_path / "q", "test-model")
    store.ensure_collection(embedder.dense_dim)
    index_docs(store, embedder, docs)
    svc, _ = make_service(store, embedder, verifiers, title_branch=True)
    page = svc.search(client_of("alice"), SearchRequest(query=query, explain=True))
    assert keys(page)[0] == docs[5].key
    assert page.results[0].explain is not None and page.results[0].explain.title is not None
    assert page.results[0].explain.title.rank == 1
    svc.close()
    store.close()


def test_qdrants_word_tokenizer_cuts_a_title_at_hyphens_and_invisible_characters(
    tmp_path: Path,
) -> None:
    """What the title branch cannot do, as Qdrant's word tokenizer has it (qdrant/qdrant,
    lib/segment/src/index/field_index/full_text_index/tokenizers/mod.rs,
    ``WordTokenizer::tokenize`` splits at every character not ``char::is_alphanumeric``): the
    title ``E-Mail`` holds ``e`` and ``mail`` but no ``email``, the title ``Rech``+U+200B+``nung``
    ``rech`` and ``nung`` but no ``rechnung``, while the letter ``ʼ`` (U+02BC) stays in its
    word. So ``email`` and ``Rechnung`` find those titles by BM25 in the text only (README,
    "The BM25 analyzer"); a query written as the title is, finds it
    (:func:`ncindex.search.filters.title_compound`)."""
    store = QdrantEdgeStore(tmp_path / "q", "test-model")
    store.ensure_collection(4)
    titles = ["E-Mail Vorlage.odt", "Rech\u200bnung Mai.pdf", "O\u02bcNeill.pdf"]
    store.upsert(
        [
            PointRecord(
                str(uuid.uuid4()), {"title": title}, [1.0, 0.0, 0.0, 0.0], SparseVector([], [])
            )
            for title in titles
        ]
    )

    def holding(word: str) -> int:
        match = models.MatchText(text=word)
        return store.count(models.Filter(must=[models.FieldCondition(key="title", match=match)]))

    assert [holding(w) for w in ("email", "rechnung", "o", "neill")] == [0, 0, 0, 0]
    assert [holding(w) for w in ("e", "mail", "rech", "nung", "o\u02bcneill")] == [1] * 5
    store.close()


def test_the_title_branch_is_skipped_when_too_many_titles_hold_the_words(
    corpus: QdrantEdgeStore,
    embedder: Embedder,
    verifiers: Verifiers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Words in more titles than :data:`TITLE_BRANCH_MAX_POINTS` (the engine's estimate)
    single no file out, and scoring every chunk of those documents costs more than the dense
    branch: the search is then the two branches it was."""
    recording = Recording(corpus)
    svc = recording_service(recording, embedder, verifiers, title_branch=True)
    word = make_docs(1)[0].payload["title"].split()[0]  # a title word of the corpus
    svc.search(client_of("alice"), SearchRequest(query=word))
    asked = len(recording.calls)
    monkeypatch.setattr(service_module, "TITLE_BRANCH_MAX_POINTS", 0)
    svc.search(client_of("alice"), SearchRequest(query=word))
    assert asked - 1 == len(recording.calls) - asked  # the same search, one branch fewer
    assert not any("MatchText" in repr(b["flt"]) for b in recording.calls[asked:])
    svc.close()


def test_a_markdown_results_snippet_keeps_its_code_and_a_plain_text_s_does_not() -> None:
    """The snippets of a page's hits dropped every line's indentation, so a note's indented code
    block read as prose on the search page. A note's, a Deck card's and a ``.md`` file's chunk
    is now read as Markdown (its code lines keep their indentation, a block its cut opened in is
    re-opened: ncindex.text.snippets.snippet); any other file's and a news item's are not."""
    text = "Check the lamp:\n\n    lamp --check\n    lamp --all\n"
    payloads = [
        {"doc_type": "note"},
        {"doc_type": "deck_card"},
        {"doc_type": "file", "paths": {"alice": "/Docs/Lamp.MD"}},
        {"doc_type": "file", "paths": {"alice": "/Docs/lamp.txt"}},
        {"doc_type": "news_item", "paths": {}},
    ]
    hits = [Hit(str(i), 1.0, p | {"text": text}) for i, p in enumerate(payloads)]
    shown = [s.plain for s in service_module._snippets_meanwhile(hits, "lamp", "alice")]
    code = "Check the lamp:\n\n    lamp --check\n    lamp --all"
    assert shown == [code] * 3 + ["Check the lamp:\n\nlamp --check\nlamp --all"] * 2


class Renamed(Verifiers):
    """Stand-in verifiers that keep every document, at ``paths[doc_key]`` when given (the path
    the check found: a file renamed since it was indexed)."""

    def __init__(self, paths: dict[str, str]) -> None:
        super().__init__()
        self.paths = paths

    def __call__(self, client: NextcloudClient, payload: dict[str, Any]) -> Checked:
        self.checked.append(payload["doc_key"])
        return Checked(Verdict.KEPT, path=self.paths.get(payload["doc_key"]))


def test_a_files_snippet_is_read_as_markdown_by_the_searching_users_path(
    tmp_path: Path, embedder: Embedder
) -> None:
    """A file's snippet was read as Markdown (code indentation kept, a cut fence re-opened)
    when any path the index had for it, anyone's, ended ``.md``, while the search page reads it
    by the result's path (app.js showText): a share its recipient renamed (nextcloud/server
    apps/files_sharing/lib/SharedMount.php ``moveMount``: the recipient's mount point is their
    own) or a file renamed since it was indexed (the check's path) got a Markdown snippet shown
    as plain text, the other way round a plain one read as Markdown. Now the result's path
    decides, as on the page."""
    text = "Check the lamp:\n\n    lamp --check\n    lamp --all\n"
    code, plain = text.strip(), "Check the lamp:\n\nlamp --check\nlamp --all"
    docs = [d for d in make_docs(8) if d.payload["doc_type"] == "file"][:2]
    shared, renamed = docs
    shared.payload["paths"] = {"alice": "/Docs/lamp.md", "bob": "/Docs/lamp.txt"}
    renamed.payload["paths"] = {"alice": "/Docs/oil.txt", "bob": "/Docs/oil.txt"}
    for d in docs:
        d.text = d.payload["text"] = text
        d.payload["acl"] = ["user:alice", "user:bob"]
    store = QdrantEdgeStore(tmp_path / "q", "test-model")
    store.ensure_collection(embedder.dense_dim)
    index_docs(store, embedder, docs)
    svc, _ = make_service(store, embedder, Renamed({renamed.key: "/Docs/oil.md"}))
    for user, want in (("alice", {shared.key: code}), ("bob", {shared.key: plain})):
        page = svc.search(client_of(user), SearchRequest(query="lamp"))
        snippets = {
            r.doc_key: r.snippet.replace("<mark>", "").replace("</mark>", "") for r in page.results
        }
        assert snippets == {**want, renamed.key: code}
    svc.close()
    store.close()
