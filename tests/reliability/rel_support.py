"""Helpers of the reliability tests: a whole stack that outlives one test (module-scoped), a
corpus with private documents of two users and a shared folder, ground truth read from the
simulator, waiting for the workers to go idle, and hypothesis profiles.

Profiles (``NCINDEX_HYPOTHESIS_PROFILE``): ``rel-ci`` (default, a few hundred cases over the
module, for ``make test``) and ``rel-fuzz`` (``make fuzz``: ≥ 10,000 cases per fuzz test).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from celery import Celery
from celery.contrib.testing.worker import start_worker
from hypothesis import HealthCheck, settings
from pydantic import SecretStr
from werkzeug.serving import BaseWSGIServer, make_server

from ncindex.embedding.embedder import Embedder
from ncindex.errors import StoreUnavailable
from ncindex.ingest.queueing import QUEUES
from ncindex.ingest.registration import register
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.store import model_slug
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.sync.reconcile import request_scans, scan_types
from search_api import create_app as create_search_app
from support import PASSWORDS
from webhook_receiver import create_app as create_receiver_app
from workers.celery_app import create_celery

ADMIN = ("admin", "admin-app-pw")
_COMMON = {
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
    "print_blob": True,
}
settings.register_profile("rel-ci", max_examples=150, **_COMMON)
settings.register_profile("rel-fuzz", max_examples=10_000, **_COMMON)
PROFILE = os.environ.get("NCINDEX_HYPOTHESIS_PROFILE", "rel-ci")


def fuzz_settings(ci_examples: int | None = None) -> settings:
    """Settings of a fuzz test: the active profile; in CI at most ``ci_examples`` cases."""
    base = settings.get_profile(PROFILE)
    if PROFILE == "rel-ci" and ci_examples is not None:
        return settings(base, max_examples=ci_examples)
    return base


# --- the fixture corpus: private documents of alice and bob, a folder alice shares with bob ---

ALICE_PRIVATE = {
    "/Private/diary.md": "Alice diary: the lighthouse keeper walked to the harbour at dawn.",
    "/Private/salary.txt": "Alice salary review: budget lighthouse compressor and oyster farm.",
    "/Notes/Secret/Recipe.md": "# Recipe\nAlice's secret oyster soup with lighthouse herbs.",
    "/Private/hostile.md": (
        "Hostile <script>alert('lighthouse')</script> text with <img src=x onerror=alert(1)> "
        'and "quotes" & <mark>fake marks</mark> near the lighthouse harbour.'
    ),
}
BOB_PRIVATE = {
    "/Private/bob-diary.md": "Bob diary: the lighthouse lens key is hidden under the harbour.",
    "/Notes/Home/Garden.md": "# Garden\nBob plants tulips and oysters by the lighthouse.",
    "/Work/report.txt": "Bob report: harbour budget and lighthouse compressor maintenance.",
}
SHARED = {
    "/Shared/plan.md": "Shared lighthouse plan: polish the lens, fix the harbour compressor.",
    "/Shared/minutes.txt": "Shared minutes: oyster farm budget and lighthouse keeper schedule.",
}
SHARED_FOLDER = "/Shared"


def seed_corpus(sim: NextcloudSimulator) -> None:
    """Write the corpus (webhooks fire for each write) and share ``/Shared`` with bob."""
    for path, text in ALICE_PRIVATE.items():
        sim.put_file("alice", path, text.encode())
    for path, text in SHARED.items():
        sim.put_file("alice", path, text.encode())
    for path, text in BOB_PRIVATE.items():
        sim.put_file("bob", path, text.encode())
    sim.share("alice", SHARED_FOLDER, "bob")


def keys_of(sim: NextcloudSimulator, user: str, paths: dict[str, str]) -> set[str]:
    """The ``doc_key``s of ``paths`` in ``user``'s tree (notes under ``/Notes``)."""
    out = set()
    for path in paths:
        file_id = sim.file_id(user, path)
        assert file_id is not None, path
        out.add(f"{'note' if path.startswith('/Notes/') else 'file'}:{file_id}")
    return out


def visible_keys(sim: NextcloudSimulator, user: str) -> set[str]:
    """``doc_key``s of every indexable document ``user`` can see right now (ground truth)."""
    out = set()
    for file_id, path in sim.visible_files(user).items():
        if path.endswith((".md", ".txt")):
            out.add(f"{'note' if path.startswith('/Notes/') else 'file'}:{file_id}")
    return out


# --- a stack that outlives one test -----------------------------------------------------------


@dataclass
class LongStack:
    """Simulator → receiver (HTTP) → Redis → Celery → Qdrant Edge → search app; the worker is
    started with :meth:`worker` (so a test can run the receiver with no worker at all)."""

    settings: Settings
    sim: NextcloudSimulator
    services: Services
    celery: Celery
    search_app: Any
    receiver_url: str
    receiver_app: Any
    _closers: list[Any] = field(default_factory=list)

    @property
    def search(self) -> Any:
        """A test client of the search app."""
        return self.search_app.test_client()

    @contextlib.contextmanager
    def worker(self) -> Iterator[None]:
        """An in-process Celery worker (solo pool) for the block."""
        with start_worker(
            self.celery,
            pool="solo",
            perform_ping_check=False,
            shutdown_timeout=30,
            loglevel="WARNING",
        ):
            yield

    def redis(self) -> redis.Redis:
        """A client of the stack's Redis."""
        return redis.Redis.from_url(self.settings.redis_url)

    def idle(self) -> bool:
        """No message waiting on any queue, none unacked, no pending debounce key."""
        client = self.redis()
        busy = any(client.llen(q) for q in QUEUES) or bool(client.hlen("unacked"))
        busy = busy or any(True for _ in client.scan_iter("ncindex:debounce:*", count=1000))
        return not busy

    def wait_idle(self, timeout: float = 120.0) -> None:
        """Wait until :meth:`idle` holds twice in a row, 0.3 s apart."""
        deadline = time.monotonic() + timeout
        calm = 0
        while calm < 2:
            calm = calm + 1 if self.idle() else 0
            if time.monotonic() > deadline:
                raise AssertionError(f"workers not idle within {timeout} s")
            time.sleep(0.3)

    def settle(self) -> None:
        """Let every webhook delivery be attempted and every task finish."""
        self.sim.flush_deliveries(timeout=60)
        self.wait_idle()

    def reconcile(self, users: tuple[str, ...] = ("alice", "bob", "carol")) -> None:
        """One reconcile pass through the tasks (a scan per user and doc type), run to the end."""
        asked = request_scans(self.celery, self.services.redis, list(users), scan_types(), 60)
        assert asked == len(users) * len(scan_types())
        self.wait_idle()

    def indexed(self) -> dict[str, list[dict[str, Any]]]:
        """Every point's payload by ``doc_key`` (first chunks and the rest)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for payload in self.services.store.scroll(
            None, ["doc_key", "acl", "content_hash", "chunk_index", "chunk_count"]
        ):
            out.setdefault(payload["doc_key"], []).append(payload)
        return out

    def close(self) -> None:
        """Stop the servers and close the services."""
        for closer in reversed(self._closers):
            with contextlib.suppress(Exception):
                closer()


def build_stack(
    redis_url: str,
    embedder: Embedder,
    model_dir: Path,
    tmp: Path,
    *,
    template: Path | None = None,
    **overrides: Any,
) -> LongStack:
    """A :class:`LongStack` on ``redis_url`` with alice, bob, carol and admin; webhooks
    registered. ``template``: an empty store folder to copy (saves creating the payload
    indexes). ``overrides`` go to :class:`Settings` (e.g. ``search_rate_limit``)."""
    sim = NextcloudSimulator(delivery_delay=(0.0, 0.0))
    sim.add_user(ADMIN[0], password=ADMIN[1], display_name="Admin", admin=True)
    for user, password in PASSWORDS.items():
        sim.add_user(user, password=password, display_name=user.title())
    sim_server = serve_simulator(sim, host="127.0.0.1", port=0)
    receiver_server: BaseWSGIServer = make_server("127.0.0.1", 0, lambda e, s: [], threaded=True)
    receiver_url = f"http://127.0.0.1:{receiver_server.port}"
    values: dict[str, Any] = {
        "nextcloud_url": sim_server.url,
        "accounts": {u: SecretStr(p) for u, p in (PASSWORDS | dict([ADMIN])).items()},
        "admin_user": ADMIN[0],
        "webhook_secret": SecretStr(secrets.token_urlsafe(16)),
        "public_url": receiver_url,
        "redis_url": redis_url,
        "model_dir": model_dir,
        "data_dir": tmp,
        "debounce_seconds": 0.2,
        "user_cache_seconds": 0,
        "search_rate_limit": "",
        "http_timeout": 2.0,
    }
    settings_ = Settings(**(values | overrides))
    if template is not None:
        shutil.copytree(template, tmp / "qdrant")
    store = QdrantEdgeStore(tmp / "qdrant", model_slug(settings_.dense_model))
    store.ensure_collection(embedder.dense_dim)
    services = Services(settings_, store=store, embedder=embedder)
    celery = create_celery(settings_, services)
    receiver_app = create_receiver_app(settings_, producer=celery)
    receiver_server.app = receiver_app
    thread = threading.Thread(target=receiver_server.serve_forever, daemon=True)
    thread.start()
    search_app = create_search_app(settings_, services=services, producer=celery)
    register(services.account(ADMIN[0]), settings_)
    built = LongStack(settings_, sim, services, celery, search_app, receiver_url, receiver_app)
    built._closers += [sim_server.close, receiver_server.shutdown, services.close]
    return built


class Flaky:
    """Makes ``method`` of ``target`` raise ``StoreUnavailable`` for its next ``times`` calls
    (``None``: until :meth:`heal`)."""

    def __init__(self, target: Any, method: str, times: int | None = None) -> None:
        self.target, self.method, self.times = target, method, times
        self.failed = 0
        self.real = getattr(target, method)
        self._lock = threading.Lock()
        setattr(target, method, self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            failing = self.times is None or self.failed < self.times
            if failing:
                self.failed += 1
        if failing:
            raise StoreUnavailable(f"{self.method}: store unreachable (injected)")
        return self.real(*args, **kwargs)

    def heal(self) -> None:
        """Put the real method back."""
        setattr(self.target, self.method, self.real)


MARK = re.compile(r"</?mark>")


def snippet_is_safe(snippet: str) -> bool:
    """Whether a snippet holds no markup but ``<mark>``/``</mark>`` (everything else escaped)."""
    return "<" not in MARK.sub("", snippet) and ">" not in MARK.sub("", snippet)
