"""Helpers for the pipeline tests: deliveries posted by hand and the events the simulator sent."""

from __future__ import annotations

from typing import Any

import httpx

from support import Stack


def post_envelope(stack: Stack, envelope: dict[str, Any]) -> httpx.Response:
    """Deliver ``envelope`` to the receiver as Nextcloud would (secret header, JSON body)."""
    headers = {
        stack.settings.webhook_secret_header: stack.settings.webhook_secret.get_secret_value()
    }
    return httpx.post(f"{stack.receiver_url}/hooks/nextcloud", json=envelope, headers=headers)


def events_for(stack: Stack, file_id: int, short_class: str) -> list[dict[str, Any]]:
    """Envelopes the simulator dispatched of class ``…\\<short_class>`` for node ``file_id``."""
    return [
        e
        for e in stack.sim.events
        if e["event"]["class"].endswith("\\" + short_class)
        and (e["event"].get("node") or e["event"].get("target") or {}).get("id") == file_id
    ]
