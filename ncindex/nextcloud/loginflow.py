"""Nextcloud's Login Flow v2 from the client side, and app-password deletion.

Source: nextcloud/server ``core/Controller/ClientFlowLoginV2Controller.php`` (``init``,
``poll``) and ``core/Service/LoginFlowV2Service.php`` (``poll``), ``core/Controller/
AppPasswordController.php`` (``deleteAppPassword``):

1. ``POST /index.php/login/v2`` (public) answers ``{"poll": {"token", "endpoint"}, "login"}``;
   the user opens ``login`` in a browser, signs in to Nextcloud and grants access;
2. ``POST /index.php/login/v2/poll`` with ``token=<poll token>`` answers 404 until then and
   ``{"server", "loginName", "appPassword"}`` once, after which the flow is deleted.

ncindex polls the path below its own configured Nextcloud URL rather than the ``endpoint``
Nextcloud names: that one is built from the host Nextcloud was reached by, and a server
must not POST a secret to an address an answer chose. The ``login`` URL, which the search
page links to and opens, must be an absolute http(s) URL (Nextcloud builds it with
``IURLGenerator::linkToRouteAbsolute``); anything else — ``javascript:``, ``data:``, a
scheme-relative or host-less URL, one with whitespace or control characters a browser would
strip before reading the scheme — is refused as a protocol error.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from ncindex.errors import NextcloudProtocolError, NotFound
from ncindex.nextcloud.client import NextcloudClient, json_object
from ncindex.urls import is_web_url

INIT_PATH = "/index.php/login/v2"
POLL_PATH = "/index.php/login/v2/poll"
APP_PASSWORD_PATH = "/ocs/v2.php/core/apppassword"  # noqa: S105 (a URL path)


@dataclass(frozen=True)
class LoginFlow:
    """A started flow: ``login_url`` for the user's browser, ``poll_token`` (128 characters,
    secret: whoever holds it receives the app password)."""

    login_url: str
    poll_token: str


@dataclass(frozen=True)
class LoginCredentials:
    """What a finished flow gives: the login name and the new app password (72 characters)."""

    login_name: str
    app_password: str


def start_login_flow(http: httpx.Client, client_name: str) -> LoginFlow:
    """``POST /index.php/login/v2`` with ``client_name`` as the ``User-Agent`` (Nextcloud
    shows it on the grant page and names the app password after it). Raises
    ``NextcloudUnavailable`` / ``NextcloudProtocolError`` (see :mod:`ncindex.nextcloud.client`)."""
    client = NextcloudClient(http, httpx.Auth())
    response = client.request("POST", INIT_PATH, headers={"User-Agent": client_name})
    body = json_object(response)
    try:
        login_url, poll_token = body["login"], body["poll"]["token"]
    except (KeyError, TypeError) as exc:
        raise NextcloudProtocolError(f"{INIT_PATH}: no login URL or poll token") from exc
    if not isinstance(poll_token, str) or not poll_token:
        raise NextcloudProtocolError(f"{INIT_PATH}: the poll token is not a string")
    if not is_web_url(login_url):
        raise NextcloudProtocolError(f"{INIT_PATH}: the login URL is not an http(s) URL")
    return LoginFlow(login_url, poll_token)


def poll_login_flow(http: httpx.Client, poll_token: str) -> LoginCredentials | None:
    """``POST /index.php/login/v2/poll``: ``None`` while the user has not granted access
    (404), the credentials once (Nextcloud deletes the flow as it answers). Raises
    ``NextcloudUnavailable`` / ``NextcloudProtocolError``."""
    client = NextcloudClient(http, httpx.Auth())
    try:
        response = client.request("POST", POLL_PATH, data={"token": poll_token})
    except NotFound:
        return None
    body = json_object(response)
    login_name, app_password = body.get("loginName"), body.get("appPassword")
    # strings (core/Data/LoginFlowV2Credentials.php jsonSerialize): another value (null, a
    # number) was sent on as its Python spelling, and a lone surrogate ("\ud800" in the JSON)
    # cannot be written in a Basic header's UTF-8 (the poll raised UnicodeEncodeError, a 500)
    if not (
        isinstance(login_name, str)
        and isinstance(app_password, str)
        and login_name
        and app_password
        and _utf8(login_name + app_password)
    ):
        raise NextcloudProtocolError(f"{POLL_PATH}: no loginName or appPassword (text)")
    return LoginCredentials(login_name, app_password)


def _utf8(text: str) -> bool:
    """Whether ``text`` can be written in UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def delete_app_password(client: NextcloudClient) -> None:
    """``DELETE /ocs/v2.php/core/apppassword``: Nextcloud invalidates the app password
    ``client`` signs in with. Raises ``NextcloudAuthError`` when it is already invalid,
    ``Forbidden`` when the credential is not an app password (OCS 403)."""
    client.ocs("DELETE", APP_PASSWORD_PATH)
