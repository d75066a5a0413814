"""A batch task (``ncindex.index_nodes``) on a real ``celery worker`` whose prefork pool
enforces the soft time limit, with an extraction cap (``NCINDEX_EXTRACT_MAX_SECONDS``)
between three quarters of the soft limit and the whole of it. A file the batch started late —
after another file's slow download — could run into the soft limit mid-read, and the soft
limit sends every file of the batch to a task of its own to be read again; so the batch starts
no file with less than the cap (and a margin) left before the limit and sends the rest on
(workers/tasks.py ``_start_by``, ``_send_on``): each file is read once, none is cut off.

The slow extractor is real: Tesseract reading a ten-page scan (a multi-page TIFF) takes
longer than the cap, which ends the read (ncindex/text/ocr.py). The worker is ``celery -A
workers.worker worker --pool=prefork --concurrency=1`` in a subprocess (Celery's solo pool
has no time limits), and it owns the Qdrant Edge folder: the test opens it only after the
worker has exited."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from docmakers import text_image

from ncindex import names
from ncindex.store import model_slug
from ncindex.store.qdrant_edge import QdrantEdgeStore
from support import WorkerDeployment

SOFT, CAP = 24, 19  # seconds: the extraction cap is about four fifths of the soft time limit
DELAY = 5.5  # seconds the first file's download answers late: within a quarter of SOFT


@pytest.fixture
def deployment(redis_url: str, model_dir: Path, tmp_path: Path) -> Iterator[WorkerDeployment]:
    redis.Redis.from_url(redis_url).flushdb()
    dep = WorkerDeployment(
        redis_url, model_dir, tmp_path, debounce_seconds=0.3, limits=(SOFT, 30, 60, 40),
        extract_seconds=CAP, pool="prefork",
    )  # fmt: skip
    yield dep
    dep.close()


def scan(pages: int) -> bytes:
    """A multi-page TIFF of ``pages`` scanned pages of thirty lines (Tesseract reads one in
    about 2.5 s here)."""
    lines = [f"Line {i} of the estuary survey: herons and oystercatchers wade" for i in range(30)]
    frames = [text_image(lines).convert("1") for _ in range(pages)]
    out = io.BytesIO()
    frames[0].save(
        out, format="TIFF", save_all=True, append_images=frames[1:], compression="group4"
    )
    return out.getvalue()


def downloads(dep: WorkerDeployment, path: str) -> int:
    """WebDAV GETs of alice's file ``path`` the simulator answered since its counts were reset."""
    return sum(1 for method, p, _ in dep.sim.request_log if method == "GET" and p.endswith(path))


def test_a_file_started_too_late_for_its_extraction_is_sent_on_and_read_once(
    deployment: WorkerDeployment,
) -> None:
    dep = deployment
    dep.sim.drop_rate = 1.0  # the tasks are sent by hand
    warm = dep.sim.put_file("alice", "/Warm/first.md", "# First\n\nThe pool process warms up.")
    notes = dep.sim.put_file("alice", "/Survey/notes.md", "# Notes\n\nThe tide turned at noon.")
    scanned = dep.sim.put_file("alice", "/Survey/scan.tiff", scan(10))
    send = dep.stack.celery.send_task
    dep.start_worker()
    send(names.INDEX_NODE, kwargs={"user": "alice", "file_id": warm}, queue=names.INDEX)
    dep.wait_idle(120)  # the pool process has loaded the model before the batch's time runs
    dep.sim.reset_request_counts()
    # the notes' download answers late: the scan would be started then, within a quarter of
    # the soft limit (the old rule), and its read, ended by the cap, would end past the limit
    dep.sim.faults.set("webdav", delay=DELAY, times=1, method="GET")
    kwargs = {"user": "alice", "file_ids": [notes, scanned]}
    send(names.INDEX_NODES, kwargs=kwargs, queue=names.INDEX)
    dep.wait_idle(180)
    dep.stop_worker()

    assert downloads(dep, "/Survey/notes.md") == 1
    assert downloads(dep, "/Survey/scan.tiff") == 1  # read once, by the task it was sent to
    log = b"".join(p.read_bytes() for p in dep.logs)
    assert b"Soft time limit" not in log and b"SoftTimeLimitExceeded" not in log
    assert b"dead_letter" not in log
    store = QdrantEdgeStore(dep.qdrant, model_slug(dep.settings.dense_model))
    try:
        assert store.document_points(f"file:{notes}")
        texts = [p.payload["text"] for p in store.document_points(f"file:{scanned}")]
        assert "oystercatchers" in " ".join(texts)  # what Tesseract read within the cap
    finally:
        store.close()
