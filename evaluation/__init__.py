"""Retrieval-quality evaluation on BEIR-layout datasets (DESIGN §13, ``ncindex eval``).

Two ways to run the same evaluation, which must agree:

- :mod:`evaluation.library` — fast, in-process: the product's chunker, embedder, store
  engine (Qdrant Edge in a temporary folder) and query/grouping code, no HTTP;
- :mod:`evaluation.product` — through the product: documents written into the
  Nextcloud simulator as notes and markdown files, indexed by the real Celery workers through
  webhooks, searched through ``POST /v1/search`` over HTTP as a user.

Documents are scored by their best chunk (search groups chunks by ``doc_key``); metrics come from
:mod:`evaluation.metrics` (``ir-measures`` on ``trec_eval``), averaged over every judged
query (a query without results scores 0).
"""

from evaluation.beir import BeirDataset, load_beir
from evaluation.metrics import MEASURE_NAMES, Metrics, evaluate
from evaluation.modes import MODES, Mode

__all__ = [
    "MEASURE_NAMES",
    "MODES",
    "BeirDataset",
    "Metrics",
    "Mode",
    "evaluate",
    "load_beir",
]
