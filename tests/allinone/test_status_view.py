"""What ``ncindex status`` says of the embedded engine's background optimiser: its state, its
last run (or why it failed) and the shard's size, in the text output and under ``--watch``."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from allinone.cli import main
from allinone.status_view import analyzer_lines, optimizer_lines, render
from ncindex.embedding.analyzer import ANALYZER_VERSION
from ncindex.store.edge_optimizer import STATE_FILE, read_state

NOW = 1_800_000_000.0
SIZE = {"points": 700, "segments": 2, "unindexed_points": 200}
RUN = {
    "started_at": NOW - 130,
    "finished_at": NOW - 126.2,
    "copy_seconds": 1.6,
    "optimise_seconds": 1.9,
    "swap_seconds": 0.3,
    "locked_seconds": 0.4,
}


def line(opt: dict[str, object]) -> str:
    (only,) = optimizer_lines({"engine": "qdrant-edge", "optimizer": {"m": opt}}, NOW)
    return only


def test_a_store_never_optimised() -> None:
    assert line({"state": "idle", **SIZE}) == (
        "store m: idle, never optimised; 700 points in 2 segments, 200 unindexed"
    )


def test_a_store_of_one_point_in_one_segment_is_counted_in_the_singular() -> None:
    one = {"state": "idle", "points": 1, "segments": 1, "unindexed_points": 0}
    assert line(one) == "store m: idle, never optimised; 1 point in 1 segment, 0 unindexed"


def test_the_last_run_with_its_steps_and_longest_wait() -> None:
    opt = {"state": "idle", "outcome": "optimised", "error": None, **SIZE, **RUN}
    assert line(opt) == (
        "store m: idle; last optimised 2 min 6 s ago in 3.8 s (copy 1.6, optimise 1.9, swap "
        "0.3 s), writes waited at most 0.4 s; 700 points in 2 segments, 200 unindexed"
    )


def test_a_failed_run_shows_its_error_and_no_earlier_figures() -> None:
    failed = {
        "state": "failed",
        "outcome": "failed",
        "started_at": NOW - 20,
        "finished_at": NOW - 18,
        "error": "no child",
        **SIZE,
    }
    assert line(failed) == (
        "store m: failed; last run failed 18 s ago after 2 s: no child; "
        "700 points in 2 segments, 200 unindexed"
    )


def test_a_state_written_before_runs_had_an_outcome() -> None:
    old_failure = {"state": "failed", "started_at": NOW - 20, "finished_at": NOW - 18,
                   "error": "disk full", **SIZE}  # fmt: skip
    assert "last run failed 18 s ago after 2 s: disk full" in line(old_failure)
    old_success = {"state": "idle", "error": None, **SIZE, **RUN}
    assert "last optimised 2 min 6 s ago in 3.8 s" in line(old_success)


def test_a_run_under_way_and_a_state_missing_figures() -> None:
    assert line({"state": "optimising", "started_at": NOW - 75}) == (
        "store m: optimising for 1 min 15 s; ? points in ? segments, ? unindexed"
    )
    assert optimizer_lines({"engine": "qdrant-server"}, NOW) == []


def test_a_state_written_by_hand_or_cut_short_never_breaks_the_status(tmp_path: Path) -> None:
    path = tmp_path / STATE_FILE
    for junk in ("not json", "[1, 2]", '"idle"', '{"m": "idle", "n": null, "o": [1]}'):
        path.write_text(junk, encoding="utf-8")
        assert read_state(tmp_path) == {}, junk
    path.write_text(
        '{"m": {"state": "idle", "outcome": "optimised", "started_at": NaN, '
        '"finished_at": 1e400, "locked_seconds": Infinity, "copy_seconds": "3", "points": 5}}',
        encoding="utf-8",
    )
    state = read_state(tmp_path)
    json.dumps(state, allow_nan=False)  # what status --json prints stays JSON
    assert line(state["m"]) == (
        "store m: idle; last optimised ? ago in ? s; 5 points in ? segments, ? unindexed"
    )
    odd = {"state": "optimising", "started_at": NOW + 60}  # a clock that went back
    assert line(odd).startswith("store m: optimising for ?;")
    backwards = {"state": "idle", "outcome": "optimised", "started_at": NOW, "finished_at": NOW - 5}
    assert "ago in ? s" in line(backwards)
    strings = {"state": "failed", "outcome": "failed", "started_at": "1", "finished_at": True}
    assert line(strings).startswith("store m: failed; last run failed ? ago after ?: None;")
    no_end = {"state": "failed", "outcome": "failed", "started_at": NOW - 5, "error": "x"}
    assert line(no_end).startswith("store m: failed; last run failed ? ago after ?: x;")
    huge = {"state": "optimising", "started_at": 10**400}
    assert line(huge).startswith("store m: optimising for ?;")


def test_a_run_the_process_died_in() -> None:
    interrupted = {"state": "idle", "started_at": NOW - 300, **SIZE}
    assert line(interrupted).startswith("store m: idle; last run interrupted (started 5 min 0 s")


def test_status_and_its_watch_show_the_optimiser(redis_url: str, tmp_path: Path) -> None:
    now = time.time()
    state = {"m": {"state": "idle", "outcome": "optimised", **SIZE, **RUN,
                   "started_at": now - 10, "finished_at": now - 6.2}}  # fmt: skip
    (tmp_path / STATE_FILE).write_text(json.dumps(state), encoding="utf-8")
    env = {
        "NCINDEX_REDIS_URL": redis_url,
        "NCINDEX_QDRANT_PATH": str(tmp_path),
        "NCINDEX_LOG_LEVEL": "WARNING",
    }
    expected = re.compile(r"store m: idle; last optimised \d+ s ago in 3\.8 s \(copy 1\.6, ")
    text = CliRunner().invoke(main, ["status"], env=env)
    assert text.exit_code == 0, text.output
    assert expected.search(text.output), text.output
    watched = CliRunner().invoke(
        main, ["status", "--watch", "--interval", "0.1", "--iterations", "2"], env=env
    )
    assert watched.exit_code == 0, watched.output
    assert expected.search(watched.output), watched.output
    # not a terminal: nothing can be redrawn, so each frame is written after the last
    assert len(expected.findall(watched.output)) == 2, watched.output


def test_status_names_the_analyzer_upgrade_a_sample_of_the_store_shows(
    redis_url: str, tmp_path: Path
) -> None:
    """`ncindex status` said nothing of documents an older BM25 analyzer made: it shows one
    line from a sample of the store's first chunks, the command when one is older."""
    import redis

    from ncindex.names import Names
    from ncindex.store import PointRecord, SparseVector
    from ncindex.store.qdrant_edge import QdrantEdgeStore
    from ncindex.sync.status import collect_status

    store = QdrantEdgeStore(tmp_path, "m")
    store.ensure_collection(4)
    client = redis.Redis.from_url(redis_url)
    keys = Names("analyzerstatustest")
    assert collect_status(client, keys, users=[])["analyzer"] is None  # no store: no line
    assert analyzer_lines(collect_status(client, keys, users=[], store=store)["analyzer"]) == [
        f"analyzer: {ANALYZER_VERSION} (0 documents sampled, all current)"
    ]
    store.upsert(
        [
            PointRecord(
                id=f"00000000-0000-4000-8000-{i:012d}",
                dense=[1.0 + i] * 4,
                sparse=SparseVector(indices=[i], values=[1.0]),
                payload={"doc_key": f"note:{i}", "chunk_index": 0, "analyzer": version},
            )
            for i, version in enumerate(["en-2", ANALYZER_VERSION, ANALYZER_VERSION])
        ]
    )
    data = collect_status(client, keys, users=[], store=store)
    assert data["analyzer"]["sampled"] == {"en-2": 1, ANALYZER_VERSION: 2}
    (shown,) = analyzer_lines(data["analyzer"])
    assert shown.startswith("analyzer: 1 of 3 documents sampled")
    assert "en-2 (1)" in shown and "`ncindex reindex --analyzer`" in shown
    data |= {"nextcloud": {"summary": "?"}, "store": {}}
    console = Console(width=400, record=True, file=io.StringIO())
    console.print(render(data))
    assert "en-2 (1)" in console.export_text()
    store.close()


def test_the_unknown_indexed_counts_say_why_where_they_show(redis_url: str, tmp_path: Path) -> None:
    """On the embedded store ``ncindex status`` showed "indexed: ?" and said why only in
    ``--help`` and the README: the line, and the watch's table, say it where the ``?`` is."""
    env = {
        "NCINDEX_REDIS_URL": redis_url,
        "NCINDEX_QDRANT_PATH": str(tmp_path),
        "NCINDEX_NAMESPACE": f"unknown-{time.time_ns()}",
        "NCINDEX_ACCOUNTS": '{"alice": "pw"}',
    }
    text = CliRunner().invoke(main, ["status"], env=env)
    assert text.exit_code == 0, text.output
    why = "embedded store: counted with NCINDEX_QDRANT_URL only"
    assert f"user alice: indexed: ? ({why});" in text.output, text.output
    watched = CliRunner().invoke(main, ["status", "--watch", "--iterations", "1"], env=env)
    assert watched.exit_code == 0, watched.output
    assert f"docs ?: {why}" in watched.output, watched.output


def test_a_reindex_under_way_shows_what_since_when_and_how_far(
    redis_url: str, tmp_path: Path
) -> None:
    """`ncindex reindex --model` built a new collection for hours and `ncindex status` showed
    nothing of it: the step under way is a line (and ``reindex`` in ``--json``) saying what
    is rebuilt, since when (the first run of the step: a build queues itself again) and how
    far; a failed one says why; an ended one leaves nothing."""
    import redis

    from ncindex.index.reindex import STALLED_SECONDS, record_progress
    from ncindex.names import Names

    namespace = f"reindexstatus-{time.time_ns()}"
    client, keys = redis.Redis.from_url(redis_url), Names(namespace)
    env = {
        "NCINDEX_REDIS_URL": redis_url,
        "NCINDEX_QDRANT_PATH": str(tmp_path),
        "NCINDEX_NAMESPACE": namespace,
        "NCINDEX_LOG_LEVEL": "WARNING",
    }

    def status(*args: str) -> str:
        result = CliRunner().invoke(main, ["status", *args], env=env)
        assert result.exit_code == 0, result.output
        return result.output

    def line() -> str:
        (found,) = [x for x in status().splitlines() if x.startswith("reindex: ")]
        return found

    record_progress(client, keys, "switched-model", "switched", documents=7)
    assert "reindex: " not in status() and json.loads(status("--json"))["reindex"] is None
    record_progress(client, keys, "bge-small", "building")  # the pointers moved: step begun
    started = json.loads(status("--json"))["reindex"]
    assert started["state"] == "building" and started["model"] == "bge-small"
    assert started["documents"] is None  # the switched step's 7 are not this one's
    assert isinstance(started["started_at"], float)
    assert line().startswith("reindex: building the collection of model bge-small (search ")
    assert "documents not counted yet; last progress " in line()
    assert re.search(r" since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+ s ago\): ", line())
    record_progress(client, keys, "bge-small", "building", documents=10, remaining=4)
    later = json.loads(status("--json"))["reindex"]
    assert later["started_at"] == started["started_at"]  # the same step goes on
    assert (later["documents"], later["remaining"]) == (10, 4)
    assert ": 6 of 10 documents done (60%); last progress " in line()
    watched = status("--watch", "--iterations", "1")
    assert "6 of 10 documents done (60%)" in " ".join(watched.split())  # wrapped at 80
    assert later["stalled"] is False
    # the worker died mid-build: no record for longer than STALLED_SECONDS says so, and how
    # to resume, instead of "under way" for good
    client.hset(keys.reindex_progress, "updated_at", int(time.time()) - STALLED_SECONDS - 60)
    assert json.loads(status("--json"))["reindex"]["stalled"] is True
    assert line().startswith("reindex: stalled — building the collection of model bge-small")
    assert ": 6 of 10 documents done (60%); no progress for " in line()
    assert line().endswith("the same `ncindex reindex` command run again resumes the step")
    record_progress(client, keys, "bge-small", "building", documents=10, remaining=3)
    assert json.loads(status("--json"))["reindex"]["stalled"] is False  # it moves again
    record_progress(client, keys, ANALYZER_VERSION, "reanalyzing", documents=1, remaining=0)
    assert line().startswith(
        f"reindex: rewriting the BM25 vectors of older analyzers with {ANALYZER_VERSION} since "
    )
    assert ": 1 of 1 document done (100%);" in line()
    record_progress(client, keys, "", "failed", error="the build step was cut off 4 times")
    assert line().startswith("reindex: failed ")
    assert line().endswith(
        "ago: the build step was cut off 4 times — `ncindex reindex` shows the models; the "
        "same `ncindex reindex` command run again resumes the step"
    )
    record_progress(client, keys, "bge-small", "switched")
    assert "reindex: " not in status()
