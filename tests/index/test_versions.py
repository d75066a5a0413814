"""A file version restored reaches the index through its one event, without a scan.

files_versions' ``Storage::rollback`` puts the version's bytes in place below the view and
touches the file: ``NodeTouchedEvent`` is the only event Nextcloud sends
(:mod:`ncindex.simulator.versions`)."""

from __future__ import annotations

import httpx
from pipeline_support import events_for

from support import PASSWORDS, Stack, wait_until

OLD = "The lighthouse keeper logs the foghorn schedule every evening by the harbour wall."
NEW = "Quarterly budget spreadsheet for the marketing offsite in Lisbon, with hotel costs."


def texts(stack: Stack, key: str) -> str:
    return " ".join(p.payload["text"] for p in stack.points(key))


def test_a_restored_version_is_found_at_once_and_the_text_it_replaced_is_gone(
    stack: Stack,
) -> None:
    revision = 1_767_000_000
    file_id = stack.sim.put_file("alice", "/Docs/memo.md", OLD.encode(), mtime=revision)
    key = f"file:{file_id}"
    wait_until(lambda: "lighthouse" in texts(stack, key), 30)
    stack.sim.put_file("alice", "/Docs/memo.md", NEW.encode(), mtime=revision + 600)
    stack.sim.flush_deliveries(timeout=5)
    wait_until(lambda: "Lisbon" in texts(stack, key), 30)
    stack.wait_idle(15)
    assert revision in stack.sim.versions("alice", "/Docs/memo.md")
    sent = len(stack.sim.events)
    # the versions tab's restore: MOVE of the version into the user's restore folder
    base = f"{stack.settings.nextcloud_url}/remote.php/dav/versions/alice"
    moved = httpx.request(
        "MOVE",
        f"{base}/versions/{file_id}/{revision}",
        headers={"Destination": f"{base}/restore/target"},
        auth=("alice", PASSWORDS["alice"]),
    )
    assert moved.status_code == 201
    restored = stack.sim.events[sent:]
    assert [e["event"]["class"].rsplit("\\", 1)[1] for e in restored] == [
        "BeforeNodeTouchedEvent",
        "NodeTouchedEvent",
    ]
    assert events_for(stack, file_id, "NodeTouchedEvent")
    stack.sim.flush_deliveries(timeout=5)
    wait_until(lambda: "lighthouse" in texts(stack, key), 30)  # no scan runs here
    stack.wait_idle(15)
    assert "Lisbon" not in texts(stack, key)
    (payload,) = {p.payload["content_hash"]: p.payload for p in stack.points(key)}.values()
    assert payload["modified_at"] == revision
    assert payload["etag"] == stack.sim.node("alice", "/Docs/memo.md").etag
    result = stack.found("alice", "lighthouse keeper foghorn schedule", key)
    assert result is not None and "Lisbon" not in str(result)
