"""The search service as the search apps build it (the search API and the MCP server): on the
live model's store and embedder, with dropped results sent back to be re-indexed."""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from ncindex.documents import DocRef
from ncindex.embedding.embedder import Embedder
from ncindex.ingest.events import reindex_action
from ncindex.ingest.queueing import Producer, enqueue
from ncindex.runtime import Services
from ncindex.search.service import SearchService
from ncindex.store import VectorStore

log = structlog.get_logger(__name__)


def service_factory(services: Services, producer: Producer) -> Callable[[], SearchService]:
    """A function returning one :class:`SearchService` (built on first call, so the model
    and store open on first use): it reads the live model's collection and embedder, and a
    result verify-on-read drops, or finds elsewhere than indexed, queues the task that re-reads
    it as the caller (a configured account; fire and forget, reconcile catches what this
    misses): :func:`~ncindex.ingest.events.reindex_action`, ``ncindex.index_node`` for a file
    or note, else ``ncindex.index_document`` — the task and key of the document's own events —
    debounced as the receiver's events are (:func:`~ncindex.ingest.queueing.enqueue`): a
    stale result met by many searches, or by searches and its own event, before its re-check
    runs is re-checked once. While Redis does not answer (``services.redis_breaker``) no
    re-check is queued, and the search does not wait for one."""
    settings = services.settings

    def on_stale(user: str, ref: DocRef) -> None:
        if user not in settings.accounts:
            return
        if not ref.doc_id.isdigit():
            log.info("recheck_left_to_reconcile", doc_key=ref.key, user=user)
            return
        action = reindex_action(user, ref.doc_type, int(ref.doc_id))
        try:
            # through the breaker first: on a stalled Redis the debounce claim below waited out
            # Services.redis's 5 s socket timeout, in the search's own request, for every
            # result dropped (6 s a search); now it is skipped at once while the breaker is open
            services.redis_breaker.call("ping")
            enqueue(
                producer,
                services.redis,
                [action],
                settings.debounce_seconds,
                keys=settings.names,
            )
        except Exception as exc:  # fire and forget: reconcile catches what this misses
            log.warning("recheck_enqueue_failed", doc_key=ref.key, error=str(exc))

    def live() -> tuple[VectorStore, Embedder]:
        view = services.models.view()
        return view.live.store, view.live.embedder

    holder: list[SearchService] = []
    lock = threading.Lock()

    def service() -> SearchService:
        with lock:
            if not holder:
                holder.append(SearchService(settings, live, on_stale))
            return holder[0]

    return service
