"""Reconciliation scans: bring the index in line with Nextcloud per user and doc type (DESIGN §7).

Webhooks are delivered at most once, share changes fire none, and a folder operation fires one
event for the folder only, so periodic scans are part of correctness. One scan of one user and
doc type:

1. reads the index manifest first (:mod:`ncindex.store.manifest`): a document indexed after that
   read cannot look "missing" to this scan;
2. pages through the source listing — WebDAV PROPFIND ``Depth: 1`` walk for files, skipping
   every folder whose etag is unchanged since the last clean scan (a folder's etag changes
   when anything below it changes, share mounts included); the Notes list with
   ``pruneBefore`` and the chunk cursor for notes (only the last chunk lists every id);
3. compares: a listed document not in the manifest is *new* (or newly shared: the user is
   not yet in its ``acl``), one with another etag is *changed*, one at another path *moved*;
   a manifest document not listed (and not below a skipped folder) is *missing*;
4. enqueues ``ncindex.index_node`` for each — the task re-reads the document by id, so it
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
dirty, so it keeps being listed.

Whatever takes a user's access away (a re-check by id after a verification drop, a scan or a
delete event; :meth:`ncindex.index.indexing.Indexer.remove_access`) marks the document for that
user's scans (:meth:`ScanState.lost`): until it is back in the user's index, each file scan walks
the folders above its last path whatever their etags say (a share given back, or an access rule
lifted, may change none), a notes scan lists every note, and no scan holds it back as
unindexable — that hold is only for documents a task could not make text of.

A file scan skips folders whose etag is unchanged, except once every
``reconcile_full_walk_seconds`` (a day by default), when it walks them all: what changes no
folder etag (a system tag whose webhook was lost, a document lost from the index) is repaired
then. A document listed at two paths (a file inside two nested shares) counts as moved only
when the index holds neither.

Redis holds only what can be rebuilt (:class:`ScanState`): folder etags and ``pruneBefore``
(losing them costs one full listing), the missing-since times (losing them restarts the grace
period), held removals (losing them holds again) and the last scan reports. Scan state is only
advanced by a *clean* scan part — a folder's etag is kept only when nothing below it needed
work, ``pruneBefore`` only when nothing did — so a task that failed after a scan is retried by
the next scan instead of being hidden behind an unchanged etag.

Every doc type has a :class:`Scanner` in :data:`SCANNERS`: files and notes as above, Deck
cards (boards, then each live board's stacks) and News items (one list of every item); the
last two have no paths and keep no scan state.

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
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, TypeVar

import redis
import structlog

from ncindex import names
from ncindex.accounts import clear_refused, record_refused
from ncindex.documents import DocType
from ncindex.errors import (
    Forbidden,
    NcindexError,
    NextcloudAuthError,
    NextcloudProtocolError,
    NotFound,
    TransientError,
    UnsupportedDocType,
)
from ncindex.index.indexing import Indexer
from ncindex.ingest.events import Action, is_id
from ncindex.ingest.events import index_document as index_document_action
from ncindex.ingest.events import index_node as index_node_action
from ncindex.ingest.queueing import Producer, send_actions
from ncindex.names import Names
from ncindex.nextcloud.apps import DECK_API, DECK_HEADERS
from ncindex.nextcloud.client import NOTES_API, NextcloudClient, json_list
from ncindex.nextcloud.webdav import DavEntry
from ncindex.progress import Progress, node_subject
from ncindex.runtime import Services
from ncindex.sources import news_item
from ncindex.store.manifest import ManifestEntry, load_manifest
from ncindex.strict_json import finite_float

log = structlog.get_logger(__name__)
_T = TypeVar("_T")

"""Redis hash ``"{user}:{doc_type}"`` → JSON summary of the last scan (``ncindex status``)."""
RETRY_UNINDEXABLE_SECONDS = 86_400
"""A document listed but not indexed after a task was sent for its version is sent again
after this long (or as soon as its etag changes)."""


# --- listings and reports ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Seen:
    """A document as the source listing shows it. ``etag`` and ``path`` are ``None`` when the
    listing gave the id only (Notes ``pruneBefore``: unchanged since the last clean scan)."""

    doc_id: str
    etag: str | None
    path: str | None
    #: further paths the same document is listed at (a file inside two nested shares)
    also_at: tuple[str, ...] = ()

    def at(self, path: str | None) -> bool:
        """Whether the listing shows the document at ``path``."""
        return path == self.path or path in self.also_at


@dataclass(slots=True)
class Listing:
    """What one scan listed: ``docs`` by id; ``covered`` folders skipped because their etag
    is unchanged (manifest documents below them count as present and unchanged);
    ``folders`` the visited folders' etags; ``marker`` the type's resume point (Notes
    ``pruneBefore``); ``requests`` made to Nextcloud; ``forbidden`` folders the user may not
    list (``PROPFIND`` 403: Sabre ``Directory::getChildren`` throws ``Forbidden`` for a folder
    without read permission): skipped, what is indexed below them counts as missing;
    ``skipped`` the listed files a rule leaves out (subject → rule, files only); ``cursor``
    where a listing stopped at its request limit (JSON-able, in the scanner's own shape: the
    folders left to list, the Notes chunk cursor), ``None`` once it is complete; ``since``
    the Unix time a listing paged over several tasks began (:mod:`ncindex.sync.paging`),
    ``None`` for a listing made in one go."""

    docs: dict[str, Seen] = field(default_factory=dict)
    forbidden: list[str] = field(default_factory=list)
    covered: set[str] = field(default_factory=set)
    folders: dict[str, str] = field(default_factory=dict)
    marker: int | None = None
    requests: int = 0
    full_walk: bool = False
    skipped: dict[str, str] = field(default_factory=dict)
    cursor: Any = None
    since: float | None = None

    def covers(self, path: str | None) -> bool:
        """True when ``path`` lies in (or is) a skipped, unchanged folder."""
        if path is None or not self.covered:
            return False
        return any(folder in self.covered for folder in ancestors(path))

    def indexed_since(self, entry: ManifestEntry) -> bool:
        """True when the listing was paged (``since`` set) and ``entry`` was indexed after it
        began: a document written meanwhile may lie in a folder listed before it came."""
        return (
            self.since is not None
            and entry.indexed_at is not None
            and entry.indexed_at >= int(self.since)
        )

    def empty(self, manifest: dict[str, ManifestEntry]) -> bool:
        """Nothing listed, and no indexed document below a skipped folder (an unchanged
        folder holding nothing indexed does not make a listing that lost everything count)."""
        return not self.docs and not any(self.covers(e.path) for e in manifest.values())


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
    pages: int = 1
    partial: bool = False

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
        for change in self.index + self.remove:
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
            "pages": self.pages,
            "partial": self.partial,
        }

    def to_json(self) -> dict[str, Any]:
        """The summary plus every change (for ``ncindex reconcile``)."""
        out = self.summary()
        for name in ("index", "remove", "waiting", "held", "unindexable"):
            out[name] = [asdict(c) for c in getattr(self, name)]
        return out


def ancestors(path: str) -> list[str]:
    """``path`` and every folder above it: ``/a/b.md`` → ``["/a/b.md", "/a", "/"]``."""
    out = [path]
    while path not in ("/", ""):
        path = posixpath.dirname(path)
        out.append(path)
    return out


# --- state in Redis ------------------------------------------------------------------------


class ScanState:
    """One user's and doc type's rebuildable scan state in Redis (see the module docstring)."""

    def __init__(self, client: redis.Redis, user: str, doc_type: DocType, keys: Names) -> None:
        self.redis = client
        self.base = f"{keys.reconcile_prefix}{doc_type.value}:{user}"
        self.lost_key = keys.lost_access(doc_type.value, user)
        self.last_scans = last_scans_key(keys)
        self.field = f"{user}:{doc_type.value}"

    def folders(self) -> dict[str, str]:
        """Folder path → etag at the last clean visit."""
        return {
            k.decode(): v.decode() for k, v in self.redis.hgetall(self.base + ":folders").items()
        }

    def set_folders(self, folders: dict[str, str]) -> None:
        """Replace the folder etags."""
        key = self.base + ":folders"
        pipe = self.redis.pipeline()
        pipe.delete(key)
        if folders:
            pipe.hset(key, mapping=folders)
        pipe.execute()

    def full_walk_at(self) -> float | None:
        """Unix time of the last walk of every folder (files), if recorded and readable."""
        return self._scalar(":full_walk", finite_float)

    def set_full_walk_at(self, at: float) -> None:
        """Record a walk of every folder at ``at`` (Unix seconds)."""
        self.redis.set(self.base + ":full_walk", repr(float(at)))

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
                out[k.decode()] = finite_float(v)
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
        for documents not in the index then (``""``: etag not listed)."""
        out: dict[str, tuple[str, float]] = {}
        for k, v in self.redis.hgetall(self.base + ":tried").items():
            etag, _, ts = v.decode("utf-8", "replace").rpartition("|")
            try:
                out[k.decode()] = (etag, finite_float(ts or "0"))
            except ValueError:
                self._drop(":tried", k)  # the document is simply sent again
        return out

    def set_tried(self, tried: dict[str, tuple[str, float]]) -> None:
        """Replace the tried versions."""
        key = self.base + ":tried"
        pipe = self.redis.pipeline()
        pipe.delete(key)
        if tried:
            pipe.hset(key, mapping={k: f"{e}|{t}" for k, (e, t) in tried.items()})
        pipe.execute()

    def lost(self) -> dict[str, str]:
        """Document id → the path (``""``: unknown) of documents whose access the user lost
        (:meth:`ncindex.index.indexing.Indexer.mark_lost`), until they are back in the index."""
        return {
            k.decode(): v.decode("utf-8", "replace")
            for k, v in self.redis.hgetall(self.lost_key).items()
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
            return self._drop(":held")
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

    def _scalar(self, suffix: str, parse: Callable[[bytes], _T]) -> _T | None:
        """The value at ``suffix`` as ``parse`` reads it; ``None`` when absent, or unreadable
        (``parse`` raised ``ValueError``; the key is then dropped)."""
        raw = self.redis.get(self.base + suffix)
        if raw is None:
            return None
        try:
            return parse(raw)
        except ValueError:
            return self._drop(suffix)

    def _drop(self, suffix: str, field: bytes | None = None) -> None:
        """Forget an unreadable state key (or one field of a hash): it is rebuildable."""
        key = self.base + suffix
        log.warning(
            "scan_state_unreadable",
            key=key,
            field=field.decode("utf-8", "replace") if field else None,
        )
        if field is None:
            self.redis.delete(key)
        else:
            self.redis.hdel(key, field)

    def record(self, report: ScanReport) -> None:
        """Store ``report``'s summary as the last scan, with ``in_sync_at``: the start of the
        last clean scan (kept from the previous record when this one was not clean)."""
        summary = report.summary()
        previous = self.last() or {}
        summary["in_sync_at"] = (
            int(report.started_at) if report.clean else previous.get("in_sync_at")
        )
        self.redis.hset(self.last_scans, self.field, json.dumps(summary))


# --- scanners ------------------------------------------------------------------------------


class Scanner(Protocol):
    """How one doc type is listed, what a change enqueues, and what state a scan keeps."""

    doc_type: DocType

    def list(
        self,
        reconciler: Reconciler,
        client: NextcloudClient,
        state: ScanState,
        resume: Listing | None = None,
        limit: int | None = None,
    ) -> Listing:
        """Page through the source listing; raise an ``NcindexError`` when it fails. With
        ``resume`` (a listing an earlier call stopped, its ``requests`` reset to 0), go on
        from its ``cursor`` into it; with ``limit``, stop once ``limit`` requests were made
        and more are needed, with ``cursor`` set (a scanner whose listing is a few requests
        may ignore both and always list in full)."""

    def action(self, user: str, doc_id: str) -> Action:
        """The task that brings one document of ``user`` in line (it re-reads Nextcloud)."""

    def commit(self, state: ScanState, listing: Listing, dirty: set[str], clean: bool) -> None:
        """Advance the stored state after an applied scan. ``dirty`` holds every folder with
        a change at or below it; ``clean`` says whether the whole scan was clean."""


class FileScanner:
    """Files: a PROPFIND ``Depth: 1`` walk that skips subtrees whose folder etag is unchanged.

    With the root's etag unchanged a scan costs one ``Depth: 0`` request. Entries are
    classified by :meth:`ncindex.index.indexing.Indexer.classify`: notes and unsupported files are
    left to their own scanner (or not indexed at all).
    """

    doc_type = DocType.FILE

    def list(
        self,
        reconciler: Reconciler,
        client: NextcloudClient,
        state: ScanState,
        resume: Listing | None = None,
        limit: int | None = None,
    ) -> Listing:
        """Walk the user's files breadth first, one folder per request; every folder when the
        last full walk is ``reconcile_full_walk_seconds`` old (or none is recorded). The
        cursor is the list of folders still to walk."""
        if resume is None:
            last_full = state.full_walk_at()
            listing = Listing()
            listing.full_walk = (
                last_full is None
                or time.time() - last_full >= reconciler.settings.reconcile_full_walk_seconds
            )
        else:
            listing = resume
        stored = {} if listing.full_walk else state.folders()
        # folders above a document whose access the user lost: walked whatever their etags
        # say, since a share given back or an access rule lifted may change none of them
        forced = {
            folder
            for path in state.lost().values()
            if path
            for folder in ancestors(posixpath.dirname(path))
        }
        if resume is None and "/" in stored and not forced:
            answer = client.propfind("/", depth=0)
            listing.requests += 1
            if not answer:
                raise NextcloudProtocolError("PROPFIND /: empty multistatus")
            if answer[0].etag == stored["/"]:
                listing.covered.add("/")
                return listing
        queue: deque[str] = deque(["/"] if resume is None else resume.cursor)
        listing.cursor = None
        while queue:
            if limit is not None and listing.requests >= limit:
                listing.cursor = list(queue)
                return listing
            folder = queue.popleft()
            if folder in listing.folders:
                continue  # listed already: an answer naming a folder twice, or a cycle
            try:
                entries = client.propfind(folder, depth=1)
            except NotFound:
                if folder == "/":
                    raise
                continue  # gone during the walk: what the index has there counts as missing
            except Forbidden:
                if folder == "/":
                    raise
                # a folder the user may not read (files_accesscontrol): the rest of the walk
                # goes on; what is indexed below it is missing, and its re-check by id finds
                # it unreadable and removes the user's access
                listing.forbidden.append(folder)
                continue
            finally:
                listing.requests += 1
            if not entries:
                raise NextcloudProtocolError(f"PROPFIND {folder}: empty multistatus")
            listing.folders[folder] = entries[0].etag
            for entry in entries[1:]:
                if entry.is_folder:
                    if stored.get(entry.path) == entry.etag and entry.path not in forced:
                        listing.covered.add(entry.path)
                    else:
                        queue.append(entry.path)
                    continue
                if entry.file_id is None:
                    continue
                ref, rule = reconciler.indexer.classification(client, entry)
                if ref is None and rule is not None:
                    listing.skipped[node_subject(entry.file_id)] = rule
                if ref is None or ref.doc_type is not DocType.FILE:
                    continue
                seen = listing.docs.get(ref.doc_id)
                if seen is None:
                    listing.docs[ref.doc_id] = Seen(ref.doc_id, entry.etag, entry.path)
                elif not seen.at(entry.path):
                    listing.docs[ref.doc_id] = replace(seen, also_at=(*seen.also_at, entry.path))
        return listing

    def action(self, user: str, doc_id: str) -> Action:
        """``ncindex.index_node`` for the file id."""
        return index_node_action(user, int(doc_id))

    def commit(self, state: ScanState, listing: Listing, dirty: set[str], clean: bool) -> None:
        """Keep the etags of skipped folders (and what is stored below them) and of every
        visited folder with nothing dirty at or below it."""
        stored = state.folders()
        keep = {p: e for p, e in stored.items() if listing.covers(p) and p not in dirty}
        keep.update({p: e for p, e in listing.folders.items() if p not in dirty})
        state.set_folders(keep)
        if listing.full_walk:
            state.set_full_walk_at(time.time())


class NoteScanner:
    """Notes: ``GET /notes?exclude=content&pruneBefore=…&chunkSize=…`` following the chunk
    cursor. Notes unchanged since the last clean scan come as ``{"id": N}``; only the last
    chunk lists every id, so deletions are judged on the whole sequence."""

    doc_type = DocType.NOTE

    def __init__(self, chunk_size: Callable[[Reconciler], int]) -> None:
        self._chunk_size = chunk_size

    def list(
        self,
        reconciler: Reconciler,
        client: NextcloudClient,
        state: ScanState,
        resume: Listing | None = None,
        limit: int | None = None,
    ) -> Listing:
        """Page through the Notes list. The cursor is the ``chunkCursor`` and
        ``pruneBefore`` parameters to go on with."""
        listing = Listing() if resume is None else resume
        params: dict[str, Any] = {
            "exclude": "content",
            "chunkSize": self._chunk_size(reconciler),
        }
        if resume is not None:
            params.update(resume.cursor)
        else:
            prune_before = state.marker()
            if prune_before is not None and not state.lost():  # a lost note lists in full
                params["pruneBefore"] = prune_before
        listing.cursor = None
        while True:
            if limit is not None and listing.requests >= limit:
                listing.cursor = {
                    k: params[k] for k in ("chunkCursor", "pruneBefore") if k in params
                }
                return listing
            response = client.request("GET", f"{NOTES_API}/notes", params=params)
            listing.requests += 1
            if listing.marker is None:
                listing.marker = _http_time(response.headers.get("Last-Modified"))
            for item in json_list(response):
                try:
                    doc_id = str(int(item["id"]))
                except (KeyError, TypeError, ValueError) as exc:
                    raise NextcloudProtocolError(f"note without id: {item!r}") from exc
                if "etag" in item:
                    listing.docs[doc_id] = Seen(doc_id, str(item["etag"]), item.get("internalPath"))
                else:
                    listing.docs.setdefault(doc_id, Seen(doc_id, None, None))
            cursor = response.headers.get("X-Notes-Chunk-Cursor")
            if not cursor:
                return listing
            if cursor == params.get("chunkCursor"):
                raise NextcloudProtocolError("the Notes chunk cursor did not move")
            params["chunkCursor"] = cursor

    def action(self, user: str, doc_id: str) -> Action:
        """``ncindex.index_node`` for the note's file id."""
        return index_node_action(user, int(doc_id))

    def commit(self, state: ScanState, listing: Listing, dirty: set[str], clean: bool) -> None:
        """Advance ``pruneBefore`` to this listing's ``Last-Modified``, only after a clean scan
        (otherwise the documents that needed work would be pruned from the next listing)."""
        if clean and listing.marker is not None:
            state.set_marker(listing.marker)


def _http_time(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(parsedate_to_datetime(value).timestamp())
    except (TypeError, ValueError):
        return None


class DeckScanner:
    """Deck cards: ``GET /boards``, then ``GET /boards/{id}/stacks`` per board that is not
    deleted (non-archived, non-deleted cards with their ``ETag``, the etag the indexer keeps).
    Cards have no paths; a missing card is re-read by id (Deck answers 403 once it is gone)."""

    doc_type = DocType.DECK_CARD

    def list(
        self,
        reconciler: Reconciler,
        client: NextcloudClient,
        state: ScanState,
        resume: Listing | None = None,
        limit: int | None = None,
    ) -> Listing:
        """One request for the boards and one per live board, always in full (``resume``
        and ``limit`` do not apply). A board that answers 404 or
        403 for its stacks (deleted or unshared since the board list) is skipped: its cards
        count as missing. Raises ``NextcloudProtocolError`` for JSON not shaped as Deck's."""
        listing = Listing()
        boards = _json_list(client, f"{DECK_API}/boards")
        listing.requests += 1
        for board in boards:
            if board.get("deletedAt"):
                continue
            board_id = _listed_id(board.get("id"), "Deck board")
            listing.requests += 1
            try:
                stacks = _json_list(client, f"{DECK_API}/boards/{board_id}/stacks")
            except (NotFound, Forbidden):
                continue
            for stack in stacks:
                cards = stack.get("cards") or []
                if not isinstance(cards, list):
                    raise NextcloudProtocolError(f"Deck board {board_id}: cards is not a list")
                for card in cards:
                    if not isinstance(card, dict):
                        raise NextcloudProtocolError(f"Deck board {board_id}: a card not an object")
                    if card.get("archived") or card.get("deletedAt"):
                        continue
                    doc_id = _listed_id(card.get("id"), "Deck card")
                    etag = card.get("ETag") or _listed_time(card.get("lastModified"), doc_id)
                    listing.docs[doc_id] = Seen(doc_id, str(etag), None)
        return listing

    def action(self, user: str, doc_id: str) -> Action:
        """``ncindex.index_document`` for the card."""
        return index_document_action(user, DocType.DECK_CARD.value, int(doc_id))

    def commit(self, state: ScanState, listing: Listing, dirty: set[str], clean: bool) -> None:
        """Nothing to keep: every scan lists every board."""


class NewsScanner:
    """News items: one ``GET /items?type=3&batchSize=-1&getRead=true`` (every item of every
    feed; News has no change feed and no webhooks). The etag is computed as
    :func:`ncindex.sources.news_item.item_document` computes it:
    ``"{lastModified}-{contentHash}"``."""

    doc_type = DocType.NEWS_ITEM

    def list(
        self,
        reconciler: Reconciler,
        client: NextcloudClient,
        state: ScanState,
        resume: Listing | None = None,
        limit: int | None = None,
    ) -> Listing:
        """One request for all items (``resume`` and ``limit`` do not apply)."""
        listing = Listing()
        items = news_item.list_items(client)
        listing.requests += 1
        for item in items:
            doc_id = _listed_id(item.get("id"), "News item")
            try:
                etag = news_item.news_etag(item)
            except (TypeError, ValueError) as exc:
                raise NextcloudProtocolError(f"News item {doc_id}: {exc}") from None
            listing.docs[doc_id] = Seen(doc_id, etag, None)
        return listing

    def action(self, user: str, doc_id: str) -> Action:
        """``ncindex.index_document`` for the item."""
        return index_document_action(user, DocType.NEWS_ITEM.value, int(doc_id))

    def commit(self, state: ScanState, listing: Listing, dirty: set[str], clean: bool) -> None:
        """Nothing to keep: every scan lists every item."""


def _listed_id(value: Any, what: str) -> str:
    """The id of a listed document as a string of ASCII digits
    (:func:`ncindex.ingest.events.is_id`);
    raises ``NextcloudProtocolError`` for anything else (missing, null, a float, a word)."""
    if not is_id(value):
        raise NextcloudProtocolError(f"{what} without a valid id: {value!r}")
    return str(int(value))


def _listed_time(value: Any, doc_id: str) -> int:
    """A listed ``lastModified`` (Unix seconds; missing ⇒ 0); raises
    ``NextcloudProtocolError`` for one that is not a number."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        raise NextcloudProtocolError(f"{doc_id}: lastModified {value!r} is not a time") from None


def _json_list(client: NextcloudClient, url: str) -> list[dict[str, Any]]:
    return json_list(client.request("GET", url, headers=DECK_HEADERS))


SCANNERS: dict[DocType, Scanner] = {
    DocType.FILE: FileScanner(),
    DocType.NOTE: NoteScanner(lambda r: r.settings.reconcile_notes_chunk_size),
    DocType.DECK_CARD: DeckScanner(),
    DocType.NEWS_ITEM: NewsScanner(),
}
"""The doc types that can be reconciled, each with its :class:`Scanner`."""


def scan_types() -> list[DocType]:
    """The doc types with a scanner, in a stable order."""
    return [t for t in DocType if t in SCANNERS]


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

    def next(
        self, scanner: Scanner, reconciler: Reconciler, client: NextcloudClient, state: ScanState
    ) -> tuple[Listing, Listing | None]:
        """List the next page; returns it, and the whole listing once it is complete
        (``None`` while not: the page was kept for the next task)."""

    def pages(self) -> int:
        """Pages listed so far, the last one included."""

    def discard(self) -> None:
        """Forget the pages kept (the scan is over, or must start again)."""


class Reconciler:
    """Runs scans on one process's :class:`Services`; ``producer`` sends the tasks (a Celery
    app). The Celery tasks and ``ncindex reconcile`` both call :meth:`scan`."""

    def __init__(self, services: Services, indexer: Indexer, producer: Producer | None) -> None:
        self.services = services
        self.settings = services.settings
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
        scanner = SCANNERS.get(doc_type)
        if scanner is None:
            raise UnsupportedDocType(doc_type.value)
        if apply and self.producer is None:
            raise ValueError("a producer is needed to apply a scan")
        if pages is not None and not apply:
            raise ValueError("a paged scan is applied")
        started = time.time()
        clock = time.monotonic()
        report = ScanReport(user, doc_type.value, started, apply)
        state = ScanState(self.services.redis, user, doc_type, self.settings.names)
        log_ = log.bind(user=user, doc_type=doc_type.value)
        try:
            manifest = None
            if pages is None or pages.first():
                manifest = load_manifest(self.services.store, user, doc_type)
            account = self.services.account(user)
            if pages is None:
                listing = scanner.list(self, account, state)
            else:
                page, whole = pages.next(scanner, self, account, state)
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
            tags = self._tags(account, listing, state, doc_type, apply)
        except NotFound as exc:
            if doc_type is DocType.FILE:  # the user's files root itself: a real failure
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
            report.seconds += time.monotonic() - clock
            if pages is not None and not isinstance(exc, TransientError):
                pages.discard()
            log_.warning("reconcile_listing_failed", error=report.error)
            if isinstance(exc, NextcloudAuthError):
                record_refused(self.services.redis, self.settings.names, user, str(exc))
            if apply:
                state.record(report)
            return report
        # the account got through: not refused
        clear_refused(self.services.redis, self.settings.names, user)
        report.requests = listing.requests
        report.listed = len(listing.docs)
        report.forbidden = len(listing.forbidden)
        tried = self._compare(report, listing, manifest, state, apply, tags)
        if apply:
            report.enqueued, report.coalesced = self._enqueue(
                user, scanner, report.index + report.remove, doc_type
            )
            # only once they are queued: a failed publish must not mark them tried
            state.set_tried(tried)
            scanner.commit(state, listing, self._dirty(report), report.clean)
            if doc_type is DocType.FILE:
                Progress(self.services.redis, self.settings.names).record_skips(
                    user,
                    listing.skipped,
                    (node_subject(doc_id) for doc_id in listing.docs),
                    full=listing.full_walk,
                )
            if pages is not None:
                pages.discard()
        report.seconds += time.monotonic() - clock
        if apply:
            state.record(report)
        log_.info("reconcile_scan", **report.summary())
        return report

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
        doc_type: DocType,
        apply: bool,
    ) -> TagState | None:
        """For files and notes when tag rules are set: the current members of each gate and
        excluded tag (one ``PROPFIND`` of the system tags, one ``REPORT`` per tag; a tag's
        change fires an event but changes no etag, so a lost one is found here, not by the
        walk). A file scan also lists what the tags say may be newly eligible, wherever its
        folder: every file carrying a gate tag, and every file that carried an excluded tag
        at the last scan and carries none now (re-read by id); each is classified like a
        walked entry. ``None`` without tag rules or for other doc types."""
        rules = self.indexer.eligibility
        names = rules.required_tags | rules.excluded_tags
        if not names or doc_type not in (DocType.FILE, DocType.NOTE):
            return None
        ids = client.system_tag_ids()
        listing.requests += 1
        tagged: dict[str, dict[int, DavEntry]] = {}
        for name in sorted(names):
            tagged[name] = client.tagged(ids[name]) if name in ids else {}
            listing.requests += name in ids
        tags = TagState(frozenset(names), {n: set(e) for n, e in tagged.items()})
        if doc_type is not DocType.FILE:
            return tags
        candidates = [e for n in rules.required_tags for e in tagged[n].values()]
        excluded_now = {i for n in rules.excluded_tags for i in tagged[n]}
        for file_id in sorted(state.excluded() - excluded_now):
            try:
                candidates.append(client.find_by_id(file_id))
            except NotFound:
                continue
            finally:
                listing.requests += 1
        if apply:
            state.set_excluded(excluded_now)
        for entry in candidates:
            if entry.is_folder or entry.file_id is None or str(entry.file_id) in listing.docs:
                continue
            ref = self.indexer.classify(client, entry)
            if ref is not None and ref.doc_type is DocType.FILE:
                listing.docs[ref.doc_id] = Seen(ref.doc_id, entry.etag, entry.path)
        return tags

    # --- comparing -------------------------------------------------------------------------

    def _compare(
        self,
        report: ScanReport,
        listing: Listing,
        manifest: dict[str, ManifestEntry],
        state: ScanState,
        apply: bool,
        tags: TagState | None = None,
    ) -> dict[str, tuple[str, float]]:
        """Fill ``report`` from ``listing`` against ``manifest``; returns the versions an index
        task is sent for now or was before (for :meth:`ScanState.set_tried`, once queued).
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
            entry = manifest.get(doc_id)
            if entry is None:
                change = Change(doc_id, "new", seen.path)
            elif seen.etag is not None and seen.etag != entry.etag:
                report.index.append(Change(doc_id, "changed", seen.path, entry.path))
                continue
            elif seen.path is not None and not seen.at(entry.path):
                report.index.append(Change(doc_id, "moved", seen.path, entry.path))
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
        return tried

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

    def _enqueue(
        self, user: str, scanner: Scanner, changes: list[Change], doc_type: DocType
    ) -> tuple[int, int]:
        """Send each change's task now (once per document); a task already pending for the
        same document (a webhook's, or the other scanner's) takes it instead. The debounce keys
        live one scan period (at least 60 s). Returns ``(queued, coalesced)``."""
        assert self.producer is not None
        period = self.settings.reconcile_periods.get(doc_type.value, 900)
        actions: list[Action] = []
        keys: set[str] = set()
        for change in changes:
            action = scanner.action(user, change.doc_id)
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
        )


# --- requesting scans ----------------------------------------------------------------------


@contextlib.contextmanager
def scan_lock(
    client: redis.Redis, keys: Names, user: str, doc_type: DocType | str, *, ttl: int, wait: float
) -> Iterator[bool]:
    """The per-user, per-doc-type scan lock (``<namespace>:lock:reconcile:<type>:<user>``)
    that the ``ncindex.reconcile_scan`` task and ``ncindex reconcile --apply`` both take, so
    two scans of one user and type never run at once. Yields ``True`` once held (it expires
    after ``ttl`` seconds, above the scan task's hard limit, and is released on exit), or
    ``False`` when another scan still held it after ``wait`` seconds (``0``: do not wait)."""
    lock = client.lock(keys.lock("reconcile", DocType(doc_type).value, user), timeout=ttl)
    held = lock.acquire(blocking=wait > 0, blocking_timeout=wait if wait > 0 else None)
    try:
        yield bool(held)
    finally:
        if held:
            with contextlib.suppress(redis.exceptions.LockError):
                lock.release()


def scan_lock_seconds(
    client: redis.Redis, keys: Names, user: str, doc_type: DocType | str
) -> float:
    """Seconds until the scan lock of :func:`scan_lock` expires (``0.0`` when it is free)."""
    ttl = client.pttl(keys.lock("reconcile", DocType(doc_type).value, user))
    return max(0.0, ttl / 1000)


def last_scans_key(keys: Names) -> str:
    """The hash of the last scans' summaries (field ``<user>:<doc_type>``)."""
    return keys.reconcile_prefix + "last"


def pending_key(keys: Names, user: str, doc_type: DocType | str) -> str:
    """Redis key marking a scan of ``user`` and ``doc_type`` as queued but not yet started."""
    return f"{keys.reconcile_prefix}pending:{DocType(doc_type).value}:{user}"


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
