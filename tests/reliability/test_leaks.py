"""Leaks: repeated searches, failing searches and webhook deliveries leave the process's open
file descriptors, threads and Redis connections where they were (after a warm-up that fills
the connection pools), and a settled pipeline leaves no lock or delivery counter in Redis.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from pathlib import Path

import httpx
import pytest

from support import PASSWORDS, Stack

WRITTEN = "OCP\\Files\\Events\\Node\\NodeWrittenEvent"
ROUNDS = 200
SLACK = 4  # descriptors or threads a pool may still open lazily


def open_fds() -> int:
    """Open file descriptors of this process."""
    return len(os.listdir("/proc/self/fd"))


def fds_within(ceiling: int) -> int:
    """The process's open descriptors once at most ``ceiling``, waiting up to 5 s for them to
    get there (collected garbage first): the session's other threads — servers and workers
    of earlier tests' stacks winding down — open and close descriptors of their own while the
    rounds run (one CI run on a loaded machine counted 5 over the slack, none of them left a
    moment later). A search that leaked one would hold it: 200 rounds, tens of them."""
    gc.collect()
    deadline = time.monotonic() + 5
    while open_fds() > ceiling and time.monotonic() < deadline:
        time.sleep(0.1)
    return open_fds()


def redis_clients(stack: Stack) -> int:
    """Connections the stack's Redis holds."""
    return int(stack.services.redis.info("clients")["connected_clients"])


pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")


def test_searches_leak_no_descriptors_threads_or_connections(corpus_stack: Stack) -> None:
    client = corpus_stack.search
    bodies = [
        {"query": "lighthouse harbour", "limit": 20},
        {"query": "oyster", "filter": {"field": "owner", "op": "eq", "value": "bob"}},
        {"query": "x", "filter": {"field": "nope", "op": "eq", "value": 1}},  # 400
    ]
    users = ["alice", "bob", "carol"]

    def round_(n: int) -> None:
        user = users[n % 3]
        client.post("/v1/search", json=bodies[n % 3], auth=(user, PASSWORDS[user]))
        client.post("/v1/search", json={"query": "x"}, auth=(user, "wrong"))  # 401

    for n in range(30):  # warm-up: pools fill
        round_(n)
    fds, threads, conns = open_fds(), threading.active_count(), redis_clients(corpus_stack)
    for n in range(ROUNDS):
        round_(n)
    assert (now := fds_within(fds + SLACK)) <= fds + SLACK, (fds, now)
    assert threading.active_count() <= threads + SLACK, (threads, threading.active_count())
    assert redis_clients(corpus_stack) <= conns + SLACK, (conns, redis_clients(corpus_stack))


def test_failing_verification_leaks_nothing(corpus_stack: Stack) -> None:
    client = corpus_stack.search
    auth = ("alice", PASSWORDS["alice"])
    body = {"query": "lighthouse", "limit": 20}
    try:
        corpus_stack.sim.faults.set("webdav", status=503)
        corpus_stack.sim.faults.set("notes", status=503)
        for _ in range(20):
            client.post("/v1/search", json=body, auth=auth)
        fds, threads = open_fds(), threading.active_count()
        for _ in range(ROUNDS // 2):
            assert client.post("/v1/search", json=body, auth=auth).status_code == 200
    finally:
        corpus_stack.sim.faults.clear()
    assert (now := fds_within(fds + SLACK)) <= fds + SLACK, (fds, now)
    assert threading.active_count() <= threads + SLACK


def test_deliveries_leak_no_descriptors_or_connections(corpus_stack: Stack) -> None:
    settings = corpus_stack.settings
    headers = {settings.webhook_secret_header: settings.webhook_secret.get_secret_value()}
    url = f"{corpus_stack.receiver_url}/hooks/nextcloud"
    ignored = {  # a user without an account: validated, mapped, ignored (nothing queued)
        "event": {"class": WRITTEN, "node": {"id": 1, "path": "/mallory/files/a.md"}},
        "user": {"uid": "mallory"},
        "time": 1,
    }
    bodies = [json.dumps(ignored).encode(), b"not json", b"{}"]
    with httpx.Client(timeout=10) as http:
        for n in range(30):
            http.post(url, content=bodies[n % 3], headers=headers)
        fds, conns = open_fds(), redis_clients(corpus_stack)
        for n in range(ROUNDS):
            response = http.post(url, content=bodies[n % 3], headers=headers)
            assert response.status_code in (202, 400)
            http.post(url, content=bodies[0])  # 401
    assert (now := fds_within(fds + SLACK)) <= fds + SLACK, (fds, now)
    assert redis_clients(corpus_stack) <= conns + SLACK
