"""Benchmark: the webhook receiver and the search API under load (``make bench-load``).

1. **Receiver burst.** 10,000 webhook deliveries (NodeWrittenEvent, ``DOCS`` documents, each
   written ``EVENTS / DOCS`` times, interleaved as a save storm would be) POSTed by ``wrk``
   (C, :data:`WRK_SCRIPT`) from ``SENDERS`` senders, each sending its next delivery when the
   last one was answered, on a new connection — as Nextcloud's ``occ background-job:worker``
   processes do: one request at a time each (its docs suggest running four or more), and a
   new HTTP client, so a new connection, for every delivery (``WebhookCall::run`` calls
   ``IClientService::newClient``, which builds a new Guzzle ``CurlHandler``). The
   receiver runs under gunicorn (``deploy/gunicorn.conf.py``, ``-w 2``, its default threads)
   with a private Redis as the broker; a bare Flask endpoint that does no work
   (:data:`bare_app`: read the body, answer 202) is served by gunicorn the same way and gets
   the same bodies in the same run, in rounds alternating between them so that the other
   jobs on the machine fall on all alike: events/s accepted, p50/p90/p99 latency for each,
   and the ratio (:func:`ratios`). Targets: receiver ≥ 0.6 × the bare rate, p99 < 20 ms.
   Every delivery must be answered 202 and its counters (queued + coalesced) must add up to
   the events. A third endpoint, :data:`roundtrip_app`, is the bare one plus one Redis
   ``SET NX PX GET`` per delivery — the least any receiver that queues durably must do for an
   event it does not coalesce locally — so the table shows how much of the gap one round trip
   alone makes.
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
The simulator runs in this process over HTTP; the search clients run in child processes so
the client's GIL is not the figure. Needs ``wrk`` (``make bench-load`` installs it).
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import platform
import random
import secrets
import signal
import statistics
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
EVENTS = int(os.environ.get("BENCH_LOAD_EVENTS", "10000"))
DOCS = int(os.environ.get("BENCH_LOAD_DOCS", "500"))
WRK_SCRIPT = ROOT / "benchmarks" / "bench_load.lua"
#: Concurrent webhook senders: Nextcloud's docs suggest four or more ``occ background-job:worker``
#: processes for ``WebhookCall`` jobs, each sending one request at a time.
SENDERS = int(os.environ.get("BENCH_LOAD_SENDERS", "4"))
WARMUP = 200  # bodies sent to each endpoint first (connections, lazy imports): not measured
#: The burst is split into rounds, the endpoints taking turns in each.
ROUNDS = int(os.environ.get("BENCH_LOAD_ROUNDS", "20"))
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


roundtrip_app = Flask("roundtrip")
roundtrip_app.add_url_rule("/livez", view_func=_bare_livez)


@functools.cache
def _roundtrip_redis() -> Any:
    """The endpoint's Redis client, made in the gunicorn worker on first use, as the receiver
    makes its own."""
    import redis

    url = os.environ["NCINDEX_REDIS_URL"]
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


@roundtrip_app.post("/hooks/nextcloud")
def _roundtrip_hook() -> Response:
    """The bare endpoint plus one Redis round trip: the ``SET NX PX GET`` of the receiver's
    debounce claim."""
    request.get_data()
    _roundtrip_redis().set("bench:roundtrip", 1, nx=True, px=8000, get=True)
    return Response(b'{"queued": 0}', status=202, mimetype="application/json")


# --- processes ----------------------------------------------------------------------------


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


def wrk(url: str, secret: str, bodies: list[bytes], out: Path) -> dict[str, Any]:
    """POST every body once to ``url`` with ``wrk`` and :data:`WRK_SCRIPT` from ``SENDERS``
    senders, a new connection per delivery; what the script wrote (files ``out.*``), with
    latencies in ms."""
    lines = out.with_name(out.name + ".bodies")
    lines.write_bytes(b"\n".join(bodies) + b"\n")
    done = out.with_name(out.name + ".done")
    done.write_text("")
    with subprocess.Popen(
        ["wrk", "-t", str(SENDERS), "-c", str(SENDERS), "-d", "300s", "--timeout", "30s",
         "-s", str(WRK_SCRIPT), url, "--", str(lines), str(out), SECRET_HEADER, secret,
         str(SENDERS)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    ) as proc:  # fmt: skip
        # wrk would sleep for all of -d: each thread notes in ``done`` that it has finished
        while len(done.read_text().splitlines()) < SENDERS and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        log = proc.communicate(timeout=60)[0].decode()
    rows = [row.split() for row in done.read_text().splitlines()]
    if len(rows) < SENDERS:
        raise RuntimeError(f"wrk ended before every body was answered:\n{log}")
    statuses: dict[str, int] = {}
    for row in rows:
        for pair in row[7].split(","):
            code, n = pair.split("=")
            statuses[code] = statuses.get(code, 0) + int(n)
    latencies = [
        float(x) / 1000
        for row in rows
        for x in out.with_name(f"{out.name}.{row[0]}.lat").read_text().split()
    ]
    run = {
        "sent": sum(int(row[1]) for row in rows),
        "answered": sum(int(row[2]) for row in rows),
        "queued": sum(int(row[3]) for row in rows),
        "coalesced": sum(int(row[4]) for row in rows),
        "seconds": max(float(row[6]) for row in rows) - min(float(row[5]) for row in rows),
        "statuses": statuses,
        "latencies": latencies,
    }
    if not run["sent"] == run["answered"] == len(latencies) == len(bodies):
        raise RuntimeError(f"wrk did not deliver every body exactly once: {run | {'latencies': 0}}")
    return run


def bursts(urls: dict[str, str], secret: str, bodies: list[bytes], tmp: Path) -> dict[str, Any]:
    """Deliver every body once to each of ``urls`` ({name: url}), in ``ROUNDS`` rounds of
    consecutive bodies; the endpoints take turns in each round, in order in even rounds and
    in reverse in odd ones (ABC CBA ABC…), so that whatever else the machine runs falls on all
    alike. ``WARMUP`` bodies go to each first (connections, lazy
    imports), not counted.

    Per endpoint: events/s (events ÷ the summed seconds from a round's first request to its
    last answer), each round's events/s (``round_rates``), latency percentiles in ms over all
    events, answers by status, and the summed ``queued``/``coalesced`` counters of the
    answers."""
    names = list(urls)
    for name in names:
        wrk(urls[name], secret, bodies[:WARMUP], tmp / f"{name}-warm")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    size = -(-len(bodies) // ROUNDS)
    for r in range(ROUNDS):
        chunk = bodies[r * size : (r + 1) * size]
        for name in names if r % 2 == 0 else names[::-1]:
            runs[name].append(wrk(urls[name], secret, chunk, tmp / f"{name}-{r}"))
    result = {}
    for name, parts in runs.items():
        latencies = sorted(x for run in parts for x in run["latencies"])
        seconds = sum(run["seconds"] for run in parts)
        statuses: dict[str, int] = {}
        for run in parts:
            for code, n in run["statuses"].items():
                statuses[code] = statuses.get(code, 0) + n
        result[name] = {
            "events": len(latencies),
            "seconds": round(seconds, 3),
            "events_per_s": round(len(latencies) / seconds, 1),
            "round_rates": [round(len(run["latencies"]) / run["seconds"], 1) for run in parts],
            "p50_ms": round(percentile(latencies, 50), 2),
            "p90_ms": round(percentile(latencies, 90), 2),
            "p99_ms": round(percentile(latencies, 99), 2),
            "max_ms": round(latencies[-1], 2),
            "statuses": dict(sorted(statuses.items())),
            "queued": sum(run["queued"] for run in parts),
            "coalesced": sum(run["coalesced"] for run in parts),
        }
    return result


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


def ratios(endpoint: dict[str, Any], bare: dict[str, Any]) -> dict[str, Any]:
    """``endpoint``'s rate ÷ the bare one's over the whole burst (``burst``, the figure held to
    the target), and the lowest, median and highest of the rounds' ratios (each round's pair
    ran back to back): how much the machine moved them. The rounds are not alike: a
    document's first write is in the first round, so the receiver queues most there."""
    each = sorted(e / b for e, b in zip(endpoint["round_rates"], bare["round_rates"], strict=True))
    return {
        "burst": round(endpoint["events_per_s"] / bare["events_per_s"], 3),
        "low": round(each[0], 3),
        "median": round(statistics.median(each), 3),
        "high": round(each[-1], 3),
    }


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
    from results_md import publish

    from ncindex.documents import text_hash
    from ncindex.names import Names
    from ncindex.redis_server import free_port, start_redis
    from ncindex.settings import Settings
    from ncindex.simulator import NextcloudSimulator, serve_simulator
    from ncindex.store import model_slug
    from ncindex.store.qdrant_edge import QdrantEdgeStore
    from ncindex.sync.status import settled

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
    result: dict[str, Any] = {
        "date": datetime.now(UTC).date().isoformat(),
        "machine": machine(),
        "events": EVENTS,
        "docs": DOCS,
        "senders": SENDERS,
    }
    procs: list[subprocess.Popen[bytes]] = []
    try:
        # 1. the bare endpoint and the receiver, served the same way, in alternating rounds
        urls = {}
        for name, app in (
            ("bare", "bench_load:bare_app"),
            ("roundtrip", "bench_load:roundtrip_app"),
            ("receiver", "webhook_receiver.wsgi:app"),
        ):
            port = free_port()
            procs.append(gunicorn(app, port, env, tmp / f"{name}.log", ["-w", "2"]))
            urls[name] = f"http://127.0.0.1:{port}/hooks/nextcloud"
        load_before = os.getloadavg()[0]
        result |= bursts(urls, secret, bodies, tmp)
        result["burst_load"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
        for proc in procs:
            stop(proc)
        result["ratios"] = {
            name: ratios(result[name], result["bare"]) for name in ("receiver", "roundtrip")
        }
        print(
            json.dumps(
                {k: result[k] for k in ("bare", "roundtrip", "receiver", "ratios")}, indent=2
            )
        )

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

        time.sleep(3)
        while not settled(client, Names(), ("ingest", "index", "evict")):
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
    publish("load", result, "Load", render(result))
    print(render(result))
    r, idx = result["receiver"], result["indexing"]
    ok = (
        result["ratios"]["receiver"]["burst"] >= 0.6
        and r["p99_ms"] < 20
        and r["statuses"] == {"202": EVENTS}
        and r["queued"] + r["coalesced"] == EVENTS
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
    b, rt, rc = r["bare"], r["roundtrip"], r["receiver"]
    rr, rt_r = r["ratios"]["receiver"], r["ratios"]["roundtrip"]
    idx, s = r["indexing"], r["search"]
    one = r["search_single"]
    ratio_verdict = verdict(rr["burst"] >= 0.6, f"{0.6 - rr['burst']:.3f} short")
    p99_verdict = verdict(rc["p99_ms"] < 20, f"{rc['p99_ms'] - 20:.1f} ms over")
    return "\n".join(
        [
            "## Load",
            "",
            f"`make bench-load` — {r['date']}, {r['machine']}. {r['events']:,} webhook "
            f"deliveries (NodeWrittenEvent over {r['docs']:,} documents, each written "
            f"{r['events'] // r['docs']} times, interleaved) sent by `wrk` "
            f"(`benchmarks/bench_load.lua`) from {r['senders']} senders, each sending its next "
            "delivery once the last was answered, on a new connection: Nextcloud delivers "
            "webhooks from `occ background-job:worker` processes (or cron), one request at a "
            "time each (its admin manual suggests four or more of them), and its `WebhookCall` "
            "job makes a new HTTP client, so a new connection, for every delivery. The "
            "receiver, a bare Flask "
            "endpoint that does no work (read the body, answer 202) and the bare endpoint plus "
            "one Redis round trip (the `SET NX PX GET` of the receiver's debounce claim), all "
            "under gunicorn with `deploy/gunicorn.conf.py`, `-w 2`, its default 4 threads, "
            f"measured in the same run in {ROUNDS} rounds of {r['events'] // ROUNDS:,} taking "
            f"turns (1-min load average {r['burst_load'][0]} before the burst, "
            f"{r['burst_load'][1]} after: other jobs share the two cores). Latency: from wrk "
            "asking for the request on a connected socket to its complete answer. Targets: "
            "receiver ≥ 0.6 × bare over the whole burst, p99 < 20 ms.",
            "",
            "| endpoint | events | events/s | p50 ms | p90 ms | p99 ms | max ms | answers | "
            "queued | coalesced |",
            "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
            f"| bare Flask | {b['events']:,} | {b['events_per_s']} | {b['p50_ms']} | "
            f"{b['p90_ms']} | {b['p99_ms']} | {b['max_ms']} | {b['statuses']} | – | – |",
            f"| bare + one Redis round trip | {rt['events']:,} | {rt['events_per_s']} | "
            f"{rt['p50_ms']} | {rt['p90_ms']} | {rt['p99_ms']} | {rt['max_ms']} | "
            f"{rt['statuses']} | – | – |",
            f"| receiver | {rc['events']:,} | {rc['events_per_s']} | {rc['p50_ms']} | "
            f"{rc['p90_ms']} | {rc['p99_ms']} | {rc['max_ms']} | {rc['statuses']} | "
            f"{rc['queued']:,} | {rc['coalesced']:,} |",
            "",
            "Rate ÷ the bare endpoint's, over the whole burst and by round (each round's "
            "endpoints ran back to back; the receiver queues most in the first round, where "
            "each document's first write is):",
            "",
            "| endpoint | whole burst | lowest round | median round | highest round |",
            "|---|---:|---:|---:|---:|",
            f"| **receiver** | **{rr['burst']}** | {rr['low']} | {rr['median']} | {rr['high']} |",
            f"| bare + one Redis round trip | {rt_r['burst']} | {rt_r['low']} | {rt_r['median']} | "
            f"{rt_r['high']} |",
            "",
            f"Targets: ratio {rr['burst']} ≥ 0.6 — {ratio_verdict}; receiver p99 "
            f"{rc['p99_ms']} ms < 20 ms — {p99_verdict} (bare endpoint p99 {b['p99_ms']} ms). "
            f"Every delivery answered 202 and counted: {rc['queued']:,} queued + "
            f"{rc['coalesced']:,} coalesced = {rc['queued'] + rc['coalesced']:,}. The ratio "
            "moves with the machine's load: each receiver delivery waits for redis-server to get "
            "a core (one round trip for the debounce key, a Celery publish for the queued ones), "
            "the bare endpoint waits for nothing — the round-trip row shows what one `SET` alone "
            "costs against it. `docs/RELIABILITY.md` lists runs at other load averages.",
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


def verdict(met: bool, miss: str) -> str:
    """``"met"``, or ``"missed"`` with by how much."""
    return "met" if met else f"missed ({miss})"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.exit(main())
