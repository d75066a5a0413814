"""Notes app REST API v1 (``/index.php/apps/notes/api/v1``), modelled on Notes 6.0.x.

A note is a file below the user's notes folder (setting ``notesPath``, default ``Notes``) with
a note extension (``txt org markdown md note`` or the custom suffix); the note id is the file id
and every write goes through the simulator's file tree, so it fires the same file events as
WebDAV. The note ``etag`` and the server-side ``lastUpdate`` come from a per-user meta table
maintained like ``MetaService``: ``etag = md5(json_encode([id, title, modified, category,
favorite, readonly, md5(content)]))`` and ``lastUpdate`` is the Unix time the server noticed a
change.

Error bodies (``lib/Controller/Helper.php``, ``handleErrorResponse`` / ``createErrorResponse``)
are ``{"errorType": "<PHP exception class>"}`` before Notes 6.0.2 and ``{"errorType":
"Exception"}`` from 6.0.2 (commit fd53ff0d "fix(api): never expose internal exception types").
A note whose content cannot be read (a files_accesscontrol rule removes the read permission,
so ``lib/private/Files/Node/File.php`` ``getContent`` throws ``NotPermittedException``) is
still answered 200: ``lib/Service/Note.php`` ``getData`` catches the exception and sends
``"error": true``, ``"errorType": "<class>"``, ``"readonly": true`` and ``"Error: <class>"`` as
the content; its meta content etag is ``""`` (``MetaService::generateContentEtag`` catches too).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from ncindex.simulator.events import version_tuple
from ncindex.simulator.phpjson import php_json_encode
from ncindex.simulator.responses import json_response, not_modified, request_params
from ncindex.simulator.routing import Routes
from ncindex.simulator.state import Node, StateError, norm_path
from ncindex.simulator.xmlutil import http_date

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator

__all__ = ["NOTE_DOES_NOT_EXIST", "NotesApi"]

#: Notes' ``index.php`` routes below ``/apps/notes/api`` (:class:`~ncindex.simulator.routing.
#: Routes`): nextcloud/notes ``appinfo/routes.php`` (06709937, August 2026) — no other route of
#: the app has a url below ``/api``. The ``OPTIONS`` one is ``preflighted_cors``, the last GET
#: ``fail`` (a catch-all).
_ATTACHMENT = {"apiVersion": "(v1.4)", "noteid": r"\d+"}
NOTES_ROUTES = Routes(
    (
        ("GET", "/api/{apiVersion}/notes", {"apiVersion": "(v0.2|v1)"}),
        ("GET", "/api/{apiVersion}/notes/{id}", {"apiVersion": "(v0.2|v1)", "id": r"\d+"}),
        ("POST", "/api/{apiVersion}/notes", {"apiVersion": "(v0.2|v1)"}),
        ("PUT", "/api/{apiVersion}/notes/{id}", {"apiVersion": "(v0.2|v1)", "id": r"\d+"}),
        ("DELETE", "/api/{apiVersion}/notes/{id}", {"apiVersion": "(v0.2|v1)", "id": r"\d+"}),
        ("PUT", "/api/{apiVersion}/settings", {"apiVersion": "(v1)"}),
        ("GET", "/api/{apiVersion}/settings", {"apiVersion": "(v1|v1.4)"}),
        ("OPTIONS", "/api/{apiVersion}/{path}", {"apiVersion": "(v0.2|v1)", "path": ".+"}),
        ("GET", "/api/{apiVersion}/attachment/{noteid}", _ATTACHMENT),
        ("POST", "/api/{apiVersion}/attachment/{noteid}", _ATTACHMENT),
        ("GET", "/api/{catchAll}", {"catchAll": ".*"}),
    )
)
API_VERSIONS = "0.2, 1.3, 1.4"
NOTE_EXTENSIONS = ("txt", "org", "markdown", "md", "note")
NOTE_DOES_NOT_EXIST = "OCA\\Notes\\Service\\NoteDoesNotExistException"
NOTE_NOT_WRITABLE = "OCA\\Notes\\Service\\NoteNotWritableException"
#: What reading a note whose read permission is gone raises (``File::getContent``).
NOT_PERMITTED = "OCP\\Files\\NotPermittedException"
#: What a storage that cannot be reached raises (``Availability``, ``FailedStorage``).
STORAGE_NOT_AVAILABLE = "OCP\\Files\\StorageNotAvailableException"
MAX_TITLE_LENGTH = 100
_DEFAULT_SUFFIXES = (".md", ".txt")
_NOTE_MODES = ("rich", "edit", "preview")


class _NoteError(Exception):
    def __init__(self, status: int, error_type: str) -> None:
        super().__init__(error_type)
        self.status = status
        self.error_type = error_type


class _EtagMismatch(Exception):
    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__("etag mismatch")
        self.data = data


def _md5(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return hashlib.md5(raw, usedforsecurity=False).hexdigest()


def rfc2822_date(ts: int) -> str:
    """A ``Last-Modified`` as the AppFramework writes it: nextcloud/server
    ``lib/public/AppFramework/Http/Response.php`` ``getHeaders`` formats the response's
    ``DateTime`` with ``DateTimeInterface::RFC2822`` (``Thu, 01 Jan 2026 00:10:00 +0000``:
    Nextcloud runs in UTC), not as an HTTP-date ending in ``GMT``; ``NotModifiedMiddleware``
    answers 304 to an ``If-Modified-Since`` equal to that very string."""
    return http_date(ts).removesuffix(" GMT") + " +0000"


def pathinfo(name: str) -> tuple[str, str]:
    """PHP's ``pathinfo`` ``PATHINFO_FILENAME`` and ``PATHINFO_EXTENSION`` of a file name, as
    nextcloud/notes ``lib/Service/Note.php`` (``getTitle``, ``setTitleCategory``) and
    ``NotesService::isNote`` read them: split at the last dot, a leading one too (``.md`` →
    ``("", "md")``), no extension without a dot."""
    stem, dot, ext = name.rpartition(".")
    return (stem, ext) if dot else (name, "")


def sanitise_path(text: str) -> str:
    """Notes' ``sanitisePath``: drop ``* | / \\ : " < > ?`` and trim spaces and dots."""
    for ch in '*|/\\:"<>?':
        text = text.replace(ch, "")
    return text.strip(" .")


def safe_title(content: str) -> str:
    """Notes' ``getSafeTitle``: first line, sanitised, ≤ 100 characters, or ``New note``."""
    first = re.split(r"\r\n|\n|\r", sanitise_path(content), maxsplit=1)[0].strip()
    return first[:MAX_TITLE_LENGTH] or "New note"


class NotesApi:
    """Notes state helpers (settings, meta) and the HTTP handlers."""

    def __init__(self, sim: NextcloudSimulator) -> None:
        self.sim = sim
        self.tree = sim.tree

    # ------------------------------------------------------------------ settings

    def _settings(self, uid: str) -> dict[str, str]:
        settings = self.sim.notes_settings.setdefault(uid, {})
        settings.setdefault("fileSuffix", ".md")
        settings.setdefault("notesPath", "Notes")
        settings.setdefault("noteMode", "rich")
        settings.setdefault("customSuffix", ".md")
        return settings

    def public_settings(self, uid: str) -> dict[str, str]:
        """``GET /settings``: ``{"fileSuffix", "notesPath", "noteMode"}``."""
        settings = dict(self._settings(uid))
        if settings["fileSuffix"] == "custom":
            settings["fileSuffix"] = settings["customSuffix"]
        settings.pop("customSuffix", None)
        return settings

    def set_settings(self, uid: str, values: dict[str, Any]) -> None:
        """``PUT /settings`` semantics (unknown keys ignored, values validated)."""
        settings = self._settings(uid)
        values = dict(values)
        suffix = values.get("fileSuffix")
        if suffix is not None and suffix not in _DEFAULT_SUFFIXES:
            values["customSuffix"] = suffix
            values["fileSuffix"] = "custom"
        if values.get("fileSuffix") is not None:
            fs = values["fileSuffix"]
            settings["fileSuffix"] = fs if fs in (*_DEFAULT_SUFFIXES, "custom") else ".md"
        if values.get("customSuffix") is not None:
            out = re.sub(r"[^A-Za-z0-9.-]", "", str(values["customSuffix"])).lstrip(".")
            settings["customSuffix"] = "." + (out or "md")
        if values.get("notesPath") is not None:
            settings["notesPath"] = norm_path(str(values["notesPath"])).lstrip("/")
        if values.get("noteMode") is not None:
            mode = values["noteMode"]
            settings["noteMode"] = mode if mode in _NOTE_MODES else "rich"

    def notes_path(self, uid: str) -> str:
        """The user's notes folder as a view path, e.g. ``/Notes``."""
        return norm_path(self._settings(uid)["notesPath"])

    def file_suffix(self, uid: str) -> str:
        """Suffix for new notes, e.g. ``.md``."""
        settings = self._settings(uid)
        fs = settings["fileSuffix"]
        return settings["customSuffix"] if fs == "custom" else fs

    def is_note_name(self, uid: str, name: str) -> bool:
        """True when a file name has a note extension for this user."""
        ext = pathinfo(name)[1].lower()
        custom = self._settings(uid)["customSuffix"].lstrip(".")
        return ext in NOTE_EXTENSIONS or (bool(ext) and ext == custom)

    # ------------------------------------------------------------------ notes

    def notes_folder(self, uid: str, create: bool) -> Node | None:
        """The notes folder node (created, with events, when ``create``: nextcloud/notes
        ``lib/Service/NoteUtil.php`` ``getOrCreateNotesFolder``, ``$userFolder->newFolder``;
        the list asks for it so, ``Helper::getNotesAndCategories``).

        On a storage that cannot be reached (:meth:`NextcloudSimulator.make_storage_unavailable`)
        the folder is read from the file cache (nextcloud/server
        ``lib/private/Files/Storage/Wrapper/Availability.php`` wraps no ``getCache``, and its
        ``hasUpdated`` answers ``false``), except on a ``FailedStorage`` mount: its root is an
        empty folder (``lib/private/Files/Cache/FailedCache.php``: ``get('')`` a folder entry,
        ``getFolderContents`` ``[]``; *guess*: its watcher never asks the storage, which would
        throw — a ``FailedStorage`` is made without the mount's ``filesystem_check_changes``,
        so ``Common::getWatcher`` takes the global ``CHECK_NEVER``), and a path below that root
        is not cached (``FailedCache::get``: ``false``), so ``View::getCacheEntry`` asks
        ``FailedStorage::file_exists``, which throws ``StorageNotAvailableException``; so
        does creating a folder on an unreachable storage (``Availability::mkdir``). That
        exception is no ``NotesFolderException``: ``Helper::handleErrorResponse`` answers 500.
        Raises :class:`_NoteError` (500) for those."""
        path = self.notes_path(uid)
        node = self.tree.resolve(uid, path)
        if node is not None and self.tree.is_failed(node) and node.id not in self.tree.failed:
            raise _NoteError(500, STORAGE_NOT_AVAILABLE)
        if node is None and create:
            parent = self.tree.resolve(uid, posixpath.dirname(path))
            if parent is not None and self.tree.is_unavailable(parent):
                raise _NoteError(500, STORAGE_NOT_AVAILABLE)
            node, _ = self.tree.mkdir(uid, path, parents=True)
        return node if node is not None and node.is_dir else None

    def gather(self, uid: str, create: bool = True) -> dict[int, tuple[str, Node]]:
        """All notes of ``uid``: file id → (view path, node), in folder-walk order.

        From Notes 6.0.2 the list leaves out hidden folders (nextcloud/notes
        ``lib/Service/NotesService.php`` ``gatherNoteFiles`` skips a folder whose name starts
        with ``.``, commit 33d9d402: the Text editor's ``.attachments.<id>``), while
        ``GET /notes/{id}`` (``getFileById``) still answers a note inside one."""
        folder = self.notes_folder(uid, create)
        if folder is None or folder.id in self.tree.failed:  # FailedCache: no contents
            return {}
        skip_hidden = version_tuple(self.sim.apps.get("notes", "6.0.2")) >= (6, 0, 2)
        root = self.notes_path(uid).rstrip("/")
        out: dict[int, tuple[str, Node]] = {}
        for path, node in self.tree.walk_view(uid, self.notes_path(uid)):
            if node.is_dir or not self.is_note_name(uid, node.name):
                continue
            folders = posixpath.dirname(path)[len(root) :].split("/")
            if skip_hidden and any(part.startswith(".") for part in folders):
                continue
            out[node.id] = (path, node)
        return out

    def find(self, uid: str, note_id: int) -> tuple[str, Node]:
        """The note ``note_id`` of ``uid`` or a 404 :class:`_NoteError`."""
        node = self.tree.nodes.get(note_id)
        if node is None or node.is_dir or not self.is_note_name(uid, node.name):
            raise _NoteError(404, NOTE_DOES_NOT_EXIST)
        path = self.tree.view_path(uid, node)
        root = self.notes_path(uid)
        if path is None or not path.startswith(root.rstrip("/") + "/"):
            raise _NoteError(404, NOTE_DOES_NOT_EXIST)
        return path, node

    def category(self, uid: str, path: str) -> str:
        """Category of the note at ``path``: folder relative to the notes folder, or ``""``."""
        root = self.notes_path(uid).rstrip("/")
        parent = posixpath.dirname(path)
        return parent[len(root) + 1 :] if parent.startswith(root + "/") else ""

    def note_data(
        self, uid: str, path: str, node: Node, exclude: list[str] | tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """Note JSON in the real field order (without ``etag``)."""
        data: dict[str, Any] = {}
        if "id" not in exclude:
            data["id"] = node.id
        if "title" not in exclude:
            data["title"] = pathinfo(node.name)[0]
        if "modified" not in exclude:
            data["modified"] = node.mtime
        if "category" not in exclude:
            data["category"] = self.category(uid, path)
        if "favorite" not in exclude:
            data["favorite"] = uid in node.favorite_of
        if "readonly" not in exclude:
            data["readonly"] = not self.tree.can_write(uid, node)
        data["internalPath"] = path
        data["shareTypes"] = self.tree.share_types(uid, node)
        data["isShared"] = bool(data["shareTypes"])
        data["error"] = False
        data["errorType"] = ""
        if "content" not in exclude:
            if self.tree.is_blocked(node):
                data["content"] = f"Error: {NOT_PERMITTED}"
                data["error"] = True
                data["errorType"] = NOT_PERMITTED
                data["readonly"] = True
            else:
                data["content"] = self.content(node)
        return data

    @staticmethod
    def content(node: Node) -> str:
        """File content as Notes returns it (UTF-8, BOMs removed)."""
        text = node.content.decode("utf-8", errors="replace")
        return text.replace("\ufeff", "").replace("\uffef", "")

    def update_meta(self, uid: str, path: str, node: Node, force: bool) -> dict[str, Any]:
        """``MetaService.updateIfNeeded``: refresh etag, bump ``lastUpdate`` on change."""
        metas = self.sim.notes_meta.setdefault(uid, {})
        now = self.tree.now()
        meta = metas.get(node.id)
        if meta is None:
            meta = {"lastUpdate": now, "etag": None, "fileEtag": None, "contentEtag": None}
            metas[node.id] = meta
            force = True
        generate = force or not meta["contentEtag"]
        if node.etag != meta["fileEtag"]:
            meta["fileEtag"] = node.etag
            generate = True
        if generate:
            blocked = self.tree.is_blocked(node)
            meta["contentEtag"] = "" if blocked else _md5(self.content(node))
        data = self.note_data(uid, path, node)
        etag = _md5(
            php_json_encode(
                [
                    node.id,
                    data["title"],
                    data["modified"],
                    data["category"],
                    data["favorite"],
                    data["readonly"],
                    meta["contentEtag"],
                ]
            )
        )
        if etag != meta["etag"]:
            meta["etag"] = etag
            meta["lastUpdate"] = now
        return meta

    def full(
        self, uid: str, path: str, node: Node, exclude: list[str] | tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """Note JSON with ``etag`` (meta refreshed)."""
        meta = self.update_meta(uid, path, node, True)
        data = self.note_data(uid, path, node, exclude)
        data["etag"] = meta["etag"]
        return data

    def note_etag(self, uid: str, note_id: int) -> str | None:
        """Current note etag of ``note_id`` for ``uid`` (None when not a note)."""
        with self.sim.lock:
            try:
                path, node = self.find(uid, note_id)
            except _NoteError:
                return None
            return str(self.update_meta(uid, path, node, True)["etag"])

    # ------------------------------------------------------------------ writes

    def _category_folder(self, uid: str, category: str) -> str:
        cats = [c for c in (sanitise_path(c) for c in category.split("/")) if c]
        path = norm_path("/".join([self.notes_path(uid), *cats]))
        self.tree.mkdir(uid, path, parents=True)
        return path

    def _file_name(self, uid: str, folder: str, title: str, suffix: str, note_id: int) -> str:
        title = safe_title(title)
        while True:
            name = title + suffix
            existing = self.tree.resolve(uid, f"{folder}/{name}")
            if existing is None or existing.id == note_id:
                return name
            m = re.search(r"\s\((\d+)\)$", title)
            if m:
                id_suffix = f" ({int(m.group(1)) + 1})"
                base = title[: m.start()]
            else:
                id_suffix = " (2)"
                base = title
            title = base[: MAX_TITLE_LENGTH - len(id_suffix)] + id_suffix

    def _delete_empty_folder(self, uid: str, folder: str) -> None:
        root = self.notes_path(uid)
        node = self.tree.resolve(uid, folder)
        if node is not None and norm_path(folder) != root and node.is_dir and not node.children:
            self.tree.delete(uid, folder)

    def create(self, uid: str, params: dict[str, Any]) -> dict[str, Any]:
        """``POST /notes``: new file (Created + Written), then the content (Written)."""
        category = str(params.get("category") or "")
        title = str(params.get("title") or "")
        content = str(params.get("content") or "")
        modified = int(params.get("modified") or 0)
        favorite = params.get("favorite") in (True, "true", "1", 1)
        folder = self._category_folder(uid, category)
        name = self._file_name(uid, folder, title, self.file_suffix(uid), -1)
        path = f"{folder}/{name}"
        node, _ = self.tree.put_file(uid, path, b"")
        self.tree.put_file(uid, path, content.encode())
        if modified:
            self.tree.touch(uid, path, modified, event=True)
        if favorite:
            node.favorite_of.add(uid)
        return self.full(uid, path, node)

    def update(
        self, uid: str, note_id: int, params: dict[str, Any], if_match: str
    ) -> dict[str, Any]:
        """``PUT /notes/{id}`` (``If-Match`` checked against the note etag)."""
        path, node = self.find(uid, note_id)
        if if_match:
            meta = self.update_meta(uid, path, node, True)
            if f'"{meta["etag"]}"' not in re.split(r",\s*", if_match):
                raise _EtagMismatch(self.full(uid, path, node))
        writable = self.tree.can_write(uid, node)
        content = params.get("content")
        if content is not None and str(content) != self.content(node):
            if not writable:
                raise _NoteError(403, NOTE_NOT_WRITABLE)
            self.tree.put_file(uid, path, str(content).encode())
        modified = params.get("modified")
        if modified is not None and int(modified) != node.mtime:
            if not writable:
                raise _NoteError(403, NOTE_NOT_WRITABLE)
            self.tree.touch(uid, path, int(modified), event=True)
        title = params.get("title")
        category = params.get("category")
        cur_title = pathinfo(node.name)[0]
        cur_category = self.category(uid, path)
        if (title is not None and str(title) != cur_title) or (
            category is not None and str(category) != cur_category
        ):
            if not writable:
                raise _NoteError(403, NOTE_NOT_WRITABLE)
            new_title = str(title) if title is not None else cur_title
            new_category = str(category) if category is not None else cur_category
            old_parent = posixpath.dirname(path)
            folder = self._category_folder(uid, new_category)
            suffix = "." + pathinfo(node.name)[1]
            name = self._file_name(uid, folder, new_title, suffix, node.id)
            new_path = f"{folder}/{name}"
            if new_path != path:
                self.tree.move(uid, path, new_path)
                path = new_path
            self._delete_empty_folder(uid, old_parent)
        favorite = params.get("favorite")
        if favorite is not None:
            if favorite in (True, "true", "1", 1):
                node.favorite_of.add(uid)
            else:
                node.favorite_of.discard(uid)
        return self.full(uid, path, node)

    def delete(self, uid: str, note_id: int) -> None:
        """``DELETE /notes/{id}``: the file goes to the trash (delete events)."""
        path, node = self.find(uid, note_id)
        if not self.tree.can_write(uid, node):
            raise _NoteError(403, NOTE_NOT_WRITABLE)
        self.tree.delete(uid, path)
        self._delete_empty_folder(uid, posixpath.dirname(path))

    # ------------------------------------------------------------------ list

    def list(
        self, uid: str, params: dict[str, Any]
    ) -> tuple[dict[int, dict[str, Any]], dict[str, str]]:
        """``GET /notes``: (notes keyed by id in response order, extra headers)."""
        category = params.get("category")
        exclude = str(params.get("exclude") or "").split(",")
        prune_before = int(params.get("pruneBefore") or 0)
        chunk_size = int(params.get("chunkSize") or 0)
        cursor_str = params.get("chunkCursor")
        cursor = None
        if cursor_str:
            m = re.fullmatch(r"(\d+)-(\d+)-(\d+)", str(cursor_str))
            if m:
                cursor = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        last_update = cursor[0] if cursor else self.tree.now()
        notes = self.gather(uid, create=True)
        metas = self.sim.notes_meta.setdefault(uid, {})
        for stale in [fid for fid in metas if fid not in notes]:
            del metas[stale]
        meta_notes = {
            fid: (path, node, self.update_meta(uid, path, node, False))
            for fid, (path, node) in notes.items()
        }
        if category is not None:
            meta_notes = {
                fid: v for fid, v in meta_notes.items() if self.category(uid, v[0]) == category
            }

        def keep(item: tuple[int, tuple[str, Node, dict[str, Any]]]) -> bool:
            fid, (_, _, meta) = item
            pruned = prune_before and meta["lastUpdate"] < prune_before
            before = cursor is not None and (
                meta["lastUpdate"] < cursor[1]
                or (meta["lastUpdate"] == cursor[1] and fid <= cursor[2])
            )
            return not pruned and not before

        full = sorted(filter(keep, meta_notes.items()), key=lambda i: (i[1][2]["lastUpdate"], i[0]))
        chunk = full[:chunk_size] if chunk_size else full
        pending = len(full) - len(chunk)
        data: dict[int, dict[str, Any]] = {}
        for fid, (path, node, meta) in chunk:
            note = self.note_data(uid, path, node, exclude)
            note["etag"] = meta["etag"]
            data[fid] = note
        headers: dict[str, str] = {"Last-Modified": rfc2822_date(last_update)}
        if pending:
            last_fid, (_, _, last_meta) = chunk[-1]
            headers["X-Notes-Chunk-Cursor"] = f"{last_update}-{last_meta['lastUpdate']}-{last_fid}"
            headers["X-Notes-Chunk-Pending"] = str(pending)
        else:
            for fid in meta_notes:
                data.setdefault(fid, {"id": fid})
        return data, headers

    # ------------------------------------------------------------------ HTTP

    def handle(self, request: Request, uid: str | None) -> Response:
        """Dispatch ``/index.php/apps/notes/api/{v1,v0.2}/…``."""
        if uid is None:
            return json_response({"message": "Current user is not logged in"}, 401)
        m = re.match(r"^(?:/index\.php)?/apps/notes/api/(v1|v0\.2|v1\.\d+)(/.*)?$", request.path)
        route = (m.group(2) or "/").rstrip("/") if m else ""
        method = request.method.upper()
        with self.sim.lock:
            resp = self._route(request, uid, method, route)
        resp.headers["X-Notes-API-Versions"] = API_VERSIONS
        return resp

    def _route(self, request: Request, uid: str, method: str, route: str) -> Response:
        params = request_params(request)
        handlers: dict[tuple[str, str], Callable[[], Response]] = {
            ("GET", "/notes"): lambda: self._http_list(request, uid, params),
            ("POST", "/notes"): lambda: json_response(self.create(uid, params)),
            ("GET", "/settings"): lambda: json_response(self.public_settings(uid)),
            ("PUT", "/settings"): lambda: self._http_settings(uid, params),
        }
        try:
            handler = handlers.get((method, route))
            if handler is not None:
                return handler()
            m = re.fullmatch(r"/notes/(\d+)", route)
            if m:
                note_id = int(m.group(1))
                if method == "GET":
                    path, node = self.find(uid, note_id)
                    exclude = str(params.get("exclude") or "").split(",")
                    data = self.full(uid, path, node, exclude)
                    if not_modified(request, data["etag"]):
                        return self._not_modified(data["etag"])
                    return json_response(data, headers={"ETag": f'"{data["etag"]}"'})
                if method == "PUT":
                    data = self.update(uid, note_id, params, request.headers.get("If-Match", ""))
                    return json_response(data)
                if method == "DELETE":
                    self.delete(uid, note_id)
                    return json_response([])
        except _EtagMismatch as exc:
            return json_response(exc.data, 412)
        except _NoteError as exc:
            return self.error(exc.status, exc.error_type)
        except StateError:
            return self.error(500, NOT_PERMITTED)
        return Response(b"", status=404, content_type="text/html; charset=UTF-8")

    def error(self, status: int, error_type: str) -> Response:
        """An error answer: the exception's class before Notes 6.0.2, ``Exception`` from it."""
        version = version_tuple(self.sim.apps.get("notes", "6.0.2"))
        return json_response(
            {"errorType": "Exception" if version >= (6, 0, 2) else error_type}, status
        )

    @staticmethod
    def _not_modified(etag: str, headers: dict[str, str] | None = None) -> Response:
        resp = Response(b"", status=304)
        resp.headers["ETag"] = f'"{etag}"'
        for key, value in (headers or {}).items():
            resp.headers[key] = value
        return resp

    def _http_list(self, request: Request, uid: str, params: dict[str, Any]) -> Response:
        data, headers = self.list(uid, params)
        keyed: Any = {str(fid): note for fid, note in data.items()} if data else []
        etag = _md5(php_json_encode(keyed))
        if not_modified(request, etag, headers["Last-Modified"]):
            return self._not_modified(etag, headers)
        headers["ETag"] = f'"{etag}"'
        return json_response(list(data.values()), headers=headers)

    def _http_settings(self, uid: str, params: dict[str, Any]) -> Response:
        self.set_settings(uid, params)
        return json_response(self.public_settings(uid))
