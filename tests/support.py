"""Helpers shared by the tests (fixtures live in ``conftest.py``)."""

from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from celery import Celery
from celery.contrib.testing.worker import start_worker
from flask import Flask
from flask.testing import FlaskClient
from pydantic import SecretStr
from werkzeug.serving import make_server

from ncindex.embedding.embedder import Embedder
from ncindex.ingest.registration import register
from ncindex.names import DEFAULT_NAMESPACE, QUEUES, Names
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.store import model_slug, shard_copy
from ncindex.store.qdrant_edge import QdrantEdgeStore
from ncindex.sync.reconcile import request_scans, scan_types
from ncindex.sync.status import settled
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


def edge_segment_sparse_thresholds(shard: Path) -> list[int]:
    """The BM25 full-scan threshold (points) of each segment of the Qdrant Edge shard folder
    ``shard`` whose BM25 index is immutable (built by the optimisers), from the segments'
    saved configuration (``segments/*/segment.json``)."""
    found = []
    for segment in sorted((shard / "segments").glob("*/segment.json")):
        config = json.loads(segment.read_text(encoding="utf-8"))["config"]
        index = config["sparse_vector_data"]["bm25"]["index"]
        if not index["index_type"].startswith("Mutable"):
            found.append(index["full_scan_threshold"])
    return found


BULK_BOUNDARY = "boundary_bf38b9b4b10a303a28ed075624db3978"
#: The ``Content-Type`` of a bulk upload (:func:`bulk_body`).
BULK_CONTENT_TYPE = f'multipart/related; boundary="{BULK_BOUNDARY}"'


def bulk_part(path: str, content: bytes, md5: str | None = None, **headers: str) -> bytes:
    """One part of a bulk upload as the desktop client writes it (nextcloud/server
    ``apps/dav/lib/BulkUpload/MultipartRequestParser.php``): ``X-File-Path``, ``X-File-MD5``
    (``md5``, default the content's), ``Content-Length`` and ``headers`` (``X_File_MTime`` →
    ``X-File-MTime``)."""
    lines = [
        f"X-File-Path: {path}",
        f"X-File-MD5: {md5 or hashlib.md5(content).hexdigest()}",
        f"Content-Length: {len(content)}",
        *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items()),
    ]
    head = f"--{BULK_BOUNDARY}\r\n" + "\r\n".join(lines) + "\r\n\r\n"
    return head.encode() + content + b"\r\n"


def bulk_body(*parts: bytes) -> bytes:
    """A bulk upload's body: ``parts`` (:func:`bulk_part`) and the last boundary."""
    return b"".join(parts) + f"--{BULK_BOUNDARY}--\r\n".encode()


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


class Clock:
    """A monotonic clock (seconds) that stands still until the test advances ``now``: pass it
    where the library takes ``clock`` (such as :class:`ncindex.redis_breaker.RedisBreaker`)
    instead of sleeping through a period."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def consumers_waiting(client: redis.Redis, name: str) -> bool:
    """Whether every connection named ``name`` (the ``client_name`` of a Celery app's broker
    connections, as :func:`build_stack` sets it) that last ran ``BRPOP`` is blocked in it
    (Redis ``CLIENT LIST``: ``cmd=brpop``, flag ``b``): a consumer whose ``BRPOP`` has
    returned holds the message it popped, which kombu has put on no queue and not yet in
    ``unacked``, until its next ``BRPOP``."""
    for entry in client.client_list():
        if entry.get("name") == name and entry.get("cmd") == "brpop" and "b" not in entry["flags"]:
            return False
    return True


def wait_idle(
    client: redis.Redis,
    keys: Names,
    timeout: float = 120.0,
    queues: Iterable[str] = QUEUES,
    consumers: str | None = None,
) -> None:
    """Wait until deployment ``keys`` is idle — :func:`ncindex.sync.status.settled` on
    ``queues`` (nothing queued, unacknowledged — running, or a countdown or retry a worker
    holds — or debounced). A message a worker has just popped is on no queue and not yet in
    ``unacked`` for a moment (kombu records it after ``BRPOP``): with ``consumers``, the
    Redis client name of every worker's broker connections, a look is settled, every such
    connection blocked in its next ``BRPOP`` (:func:`consumers_waiting`), and settled again
    (a message popped before the first reading was handled before that ``BRPOP``; one
    popped after it was on a queue the second reading would see); without it, settled twice
    in a row 0.3 s apart. While it is not idle it looks every 0.05 s. Raises
    ``AssertionError`` after ``timeout`` seconds."""
    queues = tuple(queues)
    deadline = time.monotonic() + timeout
    calm = 0
    while True:
        if consumers is None:
            calm = calm + 1 if settled(client, keys, queues) else 0
        elif (
            settled(client, keys, queues)
            and consumers_waiting(client, consumers)
            and settled(client, keys, queues)
        ):
            return
        if calm == 2:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"workers not idle within {timeout} s")
        time.sleep(0.3 if calm else 0.05)


ADMIN = ("admin", "admin-app-pw")
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Stack:
    """The whole pipeline on real parts (:func:`build_stack`): simulator → receiver over HTTP
    → Redis → Celery worker (in this process) → Qdrant Edge → search app. A context manager:
    leaving it stops the worker and the servers and closes the services."""

    settings: Settings
    sim: NextcloudSimulator
    services: Services
    celery: Celery
    search_app: Flask
    receiver_url: str
    receiver_app: Flask
    exits: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    @property
    def consumers(self) -> str:
        """The Redis client name of the stack's Celery connections (a worker's ``BRPOP``
        one among them): kombu's ``client_name`` transport option."""
        return str(self.celery.conf.broker_transport_options["client_name"])

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def search(self) -> FlaskClient:
        """A new test client of the search app (no cookie carried over)."""
        return self.search_app.test_client()

    @contextlib.contextmanager
    def worker(self) -> Iterator[None]:
        """An in-process Celery worker (solo pool, every queue) for the block."""
        with start_worker(
            self.celery, pool="solo", perform_ping_check=False, shutdown_timeout=30,
            loglevel="WARNING",
        ):  # fmt: skip
            yield

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

    def wait_idle(self, timeout: float = 120.0) -> None:
        """:func:`wait_idle`: every event delivered so far has been fully processed (the
        stack's workers are known by their connections' name, :attr:`consumers`)."""
        wait_idle(self.services.redis, self.settings.names, timeout, consumers=self.consumers)

    def settle(self, timeout: float = 120.0) -> None:
        """Let every webhook delivery be attempted and every task finish."""
        self.sim.flush_deliveries(timeout=timeout)
        self.wait_idle(timeout)

    def reconcile(self, users: Iterable[str] = tuple(PASSWORDS)) -> None:
        """One reconcile pass through the tasks (a scan per user and doc type), and every task
        the scans enqueue, run to the end."""
        users = list(users)
        asked = request_scans(
            self.celery, self.services.redis, users, scan_types(), 60, keys=self.settings.names
        )
        assert asked == len(users) * len(scan_types())
        self.wait_idle()

    def points(self, doc_key: str) -> list[Any]:
        """The store's points of ``doc_key``."""
        return self.services.store.document_points(doc_key)

    def indexed(self) -> dict[str, list[dict[str, Any]]]:
        """Every point's payload by ``doc_key`` (first chunks and the rest)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for payload in self.services.store.scroll(
            None, ["doc_key", "acl", "content_hash", "chunk_index", "chunk_count"]
        ):
            out.setdefault(payload["doc_key"], []).append(payload)
        return out

    def close(self) -> None:
        """Stop the worker (if it runs for the stack's life) and the servers; close the
        services."""
        self.exits.close()


def build_stack(
    redis_url: str,
    embedder: Embedder | None,
    model_dir: Path,
    data_dir: Path,
    *,
    worker: bool = True,
    users: Iterable[str] = tuple(PASSWORDS),
    web_root: str = "",
    template: Path | None = None,
    open_store: bool = True,
    **settings: Any,
) -> Stack:
    """The tests' one builder of the whole stack: simulator (``users`` of :data:`PASSWORDS`
    and the admin) → receiver over HTTP → Redis → Celery → Qdrant Edge under
    ``data_dir / "qdrant"`` → search app; webhooks registered through OCS. Redis is not
    flushed here.

    Options: ``worker`` runs an in-process worker until the stack is closed (``False``: start
    one with :meth:`Stack.worker`, or run ``celery worker`` processes as
    :class:`WorkerDeployment` does); ``web_root`` installs the simulated Nextcloud under a
    sub-path (``"/nextcloud"``: every route and href starts with it, and ``nextcloud_url``
    ends with it); ``template`` is an empty store folder to copy (creating the payload
    indexes takes seconds); ``open_store=False`` leaves the store folder to another process
    (Edge allows one per folder; ``embedder`` may then be ``None``). ``settings`` override
    the defaults (such as ``namespace``, to run two stacks on one Redis database)."""
    users = list(users)
    sim = NextcloudSimulator(delivery_delay=(0.0, 0.0), web_root=web_root)
    sim.add_user(ADMIN[0], password=ADMIN[1], display_name="Admin", admin=True)
    for user in users:
        sim.add_user(user, password=PASSWORDS[user], display_name=user.title())
    exits = contextlib.ExitStack()
    sim_server = serve_simulator(sim, host="127.0.0.1", port=0)
    exits.callback(sim_server.close)
    receiver_server = make_server("127.0.0.1", 0, lambda e, s: [], threaded=True)
    receiver_url = f"http://127.0.0.1:{receiver_server.port}"
    accounts = {u: PASSWORDS[u] for u in users} | dict([ADMIN])
    config = Settings(
        **{
            "nextcloud_url": sim_server.url,
            "accounts": {u: SecretStr(p) for u, p in accounts.items()},
            "admin_user": ADMIN[0],
            "webhook_secret": SecretStr(secrets.token_urlsafe(16)),
            "public_url": receiver_url,
            "redis_url": redis_url,
            "model_dir": model_dir,
            "data_dir": data_dir,
            "debounce_seconds": 0.3,
            "user_cache_seconds": 0,
        }
        | settings
    )
    store = None
    if open_store:
        assert embedder is not None
        if template is not None:
            copy_store(template, data_dir / "qdrant")
        store = QdrantEdgeStore(data_dir / "qdrant", model_slug(config.dense_model))
        store.ensure_collection(embedder.dense_dim)
    services = Services(config, store=store, embedder=embedder)
    exits.callback(services.close)
    celery = create_celery(config, services)
    # the worker's BRPOP waits 0.1 s, not kombu's 1 s: stopping a worker closes its channel
    # after the BRPOP in flight has returned, so each stop waited up to a second
    # (and its connections are named, so wait_idle tells its worker's BRPOP connection)
    celery.conf.broker_transport_options = celery.conf.broker_transport_options | {
        "polling_interval": 0.1,
        "client_name": f"ncindex-test-{secrets.token_hex(6)}",
    }
    receiver_app = create_receiver_app(config, producer=celery)
    receiver_server.app = receiver_app
    threading.Thread(  # shutdown() waits for the loop's next look: every 0.05 s, not 0.5 s
        target=receiver_server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    exits.callback(receiver_server.shutdown)
    search_app = create_search_app(config, services=services, producer=celery)
    built = Stack(config, sim, services, celery, search_app, receiver_url, receiver_app, exits)
    try:
        register(services.account(ADMIN[0]), config)
        if worker:
            exits.enter_context(built.worker())
    except BaseException:
        exits.close()
        raise
    return built


def copy_store(template: Path, folder: Path) -> None:
    """Copy the closed store folder ``template`` (such as the session's ``empty_store``) to
    ``folder``, which must not exist, its sparse files kept sparse
    (:func:`ncindex.store.shard_copy.copy_file`)."""
    shutil.copytree(template, folder, copy_function=shard_copy.copy_file)


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


UP_BESIDE_A_SIMULATOR = r"""
import json, sys, time
from pathlib import Path
from pydantic import SecretStr
from allinone.embedded import start
from ncindex.redis_server import start_redis
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator

tmp = Path(sys.argv[1])
sim = NextcloudSimulator()
sim.add_user("admin", "admin-pw", "Admin", admin=True)
server = serve_simulator(sim)
redis_server = start_redis()
settings = Settings(
    nextcloud_url=server.url,
    accounts={"admin": SecretStr("admin-pw")},
    webhook_secret=SecretStr("s3cret"),
    redis_url=redis_server.url,
    data_dir=tmp,
    qdrant_path=tmp / "qdrant",
    port=0,
    namespace="up-scenario",
    debounce_seconds=0.3,
)
"""
"""The start of a :func:`run_scenario` script for ``ncindex up`` (``start``) beside a served
simulator whose one user, ``admin`` (password ``admin-pw``), is the configured account: it
defines ``tmp``, ``sim``, ``server``, ``redis_server`` and ``settings`` (namespace
``up-scenario``; a 0.3 s debounce, not the 2 s default, which only slowed the scenarios that
wait for an upload to be indexed); the script closes ``server`` and stops ``redis_server``."""


def run_scenario(script: str, tmp_path: Path, timeout: float = 240) -> dict[str, Any]:
    """Run ``script`` (Python source) in a child process from the repository's root with
    ``tmp_path`` as its argument, and return the JSON object it printed on its last line
    starting ``RESULT `` (a failure shows the child's output when there is none)."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=Path(__file__).resolve().parents[1],
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-4000:]
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


def beir_dataset(folder: Path) -> Path:
    """``folder`` made a two-document BEIR dataset (corpus, two queries, test qrels)."""
    (folder / "qrels").mkdir(parents=True)
    docs = {"d1": "Lighthouse lenses focus light.", "d2": "Kelp forests grow fast."}
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in docs.items())
    )
    queries = {"q1": "lighthouse lens", "q2": "kelp growth"}
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items())
    )
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    return folder


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
    """:func:`build_stack` for alice and the admin with ``celery worker`` subprocesses (solo
    pool, or ``prefork`` with one pool process) instead of an in-process worker, configured
    only through ``NCINDEX_*`` variables, started and killed at will (``app``: the ``-A``
    module, importable from :data:`ROOT` or the ``PYTHONPATH`` of :attr:`env`). The workers own the
    Qdrant Edge folder ``qdrant``: open it only after the last worker has exited (Edge allows
    one process per folder).

    ``limits`` are (soft, hard, visibility timeout, lock TTL) in seconds, kept short so a
    killed worker's message and lock come back soon; only the ``prefork`` pool enforces the
    time limits (Celery's solo pool has none). ``extract_seconds`` is the extraction cap
    (``NCINDEX_EXTRACT_MAX_SECONDS``; ``None``: half the soft limit). ``debounce_seconds``
    is the receiver's and the workers' (``NCINDEX_DEBOUNCE_SECONDS``) debounce.
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
        extract_seconds: float | None = None,
        pool: str = "solo",
        app: str = "workers.worker",
    ) -> None:
        self.qdrant = tmp / "qdrant"
        self.app = app
        self.queues = queues
        self.pool = pool
        self.stack = build_stack(
            redis_url, None, model_dir, tmp, worker=False, users=["alice"], open_store=False,
            qdrant_path=self.qdrant, debounce_seconds=debounce_seconds, namespace=namespace,
        )  # fmt: skip
        self.sim = self.stack.sim
        self.settings = self.stack.settings
        self.redis = self.stack.services.redis
        soft, hard, visibility, lock_ttl = limits
        accounts = {u: p.get_secret_value() for u, p in self.settings.accounts.items()}
        self.env = os.environ | {
            "NCINDEX_NEXTCLOUD_URL": str(self.settings.nextcloud_url),
            "NCINDEX_ACCOUNTS": json.dumps(accounts),
            "NCINDEX_REDIS_URL": redis_url,
            "NCINDEX_MODEL_DIR": str(model_dir),
            "NCINDEX_QDRANT_PATH": str(self.qdrant),
            "NCINDEX_TASK_SOFT_TIME_LIMIT": str(soft),
            # must be below the soft limit
            "NCINDEX_EXTRACT_MAX_SECONDS": str(
                soft / 2 if extract_seconds is None else extract_seconds
            ),
            "NCINDEX_TASK_TIME_LIMIT": str(hard),
            "NCINDEX_VISIBILITY_TIMEOUT": str(visibility),
            "NCINDEX_LOCK_TTL": str(lock_ttl),
            "NCINDEX_LOG_JSON": "true",
            "NCINDEX_NAMESPACE": namespace,
            # the worker's own countdowns (a folder walk, resolve_node, the gathered files'
            # flush) are this debounce too, not the 2 s default
            "NCINDEX_DEBOUNCE_SECONDS": str(debounce_seconds),
        }
        self.worker: subprocess.Popen[bytes] | None = None
        self.logs: list[Path] = []

    def start_worker(self) -> None:
        """Start ``celery worker`` (:attr:`pool`, one process) on :attr:`queues`, logging to a
        file."""
        log = self.qdrant.parent / f"worker-{len(self.logs)}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            self.worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", self.app, "worker",
                 f"--pool={self.pool}", "--concurrency=1", "-Q", ",".join(self.queues),
                 "--loglevel=INFO",
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

    def wait_idle(self, timeout: float) -> None:
        """:func:`wait_idle` on the queues the workers consume."""
        wait_idle(self.redis, self.settings.names, timeout, self.queues)

    def close(self) -> None:
        """Kill any worker, stop the servers."""
        if self.worker is not None and self.worker.poll() is None:
            self.kill_worker()
        self.stack.close()


_SPELT = re.compile(r"yours (?:is|are) spelt (.*?)(?: \(|$)")
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def spellings_named(detail: str) -> list[str] | None:
    """The stored spellings an other-spelling hint's or error's ``detail`` names (``yours is
    spelt 'Work' (…)``), or ``None`` for another detail."""
    found = _SPELT.search(detail)
    if found is None:
        return None
    return [ast.literal_eval(q) for q in _QUOTED.findall(found.group(1))]


def check_hints_leak_nothing(
    body: dict[str, Any],
    answer: dict[str, Any],
    search: Callable[[dict[str, Any]], Any],
    held: Collection[str] = (),
) -> None:
    """Assert that ``answer`` (a ``POST /v1/search`` answer to ``body``, or the MCP
    ``search`` tool's) has hints only when it has no results, all ``selects_nothing``, and
    that each names its value exactly as it would name one nobody has: ``body`` again with
    every hinted value (and its repeats in the same list) replaced by ``zz-nobody-<n>``
    (``/zz-nobody-<n>`` for a path), answered by ``search`` (the answer's JSON), gets the same
    hints naming the new values. A hint that told a value only other users' documents hold
    from one nobody's would differ. A hint naming the caller's spelling of a tag or category
    (:func:`spellings_named`) is left as it is, and every spelling it names must be in
    ``held`` (the tags and categories of the documents the caller can read)."""
    hints = answer["hints"]
    if not hints:
        return
    assert answer["results"] == [], answer
    assert {h["code"] for h in hints} == {"selects_nothing"}, hints
    swapped = copy.deepcopy(body)
    renamed: dict[str, str] = {}

    def nobody(value: str) -> str:
        if value not in renamed:
            renamed[value] = f"{'/' if value.startswith('/') else ''}zz-nobody-{len(renamed)}"
        return renamed[value]

    spelt = [spellings_named(h["detail"]) for h in hints]
    for named in spelt:
        assert named is None or set(named) <= set(held), (body, hints, held)
    for hint, named in zip(hints, spelt, strict=True):
        if named is not None:  # the caller's own spelling, not a value's absence
            continue
        *steps, last = [
            name or int(index) for name, index in re.findall(r"(\w+)|\[(\d+)\]", hint["field"])
        ]
        holder: Any = swapped
        for step in steps:
            holder = holder[step]
        value = holder[last]
        if isinstance(value, list):  # a whole list named
            holder[last] = [nobody(v) for v in value]
        elif isinstance(holder, list):  # a list's value, named once for its repeats too
            holder[:] = [nobody(v) if v == value else v for v in holder]
        else:
            holder[last] = nobody(value)
    want = []
    for hint, named in zip(hints, spelt, strict=True):
        detail = hint["detail"]
        for old, new in renamed.items() if named is None else ():
            detail = detail.replace(repr(old), repr(new))
        want.append({**hint, "detail": detail})
    again = search(swapped)
    assert again["results"] == [] and again["hints"] == want, (body, hints, swapped, again)
