"""Chunked uploads (``/remote.php/dav/uploads``): the events are a PUT's, for the target only."""

from __future__ import annotations

from sim_support import node_events

UPLOADS = "/remote.php/dav/uploads/alice"
FILES = "/remote.php/dav/files/alice"


def upload(alice, folder: str, chunks: list[bytes], target: str, **headers: str) -> int:
    """A desktop client's chunked upload: MKCOL, one PUT per chunk (named out of order on
    purpose: the server assembles them by name), MOVE of ``.file``; the MOVE's status."""
    assert alice.request("MKCOL", f"{UPLOADS}/{folder}").status_code == 201
    for number in reversed(range(len(chunks))):
        put = alice.put(f"{UPLOADS}/{folder}/{number + 1:05d}", content=chunks[number])
        assert put.status_code == 201
    destination = {"Destination": f"http://nc{FILES}{target}", **headers}
    return alice.request("MOVE", f"{UPLOADS}/{folder}/.file", headers=destination).status_code


def test_a_chunked_upload_fires_the_events_of_a_put_for_its_target_only(sim, client) -> None:
    """nextcloud/server ``apps/dav/lib/Upload/ChunkingPlugin.php`` ``beforeMove``, sabre/dav
    ``Tree::move`` → ``copyNode`` → ``Directory::createFile`` → ``File::put``; nothing in
    ``/alice/uploads`` reaches a hook (``View::shouldEmitHooks``)."""
    alice = client("alice")
    sim.mkdir("alice", "/Docs")
    sim.events.clear()
    chunks = [b"# Big report\n", b"part two\n", b"part three\n"]
    status = upload(
        alice, "web-file-upload-1", chunks, "/Docs/report.md", **{"OC-Total-Length": "33"}
    )
    assert status == 201
    fid = sim.file_id("alice", "/Docs/report.md")
    assert sim.read("alice", "/Docs/report.md") == b"".join(chunks)
    target = "/alice/files/Docs/report.md"
    assert node_events(sim) == [
        ("BeforeNodeCreatedEvent", target, None),
        ("BeforeNodeWrittenEvent", target, None),
        ("NodeCreatedEvent", target, fid),
        ("NodeWrittenEvent", target, fid),
    ]
    # the upload folder went with the MOVE
    assert alice.put(f"{UPLOADS}/web-file-upload-1/00001", content=b"x").status_code == 404
    # an upload onto the file overwrites it in place (same id), X-OC-MTime touched between
    status = upload(
        alice, "u2", [b"v2 ", b"text"], "/Docs/report.md", **{"X-OC-MTime": "1767225600"}
    )
    assert status == 204
    assert sim.file_id("alice", "/Docs/report.md") == fid
    assert sim.read("alice", "/Docs/report.md") == b"v2 text"
    assert node_events(sim) == [
        ("BeforeNodeWrittenEvent", target, fid),
        ("BeforeNodeTouchedEvent", target, fid),
        ("NodeTouchedEvent", target, fid),
        ("NodeWrittenEvent", target, fid),
    ]
    assert sim.node("alice", "/Docs/report.md").mtime == 1767225600


def test_a_chunked_upload_whose_chunks_miss_bytes_is_refused(sim, client) -> None:
    """``ChunkingPlugin::verifySize``: ``OC-Total-Length`` against the chunks' total;
    ``beforeMove``: a folder is no target."""
    alice = client("alice")
    sim.events.clear()
    status = upload(alice, "u3", [b"abc", b"de"], "/x.md", **{"OC-Total-Length": "9"})
    assert status == 400
    assert sim.file_id("alice", "/x.md") is None
    assert sim.events == []
    sim.mkdir("alice", "/Docs")
    destination = {"Destination": f"http://nc{FILES}/Docs"}
    onto_a_folder = alice.request("MOVE", f"{UPLOADS}/u3/.file", headers=destination)
    assert onto_a_folder.status_code == 400
    assert b"The given destination files/alice/Docs is a directory." in onto_a_folder.content
    assert alice.request("DELETE", f"{UPLOADS}/u3").status_code == 204
    assert alice.request("MKCOL", "/remote.php/dav/uploads/bob/u4").status_code == 404


def test_a_chunked_uploads_target_is_checked_by_sabre_before_the_chunking_plugin(
    sim, client
) -> None:
    """sabre/dav ``CorePlugin::httpMove`` asks ``Server::getCopyAndMoveInfo`` before it emits
    ``beforeMove`` (``ChunkingPlugin::beforeMove``'s folder and size checks): a target in a
    folder that does not exist is 409 whatever the chunks sum to (was 400 for the size), and
    an existing target with ``Overwrite: F`` is 412, left as it was (was overwritten, 204)."""
    alice = client("alice")
    status = upload(alice, "u5", [b"abc"], "/Nowhere/x.md", **{"OC-Total-Length": "9"})
    assert status == 409
    sim.put_file("alice", "/kept.md", b"kept")
    sim.events.clear()
    status = upload(alice, "u6", [b"new"], "/kept.md", Overwrite="F")
    assert status == 412
    assert sim.read("alice", "/kept.md") == b"kept" and sim.events == []


def test_a_client_uploading_to_a_part_name_sends_id_minus_one_then_a_create(sim, client) -> None:
    """nextcloud/server ``File::put`` of ``x.md.part`` (no file-cache row: ``FileInfo::getId``
    null, ``Node::getId`` ``-1``), then ``View::rename`` of a part file to its name: a write,
    not a rename (``emit_file_hooks_post``, the target's new id)."""
    alice = client("alice")
    sim.mkdir("alice", "/Docs")
    old = sim.put_file("alice", "/Docs/x.md", b"old")
    node_events(sim)
    part = "/alice/files/Docs/x.md.part"
    assert alice.put(f"{FILES}/Docs/x.md.part", content=b"new text").status_code == 201
    assert node_events(sim) == [
        ("BeforeNodeCreatedEvent", part, None),
        ("BeforeNodeWrittenEvent", part, None),
        ("NodeCreatedEvent", part, -1),
        ("NodeWrittenEvent", part, -1),
    ]
    listing = alice.request("PROPFIND", f"{FILES}/Docs", headers={"Depth": "1"})
    assert b"x.md.part" not in listing.content  # no file-cache row, in no listing
    destination = {"Destination": f"http://nc{FILES}/Docs/x.md"}
    moved = alice.request("MOVE", f"{FILES}/Docs/x.md.part", headers=destination)
    assert moved.status_code == 204
    new = sim.file_id("alice", "/Docs/x.md")
    assert new != old and sim.read("alice", "/Docs/x.md") == b"new text"
    target = "/alice/files/Docs/x.md"
    events = [(e["event"]["class"].rsplit("\\", 1)[1], e["event"]["node"]) for e in sim.events]
    assert events == [
        ("BeforeNodeDeletedEvent", {"id": old, "path": target}),  # sabre's delete of the target
        ("NodeDeletedEvent", {"path": target}),
        ("NodeCreatedEvent", {"id": new, "path": target}),
        ("NodeWrittenEvent", {"id": new, "path": target}),
    ]
