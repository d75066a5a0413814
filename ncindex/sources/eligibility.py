"""Which files are indexed, and as what: path globs, MIME types and a system-tag gate
(DESIGN §4); a note or a file (:func:`classify`).

A file is eligible when its format is one :mod:`ncindex.text.extract` reads, its path matches
an include glob and no exclude glob, its MIME type is in the configured list, it carries one
of the required tags (when a gate is set) and none of the excluded tags. Exclusions win: an
excluded tag beats the gate, an exclude glob beats an include glob.

Globs (:mod:`ncindex.globs`) are matched against the path in the user's own view, relative to
the files root and starting with ``/`` (``/Projects/2026/spec.pdf``). Tag names compare
case-insensitively.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from dataclasses import dataclass
from pathlib import PurePosixPath

from ncindex.documents import DocRef, DocType
from ncindex.globs import glob_match
from ncindex.nextcloud.client import NextcloudClient
from ncindex.nextcloud.webdav import DavEntry
from ncindex.settings import Settings
from ncindex.sources.base import Context
from ncindex.sources.note import is_listed_note, notes_settings
from ncindex.text.extract import OCR_FORMATS, detect_format, extension_mime
from ncindex.text.ocr import ocr_from_settings

UNREADABLE = "not readable"
"""The reason :func:`classify` gives for a file the user may not read."""
_GENERIC = {"", "application/octet-stream", "application/x-empty", "binary/octet-stream"}


def effective_mime(mime_type: str | None, path: str) -> str | None:
    """The media type judged against the MIME list: the reported one (parameters dropped,
    lower case) unless it is generic or missing, then the type of the extension's format;
    ``None`` when neither is known."""
    media = (mime_type or "").split(";", 1)[0].strip().lower()
    if media not in _GENERIC:
        return media
    return extension_mime(PurePosixPath(path).name)


@dataclass(frozen=True, slots=True)
class Eligibility:
    """The indexing policy of one deployment (built from :class:`Settings`)."""

    include_globs: tuple[str, ...]
    exclude_globs: tuple[str, ...]
    mime_types: tuple[str, ...]
    required_tags: frozenset[str]
    excluded_tags: frozenset[str]
    ocr: bool = False
    note_extensions: tuple[str, ...] = ()
    """``settings.note_extensions`` (bare, lower case): which files in the notes folder are
    notes (:func:`ncindex.sources.note.is_note_name`) and so which are files; kept here for
    :meth:`fingerprint` only."""

    @classmethod
    def from_settings(cls, settings: Settings) -> Eligibility:
        """The policy of ``settings`` (``index_*`` fields)."""
        return cls(
            include_globs=tuple(settings.index_include_globs),
            exclude_globs=tuple(settings.index_exclude_globs),
            mime_types=tuple(m.lower() for m in settings.index_mime_types),
            required_tags=frozenset(t.casefold() for t in settings.index_required_tags),
            excluded_tags=frozenset(t.casefold() for t in settings.index_excluded_tags),
            ocr=ocr_from_settings(settings) is not None,
            note_extensions=tuple(settings.note_extensions),
        )

    def fingerprint(self) -> str:
        """16 hex digits of SHA-256 over the policy (globs, MIME types, tags, OCR, note
        extensions), each list sorted and without repeats, as JSON (no ``hash()``: the same in
        every process): equal for equal policies whatever the order of the globs, MIME types,
        tags and extensions (each is matched by any of its entries), different when a rule
        changes. A scan keeps the one it listed under
        (:meth:`ncindex.sync.reconcile.ScanState.rules`). The note extensions are in it as
        they decide whether a file in the notes folder is a note or a file: changed, a file
        in a folder whose etag did not change stayed indexed as what it was before."""
        policy = [
            sorted(set(self.include_globs)),
            sorted(set(self.exclude_globs)),
            sorted(set(self.mime_types)),
            sorted(self.required_tags),
            sorted(self.excluded_tags),
            self.ocr,
            sorted(set(self.note_extensions)),
        ]
        return hashlib.sha256(json.dumps(policy).encode()).hexdigest()[:16]

    def path_and_tags_reason(self, path: str, tags: list[str]) -> str | None:
        """Why a node at ``path`` carrying system tags ``tags`` is not indexed, or ``None``:
        ``excluded_path``, ``path_not_included``, ``excluded_tag``, ``missing_required_tag``."""
        if any(glob_match(path, g) for g in self.exclude_globs):
            return "excluded_path"
        if not any(glob_match(path, g) for g in self.include_globs):
            return "path_not_included"
        names = {t.casefold() for t in tags}
        if names & self.excluded_tags:
            return "excluded_tag"
        if self.required_tags and not names & self.required_tags:
            return "missing_required_tag"
        return None

    def file_reason(self, path: str, mime_type: str | None, tags: list[str]) -> str | None:
        """Why a (non-note) file is not indexed, or ``None``: ``unsupported_format``,
        ``ocr_unavailable`` (an image while OCR is off or Tesseract missing), ``mime_type``
        or a reason of :meth:`path_and_tags_reason`."""
        fmt = detect_format(mime_type, PurePosixPath(path).name)
        if fmt is None:
            return "unsupported_format"
        if fmt in OCR_FORMATS and not self.ocr:
            return "ocr_unavailable"
        mime = effective_mime(mime_type, path)
        if mime is None or not any(fnmatch.fnmatchcase(mime, m) for m in self.mime_types):
            return "mime_type"
        return self.path_and_tags_reason(path, tags)


def classify(
    ctx: Context, client: NextcloudClient, entry: DavEntry, *, fresh: bool = False
) -> tuple[DocRef | None, str | None]:
    """What file ``entry`` is indexed as: ``note`` for a file the Notes API lists as one
    (:func:`ncindex.sources.note.is_listed_note`: under the user's notes folder,
    :func:`ncindex.sources.note.notes_settings`, with a note extension, the user's own suffix
    too, and from Notes 6.0.2 in no dot-folder), ``file`` for another
    eligible file, ``None`` for anything not indexed — among them a file the user may not
    read (:attr:`DavEntry.readable`: an admin's access-control rule blocks it), so that what
    was indexed of it goes. With ``None`` comes the reason (:data:`UNREADABLE` or one of
    :class:`Eligibility`'s). Path globs and the tag gate apply to notes too; the MIME list to
    files only (a note is known by its folder and extension). With ``fresh`` the user's Notes
    settings are asked for, not read from the cache (:func:`notes_settings`)."""
    if not entry.readable:
        return None, UNREADABLE
    rules = Eligibility.from_settings(ctx.settings)
    notes = notes_settings(ctx, client, fresh=fresh)
    if is_listed_note(entry.path, ctx.settings, notes):
        reason = rules.path_and_tags_reason(entry.path, entry.tags)
        return (None, reason) if reason else (DocRef(DocType.NOTE, str(entry.file_id)), None)
    reason = rules.file_reason(entry.path, entry.content_type, entry.tags)
    return (None, reason) if reason else (DocRef(DocType.FILE, str(entry.file_id)), None)
