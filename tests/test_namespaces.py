"""Two deployments on one Redis database (``NCINDEX_NAMESPACE``, :mod:`ncindex.names`): each
indexes and searches its own Nextcloud, neither worker takes the other's tasks, and every
Redis key either leaves behind is under its namespace."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from flask.testing import FlaskClient

from ncindex.accounts import clear_refused, record_refused, refused_accounts
from ncindex.embedding.embedder import Embedder
from ncindex.names import Names
from ncindex.runtime import Services
from ncindex.simulator import NextcloudSimulator
from ncindex.store import model_slug
from ncindex.store.qdrant_edge import QdrantEdgeStore
from search_api import create_app as create_search_app
from support import PASSWORDS, WorkerDeployment, build_stack, wait_until

LIGHTHOUSE = b"# Lighthouse\n\nThe lighthouse lens is polished every spring before the storms."
ORCHARD = b"# Orchard\n\nThe apple orchard is pruned in late winter and the pears in summer."


def doc_key(sim: NextcloudSimulator, path: str) -> str:
    file_id = sim.file_id("alice", path)
    assert file_id is not None
    return f"note:{file_id}"


def paths(search: FlaskClient, query: str) -> list[str]:
    """The paths alice finds for ``query``, best first."""
    response = search.post("/v1/search", json={"query": query}, auth=("alice", PASSWORDS["alice"]))
    assert response.status_code == 200, response.get_json()
    return [r["path"] for r in response.get_json()["results"]]


def test_names_refuse_a_namespace_that_would_break_keys() -> None:
    for bad in ("", "Upper", "a:b", "a*", "-lead", "x" * 41):
        with pytest.raises(ValueError, match="namespace"):
            Names(bad)
    assert Names("second").key("lock", "node", 7) == "second:lock:node:7"
    assert Names("second").queue_list("index") == "second:index"
    assert Names().queue_list("index") == "index"  # the default keeps Celery's names


def test_refused_accounts_are_kept_per_deployment(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    one, two = Names("one"), Names("two")
    record_refused(client, one, "carol", "PROPFIND /remote.php/dav/files/carol/: HTTP 401", 100)
    assert refused_accounts(client, one) == {
        "carol": {
            "at": 100,
            "where": "PROPFIND /remote.php/dav/files/carol/: HTTP 401",
            "cause": None,
            "held_until": None,  # recorded without a credential's fingerprint: nothing held
        }
    }
    assert refused_accounts(client, two) == {}
    assert [k.decode() for k in client.scan_iter()] == ["one:accounts:refused"]
    clear_refused(client, one, "carol")
    assert refused_accounts(client, one) == {}


def test_two_deployments_share_one_redis_database(
    redis_url: str, embedder: Embedder, model_dir: Path, tmp_path: Path
) -> None:
    """Deployment ``one`` runs in this process (its worker in a thread); ``two`` is a
    ``celery worker`` process configured by ``NCINDEX_NAMESPACE=two`` (two Celery workers in
    one process share kombu's event loop)."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    (tmp_path / "two").mkdir()
    two = WorkerDeployment(
        redis_url, model_dir, tmp_path / "two", debounce_seconds=0.3,
        limits=(60, 90, 120, 100), namespace="two",
    )  # fmt: skip
    try:
        two.start_worker()
        with build_stack(redis_url, embedder, model_dir, tmp_path / "one", namespace="one") as one:
            one.sim.put_file("alice", "/Notes/Lighthouse.md", LIGHTHOUSE)
            two.sim.put_file("alice", "/Notes/Orchard.md", ORCHARD)
            lighthouse = doc_key(one.sim, "/Notes/Lighthouse.md")
            orchard = doc_key(two.sim, "/Notes/Orchard.md")
            one.sim.flush_deliveries(timeout=10)
            two.sim.flush_deliveries(timeout=10)
            wait_until(lambda: one.points(lighthouse), 60)
            one.wait_idle(90)
            two.wait_idle(90)
            assert one.found("alice", "polishing the lighthouse lens", lighthouse) is not None
            assert "/Notes/Orchard.md" not in paths(one.search, "apple orchard pruning")
            two.stop_worker()

            keys = [k.decode() for k in client.scan_iter(count=1000)]
            strays = [k for k in keys if not k.startswith(("one:", "two:"))]
            assert strays == []
            assert any(k.startswith("one:") for k in keys)
            assert any(k.startswith("two:") for k in keys)

        # two's index, opened once its worker has exited (Edge allows one process per folder)
        store = QdrantEdgeStore(two.qdrant, model_slug(two.settings.dense_model))
        services = Services(two.settings, store=store, embedder=embedder)
        try:
            search = create_search_app(two.settings, services=services).test_client()
            points = store.document_points(orchard)
            assert [p.payload["paths"] for p in points] == [{"alice": "/Notes/Orchard.md"}]
            assert paths(search, "pruning the apple orchard")[:1] == ["/Notes/Orchard.md"]
            assert "/Notes/Lighthouse.md" not in paths(search, "lighthouse lens")
        finally:
            services.close()
    finally:
        two.close()
