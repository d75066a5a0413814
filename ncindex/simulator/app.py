"""The simulator's WSGI app: request families, Basic and Bearer auth (the apps' ``#[CORS]`` APIs
take Basic only, :meth:`SimulatorApp.cors_refused`), fault switches, request counting.

Families (used by ``sim.request_count`` and ``sim.faults``):

* ``ocs`` — ``/ocs/v1.php/…``, ``/ocs/v2.php/…``
* ``webdav`` — ``/remote.php/dav/files/…`` and ``/remote.php/webdav/…`` (all methods)
* ``dav-search`` — ``SEARCH /remote.php/dav/``
* ``systemtags`` — ``/remote.php/dav/systemtags…``
* ``notes`` / ``deck`` / ``news`` — ``/index.php/apps/<app>/api/…`` (also without ``index.php``)
* ``login`` — Login Flow v2, ``/index.php/login/v2…`` (:mod:`ncindex.simulator.loginflow`)
* ``status`` — ``/status.php``; ``other`` — anything else (404)

Served under a web root (``sim.web_root``, e.g. ``/nextcloud``) every route starts with it, as
on a Nextcloud installed in a sub-folder; the app moves it into ``SCRIPT_NAME`` so handlers
see the path below it, and hrefs they build start with it again. A request outside the web
root is the web server's 404. A disabled app's routes are not registered: each entry point
answers them as it answers a path no route matches (:meth:`SimulatorApp.unregistered`, the one
place that asks whether the app of a route is enabled, :func:`route_app`). A method no route
of the path has is answered 405 as soon, before any controller's checks (OCS:
:func:`~ncindex.simulator.ocs.method_not_allowed`; ``index.php``: :func:`method_refused`).

An exception webhook_listeners' event listener throws (a filter PHPMongoQuery throws on, a job
argument over 4000 characters) fails the request that changed something, after the change,
with the answer of that app's own error handling (:meth:`SimulatorApp.listener_failed`).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable
from html import escape
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from ncindex.simulator.deck import DECK_ROUTES, DeckApi
from ncindex.simulator.eventfilter import FilterError
from ncindex.simulator.events import version_tuple
from ncindex.simulator.loginflow import LoginFlows
from ncindex.simulator.news import NEWS_ROUTES, NewsApi
from ncindex.simulator.notes_api import NOTES_ROUTES, NotesApi
from ncindex.simulator.ocs import OcsApi, route_not_found
from ncindex.simulator.phpjson import php_json_encode
from ncindex.simulator.responses import json_response
from ncindex.simulator.routing import Routes
from ncindex.simulator.webdav import WebDav
from ncindex.simulator.webhooks import JobArgumentError
from ncindex.simulator.xmlutil import XML_CONTENT_TYPE, dav_error, sabre_error

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator

__all__ = ["SimulatorApp", "basic_credentials_given", "family_of", "route_app"]

#: The families Sabre serves (``remote.php``): it logs in itself, so wrong credentials are its
#: 401 ``NotAuthenticated`` (nextcloud/server ``apps/dav/lib/Connector/Sabre/Auth.php``).
DAV_FAMILIES = ("webdav", "dav-search", "systemtags")
#: The families whose controller methods all carry ``#[CORS]`` (nextcloud/notes
#: ``NotesApiController``, nextcloud/deck ``*ApiController``, nextcloud/news ``*ApiController``).
CORS_FAMILIES = ("notes", "deck", "news")
#: The server release from which ``OCS-APIRequest`` passes the CSRF check of any controller
#: (nextcloud/server#46760, ``Request::passesCSRFCheck``; first in 31 by
#: nextcloud/openapi-extractor#179).
OCS_HEADER_PASSES_CSRF = (31,)
#: The collections of the DAV root an app adds (its ``appinfo/info.xml``
#: ``<sabre><collections>``: nextcloud/server ``apps/files_trashbin``, ``apps/files_versions``),
#: by their name. ``apps/dav/lib/AppInfo/PluginManager.php`` ``populate`` loads them from the
#: apps ``IAppManager::getInstalledApps`` lists, which leaves out those whose ``enabled`` is
#: ``no``. The system tags collections are the dav app's own (``apps/dav/lib/RootCollection.php``):
#: no app's switch takes them away.
DAV_APP_COLLECTIONS = {"trashbin": "files_trashbin", "versions": "files_versions"}
#: The ``index.php`` routes of the families whose app's API the simulator serves, below
#: ``/apps/{app}`` (:func:`method_refused`).
INDEX_PHP_ROUTES: dict[str, Routes] = {
    "notes": NOTES_ROUTES,
    "deck": DECK_ROUTES,
    "news": NEWS_ROUTES,
}
_APP_ROUTE = re.compile(r"^(?:/index\.php|/ocs/v[12]\.php)?/apps/([^/]+)")
_DAV_COLLECTION = re.compile(r"^/remote\.php/dav/([^/]+)")


def family_of(method: str, path: str) -> str:
    """The request family of ``method`` + ``path`` (see the module docstring)."""
    if path.startswith("/ocs/"):
        return "ocs"
    if path.startswith("/remote.php/dav/systemtags"):
        return "systemtags"
    if path.startswith("/remote.php/dav"):
        if method.upper() == "SEARCH":
            return "dav-search"
        return "webdav"
    if path.startswith("/remote.php/webdav"):
        return "webdav"
    bare = path.removeprefix("/index.php")
    for app in ("notes", "deck", "news"):
        if bare.startswith(f"/apps/{app}/"):
            return app
    if path == "/status.php":
        return "status"
    if bare == "/login/v2" or bare.startswith("/login/v2/"):
        return "login"
    return "other"


def route_app(path: str) -> str | None:
    """The app whose routes would answer ``path`` (below the web root), or None for the
    server's own: ``/apps/{app}/…`` under ``index.php`` (or without it) and under
    ``ocs/v1.php``/``v2.php`` (nextcloud/server ``lib/private/Route/Router.php``
    ``findMatchingRoute`` loads the routes of the app so named), and the DAV collections of
    :data:`DAV_APP_COLLECTIONS`."""
    m = _APP_ROUTE.match(path)
    if m:
        return m.group(1)
    m = _DAV_COLLECTION.match(path)
    return DAV_APP_COLLECTIONS.get(m.group(1)) if m else None


def basic_credentials_given(request: Request) -> bool:
    """Whether ``request`` carries Basic credentials with a login name and a password, both
    non-empty: those nextcloud/server ``lib/private/User/Session.php`` ``tryBasicAuthLogin``
    tries (``!empty(PHP_AUTH_USER) && !empty(PHP_AUTH_PW)``), and refuses with a
    ``LoginException`` when they are wrong. A header werkzeug cannot parse is not."""
    try:
        auth = request.authorization
    except ValueError:
        return False
    return auth is not None and auth.type == "basic" and bool(auth.username and auth.password)


def method_refused(family: str, request: Request) -> Response | None:
    """``index.php``'s answer when routes of the app have the path but none the method
    (:meth:`~ncindex.simulator.routing.Routes.refuses`), or None: nextcloud/server
    ``lib/base.php`` ``OC::handleRequest`` catches the router's ``MethodNotAllowedException``
    with ``http_response_code(405)`` and returns — after the login, before any controller (no
    ``#[CORS]`` rule, no "not logged in"): 405, no body (PHP's default ``Content-Type``), no
    ``Allow`` header. ``ocs/v1.php``'s own is :func:`~ncindex.simulator.ocs.
    method_not_allowed`."""
    routes = INDEX_PHP_ROUTES.get(family)
    if routes is None:
        return None
    path = request.path.removeprefix("/index.php").removeprefix(f"/apps/{family}")
    if not routes.refuses(request.method, path):
        return None
    return Response(b"", status=405, content_type="text/html; charset=UTF-8")


class SimulatorApp:
    """WSGI callable around a :class:`~ncindex.simulator.simulator.NextcloudSimulator`."""

    def __init__(self, sim: NextcloudSimulator) -> None:
        self.sim = sim
        self.ocs = OcsApi(sim)
        self.dav = WebDav(sim)
        self.notes = NotesApi(sim)
        sim.app_state["notes_api"] = self.notes
        self.login_flows = LoginFlows(sim)
        sim.app_state["login_flows"] = self.login_flows
        self.handlers: dict[str, Callable[[Request, str | None], Response]] = {
            "ocs": self.ocs.handle,
            "webdav": self.dav.handle,
            "dav-search": self.dav.handle,
            "systemtags": self.dav.handle,
            "notes": self.notes.handle,
            "deck": DeckApi(sim).handle,
            "news": NewsApi(sim).handle,
            "status": self.status,
            "login": self.login_flows.handle,
        }

    def authenticate(self, request: Request) -> tuple[str | None, bool]:
        """The uid of a valid Basic ``login-name:app-password`` (see
        :meth:`~ncindex.simulator.simulator.NextcloudSimulator.login`) or ``Bearer
        <app-password>`` (:meth:`~ncindex.simulator.simulator.NextcloudSimulator.token_user`),
        else None (also for a header werkzeug cannot parse, e.g. non-ASCII bytes: Nextcloud
        answers those 401 too); and whether it was Basic auth."""
        try:
            auth = request.authorization
        except ValueError:
            return None, False
        if auth is not None and auth.type == "bearer" and auth.token:
            return self.sim.token_user(auth.token), False
        if auth is None or auth.type != "basic" or not auth.username:
            return None, False
        password = auth.password or ""
        uid = self.sim.login(auth.username, password)
        return uid, uid is not None

    def cors_refused(self, request: Request, basic: bool) -> Response | None:
        """nextcloud/server ``lib/private/AppFramework/Middleware/Security/CORSMiddleware.php``
        ``beforeController`` on a ``#[CORS]`` method, which runs before the
        ``SecurityMiddleware``: a request passing the CSRF check goes on (no cookies here, so
        only ``OCS-APIRequest``, from :data:`OCS_HEADER_PASSES_CSRF`); otherwise the session
        is logged out and only valid Basic credentials log in again — a Bearer token or none
        answer 401 ``{"message": "CORS requires basic auth"}`` (``afterException``;
        nextcloud/server#44365). Wrong Basic credentials never get this far
        (:meth:`login_refused`). ``None``: not refused."""
        passes_csrf = (
            request.headers.get("OCS-APIRequest", "") != ""
            and version_tuple(self.sim.version) >= OCS_HEADER_PASSES_CSRF
        )
        if passes_csrf or basic:
            return None
        return json_response({"message": "CORS requires basic auth"}, 401)

    def login_refused(self, family: str, request: Request, message: str) -> Response | None:
        """The answer to a ``LoginException`` whose message is ``message``: thrown for valid
        credentials of a disabled account by nextcloud/server
        ``lib/private/User/Session.php`` ``completeLogin`` ("User disabled"; "Account
        disabled" in the log of a 29.0.2 server, CollaboraOnline/richdocumentscode#275 — the
        text is not relied on), and for wrong Basic credentials (:func:`basic_credentials_given`)
        by ``tryBasicAuthLogin`` without a message ("If credentials were provided, they need to
        be valid, otherwise we do boom") from ``OC::handleLogin``, which ``ocs/v1.php`` and
        ``OC::handleRequest`` (``lib/base.php``, every ``index.php`` route) call before the
        router — WebDAV logs in through Sabre instead (``apps/dav/lib/Connector/Sabre/Auth.php``
        ``validateUserPass``: ``logClientIn`` false, so Sabre's 401 ``NotAuthenticated``, not
        this). The exception is then caught by

        * ``ocs/v1.php`` (also serving ``v2.php``) catches: OCS 997 "Unauthorised", so HTTP
          401 in v2 — before any route, the public capabilities too;
        * WebDAV's ``apps/dav/lib/Connector/Sabre/Auth.php`` ``check`` turns into
          ``ServiceUnavailable("OC\\User\\LoginException: …")``: HTTP 503 with Sabre's error
          body (nextcloud/server#22758, still so in 31; nextcloud/server#58804 proposes 401).
          For a Bearer token (``BearerAuth``) the same answer is a *guess*;
        * ``index.php`` (the apps' APIs): nextcloud/server ``index.php`` ``catch
          (LoginException)`` answers a request whose ``Accept`` header does not name ``html``
          (``stripos``) 401 ``application/json; charset=utf-8`` ``{"message": …}`` (so
          ``{"message": ""}`` for wrong credentials, not the ``#[CORS]`` rule's "CORS
          requires basic auth", which no controller gets to), any other the 401 error page
          (``printErrorPage``; its HTML here is a *guess*).

        ``None`` for the families that do not log in (``status``) or are not modelled so
        (``login``, ``other``)."""
        if family == "ocs":
            version = 1 if request.path.startswith("/ocs/v1.php") else 2
            return self.ocs.respond(request, [], 997, "Unauthorised", version=version)
        if family in DAV_FAMILIES:
            body = sabre_error(
                "Sabre\\DAV\\Exception\\ServiceUnavailable", f"OC\\User\\LoginException: {message}"
            )
            return Response(body, status=503, content_type=XML_CONTENT_TYPE)
        if family in CORS_FAMILIES:
            if "html" not in request.headers.get("Accept", "").lower():
                return json_response({"message": message}, 401)
            page = f"<html><body><h1>{escape(message)}</h1></body></html>"
            return Response(page.encode(), status=401, content_type="text/html; charset=UTF-8")
        return None

    def unregistered(self, family: str, request: Request, uid: str | None) -> Response | None:
        """The answer to a route of an app that is not enabled (:func:`route_app`), or None
        (none such, or the answer comes later). Nothing of a disabled app is loaded, so its
        routes are not registered and each entry point answers as for a path no route
        matches, after its login (a disabled account is refused first) and before any
        controller (no CSRF check, no ``#[CORS]`` rule):

        * OCS: :func:`~ncindex.simulator.ocs.route_not_found` (998, HTTP 404 in v2) — with
          or without credentials, as ``ocs/v1.php`` logs in without requiring it;
        * WebDAV: after Sabre's authentication (a request without valid credentials gets the
          401 first: None here), the root ``SimpleCollection::getChild`` finds no child of
          that name: 404 ``Sabre\\DAV\\Exception\\NotFound`` "File not found: {name} in
          'root'" (sabre/dav ``lib/DAV/SimpleCollection.php``);
        * ``index.php``: ``OC::handleRequest`` (nextcloud/server ``lib/base.php``) catches
          the ``ResourceNotFoundException`` and answers a ``PROPFIND`` 405, a request whose
          ``Accept`` header is exactly ``application/json`` or ``application/xml`` 404 with
          an empty body, anything else the 404 page of the ``/error/404`` route (its HTML
          here is a *guess*: "Page not found")."""
        app = route_app(request.path)
        if app is None or self.sim.app_enabled(app):
            return None
        if family == "ocs":
            return route_not_found(request)
        if family in DAV_FAMILIES:
            if uid is None:
                return None
            name = request.path.removeprefix("/remote.php/dav/").split("/", 1)[0]
            return dav_error(404, "NotFound", f"File not found: {name} in 'root'")
        if request.method.upper() == "PROPFIND":
            return Response(b"", status=405, content_type="text/html; charset=UTF-8")
        if request.headers.get("Accept") in ("application/json", "application/xml"):
            return Response(b"", status=404, content_type="text/html; charset=UTF-8")
        return Response(
            b"<html><body><h1>Page not found</h1></body></html>",
            status=404,
            content_type="text/html; charset=UTF-8",
        )

    def status(self, request: Request, uid: str | None) -> Response:
        """``/status.php`` (no auth)."""
        body = {
            "installed": True,
            "maintenance": self.sim.maintenance,
            "needsDbUpgrade": False,
            "version": f"{self.sim.version}.1",
            "versionstring": self.sim.version,
            "edition": "",
            "productname": "Nextcloud",
            "extendedSupport": False,
        }
        resp = Response(php_json_encode(body), content_type="application/json")
        resp.headers["Access-Control-Allow-Origin"] = "*"
        return resp

    def dispatch(self, request: Request) -> tuple[str, Response]:
        """Handle one request; returns ``(family, response)``."""
        family = family_of(request.method, request.path)
        if self.sim.maintenance and family != "status":
            # nextcloud/server lib/base.php, OC::checkMaintenanceMode: every route but
            # status.php answers 503 with these two headers (Retry-After: 120 there)
            resp = Response(
                b"<html><body><h1>Maintenance mode</h1></body></html>",
                status=503,
                content_type="text/html; charset=UTF-8",
            )
            resp.headers["X-Nextcloud-Maintenance-Mode"] = "1"
            resp.headers["Retry-After"] = str(self.sim.maintenance_retry_after)
            return family, resp
        fault = self.sim.faults.take(family, request.method)
        if fault is not None:
            if fault.timeout:
                fault.release.wait(self.sim.faults.HANG_SECONDS)
            if fault.delay:
                fault.release.wait(fault.delay)
            if fault.status:
                return family, Response(
                    b"<html><body><h1>Service Unavailable</h1></body></html>",
                    status=fault.status,
                    content_type="text/html; charset=UTF-8",
                )
        uid, basic = self.authenticate(request)
        disabled = uid is not None and not self.sim.tree.users[uid].enabled
        if disabled:
            refused = self.login_refused(family, request, "Account disabled")
            if refused is not None:
                return family, refused
        elif uid is None and family not in DAV_FAMILIES and basic_credentials_given(request):
            refused = self.login_refused(family, request, "")
            if refused is not None:
                return family, refused
        unregistered = self.unregistered(family, request, uid)
        if unregistered is not None:
            return family, unregistered
        refused_method = method_refused(family, request)
        if refused_method is not None:
            return family, refused_method
        handler = self.handlers.get(family)
        if handler is None:
            return family, Response(b"Not Found", status=404, content_type="text/plain")
        if family in CORS_FAMILIES:
            refused = self.cors_refused(request, basic)
            if refused is not None:
                return family, refused
        with self.sim.basic_auth_request():
            try:
                return family, handler(request, uid)
            except (FilterError, JobArgumentError) as exc:
                return family, self.listener_failed(family, exc)

    def listener_failed(self, family: str, exc: FilterError | JobArgumentError) -> Response:
        """The answer to a request whose change dispatched an event webhook_listeners' listener
        threw on (the PHP class ``exc.php_class``, the message ``str(exc)``): WebDAV 500 with
        Sabre's ``d:error`` (sabre/dav ``Server::start``), the Notes API 500 ``{"errorType"}``
        (nextcloud/notes ``lib/Controller/Helper.php`` ``handleErrorResponse``), the Deck API 500
        ``{"status", "message", "requestId"}`` with the message of a server not in debug mode
        (nextcloud/deck ``lib/Middleware/ExceptionMiddleware.php`` ``afterException``).
        Re-raises ``exc`` for the other families, where no change dispatches such an event."""
        if family in ("webdav", "systemtags", "dav-search"):
            body = sabre_error(exc.php_class, str(exc))
            return Response(body, status=500, content_type=XML_CONTENT_TYPE)
        if family == "notes":
            return self.notes.error(500, exc.php_class)
        if family == "deck":
            request_id = secrets.token_urlsafe(15)[:20]
            message = (
                "Internal server error: Please contact the server administrator if this error "
                "reappears multiple times, please include the request ID "
                f'"{request_id}" below in your report.'
            )
            return json_response({"status": 500, "message": message, "requestId": request_id}, 500)
        raise exc

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        """WSGI entry point: dispatch, count, respond."""
        root = self.sim.web_root
        if root:
            path = environ.get("PATH_INFO", "")
            if path != root and not path.startswith(root + "/"):
                response = Response(b"Not Found", status=404, content_type="text/plain")
                self.sim.count_request(environ.get("REQUEST_METHOD", "GET"), "other", path, 404)
                return response(environ, start_response)
            environ = dict(environ)
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + root
            environ["PATH_INFO"] = path[len(root) :]
        request = Request(environ)
        family, response = self.dispatch(request)
        self.sim.count_request(request.method, family, request.path, response.status_code)
        return response(environ, start_response)
