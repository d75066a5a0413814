"""The trash bin over WebDAV: ``/remote.php/dav/trashbin/{uid}/trash`` and ``…/restore``.

PROPFIND lists deleted items with ``nc:trashbin-filename``, ``nc:trashbin-original-location``
and ``nc:trashbin-deletion-time``; ``MOVE`` of an item to ``…/restore/<name>`` restores it
(NodeRestoredEvent); ``DELETE`` of an item (or of ``trash``) deletes for good, without events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from lxml import etree
from werkzeug.wrappers import Request, Response

from ncindex.simulator.state import TrashItem
from ncindex.simulator.xmlutil import (
    DAV,
    NC,
    NSMAP,
    OC,
    XML_CONTENT_TYPE,
    XmlBodyError,
    clark,
    dav_error,
    encode_path,
    http_date,
    parse_xml,
    to_bytes,
)

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator

__all__ = ["TrashbinDav"]

_DEFAULT = (
    clark(NC, "trashbin-filename"),
    clark(NC, "trashbin-original-location"),
    clark(NC, "trashbin-deletion-time"),
    clark(OC, "fileid"),
    clark(DAV, "getcontentlength"),
    clark(DAV, "resourcetype"),
)


class TrashbinDav:
    """Handlers for ``/remote.php/dav/trashbin/{uid}/…``."""

    def __init__(self, sim: NextcloudSimulator) -> None:
        self.sim = sim
        self.tree = sim.tree

    def handle(self, request: Request, uid: str, rest: str) -> Response:
        """``rest`` is the path after ``/remote.php/dav/trashbin``."""
        owner, _, sub = rest.strip("/").partition("/")
        if owner != uid:
            return dav_error(404, "NotFound", f"Principal with name {owner} not found")
        method = request.method.upper()
        base = f"{self.sim.web_root}/remote.php/dav/trashbin/{uid}/trash"
        with self.sim.lock:
            if sub in ("trash", ""):
                if method == "PROPFIND":
                    return self._propfind(request, uid, base)
                if method == "DELETE":
                    self.tree.empty_trash(uid)
                    return Response(b"", status=204)
            if sub.startswith("trash/"):
                name = sub[len("trash/") :].split("/", 1)[0]
                item = self.tree.trash_item(uid, name)
                if item is None or item.trash_name != name:
                    return dav_error(404, "NotFound", f"File with name {name} could not be located")
                if method == "DELETE":
                    self.tree.purge(uid, name)
                    return Response(b"", status=204)
                if method == "MOVE":
                    dest = unquote(urlsplit(request.headers.get("Destination", "")).path)
                    restore = f"{self.sim.web_root}/remote.php/dav/trashbin/{uid}/restore/"
                    if not dest.startswith(restore):
                        return dav_error(
                            403, "Forbidden", "Can only restore into the restore folder"
                        )
                    self.tree.restore(uid, name)
                    return Response(b"", status=201)
                if method == "PROPFIND":
                    try:
                        props = self._props(request)
                    except XmlBodyError as exc:
                        return dav_error(400, "BadRequest", str(exc))
                    root = etree.Element(clark(DAV, "multistatus"), nsmap=NSMAP)
                    root.append(self._response(base, item, props))
                    return Response(to_bytes(root), status=207, content_type=XML_CONTENT_TYPE)
            return dav_error(405, "MethodNotAllowed", f"{method} is not allowed here")

    @staticmethod
    def _props(request: Request) -> list[str]:
        body = parse_xml(request.get_data())
        prop = body.find(clark(DAV, "prop")) if body is not None else None
        if prop is None:
            return list(_DEFAULT)
        return [c.tag for c in prop if isinstance(c.tag, str)]

    def _propfind(self, request: Request, uid: str, base: str) -> Response:
        try:
            props = self._props(request)
        except XmlBodyError as exc:
            return dav_error(400, "BadRequest", str(exc))
        root = etree.Element(clark(DAV, "multistatus"), nsmap=NSMAP)
        top = etree.SubElement(root, clark(DAV, "response"))
        etree.SubElement(top, clark(DAV, "href")).text = base + "/"
        ps = etree.SubElement(top, clark(DAV, "propstat"))
        prop = etree.SubElement(ps, clark(DAV, "prop"))
        etree.SubElement(
            etree.SubElement(prop, clark(DAV, "resourcetype")), clark(DAV, "collection")
        )
        etree.SubElement(ps, clark(DAV, "status")).text = "HTTP/1.1 200 OK"
        if request.headers.get("Depth", "1").strip() != "0":
            for item in self.tree.trash_items(uid):
                root.append(self._response(base, item, props))
        return Response(to_bytes(root), status=207, content_type=XML_CONTENT_TYPE)

    def _value(self, item: TrashItem, name: str) -> str | None:
        """A trash item's property as ``apps/files_trashbin/lib/Sabre/PropfindPlugin.php``
        ``propFind`` answers it: ``oc:id`` and ``oc:fileid`` are the plain file id, the
        permissions always ``GD`` (read + delete), the etag a fake one (the mtime, unquoted:
        "it is only needed to identify the preview image"), the display name the file name."""
        node = item.node
        values: dict[str, str | None] = {
            clark(NC, "trashbin-filename"): node.name,
            clark(NC, "trashbin-original-location"): item.original_path.lstrip("/"),
            clark(NC, "trashbin-title"): node.name,
            clark(NC, "trashbin-deletion-time"): str(item.deleted_at),
            clark(DAV, "displayname"): node.name,
            clark(OC, "id"): str(node.id),
            clark(OC, "fileid"): str(node.id),
            clark(OC, "permissions"): "GD",
            clark(OC, "size"): str(node.size),
            clark(DAV, "getcontentlength"): None if node.is_dir else str(len(node.content)),
            clark(DAV, "getcontenttype"): None if node.is_dir else node.mime,
            clark(DAV, "getlastmodified"): http_date(node.mtime),
            clark(DAV, "getetag"): str(node.mtime),
        }
        return values.get(name)

    def _response(self, base: str, item: TrashItem, props: list[str]) -> etree._Element:
        resp = etree.Element(clark(DAV, "response"))
        href = f"{base}/{encode_path(item.trash_name)}" + ("/" if item.node.is_dir else "")
        etree.SubElement(resp, clark(DAV, "href")).text = href
        found: list[tuple[str, str | None]] = []
        missing: list[str] = []
        for name in props:
            if name == clark(DAV, "resourcetype"):
                found.append((name, None))
                continue
            value = self._value(item, name)
            if value is None:
                missing.append(name)
            else:
                found.append((name, value))
        ps = etree.SubElement(resp, clark(DAV, "propstat"))
        prop_el = etree.SubElement(ps, clark(DAV, "prop"))
        for name, value in found:
            el = etree.SubElement(prop_el, name)
            if name == clark(DAV, "resourcetype"):
                if item.node.is_dir:
                    etree.SubElement(el, clark(DAV, "collection"))
            else:
                el.text = value
        etree.SubElement(ps, clark(DAV, "status")).text = "HTTP/1.1 200 OK"
        if missing:
            ps = etree.SubElement(resp, clark(DAV, "propstat"))
            prop_el = etree.SubElement(ps, clark(DAV, "prop"))
            for name in missing:
                etree.SubElement(prop_el, name)
            etree.SubElement(ps, clark(DAV, "status")).text = "HTTP/1.1 404 Not Found"
        return resp
