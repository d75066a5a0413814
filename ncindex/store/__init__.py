"""The vector store: the port (:mod:`ncindex.store.port`) and the engine chosen by settings.

``open_store(settings, model_slug=...)`` returns a Qdrant-server store when
``settings.qdrant_url`` is set, else the embedded Qdrant Edge store in ``settings.qdrant_path``
(default ``settings.data_dir / "qdrant"``). Both engines are imported lazily, so importing
this package costs neither.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ncindex.store.layout import CollectionLayout
from ncindex.store.port import (
    DENSE,
    SPARSE,
    Fusion,
    Hit,
    ModelPointers,
    PointRecord,
    SparseVector,
    VectorStore,
)
from ncindex.store.schema import PAYLOAD_INDEXES, IndexKind, model_slug

if TYPE_CHECKING:
    from ncindex.settings import Settings

__all__ = [
    "DENSE",
    "PAYLOAD_INDEXES",
    "SPARSE",
    "CollectionLayout",
    "Fusion",
    "Hit",
    "IndexKind",
    "ModelPointers",
    "PointRecord",
    "SparseVector",
    "VectorStore",
    "edge_root",
    "model_slug",
    "open_store",
    "store_status",
]


def open_store(settings: Settings, *, model_slug: str) -> VectorStore:
    """Open the vector store of ``model_slug`` (see :func:`model_slug`) as configured.

    ``settings.qdrant_url`` set ⇒ :class:`~ncindex.store.qdrant_server.QdrantServerStore`
    on ``QdrantClient(url=..., api_key=...)`` with collection prefix
    ``settings.collection_prefix``; otherwise
    :class:`~ncindex.store.qdrant_edge.QdrantEdgeStore` in ``settings.qdrant_path`` or
    ``settings.data_dir / "qdrant"``. The collection may not exist yet: call
    ``ensure_collection(dim)`` at start-up. Raises ``StoreUnavailable`` if the embedded store's
    folder is held by another process (the server client connects lazily).
    """
    if settings.qdrant_url:
        from qdrant_client import QdrantClient

        from ncindex.store.qdrant_server import QdrantServerStore

        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        client = QdrantClient(url=settings.qdrant_url, api_key=api_key, check_compatibility=False)
        return QdrantServerStore(
            client,
            settings.collection_prefix,
            model_slug,
            layout=CollectionLayout.from_settings(settings),
        )

    from ncindex.store.qdrant_edge import QdrantEdgeStore

    return QdrantEdgeStore(
        edge_root(settings), model_slug, layout=CollectionLayout.from_settings(settings)
    )


def edge_root(settings: Settings) -> Path:
    """The embedded engine's root folder: ``settings.qdrant_path`` or ``data_dir / "qdrant"``."""
    return settings.qdrant_path or settings.data_dir / "qdrant"


def store_status(settings: Settings) -> dict[str, Any]:
    """What ``ncindex status`` shows of the store, read without opening it (``ncindex up`` may
    hold it): the ``engine`` and, for the embedded one, the background optimiser's last state
    per model (:func:`ncindex.store.edge_optimizer.read_state`)."""
    if settings.qdrant_url:
        return {"engine": "qdrant-server"}
    from ncindex.store.edge_optimizer import read_state

    return {"engine": "qdrant-edge", "optimizer": read_state(edge_root(settings))}
