"""HTML and XHTML to text (web pages, e-mail bodies, EPUB chapters) by lxml's HTML parser
(BSD-3-Clause) with an event handler as its target: scripts and styles dropped, block
elements on their own lines, table cells separated, and — when asked — headings kept as
markdown ``#`` lines.

No tree is built: the handler keeps the names of the elements open around the parser's
position and the text so far (memory the text's and the nesting's), reading the events
libxml2 gives as BeautifulSoup 4's tree did when it was built from them (bs4's
``LXMLTreeBuilderForXML`` target and ``BeautifulSoup.endData``/``_popToTag``: the same
strings, whitespace rules and separators; the text is the same as its tree walk gave).
The markup is fed to the parser in pieces with the time budget checked between them
(:func:`html_text`'s ``late``): when it is spent, the page is the markup read so far. The
characters bound is looked at between them too (``max_chars``): once the markup parsed holds
more text than the characters left, the rest is not parsed.

Measured here (a fresh process per page, ``max_chars`` 2,000,000, peak RSS over the process
before parsing, which holds the page; seconds on 2 shared cores under load, the two run one
after the other, and the handler's up to 2.6 times these in another run), BeautifulSoup's
tree with the 300,000 elements bound it needed before → this handler:

- a 4.2 MB table of 70,000 rows × 5 short cells: 11 s, +294 MB, 599,000 of its 833,000
  characters (truncated) → 1.3 s, +5 MB, all of them;
- 20 MB of nested ``<div><span>``: 9 s, +186 MB (truncated) → 0.3 s, +0 MB (truncated at
  :data:`MAX_DEPTH`; read whole without that bound: 7 s, +99 MB);
- 3,000,000 empty ``<b></b>`` (21 MB): 10 s, +121 MB (truncated) → 6 s, +16 MB, whole;
- ``<b>xy</b>`` × 1,200,000 (11 MB): 8 s, +299 MB, 612,000 characters → 2.6 s, +19 MB,
  2,010,000 (both truncated: the characters bound);
- a 1 MB article (headings, paragraphs, links): 0.7 s, +30 MB → 0.1 s, +4 MB, the same
  797,367 characters.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from io import StringIO
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
# Ruby annotations: their strings are not text (bs4's
# ``HTMLTreeBuilder.DEFAULT_STRING_CONTAINERS`` gave them a type its tree walk did not read),
# though the elements inside them still separate lines.
_RUBY = frozenset({"rt", "rp"})
# Table cells: a space after each.
_CELLS = frozenset({"td", "th"})
# Elements inside which a string of whitespace is kept as it is (bs4's
# ``HTMLTreeBuilder.DEFAULT_PRESERVE_WHITESPACE_TAGS``); elsewhere one of ASCII spaces only
# (:data:`_ASCII_SPACES`) becomes a line end if it holds one, else a space.
_PRESERVE = frozenset({"pre", "textarea"})
_ASCII_SPACES = re.compile(r"[\x20\n\t\x0c\r]*")
_SPACES = re.compile(r"[ \t\u00a0]+")
_BLANK_LINES = re.compile(r"\n{3,}")
# What the text's normalisation may remove or fold (``normalize_text`` in
# ncindex.text.extract): whitespace and control characters; not counted as text parsed.
_UNCOUNTED = re.compile(r"[\s\x00-\x1f\x7f-\x9f]+")
#: Elements open around the parser's position at most: past them the rest of the markup is
#: not parsed and the text is marked truncated. Each open element costs 20 to 30 bytes here
#: (its name in :class:`_Text`'s list and libxml2's own stacks): 20 MB of unclosed ``<b>``
#: (6.7 million open) took 140 MB, 7 bytes a byte of markup, so it is bounded; 300,000
#: open took 15 MB. Pages nest tens deep, legacy ones with unclosed ``<font>``
#: thousands; a page this bound cuts was cut by the 300,000 elements in all that the tree
#: needed before.
MAX_DEPTH = 300_000
#: Characters (or bytes) of markup fed to the parser between two looks at the clock, while
#: at most :data:`_DEEP` elements are open.
_FEED_PIECE = 64 * 1024
#: Elements open past which the pieces shrink (to :data:`_FEED_PIECE` × ``_DEEP`` / the
#: elements open, at least :data:`_MIN_PIECE`): libxml2 looks for an end tag's element
#: among all those open (``htmlParseEndTag`` in its HTMLparser.c), so a piece costs its end
#: tags times the elements open. With 290,000 ``<b>`` open a 64 KiB piece of ``</i>`` took
#: 7.6 s here, the clock looked at only after it (four: 25 s); in the pieces this bounds
#: the slowest took 0.4 s (0.9 s of ``</x>``), on 2 cores shared with other work.
_DEEP = 4_096
_MIN_PIECE = 1024
#: Characters (or bytes) of markup fed without an event from the parser past which the rest
#: is not parsed and the text is marked truncated: libxml2 gives a start tag once it has read
#: all of it, and lxml then makes its attributes a dict before the handler sees them. 50 MB
#: of attributes on one tag took +807 MiB peak RSS (one name repeated) to +997 MiB (distinct
#: names), of which 439 to 589 MiB stayed in the process (libxml2's dictionary of the thread
#: keeps every name); cut here, +106 to 121 MiB (the markup held), in under a second (was
#: 4.6 to 18.8 s). A tag just under it, 15.9 MB of distinct names, still takes +368 MiB
#: (209 MiB stay): within what the index worker's pool process has left under the chart's
#: limit above NCINDEX_WORKER_MAX_MEMORY_PER_CHILD, which then replaces it. Text, ``<pre>``,
#: ``<script>`` and ``<style>`` give their events as they are read (22 MB of script was read
#: whole). A long attribute value or comment is not cut there but its tail left unfed
#: (:func:`_run_end`): a 17 MB ``data:`` URI, a 20 MB SVG path or comment of such a run cost
#: +53 to 62 MiB and 0.5 s read whole, and cut here the rest of the page was lost.
MAX_UNHEARD = 16 * 1024 * 1024
#: The characters that end a run of markup :func:`_run_end` leaves unfed: quotes (an
#: attribute value ends at its own) and angle brackets (a tag or comment ends at ``>``).
_RUN_ENDS: dict[type, re.Pattern[Any]] = {str: re.compile("[\"'<>]"), bytes: re.compile(b"[\"'<>]")}
#: Markup fed after a run left unfed without an event from the parser past which the page is
#: cut: the value's tag or the comment ends within a few characters of the run's end.
_AFTER_RUN = _FEED_PIECE


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
    :data:`_FEED_PIECE` of markup (less when many elements are open) is parsed; once it
    answers ``True`` the rest is not read and the text is that of the markup before it. So
    is it once the markup parsed holds more than ``max_chars`` characters of text (``None``:
    no bound; the characters the caller has left): the text returned is then longer than
    ``max_chars`` (the caller cuts it) and the same as the whole page's up to there. So is
    it once more than :data:`MAX_DEPTH` elements are open, and once :data:`MAX_UNHEARD`
    of markup has been fed without the parser giving an event (one tag or comment that long).

    ``str`` markup is parsed as it is; ``bytes`` in the encodings bs4's ``EncodingDetector``
    names in turn (a byte-order mark, a declaration in the markup, a guess, UTF-8,
    windows-1252), the next one tried when lxml rejects one (an encoding it does not know),
    as BeautifulSoup did. Raises :class:`ExtractionError` when the parser fails."""
    drop = _HTML_DROP | {"title"} if headings else _HTML_DROP
    try:
        rejected: list[Exception] = []
        for markup, encoding in _candidates(data):
            handler = _Text(drop, headings)
            try:
                cut = _parse(markup, encoding, handler, late or _never, max_chars)
            except _Rejected as exc:
                rejected.append(exc)
                continue
            raw = handler.finish()
            break
        else:
            raise _Rejected("; ".join(map(str, rejected)))
    except Exception as exc:  # parsers raise assorted types on hostile markup
        raise ExtractionError(f"unreadable HTML: {type(exc).__name__}: {exc}") from exc
    lines = (_SPACES.sub(" ", line).strip() for line in raw.split("\n"))
    # the blank lines of nested blocks as one, the text's normalisation does (normalize_text
    # in ncindex.text.extract): the callers cut the text to the characters left before it is
    # normalised, and a page's text that fits must not be cut or marked truncated
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip("\n"), cut


class _Rejected(Exception):
    """lxml rejected the markup in an encoding (bs4's ``ParserRejectedMarkup``)."""


def _candidates(data: bytes | str) -> Iterator[tuple[bytes | str, str | None]]:
    """The markup and the encoding lxml is told, in the order they are tried: bs4's
    ``LXMLTreeBuilderForXML.prepare_markup`` for HTML (a ``str`` without its byte-order mark
    and then as UTF-8; ``bytes`` in each of ``EncodingDetector.encodings``)."""
    if isinstance(data, str):
        yield data.removeprefix("\N{BYTE ORDER MARK}"), None
        yield data.encode("utf8"), "utf8"
        return
    from bs4.dammit import EncodingDetector

    detector = EncodingDetector(data, is_html=True)
    for encoding in detector.encodings:
        yield detector.markup, encoding


def _parse(
    markup: bytes | str,
    encoding: str | None,
    handler: _Text,
    late: Callable[[], bool],
    max_chars: int | None,
) -> bool:
    """Feed ``markup`` to lxml's HTML parser (the options bs4's ``LXMLTreeBuilder`` gives it,
    and ``huge_tree``: a comment of any length stays a comment, below) in
    :data:`_FEED_PIECE` pieces, ``handler`` its target, while ``late()`` is false, the
    text parsed is at most ``max_chars`` characters (``None``: no bound), the elements
    open at most :data:`MAX_DEPTH` (smaller pieces when many are: :data:`_DEEP`) and the
    markup fed since the parser's last event at most :data:`MAX_UNHEARD`; whether a piece
    was left unparsed. lxml's parser is
    incremental: the events of the pieces fed are all given once it is closed. A cut parse
    is not closed: what a cut piece ends with, half a tag or an entity ("<i></i>" cut after
    "<i><"), stays unread, which closing the parser would give as text ("<"). Raises
    :class:`_Rejected` for the errors bs4's feed turned into ``ParserRejectedMarkup`` (an
    encoding lxml does not know)."""
    from lxml import etree

    try:
        # types-lxml's ParserTarget protocol asks for start_ns and end_ns too, which lxml
        # calls only when a target has them (HTML has no namespaces)
        target: Any = handler
        # huge_tree (libxml2's HTML_PARSE_HUGE): without it libxml2 2.14 gives a comment, a
        # processing instruction or a bogus comment ("<![CDATA[…]]>", "<!…>") longer than
        # its 10,000,000 characters limit (XML_MAX_TEXT_LENGTH) as text, in one string once
        # it ends (seen here): hidden markup read as the page's, past max_chars at once (a
        # 50 MB comment: 52 million characters, +529 MB peak RSS; now +156 MB, no text). An
        # attribute's value past the limit is held now too (50 MB: +156 MB, was +6 MB):
        # about 3 bytes a byte of markup. Both are cut at MAX_UNHEARD before either limit
        parser = etree.HTMLParser(target=target, recover=True, encoding=encoding, huge_tree=True)
        parser.feed(markup[:0])  # lxml's parser closes only once fed, even nothing
        start = 0
        events, heard = 0, 0  # the handler's events, and the markup fed when one came last
        unheard = MAX_UNHEARD  # the markup that may be fed from there without an event
        while start < len(markup):
            if start - heard > unheard:
                end = _run_end(markup, start) if unheard == MAX_UNHEARD else None
                if end is None:
                    return True
                start, heard, unheard = end, end, _AFTER_RUN
            too_long = max_chars is not None and handler.counted > max_chars
            if too_long or handler.depth > MAX_DEPTH or late():
                return True
            piece = _FEED_PIECE * _DEEP // max(handler.depth, _DEEP)
            piece = max(piece, _MIN_PIECE)
            parser.feed(markup[start : start + piece])
            start += piece
            if handler.events != events:
                events, heard, unheard = handler.events, start, MAX_UNHEARD
        parser.close()
    except (UnicodeDecodeError, LookupError, etree.ParserError) as exc:
        raise _Rejected(exc) from exc
    return False


def _run_end(markup: bytes | str, start: int) -> int | None:
    """Where to go on feeding ``markup`` when :data:`MAX_UNHEARD` of it up to ``start`` gave
    the parser no event, or ``None`` to cut the page there: when the last half of that is one
    run without quotes or angle brackets (:data:`_RUN_ENDS`) opened as an attribute value (a
    quote after ``=``, or after ``(`` as CSS's ``url('…`` in a ``style``; or ``<`` and a tag
    whose last attribute, past the last whitespace, is an unquoted ``name=`` value) or as a
    comment (``<!--``), the run is taken to go on to the next such character at or after
    ``start``, and the place 3 characters before it is returned (the ``--`` of a comment's
    ``-->`` or ``--!>`` is fed again). The parser then reads that value or comment cut short
    (its text is not the page's: nothing is lost) and what follows. Any other silence (a tag
    of many attributes, which lxml makes a dict of), a run that never ends, is cut. A quoted
    value and a comment end only at those characters, an unquoted value at whitespace or
    ``>`` (which ends its tag: only attributes are skipped), in libxml2 2.14's HTML5
    tokenizer (``htmlParseAttValue``, ``htmlParseComment`` in its HTMLparser.c) as in WHATWG
    HTML §13.2.5 (attribute value states, comment state)."""
    half = start - MAX_UNHEARD // 2
    if _RUN_ENDS[type(markup)].search(markup, half, start) is not None:
        return None
    opener = _last(markup, "\"'<>", 0, start)
    head = _latin(markup[opener : opener + 4])
    before = _latin(markup[max(opener - 64, 0) : opener]).rstrip()
    quoted = head[:1] in "\"'" and before[-1:] in ("=", "(")
    unquoted = False
    if head[:1] == "<" and head[1:2].isalpha():
        space = _last(markup, " \t\n\x0c\r", opener, start)
        unquoted = opener < space < half and bool(
            _UNQUOTED.match(_latin(markup[space + 1 : space + 257]))
        )
    if opener < 0 or not (quoted or unquoted or head == "<!--"):
        return None
    found = _RUN_ENDS[type(markup)].search(markup, start)
    return None if found is None else max(found.start() - 3, start)


#: An attribute whose value is unquoted, at its start: ``name=`` (WHATWG HTML §13.2.5.32-.34).
_UNQUOTED = re.compile(r"[^\s\"'<>=/]+=[^\s\"'<>=`]")


def _last(markup: bytes | str, chars: str, low: int, high: int) -> int:
    """The place of the last of ``chars`` (ASCII) in ``markup[low:high]``, -1 if none is."""
    if isinstance(markup, str):
        return max(markup.rfind(c, low, high) for c in chars)
    return max(markup.rfind(c, low, high) for c in chars.encode("ascii"))


def _latin(piece: bytes | str) -> str:
    """``piece`` as text: bytes as Latin-1, whose ASCII is the markup's in every encoding
    :func:`_candidates` gives lxml but UTF-16's (whose quotes and angle brackets are not one
    byte: no run is ever found there)."""
    return piece if isinstance(piece, str) else piece.decode("latin-1")


class _Text:
    """lxml's parser target that writes the text of the events it is given (``start``,
    ``end``, ``data``; ``comment``, ``pi`` and ``doctype`` only end a string), read as
    BeautifulSoup's tree walk read the tree built from them: the strings (the ``data`` between
    two other events joined as one; one of ASCII whitespace only, outside ``<pre>`` and
    ``<textarea>``, a line end if it holds one, else a space) outside the elements named in
    ``drop`` and ruby annotations, a line end for a ``<br>`` and around each block element, a
    space after a table cell, and with ``headings`` a heading as one ``#`` line of its
    strings' words set apart by blank lines. An end closes the elements open down to the
    latest of its name, none if none is (bs4's ``_popToTag``).

    It holds the open elements' names (``list`` of ``str``), counts of them and the text:
    ``counted`` is the text's characters other than whitespace and control characters, which
    its normalisation keeps (whitespace runs become one space or line end; only a terminal
    escape sequence's printable characters, which it removes too, are counted), so the markup
    is cut only where the whole page's text would be cut too."""

    def __init__(self, drop: frozenset[str], headings: bool) -> None:
        self._drop = drop
        self._headings = headings
        self._open: list[str] = []
        self._opened: dict[str, int] = {}  # open elements of each name
        self._hidden = 0  # open elements named in drop
        self._ruby = 0  # open ruby annotations
        self._kept = 0  # open <pre> and <textarea>
        self._heading: tuple[int, list[str]] | None = None  # its place in _open, its words
        self._data: list[str] = []  # the string being read
        self._text = StringIO()
        self.counted = 0
        self.events = 0  # the parser's calls so far (_parse: a tag it reads for long)

    @property
    def depth(self) -> int:
        """The elements open."""
        return len(self._open)

    def start(self, tag: str, attrib: Any) -> None:
        self.events += 1
        self._string()
        tag = sys.intern(tag)  # one str of a name open many times (lxml gives a new one)
        self._open.append(tag)
        self._opened[tag] = self._opened.get(tag, 0) + 1
        self._kept += tag in _PRESERVE
        if self._hidden or tag in self._drop:
            self._hidden += tag in self._drop
        elif self._heading is None:
            self._ruby += tag in _RUBY
            if self._headings and tag in _HEADINGS:  # one line, whatever the markup inside
                self._heading = (len(self._open) - 1, [])
            elif tag == "br" or tag in _HTML_BLOCKS:  # a <br> is no block: a line end once
                self._text.write("\n")
        else:
            self._ruby += tag in _RUBY

    def end(self, tag: str) -> None:
        self.events += 1
        self._string()
        while self._opened.get(tag):
            if self._close() == tag:
                break

    def data(self, data: str) -> None:
        self.events += 1
        if self._hidden or self._ruby:  # not text: not held (a script's may be megabytes)
            return
        self._data.append(data)
        self.counted += len(_UNCOUNTED.sub("", data))

    def comment(self, text: str) -> None:
        self.events += 1
        self._string()

    def pi(self, target: str, data: str) -> None:
        self.events += 1
        self._string()

    def doctype(self, name: str, pubid: str, system: str) -> None:
        self.events += 1
        self._string()

    def close(self) -> None:
        """lxml's parser is closed: :meth:`finish` reads what is left."""

    def finish(self) -> str:
        """The text, the elements still open closed (a cut parse leaves some)."""
        self._string()
        while self._open:
            self._close()
        return self._text.getvalue()

    def _string(self) -> None:
        if not self._data:
            return
        string = "".join(self._data)
        self._data.clear()
        if not self._kept and _ASCII_SPACES.fullmatch(string):
            string = "\n" if "\n" in string else " "
        if self._heading is not None:
            self._heading[1].extend(string.split())
        else:
            self._text.write(string)

    def _close(self) -> str:
        tag = self._open.pop()
        if self._opened[tag] > 1:
            self._opened[tag] -= 1
        else:  # only the names open are held
            del self._opened[tag]
        self._kept -= tag in _PRESERVE
        if self._hidden:
            self._hidden -= tag in self._drop
            return tag
        self._ruby -= tag in _RUBY
        if self._heading is not None:
            place, words = self._heading
            if place == len(self._open):
                title = " ".join(words)
                line = f"\n\n{'#' * int(tag[1])} {title}\n\n" if title else ""
                self._text.write(f"\n{line}\n")  # a block too
                self._heading = None
        elif tag in _CELLS:
            self._text.write(" ")
        elif tag in _HTML_BLOCKS:
            self._text.write("\n")
        return tag


def _never() -> bool:
    return False
