"""The distributed processes as separate OS processes against a private ``redis-server``:
the receiver under gunicorn (202/401, JSON logs, Prometheus counts adding up across gunicorn
worker processes), a Celery worker with its heartbeat file and JSON task logs, Flower seeing
that worker's tasks through its HTTP API, and a worker's shutdown (SIGTERM finishes the running
task; SIGKILL after a short grace leaves it unacknowledged and another worker runs it again).

Nothing here asserts a duration: waits poll for an outcome with a generous ceiling.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from ncindex.ingest.queueing import celery_app
from ncindex.redis_server import RedisProcess, free_port, start_redis
from ncindex.settings import Settings
from support import wait_until

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
SECRET = "deploy-test-secret-0123456789"
WRITTEN = "OCP\\Files\\Events\\Node\\NodeWrittenEvent"
FLOWER_AUTH = ("ops", "flower-pass-123")
BEAT = [str(BIN / "celery"), "-A", "workers.beat", "beat", "--loglevel=INFO"]
"""The command of the deployment's beat."""


@pytest.fixture(scope="module")
def redis_proc() -> Iterator[RedisProcess]:
    """A private Redis for this module (its queues are not shared with other tests)."""
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture
def client(redis_proc: RedisProcess) -> Iterator[redis.Redis]:
    """A client on the private Redis, flushed before each test."""
    conn = redis.Redis.from_url(redis_proc.url)
    conn.flushdb()
    yield conn
    conn.close()


def process_env(redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of a spawned process: this one without NCINDEX_*/PROMETHEUS_*,
    plus the test Redis, secret, account, and ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NCINDEX_", "PROMETHEUS_", "FLOWER_"))
    }
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT)]),
        NCINDEX_REDIS_URL=redis_url,
        NCINDEX_WEBHOOK_SECRET=SECRET,
        NCINDEX_ACCOUNTS=json.dumps({"alice": "pw"}),
        NCINDEX_DEBOUNCE_SECONDS="0",
        NCINDEX_LOG_LEVEL="INFO",
    )
    env.update(extra)
    return env


class Proc:
    """A spawned process in its own session (so its whole group can be signalled), its
    stdout and stderr in one log file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self.handle = log.open("wb")
        self.popen = subprocess.Popen(
            args,
            env=env,
            cwd=ROOT,
            stdout=self.handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        """The process id (also its process group id)."""
        return self.popen.pid

    def text(self) -> str:
        """Everything it wrote so far."""
        self.handle.flush()
        return self.log.read_text(errors="replace")

    def json_lines(self) -> list[dict]:
        """The lines it wrote that are JSON objects."""
        out = []
        for line in self.text().splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the main process only."""
        if self.popen.poll() is None:
            os.kill(self.pid, sig)

    def kill_group(self) -> None:
        """SIGKILL the process and every child (what happens when a pod's grace runs out)."""
        if self.popen.poll() is None:
            os.killpg(self.pid, signal.SIGKILL)
        self.popen.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL of the group if it is still there after 30 seconds."""
        if self.popen.poll() is None:
            os.killpg(self.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill_group()
        self.handle.close()


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator:
    """``spawn(name, args, env)`` starts a :class:`Proc`; all are stopped after the test."""
    started: list[Proc] = []

    def _spawn(name: str, args: list[str], env: dict[str, str]) -> Proc:
        proc = Proc(args, env, tmp_path / f"{name}.log")
        started.append(proc)
        return proc

    yield _spawn
    for proc in reversed(started):
        proc.stop()


def http_ok(url: str, **kwargs) -> httpx.Response | None:
    """The response when ``url`` answers 200, else ``None``."""
    try:
        response = httpx.get(url, timeout=5, **kwargs)
    except httpx.HTTPError:
        return None
    return response if response.status_code == 200 else None


def envelope(file_id: int) -> dict:
    """A NodeWrittenEvent for alice's file ``file_id``."""
    return {
        "event": {"node": {"id": file_id, "path": f"/alice/files/n{file_id}.md"}, "class": WRITTEN},
        "user": {"uid": "alice", "displayName": "Alice"},
        "time": 1767225601,
    }


def metric(text: str, name: str, **labels: str) -> float | None:
    """The value of sample ``name{labels}`` in a Prometheus exposition, or ``None``."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        sample, _, value = line.rpartition(" ")
        sample_name, _, label_text = sample.partition("{")
        if sample_name != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', label_text))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(value)
    return None


def start_worker(spawn, redis_url: str, name: str, tmp_path: Path, **env: str) -> tuple:
    """A ``celery worker`` subprocess on queue ``index`` running :mod:`slow_app`; returns the
    process and its heartbeat file."""
    heartbeat = tmp_path / f"{name}.heartbeat"
    proc = spawn(
        name,
        [
            str(BIN / "celery"),
            "-A",
            "slow_app",
            "worker",
            "-Q",
            "index",
            "-c",
            "1",
            "-n",
            f"{name}@%h",
            "--loglevel=INFO",
        ],
        process_env(
            redis_url, NCINDEX_HEARTBEAT_FILE=str(heartbeat), NCINDEX_HEARTBEAT_INTERVAL="1", **env
        ),
    )
    wait_until(lambda: heartbeat.exists() or proc.popen.poll() is not None, timeout=90)
    assert proc.popen.poll() is None, proc.text()
    return proc, heartbeat


def producer(redis_url: str):
    """A task-less Celery app with ncindex's settings, to send ``deploytest.slow``."""
    return celery_app(Settings(redis_url=redis_url))


def test_receiver_under_gunicorn(
    redis_proc: RedisProcess, client: redis.Redis, spawn, tmp_path: Path
) -> None:
    port = free_port()
    multiproc = tmp_path / "prometheus"
    proc = spawn(
        "receiver",
        [
            str(BIN / "gunicorn"),
            "-c",
            str(ROOT / "deploy" / "gunicorn.conf.py"),
            "-w",
            "2",
            "--max-requests",
            "4",
            "--bind",
            f"127.0.0.1:{port}",
            "webhook_receiver.wsgi:app",
        ],
        process_env(redis_proc.url, PROMETHEUS_MULTIPROC_DIR=str(multiproc)),
    )
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: http_ok(f"{base}/livez") or proc.popen.poll() is not None, timeout=90)
    assert proc.popen.poll() is None, proc.text()
    assert http_ok(f"{base}/readyz") is not None

    good = {"X-Ncindex-Secret": SECRET}
    answers = [
        httpx.post(f"{base}/hooks/nextcloud", json=envelope(i), headers=good, timeout=10)
        for i in range(1, 11)
    ]
    assert [a.status_code for a in answers] == [202] * 10
    assert all(a.json()["queued"] == 1 for a in answers)
    for bad in (None, "wrong"):
        headers = {"X-Ncindex-Secret": bad} if bad else {}
        for _ in range(2):
            answer = httpx.post(f"{base}/hooks/nextcloud", json=envelope(1), headers=headers)
            assert answer.status_code == 401
            assert answer.headers["content-type"].startswith("application/problem+json")
    assert client.llen("index") == 10  # really on the broker

    # --max-requests 4: those 14+ requests were served by at least four worker processes,
    # most of them gone by now; the counts still add up, whichever worker answers.
    for _ in range(4):
        body = httpx.get(f"{base}/metrics", timeout=10).text
        assert metric(body, "ncindex_webhook_events_total", outcome="queued") == 10
        assert metric(body, "ncindex_webhook_events_total", reason="unauthenticated") == 4
        assert metric(body, "ncindex_queue_depth", queue="index") == 10
        assert metric(body, "ncindex_queue_depth", queue="evict") == 0
        assert metric(body, "ncindex_queue_metrics_up") == 1
    pids = {
        m.group(1) for m in (re.search(r"_(\d+)\.db$", p.name) for p in multiproc.iterdir()) if m
    }
    assert len(pids) >= 4

    lines = proc.json_lines()
    access = [line for line in lines if line.get("logger") == "gunicorn.access"]
    assert {line["status"] for line in access} >= {202, 401}
    assert all(line["event"] == "request" and line["path"] for line in access)
    assert any(line.get("logger") == "gunicorn.error" for line in lines)
    assert not [line for line in proc.text().splitlines() if line and not line.startswith("{")]


def test_the_mcp_server_under_gunicorn_trusts_no_forwarded_for_from_loopback(
    redis_proc: RedisProcess, client: redis.Redis, spawn, tmp_path: Path
) -> None:
    """With ``NCINDEX_TRUSTED_PROXY_HOPS`` 0 (the default) the MCP server under gunicorn's
    uvicorn worker counts a loopback client's requests against 127.0.0.1 whatever
    ``X-Forwarded-For`` it writes: gunicorn's ``forwarded_allow_ips`` (127.0.0.1 and ::1 by
    default) reached uvicorn, which took the header as the client's address, so a client on
    the host (a sidecar, the relay's own host) dodged the per-address limit by changing it."""
    port = free_port()
    proc = spawn(
        "mcp",
        [str(BIN / "gunicorn"), "-c", str(ROOT / "deploy" / "gunicorn.conf.py"),
         "-w", "1", "--bind", f"127.0.0.1:{port}",
         "--worker-class", "uvicorn_worker.UvicornWorker", "mcp_server.asgi:app"],
        process_env(
            redis_proc.url,
            NCINDEX_QDRANT_URL=f"http://127.0.0.1:{free_port()}",
            NCINDEX_SEARCH_RATE_LIMIT="3/minute",
            PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prometheus"),
        ),
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: http_ok(f"{base}/livez") or proc.popen.poll() is not None, timeout=90)
    assert proc.popen.poll() is None, proc.text()
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    codes = [
        httpx.post(
            f"{base}/mcp", json=listing, headers={"X-Forwarded-For": f"198.51.100.{i}"}, timeout=10
        ).status_code
        for i in range(1, 5)
    ]
    assert codes == [401] * 3 + [429]  # one count: 127.0.0.1's
    assert client.keys("*198.51.100.*") == []


def test_worker_heartbeat_logs_and_flower(
    redis_proc: RedisProcess, client: redis.Redis, spawn, tmp_path: Path
) -> None:
    flower_port = free_port()
    flower = spawn(
        "flower",
        [
            str(BIN / "celery"),
            "-A",
            "workers.flower",
            "flower",
            "--address=127.0.0.1",
            f"--port={flower_port}",
        ],
        process_env(redis_proc.url, FLOWER_BASIC_AUTH=":".join(FLOWER_AUTH)),
    )
    base = f"http://127.0.0.1:{flower_port}"
    wait_until(lambda: http_ok(f"{base}/healthcheck") or flower.popen.poll() is not None, 90)
    assert flower.popen.poll() is None, flower.text()
    assert httpx.get(f"{base}/api/workers", timeout=10).status_code == 401

    worker, heartbeat = start_worker(spawn, redis_proc.url, "w1", tmp_path)
    probe = [sys.executable, "-m", "workers.heartbeat", str(heartbeat), "--max-age", "60"]
    env = process_env(redis_proc.url)
    assert subprocess.run(probe, env=env, cwd=ROOT, check=False).returncode == 0

    key = f"flower-{uuid.uuid4().hex[:8]}"
    app = producer(redis_proc.url)
    sent = [
        app.send_task("deploytest.slow", kwargs={"key": key, "seconds": 0}, queue="index")
        for _ in range(3)
    ]
    ids = {result.id for result in sent}
    wait_until(lambda: client.llen(f"{key}:finished") == 3, timeout=60)

    def flower_tasks() -> dict | None:
        answer = http_ok(f"{base}/api/tasks", auth=FLOWER_AUTH)
        tasks = answer.json() if answer else {}
        done = {k: v for k, v in tasks.items() if k in ids and v.get("state") == "SUCCESS"}
        return tasks if len(done) == 3 else None

    tasks = wait_until(flower_tasks, timeout=60, interval=0.5)
    assert {tasks[i]["name"] for i in ids} == {"deploytest.slow"}
    assert all(tasks[i]["worker"].startswith("w1@") for i in ids)
    # Workers as Flower knows them from their event heartbeats: name -> alive.
    alive = wait_until(
        lambda: (r := http_ok(f"{base}/api/workers?status=true", auth=FLOWER_AUTH)) and r.json(),
        timeout=60,
    )
    assert [alive[name] for name in alive if name.startswith("w1@")] == [True]
    metrics = wait_until(lambda: http_ok(f"{base}/metrics", auth=FLOWER_AUTH), timeout=30)
    assert metric(metrics.text, "flower_events_total", type="task-succeeded") >= 3

    # The worker's log: JSON lines, the task's own line with task_id and doc_key bound.
    started = [line for line in worker.json_lines() if line.get("event") == "slow_started"]
    assert {line["task_id"] for line in started} == ids
    assert {line["doc_key"] for line in started} == {key}
    assert all(line["task"] == "deploytest.slow" for line in started)
    assert any(line.get("logger", "").startswith("celery") for line in worker.json_lines())
    assert client.get("ncindex:metrics:last_task_done") is not None

    # A stopped worker removes its heartbeat: the probe fails.
    worker.signal(signal.SIGTERM)
    assert worker.popen.wait(timeout=60) == 0
    assert not heartbeat.exists()
    assert subprocess.run(probe, env=env, cwd=ROOT, check=False).returncode == 1


def test_sigterm_lets_the_running_task_finish(
    redis_proc: RedisProcess, client: redis.Redis, spawn, tmp_path: Path
) -> None:
    worker, _ = start_worker(spawn, redis_proc.url, "warm", tmp_path)
    key = f"warm-{uuid.uuid4().hex[:8]}"
    producer(redis_proc.url).send_task(
        "deploytest.slow", kwargs={"key": key, "seconds": 2}, queue="index"
    )
    wait_until(lambda: client.llen(f"{key}:started") == 1, timeout=60)
    worker.signal(signal.SIGTERM)  # what the kubelet sends first
    assert worker.popen.wait(timeout=120) == 0, worker.text()
    assert client.llen(f"{key}:finished") == 1  # finished before the worker exited
    assert client.hlen("unacked") == 0 and client.llen("index") == 0  # and acknowledged
    assert "Warm shutdown" in worker.text() or "warm shutdown" in worker.text().lower()


def test_sigterm_to_the_group_lets_the_running_task_finish(
    redis_proc: RedisProcess, client: redis.Redis, spawn, tmp_path: Path
) -> None:
    """The pool processes are in the worker's process group too (honcho, ``make``, a shell's
    Ctrl-C): the signal must not kill the one running a task, whose task would fail with
    ``WorkerLostError``; the main process stops them once their task is done."""
    worker, _ = start_worker(spawn, redis_proc.url, "group", tmp_path)
    key = f"group-{uuid.uuid4().hex[:8]}"
    producer(redis_proc.url).send_task(
        "deploytest.slow", kwargs={"key": key, "seconds": 3}, queue="index"
    )
    wait_until(lambda: client.llen(f"{key}:started") == 1, timeout=60)
    for sig in (signal.SIGTERM, signal.SIGTERM, signal.SIGINT):
        os.killpg(worker.pid, sig)
    # Celery's status after a SIGINT is 1 (EX_FAILURE, its Ctrl-C convention), else 0
    assert worker.popen.wait(timeout=120) in (0, 1), worker.text()
    assert client.llen(f"{key}:finished") == 1
    assert client.hlen("unacked") == 0 and client.llen("index") == 0
    errors = [line for line in worker.json_lines() if line.get("level") in ("error", "critical")]
    assert errors == [], worker.text()[-3000:]


def test_task_cut_off_by_a_short_grace_runs_again_elsewhere(
    redis_proc: RedisProcess, client: redis.Redis, spawn, tmp_path: Path
) -> None:
    first, _ = start_worker(spawn, redis_proc.url, "first", tmp_path)
    key = f"grace-{uuid.uuid4().hex[:8]}"
    producer(redis_proc.url).send_task(
        "deploytest.slow",
        kwargs={"key": key, "seconds": 0, "first_run_seconds": 3600},
        queue="index",
    )
    wait_until(lambda: client.llen(f"{key}:started") == 1, timeout=60)
    first.signal(signal.SIGTERM)  # warm shutdown begins, waiting for the task...
    first.kill_group()  # ...but the grace period runs out: SIGKILL for every process
    assert client.llen(f"{key}:finished") == 0
    assert client.hlen("unacked") == 1  # not acknowledged (acks_late), so not lost

    # Another worker restores messages unacknowledged for longer than its visibility timeout
    # (900 s in production; 3 s here so the test is short) and runs the task again.
    start_worker(
        spawn,
        redis_proc.url,
        "second",
        tmp_path,
        NCINDEX_VISIBILITY_TIMEOUT="3",
        NCINDEX_TASK_SOFT_TIME_LIMIT="1",
        NCINDEX_EXTRACT_MAX_SECONDS="0.5",
        NCINDEX_TASK_TIME_LIMIT="2",
        NCINDEX_LOCK_TTL="4",
    )
    wait_until(lambda: client.llen(f"{key}:finished") == 1, timeout=120, interval=0.2)
    hosts = [h.decode() for h in client.lrange(f"{key}:started", 0, -1)]
    assert [h.split("@")[0] for h in hosts] == ["first", "second"]
    assert client.lrange(f"{key}:finished", 0, -1)[0].decode().startswith("second@")
    wait_until(lambda: client.hlen("unacked") == 0, timeout=30)


def honcho_lines(text: str) -> dict[str, list[str]]:
    """Honcho's output (``HH:MM:SS name.1 | line``) by process name."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = re.match(r"^\S+ (\w+)\.\d+\s+\| (.*)$", line)
        if match:
            out.setdefault(match.group(1), []).append(match.group(2))
    return out


def test_procfile_runs_every_role(
    redis_proc: RedisProcess, client: redis.Redis, spawn, tmp_path: Path
) -> None:
    """``honcho start`` on deploy/Procfile: every role comes up against Redis (Qdrant is not
    running here, so the search API is live but reports its store as not ready)."""
    ports = {name: free_port() for name in ("receiver", "search", "mcp", "flower")}
    env = process_env(
        redis_proc.url,
        TMPDIR=str(tmp_path),
        NCINDEX_QDRANT_URL=f"http://127.0.0.1:{free_port()}",
        NCINDEX_RECEIVER_PORT=str(ports["receiver"]),
        NCINDEX_SEARCH_PORT=str(ports["search"]),
        NCINDEX_MCP_PORT=str(ports["mcp"]),
        NCINDEX_FLOWER_PORT=str(ports["flower"]),
        FLOWER_BASIC_AUTH=":".join(FLOWER_AUTH),
        GUNICORN_WORKERS="2",
    )
    honcho = spawn(
        "honcho", [str(BIN / "honcho"), "-f", "deploy/Procfile", "-d", ".", "start"], env
    )
    receiver = f"http://127.0.0.1:{ports['receiver']}"
    search = f"http://127.0.0.1:{ports['search']}"
    mcp = f"http://127.0.0.1:{ports['mcp']}"
    flower = f"http://127.0.0.1:{ports['flower']}"
    for url in (f"{receiver}/livez", f"{search}/livez", f"{mcp}/livez", f"{flower}/healthcheck"):
        wait_until(lambda u=url: http_ok(u) or honcho.popen.poll() is not None, timeout=120)
        assert honcho.popen.poll() is None, honcho.text()

    good = {"X-Ncindex-Secret": SECRET}
    answer = httpx.post(f"{receiver}/hooks/nextcloud", json=envelope(7), headers=good)
    assert answer.status_code == 202
    assert httpx.post(f"{receiver}/hooks/nextcloud", json=envelope(7)).status_code == 401
    ready = httpx.get(f"{search}/readyz", timeout=30)
    assert ready.status_code == 503 and ready.json()["checks"]["store"].startswith("fail")
    for base in (receiver, search, mcp):
        body = httpx.get(f"{base}/metrics", timeout=10).text
        assert metric(body, "ncindex_queue_metrics_up") == 1
    # the MCP server asks for credentials before anything else
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    anonymous = httpx.post(f"{mcp}/mcp", json=listing, timeout=10)
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "unauthenticated"

    for group in ("index", "light"):
        wait_until(lambda g=group: (tmp_path / f"ncindex-{g}.heartbeat").exists(), timeout=120)
    alive = wait_until(
        lambda: (
            (r := http_ok(f"{flower}/api/workers?status=true", auth=FLOWER_AUTH))
            and len(r.json()) >= 2
            and r.json()
        ),
        timeout=60,
    )
    assert sorted(name.split("@")[0] for name in alive) == ["index", "light"]
    assert all(alive.values())

    lines = honcho_lines(honcho.text())
    assert {"receiver", "search", "mcp", "worker_index", "worker_light", "beat", "flower"} <= set(
        lines
    )
    for role in ("receiver", "search", "mcp", "worker_index", "worker_light"):
        parsed = [json.loads(line) for line in lines[role] if line.startswith("{")]
        assert parsed, role
    assert "exited with code" not in honcho.text()


def procfile_roles() -> dict[str, str]:
    """deploy/Procfile's roles: name → shell command."""
    lines = (ROOT / "deploy" / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line.strip() and not line.startswith("#"))


def test_the_env_example_holds_what_every_procfile_role_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README pointed the Processes path at deploy/ncindex.env.example, which lacked the
    accounts, NCINDEX_REDIS_URL and NCINDEX_QDRANT_URL the Procfile runs against. Read as
    honcho reads ``.env`` (``honcho.environ.parse``), it now gives settings the roles start
    with: the receiver's webhook secret, a Qdrant server (the embedded store takes one
    process), an account, and each NCINDEX_ variable the Procfile names."""
    from honcho import environ

    example = environ.parse((ROOT / "deploy" / "ncindex.env.example").read_text())
    procfile = (ROOT / "deploy" / "Procfile").read_text()
    named = set(re.findall(r"\bNCINDEX_\w+", re.sub(r"\$\{\w+:-[^}]*\}", "", procfile)))
    assert named - {"NCINDEX_HEARTBEAT_FILE"} <= set(example)
    assert example["NCINDEX_ACCOUNTS_FILE"] == "deploy/accounts.json"  # the one compose mounts
    accounts = tmp_path / "accounts.json"
    accounts.write_text(json.dumps({"alice": "app-password"}))
    for name in [n for n in os.environ if n.startswith("NCINDEX_")]:
        monkeypatch.delenv(name)
    for name, value in (example | {"NCINDEX_ACCOUNTS_FILE": str(accounts)}).items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.webhook_secret.get_secret_value() and settings.nextcloud_url
    assert settings.qdrant_url and settings.redis_url == example["NCINDEX_REDIS_URL"]
    assert settings.accounts
    # a JSON list, single-quoted as the example shows it, reaches the settings whole (the
    # example said only that honcho drops quotes and spaces, and showed no JSON setting)
    [shown] = [
        line.removeprefix("# ")
        for line in (ROOT / "deploy" / "ncindex.env.example").read_text().splitlines()
        if line.startswith("# NCINDEX_INDEX_EXCLUDE_GLOBS=")
    ]
    for name, value in environ.parse(shown).items():
        monkeypatch.setenv(name, value)
    assert Settings().index_exclude_globs == ["/Private/**", "*.tmp"]


def run_to_end(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, str]:
    """Run ``args`` from the repository root until it exits (at most 120 s); the result and
    its stdout and stderr together."""
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    return done, done.stdout + done.stderr


@pytest.mark.parametrize("role", sorted(procfile_roles()))
def test_every_role_stops_on_a_bad_setting_with_one_line(role: str, tmp_path: Path) -> None:
    """A role started with bad settings exits (not restarted by gunicorn, not hanging) with one
    line naming each bad variable and its error type, no traceback and no value."""
    env = process_env(
        "redis://127.0.0.1:9/0",
        TMPDIR=str(tmp_path),
        NCINDEX_SEARCH_DEFAULT_LIMIT="ten",
        NCINDEX_NEXTCLOUD_URL="ftp://cloud.example",
    )
    for name in ("RECEIVER", "SEARCH", "MCP", "FLOWER"):
        env[f"NCINDEX_{name}_PORT"] = str(free_port())
    done, out = run_to_end(["bash", "-c", procfile_roles()[role]], env)
    assert done.returncode == 1, out
    assert "Traceback" not in out and "ten" not in out and "cloud.example" not in out, out
    assert (
        "ncindex: setting NCINDEX_NEXTCLOUD_URL: Value error, must be an http:// or https:// URL"
        " with a host [value_error]; setting NCINDEX_SEARCH_DEFAULT_LIMIT: Input should be a"
        " valid integer, unable to parse string as an integer [int_parsing]"
    ) in out.splitlines(), out


@pytest.mark.parametrize(
    ("level", "banner", "scheduler_lines"),
    [(None, "@%INFO", True), ("warning", "@%WARNING", False)],
)
def test_procfile_beat_logs_at_the_settings_level(
    redis_proc: RedisProcess,
    client: redis.Redis,
    spawn,
    level: str | None,
    banner: str,
    scheduler_lines: bool,
) -> None:
    """The Procfile's (and compose's) beat, given no ``--loglevel``, logged at Celery's
    WARNING: no "Scheduler" line, while the settings (and the chart's ``--loglevel``) said
    INFO with ``NCINDEX_LOG_LEVEL`` unset. It logs at the settings' level."""
    env = process_env(redis_proc.url)
    env.pop("NCINDEX_LOG_LEVEL")
    if level is not None:
        env["NCINDEX_LOG_LEVEL"] = level
    beat = spawn("beat", ["bash", "-c", f"exec {procfile_roles()['beat']}"], env)
    wait_until(lambda: client.llen("reconcile") > 0 or beat.popen.poll() is not None, timeout=90)
    assert beat.popen.poll() is None, beat.text()
    beat.stop()
    text = beat.log.read_text(errors="replace")
    assert f"[stderr]{banner}" in text, text
    assert ("Scheduler: Sending due task reconcile-" in text) is scheduler_lines, text


def test_flower_without_a_login_beyond_loopback_refuses_to_start() -> None:
    """It started with no login on every interface: whoever reached its port saw every
    task's arguments and could revoke tasks (the chart and compose require basic auth)."""
    env = process_env("redis://127.0.0.1:9/0")  # no FLOWER_BASIC_AUTH; never reached
    args = [str(BIN / "celery"), "-A", "workers.flower", "flower", f"--port={free_port()}"]
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "ncindex: Flower would listen on every interface without a login" in out, out
    assert "FLOWER_BASIC_AUTH" in out and "Traceback" not in out, out


def test_an_app_module_with_bad_settings_stops_gunicorn(tmp_path: Path) -> None:
    """Without deploy/gunicorn.conf.py (which checks the settings first) the app module raises
    in the worker: gunicorn stops ("Worker failed to boot", exit 3) instead of booting it again
    and again, and the worker's last line names the variable."""
    env = process_env("redis://127.0.0.1:9/0", NCINDEX_SEARCH_DEFAULT_LIMIT="ten")
    args = [str(BIN / "gunicorn"), "-b", f"127.0.0.1:{free_port()}", "search_api.wsgi:app"]
    done, out = run_to_end(args, env)
    assert done.returncode == 3 and "Worker failed to boot" in out, out
    assert "ncindex.settings.SettingsError: setting NCINDEX_SEARCH_DEFAULT_LIMIT:" in out, out
    assert "pydantic" not in out, out


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("GUNICORN_WORKERS", "two", "GUNICORN_WORKERS must be a whole number at least 1"),
        ("GUNICORN_WORKERS", "0", "GUNICORN_WORKERS must be a whole number at least 1"),
        ("GUNICORN_THREADS", "²", "GUNICORN_THREADS must be a whole number at least 1"),
        ("GUNICORN_TIMEOUT", "-1", "GUNICORN_TIMEOUT must be a whole number at least 1"),
        ("PORT", "http", "PORT must be a whole number from 1 to 65535"),
    ],
)
def test_gunicorn_stops_on_a_bad_variable_of_its_configuration(
    variable: str, value: str, said: str
) -> None:
    """``GUNICORN_WORKERS=two`` was a traceback from the configuration file; ``0`` left a
    master listening with no worker to answer."""
    env = process_env("redis://127.0.0.1:9/0", **{variable: value})
    env.setdefault("PORT", str(free_port()))
    args = [str(BIN / "gunicorn"), "-c", "deploy/gunicorn.conf.py", "webhook_receiver.wsgi:app"]
    done, out = run_to_end(args, env)
    assert done.returncode == 1 and "Traceback" not in out, out
    assert f"ncindex: {said}" in out.splitlines(), out


def test_the_receiver_without_a_webhook_secret_stops_with_one_line() -> None:
    """Its workers failed to boot, each with a traceback, and gunicorn exited 3."""
    env = process_env("redis://127.0.0.1:9/0", NCINDEX_WEBHOOK_SECRET="", PORT=str(free_port()))
    args = [str(BIN / "gunicorn"), "-c", "deploy/gunicorn.conf.py", "webhook_receiver.wsgi:app"]
    done, out = run_to_end(args, env)
    assert done.returncode == 1 and "Traceback" not in out, out
    said = "ncindex: setting NCINDEX_WEBHOOK_SECRET: must be set for the webhook receiver"
    assert said in out.splitlines(), out


@pytest.mark.parametrize("value", ["fifteen", "0", "nan", "-5"])
def test_a_worker_stops_on_a_bad_heartbeat_interval(value: str, tmp_path: Path) -> None:
    """``fifteen`` was a traceback from the consumer's start; 0, NaN or a negative interval
    was taken as it was."""
    env = process_env(
        "redis://127.0.0.1:9/0",
        NCINDEX_HEARTBEAT_FILE=str(tmp_path / "beat"),
        NCINDEX_HEARTBEAT_INTERVAL=value,
    )
    args = [str(BIN / "celery"), "-A", "workers.worker", "worker", "-Q", "ingest", "-c", "1"]
    done, out = run_to_end(args, env)
    assert done.returncode == 1 and "Traceback" not in out, out
    said = "ncindex: NCINDEX_HEARTBEAT_INTERVAL must be a number of seconds above 0"
    assert said in out.splitlines(), out


def test_heartbeat_follows_the_broker_connection(spawn, tmp_path: Path) -> None:
    """The heartbeat file goes when the worker loses Redis and comes back when it reconnects:
    a worker that cannot reach its broker fails its liveness probe."""
    server = start_redis()
    try:
        worker, heartbeat = start_worker(spawn, server.url, "flaky", tmp_path)
        server.stop()
        wait_until(lambda: not heartbeat.exists(), timeout=60)
        assert worker.popen.poll() is None  # alive, reconnecting
        server.start_again()
        wait_until(heartbeat.exists, timeout=120)
        assert worker.popen.poll() is None
    finally:
        server.stop()


def test_beat_stops_on_sigterm_while_its_broker_does_not_answer(spawn) -> None:
    """With Redis down, beat retries its connection (Celery's ``broker_connection_max_retries``,
    100 tries up to 30 s apart, about 45 minutes) and took neither SIGTERM nor SIGINT: its
    supervisor had to SIGKILL it. It now exits 0 on the first signal."""
    env = process_env(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    beat = spawn("beat", BEAT, env)
    wait_until(lambda: "beat: Connection error" in beat.text(), timeout=90)
    os.kill(beat.pid, signal.SIGTERM)
    try:
        beat.popen.wait(timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("beat ignored SIGTERM:\n" + beat.text()[-2000:]) from None
    assert beat.popen.returncode == 0, beat.text()[-2000:]
    assert "Traceback" not in beat.text()


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler of its own for ``sig`` (Linux: the ``SigCgt``
    mask of ``/proc/<pid>/status``; a default or ignored signal is not caught)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    raise AssertionError(f"no SigCgt line for process {pid}")


def test_beat_signalled_again_as_it_exits_exits_0(
    redis_proc: RedisProcess, client: redis.Redis, spawn
) -> None:
    """A SIGTERM that reached beat after it had stopped on an earlier one, once it handled
    SIGTERM no longer (its interpreter finalizing, 0.6 s idle and about 2 s under load here),
    killed it (exit status -15): CPython puts back the default action of the signals it handled
    as it finalizes. The group test below signalled there when it was descheduled a few ms
    between two ``killpg``. Such a beat now ignores SIGTERM and SIGINT and exits 0."""
    beat = spawn("beat", BEAT, process_env(redis_proc.url))
    wait_until(lambda: "beat: Starting..." in beat.text() or beat.popen.poll(), timeout=90)
    assert beat.popen.poll() is None, beat.text()
    os.killpg(beat.pid, signal.SIGTERM)
    wait_until(
        lambda: beat.popen.poll() is not None or not catches(beat.pid, signal.SIGTERM),
        timeout=60,
        interval=0.001,
    )
    if beat.popen.poll() is None:
        os.killpg(beat.pid, signal.SIGTERM)
    beat.popen.wait(timeout=60)
    assert beat.popen.returncode == 0, (beat.popen.returncode, beat.text())
    assert "Traceback" not in beat.text(), beat.text()


def test_every_role_stops_on_repeated_signals_to_its_group(
    redis_proc: RedisProcess, client: redis.Redis, spawn, tmp_path: Path
) -> None:
    """Receiver and search API under gunicorn, a worker and beat: SIGTERM twice then SIGINT
    on each process group (a supervisor repeating itself, ``make`` passing Ctrl-C on) is one
    orderly stop — each exits 0 well within its bound (gunicorn: ``GUNICORN_TIMEOUT``; an idle
    worker: at once), with no error line."""
    ports = {name: free_port() for name in ("receiver", "search")}
    env = process_env(
        redis_proc.url, NCINDEX_QDRANT_URL=f"http://127.0.0.1:{free_port()}", PYTHONFAULTHANDLER="1"
    )
    procs = {}
    for name, app in (("receiver", "webhook_receiver"), ("search", "search_api")):
        procs[name] = spawn(
            name,
            [str(BIN / "gunicorn"), "-c", str(ROOT / "deploy" / "gunicorn.conf.py"),
             "-w", "2", "--bind", f"127.0.0.1:{ports[name]}", f"{app}.wsgi:app"],
            env | {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / f"prometheus-{name}")},
        )  # fmt: skip
    for name, port in ports.items():
        url = f"http://127.0.0.1:{port}/livez"
        wait_until(lambda u=url, p=procs[name]: http_ok(u) or p.popen.poll(), timeout=120)
    procs["worker"], _ = start_worker(spawn, redis_proc.url, "stopper", tmp_path)
    procs["beat"] = spawn("beat", BEAT, env)
    # logged after beat's stop handler is installed (workers.beat._beat_program)
    wait_until(lambda: "beat: Starting..." in procs["beat"].text(), timeout=90)
    for proc in procs.values():
        assert proc.popen.poll() is None, proc.text()
        for sig in (signal.SIGTERM, signal.SIGTERM, signal.SIGINT):
            os.killpg(proc.pid, sig)
    for name, proc in procs.items():
        try:
            proc.popen.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGABRT)  # PYTHONFAULTHANDLER: the threads' stacks
            proc.popen.wait(timeout=10)
        # celery worker: 1 when the SIGINT was the last signal it handled (EX_FAILURE, its
        # Ctrl-C convention); the others: 0
        assert proc.popen.returncode in ((0, 1) if name == "worker" else (0,)), (
            name,
            proc.popen.returncode,
            proc.text(),
        )
        errors = [line for line in proc.json_lines() if line.get("level") in ("error", "critical")]
        assert errors == [] and "Traceback" not in proc.text(), (name, proc.text())
