"""Deck and News APIs, card webhooks behind the Deck ≥ 1.18 switch, and fault switches."""

from __future__ import annotations

import hashlib
import json
import time

import httpx
import pytest
from sim_support import PASSWORDS

from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.simulator.xmlutil import http_date

DECK = "/index.php/apps/deck/api/v1.0"
NEWS = "/index.php/apps/news/api/v1-3"
#: A card as the REST API answers it: nextcloud/deck lib/Model/CardDetails.php jsonSerialize
#: (the entity, lib/Db/Card.php declaration order, without notified, descriptionPrev,
#: relatedStack and relatedBoard; then overdue and referenceData).
CARD_FIELDS = [
    "id",
    "title",
    "description",
    "color",
    "stackId",
    "type",
    "lastModified",
    "lastEditor",
    "createdAt",
    "labels",
    "assignedUsers",
    "attachments",
    "attachmentCount",
    "owner",
    "order",
    "archived",
    "done",
    "duedate",
    "startdate",
    "deletedAt",
    "commentsUnread",
    "commentsCount",
    "dependentCards",
    "ETag",
    "overdue",
    "referenceData",
]
#: The entity itself (RelationalEntity::jsonSerialize), as a card event carries it.
CARD_ENTITY_FIELDS = [
    *CARD_FIELDS[:4],
    "descriptionPrev",
    *CARD_FIELDS[4:19],
    "notified",
    *CARD_FIELDS[19:23],
    "relatedStack",
    "relatedBoard",
    "ETag",
]


def test_deck_boards_stacks_cards_and_errors(sim, client) -> None:
    board = sim.deck_create_board("alice", "Roadmap")
    todo = sim.deck_create_stack("alice", board, "To do", order=0)
    empty = sim.deck_create_stack("alice", board, "Empty", order=1)
    card = sim.deck_create_card("alice", todo, "Ship v2", "- [ ] docs", duedate=1768899600)
    alice, bob = client("alice"), client("bob")
    boards = alice.get(f"{DECK}/boards")
    assert boards.status_code == 200 and boards.headers["etag"].startswith('"')
    assert [b["title"] for b in boards.json()] == ["Roadmap"]
    assert boards.json()[0]["owner"]["uid"] == "alice"
    stacks = alice.get(f"{DECK}/boards/{board}/stacks").json()
    assert [s["id"] for s in stacks] == [todo, empty]
    assert "cards" in stacks[0] and "cards" not in stacks[1]
    got = alice.get(f"{DECK}/boards/{board}/stacks/{todo}/cards/{card}")
    data = got.json()
    assert list(data) == CARD_FIELDS
    alice_user = {"primaryKey": "alice", "uid": "alice", "displayname": "Alice Adams", "type": 0}
    assert data["owner"] == alice_user  # CardMapper::mapOwner resolves it
    assert data["overdue"] == 3  # the due date is in the past
    assert data["duedate"] == "2026-01-20T09:00:00+00:00"
    assert data["ETag"] == hashlib.md5(str(data["lastModified"]).encode()).hexdigest()
    assert got.headers["etag"] == f'"{data["ETag"]}"'
    cached = alice.get(
        f"{DECK}/boards/{board}/stacks/{todo}/cards/{card}",
        headers={"If-None-Match": got.headers["etag"]},
    )
    assert cached.status_code == 304
    denied = {"status": 403, "message": "Permission denied"}
    assert bob.get(f"{DECK}/boards/{board}/stacks/{todo}/cards/{card}").json() == denied
    assert bob.get(f"{DECK}/boards/{board}").status_code == 403
    assert alice.get(f"{DECK}/boards/{board}/stacks/{todo}/cards/9999").json() == denied
    sim.deck_share_board("alice", board, "bob")
    assert bob.get(f"{DECK}/boards/{board}/stacks/{todo}/cards/{card}").status_code == 200
    sim.deck_unshare_board("alice", board, "bob")
    assert bob.get(f"{DECK}/boards/{board}/stacks/{todo}/cards/{card}").status_code == 403
    sim.deck_delete_card("alice", card)
    deleted = alice.get(f"{DECK}/boards/{board}/stacks/{todo}/cards/{card}")
    assert deleted.status_code == 403
    assert deleted.json() == {"status": 403, "message": "Card is deleted"}
    assert "cards" not in alice.get(f"{DECK}/boards/{board}/stacks").json()[0]
    missing_title = alice.post(f"{DECK}/boards", json={"title": ""})
    assert missing_title.json() == {"status": 400, "message": "title must be provided"}


def test_deck_group_share(sim, client) -> None:
    """PermissionService::userCan grants a group's members; the board lists them in users
    (findUsers) and the group's ACL entry carries a Group participant (type 1)."""
    sim.deck_set_group("crew", {"bob"})
    board = sim.deck_create_board("alice", "Roadmap")
    todo = sim.deck_create_stack("alice", board, "To do")
    card = sim.deck_create_card("alice", todo, "Ship")
    bob = client("bob")
    assert bob.get(f"{DECK}/boards/{board}/stacks/{todo}/cards/{card}").status_code == 403
    sim.deck_share_board("alice", board, "crew", group=True, edit=False)
    assert bob.get(f"{DECK}/boards/{board}/stacks/{todo}/cards/{card}").status_code == 200
    data = bob.get(f"{DECK}/boards/{board}").json()
    (entry,) = data["acl"]
    assert entry["type"] == 1
    assert entry["participant"] == {
        "primaryKey": "crew", "uid": "crew", "displayname": "crew", "type": 1
    }  # fmt: skip
    assert [u["uid"] for u in data["users"]] == ["alice", "bob"]
    assert data["permissions"]["PERMISSION_EDIT"] is False
    assert [b["id"] for b in bob.get(f"{DECK}/boards").json()] == [board]


def test_deck_if_modified_since(sim, client) -> None:
    board = sim.deck_create_board("alice", "B")
    stack = sim.deck_create_stack("alice", board, "S")
    sim.deck_create_card("alice", stack, "old")
    alice = client("alice")
    future = http_date(time.time() + 3600)
    assert alice.get(f"{DECK}/boards", headers={"If-Modified-Since": future}).json() == []
    stacks = alice.get(f"{DECK}/boards/{board}/stacks", headers={"If-Modified-Since": future})
    assert "cards" not in stacks.json()[0]
    past = http_date(0)
    assert len(alice.get(f"{DECK}/boards", headers={"If-Modified-Since": past}).json()) == 1
    bad = alice.get(f"{DECK}/boards", headers={"If-Modified-Since": "yesterday"})
    assert bad.status_code == 500
    assert bad.json() == {"status": 500, "message": "Invalid If-Modified-Since header provided."}


def test_deck_card_events_only_with_deck_webhooks(receiver) -> None:
    for enabled in (False, True):
        sim = NextcloudSimulator(deck_webhooks=enabled)
        try:
            sim.add_user("admin", "admin-pw", admin=True)
            sim.add_user("alice", "alice-pw", "Alice Adams")
            with serve_simulator(sim) as srv:
                admin = httpx.Client(base_url=srv.url, auth=("admin", "admin-pw"))
                params = {
                    "httpMethod": "POST",
                    "uri": receiver.url,
                    "event": "OCA\\Deck\\Event\\CardUpdatedEvent",
                }
                resp = admin.post(
                    "/ocs/v2.php/apps/webhook_listeners/api/v1/webhooks",
                    json=params,
                    headers={"OCS-APIRequest": "true", "Accept": "application/json"},
                )
                assert resp.status_code == (200 if enabled else 400)
                admin.close()
            board = sim.deck_create_board("alice", "B")
            stack = sim.deck_create_stack("alice", board, "S")
            card = sim.deck_create_card("alice", stack, "c")
            sim.deck_archive_card("alice", card)
            sim.flush_deliveries(timeout=5)
        finally:
            sim.close()
    (req,) = receiver.requests
    body = json.loads(req.body)
    assert body["event"]["class"] == "OCA\\Deck\\Event\\CardUpdatedEvent"
    assert body["event"]["card"]["id"] == card and body["event"]["card"]["archived"] is True
    # CardService::archive dispatches the entity read by CardMapper::find (owner resolved)
    assert list(body["event"]["card"]) == CARD_ENTITY_FIELDS
    assert body["event"]["card"]["owner"]["uid"] == "alice"


def test_a_card_too_long_for_a_webhook_job_fails_the_edit_and_is_not_sent(receiver) -> None:
    """nextcloud/server lib/private/BackgroundJob/JobList.php add refuses a job argument over
    4000 characters of json_encode (the card JSON is the event's), nothing catches it
    (nextcloud/server#58912), and nextcloud/deck lib/Middleware/ExceptionMiddleware.php
    afterException answers the Deck API 500 with a request id: the card is saved, the edit
    reported failed, no event sent."""
    sim = NextcloudSimulator(deck_webhooks=True)
    try:
        sim.add_user("alice", "alice-pw", "Alice Adams")
        sim.register_webhook(
            "admin",
            httpMethod="POST",
            uri=receiver.url,
            event="OCA\\Deck\\Event\\CardUpdatedEvent",
        )
        board = sim.deck_create_board("alice", "B")
        stack = sim.deck_create_stack("alice", board, "S")
        card = sim.deck_create_card("alice", stack, "c")
        url = f"{DECK}/boards/{board}/stacks/{stack}/cards/{card}"
        with serve_simulator(sim) as srv:
            alice = httpx.Client(base_url=srv.url, auth=("alice", "alice-pw"))
            fine = alice.put(url, json={"title": "c", "description": "x" * 3000})
            long = alice.put(url, json={"title": "c", "description": "x" * 4000})
            got = alice.get(url).json()
            alice.close()
        sim.flush_deliveries(timeout=5)
    finally:
        sim.close()
    assert fine.status_code == 200
    assert long.status_code == 500
    answer = long.json()
    assert list(answer) == ["status", "message", "requestId"] and answer["status"] == 500
    assert f'request ID "{answer["requestId"]}"' in answer["message"]
    assert got["description"] == "x" * 4000
    (req,) = receiver.requests
    assert json.loads(req.body)["event"]["card"]["description"] == "x" * 3000


def test_deck_deleted_stack_leaves_the_board_but_its_cards_still_answer(sim, client) -> None:
    board = sim.deck_create_board("alice", "Roadmap")
    todo = sim.deck_create_stack("alice", board, "To do", order=0)
    done = sim.deck_create_stack("alice", board, "Done", order=1)
    card = sim.deck_create_card("alice", done, "Shipped")
    alice = client("alice")
    stacks = alice.get(f"{DECK}/boards/{board}").json()["stacks"]
    assert [s["id"] for s in stacks] == [todo, done]
    assert list(stacks[0]) == ["id", "title", "boardId", "deletedAt", "lastModified", "order",
                               "isDoneColumn", "ETag"]  # fmt: skip
    listed = alice.get(f"{DECK}/boards").json()[0]
    assert listed["stacks"] == [] and listed["users"] == []  # no details
    sim.deck_share_board("alice", board, "bob")
    listed = alice.get(f"{DECK}/boards").json()[0]
    assert [a["participant"]["uid"] for a in listed["acl"]] == ["bob"]  # acl either way
    sim.deck_delete_stack("alice", done)
    assert [s["id"] for s in alice.get(f"{DECK}/boards/{board}").json()["stacks"]] == [todo]
    assert [s["id"] for s in alice.get(f"{DECK}/boards/{board}/stacks").json()] == [todo]
    # StackService::delete leaves the cards alone and the card GET looks only at the card
    got = alice.get(f"{DECK}/boards/{board}/stacks/{done}/cards/{card}")
    assert got.status_code == 200 and got.json()["deletedAt"] == 0
    assert alice.get(f"{DECK}/boards/0/stacks/{done}").json()["deletedAt"] > 0


def test_news_items_defaults_casts_and_hashes(sim, client) -> None:
    """nextcloud/news ItemApiController::index defaults (type 3) and refusals, the
    AppFramework's casts of bool and int parameters (Dispatcher::executeController), and
    Item::computeFingerprint / computeContentHash."""
    feed = sim.news_add_feed("alice", "https://blog.example.test/feed", "Blog")
    other = sim.news_add_feed("alice", "https://other.example.test/rss", "Other")
    first = sim.news_add_item("alice", feed, "Post", "<p>a</p>", author="Jo")
    second = sim.news_add_item("alice", other, "Elsewhere", "<p>x</p>")
    sim.news_mark_read("alice", first)
    alice = client("alice")
    everything = alice.get(f"{NEWS}/items").json()["items"]
    assert [i["id"] for i in everything] == [second, first]  # type=3, read ones included
    assert [i["id"] for i in alice.get(f"{NEWS}/items", params={"getRead": "False"}).json()[
        "items"]] == [second, first]  # only the string "false" is false  # fmt: skip
    assert [i["id"] for i in alice.get(f"{NEWS}/items", params={"getRead": "0"}).json()[
        "items"]] == [second]  # fmt: skip
    refused = {"message": "Setting getRead on an already filtered list is not allowed!"}
    assert alice.get(f"{NEWS}/items", params={"type": 6, "getRead": "false"}).json() == refused
    assert [i["id"] for i in alice.get(f"{NEWS}/items", params={"batchSize": "1abc"}).json()[
        "items"]] == [second]  # fmt: skip
    item = everything[1]
    text = item["title"] + item["url"] + item["body"]
    assert item["fingerprint"] == hashlib.md5(text.encode()).hexdigest()
    assert item["contentHash"] == hashlib.md5((text + "Jo").encode()).hexdigest()
    # 11 digits are microseconds (strlen > 10): everything is newer than 0.01 s after 1970
    updated = alice.get(f"{NEWS}/items/updated", params={"lastModified": 10**10})
    assert len(updated.json()["items"]) == 2


def test_news_items_offset_types_and_updated(sim, client) -> None:
    folder = sim.news_add_folder("alice", "Tech")
    feed = sim.news_add_feed("alice", "https://blog.example.test/feed", "Blog", folder)
    other = sim.news_add_feed("alice", "https://other.example.test/rss", "Other")
    ids = [sim.news_add_item("alice", feed, f"Post {i}", f"<p>{i}</p>") for i in range(4)]
    extra = sim.news_add_item("alice", other, "Elsewhere", "<p>x</p>")
    alice = client("alice")
    # the installed News (28.7.0 on 33): it answered a fixed "25.3.2", so `ncindex doctor`
    # named another News than the one the server has
    assert (
        alice.get(f"{NEWS}/version").json()
        == {"version": sim.apps["news"]}
        == {"version": "28.7.0"}
    )
    feeds = alice.get(f"{NEWS}/feeds").json()
    assert [f["id"] for f in feeds["feeds"]] == [feed, other]
    assert feeds["newestItemId"] == extra
    all_items = alice.get(f"{NEWS}/items", params={"type": 3, "id": 0}).json()["items"]
    assert [i["id"] for i in all_items] == [extra, *reversed(ids)]
    item = all_items[-1]
    assert list(item)[:4] == ["id", "guid", "guidHash", "url"]
    assert item["guidHash"] == hashlib.md5(item["guid"].encode()).hexdigest()
    assert isinstance(item["lastModified"], int) and item["lastModified"] < 10**11
    page = alice.get(
        f"{NEWS}/items", params={"type": 0, "id": feed, "batchSize": 2, "offset": ids[3]}
    ).json()["items"]
    assert [i["id"] for i in page] == [ids[2], ids[1]]
    # verify one item exists: the offset trick
    probe = alice.get(
        f"{NEWS}/items",
        params={"type": 0, "id": feed, "batchSize": 1, "offset": ids[1] + 1, "getRead": "true"},
    ).json()["items"]
    assert probe[0]["id"] == ids[1]
    oldest = alice.get(
        f"{NEWS}/items", params={"type": 1, "id": folder, "oldestFirst": "true", "offset": ids[0]}
    ).json()["items"]
    assert [i["id"] for i in oldest] == ids[1:]
    sim.news_mark_read("alice", ids[0])
    unread = alice.get(f"{NEWS}/items", params={"type": 3, "getRead": "false"}).json()["items"]
    assert ids[0] not in [i["id"] for i in unread]
    starred = alice.get(f"{NEWS}/items", params={"type": 2, "getRead": "false"})
    assert starred.status_code == 200
    assert starred.json() == {
        "message": "Setting getRead on an already filtered list is not allowed!"
    }
    since = item["lastModified"]
    in_seconds = alice.get(f"{NEWS}/items/updated", params={"lastModified": since + 3600})
    assert in_seconds.json()["items"] == []
    in_us = alice.get(f"{NEWS}/items/updated", params={"lastModified": since * 1_000_000})
    assert {i["id"] for i in in_us.json()["items"]} == {*ids, extra}
    assert alice.post(f"{NEWS}/items/{ids[1]}/read").status_code == 200
    assert alice.post(f"{NEWS}/items/999/read").status_code == 404
    # no single-item GET: only the OPTIONS preflight route (/api/{apiVersion}/{path}) has
    # the path, so Symfony's matcher throws MethodNotAllowedException, index.php's 405
    assert alice.get(f"{NEWS}/items/{ids[1]}").status_code == 405
    sim.news_delete_feed("alice", other)
    after = alice.get(f"{NEWS}/items", params={"type": 3}).json()["items"]
    assert extra not in [i["id"] for i in after]
    assert client("bob").get(f"{NEWS}/items", params={"type": 3}).json() == {"items": []}


@pytest.mark.parametrize("family", ["notes", "webdav"])
def test_fault_switches(sim, client, family) -> None:
    alice = client("alice")
    url = (
        "/index.php/apps/notes/api/v1/notes"
        if family == "notes"
        else "/remote.php/dav/files/alice/"
    )
    method = "GET" if family == "notes" else "PROPFIND"
    sim.faults.set(family, status=503, times=1)
    assert alice.request(method, url).status_code == 503
    assert alice.request(method, url).status_code in (200, 207)
    sim.faults.set(family, delay=0.3)
    started = time.monotonic()
    alice.request(method, url)
    assert time.monotonic() - started >= 0.25
    sim.faults.set(family, timeout=True)
    with pytest.raises(httpx.TimeoutException):
        alice.request(method, url, timeout=0.3)
    sim.faults.clear()
    assert alice.request(method, url).status_code in (200, 207)


@pytest.mark.parametrize("item_type", [4, 5])
def test_news_lists_of_a_type_news_cannot_list_answer_500(sim, client, item_type) -> None:
    """nextcloud/news ItemMapperV2::findAllItems and findAllAfter throw
    ServiceValidationException for a type other than 0, 1, 2, 3 and 6 (4 shared, 5 explore),
    which ItemApiController does not catch: 500, where the simulator listed items (or none)."""
    feed = sim.news_add_feed("alice", "https://blog.example.test/feed", "Blog")
    sim.news_add_item("alice", feed, "Post", "<p>x</p>")
    alice = client("alice")
    assert alice.get(f"{NEWS}/items", params={"type": item_type}).status_code == 500
    updated = alice.get(f"{NEWS}/items/updated", params={"type": item_type, "lastModified": 0})
    assert updated.status_code == 500
    # getRead=false on such a type is refused first, with 200 (ItemApiController::index)
    refused = alice.get(f"{NEWS}/items", params={"type": item_type, "getRead": "false"})
    assert refused.status_code == 200 and "message" in refused.json()


@pytest.mark.parametrize(
    ("version", "header_passes"), [("33.0.2", True), ("31.0.0", True), ("30.0.5", False)]
)
def test_the_apps_cors_apis_take_a_bearer_token_only_with_ocs_apirequest(
    version: str, header_passes: bool
) -> None:
    """nextcloud/server CORSMiddleware::beforeController: a #[CORS] method (every Notes, Deck
    and News API method) logs out a caller whose request fails the CSRF check and takes Basic
    credentials only, so a Bearer token (Session::tryTokenLogin) gets 401 "CORS requires
    basic auth" (nextcloud/server#44365); OCS-APIRequest passes the check from 31
    (nextcloud/server#46760). OCS and WebDAV take the token; the simulator took no Bearer."""
    sim = NextcloudSimulator(seed=1, version=version)
    sim.add_user("alice", PASSWORDS["alice"], "Alice Adams")
    bearer = {"Authorization": f"Bearer {PASSWORDS['alice']}"}
    ocs = {"OCS-APIRequest": "true"}
    refused = {"message": "CORS requires basic auth"}
    with serve_simulator(sim) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        user = http.get("/ocs/v2.php/cloud/user?format=json", headers=bearer | ocs)
        assert user.status_code == 200 and user.json()["ocs"]["data"]["id"] == "alice"
        assert http.request("PROPFIND", "/remote.php/dav/files/alice/", headers=bearer).is_success
        for path in (f"{NEWS}/items", f"{DECK}/boards", "/index.php/apps/notes/api/v1/notes"):
            plain = http.get(path, headers=bearer)
            assert (plain.status_code, plain.json()) == (401, refused), path
            with_header = http.get(path, headers=bearer | ocs)
            assert (with_header.status_code == 200) is header_passes, path
            basic = http.get(path, auth=("alice", PASSWORDS["alice"]))
            assert basic.status_code == 200, path
            # a guest fails the same check first (CORSMiddleware runs before SecurityMiddleware)
            guest = http.get(path)
            assert (guest.status_code, guest.json()) == (401, refused), path
        wrong = http.get(f"{NEWS}/items", headers={"Authorization": "Bearer not-a-token"} | ocs)
        assert wrong.status_code == 401
    sim.close()


def test_wrong_basic_credentials_at_index_php_are_its_login_exception_not_the_cors_rule(
    sim, server
) -> None:
    """An app password revoked (or its user deleted) sent as Basic credentials to the Notes,
    Deck or News API: nextcloud/server ``OC::handleRequest`` (``lib/base.php``) calls
    ``OC::handleLogin`` before the router, whose ``Session::tryBasicAuthLogin`` throws a
    ``LoginException`` without a message for given but wrong credentials, and ``index.php``
    catches it: 401 ``application/json; charset=utf-8`` ``{"message": ""}`` unless the
    ``Accept`` header names ``html`` (then its 401 error page) — before any route, so for a
    path or method no route has too, and no controller's ``#[CORS]`` rule ("CORS requires
    basic auth", which the simulator answered). A disabled account's message is its own."""
    wrong = ("alice", "revoked-app-password")
    paths = (
        f"{NEWS}/items",
        f"{DECK}/boards",
        "/index.php/apps/notes/api/v1/notes",
        "/index.php/apps/notes/api/v1/nope",  # no route has it
    )
    sim.delete_user("bob")  # a deleted user's app password is as wrong
    with httpx.Client(base_url=server.url, timeout=10) as http:
        for auth in (wrong, ("bob", PASSWORDS["bob"])):
            for path in paths:
                for headers in ({}, {"OCS-APIRequest": "true", "Accept": "application/json"}):
                    resp = http.get(path, auth=auth, headers=headers)
                    assert resp.status_code == 401, (path, headers)
                    assert resp.headers["content-type"] == "application/json; charset=utf-8"
                    assert resp.json() == {"message": ""}, (path, headers)
            refused_method = http.delete("/index.php/apps/notes/api/v1/settings", auth=auth)
            assert (refused_method.status_code, refused_method.json()) == (401, {"message": ""})
            page = http.get(f"{DECK}/boards", auth=auth, headers={"Accept": "text/HTML"})
            assert page.status_code == 401
            assert page.headers["content-type"].startswith("text/html")
        sim.disable_user("alice")
        disabled = http.get(f"{DECK}/boards", auth=("alice", PASSWORDS["alice"]))
        assert (disabled.status_code, disabled.json()) == (401, {"message": "Account disabled"})


def test_a_method_no_route_of_the_path_has_is_index_phps_empty_405(sim, client) -> None:
    """nextcloud/server ``OC::handleRequest`` (``lib/base.php``) catches the router's
    ``MethodNotAllowedException`` with ``http_response_code(405)``: no body, after the login
    and before any controller — so neither "not logged in" nor the ``#[CORS]`` rule's 401
    comes first. The routes are the apps' ``appinfo/routes.php`` (a path only their
    ``OPTIONS`` preflight route has counts too); a disabled app has none (404)."""
    notes_settings = "/index.php/apps/notes/api/v1/settings"  # GET, PUT, OPTIONS
    cases = (
        ("DELETE", notes_settings),
        ("POST", "/apps/notes/api/v1/notes/5"),  # GET, PUT, DELETE
        ("POST", f"{DECK}/boards/1"),  # GET, PUT, DELETE
        ("GET", f"{NEWS}/feeds/1"),  # PUT, DELETE
    )
    bearer = {"Authorization": f"Bearer {PASSWORDS['alice']}"}
    for c, headers in ((client("alice"), {}), (client(None), {}), (client(None), bearer)):
        for method, path in cases:
            resp = c.request(method, path, headers=headers)
            assert (resp.status_code, resp.content) == (405, b""), (method, path, headers)
            assert resp.headers["content-type"] == "text/html; charset=UTF-8"
    assert client("alice").get(notes_settings).status_code == 200
    sim.disable_app("notes")
    assert client("alice").delete(notes_settings).status_code == 404
