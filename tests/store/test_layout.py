"""A collection ncindex creates carries the layout the settings ask for, on both engines:
shards, replication, write consistency (server), HNSW (whole-collection and per-tenant graph),
scalar int8 quantisation, on-disk vectors and payloads, and ``acl`` as the tenant index.

qdrant-client's local mode (``QdrantClient(":memory:")``) accepts every one of these parameters
but ignores all of them except the vectors' ``on_disk`` (and the payload indexes), so the server
engine is checked by what it sends: the body of ``PUT /collections/{name}`` received by a
recording HTTP endpoint speaking Qdrant's REST format.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pydantic
import pytest
from qdrant_client import QdrantClient

from ncindex.errors import StoreUnavailable
from ncindex.settings import Settings
from ncindex.store import CollectionLayout, open_store
from ncindex.store.layout import DEFAULT_LAYOUT
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.store.qdrant_server import QdrantServerStore

CUSTOM = CollectionLayout(
    shard_number=6,
    replication_factor=3,
    write_consistency_factor=2,
    hnsw_m=0,
    hnsw_ef_construct=64,
    hnsw_payload_m=24,
    indexing_threshold_kb=500,
    quantization="none",
    on_disk_vectors=False,
    on_disk_payload=False,
)


def test_default_layout_is_the_settings_defaults() -> None:
    assert CollectionLayout.from_settings(Settings()) == DEFAULT_LAYOUT
    assert DEFAULT_LAYOUT.quantization == "int8"
    assert DEFAULT_LAYOUT.hnsw_payload_m > 0


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
        assert saved["on_disk_payload"] is layout.on_disk_payload
        assert saved["optimizers"]["indexing_threshold"] == layout.indexing_threshold_kb
        assert saved["vectors"]["dense"]["on_disk"] is layout.on_disk_vectors
        if layout.quantization == "int8":
            assert saved["quantization_config"] == {"scalar": {"type": "int8", "always_ram": True}}
        else:
            assert saved.get("quantization_config") is None
        acl = store._open_shard().info().payload_schema["acl"]
        assert acl.params is not None and acl.params.is_tenant is True
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
    ``PUT /collections/{name}`` and refuses it (500), so ``ensure_collection`` stops there."""

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
    assert body["vectors"]["dense"]["on_disk"] is layout.on_disk_vectors
    assert body["hnsw_config"]["m"] == layout.hnsw_m
    assert body["hnsw_config"]["ef_construct"] == layout.hnsw_ef_construct
    assert body["hnsw_config"]["payload_m"] == layout.hnsw_payload_m
    if layout.quantization == "int8":
        assert body["quantization_config"] == {"scalar": {"type": "int8", "always_ram": True}}
    else:
        assert body.get("quantization_config") is None
    assert body["sparse_vectors"]["bm25"]["modifier"] == "idf"


def test_local_mode_accepts_the_layout() -> None:
    """The parameters are valid for qdrant-client (local mode keeps only vectors' on_disk)."""
    store = QdrantServerStore(QdrantClient(":memory:"), "ncindex", "m", layout=CUSTOM)
    store.ensure_collection(8)
    assert store.models().active == "m"
    assert store.use_model("other").layout == CUSTOM
