"""News items as documents (doc type ``news_item``; DESIGN §4, reference §5).

News v1-3 has no single-item GET and no change feed: items are read by list. One item is found
with ``GET /items?type=3&id=0&batchSize=1&offset=<id+1>&getRead=true`` (all feeds, newest
first, ``id < offset``: the first item is the one asked for if it still exists); a feed's items
with ``type=0&id=<feed>&batchSize=-1``. Item ids are per user (each user's row), so an item's
``acl`` is its one user.

Text: ``"{title}\\n\\n{body as text}"`` (:func:`~ncindex.documents.titled_text`, the HTML body
through :func:`extract_text`); payload
extras ``feed_id`` (a string: keyword-indexed), ``url`` and the HTML extraction's version
(:mod:`ncindex.text.versions`: a scan re-reads an item read by an older one); ``etag`` is
``"{lastModified}-{contentHash}"`` (read and star changes bump ``lastModified``; the content
hash keeps the text from being embedded again). News has no webhooks: the scan lists every
item of every feed in one request.
"""

from __future__ import annotations

from typing import Any, ClassVar

import structlog

from ncindex.documents import DocRef, DocType, SourceDocument, titled_text
from ncindex.errors import NextcloudProtocolError
from ncindex.nextcloud.apps import find_news_item, news_items
from ncindex.nextcloud.client import NextcloudClient
from ncindex.nextcloud.webdav import DavEntry
from ncindex.sources.base import (
    Checked,
    Context,
    Fetched,
    Listing,
    ScanMemory,
    Seen,
    Source,
    Verdict,
    listed_id,
)
from ncindex.text.extract import HTML, extract_text
from ncindex.text.versions import extraction_fields

log = structlog.get_logger(__name__)


def list_items(client: NextcloudClient, feed_id: int | None = None) -> list[dict[str, Any]]:
    """Every item (read ones included) of feed ``feed_id``, or of all feeds when ``None``."""
    params = {"type": 0 if feed_id is not None else 3, "id": int(feed_id or 0)}
    return news_items(client, params | {"batchSize": -1, "getRead": "true"})


def item_modified(item: dict[str, Any]) -> int:
    """An item JSON's ``lastModified`` (``pubDate`` when it has none; Unix seconds); raises
    ``ValueError``/``TypeError`` for one that is not a number."""
    return int(item.get("lastModified") or item.get("pubDate") or 0)


def news_etag(item: dict[str, Any]) -> str:
    """The etag stored for a News item: ``"{lastModified}-{contentHash}"`` (``pubDate`` when it
    has no ``lastModified``), what the reconcile scan compares with."""
    return f"{item_modified(item)}-{item.get('contentHash') or ''}"


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
    return SourceDocument(
        ref=DocRef(DocType.NEWS_ITEM, str(item_id)),
        user=user,
        owner=user,
        title=title,
        text=titled_text(title, text)[:max_chars],
        etag=news_etag(item),
        modified_at=item_modified(item),
        mime_type="text/html",
        url=str(item["url"]) if item.get("url") else None,
        # its body is read as HTML (an empty one too: nothing a newer reading would improve)
        extra={"feed_id": str(feed_id)} | extraction_fields(HTML),
    )


class NewsItemSource(Source):
    """News items: listed all at once, fetched by the item finder."""

    doc_type: ClassVar[DocType] = DocType.NEWS_ITEM
    app = "news"
    extracts = True

    def list(
        self,
        ctx: Context,
        client: NextcloudClient,
        memory: ScanMemory,
        resume: Listing | None = None,
        limit: int | None = None,
    ) -> Listing:
        """One request for all items (``type=3&batchSize=-1&getRead=true``), each with the
        etag :func:`news_etag` gives. Always in full: ``resume`` and ``limit`` do not
        apply."""
        listing = Listing()
        items = list_items(client)
        listing.requests += 1
        for item in items:
            doc_id = listed_id(item.get("id"), "News item")
            try:
                etag = news_etag(item)
            except (TypeError, ValueError) as exc:
                raise NextcloudProtocolError(f"News item {doc_id}: {exc}") from None
            listing.docs[doc_id] = Seen(doc_id, etag, None)
        return listing

    def fetch(
        self,
        ctx: Context,
        client: NextcloudClient,
        ref: DocRef,
        current: dict[str, Any] | None,
        entry: DavEntry | None = None,
    ) -> Fetched:
        """The item in any feed (:func:`~ncindex.nextcloud.apps.find_news_item`: one
        request; ``NotFound`` when purged, its feed deleted, or not the user's), then
        :func:`item_document` as ``client.user``."""
        item = find_news_item(client, int(ref.doc_id))
        user = client.user or ""
        return Fetched(item_document(user, item, ctx.settings.max_document_chars))

    def verify(self, client: NextcloudClient, payload: dict[str, Any]) -> Checked:
        """One News item-list request below the item's id (no single-item GET exists); a
        payload without ``feed_id`` cannot be checked (``UNVERIFIED``)."""
        feed = payload.get("feed_id")
        if feed is None:
            log.warning("news_item_without_feed", doc_key=payload.get("doc_key"))
            return Checked(Verdict.UNVERIFIED)
        find_news_item(client, int(payload["doc_id"]), int(feed))
        return Checked(Verdict.KEPT)


SOURCE = NewsItemSource()
