"""Notes as documents (doc type ``note``; DESIGN §4, reference §2).

A note is a Markdown file in the user's notes folder (:func:`notes_settings`), so it is a
*node*: its events are the file events and it is indexed by file id (its note id is its file
id); :func:`ncindex.sources.eligibility.classify` tells it from a file. Its text, title,
category and etag come from the Notes API (``GET /notes/{id}``, conditional on the etag
held); the etag is the Notes API's own (md5 of the note's data), in the listing and in the
fetch alike.

The scan first asks WebDAV whether the notes folder is there (``PROPFIND`` Depth 0), since
the Notes list creates a missing one: missing, the account has no notes; on a storage that
cannot be reached (503), nothing is listed and what is indexed is kept. Then it lists
``GET /notes?exclude=content&pruneBefore=…&chunkSize=…``, following the chunk
cursor: notes unchanged since the last clean scan come as ``{"id": N}``; only the last chunk
lists every id, so deletions are judged on it (``Listing.names_all``): a note of an earlier
chunk that it does not name was deleted meanwhile. Verify-on-read checks a note
as a file, by WebDAV, together with the page's files (:mod:`ncindex.sources.nodes`).
"""

from __future__ import annotations

import builtins
import json
import posixpath
from typing import TYPE_CHECKING, Any, ClassVar

from ncindex.documents import DocRef, DocType, SourceDocument
from ncindex.errors import NextcloudProtocolError, NotFound, StorageUnavailable
from ncindex.nextcloud.client import (
    API_HEADERS,
    NOTES_API,
    NextcloudClient,
    NotesSettings,
    json_list,
)
from ncindex.nextcloud.http_dates import http_date_seconds
from ncindex.nextcloud.webdav import DavEntry
from ncindex.redis_replies import as_text
from ncindex.settings import Settings
from ncindex.sources.base import (
    Context,
    Fetched,
    Listing,
    ScanMemory,
    Seen,
    Source,
)
from ncindex.sources.nodes import VerifiedByWebDav

if TYPE_CHECKING:
    from ncindex.sources.eligibility import Eligibility

NOTES_SETTINGS_SECONDS = 300
"""How long a user's Notes settings are cached in Redis."""


def _user(client: NextcloudClient) -> str:
    """``client``'s user id. Raises ``ValueError`` without one (the write path's clients are
    accounts', whose user id is known)."""
    if client.user is None:
        raise ValueError("user id unknown: the notes settings are cached per user")
    return client.user


def _cached_notes_settings(ctx: Context, user: str) -> NotesSettings | None:
    """``user``'s Notes settings as cached by :func:`notes_settings`, ``None`` when not."""
    cached = ctx.redis.get(ctx.settings.names.notes_settings(user))
    if cached is None:
        return None
    data = json.loads(as_text(cached))
    return NotesSettings(
        notes_path=data["path"],
        file_suffix=data["suffix"],
        hides_dot_folders=data.get("hides_dot_folders", True),  # cached before it was kept
    )


def notes_settings(ctx: Context, client: NextcloudClient, *, fresh: bool = False) -> NotesSettings:
    """The user's Notes settings (folder and file suffix), cached in Redis for five minutes;
    the configured default when the Notes app is not installed (404). With ``fresh`` they
    are asked for whatever is cached, and cached anew: the user may have picked another
    notes folder in the Notes app since (nextcloud/notes ``lib/Service/SettingsService.php``
    ``set`` stores the new ``notesPath`` and moves nothing; the Notes API answers from it at
    once), and a decision that would take a note away on the cached folder asks so first.
    Raises ``ValueError`` for a client without a user id."""
    user = _user(client)
    if not fresh:
        cached = _cached_notes_settings(ctx, user)
        if cached is not None:
            return cached
    try:
        notes = client.notes_settings()
    except NotFound:
        notes = NotesSettings(notes_path=ctx.settings.notes_path, file_suffix=".md")
    value = json.dumps(
        {
            "path": notes.notes_path,
            "suffix": notes.file_suffix,
            "hides_dot_folders": notes.hides_dot_folders,
        }
    )
    ctx.redis.set(ctx.settings.names.notes_settings(user), value, ex=NOTES_SETTINGS_SECONDS)
    return notes


def is_note_name(name: str, settings: Settings, notes: NotesSettings) -> bool:
    """Whether a file called ``name`` in the notes folder is a note: its extension (lower-cased)
    is one of ``settings.note_extensions`` or the user's own suffix (the extension as PHP's
    ``pathinfo`` gives it: ``.md`` is a note called ``""``). nextcloud/notes
    ``lib/Service/NotesService.php`` ``isNote`` takes the built-in extensions and the user's
    ``customSuffix`` (without its dot, compared as written); the Notes API's ``GET /settings``
    (``SettingsService::getPublic``) shows that suffix as ``fileSuffix`` while it is the one
    new notes get, and hides it otherwise — then it cannot be known here."""
    # PHP's pathinfo($name, PATHINFO_EXTENSION), as isNote reads it: what follows the last
    # dot, a leading one too (".md" has the extension "md", where splitext finds none)
    ext = name.rpartition(".")[2].lower() if "." in name else ""
    own = notes.file_suffix.lstrip(".")
    return ext in settings.note_extensions or (bool(own) and ext == own)


def _notes_folder(notes: NotesSettings) -> str:
    """The notes folder's path from the files root (``/`` for the root itself)."""
    return "/" + notes.notes_path.strip("/")


def is_listed_note(path: str, settings: Settings, notes: NotesSettings) -> bool:
    """Whether the file at ``path`` (from the user's files root) is a note the Notes API
    lists: under the notes folder, with a note name (:func:`is_note_name`) and, where the Notes
    app hides them (:attr:`NotesSettings.hides_dot_folders`), in no folder below the notes
    folder whose name starts with ``.`` (nextcloud/notes ``lib/Service/NotesService.php``
    ``gatherNoteFiles`` skips such a folder: the Text editor's ``.attachments.<id>``). A file
    there is not listed as a note, though ``GET /notes/{id}`` answers it; taken for a note,
    every notes scan would miss it and check it again."""
    folder = _notes_folder(notes)
    inside = folder.rstrip("/") + "/"
    if not path.startswith(inside) or not is_note_name(path, settings, notes):
        return False
    below = posixpath.dirname(path)[len(inside) - 1 :].split("/")
    return not (notes.hides_dot_folders and any(part.startswith(".") for part in below))


def _http_time(value: str | None) -> int | None:
    """An HTTP date as Unix seconds, ``None`` when absent or unreadable."""
    if not value:
        return None
    try:
        return http_date_seconds(value)
    except (TypeError, ValueError):
        return None


def _notes_folder_reachable(ctx: Context, client: NextcloudClient, listing: Listing) -> bool:
    """Whether the Notes list may be asked for ``client``'s notes: one ``PROPFIND`` Depth 0
    of the notes folder (:func:`notes_settings`), counted in ``listing.requests``. A cached
    folder found missing is not believed as it is: the settings are asked for again (the
    user may have moved the folder in Files and picked it in the Notes app, which moves
    nothing: nextcloud/notes ``SettingsService::set``), and another folder there is asked
    for in its place (one more ``PROPFIND``); else the scan took every note for gone.

    The Notes list creates a missing notes folder (nextcloud/notes
    ``lib/Controller/Helper.php`` ``getNotesAndCategories`` calls ``NotesService::getAll``
    with ``$autoCreateNotesFolder`` true; ``lib/Service/NoteUtil.php``
    ``getOrCreateNotesFolder`` then ``$userFolder->newFolder($notesPath)``), so asking it for an
    account that never used Notes would leave an empty folder in its files; ``GET /settings``
    (``SettingsService::getPublic``) creates none. Missing (404): ``False``, and ``listing``
    names every note there is — none (``names_all``), so what is indexed goes as a deleted
    folder's would. On a storage that cannot be reached (503, ``StorageUnavailable``):
    ``False``, and ``listing`` covers the folder (``covered``, ``unreachable``): what is
    indexed below it is kept as it is, as the file walk keeps such a folder's files — the
    Notes list could answer it from the file cache, or empty (a ``FailedStorage`` mount:
    nextcloud/server ``lib/private/Files/Cache/FailedCache.php`` ``getFolderContents``)."""
    cached = _cached_notes_settings(ctx, _user(client))
    folder = _notes_folder(cached or notes_settings(ctx, client, fresh=True))
    try:
        return _ask_folder(client, folder, listing)
    except NotFound:
        if cached is not None:
            current = _notes_folder(notes_settings(ctx, client, fresh=True))
            if current != folder:
                try:
                    return _ask_folder(client, current, listing)
                except NotFound:
                    pass
        listing.names_all = True
        return False


def _ask_folder(client: NextcloudClient, folder: str, listing: Listing) -> bool:
    """``PROPFIND`` Depth 0 of the notes folder ``folder`` (counted in ``listing.requests``):
    ``True`` when it answers; ``False``, and ``listing`` covering it, on a storage that cannot
    be reached. Raises ``NotFound`` when it is missing."""
    listing.requests += 1
    try:
        client.propfind(folder, depth=0)
    except StorageUnavailable:
        listing.covered.add(folder)
        listing.unreachable.add(folder)
        return False
    return True


class NoteSource(VerifiedByWebDav, Source):
    """Notes: listed by the Notes API, fetched by the Notes API with the WebDAV entry."""

    doc_type: ClassVar[DocType] = DocType.NOTE
    node = True
    app = "notes"
    ruled = True
    relists_changed = True

    def list(
        self,
        ctx: Context,
        client: NextcloudClient,
        memory: ScanMemory,
        resume: Listing | None = None,
        limit: int | None = None,
    ) -> Listing:
        """Page through the Notes list (``reconcile_notes_chunk_size`` notes a request);
        every note when one was lost (module docstring), else those changed since
        ``pruneBefore``. The cursor is the ``chunkCursor`` and ``pruneBefore`` parameters to
        go on with. A new listing first asks whether the notes folder is there
        (:func:`_notes_folder_reachable`): the Notes list would create it."""
        if resume is None:
            listing = Listing()
            if not _notes_folder_reachable(ctx, client, listing):
                return listing
        else:
            listing = resume
        params: dict[str, Any] = {
            "exclude": "content",
            "chunkSize": ctx.settings.reconcile_notes_chunk_size,
        }
        if resume is not None:
            params.update(resume.cursor)
        else:
            prune_before = memory.marker()
            if prune_before is not None and not memory.lost():  # a lost note lists in full
                params["pruneBefore"] = prune_before
        listing.cursor = None
        while True:
            if limit is not None and listing.requests >= limit:
                listing.cursor = {
                    k: params[k] for k in ("chunkCursor", "pruneBefore") if k in params
                }
                return listing
            response = client.request(
                "GET", f"{NOTES_API}/notes", params=params, headers=API_HEADERS
            )
            listing.requests += 1
            if listing.marker is None:
                listing.marker = _http_time(response.headers.get("Last-Modified"))
            named = set()
            for item in json_list(response):
                try:
                    doc_id = str(int(item["id"]))
                except (KeyError, TypeError, ValueError) as exc:
                    raise NextcloudProtocolError(f"note without id: {item!r}") from exc
                named.add(doc_id)
                if "etag" in item:
                    listing.docs[doc_id] = Seen(doc_id, str(item["etag"]), item.get("internalPath"))
                else:
                    listing.docs.setdefault(doc_id, Seen(doc_id, None, None))
            cursor = response.headers.get("X-Notes-Chunk-Cursor")
            if not cursor:
                # the last chunk names every note there is (NotesApiController::index adds
                # {"id"} of each one not in the chunk): a note of an earlier chunk it does not
                # name was deleted while the list was paged
                listing.docs = {k: v for k, v in listing.docs.items() if k in named}
                listing.names_all = True
                return listing
            if cursor == params.get("chunkCursor"):
                raise NextcloudProtocolError("the Notes chunk cursor did not move")
            params["chunkCursor"] = cursor

    def commit(self, memory: ScanMemory, listing: Listing, dirty: set[str], clean: bool) -> None:
        """Advance ``pruneBefore`` to this listing's ``Last-Modified``, only after a clean scan
        (otherwise the documents that needed work would be pruned from the next listing)."""
        if clean and listing.marker is not None:
            memory.set_marker(listing.marker)

    def fetch(
        self,
        ctx: Context,
        client: NextcloudClient,
        ref: DocRef,
        current: dict[str, Any] | None,
        entry: DavEntry | None = None,
    ) -> Fetched:
        """``GET /notes/{id}``, conditional on the stored etag (``doc`` ``None``: unchanged);
        path, size, owner and tags come from ``entry``. Raises ``NotFound``, and
        ``Forbidden`` for a note whose content cannot be read (the client's
        :meth:`~ncindex.nextcloud.client.NextcloudClient.get_note`)."""
        if entry is None:
            raise ValueError("a note is fetched with its WebDAV entry")
        note = client.get_note(int(ref.doc_id), etag=current.get("etag") if current else None)
        if note is None:
            return Fetched(None)
        user = client.user or ""
        return Fetched(
            SourceDocument(
                ref=ref,
                user=user,
                owner=None if entry.mounted else entry.owner or user,
                title=note.title,
                text=note.content[: ctx.settings.max_document_chars],
                etag=note.etag,
                modified_at=note.modified,
                path=entry.path,
                mime_type=entry.content_type or "text/markdown",
                size=entry.size,
                category=note.category,
                tags=entry.tags,
                markdown=True,
                truncated=len(note.content) > ctx.settings.max_document_chars,
            )
        )

    def rule_reason(
        self, rules: Eligibility, path: str, mime_type: str | None, tags: builtins.list[str]
    ) -> str | None:
        """Path globs and tags (a note is known by its folder and extension, so the MIME
        list does not apply)."""
        return rules.path_and_tags_reason(path, tags)


SOURCE = NoteSource()
