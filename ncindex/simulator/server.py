"""Serve a simulator over real HTTP in a background thread (werkzeug's threaded server)."""

from __future__ import annotations

import logging
import threading
from types import TracebackType
from typing import TYPE_CHECKING

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator

__all__ = ["SimulatorServer", "serve_simulator"]


class _QuietHandler(WSGIRequestHandler):
    """Request handler that does not log every request to stderr and answers in HTTP/1.1.

    Unlike the web servers a Nextcloud runs behind (Apache's ``KeepAlive`` and nginx's
    ``keepalive_timeout`` are on by default: their configuration, not Nextcloud's code; a
    guess for any one installation) it closes each connection after its response: werkzeug's
    ``WSGIRequestHandler.run_wsgi`` always sends ``Connection: close`` (keep-alive is not
    supported there), so a client's pool opens a TCP connection per request. That costs the
    client little: a pooled ``httpx.Client`` GET of a WebDAV file took 0.56-0.66 ms of client
    CPU here against 0.51-0.53 ms from a keep-alive server (cheroot), 2,000 requests each
    (2026-12-06)."""

    protocol_version = "HTTP/1.1"

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return None


class SimulatorServer:
    """A running simulator server; ``url`` is the Nextcloud URL, like ``http://127.0.0.1:PORT``
    or, for a simulator with a web root, ``http://127.0.0.1:PORT/nextcloud`` (no trailing
    slash); ``origin`` is the scheme, host and port alone.

    Use as a context manager or call :meth:`close`.
    """

    def __init__(self, sim: NextcloudSimulator, httpd: BaseWSGIServer) -> None:
        self.sim = sim
        self._httpd = httpd
        self.host = str(httpd.server_address[0])
        self.port = int(httpd.server_address[1])
        self.origin = f"http://{self.host}:{self.port}"
        self.url = self.origin + sim.web_root
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"nc-sim-{self.port}",
            daemon=True,
        )
        self._thread.start()

    def close(self, *, close_simulator: bool = False) -> None:
        """Stop serving (and stop the simulator's delivery threads if ``close_simulator``)."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        if close_simulator:
            self.sim.close()

    def __enter__(self) -> SimulatorServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def serve_simulator(
    sim: NextcloudSimulator, host: str = "127.0.0.1", port: int = 0
) -> SimulatorServer:
    """Start serving ``sim`` on ``host:port`` (0 = a free port) in a daemon thread."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    httpd = make_server(host, port, sim, threaded=True, request_handler=_QuietHandler)
    return SimulatorServer(sim, httpd)
