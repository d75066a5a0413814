"""Contract tests of the simulator against Nextcloud's source: one test per row of
``docs/SIMULATOR.md`` that the older per-API modules do not already cover, and the walker that
checks every row of that table names a test that exists."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import httpx
import pytest
from lxml import etree
from sim_support import DAV_NS, OCS_JSON, PASSWORDS, WEBHOOKS

from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.simulator.state import NotFoundError

ROOT = Path(__file__).resolve().parents[2]


TRASHBIN = "OCA\\Files_Trashbin\\Events\\"
TAG = "OCP\\SystemTag\\TagAssignedEvent"
CARD = "OCA\\Deck\\Event\\CardUpdatedEvent"
PROPFIND = (
    b'<?xml version="1.0"?><d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">'
    b"<d:prop><oc:fileid/><oc:permissions/><d:getetag/></d:prop></d:propfind>"
)


def _sim(**kwargs: object) -> NextcloudSimulator:
    sim = NextcloudSimulator(seed=1, **kwargs)  # type: ignore[arg-type]
    sim.add_user("alice", PASSWORDS["alice"], "Alice Adams", email="alice@example.test")
    sim.add_user("bob", PASSWORDS["bob"], "Bob Brown")
    sim.add_user("admin", PASSWORDS["admin"], "Admin", admin=True)
    return sim


def _register(client: httpx.Client, event: str) -> httpx.Response:
    body = {"httpMethod": "POST", "uri": "http://127.0.0.1:9/hook", "event": event}
    return client.post(WEBHOOKS, json=body, headers=OCS_JSON)


def _search_body(user: str, literal: str, root: str = "") -> str:
    return (
        '<?xml version="1.0"?><d:searchrequest xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">'
        "<d:basicsearch><d:select><d:prop><oc:fileid/></d:prop></d:select>"
        f"<d:from><d:scope><d:href>{root}/files/{user}</d:href><d:depth>infinity</d:depth>"
        "</d:scope></d:from><d:where><d:eq><d:prop><oc:fileid/></d:prop>"
        f"<d:literal>{literal}</d:literal></d:eq></d:where><d:orderby/></d:basicsearch>"
        "</d:searchrequest>"
    )


# ---------------------------------------------------------------------------- the walker


def test_every_row_of_simulator_md_names_an_existing_test() -> None:
    text = (ROOT / "docs" / "SIMULATOR.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "::" in line]
    assert len(rows) >= 40, "the table lost its rows"
    for row in rows:
        refs = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", row)
        assert refs, f"row names no test: {row}"
        for path, name in refs:  # read, not imported: the module's folder may not be on sys.path
            source = (ROOT / path).read_text(encoding="utf-8")
            assert re.search(rf"^def {name}\(", source, re.M), f"{path}::{name} does not exist"
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]
        assert len(cells) == 3 and all(cells), f"a row has an empty cell: {row}"


# ---------------------------------------------------------------------------- webhooks


@pytest.mark.parametrize(
    ("version", "tags_accepted"), [("30.0.14", False), ("31.0.9", False), ("32.0.3", True)]
)
def test_event_classes_accepted_by_version(version: str, tags_accepted: bool) -> None:
    sim = _sim(version=version)
    try:
        with (
            serve_simulator(sim) as srv,
            httpx.Client(base_url=srv.url, auth=("admin", PASSWORDS["admin"])) as admin,
        ):
            for event in (
                "OCP\\Files\\Events\\Node\\NodeWrittenEvent",
                TRASHBIN + "NodeRestoredEvent",
            ):
                assert _register(admin, event).status_code == 200
            wrong = _register(admin, "\\OCP\\Files\\Events\\Node\\NodeRestoredEvent")
            assert wrong.status_code == 400
            meta = wrong.json()["ocs"]["meta"]
            assert meta["statuscode"] == 400
            assert meta["message"] == (
                "OCP\\Files\\Events\\Node\\NodeRestoredEvent is not an event class compatible "
                "with webhooks"
            )
            assert _register(admin, TAG).status_code == (200 if tags_accepted else 400)
            assert _register(admin, CARD).status_code == 400  # Deck < 1.18 on 30–33
    finally:
        sim.close()


@pytest.mark.parametrize(("version", "accepted"), [("33.0.2", False), ("34.0.0", True)])
def test_node_updated_events_are_accepted_from_34(version: str, accepted: bool) -> None:
    """nextcloud/server lib/public/Files/Events/Node/NodeUpdatedEvent.php and
    BeforeNodeUpdatedEvent.php: @since 34.0.0, final classes extending AbstractNodeEvent,
    which implements IWebhookCompatibleEvent: addWebhookListener takes them from 34 on."""
    sim = _sim(version=version)
    try:
        with (
            serve_simulator(sim) as srv,
            httpx.Client(base_url=srv.url, auth=("admin", PASSWORDS["admin"])) as admin,
        ):
            for name in ("NodeUpdatedEvent", "BeforeNodeUpdatedEvent"):
                status = _register(admin, "OCP\\Files\\Events\\Node\\" + name).status_code
                assert status == (200 if accepted else 400)
    finally:
        sim.close()


def test_deck_card_events_need_deck_1_18_and_the_app_enabled() -> None:
    sim = _sim(version="34.0.0")
    try:
        with (
            serve_simulator(sim) as srv,
            httpx.Client(base_url=srv.url, auth=("admin", PASSWORDS["admin"])) as admin,
        ):
            assert sim.apps["deck"] == "1.18.3"
            assert _register(admin, CARD).status_code == 200
            sim.disable_app("deck")
            assert _register(admin, CARD).status_code == 400
            assert admin.get("/index.php/apps/deck/api/v1.0/boards").status_code == 404
            caps = admin.get("/ocs/v2.php/cloud/capabilities", headers=OCS_JSON).json()
            assert "deck" not in caps["ocs"]["data"]["capabilities"]
            sim.disable_app("webhook_listeners")
            assert admin.get(WEBHOOKS, headers=OCS_JSON).status_code == 404
    finally:
        sim.close()


@pytest.mark.parametrize(("version", "has_field"), [("32.0.3", False), ("33.0.2", True)])
def test_token_needed_only_from_33(version: str, has_field: bool) -> None:
    sim = _sim(version=version)
    try:
        info = sim.register_webhook(
            "admin",
            httpMethod="POST",
            uri="http://x.test/h",
            event="OCP\\Files\\Events\\Node\\NodeCreatedEvent",
        )
        assert ("tokenNeeded" in info) is has_field
    finally:
        sim.close()


@pytest.mark.parametrize(
    ("version", "agent"),
    [("32.0.3", "Nextcloud Server Crawler"), ("33.0.2", "Nextcloud-Server-Crawler/33.0.2")],
)
def test_webhook_user_agent_by_version(receiver, version: str, agent: str) -> None:
    sim = _sim(version=version)
    try:
        sim.register_webhook(
            "admin",
            httpMethod="POST",
            uri=receiver.url + "/h",
            event="OCP\\Files\\Events\\Node\\NodeCreatedEvent",
        )
        sim.put_file("alice", "/a.md", b"a")
        sim.flush_deliveries(timeout=5)
        (req,) = receiver.requests
        assert req.headers["User-Agent"] == agent
        assert "Content-Type" not in req.headers
    finally:
        sim.close()


def test_session_less_events_have_user_null(receiver) -> None:
    sim = _sim()
    try:
        tag = sim.create_tag("urgent")
        sim.register_webhook("admin", httpMethod="POST", uri=receiver.url + "/h", event=TAG)
        sim.put_file("alice", "/a.md", b"a")
        sim.assign_tag("alice", "/a.md", tag, session=False)
        sim.flush_deliveries(timeout=5)
        (req,) = receiver.requests
        body = json.loads(req.body)
        assert body["user"] is None
        assert body["event"]["objectIds"] == [str(sim.file_id("alice", "/a.md"))]
    finally:
        sim.close()


def test_a_users_cached_list_hides_a_new_class_for_five_minutes(receiver) -> None:
    """webhook_listeners adds its listener only for the classes getAllConfiguredEvents lists,
    cached five minutes per user; a registration clears only the list of requests booted
    without a user (its userIdFilter is empty), and Basic-auth requests boot without one."""
    now = [1_000_000.0]
    sim = _sim(clock=lambda: now[0])
    created = "OCP\\Files\\Events\\Node\\NodeCreatedEvent"
    try:
        sim.put_file("alice", "/before.md", b"x")  # her web session caches a list without it
        sim.register_webhook("admin", httpMethod="POST", uri=receiver.url + "/h", event=created)
        sim.put_file("alice", "/hidden.md", b"x")  # still her cached list: not sent
        with serve_simulator(sim) as server:
            auth = ("alice", PASSWORDS["alice"])
            put = httpx.put(f"{server.url}/remote.php/dav/files/alice/basic.md", auth=auth)
            assert put.status_code == 201
        now[0] += 299
        sim.put_file("alice", "/still.md", b"x")
        now[0] += 1
        sim.put_file("alice", "/later.md", b"x")
        sim.flush_deliveries(timeout=5)
        paths = [json.loads(r.body)["event"]["node"]["path"] for r in receiver.requests]
        assert paths == ["/alice/files/basic.md", "/alice/files/later.md"]
    finally:
        sim.close()


def test_trash_restore_classes_and_a_source_without_id(sim, client) -> None:
    fid = sim.put_file("alice", "/Docs/x.md", b"x")
    sim.delete("alice", "/Docs/x.md")
    sim.restore("alice", fid)
    before, after = sim.events[-2:]
    assert before["event"]["class"] == TRASHBIN + "BeforeNodeRestoredEvent"
    assert before["event"]["source"]["id"] == fid
    assert after["event"]["class"] == TRASHBIN + "NodeRestoredEvent"
    assert "id" not in after["event"]["source"]
    assert after["event"]["source"]["path"].startswith("/alice/files_trashbin/files/x.md.d")
    assert after["event"]["target"] == {"id": fid, "path": "/alice/files/Docs/x.md"}


def test_on_nextcloud_30_the_restore_event_names_no_node() -> None:
    """Before nextcloud/server#53752 (not in 30) files_trashbin's Trashbin::getNodeForPath
    looked the restored target up in the trash folder: a NonExistingFile without id; the
    gone source got a path in the files view."""
    sim = NextcloudSimulator(version="30.0.14", seed=1)
    try:
        sim.add_user("alice", "alice-pw")
        fid = sim.put_file("alice", "/Docs/x.md", b"x")
        sim.delete("alice", "/Docs/x.md")
        sim.restore("alice", fid)
        before, after = sim.events[-2:]
        assert before["event"]["source"]["id"] == fid
        assert before["event"]["target"] == {"path": "/alice/files/Docs/x.md"}
        assert after["event"]["target"] == {"path": "/alice/files/Docs/x.md"}
        assert re.fullmatch(r"/alice/files/x\.md\.d\d+", after["event"]["source"]["path"])
    finally:
        sim.close()


# ---------------------------------------------------------------------------- auth


def test_app_password_only_with_its_login_name() -> None:
    sim = NextcloudSimulator(seed=1)
    sim.add_user("u1001", "tok-1", "Carol", login_name="carol@example.test")
    try:
        with serve_simulator(sim) as srv:
            for login, status in (
                ("carol@example.test", 200),
                ("CAROL@Example.test", 200),  # mb_strtolower on both sides
                ("u1001", 401),  # validateTokenLoginName: the uid is not the token's login
            ):
                resp = httpx.get(
                    srv.url + "/ocs/v2.php/cloud/user", auth=(login, "tok-1"), headers=OCS_JSON
                )
                assert resp.status_code == status, login
                if status == 200:
                    assert resp.json()["ocs"]["data"]["id"] == "u1001"
            dav = httpx.request(
                "PROPFIND",
                srv.url + "/remote.php/dav/files/u1001/",
                auth=("carol@example.test", "tok-1"),
                headers={"Depth": "0"},
            )
            assert dav.status_code == 207  # files are under the uid, whatever the login
    finally:
        sim.close()


# ---------------------------------------------------------------------------- WebDAV


def test_web_root_prefixes_every_route_and_href() -> None:
    sim = _sim(web_root="/nextcloud")
    fid = sim.put_file("alice", "/Docs/a b.md", b"a")
    tag = sim.create_tag("red")
    sim.assign_tag("alice", "/Docs/a b.md", tag)
    try:
        with (
            serve_simulator(sim) as srv,
            httpx.Client(base_url=srv.url, auth=("alice", PASSWORDS["alice"])) as alice,
        ):
            assert srv.url.endswith("/nextcloud")
            bare = httpx.get(srv.origin + "/status.php")
            assert bare.status_code == 404
            assert alice.get("/status.php").status_code == 200
            listed = alice.request(
                "PROPFIND", "/remote.php/dav/files/alice/Docs", headers={"Depth": "1"}
            )
            hrefs = etree.fromstring(listed.content).findall(".//d:href", DAV_NS)
            assert [h.text for h in hrefs] == [
                "/nextcloud/remote.php/dav/files/alice/Docs/",
                "/nextcloud/remote.php/dav/files/alice/Docs/a%20b.md",
            ]
            found = alice.request(
                "SEARCH",
                "/remote.php/dav/",
                content=_search_body("alice", str(fid)),
                headers={"Content-Type": "text/xml"},
            )
            assert etree.fromstring(found.content).findtext(".//d:href", namespaces=DAV_NS) == (
                "/nextcloud/remote.php/dav/files/alice/Docs/a%20b.md"
            )
            relations = alice.request(
                "PROPFIND",
                f"/remote.php/dav/systemtags-relations/files/{fid}",
                headers={"Depth": "1"},
            )
            assert f"/nextcloud/remote.php/dav/systemtags-relations/files/{fid}/{tag}" in (
                relations.text
            )
            moved = alice.request(
                "MOVE",
                "/remote.php/dav/files/alice/Docs/a%20b.md",
                headers={"Destination": srv.url + "/remote.php/dav/files/alice/b.md"},
            )
            assert moved.status_code == 201
            assert sim.path_of("alice", fid) == "/b.md"
    finally:
        sim.close()


def test_permissions_follow_dav_util(sim, client) -> None:
    sim.put_file("alice", "/Own/f.md", b"x")
    rw = sim.share("alice", "/Own", "bob")
    sim.put_file("alice", "/Ro/g.md", b"y")
    ro = sim.share("alice", "/Ro", "bob", permissions=1)  # read only, no reshare

    def letters(user: str, path: str) -> str:
        resp = client(user).request(
            "PROPFIND",
            f"/remote.php/dav/files/{user}{path}",
            headers={"Depth": "0"},
            content=PROPFIND,
        )
        return etree.fromstring(resp.content).findtext(".//oc:permissions", namespaces=DAV_NS)

    assert letters("alice", "/Own") == "RGDNVCK"
    assert letters("alice", "/Own/f.md") == "RGDNVW"
    # S without M: FileInfo::isMounted is !$isHome && !$this->isShared()
    assert letters("bob", rw) == "SRGDNVCK"
    assert letters("bob", f"{rw}/f.md") == "SRGDNVW"
    assert letters("bob", f"{ro}/g.md") == "SG"  # no R: the share has no share permission
    sim.allow_resharing = False  # shareapi_allow_resharing = no
    assert letters("bob", f"{rw}/f.md") == "SGDNVW"
    assert letters("alice", "/Own/f.md") == "RGDNVW"  # the owner keeps it


def test_search_fileid_reads_the_leading_digits(sim, client) -> None:
    fid = sim.put_file("alice", "/a.md", b"a")
    resp = client("alice").put("/remote.php/dav/files/alice/b.md", content=b"b")
    formatted = resp.headers["OC-FileId"]
    assert re.fullmatch(r"0{0,7}\d+ocsim0a1b2c3", formatted)  # DavUtil::getDavFileId
    for literal, expected in (
        (f"{fid:08d}{sim.instance_id}", fid),
        (formatted, None),
        ("x1", None),
    ):
        found = client("alice").request(
            "SEARCH",
            "/remote.php/dav/",
            content=_search_body("alice", literal),
            headers={"Content-Type": "text/xml"},
        )
        ids = [
            int(e.text)
            for e in etree.fromstring(found.content).iter("{http://owncloud.org/ns}fileid")
        ]
        if expected is not None:
            assert ids == [expected]
        elif literal == formatted:
            assert ids == [sim.file_id("alice", "/b.md")]
        else:
            assert ids == []


# ---------------------------------------------------------------------------- sharing


def test_sharing_api_create_list_get_delete_and_refusals(sim, client) -> None:
    sim.put_file("alice", "/Proj/a.md", b"a")
    alice, bob = client("alice"), client("bob")
    base = "/ocs/v2.php/apps/files_sharing/api/v1/shares"
    caps = alice.get("/ocs/v2.php/cloud/capabilities", headers=OCS_JSON).json()
    assert caps["ocs"]["data"]["capabilities"]["files_sharing"]["api_enabled"] is True
    made = alice.post(
        base,
        json={"path": "/Proj", "shareType": 0, "shareWith": "bob", "permissions": 1},
        headers=OCS_JSON,
    )
    assert made.status_code == 200, made.text
    share = made.json()["ocs"]["data"]
    assert share["id"] == str(int(share["id"]))  # IShare::getId is a string
    assert (share["share_type"], share["share_with"], share["permissions"]) == (0, "bob", 1)
    assert share["path"] == "/Proj" and share["item_type"] == "folder"
    assert sim.path_of("bob", sim.file_id("alice", "/Proj/a.md")) == "/Proj/a.md"
    mine = alice.get(base, headers=OCS_JSON).json()["ocs"]["data"]
    assert [s["id"] for s in mine] == [share["id"]]
    theirs = bob.get(base, params={"shared_with_me": "true"}, headers=OCS_JSON).json()
    assert [s["id"] for s in theirs["ocs"]["data"]] == [share["id"]]
    one = alice.get(f"{base}/{share['id']}", headers=OCS_JSON).json()["ocs"]["data"]
    assert isinstance(one, list) and one[0]["id"] == share["id"]
    for body, message in (
        ({"shareType": 0, "shareWith": "bob"}, "Please specify a file or folder path"),
        (
            {"path": "/nope", "shareType": 0, "shareWith": "bob"},
            "Wrong path, file/folder does not exist",
        ),
        ({"path": "/Proj", "shareType": 0, "shareWith": "zed"}, "Please specify a valid user"),
    ):
        refused = alice.post(base, json=body, headers=OCS_JSON)
        assert refused.status_code == 404
        assert refused.json()["ocs"]["meta"]["message"] == message
    assert alice.delete(f"{base}/{share['id']}", headers=OCS_JSON).status_code == 200
    assert sim.path_of("bob", sim.file_id("alice", "/Proj/a.md")) is None
    gone = alice.get(f"{base}/{share['id']}", headers=OCS_JSON)
    assert gone.status_code == 404
    assert gone.json()["ocs"]["meta"]["message"] == "Wrong share ID, share does not exist"


def test_shared_with_me_lists_each_share_at_its_mount_in_the_recipients_view(sim, client) -> None:
    """What ncindex's share poll reads (ncindex.sync.shares): ``getSharedWithMe`` lists the
    shares whose recipient is the caller, not their own, each ``formatShare``'d from the
    recipient's node: ``path`` where it is mounted for them (a clash renamed), ``item_source``
    its file id, ``item_type``, ``file_target`` the share's target, and the mount's
    ``is-mount-root``/``mount-type``."""
    sim.put_file("alice", "/Proj/a.md", b"a")
    sim.put_file("alice", "/Docs/b.md", b"b")
    sim.put_file("bob", "/Proj/own.md", b"o")  # bob's own /Proj: alice's is mounted beside it
    folder = sim.share("alice", "/Proj", "bob")
    single = sim.share("alice", "/Docs/b.md", "bob")
    sim.share("bob", "/Proj/own.md", "alice")  # bob's own share: not one made with him
    base = "/ocs/v2.php/apps/files_sharing/api/v1/shares"
    listed = client("bob").get(base, params={"shared_with_me": "true"}, headers=OCS_JSON)
    shares = {s["file_target"]: s for s in listed.json()["ocs"]["data"]}
    assert folder != "/Proj" and sorted(shares) == sorted([folder, single])
    proj, b = shares[folder], shares[single]
    assert (proj["path"], proj["item_type"]) == (folder, "folder")
    assert proj["item_source"] == sim.file_id("alice", "/Proj")
    assert (b["path"], b["item_type"]) == (single, "file")
    assert b["item_source"] == sim.file_id("alice", "/Docs/b.md")
    assert sim.path_of("bob", b["item_source"]) == single
    assert all(s["is-mount-root"] is True and s["mount-type"] == "shared" for s in shares.values())
    (own,) = (
        client("alice").get(base, params={"path": "/Proj"}, headers=OCS_JSON).json()["ocs"]["data"]
    )
    assert (own["path"], own["is-mount-root"], own["mount-type"]) == ("/Proj", False, "")


def test_a_recipient_moving_a_mount_or_a_folder_above_it_moves_the_share(sim, client) -> None:
    """A recipient moves a share's mount point like any node (``View::rename`` →
    ``SharedMount::moveMount``), or a folder of theirs above it (files_sharing's
    ``Updater::renameChildren`` moves each mount below): one ``NodeRenamedEvent`` for what
    they moved, and the shares API lists the share at its new ``path`` and ``file_target``."""
    fid = sim.put_file("alice", "/Proj/a.md", b"a")
    sim.mkdir("bob", "/Shares")
    assert sim.share("alice", "/Proj", "bob", "/Shares/Proj") == "/Shares/Proj"
    base = "/ocs/v2.php/apps/files_sharing/api/v1/shares"

    def listed() -> list[tuple[str, str]]:
        answer = client("bob").get(base, params={"shared_with_me": "true"}, headers=OCS_JSON)
        return [(s["path"], s["file_target"]) for s in answer.json()["ocs"]["data"]]

    sim.move("bob", "/Shares/Proj", "/Shares/Alice's")  # the mount point itself
    assert sim.path_of("bob", fid) == "/Shares/Alice's/a.md"
    assert listed() == [("/Shares/Alice's", "/Shares/Alice's")]
    events = len(sim.events)
    sim.move("bob", "/Shares", "/Old")  # a folder of bob's above it
    assert sim.path_of("bob", fid) == "/Old/Alice's/a.md"
    assert listed() == [("/Old/Alice's", "/Old/Alice's")]
    assert sim.path_of("alice", fid) == "/Proj/a.md"
    renamed = [e["event"]["class"].rsplit("\\", 1)[1] for e in sim.events[events:]]
    assert renamed == ["BeforeNodeRenamedEvent", "NodeRenamedEvent"]


def test_a_view_only_share_is_listed_readable_and_its_bytes_refused(sim, client) -> None:
    sim.put_file("alice", "/Proj/a.md", b"a")
    alice, bob = client("alice"), client("bob")
    base = "/ocs/v2.php/apps/files_sharing/api/v1/shares"
    view_only = '[{"scope":"permissions","key":"download","value":false}]'
    made = alice.post(
        base,
        json={"path": "/Proj", "shareType": 0, "shareWith": "bob", "attributes": view_only},
        headers=OCS_JSON,
    )
    assert made.status_code == 200, made.text
    assert made.json()["ocs"]["data"]["attributes"] == view_only  # formatShare: json_encode
    prop = (
        b'<?xml version="1.0"?><d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns"'
        b' xmlns:nc="http://nextcloud.org/ns"><d:prop><oc:permissions/><nc:share-attributes/>'
        b"</d:prop></d:propfind>"
    )
    for user, attributes in (("bob", view_only), ("alice", "[]")):
        listed = client(user).request(
            "PROPFIND",
            f"/remote.php/dav/files/{user}/Proj/a.md",
            headers={"Depth": "0"},
            content=prop,
        )
        root = etree.fromstring(listed.content)
        assert "G" in root.findtext(".//oc:permissions", namespaces=DAV_NS)
        found = root.findtext(".//{http://nextcloud.org/ns}share-attributes")
        assert found == attributes  # FilesPlugin: json_encode(Node::getShareAttributes())
    refused = bob.get("/remote.php/dav/files/bob/Proj/a.md")  # ViewOnlyPlugin::checkViewOnly
    assert refused.status_code == 403
    sabre = {"s": "http://sabredav.org/ns"}
    root = etree.fromstring(refused.content)
    assert root.findtext("s:exception", namespaces=sabre).endswith("Sabre\\Exception\\Forbidden")
    assert alice.get("/remote.php/dav/files/alice/Proj/a.md").content == b"a"
    share_id = made.json()["ocs"]["data"]["id"]
    bad = alice.put(f"{base}/{share_id}", json={"attributes": "{"}, headers=OCS_JSON)
    assert bad.status_code == 400
    assert bad.json()["ocs"]["meta"]["message"] == 'Invalid share attributes provided: "{"'
    downloadable = '[{"scope":"permissions","key":"download","value":true}]'
    put = alice.put(f"{base}/{share_id}", json={"attributes": downloadable}, headers=OCS_JSON)
    assert put.json()["ocs"]["data"]["attributes"] == downloadable
    assert bob.get("/remote.php/dav/files/bob/Proj/a.md").content == b"a"


def test_a_group_folder_is_mounted_for_each_member_and_owned_by_whoever_looks(sim, client) -> None:
    sim.group_folder("Team", ["alice", "bob"])
    file_id = sim.put_file("alice", "/Team/plan.md", b"plan")
    prop = (
        b'<?xml version="1.0"?><d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns"'
        b' xmlns:nc="http://nextcloud.org/ns"><d:prop><oc:fileid/><oc:permissions/>'
        b"<oc:owner-id/><nc:mount-type/></d:prop></d:propfind>"
    )
    for user in ("alice", "bob"):
        listed = client(user).request(
            "PROPFIND",
            f"/remote.php/dav/files/{user}/Team/plan.md",
            headers={"Depth": "0"},
            content=prop,
        )
        root = etree.fromstring(listed.content)
        assert root.findtext(".//oc:fileid", namespaces=DAV_NS) == str(file_id)
        # M, not S: FileInfo::isMounted (a GroupMountPoint is neither home nor shared)
        assert root.findtext(".//oc:permissions", namespaces=DAV_NS) == "RMGDNVW"
        # GroupFolderStorage::getOwner: the mount's user
        assert root.findtext(".//oc:owner-id", namespaces=DAV_NS) == user
        assert root.findtext(".//{http://nextcloud.org/ns}mount-type") == "group"
    shares = "/ocs/v2.php/apps/files_sharing/api/v1/shares"
    theirs = client("bob").get(shares, params={"shared_with_me": "true"}, headers=OCS_JSON)
    assert theirs.json()["ocs"]["data"] == []  # no files_sharing share
    sim.group_folder("Team", ["bob"])
    assert sim.path_of("alice", file_id) is None
    assert sim.path_of("bob", file_id) == "/Team/plan.md"


def test_an_external_storage_is_mounted_and_a_file_put_outside_changes_no_etag(sim, client) -> None:
    """files_external: an ExternalMountPoint (getMountType ``external``), M in the
    permissions; a file written on the storage outside Nextcloud is listed and changes no
    etag above it (View::getFileInfo takes the mount root's etag from the file cache)."""
    sim.external_storage("Ext", ["alice"])
    sim.mkdir("alice", "/Ext/In")
    prop = (
        b'<?xml version="1.0"?><d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns"'
        b' xmlns:nc="http://nextcloud.org/ns"><d:prop><d:getetag/><oc:permissions/>'
        b"<nc:mount-type/></d:prop></d:propfind>"
    )

    def listing(path: str, depth: str) -> etree._Element:
        answer = client("alice").request(
            "PROPFIND",
            f"/remote.php/dav/files/alice{path}",
            headers={"Depth": depth},
            content=prop,
        )
        return etree.fromstring(answer.content)

    root = listing("/Ext", "0")
    assert root.findtext(".//oc:permissions", namespaces=DAV_NS) == "RMGDNVCK"
    assert root.findtext(".//{http://nextcloud.org/ns}mount-type") == "external"
    etags = [listing(p, "0").findtext(".//d:getetag", namespaces=DAV_NS) for p in ("/", "/Ext")]
    file_id = sim.add_unnoticed("alice", "/Ext/In/new.md", "# New")
    assert [
        listing(p, "0").findtext(".//d:getetag", namespaces=DAV_NS) for p in ("/", "/Ext")
    ] == etags
    assert sim.path_of("alice", file_id) == "/Ext/In/new.md"
    with pytest.raises(NotFoundError):
        sim.add_unnoticed("alice", "/Docs/new.md", "# Not external")


def test_a_federated_share_is_shared_not_mounted_and_says_it_is_federated(sim, client) -> None:
    """files_sharing External\\Mount: an ISharedMountPoint (S, not M), mount type shared;
    nc:is-federated true (FilesPlugin handleGetProperties; written "1", a guess)."""
    sim.federated_share("Remote", "alice")
    prop = (
        b'<?xml version="1.0"?><d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns"'
        b' xmlns:nc="http://nextcloud.org/ns"><d:prop><oc:permissions/><nc:mount-type/>'
        b"<nc:is-federated/></d:prop></d:propfind>"
    )
    answer = client("alice").request(
        "PROPFIND", "/remote.php/dav/files/alice/Remote", headers={"Depth": "0"}, content=prop
    )
    root = etree.fromstring(answer.content)
    assert root.findtext(".//oc:permissions", namespaces=DAV_NS) == "SRGDNVCK"
    assert root.findtext(".//{http://nextcloud.org/ns}mount-type") == "shared"
    assert root.findtext(".//{http://nextcloud.org/ns}is-federated") == "1"


def _searched(alice: httpx.Client, fid: int) -> str | None:
    """The href of alice's SEARCH for the file ``fid`` by id, ``None`` when it finds none."""
    answer = alice.request(
        "SEARCH",
        "/remote.php/dav/",
        content=_search_body("alice", str(fid)),
        headers={"Content-Type": "text/xml"},
    )
    return etree.fromstring(answer.content).findtext(".//d:href", namespaces=DAV_NS)


def test_a_federated_share_nextcloud_removes_leaves_the_listing_and_search(sim, client) -> None:
    """External/Storage.php checkStorageAvailability: a remote server that says the share is
    gone (or refuses it) gets it removed (Manager::removeShare, removeMount); while its
    server is only away the share is listed, a PROPFIND of it answers 503, and SEARCH still
    finds its files from the file cache (the Availability wrapper does not wrap getCache)."""
    sim.federated_share("Remote", "alice")
    fid = sim.put_file("alice", "/Remote/minutes.md", b"walrus")
    alice = client("alice")

    def listed() -> list[str]:
        answer = alice.request("PROPFIND", "/remote.php/dav/files/alice", headers={"Depth": "1"})
        return [h.text for h in etree.fromstring(answer.content).findall(".//d:href", DAV_NS)]

    sim.make_storage_unavailable("alice", "/Remote")
    assert "/remote.php/dav/files/alice/Remote/" in listed()
    away = alice.request("PROPFIND", "/remote.php/dav/files/alice/Remote", headers={"Depth": "0"})
    assert away.status_code == 503 and b"Storage is temporarily not available" in away.content
    assert _searched(alice, fid) == "/remote.php/dav/files/alice/Remote/minutes.md"
    sim.remove_federated_share("Remote")
    assert "/remote.php/dav/files/alice/Remote/" not in listed()
    assert _searched(alice, fid) is None


def test_a_failed_external_storage_answers_no_search(sim, client) -> None:
    """files_external mounts a storage it has marked unavailable as a FailedStorage until
    its next recheck (ConfigAdapter::getAvailableStorages): FailedCache::searchQuery answers
    nothing, so SEARCH leaves its files out; a PROPFIND of it answers 503 as before."""
    sim.external_storage("Ext", ["alice"])
    fid = sim.put_file("alice", "/Ext/minutes.md", b"walrus")
    alice = client("alice")

    sim.make_storage_unavailable("alice", "/Ext", failed=True)
    away = alice.request("PROPFIND", "/remote.php/dav/files/alice/Ext", headers={"Depth": "0"})
    assert away.status_code == 503
    assert _searched(alice, fid) is None
    sim.make_storage_unavailable("alice", "/Ext", unavailable=False)
    assert _searched(alice, fid) == "/remote.php/dav/files/alice/Ext/minutes.md"


def test_user_status_of_the_current_user(sim, client) -> None:
    resp = client("alice").get("/ocs/v2.php/apps/user_status/api/v1/user_status", headers=OCS_JSON)
    assert resp.status_code == 200
    data = resp.json()["ocs"]["data"]
    assert (data["userId"], data["status"]) == ("alice", "online")


# ---------------------------------------------------------------------------- Deck


def test_deck_deleted_board_cards_are_403_and_boards_etag(sim, client) -> None:
    board = sim.deck_create_board("alice", "B")
    stack = sim.deck_create_stack("alice", board, "S")
    card = sim.deck_create_card("alice", stack, "c")
    api = "/index.php/apps/deck/api/v1.0"
    alice = client("alice")
    listed = alice.get(f"{api}/boards", headers={"OCS-APIRequest": "true"})
    boards = listed.json()
    expected = hashlib_md5(
        json.dumps([f"{b['id']}-{b['ETag']}" for b in boards], separators=(",", ":"))
    )
    assert listed.headers["ETag"] == f'"{expected}"'
    card_url = f"{api}/boards/{board}/stacks/{stack}/cards/{card}"
    assert alice.get(card_url).status_code == 200
    sim.deck_delete_board("alice", board)
    refused = alice.get(card_url)
    assert refused.status_code == 403
    assert refused.json() == {"status": 403, "message": "Permission denied"}
    assert alice.get(f"{api}/boards/{board}/stacks").status_code == 403


def hashlib_md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()
