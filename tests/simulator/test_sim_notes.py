"""Notes API v1: fields, etag formula, 304, 404 body, chunk cursor, pruneBefore, writes."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from ncindex.simulator import php_json_encode

API = "/index.php/apps/notes/api/v1"
FIELDS = [
    "id",
    "title",
    "modified",
    "category",
    "favorite",
    "readonly",
    "internalPath",
    "shareTypes",
    "isShared",
    "error",
    "errorType",
    "content",
    "etag",
]


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def test_get_note_fields_etag_and_304(sim, client) -> None:
    fid = sim.put_file("alice", "/Notes/Work/Plan.md", "# Plan\n- ship it ☀", mtime=1767225600)
    alice = client("alice")
    resp = alice.get(f"{API}/notes/{fid}")
    assert resp.status_code == 200
    assert resp.headers["x-notes-api-versions"] == "0.2, 1.3, 1.4"
    note = resp.json()
    assert list(note) == FIELDS
    assert note["id"] == fid
    assert note["title"] == "Plan"
    assert note["category"] == "Work"
    assert note["modified"] == 1767225600
    assert note["internalPath"] == "/Notes/Work/Plan.md"
    assert note["content"] == "# Plan\n- ship it ☀"
    assert "\\/Notes\\/Work\\/Plan.md" in resp.text and "\\u2600" in resp.text
    expected = md5(
        php_json_encode([fid, "Plan", 1767225600, "Work", False, False, md5(note["content"])])
    )
    assert note["etag"] == expected
    assert resp.headers["etag"] == f'"{expected}"'
    cached = alice.get(f"{API}/notes/{fid}", headers={"If-None-Match": f'"{expected}"'})
    assert cached.status_code == 304
    assert cached.content == b""
    sim.put_file("alice", "/Notes/Work/Plan.md", b"# Plan\nchanged")
    fresh = alice.get(f"{API}/notes/{fid}", headers={"If-None-Match": f'"{expected}"'})
    assert fresh.status_code == 200
    assert fresh.json()["etag"] != expected


@pytest.mark.parametrize(
    ("notes_version", "error_type"),
    [("6.0.2", "Exception"), ("5.0.2", "OCA\\Notes\\Service\\NoteDoesNotExistException")],
)
def test_missing_note_404_body(sim, client, notes_version, error_type) -> None:
    sim.enable_app("notes", notes_version)  # 6.0.2 never names the exception (fd53ff0d)
    other = sim.put_file("alice", "/Documents/not-a-note.md", b"x")
    pdf = sim.put_file("alice", "/Notes/scan.pdf", b"%PDF")
    alice = client("alice")
    for note_id in (999999, other, pdf):
        resp = alice.get(f"{API}/notes/{note_id}")
        assert resp.status_code == 404
        assert resp.json() == {"errorType": error_type}
        assert resp.headers["x-notes-api-versions"] == "0.2, 1.3, 1.4"
    bob_note = sim.put_file("bob", "/Notes/b.md", b"bob")
    assert alice.get(f"{API}/notes/{bob_note}").status_code == 404


@pytest.mark.parametrize(("notes_version", "listed"), [("6.0.2", False), ("5.0.2", True)])
def test_hidden_folders_leave_the_list_from_6_0_2(sim, client, notes_version, listed) -> None:
    """nextcloud/notes NotesService::gatherNoteFiles skips dot-folders (33d9d402, in 6.0.2);
    getFileById does not, so the note's GET still answers."""
    sim.enable_app("notes", notes_version)
    hidden = sim.put_file("alice", "/Notes/.attachments.7/inline.md", b"x")
    shown = sim.put_file("alice", "/Notes/Work/.plan.md", b"y")  # only folders are hidden
    alice = client("alice")
    ids = {n["id"] for n in alice.get(f"{API}/notes").json()}
    assert (hidden in ids) is listed and shown in ids
    assert alice.get(f"{API}/notes/{hidden}").status_code == 200


def test_a_blocked_note_is_a_200_with_error_true(sim, client) -> None:
    fid = sim.put_file("alice", "/Notes/Secret.md", "# Secret\nvault code")
    sim.block_access("alice", "/Notes/Secret.md")
    # Note::getData catches File::getContent's NotPermittedException
    resp = client("alice").get(f"{API}/notes/{fid}")
    assert resp.status_code == 200
    note = resp.json()
    assert note["error"] is True
    assert note["errorType"] == "OCP\\Files\\NotPermittedException"
    assert note["content"] == "Error: OCP\\Files\\NotPermittedException"
    assert note["readonly"] is True
    assert "vault code" not in resp.text
    listed = client("alice").get(f"{API}/notes").json()
    assert [n["error"] for n in listed if n["id"] == fid] == [True]


def test_list_etag_304_exclude_and_category(sim, client) -> None:
    sim.put_file("alice", "/Notes/a.md", b"a")
    sim.put_file("alice", "/Notes/Work/b.txt", b"b")
    sim.put_file("alice", "/Notes/Work/skip.pdf", b"c")
    alice = client("alice")
    resp = alice.get(f"{API}/notes", params={"exclude": "content"})
    assert resp.status_code == 200
    notes = resp.json()
    assert {n["title"] for n in notes} == {"a", "b"}
    assert all("content" not in n and "etag" in n for n in notes)
    etag = resp.headers["etag"]
    # AppFramework Response::getHeaders: DateTimeInterface::RFC2822, "+0000", not "GMT"
    last_modified = resp.headers["last-modified"]
    assert re.fullmatch(r"\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} \+0000", last_modified)
    # NotModifiedMiddleware answers 304 to that very string; a chunk cursor pins the time
    cursor = alice.get(f"{API}/notes", params={"chunkSize": 1}).headers["x-notes-chunk-cursor"]
    pinned = {"chunkSize": 1, "chunkCursor": cursor}
    stamp = alice.get(f"{API}/notes", params=pinned).headers["last-modified"]
    same = alice.get(f"{API}/notes", params=pinned, headers={"If-Modified-Since": stamp})
    assert same.status_code == 304
    gmt = stamp.replace("+0000", "GMT")
    assert alice.get(f"{API}/notes", params=pinned, headers={"If-Modified-Since": gmt}).is_success
    again = alice.get(
        f"{API}/notes", params={"exclude": "content"}, headers={"If-None-Match": etag}
    )
    assert again.status_code == 304
    assert again.content == b""
    work = alice.get(f"{API}/notes", params={"category": "Work"}).json()
    assert [n["title"] for n in work] == ["b"]


def test_chunk_cursor_and_prune_before(sim, client) -> None:
    ids = [sim.put_file("alice", f"/Notes/n{i}.md", f"note {i}") for i in range(5)]
    alice = client("alice")
    first = alice.get(f"{API}/notes", params={"chunkSize": 2})
    assert len(first.json()) == 2
    cursor = first.headers["x-notes-chunk-cursor"]
    assert first.headers["x-notes-chunk-pending"] == "3"
    start, _, last_id = cursor.split("-")
    assert int(last_id) == first.json()[-1]["id"]
    second = alice.get(f"{API}/notes", params={"chunkSize": 2, "chunkCursor": cursor})
    assert len(second.json()) == 2
    assert second.headers["x-notes-chunk-pending"] == "1"
    third = alice.get(
        f"{API}/notes",
        params={"chunkSize": 2, "chunkCursor": second.headers["x-notes-chunk-cursor"]},
    )
    assert "x-notes-chunk-cursor" not in third.headers
    body = third.json()
    full = [n for n in body if "title" in n]
    stubs = [n for n in body if list(n) == ["id"]]
    assert len(full) == 1 and len(stubs) == 4
    assert sorted(n["id"] for n in body) == sorted(ids)
    # all responses of one chunked sync carry the start time as Last-Modified
    assert first.headers["last-modified"] == third.headers["last-modified"]
    assert int(start) > 0
    pruned = alice.get(f"{API}/notes", params={"pruneBefore": 4102444800}).json()
    assert all(list(n) == ["id"] for n in pruned) and len(pruned) == 5


def test_create_update_delete_go_through_the_file_tree(sim, client) -> None:
    alice = client("alice")
    created = alice.post(
        f"{API}/notes", json={"title": "Ideas", "category": "Work", "content": "x"}
    )
    assert created.status_code == 200
    note = created.json()
    assert note["internalPath"] == "/Notes/Work/Ideas.md"
    assert sim.file_id("alice", "/Notes/Work/Ideas.md") == note["id"]
    classes = [e["event"]["class"].rsplit("\\", 1)[1] for e in sim.events]
    assert "NodeCreatedEvent" in classes and classes.count("NodeWrittenEvent") >= 2
    dup = alice.post(f"{API}/notes", json={"title": "Ideas", "category": "Work"}).json()
    assert dup["title"] == "Ideas (2)"
    bad = alice.put(
        f"{API}/notes/{note['id']}", json={"content": "y"}, headers={"If-Match": '"nope"'}
    )
    assert bad.status_code == 412
    assert bad.json()["id"] == note["id"]
    updated = alice.put(
        f"{API}/notes/{note['id']}",
        json={"content": "new", "title": "Renamed", "category": ""},
        headers={"If-Match": f'"{note["etag"]}"'},
    ).json()
    assert updated["internalPath"] == "/Notes/Renamed.md"
    assert updated["id"] == note["id"]
    assert sim.read("alice", "/Notes/Renamed.md") == b"new"
    deleted = alice.delete(f"{API}/notes/{note['id']}")
    assert deleted.status_code == 200
    assert deleted.json() == []
    assert alice.get(f"{API}/notes/{note['id']}").status_code == 404


def test_settings_and_custom_notes_folder(sim, client) -> None:
    """nextcloud/notes ``NotesApiController::setSettings`` → ``SettingsService::setPublic``
    stores the new ``notesPath`` and moves nothing; ``GET /settings`` and the list answer from
    it at once (``getPublic``, ``NoteUtil::getOrCreateNotesFolder``)."""
    alice = client("alice")
    settings = alice.get(f"{API}/settings").json()
    assert settings == {"fileSuffix": ".md", "notesPath": "Notes", "noteMode": "rich"}
    changed = alice.put(f"{API}/settings", json={"notesPath": "Journal", "fileSuffix": ".txt"})
    assert changed.json()["notesPath"] == "Journal"
    old = sim.put_file("alice", "/Notes/old.md", b"old")
    new = sim.put_file("alice", "/Journal/new.md", b"new")
    ids = [n["id"] for n in alice.get(f"{API}/notes").json()]
    assert ids == [new]
    assert alice.get(f"{API}/notes/{old}").status_code == 404
    assert sim.node("alice", "/Notes/old.md") is not None  # left where it was
    assert alice.get(f"{API}/settings").json()["notesPath"] == "Journal"
    created = alice.post(f"{API}/notes", json={"title": "T"}).json()
    assert created["internalPath"] == "/Journal/T.txt"


def test_the_list_creates_the_notes_folder_and_the_settings_do_not(sim, client) -> None:
    """nextcloud/notes: GET /settings (SettingsService::getPublic) looks for the default
    folder and creates none; GET /notes (Helper::getNotesAndCategories → NotesService::getAll
    with $autoCreateNotesFolder → NoteUtil::getOrCreateNotesFolder) creates it."""
    alice = client("alice")
    assert alice.get(f"{API}/settings").json()["notesPath"] == "Notes"
    assert sim.node("alice", "/Notes") is None
    assert alice.get(f"{API}/notes").json() == []
    folder = sim.node("alice", "/Notes")
    assert folder is not None and folder.is_dir


def test_the_list_on_a_storage_that_cannot_be_reached(sim, client) -> None:
    """An Availability-wrapped storage away: the list comes from the file cache. A
    FailedStorage mount as the notes folder: an empty folder (FailedCache), 200 []. Below
    such a mount, or a folder to create on an unreachable storage: StorageNotAvailableException,
    500 (Helper::handleErrorResponse)."""
    fid = sim.put_file("alice", "/Notes/n.md", b"# N")
    alice = client("alice")
    sim.make_storage_unavailable("alice", "/Notes")
    assert [n["id"] for n in alice.get(f"{API}/notes").json()] == [fid]
    sim.make_storage_unavailable("alice", "/Notes", failed=True)
    assert alice.get(f"{API}/notes").json() == []
    sim.make_storage_unavailable("alice", "/Notes", unavailable=False)
    sim.put_file("alice", "/Ext/Sub/s.md", b"# S")
    sim.make_storage_unavailable("alice", "/Ext", failed=True)
    assert alice.put(f"{API}/settings", json={"notesPath": "Ext/Sub"}).status_code == 200
    refused = alice.get(f"{API}/notes")
    assert refused.status_code == 500 and refused.json() == {"errorType": "Exception"}
    alice.put(f"{API}/settings", json={"notesPath": "Ext/New"})
    assert alice.get(f"{API}/notes").status_code == 500
    assert sim.node("alice", "/Ext/New") is None


def test_shared_note_visible_to_sharee_until_unshare(sim, client) -> None:
    fid = sim.put_file("alice", "/Notes/Team/plan.md", b"team plan")
    sim.share("alice", "/Notes/Team", "bob", mount_path="/Notes/Team", readonly=True)
    bob = client("bob")
    note = bob.get(f"{API}/notes/{fid}").json()
    assert note["category"] == "Team"
    assert note["readonly"] is True
    assert bob.put(f"{API}/notes/{fid}", json={"content": "x"}).status_code == 403
    assert json.loads(bob.get(f"{API}/notes").text)[0]["id"] == fid
    sim.unshare("alice", "/Notes/Team", "bob")
    assert bob.get(f"{API}/notes/{fid}").status_code == 404
    assert bob.get(f"{API}/notes").json() == []


def test_unauthenticated_notes_is_401(client) -> None:
    assert client(None).get(f"{API}/notes").status_code == 401
