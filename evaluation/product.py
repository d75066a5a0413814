"""The product path of ``ncindex eval``: the whole deployment on real parts.

:class:`ProductHarness` starts, in this process and on loopback ports only: the Nextcloud
simulator over HTTP, a private ``redis-server`` (unless a Redis URL is given), the webhook
receiver and the search API on one HTTP port (as ``ncindex up`` serves them), a Celery worker,
and Qdrant Edge in a folder of its own; it registers the webhooks through the simulator's OCS
API. :meth:`ProductHarness.add_documents` writes corpus documents into the simulator as notes
and markdown files (:func:`evaluation.library.kind_of`), which fires the webhooks that
get them indexed; :meth:`ProductHarness.search` asks ``POST /v1/search`` over HTTP as the
evaluation user. The single-half modes (``bm25``, ``dense``) are not offered by the API, so this
path evaluates ``hybrid_rrf`` and ``hybrid_dbsf`` (the ``fusion`` request field).
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import structlog
from pydantic import SecretStr
from qdrant_client import models
from werkzeug.serving import make_server

from evaluation.beir import BeirDataset, note_content
from evaluation.library import EVAL_USER, LIMITS, MAX_QUERY_CHARS, file_name, kind_of
from evaluation.metrics import Metrics, evaluate
from evaluation.modes import MODES
from ncindex.documents import DocType
from ncindex.embedding.embedder import Embedder
from ncindex.settings import Settings

log = structlog.get_logger(__name__)

PRODUCT_MODES = ("hybrid_rrf", "hybrid_dbsf")
"""Modes the search API can be asked for (its ``fusion`` field)."""


class IndexingStalled(RuntimeError):
    """Raised when the index stops growing before every document is in it."""


class ProductHarness:
    """The deployment on real parts for one evaluation; a context manager (closes on exit).

    ``settings`` supplies the product settings under test (chunking, search, model); the
    Nextcloud, Redis, store and HTTP settings are replaced by the harness's own. ``embedder``
    may be shared with the caller (a loaded one saves a second); ``redis_url`` uses an existing
    Redis instead of starting one (its database is flushed).
    """

    def __init__(
        self,
        settings: Settings,
        data_dir: Path,
        *,
        embedder: Embedder | None = None,
        redis_url: str | None = None,
    ) -> None:
        self.base_settings = settings
        self.data_dir = Path(data_dir)
        self.embedder = embedder
        self.redis_url = redis_url
        self.password = secrets.token_urlsafe(12)
        self.corpus_of: dict[str, str] = {}  # doc_key → corpus id
        self._stack = contextlib.ExitStack()
        self.url = ""

    def __enter__(self) -> ProductHarness:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        import redis as redis_lib
        from celery.contrib.testing.worker import start_worker

        from ncindex.ingest.registration import register
        from ncindex.redis_server import start_redis
        from ncindex.runtime import Services
        from ncindex.simulator import NextcloudSimulator, serve_simulator
        from ncindex.store import model_slug
        from ncindex.store.qdrant_edge import QdrantEdgeStore
        from ncindex.web.dispatch import dispatch
        from search_api import create_app as create_search_app
        from webhook_receiver import create_app as create_receiver_app
        from workers.celery_app import create_celery

        redis_url = self.redis_url
        if redis_url is None:
            private = start_redis()
            self._stack.callback(private.stop)
            redis_url = private.url
        redis_lib.Redis.from_url(redis_url).flushdb()

        sim = NextcloudSimulator(delivery_delay=(0.0, 0.0))
        admin_password = secrets.token_urlsafe(12)
        sim.add_user("admin", password=admin_password, display_name="Admin", admin=True)
        sim.add_user(EVAL_USER, password=self.password, display_name="Evaluation")
        sim_server = serve_simulator(sim, host="127.0.0.1", port=0)
        self._stack.callback(sim_server.close)
        self.sim = sim

        server = make_server("127.0.0.1", 0, lambda e, s: [], threaded=True)
        self.url = f"http://127.0.0.1:{server.port}"
        settings = self.base_settings.model_copy(
            update={
                "nextcloud_url": sim_server.url,
                "accounts": {
                    EVAL_USER: SecretStr(self.password),
                    "admin": SecretStr(admin_password),
                },
                "admin_user": "admin",
                "webhook_secret": SecretStr(secrets.token_urlsafe(16)),
                "public_url": self.url,
                "redis_url": redis_url,
                "qdrant_url": None,
                "qdrant_path": self.data_dir / "qdrant",
                "data_dir": self.data_dir,
                "debounce_seconds": 0.2,
                "user_cache_seconds": 60,
            }
        )
        self.settings = settings
        embedder = self.embedder or Embedder(settings)
        embedder.load()
        store = QdrantEdgeStore(self.data_dir / "qdrant", model_slug(settings.dense_model))
        store.ensure_collection(embedder.dense_dim)
        services = Services(settings, store=store, embedder=embedder)
        self._stack.callback(services.close)
        self.services = services
        celery = create_celery(settings, services)
        server.app = dispatch(
            create_receiver_app(settings, producer=celery, redis_client=services.redis),
            create_search_app(settings, services=services, producer=celery),
        )
        threading.Thread(target=server.serve_forever, name="eval-http", daemon=True).start()
        self._stack.callback(server.shutdown)
        register(services.account("admin"), settings)
        self._stack.enter_context(
            start_worker(
                celery,
                pool="solo",
                perform_ping_check=False,
                shutdown_timeout=30,
                loglevel="WARNING",
            )
        )
        self.http = httpx.Client(base_url=self.url, auth=(EVAL_USER, self.password), timeout=60)
        self._stack.callback(self.http.close)

    # --- documents -----------------------------------------------------------------------

    def add_documents(self, dataset: BeirDataset) -> int:
        """Write every corpus document into the simulator as the evaluation user: even
        positions as notes (``/Notes/<id>.md``), odd ones as markdown files
        (``/Documents/<id>.md``). Returns the number written."""
        for i, doc in enumerate(dataset.corpus.values()):
            kind = kind_of(i)
            folder = "/Notes" if kind is DocType.NOTE else "/Documents"
            content = note_content(doc.title, doc.text)
            file_id = self.sim.put_file(EVAL_USER, f"{folder}/{file_name(doc)}", content)
            self.corpus_of[f"{kind.value}:{file_id}"] = doc.doc_id
        return len(dataset.corpus)

    def indexed(self) -> int:
        """Documents in the index (points with ``chunk_index`` 0)."""
        flt = models.Filter(
            must=[models.FieldCondition(key="chunk_index", match=models.MatchValue(value=0))]
        )
        return self.services.store.count(flt)

    def wait_indexed(
        self,
        expected: int,
        *,
        stall_seconds: float = 120.0,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Wait until ``expected`` documents are indexed; raises :class:`IndexingStalled` when
        the count does not grow for ``stall_seconds``. Returns the count."""
        last, last_change = -1, time.monotonic()
        while True:
            count = self.indexed()
            if count != last:
                last, last_change = count, time.monotonic()
                if progress is not None:
                    progress(count)
            if count >= expected:
                return count
            if time.monotonic() - last_change > stall_seconds:
                raise IndexingStalled(f"{count} of {expected} documents indexed; no progress")
            time.sleep(0.5)

    # --- searching -----------------------------------------------------------------------

    def search(self, query: str, limit: int, fusion: str) -> list[str]:
        """Corpus ids of ``POST /v1/search`` results (``limit``, ``fusion``) as the evaluation
        user, in order; raises ``httpx.HTTPStatusError`` on an error status."""
        body = {"query": query[:MAX_QUERY_CHARS], "limit": limit, "fusion": fusion}
        response = self.http.post("/v1/search", json=body)
        response.raise_for_status()
        results: list[dict[str, Any]] = response.json()["results"]
        return [self.corpus_of[f"{r['doc_type']}:{r['doc_id']}"] for r in results]

    def evaluate(
        self,
        dataset: BeirDataset,
        modes: Sequence[str] = PRODUCT_MODES,
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, Metrics]:
        """Metrics per mode over the judged queries of ``dataset`` (``modes`` ⊆
        :data:`PRODUCT_MODES`; see :data:`~evaluation.library.LIMITS`). A blank query
        counts as one without results."""
        unknown = [m for m in modes if m not in PRODUCT_MODES]
        if unknown:
            raise ValueError(f"the search API cannot run modes {unknown}")
        runs: dict[str, dict[int, dict[str, list[str]]]] = {
            m: {limit: {} for limit in LIMITS} for m in modes
        }
        for n, (qid, text) in enumerate(dataset.queries.items(), 1):
            for name in modes:
                for limit in LIMITS:
                    runs[name][limit][qid] = (
                        self.search(text, limit, MODES[name].fusion.value) if text.strip() else []
                    )
            if progress is not None:
                progress(n)
        return {
            name: evaluate(runs[name][LIMITS[0]], dataset.qrels, runs[name][LIMITS[1]])
            for name in modes
        }

    def close(self) -> None:
        """Stop everything started, in reverse order."""
        self._stack.close()
