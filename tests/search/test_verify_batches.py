"""Verify-on-read checks a page's files and notes together: one WebDAV SEARCH for all of them
(their file ids inside ``d:or``) against the simulator over HTTP, the verdicts each one alone
would get."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ncindex.errors import NextcloudAuthError
from ncindex.nextcloud import webdav
from ncindex.nextcloud.client import NextcloudClient, make_http
from ncindex.search.verify import Verdict, VerificationCounts, VerifyOnRead
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator


@pytest.fixture
def sim() -> Iterator[NextcloudSimulator]:
    """A simulator with alice and bob."""
    simulator = NextcloudSimulator(delivery_delay=(0.0, 0.0), seed=1)
    simulator.add_user("alice", "alice-pw", "Alice")
    simulator.add_user("bob", "bob-pw", "Bob")
    yield simulator
    simulator.close()


@pytest.fixture
def alice(sim: NextcloudSimulator) -> Iterator[NextcloudClient]:
    """Alice's ncindex client to the simulator served over HTTP."""
    with serve_simulator(sim) as server:
        http = make_http(Settings(nextcloud_url=server.url))
        yield NextcloudClient.for_account(http, "alice", "alice-pw")
        http.close()


def file_payload(file_id: int) -> dict[str, Any]:
    return {"doc_type": "file", "doc_id": str(file_id), "doc_key": f"file:{file_id}"}


def test_a_pages_files_are_checked_in_one_search(sim: NextcloudSimulator, alice) -> None:
    a = sim.put_file("alice", "/Projects/a.md", b"a")
    b = sim.put_file("alice", "/Projects/b.md", b"b")
    sim.put_file("bob", "/Shared with alice/c.md", b"c")
    sim.share("bob", "/Shared with alice", "alice", mount_path="/From Bob")
    c = sim.file_id("bob", "/Shared with alice/c.md")
    hidden = sim.put_file("bob", "/private.md", b"p")
    blocked = sim.put_file("alice", "/Locked/d.md", b"d")
    sim.block_access("alice", "/Locked")
    note = sim.put_file("alice", "/Notes/n.md", b"n")
    sim.reset_request_counts()
    payloads = [file_payload(i) for i in (a, hidden, b, c, blocked)]
    payloads.insert(2, {"doc_type": "note", "doc_id": str(note), "doc_key": f"note:{note}"})
    counts = VerificationCounts()
    verdicts = VerifyOnRead(4).check(alice, payloads, counts)
    assert [v.verdict for v in verdicts] == [
        Verdict.KEPT,
        Verdict.DROPPED,  # bob's, not shared
        Verdict.KEPT,  # the note: in the same SEARCH, as a file
        Verdict.KEPT,
        Verdict.KEPT,
        Verdict.DROPPED,  # listed without read permission
    ]
    assert [v.path for v in verdicts[:1] + verdicts[2:5]] == [
        "/Projects/a.md",
        "/Notes/n.md",
        "/Projects/b.md",
        "/From Bob/c.md",
    ]
    assert counts.checked == 6 and counts.kept == 4 and counts.dropped == 2
    assert sim.request_count("dav-search") == 1
    assert sim.request_count("notes") == 0


def note_payload(file_id: int) -> dict[str, Any]:
    return {"doc_type": "note", "doc_id": str(file_id), "doc_key": f"note:{file_id}"}


def test_notes_are_checked_as_files(sim: NextcloudSimulator, alice) -> None:
    kept = sim.put_file("alice", "/Notes/kept.md", b"k")
    moved = sim.put_file("alice", "/Notes/moved.md", b"m")
    sim.move("alice", "/Notes/moved.md", "/Archive/moved.md")
    gone = sim.put_file("alice", "/Notes/gone.md", b"g")
    sim.delete("alice", "/Notes/gone.md")
    sim.reset_request_counts()
    verdicts = VerifyOnRead(4).check(
        alice, [note_payload(i) for i in (kept, moved, gone)], VerificationCounts()
    )
    # moved out of the notes folder: still hers to read, found at its new path until its
    # move event indexes it as a file
    assert [(v.verdict, v.path) for v in verdicts] == [
        (Verdict.KEPT, "/Notes/kept.md"),
        (Verdict.KEPT, "/Archive/moved.md"),
        (Verdict.DROPPED, None),
    ]
    assert sim.request_count("dav-search") == 1
    assert sim.request_count("notes") == 0
    sim.reset_request_counts()
    (alone,) = VerifyOnRead(2).check(alice, [note_payload(kept)], VerificationCounts())
    assert (alone.verdict, alone.path) == (Verdict.KEPT, "/Notes/kept.md")
    assert sim.request_count("dav-search") == 1 and sim.request_count("notes") == 0


def test_one_file_is_checked_alone(sim: NextcloudSimulator, alice) -> None:
    a = sim.put_file("alice", "/a.md", b"a")
    sim.reset_request_counts()
    (checked,) = VerifyOnRead(2).check(alice, [file_payload(a)], VerificationCounts())
    assert checked.verdict is Verdict.KEPT and checked.path == "/a.md"
    assert sim.request_count("dav-search") == 1


def mock_client(handler: Any) -> tuple[NextcloudClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    settings = Settings(nextcloud_url="https://cloud.example.test/")
    http = make_http(settings, transport=httpx.MockTransport(record))
    return NextcloudClient.for_account(http, "alice", "pw"), seen


def test_a_failed_batch_keeps_every_file_as_an_error() -> None:
    """Nextcloud unreachable for the batch: each file is kept and counted as an error, as a
    lone check's failure would leave it (fail-open), after one request."""
    client, seen = mock_client(lambda r: httpx.Response(503))
    counts = VerificationCounts()
    verdicts = VerifyOnRead(2).check(client, [file_payload(i) for i in (1, 2, 3)], counts)
    assert [v.verdict for v in verdicts] == [Verdict.ERROR] * 3
    assert counts.errors == 3 and counts.kept == 3
    assert len(seen) == 1


def test_an_unreadable_payload_drops_only_itself() -> None:
    """A payload whose file id cannot be read fails the batch before any request; each
    candidate is then checked alone, so only that one is dropped (fail-closed)."""
    empty = b'<?xml version="1.0"?><d:multistatus xmlns:d="DAV:"/>'
    listed = (
        b'<?xml version="1.0"?><d:multistatus xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">'
        b"<d:response><d:href>/remote.php/dav/files/alice/x.md</d:href><d:propstat><d:prop>"
        b"<oc:fileid>7</oc:fileid><oc:permissions>RGDNVW</oc:permissions></d:prop>"
        b"<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>"
    )
    client, seen = mock_client(
        lambda r: httpx.Response(207, content=listed if b">7<" in r.content else empty)
    )
    payloads = [file_payload(7), {**file_payload(8), "doc_id": "not-a-number"}]
    verdicts = VerifyOnRead(2).check(client, payloads, VerificationCounts())
    assert [v.verdict for v in verdicts] == [Verdict.KEPT, Verdict.DROPPED]
    assert len(seen) == 1  # the lone check of file 7; the broken one asked nothing


def test_rejected_credentials_fail_the_batch() -> None:
    client, _ = mock_client(lambda r: httpx.Response(401))
    with pytest.raises(NextcloudAuthError):
        VerifyOnRead(2).check(client, [file_payload(1), file_payload(2)], VerificationCounts())


def test_many_ids_take_one_search_per_fifty() -> None:
    bodies: list[bytes] = []
    empty = b'<?xml version="1.0"?><d:multistatus xmlns:d="DAV:"/>'

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        return httpx.Response(207, content=empty)

    client, _ = mock_client(answer)
    assert client.find_by_ids(range(1, 121)) == {}
    assert [b.count(b"<d:eq>") for b in bodies] == [50, 50, 20]
    assert b"<d:nresults>1000</d:nresults>" in bodies[0]
    with pytest.raises(ValueError, match="1 to 50 file ids"):
        webdav.search_by_fileids_body("alice", list(range(51)))
