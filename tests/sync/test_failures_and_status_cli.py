"""``ncindex failures``, ``ncindex retry`` and ``ncindex status`` (``--json``, ``--watch``) on
the whole stack: a document parked for being too large is listed with its path and MIME type,
and indexed once the limit is raised and it is retried; a corrupt one retried unchanged is
parked again; a document whose downloads fail is listed as failing until a retry succeeds."""

from __future__ import annotations

import json

from click.testing import CliRunner

from allinone.cli import main
from ncindex.index.deadletter import DeadLetters, node_subject
from ncindex.progress import FailingDocuments
from support import PASSWORDS, Stack, wait_until

CORRUPT = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage without xref\n%%EOF"


def cli_env(stack: Stack) -> dict[str, str]:
    return {
        "NCINDEX_NEXTCLOUD_URL": stack.settings.nextcloud_url,
        "NCINDEX_ACCOUNTS": json.dumps(PASSWORDS),
        "NCINDEX_REDIS_URL": stack.settings.redis_url,
        "NCINDEX_MODEL_DIR": str(stack.settings.model_dir),
        "NCINDEX_LOG_LEVEL": "WARNING",
    }


def run(stack: Stack, *args: str) -> str:
    result = CliRunner().invoke(main, list(args), env=cli_env(stack))
    assert result.exit_code == 0, result.output
    return result.output


def test_a_too_large_file_is_listed_and_indexed_after_the_fix_and_a_retry(stack: Stack) -> None:
    stack.settings.max_download_bytes = 2000
    text = " ".join(f"Paragraph {i} about the keeper's logbook." for i in range(80))
    big = stack.sim.put_file("alice", "/Docs/logbook.txt", text.encode())
    broken = stack.sim.put_file("alice", "/Docs/broken.pdf", CORRUPT)
    letters = DeadLetters(stack.services.redis, stack.settings.names)
    wait_until(lambda: letters.get(node_subject(big)) and letters.get(node_subject(broken)), 30)
    stack.wait_idle(30)

    listed = run(stack, "failures", "--user", "alice")
    assert f"node:{big}  alice  dead letter" in listed
    assert "file: /Docs/logbook.txt (text/plain)" in listed
    assert "file: /Docs/broken.pdf (application/pdf)" in listed
    assert "TooLarge" in listed and "ExtractionError" in listed
    rows = json.loads(run(stack, "failures", "--json"))
    assert {r["subject"] for r in rows} == {node_subject(big), node_subject(broken)}
    assert "no failed documents" in run(stack, "failures", "--user", "bob")

    stack.settings.max_download_bytes = 10_000_000  # the operator raises the limit
    out = run(stack, "retry", f"file:{big}")
    assert f"retrying node:{big} (alice)" in out and "1 sent back" in out
    wait_until(lambda: stack.points(f"file:{big}"), 30)
    assert letters.get(node_subject(big)) is None
    assert stack.found("alice", "keeper's logbook paragraph", f"file:{big}")

    before = letters.get(node_subject(broken))
    assert before is not None
    run(stack, "retry", "--all", "--user", "alice")
    again = wait_until(
        lambda: (e := letters.get(node_subject(broken))) and e.parked_at >= before.parked_at and e,
        30,
    )
    assert again.reason == before.reason  # the same bytes fail the same way
    stack.wait_idle(30)
    assert [r["subject"] for r in json.loads(run(stack, "failures", "--json"))] == [
        node_subject(broken)
    ]

    missing = CliRunner().invoke(main, ["retry", "file:999999"], env=cli_env(stack))
    assert missing.exit_code == 1 and "neither in the dead letter nor failing" in missing.output
    bad = CliRunner().invoke(main, ["retry", "folder:1"], env=cli_env(stack))
    assert bad.exit_code == 1 and "unknown doc type" in bad.output


def test_failing_downloads_are_listed_until_the_document_is_indexed(stack: Stack) -> None:
    """A file whose download fails is listed among the failing documents until it is indexed.
    The upload's two events (Created, Written) are read in a gathered batch, which leaves a
    file it cannot read to a task of its own, and that task's failure is what is listed. With
    two failing GETs one full CI run listed nothing within 30 s (it passed alone, and in the
    sync tests whole); the likely cause, not traced: the events fell into two batches, each
    took one failing GET, and the file's own task read it at once. Three failing GETs leave at
    least one to the file's own task however the events are gathered."""
    stack.sim.faults.set("webdav", status=503, times=3, method="GET")
    file_id = stack.sim.put_file("alice", "/Docs/flaky.txt", b"Flaky foghorn schedule.")
    failing = FailingDocuments(stack.services.redis, stack.settings.names)
    entry = wait_until(lambda: failing.get(node_subject(file_id)), 30)
    assert entry.user == "alice" and entry.retrying and entry.attempts >= 1
    # a GET's 503 out of maintenance mode is the file's (Sabre File::get), not an outage
    assert "FileUnavailable" in entry.last_error
    wait_until(lambda: stack.points(f"file:{file_id}"), 60)
    wait_until(lambda: failing.get(node_subject(file_id)) is None, 10)


def test_status_per_user_and_in_total(stack: Stack) -> None:
    ids = [
        stack.sim.put_file("alice", f"/Docs/buoy{i}.txt", f"Buoy {i} is red.".encode())
        for i in range(4)
    ]
    ids.append(stack.sim.put_file("bob", "/Docs/gull.txt", b"Gulls nest on the rock."))
    wait_until(lambda: all(stack.points(f"file:{i}") for i in ids), 30)
    stack.wait_idle(30)
    data = json.loads(run(stack, "status", "--json"))
    alice, bob = data["users"]["alice"], data["users"]["bob"]
    assert alice["pending"] == 0 and alice["first_indexing"]["state"] == "done"
    assert alice["first_indexing"]["finished"] >= 4 and bob["first_indexing"]["finished"] >= 1
    assert alice["rates"]["documents_per_second"] > 0 and bob["rates"]["documents_per_second"] > 0
    total = data["total"]["rates"]
    assert total["documents_per_second"] >= alice["rates"]["documents_per_second"]
    assert total["chunks_per_second"] > 0
    assert data["total"]["eta_seconds"] == 0.0 and data["total"]["pending"] == 0
    assert data["workers"], "the stack's worker answers a ping"
    assert "indexed" not in alice  # the embedded store belongs to the running process

    text = run(stack, "status")
    alice_line = text.split("user alice: ", 1)[1].splitlines()[0]
    assert alice_line.startswith(
        "indexed: ? (embedded store: counted with NCINDEX_QDRANT_URL only); pending 0"
    )
    assert "total: pending 0" in text
    watched = run(stack, "status", "--watch", "--interval", "0.1", "--iterations", "2")
    assert "alice" in watched and "100%" in watched and "per user" in watched
