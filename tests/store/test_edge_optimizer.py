"""The embedded engine keeps itself optimised: a copy of the shard is optimised in a child
process and swapped in, with every write made meanwhile replayed, searches served throughout,
and the state left for ``ncindex status``."""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import models as m

from ncindex.errors import StoreUnavailable
from ncindex.settings import Settings
from ncindex.store import Fusion, PointRecord, SparseVector, shard_copy, store_status
from ncindex.store.edge_optimizer import (
    STATE_FILE,
    ChildOptimisation,
    EdgeOptimizer,
    optimise_in_child,
    read_state,
    unindexed_points,
)
from ncindex.store.layout import DEFAULT_LAYOUT
from ncindex.store.qdrant_edge import QdrantEdgeStore
from support import edge_segment_sparse_thresholds

DIM = 16
SMALL = dataclasses.replace(DEFAULT_LAYOUT, indexing_threshold_kb=10)
"""Index segments from 10 KB (a few hundred points of 16 floats) so the tests build HNSW."""


def _points(start: int, n: int, user: str = "alice") -> list[PointRecord]:
    rng = np.random.default_rng(start)
    return [
        PointRecord(
            id=str(uuid.UUID(int=start + i)),
            payload={"doc_key": f"file:{start + i}", "acl": [user], "chunk_index": 0},
            dense=rng.standard_normal(DIM).tolist(),
            sparse=SparseVector(indices=[(start + i) % 97], values=[1.0]),
        )
        for i in range(n)
    ]


@pytest.fixture
def store(tmp_path: Path) -> QdrantEdgeStore:
    s = QdrantEdgeStore(tmp_path, "m", layout=SMALL)
    s.ensure_collection(DIM)
    s.upsert(_points(0, 400))
    yield s
    s.close()


def _doc_keys(store: QdrantEdgeStore) -> set[str]:
    return {p["doc_key"] for p in store.scroll(None, ["doc_key"])}


def test_fresh_points_are_unindexed_and_an_optimised_shard_has_none(
    store: QdrantEdgeStore,
) -> None:
    assert unindexed_points(store.info()) == 400
    store.optimise_aside(optimise_in_child)
    assert unindexed_points(store.info()) == 0
    assert store.info()["points"] == 400


def test_the_optimised_segments_get_the_bm25_threshold_of_the_shards_size(
    tmp_path: Path,
) -> None:
    """A shard of 400 points whose layout asks a share of 0.5 over a floor of 10: the copy is
    optimised with a threshold of 200, which the swapped-in shard keeps."""
    layout = dataclasses.replace(SMALL, sparse_full_scan_threshold=10, sparse_full_scan_share=0.5)
    store = QdrantEdgeStore(tmp_path, "m", layout=layout)
    store.ensure_collection(DIM)
    store.upsert(_points(0, 400))
    asked: list[int] = []

    def optimise(path: Path, threshold: int) -> ChildOptimisation:
        asked.append(threshold)
        return optimise_in_child(path, threshold)

    try:
        store.optimise_aside(optimise)
        saved = json.loads((store.shard_path / "edge_config.json").read_text(encoding="utf-8"))
        assert asked == [200]
        assert saved["sparse_vectors"]["bm25"]["full_scan_threshold"] == 200
        assert edge_segment_sparse_thresholds(store.shard_path) == [200]
        assert len(_doc_keys(store)) == 400 and unindexed_points(store.info()) == 0
    finally:
        store.close()


def test_writes_during_the_optimisation_are_replayed(store: QdrantEdgeStore) -> None:
    def optimise_while_writing(path: Path, threshold: int) -> ChildOptimisation:
        store.upsert(_points(1000, 30, user="bob"))  # new documents
        store.delete_document("file:5")  # a removed one
        store.set_payload("file:7", {"acl": ["alice", "carol"]})  # a share
        held = optimise_in_child(path, threshold)
        store.upsert(_points(2000, 5))  # written while the copy was optimised
        return held

    report = store.optimise_aside(optimise_while_writing)

    assert report["replayed"] == 37
    keys = _doc_keys(store)
    assert len(keys) == 400 - 1 + 30 + 5
    assert "file:5" not in keys and "file:1000" in keys and "file:2004" in keys
    (seven,) = store.document_points("file:7")
    assert seven.payload["acl"] == ["alice", "carol"]
    flt = m.Filter(must=[m.FieldCondition(key="acl", match=m.MatchAny(any=["bob"]))])
    hits = store.query(
        dense=_points(1000, 1)[0].dense,
        sparse=None,
        flt=flt,
        limit=5,
        prefetch_limit=50,
        fusion=Fusion.DBSF,
    )
    assert hits and hits[0].payload["doc_key"] == "file:1000"
    # what was written before the copy is indexed; only the replayed writes are not yet
    assert unindexed_points(store.info()) <= report["replayed"]
    assert not list(store.root.glob(".m.*")), "no copy or retired shard left behind"


def test_writes_go_on_through_every_step_and_all_reach_the_swapped_shard(
    store: QdrantEdgeStore,
) -> None:
    """A writer that never stops while the shard is copied, optimised, replayed and swapped:
    every document it wrote is in the optimised shard as last written, and one round of
    replay (more than the last round's size) ran without the write lock."""
    written: dict[str, list[float]] = {}
    stop = threading.Event()

    def write_forever() -> None:
        n = 0
        while not stop.is_set():
            (point,) = _points(3000 + n % 150, 1)  # 150 documents, each rewritten in turn
            point = dataclasses.replace(point, dense=[float(n % 7) + 1.0, *point.dense[1:]])
            store.upsert([point])
            written[point.payload["doc_key"]] = point.dense
            n += 1

    def optimise_with_a_big_journal(path: Path, threshold: int) -> ChildOptimisation:
        store.upsert(_points(8000, 100))  # more than the last, locked round replays
        return optimise_in_child(path, threshold)

    writer = threading.Thread(target=write_forever)
    writer.start()
    try:
        report = store.optimise_aside(optimise_with_a_big_journal)
    finally:
        stop.set()
        writer.join()

    assert report["replay_rounds"] >= 2 and report["replayed"] >= 100
    keys = _doc_keys(store)
    assert set(written) <= keys and {f"file:{8000 + i}" for i in range(100)} <= keys
    assert len(keys) == 400 + 100 + len(written)
    for doc_key, dense in written.items():
        (point,) = store.document_points(doc_key, with_vectors=True)
        stored = np.asarray(point.dense)
        expected = np.asarray(dense) / np.linalg.norm(dense)  # cosine storage normalises
        assert np.allclose(stored, expected, atol=1e-5), doc_key
    assert not list(store.root.glob(".m.*"))


def test_searches_are_served_while_the_copy_is_optimised(store: QdrantEdgeStore) -> None:
    searched: list[int] = []

    held: list[ChildOptimisation] = []

    def optimise_and_search(path: Path, threshold: int) -> ChildOptimisation:
        child = threading.Thread(target=lambda: held.append(optimise_in_child(path, threshold)))
        child.start()
        while child.is_alive():
            searched.append(
                len(
                    store.query(
                        dense=[1.0] * DIM,
                        sparse=None,
                        flt=None,
                        limit=3,
                        prefetch_limit=10,
                        fusion=Fusion.DBSF,
                    )
                )
            )
        child.join()
        return held[0]

    store.optimise_aside(optimise_and_search)
    assert searched and all(n == 3 for n in searched)


def test_a_failing_optimisation_leaves_the_live_shard_as_it_was(store: QdrantEdgeStore) -> None:
    def fail(path: Path, threshold: int) -> ChildOptimisation:
        store.upsert(_points(5000, 2))
        raise StoreUnavailable("child died")

    with pytest.raises(StoreUnavailable, match="child died"):
        store.optimise_aside(fail)
    assert len(_doc_keys(store)) == 402
    assert not list(store.root.glob(".m.*"))
    store.upsert(_points(6000, 1))  # the journal is off again: writes go on as before
    assert len(_doc_keys(store)) == 403


def test_a_write_that_cannot_be_replayed_drops_the_copy(store: QdrantEdgeStore) -> None:
    def write_without_doc_key(path: Path, threshold: int) -> ChildOptimisation:
        store.upsert([PointRecord(id=str(uuid.UUID(int=9999)), payload={}, dense=[0.5] * DIM)])
        return optimise_in_child(path, threshold)

    with pytest.raises(StoreUnavailable, match="without doc_key"):
        store.optimise_aside(write_without_doc_key)
    assert store.info()["points"] == 401
    assert unindexed_points(store.info()) == 401


def test_the_optimizer_acts_on_its_threshold_and_records_its_state(
    store: QdrantEdgeStore, tmp_path: Path
) -> None:
    idle = EdgeOptimizer(lambda: [store], after_points=1000, check_seconds=3600)
    assert idle.check_once() == []
    assert read_state(tmp_path)["m"]["state"] == "idle"
    assert read_state(tmp_path)["m"]["unindexed_points"] == 400

    busy = EdgeOptimizer(lambda: [store], after_points=100, check_seconds=3600)
    assert busy.check_once() == ["m"]
    state = read_state(tmp_path)["m"]
    assert state["state"] == "idle" and state["error"] is None
    assert state["outcome"] == "optimised" and state["finished_at"] > state["started_at"]
    assert state["unindexed_points"] == 0 and state["optimise_seconds"] > 0

    def broken(path: Path, threshold: int) -> ChildOptimisation:
        raise StoreUnavailable("no child")

    store.upsert(_points(7000, 150))
    failing = EdgeOptimizer(lambda: [store], after_points=100, check_seconds=3600, optimise=broken)
    assert failing.check_once() == []
    state = read_state(tmp_path)["m"]
    assert state["state"] == "failed" and state["outcome"] == "failed"
    assert "no child" in state["error"]
    assert "optimise_seconds" not in state, "a failed run shows none of the run before's steps"
    assert idle.check_once() == []  # a check between runs keeps the last run's outcome
    assert read_state(tmp_path)["m"]["outcome"] == "failed"

    settings = Settings(qdrant_path=tmp_path)
    assert store_status(settings) == {"engine": "qdrant-edge", "optimizer": read_state(tmp_path)}


def test_a_state_file_written_by_hand_does_not_stop_the_optimizer(
    store: QdrantEdgeStore, tmp_path: Path
) -> None:
    (tmp_path / STATE_FILE).write_text('{"m": "idle", "other": 3}', encoding="utf-8")
    assert EdgeOptimizer(lambda: [store], after_points=1000, check_seconds=3600).check_once() == []
    assert read_state(tmp_path)["m"]["unindexed_points"] == 400  # the entry written anew


def test_the_optimizer_thread_runs_and_stops(store: QdrantEdgeStore) -> None:
    optimizer = EdgeOptimizer(lambda: [store], after_points=100, check_seconds=0.05)
    optimizer.start()
    try:
        for _ in range(600):
            if unindexed_points(store.info()) == 0:
                break
            threading.Event().wait(0.1)
    finally:
        optimizer.stop(timeout=60)
    assert unindexed_points(store.info()) == 0
    off = EdgeOptimizer(lambda: [store], after_points=0, check_seconds=0.05)
    off.start()
    assert off._thread is None


def test_a_child_that_cannot_optimise_fails_with_its_error(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match=r"optimising .* failed: the child said ''"):
        optimise_in_child(tmp_path / "no-shard-here")


def test_writes_made_while_the_folder_is_copied_do_not_wait_and_reach_the_copy(
    store: QdrantEdgeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder is copied without the write lock: writes made before, during and after the
    copy itself finish at once (another thread, bounded wait) and are in the swapped shard,
    caught up from the files they changed (not from the journal, which starts after)."""
    real_copy = shard_copy.copy_while_written

    def write_elsewhere(start: int) -> None:
        writer = threading.Thread(target=store.upsert, args=(_points(start, 20, user="bob"),))
        writer.start()
        writer.join(timeout=30)
        assert not writer.is_alive(), "a write waited for the copy"

    def copy_beside_writes(source: Path, destination: Path) -> None:
        write_elsewhere(5000)
        real_copy(source, destination)
        write_elsewhere(6000)
        store.delete_document("file:9")

    monkeypatch.setattr(shard_copy, "copy_while_written", copy_beside_writes)
    monkeypatch.setattr(shard_copy, "MTIME_MARGIN_NS", 0)  # only real stamps count
    size = sum(p.stat().st_size for p in store.shard_path.rglob("*") if p.is_file())
    threading.Event().wait(0.05)  # a clock tick after the fixture's writes
    report = store.optimise_aside(optimise_in_child)

    assert 0 < report["caught_up_bytes"] < size and report["replayed"] == 0
    holds = (report["copy_locked_seconds"], report["swap_locked_seconds"])
    assert max(holds) == report["locked_seconds"]
    assert 0 < report["load_seconds"] <= report["swap_locked_seconds"]
    keys = _doc_keys(store)
    assert {f"file:{n}" for n in (*range(5000, 5020), *range(6000, 6020))} <= keys
    assert "file:9" not in keys and len(keys) == 400 + 40 - 1
    assert unindexed_points(store.info()) == 0, "the copy's writes were optimised with it"


class _SlowClose:
    """Stands for a shard or an optimised copy whose ``close`` first sleeps ``pause`` seconds
    (everything else passes through)."""

    def __init__(self, inner: object, pause: float) -> None:
        self._inner, self._pause = inner, pause

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def close(self) -> None:
        threading.Event().wait(self._pause)
        self._inner.close()  # type: ignore[attr-defined]


def test_the_swap_reports_each_locked_step_apart(store: QdrantEdgeStore) -> None:
    # the copy's close made to take 0.5 s and the live shard's 1.5 s: each lands in its own key
    store._shard = _SlowClose(store._open_shard(), 1.5)  # type: ignore[assignment]
    report = store.optimise_aside(
        lambda path, threshold: _SlowClose(optimise_in_child(path, threshold), 0.5)
    )

    assert 0.5 <= report["copy_close_seconds"] < 1.5
    assert report["live_close_seconds"] >= 1.5
    assert 0 < report["load_seconds"] < 1.5 and 0 < report["swap_replay_seconds"] < 0.5
    steps = ("swap_replay_seconds", "copy_close_seconds", "live_close_seconds", "load_seconds")
    assert sum(report[step] for step in steps) <= report["swap_locked_seconds"]
    assert len(_doc_keys(store)) == 400


def test_where_mapped_writes_are_not_stamped_the_whole_copy_is_locked(
    store: QdrantEdgeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shard_copy, "stamps_mapped_writes", lambda folder: False)
    monkeypatch.setattr(
        shard_copy, "copy_while_written", lambda *a: pytest.fail("copied without the lock")
    )
    report = store.optimise_aside(optimise_in_child)
    assert report["caught_up_bytes"] == -1
    assert len(_doc_keys(store)) == 400 and unindexed_points(store.info()) == 0


def test_a_copy_that_fills_the_disk_fails_the_round_and_leaves_the_shard(
    store: QdrantEdgeStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(source: Path, destination: Path) -> None:
        destination.mkdir()
        (destination / "partial").write_bytes(b"x")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shard_copy, "copy_while_written", disk_full)
    optimizer = EdgeOptimizer(lambda: [store], after_points=100, check_seconds=3600)
    assert optimizer.check_once() == []
    state = read_state(tmp_path)["m"]
    assert state["state"] == "failed" and "No space left" in state["error"]
    assert not list(store.root.glob(".m.*")), "the partial copy is removed"
    store.upsert(_points(6000, 1))  # writes go on, the journal off
    assert len(_doc_keys(store)) == 401
