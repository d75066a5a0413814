"""The built image (``make image``), each role started from it with ``buildah run``: the
receiver, the search API and the MCP server under gunicorn answer ``/livez``, a worker indexes
a document the receiver queued (Redis and the Nextcloud simulator run on this host; the
containers share its network), beat starts, Flower answers, the models load with no network at
all, and every process runs as the image's non-root user.

Not part of ``make test``: building the image with buildah's vfs driver takes longer than CI's
budget allows a feature (README, "Container image"). ``make test-image`` builds the image and
runs this file with ``NCINDEX_IMAGE_TEST=1``; the image is ``$NCINDEX_IMAGE`` (default
``localhost/ncindex:latest``). Nothing here asserts a duration: waits poll for an outcome with
a generous ceiling.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from ncindex.names import QUEUES, Names
from ncindex.redis_server import RedisProcess, free_port, start_redis
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.sync.status import settled
from support import PASSWORDS, wait_until

pytestmark = pytest.mark.skipif(
    os.environ.get("NCINDEX_IMAGE_TEST") != "1",
    reason="builds on `make image`; run by `make test-image` (NCINDEX_IMAGE_TEST=1)",
)

IMAGE = os.environ.get("NCINDEX_IMAGE", "localhost/ncindex:latest")
SECRET = "image-test-secret-0123456789"
WRITTEN = "OCP\\Files\\Events\\Node\\NodeWrittenEvent"
#: The image's user (deploy/Dockerfile, ``ARG UID``).
IMAGE_UID = 10001
# The storage driver and isolation deploy/image.sh built the image with (vfs, chroot).
BUILDAH = ["buildah", "--storage-driver", os.environ.get("STORAGE_DRIVER", "vfs")]
BUILDAH_ENV = os.environ | {"BUILDAH_ISOLATION": os.environ.get("BUILDAH_ISOLATION", "chroot")}


def buildah(*args: str, offline: bool = False, timeout: float = 600) -> str:
    """Run ``buildah args…``; its stdout. ``offline``: in a new, empty network namespace
    (``unshare --net``: buildah's own ``--network none`` is not applied under chroot isolation,
    a container so started still reached PyPI here). Raises ``CalledProcessError`` on a
    non-zero exit."""
    argv = [*(["unshare", "--net"] if offline else []), *BUILDAH, *args]
    done = subprocess.run(argv, env=BUILDAH_ENV, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
    return done.stdout


class Role:
    """One role's working container (``buildah from`` the image) and the process started in
    it with ``buildah run`` (its own session, output in a log file)."""

    def __init__(self, name: str, tmp: Path) -> None:
        self.container = buildah("from", "--name", f"ncindex-test-{name}-{uuid.uuid4().hex[:8]}",
                                 IMAGE).strip()  # fmt: skip
        self.log = tmp / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def run(self, command: list[str], env: dict[str, str], *, offline: bool = False) -> str:
        """Run ``command`` to its end in the container (host network, or none when
        ``offline``); its output. Raises ``CalledProcessError`` on failure."""
        return buildah("run", "--network", "none" if offline else "host", *self._env(env),
                       self.container, "--", *command, offline=offline)  # fmt: skip

    def start(self, command: list[str], env: dict[str, str]) -> None:
        """Start ``command`` in the container in the background; a shell first writes its
        uid (``uid=N``) to the log, then ``exec``s the command, which keeps that uid."""
        shell = ["sh", "-c", 'echo "uid=$(id -u)"; exec "$@"', "sh"]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*BUILDAH, "run", "--network", "host", *self._env(env), self.container,
                 "--", *shell, *command],
                env=BUILDAH_ENV, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def text(self) -> str:
        """What the process wrote so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        """Whether the started process still runs."""
        return self.proc is not None and self.proc.poll() is None

    def remove(self) -> None:
        """SIGTERM the process group (SIGKILL after 30 s), then remove the container."""
        if self.alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        buildah("rm", self.container)

    @staticmethod
    def _env(env: dict[str, str]) -> list[str]:
        return [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]


@pytest.fixture(scope="module")
def redis_proc() -> Iterator[RedisProcess]:
    """A private Redis on this host, reached by the containers through the host network."""
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture
def roles(tmp_path: Path) -> Iterator:
    """``roles(name)`` makes a :class:`Role`; all are stopped and removed after the test."""
    made: list[Role] = []

    def _make(name: str) -> Role:
        role = Role(name, tmp_path)
        made.append(role)
        return role

    yield _make
    for role in reversed(made):
        role.remove()


def answers(url: str) -> bool:
    """Whether ``url`` answers 200."""
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def indexed(worker: Role, file_id: int) -> bool:
    """Whether the worker logged (one JSON object per line) that it indexed ``file_id``."""
    for line in worker.text().splitlines():
        if line.startswith("{") and '"indexed"' in line:
            entry = json.loads(line)
            if entry.get("event") == "indexed" and entry.get("file_id") == file_id:
                return True
    return False


def wait_for(role: Role, url: str) -> None:
    """Poll ``url`` until it answers 200; fail with the role's output if the process ended."""
    wait_until(lambda: answers(url) or not role.alive(), timeout=180, interval=0.5)
    assert role.alive() and answers(url), role.text()


def test_models_load_without_network_as_non_root(roles) -> None:
    """With no network at all (PyPI unreachable from inside), the baked-in models embed a
    query (384 dense dimensions, one BM25 term per word), as uid 10001."""
    role = roles("offline")
    script = (
        "import os, urllib.request\n"
        "from ncindex.settings import Settings\n"
        "from ncindex.embedding.embedder import Embedder\n"
        "try:\n"
        "    urllib.request.urlopen('https://pypi.org/simple/', timeout=10)\n"
        "    network = 'reachable'\n"
        "except OSError:\n"
        "    network = 'none'\n"
        "dense, sparse = Embedder(Settings()).embed_query('lighthouse keeper')\n"
        "print(os.getuid(), network, len(dense), len(sparse.indices))\n"
    )
    last = role.run(["python", "-c", script], {}, offline=True).splitlines()[-1]
    assert last.split() == [str(IMAGE_UID), "none", "384", "2"], last


@pytest.mark.timeout(1200)
def test_every_role_runs_from_the_image(redis_proc: RedisProcess, roles, tmp_path: Path) -> None:
    """Receiver, search API and MCP server answer ``/livez``; a webhook posted to the receiver
    is indexed by the worker (it fetches the note from the simulator; the queues drain); beat
    starts; Flower answers ``/healthcheck``; each role's process has uid 10001."""
    client = redis.Redis.from_url(redis_proc.url)
    client.flushdb()
    sim = NextcloudSimulator()
    sim.add_user("alice", password=PASSWORDS["alice"])
    file_id = sim.put_file("alice", "/Notes/Lighthouse.md", "# Lighthouse\n\nKeeper's log.\n")
    server = serve_simulator(sim, host="127.0.0.1", port=0)
    env = {
        "NCINDEX_REDIS_URL": redis_proc.url,
        "NCINDEX_NEXTCLOUD_URL": server.url,
        "NCINDEX_ACCOUNTS": json.dumps({"alice": PASSWORDS["alice"]}),
        "NCINDEX_WEBHOOK_SECRET": SECRET,
        "NCINDEX_DEBOUNCE_SECONDS": "0",
        "NCINDEX_LOG_LEVEL": "INFO",
    }
    try:
        ports = {name: free_port() for name in ("receiver", "search", "mcp", "flower")}
        receiver, search, mcp = roles("receiver"), roles("search"), roles("mcp")
        gunicorn = ["gunicorn", "-c", "/etc/ncindex/gunicorn.conf.py"]
        receiver.start(
            [*gunicorn, "webhook_receiver.wsgi:app"], env | {"PORT": str(ports["receiver"])}
        )
        search.start([*gunicorn, "search_api.wsgi:app"], env | {"PORT": str(ports["search"])})
        mcp.start(
            [*gunicorn, "--worker-class", "uvicorn_worker.UvicornWorker", "mcp_server.asgi:app"],
            env | {"PORT": str(ports["mcp"])},
        )
        base = f"http://127.0.0.1:{ports['receiver']}"
        wait_for(receiver, f"{base}/livez")
        wait_for(search, f"http://127.0.0.1:{ports['search']}/livez")
        wait_for(mcp, f"http://127.0.0.1:{ports['mcp']}/livez")

        worker = roles("worker")
        worker.start(["celery", "-A", "workers.worker", "worker", "-Q", ",".join(QUEUES),
                      "-c", "1", "--loglevel=INFO"], env)  # fmt: skip
        envelope = {
            "event": {
                "node": {"id": file_id, "path": "/alice/files/Notes/Lighthouse.md"},
                "class": WRITTEN,
            },
            "user": {"uid": "alice", "displayName": "Alice"},
            "time": 1767225601,
        }
        posted = httpx.post(
            f"{base}/hooks/nextcloud", json=envelope, headers={"X-Ncindex-Secret": SECRET}
        )
        assert posted.status_code == 202, posted.text
        names = Names()
        wait_until(
            lambda: (indexed(worker, file_id) and settled(client, names)) or not worker.alive(),
            timeout=300,
            interval=0.5,
        )
        assert worker.alive() and settled(client, names), worker.text()

        beat = roles("beat")
        beat.start(["celery", "-A", "workers.beat", "beat", "--loglevel=INFO"], env)
        wait_until(lambda: "beat: Starting" in beat.text() or not beat.alive(), timeout=180)
        assert beat.alive() and "beat: Starting" in beat.text(), beat.text()

        flower = roles("flower")
        flower.start(["celery", "-A", "workers.flower", "flower",
                      f"--port={ports['flower']}"],
                     env | {"FLOWER_BASIC_AUTH": "ops:flower-pass-123"})  # fmt: skip
        wait_for(flower, f"http://127.0.0.1:{ports['flower']}/healthcheck")

        for role in (receiver, search, mcp, worker, beat, flower):
            assert role.text().splitlines()[0] == f"uid={IMAGE_UID}", role.text()
    finally:
        server.close()
        client.close()
