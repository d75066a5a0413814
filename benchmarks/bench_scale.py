"""Benchmark: verified search from 10,000 to 1,000,000 chunks on Qdrant Edge, in two tenancy
shapes (``make bench-scale``).

Shapes: ``20_users`` (documents owned by and shared among 20 users, as ``make bench-search``)
and ``one_user`` (one person's Nextcloud: ``alice`` can see every point, so the ``acl`` filter
lets everything through). For each shape and size a Qdrant Edge store laid out as the settings
say (:class:`ncindex.store.layout.CollectionLayout`: int8 quantisation, on-disk originals and
payloads, ``acl`` as the tenant index, HNSW with ``payload_m``) is filled with right-shaped
points (:func:`bench_search.fill`), then optimised the way ``ncindex up`` does it in the
background (a copy optimised in a child process and swapped in,
:meth:`~ncindex.store.qdrant_edge.QdrantEdgeStore.optimise_aside`), then queried:

- ``p50_ms`` / ``p95_ms``: :meth:`SearchService.search` as alice with the realistic filter of
  ``bench-search`` (notes and files, last half year, under /Projects or /Notes, AND her acl),
  verification answered by a local server in 5 ms;
- ``bare_query_p95_ms``: the engine query alone with the same filter and sizes, its hits
  carrying no payload, then made ready for grouping as the search's rounds do
  (:func:`~ncindex.search.service.keyed`: nothing read where point ids name their documents,
  as in rows with ``ids_name_documents``; the rows before read each hit's ``doc_key``; rows
  measured before the search read payloads per verified batch read whole payloads of all 120
  hits),
  asked *cold* (``bare_query_asked``): for another query of the same kind (the SciFact queries
  after the searched ones), one the engine has not been asked, as the search's own query had
  not been when the search asked it (``preload_share``: the run's
  ``NCINDEX_QDRANT_PRELOAD_SHARE``, 0 by default — the store's files are not read ahead into
  the page cache, as in rows without it; ``preload_wait_s``: how long the run waited for
  that reading after the store opened or was swapped in). A query's first engine call reads
  from disk what it touches of the store's on-disk files (payloads, original vectors for
  rescoring, payload indexes for the filter: told apart in scale_reading.md, "Reading the
  store ahead"); the same call again finds it in the page
  cache (the one-user 100,000 store, 2026-12-04: the dense branch's first call p50 / p95 11.6
  / 25.6 ms with ~96 major page faults and ~1,080 blocks read, the same call again 8.7 / 9.3
  ms with none). ``bare_query_warm_p95_ms``: the search's own query asked again right after
  the search, warm — how rows without ``bare_query_asked`` measured ``bare_query_p95_ms``, so
  their bound was low beside the search they were held to; ``ratio_p95_warm_bound``: the
  search against that warm bound. ``bare_dense_p95_ms`` / ``bare_sparse_p95_ms``: each of the
  two prefetches alone, as deep, no payload, asked after (warm); ``search_stages_p50_ms``: the
  medians of the search's own stage timings (``timings_ms``: embed; query, the two branches
  asked and fused — the BM25 one ``feedback_first_depth`` deep, rows without it 360;
  feedback, what the BM25 expansion adds — its documents' texts read, the BM25 branch asked
  again, fused again; payloads read; verification. Rows measured before the
  search fused in the process (commit ``13da3d3``) asked the engine's fused query twice:
  feedback was the first one, query the rounds' with the expanded BM25 query; rows measured
  before payloads were read per verified batch have no ``payloads``: their query read every
  hit's payload); ``bound_p95_ms`` = embed + bare query (cold) + one verification round trip,
  per query; ``round_trip_p50_ms``: that round trip, ``round_trip_request`` which request it
  timed (``search``: a WebDAV SEARCH for one file id, the request a page's check is; rows
  without it timed a Notes API ``GET``, which the stand-in answers with the same 5 ms
  sleep); ``page_checks_p50_ms``: verifying the
  bare query's first page (10 documents, all at once) alone, as the search does; ``ratio_p95``
  = search p95 / bound p95 (target ≤ 1.3);
- ``recall_at_10_vs_exact``: the dense branch's top 10 through the index against an exact
  (brute-force, original vectors) search with the same filter, averaged over the queries
  (target ≥ 0.99), a hit tying the exact 10th counted as found (:func:`recall_counting_ties`);
  ``hybrid_recall_at_10_vs_exact`` the same for the engine's fused query (the ranking the
  search builds from the same branches in the process: ``tests/store/test_fusion.py``); ``_strict``:
  the exact top 10's ids only; ``exact_fused_again``: a second exact fused query against the
  first (Qdrant breaks fused ties at random);
- ``optimize_max_search_ms`` / ``optimize_max_write_ms``: the longest search and one-document
  write two other threads made while the store was optimised; ``optimize_copy_locked_s`` /
  ``optimize_swap_locked_s``: how long the optimisation held the write lock to copy the shard
  and to swap the optimised one in, ``optimize_load_s`` the load of the optimised shard (part
  of the swap; Edge holds the GIL for it, so every thread of the process stalls) and the
  swap's other steps: ``optimize_swap_replay_s`` (the last replay round),
  ``optimize_copy_close_s`` (the child closing the optimised copy), ``optimize_live_close_s``
  (closing the live shard);
- ``listing_p50_ms``: the search page's two filter listings for alice (``GET /v1/folders``
  and ``GET /v1/tags``: :func:`~ncindex.search.facets.caller_folders` and
  :func:`~ncindex.search.facets.caller_tags`, facets of the engine), median of
  :data:`LISTINGS` asks, ``listed_folders`` / ``listed_tags`` what they listed;
- ``rss_mb``: resident memory of this process (the search process: models, store) after the
  queries; ``disk_mb``: the store's folder; ``fill_points_per_s``; ``optimize_seconds``.

Writes ``benchmarks/results/scale.json`` (``{"shapes": {"20_users": {"10000": {…}, …},
"one_user": {…}}}``) and the "Scale" section of ``benchmarks/RESULTS.md``.
Options: ``--sizes 10000,100000,1000000``, ``--shapes 20_users,one_user``, ``--queries N``,
``--tmp DIR`` (where the stores are built; a million chunks take several GB), ``--keep DIR``
(build each store in ``DIR/<shape>-<size>`` and leave it there for later study), ``--reuse DIR``
(query the stores so kept again, without building them; the row keeps the building's figures
of the run that built them and says so: ``store_built_by_an_earlier_run``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from bench_quality import CACHE
from bench_search import (
    USERS,
    WARMUP,
    StandIn,
    fill,
    paired_queries,
    pct,
    queries,
    realistic_request,
    scifact_pieces,
)
from pydantic import SecretStr
from results_md import RESULTS_DIR, publish, reading

from evaluation.cache import VectorCache, model_identity
from ncindex.documents import point_document
from ncindex.embedding.embedder import Embedder
from ncindex.embedding.models import install_models
from ncindex.nextcloud.client import NextcloudClient, make_http
from ncindex.search.facets import caller_folders, caller_tags
from ncindex.search.filters import build_filter
from ncindex.search.fusion import fuse
from ncindex.search.service import (
    CHUNKS_PER_DOC,
    Pool,
    SearchService,
    group_hits,
    keyed,
)
from ncindex.search.verify import VerificationCounts
from ncindex.settings import Settings
from ncindex.store import CollectionLayout, Fusion, Hit, PointRecord
from ncindex.store.edge_optimizer import optimise_in_child
from ncindex.store.qdrant_edge import QdrantEdgeStore

SHAPES = {"20_users": USERS, "one_user": ["alice"]}


def rss_mb() -> float:
    """Resident memory of this process, MB (``VmRSS`` of ``/proc/self/status``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def disk_mb(path: Path) -> float:
    """Disk used under ``path``, MB (``du -sk``)."""
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return round(int(out.stdout.split()[0]) / 1024, 1)


MIX, NOISE = 0.5, 0.03
"""A synthetic point's dense vector: one real chunk embedding + ``MIX`` × another + Gaussian
noise of ``NOISE`` per dimension, normalised."""


def realistic_vectors(embeddings: np.ndarray) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Dense vectors shaped like real ones, for :func:`bench_search.fill`: each mixes two real
    SciFact chunk embeddings (``embeddings``, n × dim) and a little noise, so a million points
    keep the clusters and anisotropy of a real corpus (uniform random vectors have neither: every
    point is about equally far from every query, the worst case of any graph index)."""

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        first = embeddings[rng.integers(0, len(embeddings), n)]
        second = embeddings[rng.integers(0, len(embeddings), n)]
        return first + MIX * second + NOISE * rng.standard_normal(first.shape)

    return draw


TIE = 1e-6
"""Scores closer than this count as tied (absolute; dense cosine and DBSF sums are near 1)."""


def top10(store: QdrantEdgeStore, dense: list[float], sparse: Any, flt: Any, exact: bool,
          pool: Pool, fusion: Fusion) -> tuple[list[Hit], list[Hit]]:  # fmt: skip
    """The dense branch's best hits under ``flt`` and the fused query's (its prefetches as
    deep as ``pool``'s), through the index with the layout's search parameters or exactly.
    The approximate answers are the top 10; the exact ones go deeper (20 dense, every fused
    candidate: ``pool.dense + pool.sparse``), so :func:`recall_counting_ties` can tell a tie
    from a miss."""
    dense_hits = store.branch(dense=dense, flt=flt, limit=20 if exact else 10, exact=exact)
    return dense_hits, fused_top(store, dense, sparse, flt, exact, pool, fusion)


def fused_top(store: QdrantEdgeStore, dense: list[float], sparse: Any, flt: Any, exact: bool,
              pool: Pool, fusion: Fusion) -> list[Hit]:  # fmt: skip
    """The fused query's top 10 under ``flt`` (its prefetches as deep as ``pool``'s), or
    exactly every fused candidate (``pool.dense + pool.sparse``): :func:`top10`'s fused half."""
    return store.query(dense=dense, sparse=sparse, flt=flt,
                       limit=pool.dense + pool.sparse if exact else 10,
                       prefetch_limit=pool.sparse, dense_prefetch_limit=pool.dense,
                       fusion=fusion, exact=exact)  # fmt: skip


def recall_counting_ties(approximate: Sequence[Hit], exact: Sequence[Hit], k: int = 10) -> float:
    """Share of the exact top ``k`` that ``approximate``'s top ``k`` holds, where a hit whose
    exact score ties the exact ``k``-th's (within :data:`TIE`) counts as found: with ties at
    the cut, "the" exact top ``k`` is one of several equally exact answers. Qdrant breaks ties
    of a fused query at random — qdrant/qdrant ``lib/segment/src/common/score_fusion.rs``,
    ``score_fusion``: the fused points are folded into an ``AHashMap`` (randomly seeded) and
    sorted by score alone (``ScoredPoint``'s ``Ord`` in ``lib/segment/src/types.rs``) — so two
    exact queries may differ there. ann-benchmarks counts ties the same way, with a looser
    tolerance (erikbern/ann-benchmarks ``ann_benchmarks/plotting/metrics.py``,
    ``knn_threshold``: the k-th true distance + 1e-3). ``exact`` must reach past the ``k``-th
    hit (:func:`top10`); 1.0 when it is empty."""
    head = exact[:k]
    if not head:
        return 1.0
    cut = head[-1].score - TIE
    truth = {h.id for h in head}
    scores = {h.id: h.score for h in exact}
    found = sum(1 for h in approximate[:k] if h.id in truth or scores.get(h.id, -1e9) >= cut)
    return min(found, len(head)) / len(head)


VARIANTS: dict[str, dict[str, Any]] = {
    "ef64 x2": {"hnsw_ef": 64, "oversampling": 2.0, "acorn": False},
    "ef128 x1": {"hnsw_ef": 128, "oversampling": 1.0, "acorn": False},
    "ef128 x2": {"hnsw_ef": 128, "oversampling": 2.0, "acorn": False},
    "ef128 x4": {"hnsw_ef": 128, "oversampling": 4.0, "acorn": False},
    "ef256 x2": {"hnsw_ef": 256, "oversampling": 2.0, "acorn": False},
    "ef512 x2": {"hnsw_ef": 512, "oversampling": 2.0, "acorn": False},
    "ef128 x2 acorn": {"hnsw_ef": 128, "oversampling": 2.0, "acorn": True},
}
"""Search parameters measured beside the defaults on the same store (name → layout fields)."""

HYBRID_VARIANTS: list[tuple[float, float, float]] = [
    (1.0, 1.0, 1.0),
    (1.0, 1.0, 2.0),
    (1.0, 2.0, 1.0),
    (1.0, 2.0, 2.0),
    (0.6666, 1.0, 1.0),
    (0.5, 1.0, 1.0),
]
"""The fused query's dense prefetch measured on the same store, ``(depth as a share of the
BM25 prefetch's, int8 candidates drawn per prefetch hit, beam per candidate drawn)``, named
``"dense D, drawn Nx, beam Mx"`` (D for a 10-result page: 360, 240, 180), each against the
exact fused query at its own depths: the fused top 10
depends on the whole prefetch, not only its head. The defaults draw ``1x`` at the search's
depth (a prefetch deeper than the beam ``hnsw_ef`` draws what it asks,
``CollectionLayout.drawn``) with a beam of ``1x``; until that cap (2026-12-03) they drew ``2x``
at every depth."""


def deep_prefetch_layout(drawn: float, beam: float, pool: int, hnsw_ef: int) -> dict[str, Any]:
    """Layout fields under which a dense prefetch ``pool`` deep draws ``drawn`` × ``pool``
    int8 candidates with a beam of ``beam`` × those (the cap, a beam of ``hnsw_ef``, raised to
    them where they are more)."""
    return {
        "oversampling": drawn,
        "hnsw_ef": max(hnsw_ef, math.ceil(drawn * pool)),
        "ef_per_candidate": beam,
    }


def variant_grid(
    store: QdrantEdgeStore,
    variants: dict[str, dict[str, Any]],
    searches: Sequence[tuple[Callable[[], list[Any]], list[str]]],
    recall_key: str,
) -> dict[str, dict[str, float]]:
    """For each of ``variants`` (name → layout fields set on ``store`` while it runs): every
    search of ``searches`` (a call answering hits with the store's current search parameters,
    and the exact hits it is held against, deeper than 10: :func:`top10`), giving the mean
    recall@10 under ``recall_key`` (ties counted, :func:`recall_counting_ties`) and
    ``recall_key + "_strict"`` (the exact top 10's ids only), and the p50/p95 of the calls in
    ms."""
    layout = store.layout
    out: dict[str, dict[str, float]] = {}
    try:
        for name, fields in variants.items():
            store.layout = dataclasses.replace(layout, **fields)
            recalls, strict_recalls, times = [], [], []
            for search, truth in searches:
                t = time.perf_counter()
                hits = search()
                times.append((time.perf_counter() - t) * 1000)
                recalls.append(recall_counting_ties(hits, truth))
                strict_recalls.append(overlap(ids(hits), ids(truth[:10])))
            out[name] = {
                recall_key: round(statistics.mean(recalls), 4),
                recall_key + "_strict": round(statistics.mean(strict_recalls), 4),
                "p50_ms": round(pct(times, 0.5), 2),
                "p95_ms": round(pct(times, 0.95), 2),
            }
    finally:
        store.layout = layout
    return out


def search_variants(
    store: QdrantEdgeStore, rows: list[dict[str, Any]], flt: Any
) -> dict[str, dict[str, float]]:
    """:data:`VARIANTS` on the dense branch of each row's query (``dense``, ``exact_dense``,
    measured already) under ``flt``."""
    searches = [
        (functools.partial(store.branch, dense=r["dense"], flt=flt, limit=10), r["exact_dense"])
        for r in rows
    ]
    return variant_grid(store, VARIANTS, searches, "recall_at_10_vs_exact")


def hybrid_variants(store: QdrantEdgeStore, rows: list[dict[str, Any]], flt: Any, pool: Pool,
                    fusion: Fusion) -> dict[str, dict[str, float]]:  # fmt: skip
    """:data:`HYBRID_VARIANTS` on the fused query of each row (``dense``, ``sparse``, and
    ``exact_fused`` at the search's ``pool``, measured already) under ``flt``; a variant whose
    dense depth is not ``pool.dense`` is held against an exact fused query at its own."""
    out: dict[str, dict[str, float]] = {}
    for share in sorted({share for share, _, _ in HYBRID_VARIANTS}, reverse=True):
        deep = Pool.shared(pool.sparse, share)
        depth = deep.dense
        approximate = functools.partial(fused_top, store, flt=flt, exact=False, pool=deep,
                                        fusion=fusion)  # fmt: skip
        searches = [
            (
                functools.partial(approximate, r["dense"], r["sparse"]),
                r["exact_fused"]
                if deep == pool
                else fused_top(store, r["dense"], r["sparse"], flt, True, deep, fusion),
            )
            for r in rows
        ]
        variants = {
            f"dense {depth}, drawn {drawn:g}x, beam {beam:g}x": deep_prefetch_layout(
                drawn, beam, depth, store.layout.hnsw_ef
            )
            for at, drawn, beam in HYBRID_VARIANTS
            if at == share
        }
        out |= variant_grid(store, variants, searches, "hybrid_recall_at_10_vs_exact")
    return out


def ids(hits: Sequence[Hit]) -> list[str]:
    """The point ids of ``hits``, in order."""
    return [h.id for h in hits]


def overlap(approximate: list[str], exact: list[str]) -> float:
    """Share of ``exact`` found in ``approximate`` (1.0 when ``exact`` is empty)."""
    return len(set(approximate) & set(exact)) / len(exact) if exact else 1.0


def optimise_under_load(store: QdrantEdgeStore, embedder: Embedder, text: str) -> dict[str, float]:
    """Optimise ``store`` as ``ncindex up`` does while one thread searches and another writes
    one document, each in a loop (apart, so that a search is not held behind a waiting
    write); returns the longest search and write, ms, how many searches ran, and the
    optimisation's write-lock holds and shard load (:meth:`QdrantEdgeStore.optimise_aside`)."""
    dense, sparse = embedder.embed_query(text)
    searches: list[float] = []
    writes: list[float] = []
    done = threading.Event()

    def search() -> None:
        while not done.is_set():
            t = time.perf_counter()
            store.query(dense=dense, sparse=sparse, flt=None, limit=10, prefetch_limit=100,
                        fusion=Fusion.DBSF)  # fmt: skip
            searches.append((time.perf_counter() - t) * 1000)
            time.sleep(0.01)

    def write() -> None:
        n = 0
        while not done.is_set():
            t = time.perf_counter()
            store.upsert([PointRecord(str(uuid.UUID(int=n)), {"doc_key": f"probe:{n}"}, dense)])
            writes.append((time.perf_counter() - t) * 1000)
            n += 1
            time.sleep(0.01)

    traffic = [threading.Thread(target=search), threading.Thread(target=write)]
    for thread in traffic:
        thread.start()
    try:
        report = store.optimise_aside(optimise_in_child)
    finally:
        done.set()
        for thread in traffic:
            thread.join()
    for n in range(len(writes)):
        store.delete_document(f"probe:{n}")
    return {
        "optimize_max_search_ms": round(max(searches, default=0.0), 1),
        "optimize_max_write_ms": round(max(writes, default=0.0), 1),
        "optimize_searches": len(searches),
        "optimize_copy_locked_s": round(report["copy_locked_seconds"], 2),
        "optimize_swap_locked_s": round(report["swap_locked_seconds"], 2),
        "optimize_load_s": round(report["load_seconds"], 2),
        "optimize_swap_replay_s": round(report["swap_replay_seconds"], 2),
        "optimize_copy_close_s": round(report["copy_close_seconds"], 2),
        "optimize_live_close_s": round(report["live_close_seconds"], 2),
    }


def measure(
    people: list[str],
    size: int,
    n_queries: int,
    embedder: Embedder,
    settings: Settings,
    pieces: list[str],
    sparse: list[Any],
    verifier_url: str,
    tmp_root: str | None,
    dense_vectors: Callable[[np.random.Generator, int], np.ndarray] | None,
    keep: Path | None = None,
    built: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build, optimise and query one store of ``size`` chunks shared among ``people``; the
    row of scale.json. The store is built in a temporary folder under ``tmp_root``, or at
    ``keep`` (which must not exist), left there for later study. With ``built`` (the row of
    the run that built the store kept at ``keep``) the store there is queried as it is and
    the building's figures (fill, optimisation) are that row's."""
    with _store_folder(tmp_root, keep, reuse=built is not None) as tmp:
        store = QdrantEdgeStore(Path(tmp), "bench", layout=CollectionLayout.from_settings(settings))
        if built is None:
            store.ensure_collection(embedder.dense_dim)
            t0 = time.perf_counter()
            share = fill(store, size, pieces, sparse, embedder.dense_dim, people, dense_vectors)
            building = {"fill_points_per_s": round(size / (time.perf_counter() - t0))}
            t0 = time.perf_counter()
            building |= optimise_under_load(store, embedder, pieces[0])
            building["optimize_seconds"] = round(time.perf_counter() - t0, 1)
        else:
            share = store.count(build_filter("alice", realistic_request("x").filter_tree())) / size
            building = {key: built[key] for key in BUILDING_KEYS if key in built}
            building["store_built_by_an_earlier_run"] = True
        info = store.info()
        waited = time.perf_counter()
        store.preloaded()  # the shard's files read ahead since its last load (or swap)
        preload_wait = time.perf_counter() - waited
        run_settings = settings.model_copy(update={"nextcloud_url": verifier_url})
        http = make_http(run_settings)
        client = NextcloudClient.for_account(http, "alice", "pw")
        service = SearchService(run_settings, lambda: (store, embedder))
        limit = run_settings.search_default_limit
        fetch = limit * run_settings.search_overfetch * CHUNKS_PER_DOC
        pool = Pool.for_fetch(run_settings, fetch)
        fusion = Fusion(run_settings.fusion)
        rows: list[dict[str, Any]] = []
        for i, (query, other) in enumerate(paired_queries(WARMUP + n_queries)):
            request = realistic_request(query)
            t = time.perf_counter()
            response = service.search(client, request)
            total = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            dense, sparse_q = embedder.embed_query(query)
            embed = (time.perf_counter() - t) * 1000
            flt = build_filter("alice", request.filter_tree())
            # the bare query of another query of the same kind (cold, as the search's own
            # was), then of the searched query again (warm); the page is the warm one's
            bare_ms = []
            for bare_dense_q, bare_sparse_q in (embedder.embed_query(other), (dense, sparse_q)):
                t = time.perf_counter()
                hits = keyed(store, store.query(dense=bare_dense_q, sparse=bare_sparse_q,
                                                flt=flt, limit=fetch, prefetch_limit=pool.sparse,
                                                dense_prefetch_limit=pool.dense, fusion=fusion,
                                                fields=()))  # fmt: skip
                bare_ms.append((time.perf_counter() - t) * 1000)
            bare, bare_warm = bare_ms
            payloads = store.retrieve([h.id for h in group_hits(hits)[:limit]])
            page = list(payloads.values())
            t = time.perf_counter()
            service.verifier.check(client, page, VerificationCounts())
            page_checks = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            store.branch(dense=dense, flt=flt, limit=pool.dense, fields=())
            bare_dense = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            store.branch(sparse=sparse_q, flt=flt, limit=pool.sparse, fields=())
            bare_sparse = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            client.find_by_ids([1])  # the request a page's check is: SEARCH by file id
            rtt = (time.perf_counter() - t) * 1000
            exact_dense, exact_fused = top10(store, dense, sparse_q, flt, True, pool, fusion)
            again = store.query(dense=dense, sparse=sparse_q, flt=flt, limit=10,
                                prefetch_limit=pool.sparse, dense_prefetch_limit=pool.dense,
                                fusion=fusion, exact=True)  # fmt: skip
            approx_dense, approx_fused = top10(store, dense, sparse_q, flt, False, pool, fusion)
            if i >= WARMUP:
                rows.append({"total": total, "stages": response.timings_ms, "bare": bare,
                             "bound": embed + bare + rtt, "bare_warm": bare_warm,
                             "bound_warm": embed + bare_warm + rtt,
                             "bare_dense": bare_dense, "bare_sparse": bare_sparse,
                             "page_checks": page_checks, "rtt": rtt,
                             "recall": recall_counting_ties(approx_dense, exact_dense),
                             "recall_strict": overlap(ids(approx_dense), ids(exact_dense[:10])),
                             "hybrid_recall": recall_counting_ties(approx_fused, exact_fused),
                             "hybrid_recall_strict": overlap(ids(approx_fused),
                                                             ids(exact_fused[:10])),
                             "exact_again": overlap(ids(again), ids(exact_fused[:10])),
                             "dense": dense, "exact_dense": exact_dense, "sparse": sparse_q,
                             "exact_fused": exact_fused})  # fmt: skip
        listings: list[float] = []
        for _ in range(LISTINGS):
            t = time.perf_counter()
            listed = (caller_folders(store, "alice"), caller_tags(store, "alice"))
            listings.append((time.perf_counter() - t) * 1000)
        filler_rss = rss_mb()
        disk = disk_mb(Path(tmp))
        variants = search_variants(store, rows, flt)
        fused_variants = hybrid_variants(store, rows, flt, pool, fusion)
        service.close()
        http.close()
        store.close()
        resident = search_process_rss(Path(tmp), n_queries)
    totals = [r["total"] for r in rows]
    bounds = [r["bound"] for r in rows]
    warm_bounds = [r["bound_warm"] for r in rows]
    return {
        "chunks": size,
        "queries": len(rows),
        "filter_share": round(share, 4),
        "segments": info["segments"],
        "preload_share": settings.qdrant_preload_share,
        "preload_wait_s": round(preload_wait, 2),
        "p50_ms": round(pct(totals, 0.5), 2),
        "p95_ms": round(pct(totals, 0.95), 2),
        "bare_query_p50_ms": round(pct([r["bare"] for r in rows], 0.5), 2),
        "bare_query_p95_ms": round(pct([r["bare"] for r in rows], 0.95), 2),
        "bare_query_asked": "cold",
        "ids_name_documents": all(point_document(r["exact_fused"][0].id) for r in rows),
        "bare_query_warm_p50_ms": round(pct([r["bare_warm"] for r in rows], 0.5), 2),
        "bare_query_warm_p95_ms": round(pct([r["bare_warm"] for r in rows], 0.95), 2),
        "bare_dense_p95_ms": round(pct([r["bare_dense"] for r in rows], 0.95), 2),
        "bare_sparse_p95_ms": round(pct([r["bare_sparse"] for r in rows], 0.95), 2),
        "bound_p95_ms": round(pct(bounds, 0.95), 2),
        "round_trip_p50_ms": round(statistics.median(r["rtt"] for r in rows), 2),
        "round_trip_request": "search",
        "page_checks_p50_ms": round(statistics.median(r["page_checks"] for r in rows), 2),
        "feedback_first_depth": min(pool.sparse, run_settings.bm25_feedback_first_depth),
        "search_stages_p50_ms": {
            stage: round(statistics.median(r["stages"].get(stage, 0.0) for r in rows), 2)
            for stage in ("embed", "feedback", "query", "payloads", "verify")
        },
        "ratio_p95": round(pct(totals, 0.95) / pct(bounds, 0.95), 3),
        "ratio_p95_warm_bound": round(pct(totals, 0.95) / pct(warm_bounds, 0.95), 3),
        **{key: round(statistics.mean(r[name] for r in rows), 4) for key, name in RECALLS.items()},
        "listing_p50_ms": round(statistics.median(listings), 2),
        "listed_folders": len(listed[0]),
        "listed_tags": len(listed[1]),
        "rss_mb": resident,
        "rss_measured_in": "search process",
        "filling_process_rss_mb": filler_rss,
        "disk_mb": disk,
        **building,
        "search_variants": variants,
        "hybrid_variants": fused_variants,
    }


LISTINGS = 5
"""How many times a row asks the search page's two filter listings."""

BUILDING_KEYS = (
    "fill_points_per_s",
    "optimize_seconds",
    "optimize_max_search_ms",
    "optimize_max_write_ms",
    "optimize_searches",
    "optimize_copy_locked_s",
    "optimize_swap_locked_s",
    "optimize_load_s",
    "optimize_swap_replay_s",
    "optimize_copy_close_s",
    "optimize_live_close_s",
)
"""A row's figures of building its store: carried over when a kept store is queried again."""


@contextlib.contextmanager
def _store_folder(tmp_root: str | None, keep: Path | None, reuse: bool) -> Iterator[str]:
    """A temporary folder under ``tmp_root``, removed after; or ``keep``, created and kept
    (``reuse``: which must exist already)."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="bench-scale-", dir=tmp_root) as tmp:
            yield tmp
    else:
        if not reuse:
            keep.mkdir(parents=True)
        elif not (keep / "active_model").exists():
            raise SystemExit(f"--reuse: no kept store at {keep}")
        yield str(keep)


RECALLS = {
    "recall_at_10_vs_exact": "recall",
    "recall_at_10_vs_exact_strict": "recall_strict",
    "hybrid_recall_at_10_vs_exact": "hybrid_recall",
    "hybrid_recall_at_10_vs_exact_strict": "hybrid_recall_strict",
    "exact_fused_again": "exact_again",
}
"""A size's recall keys (mean over the queries) → the per-query figure they average: ties
counted (:func:`recall_counting_ties`) and strict (the exact top 10's ids), of the dense branch
and of the fused query; ``exact_fused_again``: a second exact fused query's top 10 against
the first's ids (below 1.0 only where the engine breaks ties differently on each call)."""

RSS_MARK = {"search process": "", "filling process": " ¹"}
"""Rows whose resident memory was read in the process that filled the store (an upper bound
of a search process's) are marked."""

BUILT_MARK = {False: "", True: " ²"}
"""Rows whose store an earlier run built (:data:`BUILDING_KEYS` carried over) are marked."""


def _holds(row: dict[str, Any]) -> str:
    """The write lock's holds while optimising (copy, swap, the swap's steps: its last replay,
    the two closes, the load), where measured."""
    if "optimize_swap_locked_s" not in row:
        return ""
    steps = f"load {row['optimize_load_s']} s"
    if "optimize_live_close_s" in row:
        steps = (
            f"last replay {row['optimize_swap_replay_s']} s, the copy's close "
            f"{row['optimize_copy_close_s']} s, the live shard's close "
            f"{row['optimize_live_close_s']} s, {steps}"
        )
    return (
        f" (lock held: copy {row['optimize_copy_locked_s']} s, swap "
        f"{row['optimize_swap_locked_s']} s of which {steps})"
    )


def _reused(row: dict[str, Any]) -> bool:
    return bool(row.get("store_built_by_an_earlier_run"))


VECTORS_NOTE = {
    "realistic": f" (each a real SciFact chunk embedding + {MIX} × another + noise, normalised)",
    "random": " (uniform on the sphere: no clusters, the worst case of a graph index)",
}


def search_process_rss(path: Path, n_queries: int) -> float:
    """Resident memory, MB, of a fresh process that opens the store at ``path`` and the
    models and answers ``n_queries`` realistic queries (:func:`serve_queries`): what a search
    process holds, without the filling that this one did."""
    out = subprocess.run(
        [sys.executable, __file__, "--search-rss", str(path), "--queries", str(n_queries)],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip
    return float(json.loads(out.stdout.strip().splitlines()[-1])["rss_mb"])


def serve_queries(path: Path, n_queries: int) -> None:
    """The child of :func:`search_process_rss`: open, query as alice as the search does (both
    branches, fused in the process, an over-fetched page grouped by document and ten whole
    payloads read), print ``{"rss_mb"}``."""
    settings = Settings()
    embedder = Embedder(settings)
    embedder.load()
    store = QdrantEdgeStore(path, "bench", layout=CollectionLayout.from_settings(settings))
    flt = build_filter("alice", realistic_request("x").filter_tree())
    fetch = settings.search_default_limit * settings.search_overfetch * CHUNKS_PER_DOC
    pool = Pool.for_fetch(settings, fetch)
    for query in queries(n_queries):
        dense, sparse = embedder.embed_query(query)
        ranking = fuse([store.branch(dense=dense, flt=flt, limit=pool.dense, fields=()),
                        store.branch(sparse=sparse, flt=flt, limit=pool.sparse, fields=())],
                       Fusion(settings.fusion))[:fetch]  # fmt: skip
        store.retrieve([h.id for h in group_hits(keyed(store, ranking))[:10]])
    print(json.dumps({"rss_mb": rss_mb()}))
    store.close()


def section(results: dict[str, Any], settings: Settings, n_queries: int) -> str:
    when = results["written"]
    load = results["load_at_end"]
    lines = [
        "## Scale",
        "",
        f"`make bench-scale` — {when}, {platform.machine()}, {os.cpu_count()} cores, load "
        f"average {load:.1f} at the end. Qdrant Edge with the default layout (int8 quantisation "
        f"in RAM, originals and payloads on disk, `acl` as the tenant index, HNSW m "
        f"{settings.qdrant_hnsw_m} / payload_m {settings.qdrant_hnsw_payload_m}, a filtered "
        f"search scanning what its filter lets through under "
        f"{settings.qdrant_full_scan_threshold_kb:,} KB of vectors, dense, or "
        f"{settings.qdrant_sparse_full_scan_threshold:,} points, BM25, or "
        f"{settings.qdrant_sparse_full_scan_share:g} of the shard where more for stores "
        "optimised since 2026-12-04, below: where each row was built) and search "
        f"parameters (beam {settings.qdrant_hnsw_ef}, int8 candidates × "
        f"{settings.qdrant_oversampling} rescored, ACORN {'on' if settings.qdrant_acorn else 'off'}"
        f"; files read ahead into the page cache: {_preload(settings.qdrant_preload_share)}"
        f"), filled as `bench-search` fills it with {results['vectors']} dense vectors"
        f"{VECTORS_NOTE[results['vectors']]}, then optimised as `ncindex up` does in the "
        f"background (a copy in a child process, swapped in). {n_queries} queries per size as "
        "`alice` with the realistic filter; times in ms; bound = embed + bare query + one 5 ms "
        "verification round trip; recall = the top 10 through the index against exact search "
        "with the same filter (exact: every point scored on its original vector), of the dense "
        "branch alone and of the engine's fused hybrid query (the product fuses the same "
        "branches in the process), a hit whose exact score "
        f"ties the exact 10th's (within {TIE:g}) counted as found — strict: the exact top 10's "
        "ids only; exact again: a second exact fused query against the first (Qdrant breaks "
        "fused ties at random, so where ties straddle the 10th place no top 10 is the exact "
        "one; rows without these were measured strictly, before ties were counted); RSS is a "
        "fresh search process that opens the store and the models and "
        "answers the queries (¹: read in the process that filled the store, an upper bound); "
        "²: the store was built and optimised by an earlier run (`--keep`) and queried again "
        "(`--reuse`), its fill and optimisation figures that run's. Bare p95 is asked cold (for "
        "a query the engine has not been asked: its first call reads from disk what it touches "
        "of the store, as the search's does), then warm (the searched query again, right after the "
        "search); ratio p95 is against the cold bound, then against the warm one; ³: a row "
        "measured before the bare query was asked cold — its bare p95 is the warm one, so its "
        "bound is low beside the search it is held to; ⁴: a row measured before point ids named "
        "their documents — its bare query read the `doc_key` of its 120 hits, which the search "
        "never read in one round (40 there; none since), so its bound is high beside the "
        "search.",
        "",
        "| shape | chunks | filter selects | p50 | p95 | bare p95: cold / warm | bare p95: "
        "dense / BM25 prefetch | bound p95 | ratio p95: cold / warm bound | "
        "recall@10 vs exact: dense / hybrid | hybrid strict / exact again | RSS MB | disk MB | "
        "fill points/s | optimise s | "
        "longest search / write while optimising, ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for shape, sizes in results["shapes"].items():
        for size, r in sizes.items():
            lines.append(
                f"| {shape} | {int(size):,} | {r['filter_share']:.1%} | {r['p50_ms']} | "
                f"{r['p95_ms']} | {_cold_warm(r, 'bare_query_p95_ms', 'bare_query_warm_p95_ms')} | "
                f"{r.get('bare_dense_p95_ms', '–')} / {r.get('bare_sparse_p95_ms', '–')} | "
                f"{r['bound_p95_ms']} | "
                f"{_cold_warm(r, 'ratio_p95', 'ratio_p95_warm_bound')} | "
                f"{r['recall_at_10_vs_exact']} / "
                f"{r['hybrid_recall_at_10_vs_exact']} | "
                f"{r.get('hybrid_recall_at_10_vs_exact_strict', '–')} / "
                f"{r.get('exact_fused_again', '–')} | "
                f"{r['rss_mb']}{RSS_MARK[r['rss_measured_in']]} | {r['disk_mb']} | "
                f"{r['fill_points_per_s']:,}{BUILT_MARK[_reused(r)]} | {r['optimize_seconds']} | "
                f"{r['optimize_max_search_ms']} / {r['optimize_max_write_ms']}{_holds(r)} |"
            )
    lines += stages(results)
    lines += grid(results, "search_variants", "recall_at_10_vs_exact",
                  "Search parameters on the same optimised stores: recall@10 of the dense "
                  "branch against exact search (ties counted / strict), and its p50 / p95 in ms "
                  "(`VARIANTS`; the "
                  "defaults are `ef128 x2`):")  # fmt: skip
    lines += grid(results, "hybrid_variants", "hybrid_recall_at_10_vs_exact",
                  "The fused query's dense prefetch (`HYBRID_VARIANTS`: D deep beside the "
                  "BM25 prefetch's 360, the default D "
                  f"{Pool.shared(360, settings.dense_prefetch_share).dense} "
                  "(`NCINDEX_DENSE_PREFETCH_SHARE`; 360 before 2026-12-04); drawn N × D int8 "
                  "candidates, rescored; a beam "
                  "of M × those; the defaults draw 1x at that depth, `CollectionLayout.drawn`, "
                  f"with a beam of {settings.qdrant_hnsw_ef_per_candidate:g}x, "
                  "`NCINDEX_QDRANT_HNSW_EF_PER_CANDIDATE`; rows measured before that cap, "
                  "2026-12-03, drew 2x by default): recall@10 of the fused hybrid query "
                  "against the exact one at the same depths (ties counted / strict), "
                  "and its p50 / p95 in ms:")  # fmt: skip
    lines += reading("scale")
    return "\n".join(lines) + "\n"


def _preload(share: float) -> str:
    """How the section's header names ``NCINDEX_QDRANT_PRELOAD_SHARE``."""
    return f"within {share:g} of available memory" if share else "none"


def _cold_warm(row: dict[str, Any], cold: str, warm: str) -> str:
    """``cold / warm`` for a row whose bare query was asked cold; the value marked ³ for a
    row measured before (its one figure is the warm one); marked ⁴ where the bare query read
    its hits' ``doc_key`` (point ids not yet naming their documents)."""
    read = "" if row.get("ids_name_documents") else "⁴"
    if row.get("bare_query_asked") == "cold":
        return f"{row[cold]} / {row[warm]}{read}"
    return f"{row[cold]}³{read}"


def stages(results: dict[str, Any]) -> list[str]:
    """The lines of a table of the search's own stage medians per shape and size, beside the
    stand-in's round trip and the page's checks alone; none when no size measured them."""
    rows = [(shape, size, r) for shape, sizes in results["shapes"].items()
            for size, r in sizes.items() if r.get("page_checks_p50_ms") is not None]  # fmt: skip
    if not rows:
        return []
    lines = ["", "Where the search's time goes (medians, ms): its own stages (`timings_ms`), one "
             "round trip to the stand-in (it answers in 5 ms), and the page's ten checks alone "
             "(all at once, as the search makes them); query: the two branches asked and fused "
             "(first BM25: the BM25 branch's depth in that first pass — 360, the pool, in rows "
             "measured before `NCINDEX_BM25_FEEDBACK_FIRST_DEPTH`, marked –), "
             "BM25 feedback pass: what the expansion adds (its texts read, the BM25 branch asked "
             "again) — in rows measured before the search fused in its own process (commit "
             "`13da3d3`: the 1,000,000 rows) the feedback pass was a whole fused query and query "
             "the rounds' fused queries; payloads read –: measured before the search read "
             "payloads per verified batch (its query read all its hits'); folders + tags: the "
             "search page's two filter listings for alice, facets of the engine (– : measured "
             "before they were, or not measured):", "",
             "| shape | chunks | embed | BM25 feedback pass | query | first BM25 | "
             "payloads read | verification | round trip | page's checks alone | "
             "folders + tags (listed) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for shape, size, r in rows:
        st = r["search_stages_p50_ms"]
        lines.append(
            f"| {shape} | {int(size):,} | {st['embed']} | {st['feedback']} | {st['query']} | "
            f"{r.get('feedback_first_depth', '–')} | "
            f"{st.get('payloads', '–')} | {st['verify']} | {r['round_trip_p50_ms']} | "
            f"{r['page_checks_p50_ms']} | {_listing(r)} |"
        )
    return lines


def _listing(row: dict[str, Any]) -> str:
    """``ms (folders / tags)`` of a row's two filter listings; ``–`` where not measured."""
    if "listing_p50_ms" not in row:
        return "–"
    return f"{row['listing_p50_ms']} ({row['listed_folders']:,} / {row['listed_tags']:,})"


def strict(value: float | None) -> str:
    """`` / value`` for a strict recall beside one counting ties, nothing where not measured."""
    return "" if value is None else f" / {value}"


def grid(results: dict[str, Any], key: str, recall: str, caption: str) -> list[str]:
    """The lines of a table of ``key``'s variants per shape and size (recall with ties counted,
    strict after a slash where measured, and p50 / p95), under ``caption``; none when no size
    measured them."""
    names: list[str] = []
    for sizes in results["shapes"].values():
        for r in sizes.values():
            names += [n for n in r.get(key, {}) if n not in names]
    if not names:
        return []
    lines = ["", caption, "", "| shape | chunks | " + " | ".join(names) + " |",
             "|---|---:|" + "---:|" * len(names)]  # fmt: skip
    for shape, sizes in results["shapes"].items():
        for size, r in sizes.items():
            cells = [
                f"{v[recall]}{strict(v.get(recall + '_strict'))} ({v['p50_ms']} / {v['p95_ms']})"
                if (v := r.get(key, {}).get(n))
                else "–"
                for n in names
            ]  # fmt: skip
            lines.append(f"| {shape} | {int(size):,} | " + " | ".join(cells) + " |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n", 1)[0].split()))
    parser.add_argument(
        "--sizes",
        default="10000,100000,1000000",
        help="chunks per store, comma-separated (default: 10000,100000,1000000)",
    )
    parser.add_argument(
        "--shapes",
        default=",".join(SHAPES),
        help=f"tenancy shapes, comma-separated (default: {','.join(SHAPES)})",
    )
    parser.add_argument(
        "--queries", type=int, default=100, help="queries per store and shape (default: 100)"
    )
    parser.add_argument("--tmp", default=None, help="folder for the stores (default: $TMPDIR)")
    parser.add_argument(
        "--vectors",
        choices=["realistic", "random"],
        default="realistic",
        help="dense vectors: mixes of real SciFact embeddings (default) or uniform random",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="build each store in DIR/<shape>-<size> (which must not exist) and keep it",
    )
    parser.add_argument(
        "--reuse",
        type=Path,
        help="query the stores an earlier --keep run left in DIR/<shape>-<size> without "
        "building them again; the building's figures are those scale.json has for them",
    )
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--update",
        action="store_true",
        help="merge the measured shapes and sizes into the existing scale.json (runs of "
        "different shapes side by side) instead of replacing it",
    )
    parser.add_argument(
        "--section-only",
        action="store_true",
        help="rewrite the Scale section of RESULTS.md from scale.json, measuring nothing",
    )
    parser.add_argument("--search-rss", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.search_rss is not None:
        serve_queries(args.search_rss, args.queries)
        return 0
    if args.section_only:
        results = json.loads((RESULTS_DIR / "scale.json").read_text(encoding="utf-8"))
        publish("scale", results, "Scale", section(results, Settings(), args.queries))
        return 0
    base = Settings()
    settings = Settings(
        accounts={"alice": SecretStr("pw")},
        user_cache_seconds=0,
        verify_concurrency=max(base.verify_concurrency, base.search_default_limit),
    )
    install_models(settings.model_dir)
    embedder = Embedder(settings)
    embedder.load()
    pieces = scifact_pieces()
    sizes = [int(s) for s in args.sizes.split(",")]
    pieces = pieces[: min(len(pieces), max(sizes))]
    sparse = embedder.embed_documents_sparse(pieces)
    dense_vectors = None
    if args.vectors == "realistic":
        cache = VectorCache(CACHE, model_identity(embedder.model_name, embedder.paths.dense_dir))
        embeddings = np.asarray(cache.dense(pieces, embedder.embed_documents_dense), np.float32)
        cache.close()
        dense_vectors = realistic_vectors(embeddings)
    verifier = StandIn()
    url = verifier.url
    results: dict[str, Any] = {"shapes": {}}
    published = RESULTS_DIR / "scale.json"
    earlier = json.loads(published.read_text(encoding="utf-8")) if args.reuse else {}
    folders = args.reuse or args.keep
    for shape in args.shapes.split(","):
        results["shapes"][shape] = {}
        for size in sizes:
            built = earlier["shapes"][shape][str(size)] if args.reuse else None
            row = measure(SHAPES[shape], size, args.queries, embedder, settings, pieces, sparse,
                          url, args.tmp, dense_vectors,
                          folders / f"{shape}-{size}" if folders else None, built)  # fmt: skip
            results["shapes"][shape][str(size)] = row
            print(json.dumps({shape: {str(size): row}}), file=sys.stderr, flush=True)
    verifier.close()
    results["vectors"] = args.vectors
    results["written"] = datetime.now(UTC).strftime("%Y-%m-%d")
    results["load_at_end"] = round(os.getloadavg()[0], 1)
    if args.update and published.exists():
        before = json.loads(published.read_text(encoding="utf-8"))
        if before.get("vectors") == args.vectors:
            for shape, sizes in before.get("shapes", {}).items():
                merged = {**sizes, **results["shapes"].get(shape, {})}
                results["shapes"][shape] = dict(sorted(merged.items(), key=lambda kv: int(kv[0])))
    table = section(results, settings, args.queries)
    print(table)
    if not args.no_write:
        publish("scale", results, "Scale", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
