"""Failure handling: retries with backoff, the dead letter (corrupt, too large, killed its
worker), bounded extraction of a long PDF."""

from __future__ import annotations

import json
import time

import pypdf
import pytest
import redis
from celery.exceptions import SoftTimeLimitExceeded
from docmakers import corrupt_files, pdf_bytes
from pipeline_support import events_for, post_envelope

from ncindex.errors import NextcloudProtocolError, TransientError
from ncindex.index.deadletter import DeadLetters, Deliveries, node_subject
from ncindex.index.indexing import Indexer
from ncindex.ingest.viewers import viewers_of
from ncindex.settings import Settings
from support import Stack, wait_until
from workers import tasks


def parked(stack: Stack, file_id: int):
    return DeadLetters(stack.services.redis, stack.settings.names).get(node_subject(file_id))


def downloads_of(stack: Stack, path: str) -> int:
    return sum(1 for m, p, _ in stack.sim.request_log if m == "GET" and p.endswith(path))


def test_retry_policy_is_capped_exponential_with_jitter_below_the_visibility_timeout() -> None:
    for task in (tasks.index_node, tasks.evict_node, tasks.move_path, tasks.index_document):
        assert task.autoretry_for == (TransientError,)
        assert task.retry_backoff == 2 and task.retry_backoff_max == 300
        assert task.retry_jitter is True and task.max_retries == 8
        assert task.acks_late is True and task.reject_on_worker_lost is True
    settings = Settings()
    assert settings.task_soft_time_limit < settings.task_time_limit < settings.visibility_timeout
    assert settings.lock_ttl > settings.task_time_limit


def test_transient_nextcloud_errors_are_retried_until_indexed(stack: Stack) -> None:
    stack.sim.faults.set("webdav", status=503, times=2, method="GET")
    file_id = stack.sim.put_file("alice", "/Docs/retry.txt", b"Lantern oil is stored in cellar.")
    wait_until(lambda: stack.points(f"file:{file_id}"), 30)
    assert not stack.sim.faults.active()  # both faults were hit, then the download worked


@pytest.mark.parametrize("where", ["reader", "page"])
def test_the_soft_time_limit_inside_a_parser_parks_the_file_as_overrunning(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Celery raises the soft time limit wherever the task is; reaching a parser's catch-all it
    is the task overrunning, not the file unreadable (the reader's catch-all wrapped it in an
    ExtractionError) nor one bad page (the page's catch-all skipped it and read on)."""

    def overrun(*args: object, **kwargs: object) -> None:
        raise SoftTimeLimitExceeded()

    if where == "reader":
        monkeypatch.setattr(pypdf, "PdfReader", overrun)
    else:
        monkeypatch.setattr(pypdf.PageObject, "extract_text", overrun)
    file_id = stack.sim.put_file("alice", "/Docs/slow.pdf", pdf_bytes(["Tide tables."]))
    entry = wait_until(lambda: parked(stack, file_id), 30)
    assert entry.reason.startswith("processing exceeded the soft time limit"), entry.reason
    assert not stack.points(f"file:{file_id}")


def test_corrupt_pdf_goes_to_the_dead_letter_while_the_rest_proceed(stack: Stack) -> None:
    corrupt = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage without xref\n%%EOF"
    bad = stack.sim.put_file("alice", "/Docs/broken.pdf", corrupt)
    good = [
        stack.sim.put_file("alice", f"/Docs/fine{i}.txt", f"Lighthouse log {i}.".encode())
        for i in range(3)
    ]
    wait_until(lambda: all(stack.points(f"file:{i}") for i in good), 20)
    entry = wait_until(lambda: parked(stack, bad), 20)
    assert entry.reason.startswith("ExtractionError") and entry.user == "alice"
    assert entry.etag == stack.sim.node("alice", "/Docs/broken.pdf").etag
    assert not stack.points(f"file:{bad}")
    # the same etag again stays out: no download, still parked
    stack.wait_idle(15)
    downloads = downloads_of(stack, "/Docs/broken.pdf")
    post_envelope(stack, events_for(stack, bad, "NodeWrittenEvent")[0])
    stack.wait_idle(15)
    assert downloads_of(stack, "/Docs/broken.pdf") == downloads
    assert parked(stack, bad) is not None
    # a new version (new etag) is processed again and leaves the dead letter
    stack.sim.put_file("alice", "/Docs/broken.pdf", pdf_bytes(["Repaired quay wall survey."]))
    wait_until(lambda: stack.points(f"file:{bad}"), 20)
    assert parked(stack, bad) is None


def test_a_100_mb_file_is_parked_as_too_large_without_being_downloaded(stack: Stack) -> None:
    size = 100 * 1024 * 1024
    file_id = stack.sim.put_file("alice", "/Video/huge.txt", b"a" * size)
    entry = wait_until(lambda: parked(stack, file_id), 30)
    assert entry.reason.startswith("TooLarge") and str(size) in entry.reason
    assert downloads_of(stack, "/Video/huge.txt") == 0
    assert not stack.points(f"file:{file_id}")


def test_a_document_that_killed_its_worker_three_times_is_parked(stack: Stack) -> None:
    stack.sim.drop_rate = 1.0
    file_id = stack.sim.put_file("alice", "/Docs/poison.txt", b"Poisoned well water report.")
    # three earlier runs started, noted this version and never ended (what killed workers
    # leave behind)
    runs = Deliveries(
        redis.Redis.from_url(stack.settings.redis_url), stack.settings.names, ttl=3600
    )
    for _ in range(3):
        runs.start(node_subject(file_id))
        runs.working_on(node_subject(file_id), stack.sim.node("alice", "/Docs/poison.txt").etag)
    stack.sim.drop_rate = 0.0
    post_envelope(stack, stack.sim.dropped_deliveries[-1][1])
    entry = wait_until(lambda: parked(stack, file_id), 20)
    assert entry.reason == "worker lost 3 times while processing it"
    assert entry.deliveries == 3
    stack.wait_idle(15)
    assert not stack.points(f"file:{file_id}")
    # the next version is indexed (the count was reset when the parking run ended)
    stack.sim.put_file("alice", "/Docs/poison.txt", b"Clean well water report.")
    wait_until(lambda: stack.points(f"file:{file_id}"), 20)
    assert parked(stack, file_id) is None


def test_a_600_page_pdf_is_indexed_within_the_page_bound(stack: Stack) -> None:
    pages = [f"Page {n} of the tide table lists harbour depth {n * 3} cm." for n in range(1, 601)]
    file_id = stack.sim.put_file("alice", "/Docs/tides.pdf", pdf_bytes(pages))
    points = wait_until(lambda: stack.points(f"file:{file_id}"), 120)
    text = " ".join(p.payload["text"] for p in points)
    assert "Page 1 of the tide table" in text
    assert f"Page {stack.settings.max_pdf_pages} of the tide table" in text
    assert f"Page {stack.settings.max_pdf_pages + 1} of the tide table" not in text
    assert points[0].payload["chunk_count"] == len(points)


def test_a_maintenance_window_is_waited_out_honouring_retry_after(stack: Stack) -> None:
    stack.sim.maintenance_retry_after = 4  # Nextcloud sends 120; the countdown honours it
    stack.sim.maintenance = True
    file_id = stack.sim.put_file("alice", "/Docs/upgrade.txt", b"Lantern oil is in the cellar.")
    stack.sim.flush_deliveries(timeout=5)
    wait_until(lambda: stack.sim.request_count("dav-search") >= 1, 15)
    time.sleep(1.0)  # the file's task and its new folder's have both failed once
    searched = stack.sim.request_count("dav-search")
    time.sleep(2.0)  # still within Retry-After: no second attempt yet
    assert stack.sim.request_count("dav-search") == searched
    stack.sim.maintenance = False
    wait_until(lambda: stack.points(f"file:{file_id}"), 30)


def test_a_task_that_gave_up_in_an_outage_is_queued_again_once_nextcloud_answers(
    stack: Stack, monkeypatch
) -> None:
    from celery import current_app

    from ncindex import names
    from workers import base

    monkeypatch.setattr(base, "OUTAGE_PATIENCE_SECONDS", 0)  # give up at once (it is 900 s)
    monkeypatch.setattr(tasks.index_node, "max_retries", 1)
    stack.sim.maintenance_retry_after = 0
    stack.sim.maintenance = True
    file_id = stack.sim.put_file("alice", "/Docs/later.txt", b"Lantern oil is in the cellar.")
    stack.sim.flush_deliveries(timeout=5)
    parked_key = stack.settings.names.outage_parked
    wait_until(lambda: stack.services.redis.hlen(parked_key) >= 1, 30)
    stack.wait_idle(30)
    kept = [json.loads(v) for v in stack.services.redis.hvals(parked_key)]
    assert all(k["name"] == "ncindex.index_node" and k["queue"] == "index" for k in kept)
    assert any(k["kwargs"].get("file_id") == file_id for k in kept)  # and its new folder's
    assert not stack.points(f"file:{file_id}")
    stack.sim.maintenance = False
    # beat's ncindex.outage_requeue (every minute) asks /status.php, then sends it again
    current_app.send_task(names.OUTAGE_REQUEUE, queue=names.INGEST)
    wait_until(lambda: stack.points(f"file:{file_id}"), 30)
    assert stack.services.redis.hlen(parked_key) == 0


@pytest.mark.parametrize("status", [423, 503])
def test_a_file_nextcloud_cannot_open_is_retried_but_not_kept_as_an_outage(
    stack: Stack, monkeypatch, status: int
) -> None:
    """A file listed (its SEARCH by id answers) whose GET answers 423 (``FileLocked``) or 503
    (``ServiceUnavailable``: nextcloud/server ``apps/dav/lib/Connector/Sabre/File.php``
    ``get`` could not open it) is that file's failure, not an outage: its task retries and
    then fails with ``FileUnavailable``, and it is not parked to be sent again once
    Nextcloud answers (it does: a file that stays unopenable went round for good)."""
    from celery import current_app

    from ncindex import names
    from ncindex.progress import FailingDocuments
    from workers import base

    monkeypatch.setattr(base, "OUTAGE_PATIENCE_SECONDS", 0)  # give up at once (it is 900 s)
    monkeypatch.setattr(tasks.index_node, "max_retries", 1)
    stack.sim.drop_rate = 1.0  # the task is sent by hand, once the file is unopenable
    file_id = stack.sim.put_file("alice", "/Docs/stuck.txt", b"Lantern oil is in the cellar.")
    stack.sim.make_unopenable("alice", "/Docs/stuck.txt", status)
    subject = node_subject(file_id)
    failing = FailingDocuments(stack.services.redis, stack.settings.names)
    current_app.send_task(
        names.INDEX_NODE, kwargs={"user": "alice", "file_id": file_id}, queue=names.INDEX
    )
    failure = wait_until(lambda: (f := failing.get(subject)) and not f.retrying and f, 30)
    assert failure.last_error.startswith("FileUnavailable: GET /remote.php/dav/files/alice/")
    assert f"HTTP {status}" in failure.last_error
    assert stack.services.redis.hlen(stack.settings.names.outage_parked) == 0
    assert not stack.points(f"file:{file_id}")
    # opened again: the next event (or scan) indexes it
    stack.sim.make_unopenable("alice", "/Docs/stuck.txt", None)
    current_app.send_task(
        names.INDEX_NODE, kwargs={"user": "alice", "file_id": file_id}, queue=names.INDEX
    )
    wait_until(lambda: stack.points(f"file:{file_id}"), 30)


def test_a_corrupt_file_of_each_format_lands_in_the_dead_letter_with_its_reason(
    stack: Stack,
) -> None:
    cases = corrupt_files()
    ids = {name: stack.sim.put_file("alice", f"/Broken/{name}", data) for name, _, data, _ in cases}
    for name, _, _, reason in cases:
        entry = wait_until(lambda i=ids[name]: parked(stack, i), 30)
        assert entry.reason.startswith("ExtractionError") and reason in entry.reason, name
        assert not stack.points(f"file:{ids[name]}")


def test_a_search_by_id_answered_404_evicts_nothing(stack: Stack) -> None:
    """A SEARCH by id that Nextcloud answers 404 (its scope, the user's files root, not
    found: a proxy's or a user backend's failure) says nothing of the file — an id the user
    cannot see is an empty 207 (nextcloud/server ``apps/dav/lib/Files/FileSearchBackend.php``
    ``search``). ``find_by_id`` read it as "not visible": ``index_node`` evicted the file, and
    since b7ef578 ``resolve_node`` took it from every account holding it whose SEARCH said
    404. Now it is a ``NextcloudProtocolError`` and the index keeps the file."""
    stack.sim.drop_rate = 1.0  # driven by hand
    indexer = Indexer(stack.services)
    file_id = stack.sim.put_file("alice", "/Docs/basalt.md", b"# Basalt\nColumns of basalt.")
    indexer.index_node("alice", file_id)
    assert stack.points(f"file:{file_id}")
    stack.sim.faults.set("dav-search", status=404, method="SEARCH")
    try:
        with pytest.raises(NextcloudProtocolError):
            indexer.index_node("alice", file_id)
        found = viewers_of(stack.services, file_id)
        assert (found.seen, found.unseen) == ([], [])
        assert isinstance(found.failed["alice"], NextcloudProtocolError)
    finally:
        stack.sim.faults.clear()
    assert stack.points(f"file:{file_id}")
