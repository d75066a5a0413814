"""The vector-store port: the one interface the pipeline and the search path use (DESIGN §10).

Two engines implement it — the Qdrant server through ``qdrant-client``
(:mod:`ncindex.store.qdrant_server`) and the embedded Qdrant Edge
(:mod:`ncindex.store.qdrant_edge`) — and one contract suite (``tests/store``) runs against both.

Each point has a named dense vector ``"dense"`` (cosine) and a named sparse vector ``"bm25"``
(with Qdrant's IDF modifier). Filters are ``qdrant_client.models.Filter`` objects built by
:mod:`ncindex.search.filters`; the Edge engine translates them to its own classes.
Engine failures are raised as :class:`ncindex.errors.StoreUnavailable`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from qdrant_client import models

DENSE = "dense"
SPARSE = "bm25"

FACET_LIMIT = 2**31 - 1
"""The ``limit`` of every facet request (values): so large that Qdrant never samples. Its
approximate facet samples a segment's values instead of reading them all once the segment's
index holds more distinct values than ``max(1000, 10 × limit)`` — across every point, not
only the filter's — and sampling stops after 4,096 draws that bring nothing new, so a rare
value can be missed, and differently on each call (``SegmentReadView::approximate_facet``,
qdrant/qdrant lib/segment/src/segment/read_view/facet.rs, which qdrant-edge-py 0.9 runs). No
segment holds 2³¹ distinct values, so every value is read; asking that many costs nothing
more (the top ``limit`` is kept by collecting at most what there is, ``k_largest``: on a
server ``LocalShard::approx_facet``, lib/collection/src/shards/local_shard/facet.rs; on Edge
``FacetResponse::top_hits``, lib/segment/src/data_types/facets.rs). A Qdrant server whose
collection sets strict mode's ``max_query_limit`` refuses such a request (its facet
verification, lib/collection/src/operations/verification/facet.rs): ``StoreUnavailable``."""


class Fusion(StrEnum):
    """How the dense and sparse candidate lists are fused: reciprocal rank or
    distribution-based score fusion (Qdrant's ``Fusion.RRF`` / ``Fusion.DBSF``)."""

    RRF = "rrf"
    DBSF = "dbsf"


@dataclass(frozen=True, slots=True)
class SparseVector:
    """A sparse vector: parallel lists of token indices and weights."""

    indices: list[int]
    values: list[float]


@dataclass(slots=True)
class PointRecord:
    """One point to write or read back: id (UUID string), vectors and payload.

    ``dense`` has the model's dimension; either vector may be ``None`` when read back
    without vectors.
    """

    id: str
    payload: dict[str, Any]
    dense: list[float] | None = None
    sparse: SparseVector | None = None


@dataclass(frozen=True, slots=True)
class ModelPointers:
    """Which embedding model's collection serves (``active``) and which second one receives
    a copy of every write: ``standby`` (complete: the model switched away from, kept current
    so a switch back is instant) or ``building`` (being filled by ``ncindex reindex``). Values
    are model slugs (:func:`ncindex.store.schema.model_slug`); at most one of ``standby`` and
    ``building`` is set, and neither equals ``active``.

    Raises ``ValueError`` for pointers that break those rules.
    """

    active: str | None = None
    standby: str | None = None
    building: str | None = None

    def __post_init__(self) -> None:
        if self.standby and self.building:
            raise ValueError("a standby and a building model at once")
        if self.mirror is not None and self.mirror == self.active:
            raise ValueError(f"model {self.active!r} cannot mirror itself")
        if self.mirror is not None and self.active is None:
            raise ValueError("a second model without an active one")

    @property
    def mirror(self) -> str | None:
        """The second model every write also goes to, or ``None``."""
        return self.standby or self.building


@dataclass(frozen=True, slots=True)
class Hit:
    """One fused search hit: point id, fused score (not a cosine similarity) and payload."""

    id: str
    score: float
    payload: dict[str, Any]


def payload_selector(fields: Sequence[str] | None) -> bool | list[str]:
    """``with_payload`` (qdrant-client's and Edge's alike) for a port method's ``fields``:
    the whole payload for ``None``, none for an empty sequence, else those fields."""
    return True if fields is None else (list(fields) if fields else False)


@dataclass(frozen=True, slots=True)
class IndexRebuild:
    """A payload index :meth:`VectorStore.ensure_collection` makes again in a collection that
    holds ``points`` points (its parameters differ from those asked for:
    :func:`~ncindex.store.schema.text_index_differs`): the ``collection``, the ``field``, and
    whether ``ensure_collection`` ``waits`` for the build (the embedded engine builds it in
    the calling process) or only queued it (a Qdrant server builds it in the background and
    does not say when it is done)."""

    collection: str
    field: str
    points: int
    waits: bool


#: Told of an :class:`IndexRebuild` as it begins (``done`` false) and, when
#: ``ensure_collection`` waits for it, as it ends (``done`` true).
RebuildHook = Callable[[IndexRebuild, bool], None]


class VectorStore(Protocol):
    """What every engine provides. All methods raise ``StoreUnavailable`` on engine failure."""

    def ensure_collection(self, dense_dim: int, on_rebuild: RebuildHook | None = None) -> None:
        """Create the collection and every payload index if missing; idempotent. An index
        made again in a collection holding points is told to ``on_rebuild``."""

    def upsert(self, points: Sequence[PointRecord]) -> None:
        """Write points (insert or replace by id); ``points`` carry both vectors."""

    def delete_document(self, doc_key: str, keep: Collection[str] | None = None) -> None:
        """Delete the points of ``doc_key`` — all of them, or all but those whose ids are in
        ``keep`` (the version just written: its ids, not its ``content_hash``, since one
        version's text can have been written under two id schemes,
        :func:`~ncindex.documents.point_id`). Deleting nothing succeeds."""

    def set_payload(self, doc_key: str, payload: dict[str, Any]) -> None:
        """Merge ``payload`` into every point of ``doc_key`` (metadata-only update)."""

    def document_points(self, doc_key: str, *, with_vectors: bool = False) -> list[PointRecord]:
        """Every point of ``doc_key``, ordered by ``chunk_index``."""

    def scroll(
        self, flt: models.Filter | None, fields: Sequence[str], page_size: int = 256
    ) -> Iterator[dict[str, Any]]:
        """Payloads (only ``fields``) of every point matching ``flt``, page by page."""

    def query(
        self,
        *,
        dense: list[float] | None,
        sparse: SparseVector | None,
        flt: models.Filter | None,
        limit: int,
        prefetch_limit: int,
        fusion: Fusion,
        rrf_k: int | None = None,
        weights: Sequence[float] | None = None,
        exact: bool = False,
        fields: Sequence[str] | None = None,
        dense_prefetch_limit: int | None = None,
    ) -> list[Hit]:
        """The engine's own hybrid query: a dense prefetch of ``dense_prefetch_limit``
        candidates (``None`` ⇒ ``prefetch_limit``) and a sparse one of ``prefetch_limit``,
        each filtered by ``flt`` (filters apply before fusion), fused, best first, the
        ``limit`` best hits. With one vector ``None`` the other half answers alone.
        The search asks :meth:`branch` for each half and fuses in the process, with this
        query's arithmetic (:mod:`ncindex.search.fusion`, tested against it); this query is the
        benchmarks' bare engine query and the fusion tuning's (weighted RRF).
        Points of equal fused score come back in an order drawn anew on every call (Qdrant
        folds the fused points into a randomly seeded hash map and sorts by score alone:
        qdrant/qdrant ``lib/segment/src/common/score_fusion.rs``, ``score_fusion``), so a
        caller that needs more hits asks for a larger ``limit`` from the top: a page read
        after an offset could miss a point tied across the cut.
        The dense half searches the HNSW graph with the layout's search parameters, or every
        matching point when ``exact`` (the reference the approximate path is measured against;
        the sparse half is always exact).

        ``fields``: the payload fields each hit carries (``None``: the whole payload; empty:
        none). Reading payloads is a large part of a query's cost (benchmarks/RESULTS.md,
        Scale): a caller that needs whole payloads for a few hits asks for ``doc_key`` here
        and reads those with :meth:`retrieve`.

        RRF only: ``rrf_k`` is the rank constant (``None`` ⇒ :data:`~ncindex.store.schema.RRF_K`);
        ``weights`` are ``(dense, sparse)`` branch weights (``None`` ⇒ equal); a branch whose
        vector is ``None`` drops its weight. Raises ``ValueError`` for weights with DBSF."""

    def branch(
        self,
        *,
        dense: list[float] | None = None,
        sparse: SparseVector | None = None,
        flt: models.Filter | None,
        limit: int,
        fields: Sequence[str] = ("doc_key",),
        exact: bool = False,
    ) -> list[Hit]:
        """One branch alone, unfused (what the search asks for each half before fusing them:
        :mod:`ncindex.search.fusion`): the ``limit`` points nearest to ``dense`` (cosine) or
        to ``sparse`` (BM25 dot product with Qdrant's IDF modifier) among those matching
        ``flt``, best first, with the branch's own scores and only ``fields`` of the payload
        (none when empty);
        ``exact`` as in :meth:`query`. Raises ``ValueError`` unless exactly one vector is
        given."""

    def retrieve(
        self, ids: Sequence[str], fields: Sequence[str] | None = None
    ) -> dict[str, dict[str, Any]]:
        """The payload (only ``fields``; ``None``: all of it) of each point of ``ids`` (UUID
        strings) that exists, by id; an id with no point (deleted since it was found) is
        absent."""

    def count(self, flt: models.Filter | None = None, *, exact: bool = True) -> int:
        """Number of points matching ``flt``: exact, or with ``exact`` false the engine's
        estimate from its payload indexes' cardinalities (Qdrant's ``count`` with ``exact:
        false``; a fraction of a millisecond on 100,000 points, where the exact count of a
        broad filter scans them)."""

    def facet_values(self, field: str, flt: models.Filter | None) -> set[str]:
        """Every value of the keyword-indexed payload ``field`` that a point matching ``flt``
        holds, each as ``str`` (a keyword's text; an integer field's digits): Qdrant's facet
        (its approximate counts ignored), asked :data:`FACET_LIMIT` deep so that it reads
        every value rather than a sample; computed in the engine rather than by reading the
        points' payloads. A field with no keyword, integer or bool index raises
        ``StoreUnavailable`` on Qdrant Edge and a server (qdrant-client's local mode, used in
        tests, answers its values anyway)."""

    def facet_counts(
        self, field: str, flt: models.Filter | None, *, exact: bool = True
    ) -> dict[str, int]:
        """Each value of the keyword-indexed payload ``field`` that a point matching ``flt``
        holds (as :meth:`facet_values` gives them) with how many such points hold it: Qdrant's
        facet with ``exact`` counts (one count per value, in the engine), asked
        :data:`FACET_LIMIT` deep. With ``exact`` false, its approximate counts: each
        segment's matching points counted (read in full, never sampled, at that depth) and
        the segments' counts added, so a point held by two segments for a moment counts
        twice; for a field of as many values as points (``doc_key``) much cheaper — on Qdrant
        Edge, 100,000 values: 0.3–0.4 s, where exact counts took 3–7 s. Raises what
        :meth:`facet_values` raises."""

    def models(self) -> ModelPointers:
        """The model pointers shared by every model's collection of this store (all ``None``
        before the first :meth:`ensure_collection`)."""

    def set_models(self, pointers: ModelPointers) -> None:
        """Replace the model pointers in one atomic step. Raises ``ValueError`` if a model
        they name has no collection."""

    def use_model(self, model_slug: str) -> VectorStore:
        """The store of another model's collection beside this one (same root or server);
        call its ``ensure_collection`` before writing."""

    def drop_model(self, model_slug: str) -> None:
        """Delete another model's collection and everything in it. Raises ``ValueError`` for a
        model the pointers name. (Edge: close that model's store in this process first.)"""

    def close(self) -> None:
        """Release files and connections."""
