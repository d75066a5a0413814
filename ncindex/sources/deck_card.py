"""Deck cards as documents (doc type ``deck_card``; DESIGN §4, reference §4).

A card is read with the Deck REST API as one configured user: ``GET …/cards/{id}`` (Deck
answers 403, not 404, for a missing, deleted or inaccessible card — ``NotFound`` here), then
its stack (for the board id: card JSON carries ``stackId`` only; stack → board is cached in
Redis, and asked again when the cached board does not list the stack: the stack PUT can move
a stack to another board, nextcloud/deck ``StackService::update`` ``setBoardId``) and its
board (owner and ACL: every user participant of the board may see the card; its live stacks:
a card of a deleted stack is gone, although its GET still answers — :func:`stack_is_live`).
Deck validates only the card id of the card path and the stack id of the stack path, so ids
not yet known are sent as ``0``.

Text: ``"{title}\\n\\n{description}"`` (:func:`~ncindex.documents.titled_text`; the description
is markdown). Archived cards are not
indexed (Deck hides them from the board); ``etag`` is the card ``ETag`` (md5 of
``lastModified``), ``modified_at`` its ``lastModified`` (Unix seconds).

The scan lists ``GET /boards``, then ``GET /boards/{id}/stacks`` per board that is not deleted
(non-archived, non-deleted cards of live stacks, with their ``ETag``). Cards have no paths; a
missing card is re-read by id (Deck answers 403 once it is gone; a card of a deleted stack is
gone by :func:`stack_is_live`). Verify-on-read uses the card GET and, once per board of the
page, the board GET (:meth:`DeckCardSource.page_requests`): it drops a card archived since
(``ineligible``, ``archived``) and a card whose stack, as the card GET gives it now, was deleted
(``ineligible``, ``stack_deleted``; a card moved since it was indexed is judged in the stack it
is in now, by that stack's GET, which also gives its board: the search holds it to the request's
``stack_id``/``board_id`` filters there and has it re-read); the page's board GET also gives
the search result its board's and stack's titles as they are now (:meth:`DeckCardSource.settle`:
not stored with the card, which a rename does not change; a card moved to another board has
its stack's title from that stack's GET, and its board's from that board's GET, one more per
such board of the page). Deck ≥ 1.18 sends card events
(``CardCreated/Updated/DeletedEvent``, the card JSON under ``card``; reference §1.4), registered
only with ``deck_webhooks`` (registering them on an older Deck fails); a move is a
``CardUpdatedEvent`` (nextcloud/deck ``lib/Service/CardService.php`` ``reorder``; ``update``,
whose ``stackId`` may be another board's; ``done``, into the board's done column), so the card's
``stack_id``/``board_id`` follow at once. With them come the board-share events
``AclCreatedEvent``/``AclDeletedEvent`` (the ACL entry under ``acl``, its ``boardId``): the
board's indexed cards are re-read as the actor (``ncindex.index_related``), so their ``acl``
follows the board's at once. Those are the cards indexed when the event is handled: a card
whose write gives access the stored version did not (new to the index, moved onto the board,
a participant added) asks for its board once more after the write
(:meth:`DeckCardSource.readers_now`, ``Indexer.index_document``: one board GET), so a board
unshared while its task was in flight is not written back. Not subscribed: ``AclUpdatedEvent``
(a permission changed; every ACL entry lets its participant read: ``lib/Db/Acl.php``
``getPermission``) and ``BoardUpdatedEvent`` (dispatched on every stack created, renamed,
reordered or deleted and on board edits, ``lib/Service/StackService.php``; re-reading every
card of the board each time would cost a card read per card, and verify-on-read already drops
the cards of a deleted stack, the scan evicts them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, ClassVar

import redis
import structlog

from ncindex.documents import DocRef, DocType, SourceDocument, principal, titled_text
from ncindex.errors import (
    ArchivedCard,
    Forbidden,
    NextcloudProtocolError,
    NotFound,
    TransientError,
)
from ncindex.names import Names
from ncindex.nextcloud.apps import DECK_API, get_deck_card
from ncindex.nextcloud.client import API_HEADERS, NextcloudClient, json_list, json_object
from ncindex.nextcloud.webdav import DavEntry
from ncindex.settings import Settings
from ncindex.sources.base import (
    Answer,
    Checked,
    Context,
    EventRoute,
    Fetched,
    Listing,
    PageRequest,
    ScanMemory,
    Seen,
    Source,
    Verdict,
    listed_id,
)

log = structlog.get_logger(__name__)

STACK_BOARD_TTL = 86_400
DECK_NS = "OCA\\Deck\\Event\\"
CARD_CREATED = DECK_NS + "CardCreatedEvent"
CARD_UPDATED = DECK_NS + "CardUpdatedEvent"
CARD_DELETED = DECK_NS + "CardDeletedEvent"
ACL_CREATED = DECK_NS + "AclCreatedEvent"
ACL_DELETED = DECK_NS + "AclDeletedEvent"
#: Deck card and board-share classes: webhook-compatible only with Deck ≥ 1.18 (nextcloud/deck
#: ``lib/Event/ACardEvent.php``, ``AAclEvent.php`` implement ``IWebhookCompatibleEvent`` from
#: commit d85e1c8, first in v1.18.0; reference §1.4).
DECK_SUBSCRIBED = (CARD_CREATED, CARD_DELETED, CARD_UPDATED, ACL_CREATED, ACL_DELETED)


def acl_participant(event: Mapping[str, Any]) -> str | None:
    """The user id of a Deck ACL event's entry when it names a user (``type`` 0), else
    ``None``: nextcloud/deck ``lib/Event/AAclEvent.php`` ``getWebhookSerializable`` sends
    ``acl`` as ``Acl::jsonSerialize`` (``lib/Db/RelationalEntity.php``), whose
    ``participant`` is the user id, or, once resolved, the user's object (``uid``,
    ``primaryKey``: ``lib/Db/RelationalObject.php`` ``jsonSerialize``, ``lib/Db/User.php``)."""
    acl = event.get("acl")
    if not isinstance(acl, Mapping) or acl.get("type") not in (0, "0"):
        return None
    participant = acl.get("participant")
    if isinstance(participant, Mapping):
        participant = participant.get("uid") or participant.get("primaryKey")
    return participant if isinstance(participant, str) and participant else None


def _json(client: NextcloudClient, url: str) -> dict[str, Any]:
    return json_object(client.request("GET", url, headers=API_HEADERS, not_found=(403, 404)))


def get_stack(client: NextcloudClient, stack_id: int) -> dict[str, Any]:
    """``GET /boards/0/stacks/{stack_id}`` as the client's user: the stack JSON (``boardId``,
    ``deletedAt``: 0 unless deleted, and its cards). Deck reads only the stack id of the path
    (nextcloud/deck ``lib/Controller/StackApiController.php`` ``get`` →
    ``StackService::find``) and answers a deleted stack too (``StackMapper::find`` does not look
    at ``deleted_at``). Raises ``NotFound`` when the stack is missing or not visible (403)."""
    return _json(client, f"{DECK_API}/boards/0/stacks/{int(stack_id)}")


def board_of_stack(
    client: NextcloudClient, cache: redis.Redis, keys: Names, stack_id: int, *, fresh: bool = False
) -> int:
    """The board id of ``stack_id`` (:func:`get_stack`, cached a day in Redis; ``fresh``: asked
    again, and cached anew). Raises ``NotFound`` when the stack is gone or not visible."""
    key = f"{keys.deck_stack_board_prefix}{int(stack_id)}"
    cached = None if fresh else cache.get(key)
    if cached is not None:
        return int(cached)
    board_id = _board_id(get_stack(client, stack_id), stack_id)
    cache.set(key, board_id, ex=STACK_BOARD_TTL)
    return board_id


def _board_holding(
    client: NextcloudClient, cache: redis.Redis, keys: Names, stack_id: int
) -> tuple[int, dict[str, Any]]:
    """The id and GET (:func:`get_board`) of the board ``stack_id`` is on. The board comes from
    :func:`board_of_stack`'s cache; when that board does not list the stack live, or cannot be
    read, the stack is asked again (one more request): a stack moved to another board
    (``StackService::update``) would otherwise count as deleted, its cards evicted until the
    cache expired. A stack that really is deleted answers its own board, and that board's GET
    is returned to say so. Raises ``NotFound`` when neither board can be read."""
    board_id = board_of_stack(client, cache, keys, stack_id)
    try:
        board = get_board(client, board_id)
        if stack_is_live(board, stack_id):
            return board_id, board
    except NotFound:
        board = None
    moved = board_of_stack(client, cache, keys, stack_id, fresh=True)
    if moved == board_id and board is not None:
        return board_id, board
    return moved, get_board(client, moved)


def _board_id(stack: dict[str, Any], stack_id: int) -> int:
    """The ``boardId`` of ``stack`` (the JSON of stack ``stack_id``, :func:`get_stack`).
    Raises ``NextcloudProtocolError`` when it has none."""
    try:
        return int(stack["boardId"])
    except (KeyError, TypeError, ValueError) as exc:
        raise NextcloudProtocolError(f"stack {stack_id} has no boardId") from exc


def _uid(value: Any) -> str | None:
    if isinstance(value, dict):
        uid = value.get("uid") or value.get("primaryKey")
        return str(uid) if uid else None
    return str(value) if value else None


def board_principals(board: dict[str, Any]) -> set[str]:
    """``acl`` principals of a board JSON: its owner, every user participant (ACL type 0) and
    every local user of its ``users`` list. A board's GET lists there who may see it,
    the members of the groups (and circles) it is shared with included (nextcloud/deck
    ``lib/Service/BoardService.php`` ``enrichWithUsers`` → ``PermissionService::findUsers``;
    a group's own ACL entry names the group, type 1, with its gid as ``uid``); federated
    users (type 6) are not accounts here."""
    users = {_uid(board.get("owner"))}
    for entry in board.get("acl") or []:
        if isinstance(entry, dict) and entry.get("type", 0) == 0:
            users.add(_uid(entry.get("participant")))
    for user in board.get("users") or []:
        if isinstance(user, dict) and user.get("type", 0) == 0:
            users.add(_uid(user))
    return {principal(u) for u in users if u}


def fetch_card(
    client: NextcloudClient,
    cache: redis.Redis,
    keys: Names,
    card_id: int,
    current: dict[str, Any] | None,
) -> tuple[SourceDocument, set[str]]:
    """Read card ``card_id`` as ``client.user``: the document (payload extras ``board_id``,
    ``stack_id``, as strings: keyword-indexed) and the principals of its board.

    ``current`` is the stored payload (its ``board_id``/``stack_id`` are used in the card
    path when known). Raises ``NotFound`` (403/404, ``deletedAt`` set, or its stack deleted:
    :func:`stack_is_live`), ``ArchivedCard``,
    ``NextcloudUnavailable``/``NextcloudProtocolError`` as the client does.
    """
    board_hint = int(current.get("board_id") or 0) if current else 0
    stack_hint = int(current.get("stack_id") or 0) if current else 0
    card = get_deck_card(client, board_hint, stack_hint, int(card_id))
    assert card is not None  # unconditional GET
    if card.get("archived"):
        raise ArchivedCard(f"deck card {card_id} is archived")
    try:
        stack_id = int(card["stackId"])
        title = str(card.get("title") or "")
    except (KeyError, TypeError, ValueError) as exc:
        raise NextcloudProtocolError(f"deck card {card_id}: {exc}") from exc
    etag, modified = card_etag(card, str(card_id)), card_modified(card, str(card_id))
    board_id, board = _board_holding(client, cache, keys, stack_id)
    if not stack_is_live(board, stack_id):
        raise NotFound(f"deck card {card_id}: its stack {stack_id} is deleted")
    description = str(card.get("description") or "")
    user = client.user or ""
    doc = SourceDocument(
        ref=DocRef(DocType.DECK_CARD, str(int(card_id))),
        user=user,
        owner=_uid(card.get("owner")) or user,
        title=title,
        text=titled_text(title, description),
        etag=etag,
        modified_at=modified,
        mime_type="text/markdown",
        markdown=True,
        extra={"board_id": str(board_id), "stack_id": str(stack_id)},
    )
    return doc, board_principals(board) | {principal(user)}


def get_board(client: NextcloudClient, board_id: int) -> dict[str, Any]:
    """``GET /boards/{board_id}`` as the client's user: the board JSON with its ``acl``,
    ``users`` and live ``stacks`` (without cards; nextcloud/deck
    ``lib/Controller/BoardApiController.php`` ``get`` → ``BoardService::find``). Raises
    ``NotFound`` when the board is deleted or not visible (Deck answers 403)."""
    return _json(client, f"{DECK_API}/boards/{int(board_id)}")


def stack_is_live(board: dict[str, Any], stack_id: int) -> bool:
    """Whether ``stack_id`` is among the live stacks of a board's GET.

    A deleted stack's cards are gone from Deck's board, yet the card GET still answers them:
    nextcloud/deck ``lib/Service/StackService.php`` ``delete`` only sets the stack's
    ``deletedAt`` (its cards are purged with it after the trash retention, ``DeleteCron``),
    and ``PermissionService::checkPermission`` finds the board through the stack whether it
    is deleted or not. The board's GET lists its live stacks (``BoardService::find`` →
    ``enrichWithStacks``: ``StackMapper::findAll``, ``deleted_at = 0``), so a card whose
    stack is not there counts as gone. A board JSON without a ``stacks`` list says nothing
    (live)."""
    if not isinstance(board.get("stacks"), list):
        return True
    return listed_stack(board, stack_id) is not None


def listed_stack(board: dict[str, Any], stack_id: int) -> dict[str, Any] | None:
    """The entry of ``stack_id`` among the ``stacks`` of a board's GET (the stack JSON:
    ``id``, ``title``…), or ``None`` when it is not listed or the board has no such list."""
    stacks = board.get("stacks")
    for stack in stacks if isinstance(stacks, list) else []:
        if isinstance(stack, dict) and str(stack.get("id")) == str(int(stack_id)):
            return stack
    return None


def title_of(entity: dict[str, Any]) -> str | None:
    """The ``title`` of a Deck board or stack JSON (nextcloud/deck ``lib/Db/Board.php``,
    ``lib/Db/Stack.php``; ``lib/Validators/BoardServiceValidator.php`` and
    ``StackServiceValidator.php`` require it non-empty), or ``None`` when it has none that is
    a non-empty string."""
    title = entity.get("title")
    return title if isinstance(title, str) and title else None


def card_modified(card: dict[str, Any], card_id: str) -> int:
    """A card JSON's ``lastModified`` (Unix seconds; missing ⇒ 0); raises
    ``NextcloudProtocolError`` for one that is not a number."""
    value = card.get("lastModified")
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        raise NextcloudProtocolError(f"{card_id}: lastModified {value!r} is not a time") from None


def card_etag(card: dict[str, Any], card_id: str) -> str:
    """The etag stored for a card, and what the scan compares with: its ``ETag`` (Deck's md5
    of ``lastModified``, module docstring), else its ``lastModified`` (:func:`card_modified`)."""
    return str(card.get("ETag") or card_modified(card, card_id))


def _json_list(client: NextcloudClient, url: str) -> list[dict[str, Any]]:
    return json_list(client.request("GET", url, headers=API_HEADERS))


_CARD_ID = ("card", "id")
_ACL_BOARD = ("acl", "boardId")


class DeckCardSource(Source):
    """Deck cards: listed board by board, fetched by the card GET, its stack and board."""

    doc_type: ClassVar[DocType] = DocType.DECK_CARD
    app = "deck"
    events = (
        EventRoute(
            CARD_CREATED,
            False,
            _CARD_ID,
            "new Deck cards are found by the scan only (card events need Deck 1.18)",
        ),
        EventRoute(
            CARD_DELETED,
            True,
            _CARD_ID,
            "deleted Deck cards are found by the scan only (card events need Deck 1.18)",
        ),
        EventRoute(
            CARD_UPDATED,
            False,
            _CARD_ID,
            "Deck card edits are found by the scan only (card events need Deck 1.18)",
        ),
        # a board shared or unshared: nextcloud/deck lib/Service/BoardService.php addAcl,
        # deleteAcl and leave dispatch them, the entry (its boardId) under "acl"
        # (AAclEvent::getWebhookSerializable); its cards are re-read, their acl is the board's
        EventRoute(
            ACL_CREATED,
            False,
            _ACL_BOARD,
            "a board shared reaches the new members' index at their scan only (Deck 1.18)",
            field="board_id",
            reader=acl_participant,
        ),
        EventRoute(
            ACL_DELETED,
            False,
            _ACL_BOARD,
            "a board unshared leaves the members' index at the scan only (Deck 1.18)",
            field="board_id",
            reader=acl_participant,
        ),
    )

    def list(
        self,
        ctx: Context,
        client: NextcloudClient,
        memory: ScanMemory,
        resume: Listing | None = None,
        limit: int | None = None,
    ) -> Listing:
        """One request for the boards and one per live board. A board that answers 404 or
        403 for its stacks (deleted or unshared since the board list) is skipped: its cards
        count as missing. Raises ``NextcloudProtocolError`` for JSON not shaped as Deck's.
        Always in full: ``resume`` and ``limit`` do not apply."""
        listing = Listing()
        boards = _json_list(client, f"{DECK_API}/boards")
        listing.requests += 1
        for board in boards:
            if board.get("deletedAt"):
                continue
            board_id = listed_id(board.get("id"), "Deck board")
            listing.requests += 1
            try:
                stacks = _json_list(client, f"{DECK_API}/boards/{board_id}/stacks")
            except (NotFound, Forbidden):
                continue
            for stack in stacks:
                cards = stack.get("cards") or []
                if not isinstance(cards, list):
                    raise NextcloudProtocolError(f"Deck board {board_id}: cards is not a list")
                for card in cards:
                    if not isinstance(card, dict):
                        raise NextcloudProtocolError(f"Deck board {board_id}: a card not an object")
                    if card.get("archived") or card.get("deletedAt"):
                        continue
                    doc_id = listed_id(card.get("id"), "Deck card")
                    listing.docs[doc_id] = Seen(doc_id, card_etag(card, doc_id), None)
        return listing

    def fetch(
        self,
        ctx: Context,
        client: NextcloudClient,
        ref: DocRef,
        current: dict[str, Any] | None,
        entry: DavEntry | None = None,
    ) -> Fetched:
        """:func:`fetch_card`, with the board's principals as the ``acl``; an archived card
        is ``ineligible`` (``archived``)."""
        try:
            doc, acl = fetch_card(client, ctx.redis, ctx.settings.names, int(ref.doc_id), current)
        except ArchivedCard:
            return Fetched(None, ineligible="archived")
        return Fetched(doc, acl)

    def verify(self, client: NextcloudClient, payload: dict[str, Any]) -> Checked:
        """Deck card GET (conditional on the indexed etag); Deck answers 403 for a card that
        is missing, deleted or not visible, which means gone. A card archived since it was
        indexed is ``INELIGIBLE`` (reason ``archived``, as its indexing would say): archiving
        changes its ``lastModified``, so the GET answers it whole (nextcloud/deck
        ``lib/Service/CardService.php`` ``archive`` → ``CardMapper::update``, which sets
        ``lastModified``). A payload without ``board_id`` and ``stack_id`` cannot be checked
        (``UNVERIFIED``).

        The card GET answers the card where it is now, whatever stack its path names:
        ``CardApiController::get`` reads only the card id (``CardService::find``), and the
        card JSON carries its ``stackId`` (``Card`` entity, ``RelationalEntity::
        jsonSerialize``). A card moved since it was indexed answers whole (``CardService::
        reorder`` and ``update`` set ``lastModified`` through ``CardMapper::update``, so its
        ETag changed) with another ``stackId``: it is judged here, in that stack, by the
        stack's GET (:func:`get_stack`; ``stack_deleted`` when its ``deletedAt`` is set),
        and ``moved_to`` names the stack and its board (``{"stack_id", "board_id"}``, as the
        payload holds them), so :meth:`settle` leaves it — the new stack may be on another
        board than the indexed one, whose GET the page made — and the search holds it to its
        filter there. One unchanged (304) is in its indexed stack: :meth:`settle` judges that
        stack in its board (its deletion leaves the card's GET as it was); a move in the same
        second as the indexed version keeps the ETag (``lastModified`` is in seconds), so it
        answers 304 too and the move goes unseen here. Raises
        ``NextcloudProtocolError`` for a card without a numeric ``stackId`` or a stack
        without a ``boardId``."""
        board, stack = payload.get("board_id"), payload.get("stack_id")
        if board is None or stack is None:
            log.warning("deck_card_without_board", doc_key=payload.get("doc_key"))
            return Checked(Verdict.UNVERIFIED)
        card_id = int(payload["doc_id"])
        card = get_deck_card(client, int(board), int(stack), card_id, etag=payload.get("etag"))
        if card is None:
            return Checked(Verdict.KEPT)
        if card.get("archived"):
            return Checked(Verdict.INELIGIBLE, reason="archived")
        try:
            now_in = int(card["stackId"])
        except (KeyError, TypeError, ValueError) as exc:
            raise NextcloudProtocolError(f"deck card {card_id}: stackId {exc}") from exc
        if now_in == int(stack):
            return Checked(Verdict.KEPT)
        now_stack = get_stack(client, now_in)
        moved_to = {"stack_id": str(now_in), "board_id": str(_board_id(now_stack, now_in))}
        if now_stack.get("deletedAt"):
            return Checked(Verdict.INELIGIBLE, reason="stack_deleted", moved_to=moved_to)
        return Checked(Verdict.KEPT, moved_to=moved_to, stack_title=title_of(now_stack))

    def page_requests(self, payloads: Sequence[dict[str, Any]]) -> dict[str, PageRequest]:
        """One board GET (:func:`get_board`) per board of the page's cards, for
        :meth:`settle`: a stack deleted since the card was indexed is gone from its board's
        ``stacks`` while the card GET still answers the card (:func:`stack_is_live`).

        Not a stack GET per card (:func:`get_stack`: its ``deletedAt`` would tell, but it
        answers every card of the stack, and it would be one request per stack; only a card
        moved since it was indexed, whose stack the page's boards may not hold, gets one:
        :meth:`verify`); not
        ``GET /boards/{id}/stacks`` (``StackApiController::index``), which lists every card of
        every live stack. The board GET is not made conditional: its ``ETag`` is md5 of the
        board's ``lastModified``, which a stack's deletion changes (``StackService::delete`` →
        ``ChangeHelper::boardChanged``), but a 304 would save only the body — Deck builds the
        board in full before the AppFramework compares the ETag — and holding the live stacks
        of each board between searches would need a cache the verifier does not keep."""
        boards = set()
        for payload in payloads:
            try:
                boards.add(int(payload["board_id"]))
            except (KeyError, TypeError, ValueError):
                # no board to ask about: its own check leaves it unverified or drops it
                # (unreadable); the other cards of the page are still settled
                continue
        return {f"deck_board:{b}": partial(get_board, board_id=b) for b in sorted(boards)}

    def settle(self, payload: dict[str, Any], checked: Checked, answer: Answer) -> Checked:
        """``INELIGIBLE`` (reason ``stack_deleted``) when the card's stack is no longer among
        its board's live stacks (the board's GET, :meth:`page_requests`), else ``checked``
        with the board's and the stack's titles from that GET (``board_title``,
        ``stack_title``: the search result shows where the card is, and a board or stack
        renamed since the card was indexed shows its name now — a rename changes no card's
        ETag, so no scan would re-read the card, and ``BoardUpdatedEvent`` is not subscribed);
        a board gone for the user (403) drops the card (``NotFound`` raised).

        A card its check found moved (``moved_to``) was judged there, in the stack it is in
        now, not by the indexed stack, which is not its stack any more (its check read the
        new stack's title from that stack's GET); its board's title is the GET of the board
        it is on now (``moved_to``'s ``board_id``, from the stack GET's ``boardId``): the
        page's own when another card of the page is indexed on it (moved within its board,
        always), else asked once for the page however many cards moved there (``answer``
        with the request: one board GET more per such board). Neither the card GET nor the
        stack GET names the board's title: nextcloud/deck ``lib/Service/CardService.php``
        ``find`` → ``enrichCards`` wraps each card in ``new CardDetails($card)`` without its
        board, so ``lib/Model/CardDetails.php`` ``appendBoardDetails`` adds no ``board``, and
        ``jsonSerialize`` drops ``relatedBoard``; ``StackService::find`` gives the ``Stack``
        entity, whose JSON (``lib/Db/Stack.php`` ``jsonSerialize``, the entity's fields)
        has its ``boardId`` only."""
        if payload.get("board_id") is None or payload.get("stack_id") is None:
            return checked
        if checked.moved_to is not None:
            now_on = int(checked.moved_to["board_id"])
            try:
                board = answer(f"deck_board:{now_on}", partial(get_board, board_id=now_on))
            except (TransientError, NextcloudProtocolError):
                # asked for its title alone: the card's own check confirmed it, so a failed
                # GET leaves it kept without one (a 403/404 drops it: Deck's card GET checks
                # the same board permission, PermissionService::checkPermission)
                return checked
            return replace(checked, board_title=title_of(board))
        board = answer(f"deck_board:{int(payload['board_id'])}")
        stack_id = int(payload["stack_id"])
        if not stack_is_live(board, stack_id):
            return Checked(Verdict.INELIGIBLE, reason="stack_deleted")
        stack = listed_stack(board, stack_id) or {}
        return replace(checked, board_title=title_of(board), stack_title=title_of(stack))

    def subscribes(self, settings: Settings) -> bool:
        """Card events are registered only with ``deck_webhooks`` (Deck ≥ 1.18)."""
        return settings.deck_webhooks

    readers_field: ClassVar[str | None] = "board_id"

    def readers_now(self, ctx: Context, client: NextcloudClient, doc: SourceDocument) -> set[str]:
        """The card's readers now: :func:`board_principals` of one board GET
        (:func:`get_board`) of ``doc``'s ``board_id``, with ``client.user``. A card's readers
        are its board's (nextcloud/deck ``lib/Service/PermissionService.php``
        ``checkPermission`` finds the board through the card's stack; ``getPermissions``:
        the owner, and ``userCan`` over the ``AclMapper::findAll`` entries — users, groups,
        circles — each of which lets its participant read, ``lib/Db/Acl.php``
        ``getPermission``), and the board GET lists them (``BoardService::find`` →
        ``enrichWithUsers`` → ``PermissionService::findUsers``). Raises ``NotFound`` when
        ``client.user`` can no longer read the board (Deck answers 403: unshared, left,
        deleted)."""
        board = get_board(client, int(doc.extra["board_id"]))
        return board_principals(board) | {principal(client.user or "")}


SOURCE = DeckCardSource()
