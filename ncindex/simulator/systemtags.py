"""Collaborative (system) tags: the tag store and the ``/remote.php/dav/systemtags*`` endpoints.

Visibility and assignability follow ``ISystemTagManager``: a user sees a tag when it is
user-visible (admins see all) and may assign it when it is visible and user-assignable (admins
always). Assigning/unassigning fires ``OCP\\SystemTag\\TagAssignedEvent`` /
``TagUnassignedEvent`` with ``objectType`` ``"files"``, ``objectIds`` as strings and ``tagIds``
as integers (reference §1.4, §3.2–3.3).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lxml import etree
from werkzeug.wrappers import Request, Response

from ncindex.simulator.events import TAG_ASSIGNED, TAG_UNASSIGNED
from ncindex.simulator.state import Node
from ncindex.simulator.xmlutil import (
    DAV,
    NC,
    NSMAP,
    OC,
    XML_CONTENT_TYPE,
    XmlBodyError,
    clark,
    dav_error,
    parse_xml,
    to_bytes,
)

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator

__all__ = ["SystemTag", "SystemTagStore", "SystemTagsDav", "natural_key"]


@dataclass
class SystemTag:
    """A collaborative tag: ``id``, ``name``, visibility flags, ``color`` (hex or ``""``)."""

    id: int
    name: str
    user_visible: bool = True
    user_assignable: bool = True
    color: str = ""
    groups: list[str] = field(default_factory=list)


def natural_key(text: str) -> list[Any]:
    """Sort key for natural ordering (``tag2`` before ``tag10``), case-insensitive."""
    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", text)]


def _bool(value: bool) -> str:
    return "true" if value else "false"


class SystemTagStore:
    """Tags by id; assignments live on :class:`~ncindex.simulator.state.Node` ``tags``."""

    def __init__(self, sim: NextcloudSimulator) -> None:
        self.sim = sim
        self.tags: dict[int, SystemTag] = {}
        self._next_id = 1

    def _admin(self, uid: str) -> bool:
        user = self.sim.tree.users.get(uid)
        return bool(user and user.admin)

    def can_see(self, uid: str, tag: SystemTag) -> bool:
        """``canUserSeeTag``: user-visible tags, or any tag for admins."""
        return tag.user_visible or self._admin(uid)

    def can_assign(self, uid: str, tag: SystemTag) -> bool:
        """``canUserAssignTag``: visible and assignable, or admin."""
        return (tag.user_visible and tag.user_assignable) or self._admin(uid)

    def visible(self, uid: str, tag_id: int) -> bool:
        """True when tag ``tag_id`` exists and ``uid`` may see it."""
        tag = self.tags.get(tag_id)
        return tag is not None and self.can_see(uid, tag)

    def create(
        self,
        name: str,
        *,
        user_visible: bool = True,
        user_assignable: bool = True,
        color: str = "",
        groups: list[str] | None = None,
    ) -> SystemTag:
        """Create a tag; ``ValueError`` when the name exists with the same flags."""
        for tag in self.tags.values():
            if (
                tag.name == name
                and tag.user_visible == user_visible
                and tag.user_assignable == user_assignable
            ):
                raise ValueError("Tag already exists")
        tag = SystemTag(self._next_id, name, user_visible, user_assignable, color, groups or [])
        self.tags[tag.id] = tag
        self._next_id += 1
        return tag

    def assign(self, uid: str | None, node: Node, tag_id: int, *, session: bool = True) -> bool:
        """Assign; fires TagAssignedEvent when newly assigned. Returns True if it was new."""
        if tag_id in node.tags:
            return False
        node.tags.add(tag_id)
        payload = {"objectType": "files", "objectIds": [str(node.id)], "tagIds": [tag_id]}
        self.sim._dispatch(TAG_ASSIGNED, payload, uid if session else None)
        return True

    def unassign(self, uid: str | None, node: Node, tag_id: int, *, session: bool = True) -> bool:
        """Unassign; fires TagUnassignedEvent when it was assigned. True if removed."""
        if tag_id not in node.tags:
            return False
        node.tags.discard(tag_id)
        payload = {"objectType": "files", "objectIds": [str(node.id)], "tagIds": [tag_id]}
        self.sim._dispatch(TAG_UNASSIGNED, payload, uid if session else None)
        return True

    def tags_of(self, uid: str, node: Node) -> list[SystemTag]:
        """Tags on ``node`` that ``uid`` can see, natural-sorted by name."""
        tags = [self.tags[t] for t in node.tags if t in self.tags]
        return sorted((t for t in tags if self.can_see(uid, t)), key=lambda t: natural_key(t.name))

    def fill_prop(self, el: etree._Element, uid: str, node: Node) -> None:
        """Fill ``nc:system-tags`` for a PROPFIND response."""
        for tag in self.tags_of(uid, node):
            child = etree.SubElement(el, clark(NC, "system-tag"))
            child.set(clark(OC, "id"), str(tag.id))
            child.set(clark(OC, "can-assign"), _bool(self.can_assign(uid, tag)))
            child.set(clark(OC, "user-assignable"), _bool(tag.user_assignable))
            child.set(clark(OC, "user-visible"), _bool(tag.user_visible))
            child.set(clark(NC, "color"), tag.color)
            child.text = tag.name


class SystemTagsDav:
    """``/remote.php/dav/systemtags/`` and ``/remote.php/dav/systemtags-relations/files/``."""

    def __init__(self, sim: NextcloudSimulator) -> None:
        self.sim = sim
        self.store = sim.tags

    def handle(self, request: Request, uid: str) -> Response:
        """Dispatch one system-tag request for the authenticated ``uid``."""
        rest = request.path[len("/remote.php/dav") :].rstrip("/")
        method = request.method.upper()
        with self.sim.lock:
            if rest == "/systemtags":
                if method == "PROPFIND":
                    return self._propfind_tags(request, uid, None)
                if method == "POST":
                    return self._create(request, uid)
            m = re.fullmatch(r"/systemtags/(\d+)", rest)
            if m:
                if method == "PROPFIND":
                    return self._propfind_tags(request, uid, int(m.group(1)))
                return dav_error(405, "MethodNotAllowed", f"{method} is not allowed here")
            m = re.fullmatch(r"/systemtags-relations/files/(\d+)(?:/(\d+))?", rest)
            if m:
                return self._relations(request, uid, method, int(m.group(1)), m.group(2))
            return dav_error(
                404, "NotFound", f"File with name {rest.strip('/')} could not be located"
            )

    # ------------------------------------------------------------------ helpers

    def _props(self, request: Request) -> list[str] | None:
        body = parse_xml(request.get_data())
        if body is None:
            return None
        prop = body.find(clark(DAV, "prop"))
        return None if prop is None else [c.tag for c in prop if isinstance(c.tag, str)]

    def _tag_value(self, uid: str, tag: SystemTag, name: str) -> str | None:
        values = {
            clark(OC, "id"): str(tag.id),
            clark(OC, "display-name"): tag.name,
            clark(OC, "user-visible"): _bool(tag.user_visible),
            clark(OC, "user-assignable"): _bool(tag.user_assignable),
            clark(OC, "can-assign"): _bool(self.store.can_assign(uid, tag)),
            clark(NC, "color"): tag.color,
        }
        if name == clark(OC, "groups"):
            return "|".join(tag.groups) if self.store._admin(uid) else None
        if name == clark(NC, "files-assigned"):
            return None
        return values.get(name)

    def _response(
        self, root: etree._Element, href: str, uid: str, tag: SystemTag | None, props: list[str]
    ) -> None:
        resp = etree.SubElement(root, clark(DAV, "response"))
        etree.SubElement(resp, clark(DAV, "href")).text = href
        found: list[tuple[str, str]] = []
        missing: list[str] = []
        for name in props:
            value = None if tag is None else self._tag_value(uid, tag, name)
            if value is None and name == clark(DAV, "resourcetype"):
                found.append((name, ""))
                continue
            if value is None:
                missing.append(name)
            else:
                found.append((name, value))
        if found:
            ps = etree.SubElement(resp, clark(DAV, "propstat"))
            prop = etree.SubElement(ps, clark(DAV, "prop"))
            for name, value in found:
                child = etree.SubElement(prop, name)
                if name == clark(DAV, "resourcetype") and tag is None:
                    etree.SubElement(child, clark(DAV, "collection"))
                elif value:
                    child.text = value
            etree.SubElement(ps, clark(DAV, "status")).text = "HTTP/1.1 200 OK"
        if missing:
            ps = etree.SubElement(resp, clark(DAV, "propstat"))
            prop = etree.SubElement(ps, clark(DAV, "prop"))
            for name in missing:
                etree.SubElement(prop, name)
            etree.SubElement(ps, clark(DAV, "status")).text = "HTTP/1.1 404 Not Found"

    _DEFAULT = (
        clark(OC, "id"),
        clark(OC, "display-name"),
        clark(OC, "user-visible"),
        clark(OC, "user-assignable"),
        clark(OC, "can-assign"),
    )

    def _multistatus(
        self,
        uid: str,
        collection_href: str | None,
        items: list[tuple[str, SystemTag]],
        props: list[str] | None,
    ) -> Response:
        wanted = props if props is not None else list(self._DEFAULT)
        root = etree.Element(clark(DAV, "multistatus"), nsmap=NSMAP)
        if collection_href is not None:
            self._response(root, collection_href, uid, None, wanted)
        for href, tag in items:
            self._response(root, href, uid, tag, wanted)
        return Response(to_bytes(root), status=207, content_type=XML_CONTENT_TYPE)

    # ------------------------------------------------------------------ handlers

    def _propfind_tags(self, request: Request, uid: str, tag_id: int | None) -> Response:
        try:
            props = self._props(request)
        except XmlBodyError as exc:
            return dav_error(400, "BadRequest", str(exc))
        base = f"{self.sim.web_root}/remote.php/dav/systemtags/"
        if tag_id is not None:
            tag = self.store.tags.get(tag_id)
            if tag is None or not self.store.can_see(uid, tag):
                return dav_error(404, "NotFound", f"Tag with id {tag_id} not found")
            return self._multistatus(uid, None, [(f"{base}{tag.id}", tag)], props)
        depth = request.headers.get("Depth", "1").strip()
        items = []
        if depth != "0":
            visible = [t for t in self.store.tags.values() if self.store.can_see(uid, t)]
            items = [(f"{base}{t.id}", t) for t in sorted(visible, key=lambda t: t.id)]
        return self._multistatus(uid, base, items, props)

    def _create(self, request: Request, uid: str) -> Response:
        if (request.mimetype or "").lower() != "application/json":
            return dav_error(
                415, "UnsupportedMediaType", "Content-Type header must be application/json"
            )
        try:
            data = json.loads(request.get_data() or b"{}")
        except ValueError:
            return dav_error(400, "BadRequest", "Invalid JSON")
        name = data.get("name") if isinstance(data, dict) else None
        if not isinstance(name, str) or not name:
            return dav_error(400, "BadRequest", "Missing name")
        visible = bool(data.get("userVisible", True))
        assignable = bool(data.get("userAssignable", True))
        if (not visible or not assignable) and not self.store._admin(uid):
            return dav_error(400, "BadRequest", "Not sufficient permissions")
        try:
            tag = self.store.create(
                name,
                user_visible=visible,
                user_assignable=assignable,
                color=str(data.get("color") or ""),
                groups=list(data.get("groups") or []),
            )
        except ValueError:
            return dav_error(409, "Conflict", "Tag already exists")
        resp = Response(b"", status=201)
        resp.headers["Content-Location"] = f"{self.sim.web_root}/remote.php/dav/systemtags/{tag.id}"
        return resp

    def _relations(
        self, request: Request, uid: str, method: str, file_id: int, tag_part: str | None
    ) -> Response:
        tree = self.sim.tree
        node = tree.nodes.get(file_id)
        if node is None or tree.view_path(uid, node) is None:
            return dav_error(404, "NotFound", "Entity does not exist or is not available")
        if tag_part is None:
            if method != "PROPFIND":
                return dav_error(403, "Forbidden", "Permission denied to create collections")
            try:
                props = self._props(request)
            except XmlBodyError as exc:
                return dav_error(400, "BadRequest", str(exc))
            base = f"{self.sim.web_root}/remote.php/dav/systemtags-relations/files/{file_id}/"
            items = []
            if request.headers.get("Depth", "1").strip() != "0":
                items = [(f"{base}{t.id}", t) for t in self.store.tags_of(uid, node)]
            return self._multistatus(uid, base, items, props)
        tag_id = int(tag_part)
        tag = self.store.tags.get(tag_id)
        if method == "PUT":
            if tag is None or not self.store.can_see(uid, tag):
                return dav_error(
                    412, "PreconditionFailed", f"Tag with id {tag_id} does not exist, cannot assign"
                )
            if not self.store.can_assign(uid, tag):
                return dav_error(403, "Forbidden", f"No permission to assign tag {tag_id}")
            if not tree.can_write(uid, node):
                return dav_error(403, "Forbidden", f"No permission to assign tag to {file_id}")
            if tag_id in node.tags:
                return dav_error(405, "MethodNotAllowed", "PUT is not allowed on non-files.")
            self.store.assign(uid, node, tag_id)
            return Response(b"", status=201)
        if tag is None or tag_id not in node.tags or not self.store.can_see(uid, tag):
            return dav_error(
                404, "NotFound", f"Tag with id {tag_id} not present for object {file_id}"
            )
        if method == "DELETE":
            if not self.store.can_assign(uid, tag):
                return dav_error(403, "Forbidden", f"No permission to unassign tag {tag_id}")
            self.store.unassign(uid, node, tag_id)
            return Response(b"", status=204)
        if method == "PROPFIND":
            try:
                props = self._props(request)
            except XmlBodyError as exc:
                return dav_error(400, "BadRequest", str(exc))
            href = (
                f"{self.sim.web_root}/remote.php/dav/systemtags-relations/files/{file_id}/{tag_id}"
            )
            return self._multistatus(uid, None, [(href, tag)], props)
        return dav_error(405, "MethodNotAllowed", f"{method} is not allowed here")
