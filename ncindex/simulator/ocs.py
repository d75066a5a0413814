"""OCS API (``/ocs/v1.php`` and ``/ocs/v2.php``): current user, capabilities, webhook_listeners,
the sharing API (:mod:`ncindex.simulator.sharing`), the user status and app-password deletion
(:mod:`ncindex.simulator.loginflow`).

Envelope, status mirroring and XML/JSON selection follow Nextcloud's ``BaseResponse`` /
``V2Response`` / ``OCSMiddleware``: XML by default, JSON with ``?format=json`` or an
``Accept: application/json`` header; in v2 the HTTP status mirrors ``meta.statuscode`` (997 →
401, 998 → 404, 996/999 → 500). Requests without ``OCS-APIRequest: true`` fail the CSRF check
(412 ``{"message":"CSRF check failed"}``), unauthenticated ones get OCS 997 — both only once
the router found the route: a path no route has is 998 (:func:`route_not_found`), a method no
route of the path has 405 (:func:`method_not_allowed`), whoever asks (wrong Basic credentials
are refused before: :meth:`ncindex.simulator.app.SimulatorApp.login_refused`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from lxml import etree
from werkzeug.wrappers import Request, Response

from ncindex.simulator.phpjson import php_json_encode
from ncindex.simulator.responses import JSON_CONTENT_TYPE, json_response, request_params
from ncindex.simulator.routing import Routes
from ncindex.simulator.sharing import BASE as SHARES_BASE
from ncindex.simulator.sharing import SharingApi, sharing_capability
from ncindex.simulator.webhooks import WebhookError
from ncindex.simulator.xmlutil import PHP_DECLARATION, to_bytes

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator

__all__ = ["OcsApi", "ocs_response", "route_not_found"]

RESPOND_UNAUTHORISED = 997
RESPOND_NOT_FOUND = 998
RESPOND_SERVER_ERROR = 996
RESPOND_UNKNOWN_ERROR = 999
#: ``ocs/v1.php``'s message when no route matches (``ResourceNotFoundException``), with its
#: trailing newline (nextcloud/server ``ocs/v1.php`` of the ``OC\OCS\ApiHelper`` releases;
#: the newest ``ocs/v1.php`` stored breaks the text in two lines instead — from which release
#: was not checked, so the simulator keeps this one for every version)
INVALID_QUERY = (
    "Invalid query, please check the syntax. API specifications are here: "
    "http://www.freedesktop.org/wiki/Specifications/open-collaboration-services.\n"
)
NOT_ADMIN = (
    "Logged in account must be an admin, a sub admin or gotten special right to access this setting"
)
#: The admin setting every webhook_listeners route is marked with (nextcloud/server
#: ``apps/webhook_listeners/lib/Controller/WebhooksController.php``:
#: ``#[AuthorizedAdminSetting(settings: Admin::class)]``; ``lib/Settings/Admin.php``, a
#: delegation-only setting named "Webhooks").
WEBHOOKS_ADMIN_SETTING = "OCA\\WebhookListeners\\Settings\\Admin"
#: The admin setting whose delegation makes a user a "delegated admin" of the accounts
#: (nextcloud/server ``lib/private/Group/Manager.php`` ``isDelegatedAdmin``, from 30:
#: ``findAllClassesForUser`` holds ``OCA\Settings\Settings\Admin\Users``).
USERS_ADMIN_SETTING = "OCA\\Settings\\Settings\\Admin\\Users"
_XML_NAME = re.compile(r"^[A-Za-z_][\w.\-]*$")


def _format(request: Request) -> str:
    fmt = request.args.get("format")
    if fmt in ("json", "xml"):
        return fmt
    accept = request.headers.get("Accept", "")
    for part in accept.split(","):
        mime = part.split(";")[0].strip().lower()
        if mime in ("application/json", "text/json"):
            return "json"
        if mime in ("application/xml", "text/xml"):
            return "xml"
    return "xml"


def _xml_value(parent: etree._Element, key: Any, value: Any) -> None:
    name = "element" if isinstance(key, int) or str(key).isdigit() else str(key)
    if not _XML_NAME.match(name):
        name = re.sub(r"[^\w.\-]", "_", name) or "element"
        if not re.match(r"[A-Za-z_]", name):
            name = "_" + name
    el = etree.SubElement(parent, name)
    if isinstance(value, dict):
        for k, v in value.items():
            _xml_value(el, k, v)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _xml_value(el, i, v)
    elif value is None:
        pass
    elif value is True:
        el.text = "1"
    elif value is False:
        el.text = ""
    else:
        el.text = str(value)


def _http_status_v2(code: int) -> int:
    if code == RESPOND_UNAUTHORISED:
        return 401
    if code == RESPOND_NOT_FOUND:
        return 404
    if code in (RESPOND_SERVER_ERROR, RESPOND_UNKNOWN_ERROR):
        return 500
    if code < 200 or code > 600:
        return 400
    return code


def ocs_response(
    request: Request,
    data: Any,
    status: int = 200,
    message: str | None = None,
    *,
    version: int = 2,
    headers: dict[str, str] | None = None,
    fmt: str | None = None,
) -> Response:
    """An OCS response: envelope ``{"ocs":{"meta":…,"data":…}}`` in the requested format
    (``fmt``, ``"json"`` or ``"xml"``, when given; else as ``OCSMiddleware`` picks it).

    ``status`` is the OCS status (``meta.statuscode`` in v2; mapped to 100 in v1 on success).
    """
    ok = 200 <= status < 300
    if version == 2:
        meta: dict[str, Any] = {
            "status": "ok" if ok else "failure",
            "statuscode": status,
            "message": "OK" if ok else (message or ""),
        }
        http_status = _http_status_v2(status)
    else:
        code = 100 if ok else status
        meta = {
            "status": "ok" if code == 100 else "failure",
            "statuscode": code,
            "message": "OK" if code == 100 else (message or ""),
            "totalitems": "",
            "itemsperpage": "",
        }
        http_status = 401 if status == RESPOND_UNAUTHORISED else 200
    envelope = {"ocs": {"meta": meta, "data": data}}
    if (fmt or _format(request)) == "json":
        body = php_json_encode(envelope, hex_tag=True).encode()
        ctype = JSON_CONTENT_TYPE
    else:
        root = etree.Element("ocs")
        for key, value in envelope["ocs"].items():
            _xml_value(root, key, value)
        body = to_bytes(root, PHP_DECLARATION)
        ctype = "application/xml; charset=utf-8"
    resp = Response(body, status=http_status, content_type=ctype)
    if http_status == 401:
        resp.headers["WWW-Authenticate"] = 'Basic realm="Authorisation Required"'
    for key, value in (headers or {}).items():
        resp.headers[key] = value
    return resp


#: The OCS routes the simulator serves, below ``/ocs/v{1,2}.php`` (:class:`~ncindex.simulator.
#: routing.Routes`). Sources: nextcloud/server ``core/routes.php`` ``ocs``
#: (``OCS#getCapabilities``, ``AppPassword#deleteAppPassword``),
#: ``apps/provisioning_api/appinfo/routes.php`` (``Users#getCurrentUser``, ``Users#getUser`` —
#: its ``editUser`` PUT and ``deleteUser`` DELETE are not modelled, so answer 405 here),
#: ``apps/webhook_listeners/lib/Controller/WebhooksController.php`` (its ``#[ApiRoute]``s),
#: ``apps/files_sharing/appinfo/routes.php`` (``getShares``, ``createShare``, ``getShare``,
#: ``updateShare``, ``deleteShare``), ``apps/user_status/appinfo/routes.php``
#: (``UserStatus#getStatus``).
OCS_ROUTES = Routes(
    (verb, url, {})
    for verb, url in (
        ("GET", "/cloud/capabilities"),
        ("GET", "/cloud/user"),
        ("GET", "/cloud/users/{userId}"),
        ("DELETE", "/core/apppassword"),
        ("GET", "/apps/webhook_listeners/api/v1/webhooks"),
        ("POST", "/apps/webhook_listeners/api/v1/webhooks"),
        ("GET", "/apps/webhook_listeners/api/v1/webhooks/{id}"),
        ("POST", "/apps/webhook_listeners/api/v1/webhooks/{id}"),
        ("DELETE", "/apps/webhook_listeners/api/v1/webhooks/{id}"),
        ("DELETE", "/apps/webhook_listeners/api/v1/webhooks/byappid/{appid}"),
        ("GET", SHARES_BASE),
        ("POST", SHARES_BASE),
        ("GET", SHARES_BASE + "/{id}"),
        ("PUT", SHARES_BASE + "/{id}"),
        ("DELETE", SHARES_BASE + "/{id}"),
        ("GET", "/apps/user_status/api/v1/user_status"),
    )
)


def method_not_allowed(request: Request) -> Response:
    """``ocs/v1.php``'s answer (``v2.php`` too) when a route has the path but not the method:
    the router's ``MethodNotAllowedException`` is caught after the login and before any
    controller (so no CSRF check or login is asked for), ``ApiHelper::setContentType()`` is
    called and ``http_response_code(405)`` set — HTTP 405 with an empty body, in v1 and v2,
    ``Content-Type`` from the ``format`` parameter alone (``text/xml; charset=UTF-8`` by
    default, ``application/json; charset=utf-8`` for ``json``, ``application/octet-stream;
    charset=utf-8`` for any other) — nextcloud/server ``ocs/v1.php``, ``lib/private/OCS/
    ApiHelper.php`` ``setContentType``. No ``Allow`` header is sent."""
    fmt = request_params(request).get("format", "xml")
    if fmt == "xml":
        ctype = "text/xml; charset=UTF-8"
    elif fmt == "json":
        ctype = JSON_CONTENT_TYPE
    else:
        ctype = "application/octet-stream; charset=utf-8"
    return Response(b"", status=405, content_type=ctype)


def route_not_found(request: Request) -> Response:
    """``ocs/v1.php``'s answer (``v2.php`` too) when ``Router::match`` finds no route for the
    path — an unknown one, or one of a disabled app, whose routes were never loaded
    (nextcloud/server ``lib/private/Route/Router.php`` ``loadRoutes``: an app's
    ``routes.php`` only once ``OC_App::isAppLoaded``, its attribute routes only when
    ``isEnabledForUser``). The ``ResourceNotFoundException`` is caught by ``ocs/v1.php``
    after the login and before any controller, so no CSRF check or login is asked for:
    ``ApiHelper::respond(OCSController::RESPOND_NOT_FOUND, …)`` (``lib/private/OCS/
    ApiHelper.php``) renders a ``V2Response`` (HTTP 404, ``meta.statuscode`` 998) or a
    ``V1Response`` (HTTP 200) of empty data with :data:`INVALID_QUERY`, in the format of the
    ``format`` parameter only (``getParam('format', 'xml')``; the ``Accept`` header is not
    read, unlike ``OCSMiddleware``), with ``ApiHelper::setContentType``'s
    ``Content-Type``."""
    fmt = "json" if request_params(request).get("format") == "json" else "xml"
    version = 1 if request.path.startswith("/ocs/v1.php") else 2
    resp = ocs_response(request, [], RESPOND_NOT_FOUND, INVALID_QUERY, version=version, fmt=fmt)
    resp.content_type = JSON_CONTENT_TYPE if fmt == "json" else "text/xml; charset=UTF-8"
    return resp


class OcsApi:
    """Handlers for the OCS routes; see the module docstring for the common behaviour."""

    def __init__(self, sim: NextcloudSimulator) -> None:
        self.sim = sim
        self.sharing = SharingApi(sim, self)

    @staticmethod
    def respond(
        request: Request, data: Any, status: int = 200, message: str | None = None, *, version: int
    ) -> Response:
        """:func:`ocs_response` (for the route modules)."""
        return ocs_response(request, data, status, message, version=version)

    @staticmethod
    def not_found(request: Request) -> Response:
        """:func:`route_not_found` (for the route modules)."""
        return route_not_found(request)

    def handle(self, request: Request, uid: str | None) -> Response:
        """Dispatch one OCS request; ``uid`` is the authenticated user or None."""
        path = request.path
        version = 1 if path.startswith("/ocs/v1.php") else 2
        given = path.split(".php", 1)[1]
        route = given.rstrip("/")
        # ocs/v1.php: Router::match runs before any controller, so an unknown path (998) and a
        # method no route of the path has (405) are answered before the login check (997) and
        # the CSRF check (412) of SecurityMiddleware::beforeController. The path as given:
        # Router::findMatchingRoute's UrlMatcher is not a redirecting one, so no route without
        # a trailing slash matches a path with one (it retries only a path without one, "/"
        # appended) — /cloud/user/ is 998
        if OCS_ROUTES.methods(given) is None:
            return route_not_found(request)
        if OCS_ROUTES.refuses(request.method, given):
            return method_not_allowed(request)
        if route == "/cloud/capabilities" and request.method == "GET":
            # public page: no login needed, but the CSRF rule still applies
            if not self._ocs_request(request):
                return json_response({"message": "CSRF check failed"}, 412)
            return ocs_response(request, self.capabilities(uid), version=version)
        if uid is None:
            return ocs_response(
                request, [], RESPOND_UNAUTHORISED, "Current user is not logged in", version=version
            )
        if not self._ocs_request(request):
            return json_response({"message": "CSRF check failed"}, 412)
        if route == "/cloud/user" and request.method == "GET":
            return ocs_response(request, self.current_user(uid), version=version)
        m = re.fullmatch(r"/cloud/users/([^/]+)", route)
        if m and request.method == "GET":
            if m.group(1) not in self.sim.tree.users:
                return ocs_response(request, [], 404, "User does not exist", version=version)
            data = self.user_data(uid, m.group(1))
            if data is None:
                return ocs_response(request, [], RESPOND_NOT_FOUND, "", version=version)
            return ocs_response(request, data, version=version)
        # a disabled app's routes never get here: SimulatorApp.unregistered answers them
        base = "/apps/webhook_listeners/api/v1/webhooks"
        if route == base or route.startswith(base + "/"):
            return self.webhooks(request, uid, route[len(base) :], version)
        if route == SHARES_BASE or route.startswith(SHARES_BASE + "/"):
            return self.sharing.handle(request, uid, route[len(SHARES_BASE) :], version)
        if route == "/apps/user_status/api/v1/user_status" and request.method == "GET":
            return self.user_status(request, uid, version)
        if route == "/core/apppassword" and request.method == "DELETE":
            return self.delete_app_password(request, version)
        return route_not_found(request)

    def delete_app_password(self, request: Request, version: int) -> Response:
        """``DELETE /ocs/v2.php/core/apppassword`` (nextcloud/server
        ``core/Controller/AppPasswordController.php``, ``deleteAppPassword``): the app
        password this request signed in with is invalidated; 200 with empty data, or OCS 403
        "no app password in use". Signed in with Basic ``login-name:app-password`` or with
        ``Bearer <app-password>``: both mark the session's ``app_password`` that
        ``deleteAppPassword`` reads (``lib/private/User/Session.php`` ``logClientIn`` for a
        token password, ``tryTokenLogin`` for a permanent token)."""
        auth = request.authorization
        assert auth is not None  # uid is set, so Basic or Bearer auth succeeded
        flows = self.sim.app_state["login_flows"]
        if auth.type == "bearer":
            deleted = flows.delete_token(auth.token or "")
        else:
            deleted = flows.delete_app_password(auth.username or "", auth.password or "")
        if not deleted:
            return ocs_response(request, [], 403, "no app password in use", version=version)
        return ocs_response(request, [], version=version)

    @staticmethod
    def _ocs_request(request: Request) -> bool:
        return request.headers.get("OCS-APIRequest", "").lower() == "true"

    # ------------------------------------------------------------------ cloud

    def capabilities(self, uid: str | None = None) -> dict[str, Any]:
        """``data`` of ``GET /cloud/capabilities`` for ``uid`` (None: anonymous): version +
        capabilities incl. ``notes``."""
        major, minor, micro = (int(x) for x in [*self.sim.version.split("."), "0", "0"][:3])
        apps = self.sim.apps
        caps: dict[str, Any] = {
            "core": {
                "pollinterval": 60,
                "webdav-root": "remote.php/webdav",
                "reference-api": True,
                "reference-regex": r"(\s|\n|^)(https?:\/\/)([-A-Z0-9+_.]+(?::[0-9]+)?)",
                "mod-rewrite-working": False,
            },
            "dav": {
                "chunking": "1.0",
                "bulkupload": "1.0",
                "search_supports_creation_time": True,
            },
            "files": {"bigfilechunking": True},
        }
        # each app's own ICapability, there only while the app is enabled: files_trashbin's
        # and files_versions' lib/Capabilities.php add "undelete" and "versioning" to "files"
        if "files_trashbin" in apps:
            caps["files"]["undelete"] = True
        if "files_versions" in apps:
            caps["files"]["versioning"] = True
        if "files_sharing" in apps:
            caps["files_sharing"] = sharing_capability(self.sim)
        if "user_status" in apps:
            caps["user_status"] = {
                "enabled": True,
                "restore": True,
                "supports_emoji": True,
                "supports_busy": True,
            }
        if "notes" in apps:
            # nextcloud/notes lib/AppInfo/Capabilities.php: api_version, version, and the
            # user's notes folder setting (NoteUtil::getNotesFolderUserPath; null anonymous)
            settings = self.sim.notes_settings.get(uid, {}) if uid is not None else {}
            caps["notes"] = {
                "api_version": ["0.2", "1.3", "1.4"],
                "version": apps["notes"],
                "notes_path": settings.get("notesPath", "Notes") if uid is not None else None,
            }
        if "deck" in apps:
            caps["deck"] = {
                "version": apps["deck"],
                "canCreateBoards": True,
                "apiVersions": ["1.0", "1.1"],
            }
        return {
            "version": {
                "major": major,
                "minor": minor,
                "micro": micro,
                "string": self.sim.version,
                "edition": "",
                "extendedSupport": False,
            },
            "capabilities": caps,
        }

    def user_data(self, viewer: str, target: str) -> dict[str, Any] | None:
        """Provisioning API user details of ``target`` as ``viewer`` may see them, or None.

        Field set and order of nextcloud/server ``apps/provisioning_api/lib/Controller/
        AUserDataOCSController.php`` ``getUserData``: ``enabled`` (a boolean: ``core``
        ``enabled`` is ``'true'``) and ``storageLocation`` only for admins and delegated
        admins of the Users setting (:data:`USERS_ADMIN_SETTING`), who see every user; anyone
        else sees only themselves (``null``: ``UsersController::getUser``'s OCS 998); a
        subadmin's view of their groups' users (``enabled`` without ``storageLocation``) and
        the admin IP ranges (``IRemoteAddress::allowsAdminActions``) are not modelled.
        ``displayname`` and ``display-name`` both present.
        """
        with self.sim.lock:
            tree = self.sim.tree
            me = tree.users.get(viewer)
            user = tree.users.get(target)
            if me is None or user is None:
                return None
            admin = me.admin or USERS_ADMIN_SETTING in me.delegated
            if not admin and viewer != target:
                return None
            used = tree.homes[target].size
            data: dict[str, Any] = {}
            if admin:
                data["enabled"] = user.enabled
                data["storageLocation"] = f"/var/www/html/data/{target}"
            local, federated = "v2-local", "v2-federated"
            data.update(
                {
                    "id": user.uid,
                    "firstLoginTimestamp": user.created_at,
                    "lastLoginTimestamp": tree.now(),
                    "lastLogin": tree.now() * 1000,
                    "backend": "Database",
                    "subadmin": [],
                    "quota": {"free": -3, "used": used, "total": -3, "relative": 0, "quota": -3},
                    "manager": "",
                    "avatarScope": federated,
                    "email": user.email,
                    "emailScope": federated,
                    "additional_mail": [],
                    "additional_mailScope": [],
                    "displayname": user.display_name,
                    "display-name": user.display_name,
                    "displaynameScope": federated,
                }
            )
            for prop in (
                "phone",
                "address",
                "website",
                "twitter",
                "bluesky",
                "fediverse",
                "organisation",
                "role",
                "headline",
                "biography",
            ):
                data[prop] = ""
                data[prop + "Scope"] = local
            data["profile_enabled"] = "1"
            data["profile_enabledScope"] = local
            data["pronouns"] = ""
            data["pronounsScope"] = federated
            data["groups"] = ["admin"] if user.admin else []
            data["language"] = "en"
            data["locale"] = ""
            data["timezone"] = ""
            data["notify_email"] = None
            data["backendCapabilities"] = {"setDisplayName": True, "setPassword": True}
            return data

    def current_user(self, uid: str) -> dict[str, Any]:
        """``data`` of ``GET /cloud/user`` for the logged-in ``uid``."""
        data = self.user_data(uid, uid)
        assert data is not None
        return data

    def user_status(self, request: Request, uid: str, version: int) -> Response:
        """``GET /apps/user_status/api/v1/user_status`` (``UserStatusController::getStatus``,
        shape from memory and nc_py_api's parser): the user's status, ``online`` when never
        set, no message."""
        data = {
            "userId": uid,
            "message": None,
            "messageId": None,
            "messageIsPredefined": False,
            "icon": None,
            "clearAt": None,
            "status": "online",
            "statusIsUserDefined": False,
        }
        return ocs_response(request, data, version=version)

    # ------------------------------------------------------------------ webhooks

    def webhooks(self, request: Request, uid: str, rest: str, version: int) -> Response:
        """webhook_listeners routes below ``/apps/webhook_listeners/api/v1/webhooks``: for
        admins and the users delegated :data:`WEBHOOKS_ADMIN_SETTING`, others OCS 403
        (``SecurityMiddleware`` ``NotAdminException``, made OCS by ``OCSMiddleware::
        afterController``)."""
        user = self.sim.tree.users[uid]
        if not user.admin and WEBHOOKS_ADMIN_SETTING not in user.delegated:
            return ocs_response(request, [], 403, NOT_ADMIN, version=version)
        registry = self.sim.registry
        method = request.method
        params = request_params(request)

        def respond(data: Any, status: int = 200, message: str | None = None) -> Response:
            return ocs_response(request, data, status, message, version=version)

        if rest == "":
            if method == "GET":
                uri = params.get("uri")
                return respond([registry.info(r) for r in registry.list(uri)])
            if method == "POST":
                try:
                    return respond(registry.info(registry.create(uid, params)))
                except WebhookError as exc:
                    return respond([], exc.status, exc.message)
        m = re.fullmatch(r"/byappid/([^/]+)", rest)
        if m and method == "DELETE":
            return respond(registry.delete_by_app(m.group(1)))
        m = re.fullmatch(r"/(\d+)", rest)
        if m:
            reg_id = int(m.group(1))
            if method == "GET":
                reg = registry.get(reg_id)
                if reg is None:  # also an id a POST /{id} "updated" (nothing is stored)
                    # nextcloud/server WebhooksController::show: getById's DoesNotExistException
                    # (QBMapper::findOneQuery) → OCSNotFoundException with its message
                    return respond(
                        [],
                        404,
                        "Did expect one result but found none when executing: query "
                        '"SELECT * FROM `*PREFIX*webhook_listeners` WHERE `id` = :dcValue1"; ',
                    )
                return respond(registry.info(reg))
            if method == "POST":
                try:
                    return respond(registry.info(registry.update(reg_id, uid, params)))
                except WebhookError as exc:
                    return respond([], exc.status, exc.message)
            if method == "DELETE":
                return respond(registry.delete(reg_id))
        return route_not_found(request)
