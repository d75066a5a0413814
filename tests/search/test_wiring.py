"""The search apps' service (:func:`ncindex.search.wiring.service_factory`): what a result
verify-on-read found stale sends back to be re-checked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from pydantic import SecretStr

from ncindex import names
from ncindex.documents import DocRef
from ncindex.ingest.events import index_node
from ncindex.ingest.queueing import enqueue
from ncindex.runtime import Services
from ncindex.search.wiring import service_factory
from ncindex.settings import Settings


class Recording:
    """A producer keeping what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send_task(self, name: str, **options: Any) -> None:
        self.sent.append((name, options))


@pytest.fixture
def services(redis_url: str, tmp_path: Path) -> Iterator[Services]:
    """Services for account ``alice`` (a 30 s debounce) on a namespace emptied first."""
    settings = Settings(
        redis_url=redis_url,
        data_dir=tmp_path,
        namespace="wiring-test",
        accounts={"alice": SecretStr("pw")},
        debounce_seconds=30,
    )
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match="wiring-test:*"):
        client.delete(key)
    services = Services(settings)
    yield services
    services.close()


def test_a_stale_result_met_by_many_searches_is_re_checked_once(services: Services) -> None:
    """Every search meeting a result moved or gone queued a re-check of its own until the first
    ran; they are debounced under the document's own key, as its events are."""
    producer = Recording()
    service = service_factory(services, producer)()
    assert service.on_stale is not None
    for _ in range(3):
        service.on_stale("alice", DocRef.parse("file:7"))
    service.on_stale("alice", DocRef.parse("note:8"))
    service.on_stale("alice", DocRef.parse("deck_card:9"))
    service.on_stale("mallory", DocRef.parse("file:7"))  # no account: left to reconcile
    sent = [
        (n, {k: v for k, v in o["kwargs"].items() if k != "debounce_key"}) for n, o in producer.sent
    ]
    assert sent == [
        (names.INDEX_NODE, {"user": "alice", "file_id": 7}),
        (names.INDEX_NODE, {"user": "alice", "file_id": 8}),
        (names.INDEX_DOCUMENT, {"user": "alice", "doc_type": "deck_card", "doc_id": 9}),
    ]
    assert all(o["countdown"] == 30 for _, o in producer.sent)


def test_a_re_check_coalesces_with_the_documents_own_event(services: Services) -> None:
    """A file's re-check went out as ``ncindex.index_document`` under a key of its own
    (``index:alice:file:7``), so a search meeting the file while its change event's
    ``ncindex.index_node`` (``index:alice:7``) waited sent a second task: it is the event's task
    and key now, and coalesces."""
    producer = Recording()
    # the receiver's handling of a file's change event (webhook_receiver.hooks)
    keys = services.settings.names
    enqueue(producer, services.redis, [index_node("alice", 7)], 30, keys=keys)
    service_factory(services, producer)().on_stale("alice", DocRef.parse("file:7"))
    assert [n for n, _ in producer.sent] == [names.INDEX_NODE]
