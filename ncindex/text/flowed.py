"""Flowed plain text (``Content-Type: text/plain; format=flowed``, RFC 3676) read back into
paragraphs: the sender's mail client wrapped each paragraph into lines of at most 78
characters, ending every line but a paragraph's last in a space (a *soft* line break), and
a reader's client joins them again (§4.1). Read as it is sent, a flowed body is a column
of lines cut wherever the sender's client wrapped them, so a paragraph never reaches the
chunker, the snippets or the page whole (:func:`unflow`).

The one library for it in the package index, ``formatflowed`` (2.0.0, 2016), is
unmaintained and not installed; the decoding is a loop over the lines."""

from __future__ import annotations

import re
from collections.abc import Callable

#: A line of the body: its content (group 1) and its line ending — CRLF, CR or LF, as the
#: ``email`` package's feed parser splits lines (``email.feedparser.NLCRE``; a message on
#: disk often has LF alone) — or a last line without one (group 2).
_LINE = re.compile(r"([^\r\n]*)(?:\r\n|\r|\n)|([^\r\n]+)\Z")
#: The signature separator line, after its quote marks and space-stuffing (RFC 3676 §4.3).
_SIGNATURE_SEPARATOR = "-- "
#: Lines read between two looks at the clock (:func:`unflow`'s ``late``): 4,096 empty lines
#: took 6 ms here (median of 5), a body of 2,000,000 of them 4.3 s (2026-12-07).
_LATE_LINES = 4096


def unflow(
    text: str,
    *,
    delsp: bool,
    max_chars: int | None = None,
    late: Callable[[], bool] | None = None,
) -> str:
    """``text`` (a ``text/plain; format=flowed`` body, decoded) with each paragraph joined
    into one line, as RFC 3676 §4 reads it: a line ending in a space is *flowed* — joined
    to the next one, its trailing space kept, or deleted with ``delsp`` (``DelSp=yes``,
    §4.1: a space the sender added where the text had none, in scripts written without
    spaces) — and one that does not end in a space is *fixed*: it ends its paragraph. Each
    line's quote marks (its leading ``>`` characters, §4.5) are counted and set aside, then
    one leading space, *space-stuffing* (§4.4: a ``From``, ``>`` or space at the start of
    a line is sent behind one), is deleted. A paragraph also ends at a change of quote
    depth (§4.5, "quote-depth wins"), before a signature separator line ``-- `` (§4.3:
    neither fixed nor flowed, kept on its own line) and at the end of the body (§4.1).
    Each paragraph is written on one line behind its quote depth's ``>`` characters and a
    space (``>> text``; a quoted empty line as ``>>`` alone); lines end ``\\n``, and the
    text ends in one when ``text`` ends in a line ending. Lines are read only until the
    text holds more than ``max_chars`` characters, quote marks and line breaks counted
    (``None``: no bound); whenever a line is left unread the text is longer than
    ``max_chars``, so the caller, cutting it there, marks it truncated. ``late`` (e.g.
    :meth:`Blocks.late <ncindex.text.blocks.Blocks.late>`, which marks the text truncated;
    ``None``: never) is asked once every :data:`_LATE_LINES` lines; once it answers
    ``True`` the rest is not read. Linear in the lines read (a body of 10 MB,
    161,000 lines, read whole: 0.19 s and 0.41 s, medians of 5 in two runs on a shared
    machine, 2026-12-07)."""
    out: list[str] = []
    paragraph: list[str] = []
    depth = 0  # the quote depth of the paragraph under way
    size = 0  # characters the text holds at least: each line's content, quote marks, break
    ended = False  # whether the last line read ends in a line ending
    for count, line in enumerate(_LINE.finditer(text), 1):
        if late is not None and count % _LATE_LINES == 0 and late():
            break
        ended = line[2] is None
        raw = line[1] if ended else line[2]
        content = raw.lstrip(">")
        quotes = len(raw) - len(content)
        if content.startswith(" "):
            content = content[1:]
        separator = content == _SIGNATURE_SEPARATOR
        flowed = content.endswith(" ") and not separator
        if flowed and delsp:
            content = content[:-1]
        if paragraph and (quotes != depth or separator):  # an improperly flowed line
            out.append(_quoted(depth, "".join(paragraph)))
            paragraph = []
        if not paragraph:  # a line of the text: its quote marks, after the break before it
            size += quotes + (1 if out else 0)
        depth = quotes
        paragraph.append(content)
        if not flowed:
            out.append(_quoted(quotes, "".join(paragraph)))
            paragraph = []
        size += len(content)
        if max_chars is not None and size > max_chars:
            break
    if paragraph:
        out.append(_quoted(depth, "".join(paragraph)))
    return "\n".join(out) + ("\n" if ended else "")


def _quoted(depth: int, content: str) -> str:
    """``content`` behind ``depth`` quote marks and a space (none when it is empty, or not
    quoted)."""
    if not depth:
        return content
    return ">" * depth + (" " + content if content else "")
