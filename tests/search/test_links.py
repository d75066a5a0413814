"""Links that open a result in Nextcloud's web UI (``ncindex.search.links.open_link``)."""

from __future__ import annotations

import pytest

from ncindex.search.links import open_link

BASE = "https://cloud.example"


@pytest.mark.parametrize(
    ("doc_type", "doc_id", "url", "expected"),
    [
        ("file", "12", None, f"{BASE}/index.php/f/12"),
        # the Notes app's own route (nextcloud/notes appinfo/routes.php page#index /note/{id})
        ("note", "13", None, f"{BASE}/index.php/apps/notes/note/13"),
        ("deck_card", "7", None, f"{BASE}/index.php/apps/deck/card/7"),
        ("news_item", "9", "https://news.example/9", "https://news.example/9"),
        # a feed's link is the article's only when it is http(s): the page makes it clickable
        ("news_item", "9", "javascript:alert(1)", None),
        ("news_item", "9", " JavaScript:alert(1)", None),
        ("news_item", "9", "data:text/html,<script>x</script>", None),
        ("news_item", "9", "//news.example/9", None),
        ("news_item", "9", None, None),
        ("file", "not-a-number", None, None),
    ],
)
def test_open_link(doc_type: str, doc_id: str, url: str | None, expected: str | None) -> None:
    assert open_link(BASE, doc_type, doc_id, url) == expected


def test_without_a_nextcloud_url_only_an_articles_link_is_known() -> None:
    assert open_link(None, "file", "12", None) is None
    assert open_link(None, "news_item", "9", "http://news.example/9") == "http://news.example/9"
