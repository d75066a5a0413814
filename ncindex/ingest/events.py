"""Webhook envelopes from Nextcloud's webhook_listeners, validated and mapped to tasks.

Envelope shape (reference/nextcloud-api.md §1.2–1.3)::

    {"event": {"node": {"id": 1532, "path": "/alice/files/Notes/Plan.md"},
               "class": "OCP\\\\Files\\\\Events\\\\Node\\\\NodeWrittenEvent"},
     "user": {"uid": "alice", "displayName": "Alice Adams"} | null,
     "time": 1767225601}

An envelope is a hint that something changed; every task re-reads Nextcloud. Paths are in the
acting user's view (``/<uid>/files/<path>``), so the user whose view it is comes from the path;
paths outside ``files/`` (trash bin, versions) are not indexed and are ignored. A file
version restored changes the file's bytes and sends ``NodeTouchedEvent`` alone (:data:`REREAD`).

System tag events (``TagAssignedEvent``/``TagUnassignedEvent``: ``objectType``, ``objectIds``
as strings, ``tagIds``) and the events a document source names
(:attr:`ncindex.sources.base.Source.events`: Deck's ``CardCreated/Updated/DeletedEvent``,
Deck ≥ 1.18, the card JSON under ``card``; its ``AclCreated/DeletedEvent``, the board's ACL
entry under ``acl``) carry no path: the user they are read as is the
envelope's ``user.uid``. An event without a session user (``"user": null``: occ, cron, a
workflow rule, an admin assigning a tag) is resolved by file id: ``ncindex.resolve_node``
finds the configured accounts that can see the node and indexes it for each.

The trash-restore events are files_trashbin's ``OCA\\Files_Trashbin\\Events\\NodeRestoredEvent``
(nextcloud/server ``apps/files_trashbin/lib/Events/``, since 28); there is no
``OCP\\Files\\Events\\Node\\NodeRestoredEvent``, and Nextcloud refuses to register it.
"""

from __future__ import annotations

import re
from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from ncindex import names
from ncindex.documents import DocType, has_dot_segment, normalize_path
from ncindex.errors import EnvelopeError
from ncindex.sources.base import MAX_ID, EventRoute, Source, is_id
from ncindex.sources.registry import SOURCES

NODE_NS = "OCP\\Files\\Events\\Node\\"
TRASHBIN_NS = "OCA\\Files_Trashbin\\Events\\"
SINGLE_NODE = {
    "NodeCreatedEvent",
    "NodeWrittenEvent",
    "NodeTouchedEvent",
    "BeforeNodeDeletedEvent",
    "NodeDeletedEvent",
}
TWO_NODE = {"NodeRenamedEvent", "NodeCopiedEvent", "NodeRestoredEvent"}
#: The node events whose node is re-read and indexed (:func:`index_node`; the target of the
#: two-node ones). ``NodeTouchedEvent`` is the one event a file version restored sends:
#: nextcloud/server ``apps/files_versions/lib/Storage.php`` ``rollback`` puts the version's
#: bytes in place below the view (``copyFileContents``: ``moveFromStorage`` or a stream copy,
#: no hooks) and then calls ``View::touch($file, $revision)``, whose ``touch`` and
#: ``post_touch`` hooks ``lib/private/Files/Node/HookConnector.php`` dispatches as
#: ``BeforeNodeTouchedEvent`` and ``NodeTouchedEvent``. A touch that changed nothing the
#: index holds costs its task the look-up (same etag: no download) or a download (same
#: text: no embedding).
REREAD = frozenset(
    {
        "NodeCreatedEvent",
        "NodeWrittenEvent",
        "NodeTouchedEvent",
        "NodeCopiedEvent",
        "NodeRestoredEvent",
    }
)
NODE_RESTORED = TRASHBIN_NS + "NodeRestoredEvent"
#: Full class name → the short name the planner uses, for the node events ncindex handles.
_SHORT_NAMES = {NODE_NS + name: name for name in SINGLE_NODE | TWO_NODE - {"NodeRestoredEvent"}}
_SHORT_NAMES[NODE_RESTORED] = "NodeRestoredEvent"
TAG_ASSIGNED = "OCP\\SystemTag\\TagAssignedEvent"
TAG_UNASSIGNED = "OCP\\SystemTag\\TagUnassignedEvent"
TAG_EVENTS = (TAG_ASSIGNED, TAG_UNASSIGNED)
#: Event class → the source whose document it names by id, and how (Deck's card events):
#: registered apart from :data:`SUBSCRIBED`, as each source says
#: (:meth:`~ncindex.sources.base.Source.subscribes`).
DOCUMENT_EVENTS: dict[str, tuple[Source, EventRoute]] = {
    route.event_class: (source, route) for source in SOURCES.values() for route in source.events
}
#: Node events the receiver handles but ncindex no longer registers. A copy sends the
#: target's ``NodeCreatedEvent`` (or ``NodeWrittenEvent`` alone over an existing file) and
#: ``NodeWrittenEvent`` besides ``NodeCopiedEvent``, under the same condition (nextcloud/server
#: ``lib/private/Files/View.php`` ``copy``: the ``post_copy`` hook, then
#: ``emit_file_hooks_post``, both under ``shouldEmitHooks()``; ``lib/private/Files/Node/
#: HookConnector.php`` ``postCopy``/``postCreate``/``postWrite``), so ``NodeCopiedEvent``
#: cost one more delivery and task look-up per copy for nothing. ``webhooks register`` deletes
#: a registration of it made before (:func:`ncindex.ingest.registration.register`); its
#: deliveries already queued are still planned as the target's re-read (:data:`REREAD`).
NOT_SUBSCRIBED = frozenset({"NodeCopiedEvent"})
#: File and tag event classes ncindex registers with webhook_listeners (one registration each).
SUBSCRIBED = (
    *(
        NODE_NS + name
        for name in sorted(SINGLE_NODE | TWO_NODE - {"NodeRestoredEvent"} - NOT_SUBSCRIBED)
    ),
    NODE_RESTORED,
    *TAG_EVENTS,
)
#: Classes the index cannot work without: without them new, edited, deleted and moved files
#: reach the index only at the next scan, which is no longer a safety net but the only path.
REQUIRED = tuple(
    NODE_NS + name
    for name in (
        "NodeCreatedEvent",
        "NodeWrittenEvent",
        "BeforeNodeDeletedEvent",
        "NodeDeletedEvent",
        "NodeRenamedEvent",
    )
)
#: What is lost without an optional class (``ncindex webhooks register`` and ``ncindex up``
#: print it for each class Nextcloud refuses, ``ncindex doctor`` for each not registered);
#: :func:`cost_without` adds the Nextcloud version a class needs (:data:`SINCE_NEXTCLOUD`).
COST_WITHOUT = {
    NODE_NS + "NodeTouchedEvent": "restored file versions are found by the scan only",
    NODE_RESTORED: "files restored from the trash are found by the scan only",
    TAG_ASSIGNED: "tag changes are found by the scan only",
    TAG_UNASSIGNED: "tag changes are found by the scan only",
    **{cls: route.cost_without for cls, (_, route) in DOCUMENT_EVENTS.items()},
}
#: The Nextcloud major version from which a subscribed class exists, for those newer than the
#: oldest supported server (30): nextcloud/server ``lib/public/SystemTag/TagAssignedEvent.php``
#: and ``TagUnassignedEvent.php`` are ``@since 32.0.0`` (``IWebhookCompatibleEvent``), and an
#: older server refuses to register them (``WebhookListenerMapper::addWebhookListener``).
SINCE_NEXTCLOUD = {TAG_ASSIGNED: 32, TAG_UNASSIGNED: 32}


def missing_from(event_class: str, server_major: int | None) -> int | None:
    """The Nextcloud major version ``event_class`` needs (:data:`SINCE_NEXTCLOUD`) when a
    server of major version ``server_major`` may lack it (older, or ``None``: not known);
    ``None`` when that server has the class."""
    since = SINCE_NEXTCLOUD.get(event_class)
    if since is None or (server_major is not None and server_major >= since):
        return None
    return since


def cost_without(event_class: str, server_major: int | None = None) -> str:
    """What is lost without the optional ``event_class`` (:data:`COST_WITHOUT`), and when a
    server of major version ``server_major`` (``None``: not known, as when Nextcloud refused
    the class) may lack it, the version it needs: ``"tag changes are found by the scan only
    (the event needs Nextcloud 32)"``."""
    cost = COST_WITHOUT.get(event_class, "found by the scan only")
    since = missing_from(event_class, server_major)
    return cost if since is None else f"{cost} (the event needs Nextcloud {since})"


_MAX_PATH = 4096
#: A path in a user's ``files/`` view, matched whole (``fullmatch``, ``DOTALL``): a trailing
#: newline is part of the path, as sent, not dropped the way ``$`` would drop it.
_FILES_PATH = re.compile(r"/(?P<user>[^/]+)/files(?P<path>/.*)?", re.DOTALL)
_ID_RULE = "integers or strings of ASCII digits, 0..2**63-1"


def check_nextcloud_path(path: str) -> str:
    """``path`` when Nextcloud could have sent it; raises ``ValueError`` for a NUL byte or a
    ``.`` or ``..`` segment, which Nextcloud refuses itself (nextcloud/server
    ``lib/private/Files/Filesystem.php`` ``isValidPath``: no ``/../``; no NUL)."""
    if "\x00" in path or has_dot_segment(path):
        raise ValueError("must be a Nextcloud path: no NUL byte, no . or .. segment")
    return path


#: The id Nextcloud sends for a node without a file-cache row: a client's ``.part`` upload
#: (nextcloud/server ``lib/private/Files/FileInfo.php`` ``getId``: "null in case of part file";
#: ``lib/private/Files/Node/Node.php`` ``getId``: ``?? -1``).
NO_CACHE_ROW = -1


class NodeRef(BaseModel):
    """A node descriptor: ``id`` (absent for nodes that no longer exist, ``None`` too for
    :data:`NO_CACHE_ROW`) and absolute VFS path."""

    model_config = ConfigDict(extra="allow")

    id: StrictInt | None = Field(None, ge=NO_CACHE_ROW, le=MAX_ID)  # a 64-bit file id
    path: str = Field(min_length=1, max_length=_MAX_PATH)

    @field_validator("id")
    @classmethod
    def _cached_or_none(cls, value: int | None) -> int | None:
        return None if value == NO_CACHE_ROW else value

    @field_validator("path")
    @classmethod
    def _a_nextcloud_path(cls, value: str) -> str:
        return check_nextcloud_path(value)


class EventUser(BaseModel):
    """The session user that triggered the event."""

    model_config = ConfigDict(extra="allow")

    uid: str = Field(min_length=1, max_length=256)
    displayName: str | None = None


class EventBody(BaseModel):
    """The ``event`` object: its ``class`` plus the class's payload keys."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    event_class: str = Field(alias="class", min_length=1, max_length=512)
    node: NodeRef | None = None
    source: NodeRef | None = None
    target: NodeRef | None = None


class Envelope(BaseModel):
    """A webhook_listeners delivery: ``event``, ``user`` (may be null) and ``time`` (Unix s)."""

    model_config = ConfigDict(extra="allow")

    event: EventBody
    user: EventUser | None
    time: StrictInt = Field(ge=0, le=MAX_ID)  # PHP time(): never a string or a boolean


def parse_envelope(raw: Any) -> Envelope:
    """Validate a decoded JSON body; raises :class:`EnvelopeError` naming the first bad field.

    Beyond the shape, a file event must carry the nodes its class has (``node`` or
    ``source`` + ``target``), a tag event on files its ``objectIds`` and a source's event its
    document id (Deck: ``card.id``); ids are ints or ASCII digit strings in ``0..MAX_ID``
    (field ``event.objectIds`` / ``event.card.id`` otherwise). A tag event on another object
    type is not looked into: its ids are whatever that type's are (``list<string>``:
    nextcloud/server ``lib/public/SystemTag/TagAssignedEvent.php``; an app adds object types
    with ``SystemTagsEntityEvent::addEntityCollection``), and it is ignored.
    """
    if not isinstance(raw, dict):
        raise EnvelopeError("body", "must be a JSON object")
    try:
        envelope = Envelope.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise EnvelopeError(
            ".".join(str(p) for p in first["loc"]) or "body", first["msg"]
        ) from None
    name = short_class(envelope.event.event_class)
    extra = envelope.event.model_extra or {}
    if name in TAG_EVENTS and extra.get("objectType") == "files":
        ids = extra.get("objectIds")
        if not isinstance(ids, list) or not all(is_id(i) for i in ids):
            raise EnvelopeError("event.objectIds", f"must be a list of ids ({_ID_RULE})")
    if name in DOCUMENT_EVENTS:
        _, route = DOCUMENT_EVENTS[name]
        if not is_id(route.id_in(extra)):
            raise EnvelopeError(route.id_field, f"required for {name} ({_ID_RULE})")
    if name in SINGLE_NODE and envelope.event.node is None:
        raise EnvelopeError("event.node", f"required for {name}")
    if name in TWO_NODE:
        for key in ("source", "target"):
            if getattr(envelope.event, key) is None:
                raise EnvelopeError(f"event.{key}", f"required for {name}")
    return envelope


def short_class(event_class: str) -> str:
    """``"OCP\\\\Files\\\\Events\\\\Node\\\\NodeWrittenEvent"`` → ``"NodeWrittenEvent"`` for the
    node events ncindex handles (the trash restore is files_trashbin's class); any other class
    is returned unchanged, so an unknown one (or ``OCP\\…\\NodeRestoredEvent``, which does not
    exist) is ignored as ``event_class``."""
    cls = event_class.lstrip("\\")
    return _SHORT_NAMES.get(cls, cls)


def split_vfs_path(vfs_path: str) -> tuple[str, str] | None:
    """``"/alice/files/Notes/a.md"`` → ``("alice", "/Notes/a.md")``; ``None`` outside ``files/``."""
    match = _FILES_PATH.fullmatch(vfs_path)
    if not match:
        return None
    return match["user"], normalize_path(match["path"] or "/")


@dataclass(frozen=True, slots=True)
class Action:
    """One task to enqueue: Celery task name, queue, keyword arguments, and the debounce key
    that coalesces repeats within the debounce window (``None``: never coalesced)."""

    task: str
    queue: str  # one of names.QUEUES
    kwargs: dict[str, Any]
    debounce_key: str | None = None


@dataclass(slots=True)
class Plan:
    """What an envelope asks for: actions to enqueue, or the reason it asks for nothing.
    ``resolving`` says why its nodes are resolved by id (:func:`resolve_node`: indexed only
    for the configured accounts that can see them) rather than read as the event's user:
    ``no_user`` or ``unknown_user``, as ``ignored`` names them."""

    actions: list[Action] = field(default_factory=list)
    ignored: str | None = None
    resolving: str | None = None


def index_node(user: str, file_id: int) -> Action:
    """Re-read file ``file_id`` as ``user`` and index it (or evict it if gone)."""
    return Action(
        names.INDEX_NODE, names.INDEX, {"user": user, "file_id": file_id}, f"index:{user}:{file_id}"
    )


def evict_node(user: str, path: str, file_id: int | None) -> Action:
    """Something at ``path`` (a file or a folder) was deleted in ``user``'s view."""
    key = f"evict:{user}:{file_id if file_id is not None else path}"
    return Action(
        names.EVICT_NODE, names.EVICT, {"user": user, "path": path, "file_id": file_id}, key
    )


def index_folder(user: str, folders: list[str]) -> Action:
    """Index what lies below ``folders`` (paths in ``user``'s view): a folder created, copied,
    restored or moved into view fires one event, for the folder only."""
    key = f"folder:{user}:{folders[0]}" if len(folders) == 1 else None
    return Action(names.INDEX_FOLDER, names.INGEST, {"user": user, "folders": folders}, key)


def resolve_node(
    file_id: int, among: Sequence[str] | None = None, folder: tuple[str, str] | None = None
) -> Action:
    """Index ``file_id`` for every configured account that can see it (an event whose session
    user is missing or not configured: nobody to read it as, so each account is asked), or
    for those of ``among`` that can (the accounts that may see a new document too:
    :attr:`~ncindex.index.steps.Outcome.viewers`). ``folder`` — ``(user, path)``: the node
    is a folder at ``path`` in ``user``'s view — lets the accounts of ``among`` that do not
    see it lose what they held below it."""
    kwargs: dict[str, Any] = {"file_id": file_id}
    key = f"resolve:{file_id}"
    if among is not None:
        kwargs["among"] = list(among)
        key += ":" + ",".join(among)
    if folder is not None:
        kwargs["folder"] = list(folder)
        key += ":" + ":".join(folder)
    return Action(names.RESOLVE_NODE, names.INGEST, kwargs, key)


def move_path(user: str, source: str, target: str, file_id: int | None) -> Action:
    """A file or folder moved from ``source`` to ``target`` in ``user``'s view."""
    return Action(
        names.MOVE_PATH,
        names.INGEST,
        {"user": user, "source": source, "target": target, "file_id": file_id},
    )


def index_document(user: str, doc_type: str, doc_id: int) -> Action:
    """Re-read document ``doc_type``/``doc_id`` as ``user`` and index it (or evict it)."""
    return Action(
        names.INDEX_DOCUMENT,
        names.INDEX,
        {"user": user, "doc_type": doc_type, "doc_id": doc_id},
        f"index:{user}:{doc_type}:{doc_id}",
    )


def evict_document(user: str, doc_type: str, doc_id: int) -> Action:
    """``user`` deleted document ``doc_type``/``doc_id`` (re-checked before evicting)."""
    return Action(
        names.EVICT_DOCUMENT,
        names.EVICT,
        {"user": user, "doc_type": doc_type, "doc_id": doc_id},
        f"evict:{user}:{doc_type}:{doc_id}",
    )


def index_related(user: str, doc_type: str, field: str, value: int) -> Action:
    """Re-read, as ``user``, every indexed document of ``doc_type`` whose payload ``field``
    is ``value`` (a Deck board shared or unshared: its cards, by ``board_id``)."""
    return Action(
        names.INDEX_RELATED,
        names.INGEST,
        {"user": user, "doc_type": doc_type, "field": field, "value": value},
        f"related:{user}:{doc_type}:{field}:{value}",
    )


def reindex_action(user: str, doc_type: DocType | str, doc_id: str | int) -> Action:
    """The task that brings document ``doc_type``/``doc_id`` of ``user`` in line (it re-reads
    Nextcloud): ``ncindex.index_node`` for a file or note (by file id), else
    ``ncindex.index_document``."""
    kind = DocType(doc_type)
    if SOURCES[kind].node:
        return index_node(user, int(doc_id))
    return index_document(user, kind.value, int(doc_id))


def _acting_user(envelope: Envelope, accounts: Container[str]) -> tuple[str | None, str | None]:
    """``(uid, None)`` for the envelope's configured session user, else ``(None, reason)``."""
    if envelope.user is None:
        return None, "no_user"
    if envelope.user.uid not in accounts:
        return None, "unknown_user"
    return envelope.user.uid, None


def plan_envelope(envelope: Envelope, accounts: Container[str]) -> Plan:
    """Map a valid envelope to the tasks it asks for (DESIGN §5).

    Created/Written/Touched/Copied(target)/Restored(target) ⇒ index (a restored target without an
    id, as Nextcloud 30 sends it, ⇒ index what lies at its path); BeforeNodeDeleted and
    NodeDeleted ⇒ evict (by id when present, else by path); Renamed ⇒ move.
    TagAssigned/TagUnassigned on ``files`` ⇒ index each object id (eligibility and ``tags``
    may change) as the envelope's ``user.uid``; a source's event (Deck
    CardCreated/CardUpdated/CardDeleted) ⇒ index, or evict, the document it names, as
    ``user.uid``; one naming what documents share (Deck AclCreated/AclDeleted: a board) ⇒
    ``ncindex.index_related`` for them, as ``user.uid``, or, when that is not a configured
    account, as the user the event names as a reader (the ACL entry's participant) if it is.

    Without a configured user to read it as — a tag event with ``"user": null`` (occ, cron,
    a workflow rule, an admin) or by an unconfigured user, a file event in the view of an
    unconfigured user (its owner, say, editing what a configured account sees through a
    share) — a node with an id is resolved: ``ncindex.resolve_node`` indexes it for each
    configured account that can see it, and takes it from those the index has it for that
    no longer do. So is a delete or a move there (the owner deleting a file of a folder
    shared with a configured account, or moving it out): Nextcloud dispatches it once, in
    the actor's view (nextcloud/server ``lib/private/Files/Node/HookConnector.php``
    ``delete``/``postRename``, the node of ``Filesystem::getView()``), and
    ``BeforeNodeDeletedEvent`` names the node's id (``getNodeForPath`` while it exists).
    What cannot be resolved is ignored with a reason.

    A plan has actions or an ``ignored`` reason, never neither: ``event_class``,
    ``tag_object_type``, ``no_user`` (a card event without a user), ``unknown_user``,
    ``no_objects``, ``path_outside_files``, ``node_without_id`` (a node to index by id came
    without one, e.g. a rename into ``files/`` from the trash bin or from another user's view).
    """
    event = envelope.event
    name = short_class(event.event_class)
    extra = event.model_extra or {}
    if name in TAG_EVENTS:
        if extra.get("objectType") != "files":
            return Plan(ignored="tag_object_type")
        ids = sorted({int(i) for i in extra["objectIds"]})
        if not ids:
            return Plan(ignored="no_objects")
        user, reason = _acting_user(envelope, accounts)
        if user is None:
            return Plan([resolve_node(i) for i in ids], resolving=reason)
        return Plan([index_node(user, i) for i in ids])
    if name in DOCUMENT_EVENTS:
        user, reason = _acting_user(envelope, accounts)
        named, route = DOCUMENT_EVENTS[name]
        if user is None and route.reader is not None:
            reader = route.reader(extra)  # a board shared by an unconfigured user, say
            user = reader if reader is not None and reader in accounts else None
        if user is None:
            return Plan(ignored=reason)
        doc_id = int(route.id_in(extra))
        if route.field is not None:
            return Plan([index_related(user, named.doc_type.value, route.field, doc_id)])
        act = evict_document if route.evict else index_document
        return Plan([act(user, named.doc_type.value, doc_id)])
    if name not in SINGLE_NODE | TWO_NODE:
        return Plan(ignored="event_class")
    node = event.node if name in SINGLE_NODE else event.target
    assert node is not None  # guaranteed by parse_envelope
    located = split_vfs_path(node.path)
    if located is None:
        return Plan(ignored="path_outside_files")
    user, path = located
    deleted = name in ("BeforeNodeDeletedEvent", "NodeDeletedEvent")
    if user not in accounts:
        if deleted and node.id is None:
            return Plan(ignored="unknown_user")  # gone, and nothing names it for the others
        # a delete too: the configured accounts holding the node that no longer see it
        # lose it (ncindex.resolve_node), as nothing else tells them
        if node.id is None:
            return _no_id()
        return Plan([resolve_node(node.id)], resolving="unknown_user")
    if name == "NodeRestoredEvent" and node.id is None:
        # Nextcloud 30 names no restored node (Trashbin::getNodeForPath looked the target up
        # in the trash folder, nextcloud/server#53752): index what now lies at its path
        return Plan([index_folder(user, [path])])
    if name in REREAD:
        return Plan([index_node(user, node.id)]) if node.id is not None else _no_id()
    if deleted:
        return Plan([evict_node(user, path, node.id)])
    # NodeRenamedEvent: the source usually has no id (it no longer exists).
    assert event.source is not None
    source = split_vfs_path(event.source.path)
    if source is None or source[0] != user:
        # moved in from outside this user's files/: index the target, which needs its id
        return Plan([index_node(user, node.id)]) if node.id is not None else _no_id()
    return Plan([move_path(user, source[1], path, node.id)])


def _no_id() -> Plan:
    return Plan(ignored="node_without_id")
