"""The vector-store contract, run against both engines (DESIGN §10)."""

from __future__ import annotations

import math
import random
import re
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from qdrant_client import models as m
from store_corpus import CORPUS, DIM, T0, UNIQUE_BASE, make_store, unit_vector

from ncindex.store import Fusion, ModelPointers, PointRecord, SparseVector, VectorStore
from ncindex.store.queries import document_counts, first_chunks
from ncindex.store.schema import RRF_K

N = len(CORPUS)


def _eq(key: str, value: Any) -> m.FieldCondition:
    return m.FieldCondition(key=key, match=m.MatchValue(value=value))


def _values(payload: dict[str, Any], key: str) -> list[Any]:
    value = payload.get(key)
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[^\W_]+", text)}


# (name, filter, expected as a predicate over the payload)
FILTER_CASES: list[tuple[str, m.Filter, Callable[[dict[str, Any]], bool]]] = [
    ("keyword_eq", m.Filter(must=[_eq("doc_type", "note")]), lambda p: p["doc_type"] == "note"),
    ("integer_eq", m.Filter(must=_eq("chunk_index", 0)), lambda p: p["chunk_index"] == 0),
    (
        "any",
        m.Filter(must=[m.FieldCondition(key="tags", match=m.MatchAny(any=["draft", "urgent"]))]),
        lambda p: bool({"draft", "urgent"} & set(p["tags"])),
    ),
    (
        "any_acl",
        m.Filter(must=[m.FieldCondition(key="acl", match=m.MatchAny(any=["user:bob"]))]),
        lambda p: "user:bob" in p["acl"],
    ),
    (
        "except",  # matches when some value is outside the list; null/missing never match
        m.Filter(
            must=[
                m.FieldCondition(
                    key="mime_type", match=m.MatchExcept(**{"except": ["application/pdf"]})
                )
            ]
        ),
        lambda p: any(v != "application/pdf" for v in _values(p, "mime_type")),
    ),
    (
        "integer_range",
        m.Filter(
            must=[m.FieldCondition(key="modified_at", range=m.Range(gte=T0 + 100, lt=T0 + 400))]
        ),
        lambda p: T0 + 100 <= p["modified_at"] < T0 + 400,
    ),
    (
        "text_word",  # whole words: "report" does not match "reports"
        m.Filter(must=[m.FieldCondition(key="title", match=m.MatchText(text="report"))]),
        lambda p: "report" in _words(p["title"]),
    ),
    (
        "text_words_any_order_any_case",
        m.Filter(must=[m.FieldCondition(key="title", match=m.MatchText(text="REPORT quarterly"))]),
        lambda p: {"report", "quarterly"} <= _words(p["title"]),
    ),
    (
        "is_empty",
        m.Filter(must=[m.IsEmptyCondition(is_empty=m.PayloadField(key="tags"))]),
        lambda p: not _values(p, "tags"),
    ),
    (
        "is_empty_null",
        m.Filter(must=[m.IsEmptyCondition(is_empty=m.PayloadField(key="category"))]),
        lambda p: not _values(p, "category"),
    ),
    (
        "is_null",
        m.Filter(must=[m.IsNullCondition(is_null=m.PayloadField(key="mime_type"))]),
        lambda p: "mime_type" in p and p["mime_type"] is None,
    ),
    (
        "folder_strict_prefix",  # /Projects but not /Projects-old
        m.Filter(must=[_eq("folder_ancestors", "alice:/Projects")]),
        lambda p: any(
            path.startswith("/Projects/") for user, path in p["paths"].items() if user == "alice"
        ),
    ),
    (
        "folder_prefix_or",
        m.Filter(
            should=[_eq("folder_ancestors", "alice:/Notes/Ideas"), _eq("file_path", "bob:/x.md")]
        ),
        lambda p: (
            p["paths"].get("alice", "").startswith("/Notes/Ideas/")
            or p["paths"].get("bob") == "/x.md"
        ),
    ),
    (
        "nested_and_or_not",
        m.Filter(
            must=[
                m.Filter(should=[_eq("doc_type", "file"), _eq("doc_type", "note")]),
                m.FieldCondition(key="acl", match=m.MatchAny(any=["user:alice"])),
            ],
            must_not=[
                m.Filter(
                    must=[
                        m.FieldCondition(key="tags", match=m.MatchAny(any=["urgent"])),
                        m.FieldCondition(key="chunk_index", range=m.Range(gt=0)),
                    ]
                )
            ],
        ),
        lambda p: (
            p["doc_type"] in ("file", "note")
            and "user:alice" in p["acl"]
            and not ("urgent" in p["tags"] and p["chunk_index"] > 0)
        ),
    ),
    (
        "not_any",
        m.Filter(must_not=[m.FieldCondition(key="doc_type", match=m.MatchAny(any=["file"]))]),
        lambda p: p["doc_type"] != "file",
    ),
    (
        "min_should",
        m.Filter(
            min_should=m.MinShould(
                conditions=[
                    _eq("doc_type", "file"),
                    m.FieldCondition(key="tags", match=m.MatchAny(any=["urgent"])),
                    m.FieldCondition(key="modified_at", range=m.Range(gte=T0 + 300)),
                ],
                min_count=2,
            )
        ),
        lambda p: (
            sum([p["doc_type"] == "file", "urgent" in p["tags"], p["modified_at"] >= T0 + 300]) >= 2
        ),
    ),
    (
        "has_id",
        m.Filter(must=[m.HasIdCondition(has_id=[CORPUS[0].id, CORPUS[5].id, CORPUS[9].id])]),
        lambda p: False,  # replaced below: ids are not in the payload
    ),
    ("nothing", m.Filter(must=[_eq("doc_key", "file:nope")]), lambda p: False),
]
_HAS_ID = {CORPUS[0].id, CORPUS[5].id, CORPUS[9].id}


def _expected_ids(name: str, predicate: Callable[[dict[str, Any]], bool]) -> set[str]:
    if name == "has_id":
        return _HAS_ID
    return {p.id for p in CORPUS if predicate(p.payload)}


# --- collection ---------------------------------------------------------------------------------


def test_ensure_collection_twice_is_idempotent(loaded: VectorStore) -> None:
    loaded.ensure_collection(DIM)
    loaded.ensure_collection(DIM)
    assert loaded.count() == N
    assert loaded.models().active == loaded.model_slug


def test_ensure_collection_rejects_another_dimension(store: VectorStore) -> None:
    with pytest.raises(ValueError, match="dimension"):
        store.ensure_collection(DIM + 1)


def test_model_pointers_start_at_first_model_and_move_atomically(store: VectorStore) -> None:
    first = store.model_slug
    assert store.models() == ModelPointers(active=first)
    other = store.use_model("next-model")
    try:
        with pytest.raises(ValueError):
            store.set_models(ModelPointers(active=first, building="next-model"))  # no collection
        other.ensure_collection(DIM)
        assert store.models() == ModelPointers(active=first)  # ensure never moves a pointer
        store.set_models(ModelPointers(active=first, building="next-model"))
        assert other.models() == ModelPointers(active=first, building="next-model")
        other.set_models(ModelPointers(active="next-model", standby=first))
        assert store.models() == ModelPointers(active="next-model", standby=first)
        with pytest.raises(ValueError, match="in use"):
            store.drop_model("next-model")
        store.set_models(ModelPointers(active=first))
        other.close()
        store.drop_model("next-model")
        assert store.models() == ModelPointers(active=first)
        again = store.use_model("next-model")
        again.ensure_collection(DIM)
        assert again.count() == 0  # dropped: a new, empty collection
        again.close()
    finally:
        other.close()


def test_model_pointers_reject_bad_combinations() -> None:
    with pytest.raises(ValueError):
        ModelPointers(active="a", standby="b", building="c")
    with pytest.raises(ValueError):
        ModelPointers(active="a", standby="a")
    with pytest.raises(ValueError):
        ModelPointers(standby="b")


# --- writes -------------------------------------------------------------------------------------


def test_upsert_then_query_finds_it(store: VectorStore) -> None:
    point = CORPUS[3]
    store.upsert([point])
    hits = store.query(
        dense=point.dense, sparse=point.sparse, flt=None, limit=5, prefetch_limit=10,
        fusion=Fusion.RRF,
    )  # fmt: skip
    assert [h.id for h in hits] == [point.id]
    assert hits[0].payload == point.payload


def test_upsert_replaces_by_id(loaded: VectorStore) -> None:
    point = CORPUS[0]
    loaded.upsert(
        [PointRecord(point.id, {**point.payload, "title": "New"}, point.dense, point.sparse)]
    )
    assert loaded.count() == N
    assert loaded.document_points(point.payload["doc_key"])[0].payload["title"] == "New"


def _version(doc_key: str, content_hash: str, chunks: int, rng_seed: int) -> list[PointRecord]:
    rng = random.Random(rng_seed)
    return [
        PointRecord(
            id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{doc_key}:{content_hash}:{c}")),
            payload={"doc_key": doc_key, "content_hash": content_hash, "chunk_index": c},
            dense=unit_vector(rng),
            sparse=SparseVector([1, 2], [0.5, 0.25]),
        )
        for c in range(chunks)
    ]


def test_document_counts_count_a_document_in_two_versions_once(store: VectorStore) -> None:
    """On each engine, a document whose new version is written beside its old one (two first
    chunks) counts once, by its newest version's values (``indexed_at``), while the facet
    counts both; another user's document and a later chunk count for nothing."""

    def version(key: str, content_hash: str, at: int, **payload: Any) -> list[PointRecord]:
        points = _version(key, content_hash, 2, at)
        for p in points:
            p.payload.update({"acl": ["user:alice"], "indexed_at": at, **payload})
        return points

    store.upsert(
        version("file:1", "h-old", 10, tags=["draft", "x"])
        + version("file:1", "h-new", 20, tags=["final", "x"])
        + version("file:2", "h", 10, tags=["x"])
        + version("file:3", "h", 10, tags=["x"], acl=["user:bob"])
    )
    alice = first_chunks(_eq("acl", "user:alice"))
    assert store.facet_counts("tags", alice) == {"x": 3, "draft": 1, "final": 1}
    assert document_counts(store, "tags", alice) == {"x": 2, "final": 1}
    assert document_counts(store, "doc_key", alice) == {"file:1": 1, "file:2": 1}


class _WritesAfterFacet:
    """``store``, but ``write`` is called once, right after the first facet of a field other
    than ``doc_key`` answered: a version written or deleted between document_counts' reads."""

    def __init__(self, store: VectorStore, write: Callable[[], None]) -> None:
        self.store, self.write = store, write

    def facet_counts(
        self, field: str, flt: m.Filter | None, *, exact: bool = True
    ) -> dict[str, int]:
        counts = self.store.facet_counts(field, flt, exact=exact)
        if field != "doc_key" and self.write is not None:
            self.write, write = None, self.write  # type: ignore[assignment]
            write()
        return counts

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.mark.parametrize("change", ["written", "deleted"])
def test_document_counts_read_again_when_a_version_changes_after_the_values_facet(
    store: VectorStore, change: str
) -> None:
    """A document's second version written (or its old one deleted) after the values' facet
    and before the doc_key facet was not seen: written, the values' facet had one version
    and the doc_key facet two, so both were taken off and one put back (file:2 counted
    nowhere); deleted, the values' facet had both and the doc_key facet one (counted twice).
    The point totals of the reads disagree, and the counts are read again."""

    def version(content_hash: str, at: int, tags: list[str]) -> list[PointRecord]:
        points = _version("file:2", content_hash, 1, at)
        for p in points:
            p.payload.update({"acl": ["user:alice"], "indexed_at": at, "tags": tags})
        return points

    old, new = version("h-old", 10, ["x", "draft"]), version("h-new", 20, ["x", "final"])
    store.upsert(old + (new if change == "deleted" else []))
    if change == "written":
        write = lambda: store.upsert(new)  # noqa: E731
    else:
        write = lambda: store.delete_document("file:2", keep={p.id for p in new})  # noqa: E731
    alice = first_chunks(_eq("acl", "user:alice"))
    counted = document_counts(_WritesAfterFacet(store, write), "tags", alice)  # type: ignore[arg-type]
    assert counted == {"x": 1, "final": 1}


def test_delete_document_all_or_all_but_one_version(loaded: VectorStore) -> None:
    old, new = _version("file:900", "h-old", 3, 1), _version("file:900", "h-new", 2, 2)
    loaded.upsert(old + new)
    flt = m.Filter(must=[_eq("doc_key", "file:900")])
    assert loaded.count(flt) == 5

    loaded.delete_document("file:900", keep={p.id for p in new})
    left = loaded.document_points("file:900")
    assert [(p.payload["content_hash"], p.payload["chunk_index"]) for p in left] == [
        ("h-new", 0),
        ("h-new", 1),
    ]
    loaded.delete_document("file:900")
    assert loaded.count(flt) == 0
    loaded.delete_document("file:900")  # deleting nothing succeeds
    assert loaded.count() == N


def test_set_payload_merges(loaded: VectorStore) -> None:
    doc_key = "file:103"
    before = loaded.document_points(doc_key)
    loaded.set_payload(doc_key, {"tags": ["moved"], "title": "Budget 2027", "new_field": 1})
    after = loaded.document_points(doc_key)
    assert len(after) == len(before)
    for a, b in zip(after, before, strict=True):
        assert a.payload == {**b.payload, "tags": ["moved"], "title": "Budget 2027", "new_field": 1}
    assert loaded.count(m.Filter(must=[_eq("tags", "moved")])) == len(before)
    loaded.set_payload("file:nope", {"x": 1})  # no points: nothing happens
    assert loaded.count(m.Filter(must=[_eq("new_field", 1)])) == len(before)


# --- reads --------------------------------------------------------------------------------------


@pytest.mark.parametrize("with_vectors", [False, True])
def test_document_points_ordered_by_chunk_index(store: VectorStore, with_vectors: bool) -> None:
    points = [p for p in CORPUS if p.payload["doc_key"] == "file:101"]
    store.upsert(list(reversed(points)))
    got = store.document_points("file:101", with_vectors=with_vectors)
    assert [p.payload["chunk_index"] for p in got] == [0, 1, 2]
    assert [p.id for p in got] == [p.id for p in points]
    for g, p in zip(got, points, strict=True):
        assert g.payload == p.payload
        if with_vectors:
            assert g.dense == pytest.approx(p.dense, abs=1e-6)  # unit vectors stay as they are
            assert g.sparse is not None and p.sparse is not None
            assert g.sparse.indices == p.sparse.indices
            assert g.sparse.values == pytest.approx(p.sparse.values, rel=1e-6)
        else:
            assert g.dense is None and g.sparse is None
    assert store.document_points("file:nope") == []


def test_scroll_returns_only_requested_fields_across_pages(corpus_store: VectorStore) -> None:
    rows = list(corpus_store.scroll(None, ["doc_key", "chunk_index", "category"], page_size=3))
    assert len(rows) == N
    assert sorted((r["doc_key"], r["chunk_index"]) for r in rows) == sorted(
        (p.payload["doc_key"], p.payload["chunk_index"]) for p in CORPUS
    )
    for row in rows:
        assert set(row) == {"doc_key", "chunk_index", "category"}  # category may be None

    flt = m.Filter(must=[_eq("doc_type", "file")])
    rows = list(corpus_store.scroll(flt, ["etag"], page_size=2))
    assert sorted(r["etag"] for r in rows) == sorted(
        p.payload["etag"] for p in CORPUS if p.payload["doc_type"] == "file"
    )
    assert all(set(r) == {"etag"} for r in rows)
    assert list(corpus_store.scroll(flt, ["no_such_field"], page_size=100)) == [{}] * len(rows)


def test_count(corpus_store: VectorStore) -> None:
    assert corpus_store.count() == N
    assert corpus_store.count(None) == N
    assert corpus_store.count(m.Filter(must=[_eq("doc_type", "deck_card")])) == 1


@pytest.mark.parametrize(
    ("field", "flt", "predicate"),
    [
        ("tags", None, lambda p: True),
        ("tags", m.Filter(must=[_eq("doc_type", "file")]), lambda p: p["doc_type"] == "file"),
        (
            "folder_ancestors",
            m.Filter(must=[_eq("acl", "user:bob")]),
            lambda p: "user:bob" in p["acl"],
        ),
        ("doc_key", m.Filter(must=[_eq("doc_key", "file:nope")]), lambda p: False),
    ],
    ids=["all-tags", "file-tags", "bob-folders", "nothing"],
)
def test_facet_values_are_every_value_of_the_matching_points(
    corpus_store: VectorStore,
    field: str,
    flt: m.Filter | None,
    predicate: Callable[[dict[str, Any]], bool],
) -> None:
    """A facet lists each value any matching point holds, once, however rare."""
    expected = {v for p in CORPUS if predicate(p.payload) for v in _values(p.payload, field)}
    assert expected or field == "doc_key"
    assert corpus_store.facet_values(field, flt) == expected


@pytest.mark.parametrize(
    ("field", "flt", "predicate"),
    [
        ("tags", None, lambda p: True),
        ("doc_type", m.Filter(must=[_eq("acl", "user:bob")]), lambda p: "user:bob" in p["acl"]),
        ("mime_type", None, lambda p: True),
    ],
    ids=["all-tags", "bob-doc-types", "mime-types"],
)
def test_facet_counts_count_the_matching_points_holding_each_value(
    corpus_store: VectorStore,
    field: str,
    flt: m.Filter | None,
    predicate: Callable[[dict[str, Any]], bool],
) -> None:
    """With its count, each value is that of as many matching points as hold it, counted
    exactly: what the MCP ``list_values`` tool shows a caller of their documents."""
    expected: dict[str, int] = {}
    for p in CORPUS:
        if predicate(p.payload):
            for v in _values(p.payload, field):
                expected[str(v)] = expected.get(str(v), 0) + 1
    assert expected
    assert corpus_store.facet_counts(field, flt) == expected


def test_facet_values_are_read_whole_where_the_engine_would_sample(store: VectorStore) -> None:
    """A caller's rare folders are listed even where the segment's index holds far more
    distinct values than a facet's default limit ten times over (Qdrant then samples values
    at random unless the request's limit is larger: ``FACET_LIMIT`` says why): 2,000
    documents of another user's group folder, each with 60 other users' keys (120,000
    values, past the sampling threshold of the 10,000-value limit asked before), 10,000 of
    the caller's in one folder (a sample stops after 4,096 draws that bring no new value),
    and 5 in folders of one document each. Every value is there, on every call (asked 10,000
    deep, Qdrant Edge left rare folders out; qdrant-client's local mode never samples)."""
    rng = random.Random(3)

    def point(payload: dict[str, Any]) -> PointRecord:
        payload = {"chunk_index": 0, **payload}
        return PointRecord(str(uuid.uuid4()), payload, unit_vector(rng), SparseVector([1], [1.0]))

    points = [
        point({"doc_key": f"file:g{i}", "acl": ["user:bob"],
               "folder_ancestors": [f"u{k}:/Group/d{i}" for k in range(60)]})
        for i in range(2000)
    ] + [
        point({"doc_key": f"file:a{i}", "acl": ["user:alice"],
               "folder_ancestors": ["alice:/", "alice:/A", "alice:/A/B"]})
        for i in range(10_000)
    ] + [
        point({"doc_key": f"file:r{r}", "acl": ["user:alice"],
               "folder_ancestors": ["alice:/", f"alice:/Rare{r}"]})
        for r in range(5)
    ]  # fmt: skip
    rng.shuffle(points)
    for i in range(0, len(points), 2000):
        store.upsert(points[i : i + 2000])
    alice = m.Filter(must=[_eq("acl", "user:alice")])
    expected = {"alice:/", "alice:/A", "alice:/A/B", *(f"alice:/Rare{r}" for r in range(5))}
    for _ in range(3):
        assert store.facet_values("folder_ancestors", alice) == expected


@pytest.mark.parametrize(
    ("name", "flt", "predicate"), FILTER_CASES, ids=[c[0] for c in FILTER_CASES]
)
def test_filter_kinds(
    corpus_store: VectorStore, name: str, flt: m.Filter, predicate: Callable[[dict[str, Any]], bool]
) -> None:
    expected = _expected_ids(name, predicate)
    if name not in ("nothing", "has_id"):
        assert 0 < len(expected) < N, "a filter case must split the corpus"
    by_id = {p.id: p for p in CORPUS}

    assert corpus_store.count(flt) == len(expected)
    scrolled = sorted(
        (r["doc_key"], r["chunk_index"])
        for r in corpus_store.scroll(flt, ["doc_key", "chunk_index"])
    )
    assert scrolled == sorted(
        (by_id[i].payload["doc_key"], by_id[i].payload["chunk_index"]) for i in expected
    )
    for fusion in Fusion:
        hits = corpus_store.query(
            dense=unit_vector(random.Random(3)), sparse=CORPUS[0].sparse,
            flt=flt, limit=N, prefetch_limit=N, fusion=fusion,
        )  # fmt: skip
        assert {h.id for h in hits} == expected


# --- query --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fusion", list(Fusion))
def test_hybrid_query_fuses_both_branches(corpus_store: VectorStore, fusion: Fusion) -> None:
    target = CORPUS[4]
    only_target = SparseVector([UNIQUE_BASE + 4], [1.0])  # the sparse branch finds one point
    hits = corpus_store.query(
        dense=target.dense, sparse=only_target, flt=None, limit=5, prefetch_limit=N, fusion=fusion
    )
    assert len(hits) == 5
    assert hits[0].id == target.id
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    if fusion is Fusion.RRF:
        assert hits[0].score == pytest.approx(2 / RRF_K)  # rank 0 in both branches
        assert hits[1].score == pytest.approx(1 / (1 + RRF_K))  # rank 1 of the dense branch
    assert hits[0].payload == target.payload


@pytest.mark.parametrize("fusion", list(Fusion))
def test_filters_apply_before_fusion(corpus_store: VectorStore, fusion: Fusion) -> None:
    best = CORPUS[2]  # the exact match in both branches, filtered out
    flt = m.Filter(must_not=[_eq("doc_key", best.payload["doc_key"])])
    allowed = {p.id for p in CORPUS if p.payload["doc_key"] != best.payload["doc_key"]}
    for prefetch_limit in (1, 3):
        hits = corpus_store.query(
            dense=best.dense, sparse=best.sparse, flt=flt, limit=prefetch_limit,
            prefetch_limit=prefetch_limit, fusion=fusion,
        )  # fmt: skip
        ids = [h.id for h in hits]
        assert best.id not in ids
        assert set(ids) <= allowed
        # filtered inside each branch, not after fusion: the page is still full
        assert len(hits) == prefetch_limit


@pytest.mark.parametrize("fusion", list(Fusion))
def test_dense_only_query(corpus_store: VectorStore, fusion: Fusion) -> None:
    target = CORPUS[7]
    hits = corpus_store.query(
        dense=target.dense, sparse=None, flt=None, limit=4, prefetch_limit=N, fusion=fusion
    )
    assert len(hits) == 4
    assert hits[0].id == target.id
    if fusion is Fusion.RRF:
        assert [h.score for h in hits] == pytest.approx([1 / (r + RRF_K) for r in range(4)])


@pytest.mark.parametrize("fusion", list(Fusion))
def test_a_shallower_dense_prefetch_bounds_the_dense_half_alone(
    corpus_store: VectorStore, fusion: Fusion
) -> None:
    """``dense_prefetch_limit`` cuts the dense prefetch, not the sparse one: the fused hits
    are the dense branch's best 2 and every sparse candidate (the dense best 2 lie outside the
    sparse candidates and some points outside both, so another dense depth would show)."""
    dense, sparse = CORPUS[1].dense, CORPUS[0].sparse
    dense_best = {h.id for h in corpus_store.branch(dense=dense, flt=None, limit=2)}
    sparse_all = {h.id for h in corpus_store.branch(sparse=sparse, flt=None, limit=N)}
    assert not dense_best & sparse_all and dense_best | sparse_all < {p.id for p in CORPUS}
    for vector, expected in ((sparse, dense_best | sparse_all), (None, dense_best)):
        hits = corpus_store.query(
            dense=dense, sparse=vector, flt=None, limit=N, prefetch_limit=N,
            dense_prefetch_limit=2, fusion=fusion,
        )  # fmt: skip
        assert {h.id for h in hits} == expected


def _bm25_idf_order(query: SparseVector) -> list[str]:
    """Point ids ranked by the sparse score with Qdrant's IDF modifier:
    ``sum(q_i * v_i * ln(1 + (N - n_i + 0.5) / (n_i + 0.5)))`` over shared indices."""
    df: dict[int, int] = {}
    for p in CORPUS:
        assert p.sparse is not None
        for i in p.sparse.indices:
            df[i] = df.get(i, 0) + 1
    q = dict(zip(query.indices, query.values, strict=True))
    scores = {}
    for p in CORPUS:
        assert p.sparse is not None
        shared = [(i, v) for i, v in zip(p.sparse.indices, p.sparse.values, strict=True) if i in q]
        if shared:
            scores[p.id] = sum(
                q[i] * v * math.log(1 + (N - df[i] + 0.5) / (df[i] + 0.5)) for i, v in shared
            )
    return sorted(scores, key=lambda i: -scores[i])


@pytest.mark.parametrize("fusion", list(Fusion))
def test_sparse_only_query(corpus_store: VectorStore, fusion: Fusion) -> None:
    query = SparseVector([0, 5, UNIQUE_BASE + 11], [1.0, 0.7, 0.4])
    expected = _bm25_idf_order(query)
    assert len(expected) > 3
    hits = corpus_store.query(
        dense=None, sparse=query, flt=None, limit=N, prefetch_limit=N, fusion=fusion
    )
    assert [h.id for h in hits] == expected  # only points sharing a token, ranked with IDF
    if fusion is Fusion.RRF:
        assert [h.score for h in hits] == pytest.approx([1 / (r + RRF_K) for r in range(len(hits))])


def test_branch_gives_raw_scores_of_one_vector(corpus_store: VectorStore) -> None:
    query = SparseVector([0, 5, UNIQUE_BASE + 11], [1.0, 0.7, 0.4])
    hits = corpus_store.branch(sparse=query, flt=None, limit=N)
    assert [h.id for h in hits] == _bm25_idf_order(query)
    assert all(set(h.payload) == {"doc_key"} for h in hits)
    target = CORPUS[7]
    dense = corpus_store.branch(dense=target.dense, flt=None, limit=3, fields=["chunk_index"])
    assert dense[0].id == target.id
    assert dense[0].score == pytest.approx(1.0, abs=1e-3)  # cosine of a vector with itself
    assert dense[0].payload == {"chunk_index": target.payload["chunk_index"]}
    flt = m.Filter(must_not=[_eq("doc_key", target.payload["doc_key"])])
    assert target.id not in {
        h.id for h in corpus_store.branch(dense=target.dense, flt=flt, limit=N)
    }
    with pytest.raises(ValueError):
        corpus_store.branch(dense=target.dense, sparse=query, flt=None, limit=1)


def test_query_hits_and_retrieve_carry_the_fields_asked(
    corpus_store: VectorStore,
) -> None:
    args: dict[str, Any] = dict(
        dense=CORPUS[5].dense, sparse=CORPUS[9].sparse, flt=None, limit=N, prefetch_limit=N,
        fusion=Fusion.DBSF,
    )  # fmt: skip
    whole = {h.id: h.payload for h in corpus_store.query(**args)}
    keyed = corpus_store.query(**args, fields=("doc_key",))
    assert {h.id: h.payload for h in keyed} == {
        i: {"doc_key": p["doc_key"]} for i, p in whole.items()
    }
    assert all(h.payload == {} for h in corpus_store.query(**args, fields=()))
    wanted = [keyed[2].id, keyed[0].id, "00000000-0000-0000-0000-000000000000"]
    assert corpus_store.retrieve(wanted) == {i: whole[i] for i in wanted[:2]}
    assert corpus_store.retrieve(wanted, ("doc_key", "title")) == {
        i: {"doc_key": whole[i]["doc_key"], "title": whole[i]["title"]} for i in wanted[:2]
    }
    assert corpus_store.retrieve(wanted, ()) == {i: {} for i in wanted[:2]}
    assert corpus_store.retrieve([]) == {}


def test_query_needs_a_vector(corpus_store: VectorStore) -> None:
    with pytest.raises(ValueError):
        corpus_store.query(
            dense=None, sparse=None, flt=None, limit=1, prefetch_limit=1, fusion=Fusion.RRF
        )


@pytest.mark.parametrize("fusion", list(Fusion))
def test_scores_are_stable(corpus_store: VectorStore, fusion: Fusion) -> None:
    args: dict[str, Any] = dict(
        dense=CORPUS[5].dense, sparse=CORPUS[9].sparse, flt=None, limit=N, prefetch_limit=N,
        fusion=fusion,
    )  # fmt: skip
    first = corpus_store.query(**args)
    again = corpus_store.query(**args)
    assert {h.id: h.score for h in first} == {h.id: h.score for h in again}


def test_concurrent_use_from_threads(engine: str, tmp_path: Any) -> None:
    store = make_store(engine, tmp_path / "qdrant")
    store.ensure_collection(DIM)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for j in range(5):
                store.upsert(_version(f"file:t{k}", "h", 2, 100 * k + j))
                store.query(
                    dense=CORPUS[0].dense, sparse=CORPUS[0].sparse, flt=None, limit=3,
                    prefetch_limit=10, fusion=Fusion.RRF,
                )  # fmt: skip
                store.count(m.Filter(must=[_eq("doc_key", f"file:t{k}")]))
                list(store.scroll(None, ["doc_key"], page_size=4))
        except BaseException as exc:  # collected and re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        assert store.count() == 8
    finally:
        store.close()
