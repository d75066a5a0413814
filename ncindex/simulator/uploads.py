"""Chunked uploads (``/remote.php/dav/uploads/{uid}/{upload}``), as the desktop and mobile
clients send big files.

The client makes an upload folder (``MKCOL``), ``PUT`` s the chunks into it, then ``MOVE`` s
its ``.file`` to the target, with ``Destination`` (and ``OC-Total-Length``, ``X-OC-MTime``).
The upload folder is ``/{uid}/uploads/{upload}``, outside the user's ``files`` view, so
nothing done in it fires a hook or an event: nextcloud/server ``lib/private/Files/View.php``
``shouldEmitHooks`` is true only below ``Filesystem::getRoot()`` (``/{uid}/files``), and
``apps/dav/lib/Connector/Sabre/File.php`` ``emitPreHooks``/``emitPostHooks`` return when the
path has no hook path ("We only trigger hooks from inside default view").

The ``MOVE`` is the only write to the files view. sabre/dav ``CorePlugin::httpMove`` first
checks the ``Destination`` (``Server::getCopyAndMoveInfo``: 409 without its folder, 412 for
an existing one with ``Overwrite: F``: :meth:`WebDav.target_refused`), then
``apps/dav/lib/Upload/ChunkingPlugin.php``
``beforeMove`` refuses a folder as the target (400 ``BadRequest`` "The given destination … is
a directory."), checks ``OC-Total-Length`` against the chunks' sizes (400 ``BadRequest``
"Chunks on server do not sum up to … but to … bytes") and moves without sabre's delete of an
existing target (``performMove``: 204 when it existed, else 201). sabre/dav ``Tree::move``
copies:
``apps/dav/lib/Connector/Sabre/Directory.php`` ``moveInto`` returns false for a
``FutureFile`` ("fallback to default copy+delete handling"), so ``Tree::copyNode`` calls the
target folder's ``createFile`` with the assembled stream (``apps/dav/lib/Upload/
FutureFile.php`` ``get``, ``AssemblyStream``: the chunks in ``strnatcmp`` order of their
names) — ``File::put``, as for a plain ``PUT``: BeforeNodeCreated/BeforeNodeWritten and
NodeCreated/NodeWritten for a new target, BeforeNodeWritten/NodeWritten (same id) for an
existing one, the ``X-OC-MTime`` of the ``MOVE`` request applied by a touch in between —
then deletes the ``FutureFile``, which deletes the whole upload folder
(``FutureFile::delete``). No event names the upload folder, a chunk or a ``.part`` file.

``apps/dav/lib/Upload/ChunkingV2Plugin.php`` (a ``Destination`` on the ``MKCOL``) takes over
only on a storage with ``IChunkedFileWrite`` (S3 object storage) and a Redis or Memcached
distributed cache (``checkPrerequisites``); it too sends the target's events only
(``completeChunkedWrite``: ``emitPreHooks``/``emitPostHooks`` on the target; the staging
file's ``Node::move``/``copy`` from the uploads folder fires no typed event, ``View::rename``
emitting nothing for a source outside the files view). The simulator answers as on local
storage, the ``MOVE`` answer carrying a ``PUT``'s headers (``OC-FileId``, ``ETag``: a
*guess*). *Not modelled*: chunk-name validation, quota, and
``MOVE``/``COPY`` of anything but ``.file``, refused 403 (a simplification). The answers for
an unknown upload folder (404) and for another user's uploads (404) are *guesses* of sabre's.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from werkzeug.wrappers import Request, Response

from ncindex.simulator.xmlutil import dav_error

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator
    from ncindex.simulator.webdav import WebDav

__all__ = ["UploadsDav", "natural_key"]


def natural_key(name: str) -> list[int | str]:
    """A sort key ordering chunk names as PHP's ``strnatcmp`` does for the names clients
    send (digit runs compared as numbers: ``"2"`` before ``"10"``)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


class UploadsDav:
    """``/remote.php/dav/uploads/{uid}/…``: upload folders of chunks, assembled into a file of
    ``uid``'s files view by the ``MOVE`` of their ``.file`` (module docstring)."""

    def __init__(self, sim: NextcloudSimulator, webdav: WebDav) -> None:
        self.sim = sim
        self.webdav = webdav
        #: ``(uid, upload folder name)`` → chunk name → bytes
        self.folders: dict[tuple[str, str], dict[str, bytes]] = {}

    def handle(self, request: Request, uid: str, rest: str) -> Response:
        """One request on ``/uploads{rest}`` by ``uid``: ``MKCOL`` and ``DELETE`` of an upload
        folder, ``PUT`` of a chunk, ``MOVE`` of ``.file``."""
        owner, _, sub = rest.strip("/").partition("/")
        if owner != uid:
            return dav_error(404, "NotFound", f"Principal with name {owner} not found")
        upload, _, chunk = sub.partition("/")
        method = request.method.upper()
        with self.sim.lock:
            key = (uid, upload)
            if method == "MKCOL" and upload and not chunk:
                if key in self.folders:
                    return dav_error(
                        405, "MethodNotAllowed", "The resource you tried to create already exists"
                    )
                self.folders[key] = {}
                return Response(b"", status=201)
            chunks = self.folders.get(key)
            if chunks is None:
                return dav_error(404, "NotFound", f"File with name {upload} could not be located")
            if method == "DELETE" and not chunk:
                del self.folders[key]
                return Response(b"", status=204)
            if method == "PUT" and chunk and "/" not in chunk:
                existed = chunk in chunks
                chunks[chunk] = request.get_data()
                return Response(b"", status=204 if existed else 201)
            if method == "MOVE" and chunk == ".file":
                return self._assemble(request, uid, key, chunks)
            return dav_error(403, "Forbidden", f"{method} is not modelled on uploads")

    def _assemble(
        self, request: Request, uid: str, key: tuple[str, str], chunks: dict[str, bytes]
    ) -> Response:
        """The ``MOVE`` of ``.file``: the chunks, in name order, written to the
        ``Destination`` by ``File::put`` (:meth:`WebDav.write_file`), then the upload folder
        deleted."""
        root = self.sim.web_root
        target = self.webdav.destination(request, uid, f"{root}/remote.php/dav/files/{uid}")
        if target is None:
            return dav_error(400, "BadRequest", "The destination header was not understood")
        refused = self.webdav.target_refused(uid, target, self.webdav.overwrite_of(request))
        if refused is not None:  # sabre asks before ChunkingPlugin::beforeMove
            return refused
        existing = self.sim.tree.resolve(uid, target)
        if existing is not None and existing.is_dir:
            where = f"files/{uid}{target}".rstrip("/")
            return dav_error(400, "BadRequest", f"The given destination {where} is a directory.")
        data = b"".join(chunks[name] for name in sorted(chunks, key=natural_key))
        expected = request.headers.get("OC-Total-Length")
        if expected is not None and expected != str(len(data)):
            return dav_error(
                400,
                "BadRequest",
                f"Chunks on server do not sum up to {expected} but to {len(data)} bytes",
            )
        response = self.webdav.write_file(request, uid, target, data)
        if response.status_code < 300:
            del self.folders[key]
        return response
