"""The workers' Celery app factory, used by ``celery worker``, beat and ``ncindex up``.

The broker, reliability settings and queues come from :func:`ncindex.ingest.queueing.celery_app`,
which the webhook receiver uses alone (``send_task`` by name, no task code imported).
"""

from __future__ import annotations

from celery import Celery

from ncindex.index.indexing import Indexer
from ncindex.ingest.queueing import celery_app
from ncindex.runtime import Services
from ncindex.settings import Settings


def create_celery(settings: Settings, services: Services | None = None) -> Celery:
    """The workers' Celery app: :func:`ncindex.ingest.queueing.celery_app` plus the tasks and
    ``worker_max_memory_per_child`` (``settings.worker_max_memory_per_child`` KiB, ``None``
    for 0: no bound), which a ``celery worker --pool=prefork`` reads; billiard compares it
    after each task, in the pool process, with ``getrusage``'s ``ru_maxrss`` (the peak, KiB
    on Linux) and the process then exits to be replaced (``billiard/pool.py``
    ``Worker.workloop``, ``billiard/compat.py`` ``mem_rss``). The threads and solo pools
    ignore it.

    ``services`` (built from ``settings`` when omitted, its dense model loaded at the first
    embedding, not at the first read of the store: a light worker, which never embeds, never
    loads it) is what the tasks use; it is stored on
    the app as ``app.ncindex_services``, with the :class:`Indexer` on it as ``app.ncindex_indexer``.
    """
    app = celery_app(settings)
    app.conf.worker_max_memory_per_child = settings.worker_max_memory_per_child or None
    app.conf.imports = (
        "workers.tasks",
        "workers.reconcile_tasks",
        "workers.model_tasks",
        "workers.queue_tasks",
        "workers.session_tasks",
    )
    # the tasks' services (workers/base.py reads them back, typed); Celery has no typed slot
    app.ncindex_services = services = services or Services(settings, load_model=False)  # type: ignore[attr-defined]
    app.ncindex_indexer = Indexer(services)  # type: ignore[attr-defined]
    return app
