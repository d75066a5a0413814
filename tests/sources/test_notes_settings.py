"""Which files are notes: the user's own Notes suffix counts, as in nextcloud/notes
``NotesService::isNote`` (built-in extensions, or the user's ``customSuffix``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import redis

from ncindex.documents import DocType
from ncindex.nextcloud.client import NextcloudClient
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.sources.eligibility import classify

NOTES = "/index.php/apps/notes/api/v1"


@dataclass
class Ctx:
    settings: Settings
    redis: redis.Redis


@pytest.fixture
def served() -> Iterator[tuple[NextcloudSimulator, httpx.Client]]:
    sim = NextcloudSimulator(seed=1)
    sim.add_user("alice", "alice-pw", "Alice Adams")
    with serve_simulator(sim) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        yield sim, http
    sim.close()


def test_a_file_with_the_users_own_suffix_is_a_note(
    served: tuple[NextcloudSimulator, httpx.Client], redis_url: str
) -> None:
    sim, http = served
    client = NextcloudClient.for_account(http, "alice", "alice-pw")
    ctx = Ctx(Settings(namespace=f"t{uuid.uuid4().hex[:8]}"), redis.Redis.from_url(redis_url))
    auth = ("alice", "alice-pw")
    assert http.put(f"{NOTES}/settings", json={"fileSuffix": ".wiki"}, auth=auth).is_success
    sim.put_file("alice", "/Notes/Plan.wiki", b"# Plan")
    sim.put_file("alice", "/Notes/Other.text", b"# Other")
    listed = {n["title"] for n in http.get(f"{NOTES}/notes", auth=auth).json()}
    assert listed == {"Plan"}  # the Notes app's own view
    entries = {e.path: e for e in client.propfind("/Notes")}
    ref, _ = classify(ctx, client, entries["/Notes/Plan.wiki"])
    assert ref is not None and ref.doc_type is DocType.NOTE
    other, _ = classify(ctx, client, entries["/Notes/Other.text"])
    assert other is None or other.doc_type is DocType.FILE
    # read back from the Redis cache, the suffix still counts
    again, _ = classify(ctx, client, entries["/Notes/Plan.wiki"])
    assert again is not None and again.doc_type is DocType.NOTE


@pytest.mark.parametrize("notes_version", ["6.0.2", "5.0.2"])
def test_a_file_is_a_note_exactly_when_the_notes_list_has_it(
    served: tuple[NextcloudSimulator, httpx.Client], redis_url: str, notes_version: str
) -> None:
    """From Notes 6.0.2 a note in a dot-folder (the Text editor's ``.attachments.<id>``) is
    left out of the Notes list (nextcloud/notes NotesService::gatherNoteFiles) but was
    classified a note: every notes scan missed it and checked it again. Now it is a file
    there, and still a note with an older Notes, which lists it."""
    sim, http = served
    sim.enable_app("notes", notes_version)
    client = NextcloudClient.for_account(http, "alice", "alice-pw")
    ctx = Ctx(Settings(namespace=f"t{uuid.uuid4().hex[:8]}"), redis.Redis.from_url(redis_url))
    ids = {
        sim.put_file("alice", "/Notes/.attachments.7/inline.md", b"# Inline"): "hidden",
        sim.put_file("alice", "/Notes/Work/.plan.md", b"# Plan"): "dot-file",  # a file: listed
        sim.put_file("alice", "/Notes/Work/.old/a/b.md", b"# B"): "deeper",
        sim.put_file("alice", "/Notes/Shown.md", b"# Shown"): "shown",
    }
    listed = {n["id"] for n in http.get(f"{NOTES}/notes", auth=("alice", "alice-pw")).json()}
    for _ in range(2):  # the second time from the Redis cache
        for file_id in ids:
            ref, _ = classify(ctx, client, client.find_by_id(file_id))
            assert ref is not None and ref.doc_id == str(file_id), ids[file_id]
            assert (ref.doc_type is DocType.NOTE) is (file_id in listed), ids[file_id]
    assert (min(ids) in listed) is (notes_version == "5.0.2")


def test_a_notes_folder_at_the_files_root_makes_every_text_file_a_note(
    served: tuple[NextcloudSimulator, httpx.Client], redis_url: str
) -> None:
    """A user may pick the files root as notes folder: nextcloud/notes
    ``SettingsService`` validates ``/`` to ``notesPath`` ``""`` and
    ``NoteUtil::getOrCreateNotesFolder`` reads ``""`` as the root itself, so the Notes list
    holds every text file. ``""`` was read as the default ``Notes`` folder (and a root folder
    matched no path), so those notes were classified as files."""
    sim, http = served
    client = NextcloudClient.for_account(http, "alice", "alice-pw")
    ctx = Ctx(Settings(namespace=f"t{uuid.uuid4().hex[:8]}"), redis.Redis.from_url(redis_url))
    auth = ("alice", "alice-pw")
    answer = http.put(f"{NOTES}/settings", json={"notesPath": "/"}, auth=auth)
    assert answer.is_success and answer.json()["notesPath"] == ""
    ids = {
        sim.put_file("alice", "/Plan.md", b"# Plan"): "root",
        sim.put_file("alice", "/Work/Todo.txt", b"todo"): "category",
        sim.put_file("alice", "/.attachments.3/inline.md", b"# Inline"): "hidden",
    }
    listed = {n["id"] for n in http.get(f"{NOTES}/notes", auth=auth).json()}
    assert len(listed & set(ids)) == 2
    assert client.notes_settings().notes_path == ""
    for file_id in ids:
        ref, _ = classify(ctx, client, client.find_by_id(file_id))
        assert ref is not None and (ref.doc_type is DocType.NOTE) is (file_id in listed), ids[
            file_id
        ]


def test_a_file_named_only_by_its_extension_is_a_note(
    served: tuple[NextcloudSimulator, httpx.Client], redis_url: str
) -> None:
    """nextcloud/notes ``NotesService::isNote`` takes the extension from PHP's ``pathinfo``,
    which splits ``.md`` into the name ``""`` and the extension ``md``: the Notes list has it
    (title ``""``, ``Note::getTitle``). Python's ``splitext`` finds no extension there, so it
    was classified a file while every notes scan listed it."""
    sim, http = served
    client = NextcloudClient.for_account(http, "alice", "alice-pw")
    ctx = Ctx(Settings(namespace=f"t{uuid.uuid4().hex[:8]}"), redis.Redis.from_url(redis_url))
    note_id = sim.put_file("alice", "/Notes/Work/.md", b"untitled")
    listed = {n["id"]: n for n in http.get(f"{NOTES}/notes", auth=("alice", "alice-pw")).json()}
    assert listed[note_id]["title"] == "" and listed[note_id]["category"] == "Work"
    ref, _ = classify(ctx, client, client.find_by_id(note_id))
    assert ref is not None and ref.doc_type is DocType.NOTE
