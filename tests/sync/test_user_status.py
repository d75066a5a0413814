"""``GET /v1/status`` and :func:`ncindex.sync.user_status.user_status`: each caller sees their
own documents, pending, dead letter, skips per rule, last scans and first-indexing progress,
and nothing of anyone else's — over the whole stack (simulator, receiver, Redis, Celery
worker, Qdrant Edge)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import redis
from celery import Celery

from ncindex.documents import DocType
from ncindex.names import Names
from ncindex.progress import BUCKET_SECONDS, KEEP_SECONDS, FailingDocuments, Progress
from ncindex.sync.reconcile import Reconciler
from ncindex.sync.user_status import user_status
from search_api.openapi import openapi_document
from support import PASSWORDS, Stack, wait_until

CORRUPT = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage without xref\n%%EOF"


def status_of(stack: Stack, user: str) -> dict:
    response = stack.search.get("/v1/status", auth=(user, PASSWORDS[user]))
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def schema_check(body: dict) -> None:
    doc = openapi_document()
    schema = {"$ref": "#/components/schemas/UserStatus", "components": doc["components"]}
    jsonschema.validate(body, schema)


def test_each_caller_sees_only_their_own_status(stack: Stack) -> None:
    stack.settings.index_exclude_globs = ["/Private/**"]
    good = [
        stack.sim.put_file("alice", f"/Docs/lamp{i}.txt", f"Lamp wick number {i}.".encode())
        for i in range(3)
    ]
    broken = stack.sim.put_file("alice", "/Docs/broken.pdf", CORRUPT)
    stack.sim.put_file("alice", "/Private/diary.txt", b"Private thoughts about kelp.")
    stack.sim.put_file("alice", "/Pictures/kelp.gif", b"GIF89a not really")  # no OCR of GIF
    stack.sim.put_file("bob", "/Docs/tide.txt", b"Tide tables for the harbour.")
    wait_until(lambda: all(stack.points(f"file:{i}") for i in good), 30)
    stack.wait_idle(30)

    alice = status_of(stack, "alice")
    schema_check(alice)
    assert alice["user"] == "alice"
    assert alice["doc_types"]["file"]["indexed"] == 3
    assert alice["pending"] == 0
    [letter] = alice["dead_letter"]
    assert letter["subject"] == f"node:{broken}"
    assert letter["reason"].startswith("ExtractionError")
    assert (letter["path"], letter["mime_type"]) == ("/Docs/broken.pdf", "application/pdf")
    assert alice["failed"] == 1
    assert alice["skipped"] == {"excluded_path": 1, "unsupported_format": 1}
    first = alice["first_indexing"]
    assert first["state"] == "done" and first["finished"] >= 6 and first["progress"] == 1.0
    assert alice["throughput"]["documents_per_second"] > 0

    bob = status_of(stack, "bob")
    schema_check(bob)
    assert bob["doc_types"]["file"]["indexed"] == 1
    assert bob["dead_letter"] == [] and bob["failed"] == 0 and bob["skipped"] == {}
    text = json.dumps(bob)
    assert "broken" not in text and "Private" not in text and f"node:{broken}" not in text

    # the same dict is what the MCP tool gets
    assert user_status(stack.services, "bob")["doc_types"]["file"]["indexed"] == 1


def test_status_needs_credentials_and_is_in_openapi(stack: Stack) -> None:
    response = stack.search.get("/v1/status")
    assert response.status_code == 401
    assert response.get_json()["code"] == "unauthenticated"
    wrong = stack.search.get("/v1/status", auth=("alice", "not-her-password"))
    assert wrong.status_code == 401
    doc = stack.search.get("/openapi.json").get_json()
    operation = doc["paths"]["/v1/status"]["get"]
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/UserStatus"
    }
    assert operation["security"]
    assert {"pending", "dead_letter", "skipped", "first_indexing", "doc_types"} <= set(
        doc["components"]["schemas"]["UserStatus"]["properties"]
    )


def test_a_full_walk_records_skips_no_webhook_announced(stack: Stack, producer: Celery) -> None:
    stack.settings.index_exclude_globs = ["/Private/**"]
    stack.sim.put_file("carol", "/Private/a.txt", b"Alpha.")
    stack.sim.put_file("carol", "/Private/b.txt", b"Beta.")
    stack.sim.put_file("carol", "/Docs/c.txt", b"Gamma rays.")
    stack.wait_idle(30)
    keys = stack.settings.names
    stack.services.redis.delete(keys.skipped("carol"))  # as if no event had been seen
    assert Progress(stack.services.redis, keys).skipped("carol") == {}
    from ncindex.index.indexing import Indexer

    Reconciler(stack.services, Indexer(stack.services), producer).scan("carol", "file")
    assert Progress(stack.services.redis, keys).skipped("carol") == {"excluded_path": 2}
    # the walk names the files too
    assert [(d["reason"], d["path"]) for d in status_of(stack, "carol")["skipped_documents"]] == [
        ("excluded_path", "/Private/a.txt"),
        ("excluded_path", "/Private/b.txt"),
    ]
    stack.settings.index_exclude_globs = []
    stack.wait_idle(30)
    for key in stack.services.redis.scan_iter(keys.reconcile_prefix + "*carol*"):
        stack.services.redis.delete(key)
    Reconciler(stack.services, Indexer(stack.services), producer).scan("carol", "file")
    assert Progress(stack.services.redis, keys).skipped("carol") == {}


def test_no_eta_while_no_worker_answers(redis_url: str) -> None:
    """With every worker gone (killed -9), `ncindex status` showed "backlog ETA 42 s" and
    "first indexing 66%, ETA 42 s" from the rate measured before: nothing would end."""
    from ncindex.sync.status import collect_status

    client = redis.Redis.from_url(redis_url)
    keys = Names("noworkertest")
    for key in client.scan_iter(keys.key("*")):
        client.delete(key)
    progress = Progress(client, keys)
    start = 2_000_000.0
    progress.queued("dora", [f"node:{i}" for i in range(10)], now=start)
    for i in range(4):
        progress.finished("dora", f"node:{i}", "indexed", chunks=3, now=start + 5 * (i + 1))
    now = start + 20
    working = collect_status(client, keys, now, users=["dora"], workers=["index@vm"])
    assert working["total"]["eta_seconds"] > 0
    assert working["users"]["dora"]["first_indexing"]["eta_seconds"] > 0
    for workers in ([], None):  # none answered; not asked (the rates are all there is)
        data = collect_status(client, keys, now, users=["dora"], workers=workers)
        etas = [data["total"]["eta_seconds"], data["users"]["dora"]["eta_seconds"]]
        etas.append(data["users"]["dora"]["first_indexing"]["eta_seconds"])
        assert etas == ([None] * 3 if workers == [] else [working["total"]["eta_seconds"]] * 3)


def test_first_indexing_progress_and_eta_from_the_measured_rate(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()

    keys = Names("progresstest")
    progress = Progress(client, keys)
    start = 1_000_000.0
    progress.queued("dora", [f"node:{i}" for i in range(10)], now=start)
    progress.queued("eve", ["node:99"], now=start)
    for i in range(4):  # four documents in 20 s: 0.2 documents/s
        progress.finished("dora", f"node:{i}", "indexed", chunks=3, now=start + 5 * (i + 1))
    now = start + 20
    from ncindex.sync.user_status import first_indexing

    pending = progress.pending("dora", now=now)
    rates = progress.rates("dora", now=now)
    assert pending == 6
    assert rates.documents == 4 and rates.chunks == 12
    # from the first active bucket's start (start + 0 … start + 10) to now
    assert 10 <= rates.window_seconds <= 20
    first = first_indexing(progress, "dora", pending, rates.documents_per_second)
    assert first.state == "running" and first.finished == 4 and first.progress == 0.4
    assert first.eta_seconds == round(6 / rates.documents_per_second, 1)
    assert progress.rates("eve", now=now).documents == 0  # another user's work is not eve's
    assert progress.rates(None, now=now).documents == 4
    assert progress.users() == ["dora", "eve"]  # what `ncindex status` lists besides accounts
    # a document indexed again (its upload's event, then the scan) is one document finished
    progress.queued("dora", ["node:0"], now=now)
    progress.finished("dora", "node:0", "unchanged", now=now)
    assert progress.first_indexing("dora")["finished"] == 4
    for i in range(4, 10):
        progress.finished("dora", f"node:{i}", "unchanged", now=now)
    done = first_indexing(progress, "dora", 0, 1.0)
    assert done.state == "done" and done.finished == 10 and done.done_at == now
    assert not client.exists(keys.first_indexed("dora"))  # its set goes with the run
    progress.finished("dora", "node:3", "indexed", now=now + 60)  # after the end: not counted
    assert progress.first_indexing("dora")["finished"] == 10
    # the throughput buckets expire: the structure stays bounded
    ttls = [client.ttl(k) for k in client.scan_iter(keys.key("throughput", "*"))]
    assert ttls and all(0 < t <= KEEP_SECONDS + BUCKET_SECONDS for t in ttls)


def test_a_finished_run_forgets_the_failures_only_when_asked(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    keys = Names("progress-failures")
    failing = FailingDocuments(client, keys)
    for subject in ("node:1", "node:2"):
        failing.failed(subject, "dora", "ncindex.index_node", {}, OSError("x"), retrying=True)
    progress = Progress(client, keys)
    progress.finished("dora", "node:1", "indexed", chunks=1)
    progress.finished("dora", "node:2", "indexed", chunks=1, clear_failures=True)
    assert failing.get("node:1") is not None
    assert failing.get("node:2") is None
    client.close()


def test_a_first_indexing_counted_by_the_release_before_keeps_its_count(redis_url: str) -> None:
    """That release kept a count of runs in ``finished`` while it ran; the set adds to it, and
    the set expires should a worker of that release end the run (it would not delete it)."""
    client = redis.Redis.from_url(redis_url)
    keys = Names("progressupgrade")
    client.delete(keys.first_indexing("fay"), keys.first_indexed("fay"), keys.pending("fay"))
    progress = Progress(client, keys)
    progress.queued("fay", ["node:1", "node:2"], now=1_000.0)
    client.hset(keys.first_indexing("fay"), "finished", 6)  # as the release before counted
    progress.finished("fay", "node:1", "indexed", now=1_010.0)
    assert progress.first_indexing("fay")["finished"] == 7
    assert 0 < client.ttl(keys.first_indexed("fay")) <= 7 * 86400
    progress.finished("fay", "node:2", "indexed", now=1_020.0)
    assert progress.first_indexing("fay") == {
        "started_at": 1_000.0,
        "done_at": 1_020.0,
        "finished": 8,
    }


def test_documents_cut_short_by_a_bound_are_listed(stack: Stack) -> None:
    """A file or note longer than ``NCINDEX_MAX_DOCUMENT_CHARS`` was indexed up to the cut
    and nothing said so anywhere: a phrase beyond it was simply never found. Now its path is
    listed under ``truncated`` (the caller's own only), until a shorter version is indexed."""
    stack.settings.max_document_chars = 1000
    filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 40
    long_file = stack.sim.put_file("alice", "/Docs/journal.txt", (filler + "Glenfinnan").encode())
    long_note = stack.sim.put_file("alice", "/Notes/Diary.md", ("# Diary\n" + filler).encode())
    short = stack.sim.put_file("alice", "/Docs/short.txt", b"Only a few words.")
    stack.sim.put_file("bob", "/Docs/bob.txt", (filler + "Tobermory").encode())
    keys = [f"file:{long_file}", f"note:{long_note}", f"file:{short}"]
    wait_until(lambda: all(stack.points(k) for k in keys), 30)
    stack.wait_idle(30)

    alice = status_of(stack, "alice")
    schema_check(alice)
    assert alice["truncated"] == [
        {"subject": f"node:{long_file}", "path": "/Docs/journal.txt"},
        {"subject": f"node:{long_note}", "path": "/Notes/Diary.md"},
    ]
    bob = status_of(stack, "bob")
    assert [entry["path"] for entry in bob["truncated"]] == ["/Docs/bob.txt"]

    stack.sim.put_file("alice", "/Docs/journal.txt", b"Glenfinnan, in short.")
    wait_until(
        lambda: [e["path"] for e in status_of(stack, "alice")["truncated"]] == ["/Notes/Diary.md"],
        30,
    )


def test_skipped_documents_are_named_with_their_rule(stack: Stack) -> None:
    """``skipped`` only counted per rule ("unsupported_format 2"), so nobody could tell which
    of their files were left out; each is now listed with its rule and path."""
    stack.settings.index_exclude_globs = ["/Private/**"]
    stack.sim.put_file("alice", "/Private/diary.txt", b"Private thoughts about kelp.")
    stack.sim.put_file("alice", "/Archive/photos.zip", b"PK\x05\x06" + b"\0" * 18)
    stack.sim.put_file("alice", "/Docs/empty.txt", b"")
    good = stack.sim.put_file("alice", "/Docs/lamp.txt", b"Lamp wick.")
    wait_until(lambda: stack.points(f"file:{good}"), 30)
    stack.wait_idle(30)
    alice = status_of(stack, "alice")
    schema_check(alice)
    assert alice["skipped"] == {"excluded_path": 1, "no_text": 1, "unsupported_format": 1}
    named = {(d["reason"], d["path"]) for d in alice["skipped_documents"]}
    assert named == {
        ("unsupported_format", "/Archive/photos.zip"),
        ("no_text", "/Docs/empty.txt"),
        ("excluded_path", "/Private/diary.txt"),
    }
    assert [d["path"] for d in alice["skipped_documents"]] == sorted(p for _, p in named)
    assert status_of(stack, "bob")["skipped_documents"] == []


def test_ncindex_status_counts_a_document_in_two_versions_once(
    redis_url: str, tmp_path: Path
) -> None:
    """`ncindex status` counted first chunks: a note whose new version was written beside the
    old one (before the old is deleted) showed as two documents, where ``GET /v1/status``
    showed one. Both count documents now (``document_counts``)."""
    from ncindex.store import PointRecord, SparseVector
    from ncindex.store.qdrant_edge import QdrantEdgeStore
    from ncindex.sync.status import collect_status

    client = redis.Redis.from_url(redis_url)
    keys = Names("twoversionstatustest")
    store = QdrantEdgeStore(tmp_path, "m")
    store.ensure_collection(4)

    def first_chunk(n: int, doc_key: str, doc_type: str, at: int) -> PointRecord:
        payload = {"doc_key": doc_key, "doc_type": doc_type, "chunk_index": 0}
        return PointRecord(
            id=f"00000000-0000-4000-8000-{n:012d}",
            dense=[1.0 + n] * 4,
            sparse=SparseVector(indices=[n], values=[1.0]),
            payload=payload | {"acl": ["user:dora"], "indexed_at": at},
        )

    store.upsert(
        [
            first_chunk(1, "note:7", "note", 10),
            first_chunk(2, "note:7", "note", 20),  # its new version, the old not yet deleted
            first_chunk(3, "file:8", "file", 10),
        ]
    )
    try:
        dora = collect_status(client, keys, users=["dora"], store=store)["users"]["dora"]
        assert dora["indexed"]["note"] == 1
        assert dora["indexed"]["file"] == 1
        assert set(dora["indexed"]) == {t.value for t in DocType}
    finally:
        store.close()
