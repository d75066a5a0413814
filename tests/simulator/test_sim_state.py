"""The Python surface: files, shares, trash, ids, events and the sample corpus."""

from __future__ import annotations

import re

import pytest

from ncindex.simulator import (
    SAMPLE_ACCOUNTS,
    ConflictError,
    NextcloudSimulator,
    NotFoundError,
    load_sample_corpus,
    sample_queries,
)


def classes(sim: NextcloudSimulator) -> list[str]:
    return [e["event"]["class"].rsplit("\\", 1)[1] for e in sim.events]


def test_put_move_copy_keep_or_mint_ids(sim) -> None:
    fid = sim.put_file("alice", "/Notes/Plan.md", b"# Plan")
    assert sim.put_file("alice", "/Notes/Plan.md", b"# Plan v2") == fid
    assert sim.read("alice", "/Notes/Plan.md") == b"# Plan v2"
    folder = sim.file_id("alice", "/Notes")
    assert sim.move("alice", "/Notes", "/Archive/Notes") == folder
    assert sim.file_id("alice", "/Archive/Notes/Plan.md") == fid
    assert sim.path_of("alice", fid) == "/Archive/Notes/Plan.md"
    copied = sim.copy("alice", "/Archive/Notes/Plan.md", "/Plan copy.md")
    assert copied != fid
    assert sim.visible_files("alice") == {
        fid: "/Archive/Notes/Plan.md",
        copied: "/Plan copy.md",
    }
    with pytest.raises(NotFoundError):
        sim.read("alice", "/nope")
    with pytest.raises(ConflictError):
        sim.tree.put_file("alice", "/x/y.md", b"", make_parents=False)


#: What nextcloud/server lib/private/Files/View.php ``copy`` sends (HookConnector): the copy
#: hooks and the target's create and write hooks (``emit_file_hooks_pre``/``_post``).
COPY_EVENTS = [
    "BeforeNodeCopiedEvent",
    "BeforeNodeCreatedEvent",
    "BeforeNodeWrittenEvent",
    "NodeCopiedEvent",
    "NodeCreatedEvent",
    "NodeWrittenEvent",
]


def test_event_sequences(sim) -> None:
    sim.put_file("alice", "/a.md", b"1")
    assert classes(sim) == [
        "BeforeNodeCreatedEvent",
        "BeforeNodeWrittenEvent",
        "NodeCreatedEvent",
        "NodeWrittenEvent",
    ]
    sim.events.clear()
    sim.put_file("alice", "/a.md", b"2")
    assert classes(sim) == ["BeforeNodeWrittenEvent", "NodeWrittenEvent"]
    sim.events.clear()
    sim.copy("alice", "/a.md", "/b.md")
    # View::copy: the copy hooks and the target's create/write hooks (emit_file_hooks_pre/post)
    assert classes(sim) == COPY_EVENTS
    copied = sim.events[3]["event"]
    assert copied["source"]["id"] != copied["target"]["id"]
    assert [e["event"]["node"] for e in sim.events[4:]] == [copied["target"]] * 2
    assert "id" not in sim.events[1]["event"]["node"]
    sim.events.clear()
    sim.tree.copy("alice", "/a.md", "/b.md", overwrite=True)  # sabre deletes the target first
    assert classes(sim)[:2] == ["BeforeNodeDeletedEvent", "NodeDeletedEvent"]
    assert classes(sim)[2:] == COPY_EVENTS
    sim.events.clear()
    sim.share("alice", "/a.md", "bob")
    sim.unshare("alice", "/a.md", "bob")
    assert sim.events == []


def test_trash_and_restore(sim) -> None:
    fid = sim.put_file("alice", "/Projects/old-notes.txt", b"x")
    sim.delete("alice", "/Projects/old-notes.txt")
    assert sim.file_id("alice", "/Projects/old-notes.txt") is None
    (item,) = sim.trash("alice")
    assert item["id"] == fid
    assert re.fullmatch(r"old-notes\.txt\.d\d+", item["name"])
    sim.events.clear()
    assert sim.restore("alice", fid) == fid
    assert sim.path_of("alice", fid) == "/Projects/old-notes.txt"
    restored = sim.events[-1]["event"]
    assert restored["class"].endswith("NodeRestoredEvent")
    assert restored["source"]["path"] == f"/alice/files_trashbin/files/{item['name']}"
    assert restored["target"] == {"id": fid, "path": "/alice/files/Projects/old-notes.txt"}
    sim.delete("alice", "/Projects")
    assert sim.empty_trash("alice") == 1
    assert sim.path_of("alice", fid) is None


def test_share_views_and_mount_name_clash(sim) -> None:
    fid = sim.put_file("alice", "/Projects/spec.md", b"spec")
    sim.mkdir("bob", "/Projects")
    mount = sim.share("alice", "/Projects", "bob")
    assert mount == "/Projects (2)"
    assert sim.path_of("bob", fid) == "/Projects (2)/spec.md"
    assert sim.visible_files("bob") == {fid: "/Projects (2)/spec.md"}
    # the sharee deleting the mount point leaves the share instead of deleting alice's files
    sim.delete("bob", "/Projects (2)")
    assert sim.path_of("bob", fid) is None
    assert sim.path_of("alice", fid) == "/Projects/spec.md"


def test_deleting_a_shared_folder_removes_the_share(sim) -> None:
    fid = sim.put_file("alice", "/Team/a.md", b"a")
    sim.share("alice", "/Team", "bob")
    sim.delete("alice", "/Team")
    assert sim.path_of("bob", fid) is None
    sim.restore("alice", "Team")
    assert sim.path_of("alice", fid) == "/Team/a.md"
    assert sim.path_of("bob", fid) is None


def test_sample_corpus(sim) -> None:
    summary = load_sample_corpus(sim)
    assert summary.documents >= 300
    assert summary.users == SAMPLE_ACCOUNTS
    alice, bob = sim.visible_files("alice"), sim.visible_files("bob")
    assert len(alice) + len(bob) - len(set(alice) & set(bob)) == summary.documents
    shared = {fid for fid, path in bob.items() if path.startswith("/Shared Research/")}
    assert shared and shared <= set(alice)
    for owner, path, fid in summary.placements.values():
        name = path.rsplit("/", 1)[1]
        assert not re.search(r'[\\:*?"<>|]', name)
        assert sim.path_of(owner, fid) == path
    assert any(p.startswith("/Notes/") for p in alice.values())
    assert any(p.startswith("/Documents/") for p in bob.values())
    judged = {cid for q in sample_queries() for cid in q["corpus_ids"]}
    assert judged <= set(summary.placements)
    assert {o for o, _, _ in summary.formats.values()} == {"alice", "bob"}
    for name, (owner, path, fid) in summary.formats.items():
        assert sim.path_of(owner, fid) == path == f"/Documents/Formats/{name}"


def test_the_sample_format_files_are_read_by_their_extractors() -> None:
    from importlib import resources

    from ncindex.simulator.sample import FORMAT_FILES
    from ncindex.text.extract import extension_mime, extract_text

    folder = resources.files("ncindex.simulator").joinpath("data", "formats")
    texts = {}
    for name in FORMAT_FILES:
        data = folder.joinpath(name).read_bytes()
        mime = extension_mime(name)
        texts[name] = extract_text(data, mime_type=mime, filename=name, max_chars=10**5).text
    assert "hip fractures in older adults" in texts["Journal club.pptx"]
    assert "Serum samples from the malaria cohort" in texts["Freezer inventory.xlsx"]
    assert "balanced to within a tenth of a gram" in texts["Lab handbook.epub"]
    assert "gut bacteria change weight gain" in texts["Seminar invitation.eml"]
    assert "macrophage signals" in texts["Lab meeting.odp"]
    assert "insulin resistance cohort" in texts["Grant timeline.ods"]
    assert "resequence the tumour samples" in texts["Sequencing runs.csv"]
    assert "ethidium bromide" in texts["Safety notes.rtf"]


def test_recipient_folder_etags_change_with_shared_content(sim) -> None:
    sim.put_file("alice", "/Team/a.md", b"a")
    before_share = sim.node("bob", "/").etag
    sim.share("alice", "/Team", "bob", mount_path="/In/Team")
    assert sim.node("bob", "/").etag != before_share
    root, mount_parent = sim.node("bob", "/").etag, sim.node("bob", "/In").etag
    sim.put_file("alice", "/Team/a.md", b"changed")
    assert sim.node("bob", "/").etag != root
    assert sim.node("bob", "/In").etag != mount_parent
    root = sim.node("bob", "/").etag
    sim.unshare("alice", "/Team", "bob")
    assert sim.node("bob", "/").etag != root
