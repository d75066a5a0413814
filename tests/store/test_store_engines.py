"""Engine-specific behaviour of the vector stores: selection, error translation, payload
indexes, Edge persistence and locking, the Edge filter translator, and cross-engine equality."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import qdrant_edge as qe
from qdrant_client import QdrantClient
from qdrant_client import models as m
from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
from store_corpus import CORPUS, DIM, PREFIX, SLUG, make_store, unit_vector

from ncindex.errors import StoreUnavailable
from ncindex.settings import Settings
from ncindex.store import (
    PAYLOAD_INDEXES,
    Fusion,
    IndexKind,
    ModelPointers,
    SparseVector,
    model_slug,
    open_store,
)
from ncindex.store.qdrant_edge import ALIAS_FILE, QdrantEdgeStore, to_edge_filter
from ncindex.store.qdrant_server import ENGINE_ERRORS, QdrantServerStore, _client_lock

# --- selection and names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("sentence-transformers/all-MiniLM-L6-v2", "all-minilm-l6-v2"),
        ("BAAI/bge-small-en-v1.5", "bge-small-en-v1-5"),
        ("intfloat/multilingual-e5-large/", "multilingual-e5-large"),
        ("plain_Model  Name", "plain-model-name"),
    ],
)
def test_model_slug(name: str, slug: str) -> None:
    assert model_slug(name) == slug


def test_model_slug_rejects_nothing_left() -> None:
    with pytest.raises(ValueError):
        model_slug("org/---")


def test_open_store_picks_the_engine_from_settings(tmp_path: Path) -> None:
    server = open_store(
        Settings(qdrant_url="http://127.0.0.1:9/", collection_prefix="nc"), model_slug="m1"
    )
    assert isinstance(server, QdrantServerStore)
    assert (server.collection, server.alias) == ("nc-m1", "nc")
    server.close()  # never connected

    edge = open_store(Settings(qdrant_path=tmp_path / "q"), model_slug="m1")
    assert isinstance(edge, QdrantEdgeStore)
    assert edge.shard_path == tmp_path / "q" / "m1"
    edge.close()

    default = open_store(Settings(data_dir=tmp_path / "var"), model_slug="m2")
    assert isinstance(default, QdrantEdgeStore)
    assert default.shard_path == tmp_path / "var" / "qdrant" / "m2"
    default.close()


# --- server engine ------------------------------------------------------------------------------

SAMPLE_ERRORS: list[Exception] = [
    UnexpectedResponse(503, "Service Unavailable", b"{}", httpx.Headers()),
    ResponseHandlingException(ConnectionRefusedError("refused")),
    ResourceExhaustedResponse("slow down", 1),
    httpx.ConnectError("connection refused"),
    httpx.ReadTimeout("timed out"),
    grpc.RpcError(),
]


def test_sample_errors_cover_every_caught_type() -> None:
    covered = {t for t in ENGINE_ERRORS for e in SAMPLE_ERRORS if isinstance(e, t)}
    assert covered == set(ENGINE_ERRORS)


class _FailingClient:
    """Stands in for ``QdrantClient``: every method raises ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise self.error

        return fail


_CALLS: dict[str, Any] = {
    "ensure_collection": lambda s: s.ensure_collection(DIM),
    "upsert": lambda s: s.upsert(CORPUS[:1]),
    "delete_document": lambda s: s.delete_document("file:1", keep={CORPUS[0].id}),
    "set_payload": lambda s: s.set_payload("file:1", {"a": 1}),
    "document_points": lambda s: s.document_points("file:1"),
    "scroll": lambda s: list(s.scroll(None, ["doc_key"])),
    "query": lambda s: s.query(
        dense=CORPUS[0].dense, sparse=None, flt=None, limit=1, prefetch_limit=1, fusion=Fusion.RRF
    ),
    "branch": lambda s: s.branch(dense=CORPUS[0].dense, flt=None, limit=1),
    "retrieve": lambda s: s.retrieve([CORPUS[0].id], ("doc_key",)),
    "count": lambda s: s.count(),
    "models": lambda s: s.models(),
    "set_models": lambda s: s.set_models(ModelPointers(active=SLUG)),
    "drop_model": lambda s: s.drop_model("other"),
    "close": lambda s: s.close(),
}


@pytest.mark.parametrize("error", SAMPLE_ERRORS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("call", list(_CALLS))
def test_server_translates_engine_errors(error: Exception, call: str) -> None:
    store = QdrantServerStore(_FailingClient(error), PREFIX, SLUG)  # type: ignore[arg-type]
    with pytest.raises(StoreUnavailable) as info:
        _CALLS[call](store)
    assert info.value.__cause__ is error


def test_server_lets_other_errors_through() -> None:
    store = QdrantServerStore(_FailingClient(KeyError("bug")), PREFIX, SLUG)  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        store.count()


def test_server_creates_every_payload_index(monkeypatch: pytest.MonkeyPatch) -> None:
    client = QdrantClient(":memory:")
    created: list[str] = []
    original = client.create_payload_index

    def spy(collection_name: str, field_name: str, field_schema: Any = None, **kw: Any) -> Any:
        created.append(field_name)
        return original(collection_name, field_name, field_schema=field_schema, **kw)

    monkeypatch.setattr(client, "create_payload_index", spy)
    store = QdrantServerStore(client, PREFIX, SLUG)
    store.ensure_collection(DIM)
    # what each index is sent with: tests/store/test_layout.py (the REST bodies)
    assert sorted(created) == sorted(PAYLOAD_INDEXES)
    info = client.get_collection(store.collection)
    assert info.config.params.sparse_vectors is not None
    assert info.config.params.sparse_vectors["bm25"].modifier == m.Modifier.IDF
    store.close()


def test_server_ensure_tolerates_a_concurrent_creator(monkeypatch: pytest.MonkeyPatch) -> None:
    client = QdrantClient(":memory:")
    create, set_aliases = client.create_collection, client.update_collection_aliases
    conflict = UnexpectedResponse(409, "Conflict", b"{}", httpx.Headers())

    def lose_collection_race(*args: Any, **kwargs: Any) -> Any:
        create(*args, **kwargs)  # "the other process" wins ...
        raise conflict  # ... and this one hears 409

    def lose_alias_race(*args: Any, **kwargs: Any) -> Any:
        set_aliases(*args, **kwargs)
        raise conflict

    monkeypatch.setattr(client, "create_collection", lose_collection_race)
    monkeypatch.setattr(client, "update_collection_aliases", lose_alias_race)
    store = QdrantServerStore(client, PREFIX, SLUG)
    store.ensure_collection(DIM)
    assert store.count() == 0
    assert store.models().active == SLUG
    store.close()


def test_server_locks_only_local_clients() -> None:
    local = QdrantClient(":memory:")
    assert _client_lock(local) is _client_lock(local)  # one lock per client, shared by stores
    assert _client_lock(QdrantClient(":memory:")) is not _client_lock(local)
    remote = QdrantClient(url="http://127.0.0.1:9", check_compatibility=False)
    with _client_lock(remote):  # a no-op context
        pass
    remote.close()
    local.close()


# --- Edge engine --------------------------------------------------------------------------------


def test_edge_creates_every_payload_index(tmp_path: Path) -> None:
    store = QdrantEdgeStore(tmp_path, SLUG)
    store.ensure_collection(DIM)
    schema = store._open_shard().info().payload_schema
    kinds = {
        IndexKind.KEYWORD: qe.PayloadSchemaType.Keyword,
        IndexKind.INTEGER: qe.PayloadSchemaType.Integer,
        IndexKind.TEXT: qe.PayloadSchemaType.Text,
    }
    assert {f: schema[f].data_type for f in schema} == {
        f: kinds[k] for f, k in PAYLOAD_INDEXES.items()
    }
    store.close()


def _query(store: Any, fusion: Fusion = Fusion.RRF) -> list[tuple[str, float]]:
    hits = store.query(
        dense=CORPUS[3].dense, sparse=CORPUS[6].sparse, flt=None, limit=len(CORPUS),
        prefetch_limit=len(CORPUS), fusion=fusion,
    )  # fmt: skip
    return sorted((h.id, round(h.score, 6)) for h in hits)


def test_edge_reopen_sees_the_data(tmp_path: Path) -> None:
    store = QdrantEdgeStore(tmp_path, SLUG)
    store.ensure_collection(DIM)
    store.upsert(CORPUS)
    store.set_payload("file:101", {"title": "Renamed"})
    store.delete_document("note:202")
    count, hits = store.count(), _query(store)
    store.close()
    store.close()  # twice is harmless

    again = QdrantEdgeStore(tmp_path, SLUG)  # no ensure_collection: the data is there
    try:
        assert again.count() == count == len(CORPUS) - 1
        assert _query(again) == hits
        assert {p.payload["title"] for p in again.document_points("file:101")} == {"Renamed"}
        assert again.models().active == SLUG
        again.ensure_collection(DIM)
        assert again.count() == count
        with pytest.raises(ValueError, match="dimension"):
            again.ensure_collection(DIM * 2)
    finally:
        again.close()


def test_edge_writes_survive_a_process_that_never_closes(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from pathlib import Path
        from store_corpus import CORPUS, DIM
        from ncindex.store.qdrant_edge import QdrantEdgeStore
        store = QdrantEdgeStore(Path({str(tmp_path)!r}), "m")
        store.ensure_collection(DIM)
        store.upsert(CORPUS)
        store.delete_document("file:101")
        os._exit(0)  # no flush, no close
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    store = QdrantEdgeStore(tmp_path, "m")
    try:
        assert store.count() == len(CORPUS) - 3
    finally:
        store.close()


def test_edge_one_opener_per_folder(tmp_path: Path) -> None:
    first = QdrantEdgeStore(tmp_path, SLUG)
    first.ensure_collection(DIM)
    late = QdrantEdgeStore(tmp_path, SLUG)
    assert late.models().active == SLUG  # the pointers are readable without the shard
    with pytest.raises(StoreUnavailable):
        late.count()  # the shard opens on first use, and another holder refuses it
    first.close()
    second = QdrantEdgeStore(tmp_path, SLUG)
    assert second.count() == 0
    second.close()


def test_edge_errors_before_ensure_and_after_close(tmp_path: Path) -> None:
    store = QdrantEdgeStore(tmp_path, SLUG)
    with pytest.raises(StoreUnavailable):
        store.count()
    store.ensure_collection(DIM)
    store.close()
    for call in ("upsert", "query", "branch", "retrieve", "scroll", "count", "document_points",
                 "set_payload"):  # fmt: skip
        with pytest.raises(StoreUnavailable):
            _CALLS[call](store)


def test_edge_engine_error_is_translated(tmp_path: Path) -> None:
    store = QdrantEdgeStore(tmp_path, SLUG)
    store.ensure_collection(DIM)
    point = CORPUS[0]
    with pytest.raises(StoreUnavailable, match="dimension"):
        store.upsert([type(point)(point.id, point.payload, [1.0, 0.0], point.sparse)])
    store.close()


def test_edge_alias_file_is_replaced_whole(tmp_path: Path) -> None:
    store = QdrantEdgeStore(tmp_path, "a")
    store.ensure_collection(DIM)
    other = store.use_model("b")
    other.ensure_collection(DIM)
    other.set_models(ModelPointers(active="b"))
    assert (tmp_path / ALIAS_FILE).read_text(encoding="utf-8") == "b\n"
    other.set_models(ModelPointers(active="b", standby="a"))
    assert (tmp_path / ALIAS_FILE).read_text(encoding="utf-8") == "b\nstandby a\n"
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted([ALIAS_FILE, "a", "b"])  # no temporary file left
    other.close()
    store.close()


@pytest.mark.parametrize(
    "condition",
    [
        m.HasVectorCondition(has_vector="dense"),
        m.NestedCondition(nested=m.Nested(key="x", filter=m.Filter())),
        m.FieldCondition(
            key="g", geo_radius=m.GeoRadius(center=m.GeoPoint(lon=0, lat=0), radius=1.0)
        ),
    ],
    ids=["has_vector", "nested_object", "geo"],
)
def test_edge_translator_rejects_what_it_does_not_know(condition: Any) -> None:
    with pytest.raises(ValueError, match="supported"):
        to_edge_filter(m.Filter(must=[condition]))


def test_edge_translator_shapes() -> None:
    assert to_edge_filter(None) is None
    flt = to_edge_filter(
        m.Filter(
            must=m.FieldCondition(key="a", match=m.MatchValue(value="x")),
            should=[m.Filter(must_not=[m.IsEmptyCondition(is_empty=m.PayloadField(key="b"))])],
            min_should=m.MinShould(
                conditions=[m.FieldCondition(key="n", range=m.Range(gte=1, lt=5))], min_count=1
            ),
        )
    )
    assert isinstance(flt, qe.Filter)
    assert isinstance(flt.must[0], qe.FieldCondition)
    assert isinstance(flt.should[0], qe.Filter)
    assert isinstance(flt.should[0].must_not[0], qe.IsEmptyCondition)
    assert flt.min_should.min_count == 1
    assert flt.min_should.conditions[0].range.gte == 1.0


# --- both engines agree -------------------------------------------------------------------------


@pytest.mark.parametrize("fusion", list(Fusion))
@pytest.mark.parametrize("filtered", [False, True])
def test_engines_give_the_same_hits_and_scores(
    tmp_path: Path, fusion: Fusion, filtered: bool
) -> None:
    stores = [make_store("server", tmp_path), make_store("edge", tmp_path / "edge")]
    for s in stores:
        s.ensure_collection(DIM)
        s.upsert(CORPUS)
    flt = (
        m.Filter(must=[m.FieldCondition(key="acl", match=m.MatchAny(any=["user:alice"]))])
        if filtered
        else None
    )
    rng = random.Random(11)
    try:
        for _ in range(3):
            dense = unit_vector(rng)
            sparse = SparseVector(sorted(rng.sample(range(12), 3)), [1.0, 0.5, 0.25])
            args: dict[str, Any] = dict(
                dense=dense, sparse=sparse, flt=flt, limit=len(CORPUS), prefetch_limit=6,
                fusion=fusion,
            )  # fmt: skip
            results = [{h.id: h.score for h in s.query(**args)} for s in stores]
            assert results[0].keys() == results[1].keys()
            for point_id, score in results[0].items():
                assert results[1][point_id] == pytest.approx(score, rel=1e-4, abs=1e-6)
    finally:
        for s in stores:
            s.close()


def test_a_store_open_elsewhere_says_so_and_what_to_do(tmp_path: Path) -> None:
    """Qdrant Edge locks its write-ahead log: a second opener (another process of a
    distributed deployment pointed at the embedded store) is told why and what to do."""
    first = QdrantEdgeStore(tmp_path, SLUG)
    first.ensure_collection(DIM)
    try:
        with pytest.raises(StoreUnavailable, match=r"open in another process.*NCINDEX_QDRANT_URL"):
            QdrantEdgeStore(tmp_path, SLUG).count()
    finally:
        first.close()
