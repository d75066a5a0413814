"""Bulk upload (``POST /remote.php/dav/bulk``): the desktop client's way of sending many small
files in one request (capability ``dav.bulkupload`` ``"1.0"``).

nextcloud/server ``apps/dav/lib/BulkUpload/MultipartRequestParser.php`` reads a
``multipart/related`` body (``Content-Type: multipart/related; boundary=…``, the boundary
maybe quoted): each part is ``--boundary\\r\\n``, header lines, an empty line, exactly
``Content-Length`` bytes whose MD5 must be ``X-File-MD5``, then ``\\r\\n``; the body ends with
``--boundary--\\r\\n``. ``BulkUploadPlugin::httpPost`` writes each part with
``IUserFolder::newFile($headers['x-file-path'], $content)`` and then ``$node->touch($mtime)``
(``X-File-MTime`` or ``X-OC-MTime`` through ``MtimeSanitizer``; none: the time now), and answers
200 with a JSON object keyed by each part's path: ``{"error": false, "etag", "fileid"
(``DavUtil::getDavFileId``), "permissions" (``DavUtil::getDavPermissions``)}``, or ``{"error":
true, "message"}`` for a part that failed (the others are written). A body it cannot parse
(a bad boundary, a missing ``Content-Length`` or ``X-File-MD5``, a wrong MD5) stops the
request: 400 with the object of the parts written before.

The events are those of ``Folder::newFile`` (``lib/private/Files/Node/Folder.php``: the root
view's ``file_put_contents``, whose ``create``/``update`` and ``write`` hooks
``lib/private/Files/Node/HookConnector.php`` dispatches: BeforeNodeCreatedEvent,
BeforeNodeWrittenEvent, NodeCreatedEvent, NodeWrittenEvent for a new file; BeforeNodeWrittenEvent,
NodeWrittenEvent for an existing one) followed by the touch's BeforeNodeTouchedEvent and
NodeTouchedEvent (``Node::touch`` → ``View::touch``), all in the uploader's view. *Guesses*:
the messages of a part that failed (the simulator's own) and the 400 answer's body of a
header line without ``:`` (a plain ``Sabre\\DAV\\Exception``, caught as any other).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from ncindex.simulator.mtime import MtimeError, sanitize_mtime
from ncindex.simulator.phpjson import php_json_encode
from ncindex.simulator.state import StateError
from ncindex.simulator.xmlutil import dav_error

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator
    from ncindex.simulator.webdav import WebDav

__all__ = ["BulkBodyError", "BulkDav", "parse_parts"]


class BulkBodyError(ValueError):
    """A bulk body ``MultipartRequestParser`` refuses; the message is its exception's."""


def _boundary(content_type: str) -> str:
    """``parseBoundaryFromHeaders``: the boundary of ``multipart/related; boundary=…``. Its
    ``[$mimeType, $boundary] = explode(';', …)`` and ``[$key, $value] = explode('=', …)``
    take the first two pieces, so a parameter after the boundary (``; charset=utf-8``) is
    ignored, and so is what follows a second ``=``; fewer pieces are refused here (PHP only
    warns of the missing key: the answer is a *guess*)."""
    mime, sep, rest = content_type.partition(";")
    key, eq, value = rest.split(";", 1)[0].partition("=")
    if not sep or not eq:
        raise BulkBodyError("Error while parsing boundary in Content-Type header.")
    value = value.split("=", 1)[0].strip()
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    if mime.strip() != "multipart/related":
        raise BulkBodyError("Content-Type must be multipart/related")
    if key.strip() != "boundary":
        raise BulkBodyError("Boundary is invalid")
    return value


def parse_parts(
    content_type: str | None, body: bytes
) -> tuple[list[tuple[dict[str, str], bytes]], str | None]:
    """The parts of a bulk ``body`` as ``MultipartRequestParser`` reads them, in order, each
    ``(headers with lower-cased names, content)``, and the refusal that stopped the reading
    (``None``: read to the last boundary). Raises :class:`BulkBodyError` for a
    ``Content-Type`` it cannot take (nothing read)."""
    if content_type is None:
        raise BulkBodyError("Content-Type can not be null")
    boundary = _boundary(content_type)
    first, last = f"--{boundary}\r\n".encode(), f"--{boundary}--\r\n".encode()
    parts: list[tuple[dict[str, str], bytes]] = []
    at = 0
    while not body.startswith(last, at):
        if not body.startswith(first, at):
            return parts, "Boundary not found where it should be."
        at += len(first)
        headers: dict[str, str] = {}
        while True:
            end = body.find(b"\n", at)
            line = body[at : end + 1] if end >= 0 else body[at:]
            at += len(line)
            if line == b"\r\n":
                break
            text = line.decode("utf-8", "replace")
            if not line or ":" not in text:
                return parts, "An error occurred while reading headers of a part"
            key, _, value = text.partition(":")
            headers[key.strip().lower()] = value.strip()
        if "content-length" not in headers:
            return parts, "The Content-Length header must not be null."
        if "x-file-md5" not in headers:
            return parts, "The X-File-MD5 header must not be null."
        length = _php_int(headers["content-length"])
        content = body[at : at + length]
        if hashlib.md5(content).hexdigest() != headers["x-file-md5"]:  # noqa: S324 (the format)
            return parts, "Computed md5 hash is incorrect."
        if length and at + length >= len(body):
            return parts, "Unexpected EOF while reading stream."
        at += length + 2  # the part's closing \r\n
        parts.append((headers, content))
    return parts, None


def _php_int(text: str) -> int:
    """PHP's ``(int)`` of a header value: its leading digits, 0 without any."""
    digits = ""
    for ch in text.strip():
        if not ch.isdigit():
            break
        digits += ch
    return int(digits or 0)


class BulkDav:
    """``POST /remote.php/dav/bulk`` (module docstring)."""

    def __init__(self, sim: NextcloudSimulator, webdav: WebDav) -> None:
        self.sim = sim
        self.webdav = webdav

    def post(self, request: Request, uid: str) -> Response:
        """Write each part of the body as ``uid``; 200 with the per-path results, 400 when
        the body could not be read to its end (the parts before it written). A
        ``Content-Type`` the parser refuses is thrown before ``httpPost``'s ``try``: sabre's
        400 ``BadRequest``."""
        try:
            parts, refused = parse_parts(request.headers.get("Content-Type"), request.get_data())
        except BulkBodyError as exc:
            return dav_error(400, "BadRequest", str(exc))
        written: dict[str, Any] = {}
        with self.sim.lock:
            for headers, content in parts:
                path = headers.get("x-file-path", "")
                written[path] = self._write(uid, path, headers, content)
        return Response(php_json_encode(written or []), status=400 if refused else 200)

    def _write(
        self, uid: str, path: str, headers: dict[str, str], content: bytes
    ) -> dict[str, Any]:
        """``newFile`` then ``touch`` of one part; its entry of the answer."""
        stamp = headers.get("x-file-mtime", headers.get("x-oc-mtime"))
        tree = self.sim.tree
        try:
            mtime = tree.now() if stamp is None else sanitize_mtime(stamp)
            tree.put_file(uid, path, content, make_parents=False)
            node = tree.touch(uid, path, mtime, event=True)
        except (MtimeError, StateError) as exc:
            return {"error": True, "message": str(exc)}
        return {
            "error": False,
            "etag": node.etag,
            "fileid": self.webdav.dav_file_id(node),
            "permissions": self.webdav.permissions(uid, node),
        }
