"""``ncindex webhooks register|list|remove`` against the simulator's OCS API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from ncindex.ingest.events import DECK_SUBSCRIBED, SUBSCRIBED
from ncindex.ingest.registration import hook_uri, list_registrations, register, registration, remove
from ncindex.nextcloud.client import NextcloudClient, make_http
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator


@pytest.fixture
def admin() -> Iterator[tuple[NextcloudClient, Settings]]:
    sim = NextcloudSimulator()
    sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
    server = serve_simulator(sim, host="127.0.0.1", port=0)
    settings = Settings(
        nextcloud_url=server.url,
        accounts={"admin": SecretStr("admin-pw")},
        webhook_secret=SecretStr("s3cret"),
        public_url="http://indexer.example.test",
    )
    http = make_http(settings)
    yield NextcloudClient.for_account(http, "admin", "admin-pw"), settings
    http.close()
    server.close()


def test_register_twice_gives_one_registration_per_event_class(admin) -> None:
    client, settings = admin
    first = register(client, settings)
    second = register(client, settings)
    assert len(first.created) == len(SUBSCRIBED) and first.kept == []
    assert second.created == [] and sorted(second.kept) == sorted(first.created)
    hooks = list_registrations(client, settings)
    assert sorted(h["event"] for h in hooks) == sorted(SUBSCRIBED)
    for hook in hooks:
        assert hook["uri"] == hook_uri(settings)
        assert hook["authMethod"] == "header"
        assert hook["headers"] == {"Content-Type": "application/json"}
        assert "s3cret" not in str(hook["authData"])  # stored encrypted, never echoed


def test_register_removes_duplicates_and_remove_clears_all(admin) -> None:
    client, settings = admin
    register(client, settings)
    client.create_webhook(registration(settings, SUBSCRIBED[0]))
    result = register(client, settings)
    assert len(result.removed) == 1
    assert len(list_registrations(client, settings)) == len(SUBSCRIBED)
    assert len(remove(client, settings)) == len(SUBSCRIBED)
    assert list_registrations(client, settings) == []


def test_deck_card_events_are_registered_only_when_asked() -> None:
    sim = NextcloudSimulator(deck_webhooks=True)
    sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
    server = serve_simulator(sim, host="127.0.0.1", port=0)
    settings = Settings(
        nextcloud_url=server.url,
        accounts={"admin": SecretStr("admin-pw")},
        webhook_secret=SecretStr("s3cret"),
        public_url="http://indexer.example.test",
        deck_webhooks=True,
    )
    http = make_http(settings)
    try:
        client = NextcloudClient.for_account(http, "admin", "admin-pw")
        register(client, settings)
        events = {h["event"] for h in list_registrations(client, settings)}
        assert events == set(SUBSCRIBED) | set(DECK_SUBSCRIBED)
    finally:
        http.close()
        server.close()
