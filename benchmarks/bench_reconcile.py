"""Benchmark: what a reconcile rescan of an unchanged account costs (``make bench-reconcile``).

An account of 10,000 documents — 5,000 notes in 50 categories and 5,000 markdown files in
50 folders two levels deep — is written straight into the Nextcloud simulator (no webhooks),
and the store (Qdrant Edge in a temporary folder) is filled with one point per document of
the right shape (a unit dense vector, a one-term sparse vector, the real payload fields), so
nothing is embedded. Then, over real HTTP:

* a cold scan per doc type (no scan state: the full Depth-1 walk, the full Notes list) —
  it finds the index in sync and stores the folder etags and ``pruneBefore``;
* ``RUNS`` rescans of the unchanged account (the figure the target is about): requests
  counted by the simulator, seconds by the wall clock (median);
* one rescan after a single deep file and a single note changed.

Target: ≤ 1 request per 100 documents for notes and files.

Then a big account (issue 20): 100,000 markdown files in 1,000 folders of a second user, a
cold scan (no scan state, an empty index: every document is new) by a real ``celery worker``
subprocess consuming the ``reconcile`` queue, paged across tasks
(``NCINDEX_RECONCILE_PAGE_REQUESTS``, default 100 requests per page; :mod:`ncindex.sync.paging`):

* the same scan in one pass in this process (how every scan ran before paging): seconds;
* the paged scan: requests, pages, seconds from sending ``ncindex.reconcile_scan`` until the
  scan is recorded, the worker's peak RSS;
* the paged scan again, its worker SIGKILLed mid-page half-way and restarted at once: the
  killed page's task comes back when Redis redelivers it (``NCINDEX_VISIBILITY_TIMEOUT``, short
  here) and waits for the dead worker's scan lock (hard limit + 60 s) — ``resumed_after_kill``
  when it finishes with the same result after listing fewer requests than a fresh scan, and
  ``pages_redone``, the pages listed twice.

Indexing is not part of these figures: the ``index_node`` tasks the scan sends (fanned out in
``ncindex.send_actions`` parts) stay queued, no worker runs them. Writes
``benchmarks/results/reconcile.json`` (``docs``, ``requests``, ``requests_per_100_docs``,
``seconds`` for the unchanged rescan, plus the breakdown, and ``big_account``) and the
"Reconcile" section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from pydantic import SecretStr
from results_md import publish

from ncindex import names
from ncindex.documents import DocRef, DocType, path_fields, point_id, principal, text_hash
from ncindex.index.indexing import Indexer
from ncindex.ingest.queueing import celery_app
from ncindex.redis_server import start_redis
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.simulator.notes_api import NotesApi
from ncindex.store import model_slug
from ncindex.store.port import PointRecord, SparseVector
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.sync.reconcile import Reconciler, ScanState

USER, PASSWORD = "alice", "alice-bench-pw"
BIG_USER, BIG_PASSWORD = "bob", "bob-bench-pw"
BIG_DOCS, BIG_FOLDERS = 100_000, 1_000
#: the big account's worker: limits short enough that a killed page comes back in a minute or
#: two (its scan lock lives hard limit + 60 s), long enough for the last page's enqueueing
BIG_LIMITS = {
    "NCINDEX_TASK_SOFT_TIME_LIMIT": "50",
    "NCINDEX_EXTRACT_MAX_SECONDS": "40",
    "NCINDEX_TASK_TIME_LIMIT": "60",
    "NCINDEX_VISIBILITY_TIMEOUT": "70",
    "NCINDEX_LOCK_TTL": "65",
}
NOTES = FILES = 5_000
DIM = 384
RUNS = 5
ROOT = Path(__file__).resolve().parent


class Recorder:
    """Producer stand-in: counts the tasks a scan would send (none, when in sync)."""

    def __init__(self) -> None:
        self.sent = 0

    def send_task(self, name: str, **options: Any) -> None:
        self.sent += 1


def note_path(i: int) -> str:
    return f"/Notes/Category {i % 50:02d}/note {i:05d}.md"


def file_path(i: int) -> str:
    return f"/Documents/Area {i % 10}/Folder {i % 50:02d}/file {i:05d}.md"


def fill_simulator(sim: NextcloudSimulator) -> dict[str, list[tuple[int, str, str]]]:
    """Write the documents; returns ``doc_type`` → ``(file id, path, etag)``."""
    notes_api = NotesApi(sim)
    out: dict[str, list[tuple[int, str, str]]] = {"note": [], "file": []}
    for i in range(NOTES):
        path = note_path(i)
        fid = sim.put_file(USER, path, f"# Note {i}\nTide tables for harbour {i}.\n")
        out["note"].append((fid, path, ""))
    for i in range(FILES):
        path = file_path(i)
        fid = sim.put_file(USER, path, f"# File {i}\nLantern maintenance log {i}.\n")
        out["file"].append((fid, path, ""))
    with sim.lock:
        out["note"] = [(f, p, str(notes_api.note_etag(USER, f))) for f, p, _ in out["note"]]
        # every path was just put, so sim.node() finds it (typed Optional)
        out["file"] = [(f, p, sim.node(USER, p).etag) for f, p, _ in out["file"]]  # type: ignore[union-attr]
    return out


def fill_store(store: QdrantEdgeStore, docs: dict[str, list[tuple[int, str, str]]]) -> None:
    """One point per document with the payload the indexer writes and right-shaped vectors."""
    unit = [1.0 / math.sqrt(DIM)] * DIM
    points = []
    for doc_type, rows in docs.items():
        for fid, path, etag in rows:
            ref = DocRef(DocType(doc_type), str(fid))
            text = f"{doc_type} {fid}"
            payload = {
                "doc_type": doc_type,
                "doc_id": ref.doc_id,
                "doc_key": ref.key,
                "acl": [principal(USER)],
                "owner": USER,
                "title": path.rsplit("/", 1)[-1],
                "text": text,
                "chunk_index": 0,
                "chunk_count": 1,
                "char_start": 0,
                "char_end": len(text),
                "content_hash": text_hash(text),
                "etag": etag,
                "modified_at": 1767225600,
                "indexed_at": 1767225600,
                "embedding_model": "bench",
                "mime_type": "text/markdown",
                "size": 40,
                "tags": [],
                "category": None,
                "url": None,
            } | path_fields({USER: path})
            points.append(
                PointRecord(
                    id=point_id(ref, payload["content_hash"], 0),
                    payload=payload,
                    dense=unit,
                    sparse=SparseVector([fid % 30000], [1.0]),
                )
            )
    store.upsert(points)


def scan(rec: Reconciler, sim: NextcloudSimulator, doc_type: DocType) -> dict[str, Any]:
    sim.reset_request_counts()
    started = time.perf_counter()
    report = rec.scan(USER, doc_type)
    seconds = time.perf_counter() - started
    assert report.error is None, report.error
    return {
        "requests": sim.request_count(),
        "seconds": seconds,
        "listed": report.listed,
        "indexed": report.indexed,
        "changes": report.counts(),
        "clean": report.clean,
    }


def big_path(i: int) -> str:
    return f"/Archive/Area {i % 10}/Folder {i % BIG_FOLDERS:03d}/doc {i:06d}.md"


class BigAccount:
    """The big account's simulator over HTTP, a private Redis and ``celery worker``
    subprocesses (solo pool, ``reconcile`` queue) configured by ``NCINDEX_*`` variables."""

    def __init__(self, redis_url: str, tmp: Path) -> None:
        self.sim = NextcloudSimulator()
        self.sim.add_user(BIG_USER, password=BIG_PASSWORD)
        print(f"writing {BIG_DOCS:,} documents of the big account …", flush=True)
        t0 = time.perf_counter()
        for i in range(BIG_DOCS):
            self.sim.put_file(BIG_USER, big_path(i), f"# Doc {i}\nHarbour ledger {i}.\n")
        print(f"  {time.perf_counter() - t0:.1f} s", flush=True)
        self.server = serve_simulator(self.sim, host="127.0.0.1", port=0)
        self.tmp = tmp
        self.settings = Settings(
            nextcloud_url=self.server.url,
            accounts={BIG_USER: SecretStr(BIG_PASSWORD)},
            redis_url=redis_url,
            qdrant_path=tmp / "qdrant-worker",
        )
        self.redis = redis.Redis.from_url(redis_url)
        self.state = ScanState(self.redis, BIG_USER, DocType.FILE, self.settings.names)
        self.env = (
            os.environ
            | BIG_LIMITS
            | {
                "NCINDEX_NEXTCLOUD_URL": self.server.url,
                "NCINDEX_ACCOUNTS": json.dumps({BIG_USER: BIG_PASSWORD}),
                "NCINDEX_REDIS_URL": redis_url,
                "NCINDEX_QDRANT_PATH": str(self.settings.qdrant_path),
                "NCINDEX_LOG_LEVEL": "WARNING",
            }
        )
        self.worker: subprocess.Popen[bytes] | None = None
        self.workers = 0

    def start_worker(self) -> None:
        """Start a worker and wait until its consumer is connected (its heartbeat file)."""
        log = (self.tmp / f"worker-{self.workers}.log").open("wb")
        beat = self.tmp / f"heartbeat-{self.workers}"
        self.workers += 1
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.worker", "worker", "--pool=solo",
             "-Q", names.RECONCILE, "--loglevel=WARNING", "--without-mingle", "--without-gossip"],
            cwd=ROOT.parent, env=self.env | {"NCINDEX_HEARTBEAT_FILE": str(beat)},
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + 120
        while not beat.exists():
            if time.monotonic() > deadline or self.worker.poll() is not None:
                raise RuntimeError("the worker did not start")
            time.sleep(0.1)

    def stop_worker(self) -> float:
        """SIGTERM the worker and wait; returns its peak RSS in MiB."""
        assert self.worker is not None
        rss = peak_rss_mb(self.worker.pid)
        self.worker.send_signal(signal.SIGTERM)
        self.worker.wait(timeout=120)
        return rss

    def progress(self) -> tuple[int, int]:
        """Pages of the unfinished listing kept in Redis, and the requests they made."""
        raw = self.redis.get(f"{self.state.base}:pages")
        if not raw:
            return 0, 0
        progress = json.loads(raw)
        return int(progress["pages"]), int(progress["requests"])

    def kept(self) -> int:
        """Pages of the unfinished listing kept in Redis (0: none)."""
        return self.progress()[0]

    def request_scan(self) -> None:
        producer = celery_app(self.settings)
        producer.send_task(
            names.RECONCILE_SCAN,
            kwargs={"user": BIG_USER, "doc_type": "file"},
            queue=names.RECONCILE,
        )
        producer.close()

    def finished(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while (last := self.state.last()) is None:
            if time.monotonic() > deadline:
                raise TimeoutError("the big account's scan did not finish")
            time.sleep(0.1)
        return last

    def one_pass(self) -> float:
        """The cold scan as one call in this process (as every scan task ran before paging),
        sending its tasks to Redis; seconds."""
        store = QdrantEdgeStore(self.tmp / "qdrant-here", model_slug(self.settings.dense_model))
        store.ensure_collection(DIM)
        services = Services(self.settings, store=store)
        producer = celery_app(self.settings)
        try:
            started = time.perf_counter()
            report = Reconciler(services, Indexer(services), producer).scan(BIG_USER, DocType.FILE)
            seconds = time.perf_counter() - started
        finally:
            producer.close()
            services.close()
        assert report.error is None and report.listed == BIG_DOCS, report.summary()
        return seconds

    def paged(self) -> dict[str, Any]:
        """A cold paged scan by the worker."""
        self.redis.flushdb()
        self.start_worker()
        self.sim.reset_request_counts()
        started = time.perf_counter()
        self.request_scan()
        last = self.finished(1800)
        seconds = time.perf_counter() - started
        rss = self.stop_worker()
        assert last["listed"] == BIG_DOCS and last["error"] is None, last
        return {
            "requests": self.sim.request_count(),
            "pages": last["pages"],
            "seconds": round(seconds, 2),
            "listed": last["listed"],
            "enqueued": last["enqueued"],
            "worker_peak_rss_mb": round(rss, 1),
            "summary": last,
        }

    def killed(self, clean: dict[str, Any], page_requests: int) -> dict[str, Any]:
        """The paged scan, its worker SIGKILLed inside a page half-way and restarted."""
        self.redis.flushdb()
        self.start_worker()
        self.sim.reset_request_counts()
        started = time.perf_counter()
        self.request_scan()
        deadline = time.monotonic() + 900
        while self.kept() < clean["pages"] // 2:
            if time.monotonic() > deadline:
                raise TimeoutError("the scan did not get half-way")
            time.sleep(0.05)
        assert self.worker is not None
        while True:  # freeze half-way through a page, then kill
            kept, kept_requests = self.progress()
            if self.sim.request_count() - kept_requests >= page_requests // 2:
                self.worker.send_signal(signal.SIGSTOP)
                if self.progress() == (kept, kept_requests):
                    break
                self.worker.send_signal(signal.SIGCONT)
            if time.monotonic() > deadline or self.state.last() is not None:
                raise RuntimeError("the scan was not killed half-way through a page")
            time.sleep(0.01)
        kept_at_kill = kept
        os.killpg(self.worker.pid, signal.SIGKILL)
        self.worker.wait(timeout=30)
        killed_at = time.perf_counter()
        requests_before = self.sim.request_count()
        self.start_worker()
        while self.kept() <= kept_at_kill and self.state.last() is None:
            time.sleep(0.1)
        resumed_at = time.perf_counter()
        last = self.finished(1800)
        seconds = time.perf_counter() - started
        self.stop_worker()
        requests = self.sim.request_count()
        redone = requests - clean["requests"]
        same = (
            last["listed"] == clean["listed"]
            and last["changes"] == clean["summary"]["changes"]
            and last["pages"] == clean["pages"]
        )
        return {
            "killed_after_pages": kept_at_kill,
            "requests_before_kill": requests_before,
            "requests_after_restart": requests - requests_before,
            "requests": requests,
            "requests_redone": redone,
            "pages_redone": math.ceil(redone / page_requests),
            "resumed_after_kill": same and 0 <= redone <= page_requests,
            "seconds": round(seconds, 2),
            "seconds_to_resume": round(resumed_at - killed_at, 2),
            "listed": last["listed"],
        }

    def close(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait(timeout=30)
        self.server.close()
        self.sim.close()


def peak_rss_mb(pid: int) -> float:
    """``VmHWM`` (peak resident set) of process ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def big_account(redis_url: str) -> dict[str, Any]:
    """The big account's figures (see the module docstring)."""
    page_requests = Settings().reconcile_page_requests
    with tempfile.TemporaryDirectory() as tmp:
        big = BigAccount(redis_url, Path(tmp))
        try:
            big.redis.flushdb()
            print("big account: one pass in this process …", flush=True)
            one_pass = big.one_pass()
            print(f"  {one_pass:.1f} s; paged by a worker …", flush=True)
            paged = big.paged()
            print(f"  {paged['seconds']} s, {paged['pages']} pages; killed half-way …", flush=True)
            killed = big.killed(paged, page_requests)
            print(f"  {killed}", flush=True)
        finally:
            big.close()
            big.redis.flushdb()
    del paged["summary"]
    return {
        "docs": BIG_DOCS,
        "folders": BIG_FOLDERS,
        "page_requests": page_requests,
        "one_pass_seconds": round(one_pass, 2),
        "paged": paged,
        "killed": killed,
        "worker_limits": {
            k.removeprefix("NCINDEX_").lower(): int(v) for k, v in BIG_LIMITS.items()
        },
    }


def main() -> int:
    docs_total = NOTES + FILES
    redis_server = start_redis()
    sim = NextcloudSimulator()
    sim.add_user(USER, password=PASSWORD)
    print(f"writing {docs_total} documents into the simulator …", flush=True)
    t0 = time.perf_counter()
    docs = fill_simulator(sim)
    print(f"  {time.perf_counter() - t0:.1f} s", flush=True)
    server = serve_simulator(sim, host="127.0.0.1", port=0)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            nextcloud_url=server.url,
            accounts={USER: SecretStr(PASSWORD)},
            redis_url=redis_server.url,
            reconcile_grace_seconds=0,
            data_dir=Path(tmp),
        )
        store = QdrantEdgeStore(Path(tmp) / "qdrant", model_slug(settings.dense_model))
        store.ensure_collection(DIM)
        print("filling the store …", flush=True)
        t0 = time.perf_counter()
        fill_store(store, docs)
        print(f"  {time.perf_counter() - t0:.1f} s", flush=True)
        services = Services(settings, store=store)
        recorder = Recorder()
        rec = Reconciler(services, Indexer(services), recorder)
        try:
            types = (DocType.NOTE, DocType.FILE)
            cold = {t.value: scan(rec, sim, t) for t in types}
            for t, figures in cold.items():
                assert figures["clean"], (t, figures)
            warm_runs = [{t.value: scan(rec, sim, t) for t in types} for _ in range(RUNS)]
            for run in warm_runs:
                for t, figures in run.items():
                    assert figures["clean"], (t, figures)
            sim.put_file(USER, file_path(4321), "# File 4321\nChanged.\n")
            one_change = {"file": scan(rec, sim, DocType.FILE)}
            sim.put_file(USER, note_path(1234), "# Note 1234\nChanged.\n")
            one_change["note"] = scan(rec, sim, DocType.NOTE)
        finally:
            services.close()
    server.close()
    sim.close()
    assert recorder.sent == 2, recorder.sent  # only the two changed documents
    try:
        big = big_account(redis_server.url)
    finally:
        redis_server.stop()

    warm = {
        t: {
            "requests": warm_runs[0][t]["requests"],
            "seconds": statistics.median(r[t]["seconds"] for r in warm_runs),
            "docs": NOTES if t == "note" else FILES,
        }
        for t in ("note", "file")
    }
    for t in warm:
        warm[t]["requests_per_100_docs"] = round(100 * warm[t]["requests"] / warm[t]["docs"], 4)
    requests = sum(w["requests"] for w in warm.values())
    seconds = sum(w["seconds"] for w in warm.values())
    result = {
        "docs": docs_total,
        "requests": requests,
        "requests_per_100_docs": round(100 * requests / docs_total, 4),
        "seconds": round(seconds, 4),
        "per_type": {t: {k: round(v, 4) for k, v in w.items()} for t, w in warm.items()},
        "cold": {
            t: {"requests": c["requests"], "seconds": round(c["seconds"], 3)}
            for t, c in cold.items()
        },
        "one_change": {
            t: {"requests": c["requests"], "seconds": round(c["seconds"], 3), **c["changes"]}
            for t, c in one_change.items()
        },
        "runs": RUNS,
        "target_requests_per_100_docs": 1.0,
        "big_account": big,
        "machine": machine(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }
    table = render(result)
    print(table)
    publish("reconcile", result, "Reconcile", table)
    ok = all(w["requests_per_100_docs"] <= 1.0 for w in warm.values())
    print("target met" if ok else "TARGET MISSED: more than 1 request per 100 documents")
    resumed = big["killed"]["resumed_after_kill"]
    print("big account resumed after the kill" if resumed else "BIG ACCOUNT DID NOT RESUME")
    return 0 if ok and resumed else 1


def machine() -> str:
    """CPU, cores, Python, and the 1-minute load average (seconds depend on it)."""
    load = os.getloadavg()[0]
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {load:.1f} at the end of the run"
    )


def render(r: dict[str, Any]) -> str:
    rows = [
        "## Reconcile",
        "",
        f"`make bench-reconcile` — {r['date']}, {r['machine']}. One account of {r['docs']:,} "
        "documents (5,000 notes in 50 categories, 5,000 markdown files in 50 folders two "
        "levels deep) in the Nextcloud simulator over HTTP; the store (Qdrant Edge) filled "
        "with one right-shaped point per document. Requests counted by the simulator; "
        f"seconds are the median of {r['runs']} runs. Target: ≤ 1 request per 100 documents.",
        "",
        "| scan | doc type | requests | requests / 100 docs | seconds |",
        "|---|---|---:|---:|---:|",
    ]
    for t, w in r["per_type"].items():
        rows.append(
            f"| unchanged rescan | {t} | {w['requests']} | {w['requests_per_100_docs']} "
            f"| {w['seconds']:.3f} |"
        )
    rows.append(
        f"| **unchanged rescan** | **both** | **{r['requests']}** | "
        f"**{r['requests_per_100_docs']}** | **{r['seconds']:.3f}** |"
    )
    for t, c in r["cold"].items():
        rows.append(
            f"| cold scan (no scan state) | {t} | {c['requests']} | "
            f"{round(100 * c['requests'] / 5000, 2)} | {c['seconds']:.3f} |"
        )
    for t, c in r["one_change"].items():
        rows.append(
            f"| one {t} changed | {t} | {c['requests']} | "
            f"{round(100 * c['requests'] / 5000, 2)} | {c['seconds']:.3f} |"
        )
    rows += [
        "",
        "The unchanged rescan is one `Depth: 0` PROPFIND of the files root (its etag is "
        "unchanged, so nothing below is walked) and one Notes list with `pruneBefore` (every "
        'note comes as `{"id": N}`; the whole list fits one chunk). Most of its time is the '
        "manifest scroll of the store. A cold scan walks every folder once (Depth 1) and pages "
        "the Notes list by `chunkSize`; a changed file re-lists only the folders above it "
        "(root `Depth: 0`, then root, area, folder).",
        "",
        *render_big(r["big_account"]),
    ]
    return "\n".join(rows)


def render_big(b: dict[str, Any]) -> list[str]:
    p, k, lim = b["paged"], b["killed"], b["worker_limits"]
    return [
        f"**Big account** (issue 20): a cold scan of {b['docs']:,} markdown files in "
        f"{b['folders']:,} folders two levels deep (no scan state, an empty index, so every "
        "file is new), paged across `ncindex.reconcile_scan` tasks of at most "
        f"{b['page_requests']} requests (`NCINDEX_RECONCILE_PAGE_REQUESTS`, the default) by "
        "one `celery worker` process (solo pool, `reconcile` queue). Seconds run from sending "
        "the task until the scan is recorded; they cover the listing and the enqueueing of "
        f"the {p['enqueued']:,} `ncindex.index_node` tasks (fanned out in "
        "`ncindex.send_actions` parts), **not the indexing**: no worker ran those tasks. "
        f"One pass is the same scan as one call in the benchmark's process (how every scan "
        f"ran before paging: one task holding the whole listing).",
        "",
        "| scan | requests | pages | seconds | worker peak RSS MB |",
        "|---|---:|---:|---:|---:|",
        f"| one pass (before paging) | {p['requests']} | 1 | {b['one_pass_seconds']:.2f} | – |",
        f"| paged | {p['requests']} | {p['pages']} | {p['seconds']:.2f} | "
        f"{p['worker_peak_rss_mb']} |",
        f"| paged, worker SIGKILLed after {k['killed_after_pages']} pages, restarted | "
        f"{k['requests']} | {p['pages']} | {k['seconds']:.2f} | – |",
        "",
        f"Killed half-way through a page and restarted at once, the scan resumed at the last "
        f"page kept (`resumed_after_kill` **{str(k['resumed_after_kill']).lower()}**): only "
        f"the page being listed was listed again ({k['pages_redone']} page redone, "
        f"{k['requests_redone']} requests made twice), with the same result as the clean run. "
        f"Of its {k['seconds']:.0f} s, "
        f"{k['seconds_to_resume']:.0f} s were waiting: the killed page's task comes back when "
        f"Redis redelivers it (visibility timeout {lim['visibility_timeout']} s here, 900 s by "
        "default) and then waits for the dead worker's scan lock to expire (hard limit + 60 s: "
        f"{lim['task_time_limit'] + 60} s here, 360 s by default); the next beat resumes it "
        "the same way. Before paging, this scan was one task: past the soft time limit "
        "(240 s by default, reached at about a quarter of a second per PROPFIND) it failed "
        "and the next scan started from zero, and a killed worker's scan started from zero.",
        "",
    ]


if __name__ == "__main__":
    sys.exit(main())
