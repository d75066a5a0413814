"""WebDAV (``/remote.php/dav``): files PROPFIND/GET/PUT/DELETE/MKCOL/MOVE/COPY/PROPPATCH,
SEARCH (RFC 5323) and REPORT ``oc:filter-files``, in the formats of Nextcloud's Sabre server.

Multistatus bodies use the prefixes Nextcloud emits (``d``, ``s``, ``oc``, ``nc``); hrefs are
URL-encoded per segment and collections end with ``/``; etags are quoted; dates are RFC 1123;
properties that do not apply are listed in a second propstat with ``HTTP/1.1 404 Not Found``;
errors are Sabre's ``d:error`` XML.
"""

from __future__ import annotations

import email.utils
import json
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from lxml import etree
from werkzeug.wrappers import Request, Response

from ncindex.simulator.bulk import BulkDav
from ncindex.simulator.mtime import MtimeError, sanitize_mtime
from ncindex.simulator.proppatch import BodyError, HandlerError, commit, mutations
from ncindex.simulator.state import (
    PERMISSION_CREATE,
    PERMISSION_DELETE,
    PERMISSION_READ,
    PERMISSION_SHARE,
    PERMISSION_UPDATE,
    AlreadyExistsError,
    ConflictError,
    ForbiddenError,
    Node,
    NotFoundError,
    StateError,
    is_partial,
    norm_path,
)
from ncindex.simulator.systemtags import SystemTagsDav
from ncindex.simulator.trashbin import TrashbinDav
from ncindex.simulator.uploads import UploadsDav
from ncindex.simulator.versions import VersionsDav
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
    sabre_error,
    to_bytes,
)

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator

__all__ = ["WebDav", "dav_error"]

DEFAULT_FILE_PROPS = [
    clark(DAV, "getlastmodified"),
    clark(DAV, "getcontentlength"),
    clark(DAV, "resourcetype"),
    clark(DAV, "getetag"),
    clark(DAV, "getcontenttype"),
]
DEFAULT_DIR_PROPS = [
    clark(DAV, "getlastmodified"),
    clark(DAV, "resourcetype"),
    clark(DAV, "quota-used-bytes"),
    clark(DAV, "quota-available-bytes"),
    clark(DAV, "getetag"),
]


def _not_found(path: str) -> Response:
    return dav_error(
        404, "NotFound", f"File with name {norm_path(path).lstrip('/')} could not be located"
    )


def _uncaught(exception: str, message: str) -> Response:
    """The 500 of sabre/dav ``Server::start`` for an exception that is no Sabre exception:
    ``s:exception`` its PHP class, ``s:message`` its message."""
    return Response(sabre_error(exception, message), status=500, content_type=XML_CONTENT_TYPE)


def _no_collection(exc: ConflictError) -> Response:
    """409 for a file written into a folder that does not exist: sabre/dav
    ``Server::createFile`` turns the parent's ``NotFound`` into this ``Conflict``."""
    return dav_error(
        409, "Conflict", f"Files cannot be created in non-existent collections ({exc})"
    )


def _state_error(exc: StateError) -> Response:
    if isinstance(exc, NotFoundError):
        return dav_error(404, "NotFound", str(exc))
    if isinstance(exc, ConflictError):
        return dav_error(409, "Conflict", str(exc))
    if isinstance(exc, AlreadyExistsError):
        return dav_error(412, "PreconditionFailed", str(exc))
    if isinstance(exc, ForbiddenError):
        return dav_error(403, "Forbidden", str(exc))
    return dav_error(500, "ServiceUnavailable", str(exc))


SEARCHDAV = "https://github.com/icewind1991/SearchDAV/ns"
"""icewind1991/SearchDAV's own namespace (``src/DAV/SearchPlugin.php`` ``SEARCHDAV_NS``): a
SEARCH's ``d:limit`` takes its offset, ``firstresult``, in it."""

SEARCH_OPERATOR_LIMIT = 100
"""Comparisons a SEARCH's ``d:where`` may hold (nextcloud/server
``apps/dav/lib/Files/FileSearchBackend.php``, ``FileSearchBackend::OPERATOR_LIMIT``)."""


def _count_operators(condition: etree._Element) -> int:
    """The comparisons in ``condition`` as ``FileSearchBackend::transformQuery`` counts them
    (``countSearchOperators``: ``d:and``, ``d:or`` and ``d:not`` count their arguments,
    anything else counts 1), after ``extractWhereValue`` has taken out an ``oc:owner-id``
    equality reached through ``d:and`` alone (it becomes an empty ``d:and``: 0)."""
    return _count(condition) - (1 if _owner_equality(condition) else 0)


def _count(cond: etree._Element) -> int:
    if etree.QName(cond).localname in ("and", "or", "not"):
        return sum(_count(c) for c in cond if isinstance(c.tag, str))
    return 1


def _owner_equality(cond: etree._Element) -> bool:
    """Whether an ``oc:owner-id`` ``d:eq`` is reached from ``cond`` through ``d:and`` alone
    (the one ``FileSearchBackend::extractWhereValue`` removes, nextcloud/server
    ``apps/dav/lib/Files/FileSearchBackend.php``)."""
    tag = etree.QName(cond).localname
    if tag == "and":
        return any(_owner_equality(c) for c in cond if isinstance(c.tag, str))
    prop = cond.find(clark(DAV, "prop"))
    return (
        tag == "eq" and prop is not None and len(prop) > 0 and prop[0].tag == clark(OC, "owner-id")
    )


def _required_fileids(cond: etree._Element | None) -> set[int] | None:
    """The file ids a condition confines its matches to, if it does: an ``eq`` on
    ``oc:fileid`` (alone, inside ``and``, or every branch of an ``or`` one; nextcloud/server
    ``apps/dav/lib/Files/FileSearchBackend.php`` ``transformSearchOperation`` keeps ``d:or``
    as an OR of comparisons)."""
    if cond is None:
        return None
    tag = etree.QName(cond).localname
    if tag == "and":
        return next((i for c in cond if (i := _required_fileids(c)) is not None), None)
    if tag == "or":
        branches = [_required_fileids(c) for c in cond]
        if not branches or any(b is None for b in branches):
            return None
        return set().union(*(b for b in branches if b is not None))
    prop = cond.find(clark(DAV, "prop"))
    if tag != "eq" or prop is None or not len(prop) or prop[0].tag != clark(OC, "fileid"):
        return None
    file_id = php_int(cond.findtext(clark(DAV, "literal")) or "")
    return None if file_id is None else {file_id}


_LEADING_INT = re.compile(r"\s*([+-]?[0-9]+)")


def php_int(literal: str) -> int | None:
    """An integer literal as ``FileSearchBackend::castValue`` reads it (``0 + $value``): PHP
    takes a leading-numeric string's leading digits, so the formatted ``OC-FileId`` value
    ``00000104ocabc123`` means file id 104 (what Nextcloud's own clients send). None when the
    literal does not start with digits (PHP 8 throws a ``TypeError`` there; the simulator
    matches nothing — a simplification)."""
    match = _LEADING_INT.match(literal)
    return int(match.group(1)) if match else None


def _parse_date(text: str) -> float | None:
    text = text.strip()
    if text.lstrip("-").isdigit():
        return float(text)
    try:
        return email.utils.parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError):
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class WebDav:
    """Handlers for ``/remote.php/dav`` (files, SEARCH, filter-files REPORT)."""

    def __init__(self, sim: NextcloudSimulator) -> None:
        self.sim = sim
        self.tree = sim.tree
        self.systemtags = SystemTagsDav(sim)
        self.trashbin = TrashbinDav(sim)
        self.versions = VersionsDav(sim)
        self.uploads = UploadsDav(sim, self)
        self.bulk = BulkDav(sim, self)

    # ------------------------------------------------------------------ routing

    def handle(self, request: Request, uid: str | None) -> Response:
        """Dispatch one WebDAV request; ``uid`` is the authenticated user or None."""
        if uid is None:
            return dav_error(
                401,
                "NotAuthenticated",
                "No public access to this resource., Username or password was incorrect, "
                "No 'Authorization: Bearer' header found. Either the client didn't send one, "
                "or the server is mis-configured, Username or password was incorrect",
                WWW_Authenticate='Basic realm="Nextcloud", charset="UTF-8"',
            )
        path = request.path
        method = request.method.upper()
        root = self.sim.web_root  # hrefs are absolute from the server's web root (Sabre baseUri)
        if path.startswith("/remote.php/webdav"):
            rel = path[len("/remote.php/webdav") :]
            return self.files(request, method, uid, root + "/remote.php/webdav", rel)
        rest = path[len("/remote.php/dav") :]
        if method == "SEARCH" and rest.strip("/") == "":
            return self.search(request, uid)
        if rest.startswith("/files/"):
            owner, _, rel = rest[len("/files/") :].partition("/")
            if owner != uid:
                return dav_error(404, "NotFound", f"Principal with name {owner} not found")
            return self.files(request, method, uid, f"{root}/remote.php/dav/files/{uid}", "/" + rel)
        if rest.startswith(("/systemtags", "/systemtags-relations")):
            return self.systemtags.handle(request, uid)
        if rest.startswith("/trashbin/"):
            return self.trashbin.handle(request, uid, rest[len("/trashbin") :])
        if rest.startswith("/versions/"):
            return self.versions.handle(request, uid, rest[len("/versions") :])
        if rest == "/bulk" and method == "POST":
            return self.bulk.post(request, uid)
        if rest.startswith("/uploads/"):
            return self.uploads.handle(request, uid, rest[len("/uploads") :])
        if method == "OPTIONS":
            return self._options()
        return dav_error(404, "NotFound", f"File with name {rest.strip('/')} could not be located")

    def files(self, request: Request, method: str, uid: str, base: str, rel: str) -> Response:
        """Methods on ``{base}{rel}`` where ``base`` is the user's files root href."""
        handlers: dict[str, Callable[[Request, str, str, str], Response]] = {
            "PROPFIND": self.propfind,
            "GET": self.get,
            "HEAD": self.get,
            "PUT": self.put,
            "DELETE": self.delete,
            "MKCOL": self.mkcol,
            "MOVE": self.move_copy,
            "COPY": self.move_copy,
            "PROPPATCH": self.proppatch,
            "REPORT": self.report,
        }
        if method == "OPTIONS":
            return self._options()
        handler = handlers.get(method)
        if handler is None:
            return dav_error(501, "NotImplemented", f"There was no handler for {method}")
        with self.sim.lock:
            return handler(request, uid, base, norm_path(rel))

    @staticmethod
    def _options() -> Response:
        resp = Response(b"", status=200)
        resp.headers["DAV"] = "1, 3, extended-mkcol, access-control, nextcloud-checksum-update"
        resp.headers["Allow"] = (
            "OPTIONS, GET, HEAD, DELETE, PROPFIND, PUT, PROPPATCH, COPY, MOVE, REPORT, SEARCH"
        )
        resp.headers["MS-Author-Via"] = "DAV"
        return resp

    # ------------------------------------------------------------------ properties

    def href(self, base: str, path: str, node: Node) -> str:
        """Encoded href of ``node`` at view ``path`` below ``base``; folders end with ``/``."""
        path = norm_path(path)
        href = base + (encode_path(path) if path != "/" else "/")
        if node.is_dir and not href.endswith("/"):
            href += "/"
        return href

    def dav_file_id(self, node: Node) -> str:
        """``oc:id`` and ``OC-FileId`` of ``node``: its id zero-padded to 8 digits, then the
        instance id (nextcloud/server ``lib/public/Files/DavUtil.php`` ``getDavFileId``)."""
        return f"{node.id:08d}{self.sim.instance_id}"

    def permissions(self, uid: str, node: Node) -> str:
        """``oc:permissions`` of ``node`` for ``uid``, as nextcloud/server
        ``lib/public/Files/DavUtil.php`` ``getDavPermissions`` builds it from the permission
        bits (:meth:`FileTree.permissions`): ``S`` shared with the user, ``R`` share bit
        (resharing allowed), ``M`` mounted, ``G`` read, ``D`` delete, ``NV`` update, then ``W``
        (a file, update) or ``CK`` (a folder, create).

        ``S`` and ``M`` exclude each other: ``lib/private/Files/FileInfo.php`` ``isShared`` is
        "the mount is an ``ISharedMountPoint``" (a received share) and ``isMounted`` is
        ``!$isHome && !$this->isShared()`` (a group folder, :meth:`FileTree.group_folder`, or
        an external storage, :meth:`FileTree.external_storage`; a federated share's
        ``External\\Mount`` is an ``ISharedMountPoint``: ``S``), so a node seen
        through a share is ``S`` without ``M``, one in a group folder ``M`` without ``S``."""
        bits = self.tree.permissions(uid, node, allow_resharing=self.sim.allow_resharing)
        share = self.tree.share_for(uid, node)
        mounted = share is not None and share.kind in ("groupfolder", "external")
        letters = "S" if share is not None and not mounted else ""
        letters += "R" if bits & PERMISSION_SHARE else ""
        letters += "M" if mounted else ""
        letters += "G" if bits & PERMISSION_READ else ""
        letters += "D" if bits & PERMISSION_DELETE else ""
        letters += "NV" if bits & PERMISSION_UPDATE else ""
        if node.is_dir:
            letters += "CK" if bits & PERMISSION_CREATE else ""
        else:
            letters += "W" if bits & PERMISSION_UPDATE else ""
        return letters

    def owner(self, uid: str, node: Node) -> str:
        """``oc:owner-id`` of ``node`` for ``uid``: the owner of its storage, but ``uid``
        in a group folder (nextcloud/groupfolders ``lib/Mount/GroupFolderStorage.php``
        ``getOwner``: the mount's user)."""
        share = self.tree.share_for(uid, node)
        mounted = share is not None and share.kind in ("groupfolder", "external")
        return uid if mounted else node.owner

    def prop(
        self, uid: str, path: str, node: Node, name: str
    ) -> Callable[[etree._Element], None] | None:
        """A filler for property ``name`` (Clark) of ``node``, or None if it does not apply."""

        def text(value: Any) -> Callable[[etree._Element], None]:
            def fill(el: etree._Element) -> None:
                el.text = str(value)

            return fill

        def empty(el: etree._Element) -> None:
            return None

        tree = self.tree
        if name == clark(DAV, "getlastmodified"):
            return text(http_date(node.mtime))
        if name == clark(DAV, "getetag"):
            return text(f'"{node.etag}"')
        if name == clark(DAV, "getcontenttype"):
            return None if node.is_dir else text(node.mime)
        if name == clark(DAV, "getcontentlength"):
            return None if node.is_dir else text(len(node.content))
        if name == clark(DAV, "resourcetype"):
            if not node.is_dir:
                return empty

            def collection(el: etree._Element) -> None:
                etree.SubElement(el, clark(DAV, "collection"))

            return collection
        if name == clark(DAV, "displayname"):
            return text(posixpath.basename(norm_path(path)) or "")
        if name == clark(DAV, "quota-used-bytes"):
            return text(node.size) if node.is_dir else None
        if name == clark(DAV, "quota-available-bytes"):
            return text(-3) if node.is_dir else None
        if name == clark(OC, "fileid"):
            return text(node.id)
        if name == clark(OC, "id"):
            return text(self.dav_file_id(node))
        if name == clark(OC, "size"):
            return text(node.size)
        if name == clark(OC, "permissions"):
            return text(self.permissions(uid, node))
        if name == clark(OC, "favorite"):
            return text(1 if uid in node.favorite_of else 0)
        if name == clark(OC, "owner-id"):
            return text(self.owner(uid, node))
        if name == clark(OC, "owner-display-name"):
            return text(tree.users[self.owner(uid, node)].display_name)
        if name == clark(OC, "share-types"):
            types = tree.share_types(uid, node)

            def share_types(el: etree._Element) -> None:
                for t in types:
                    etree.SubElement(el, clark(OC, "share-type")).text = str(t)

            return share_types
        if name == clark(OC, "tags"):
            return empty
        if name == clark(NC, "has-preview"):
            previewable = not node.is_dir and node.mime.startswith(("image/", "application/pdf"))
            return text("true" if previewable else "false")
        if name == clark(NC, "mount-type"):
            share = tree.share_for(uid, node)
            if share is None:
                return text("")
            # lib/private/Files/Mount/MountPoint.php getMountType (the share's, files_sharing
            # SharedMount: "shared"); groupfolders GroupMountPoint: "group"; files_external
            # ExternalMountPoint: "external"
            return text({"groupfolder": "group", "external": "external"}.get(share.kind, "shared"))
        if name == clark(NC, "is-federated"):
            # FilesPlugin handleGetProperties: the mount is a files_sharing External\Mount
            # (a PHP bool: "1" or empty, as sabre/xml writes it — a guess)
            share = tree.share_for(uid, node)
            return text("1" if share is not None and share.kind == "federated" else "")
        if name == clark(NC, "is-encrypted"):
            return text(0)
        if name == clark(NC, "creation_time"):
            return text(0)
        if name == clark(NC, "upload_time"):
            return text(node.created)
        if name == clark(NC, "share-attributes"):
            # apps/dav/lib/Connector/Sabre/FilesPlugin.php handleGetProperties:
            # json_encode(Node::getShareAttributes()) — the attributes of the share the node
            # is seen through (IAttributes::toArray), [] for one's own node or a share
            # without attributes
            share = tree.share_for(uid, node)
            attributes = (share.attributes if share is not None else None) or []
            # a group folder's storage is no ISharedStorage: [] (attributes are never set)
            return text(json.dumps(attributes, separators=(",", ":")))
        if name == clark(NC, "system-tags"):
            return lambda el: self.sim.tags.fill_prop(el, uid, node)
        return None

    def response_for(
        self,
        uid: str,
        base: str,
        path: str,
        node: Node,
        props: list[str] | None,
    ) -> etree._Element:
        """One ``d:response``; ``props`` None means allprop (defaults, no 404 propstat)."""
        resp = etree.Element(clark(DAV, "response"), nsmap=NSMAP)
        etree.SubElement(resp, clark(DAV, "href")).text = self.href(base, path, node)
        wanted = props
        if wanted is None:
            wanted = DEFAULT_DIR_PROPS if node.is_dir else DEFAULT_FILE_PROPS
        found: list[tuple[str, Callable[[etree._Element], None]]] = []
        missing: list[str] = []
        for name in wanted:
            filler = self.prop(uid, path, node, name)
            if filler is None:
                missing.append(name)
            else:
                found.append((name, filler))
        if found or not missing:
            ps = etree.SubElement(resp, clark(DAV, "propstat"))
            prop_el = etree.SubElement(ps, clark(DAV, "prop"))
            for name, filler in found:
                filler(etree.SubElement(prop_el, name))
            etree.SubElement(ps, clark(DAV, "status")).text = "HTTP/1.1 200 OK"
        if missing and props is not None:
            ps = etree.SubElement(resp, clark(DAV, "propstat"))
            prop_el = etree.SubElement(ps, clark(DAV, "prop"))
            for name in missing:
                etree.SubElement(prop_el, name)
            etree.SubElement(ps, clark(DAV, "status")).text = "HTTP/1.1 404 Not Found"
        return resp

    def multistatus(
        self, uid: str, base: str, items: Iterable[tuple[str, Node]], props: list[str] | None
    ) -> Response:
        """A ``207 Multi-Status`` response with one ``d:response`` per ``(path, node)``."""
        root = etree.Element(clark(DAV, "multistatus"), nsmap=NSMAP)
        for path, node in items:
            root.append(self.response_for(uid, base, path, node, props))
        return Response(to_bytes(root), status=207, content_type=XML_CONTENT_TYPE)

    @staticmethod
    def requested_props(body: etree._Element | None) -> list[str] | None:
        """Clark names from ``d:propfind``/``d:prop``; None for allprop or an empty body."""
        if body is None:
            return None
        prop = body.find(clark(DAV, "prop"))
        if prop is None:
            return None
        return [child.tag for child in prop if isinstance(child.tag, str)]

    # ------------------------------------------------------------------ methods

    def propfind(self, request: Request, uid: str, base: str, path: str) -> Response:
        """PROPFIND with ``Depth`` 0, 1 or infinity (the default)."""
        try:
            props = self.requested_props(parse_xml(request.get_data()))
        except XmlBodyError as exc:
            return dav_error(
                400, "BadRequest", f"The request body had an invalid XML body. ({exc})"
            )
        node = self.tree.resolve(uid, path)
        if node is None:
            return _not_found(path)
        if self.tree.is_unavailable(node):
            # apps/dav/lib/Connector/Sabre/ObjectTree.php getNodeForPath: a
            # StorageNotAvailableException (or a FailedStorage) while looking the path up
            return dav_error(503, "ServiceUnavailable", "Storage is temporarily not available")
        depth = request.headers.get("Depth", "infinity").strip().lower()
        if node.is_dir and depth in ("1", "infinity") and self._unreadable(node, depth):
            # apps/dav/lib/Connector/Sabre/Directory.php getChildren(): an unreadable folder
            # "return 403 instead of 404 because a 404 would make the caller believe that the
            # collection itself does not exist"; the message when files_accesscontrol is on
            return dav_error(
                403,
                "Forbidden",
                "No read permissions. This might be caused by files_accesscontrol, "
                "check your configured rules",
            )
        items: list[tuple[str, Node]] = [(path, node)]
        if node.is_dir and depth == "1":
            items += [
                (norm_path(f"{path}/{name}"), child)
                for name, child in self.tree.children(uid, path, node)
            ]
        elif node.is_dir and depth == "infinity":
            items = list(self.tree.walk_view(uid, path))
        return self.multistatus(uid, base, items, props)

    def _unreadable(self, node: Node, depth: str) -> bool:
        """True when listing ``node`` to ``depth`` (``1``: its children; ``infinity``: every
        folder below it too) reaches a folder without read permission, so Sabre's
        ``getChildren`` throws ``Forbidden`` for the whole request."""
        if self.tree.is_blocked(node):
            return True
        return depth == "infinity" and any(
            n.is_dir and n.id in self.tree.blocked for n in node.walk() if n is not node
        )

    def get(self, request: Request, uid: str, base: str, path: str) -> Response:
        """GET/HEAD of a file: bytes with ETag, OC-ETag, Last-Modified, Content-Type."""
        node = self.tree.resolve(uid, path)
        if node is None:
            return _not_found(path)
        if node.is_dir:
            return dav_error(
                501,
                "NotImplemented",
                "There was no plugin in the system that was willing to handle this GET method. "
                "Enable the Browser plugin to get a better result here.",
            )
        share = self.tree.share_for(uid, node)
        if share is not None and share.download_refused:
            # apps/dav/lib/DAV/ViewOnlyPlugin.php checkViewOnly, on method:GET before Sabre's
            # httpGet (so before File::get's 404 below): a file of a share whose download
            # attribute is false. A HEAD is refused too: sabre/dav CorePlugin::httpHead sends
            # a GET sub-request (from memory of sabre/dav, not re-read)
            return dav_error(
                403,
                "OCA\\DAV\\Connector\\Sabre\\Exception\\Forbidden",
                "Access to this resource has been denied because it is in view-only mode.",
            )
        if self.tree.is_blocked(node):
            # apps/dav/lib/Connector/Sabre/File.php get(): "if (!$this->info->isReadable())
            # { // do a if the file did not exist  throw new NotFound(); }" — no message
            return dav_error(404, "NotFound", "")
        unopenable = self.tree.unopenable.get(node.id)
        if unopenable == 423:
            # File::get: LockedException → FileLocked (the message's form from memory of
            # OCP\Lock\LockedException, not re-read)
            return dav_error(
                423,
                "OCA\\DAV\\Connector\\Sabre\\Exception\\FileLocked",
                f'"files/{node.id}" is locked',
            )
        if unopenable == 503:
            # File::get: fopen answered false on a file the view says exists
            return dav_error(
                503,
                "ServiceUnavailable",
                f"Could not open file: {path.lstrip('/')} ({node.id}), file does seem to exist",
            )
        body = b"" if request.method.upper() == "HEAD" else node.content
        resp = Response(body, status=200, content_type=node.mime)
        resp.headers["Content-Length"] = str(len(node.content))
        resp.headers["ETag"] = f'"{node.etag}"'
        resp.headers["OC-ETag"] = f'"{node.etag}"'
        resp.headers["Last-Modified"] = http_date(node.mtime)
        resp.headers["OC-FileId"] = self.dav_file_id(node)
        resp.headers["Content-Disposition"] = (
            f"attachment; filename*=UTF-8''{encode_path(node.name)}; "
            f'filename="{encode_path(node.name)}"'
        )
        return resp

    def _write_headers(self, resp: Response, node: Node) -> Response:
        resp.headers["OC-FileId"] = self.dav_file_id(node)
        resp.headers["OC-ETag"] = f'"{node.etag}"'
        resp.headers["ETag"] = f'"{node.etag}"'
        return resp

    def put(self, request: Request, uid: str, base: str, path: str) -> Response:
        """PUT creates (201) or overwrites (204) a file; ``X-OC-MTime`` sets the mtime.

        nextcloud/server ``apps/dav/lib/Connector/Sabre/File.php`` ``put`` writes the bytes
        (pre-write hooks, storage write, ``getUpdater()->update``), then reads ``X-OC-MTime``
        (an empty header is none) through ``MtimeSanitizer`` (:func:`~ncindex.simulator.mtime.
        sanitize_mtime`) and sets it with ``View::touch`` — BeforeNodeTouchedEvent and
        NodeTouchedEvent (:meth:`~ncindex.simulator.state.FileTree.put_file` ``touched``) —
        answering ``X-OC-MTime: accepted``; then the post-write hooks. A value the sanitizer
        refuses throws ``InvalidArgumentException`` there, which nothing catches
        (``Directory::createFile``, sabre's ``CorePlugin::httpPut``): the bytes stay written,
        the Before* events were sent, the touch and the post-write hooks never come, and
        sabre's ``Server::start`` answers 500 with the exception (``put_file``
        ``interrupted``). A write refused before (403, 409) reads no header."""
        return self.write_file(request, uid, path, request.get_data())

    def write_file(self, request: Request, uid: str, path: str, data: bytes) -> Response:
        """``File::put`` of ``data`` at ``path`` in ``uid``'s view, for a PUT or for the
        assembled chunks of an upload (:mod:`ncindex.simulator.uploads`), its ``X-OC-MTime``
        read from ``request`` (:meth:`put`): 201 created, 204 overwritten."""
        header = request.headers.get("X-OC-MTime", "")
        mtime: int | None = None
        refused: MtimeError | None = None
        if header != "":
            try:
                mtime = sanitize_mtime(header)
            except MtimeError as exc:
                refused = exc
        if is_partial(path):
            return self._write_part_file(uid, path, data, refused)
        try:
            node, created = self.tree.put_file(
                uid,
                path,
                data,
                mtime=mtime,
                touched=True,
                interrupted=refused is not None,
                make_parents=False,
            )
        except ConflictError as exc:
            existing = self.tree.resolve(uid, path)
            if existing is not None and existing.is_dir:
                return dav_error(409, "Conflict", "Could not write file contents")
            return _no_collection(exc)
        except StateError as exc:
            return _state_error(exc)
        if refused is not None:
            return _uncaught(refused.exception, str(refused))
        resp = self._write_headers(Response(b"", status=201 if created else 204), node)
        if mtime is not None:
            resp.headers["X-OC-MTime"] = "accepted"
        return resp

    def _write_part_file(
        self, uid: str, path: str, data: bytes, refused: MtimeError | None
    ) -> Response:
        """:meth:`write_file` of a ``.part`` name (:meth:`~ncindex.simulator.state.FileTree.
        put_part_file`): 201/204 without ``OC-FileId`` or ``ETag`` (the node has no file-cache
        row: the headers left out are a *guess*); a refused ``X-OC-MTime`` 500 after the
        write, as for any file."""
        try:
            created = self.tree.put_part_file(uid, path, data, interrupted=refused is not None)
        except ConflictError as exc:
            return _no_collection(exc)
        except StateError as exc:
            return _state_error(exc)
        if refused is not None:
            return _uncaught(refused.exception, str(refused))
        return Response(b"", status=201 if created else 204)

    def delete(self, request: Request, uid: str, base: str, path: str) -> Response:
        """DELETE a file or folder (to the trash): 204."""
        if norm_path(path) == "/":
            return dav_error(403, "Forbidden", "Permission denied to delete home folder")
        try:
            self.tree.delete(uid, path)
        except StateError as exc:
            return _state_error(exc)
        return Response(b"", status=204)

    def mkcol(self, request: Request, uid: str, base: str, path: str) -> Response:
        """MKCOL: 201; 405 if it exists; 409 if the parent is missing."""
        try:
            node, _ = self.tree.mkdir(uid, path, parents=False)
        except AlreadyExistsError:
            return dav_error(
                405, "MethodNotAllowed", "The resource you tried to create already exists"
            )
        except StateError as exc:
            return _state_error(exc)
        return self._write_headers(Response(b"", status=201), node)

    def destination(self, request: Request, uid: str, base: str) -> str | None:
        """The ``Destination`` header's path in ``uid``'s files view (under ``base``, the
        ``files/{uid}`` or the ``webdav`` root), ``None`` when missing or elsewhere."""
        dest = request.headers.get("Destination")
        if not dest:
            return None
        dpath = unquote(urlsplit(dest).path)
        root = self.sim.web_root
        for prefix in (base, f"{root}/remote.php/dav/files/{uid}", f"{root}/remote.php/webdav"):
            if dpath == prefix or dpath.startswith(prefix + "/"):
                return norm_path(dpath[len(prefix) :])
        return None

    @staticmethod
    def overwrite_of(request: Request) -> bool:
        """The ``Overwrite`` header of a ``MOVE``/``COPY`` (RFC 4918 §10.6): false only for
        ``F``, true when absent."""
        return request.headers.get("Overwrite", "T").strip().upper() != "F"

    def target_refused(self, uid: str, dst: str, overwrite: bool) -> Response | None:
        """What sabre/dav ``Server::getCopyAndMoveInfo`` answers for ``dst`` (a view path of
        ``uid``) as the target of a ``MOVE`` or ``COPY``, before any plugin's ``beforeMove``
        (``CorePlugin::httpMove`` asks it first): 409 ``Conflict`` "The destination node is
        not found" when its parent folder does not exist, 412 ``PreconditionFailed`` when it
        exists and ``overwrite`` (:meth:`overwrite_of`) is false; ``None`` when neither."""
        if self.tree.resolve(uid, posixpath.dirname(dst)) is None:
            return dav_error(409, "Conflict", "The destination node is not found")
        if not overwrite and self.tree.resolve(uid, dst) is not None:
            return dav_error(
                412,
                "PreconditionFailed",
                "The destination node already exists, and the overwrite header is set to false",
            )
        return None

    def move_copy(self, request: Request, uid: str, base: str, path: str) -> Response:
        """MOVE/COPY with ``Destination`` and ``Overwrite`` (T default): 201 new, 204 replaced."""
        dst = self.destination(request, uid, base)
        if dst is None:
            return dav_error(400, "BadRequest", "The destination header was not understood")
        overwrite = self.overwrite_of(request)
        if (
            request.method.upper() == "MOVE"
            and (uid, path) in self.tree.part_files
            and not is_partial(dst)
        ):
            return self._finish_part_file(uid, path, dst, overwrite)
        if self.tree.resolve(uid, path) is None:
            return _not_found(path)
        refused = self.target_refused(uid, dst, overwrite)
        if refused is not None:
            return refused
        op = self.tree.move if request.method.upper() == "MOVE" else self.tree.copy
        try:
            node, existed = op(uid, path, dst, overwrite=overwrite, make_parents=False)
        except ConflictError:
            return dav_error(409, "Conflict", "The destination node is not found")
        except StateError as exc:
            return _state_error(exc)
        return self._write_headers(Response(b"", status=204 if existed else 201), node)

    def _finish_part_file(self, uid: str, path: str, dst: str, overwrite: bool) -> Response:
        """A ``MOVE`` of an uploaded ``.part`` file to its name (:meth:`~ncindex.simulator.
        state.FileTree.move_part_file`): 201, or 204 over an existing file; 412 for one with
        ``Overwrite: F``. That nextcloud/server ``apps/dav/lib/Connector/Sabre/ObjectTree.php``
        ``getNodeForPath`` finds the uncached ``.part`` source (read from the storage) was not
        re-read: a *guess*, as is anything else done to a ``.part`` file (a ``GET``, a
        ``PROPFIND``, a ``COPY``: 404 here)."""
        refused = self.target_refused(uid, dst, overwrite)
        if refused is not None:
            return refused
        try:
            node, existed = self.tree.move_part_file(uid, path, dst, overwrite=overwrite)
        except ConflictError:
            return dav_error(409, "Conflict", "The destination node is not found")
        except StateError as exc:
            return _state_error(exc)
        return self._write_headers(Response(b"", status=204 if existed else 201), node)

    def proppatch(self, request: Request, uid: str, base: str, path: str) -> Response:
        """PROPPATCH as sabre/dav runs Nextcloud's handlers (:mod:`~ncindex.simulator.proppatch`:
        ``{DAV:}lastmodified`` touches the node, ``oc:favorite`` is stored): 207 with one
        ``d:response`` and a ``d:propstat`` per status, in the order the statuses first appear
        (sabre/dav ``CorePlugin::httpPropPatch``, ``Xml/Element/Response.php``
        ``xmlSerialize``), each property an empty element; 400 for a body that is not a
        ``d:propertyupdate``, 500 for a handler's exception."""
        node = self.tree.resolve(uid, path)
        if node is None:
            return _not_found(path)
        try:
            changes = mutations(parse_xml(request.get_data()))
        except (XmlBodyError, BodyError) as exc:
            return dav_error(400, "BadRequest", str(exc))
        try:
            results = commit(self.tree, uid, path, node, changes)
        except HandlerError as exc:
            return _uncaught(exc.exception, str(exc))
        root = etree.Element(clark(DAV, "multistatus"), nsmap=NSMAP)
        resp_el = etree.SubElement(root, clark(DAV, "response"))
        etree.SubElement(resp_el, clark(DAV, "href")).text = self.href(base, path, node)
        for status in dict.fromkeys(results.values()):
            ps = etree.SubElement(resp_el, clark(DAV, "propstat"))
            prop_el = etree.SubElement(ps, clark(DAV, "prop"))
            for tag, code in results.items():
                if code == status:
                    etree.SubElement(prop_el, tag)
            phrase = HTTPStatus(status).phrase
            etree.SubElement(ps, clark(DAV, "status")).text = f"HTTP/1.1 {status} {phrase}"
        return Response(to_bytes(root), status=207, content_type=XML_CONTENT_TYPE)

    def report(self, request: Request, uid: str, base: str, path: str) -> Response:
        """REPORT ``oc:filter-files`` (favorites and system tags)."""
        try:
            body = parse_xml(request.get_data())
        except XmlBodyError as exc:
            return dav_error(400, "BadRequest", str(exc))
        if body is None or body.tag != clark(OC, "filter-files"):
            return dav_error(415, "ReportNotSupported", "The {DAV:}report REPORT is not supported")
        node = self.tree.resolve(uid, path)
        if node is None:
            return _not_found(path)
        rules = body.find(clark(OC, "filter-rules"))
        if rules is None:
            return dav_error(400, "BadRequest", "Missing filter-rule block in request")
        props = self.requested_props(body)
        tag_ids: list[int] = []
        favorite = False
        for rule in rules:
            if rule.tag == clark(OC, "systemtag"):
                try:
                    tag_ids.append(int((rule.text or "").strip()))
                except ValueError:
                    return dav_error(412, "PreconditionFailed", "Cannot filter by non-existing tag")
            elif rule.tag == clark(OC, "favorite"):
                favorite = (rule.text or "").strip() in ("1", "true")
        for tag_id in tag_ids:
            if not self.sim.tags.visible(uid, tag_id):
                return dav_error(412, "PreconditionFailed", "Cannot filter by non-existing tag")
        scope = self.tree.walk_view(uid, "/" if tag_ids else path)
        items = []
        for item_path, item in scope:
            if item.is_home:
                continue
            if tag_ids and not all(t in item.tags for t in tag_ids):
                continue
            if favorite and uid not in item.favorite_of:
                continue
            if not tag_ids and not favorite:
                continue
            items.append((item_path, item))
        limit = body.find(clark(DAV, "limit"))
        if limit is not None:
            # apps/dav/lib/Connector/Sabre/FilesReportPlugin.php onReport: the offset is
            # nc:firstresult here (a SEARCH's is SearchDAV's, :data:`SEARCHDAV`)
            first = limit.findtext(clark(NC, "firstresult")) or "0"
            count = limit.findtext(clark(DAV, "nresults"))
            start = int(first.strip() or 0)
            items = items[start : start + int(count) if count else None]
        return self.multistatus(uid, base, items, props)

    # ------------------------------------------------------------------ SEARCH

    def search(self, request: Request, uid: str) -> Response:
        """SEARCH (RFC 5323 basicsearch) to ``/remote.php/dav/``: 207 in the caller's view."""
        try:
            body = parse_xml(request.get_data())
        except XmlBodyError as exc:
            return dav_error(400, "BadRequest", str(exc))
        basic = body.find(clark(DAV, "basicsearch")) if body is not None else None
        if basic is None:
            return dav_error(400, "BadRequest", "Unexpected xml body, expected basicsearch")
        select = basic.find(f"{clark(DAV, 'select')}/{clark(DAV, 'prop')}")
        props = None if select is None else [c.tag for c in select if isinstance(c.tag, str)]
        scope_el = basic.find(f"{clark(DAV, 'from')}/{clark(DAV, 'scope')}")
        scope_href = (scope_el.findtext(clark(DAV, "href")) if scope_el is not None else "") or ""
        depth = (
            scope_el.findtext(clark(DAV, "depth")) if scope_el is not None else None
        ) or "infinity"
        scope_path = unquote(urlsplit(scope_href).path)
        dav_root = self.sim.web_root + "/remote.php/dav"
        if scope_path.startswith(dav_root):
            scope_path = scope_path[len(dav_root) :]
        prefix = f"/files/{uid}"
        if not (scope_path.rstrip("/") == prefix or scope_path.startswith(prefix + "/")):
            return dav_error(
                404, "NotFound", f"File with name {scope_path.strip('/')} could not be located"
            )
        rel = norm_path(scope_path[len(prefix) :])
        where = basic.find(clark(DAV, "where"))
        condition = where[0] if where is not None and len(where) else None
        with self.sim.lock:
            root = self.tree.resolve(uid, rel)
            if root is None:
                return _not_found(rel)
            operators = 0 if condition is None else _count_operators(condition)
            if operators > SEARCH_OPERATOR_LIMIT:
                # after the scope's 404 (FileSearchBackend::search finds the folder first):
                # transformQuery throws InvalidArgumentException; SearchDAV's SearchHandler
                # catches only BadRequest, so Sabre's Server answers 500 with it
                message = (
                    f"Invalid search query, maximum operator limit of {SEARCH_OPERATOR_LIMIT} "
                    f"exceeded, got {operators} operators"
                )
                return _uncaught("InvalidArgumentException", message)
            items: list[tuple[str, Node]] = []
            for item_path, item in self._candidates(uid, rel, condition):
                if self.tree.is_failed(item):
                    # lib/private/Files/Cache/FailedCache.php searchQuery: a FailedStorage
                    # mount answers no search
                    continue
                below = item is not root and posixpath.dirname(item_path) != rel
                if depth.strip() == "1" and below:
                    continue
                if condition is None or self._matches(uid, item_path, item, condition):
                    items.append((item_path, item))
            items = self._order(uid, basic, items)
            # nextcloud/server apps/dav/lib/Files/FileSearchBackend.php transformQuery: at most
            # nresults results (100 without one, or with 0), offset firstresult in SearchDAV's
            # own namespace (icewind1991/SearchDAV src/XML/Limit.php xmlDeserialize reads
            # '{' . SearchPlugin::SEARCHDAV_NS . '}firstresult'; an nc:firstresult, which the
            # oc:filter-files REPORT reads, is no offset here). The scope's
            # own folder takes its place in that window and is dropped after it: the file-cache
            # query (lib/private/Files/Cache/QuerySearchHelper.php searchInCaches,
            # applySearchConstraints: setMaxResults/setFirstResult) matches the folder too
            # (CacheJail::addJailFilterQuery keeps path = the jail's root), and only then does
            # lib/private/Files/Node/Folder.php search leave it out ("don't include this
            # folder in the results"). Without an orderby the database's order decides; here
            # the paths', which puts the scope first, as its lowest file id would.
            limit = basic.find(clark(DAV, "limit"))
            count, start = 0, 0
            if limit is not None:
                count = int((limit.findtext(clark(DAV, "nresults")) or "0").strip() or 0)
                start = int((limit.findtext(clark(SEARCHDAV, "firstresult")) or "0").strip() or 0)
            items = [pn for pn in items[start : start + (count or 100)] if pn[1] is not root]
            base = f"{self.sim.web_root}/remote.php/dav/files/{uid}"
            return self.multistatus(uid, base, items, props)

    def _candidates(
        self, uid: str, rel: str, condition: etree._Element | None
    ) -> Iterator[tuple[str, Node]]:
        """What a SEARCH under ``rel`` must test: the nodes required ``oc:fileid`` equalities
        name (looked up by id, as Nextcloud's file cache does), else every node of the view
        below ``rel``. Either way the whole condition is still tested."""
        file_ids = _required_fileids(condition)
        if file_ids is None:
            yield from self.tree.walk_view(uid, rel)
            return
        for file_id in sorted(file_ids):
            node = self.tree.nodes.get(file_id)
            path = self.tree.view_path(uid, node) if node is not None else None
            inside = path is not None and (rel == "/" or path == rel or path.startswith(rel + "/"))
            if node is not None and path is not None and inside:
                yield path, node

    def _value(self, uid: str, path: str, node: Node, name: str) -> Any:
        if name == clark(OC, "fileid"):
            return node.id
        if name in (clark(OC, "size"), clark(DAV, "getcontentlength")):
            return node.size
        if name == clark(DAV, "getlastmodified"):
            return node.mtime
        if name == clark(DAV, "getcontenttype"):
            return node.mime
        if name == clark(DAV, "displayname"):
            return posixpath.basename(path)
        if name == clark(OC, "favorite"):
            return uid in node.favorite_of
        if name == clark(NC, "upload_time"):
            return node.created
        if name == clark(NC, "creation_time"):
            return 0
        if name == clark(OC, "owner-id"):
            return node.owner
        if name == clark(DAV, "resourcetype"):
            return "collection" if node.is_dir else ""
        return None

    def _matches(self, uid: str, path: str, node: Node, cond: etree._Element) -> bool:
        tag = etree.QName(cond).localname
        if tag == "and":
            return all(self._matches(uid, path, node, c) for c in cond)
        if tag == "or":
            return any(self._matches(uid, path, node, c) for c in cond)
        if tag == "not":
            return not all(self._matches(uid, path, node, c) for c in cond)
        if tag == "is-collection":
            return node.is_dir
        prop_el = cond.find(clark(DAV, "prop"))
        if prop_el is None or not len(prop_el):
            return False
        name = str(prop_el[0].tag)  # a parsed element's tag: lxml gives str
        literal = (cond.findtext(clark(DAV, "literal")) or "").strip()
        value = self._value(uid, path, node, name)
        if value is None:
            return False
        if isinstance(value, bool):
            expected: Any = literal in ("1", "true")
        elif isinstance(value, int):
            if name == clark(DAV, "getlastmodified"):
                expected = _parse_date(literal)
            else:
                expected = php_int(literal)
            if expected is None:
                return False
        else:
            expected = literal
        if tag == "eq":
            return bool(value == expected)
        if tag == "like":
            return self._like(str(value), str(expected))
        ops: dict[str, Callable[[Any, Any], bool]] = {
            "gt": lambda a, b: a > b,
            "gte": lambda a, b: a >= b,
            "lt": lambda a, b: a < b,
            "lte": lambda a, b: a <= b,
        }
        op = ops.get(tag)
        try:
            return op is not None and op(value, expected)
        except TypeError:
            return False

    @staticmethod
    def _like(value: str, pattern: str) -> bool:
        rx = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
        return re.fullmatch(rx, value, re.I | re.S) is not None

    def _order(
        self, uid: str, basic: etree._Element, items: list[tuple[str, Node]]
    ) -> list[tuple[str, Node]]:
        items = sorted(items, key=lambda pn: pn[0])
        orderby = basic.find(clark(DAV, "orderby"))
        if orderby is None:
            return items
        for order in reversed(list(orderby)):
            prop_el = order.find(clark(DAV, "prop"))
            if prop_el is None or not len(prop_el):
                continue
            name = str(prop_el[0].tag)  # a parsed element's tag: lxml gives str
            descending = order.find(clark(DAV, "descending")) is not None

            def key(pn: tuple[str, Node], name: str = name) -> Any:
                value = self._value(uid, pn[0], pn[1], name)
                return (value is None, value if value is not None else 0)

            items.sort(key=key, reverse=descending)
        return items
