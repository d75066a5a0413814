"""The library path of ``ncindex eval``: the product's own parts in one process, no HTTP.

A corpus document becomes what the product would index for it (:func:`source_text`): a note's
content as the Notes API returns it, or a markdown file's extracted text — the same chunker
(:class:`~ncindex.text.chunking.Chunker` from the settings), the same embedder, the same payload
(:func:`~ncindex.documents.build_payload`), the same store engine (Qdrant Edge, in a folder of
its own). Queries run through the product's own :class:`~ncindex.search.service.SearchService`
(embed,
filter by the caller's ``acl``, one fused query per round, grouping by ``doc_key``, ordering),
as the evaluation user, with a verifier that keeps every candidate instead of asking Nextcloud
(the evaluation user can read everything). What it leaves out is the Nextcloud round trips:
webhooks, fetching and verification.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import structlog

from evaluation.beir import BeirDataset, CorpusDoc, note_content
from evaluation.cache import VectorCache
from evaluation.metrics import Metrics, evaluate
from evaluation.modes import MODES, Mode
from ncindex.documents import (
    Chunk,
    DocRef,
    DocType,
    SourceDocument,
    build_payload,
    point_id,
    principal,
)
from ncindex.embedding.embedder import Embedder
from ncindex.search.service import Mode as SearchMode
from ncindex.search.service import SearchRequest, SearchService
from ncindex.search.verify import Checked, Verdict, VerifyOnRead
from ncindex.settings import Settings
from ncindex.store import model_slug
from ncindex.store.port import Fusion, Hit, PointRecord
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.text.chunking import Chunker
from ncindex.text.extract import extract_text

log = structlog.get_logger(__name__)

EVAL_USER = "eval"
"""The one Nextcloud user who owns every evaluation document and runs every query."""
LIMITS = (10, 100)
"""Each query is asked twice, as a user would: a page of 10 (nDCG@10, Recall@10, MRR@10,
zero results) and a page of 100 (Recall@100), each with the product's own over-fetch."""

MAX_QUERY_CHARS = 1000
"""The search API's longest query; longer queries are cut to it (on both paths)."""

TextVariant = Literal["content", "text_only", "title_each_chunk"]
"""What the vectors are computed from: ``content`` — the chunk of the note as the product
indexes it (title as its first line, so in the first chunk); ``text_only`` — the note without
its title; ``title_each_chunk`` — the title prepended to every later chunk's embedded text (the
stored chunk text is unchanged). Only ``content`` is what the product does."""


def kind_of(index: int) -> DocType:
    """Corpus documents alternate between notes (even positions) and markdown files (odd)."""
    return DocType.NOTE if index % 2 == 0 else DocType.FILE


def file_name(doc: CorpusDoc) -> str:
    """The markdown file (or note) name a corpus document is stored under: its id plus
    ``.md``, so names are unique and safe whatever the title holds."""
    return f"{doc.doc_id}.md"


def source_text(
    doc: CorpusDoc, kind: DocType, settings: Settings, *, variant: TextVariant = "content"
) -> tuple[str, bool]:
    """The text the product extracts for ``doc`` stored as ``kind`` and whether it is markdown:
    a note's content verbatim (the Notes API returns the file as written), cut at
    ``max_document_chars``; a markdown file's text through :func:`extract_text`."""
    title = "" if variant == "text_only" else doc.title
    content = note_content(title, doc.text)
    if kind is DocType.NOTE:
        return content[: settings.max_document_chars], True
    extracted = extract_text(
        content.encode("utf-8"),
        mime_type="text/markdown",
        filename=file_name(doc),
        max_chars=settings.max_document_chars,
    )
    return extracted.text, extracted.markdown


@dataclass(slots=True)
class IndexStats:
    """What :meth:`LibraryIndex.index` did: documents, chunks, chunks embedded densely (the
    rest came from the cache), seconds."""

    documents: int = 0
    chunks: int = 0
    embedded: int = 0
    seconds: float = 0.0


class LibraryIndex:
    """A throw-away index of evaluation documents in a Qdrant Edge store under ``folder``.

    ``rrf_k`` and ``weights`` are passed to every RRF query (``None`` ⇒ the store's defaults,
    which is what the product uses). ``cache`` (optional) supplies dense vectors already
    computed. Close with :meth:`close`.
    """

    def __init__(
        self,
        settings: Settings,
        embedder: Embedder,
        folder: Path,
        *,
        cache: VectorCache | None = None,
        variant: TextVariant = "content",
        rrf_k: int | None = None,
        weights: Sequence[float] | None = None,
    ) -> None:
        self.settings = settings
        self.embedder = embedder
        self.cache = cache
        self.variant = variant
        self.rrf_k = rrf_k
        self.weights = weights
        self.chunker = Chunker.from_settings(settings)
        self.store = QdrantEdgeStore(Path(folder), model_slug(settings.dense_model))
        self.store.ensure_collection(embedder.dense_dim)
        tuned = _FusionTuned(self)
        self.service = SearchService(settings, lambda: (tuned, embedder))
        self.service.verifier = VerifyOnRead(
            1, verifiers={t.value: _keep for t in (DocType.NOTE, DocType.FILE)}
        )
        self.corpus_of: dict[str, str] = {}  # doc_key → corpus id

    # --- indexing ------------------------------------------------------------------------

    def chunks(
        self, dataset: BeirDataset, doc_ids: Mapping[str, str] | None = None
    ) -> Iterator[tuple[SourceDocument, list[Chunk], bool]]:
        """Each corpus document as the product would see it, with its chunks; its ``doc_id``
        is ``doc_ids[corpus id]`` when given (e.g. the product's file ids, so that ties break
        alike), else the corpus id."""
        for i, doc in enumerate(dataset.corpus.values()):
            kind = kind_of(i)
            text, markdown = source_text(doc, kind, self.settings, variant=self.variant)
            ref = DocRef(kind, doc_ids[doc.doc_id] if doc_ids else doc.doc_id)
            self.corpus_of[ref.key] = doc.doc_id
            source = SourceDocument(
                ref=ref,
                user=EVAL_USER,
                owner=EVAL_USER,
                title=doc.title or doc.doc_id,
                text=text,
                etag=doc.doc_id,
                modified_at=0,
                path=f"/{'Notes' if kind is DocType.NOTE else 'Documents'}/{file_name(doc)}",
                mime_type="text/markdown",
            )
            yield source, self.chunker.chunk_text(text, markdown=markdown), markdown

    def index(
        self,
        dataset: BeirDataset,
        batch_docs: int = 256,
        doc_ids: Mapping[str, str] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> IndexStats:
        """Chunk, embed and write every corpus document (``doc_ids`` as in :meth:`chunks`);
        embeds across documents in batches sorted by length (as fast as the embedder goes).
        ``progress`` is called with the documents read so far after each batch. Returns
        :class:`IndexStats`."""
        started = time.perf_counter()
        stats = IndexStats()
        pending: list[tuple[SourceDocument, list[Chunk]]] = []
        read = 0
        for source, chunks, _ in self.chunks(dataset, doc_ids):
            read += 1
            if chunks:
                pending.append((source, chunks))
            if len(pending) >= batch_docs:
                self._write(pending, stats)
                pending = []
                if progress is not None:
                    progress(read)
        if pending:
            self._write(pending, stats)
        if progress is not None:
            progress(read)
        stats.seconds = time.perf_counter() - started
        return stats

    def _embedded_text(self, source: SourceDocument, chunk: Chunk) -> str:
        if self.variant == "title_each_chunk" and chunk.index > 0:
            return f"{source.title}\n\n{chunk.text}"
        return chunk.text

    def _write(self, docs: list[tuple[SourceDocument, list[Chunk]]], stats: IndexStats) -> None:
        texts = [self._embedded_text(s, c) for s, chunks in docs for c in chunks]
        before = self.embedder.dense_embedded
        if self.cache is not None:
            dense = self.cache.dense(texts, self.embedder.embed_documents_dense)
        else:
            dense = self.embedder.embed_documents_dense(texts)
        sparse = self.embedder.embed_documents_sparse(texts)
        stats.embedded += self.embedder.dense_embedded - before
        vectors = iter(zip(dense, sparse, strict=True))
        points: list[PointRecord] = []
        model = self.embedder.model_name
        for source, chunks in docs:
            for chunk in chunks:
                d, s = next(vectors)
                payload = build_payload(
                    source,
                    chunk,
                    len(chunks),
                    acl=[principal(EVAL_USER)],
                    paths={EVAL_USER: source.path or "/"},
                    indexed_at=0,
                    embedding_model=model,
                    analyzer=self.embedder.analyzer_version,
                )
                pid = point_id(source.ref, source.content_hash, chunk.index)
                points.append(PointRecord(pid, payload, d, s))
            stats.documents += 1
        stats.chunks += len(points)
        self.store.upsert(points)

    # --- searching -----------------------------------------------------------------------

    def search(self, query: str, mode: Mode, limit: int) -> list[str]:
        """Corpus ids of the first page of ``limit`` results for ``query`` in ``mode``, from
        the product's search service (hybrid modes use ``mode.fusion``; ``bm25`` and ``dense``
        run one half). Raises what the search service raises."""
        request = SearchRequest(query=query, limit=limit, fusion=mode.fusion.value)
        half: SearchMode = (
            "hybrid" if mode.dense and mode.sparse else ("dense" if mode.dense else "sparse")
        )
        response = self.service.search(_CALLER, request, mode=half)
        return [self.corpus_of[f"{r.doc_type}:{r.doc_id}"] for r in response.results]

    def evaluate(
        self,
        dataset: BeirDataset,
        modes: Sequence[str] = tuple(MODES),
        progress: Callable[[int], None] | None = None,
        *,
        deep: bool = True,
    ) -> dict[str, Metrics]:
        """Metrics per mode name over the judged queries of ``dataset`` (see :data:`LIMITS`);
        queries are cut at :data:`MAX_QUERY_CHARS` and a blank one has no results. With
        ``deep=False`` only the 10-result page is asked for (faster; Recall@100 then counts
        that page only). ``progress`` is called with the number of queries done."""
        limits = LIMITS if deep else LIMITS[:1]
        runs: dict[str, dict[int, dict[str, list[str]]]] = {
            m: {limit: {} for limit in limits} for m in modes
        }
        for n, (qid, text) in enumerate(dataset.queries.items(), 1):
            text = text[:MAX_QUERY_CHARS]
            for name in modes:
                for limit in limits:
                    runs[name][limit][qid] = (
                        self.search(text, MODES[name], limit) if text.strip() else []
                    )
            if progress is not None:
                progress(n)
        return {
            name: evaluate(runs[name][limits[0]], dataset.qrels, runs[name].get(LIMITS[1]))
            for name in modes
        }

    def close(self) -> None:
        """Close the search service and the store."""
        self.service.close()
        self.store.close()


class _Caller:
    """Stands in for the searching user's Nextcloud client: the search service reads only its
    ``user`` and calls its ``confirm`` and ``confirming_early`` (nothing to confirm: no
    credential is sent), and the keep-all verifier never calls it."""

    user = EVAL_USER

    def confirm(self) -> None:
        """Nothing to confirm: the evaluation sends Nextcloud no credential."""

    @contextmanager
    def confirming_early(self) -> Iterator[None]:
        """Nothing to ask early (:meth:`confirm`): the block runs as it is."""
        yield


_CALLER = _Caller()


def _keep(client: object, payload: dict[str, Any]) -> Checked:
    return Checked(Verdict.KEPT)


class _FusionTuned:
    """The index's store as the search service sees it, with the index's ``rrf_k`` and
    ``weights`` (when set) added to every RRF query — for tuning without changing the product
    defaults. Everything else passes through."""

    def __init__(self, index: LibraryIndex) -> None:
        self._index = index

    def query(self, **kwargs: Any) -> list[Hit]:
        if kwargs.get("fusion") is Fusion.RRF:
            if self._index.rrf_k is not None:
                kwargs.setdefault("rrf_k", self._index.rrf_k)
            if self._index.weights is not None:
                kwargs.setdefault("weights", self._index.weights)
        return self._index.store.query(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index.store, name)
