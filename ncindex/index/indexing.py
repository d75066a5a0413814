"""Index, evict and re-path notes, files, Deck cards and News items: the worker side of
DESIGN §4–§6, composed of the indexing steps (:mod:`ncindex.index.steps`: read the stored
version, classify, fetch and extract, chunk, embed, write, clean up) and the access changes
(:mod:`ncindex.index.access`).

Every operation re-reads Nextcloud (the source of truth, never the webhook body), so order,
duplicates and late deliveries do not matter; the caller holds the document's lock
(:func:`ncindex.index.locks.document_lock`, :meth:`Indexer.lock`).

What a document is in Nextcloud — how it is read, its etag, which files are indexed and as
what — is its source's (:mod:`ncindex.sources`, looked up by doc type in
:data:`ncindex.sources.registry.SOURCES`; :func:`ncindex.sources.eligibility.classify`): this
module re-reads, writes, evicts and re-paths, whatever the type.

A file whose bytes cannot become text (corrupt, over ``max_download_bytes`` — judged from its
WebDAV size before any download) is parked in the dead letter (:mod:`ncindex.index.deadletter`)
until its etag changes, and any older version of its text is removed from the index; so is
a file parked for killing its worker (:meth:`Indexer.park_node`). A file read again only
because an older extraction read its unchanged bytes keeps its text instead
(:func:`_kept_on_reread`), unparked — or parked, when the re-read killed its worker: an
upgrade never takes away what was searchable.
"""

from __future__ import annotations

import math
import posixpath
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial

import structlog
from celery.exceptions import SoftTimeLimitExceeded
from qdrant_client import models

from ncindex.documents import DocRef, DocType, SourceDocument, path_fields, principal
from ncindex.errors import (
    ExtractionError,
    FileGone,
    Forbidden,
    NcindexError,
    NextcloudAuthError,
    NotFound,
    StoreUnavailable,
    TooLarge,
)
from ncindex.index.access import GONE, Access
from ncindex.index.deadletter import DeadLetters, node_subject
from ncindex.index.grants import Unconfirmed, UnconfirmedGrants
from ncindex.index.locks import document_lock
from ncindex.index.steps import Outcome, Steps, Stored
from ncindex.nextcloud.client import NextcloudClient
from ncindex.nextcloud.webdav import DavEntry
from ncindex.runtime import Services
from ncindex.sources import deck_card
from ncindex.sources.eligibility import UNREADABLE, Eligibility
from ncindex.sources.registry import NODE_TYPES, SOURCES
from ncindex.store.queries import acl_condition, doc_type_condition, first_chunks

log = structlog.get_logger(__name__)


BATCH_MAX_BYTES = 1 << 20
"""The most bytes (the files' WebDAV sizes, added up) :meth:`Indexer.index_nodes` reads in one
batch; the files past it are left to a task of their own. A batch saves each file ~12 ms of
a task's own costs (requests, Redis, Celery; benchmarks/indexing_reading.md), nothing beside
the seconds large files take to extract and embed — and a batch of them could pass the task's
soft time limit, which sends every file of it to a task of its own to be read again."""


@dataclass(frozen=True, slots=True)
class BatchResult:
    """What :meth:`Indexer.index_nodes` did with its files (ids): the ``outcomes`` of those it
    finished, those it leaves ``alone`` to a task of their own, and those it did not start
    (``later``: their time was up) for another batch."""

    outcomes: dict[int, Outcome]
    alone: list[int]
    later: list[int]


@dataclass(frozen=True, slots=True)
class _Read:
    """A file read and extracted for indexing, its new text not yet written: its id, the
    entry it was looked up as, the document, its stored version (read under its lock), and
    the grant its write gives ``user`` (marked unconfirmed, :mod:`ncindex.index.grants`;
    ``None``: none), for which it is looked up by id after the write even when its text
    turns out unchanged (:meth:`Indexer._looks_again`)."""

    file_id: int
    entry: DavEntry
    doc: SourceDocument
    stored: Stored
    grant: Unconfirmed | None = None


@dataclass(frozen=True, slots=True)
class _Granted:
    """A metadata-only update (the text unchanged) that gave ``user`` access to file
    ``file_id``, which the stored version did not grant them: written from what was read
    before the write, so it is looked up by id once more afterwards (:meth:`Indexer._regranted`):
    a share revoked in between fires no event. Also a grant written before whose look-up or
    roll-back did not finish (:mod:`ncindex.index.grants`), whatever this update wrote."""

    file_id: int
    entry: DavEntry
    outcome: Outcome
    ref: DocRef
    path_before: str | None
    """``user``'s path in the stored version of ``ref`` (``None``: none): what
    :meth:`Indexer._ungranted` puts back when the look-up fails."""


def _roll_back(error: BaseException, undo: Callable[[], object], doc_key: str) -> None:
    """Call ``undo``, which takes back what a write to ``doc_key`` granted, because ``error``
    (being handled: the caller raises or hands it on next) stopped the look-up after that
    write. A failure of ``undo`` (``StoreUnavailable``, the soft time limit) is logged and
    attached to ``error`` as a note instead of replacing it, so the task's retry or refusal
    record follows the cause (a refused account stays a refusal, not a store outage).
    Raises only ``BaseException``s that are not ``Exception``s (``KeyboardInterrupt``)."""
    try:
        undo()
    except Exception as failure:
        why = f"{type(failure).__name__}: {failure}"
        log.warning("grant_not_taken_back", doc_key=doc_key, error=why, after=repr(error))
        error.add_note(f"taking back the grant of {doc_key} failed too: {why}")


def _kept_on_reread(stored: Stored, entry: DavEntry, reason: str) -> bool:
    """Whether the file looked up as ``entry``, whose download or extraction just failed
    with ``reason`` (an ``ExtractionError`` or ``TooLarge``), keeps its ``stored`` points: its
    stored etag is ``entry``'s, so it was read again only because an older extraction read
    these bytes (:func:`ncindex.sources.file.stored_outdated`) — an upgrade must not take away
    the text they were searchable by. Logged (``reread_failed_kept``); the stored version
    stays older, so the scans send it again after their hold, after the documents never sent
    (:meth:`ncindex.sync.reconcile.Reconciler._outdated`). A new etag (or points that are not
    one whole version: no stored etag) is ``False``: the bytes read are new."""
    current = stored.payload
    if current is None or current.get("etag") != entry.etag:
        return False
    log.warning(
        "reread_failed_kept",
        doc_key=stored.ref.key,
        etag=entry.etag,
        extractor=current.get("extractor"),
        extractor_version=current.get("extractor_version"),
        reason=reason,
    )
    return True


class Indexer:
    """The indexing operations on one process's :class:`Services`: each one Celery task's
    work (:mod:`workers.tasks`), composed of :attr:`steps` and :attr:`access`."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.settings = services.settings
        self.steps = Steps(services)
        self.access = Access(services, self.steps)

    @property
    def eligibility(self) -> Eligibility:
        """The indexing policy of the current settings (``index_*``; built per call, cheap)."""
        return Eligibility.from_settings(self.settings)

    @property
    def deadletters(self) -> DeadLetters:
        """The dead letter in this process's Redis."""
        return DeadLetters(self.services.redis, self.settings.names)

    @contextmanager
    def lock(self, subject: DocRef | int | str, wait: float = 5.0) -> Iterator[None]:
        """The document lock of ``subject`` (:func:`ncindex.index.locks.document_lock`: a
        :class:`DocRef`, a file id, or a ``doc_key``), with the model view pinned while it is
        held. Raises :class:`~ncindex.errors.LockBusy` when not taken within ``wait`` seconds."""
        with document_lock(self.services, subject, wait=wait):
            yield

    def classify(self, client: NextcloudClient, entry: DavEntry) -> DocRef | None:
        """What ``entry`` is indexed as (:meth:`Steps.classify`): ``note``, ``file``, or
        ``None`` for anything not indexed."""
        return self.steps.classify(client, entry)[0]

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

        The steps: look the node up by id, skip it while parked at this etag, classify,
        read the stored version (once), fetch and extract, then write
        (:meth:`Steps.write_document`: chunk, embed, write, clean up).

        Raises :class:`StaleEntry` (retryable) when the download does not match the entry
        looked up just before: a body of another length, or a 404 for a file that has moved
        (a folder renamed in between); a 404 for a file that is gone evicts it.

        With ``recheck``, a version just written is looked up by id once more: a folder
        renamed or deleted while it was embedded fires one event, for the folder, whose task
        found nothing of this file indexed yet. Moved ⇒ its paths are brought up to date (one
        more pass, no embedding); gone ⇒ evicted. So is a metadata-only update that gave
        ``user`` access the stored version did not (a file newly shared with them): a share
        revoked between the look-up and the write fires no event (:meth:`_regranted`). When
        that look-up fails (a transient error, a refusal), the grant is taken back before the
        error is raised (:meth:`_ungranted`): the retry grants and looks again. A roll-back
        that fails is logged and noted on that error, which is still the one raised
        (:func:`_roll_back`); the grant stays marked unconfirmed (as it does when the worker
        dies before the look-up), and the next run for ``user`` looks up after its write as
        if it granted anew (:meth:`_unconfirmed`, :mod:`ncindex.index.grants`).

        ``on_version(etag)`` is called with the version about to be read, before anything is
        downloaded (the task notes it: see :func:`workers.tasks.guarded`)."""
        client = self.services.account(user)
        try:
            entry = client.find_by_id(file_id)
        except NotFound:
            self.access.remove_node(user, file_id, lost=GONE)
            return Outcome("evicted")
        read = self._read_node(client, user, file_id, entry, on_version)
        if isinstance(read, _Granted):
            if not recheck:
                return read.outcome
            try:
                now = self._alone(client, file_id)
            except Exception as exc:  # a transient error too: the retry must grant and look again
                _roll_back(exc, lambda: self._ungranted(user, read), read.ref.key)
                raise
            return self._regranted(user, read, now)
        if isinstance(read, Outcome):
            return read
        outcome = self.steps.write_document(read.doc, read.stored)
        if not self._looks_again(read, outcome):
            return outcome
        if recheck:
            outcome = self._rechecked(user, read, outcome, self._alone(client, file_id))
        outcomes = {file_id: outcome}
        self._add_viewers(user, [read], outcomes)
        return outcomes[file_id]

    def index_nodes(
        self, user: str, file_ids: Sequence[int], *, start_by: float = math.inf
    ) -> BatchResult:
        """:meth:`index_node` for many files of ``user`` at once: each looked up by id, read and
        extracted, then the new texts embedded in one run and upserted in one write
        (:meth:`Steps.write_documents`), and one SEARCH to recheck what was written. The
        caller holds each file's lock.

        ``start_by`` is the ``time.monotonic()`` instant after which no file but the first is
        started: those left go to :attr:`BatchResult.later`, untouched (not looked up), for
        the caller to send on in another batch. Besides the outcome of each file it finished,
        the result names the ids it leaves to a task of their own (:meth:`index_node`, with
        its retries and failure records, :attr:`BatchResult.alone`): the files past
        :data:`BATCH_MAX_BYTES`, a file whose look-up, read or extraction raised anything but
        :class:`NextcloudAuthError` (raised: the account is refused) or the soft time limit
        (raised), every file still unwritten when the write failed, and every written one when
        its recheck failed (that run finds its text unchanged; a refusal there is handed on
        too). The soft time limit reached in the write or the recheck is such a failure: the
        files finished before it keep their outcome, and only the others are read again. A
        metadata-only update that granted ``user`` access (:meth:`index_node`) whose look-up
        afterwards fails has its grant taken back (:meth:`_ungranted`) before it is left to its
        own task (or the refusal raised), which grants and looks again — or, when the grant
        could not be taken back, looks again for its unconfirmed mark (:meth:`_unconfirmed`).

        Each file is looked up in a SEARCH of its own, as :meth:`index_node` does, because
        its tags are read from the answer: in an answer of several files nextcloud/server
        ``apps/dav/lib/SystemTag/SystemTagPlugin.php`` ``getTagsForFile`` merges the tags it
        cached from earlier files (keyed by their place in the file's tag list) with those it
        fetches (keyed by their id) by ``+=``, which drops a fetched tag whose id equals a
        cached one's place — and a tag the user cannot see, cached and then filtered out, can
        take a visible tag's place, so even a file listed without tags may carry one. The
        recheck reads paths only, so it asks for all files at once."""
        client = self.services.account(user)
        outcomes: dict[int, Outcome] = {}
        alone: list[int] = []
        later: list[int] = []
        ready: list[_Read] = []
        granted: list[_Granted] = []
        taken = 0  # bytes
        for place, file_id in enumerate(dict.fromkeys(file_ids)):
            if place and time.monotonic() > start_by:
                later.append(file_id)
                continue
            try:
                entry = self._alone(client, file_id)
                if entry is None:
                    self.access.remove_node(user, file_id, lost=GONE)
                    outcomes[file_id] = Outcome("evicted")
                    continue
                size = 0 if entry.is_folder else (entry.size or 0)
                if taken and taken + size > BATCH_MAX_BYTES:
                    alone.append(file_id)
                    continue
                taken += size
                read = self._read_node(client, user, file_id, entry, None)
            except (NextcloudAuthError, SoftTimeLimitExceeded):
                raise
            except Exception as exc:  # left to its own task, which records or retries it
                log.info("left_to_own_task", file_id=file_id, error=f"{type(exc).__name__}: {exc}")
                alone.append(file_id)
                continue
            if isinstance(read, _Granted):
                granted.append(read)
            elif isinstance(read, Outcome):
                outcomes[file_id] = read
            else:
                ready.append(read)
        if granted:  # looked up again now: their write is done
            try:
                now = client.find_by_ids([g.file_id for g in granted])
            except Exception as exc:  # their own tasks grant and look them up again
                for g in granted:
                    _roll_back(exc, partial(self._ungranted, user, g), g.ref.key)
                if isinstance(exc, (NextcloudAuthError, SoftTimeLimitExceeded)):
                    raise
                error = f"{type(exc).__name__}: {exc}"
                log.info("left_to_own_task", files=len(granted), error=error)
                alone += [g.file_id for g in granted]
            else:
                for g in granted:
                    outcomes[g.file_id] = self._regranted(user, g, now.get(g.file_id))
        if not ready:
            return BatchResult(outcomes, alone, later)
        try:
            written = self.steps.write_documents([(r.doc, r.stored, None) for r in ready])
        except Exception as exc:  # the soft time limit too: the files done keep their outcome
            log.info("left_to_own_task", files=len(ready), error=f"{type(exc).__name__}: {exc}")
            return BatchResult(outcomes, alone + [r.file_id for r in ready], later)
        looked = {r.file_id for r, o in zip(ready, written, strict=True) if self._looks_again(r, o)}
        indexed = [r for r in ready if r.file_id in looked]
        outcomes.update(
            (r.file_id, o) for r, o in zip(ready, written, strict=True) if r.file_id not in looked
        )
        if not indexed:
            return BatchResult(outcomes, alone, later)
        try:
            now = client.find_by_ids([r.file_id for r in indexed])
        except Exception as exc:  # the soft time limit too
            log.info("left_to_own_task", files=len(indexed), error=f"{type(exc).__name__}: {exc}")
            return BatchResult(outcomes, alone + [r.file_id for r in indexed], later)
        for r, o in zip(ready, written, strict=True):
            if r.file_id in looked:
                outcomes[r.file_id] = self._rechecked(user, r, o, now.get(r.file_id))
        self._add_viewers(user, indexed, outcomes)
        return BatchResult(outcomes, alone, later)

    def _add_viewers(self, user: str, reads: Sequence[_Read], outcomes: dict[int, Outcome]) -> None:
        """Give each of ``outcomes`` still ``indexed`` whose document was new to the index (no
        stored version) the other accounts that may see it too
        (:meth:`~ncindex.index.access.Access.co_viewers`, asked once per folder of ``reads``).
        A store that fails here only costs the hint: their scans find the document."""
        new = [
            (r, r.doc.path)
            for r in reads
            if r.stored.payload is None
            and r.doc.path is not None
            and r.file_id in outcomes
            and outcomes[r.file_id].action == "indexed"
        ]
        keys = {r.doc.ref.key for r, _ in new}
        asked: dict[str, tuple[str, ...]] = {}
        for r, path in new:
            folder = posixpath.dirname(path)
            if folder not in asked:
                try:
                    asked[folder] = self.access.co_viewers(user, path, besides=keys)
                except StoreUnavailable as exc:
                    log.warning("co_viewers_not_read", user=user, folder=folder, error=str(exc))
                    return
            if asked[folder]:
                outcomes[r.file_id] = replace(outcomes[r.file_id], viewers=asked[folder])

    @staticmethod
    def _alone(client: NextcloudClient, file_id: int) -> DavEntry | None:
        """File ``file_id`` looked up by id in an answer of its own, ``None`` when it is not
        visible (:meth:`~ncindex.nextcloud.client.NextcloudClient.find_by_id`)."""
        try:
            return client.find_by_id(file_id)
        except NotFound:
            return None

    def _read_node(
        self,
        client: NextcloudClient,
        user: str,
        file_id: int,
        entry: DavEntry,
        on_version: Callable[[str], None] | None,
    ) -> Outcome | _Read | _Granted:
        """The steps of :meth:`index_node` before the write, for ``entry`` as just looked up
        by id: an :class:`Outcome` when nothing is left to write (a folder, parked, not
        eligible, unextractable, gone, refused, or only its metadata changed), else what to
        write (:class:`_Read`), or a metadata-only update that gave ``user`` access the stored
        version did not (:class:`_Granted`: the caller looks it up again). Raises
        :class:`StaleEntry` and what the source raises."""
        if entry.is_folder:
            return Outcome("folder", path=entry.path)
        parked = self.deadletters.blocked(node_subject(file_id), entry.etag)
        if parked is not None:
            return Outcome("dead_letter", reason=parked.reason)
        if on_version is not None:
            on_version(entry.etag)
        ref, reason = self.steps.classify(client, entry)
        if self._turns_note(user, file_id, ref):
            ref, reason = self.steps.classify(client, entry, fresh=True)
        for doc_type in NODE_TYPES:
            if ref is None or doc_type != ref.doc_type:
                lost = UNREADABLE if reason == UNREADABLE else None  # else: an index rule
                self.access.remove(user, DocRef(doc_type, str(file_id)), lost=lost)
        if ref is None:
            return Outcome("ineligible", reason=reason, path=entry.path)
        stored = self.steps.read(ref)
        try:
            doc = self.steps.fetch(client, stored, entry).doc
        except (ExtractionError, TooLarge) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            if not _kept_on_reread(stored, entry, reason):
                # the bytes cannot become text: park until the file changes; a stale version
                # of the text must not stay searchable
                self.services.store.delete_document(ref.key)
                self.deadletters.put_node(
                    file_id,
                    user,
                    entry.etag,
                    reason,
                    path=entry.path,
                    mime_type=entry.content_type or "",
                )
                return Outcome("dead_letter", ref.key, reason=reason)
            doc = None  # its stored text stays, as for unchanged content
        except FileGone:
            self.access.remove_node(user, file_id, lost=GONE)
            return Outcome("evicted")
        except Forbidden:  # blocked since it was listed: as for a file listed unreadable
            self.access.remove_node(user, file_id, lost=UNREADABLE)
            return Outcome("ineligible", ref.key, reason="download refused", path=entry.path)
        if doc is None:  # unchanged content (conditional GET answered 304 / same etag)
            # a group folder's file has no owner (DavEntry.mounted): one stored with a
            # member's name before that was known loses it here
            fields: dict[str, object] = {"tags": entry.tags}
            if entry.mounted:
                fields["owner"] = None
            unconfirmed = self._unconfirmed(user, stored)
            outcome = self.steps.update_metadata(stored, user, entry.path, fields)
            if unconfirmed is not None:
                return _Granted(file_id, entry, outcome, ref, unconfirmed.path_before)
            return outcome
        return _Read(file_id, entry, doc, stored, self._unconfirmed(user, stored))

    def _turns_note(self, user: str, file_id: int, ref: DocRef | None) -> bool:
        """Whether indexing ``file_id`` as ``ref`` (``None``: not at all) would take ``user``'s
        note of it away or make their file of it a note: the index holds the note (or the
        file) for ``user``. The notes folder that decided it may be a cached one the user has
        left since (:func:`ncindex.sources.note.notes_settings`, five minutes): before a note
        is evicted or a second document made of it, it is classified again on the settings
        Notes answers now. Raises ``StoreUnavailable``."""
        other = DocType.FILE if ref is not None and ref.doc_type is DocType.NOTE else DocType.NOTE
        held = self.steps.read(DocRef(other, str(file_id)), vectors=False).payload
        return held is not None and principal(user) in held["acl"]

    def _unconfirmed(self, user: str, stored: Stored) -> Unconfirmed | None:
        """Before a metadata-only update of ``stored`` for ``user``: the grant to confirm after
        it, ``None`` when there is none. One the update is about to write (``user`` not in
        the stored ``acl``) is marked unconfirmed first (:mod:`ncindex.index.grants`); one
        already written (``user`` in the ``acl``) is unconfirmed while its mark is there: an
        earlier run's look-up after the write or its roll-back did not finish (a store failure
        while taking it back, the worker killed), so this run looks up after its write as if
        it granted anew. Raises ``redis.RedisError`` (nothing is written then)."""
        if stored.payload is None:
            return None
        grants = UnconfirmedGrants(self.services.redis, self.settings.names, user)
        if principal(user) in stored.payload["acl"]:
            return grants.get(stored.ref.key)
        before = Unconfirmed(stored.payload.get("paths", {}).get(user))
        grants.mark(stored.ref.key, before.path_before)
        return before

    def _regranted(self, user: str, granted: _Granted, now: DavEntry | None) -> Outcome:
        """After ``granted``'s metadata update, what the look-up by id found (``now``;
        ``None``: not visible to ``user``): a share revoked (or the file deleted) between
        the read and the write fires no event for ``user``, whose access the write added
        from the earlier read. Gone ⇒ ``user``'s access removed (``evicted``); moved ⇒ its
        paths brought up to date (one more pass, no embedding); else the update's outcome.
        Either way the grant is settled and its unconfirmed mark cleared."""
        grants = UnconfirmedGrants(self.services.redis, self.settings.names, user)
        if now is None:
            self.access.remove_node(user, granted.file_id, lost=GONE)
            grants.clear(granted.ref.key)
            log.info("gone_while_granted", file_id=granted.file_id, user=user)
            return Outcome("evicted", granted.outcome.doc_key)
        if now.path != granted.entry.path:
            self.index_node(user, granted.file_id, recheck=False)
        grants.clear(granted.ref.key)
        return granted.outcome

    def _ungranted(self, user: str, granted: _Granted) -> None:
        """Take back what ``granted``'s metadata update gave ``user`` — their principal from
        the ``acl`` and their path (put back as the stored version had it) — when the look-up
        by id after it failed (a transient error, a refusal, the soft time limit): the task's
        retry, finding ``user`` held already, would write nothing and never look again, so a
        share revoked in between stayed until ``user``'s next scan. Without the grant the
        retry grants and looks again. The other fields the update wrote (tags, owner, title)
        are the file's, not an access, and stay. Nothing is marked for the scans: this is
        not a loss Nextcloud reported. Once it is taken back, its unconfirmed mark is cleared;
        when taking it back fails, the mark stays, and the next run for ``user`` looks it up
        after its write although ``user`` is in the ``acl`` (:meth:`_unconfirmed`). Raises
        ``StoreUnavailable``."""
        ref = granted.ref
        grants = UnconfirmedGrants(self.services.redis, self.settings.names, user)
        current = self.steps.read(ref, vectors=False).payload
        if current is None or principal(user) not in current["acl"]:
            grants.clear(ref.key)
            return
        acl = set(current["acl"]) - {principal(user)}
        if not acl:
            self.services.store.delete_document(ref.key)
            log.info("evicted", doc_key=ref.key, user=user)
        else:
            paths = {u: p for u, p in current["paths"].items() if u != user}
            if granted.path_before is not None:
                paths[user] = granted.path_before
            self.services.store.set_payload(ref.key, {"acl": sorted(acl)} | path_fields(paths))
            log.info("grant_taken_back", doc_key=ref.key, user=user)
        grants.clear(ref.key)

    @staticmethod
    def _looks_again(read: _Read, outcome: Outcome) -> bool:
        """Whether ``read``'s write (``outcome``) is looked up by id once more: a new version
        written (``indexed``), or a grant to its user (:attr:`_Read.grant`) whatever was
        written — a new etag of the same text is a metadata-only update in
        :meth:`Steps.write_documents`, which gives the access read before it as the
        unchanged etag's does (:class:`_Granted`)."""
        return outcome.action == "indexed" or read.grant is not None

    def _rechecked(self, user: str, read: _Read, outcome: Outcome, now: DavEntry | None) -> Outcome:
        """After ``read``'s version was written (``outcome``), what the recheck by id found
        (``now``; ``None``: not visible): a folder renamed or deleted while it was embedded
        fires one event, for the folder, whose task found nothing of this file indexed yet;
        a share revoked between the read and a write that granted ``user`` access fires none
        for ``user`` (the share poll's re-check of what ``user`` held then could not find
        it). Gone ⇒ ``user``'s access removed (``evicted``); moved ⇒ its paths brought up to
        date (one more pass, no embedding). Either way the grant's mark is cleared."""
        if now is None:
            self.access.remove_node(user, read.file_id, lost=GONE)
            log.info("gone_while_indexed", doc_key=read.doc.ref.key, user=user)
            outcome = Outcome("evicted", read.doc.ref.key, outcome.embedded)
        elif now.path != read.entry.path:
            log.info("moved_while_indexed", doc_key=read.doc.ref.key, path=now.path)
            self.index_node(user, read.file_id, recheck=False)
        if read.grant is not None:
            UnconfirmedGrants(self.services.redis, self.settings.names, user).clear(
                read.doc.ref.key
            )
        return outcome

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
        returned when the file is another version now: that one has not failed yet. Points
        whose stored etag is the current one (a re-read of unchanged bytes for a newer
        extractor: :func:`_kept_on_reread`) are kept; the file is parked all the same, so it
        is not run again to kill workers until its etag changes."""
        client = self.services.account(user)
        try:
            entry = client.find_by_id(file_id)
        except NotFound:
            self.access.remove_node(user, file_id)
            return Outcome("evicted")
        if etag is not None and entry.etag != etag:
            return None
        for doc_type in NODE_TYPES:
            ref = DocRef(doc_type, str(file_id))
            if not _kept_on_reread(self.steps.read(ref, vectors=False), entry, reason):
                self.services.store.delete_document(ref.key)
        self.deadletters.put_node(
            file_id,
            user,
            entry.etag,
            reason,
            deliveries=deliveries,
            path=entry.path,
            mime_type=entry.content_type or "",
        )
        return Outcome("dead_letter", reason=reason)

    # --- documents that are not files: Deck cards, News items ----------------------------

    def index_document(self, user: str, doc_type: str, doc_id: str | int) -> Outcome:
        """Re-read document ``doc_type``/``doc_id`` as ``user`` and bring the index in line,
        through its source's :meth:`~ncindex.sources.base.Source.fetch` (a Deck card, a News
        item); files and notes go to :meth:`index_node`. A document that is gone for ``user``
        (Deck 403, News absent) loses ``user``'s access; one the source finds ineligible (an
        archived card) is deleted. Raises ``ValueError`` for an unknown ``doc_type``.

        The steps: read the stored version (once), fetch, skip it while parked at this etag,
        then write (:meth:`Steps.write_document`: chunk, embed, write, clean up)."""
        kind = DocType(doc_type)
        if SOURCES[kind].node:
            return self.index_node(user, int(doc_id))
        ref = DocRef(kind, str(int(doc_id)))
        client = self.services.account(user)
        stored = self.steps.read(ref)
        try:
            fetched = self.steps.fetch(client, stored)
        except NotFound:
            self.access.remove(user, ref)
            return Outcome("evicted", ref.key)
        if fetched.ineligible is not None:
            self.services.store.delete_document(ref.key)
            return Outcome("ineligible", ref.key, reason=fetched.ineligible)
        if fetched.doc is None:  # unchanged (a conditional read)
            return Outcome("unchanged", ref.key)
        parked = self.deadletters.blocked(ref.key, fetched.doc.etag)
        if parked is not None:
            return Outcome("dead_letter", ref.key, reason=parked.reason)
        if fetched.acl is None:
            return self.steps.write_document(fetched.doc, stored, fetched.acl)
        written = set(fetched.acl) | {principal(user)}
        marked = self._readers_marked(user, fetched.doc, stored, written)
        outcome = self.steps.write_document(fetched.doc, stored, fetched.acl)
        if not marked and outcome.action not in ("indexed", "updated"):
            return outcome
        return self._readers_rechecked(client, user, fetched.doc, stored, written, outcome, marked)

    def _readers_marked(
        self, user: str, doc: SourceDocument, stored: Stored, written: set[str]
    ) -> bool:
        """Before ``doc`` is written with the readers ``written`` (principals) for ``user``:
        whether its readers must be asked for again after the write although it may grant
        nothing new (:meth:`_readers_rechecked`). A write that grants a principal the stored
        ``acl`` lacks is marked unconfirmed first (:mod:`ncindex.index.grants`, as
        :meth:`_unconfirmed` does for files); one that grants nothing new is unconfirmed while
        an earlier run's mark is there — its re-read and its roll-back both failed (a store
        outage), so what it granted stayed and this run finds it held. ``False`` for a source
        without a :attr:`~ncindex.sources.base.Source.readers_field`. Raises
        ``redis.RedisError`` (nothing is written then)."""
        if SOURCES[doc.ref.doc_type].readers_field is None:
            return False
        grants = UnconfirmedGrants(self.services.redis, self.settings.names, user)
        held = set((stored.payload or {}).get("acl") or ())
        if written - held:
            grants.mark(doc.ref.key, None)
            return True
        return grants.get(doc.ref.key) is not None

    def _readers_rechecked(
        self,
        client: NextcloudClient,
        user: str,
        doc: SourceDocument,
        stored: Stored,
        written: set[str],
        outcome: Outcome,
        marked: bool,
    ) -> Outcome:
        """After ``doc`` was written (``outcome``) with the readers its fetch gave
        (``written``: principals), ask its source for its readers again
        (:meth:`~ncindex.sources.base.Source.readers_now`: for a Deck card one board GET) when
        the write gave access the stored version did not — a principal it did not hold, or
        another :attr:`~ncindex.sources.base.Source.readers_field` (a card new to the index,
        moved to another board, or on a board shared with someone since) — and take out
        those no longer among them: a board unshared between the fetch and the write is
        otherwise written back, and its ``AclDeletedEvent`` (when subscribed and delivered)
        re-reads only the cards the index held on that board then
        (``ncindex.index_related``), so the removed participant stayed until their scan and
        its grace.

        A write that gave nobody anything new is not asked about (0 extra requests) unless
        ``marked`` (:meth:`_readers_marked`: an earlier run's grant left unconfirmed): every
        principal it wrote was held already, on the same board, so a revocation is left to
        what removes it without this task (the event's re-read of the card, which waits for
        this lock; the scan). Cost: one board GET per card write that grants (every card
        new to the index; every card of a board shared anew), none otherwise; Deck cards
        are indexed one task each, so per batch it is one per such card.

        ``user`` no longer reading the board (``NotFound``) ⇒ ``user``'s access goes, with
        the access this write gave others (unconfirmed: ``evicted``). A failed re-read
        takes back what the write granted (the document is deleted when nothing is left)
        and raises; once taken back, the grant's unconfirmed mark is cleared and the task's
        retry grants it again and asks again. A roll-back that fails is noted on the
        re-read's error, still the one raised (:func:`_roll_back`), and leaves the mark: the
        retry finds the grant held, but asks again because of the mark. A marked run whose
        re-read fails again has nothing of its own to take back and leaves the mark too.
        The mark is cleared once the readers were read (or ``user`` lost the board)."""
        source = SOURCES[doc.ref.doc_type]
        field = source.readers_field
        if field is None:
            return outcome
        before = stored.payload or {}
        held = set(before.get("acl") or ())
        granted = written - held
        if not granted and not marked and before.get(field) == doc.extra.get(field):
            return outcome
        grants = UnconfirmedGrants(self.services.redis, self.settings.names, user)
        try:
            now = source.readers_now(self.services, client, doc)
        except NotFound:
            others = granted - {principal(user)}
            if others:
                self._set_acl(doc.ref, written - others)
            self.access.remove(user, doc.ref)
            grants.clear(doc.ref.key)
            log.info("unshared_while_indexed", doc_key=doc.ref.key, user=user)
            return Outcome("evicted", doc.ref.key, outcome.embedded)
        except Exception as exc:
            if granted:

                def take_back() -> None:
                    self._set_acl(doc.ref, written - granted)
                    grants.clear(doc.ref.key)

                _roll_back(exc, take_back, doc.ref.key)
            raise
        gone = written - now
        if gone:
            log.info("readers_shrank_while_indexed", doc_key=doc.ref.key, gone=sorted(gone))
            self._set_acl(doc.ref, written & now)
        grants.clear(doc.ref.key)
        return outcome

    def _set_acl(self, ref: DocRef, acl: set[str]) -> None:
        """Replace ``ref``'s ``acl`` with ``acl`` (principals); delete the document when it is
        empty. For documents without paths (Deck cards, News items)."""
        if not acl:
            self.services.store.delete_document(ref.key)
            log.info("evicted", doc_key=ref.key)
            return
        self.services.store.set_payload(ref.key, {"acl": sorted(acl)})

    def evict_document(self, user: str, doc_type: str, doc_id: str | int) -> Outcome:
        """``user`` reported document ``doc_type``/``doc_id`` deleted (Deck's
        CardDeletedEvent): when ``user`` can no longer read it (or its source finds it
        ineligible: an archived card), it is deleted for everyone (a deleted card is gone for
        every board member); when it is readable, re-index.
        Files and notes are re-read by id (:meth:`index_node`), which evicts what is gone."""
        kind = DocType(doc_type)
        if SOURCES[kind].node:
            return self.index_node(user, int(doc_id))
        ref = DocRef(kind, str(int(doc_id)))
        client = self.services.account(user)
        try:
            gone = self.steps.fetch(client, self.steps.read(ref, vectors=False)).ineligible
        except NotFound as exc:
            gone = str(exc)
        if gone is not None:
            self.services.store.delete_document(ref.key)
            log.info("evicted", doc_key=ref.key, user=user)
            return Outcome("evicted", ref.key)
        return self.index_document(user, doc_type, doc_id)

    # --- evict ---------------------------------------------------------------------------

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
                holders = self.access.holders(file_id, besides=user)
                self.access.remove_node(user, file_id)
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
        for payload in self.access.under(user, path):
            ref = DocRef.parse(payload["doc_key"])
            holders = self.access.holders(int(ref.doc_id), besides=user)
            removed += self.access.remove(user, ref)
            self._recheck_holders(holders)
        return Outcome("evicted", embedded=0) if removed or file_id else Outcome("unchanged")

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

    def related(self, doc_type: DocType, field: str, value: str) -> list[str]:
        """The ids of the indexed documents of ``doc_type`` whose payload ``field`` (a
        keyword-indexed one: a Deck card's ``board_id``) is ``value``, sorted. Raises
        ``StoreUnavailable``."""
        flt = first_chunks(
            doc_type_condition(doc_type),
            models.FieldCondition(key=field, match=models.MatchValue(value=value)),
        )
        return sorted(
            {str(p["doc_id"]) for p in self.services.store.scroll(flt, ["doc_id"])}, key=int
        )

    def leave_folder(self, user: str, viewer: str, folder: str) -> int:
        """Take ``user`` out of what they held through the folder at ``folder`` in
        ``viewer``'s view, which Nextcloud no longer shows them (asked by id: a folder moved
        out of one shared with them). Nextcloud dispatches the move once, for the folder
        (nextcloud/server ``lib/private/Files/Node/HookConnector.php`` ``postRename``), so
        nothing else tells the index that the documents below it left their view.

        Each document at or below ``folder`` for ``viewer`` that ``user`` holds is asked about
        by id as ``user`` (:meth:`NextcloudClient.find_by_ids`: one WebDAV SEARCH per
        :data:`~ncindex.nextcloud.webdav.MAX_FILEIDS_PER_SEARCH` documents), and one Nextcloud
        no longer shows ``user`` loses ``user`` (:meth:`~ncindex.index.access.Access.remove`);
        one ``user`` still sees (a subfolder or file also shared with them on its own, whatever
        path the index has for them) is kept. Nothing is marked for the scans: nothing is left
        for them to find. Returns how many documents ``user`` left. Raises
        ``StoreUnavailable``, and the client's transient errors; an account Nextcloud refuses
        (401) is logged and left as it is (its own scan records the refusal)."""
        held = {
            DocRef.parse(p["doc_key"])
            for p in self.access.under(viewer, folder)
            if user in (p.get("paths") or {})
        }
        if not held:
            return 0
        try:
            seen = self.services.account(user).find_by_ids(sorted(int(r.doc_id) for r in held))
        except NextcloudAuthError as exc:
            log.warning("leave_folder_refused", user=user, folder=folder, error=str(exc))
            return 0
        left = 0
        for ref in sorted(held, key=lambda r: r.key):
            if int(ref.doc_id) in seen:
                continue
            with self.lock(ref):
                left += self.access.remove(user, ref, lost=None)
        return left

    # --- a deleted user ------------------------------------------------------------------

    def forget_user(self, user: str) -> int:
        """Take ``user`` out of every document the index holds for them — for a user Nextcloud
        says no longer exists (the caller asked: :func:`ncindex.sync.deleted.check_deleted`).
        Each document is handled under its lock by
        :meth:`~ncindex.index.access.Access.remove` (nothing marked for the scans): a document
        only ``user`` held, and a file or note they owned (Nextcloud deleted their home, and
        with it every share of it: nextcloud/server ``lib/private/User/User.php`` ``delete``),
        is deleted; ``user:{user}`` leaves the ``acl`` and paths of the others (a file shared
        with them, a Deck card on a board of someone else). The cards they held that others
        hold too are asked about once per board and account (:meth:`_boards_of_the_deleted`):
        Deck deletes the boards of a deleted user. Returns how many documents changed; running
        it again changes nothing. Raises ``StoreUnavailable``."""
        keys = sorted(
            {
                str(p["doc_key"])
                for p in self.services.store.scroll(first_chunks(acl_condition(user)), ["doc_key"])
                if p.get("doc_key")
            }
        )
        changed = 0
        cards: dict[int, dict[DocRef, set[str]]] = {}  # board id → card kept → its acl
        for key in keys:
            ref = DocRef.parse(key)
            with self.lock(ref):
                changed += self.access.remove(user, ref, lost=None)
                if ref.doc_type is DocType.DECK_CARD:
                    kept = self.steps.read(ref, vectors=False).payload
                    if kept and str(kept.get("board_id") or "").isdigit():
                        board = cards.setdefault(int(kept["board_id"]), {})
                        board[ref] = set(kept.get("acl") or ())
        changed += self._boards_of_the_deleted(user, cards)
        log.info("user_forgotten", user=user, documents=changed)
        return changed

    def _boards_of_the_deleted(self, user: str, cards: dict[int, dict[DocRef, set[str]]]) -> int:
        """The Deck cards deleted ``user`` held that others hold too (``cards``: board id →
        card → its ``acl``): Deck deletes the boards a deleted user owned (nextcloud/deck
        ``lib/Listeners/ParticipantCleanupListener.php`` ``handle``, ``UserDeletedEvent``:
        ``BoardMapper::findAllByOwner`` then ``delete``; no Deck event), so every participant
        loses their cards at once. Each configured account holding a card of a board asks for
        the board (one GET per board and account); Deck's 403 (``NotFound``) takes the account
        out of that board's cards it holds. Any other failure leaves them to the account's
        scan (logged). Returns how many documents changed."""
        accounts = self.services.settings.accounts
        changed = 0
        for board_id, held in sorted(cards.items()):
            holders = sorted(
                {p.removeprefix("user:") for acl in held.values() for p in acl}
                & set(accounts) - {user}
            )
            for holder in holders:
                try:
                    deck_card.get_board(self.services.account(holder), board_id)
                except NotFound:
                    for ref in sorted(
                        (r for r, a in held.items() if principal(holder) in a), key=lambda r: r.key
                    ):
                        with self.lock(ref):
                            changed += self.access.remove(holder, ref, lost=None)
                    log.info("deleted_users_board_gone", board_id=board_id, user=holder)
                except NcindexError as exc:  # the holder's own scan decides
                    log.warning(
                        "board_not_rechecked", board_id=board_id, user=holder, error=str(exc)
                    )
        return changed

    # --- move ----------------------------------------------------------------------------

    def move_path(self, user: str, source: str, target: str, file_id: int | None) -> Outcome:
        """A file or folder moved from ``source`` to ``target`` in ``user``'s view: re-path
        every document under it (each is re-read by id, so its new path comes from
        Nextcloud), writing payloads only — nothing here embeds, so the light worker group
        (the ``ingest`` queue) runs it without the dense model. What may need embedding is
        left to the caller, as file ids in the outcome's ``reindex``, to re-read on the
        ``index`` queue (:meth:`index_node`): a document whose type changes (moved into or
        out of the notes folder: a new doc key, embedded afresh; the one stored has the
        new path meanwhile); a note, whose title and category come from the Notes API (its
        path is updated here at once; the re-read is one conditional GET, embedding only a
        text that changed); and ``file_id`` when the
        index held nothing of it (a file moved in from an excluded path, or not indexed
        yet). A folder comes back as ``folder`` (with its new path): what was not indexed
        below it (moved in from an excluded path, say) is for the caller to walk.

        The outcome's ``viewers`` are the other accounts that may see ``target`` — those who
        see the documents under its nearest folder holding others than the moved ones
        (:meth:`~ncindex.index.access.Access.co_viewers`), and those who held the moved ones
        (their paths changed too) — for the caller to ask about ``file_id``: Nextcloud
        dispatches the rename once, in the mover's view (nextcloud/server
        ``lib/private/Files/Node/HookConnector.php`` ``postRename``), so a file moved into a
        folder shared with them, or within one, reaches them only so (a folder's id makes them
        walk it in their own view). A file the index did not hold gets none: its
        :meth:`index_node` on the ``index`` queue asks for a document new to the index."""
        client = self.services.account(user)
        moved_self = False
        moved: set[str] = set()  # doc keys
        holders: set[str] = set()  # the accounts that held them (their paths)
        reindex: list[int] = []  # file ids for the index queue
        for payload in self.access.under(user, source):
            moved.add(payload["doc_key"])
            holders.update(payload.get("paths") or {})
            ref = DocRef.parse(payload["doc_key"])
            moved_self |= payload["paths"][user] == source
            with self.lock(ref):
                try:
                    entry = client.find_by_id(int(ref.doc_id))
                except NotFound:
                    self.access.remove(user, ref)
                    continue
                fields: dict[str, object] = {}
                if self.classify(client, entry) != ref:
                    # a new document, embedded afresh by the re-read; until then the one
                    # stored shows where the file now is (a re-run finds it by id, not here)
                    reindex.append(int(ref.doc_id))
                elif SOURCES[ref.doc_type].title_from_path:
                    fields["title"] = posixpath.basename(entry.path)
                else:  # a note: its title and category from the Notes API, by the re-read
                    reindex.append(int(ref.doc_id))
                stored = self.steps.read(ref, vectors=False)
                self.steps.update_metadata(stored, user, entry.path, fields)
        outcome = Outcome("moved", reindex=tuple(reindex))
        if not moved_self and file_id is not None:
            node = self._alone(client, file_id)
            if node is not None and node.is_folder:  # what was not indexed below it may be now
                outcome = Outcome("folder", path=node.path, reindex=tuple(reindex))
            else:  # not held (or gone): its re-read indexes (or evicts) it
                outcome = Outcome("moved", reindex=(*reindex, file_id))
        if moved or outcome.action == "folder":
            try:
                near = self.access.co_viewers(user, target, besides=moved)
            except StoreUnavailable as exc:  # only the hint is lost: their scans find it
                log.warning("co_viewers_not_read", user=user, folder=target, error=str(exc))
                near = ()
            viewers = tuple(
                u
                for u in self.services.settings.accounts
                if u != user and (u in near or u in holders)
            )
            outcome = replace(outcome, viewers=viewers)
        return outcome
