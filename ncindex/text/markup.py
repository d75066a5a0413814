"""HTML and XHTML to text (web pages, e-mail bodies, EPUB chapters) by BeautifulSoup 4 (MIT)
on lxml (BSD-3-Clause): scripts and styles dropped, block elements on their own lines, table
cells separated, and — when asked — headings kept as markdown ``#`` lines.

Building BeautifulSoup's tree is the slow part (a 10 MB page took 20 s of lxml's callbacks
into BeautifulSoup here, against 1.2 s for lxml alone), so the markup is fed to the parser
in pieces with the time budget checked between them (:func:`html_text`'s ``late``): when it
is spent, the page is the markup read so far. The characters bound is looked at between them
too (``max_chars``): once the markup parsed holds more text than the characters left, the rest
is not parsed (a 20 MB page took 10 s and 660 MB here to give text cut to 2,000,000
characters; a 94 MB e-mail body 64 s and 1.9 GB); so is it once :data:`MAX_ELEMENTS` elements
are (markup of many elements and little text: 20 MB of nested ``<div><span>`` took 63 s and
1.5 GB).
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
# Elements whose strings BeautifulSoup makes a type :func:`_pieces` does not read (bs4's
# ``HTMLTreeBuilder.DEFAULT_STRING_CONTAINERS``: ruby annotations), besides ``_HTML_DROP``.
_RUBY = frozenset({"rt", "rp"})
# Table cells: a space after each.
_CELLS = frozenset({"td", "th"})
_SPACES = re.compile(r"[ \t\u00a0]+")
_BLANK_LINES = re.compile(r"\n{3,}")
# What the text's normalisation may remove or fold (``normalize_text`` in
# ncindex.text.extract): whitespace and control characters; not counted as text parsed.
_UNCOUNTED = re.compile(r"[\s\x00-\x1f\x7f-\x9f]+")
#: Elements of a page parsed at most: BeautifulSoup's tree holds each (about 750 bytes
#: here), and a page's text holds few of them (an element per 15 characters of a web page's
#: paragraphs, tables and links: 2,000,000 characters are 140,000 elements). The rest of a
#: page past them is not parsed, and its text is marked truncated.
MAX_ELEMENTS = 300_000
#: Characters (or bytes) of markup fed to the parser between two looks at the clock: about
#: 0.1 s of tree building here (10 MB took 20 s).
_FEED_PIECE = 64 * 1024


def html_text(
    data: bytes | str,
    *,
    headings: bool = False,
    late: Callable[[], bool] | None = None,
    max_chars: int | None = None,
) -> tuple[str, bool]:
    """The text of an HTML or XHTML document, one line per block element, and whether the
    markup was not all parsed (a bound below). With ``headings``,
    ``<h1>``…``<h6>`` become markdown heading lines (``# …`` to ``###### …``, set apart by
    blank lines) and ``<title>`` is dropped. ``late`` (e.g. :meth:`Blocks.late
    <ncindex.text.blocks.Blocks.late>`, which marks the text truncated) is asked before each
    :data:`_FEED_PIECE` of markup is parsed; once it answers ``True`` the rest is not read and
    the text is that of the markup before it. So is it once the markup parsed holds more than
    ``max_chars`` characters of text (``None``: no bound; the characters the caller has
    left): the text returned is then longer than ``max_chars`` (the caller cuts it) and the
    same as the whole page's up to there. So is it once :data:`MAX_ELEMENTS` elements are
    parsed. Raises :class:`ExtractionError` when the parser fails."""
    from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, XMLParsedAsHTMLWarning

    try:
        with warnings.catch_warnings():
            # advisory warnings about the input, not errors: XHTML parsed as HTML, or a
            # document so short it looks like a file name
            warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
            warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
            drop = _HTML_DROP | {"title"} if headings else _HTML_DROP
            builder = _builder(late or _never, max_chars, drop | _RUBY)
            soup = BeautifulSoup(data, builder=builder)
        raw = "".join(_pieces(soup, drop, headings))
    except Exception as exc:  # parsers raise assorted types on hostile markup
        raise ExtractionError(f"unreadable HTML: {type(exc).__name__}: {exc}") from exc
    lines = (_SPACES.sub(" ", line).strip() for line in raw.split("\n"))
    # the blank lines of nested blocks as one, the text's normalisation does (normalize_text
    # in ncindex.text.extract): the callers cut the text to the characters left before it is
    # normalised, and a page's text that fits must not be cut or marked truncated
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip("\n"), builder.cut


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


def _builder(late: Callable[[], bool], max_chars: int | None, unread: frozenset[str]) -> Any:
    """BeautifulSoup's lxml HTML tree builder, feeding the markup to lxml's parser in
    :data:`_FEED_PIECE` pieces while ``late()`` is false, the text parsed is at most
    ``max_chars`` characters (``None``: no bound) and the elements at most
    :data:`MAX_ELEMENTS`; its ``cut`` says whether a piece was left unparsed. bs4's own
    ``LXMLTreeBuilder.feed`` hands lxml the whole markup in one call (``parser_for``,
    ``feed`` and the parser target's ``start``, ``end`` and ``data`` are the tree-builder
    interface bs4's ``LXMLTreeBuilderForXML`` defines). lxml's parser is incremental: the
    tree of the pieces fed is complete once it is closed (a cut parse is not closed: what a
    cut piece ends with, half a tag or an entity, stays unread, not given as text).

    The text parsed is counted low: the characters other than whitespace and control
    characters of the strings outside the elements named in ``unread`` (those :func:`_pieces`
    leaves out), each of which the text returned holds, and its normalisation keeps
    (whitespace runs become one space or line end; only a terminal escape sequence's
    printable characters, which it removes too, are counted). So the markup is cut only
    where the whole page's text would be cut too, and a page whose text fits is read whole.
    The errors bs4's feed turns into ``ParserRejectedMarkup`` (an encoding lxml does not
    know) are turned into it here too."""
    from bs4.builder import ParserRejectedMarkup
    from bs4.builder._lxml import LXMLTreeBuilder
    from lxml import etree

    class Budgeted(LXMLTreeBuilder):
        text_chars = 0  # characters of the strings read, counted low (above)
        unread_depth = 0  # elements named in ``unread`` open around the parser's position
        elements = 0
        cut = False

        def feed(self, markup: Any) -> None:
            assert self.soup is not None  # bs4 sets it before feeding
            # BeautifulSoup feeds the markup again in its next candidate encoding when one
            # is rejected: counted afresh
            self.text_chars = self.unread_depth = self.elements = 0
            self.cut = False
            try:
                self.parser = self.parser_for(self.soup.original_encoding)
                self.parser.feed(markup[:0])  # lxml's parser closes only once fed, even nothing
                for start in range(0, len(markup), _FEED_PIECE):
                    if self._full() or late():
                        self.cut = True
                        break
                    self.parser.feed(markup[start : start + _FEED_PIECE])
                # a cut piece may end inside a tag or an entity ("<i></i>" cut after "<i><"),
                # which closing the parser would give as text ("<"): a cut parser is left
                # unclosed, its parse the strings and elements it gave the tree so far (the
                # callbacks come as it reads; bs4 closes the elements left open)
                if not self.cut:
                    self.parser.close()
            # as bs4's own feed: BeautifulSoup then tries the markup's next candidate encoding
            except (UnicodeDecodeError, LookupError, etree.ParserError) as exc:
                raise ParserRejectedMarkup(exc) from exc

        def _full(self) -> bool:
            too_long = max_chars is not None and self.text_chars > max_chars
            return too_long or self.elements > MAX_ELEMENTS

        def start(self, tag: Any, attrib: Any, nsmap: Any = {}) -> None:  # noqa: B006 (bs4's)
            self.elements += 1
            if self._name(tag) in unread:
                self.unread_depth += 1
            super().start(tag, attrib, nsmap)

        def end(self, tag: Any) -> None:
            if self._name(tag) in unread:
                self.unread_depth = max(0, self.unread_depth - 1)
            super().end(tag)

        def data(self, data: Any) -> None:
            if not self.unread_depth:
                self.text_chars += len(_UNCOUNTED.sub("", data))
            super().data(data)

        def _name(self, tag: Any) -> str:
            return str(self._getNsTag(tag)[1]).lower()

    return Budgeted()
