"""Fixtures of the search tests.

* ``corpus`` — the generated fixture corpus (``search_corpus``) in a Qdrant Edge store, shared
  read-only by a session, for filter and ranking tests at the service level.
* ``api`` — the search API on real parts: the Nextcloud simulator over HTTP (alice, bob,
  carol) holding real files, notes and a share, indexed straight into a Qdrant Edge store
  with the real embedder (no pipeline, for speed; ``tests/search/test_stack.py`` goes through
  the whole pipeline), real Redis, real verify-on-read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
from flask.testing import FlaskClient
from pydantic import SecretStr
from search_corpus import Doc, index_docs, make_docs
from werkzeug.serving import make_server

from ncindex.documents import (
    Chunk,
    DocRef,
    DocType,
    SourceDocument,
    build_payload,
    point_id,
    principal,
)
from ncindex.embedding.analyzer import ANALYZER_VERSION
from ncindex.embedding.embedder import Embedder
from ncindex.index.indexing import Indexer
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.store import model_slug
from ncindex.store.port import PointRecord
from ncindex.store.qdrant_edge import QdrantEdgeStore
from search_api import create_app
from support import copy_store

PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z

# (owner, path, text, mtime offset days, tags, category) — the api fixture's documents.
FILES: list[tuple[str, str, str, int, list[str], str | None]] = [
    (
        "alice",
        "/Projects/Lighthouse/plan.md",
        "Lighthouse plan: polish the lighthouse lens and replace the brass fittings.",
        0,
        ["urgent"],
        None,
    ),
    (
        "alice",
        "/Projects/Lighthouse-old/plan.md",
        "Old lighthouse plan from last decade, lens polishing postponed.",
        10,
        [],
        None,
    ),
    (
        "alice",
        "/Projects/budget.txt",
        "Budget: two thousand euros for the lighthouse foghorn compressor.",
        20,
        ["finance"],
        None,
    ),
    (
        "alice",
        "/Private/diary.md",
        "Private diary: I walked to the lighthouse and watched the lens glow.",
        30,
        [],
        None,
    ),
    (
        "alice",
        "/Notes/Work/Foghorn.md",
        "Foghorn maintenance note: the lighthouse foghorn needs oil.",
        40,
        [],
        "Work",
    ),
    (
        "bob",
        "/Private/bob-secret.md",
        "Bob's secret lighthouse notes: the keeper hides the lens key.",
        50,
        [],
        None,
    ),
    (
        "bob",
        "/Notes/Home/Garden.md",
        "Garden note: plant tulips near the lighthouse model.",
        60,
        ["urgent"],
        "Home",
    ),
]


@pytest.fixture(scope="session")
def corpus_docs() -> list[Doc]:
    """The generated fixture corpus."""
    return make_docs()


@pytest.fixture(scope="session")
def corpus(
    corpus_docs: list[Doc], embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[QdrantEdgeStore]:
    """A Qdrant Edge store holding the fixture corpus (read-only for the tests)."""
    store = QdrantEdgeStore(tmp_path_factory.mktemp("corpus"), "test-model")
    store.ensure_collection(embedder.dense_dim)
    index_docs(store, embedder, corpus_docs)
    yield store
    store.close()


class RecordingProducer:
    """A Celery producer stand-in that records ``send_task`` calls."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send_task(self, name: str, kwargs: dict[str, Any] | None = None, **_: Any) -> None:
        self.sent.append((name, dict(kwargs or {})))


@dataclass
class Api:
    """The search API over the simulator; ``keys`` maps a FILES path to its ``doc_key``."""

    sim: NextcloudSimulator
    store: QdrantEdgeStore
    settings: Settings
    services: Services
    client: FlaskClient
    producer: RecordingProducer
    app: Any
    keys: dict[str, str] = field(default_factory=dict)

    def post(self, user: str | None, body: Any, **kwargs: Any) -> Any:
        """``POST /v1/search`` as ``user`` (``None``: no credentials); the response."""
        auth = (user, PASSWORDS[user]) if user else None
        return self.client.post("/v1/search", json=body, auth=auth, **kwargs)

    def found(self, user: str, body: dict[str, Any]) -> list[str]:
        """The doc_keys of a successful search, in order."""
        response = self.post(user, body)
        assert response.status_code == 200, response.get_json()
        return [f"{r['doc_type']}:{r['doc_id']}" for r in response.get_json()["results"]]

    def index_parts(self, owner: str, path: str, parts: list[str]) -> str:
        """Put a file at ``path`` of ``owner`` whose text is ``parts`` joined by blank lines
        into the simulator and the store, one chunk per part (real vectors); its
        ``doc_key``."""
        text = "\n\n".join(parts)
        self.sim.put_file(owner, path, text.encode(), mtime=T0)
        starts = [sum(len(p) + 2 for p in parts[:i]) for i in range(len(parts))]
        chunks = [
            Chunk(i, p, a, a + len(p)) for i, (p, a) in enumerate(zip(parts, starts, strict=True))
        ]
        points = _file_points(self, (owner, path, text, 0, [], None), chunks)
        vectors = self.services.embedder.embed_documents(parts)
        for point, (dense, sparse) in zip(points, vectors, strict=True):
            point.dense, point.sparse = dense, sparse
        self.store.upsert(points)
        return str(points[0].payload["doc_key"])

    def index_card(self, owner: str, board: str, stack: str, text: tuple[str, str]) -> str:
        """Put a Deck card of ``owner`` (``text``: its title and description) in a new stack
        titled ``stack`` of a new board titled ``board`` into the simulator, and index it as
        ``owner`` does (:meth:`~ncindex.index.indexing.Indexer.index_document`: the card's
        GET, its stack's and board's, real vectors); its ``doc_key``."""
        board_id = self.sim.deck_create_board(owner, board)
        stack_id = self.sim.deck_create_stack(owner, board_id, stack)
        card = self.sim.deck_create_card(owner, stack_id, *text)
        outcome = Indexer(self.services).index_document(owner, "deck_card", card)
        assert outcome.action == "indexed", outcome
        return f"deck_card:{card}"

    def rename_board(self, doc_key: str, title: str) -> None:
        """Rename the board of the card ``doc_key`` (as the index holds it) in the
        simulator's state alone, as nextcloud/deck ``BoardService::update`` does: no card
        changes, and no event ncindex subscribes is sent."""
        (point, *_) = self.store.document_points(doc_key)
        with self.sim.lock:
            self.sim.deck.boards[int(point.payload["board_id"])].title = title


def _file_point(api: Api, spec: tuple[str, str, str, int, list[str], str | None]) -> PointRecord:
    """The one point of a FILES entry, its whole text one chunk."""
    (point,) = _file_points(api, spec, [Chunk(0, spec[2], 0, len(spec[2]))])
    return point


def _file_points(
    api: Api, spec: tuple[str, str, str, int, list[str], str | None], chunks: list[Chunk]
) -> list[PointRecord]:
    owner, path, text, days, tags, category = spec
    sim = api.sim
    file_id = sim.file_id(owner, path)
    assert file_id is not None
    users = [u for u in PASSWORDS if file_id in sim.visible_files(u)]
    paths = {u: sim.path_of(u, file_id) for u in users}
    doc_type = DocType.NOTE if path.startswith("/Notes/") else DocType.FILE
    source = SourceDocument(
        ref=DocRef(doc_type, str(file_id)),
        user=owner,
        owner=owner,
        title=path.rsplit("/", 1)[-1].removesuffix(".md"),
        text=text,
        etag=f"e{file_id}",
        modified_at=T0 + 86_400 * days,
        path=path,
        mime_type="text/markdown" if path.endswith(".md") else "text/plain",
        size=len(text),
        category=category,
        tags=tags,
    )
    payloads = [
        build_payload(
            source,
            chunk,
            len(chunks),
            acl=[principal(u) for u in users],
            paths={u: p for u, p in paths.items() if p},
            indexed_at=T0,
            embedding_model="test",
            analyzer=ANALYZER_VERSION,
        )
        for chunk in chunks
    ]
    return [
        PointRecord(point_id(source.ref, payload["content_hash"], chunk.index), payload)
        for chunk, payload in zip(chunks, payloads, strict=True)
    ]


def build_api(
    tmp_path: Path,
    redis_url: str,
    embedder: Embedder,
    model_dir: Path,
    empty_store: Path,
    **overrides: Any,
) -> tuple[Api, Any]:
    """An :class:`Api` and the simulator server (close it when done)."""
    sim = NextcloudSimulator(delivery_delay=(0.0, 0.0))
    for user, password in PASSWORDS.items():
        sim.add_user(user, password=password, display_name=user.title())
    for owner, path, text, days, _, _ in FILES:
        sim.put_file(owner, path, text.encode(), mtime=T0 + 86_400 * days)
    sim.share("alice", "/Projects/Lighthouse", "bob")
    server = serve_simulator(sim, host="127.0.0.1", port=0)
    settings = Settings(
        nextcloud_url=server.url,
        accounts={u: SecretStr(p) for u, p in PASSWORDS.items()},
        redis_url=redis_url,
        model_dir=model_dir,
        data_dir=tmp_path,
        **({"user_cache_seconds": 0, "search_rate_limit": ""} | overrides),
    )
    copy_store(empty_store, tmp_path / "qdrant")
    store = QdrantEdgeStore(tmp_path / "qdrant", model_slug(settings.dense_model))
    services = Services(settings, store=store, embedder=embedder)
    producer = RecordingProducer()
    app = create_app(settings, services=services, producer=producer)
    api = Api(sim, store, settings, services, app.test_client(), producer, app)
    points = [_file_point(api, spec) for spec in FILES]
    vectors = embedder.embed_documents([spec[2] for spec in FILES])
    for point, (dense, sparse), spec in zip(points, vectors, FILES, strict=True):
        point.dense, point.sparse = dense, sparse
        api.keys[spec[1] if spec[0] == "alice" else f"bob:{spec[1]}"] = point.payload["doc_key"]
    store.upsert(points)
    return api, server


@pytest.fixture
def api(
    request: pytest.FixtureRequest,
    redis_url: str,
    embedder: Embedder,
    model_dir: Path,
    tmp_path: Path,
    empty_store: Path,
) -> Iterator[Api]:
    """The search API over the simulator (see the module docstring); rate limit off;
    Redis emptied first (RCP sessions, rate counters). Parametrised indirectly, the
    parameter is a dict of settings overrides."""
    redis.Redis.from_url(redis_url).flushdb()
    overrides = getattr(request, "param", {})
    built, server = build_api(tmp_path, redis_url, embedder, model_dir, empty_store, **overrides)
    yield built
    server.close()
    built.services.close()


@pytest.fixture(scope="module")
def ro_api(
    redis_url: str,
    embedder: Embedder,
    model_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
    empty_store: Path,
) -> Iterator[Api]:
    """Like ``api`` but shared by a module's tests, which must not change it."""
    built, server = build_api(
        tmp_path_factory.mktemp("ro-api"), redis_url, embedder, model_dir, empty_store
    )
    yield built
    server.close()
    built.services.close()


@dataclass
class Served:
    """An app served over real HTTP on a free port."""

    url: str
    api: Api


def serve(api: Api) -> Iterator[Served]:
    """``api``'s app served by werkzeug on a free port in a thread, until resumed."""
    httpd = make_server("127.0.0.1", 0, api.app, threaded=True)
    thread = threading.Thread(  # shut down within 0.05 s, not serve_forever's default 0.5 s
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield Served(f"http://127.0.0.1:{httpd.port}", api)
    httpd.shutdown()
    thread.join(timeout=5)


@pytest.fixture
def served(api: Api) -> Iterator[Served]:
    """``api``'s app served by werkzeug on a free port in a thread."""
    yield from serve(api)


@pytest.fixture
def ro_served(ro_api: Api, redis_url: str) -> Iterator[Served]:
    """``ro_api``'s app served as :func:`served` serves ``api``'s, Redis emptied first as
    ``api`` empties it (RCP sessions, rate counters: the only state the app keeps there),
    so a test starts from what a fresh ``api`` holds without building one (a store copy,
    loaded, and the corpus embedded). For the tests that change neither the simulator, the
    store nor the settings."""
    redis.Redis.from_url(redis_url).flushdb()
    yield from serve(ro_api)
