"""Index, evict and re-path notes, files, Deck cards and News items: the worker side of
DESIGN §4–§6.

Every operation re-reads Nextcloud (the source of truth, never the webhook body), so order,
duplicates and late deliveries do not matter. A document's new version is written beside the
old one and the old one is deleted afterwards, so a search never sees half a document; vectors
of chunks whose text did not change are reused instead of embedded again, and concurrent tasks
share embedding calls (:mod:`ncindex.embedding.batching`). A document counts as unchanged only when
the store holds it as one whole version: one left with two versions (the old one's delete failed or
its worker died) or with part of one (an upsert failed between batches) is rewritten by the
next task that reads it, whatever its etag.

What a document is in Nextcloud — how it is read, its etag, which files are indexed and as
what — is its source's (:mod:`ncindex.sources`, looked up by doc type in
:data:`ncindex.sources.registry.SOURCES`; :func:`ncindex.sources.eligibility.classify`): this
module re-reads, writes, evicts and re-paths, whatever the type.

A file whose bytes cannot become text (corrupt, over ``max_download_bytes`` — judged from its
WebDAV size before any download) is parked in the dead letter (:mod:`ncindex.index.deadletter`)
until its etag changes, and any older version of its text is removed from the index; so is
a file parked for killing its worker (:meth:`Indexer.park_node`).
"""

from __future__ import annotations

import posixpath
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis.exceptions
import structlog
from qdrant_client import models

from ncindex.documents import (
    Chunk,
    DocRef,
    DocType,
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
from ncindex.errors import (
    ExtractionError,
    FileGone,
    Forbidden,
    LockBusy,
    NextcloudAuthError,
    NotFound,
    TooLarge,
)
from ncindex.index.deadletter import DeadLetter, DeadLetters, node_subject
from ncindex.nextcloud.client import NextcloudClient
from ncindex.nextcloud.webdav import DavEntry
from ncindex.runtime import Services
from ncindex.sources import news_item
from ncindex.sources.eligibility import UNREADABLE, Eligibility, classify
from ncindex.sources.registry import NODE_TYPES, SOURCES
from ncindex.store.port import PointRecord
from ncindex.store.queries import acl_condition, doc_type_condition
from ncindex.text.chunking import Chunker

log = structlog.get_logger(__name__)

GONE = "gone"
"""How a user lost access (:meth:`Indexer.remove_access`): Nextcloud no longer shows the
document to them (deleted, moved out of view, unshared) — or, :data:`UNREADABLE`, it is shown
without read permission (an access rule)."""


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
    below it is for the caller to walk: :mod:`ncindex.sync.subtree`)."""

    action: str
    doc_key: str | None = None
    embedded: int = 0
    reason: str | None = None
    path: str | None = None


class Indexer:
    """The indexing operations on one process's :class:`Services`."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.settings = services.settings
        self._chunker: Chunker | None = None
        # concurrent tasks of this worker share model calls (threads pool); one batcher per
        # model, so tasks pinned to different models (during a switch) never share a call
        self._batchers: weakref.WeakKeyDictionary[Embedder, EmbedBatcher[Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._batchers_lock = threading.Lock()

    def batcher(self, embedder: Embedder) -> EmbedBatcher[Any]:
        """The shared-call batcher of ``embedder`` (its :meth:`Embedder.embed_documents`)."""
        with self._batchers_lock:
            batcher = self._batchers.get(embedder)
            if batcher is None:
                batcher = self._batchers[embedder] = EmbedBatcher(
                    embedder.embed_documents,
                    max_texts=self.settings.embed_batch_size * 4,
                    max_calls=embedder.concurrent_calls,
                )
            return batcher

    @contextmanager
    def document_lock(self, ref: DocRef, wait: float = 5.0) -> Iterator[None]:
        """The lock the indexing operations hold for ``ref``: notes and files lock their file
        id, Deck cards and News items their ``doc_key``. Raises :class:`LockBusy`."""
        with self.lock(ref.doc_id if ref.doc_type in NODE_TYPES else ref.key, wait):
            yield

    @property
    def eligibility(self) -> Eligibility:
        """The indexing policy of the current settings (``index_*``; built per call, cheap)."""
        return Eligibility.from_settings(self.settings)

    @property
    def deadletters(self) -> DeadLetters:
        """The dead letter in this process's Redis."""
        return DeadLetters(self.services.redis, self.settings.names)

    @property
    def chunker(self) -> Chunker:
        """Token-sized chunker on the dense model's tokenizer (built on first use)."""
        if self._chunker is None:
            self._chunker = Chunker.from_settings(self.settings)
        return self._chunker

    # --- locking -------------------------------------------------------------------------

    @contextmanager
    def lock(self, file_id: int | str, wait: float = 5.0) -> Iterator[None]:
        """Per-document Redis lock (expiry ``lock_ttl`` seconds, above the task hard limit);
        raises :class:`LockBusy` when not acquired within ``wait`` seconds. While it is held,
        this thread keeps the model view read when it was taken
        (:meth:`~ncindex.embedding.live_models.LiveModels.pinned`): a document is embedded and
        written for one model, and ``ncindex reindex``, copying under the same lock, sees it whole.

        A lock lost meanwhile (expired, or Redis flushed or restarted) is logged on release,
        not raised: the block's own exception, or its finished work, is what the task reports.
        """
        name = self.settings.names.lock("node", file_id)
        lock = self.services.redis.lock(name, timeout=self.settings.lock_ttl, blocking_timeout=wait)
        if not lock.acquire():
            raise LockBusy(f"node {file_id} is locked")
        try:
            with self.services.models.pinned():
                yield
        finally:
            try:
                lock.release()
            except redis.exceptions.LockError as exc:
                log.warning("lock_lost", lock=name, error=str(exc))

    # --- index ---------------------------------------------------------------------------

    def index_node(
        self,
        user: str,
        file_id: int,
        *,
        recheck: bool = True,
        on_version: Callable[[str], None] | None = None,
    ) -> Outcome:
        """Re-read file ``file_id`` as ``user`` and bring the index in line with it: index
        a new or changed document, update metadata only when the text is unchanged, remove
        the user's access when the file is gone, no longer eligible, or not readable (listed
        without ``G`` in ``oc:permissions``, or its download answered 404 while it is listed
        unreadable — Sabre's ``File::get`` — or 403: an
        access-control rule blocks it; once it is readable again, reconcile's next full walk
        finds it).

        Raises :class:`StaleEntry` (retryable) when the download does not match the entry
        looked up just before: a body of another length, or a 404 for a file that has moved
        (a folder renamed in between); a 404 for a file that is gone evicts it.

        With ``recheck``, a version just written is looked up by id once more: a folder
        renamed or deleted while it was embedded fires one event, for the folder, whose task
        found nothing of this file indexed yet. Moved ⇒ its paths are brought up to date (one
        more pass, no embedding); gone ⇒ evicted.

        ``on_version(etag)`` is called with the version about to be read, before anything is
        downloaded (the task notes it: see :func:`workers.tasks.guarded`)."""
        client = self.services.account(user)
        try:
            entry = client.find_by_id(file_id)
        except NotFound:
            self.remove_node_access(user, file_id, lost=GONE)
            return Outcome("evicted")
        if entry.is_folder:
            return Outcome("folder", path=entry.path)
        subject = node_subject(file_id)
        parked = self.deadletters.blocked(subject, entry.etag)
        if parked is not None:
            return Outcome("dead_letter", reason=parked.reason)
        if on_version is not None:
            on_version(entry.etag)
        ref, reason = classify(self.services, client, entry)
        for doc_type in NODE_TYPES:
            if ref is None or doc_type != ref.doc_type:
                lost = UNREADABLE if reason == UNREADABLE else None  # else: an index rule
                self.remove_access(user, DocRef(doc_type, str(file_id)), lost=lost)
        if ref is None:
            return Outcome("ineligible", reason=reason)
        current = self._current(ref)
        try:
            doc = SOURCES[ref.doc_type].fetch(self.services, client, ref, current, entry).doc
        except (ExtractionError, TooLarge) as exc:
            # the bytes cannot become text: park until the file changes; a stale version
            # of the text must not stay searchable
            self.services.store.delete_document(ref.key)
            reason = f"{type(exc).__name__}: {exc}"
            self.park(
                subject,
                user,
                entry.etag,
                reason,
                "ncindex.index_node",
                path=entry.path,
                mime_type=entry.content_type or "",
                file_id=file_id,
            )
            return Outcome("dead_letter", ref.key, reason=reason)
        except FileGone:
            self.remove_node_access(user, file_id, lost=GONE)
            return Outcome("evicted")
        except Forbidden:  # blocked since it was listed: as for a file listed unreadable
            self.remove_node_access(user, file_id, lost=UNREADABLE)
            return Outcome("ineligible", ref.key, reason="download refused")
        if doc is None:  # unchanged content (conditional GET answered 304 / same etag)
            return self._update_metadata(ref, current, user, entry.path, {"tags": entry.tags})
        outcome = self.write_document(doc, current)
        if not recheck or outcome.action != "indexed":
            return outcome
        try:
            now = client.find_by_id(file_id)
        except NotFound:
            self.remove_node_access(user, file_id, lost=GONE)
            log.info("gone_while_indexed", doc_key=ref.key, user=user)
            return Outcome("evicted", ref.key, outcome.embedded)
        if now.path != entry.path:
            log.info("moved_while_indexed", doc_key=ref.key, path=now.path)
            self.index_node(user, file_id, recheck=False)
        return outcome

    def park(
        self,
        subject: str,
        user: str,
        etag: str,
        reason: str,
        task: str,
        *,
        path: str = "",
        mime_type: str = "",
        **kwargs: Any,
    ) -> DeadLetter:
        """Put ``subject`` in the dead letter with ``reason`` until its ``etag`` changes;
        ``kwargs`` are ``task``'s (besides ``user``), to send it again; a file's ``path`` and
        ``mime_type`` are kept for ``ncindex failures``."""
        entry = self.deadletters.park(
            DeadLetter(
                subject,
                user,
                reason,
                etag,
                task,
                {"user": user, **kwargs},
                path=path,
                mime_type=mime_type,
            )
        )
        log.warning("dead_letter", subject=subject, user=user, reason=reason)
        return entry

    def park_node(
        self,
        user: str,
        file_id: int,
        reason: str,
        deliveries: int = 0,
        etag: str | None = None,
    ) -> Outcome | None:
        """Park file ``file_id`` (its current etag read as ``user``) with ``reason`` and
        delete its points, as for a file whose bytes cannot become text: a version that was
        never indexed must not leave the one before it searchable. Evicts it instead when it
        is gone. With ``etag`` (the version that failed), nothing is parked and ``None`` is
        returned when the file is another version now: that one has not failed yet."""
        client = self.services.account(user)
        try:
            entry = client.find_by_id(file_id)
        except NotFound:
            self.remove_node_access(user, file_id)
            return Outcome("evicted")
        if etag is not None and entry.etag != etag:
            return None
        for doc_type in NODE_TYPES:
            self.services.store.delete_document(DocRef(doc_type, str(file_id)).key)
        self.deadletters.park(
            DeadLetter(
                node_subject(file_id),
                user,
                reason,
                entry.etag,
                "ncindex.index_node",
                {"user": user, "file_id": file_id},
                deliveries=deliveries,
                path=entry.path,
                mime_type=entry.content_type or "",
            )
        )
        log.warning("dead_letter", subject=node_subject(file_id), user=user, reason=reason)
        return Outcome("dead_letter", reason=reason)

    def classify(self, client: NextcloudClient, entry: DavEntry) -> DocRef | None:
        """What ``entry`` is indexed as (:func:`ncindex.sources.eligibility.classify`):
        ``note``, ``file``, or ``None`` for anything not indexed."""
        return classify(self.services, client, entry)[0]

    def _current(self, ref: DocRef) -> dict[str, Any] | None:
        """The stored payload of ``ref`` (its first chunk's), ``None`` when it has no points.

        When the points are not one whole version (:func:`whole_version`: an old version
        left beside the new one by a failed delete, or a version cut short by an upsert that
        failed part-way), the payload comes back without ``etag`` and ``content_hash``, so
        nothing compares as unchanged: the next write rewrites the document (reusing the
        vectors of unchanged texts) and deletes every other version. The check reads nothing
        more than the points this reads anyway."""
        points = self.services.store.document_points(ref.key)
        if not points:
            return None
        payload = points[0].payload
        if whole_version([p.payload for p in points]):
            return payload
        log.warning("inconsistent_document", doc_key=ref.key, points=len(points))
        return {k: v for k, v in payload.items() if k not in ("etag", "content_hash")}

    def write_document(
        self,
        doc: SourceDocument,
        current: dict[str, Any] | None,
        acl: set[str] | None = None,
    ) -> Outcome:
        """Write ``doc`` for ``doc.user``: metadata only if its text is unchanged, else a new
        version (chunks embedded unless an old chunk had the same text) then delete the old.

        ``acl`` replaces the stored principals (Deck: the board's participants); by default
        ``doc.user`` is added to them. ``doc.path`` is ``None`` for types without paths.
        """
        markdown = bool(doc.extra.pop("markdown", False))
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
            return self._update_metadata(doc.ref, current, doc.user, doc.path, fields, acl)
        if acl is None:
            acl = set(current["acl"]) if current else set()
        acl = set(acl) | {principal(doc.user)}
        paths = dict(current["paths"]) if current else {}
        if doc.path is not None:
            paths[doc.user] = doc.path
        chunks = self.chunker.chunk_text(doc.text, markdown=markdown)
        if not chunks:
            self.services.store.delete_document(doc.ref.key)
            return Outcome("ineligible", doc.ref.key)
        vectors, embedded = self._vectors(doc.ref, chunks, stored=current is not None)
        now = int(time.time())
        model = self.services.embedder.model_name
        points = [
            PointRecord(
                id=point_id(doc.ref, doc.content_hash, chunk.index),
                payload=build_payload(
                    doc,
                    chunk,
                    len(chunks),
                    acl=sorted(acl),
                    paths=paths,
                    indexed_at=now,
                    embedding_model=model,
                    analyzer=self.services.embedder.analyzer_version,
                ),
                dense=dense,
                sparse=sparse,
            )
            for chunk, (dense, sparse) in zip(chunks, vectors, strict=True)
        ]
        self.services.store.upsert(points)
        if current is not None:  # read under the document's lock: a new one has nothing old
            self.services.store.delete_document(doc.ref.key, keep_content_hash=doc.content_hash)
        log.info("indexed", doc_key=doc.ref.key, chunks=len(chunks), embedded=embedded)
        return Outcome("indexed", doc.ref.key, embedded)

    def _vectors(self, ref: DocRef, chunks: list[Chunk], *, stored: bool) -> tuple[list[Any], int]:
        """Vectors for ``chunks``: reused from the stored version where a chunk's text and the
        model are the same (its BM25 vector too if the same analyzer made it, else that one is
        computed again), embedded otherwise. ``stored`` says whether the document has points
        in the store (its current payload was found); without, the store is not read again.
        Returns the vectors and how many were embedded."""
        embedder = self.services.embedder
        model = embedder.model_name
        points = self.services.store.document_points(ref.key, with_vectors=True) if stored else []
        reuse = {
            h: (
                p.dense,
                p.sparse
                if p.payload.get("analyzer") == embedder.analyzer_version
                else embedder.embed_documents_sparse([p.payload["text"]])[0],
            )
            for h, p in reusable_points(points, model).items()
        }
        missing = [c for c in chunks if text_hash(c.text) not in reuse]
        if missing:
            fresh = self.batcher(embedder).embed([c.text for c in missing])
            reuse.update({text_hash(c.text): vec for c, vec in zip(missing, fresh, strict=True)})
        return [reuse[text_hash(c.text)] for c in chunks], len(missing)

    def _update_metadata(
        self,
        ref: DocRef,
        current: dict[str, Any] | None,
        user: str,
        path: str | None,
        fields: dict[str, Any],
        acl: set[str] | None = None,
    ) -> Outcome:
        """Merge ``fields``, ``user``'s access and path into the stored payload (no
        embedding); ``acl`` replaces the principals when given."""
        if current is None:
            return Outcome("unchanged", ref.key)
        acl = (set(current["acl"]) if acl is None else set(acl)) | {principal(user)}
        paths = dict(current["paths"])
        if path is not None:
            paths[user] = path
        update = dict(fields) | {"acl": sorted(acl)} | path_fields(paths)
        if (
            SOURCES[ref.doc_type].title_from_path
            and path is not None
            and current.get("owner")
            in (
                user,
                None,
            )
        ):
            update.setdefault("title", posixpath.basename(path))
        if all(current.get(k) == v for k, v in update.items()):
            return Outcome("unchanged", ref.key)
        self.services.store.set_payload(ref.key, update)
        return Outcome("updated", ref.key)

    # --- documents that are not files: Deck cards, News items ----------------------------

    def index_document(self, user: str, doc_type: str, doc_id: str | int) -> Outcome:
        """Re-read document ``doc_type``/``doc_id`` as ``user`` and bring the index in line,
        through its source's :meth:`~ncindex.sources.base.Source.fetch` (a Deck card, a News
        item); files and notes go to :meth:`index_node`. A document that is gone for ``user``
        (Deck 403, News absent) loses ``user``'s access; one the source finds ineligible (an
        archived card) is deleted. Raises ``ValueError`` for an unknown ``doc_type``."""
        kind = DocType(doc_type)
        source = SOURCES[kind]
        if source.node:
            return self.index_node(user, int(doc_id))
        ref = DocRef(kind, str(int(doc_id)))
        client = self.services.account(user)
        current = self._current(ref)
        try:
            fetched = source.fetch(self.services, client, ref, current)
        except NotFound:
            self.remove_access(user, ref)
            return Outcome("evicted", ref.key)
        if fetched.ineligible is not None:
            self.services.store.delete_document(ref.key)
            return Outcome("ineligible", ref.key, reason=fetched.ineligible)
        if fetched.doc is None:  # unchanged (a conditional read)
            return Outcome("unchanged", ref.key)
        parked = self.deadletters.blocked(ref.key, fetched.doc.etag)
        if parked is not None:
            return Outcome("dead_letter", ref.key, reason=parked.reason)
        return self.write_document(fetched.doc, current, fetched.acl)

    def evict_document(self, user: str, doc_type: str, doc_id: str | int) -> Outcome:
        """``user`` reported document ``doc_type``/``doc_id`` deleted (Deck's
        CardDeletedEvent): when ``user`` can no longer read it (or its source finds it
        ineligible: an archived card), it is deleted for everyone (a deleted card is gone for
        every board member); when it is readable, re-index.
        Files and notes are re-read by id (:meth:`index_node`), which evicts what is gone."""
        kind = DocType(doc_type)
        source = SOURCES[kind]
        if source.node:
            return self.index_node(user, int(doc_id))
        ref = DocRef(kind, str(int(doc_id)))
        client = self.services.account(user)
        try:
            gone = source.fetch(self.services, client, ref, self._current(ref)).ineligible
        except NotFound as exc:
            gone = str(exc)
        if gone is not None:
            self.services.store.delete_document(ref.key)
            log.info("evicted", doc_key=ref.key, user=user)
            return Outcome("evicted", ref.key)
        return self.index_document(user, doc_type, doc_id)

    def index_news(self, user: str, feed_id: int | None = None) -> dict[str, int]:
        """Index every News item of ``user`` (of feed ``feed_id`` only, when given) and take
        ``user``'s access from indexed items no longer listed. Returns counts per outcome
        action. News has no webhooks: a scan (reconcile) or a test calls this."""
        client = self.services.account(user)
        counts: dict[str, int] = {}
        listed: set[str] = set()
        for item in news_item.list_items(client, feed_id):
            doc = news_item.item_document(user, item, self.settings.max_document_chars)
            listed.add(doc.ref.key)
            with self.lock(doc.ref.key):
                if self.deadletters.blocked(doc.ref.key, doc.etag) is not None:
                    outcome = Outcome("dead_letter", doc.ref.key)
                else:
                    outcome = self.write_document(doc, self._current(doc.ref))
            counts[outcome.action] = counts.get(outcome.action, 0) + 1
        must: list[models.Condition] = [
            doc_type_condition(DocType.NEWS_ITEM),
            acl_condition(user),
        ]
        if feed_id is not None:
            feed = models.MatchValue(value=str(int(feed_id)))
            must.append(models.FieldCondition(key="feed_id", match=feed))
        stale = {
            p["doc_key"]
            for p in self.services.store.scroll(models.Filter(must=must), ["doc_key"])
            if p["doc_key"] not in listed
        }
        for key in sorted(stale):
            self.remove_access(user, DocRef.parse(key))
            counts["evicted"] = counts.get("evicted", 0) + 1
        return counts

    # --- evict ---------------------------------------------------------------------------

    def remove_node_access(self, user: str, file_id: int, *, lost: str | None = GONE) -> None:
        """:meth:`remove_access` for file ``file_id`` under each doc type a file can be
        (a file, or a note when it is a Markdown file in the notes folder)."""
        for doc_type in NODE_TYPES:
            self.remove_access(user, DocRef(doc_type, str(file_id)), lost=lost)

    def remove_access(self, user: str, ref: DocRef, *, lost: str | None = GONE) -> bool:
        """Take ``user`` out of ``ref``'s ``acl`` and paths; delete the document when no
        principal is left or when ``user`` owns it (the owner's deletion ends every share).
        Returns whether anything changed.

        ``lost`` says why: :data:`GONE` or :data:`UNREADABLE` (Nextcloud's answer; the loss is
        marked for the scans, :meth:`mark_lost`, even when the index held nothing of it for
        ``user``: a share given back or an access rule lifted may change no folder etag of
        ``user``'s), ``None`` for an index rule (globs, MIME types, tags: nothing marked)."""
        current = self._current(ref)
        if lost is not None:
            path = (current or {}).get("paths", {}).get(user)
            owner = current is not None and current.get("owner") == user
            # an owner's file gone is deleted or moved (new etags up its folders): no walk
            self.mark_lost(user, ref, None if owner and lost == GONE else path)
        if current is None or principal(user) not in current["acl"]:
            return False
        acl = set(current["acl"]) - {principal(user)}
        if not acl or current.get("owner") == user:
            self.services.store.delete_document(ref.key)
            log.info("evicted", doc_key=ref.key, user=user)
            return True
        paths = {u: p for u, p in current["paths"].items() if u != user}
        self.services.store.set_payload(ref.key, {"acl": sorted(acl)} | path_fields(paths))
        log.info("access_removed", doc_key=ref.key, user=user)
        return True

    def mark_lost(self, user: str, ref: DocRef, path: str | None) -> None:
        """Note in Redis (:meth:`ncindex.names.Names.lost_access`, kept
        ``reconcile_full_walk_seconds``, after which the full walk finds everything) that
        ``user`` lost access to ``ref``, last at ``path`` in ``user``'s view (``None``: not
        known). Until the document is back in ``user``'s index, each scan walks the folders
        above ``path`` whatever their etags say, and never holds it back as unindexable
        (:mod:`ncindex.sync.reconcile`)."""
        key = self.settings.names.lost_access(ref.doc_type.value, user)
        pipe = self.services.redis.pipeline()
        pipe.hset(key, ref.doc_id, path or "")
        pipe.expire(key, self.settings.reconcile_full_walk_seconds)
        pipe.execute()

    def evict_node(self, user: str, path: str, file_id: int | None) -> Outcome:
        """Something at ``path`` was deleted in ``user``'s view: re-check the node by id
        (re-index if it is in fact still there) and evict everything indexed under ``path``
        for this user once Nextcloud confirms the path is gone.

        Every other configured account that holds what was removed (its owner, other
        sharees) is re-checked by id at once (:meth:`_recheck_holders`): a sharee's delete
        in a shared folder moves the file to the owner's trash (Nextcloud's
        ``apps/files_trashbin/lib/Trashbin.php``, ``Trashbin::move2trash`` keeps it for the
        owner), so it is gone for them too although their webhook may never come."""
        client = self.services.account(user)
        if file_id is not None:
            try:
                client.find_by_id(file_id)
            except NotFound:
                holders = self._holders(file_id, besides=user)
                self.remove_node_access(user, file_id)
                self._recheck_holders(holders)
            else:
                return self.index_node(user, file_id)
        try:
            client.propfind(path, depth=0)
        except NotFound:
            pass
        else:
            return Outcome("unchanged")  # something exists at the path again: its events follow
        removed = 0
        for payload in self._under(user, path):
            ref = DocRef.parse(payload["doc_key"])
            holders = self._holders(int(ref.doc_id), besides=user)
            removed += self.remove_access(user, ref)
            self._recheck_holders(holders)
        return Outcome("evicted", embedded=0) if removed or file_id else Outcome("unchanged")

    def _holders(self, file_id: int, *, besides: str) -> list[tuple[str, int]]:
        """``(account, file id)`` for every configured account but ``besides`` that file
        ``file_id`` is indexed for (its ``acl``, under either node doc type)."""
        out: set[tuple[str, int]] = set()
        for doc_type in NODE_TYPES:
            current = self._current(DocRef(doc_type, str(file_id)))
            for entry in (current or {}).get("acl", []):
                uid = entry.removeprefix("user:")
                if entry.startswith("user:") and uid != besides and uid in self.settings.accounts:
                    out.add((uid, file_id))
        return sorted(out)

    def _recheck_holders(self, holders: list[tuple[str, int]]) -> None:
        """Re-read each ``(account, file id)`` by id as that account (:meth:`index_node`),
        which removes what it can no longer see. An account Nextcloud refuses is logged and
        skipped: the task is about another user's delete; that account's own scan records the
        refusal."""
        for holder, file_id in holders:
            try:
                outcome = self.index_node(holder, file_id, recheck=False)
            except NextcloudAuthError as exc:
                log.warning("holder_recheck_refused", user=holder, file_id=file_id, error=str(exc))
                continue
            log.info("holder_rechecked", user=holder, file_id=file_id, action=outcome.action)

    # --- move ----------------------------------------------------------------------------

    def move_path(self, user: str, source: str, target: str, file_id: int | None) -> Outcome:
        """A file or folder moved from ``source`` to ``target`` in ``user``'s view: re-path
        every document under it without re-embedding (each is re-read by id, so its new path
        comes from Nextcloud); documents whose type changes (moved into or out of the notes
        folder) and a file not yet indexed are indexed afresh. A folder comes back as
        ``folder`` (with its new path): what was not indexed below it (moved in from an
        excluded path, say) is for the caller to walk."""
        client = self.services.account(user)
        moved_self = False
        for payload in self._under(user, source):
            ref = DocRef.parse(payload["doc_key"])
            moved_self |= payload["paths"][user] == source
            with self.lock(ref.doc_id):
                try:
                    entry = client.find_by_id(int(ref.doc_id))
                except NotFound:
                    self.remove_access(user, ref)
                    continue
                if not SOURCES[ref.doc_type].title_from_path or self.classify(client, entry) != ref:
                    # a note's title and category come from the Notes API (one conditional
                    # GET, no embedding when the text is unchanged)
                    self.index_node(user, int(ref.doc_id))
                    continue
                fields = {"title": posixpath.basename(entry.path)}
                self._update_metadata(ref, self._current(ref), user, entry.path, fields)
        if not moved_self and file_id is not None:
            with self.lock(file_id):
                outcome = self.index_node(user, file_id)
            if outcome.action == "folder":  # what was not indexed below it may be now
                return Outcome("folder", path=outcome.path)
        return Outcome("moved")

    def _under(self, user: str, path: str) -> list[dict[str, Any]]:
        """Payloads (one per document) of what ``user`` has at ``path`` or below it."""
        key = f"{user}:{path}"
        flt = models.Filter(
            should=[
                models.FieldCondition(key="file_path", match=models.MatchValue(value=key)),
                models.FieldCondition(key="folder_ancestors", match=models.MatchValue(value=key)),
            ]
        )
        seen: dict[str, dict[str, Any]] = {}
        for payload in self.services.store.scroll(flt, ["doc_key", "paths", "chunk_index"]):
            if payload.get("chunk_index") == 0:
                seen.setdefault(payload["doc_key"], payload)
        return list(seen.values())
