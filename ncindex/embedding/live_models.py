"""Which embedding model serves, and the second model every write is mirrored to.

The store's model pointers (:class:`~ncindex.store.port.ModelPointers`: an alias on the Qdrant
server, the ``active_model`` file on Qdrant Edge) decide; ``Settings.dense_model`` only names
the model of a new, empty store. :class:`LiveModels` re-reads the pointers at most every
``Settings.model_check_seconds`` seconds, opens each model (embedder and collection) once per
process, and gives a :class:`LiveView`: the live model, whose embedder and collection searches
and indexing use, and, while ``ncindex reindex`` builds a new model or keeps the previous one
as a standby, the mirror model.

Writes through :attr:`LiveView.store` go to the live collection and then to the mirror's
(:class:`MirroredStore`), with the mirror's own dense vectors computed from each point's
``text`` (vectors of unchanged chunk texts already in the mirror are reused) and the same
BM25 vectors (BM25 does not depend on the dense model). So a model being built receives every
change made while it fills, and a standby stays current, making a switch back instant.

A document's lock pins one view while it is held (:meth:`LiveModels.pinned`, taken by
:func:`ncindex.index.locks.document_lock`) and a search asks for the view once, so neither embeds
with one model and writes or queries another's collection when the pointers move.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from qdrant_client import models

from ncindex.documents import text_hash
from ncindex.embedding.embedder import Embedder
from ncindex.errors import ModelError
from ncindex.settings import Settings
from ncindex.store import ModelPointers, PointRecord, VectorStore, model_slug, open_store
from ncindex.store.port import Hit, RebuildHook

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ModelHandle:
    """One embedding model opened in this process: its name (the ``embedding_model`` payload
    value), slug (its collection), embedder and collection (ensured)."""

    name: str
    slug: str
    embedder: Embedder
    store: VectorStore


@dataclass(frozen=True, slots=True)
class LiveView:
    """The models at one moment: ``live`` serves; ``mirror`` (or ``None``) receives a copy of
    every write; ``pointers`` as read from the store."""

    live: ModelHandle
    mirror: ModelHandle | None
    pointers: ModelPointers

    @property
    def store(self) -> VectorStore:
        """The live collection; writes also reach the mirror's when there is one."""
        return MirroredStore(self.live, self.mirror) if self.mirror else self.live.store

    @property
    def embedder(self) -> Embedder:
        """The live model's embedder."""
        return self.live.embedder


def model_name_for(settings: Settings, slug: str) -> str:
    """The model name of ``slug``: ``Settings.dense_model`` when it has that slug, else the
    name of the folder under ``Settings.model_dir`` whose slug it is (where ``ncindex reindex``
    found the model). Raises :class:`~ncindex.embedding.models.ModelError` if there is none."""
    if slug == model_slug(settings.dense_model):
        return settings.dense_model
    folders = sorted(settings.model_dir.iterdir()) if settings.model_dir.is_dir() else []
    for folder in folders:
        if folder.is_dir() and model_slug(folder.name) == slug:
            return folder.name
    raise ModelError(f"no folder for model {slug!r} under {settings.model_dir}", model=slug)


class LiveModels:
    """The models of one process, by the store's pointers (see the module docstring).

    ``store`` and ``embedder``, when given, are those of ``Settings.dense_model`` (tests and the
    evaluation hand theirs in); other models are opened beside them. ``on_rebuild`` is told
    of each payload index a collection's ``ensure_collection`` makes again. ``load_live``: a
    read of the pointers loads the live model's dense model at once, off the request path of
    a process that serves searches (every query embeds); without it the dense model loads at
    its first embedding, so a worker that only reads and re-paths the store (the light
    worker group: moves, evictions, scans) never holds it (a light pool process peaked at
    501 MiB on a move with it, 274 MiB without). Raises ``ModelError``
    when a model named by the pointers cannot be found or loaded, ``StoreUnavailable`` when the
    store fails.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        store: VectorStore | None = None,
        embedder: Embedder | None = None,
        on_rebuild: RebuildHook | None = None,
        load_live: bool = True,
    ) -> None:
        self.settings = settings
        self._on_rebuild = on_rebuild
        self._load_live = load_live
        self._default = model_slug(settings.dense_model)
        self._root = store or open_store(settings, model_slug=self._default)
        self._given_store = store
        self._given_embedder = embedder
        self._handles: dict[str, ModelHandle] = {}
        self._lock = threading.RLock()
        self._view: LiveView | None = None
        self._read_at = float("-inf")
        self._pinned = threading.local()

    # --- models ---------------------------------------------------------------------------

    def handle(self, slug: str) -> ModelHandle:
        """Model ``slug`` opened once per process: collection ensured, embedder loading on
        first use (a mirror model's only when a write needs it); its name from
        :func:`model_name_for`."""
        with self._lock:
            if slug in self._handles:
                return self._handles[slug]
            name = model_name_for(self.settings, slug)
            if slug == self._default and self._given_embedder is not None:
                embedder = self._given_embedder
            else:
                embedder = Embedder(self.settings.model_copy(update={"dense_model": name}))
            if slug == self._default and self._given_store is not None:
                store = self._given_store
            else:
                store = self._root.use_model(slug)
            store.ensure_collection(embedder.declared_dim, self._on_rebuild)
            handle = self._handles[slug] = ModelHandle(name, slug, embedder, store)
            return handle

    def forget(self, slug: str) -> None:
        """Close model ``slug``'s collection in this process (before it is dropped)."""
        with self._lock:
            handle = self._handles.pop(slug, None)
            self._view = None
        if handle is not None:
            handle.store.close()

    @property
    def root(self) -> VectorStore:
        """A store object for reading and moving the pointers (it may hold no collection)."""
        return self._root

    # --- views ----------------------------------------------------------------------------

    def view(self) -> LiveView:
        """The pinned view of this thread, else the current one (pointers re-read when older
        than ``model_check_seconds``). A new store gets ``Settings.dense_model`` as its live
        model."""
        pinned: LiveView | None = getattr(self._pinned, "view", None)
        if pinned is not None:
            return pinned
        with self._lock:
            now = time.monotonic()
            if self._view is None or now - self._read_at >= self.settings.model_check_seconds:
                self._view = self._read()
                self._read_at = now
            return self._view

    def refresh(self) -> LiveView:
        """Re-read the pointers now (after moving them in this process)."""
        with self._lock:
            self._read_at = float("-inf")
        return self.view()

    def _read(self) -> LiveView:
        pointers = self._root.models()
        if pointers.active is None:
            self.handle(self._default)  # ensure_collection points a new store at it
            pointers = self._root.models()
        assert pointers.active is not None
        if self._view is not None and self._view.pointers != pointers:
            log.info("models_changed", active=pointers.active, mirror=pointers.mirror)
        live = self.handle(pointers.active)
        if self._load_live:  # off the request path: the live model serves every search
            live.embedder.load()
        mirror = self.handle(pointers.mirror) if pointers.mirror else None
        return LiveView(live, mirror, pointers)

    @contextlib.contextmanager
    def pinned(self) -> Iterator[LiveView]:
        """Keep one view for this thread inside the block (nested blocks keep the outer one)."""
        if getattr(self._pinned, "view", None) is not None:
            yield self._pinned.view
            return
        self._pinned.view = view = self.view()
        try:
            yield view
        finally:
            self._pinned.view = None

    def close(self) -> None:
        """Close every model's collection and the pointer store."""
        with self._lock:
            handles, self._handles, self._view = list(self._handles.values()), {}, None
        for handle in handles:
            handle.store.close()
        if all(h.store is not self._root for h in handles):
            self._root.close()


def reusable_points(points: Sequence[PointRecord], model: str) -> dict[str, PointRecord]:
    """Stored ``points`` (read with vectors) whose dense vector ``model`` made, by the
    :func:`~ncindex.documents.text_hash` of their ``text``: what a write of the same texts
    for ``model`` need not embed again."""
    return {
        text_hash(p.payload["text"]): p
        for p in points
        if p.payload.get("embedding_model") == model and p.dense is not None
    }


def mirror_points(points: Sequence[PointRecord], target: ModelHandle) -> list[PointRecord]:
    """``points`` (of any model) as points of ``target``: same ids, payload with
    ``embedding_model`` = ``target.name``, BM25 vectors as given when the current analyzer
    made them (payload ``analyzer``), else computed again from the text, dense vectors embedded by
    ``target`` from each payload's ``text`` — reused from ``target``'s stored points of the same
    document where the text and model match."""
    if not points:
        return []
    analyzer = target.embedder.analyzer_version
    reuse: dict[str, list[float]] = {}
    for key in {p.payload["doc_key"] for p in points}:
        stored = target.store.document_points(key, with_vectors=True)
        reuse |= {h: p.dense for h, p in reusable_points(stored, target.name).items() if p.dense}
    missing = sorted({text_hash(p.payload["text"]): p.payload["text"] for p in points}.items())
    missing = [(h, t) for h, t in missing if h not in reuse]
    if missing:
        dense = target.embedder.embed_documents_dense([t for _, t in missing])
        reuse.update({h: v for (h, _), v in zip(missing, dense, strict=True)})
    return [
        PointRecord(
            id=p.id,
            payload=p.payload | {"embedding_model": target.name, "analyzer": analyzer},
            dense=reuse[text_hash(p.payload["text"])],
            sparse=p.sparse
            if p.payload.get("analyzer") == analyzer and p.sparse is not None
            else target.embedder.embed_documents_sparse([p.payload["text"]])[0],
        )
        for p in points
    ]


class MirroredStore:
    """A :class:`~ncindex.store.port.VectorStore` that reads ``live``'s collection and writes
    both ``live``'s and ``mirror``'s (the live one first; an error in either is raised, and
    the caller's retry repeats both, every write being idempotent)."""

    def __init__(self, live: ModelHandle, mirror: ModelHandle) -> None:
        self.live = live
        self.mirror = mirror
        self.model_slug = live.slug

    def ensure_collection(self, dense_dim: int, on_rebuild: RebuildHook | None = None) -> None:
        """Ensure the live collection (the mirror's is ensured when it is opened)."""
        self.live.store.ensure_collection(dense_dim, on_rebuild)

    def upsert(self, points: Sequence[PointRecord]) -> None:
        """Write ``points`` to the live collection, then their mirror-model copies."""
        self.live.store.upsert(points)
        self.mirror.store.upsert(mirror_points(points, self.mirror))

    def delete_document(self, doc_key: str, keep: Collection[str] | None = None) -> None:
        """Delete in both collections (a point keeps its id in the mirror: ``keep`` holds for
        both)."""
        self.live.store.delete_document(doc_key, keep)
        self.mirror.store.delete_document(doc_key, keep)

    def set_payload(self, doc_key: str, payload: dict[str, Any]) -> None:
        """Merge ``payload`` in both collections."""
        self.live.store.set_payload(doc_key, payload)
        self.mirror.store.set_payload(doc_key, payload)

    def document_points(self, doc_key: str, *, with_vectors: bool = False) -> list[PointRecord]:
        """The live collection's points of ``doc_key``."""
        return self.live.store.document_points(doc_key, with_vectors=with_vectors)

    def scroll(
        self, flt: models.Filter | None, fields: Sequence[str], page_size: int = 256
    ) -> Iterator[dict[str, Any]]:
        """Payloads from the live collection."""
        return self.live.store.scroll(flt, fields, page_size)

    def facet_values(self, field: str, flt: models.Filter | None) -> set[str]:
        """Facet values from the live collection."""
        return self.live.store.facet_values(field, flt)

    def facet_counts(
        self, field: str, flt: models.Filter | None, *, exact: bool = True
    ) -> dict[str, int]:
        """Facet values with their counts from the live collection."""
        return self.live.store.facet_counts(field, flt, exact=exact)

    def query(self, **kwargs: Any) -> list[Hit]:
        """Query the live collection (the arguments of :meth:`VectorStore.query`)."""
        return self.live.store.query(**kwargs)

    def branch(self, **kwargs: Any) -> list[Hit]:
        """One branch on the live collection (the arguments of :meth:`VectorStore.branch`)."""
        return self.live.store.branch(**kwargs)

    def retrieve(
        self, ids: Sequence[str], fields: Sequence[str] | None = None
    ) -> dict[str, dict[str, Any]]:
        """Payloads (``fields``) by id from the live collection."""
        return self.live.store.retrieve(ids, fields)

    def count(self, flt: models.Filter | None = None, *, exact: bool = True) -> int:
        """Count in the live collection."""
        return self.live.store.count(flt, exact=exact)

    def models(self) -> ModelPointers:
        """The pointers (shared by every collection)."""
        return self.live.store.models()

    def set_models(self, pointers: ModelPointers) -> None:
        """Move the pointers."""
        self.live.store.set_models(pointers)

    def use_model(self, model_slug: str) -> VectorStore:
        """Another model's store beside the live one."""
        return self.live.store.use_model(model_slug)

    def drop_model(self, model_slug: str) -> None:
        """Drop another model's collection."""
        self.live.store.drop_model(model_slug)

    def close(self) -> None:
        """Nothing: the models' stores belong to :class:`LiveModels`."""
