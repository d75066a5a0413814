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
    """Request handler that does not log every request to stderr and keeps connections open
    (HTTP/1.1, as Nextcloud's web servers do), so a client's pooled connection is reused
    instead of a TCP connection and a server thread per request."""

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
