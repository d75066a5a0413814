"""Retrieval quality on a BEIR-layout dataset (DESIGN §13): ``make bench-quality [DATASET=DIR]``.

Default run: the product's default settings, the library path of ``ncindex eval`` (the
product's chunker, embedder, store engine and query/grouping code, no HTTP), the four modes
(``bm25``, ``dense``, ``hybrid_rrf``, ``hybrid_dbsf``) over all judged queries and over each half
of a fixed split of them (``tune`` / ``test``). Writes ``benchmarks/results/quality.json`` and
the "Quality" section of ``benchmarks/RESULTS.md`` (settings, machine, date, published figures
for SciFact).

``--sweep`` runs the tuning sweeps instead (chunk size and overlap, heading attachment, what
text is embedded, RRF constant and weights, DBSF, prefetch depth) and writes
``benchmarks/results/quality_tuning.json`` and the "Quality tuning" section. Chunking variants
are compared on a tuning corpus (every judged document plus distractors, ``--tuning-docs``);
query-time parameters on the full corpus. Choices are made on the ``tune`` half; the ``test``
half and all queries are reported beside them.

Dense vectors are cached in ``var/eval-cache/vectors.sqlite`` keyed by (model, text hash), so a
second run or a sweep embeds only chunks it has not seen.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from results_md import RESULTS_DIR, publish, write_json, write_section

from evaluation import MODES, load_beir
from evaluation.beir import BeirDataset
from evaluation.cache import VectorCache, model_identity
from evaluation.library import LibraryIndex, TextVariant
from evaluation.metrics import Metrics, evaluate
from evaluation.runner import table
from ncindex.embedding.embedder import Embedder
from ncindex.search.service import Pool
from ncindex.settings import Settings
from ncindex.store.schema import RRF_K
from ncindex.text.chunking import Chunker

ROOT = Path(__file__).resolve().parent.parent
RESULTS = RESULTS_DIR
DEFAULT_DATASET = ROOT.parent / "shared" / "data" / "scifact"
CACHE = ROOT / "var" / "eval-cache" / "vectors.sqlite"

#: Published nDCG@10 (and what else was published) on BEIR SciFact test, from
#: shared/data/README.md, for the same table.
PUBLISHED = {
    "BM25 (BEIR paper)": {"ndcg@10": 0.665},
    "BM25 (Anserini flat)": {"ndcg@10": 0.679},
    "all-MiniLM-L6-v2 dense (published)": {"ndcg@10": 0.645},
    "bge-small-en-v1.5 dense (published)": {"ndcg@10": 0.713},
    "RRF BM25 + bge-base (published)": {"ndcg@10": 0.744},
    "Okapi BM25, this copy (README)": {"ndcg@10": 0.683, "recall@100": 0.933},
    "int8 MiniLM whole docs, this copy": {"ndcg@10": 0.649},
    "RRF k=60 whole docs, this copy": {"ndcg@10": 0.716},
    "score-normalised sum, this copy": {"ndcg@10": 0.734, "recall@10": 0.860, "mrr@10": 0.699},
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def score(
    index: LibraryIndex,
    dataset: BeirDataset,
    halves: tuple[list[str], list[str]],
    modes: Sequence[str] = tuple(MODES),
    *,
    deep: bool = True,
) -> dict[str, dict[str, dict[str, float]]]:
    """mode → {"all", "tune", "test"} → metric → value. ``deep=False`` asks only for the
    10-result page (Recall@100 is then left out)."""
    limits = (10, 100) if deep else (10,)
    runs = _runs(index, dataset, modes, limits)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for mode in modes:
        out[mode] = {}
        for part, ids in (("all", list(dataset.qrels)), ("tune", halves[0]), ("test", halves[1])):
            qrels = {q: dataset.qrels[q] for q in ids}
            metrics: Metrics = evaluate(runs[mode][10], qrels, runs[mode].get(100))
            out[mode][part] = metrics.as_dict()
            if not deep:
                del out[mode][part]["recall@100"]
    return out


def _runs(
    index: LibraryIndex, dataset: BeirDataset, modes: Sequence[str], limits: Sequence[int]
) -> dict[str, dict[int, dict[str, list[str]]]]:
    runs: dict[str, dict[int, dict[str, list[str]]]] = {m: {n: {} for n in limits} for m in modes}
    for qid, text in dataset.queries.items():
        for mode in modes:
            for limit in limits:
                runs[mode][limit][qid] = (
                    index.search(text[:1000], MODES[mode], limit) if text.strip() else []
                )
    return runs


def build_index(
    settings: Settings,
    embedder: Embedder,
    dataset: BeirDataset,
    folder: Path,
    cache: VectorCache,
    *,
    variant: TextVariant = "content",
    attach_headings: bool = True,
) -> LibraryIndex:
    index = LibraryIndex(settings, embedder, folder, cache=cache, variant=variant)
    index.chunker = Chunker.from_model_dir(
        embedder.paths.dense_dir,
        max_tokens=settings.chunk_tokens,
        overlap_tokens=settings.chunk_overlap_tokens,
        model_max_tokens=index.chunker.model_max_tokens,
        attach_headings=attach_headings,
    )
    stats = index.index(dataset)
    log(
        f"  indexed {stats.documents} docs, {stats.chunks} chunks "
        f"({stats.embedded} embedded) in {stats.seconds:.0f} s"
    )
    return index


# --- the default run -----------------------------------------------------------------------


def run_default(dataset_dir: Path, settings: Settings) -> dict[str, Any]:
    dataset = load_beir(dataset_dir)
    halves = dataset.split()
    embedder = Embedder(settings)
    embedder.load()
    cache = VectorCache(CACHE, model_identity(embedder.model_name, embedder.paths.dense_dir))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-quality-") as tmp:
        index = LibraryIndex(settings, embedder, Path(tmp), cache=cache)
        stats = index.index(dataset)
        log(f"indexed {stats.documents} docs, {stats.chunks} chunks in {stats.seconds:.0f} s")
        scores = score(index, dataset, halves)
        index.close()
    cache.close()
    result: dict[str, Any] = {
        "dataset": dataset.name,
        **{mode: scores[mode]["all"] for mode in MODES},
        "halves": {mode: {p: scores[mode][p] for p in ("tune", "test")} for mode in MODES},
        "queries": len(dataset.qrels),
        "documents": stats.documents,
        "chunks": stats.chunks,
        "settings": settings_summary(settings),
        "seconds": round(time.perf_counter() - started, 1),
        "machine": machine(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }
    return result


def settings_summary(settings: Settings) -> dict[str, Any]:
    return {
        "dense_model": settings.dense_model,
        "chunk_tokens": settings.chunk_tokens,
        "chunk_overlap_tokens": settings.chunk_overlap_tokens,
        "prefetch_limit": settings.prefetch_limit,
        "dense_prefetch_share": settings.dense_prefetch_share,
        "search_overfetch": settings.search_overfetch,
        "fusion": settings.fusion,
        "bm25_feedback_docs": settings.bm25_feedback_docs,
        "bm25_feedback_first_depth": settings.bm25_feedback_first_depth,
        "rrf_k": RRF_K,
    }


def quality_section(result: dict[str, Any]) -> str:
    rows = {mode: result[mode] for mode in MODES}
    s = result["settings"]
    lines = [
        "## Quality",
        "",
        f"`make bench-quality` on `{result['dataset']}` ({result['documents']} documents, "
        f"{result['chunks']} chunks, {result['queries']} judged queries), "
        f"{result['date']}, {result['machine']}.",
        "",
        f"Settings (product defaults): model `{s['dense_model']}` (int8 ONNX, offline), chunks "
        f"{s['chunk_tokens']} tokens with {s['chunk_overlap_tokens']} overlap (headings "
        f"attached), over-fetch {s['search_overfetch']} (a 10-result page reads 120 chunk "
        f"hits from a BM25 prefetch of max({s['prefetch_limit']}, 3 × 120) = 360 candidates "
        f"and a dense one of {Pool.shared(360, s.get('dense_prefetch_share', 1.0)).dense}), "
        f"RRF k={s['rrf_k']}, default fusion `{s['fusion']}`, BM25 feedback from "
        f"the {s.get('bm25_feedback_docs', 0)} best documents of a first pass (its BM25 branch "
        f"{s.get('bm25_feedback_first_depth', 360)} deep; DBSF hybrid only; 0 ⇒ none). "
        "Library path of `ncindex eval` (same chunker, embedder, Qdrant Edge, query and "
        "grouping as the product; no HTTP). A document scores by its best chunk; metrics from "
        "ir-measures (trec_eval), averaged over all judged queries, no result ⇒ 0. "
        "@10 metrics from a 10-result page, Recall@100 from a 100-result page.",
        "",
        "```",
        table(rows),
        "```",
        "",
        *_product_lines(result),
        *_before_lines(result),
        "Halves of the queries (fixed split; tuning used `tune` only):",
        "",
        "```",
        table(
            {
                f"{mode} ({part})": result["halves"][mode][part]
                for mode in MODES
                for part in ("tune", "test")
            }
        ),
        "```",
    ]
    if "scifact" in result["dataset"].lower():
        lines += [
            "",
            "Published and reference figures on BEIR SciFact test (shared/data/README.md; "
            "documents ranked whole, not chunked):",
            "",
            "```",
            table({k: dict(v) for k, v in PUBLISHED.items()}, title="system"),
            "```",
        ]
    return "\n".join(lines) + "\n"


BEFORE = (
    ("quality_before.json", "en-1"),
    ("quality_before_feedback.json", "no feedback"),
    ("quality_before_dense_share.json", "dense 360"),
)
"""Earlier runs of the default evaluation, file in ``benchmarks/results`` and row tag: ``en-1``
— fastembed's BM25 with the 1,333-word stop list and the defaults of then (2026-11-29);
``no feedback`` — analyzer ``en-2`` without feedback for the BM25 half (2026-12-02);
``dense 360`` — with feedback, the dense prefetch as deep as the BM25 one (2026-12-02)."""


def _before_lines(result: dict[str, Any]) -> list[str]:
    """Before and after, per mode and half, for each run of :data:`BEFORE` on the same
    dataset."""
    befores = []
    for name, tag in BEFORE:
        path = RESULTS / name
        if path.exists():
            before = json.loads(path.read_text())
            if before.get("dataset") == result["dataset"]:
                befores.append((tag, before))
    if not befores:
        return []
    rows: dict[str, dict[str, float]] = {}
    for mode in MODES:
        for part in ("all", "tune", "test"):
            for tag, before in befores:
                old = before[mode] if part == "all" else before["halves"][mode][part]
                rows[f"{mode} ({part}) {tag}"] = old
            new = result[mode] if part == "all" else result["halves"][mode][part]
            rows[f"{mode} ({part}) now"] = new
    return [
        "Before and after, per mode and half: `en-1` — fastembed's `Qdrant/bm25` with the "
        "1,333-word stop list and the defaults of then (2026-11-29); `no feedback` — analyzer "
        "`en-2`, BM25 query not expanded (`NCINDEX_BM25_FEEDBACK_DOCS=0`, 2026-12-02); "
        "`dense 360` — expanded, the dense prefetch as deep as the BM25 one "
        "(`NCINDEX_DENSE_PREFETCH_SHARE=1`, 2026-12-02); `now` — this run (feedback applies "
        "to the DBSF hybrid only):",
        "",
        "```",
        table(rows),
        "```",
        "",
    ]


def _product_lines(result: dict[str, Any]) -> list[str]:
    """The same evaluation through the product, when ``quality.json`` holds one under
    ``"product_path"`` (``ncindex eval DIR --via product --json FILE``, its ``product`` part)."""
    product = result.get("product_path")
    if not product:
        return []
    rows = {f"{m} (product)": v for m, v in product.items() if m in MODES}
    rows |= {f"{m} (library)": result[m] for m in product if m in MODES}
    return [
        "Through the product (`ncindex eval --via product`: notes and markdown files in the "
        "simulator, webhooks, Celery worker, `POST /v1/search` over HTTP as a user), same "
        "settings; the search API offers the two hybrid modes:",
        "",
        "```",
        table(rows),
        "```",
        "",
    ]


def save_tuning(out: dict[str, Any]) -> None:
    """Merge ``out`` into quality_tuning.json (re-read first, so sweeps of different groups
    run side by side without losing each other's results)."""
    path = RESULTS / "quality_tuning.json"
    merged = json.loads(path.read_text()) if path.exists() else {}
    for key, value in out.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] |= value
        else:
            merged[key] = value
    write_json("quality_tuning.json", merged)


# --- sweeps --------------------------------------------------------------------------------

CHUNKING = [
    # (label, chunk_tokens, overlap, attach_headings, text variant)
    ("200/32 title chunk alone (old default)", 200, 32, False, "content"),
    ("200/32 headings attached (default)", 200, 32, True, "content"),
    ("200/32 no title", 200, 32, False, "text_only"),
    ("254/32 headings attached", 254, 32, True, "content"),
    ("200/0 headings attached", 200, 0, True, "content"),
    ("200/64 headings attached", 200, 64, True, "content"),
    ("128/32 headings attached", 128, 32, True, "content"),
    ("200/32 title prefixed to every chunk", 200, 32, False, "title_each_chunk"),
]


def run_sweep(dataset_dir: Path, settings: Settings, tuning_docs: int, only: set[str]) -> None:
    full = load_beir(dataset_dir)
    halves = full.split()
    tuning = full.subset(len(full.qrels), tuning_docs)
    stamp = {"date": datetime.now(UTC).strftime("%Y-%m-%d"), "machine": machine()}
    out: dict[str, Any] = {"dataset": full.name, "tuning_corpus": tuning.name} | stamp
    out_path = RESULTS / "quality_tuning.json"
    if out_path.exists():
        out = json.loads(out_path.read_text()) | {"dataset": full.name} | stamp
    embedder = Embedder(settings)
    embedder.load()
    cache = VectorCache(CACHE, model_identity(embedder.model_name, embedder.paths.dense_dir))

    if "chunking" in only:
        results = out.setdefault("chunking", {})
        for label, tokens, overlap, attach, variant in CHUNKING:
            if label in results:
                continue
            log(f"chunking: {label}")
            s = settings.model_copy(
                update={"chunk_tokens": tokens, "chunk_overlap_tokens": overlap}
            )
            with tempfile.TemporaryDirectory() as tmp:
                index = build_index(
                    s, embedder, tuning, Path(tmp), cache, variant=variant, attach_headings=attach
                )
                results[label] = score(index, tuning, halves, deep=False)
                index.close()
            save_tuning(out)

    if "query" in only:
        log("query-time parameters on the full corpus")
        results = out.setdefault("query", {})
        with tempfile.TemporaryDirectory() as tmp:
            index = build_index(settings, embedder, full, Path(tmp), cache)
            hybrid = ("hybrid_rrf",)
            # query-time parameters are compared on the 10-result page (the @10 metrics)
            results["dbsf"] = score(index, full, halves, ("hybrid_dbsf",), deep=False)
            for k in (2, 10, 20, 60):
                index.rrf_k = k
                results[f"rrf k={k}"] = score(index, full, halves, hybrid, deep=False)
            index.rrf_k = None
            for w in ((1.5, 1.0), (1.0, 1.5)):
                index.weights = w
                results[f"rrf k={RRF_K} weights dense={w[0]} sparse={w[1]}"] = score(
                    index, full, halves, hybrid, deep=False
                )
            index.weights = None
            base = index.service.settings
            for depth in (1000,):
                index.service.settings = base.model_copy(
                    update={"prefetch_limit": depth, "dense_prefetch_share": 1.0}
                )
                results[f"prefetch {depth}"] = score(
                    index, full, halves, ("hybrid_rrf", "hybrid_dbsf"), deep=False
                )
            index.service.settings = base
            index.close()
        save_tuning(out)
    cache.close()
    write_section("Quality tuning", tuning_section(json.loads(out_path.read_text())))


DECISIONS = """\
Decisions (rule: change a default only for a gain of at least 0.01 nDCG@10 on the `tune` half,
about the noise of 150 queries, or for a lower cost at no loss):

- **Fusion: DBSF by default** (was RRF). Full corpus, `tune`: DBSF 0.702 against RRF k=2
  0.675 and the best RRF (k=10) 0.691; `test`: 0.775 against 0.754.
- **RRF k = 10** (was Qdrant's 2) for requests that ask for `rrf`: `tune` 0.691 against 0.675;
  k = 20 and 60 were within 0.003 of k = 10. Branch weights (1.5 : 1 either way) gained less
  than 0.007 and are not used.
- **Headings attached to the next chunk** (new in the chunker): the markdown splitter left a
  note's title as a chunk of its own. Attaching it gains 0.005 (DBSF) to 0.014 (BM25) on `tune`
  and cuts the chunks by 27 % (3,229 → 2,343 on the tuning corpus), so embedding costs less.
- **Chunk size and overlap stay 200/32.** 254/32 and 128/32 were worse; 200/64 gained 0.004
  on `tune`, lost 0.002 on `test`, and costs more chunks; 200/0 was within 0.002.
- **Title in the text, not prefixed to every chunk, not in the path.** Without the title
  nDCG@10 drops by 0.015; prefixing it to every chunk's embedded text was worse than attaching
  it once (0.817 against 0.825) and would tie vectors to metadata. The title lives in the note's
  content (its first line), so a rename re-embeds nothing; paths are filters, not vector text.
- **Prefetch depth stays** (a 10-result page draws on max(100, 360) candidates per branch):
  a pool of 1,000 gained 0.003 (DBSF) and nothing for RRF. (Since 2026-12-04 the dense
  prefetch is half the BM25 one's depth: "Fusion tuning".)
- **Stopwords** (superseded by issue 19): the 1,333-word list was kept here for SciFact, but it
  deleted content words (`high`, `system`, `research`, `home`, `C++`); the BM25 half now uses
  its own analyzer (`ncindex/embedding/analyzer.py`, Lucene's 33 words after stemming), see
  "Fusion tuning".
- **BM25 pseudo-relevance feedback for DBSF searches** (issue 19, `NCINDEX_BM25_FEEDBACK_DOCS`):
  chosen in "Fusion tuning".
"""


def tuning_section(out: dict[str, Any]) -> str:
    lines = [
        "## Quality tuning",
        "",
        f"`python benchmarks/bench_quality.py --sweep` on `{out['dataset']}`, "
        f"{out.get('date', 'undated')}, {out.get('machine', 'machine unrecorded')}. Chunking and "
        f"stopword variants on the tuning corpus `{out.get('tuning_corpus')}` (every judged "
        "document plus distractors, so figures run higher than on the full corpus); query-time "
        "parameters on the full corpus. Choices were made on the `tune` half; `test` and `all` "
        "shown beside. Figures are nDCG@10, Recall@10, MRR@10 of the 10-result page.",
        "",
        DECISIONS,
    ]
    for group, modes in (
        ("chunking", ("bm25", "dense", "hybrid_rrf", "hybrid_dbsf")),
        ("query", ("hybrid_rrf", "hybrid_dbsf")),
    ):
        if group not in out:
            continue
        for part in ("tune", "test", "all"):
            rows = {
                f"{label} | {mode}": res[mode][part]
                for label, res in out[group].items()
                for mode in modes
                if mode in res
            }
            lines += ["", f"{group}, `{part}` queries:", "", "```", table(rows, "variant"), "```"]
    return "\n".join(lines) + "\n"


def rewrite_sections() -> None:
    """Rewrite both sections of RESULTS.md from the JSON files, without running anything."""
    if (RESULTS / "quality.json").exists():
        result = json.loads((RESULTS / "quality.json").read_text())
        write_section("Quality", quality_section(result))
    if (RESULTS / "quality_tuning.json").exists():
        tuning = json.loads((RESULTS / "quality_tuning.json").read_text())
        write_section("Quality tuning", tuning_section(tuning))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=None, help="BEIR-layout folder")
    parser.add_argument("--sweep", action="store_true", help="run the tuning sweeps")
    parser.add_argument("--tuning-docs", type=int, default=1000)
    parser.add_argument("--only", default="chunking,query", help="sweep groups, comma-separated")
    parser.add_argument("--fresh", action="store_true", help="discard earlier sweep results")
    parser.add_argument(
        "--sections-only", action="store_true", help="rewrite RESULTS.md from the JSON files"
    )
    args = parser.parse_args(argv)
    if args.sections_only:
        rewrite_sections()
        return 0
    dataset_dir = args.dataset or Path(os.environ.get("DATASET") or DEFAULT_DATASET)
    if not (dataset_dir / "corpus.jsonl").exists():
        log(f"no BEIR dataset at {dataset_dir} (corpus.jsonl missing); pass DATASET=DIR")
        return 2
    settings = Settings()
    if args.sweep:
        if args.fresh and (RESULTS / "quality_tuning.json").exists():
            shutil.move(RESULTS / "quality_tuning.json", RESULTS / "quality_tuning.json.tmp")
        run_sweep(dataset_dir, settings, args.tuning_docs, set(args.only.split(",")))
        return 0
    result = run_default(dataset_dir, settings)
    path = publish("quality", result, "Quality", quality_section(result))
    print(table({m: result[m] for m in MODES}))
    log(f"wrote {path.relative_to(ROOT)} and the Quality section of benchmarks/RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
