"""Envelope validation and the event → task mapping (DESIGN §5), on reference-format bodies."""

from __future__ import annotations

import json

import pytest

from ncindex.errors import EnvelopeError
from ncindex.ingest.events import parse_envelope, plan_envelope, split_vfs_path

NS = "OCP\\Files\\Events\\Node\\"
ACCOUNTS = {"alice", "bob"}


def env(event: dict, uid: str | None = "alice") -> dict:
    user = {"uid": uid, "displayName": uid.title()} if uid else None
    return {"event": event, "user": user, "time": 1767225600}


def plan(body: dict):
    return plan_envelope(parse_envelope(body), ACCOUNTS)


def test_reference_created_event_parses_from_php_json() -> None:
    raw = (
        '{"event":{"node":{"id":1532,"path":"\\/alice\\/files\\/Projects\\/spec.md"},'
        '"class":"OCP\\\\Files\\\\Events\\\\Node\\\\NodeCreatedEvent"},'
        '"user":{"uid":"alice","displayName":"Alice Adams"},"time":1767225600}'
    )
    actions = plan(json.loads(raw)).actions
    assert [(a.task, a.kwargs) for a in actions] == [
        ("ncindex.index_node", {"user": "alice", "file_id": 1532})
    ]
    assert actions[0].debounce_key == "index:alice:1532"


@pytest.mark.parametrize("name", ["NodeCreatedEvent", "NodeWrittenEvent"])
def test_writes_index(name: str) -> None:
    actions = plan(env({"node": {"id": 7, "path": "/bob/files/x.md"}, "class": NS + name})).actions
    assert actions[0].task == "ncindex.index_node"
    assert actions[0].kwargs == {"user": "bob", "file_id": 7}
    assert actions[0].queue == "index"


def test_a_touch_is_read_again_like_a_write_and_coalesces_with_it() -> None:
    """A file version restored sends NodeTouchedEvent alone (files_versions
    ``Storage::rollback`` → ``View::touch``): re-read like a write, under the write's debounce
    key, so a write and a touch of one file within the window are one task."""
    node = {"id": 9, "path": "/bob/files/a.md"}
    (touched,) = plan(env({"node": node, "class": NS + "NodeTouchedEvent"}, "bob")).actions
    (written,) = plan(env({"node": node, "class": NS + "NodeWrittenEvent"}, "bob")).actions
    assert (touched.task, touched.kwargs) == ("ncindex.index_node", {"user": "bob", "file_id": 9})
    assert touched.debounce_key == written.debounce_key
    idless = env({"node": {"path": "/bob/files/a.md"}, "class": NS + "NodeTouchedEvent"})
    assert plan(idless).ignored == "node_without_id"
    (resolve,) = plan(
        env({"node": {"id": 3, "path": "/carol/files/x.md"}, "class": NS + "NodeTouchedEvent"})
    ).actions
    assert resolve.task == "ncindex.resolve_node"
    with pytest.raises(EnvelopeError) as err:
        parse_envelope(env({"class": NS + "NodeTouchedEvent"}))
    assert err.value.field == "event.node"


def test_delete_without_id_evicts_by_path() -> None:
    body = env(
        {"node": {"path": "/alice/files/Projects/old.txt"}, "class": NS + "NodeDeletedEvent"}
    )
    (action,) = plan(body).actions
    assert action.task == "ncindex.evict_node"
    assert action.kwargs == {"user": "alice", "path": "/Projects/old.txt", "file_id": None}


def test_before_delete_evicts_by_id_and_never_shares_a_key_with_index() -> None:
    body = env(
        {"node": {"id": 9, "path": "/alice/files/a.md"}, "class": NS + "BeforeNodeDeletedEvent"}
    )
    (evict,) = plan(body).actions
    (index,) = plan(
        env({"node": {"id": 9, "path": "/alice/files/a.md"}, "class": NS + "NodeWrittenEvent"})
    ).actions
    assert evict.kwargs["file_id"] == 9
    assert evict.debounce_key != index.debounce_key


def test_rename_moves_from_source_path_to_target() -> None:
    body = env(
        {
            "source": {"path": "/alice/files/Projects/spec.md"},
            "target": {"id": 1532, "path": "/alice/files/Archive/spec-v1.md"},
            "class": NS + "NodeRenamedEvent",
        }
    )
    (action,) = plan(body).actions
    assert action.task == "ncindex.move_path"
    assert action.kwargs == {
        "user": "alice",
        "source": "/Projects/spec.md",
        "target": "/Archive/spec-v1.md",
        "file_id": 1532,
    }


TRASHBIN = "OCA\\Files_Trashbin\\Events\\"


@pytest.mark.parametrize("event_class", [NS + "NodeCopiedEvent", TRASHBIN + "NodeRestoredEvent"])
def test_copy_and_restore_index_the_target(event_class: str) -> None:
    body = env(
        {
            "source": {"path": "/alice/files_trashbin/files/a.md.d1767226000"},
            "target": {"id": 2, "path": "/alice/files/a.md"},
            "class": event_class,
        }
    )
    (action,) = plan(body).actions
    assert action.kwargs == {"user": "alice", "file_id": 2}


def test_the_restore_class_that_does_not_exist_is_ignored() -> None:
    body = env(
        {
            "source": {"path": "/alice/files_trashbin/files/a.md.d1767226000"},
            "target": {"id": 2, "path": "/alice/files/a.md"},
            "class": NS + "NodeRestoredEvent",
        }
    )
    assert plan(body).ignored == "event_class"


def test_the_real_trash_restore_envelope_is_queued() -> None:
    # as the simulator (files_trashbin's NodeRestoredEvent, AbstractNodesEvent) sends it, in
    # PHP json_encode's escaping: the restored source has no id
    raw = (
        '{"event":{"source":{"path":"\\/alice\\/files_trashbin\\/files\\/old.txt.d1767226000"},'
        '"target":{"id":1533,"path":"\\/alice\\/files\\/Projects\\/old.txt"},'
        '"class":"OCA\\\\Files_Trashbin\\\\Events\\\\NodeRestoredEvent"},'
        '"user":{"uid":"alice","displayName":"Alice Adams"},"time":1767229000}'
    )
    (action,) = plan(json.loads(raw)).actions
    assert (action.task, action.kwargs) == (
        "ncindex.index_node",
        {"user": "alice", "file_id": 1533},
    )


def test_a_restore_that_names_no_node_indexes_its_path() -> None:
    # Nextcloud 30 (before nextcloud/server#53752): Trashbin::getNodeForPath found neither node
    # in the trash folder, so both are NonExistingFiles without id
    body = env(
        {
            "source": {"path": "/alice/files/old.txt.d1767226000"},
            "target": {"path": "/alice/files/Projects/old.txt"},
            "class": TRASHBIN + "NodeRestoredEvent",
        }
    )
    (action,) = plan(body).actions
    assert (action.task, action.kwargs) == (
        "ncindex.index_folder",
        {"user": "alice", "folders": ["/Projects/old.txt"]},
    )


@pytest.mark.parametrize("name", ["NodeCreatedEvent", "NodeWrittenEvent"])
def test_a_part_file_with_id_minus_one_is_ignored_not_refused(name: str) -> None:
    """A client's PUT of ``x.md.part`` (nextcloud/server ``apps/dav/lib/Connector/Sabre/
    File.php`` ``put``: its post-write hooks name the path; the ``.part`` file has no file-cache
    row, ``lib/private/Files/FileInfo.php`` ``getId`` "null in case of part file") is sent as
    ``{"id": -1}`` (``lib/private/Files/Node/Node.php`` ``getId``: ``?? -1``): no file to index,
    ignored, not a bad envelope."""
    node = {"id": -1, "path": "/alice/files/Docs/x.md.part"}
    assert plan(env({"node": node, "class": NS + name})).ignored == "node_without_id"
    with pytest.raises(EnvelopeError) as info:
        parse_envelope(env({"node": {"id": -2, "path": node["path"]}, "class": NS + name}))
    assert info.value.field == "event.node.id"


def test_user_comes_from_the_path_and_null_user_is_accepted() -> None:
    body = env(
        {"node": {"id": 3, "path": "/bob/files/x.md"}, "class": NS + "NodeWrittenEvent"}, uid=None
    )
    assert plan(body).actions[0].kwargs["user"] == "bob"


@pytest.mark.parametrize(
    ("node", "event", "reason"),
    [
        ({"path": "/mallory/files/x.md"}, "NodeDeletedEvent", "unknown_user"),
        (
            {"id": 3, "path": "/alice/files_trashbin/files/x.d1"},
            "NodeWrittenEvent",
            "path_outside_files",
        ),
    ],
)
def test_ignored_with_reason(node: dict, event: str, reason: str) -> None:
    body = env({"node": node, "class": NS + event})
    assert plan(body).ignored == reason


@pytest.mark.parametrize(
    ("uid", "event"),
    [
        (None, "NodeWrittenEvent"),
        ("mallory", "NodeWrittenEvent"),
        ("mallory", "BeforeNodeDeletedEvent"),  # the owner deleting a file shared with bob
        ("mallory", "NodeDeletedEvent"),
    ],
)
def test_a_file_event_in_an_unconfigured_view_is_resolved_by_id(
    uid: str | None, event: str
) -> None:
    body = env({"node": {"id": 3, "path": "/mallory/files/x.md"}, "class": NS + event}, uid)
    planned = plan(body)
    assert planned.resolving == "unknown_user"  # said in the receiver's answer
    (action,) = planned.actions
    assert (action.task, action.queue, action.kwargs) == (
        "ncindex.resolve_node",
        "ingest",
        {"file_id": 3},
    )


@pytest.mark.parametrize("uid", [None, "admin"])
def test_a_tag_event_without_a_configured_user_is_resolved_by_id(uid: str | None) -> None:
    event = {"objectType": "files", "objectIds": ["5", "4"], "tagIds": [1], "class": TAG}
    planned = plan(env(event, uid))
    assert planned.resolving == ("no_user" if uid is None else "unknown_user")
    assert [(a.task, a.kwargs) for a in planned.actions] == [
        ("ncindex.resolve_node", {"file_id": 4}),
        ("ncindex.resolve_node", {"file_id": 5}),
    ]


def test_a_tag_event_on_another_object_type_is_ignored_whatever_its_ids() -> None:
    """TagAssignedEvent's objectIds are list<string> of its objectType, which an app may add
    (SystemTagsEntityEvent::addEntityCollection): only files' are file ids."""
    event = {"objectType": "calendar", "objectIds": ["9f1c-uid"], "tagIds": [4], "class": TAG}
    assert plan(env(event)).ignored == "tag_object_type"


def test_unknown_class_is_ignored_not_rejected() -> None:
    body = env(
        {"objectType": "files", "objectIds": ["1"], "tagIds": [4], "class": "OCP\\SystemTag\\Foo"}
    )
    assert plan(body).ignored == "event_class"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("nope", "body"),
        ({"event": {"class": NS + "NodeWrittenEvent"}, "user": None, "time": 1}, "event.node"),
        ({"event": {"class": "", "node": {"path": "/a"}}, "user": None, "time": 1}, "event.class"),
        (
            {"event": {"class": "X", "node": {"path": ""}}, "user": None, "time": 1},
            "event.node.path",
        ),
        ({"event": {"class": "X"}, "user": {"displayName": "x"}, "time": 1}, "user.uid"),
        ({"event": {"class": "X"}, "user": None, "time": -5}, "time"),
        ({"event": {"class": "X"}, "user": None, "time": "17"}, "time"),
        ({"event": {"class": "X"}, "user": None, "time": True}, "time"),
        ({"event": {"class": "X"}, "user": None, "time": 1.5}, "time"),
        ({"event": {"class": "X"}, "time": 1}, "user"),
    ],
)
def test_invalid_envelopes_name_the_field(body, field: str) -> None:
    with pytest.raises(EnvelopeError) as info:
        parse_envelope(body)
    assert info.value.field == field


def test_split_vfs_path_normalises() -> None:
    assert split_vfs_path("/alice/files") == ("alice", "/")
    assert split_vfs_path("/alice/files/a//b/") == ("alice", "/a/b")
    assert split_vfs_path("/alice/files_versions/a") is None


TAG = "OCP\\SystemTag\\TagAssignedEvent"
CARD = "OCA\\Deck\\Event\\CardCreatedEvent"
BAD_OBJECT_IDS = {
    "superscript": "\u00b2",
    "arabic-indic": "\u0661\u0662",
    "fullwidth": "\uff11",
    "negative": "-1",
    "blank": " 1",
    "underscore": "1_0",
    "empty": "",
    "2**63": str(2**63),
    "20-digits": "9" * 20,
    "bool": True,
    "float": 1.0,
}


@pytest.mark.parametrize("object_id", BAD_OBJECT_IDS.values(), ids=BAD_OBJECT_IDS.keys())
def test_tag_object_ids_must_be_ascii_digits_in_range(object_id) -> None:
    event = {"objectType": "files", "objectIds": ["1", object_id], "tagIds": [4], "class": TAG}
    with pytest.raises(EnvelopeError) as info:
        parse_envelope(env(event))
    assert info.value.field == "event.objectIds"


@pytest.mark.parametrize("card_id", ["\u00b3", "\uff17", 10**30, 2**63, -1, "7 ", None])
def test_card_id_must_be_ascii_digits_in_range(card_id) -> None:
    with pytest.raises(EnvelopeError) as info:
        parse_envelope(env({"card": {"id": card_id, "title": "t"}, "class": CARD}))
    assert info.value.field == "event.card.id"


def test_ids_at_the_bounds_are_accepted_as_ints() -> None:
    event = {"objectType": "files", "objectIds": ["0", "007", str(2**63 - 1)], "class": TAG}
    assert [a.kwargs["file_id"] for a in plan(env(event)).actions] == [0, 7, 2**63 - 1]
    for card_id in ("42", 42):
        (action,) = plan(env({"card": {"id": card_id}, "class": CARD})).actions
        assert action.kwargs["doc_id"] == 42


@pytest.mark.parametrize(
    "source",
    ["/bob/files/x.md", "/alice/files_trashbin/files/x.md.d1767226000", "/alice/files\n"],
)
def test_rename_into_files_indexes_the_target_or_says_why_not(source: str) -> None:
    def renamed(target: dict) -> dict:
        return env({"source": {"path": source}, "target": target, "class": NS + "NodeRenamedEvent"})

    nothing = plan(renamed({"path": "/alice/files/x.md"}))
    assert (nothing.actions, nothing.ignored) == ([], "node_without_id")
    (action,) = plan(renamed({"id": 5, "path": "/alice/files/x.md"})).actions
    assert action.kwargs == {"user": "alice", "file_id": 5}


def test_a_trailing_newline_is_part_of_the_path() -> None:
    assert split_vfs_path("/alice/files/a.md\n") == ("alice", "/a.md\n")
    assert split_vfs_path("/alice/files\n") is None
    assert split_vfs_path("/alice/files\n/a.md") is None
    deleted = {"node": {"path": "/alice/files/a.md\n"}, "class": NS + "NodeDeletedEvent"}
    (action,) = plan(env(deleted)).actions
    assert action.kwargs["path"] == "/a.md\n"
    assert action.debounce_key == "evict:alice:/a.md\n"


@pytest.mark.parametrize(
    "path",
    ["/alice/files/a\x00b.md", "/alice/files/../bob/files/x.md", "/alice/files/a/./b.md", "/.."],
)
def test_a_path_nextcloud_cannot_have_is_refused(path: str) -> None:
    with pytest.raises(EnvelopeError) as info:
        parse_envelope(env({"node": {"id": 5, "path": path}, "class": NS + "NodeWrittenEvent"}))
    assert info.value.field == "event.node.path"
    # dots inside a name are fine
    parse_envelope(
        env({"node": {"id": 5, "path": "/alice/files/..a.md"}, "class": NS + "NodeWrittenEvent"})
    )


@pytest.mark.parametrize("time", [2**63, 10**30, -1])
def test_time_is_a_64_bit_unix_time(time: int) -> None:
    raw = env({"node": {"id": 5, "path": "/alice/files/a.md"}, "class": NS + "NodeWrittenEvent"})
    with pytest.raises(EnvelopeError) as info:
        parse_envelope({**raw, "time": time})
    assert info.value.field == "time"
