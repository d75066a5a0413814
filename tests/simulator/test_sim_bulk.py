"""Bulk upload (``POST /remote.php/dav/bulk``): each part written by ``Folder::newFile`` and
touched, with those events, in the uploader's view."""

from __future__ import annotations

from sim_support import node_events

from support import BULK_CONTENT_TYPE as CONTENT_TYPE
from support import bulk_body as body
from support import bulk_part as part


def test_a_bulk_upload_creates_then_touches_each_file(sim, client) -> None:
    """nextcloud/server ``apps/dav/lib/BulkUpload/BulkUploadPlugin.php`` ``httpPost``:
    ``newFile`` (create and write hooks) then ``touch`` (touch hooks) per part."""
    alice = client("alice")
    sim.mkdir("alice", "/Docs")
    old = sim.put_file("alice", "/Docs/old.md", b"old")
    sim.events.clear()
    answer = alice.post(
        "/remote.php/dav/bulk",
        content=body(
            part("/Docs/new.md", b"# New\n", X_File_MTime="1767225600"),
            part("/Docs/old.md", b"changed"),
        ),
        headers={"Content-Type": CONTENT_TYPE},
    )
    assert answer.status_code == 200
    assert b'"\\/Docs\\/new.md"' in answer.content  # PHP's json_encode escapes "/"
    new = sim.file_id("alice", "/Docs/new.md")
    results = answer.json()
    assert results["/Docs/new.md"]["error"] is False
    assert results["/Docs/new.md"]["fileid"] == f"{new:08d}{sim.instance_id}"
    assert results["/Docs/new.md"]["etag"] == sim.node("alice", "/Docs/new.md").etag
    assert sim.node("alice", "/Docs/new.md").mtime == 1767225600
    assert sim.read("alice", "/Docs/old.md") == b"changed"
    assert sim.file_id("alice", "/Docs/old.md") == old
    new_path, old_path = "/alice/files/Docs/new.md", "/alice/files/Docs/old.md"
    assert node_events(sim) == [
        ("BeforeNodeCreatedEvent", new_path, None),
        ("BeforeNodeWrittenEvent", new_path, None),
        ("NodeCreatedEvent", new_path, new),
        ("NodeWrittenEvent", new_path, new),
        ("BeforeNodeTouchedEvent", new_path, new),
        ("NodeTouchedEvent", new_path, new),
        ("BeforeNodeWrittenEvent", old_path, old),
        ("NodeWrittenEvent", old_path, old),
        ("BeforeNodeTouchedEvent", old_path, old),
        ("NodeTouchedEvent", old_path, old),
    ]


def test_a_bulk_body_that_cannot_be_read_stops_after_the_parts_before(sim, client) -> None:
    """``MultipartRequestParser::readPartContent`` (a wrong MD5) throws inside ``httpPost``'s
    ``try``: 400 with what was written; a ``Content-Type`` it refuses, before it: sabre's 400."""
    alice = client("alice")
    answer = alice.post(
        "/remote.php/dav/bulk",
        content=body(part("/a.md", b"a"), part("/b.md", b"b", md5="0" * 32), part("/c.md", b"c")),
        headers={"Content-Type": CONTENT_TYPE},
    )
    assert answer.status_code == 400
    assert list(answer.json()) == ["/a.md"]
    assert sim.file_id("alice", "/a.md") and sim.file_id("alice", "/b.md") is None
    refused = alice.post(
        "/remote.php/dav/bulk",
        content=body(),
        headers={"Content-Type": "multipart/mixed; boundary=x"},
    )
    assert (
        refused.status_code == 400 and b"Content-Type must be multipart/related" in refused.content
    )


def test_a_parameter_after_the_boundary_is_ignored_as_php_explode_does(sim, client) -> None:
    """``MultipartRequestParser::parseBoundaryFromHeaders`` destructures ``explode(';', …)``
    into two variables: a ``charset`` after the boundary is dropped, not refused (it was a
    400 here)."""
    answer = client("alice").post(
        "/remote.php/dav/bulk",
        content=body(part("/a.md", b"a")),
        headers={"Content-Type": CONTENT_TYPE + "; charset=utf-8"},
    )
    assert answer.status_code == 200, answer.text
    assert sim.read("alice", "/a.md") == b"a"
