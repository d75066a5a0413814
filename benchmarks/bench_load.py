"""Benchmark: the webhook receiver and the search API under load (``make bench-load``).

1. **Receiver burst.** 10,000 webhook deliveries (NodeWrittenEvent, ``DOCS`` documents, each
   written ``EVENTS / DOCS`` times, interleaved as a save storm would be) POSTed by
   ``CLIENT_PROCS`` × ``CLIENT_THREADS`` keep-alive clients to the receiver under gunicorn
   (``deploy/gunicorn.conf.py``, ``-w 2``, its default threads) with a private Redis as the
   broker. The same clients, in the same run, first POST the same bodies to a bare Flask
   endpoint that does no work (:data:`bare_app`: read the body, answer 202) served by
   gunicorn the same way: events/s accepted and p50/p99 latency for both, and the ratio.
   Targets: receiver ≥ 0.6 × the bare rate, p99 < 20 ms.
2. **Indexing to the end.** Then a real ``celery worker`` (solo pool, Qdrant Edge folder)
   works off the queue: every one of the ``DOCS`` documents must be indexed exactly once —
   one version, chunks 0..n-1, no duplicate point — and the number of document downloads
   and of embedded versions is reported. ``DOCS`` is smaller than 10,000 because embedding
   10,000 documents takes minutes on two cores; the receiver part is the full 10,000 events.
3. **Search load.** The search API under gunicorn (one process — Qdrant Edge allows one per
   folder — with ``SEARCH_THREADS`` threads) over that index, verification against the
   simulator: ``SEARCH_CLIENTS`` concurrent clients search for ``SEARCH_SECONDS`` s: requests,
   p50, p95, errors — after one client alone for ``SINGLE_SECONDS`` s (the service time).

Writes ``benchmarks/results/load.json`` and the "Load" section of ``benchmarks/RESULTS.md``.
The simulator runs in this process over HTTP; the load clients run in child processes so the
client's GIL is not the figure.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flask import Flask, Response, request

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RESULTS_JSON = ROOT / "benchmarks" / "results" / "load.json"
RESULTS_MD = ROOT / "benchmarks" / "RESULTS.md"
EVENTS = int(os.environ.get("BENCH_LOAD_EVENTS", "10000"))
DOCS = int(os.environ.get("BENCH_LOAD_DOCS", "500"))
CLIENT_PROCS = 2
CLIENT_THREADS = 4
SEARCH_CLIENTS = 50
SEARCH_SECONDS = float(os.environ.get("BENCH_LOAD_SEARCH_SECONDS", "60"))
SEARCH_THREADS = 16
SINGLE_SECONDS = 10.0  # one client first: the service time without queueing
USER, PASSWORD = "alice", "alice-load-pw"
WRITTEN = "OCP\\Files\\Events\\Node\\NodeWrittenEvent"
SECRET_HEADER = "X-Ncindex-Secret"
QUERY_WORDS = [
    "tide",
    "harbour",
    "gauge",
    "gulls",
    "buoy",
    "reef",
    "log",
    "terns",
    "storm",
    "pier",
    "lighthouse",
    "oyster",
    "keeper",
    "lens",
]

# --- the bare endpoint (gunicorn imports ``bench_load:bare_app``) ---------------------------

bare_app = Flask("bare")


@bare_app.post("/hooks/nextcloud")
def _bare_hook() -> Response:
    """Read the body and answer 202: the cost of HTTP + gunicorn + Flask alone."""
    request.get_data()
    return Response(b'{"queued": 0}', status=202, mimetype="application/json")


@bare_app.get("/livez")
def _bare_livez() -> Response:
    return Response(b"ok")


# --- processes ----------------------------------------------------------------------------


def free_port() -> int:
    """A free loopback port."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gunicorn(
    app: str, port: int, env: dict[str, str], log: Path, extra: list[str]
) -> subprocess.Popen[bytes]:
    """Start ``gunicorn -c deploy/gunicorn.conf.py … app`` on 127.0.0.1:``port``."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "gunicorn"), "-c", str(ROOT / "deploy" / "gunicorn.conf.py"),
             "--bind", f"127.0.0.1:{port}", "--pythonpath", str(ROOT / "benchmarks"),
             *extra, app],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    wait_http(f"http://127.0.0.1:{port}/livez", proc)
    return proc


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    """Wait until ``url`` answers 200 (fail if ``proc`` exits)."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(url)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM and wait (SIGKILL after 60 s)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- load clients (run in child processes) -----------------------------------------------


def _post_many(args: tuple[str, dict[str, str], list[bytes], int]) -> dict[str, Any]:
    """POST ``bodies`` to ``url`` from ``threads`` keep-alive clients; latencies in ms and
    the answers' status codes and JSON counters."""
    import httpx

    url, headers, bodies, threads = args
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    queued = coalesced = 0
    lock = threading.Lock()
    slices = [bodies[i::threads] for i in range(threads)]

    def run(mine: list[bytes]) -> None:
        nonlocal queued, coalesced
        with httpx.Client(timeout=30, headers=headers) as client:
            for body in mine:
                t0 = time.perf_counter()
                response = client.post(url, content=body)
                ms = (time.perf_counter() - t0) * 1000
                answer = response.json() if response.status_code == 202 else {}
                with lock:
                    latencies.append(ms)
                    statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                    queued += int(answer.get("queued", 0))
                    coalesced += int(answer.get("coalesced", 0))

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(run, slices))
    return {"latencies": latencies, "statuses": statuses, "queued": queued, "coalesced": coalesced}


def burst(url: str, headers: dict[str, str], bodies: list[bytes]) -> dict[str, Any]:
    """Deliver every body once, from ``CLIENT_PROCS`` × ``CLIENT_THREADS`` clients."""
    parts = [bodies[i::CLIENT_PROCS] for i in range(CLIENT_PROCS)]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(CLIENT_PROCS, mp_context=ctx) as pool:
        warm = [(url, headers, part[:20], CLIENT_THREADS) for part in parts]
        list(pool.map(_post_many, warm))  # connections, imports: not measured
        t0 = time.perf_counter()
        results = list(pool.map(_post_many, [(url, headers, p, CLIENT_THREADS) for p in parts]))
        seconds = time.perf_counter() - t0
    latencies = sorted(x for r in results for x in r["latencies"])
    statuses: dict[str, int] = {}
    for r in results:
        for code, n in r["statuses"].items():
            statuses[str(code)] = statuses.get(str(code), 0) + n
    return {
        "events": len(bodies),
        "seconds": round(seconds, 3),
        "events_per_s": round(len(bodies) / seconds, 1),
        "p50_ms": round(percentile(latencies, 50), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "statuses": statuses,
        "queued": sum(r["queued"] for r in results),
        "coalesced": sum(r["coalesced"] for r in results),
    }


def _search_clients(args: tuple[str, tuple[str, str], int, float, int]) -> dict[str, Any]:
    """``clients`` threads searching ``url`` until ``seconds`` pass; latencies and errors."""
    import httpx

    url, auth, clients, seconds, seed = args
    words = QUERY_WORDS
    rng = random.Random(seed)
    latencies: list[float] = []
    errors: dict[str, int] = {}
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def run(i: int) -> None:
        local = random.Random(rng.random() + i)
        with httpx.Client(timeout=60, auth=auth) as client:
            while time.monotonic() < end:
                body = {"query": " ".join(local.sample(words, 3)), "limit": 10}
                t0 = time.perf_counter()
                try:
                    response = client.post(url, json=body)
                    status = str(response.status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                ms = (time.perf_counter() - t0) * 1000
                with lock:
                    if status == "200":
                        latencies.append(ms)
                    else:
                        errors[status] = errors.get(status, 0) + 1

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(run, range(clients)))
    return {"latencies": latencies, "errors": errors}


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of sorted ``values``."""
    if not values:
        return float("nan")
    k = max(0, min(len(values) - 1, round(q / 100 * len(values) + 0.5) - 1))
    return values[k]


# --- the benchmark -------------------------------------------------------------------------


def doc_text(i: int) -> str:
    """Document ``i``: a short tide log of its own words."""
    return (
        f"Tide log {i}: the harbour gauge read {i * 13 % 997} cm, {i % 7} gulls sat on buoy "
        f"{i}, terns nested on reef {i % 31}; the pier lighthouse keeper noted storm {i % 11}."
    )


def main() -> int:
    """Run the three parts; print the table; write the JSON and the RESULTS.md section."""
    import httpx
    import redis

    from ncindex.documents import text_hash
    from ncindex.redis_server import start_redis
    from ncindex.settings import Settings
    from ncindex.store import model_slug
    from ncindex.store.qdrant_edge import QdrantEdgeStore
    from ncindex.testing import NextcloudSimulator, serve_simulator

    tmp = Path(tempfile.mkdtemp(prefix="ncindex-bench-load-"))
    redis_proc = start_redis()
    sim = NextcloudSimulator(delivery_delay=(0.0, 0.0))
    sim.add_user(USER, password=PASSWORD, display_name="Alice")
    sim.drop_rate = 1.0  # the benchmark is the only sender of webhook deliveries
    sim_server = serve_simulator(sim, host="127.0.0.1", port=0)
    ids = [sim.put_file(USER, f"/Tides/log-{i:05}.txt", doc_text(i).encode()) for i in range(DOCS)]
    secret = secrets.token_urlsafe(16)
    model_dir = Settings().model_dir.resolve()
    env = os.environ | {
        "NCINDEX_NEXTCLOUD_URL": sim_server.url,
        "NCINDEX_ACCOUNTS": json.dumps({USER: PASSWORD}),
        "NCINDEX_REDIS_URL": redis_proc.url,
        "NCINDEX_WEBHOOK_SECRET": secret,
        "NCINDEX_MODEL_DIR": str(model_dir),
        "NCINDEX_QDRANT_PATH": str(tmp / "qdrant"),
        "NCINDEX_DEBOUNCE_SECONDS": "2",
        "NCINDEX_SEARCH_RATE_LIMIT": "",
        "NCINDEX_USER_CACHE_SECONDS": "60",
        "NCINDEX_LOG_LEVEL": "WARNING",
        "NCINDEX_LOG_JSON": "true",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp / "prometheus"),
        "GUNICORN_WORKERS": "2",
    }
    bodies = []
    for n in range(EVENTS):
        file_id = ids[n % DOCS]
        envelope = {
            "event": {
                "class": WRITTEN,
                "node": {"id": file_id, "path": f"/{USER}/files/Tides/log-{n % DOCS:05}.txt"},
            },
            "user": {"uid": USER, "displayName": "Alice"},
            "time": 1767225600 + n,
        }
        bodies.append(json.dumps(envelope).replace("/", "\\/").encode())
    headers = {SECRET_HEADER: secret}
    result: dict[str, Any] = {
        "date": datetime.now(UTC).date().isoformat(),
        "machine": machine(),
        "events": EVENTS,
        "docs": DOCS,
        "clients": CLIENT_PROCS * CLIENT_THREADS,
    }
    procs: list[subprocess.Popen[bytes]] = []
    try:
        # 1. bare endpoint, then the receiver, served the same way
        port = free_port()
        bare = gunicorn("bench_load:bare_app", port, env, tmp / "bare.log", ["-w", "2"])
        procs.append(bare)
        result["bare"] = burst(f"http://127.0.0.1:{port}/hooks/nextcloud", headers, bodies)
        stop(bare)
        port = free_port()
        receiver = gunicorn(
            "webhook_receiver.wsgi:app", port, env, tmp / "receiver.log", ["-w", "2"]
        )
        procs.append(receiver)
        result["receiver"] = burst(f"http://127.0.0.1:{port}/hooks/nextcloud", headers, bodies)
        stop(receiver)
        result["ratio"] = round(
            result["receiver"]["events_per_s"] / result["bare"]["events_per_s"], 3
        )
        print(json.dumps({k: result[k] for k in ("bare", "receiver", "ratio")}, indent=2))

        # 2. a real worker indexes the queue to the end
        client = redis.Redis.from_url(redis_proc.url)
        t0 = time.perf_counter()
        with (tmp / "worker.log").open("wb") as out:
            worker = subprocess.Popen(
                [str(BIN / "celery"), "-A", "workers.worker", "worker", "--pool=solo",
                 "-Q", "ingest,index,evict", "--loglevel=WARNING",
                 "--without-mingle", "--without-gossip"],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        procs.append(worker)

        def settled() -> bool:
            busy = any(client.llen(q) for q in ("ingest", "index", "evict"))
            busy = busy or bool(client.hlen("unacked"))
            return not busy and not any(True for _ in client.scan_iter("ncindex:debounce:*"))

        time.sleep(3)
        while not settled():
            if worker.poll() is not None:
                raise RuntimeError("the worker exited")
            time.sleep(1)
        index_seconds = time.perf_counter() - t0
        stop(worker)
        store = QdrantEdgeStore(tmp / "qdrant", model_slug(Settings().dense_model))
        missing = duplicated = stale = points = 0
        for i, file_id in enumerate(ids):
            found = store.document_points(f"file:{file_id}")
            points += len(found)
            if not found:
                missing += 1
                continue
            payloads = [p.payload for p in found]
            if {p["content_hash"] for p in payloads} != {text_hash(doc_text(i))}:
                stale += 1
            if sorted(p["chunk_index"] for p in payloads) != list(range(len(found))):
                duplicated += 1
        total = store.count()
        store.close()
        result["indexing"] = {
            "docs": DOCS,
            "indexed": DOCS - missing,
            "missing": missing,
            "stale": stale,
            "duplicated": duplicated,
            "points": total,
            "extra_points": total - points,
            "downloads": sim.request_count("webdav", "GET"),
            "seconds": round(index_seconds, 1),
            "deadletters": client.hlen("ncindex:deadletter"),
        }
        print(json.dumps(result["indexing"], indent=2))

        # 3. 50 concurrent searches for SEARCH_SECONDS
        port = free_port()
        search = gunicorn(
            "search_api.wsgi:app", port, env | {"GUNICORN_THREADS": str(SEARCH_THREADS)},
            tmp / "search.log", ["-w", "1"],
        )  # fmt: skip
        procs.append(search)
        url = f"http://127.0.0.1:{port}/v1/search"
        warm = httpx.post(url, json={"query": "tide"}, auth=(USER, PASSWORD), timeout=120)
        assert warm.status_code == 200, warm.text
        single = _search_clients((url, (USER, PASSWORD), 1, SINGLE_SECONDS, 99))
        one = sorted(single["latencies"])
        result["search_single"] = {
            "clients": 1,
            "requests": len(one),
            "p50_ms": round(percentile(one, 50), 1),
            "p95_ms": round(percentile(one, 95), 1),
            "errors": sum(single["errors"].values()),
        }
        procs_n = 5
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(procs_n, mp_context=ctx) as pool:
            t0 = time.perf_counter()
            parts = list(
                pool.map(
                    _search_clients,
                    [(url, (USER, PASSWORD), SEARCH_CLIENTS // procs_n, SEARCH_SECONDS, s)
                     for s in range(procs_n)],
                )
            )  # fmt: skip
            seconds = time.perf_counter() - t0
        stop(search)
        latencies = sorted(x for p in parts for x in p["latencies"])
        errors: dict[str, int] = {}
        for p in parts:
            for k, v in p["errors"].items():
                errors[k] = errors.get(k, 0) + v
        result["search"] = {
            "clients": SEARCH_CLIENTS,
            "seconds": round(seconds, 1),
            "requests": len(latencies) + sum(errors.values()),
            "ok": len(latencies),
            "per_s": round(len(latencies) / seconds, 1),
            "p50_ms": round(percentile(latencies, 50), 1),
            "p95_ms": round(percentile(latencies, 95), 1),
            "errors": sum(errors.values()),
            "error_kinds": errors,
        }
        print(json.dumps(result["search"], indent=2))
    finally:
        for proc in procs:
            stop(proc)
        sim_server.close()
        redis_proc.stop()
    result["machine"] = machine()
    RESULTS_JSON.parent.mkdir(parents=True, exist_ok=True)
    RESULTS_JSON.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    write_section(render(result))
    print(render(result))
    r, idx = result["receiver"], result["indexing"]
    ok = (
        result["ratio"] >= 0.6
        and r["p99_ms"] < 20
        and r["statuses"] == {"202": EVENTS}
        and idx["missing"] == idx["stale"] == idx["duplicated"] == idx["extra_points"] == 0
        and result["search"]["errors"] == 0
    )
    print("targets met" if ok else "TARGET MISSED (see the table)")
    return 0 if ok else 1


def machine() -> str:
    """CPU, cores, Python, and the 1-minute load average (times depend on it)."""
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f} at the end of the run"
    )


def render(r: dict[str, Any]) -> str:
    """The "## Load" section."""
    b, rc, idx, s = r["bare"], r["receiver"], r["indexing"], r["search"]
    one = r["search_single"]
    return "\n".join(
        [
            "## Load",
            "",
            f"`make bench-load` — {r['date']}, {r['machine']}. {r['events']:,} webhook "
            f"deliveries (NodeWrittenEvent over {r['docs']:,} documents, each written "
            f"{r['events'] // r['docs']} times, interleaved) from {r['clients']} keep-alive "
            "clients in 2 processes; the receiver and a bare Flask endpoint that does no work "
            "(read the body, answer 202) both under gunicorn with `deploy/gunicorn.conf.py`, "
            "`-w 2`, measured in the same run. Targets: receiver ≥ 0.6 × bare, p99 < 20 ms.",
            "",
            "| endpoint | events | events/s | p50 ms | p99 ms | answers | queued | coalesced |",
            "|---|---:|---:|---:|---:|---|---:|---:|",
            f"| bare Flask | {b['events']:,} | {b['events_per_s']} | {b['p50_ms']} | "
            f"{b['p99_ms']} | {b['statuses']} | – | – |",
            f"| receiver | {rc['events']:,} | {rc['events_per_s']} | {rc['p50_ms']} | "
            f"{rc['p99_ms']} | {rc['statuses']} | {rc['queued']} | {rc['coalesced']} |",
            f"| **ratio** | | **{r['ratio']}** | | | | | |",
            "",
            f"Indexing to the end (one `celery worker`, solo pool): {idx['indexed']:,} of "
            f"{idx['docs']:,} documents indexed, {idx['missing']} missing, {idx['stale']} "
            f"stale, {idx['duplicated']} with duplicate chunks, {idx['extra_points']} extra "
            f"points, {idx['deadletters']} parked; {idx['downloads']:,} downloads; "
            f"{idx['seconds']} s after the burst. Only {idx['docs']:,} distinct documents "
            "(not 10,000) because embedding 10,000 takes minutes on two cores; the debounce "
            "window (2 s) coalesces repeated writes of one document.",
            "",
            f"Search: {s['clients']} concurrent clients for {s['seconds']} s against the search "
            f"API under gunicorn (`-w 1`, {SEARCH_THREADS} threads: Qdrant Edge allows one "
            "process per folder), verification against the simulator over HTTP.",
            "",
            "| clients | requests | ok/s | p50 ms | p95 ms | errors |",
            "|---:|---:|---:|---:|---:|---:|",
            f"| 1 | {one['requests']:,} | – | {one['p50_ms']} | {one['p95_ms']} | "
            f"{one['errors']} |",
            f"| {s['clients']} | {s['requests']:,} | {s['per_s']} | {s['p50_ms']} | "
            f"{s['p95_ms']} | {s['errors']} {s['error_kinds'] or ''} |",
            "",
            "With 50 clients the latency is mostly waiting: throughput is bounded by the CPU "
            "(query embedding and fusion; two cores shared with everything else on the "
            "machine), so p50 ≈ clients ÷ throughput.",
            "",
        ]
    )


def write_section(section: str) -> None:
    """Replace (or append) the "## Load" section of RESULTS.md, keeping the others."""
    text = RESULTS_MD.read_text(encoding="utf-8") if RESULTS_MD.exists() else "# Benchmarks\n\n"
    start = text.find("## Load")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + (text[end + 1 :] if end >= 0 else "")
    RESULTS_MD.write_text(text.rstrip("\n") + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.exit(main())
