"""Nextcloud app APIs beyond Notes: Deck cards and News items (reference §4, §5).

Functions taking a :class:`~ncindex.nextcloud.client.NextcloudClient` (acting as one user), so
the HTTP translation of :mod:`ncindex.nextcloud.client` applies: timeouts, 5xx and 429 raise
``NextcloudUnavailable``, 401 ``NextcloudAuthError``, and "gone" raises ``NotFound``.
"""

from __future__ import annotations

import json
from typing import Any

from ncindex.errors import NextcloudProtocolError, NotFound
from ncindex.nextcloud.client import NextcloudClient

DECK_API = "/index.php/apps/deck/api/v1.0"
NEWS_API = "/index.php/apps/news/api/v1-3"
DECK_HEADERS = {"OCS-APIRequest": "true", "Accept": "application/json"}


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
    headers = dict(DECK_HEADERS)
    if etag:
        headers["If-None-Match"] = f'"{etag}"'
    url = f"{DECK_API}/boards/{int(board_id)}/stacks/{int(stack_id)}/cards/{int(card_id)}"
    response = client.request("GET", url, headers=headers, not_found=(403, 404))
    if response.status_code == 304:
        return None
    card = _json_object(response.content, url)
    if card.get("deletedAt"):
        raise NotFound(f"deck card {card_id} is deleted")
    return card


def find_news_item(client: NextcloudClient, feed_id: int, item_id: int) -> dict[str, Any]:
    """The News item ``item_id`` of feed ``feed_id`` as the client's user.

    News v1-3 has no single-item GET: this asks for one item of the feed below the offset
    ``item_id + 1`` (items come newest first, ``id < offset``), read ones included, and checks
    that it is ``item_id`` — one request. Raises ``NotFound`` when it is not (purged, feed
    deleted or not the user's) or the feed is unknown (404).
    """
    params = {
        "type": 0,
        "id": int(feed_id),
        "batchSize": 1,
        "offset": int(item_id) + 1,
        "getRead": "true",
    }
    url = f"{NEWS_API}/items"
    response = client.request("GET", url, params=params, headers={"Accept": "application/json"})
    items = _json_object(response.content, url).get("items")
    if not isinstance(items, list):
        raise NextcloudProtocolError(f"{url}: no items list")
    for item in items:
        if isinstance(item, dict) and str(item.get("id")) == str(int(item_id)):
            return item
    raise NotFound(f"news item {item_id} of feed {feed_id} is not visible")


def _json_object(content: bytes, url: str) -> dict[str, Any]:
    try:
        data = json.loads(content)
    except ValueError as exc:
        raise NextcloudProtocolError(f"{url}: body is not JSON") from exc
    if not isinstance(data, dict):
        raise NextcloudProtocolError(f"{url}: body is not a JSON object")
    return data
