"""The vector-store port on Qdrant Edge (``qdrant-edge-py``), the embedded engine (DESIGN §10).

Layout under ``path``::

    path/
      active_model          the "alias" (:class:`~ncindex.store.port.ModelPointers`): the live
                            model's slug on the first line, and ``standby <slug>`` or
                            ``building <slug>`` on a second when there is a second model;
                            replaced whole, atomically
      <model_slug>/         one EdgeShard per embedding model (Edge's own files: wal, segments)

Filters arrive as ``qdrant_client.models.Filter`` (built by :mod:`ncindex.search.filters`) and are
translated by :func:`to_edge_filter`. Edge has both fusions (``Fusion.Rrf``, ``Fusion.Dbsf``),
so hybrid queries run as one Edge query with two prefetches, like on the server.

Only one process may open a shard folder (Edge locks its write-ahead log); a second open, in
any process, raises ``StoreUnavailable``. A store opens its shard on first use, so reading the
model pointers (:meth:`QdrantEdgeStore.models`) never touches a shard another process holds.
Within a process the store is thread-safe: writes and open/close hold a lock; reads go to the
shard directly (Edge's Rust shard synchronises them).
Edge keeps a write-ahead log, so a write is durable when it returns; :meth:`close` flushes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import qdrant_edge as qe
from qdrant_client import models
from qdrant_client.models import Filter  # by name: in the store class, ``models`` is a method

from ncindex.errors import StoreUnavailable
from ncindex.store import shard_copy
from ncindex.store.layout import DEFAULT_LAYOUT, TENANT_FIELD, CollectionLayout
from ncindex.store.port import (
    DENSE,
    FACET_LIMIT,
    SPARSE,
    Fusion,
    Hit,
    IndexRebuild,
    ModelPointers,
    PointRecord,
    RebuildHook,
    SparseVector,
    payload_selector,
)
from ncindex.store.preload import Preloading, preload_in_background
from ncindex.store.schema import (
    PAYLOAD_INDEXES,
    TEXT_ASCII_FOLDING,
    IndexKind,
    batches,
    document_filter,
    documents_filter,
    rrf_parameters,
    text_index_differs,
)

ALIAS_FILE = "active_model"
"""Name of the pointer file (under the store's root) naming the live model's slug."""

_EDGE_CONFIG_FILE = "edge_config.json"  # written by Edge into every shard folder

_NO_DOC_KEY = ""
"""Journal entry of a point written without a ``doc_key``: such a write cannot be replayed on
an optimised copy, so the copy is dropped (see :meth:`QdrantEdgeStore.optimise_aside`)."""

_FINAL_REPLAY_DOCS = 64
"""A replay round this small (documents) is the last: it runs under the write lock."""

_MAX_REPLAY_ROUNDS = 8
"""Replay rounds without the lock before the last one runs under it, whatever its size."""


def _index_schema(
    field: str, kind: IndexKind, on_disk: bool
) -> qe.KeywordIndexParams | qe.IntegerIndexParams | qe.TextIndexParams:
    """The index parameters of payload ``field``: ``acl`` the tenant index; every index
    memory-mapped on disk (``Memory.Cold``) when ``on_disk``, else in RAM (Edge's default)."""
    memory = qe.Memory.Cold if on_disk else None
    if kind is IndexKind.KEYWORD:
        return qe.KeywordIndexParams(
            is_tenant=True if field == TENANT_FIELD else None, memory=memory
        )
    if kind is IndexKind.INTEGER:
        return qe.IntegerIndexParams(lookup=True, range=True, memory=memory)
    return qe.TextIndexParams(
        tokenizer=qe.TokenizerType.Word,
        lowercase=True,
        ascii_folding=TEXT_ASCII_FOLDING,
        memory=memory,
    )


def _is_engine_error(exc: BaseException) -> bool:
    # Edge raises plain ``Exception`` ("Service runtime error: ...") for every engine failure;
    # TypeError/ValueError from its bindings are programming errors and pass through.
    return type(exc) is Exception or isinstance(exc, OSError)


def to_edge_search_params(params: models.SearchParams) -> qe.SearchParams:
    """Translate ``qdrant_client.models.SearchParams`` to ``qdrant_edge``, every field:
    ``hnsw_ef``, ``exact``, ``indexed_only``, ``quantization`` (``ignore``, ``rescore``,
    ``oversampling``), ``acorn`` (``enable``, ``max_selectivity``) and ``idf`` (the global
    scope, or a corpus filter: :func:`to_edge_filter`)."""
    q, acorn, idf = params.quantization, params.acorn, params.idf
    return qe.SearchParams(
        hnsw_ef=params.hnsw_ef,
        exact=bool(params.exact),
        indexed_only=bool(params.indexed_only),
        quantization=None
        if q is None
        else qe.QuantizationSearchParams(
            ignore=bool(q.ignore), rescore=q.rescore, oversampling=q.oversampling
        ),
        acorn=None
        if acorn is None
        else qe.AcornSearchParams(enable=bool(acorn.enable), max_selectivity=acorn.max_selectivity),
        idf=None
        if idf is None
        else qe.IdfParams(
            corpus=to_edge_filter(idf.corpus) if isinstance(idf, models.IdfCorpusParams) else None
        ),
    )


def to_edge_filter(node: Any) -> Any:
    """Translate a ``qdrant_client.models`` filter (or one of its conditions) to ``qdrant_edge``.

    Handles ``Filter`` (``must``, ``should``, ``must_not`` as a list or a single condition,
    ``min_should``) nested to any depth; ``FieldCondition`` with ``MatchValue``, ``MatchAny``,
    ``MatchExcept``, ``MatchText``, ``MatchTextAny``, ``MatchPhrase``, ``Range`` (numbers),
    ``DatetimeRange``, ``ValuesCount``, ``is_empty``/``is_null``; ``IsEmptyCondition``,
    ``IsNullCondition``, ``HasIdCondition``. ``None`` gives ``None``.

    Raises ``ValueError`` for a condition or match kind it does not know.
    """
    if node is None:
        return None
    if isinstance(node, models.Filter):

        def clauses(value: Any) -> list[Any] | None:
            if value is None:
                return None
            items = value if isinstance(value, list) else [value]
            return [to_edge_filter(c) for c in items]

        min_should = None
        if node.min_should is not None:
            min_should = qe.MinShould(
                clauses(node.min_should.conditions) or [], node.min_should.min_count
            )
        return qe.Filter(
            must=clauses(node.must),
            should=clauses(node.should),
            must_not=clauses(node.must_not),
            min_should=min_should,
        )
    if isinstance(node, models.IsEmptyCondition):
        return qe.IsEmptyCondition(node.is_empty.key)
    if isinstance(node, models.IsNullCondition):
        return qe.IsNullCondition(node.is_null.key)
    if isinstance(node, models.HasIdCondition):
        return qe.HasIdCondition({str(i) if not isinstance(i, int) else i for i in node.has_id})
    if isinstance(node, models.FieldCondition):
        match: Any = None
        m = node.match
        if isinstance(m, models.MatchValue):
            match = qe.MatchValue(m.value)
        elif isinstance(m, models.MatchAny):
            match = qe.MatchAny(m.any.copy())
        elif isinstance(m, models.MatchExcept):
            match = qe.MatchExcept(m.except_.copy())
        elif isinstance(m, models.MatchText):
            match = qe.MatchText(m.text)
        elif isinstance(m, models.MatchTextAny):
            match = qe.MatchTextAny(m.text_any)
        elif isinstance(m, models.MatchPhrase):
            match = qe.MatchPhrase(m.phrase)
        elif m is not None:
            raise ValueError(f"unsupported match for Qdrant Edge: {type(m).__name__}")
        rng: Any = None
        r = node.range
        if isinstance(r, models.Range):
            rng = qe.RangeFloat(gte=_num(r.gte), gt=_num(r.gt), lte=_num(r.lte), lt=_num(r.lt))
        elif isinstance(r, models.DatetimeRange):
            rng = qe.RangeDateTime(gte=_iso(r.gte), gt=_iso(r.gt), lte=_iso(r.lte), lt=_iso(r.lt))
        values_count = None
        if node.values_count is not None:
            vc = node.values_count
            values_count = qe.ValuesCount(lt=vc.lt, gt=vc.gt, lte=vc.lte, gte=vc.gte)
        if node.geo_bounding_box or node.geo_radius or node.geo_polygon:
            raise ValueError("geo conditions are not supported by this store")
        return qe.FieldCondition(
            node.key,
            match=match,
            range=rng,
            values_count=values_count,
            is_empty=node.is_empty,
            is_null=node.is_null,
        )
    raise ValueError(f"unsupported filter condition for Qdrant Edge: {type(node).__name__}")


def _num(value: float | None) -> float | None:
    return None if value is None else float(value)


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else value.isoformat()


class OptimisedCopy(Protocol):
    """An optimised copy of a shard, held open by whoever optimised it (a child process:
    :class:`ncindex.store.edge_optimizer.ChildOptimisation`) until :meth:`close`."""

    def replace_documents(self, doc_keys: Sequence[str], points: Sequence[PointRecord]) -> None:
        """Replace the documents ``doc_keys`` of the copy with ``points``."""

    def flush(self) -> None:
        """Write the copy's pending changes to its segments."""

    def close(self) -> None:
        """Flush and close the copy, releasing its folder."""

    def abort(self) -> None:
        """Give the copy up (its folder is deleted after)."""


class QdrantEdgeStore:
    """:class:`ncindex.store.port.VectorStore` on an embedded Qdrant Edge shard.

    ``path`` is the store's root folder (created if missing); the shard of ``model_slug``
    lives in ``path / model_slug``. An existing shard is opened on first use, so a reopened
    store sees its data before :meth:`ensure_collection`; other calls before the shard exists
    raise ``StoreUnavailable``. Engine failures (including a shard already open elsewhere)
    raise ``StoreUnavailable``. ``layout`` (default :data:`~ncindex.store.layout.DEFAULT_LAYOUT`)
    is given to a shard this store creates (HNSW, quantisation, disk use; Edge has no shards or
    replicas).
    """

    def __init__(
        self, path: Path, model_slug: str, *, layout: CollectionLayout = DEFAULT_LAYOUT
    ) -> None:
        self.root = Path(path)
        self.layout = layout
        self.model_slug = model_slug
        self.shard_path = self.root / model_slug
        self._lock = threading.RLock()
        self._shard: qe.EdgeShard | None = None
        self._preloading: Preloading | None = None
        self._closed = False
        self._journal: set[str] | None = None  # doc keys written while a copy is optimised
        self._gate = threading.Condition()  # readers of the shard, and a swap waiting on them
        self._readers = 0
        self._swapping = False

    def __repr__(self) -> str:
        return f"QdrantEdgeStore(shard_path={str(self.shard_path)!r})"

    @contextlib.contextmanager
    def _call(self, what: str) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            if _is_engine_error(exc):
                held = (
                    " — the store is open in another process: Qdrant Edge allows one, so run "
                    "`ncindex up` alone on it, or give the distributed roles a Qdrant server "
                    "(NCINDEX_QDRANT_URL)"
                    if "WouldBlock" in str(exc)  # its write-ahead log is locked
                    else ""
                )
                raise StoreUnavailable(
                    f"qdrant edge {what} on {str(self.shard_path)!r} failed: {exc}{held}"
                ) from exc
            raise

    def _open_shard(self) -> qe.EdgeShard:
        shard = self._shard
        if shard is not None:
            return shard
        with self._lock:
            exists = (self.shard_path / _EDGE_CONFIG_FILE).exists()
            if self._shard is None and not self._closed and exists:
                with self._call("load"):
                    self._shard = self._load()
            if self._shard is None:
                raise StoreUnavailable(
                    f"qdrant edge shard {str(self.shard_path)!r} is not open "
                    "(closed, or ensure_collection was never called)"
                )
            return self._shard

    def _load(self) -> qe.EdgeShard:
        """``EdgeShard.load`` of the shard folder; its files are then read into the page cache
        in the background (:class:`~ncindex.store.preload.Preloading`, as much as
        ``layout.preload_share`` of the available memory allows; a reading still under way
        for the shard this one replaces is told to stop). Raises Edge's errors."""
        shard = qe.EdgeShard.load(str(self.shard_path))
        if self._preloading is not None:
            self._preloading.stop()
        self._preloading = preload_in_background(self.shard_path, self.layout.preload_share)
        return shard

    def preloaded(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (``None``: until done) for the reading ahead that
        the shard's last load started (:meth:`_load`; an earlier one was told to stop);
        ``True`` once it has ended, or when none was started. Searches never wait for it; a
        caller timing them may."""
        return self._preloading is None or self._preloading.wait(timeout)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[qe.EdgeShard]:
        """The shard, for one read; while :meth:`optimise_aside` swaps shards, a read waits
        for the new one, and the swap waits for the reads under way on the old one."""
        with self._gate:
            while self._swapping:
                self._gate.wait()
            self._readers += 1
        try:
            yield self._open_shard()
        finally:
            with self._gate:
                self._readers -= 1
                if not self._readers:
                    self._gate.notify_all()

    @contextlib.contextmanager
    def _no_readers(self) -> Iterator[None]:
        """Hold every new read back and wait until none is under way."""
        with self._gate:
            self._swapping = True
            while self._readers:
                self._gate.wait()
        try:
            yield
        finally:
            with self._gate:
                self._swapping = False
                self._gate.notify_all()

    # --- collection and alias -----------------------------------------------------------------

    def ensure_collection(self, dense_dim: int, on_rebuild: RebuildHook | None = None) -> None:
        """Create (or open) the shard with dense ``"dense"`` (``dense_dim`` floats, cosine) and
        sparse ``"bm25"`` (IDF modifier), HNSW, quantisation and disk use as :attr:`layout`
        says, every payload index of :data:`ncindex.store.schema.PAYLOAD_INDEXES` (``acl`` as
        the tenant index), and the alias file if missing. An index of other parameters is
        made again here, from every point, before this returns: in a shard holding points it
        is told to ``on_rebuild`` as it begins and as it ends (:class:`IndexRebuild`,
        ``waits`` true).

        Idempotent. Raises ``ValueError`` if the shard exists with another dense dimension.
        """
        config = _edge_config(self.layout, dense_dim)
        with self._lock, self._call("ensure_collection"):
            self._closed = False
            if self._shard is None:
                self.shard_path.mkdir(parents=True, exist_ok=True)
                if (self.shard_path / _EDGE_CONFIG_FILE).exists():
                    self._check_dim(dense_dim)
                    self._shard = self._load()
                else:
                    self._shard = qe.EdgeShard.create(str(self.shard_path), config)
            else:
                self._check_dim(dense_dim)
            info = self._shard.info()
            have = info.payload_schema
            for field, kind in PAYLOAD_INDEXES.items():
                rebuild = None
                if field in have and text_index_differs(
                    kind, getattr(have[field].params, "ascii_folding", None)
                ):
                    if info.points_count and on_rebuild is not None:
                        rebuild = IndexRebuild(str(self.shard_path), field, info.points_count, True)
                        on_rebuild(rebuild, False)
                    self._shard.update(qe.UpdateOperation.delete_field_index(field))
                    have = {k: v for k, v in have.items() if k != field}
                if field not in have:
                    self._shard.update(
                        qe.UpdateOperation.create_field_index(
                            field, _index_schema(field, kind, self.layout.on_disk_payload_index)
                        )
                    )
                if rebuild is not None and on_rebuild is not None:
                    on_rebuild(rebuild, True)
            if self.models().active is None:
                self._write_models(ModelPointers(active=self.model_slug))

    def _check_dim(self, dense_dim: int) -> None:
        try:
            saved = json.loads((self.shard_path / _EDGE_CONFIG_FILE).read_text(encoding="utf-8"))
            existing = saved["vectors"][DENSE]["size"]
        except (OSError, ValueError, KeyError, TypeError):
            return  # Edge's own file changed shape: Edge still rejects wrong vectors on write
        if existing != dense_dim:
            raise ValueError(
                f"shard {str(self.shard_path)!r} has dense dimension {existing}, not {dense_dim}"
            )

    def models(self) -> ModelPointers:
        """The model pointers in the alias file (all ``None`` if there is none yet)."""
        try:
            lines = (self.root / ALIAS_FILE).read_text(encoding="utf-8").split("\n")
        except FileNotFoundError:
            return ModelPointers()
        except OSError as exc:
            raise StoreUnavailable(f"cannot read {self.root / ALIAS_FILE}: {exc}") from exc
        active = lines[0].strip() or None
        role, _, slug = (lines[1].strip() if len(lines) > 1 else "").partition(" ")
        if role not in ("", "standby", "building"):
            raise StoreUnavailable(f"{self.root / ALIAS_FILE}: unknown second line {role!r}")
        return ModelPointers(active=active, **({role: slug} if role else {}))

    def set_models(self, pointers: ModelPointers) -> None:
        """Replace the alias file (a temporary file, fsync, rename: atomic). Raises
        ``ValueError`` if a model it names has no shard."""
        for slug in (pointers.active, pointers.mirror):
            if slug and not (self.root / slug / _EDGE_CONFIG_FILE).exists():
                raise ValueError(
                    f"no qdrant edge shard for model {slug!r} under {str(self.root)!r}"
                )
        with self._lock:
            self._write_models(pointers)

    def use_model(self, model_slug: str) -> QdrantEdgeStore:
        """A store for another model's shard under the same root (a separate shard to close);
        call its ``ensure_collection`` to build it."""
        return QdrantEdgeStore(self.root, model_slug, layout=self.layout)

    def drop_model(self, model_slug: str) -> None:
        """Delete ``model_slug``'s shard folder. Raises ``ValueError`` if the pointers name it or
        this store holds it open; ``StoreUnavailable`` if it cannot be removed. The store of
        that model must be closed in this process first (another process cannot hold it: Edge
        locks a shard to one process)."""
        pointers = self.models()
        if model_slug in (pointers.active, pointers.mirror):
            raise ValueError(f"model {model_slug!r} is in use: {pointers}")
        if model_slug == self.model_slug and self._shard is not None:
            raise ValueError(f"model {model_slug!r} is open in this store: close it first")
        folder = self.root / model_slug
        try:
            shutil.rmtree(folder)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreUnavailable(f"cannot remove {str(folder)!r}: {exc}") from exc

    def _write_models(self, pointers: ModelPointers) -> None:
        lines = [pointers.active or ""]
        if pointers.standby:
            lines.append(f"standby {pointers.standby}")
        elif pointers.building:
            lines.append(f"building {pointers.building}")
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{ALIAS_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write("\n".join(lines) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.root / ALIAS_FILE)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StoreUnavailable(f"cannot write {self.root / ALIAS_FILE}: {exc}") from exc

    # --- writes ---------------------------------------------------------------------------------

    def _update(self, what: str, operation: qe.UpdateOperation, doc_keys: Sequence[str]) -> None:
        with self._lock, self._call(what):
            if self._journal is not None:
                self._journal.update(doc_keys)
            self._open_shard().update(operation)

    def upsert(self, points: Sequence[PointRecord]) -> None:
        """Insert or replace ``points`` by id, in batches of ``UPSERT_BATCH``.

        A ``None`` vector is left out of the point.
        """
        for batch in batches(points):
            keys = [str(p.payload.get("doc_key", _NO_DOC_KEY)) for p in batch]
            edge_points = [qe.Point(p.id, _vectors_of(p), p.payload) for p in batch]
            self._update("upsert", qe.UpdateOperation.upsert_points(edge_points), keys)

    def delete_document(self, doc_key: str, keep: Collection[str] | None = None) -> None:
        """Delete the points of ``doc_key`` (all but the ids in ``keep`` if given)."""
        flt = to_edge_filter(document_filter(doc_key, keep))
        self._update("delete", qe.UpdateOperation.delete_points_by_filter(flt), [doc_key])

    def set_payload(self, doc_key: str, payload: dict[str, Any]) -> None:
        """Merge ``payload``'s top-level keys into every point of ``doc_key``."""
        flt = to_edge_filter(document_filter(doc_key))
        self._update(
            "set_payload", qe.UpdateOperation.set_payload_by_filter(flt, payload), [doc_key]
        )

    # --- reads ----------------------------------------------------------------------------------

    def _scroll_pages(
        self, flt: Any, with_payload: bool | list[str], with_vector: bool, page_size: int
    ) -> Iterator[list[Any]]:
        offset: Any = None
        while True:
            with self._call("scroll"), self._reading() as shard:
                page, offset = shard.scroll(
                    qe.ScrollRequest(
                        offset=offset,
                        limit=page_size,
                        filter=flt,
                        with_payload=with_payload,
                        with_vector=with_vector,
                    )
                )
            yield page
            if offset is None:
                return

    def document_points(self, doc_key: str, *, with_vectors: bool = False) -> list[PointRecord]:
        """Every point of ``doc_key`` ordered by payload ``chunk_index``; vectors are ``None``
        unless ``with_vectors`` (the dense one comes back normalised: cosine storage)."""
        flt = to_edge_filter(document_filter(doc_key))
        records = [
            _record_of(r) for page in self._scroll_pages(flt, True, with_vectors, 256) for r in page
        ]
        records.sort(key=lambda r: r.payload.get("chunk_index", 0))
        return records

    def scroll(
        self, flt: Filter | None, fields: Sequence[str], page_size: int = 256
    ) -> Iterator[dict[str, Any]]:
        """Yield the payload of every point matching ``flt``, holding only ``fields`` (a field
        a point lacks is absent), reading ``page_size`` points at a time."""
        selector: bool | list[str] = list(fields) if fields else False
        for page in self._scroll_pages(to_edge_filter(flt), selector, False, page_size):
            for record in page:
                yield dict(record.payload or {})

    def query(
        self,
        *,
        dense: list[float] | None,
        sparse: SparseVector | None,
        flt: Filter | None,
        limit: int,
        prefetch_limit: int,
        fusion: Fusion,
        rrf_k: int | None = None,
        weights: Sequence[float] | None = None,
        exact: bool = False,
        fields: Sequence[str] | None = None,
        dense_prefetch_limit: int | None = None,
    ) -> list[Hit]:
        """One Edge query: a dense prefetch of ``dense_prefetch_limit`` candidates (``None`` ⇒
        ``prefetch_limit``) and a sparse one of ``prefetch_limit``, each carrying ``flt``,
        fused by ``fusion`` (RRF with ``rrf_k``, default :data:`~ncindex.store.schema.RRF_K`,
        and optional ``(dense, sparse)`` ``weights``; or DBSF), best first; the ``limit`` best
        hits, with payload (ties in an order drawn anew on each call:
        :meth:`~ncindex.store.port.VectorStore.query`). A ``None`` vector drops its branch (the
        other is still fused, so scores keep the fusion's scale). The dense prefetch carries
        :meth:`_dense_params` (``exact``: every matching point). Hits carry the payload's
        ``fields`` (``None``: all of it).
        Edge holds the Python GIL for the whole engine call (measured with qdrant-edge-py
        0.9; README "Collection layout"): no other thread of the process runs meanwhile.

        Raises ``ValueError`` if both vectors are ``None`` or for bad fusion parameters.
        """
        k, branch_weights = rrf_parameters(
            fusion is Fusion.RRF, rrf_k, weights, (dense is not None, sparse is not None)
        )
        edge_filter = to_edge_filter(flt)
        prefetches: list[qe.Prefetch] = []
        if dense is not None:
            depth = prefetch_limit if dense_prefetch_limit is None else dense_prefetch_limit
            prefetches.append(
                qe.Prefetch(
                    limit=depth,
                    query=qe.Query.Nearest(list(dense), using=DENSE),
                    filter=edge_filter,
                    params=self._dense_params(exact, depth),
                )
            )
        if sparse is not None:
            prefetches.append(
                qe.Prefetch(
                    limit=prefetch_limit,
                    query=qe.Query.Nearest(
                        qe.SparseVector(list(sparse.indices), list(sparse.values)), using=SPARSE
                    ),
                    filter=edge_filter,
                )
            )
        if not prefetches:
            raise ValueError("query needs a dense or a sparse vector")
        request = qe.QueryRequest(
            limit=limit,
            # Fusion.Rrf and Fusion.Dbsf are subclasses of Fusion at run time (pyo3 enum
            # variants), not in qdrant_edge's stub (0.9)
            query=cast(
                qe.Fusion,
                qe.Fusion.Rrf(k=k, weights=branch_weights)
                if fusion is Fusion.RRF
                else qe.Fusion.Dbsf(),
            ),
            prefetches=prefetches,
            with_payload=payload_selector(fields),
            with_vector=False,
        )
        with self._call("query"), self._reading() as shard:
            points = shard.query(request)
        return [Hit(id=str(p.id), score=p.score, payload=dict(p.payload or {})) for p in points]

    def branch(
        self,
        *,
        dense: list[float] | None = None,
        sparse: SparseVector | None = None,
        flt: Filter | None,
        limit: int,
        fields: Sequence[str] = ("doc_key",),
        exact: bool = False,
    ) -> list[Hit]:
        """One Edge query of one vector, no fusion: raw cosine or BM25 (IDF) scores, best
        first, payload ``fields`` only; the dense one with :meth:`_dense_params`. ``ValueError``
        unless exactly one vector is given."""
        if dense is not None and sparse is None:
            query = qe.Query.Nearest(list(dense), using=DENSE)
        elif sparse is not None and dense is None:
            query = qe.Query.Nearest(
                qe.SparseVector(list(sparse.indices), list(sparse.values)), using=SPARSE
            )
        else:
            raise ValueError("branch needs exactly one of a dense and a sparse vector")
        request = qe.QueryRequest(
            limit=limit,
            query=query,
            filter=to_edge_filter(flt),
            params=self._dense_params(exact, limit) if dense is not None else None,
            with_payload=payload_selector(fields),
            with_vector=False,
        )
        with self._call("query"), self._reading() as shard:
            points = shard.query(request)
        return [Hit(id=str(p.id), score=p.score, payload=dict(p.payload or {})) for p in points]

    def retrieve(
        self, ids: Sequence[str], fields: Sequence[str] | None = None
    ) -> dict[str, dict[str, Any]]:
        """The payload (``fields``; ``None``: whole) of each existing point of ``ids``, by id
        (Edge's ``retrieve``)."""
        if not ids:
            return {}
        with self._call("retrieve"), self._reading() as shard:
            records = shard.retrieve(
                list(ids), with_payload=payload_selector(fields), with_vector=False
            )
        return {str(r.id): dict(r.payload or {}) for r in records}

    def _dense_params(self, exact: bool, limit: int) -> qe.SearchParams:
        """The layout's dense search parameters
        (:meth:`~ncindex.store.layout.CollectionLayout.dense_search`) in Edge's types."""
        return to_edge_search_params(self.layout.dense_search(exact, limit))

    def count(self, flt: Filter | None = None, *, exact: bool = True) -> int:
        """Number of points matching ``flt`` (all points for ``None``), exact or estimated
        (:meth:`~ncindex.store.port.VectorStore.count`)."""
        request = qe.CountRequest(exact=exact, filter=to_edge_filter(flt))
        with self._call("count"), self._reading() as shard:
            return shard.count(request)

    def facet_values(self, field: str, flt: Filter | None) -> set[str]:
        """Every value of the keyword-indexed ``field`` held by a point matching ``flt``
        (:meth:`~ncindex.store.port.VectorStore.facet_values`; ``EdgeShard.facet``, asked
        :data:`~ncindex.store.port.FACET_LIMIT` deep so that it never samples)."""
        return set(self._facet(field, flt, exact=False))

    def facet_counts(self, field: str, flt: Filter | None, *, exact: bool = True) -> dict[str, int]:
        """Each value of ``field`` held by a point matching ``flt`` with its count of such
        points (:meth:`~ncindex.store.port.VectorStore.facet_counts`)."""
        return self._facet(field, flt, exact=exact)

    def _facet(self, field: str, flt: Filter | None, *, exact: bool) -> dict[str, int]:
        request = qe.FacetRequest(
            key=field, limit=FACET_LIMIT, exact=exact, filter=to_edge_filter(flt)
        )
        with self._call("facet"), self._reading() as shard:
            return {str(hit.value): hit.count for hit in shard.facet(request).hits}

    def flush(self) -> None:
        """Write every pending change to the shard's segments (the WAL already holds them)."""
        with self._lock, self._call("flush"):
            self._open_shard().flush()

    def optimize(self, sparse_threshold: int | None = None) -> bool:
        """Run Edge's segment optimisers (merging, HNSW building) now, blocking; Edge does not
        run them in the background. Returns whether anything was optimised. With
        ``sparse_threshold`` (points; :meth:`CollectionLayout.sparse_threshold`) the segments
        they build score a filtered BM25 search by scan below that many points: the shard is
        first loaded again (reads waiting) with a configuration of its BM25 vectors alone, that
        threshold in it (``EdgeShard.load(path, config)`` checks it against the saved one and
        saves it; every other saved parameter stays). Segments the optimisers leave as they
        are keep the threshold they were built with."""
        with self._lock, self._call("optimize"):
            shard = self._open_shard()
            if sparse_threshold is not None:
                shard = self._with_sparse_threshold(shard, sparse_threshold)
            return shard.optimize()

    def _with_sparse_threshold(self, shard: qe.EdgeShard, threshold: int) -> qe.EdgeShard:
        saved = json.loads((self.shard_path / _EDGE_CONFIG_FILE).read_text(encoding="utf-8"))
        if saved["sparse_vectors"][SPARSE].get("full_scan_threshold") == threshold:
            return shard
        # a configuration of the BM25 vectors alone: Edge keeps every other saved parameter
        config = qe.EdgeConfig(sparse_vectors=_sparse_vectors(threshold))
        with self._no_readers():
            shard.close()
            self._shard = None
            self._shard = qe.EdgeShard.load(str(self.shard_path), config)
        return self._shard

    def info(self) -> dict[str, int]:
        """The shard's size: ``points``, ``segments`` and ``indexed_vectors`` (vectors inside
        HNSW-indexed segments, dense and sparse counted apart)."""
        with self._call("info"), self._reading() as shard:
            info = shard.info()
        return {
            "points": info.points_count,
            "segments": info.segments_count,
            "indexed_vectors": info.indexed_vectors_count,
        }

    def optimise_aside(self, optimise: Callable[[Path, int], OptimisedCopy]) -> dict[str, float]:
        """Optimise a copy of the shard and swap it in, so the optimisers never run in this
        process (Edge's ``optimize``, ``load``, ``flush`` and ``close`` hold the Python GIL for
        their whole run, stopping every thread: ``optimize`` took 20 s for 20,000 points here)
        and searches and writes wait only briefly.

        1. Copy: under the write lock the shard is flushed and its files settled
           (:func:`~ncindex.store.shard_copy.settle`: each ``fsync``-ed, so a later write
           through a memory map stamps its file's modification time); the folder is copied
           beside it while writes go on; under the lock again it is flushed, the files
           stamped since copied again (:func:`~ncindex.store.shard_copy.catch_up`) and a
           journal of the doc keys written from then on started. Writes wait for the flushes,
           the locked ``fsync`` (little is left to write: the files were written back once
           before without the lock) and the files changed during the copy; searches never
           (copying releases the GIL). Without the settling, copying again what looks
           changed is unsound: a write through a map to a page already dirty leaves the
           modification time as it was (a copy so made failed to load: "Failed to decompress
           LZ4 value"). On a filesystem that does not stamp such writes (tmpfs), the whole
           copy is made under the lock.
        2. ``optimise(copy_path, sparse_threshold)`` without the lock returns the optimised
           copy, held open elsewhere (:func:`ncindex.store.edge_optimizer.optimise_in_child`:
           a child process that loads, optimises and keeps it), the segments it builds given
           the BM25 full-scan threshold of the shard's size
           (:meth:`CollectionLayout.sparse_threshold`, :meth:`optimize`). Searches and writes
           go on against the live shard.
        3. Replay: the journaled documents (their points as the live shard has them, or their
           deletion) are written into the copy in rounds without the lock, each round taking
           the documents written during the one before, until a round has at most
           ``_FINAL_REPLAY_DOCS``; that last round runs under the lock, the copy is closed by
           its holder, the live shard closed (reads wait for the swap: Edge reads some files
           by path), the folders swapped and the optimised shard loaded here. Closing the one and
           loading the other are the long GIL holds left in this process.

        Returns the seconds of each step (``copy_seconds``, ``optimise_seconds``,
        ``swap_seconds``), ``replayed`` documents (all rounds), ``locked_seconds`` (the longest
        time writes waited on this method; ``copy_locked_seconds`` the longest in step 1,
        ``swap_locked_seconds`` in the last), the steps of that last hold —
        ``swap_replay_seconds`` (the last replay round), ``copy_close_seconds`` (its holder
        closing the copy), ``live_close_seconds`` (the live shard's flush and close) and
        ``load_seconds`` (the optimised shard's load, which holds the GIL: searches stall for
        it too) — and
        ``replay_rounds``, ``caught_up_bytes`` (copied again under the lock in step 1; -1
        where the whole copy was). A write without a ``doc_key`` since step 1 cannot be
        replayed: the copy is dropped and ``StoreUnavailable`` raised, the live shard
        unchanged; so does a failing ``optimise`` (its exception propagates).
        """
        aside = self.root / f".{self.model_slug}.optimising"
        retired = self.root / f".{self.model_slug}.retired"
        for leftover in (aside, retired):
            shutil.rmtree(leftover, ignore_errors=True)
        locked: list[float] = []
        started = time.monotonic()
        try:
            threshold = self.layout.sparse_threshold(self.info()["points"])
            caught_up = self._copy_aside(aside, locked)
            copied = time.monotonic()
            held = optimise(aside, threshold)
            optimised = time.monotonic()
            try:
                rounds, replayed, swap = self._replay_and_swap(held, aside, retired, locked)
            except BaseException:
                held.abort()
                raise
        except BaseException:
            with self._lock:
                self._journal = None
            shutil.rmtree(aside, ignore_errors=True)
            raise
        return {
            "copy_seconds": copied - started,
            "optimise_seconds": optimised - copied,
            "swap_seconds": time.monotonic() - optimised,
            "replayed": float(replayed),
            "locked_seconds": max(locked),
            "copy_locked_seconds": max(locked[:-1]),
            "swap_locked_seconds": locked[-1],
            **swap,
            "replay_rounds": float(rounds),
            "caught_up_bytes": float(caught_up),
        }

    def _copy_aside(self, aside: Path, locked: list[float]) -> int:
        """Step 1 of :meth:`optimise_aside`: copy the shard to ``aside`` and start the
        journal, the write lock's spans appended to ``locked``. Where the filesystem stamps
        writes through memory maps (:func:`~ncindex.store.shard_copy.stamps_mapped_writes`)
        the files are written back first without the lock, then the lock is held twice
        briefly: to flush and settle the files, then, after a copy made while writes go on,
        to copy again the files changed meanwhile; elsewhere (tmpfs) for the whole copy.
        Returns the bytes the second hold copied (-1: one locked copy)."""
        if not shard_copy.stamps_mapped_writes(self.shard_path):
            with self._locked(locked), self._call("optimise_aside"):
                self._open_shard().flush()
                shutil.copytree(self.shard_path, aside, copy_function=shard_copy.copy_file)
                self._journal = set()
            return -1
        # written back once while writes go on, so that settling under the lock has little
        # left to write (after a bulk load gigabytes can wait in the page cache)
        shard_copy.write_back(self.shard_path)
        with self._locked(locked), self._call("optimise_aside"):
            self._open_shard().flush()
            since = shard_copy.settle(self.shard_path)
        shard_copy.copy_while_written(self.shard_path, aside)
        with self._locked(locked), self._call("optimise_aside"):
            self._open_shard().flush()
            caught_up = shard_copy.catch_up(self.shard_path, aside, since)
            self._journal = set()
        return caught_up

    @contextlib.contextmanager
    def _locked(self, spans: list[float]) -> Iterator[None]:
        """The write lock, its holding time (seconds) appended to ``spans``."""
        with self._lock:
            began = time.monotonic()
            try:
                yield
            finally:
                spans.append(time.monotonic() - began)

    def _replay_and_swap(
        self, held: OptimisedCopy, aside: Path, retired: Path, locked: list[float]
    ) -> tuple[int, int, dict[str, float]]:
        """Step 3 of :meth:`optimise_aside`: replay the journal into the optimised copy
        ``held`` (at ``aside``) in rounds, the last under the lock, and swap it in. Returns
        (rounds, documents replayed, the locked steps' seconds by name: ``swap_replay_seconds``,
        ``copy_close_seconds``, ``live_close_seconds``, ``load_seconds``; the wait for reads
        under way and the folders' renames are in none of them)."""
        rounds = replayed = 0
        while True:
            with self._lock:
                journal, self._journal = self._journal or set(), set()
            if len(journal) <= _FINAL_REPLAY_DOCS or rounds >= _MAX_REPLAY_ROUNDS:
                break
            replayed += self._replay(held, journal)
            rounds += 1
        held.flush()  # so that closing it under the lock writes only the last round
        steps: dict[str, float] = {}
        with self._locked(locked), self._call("optimise_aside"):
            began = time.monotonic()
            journal |= self._journal or set()
            self._journal = None
            replayed += self._replay(held, journal)
            began = _lap(steps, "swap_replay_seconds", began)
            held.close()
            _lap(steps, "copy_close_seconds", began)
            # Edge reads some files by path: no read may touch the live shard once its folder
            # is renamed, so reads wait (for the close and the load, GIL holders anyway)
            with self._no_readers():
                live, self._shard = self._open_shard(), None
                began = time.monotonic()
                live.close()
                _lap(steps, "live_close_seconds", began)
                self.shard_path.rename(retired)
                aside.rename(self.shard_path)
                began = time.monotonic()
                self._shard = self._load()
                _lap(steps, "load_seconds", began)
        shutil.rmtree(retired, ignore_errors=True)
        return rounds + 1, replayed, steps

    def _replay(self, held: OptimisedCopy, doc_keys: set[str]) -> int:
        """Write the documents ``doc_keys`` into ``held`` as the live shard holds them now
        (their points, or nothing when deleted), ``UPSERT_BATCH`` documents a call. Raises
        ``StoreUnavailable`` when a point without ``doc_key`` was written."""
        if _NO_DOC_KEY in doc_keys:
            raise StoreUnavailable("a point without doc_key was written: optimised copy dropped")
        for keys in batches(sorted(doc_keys)):
            flt = to_edge_filter(documents_filter(keys))
            points = [
                _record_of(r) for page in self._scroll_pages(flt, True, True, 256) for r in page
            ]
            held.replace_documents(keys, points)
        return len(doc_keys)

    def replace_documents(self, doc_keys: Sequence[str], points: Sequence[PointRecord]) -> None:
        """Delete every point of the documents ``doc_keys``, then write ``points`` (theirs as
        another copy of the shard holds them): how an optimised copy catches up."""
        flt = to_edge_filter(documents_filter(doc_keys))
        self._update("replace", qe.UpdateOperation.delete_points_by_filter(flt), doc_keys)
        if points:
            self.upsert(points)

    def close(self) -> None:
        """Flush and close the shard, releasing its folder; later calls raise
        ``StoreUnavailable``. Closing twice is harmless."""
        with self._lock:
            shard, self._shard = self._shard, None
            self._closed = True
            if self._preloading is not None:
                self._preloading.stop()
            if shard is not None:
                with self._call("close"):
                    shard.flush()
                    shard.close()


def _lap(steps: dict[str, float], name: str, began: float) -> float:
    """Record the seconds since ``began`` (``time.monotonic``) in ``steps`` as ``name``; return
    now, the next step's start."""
    now = time.monotonic()
    steps[name] = now - began
    return now


def _sparse_vectors(full_scan_threshold: int) -> dict[str, qe.EdgeSparseVectorParams]:
    """The shard's BM25 vectors (IDF applied by the engine), scanned under a filter that may
    let fewer than ``full_scan_threshold`` points through."""
    return {
        SPARSE: qe.EdgeSparseVectorParams(
            modifier=qe.Modifier.Idf, full_scan_threshold=full_scan_threshold
        )
    }


def _edge_config(layout: CollectionLayout, dense_dim: int) -> qe.EdgeConfig:
    """The shard configuration of ``layout`` (Edge saves it as ``edge_config.json``)."""
    quantization = (
        qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, always_ram=True)
        if layout.quantization == "int8"
        else None
    )
    return qe.EdgeConfig(
        vectors={
            DENSE: qe.EdgeVectorParams(
                size=dense_dim, distance=qe.Distance.Cosine, on_disk=layout.on_disk_vectors
            )
        },
        sparse_vectors=_sparse_vectors(layout.sparse_full_scan_threshold),
        on_disk_payload=layout.on_disk_payload,
        hnsw_config=qe.HnswIndexConfig(
            m=layout.hnsw_m,
            ef_construct=layout.hnsw_ef_construct,
            full_scan_threshold=layout.full_scan_threshold_kb,
            payload_m=layout.hnsw_payload_m,
        ),
        quantization_config=quantization,
        optimizers=qe.EdgeOptimizersConfig(
            indexing_threshold=layout.indexing_threshold_kb,
            max_segment_size=layout.max_segment_size_kb or None,
        ),
    )


def _vectors_of(point: PointRecord) -> dict[str, Any]:
    vectors: dict[str, Any] = {}
    if point.dense is not None:
        vectors[DENSE] = list(point.dense)
    if point.sparse is not None:
        vectors[SPARSE] = qe.SparseVector(list(point.sparse.indices), list(point.sparse.values))
    return vectors


def _record_of(record: Any) -> PointRecord:
    vectors = record.vector if isinstance(record.vector, dict) else {}
    dense = vectors.get(DENSE)
    sparse = vectors.get(SPARSE)
    return PointRecord(
        id=str(record.id),
        payload=dict(record.payload or {}),
        dense=[float(x) for x in dense] if isinstance(dense, list) else None,
        sparse=(
            SparseVector(
                indices=[int(i) for i in sparse.indices], values=[float(v) for v in sparse.values]
            )
            if isinstance(sparse, qe.SparseVector)
            else None
        ),
    )
