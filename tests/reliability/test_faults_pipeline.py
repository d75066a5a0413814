"""Faults on real parts, pipeline side: Redis stopped and restarted in the middle of a
delivery burst, Nextcloud answering 5xx, 429, hanging or slow to the workers, and the vector
store unreachable to the workers. (Each test runs its own stack on its own Redis; one
in-process worker at a time, so the search-side faults live in ``test_faults_search.py``.)

Invariants: the receiver never answers 2xx for an event it did not queue (503 while Redis is
down); after Redis comes back, one reconcile pass restores every document, each indexed
exactly once; workers retry transient failures and recover; search verification fails open
and counts it; search answers 503 problem+json while the store is down.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import threading
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from pydantic import SecretStr
from rel_support import STACK_SETTINGS, Flaky, visible_keys
from werkzeug.serving import make_server

from ncindex.embedding.embedder import Embedder
from ncindex.errors import StaleEntry, StoreUnavailable
from ncindex.index.steps import whole_version
from ncindex.ingest.queueing import celery_app
from ncindex.names import Names
from ncindex.redis_server import RedisProcess
from ncindex.settings import Settings
from support import PASSWORDS, Stack, build_stack, wait_until
from webhook_receiver import create_app as create_receiver_app

WRITTEN = "OCP\\Files\\Events\\Node\\NodeWrittenEvent"


def text(i: int, version: int = 1) -> str:
    """A small document of its own words."""
    return (
        f"Tide log {i} version {version}: the harbour gauge read {i * 13 + version} cm and "
        f"{i % 7} gulls sat on buoy {i}."
    )


def assert_indexed_once(stack: Stack, user: str) -> None:
    """The index holds exactly ``user``'s visible documents, each in one version whose
    chunks are 0..n-1 (no duplicate, no stale, no missing)."""
    indexed = stack.indexed()
    expected = visible_keys(stack.sim, user)
    assert set(indexed) == expected, (expected - set(indexed), set(indexed) - expected)
    for key, payloads in indexed.items():
        assert len({p["content_hash"] for p in payloads}) == 1, key
        assert sorted(p["chunk_index"] for p in payloads) == list(range(len(payloads))), key
        assert {p["chunk_count"] for p in payloads} == {len(payloads)}, key
    client = stack.services.redis  # no bookkeeping left behind: locks, delivery counters
    assert list(client.scan_iter("ncindex:lock:*")) == []
    assert list(client.scan_iter(f"{Names().runs_prefix}*")) == []


# --- Redis stopped and restarted mid-burst ----------------------------------------------------


def test_redis_outage_mid_burst_503_then_one_reconcile_converges(
    private_redis: RedisProcess,
    embedder: Embedder,
    model_dir: Path,
    tmp_path: Path,
    empty_store: Path,
) -> None:
    stack = build_stack(
        private_redis.url, embedder, model_dir, tmp_path, worker=False, template=empty_store,
        **(STACK_SETTINGS | {"debounce_seconds": 0}),
    )  # fmt: skip
    try:
        stack.sim.drop_rate = 1.0  # this test delivers the events itself, in phases
        ids = [stack.sim.put_file("alice", f"/Tides/log-{i:02}.txt", text(i)) for i in range(36)]
        settings = stack.settings
        headers = {settings.webhook_secret_header: settings.webhook_secret.get_secret_value()}
        url = f"{stack.receiver_url}/hooks/nextcloud"

        def deliver(client: httpx.Client, file_id: int) -> httpx.Response:
            body = {
                "event": {
                    "class": WRITTEN,
                    "node": {"id": file_id, "path": f"/alice/files/Tides/{file_id}.txt"},
                },
                "user": {"uid": "alice"},
                "time": 1767225601,
            }
            return client.post(url, content=json.dumps(body), headers=headers)

        client = redis.Redis.from_url(private_redis.url)
        with httpx.Client(timeout=30) as http:
            # up: every event queued, and the queue holds what the 202s said
            before = [deliver(http, i) for i in ids[:12]]
            assert [r.status_code for r in before] == [202] * 12
            queued = sum(r.json()["queued"] for r in before)
            assert queued == 12 and client.llen("index") == queued

            # mid-burst: Redis stops while 8 threads deliver; every answer is 202 or 503
            stop = threading.Event()

            def burst(file_id: int) -> int:
                if file_id == ids[16]:
                    private_redis.stop()
                    stop.set()
                return deliver(http, file_id).status_code

            with ThreadPoolExecutor(8) as pool:
                during = list(pool.map(burst, ids[12:24]))
            assert stop.is_set()
            assert set(during) <= {202, 503}, during

            # down: never a 2xx for an event that could not be queued
            down = [deliver(http, i) for i in ids[24:30]]
            assert [r.status_code for r in down] == [503] * 6
            for response in down:
                assert response.headers["Content-Type"] == "application/problem+json"
                assert response.json()["code"] == "backend_unavailable"
                assert response.headers["Retry-After"]

            # back: Redis restarts empty (it keeps nothing ncindex cannot rebuild)
            private_redis.start_again()
            after = [deliver(http, i) for i in ids[30:]]
            for i, response in zip(ids[30:], after, strict=True):
                if response.status_code == 503:  # a stale pooled connection, once at most
                    response = deliver(http, i)
                assert response.status_code == 202, response.text
        with stack.worker():
            stack.wait_idle()
            # what the restart lost, and what was refused, comes back with one reconcile
            stack.reconcile(users=("alice",))
            assert_indexed_once(stack, "alice")
            assert len(stack.indexed()) == len(ids)
    finally:
        stack.close()


# --- Nextcloud answering 5xx, hanging or slow to the workers ----------------------------------


NEXTCLOUD_FAULTS: list[tuple[str, dict[str, Any]]] = [
    ("503", {"status": 503, "times": 2}),
    ("hang", {"timeout": True, "times": 1, "method": "GET"}),
    ("slow", {"delay": 1.0, "times": 1}),
]
if os.environ.get("NCINDEX_RELIABILITY_LONG") == "1":  # make fuzz: two more phases
    NEXTCLOUD_FAULTS += [
        ("500-on-download", {"status": 500, "times": 2, "method": "GET"}),
        ("429", {"status": 429, "times": 2}),
    ]


def test_workers_retry_nextcloud_failures_and_recover(fresh_stack: Stack) -> None:
    """One document per fault, each written while WebDAV misbehaves: the fault is hit (its
    ``times`` used up), the task retries with backoff and the document is indexed once."""
    stack = fresh_stack
    with stack.worker():
        for n, (name, fault) in enumerate(NEXTCLOUD_FAULTS, start=1):
            stack.sim.faults.set("webdav", **fault)
            stack.sim.put_file("alice", f"/Faulty/{name}.md", text(n).encode())
            stack.sim.flush_deliveries(timeout=30)
            wait_until(lambda n=n: len(stack.indexed()) == n, 90, interval=0.2)
            assert "webdav" not in stack.sim.faults.active(), f"{name}: fault never hit"
            stack.sim.faults.clear()
        stack.wait_idle()
    assert_indexed_once(stack, "alice")


# --- the vector store unreachable to the workers ------------------------------------------------


def test_workers_retry_while_the_store_is_down_and_recover(fresh_stack: Stack) -> None:
    stack = fresh_stack
    store = stack.services.store
    flaky = Flaky(store, "upsert", times=3)
    try:
        with stack.worker():
            for i in range(3):
                stack.sim.put_file("alice", f"/Store/doc-{i}.md", text(i).encode())
            stack.sim.flush_deliveries(timeout=30)
            wait_until(lambda: len(stack.indexed()) == 3, 90, interval=0.3)
            stack.wait_idle()
    finally:
        flaky.heal()
    assert flaky.failed == 3
    assert_indexed_once(stack, "alice")


# --- Redis unresponsive (stopped with SIGSTOP: connections open, nothing answers) -----------

RENAMED = "OCP\\Files\\Events\\Node\\NodeRenamedEvent"


@pytest.mark.parametrize(
    "event",
    ["written", "renamed"],
)
def test_unresponsive_redis_is_503_not_a_hang(private_redis: RedisProcess, event: str) -> None:
    settings = Settings(
        redis_url=private_redis.url,
        webhook_secret=SecretStr(secrets.token_urlsafe(16)),
        accounts={"alice": SecretStr("pw")},
        debounce_seconds=0.5,
    )
    httpd = make_server(
        "127.0.0.1", 0, create_receiver_app(settings, producer=celery_app(settings)), threaded=True
    )
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.port}/hooks/nextcloud"
    headers = {settings.webhook_secret_header: settings.webhook_secret.get_secret_value()}

    def envelope(file_id: int) -> str:
        node = {"id": file_id, "path": f"/alice/files/{file_id}.md"}
        body: dict[str, Any] = {"user": {"uid": "alice"}, "time": 1767225601}
        if event == "written":
            body["event"] = {"class": WRITTEN, "node": node}
        else:
            body["event"] = {"class": RENAMED, "source": {"path": "/alice/files/old.md"},
                             "target": node}  # fmt: skip
        return json.dumps(body)

    try:
        # 8 s: four times what a 503 takes (the Redis client's 2 s socket timeout)
        with httpx.Client(timeout=8) as http:
            assert http.post(url, content=envelope(1), headers=headers).status_code == 202
            private_redis.process.send_signal(signal.SIGSTOP)
            try:
                response = http.post(url, content=envelope(2), headers=headers)
            except httpx.TimeoutException:
                pytest.fail("the receiver did not answer while Redis was unresponsive")
            finally:
                private_redis.process.send_signal(signal.SIGCONT)
            assert response.status_code == 503, response.text
            assert response.json()["code"] == "backend_unavailable"
    finally:
        private_redis.process.send_signal(signal.SIGCONT)
        httpd.shutdown()


# --- the store failing between a new version's upsert and the old version's delete ----------


def test_whole_version_needs_one_hash_and_every_chunk_once() -> None:
    def chunk(h: str, i: int, n: int) -> dict[str, Any]:
        return {"content_hash": h, "chunk_index": i, "chunk_count": n}

    assert whole_version([chunk("a", 0, 2), chunk("a", 1, 2)])
    assert not whole_version([chunk("a", 0, 2), chunk("a", 1, 2), chunk("b", 0, 1)])  # two
    assert not whole_version([chunk("a", 0, 3), chunk("a", 1, 3)])  # cut short
    assert not whole_version([chunk("a", 0, 2), chunk("a", 0, 2)])  # chunk 1 missing
    assert not whole_version([chunk("a", 0, 2), chunk("a", 1, 3)])


def test_old_version_left_by_a_failed_delete_is_removed_by_the_next_run(
    fresh_stack: Stack,
) -> None:
    """v1 indexed; v2 upserted, then deleting v1's points fails (``StoreUnavailable``, as if
    the store went away or the worker died there). The etag in the store is v2's, yet the
    next run must not answer "unchanged": it rewrites v2 without embedding anything (every
    vector is reused) and deletes v1, whose words are no longer found."""
    stack = fresh_stack
    stack.sim.drop_rate = 1.0
    indexer = stack.celery.ncindex_indexer  # type: ignore[attr-defined]
    store = stack.services.store
    fid = stack.sim.put_file("alice", "/Two/memo.md", "Zanzibar quokka heliograph: draft one.")
    assert indexer.index_node("alice", fid).action == "indexed"
    stack.sim.put_file("alice", "/Two/memo.md", "Completely rewritten memo about tulips.")
    real = store.delete_document

    def delete_document(doc_key: str, keep: Collection[str] | None = None) -> None:
        if keep is not None:
            raise StoreUnavailable("delete: injected")
        real(doc_key, keep)

    store.delete_document = delete_document  # type: ignore[method-assign]
    try:
        with pytest.raises(StoreUnavailable):
            indexer.index_node("alice", fid)
    finally:
        store.delete_document = real  # type: ignore[method-assign]
    assert len({p["content_hash"] for p in stack.indexed()[f"file:{fid}"]}) == 2
    again = indexer.index_node("alice", fid)
    assert (again.action, again.embedded) == ("indexed", 0)
    assert indexer.index_node("alice", fid).action == "unchanged"
    assert_indexed_once(stack, "alice")
    response = stack.search.post(
        "/v1/search",
        json={"query": "Zanzibar quokka heliograph"},
        auth=("alice", PASSWORDS["alice"]),
    )
    assert response.status_code == 200
    assert all("Zanzibar" not in (r.get("snippet") or "") for r in response.get_json()["results"])


def long_text(word: str, n: int = 40) -> str:
    """A document of several chunks, each sentence about ``word``."""
    return "\n\n".join(
        f"Paragraph {i} about the {word}: the {word} number {i} crossed the estuary at "
        f"low tide while the lighthouse keeper counted {i * 7} boats and wrote it down."
        for i in range(n)
    )


@pytest.mark.parametrize("already_indexed", [False, True])
def test_upsert_cut_between_batches_is_completed_by_the_next_run(
    fresh_stack: Stack, monkeypatch: pytest.MonkeyPatch, already_indexed: bool
) -> None:
    """Upserts go in batches (two points here); the store fails the second batch. The
    document is left with part of its new version (beside the old one when there was one);
    the next run completes it and deletes the rest: one version, every chunk once."""
    import ncindex.store.qdrant_edge as edge
    from ncindex.store.schema import batches

    stack = fresh_stack
    stack.sim.drop_rate = 1.0
    indexer = stack.celery.ncindex_indexer  # type: ignore[attr-defined]
    fid = stack.sim.put_file("alice", "/Cut/long.md", long_text("otter"))
    if already_indexed:
        assert indexer.index_node("alice", fid).action == "indexed"
        stack.sim.put_file("alice", "/Cut/long.md", long_text("beaver"))
    monkeypatch.setattr(edge, "batches", lambda items: batches(items, 2))
    store = stack.services.store
    real_update = store._update
    upserts = {"n": 0}

    def update(kind: str, operation: Any, doc_keys: Any) -> Any:
        if kind == "upsert":
            upserts["n"] += 1
            if upserts["n"] == 2:
                raise StoreUnavailable("upsert: injected after the first batch")
        return real_update(kind, operation, doc_keys)

    monkeypatch.setattr(store, "_update", update)
    with pytest.raises(StoreUnavailable):
        indexer.index_node("alice", fid)
    monkeypatch.setattr(store, "_update", real_update)
    assert not whole_version(stack.indexed()[f"file:{fid}"])  # the fault left a cut version
    assert indexer.index_node("alice", fid).action == "indexed"
    assert indexer.index_node("alice", fid).action == "unchanged"
    assert_indexed_once(stack, "alice")
    word = "beaver" if already_indexed else "otter"
    assert all(word in p.payload["text"] for p in store.document_points(f"file:{fid}"))


# --- a document lock lost while its task runs (Redis flushed, or the lock expired) ----------


def test_a_lost_lock_neither_fails_done_work_nor_hides_a_retryable_error(
    fresh_stack: Stack,
) -> None:
    """Redis is flushed while tasks hold their locks, so releasing them finds nothing to
    release (``LockNotOwnedError``). A task whose work was done still succeeds, and a task
    that failed with a retryable error still raises that error, not the lock's."""
    stack = fresh_stack
    stack.sim.drop_rate = 1.0
    indexer = stack.celery.ncindex_indexer  # type: ignore[attr-defined]
    fid = stack.sim.put_file("alice", "/Lost/lock.md", text(1))
    with indexer.lock(fid):
        stack.services.redis.flushall()
        assert indexer.index_node("alice", fid).action == "indexed"
    with pytest.raises(StoreUnavailable, match="injected"), indexer.lock(fid):
        stack.services.redis.flushall()
        raise StoreUnavailable("injected")
    with indexer.lock(fid):  # expired and taken by another task: theirs is left alone
        stack.services.redis.set(f"ncindex:lock:node:{fid}", "another-token")
    assert stack.services.redis.get(f"ncindex:lock:node:{fid}") == b"another-token"


# --- a poison version parked: the text before it goes too ------------------------------------


def _run_guarded(indexer: Any, fid: int) -> Any:
    """What the ncindex.index_node task body does for alice's file ``fid``."""
    from ncindex.index.deadletter import node_subject
    from workers.tasks import guarded

    with indexer.lock(fid):
        return guarded(
            indexer,
            node_subject(fid),
            lambda note: indexer.index_node("alice", fid, on_version=note),
            lambda reason, n, etag: indexer.park_node("alice", fid, reason, n, etag),
        )


def _killed_runs(stack: Stack, indexer: Any, fid: int, path: str) -> str:
    """Record ``dead_letter_after`` runs of ``fid`` that noted alice's current version of
    ``path`` and never ended (workers killed); returns its dead-letter subject."""
    from ncindex.index.deadletter import Deliveries, node_subject

    subject = node_subject(fid)
    deliveries = Deliveries(stack.services.redis, Names(), ttl=3600)
    for _ in range(indexer.settings.dead_letter_after):
        deliveries.start(subject)
        deliveries.working_on(subject, stack.sim.node("alice", path).etag)
    return subject


def test_parking_a_poison_version_removes_the_previous_text(fresh_stack: Stack) -> None:
    """v0 indexed; v1 killed its worker ``dead_letter_after`` times (runs started, noted v1,
    never ended). The next delivery parks v1 and, as for a corrupt file, v0's points are
    deleted: the index must not keep answering with text the file no longer has."""
    from ncindex.index.deadletter import DeadLetters

    stack = fresh_stack
    stack.sim.drop_rate = 1.0
    indexer = stack.celery.ncindex_indexer  # type: ignore[attr-defined]
    fid = stack.sim.put_file("alice", "/Poison/well.md", "Original walrus text v0.")
    assert indexer.index_node("alice", fid).action == "indexed"
    stack.sim.put_file("alice", "/Poison/well.md", "Poison version v1 that kills workers.")
    subject = _killed_runs(stack, indexer, fid, "/Poison/well.md")
    out = _run_guarded(indexer, fid)
    assert out.action == "dead_letter"
    assert DeadLetters(stack.services.redis, Names()).get(subject) is not None
    assert stack.services.store.document_points(f"file:{fid}") == []


def test_a_version_that_replaced_a_poison_one_is_indexed_not_parked(
    fresh_stack: Stack,
) -> None:
    """v1 killed its worker ``dead_letter_after`` times; before the next run the user replaced
    it with v2. That run finds another version than the one the lost runs noted: v2 is
    indexed, its runs counted afresh (was: v2 parked for v1's crashes until its next change).
    Runs of v2 that die in turn note v2 themselves, and v2 is then parked."""
    from ncindex.index.deadletter import DeadLetters, Deliveries, node_subject

    stack = fresh_stack
    stack.sim.drop_rate = 1.0
    indexer = stack.celery.ncindex_indexer  # type: ignore[attr-defined]
    path = "/Poison/spring.md"
    fid = stack.sim.put_file("alice", path, "Poison version v1 that kills workers.")
    subject = node_subject(fid)
    deliveries = Deliveries(stack.services.redis, Names(), ttl=3600)
    for _ in range(indexer.settings.dead_letter_after):
        deliveries.start(subject)
        deliveries.working_on(subject, stack.sim.node("alice", path).etag)
    stack.sim.put_file("alice", path, "Fixed version v2 about clear spring water.")
    out = _run_guarded(indexer, fid)
    assert out.action == "indexed"
    assert DeadLetters(stack.services.redis, Names()).get(subject) is None
    assert stack.services.store.document_points(f"file:{fid}")
    assert stack.services.redis.exists(f"{Names().runs_prefix}{subject}") == 0  # the run ended

    stack.sim.put_file("alice", path, "Version v3 that kills workers again.")
    for _ in range(indexer.settings.dead_letter_after):
        deliveries.start(subject)  # a run of v3 that notes its version, then dies
        indexer.index_node(
            "alice", fid, on_version=lambda etag: deliveries.working_on(subject, etag)
        )
    out = _run_guarded(indexer, fid)
    assert out.action == "dead_letter"
    assert (
        DeadLetters(stack.services.redis, Names()).get(subject).etag
        == stack.sim.node("alice", path).etag
    )


# --- a 200 download shorter than the file ----------------------------------------------------


def test_a_download_cut_short_is_retried_not_indexed(
    fresh_stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GET answers 200 with the first half of the file, correctly framed (a proxy or a
    cache cut it), once. SEARCH listed the whole size, so the task raises a retryable error
    instead of indexing half the text for good; the retry indexes all of it."""
    from werkzeug.wrappers import Response

    from ncindex.errors import TransientError
    from ncindex.simulator.app import SimulatorApp, family_of

    stack = fresh_stack
    stack.sim.drop_rate = 1.0
    indexer = stack.celery.ncindex_indexer  # type: ignore[attr-defined]
    full = ("Alpha section about walruses. " * 20 + "Omega tail mentions pelicans.").encode()
    fid = stack.sim.put_file("alice", "/Cut/short.md", full)
    real = SimulatorApp.dispatch
    cuts = {"n": 0}

    def dispatch(self: SimulatorApp, request: Any) -> tuple[str, Response]:
        if request.method == "GET" and request.path.endswith("/Cut/short.md") and not cuts["n"]:
            cuts["n"] += 1
            cut = Response(full[: len(full) // 2], status=200, content_type="text/markdown")
            return family_of(request.method, request.path), cut
        return real(self, request)

    monkeypatch.setattr(SimulatorApp, "dispatch", dispatch)
    with pytest.raises(TransientError, match="bytes downloaded"):
        indexer.index_node("alice", fid)
    assert cuts["n"] == 1 and f"file:{fid}" not in stack.indexed()
    assert indexer.index_node("alice", fid).action == "indexed"
    points = stack.services.store.document_points(f"file:{fid}")
    assert "pelicans" in " ".join(p.payload["text"] for p in points)


# --- a file moved or deleted between its lookup by id and its download by path ---------------


@pytest.mark.parametrize("change", ["folder renamed", "file deleted"])
def test_a_404_on_download_looks_the_file_up_again(
    fresh_stack: Stack, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """An index task finds a file by id, then its folder is renamed (or the file deleted)
    before the GET by the old path, which answers 404. Looking the file up again tells the
    two apart: moved ⇒ a retryable error, and the retry indexes it at its new path (before,
    ``NotFound`` failed the task and the file was missing until a reconcile); gone ⇒ the
    older version indexed before is evicted."""
    from ncindex.simulator.app import SimulatorApp

    stack = fresh_stack
    stack.sim.drop_rate = 1.0
    indexer = stack.celery.ncindex_indexer  # type: ignore[attr-defined]
    fid = stack.sim.put_file("alice", "/Moving/fresh.md", text(1))
    if change == "file deleted":
        assert indexer.index_node("alice", fid).action == "indexed"
        stack.sim.put_file("alice", "/Moving/fresh.md", text(1, 2))
    real = SimulatorApp.dispatch
    fired: list[str] = []

    def dispatch(self: SimulatorApp, request: Any) -> Any:
        if request.method == "GET" and request.path.endswith("/Moving/fresh.md") and not fired:
            fired.append(request.path)
            if change == "folder renamed":
                stack.sim.move("alice", "/Moving", "/Moved")
            else:
                stack.sim.delete("alice", "/Moving/fresh.md")
        return real(self, request)

    monkeypatch.setattr(SimulatorApp, "dispatch", dispatch)
    if change == "folder renamed":
        with pytest.raises(StaleEntry, match=r"now at /Moved/fresh\.md"):
            indexer.index_node("alice", fid)
        assert indexer.index_node("alice", fid).action == "indexed"
        payload = stack.services.store.document_points(f"file:{fid}")[0].payload
        assert payload["file_path"] == ["alice:/Moved/fresh.md"]
    else:
        assert indexer.index_node("alice", fid).action == "evicted"
        assert f"file:{fid}" not in stack.indexed()
    assert fired


# --- a folder renamed or deleted while a file in it is embedded (another worker's task) ------


@pytest.mark.parametrize("change", ["renamed", "deleted", "deleted after v1"])
def test_a_folder_changed_while_its_file_is_embedded_is_caught_after_the_write(
    fresh_stack: Stack, change: str
) -> None:
    """Task A indexes /Race/new.md and is embedding it; meanwhile the folder is renamed to
    /Race2 (or deleted) and task B runs the folder's one event (move_path / evict_node),
    which finds nothing of the file indexed yet. A's write carries the path it read, so A
    looks the file up once more after writing: moved ⇒ the payload gets the current path;
    deleted ⇒ the file is evicted (before: the old path, or a deleted file, stayed until a
    reconcile)."""
    stack = fresh_stack
    stack.sim.drop_rate = 1.0
    indexer = stack.celery.ncindex_indexer  # type: ignore[attr-defined]
    fid = stack.sim.put_file("alice", "/Race/new.md", text(10))
    folder = stack.sim.file_id("alice", "/Race")
    if change == "deleted after v1":
        assert indexer.index_node("alice", fid).action == "indexed"
        stack.sim.put_file("alice", "/Race/new.md", text(10, 2))
    batcher = indexer.steps.batcher(stack.services.embedder)
    real_embed = batcher.embed
    other: list[Any] = []

    def embed_and_change(texts: list[str]) -> Any:
        if not other:  # task B, while A embeds
            if change == "renamed":
                stack.sim.move("alice", "/Race", "/Race2")
                other.append(indexer.move_path("alice", "/Race", "/Race2", folder))
            else:
                stack.sim.delete("alice", "/Race")
                other.append(indexer.evict_node("alice", "/Race", folder))
        return real_embed(texts)

    batcher.embed = embed_and_change  # type: ignore[method-assign]
    try:
        out = indexer.index_node("alice", fid)
    finally:
        batcher.embed = real_embed  # type: ignore[method-assign]
    assert other
    if change == "renamed":
        assert out.action == "indexed"
        payload = stack.services.store.document_points(f"file:{fid}")[0].payload
        assert payload["file_path"] == ["alice:/Race2/new.md"]
        assert "alice:/Race" not in payload["folder_ancestors"]
        assert_indexed_once(stack, "alice")
    else:
        assert out.action == "evicted"
        assert f"file:{fid}" not in stack.indexed()


def test_parking_a_reread_that_kills_workers_keeps_the_text(fresh_stack: Stack) -> None:
    """v0 indexed; its unchanged bytes, read again (as for a newer extractor), killed the
    worker ``dead_letter_after`` times. The next delivery parks it, but the text of those
    very bytes stays searchable: before, park_node deleted it (an upgrade that crashes on a
    file took away what was searchable)."""
    from ncindex.index.deadletter import DeadLetters

    stack = fresh_stack
    stack.sim.drop_rate = 1.0
    indexer = stack.celery.ncindex_indexer  # type: ignore[attr-defined]
    fid = stack.sim.put_file("alice", "/Poison/kept.md", "Original walrus text v0.")
    assert indexer.index_node("alice", fid).action == "indexed"
    before = [(p.id, p.payload) for p in stack.services.store.document_points(f"file:{fid}")]
    subject = _killed_runs(stack, indexer, fid, "/Poison/kept.md")
    out = _run_guarded(indexer, fid)
    assert out.action == "dead_letter"
    assert DeadLetters(stack.services.redis, Names()).get(subject) is not None
    points = stack.services.store.document_points(f"file:{fid}")
    assert [(p.id, p.payload) for p in points] == before
