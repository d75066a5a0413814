"""A disabled app's routes are not registered: each entry point answers them as a path no route
matches (:meth:`ncindex.simulator.app.SimulatorApp.unregistered`), and its capability is gone."""

from __future__ import annotations

import httpx
from lxml import etree
from sim_support import DAV_NS, OCS, OCS_JSON, PASSWORDS, WEBHOOKS

SHARES = "/ocs/v2.php/apps/files_sharing/api/v1/shares"
WITH_ME = {"shared_with_me": "true", "format": "json"}


def _capabilities(client) -> dict:
    resp = client(None).get("/ocs/v2.php/cloud/capabilities", headers=OCS_JSON)
    return resp.json()["ocs"]["data"]["capabilities"]


def _meta(resp: httpx.Response) -> tuple[int, int, str]:
    meta = resp.json()["ocs"]["meta"]
    return resp.status_code, meta["statuscode"], meta["message"]


def test_the_files_sharing_app_disabled_is_an_unknown_ocs_route(sim, client) -> None:
    """Its routes are never loaded (nextcloud/server ``Router::loadRoutes``), so
    ``ocs/v1.php`` answers 998 — HTTP 404 in v2, 200 in v1 — before any controller: with
    or without credentials or ``OCS-APIRequest``; the ``files_sharing`` capability is gone."""
    sim.put_file("alice", "/doc.md", b"x")
    sim.share("alice", "/doc.md", "bob")
    bob = client("bob")
    assert len(bob.get(SHARES, params=WITH_ME, headers=OCS).json()["ocs"]["data"]) == 1
    sim.disable_app("files_sharing")
    for c, headers in ((bob, OCS), (bob, {}), (client(None), {})):
        status, code, message = _meta(c.get(SHARES, params=WITH_ME, headers=headers))
        assert (status, code) == (404, 998) and message.startswith("Invalid query")
    v1 = bob.get(SHARES.replace("v2.php", "v1.php"), params=WITH_ME, headers=OCS)
    assert _meta(v1)[:2] == (200, 998)
    assert "files_sharing" not in _capabilities(client)
    sim.enable_app("files_sharing")
    assert _capabilities(client)["files_sharing"]["api_enabled"] is True
    assert len(bob.get(SHARES, params=WITH_ME, headers=OCS).json()["ocs"]["data"]) == 1


def test_sharing_turned_off_is_ocs_404_share_api_is_disabled(sim, client) -> None:
    """Guard (the answer the simulator already gave): ``shareapi_enabled`` no with the app
    enabled — ``OCSShareAPIMiddleware::beforeController`` throws ``OCSNotFoundException``
    "Share API is disabled" for every ``ShareAPIController`` route, after the login and the
    CSRF check; the capability stays, saying ``api_enabled`` false."""
    sim.sharing_enabled = False
    bob = client("bob")
    assert _meta(bob.get(SHARES, params=WITH_ME, headers=OCS)) == (
        404,
        404,
        "Share API is disabled",
    )
    assert bob.get(SHARES, params=WITH_ME).status_code == 412  # CSRF first
    assert client(None).get(SHARES, params=WITH_ME, headers=OCS).status_code == 401
    v1 = bob.get(SHARES.replace("v2.php", "v1.php"), params=WITH_ME, headers=OCS)
    assert _meta(v1) == (200, 404, "Share API is disabled")
    assert _capabilities(client)["files_sharing"]["api_enabled"] is False


def test_webhook_listeners_and_user_status_disabled_need_neither_login_nor_csrf_header(
    sim, client
) -> None:
    sim.disable_app("webhook_listeners")
    sim.disable_app("user_status")
    for path in (WEBHOOKS, "/ocs/v2.php/apps/user_status/api/v1/user_status"):
        for c in (client("admin"), client(None)):
            assert _meta(c.get(path, params={"format": "json"}))[:2] == (404, 998)
    assert "user_status" not in _capabilities(client)


def test_a_disabled_apps_index_php_route_is_the_404_of_no_route(sim, client) -> None:
    """nextcloud/server ``OC::handleRequest`` after ``ResourceNotFoundException``: an
    ``Accept`` of exactly ``application/json`` gets an empty 404, a ``PROPFIND`` 405, the rest
    the 404 page — before the ``#[CORS]`` rule (a Bearer token is no 401) and after the
    maintenance check (503)."""
    sim.disable_app("notes")
    alice = client("alice")
    notes = "/index.php/apps/notes/api/v1/notes"
    json_404 = alice.get(notes, headers={"Accept": "application/json"})
    assert json_404.status_code == 404 and json_404.content == b""
    page = alice.get(notes, headers={"Accept": "text/html"})
    assert page.status_code == 404 and b"Page not found" in page.content
    assert alice.request("PROPFIND", notes).status_code == 405
    bearer = httpx.get(
        str(alice.base_url) + notes,
        headers={"Authorization": f"Bearer {PASSWORDS['alice']}", "Accept": "application/json"},
    )
    assert bearer.status_code == 404
    sim.maintenance = True
    assert alice.get(notes, headers={"Accept": "application/json"}).status_code == 503


def test_the_trash_bin_and_versions_disabled_leave_the_dav_root(sim, client) -> None:
    """Their DAV collections come from their ``info.xml`` (``PluginManager::populate``, for
    the installed apps only): without them the root ``SimpleCollection::getChild`` throws
    ``NotFound`` "File not found: {name} in 'root'" — after Sabre's authentication (401)."""
    fid = sim.put_file("alice", "/a.md", b"first", mtime=1000)
    sim.put_file("alice", "/a.md", b"second", mtime=2000)
    sim.delete("alice", "/a.md")
    alice = client("alice")
    trash = "/remote.php/dav/trashbin/alice/trash"
    assert alice.request("PROPFIND", trash, headers={"Depth": "1"}).status_code == 207
    sim.disable_app("files_trashbin")
    sim.disable_app("files_versions")
    gone = alice.request("PROPFIND", trash, headers={"Depth": "1"})
    assert gone.status_code == 404
    root = etree.fromstring(gone.content)
    assert root.findtext("s:exception", namespaces=DAV_NS) == "Sabre\\DAV\\Exception\\NotFound"
    assert root.findtext("s:message", namespaces=DAV_NS) == "File not found: trashbin in 'root'"
    assert client(None).request("PROPFIND", trash).status_code == 401
    version = f"/remote.php/dav/versions/alice/versions/{fid}/1000"
    moved = alice.request(
        "MOVE", version, headers={"Destination": "/remote.php/dav/versions/alice/restore/target"}
    )
    assert moved.status_code == 404 and b"File not found: versions in 'root'" in moved.content
    files = _capabilities(client)["files"]
    assert "undelete" not in files and "versioning" not in files


def _listing(c, user: str, path: str = "") -> tuple[str, list[str]]:
    """``(etag of the folder, hrefs below it)`` of a ``PROPFIND Depth: 1``."""
    resp = c.request("PROPFIND", f"/remote.php/dav/files/{user}/{path}", headers={"Depth": "1"})
    assert resp.status_code == 207, resp.text
    items = etree.fromstring(resp.content).findall("d:response", DAV_NS)
    etag = items[0].findtext("d:propstat/d:prop/d:getetag", namespaces=DAV_NS)
    return etag, [r.findtext("d:href", namespaces=DAV_NS) for r in items[1:]]


def _found(c, user: str) -> list[str]:
    """The hrefs a ``SEARCH`` of every file in ``user``'s view finds."""
    body = f"""<?xml version="1.0"?>
<d:searchrequest xmlns:d="DAV:"><d:basicsearch>
<d:select><d:prop><d:getetag/></d:prop></d:select>
<d:from><d:scope><d:href>/files/{user}</d:href><d:depth>infinity</d:depth></d:scope></d:from>
<d:where><d:like><d:prop><d:getcontenttype/></d:prop><d:literal>%</d:literal></d:like></d:where>
</d:basicsearch></d:searchrequest>"""
    resp = c.request("SEARCH", "/remote.php/dav/", content=body.encode())
    assert resp.status_code == 207, resp.text
    items = etree.fromstring(resp.content).findall("d:response", DAV_NS)
    return sorted(r.findtext("d:href", namespaces=DAV_NS) for r in items)


def test_the_files_sharing_app_disabled_unmounts_the_shares_until_enabled(sim, client) -> None:
    """files_sharing registers the mount providers of user and federated shares
    (``Application::registerMountProviders``: ``MountProvider``, ``External\\MountProvider``);
    disabled, it registers none, so ``MountProviderCollection::getMountsForUser`` gives the
    recipients no share mount: gone from bob's ``PROPFIND`` and ``SEARCH``, its file's
    ``GET`` 404, and the etag of the folder above the mount point changed (``FileInfo::
    getEtag`` combines the sub-mounts'). The owner keeps everything; enabled again, the same
    share is mounted again, at the same place (the simulator left it mounted)."""
    sim.put_file("alice", "/Proj/plan.md", b"plan")
    sim.put_file("bob", "/own.md", b"mine")
    sim.share("alice", "/Proj", "bob")
    bob = client("bob")
    before, hrefs = _listing(bob, "bob")
    assert "/remote.php/dav/files/bob/Proj/" in hrefs
    assert "/remote.php/dav/files/bob/Proj/plan.md" in _found(bob, "bob")
    sim.disable_app("files_sharing")
    off, hrefs = _listing(bob, "bob")
    assert hrefs == ["/remote.php/dav/files/bob/own.md"]
    assert off != before
    assert _found(bob, "bob") == ["/remote.php/dav/files/bob/own.md"]
    assert bob.get("/remote.php/dav/files/bob/Proj/plan.md").status_code == 404
    assert "/remote.php/dav/files/alice/Proj/plan.md" in _found(client("alice"), "alice")
    sim.enable_app("files_sharing")
    on, hrefs = _listing(bob, "bob")
    assert "/remote.php/dav/files/bob/Proj/" in hrefs and on != off
    assert bob.get("/remote.php/dav/files/bob/Proj/plan.md").content == b"plan"
