"""Scans of a big account paged across tasks (issue 20, :mod:`ncindex.sync.paging`): a few
thousand documents with a page of five requests, so one scan takes many pages.

Nothing is compared, enqueued or removed before the last page; the final report matches a scan
made in one pass; a page that fails (or a worker killed mid-page, its task redelivered) is
listed again from the last page kept, not from the start; a duplicate continuation is stale.
"""

from __future__ import annotations

import contextlib
import json
import math
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from celery.contrib.testing.worker import start_worker
from pydantic import SecretStr

from ncindex import names
from ncindex.documents import DocRef, DocType, path_fields, point_id, principal, text_hash
from ncindex.index.indexing import Indexer
from ncindex.ingest.queueing import celery_app
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, SimulatorServer, serve_simulator
from ncindex.store import model_slug
from ncindex.store.port import PointRecord, SparseVector
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.sync.paging import ListingPages
from ncindex.sync.reconcile import Reconciler, ScanReport, ScanState, pending_key
from support import WorkerDeployment, copy_store, wait_until
from workers.celery_app import create_celery

FILES, FOLDERS, NOTES = 1200, 60, 300
PAGE = 5
DIM = 384
GHOSTS = {DocType.FILE: [900_001, 900_002, 900_003], DocType.NOTE: [900_101, 900_102]}


class Recorder:
    """A producer that records the tasks it is asked to send (nothing runs them)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send_task(self, name: str, **options: Any) -> None:
        self.sent.append((name, options.get("kwargs", {})))


def fill(sim: NextcloudSimulator) -> None:
    """``FILES`` markdown files in ``FOLDERS`` folders two levels deep and ``NOTES`` notes in
    three categories, written without events."""
    for i in range(FILES):
        path = f"/Docs/Area {i % 4}/Folder {i % FOLDERS:02d}/f{i:05d}.md"
        sim.put_file("alice", path, f"# File {i}\nbuoy {i}\n", session=False)
    for i in range(NOTES):
        sim.put_file("alice", f"/Notes/Cat {i % 3}/n{i:05d}.md", f"# Note {i}\nkelp {i}\n")


def ghost_points(
    store: QdrantEdgeStore,
    ghosts: dict[DocType, list[int]] = GHOSTS,
    indexed_at: int = 1767225600,
) -> None:
    """One indexed document per id of ``ghosts`` that Nextcloud does not have: a scan
    removes them (re-checks them by id) once the whole listing has missed them."""
    unit = [1.0 / math.sqrt(DIM)] * DIM
    points = []
    for doc_type, ids in ghosts.items():
        for i in ids:
            ref = DocRef(doc_type, str(i))
            text = f"gone {i}"
            path = f"/Notes/Gone/{i}.md" if doc_type is DocType.NOTE else f"/Gone/{i}.md"
            payload = {
                "doc_type": doc_type.value,
                "doc_id": ref.doc_id,
                "doc_key": ref.key,
                "acl": [principal("alice")],
                "text": text,
                "chunk_index": 0,
                "chunk_count": 1,
                "content_hash": text_hash(text),
                "etag": "gone",
                "indexed_at": indexed_at,
                "tags": [],
            } | path_fields({"alice": path})
            points.append(
                PointRecord(
                    id=point_id(ref, payload["content_hash"], 0),
                    payload=payload,
                    dense=unit,
                    sparse=SparseVector([i % 30000], [1.0]),
                )
            )
    store.upsert(points)


@dataclass
class Big:
    sim: NextcloudSimulator
    server: SimulatorServer
    settings: Settings
    services: Services

    def state(self, doc_type: DocType) -> ScanState:
        return ScanState(self.services.redis, "alice", doc_type, self.settings.names)

    def pages(self, doc_type: DocType, page: int | None = None) -> ListingPages:
        return ListingPages(self.state(doc_type), self.settings.reconcile_page_requests, page)

    def kept(self, doc_type: DocType) -> list[bytes]:
        """The Redis keys of the pages kept for ``doc_type``."""
        return list(self.services.redis.scan_iter(f"{self.state(doc_type).base}:pages*"))


@pytest.fixture(scope="module")
def filled() -> Iterator[tuple[NextcloudSimulator, SimulatorServer]]:
    sim = NextcloudSimulator()
    sim.add_user("alice", password="alice-pw")
    fill(sim)
    server = serve_simulator(sim, host="127.0.0.1", port=0)
    yield sim, server
    server.close()
    sim.close()


@pytest.fixture
def big(
    filled: tuple[NextcloudSimulator, SimulatorServer],
    redis_url: str,
    tmp_path: Path,
    empty_store: Path,
) -> Iterator[Big]:
    sim, server = filled
    sim.faults.clear()
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    settings = Settings(
        nextcloud_url=server.url,
        accounts={"alice": SecretStr("alice-pw")},
        redis_url=redis_url,
        data_dir=tmp_path,
        reconcile_grace_seconds=0,
        reconcile_page_requests=PAGE,
        reconcile_notes_chunk_size=10,
    )
    # a copy of the session's empty store (the default model's, DIM wide): creating the
    # payload indexes anew took seconds a test
    copy_store(empty_store, tmp_path / "qdrant")
    store = QdrantEdgeStore(tmp_path / "qdrant", model_slug(settings.dense_model))
    store.ensure_collection(DIM)
    ghost_points(store)
    services = Services(settings, store=store)
    yield Big(sim, server, settings, services)
    services.close()
    client.flushdb()


def page_through(
    rec: Reconciler, big: Big, doc_type: DocType, *, start: int | None = None
) -> list[ScanReport]:
    """Run scan pages as the task chain does, from continuation ``start``, to the end."""
    reports: list[ScanReport] = []
    page = start
    while True:
        pages = big.pages(doc_type, page)
        assert not pages.stale()
        report = rec.scan("alice", doc_type, pages=pages)
        reports.append(report)
        if not report.partial:
            return reports
        page = report.pages


@pytest.mark.parametrize("doc_type", [DocType.FILE, DocType.NOTE])
def test_nothing_is_removed_before_the_listing_is_complete(big: Big, doc_type: DocType) -> None:
    recorder = Recorder()
    rec = Reconciler(big.services, Indexer(big.services), recorder)
    one_pass = rec.scan("alice", doc_type, apply=False)
    assert {c.doc_id for c in one_pass.remove} == {str(i) for i in GHOSTS[doc_type]}

    state = big.state(doc_type)
    first = rec.scan("alice", doc_type, pages=big.pages(doc_type))
    assert first.partial and first.pages == 1 and first.requests == PAGE
    assert not first.clean
    # a partial listing: nothing sent, nothing missing, nothing recorded
    assert recorder.sent == [] and state.missing_since() == {} and state.last() is None
    assert big.kept(doc_type)

    rest = page_through(rec, big, doc_type, start=1)
    for report in rest[:-1]:
        assert report.partial and report.requests == PAGE
    final = rest[-1]
    assert final.pages == 1 + len(rest) == math.ceil(one_pass.requests / PAGE) > 5
    assert final.listed == one_pass.listed
    assert final.requests == one_pass.requests
    assert final.counts() == one_pass.counts()
    assert {c.doc_id for c in final.remove} == {str(i) for i in GHOSTS[doc_type]}
    assert final.enqueued == len(one_pass.index) + len(one_pass.remove)
    # the scan is reported from the start of its first page
    assert first.started_at <= final.started_at <= rest[0].started_at
    last = state.last()
    assert last is not None and last["pages"] == final.pages and not last["partial"]
    assert big.kept(doc_type) == []  # the pages are gone once the scan is over


def test_a_document_indexed_while_the_listing_is_paged_is_not_judged_missing(big: Big) -> None:
    rec = Reconciler(big.services, Indexer(big.services), Recorder())
    first = rec.scan("alice", DocType.FILE, pages=big.pages(DocType.FILE))
    assert first.partial
    # written after the first page: it may lie in a folder listed before it came
    ghost_points(big.services.store, {DocType.FILE: [900_009]}, indexed_at=int(time.time()) + 1)
    final = page_through(rec, big, DocType.FILE, start=1)[-1]
    assert final.indexed == len(GHOSTS[DocType.FILE]) + 1
    assert {c.doc_id for c in final.remove} == {str(i) for i in GHOSTS[DocType.FILE]}
    assert "900009" not in {c.doc_id for c in final.waiting + final.held}


def test_a_failed_page_is_listed_again_from_the_last_page_kept(big: Big) -> None:
    rec = Reconciler(big.services, Indexer(big.services), Recorder())
    one_pass = rec.scan("alice", DocType.FILE, apply=False)
    page = None
    for _ in range(3):
        report = rec.scan("alice", DocType.FILE, pages=big.pages(DocType.FILE, page))
        assert report.partial
        page = report.pages
    # the fourth page fails half-way (Nextcloud answers 503 after two folders), like a
    # worker that dies there: the three pages kept stay, and the page is not
    big.sim.faults.set("webdav", status=503, method="PROPFIND")
    failed = rec.scan("alice", DocType.FILE, pages=big.pages(DocType.FILE, page))
    assert failed.error is not None and "Unavailable" in failed.error
    assert big.kept(DocType.FILE)
    big.sim.faults.clear()
    # the task of page 3 redelivered resumes there; a duplicate of page 2 is stale
    assert big.pages(DocType.FILE, 2).stale()
    big.sim.reset_request_counts()
    rest = page_through(rec, big, DocType.FILE, start=page)
    assert big.sim.request_count("webdav", "PROPFIND") == one_pass.requests - 3 * PAGE
    final = rest[-1]
    assert final.pages == 3 + len(rest)
    assert final.counts() == one_pass.counts() and final.listed == one_pass.listed


def test_a_page_that_fails_for_good_starts_the_listing_again(big: Big) -> None:
    rec = Reconciler(big.services, Indexer(big.services), Recorder())
    assert rec.scan("alice", DocType.FILE, pages=big.pages(DocType.FILE)).partial
    big.sim.faults.set("webdav", status=400, method="PROPFIND")  # not transient
    failed = rec.scan("alice", DocType.FILE, pages=big.pages(DocType.FILE, 1))
    assert failed.error is not None
    assert big.kept(DocType.FILE) == []
    assert big.pages(DocType.FILE, 1).stale()


@contextlib.contextmanager
def scanning(big: Big, page: int | None = None, pending_key: str | None = None) -> Iterator[Celery]:
    """A solo worker of the reconcile queue on ``big``'s services, with one scan of alice's
    files sent to it (a continuation of ``page`` when given, marked by ``pending_key`` when
    given); yields the worker's app."""
    app = create_celery(big.settings, big.services)
    producer = celery_app(big.settings)
    try:
        with start_worker(
            app,
            pool="solo",
            perform_ping_check=False,
            shutdown_timeout=30,
            loglevel="WARNING",
            queues=[names.RECONCILE],
        ):
            producer.send_task(
                names.RECONCILE_SCAN,
                kwargs={
                    "user": "alice",
                    "doc_type": "file",
                    "page": page,
                    "pending_key": pending_key,
                },
                queue=names.RECONCILE,
            )
            yield app
    finally:
        producer.close()
        app.close()


def listed_without_error(big: Big) -> bool:
    """Whether alice's last file scan listed something and recorded no error."""
    last = big.state(DocType.FILE).last() or {}
    return last.get("error") is None and bool(last.get("listed"))


def test_the_scan_task_pages_itself_to_the_end(big: Big) -> None:
    rec = Reconciler(big.services, Indexer(big.services), Recorder())
    one_pass = rec.scan("alice", DocType.FILE, apply=False)
    with scanning(big) as app:
        last = wait_until(big.state(DocType.FILE).last, 120, interval=0.2)
        # a duplicate of a continuation, after the scan: stale, does nothing
        scan = app.tasks[names.RECONCILE_SCAN]
        out = scan.apply(kwargs={"user": "alice", "doc_type": "file", "page": 3}).get()
    assert out == {"skipped": "stale"}
    assert last["pages"] == math.ceil(one_pass.requests / PAGE)
    assert last["listed"] == one_pass.listed and last["requests"] == one_pass.requests
    assert last["changes"] == one_pass.counts()
    # the index tasks went out (fanned out in parts on the ingest queue)
    assert last["enqueued"] == len(one_pass.index) + len(one_pass.remove)
    assert big.services.redis.llen(names.INGEST) > 0


def test_a_scan_whose_listing_failed_for_a_while_is_run_again_soon(
    big: Big, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page that Nextcloud answered 503 was recorded as failed and left to the doc type's
    next period (half an hour for files); it is run again after a short wait, from the pages
    kept, and the scan completes."""
    import workers.reconcile_tasks as tasks

    monkeypatch.setattr(tasks, "scan_retry_seconds", lambda retries: 0.2)
    rec = Reconciler(big.services, Indexer(big.services), Recorder())
    one_pass = rec.scan("alice", DocType.FILE, apply=False)
    big.sim.faults.set("webdav", status=503, method="PROPFIND", times=1)
    with scanning(big):
        done = wait_until(
            lambda: listed_without_error(big),
            60,
            interval=0.2,
        )
    assert done
    last = big.state(DocType.FILE).last()
    assert last["listed"] == one_pass.listed and last["changes"] == one_pass.counts()


def test_a_page_that_failed_and_then_found_the_scan_lock_held_is_not_dropped(
    big: Big, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A continuation page that Nextcloud answered 503 four times (within ``SCAN_RETRIES``)
    and then found the scan lock held (``ncindex reconcile --apply`` by hand) waits for the
    lock and lists on: its failure retries and its lock waits are counted apart. Before,
    both counted in Celery's one ``request.retries``, bounded by the task's default
    ``max_retries`` of 3, so the fourth failure, or a lock wait after three failures,
    raised ``MaxRetriesExceededError`` and the paged scan stopped halfway."""
    import workers.reconcile_tasks as tasks

    rec = Reconciler(big.services, Indexer(big.services), Recorder())
    one_pass = rec.scan("alice", DocType.FILE, apply=False)
    assert rec.scan("alice", DocType.FILE, pages=big.pages(DocType.FILE)).partial
    lock = big.settings.names.lock("reconcile", "file", "alice")
    waits: list[int] = []

    def retry_seconds(retries: int) -> float:
        waits.append(retries)
        if len(waits) == 4:  # after the fourth failure, a scan by hand takes the lock
            big.services.redis.set(lock, "by hand", px=1500)
        return 0.2

    monkeypatch.setattr(tasks, "scan_retry_seconds", retry_seconds)
    big.sim.faults.set("webdav", status=503, method="PROPFIND", times=4)
    with scanning(big, page=1):
        done = wait_until(
            lambda: listed_without_error(big),
            120,
            interval=0.2,
        )
    assert done and waits == [0, 1, 2, 3]
    last = big.state(DocType.FILE).last()
    assert last["listed"] == one_pass.listed and last["changes"] == one_pass.counts()


def test_a_retried_scan_leaves_a_newer_requests_pending_marker(
    big: Big, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan deletes its pending marker when it first runs; a request made while its retry
    waits marks the account pending again (and queues its own scan), and the retry leaves
    that marker, so a third request does not queue yet another scan. Before, the retry
    carried ``pending_key`` and deleted the newer request's marker."""
    import workers.reconcile_tasks as tasks

    key = pending_key(big.settings.names, "alice", DocType.FILE)
    big.services.redis.set(key, 1, ex=600)
    marked: list[bool] = []

    def retry_seconds(retries: int) -> float:
        # the first run deleted its marker; a newer request marks the account pending
        marked.append(bool(big.services.redis.set(key, 1, nx=True, ex=600)))
        return 0.2

    monkeypatch.setattr(tasks, "scan_retry_seconds", retry_seconds)
    big.sim.faults.set("webdav", status=503, method="PROPFIND", times=1)
    with scanning(big, pending_key=key):
        done = wait_until(
            lambda: listed_without_error(big),
            120,
            interval=0.2,
        )
    assert done and marked == [True]
    assert big.services.redis.exists(key)


@pytest.mark.slow
def test_a_worker_killed_mid_scan_resumes_at_the_last_page_kept(
    redis_url: str, model_dir: Path, tmp_path: Path
) -> None:
    redis.Redis.from_url(redis_url).flushdb()
    # redelivered after the visibility timeout (11 s), a page finds the dead worker's scan lock
    # (NCINDEX_LOCK_TTL, 14 s) still held and waits for it to expire: both bound the restart;
    # the solo pool enforces no time limit
    dep = WorkerDeployment(
        redis_url,
        model_dir,
        tmp_path,
        debounce_seconds=0.3,
        limits=(8, 10, 11, 14),
        queues=(names.RECONCILE,),
    )
    dep.env |= {
        "NCINDEX_RECONCILE_PAGE_REQUESTS": str(PAGE),
        "NCINDEX_RECONCILE_GRACE_SECONDS": "0",
    }
    try:
        for i in range(FILES // 2):
            path = f"/Docs/Area {i % 4}/Folder {i % FOLDERS:02d}/f{i:05d}.md"
            dep.sim.put_file("alice", path, f"# File {i}\nbuoy {i}\n", session=False)
        services = Services(dep.settings)
        try:
            one_pass = Reconciler(services, Indexer(services), None).scan(
                "alice", DocType.FILE, apply=False
            )
        finally:
            services.close()
        state = ScanState(dep.redis, "alice", DocType.FILE, dep.settings.names)
        progress_key = f"{state.base}:pages"

        def kept() -> int:
            raw = dep.redis.get(progress_key)
            return int(json.loads(raw)["pages"]) if raw else 0

        dep.sim.faults.set("webdav", delay=0.1, method="PROPFIND")  # a page takes ~0.5 s
        dep.start_worker()
        producer = celery_app(dep.settings)
        producer.send_task(
            names.RECONCILE_SCAN,
            kwargs={"user": "alice", "doc_type": "file"},
            queue=names.RECONCILE,
        )
        wait_until(lambda: kept() >= 3, 60, interval=0.05)
        # kill inside a page (its scan lock is held only then): freeze the worker first, so
        # a page that ends between the look and the kill is not taken for one killed mid-page
        lock = dep.settings.names.lock("reconcile", "file", "alice")
        assert dep.worker is not None
        while True:
            wait_until(lambda: dep.redis.exists(lock), 30, interval=0.01)
            dep.worker.send_signal(signal.SIGSTOP)
            if dep.redis.exists(lock):
                break
            dep.worker.send_signal(signal.SIGCONT)
        assert 0 < dep.redis.ttl(lock) <= 14  # the scan lock lives NCINDEX_LOCK_TTL seconds
        at_kill = kept()
        dep.kill_worker()
        assert state.last() is None, "the scan finished before the worker was killed"
        dep.sim.faults.clear()
        dep.sim.reset_request_counts()
        dep.start_worker()
        last = wait_until(state.last, 150, interval=0.5)
        producer.close()
        assert last["changes"] == one_pass.counts() and last["listed"] == one_pass.listed
        assert last["pages"] >= at_kill + 1
        # resumed after the pages kept: only the page being listed is listed again (the
        # request in flight at the kill may be counted after the reset: one more)
        redone = dep.sim.request_count("webdav", "PROPFIND")
        assert redone <= one_pass.requests - at_kill * PAGE + 1
    finally:
        dep.stop_worker()
        dep.close()
