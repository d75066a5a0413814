"""Deck: boards, stacks and cards with the REST API ``/index.php/apps/deck/api/v1.0`` (§4).

Formats follow Deck's entities: missing or inaccessible entities answer 403
``{"status":403,"message":"Permission denied"}`` (never 404), a soft-deleted card 403
``{"status":403,"message":"Card is deleted"}``; a stack's ``cards`` key is omitted when it has
no (matching) cards; ``ETag`` = md5 of ``lastModified``; ``If-Modified-Since`` filters boards
(``lastModified > since``) and the cards of ``/stacks``. Card, board-share (ACL) and board
events are dispatched only when the simulator runs with ``deck_webhooks=True`` (Deck ≥ 1.18).
"""

from __future__ import annotations

import email.utils
import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from ncindex.simulator.events import (
    ACL_CREATED,
    ACL_DELETED,
    ACL_UPDATED,
    BOARD_UPDATED,
    CARD_CREATED,
    CARD_DELETED,
    CARD_UPDATED,
)
from ncindex.simulator.phpjson import php_json_encode
from ncindex.simulator.responses import json_response, not_modified, request_params
from ncindex.simulator.routing import Routes

if TYPE_CHECKING:
    from ncindex.simulator.simulator import NextcloudSimulator

__all__ = ["DeckApi", "DeckError", "DeckState"]

#: Deck's ``index.php`` routes below ``/apps/deck/api`` (:class:`~ncindex.simulator.routing.
#: Routes`): nextcloud/deck ``appinfo/routes.php`` ``routes`` (b0f6943c, August 2026; its
#: ``ocs`` ones are under ``ocs/v2.php``) — of the app's other routes only
#: ``/{boardId}/stacks/deleted`` and ``/{boardId}/cards/deleted`` can match a path below
#: ``/api``, none of these. The ``OPTIONS`` one is ``preflighted_cors``.
_BOARD = "/api/v{apiVersion}/boards/{boardId}"
_CARD = _BOARD + "/stacks/{stackId}/cards/{cardId}"
_V10, _V11 = {"apiVersion": "1.0"}, {"apiVersion": "1.1"}
DECK_ROUTES = Routes(
    (
        ("GET", "/api/v{apiVersion}/boards", {}),
        ("POST", "/api/v{apiVersion}/boards", {}),
        ("GET", _BOARD, {}),
        ("DELETE", _BOARD, {}),
        ("PUT", _BOARD, {}),
        ("POST", _BOARD + "/undo_delete", {}),
        ("POST", _BOARD + "/acl", {}),
        ("DELETE", _BOARD + "/acl/{aclId}", {}),
        ("PUT", _BOARD + "/acl/{aclId}", {}),
        ("POST", _BOARD + "/clone", {}),
        ("GET", "/api/v{apiVersion}/boards/import/getSystems", {}),
        ("GET", "/api/v{apiVersion}/boards/import/config/schema/{name}", {}),
        ("POST", "/api/v{apiVersion}/boards/import", {}),
        ("GET", _BOARD + "/stacks", {}),
        ("GET", _BOARD + "/stacks/archived", {}),
        ("GET", _BOARD + "/stacks/{stackId}", {}),
        ("POST", _BOARD + "/stacks", {}),
        ("PUT", _BOARD + "/stacks/{stackId}", {}),
        ("DELETE", _BOARD + "/stacks/{stackId}", {}),
        ("GET", _CARD, {}),
        ("POST", _BOARD + "/stacks/{stackId}/cards", {}),
        ("PUT", _CARD, {}),
        ("PUT", _CARD + "/assignLabel", {}),
        ("PUT", _CARD + "/removeLabel", {}),
        ("PUT", _CARD + "/assignUser", {}),
        ("PUT", _CARD + "/unassignUser", {}),
        ("PUT", _CARD + "/reorder", {}),
        ("POST", _CARD + "/dependentCards/{dependentCardId}", {}),
        ("DELETE", _CARD + "/dependentCards/{dependentCardId}", {}),
        ("PUT", _CARD + "/archive", {}),
        ("PUT", _CARD + "/unarchive", {}),
        ("DELETE", _CARD, {}),
        ("GET", "/api/v{apiVersion}/dashboard/due", {}),
        ("GET", _BOARD + "/labels/{labelId}", {}),
        ("POST", _BOARD + "/labels", {}),
        ("PUT", _BOARD + "/labels/{labelId}", {}),
        ("DELETE", _BOARD + "/labels/{labelId}", {}),
        ("GET", _CARD + "/attachments", _V10),
        ("GET", _CARD + "/attachments/{attachmentId}", _V10),
        ("POST", _CARD + "/attachments", _V10),
        ("PUT", _CARD + "/attachments/{attachmentId}", _V10),
        ("DELETE", _CARD + "/attachments/{attachmentId}", _V10),
        ("PUT", _CARD + "/attachments/{attachmentId}/restore", _V10),
        ("GET", _CARD + "/attachments", _V11),
        ("GET", _CARD + "/attachments/{type}/{attachmentId}", _V11),
        ("POST", _CARD + "/attachments", _V11),
        ("PUT", _CARD + "/attachments/{type}/{attachmentId}", _V11),
        ("DELETE", _CARD + "/attachments/{type}/{attachmentId}", _V11),
        ("PUT", _CARD + "/attachments/{type}/{attachmentId}/restore", _V11),
        ("OPTIONS", "/api/v{apiVersion}/{path}", {"path": ".+"}),
    )
)
DEFAULT_LABELS = (
    ("Finished", "31CC7C"),
    ("To review", "317CCC"),
    ("Action needed", "FF7A66"),
    ("Later", "F1DB50"),
)


class DeckError(Exception):
    """A Deck ``StatusException``: ``status`` and ``message`` as in the JSON error body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def _iso(ts: int | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")


ACL_USER, ACL_GROUP = 0, 1
"""``Acl::PERMISSION_TYPE_USER`` and ``PERMISSION_TYPE_GROUP``."""


@dataclass
class Acl:
    """A board share with a user (``type`` 0) or a group (1, ``participant`` its gid)."""

    id: int
    participant: str
    permission_edit: bool = True
    permission_share: bool = False
    permission_manage: bool = False
    type: int = ACL_USER


@dataclass
class Card:
    """A card; times are Unix seconds (``duedate``/``done`` too, None when unset)."""

    id: int
    title: str
    stack_id: int
    owner: str
    created_at: int
    last_modified: int
    description: str = ""
    order: int = 0
    archived: bool = False
    done: int | None = None
    duedate: int | None = None
    deleted_at: int = 0
    last_editor: str | None = None


@dataclass
class Stack:
    """A stack (column) of a board."""

    id: int
    board_id: int
    title: str
    order: int = 0
    last_modified: int = 0
    deleted_at: int = 0


@dataclass
class Board:
    """A board owned by ``owner``; shared through ``acl``."""

    id: int
    title: str
    owner: str
    color: str = "0082c9"
    archived: bool = False
    deleted_at: int = 0
    last_modified: int = 0
    acl: list[Acl] = field(default_factory=list)
    labels: list[dict[str, Any]] = field(default_factory=list)


class DeckState:
    """All boards, stacks and cards, with Deck's access rules and serialisation."""

    def __init__(self, sim: NextcloudSimulator) -> None:
        self.sim = sim
        self.boards: dict[int, Board] = {}
        self.stacks: dict[int, Stack] = {}
        self.cards: dict[int, Card] = {}
        self._ids = {"board": 1, "stack": 1, "card": 1, "acl": 1, "label": 1}
        #: group id → its members (the groups a board can be shared with)
        self.groups: dict[str, set[str]] = {}

    def _next(self, kind: str) -> int:
        value = self._ids[kind]
        self._ids[kind] = value + 1
        return value

    def now(self) -> int:
        """Current Unix seconds."""
        return self.sim.tree.now()

    # ------------------------------------------------------------------ access

    def permissions(self, uid: str, board: Board) -> dict[str, bool] | None:
        """``PERMISSION_*`` flags of ``uid`` on ``board``; None when no access.

        As nextcloud/deck ``lib/Service/PermissionService.php`` ``userCan``: the user's own
        ACL entry decides when there is one, else any group entry of a group the user is in
        grants what it grants."""
        if board.owner == uid:
            return {k: True for k in ("READ", "EDIT", "MANAGE", "SHARE")}

        def flags(acl: Acl) -> dict[str, bool]:
            return {
                "READ": True,
                "EDIT": acl.permission_edit,
                "MANAGE": acl.permission_manage,
                "SHARE": acl.permission_share,
            }

        for acl in board.acl:
            if acl.type == ACL_USER and acl.participant == uid:
                return flags(acl)
        granted = [
            flags(a)
            for a in board.acl
            if a.type == ACL_GROUP and uid in self.groups.get(a.participant, set())
        ]
        if not granted:
            return None
        return {k: any(g[k] for g in granted) for k in granted[0]}

    def board_users(self, board: Board) -> list[str]:
        """Who may see ``board``, in ``PermissionService::findUsers`` order: the owner, then
        per ACL entry its user or its group's members (once each)."""
        users = [board.owner]
        for acl in board.acl:
            members = (
                [acl.participant]
                if acl.type == ACL_USER
                else sorted(self.groups.get(acl.participant, set()))
            )
            users += [u for u in members if u not in users]
        return users

    def board_for(
        self, uid: str, board_id: int, perm: str = "READ", *, allow_deleted: bool = False
    ) -> Board:
        """The board if ``uid`` has ``perm`` on it, else 403 Permission denied.

        A soft-deleted board counts as missing unless ``allow_deleted``: nextcloud/deck
        ``lib/Service/PermissionService.php`` ``getPermissions`` loads the board with
        ``BoardMapper::find(..., $allowDeleted = false)`` (``deleted_at = 0``), whose
        ``DoesNotExistException`` ``ExceptionMiddleware::afterException`` answers 403
        "Permission denied" — so the stacks and cards of a deleted board answer 403 too."""
        board = self.boards.get(board_id)
        perms = None if board is None else self.permissions(uid, board)
        if board is None or perms is None or not perms[perm]:
            raise DeckError(403, "Permission denied")
        if board.deleted_at and not allow_deleted:
            raise DeckError(403, "Permission denied")
        return board

    def stack_for(self, uid: str, stack_id: int, perm: str = "READ") -> Stack:
        """The stack if its board grants ``perm`` to ``uid``, else 403."""
        stack = self.stacks.get(stack_id)
        if stack is None:
            raise DeckError(403, "Permission denied")
        self.board_for(uid, stack.board_id, perm)
        return stack

    def card_for(self, uid: str, card_id: int, perm: str = "READ") -> Card:
        """The card if its board grants ``perm``; 403 Permission denied / Card is deleted."""
        card = self.cards.get(card_id)
        if card is None:
            raise DeckError(403, "Permission denied")
        self.stack_for(uid, card.stack_id, perm)
        if card.deleted_at:
            raise DeckError(403, "Card is deleted")
        return card

    # ------------------------------------------------------------------ JSON

    def _user(self, uid: str) -> dict[str, Any]:
        user = self.sim.tree.users.get(uid)
        return {"primaryKey": uid, "uid": uid, "displayname": user.display_name if user else uid}

    def card_entity_json(self, card: Card, *, resolved: bool = True) -> dict[str, Any]:
        """The card entity as nextcloud/deck ``lib/Db/RelationalEntity.php`` ``jsonSerialize``
        writes it (Deck 1.18 fields, in ``lib/Db/Card.php`` declaration order): what a card
        event carries (``ACardEvent::getWebhookSerializable``). ``resolved`` is a card read
        by ``CardMapper::find`` (its ``mapOwner`` puts the owner as a user object, its labels
        are read), as ``CardService::update``/``delete`` dispatch it; a new card
        (``CardService::create``: the inserted entity) has the owner's uid and ``null``
        labels."""
        return {
            "id": card.id,
            "title": card.title,
            "description": card.description,
            "color": None,
            "descriptionPrev": None,
            "stackId": card.stack_id,
            "type": "plain",
            "lastModified": card.last_modified,
            "lastEditor": card.last_editor,
            "createdAt": card.created_at,
            "labels": [] if resolved else None,
            "assignedUsers": None,
            "attachments": [],
            "attachmentCount": 0,
            "owner": self._user(card.owner) | {"type": 0} if resolved else card.owner,
            "order": card.order,
            "archived": card.archived,
            "done": _iso(card.done),
            "duedate": _iso(card.duedate),
            "startdate": None,
            "notified": False,
            "deletedAt": card.deleted_at,
            "commentsUnread": 0,
            "commentsCount": 0,
            "dependentCards": None,
            "relatedStack": None,
            "relatedBoard": None,
            "ETag": _md5(str(card.last_modified)),
        }

    def card_json(self, card: Card, *, owner_object: bool = True) -> dict[str, Any]:
        """A card as the REST API answers it (card GET, the cards of ``GET …/stacks``, create
        and update): nextcloud/deck ``lib/Model/CardDetails.php`` ``jsonSerialize`` of the
        card ``CardService::enrichCards`` returns — the entity without ``notified``,
        ``descriptionPrev``, ``relatedStack`` and ``relatedBoard``, then ``overdue``
        (``getDueStatus``) and ``referenceData``; ``enrichCards`` sets the labels, the
        assigned users and the dependent cards and resolves the owner to a user object.
        ``owner_object=False`` is ``StackService::find`` (one stack's GET), whose cards are
        not enriched: the owner stays a uid."""
        data = self.card_entity_json(card)
        for key in ("notified", "descriptionPrev", "relatedStack", "relatedBoard"):
            del data[key]
        data["assignedUsers"] = []
        data["dependentCards"] = []
        if not owner_object:
            data["owner"] = card.owner
        data["overdue"] = self._due_status(card.duedate)
        data["referenceData"] = None
        return data

    def _due_status(self, duedate: int | None) -> int:
        """``Card::getDueStatus`` (``CardDetails``): 0 no due date or due in more than a
        day, 1 due tomorrow, 2 due today, 3 overdue — whole days between today's and the
        due date's midnights (``getDaysUntilDue``; UTC here)."""
        if duedate is None:
            return 0
        today = datetime.fromtimestamp(self.now(), UTC).date()
        days = (datetime.fromtimestamp(duedate, UTC).date() - today).days
        if days > 1:
            return 0
        return {1: 1, 0: 2}.get(days, 3)

    def stack_json(self, stack: Stack, cards: list[Card] | None, **card: bool) -> dict[str, Any]:
        """Stack JSON in ``lib/Db/Stack.php`` field order; ``Stack::jsonSerialize`` drops the
        ``cards`` key when ``cards`` is empty or None; ``card`` goes to :meth:`card_json`."""
        out: dict[str, Any] = {
            "id": stack.id,
            "title": stack.title,
            "boardId": stack.board_id,
            "deletedAt": stack.deleted_at,
            "lastModified": stack.last_modified,
        }
        if cards:
            out["cards"] = [self.card_json(c, **card) for c in cards]
        out["order"] = stack.order
        out["isDoneColumn"] = False
        out["ETag"] = _md5(str(stack.last_modified))
        return out

    def live_stacks(self, board: Board) -> list[Stack]:
        """The stacks of ``board`` that are not deleted (``StackMapper::findAll``:
        ``deleted_at = 0``), by (order, id)."""
        return sorted(
            (s for s in self.stacks.values() if s.board_id == board.id and not s.deleted_at),
            key=lambda s: (s.order, s.id),
        )

    def acl_json(self, acl: Acl, board: Board) -> dict[str, Any]:
        """One ACL entry: nextcloud/deck ``lib/Db/Acl.php`` ``jsonSerialize`` (its fields in
        declaration order, ``token`` removed; the participant resolved to a user object by
        ``BoardMapper::mapAcl``)."""
        if acl.type == ACL_GROUP:  # lib/Db/Group.php getObjectSerialization
            participant = {
                "primaryKey": acl.participant,
                "uid": acl.participant,
                "displayname": acl.participant,
                "type": ACL_GROUP,
            }
        else:
            participant = self._user(acl.participant) | {"type": ACL_USER}
        return {
            "id": acl.id,
            "participant": participant,
            "type": acl.type,
            "boardId": board.id,
            "permissionEdit": acl.permission_edit,
            "permissionShare": acl.permission_share,
            "permissionManage": acl.permission_manage,
            "owner": False,
            "createdAt": 0,
            "lastModifiedAt": 0,
        }

    def board_json(self, uid: str, board: Board, details: bool = True) -> dict[str, Any]:
        """Board JSON for ``uid`` (``acl`` and ``labels`` always present). With ``details``
        (a board's GET; ``GET /boards?details=true``) ``stacks`` lists its live stacks
        without cards: nextcloud/deck ``lib/Service/BoardService.php`` ``enrichBoards`` →
        ``enrichWithStacks`` (``StackMapper::findAll``, ``deleted_at = 0``). ``acl`` is there
        either way (``BoardMapper::findAllForUser`` sets it, ``enrichBoards`` maps it before it
        looks at the details)."""
        perms = self.permissions(uid, board) or {}
        # BoardService::enrichWithUsers: PermissionService::findUsers, group members included
        users = [self._user(u) | {"type": ACL_USER} for u in self.board_users(board)]
        return {
            "id": board.id,
            "title": board.title,
            "owner": self._user(board.owner),
            "color": board.color,
            "archived": board.archived,
            "labels": board.labels,
            "acl": [self.acl_json(a, board) for a in board.acl],
            "permissions": {f"PERMISSION_{k}": v for k, v in perms.items()},
            "users": users if details else [],
            "shared": 0 if board.owner == uid else 1,
            "stacks": [self.stack_json(s, None) for s in self.live_stacks(board) if details],
            "activeSessions": [],
            "deletedAt": board.deleted_at,
            "lastModified": board.last_modified,
            "settings": [],
            "ETag": _md5(str(board.last_modified)),
        }

    # ------------------------------------------------------------------ mutations

    def _touch(self, stack: Stack | None = None, board: Board | None = None) -> None:
        now = self.now()
        if stack is not None:
            stack.last_modified = now
            board = board or self.boards.get(stack.board_id)
        if board is not None:
            board.last_modified = now

    def _card_event(self, event_class: str, card: Card, actor: str) -> None:
        if self.sim.deck_webhooks:
            resolved = event_class != CARD_CREATED  # see card_entity_json
            payload = {"card": self.card_entity_json(card, resolved=resolved)}
            self.sim._dispatch(event_class, payload, actor)

    def create_board(self, uid: str, title: str, color: str = "0082c9") -> Board:
        """A new board with Deck's four default labels."""
        if not title:
            raise DeckError(400, "title must be provided")
        board = Board(self._next("board"), title, uid, color, last_modified=self.now())
        for label_title, label_color in DEFAULT_LABELS:
            board.labels.append(
                {
                    "title": label_title,
                    "color": label_color,
                    "boardId": board.id,
                    "cardId": None,
                    "lastModified": 0,
                    "id": self._next("label"),
                    "ETag": _md5("0"),
                }
            )
        self.boards[board.id] = board
        return board

    def create_stack(self, uid: str, board_id: int, title: str, order: int = 0) -> Stack:
        """A new stack (needs EDIT on the board)."""
        board = self.board_for(uid, board_id, "EDIT")
        if not title:
            raise DeckError(400, "title must be provided")
        stack = Stack(self._next("stack"), board.id, title, order, self.now())
        self.stacks[stack.id] = stack
        self._touch(board=board)
        return stack

    def create_card(
        self,
        uid: str,
        stack_id: int,
        title: str,
        *,
        description: str = "",
        order: int = 0,
        duedate: int | None = None,
    ) -> Card:
        """A new card (CardCreatedEvent with deck webhooks)."""
        stack = self.stack_for(uid, stack_id, "EDIT")
        if not title:
            raise DeckError(400, "title must be provided")
        now = self.now()
        card = Card(
            self._next("card"),
            title[:255],
            stack.id,
            uid,
            now,
            now,
            description=description,
            order=order,
            duedate=duedate,
            last_editor=uid,
        )
        self.cards[card.id] = card
        self._touch(stack)
        self._card_event(CARD_CREATED, card, uid)
        return card

    def update_card(self, uid: str, card_id: int, **fields: Any) -> Card:
        """Update card fields (``title description order duedate archived done stack_id``)."""
        card = self.card_for(uid, card_id, "EDIT")
        for key, value in fields.items():
            if key == "stack_id":
                self.stack_for(uid, int(value), "EDIT")
            if not hasattr(card, key):
                raise TypeError(f"unknown card field {key}")
            setattr(card, key, value)
        card.last_modified = self.now()
        card.last_editor = uid
        self._touch(self.stacks[card.stack_id])
        self._card_event(CARD_UPDATED, card, uid)
        return card

    def delete_card(self, uid: str, card_id: int) -> Card:
        """Soft-delete a card (``deletedAt`` set; CardDeletedEvent with deck webhooks)."""
        card = self.card_for(uid, card_id, "EDIT")
        card.deleted_at = self.now()
        card.last_modified = card.deleted_at
        self._touch(self.stacks[card.stack_id])
        self._card_event(CARD_DELETED, card, uid)
        return card

    def delete_stack(self, uid: str, stack_id: int) -> Stack:
        """Soft-delete a stack (needs MANAGE), as nextcloud/deck ``lib/Service/StackService.php``
        ``delete``: ``deletedAt`` set, its cards untouched (``DeleteCron`` purges stack and
        cards after the trash retention). The stack leaves the board's ``stacks`` and
        ``GET …/stacks``, while its cards still answer the card GET (``PermissionService::
        checkPermission`` finds the board through the stack, deleted or not, and looks only
        at the card's own ``deletedAt``). BoardUpdatedEvent with deck webhooks."""
        stack = self.stack_for(uid, stack_id, "MANAGE")
        stack.deleted_at = self.now()
        self._touch(board=self.boards[stack.board_id])
        if self.sim.deck_webhooks:
            self.sim._dispatch(BOARD_UPDATED, {"boardId": stack.board_id}, uid)
        return stack

    def move_stack(self, uid: str, stack_id: int, board_id: int) -> Stack:
        """Move a stack, its cards with it, to another board, as nextcloud/deck
        ``lib/Service/StackService.php`` ``update`` does when given another ``boardId`` (the
        stack PUT; MANAGE on the stack's board and on the target): ``setBoardId``, and
        ``BoardUpdatedEvent`` for the target board with deck webhooks. The cards are not
        updated: their ``lastModified``, so their ETags, stay."""
        stack = self.stack_for(uid, stack_id, "MANAGE")
        target = self.board_for(uid, board_id, "MANAGE")
        source = self.boards[stack.board_id]
        stack.board_id = target.id
        self._touch(stack=stack)
        self._touch(board=source)
        if self.sim.deck_webhooks:
            self.sim._dispatch(BOARD_UPDATED, {"boardId": target.id}, uid)
        return stack

    def share_board(
        self,
        owner: str,
        board_id: int,
        user: str,
        *,
        edit: bool = True,
        share: bool = False,
        manage: bool = False,
        group: bool = False,
    ) -> Acl:
        """Share a board with a user, or with the group ``user`` names when ``group``; an
        existing entry has its permissions updated. With deck webhooks: AclCreatedEvent, or
        AclUpdatedEvent, the entry under ``acl`` as nextcloud/deck ``lib/Event/AAclEvent.php``
        ``getWebhookSerializable`` gives it (``Acl::jsonSerialize``, the participant
        resolved: ``BoardService::addAcl``/``updateAcl`` call ``BoardMapper::mapAcl`` first)."""
        board = self.board_for(owner, board_id, "SHARE")
        kind = ACL_GROUP if group else ACL_USER
        for acl in board.acl:
            if acl.participant == user and acl.type == kind:
                acl.permission_edit, acl.permission_share = edit, share
                acl.permission_manage = manage
                self._acl_event(ACL_UPDATED, acl, board, owner)
                return acl
        acl = Acl(self._next("acl"), user, edit, share, manage, kind)
        board.acl.append(acl)
        self._touch(board=board)
        self._acl_event(ACL_CREATED, acl, board, owner)
        return acl

    def _acl_event(self, event_class: str, acl: Acl, board: Board, actor: str) -> None:
        if self.sim.deck_webhooks:
            self.sim._dispatch(event_class, {"acl": self.acl_json(acl, board)}, actor)

    def unshare_board(self, owner: str, board_id: int, user: str, *, group: bool = False) -> bool:
        """Remove a user's (or with ``group`` a group's) ACL entry; True if there was one
        (AclDeletedEvent with deck webhooks: ``BoardService::deleteAcl``)."""
        board = self.board_for(owner, board_id, "SHARE")
        kind = ACL_GROUP if group else ACL_USER
        gone = [a for a in board.acl if (a.participant, a.type) == (user, kind)]
        board.acl = [a for a in board.acl if (a.participant, a.type) != (user, kind)]
        self._touch(board=board)
        for acl in gone:
            self._acl_event(ACL_DELETED, acl, board, owner)
        return bool(gone)

    def leave_board(self, uid: str, board_id: int) -> Acl:
        """``uid`` leaves a board shared with them (their user ACL entry is removed;
        AclDeletedEvent with ``uid`` as the actor when deck webhooks are on): nextcloud/deck
        ``lib/Service/BoardService.php`` ``leave`` (400 for the owner, or for a user without
        an entry of their own)."""
        board = self.board_for(uid, board_id)
        mine = [a for a in board.acl if (a.participant, a.type) == (uid, ACL_USER)]
        if board.owner == uid:
            raise DeckError(400, "Board owner cannot leave board")
        if not mine:
            raise DeckError(400, "Not a participant of this board")
        board.acl = [a for a in board.acl if a is not mine[0]]
        self._touch(board=board)
        self._acl_event(ACL_DELETED, mine[0], board, uid)
        return mine[0]

    def user_deleted(self, uid: str) -> None:
        """``uid`` was deleted from Nextcloud: nextcloud/deck
        ``lib/Listeners/ParticipantCleanupListener.php`` ``handle`` (``UserDeletedEvent``)
        deletes every board ``uid`` owns (``BoardMapper::findAllByOwner``, then
        ``BoardMapper::delete``: gone, not soft-deleted; no Deck event) and ``uid``'s user ACL
        entries on the others (``cleanupByParticipant``). Their cards answer 403 from then on
        (the board is missing: :meth:`board_for`)."""
        for board_id in [b.id for b in self.boards.values() if b.owner == uid]:
            del self.boards[board_id]
        for board in self.boards.values():
            board.acl = [a for a in board.acl if (a.participant, a.type) != (uid, ACL_USER)]

    def delete_board(self, uid: str, board_id: int) -> Board:
        """Soft-delete a board (still listed by ``GET /boards`` with ``deletedAt``)."""
        board = self.board_for(uid, board_id, "MANAGE")
        board.deleted_at = self.now()
        self._touch(board=board)
        return board

    def boards_for(self, uid: str) -> list[Board]:
        """Boards ``uid`` can read (archived and soft-deleted included), by id."""
        return [
            b for b in sorted(self.boards.values(), key=lambda b: b.id) if self.permissions(uid, b)
        ]

    def cards_of(self, stack: Stack, *, archived: bool) -> list[Card]:
        """Non-deleted cards of a stack with the given archived state, by (order, id)."""
        cards = [
            c
            for c in self.cards.values()
            if c.stack_id == stack.id and not c.deleted_at and c.archived == archived
        ]
        return sorted(cards, key=lambda c: (c.order, c.id))


class DeckApi:
    """HTTP handlers for ``/index.php/apps/deck/api/v1.0`` and ``v1.1``."""

    def __init__(self, sim: NextcloudSimulator) -> None:
        self.sim = sim
        self.deck = sim.deck

    def handle(self, request: Request, uid: str | None) -> Response:
        """Dispatch one Deck request."""
        if uid is None:
            return json_response({"message": "Current user is not logged in"}, 401)
        m = re.match(r"^(?:/index\.php)?/apps/deck/api/v1\.[01](/.*)?$", request.path)
        if m is None:
            return Response(b"", status=404)
        route = (m.group(1) or "/").rstrip("/")
        with self.sim.lock:
            try:
                return self._route(request, uid, request.method.upper(), route)
            except DeckError as exc:
                return json_response({"status": exc.status, "message": exc.message}, exc.status)

    @staticmethod
    def _since(request: Request) -> int | None:
        header = request.headers.get("If-Modified-Since")
        if not header:
            return None
        try:
            return int(email.utils.parsedate_to_datetime(header).timestamp())
        except (TypeError, ValueError):
            raise DeckError(500, "Invalid If-Modified-Since header provided.") from None

    def _with_etag(self, request: Request, data: Any, etag: str) -> Response:
        if not_modified(request, etag):
            resp = Response(b"", status=304)
            resp.headers["ETag"] = f'"{etag}"'
            return resp
        return json_response(data, headers={"ETag": f'"{etag}"'})

    def _route(self, request: Request, uid: str, method: str, route: str) -> Response:
        deck = self.deck
        params = request_params(request)
        parts = route.strip("/").split("/") if route.strip("/") else []
        ints = [int(p) if p.isdigit() else None for p in parts]
        if parts == ["boards"]:
            if method == "GET":
                since = self._since(request)
                details = str(params.get("details", "")).lower() in ("1", "true")
                boards = [
                    b for b in deck.boards_for(uid) if since is None or b.last_modified > since
                ]
                listed = [deck.board_json(uid, b, details) for b in boards]
                # BoardApiController::index: md5(json_encode(array_map(fn ($board) =>
                # $board->getId() . '-' . $board->getETag(), $boards))), Board::getETag =
                # md5((string)lastModified)
                etag = _md5(
                    php_json_encode([f"{b.id}-{_md5(str(b.last_modified))}" for b in boards])
                )
                return self._with_etag(request, listed, etag)
            if method == "POST":
                board = deck.create_board(
                    uid, str(params.get("title") or ""), str(params.get("color") or "0082c9")
                )
                return json_response(deck.board_json(uid, board))
        if len(parts) == 2 and parts[0] == "boards" and ints[1] is not None:
            board = deck.board_for(uid, ints[1])
            if method == "GET":
                data = deck.board_json(uid, board)
                return self._with_etag(request, data, data["ETag"])
            if method == "DELETE":
                return json_response(deck.board_json(uid, deck.delete_board(uid, board.id)))
        if (
            len(parts) >= 3
            and parts[0] == "boards"
            and ints[1] is not None
            and parts[2] == "stacks"
        ):
            board_id = ints[1]
            if len(parts) == 3:
                board = deck.board_for(uid, board_id)
                if method == "GET":
                    since = self._since(request)
                    out = []
                    for stack in sorted(
                        (
                            s
                            for s in deck.stacks.values()
                            if s.board_id == board.id and not s.deleted_at
                        ),
                        key=lambda s: (s.order, s.id),
                    ):
                        cards = [
                            c
                            for c in deck.cards_of(stack, archived=False)
                            if since is None or c.last_modified > since
                        ]
                        out.append(deck.stack_json(stack, cards))
                    return json_response(out)
                if method == "POST":
                    stack = deck.create_stack(
                        uid, board.id, str(params.get("title") or ""), int(params.get("order") or 0)
                    )
                    return json_response(deck.stack_json(stack, None))
            if len(parts) == 4 and parts[3] == "archived" and method == "GET":
                board = deck.board_for(uid, board_id)
                out = []
                for stack in sorted(
                    (
                        s
                        for s in deck.stacks.values()
                        if s.board_id == board.id and not s.deleted_at
                    ),
                    key=lambda s: (s.order, s.id),
                ):
                    out.append(deck.stack_json(stack, deck.cards_of(stack, archived=True)))
                return json_response(out)
            if len(parts) >= 4 and ints[3] is not None:
                stack_id = ints[3]
                if len(parts) == 4 and method == "GET":
                    stack = deck.stack_for(uid, stack_id)
                    data = deck.stack_json(
                        stack, deck.cards_of(stack, archived=False), owner_object=False
                    )
                    return self._with_etag(request, data, data["ETag"])
                if len(parts) == 5 and parts[4] == "cards" and method == "POST":
                    card = deck.create_card(
                        uid,
                        stack_id,
                        str(params.get("title") or ""),
                        description=str(params.get("description") or ""),
                        order=int(params.get("order") or 0),
                        duedate=self._due(params.get("duedate")),
                    )
                    return json_response(deck.card_json(card))
                if len(parts) >= 6 and parts[4] == "cards" and ints[5] is not None:
                    card_id = ints[5]
                    if len(parts) == 6:
                        if method == "GET":
                            card = deck.card_for(uid, card_id)
                            data = deck.card_json(card)
                            return self._with_etag(request, data, data["ETag"])
                        if method == "PUT":
                            fields: dict[str, Any] = {}
                            if "title" in params:
                                fields["title"] = str(params["title"])
                            if "description" in params:
                                fields["description"] = str(params["description"] or "")
                            if "order" in params:
                                fields["order"] = int(params["order"])
                            if "duedate" in params:
                                fields["duedate"] = self._due(params["duedate"])
                            if "archived" in params:
                                fields["archived"] = params["archived"] in (True, "true", "1", 1)
                            card = deck.update_card(uid, card_id, **fields)
                            return json_response(deck.card_json(card))
                        if method == "DELETE":
                            # CardService::delete answers the entity (CardMapper::find)
                            card = deck.delete_card(uid, card_id)
                            return json_response(deck.card_entity_json(card))
                    if len(parts) == 7 and method == "PUT" and parts[6] in ("archive", "unarchive"):
                        card = deck.update_card(uid, card_id, archived=parts[6] == "archive")
                        # CardService::archive/unarchive answer the updated entity
                        return json_response(deck.card_entity_json(card))
                    if len(parts) == 7 and method == "PUT" and parts[6] == "reorder":
                        card = deck.update_card(
                            uid,
                            card_id,
                            stack_id=int(params.get("stackId") or stack_id),
                            order=int(params.get("order") or 0),
                        )
                        return json_response(deck.card_json(card))
        return Response(b"", status=404)

    @staticmethod
    def _due(value: Any) -> int | None:
        if value in (None, ""):
            return None
        if isinstance(value, int | float):
            return int(value)
        try:
            return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp())
        except ValueError:
            raise DeckError(400, "Invalid duedate") from None
