"""The search apps' service (:func:`ncindex.search.wiring.service_factory`): what a result
verify-on-read found stale sends back to be re-checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis
from pydantic import SecretStr

from ncindex import names
from ncindex.documents import DocRef
from ncindex.runtime import Services
from ncindex.search.wiring import service_factory
from ncindex.settings import Settings


class Recording:
    """A producer keeping what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send_task(self, name: str, **options: Any) -> None:
        self.sent.append((name, options))


def test_a_stale_result_met_by_many_searches_is_re_checked_once(
    redis_url: str, tmp_path: Path
) -> None:
    """Every search meeting a result moved or gone queued a re-check of its own until the first
    ran; they are debounced under the document's own key, as its events are."""
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
    producer = Recording()
    services = Services(settings)
    try:
        service = service_factory(services, producer)()
        assert service.on_stale is not None
        for _ in range(3):
            service.on_stale("alice", DocRef.parse("file:7"))
        service.on_stale("alice", DocRef.parse("note:8"))
        service.on_stale("mallory", DocRef.parse("file:7"))  # no account: left to reconcile
    finally:
        services.close()
    asked = ("user", "doc_type", "doc_id")
    assert [(n, tuple(o["kwargs"][k] for k in asked)) for n, o in producer.sent] == [
        (names.INDEX_DOCUMENT, ("alice", "file", 7)),
        (names.INDEX_DOCUMENT, ("alice", "note", 8)),
    ]
    assert all(o["countdown"] == 30 for _, o in producer.sent)
