"""OCS: auth, CSRF rule, v2 envelope in XML and JSON, current user, capabilities."""

from __future__ import annotations

import httpx
import pytest
from lxml import etree
from sim_support import OCS, OCS_JSON, PASSWORDS

from ncindex.errors import NextcloudProtocolError, NextcloudRefused, NextcloudUnavailable
from ncindex.nextcloud.client import NextcloudClient


def test_unauthenticated_is_ocs_997_with_http_401_in_xml_and_json(client) -> None:
    anon = client(None)
    xml = anon.get("/ocs/v2.php/cloud/user", headers=OCS)
    assert xml.status_code == 401
    assert xml.headers["content-type"] == "application/xml; charset=utf-8"
    assert xml.text.startswith('<?xml version="1.0"?>')
    root = etree.fromstring(xml.content)
    assert root.tag == "ocs"
    assert root.findtext("meta/status") == "failure"
    assert root.findtext("meta/statuscode") == "997"
    assert root.findtext("meta/message") == "Current user is not logged in"
    js = anon.get("/ocs/v2.php/cloud/user", headers=OCS_JSON)
    assert js.status_code == 401
    assert js.json() == {
        "ocs": {
            "meta": {
                "status": "failure",
                "statuscode": 997,
                "message": "Current user is not logged in",
            },
            "data": [],
        }
    }


def test_wrong_password_is_401(server) -> None:
    resp = httpx.get(
        server.url + "/ocs/v2.php/cloud/user", auth=("alice", "nope"), headers=OCS_JSON
    )
    assert resp.status_code == 401
    assert resp.json()["ocs"]["meta"]["statuscode"] == 997


def test_missing_ocs_header_fails_csrf_check(client) -> None:
    resp = client("alice").get("/ocs/v2.php/cloud/user")
    assert resp.status_code == 412
    assert resp.json() == {"message": "CSRF check failed"}


def test_current_user_json_fields(client) -> None:
    resp = client("alice").get("/ocs/v2.php/cloud/user", headers=OCS_JSON)
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json; charset=utf-8"
    body = resp.json()["ocs"]
    assert body["meta"] == {"status": "ok", "statuscode": 200, "message": "OK"}
    data = body["data"]
    assert data["id"] == "alice"
    assert data["displayname"] == data["display-name"] == "Alice Adams"
    assert data["email"] == "alice@example.test"
    assert data["groups"] == []
    # as in AUserDataOCSController: "enabled" only when an admin looks
    assert "enabled" not in data
    admin = client("admin").get("/ocs/v2.php/cloud/user", headers=OCS_JSON).json()
    assert admin["ocs"]["data"]["enabled"] is True
    assert admin["ocs"]["data"]["groups"] == ["admin"]


def test_format_query_parameter_selects_json_and_xml_is_default(client) -> None:
    alice = client("alice")
    assert alice.get("/ocs/v2.php/cloud/user?format=json", headers=OCS).json()["ocs"]["data"][
        "id"
    ] == ("alice")
    xml = alice.get("/ocs/v2.php/cloud/user", headers=OCS)
    root = etree.fromstring(xml.content)
    assert root.findtext("meta/statuscode") == "200"
    assert root.findtext("data/id") == "alice"
    assert root.findtext("data/display-name") == "Alice Adams"
    # lists are <element> items, false is an empty element
    assert root.find("data/subadmin") is not None
    assert root.findtext("data/backendCapabilities/setPassword") == "1"


def test_json_escapes_slashes_like_php(client) -> None:
    raw = client("alice").get("/ocs/v2.php/cloud/capabilities", headers=OCS_JSON).text
    assert "remote.php\\/webdav" in raw


def test_capabilities_has_notes(client) -> None:
    data = client("alice").get("/ocs/v2.php/cloud/capabilities", headers=OCS_JSON).json()
    caps = data["ocs"]["data"]["capabilities"]
    # nextcloud/notes lib/AppInfo/Capabilities.php: the user's notes folder, null anonymous
    assert caps["notes"] == {
        "api_version": ["0.2", "1.3", "1.4"],
        "version": "6.0.2",
        "notes_path": "Notes",
    }
    assert data["ocs"]["data"]["version"]["string"]
    anonymous = client(None).get("/ocs/v2.php/cloud/capabilities", headers=OCS_JSON).json()
    assert anonymous["ocs"]["data"]["capabilities"]["notes"]["notes_path"] is None


def test_unknown_ocs_route_is_998_404(client) -> None:
    """nextcloud/server ``ocs/v1.php`` catches the router's ``ResourceNotFoundException`` and
    answers ``ApiHelper::respond(998, …)``: the format comes from ``format`` alone (XML
    despite ``Accept: application/json``), the message ends in a newline, and neither the
    credentials nor ``OCS-APIRequest`` are asked for (no controller runs)."""
    message = (
        "Invalid query, please check the syntax. API specifications are here: "
        "http://www.freedesktop.org/wiki/Specifications/open-collaboration-services.\n"
    )
    xml = client("alice").get("/ocs/v2.php/apps/nope/api/v1/x", headers=OCS_JSON)
    assert xml.status_code == 404
    assert xml.headers["content-type"] == "text/xml; charset=UTF-8"
    assert etree.fromstring(xml.content).findtext("meta/statuscode") == "998"
    js = client(None).get("/ocs/v2.php/apps/nope/api/v1/x", params={"format": "json"})
    assert js.status_code == 404
    assert js.json() == {
        "ocs": {"meta": {"status": "failure", "statuscode": 998, "message": message}, "data": []}
    }
    v1 = client(None).get("/ocs/v1.php/apps/nope/api/v1/x", params={"format": "json"})
    assert v1.status_code == 200 and v1.json()["ocs"]["meta"]["statuscode"] == 998


def test_an_unknown_ocs_path_is_998_before_the_login_and_the_csrf_check(client) -> None:
    """nextcloud/server ``ocs/v1.php`` runs ``Router::match`` before any controller, so the
    ``ResourceNotFoundException`` of a path no route has is answered before
    ``SecurityMiddleware``'s login (997) and CSRF (412) checks — for a core path as for an
    ``/apps/`` one, in v2 and v1 (the simulator answered 997 and 412 first)."""
    for c, headers in ((client(None), OCS), (client(None), {}), (client("alice"), {})):
        resp = c.get("/ocs/v2.php/cloud/nope", params={"format": "json"}, headers=headers)
        assert resp.status_code == 404
        assert resp.json()["ocs"]["meta"]["statuscode"] == 998
        v1 = c.get("/ocs/v1.php/cloud/nope", headers=headers)
        assert v1.status_code == 200
        assert etree.fromstring(v1.content).findtext("meta/statuscode") == "998"


def test_a_method_no_route_of_the_path_has_is_an_empty_405_before_login_and_csrf(
    client,
) -> None:
    """``ocs/v1.php`` catches the router's ``MethodNotAllowedException``: ``ApiHelper::
    setContentType()`` then ``http_response_code(405)``, no body — before the login and CSRF
    checks, in v1 and v2, the ``Content-Type`` from ``format`` alone."""
    alice, anon = client("alice"), client(None)
    cases = (
        (alice, "DELETE", "/cloud/user", OCS_JSON),
        (anon, "DELETE", "/cloud/user", {}),
        (anon, "POST", "/cloud/capabilities", {}),
        (alice, "GET", "/core/apppassword", OCS),
        (alice, "DELETE", "/apps/files_sharing/api/v1/shares", OCS),
        (anon, "PUT", "/apps/webhook_listeners/api/v1/webhooks/1", {}),
    )
    for c, method, route, headers in cases:
        for version in ("v1", "v2"):
            resp = c.request(method, f"/ocs/{version}.php{route}", headers=headers)
            assert (resp.status_code, resp.content) == (405, b""), (method, route, version)
            assert resp.headers["content-type"] == "text/xml; charset=UTF-8"
    js = alice.delete("/ocs/v2.php/cloud/user", params={"format": "json"}, headers=OCS)
    assert (js.status_code, js.headers["content-type"]) == (405, "application/json; charset=utf-8")


def test_wrong_basic_credentials_are_997_unauthorised_before_the_route(server) -> None:
    """``Session::tryBasicAuthLogin`` throws ``LoginException`` for Basic credentials that
    are given but wrong, and ``ocs/v1.php`` catches it before ``Router::match``: OCS 997
    "Unauthorised" (HTTP 401 in v1 too, ``ApiHelper::respond``) for a known path and an
    unknown one alike. A wrong Bearer token is no exception (``tryTokenLogin`` returns
    false): the request goes on unauthenticated, to the router's 998."""
    for path in ("/ocs/v2.php/cloud/user", "/ocs/v2.php/cloud/nope", "/ocs/v1.php/cloud/nope"):
        resp = httpx.get(server.url + path, auth=("alice", "nope"), headers=OCS_JSON)
        assert resp.status_code == 401, path
        assert resp.json()["ocs"]["meta"]["statuscode"] == 997
        assert resp.json()["ocs"]["meta"]["message"] == "Unauthorised"
    bearer = {**OCS_JSON, "Authorization": "Bearer nope"}
    resp = httpx.get(server.url + "/ocs/v2.php/cloud/nope", headers=bearer)
    assert resp.status_code == 404


def test_ocs_v1_keeps_http_200_and_uses_100(client) -> None:
    resp = client("alice").get("/ocs/v1.php/cloud/user", headers=OCS_JSON)
    assert resp.status_code == 200
    assert resp.json()["ocs"]["meta"]["statuscode"] == 100


def test_a_disabled_account_is_refused_at_every_entry_point(sim, client) -> None:
    """nextcloud/server ``Session::completeLogin`` throws ``LoginException`` for a disabled
    account; ``ocs/v1.php`` answers OCS 997 (HTTP 401 in v2), WebDAV's ``Auth::check`` a 503
    ``ServiceUnavailable`` naming the ``LoginException``, ``index.php`` 401 JSON; status.php
    asks no login. ``occ user:enable`` lets the same app password in again."""
    sim.put_file("alice", "/a.md", "x")
    sim.disable_user("alice")
    alice = client("alice")
    for path in ("/ocs/v2.php/cloud/user", "/ocs/v2.php/cloud/capabilities"):
        ocs = alice.get(path, headers=OCS_JSON)
        assert ocs.status_code == 401, path
        assert ocs.json()["ocs"]["meta"] == {
            "status": "failure",
            "statuscode": 997,
            "message": "Unauthorised",
        }
    dav = alice.request("PROPFIND", "/remote.php/dav/files/alice/", headers={"Depth": "0"})
    assert dav.status_code == 503
    root = etree.fromstring(dav.content)
    sabre = "{http://sabredav.org/ns}"
    assert root.findtext(f"{sabre}exception") == "Sabre\\DAV\\Exception\\ServiceUnavailable"
    assert root.findtext(f"{sabre}message").startswith("OC\\User\\LoginException: ")
    notes = alice.get("/index.php/apps/notes/api/v1/notes", headers=OCS_JSON)
    assert notes.status_code == 401 and "message" in notes.json()
    assert client(None).get("/status.php").status_code == 200
    admin = client("admin").get("/ocs/v2.php/cloud/users/alice", headers=OCS_JSON)
    assert admin.json()["ocs"]["data"]["enabled"] is False
    sim.disable_user("alice", enabled=True)
    assert alice.get("/ocs/v2.php/cloud/user", headers=OCS_JSON).status_code == 200
    again = alice.request("PROPFIND", "/remote.php/dav/files/alice/", headers={"Depth": "0"})
    assert again.status_code == 207


def test_enabled_is_told_to_admins_and_delegated_admins_of_the_users_setting(sim, server) -> None:
    """nextcloud/server ``AUserDataOCSController::getUserData`` gives ``enabled`` (a boolean)
    to an admin and a delegated admin of the Users setting (``IGroupManager::isDelegatedAdmin``,
    from 30), who see every user; one delegated the Webhooks setting alone sees no other user
    (``getUser``'s OCS 998), and no one sees ``enabled`` of themselves unless such an admin.
    ``NextcloudClient.user_account`` returns that data, which says why a disabled user's app
    password is refused."""
    sim.disable_user("bob")
    sim.add_user("ursula", "ursula-pw", "Ursula")
    sim.delegate_setting("ursula", "OCA\\Settings\\Settings\\Admin\\Users")
    sim.add_user("walt", "walt-pw", "Walt")
    sim.delegate_setting("walt", "OCA\\WebhookListeners\\Settings\\Admin")
    http = httpx.Client(base_url=server.url, timeout=10)
    for uid, password in (("admin", PASSWORDS["admin"]), ("ursula", "ursula-pw")):
        seen = NextcloudClient.for_account(http, uid, password).user_account("bob")
        assert seen is not None and seen["enabled"] is False and seen["id"] == "bob", uid
    walt = NextcloudClient.for_account(http, "walt", "walt-pw")
    with pytest.raises(NextcloudProtocolError):  # OCS 998: not his to see
        walt.user_account("bob")
    himself = walt.user_account("walt")
    assert himself is not None and "enabled" not in himself
    http.close()


def test_a_deleted_user_is_ocs_404_user_does_not_exist(sim, server, client) -> None:
    """``occ user:delete bob``: his logins are refused and his files are gone, without any
    file event; ``GET cloud/users/bob`` answers OCS 404 "User does not exist" (nextcloud/server
    ``AUserDataOCSController::getUserData``: ``OCSNotFoundException`` before any permission
    check), HTTP 404 under v2 and HTTP 200 under v1. A user a non-admin may not see is OCS
    998 (``UsersController::getUser``), also HTTP 404 under v2: ``user_exists`` tells the two
    apart and answers ``False`` for the first alone."""
    sim.put_file("bob", "/b.md", "# B\nbream")
    sim.share("bob", "/b.md", "alice")
    http = httpx.Client(base_url=server.url, timeout=10)
    admin = NextcloudClient.for_account(http, "admin", PASSWORDS["admin"])
    # UserDeletedEvent extends Event only (lib/public/User/Events/UserDeletedEvent.php, still
    # so with getUid @since 31): webhook_listeners refuses it (addWebhookListener, OCS 400)
    for event in (
        "OCP\\User\\Events\\UserDeletedEvent",
        "OCP\\User\\Events\\BeforeUserDeletedEvent",
    ):
        with pytest.raises(NextcloudRefused, match="not an event class compatible with webhooks"):
            admin.create_webhook(
                {"httpMethod": "POST", "uri": "http://127.0.0.1:9/x", "event": event}
            )
    alice = NextcloudClient.for_account(http, "alice", PASSWORDS["alice"])
    assert admin.user_exists("bob") is True
    with pytest.raises(NextcloudProtocolError):  # OCS 998: not hers to see, not "deleted"
        alice.user_exists("bob")
    sim.delete_user("bob")
    assert client("alice").get("/remote.php/dav/files/alice/b.md").status_code == 404
    assert admin.user_exists("bob") is False
    assert alice.user_exists("bob") is False
    v2 = client("admin").get("/ocs/v2.php/cloud/users/bob", headers=OCS_JSON)
    assert v2.status_code == 404
    assert v2.json()["ocs"]["meta"] == {
        "status": "failure",
        "statuscode": 404,
        "message": "User does not exist",
    }
    v1 = client("admin").get("/ocs/v1.php/cloud/users/bob", headers=OCS_JSON)
    assert v1.status_code == 200 and v1.json()["ocs"]["meta"]["statuscode"] == 404
    gone = httpx.get(server.url + "/ocs/v2.php/cloud/user", auth=("bob", PASSWORDS["bob"]))
    assert gone.status_code == 401
    sim.faults.set("ocs", status=503)
    with pytest.raises(NextcloudUnavailable):
        admin.user_exists("bob")
    http.close()


def test_a_trailing_slash_no_route_has_is_998(client) -> None:
    """nextcloud/server ``lib/private/Route/Router.php`` ``findMatchingRoute`` matches the path
    as given: Symfony's ``UrlMatcher`` (not a redirectable one) matches no route without a
    trailing slash to a path with one, and the router retries only a path without one, with
    ``/`` appended. So ``/cloud/user/`` is no route: 998 (the simulator answered it as
    ``/cloud/user``, so a client adding a slash passed here and failed against Nextcloud)."""
    alice = client("alice")
    for route in ("/cloud/user/", "/apps/files_sharing/api/v1/shares/"):
        resp = alice.get(f"/ocs/v2.php{route}", params={"format": "json"}, headers=OCS)
        assert resp.status_code == 404, route
        assert resp.json()["ocs"]["meta"]["statuscode"] == 998, route
    assert alice.get("/ocs/v2.php/cloud/user", headers=OCS_JSON).status_code == 200
