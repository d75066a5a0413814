"""Model changes without downtime (issue 6, item 4): ``ncindex reindex`` on the whole stack.

The second model is all-MiniLM-L6-v2's ONNX weights with CLS pooling instead of mean pooling
(``minilm-cls``): the only dense weights available offline are MiniLM's, and a different
pooling gives genuinely different vectors, which is what a model change has to get right.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from allinone.cli import main
from evaluation.beir import sample_dataset
from ncindex import names
from ncindex.embedding.analyzer import ANALYZER_VERSION, document_vector, term_id
from ncindex.embedding.embedder import Embedder
from ncindex.embedding.models import PACKAGED_DENSE_MODEL, dense_dir_name, install_models
from ncindex.errors import ModelError, ReindexError, StoreUnavailable
from ncindex.index.indexing import Indexer
from ncindex.index.reindex import Reindexer, progress
from ncindex.settings import Settings
from ncindex.store import ModelPointers, SparseVector, model_slug
from support import PASSWORDS, Stack, WorkerDeployment, wait_until

OTHER = "minilm-cls"
LIVE = model_slug(PACKAGED_DENSE_MODEL)
DOCS = {
    "/Notes/Lighthouse.md": "# Lighthouse\n\nThe lighthouse lens is polished every spring.",
    "/Notes/Harbour.md": "# Harbour\n\nThe harbour master logs every tide at the pier gauge.",
    "/Notes/Orchard.md": "# Orchard\n\nPrune the apple trees in late winter before buds swell.",
    "/Notes/Bees.md": "# Bees\n\nThe hives need a sugar feed when the autumn turns cold.",
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packaged models plus ``minilm-cls`` (links to the packaged files, CLS pooling)."""
    shared = Settings().model_dir
    install_models(shared)
    folder = tmp_path_factory.mktemp("models")
    for entry in shared.iterdir():
        (folder / entry.name).symlink_to(entry)
    packaged = shared / dense_dir_name(PACKAGED_DENSE_MODEL)
    other = folder / OTHER
    (other / "1_Pooling").mkdir(parents=True)
    for entry in packaged.iterdir():
        if entry.is_file():
            (other / entry.name).symlink_to(entry)
    pooling = json.loads((packaged / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
    pooling |= {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}
    (other / "1_Pooling" / "config.json").write_text(json.dumps(pooling), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def embedder(model_dir: Path) -> Embedder:
    """The packaged model from this module's model folder (overrides the session one)."""
    embedder = Embedder(Settings(model_dir=model_dir))
    embedder.load()
    return embedder


@pytest.fixture(autouse=True)
def quick_model_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Processes re-read the model pointers every 0.2 s (the stack's settings read it)."""
    monkeypatch.setenv("NCINDEX_MODEL_CHECK_SECONDS", "0.2")
    yield


def _write(stack: Stack, path: str, text: str) -> str:
    stack.sim.put_file("alice", path, text.encode())
    file_id = stack.sim.file_id("alice", path)
    return f"note:{file_id}"


def _dense(stack: Stack, slug: str, key: str) -> list[list[float]]:
    store = stack.services.models.handle(slug).store
    return [p.dense for p in store.document_points(key, with_vectors=True)]


def _texts(stack: Stack, slug: str) -> dict[str, str]:
    store = stack.services.models.handle(slug).store
    return {
        p["doc_key"]: p["text"]
        for p in store.scroll(None, ["doc_key", "text", "chunk_index"])
        if p["chunk_index"] == 0
    }


def _run(args: list[str], stack: Stack, monkeypatch: pytest.MonkeyPatch) -> str:
    s = stack.settings
    for name, value in {
        "NCINDEX_REDIS_URL": s.redis_url,
        "NCINDEX_DATA_DIR": str(s.data_dir),
        "NCINDEX_MODEL_DIR": str(s.model_dir),
    }.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return result.output


def test_reindex_builds_switches_back_and_finishes_without_losing_a_write(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = {path: _write(stack, path, text) for path, text in DOCS.items()}
    stack.sim.put_file("alice", "/Mail/rota.eml", b"Subject: Rota\r\n\r\nThe tide rota.\r\n")
    letter = f"file:{stack.sim.file_id('alice', '/Mail/rota.eml')}"
    wait_until(lambda: all(stack.points(k) for k in [*keys.values(), letter]), 30)
    assert stack.search_as("alice", "lighthouse lens")["model"] == PACKAGED_DENSE_MODEL

    # 1. Announce the new model: from now on every write is mirrored into it.
    reindexer = Reindexer(stack.services, Indexer(stack.services))
    reindexer.start(OTHER)
    assert reindexer.pointers() == ModelPointers(active=LIVE, building=OTHER)
    assert "building: minilm-cls" in _run(["reindex"], stack, monkeypatch)
    # An edit while the model is being built reaches both collections.
    edited = keys["/Notes/Harbour.md"]
    _write(stack, "/Notes/Harbour.md", "# Harbour\n\nThe ferry now docks at the north quay.")
    wait_until(lambda: "ferry" in _texts(stack, OTHER).get(edited, ""), 30)
    assert "ferry" in _texts(stack, LIVE)[edited]
    # Search keeps using the live model while the new one fills.
    during = stack.search_as("alice", "lighthouse lens")
    assert during["model"] == PACKAGED_DENSE_MODEL
    assert during["results"][0]["title"] == "Lighthouse"
    with pytest.raises(ReindexError, match="still being built"):
        reindexer.back()

    # 2. The build (the Celery task, run by the stack's worker) copies the rest and switches.
    output = _run(["reindex", "--model", OTHER, "--wait", "60"], stack, monkeypatch)
    assert "live: minilm-cls" in output
    assert f"standby: {LIVE}" in output
    assert _texts(stack, OTHER) == _texts(stack, LIVE)
    # the copy keeps the extraction's version: a scan after the switch does not read it again
    copied = stack.services.models.handle(OTHER).store.document_points(letter)
    assert {(p.payload["extractor"], p.payload["extractor_version"]) for p in copied} == {
        ("eml", 1)
    }
    for key in keys.values():
        new, old = _dense(stack, OTHER, key), _dense(stack, LIVE, key)
        assert len(new) == len(old) > 0
        assert all(a != b for a, b in zip(new, old, strict=True))  # other vectors: other model
    wait_until(lambda: stack.search_as("alice", "lighthouse lens")["model"] == OTHER, 5)
    after = stack.search_as("alice", "lighthouse lens")
    assert after["results"][0]["title"] == "Lighthouse"

    # 3. Writes after the switch keep the standby current, so switching back loses nothing.
    bees = keys["/Notes/Bees.md"]
    _write(stack, "/Notes/Bees.md", "# Bees\n\nA swarm settled in the old chestnut tree.")
    wait_until(lambda: "swarm" in _texts(stack, LIVE).get(bees, ""), 30)
    assert "swarm" in _texts(stack, OTHER)[bees]
    assert f"live: {LIVE}" in _run(["reindex", "--back"], stack, monkeypatch)
    wait_until(
        lambda: stack.search_as("alice", "swarm chestnut")["model"] == PACKAGED_DENSE_MODEL, 5
    )
    assert stack.search_as("alice", "swarm chestnut")["results"][0]["title"] == "Bees"

    # 4. Finish: the second model's collection goes, writes go to one collection again.
    output = _run(["reindex", "--finish", "--wait", "60"], stack, monkeypatch)
    assert "standby" not in output and "building" not in output
    assert reindexer.pointers() == ModelPointers(active=LIVE)
    assert not (stack.settings.data_dir / "qdrant" / OTHER).exists()
    assert stack.search_as("alice", "lighthouse lens")["results"][0]["title"] == "Lighthouse"


def test_reindex_refuses_a_missing_or_live_model_and_resumes_a_build(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    reindexer = Reindexer(stack.services, Indexer(stack.services))
    stack.services.store  # noqa: B018  (a store with a live model)
    with pytest.raises(ModelError, match=r"no model\.onnx"):
        reindexer.start("acme/not-installed")
    with pytest.raises(ReindexError, match="already live"):
        reindexer.start(PACKAGED_DENSE_MODEL)
    reindexer.start(OTHER)
    reindexer.start(OTHER)  # resuming the same build is allowed
    assert reindexer.finish() == OTHER
    assert reindexer.pointers() == ModelPointers(active=LIVE)
    assert "live: " + LIVE in _run(["reindex"], stack, monkeypatch)


def test_reindex_analyzer_rewrites_old_bm25_vectors_in_place(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = [_write(stack, path, text) for path, text in DOCS.items()]
    wait_until(lambda: all(stack.points(k) for k in keys), 30)
    store = stack.services.models.handle(LIVE).store
    # Make two documents look written by the previous analyzer: fastembed-era payload
    # version and a BM25 vector of one unrelated term.
    old = keys[:2]
    for key in old:
        points = store.document_points(key, with_vectors=True)
        for p in points:
            p.payload["analyzer"] = "en-1"
            p.sparse = SparseVector(indices=[term_id("zebra")], values=[1.0])
        store.upsert(points)
    assert stack.search_as("alice", "zebra")["results"]
    dense_before = {k: _dense(stack, LIVE, k) for k in keys}

    output = _run(["reindex", "--analyzer", "--wait", "60"], stack, monkeypatch)
    assert "state reanalyzed" in output
    for key in keys:
        for p in store.document_points(key, with_vectors=True):
            assert p.payload["analyzer"] == ANALYZER_VERSION
            expected = document_vector(p.payload["text"])
            assert p.sparse is not None and p.sparse.indices == expected.indices
            assert p.sparse.values == pytest.approx(expected.values, rel=1e-6)  # float32
        assert _dense(stack, LIVE, key) == dense_before[key]  # dense vectors untouched
    assert progress(stack.services)["documents"] == str(len(old))
    # A second run finds nothing to do.
    report = Reindexer(stack.services, Indexer(stack.services)).reanalyze(float("inf"))
    assert (report.documents, report.copied, report.remaining) == (0, 0, 0)


def test_reindex_analyzer_leaves_the_points_of_a_later_analyzer(stack: Stack) -> None:
    """During a rolling upgrade (``helm upgrade``) workers of two releases consume the same
    queue: an older worker that took the rewrite task rewrote every point whose version was
    not its own, so the points a newer worker had just written with the later analyzer went
    back to the older one. A later ``en-N`` is left; a value no release writes (a typo, a
    hand edit) was taken for a later one and left for ever: it is rewritten."""
    keys = [_write(stack, path, text) for path, text in DOCS.items()]
    wait_until(lambda: all(stack.points(k) for k in keys), 30)
    store = stack.services.models.handle(LIVE).store
    later, older, garbled = keys[0], keys[1], keys[2]
    for key, version in ((later, "en-99"), (older, "en-4"), (garbled, "en-6x")):
        points = store.document_points(key, with_vectors=True)
        for p in points:
            p.payload["analyzer"] = version
            p.sparse = SparseVector(indices=[term_id("zebra")], values=[1.0])
        store.upsert(points)
    report = Reindexer(stack.services, Indexer(stack.services)).reanalyze(float("inf"))
    assert (report.documents, report.copied, report.remaining) == (2, 2, 0)
    for p in store.document_points(later, with_vectors=True):
        assert p.payload["analyzer"] == "en-99"
        assert p.sparse is not None and p.sparse.indices == [term_id("zebra")]
    for key in (older, garbled):
        for p in store.document_points(key, with_vectors=True):
            assert p.payload["analyzer"] == ANALYZER_VERSION


def prefork_deployment(
    redis_url: str, model_dir: Path, tmp_path: Path, app: str
) -> WorkerDeployment:
    """Alice's deployment on a flushed Redis with a ``prefork`` worker (one pool process) of
    ``app`` (``workers.worker``, or :mod:`time_limit_app` of this folder): soft limit 20 s,
    hard 25 s, visibility timeout 60 s, locks 40 s."""
    redis.Redis.from_url(redis_url).flushdb()
    dep = WorkerDeployment(
        redis_url, model_dir, tmp_path, debounce_seconds=0.3, limits=(20, 25, 60, 40),
        pool="prefork", app=app,
    )  # fmt: skip
    here = str(Path(__file__).parent)
    dep.env["PYTHONPATH"] = os.pathsep.join([here, dep.env.get("PYTHONPATH", "")])
    return dep


def test_a_build_whose_pool_process_died_resumes_when_its_message_comes_back(
    redis_url: str, model_dir: Path, tmp_path: Path
) -> None:
    """The step held the reindex lock when its pool process was killed (the OOM killer, a
    crash in the model runtime): Celery puts its message back at once (``acks_late``,
    ``reject_on_worker_lost``), and the run that takes it must resume the build, not find
    the dead run's lock — which lives ``task_time_limit`` + 60 s — and give up."""
    dep = prefork_deployment(redis_url, model_dir, tmp_path, "workers.worker")
    # the build's start waits 2 x 3 s for every process to see the new pointers, holding
    # the reindex lock: the pool process is killed then
    dep.env["NCINDEX_MODEL_CHECK_SECONDS"] = "3"
    try:
        dep.start_worker()
        for path, text in DOCS.items():
            dep.sim.put_file("alice", path, text)
        dep.sim.flush_deliveries(timeout=10)
        dep.wait_idle(120)
        dep.stack.celery.send_task(names.REINDEX_MODEL, kwargs={"model": OTHER}, queue=names.INDEX)
        wait_until(lambda: b'"models_moved"' in dep.logs[0].read_bytes(), 60)
        assert dep.worker is not None
        children = Path(f"/proc/{dep.worker.pid}/task/{dep.worker.pid}/children").read_text()
        (pool_process,) = (int(pid) for pid in children.split())
        os.kill(pool_process, signal.SIGKILL)
        # well within the dead run's lock's life (25 + 60 s)
        state = wait_until(
            lambda: progress(dep.stack.services).get("state") in ("switched", "failed"), 60
        )
        assert progress(dep.stack.services)["state"] == "switched", state
        dep.stop_worker()
    finally:
        dep.close()
    log = b"".join(p.read_bytes() for p in dep.logs)
    assert b"reindex_step_skipped" not in log


@pytest.mark.parametrize("limit", ["soft", "hard"])
def test_a_build_step_cut_off_by_a_time_limit_is_run_again(
    limit: str, redis_url: str, model_dir: Path, tmp_path: Path
) -> None:
    """A build step still settling (holding the reindex lock) when the task's time limit
    came: the soft limit raises ``SoftTimeLimitExceeded`` in it, the hard limit kills its pool
    process (Celery: ``TimeLimitExceeded``). Celery acknowledges a message whose task failed
    or timed out (``task_acks_on_failure_or_timeout``, default on, even with ``acks_late``),
    so before, the step was never run again and the reindex stayed unfinished; its message
    now goes back to the queue and the build resumes (under the same task id: a lock the
    killed run left, SIGKILLed in native code, is taken over; here billiard's SIGTERM
    unwinds the run, which releases it)."""
    dep = prefork_deployment(redis_url, model_dir, tmp_path, "time_limit_app")
    # the build's start settles for 2 x 6 s, past both limits (the documents are indexed
    # under them too, well within them; the soft-limit switch concerns the reindex step only)
    dep.env |= {
        "NCINDEX_MODEL_CHECK_SECONDS": "6",
        "NCINDEX_TASK_SOFT_TIME_LIMIT": "8",
        "NCINDEX_TASK_TIME_LIMIT": "10",
        "NCINDEX_EXTRACT_MAX_SECONDS": "4",
    }
    if limit == "hard":
        dep.env["TIME_LIMIT_TEST_IGNORE_SOFT"] = "1"
    try:
        dep.start_worker()
        for path, text in DOCS.items():
            dep.sim.put_file("alice", path, text)
        dep.sim.flush_deliveries(timeout=10)
        dep.wait_idle(120)
        dep.stack.celery.send_task(names.REINDEX_MODEL, kwargs={"model": OTHER}, queue=names.INDEX)
        state = wait_until(
            lambda: progress(dep.stack.services).get("state") in ("switched", "failed"), 90
        )
        assert progress(dep.stack.services)["state"] == "switched", state
        dep.stop_worker()
    finally:
        dep.close()
    log = dep.logs[0].read_bytes()
    # (the log holds the documents' indexing too: the cut-off named is the step's)
    hard = rb"Hard time limit \(\d+s\) exceeded for ncindex\.reindex_model\["
    cut_off = hard if limit == "hard" else rb'"reindex_step_requeued"'
    assert re.search(cut_off, log)
    # the step's message came back once
    assert len(re.findall(rb"ncindex\.reindex_model\[[^\]]+\] received", log)) == 2
    assert b"reindex_step_skipped" not in log


def test_a_step_the_time_limit_always_cuts_off_is_recorded_failed(
    redis_url: str, model_dir: Path, tmp_path: Path
) -> None:
    """A build step that never finishes within the task's time limit (here its build hangs
    and ignores the soft limit, so the hard limit kills every run): its message comes back
    :data:`~workers.model_tasks.STEP_RUNS` times, then the step is recorded ``failed`` and
    not queued again. Before, a message cut off by a time limit went back to the queue
    without end, holding a worker."""
    from workers.model_tasks import STEP_RUNS

    dep = prefork_deployment(redis_url, model_dir, tmp_path, "time_limit_app")
    dep.env |= {
        "NCINDEX_TASK_SOFT_TIME_LIMIT": "3",
        "NCINDEX_TASK_TIME_LIMIT": "4",
        "NCINDEX_EXTRACT_MAX_SECONDS": "2",
        "TIME_LIMIT_TEST_STALL_EVERY_RUN": "1",
    }
    try:
        dep.start_worker()
        dep.stack.celery.send_task(names.REINDEX_MODEL, kwargs={"model": OTHER}, queue=names.INDEX)
        state = wait_until(lambda: progress(dep.stack.services).get("state") == "failed", 120)
        assert state, progress(dep.stack.services)
        assert "time limit" in progress(dep.stack.services)["error"]
        time.sleep(2)  # nothing more is received
        dep.stop_worker()
    finally:
        dep.close()
    log = dep.logs[0].read_bytes()
    assert log.count(b"Hard time limit") == STEP_RUNS
    assert log.count(b"] received") == STEP_RUNS + 1


def test_a_step_given_up_releases_the_lock_its_last_run_died_holding(stack: Stack) -> None:
    """A run killed outright (SIGKILL: out of memory) leaves the reindex lock held under its
    task id; the message's run past :data:`~workers.model_tasks.STEP_RUNS` records ``failed``
    and releases it. Before, it returned without touching the lock, and every other reindex
    step was skipped ("another reindex step runs") until the lock expired, the hard time
    limit plus a minute later."""
    from workers.model_tasks import STEP_RUNS

    names_ = stack.services.settings.names
    owner = "killed-run"
    lock = names_.lock("reindex")
    stack.services.redis.set(lock, owner, ex=600)  # as redis-py's Lock stores its token
    stack.services.redis.set(names_.key("reindex", "runs", owner), STEP_RUNS)
    out = stack.celery.tasks[names.REINDEX_ANALYZER].apply(task_id=owner).get()
    assert "cut off by the task time limit" in out["failed"]
    assert progress(stack.services)["state"] == "failed"
    assert stack.services.redis.exists(lock) == 0
    stack.services.redis.set(lock, "another-step", ex=600)  # another's lock stays
    stack.services.redis.set(names_.key("reindex", "runs", "second"), STEP_RUNS)
    stack.celery.tasks[names.REINDEX_ANALYZER].apply(task_id="second").get()
    assert stack.services.redis.get(lock) == b"another-step"


def test_a_step_retried_for_transient_errors_is_not_counted_as_cut_off(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step whose store was unavailable :data:`~workers.model_tasks.STEP_RUNS` times is
    retried (``autoretry_for``; Celery's ``Task.retry`` keeps the task id) and then finishes:
    before, each retry counted as a run the time limit cut off, and the fifth was recorded
    ``failed`` ("cut off by the task time limit") with retries to spare."""
    from workers.model_tasks import STEP_RUNS

    real = Reindexer.reanalyze
    calls: list[int] = []

    def flaky(self: Reindexer, deadline: float) -> Any:
        calls.append(1)
        if len(calls) <= STEP_RUNS:
            raise StoreUnavailable("the store restarts")
        return real(self, deadline)

    monkeypatch.setattr(Reindexer, "reanalyze", flaky)
    out = stack.celery.tasks[names.REINDEX_ANALYZER].apply().get()  # eager: retries at once
    assert len(calls) == STEP_RUNS + 1
    assert "failed" not in out, out
    assert progress(stack.services).get("state") != "failed"


def test_search_answers_503_when_the_live_model_is_not_installed_here(stack: Stack) -> None:
    root = stack.services.models.root
    ghost = root.use_model("ghost-model")  # a collection whose model folder this process lacks
    ghost.ensure_collection(384)
    ghost.close()
    root.set_models(ModelPointers(active="ghost-model", standby=LIVE))

    def search() -> Any:
        return stack.search.post(
            "/v1/search", json={"query": "tide"}, auth=("alice", PASSWORDS["alice"])
        )

    response = wait_until(lambda: (r := search()).status_code != 200 and r, 5)
    assert response.status_code == 503
    assert response.get_json()["code"] == "model_unavailable"
    assert "ghost-model" in response.get_json()["detail"]
    root.set_models(ModelPointers(active=LIVE))


def test_eval_compares_two_models_before_a_switch(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = sample_dataset().subset(5, 12)
    folder = tmp_path / "slice"
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": d.doc_id, "title": d.title, "text": d.text} for d in data.corpus.values()]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n")
    queries = [{"_id": q, "text": t} for q, t in data.queries.items()]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    rows = [f"{q}\t{d}\t{r}" for q, judged in data.qrels.items() for d, r in judged.items()]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows))
    monkeypatch.setenv("NCINDEX_MODEL_DIR", str(model_dir))
    out = tmp_path / "report.json"
    args = ["eval", str(folder), "--mode", "dense", "--json", str(out)]
    result = CliRunner().invoke(main, [*args, "--model", PACKAGED_DENSE_MODEL, "--model", OTHER])
    assert result.exit_code == 0, result.output
    assert f"{PACKAGED_DENSE_MODEL}: dense (library)" in result.output
    assert f"{OTHER}: dense (library)" in result.output
    report = json.loads(out.read_text())["models"]
    ours, theirs = (report[m]["library"]["dense"] for m in (PACKAGED_DENSE_MODEL, OTHER))
    assert set(ours) == set(theirs) and all(0 <= v <= 1 for v in ours.values())
    assert ours != theirs  # each model ranked with its own vectors
