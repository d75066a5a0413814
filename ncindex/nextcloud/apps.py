"""Nextcloud app APIs beyond Notes: Deck cards and News items (reference §4, §5).

Functions taking a :class:`~ncindex.nextcloud.client.NextcloudClient` (acting as one user), so
the HTTP translation of :mod:`ncindex.nextcloud.client` applies: timeouts, 5xx and 429 raise
``NextcloudUnavailable``, 401 ``NextcloudAuthError``, and "gone" raises ``NotFound``.
"""

from __future__ import annotations

from typing import Any

from ncindex.errors import NextcloudProtocolError, NotFound
from ncindex.nextcloud.client import API_HEADERS, NextcloudClient, json_object

DECK_API = "/index.php/apps/deck/api/v1.0"
NEWS_API = "/index.php/apps/news/api/v1-3"


def get_deck_card(
    client: NextcloudClient,
    board_id: int,
    stack_id: int,
    card_id: int,
    *,
    etag: str | None = None,
) -> dict[str, Any] | None:
    """``GET /boards/{board_id}/stacks/{stack_id}/cards/{card_id}`` as the client's user.

    With ``etag`` (the card ETag held) the GET is conditional and ``None`` means unchanged
    (304). Returns the card JSON. Raises ``NotFound`` when the card is missing, deleted or not
    visible: Deck answers **403**, not 404, for all three (a 404 also counts), and a card whose
    ``deletedAt`` is set counts as gone. Raises ``NextcloudProtocolError`` for a non-JSON body.
    """
    headers = dict(API_HEADERS)
    if etag:
        headers["If-None-Match"] = f'"{etag}"'
    url = f"{DECK_API}/boards/{int(board_id)}/stacks/{int(stack_id)}/cards/{int(card_id)}"
    response = client.request("GET", url, headers=headers, not_found=(403, 404))
    if response.status_code == 304:
        return None
    card = json_object(response)
    if card.get("deletedAt"):
        raise NotFound(f"deck card {card_id} is deleted")
    return card


def news_items(client: NextcloudClient, params: dict[str, Any]) -> list[dict[str, Any]]:
    """``GET /items`` of News v1-3 with ``params`` (``type``, ``id``, ``batchSize``, ``offset``,
    ``getRead``; nextcloud/news ``lib/Controller/ItemApiController.php``, ``index``): the
    item objects of the answer's ``items`` list. Raises ``NextcloudProtocolError`` for an
    answer without one."""
    url = f"{NEWS_API}/items"
    response = client.request("GET", url, params=params, headers=API_HEADERS)
    items = json_object(response).get("items")
    if not isinstance(items, list):
        raise NextcloudProtocolError(f"{url}: no items list")
    return [i for i in items if isinstance(i, dict)]


def find_news_item(
    client: NextcloudClient, item_id: int, feed_id: int | None = None
) -> dict[str, Any]:
    """The News item ``item_id`` as the client's user, in feed ``feed_id`` or in any feed.

    News v1-3 has no single-item GET: this asks for one item (of the feed, or ``type=3``: all
    feeds) below the offset ``item_id + 1`` (items come newest first, ``id < offset``), read
    ones included, and checks that it is ``item_id`` — one request. Raises ``NotFound`` when it
    is not (purged, feed deleted or not the user's) or the feed is unknown (404).
    """
    params = {
        "type": 3 if feed_id is None else 0,
        "id": int(feed_id or 0),
        "batchSize": 1,
        "offset": int(item_id) + 1,
        "getRead": "true",
    }
    for item in news_items(client, params):
        if str(item.get("id")) == str(int(item_id)):
            return item
    where = "" if feed_id is None else f" of feed {feed_id}"
    raise NotFound(f"news item {item_id}{where} is not visible")
