"""HTML and XHTML to text (web pages, e-mail bodies, EPUB chapters) by BeautifulSoup 4 (MIT)
on lxml (BSD-3-Clause): scripts and styles dropped, block elements on their own lines, table
cells separated, and — when asked — headings kept as markdown ``#`` lines.

Building BeautifulSoup's tree is the slow part (a 10 MB page took 20 s of lxml's callbacks
into BeautifulSoup here, against 1.2 s for lxml alone), so the markup is fed to the parser
in pieces with the time budget checked between them (:func:`html_text`'s ``late``): when it
is spent, the page is the markup read so far.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from ncindex.errors import ExtractionError

# Elements whose content is not document text.
_HTML_DROP = frozenset(
    {"script", "style", "noscript", "template", "svg", "canvas", "iframe", "object"}
)
# Elements that start a new line (HTML Living Standard's block-level and table structure).
_HTML_BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "caption", "dd", "details", "div", "dl",
    "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
    "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary",
    "table", "tr", "ul", "title",
})  # fmt: skip
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
# Table cells: a space after each.
_CELLS = frozenset({"td", "th"})
_SPACES = re.compile(r"[ \t\u00a0]+")
#: Characters (or bytes) of markup fed to the parser between two looks at the clock: about
#: 0.1 s of tree building here (10 MB took 20 s).
_FEED_PIECE = 64 * 1024


def html_text(
    data: bytes | str, *, headings: bool = False, late: Callable[[], bool] | None = None
) -> str:
    """The text of an HTML or XHTML document, one line per block element. With ``headings``,
    ``<h1>``…``<h6>`` become markdown heading lines (``# …`` to ``###### …``, set apart by
    blank lines) and ``<title>`` is dropped. ``late`` (e.g. :meth:`Blocks.late
    <ncindex.text.blocks.Blocks.late>`, which marks the text truncated) is asked before each
    :data:`_FEED_PIECE` of markup is parsed; once it answers ``True`` the rest is not read and
    the text is that of the markup before it. Raises :class:`ExtractionError` when the parser
    fails."""
    from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, XMLParsedAsHTMLWarning

    try:
        with warnings.catch_warnings():
            # advisory warnings about the input, not errors: XHTML parsed as HTML, or a
            # document so short it looks like a file name
            warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
            warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
            soup = BeautifulSoup(data, builder=_builder(late or _never))
        drop = _HTML_DROP | {"title"} if headings else _HTML_DROP
        raw = "".join(_pieces(soup, drop, headings))
    except Exception as exc:  # parsers raise assorted types on hostile markup
        raise ExtractionError(f"unreadable HTML: {type(exc).__name__}: {exc}") from exc
    lines = (_SPACES.sub(" ", line).strip() for line in raw.split("\n"))
    return "\n".join(lines)


def _pieces(root: Any, drop: frozenset[str], headings: bool) -> Iterator[str]:
    """The text of ``root``'s content, in order: its strings (``NavigableString`` and
    ``CData``, the types bs4's ``get_text`` reads: not comments, doctypes or ruby annotations),
    a line end for a ``<br>`` and around each block element, a space after a table cell, and
    with ``headings`` a heading as one ``#`` line set apart by blank lines; the elements named
    in ``drop`` left out.

    One walk with its own stack (no recursion: nesting is the page's to choose), reading the
    tree as it is: marking it up first (``insert``/``append`` of separators after ``find_all``
    by a list of names) took longer than parsing it (5 s for 10 MB)."""
    from bs4.element import CData, NavigableString, Tag

    stack: list[tuple[Iterator[Any], str]] = [(iter(root.contents), "")]
    while stack:
        children, closing = stack[-1]
        node = next(children, None)
        if node is None:
            stack.pop()
            yield closing
        elif isinstance(node, Tag):
            name = node.name
            if name in drop:
                continue
            if headings and name in _HEADINGS:  # one line, whatever the markup inside
                title = " ".join(" ".join(_pieces(node, drop, False)).split())
                line = f"\n\n{'#' * int(name[1])} {title}\n\n" if title else ""
                yield f"\n{line}\n"  # a block too
                continue
            if name == "br":
                yield "\n"
            opening = "\n" if name in _HTML_BLOCKS else ""
            yield opening
            stack.append((iter(node.contents), " " if name in _CELLS else opening))
        elif type(node) in (NavigableString, CData):
            yield str(node)


def _never() -> bool:
    return False


def _builder(late: Callable[[], bool]) -> Any:
    """BeautifulSoup's lxml HTML tree builder, feeding the markup to lxml's parser in
    :data:`_FEED_PIECE` pieces while ``late()`` is false (bs4's own ``LXMLTreeBuilder.feed``
    hands lxml the whole markup in one call; ``parser_for`` and ``feed`` are the tree-builder
    interface bs4's ``TreeBuilder`` defines). lxml's parser is incremental: the tree of the
    pieces fed is complete once it is closed. The errors bs4's feed turns into
    ``ParserRejectedMarkup`` (an encoding lxml does not know) are turned into it here too."""
    from bs4.builder import ParserRejectedMarkup
    from bs4.builder._lxml import LXMLTreeBuilder
    from lxml import etree

    class Budgeted(LXMLTreeBuilder):
        def feed(self, markup: Any) -> None:
            assert self.soup is not None  # bs4 sets it before feeding
            try:
                self.parser = self.parser_for(self.soup.original_encoding)
                self.parser.feed(markup[:0])  # lxml's parser closes only once fed, even nothing
                for start in range(0, len(markup), _FEED_PIECE):
                    if late():
                        break
                    self.parser.feed(markup[start : start + _FEED_PIECE])
                self.parser.close()
            # as bs4's own feed: BeautifulSoup then tries the markup's next candidate encoding
            except (UnicodeDecodeError, LookupError, etree.ParserError) as exc:
                raise ParserRejectedMarkup(exc) from exc

    return Budgeted()
