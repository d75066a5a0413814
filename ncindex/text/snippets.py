"""Search-result snippets: the best window of a chunk, HTML-escaped, matches in ``<mark>``
(DESIGN §9).

Safe by construction: the text is cleaned of control and invisible format characters, then
every piece of it is HTML-escaped (``&``, ``<``, ``>``, ``"``, ``'``), and only then are the
``<mark>``/``</mark>`` tags put around matches. So the only tags in a snippet are balanced
``<mark>`` pairs that this module wrote; a ``<mark>`` or ``<script>`` in the document or the
query comes out as ``&lt;mark&gt;`` text.

Terms are found as BM25 finds them, by its analysis chain (:mod:`ncindex.embedding.analyzer`):
a word matches a query term when their terms are equal (``indexing`` matches ``indexed``,
``IL-6`` matches ``IL-6``, ``munchen`` matches ``München``, ``烤鸭`` the same two characters in
``北京烤鸭很好吃``); stop words are never marked. Where a whole compound and one of its parts
both match, the whole is marked. The analyzer reads the text as it was indexed, before the
cleaning, and the matches are carried over to the cleaned text: cleaning removes characters
that separate words for the analyzer (a control character, a private-use one), and analysing
the cleaned text marked words BM25 had not matched and missed those it had.

A snippet keeps the text's line breaks, each run of whitespace holding one as one ``\n`` (the
rest as one space, as :func:`clean_text` makes every run): where a line starts is what tells a
Markdown list item or heading from the same characters in prose (CommonMark 0.31 §5.2, "List
items", and §4.2, "ATX headings", read at the start of a line), and the search page hides a
note's syntax by it. In HTML a ``\n`` shows as a space. A window cut at a line break keeps it
beside its ellipsis (``"…\n* item"``, ``"line\n…"``): without it the page could not tell a
line's first ``*`` (a bullet) from one inside a line (``"2 * 3"``), nor a backslash ending a line
(a hard line break, §6.7) from one ending the snippet's text. A run holding a blank line (two
line breaks or more) is ``\n\n``: a paragraph ends there (§4.8), and a backslash before it is
no hard break. A Markdown text's snippet (``markdown``: a note, a Deck card, a ``.md`` file)
also keeps the indentation of its code lines (:class:`_CodeLines`), and one whose window starts
inside a fenced code block whose opening line it left out starts with that block's fence
(:func:`snippet`), so that the snippet read alone as Markdown is code where the text is.
"""

from __future__ import annotations

import bisect
import html
import re
from dataclasses import dataclass, field

import unicodedata2

from ncindex.embedding import analyzer

ELLIPSIS = "…"
MARK_OPEN, MARK_CLOSE = "<mark>", "</mark>"
_MARKS = re.compile(f"{MARK_OPEN}(.*?){MARK_CLOSE}", re.DOTALL)
# Unicode categories removed before anything else: controls (Cc), invisible format characters
# such as bidi overrides and zero-width joiners (Cf), surrogates (Cs), private use (Co) and
# unassigned code points (Cn) — none is text a reader should see, and some can disguise text.
# Read in unicodedata2's database (the newest Unicode's, 18.0), not the stdlib's (Python 3.11's
# is Unicode 14.0): a character assigned since, such as the emoji U+1FA77 (Unicode 15), was
# dropped from every snippet as unassigned. (The BM25 analyzer keeps the stdlib's: its terms
# are versioned with the index, ANALYZER_VERSION, and a new database would change them.)
_STRIP_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
# The ASCII characters of those categories (all Cc) but the whitespace ones, \t \n \x0b \x0c \r,
# which become spaces like all whitespace.
_ASCII_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
# A line ending (CommonMark 0.31 §2.1: a line feed, a carriage return, or both).
_LINE_ENDING = re.compile(r"\r\n|[\n\r]")
# A line's indentation (CommonMark 0.31 §2.2: spaces, and tabs to the next multiple of 4).
_INDENT = re.compile(r"[ \t]*")
# A fenced code block's opening line, its indentation gone (CommonMark 0.31.2 §4.5 "Fenced code
# blocks"): three or more backticks (then an info string holding no backtick) or tildes.
_FENCE_OPEN = re.compile(r"(`{3,}(?![^`]*`)|~{3,})")
# What separates two pieces of a snippet's text: a space, or a line break (kept as ``\n``).
_BREAKS = " \n"
_BREAK = re.compile(r"[ \n]")
# A run of whitespace and removed characters (the non-ASCII ones stand as \x00 by then) that
# cleaning changes: all but a lone space between two words, which stays as it is (so a page of
# prose has few, and the pieces between them are long).
_GAPS = re.compile(r"[\s\x00-\x08\x0e-\x1f\x7f]{2,}|[^\S ]|[\x00-\x08\x0e-\x1f\x7f]|\A | \Z")


@dataclass(frozen=True, slots=True)
class Match:
    """One marked query term: ``[start, end)`` in characters of the text it was found in, and
    the analysed ``term`` (``"vitamin"`` for the word ``Vitamins``)."""

    start: int
    end: int
    term: str


@dataclass(frozen=True, slots=True)
class Snippet:
    """A snippet before rendering: its visible ``plain`` text (ellipses included; a line
    break of the text as one ``\n``, a blank line as two, see the module docstring), the
    query-term ``matches`` in it, offsets in characters (code points) of ``plain``, in order,
    and ``title_chars``:
    how many of ``plain``'s first characters (code points) show the document's title (the
    ``title`` first characters of the text given to :func:`snippet`), a ``…`` where the window
    cuts the title counted with it; 0 when the window starts past the title."""

    plain: str
    matches: list[Match] = field(default_factory=list)
    title_chars: int = 0

    def html(self) -> str:
        """``plain`` HTML-escaped piece by piece, the matches wrapped in ``<mark>``."""
        return _render(self.plain, 0, len(self.plain), self.matches)


def clean_text(text: str) -> str:
    """``text`` with control, format, surrogate, private-use and unassigned characters removed
    and every run of whitespace (newlines included) turned into one space, none at the ends."""
    return _Cleaned.of(text).text


@dataclass(frozen=True, slots=True)
class _Cleaned:
    """A text as :func:`clean_text` makes it and where its pieces came from: ``text`` is the
    original's kept pieces, ``sources[k]`` the original offset of the ``k``-th piece and
    ``targets[k]`` its offset in ``text`` (both ascending), each piece running until the next
    gap (a run of removed or whitespace characters, one space in ``text`` unless at an end;
    made ``of(text, lines=True)``, one ``\n`` where the gap holds a line break). Made with
    ``code``, ``fences[k]`` is the fence of the fenced code block open where the line starting
    at ``line_starts[k]`` of ``text`` starts (``""``: none), as :class:`_CodeLines` read the
    original (its indentation too), and the last entry, at ``len(text) + 1``, the one open
    after the last line."""

    text: str
    sources: list[int]
    targets: list[int]
    lengths: list[int]
    line_starts: list[int] = field(default_factory=list)
    fences: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, text: str, *, lines: bool = False, code: bool = False, title: int = 0) -> _Cleaned:
        """``text`` cleaned (with ``lines``, a gap holding a line break is a ``\n``, not a
        space, and one holding a blank line — two line breaks — ``\n\n``; with ``code`` as
        well, a Markdown text's code lines keep their indentation, see :class:`_CodeLines`,
        its first ``title`` characters, a title shown as written, not read as Markdown).
        The categories of the distinct characters past ASCII are looked
        up once each (a text repeats few), and each becomes ``\\x00`` (removed with the ASCII
        controls, keeping the offsets) before one pattern finds the gaps: a snippet cleans each
        result's text, and a check per character cost more than the rest of the snippet."""
        drop = {
            ord(ch): "\x00"
            for ch in set(text)
            if ch > "\x7f" and unicodedata2.category(ch) in _STRIP_CATEGORIES
        }
        marked = text.translate(drop) if drop else text
        pieces: list[str] = []
        sources: list[int] = []
        targets: list[int] = []
        lengths: list[int] = []
        at = size = 0
        lines_read = _CodeLines() if code else None
        line_at = 0  # where the current line starts in ``pieces``
        line_starts: list[int] = []
        fences: list[str] = []
        for gap in [*_GAPS.finditer(marked), None]:
            end = len(marked) if gap is None else gap.start()
            if end > at:
                sources.append(at)
                targets.append(size)
                lengths.append(end - at)
                pieces.append(marked[at:end])
                size += end - at
            if gap is None:
                break
            at = gap.end()
            if not size:  # the text's first line's indentation: kept when it is code's
                kept = lines_read.indentation("", True, gap.group()) if lines_read else ""
                # not a title's (no Markdown), nor that of no line (a text of spaces)
                if kept and gap.end() > title and at < len(marked):
                    pieces.append(kept)
                    size += len(kept)
                    line_at = len(pieces)
                continue
            if at < len(marked) and _ASCII_CONTROLS.sub("", gap.group()):
                # the gap held whitespace: one space (or line break) between two pieces
                breaks = len(_LINE_ENDING.findall(gap.group())) if lines else 0
                if not breaks:
                    pieces.append(" ")
                    size += 1
                    continue
                between = "\n\n" if breaks > 1 else "\n"
                if lines_read is not None:
                    # a title's line is no Markdown: it opens no fenced block
                    line = "".join(pieces[line_at:]) if gap.start() > title else ""
                    between += lines_read.indentation(line, breaks > 1, gap.group())
                    line_starts.append(size + (2 if breaks > 1 else 1))
                    fences.append(lines_read.fence)
                pieces.append(between)
                size += len(between)
                line_at = len(pieces)
        if lines_read is not None:  # the fence open after the last line
            lines_read.indentation(
                "".join(pieces[line_at:]) if len(marked) > title else "", False, ""
            )
            line_starts.append(size + 1)
            fences.append(lines_read.fence)
        return cls("".join(pieces), sources, targets, lengths, line_starts, fences)

    def offset(self, original: int) -> int:
        """Where ``original`` (an offset into the original text) falls in :attr:`text`: inside
        a kept piece, the same character; inside a gap or at its start, just after the piece
        before it (so a match's end after removed characters stays at its last letter)."""
        k = bisect.bisect_right(self.sources, original) - 1
        if k < 0:
            return 0
        return self.targets[k] + min(original - self.sources[k], self.lengths[k])

    def start_offset(self, original: int) -> int:
        """Where a match starting at ``original`` starts in :attr:`text`: as :meth:`offset`
        inside a kept piece, but inside a gap at the start of the piece after it, so that a
        match beginning on removed characters never takes in the gap's space."""
        k = bisect.bisect_right(self.sources, original) - 1
        if k >= 0 and original - self.sources[k] >= self.lengths[k]:
            return self.targets[k + 1] if k + 1 < len(self.targets) else len(self.text)
        return self.offset(original)


class _CodeLines:
    """Reads a Markdown text's lines in order (CommonMark 0.31.2) and says which keep their
    indentation in a snippet: the lines of a fenced code block (§4.5: its indentation is the
    code's), and those of an indented code block (§4.4: indented four columns or more, after a
    blank line, another such line or a fenced block's closing line, as one cannot interrupt a
    paragraph; the text's first line is read as after a blank line). Every other line's
    indentation goes, as it did before (a heading's or a list item's start stays where the
    search page reads it). Containers are not read: an indented paragraph of a list item after a
    blank line is taken for code, and a fence inside a list item is read by its own line (a
    guess where the two differ)."""

    __slots__ = ("code", "columns", "fence")

    def __init__(self) -> None:
        self.fence = ""  # the open fenced block's fence, "" outside one
        self.code = False  # whether the line being read is a line of an indented code block
        self.columns = 0  # the line being read's indentation in the text, in columns

    def indentation(self, line: str, blank: bool, gap: str) -> str:
        """The indentation (spaces) kept for the next line, after ``line`` (the line just
        ended, without its indentation), ``blank`` when a blank line separates them, ``gap``
        the text's whitespace between them (line breaks and the next line's indentation)."""
        closed = False  # ``line`` closed a fenced block: no paragraph is open after it
        if self.fence:
            closed = self.columns < 4 and _closes(self.fence, line)
            if closed:
                self.fence = ""
        elif not self.code and self.columns < 4 and (opened := _FENCE_OPEN.match(line)):
            self.fence = opened.group(1)
        tail = _LINE_ENDING.split(gap)[-1]
        self.columns = len(_INDENT.match(tail).group().expandtabs(4))  # type: ignore[union-attr]
        self.code = not self.fence and self.columns >= 4 and (blank or self.code or closed)
        return " " * self.columns if self.fence or self.code else ""


def _closes(fence: str, line: str) -> bool:
    """Whether ``line`` (without its indentation) closes a block opened by ``fence`` (§4.5: a
    run of its character at least as long, then only spaces)."""
    run = len(line) - len(line.lstrip(fence[0]))
    return run >= len(fence) and not line[run:].strip(" ")


def _fence_at(cleaned: _Cleaned, start: int) -> str:
    """The fence of the fenced code block that ``cleaned`` (a Markdown text cleaned with
    ``code``) is inside at ``start``, as :class:`_CodeLines` read it: the opening line's fence
    (``"```"``, ``"~~~~"``), or ``""`` outside any: the one open where the first line shown
    whole starts (a line shown only in part counts as before ``start``). Read from the
    reading of the original, not from ``cleaned.text``, which has lost the indentation that
    makes ``"    ```"`` after a paragraph's line no fence (CommonMark 0.31.2 §4.5: 0-3 spaces
    of indentation)."""
    k = bisect.bisect_left(cleaned.line_starts, start)  # the first line shown whole
    return cleaned.fences[k] if 0 <= k < len(cleaned.fences) else ""


def query_terms(query: str) -> list[str]:
    """The terms of ``query`` as BM25 sees them (:func:`ncindex.embedding.analyzer.terms` of
    the query as searched), deduplicated in order."""
    return list(dict.fromkeys(analyzer.terms(query)))


def make_snippet(text: str, query: str, *, max_chars: int = 240, markdown: bool = False) -> str:
    """:func:`snippet` rendered as HTML (see there)."""
    return snippet(text, query, max_chars=max_chars, markdown=markdown).html()


def snippet(
    text: str, query: str, *, max_chars: int = 240, title: int = 0, markdown: bool = False
) -> Snippet:
    """A snippet of ``text`` for ``query``, at most ``max_chars`` visible characters
    (ellipses and a re-opened fence included; tags and entity escapes not counted).

    The window is the one holding the most query-term matches (then the most distinct terms,
    then the earliest), centred on them and cut at word boundaries where possible; a cut edge
    gets ``…`` (no ellipses when ``max_chars`` < 3); matches are wrapped in ``<mark>…</mark>``.
    Without matches the start of the text is shown. The text is :func:`clean_text`'s, but a
    run of whitespace holding a line break is one ``\n`` (``\n\n`` where it holds a blank
    line: a paragraph's end), and a cut edge at a line break keeps it between the text and the
    ellipsis (see the module docstring). A ``markdown`` text (a note, a Markdown file, a Deck
    card's description) keeps its code lines' indentation (:class:`_CodeLines`), and a window
    starting inside a fenced code block whose opening line it cut off starts with that block's
    fence on a line of its own (``"```\n…code"``), so that the snippet read alone is code
    there, not prose after a fence that the block's closing line would seem to open.
    ``title``: how many of ``text``'s first characters are the document's title (kept as
    written by a reader that reads the rest as Markdown); the snippet's ``title_chars`` says
    how many of its own they became.
    ``ValueError`` if ``max_chars`` < 1.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    cleaned = _Cleaned.of(text, lines=True, code=markdown, title=title)
    body = cleaned.text
    if not body:
        return Snippet("")
    matches = _find_matches(text, cleaned, set(query_terms(query)))
    title_end = cleaned.offset(title) if title > 0 else 0
    if len(body) <= max_chars:
        return Snippet(body, matches, title_end)
    ellipses = max_chars >= 3  # room for an ellipsis at each edge, or none at all
    budget = max_chars - 2 if ellipses else max_chars
    start, end = _window(body, matches, budget, ellipses)
    fence = _fence_at(cleaned, start) if markdown and start > 0 else ""
    room = 0  # what the window left for a re-opened fence's line
    while fence and room < len(fence) + 1 < budget:  # its line takes room from the window
        # the smaller window can start in another block, whose fence can be longer: again
        room = len(fence) + 1
        start, end = _window(body, matches, budget - room, ellipses)
        fence = _fence_at(cleaned, start) if start > 0 else ""
    reopened = fence + "\n" if fence and len(fence) + 1 <= room else ""
    head = reopened + (ELLIPSIS if ellipses and start > 0 else "")
    tail = ELLIPSIS if ellipses and end < len(body) else ""
    shift = len(head) - start
    shown = [
        Match(m.start + shift, m.end + shift, m.term)
        for m in matches
        if m.start >= start and m.end <= end
    ]
    titled = 0
    if start < title_end:  # the window starts inside the title: its ellipses stand for it
        titled = len(head) + min(end, title_end) - start + (len(tail) if end < title_end else 0)
    return Snippet(head + body[start:end] + tail, shown, titled)


def _window(body: str, matches: list[Match], budget: int, ellipses: bool) -> tuple[int, int]:
    """``[start, end)`` of ``body`` shown in a snippet of ``budget`` characters (ellipses not
    counted), cut at words and keeping the line breaks at its cut edges when ``ellipses``."""
    start, end = _best_window(body, matches, budget)
    start, end = _snap_to_words(body, start, end, matches)
    if ellipses:
        start, end = _keep_line_breaks(body, start, end, matches, budget)
    return start, end


def plain_snippet(snippet: str) -> tuple[str, list[tuple[int, int]]]:
    """A snippet of :func:`make_snippet` as plain text and its matches: ``(text, [(start,
    end), …])``, offsets in characters into ``text`` (end exclusive). The ``<mark>`` pairs are
    the only tags a snippet holds (see the module docstring), so they are split off and the
    pieces between them unescaped; raises ``ValueError`` for a string with an unbalanced
    ``<mark>`` (not one this module made)."""
    text: list[str] = []
    spans: list[tuple[int, int]] = []
    at = 0
    for i, piece in enumerate(_MARKS.split(snippet)):
        plain = html.unescape(piece)
        if i % 2:
            spans.append((at, at + len(plain)))
        text.append(plain)
        at += len(plain)
    if snippet.count(MARK_OPEN) != len(spans) or snippet.count(MARK_CLOSE) != len(spans):
        raise ValueError("not a snippet: unbalanced <mark> tags")
    return "".join(text), spans


# --- internals -----------------------------------------------------------------------------


def _find_matches(text: str, cleaned: _Cleaned, terms: set[str]) -> list[Match]:
    """The analysed terms of ``text`` that are in ``terms``, at their places in ``cleaned``
    (``text`` cleaned), without overlaps (a whole compound comes before its parts, so it wins;
    a word's folded form has its offsets, so ``munchen`` marks ``München``). Overlapping CJK
    bigrams that both match (``北京`` and ``京烤`` of ``北京烤鸭``) make one mark over the
    characters they cover together. ``text`` is analysed as BM25 analysed it, not as cleaned,
    so the words marked are the words BM25 matched: a zero-width space or a control character
    inside ``Rech\u200bnung`` separates ``rech`` and ``nung`` there, which cleaning would join."""
    if not terms:
        return []
    out: list[Match] = []
    end = 0
    for t in analyzer.occurrences(text, terms):
        start, stop = cleaned.start_offset(t.start), cleaned.offset(t.end)
        if start >= stop:  # all of it cleaned away (unassigned code points in a CJK range)
            continue
        if start >= end:
            out.append(Match(start, stop, t.text))
            end = stop
        elif stop > end:  # only bigrams overlap without one holding the other
            out[-1] = Match(out[-1].start, stop, out[-1].term)
            end = stop
    return out


def _best_window(body: str, matches: list[Match], budget: int) -> tuple[int, int]:
    """``[start, end)`` of length ``budget`` holding the most matches, centred on them."""
    usable = [m for m in matches if m.end - m.start <= budget]
    if not usable:
        return 0, budget
    best: tuple[int, int, int] = (-1, -1, 0)  # (matches, distinct terms, -index of first)
    best_range = (0, 0)
    j = 0
    for i, first in enumerate(usable):
        j = max(j, i)
        while j + 1 < len(usable) and usable[j + 1].end - first.start <= budget:
            j += 1
        inside = usable[i : j + 1]
        score = (len(inside), len({m.term for m in inside}), -i)
        if score > best:
            best, best_range = score, (first.start, usable[j].end)
    lo, hi = best_range
    slack = budget - (hi - lo)
    start = max(0, lo - slack // 2)
    end = min(len(body), start + budget)
    start = max(0, end - budget)
    return start, end


def _snap_to_words(body: str, start: int, end: int, matches: list[Match]) -> tuple[int, int]:
    """Move cut edges that fall inside a word to the nearest space (or line break) inward,
    unless that would drop a match or leave nothing; then drop spaces and line breaks at the
    edges."""
    first = min((m.start for m in matches if m.start >= start), default=end)
    last = max((m.end for m in matches if m.end <= end), default=start)
    if 0 < start < len(body) and body[start - 1] not in _BREAKS and body[start] not in _BREAKS:
        found = _BREAK.search(body, start, end)
        space = found.start() if found else -1
        if space != -1 and space < first and space + 1 < end:
            start = space + 1
    if 0 < end < len(body) and body[end - 1] not in _BREAKS and body[end] not in _BREAKS:
        space = max(body.rfind(b, start, end) for b in _BREAKS)
        if space != -1 and space >= last and space > start:
            end = space
    while start < end and body[start] in _BREAKS:
        start += 1
    while end > start and body[end - 1] in _BREAKS:
        end -= 1
    return start, end


def _keep_line_breaks(
    body: str, start: int, end: int, matches: list[Match], budget: int
) -> tuple[int, int]:
    """The window ``[start, end)`` of :func:`_snap_to_words` (no break at its edges) widened
    over the line break just outside each cut edge (and over the indentation a code line kept,
    see :class:`_CodeLines`; at the text's start, over that indentation alone), so that
    ``"…\n"`` says the snippet's first line starts there and
    ``"\n…"`` that its last one ends there. A window holding ``budget`` characters already
    drops its last words for the leading break (whose ``*`` or ``#`` the search page reads by
    it) when that keeps every match and leaves a word; the trailing break is kept only when
    there is room."""
    lead = start
    while lead > 0 and body[lead - 1] == " ":
        lead -= 1
    if lead == 0 or body[lead - 1] == "\n":
        line = lead - 1 if lead else 0  # the line break before, or the text's start
        wider = start - line  # the line break and the indentation kept before ``start``
        last = max((m.end for m in matches if start <= m.start and m.end <= end), default=0)
        while end - start + wider > budget:
            space = max(body.rfind(b, start, end) for b in _BREAKS)
            if space <= start or space < last:
                break
            end = space
            while body[end - 1] in _BREAKS:  # a blank line, or a code line's indentation
                end -= 1
        if end - start + wider <= budget:
            start = line
    if end < len(body) and body[end] == "\n" and end - start < budget:
        end += 1
    return start, end


def _render(body: str, start: int, end: int, matches: list[Match]) -> str:
    """Escape ``body[start:end]`` piece by piece and wrap the matches (escape, then mark)."""
    parts: list[str] = []
    pos = start
    for m in matches:
        if m.start < pos or m.end > end:
            continue
        parts.append(html.escape(body[pos : m.start], quote=True))
        parts.append(MARK_OPEN + html.escape(body[m.start : m.end], quote=True) + MARK_CLOSE)
        pos = m.end
    parts.append(html.escape(body[pos:end], quote=True))
    return "".join(parts)
