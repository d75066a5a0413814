"""Deck cards as documents (doc type ``deck_card``; DESIGN §4, reference §4).

A card is read with the Deck REST API as one configured user: ``GET …/cards/{id}`` (Deck
answers 403, not 404, for a missing, deleted or inaccessible card — ``NotFound`` here), then
its stack (for the board id: card JSON carries ``stackId`` only; stack → board is cached in
Redis, a stack never changes board) and its board (owner and ACL: every user participant of
the board may see the card). Deck validates only the card id of the card path and the stack
id of the stack path, so ids not yet known are sent as ``0``.

Text: ``"{title}\\n\\n{description}"`` (the description is markdown). Archived cards are not
indexed (Deck hides them from the board); ``etag`` is the card ``ETag`` (md5 of
``lastModified``), ``modified_at`` its ``lastModified`` (Unix seconds).
"""

from __future__ import annotations

from typing import Any

import redis

from ncindex.documents import DocRef, DocType, SourceDocument, principal
from ncindex.errors import NextcloudProtocolError
from ncindex.nextcloud.apps import DECK_API, DECK_HEADERS, get_deck_card
from ncindex.nextcloud.client import NextcloudClient

STACK_BOARD_KEY = "ncindex:deck:stack-board:"
STACK_BOARD_TTL = 86_400


class ArchivedCard(Exception):
    """Raised for a card that exists but is archived (not indexed)."""


def _json(client: NextcloudClient, url: str) -> dict[str, Any]:
    response = client.request("GET", url, headers=DECK_HEADERS, not_found=(403, 404))
    try:
        data = response.json()
    except ValueError as exc:
        raise NextcloudProtocolError(f"{url}: body is not JSON") from exc
    if not isinstance(data, dict):
        raise NextcloudProtocolError(f"{url}: body is not a JSON object")
    return data


def board_of_stack(client: NextcloudClient, cache: redis.Redis, stack_id: int) -> int:
    """The board id of ``stack_id`` (``GET /boards/0/stacks/{id}``, cached a day in Redis).
    Raises ``NotFound`` when the stack is gone or not visible."""
    key = f"{STACK_BOARD_KEY}{int(stack_id)}"
    cached = cache.get(key)
    if cached is not None:
        return int(cached)
    stack = _json(client, f"{DECK_API}/boards/0/stacks/{int(stack_id)}")
    try:
        board_id = int(stack["boardId"])
    except (KeyError, TypeError, ValueError) as exc:
        raise NextcloudProtocolError(f"stack {stack_id} has no boardId") from exc
    cache.set(key, board_id, ex=STACK_BOARD_TTL)
    return board_id


def _uid(value: Any) -> str | None:
    if isinstance(value, dict):
        uid = value.get("uid") or value.get("primaryKey")
        return str(uid) if uid else None
    return str(value) if value else None


def board_principals(board: dict[str, Any]) -> set[str]:
    """``acl`` principals of a board JSON: its owner and every user participant (type 0)."""
    users = {_uid(board.get("owner"))}
    for entry in board.get("acl") or []:
        if isinstance(entry, dict) and entry.get("type", 0) == 0:
            users.add(_uid(entry.get("participant")))
    return {principal(u) for u in users if u}


def fetch_card(
    client: NextcloudClient,
    cache: redis.Redis,
    card_id: int,
    current: dict[str, Any] | None,
) -> tuple[SourceDocument, set[str]]:
    """Read card ``card_id`` as ``client.user``: the document (payload extras ``board_id``,
    ``stack_id``, as strings: keyword-indexed) and the principals of its board.

    ``current`` is the stored payload (its ``board_id``/``stack_id`` are used in the card
    path when known). Raises ``NotFound`` (403/404 or ``deletedAt`` set), ``ArchivedCard``,
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
        modified = int(card.get("lastModified") or 0)
        etag = str(card.get("ETag") or modified)
    except (KeyError, TypeError, ValueError) as exc:
        raise NextcloudProtocolError(f"deck card {card_id}: {exc}") from exc
    board_id = board_of_stack(client, cache, stack_id)
    board = _json(client, f"{DECK_API}/boards/{board_id}")
    description = str(card.get("description") or "")
    user = client.user or ""
    doc = SourceDocument(
        ref=DocRef(DocType.DECK_CARD, str(int(card_id))),
        user=user,
        owner=_uid(card.get("owner")) or user,
        title=title,
        text=f"{title}\n\n{description}".strip(),
        etag=etag,
        modified_at=modified,
        mime_type="text/markdown",
        extra={"markdown": True, "board_id": str(board_id), "stack_id": str(stack_id)},
    )
    return doc, board_principals(board) | {principal(user)}
