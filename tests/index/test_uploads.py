"""Files written the ways real clients write them reach the index under their own name: a
chunked upload (desktop and mobile clients), a bulk upload (the desktop client's small files),
an upload to a ``.part`` name then renamed, and a copy, whose target's NodeCreatedEvent
indexes it without NodeCopiedEvent (no longer registered; a delivery of it from an earlier
registration is still taken)."""

from __future__ import annotations

import httpx

from ncindex.ingest.events import NODE_NS
from ncindex.ingest.registration import registration
from support import BULK_CONTENT_TYPE, PASSWORDS, Stack, bulk_body, bulk_part, wait_until


def paths_of(stack: Stack, file_id: int) -> dict[str, str]:
    """The paths the index holds for file ``file_id``, by account (``{}``: not indexed)."""
    points = stack.points(f"file:{file_id}")
    return dict(points[0].payload["paths"]) if points else {}


def test_a_chunked_upload_is_indexed_under_its_target_name(stack: Stack) -> None:
    """The desktop client's chunked upload (nextcloud/server ``apps/dav/lib/Upload/
    ChunkingPlugin.php``, ``FutureFile.php``): chunks in ``/remote.php/dav/uploads``, then a
    MOVE of ``.file``; only the target's events are sent, and the file is indexed once, at its
    target path, with nothing delivered for the upload folder."""
    stack.sim.mkdir("alice", "/Reports")
    stack.settle(30)
    before = len(stack.sim.deliveries)
    uploads = "/remote.php/dav/uploads/alice/desktop-42"
    text = [b"# Quarterly report\n\n", b"Harbour dredging finished in March.\n"]
    with httpx.Client(
        base_url=str(stack.settings.nextcloud_url), auth=("alice", PASSWORDS["alice"]), timeout=10
    ) as nc:
        assert nc.request("MKCOL", uploads).status_code == 201
        for number, chunk in enumerate(text, start=1):
            assert nc.put(f"{uploads}/{number}", content=chunk).status_code == 201
        moved = nc.request(
            "MOVE",
            f"{uploads}/.file",
            headers={
                "Destination": f"{stack.settings.nextcloud_url}/remote.php/dav/files/alice/"
                "Reports/q1.md",
                "OC-Total-Length": str(sum(map(len, text))),
                "X-OC-MTime": "1767225600",
            },
        )
    assert moved.status_code == 201
    fid = stack.sim.file_id("alice", "/Reports/q1.md")
    wait_until(lambda: paths_of(stack, fid) == {"alice": "/Reports/q1.md"}, 30)
    stack.settle(30)
    sent = stack.sim.deliveries[before:]
    assert sent and all(d.status == 202 for d in sent)
    assert {d.envelope["event"]["node"]["path"] for d in sent} == {"/alice/files/Reports/q1.md"}
    assert [k for k in stack.indexed() if k.startswith("file:")] == [f"file:{fid}"]


def test_a_bulk_upload_indexes_each_file_under_its_path(stack: Stack) -> None:
    """nextcloud/server ``apps/dav/lib/BulkUpload/BulkUploadPlugin.php``: per part
    ``newFile`` (NodeCreatedEvent, NodeWrittenEvent) and ``touch`` (NodeTouchedEvent), all
    with the file's id: each file is indexed at its path, its text embedded once."""
    stack.sim.mkdir("alice", "/Sync")
    stack.settle(30)
    before = stack.services.embedder.dense_embedded
    texts = {
        "/Sync/kiln.md": b"The kiln reaches twelve hundred degrees.",
        "/Sync/ferry.md": b"The ferry leaves the harbour at dawn.",
    }
    with httpx.Client(
        base_url=str(stack.settings.nextcloud_url), auth=("alice", PASSWORDS["alice"]), timeout=10
    ) as nc:
        answer = nc.post(
            "/remote.php/dav/bulk",
            content=bulk_body(
                *(bulk_part(p, t, X_File_MTime="1767225600") for p, t in texts.items())
            ),
            headers={"Content-Type": BULK_CONTENT_TYPE},
        )
    assert answer.status_code == 200 and not any(r["error"] for r in answer.json().values())
    ids = {path: stack.sim.file_id("alice", path) for path in texts}
    for path, fid in ids.items():
        wait_until(lambda fid=fid, path=path: paths_of(stack, fid) == {"alice": path}, 30)
    stack.settle(30)
    assert stack.services.embedder.dense_embedded - before == len(texts)


def test_an_upload_to_a_part_name_is_indexed_at_its_name_and_its_events_accepted(
    stack: Stack,
) -> None:
    """A client writing ``x.md.part`` then moving it to ``x.md``: the ``.part`` file's events
    carry ``"id": -1`` (nextcloud/server ``FileInfo::getId`` null for a part file,
    ``Node::getId`` ``?? -1``) and were refused 400 as bad envelopes; they are accepted and
    ignored, and the file is indexed once, at ``x.md``, from the rename's NodeCreatedEvent."""
    stack.sim.mkdir("alice", "/Docs")
    stack.settle(30)
    before = len(stack.sim.deliveries)
    files = f"{stack.settings.nextcloud_url}/remote.php/dav/files/alice"
    with httpx.Client(auth=("alice", PASSWORDS["alice"]), timeout=10) as nc:
        assert nc.put(f"{files}/Docs/x.md.part", content=b"Tide tables for May.").status_code == 201
        moved = nc.request(
            "MOVE", f"{files}/Docs/x.md.part", headers={"Destination": f"{files}/Docs/x.md"}
        )
    assert moved.status_code == 201
    fid = stack.sim.file_id("alice", "/Docs/x.md")
    wait_until(lambda: paths_of(stack, fid) == {"alice": "/Docs/x.md"}, 30)
    stack.settle(30)
    sent = stack.sim.deliveries[before:]
    assert [d.envelope["event"]["node"].get("id") for d in sent].count(-1) == 2
    assert all(d.status == 202 for d in sent), [(d.status, d.envelope) for d in sent]
    assert [k for k in stack.indexed() if k.startswith("file:")] == [f"file:{fid}"]


def test_a_copy_is_indexed_from_its_created_event_without_node_copied_event(stack: Stack) -> None:
    """nextcloud/server ``lib/private/Files/View.php`` ``copy`` emits the target's create and
    write hooks besides the copy hooks: a copy reaches the index at once even where no
    ``NodeCopiedEvent`` registration exists, as ``webhooks register`` makes none."""
    assert NODE_NS + "NodeCopiedEvent" not in {r.event for r in stack.sim.registry.list()}
    source = stack.sim.put_file("alice", "/Plans/ferry.md", "Ferry timetable for the islands.")
    stack.sim.mkdir("alice", "/Archive")  # no folder of its own to walk: the copy's events only
    wait_until(lambda: paths_of(stack, source), 30)
    stack.settle(30)
    copy = stack.sim.copy("alice", "/Plans/ferry.md", "/Archive/ferry-2026.md")
    wait_until(lambda: paths_of(stack, copy) == {"alice": "/Archive/ferry-2026.md"}, 30)


def test_a_copy_delivered_by_an_earlier_node_copied_registration_is_taken(stack: Stack) -> None:
    """A server where an earlier ncindex registered ``NodeCopiedEvent`` goes on sending it
    until ``webhooks register`` runs again, and sends the deliveries queued before then: the
    receiver takes them (202) and indexes the target, as the created event does."""
    admin = stack.services.account("admin")
    admin.create_webhook(registration(stack.settings, NODE_NS + "NodeCopiedEvent"))
    source = stack.sim.put_file("alice", "/Plans/ferry.md", "Ferry timetable for the islands.")
    wait_until(lambda: paths_of(stack, source), 30)
    stack.settle(30)
    before = len(stack.sim.deliveries)
    copy = stack.sim.copy("alice", "/Plans/ferry.md", "/Archive/ferry-2026.md")
    wait_until(lambda: paths_of(stack, copy) == {"alice": "/Archive/ferry-2026.md"}, 30)
    stack.settle(30)
    copied = [
        d
        for d in stack.sim.deliveries[before:]
        if d.envelope["event"]["class"] == NODE_NS + "NodeCopiedEvent"
    ]
    assert [(d.status, d.envelope["event"]["target"]["id"]) for d in copied] == [(202, copy)]
