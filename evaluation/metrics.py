"""IR metrics through ``ir-measures`` (the ``trec_eval`` implementation via
``pytrec-eval-terrier``), averaged over every judged query.

A *run* maps query id → ranked list of corpus ids (best first, no duplicates). Ranks, not
scores, are what count: each list is handed to ``trec_eval`` with strictly decreasing scores,
because ``trec_eval`` re-sorts by score and breaks ties by document id, which would undo the
product's own tie-break (``doc_key``). A judged query missing from the run, or with an empty
list, scores 0 on every measure and counts as a zero-result query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import ir_measures
from ir_measures import RR, R, nDCG

#: Our metric names → ir-measures measures.
_MEASURES = {
    "ndcg@10": nDCG @ 10,
    "recall@10": R @ 10,
    "recall@100": R @ 100,
    "mrr@10": RR @ 10,
}
MEASURE_NAMES: tuple[str, ...] = (*_MEASURES, "zero_result_rate")
"""Keys of :meth:`Metrics.as_dict`, in table order."""


@dataclass(frozen=True, slots=True)
class Metrics:
    """Averages over ``queries`` judged queries; every value is in [0, 1]."""

    ndcg_at_10: float
    recall_at_10: float
    recall_at_100: float
    mrr_at_10: float
    zero_result_rate: float
    queries: int

    def as_dict(self, digits: int = 4) -> dict[str, float]:
        """``{"ndcg@10", "recall@10", "recall@100", "mrr@10", "zero_result_rate"}`` rounded."""
        values = asdict(self)
        return {
            name: round(values[field], digits)
            for name, field in zip(
                MEASURE_NAMES,
                ("ndcg_at_10", "recall_at_10", "recall_at_100", "mrr_at_10", "zero_result_rate"),
                strict=True,
            )
        }


def per_query(
    run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, float]]:
    """query id → {metric name → value} for every judged query in ``qrels`` (0 where the run
    has nothing), without ``zero_result_rate``."""
    qrel_rows = [
        ir_measures.Qrel(qid, did, int(rel))
        for qid, docs in qrels.items()
        for did, rel in docs.items()
    ]
    run_rows = [
        ir_measures.ScoredDoc(qid, did, float(len(docs) - rank))
        for qid, docs in run.items()
        if qid in qrels
        for rank, did in enumerate(_unique(docs))
    ]
    names = {m: n for n, m in _MEASURES.items()}
    out = {qid: dict.fromkeys(_MEASURES, 0.0) for qid in qrels}
    for metric in ir_measures.iter_calc(list(_MEASURES.values()), qrel_rows, run_rows):
        out[metric.query_id][names[metric.measure]] = float(metric.value)
    return out


def evaluate(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    run_at_100: Mapping[str, Sequence[str]] | None = None,
) -> Metrics:
    """Metrics of ``run`` against ``qrels``, averaged over all judged queries.

    ``run_at_100``, when given, supplies Recall@100 (a deeper page, as a user asking for 100
    results would get it); otherwise Recall@100 comes from ``run``. Raises ``ValueError`` for
    empty ``qrels``.
    """
    if not qrels:
        raise ValueError("no judged queries")
    scores = per_query(run, qrels)
    if run_at_100 is not None:
        deep = per_query(run_at_100, qrels)
        for qid in scores:
            scores[qid]["recall@100"] = deep[qid]["recall@100"]
    n = len(qrels)

    def mean(name: str) -> float:
        return sum(s[name] for s in scores.values()) / n

    zero = sum(1 for qid in qrels if not run.get(qid)) / n
    return Metrics(
        ndcg_at_10=mean("ndcg@10"),
        recall_at_10=mean("recall@10"),
        recall_at_100=mean("recall@100"),
        mrr_at_10=mean("mrr@10"),
        zero_result_rate=zero,
        queries=n,
    )


def _unique(docs: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(docs))
