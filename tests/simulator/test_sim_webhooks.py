"""webhook_listeners: registration API and validation, and what the delivery engine sends."""

from __future__ import annotations

import json
import re
import time
from urllib.parse import quote

import pytest
from sim_support import NODE, OCS_JSON, WEBHOOKS, register

from ncindex.simulator import FilterError, JobArgumentError, NextcloudSimulator, mongo_match


def test_registration_info_fields_and_crud(client, receiver) -> None:
    admin = client("admin")
    info = register(
        admin,
        receiver,
        "\\" + NODE + "NodeWrittenEvent",
        eventFilter={"event.node.path": "/^\\/[^\\/]+\\/files\\//"},
        headers={"Content-Type": "application/json"},
        authMethod="header",
        authData={"X-Secret": "s3cret"},
    )
    assert list(info)[:11] == [
        "id",
        "appId",
        "userId",
        "httpMethod",
        "uri",
        "event",
        "eventFilter",
        "userIdFilter",
        "headers",
        "authMethod",
        "authData",
    ]
    assert info["event"] == NODE + "NodeWrittenEvent"
    assert info["userId"] == "admin" and info["appId"] is None
    assert info["userIdFilter"] == ""
    assert info["authMethod"] == "header"
    assert isinstance(info["authData"], str) and "s3cret" not in info["authData"]
    plain = register(admin, receiver, "NodeCreatedEvent")
    assert plain["eventFilter"] == [] and plain["authData"] is None and plain["headers"] is None
    listed = admin.get(WEBHOOKS, headers=OCS_JSON).json()["ocs"]["data"]
    assert [w["id"] for w in listed] == [info["id"], plain["id"]]
    by_uri = admin.get(WEBHOOKS, params={"uri": "http://other"}, headers=OCS_JSON).json()
    assert by_uri["ocs"]["data"] == []
    one = admin.get(f"{WEBHOOKS}/{plain['id']}", headers=OCS_JSON).json()["ocs"]["data"]
    assert one == plain
    updated = admin.post(
        f"{WEBHOOKS}/{plain['id']}",
        json={"httpMethod": "PUT", "uri": receiver.url + "/x", "event": NODE + "NodeCopiedEvent"},
        headers=OCS_JSON,
    ).json()["ocs"]["data"]
    assert updated["id"] == plain["id"] and updated["httpMethod"] == "PUT"
    assert admin.delete(f"{WEBHOOKS}/{plain['id']}", headers=OCS_JSON).json()["ocs"]["data"] is True
    again = admin.delete(f"{WEBHOOKS}/{plain['id']}", headers=OCS_JSON).json()
    assert again["ocs"]["data"] is False
    missing = admin.get(f"{WEBHOOKS}/{plain['id']}", headers=OCS_JSON)
    assert missing.status_code == 404
    assert missing.json()["ocs"]["meta"]["status"] == "failure"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"event": "OCP\\Share\\Events\\ShareCreatedEvent"},
            "OCP\\Share\\Events\\ShareCreatedEvent is not an event class compatible with webhooks",
        ),
        (
            {"event": "OCA\\Deck\\Event\\CardCreatedEvent"},
            "OCA\\Deck\\Event\\CardCreatedEvent is not an event class compatible with webhooks",
        ),
        ({"authMethod": "basic"}, "This auth method does not exist"),
        ({"authMethod": ""}, "This auth method does not exist"),
        (
            {"authMethod": "header"},
            "Header auth method needs an associative array of headers as auth data",
        ),
    ],
)
def test_registration_validation_errors(client, body, message) -> None:
    payload = {"httpMethod": "POST", "uri": "http://x/", "event": NODE + "NodeCreatedEvent"}
    resp = client("admin").post(WEBHOOKS, json=payload | body, headers=OCS_JSON)
    assert resp.status_code == 400
    assert resp.json()["ocs"]["meta"] == {
        "status": "failure",
        "statuscode": 400,
        "message": message,
    }


def test_auth_data_is_stored_whenever_given_and_an_unknown_id_updates_nothing(client) -> None:
    """WebhookListener::setAuthDataClear refuses only null with the header method and
    encrypts any array; WebhookListenerMapper::updateWebhookListener answers QBMapper::update's
    entity whether a row changed or not."""
    admin = client("admin")
    base = {"httpMethod": "POST", "uri": "http://x/", "event": NODE + "NodeCreatedEvent"}
    plain = admin.post(WEBHOOKS, json=base | {"authData": {"X-A": "1"}}, headers=OCS_JSON)
    assert plain.status_code == 200
    assert plain.json()["ocs"]["data"]["authMethod"] == "none"
    assert isinstance(plain.json()["ocs"]["data"]["authData"], str)
    empty = admin.post(
        WEBHOOKS, json=base | {"authMethod": "header", "authData": {}}, headers=OCS_JSON
    )
    assert empty.status_code == 200 and isinstance(empty.json()["ocs"]["data"]["authData"], str)
    ghost = admin.post(f"{WEBHOOKS}/9999", json=base, headers=OCS_JSON)
    assert ghost.status_code == 200 and ghost.json()["ocs"]["meta"]["statuscode"] == 200
    answered = ghost.json()["ocs"]["data"]
    assert (answered["id"], answered["userId"], answered["uri"]) == (9999, "admin", "http://x/")
    # nothing stored: not listed, and WebhooksController::show answers getById's
    # DoesNotExistException with OCSNotFoundException (OCS 404, HTTP 404 under v2)
    listed = admin.get(WEBHOOKS, headers=OCS_JSON).json()["ocs"]["data"]
    assert 9999 not in [h["id"] for h in listed]
    shown = admin.get(f"{WEBHOOKS}/9999", headers=OCS_JSON)
    assert shown.status_code == 404 and shown.json()["ocs"]["meta"]["statuscode"] == 404


def test_registration_accepts_form_parameters(client) -> None:
    resp = client("admin").post(
        WEBHOOKS,
        data={
            "httpMethod": "POST",
            "uri": "http://x/",
            "event": NODE + "NodeCreatedEvent",
            "authMethod": "header",
            "authData[X-Secret]": "v",
        },
        headers=OCS_JSON,
    )
    assert resp.status_code == 200, resp.text


def test_non_admin_gets_403_unless_delegated_the_webhooks_setting(sim, client) -> None:
    """WebhooksController's routes are #[AuthorizedAdminSetting(settings: Admin::class)]:
    SecurityMiddleware::beforeController lets a user whose group is authorized for
    OCA\\WebhookListeners\\Settings\\Admin in, as it does an admin."""
    resp = client("alice").get(WEBHOOKS, headers=OCS_JSON)
    assert resp.status_code == 403
    assert resp.json()["ocs"]["meta"]["statuscode"] == 403
    sim.delegate_setting("alice", "OCA\\WebhookListeners\\Settings\\Admin")
    body = {"httpMethod": "POST", "uri": "http://x/", "event": NODE + "NodeCreatedEvent"}
    made = client("alice").post(WEBHOOKS, json=body, headers=OCS_JSON)
    assert made.status_code == 200 and made.json()["ocs"]["data"]["userId"] == "alice"
    assert client("bob").get(WEBHOOKS, headers=OCS_JSON).status_code == 403


def bodies(receiver) -> list[dict]:
    return [json.loads(r.body) for r in receiver.requests]


def test_upload_delivers_created_and_written_php_json_no_content_type(
    sim, client, receiver
) -> None:
    admin = client("admin")
    for event in ("NodeCreatedEvent", "NodeWrittenEvent"):
        register(admin, receiver, event, authMethod="header", authData={"X-Secret": "abc"})
    sim.mkdir("alice", "/Notes/Café")
    resp = client("alice").put("/remote.php/dav/files/alice/Notes/Caf%C3%A9/x.md", content=b"hi")
    assert resp.status_code == 201
    sim.flush_deliveries(timeout=5)
    file_id = sim.file_id("alice", "/Notes/Café/x.md")
    events = [(b["event"]["class"], b["event"]["node"].get("id")) for b in bodies(receiver)]
    assert (NODE + "NodeCreatedEvent", file_id) in events
    assert (NODE + "NodeWrittenEvent", file_id) in events
    req = next(r for r in receiver.requests if b"NodeWrittenEvent" in r.body)
    headers = {k.lower(): v for k, v in req.headers.items()}
    assert "content-type" not in headers
    assert headers["user-agent"].startswith("Nextcloud-Server-Crawler/")
    assert headers["x-secret"] == "abc"
    assert b'"path":"\\/alice\\/files\\/Notes\\/Caf\\u00e9\\/x.md"' in req.body
    assert b'"class":"OCP\\\\Files\\\\Events\\\\Node\\\\NodeWrittenEvent"' in req.body
    body = json.loads(req.body)
    assert list(body) == ["event", "user", "time"]
    assert list(body["event"]) == ["node", "class"]
    assert body["user"] == {"uid": "alice", "displayName": "Alice Adams"}
    assert isinstance(body["time"], int)
    assert all(d.status == 200 for d in sim.deliveries)


def test_registered_content_type_is_sent(sim, client, receiver) -> None:
    register(client("admin"), receiver, "NodeCreatedEvent", headers={"Content-Type": "x/y"})
    sim.mkdir("alice", "/D")
    sim.flush_deliveries(timeout=5)
    assert receiver.requests[0].headers["Content-Type"] == "x/y"


def test_delete_has_no_id_and_before_delete_has_it(sim, client, receiver) -> None:
    admin = client("admin")
    register(admin, receiver, "NodeDeletedEvent")
    register(admin, receiver, "BeforeNodeDeletedEvent")
    fid = sim.put_file("alice", "/old.txt", b"x")
    sim.delete("alice", "/old.txt")
    sim.flush_deliveries(timeout=5)
    by_class = {
        b["event"]["class"].rsplit("\\", 1)[1]: b["event"]["node"] for b in bodies(receiver)
    }
    assert by_class["NodeDeletedEvent"] == {"path": "/alice/files/old.txt"}
    assert by_class["BeforeNodeDeletedEvent"] == {"id": fid, "path": "/alice/files/old.txt"}


def test_folder_move_is_one_event_and_share_is_none(sim, client, receiver) -> None:
    admin = client("admin")
    for event in ("NodeRenamedEvent", "NodeCreatedEvent", "NodeWrittenEvent", "NodeDeletedEvent"):
        register(admin, receiver, event)
    sim.put_file("alice", "/Projects/a.md", b"a")
    sim.put_file("alice", "/Projects/b.md", b"b")
    sim.mkdir("alice", "/Archive")
    sim.flush_deliveries(timeout=5)
    receiver.requests.clear()
    folder_id = sim.file_id("alice", "/Projects")
    sim.move("alice", "/Projects", "/Archive/Projects")
    sim.share("alice", "/Archive/Projects", "bob")
    sim.unshare("alice", "/Archive/Projects", "bob")
    sim.flush_deliveries(timeout=5)
    assert bodies(receiver) == [
        {
            "event": {
                "source": {"path": "/alice/files/Projects"},
                "target": {"id": folder_id, "path": "/alice/files/Archive/Projects"},
                "class": NODE + "NodeRenamedEvent",
            },
            "user": {"uid": "alice", "displayName": "Alice Adams"},
            "time": bodies(receiver)[0]["time"],
        }
    ]


def test_sharee_edit_path_is_in_sharee_view_and_user_id_filter(sim, client, receiver) -> None:
    register(client("admin"), receiver, "NodeWrittenEvent", userIdFilter="bob")
    fid = sim.put_file("alice", "/Team/x.md", b"1")
    sim.share("alice", "/Team", "bob", mount_path="/From Alice")
    sim.put_file("bob", "/From Alice/x.md", b"2")
    sim.flush_deliveries(timeout=5)
    (body,) = bodies(receiver)
    assert body["event"]["node"] == {"id": fid, "path": "/bob/files/From Alice/x.md"}
    assert body["user"]["uid"] == "bob"


def test_a_write_into_a_shared_folder_is_one_event_in_the_writers_view(
    sim, client, receiver
) -> None:
    # HookConnector::postCreate dispatches the node of the writer's Filesystem::getView():
    # the folder's owner, who sees the file too, is sent nothing of their own
    register(client("admin"), receiver, "NodeCreatedEvent")
    sim.mkdir("alice", "/Team")
    sim.share("alice", "/Team", "bob", mount_path="/From Alice")
    sim.flush_deliveries(timeout=5)
    receiver.requests.clear()
    fid = sim.put_file("bob", "/From Alice/new.md", b"1")
    sim.flush_deliveries(timeout=5)
    (body,) = bodies(receiver)
    assert body["event"]["node"] == {"id": fid, "path": "/bob/files/From Alice/new.md"}
    assert body["user"]["uid"] == "bob"


def test_event_filter_and_session_less_changes(sim, client, receiver) -> None:
    register(
        client("admin"),
        receiver,
        "NodeCreatedEvent",
        eventFilter={"event.node.path": "/^\\/[^\\/]+\\/files\\/Notes\\//", "user": {"$ne": None}},
    )
    sim.put_file("alice", "/Notes/in.md", b"x")
    sim.put_file("alice", "/Other/out.md", b"x")
    sim.put_file("alice", "/Notes/cron.md", b"x", session=False)
    sim.flush_deliveries(timeout=5)
    assert [b["event"]["node"]["path"] for b in bodies(receiver)] == ["/alice/files/Notes/in.md"]


def test_mongo_match_operators() -> None:
    doc = {"event": {"node": {"id": 5, "path": "/a/files/x"}}, "user": None, "time": 10}
    assert mongo_match(doc, {})
    assert mongo_match(doc, [])
    assert mongo_match(doc, {"event.node.id": {"$exists": True}})
    assert not mongo_match({"event": {"node": {"path": "p"}}}, {"event.node.id": {"$exists": True}})
    assert mongo_match(doc, {"event.node.id": {"$in": [4, 5]}, "time": {"$gte": 10}})
    assert mongo_match(doc, {"$or": [{"time": 1}, {"event.node.path": "/X$/i"}]})


def test_event_filter_is_php_mongo_query() -> None:
    """nextcloud/server apps/webhook_listeners/lib/Service/PHPMongoQuery.php:
    _executeOperatorOnElement finds a field with isset (null is absent) and knows no $eq,
    $regex or $size; _isEqual compares scalars with ===; a list is a list of queries."""
    doc = {"event": {"node": {"id": 5, "path": "/a/files/x"}, "class": "C"}, "user": None}
    assert not mongo_match(doc, {"user": None})
    assert mongo_match(doc, {"user": {"$exists": False}})
    assert mongo_match(doc, {"event.node.id": 5})
    assert not mongo_match(doc, {"event.node.id": "5"})
    assert not mongo_match(doc, {"event.node.id": 5.0})
    assert mongo_match(doc, {"event.node.size": {"$ne": 1}})
    assert not mongo_match(doc, {"event.node.size": {"$ne": None}})
    assert mongo_match(doc, [{"event.node.id": 5}, {"event.class": "C"}])
    assert not mongo_match(doc, [{"event.node.id": 5}, {"event.class": "D"}])
    tags = {"event": {"objectIds": ["7", "8"], "class": "T"}, "user": None, "time": 1}
    assert mongo_match(tags, {"event.objectIds": 8})  # in_array: loose
    assert mongo_match(tags, {"event.objectIds": {"$in": [8]}})  # array_intersect: as strings
    for unknown in ("$eq", "$regex", "$size", "uid"):
        with pytest.raises(FilterError, match=re.escape(f"Operator {unknown} is unknown")):
            mongo_match(doc, {"event.node.id": {unknown: 5}})
    with pytest.raises(FilterError, match=r"\$or requires nonempty array"):
        mongo_match(doc, {"$or": {"event.node.id": 5}})


def test_a_filter_that_throws_fails_the_change_after_the_jobs_before_it(
    sim, client, receiver
) -> None:
    """WebhooksEventListener::handle queues each registration's job as its filter passes, and
    nothing catches what PHPMongoQuery throws (OC\\EventDispatcher\\EventDispatcher::dispatch);
    a list is a filter too (?array $eventFilter), listed as given; {} headers decode to PHP's
    empty array, listed as []."""
    admin = client("admin")
    register(
        admin, receiver, "NodeCreatedEvent", eventFilter=[{"event.node.id": {"$gt": 0}}], headers={}
    )
    listed = register(admin, receiver, "NodeCreatedEvent", eventFilter={"user": {"$eq": None}})
    assert listed["eventFilter"] == {"user": {"$eq": None}}
    with pytest.raises(FilterError, match=r"Operator \$eq is unknown"):
        sim.put_file("alice", "/a.md", b"x")
    sim.flush_deliveries(timeout=5)
    (body,) = bodies(receiver)
    assert body["event"]["node"]["path"] == "/alice/files/a.md"
    info = admin.get(WEBHOOKS, headers=OCS_JSON).json()["ocs"]["data"][0]
    assert info["eventFilter"] == [{"event.node.id": {"$gt": 0}}] and info["headers"] == []


def test_an_envelope_too_long_for_a_job_is_never_sent_and_fails_the_change(
    sim, client, receiver
) -> None:
    """nextcloud/server lib/private/BackgroundJob/JobList.php add: a job argument over 4000
    characters of json_encode throws InvalidArgumentException, which nothing between
    WebhooksEventListener::handle and the write catches (nextcloud/server#58912): WebDAV
    answers 500 after the bytes are written, and the event is never delivered."""
    register(client("admin"), receiver, "NodeWrittenEvent")
    folder = "/" + "/".join(["é" * 120] * 6)  # é is \u00e9 in json_encode: 4320 characters
    sim.mkdir("alice", folder)
    url = "/remote.php/dav/files/alice" + quote(folder + "/x.md")
    resp = client("alice").put(url, content=b"long")
    assert resp.status_code == 500
    assert b"<s:exception>InvalidArgumentException</s:exception>" in resp.content
    assert b"can't exceed 4000 characters (json encoded)" in resp.content
    assert sim.read("alice", folder + "/x.md") == b"long"
    with pytest.raises(JobArgumentError):
        sim.put_file("alice", folder + "/y.md", b"direct")
    sim.put_file("alice", "/short.md", b"s")
    sim.flush_deliveries(timeout=5)
    assert [b["event"]["node"]["path"] for b in bodies(receiver)] == ["/alice/files/short.md"]


def test_the_body_sent_is_the_envelope_as_the_job_decodes_it(sim, client, receiver) -> None:
    """nextcloud/server lib/private/BackgroundJob/JobList.php buildJob hands a job its argument
    as json_decode(..., true) and WebhookCall::run sends json_encode of that: an empty JSON
    object arrives as [] and an object keyed "0", "1" as a list; other keys are kept."""
    tag = "OCP\\SystemTag\\TagAssignedEvent"
    register(client("admin"), receiver, tag)
    payload = {
        "objectType": "files",
        "objectIds": ["5"],
        "tagIds": [1],
        "empty": {},
        "seq": {"0": "a", "1": {}},
        "keyed": {"1": "x", "07": "y"},
    }
    sim.dispatch_event(tag, payload, "alice")
    sim.flush_deliveries(timeout=5)
    body = receiver.requests[0].body
    assert b'"empty":[],"seq":["a",[]],"keyed":{"1":"x","07":"y"}' in body
    assert sim.events[-1]["event"]["empty"] == {}  # the listener's snapshot, before the job


def test_delay_drop_and_one_attempt_on_error(client, receiver) -> None:
    sim = NextcloudSimulator(delivery_delay=(0.3, 0.3), drop_rate=0.0, seed=3)
    try:
        sim.add_user("alice", "pw")
        sim.register_webhook(
            "admin", httpMethod="POST", uri=receiver.url + "/h", event=NODE + "NodeCreatedEvent"
        )
        receiver.status = 500
        started = time.monotonic()
        sim.mkdir("alice", "/A")
        assert receiver.requests == []
        assert sim.flush_deliveries(timeout=5) == 1
        assert time.monotonic() - started >= 0.25
        assert len(receiver.requests) == 1
        assert sim.deliveries[0].status == 500
        sim.drop_rate = 1.0
        sim.mkdir("alice", "/B")
        sim.flush_deliveries(timeout=5)
        assert len(receiver.requests) == 1
        assert len(sim.dropped_deliveries) == 1
        sim.drop_rate = 0.0
        sim.delivery_delay = (60.0, 60.0)
        sim.mkdir("alice", "/C")
        sim.flush_deliveries(timeout=5, fast_forward=True)
        assert len(receiver.requests) == 2
    finally:
        sim.close()
