"""Register ncindex's webhooks with Nextcloud's webhook_listeners, idempotently (DESIGN §5).

One registration per event class (reference/nextcloud-api.md §1.1), all pointing at
``{public_url}/hooks/nextcloud``, authenticated with the secret header (``authMethod:
header``; Nextcloud stores it encrypted) and sent with a ``Content-Type: application/json``
header (Nextcloud adds none by itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ncindex.ingest.events import DECK_SUBSCRIBED, SUBSCRIBED
from ncindex.nextcloud.client import NextcloudClient
from ncindex.settings import Settings


def subscribed(settings: Settings) -> tuple[str, ...]:
    """The event classes to register: file and tag events, plus Deck card events when
    ``settings.deck_webhooks`` (Deck ≥ 1.18; reference §1.4)."""
    return SUBSCRIBED + (DECK_SUBSCRIBED if settings.deck_webhooks else ())


def hook_uri(settings: Settings) -> str:
    """The delivery URL Nextcloud calls."""
    return settings.public_url.rstrip("/") + "/hooks/nextcloud"


def registration(settings: Settings, event_class: str) -> dict[str, Any]:
    """The create parameters for one event class."""
    return {
        "httpMethod": "POST",
        "uri": hook_uri(settings),
        "event": event_class,
        "eventFilter": [],
        "userIdFilter": "",
        "headers": {"Content-Type": "application/json"},
        "authMethod": "header",
        "authData": {settings.webhook_secret_header: settings.webhook_secret.get_secret_value()},
    }


@dataclass(slots=True)
class RegisterResult:
    """What :func:`register` did: ids created, ids kept, duplicate ids removed."""

    created: list[int]
    kept: list[int]
    removed: list[int]


def register(client: NextcloudClient, settings: Settings) -> RegisterResult:
    """Make sure exactly one registration per subscribed class points at this deployment.

    Existing registrations for our URI and class are kept (their secret cannot be read back,
    so ``--replace`` semantics are :func:`remove` then :func:`register`); duplicates are
    deleted. Raises ``NextcloudAuthError`` when the account is not an admin's.
    """
    existing = client.list_webhooks(uri=hook_uri(settings))
    result = RegisterResult([], [], [])
    for event_class in subscribed(settings):
        mine = sorted(
            (w for w in existing if str(w.get("event", "")).lstrip("\\") == event_class),
            key=lambda w: int(w["id"]),
        )
        if mine:
            result.kept.append(int(mine[0]["id"]))
            for duplicate in mine[1:]:
                client.delete_webhook(duplicate["id"])
                result.removed.append(int(duplicate["id"]))
        else:
            created = client.create_webhook(registration(settings, event_class))
            result.created.append(int(created["id"]))
    return result


def list_registrations(client: NextcloudClient, settings: Settings) -> list[dict[str, Any]]:
    """Registrations pointing at this deployment."""
    return client.list_webhooks(uri=hook_uri(settings))


def remove(client: NextcloudClient, settings: Settings) -> list[int]:
    """Delete every registration pointing at this deployment; returns their ids."""
    removed = []
    for webhook in client.list_webhooks(uri=hook_uri(settings)):
        if client.delete_webhook(webhook["id"]):
            removed.append(int(webhook["id"]))
    return removed
