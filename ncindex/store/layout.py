"""How a collection ncindex creates is laid out: shards, replicas, HNSW, quantisation, disk.

Qdrant's own defaults suit neither a one-person Nextcloud nor a cluster, so ncindex sets every
parameter when it creates a collection instead of leaving it to the server
(`NCINDEX_QDRANT_*` settings). The parameters follow Qdrant's multitenancy guide
(qdrant.tech/documentation/guides/multiple-partitions): the ``acl`` keyword index is the tenant
index (``is_tenant``) and ``payload_m`` builds an HNSW graph per tenant, so a search filtered to
one user's points stays exact and fast. Scalar int8 quantisation keeps the quantised vectors in
RAM and rescoring reads the originals (Qdrant's ``rescore`` is on by default), so memory per
million 384-dimension chunks falls from ~1.5 GB of float32 to ~0.4 GB while the ranking is
re-scored exactly.

A layout is given to a collection when it is *created*; a changed setting does not reach an
existing one by itself, except the search parameters (below) and, on Qdrant Edge, the BM25
full-scan threshold, which each optimisation sets anew for the segments it builds
(:meth:`CollectionLayout.sparse_threshold`). On a Qdrant server ``ncindex doctor`` compares
the live collection with the settings (:class:`LayoutDrift`,
:func:`ncindex.store.qdrant_server.layout_drift`) and ``ncindex reindex --layout`` applies
what Qdrant changes in place; the shard number only a new collection takes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from qdrant_client import models

from ncindex.settings import Settings

TENANT_FIELD = "acl"
"""The payload field whose keyword index is the tenant index (every search filters on it)."""


@dataclass(frozen=True)
class CollectionLayout:
    """The layout parameters of a new collection.

    ``shard_number``, ``replication_factor`` and ``write_consistency_factor`` apply to a Qdrant
    server only (Qdrant Edge is one local shard). ``hnsw_m`` is the links per point of the
    whole-collection graph (0: no such graph), ``hnsw_payload_m`` of the per-tenant graphs,
    ``hnsw_ef_construct`` the build-time candidate list; a segment is indexed once its vectors
    pass ``indexing_threshold_kb`` kilobytes. ``max_segment_size_kb`` (kilobytes of a
    segment's largest vector field; 0: the engine's default, on Qdrant Edge 256,000 per HNSW
    indexing thread, by default one per CPU up to 8: ``get_max_segment_size_kb``,
    qdrant/qdrant lib/edge/src/config/optimizers.rs, the constant in
    lib/shard/src/optimizers/config.rs) bounds what a later optimisation rebuilds: once the
    shard is at its target number of segments (half the CPUs, 2 to 8), the optimiser indexes
    the points written since it last ran together with the smallest indexed segment while
    the two fit under that size (``IndexingOptimizer::plan_optimizations``,
    lib/shard/src/optimizers/indexing_optimizer.rs), so a store under it is rebuilt whole
    each time; the points themselves are indexed whatever their size. A filtered search
    scores every point the filter lets through instead of walking an index when few pass:
    the dense one when their vectors are under ``full_scan_threshold_kb`` kilobytes (Qdrant
    estimates the count from the payload indexes and samples when unsure,
    ``HNSWIndex::search``, qdrant/qdrant
    lib/segment/src/index/hnsw_index/hnsw.rs), the BM25 one when fewer than
    ``sparse_full_scan_threshold`` points may pass (the estimate's upper bound,
    ``SparseVectorIndex::search_nearest_query``, lib/segment/src/index/sparse_index), or
    fewer than ``sparse_full_scan_share`` of the shard's points on Qdrant Edge
    (:meth:`sparse_threshold`, applied by each optimisation). Both are fixed when a segment
    is built. ``quantization`` ``"int8"`` adds scalar
    int8 quantised vectors kept in RAM; ``on_disk_vectors`` / ``on_disk_payload`` keep the
    originals and the payloads memory-mapped on disk, ``on_disk_payload_index`` the payload
    indexes (Qdrant's ``on_disk`` payload index; Edge's ``Memory.Cold``), which a shard then
    opens without reading them into RAM: at 100,000 points of 21 payload indexes Edge's
    ``EdgeShard.load`` took 0.32 s against 1.44 s with the indexes in RAM (benchmarks/RESULTS.md,
    Scale).

    ``preload_share`` applies when Qdrant Edge opens a shard (Qdrant's server keeps its own
    page cache): the share of available memory its files may take in the page cache
    (:func:`ncindex.store.preload.preload`).

    The last four apply to every search rather than to creation, so a changed setting reaches
    an existing collection at the next start: ``hnsw_ef`` is the search beam, at least
    ``ef_per_candidate`` × the candidates a search draws (:meth:`beam`), ``oversampling``
    how many quantised candidates per hit are rescored on the originals, up to the beam
    ``hnsw_ef`` (:meth:`drawn`), ``acorn`` turns on
    Qdrant's ACORN filtered search (neighbours of neighbours are walked where the filter cuts
    the graph).
    """

    shard_number: int
    replication_factor: int
    write_consistency_factor: int
    hnsw_m: int
    hnsw_ef_construct: int
    hnsw_payload_m: int
    indexing_threshold_kb: int
    max_segment_size_kb: int
    full_scan_threshold_kb: int
    sparse_full_scan_threshold: int
    sparse_full_scan_share: float
    quantization: Literal["int8", "none"]
    on_disk_vectors: bool
    on_disk_payload: bool
    on_disk_payload_index: bool
    preload_share: float
    hnsw_ef: int
    ef_per_candidate: float
    oversampling: float
    acorn: bool

    @classmethod
    def from_settings(cls, settings: Settings) -> CollectionLayout:
        """The layout the ``NCINDEX_QDRANT_*`` settings ask for."""
        return cls(
            shard_number=settings.qdrant_shard_number,
            replication_factor=settings.qdrant_replication_factor,
            write_consistency_factor=settings.qdrant_write_consistency_factor,
            hnsw_m=settings.qdrant_hnsw_m,
            hnsw_ef_construct=settings.qdrant_hnsw_ef_construct,
            hnsw_payload_m=settings.qdrant_hnsw_payload_m,
            indexing_threshold_kb=settings.qdrant_indexing_threshold_kb,
            max_segment_size_kb=settings.qdrant_max_segment_size_kb,
            full_scan_threshold_kb=settings.qdrant_full_scan_threshold_kb,
            sparse_full_scan_threshold=settings.qdrant_sparse_full_scan_threshold,
            sparse_full_scan_share=settings.qdrant_sparse_full_scan_share,
            quantization=settings.qdrant_quantization,
            on_disk_vectors=settings.qdrant_on_disk_vectors,
            on_disk_payload=settings.qdrant_on_disk_payload,
            on_disk_payload_index=settings.qdrant_on_disk_payload_index,
            preload_share=settings.qdrant_preload_share,
            hnsw_ef=settings.qdrant_hnsw_ef,
            ef_per_candidate=settings.qdrant_hnsw_ef_per_candidate,
            oversampling=settings.qdrant_oversampling,
            acorn=settings.qdrant_acorn,
        )

    def sparse_threshold(self, points: int) -> int:
        """The BM25 full-scan threshold (points) of a segment built in a shard of ``points``
        points: ``sparse_full_scan_share`` of them, rounded up, or ``sparse_full_scan_threshold``
        if that is more. A filtered BM25 search either walks the posting lists of the query's
        terms, checking the filter on each entry, or scores the points the filter lets
        through; the walk's cost grows with the collection and the scan's with the filter's
        points, so the point where the scan pays is a share of the collection, not a count.
        Qdrant compares each segment's own estimate with it, so this holds where an optimised
        shard is one large segment, as on this 2-core machine (Edge's merge target is half
        the CPUs, 2 to 8 segments, the appendable one counted:
        ``EdgeOptimizersConfig::get_number_segments``, qdrant/qdrant
        lib/edge/src/config/optimizers.rs); with k large segments a filter is scanned
        up to k × the share. Measured (benchmarks/scale_reading.md): at a million chunks of
        20 users the realistic filter (Qdrant's estimate 43,600 points, 22,000 let through)
        walked against scanned in a store without HNSW; at 100,000 chunks of one user the
        same 22,000 points (estimate ~45,000, 0.45 of the shard, from the fill's mix) scanned
        were dearer than walked (24 against 20 ms p50, an earlier round)."""
        share = math.ceil(round(self.sparse_full_scan_share * points, 6))  # float noise away
        return max(self.sparse_full_scan_threshold, share)

    def drawn(self, limit: int) -> int:
        """The quantised candidates a dense search asking ``limit`` hits draws and rescores on
        the originals: ``oversampling`` × ``limit`` with int8 quantisation, but no more than the
        beam ``hnsw_ef`` and never fewer than ``limit`` (``limit`` without quantisation).

        Drawing within the beam costs only the originals read for rescoring (the walk keeps
        ``hnsw_ef`` candidates anyway), and the extra ones guard the head of the ranking
        against int8 error. Drawing past it widens the walk itself (Qdrant's beam is at least
        the candidates drawn, :meth:`beam`), and a prefetch deeper than the beam needs no
        guard: its true head lies far inside what it draws, and only the edge of its tail,
        which fusion barely weighs, can differ. At
        1,000,000 points of one user the fused query (its dense prefetch 360 deep) took 87 ms
        (p50) drawing 720 and 59 ms drawing 360, its top 10 0.999 of the exact one's
        (benchmarks/RESULTS.md, Scale)."""
        if self.quantization != "int8":
            return limit
        return max(limit, min(math.floor(limit * self.oversampling), self.hnsw_ef))

    def oversampling_for(self, limit: int) -> float:
        """Qdrant's ``oversampling`` that makes a search asking ``limit`` hits draw
        :meth:`drawn` candidates. Qdrant draws ``floor(oversampling × limit)``
        (``get_oversampled_top``, qdrant/qdrant
        lib/segment/src/index/vector_index_search_common.rs), so a ratio that floating point
        rounds below ``drawn / limit`` is lifted by half a candidate."""
        drawn = self.drawn(limit)
        ratio = drawn / limit
        return ratio if math.floor(ratio * limit) == drawn else (drawn + 0.5) / limit

    def beam(self, limit: int) -> int:
        """The HNSW beam (``hnsw_ef``) of a dense search asking ``limit`` hits: ``hnsw_ef``, or
        ``ef_per_candidate`` × the candidates drawn (:meth:`drawn`) when that is more. Qdrant
        walks the graph with a beam of at least the candidates drawn anyway
        (``GraphLayers::search``: ``ef = max(ef, top)``, qdrant/qdrant
        lib/segment/src/index/hnsw_index/graph_layers.rs), so the tail of a deep prefetch is
        found with a beam no wider than itself unless this asks for more."""
        return max(self.hnsw_ef, math.ceil(self.ef_per_candidate * self.drawn(limit)))

    def dense_search(self, exact: bool, limit: int) -> models.SearchParams:
        """Search parameters of a dense query asking ``limit`` hits, in ``qdrant_client``'s
        types (the Edge store translates them): the HNSW beam (:meth:`beam`), rescoring of
        the candidates :meth:`drawn` on the originals, ACORN; or exact:
        every matching point scored on its original vector, quantisation ignored (older Qdrant
        scored the int8 copies even with ``exact``: qdrant/qdrant
        ``lib/segment/src/index/hnsw_index/hnsw.rs``, ``is_quantized_search``, checked only
        ``ignore`` until it learned ``exact``)."""
        if exact:
            return models.SearchParams(
                exact=True, quantization=models.QuantizationSearchParams(ignore=True)
            )
        return models.SearchParams(
            hnsw_ef=self.beam(limit),
            quantization=models.QuantizationSearchParams(
                rescore=True, oversampling=self.oversampling_for(limit)
            ),
            acorn=models.AcornSearchParams(enable=self.acorn),
        )


@dataclass(frozen=True)
class LayoutDrift:
    """One layout parameter in which an existing collection differs from its
    :class:`CollectionLayout`: ``setting`` (the ``NCINDEX_`` variable asking for it), its
    ``live`` and ``wanted`` values as text, ``in_place`` (whether ``ncindex reindex
    --layout`` changes it on the existing collection) and ``how`` (what applying it does,
    or what it takes instead)."""

    setting: str
    live: str
    wanted: str
    in_place: bool
    how: str

    def describe(self) -> str:
        """One line: the setting, both values and how it is applied."""
        return f"{self.setting} is {self.live} there, the settings ask {self.wanted}: {self.how}"


DEFAULT_LAYOUT = CollectionLayout.from_settings(Settings.model_construct())
"""The layout of the settings' defaults (environment not read): what a store built without a
layout uses."""
