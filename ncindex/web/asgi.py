"""Serve an ASGI app with uvicorn in a background thread of this process (the MCP server in
``ncindex up``, and the tests), on a socket bound before the thread starts so the port is
known (port 0 ⇒ a free one). uvicorn's own forwarded-header handling is off: it took
``X-Forwarded-For`` from any loopback peer as the client's address (``proxy_headers``,
``forwarded_allow_ips`` 127.0.0.1 and ::1 by default), whatever ``NCINDEX_TRUSTED_PROXY_HOPS``
said; the app applies that setting itself (:class:`ncindex.web.proxies.TrustedProxies`)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import uvicorn

STARTUP_SECONDS = 30.0
"""How long :func:`serve_in_thread` waits for the app's startup (lifespan), seconds."""


@dataclass
class ServedAsgi:
    """A running server: its ``url`` (``http://host:port``) and :meth:`close`."""

    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def close(self, timeout: float = 10.0) -> None:
        """Ask the server to finish (open requests complete) and wait up to ``timeout``
        seconds for its thread."""
        self.server.should_exit = True
        self.thread.join(timeout)


def serve_in_thread(app: Any, host: str = "127.0.0.1", port: int = 0) -> ServedAsgi:
    """Start ``app`` under uvicorn (lifespan on, access log and forwarded headers off) in a
    daemon thread and return once it has started. Raises ``OSError`` when the address cannot
    be bound and ``RuntimeError`` when the app does not start within
    :data:`STARTUP_SECONDS`."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    config = uvicorn.Config(
        app, lifespan="on", access_log=False, log_config=None, proxy_headers=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="asgi", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + STARTUP_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the ASGI app did not start")
        time.sleep(0.02)
    shown = f"[{host}]" if ":" in host else host
    return ServedAsgi(f"http://{shown}:{bound}", server, thread)
