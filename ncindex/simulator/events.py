"""Nextcloud event class names and the webhook envelope.

Class names are the PHP fully qualified names (single backslashes in Python strings here; JSON
shows them doubled). :data:`WEBHOOK_COMPATIBLE_EVENTS` lists the classes that implement
``OCP\\EventDispatcher\\IWebhookCompatibleEvent`` in the server and apps the simulator models
(reference §1.3/§1.4); the Deck classes only exist with Deck ≥ 1.18.
"""

from __future__ import annotations

from typing import Any

_NODE = "OCP\\Files\\Events\\Node\\"

BEFORE_NODE_CREATED = _NODE + "BeforeNodeCreatedEvent"
BEFORE_NODE_TOUCHED = _NODE + "BeforeNodeTouchedEvent"
BEFORE_NODE_WRITTEN = _NODE + "BeforeNodeWrittenEvent"
BEFORE_NODE_READ = _NODE + "BeforeNodeReadEvent"
BEFORE_NODE_DELETED = _NODE + "BeforeNodeDeletedEvent"
BEFORE_NODE_COPIED = _NODE + "BeforeNodeCopiedEvent"
BEFORE_NODE_RENAMED = _NODE + "BeforeNodeRenamedEvent"
BEFORE_NODE_RESTORED = _NODE + "BeforeNodeRestoredEvent"
NODE_CREATED = _NODE + "NodeCreatedEvent"
NODE_TOUCHED = _NODE + "NodeTouchedEvent"
NODE_WRITTEN = _NODE + "NodeWrittenEvent"
NODE_DELETED = _NODE + "NodeDeletedEvent"
NODE_COPIED = _NODE + "NodeCopiedEvent"
NODE_RENAMED = _NODE + "NodeRenamedEvent"
NODE_RESTORED = _NODE + "NodeRestoredEvent"

TAG_ASSIGNED = "OCP\\SystemTag\\TagAssignedEvent"
TAG_UNASSIGNED = "OCP\\SystemTag\\TagUnassignedEvent"

CARD_CREATED = "OCA\\Deck\\Event\\CardCreatedEvent"
CARD_UPDATED = "OCA\\Deck\\Event\\CardUpdatedEvent"
CARD_DELETED = "OCA\\Deck\\Event\\CardDeletedEvent"

FILE_EVENTS: tuple[str, ...] = (
    BEFORE_NODE_CREATED,
    BEFORE_NODE_TOUCHED,
    BEFORE_NODE_WRITTEN,
    BEFORE_NODE_READ,
    BEFORE_NODE_DELETED,
    BEFORE_NODE_COPIED,
    BEFORE_NODE_RENAMED,
    BEFORE_NODE_RESTORED,
    NODE_CREATED,
    NODE_TOUCHED,
    NODE_WRITTEN,
    NODE_DELETED,
    NODE_COPIED,
    NODE_RENAMED,
    NODE_RESTORED,
)

_CAL = "OCP\\Calendar\\Events\\"

OTHER_SERVER_EVENTS: tuple[str, ...] = (
    TAG_ASSIGNED,
    TAG_UNASSIGNED,
    _CAL + "CalendarObjectCreatedEvent",
    _CAL + "CalendarObjectUpdatedEvent",
    _CAL + "CalendarObjectDeletedEvent",
    _CAL + "CalendarObjectMovedToTrashEvent",
    _CAL + "CalendarObjectRestoredEvent",
    _CAL + "CalendarObjectMovedEvent",
    "OCP\\User\\Events\\UserFirstTimeLoggedInEvent",
    "OCA\\Forms\\Events\\FormSubmittedEvent",
    "OCA\\Tables\\Event\\RowAddedEvent",
    "OCA\\Tables\\Event\\RowUpdatedEvent",
    "OCA\\Tables\\Event\\RowDeletedEvent",
    "OCA\\Mail\\Events\\NewMessageReceivedEvent",
)

DECK_EVENTS: tuple[str, ...] = (
    CARD_CREATED,
    CARD_UPDATED,
    CARD_DELETED,
    "OCA\\Deck\\Event\\AclCreatedEvent",
    "OCA\\Deck\\Event\\AclUpdatedEvent",
    "OCA\\Deck\\Event\\AclDeletedEvent",
    "OCA\\Deck\\Event\\BoardUpdatedEvent",
)

WEBHOOK_COMPATIBLE_EVENTS: frozenset[str] = frozenset(FILE_EVENTS + OTHER_SERVER_EVENTS)
"""Webhook-compatible classes without Deck (Deck < 1.18)."""


def compatible_events(deck_webhooks: bool) -> frozenset[str]:
    """The webhook-compatible classes; Deck's only when ``deck_webhooks`` (Deck ≥ 1.18)."""
    if deck_webhooks:
        return WEBHOOK_COMPATIBLE_EVENTS | frozenset(DECK_EVENTS)
    return WEBHOOK_COMPATIBLE_EVENTS


def build_envelope(
    event_class: str, payload: dict[str, Any], user: dict[str, str] | None, time_s: int
) -> dict[str, Any]:
    """The webhook body as built at dispatch time.

    Shape: ``{"event": {**payload, "class": event_class}, "user": {"uid", "displayName"} |
    None, "time": <Unix seconds>}`` — key order as Nextcloud produces it.
    """
    event = dict(payload)
    event["class"] = event_class
    return {"event": event, "user": user, "time": int(time_s)}
