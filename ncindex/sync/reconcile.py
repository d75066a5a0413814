"""Reconciliation scans: bring the index in line with Nextcloud per user and doc type (DESIGN §7).

Webhooks are delivered at most once, share changes fire none, and a folder operation fires one
event for the folder only, so periodic scans are part of correctness. One scan of one user and
doc type:

1. reads the index manifest first (:mod:`ncindex.store.manifest`): a document indexed after that
   read cannot look "missing" to this scan;
2. pages through the source listing (:meth:`ncindex.sources.base.Source.list`) — a WebDAV
   PROPFIND ``Depth: 1`` walk for files, skipping every folder whose etag is unchanged since
   the last clean scan (a folder's etag changes when anything below it changes, share mounts
   included); the Notes list with ``pruneBefore`` and the chunk cursor for notes (only the
   last chunk lists every id);
3. compares: a listed document not in the manifest is *new* (or newly shared: the user is
   not yet in its ``acl``), one with another etag is *changed*, one at another path *moved*;
   a manifest document not listed (and not below a skipped folder) is *missing*;
4. enqueues ``ncindex.index_node`` (``ncindex.index_document`` for Deck cards and News
   items; files and notes in ``ncindex.index_nodes`` tasks of ``index_batch_docs``,
   :func:`ncindex.ingest.queueing.send_actions`) for each — the task re-reads the document by
   id, so it
   indexes, re-paths without embedding, adds the user to ``acl``, or removes the user's access
   (evicting the document when nobody is left) as Nextcloud says.

Guards: a failed listing enqueues nothing; a missing document is only acted on once it has
been missing for ``reconcile_grace_seconds``; and the removals of an empty listing (nothing
listed, nothing indexed below a skipped folder), or of a scan that would remove more than
``reconcile_max_removal_share`` of a user's documents (and more than
``reconcile_guard_min_docs``), are held until a second scan agrees (the removals both name go
ahead, each a re-check by id): one glitch never evicts, and a revoked share (a user's only
Deck board, say) is not kept for good.

A new document that stays out of the index although a task was sent for its very version
(an empty file, one parked in the dead letter, or one whose task is still queued) is reported
as ``unindexable`` and not sent again until its etag changes or a day passes; its folders stay
dirty, so it keeps being listed. A task Nextcloud refused (the account's app password revoked,
the account disabled) made nothing of its document, so a refused task forgets what the user's
scans sent (:func:`forget_tried`): the first scan that gets through again sends it all again.

Whatever takes a user's access away (a re-check by id after a verification drop, a scan or a
delete event; :meth:`ncindex.index.access.Access.remove`) marks the document for that
user's scans (:meth:`ScanState.lost`): until it is back in the user's index, each file scan walks
the folders above its last path whatever their etags say (a share given back, or an access rule
lifted, may change none), a notes scan lists every note, and no scan holds it back as
unindexable — that hold is only for documents a task could not make text of.

A file scan skips folders whose etag is unchanged, except once every
``reconcile_full_walk_seconds`` (a day by default), when it walks them all: what changes no
folder etag (a system tag whose webhook was lost, a document lost from the index) is repaired
then. An index that has lost *every* document of a user and doc type that the last scan found
(a new or wiped store beside a kept Redis) is relisted at once: the scan forgets the folder
etags, Notes marker and full-walk time first (:meth:`ScanState.forget_listing`), and when
nothing of the user's is indexed any more their first indexing starts again
(:meth:`~ncindex.progress.Progress.restart_first_indexing`). A document
listed at two paths (a file inside two nested shares) counts as moved only when the index holds
neither.

A document indexed by an older extraction of its format (:mod:`ncindex.text.versions`: a
release that reads e-mails, PDFs or HTML better bumps their number) is sent to be read again
whatever its etag, as long as the listing finds it or skips the folder above it unchanged, at
most ``reconcile_page_requests`` of them in flight per user and doc type
(:meth:`Reconciler._outdated`): an upgrade re-reads the files it improves over a few scans,
not all at once, and the other files not at all.

Redis holds only what can be rebuilt (:class:`ScanState`): folder etags and ``pruneBefore``
(losing them costs one full listing), the missing-since times (losing them restarts the grace
period), the folders a file scan skipped because their storage could not be reached (losing them
leaves a storage that answers again to the next external or full walk), held removals (losing
them holds again) and the last scan reports. Scan state is only advanced by a *clean* scan part
— a folder's etag is kept only when nothing below it needed work, ``pruneBefore`` only when
nothing did — so a task that failed after a scan is retried by the next scan instead of being
hidden behind an unchanged etag.

How each doc type is listed, and what listing state it keeps, is its source's
(:meth:`ncindex.sources.base.Source.list` and ``commit``, looked up in
:data:`ncindex.sources.registry.SOURCES`): files and notes as above, Deck cards (boards, then
each live board's stacks) and News items (one list of every item); the last two have no paths
and keep no scan state. This module compares, guards, enqueues and keeps the state.

The scan task lists a big account in pages of ``reconcile_page_requests`` requests, one task
each, the listing so far kept in Redis between them (:mod:`ncindex.sync.paging`); steps 3 and 4
and every change to the scan state happen only once the listing is complete. Such a listing
reads the manifest after its last page, and a document indexed since its first page is not
judged missing.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeVar

import redis
import structlog
from qdrant_client import models

from ncindex import names
from ncindex.accounts import Lookup, clear_refused
from ncindex.documents import DocType
from ncindex.errors import (
    NcindexError,
    NextcloudAuthError,
    NotFound,
    TransientError,
    UnsupportedDocType,
)
from ncindex.index.indexing import Indexer
from ncindex.index.locks import hold
from ncindex.ingest.events import Action, reindex_action
from ncindex.ingest.queueing import Producer, send_actions
from ncindex.names import Names
from ncindex.nextcloud.client import NextcloudClient
from ncindex.nextcloud.webdav import DavEntry
from ncindex.progress import Progress, node_subject
from ncindex.redis_replies import as_text
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.sources.base import Listing, Source, ancestors
from ncindex.sources.registry import SOURCES
from ncindex.store.manifest import ManifestEntry, load_manifest
from ncindex.store.queries import acl_condition, document_counts, first_chunks
from ncindex.strict_json import finite_float
from ncindex.sync.deleted import Deleted, check_deleted
from ncindex.text.versions import outdated

log = structlog.get_logger(__name__)
_T = TypeVar("_T")

"""Redis hash ``"{user}:{doc_type}"`` → JSON summary of the last scan (``ncindex status``)."""
RETRY_UNINDEXABLE_SECONDS = 86_400
"""A document listed but not indexed after a task was sent for its version is sent again
after this long (or as soon as its etag changes); so is a document sent to be read again by a
newer extraction that is still outdated (:meth:`Reconciler._outdated`)."""
REREAD = "extractor "
"""The prefix of the version noted in the tried versions (:meth:`ScanState.tried`) of a
document sent to be read again by a newer extraction: no etag begins so (an entity-tag holds
no space, RFC 9110 §8.8.3), so it never stands for a version a listing shows."""


# --- reports -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    """One difference: ``reason`` is ``new``, ``changed``, ``moved`` or ``missing``; ``path``
    is where the listing shows it, ``indexed_path`` where the manifest has it."""

    doc_id: str
    reason: str
    path: str | None = None
    indexed_path: str | None = None


@dataclass(slots=True)
class ScanReport:
    """The outcome of one scan of one user and doc type.

    ``index`` are enqueued as they are; ``remove`` are missing documents past the grace period
    (enqueued as a re-check by id, which evicts what is gone); ``waiting`` are missing within
    the grace period; ``held`` are removals the guards held back (``guard`` says which:
    ``empty_listing`` or ``mass_removal``). ``unindexable`` are new documents still not in the
    index although an earlier scan sent a task for this very version (an empty file, a parked
    one, or a task still queued): they are not sent again until their etag changes or
    :data:`RETRY_UNINDEXABLE_SECONDS` pass (changed and moved documents are always sent).
    ``unavailable`` says why an app's listing answered 404 (Notes, Deck or News not
    installed): nothing is enqueued, and it is not an error. ``applied`` is false for a dry
    run, which enqueues nothing and stores no state. ``pages`` is how many tasks listed
    (:mod:`ncindex.sync.paging`; 1 for a listing made in one go); ``partial`` marks the
    report of a page that left the listing unfinished: nothing was compared, enqueued or
    stored but the page, and its ``requests``, ``listed`` and ``seconds`` are the page's.
    The report of a listing paged over several tasks starts when its first page did
    (``started_at``), and its ``seconds`` run from then (the waits between pages included).
    """

    user: str
    doc_type: str
    started_at: float
    applied: bool
    seconds: float = 0.0
    listed: int = 0
    indexed: int = 0
    requests: int = 0
    index: list[Change] = field(default_factory=list)
    remove: list[Change] = field(default_factory=list)
    waiting: list[Change] = field(default_factory=list)
    held: list[Change] = field(default_factory=list)
    unindexable: list[Change] = field(default_factory=list)
    guard: str | None = None
    enqueued: int = 0
    coalesced: int = 0
    error: str | None = None
    unavailable: str | None = None
    #: folders skipped because Nextcloud answered their listing 403 (no read permission)
    forbidden: int = 0
    #: folders skipped because their storage could not be reached (their listing answered
    #: 503 "Storage is temporarily not available"), by this scan or still when it began
    #: (files): their documents are kept as they are meanwhile
    unreachable: int = 0
    pages: int = 1
    partial: bool = False
    #: the listing failed for a reason that may pass (:class:`~ncindex.errors.TransientError`:
    #: Nextcloud or the store unavailable), so the scan is worth running again soon
    retryable: bool = False
    #: when the account was refused: whether Nextcloud says its user was deleted
    #: (:func:`ncindex.sync.deleted.check_deleted`: ``forgotten``, ``unconfirmed``, ``exists`` or
    #: ``unknown``)
    user_deleted: str | None = None
    #: documents changed when the user was found deleted and forgotten
    forgotten: int = 0
    #: indexed documents an older extraction read (:mod:`ncindex.text.versions`), listed or
    #: below a skipped folder, those ``reread`` sends now included
    outdated: int = 0
    #: the ``outdated`` ones sent to be read again now (reason ``extractor``): at most
    #: ``reconcile_page_requests`` in flight (sent by a scan within
    #: :data:`RETRY_UNINDEXABLE_SECONDS` and still outdated) per user and doc type
    reread: list[Change] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """The index agreed with the listing: nothing to do, nothing waiting or held."""
        return (
            self.error is None
            and self.unavailable is None
            and not self.partial
            and not self.index
            and not self.remove
            and not self.waiting
            and not self.held
        )

    def counts(self) -> dict[str, int]:
        """Changes by reason, plus ``waiting`` and ``held``."""
        out: dict[str, int] = {}
        for change in self.index + self.remove + self.reread:
            out[change.reason] = out.get(change.reason, 0) + 1
        out["waiting"] = len(self.waiting)
        out["held"] = len(self.held)
        out["unindexable"] = len(self.unindexable)
        return out

    def summary(self) -> dict[str, Any]:
        """A JSON-able summary (no per-document lists)."""
        return {
            "user": self.user,
            "doc_type": self.doc_type,
            "at": int(self.started_at),
            "seconds": round(self.seconds, 3),
            "listed": self.listed,
            "indexed": self.indexed,
            "requests": self.requests,
            "changes": self.counts(),
            "guard": self.guard,
            "enqueued": self.enqueued,
            "coalesced": self.coalesced,
            "applied": self.applied,
            "clean": self.clean,
            "error": self.error,
            "unavailable": self.unavailable,
            "forbidden_folders": self.forbidden,
            "unreachable_folders": self.unreachable,
            "pages": self.pages,
            "partial": self.partial,
            "user_deleted": self.user_deleted,
            "forgotten": self.forgotten,
            "outdated": self.outdated,
        }

    def to_json(self) -> dict[str, Any]:
        """The summary plus every change (for ``ncindex reconcile``)."""
        out = self.summary()
        for name in ("index", "remove", "waiting", "held", "unindexable", "reread"):
            out[name] = [asdict(c) for c in getattr(self, name)]
        return out


# --- state in Redis ------------------------------------------------------------------------


FORGOTTEN = ":forgotten"
"""The scan state key (below :meth:`~ncindex.names.Names.scan_state`) counting the runs of
:func:`forget_tried`."""
_UNREAD = object()
"""A :class:`ScanState` whose :meth:`~ScanState.tried` was not read."""


class ScanState:
    """One user's and doc type's rebuildable scan state in Redis (see the module docstring)."""

    def __init__(self, client: redis.Redis, user: str, doc_type: DocType, keys: Names) -> None:
        self.redis = client
        self.base = keys.scan_state(doc_type.value, user)
        self.lost_key = keys.lost_access(doc_type.value, user)
        self.last_scans = last_scans_key(keys)
        self.field = f"{user}:{doc_type.value}"
        self._forgotten: object = _UNREAD

    def folders(self) -> dict[str, str]:
        """Folder path → etag at the last clean visit."""
        return {
            as_text(k): as_text(v) for k, v in self.redis.hgetall(self.base + ":folders").items()
        }

    def set_folders(self, folders: dict[str, str]) -> None:
        """Replace the folder etags."""
        key = self.base + ":folders"
        pipe = self.redis.pipeline()
        pipe.delete(key)
        if folders:
            pipe.hset(key, mapping={k: v for k, v in folders.items()})
        pipe.execute()

    def full_walk_at(self) -> float | None:
        """Unix time of the last walk of every folder (files), if recorded and readable."""
        return self._scalar(":full_walk", finite_float)

    def set_full_walk_at(self, at: float) -> None:
        """Record a walk of every folder at ``at`` (Unix seconds)."""
        self.redis.set(self.base + ":full_walk", repr(float(at)))

    def external_walk_at(self) -> float | None:
        """Unix time of the last walk of the folders on and above external storages whatever
        their etags (files), if recorded and readable."""
        return self._scalar(":external_walk", finite_float)

    def set_external_walk_at(self, at: float) -> None:
        """Record such a walk at ``at`` (Unix seconds)."""
        self.redis.set(self.base + ":external_walk", repr(float(at)))

    def unreachable(self) -> dict[str, float]:
        """Folder path → Unix time a scan first skipped it because its storage could not be
        reached (files; ``<base>:unreachable``, a hash), for the folders still unreachable at
        the last applied scan; unreadable entries are dropped (the next scan that skips the
        folder records it again)."""
        out: dict[str, float] = {}
        for k, v in self.redis.hgetall(self.base + ":unreachable").items():
            try:
                out[as_text(k, "replace")] = finite_float(v)
            except ValueError:
                self._drop(":unreachable", k)
        return out

    def set_unreachable(self, folders: Mapping[str, float]) -> None:
        """Replace the unreachable folders (path → Unix time first skipped)."""
        key = self.base + ":unreachable"
        pipe = self.redis.pipeline()
        pipe.delete(key)
        if folders:
            pipe.hset(key, mapping={k: repr(float(v)) for k, v in folders.items()})
        pipe.execute()

    def rules(self) -> str | None:
        """The :meth:`~ncindex.sources.eligibility.Eligibility.fingerprint` of the index rules
        the last complete applied listing was judged by, if recorded."""
        raw = self.redis.get(self.base + ":rules")
        return None if raw is None else as_text(raw, "replace")

    def set_rules(self, fingerprint: str) -> None:
        """Record the rules a complete applied listing was judged by."""
        self.redis.set(self.base + ":rules", fingerprint)

    def forget_listing(self) -> None:
        """Drop what lets a listing skip work — the folder etags, the Notes marker and the times
        of the last full and external walks — so the next listing lists everything."""
        self.redis.delete(
            *(self.base + p for p in (":folders", ":marker", ":full_walk", ":external_walk"))
        )

    def marker(self) -> int | None:
        """The type's resume point (Notes ``pruneBefore``), if any (an unreadable one is
        dropped: it only costs a full listing)."""
        return self._scalar(":marker", int)

    def set_marker(self, value: int) -> None:
        """Store the resume point."""
        self.redis.set(self.base + ":marker", int(value))

    def missing_since(self) -> dict[str, float]:
        """Document id → Unix time a scan first missed it (unreadable entries are dropped:
        their grace period starts again)."""
        out: dict[str, float] = {}
        for k, v in self.redis.hgetall(self.base + ":missing").items():
            try:
                out[as_text(k)] = finite_float(v)
            except ValueError:
                self._drop(":missing", k)
        return out

    def set_missing(self, since: dict[str, float]) -> None:
        """Replace the missing-since times."""
        key = self.base + ":missing"
        pipe = self.redis.pipeline()
        pipe.delete(key)
        if since:
            pipe.hset(key, mapping={k: str(v) for k, v in since.items()})
        pipe.execute()

    def tried(self) -> dict[str, tuple[str, float]]:
        """Document id → (etag, Unix time) of the version an index task was last sent for,
        for documents not in the index then (``""``: etag not listed). Also notes how many
        times :func:`forget_tried` has run for this state so far, for :meth:`set_tried`."""
        pipe = self.redis.pipeline()
        pipe.get(self.base + FORGOTTEN)
        pipe.hgetall(self.base + ":tried")
        self._forgotten, entries = pipe.execute()
        out: dict[str, tuple[str, float]] = {}
        for k, v in entries.items():
            etag, _, ts = as_text(v, "replace").rpartition("|")
            try:
                out[as_text(k)] = (etag, finite_float(ts or "0"))
            except ValueError:
                self._drop(":tried", k)  # the document is simply sent again
        return out

    def set_tried(self, tried: dict[str, tuple[str, float]]) -> None:
        """Replace the tried versions — unless :func:`forget_tried` ran for this state since
        its :meth:`tried` was read (a task refused while the scan that read them was still
        running, even one it queued itself): every version in ``tried`` was sent before that
        refusal, which indexed nothing, so nothing is written and the forgetting stands (such
        a version is sent again by the next scan). Checked and written in one ``WATCH``
        transaction. Raises ``redis.RedisError``."""
        key, forgotten = self.base + ":tried", self.base + FORGOTTEN
        with self.redis.pipeline() as pipe:
            pipe.watch(forgotten)  # type: ignore[no-untyped-call]
            if self._forgotten is not _UNREAD and pipe.get(forgotten) != self._forgotten:
                return
            pipe.multi()
            pipe.delete(key)
            if tried:
                pipe.hset(key, mapping={k: f"{e}|{t}" for k, (e, t) in tried.items()})
            try:
                pipe.execute()
            except redis.WatchError:  # forgotten meanwhile: as above
                return

    def lost(self) -> dict[str, str]:
        """Document id → the path (``""``: unknown) of documents whose access the user lost
        (:meth:`ncindex.index.access.Access.mark_lost`), until they are back in the index."""
        return {
            as_text(k): as_text(v, "replace") for k, v in self.redis.hgetall(self.lost_key).items()
        }

    def forget_lost(self, ids: Iterable[str]) -> None:
        """Drop these documents' lost-access marks (they are back in the user's index)."""
        ids = list(ids)
        if ids:
            self.redis.hdel(self.lost_key, *ids)

    def excluded(self) -> set[int]:
        """Ids of the files that carried an excluded tag at the last applied scan."""
        out: set[int] = set()
        for member in self.redis.smembers(self.base + ":excluded"):
            if member.isdigit():
                out.add(int(member))
        return out

    def set_excluded(self, ids: Iterable[int]) -> None:
        """Replace the ids carrying an excluded tag."""
        key = self.base + ":excluded"
        pipe = self.redis.pipeline()
        pipe.delete(key)
        members = [str(i) for i in ids]
        if members:
            pipe.sadd(key, *members)
        pipe.execute()

    def held(self) -> set[str] | None:
        """Ids of the removals held by a guard, or ``None`` (also for an
        unreadable hold, which is dropped: the removals are held again)."""
        raw = self.redis.get(self.base + ":held")
        if raw is None:
            return None
        try:
            ids = json.loads(raw)
        except ValueError:
            ids = None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            self._drop(":held")
            return None
        return set(ids)

    def set_held(self, ids: Iterable[str] | None) -> None:
        """Hold these removals (``None`` or empty: release the hold)."""
        ids = sorted(ids or ())
        if ids:
            self.redis.set(self.base + ":held", json.dumps(ids))
        else:
            self.redis.delete(self.base + ":held")

    def last(self) -> dict[str, Any] | None:
        """The summary of the last scan, if recorded and readable."""
        raw = self.redis.hget(self.last_scans, self.field)
        if raw is None:
            return None
        try:
            last = json.loads(raw)
        except ValueError:
            last = None
        if not isinstance(last, dict):
            log.warning("scan_state_unreadable", key=self.last_scans, field=self.field)
            self.redis.hdel(self.last_scans, self.field)
            return None
        return last

    def _scalar(self, suffix: str, parse: Callable[[bytes | str], _T]) -> _T | None:
        """The value at ``suffix`` as ``parse`` reads it; ``None`` when absent, or unreadable
        (``parse`` raised ``ValueError``; the key is then dropped)."""
        raw = self.redis.get(self.base + suffix)
        if raw is None:
            return None
        try:
            return parse(raw)
        except ValueError:
            self._drop(suffix)
            return None

    def _drop(self, suffix: str, field: bytes | str | None = None) -> None:
        """Forget an unreadable state key (or one field of a hash): it is rebuildable."""
        key = self.base + suffix
        log.warning(
            "scan_state_unreadable",
            key=key,
            field=as_text(field, "replace") if field else None,
        )
        if field is None:
            self.redis.delete(key)
        else:
            self.redis.hdel(key, field)

    def record(self, report: ScanReport) -> None:
        """Store ``report``'s summary as the last scan, with ``in_sync_at``: the start of the
        last clean scan (kept from the previous record when this one was not clean). A failed
        scan (``error``) compared nothing: it keeps the previous record's ``outdated``, the
        documents still to be read again (``ncindex status``'s "extraction:" line)."""
        summary = report.summary()
        previous = self.last() or {}
        summary["in_sync_at"] = (
            int(report.started_at) if report.clean else previous.get("in_sync_at")
        )
        if report.error is not None:
            summary["outdated"] = previous.get("outdated", 0)
        self.redis.hset(self.last_scans, self.field, json.dumps(summary))


# --- sources -------------------------------------------------------------------------------


def scan_types() -> list[DocType]:
    """The doc types with a source to list (:data:`ncindex.sources.registry.SOURCES`), in a
    stable order."""
    return [t for t in DocType if t in SOURCES]


def forget_tried(client: redis.Redis, keys: Names, user: str) -> None:
    """Forget, for every doc type, the versions ``user``'s scans sent index tasks for
    (:meth:`ScanState.tried`): called when a task of ``user``'s was refused or held back
    (``NextcloudAuthError``: a 401, a disabled account, :class:`~ncindex.errors.AccountHeld`),
    which indexed nothing, so that the next scan that gets through sends those documents again
    instead of holding them as unindexable for :data:`RETRY_UNINDEXABLE_SECONDS`. Counted
    per doc type (``<base>:forgotten``), so that a scan that read its tried versions before
    this and records them after it (:meth:`ScanState.set_tried`) does not write them back.
    Raises ``redis.RedisError``."""
    pipe = client.pipeline()
    for t in scan_types():
        base = ScanState(client, user, t, keys).base
        pipe.incr(base + FORGOTTEN)
        pipe.delete(base + ":tried")
    pipe.execute()


def enabled_scan_types(settings: Settings) -> list[DocType]:
    """:func:`scan_types` but those ``settings.reconcile_disable`` turns off."""
    return [t for t in scan_types() if t.value not in settings.reconcile_disable]


# --- tag rules -----------------------------------------------------------------------------


@dataclass(slots=True)
class TagState:
    """What the gate and excluded tags (case-folded ``names``) carry now for one user:
    ``members`` tag name → file ids (one ``REPORT oc:filter-files`` per tag)."""

    names: frozenset[str]
    members: dict[str, set[int]]

    def now(self, doc_id: str) -> tuple[str, ...]:
        """The configured tags document ``doc_id`` carries now, sorted."""
        return tuple(sorted(n for n, ids in self.members.items() if int(doc_id) in ids))

    def indexed(self, entry: ManifestEntry) -> tuple[str, ...]:
        """The configured tags the document was indexed with, sorted."""
        return tuple(sorted({t.casefold() for t in entry.tags} & self.names))

    def version(self, doc_id: str, etag: str) -> str:
        """``etag``, with the configured tags it carries now appended (``etag|a,b``): a
        document tried before counts as another version once its tags change."""
        now = self.now(doc_id)
        return f"{etag}|{','.join(now)}" if now else etag


# --- the reconciler ------------------------------------------------------------------------


class Pages(Protocol):
    """Where a listing paged over several tasks is kept between them
    (:class:`ncindex.sync.paging.ListingPages`)."""

    def first(self) -> bool:
        """Whether no page is kept: the next page starts the listing."""
        ...

    def next(
        self, source: Source, ctx: Services, client: NextcloudClient, state: ScanState
    ) -> tuple[Listing, Listing | None]:
        """List the next page; returns it, and the whole listing once it is complete
        (``None`` while not: the page was kept for the next task)."""
        ...

    def pages(self) -> int:
        """Pages listed so far, the last one included."""
        ...

    def discard(self) -> None:
        """Forget the pages kept (the scan is over, or must start again)."""
        ...


class Reconciler:
    """Runs scans on one process's :class:`Services`; ``producer`` sends the tasks (a Celery
    app). The Celery tasks and ``ncindex reconcile`` both call :meth:`scan`."""

    def __init__(self, services: Services, indexer: Indexer, producer: Producer | None) -> None:
        self.services = services
        self.settings: Settings = services.settings
        self.indexer = indexer
        self.producer = producer

    def scan(
        self, user: str, doc_type: DocType | str, *, apply: bool = True, pages: Pages | None = None
    ) -> ScanReport:
        """Scan ``user``'s documents of ``doc_type``; with ``apply`` enqueue the changes and
        advance the stored state, else only report. Raises :class:`UnsupportedDocType`.

        With ``pages`` (applied scans only: the ``ncindex.reconcile_scan`` task) one call
        lists one page: while the listing is unfinished the page is kept in ``pages`` and the
        report is ``partial`` — nothing is compared, enqueued or committed, so nothing is
        ever removed on a partial listing; the call that lists the last page compares the
        whole listing. The manifest is read before the first page (a listing of one page
        is judged as without ``pages``), or after the last page of several: a document
        indexed since the listing began is then not judged missing. A failed page discards
        the pages kept, unless the failure is transient (Nextcloud or the store briefly
        unavailable): the next scan resumes there."""
        doc_type = DocType(doc_type)
        source = SOURCES.get(doc_type)
        if source is None:
            raise UnsupportedDocType(doc_type.value)
        if apply and self.producer is None:
            raise ValueError("a producer is needed to apply a scan")
        if pages is not None and not apply:
            raise ValueError("a paged scan is applied")
        started = time.time()
        clock = time.monotonic()
        report = ScanReport(user, doc_type.value, started, apply)
        state = ScanState(self.services.redis, user, doc_type, self.settings.names)
        rules = self.indexer.eligibility.fingerprint()
        log_ = log.bind(user=user, doc_type=doc_type.value)
        try:
            manifest = None
            if pages is None or pages.first():
                manifest = load_manifest(self.services.store, user, doc_type)
                before = (state.last() or {}).get("indexed")
                if apply and not manifest and before:
                    # the last scan found documents indexed and the index holds none now (a
                    # new or wiped store): unchanged etags must not skip their folders
                    state.forget_listing()
                    log_.info("reconcile_index_emptied", indexed_before=before)
                    everything = models.Filter(must=[acl_condition(user)])
                    if not self.services.store.count(everything):
                        # nothing of the user's is left: what follows is a first indexing again
                        Progress(self.services.redis, self.settings.names).restart_first_indexing(
                            user
                        )
                if apply and source.ruled and state.rules() not in (None, rules):
                    # the index rules changed since the last listing: a file or note they
                    # left out may be indexable now, in a folder whose etag did not change
                    state.forget_listing()
                    log_.info("reconcile_rules_changed")
            account = self.services.account(user, clears=apply)  # a dry run writes nothing
            if pages is None:
                listing = source.list(self.services, account, state)
            else:
                page, whole = pages.next(source, self.services, account, state)
                report.pages = pages.pages()
                if whole is None:
                    return self._partial(report, page, clock, log_)
                listing = whole
                if listing.since is not None:  # listed by several tasks: the scan began then
                    report.started_at = listing.since
                    report.seconds = started - listing.since
            if manifest is None:  # the listing took several tasks: read it now
                manifest = load_manifest(self.services.store, user, doc_type)
            report.indexed = len(manifest)
            tags = self._tags(account, listing, state, source, apply)
        except NotFound as exc:
            if source.app is None:  # the user's files root itself: a real failure
                report.error = f"{type(exc).__name__}: {exc}"
            else:  # the app is not installed (or not enabled for the user)
                report.unavailable = str(exc)
            report.seconds += time.monotonic() - clock
            if pages is not None:
                pages.discard()
            log_.warning("reconcile_listing_unavailable", error=str(exc))
            if apply:
                state.record(report)
            return report
        except NcindexError as exc:
            report.error = f"{type(exc).__name__}: {exc}"
            report.retryable = isinstance(exc, TransientError)
            report.seconds += time.monotonic() - clock
            if pages is not None and not isinstance(exc, TransientError):
                pages.discard()
            log_.warning("reconcile_listing_failed", error=report.error)
            if apply:  # a dry run records nothing, a refusal neither
                if isinstance(exc, NextcloudAuthError):
                    self._deleted(report, self.services.account_refused(user, exc))
                state.record(report)
            return report
        if apply:  # the account got through: not refused
            clear_refused(self.services.redis, self.settings.names, user)
        report.requests = listing.requests
        report.listed = len(listing.docs)
        report.forbidden = len(listing.forbidden)
        report.unreachable = len(listing.unreachable)
        tried = self._compare(report, listing, manifest, state, apply, tags, source.extracts)
        if apply:
            report.enqueued, report.coalesced = self._enqueue(
                user, report.index + report.reread + report.remove, doc_type
            )
            # only once they are queued: a failed publish must not mark them tried
            state.set_tried(tried)
            source.commit(state, listing, self._dirty(report), report.clean)
            if source.ruled:
                state.set_rules(rules)
            if listing.skipped is not None:  # a listing that classified what it listed
                Progress(self.services.redis, self.settings.names).record_skips(
                    user,
                    listing.skipped,
                    (node_subject(doc_id) for doc_id in listing.docs),
                    full=listing.full_walk,
                )
            if pages is not None:
                pages.discard()
            if manifest and not report.index and not report.unindexable:
                self._found_indexed(user)
        report.seconds += time.monotonic() - clock
        if apply:
            state.record(report)
        log_.info("reconcile_scan", **report.summary())
        return report

    def _deleted(self, report: ScanReport, known: Lookup | None) -> None:
        """The account was refused: ask Nextcloud whether its user was deleted, and forget
        them if so (:func:`ncindex.sync.deleted.check_deleted`; ``known``: what the refusal's
        own lookup of the user got, read instead of asking again); the outcome goes into
        ``report``. A store or Redis failure here is logged: the next refused scan asks
        again."""
        try:
            found, report.forgotten = check_deleted(
                self.services, self.indexer, report.user, known=known
            )
        except (redis.RedisError, NcindexError) as exc:
            log.warning("user_deleted_not_checked", user=report.user, error=str(exc))
            report.user_deleted = Deleted.UNKNOWN.value
            return
        report.user_deleted = found.value

    def _found_indexed(self, user: str) -> None:
        """A scan found ``user``'s documents indexed and sent nothing to index: when nothing
        is recorded of their first indexing (a Redis restarted empty), record it done with
        the documents the index holds for them (:meth:`Progress.found_indexed`), each counted
        once (:func:`~ncindex.store.queries.document_counts`: a document whose new version
        is being written beside its old has two first chunks). The count is taken only when
        nothing is recorded, so once per user after Redis lost its data, not per scan. A
        failure here is only logged: what shows progress must not fail a scan."""
        progress = Progress(self.services.redis, self.settings.names)
        try:
            if not progress.first_indexing_unknown(user):
                return
            flt = first_chunks(acl_condition(user))
            held = sum(document_counts(self.services.store, "doc_type", flt).values())
            if progress.found_indexed(user, held):
                log.info("first_indexing_found_done", user=user, documents=held)
        except (redis.RedisError, NcindexError) as exc:
            log.warning("first_indexing_not_recorded", user=user, error=str(exc))

    @staticmethod
    def _partial(report: ScanReport, page: Listing, clock: float, log_: Any) -> ScanReport:
        """The report of a page that left the listing unfinished (nothing recorded)."""
        report.partial = True
        report.requests = page.requests
        report.listed = len(page.docs)
        report.seconds = time.monotonic() - clock
        log_.info(
            "reconcile_scan_page",
            pages=report.pages,
            requests=report.requests,
            listed=report.listed,
            seconds=round(report.seconds, 3),
        )
        return report

    # --- tag rules -------------------------------------------------------------------------

    def _tags(
        self,
        client: NextcloudClient,
        listing: Listing,
        state: ScanState,
        source: Source,
        apply: bool,
    ) -> TagState | None:
        """For the doc types the index rules apply to (files and notes), when tag rules are
        set: the current members of each gate and excluded tag (one ``PROPFIND`` of the
        system tags, one ``REPORT`` per tag; a tag's change fires an event but changes no
        etag, so a lost one is found here, not by the walk), and what the source lists of
        them (:meth:`~ncindex.sources.base.Source.add_tagged`: files newly eligible wherever
        their folder). ``None`` without tag rules or for other doc types."""
        rules = self.indexer.eligibility
        names = rules.required_tags | rules.excluded_tags
        if not names or not source.ruled:
            return None
        ids = client.system_tag_ids()
        listing.requests += 1
        tagged: dict[str, dict[int, DavEntry]] = {}
        for name in sorted(names):
            tagged[name] = client.tagged(ids[name]) if name in ids else {}
            listing.requests += name in ids
        source.add_tagged(self.services, client, listing, state, tagged, apply)
        return TagState(frozenset(names), {n: set(e) for n, e in tagged.items()})

    # --- comparing -------------------------------------------------------------------------

    def _compare(
        self,
        report: ScanReport,
        listing: Listing,
        manifest: dict[str, ManifestEntry],
        state: ScanState,
        apply: bool,
        tags: TagState | None = None,
        extracts: bool = False,
    ) -> dict[str, tuple[str, float]]:
        """Fill ``report`` from ``listing`` against ``manifest``; returns the versions an index
        task is sent for now or was before (for :meth:`ScanState.set_tried`, once queued).
        With ``extracts`` (the source's :attr:`~ncindex.sources.base.Source.extracts`), the
        documents an older extraction read are sent too (:meth:`_outdated`).
        With ``tags`` (tag rules set), an indexed document whose gate or excluded tags differ
        from its payload ``tags`` is re-checked (reason ``tags``), and a version tried before
        counts as another one once its tags change."""
        now = time.time()
        tried_before = state.tried()
        lost = state.lost()
        tried: dict[str, tuple[str, float]] = {}
        for doc_id, entry in manifest.items():
            seen_at = listing.docs.get(doc_id)
            if tags is None or (seen_at is None and not listing.covers(entry.path)):
                continue
            if tags.indexed(entry) != tags.now(doc_id):
                path = seen_at.path if seen_at is not None else entry.path
                if seen_at is None or seen_at.etag in (None, entry.etag):
                    report.index.append(Change(doc_id, "tags", path, entry.path))
        retagged = {c.doc_id for c in report.index}
        for doc_id, seen in listing.docs.items():
            if doc_id in retagged:
                continue
            version = seen.etag
            if tags is not None and version is not None:
                version = tags.version(doc_id, version)
            indexed = manifest.get(doc_id)
            if indexed is None:
                change = Change(doc_id, "new", seen.path)
            elif seen.etag is not None and seen.etag != indexed.etag:
                report.index.append(Change(doc_id, "changed", seen.path, indexed.path))
                continue
            elif seen.path is not None and not seen.at(indexed.path):
                report.index.append(Change(doc_id, "moved", seen.path, indexed.path))
                continue
            else:
                continue
            etag, at = tried_before.get(doc_id, (None, 0.0))
            if (
                etag is not None
                and doc_id not in lost  # lost access is never held: only what failed
                and (version is None or etag == version)
                and now - at < RETRY_UNINDEXABLE_SECONDS
            ):
                report.unindexable.append(change)
                tried[doc_id] = (etag, at)
            else:
                report.index.append(change)
                tried[doc_id] = (version or "", now)
        missing = [
            Change(doc_id, "missing", None, entry.path)
            for doc_id, entry in manifest.items()
            if doc_id not in listing.docs
            and not listing.covers(entry.path)
            and not listing.indexed_since(entry)
        ]
        previous = state.missing_since()
        since = {c.doc_id: previous.get(c.doc_id, now) for c in missing}
        grace = self.settings.reconcile_grace_seconds
        for change in missing:
            (report.remove if now - since[change.doc_id] >= grace else report.waiting).append(
                change
            )
        if apply:
            state.set_missing(since)
            # back in the user's index, and listed: the loss is repaired
            state.forget_lost(
                i
                for i in lost
                if i in manifest and (i in listing.docs or listing.covers(manifest[i].path))
            )
        self._guard(report, listing, manifest, state, apply)
        if extracts:
            self._outdated(report, listing, manifest, tried_before, tried, now)
        return tried

    def _outdated(
        self,
        report: ScanReport,
        listing: Listing,
        manifest: dict[str, ManifestEntry],
        tried_before: dict[str, tuple[str, float]],
        tried: dict[str, tuple[str, float]],
        now: float,
    ) -> None:
        """Send the indexed documents an older extraction read to be read again
        (``report.reread``, reason ``extractor``; :func:`~ncindex.text.versions.outdated`),
        whatever their etags say: those the listing found unchanged or left below a skipped
        folder, not those it misses (judged missing), nor those below a folder whose storage
        does not answer, nor those already sent for another reason. Paced: a document sent is
        noted in ``tried`` (``"extractor <etag>"``, with the time) and not sent again for
        :data:`RETRY_UNINDEXABLE_SECONDS` while it stays outdated (its task still queued, or
        failed); at most ``reconcile_page_requests`` are in flight per user and doc type
        (each costs Nextcloud a look-up by id and a download: about as much as a page of the
        listing), the longest indexed first — but those sent before and still outdated when
        their hold ended (a task that failed, a worker of the previous release) after all
        that were never sent, their mark kept until they are sent again: otherwise, being
        the longest indexed, that many documents that never take would be the only ones sent.
        A scan of a release that bumped a format thus re-reads that many documents of the
        user, and the next scans the rest. ``tried`` is :meth:`_compare`'s, written once the
        tasks are queued."""
        busy = {c.doc_id for c in report.index + report.remove + report.waiting + report.held}
        held = 0
        due: list[tuple[bool, int, str, ManifestEntry]] = []
        for doc_id, entry in manifest.items():
            if doc_id in busy or not outdated(
                entry.extractor, entry.extractor_version, entry.mime_type, entry.path
            ):
                continue
            if doc_id not in listing.docs and (
                entry.path is None
                or not listing.covers(entry.path)
                or any(folder in listing.unreachable for folder in ancestors(entry.path))
            ):
                continue
            report.outdated += 1
            mark = f"{REREAD}{entry.etag or ''}"
            etag, at = tried_before.get(doc_id, (None, 0.0))
            again = etag == mark
            if again:  # kept: held while recent, and after the others once the hold ends
                tried[doc_id] = (mark, at)
                if now - at < RETRY_UNINDEXABLE_SECONDS:
                    held += 1
                    continue
            due.append((again, entry.indexed_at or 0, doc_id, entry))
        room = max(0, self.settings.reconcile_page_requests - held)
        for _, _, doc_id, entry in sorted(due)[:room]:
            report.reread.append(Change(doc_id, "extractor", entry.path, entry.path))
            tried[doc_id] = (f"{REREAD}{entry.etag or ''}", now)

    def _guard(
        self,
        report: ScanReport,
        listing: Listing,
        manifest: dict[str, ManifestEntry],
        state: ScanState,
        apply: bool,
    ) -> None:
        """Hold the removals of an empty listing, or a mass removal, until a second scan
        agrees (each removal is then a re-check by id, which evicts only what Nextcloud says
        is gone): one glitch never evicts, a revoked share is not kept for good."""
        if not report.remove:
            if apply:
                state.set_held(None)
            return
        limit = max(
            self.settings.reconcile_guard_min_docs,
            self.settings.reconcile_max_removal_share * len(manifest),
        )
        if listing.empty(manifest):
            report.guard = "empty_listing"
        elif len(report.remove) > limit:
            report.guard = "mass_removal"
        else:
            if apply:
                state.set_held(None)
            return
        previous = state.held()
        if previous is None:
            report.held, report.remove = report.remove, []
            if apply:
                state.set_held(c.doc_id for c in report.held)
            log.warning(
                "reconcile_removals_held",
                guard=report.guard,
                user=report.user,
                doc_type=report.doc_type,
                removals=len(report.held),
                indexed=len(manifest),
            )
            return
        agreed = [c for c in report.remove if c.doc_id in previous]
        report.held = [c for c in report.remove if c.doc_id not in previous]
        report.remove = agreed
        if apply:
            state.set_held(c.doc_id for c in report.held)

    @staticmethod
    def _dirty(report: ScanReport) -> set[str]:
        """Every folder at or above a path that needed work, was waiting, held, or could not
        be indexed (so it is listed again and retried once its retry time has come)."""
        dirty: set[str] = set()
        changes = report.index + report.remove + report.waiting + report.held + report.unindexable
        for change in changes:
            for path in (change.path, change.indexed_path):
                if path:
                    dirty.update(ancestors(posixpath.dirname(path)))
        return dirty

    # --- enqueueing ------------------------------------------------------------------------

    def _enqueue(self, user: str, changes: list[Change], doc_type: DocType) -> tuple[int, int]:
        """Send each change's task now (once per document); a task already pending for the
        same document (a webhook's, or another scan's) takes it instead. The debounce keys
        live one scan period (at least 60 s). Returns ``(queued, coalesced)``."""
        assert self.producer is not None
        period = self.settings.reconcile_periods.get(doc_type.value, 900)
        actions: list[Action] = []
        keys: set[str] = set()
        for change in changes:
            action = reindex_action(user, doc_type, change.doc_id)
            if action.debounce_key in keys:
                continue
            if action.debounce_key:
                keys.add(action.debounce_key)
            actions.append(action)
        return send_actions(
            self.producer,
            self.services.redis,
            actions,
            keys=self.settings.names,
            countdown=None,
            key_seconds=max(60, int(period)),
            batch_docs=self.settings.index_batch_docs,
        )


# --- requesting scans ----------------------------------------------------------------------


@contextlib.contextmanager
def scan_lock(
    client: redis.Redis, keys: Names, user: str, doc_type: DocType | str, *, ttl: int, wait: float
) -> Iterator[bool]:
    """The per-user, per-doc-type scan lock (``<namespace>:lock:reconcile:<type>:<user>``)
    that the ``ncindex.reconcile_scan`` task and ``ncindex reconcile --apply`` both take, so
    two scans of one user and type never run at once. Yields ``True`` once held (it expires
    after ``ttl`` seconds — the callers pass ``Settings.lock_ttl``, which the settings keep
    above the task hard limit — and is released on exit), or
    ``False`` when another scan still held it after ``wait`` seconds (``0``: do not wait):
    :func:`ncindex.index.locks.hold`."""
    with hold(
        client, keys.lock("reconcile", DocType(doc_type).value, user), ttl=ttl, wait=wait
    ) as held:
        yield held


def scan_lock_seconds(
    client: redis.Redis, keys: Names, user: str, doc_type: DocType | str
) -> float:
    """Seconds until the scan lock of :func:`scan_lock` expires (``0.0`` when it is free)."""
    ttl = client.pttl(keys.lock("reconcile", DocType(doc_type).value, user))
    return max(0.0, ttl / 1000)


def last_scans_key(keys: Names) -> str:
    """The hash of the last scans' summaries (field ``<user>:<doc_type>``)."""
    return keys.last_scans


def pending_key(keys: Names, user: str, doc_type: DocType | str) -> str:
    """Redis key marking a scan of ``user`` and ``doc_type`` as queued but not yet started."""
    return keys.scan_pending(DocType(doc_type).value, user)


#: How long the scans queued by :func:`rescan_if_forgotten` and :func:`rescan_if_due` stay
#: marked pending, seconds.
FORGOTTEN_PENDING_SECONDS = 600


def rescan_if_forgotten(producer: Producer, client: redis.Redis, settings: Settings) -> int:
    """Queue a scan of every account and doc type when this deployment's Redis no longer holds
    its marker (:attr:`~ncindex.names.Names.remembered`): a first start, or a Redis restarted
    empty — the queued, debounced and retried tasks and the scan state are gone with it, and
    Nextcloud never delivers a webhook twice. Sets the marker first (``SET NX``), so one
    process queues the scans. Returns how many were queued (0 while the marker is there).
    Raises ``redis.RedisError``."""
    if not client.set(settings.names.remembered, int(time.time()), nx=True):
        return 0
    queued = _scan_everyone(producer, client, settings)
    log.warning("redis_without_state_rescanning", scans=queued)
    return queued


_TAKE_IF_DUE = """
local due = tonumber(redis.call('GET', KEYS[1]))
if due and due <= tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""


def rescan_if_due(
    producer: Producer, client: redis.Redis, settings: Settings, now: float | None = None
) -> int:
    """Queue a scan of every account and doc type when the due time a first webhook
    registration left (:attr:`~ncindex.names.Names.rescan_due`,
    :func:`ncindex.ingest.registration.rescan_once_listening`) has come by ``now`` (Unix
    seconds; default the clock). The due time is taken (read and deleted) in one script, so
    one of several beats queues the scans and a due time set meanwhile is not lost. Returns how
    many were queued. Raises ``redis.RedisError``."""
    now = time.time() if now is None else now
    if not client.eval(_TAKE_IF_DUE, 1, settings.names.rescan_due, str(now)):
        return 0
    queued = _scan_everyone(producer, client, settings)
    log.info("listening_rescan", scans=queued)
    return queued


def _scan_everyone(producer: Producer, client: redis.Redis, settings: Settings) -> int:
    """Queue a scan of every account and enabled doc type, marked pending for
    :data:`FORGOTTEN_PENDING_SECONDS`; returns how many were queued."""
    return request_scans(
        producer,
        client,
        list(settings.accounts),
        enabled_scan_types(settings),
        FORGOTTEN_PENDING_SECONDS,
        keys=settings.names,
    )


def request_scans(
    producer: Producer,
    client: redis.Redis,
    users: Iterable[str],
    doc_types: Iterable[DocType | str],
    pending_seconds: int,
    *,
    keys: Names,
) -> int:
    """Queue one ``ncindex.reconcile_scan`` per user and doc type on the ``reconcile`` queue,
    unless one is already queued (a pending marker lives ``pending_seconds`` or until the scan
    starts). Returns how many were queued."""
    queued = 0
    for doc_type in doc_types:
        for user in users:
            key = pending_key(keys, user, doc_type)
            if not client.set(key, 1, nx=True, ex=max(1, int(pending_seconds))):
                continue
            producer.send_task(
                names.RECONCILE_SCAN,
                kwargs={"user": user, "doc_type": DocType(doc_type).value, "pending_key": key},
                queue=names.RECONCILE,
            )
            queued += 1
    return queued
