"""WebDAV request bodies and multistatus parsing (reference/nextcloud-api.md §3).

Pure functions: no HTTP here. Nextcloud's Sabre server answers ``207 Multi-Status`` with one
``d:response`` per resource; properties that do not apply come in a second ``d:propstat`` with
status 404, which this parser ignores. Hrefs are URL-encoded per segment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import quote, unquote
from xml.etree.ElementTree import Element
from xml.sax.saxutils import escape as xml_escape

from defusedxml import ElementTree

from ncindex.errors import NextcloudProtocolError
from ncindex.nextcloud.http_dates import http_date_seconds

DAV = "DAV:"
OC = "http://owncloud.org/ns"
NC = "http://nextcloud.org/ns"

_PROPS = (
    f"{{{OC}}}fileid",
    f"{{{DAV}}}getetag",
    f"{{{DAV}}}getlastmodified",
    f"{{{DAV}}}getcontenttype",
    f"{{{DAV}}}getcontentlength",
    f"{{{OC}}}size",
    f"{{{DAV}}}resourcetype",
    f"{{{OC}}}permissions",
    f"{{{NC}}}system-tags",
    f"{{{OC}}}owner-id",
    f"{{{NC}}}share-attributes",
    f"{{{NC}}}mount-type",
    f"{{{NC}}}is-federated",
)

_PROP_XML = (
    "<d:prop><oc:fileid/><d:getetag/><d:getlastmodified/><d:getcontenttype/>"
    "<d:getcontentlength/><oc:size/><d:resourcetype/><oc:permissions/><nc:system-tags/>"
    "<oc:owner-id/><nc:share-attributes/><nc:mount-type/>"
    "<nc:is-federated/></d:prop>"
)

PROPFIND_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    f'<d:propfind xmlns:d="{DAV}" xmlns:oc="{OC}" xmlns:nc="{NC}">{_PROP_XML}</d:propfind>'
)


@dataclass(frozen=True, slots=True)
class DavEntry:
    """One resource of a multistatus answer.

    ``path`` is relative to the user's files root (``/Projects/spec.md``; ``/`` for the root),
    ``etag`` is unquoted, ``modified_at`` Unix seconds, ``size`` bytes (``oc:size``, recursive
    for folders), ``owner`` the owner's user id (``oc:owner-id``), ``tags`` the
    system-tag names, ``downloadable`` false when the share the user sees it through is
    view-only (``nc:share-attributes``), ``mount_type`` the type of the mount it lies on
    (``nc:mount-type``, nextcloud/server ``apps/dav/lib/Connector/Sabre/FilesPlugin.php``
    ``handleGetProperties``: ``getMountPoint()->getMountType()``; ``""`` for the user's home
    and when not answered), ``federated`` whether it lies on a federated share
    (``nc:is-federated``, the same handler: the mount is a files_sharing
    ``External\\Mount``; a PHP bool, which Sabre writes as ``1`` or nothing — how it is
    written is a guess from sabre/xml's standard serializer, ``true`` is taken too; answered
    by recent releases only, false when not answered).
    """

    path: str
    file_id: int | None
    etag: str
    modified_at: int
    is_folder: bool
    content_type: str | None = None
    size: int | None = None
    permissions: str = ""
    owner: str | None = None
    tags: list[str] = field(default_factory=list)
    downloadable: bool = True
    mount_type: str = ""
    federated: bool = False

    @property
    def external(self) -> bool:
        """Whether it lies on a storage another server holds, whose etags do not show the
        changes made there: an external storage (files_external:
        ``apps/files_external/lib/Config/ExternalMountPoint.php`` ``getMountType`` answers
        ``external``, ``external-session`` with session credentials) or a federated share
        (:attr:`federated`; its mount type is ``shared``, as a local share's). Nextcloud
        notices such changes only when a folder holding them is looked at
        (``lib/private/Files/View.php`` ``getCacheEntry``: the storage's watcher, as the
        mount's ``filesystem_check_changes`` allows; ``apps/files_sharing/lib/External/
        Storage.php`` ``getWatcher``/``hasUpdated``: the remote root's etag, once a request),
        and the etag of the mount's root reaches the folders above it from the file cache
        alone (``View::getFileInfo`` → ``addSubMounts``)."""
        return self.federated or self.mount_type in ("external", "external-session")

    @property
    def mounted(self) -> bool:
        """Whether the file lies on a mounted storage (``M`` in ``oc:permissions``: a group
        folder or an external storage, ``lib/private/Files/FileInfo.php`` ``isMounted``), where
        no user owns it and ``oc:owner-id`` names whoever looks: nextcloud/groupfolders
        ``lib/Mount/GroupFolderStorage.php`` ``getOwner`` answers the mount's user (the
        session's otherwise); an external storage's ``Common::getOwner`` the session's user
        (from memory, not re-read)."""
        return "M" in self.permissions

    @property
    def readable(self) -> bool:
        """Whether the user may read the bytes: ``G`` is in ``oc:permissions`` (Nextcloud ≥ 25,
        ``OCP\\Files\\DavUtil::getDavPermissions``) and the file is :attr:`downloadable`.
        A file an admin's access-control rule blocks (files_accesscontrol) is still listed,
        without ``G``, and its GET answers 404 (nextcloud/server
        ``apps/dav/lib/Connector/Sabre/File.php`` ``get``); a file of a view-only share is
        listed with ``G``, and its GET answers 403 (``apps/dav/lib/DAV/ViewOnlyPlugin.php``
        ``checkViewOnly``; in later releases only when ``IShare::canSeeContent`` is false —
        the admin's ``shareapi_allow_view_without_download`` off — and COPY/MOVE always): its
        text is not shown to that user either way. An answer without ``oc:permissions`` says
        nothing, and counts as readable."""
        return (not self.permissions or "G" in self.permissions) and self.downloadable


def preferred(entries: Sequence[DavEntry]) -> DavEntry:
    """Of the entries one file id answers with (a file the user reaches through several
    mounts, a folder share and a share of the file in it, say: each mount has its own
    permissions and share attributes, ``lib/private/Files/FileInfo.php`` ``getPermissions``,
    ``apps/dav/lib/DAV/ViewOnlyPlugin.php`` ``checkViewOnly``), the first :attr:`readable
    <DavEntry.readable>` one, else the first: the user can read the file when any of its
    paths lets them, and its bytes are fetched through that path. Raises ``IndexError`` for
    no entries."""
    return next((e for e in entries if e.readable), entries[0])


def files_root(user: str) -> str:
    """The WebDAV path of ``user``'s files root: ``/remote.php/dav/files/{user}``."""
    return f"/remote.php/dav/files/{quote(user, safe='')}"


def file_url_path(user: str, path: str) -> str:
    """URL path of ``path`` (relative to the user's files root), URL-encoded per segment."""
    return files_root(user) + quote(path if path.startswith("/") else "/" + path, safe="/")


SYSTEMTAGS_PROPFIND_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    f'<d:propfind xmlns:d="{DAV}" xmlns:oc="{OC}">'
    "<d:prop><oc:id/><oc:display-name/></d:prop></d:propfind>"
)
"""``PROPFIND /remote.php/dav/systemtags/`` (reference §3.3): each tag's id and name."""


def filter_files_body(tag_id: int, props: str | None = None) -> str:
    """REPORT ``oc:filter-files`` body listing the files carrying system tag ``tag_id``, with
    ``props`` (a ``<d:prop>`` element; default the PROPFIND properties)
    (reference §3.2; nextcloud/server ``apps/dav/lib/Connector/Sabre/FilesReportPlugin.php``,
    ``onReport``: the ``oc:systemtag`` rule is resolved by ``processFilterRulesForFileIDs``
    over the whole user folder, whatever folder the REPORT is sent to)."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<oc:filter-files xmlns:d="{DAV}" xmlns:oc="{OC}" xmlns:nc="{NC}">'
        f"{_PROP_XML if props is None else props}"
        f"<oc:filter-rules><oc:systemtag>{int(tag_id)}</oc:systemtag></oc:filter-rules>"
        "</oc:filter-files>"
    )


FILEID_PROP = "<d:prop><oc:fileid/></d:prop>"
"""Only the file id (a tag's membership)."""


def parse_file_ids(body: bytes) -> set[int]:
    """The ``oc:fileid`` values of a multistatus (a tag's members: only the ids are needed,
    so nothing else is read). Raises ``NextcloudProtocolError`` for a body that is not a
    multistatus or an id that is not a number."""
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise NextcloudProtocolError(f"WebDAV answer is not XML: {exc}") from exc
    if root.tag != f"{{{DAV}}}multistatus":
        raise NextcloudProtocolError(f"expected d:multistatus, got {root.tag}")
    out: set[int] = set()
    for el in root.iter(f"{{{OC}}}fileid"):
        text = (el.text or "").strip()
        if not text.isdigit():
            raise NextcloudProtocolError(f"file id {text!r} is not a number")
        out.add(int(text))
    return out


SABRE = "http://sabredav.org/ns"

#: The class of the exception Nextcloud throws when it refuses a login after checking the
#: credentials: nextcloud/server ``lib/private/User/Session.php`` ``completeLogin`` throws it
#: for a disabled account ("User disabled", "Account disabled" in later releases) and when an
#: app cancels the login.
LOGIN_EXCEPTION = "OC\\User\\LoginException"


def sabre_error(body: bytes) -> tuple[str, str] | None:
    """``(s:exception, s:message)`` of Sabre's XML error body (``<d:error>``), or ``None``
    for a body that is not one (not XML, another root). Never raises."""
    try:
        root = ElementTree.fromstring(body)
    except (ElementTree.ParseError, ValueError):  # defusedxml's refusals are ValueErrors
        return None
    if root.tag != f"{{{DAV}}}error":
        return None
    return (
        (root.findtext(f"{{{SABRE}}}exception") or "").strip(),
        (root.findtext(f"{{{SABRE}}}message") or "").strip(),
    )


def login_refused(body: bytes) -> bool:
    """Whether a WebDAV error body says Nextcloud refused the login itself (a disabled
    account), not that the server failed: nextcloud/server
    ``apps/dav/lib/Connector/Sabre/Auth.php`` ``check`` turns every exception of the login but
    ``NotAuthenticated`` into ``ServiceUnavailable("<class>: <message>")``, so a disabled
    account's app password answers HTTP 503 with ``s:message``
    ``OC\\User\\LoginException: User disabled`` (nextcloud/server#22758; the exception itself
    when it escapes Sabre's plugin uncaught, a *guess* for the Bearer path)."""
    error = sabre_error(body)
    if error is None:
        return False
    exception, message = error
    return exception == LOGIN_EXCEPTION or message.startswith(LOGIN_EXCEPTION + ":")


#: ``s:message`` of the 503 nextcloud/server ``apps/dav/lib/Connector/Sabre/ObjectTree.php``
#: ``getNodeForPath`` answers for a path on a storage that is not available (a PHP literal,
#: never translated).
STORAGE_UNAVAILABLE = "Storage is temporarily not available"


def storage_unavailable(body: bytes) -> bool:
    """Whether a WebDAV error body is ``ObjectTree::getNodeForPath``'s refusal of a path whose
    storage is not available (``ServiceUnavailable`` with :data:`STORAGE_UNAVAILABLE`): an
    external storage or a federated share that cannot be reached now, not an outage of
    Nextcloud (Nextcloud's desktop client tells the two apart by this message too, in its
    propagator's error classification; its file was not pinned down). Never raises."""
    return sabre_error(body) == ("Sabre\\DAV\\Exception\\ServiceUnavailable", STORAGE_UNAVAILABLE)


def parse_system_tags(body: bytes) -> dict[int, str]:
    """Tag id → tag name (as Nextcloud spells it) from a ``PROPFIND
    /remote.php/dav/systemtags/`` answer, in the answer's order (the collection's own
    response has no ``oc:id`` and is skipped). Raises ``NextcloudProtocolError`` for a body
    that is not a multistatus or an id that is not a number."""
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise NextcloudProtocolError(f"WebDAV answer is not XML: {exc}") from exc
    if root.tag != f"{{{DAV}}}multistatus":
        raise NextcloudProtocolError(f"expected d:multistatus, got {root.tag}")
    out: dict[int, str] = {}
    for response in root.iterfind(f"{{{DAV}}}response"):
        props = {}
        for propstat in response.iterfind(f"{{{DAV}}}propstat"):
            prop = propstat.find(f"{{{DAV}}}prop")
            if prop is not None and " 200 " in propstat.findtext(f"{{{DAV}}}status", default=""):
                props.update({child.tag: (child.text or "").strip() for child in prop})
        tag_id, name = props.get(f"{{{OC}}}id"), props.get(f"{{{OC}}}display-name")
        if not tag_id or name is None:
            continue
        if not tag_id.isdigit():
            raise NextcloudProtocolError(f"system tag id {tag_id!r} is not a number")
        out[int(tag_id)] = name
    return out


def search_by_fileid_body(user: str, file_id: int) -> str:
    """RFC 5323 SEARCH body finding ``file_id`` in ``user``'s files (reference §3.4)."""
    return search_by_fileids_body(user, [file_id])


MAX_FILEIDS_PER_SEARCH = 50
"""Most file ids one SEARCH asks for: nextcloud/server
``apps/dav/lib/Files/FileSearchBackend.php`` refuses a ``d:where`` of more than
``OPERATOR_LIMIT`` (100) comparisons (``countSearchOperators``)."""


SEARCH_RESULTS_LIMIT = 1000
"""Results a SEARCH for several file ids may answer: only the asked files match, so a generous
limit costs nothing; it leaves room for a file seen at several paths (guessed: how often
Nextcloud lists one file twice was not measured)."""


def search_by_fileids_body(user: str, file_ids: Sequence[int]) -> str:
    """RFC 5323 SEARCH body finding each of ``file_ids`` (1 to
    :data:`MAX_FILEIDS_PER_SEARCH`) in ``user``'s files: one ``d:eq`` on ``oc:fileid``, or
    several inside ``d:or`` (``FileSearchBackend::transformSearchOperation`` turns it into an
    OR of comparisons), with a ``d:limit`` of :data:`SEARCH_RESULTS_LIMIT` results (without
    one Nextcloud answers at most 100: ``transformQuery``; a file the user reaches through
    several mounts may answer once for each, so a limit of one per id could cut another off).
    Raises ``ValueError`` for no ids or too many."""
    if not 1 <= len(file_ids) <= MAX_FILEIDS_PER_SEARCH:
        raise ValueError(f"1 to {MAX_FILEIDS_PER_SEARCH} file ids per SEARCH, not {len(file_ids)}")
    eqs = "".join(
        f"<d:eq><d:prop><oc:fileid/></d:prop><d:literal>{int(i)}</d:literal></d:eq>"
        for i in file_ids
    )
    where = eqs if len(file_ids) == 1 else f"<d:or>{eqs}</d:or>"
    limit = (
        ""
        if len(file_ids) == 1
        else f"<d:limit><d:nresults>{SEARCH_RESULTS_LIMIT}</d:nresults></d:limit>"
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<d:searchrequest xmlns:d="{DAV}" xmlns:oc="{OC}" xmlns:nc="{NC}"><d:basicsearch>'
        f"<d:select>{_PROP_XML}</d:select>"
        f"<d:from><d:scope><d:href>/files/{xml_escape(user)}</d:href>"
        "<d:depth>infinity</d:depth></d:scope></d:from>"
        f"<d:where>{where}</d:where><d:orderby/>{limit}</d:basicsearch></d:searchrequest>"
    )


def search_folders_body(user: str, limit: int) -> str:
    """RFC 5323 SEARCH body listing the folders of ``user``'s files (``d:is-collection``,
    which nextcloud/server ``apps/dav/lib/Files/FileSearchBackend.php``
    ``transformSearchOperation`` turns into the folder MIME type), with ``d:resourcetype``
    only. Each answers at its path in the user's view, a folder inside a share mounted below
    the top included (``FileSearchBackend::getHrefForNode``; a share's own folder too:
    ``CacheJail::addJailFilterQuery`` keeps the jail's root).

    ``d:nresults`` (icewind1991/SearchDAV ``src/XML/Limit.php``) is ``limit + 1``: Nextcloud
    counts the user's files folder itself among those results and drops it only afterwards
    (``lib/private/Files/Cache/QuerySearchHelper.php`` ``searchInCaches`` limits the file-cache
    query, which matches the jail's root, then ``lib/private/Files/Node/Folder.php``
    ``search`` leaves the searched folder out), so an answer cut short holds ``limit`` folders
    or more, and one of fewer is every folder."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<d:searchrequest xmlns:d="{DAV}"><d:basicsearch>'
        "<d:select><d:prop><d:resourcetype/></d:prop></d:select>"
        f"<d:from><d:scope><d:href>/files/{xml_escape(user)}</d:href>"
        "<d:depth>infinity</d:depth></d:scope></d:from>"
        "<d:where><d:is-collection/></d:where><d:orderby/>"
        f"<d:limit><d:nresults>{int(limit) + 1}</d:nresults></d:limit>"
        "</d:basicsearch></d:searchrequest>"
    )


def parse_multistatus(body: bytes, user: str, web_root: str = "") -> list[DavEntry]:
    """Parse a 207 answer of PROPFIND, SEARCH or REPORT into entries, in document order.

    Hrefs are absolute from the server's web root (Sabre's base URI): a Nextcloud installed
    under ``https://example.org/nextcloud`` answers ``/nextcloud/remote.php/dav/files/…``, so
    ``web_root`` (the path of the configured Nextcloud URL, ``/nextcloud``; ``""`` at the
    root) is part of the files root the hrefs must start with.

    Raises ``NextcloudProtocolError`` when the body is not a DAV multistatus or an href lies
    outside ``user``'s files root.
    """
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise NextcloudProtocolError(f"WebDAV answer is not XML: {exc}") from exc
    if root.tag != f"{{{DAV}}}multistatus":
        raise NextcloudProtocolError(f"expected d:multistatus, got {root.tag}")
    prefix = web_root.rstrip("/") + files_root(user)
    entries = []
    for response in root.iterfind(f"{{{DAV}}}response"):
        href = unquote(response.findtext(f"{{{DAV}}}href", default=""))
        if not href.startswith(unquote(prefix)):
            raise NextcloudProtocolError(f"href {href!r} is outside {prefix}")
        path = "/" + href[len(unquote(prefix)) :].strip("/")
        props = _ok_props(response)
        entries.append(_entry(path, props))
    return entries


def _ok_props(response: Element) -> dict[str, Element]:
    props: dict[str, Element] = {}
    for propstat in response.iterfind(f"{{{DAV}}}propstat"):
        status = propstat.findtext(f"{{{DAV}}}status", default="")
        if " 200 " not in status:
            continue
        prop = propstat.find(f"{{{DAV}}}prop")
        if prop is not None:
            props.update({child.tag: child for child in prop if child.tag in _PROPS})
    return props


def _entry(path: str, props: dict[str, Element]) -> DavEntry:
    def text(tag: str) -> str | None:
        el = props.get(tag)
        return el.text.strip() if el is not None and el.text else None

    resourcetype = props.get(f"{{{DAV}}}resourcetype")
    is_folder = resourcetype is not None and resourcetype.find(f"{{{DAV}}}collection") is not None
    file_id = text(f"{{{OC}}}fileid")
    modified = text(f"{{{DAV}}}getlastmodified")
    size = text(f"{{{OC}}}size") or text(f"{{{DAV}}}getcontentlength")
    tags_el = props.get(f"{{{NC}}}system-tags")
    tags = [t.text for t in tags_el if t.text] if tags_el is not None else []
    try:
        return DavEntry(
            path=path,
            file_id=int(file_id) if file_id else None,
            etag=(text(f"{{{DAV}}}getetag") or "").strip('"'),
            modified_at=http_date_seconds(modified) if modified else 0,
            is_folder=is_folder,
            content_type=text(f"{{{DAV}}}getcontenttype"),
            size=int(size) if size else None,
            permissions=text(f"{{{OC}}}permissions") or "",
            owner=text(f"{{{OC}}}owner-id"),
            tags=sorted(tags),
            downloadable=_downloadable(text(f"{{{NC}}}share-attributes")),
            mount_type=text(f"{{{NC}}}mount-type") or "",
            federated=(text(f"{{{NC}}}is-federated") or "").lower() in ("1", "true"),
        )
    except (TypeError, ValueError) as exc:
        raise NextcloudProtocolError(f"bad WebDAV property for {path}: {exc}") from exc


def _downloadable(attributes: str | None) -> bool:
    """Whether ``nc:share-attributes`` (``FilesPlugin::handleGetProperties``:
    ``json_encode(Node::getShareAttributes())``, the ``IAttributes::toArray`` list
    ``[{"scope", "key", "value"}]`` of the share a node is seen through, ``[]`` otherwise;
    ``None``: not in the answer) lets the user download the file: not when the
    ``permissions``/``download`` attribute is set and false, the test of nextcloud/server
    ``apps/dav/lib/DAV/ViewOnlyPlugin.php`` ``checkViewOnly`` (``$canDownload !== null &&
    !$canDownload``). Raises ``ValueError`` for a value that is not such a JSON list."""
    if attributes is None:
        return True
    decoded = json.loads(attributes)
    if not isinstance(decoded, list):
        raise ValueError(f"nc:share-attributes is not a list: {attributes!r}")
    for item in decoded:
        if not isinstance(item, dict):
            raise ValueError(f"nc:share-attributes item is not an object: {item!r}")
        if item.get("scope") == "permissions" and item.get("key") == "download":
            value = item.get("value")
            return value is None or value not in (False, 0, "", "0", [], {})
    return True
