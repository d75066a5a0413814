"""The indexing steps (ncindex/index/steps.py) and the one lock helper (ncindex/index/locks.py):
a document's stored version is read once per task, the caller's document is never modified,
and every lock is taken and released the same way."""

from __future__ import annotations

import copy
import dataclasses
import uuid
from typing import Any

import pytest
import redis

from ncindex.documents import DocRef, DocType, SourceDocument, point_document
from ncindex.errors import LockBusy
from ncindex.index.indexing import Indexer
from ncindex.index.locks import hold
from ncindex.index.steps import whole_version
from support import Stack


def paragraphs(count: int, changed: int | None = None) -> bytes:
    """``count`` paragraphs of 150 words each (about a chunk each); paragraph ``changed``
    gets other words."""
    out = []
    for i in range(count):
        tag = "edited" if i == changed else "first"
        out.append(" ".join(f"w{i}x{j}{tag if j == 0 else ''}" for j in range(150)) + ".")
    return "\n\n".join(out).encode()


def test_an_edit_reads_the_store_once_and_reuses_its_vectors(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack.sim.drop_rate = 1.0  # the indexer is driven by hand here
    fid = stack.sim.put_file("alice", "/Steps/long.txt", paragraphs(6))
    indexer = Indexer(stack.services)
    assert indexer.index_node("alice", fid).action == "indexed"
    key = f"file:{fid}"
    chunks = len(stack.points(key))
    assert chunks > 2
    stack.sim.put_file("alice", "/Steps/long.txt", paragraphs(6, changed=3))

    store_type = type(stack.services.store)
    real = store_type.document_points
    reads: list[tuple[str, bool]] = []

    def counting(self: Any, doc_key: str, *, with_vectors: bool = False) -> Any:
        reads.append((doc_key, with_vectors))
        return real(self, doc_key, with_vectors=with_vectors)

    monkeypatch.setattr(store_type, "document_points", counting)
    outcome = indexer.index_node("alice", fid, recheck=False)
    assert outcome.action == "indexed"
    assert 0 < outcome.embedded < chunks  # the unchanged paragraphs' vectors were reused
    assert [r for r in reads if r[0] == key] == [(key, True)]  # one read, with vectors


def test_a_cut_version_under_the_earlier_id_scheme_is_replaced_whole(stack: Stack) -> None:
    """A document whose stored version was written under uuid5 ids (before ids named their
    documents) and cut short by a fault is rewritten with the same text: the clean-up keeps
    the ids just written, so the uuid5 points of that same ``content_hash`` go too (kept by
    ``content_hash``, they stayed beside the new ones: every chunk twice, never whole)."""
    stack.sim.drop_rate = 1.0  # the indexer is driven by hand here
    fid = stack.sim.put_file("alice", "/Steps/legacy.txt", paragraphs(4))
    indexer = Indexer(stack.services)
    assert indexer.index_node("alice", fid).action == "indexed"
    key = f"file:{fid}"
    store = stack.services.store
    written = store.document_points(key, with_vectors=True)
    assert len(written) > 2 and all(point_document(p.id) for p in written)
    namespace = uuid.UUID("5b7c1e52-8f0e-4c53-9d0a-6a4f3e2b1c90")
    legacy = [
        dataclasses.replace(
            p, id=str(uuid.uuid5(namespace, f"{key}:{p.payload['content_hash']}:{i}"))
        )
        for i, p in enumerate(written[:-1])
    ]
    store.delete_document(key)
    store.upsert(legacy)
    assert indexer.index_node("alice", fid, recheck=False).action == "indexed"
    left = store.document_points(key)
    assert sorted(p.id for p in left) == sorted(p.id for p in written)
    assert whole_version([p.payload for p in left])


def test_writing_a_document_leaves_the_callers_document_as_it_was(stack: Stack) -> None:
    indexer = Indexer(stack.services)
    doc = SourceDocument(
        ref=DocRef(DocType.FILE, "990001"),
        user="alice",
        owner="alice",
        title="steps.md",
        text="# Steps\n\nClassify, fetch, chunk, embed, write and clean up.",
        etag="e1",
        modified_at=1,
        path="/steps.md",
        markdown=True,
    )
    before = copy.deepcopy(doc)
    outcome = indexer.steps.write_document(doc, indexer.steps.read(doc.ref))
    assert outcome.action == "indexed" and doc == before
    payload = stack.points(doc.ref.key)[0].payload
    assert "markdown" not in payload  # a chunking hint, not a payload field
    # the same document again: nothing to embed, the hint still there for the chunker
    again = indexer.steps.write_document(doc, indexer.steps.read(doc.ref))
    assert again.action == "unchanged" and doc == before


def test_a_note_and_a_file_of_one_id_share_one_document_lock(stack: Stack) -> None:
    indexer = Indexer(stack.services)
    with indexer.lock(7):
        with pytest.raises(LockBusy), indexer.lock(DocRef(DocType.NOTE, "7"), wait=0):
            pass
        with indexer.lock(DocRef(DocType.DECK_CARD, "7"), wait=0):  # another document
            pass
    with indexer.lock(DocRef(DocType.FILE, "7"), wait=0):  # released
        pass


def test_the_lock_helper_holds_refuses_waits_and_survives_a_lost_lock(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    name = "ncindex-test:lock:steps-helper"
    client.delete(name)
    with hold(client, name, ttl=30, wait=0) as held:
        assert held and client.get(name) is not None
        with hold(client, name, ttl=30, wait=0) as again:
            assert not again
        with hold(client, name, ttl=30, wait=0.2) as again:  # waited, still held
            assert not again
        assert client.get(name) is not None  # a refused taker released nothing
        client.delete(name)  # lost (expired, Redis flushed): logged on release, not raised
    with hold(client, name, ttl=30, wait=0) as held:
        assert held
    assert client.get(name) is None


def test_a_lock_left_by_an_earlier_run_of_the_same_task_is_taken_over(redis_url: str) -> None:
    # a run of task "t1" died holding the lock; its message, delivered again, keeps the id
    client = redis.Redis.from_url(redis_url)
    name = "ncindex-test:lock:steps-owner"
    client.set(name, "t1", ex=30)
    with hold(client, name, ttl=30, wait=0, owner="t2") as held:  # another task's: refused
        assert not held
    client.expire(name, 5)
    with hold(client, name, ttl=30, wait=0, owner="t1") as held:
        assert held and client.get(name) == b"t1"
        assert client.ttl(name) > 5  # its expiry started again
    assert client.get(name) is None  # and released as this run's
    with hold(client, name, ttl=30, wait=0, owner="t3") as held:  # a free lock: as before
        assert held and client.get(name) == b"t3"
