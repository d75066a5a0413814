"""Helpers for the simulator tests (constants, the receiver record, OCS registration)."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "admin": "admin-pw"}
OCS = {"OCS-APIRequest": "true"}
OCS_JSON = {"OCS-APIRequest": "true", "Accept": "application/json"}
WEBHOOKS = "/ocs/v2.php/apps/webhook_listeners/api/v1/webhooks"
NODE = "OCP\\Files\\Events\\Node\\"
DAV_NS = {
    "d": "DAV:",
    "oc": "http://owncloud.org/ns",
    "nc": "http://nextcloud.org/ns",
    "s": "http://sabredav.org/ns",
}


@dataclass
class Received:
    """One request the receiver got."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """Records every request; ``url`` is its base URL; ``status`` is what it answers."""

    url: str
    requests: list[Received] = field(default_factory=list)
    status: int = 200


def register(c: httpx.Client, receiver: Receiver, event: str, **extra: object) -> dict:
    """Register ``event`` (short class name or full) for the receiver via OCS; WebhookInfo."""
    cls = event if "\\" in event else NODE + event
    body = {"httpMethod": "POST", "uri": receiver.url + "/hook", "event": cls, **extra}
    resp = c.post(WEBHOOKS, json=body, headers=OCS_JSON)
    assert resp.status_code == 200, resp.text
    return resp.json()["ocs"]["data"]


def node_events(sim) -> list[tuple[str, str, int | None]]:
    """The single-node events ``sim`` sent since the last call, as ``(short class, path, id)``
    (``None``: no id), and forgets them."""
    out = [
        (
            e["event"]["class"].rsplit("\\", 1)[1],
            e["event"]["node"]["path"],
            e["event"]["node"].get("id"),
        )
        for e in sim.events
    ]
    sim.events.clear()
    return out
