"""Start a private ``redis-server`` on a free loopback port (embedded mode and tests).

Redis keeps nothing ncindex cannot rebuild (DESIGN §1), so the private server runs without
persistence. Used by ``ncindex up`` when no Redis answers at ``redis_url``, and by the tests.
The server runs in a process group of its own, so it is stopped by its starter, after the
processes that use it, not by a signal sent to the starter's group.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis


def unreachable(shown_url: str, exc: BaseException) -> str:
    """What an admin reads when Redis at ``shown_url`` (its password left out:
    :func:`~ncindex.settings.url_without_password`) failed with ``exc``: the error, then what
    to check — the credentials in ``NCINDEX_REDIS_URL`` when Redis refused them (redis-py's
    ``AuthenticationError``, ``AuthorizationError``), else that Redis runs and that the URL
    names it."""
    said = f"Redis at {shown_url}: {type(exc).__name__}: {exc}"
    if isinstance(exc, (redis.AuthenticationError, redis.exceptions.AuthorizationError)):
        return f"{said} — check the user name and password in NCINDEX_REDIS_URL"
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OSError)):
        return (
            f"{said} — is Redis running there? Check NCINDEX_REDIS_URL (host, port, "
            "database; rediss:// for TLS)"
        )
    return f"{said} — check NCINDEX_REDIS_URL"


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
"""Linux's range of local ports given to outgoing connections and to ``bind(port 0)``."""

PICKED_PORTS = range(10_000, 32_768)
"""Where :func:`free_port` looks first: below Linux's default ephemeral range (32768–60999)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, for a server started next.

    A port the kernel hands out for ``bind(port 0)`` comes from the ephemeral range, which is
    also where every outgoing connection takes its local port: between this call and the
    server's own ``bind`` another process's connection (to Redis, say) can take it, and the
    server fails with "Address already in use". So the port is drawn at random from
    :data:`PICKED_PORTS` minus the ephemeral range read from :data:`EPHEMERAL_RANGE_FILE`, and
    checked by binding it; only when no such port binds (50 tries) is the kernel asked.
    """
    low, high = _ephemeral_range()
    candidates = [port for port in PICKED_PORTS if not low <= port <= high]
    for port in random.sample(candidates, min(50, len(candidates))):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range, inclusive; Linux's default where it cannot be read."""
    try:
        low, high = EPHEMERAL_RANGE_FILE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32_768, 60_999


def reachable(url: str, timeout: float = 1.0) -> bool:
    """Whether a Redis answers PING at ``url`` within ``timeout`` seconds."""
    try:
        client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        return bool(client.ping())
    except redis.RedisError:
        return False


@dataclass
class RedisProcess:
    """A running private ``redis-server``; ``url`` is its ``redis://`` URL."""

    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        """Terminate it and wait (at most 10 seconds)."""
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def start_again(self) -> None:
        """Start a new server on the same port (after :meth:`stop`)."""
        self.process = _spawn(self.port)
        _wait(self.url)


def start_redis(port: int | None = None) -> RedisProcess:
    """Start ``redis-server`` on ``port`` (default: a free one) and wait until it answers.

    Raises ``FileNotFoundError`` when the binary is not installed (``apt-get install
    redis-server``) and ``TimeoutError`` when it does not answer within 10 seconds.
    """
    port = port or free_port()
    server = RedisProcess(_spawn(port), port)
    _wait(server.url)
    return server


def _spawn(port: int) -> subprocess.Popen[bytes]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError("redis-server is not installed (apt-get install redis-server)")
    return subprocess.Popen(  # noqa: S603  (fixed argv, no shell)
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            tempfile.gettempdir(),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # its own process group: a signal to the starter's group (Ctrl-C in a terminal, `kill
        # -TERM -<pgid>`, make passing a signal on) must not stop Redis under the tasks that
        # are finishing; the starter stops it last (``ncindex up``: Embedded.close)
        process_group=0,
    )


def _wait(url: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if reachable(url, timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"redis-server at {url} did not answer")
