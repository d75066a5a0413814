"""Nextcloud event class names, which of them a given server accepts, and the envelope.

Class names are the PHP fully qualified names (single backslashes in Python strings here; JSON
shows them doubled). webhook_listeners accepts a class only if it exists and implements
``OCP\\EventDispatcher\\IWebhookCompatibleEvent`` (nextcloud/server
``apps/webhook_listeners/lib/Db/WebhookListenerMapper.php``, ``addWebhookListener``:
``class_exists($event) && is_a($event, IWebhookCompatibleEvent::class, true)``), so the set
depends on the server version and on the apps enabled (:func:`compatible_events`):

* file node events (``OCP\\Files\\Events\\Node\\*``, ``AbstractNodeEvent`` /
  ``AbstractNodesEvent::getWebhookSerializable``, ``@since 30.0.0``);
* the trash-restore events ``OCA\\Files_Trashbin\\Events\\(Before)NodeRestoredEvent``
  (``apps/files_trashbin/lib/Events/``, ``@since 28.0.0``, ``extends AbstractNodesEvent``): there
  is no ``OCP\\Files\\Events\\Node\\NodeRestoredEvent``;
* system tag and calendar object events (``lib/public/SystemTag/TagAssignedEvent.php``,
  ``@since 32.0.0``);
* ``OCP\\Files\\Events\\Node\\(Before)NodeUpdatedEvent`` from 34
  (``lib/public/Files/Events/Node/NodeUpdatedEvent.php``: ``@since 34.0.0``, ``final class …
  extends AbstractNodeEvent``, which implements the interface). Where Nextcloud 34 dispatches
  them was not found in the source read: the simulator accepts their registration and never
  sends them;
* Deck card/ACL/board events only with Deck ≥ 1.18 (nextcloud/deck ``lib/Event/ACardEvent.php``
  implements the interface on ``stable34`` and ``main`` only, not on ``stable30``…``stable33``).
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
NODE_CREATED = _NODE + "NodeCreatedEvent"
NODE_TOUCHED = _NODE + "NodeTouchedEvent"
NODE_WRITTEN = _NODE + "NodeWrittenEvent"
NODE_DELETED = _NODE + "NodeDeletedEvent"
NODE_COPIED = _NODE + "NodeCopiedEvent"
NODE_RENAMED = _NODE + "NodeRenamedEvent"
BEFORE_NODE_UPDATED = _NODE + "BeforeNodeUpdatedEvent"
NODE_UPDATED = _NODE + "NodeUpdatedEvent"

_TRASHBIN = "OCA\\Files_Trashbin\\Events\\"
BEFORE_NODE_RESTORED = _TRASHBIN + "BeforeNodeRestoredEvent"
NODE_RESTORED = _TRASHBIN + "NodeRestoredEvent"

TAG_ASSIGNED = "OCP\\SystemTag\\TagAssignedEvent"
TAG_UNASSIGNED = "OCP\\SystemTag\\TagUnassignedEvent"

CARD_CREATED = "OCA\\Deck\\Event\\CardCreatedEvent"
CARD_UPDATED = "OCA\\Deck\\Event\\CardUpdatedEvent"
CARD_DELETED = "OCA\\Deck\\Event\\CardDeletedEvent"
BOARD_UPDATED = "OCA\\Deck\\Event\\BoardUpdatedEvent"
ACL_CREATED = "OCA\\Deck\\Event\\AclCreatedEvent"
ACL_UPDATED = "OCA\\Deck\\Event\\AclUpdatedEvent"
ACL_DELETED = "OCA\\Deck\\Event\\AclDeletedEvent"

FILE_EVENTS: tuple[str, ...] = (
    BEFORE_NODE_CREATED,
    BEFORE_NODE_TOUCHED,
    BEFORE_NODE_WRITTEN,
    BEFORE_NODE_READ,
    BEFORE_NODE_DELETED,
    BEFORE_NODE_COPIED,
    BEFORE_NODE_RENAMED,
    NODE_CREATED,
    NODE_TOUCHED,
    NODE_WRITTEN,
    NODE_DELETED,
    NODE_COPIED,
    NODE_RENAMED,
)

TRASHBIN_EVENTS: tuple[str, ...] = (BEFORE_NODE_RESTORED, NODE_RESTORED)

_CAL = "OCP\\Calendar\\Events\\"

#: Server classes that are webhook-compatible from Nextcloud 32 (``@since 32.0.0``).
SERVER_32_EVENTS: tuple[str, ...] = (
    TAG_ASSIGNED,
    TAG_UNASSIGNED,
    _CAL + "CalendarObjectCreatedEvent",
    _CAL + "CalendarObjectUpdatedEvent",
    _CAL + "CalendarObjectDeletedEvent",
    _CAL + "CalendarObjectMovedToTrashEvent",
    _CAL + "CalendarObjectRestoredEvent",
    _CAL + "CalendarObjectMovedEvent",
)

#: Server classes that are webhook-compatible from Nextcloud 34 (``@since 34.0.0``).
SERVER_34_EVENTS: tuple[str, ...] = (BEFORE_NODE_UPDATED, NODE_UPDATED)

DECK_EVENTS: tuple[str, ...] = (
    CARD_CREATED,
    CARD_UPDATED,
    CARD_DELETED,
    ACL_CREATED,
    ACL_UPDATED,
    ACL_DELETED,
    BOARD_UPDATED,
)

#: Every class a Nextcloud 34 with files_trashbin and Deck ≥ 1.18 accepts (the most the
#: simulator models); :func:`compatible_events` gives the set of one configuration.
WEBHOOK_COMPATIBLE_EVENTS: frozenset[str] = frozenset(
    FILE_EVENTS + TRASHBIN_EVENTS + SERVER_32_EVENTS + SERVER_34_EVENTS + DECK_EVENTS
)


def version_tuple(version: str) -> tuple[int, ...]:
    """``"1.18.3"`` → ``(1, 18, 3)``; non-numeric parts (``"0-beta"``) count their digits."""
    out = []
    for part in version.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits or 0))
    return tuple(out)


def compatible_events(server_version: str, apps: dict[str, str]) -> frozenset[str]:
    """The classes ``addWebhookListener`` accepts on a server of ``server_version`` whose
    enabled apps are ``apps`` (app id → version): file events always (30+), the trash-restore
    events with ``files_trashbin``, tag and calendar events from 32, ``(Before)NodeUpdatedEvent``
    from 34, Deck's with Deck ≥ 1.18."""
    events = set(FILE_EVENTS)
    if "files_trashbin" in apps:
        events.update(TRASHBIN_EVENTS)
    if version_tuple(server_version)[:1] >= (32,):
        events.update(SERVER_32_EVENTS)
    if version_tuple(server_version)[:1] >= (34,):
        events.update(SERVER_34_EVENTS)
    if "deck" in apps and version_tuple(apps["deck"])[:2] >= (1, 18):
        events.update(DECK_EVENTS)
    return frozenset(events)


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
