"""files_versions: versions kept on overwrite, and a restore as ``Storage::rollback`` does it
(one touch, the version's mtime, a new etag), directly and by WebDAV ``MOVE``."""

from __future__ import annotations

import pytest

from ncindex.simulator import ForbiddenError, NextcloudSimulator, NotFoundError


def classes(sim: NextcloudSimulator) -> list[str]:
    return [e["event"]["class"].rsplit("\\", 1)[1] for e in sim.events]


def test_an_overwrite_keeps_the_old_bytes_as_a_version_named_after_their_mtime(sim) -> None:
    sim.put_file("alice", "/empty.md", b"", mtime=900)
    sim.put_file("alice", "/empty.md", b"now text", mtime=950)
    assert sim.versions("alice", "/empty.md") == [950]  # an empty file makes no version
    sim.put_file("alice", "/a.md", b"first", mtime=1000)
    sim.put_file("alice", "/a.md", b"second", mtime=2000)
    sim.put_file("alice", "/a.md", b"third", mtime=2000)  # same mtime: replaces that version
    assert sim.versions("alice", "/a.md") == [2000, 1000]
    assert sim.node("alice", "/a.md").versions == {1000: b"first", 2000: b"second"}
    sim.copy("alice", "/a.md", "/b.md")
    assert sim.node("alice", "/b.md").versions == {1000: b"first", 2000: b"second"}


def test_a_restore_is_one_touch_with_the_versions_mtime_and_a_new_etag(sim) -> None:
    fid = sim.put_file("alice", "/Docs/a.md", b"first", mtime=1000)
    sim.put_file("alice", "/Docs/a.md", b"second", mtime=2000)
    node, folder = sim.node("alice", "/Docs/a.md"), sim.node("alice", "/Docs")
    etags = (node.etag, folder.etag)
    sim.events.clear()
    assert sim.restore_version("alice", "/Docs/a.md", 1000) == fid
    assert classes(sim) == ["BeforeNodeTouchedEvent", "NodeTouchedEvent"]  # no write event
    touched = sim.events[-1]
    assert touched["event"]["node"] == {"id": fid, "path": "/alice/files/Docs/a.md"}
    assert touched["user"]["uid"] == "alice"
    assert sim.read("alice", "/Docs/a.md") == b"first"
    assert node.mtime == 1000
    assert node.etag != etags[0] and folder.etag != etags[1]
    # the bytes replaced were kept first; the version restored was moved, not copied
    assert node.versions == {2000: b"second"}
    assert sim.versions("alice", "/Docs/a.md") == [2000, 1000]
    with pytest.raises(NotFoundError):
        sim.restore_version("alice", "/Docs/a.md", 1500)


def test_a_sharee_restoring_sends_no_event_and_a_read_only_one_is_refused(sim) -> None:
    sim.put_file("alice", "/Team/plan.md", b"first", mtime=1000)
    sim.put_file("alice", "/Team/plan.md", b"second", mtime=2000)
    mount = sim.share("alice", "/Team", "bob")
    sim.events.clear()
    sim.restore_version("bob", f"{mount}/plan.md", 1000)
    assert sim.read("alice", "/Team/plan.md") == b"first"
    assert sim.events == []  # the owner's views, outside bob's own: no hooks
    sim.unshare("alice", "/Team", "bob")
    mount = sim.share("alice", "/Team", "bob", readonly=True)
    with pytest.raises(ForbiddenError):
        sim.restore_version("bob", f"{mount}/plan.md", 2000)


def test_a_restore_over_webdav_is_a_move_into_restore(sim, client) -> None:
    fid = sim.put_file("alice", "/a.md", b"first", mtime=1000)
    sim.put_file("alice", "/a.md", b"second", mtime=2000)
    sim.put_file("bob", "/mine.md", b"bob's")
    alice = client("alice")
    base = "/remote.php/dav/versions/alice"
    target = {"Destination": f"{alice.base_url}{base}/restore/target"}

    def move(path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        r = alice.request("MOVE", path, headers=target if headers is None else headers)
        return r.status_code, r.text

    assert move(f"/remote.php/dav/versions/bob/versions/{fid}/1000")[0] == 403
    status, body = move(f"/remote.php/dav/versions/carol/versions/{fid}/1000")
    assert status == 404 and "Principal with name carol not found" in body
    assert move(f"{base}/versions/{sim.file_id('bob', '/mine.md')}/1000")[0] == 404
    assert move(f"{base}/versions/{fid}/1500")[0] == 404
    status, body = move(f"{base}/versions/{fid}/1000", {})
    assert status == 400 and "The destination header was not supplied" in body
    assert (
        move(f"{base}/versions/{fid}/1000", {"Destination": f"{base}/versions/{fid}/9"})[0] == 403
    )
    assert sim.read("alice", "/a.md") == b"second"
    sim.events.clear()
    status, _ = move(f"{base}/versions/{fid}/1000")
    assert status == 201
    assert sim.read("alice", "/a.md") == b"first"
    assert classes(sim) == ["BeforeNodeTouchedEvent", "NodeTouchedEvent"]
    # a sharee without update permission: LegacyVersionsBackend::rollback's Forbidden
    mount = sim.share("alice", "/a.md", "bob", readonly=True)
    bob = client("bob")
    refused = bob.request(
        "MOVE",
        f"/remote.php/dav/versions/bob/versions/{fid}/2000",
        headers={"Destination": f"{bob.base_url}/remote.php/dav/versions/bob/restore/target"},
    )
    assert refused.status_code == 403
    assert "do not have update permissions on the source file" in refused.text
    assert sim.read("bob", mount) == b"first"
