"""Indexing throughput end to end against raw fastembed (DESIGN §6): ``make bench-indexing``.

What runs: N documents (``--docs``, ``DOCS=N make bench-indexing``; default 1,000) of a BEIR corpus
(``--corpus``; by default the first of :data:`CORPORA` that holds N documents: SciFact's 5,183
abstracts under ``../shared/data/scifact``, else NPL's 11,429 shorter ones under
``../shared/data/npl``, so ``DOCS=10000`` runs on NPL) — ``title`` + blank line + ``text`` (``text``
alone without a title), as ``.txt`` files — are uploaded to the Nextcloud simulator over its Python
API and indexed two ways (``--via``, default both, one after the other, each on a fresh stack):
``webhooks`` — the simulator fires each upload's webhooks over HTTP to the real receiver, which
gathers each account's files and queues them, once the debounce has passed, as
``ncindex.index_nodes`` tasks of ``--batch-docs`` files (``ncindex.flush_gathered``; one
``ncindex.index_node`` task per file with ``--batch-docs 1``) on a private ``redis-server``;
``scan`` — uploaded with the webhooks dropped, then one ``ncindex.reconcile_scan`` of the user's
files (a new account's cold scan), which queues ``ncindex.index_nodes`` tasks of ``--batch-docs``
files. A real
``celery -A workers.worker worker`` subprocess (configured by ``NCINDEX_*`` variables only)
re-reads each file over WebDAV, extracts, chunks, embeds (dense + BM25) and writes Qdrant Edge.
The clock runs from the first upload (or the scan's request) until the queues are drained
(nothing queued, reserved or debounced); the worker's model is loaded by a warm-up document before.
Afterwards the worker is stopped, the Edge folder opened here and every document's chunks are read
back: the documents are searchable (their points are in the store) and the same chunk texts are
embedded once more in-process by an ``Embedder`` of the worker's settings, as many calls at once as
the worker's batcher runs (``--embed-threads``, default 1, is the worker's
``NCINDEX_EMBED_THREADS``: cores ÷ threads calls) — the "raw fastembed" figure — and once more with
fastembed's default threads (all cores), one call at a time, for reference.

Figures: ``e2e_chunks_per_s`` (chunks stored / e2e seconds), ``raw_chunks_per_s``, ``ratio``
(wall, target ≥ 0.85), ``cpu_ratio`` (raw CPU seconds / worker CPU seconds, the judged one),
``reference_raw``, ``seconds_per_doc`` and ``peak_rss_mb`` of the worker (``VmHWM`` from
``/proc``, read before it stops), per way in. Writes ``benchmarks/results/indexing.json``
(``{"webhooks": {…}, "scan": {…}}``) and the "Indexing" section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from pydantic import SecretStr
from results_md import publish, reading
from werkzeug.serving import make_server

from ncindex.documents import DocType
from ncindex.embedding.embedder import Embedder
from ncindex.embedding.models import install_models
from ncindex.ingest.queueing import celery_app
from ncindex.ingest.registration import register
from ncindex.names import Names
from ncindex.redis_server import start_redis
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.store import model_slug
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.sync.reconcile import request_scans
from ncindex.sync.status import settled
from webhook_receiver import create_app as create_receiver_app

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
CORPORA = {"SciFact": DATA / "scifact" / "corpus.jsonl", "NPL": DATA / "npl" / "corpus.jsonl"}
"""The BEIR corpora a run may take its documents from, by name, in order of preference."""
USER, PASSWORD = "alice", "alice-app-pw"
ADMIN = ("admin", "admin-app-pw")
TARGET_RATIO = 0.85


def load_docs(path: Path, n: int) -> list[tuple[str, str]]:
    """The first ``n`` documents of a BEIR corpus as ``(id, "title\\n\\ntext")`` (``text``
    alone when the title is empty); exits with a message when it holds fewer."""
    docs = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            title, text = row.get("title", ""), row.get("text", "")
            docs.append((str(row["_id"]), f"{title}\n\n{text}" if title else text))
            if len(docs) == n:
                break
    if len(docs) < n:
        raise SystemExit(f"{path} holds {len(docs)} documents, fewer than {n}")
    return docs


def corpus_named(path: Path) -> tuple[str, Path]:
    """``path`` with its name in :data:`CORPORA` (else its folder's name)."""
    resolved = path.resolve()
    name = next((n for n, p in CORPORA.items() if p.resolve() == resolved), path.parent.name)
    return name, path


def corpus_for(n: int) -> tuple[str, Path]:
    """The first of :data:`CORPORA` that holds at least ``n`` documents (name, path); exits
    with a message when none does."""
    for name, path in CORPORA.items():
        if path.exists():
            with path.open(encoding="utf-8") as fh:
                if sum(1 for _ in fh) >= n:
                    return name, path
    raise SystemExit(f"no corpus of {', '.join(map(str, CORPORA.values()))} holds {n} documents")


def peak_rss_mb(pid: int) -> float:
    """``VmHWM`` (peak resident set) of process ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait(predicate: Any, timeout: float, what: str, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(interval)


def raw_embedding(settings: Settings, chunks: list[str]) -> tuple[float, float, int]:
    """Embed ``chunks`` in-process with a fresh :class:`Embedder` of ``settings``, as many
    calls at once as the worker's batcher runs (``Embedder.concurrent_calls``), each on an
    interleaved share of the chunks. Returns wall seconds, CPU seconds of this process (all
    threads) and the number of concurrent calls; the model is loaded and warmed first."""
    embedder = Embedder(settings)
    embedder.load()
    embedder.embed_documents(chunks[:32])  # warm the session like the worker's warm-up
    streams = embedder.concurrent_calls
    t0, c0 = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(streams) as executor:
        shares = [chunks[i::streams] for i in range(streams)]
        list(executor.map(embedder.embed_documents, shares))
    return time.perf_counter() - t0, time.process_time() - c0, streams


VIAS = ("webhooks", "scan")
"""How the documents reach the worker: each upload's webhook (the account's files gathered
into ``ncindex.index_nodes`` tasks once the debounce has passed), or — uploaded with the
webhooks dropped — one reconcile scan of the user's files, a new account's cold scan
(``ncindex.index_nodes`` tasks of ``index_batch_docs`` files)."""


def run(args: argparse.Namespace, via: str) -> dict[str, Any]:
    name, path = corpus_named(args.corpus) if args.corpus else corpus_for(args.docs)
    docs = load_docs(path, args.docs)
    folder = f"/{name}"
    print(f"{len(docs)} documents of {name} ({path})", flush=True)
    base = Settings()
    install_models(base.model_dir)
    work = Path(tempfile.mkdtemp(prefix="bench-indexing-"))
    redis_proc = start_redis()
    client = redis.Redis.from_url(redis_proc.url)
    sim = NextcloudSimulator()
    sim.add_user(ADMIN[0], password=ADMIN[1], admin=True)
    sim.add_user(USER, password=PASSWORD)
    sim_server = serve_simulator(sim, host="127.0.0.1", port=0)
    receiver = make_server("127.0.0.1", 0, lambda e, s: [], threaded=True)
    accounts = {USER: PASSWORD, ADMIN[0]: ADMIN[1]}
    settings = Settings(
        nextcloud_url=sim_server.url,
        accounts={u: SecretStr(p) for u, p in accounts.items()},
        admin_user=ADMIN[0],
        webhook_secret=SecretStr(secrets.token_urlsafe(16)),
        public_url=f"http://127.0.0.1:{receiver.port}",
        redis_url=redis_proc.url,
        model_dir=base.model_dir,
        qdrant_path=work / "qdrant",
        embed_threads=args.embed_threads or None,
        index_batch_docs=args.batch_docs or Settings().index_batch_docs,
    )
    receiver.app = create_receiver_app(settings, producer=celery_app(settings))
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    services = Services(settings)
    register(services.account(ADMIN[0]), settings)
    services.close()
    env = os.environ | {
        "NCINDEX_NEXTCLOUD_URL": sim_server.url,
        "NCINDEX_ACCOUNTS": json.dumps(accounts),
        "NCINDEX_REDIS_URL": redis_proc.url,
        "NCINDEX_MODEL_DIR": str(base.model_dir),
        "NCINDEX_QDRANT_PATH": str(settings.qdrant_path),
        "NCINDEX_LOG_LEVEL": "WARNING",
        "NCINDEX_INDEX_BATCH_DOCS": str(settings.index_batch_docs),
    }
    env.pop("NCINDEX_EMBED_THREADS", None)
    if args.embed_threads:
        env["NCINDEX_EMBED_THREADS"] = str(args.embed_threads)
    pool = ["--pool=solo"] if args.concurrency == 1 else ["--pool=threads"]
    argv = [sys.executable, "-m", "celery", "-A", "workers.worker", "worker", *pool]
    argv += [f"--concurrency={args.concurrency}", "-Q", "ingest,index,evict,reconcile"]
    argv += ["--loglevel=WARNING", "--without-mingle", "--without-gossip"]
    log = (work / "worker.log").open("wb")
    worker = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        # warm-up: the model loads inside the first task, before the clock starts
        sim.put_file(USER, "/warmup.txt", "Warm-up document for the embedding model.")
        time.sleep(0.5)
        keys = Names()

        def warm() -> bool:
            return sim.request_count("webdav", "GET") >= 1 and settled(client, keys)

        wait(warm, 300, "warm-up")
        print(f"worker warm; uploading {len(docs)} documents, indexed by {via}", flush=True)
        if via == "scan":  # uploaded behind the webhooks' back, before the clock starts
            sim.drop_rate = 1.0
            t0 = time.perf_counter()
            for doc_id, text in docs:
                sim.put_file(USER, f"{folder}/{doc_id}.txt", text)
            uploaded = time.perf_counter() - t0
        load_before = os.getloadavg()[0]
        cpu_before = cpu_seconds(worker.pid)
        here_before = time.process_time()
        started = time.perf_counter()
        if via == "scan":
            request_scans(celery_app(settings), client, [USER], [DocType.FILE], 600, keys=keys)
        else:
            for doc_id, text in docs:
                sim.put_file(USER, f"{folder}/{doc_id}.txt", text)
            uploaded = time.perf_counter() - started
        time.sleep(0.5)
        wait(lambda: settled(client, keys) and settled(client, keys), 3600, "indexing", 0.1)
        e2e_seconds = time.perf_counter() - started
        worker_cpu = cpu_seconds(worker.pid) - cpu_before
        here_cpu = time.process_time() - here_before
        load_after = os.getloadavg()[0]
        rss = peak_rss_mb(worker.pid)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=120)
        log.close()
    print(
        f"indexed in {e2e_seconds:.1f} s (uploads {uploaded:.1f} s), worker CPU "
        f"{worker_cpu:.1f} s, here {here_cpu:.1f} s, load {load_before:.2f}–{load_after:.2f}",
        flush=True,
    )

    store = QdrantEdgeStore(settings.qdrant_path, model_slug(settings.dense_model))
    try:
        chunks: list[str] = []
        missing = 0
        for doc_id, _ in docs:
            file_id = sim.file_id(USER, f"{folder}/{doc_id}.txt")
            points = store.document_points(f"file:{file_id}")
            missing += not points
            chunks += [p.payload["text"] for p in points]
    finally:
        store.close()
    if missing:
        raise SystemExit(f"{missing} documents are not in the store")

    raw_load_before = os.getloadavg()[0]
    raw_seconds, raw_cpu, streams = raw_embedding(settings, chunks)
    raw_load_after = os.getloadavg()[0]
    reference = settings.model_copy(update={"embed_threads": None})
    ref_seconds, ref_cpu, _ = raw_embedding(reference, chunks)
    receiver.shutdown()
    sim_server.close()
    sim.close()
    redis_proc.stop()

    e2e = len(chunks) / e2e_seconds
    raw = len(chunks) / raw_seconds
    return {
        "via": via,
        "docs": len(docs),
        "corpus": name,
        "chunks": len(chunks),
        "e2e_seconds": round(e2e_seconds, 2),
        "raw_seconds": round(raw_seconds, 2),
        "e2e_chunks_per_s": round(e2e, 2),
        "raw_chunks_per_s": round(raw, 2),
        "ratio": round(e2e / raw, 3),
        "target_ratio": TARGET_RATIO,
        "seconds_per_doc": round(e2e_seconds / len(docs), 4),
        "worker_cpu_seconds": round(worker_cpu, 2),
        "raw_cpu_seconds": round(raw_cpu, 2),
        "cpu_ratio": round(raw_cpu / worker_cpu, 3),
        "simulator_receiver_cpu_seconds": round(here_cpu, 2),
        "reference_raw": {  # fastembed's default threads (all cores), one call at a time
            "seconds": round(ref_seconds, 2),
            "chunks_per_s": round(len(chunks) / ref_seconds, 2),
            "cpu_seconds": round(ref_cpu, 2),
            "ratio": round(ref_seconds / e2e_seconds, 3),
            "cpu_ratio": round(ref_cpu / worker_cpu, 3),
        },
        "load_average": [round(load_before, 2), round(load_after, 2)],
        "raw_load_average": [round(raw_load_before, 2), round(raw_load_after, 2)],
        "peak_rss_mb": round(rss, 1),
        "upload_seconds": round(uploaded, 2),
        "worker": {"pool": pool[0].split("=")[1], "concurrency": args.concurrency},
        "settings": {
            "dense_model": settings.dense_model,
            "chunk_tokens": settings.chunk_tokens,
            "chunk_overlap_tokens": settings.chunk_overlap_tokens,
            "embed_batch_size": settings.embed_batch_size,
            "embed_threads": settings.embed_threads,
            "concurrent_calls": streams,
            "debounce_seconds": settings.debounce_seconds,
            "index_batch_docs": settings.index_batch_docs,
        },
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "arch": platform.machine(),
        },
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }


def section(results: dict[str, dict[str, Any]]) -> str:
    """The "## Indexing" section of RESULTS.md: one row per way in (:data:`VIAS`) of
    ``results``, each ``run``'s result."""
    first = next(iter(results.values()))
    m, w, st = first["machine"], first["worker"], first["settings"]
    threads = st["embed_threads"] or "unset (all cores)"
    lines = [
        "## Indexing",
        "",
        f"`make bench-indexing` — {first['date']}, {m['arch']}, {m['cpus']} cores, Python "
        f"{m['python']}. {first['docs']} {first['corpus']} documents "
        "(title + text, the text alone when untitled, as `.txt` files) in the Nextcloud "
        "simulator, indexed two ways: **webhooks** — each upload's webhook over HTTP → "
        "receiver → Redis → the account's files gathered and sent, once the debounce has "
        f"passed, as `ncindex.index_nodes` tasks of up to {st['index_batch_docs']} files; "
        "**scan** — uploaded with "
        "the webhooks dropped, then one reconcile scan of the user's files (a new account's "
        "cold scan) → `ncindex.index_nodes` tasks of up to "
        f"{st['index_batch_docs']} files (`NCINDEX_INDEX_BATCH_DOCS`). Either way "
        f"one `celery worker` process (pool `{w['pool']}`, concurrency {w['concurrency']}, "
        f"`NCINDEX_EMBED_THREADS` {threads}) → WebDAV download, extraction, chunking, "
        "dense + BM25 embedding → Qdrant Edge. The clock runs from the first upload (webhooks) "
        "or the scan's request (scan) until the queues are drained (model loaded before). "
        "Raw: the same chunk texts embedded again in-process, same run, by an `Embedder` of "
        f"the same settings, {st['concurrent_calls']} call(s) at once as the worker's batcher "
        f"runs them (batches of at most {st['embed_batch_size']}, cut by token length). "
        "Reference: the same with fastembed's default threads (all cores), one call at a "
        f"time. Target: end to end ≥ {TARGET_RATIO} × raw; the CPU ratio (raw CPU seconds ÷ "
        "the worker's) is the figure judged, since the wall ratio compares two differently "
        "loaded phases.",
        "",
        "| way in | docs | chunks | e2e s | e2e chunks/s | raw chunks/s | wall ratio | "
        "worker CPU s | raw CPU s | CPU ratio | s / doc | worker peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for via, r in results.items():
        lines.append(
            f"| {via} | {r['docs']} | {r['chunks']} | {r['e2e_seconds']} | "
            f"{r['e2e_chunks_per_s']} | {r['raw_chunks_per_s']} | {r['ratio']} | "
            f"{r['worker_cpu_seconds']} | {r['raw_cpu_seconds']} | **{r['cpu_ratio']}** | "
            f"{r['seconds_per_doc']} | {r['peak_rss_mb']} |"
        )
    lines += [
        "",
        "Per way in (1-minute load average of the end-to-end and raw phases, this "
        "benchmark's processes included; the reference raw run; the CPU the simulator, "
        "the receiver and webhook delivery — the benchmark's own process — used):",
        "",
    ]
    for via, r in results.items():
        verdict = "meets" if r["cpu_ratio"] >= TARGET_RATIO else "misses"
        ref, load, raw_load = r["reference_raw"], r["load_average"], r["raw_load_average"]
        lines.append(
            f"- {via}: CPU ratio {r['cpu_ratio']}, it {verdict} the target; load "
            f"{load[0]}–{load[1]} and {raw_load[0]}–{raw_load[1]}; reference raw "
            f"{ref['seconds']} s ({ref['chunks_per_s']} chunks/s), {ref['cpu_seconds']} CPU s, "
            f"CPU ratio {ref['cpu_ratio']} against it; simulator and receiver "
            f"{r['simulator_receiver_cpu_seconds']} CPU s."
        )
    lines += reading("indexing")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000, help="documents (default 1000)")
    parser.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="BEIR corpus.jsonl (default: SciFact, or NPL for more than SciFact's 5,183 docs)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=16, help="worker threads (1: solo pool; default 16)"
    )
    parser.add_argument(
        "--embed-threads",
        type=int,
        default=1,
        help="NCINDEX_EMBED_THREADS of the worker and the raw run (0: unset; default 1)",
    )
    parser.add_argument(
        "--via",
        choices=[*VIAS, "both"],
        default="both",
        help="how the documents reach the worker (default: both, one after the other)",
    )
    parser.add_argument(
        "--batch-docs",
        type=int,
        default=0,
        help="NCINDEX_INDEX_BATCH_DOCS of the worker (0: the setting's default)",
    )
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    vias = VIAS if args.via == "both" else (args.via,)
    results = {via: run(args, via) for via in vias}
    print(json.dumps(results, indent=2))
    if not args.no_write:
        publish("indexing", results, "Indexing", section(results))


if __name__ == "__main__":
    main()
