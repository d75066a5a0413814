"""Benchmark: the index converges on Nextcloud's truth (``make bench-convergence``).

A seeded, randomised run over the simulator on the whole stack (simulator webhooks → receiver
→ Redis → Celery worker → fastembed → Qdrant Edge → search API with verify-on-read), three
users, ``--operations`` operations (default 2,000): creates, edits, renames, moves, deletes and
restores of files and folders, folder copies, tag and untag of the gate and the excluded tag,
share, unshare and re-share, note category moves, Deck and News changes; 30 % of the webhook
deliveries dropped, the rest delayed up to 0.5 s and reordered. Every ten operations each user
searches and every result is checked against the simulator at that moment. After the run: the
deliveries flushed, one reconcile pass, the queues drained, every document compared with the
simulator. The run itself is ``tests/sync/convergence_run.py`` (``make test`` runs a short
one).

Writes ``benchmarks/results/convergence.json`` (``operations``, ``deliveries_dropped``,
``searches``, ``ineligible_served``, ``mismatches_after_reconcile``, ``seconds_to_converge``,
the seed and the operations by kind) and the "Convergence" section of ``benchmarks/RESULTS.md``.
Targets: ``ineligible_served`` = 0 and ``mismatches_after_reconcile`` = 0.

Usage: ``python benchmarks/bench_convergence.py [--seed N] [--operations N]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT.parent / "tests"), str(ROOT.parent / "tests" / "sync")]

from convergence_run import run  # noqa: E402
from results_md import publish  # noqa: E402

from ncindex.embedding.embedder import Embedder  # noqa: E402
from ncindex.embedding.models import install_models  # noqa: E402
from ncindex.redis_server import start_redis  # noqa: E402
from ncindex.settings import Settings  # noqa: E402
from support import build_stack  # noqa: E402


def main() -> int:
    """Run once and write the results; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--operations", type=int, default=2_000)
    args = parser.parse_args()
    base = Settings()
    install_models(base.model_dir)
    embedder = Embedder(Settings(model_dir=base.model_dir))
    embedder.load()
    redis_proc = start_redis()
    started = time.monotonic()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="ncindex-convergence-") as tmp,
            build_stack(redis_proc.url, embedder, base.model_dir, Path(tmp)) as stack,
        ):
            outcome = run(stack, seed=args.seed, operations=args.operations)
    finally:
        redis_proc.stop()
    result = {
        "operations": outcome.operations,
        "deliveries_dropped": outcome.deliveries_dropped,
        "searches": outcome.searches,
        "ineligible_served": outcome.ineligible_served,
        "mismatches_after_reconcile": outcome.mismatches_after_reconcile,
        "seconds_to_converge": outcome.seconds_to_converge,
        "seed": args.seed,
        "users": 3,
        "run_seconds": round(time.monotonic() - started, 1),
        "by_kind": outcome.by_kind,
        "served_examples": outcome.served[:10],
        "mismatch_examples": dict(list(outcome.mismatches.items())[:10]),
        "machine": platform.platform(),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    publish("convergence", result, "Convergence", markdown(result))
    print(json.dumps({k: v for k, v in result.items() if not k.endswith("examples")}, indent=2))
    ok = result["ineligible_served"] == 0 and result["mismatches_after_reconcile"] == 0
    return 0 if ok else 1


def markdown(r: dict[str, object]) -> str:
    """The "Convergence" section of ``RESULTS.md``."""
    return "\n".join(
        [
            "## Convergence",
            "",
            f"`make bench-convergence` (seed {r['seed']}, {r['users']} users, {r['at']}, "
            f"{r['machine']}): a randomised run over the simulator with 30 % of webhook "
            "deliveries dropped and the rest delayed (≤ 0.5 s) and reordered; searches as every "
            "user during the run; then one reconcile pass and the queues drained "
            "(`tests/sync/convergence_run.py`).",
            "",
            "| operations | deliveries dropped | searches | ineligible served | "
            "mismatches after reconcile | seconds to converge |",
            "|---:|---:|---:|---:|---:|---:|",
            f"| {r['operations']} | {r['deliveries_dropped']} | {r['searches']} | "
            f"**{r['ineligible_served']}** | **{r['mismatches_after_reconcile']}** | "
            f"{r['seconds_to_converge']} |",
            "",
            "Targets: ineligible served 0 and mismatches after reconcile 0 (presence, `acl`, "
            "`paths`, `tags` of every document against the simulator). Seconds to converge: "
            "from the last operation to the end of the reconcile pass (deliveries flushed, "
            f"queues drained twice). Operations by kind: {r['by_kind']}.",
            "",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
