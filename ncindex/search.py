"""The search path: one filtered hybrid query, grouping, verify-on-read, snippets (DESIGN §9).

1. Embed the query: dense and BM25 sparse (a dense failure degrades to sparse-only).
2. One hybrid query: a dense and a sparse prefetch, each with the same filter (so filters
   apply before fusion), fused by RRF or DBSF; chunk hits are over-fetched.
3. Group by ``doc_key`` (one result per document, its best chunk), ties broken by ``doc_key``.
4. Verify candidates as the searching user, in rank order, until the page is full; fetch a
   further page of hits if drops leave it short. Drops enqueue a re-check that evicts.
5. Snippets from the best chunk: escaped, matches marked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ncindex.documents import DocRef, DocType
from ncindex.embedding import Embedder
from ncindex.errors import NcindexError
from ncindex.filters import search_filter
from ncindex.nextcloud.client import NextcloudClient
from ncindex.settings import Settings
from ncindex.store.port import Fusion, Hit, SparseVector, VectorStore
from ncindex.text.snippets import make_snippet
from ncindex.verify import Verdict, VerificationCounts, VerifyOnRead

log = structlog.get_logger(__name__)

MAX_ROUNDS = 3


class SearchRequest(BaseModel):
    """Body of ``POST /v1/search``."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=1000, description="What to look for.")
    limit: int = Field(10, ge=1, le=100, description="Results per page.")
    doc_types: list[DocType] | None = Field(None, description="Only these document types.")
    fusion: Literal["rrf", "dbsf"] | None = Field(None, description="Fusion; default rrf.")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must contain a non-space character")
        return value


@dataclass(slots=True)
class SearchResult:
    """One document in a response."""

    doc_type: str
    doc_id: str
    title: str
    score: float
    snippet: str
    char_start: int
    char_end: int
    chunk_index: int
    modified_at: int
    path: str | None = None
    url: str | None = None


@dataclass(slots=True)
class SearchResponse:
    """A page of results with the verification counts, ``degraded`` (sparse-only answer)
    and stage timings in milliseconds."""

    results: list[SearchResult]
    verification: VerificationCounts
    degraded: bool
    timings_ms: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The JSON body."""
        return {
            "results": [
                {k: getattr(r, k) for k in SearchResult.__slots__}  # type: ignore[attr-defined]
                for r in self.results
            ],
            "verification": self.verification.as_dict(),
            "degraded": self.degraded,
            "timings_ms": {k: round(v, 2) for k, v in self.timings_ms.items()},
        }


def group_hits(hits: list[Hit]) -> list[Hit]:
    """Best hit per ``doc_key``, ordered by score (descending), ties by ``doc_key``."""
    best: dict[str, Hit] = {}
    for hit in hits:
        key = hit.payload["doc_key"]
        if key not in best or hit.score > best[key].score:
            best[key] = hit
    return sorted(best.values(), key=lambda h: (-h.score, h.payload["doc_key"]))


class SearchService:
    """Runs searches against one store and embedder. ``on_drop(user, doc_key)`` is called for
    every candidate verification dropped (the app enqueues a re-check that evicts)."""

    def __init__(
        self,
        settings: Settings,
        store: VectorStore,
        embedder: Embedder,
        on_drop: Callable[[str, DocRef], None] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.on_drop = on_drop
        self.verifier = VerifyOnRead(settings.verify_concurrency)

    def search(self, client: NextcloudClient, request: SearchRequest) -> SearchResponse:
        """Search as ``client.user`` (resolved); raises ``StoreUnavailable`` if the store fails."""
        assert client.user is not None
        timings: dict[str, float] = {}
        started = time.perf_counter()
        dense, sparse, degraded = self._embed(request.query)
        timings["embed"] = (time.perf_counter() - started) * 1000
        flt = search_filter(client.user, request.doc_types)
        fusion = Fusion(request.fusion or self.settings.fusion)
        fetch = min(1000, request.limit * self.settings.search_overfetch * 4)
        counts = VerificationCounts()
        results: list[SearchResult] = []
        seen: set[str] = set()
        timings["query"] = timings["verify"] = 0.0
        for round_ in range(MAX_ROUNDS):
            t0 = time.perf_counter()
            hits = self.store.query(
                dense=dense,
                sparse=sparse,
                flt=flt,
                limit=fetch,
                offset=round_ * fetch,
                prefetch_limit=max(self.settings.prefetch_limit, fetch * (round_ + 1)),
                fusion=fusion,
            )
            timings["query"] += (time.perf_counter() - t0) * 1000
            candidates = [h for h in group_hits(hits) if h.payload["doc_key"] not in seen]
            seen.update(h.payload["doc_key"] for h in candidates)
            t0 = time.perf_counter()
            self._verify_into(client, request, candidates, results, counts)
            timings["verify"] += (time.perf_counter() - t0) * 1000
            if len(results) >= request.limit or len(hits) < fetch:
                break
        timings["total"] = (time.perf_counter() - started) * 1000
        return SearchResponse(results, counts, degraded, timings)

    def _embed(self, query: str) -> tuple[list[float] | None, SparseVector, bool]:
        sparse = self.embedder.embed_query_sparse(query)
        try:
            return self.embedder.embed_query_dense(query), sparse, False
        except (NcindexError, RuntimeError, ValueError) as exc:
            log.warning("dense_embed_failed", error=str(exc))
            return None, sparse, True

    def _verify_into(
        self,
        client: NextcloudClient,
        request: SearchRequest,
        candidates: list[Hit],
        results: list[SearchResult],
        counts: VerificationCounts,
    ) -> None:
        assert client.user is not None
        pending = list(candidates)
        while pending and len(results) < request.limit:
            batch, pending = (
                pending[: request.limit - len(results)],
                pending[request.limit - len(results) :],
            )
            verdicts = self.verifier.check(client, [h.payload for h in batch], counts)
            for hit, checked in zip(batch, verdicts, strict=True):
                if checked.verdict is Verdict.DROPPED:
                    if self.on_drop is not None:
                        self.on_drop(client.user, DocRef.parse(hit.payload["doc_key"]))
                    continue
                results.append(self._result(hit, request.query, client.user, checked.path))

    @staticmethod
    def _result(hit: Hit, query: str, user: str, verified_path: str | None) -> SearchResult:
        p = hit.payload
        return SearchResult(
            doc_type=p["doc_type"],
            doc_id=p["doc_id"],
            title=p.get("title") or "",
            score=round(hit.score, 6),
            snippet=make_snippet(p.get("text") or "", query),
            char_start=p["char_start"],
            char_end=p["char_end"],
            chunk_index=p["chunk_index"],
            modified_at=p["modified_at"],
            path=verified_path or (p.get("paths") or {}).get(user),
            url=p.get("url"),
        )

    def close(self) -> None:
        """Stop the verification pool."""
        self.verifier.close()
