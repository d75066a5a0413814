"""Folder creation events index the subtree: a folder copied, restored from the trash or moved
out of an excluded path fires one event, for the folder; its task walks what is below it, a
bounded number of folders per run, the rest paged to the next run."""

from __future__ import annotations

import pytest

from ncindex.index.indexing import Indexer
from ncindex.sync import subtree
from support import Stack, wait_until

TREE = ["/Proj/a.md", "/Proj/Sub/b.md", "/Proj/Sub/Deep/c.md", "/Proj/Other/d.txt"]


def build(stack: Stack, root: str) -> None:
    """The tree below ``root`` with its webhooks lost (nothing indexed yet)."""
    stack.sim.drop_rate = 1.0
    for i, path in enumerate(TREE):
        stack.sim.put_file("alice", root + path, f"# Part {i}\nharbour lantern {i}".encode())
    stack.sim.flush_deliveries(timeout=5)
    stack.sim.drop_rate = 0.0


def restore_unseen(stack: Stack, path: str) -> None:
    """Delete ``path`` of alice's with its events lost, then restore it from the trash."""
    stack.sim.drop_rate = 1.0
    stack.sim.delete("alice", path)
    stack.sim.flush_deliveries(timeout=5)
    stack.sim.drop_rate = 0.0
    (item,) = stack.sim.trash("alice")
    stack.sim.restore("alice", item["id"])


def indexed_below(stack: Stack, root: str) -> bool:
    ids = [stack.sim.file_id("alice", root + p) for p in TREE]
    return all(i is not None and stack.points(f"file:{i}") for i in ids)


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two folders per run, so that every walk below is paged."""
    monkeypatch.setattr(subtree, "FOLDERS_PER_TASK", 2)


def test_a_copied_folder_is_indexed_below(stack: Stack, small_pages: None) -> None:
    build(stack, "/Src")
    stack.sim.copy("alice", "/Src/Proj", "/Copy/Proj")
    wait_until(lambda: indexed_below(stack, "/Copy"), 60)
    assert not indexed_below(stack, "/Src")  # its own events were lost: only the copy's came


def test_a_folder_restored_from_the_trash_is_indexed_below(stack: Stack, small_pages: None) -> None:
    build(stack, "")
    restore_unseen(stack, "/Proj")
    wait_until(lambda: indexed_below(stack, ""), 60)


def test_a_folder_moved_out_of_an_excluded_path_is_indexed_below(
    stack: Stack, small_pages: None
) -> None:
    stack.settings.index_exclude_globs = ["/Staging/**"]
    build(stack, "/Staging")
    stack.sim.move("alice", "/Staging/Proj", "/Proj")
    wait_until(lambda: indexed_below(stack, ""), 60)


def test_on_nextcloud_30_a_restored_file_is_indexed_by_its_path(stack: Stack) -> None:
    """Nextcloud 30's NodeRestoredEvent names no node (nextcloud/server#53752 came in 31): the
    restored file is found at the target's path."""
    stack.sim.tree.restored_node_has_id = False
    build(stack, "")
    restore_unseen(stack, "/Proj/a.md")
    stack.sim.flush_deliveries(timeout=5)
    wait_until(lambda: stack.points(f"file:{stack.sim.file_id('alice', '/Proj/a.md')}"), 60)


def test_a_folder_whose_storage_cannot_be_reached_is_skipped(stack: Stack) -> None:
    """A folder below on a storage that cannot be reached answers 503 "Storage is temporarily
    not available" (nextcloud/server apps/dav/lib/Connector/Sabre/ObjectTree.php
    getNodeForPath): it is skipped as a folder gone is, the rest of the walk goes on (it
    raised, and the task retried the whole step until it gave up)."""
    build(stack, "")
    stack.sim.make_storage_unavailable("alice", "/Proj/Sub")
    step = subtree.walk_subtree(Indexer(stack.services), "alice", ["/Proj"])
    found = {a.kwargs["file_id"] for a in step.actions}
    assert found == {stack.sim.file_id("alice", p) for p in ("/Proj/a.md", "/Proj/Other/d.txt")}
    assert not step.remaining
