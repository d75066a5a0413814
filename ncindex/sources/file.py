"""Files as documents (doc type ``file``; DESIGN §4): every eligible file in the user's files
that is not a note (:func:`ncindex.sources.eligibility.classify`).

A file is a *node*: its events are the file events, it is indexed by file id. Its etag is
WebDAV's ``getetag`` (the listing's and the fetch's alike); its text is its bytes through
:func:`ncindex.text.extract.extract_text`; its title its file name.

The scan is a WebDAV ``PROPFIND`` ``Depth: 1`` walk, breadth first, that skips every folder
whose etag is unchanged since the last clean scan (a folder's etag changes when anything below
it changes, share mounts included; not for an external storage or a federated share, whose
folders and those above them are walked regardless of their etags every
``reconcile_external_walk_seconds``: :data:`UNSETTLED`); with the root's etag unchanged a
scan costs one ``Depth: 0`` request. Every ``reconcile_full_walk_seconds`` it walks every
folder, and the folders above a document whose access the user lost are walked
whatever their etags say. A folder whose storage cannot be reached (503) is skipped, its
documents kept, and recorded (:meth:`FileSource.commit`); each scan asks it again, and the
first it answers walks it, and the folders above and below it, whatever their etags.
"""

from __future__ import annotations

import builtins
import posixpath
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from ncindex.documents import DocRef, DocType, SourceDocument
from ncindex.errors import (
    FileGone,
    Forbidden,
    NextcloudProtocolError,
    NotFound,
    StaleEntry,
    StorageUnavailable,
    TooLarge,
)
from ncindex.nextcloud.client import NextcloudClient
from ncindex.nextcloud.webdav import DavEntry
from ncindex.progress import node_subject, skip_value
from ncindex.sources.base import (
    Context,
    Fetched,
    Listing,
    ScanMemory,
    Seen,
    Source,
    ancestors,
)
from ncindex.sources.eligibility import Eligibility, classify
from ncindex.sources.nodes import VerifiedByWebDav
from ncindex.text.extract import extract_text
from ncindex.text.ocr import ocr_from_settings
from ncindex.text.versions import extraction_fields, outdated

UNSETTLED = "unsettled "
"""The prefix of the etag kept for a folder on an external storage or a federated share
that holds one, or above one (:attr:`~ncindex.nextcloud.webdav.DavEntry.external`): their
etags do not show what changed on the storage outside Nextcloud, so at an *external walk*
(every ``reconcile_external_walk_seconds``) they are walked whatever their etags say, and
the external storage below them too (its folders are walked whatever their etags say):
files put on it outside Nextcloud are found so — new ones and removed ones, which change
their folder's mtime; a file changed in place is noticed by Nextcloud only when the file
itself is looked at, so not by a walk. Between external walks the etag after the prefix
decides, as for any folder. No etag begins so: an entity-tag holds no space (RFC 9110
§8.8.3 ``etagc``)."""


def unsettled(etag: str) -> str:
    """``etag`` marked :data:`UNSETTLED` (once)."""
    return etag if etag.startswith(UNSETTLED) else UNSETTLED + etag


def settled(etag: str | None) -> str | None:
    """A kept etag without its :data:`UNSETTLED` mark (``None`` stays ``None``)."""
    if etag is not None and etag.startswith(UNSETTLED):
        return etag[len(UNSETTLED) :]
    return etag


class FileSource(VerifiedByWebDav, Source):
    """Files: listed by a WebDAV walk, fetched by download and extraction."""

    doc_type: ClassVar[DocType] = DocType.FILE
    node = True
    ruled = True
    title_from_path = True
    extracts = True

    def list(
        self,
        ctx: Context,
        client: NextcloudClient,
        memory: ScanMemory,
        resume: Listing | None = None,
        limit: int | None = None,
    ) -> Listing:
        """Walk the user's files breadth first, one folder per request; every folder when the
        last full walk is ``reconcile_full_walk_seconds`` old (or none is recorded), and the
        folders on and above external storages and federated shares whatever their etags
        when the last such walk is ``reconcile_external_walk_seconds`` old (or none is
        recorded): decided when a listing starts, kept with it across pages. Entries
        are classified (:func:`~ncindex.sources.eligibility.classify`): notes are left to
        their own listing, what a rule leaves out is recorded in ``skipped``. The cursor is
        the list of folders still to walk."""
        if resume is None:
            last_full = memory.full_walk_at()
            listing = Listing(skipped={})
            last_external = memory.external_walk_at()
            now = time.time()
            listing.full_walk = (
                last_full is None or now - last_full >= ctx.settings.reconcile_full_walk_seconds
            )
            listing.external_walk = (
                listing.full_walk
                or last_external is None
                or now - last_external >= ctx.settings.reconcile_external_walk_seconds
            )
            if not listing.full_walk:
                self._probe_unreachable(client, memory, listing, limit)
        else:
            listing = resume
            if listing.skipped is None:
                listing.skipped = {}
        skipped = listing.skipped
        assert skipped is not None  # set just above
        stored = {} if listing.full_walk else memory.folders()
        # folders above a document whose access the user lost: walked whatever their etags
        # say, since a share given back or an access rule lifted may change none of them;
        # so are those above a folder recorded unreachable that answers again (or is gone)
        forced = {
            folder
            for path in memory.lost().values()
            if path
            for folder in ancestors(posixpath.dirname(path))
        }
        forced.update(folder for path in listing.revisit for folder in ancestors(path))
        # with an external walk due, a root kept unsettled is walked whatever its etag
        external_due = listing.external_walk and stored.get("/", "").startswith(UNSETTLED)
        if resume is None and "/" in stored and not forced and not external_due:
            answer = client.propfind("/", depth=0)
            listing.requests += 1
            if not answer:
                raise NextcloudProtocolError("PROPFIND /: empty multistatus")
            if answer[0].etag == settled(stored["/"]):
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
            except StorageUnavailable:
                if folder == "/":
                    raise
                # its storage cannot be reached now (an external storage's server away): the
                # rest of the walk goes on, and what is indexed below it is kept as it is —
                # present and unchanged — until the storage answers again; it is recorded
                # (commit), so the first scan it answers walks it (_probe_unreachable)
                listing.covered.add(folder)
                listing.unreachable.add(folder)
                continue
            finally:
                listing.requests += 1
            if not entries:
                raise NextcloudProtocolError(f"PROPFIND {folder}: empty multistatus")
            listing.unreachable.discard(folder)  # answers again within this listing
            listing.folders[folder] = entries[0].etag
            for entry in entries[1:]:
                if entry.is_folder:
                    kept = stored.get(entry.path)
                    marked = kept is not None and kept.startswith(UNSETTLED)
                    if entry.external or marked:
                        # its etag and those above it do not show what changed on it (or
                        # on an external storage below it, when it is kept unsettled)
                        for above in ancestors(folder):
                            listing.folders[above] = unsettled(listing.folders.get(above, ""))
                    if (
                        settled(kept) == entry.etag
                        and entry.path not in forced
                        and not ((entry.external or marked) and listing.external_walk)
                        and not (
                            listing.revisit
                            and any(a in listing.revisit for a in ancestors(entry.path))
                        )
                    ):
                        listing.covered.add(entry.path)
                    else:
                        queue.append(entry.path)
                    continue
                if entry.file_id is None:
                    continue
                ref, rule = classify(ctx, client, entry)
                if ref is None and rule is not None:
                    skipped[node_subject(entry.file_id)] = skip_value(rule, entry.path)
                if ref is None or ref.doc_type is not DocType.FILE:
                    continue
                seen = listing.docs.get(ref.doc_id)
                if seen is None:
                    listing.docs[ref.doc_id] = Seen(ref.doc_id, entry.etag, entry.path)
                elif not seen.at(entry.path):
                    listing.docs[ref.doc_id] = replace(seen, also_at=(*seen.also_at, entry.path))
        return listing

    def _probe_unreachable(
        self, client: NextcloudClient, memory: ScanMemory, listing: Listing, limit: int | None
    ) -> None:
        """Ask each folder recorded unreachable by an earlier scan (``Depth: 0``, one request
        each) whether its storage answers again: one still answering 503 stays in
        ``listing.unreachable`` (and costs no further request: nothing above it is walked
        for it); one that answers, or is gone (404: its mount removed, nextcloud/server
        ``apps/files_external`` ``ConfigAdapter::getMountsForUser`` no longer mounts it), goes
        to ``listing.revisit``: walked with the folders above and below it whatever their
        etags, as nothing changed them while it was away (a file put on an external storage
        changes no etag until its folder is looked at: ``View::getCacheEntry``).

        The probes count against the page's ``limit`` (requests): at most ``limit - 1`` of
        them (one is the root's ``Depth: 0``), and at least one, the longest unreachable
        first (then by path); a folder not asked stays recorded unreachable, asked by a later
        scan, and walked whatever its etag by the next external walk (an external storage or
        federated share: :data:`UNSETTLED`) or full walk.
        Raises what the client raises for another failure (the listing fails)."""
        recorded = memory.unreachable()
        for folder in sorted(recorded, key=lambda path: (recorded[path], path)):
            if limit is not None and listing.requests and listing.requests >= limit - 1:
                listing.unreachable.add(folder)  # not asked this time
                continue
            try:
                client.propfind(folder, depth=0)
            except StorageUnavailable:
                listing.unreachable.add(folder)
                continue
            except (NotFound, Forbidden):
                pass  # gone or unreadable now: the walk above it shows which
            finally:
                listing.requests += 1
            listing.revisit.add(folder)

    def commit(self, memory: ScanMemory, listing: Listing, dirty: set[str], clean: bool) -> None:
        """Keep the etags of skipped folders (and what is stored below them) and of every
        visited folder with nothing dirty at or below it, and record the folders skipped as
        unreachable (``listing.unreachable``, each with the time it was first skipped): the
        first scan that finds one answering again walks it (:meth:`_probe_unreachable`)."""
        stored = memory.folders()
        keep = {p: e for p, e in stored.items() if listing.covers(p) and p not in dirty}
        keep.update({p: e for p, e in listing.folders.items() if p not in dirty})
        memory.set_folders(keep)
        since = memory.unreachable()
        now = time.time()
        memory.set_unreachable({p: since.get(p, now) for p in listing.unreachable})
        if listing.full_walk:
            memory.set_full_walk_at(time.time())
        if listing.external_walk:
            memory.set_external_walk_at(time.time())

    def add_tagged(
        self,
        ctx: Context,
        client: NextcloudClient,
        listing: Listing,
        memory: ScanMemory,
        tagged: Mapping[str, Mapping[int, DavEntry]],
        apply: bool,
    ) -> None:
        """A tag's change fires an event but changes no etag, so the walk may skip a file a
        tag made eligible: list every file carrying a gate tag, and every file that carried
        an excluded tag at the last scan and carries none now (re-read by id), wherever its
        folder; each is classified like a walked entry. With ``apply`` the files carrying an
        excluded tag now are remembered."""
        rules = Eligibility.from_settings(ctx.settings)
        candidates = [e for n in rules.required_tags for e in tagged[n].values()]
        excluded_now = {i for n in rules.excluded_tags for i in tagged[n]}
        for file_id in sorted(memory.excluded() - excluded_now):
            try:
                candidates.append(client.find_by_id(file_id))
            except NotFound:
                continue
            finally:
                listing.requests += 1
        if apply:
            memory.set_excluded(excluded_now)
        for entry in candidates:
            if entry.is_folder or entry.file_id is None or str(entry.file_id) in listing.docs:
                continue
            ref = classify(ctx, client, entry)[0]
            if ref is not None and ref.doc_type is DocType.FILE:
                listing.docs[ref.doc_id] = Seen(ref.doc_id, entry.etag, entry.path)

    def fetch(
        self,
        ctx: Context,
        client: NextcloudClient,
        ref: DocRef,
        current: dict[str, Any] | None,
        entry: DavEntry | None = None,
    ) -> Fetched:
        """Download ``entry`` (``doc`` ``None`` when the stored etag is its etag and its text
        was read by its format's extraction of now: :func:`~ncindex.text.versions.outdated`)
        and extract its text; the document's ``extra`` names the format read and its
        extraction's version (:func:`~ncindex.text.versions.extraction_fields`). Raises
        :class:`~ncindex.errors.TooLarge` (over ``max_download_bytes``, judged from the WebDAV
        size before any download), ``ExtractionError``,
        :class:`FileGone` (a 404 on download and gone by id), ``Forbidden`` (a 404 on
        download while listed unreadable: Sabre's ``File::get``; or a 403) and
        :class:`~ncindex.errors.StaleEntry` (retryable: a body of another length than
        listed, or a 404 for a file that has moved)."""
        if entry is None:
            raise ValueError("a file is fetched with its WebDAV entry")
        if current and current.get("etag") == entry.etag and not stored_outdated(current, entry):
            return Fetched(None)
        settings = ctx.settings
        limit = settings.max_download_bytes
        if entry.size is not None and entry.size > limit:
            # known from PROPFIND/SEARCH: nothing is downloaded
            raise TooLarge(f"{entry.path}: {entry.size} bytes > {limit}")
        try:
            data = client.download(entry.path, limit)
        except NotFound:
            # deleted, moved (a folder renamed) or made unreadable since it was looked up:
            # Sabre's File::get answers a file without read permission 404 too
            try:
                now = client.find_by_id(int(ref.doc_id))
            except NotFound:
                raise FileGone(f"file {ref.doc_id} is gone") from None
            if not now.readable:
                raise Forbidden(f"{entry.path}: 404 on download, listed unreadable") from None
            raise StaleEntry(f"{entry.path}: 404 on download, now at {now.path}") from None
        if entry.size is not None and len(data) != entry.size:
            # a body cut short (by a proxy, a cache) is framed correctly, so nothing below
            # notices; a longer or shorter one is a newer version: look it up again
            raise StaleEntry(f"{entry.path}: {len(data)} bytes downloaded, {entry.size} listed")
        extracted = extract_text(
            data,
            mime_type=entry.content_type,
            filename=entry.path,
            max_chars=settings.max_document_chars,
            max_pages=settings.max_pdf_pages,
            max_bytes=limit,
            max_seconds=settings.extract_max_seconds,
            max_rows=settings.max_sheet_rows,
            ocr=ocr_from_settings(settings),
        )
        user = client.user or ""
        return Fetched(
            SourceDocument(
                ref=ref,
                user=user,
                owner=None if entry.mounted else entry.owner or user,
                title=posixpath.basename(entry.path),
                text=extracted.text,
                etag=entry.etag,
                modified_at=entry.modified_at,
                path=entry.path,
                mime_type=entry.content_type,
                size=entry.size,
                tags=entry.tags,
                markdown=extracted.markdown,
                truncated=extracted.truncated,
                extra=extraction_fields(extracted.format),
            )
        )

    def rule_reason(
        self, rules: Eligibility, path: str, mime_type: str | None, tags: builtins.list[str]
    ) -> str | None:
        """Format, MIME list, path globs and tags (:meth:`Eligibility.file_reason`)."""
        return rules.file_reason(path, mime_type, tags)


def stored_outdated(current: Mapping[str, Any], entry: DavEntry) -> bool:
    """Whether the stored payload ``current`` of the file looked up as ``entry`` was read by
    an older extraction than its format's now (:func:`~ncindex.text.versions.outdated`; a
    payload without the fields: the format its stored MIME type and ``entry``'s name give)."""
    return outdated(
        current.get("extractor"),
        current.get("extractor_version"),
        current.get("mime_type"),
        entry.path,
    )


SOURCE = FileSource()
