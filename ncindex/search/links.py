"""Links that open a document in Nextcloud's web UI: MCP's ``url`` and RCP's
``citation.uri`` (:func:`open_link`)."""

from __future__ import annotations

from ncindex.documents import DocType


def open_link(base: str | None, doc_type: str, doc_id: str, url: str | None) -> str | None:
    """A URL that opens the document in Nextcloud's web UI, or ``None`` when none is known.

    * files and notes: ``{base}/index.php/f/{file id}`` — the file permalink (a note is a
      file): nextcloud/server ``apps/files/appinfo/routes.php``, ``View#showFile`` at
      ``/f/{fileid}`` with ``'root' => ''``;
    * Deck cards: ``{base}/index.php/apps/deck/card/{card id}`` — nextcloud/deck
      ``appinfo/routes.php``, ``page#redirectToCard`` (``/card/{cardId}``);
    * News items: the item's own ``url`` (the article; guess: News' web UI has no
      per-item route to link, its item views are client-side).
    """
    if doc_type == DocType.NEWS_ITEM:
        return url
    if base is None:
        return url
    if doc_type in (DocType.FILE, DocType.NOTE) and doc_id.isdigit():
        return f"{base}/index.php/f/{doc_id}"
    if doc_type == DocType.DECK_CARD and doc_id.isdigit():
        return f"{base}/index.php/apps/deck/card/{doc_id}"
    return url
