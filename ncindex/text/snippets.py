"""Search-result snippets: the best window of a chunk, HTML-escaped, matches in ``<mark>``
(DESIGN §9).

Safe by construction: the text is cleaned of control and invisible format characters, then
every piece of it is HTML-escaped (``&``, ``<``, ``>``, ``"``, ``'``), and only then are the
``<mark>``/``</mark>`` tags put around matches. So the only tags in a snippet are balanced
``<mark>`` pairs that this module wrote; a ``<mark>`` or ``<script>`` in the document or the
query comes out as ``&lt;mark&gt;`` text.

Terms are found as BM25 finds them (fastembed's ``Qdrant/bm25``): words are runs of ``\\w``
characters, lowercased; English stopwords are skipped (the ``stop-words`` list the BM25 model
folder uses); a word matches a query term when their Snowball stems are equal (``indexing``
matches ``indexed``), through ``py_rust_stemmers``, the stemmer fastembed's BM25 uses.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from dataclasses import dataclass

_WORD = re.compile(r"\w+")
_WHITESPACE = re.compile(r"\s+")
ELLIPSIS = "…"
MARK_OPEN, MARK_CLOSE = "<mark>", "</mark>"
_MARKS = re.compile(f"{MARK_OPEN}(.*?){MARK_CLOSE}", re.DOTALL)
# Unicode categories removed before anything else: controls (Cc), invisible format characters
# such as bidi overrides and zero-width joiners (Cf), surrogates (Cs), private use (Co) and
# unassigned code points (Cn) — none is text a reader should see, and some can disguise text.
_STRIP_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})


@dataclass(frozen=True, slots=True)
class _Match:
    start: int
    end: int
    term: str


def clean_text(text: str) -> str:
    """``text`` with control, format, surrogate, private-use and unassigned characters removed
    and every run of whitespace (newlines included) turned into one space."""
    kept = "".join(
        " " if ch in "\t\n\r\x0b\x0c" else ch
        for ch in text
        if ch in "\t\n\r\x0b\x0c" or unicodedata.category(ch) not in _STRIP_CATEGORIES
    )
    return _WHITESPACE.sub(" ", kept).strip()


def query_terms(query: str) -> list[str]:
    """The stems of ``query``'s words as BM25 sees them: lowercased ``\\w+`` runs, English
    stopwords skipped (all kept if every word is a stopword), stemmed, deduplicated in order."""
    words = _WORD.findall(clean_text(query).lower())
    stops = _stopwords()
    content = [w for w in words if w not in stops] or words
    return list(dict.fromkeys(_stem(w) for w in content))


def make_snippet(text: str, query: str, *, max_chars: int = 240) -> str:
    """An HTML snippet of ``text`` for ``query``, at most ``max_chars`` visible characters
    (ellipses included; tags and entity escapes not counted).

    The window is the one holding the most query-term matches (then the most distinct terms,
    then the earliest), centred on them and cut at word boundaries where possible; a cut edge
    gets ``…`` (no ellipses when ``max_chars`` < 3); matches are wrapped in ``<mark>…</mark>``.
    Without matches the start of the text is shown. ``ValueError`` if ``max_chars`` < 1.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    body = clean_text(text)
    if not body:
        return ""
    matches = _find_matches(body, set(query_terms(query)))
    if len(body) <= max_chars:
        return _render(body, 0, len(body), matches)
    ellipses = max_chars >= 3  # room for an ellipsis at each edge, or none at all
    budget = max_chars - 2 if ellipses else max_chars
    start, end = _best_window(body, matches, budget)
    start, end = _snap_to_words(body, start, end, matches)
    shown = [m for m in matches if m.start >= start and m.end <= end]
    out = _render(body, start, end, shown)
    if not ellipses:
        return out
    return (ELLIPSIS if start > 0 else "") + out + (ELLIPSIS if end < len(body) else "")


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


@functools.cache
def _stopwords() -> frozenset[str]:
    from stop_words import get_stop_words

    return frozenset(w.lower() for w in get_stop_words("english"))


@functools.cache
def _stemmer():  # type: ignore[no-untyped-def]
    from py_rust_stemmers import SnowballStemmer

    return SnowballStemmer("english")


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return str(_stemmer().stem_word(word))


def _find_matches(body: str, terms: set[str]) -> list[_Match]:
    if not terms:
        return []
    stops = _stopwords()
    out: list[_Match] = []
    for m in _WORD.finditer(body):
        word = m.group().lower()
        if word in stops and word not in terms:
            continue
        stem = _stem(word)
        if stem in terms:
            out.append(_Match(m.start(), m.end(), stem))
    return out


def _best_window(body: str, matches: list[_Match], budget: int) -> tuple[int, int]:
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


def _snap_to_words(body: str, start: int, end: int, matches: list[_Match]) -> tuple[int, int]:
    """Move cut edges that fall inside a word to the nearest space inward, unless that would
    drop a match or leave nothing; then drop spaces at the edges."""
    first = min((m.start for m in matches if m.start >= start), default=end)
    last = max((m.end for m in matches if m.end <= end), default=start)
    if 0 < start < len(body) and body[start - 1] != " " and body[start] != " ":
        space = body.find(" ", start, end)
        if space != -1 and space < first and space + 1 < end:
            start = space + 1
    if 0 < end < len(body) and body[end - 1] != " " and body[end] != " ":
        space = body.rfind(" ", start, end)
        if space != -1 and space >= last and space > start:
            end = space
    while start < end and body[start] == " ":
        start += 1
    while end > start and body[end - 1] == " ":
        end -= 1
    return start, end


def _render(body: str, start: int, end: int, matches: list[_Match]) -> str:
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
