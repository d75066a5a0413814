"""Links that open a document in Nextcloud's web UI (:func:`open_link`): the search API's
``open_url``, which the search page links, MCP's ``url`` and RCP's ``citation.uri``."""

from __future__ import annotations

from ncindex.documents import DocType
from ncindex.urls import is_web_url


def open_link(base: str | None, doc_type: str, doc_id: str, url: str | None) -> str | None:
    """A URL that opens the document in Nextcloud's web UI, or ``None`` when none is known.

    ``base`` is the Nextcloud URL (``NCINDEX_NEXTCLOUD_URL``, no trailing slash); ``url`` is
    the document's stored link (News items' article, as the feed gave it), used where no route
    is known and only when it is an http(s) URL: a feed may hold ``javascript:`` or ``data:``
    links, which the search page would make clickable.

    * files: ``{base}/index.php/f/{file id}`` — the file permalink: nextcloud/server
      ``apps/files/appinfo/routes.php``, ``View#showFile`` at ``/f/{fileid}`` with
      ``'root' => ''``;
    * notes: ``{base}/index.php/apps/notes/note/{note id}`` — the note in the Notes app:
      nextcloud/notes ``appinfo/routes.php``, ``page#index`` at ``/note/{id}`` (``\\d+``);
    * Deck cards: ``{base}/index.php/apps/deck/card/{card id}`` — nextcloud/deck
      ``appinfo/routes.php``, ``page#redirectToCard`` (``/card/{cardId}``);
    * News items: the item's own ``url`` (the article). News 27.0.0 and later also open an
      item at ``/apps/news/item/{itemId}`` (nextcloud/news ``appinfo/routes.php``,
      ``page#index`` postfix ``view.itemid``, added in 27.0.0), but older releases answer that
      route 404 and ncindex does not know the installed release.
    """
    if doc_type == DocType.NEWS_ITEM or base is None or not doc_id.isdigit():
        return url if is_web_url(url) else None
    if doc_type == DocType.FILE:
        return f"{base}/index.php/f/{doc_id}"
    if doc_type == DocType.NOTE:
        return f"{base}/index.php/apps/notes/note/{doc_id}"
    if doc_type == DocType.DECK_CARD:
        return f"{base}/index.php/apps/deck/card/{doc_id}"
    return url if is_web_url(url) else None
