"""The retrieval modes evaluated: BM25 only, dense only, and both fused by RRF or DBSF."""

from __future__ import annotations

from dataclasses import dataclass

from ncindex.store.port import Fusion


@dataclass(frozen=True, slots=True)
class Mode:
    """One retrieval mode: which halves run and how they are fused (a single half is still
    passed through the store's fusion query, as a degraded search is)."""

    name: str
    dense: bool
    sparse: bool
    fusion: Fusion


MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode("bm25", dense=False, sparse=True, fusion=Fusion.RRF),
        Mode("dense", dense=True, sparse=False, fusion=Fusion.RRF),
        Mode("hybrid_rrf", dense=True, sparse=True, fusion=Fusion.RRF),
        Mode("hybrid_dbsf", dense=True, sparse=True, fusion=Fusion.DBSF),
    )
}
"""Mode name → :class:`Mode`, in report order (``bm25``, ``dense``, ``hybrid_rrf``,
``hybrid_dbsf``)."""
