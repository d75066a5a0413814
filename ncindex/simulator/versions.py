"""files_versions: restoring a file's version, directly and over WebDAV.

A version is kept whenever a file is overwritten (:attr:`~ncindex.simulator.state.Node.versions`).
Restoring one is nextcloud/server ``apps/files_versions/lib/Versions/VersionManager.php``
``rollback`` → ``LegacyVersionsBackend::rollback`` (update permission on the file, else
``Forbidden``) → ``Storage::rollback``: the current bytes are kept as a version first (unless
one of that mtime exists), the version's bytes are moved into place below the view
(``copyFileContents``: ``moveFromStorage``, or a stream copy on object storage — no hooks), then
``View::touch($file, $revision)`` sets the mtime back to the version's and the scanner gives
the file a new etag. The only events are the touch's ``BeforeNodeTouchedEvent`` and
``NodeTouchedEvent`` — and those only when the restoring user owns the file: for a file shared
with them, the version and the views ``rollback`` works in are the owner's
(``LegacyVersionsBackend::getVersionsForFile`` takes the owner as the version's user), and
``View::shouldEmitHooks`` emits nothing outside the session user's own ``files`` view.
``VersionRestoredEvent`` (``apps/files_versions/lib/Events/``) is not webhook-compatible.

Over WebDAV a client restores with ``MOVE /remote.php/dav/versions/{uid}/versions/{fileid}/
{revision}`` and ``Destination: …/versions/{uid}/restore/target``
(``apps/files_versions/lib/Sabre/RestoreFolder.php`` ``moveInto`` → ``VersionFile::rollBack``),
answered 201 (sabre/dav ``CorePlugin::httpMove``: the destination did not exist). Listing the
versions (PROPFIND) and downloading one are not modelled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from werkzeug.wrappers import Request, Response

from ncindex.simulator.state import FileTree, ForbiddenError, Node, NotFoundError, norm_path
from ncindex.simulator.xmlutil import dav_error

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator

__all__ = ["VersionsDav", "restore_version", "revisions"]

#: ``LegacyVersionsBackend::rollback``'s refusal (``OCA\\DAV\\Connector\\Sabre\\Exception\\
#: Forbidden``, HTTP 403) for a user without update permission on the file.
NO_UPDATE_PERMISSION = (
    "You cannot restore this version because you do not have update permissions on the source file."
)
_FORBIDDEN = "OCA\\DAV\\Connector\\Sabre\\Exception\\Forbidden"


def revisions(node: Node) -> list[int]:
    """The revisions (Unix seconds) a client may restore ``node`` to, newest first: its
    stored versions and the current one (``LegacyVersionsBackend::getVersionsForFile`` lists
    the file's mtime as a version too)."""
    return sorted({node.mtime, *node.versions}, reverse=True)


def restore_version(tree: FileTree, uid: str, path: str, revision: int) -> Node:
    """Restore version ``revision`` (Unix seconds) of the file at ``path`` in ``uid``'s view,
    as ``Storage::rollback`` does (module docstring): bytes replaced, mtime set to
    ``revision``, new etag, and ``BeforeNodeTouchedEvent`` + ``NodeTouchedEvent`` in ``uid``'s
    view when ``uid`` owns the file (none for a sharee). Returns the node. Raises
    :class:`NotFoundError` (no such file or revision) and :class:`ForbiddenError` (no update
    permission)."""
    path = norm_path(path)
    node = tree.resolve(uid, path)
    if node is None or node.is_dir:
        raise NotFoundError(f"File with name {path.lstrip('/')} could not be located")
    if revision not in revisions(node):
        raise NotFoundError(f"Version {revision} of {path.lstrip('/')} could not be located")
    if not tree.can_write(uid, node):
        raise ForbiddenError(NO_UPDATE_PERMISSION)
    node.versions.setdefault(node.mtime, node.content)  # "first create a new version"
    node.content = node.versions.pop(revision)  # moved into place, not copied
    return tree.touch(uid, path, revision, event=uid == node.owner)


class VersionsDav:
    """Handlers for ``/remote.php/dav/versions/{uid}/…``: the restore ``MOVE``."""

    def __init__(self, sim: NextcloudSimulator) -> None:
        self.sim = sim
        self.tree = sim.tree

    def handle(self, request: Request, uid: str, rest: str) -> Response:
        """``rest`` is the path after ``/remote.php/dav/versions``.

        Another user's principal is 403 (``Sabre/RootCollection.php``
        ``getChildForPrincipal``), an unknown one 404; a file id not visible to ``uid`` or a
        folder's, or a revision the file does not have, 404 (``VersionRoot::getChild``,
        ``VersionCollection::getChild``); a ``MOVE`` without ``Destination`` 400 (sabre/dav
        ``Server::getCopyAndMoveInfo``), to anywhere but ``…/restore/`` 403 (a version
        collection takes no files: ``VersionCollection::createFile``). Other methods are
        405 (a guess)."""
        principal, _, sub = rest.strip("/").partition("/")
        if principal != uid:
            if principal in self.tree.users:
                return dav_error(403, "Forbidden", "")
            return dav_error(404, "NotFound", f"Principal with name {principal} not found")
        method = request.method.upper()
        parts = sub.split("/")
        if method != "MOVE" or len(parts) != 3 or parts[0] != "versions":
            return dav_error(405, "MethodNotAllowed", f"{method} is not allowed here")
        with self.sim.lock:
            node = self.tree.nodes.get(int(parts[1])) if parts[1].isdigit() else None
            path = None if node is None else self.tree.view_path(uid, node)
            if node is None or path is None or node.is_dir:
                return dav_error(404, "NotFound", "")
            if parts[2] not in {str(r) for r in revisions(node)}:
                return dav_error(404, "NotFound", "")
            destination = request.headers.get("Destination")
            if not destination:
                return dav_error(400, "BadRequest", "The destination header was not supplied")
            restore = f"{self.sim.web_root}/remote.php/dav/versions/{uid}/restore/"
            if not unquote(urlsplit(destination).path).startswith(restore):
                return dav_error(403, "Forbidden", "")
            try:
                restore_version(self.tree, uid, path, int(parts[2]))
            except ForbiddenError as exc:
                return dav_error(403, _FORBIDDEN, str(exc))
        return Response(b"", status=201, headers={"Content-Length": "0"})
