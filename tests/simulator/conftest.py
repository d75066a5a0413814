"""Fixtures for the simulator's own tests: a simulator served over real HTTP, clients per user,
and a tiny HTTP server that records webhook deliveries."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from sim_support import PASSWORDS, Received, Receiver

from ncindex.simulator import NextcloudSimulator, SimulatorServer, serve_simulator


@pytest.fixture
def sim() -> Iterator[NextcloudSimulator]:
    """A fresh simulator with alice, bob and an admin, instant webhook delivery."""
    simulator = NextcloudSimulator(delivery_delay=(0.0, 0.0), seed=1)
    simulator.add_user("alice", PASSWORDS["alice"], "Alice Adams", email="alice@example.test")
    simulator.add_user("bob", PASSWORDS["bob"], "Bob Brown")
    simulator.add_user("admin", PASSWORDS["admin"], "Admin", admin=True)
    yield simulator
    simulator.close()


@pytest.fixture
def server(sim: NextcloudSimulator) -> Iterator[SimulatorServer]:
    """The simulator served on a free port."""
    with serve_simulator(sim) as srv:
        yield srv


@pytest.fixture
def client(server: SimulatorServer) -> Iterator[Callable[[str | None], httpx.Client]]:
    """Factory: an httpx client authenticated as a user (None = anonymous)."""
    clients: list[httpx.Client] = []

    def make(user: str | None) -> httpx.Client:
        auth = (user, PASSWORDS[user]) if user else None
        c = httpx.Client(base_url=server.url, auth=auth, timeout=10)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A threaded HTTP server recording each request (answers ``receiver.status``)."""
    state: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            rec = state["r"]
            rec.requests.append(Received(self.command, self.path, dict(self.headers), body))
            self.send_response(rec.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_PUT = do_GET = _record

        def log_message(self, format: str, *args: object) -> None:
            return None

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["r"] = Receiver(f"http://127.0.0.1:{httpd.server_port}")
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield state["r"]
    httpd.shutdown()
    httpd.server_close()
