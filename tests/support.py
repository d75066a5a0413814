"""Helpers shared by the tests (fixtures live in ``conftest.py``)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from celery.contrib.testing.worker import start_worker
from flask.testing import FlaskClient
from pydantic import SecretStr
from werkzeug.serving import make_server

from ncindex.embedding.embedder import Embedder
from ncindex.ingest.queueing import celery_app
from ncindex.ingest.registration import register
from ncindex.names import DEFAULT_NAMESPACE, QUEUES, Names
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.store import model_slug
from ncindex.store.qdrant_edge import QdrantEdgeStore
from search_api import create_app as create_search_app
from webhook_receiver import create_app as create_receiver_app
from workers.celery_app import create_celery

PASSWORDS = {"alice": "alice-app-pw", "bob": "bob-app-pw", "carol": "carol-app-pw"}


def tag_envelope(*file_ids: int, user: str = "alice") -> dict[str, Any]:
    """A ``TagAssignedEvent`` delivery of ``user`` tagging ``file_ids`` (reference §1.3)."""
    return {
        "event": {
            "class": "OCP\\SystemTag\\TagAssignedEvent",
            "objectType": "files",
            "objectIds": [str(i) for i in file_ids],
            "tagIds": [3],
        },
        "user": {"uid": user, "displayName": user.title()},
        "time": 1767225601,
    }


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


def idle(client: redis.Redis, keys: Names, queues: Iterable[str] = QUEUES) -> bool:
    """The tests' one definition of idle, for deployment ``keys``: no message waiting on any of
    ``queues``, none delivered and unacknowledged (``unacked``/``unacked_index``: a running
    task, or a countdown task a worker holds until its time), and no debounce key (an event
    whose task is not yet sent, or sent and not yet started)."""
    if any(client.llen(keys.queue_list(q)) for q in queues):
        return False
    if client.hlen(keys.unacked) or client.zcard(keys.unacked_index):
        return False
    return not any(True for _ in client.scan_iter(f"{keys.debounce_prefix}*", count=1000))


@dataclass
class Stack:
    """The whole pipeline on real parts, for one test."""

    settings: Settings
    sim: NextcloudSimulator
    services: Services
    search: FlaskClient
    receiver_url: str

    def search_as(self, user: str, query: str, **extra: Any) -> dict[str, Any]:
        """``POST /v1/search`` with ``user``'s app password; asserts 200, returns the body."""
        response = self.search.post(
            "/v1/search",
            json={"query": query, **extra},
            auth=(user, PASSWORDS[user]),
        )
        assert response.status_code == 200, response.get_json()
        return response.get_json()

    def found(self, user: str, query: str, doc_key: str, **extra: Any) -> dict[str, Any] | None:
        """The result for ``doc_key`` in ``user``'s search, or ``None``."""
        for result in self.search_as(user, query, **extra)["results"]:
            if f"{result['doc_type']}:{result['doc_id']}" == doc_key:
                return result
        return None

    def drained(self) -> bool:
        """:func:`idle`: every event delivered so far has been fully processed."""
        return idle(self.services.redis, self.settings.names)

    def points(self, doc_key: str) -> list[Any]:
        """The store's points of ``doc_key``."""
        return self.services.store.document_points(doc_key)


ADMIN = ("admin", "admin-app-pw")
ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def build_stack(
    redis_url: str,
    embedder: Embedder,
    model_dir: Path,
    data_dir: Path,
    *,
    web_root: str = "",
    **settings: Any,
) -> Iterator[Stack]:
    """The tests' one builder of the whole stack: simulator (users alice, bob, carol; admin) →
    receiver over HTTP → Redis → in-process Celery worker → Qdrant Edge under ``data_dir`` →
    search API; webhooks registered through OCS. ``web_root`` installs the simulated Nextcloud
    under a sub-path (``"/nextcloud"``: every route and href starts with it, and
    ``nextcloud_url`` ends with it). ``settings`` override the defaults (such as
    ``namespace``, to run two stacks on one Redis database). Redis is not flushed here."""
    sim = NextcloudSimulator(delivery_delay=(0.0, 0.0), web_root=web_root)
    sim.add_user(ADMIN[0], password=ADMIN[1], display_name="Admin", admin=True)
    for user, password in PASSWORDS.items():
        sim.add_user(user, password=password, display_name=user.title())
    sim_server = serve_simulator(sim, host="127.0.0.1", port=0)
    receiver_server = make_server("127.0.0.1", 0, lambda e, s: [], threaded=True)
    receiver_url = f"http://127.0.0.1:{receiver_server.port}"
    config = Settings(
        nextcloud_url=sim_server.url,
        accounts={u: SecretStr(p) for u, p in (PASSWORDS | dict([ADMIN])).items()},
        admin_user=ADMIN[0],
        webhook_secret=SecretStr(secrets.token_urlsafe(16)),
        public_url=receiver_url,
        redis_url=redis_url,
        model_dir=model_dir,
        data_dir=data_dir,
        debounce_seconds=0.3,
        user_cache_seconds=0,
        **settings,
    )
    store = QdrantEdgeStore(data_dir / "qdrant", model_slug(config.dense_model))
    store.ensure_collection(embedder.dense_dim)
    services = Services(config, store=store, embedder=embedder)
    celery = create_celery(config, services)
    receiver_server.app = create_receiver_app(config, producer=celery)
    threading.Thread(target=receiver_server.serve_forever, daemon=True).start()
    search_app = create_search_app(config, services=services, producer=celery)
    register(services.account(ADMIN[0]), config)
    try:
        with start_worker(
            celery, pool="solo", perform_ping_check=False, shutdown_timeout=30, loglevel="WARNING"
        ):
            yield Stack(config, sim, services, search_app.test_client(), receiver_url)
    finally:
        receiver_server.shutdown()
        sim_server.close()
        services.close()


def check_indexed_once(qdrant: Path, model: str, expected: dict[int, str]) -> int:
    """Open the Qdrant Edge folder ``qdrant`` (no other process may hold it) and assert that
    each file id of ``expected`` has exactly one version — the points of its expected text,
    chunk indexes 0…n-1 — and that the collection holds nothing else (no duplicate, no stale
    version). Returns the number of points."""
    from ncindex.documents import text_hash

    store = QdrantEdgeStore(qdrant, model_slug(model))
    try:
        total = 0
        for file_id, text in expected.items():
            payloads = [p.payload for p in store.document_points(f"file:{file_id}")]
            assert payloads, f"file {file_id} missing"
            assert {p["content_hash"] for p in payloads} == {text_hash(text)}, file_id
            assert [p["chunk_index"] for p in payloads] == list(range(len(payloads))), file_id
            assert all(p["chunk_count"] == len(payloads) for p in payloads), file_id
            total += len(payloads)
        assert store.count() == total
        return total
    finally:
        store.close()


def error_lines(text: str) -> list[str]:
    """The JSON log lines of ``text`` at level error or critical, and any traceback."""
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                if json.loads(line).get("level") in ("error", "critical"):
                    out.append(line)
        elif line.startswith("Traceback"):
            out.append(line)
    return out


class WorkerDeployment:
    """Simulator (alice, admin) and receiver in this process over HTTP; ``celery worker``
    subprocesses (solo pool) configured only through ``NCINDEX_*`` variables, started and
    killed at will. The worker owns the Qdrant Edge folder ``qdrant``: open it only after the
    last worker has exited (Edge allows one process per folder).

    ``limits`` are (soft, hard, visibility timeout, lock TTL) in seconds, kept short so a
    killed worker's message and lock come back soon.
    """

    def __init__(
        self,
        redis_url: str,
        model_dir: Path,
        tmp: Path,
        *,
        debounce_seconds: float,
        limits: tuple[int, int, int, int],
        queues: tuple[str, ...] = ("ingest", "index", "evict"),
        namespace: str = DEFAULT_NAMESPACE,
    ) -> None:
        self.sim = NextcloudSimulator()
        self.sim.add_user(ADMIN[0], password=ADMIN[1], display_name="Admin", admin=True)
        self.sim.add_user("alice", password=PASSWORDS["alice"])
        self.sim_server = serve_simulator(self.sim, host="127.0.0.1", port=0)
        self.receiver = make_server("127.0.0.1", 0, lambda e, s: [], threaded=True)
        accounts = {"alice": PASSWORDS["alice"], ADMIN[0]: ADMIN[1]}
        self.qdrant = tmp / "qdrant"
        self.queues = queues
        self.settings = Settings(
            nextcloud_url=self.sim_server.url,
            accounts={u: SecretStr(p) for u, p in accounts.items()},
            admin_user=ADMIN[0],
            webhook_secret=SecretStr(secrets.token_urlsafe(16)),
            public_url=f"http://127.0.0.1:{self.receiver.port}",
            redis_url=redis_url,
            model_dir=model_dir,
            qdrant_path=self.qdrant,
            debounce_seconds=debounce_seconds,
            namespace=namespace,
        )
        soft, hard, visibility, lock_ttl = limits
        self.env = os.environ | {
            "NCINDEX_NEXTCLOUD_URL": self.sim_server.url,
            "NCINDEX_ACCOUNTS": json.dumps(accounts),
            "NCINDEX_REDIS_URL": redis_url,
            "NCINDEX_MODEL_DIR": str(model_dir),
            "NCINDEX_QDRANT_PATH": str(self.qdrant),
            "NCINDEX_TASK_SOFT_TIME_LIMIT": str(soft),
            "NCINDEX_TASK_TIME_LIMIT": str(hard),
            "NCINDEX_VISIBILITY_TIMEOUT": str(visibility),
            "NCINDEX_LOCK_TTL": str(lock_ttl),
            "NCINDEX_LOG_JSON": "true",
            "NCINDEX_NAMESPACE": namespace,
        }
        self.receiver.app = create_receiver_app(self.settings, producer=celery_app(self.settings))
        threading.Thread(target=self.receiver.serve_forever, daemon=True).start()
        self.worker: subprocess.Popen[bytes] | None = None
        self.logs: list[Path] = []
        self.redis = redis.Redis.from_url(redis_url)

    def register_webhooks(self) -> None:
        """Register the webhooks through the simulator's OCS API, as an admin would."""
        services = Services(self.settings)  # only its HTTP client is used
        register(services.account(ADMIN[0]), self.settings)
        services.close()

    def start_worker(self) -> None:
        """Start ``celery worker`` (solo pool) on :attr:`queues`, logging to a file."""
        log = self.qdrant.parent / f"worker-{len(self.logs)}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            self.worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "workers.worker", "worker",
                 "--pool=solo", "-Q", ",".join(self.queues), "--loglevel=INFO",
                 "--without-mingle", "--without-gossip"],
                cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, to signal it as a group
            )  # fmt: skip

    def kill_worker(self) -> None:
        """SIGKILL the worker and reap it."""
        assert self.worker is not None
        self.worker.send_signal(signal.SIGKILL)
        self.worker.wait(timeout=10)

    def stop_worker(self) -> None:
        """SIGTERM (warm shutdown) and wait."""
        if self.worker is not None and self.worker.poll() is None:
            self.worker.send_signal(signal.SIGTERM)
            self.worker.wait(timeout=60)

    def downloads(self) -> int:
        """WebDAV GETs the simulator has answered."""
        return self.sim.request_count("webdav", "GET")

    def in_flight(self) -> list[bytes]:
        """Delivery counters of the documents a task is working on right now."""
        return list(self.redis.scan_iter(f"{self.settings.names.runs_prefix}*", count=1000))

    def settled(self) -> bool:
        """:func:`idle` on the queues the workers consume."""
        return idle(self.redis, self.settings.names, self.queues)

    def close(self) -> None:
        """Kill any worker, stop the servers."""
        if self.worker is not None and self.worker.poll() is None:
            self.kill_worker()
        self.receiver.shutdown()
        self.sim_server.close()
