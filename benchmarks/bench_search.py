"""Benchmark: verified filtered hybrid search latency on Qdrant Edge (``make bench-search``).

For each corpus size (10,000 and 100,000 chunks) a Qdrant Edge store in a temporary folder is
filled with points of the right shape (DESIGN §13): a random unit dense vector of the model's
dimension, the BM25 vector of a real SciFact text (three-sentence pieces of the abstracts in
``/work/shared/data/scifact/corpus.jsonl``, reused cyclically), and real payloads
(``build_payload``) of four chunks per document spread over 20 users (owner plus shares),
notes and files in several folders, a year of modification times, tags. Nothing but the
queries is embedded, and those for real (the SciFact claims, dense + BM25).

Verification is answered by a tiny HTTP server that sleeps ``VERIFY_MS`` (5 ms) per request,
like a nearby Nextcloud: Notes ``GET /notes/{id}`` and WebDAV ``SEARCH`` by file id.

Each query runs :meth:`ncindex.search.service.SearchService.search` as ``alice`` with a realistic
filter (notes and files, modified in the last half year, under ``/Projects`` or ``/Notes``,
always AND-ed with her ``acl``), and, in the same iteration, the bare parts: one real query
embedding, the bare engine query with the same filter and sizes (its hits carrying
no payload, then made ready for grouping as the search's rounds do,
:func:`~ncindex.search.service.keyed`; runs before 2026-12-05's last read each hit's
``doc_key``) for another query of the same kind, which the
engine has not been asked yet, as the search's own had not been (:func:`paired_queries`;
before 2026-12-05 it asked the searched query again, warm), one verification round trip (a
WebDAV SEARCH for one file id, the request a page's check is; runs written before
``round_trip_request`` was, a Notes API ``GET``).
``bound`` per query = embed + bare query + one round trip; reported ``bound_ms`` is its p95
(and ``bound_p50_ms`` its median), ``ratio_p95`` = search p95 / bound p95 (target ≤ 1.3).

Writes ``benchmarks/results/search.json`` and the "Search" section of ``benchmarks/RESULTS.md``.
Options: ``--sizes 10000,100000``, ``--queries N``, ``--optimize`` (build HNSW first; the
pipeline does not, so the default measures the store as the pipeline leaves it).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import SecretStr
from results_md import publish

from ncindex.documents import (
    Chunk,
    DocRef,
    DocType,
    SourceDocument,
    build_payload,
    point_id,
    principal,
)
from ncindex.embedding.analyzer import ANALYZER_VERSION
from ncindex.embedding.embedder import Embedder
from ncindex.embedding.models import install_models
from ncindex.nextcloud.client import NextcloudClient, make_http
from ncindex.search.filters import build_filter
from ncindex.search.service import (
    CHUNKS_PER_DOC,
    Pool,
    SearchRequest,
    SearchService,
    keyed,
)
from ncindex.settings import Settings
from ncindex.store.port import Fusion, PointRecord, SparseVector
from ncindex.store.qdrant_edge import QdrantEdgeStore

SCIFACT = Path("/work/shared/data/scifact")
VERIFY_MS = 5.0
USERS = [f"user{i:02d}" for i in range(19)] + ["alice"]
NOW = 1_780_000_000
FOLDERS = ["/Projects", "/Projects/2026", "/Archive", "/Documents", "/Shared"]
TAGS = ["urgent", "review", "finance", "draft"]
CHUNKS_PER_DOCUMENT = 4
WARMUP = 10


# --- the verification server ----------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        time.sleep(VERIFY_MS / 1000)
        note_id = self.path.rstrip("/").rsplit("/", 1)[-1]
        note = {"id": int(note_id) if note_id.isdigit() else 0, "title": "n", "content": "",
                "category": "", "modified": NOW, "etag": "x" * 32, "readonly": False}  # fmt: skip
        self._send(200, json.dumps(note).encode(), "application/json")

    def do_SEARCH(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        time.sleep(VERIFY_MS / 1000)
        found = "".join(
            f"<d:response><d:href>/remote.php/dav/files/alice/Projects/f{fid}.md</d:href>"
            f'<d:propstat><d:prop><oc:fileid>{fid}</oc:fileid><d:getetag>"e"</d:getetag>'
            "</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
            for fid in re.findall(r"<d:literal>(\d+)</d:literal>", body)
        )
        xml = (
            '<?xml version="1.0"?><d:multistatus xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">'
            f"{found}</d:multistatus>"
        )
        self._send(207, xml.encode(), "application/xml; charset=utf-8")

    def do_PROPFIND(self) -> None:
        """``/remote.php/dav/systemtags/``: the gate tag (1) and the excluded tag (2)."""
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(VERIFY_MS / 1000)
        tags = "".join(
            f"<d:response><d:href>/remote.php/dav/systemtags/{i}</d:href><d:propstat><d:prop>"
            f"<oc:id>{i}</oc:id><oc:display-name>{name}</oc:display-name></d:prop>"
            "<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
            for i, name in ((1, GATE_TAG), (2, EXCLUDED_TAG))
        )
        xml = f'<d:multistatus xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">{tags}</d:multistatus>'
        self._send(207, xml.encode(), "application/xml; charset=utf-8")

    def do_REPORT(self) -> None:
        """``oc:filter-files``: every document carries the gate tag, none the excluded one
        (the tag-rules run: membership is fetched, nothing is dropped)."""
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        time.sleep(VERIFY_MS / 1000)
        gate = "<oc:systemtag>1</oc:systemtag>" in body
        self._send(207, GATE_MEMBERS if gate else EMPTY_MULTISTATUS, "application/xml")


GATE_TAG, EXCLUDED_TAG = "indexed", "private"
EMPTY_MULTISTATUS = b'<d:multistatus xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns"/>'
GATE_MEMBERS = (
    '<d:multistatus xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">'
    + "".join(
        f"<d:response><d:href>/remote.php/dav/files/alice/Projects/f{i}.md</d:href><d:propstat>"
        f"<d:prop><oc:fileid>{i}</oc:fileid></d:prop><d:status>HTTP/1.1 200 OK</d:status>"
        "</d:propstat></d:response>"
        for i in range(100_000, 100_000 + 10_000 // 4)
    )
    + "</d:multistatus>"
).encode()
"""The gate tag's members for the 10,000-chunk store (2,500 documents)."""


class StandIn:
    """The verification server (:class:`_Handler`) in a process of its own, as a real
    Nextcloud is another machine: served from the benchmark's own process, its threads took the
    GIL from the search they answer (ten checks at once cost about twice one round trip)."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        self._process = context.Process(target=_serve, args=(theirs,), daemon=True)
        self._process.start()
        self.url = f"http://127.0.0.1:{ours.recv()}"

    def close(self) -> None:
        """Stop the server's process."""
        self._process.terminate()
        self._process.join(10)


def _serve(pipe: Connection) -> None:
    """The stand-in's process: serve on a free port, sent back through ``pipe``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    pipe.send(server.server_address[1])
    server.serve_forever()


# --- corpus -----------------------------------------------------------------------------------


def scifact_pieces() -> list[str]:
    """Three-sentence pieces of every SciFact abstract (title prepended to the first)."""
    pieces = []
    with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            sentences = re.split(r"(?<=[.!?])\s+", doc.get("text") or "")
            sentences[0] = f"{doc.get('title', '')}. {sentences[0]}"
            for i in range(0, len(sentences), 3):
                piece = " ".join(sentences[i : i + 3]).strip()
                if piece:
                    pieces.append(piece)
    return pieces


def queries(n: int) -> list[str]:
    with open(SCIFACT / "queries.jsonl", encoding="utf-8") as fh:
        texts = [json.loads(line)["text"] for line in fh]
    return [texts[i % len(texts)] for i in range(n)]


def paired_queries(n: int) -> list[tuple[str, str]]:
    """``n`` queries to search (:func:`queries`), each beside another of the same kind (the
    claims after them) to ask the bare engine query with: cold, as the search's own query is
    when the search asks it. Asked again, a query finds what its first call read from disk in
    the page cache (``bench_scale``'s docstring has the figures), so the bare query of the
    searched query itself, right after the search, would make the bound low."""
    asked = queries(2 * n)
    return list(zip(asked[:n], asked[n:], strict=True))


def fill(
    store: QdrantEdgeStore,
    size: int,
    pieces: list[str],
    sparse: list[SparseVector],
    dim: int,
    people: Sequence[str] = USERS,
    dense_vectors: Callable[[np.random.Generator, int], np.ndarray] | None = None,
) -> float:
    """Write ``size`` chunks owned by and shared among ``people`` (which must include
    ``alice``); returns the share of points alice's filter selects. Dense vectors are
    ``dense_vectors(generator, n)`` (``n`` × ``dim``; default: standard normal), normalised."""
    rng = random.Random(size)
    vectors = np.random.default_rng(size)
    points: list[PointRecord] = []
    for n_doc in range(size // CHUNKS_PER_DOCUMENT):
        doc_type = rng.choice([DocType.NOTE, DocType.FILE, DocType.FILE, DocType.DECK_CARD])
        owner = rng.choice(people)
        users = {owner, *(u for u in people if rng.random() < 0.05)}
        dense = (
            vectors.standard_normal((CHUNKS_PER_DOCUMENT, dim))
            if dense_vectors is None
            else dense_vectors(vectors, CHUNKS_PER_DOCUMENT)
        )
        dense /= np.linalg.norm(dense, axis=1, keepdims=True)
        ref = DocRef(doc_type, str(100_000 + n_doc))
        paths = {}
        if doc_type is DocType.NOTE:
            paths = {u: f"/Notes/Cat{n_doc % 7}/note-{n_doc}.md" for u in users}
        elif doc_type is DocType.FILE:
            paths = {u: f"{rng.choice(FOLDERS)}/file-{n_doc}.md" for u in users}
        first = (n_doc * CHUNKS_PER_DOCUMENT) % len(pieces)
        texts = [pieces[(first + k) % len(pieces)] for k in range(CHUNKS_PER_DOCUMENT)]
        source = SourceDocument(
            ref=ref, user=owner, owner=owner, title=texts[0][:60], text=" ".join(texts),
            etag=f"e{n_doc}", modified_at=NOW - rng.randint(0, 365 * 86_400),
            path=paths.get(owner), mime_type="text/markdown" if doc_type is DocType.FILE else None,
            size=len(" ".join(texts)), tags=[t for t in TAGS if rng.random() < 0.2],
            extra={"board_id": "1", "stack_id": "2"} if doc_type is DocType.DECK_CARD else {},
        )  # fmt: skip
        offset = 0
        for k, text in enumerate(texts):
            payload = build_payload(
                source, Chunk(k, text, offset, offset + len(text)), CHUNKS_PER_DOCUMENT,
                acl=[principal(u) for u in users], paths=paths, indexed_at=NOW,
                embedding_model="bench",
                analyzer=ANALYZER_VERSION,
            )  # fmt: skip
            offset += len(text) + 1
            points.append(
                PointRecord(
                    point_id(ref, source.content_hash, k),
                    payload,
                    dense[k].tolist(),
                    sparse[(first + k) % len(pieces)],
                )
            )
        if len(points) >= 4096:
            store.upsert(points)
            points = []
    if points:
        store.upsert(points)
    store.flush()
    return store.count(build_filter("alice", realistic_request("x").filter_tree())) / max(1, size)


def realistic_request(query: str) -> SearchRequest:
    return SearchRequest(
        query=query,
        doc_types=["note", "file"],
        modified_after=NOW - 182 * 86_400,
        path_prefixes=["/Projects", "/Notes"],
    )


# --- measuring ---------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def run_size(
    size: int,
    n_queries: int,
    optimize: bool,
    embedder: Embedder,
    settings: Settings,
    pieces: list[str],
    sparse: list[SparseVector],
    verifier_url: str,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        store = QdrantEdgeStore(Path(tmp), "bench")
        store.ensure_collection(embedder.dense_dim)
        t0 = time.perf_counter()
        share = fill(store, size, pieces, sparse, embedder.dense_dim)
        fill_s = time.perf_counter() - t0
        if optimize:
            store.optimize()
        run_settings = settings.model_copy(update={"nextcloud_url": verifier_url})
        http = make_http(run_settings)
        client = NextcloudClient.for_account(http, "alice", "pw")
        service = SearchService(run_settings, lambda: (store, embedder))
        limit = run_settings.search_default_limit
        fetch = limit * run_settings.search_overfetch * CHUNKS_PER_DOC
        pool = Pool.for_fetch(run_settings, fetch)
        rows = []
        for i, (query, other) in enumerate(paired_queries(WARMUP + n_queries)):
            request = realistic_request(query)
            t = time.perf_counter()
            response = service.search(client, request)
            total = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            embedder.embed_query(query)
            embed = (time.perf_counter() - t) * 1000
            flt = build_filter("alice", request.filter_tree())
            dense, sparse_q = embedder.embed_query(other)
            t = time.perf_counter()
            keyed(store, store.query(dense=dense, sparse=sparse_q, flt=flt, limit=fetch,
                                     prefetch_limit=pool.sparse, dense_prefetch_limit=pool.dense,
                                     fusion=Fusion(run_settings.fusion), fields=()))  # fmt: skip
            bare = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            client.find_by_ids([1])  # the request a page's check is: SEARCH by file id
            rtt = (time.perf_counter() - t) * 1000
            if i >= WARMUP:
                rows.append({"total": total, **response.timings_ms, "bare_embed": embed,
                             "bare_query": bare, "rtt": rtt, "bound": embed + bare + rtt,
                             "results": len(response.results)})  # fmt: skip
        service.close()
        http.close()
        store.close()
    totals = [r["total"] for r in rows]
    bounds = [r["bound"] for r in rows]
    med = statistics.median
    return {
        "chunks": size,
        "queries": len(rows),
        "filter_share": round(share, 4),
        "fill_seconds": round(fill_s, 1),
        "optimized": optimize,
        "results_mean": round(statistics.mean(r["results"] for r in rows), 2),
        "p50_ms": round(pct(totals, 0.5), 2),
        "p95_ms": round(pct(totals, 0.95), 2),
        "embed_ms": round(med(r["embed"] for r in rows), 2),
        "query_ms": round(med(r["query"] for r in rows), 2),
        "verify_ms": round(med(r["verify"] for r in rows), 2),
        "bare_query_ms": round(med(r["bare_query"] for r in rows), 2),
        "rtt_ms": round(med(r["rtt"] for r in rows), 2),
        "round_trip_request": "search",
        "bound_p50_ms": round(pct(bounds, 0.5), 2),
        "bound_ms": round(pct(bounds, 0.95), 2),
        "ratio_p95": round(pct(totals, 0.95) / pct(bounds, 0.95), 3),
    }


def section(results: dict[str, Any], settings: Settings, n_queries: int) -> str:
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        "## Search",
        "",
        f"`make bench-search` — {when}, {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, load average {load:.1f} at the end. Qdrant Edge filled with "
        "right-shaped points (random unit dense vectors, BM25 of SciFact text, real payloads, 4 "
        "chunks per document, 20 users); only the queries are embedded (SciFact claims). "
        f"{n_queries} queries per size as `alice` with a realistic filter (notes and files, last "
        "half year, under /Projects or /Notes, AND her acl), limit "
        f"{settings.search_default_limit}, verification by a local server answering in "
        f"{VERIFY_MS:.0f} ms (concurrency {settings.verify_concurrency}). Times in ms; `bound` = "
        "embed + bare engine query + one verification round trip, per query; ratio = search p95 / "
        "bound p95 (target ≤ 1.3).",
        "",
        "| chunks | filter selects | p50 | p95 | embed | query | verify | bare query | bound p50 "
        "| bound p95 | ratio p95 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, r in results.items():
        label = f"{int(size):,}" if size.isdigit() else f"{r['chunks']:,} + tag rules"
        lines.append(
            f"| {label} | {r['filter_share']:.1%} | {r['p50_ms']} | {r['p95_ms']} | "
            f"{r['embed_ms']} | {r['query_ms']} | {r['verify_ms']} | {r['bare_query_ms']} | "
            f"{r['bound_p50_ms']} | {r['bound_ms']} | {r['ratio_p95']} |"
        )
    lines += [
        "",
        "Stage columns are medians. The search reads one round of chunk hits "
        "(limit × overfetch × 4) from a candidate pool shared by all rounds, verifies only as "
        "many candidates as the page needs, all at once when they fit the concurrency (the "
        "benchmark raises `verify_concurrency` to the page size; at the default 8 a page of 10 "
        "takes two round trips). "
        + (
            "Segments were optimised (HNSW) before measuring."
            if any(r.get("optimized") for r in results.values())
            else "Segments were not optimised (this benchmark does not call `optimize`), so the "
            "dense branch scans the filtered points."
        )
        + " On a loaded machine absolute times inflate; the ratio compares like with like.",
        "",
        "`+ tag rules`: the smallest store again with `NCINDEX_INDEX_REQUIRED_TAGS` and "
        "`NCINDEX_INDEX_EXCLUDED_TAGS` set, so verification also fetches the tags' membership "
        "once per search (one PROPFIND of the system tags, one REPORT `oc:filter-files` per "
        "tag, each answered in the same 5 ms; the gate tag lists all 2,500 documents) and "
        "intersects it with the candidates: the difference to the first row is what the "
        "eligibility check costs.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--optimize", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--verify-concurrency", type=int, default=0, help="default: max(setting, page size)"
    )
    args = parser.parse_args()
    base = Settings()
    # One page's candidates verify in one round trip when the pool is at least the page size.
    concurrency = args.verify_concurrency or max(base.verify_concurrency, base.search_default_limit)
    settings = Settings(
        accounts={"alice": SecretStr("pw")}, user_cache_seconds=0, verify_concurrency=concurrency
    )
    install_models(settings.model_dir)
    embedder = Embedder(settings)
    embedder.load()
    pieces = scifact_pieces()
    sizes = [int(s) for s in args.sizes.split(",")]
    needed = min(len(pieces), max(sizes))
    t0 = time.perf_counter()
    sparse = embedder.embed_documents_sparse(pieces[:needed])
    print(f"BM25 of {needed} SciFact pieces: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    pieces = pieces[:needed]
    verifier = StandIn()
    url = verifier.url
    results: dict[str, Any] = {}
    for size in sizes:
        results[str(size)] = run_size(size, args.queries, args.optimize, embedder, settings,
                                      pieces, sparse, url)  # fmt: skip
        print(json.dumps({str(size): results[str(size)]}), file=sys.stderr)
    # the same smallest store with a tag gate and an excluded tag: verification also fetches
    # their membership (one PROPFIND of the tags, one REPORT per tag) once per search
    tagged = settings.model_copy(
        update={"index_required_tags": [GATE_TAG], "index_excluded_tags": [EXCLUDED_TAG]}
    )
    results["with_tag_rules"] = run_size(min(sizes), args.queries, args.optimize, embedder,
                                         tagged, pieces, sparse, url)  # fmt: skip
    print(json.dumps({"with_tag_rules": results["with_tag_rules"]}), file=sys.stderr)
    verifier.close()
    table = section(results, settings, args.queries)
    print(table)
    if not args.no_write:
        publish("search", results, "Search", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
