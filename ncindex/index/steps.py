"""The steps a document goes through on its way into the index (DESIGN §4–§6), one named
method each, in their order:

1. :meth:`Steps.classify` — what a Nextcloud node is indexed as (note, file or nothing; the
   other doc types are what their task names);
2. :meth:`Steps.read` — the stored version, read once per document (payload and vectors);
3. :meth:`Steps.fetch` — the document read from Nextcloud through its doc type's source
   (:data:`ncindex.sources.registry.SOURCES`), which extracts the text of a file's bytes;
4. :meth:`Steps.chunk` — the text cut into token-sized chunks;
5. :meth:`Steps.embed` — the chunks' vectors, reused from the stored version where a chunk's
   text and model are the same, embedded otherwise (the documents of one write share an
   embedding run, and concurrent tasks share model calls: :mod:`ncindex.embedding.batching`);
6. :meth:`Steps.points` — the new version's points, written beside the old one;
7. :meth:`Steps.clean_up` — the old version deleted, so a search never sees half a document.

:meth:`Steps.write_documents` runs 4–7 for documents whose text changed (one embedding run and
one upsert for all of them), or :meth:`Steps.update_metadata` (no embedding) when it did not.
What composes them per operation
— and what happens when a step finds the document gone, unreadable or unextractable — is
:class:`ncindex.index.indexing.Indexer`'s.

A document counts as unchanged only when the store holds it as one whole version
(:func:`whole_version`): one left with two versions (the old one's delete failed or its worker
died) or with part of one (an upsert failed between batches) is rewritten by the next task
that reads it, whatever its etag.
"""

from __future__ import annotations

import posixpath
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from ncindex.documents import (
    Chunk,
    DocRef,
    SourceDocument,
    build_payload,
    path_fields,
    point_id,
    principal,
    text_hash,
)
from ncindex.embedding.batching import EmbedBatcher
from ncindex.embedding.embedder import Embedder
from ncindex.embedding.live_models import reusable_points
from ncindex.nextcloud.client import NextcloudClient
from ncindex.nextcloud.webdav import DavEntry
from ncindex.runtime import Services
from ncindex.sources.base import Fetched
from ncindex.sources.eligibility import classify
from ncindex.sources.registry import SOURCES
from ncindex.store.port import PointRecord
from ncindex.text.chunking import Chunker

log = structlog.get_logger(__name__)


def whole_version(payloads: list[dict[str, Any]]) -> bool:
    """Whether a document's stored ``payloads`` are exactly one version: one
    ``content_hash``, one ``chunk_count`` and the chunks ``0..chunk_count-1``, once each."""
    hashes = {p.get("content_hash") for p in payloads}
    counts = {p.get("chunk_count") for p in payloads}
    if len(hashes) != 1 or len(counts) != 1:
        return False
    indexes = sorted(p.get("chunk_index", -1) for p in payloads)
    return counts == {len(payloads)} and indexes == list(range(len(payloads)))


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an operation did: ``action`` is one of ``indexed``, ``updated``, ``unchanged``,
    ``evicted``, ``ineligible``, ``folder``, ``moved``, ``dead_letter`` (parked now or still
    parked); ``embedded`` counts chunks embedded; ``reason`` says why for ``ineligible`` and
    ``dead_letter``; ``path`` is the folder's path in the user's view for ``folder`` (what is
    below it is for the caller to walk: :mod:`ncindex.sync.subtree`); ``viewers``, for a
    document indexed for the first time or a node moved, the other configured accounts that
    may see it too
    (:meth:`ncindex.index.access.Access.co_viewers`: for the caller to ask Nextcloud);
    ``path`` is also, for ``ineligible``, the document's path in the user's view when known;
    ``truncated``, for a document whose text was read in this run and cut short by a bound
    (:attr:`~ncindex.documents.SourceDocument.truncated`), its path in the user's view (its
    doc_key when it has none), else ``None``; ``reindex``, for ``moved`` and ``folder``, the
    file ids whose re-read may embed, for the caller to queue on the ``index`` queue
    (:meth:`ncindex.index.indexing.Indexer.move_path`)."""

    action: str
    doc_key: str | None = None
    embedded: int = 0
    reason: str | None = None
    path: str | None = None
    viewers: tuple[str, ...] = ()
    truncated: str | None = None
    reindex: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Stored:
    """What the store holds of ``ref``, read once: ``points`` (ordered by ``chunk_index``,
    with their vectors when read so) and ``payload``, the first chunk's, ``None`` when there
    are no points.

    When the points are not one whole version (:func:`whole_version`), ``payload`` comes
    without ``etag`` and ``content_hash``, so nothing compares as unchanged: the next write
    rewrites the document (reusing the vectors of unchanged texts) and deletes every other
    version."""

    ref: DocRef
    payload: dict[str, Any] | None
    points: list[PointRecord] = field(default_factory=list)


class Steps:
    """The indexing steps on one process's :class:`Services` (the chunker and the per-model
    batchers are built once and shared by the process's tasks)."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self._chunker: Chunker | None = None
        # concurrent tasks of this worker share model calls (threads pool); one batcher per
        # model, so tasks pinned to different models (during a switch) never share a call
        self._batchers: weakref.WeakKeyDictionary[Embedder, EmbedBatcher[Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._batchers_lock = threading.Lock()

    @property
    def chunker(self) -> Chunker:
        """Token-sized chunker on the dense model's tokenizer (built on first use)."""
        if self._chunker is None:
            self._chunker = Chunker.from_settings(self.services.settings)
        return self._chunker

    def batcher(self, embedder: Embedder) -> EmbedBatcher[Any]:
        """The shared-call batcher of ``embedder`` (its :meth:`Embedder.embed_documents`): calls
        of up to four batches, as many at once as the embedder's cores allow, a call beside a
        running one only for at least a batch (``embed_batch_size``) of waiting texts."""
        with self._batchers_lock:
            batcher = self._batchers.get(embedder)
            if batcher is None:
                batcher = self._batchers[embedder] = EmbedBatcher(
                    embedder.embed_documents,
                    max_texts=self.services.settings.embed_batch_size * 4,
                    max_calls=embedder.concurrent_calls,
                    min_texts=self.services.settings.embed_batch_size,
                )
            return batcher

    # --- 1. classify -----------------------------------------------------------------------

    def classify(
        self, client: NextcloudClient, entry: DavEntry, *, fresh: bool = False
    ) -> tuple[DocRef | None, str | None]:
        """Step 1: what the node ``entry`` is indexed as
        (:func:`ncindex.sources.eligibility.classify`, on the user's Notes settings asked
        for anew with ``fresh``): its :class:`DocRef` (a note or a file), or ``None`` and
        why not."""
        return classify(self.services, client, entry, fresh=fresh)

    # --- 2. read the stored version --------------------------------------------------------

    def read(self, ref: DocRef, *, vectors: bool = True) -> Stored:
        """Step 2: ``ref``'s stored version (:class:`Stored`), with its vectors unless
        ``vectors`` is false (enough to change access or paths). The indexing operations read
        it once per document, under the document's lock, and pass it on: the fetch compares
        against its payload, the embedding reuses its vectors, the clean-up knows whether
        there is an old version. Logs ``inconsistent_document`` for a store holding other
        than one whole version."""
        points = self.services.store.document_points(ref.key, with_vectors=vectors)
        if not points:
            return Stored(ref, None)
        payload = points[0].payload
        if not whole_version([p.payload for p in points]):
            log.warning("inconsistent_document", doc_key=ref.key, points=len(points))
            payload = {k: v for k, v in payload.items() if k not in ("etag", "content_hash")}
        return Stored(ref, payload, points)

    # --- 3. fetch (and extract) ------------------------------------------------------------

    def fetch(
        self,
        client: NextcloudClient,
        stored: Stored,
        entry: DavEntry | None = None,
    ) -> Fetched:
        """Step 3: ``stored.ref`` read as ``client.user`` through its source's
        :meth:`~ncindex.sources.base.Source.fetch` (a conditional read against the stored
        payload; a file's bytes extracted to text there). ``entry`` is a node's WebDAV entry as
        just looked up by id. Raises what the source raises (``NotFound``, ``Forbidden``,
        ``ExtractionError``, ``TooLarge``, ``FileGone``, transient errors)."""
        source = SOURCES[stored.ref.doc_type]
        return source.fetch(self.services, client, stored.ref, stored.payload, entry)

    # --- 4. chunk --------------------------------------------------------------------------

    def chunk(self, doc: SourceDocument) -> list[Chunk]:
        """Step 4: ``doc``'s text in token-sized chunks (split on markdown structure when
        ``doc.markdown``); empty for a text with nothing to index."""
        return self.chunker.chunk_text(doc.text, markdown=doc.markdown)

    # --- 5. embed --------------------------------------------------------------------------

    def embed(self, work: Sequence[tuple[list[Chunk], Stored]]) -> list[tuple[list[Any], int]]:
        """Step 5: per ``(chunks, stored)`` of ``work``, the ``(dense, sparse)`` vectors of the
        chunks in their order and how many of the chunks were embedded: reused from the
        ``stored`` points (read with vectors) where a chunk's text and the model are the same
        (the BM25 vector too if the same analyzer made it, else that one is computed again),
        embedded otherwise — each text missing anywhere in ``work`` once, in one run of the
        shared batcher (:mod:`ncindex.embedding.batching`, which cuts it into model calls)."""
        embedder = self.services.embedder
        reuses = []
        wanted: dict[str, str] = {}  # text hash → text, each missing text once
        for chunks, stored in work:
            reuse = {
                h: (
                    p.dense,
                    p.sparse
                    if p.payload.get("analyzer") == embedder.analyzer_version
                    else embedder.embed_documents_sparse([p.payload["text"]])[0],
                )
                for h, p in reusable_points(stored.points, embedder.model_name).items()
            }
            reuses.append(reuse)
            for chunk in chunks:
                key = text_hash(chunk.text)
                if key not in reuse:
                    wanted.setdefault(key, chunk.text)
        fresh = self.batcher(embedder).embed(list(wanted.values())) if wanted else []
        embedded_by_hash = dict(zip(wanted, fresh, strict=True))
        out = []
        for (chunks, _), reuse in zip(work, reuses, strict=True):
            keys = [text_hash(c.text) for c in chunks]
            vectors = [reuse[k] if k in reuse else embedded_by_hash[k] for k in keys]
            out.append((vectors, sum(k not in reuse for k in keys)))
        return out

    # --- 6. write --------------------------------------------------------------------------

    def points(
        self,
        doc: SourceDocument,
        chunks: list[Chunk],
        vectors: list[Any],
        *,
        acl: set[str],
        paths: dict[str, str],
    ) -> list[PointRecord]:
        """Step 6's points: ``doc``'s new version, one point per chunk with its vectors, for
        the principals ``acl`` and the user → path map ``paths``. Their ids are new
        (:func:`~ncindex.documents.point_id` hashes the text), so the old version stays
        searchable until :meth:`clean_up`; :meth:`write_documents` upserts them (one write for
        every document of a run; ``StoreUnavailable`` when the store fails)."""
        now = int(time.time())
        embedder = self.services.embedder
        return [
            PointRecord(
                id=point_id(doc.ref, doc.content_hash, chunk.index),
                payload=build_payload(
                    doc,
                    chunk,
                    len(chunks),
                    acl=sorted(acl),
                    paths=paths,
                    indexed_at=now,
                    embedding_model=embedder.model_name,
                    analyzer=embedder.analyzer_version,
                ),
                dense=dense,
                sparse=sparse,
            )
            for chunk, (dense, sparse) in zip(chunks, vectors, strict=True)
        ]

    # --- 7. clean up -----------------------------------------------------------------------

    def clean_up(self, doc: SourceDocument, stored: Stored, written: set[str]) -> None:
        """Step 7: delete every stored point of ``doc`` but those just ``written`` (their ids,
        so points of the same text under the earlier id scheme go too). Nothing to do for a
        document that had no points (``stored`` was read under the document's lock: nobody
        wrote one since). Raises ``StoreUnavailable``."""
        if stored.payload is not None:
            self.services.store.delete_document(doc.ref.key, keep=written)

    # --- the steps composed ----------------------------------------------------------------

    def write_document(
        self, doc: SourceDocument, stored: Stored, acl: set[str] | None = None
    ) -> Outcome:
        """:meth:`write_documents` of one document."""
        return self.write_documents([(doc, stored, acl)])[0]

    def write_documents(
        self, items: Sequence[tuple[SourceDocument, Stored, set[str] | None]]
    ) -> list[Outcome]:
        """Bring the index in line with each ``(doc, stored, acl)`` of ``items`` as read for
        ``doc.user`` (``stored`` read under the document's lock); one :class:`Outcome` per item,
        in order. Metadata only when its text is unchanged (:meth:`update_metadata`), else
        steps 4–7 — chunk, embed, write, clean up — where the documents to embed share one
        embedding run (:meth:`embed`) and one upsert, and each old version is deleted only
        after it. A text with no chunks deletes the document (``ineligible``). No ``doc`` is
        modified. Raises ``StoreUnavailable`` (what was upserted before stays beside its old
        version until the document's next write: :func:`whole_version`).

        ``acl`` replaces the stored principals (Deck: the board's participants); ``None``
        keeps them; ``doc.user`` is always added. ``doc.path`` is ``None`` for types without
        paths."""
        outcomes: list[Outcome | None] = [None] * len(items)
        written = []
        for place, (doc, stored, acl) in enumerate(items):
            current = stored.payload
            if current and current.get("content_hash") == doc.content_hash:
                fields = {
                    "owner": doc.owner,
                    "title": doc.title,
                    "etag": doc.etag,
                    "modified_at": doc.modified_at,
                    "mime_type": doc.mime_type,
                    "size": doc.size,
                    "tags": doc.tags,
                    "category": doc.category,
                    "url": doc.url,
                    **doc.extra,
                }
                outcome = self.update_metadata(stored, doc.user, doc.path, fields, acl)
                outcomes[place] = replace(outcome, truncated=_truncated(doc))
                continue
            if acl is None:
                acl = set(current["acl"]) if current else set()
            acl = set(acl) | {principal(doc.user)}
            paths = dict(current["paths"]) if current else {}
            if doc.path is not None:
                paths[doc.user] = doc.path
            chunks = self.chunk(doc)
            if not chunks:
                self.services.store.delete_document(doc.ref.key)
                outcomes[place] = Outcome("ineligible", doc.ref.key, path=doc.path)
                continue
            written.append((place, doc, stored, chunks, acl, paths))
        if written:
            vectors = self.embed([(chunks, stored) for _, _, stored, chunks, _, _ in written])
            versions = [
                self.points(doc, chunks, vecs, acl=acl, paths=paths)
                for (_, doc, _, chunks, acl, paths), (vecs, _) in zip(written, vectors, strict=True)
            ]
            self.services.store.upsert([point for version in versions for point in version])
            for (place, doc, stored, chunks, _, _), (_, embedded), version in zip(
                written, vectors, versions, strict=True
            ):
                self.clean_up(doc, stored, {point.id for point in version})
                log.info("indexed", doc_key=doc.ref.key, chunks=len(chunks), embedded=embedded)
                if doc.truncated:
                    log.warning(
                        "document_truncated",
                        doc_key=doc.ref.key,
                        user=doc.user,
                        path=doc.path,
                        chars=len(doc.text),
                    )
                outcomes[place] = Outcome(
                    "indexed", doc.ref.key, embedded, truncated=_truncated(doc)
                )
        return [outcome for outcome in outcomes if outcome is not None]

    def update_metadata(
        self,
        stored: Stored,
        user: str,
        path: str | None,
        fields: dict[str, Any],
        acl: set[str] | None = None,
    ) -> Outcome:
        """Merge ``fields``, ``user``'s access and ``path`` (in ``user``'s view) into the
        stored payload of ``stored.ref`` (no embedding); ``acl`` replaces the principals when
        given. A document whose source names it after its path (a file) takes the path's base
        name as title when ``user`` owns it. ``unchanged`` when nothing differs or nothing is
        stored."""
        current, ref = stored.payload, stored.ref
        if current is None:
            return Outcome("unchanged", ref.key)
        acl = (set(current["acl"]) if acl is None else set(acl)) | {principal(user)}
        paths = dict(current["paths"])
        if path is not None:
            paths[user] = path
        update = dict(fields) | {"acl": sorted(acl)} | path_fields(paths)
        owned = current.get("owner") in (user, None)
        if SOURCES[ref.doc_type].title_from_path and path is not None and owned:
            update.setdefault("title", posixpath.basename(path))
        if all(current.get(k) == v for k, v in update.items()):
            return Outcome("unchanged", ref.key)
        self.services.store.set_payload(ref.key, update)
        return Outcome("updated", ref.key)


def _truncated(doc: SourceDocument) -> str | None:
    """:attr:`Outcome.truncated` of ``doc``: its path (its doc_key without one) when a bound
    cut its text, else ``None``."""
    return (doc.path or doc.ref.key) if doc.truncated else None
