"""A collection ncindex creates carries the layout the settings ask for, on both engines:
shards, replication, write consistency (server), HNSW (whole-collection and per-tenant graph),
scalar int8 quantisation, on-disk vectors, payloads and payload indexes, and ``acl`` as the
tenant index.

qdrant-client's local mode (``QdrantClient(":memory:")``) accepts every one of these parameters
but keeps only the vectors' (the dense ``on_disk``, the BM25 full-scan threshold and IDF
modifier) and creates no payload index (the local-mode test below), so the server engine is
checked by what it sends: the body of ``PUT /collections/{name}`` received by a recording HTTP
endpoint speaking Qdrant's REST format.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pydantic
import pytest
import qdrant_edge as qe
from qdrant_client import QdrantClient
from qdrant_client import models as m

from ncindex.errors import StoreUnavailable
from ncindex.search.filter_fields import FIELDS
from ncindex.settings import Settings
from ncindex.store import CollectionLayout, Fusion, SparseVector, open_store
from ncindex.store.layout import DEFAULT_LAYOUT
from ncindex.store.port import DENSE, SPARSE, PointRecord
from ncindex.store.qdrant_edge import QdrantEdgeStore, to_edge_search_params
from ncindex.store.qdrant_server import QdrantServerStore
from ncindex.store.schema import PAYLOAD_INDEXES, IndexKind
from support import edge_segment_sparse_thresholds

CUSTOM = CollectionLayout(
    shard_number=6,
    replication_factor=3,
    write_consistency_factor=2,
    hnsw_m=0,
    hnsw_ef_construct=64,
    hnsw_payload_m=24,
    indexing_threshold_kb=500,
    max_segment_size_kb=100_000,
    full_scan_threshold_kb=40_000,
    sparse_full_scan_threshold=25_000,
    sparse_full_scan_share=0.25,
    quantization="none",
    on_disk_vectors=False,
    on_disk_payload=False,
    on_disk_payload_index=False,
    preload_share=0.25,
    hnsw_ef=64,
    ef_per_candidate=2.0,
    oversampling=3.0,
    acorn=False,
)


def test_default_layout_is_the_settings_defaults() -> None:
    assert CollectionLayout.from_settings(Settings()) == DEFAULT_LAYOUT
    assert DEFAULT_LAYOUT.quantization == "int8"
    assert DEFAULT_LAYOUT.hnsw_payload_m > 0


def test_a_full_scan_threshold_qdrant_would_refuse_is_refused() -> None:
    """Qdrant's ``HnswConfigDiff.full_scan_threshold`` is at least 10 (KB): a smaller one is
    refused at start, not by the server when the first collection is created."""
    with pytest.raises(pydantic.ValidationError, match="qdrant_full_scan_threshold_kb"):
        Settings(qdrant_full_scan_threshold_kb=9)
    assert Settings(qdrant_full_scan_threshold_kb=10).qdrant_full_scan_threshold_kb == 10


def test_the_bm25_full_scan_threshold_is_a_share_of_the_shard_with_a_floor() -> None:
    layout = dataclasses.replace(
        DEFAULT_LAYOUT, sparse_full_scan_threshold=5_000, sparse_full_scan_share=0.1
    )
    assert layout.sparse_threshold(0) == 5_000
    assert layout.sparse_threshold(50_000) == 5_000
    assert layout.sparse_threshold(1_000_000) == 100_000
    assert layout.sparse_threshold(1_000_001) == 100_001  # rounded up
    assert dataclasses.replace(layout, sparse_full_scan_share=0).sparse_threshold(10**7) == 5_000
    for share in (-0.1, 1.5):
        with pytest.raises(pydantic.ValidationError, match="qdrant_sparse_full_scan_share"):
            Settings(qdrant_sparse_full_scan_share=share)


@pytest.mark.parametrize("layout", [DEFAULT_LAYOUT, CUSTOM], ids=["default", "custom"])
def test_optimising_with_a_bm25_threshold_changes_that_alone(
    tmp_path: Path, layout: CollectionLayout
) -> None:
    """The optimiser's child opens a shard copy without the layout it was created with (the
    default one): the threshold it is given reaches the segments it builds, and the shard
    keeps every other parameter of its own and answers as before (600 points are scanned
    under either threshold: this checks the reloaded shard, not the plan)."""
    from ncindex.store import PointRecord

    created = QdrantEdgeStore(
        tmp_path, "m", layout=dataclasses.replace(layout, indexing_threshold_kb=1)
    )
    created.ensure_collection(8)
    created.upsert(
        [
            PointRecord(
                str(uuid.UUID(int=i + 1)),
                {"doc_key": f"d{i}", "acl": ["alice"]},
                [float(i % 7 + 1), 1.0, 0, 0, 0, 0, 0, float(i % 3)],
                SparseVector(indices=[i % 50, 60], values=[1.0, 0.5]),
            )
            for i in range(600)
        ]
    )
    query = SparseVector(indices=[7, 60], values=[1.0, 1.0])
    acl = m.Filter(must=[m.FieldCondition(key="acl", match=m.MatchValue(value="alice"))])
    before_hits = [h.id for h in created.branch(sparse=query, flt=acl, limit=12, fields=())]
    created.close()
    config = tmp_path / "m" / "edge_config.json"
    before = json.loads(config.read_text(encoding="utf-8"))

    child = QdrantEdgeStore(tmp_path, "m")
    try:
        assert child.optimize(sparse_threshold=123_456)
        after = json.loads(config.read_text(encoding="utf-8"))
        assert after["sparse_vectors"]["bm25"].pop("full_scan_threshold") == 123_456
        before["sparse_vectors"]["bm25"].pop("full_scan_threshold")
        assert after == before
        assert edge_segment_sparse_thresholds(tmp_path / "m") == [123_456]
        hits = [h.id for h in child.branch(sparse=query, flt=acl, limit=12, fields=())]
        assert sorted(hits) == sorted(before_hits) and len(hits) == 12  # the i % 50 == 7 points
    finally:
        child.close()


def _segments_after_a_later_optimisation(tmp_path: Path, max_segment_size_kb: int) -> int:
    """Segments of an Edge shard of 4,000 random 64-dimension points (1,000 KB of vectors),
    optimised, then 500 more (125 KB) and optimised again, every segment indexed (the caller
    fixes the CPUs Qdrant plans for)."""
    import numpy as np

    from ncindex.store import PointRecord

    layout = dataclasses.replace(
        DEFAULT_LAYOUT, indexing_threshold_kb=1, max_segment_size_kb=max_segment_size_kb
    )
    store = QdrantEdgeStore(tmp_path, "m", layout=layout)
    store.ensure_collection(64)
    vectors = np.random.default_rng(1).standard_normal((4500, 64)).astype(np.float32).tolist()
    for batch in (range(4000), range(4000, 4500)):
        store.upsert([PointRecord(str(uuid.UUID(int=i + 1)), {"doc_key": f"d{i}"}, vectors[i])
                      for i in batch])  # fmt: skip
        assert store.optimize()
    info = store.info()
    store.close()
    assert info["points"] == info["indexed_vectors"] == 4500
    return info["segments"]


def test_a_later_optimisation_indexes_new_points_apart_under_the_max_segment_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a 1,100 KB max segment size the 500 new points (125 KB) are indexed in a segment
    of their own beside the 1,000 KB one (the appendable one makes three), since the two
    together would pass it; with Qdrant's default (256,000 KB per indexing thread) they are
    rebuilt together with it. Qdrant pairs them only while the shard is at its target number
    of segments (half the CPUs, at least 2: ``default_segment_number``), so the CPUs it plans
    for are fixed at 2 (``QDRANT_NUM_CPUS``, read by Qdrant at each plan)."""
    monkeypatch.setenv("QDRANT_NUM_CPUS", "2")
    assert _segments_after_a_later_optimisation(tmp_path / "capped", 1_100) == 3
    assert _segments_after_a_later_optimisation(tmp_path / "default", 0) == 2


#: Payload fields the product filters on itself, beside the public filter fields.
INTERNAL_FILTER_FIELDS = {"acl", "doc_key", "file_path", "folder_ancestors", "chunk_index"}


def test_every_payload_index_serves_a_filter_and_every_filter_field_has_one() -> None:
    """An index no filter reads costs disk, memory and optimisation time for nothing; a filter
    field without one is scanned point by point."""
    public = {f.key for f in FIELDS.values() if f.key is not None}
    assert set(PAYLOAD_INDEXES) == public | INTERNAL_FILTER_FIELDS


def test_write_consistency_above_replication_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="qdrant_write_consistency_factor"):
        Settings(qdrant_replication_factor=1, qdrant_write_consistency_factor=2)


@pytest.mark.parametrize("layout", [DEFAULT_LAYOUT, CUSTOM], ids=["default", "custom"])
def test_edge_shard_is_created_with_the_layout(tmp_path: Path, layout: CollectionLayout) -> None:
    store = QdrantEdgeStore(tmp_path, "m", layout=layout)
    store.ensure_collection(8)
    try:
        saved = json.loads((tmp_path / "m" / "edge_config.json").read_text(encoding="utf-8"))
        assert saved["hnsw_config"]["m"] == layout.hnsw_m
        assert saved["hnsw_config"]["ef_construct"] == layout.hnsw_ef_construct
        assert saved["hnsw_config"]["payload_m"] == layout.hnsw_payload_m
        assert saved["hnsw_config"]["full_scan_threshold"] == layout.full_scan_threshold_kb
        sparse = saved["sparse_vectors"]["bm25"]
        assert sparse["full_scan_threshold"] == layout.sparse_full_scan_threshold
        assert saved["on_disk_payload"] is layout.on_disk_payload
        assert saved["optimizers"]["indexing_threshold"] == layout.indexing_threshold_kb
        assert saved["optimizers"]["max_segment_size"] == (layout.max_segment_size_kb or None)
        assert saved["vectors"]["dense"]["on_disk"] is layout.on_disk_vectors
        if layout.quantization == "int8":
            assert saved["quantization_config"] == {"scalar": {"type": "int8", "always_ram": True}}
        else:
            assert saved.get("quantization_config") is None
        schema = store._open_shard().info().payload_schema
        assert set(schema) == set(PAYLOAD_INDEXES)
        acl = schema["acl"]
        assert acl.params is not None and acl.params.is_tenant is True
        memory = qe.Memory.Cold if layout.on_disk_payload_index else None
        for field in PAYLOAD_INDEXES:
            params = schema[field].params
            assert params is not None and params.memory == memory, field
            assert field == "acl" or not getattr(params, "is_tenant", None), field
            if PAYLOAD_INDEXES[field] is IndexKind.TEXT:
                assert params.tokenizer == qe.TokenizerType.Word and params.lowercase, field
                assert params.ascii_folding is True, field
            if PAYLOAD_INDEXES[field] is IndexKind.INTEGER:
                assert params.lookup and params.range, field
        # a model built later on the same root gets the same layout
        assert store.use_model("other").layout == layout
    finally:
        store.close()


def test_open_store_passes_the_settings_layout(tmp_path: Path) -> None:
    settings = Settings(qdrant_path=tmp_path, qdrant_hnsw_m=8, qdrant_quantization="none")
    store = open_store(settings, model_slug="m")
    assert isinstance(store, QdrantEdgeStore)
    assert store.layout == CollectionLayout.from_settings(settings)
    assert store.layout.hnsw_m == 8 and store.layout.quantization == "none"


class _Recorder(BaseHTTPRequestHandler):
    """Answers Qdrant's ``GET /collections/{name}/exists`` with false, records the body of
    ``PUT /collections/{name}`` and refuses it (500), so ``ensure_collection`` stops there;
    records the body of ``POST /collections/{name}/points/query`` and answers no points."""

    bodies: list[dict[str, Any]]

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _answer(self, status: int, result: Any) -> None:
        body = json.dumps({"result": result, "status": "ok", "time": 0.0}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.endswith("/exists"):
            self._answer(200, {"exists": False})
        else:
            self._answer(404, None)

    def do_PUT(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.bodies.append(json.loads(self.rfile.read(length)))
        self._answer(500, None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.bodies.append(json.loads(self.rfile.read(length)))
        self._answer(200, {"points": []})


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    bodies: list[dict[str, Any]] = []
    handler = type("Recorder", (_Recorder,), {"bodies": bodies})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("layout", [DEFAULT_LAYOUT, CUSTOM], ids=["default", "custom"])
def test_server_store_sends_the_layout_when_it_creates_a_collection(
    recorder: tuple[str, list[dict[str, Any]]], layout: CollectionLayout
) -> None:
    url, bodies = recorder
    client = QdrantClient(url=url, check_compatibility=False, timeout=5)
    store = QdrantServerStore(client, "ncindex", "m", layout=layout)
    with pytest.raises(StoreUnavailable):
        store.ensure_collection(8)
    (body,) = bodies
    assert body["shard_number"] == layout.shard_number
    assert body["replication_factor"] == layout.replication_factor
    assert body["write_consistency_factor"] == layout.write_consistency_factor
    assert body["on_disk_payload"] is layout.on_disk_payload
    assert body["optimizers_config"]["indexing_threshold"] == layout.indexing_threshold_kb
    sent = body["optimizers_config"].get("max_segment_size")
    assert sent == (layout.max_segment_size_kb or None)
    assert body["vectors"]["dense"]["on_disk"] is layout.on_disk_vectors
    assert body["hnsw_config"]["m"] == layout.hnsw_m
    assert body["hnsw_config"]["ef_construct"] == layout.hnsw_ef_construct
    assert body["hnsw_config"]["payload_m"] == layout.hnsw_payload_m
    assert body["hnsw_config"]["full_scan_threshold"] == layout.full_scan_threshold_kb
    sparse_index = body["sparse_vectors"]["bm25"]["index"]
    assert sparse_index["full_scan_threshold"] == layout.sparse_full_scan_threshold
    if layout.quantization == "int8":
        assert body["quantization_config"] == {"scalar": {"type": "int8", "always_ram": True}}
    else:
        assert body.get("quantization_config") is None
    assert body["sparse_vectors"]["bm25"]["modifier"] == "idf"


def _collection_info(dense_dim: int) -> dict[str, Any]:
    """A ``GET /collections/{name}`` result of a collection with ``dense_dim`` dense floats,
    as qdrant-client's own models serialise it (made in local mode)."""
    local = QdrantClient(":memory:")
    try:
        local.create_collection(
            "c",
            vectors_config={"dense": m.VectorParams(size=dense_dim, distance=m.Distance.COSINE)},
        )
        return local.get_collection("c").model_dump(mode="json", exclude_none=True)
    finally:
        local.close()


class _Creating(_Recorder):
    """Lets ``ensure_collection`` create the collection: records the path and body of every
    ``PUT`` (the collection, then each payload index) and answers them; answers the
    collection's info (``info``), no aliases, and setting the alias."""

    info: dict[str, Any]

    def do_GET(self) -> None:
        if self.path.endswith("/exists"):
            self._answer(200, {"exists": False})
        elif self.path.startswith("/aliases"):
            self._answer(200, {"aliases": []})
        else:
            self._answer(200, self.info)

    def do_PUT(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.bodies.append({"path": self.path, "body": json.loads(self.rfile.read(length))})
        if "/index" in self.path:
            self._answer(200, {"operation_id": 1, "status": "completed"})
        else:
            self._answer(200, True)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        self._answer(200, True)


@pytest.mark.parametrize("layout", [DEFAULT_LAYOUT, CUSTOM], ids=["default", "custom"])
def test_server_store_sends_every_payload_index_with_the_layout(layout: CollectionLayout) -> None:
    """Each ``PUT /collections/ncindex-m/index?wait=true`` carries the field's index kind,
    ``on_disk`` as the layout says, ``is_tenant`` on ``acl`` alone, the integer indexes'
    lookup and range, the text index's word tokenizer and lowercasing."""
    bodies: list[dict[str, Any]] = []
    handler = type("C", (_Creating,), {"bodies": bodies, "info": _collection_info(8)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = QdrantClient(
            url=f"http://127.0.0.1:{server.server_address[1]}",
            check_compatibility=False,
            timeout=5,
        )
        QdrantServerStore(client, "ncindex", "m", layout=layout).ensure_collection(8)
    finally:
        server.shutdown()
        server.server_close()
    index_puts = [b for b in bodies if "/index" in b["path"]]
    assert {b["path"] for b in index_puts} == {"/collections/ncindex-m/index?wait=true"}
    indexes = {b["body"]["field_name"]: b["body"]["field_schema"] for b in index_puts}
    assert len(index_puts) == len(indexes) == len(PAYLOAD_INDEXES)
    assert set(indexes) == set(PAYLOAD_INDEXES)
    for field, kind in PAYLOAD_INDEXES.items():
        schema = indexes[field]
        assert schema["type"] == str(kind), field
        assert schema["on_disk"] is layout.on_disk_payload_index, field
        assert schema.get("is_tenant", False) is (field == "acl"), field
        if kind is IndexKind.INTEGER:
            assert schema["lookup"] is True and schema["range"] is True
        if kind is IndexKind.TEXT:
            assert schema["tokenizer"] == "word" and schema["lowercase"] is True
            assert schema["ascii_folding"] is True


def test_local_mode_accepts_the_layout_and_keeps_only_the_vectors() -> None:
    """The parameters are valid for qdrant-client; its local mode keeps the vectors' (dense
    ``on_disk``, the BM25 full-scan threshold and IDF modifier) and ignores the rest — shards,
    replication, write consistency, HNSW, optimisers, quantisation, on-disk payload — and
    creates no payload index, the tenant index included (what README's "Collection layout"
    says; measured on qdrant-client 1.20, so a release that starts honouring one fails here)."""
    layout = dataclasses.replace(
        CUSTOM, quantization="int8", on_disk_vectors=True, on_disk_payload=True
    )
    client = QdrantClient(":memory:")
    store = QdrantServerStore(client, "ncindex", "m", layout=layout)
    store.ensure_collection(8)
    assert store.models().active == "m"
    assert store.use_model("other").layout == layout
    info = client.get_collection(store.collection)
    params = info.config.params
    assert params.vectors[DENSE].on_disk is True
    bm25 = params.sparse_vectors[SPARSE]
    assert bm25.index.full_scan_threshold == layout.sparse_full_scan_threshold
    assert bm25.modifier == m.Modifier.IDF
    ignored = (
        params.shard_number,
        params.replication_factor,
        params.write_consistency_factor,
        params.on_disk_payload,
        info.config.quantization_config,
        info.config.hnsw_config.payload_m,
        info.config.optimizer_config.max_segment_size,
    )
    assert ignored == (None,) * len(ignored)
    assert info.config.hnsw_config.ef_construct != layout.hnsw_ef_construct
    assert info.payload_schema == {}


@pytest.mark.parametrize("layout", [DEFAULT_LAYOUT, CUSTOM], ids=["default", "custom"])
def test_server_store_sends_the_search_parameters(
    recorder: tuple[str, list[dict[str, Any]]], layout: CollectionLayout
) -> None:
    """The dense prefetch carries the layout's beam, rescoring and ACORN, or ``exact``; the
    sparse prefetch (an inverted index, always exact) carries none."""
    url, bodies = recorder
    client = QdrantClient(url=url, check_compatibility=False, timeout=5)
    store = QdrantServerStore(client, "ncindex", "m", layout=layout)
    sparse = SparseVector(indices=[1], values=[1.0])
    for exact in (False, True):
        store.query(dense=[0.1] * 8, sparse=sparse, flt=None, limit=5, prefetch_limit=20,
                    fusion=Fusion.DBSF, exact=exact)  # fmt: skip
    approximate, exact_body = bodies
    dense, sparse_prefetch = approximate["prefetch"]
    assert dense["params"] == {
        "hnsw_ef": layout.beam(20),
        "quantization": {"rescore": True, "oversampling": layout.oversampling_for(20)},
        "acorn": {"enable": layout.acorn},
    }
    assert sparse_prefetch.get("params") is None
    assert exact_body["prefetch"][0]["params"] == {"exact": True, "quantization": {"ignore": True}}


def test_server_store_sizes_a_shallower_dense_prefetch_by_its_own_depth(
    recorder: tuple[str, list[dict[str, Any]]],
) -> None:
    """With ``dense_prefetch_limit`` (the search's 180 beside its BM25 360) the dense
    prefetch asks 180 with the beam and oversampling of 180, the sparse one 360."""
    url, bodies = recorder
    client = QdrantClient(url=url, check_compatibility=False, timeout=5)
    store = QdrantServerStore(client, "ncindex", "m", layout=DEFAULT_LAYOUT)
    store.query(dense=[0.1] * 8, sparse=SparseVector(indices=[1], values=[1.0]), flt=None,
                limit=5, prefetch_limit=360, dense_prefetch_limit=180,
                fusion=Fusion.DBSF)  # fmt: skip
    dense, sparse = bodies[0]["prefetch"]
    assert DEFAULT_LAYOUT.beam(180) != DEFAULT_LAYOUT.beam(360)  # else the test shows nothing
    assert (dense["limit"], sparse["limit"]) == (180, 360)
    assert dense["params"]["hnsw_ef"] == DEFAULT_LAYOUT.beam(180)
    assert dense["params"]["quantization"]["oversampling"] == DEFAULT_LAYOUT.oversampling_for(180)


def test_edge_store_sizes_a_shallower_dense_prefetch_by_its_own_depth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Edge store derives the dense prefetch's search parameters from its own depth."""
    store = QdrantEdgeStore(tmp_path / "edge", "m", layout=DEFAULT_LAYOUT)
    store.ensure_collection(8)
    asked: list[int] = []
    original = store._dense_params

    def recording(exact: bool, limit: int) -> Any:
        asked.append(limit)
        return original(exact, limit)

    monkeypatch.setattr(store, "_dense_params", recording)
    store.query(dense=[0.1] * 8, sparse=SparseVector(indices=[1], values=[1.0]), flt=None,
                limit=5, prefetch_limit=360, dense_prefetch_limit=180,
                fusion=Fusion.DBSF)  # fmt: skip
    assert asked == [180]
    store.close()


ACORN_INT8 = dataclasses.replace(CUSTOM, quantization="int8", acorn=True)


@pytest.mark.parametrize(
    "layout", [DEFAULT_LAYOUT, CUSTOM, ACORN_INT8], ids=["default", "custom", "acorn-int8"]
)
@pytest.mark.parametrize("exact", [False, True], ids=["approximate", "exact"])
@pytest.mark.parametrize("limit", [20, 360], ids=["shallow", "deep"])
def test_edge_store_carries_the_servers_search_parameters(
    tmp_path: Path, layout: CollectionLayout, exact: bool, limit: int
) -> None:
    """The Edge store's dense search parameters are the layout's policy
    (``CollectionLayout.dense_search``, what the server store sends) translated field by field,
    for a search asking few hits and for a prefetch deeper than the beam."""
    params = layout.dense_search(exact, limit)
    edge = QdrantEdgeStore(tmp_path / "edge", "m", layout=layout)._dense_params(exact, limit)
    assert edge.exact is exact and edge.hnsw_ef == params.hnsw_ef and not edge.indexed_only
    q = params.quantization
    assert q is not None and edge.quantization is not None
    assert (
        edge.quantization.ignore,
        edge.quantization.rescore,
        edge.quantization.oversampling,
    ) == (bool(q.ignore), q.rescore, q.oversampling)
    if exact:
        assert edge.acorn is None and edge.quantization.ignore
    else:
        assert edge.acorn is not None and edge.acorn.enable is layout.acorn
        assert edge.hnsw_ef == layout.beam(limit)
        assert edge.quantization.oversampling == layout.oversampling_for(limit)


def test_edge_translates_every_search_parameter() -> None:
    """Fields ncindex does not set today are carried too, not dropped: ``indexed_only``,
    ACORN's ``enable`` and ``max_selectivity``, ``idf`` (global or over a corpus filter)."""
    acorn = m.AcornSearchParams(enable=True, max_selectivity=0.3)
    edge = to_edge_search_params(m.SearchParams(indexed_only=True, acorn=acorn))
    assert edge.indexed_only and edge.idf is None
    assert edge.acorn is not None and edge.acorn.enable and edge.acorn.max_selectivity == 0.3
    glob = to_edge_search_params(m.SearchParams(idf=m.IdfScope.GLOBAL)).idf
    assert glob is not None and glob.corpus is None
    corpus = m.Filter(must=[m.FieldCondition(key="acl", match=m.MatchValue(value="user:a"))])
    scoped = to_edge_search_params(m.SearchParams(idf=m.IdfCorpusParams(corpus=corpus))).idf
    assert scoped is not None and scoped.corpus is not None


def test_a_search_draws_oversampled_candidates_up_to_the_beam() -> None:
    """int8 candidates drawn: hits × oversampling, at most ``hnsw_ef`` in all, never fewer than
    the hits; the hits alone without quantisation. Qdrant draws ``floor(oversampling × hits)``,
    so the oversampling sent yields exactly that many."""
    layout = dataclasses.replace(DEFAULT_LAYOUT, hnsw_ef=128, oversampling=2.0)
    assert [layout.drawn(n) for n in (10, 64, 100, 128, 360)] == [20, 128, 128, 128, 360]
    assert dataclasses.replace(layout, quantization="none").drawn(10) == 10
    assert dataclasses.replace(layout, oversampling=1.0).drawn(10) == 10
    for hits in range(1, 400):
        assert math.floor(layout.oversampling_for(hits) * hits) == layout.drawn(hits)
    assert layout.oversampling_for(360) == 1.0 and layout.oversampling_for(10) == 2.0


def test_the_beam_widens_with_the_candidates_a_search_draws() -> None:
    """A beam of at least ``ef_per_candidate`` × the candidates drawn (:meth:`drawn`), never
    under ``hnsw_ef``."""
    wide = dataclasses.replace(DEFAULT_LAYOUT, hnsw_ef=128, ef_per_candidate=2.0, oversampling=2.0)
    assert wide.beam(10) == 128
    assert wide.beam(100) == 256
    assert wide.beam(360) == 720
    assert dataclasses.replace(wide, ef_per_candidate=1.0).beam(360) == 360
    assert dataclasses.replace(wide, hnsw_ef=720, ef_per_candidate=1.0).beam(360) == 720
    assert CUSTOM.beam(20) == 64 and CUSTOM.beam(100) == 200


def optimised_random_shard(
    tmp_path: Path, layout: CollectionLayout
) -> tuple[QdrantEdgeStore, Any, Any]:
    """An Edge shard of 8,000 random unit vectors × 384 float32 (12 MB, above the 10 MB set here
    under which Qdrant scans a segment instead of walking its graph, ``full_scan_threshold``),
    HNSW-indexed and int8-quantised under ``layout``; returns (store, vectors, rng)."""
    import numpy as np

    from ncindex.store import PointRecord

    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((8000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    layout = dataclasses.replace(layout, indexing_threshold_kb=1, full_scan_threshold_kb=10_000)
    store = QdrantEdgeStore(tmp_path, "m", layout=layout)
    store.ensure_collection(384)
    store.upsert(
        [
            PointRecord(str(uuid.UUID(int=i + 1)), {"doc_key": f"d{i}"}, v)
            for i, v in enumerate(vectors.tolist())
        ]
    )
    store.optimize()
    assert store.info()["indexed_vectors"] > 0
    return store, vectors, rng


def test_edge_exact_query_matches_brute_force(tmp_path: Path) -> None:
    """``exact=True`` on an optimised (HNSW-indexed, int8-quantised) Edge shard answers the
    true nearest neighbours with their float32 scores, where the graph searched with a beam of
    4 does not: the reference bench-scale measures recall against."""
    import numpy as np

    layout = dataclasses.replace(DEFAULT_LAYOUT, hnsw_ef=4, acorn=False)
    store, vectors, rng = optimised_random_shard(tmp_path, layout)
    hits = 0
    for _ in range(5):
        query = rng.standard_normal(384).astype(np.float32)
        query /= np.linalg.norm(query)
        best = [f"d{i}" for i in np.argsort(-(vectors @ query))[:10]]
        exact = store.branch(dense=query.tolist(), flt=None, limit=10, exact=True)
        approximate = store.branch(dense=query.tolist(), flt=None, limit=10)
        assert [h.payload["doc_key"] for h in exact] == best
        # scored on the float32 originals, not the int8 copies (off by ~1e-3)
        true_scores = np.sort(vectors @ query)[::-1][:10]
        assert np.allclose([h.score for h in exact], true_scores, atol=1e-5)
        hits += len(set(best) & {h.payload["doc_key"] for h in approximate})
    assert hits < 50, "a beam of 4 found every true neighbour: the test proves nothing"
    store.close()


def test_a_prefetch_deeper_than_the_beam_draws_what_it_asks_and_rescores_it(
    tmp_path: Path,
) -> None:
    """With the default layout a dense search asking 360 hits (the search's BM25 depth; its
    dense prefetch was as deep until 2026-12-04)
    draws 360 int8 candidates, no more, with a beam of 360 — and its head is still nine in ten
    of the true nearest neighbours, every hit scored on its float32 original (int8 scores are off by
    ~1e-3), so rescoring is not lost with the oversampling."""
    import numpy as np

    assert DEFAULT_LAYOUT.drawn(360) == 360 and DEFAULT_LAYOUT.beam(360) == 360
    store, vectors, rng = optimised_random_shard(tmp_path, DEFAULT_LAYOUT)
    found = 0
    for _ in range(20):
        query = rng.standard_normal(384).astype(np.float32)
        query /= np.linalg.norm(query)
        scores = vectors @ query
        best = {f"d{i}" for i in np.argsort(-scores)[:10]}
        deep = store.branch(dense=query.tolist(), flt=None, limit=360)
        assert len(deep) == 360
        found += len(best & {h.payload["doc_key"] for h in deep[:10]})
        originals = [float(scores[int(h.payload["doc_key"][1:])]) for h in deep]
        assert np.allclose([h.score for h in deep], originals, atol=1e-5)
    # Random 384-dimensional vectors are the graph's hardest case and its build is threaded, so
    # not deterministic: six builds here found 188-195 of the 200 (one CI run 47 of the first 50)
    assert found >= 180, f"{found} of the 200 true neighbours at the head"
    store.close()


def _server_info(layout: CollectionLayout, dense_dim: int = 8) -> dict[str, Any]:
    """The ``GET /collections/{name}`` result a Qdrant server gives for a collection ncindex
    created with ``layout`` (Qdrant's REST format: ``config.params`` with the vectors, shards,
    replication, write consistency and ``on_disk_payload``; the collection's HNSW,
    optimisers and quantisation; each payload index's schema as created)."""
    schema: dict[str, Any] = {}
    for field, kind in PAYLOAD_INDEXES.items():
        params: dict[str, Any] = {"type": str(kind), "on_disk": layout.on_disk_payload_index}
        if field == "acl":
            params["is_tenant"] = True
        if kind is IndexKind.TEXT:
            params.update(tokenizer="word", lowercase=True, ascii_folding=True)
        schema[field] = {"data_type": str(kind), "params": params, "points": 0}
    quantization = (
        {"scalar": {"type": "int8", "always_ram": True}} if layout.quantization == "int8" else None
    )
    return {
        "status": "green",
        "optimizer_status": "ok",
        "indexed_vectors_count": 0,
        "points_count": 0,
        "segments_count": 2,
        "config": {
            "params": {
                "vectors": {
                    "dense": {
                        "size": dense_dim,
                        "distance": "Cosine",
                        "on_disk": layout.on_disk_vectors,
                    }
                },
                "shard_number": layout.shard_number,
                "replication_factor": layout.replication_factor,
                "write_consistency_factor": layout.write_consistency_factor,
                "on_disk_payload": layout.on_disk_payload,
                "sparse_vectors": {
                    "bm25": {
                        "index": {"full_scan_threshold": layout.sparse_full_scan_threshold},
                        "modifier": "idf",
                    }
                },
            },
            "hnsw_config": {
                "m": layout.hnsw_m,
                "ef_construct": layout.hnsw_ef_construct,
                "full_scan_threshold": layout.full_scan_threshold_kb,
                "max_indexing_threads": 0,
                "on_disk": False,
                "payload_m": layout.hnsw_payload_m,
            },
            "optimizer_config": {
                "deleted_threshold": 0.2,
                "vacuum_min_vector_number": 1000,
                "default_segment_number": 0,
                "max_segment_size": layout.max_segment_size_kb or None,
                "memmap_threshold": None,
                "indexing_threshold": layout.indexing_threshold_kb,
                "flush_interval_sec": 5,
                "max_optimization_threads": None,
            },
            "wal_config": {"wal_capacity_mb": 32, "wal_segments_ahead": 0},
            "quantization_config": quantization,
        },
        "payload_schema": schema,
    }


class _Existing(_Recorder):
    """A Qdrant server holding ``ncindex-m`` (``info``), aliased ``ncindex``: answers its
    existence, info and aliases; records the path and body of every ``PATCH`` and ``PUT``
    and answers them."""

    info: dict[str, Any]

    def do_GET(self) -> None:
        if self.path.endswith("/exists"):
            self._answer(200, {"exists": "/ncindex-m/" in self.path})
        elif self.path.startswith("/aliases"):
            aliases = [{"alias_name": "ncindex", "collection_name": "ncindex-m"}]
            self._answer(200, {"aliases": aliases})
        elif self.path.startswith("/collections/ncindex-m"):
            self._answer(200, self.info)
        else:
            self._answer(404, None)

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length)) if length else None
        self.bodies.append({"method": self.command, "path": self.path, "body": body})
        if "/index" in self.path:
            self._answer(200, {"operation_id": 1, "status": "completed"})
        else:
            self._answer(200, True)

    def do_PATCH(self) -> None:
        self._record()

    def do_PUT(self) -> None:
        self._record()


@pytest.fixture
def existing() -> Iterator[tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    """A :class:`_Existing` server whose collection has the default layout: (its URL, the
    requests it records, the ``info`` it answers, which a test may change)."""
    bodies: list[dict[str, Any]] = []
    info = _server_info(DEFAULT_LAYOUT)
    handler = type("E", (_Existing,), {"bodies": bodies, "info": info})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", bodies, info
    server.shutdown()
    server.server_close()


def _server_store(url: str, layout: CollectionLayout) -> QdrantServerStore:
    client = QdrantClient(url=url, check_compatibility=False, timeout=5)
    return QdrantServerStore(client, "ncindex", "m", layout=layout)


@pytest.mark.parametrize("layout", [DEFAULT_LAYOUT, CUSTOM], ids=["default", "custom"])
def test_a_collection_with_the_settings_layout_has_no_drift(
    existing: tuple[str, list[dict[str, Any]], dict[str, Any]], layout: CollectionLayout
) -> None:
    """A collection answering what its creation asked has no difference to report or apply."""
    url, bodies, info = existing
    info.clear()
    info.update(_server_info(layout))
    store = _server_store(url, layout)
    assert store.layout_drift() == []
    assert store.apply_layout() == []
    assert bodies == []  # nothing sent


#: What CUSTOM asks of a collection created with the default layout, setting by setting:
#: (live, wanted, applied in place).
CUSTOM_OVER_DEFAULT = {
    "NCINDEX_QDRANT_SHARD_NUMBER": ("1", "6", False),
    "NCINDEX_QDRANT_REPLICATION_FACTOR": ("1", "3", True),
    "NCINDEX_QDRANT_WRITE_CONSISTENCY_FACTOR": ("1", "2", True),
    "NCINDEX_QDRANT_ON_DISK_PAYLOAD": ("true", "false", True),
    "NCINDEX_QDRANT_ON_DISK_VECTORS": ("true", "false", True),
    "NCINDEX_QDRANT_HNSW_M": ("16", "0", True),
    "NCINDEX_QDRANT_HNSW_EF_CONSTRUCT": ("100", "64", True),
    "NCINDEX_QDRANT_HNSW_PAYLOAD_M": ("16", "24", True),
    "NCINDEX_QDRANT_FULL_SCAN_THRESHOLD_KB": ("60000", "40000", True),
    "NCINDEX_QDRANT_QUANTIZATION": ("int8", "none", True),
    "NCINDEX_QDRANT_INDEXING_THRESHOLD_KB": ("20000", "500", True),
    "NCINDEX_QDRANT_SPARSE_FULL_SCAN_THRESHOLD": ("5000", "25000", True),
    "NCINDEX_QDRANT_ON_DISK_PAYLOAD_INDEX": (
        f"true ({', '.join(sorted(PAYLOAD_INDEXES))})",
        "false",
        True,
    ),
}


def test_every_layout_setting_changed_since_creation_is_found(
    existing: tuple[str, list[dict[str, Any]], dict[str, Any]],
) -> None:
    """Settings changed after the collection was created (a ``helm upgrade``) are each named
    with the collection's value and theirs; the shard number alone cannot be set in place.
    Qdrant answers no ``max_segment_size`` for its default (0 in the settings)."""
    url, _, _ = existing
    drift = {d.setting: d for d in _server_store(url, CUSTOM).layout_drift()}
    expected = CUSTOM_OVER_DEFAULT | {
        "NCINDEX_QDRANT_MAX_SEGMENT_SIZE_KB": ("0 (Qdrant's default)", "100000", True)
    }
    assert {k: (d.live, d.wanted, d.in_place) for k, d in drift.items()} == expected
    assert "replicate_shard" in drift["NCINDEX_QDRANT_REPLICATION_FACTOR"].how
    assert "new collection" in drift["NCINDEX_QDRANT_SHARD_NUMBER"].how


def test_a_lost_tenant_index_and_per_vector_overrides_are_found(
    existing: tuple[str, list[dict[str, Any]], dict[str, Any]],
) -> None:
    """The dense vectors' own HNSW or quantisation override the collection's, so they are
    what is compared; an ``acl`` index that is not the tenant index is named."""
    url, _, info = existing
    info["payload_schema"]["acl"]["params"].pop("is_tenant")
    dense = info["config"]["params"]["vectors"]["dense"]
    dense["hnsw_config"] = {"payload_m": 0}
    dense["quantization_config"] = {"binary": {"always_ram": True}}
    drift = {d.setting: d for d in _server_store(url, DEFAULT_LAYOUT).layout_drift()}
    assert {k: (d.live, d.wanted) for k, d in drift.items()} == {
        "the acl index's is_tenant (set by ncindex, no setting)": ("false", "true"),
        "NCINDEX_QDRANT_HNSW_PAYLOAD_M": ("0", "16"),
        "NCINDEX_QDRANT_QUANTIZATION": ("binary", "int8"),
    }


def test_applying_a_layout_patches_what_qdrant_changes_in_place(
    existing: tuple[str, list[dict[str, Any]], dict[str, Any]],
) -> None:
    """One ``PATCH /collections/ncindex-m`` in Qdrant's ``UpdateCollection`` format carries
    every in-place difference (quantisation turned off is Qdrant's ``"Disabled"``) and no
    shard number, which Qdrant's update does not take; each payload index whose ``on_disk``
    differs is sent again with the layout's schema."""
    url, bodies, _ = existing
    drift = _server_store(url, CUSTOM).apply_layout()
    assert {d.setting for d in drift} == set(CUSTOM_OVER_DEFAULT) | {
        "NCINDEX_QDRANT_MAX_SEGMENT_SIZE_KB"
    }
    patches = [b for b in bodies if b["method"] == "PATCH"]
    assert [p["path"].split("?")[0] for p in patches] == ["/collections/ncindex-m"]
    body = patches[0]["body"]
    assert body["params"] == {
        "replication_factor": 3,
        "write_consistency_factor": 2,
        "on_disk_payload": False,
    }
    assert body["hnsw_config"] == {
        "m": 0,
        "ef_construct": 64,
        "payload_m": 24,
        "full_scan_threshold": 40_000,
    }
    assert body["quantization_config"] == "Disabled"
    assert body["vectors"] == {"dense": {"on_disk": False}}
    assert body["optimizers_config"] == {"indexing_threshold": 500, "max_segment_size": 100_000}
    assert body["sparse_vectors"]["bm25"]["index"]["full_scan_threshold"] == 25_000
    assert body["sparse_vectors"]["bm25"]["modifier"] == "idf"
    assert "shard_number" not in json.dumps(body)
    puts = [b for b in bodies if b["method"] == "PUT"]
    assert {p["path"].split("?")[0] for p in puts} == {"/collections/ncindex-m/index"}
    sent = {p["body"]["field_name"]: p["body"]["field_schema"] for p in puts}
    assert set(sent) == set(PAYLOAD_INDEXES)
    assert all(schema["on_disk"] is False for schema in sent.values())
    assert sent["acl"]["is_tenant"] is True


def test_applying_turns_quantisation_on_and_overrides_of_the_vectors_too(
    existing: tuple[str, list[dict[str, Any]], dict[str, Any]],
) -> None:
    """Quantisation turned on (to save memory) is scalar int8 in RAM, as at creation; where
    the dense vectors carry their own HNSW or quantisation (which override the collection's)
    those are changed as well; the tenant index lost is created again as one, alone."""
    url, bodies, info = existing
    info["config"]["quantization_config"] = None
    info["payload_schema"]["acl"]["params"].pop("is_tenant")
    dense = info["config"]["params"]["vectors"]["dense"]
    dense["hnsw_config"] = {"payload_m": 0}
    _server_store(url, DEFAULT_LAYOUT).apply_layout()
    (patch,) = [b["body"] for b in bodies if b["method"] == "PATCH"]
    int8 = {"scalar": {"type": "int8", "always_ram": True}}
    assert patch["quantization_config"] == int8
    assert patch["hnsw_config"] == {"payload_m": 16}
    assert patch["vectors"] == {"dense": {"hnsw_config": {"payload_m": 16}}}
    assert set(patch) == {"quantization_config", "hnsw_config", "vectors"}
    (put,) = [b["body"] for b in bodies if b["method"] == "PUT"]
    assert put["field_name"] == "acl" and put["field_schema"]["is_tenant"] is True


def test_a_max_segment_size_back_to_qdrants_default_is_not_applied_in_place(
    existing: tuple[str, list[dict[str, Any]], dict[str, Any]],
) -> None:
    """Qdrant's update leaves what it is not given as it is, so a setting back at 0 cannot
    be applied: it is named, and nothing is sent."""
    url, bodies, info = existing
    info["config"]["optimizer_config"]["max_segment_size"] = 100_000
    (drift,) = _server_store(url, DEFAULT_LAYOUT).apply_layout()
    assert (drift.setting, drift.live, drift.in_place) == (
        "NCINDEX_QDRANT_MAX_SEGMENT_SIZE_KB",
        "100000",
        False,
    )
    assert bodies == []


def test_doctor_names_each_setting_the_live_collection_differs_from(
    existing: tuple[str, list[dict[str, Any]], dict[str, Any]],
) -> None:
    """A replication factor raised and quantisation turned off after the collection was
    created (``helm upgrade``) were silently not used: ``ncindex doctor`` warns once per
    setting, with both values and what applies it; the same settings as at creation are ok."""
    from ncindex.doctor import Context, check_layout
    from ncindex.runtime import Services

    url, bodies, _ = existing
    same = Settings(qdrant_url=url)
    assert [line.verdict for line in check_layout(Context(same, Services(same)))] == ["ok"]
    changed = Settings(qdrant_url=url, qdrant_replication_factor=2, qdrant_quantization="none")
    lines = check_layout(Context(changed, Services(changed)))
    assert [(line.check, line.verdict) for line in lines] == [("layout", "warn")] * 2
    replication, quantization = (line.detail for line in lines)
    assert replication.startswith(
        "live collection 'ncindex-m': NCINDEX_QDRANT_REPLICATION_FACTOR is 1 there, the "
        "settings ask 2: `ncindex reindex --layout` records it, but Qdrant adds no replica"
    )
    assert quantization.startswith(
        "live collection 'ncindex-m': NCINDEX_QDRANT_QUANTIZATION is int8 there, the settings "
        "ask none: `ncindex reindex --layout` sets it in place"
    )
    assert bodies == []  # the doctor changes nothing


def test_reindex_layout_applies_the_settings_and_says_what_it_could_not(
    existing: tuple[str, list[dict[str, Any]], dict[str, Any]], tmp_path: Path
) -> None:
    """``ncindex reindex --layout`` patches the live collection and prints each setting,
    with the shard number named as not applied."""
    from click.testing import CliRunner

    from allinone.cli import main

    url, bodies, _ = existing
    env = {
        "NCINDEX_QDRANT_URL": url,
        "NCINDEX_QDRANT_SHARD_NUMBER": "4",
        "NCINDEX_QDRANT_QUANTIZATION": "none",
        "NCINDEX_DATA_DIR": str(tmp_path),
        "NCINDEX_LOG_LEVEL": "WARNING",
    }
    result = CliRunner().invoke(main, ["reindex", "--layout"], env=env)
    assert result.exit_code == 0, result.output
    assert "ncindex-m: set: NCINDEX_QDRANT_QUANTIZATION int8 -> none" in result.output
    assert "ncindex-m: NOT applied: NCINDEX_QDRANT_SHARD_NUMBER 1 -> 4" in result.output
    (patch,) = [b for b in bodies if b["method"] == "PATCH"]
    assert patch["body"] == {"quantization_config": "Disabled"}
    both = CliRunner().invoke(main, ["reindex", "--layout", "--back"], env=env)
    assert both.exit_code == 2 and "choose one of" in both.output


def test_status_counts_the_settings_the_live_collection_differs_from(
    existing: tuple[str, list[dict[str, Any]], dict[str, Any]],
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ncindex status`` says how many settings the live collection differs from and where
    to look (one ``GET``; the live model's store stands in for the one ``Services`` opens,
    which would load the model's embedder); ``--json`` has each difference."""
    from click.testing import CliRunner

    from allinone.cli import main
    from ncindex.runtime import Services

    url, bodies, _ = existing
    changed = dataclasses.replace(DEFAULT_LAYOUT, replication_factor=2)
    monkeypatch.setattr(Services, "store", property(lambda _: _server_store(url, changed)))
    env = {
        "NCINDEX_REDIS_URL": redis_url,
        "NCINDEX_NAMESPACE": f"layout-{uuid.uuid4().hex[:8]}",
        "NCINDEX_QDRANT_URL": url,
        "NCINDEX_ACCOUNTS": "{}",
    }
    result = CliRunner().invoke(main, ["status"], env=env)
    assert result.exit_code == 0, result.output
    assert (
        "layout: the live collection differs from 1 NCINDEX_QDRANT_* setting (`ncindex "
        "doctor` names each; `ncindex reindex --layout` applies" in result.output
    )
    result = CliRunner().invoke(main, ["status", "--json"], env=env)
    (drift,) = json.loads(result.output)["store"]["layout_drift"]
    assert drift["setting"] == "NCINDEX_QDRANT_REPLICATION_FACTOR"
    assert (drift["live"], drift["wanted"], drift["in_place"]) == ("1", "2", True)
    assert not [b for b in bodies if b.get("method") in ("PATCH", "PUT")]  # status only reads


@pytest.mark.parametrize("folding", [None, False, True])
def test_server_store_makes_a_title_index_without_folding_again(
    existing: tuple[str, list[dict[str, Any]], dict[str, Any]], folding: bool | None
) -> None:
    """A collection whose ``title`` index was made before it folded to ASCII (``ascii_folding``
    unset or false) gets it made again by ``ensure_collection``, in place (``PUT
    /collections/{name}/index``, which Qdrant answers by replacing the index), so ``Munchen``
    finds the title ``München`` without a reindex; one that folds is left alone."""
    url, bodies, info = existing
    params = info["payload_schema"]["title"]["params"]
    if folding is None:
        del params["ascii_folding"]
    else:
        params["ascii_folding"] = folding
    _server_store(url, DEFAULT_LAYOUT).ensure_collection(8)
    puts = [b for b in bodies if b["method"] == "PUT" and "/index" in b["path"]]
    if folding:
        assert puts == []
    else:
        assert [p["body"]["field_name"] for p in puts] == ["title"]
        assert puts[0]["body"]["field_schema"]["ascii_folding"] is True


def test_edge_store_makes_a_title_index_without_folding_again(tmp_path: Path) -> None:
    """An Edge shard whose ``title`` index was made before it folded to ASCII gets it made
    again when the store opens (``ensure_collection``), from the titles it holds: ``Munchen``
    finds the point titled ``München`` that it did not find before, and no point is
    rewritten."""
    store = QdrantEdgeStore(tmp_path, "m")
    store.ensure_collection(4)
    shard = store._open_shard()
    shard.update(qe.UpdateOperation.delete_field_index("title"))
    shard.update(
        qe.UpdateOperation.create_field_index(
            "title", qe.TextIndexParams(tokenizer=qe.TokenizerType.Word, lowercase=True)
        )
    )
    store.upsert(
        [
            PointRecord(
                id=str(uuid.uuid4()),
                payload={"title": "München Plan.pdf", "acl": ["user:a"]},
                dense=[1.0, 0.0, 0.0, 0.0],
                sparse=SparseVector(indices=[1], values=[1.0]),
            )
        ]
    )
    munchen = m.Filter(must=[m.FieldCondition(key="title", match=m.MatchText(text="Munchen"))])
    assert store.count(munchen) == 0
    store.close()
    again = QdrantEdgeStore(tmp_path, "m")
    again.ensure_collection(4)
    try:
        assert again.count(munchen) == 1
        params = again._open_shard().info().payload_schema["title"].params
        assert params is not None and params.ascii_folding is True
    finally:
        again.close()


def test_status_shows_the_title_index_an_edge_store_makes_again_while_it_does(
    tmp_path: Path, redis_url: str
) -> None:
    """The rebuild of a title index made before it folded to ASCII ran when the store opened
    and ``ncindex status`` showed nothing of it: while it runs, a line says which index of
    which shard, over how many points and since when; once it ended, nothing."""
    from allinone.status_view import index_rebuild_lines
    from ncindex.names import Names
    from ncindex.runtime import Services
    from ncindex.sync.status import collect_status

    store = QdrantEdgeStore(tmp_path, "m")
    store.ensure_collection(4)
    shard = store._open_shard()
    shard.update(qe.UpdateOperation.delete_field_index("title"))
    shard.update(
        qe.UpdateOperation.create_field_index(
            "title", qe.TextIndexParams(tokenizer=qe.TokenizerType.Word, lowercase=True)
        )
    )
    store.upsert(
        [
            PointRecord(
                id=str(uuid.uuid4()),
                payload={"title": "München Plan.pdf", "acl": ["user:a"]},
                dense=[1.0, 0.0, 0.0, 0.0],
                sparse=SparseVector(indices=[1], values=[1.0]),
            )
        ]
    )
    store.close()
    namespace = f"titlerebuild-{uuid.uuid4().hex[:8]}"
    settings = Settings(redis_url=redis_url, namespace=namespace, qdrant_path=tmp_path)
    services = Services(settings)
    client = services.redis
    seen: list[tuple[bool, list[str]]] = []

    def told(rebuild: Any, done: bool) -> None:
        services.note_rebuild(rebuild, done)
        notes = collect_status(client, Names(namespace))["index_rebuilds"]
        seen.append((done, index_rebuild_lines(notes, time.time())))

    again = QdrantEdgeStore(tmp_path, "m")
    try:
        again.ensure_collection(4, told)
        again.ensure_collection(4, told)  # made: nothing more to tell
    finally:
        again.close()
        services.close()
    assert [done for done, _ in seen] == [False, True]
    (line,) = seen[0][1]
    assert line.startswith(
        f"index: the title index of {tmp_path / 'm'} (1 point) is being made again since "
    )
    assert line.endswith("by the process that opened the store, which waits for it")
    assert seen[1][1] == []


def test_status_shows_the_title_index_a_qdrant_server_was_asked_to_make_again(
    existing: tuple[str, list[dict[str, Any]], dict[str, Any]], redis_url: str, tmp_path: Path
) -> None:
    """On a Qdrant server the rebuild is queued (``wait=false``) and Qdrant does not say when
    it ends: ``ncindex status`` (and ``--json``) says when it was asked for, of which index and
    how many points, for an hour; a collection without points, or whose index folds, has none."""
    from click.testing import CliRunner

    from allinone.cli import main
    from ncindex.runtime import Services

    url, _, info = existing
    del info["payload_schema"]["title"]["params"]["ascii_folding"]
    namespace = f"titlerebuild-{uuid.uuid4().hex[:8]}"
    settings = Settings(redis_url=redis_url, namespace=namespace, qdrant_path=tmp_path)
    services = Services(settings)
    env = {
        "NCINDEX_REDIS_URL": redis_url,
        "NCINDEX_NAMESPACE": namespace,
        "NCINDEX_QDRANT_PATH": str(tmp_path),
    }
    try:
        _server_store(url, DEFAULT_LAYOUT).ensure_collection(8, services.note_rebuild)
        assert "index: " not in CliRunner().invoke(main, ["status"], env=env).output  # no point
        info["points_count"] = 1200
        _server_store(url, DEFAULT_LAYOUT).ensure_collection(8, services.note_rebuild)
    finally:
        services.close()
    text = CliRunner().invoke(main, ["status"], env=env).output
    (line,) = [x for x in text.splitlines() if x.startswith("index: ")]
    assert line.startswith("index: Qdrant was asked at ")
    assert "to make the title index of ncindex-m (1200 points) again; it builds it in the " in line
    assert line.endswith("(this line goes 1 h 00 min after the request)")
    result = CliRunner().invoke(main, ["status", "--json"], env=env)
    (note,) = json.loads(result.output)["index_rebuilds"]
    assert (note["collection"], note["field"], note["points"], note["waits"]) == (
        "ncindex-m",
        "title",
        1200,
        False,
    )


class _Building(_Existing):
    """:class:`_Existing` that answers an index ``PUT`` with ``wait=true`` only after
    ``build_seconds``, as Qdrant does while it builds the index over a collection's points
    (``wait=false`` is answered once the update is queued, ``"status": "acknowledged"``)."""

    build_seconds: float

    def do_PUT(self) -> None:
        if "/index" in self.path and "wait=true" in self.path:
            time.sleep(self.build_seconds)
        self._record()


def test_a_title_index_made_again_in_a_populated_collection_is_not_waited_for() -> None:
    """On ``helm upgrade`` every new pod's first ``ensure_collection`` sent the title index
    again with ``wait=true``, and Qdrant answers that once the index is built over every
    point: past qdrant-client's REST timeout (httpx's 5 s; ``open_store`` sets none), so the
    pod's searches and tasks failed with ``StoreUnavailable`` for as long as the rebuild took.
    In an existing collection the index is queued (``wait=false``); Qdrant applies it in order
    with the shard's other updates."""
    bodies: list[dict[str, Any]] = []
    info = _server_info(DEFAULT_LAYOUT)
    info["payload_schema"]["title"]["params"]["ascii_folding"] = False  # made before en-6
    handler = type("B", (_Building,), {"bodies": bodies, "info": info, "build_seconds": 6.0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        # as ncindex.store.open_store makes it: no timeout of its own
        client = QdrantClient(
            url=f"http://127.0.0.1:{server.server_address[1]}", check_compatibility=False
        )
        QdrantServerStore(client, "ncindex", "m", layout=DEFAULT_LAYOUT).ensure_collection(8)
    finally:
        server.shutdown()
        server.server_close()
    puts = [b for b in bodies if b["method"] == "PUT"]
    assert [(p["path"], p["body"]["field_name"]) for p in puts] == [
        ("/collections/ncindex-m/index?wait=false", "title")
    ]


class _Rebuilding(_Building):
    """:class:`_Building` whose ``PATCH`` (waited for by Qdrant until the optimisers are
    recreated) also takes ``build_seconds`` unless it carries a longer ``?timeout=``, and
    which, once changed, answers the collection ``yellow`` (optimising, ``indexed`` vectors
    growing) for ``yellow_answers`` reads, then ``green``."""

    yellow_answers: list[int]  # one counter, shared by every request's handler

    def do_PATCH(self) -> None:
        if "timeout=" not in self.path:
            time.sleep(self.build_seconds)
        self._record()

    def do_GET(self) -> None:
        if self.path == "/collections/ncindex-m" and self.bodies and self.yellow_answers[0]:
            self.yellow_answers[0] -= 1
            building = {**self.info, "status": "yellow", "points_count": 10}
            self._answer(200, {**building, "indexed_vectors_count": 10 - self.yellow_answers[0]})
            return
        super().do_GET()


def test_reindex_layout_does_not_wait_on_the_rebuild_but_follows_it(tmp_path: Path) -> None:
    """``ncindex reindex --layout`` sent the changed payload index with ``wait=true`` (and the
    ``PATCH`` with no timeout) through a client with httpx's 5 s default: on a large
    collection Qdrant answered later, and the command failed with ``StoreUnavailable`` while
    Qdrant went on. The index is queued (``wait=false``), the ``PATCH`` carries a timeout of
    its own, and the command then reads the collection until Qdrant reports it green."""
    from click.testing import CliRunner

    from allinone.cli import main
    from ncindex.store.qdrant_server import LAYOUT_UPDATE_TIMEOUT_SECONDS

    bodies: list[dict[str, Any]] = []
    info = _server_info(DEFAULT_LAYOUT)
    yellow = [3]
    handler = type(
        "R",
        (_Rebuilding,),
        {"bodies": bodies, "info": info, "build_seconds": 6.0, "yellow_answers": yellow},
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    env = {
        "NCINDEX_QDRANT_URL": f"http://127.0.0.1:{server.server_address[1]}",
        "NCINDEX_QDRANT_QUANTIZATION": "none",
        "NCINDEX_QDRANT_ON_DISK_PAYLOAD_INDEX": str(not DEFAULT_LAYOUT.on_disk_payload_index),
        "NCINDEX_DATA_DIR": str(tmp_path),
        "NCINDEX_LOG_LEVEL": "WARNING",
    }
    try:
        result = CliRunner().invoke(main, ["reindex", "--layout"], env=env)
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 0, result.output
    (patch,) = [b["path"] for b in bodies if b["method"] == "PATCH"]
    assert patch == f"/collections/ncindex-m?timeout={LAYOUT_UPDATE_TIMEOUT_SECONDS}"
    puts = [b["path"] for b in bodies if b["method"] == "PUT"]
    assert puts and set(puts) == {"/collections/ncindex-m/index?wait=false"}
    assert yellow == [0]  # read until green
    assert result.output.endswith("ncindex-m: rebuilt (green)\n")


def test_reindex_layout_stops_following_a_grey_collection(
    existing: tuple[str, list[dict[str, Any]], dict[str, Any]], tmp_path: Path
) -> None:
    """A grey collection (Qdrant's optimisations pending until an update triggers them,
    qdrant/qdrant ``CollectionStatus::Grey``) never turns green by being read: the command
    says so and returns instead of reading it for ever."""
    from click.testing import CliRunner

    from allinone.cli import main

    url, _, info = existing
    info["status"] = "grey"
    env = {
        "NCINDEX_QDRANT_URL": url,
        "NCINDEX_QDRANT_QUANTIZATION": "none",
        "NCINDEX_DATA_DIR": str(tmp_path),
        "NCINDEX_LOG_LEVEL": "WARNING",
    }
    result = CliRunner().invoke(main, ["reindex", "--layout", "--wait", "30"], env=env)
    assert result.exit_code == 0, result.output
    assert result.output.endswith("ncindex-m: grey (Qdrant optimises at its next update)\n")


def test_the_rebuild_notes_are_read_in_few_scans_of_a_large_keyspace(redis_url: str) -> None:
    """``ncindex status --watch`` reads the notes on every frame by SCAN over the whole
    keyspace; asked at Redis's default COUNT of 10, 20,000 keys (a burst's debounce keys)
    took 2,000 round trips a frame. Asked 1,000 deep, as the status's other scans are."""
    import redis

    from ncindex.names import Names
    from ncindex.progress import IndexRebuilds

    class Counting(redis.Redis):
        scans = 0

        def execute_command(self, *args: Any, **options: Any) -> Any:
            if args and args[0] == "SCAN":
                self.scans += 1
            return super().execute_command(*args, **options)

    client = Counting.from_url(redis_url)
    names = Names(f"rebuildscan{uuid.uuid4().hex[:8]}")
    keys = [names.key("debounce", i) for i in range(20_000)]
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.set(key, 1, ex=600)
    pipe.execute()
    rebuilds = IndexRebuilds(client, names)
    try:
        rebuilds.begun("c", "title", 5, waits=True)
        assert [note["field"] for note in rebuilds.entries()] == ["title"]
        assert client.scans <= client.dbsize() // 100
    finally:
        rebuilds.ended("c", "title")
        client.delete(*keys)
        client.close()
