"""Login Flow v2 (``/index.php/login/v2…``) and app-password deletion, as Nextcloud does them.

Source: nextcloud/server ``core/Controller/ClientFlowLoginV2Controller.php`` and
``core/Service/LoginFlowV2Service.php``:

* ``POST /login/v2`` (``init``, public, no CSRF check) creates a flow (``createTokens``: a
  128-character poll token and login token of ``[0-9a-zA-Z]``; the client name is the
  ``User-Agent``) and answers ``{"poll": {"token", "endpoint"}, "login"}`` with absolute URLs
  of the ``poll`` and ``landing`` routes;
* ``GET /login/v2/flow/{token}`` (``landing``) marks the flow started (``startLoginFlow``; an
  unknown token answers 403 "Your login token is invalid or has expired") and shows the
  account picker;
* ``POST /login/v2/grant`` (``generateAppPassword``) — the signed-in user grants access — makes
  a new 72-character app password under the user's login name (``flowDone``,
  ``IToken::PERMANENT_TOKEN``) and stores login name, server and app password on the flow;
* ``POST /login/v2/poll`` (``poll``, public) with ``token``: 404 ``[]`` while the flow is
  unknown or not done; once done 200 ``{"server", "loginName", "appPassword"}`` and the flow is
  deleted (so a second poll is 404 again).

Simplifications (the simulator has no browser sessions): the account picker is one HTML form
that takes the login name and password and grants at once, with the login token in a hidden
field instead of Nextcloud's PHP session and state token. Any password the user can sign in
with (:meth:`~ncindex.simulator.simulator.NextcloudSimulator.login`) is accepted there. Flows are
not expired (Nextcloud's ``CleanupLoginFlowV2`` background job removes old ones — guess: not
read).

``DELETE /ocs/v2.php/core/apppassword`` (core ``AppPasswordController::deleteAppPassword``)
invalidates the app password the request authenticated with, as Basic password or Bearer token;
the caller's next request is 401.
It is served by :mod:`ncindex.simulator.ocs`, which calls :meth:`LoginFlows.delete_app_password`.
"""

from __future__ import annotations

import hashlib
import html
import secrets
import string
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from werkzeug.wrappers import Request, Response

from ncindex.simulator.responses import json_response, request_params

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator

__all__ = ["LoginFlows"]

_ALNUM = string.digits + string.ascii_letters
TOKEN_CHARS = 128
"""Length of poll and login tokens (``LoginFlowV2Service::createTokens``)."""
APP_PASSWORD_CHARS = 72
"""Length of an app password (``LoginFlowV2Service::flowDone``)."""


def _random(length: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(length))


@dataclass
class Flow:
    """One login flow: the client's name, whether the landing page was opened, and — once the
    user granted access — login name, server and app password."""

    login_token: str
    client_name: str
    started: bool = False
    login_name: str | None = None
    server: str | None = None
    app_password: str | None = None


class LoginFlows:
    """The simulator's Login Flow v2 routes (see the module docstring)."""

    def __init__(self, sim: NextcloudSimulator) -> None:
        self.sim = sim
        self.lock = threading.Lock()
        # Nextcloud stores hash('sha512', pollToken . secret); the simulator keeps a SHA-512
        self.by_poll: dict[str, Flow] = {}

    def handle(self, request: Request, uid: str | None) -> Response:
        """Route ``/index.php/login/v2…`` (also without ``index.php``)."""
        route = request.path.removeprefix("/index.php").rstrip("/")
        base = request.host_url.rstrip("/") + request.script_root + "/index.php/login/v2"
        if route == "/login/v2" and request.method == "POST":
            return self.init(request, base)
        if route == "/login/v2/poll" and request.method == "POST":
            return self.poll(str(request_params(request).get("token") or ""))
        if route.startswith("/login/v2/flow/") and request.method == "GET":
            return self.landing(route.removeprefix("/login/v2/flow/"), base)
        if route == "/login/v2/grant" and request.method == "POST":
            return self.grant(request)
        return Response(b"Not Found", status=404, content_type="text/plain")

    def init(self, request: Request, base: str) -> Response:
        """``ClientFlowLoginV2Controller::init``."""
        poll_token, login_token = _random(TOKEN_CHARS), _random(TOKEN_CHARS)
        flow = Flow(login_token, request.headers.get("User-Agent", ""))
        with self.lock:
            self.by_poll[_hash(poll_token)] = flow
        return json_response(
            {
                "poll": {"token": poll_token, "endpoint": f"{base}/poll"},
                "login": f"{base}/flow/{login_token}",
            }
        )

    def poll(self, poll_token: str) -> Response:
        """``ClientFlowLoginV2Controller::poll`` → ``LoginFlowV2Service::poll``."""
        with self.lock:
            flow = self.by_poll.get(_hash(poll_token))
            if flow is None or flow.app_password is None:
                return json_response([], status=404)
            del self.by_poll[_hash(poll_token)]
        return json_response(
            {"server": flow.server, "loginName": flow.login_name, "appPassword": flow.app_password}
        )

    def _by_login(self, login_token: str) -> Flow | None:
        with self.lock:
            return next((f for f in self.by_poll.values() if f.login_token == login_token), None)

    def landing(self, login_token: str, base: str) -> Response:
        """``landing`` + the account picker: a form asking for login name and password."""
        flow = self._by_login(login_token)
        if flow is None:
            return _page("Your login token is invalid or has expired", status=403)
        flow.started = True
        client = html.escape(flow.client_name)
        token = html.escape(login_token)
        form = (
            f"<p>{client} wants to access your account.</p>"
            f'<form method="post" action="{html.escape(base)}/grant">'
            f'<input type="hidden" name="loginToken" value="{token}">'
            '<label>Login <input name="user" id="user" autocomplete="username"></label>'
            '<label>Password <input name="password" id="password" type="password"></label>'
            '<button type="submit" id="submit-grant">Grant access</button></form>'
        )
        return _page("Connect to your account", body=form)

    def grant(self, request: Request) -> Response:
        """``generateAppPassword`` → ``LoginFlowV2Service::flowDone`` after the sign-in."""
        params = request_params(request)
        flow = self._by_login(str(params.get("loginToken") or ""))
        if flow is None:
            return _page("Your login token is invalid or has expired", status=403)
        login_name = str(params.get("user") or "")
        uid = self.sim.login(login_name, str(params.get("password") or ""))
        if uid is None:
            return _page("Wrong login or password.", status=403)
        app_password = _random(APP_PASSWORD_CHARS)
        self.sim.add_app_password(uid, app_password, login_name=login_name)
        self.sim.revive_app_passwords(uid)  # flowDone → generateToken → updatePasswords
        with self.lock:
            flow.login_name = login_name
            flow.server = request.host_url.rstrip("/") + request.script_root
            flow.app_password = app_password
        return _page("Account connected", body="<p>You can close this window.</p>")

    def approve(self, login_url: str, login_name: str, password: str) -> bool:
        """Play the user granting ``login_url``'s flow (tests without a browser); ``False``
        when the flow or the credentials are unknown."""
        flow = self._by_login(login_url.rstrip("/").rsplit("/", 1)[-1])
        uid = self.sim.login(login_name, password)
        if flow is None or uid is None:
            return False
        app_password = _random(APP_PASSWORD_CHARS)
        self.sim.add_app_password(uid, app_password, login_name=login_name)
        self.sim.revive_app_passwords(uid)  # flowDone → generateToken → updatePasswords
        with self.lock:
            flow.login_name, flow.app_password = login_name, app_password
            flow.server = login_url.split("/index.php/", 1)[0]
        return True

    def delete_app_password(self, login_name: str, password: str) -> bool:
        """``AppPasswordController::deleteAppPassword``: invalidate the app password of this
        Basic login; ``False`` when it is not one (Nextcloud: OCS 403 "no app password in
        use")."""
        return self._invalidate(self.sim.login(login_name, password), password)

    def delete_token(self, token: str) -> bool:
        """:meth:`delete_app_password` of a request signed in with ``Authorization: Bearer
        <token>`` (nextcloud/server ``lib/private/User/Session.php`` ``tryTokenLogin`` sets
        the session's ``app_password`` for a permanent token too)."""
        return self._invalidate(self.sim.token_user(token), token)

    def _invalidate(self, uid: str | None, password: str) -> bool:
        if uid is None:
            return False
        with self.sim.lock:
            user = self.sim.tree.user(uid)
            user.passwords.discard(password)
            user.token_logins.pop(password, None)
        return True


def _hash(token: str) -> str:
    return hashlib.sha512(token.encode()).hexdigest()


def _page(title: str, *, body: str = "", status: int = 200) -> Response:
    text = (
        f"<!DOCTYPE html><html><head><title>{html.escape(title)}</title></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    return Response(text, status=status, content_type="text/html; charset=UTF-8")
