"""Stopping ``ncindex up``.

- :func:`test_sigterm_to_the_group_mid_burst_then_restart`: ``ncindex up`` (a subprocess in its
  own session, against this test's Redis and a simulator in this process) is sent SIGTERM
  twice and SIGINT once on its process group — what ``make run`` passes on — in the middle of
  a 50-document burst. It exits 0 on its own, leaves nothing reserved (the messages its
  worker held went back to their queues at once; the visibility timeout is 900 s), and
  logged nothing at error level. Started again, it indexes every document exactly once, in
  its last version, and ``ncindex status`` shows no reservation.
- The handlers themselves (:class:`allinone.stopping.StopSignals`) in a small process: a
  flood of signals is one stop; a signal after the grace period, or the watchdog when none
  comes, ends a stop that hangs.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from ncindex.names import Names
from ncindex.redis_server import free_port
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.sync.status import settled
from support import ADMIN, PASSWORDS, ROOT, check_indexed_once, error_lines, wait_until

DOCS = 50
GRACE = 10
NCINDEX = str(Path(sys.executable).parent / "ncindex")


def body(i: int, version: int) -> str:
    return (
        f"Harbour log {i}, version {version}. The pilot boat met {i * 3 + version} vessels "
        f"at buoy {i}; the swell was {version * 5 + i} dm."
    )


class Up:
    """``ncindex up`` runs (one at a time) against one simulator, Redis and data folder."""

    def __init__(self, redis_url: str, model_dir: Path, tmp: Path) -> None:
        self.sim = NextcloudSimulator(delivery_delay=(0.0, 0.0))
        self.sim.add_user(ADMIN[0], password=ADMIN[1], display_name="Admin", admin=True)
        self.sim.add_user("alice", password=PASSWORDS["alice"])
        self.sim_server = serve_simulator(self.sim, host="127.0.0.1", port=0)
        self.port = free_port()
        self.tmp = tmp
        self.keys = Names("ncindex-up")
        self.redis = redis.Redis.from_url(redis_url)
        accounts = {"alice": PASSWORDS["alice"], ADMIN[0]: ADMIN[1]}
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("NCINDEX_")} | {
            "PYTHONPATH": str(ROOT),
            "NCINDEX_NEXTCLOUD_URL": self.sim_server.url,
            "NCINDEX_ACCOUNTS": json.dumps(accounts),
            "NCINDEX_ADMIN_USER": ADMIN[0],
            "NCINDEX_WEBHOOK_SECRET": secrets.token_urlsafe(16),
            "NCINDEX_REDIS_URL": redis_url,
            "NCINDEX_PORT": str(self.port),
            "NCINDEX_DATA_DIR": str(tmp / "data"),
            "NCINDEX_MODEL_DIR": str(model_dir),
            "NCINDEX_DEBOUNCE_SECONDS": "0.3",
            "NCINDEX_VISIBILITY_TIMEOUT": "900",
            "NCINDEX_SHUTDOWN_GRACE": str(GRACE),
            "NCINDEX_LOG_JSON": "true",
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.logs: list[Path] = []

    def start(self) -> None:
        """Start ``ncindex up`` in its own session and wait until it answers ``/livez``."""
        log = self.tmp / f"up-{len(self.logs)}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [NCINDEX, "up"], env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        wait_until(self.answers, 180, interval=0.2)

    def answers(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, self.logs[-1].read_text()
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/livez", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def signal_group(self, *sigs: int) -> None:
        assert self.proc is not None
        for sig in sigs:
            os.killpg(self.proc.pid, sig)

    def downloads(self) -> int:
        return self.sim.request_count("webdav", "GET")

    def status(self) -> dict:
        done = subprocess.run(
            [NCINDEX, "status", "--json"],
            env=self.env | {"NCINDEX_NAMESPACE": self.keys.namespace},
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        return json.loads(done.stdout)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.sim_server.close()


@pytest.fixture
def up(redis_url: str, model_dir: Path, tmp_path: Path) -> Iterator[Up]:
    redis.Redis.from_url(redis_url).flushdb()
    running = Up(redis_url, model_dir, tmp_path)
    yield running
    running.close()


def printed_webhook_curl(text: str) -> str:
    """The ``curl`` command ``ncindex up`` prints to post a webhook by hand."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Post a webhook by hand"))
    return "\n".join(line for line in lines[at + 1 : at + 4] if line.strip())


def test_sigterm_to_the_group_mid_burst_then_restart(up: Up) -> None:
    up.redis.delete(up.keys.remembered)  # a first start
    up.start()
    # what it prints lets a user post a webhook by hand: the printed curl is answered 202
    wait_until(lambda: "Stop with Ctrl-C" in up.logs[-1].read_text(), 60, 0.2)
    output = up.logs[-1].read_text()
    assert f"Webhook receiver: POST http://127.0.0.1:{up.port}/hooks/nextcloud" in output
    assert "Secret header: X-Ncindex-Secret: the value of NCINDEX_WEBHOOK_SECRET" in output
    # the start's reconcile pass stands for the one a Redis without its marker asks for
    assert up.redis.exists(up.keys.remembered)
    posted = subprocess.run(
        ["bash", "-c", printed_webhook_curl(output) + " -o /dev/null -w '%{http_code}'"],
        env=up.env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert posted.stdout == "202", posted
    # /metrics has the queue gauges the gunicorn apps serve
    metrics = httpx.get(f"http://127.0.0.1:{up.port}/metrics", timeout=10).text
    for family in ("ncindex_queue_depth", "ncindex_tasks_reserved", "ncindex_index_lag_seconds"):
        assert f"# TYPE {family} gauge" in metrics, family
    up.sim.faults.set("webdav", delay=0.2, method="GET")  # each document takes a moment
    ids = [up.sim.put_file("alice", f"/Harbour/log-{i:02}.txt", body(i, 1)) for i in range(DOCS)]
    wait_until(lambda: up.downloads() >= 10, 120, interval=0.02)
    for i in range(10):  # a second version of ten documents while the burst is worked on
        up.sim.put_file("alice", f"/Harbour/log-{i:02}.txt", body(i, 2))
    up.signal_group(signal.SIGTERM, signal.SIGTERM, signal.SIGINT)
    assert up.proc is not None
    assert up.proc.wait(timeout=GRACE + 30) == 0, up.logs[-1].read_text()[-3000:]
    assert up.downloads() < DOCS + 10, "everything was done before the stop"
    assert up.redis.hlen(up.keys.unacked) == 0  # nothing reserved: back on the queues at once
    assert up.status()["reserved"] == 0

    up.sim.faults.clear()
    up.start()  # the start's reconcile pass finds what was written while it was down
    wait_until(lambda: settled(up.redis, up.keys) and not up.sim.engine.pending(), 180, 0.5)
    up.signal_group(signal.SIGTERM)
    assert up.proc.wait(timeout=GRACE + 30) == 0
    assert up.status()["reserved"] == 0

    expected = {fid: body(i, 2 if i < 10 else 1) for i, fid in enumerate(ids)}
    check_indexed_once(
        up.tmp / "data" / "qdrant", "sentence-transformers/all-MiniLM-L6-v2", expected
    )
    for log in up.logs:
        text = log.read_text(errors="replace")
        assert error_lines(text) == [], log
        assert text.rstrip().endswith("stopped"), text[-2000:]


def test_tasks_still_running_after_the_grace_period_go_back_at_once(up: Up) -> None:
    up.env["NCINDEX_SHUTDOWN_GRACE"] = "0"
    up.start()
    up.sim.faults.set("webdav", delay=2.0, method="GET")  # every task outlives a grace of 0
    for i in range(10):
        up.sim.put_file("alice", f"/Harbour/log-{i:02}.txt", body(i, 1))
    wait_until(lambda: up.redis.hlen(up.keys.unacked) > 0 and up.downloads() > 0, 120, 0.05)
    up.signal_group(signal.SIGTERM)
    assert up.proc is not None and up.proc.wait(timeout=30) == 0
    assert up.redis.hlen(up.keys.unacked) == 0  # put back, not left for the visibility timeout
    assert sum(up.redis.llen(up.keys.queue_list(q)) for q in ("index", "ingest")) > 0
    text = up.logs[-1].read_text(errors="replace")
    assert "worker_stop_grace_over" in text
    assert error_lines(text) == []


def test_tasks_running_past_the_grace_period_do_not_hold_the_exit(up: Up) -> None:
    """The stop put back the messages of tasks still running after the grace period and said
    the process exits without waiting for them, but the interpreter's exit joined the
    threads of Celery's pool (``concurrent.futures`` joins its workers at exit): a batch of
    large files held ``ncindex up`` 3 min 30 s after "stopped". It now ends once stopped."""
    up.env["NCINDEX_SHUTDOWN_GRACE"] = "0"
    up.start()
    # each download takes 5 s (under the 10 s HTTP timeout): a batch of ten, 50 s
    up.sim.faults.set("webdav", delay=5.0, method="GET")
    for i in range(10):
        up.sim.put_file("alice", f"/Harbour/log-{i:02}.txt", body(i, 1))
    wait_until(lambda: up.redis.hlen(up.keys.unacked) > 0 and up.downloads() > 0, 120, 0.05)
    up.signal_group(signal.SIGTERM)
    assert up.proc is not None
    signalled = time.monotonic()
    assert up.proc.wait(timeout=60) == 0
    # the grace (0) + the flag read (1.5 s) + the stop steps; not the batch's remaining files
    assert time.monotonic() - signalled < 15
    assert up.redis.hlen(up.keys.unacked) == 0
    text = up.logs[-1].read_text(errors="replace")
    assert "worker_stop_grace_over" in text and text.rstrip().endswith("stopped")
    assert error_lines(text) == []


# --- the handlers alone ---------------------------------------------------------------------

STOPPER = textwrap.dedent(
    """
    import sys, time
    from allinone.stopping import StopSignals
    signals = StopSignals(grace=float(sys.argv[1]), margin=float(sys.argv[2]))
    print("ready", flush=True)
    signals.wait()
    print("stopping", flush=True)
    if sys.argv[3] == "hang":
        time.sleep(3600)  # a stop that never ends
    time.sleep(0.5)  # signals still arriving during an orderly stop
    signals.restore()
    print("stopped", flush=True)
    """
)


def stopper(grace: float, margin: float, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", STOPPER, str(grace), str(margin), mode],
        env=os.environ | {"PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def test_a_flood_of_signals_is_one_orderly_stop() -> None:
    proc = stopper(grace=30, margin=5, mode="orderly")
    for _ in range(200):
        os.killpg(proc.pid, signal.SIGTERM)
        os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert out == "stopping\nstopped\n"


def test_a_signal_after_the_grace_period_forces_the_exit() -> None:
    proc = stopper(grace=0.5, margin=600, mode="hang")
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.stdout is not None and proc.stdout.readline() == "stopping\n"
    os.killpg(proc.pid, signal.SIGTERM)  # within the grace period: ignored
    time.sleep(1.0)
    assert proc.poll() is None
    os.killpg(proc.pid, signal.SIGTERM)  # after it: forced
    assert proc.wait(timeout=30) == 124
    proc.stdout.close()


def test_the_watchdog_ends_a_stop_that_hangs() -> None:
    proc = stopper(grace=0.5, margin=0.5, mode="hang")
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == 124
    assert proc.stdout is not None
    proc.stdout.close()
