"""In-memory Nextcloud state: users, one file tree per user, user shares and the trash bin.

The tree is storage-shaped like Nextcloud's: every node lives in exactly one owner's storage and
has one file id for its whole life (rename and move keep it, copy makes a new one). A share
mounts a node (file or folder, same ids) into another user's view at a mount path, so one file
id is visible to several users at different paths. Paths in this module are *view paths*:
relative to the user's ``files`` folder, ``/`` separated, starting with ``/`` (``/`` is the
user's root).

Nothing here locks: :class:`~ncindex.simulator.simulator.NextcloudSimulator` holds its single lock
around every call. Mutations report what happened through the ``emit`` callback as Nextcloud
file events (class name, payload, acting user); the simulator turns them into webhook envelopes.
"""

from __future__ import annotations

import hashlib
import mimetypes
import posixpath
import random
import time
import unicodedata
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field
from typing import Any

from ncindex.simulator.events import (
    BEFORE_NODE_COPIED,
    BEFORE_NODE_CREATED,
    BEFORE_NODE_DELETED,
    BEFORE_NODE_RENAMED,
    BEFORE_NODE_RESTORED,
    BEFORE_NODE_TOUCHED,
    BEFORE_NODE_WRITTEN,
    NODE_COPIED,
    NODE_CREATED,
    NODE_DELETED,
    NODE_RENAMED,
    NODE_RESTORED,
    NODE_TOUCHED,
    NODE_WRITTEN,
)

__all__ = [
    "AlreadyExistsError",
    "ConflictError",
    "FileTree",
    "ForbiddenError",
    "Node",
    "NotFoundError",
    "Share",
    "StateError",
    "TrashItem",
    "User",
    "mime_for",
    "norm_path",
]

#: Extension → MIME type as Nextcloud assigns them (nextcloud/server
#: resources/config/mimetypemapping.dist.json, the first type of each entry).
_MIME_BY_EXT = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".org": "text/org",
    ".note": "application/octet-stream",
    ".pdf": "application/pdf",
    ".json": "application/json",
    ".js": "application/javascript",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".php": "application/x-php",
    ".csv": "text/csv",
    ".html": "text/html",
    ".htm": "text/html",
    ".xml": "application/xml",
    ".rst": "text/x-rst",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".webp": "image/webp",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".odp": "application/vnd.oasis.opendocument.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".ods": "application/vnd.oasis.opendocument.spreadsheet",
    ".epub": "application/epub+zip",
    ".rtf": "text/rtf",
    # not in mimetypemapping.dist.json: Nextcloud stores them as application/octet-stream
    ".eml": "application/octet-stream",
    ".tsv": "application/octet-stream",
    ".msg": "application/octet-stream",
}
DIR_MIME = "httpd/unix-directory"


class StateError(Exception):
    """Base class of the state errors; ``message`` is the Sabre-style text."""


class NotFoundError(StateError):
    """Raised when a path or id is not visible to the user."""


class ConflictError(StateError):
    """Raised when the parent of a target does not exist (WebDAV 409)."""


class AlreadyExistsError(StateError):
    """Raised when the target of a create/move/copy exists and may not be replaced."""


class ForbiddenError(StateError):
    """Raised when the user lacks the permission (read-only share, moving into itself)."""


#: ``OCP\\Constants::PERMISSION_*`` (lib/public/Constants.php).
PERMISSION_READ = 1
PERMISSION_UPDATE = 2
PERMISSION_CREATE = 4
PERMISSION_DELETE = 8
PERMISSION_SHARE = 16
PERMISSION_ALL = 31


def mime_for(name: str) -> str:
    """Return the MIME type Nextcloud would assign to a file ``name`` (by extension)."""
    ext = posixpath.splitext(name)[1].lower()
    if ext in _MIME_BY_EXT:
        return _MIME_BY_EXT[ext]
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or "application/octet-stream"


def is_partial(path: str) -> bool:
    """Whether Nextcloud takes ``path`` for an upload under way: a ``.part`` extension (PHP
    ``pathinfo``'s, after the name's last dot) or a ``.part/`` segment — nextcloud/server
    ``lib/private/Files/Cache/Scanner.php`` ``isPartialFile``. Such a file is never scanned,
    so it has no file-cache row (:meth:`FileTree.put_part_file`)."""
    name = posixpath.basename(path)
    return ("." in name and name.rpartition(".")[2] == "part") or ".part/" in path


def norm_path(path: str) -> str:
    """Normalise a view path: composed Unicode (NFC), leading ``/``, no trailing ``/``, no empty
    or ``.`` segments — nextcloud/server lib/private/Files/Filesystem.php ``normalizePath``
    (``OC_Util::normalizeUnicode``: ``Normalizer::normalize``, whose default form is NFC)."""
    parts: list[str] = []
    for part in unicodedata.normalize("NFC", path).replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


@dataclass
class User:
    """A Nextcloud account: ``uid``, display name, app passwords, admin flag, e-mail, and the
    login name it signs in with (LDAP and e-mail logins differ from the uid). ``token_logins``
    maps an app password to the login name it was created under (``IToken::getLoginName``).
    ``delegated``: the admin setting classes a group of the user is authorized for (admin
    delegation: nextcloud/server ``AuthorizedGroupMapper::findAllClassesForUser``); ``enabled``
    false for a disabled account."""

    uid: str
    display_name: str
    passwords: set[str]
    admin: bool = False
    email: str | None = None
    created_at: int = 0
    login_name: str = ""
    token_logins: dict[str, str] = field(default_factory=dict)
    delegated: set[str] = field(default_factory=set)
    #: ``occ user:disable`` clears it (:meth:`~ncindex.simulator.simulator.NextcloudSimulator.
    #: disable_user`): the account keeps its files and app passwords but may not log in.
    enabled: bool = True
    #: App passwords whose stored login password expired (:meth:`~ncindex.simulator.
    #: simulator.NextcloudSimulator.expire_app_password`): kept, but refused until the
    #: user's next Login Flow stores the login password again.
    expired: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.login_name = self.login_name or self.uid
        for password in self.passwords:
            self.token_logins.setdefault(password, self.login_name)


@dataclass(eq=False)
class Node:
    """A file or folder in one owner's storage; ``mtime``/``created`` are Unix seconds."""

    id: int
    name: str
    is_dir: bool
    owner: str
    parent: Node | None = None
    children: dict[str, Node] = field(default_factory=dict)
    content: bytes = b""
    mtime: int = 0
    created: int = 0
    etag: str = ""
    mime: str = ""
    is_home: bool = False
    favorite_of: set[str] = field(default_factory=set)
    tags: set[int] = field(default_factory=set)
    #: files_versions' stored versions of a file: revision (the mtime the file had then, Unix
    #: seconds; the name ``files_versions/<path>.v<revision>``) → its bytes
    #: (:meth:`FileTree.put_file`; restored by :func:`ncindex.simulator.versions.restore_version`)
    versions: dict[int, bytes] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """Size in bytes; recursive for folders (like ``oc:size``)."""
        if not self.is_dir:
            return len(self.content)
        return sum(child.size for child in self.children.values())

    def walk(self) -> Iterator[Node]:
        """Yield this node and every node below it (pre-order, children sorted by name)."""
        yield self
        for name in sorted(self.children):
            yield from self.children[name].walk()

    def is_ancestor_of(self, other: Node) -> bool:
        """True when ``other`` is this node or lies below it."""
        cur: Node | None = other
        while cur is not None:
            if cur is self:
                return True
            cur = cur.parent
        return False


@dataclass(eq=False)
class Share:
    """A user share: ``node`` of ``owner`` mounted for ``sharee`` at ``mount_path``, with
    ``permissions`` as the OCS API stores them (``OCP\\Constants::PERMISSION_*`` bits: read 1,
    update 2, create 4, delete 8, share 16; a file share never has create or delete), and
    ``attributes`` as ``IAttributes::toArray`` gives them (nextcloud/server
    ``lib/private/Share20/ShareAttributes.php``: ``[{"scope", "key", "value"}, ...]``;
    ``None``: the share has none)."""

    id: int
    owner: str
    node: Node
    sharee: str
    mount_path: str
    readonly: bool = False
    created: int = 0
    permissions: int = 31
    attributes: list[dict[str, Any]] | None = None
    #: ``"user"`` (files_sharing), ``"groupfolder"``: a group folder's mount for a member
    #: (:meth:`FileTree.group_folder`), ``"external"``: an external storage's
    #: (:meth:`FileTree.external_storage`), or ``"federated"``: a federated share's
    #: (:meth:`FileTree.federated_share`); the last three are listed by no sharing API
    kind: str = "user"

    @property
    def download_refused(self) -> bool:
        """Whether the share is view-only: its ``permissions``/``download`` attribute is set
        and false (nextcloud/server ``apps/dav/lib/DAV/ViewOnlyPlugin.php``
        ``checkViewOnly``: ``$canDownload !== null && !$canDownload``; PHP's falsiness is
        taken as Python's, which differs only for the string ``"0"``)."""
        for attribute in self.attributes or []:
            if attribute.get("scope") == "permissions" and attribute.get("key") == "download":
                value = attribute.get("value")
                return value is not None and not value
        return False

    def set_permissions(self, permissions: int | None) -> None:
        """Store ``permissions`` (None: all, or read + share when read-only) as
        ``ShareAPIController::createShare`` does: read always added, create and delete taken
        from a file share."""
        if permissions is None:
            permissions = PERMISSION_READ | PERMISSION_SHARE if self.readonly else PERMISSION_ALL
        permissions |= PERMISSION_READ
        if not self.node.is_dir:
            permissions &= ~(PERMISSION_CREATE | PERMISSION_DELETE)
        self.permissions = permissions
        self.readonly = not permissions & PERMISSION_UPDATE


@dataclass(eq=False)
class TrashItem:
    """A deleted node in its owner's trash; ``deleted_at`` Unix seconds."""

    node: Node
    owner: str
    original_parent: Node
    original_path: str
    deleted_at: int

    @property
    def trash_name(self) -> str:
        """The name in ``files_trashbin/files``: ``<name>.d<deleted_at>``."""
        return f"{self.node.name}.d{self.deleted_at}"


Emit = Callable[[str, dict[str, Any], str | None], None]


def _keep_version(node: Node) -> None:
    """Store ``node``'s bytes as a version before they are replaced, as files_versions does
    on ``BeforeNodeWrittenEvent`` (nextcloud/server ``apps/files_versions/lib/Listener/
    FileEventsListener.php`` ``write_hook`` → ``Storage::store``, which skips an empty file,
    → ``Versions/LegacyVersionsBackend.php`` ``createVersion``: a copy named after the
    current mtime, which replaces a version of the same mtime). Expiry is not modelled."""
    if node.content:
        node.versions[node.mtime] = node.content


class FileTree:
    """Users, their file trees, shares and trash; every mutation emits Nextcloud file events.

    ``clock`` returns Unix seconds (float); ``emit(event_class, payload, acting_uid)`` receives
    each event in dispatch order. ``first_file_id`` is the id of the first node created.
    """

    def __init__(
        self,
        emit: Emit,
        *,
        clock: Callable[[], float] = time.time,
        seed: int = 0,
        first_file_id: int = 100,
    ) -> None:
        self._emit = emit
        self._clock = clock
        self._rng = random.Random(seed)
        self._next_id = first_file_id
        self._etag_seq = self._rng.randrange(0x60000000000, 0x6FFFFFFFFFF) << 8
        self._next_share_id = 1
        self.users: dict[str, User] = {}
        self.homes: dict[str, Node] = {}
        self.nodes: dict[int, Node] = {}
        self.shares: list[Share] = []
        self.trash: dict[str, list[TrashItem]] = {}
        #: ids of nodes an access-control rule blocks for everyone (see :meth:`is_blocked`)
        self.blocked: set[int] = set()
        #: file id → the status its GET answers although it is listed (423: locked; 503:
        #: Nextcloud cannot open it), see ``NextcloudSimulator.make_unopenable``
        self.unopenable: dict[int, int] = {}
        #: ids of folders whose storage is unavailable (see :meth:`is_unavailable`)
        self.unavailable: set[int] = set()
        #: those of :attr:`unavailable` mounted as a ``FailedStorage`` (see :meth:`is_failed`)
        self.failed: set[int] = set()
        #: the :attr:`Share.kind`\ s whose mount provider is not registered, its app disabled
        #: (:meth:`set_mounted`): their shares are kept but mounted for no one
        self.unmounted_kinds: set[str] = set()
        #: whether ``NodeRestoredEvent`` names the restored node (Nextcloud 31 and later,
        #: nextcloud/server#53752); see :meth:`restore`
        self.restored_node_has_id = True
        #: ``(uid, view path)`` → bytes of the ``.part`` files clients uploaded: on the
        #: storage, in no file-cache row, so in no listing (:meth:`put_part_file`)
        self.part_files: dict[tuple[str, str], bytes] = {}

    # ------------------------------------------------------------------ basics

    def now(self) -> int:
        """Current time in whole Unix seconds."""
        return int(self._clock())

    def new_etag(self) -> str:
        """A fresh 13-hex-digit etag, shaped like PHP ``uniqid()``."""
        self._etag_seq += self._rng.randrange(1, 0x3FF)
        return f"{self._etag_seq:013x}"

    def _new_node(self, name: str, is_dir: bool, owner: str, mtime: int | None = None) -> Node:
        now = self.now()
        node = Node(
            id=self._next_id,
            name=name,
            is_dir=is_dir,
            owner=owner,
            mtime=now if mtime is None else int(mtime),
            created=now,
            etag=self.new_etag(),
            mime=DIR_MIME if is_dir else mime_for(name),
        )
        self._next_id += 1
        self.nodes[node.id] = node
        return node

    def add_user(
        self,
        uid: str,
        password: str,
        display_name: str | None = None,
        admin: bool = False,
        email: str | None = None,
        login_name: str | None = None,
    ) -> User:
        """Create (or update) a user with an app password and an empty home folder; the app
        password belongs to ``login_name`` (default: the uid)."""
        if uid in self.users:
            user = self.users[uid]
            user.passwords.add(password)
            user.token_logins[password] = login_name or user.login_name
            user.display_name = display_name or user.display_name
            user.admin = admin or user.admin
            user.email = email or user.email
            return user
        user = User(
            uid, display_name or uid, {password}, admin, email, self.now(), login_name or uid
        )
        self.users[uid] = user
        home = self._new_node("", True, uid)
        home.is_home = True
        self.homes[uid] = home
        self.trash[uid] = []
        return user

    def user(self, uid: str) -> User:
        """Return the user ``uid`` or raise :class:`NotFoundError`."""
        try:
            return self.users[uid]
        except KeyError:
            raise NotFoundError(f"User {uid} does not exist") from None

    def delete_user(self, uid: str) -> None:
        """``occ user:delete uid`` (or the admin's delete): the user, their home with every
        file in it, their trash, and the shares they gave and received are gone, and no event
        is dispatched for any file. nextcloud/server ``lib/private/User/User.php`` ``delete``
        removes the home folder on disk (``rmdirr($homePath)``, no ``View``: no node event)
        and its storage entry; the share manager's ``userDeleted`` listener deletes the shares
        from and to them. Raises :class:`NotFoundError` for an unknown ``uid``."""
        self.user(uid)
        del self.users[uid]
        home = self.homes.pop(uid)
        self.trash.pop(uid, None)
        self.shares = [
            s for s in self.shares if s.sharee != uid and s.owner != uid and s.node.owner != uid
        ]
        gone = [i for i, node in self.nodes.items() if node.owner == uid or node is home]
        for node_id in gone:
            del self.nodes[node_id]

    # ------------------------------------------------------------------ views

    def attached(self, node: Node) -> bool:
        """True when the node hangs below its owner's home (not trashed, not purged)."""
        cur: Node | None = node
        while cur is not None:
            if cur.is_home:
                return cur is self.homes.get(cur.owner)
            cur = cur.parent
        return False

    def mounts(self, uid: str) -> dict[str, Share]:
        """Shares received by ``uid`` whose node still exists, keyed by mount path."""
        return {
            s.mount_path: s
            for s in self.shares
            if s.sharee == uid and s.kind not in self.unmounted_kinds and self.attached(s.node)
        }

    def set_mounted(self, kinds: frozenset[str], mounted: bool) -> None:
        """Mount again (or no more) the shares of ``kinds`` for their recipients, as their
        mount provider registered again (or no more) does: nextcloud/server
        ``lib/private/Files/Config/MountProviderCollection.php`` ``getMountsForUser`` asks
        the registered providers only. The shares themselves are kept (their rows stay in
        ``oc_share``). Every folder above each such mount point in its recipient's view gets
        a new etag, its mtime kept: it stands for the etag a listing reports, which
        ``lib/private/Files/FileInfo.php`` ``getEtag`` combines from the folder's own and
        those of the mounts below it (``addSubEntry``), so it changes with them."""
        if not mounted:
            for share in self.shares:
                if share.kind in kinds and share.kind not in self.unmounted_kinds:
                    self._touch_mount_parent(share, time=0)
            self.unmounted_kinds |= kinds
            return
        back = [s for s in self.shares if s.kind in kinds & self.unmounted_kinds]
        self.unmounted_kinds -= kinds
        for share in back:
            self._touch_mount_parent(share, time=0)

    def own_path(self, node: Node) -> str:
        """Path of ``node`` in its owner's view."""
        parts: list[str] = []
        cur: Node | None = node
        while cur is not None and not cur.is_home:
            parts.append(cur.name)
            cur = cur.parent
        return "/" + "/".join(reversed(parts))

    def resolve(self, uid: str, path: str) -> Node | None:
        """The node at view ``path`` of user ``uid``, or ``None``."""
        if uid not in self.homes:
            return None
        path = norm_path(path)
        best: tuple[str, Share] | None = None
        for mount_path, share in self.mounts(uid).items():
            if (path == mount_path or path.startswith(mount_path + "/")) and (
                best is None or len(mount_path) > len(best[0])
            ):
                best = (mount_path, share)
        if best is not None:
            node: Node = best[1].node
            rest = path[len(best[0]) :]
        else:
            node = self.homes[uid]
            rest = path
        for part in rest.split("/"):
            if not part:
                continue
            if not node.is_dir or part not in node.children:
                return None
            node = node.children[part]
        return node

    def share_for(self, uid: str, node: Node) -> Share | None:
        """The (innermost) share through which ``uid`` sees ``node``, if not its own."""
        if node.owner == uid and self.attached(node):
            return None
        best: Share | None = None
        best_depth = -1
        for share in self.mounts(uid).values():
            if share.node.is_ancestor_of(node):
                depth = self.own_path(share.node).count("/")
                if depth > best_depth:
                    best, best_depth = share, depth
        return best

    def view_path(self, uid: str, node: Node) -> str | None:
        """Path of ``node`` in ``uid``'s view, or ``None`` when ``uid`` cannot see it."""
        if not self.attached(node) or uid not in self.homes:
            return None
        if node.owner == uid:
            return self.own_path(node)
        share = self.share_for(uid, node)
        if share is None:
            return None
        rel = self.own_path(node)[len(self.own_path(share.node)) :]
        return norm_path(share.mount_path + rel)

    def children(self, uid: str, path: str, node: Node) -> list[tuple[str, Node]]:
        """Children of folder ``node`` (at view ``path``) as ``uid`` sees them, sorted by name."""
        out = dict(node.children)
        path = norm_path(path)
        for mount_path, share in self.mounts(uid).items():
            if posixpath.dirname(mount_path) == path and mount_path != "/":
                out[posixpath.basename(mount_path)] = share.node
        return sorted(out.items())

    def walk_view(self, uid: str, path: str = "/") -> Iterator[tuple[str, Node]]:
        """Yield ``(view path, node)`` for the node at ``path`` and everything below it."""
        node = self.resolve(uid, path)
        if node is None:
            return
        stack = [(norm_path(path), node)]
        while stack:
            cur_path, cur = stack.pop()
            yield cur_path, cur
            if cur.is_dir:
                kids = self.children(uid, cur_path, cur)
                for name, child in reversed(kids):
                    stack.append((norm_path(f"{cur_path}/{name}"), child))

    def visible_files(self, uid: str) -> dict[int, str]:
        """Ground truth for tests: file id → view path of every file ``uid`` can see."""
        return {n.id: p for p, n in self.walk_view(uid) if not n.is_dir}

    def can_write(self, uid: str, node: Node) -> bool:
        """True when ``uid`` may modify ``node`` (own node, or a share that is not read-only)."""
        if node.owner == uid:
            return True
        share = self.share_for(uid, node)
        return share is not None and bool(share.permissions & PERMISSION_UPDATE)

    def permissions(self, uid: str, node: Node, *, allow_resharing: bool = True) -> int:
        """``FileInfo::getPermissions`` of ``node`` for ``uid``: everything on one's own node
        (a file has no create), the share's bits on a received one (without share when
        resharing is off, ``shareapi_allow_resharing``); a node a files_accesscontrol rule
        blocks keeps only the share bit (no read, update, create or delete)."""
        if node.owner == uid:
            bits = PERMISSION_ALL
        else:
            share = self.share_for(uid, node)
            bits = share.permissions if share is not None else 0
            if not allow_resharing:
                bits &= ~PERMISSION_SHARE
        if not node.is_dir:
            bits &= ~PERMISSION_CREATE
        if self.is_blocked(node):
            bits &= PERMISSION_SHARE
        return bits

    def is_blocked(self, node: Node) -> bool:
        """True when a files_accesscontrol rule ("Block access to a file") matches ``node`` or a
        folder above it: Nextcloud still lists it, without read, update, create or delete
        permission (the app's ``CacheWrapper`` masks them), and refuses its bytes with 403."""
        return _at_or_above(node, self.blocked)

    def is_unavailable(self, node: Node) -> bool:
        """True when ``node`` or a folder above it is in :attr:`unavailable`: a storage
        Nextcloud cannot reach now (an external storage's server away, its credentials
        refused), whose folders it still lists from its file cache."""
        return _at_or_above(node, self.unavailable)

    def is_failed(self, node: Node) -> bool:
        """True when ``node`` or a folder above it is in :attr:`failed`: an external storage
        files_external has marked unavailable and mounts as a ``FailedStorage`` until its
        next recheck (``apps/files_external/lib/Config/ConfigAdapter.php``
        ``getAvailableStorages``; ``Availability::RECHECK_TTL_SEC`` 600), whose
        ``FailedCache`` answers no search (``searchQuery``: ``[]``)."""
        return _at_or_above(node, self.failed)

    def is_mount_root(self, uid: str, path: str) -> Share | None:
        """The share mounted for ``uid`` exactly at view ``path``, if any."""
        return self.mounts(uid).get(norm_path(path))

    def user_view_path(self, uid: str, path: str) -> str:
        """Nextcloud VFS path as used in events: ``/<uid>/files<path>``."""
        path = norm_path(path)
        return f"/{uid}/files" if path == "/" else f"/{uid}/files{path}"

    # ------------------------------------------------------------------ internals

    def _touch_up(
        self,
        node: Node | None,
        _seen: set[int] | None = None,
        *,
        time: int | None = None,
        keep_etag: bool = False,
    ) -> None:
        """New etag for ``node`` (unless ``keep_etag``) and every ancestor; the folders among
        them get the mtime ``max(theirs, time)`` (Unix seconds, default now).

        Mirrors Nextcloud's propagator (nextcloud/server ``lib/private/Files/Cache/
        Propagator.php`` ``propagateChange``: every parent a new etag and ``GREATEST(mtime,
        $time)``, ``$time`` the touched mtime for a touch, now otherwise): a folder's etag
        changes whenever anything below changes, and the change also reaches the folders
        holding share mount points of the recipients.
        """
        time = self.now() if time is None else time
        seen = set() if _seen is None else _seen
        chain: list[Node] = []
        cur = node
        while cur is not None:
            if not (keep_etag and cur is node):
                cur.etag = self.new_etag()
            if cur.is_dir:
                cur.mtime = max(cur.mtime, time)
            chain.append(cur)
            cur = cur.parent
        for share in self.shares:
            if share.id in seen or share.kind in self.unmounted_kinds:
                continue
            if not any(share.node is n for n in chain):
                continue
            seen.add(share.id)
            self._touch_mount_parent(share, seen, time=time)

    def _touch_mount_parent(
        self, share: Share, seen: set[int] | None = None, *, time: int | None = None
    ) -> None:
        parent = self.resolve(share.sharee, posixpath.dirname(share.mount_path))
        if parent is not None:
            self._touch_up(parent, seen if seen is not None else {share.id}, time=time)

    def _desc(self, uid: str, node: Node, path: str | None = None) -> dict[str, Any]:
        view = path if path is not None else self.view_path(uid, node)
        assert view is not None
        return {"id": node.id, "path": self.user_view_path(uid, view)}

    def _desc_path(self, uid: str, path: str) -> dict[str, Any]:
        return {"path": self.user_view_path(uid, path)}

    def _parent_for(self, uid: str, path: str, make_parents: bool, session: bool) -> Node:
        parent_path = posixpath.dirname(norm_path(path))
        parent = self.resolve(uid, parent_path)
        if parent is None:
            if not make_parents:
                raise ConflictError("Parent node does not exist")
            self.mkdir(uid, parent_path, parents=True, session=session)
            parent = self.resolve(uid, parent_path)
            assert parent is not None
        if not parent.is_dir:
            raise ConflictError("Parent node is not a folder")
        return parent

    def _actor(self, uid: str, session: bool) -> str | None:
        return uid if session else None

    # ------------------------------------------------------------------ mutations

    def put_file(
        self,
        uid: str,
        path: str,
        data: bytes,
        *,
        mtime: int | None = None,
        touched: bool = False,
        interrupted: bool = False,
        make_parents: bool = True,
        session: bool = True,
    ) -> tuple[Node, bool]:
        """Create or overwrite a file; returns ``(node, created)``.

        New file: BeforeNodeCreated, BeforeNodeWritten (path only), NodeCreated, NodeWritten.
        Overwrite: BeforeNodeWritten, NodeWritten. ``mtime`` Unix seconds (default now).
        ``touched``: the mtime is set by ``View::touch`` once the bytes are in place, as a
        WebDAV PUT with ``X-OC-MTime`` does it (nextcloud/server ``apps/dav/lib/Connector/
        Sabre/File.php`` ``put``: after the storage write and the pre-write hooks, before the
        post-write hooks), so BeforeNodeTouchedEvent + NodeTouchedEvent (with the id) come
        between the Before* events and NodeCreated/NodeWritten. ``interrupted``: the request
        fails once the bytes are in place and the cache updated, before the touch and the
        post-write hooks (``File::put`` throwing at the ``X-OC-MTime`` check): only the
        Before* events are sent, and the file keeps the write's mtime.
        """
        self.user(uid)
        path = norm_path(path)
        if path == "/":
            raise ForbiddenError("Cannot write to the root folder")
        actor = self._actor(uid, session)
        existing = self.resolve(uid, path)
        if existing is not None:
            if existing.is_dir:
                raise ConflictError(f"{path} is a folder")
            if not self.can_write(uid, existing):
                raise ForbiddenError("Permission denied")
            self._emit(BEFORE_NODE_WRITTEN, {"node": self._desc(uid, existing, path)}, actor)
            _keep_version(existing)
            existing.content = bytes(data)
            existing.mtime = self.now()
            self._touch_up(existing)
            if interrupted:
                return existing, False
            self._set_mtime(uid, existing, path, mtime, touched, actor)
            self._emit(NODE_WRITTEN, {"node": self._desc(uid, existing, path)}, actor)
            return existing, False
        parent = self._parent_for(uid, path, make_parents, session)
        if not self.can_write(uid, parent):
            raise ForbiddenError("Permission denied")
        self._emit(BEFORE_NODE_CREATED, {"node": self._desc_path(uid, path)}, actor)
        self._emit(BEFORE_NODE_WRITTEN, {"node": self._desc_path(uid, path)}, actor)
        name = posixpath.basename(path)
        node = self._new_node(name, False, parent.owner, None)
        node.content = bytes(data)
        node.parent = parent
        parent.children[name] = node
        self._touch_up(parent)
        if interrupted:
            return node, True
        self._set_mtime(uid, node, path, mtime, touched, actor)
        self._emit(NODE_CREATED, {"node": self._desc(uid, node, path)}, actor)
        self._emit(NODE_WRITTEN, {"node": self._desc(uid, node, path)}, actor)
        return node, True

    def put_part_file(
        self, uid: str, path: str, data: bytes, *, interrupted: bool = False, session: bool = True
    ) -> bool:
        """A client's upload to a ``.part`` name (:func:`is_partial`), as nextcloud/server
        ``apps/dav/lib/Connector/Sabre/File.php`` ``put`` writes it; returns whether it was
        new. The pre-write hooks name the path (``Filesystem::getView()->getRelativePath`` is
        not null) but no node (BeforeNodeCreated, for a new one, and BeforeNodeWritten: path
        only); the bytes reach the storage, the updater skips the partial file
        (``Updater::update``), and ``putFileInfo(['upload_time' => …])`` leaves only a partial
        entry (``Cache::insert`` without ``size``/``mtime``: ``$this->partial``), which
        ``Cache::get`` answers — so the post-write hooks' node is a ``File`` whose ``FileInfo``
        has no ``fileid`` ("null in case of part file", ``lib/private/Files/FileInfo.php``
        ``getId``) and ``Node::getId`` answers ``-1``: NodeCreatedEvent (new) and
        NodeWrittenEvent carry ``{"id": -1, "path": …}``. ``interrupted``: the request fails
        after the write (a refused ``X-OC-MTime``), the Before* events alone sent. The file
        is in no listing and has no id (:attr:`part_files`); raises as :meth:`put_file` for a
        missing parent or no create permission."""
        path = norm_path(path)
        parent = self._parent_for(uid, path, False, session)
        if not self.can_write(uid, parent):
            raise ForbiddenError("Permission denied")
        actor = self._actor(uid, session)
        new = (uid, path) not in self.part_files
        if new:
            self._emit(BEFORE_NODE_CREATED, {"node": self._desc_path(uid, path)}, actor)
        self._emit(BEFORE_NODE_WRITTEN, {"node": self._desc_path(uid, path)}, actor)
        self.part_files[(uid, path)] = bytes(data)
        if interrupted:
            return new
        uncached = {"id": -1, "path": self.user_view_path(uid, path)}
        if new:
            self._emit(NODE_CREATED, {"node": uncached}, actor)
        self._emit(NODE_WRITTEN, {"node": dict(uncached)}, actor)
        return new

    def move_part_file(
        self, uid: str, src: str, dst: str, *, overwrite: bool = True, session: bool = True
    ) -> tuple[Node, bool]:
        """A ``MOVE`` of the ``.part`` file at ``src`` to the file name ``dst`` (not partial),
        how such clients finish an upload: ``(new node, target_existed)``. sabre/dav
        ``CorePlugin::httpMove`` deletes an existing target first (:meth:`delete`'s events);
        nextcloud/server ``lib/private/Files/View.php`` ``rename`` emits no pre hook for a
        partial source (``shouldEmitHooks`` is false for it), scans the target
        (``writeUpdate``: a new file-cache row, a new id) and, "if it was a rename from a part
        file to a regular file it was a write and not a rename operation",
        ``emit_file_hooks_post``: NodeCreatedEvent and NodeWrittenEvent of the target, no
        NodeRenamedEvent. Raises :class:`NotFoundError` without such a part file,
        :class:`AlreadyExistsError` for an existing target without ``overwrite``."""
        src, dst = norm_path(src), norm_path(dst)
        data = self.part_files.get((uid, src))
        if data is None:
            raise NotFoundError(f"File with name {src.lstrip('/')} could not be located")
        existed = self._check_target(uid, dst, overwrite, session)
        parent = self._parent_for(uid, dst, False, session)
        if not self.can_write(uid, parent):
            raise ForbiddenError("Permission denied")
        del self.part_files[(uid, src)]
        name = posixpath.basename(dst)
        node = self._new_node(name, False, parent.owner, None)
        node.content = data
        node.parent = parent
        parent.children[name] = node
        self._touch_up(parent)
        actor = self._actor(uid, session)
        self._emit(NODE_CREATED, {"node": self._desc(uid, node, dst)}, actor)
        self._emit(NODE_WRITTEN, {"node": self._desc(uid, node, dst)}, actor)
        return node, existed

    def _set_mtime(
        self, uid: str, node: Node, path: str, mtime: int | None, touched: bool, actor: str | None
    ) -> None:
        """Give the file just written the mtime (Unix seconds) its writer asked for, if any
        (else it keeps the write's, now); ``touched``: by ``View::touch``
        (:meth:`_view_touch`, with its events; :meth:`put_file`)."""
        if mtime is None:
            return
        if touched:
            self._view_touch(uid, node, path, int(mtime), actor, event=True)
        else:
            node.mtime = int(mtime)

    def mkdir(
        self, uid: str, path: str, *, parents: bool = True, session: bool = True
    ) -> tuple[Node, bool]:
        """Create a folder (and missing parents if ``parents``); returns ``(node, created)``.

        Emits BeforeNodeCreated (path only) + NodeCreated per folder created. An existing folder
        is returned unchanged when ``parents`` is set, else :class:`AlreadyExistsError`.
        """
        self.user(uid)
        path = norm_path(path)
        existing = self.resolve(uid, path)
        if existing is not None:
            if existing.is_dir and parents:
                return existing, False
            raise AlreadyExistsError("The resource you tried to create already exists")
        parent = self._parent_for(uid, path, parents, session)
        if not self.can_write(uid, parent):
            raise ForbiddenError("Permission denied")
        actor = self._actor(uid, session)
        self._emit(BEFORE_NODE_CREATED, {"node": self._desc_path(uid, path)}, actor)
        name = posixpath.basename(path)
        node = self._new_node(name, True, parent.owner)
        node.parent = parent
        parent.children[name] = node
        self._touch_up(parent)
        self._emit(NODE_CREATED, {"node": self._desc(uid, node, path)}, actor)
        return node, True

    def delete(self, uid: str, path: str, *, session: bool = True) -> Node:
        """Move a file or folder to its owner's trash; one event pair for a folder.

        Emits BeforeNodeDeleted (with id) and NodeDeleted (path only). Deleting a received
        share's mount point removes the share instead (no event). Returns the node.
        """
        path = norm_path(path)
        node = self.resolve(uid, path)
        if node is None or path == "/":
            raise NotFoundError(f"File with name {path.lstrip('/')} could not be located")
        mount = self.is_mount_root(uid, path)
        if mount is not None:
            self.shares.remove(mount)
            self._touch_mount_parent(mount)
            return node
        if not self.can_write(uid, node):
            raise ForbiddenError("Permission denied")
        actor = self._actor(uid, session)
        self._emit(BEFORE_NODE_DELETED, {"node": self._desc(uid, node, path)}, actor)
        parent = node.parent
        assert parent is not None
        original_path = self.own_path(node)
        del parent.children[node.name]
        node.parent = None
        now = self.now()
        self.trash[node.owner].append(TrashItem(node, node.owner, parent, original_path, now))
        gone = [s for s in self.shares if node.is_ancestor_of(s.node)]
        self.shares = [s for s in self.shares if s not in gone]
        self._touch_up(parent)
        for share in gone:
            self._touch_mount_parent(share)
        self._emit(NODE_DELETED, {"node": self._desc_path(uid, path)}, actor)
        return node

    def _check_target(self, uid: str, dst: str, overwrite: bool, session: bool) -> bool:
        """Handle an existing target; returns True when it existed (and was removed)."""
        existing = self.resolve(uid, dst)
        if existing is None:
            return False
        if not overwrite:
            raise AlreadyExistsError(f"{dst} already exists")
        self.delete(uid, dst, session=session)
        return True

    def move(
        self,
        uid: str,
        src: str,
        dst: str,
        *,
        overwrite: bool = False,
        make_parents: bool = True,
        session: bool = True,
    ) -> tuple[Node, bool]:
        """Rename/move a file or folder (ids kept); returns ``(node, target_existed)``.

        Emits BeforeNodeRenamed (source with id, target path only) and NodeRenamed (source path
        only, target with id): one pair for a whole folder. Moving a received share's mount
        point moves the mount; so does moving a folder above it, with no event of its own
        (nextcloud/server ``apps/files_sharing/lib/Updater.php`` ``renameHook`` →
        ``renameChildren``: each shared mount found below the old path is moved,
        ``SharedMount::moveMount``).
        """
        src, dst = norm_path(src), norm_path(dst)
        node = self.resolve(uid, src)
        if node is None or src == "/":
            raise NotFoundError(f"File with name {src.lstrip('/')} could not be located")
        if dst == src:
            raise ForbiddenError("Source and destination uri are identical.")
        if dst.startswith(src + "/"):
            raise ForbiddenError("Cannot move a folder into one of its children")
        if not self.can_write(uid, node) and self.is_mount_root(uid, src) is None:
            raise ForbiddenError("Permission denied")
        existed = self._check_target(uid, dst, overwrite, session)
        parent = self._parent_for(uid, dst, make_parents, session)
        if not self.can_write(uid, parent):
            raise ForbiddenError("Permission denied")
        actor = self._actor(uid, session)
        self._emit(
            BEFORE_NODE_RENAMED,
            {"source": self._desc(uid, node, src), "target": self._desc_path(uid, dst)},
            actor,
        )
        mount = self.is_mount_root(uid, src)
        old_parent = node.parent
        for below in self.mounts(uid).values():
            if below.mount_path.startswith(src + "/"):
                below.mount_path = dst + below.mount_path[len(src) :]
        if mount is not None:
            old_parent_path = posixpath.dirname(mount.mount_path)
            mount.mount_path = dst
            old_mount_parent = self.resolve(uid, old_parent_path)
            if old_mount_parent is not None:
                self._touch_up(old_mount_parent)
        else:
            assert old_parent is not None
            del old_parent.children[node.name]
            node.name = posixpath.basename(dst)
            node.parent = parent
            parent.children[node.name] = node
            if node.owner != parent.owner:
                for sub in node.walk():
                    sub.owner = parent.owner
            if not node.is_dir:
                node.mime = mime_for(node.name)
            self._touch_up(old_parent)
        self._touch_up(node)
        self._emit(
            NODE_RENAMED,
            {"source": self._desc_path(uid, src), "target": self._desc(uid, node, dst)},
            actor,
        )
        return node, existed

    def copy(
        self,
        uid: str,
        src: str,
        dst: str,
        *,
        overwrite: bool = False,
        make_parents: bool = True,
        session: bool = True,
    ) -> tuple[Node, bool]:
        """Copy a file or folder (new ids for every copied node); ``(new node, target_existed)``.

        Emits, once for the whole copy, what nextcloud/server ``lib/private/Files/View.php``
        ``copy`` emits: the ``copy`` hook then ``emit_file_hooks_pre`` (``create`` and
        ``write``: the target never exists there, as an existing one was deleted first, as
        sabre/dav ``CorePlugin::httpCopy`` does), the copy, then ``post_copy`` and
        ``emit_file_hooks_post`` (``post_create``, ``post_write``), which
        ``lib/private/Files/Node/HookConnector.php`` dispatches as BeforeNodeCopied (target
        path only), BeforeNodeCreated and BeforeNodeWritten (path only), NodeCopied (both with
        ids), NodeCreated and NodeWritten (with the copy's id) — for a folder too.
        """
        src, dst = norm_path(src), norm_path(dst)
        node = self.resolve(uid, src)
        if node is None:
            raise NotFoundError(f"File with name {src.lstrip('/')} could not be located")
        if dst == src or dst.startswith(src + "/"):
            raise ForbiddenError("Cannot copy a node onto itself or into one of its children")
        existed = self._check_target(uid, dst, overwrite, session)
        parent = self._parent_for(uid, dst, make_parents, session)
        if not self.can_write(uid, parent):
            raise ForbiddenError("Permission denied")
        actor = self._actor(uid, session)
        self._emit(
            BEFORE_NODE_COPIED,
            {"source": self._desc(uid, node, src), "target": self._desc_path(uid, dst)},
            actor,
        )
        self._emit(BEFORE_NODE_CREATED, {"node": self._desc_path(uid, dst)}, actor)
        self._emit(BEFORE_NODE_WRITTEN, {"node": self._desc_path(uid, dst)}, actor)
        new = self._clone(node, posixpath.basename(dst), parent.owner)
        new.parent = parent
        parent.children[new.name] = new
        self._touch_up(parent)
        self._emit(
            NODE_COPIED,
            {"source": self._desc(uid, node, src), "target": self._desc(uid, new, dst)},
            actor,
        )
        self._emit(NODE_CREATED, {"node": self._desc(uid, new, dst)}, actor)
        self._emit(NODE_WRITTEN, {"node": self._desc(uid, new, dst)}, actor)
        return new, existed

    def _clone(self, node: Node, name: str, owner: str) -> Node:
        new = self._new_node(name, node.is_dir, owner, node.mtime)
        new.content = node.content
        # the copy's versions too: files_versions' FileEventsListener::copy_hook
        # (Storage::renameOrCopy(..., 'copy'))
        new.versions = dict(node.versions)
        if not node.is_dir:
            new.mime = mime_for(name)
        for child_name, child in node.children.items():
            sub = self._clone(child, child_name, owner)
            sub.parent = new
            new.children[child_name] = sub
        return new

    def touch(
        self, uid: str, path: str, mtime: int, *, event: bool = False, session: bool = True
    ) -> Node:
        """Set a node's mtime (Unix seconds) as ``View::touch`` does in ``uid``'s view
        (:meth:`_view_touch`); ``event``: with BeforeNodeTouchedEvent and NodeTouchedEvent
        (without: the same change, no hooks — outside the session user's view, or found by a
        scan). Returns the node; raises :class:`NotFoundError`."""
        path = norm_path(path)
        node = self.resolve(uid, path)
        if node is None:
            raise NotFoundError(f"File with name {path.lstrip('/')} could not be located")
        self._view_touch(uid, node, path, int(mtime), self._actor(uid, session), event=event)
        return node

    def _view_touch(
        self, uid: str, node: Node, path: str, mtime: int, actor: str | None, *, event: bool
    ) -> None:
        """``View::touch($path, $mtime)`` of ``node`` at ``uid``'s view ``path`` (nextcloud/server
        ``lib/private/Files/View.php`` ``touch``, ``basicOperation``): the ``touch`` hook
        (BeforeNodeTouchedEvent, ``lib/private/Files/Node/HookConnector.php`` ``touch``), the
        storage's touch, then — when it succeeded — the updater and the ``post_touch`` hook
        (NodeTouchedEvent, ``postTouch``).

        The updater (``writeUpdate($storage, $internalPath, $mtime)`` → ``Cache/Updater.php``
        ``update`` → ``Cache/Scanner.php`` ``scanFile``) keeps the node's etag when its mtime
        is unchanged (``$mtimeUnchanged``: the cached etag is reused) and gives it a new one
        otherwise (``Storage/Local.php`` ``getETag`` hashes the mtime); every parent gets a new
        etag and ``max(mtime, $mtime)`` (:meth:`_touch_up`).

        Without update permission (a read-only share) the storage refuses
        (``Storage/Wrapper/PermissionsMask.php`` ``touch``), so no NodeTouchedEvent: ``View::
        touch`` writes the mtime into the file cache alone (``putFileInfo``, "we emulate it by
        changing the mtime in the cache"), no etag changes, and it still reports success."""
        if event:
            self._emit(BEFORE_NODE_TOUCHED, {"node": self._desc(uid, node, path)}, actor)
        if not self.can_write(uid, node):
            node.mtime = mtime
            return
        unchanged = node.mtime == mtime
        node.mtime = mtime
        self._touch_up(node, time=mtime, keep_etag=unchanged)
        if event:
            self._emit(NODE_TOUCHED, {"node": self._desc(uid, node, path)}, actor)

    # ------------------------------------------------------------------ trash

    def trash_items(self, uid: str) -> list[TrashItem]:
        """The trash of ``uid`` (items this user owns), oldest first."""
        self.user(uid)
        return list(self.trash[uid])

    def restore(self, uid: str, ref: int | str, *, session: bool = True) -> Node:
        """Restore a trashed node by file id or trash name; emits files_trashbin's
        ``BeforeNodeRestoredEvent`` and ``NodeRestoredEvent`` (``OCA\\Files_Trashbin\\Events``).

        The node goes back to its original folder, or to the root if that folder is gone;
        a name clash gets a `` (restored)`` suffix like Nextcloud. Returns the node.
        """
        items = self.trash.get(uid, [])
        item = self.trash_item(uid, ref)
        if item is None:
            raise NotFoundError(f"{ref} is not in the trash of {uid}")
        parent = item.original_parent if self.attached(item.original_parent) else self.homes[uid]
        name = item.node.name
        if name in parent.children:
            stem, ext = posixpath.splitext(name)
            name = f"{stem} (restored){ext}"
        parent_path = self.own_path(parent)
        target_path = norm_path(f"{parent_path}/{name}")
        trash_path = f"/{uid}/files_trashbin/files/{item.trash_name}"
        actor = self._actor(uid, session)
        self._emit(
            BEFORE_NODE_RESTORED,
            {
                "source": {"id": item.node.id, "path": trash_path},
                "target": self._desc_path(uid, target_path),
            },
            actor,
        )
        items.remove(item)
        item.node.name = name
        item.node.parent = parent
        parent.children[name] = item.node
        self._touch_up(item.node)
        # after the move the trash node no longer exists: JsonSerializer::serializeFileInfo
        # of a NonExistingFile/Folder has no id (nextcloud/server#53648)
        if self.restored_node_has_id:
            payload = {
                "source": {"path": trash_path},
                "target": self._desc(uid, item.node, target_path),
            }
        else:
            # before nextcloud/server#53752 (Nextcloud 30): Trashbin::getNodeForPath looked
            # both nodes up in the trash folder only, so the restored target was a
            # NonExistingFile too (no id), and the source's NonExistingFile took its path in
            # the user's files view (Filesystem::getView()->getAbsolutePath)
            payload = {
                "source": {"path": f"/{uid}/files/{item.trash_name}"},
                "target": self._desc_path(uid, target_path),
            }
        self._emit(NODE_RESTORED, payload, actor)
        return item.node

    def trash_item(self, uid: str, ref: int | str) -> TrashItem | None:
        """The trash item of ``uid`` with file id or trash name ``ref`` (or None)."""
        return next(
            (
                i
                for i in self.trash.get(uid, [])
                if i.node.id == ref or i.trash_name == ref or i.node.name == ref
            ),
            None,
        )

    def purge(self, uid: str, ref: int | str) -> bool:
        """Delete one trash item for good (no event); True if it existed."""
        item = self.trash_item(uid, ref)
        if item is None:
            return False
        self.trash[uid].remove(item)
        for sub in item.node.walk():
            self.nodes.pop(sub.id, None)
        return True

    def empty_trash(self, uid: str) -> int:
        """Purge the trash of ``uid`` (no events, like the expiry job); returns items purged."""
        items = self.trash.get(uid, [])
        count = len(items)
        for item in items:
            for sub in item.node.walk():
                self.nodes.pop(sub.id, None)
        items.clear()
        return count

    # ------------------------------------------------------------------ shares

    def share(
        self,
        owner: str,
        path: str,
        sharee: str,
        mount_path: str | None = None,
        *,
        readonly: bool = False,
        permissions: int | None = None,
        attributes: list[dict[str, Any]] | None = None,
    ) -> Share:
        """Share ``owner``'s node at ``path`` with ``sharee``; no event (like Nextcloud).

        ``permissions`` are ``PERMISSION_*`` bits (default: all, or read + share when
        ``readonly``); ``attributes`` are :attr:`Share.attributes`. Sharing a node again with
        the same user updates the share (permissions and attributes), as ``updateShare``.

        The mount path defaults to ``/<name>``; a clash gets `` (2)``, `` (3)``… Missing parent
        folders of the mount path are created silently in the sharee's home.
        """
        self.user(sharee)
        node = self.resolve(owner, path)
        if node is None or node.is_home:
            raise NotFoundError(f"File with name {path.lstrip('/')} could not be located")
        if sharee == owner:
            raise ForbiddenError("You cannot share to yourself")
        for share in self.shares:
            if share.node is node and share.sharee == sharee and share.kind == "user":
                share.readonly = readonly
                share.set_permissions(permissions)
                share.attributes = attributes
                return share
        base = norm_path(mount_path or "/" + node.name)
        parent_path = posixpath.dirname(base)
        parent = self.homes[sharee]
        for part in parent_path.split("/"):
            if not part:
                continue
            child = parent.children.get(part)
            if child is None:
                child = self._new_node(part, True, sharee)
                child.parent = parent
                parent.children[part] = child
            parent = child
        candidate, n = base, 1
        while self.resolve(sharee, candidate) is not None:
            n += 1
            stem, ext = posixpath.splitext(base) if not node.is_dir else (base, "")
            candidate = f"{stem} ({n}){ext}"
        share = Share(
            self._next_share_id, node.owner, node, sharee, candidate, readonly, self.now()
        )
        share.set_permissions(permissions)
        share.attributes = attributes
        self._next_share_id += 1
        self.shares.append(share)
        self._touch_mount_parent(share)
        return share

    def external_storage(self, name: str, members: list[str]) -> Node:
        """The external storage ``name`` (files_external), mounted at ``/{name}`` for each of
        ``members`` as :meth:`group_folder` mounts a group folder (a storage of its own, every
        permission), but an ``ExternalMountPoint`` (``apps/files_external/lib/Config/
        ExternalMountPoint.php`` ``getMountType``: ``external``; ``external-session`` for
        session credentials, not modelled). ``oc:owner-id`` is whoever looks, as for a group
        folder (``Common::getOwner``: the storage's user, guessed, not re-read). Files put
        there from outside Nextcloud: :meth:`add_unnoticed`. Returns its folder node."""
        return self.group_folder(name, members, kind="external")

    def federated_share(self, name: str, sharee: str) -> Node:
        """A federated share of a folder ``name`` held by another server, mounted at
        ``/{name}`` for ``sharee`` (a storage of its own, every permission): a files_sharing
        ``External\\Mount`` (``apps/files_sharing/lib/External/Mount.php``: an
        ``ISharedMountPoint`` of mount type ``shared``, so ``S`` in ``oc:permissions``;
        ``nc:is-federated`` true). ``oc:owner-id`` is the storage's pseudo-user, standing for
        the remote owner's cloud id (``External/Storage.php`` ``getOwner``:
        ``cloudId->getDisplayId()``, no local user). Files put there on the remote server:
        :meth:`add_unnoticed`. Returns its folder node."""
        return self.group_folder(name, [sharee], kind="federated")

    def remove_federated_share(self, name: str) -> None:
        """Unmount the federated share ``name`` (:meth:`federated_share`), as
        ``apps/files_sharing/lib/External/Storage.php`` ``checkStorageAvailability`` does
        when the remote server answers that the share is gone (a 404 from a server
        ``testRemote`` finds to be a Nextcloud) or refuses its token (401/403):
        ``Manager::removeShare`` and ``removeMount``, so it is gone from its parent's
        listing and from SEARCH; no event. (A remote server that no longer answers at all
        is only ``StorageNotAvailableException``, "likely to be a temporary server
        configuration error": the share stays, :meth:`~ncindex.simulator.simulator.
        NextcloudSimulator.make_storage_unavailable`.) The sharee's removing it
        themselves ends alike."""
        self.group_folder(name, [], kind="federated")

    def add_unnoticed(self, uid: str, path: str, data: bytes) -> Node:
        """A file written straight to an external storage (not through Nextcloud), or on
        the server holding a federated share, at ``path`` in ``uid``'s view: in the listing
        of its folder, but no etag changes and no event fires. Nextcloud learns of such a
        file only when a folder holding it is looked at (``lib/private/Files/View.php``
        ``getCacheEntry``: the storage's watcher, ``filesystem_check_changes``, compares the
        folder's mtime and rescans it), and the etags of the mount's root reach the user's
        folders from the file cache alone (``View::getFileInfo`` → ``addSubMounts``), so
        nothing above changes until then; the rescan's propagation is not modelled. Raises
        ``NotFoundError`` for a parent that is not a folder of such a storage,
        ``ConflictError`` for a path taken."""
        path = norm_path(path)
        parent = self.resolve(uid, posixpath.dirname(path))
        share = None if parent is None else self.share_for(uid, parent)
        if parent is None or not parent.is_dir or share is None:
            raise NotFoundError(f"{posixpath.dirname(path)} is no folder of an external storage")
        if share.kind not in ("external", "federated"):
            raise NotFoundError(f"{posixpath.dirname(path)} is no folder of an external storage")
        name = posixpath.basename(path)
        if name in parent.children:
            raise ConflictError(f"{path} exists")
        node = self._new_node(name, False, parent.owner, None)
        node.content = bytes(data)
        node.parent = parent
        parent.children[name] = node
        return node

    def group_folder(self, name: str, members: list[str], kind: str = "groupfolder") -> Node:
        """The group folder ``name`` (nextcloud/groupfolders), created on first call in a
        storage of its own (a home of the pseudo-user ``__groupfolder_{name}``, in no user
        list), mounted at ``/{name}`` for each of ``members`` (every permission; no ACL
        rules); a member not listed again loses the mount. Returns its folder node.

        As the app serves it: ``lib/Mount/MountProvider.php`` mounts it at the folder's
        mount point in each member's files, a ``GroupMountPoint`` (``getMountType``:
        ``group``), neither home nor ``ISharedMountPoint``, so ``oc:permissions`` carry
        ``M`` and not ``S`` (``FileInfo::isMounted``); ``lib/Mount/GroupFolderStorage.php``
        ``getOwner`` is the mount's user, so ``oc:owner-id`` is whoever looks. No event
        fires for membership changes (group membership events are not the files' events).
        Quota, trash bin, versions and ACL rules of the app are not modelled."""
        storage = f"__{kind}_{name}"
        if storage not in self.homes:
            home = self._new_node("", True, storage)
            home.is_home = True
            self.homes[storage] = home
            self.trash[storage] = []
            folder = self._new_node(name, True, storage)
            folder.parent = home
            home.children[name] = folder
        node = self.homes[storage].children[name]
        mount = norm_path("/" + name)
        kept = []
        for share in self.shares:
            if share.kind == kind and share.node is node and share.sharee not in members:
                self._touch_mount_parent(share)
                continue
            kept.append(share)
        self.shares = kept
        have = {s.sharee for s in self.shares if s.kind == kind and s.node is node}
        for uid in members:
            self.user(uid)
            if uid in have:
                continue
            share = Share(
                self._next_share_id,
                storage,
                node,
                uid,
                mount,
                created=self.now(),
                kind=kind,
            )
            self._next_share_id += 1
            self.shares.append(share)
            self._touch_mount_parent(share)
        return node

    def unshare(self, owner: str, path: str, sharee: str) -> bool:
        """Remove the share of ``owner``'s node at ``path`` with ``sharee``; no event.

        Returns True when a share was removed.
        """
        node = self.resolve(owner, path)
        if node is None:
            raise NotFoundError(f"File with name {path.lstrip('/')} could not be located")
        removed = [s for s in self.shares if s.node is node and s.sharee == sharee]
        self.shares = [s for s in self.shares if s not in removed]
        for share in removed:
            self._touch_mount_parent(share)
        return bool(removed)

    def share_types(self, uid: str, node: Node) -> list[int]:
        """``oc:share-types`` of ``node`` for its owner ``uid``: ``[0]`` if user-shared."""
        if node.owner != uid:
            return []
        return [0] if any(s.node is node for s in self.shares) else []

    # ------------------------------------------------------------------ misc

    @staticmethod
    def content_md5(node: Node) -> str:
        """Hex md5 of a file's content."""
        return hashlib.md5(node.content, usedforsecurity=False).hexdigest()


def _at_or_above(node: Node, ids: Container[int]) -> bool:
    """True when ``node`` or a folder above it has an id in ``ids``."""
    current: Node | None = node
    while current is not None:
        if current.id in ids:
            return True
        current = current.parent
    return False
