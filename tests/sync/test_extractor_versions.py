"""A release that reads a format better reaches the documents indexed before it: the next
scans re-read, with their etags unchanged, the files (and News items) whose stored extraction
version is older than their format's now (:mod:`ncindex.text.versions`), paced by
``reconcile_page_requests``; the other files are not downloaded again. Real parts: simulator,
Redis, Celery worker, Qdrant Edge. Before, a file was downloaded again only when its etag
changed, so an upgrade never reached it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from allinone.cli import main
from allinone.status_view import extraction_lines
from ncindex.documents import DocType, text_hash
from ncindex.errors import ExtractionError
from ncindex.index.deadletter import DeadLetters, node_subject
from ncindex.index.indexing import Indexer
from ncindex.sources import file as file_source
from ncindex.sync.reconcile import RETRY_UNINDEXABLE_SECONDS, Reconciler, ScanState
from ncindex.sync.status import collect_status
from ncindex.text import versions
from support import Stack

#: A plain body as Thunderbird sends it (RFC 3676 ``format=flowed``): a paragraph in two
#: lines joined by the soft break after "the"; a release before ``format=flowed`` was read
#: kept the break.
LETTER = (
    "From: Alice Example <alice@example.org>\r\n"
    "To: Bob Example <bob@example.org>\r\n"
    "Subject: Harbour rota\r\n"
    "MIME-Version: 1.0\r\n"
    "Content-Type: text/plain; charset=UTF-8; format=flowed\r\n\r\n"
    "The harbour rota for the \r\n"
    "spring tides is on the board.\r\n"
)
#: What a release without ``format=flowed`` indexed of it: the soft break kept.
OLD_TEXT = (
    "# Harbour rota\n\nFrom: Alice Example <alice@example.org>\n"
    "To: Bob Example <bob@example.org>\n\nThe harbour rota for the\nspring tides is on the board."
)


class Recorder:
    """A producer that records the tasks it is asked to send (nothing runs them)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send_task(self, name: str, **options: Any) -> None:
        self.sent.append(options.get("kwargs", {}))

    @property
    def files(self) -> list[int]:
        """The file ids of the index tasks sent (an ``index_nodes`` batch counts each)."""
        return [i for k in self.sent for i in k.get("file_ids", [k.get("file_id")])]


def downloads(stack: Stack, suffix: str) -> int:
    """WebDAV GETs of files whose path ends with ``suffix`` since the counts were reset."""
    return sum(
        1
        for method, path, _ in stack.sim.request_log
        if method == "GET" and "/remote.php/dav/files/" in path and path.endswith(suffix)
    )


def first_payload(stack: Stack, doc_key: str) -> dict[str, Any]:
    points = stack.points(doc_key)
    assert points, f"{doc_key} is not indexed"
    return next(p.payload for p in points if p.payload["chunk_index"] == 0)


def as_before_the_fields(stack: Stack, doc_key: str, **payload: Any) -> None:
    """Make ``doc_key``'s stored version look written by a release without the extraction
    fields (and with ``payload`` besides): ``None`` reads as absent."""
    stack.services.store.set_payload(
        doc_key, {"extractor": None, "extractor_version": None, **payload}
    )


def letters_bumped(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, *, letters: int, in_flight: int
) -> Reconciler:
    """``letters`` e-mails of alice's indexed, then a release that bumps ``eml`` to 2 with
    ``in_flight`` re-reads at a time (``reconcile_page_requests``): the reconciler to scan
    with, whose tasks are recorded and never run (as if they failed)."""
    for i in range(letters):
        stack.sim.put_file("alice", f"/Mail/m{i}.eml", LETTER.replace("rota", f"rota {i}"))
    stack.settle()
    monkeypatch.setattr(versions, "EXTRACTOR_VERSIONS", {**versions.EXTRACTOR_VERSIONS, "eml": 2})
    stack.settings.reconcile_page_requests = in_flight
    return Reconciler(stack.services, Indexer(stack.services), Recorder())


def test_an_upgrade_rereads_a_file_its_extraction_improves_not_the_others(rstack: Stack) -> None:
    sim = rstack.sim
    sim.put_file("alice", "/Mail/rota.eml", LETTER)
    sim.put_file("alice", "/Docs/plain.md", "# Plain\n\nA markdown file about buoys.")
    rstack.settle()
    letter = f"file:{sim.file_id('alice', '/Mail/rota.eml')}"
    plain = f"file:{sim.file_id('alice', '/Docs/plain.md')}"
    etags = {k: first_payload(rstack, k)["etag"] for k in (letter, plain)}
    sim.drop_rate = 1.0  # from here on only the scans see anything
    rstack.reconcile(["alice"])  # clean: keeps the folder etags, so the next walk skips them

    # both as a release without the fields left them; the letter with its old text
    as_before_the_fields(rstack, letter, text=OLD_TEXT, content_hash=text_hash(OLD_TEXT))
    as_before_the_fields(rstack, plain)
    sim.reset_request_counts()
    rstack.reconcile(["alice"])
    assert downloads(rstack, "/rota.eml") == 1  # eml is version 1: read again
    assert downloads(rstack, "/plain.md") == 0  # markdown is version 0: not downloaded
    now = first_payload(rstack, letter)
    assert (now["extractor"], now["extractor_version"], now["etag"]) == ("eml", 1, etags[letter])
    assert "The harbour rota for the spring tides is on the board." in now["text"]
    assert now["content_hash"] != text_hash(OLD_TEXT)
    last = ScanState(rstack.services.redis, "alice", DocType.FILE, rstack.settings.names).last()
    assert last is not None and last["outdated"] == 1 and last["clean"], last
    assert last["changes"]["extractor"] == 1

    sim.reset_request_counts()
    rstack.reconcile(["alice"])  # up to date now: nothing is downloaded
    assert downloads(rstack, ".eml") == downloads(rstack, ".md") == 0
    assert first_payload(rstack, plain)["etag"] == etags[plain]
    # a file read since carries the fields: the markdown file, changed now
    sim.drop_rate = 0.0
    sim.put_file("alice", "/Docs/plain.md", "# Plain\n\nA markdown file about buoys, edited.")
    rstack.settle()
    stored = first_payload(rstack, plain)
    assert (stored["extractor"], stored["extractor_version"]) == ("markdown", 0)


def test_a_format_bumped_again_is_reread_at_the_pace_of_the_page_limit(
    rstack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five letters, a release bumping ``eml`` to 2 and two documents a scan: 2, 2 and 1 are
    read again by three scans; the markdown file never."""
    sim = rstack.sim
    for i in range(5):
        sim.put_file("alice", f"/Mail/m{i}.eml", LETTER.replace("rota", f"rota {i}"))
    sim.put_file("alice", "/Docs/plain.md", "# Plain\n\nA markdown file about buoys.")
    rstack.settle()
    sim.drop_rate = 1.0
    rstack.reconcile(["alice"])
    monkeypatch.setattr(versions, "EXTRACTOR_VERSIONS", {**versions.EXTRACTOR_VERSIONS, "eml": 2})
    rstack.settings.reconcile_page_requests = 2
    state = ScanState(rstack.services.redis, "alice", DocType.FILE, rstack.settings.names)
    read: list[int] = []
    outdated: list[int] = []
    shown: list[list[str]] = []
    for _ in range(4):
        sim.reset_request_counts()
        rstack.reconcile(["alice"])
        read.append(downloads(rstack, ".eml"))
        assert downloads(rstack, ".md") == 0
        last = state.last()
        assert last is not None
        outdated.append(last["outdated"])
        status = collect_status(rstack.services.redis, rstack.settings.names)
        shown.append(extraction_lines(status["outdated_extraction"]))
    assert read == [2, 2, 1, 0]
    assert outdated == [5, 3, 1, 0]
    assert shown == [
        ["extraction: 5 documents read by an older extractor, being read again by the scans"],
        ["extraction: 3 documents read by an older extractor, being read again by the scans"],
        ["extraction: 1 document read by an older extractor, being read again by the scans"],
        [],
    ]
    ids = [sim.file_id("alice", f"/Mail/m{i}.eml") for i in range(5)]
    assert all(first_payload(rstack, f"file:{i}")["extractor_version"] == 2 for i in ids)


def test_documents_sent_to_be_reread_are_not_sent_again_while_their_tasks_wait(
    rstack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nobody running the tasks (a worker behind), a second scan sends none of the
    documents the first one sent, and no others either: two are in flight already."""
    sim = rstack.sim
    for i in range(4):
        sim.put_file("alice", f"/Mail/m{i}.eml", LETTER)
    rstack.settle()
    monkeypatch.setattr(versions, "EXTRACTOR_VERSIONS", {**versions.EXTRACTOR_VERSIONS, "eml": 2})
    rstack.settings.reconcile_page_requests = 2
    recorder = Recorder()
    rec = Reconciler(rstack.services, Indexer(rstack.services), recorder)
    first = rec.scan("alice", DocType.FILE)
    assert [c.reason for c in first.reread] == ["extractor", "extractor"]
    assert first.outdated == 4 and len(recorder.files) == 2
    dry = rec.scan("alice", DocType.FILE, apply=False)  # a dry run reports, holds the same
    assert dry.reread == [] and dry.outdated == 4
    second = rec.scan("alice", DocType.FILE)
    assert second.reread == [] and second.outdated == 4 and len(recorder.files) == 2


def test_a_news_item_read_by_an_older_html_extraction_is_read_again(rstack: Stack) -> None:
    sim = rstack.sim
    feed = sim.news_add_feed("alice", "https://blog.example.test/feed", "Harbour blog")
    item = sim.news_add_item("alice", feed, "Tides", "<p>Spring tide at noon</p>")
    rstack.reconcile(["alice"])
    key = f"news_item:{item}"
    stored = first_payload(rstack, key)
    assert (stored["extractor"], stored["extractor_version"]) == ("html", 1)
    as_before_the_fields(rstack, key)
    dry = Reconciler(rstack.services, Indexer(rstack.services), None).scan(
        "alice", DocType.NEWS_ITEM, apply=False
    )
    assert [(c.doc_id, c.reason) for c in dry.reread] == [(str(item), "extractor")]
    rstack.reconcile(["alice"])
    assert first_payload(rstack, key)["extractor_version"] == 1


def test_ncindex_status_prints_the_documents_an_older_extraction_read(rstack: Stack) -> None:
    """The README's "extraction: N documents read by an older extractor" line of ``ncindex
    status``: only ``--watch``'s frame had it, the printed status (and so an admin checking an
    upgrade in a shell or a cron job) said nothing of the documents being read again."""
    sim = rstack.sim
    sim.put_file("alice", "/Mail/rota.eml", LETTER)
    rstack.settle()
    letter = f"file:{sim.file_id('alice', '/Mail/rota.eml')}"
    as_before_the_fields(rstack, letter, text=OLD_TEXT, content_hash=text_hash(OLD_TEXT))
    rstack.reconcile(["alice"])  # finds it outdated, and reads it again
    env = {
        "NCINDEX_REDIS_URL": rstack.settings.redis_url,
        "NCINDEX_NAMESPACE": rstack.settings.namespace,
        "NCINDEX_ACCOUNTS": '{"alice": "pw"}',
    }
    result = CliRunner().invoke(main, ["status"], env=env)
    assert result.exit_code == 0, result.output
    line = "extraction: 1 document read by an older extractor, being read again by the scans"
    assert line in result.output.splitlines(), result.output
    result = CliRunner().invoke(main, ["status", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["outdated_extraction"] == 1


def test_a_failed_scan_keeps_the_count_of_the_documents_left_to_read_again(
    rstack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan that fails (Nextcloud in maintenance mode: what an upgrade of Nextcloud beside
    ncindex's shows) compared nothing; its summary said ``outdated`` 0, so ``ncindex status``
    dropped the "extraction:" line while every document it counted still waited."""
    rec = letters_bumped(rstack, monkeypatch, letters=3, in_flight=1)
    assert rec.scan("alice", DocType.FILE).outdated == 3
    rstack.sim.maintenance = True
    failed = rec.scan("alice", DocType.FILE)
    assert failed.error is not None and failed.outdated == 0
    status = collect_status(rstack.services.redis, rstack.settings.names)
    assert status["scans"]["alice:file"]["error"] == failed.error
    assert status["outdated_extraction"] == 3


def test_documents_whose_reread_did_not_take_go_after_those_never_sent(
    rstack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Documents sent a day ago and still outdated (their tasks failed: nothing runs them
    here) were due again ahead of all the others, being the longest indexed: as many such
    documents as ``reconcile_page_requests`` kept every other outdated document of the user
    from ever being read again. They go after those never sent now."""
    rec = letters_bumped(rstack, monkeypatch, letters=4, in_flight=2)
    state = ScanState(rstack.services.redis, "alice", DocType.FILE, rstack.settings.names)

    def a_day_later() -> None:
        day = RETRY_UNINDEXABLE_SECONDS
        state.set_tried({k: (etag, at - day) for k, (etag, at) in state.tried().items()})

    first = {c.doc_id for c in rec.scan("alice", DocType.FILE).reread}
    a_day_later()
    second = {c.doc_id for c in rec.scan("alice", DocType.FILE).reread}
    assert len(first) == len(second) == 2 and not first & second, (first, second)
    a_day_later()
    third = rec.scan("alice", DocType.FILE)  # all four sent before now: the longest indexed
    assert third.outdated == 4 and len(third.reread) == 2


def letters_unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A release whose ``eml`` reader (version 2) raises on every e-mail."""
    monkeypatch.setattr(versions, "EXTRACTOR_VERSIONS", {**versions.EXTRACTOR_VERSIONS, "eml": 2})
    read = file_source.extract_text

    def extract_text(data: bytes, **kw: Any) -> Any:
        if kw["filename"].endswith(".eml"):
            raise ExtractionError("eml reader 2: broken")
        return read(data, **kw)

    monkeypatch.setattr(file_source, "extract_text", extract_text)


def test_a_reread_for_the_version_that_fails_keeps_the_text_searchable(
    rstack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A letter indexed by ``eml`` 1, then a release whose reader raises on its unchanged
    bytes: the worker deleted its points and parked it, so an upgrade made a searchable
    letter disappear. Now its points stay as they were, it is not parked, and it stays
    outdated for the scans to send again after their hold."""
    sim = rstack.sim
    sim.put_file("alice", "/Mail/rota.eml", LETTER)
    rstack.settle()
    file_id = sim.file_id("alice", "/Mail/rota.eml")
    key = f"file:{file_id}"
    before = [(p.id, p.payload) for p in rstack.points(key)]
    sim.drop_rate = 1.0  # only the scans see anything
    letters_unreadable(monkeypatch)
    sim.reset_request_counts()
    rstack.reconcile(["alice"])
    assert downloads(rstack, "/rota.eml") == 1  # read again, and its reader raised
    assert [(p.id, p.payload) for p in rstack.points(key)] == before
    letters = DeadLetters(rstack.services.redis, rstack.settings.names)
    assert letters.get(node_subject(file_id)) is None
    last = ScanState(rstack.services.redis, "alice", DocType.FILE, rstack.settings.names).last()
    assert last is not None and last["outdated"] == 1, last
    assert rstack.found("alice", "harbour rota spring tides", key) is not None


def test_a_new_version_of_a_file_that_fails_is_still_parked_and_removed(
    rstack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guard (passes before and after the change): an e-mail changed (a new etag) whose
    reader raises loses its old text and is parked, as before."""
    sim = rstack.sim
    sim.put_file("alice", "/Mail/rota.eml", LETTER)
    rstack.settle()
    file_id = sim.file_id("alice", "/Mail/rota.eml")
    letters_unreadable(monkeypatch)
    sim.put_file("alice", "/Mail/rota.eml", LETTER.replace("rota", "rota, edited"))
    rstack.settle()
    assert rstack.points(f"file:{file_id}") == []
    parked = DeadLetters(rstack.services.redis, rstack.settings.names).get(node_subject(file_id))
    assert parked is not None and parked.reason.startswith("ExtractionError"), parked
