"""The OCS sharing API (files_sharing): ``/ocs/v{1,2}.php/apps/files_sharing/api/v1/shares``.

Follows nextcloud/server ``apps/files_sharing/lib/Controller/ShareAPIController.php``:

* ``GET /shares`` (``getShares``): shares the caller made, or with ``shared_with_me=true`` the
  shares made with the caller; ``path`` narrows to one node (``reshares=true``: everyone's
  shares of it); ``POST /shares`` (``createShare``): ``path``, ``shareType`` (0 = user),
  ``shareWith``, ``permissions`` (default ``shareapi_default_permissions`` = 31; read is
  always added; a file share loses create and delete); ``GET /shares/{id}`` (``getShare``:
  a *list* of one share); ``PUT /shares/{id}`` (``updateShare``: ``permissions``);
  ``DELETE /shares/{id}`` (``deleteShare``: empty data).
* Refusals are ``OCSNotFoundException`` (OCS 404) with the controller's messages: "Please
  specify a file or folder path", "Wrong path, file/folder does not exist", "Please specify a
  valid user", "Invalid permissions", "Wrong share ID, share does not exist", and OCS 400
  'Invalid share attributes provided: "…"' (``setShareAttributes``: ``attributes``, a JSON
  list of ``{"scope", "key", "value"}``, given to ``createShare`` or ``updateShare``; an
  element without ``scope`` or ``key`` gets the same answer here, a guess: PHP would fail
  on the missing index); a share type
  the simulator does not model (groups, links, federation…) is OCS 400 "Unknown share type"
  (the controller's last branch; from memory, not re-read).
* Sharing turned off (``shareapi_enabled`` no, ``sim.sharing_enabled = False``): every route
  of the controller, ``shared_with_me`` included, answers OCS 404 "Share API is disabled"
  with empty data — ``apps/files_sharing/lib/Middleware/OCSShareAPIMiddleware.php``
  ``beforeController`` throws ``OCSNotFoundException`` for a ``ShareAPIController`` when
  ``IManager::shareApiEnabled`` is false (``getShares`` itself checks nothing), after the
  login and CSRF checks of the ``SecurityMiddleware``; ``OCSMiddleware::afterException``
  makes it HTTP 404 in v2, 200 in v1. The files_sharing app disabled
  (``sim.disable_app("files_sharing")``) is another answer, an unknown route's
  (:func:`ncindex.simulator.ocs.route_not_found`), its capability is gone and its shares
  are mounted for no recipient (:meth:`ncindex.simulator.state.FileTree.set_mounted`).
* A share is serialized by ``formatShare`` (field order kept; ``id`` is a string,
  ``IShare::getId``; ``path`` and ``item_source`` the node in the viewer's view — for a
  recipient where the share is mounted — and ``is-mount-root``/``mount-type`` its mount's,
  as the stored version of the controller has them); fields the simulator cannot know take
  their defaults for a plain user share (``note`` "", ``label`` "", ``attributes`` null,
  ``status`` [] — the user status of the recipient, absent here).

No event fires for any of this: no class of ``lib/public/Share/Events/`` implements
``IWebhookCompatibleEvent``, which ``WebhookListenerMapper::addWebhookListener`` requires.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from werkzeug.wrappers import Request, Response

from ncindex.simulator.responses import request_params
from ncindex.simulator.state import PERMISSION_ALL, Share, StateError, norm_path

if TYPE_CHECKING:
    from ncindex.simulator.ocs import OcsApi
    from ncindex.simulator.simulator import NextcloudSimulator

__all__ = ["SharingApi", "sharing_capability"]

SHARE_TYPE_USER = 0
BASE = "/apps/files_sharing/api/v1/shares"


def sharing_capability(sim: NextcloudSimulator) -> dict[str, Any]:
    """``capabilities.files_sharing`` as ``apps/files_sharing/lib/Capabilities.php``
    ``getCapabilities`` builds it for a server with default settings (sharing on, links on,
    no password or expiry enforcement, resharing as ``sim.allow_resharing``)."""
    if not sim.sharing_enabled:
        return {
            "api_enabled": False,
            "public": {"enabled": False},
            "user": {"send_mail": False},
            "resharing": False,
        }
    return {
        "api_enabled": True,
        "public": {
            "enabled": True,
            "password": {"enforced": False, "askForOptionalPassword": False},
            "expire_date": {"enabled": False},
            "multiple_links": True,
            "expire_date_internal": {"enabled": False},
            "expire_date_remote": {"enabled": False},
            "send_mail": False,
            "upload": True,
            "upload_files_drop": True,
            "custom_tokens": False,
        },
        "user": {"send_mail": False, "expire_date": {"enabled": True}},
        "resharing": sim.allow_resharing,
        "group_sharing": True,
        "group": {"enabled": True, "expire_date": {"enabled": True}},
        "default_permissions": PERMISSION_ALL,
        "federation": {
            "outgoing": True,
            "incoming": True,
            "expire_date": {"enabled": True},
            "expire_date_supported": {"enabled": True},
        },
        "sharee": {"query_lookup_default": False, "always_show_unique": True},
    }


class SharingApi:
    """Handlers for the sharing routes; answers are built with the OCS helper of ``ocs``."""

    def __init__(self, sim: NextcloudSimulator, ocs: OcsApi) -> None:
        self.sim = sim
        self.ocs = ocs

    def handle(self, request: Request, uid: str, rest: str, version: int) -> Response:
        """Dispatch ``rest`` (the route below ``.../api/v1/shares``) for the logged-in ``uid``."""
        params = request_params(request)
        method = request.method

        def respond(data: Any, status: int = 200, message: str | None = None) -> Response:
            return self.ocs.respond(request, data, status, message, version=version)

        if not self.sim.sharing_enabled:
            return respond([], 404, "Share API is disabled")
        with self.sim.lock:
            if rest == "" and method == "GET":
                return respond(self._list(uid, params))
            if rest == "" and method == "POST":
                return self._create(uid, params, respond)
            m = re.fullmatch(r"/(\d+)", rest)
            share = self._find(uid, int(m.group(1))) if m else None
            if m and share is None:
                return respond([], 404, "Wrong share ID, share does not exist")
            if share is not None and method == "GET":
                return respond([self.format(uid, share)])
            if share is not None and method == "PUT":
                attributes = _attributes(params)
                if attributes is False:
                    return respond([], 400, _bad_attributes(params))
                if "permissions" in params:
                    permissions = _int(params["permissions"])
                    if permissions is None or not 0 <= permissions <= PERMISSION_ALL:
                        return respond([], 400, "Invalid permissions")
                    share.set_permissions(permissions)
                if attributes is not None:
                    share.attributes = attributes
                return respond(self.format(uid, share))
            if share is not None and method == "DELETE":
                self.sim.tree.shares = [s for s in self.sim.tree.shares if s is not share]
                return respond([])
        return self.ocs.not_found(request)

    # ------------------------------------------------------------------ operations

    def _find(self, uid: str, share_id: int) -> Share | None:
        """The share ``share_id`` if ``uid`` may access it (``canAccessShare``: its owner or
        its recipient)."""
        for share in self.sim.tree.shares:
            if share.kind != "user":
                continue  # a group folder's mount is no share of files_sharing
            if share.id == share_id and uid in (share.owner, share.sharee):
                return share
        return None

    def _list(self, uid: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        tree = self.sim.tree
        with_me = str(params.get("shared_with_me", "")).lower() == "true"
        reshares = str(params.get("reshares", "")).lower() == "true"
        node = tree.resolve(uid, str(params["path"])) if params.get("path") else None
        out = []
        for share in tree.shares:
            if share.kind != "user" or (node is not None and share.node is not node):
                continue
            if with_me:
                keep = share.sharee == uid
            else:
                keep = share.owner == uid or (reshares and node is not None)
            if keep:
                out.append(self.format(uid, share))
        return out

    def _create(
        self, uid: str, params: dict[str, Any], respond: Callable[..., Response]
    ) -> Response:
        path = params.get("path")
        if path is None:
            return respond([], 404, "Please specify a file or folder path")
        node = self.sim.tree.resolve(uid, str(path))
        if node is None or node.is_home:
            return respond([], 404, "Wrong path, file/folder does not exist")
        permissions = _int(params.get("permissions", PERMISSION_ALL))
        if permissions is None or not 0 <= permissions <= PERMISSION_ALL:
            return respond([], 404, "Invalid permissions")
        share_type = _int(params.get("shareType", -1))
        if share_type != SHARE_TYPE_USER:
            return respond([], 400, "Unknown share type")
        sharee = params.get("shareWith")
        if not isinstance(sharee, str) or sharee not in self.sim.tree.users:
            return respond([], 404, "Please specify a valid user")
        if node.owner != uid:
            return respond([], 404, "Wrong path, file/folder does not exist")
        attributes = _attributes(params)
        if attributes is False:
            return respond([], 400, _bad_attributes(params))
        try:
            share = self.sim.tree.share(
                uid, str(path), sharee, permissions=permissions, attributes=attributes
            )
        except StateError as exc:
            return respond([], 403, str(exc))
        return respond(self.format(uid, share))

    # ------------------------------------------------------------------ format

    def format(self, viewer: str, share: Share) -> dict[str, Any]:
        """``ShareAPIController::formatShare`` of a user share as ``viewer`` sees it (``path``
        and ``file_target`` in the viewer's own view)."""
        tree = self.sim.tree
        node = share.node
        owner = tree.users[share.owner]
        sharee = tree.users[share.sharee]
        path = tree.view_path(viewer, node) or share.mount_path
        mount = tree.share_for(viewer, node)
        parent = node.parent
        return {
            "id": str(share.id),
            "share_type": SHARE_TYPE_USER,
            "uid_owner": share.owner,
            "displayname_owner": owner.display_name,
            "permissions": share.permissions,
            "can_edit": viewer == share.owner,
            "can_delete": viewer == share.owner,
            "stime": share.created,
            "parent": None,
            "expiration": None,
            "token": None,
            "uid_file_owner": share.owner,
            "note": "",
            "label": "",
            "displayname_file_owner": owner.display_name,
            "path": norm_path(path),
            "item_type": "folder" if node.is_dir else "file",
            "item_permissions": tree.permissions(
                viewer, node, allow_resharing=self.sim.allow_resharing
            ),
            # the node's mount as the viewer sees it: its root when the node is what is
            # mounted (Node::getInternalPath() === ''; an owner's node lies in the home
            # storage, below files/), and MountPoint::getMountType ("" for the home mount,
            # files_sharing SharedMount's "shared")
            "is-mount-root": mount is not None and mount.node is node,
            "mount-type": "" if mount is None else "shared",
            "mimetype": "httpd/unix-directory" if node.is_dir else node.mime,
            "has_preview": False,
            "storage_id": f"home::{share.owner}",
            "storage": 1,
            "item_source": node.id,
            "file_source": node.id,
            "file_parent": parent.id if parent is not None else node.id,
            "file_target": share.mount_path,
            "item_size": node.size,
            "item_mtime": node.mtime,
            "share_with": share.sharee,
            "share_with_displayname": sharee.display_name,
            "share_with_displayname_unique": sharee.email or share.sharee,
            "status": [],
            "mail_send": 0,
            "hide_download": 0,
            # formatShare: (string) json_encode($attributes->toArray()), or null
            "attributes": (
                None
                if share.attributes is None
                else json.dumps(share.attributes, separators=(",", ":"))
            ),
        }


def _attributes(params: dict[str, Any]) -> list[dict[str, Any]] | Literal[False] | None:
    """The ``attributes`` parameter as ``ShareAPIController::setShareAttributes`` reads it
    (``json_decode`` to a list of ``{"scope", "key", "value"}``): ``None`` when absent,
    ``False`` when it is not such a list."""
    if "attributes" not in params:
        return None
    try:
        decoded = json.loads(str(params["attributes"]))
    except ValueError:
        return False
    if not isinstance(decoded, list):
        return False
    out = []
    for item in decoded:
        if not isinstance(item, dict) or not {"scope", "key"} <= item.keys():
            return False
        out.append({"scope": item["scope"], "key": item["key"], "value": item.get("value")})
    return out


def _bad_attributes(params: dict[str, Any]) -> str:
    """``setShareAttributes``' refusal of the ``attributes`` parameter."""
    return f'Invalid share attributes provided: "{params["attributes"]}"'


def _int(value: Any) -> int | None:
    """A request parameter as an int (the AppFramework casts ``int`` parameters), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    return int(text) if re.fullmatch(r"-?[0-9]+", text) else None
