"""HTML and XHTML to text (web pages, e-mail bodies, EPUB chapters) by BeautifulSoup 4 (MIT)
on lxml (BSD-3-Clause): scripts and styles dropped, block elements on their own lines, table
cells separated, and — when asked — headings kept as markdown ``#`` lines."""

from __future__ import annotations

import re
import warnings

from ncindex.errors import ExtractionError

# Elements whose content is not document text.
_HTML_DROP = ("script", "style", "noscript", "template", "svg", "canvas", "iframe", "object")
# Elements that start a new line (HTML Living Standard's block-level and table structure).
_HTML_BLOCKS = (
    "address", "article", "aside", "blockquote", "caption", "dd", "details", "div", "dl",
    "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
    "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary",
    "table", "tr", "ul", "title",
)  # fmt: skip
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_SPACES = re.compile(r"[ \t\u00a0]+")


def html_text(data: bytes | str, *, headings: bool = False) -> str:
    """The text of an HTML or XHTML document, one line per block element. With ``headings``,
    ``<h1>``…``<h6>`` become markdown heading lines (``# …`` to ``###### …``, set apart by
    blank lines) and ``<title>`` is dropped. Raises :class:`ExtractionError` when the parser
    fails."""
    from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, XMLParsedAsHTMLWarning

    try:
        with warnings.catch_warnings():
            # advisory warnings about the input, not errors: XHTML parsed as HTML, or a
            # document so short it looks like a file name
            warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
            warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
            soup = BeautifulSoup(data, "lxml")
        for tag in soup.find_all(_HTML_DROP + (("title",) if headings else ())):
            tag.decompose()
        # separators go inside the tags (insert and append are O(children of the tag)):
        # insert_before and replace_with look the tag up among its parent's children,
        # quadratic for 20,000 sibling paragraphs (14 s, found by fuzzing)
        for tag in soup.find_all("br"):
            tag.insert(0, "\n")
        for tag in soup.find_all(("td", "th")):
            tag.append(" ")
        if headings:
            for tag in soup.find_all(_HEADINGS):  # one line, whatever the markup inside
                title = " ".join(tag.get_text(" ").split())
                tag.clear()
                tag.append(f"\n\n{'#' * int(tag.name[1])} {title}\n\n" if title else "")
        for tag in soup.find_all(_HTML_BLOCKS):
            tag.insert(0, "\n")
            tag.append("\n")
        raw = soup.get_text()
    except Exception as exc:  # parsers raise assorted types on hostile markup
        raise ExtractionError(f"unreadable HTML: {type(exc).__name__}: {exc}") from exc
    lines = (_SPACES.sub(" ", line).strip() for line in raw.split("\n"))
    return "\n".join(lines)
