"""Fusion of a search's branch rankings (dense, BM25) into one ranking, in the process.

The search asks each branch once (:meth:`~ncindex.store.port.VectorStore.branch`) and fuses
here, so a hybrid search expanded by feedback asks the dense branch once, not once for the
feedback pass and once again for its round, and every round of verification reads the same
ranking without asking the engine again (benchmarks/RESULTS.md, Scale).

The arithmetic is Qdrant's, so a ranking fused here is the one the engine's fused query
(:meth:`~ncindex.store.port.VectorStore.query`) returns for the same branches:

- DBSF — qdrant/qdrant ``lib/segment/src/common/score_fusion.rs``, ``score_fusion`` with
  ``ScoreFusion::dbsf`` and ``distr_norm``: each branch's scores are normalised as
  ``(score − (μ − 3σ)) / 6σ`` with ``σ`` the *sample* standard deviation (Welford, ``n − 1``),
  not clipped; a branch of one hit, or of equal scores, scores 0.5; the normalised scores
  of a point are summed over the branches.
- RRF — qdrant/qdrant ``lib/segment/src/common/reciprocal_rank_fusion.rs``,
  ``rrf_scoring`` and ``position_score``: a point at 0-based ``position`` in a branch gains
  ``1 / (position + k)`` (the search weighs its branches alike).

One difference, on purpose: Qdrant orders equal fused scores as its hash map yields them (a
new order on every call); here ties are ordered by point id, so a deeper read of the same
ranking never reorders what an earlier read saw. Qdrant computes in 32-bit floats, this module
in 64-bit: scores agree to about 1e-6.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ncindex.store.port import Fusion, Hit
from ncindex.store.schema import RRF_K


def fuse(branches: Sequence[Sequence[Hit]], fusion: Fusion, rrf_k: int = RRF_K) -> list[Hit]:
    """One ranking of ``branches`` (each best first, with the branch's own scores), best
    first, every point once with its fused score and the payload of its first appearance;
    ``rrf_k`` is RRF's rank constant (every branch weighs 1). An empty branch adds nothing."""
    scored = [
        _rrf_scores(hits, rrf_k)
        if fusion is Fusion.RRF
        else dbsf_normalised([h.score for h in hits])
        for hits in branches
    ]
    fused: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for hits, scores in zip(branches, scored, strict=True):
        for hit, score in zip(hits, scores, strict=True):
            fused[hit.id] = fused.get(hit.id, 0.0) + score
            first.setdefault(hit.id, hit)
    order = sorted(fused, key=lambda point: (-fused[point], point))
    return [Hit(point, fused[point], first[point].payload) for point in order]


def dbsf_normalised(scores: Sequence[float]) -> list[float]:
    """One branch's ``scores`` as DBSF normalises them: ``(s − (μ − 3σ)) / 6σ`` with ``σ`` the
    sample standard deviation, unclipped; 0.5 each for fewer than two scores or no spread."""
    if len(scores) < 2:
        return [0.5] * len(scores)
    mean = math.fsum(scores) / len(scores)
    sigma = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / (len(scores) - 1))
    if sigma == 0:
        return [0.5] * len(scores)
    low = mean - 3 * sigma
    return [(s - low) / (6 * sigma) for s in scores]


def _rrf_scores(hits: Sequence[Hit], k: int) -> list[float]:
    """Each position's reciprocal rank under ``k`` (branch weight 1)."""
    return [1.0 / (position + k) for position in range(len(hits))]
