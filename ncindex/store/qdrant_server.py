"""The vector-store port on a Qdrant server through ``qdrant-client`` (DESIGN §8, §10).

One collection per embedding model, ``"{prefix}-{model_slug}"``. A store object reads and
writes its own model's collection. The model pointers (:class:`~ncindex.store.port.ModelPointers`)
are collection aliases: ``"{prefix}"`` names the live model's collection, and
``"{prefix}_standby"`` or ``"{prefix}_building"`` the second model's (an underscore cannot occur
in a collection name ``"{prefix}-{slug}"``); :meth:`QdrantServerStore.set_models` moves them
all in one atomic alias update.

The same class works on ``QdrantClient(":memory:")`` (qdrant-client's local mode, used by the
tests), which is not thread-safe: every call on a local client holds one lock per client.

qdrant-client, httpx and grpc exceptions are translated to
:class:`ncindex.errors.StoreUnavailable` here and nowhere else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import warnings
import weakref
from collections.abc import Collection, Iterator, Sequence
from typing import Any, cast

import grpc
import httpx
from qdrant_client import QdrantClient, models
from qdrant_client.common.client_exceptions import QdrantException
from qdrant_client.http.exceptions import ApiException, UnexpectedResponse
from qdrant_client.local.qdrant_local import QdrantLocal
from qdrant_client.models import (
    Filter,
    SearchParams,
)  # by name: in the store class, ``models`` is a method

from ncindex.errors import StoreUnavailable
from ncindex.store.layout import DEFAULT_LAYOUT, TENANT_FIELD, CollectionLayout, LayoutDrift
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
from ncindex.store.schema import (
    PAYLOAD_INDEXES,
    TEXT_ASCII_FOLDING,
    IndexKind,
    batches,
    collection_name,
    document_filter,
    rrf_parameters,
    text_index_differs,
)

ENGINE_ERRORS: tuple[type[Exception], ...] = (
    ApiException,  # UnexpectedResponse (an HTTP error status), ResponseHandlingException
    QdrantException,  # ResourceExhaustedResponse (429 with Retry-After)
    httpx.HTTPError,  # transport errors and timeouts of the REST client
    grpc.RpcError,  # every failure of the gRPC client
)
"""The exception types translated to ``StoreUnavailable`` at this boundary."""

LAYOUT_UPDATE_TIMEOUT_SECONDS = 300
"""How long :meth:`QdrantServerStore.apply_layout` lets Qdrant take to apply a collection
update (``PATCH /collections/{name}?timeout=``, also the client's wait for the answer): Qdrant
saves the parameters and recreates every shard's optimisers before it answers
(``recreate_optimizers_blocking`` → ``on_optimizer_config_update``, qdrant/qdrant
lib/storage/src/content_manager/toc/collection_meta_ops.rs). A bound chosen for an admin
command, not a measured duration."""


@dataclasses.dataclass(frozen=True)
class Optimization:
    """A Qdrant collection's rebuild state (:meth:`QdrantServerStore.optimization`):
    ``status`` ``"green"``/``"yellow"``/``"grey"``/``"red"``, the optimiser's ``error`` or
    ``None``, ``indexed`` vectors out of ``points``."""

    status: str
    error: str | None
    indexed: int
    points: int


_LOCAL_LOCKS: weakref.WeakKeyDictionary[QdrantClient, threading.RLock] = weakref.WeakKeyDictionary()
_LOCAL_LOCKS_GUARD = threading.Lock()


def _index_schema(
    field: str, kind: IndexKind, on_disk: bool
) -> models.KeywordIndexParams | models.IntegerIndexParams | models.TextIndexParams:
    """The ``field_schema`` of payload ``field`` (Qdrant's REST ``PUT
    /collections/{name}/index``): ``acl`` the tenant index, every index ``on_disk``
    (memory-mapped) when asked, else in RAM (Qdrant's default)."""
    if kind is IndexKind.KEYWORD:
        return models.KeywordIndexParams(
            type=models.KeywordIndexType.KEYWORD,
            is_tenant=True if field == TENANT_FIELD else None,
            on_disk=on_disk,
        )
    if kind is IndexKind.INTEGER:
        return models.IntegerIndexParams(
            type=models.IntegerIndexType.INTEGER, lookup=True, range=True, on_disk=on_disk
        )
    return models.TextIndexParams(
        type=models.TextIndexType.TEXT,
        tokenizer=models.TokenizerType.WORD,
        lowercase=True,
        ascii_folding=TEXT_ASCII_FOLDING,
        on_disk=on_disk,
    )


def _client_lock(client: QdrantClient) -> contextlib.AbstractContextManager[Any]:
    """One re-entrant lock per local-mode client (shared by every store on it); none for a
    remote client, which is safe to share between threads."""
    if not isinstance(getattr(client, "_client", None), QdrantLocal):
        return contextlib.nullcontext()
    with _LOCAL_LOCKS_GUARD:
        lock = _LOCAL_LOCKS.get(client)
        if lock is None:
            lock = _LOCAL_LOCKS[client] = threading.RLock()
        return lock


class QdrantServerStore:
    """:class:`ncindex.store.port.VectorStore` on a Qdrant server (or qdrant-client local mode).

    ``client`` is any ``QdrantClient`` (``QdrantClient(url=...)`` or ``QdrantClient(":memory:")``);
    the store closes it in :meth:`close` unless ``close_client=False``.
    ``collection_prefix`` names the alias (e.g. ``"ncindex"``) and ``model_slug`` the model
    (see :func:`ncindex.store.model_slug`); the collection is ``"{prefix}-{model_slug}"``.
    ``layout`` (default :data:`~ncindex.store.layout.DEFAULT_LAYOUT`) is given to a collection
    this store creates.
    Every method raises ``StoreUnavailable`` when Qdrant cannot be reached or fails.
    """

    def __init__(
        self,
        client: QdrantClient,
        collection_prefix: str,
        model_slug: str,
        *,
        close_client: bool = True,
        layout: CollectionLayout = DEFAULT_LAYOUT,
    ) -> None:
        self._client = client
        self.layout = layout
        self.alias = collection_prefix
        self.model_slug = model_slug
        self.collection = collection_name(collection_prefix, model_slug)
        self._close_client = close_client
        self._lock = _client_lock(client)
        self._local = isinstance(getattr(client, "_client", None), QdrantLocal)

    def __repr__(self) -> str:
        return f"QdrantServerStore(collection={self.collection!r}, alias={self.alias!r})"

    @contextlib.contextmanager
    def _call(self, what: str) -> Iterator[None]:
        """Hold the client lock (local mode) and translate engine errors."""
        try:
            with self._lock:
                yield
        except ENGINE_ERRORS as exc:
            raise StoreUnavailable(f"qdrant {what} on {self.collection!r} failed: {exc}") from exc

    # --- collection and alias -----------------------------------------------------------------

    def ensure_collection(self, dense_dim: int, on_rebuild: RebuildHook | None = None) -> None:
        """Create the collection (dense ``"dense"``: ``dense_dim`` floats, cosine; sparse
        ``"bm25"`` with the IDF modifier; shards, replicas, HNSW, quantisation and disk use as
        :attr:`layout` says), every payload index of
        :data:`ncindex.store.schema.PAYLOAD_INDEXES` (``acl`` as the tenant index) and the
        alias (pointing here) if missing. An index of other parameters in a collection
        holding points is queued, not waited for (below), and told to ``on_rebuild`` as it
        is queued (:class:`IndexRebuild`, ``waits`` false: Qdrant does not say when it ends).

        Idempotent. Raises ``ValueError`` if the collection exists with another dense dimension.
        """
        with self._call("ensure_collection"):
            created = False
            if not self._client.collection_exists(self.collection):
                try:
                    self._client.create_collection(
                        self.collection, **_creation_parameters(self.layout, dense_dim)
                    )
                    created = True
                except UnexpectedResponse:
                    # another process starting at the same moment may have created it
                    if not self._client.collection_exists(self.collection):
                        raise
            info = self._client.get_collection(self.collection)
            vectors = info.config.params.vectors
            existing_dim = vectors[DENSE].size if isinstance(vectors, dict) else None
            if existing_dim != dense_dim:
                raise ValueError(
                    f"collection {self.collection!r} has dense dimension {existing_dim}, "
                    f"not {dense_dim}"
                )
            have = info.payload_schema or {}
            with warnings.catch_warnings():
                # local mode warns that payload indexes have no effect there; that is expected
                warnings.filterwarnings("ignore", "Payload indexes have no effect", UserWarning)
                for field, kind in PAYLOAD_INDEXES.items():
                    # an index of other parameters is made again in place (Qdrant's PUT
                    # /collections/{name}/index replaces it, as apply_layout relies on).
                    # Waited for only in a collection made here (empty): in one that holds
                    # points Qdrant builds the index from all of them, which outlasts the
                    # client's timeout (qdrant-client's REST default is httpx's 5 s), and
                    # every pod that rolled out (helm upgrade) failed its searches and tasks
                    # with StoreUnavailable meanwhile. Qdrant applies it in order with the
                    # shard's other updates; a later PUT of the same parameters finds it built
                    # (qdrant/qdrant lib/segment StructPayloadIndex::build_index, AlreadyBuilt)
                    differs = field in have and text_index_differs(
                        kind, getattr(have[field].params, "ascii_folding", None)
                    )
                    if differs and info.points_count and on_rebuild is not None:
                        on_rebuild(
                            IndexRebuild(self.collection, field, info.points_count, False), False
                        )
                    if field not in have or differs:
                        self._client.create_payload_index(
                            self.collection,
                            field,
                            field_schema=_index_schema(
                                field, kind, self.layout.on_disk_payload_index
                            ),
                            wait=created,
                        )
            if self.models().active is None:
                try:
                    self._set_aliases({"active": self.model_slug})
                except UnexpectedResponse:
                    if self.models().active is None:  # not a concurrent creation
                        raise

    def _alias_names(self) -> dict[str, str]:
        return {
            "active": self.alias,
            "standby": f"{self.alias}_standby",
            "building": f"{self.alias}_building",
        }

    def models(self) -> ModelPointers:
        """The model pointers read from the aliases (one ``get_aliases`` request); an alias
        naming a collection that does not follow ``"{prefix}-{slug}"`` counts as unset."""
        with self._call("get_aliases"):
            targets = {a.alias_name: a.collection_name for a in self._client.get_aliases().aliases}
        prefix = f"{self.alias}-"
        found: dict[str, str] = {}
        for role, alias in self._alias_names().items():
            target = targets.get(alias)
            if target is not None and target.startswith(prefix):
                found[role] = target[len(prefix) :]
        return ModelPointers(**found)

    def set_models(self, pointers: ModelPointers) -> None:
        """Move every model alias in one ``update_collection_aliases`` request (atomic on the
        server). Raises ``ValueError`` if a model it names has no collection."""
        wanted = {
            "active": pointers.active,
            "standby": pointers.standby,
            "building": pointers.building,
        }
        with self._call("set_models"):
            for slug in wanted.values():
                if slug and not self._client.collection_exists(collection_name(self.alias, slug)):
                    raise ValueError(
                        f"collection {collection_name(self.alias, slug)!r} does not exist"
                    )
            self._set_aliases(wanted)

    def use_model(self, model_slug: str) -> QdrantServerStore:
        """A store for another model's collection on the same client (which it does not close);
        call its ``ensure_collection`` to build it."""
        return QdrantServerStore(
            self._client, self.alias, model_slug, close_client=False, layout=self.layout
        )

    def layout_drift(self) -> list[LayoutDrift]:
        """How this store's collection differs from :attr:`layout` (:func:`layout_drift`, one
        ``GET /collections/{name}``); ``[]`` when it matches or does not exist yet (it will be
        created with the layout). Raises ``StoreUnavailable``."""
        with self._call("get_collection"):
            if not self._client.collection_exists(self.collection):
                return []
            info = self._client.get_collection(self.collection)
        return layout_drift(self.layout, info)

    def apply_layout(self) -> list[LayoutDrift]:
        """Change this store's collection towards :attr:`layout` where Qdrant can change it in
        place, and return every difference found (:meth:`layout_drift`), those it could not
        apply (``in_place`` false: the shard number) included.

        One ``PATCH /collections/{name}`` (qdrant-client's ``update_collection``) carries the
        differing collection parameters (replication and write consistency factors,
        ``on_disk_payload``), HNSW, quantisation, the dense vectors' ``on_disk`` (and their own
        HNSW or quantisation where the collection has them), the optimisers' thresholds and
        the BM25 full-scan threshold; Qdrant saves them and recreates its optimisers, which
        rebuild each segment whose HNSW parameters (``HnswConfig::mismatch_requires_rebuild``,
        lib/segment/src/types.rs: ``full_scan_threshold`` included), quantisation or storage
        differ (the BM25 full-scan threshold reaches new segments only)
        (``update_collection``, qdrant/qdrant
        lib/storage/src/content_manager/toc/collection_meta_ops.rs;
        ``ConfigMismatchOptimizer``, lib/shard/src/optimizers/config_mismatch_optimizer.rs).
        A payload index whose ``on_disk`` or ``is_tenant`` differs is sent again
        (``PUT /collections/{name}/index``): a segment rebuilds a field's index when its
        schema differs (``StructPayloadIndex::build_index``,
        lib/segment/src/index/struct_payload_index.rs). Nothing adds replicas of the
        existing shards: a raised replication factor is only recorded
        (``Collection::update_params_from_diff``, lib/collection/src/collection/collection_ops.rs;
        qdrant/qdrant#6027).

        Neither is waited for to the end: the index is queued (``wait=false``; Qdrant builds
        it in order with the shard's other updates, as :meth:`ensure_collection` does in a
        collection holding points), and the ``PATCH`` is given
        :data:`LAYOUT_UPDATE_TIMEOUT_SECONDS` (qdrant-client sends it as ``?timeout=`` and
        waits as long for the answer, instead of httpx's 5 s default, which a large
        collection outlasted although Qdrant went on). Follow the rebuild with
        :meth:`optimization`. Raises ``StoreUnavailable``."""
        with self._call("update_collection"):
            if not self._client.collection_exists(self.collection):
                return []
            info = self._client.get_collection(self.collection)
            drift = layout_drift(self.layout, info)
            update = _update_parameters(self.layout, info, drift)
            if update:
                self._client.update_collection(
                    self.collection, **update, timeout=LAYOUT_UPDATE_TIMEOUT_SECONDS
                )
            schema = info.payload_schema or {}
            for field, kind in PAYLOAD_INDEXES.items():
                if field in schema and _index_differs(self.layout, field, schema[field]):
                    self._client.create_payload_index(
                        self.collection,
                        field,
                        field_schema=_index_schema(field, kind, self.layout.on_disk_payload_index),
                        wait=False,
                    )
        return drift

    def optimization(self) -> Optimization:
        """Where Qdrant is in rebuilding this collection (one ``GET /collections/{name}``):
        its ``status`` (``green`` when nothing is pending; ``yellow`` while optimising;
        ``grey`` when optimisations wait to be triggered; ``red`` on an optimiser error,
        qdrant/qdrant lib/collection/src/operations/types.rs ``CollectionStatus``), the
        optimiser's error if any, and how many of its points' vectors are in an HNSW index
        (``indexed_vectors_count``, an approximation Qdrant documents as such) out of
        ``points_count``. Raises ``StoreUnavailable``."""
        with self._call("get_collection"):
            info = self._client.get_collection(self.collection)
        error = info.optimizer_status
        return Optimization(
            status=str(getattr(info.status, "value", info.status)),
            error=None if isinstance(error, models.OptimizersStatusOneOf) else str(error.error),
            indexed=int(info.indexed_vectors_count or 0),
            points=int(info.points_count or 0),
        )

    def drop_model(self, model_slug: str) -> None:
        """Delete ``model_slug``'s collection. Raises ``ValueError`` if the pointers name it."""
        pointers = self.models()
        if model_slug in (pointers.active, pointers.mirror):
            raise ValueError(f"model {model_slug!r} is in use: {pointers}")
        with self._call("delete_collection"):
            self._client.delete_collection(collection_name(self.alias, model_slug))

    def _set_aliases(self, wanted: dict[str, str | None]) -> None:
        present = {a.alias_name for a in self._client.get_aliases().aliases}
        ops: list[models.CreateAliasOperation | models.DeleteAliasOperation] = []
        for role, alias in self._alias_names().items():
            if alias in present:
                ops.append(
                    models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias))
                )
            slug = wanted.get(role)
            if slug:
                target = collection_name(self.alias, slug)
                ops.append(
                    models.CreateAliasOperation(
                        create_alias=models.CreateAlias(collection_name=target, alias_name=alias)
                    )
                )
        self._client.update_collection_aliases(change_aliases_operations=ops)

    # --- writes ---------------------------------------------------------------------------------

    def upsert(self, points: Sequence[PointRecord]) -> None:
        """Insert or replace ``points`` by id, in batches of ``UPSERT_BATCH``, waiting for each.

        A ``None`` vector is left out of the point.
        """
        for batch in batches(points):
            structs = [
                models.PointStruct(id=p.id, vector=_vectors_of(p), payload=p.payload) for p in batch
            ]
            with self._call("upsert"):
                self._client.upsert(self.collection, points=structs, wait=True)

    def delete_document(self, doc_key: str, keep: Collection[str] | None = None) -> None:
        """Delete the points of ``doc_key`` (all but the ids in ``keep`` if given)."""
        selector = models.FilterSelector(filter=document_filter(doc_key, keep))
        with self._call("delete"):
            self._client.delete(self.collection, points_selector=selector, wait=True)

    def set_payload(self, doc_key: str, payload: dict[str, Any]) -> None:
        """Merge ``payload``'s top-level keys into every point of ``doc_key``."""
        with self._call("set_payload"):
            self._client.set_payload(
                self.collection, payload=payload, points=document_filter(doc_key), wait=True
            )

    # --- reads ----------------------------------------------------------------------------------

    def document_points(self, doc_key: str, *, with_vectors: bool = False) -> list[PointRecord]:
        """Every point of ``doc_key`` ordered by payload ``chunk_index``; vectors are ``None``
        unless ``with_vectors`` (the dense one comes back normalised: cosine storage)."""
        records: list[PointRecord] = []
        offset: models.ExtendedPointId | None = None
        while True:
            with self._call("scroll"):
                page, offset = self._client.scroll(
                    self.collection,
                    scroll_filter=document_filter(doc_key),
                    limit=256,
                    offset=offset,
                    with_payload=True,
                    with_vectors=with_vectors,
                )
            records.extend(_record_of(r) for r in page)
            if offset is None:
                break
        records.sort(key=lambda r: r.payload.get("chunk_index", 0))
        return records

    def scroll(
        self, flt: Filter | None, fields: Sequence[str], page_size: int = 256
    ) -> Iterator[dict[str, Any]]:
        """Yield the payload of every point matching ``flt``, holding only ``fields`` (a field
        a point lacks is absent), fetching ``page_size`` points per request."""
        selector: bool | list[str] = list(fields) if fields else False
        offset: models.ExtendedPointId | None = None
        while True:
            with self._call("scroll"):
                page, offset = self._client.scroll(
                    self.collection,
                    scroll_filter=flt,
                    limit=page_size,
                    offset=offset,
                    with_payload=selector,
                    with_vectors=False,
                )
            for record in page:
                yield dict(record.payload or {})
            if offset is None:
                return

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
        """One ``query_points``: a dense ``Prefetch`` of ``dense_prefetch_limit`` candidates
        (``None`` ⇒ ``prefetch_limit``) and a sparse one of ``prefetch_limit``, each carrying
        ``flt``, fused by ``fusion`` (an ``RrfQuery`` with ``rrf_k``,
        default :data:`~ncindex.store.schema.RRF_K`, and optional ``(dense, sparse)``
        ``weights``; or DBSF), best first; the ``limit`` best hits, with payload (ties in an
        order drawn anew on each call: :meth:`~ncindex.store.port.VectorStore.query`). A
        ``None`` vector drops its branch (the other is still fused, so scores keep the fusion's
        scale). The dense prefetch carries :meth:`_dense_params` (``exact``: every matching
        point). Hits carry the payload's ``fields`` (``None``: all of it).

        Raises ``ValueError`` if both vectors are ``None`` or for bad fusion parameters.
        """
        k, branch_weights = rrf_parameters(
            fusion is Fusion.RRF, rrf_k, weights, (dense is not None, sparse is not None)
        )
        prefetch: list[models.Prefetch] = []
        if dense is not None:
            depth = prefetch_limit if dense_prefetch_limit is None else dense_prefetch_limit
            prefetch.append(
                models.Prefetch(
                    query=dense,
                    using=DENSE,
                    filter=flt,
                    limit=depth,
                    params=self._dense_params(exact, depth),
                )
            )
        if sparse is not None:
            prefetch.append(
                models.Prefetch(
                    query=models.SparseVector(indices=sparse.indices, values=sparse.values),
                    using=SPARSE,
                    filter=flt,
                    limit=prefetch_limit,
                )
            )
        if not prefetch:
            raise ValueError("query needs a dense or a sparse vector")
        with self._call("query_points"):
            response = self._client.query_points(
                self.collection,
                prefetch=prefetch,
                query=(
                    models.RrfQuery(rrf=models.Rrf(k=k, weights=branch_weights))
                    if fusion is Fusion.RRF
                    else models.FusionQuery(fusion=models.Fusion.DBSF)
                ),
                limit=limit,
                with_payload=payload_selector(fields),
                with_vectors=False,
            )
        return [Hit(id=str(p.id), score=p.score, payload=p.payload or {}) for p in response.points]

    def retrieve(
        self, ids: Sequence[str], fields: Sequence[str] | None = None
    ) -> dict[str, dict[str, Any]]:
        """The payload (``fields``; ``None``: whole) of each existing point of ``ids``, by id
        (``retrieve``)."""
        if not ids:
            return {}
        with self._call("retrieve"):
            records = self._client.retrieve(
                self.collection,
                ids=list(ids),
                with_payload=payload_selector(fields),
                with_vectors=False,
            )
        return {str(r.id): r.payload or {} for r in records}

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
        """One ``query_points`` of one vector, no fusion: raw cosine or BM25 (IDF) scores,
        best first, payload ``fields`` only; the dense one with :meth:`_dense_params`.
        ``ValueError`` unless exactly one vector is given."""
        query: list[float] | models.SparseVector
        if dense is not None and sparse is None:
            query = dense
        elif sparse is not None and dense is None:
            query = models.SparseVector(indices=sparse.indices, values=sparse.values)
        else:
            raise ValueError("branch needs exactly one of a dense and a sparse vector")
        with self._call("query_points"):
            response = self._client.query_points(
                self.collection,
                query=query,
                using=DENSE if dense is not None else SPARSE,
                query_filter=flt,
                search_params=self._dense_params(exact, limit) if dense is not None else None,
                limit=limit,
                with_payload=payload_selector(fields),
                with_vectors=False,
            )
        return [Hit(id=str(p.id), score=p.score, payload=p.payload or {}) for p in response.points]

    def _dense_params(self, exact: bool, limit: int) -> SearchParams | None:
        """The layout's dense search parameters
        (:meth:`~ncindex.store.layout.CollectionLayout.dense_search`); ``None`` for
        qdrant-client's local mode, which always searches exactly (and warns that parameters
        have no effect)."""
        return None if self._local else self.layout.dense_search(exact, limit)

    def count(self, flt: Filter | None = None, *, exact: bool = True) -> int:
        """Number of points matching ``flt`` (all points for ``None``), exact or estimated
        (:meth:`~ncindex.store.port.VectorStore.count`)."""
        with self._call("count"):
            return self._client.count(self.collection, count_filter=flt, exact=exact).count

    def facet_values(self, field: str, flt: Filter | None) -> set[str]:
        """Every value of the keyword-indexed ``field`` held by a point matching ``flt``
        (:meth:`~ncindex.store.port.VectorStore.facet_values`; Qdrant's
        ``POST /collections/{name}/facet``, approximate counts, asked
        :data:`~ncindex.store.port.FACET_LIMIT` deep so that it never samples)."""
        return set(self._facet(field, flt, exact=False))

    def facet_counts(self, field: str, flt: Filter | None, *, exact: bool = True) -> dict[str, int]:
        """Each value of ``field`` held by a point matching ``flt`` with its count of such
        points (:meth:`~ncindex.store.port.VectorStore.facet_counts`)."""
        return self._facet(field, flt, exact=exact)

    def _facet(self, field: str, flt: Filter | None, *, exact: bool) -> dict[str, int]:
        with self._call("facet"):
            answer = self._client.facet(
                self.collection, key=field, facet_filter=flt, limit=FACET_LIMIT, exact=exact
            )
        return {str(hit.value): hit.count for hit in answer.hits}

    def close(self) -> None:
        """Close the client if this store owns it (``close_client=True``)."""
        if self._close_client:
            with self._call("close"):
                self._client.close()


def _creation_parameters(layout: CollectionLayout, dense_dim: int) -> dict[str, Any]:
    """The keyword arguments of ``QdrantClient.create_collection`` for ``layout`` (Qdrant's
    REST ``PUT /collections/{name}`` body: ``vectors``, ``sparse_vectors``, ``shard_number``,
    ``replication_factor``, ``write_consistency_factor``, ``on_disk_payload``, ``hnsw_config``,
    ``quantization_config``, ``optimizers_config``)."""
    quantization = (
        models.ScalarQuantization(
            scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, always_ram=True)
        )
        if layout.quantization == "int8"
        else None
    )
    return {
        "vectors_config": {
            DENSE: models.VectorParams(
                size=dense_dim, distance=models.Distance.COSINE, on_disk=layout.on_disk_vectors
            )
        },
        "sparse_vectors_config": {
            SPARSE: models.SparseVectorParams(
                modifier=models.Modifier.IDF,
                index=models.SparseIndexParams(
                    full_scan_threshold=layout.sparse_full_scan_threshold
                ),
            )
        },
        "shard_number": layout.shard_number,
        "replication_factor": layout.replication_factor,
        "write_consistency_factor": layout.write_consistency_factor,
        "on_disk_payload": layout.on_disk_payload,
        "hnsw_config": models.HnswConfigDiff(
            m=layout.hnsw_m,
            ef_construct=layout.hnsw_ef_construct,
            payload_m=layout.hnsw_payload_m,
            full_scan_threshold=layout.full_scan_threshold_kb,
        ),
        "quantization_config": quantization,
        "optimizers_config": models.OptimizersConfigDiff(
            indexing_threshold=layout.indexing_threshold_kb,
            max_segment_size=layout.max_segment_size_kb or None,
        ),
    }


#: What applying a difference does, by kind (:class:`~ncindex.store.layout.LayoutDrift` ``how``).
_REBUILDS_SEGMENTS = (
    "`ncindex reindex --layout` sets it in place; Qdrant's optimisers then rebuild, in the "
    "background, each segment built otherwise"
)
_NEW_SEGMENTS = (
    "`ncindex reindex --layout` sets it in place; segments Qdrant builds from then on take it"
)
_SETS = "`ncindex reindex --layout` sets it in place"
_REPLICAS = (
    "`ncindex reindex --layout` records it, but Qdrant adds no replica of the existing shards "
    "(nor drops one; qdrant/qdrant#6027): copy each shard to a peer without it (POST "
    "/collections/{name}/cluster, replicate_shard; drop_replica to lower it), or rebuild the "
    'collection (README "Collection layout")'
)
_INDEX_AGAIN = (
    "`ncindex reindex --layout` sends the index again; Qdrant rebuilds it with the new schema"
)
_NO_DEFAULT_AGAIN = (
    "Qdrant's update cannot return it to its default (it leaves what is unset as it is): "
    "set a size, or only a new collection takes the default"
)
_REBUILD_ONLY = (
    "Qdrant cannot change it on an existing collection (its update has no shard number): "
    'only a new collection takes it (README "Collection layout")'
)


def _text(value: object) -> str:
    """A value as the settings write it (``true``/``false`` for booleans)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _quantization_text(config: Any) -> str:
    """``"int8"`` (scalar int8 kept in RAM, what ncindex sets), ``"none"``, or what else the
    collection has (``"scalar int8, always_ram false"``, ``"product"``, ``"binary"``, ...)."""
    if config is None:
        return "none"
    if isinstance(config, models.ScalarQuantization):
        scalar = config.scalar
        if scalar.type == models.ScalarType.INT8 and scalar.always_ram:
            return "int8"
        return f"scalar {scalar.type.value}, always_ram {_text(bool(scalar.always_ram))}"
    return type(config).__name__.removesuffix("Quantization").lower()


def _dense_params(info: models.CollectionInfo) -> models.VectorParams | None:
    vectors = info.config.params.vectors
    return vectors.get(DENSE) if isinstance(vectors, dict) else None


def _hnsw_live(info: models.CollectionInfo, name: str) -> Any:
    """The HNSW parameter ``name`` the dense vectors use: their own, else the collection's."""
    dense = _dense_params(info)
    own = getattr(dense.hnsw_config, name) if dense and dense.hnsw_config else None
    return own if own is not None else getattr(info.config.hnsw_config, name)


def _on_disk(live: models.PayloadIndexInfo) -> bool:
    """Whether an existing payload index is on disk (unset: in RAM, Qdrant's default)."""
    return bool(getattr(live.params, "on_disk", None))


def _index_differs(layout: CollectionLayout, field: str, live: models.PayloadIndexInfo) -> bool:
    """Whether the existing index of payload ``field`` differs from the layout's in ``on_disk``
    or (``acl``) ``is_tenant`` (unset counts as false, Qdrant's default)."""
    tenant = bool(getattr(live.params, "is_tenant", None))
    return _on_disk(live) != layout.on_disk_payload_index or tenant != (field == TENANT_FIELD)


def layout_drift(layout: CollectionLayout, info: models.CollectionInfo) -> list[LayoutDrift]:
    """Every parameter of ``layout`` in which the collection ``info`` (``GET
    /collections/{name}``, qdrant-client's ``get_collection``) differs, in the settings'
    order: the shard number (only a new collection takes it), replication and write
    consistency factors, ``on_disk_payload``, the dense vectors' ``on_disk``, HNSW (``m``,
    ``ef_construct``, ``payload_m``, ``full_scan_threshold``: the vectors' own where they
    have them, else the collection's), quantisation, the optimisers' indexing threshold and
    (when the layout sets one) max segment size, the BM25 full-scan threshold, and the
    payload indexes' ``on_disk`` and the ``acl`` tenant index. A payload index not there yet
    is no difference (``ensure_collection`` creates it), nor a parameter the answer lacks
    (qdrant-client's local mode keeps few: :mod:`tests.store.test_layout`)."""
    config = info.config
    params = config.params
    dense = _dense_params(info)
    sparse = (params.sparse_vectors or {}).get(SPARSE)
    quantization = (dense.quantization_config if dense else None) or config.quantization_config
    found: list[tuple[str, Any, Any, str]] = [
        ("SHARD_NUMBER", params.shard_number, layout.shard_number, _REBUILD_ONLY),
        ("REPLICATION_FACTOR", params.replication_factor, layout.replication_factor, _REPLICAS),
        (
            "WRITE_CONSISTENCY_FACTOR",
            params.write_consistency_factor,
            layout.write_consistency_factor,
            _SETS,
        ),
        ("ON_DISK_PAYLOAD", params.on_disk_payload, layout.on_disk_payload, _REBUILDS_SEGMENTS),
        (
            "ON_DISK_VECTORS",
            bool(dense.on_disk) if dense else None,
            layout.on_disk_vectors,
            _REBUILDS_SEGMENTS,
        ),
        ("HNSW_M", _hnsw_live(info, "m"), layout.hnsw_m, _REBUILDS_SEGMENTS),
        (
            "HNSW_EF_CONSTRUCT",
            _hnsw_live(info, "ef_construct"),
            layout.hnsw_ef_construct,
            _REBUILDS_SEGMENTS,
        ),
        (
            "HNSW_PAYLOAD_M",
            _hnsw_live(info, "payload_m"),
            layout.hnsw_payload_m,
            _REBUILDS_SEGMENTS,
        ),
        (
            "FULL_SCAN_THRESHOLD_KB",
            _hnsw_live(info, "full_scan_threshold"),
            layout.full_scan_threshold_kb,
            _REBUILDS_SEGMENTS,
        ),
        (
            "QUANTIZATION",
            _quantization_text(quantization),
            layout.quantization,
            _REBUILDS_SEGMENTS,
        ),
        (
            "INDEXING_THRESHOLD_KB",
            config.optimizer_config.indexing_threshold,
            layout.indexing_threshold_kb,
            _SETS,
        ),
        (
            "SPARSE_FULL_SCAN_THRESHOLD",
            sparse.index.full_scan_threshold if sparse and sparse.index else None,
            layout.sparse_full_scan_threshold,
            _NEW_SEGMENTS,
        ),
    ]
    drift = [
        LayoutDrift(f"NCINDEX_QDRANT_{name}", _text(live), _text(wanted), how != _REBUILD_ONLY, how)
        for name, live, wanted, how in found
        if live is not None and _text(live) != _text(wanted)
    ]
    segment = config.optimizer_config.max_segment_size  # None: Qdrant's default
    if (segment or 0) != layout.max_segment_size_kb:
        drift.append(
            LayoutDrift(
                "NCINDEX_QDRANT_MAX_SEGMENT_SIZE_KB",
                _text(segment or "0 (Qdrant's default)"),
                _text(layout.max_segment_size_kb or "0 (Qdrant's default)"),
                bool(layout.max_segment_size_kb),
                _SETS if layout.max_segment_size_kb else _NO_DEFAULT_AGAIN,
            )
        )
    schema = info.payload_schema or {}
    disk = layout.on_disk_payload_index
    other_disk = sorted(f for f in PAYLOAD_INDEXES if f in schema and _on_disk(schema[f]) != disk)
    if other_disk:
        drift.append(
            LayoutDrift(
                "NCINDEX_QDRANT_ON_DISK_PAYLOAD_INDEX",
                f"{_text(not disk)} ({', '.join(other_disk)})",
                _text(disk),
                True,
                _INDEX_AGAIN,
            )
        )
    tenant = schema.get(TENANT_FIELD)
    if tenant is not None and not getattr(tenant.params, "is_tenant", None):
        setting = f"the {TENANT_FIELD} index's is_tenant (set by ncindex, no setting)"
        drift.append(LayoutDrift(setting, "false", "true", True, _INDEX_AGAIN))
    return drift


def _update_parameters(
    layout: CollectionLayout, info: models.CollectionInfo, drift: list[LayoutDrift]
) -> dict[str, Any]:
    """The keyword arguments of ``QdrantClient.update_collection`` (``PATCH
    /collections/{name}``) that apply the in-place differences of ``drift`` (empty when
    there are none). The dense vectors' own HNSW or quantisation, where the collection has
    them, are changed with the collection's (they would override it)."""
    differs = {d.setting.removeprefix("NCINDEX_QDRANT_") for d in drift if d.in_place}
    update: dict[str, Any] = {}
    collection = {
        "replication_factor": layout.replication_factor,
        "write_consistency_factor": layout.write_consistency_factor,
        "on_disk_payload": layout.on_disk_payload,
    }
    chosen = {k: v for k, v in collection.items() if k.upper() in differs}
    if chosen:
        update["collection_params"] = models.CollectionParamsDiff(**chosen)
    hnsw = {
        "m": ("HNSW_M", layout.hnsw_m),
        "ef_construct": ("HNSW_EF_CONSTRUCT", layout.hnsw_ef_construct),
        "payload_m": ("HNSW_PAYLOAD_M", layout.hnsw_payload_m),
        "full_scan_threshold": ("FULL_SCAN_THRESHOLD_KB", layout.full_scan_threshold_kb),
    }
    hnsw_diff = {k: v for k, (name, v) in hnsw.items() if name in differs}
    if hnsw_diff:
        update["hnsw_config"] = models.HnswConfigDiff(**hnsw_diff)
    quantization: models.ScalarQuantization | models.Disabled | None = None
    if "QUANTIZATION" in differs:
        quantization = (
            _creation_parameters(layout, 1)["quantization_config"] or models.Disabled.DISABLED
        )
        update["quantization_config"] = quantization
    dense = _dense_params(info)
    vector: dict[str, Any] = {}
    if "ON_DISK_VECTORS" in differs:
        vector["on_disk"] = layout.on_disk_vectors
    if hnsw_diff and dense is not None and dense.hnsw_config is not None:
        vector["hnsw_config"] = models.HnswConfigDiff(**hnsw_diff)
    if quantization is not None and dense is not None and dense.quantization_config is not None:
        vector["quantization_config"] = quantization
    if vector:
        update["vectors_config"] = {DENSE: models.VectorParamsDiff(**vector)}
    optimizers = {
        "indexing_threshold": ("INDEXING_THRESHOLD_KB", layout.indexing_threshold_kb),
        "max_segment_size": ("MAX_SEGMENT_SIZE_KB", layout.max_segment_size_kb),
    }
    optimizers_diff = {k: v for k, (name, v) in optimizers.items() if name in differs}
    if optimizers_diff:
        update["optimizers_config"] = models.OptimizersConfigDiff(**optimizers_diff)
    if "SPARSE_FULL_SCAN_THRESHOLD" in differs:
        update["sparse_vectors_config"] = _creation_parameters(layout, 1)["sparse_vectors_config"]
    return update


def _vectors_of(point: PointRecord) -> dict[str, Any]:
    vectors: dict[str, Any] = {}
    if point.dense is not None:
        vectors[DENSE] = point.dense
    if point.sparse is not None:
        vectors[SPARSE] = models.SparseVector(
            indices=point.sparse.indices, values=point.sparse.values
        )
    return vectors


def _record_of(record: models.Record) -> PointRecord:
    vectors = record.vector if isinstance(record.vector, dict) else {}
    dense = vectors.get(DENSE)
    sparse = vectors.get(SPARSE)
    return PointRecord(
        id=str(record.id),
        payload=dict(record.payload or {}),
        # DENSE is a single vector (schema), never a multivector's list of lists
        dense=[float(x) for x in cast("list[float]", dense)] if isinstance(dense, list) else None,
        sparse=(
            SparseVector(
                indices=[int(i) for i in sparse.indices], values=[float(v) for v in sparse.values]
            )
            if isinstance(sparse, models.SparseVector)
            else None
        ),
    )
