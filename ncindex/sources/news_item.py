"""News items as documents (doc type ``news_item``; DESIGN §4, reference §5).

News v1-3 has no single-item GET and no change feed: items are read by list. One item is found
with ``GET /items?type=3&id=0&batchSize=1&offset=<id+1>&getRead=true`` (all feeds, newest
first, ``id < offset``: the first item is the one asked for if it still exists); a feed's items
with ``type=0&id=<feed>&batchSize=-1``. Item ids are per user (each user's row), so an item's
``acl`` is its one user.

Text: ``"{title}\\n\\n{body as text}"`` (the HTML body through :func:`extract_text`); payload
extras ``feed_id`` (a string: keyword-indexed) and ``url``; ``etag`` is
``"{lastModified}-{contentHash}"`` (read and star changes bump ``lastModified``; the content
hash keeps the text from being embedded again).
"""

from __future__ import annotations

import json
from typing import Any

from ncindex.documents import DocRef, DocType, SourceDocument
from ncindex.errors import NextcloudProtocolError, NotFound
from ncindex.nextcloud.client import NextcloudClient
from ncindex.text.extract import extract_text

NEWS_API = "/index.php/apps/news/api/v1-3"


def _items(client: NextcloudClient, params: dict[str, Any]) -> list[dict[str, Any]]:
    url = f"{NEWS_API}/items"
    response = client.request("GET", url, params=params, headers={"Accept": "application/json"})
    try:
        items = json.loads(response.content).get("items")
    except (ValueError, AttributeError) as exc:
        raise NextcloudProtocolError(f"{url}: body is not a JSON object") from exc
    if not isinstance(items, list):
        raise NextcloudProtocolError(f"{url}: no items list")
    return [i for i in items if isinstance(i, dict)]


def find_item(client: NextcloudClient, item_id: int) -> dict[str, Any]:
    """Item ``item_id`` of ``client.user`` (one request); raises ``NotFound`` when it is gone
    (purged, feed deleted, not the user's)."""
    params = {"type": 3, "id": 0, "batchSize": 1, "offset": int(item_id) + 1, "getRead": "true"}
    for item in _items(client, params):
        if str(item.get("id")) == str(int(item_id)):
            return item
    raise NotFound(f"news item {item_id} is not visible")


def list_items(client: NextcloudClient, feed_id: int | None = None) -> list[dict[str, Any]]:
    """Every item (read ones included) of feed ``feed_id``, or of all feeds when ``None``."""
    params = {"type": 0 if feed_id is not None else 3, "id": int(feed_id or 0)}
    return _items(client, params | {"batchSize": -1, "getRead": "true"})


def item_document(user: str, item: dict[str, Any], max_chars: int) -> SourceDocument:
    """The document of one item JSON as read by ``user``; raises ``NextcloudProtocolError``
    for an item without ``id``/``feedId``."""
    try:
        item_id = int(item["id"])
        feed_id = int(item["feedId"])
    except (KeyError, TypeError, ValueError) as exc:
        raise NextcloudProtocolError(f"bad news item: {exc}") from exc
    title = str(item.get("title") or "")
    body = str(item.get("body") or "")
    text = ""
    if body.strip():
        text = extract_text(
            body.encode("utf-8"),
            mime_type="text/html; charset=utf-8",
            filename="item.html",
            max_chars=max_chars,
        ).text
    modified = int(item.get("lastModified") or item.get("pubDate") or 0)
    return SourceDocument(
        ref=DocRef(DocType.NEWS_ITEM, str(item_id)),
        user=user,
        owner=user,
        title=title,
        text=f"{title}\n\n{text}".strip()[:max_chars],
        etag=f"{modified}-{item.get('contentHash') or ''}",
        modified_at=modified,
        mime_type="text/html",
        url=str(item["url"]) if item.get("url") else None,
        extra={"markdown": False, "feed_id": str(feed_id)},
    )
