"""The simulator driven by nc_py_api, the Python client written by Nextcloud's developers
(PyPI ``nc-py-api``, BSD-3): every call it makes must succeed as against Nextcloud, and an
event class Nextcloud would refuse must be refused the way Nextcloud refuses it.

nc_py_api's synchronous ``Nextcloud`` class is deprecated (it warns), so these tests run its
``AsyncNextcloud`` in ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from nc_py_api import AsyncNextcloud, NextcloudException
from nc_py_api.files import FilePermissions, ShareType
from sim_support import PASSWORDS

from ncindex.simulator import NextcloudSimulator, SimulatorServer, serve_simulator

Client = Callable[[str], AsyncNextcloud]


@pytest.fixture
def served(sim: NextcloudSimulator) -> Iterator[tuple[NextcloudSimulator, SimulatorServer]]:
    with serve_simulator(sim) as srv:
        yield sim, srv


@pytest.fixture
def nc(served: tuple[NextcloudSimulator, SimulatorServer]) -> Client:
    _, srv = served

    def make(user: str) -> AsyncNextcloud:
        return AsyncNextcloud(
            nextcloud_url=srv.url, nc_auth_user=user, nc_auth_pass=PASSWORDS[user]
        )

    return make


def run(step: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(step())


def test_server_info_user_and_capabilities(nc: Client) -> None:
    async def step() -> None:
        alice = nc("alice")
        assert await alice.user == "alice"
        version = await alice.srv_version
        assert (version["major"], version["string"]) == (33, "33.0.2")
        caps = await alice.capabilities
        assert caps["files_sharing"]["api_enabled"] is True
        assert await alice.files.sharing.available
        assert await alice.notes.available
        assert await alice.user_status.available
        status = await alice.user_status.get_current()
        assert status.user_id == "alice" and status.status_type == "online"

    run(step)


def test_files_list_find_download_upload_mkdir_move_delete(served, nc: Client) -> None:
    sim, _ = served

    async def step() -> None:
        files = nc("alice").files
        folder = await files.mkdir("Docs")
        assert folder.is_dir
        uploaded = await files.upload("Docs/plan.md", b"# Plan\n")
        file_id = sim.file_id("alice", "/Docs/plan.md")
        assert uploaded.file_id == f"{file_id:08d}{sim.instance_id}"  # OC-FileId
        listed = await files.listdir("Docs")
        assert [n.user_path for n in listed] == ["Docs/plan.md"]
        assert listed[0].info.fileid == file_id
        by_id = await files.by_id(uploaded)  # SEARCH on the formatted OC-FileId value
        assert by_id is not None and by_id.user_path == "Docs/plan.md"
        assert (await files.by_id(file_id)).user_path == "Docs/plan.md"
        assert await files.download("Docs/plan.md") == b"# Plan\n"
        moved = await files.move("Docs/plan.md", "Docs/plan-v2.md")  # finds OC-FileId
        assert moved.info.fileid == file_id and moved.user_path == "Docs/plan-v2.md"
        copied = await files.copy("Docs/plan-v2.md", "Docs/copy.md")
        assert copied.info.fileid != file_id
        found = await files.find(["like", "name", "%.md"], path="Docs")
        assert sorted(n.name for n in found) == ["copy.md", "plan-v2.md"]
        await files.delete("Docs/copy.md")
        trash = await files.trashbin_list()
        assert [n.name for n in trash] == [f"copy.md.d{sim.trash('alice')[0]['deleted_at']}"]
        await files.trashbin_restore(trash[0])
        assert sim.file_id("alice", "/Docs/copy.md") == copied.info.fileid
        await files.setfav("Docs/plan-v2.md", True)
        favorites = await files.list_by_criteria(["favorite"])
        assert [n.user_path for n in favorites] == ["Docs/plan-v2.md"]

    run(step)


def test_tags_create_assign_unassign_and_list_by_object(served, nc: Client) -> None:
    sim, _ = served
    sim.put_file("alice", "/a.md", b"a")

    async def step() -> None:
        admin, alice = nc("admin"), nc("alice")
        await admin.files.create_tag("urgent")
        tag = await alice.files.tag_by_name("urgent")
        node = await alice.files.by_path("a.md")
        await alice.files.assign_tag(node, tag)  # PUT systemtags-relations/files/{id}/{tag}
        assert [t.display_name for t in await alice.files.get_tags(node)] == ["urgent"]
        tagged = await alice.files.list_by_criteria(tags=[tag])
        assert [n.user_path for n in tagged] == ["a.md"]
        await alice.files.unassign_tag(node, tag)  # DELETE of the same URL
        assert await alice.files.get_tags(node) == []
        with pytest.raises(NextcloudException) as refused:
            await alice.files.unassign_tag(node, tag)  # not assigned: 404
        assert refused.value.status_code == 404

    run(step)
    assert [e["event"]["class"] for e in sim.events[-2:]] == [
        "OCP\\SystemTag\\TagAssignedEvent",
        "OCP\\SystemTag\\TagUnassignedEvent",
    ]


def test_shares_create_list_delete(served, nc: Client) -> None:
    sim, _ = served
    sim.put_file("alice", "/Proj/a.md", b"a")

    async def step() -> None:
        alice, bob = nc("alice"), nc("bob")
        share = await alice.files.sharing.create(
            "Proj", ShareType.TYPE_USER, FilePermissions.PERMISSION_READ, share_with="bob"
        )
        assert share.share_with == "bob" and share.permissions == FilePermissions.PERMISSION_READ
        assert [s.share_id for s in await alice.files.sharing.get_list()] == [share.share_id]
        received = await bob.files.sharing.get_list(shared_with_me=True)
        assert [s.path for s in received] == ["Proj"]
        assert (await bob.files.by_path("Proj/a.md")).user_path == "Proj/a.md"
        assert (await alice.files.sharing.get_by_id(share.share_id)).share_id == share.share_id
        await alice.files.sharing.delete(share)
        assert await alice.files.sharing.get_list() == []
        with pytest.raises(NextcloudException) as gone:
            await bob.files.by_path("Proj/a.md")
        assert gone.value.status_code == 404

    run(step)


def test_notes(nc: Client) -> None:
    async def step() -> None:
        notes = nc("alice").notes
        note = await notes.create("Plan", "ship it", category="Work")
        assert (note.title, note.category) == ("Plan", "Work")
        assert [n.note_id for n in await notes.get_list()] == [note.note_id]
        again = await notes.by_id(note)
        assert again.content == "ship it"
        await notes.delete(note)
        assert await notes.get_list() == []

    run(step)


def test_webhooks_register_and_a_refused_event_class(nc: Client) -> None:
    async def step() -> None:
        admin = nc("admin")
        ok = await admin.webhooks.register(
            "POST", "http://127.0.0.1:9/hook", "OCA\\Files_Trashbin\\Events\\NodeRestoredEvent"
        )
        assert ok.event == "OCA\\Files_Trashbin\\Events\\NodeRestoredEvent"
        with pytest.raises(NextcloudException) as refused:
            await admin.webhooks.register(
                "POST", "http://127.0.0.1:9/hook", "OCP\\Files\\Events\\Node\\NodeRestoredEvent"
            )
        assert refused.value.status_code == 400
        assert "is not an event class compatible with webhooks" in str(refused.value)
        assert [w.webhook_id for w in await admin.webhooks.get_list()] == [ok.webhook_id]
        assert await admin.webhooks.unregister(ok.webhook_id)
        with pytest.raises(NextcloudException):
            await nc("alice").webhooks.get_list()  # not an admin: OCS 403

    run(step)
