"""Many files in one task (``ncindex.index_nodes``: workers/tasks.py ``index_nodes``,
ncindex/index/indexing.py ``Indexer.index_nodes``): one embedding run, one write and one recheck
for all of them, each file ending as ``index_node`` would end it, what the batch cannot
finish (a busy lock, a failed look-up, a delivery that never ended) handed to a task of its
own, and the files it has no time left to start sent on in another batch."""

from __future__ import annotations

from typing import Any

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from ncindex import names
from ncindex.embedding.batching import EmbedBatcher
from ncindex.errors import NextcloudAuthError, NextcloudUnavailable, StoreUnavailable
from ncindex.index import indexing
from ncindex.index.deadletter import Deliveries
from ncindex.index.locks import hold
from ncindex.nextcloud.client import NextcloudClient
from ncindex.progress import FailingDocuments, Progress
from ncindex.telemetry import TASKS
from support import Stack

CORRUPT_PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage without xref\n%%EOF"


def upload(stack: Stack, count: int, folder: str = "/Batch") -> list[int]:
    """``count`` one-line markdown files of alice's, written behind the webhooks' back."""
    stack.sim.drop_rate = 1.0
    return [
        stack.sim.put_file(
            "alice", f"{folder}/heron{i}.md", f"# Heron {i}\n\nHeron {i} wades in the estuary."
        )
        for i in range(count)
    ]


def run_batch(stack: Stack, file_ids: list[int], task_id: str | None = None) -> dict[str, int]:
    """The batch task run here, as a worker would run its message; returns its counts."""
    task = stack.celery.tasks[names.INDEX_NODES]
    return task.apply(kwargs={"user": "alice", "file_ids": file_ids}, task_id=task_id).get()


def test_a_batch_indexes_its_files_with_one_embedding_run_and_one_write(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = upload(stack, 6)
    store_type = type(stack.services.store)
    real_upsert, real_embed = store_type.upsert, EmbedBatcher.embed
    upserts: list[int] = []
    embedded: list[int] = []

    def upsert(self: Any, points: Any) -> Any:
        upserts.append(len(points))
        return real_upsert(self, points)

    def embed(self: Any, texts: list[str]) -> Any:
        embedded.append(len(texts))
        return real_embed(self, texts)

    monkeypatch.setattr(store_type, "upsert", upsert)
    monkeypatch.setattr(EmbedBatcher, "embed", embed)
    stack.sim.reset_request_counts()
    assert run_batch(stack, ids) == {"own_task": 0, "sent_on": 0, "indexed": 6}
    assert stack.sim.request_count("dav-search") == 6 + 1  # a look-up each, one recheck
    assert upserts == [6] and embedded == [6]
    for i, file_id in enumerate(ids):
        (point,) = stack.points(f"file:{file_id}")
        assert point.payload["paths"] == {"alice": f"/Batch/heron{i}.md"}
    # the same files again: each read conditionally, nothing embedded or written
    assert run_batch(stack, ids) == {"own_task": 0, "sent_on": 0, "unchanged": 6}
    assert upserts == [6] and embedded == [6]


def test_each_chunk_gets_its_own_texts_vectors_across_the_batch(stack: Stack) -> None:
    # a document that repeats a text (the same chunk twice) beside others: each text is
    # embedded once and every chunk, of every document, keeps its own text's vector
    stack.sim.drop_rate = 1.0
    repeated = stack.sim.put_file("alice", "/Batch/lorem.txt", "Lorem ipsum dolor sit amet. " * 200)
    ids = [repeated, *upload(stack, 2)]
    tag = stack.sim.create_tag("estuary")
    stack.sim.assign_tag("alice", "/Batch/heron1.md", tag)
    assert run_batch(stack, ids) == {"own_task": 0, "sent_on": 0, "indexed": 3}
    store = stack.services.store
    points = [p for i in ids for p in store.document_points(f"file:{i}", with_vectors=True)]
    texts = {p.payload["text"] for p in stack.points(f"file:{repeated}")}
    assert len(stack.points(f"file:{repeated}")) > len(texts)  # a text repeats in it
    fresh = stack.services.embedder.embed_documents([p.payload["text"] for p in points])
    for point, (dense, _) in zip(points, fresh, strict=True):
        assert sum(a * b for a, b in zip(point.dense, dense, strict=True)) > 0.999
    # a file's tags come from an answer of its own (see Indexer.index_nodes)
    assert stack.points(f"file:{ids[2]}")[0].payload["tags"] == ["estuary"]
    assert stack.points(f"file:{ids[1]}")[0].payload["tags"] == []


def test_a_busy_file_goes_to_its_own_task_and_a_corrupt_one_to_the_dead_letter(
    stack: Stack,
) -> None:
    ids = upload(stack, 3)
    broken = stack.sim.put_file("alice", "/Batch/broken.pdf", CORRUPT_PDF)
    lock = stack.settings.names.lock("node", ids[0])
    with hold(stack.services.redis, lock, ttl=30, wait=0) as held:
        assert held
        counts = run_batch(stack, [*ids, broken])
        assert not stack.points(f"file:{ids[0]}")  # another run holds it
    assert counts == {"own_task": 1, "sent_on": 0, "indexed": 2, "dead_letter": 1}
    assert stack.services.redis.hexists(stack.settings.names.deadletter, f"node:{broken}")
    stack.wait_idle()  # the stack's worker runs the file's own ncindex.index_node task
    assert stack.points(f"file:{ids[0]}")


def test_a_batch_whose_earlier_delivery_never_ended_sends_each_file_alone(stack: Stack) -> None:
    # a file in it may have killed the worker: alone, each is counted and parked by itself
    ids = upload(stack, 3)
    deliveries = Deliveries(stack.services.redis, stack.settings.names, ttl=60)
    deliveries.start("nodes:lost-once")
    assert run_batch(stack, ids, task_id="lost-once") == {"own_task": 3, "sent_on": 0}
    # its count stays until it expires: a retry of the task hands them on again
    runs = stack.settings.names.runs_prefix + "nodes:lost-once"
    assert stack.services.redis.hget(runs, "runs") == b"2"
    stack.wait_idle()
    assert all(stack.points(f"file:{i}") for i in ids)


def test_a_failed_look_up_or_recheck_sends_its_files_alone(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = upload(stack, 3)
    real = NextcloudClient.find_by_id

    def second_unavailable(self: Any, file_id: int) -> Any:
        if file_id == ids[1]:
            raise NextcloudUnavailable("503 from Nextcloud")
        return real(self, file_id)

    def unavailable(self: Any, file_ids: Any) -> Any:
        raise NextcloudUnavailable("503 from Nextcloud")

    with monkeypatch.context() as patch:
        patch.setattr(NextcloudClient, "find_by_id", second_unavailable)
        patch.setattr(NextcloudClient, "find_by_ids", unavailable)  # the recheck
        # the second file's look-up failed; the other two were written, their recheck failed
        assert run_batch(stack, ids) == {"own_task": 3, "sent_on": 0}
        assert stack.points(f"file:{ids[0]}") and stack.points(f"file:{ids[2]}")
    stack.wait_idle()
    assert all(stack.points(f"file:{i}") for i in ids)


def test_a_cold_scan_indexes_through_batches(stack: Stack) -> None:
    ids = upload(stack, 5, folder="/Cold")
    before = TASKS.labels(names.INDEX_NODES, "ok")._value.get()
    stack.reconcile(["alice"])
    assert TASKS.labels(names.INDEX_NODES, "ok")._value.get() == before + 1
    assert all(stack.points(f"file:{i}") for i in ids)
    assert stack.found("alice", "heron wades in the estuary", f"file:{ids[3]}")


def test_a_batch_past_its_bytes_hands_the_rest_on(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = upload(stack, 2)
    large = stack.sim.put_file("alice", "/Batch/long.md", "# Long\n\n" + "Herons wade. " * 20)
    monkeypatch.setattr(indexing, "BATCH_MAX_BYTES", 100)  # the first two files fill it
    assert run_batch(stack, [*ids, large]) == {"own_task": 1, "sent_on": 0, "indexed": 2}
    stack.wait_idle()
    assert stack.points(f"file:{large}")


def test_a_refused_account_fails_the_files_it_held_and_hands_on_the_others(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = upload(stack, 2)

    def refused(self: Any, file_id: int) -> Any:
        raise NextcloudAuthError("401 from Nextcloud")

    monkeypatch.setattr(NextcloudClient, "find_by_id", refused)
    lock = stack.settings.names.lock("node", ids[1])
    with hold(stack.services.redis, lock, ttl=30, wait=0), pytest.raises(NextcloudAuthError):
        run_batch(stack, ids)
    failing = FailingDocuments(stack.services.redis, stack.settings.names)
    failure = failing.get(f"node:{ids[0]}")
    assert failure is not None and failure.task == names.INDEX_NODE
    assert failure.kwargs == {"user": "alice", "file_id": ids[0]}
    assert failure.last_error.startswith("NextcloudAuthError") and not failure.retrying
    # the file another run held went to its own task, which met the refusal itself
    stack.wait_idle()
    failure = failing.get(f"node:{ids[1]}")
    assert failure is not None and failure.last_error.startswith("NextcloudAuthError")


def test_files_not_started_by_the_batch_s_start_by_are_left_untouched(stack: Stack) -> None:
    ids = upload(stack, 3)
    stack.sim.reset_request_counts()
    done = stack.celery.ncindex_indexer.index_nodes("alice", ids, start_by=0)  # long past
    assert list(done.outcomes) == [ids[0]] and done.outcomes[ids[0]].action == "indexed"
    assert done.alone == [] and done.later == ids[1:]
    # the first file's look-up and its recheck: the others were not even looked up
    assert stack.sim.request_count("dav-search") == 2
    assert stack.sim.request_count("webdav", "GET") == 1


def test_files_a_batch_has_no_time_to_extract_are_sent_on_in_another_batch(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a cap on each file's extraction near the soft time limit: a file started after the
    # first (a quarter of the limit in, at the latest) could be cut off by the limit mid-read
    soft = stack.settings.task_soft_time_limit
    monkeypatch.setattr(stack.settings, "extract_max_seconds", soft * 0.9)
    ids = upload(stack, 3)
    stack.sim.reset_request_counts()
    real_send = stack.celery.send_task
    sent: list[tuple[str, dict[str, Any]]] = []

    def record(name: str, **options: Any) -> Any:
        sent.append((name, options["kwargs"]))
        return real_send(name, **options)

    monkeypatch.setattr(stack.celery, "send_task", record)
    assert run_batch(stack, ids) == {"own_task": 0, "sent_on": 2, "indexed": 1}
    assert sent == [(names.INDEX_NODES, {"user": "alice", "file_ids": ids[1:]})]
    stack.wait_idle()  # the next batch takes its first file and sends the last one on alone
    assert sent[1:] == [(names.INDEX_NODE, {"user": "alice", "file_id": ids[2]})]
    assert all(stack.points(f"file:{i}") for i in ids)
    assert stack.sim.request_count("webdav", "GET") == 3  # each file read once


def fail_first_send(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make the stack's first task publish fail (the broker gone for a moment); returns the
    names of the tasks published since, the failed one first."""
    real_send = stack.celery.send_task
    sent: list[str] = []

    def send_once_failing(name: str, **options: Any) -> Any:
        sent.append(name)
        if len(sent) == 1:
            raise ConnectionError("broker gone")
        return real_send(name, **options)

    monkeypatch.setattr(stack.celery, "send_task", send_once_failing)
    return sent


def test_a_lost_batch_whose_hand_on_fails_hands_on_again_when_retried(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = upload(stack, 3)
    Deliveries(stack.services.redis, stack.settings.names, ttl=60).start("nodes:lost-twice")
    sent = fail_first_send(stack, monkeypatch)

    def batch_run(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the files of a lost batch are read in a batch again")

    monkeypatch.setattr(indexing.Indexer, "index_nodes", batch_run)
    # the first run's hand-on fails: the task retries (eagerly here) and hands on again
    assert run_batch(stack, ids, task_id="lost-twice") == {"own_task": 3, "sent_on": 0}
    assert sent == [names.INDEX_NODE] * 4
    stack.wait_idle()
    assert all(stack.points(f"file:{i}") for i in ids)


def test_a_failure_around_the_files_sends_each_file_alone(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = upload(stack, 2)
    models_type = type(stack.services.models)
    real = models_type.pinned
    calls = []

    def pinned_once_failing(self: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise StoreUnavailable("the model pointer could not be read")
        return real(self)

    monkeypatch.setattr(models_type, "pinned", pinned_once_failing)
    assert run_batch(stack, ids) == {"own_task": 2, "sent_on": 0}
    stack.wait_idle()
    assert all(stack.points(f"file:{i}") for i in ids)


def test_a_batch_retried_after_its_files_are_done_counts_their_progress_once(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = upload(stack, 3)
    progress = Progress(stack.services.redis, stack.settings.names)
    progress.queued("alice", [f"node:{i}" for i in ids])
    sent = fail_first_send(stack, monkeypatch)
    lock = stack.settings.names.lock("node", ids[0])
    with hold(stack.services.redis, lock, ttl=30, wait=0):
        # the busy file's hand-on fails once: the task retries (eagerly here) and runs the
        # batch again, whose two other files come out unchanged
        counts = run_batch(stack, ids, task_id="retried")
    assert counts == {"own_task": 1, "sent_on": 0, "unchanged": 2}
    assert sent == [names.INDEX_NODE] * 2
    assert progress.first_indexing("alice")["finished"] == 2
    assert progress.rates("alice").documents == 2
    stack.wait_idle()  # the busy file's own task
    assert progress.first_indexing("alice")["finished"] == 3
    assert progress.rates("alice").documents == 3


def test_a_batch_cut_off_by_the_soft_limit_while_writing_hands_on_only_what_it_did_not_write(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The soft time limit strikes in the batch's embedding run: the files it had already
    finished (found unchanged) keep their outcome, and only those it had read but not written
    go to a task of their own, read again there (their text is not kept). Before, every file
    of the batch went to a task of its own, so the finished ones were looked up again too
    (not downloaded: their etag was unchanged)."""
    ids = upload(stack, 4)
    assert run_batch(stack, ids[:2]) == {"own_task": 0, "sent_on": 0, "indexed": 2}
    real_embed = EmbedBatcher.embed
    runs: list[int] = []

    def embed_cut_off_once(self: Any, texts: list[str]) -> Any:
        runs.append(len(texts))
        if len(runs) == 1:
            raise SoftTimeLimitExceeded()
        return real_embed(self, texts)

    monkeypatch.setattr(EmbedBatcher, "embed", embed_cut_off_once)
    stack.sim.reset_request_counts()
    assert run_batch(stack, ids) == {"own_task": 2, "sent_on": 0, "unchanged": 2}
    stack.wait_idle()  # the two unwritten files' own tasks
    assert all(stack.points(f"file:{i}") for i in ids)
    # the batch looked each file up; the two own tasks looked theirs up and rechecked it
    # (before: the two finished files were looked up again too, 10)
    assert stack.sim.request_count("dav-search") == 4 + 2 * 2
    assert stack.sim.request_count("webdav", "GET") == 2 * 2  # unwritten: read again
