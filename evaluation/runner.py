"""Running an evaluation end to end and printing it: shared by ``ncindex eval`` and
``benchmarks/bench_quality.py``."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evaluation.beir import BeirDataset
from evaluation.cache import VectorCache, model_identity
from evaluation.library import LibraryIndex, TextVariant
from evaluation.metrics import MEASURE_NAMES, Metrics
from evaluation.modes import MODES
from evaluation.product import PRODUCT_MODES, ProductHarness
from ncindex.embedding.embedder import Embedder
from ncindex.settings import Settings

Progress = Callable[[str], None]
#: Called with what is being done (``indexing``, ``queries``), how many are done and of how many.
Steps = Callable[[str, int, int], None]


def run_library(
    settings: Settings,
    dataset: BeirDataset,
    *,
    embedder: Embedder | None = None,
    modes: Sequence[str] = tuple(MODES),
    cache_path: Path | None = None,
    variant: TextVariant = "content",
    rrf_k: int | None = None,
    weights: Sequence[float] | None = None,
    echo: Progress | None = None,
    progress: Steps | None = None,
) -> tuple[dict[str, Metrics], dict[str, Any]]:
    """Index ``dataset`` in a temporary store and evaluate ``modes`` on the library path.
    Returns metrics per mode and indexing facts (``documents``, ``chunks``, ``embedded``,
    ``index_seconds``). ``progress`` is told the documents indexed, then the queries done."""
    documents, queries = len(dataset.corpus), len(dataset.queries)
    embedder = embedder or Embedder(settings)
    embedder.load()
    cache = (
        VectorCache(cache_path, model_identity(embedder.model_name, embedder.paths.dense_dir))
        if cache_path is not None
        else None
    )
    try:
        with tempfile.TemporaryDirectory(prefix="ncindex-eval-") as tmp:
            index = LibraryIndex(
                settings,
                embedder,
                Path(tmp),
                cache=cache,
                variant=variant,
                rrf_k=rrf_k,
                weights=weights,
            )
            try:
                stats = index.index(
                    dataset,
                    progress=(lambda n: progress("indexing", n, documents)) if progress else None,
                )
                if echo:
                    echo(
                        f"library: indexed {stats.documents} documents, {stats.chunks} chunks "
                        f"({stats.embedded} embedded) in {stats.seconds:.1f} s"
                    )
                metrics = index.evaluate(
                    dataset,
                    modes,
                    progress=(lambda n: progress("queries", n, queries)) if progress else None,
                )
            finally:
                index.close()
    finally:
        if cache is not None:
            cache.close()
    facts = {
        "documents": stats.documents,
        "chunks": stats.chunks,
        "embedded": stats.embedded,
        "index_seconds": round(stats.seconds, 1),
    }
    return metrics, facts


def run_product(
    settings: Settings,
    dataset: BeirDataset,
    *,
    embedder: Embedder | None = None,
    modes: Sequence[str] = PRODUCT_MODES,
    redis_url: str | None = None,
    echo: Progress | None = None,
    progress: Steps | None = None,
) -> tuple[dict[str, Metrics], dict[str, Any]]:
    """Write ``dataset`` into the simulator, let the workers index it through webhooks and
    evaluate ``modes`` through ``/v1/search``. Returns metrics per mode and facts
    (``documents``, ``index_seconds``). ``progress`` is told the documents indexed."""
    import time

    with (
        tempfile.TemporaryDirectory(prefix="ncindex-eval-") as tmp,
        ProductHarness(settings, Path(tmp), embedder=embedder, redis_url=redis_url) as harness,
    ):
        started = time.perf_counter()
        expected = harness.add_documents(dataset)
        step = max(1, expected // 10)
        shown = [-1]

        def report(count: int) -> None:
            if progress:
                progress("indexing", count, expected)
            if echo and (count // step > shown[0] or count == expected):
                shown[0] = count // step
                echo(f"product: {count}/{expected} documents indexed")

        harness.wait_indexed(expected, progress=report)
        seconds = time.perf_counter() - started
        metrics = harness.evaluate(dataset, [m for m in modes if m in PRODUCT_MODES])
    return metrics, {"documents": expected, "index_seconds": round(seconds, 1)}


def table(rows: dict[str, dict[str, float]], title: str = "mode") -> str:
    """A plain-text table: one row per key of ``rows`` (name → metric name → value)."""
    names = list(MEASURE_NAMES)
    width = max([len(title), *map(len, rows)]) + 2
    head = title.ljust(width) + "".join(n.rjust(18) for n in names)
    lines = [head, "-" * len(head)]
    for name, values in rows.items():
        cells = "".join(
            (f"{values[n]:.4f}" if isinstance(values.get(n), float | int) else "—").rjust(18)
            for n in names
        )
        lines.append(name.ljust(width) + cells)
    return "\n".join(lines)
