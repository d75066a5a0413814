"""Which part of Nextcloud serves a request path: its *endpoint family* (:func:`endpoint_family`).

A part of Nextcloud can stall on its own while the rest answers: an app whose controller is slow
(Deck building a big board, News stuck updating a feed) or the DAV server on a storage that
hangs. :class:`~ncindex.nextcloud.client.NextcloudClient` keys the requests it stops sending
after one got no answer (``stop_when_unanswered``) by this family, so a stalled Deck stops the
Deck checks only.

The families follow Nextcloud's entry points and router:

* ``remote.php`` — the DAV server (``remote.php/dav/…``, ``remote.php/webdav/…``: the dav app's
  Sabre server, files, system tags and the rest of its collections alike);
* ``apps/<app>`` — an app's routes, under ``index.php`` (or without it: with the front
  controller on, ``Router::__construct`` leaves ``/index.php`` out of the URLs it makes) and
  under ``ocs/v1.php``/``ocs/v2.php`` alike: nextcloud/server
  ``lib/private/Route/Router.php`` ``findMatchingRoute`` takes the app id from a URL starting
  ``/apps/{app}/`` (``index.php``) or ``/ocsapp/apps/{app}/`` (``ocs/v1.php`` and
  ``ocs/v2.php`` match ``'/ocsapp' . $request->getRawPathInfo()``) and loads that app's
  routes alone, whose controllers then answer; ``lib/private/AppFramework/Routing/
  RouteParser.php`` ``buildRootPrefix`` puts every route of an app's ``appinfo/routes.php``
  under ``/apps/{app}`` unless the route names a ``root`` of its own. The Notes, Deck and News
  APIs name none: nextcloud/notes ``appinfo/routes.php`` (06709937: ``/api/{apiVersion}/notes``,
  ``/api/{apiVersion}/settings``), nextcloud/deck ``appinfo/routes.php`` (b0f6943c:
  ``board_api#get`` ``/api/v{apiVersion}/boards/{boardId}``, ``card_api#get``
  ``…/stacks/{stackId}/cards/{cardId}``; its ``ocs`` routes, ``board_ocs#index`` …, under
  ``ocs/v2.php/apps/deck``), nextcloud/news ``appinfo/routes.php`` (d409f2de:
  ``item_api#index`` ``/api/{apiVersion}/items``);
* ``ocs`` — the other OCS routes (``ocs/v2.php/cloud/user``, ``cloud/capabilities``: the
  server's own, and apps' routes with a ``root`` of their own, which the path does not name);
* ``index.php`` — the other routes of ``index.php`` (``login/v2``, ``core/…``), with or without
  ``index.php`` in the path;
* any other PHP entry point at the top (``status.php``, ``public.php``): that file's name.

A path is below the web root (``/nextcloud`` for a Nextcloud installed in a sub-folder):
:class:`~ncindex.nextcloud.client.NextcloudClient` sends paths relative to it (``httpx``'s
``base_url``) and strips it from an absolute URL's path first.
"""

from __future__ import annotations

OCS_ENTRY_POINTS = frozenset({"v1.php", "v2.php"})
"""The files under ``ocs/`` that dispatch OCS routes (nextcloud/server ``ocs/v1.php``;
``ocs/v2.php`` includes it)."""


def endpoint_family(path: str) -> str:
    """The endpoint family of ``path`` (a URL path below the web root, query string excluded):
    ``"remote.php"``, ``"apps/<app>"``, ``"ocs"``, ``"index.php"`` or another top-level
    ``*.php`` name (see the module docstring). ``/index.php/apps/deck/api/v1.0/boards/1``,
    ``/apps/deck/api/v1.0/boards/1`` and ``/ocs/v2.php/apps/deck/api/v1.0/boards`` are all
    ``"apps/deck"``; ``/ocs/v2.php/cloud/user`` is ``"ocs"``; ``/remote.php/dav/files/u/a``
    is ``"remote.php"``; ``/login/v2`` and ``/index.php/login/v2`` are ``"index.php"``."""
    parts = [part for part in path.split("/") if part]
    if parts[:1] == ["ocs"] and len(parts) > 1 and parts[1] in OCS_ENTRY_POINTS:
        entry, routed = "ocs", parts[2:]
    elif parts and parts[0].endswith(".php") and parts[0] != "index.php":
        return parts[0]
    else:
        entry, routed = "index.php", parts[1:] if parts[:1] == ["index.php"] else parts
    if len(routed) >= 2 and routed[0] == "apps":
        return f"apps/{routed[1]}"
    return entry
