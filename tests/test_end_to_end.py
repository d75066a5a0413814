"""The main job end to end on real parts: simulator webhook → receiver → Redis → Celery worker
→ fastembed → Qdrant Edge → verified hybrid search."""

from __future__ import annotations

import time

from support import Stack, wait_until

PLAN = (
    "# Lighthouse maintenance plan\n\n"
    "The lighthouse lens must be polished every spring. Replace the brass fittings on the "
    "lantern gallery before the autumn storms.\n\n"
    "## Budget\n\nKeep two thousand euros aside for the foghorn compressor."
)


def note_key(stack: Stack, user: str, path: str) -> str:
    file_id = stack.sim.file_id(user, path)
    assert file_id is not None
    return f"note:{file_id}"


def test_created_note_is_searchable_within_10_seconds(stack: Stack) -> None:
    stack.sim.put_file("alice", "/Notes/Lighthouse.md", PLAN.encode())
    key = note_key(stack, "alice", "/Notes/Lighthouse.md")
    stack.sim.flush_deliveries(timeout=5)
    started = time.monotonic()
    result = wait_until(lambda: stack.found("alice", "polishing the lighthouse lens", key), 10)
    assert time.monotonic() - started < 10
    assert result["title"] == "Lighthouse"
    assert result["path"] == "/Notes/Lighthouse.md"
    assert "<mark>lighthouse</mark>" in result["snippet"].lower()


def test_deleted_note_is_never_returned_again(stack: Stack) -> None:
    stack.sim.put_file("alice", "/Notes/Lighthouse.md", PLAN.encode())
    key = note_key(stack, "alice", "/Notes/Lighthouse.md")
    wait_until(lambda: stack.points(key), 15)
    # the creation's later events done too: a task still queued would evict it by itself
    stack.sim.flush_deliveries(timeout=5)
    stack.wait_idle(15)
    # Deliveries are lost: only verify-on-read stands between the index and the user.
    stack.sim.drop_rate = 1.0
    stack.sim.delete("alice", "/Notes/Lighthouse.md")
    body = stack.search_as("alice", "lighthouse lens foghorn")
    assert key not in {f"{r['doc_type']}:{r['doc_id']}" for r in body["results"]}
    assert body["verification"]["dropped"] >= 1
    # The drop enqueued a re-check, which evicts the points shortly after.
    wait_until(lambda: not stack.points(key), 10)
    assert stack.found("alice", "lighthouse lens foghorn", key) is None


def test_deleted_note_is_evicted_through_its_webhook(stack: Stack) -> None:
    stack.sim.put_file("alice", "/Notes/Lighthouse.md", PLAN.encode())
    key = note_key(stack, "alice", "/Notes/Lighthouse.md")
    wait_until(lambda: stack.points(key), 15)
    stack.sim.delete("alice", "/Notes/Lighthouse.md")
    stack.sim.flush_deliveries(timeout=5)
    wait_until(lambda: not stack.points(key), 10)


def test_rename_keeps_document_findable_without_embedding_again(stack: Stack) -> None:
    stack.sim.put_file("alice", "/Documents/lighthouse.md", PLAN.encode())
    file_id = stack.sim.file_id("alice", "/Documents/lighthouse.md")
    key = f"file:{file_id}"
    wait_until(lambda: stack.points(key), 15)
    embedded_before = stack.services.embedder.dense_embedded
    stack.sim.move("alice", "/Documents/lighthouse.md", "/Archive/2026/lighthouse-plan.md")
    stack.sim.flush_deliveries(timeout=5)
    new_path = "/Archive/2026/lighthouse-plan.md"
    # the result's path is verified against Nextcloud at once; wait for the index's own copy
    # (a task still writing the old path when the rename landed re-checks and re-paths it)
    wait_until(lambda: stack.points(key)[0].payload["paths"]["alice"] == new_path, 10)
    moved = stack.found("alice", "lighthouse brass fittings", key)
    assert moved is not None and moved["path"] == new_path
    assert moved["title"] == "lighthouse-plan.md"
    assert stack.points(key)[0].payload["folder_ancestors"] == [
        "alice:/",
        "alice:/Archive",
        "alice:/Archive/2026",
    ]
    assert stack.services.embedder.dense_embedded == embedded_before


def test_folder_move_repaths_every_child(stack: Stack) -> None:
    for name in ("a", "b"):
        stack.sim.put_file("alice", f"/Projects/{name}.md", f"{name} {PLAN}".encode())
    ids = [stack.sim.file_id("alice", f"/Projects/{n}.md") for n in ("a", "b")]
    wait_until(lambda: all(stack.points(f"file:{i}") for i in ids), 20)
    stack.sim.move("alice", "/Projects", "/Archive/Projects")
    stack.sim.flush_deliveries(timeout=5)
    wait_until(
        lambda: all(
            stack.points(f"file:{i}")[0].payload["paths"]["alice"].startswith("/Archive/Projects/")
            for i in ids
        ),
        10,
    )


def test_private_note_of_another_user_never_appears(stack: Stack) -> None:
    stack.sim.put_file("alice", "/Notes/Secret.md", b"# Secret\nThe vault code is zebra-42-mango.")
    stack.sim.put_file("bob", "/Notes/Mine.md", b"# Mine\nBob grows tomatoes and basil.")
    secret = note_key(stack, "alice", "/Notes/Secret.md")
    wait_until(lambda: stack.points(secret), 15)
    wait_until(lambda: stack.points(note_key(stack, "bob", "/Notes/Mine.md")), 15)
    for query in ("vault code zebra-42-mango", "secret", "tomatoes", "a", "the vault"):
        body = stack.search_as("bob", query)
        keys = {f"{r['doc_type']}:{r['doc_id']}" for r in body["results"]}
        assert secret not in keys
        assert body["verification"]["dropped"] == 0  # filtered by acl, not by luck


def test_every_chunk_text_equals_the_extracted_text_between_its_offsets(stack: Stack) -> None:
    long_note = "\n\n".join(
        f"## Section {i}\n\n"
        + " ".join(f"Sentence {i}.{j} about ocean currents." for j in range(12))
        for i in range(15)
    )
    stack.sim.put_file("alice", "/Notes/Ocean.md", long_note.encode())
    key = note_key(stack, "alice", "/Notes/Ocean.md")
    points = wait_until(lambda: stack.points(key), 30)
    assert len(points) > 3
    assert [p.payload["chunk_index"] for p in points] == list(range(len(points)))
    for point in points:
        payload = point.payload
        assert long_note[payload["char_start"] : payload["char_end"]] == payload["text"]
        assert payload["chunk_count"] == len(points)
