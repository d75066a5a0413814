"""The worker ``ncindex up`` runs in its own process comes back after an unrecoverable error.

Seen with kombu 5.7 / redis-py 8.1: Redis lost while the worker holds a delayed task (a
debounced index task waits out its countdown unacked) ⇒ "Unrecoverable error:
AttributeError('NoneType' object has no attribute 'hostname')" and the worker stops. A
standalone ``celery worker`` then exits for its supervisor to restart; in ``ncindex up``
nothing did, and nothing was indexed again.

The scenario runs in a child process: ``start_worker`` makes its app the process's default
Celery app and keeps restarting its worker, which must not leak into the other tests."""

from __future__ import annotations

import subprocess
import sys

SCENARIO = r"""
import contextlib, time
import redis
from allinone.embedded import start_worker
from ncindex.ingest.queueing import celery_app
from ncindex.redis_server import start_redis
from ncindex.settings import Settings

server = start_redis()
app = celery_app(Settings(redis_url=server.url))
ran = []

@app.task(name="probe.note_run", acks_late=True)
def note_run(n):
    ran.append(n)

def wait(predicate, seconds):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)

start_worker(app, concurrency=1, restart_after=0.5)
check = redis.Redis.from_url(server.url)
wait(lambda: check.exists("_kombu.binding.ingest"), 30)
app.send_task("probe.note_run", args=[1], countdown=30, queue="ingest")
wait(lambda: check.hlen("unacked"), 30)  # held by the worker, waiting out its countdown
server.process.kill()
server.process.wait()
time.sleep(2)
server.start_again()  # empty: the delayed task is gone with it (reconcile's job)
deadline = time.monotonic() + 60
sent = 0.0
while 2 not in ran and time.monotonic() < deadline:
    if time.monotonic() - sent >= 5:  # sent again every 5 s, looked for every 0.1 s
        sent = time.monotonic()
        with contextlib.suppress(Exception):  # the producer may still be reconnecting
            app.send_task("probe.note_run", args=[2], queue="ingest")
    time.sleep(0.1)
server.stop()
print("new work taken" if 2 in ran else f"new work not taken: {ran}")
"""


def test_the_worker_is_started_again_after_redis_is_lost_under_a_delayed_task() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCENARIO], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # the worker stopped on the error and was started again: it took new work
    assert "new work taken" in done.stdout, (done.stdout, done.stderr[-3000:])
