"""The search service as the search apps build it (the search API and the MCP server): on the
live model's store and embedder, with dropped results sent back to be re-indexed."""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from ncindex import names
from ncindex.documents import DocRef
from ncindex.embedding.embedder import Embedder
from ncindex.ingest.queueing import PUBLISH_RETRY, Producer
from ncindex.runtime import Services
from ncindex.search.service import SearchService
from ncindex.store import VectorStore

log = structlog.get_logger(__name__)


def service_factory(services: Services, producer: Producer) -> Callable[[], SearchService]:
    """A function returning one :class:`SearchService` (built on first call, so the model
    and store open on first use): it reads the live model's collection and embedder, and a
    result verify-on-read drops, or finds elsewhere than indexed, queues
    ``ncindex.index_document`` as the caller (a configured account; fire and forget, reconcile
    catches what this misses)."""
    settings = services.settings

    def on_stale(user: str, ref: DocRef) -> None:
        if user not in settings.accounts:
            return
        if not ref.doc_id.isdigit():
            log.info("recheck_left_to_reconcile", doc_key=ref.key, user=user)
            return
        try:
            producer.send_task(
                names.INDEX_DOCUMENT,
                kwargs={"user": user, "doc_type": ref.doc_type.value, "doc_id": int(ref.doc_id)},
                queue=names.INDEX,
                retry_policy=PUBLISH_RETRY,
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
