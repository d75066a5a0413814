"""``free_port``: a port for a server started next, out of the way of outgoing connections."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ncindex import redis_server
from ncindex.redis_server import free_port


def test_a_picked_port_is_outside_the_ephemeral_range_and_binds() -> None:
    """An outgoing connection takes its local port from the ephemeral range: a port picked there
    can be taken before the server binds it ("Address already in use"). Fails on the old
    ``bind(port 0)`` picker, whose ports all lie in that range."""
    low, high = redis_server._ephemeral_range()
    for _ in range(20):
        port = free_port()
        assert not low <= port <= high
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_an_unreadable_range_is_taken_as_linux_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_server, "EPHEMERAL_RANGE_FILE", tmp_path / "absent")
    assert redis_server._ephemeral_range() == (32_768, 60_999)
    (tmp_path / "garbled").write_text("not numbers\n")
    monkeypatch.setattr(redis_server, "EPHEMERAL_RANGE_FILE", tmp_path / "garbled")
    assert redis_server._ephemeral_range() == (32_768, 60_999)
    assert not 32_768 <= free_port() <= 60_999
