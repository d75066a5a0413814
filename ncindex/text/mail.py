"""E-mail messages (``.eml``, RFC 5322 with MIME, RFC 2045–2049) by the standard library's
``email`` package (its ``default`` policy decodes RFC 2047 headers): a heading block (the
subject as a ``#`` heading; From, To, Cc and Date lines), every inline text part a reader
sees, in order — of a ``multipart/alternative`` one body, the ``text/plain`` one preferred
over ``text/html`` unless it is a stub of it (:meth:`_Reading.richer`); a list's footer;
a message forwarded inline, under a heading of its own — and the attachments listed by
file name, never extracted (:class:`_Reading`). The
message is parsed, its HTML bodies read and its parts listed under the caller's time
budget: a message of thousands of small MIME parts took the parser minutes (100,000 parts
in 3.6 MB: 111 s here). Parts nested deeper than :data:`MAX_NESTED_PARTS` are left out:
the ``email`` feed parser recurses once per level (2,000 nested multiparts ended in a
``RecursionError`` and lost the whole message). A header field is parsed from its first
:data:`_FIELD_CHARS` characters, cut after a whole address or word (the header parser's
time grows with the square of a field's length), and a body part's text is cut to the
characters left of the caller's bound before it is compared with the parts read
(:func:`_words`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage, Message, MIMEPart
from email.parser import BytesFeedParser
from email.policy import EmailPolicy, Policy
from typing import Any

from ncindex.errors import ExtractionError
from ncindex.text.blocks import one_line
from ncindex.text.charsets import decode_without_nuls
from ncindex.text.flowed import unflow
from ncindex.text.markup import html_text

_ADDRESS_HEADERS = ("From", "To", "Cc", "Date")
#: MIME parts nested deeper than this are left out of the message (the text marked truncated):
#: Dovecot's message parser's default limit (src/lib-mail/message-parser.h,
#: MESSAGE_PARSER_DEFAULT_MAX_NESTED_MIME_PARTS), well inside Python's recursion limit.
MAX_NESTED_PARTS = 100
#: Bytes of the message fed to the parser between two looks at the clock: how far it may run
#: past its budget. 64 KiB of empty MIME parts (``--b`` and a blank line, 13,000 of them)
#: took the parser 0.8 s between two looks, 4 KiB 0.06 s; a 10 MB body took 0.05 s either
#: way (measured here, 2026-12-07).
_FEED_PIECE = 4 * 1024
#: Bytes of a header block fed whatever the clock says: a long trace (Received, ARC and
#: DKIM fields a list or relay adds) put the Subject and From past the first piece.
_HEADER_BYTES = 1024 * 1024
#: Characters of a header field's value parsed at most; the rest is left out (the text marked
#: truncated). Python 3.11's ``email._header_value_parser`` takes time that grows with the
#: square of a field's length and runs whatever the budget says (the heading block is read
#: first, the fields of each part while it is looked at): a 0.9 MiB ``From`` of addresses took
#: 120 s here, a 1 MiB ``Subject`` of RFC 2047 encoded words 68 s and 18 GB of memory; at
#: 16 KiB the slowest field measured (an address list of display names) took 0.18 s. 16 KiB
#: holds a ``To`` of some 400 recipients (measured 2026-12-07).
_FIELD_CHARS = 16 * 1024
#: The blank line that ends a header block (RFC 5322 §2.1; lines end CRLF or, on disk, LF).
_HEADER_END = re.compile(rb"\r?\n\r?\n")
#: A word, as two renderings of one body are compared (:func:`_words`).
_WORD = re.compile(r"\w+")
#: Han, kana and CJK symbol characters (Unicode blocks CJK Radicals Supplement to Katakana,
#: Bopomofo Extended to CJK Unified Ideographs, CJK Compatibility Ideographs, and planes 2-3):
#: scripts written without spaces between words.
_CJK = "\u2e80-\u30ff\u31a0-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"
#: A word as two alternatives' words are counted (:meth:`_Reading.richer`): a ``\\w``
#: character of :data:`_CJK` (whose clause is one ``\\w+`` run), else a run of others.
_COUNTED_WORD = re.compile(rf"(?=\w)[{_CJK}]|[^\W{_CJK}]+")


def _never() -> bool:
    return False


def eml_text(
    data: bytes, late: Callable[[], bool] = _never, max_chars: int | None = None
) -> tuple[str, bool]:
    """The text of an e-mail message, and whether it was cut short: parts nested deeper than
    :data:`MAX_NESTED_PARTS`, a header field longer than :data:`_FIELD_CHARS` characters or
    text beyond ``max_chars`` characters (``None``: no bound) left out. ``late`` (e.g.
    :meth:`Blocks.late <ncindex.text.blocks.Blocks.late>`, which marks the text truncated)
    is asked between the :data:`_FEED_PIECE` pieces of the message fed to the parser (once
    its header block, up to :data:`_HEADER_BYTES`, is read: the subject and addresses are
    there), between the pieces of an HTML body's markup and the lines of a flowed plain
    one (:func:`~ncindex.text.flowed.unflow`), and before each part read but the first (a
    text part, or an attachment's name); once it answers ``True``, or the text read reaches
    ``max_chars`` characters, the rest is not read and the text is what was (a text part
    cut to the characters left; an HTML one's markup parsed only until its text is past
    them, or past :data:`~ncindex.text.markup.MAX_DEPTH` elements open). Raises
    :class:`ExtractionError` when ``data`` holds no header fields (not a message) or a
    header or part cannot be decoded."""
    if b"\x00" in data[:4096]:
        raise ExtractionError("not an e-mail message: binary data")
    try:
        message = _parse(data, late)
        if not isinstance(message, _Nested) or not message.keys():
            raise ExtractionError("not an e-mail message: no header fields")
        reading = _Reading(late, max_chars)
        reading.add(reading.texts, _heading(message, 1))
        reading.walk(message, level=2, whole=True)
        text = "\n\n".join(reading.texts)
        if reading.names:
            text += "\n\nAttachments: " + ", ".join(reading.names)
    except ExtractionError:
        raise
    except Exception as exc:  # header parsers raise assorted types on malformed fields
        raise ExtractionError(f"unreadable e-mail: {type(exc).__name__}: {exc}") from exc
    return text, message.tree.cut or reading.cut


#: The inline text parts read as a message's text (RFC 2046 §4.1; other ``text/*`` parts,
#: calendars and cards among them, are files listed by name).
_TEXT_TYPES = ("text/plain", "text/html")
#: Message parts read as messages of their own (a forwarded message: RFC 2046 §5.2.1, and
#: RFC 6532 §3.7's ``message/global``).
_MESSAGE_TYPES = ("message/rfc822", "message/global")


class _Reading:
    """The text a reader of a message sees, gathered by :meth:`walk`: ``texts`` (the heading
    block of the message and of each message forwarded inline, then each inline text part)
    and ``names`` (the attachments, by file name). ``late`` is asked before each part read
    but the first; once it answers ``True``, or ``texts`` and ``names`` hold ``max_chars``
    characters (``None``: no bound), nothing more is read; a text past the bound is cut to
    it, and ``cut`` says so."""

    def __init__(self, late: Callable[[], bool], max_chars: int | None) -> None:
        self.late = late
        self.room = max_chars  # characters left to read; None: no bound
        self.texts: list[str] = []
        self.names: list[str] = []
        self.stopped = False
        self.cut = False
        self._parts_read = 0
        self._plain: dict[int, MIMEPart | None] = {}  # _body's plain answers, by id(part)
        self._html: dict[int, MIMEPart | None] = {}  # _body's HTML answers, by id(part)
        self._read: dict[int, tuple[str, bool]] = {}  # text parts read, by id(part)
        self._words: set[str] = set()  # each text part read: its words, else its text

    def walk(
        self, part: MIMEPart, level: int, *, files_only: bool = False, whole: bool = False
    ) -> None:
        """Read ``part`` as a reader of the message sees it (RFC 2046): of a
        ``multipart/alternative`` one alternative (:func:`_alternative`, then :meth:`richer`), the
        other ones' files listed; of a ``multipart/related`` its root (RFC 2387 §3.2: the part its
        ``start`` names, else the first), the files among the rest (images the root shows) listed;
        of any other multipart (``mixed``, ``signed``, ``digest``, a list's footer appended as a
        second text part) every part in order. A message part forwarded inline (``message/rfc822``
        not marked as an attachment) is read as a message (its subject a heading of ``level`` ``#``,
        at most six; none for a part holding no header fields, empty or not a message), an inline
        ``text/plain`` or ``text/html`` part without a file name (a message's own body whatever its
        name: ``whole``, the message itself or one forwarded in it) as text; any other part is a
        file, listed by its name; a text part of the same words as one read (a body sent as
        ``text/plain`` and ``text/html`` parts of a ``multipart/mixed`` rather than an alternative)
        is not read again. With ``files_only`` (a part the reader does not see) only the parts that
        are files — a ``Content-Disposition: attachment`` (RFC 2183 §2.2) or a file name — are
        listed."""
        if self.stopped:
            return
        kind = part.get_content_type()
        attached = _is_file(part) and not whole
        if kind in _MESSAGE_TYPES and not attached:
            for inner in part.iter_parts():  # the one message it holds (none when cut)
                if not files_only and inner.keys():  # no heading for no header fields
                    if not self._may_read():
                        return
                    self.add(self.texts, _heading(inner, level))
                self.walk(inner, level + 1, files_only=files_only, whole=True)
        elif part.get_content_maintype() == "multipart":  # no parts when those were cut
            parts: list[MIMEPart] = list(part.iter_parts())
            seen = {id(subpart) for subpart in parts}
            if part.get_content_subtype() == "alternative" and not files_only:
                # (of an alternative the reader does not see no text is read, none compared)
                chosen = self.richer(parts, _alternative(parts, self._plain))
                seen = {id(subpart) for subpart in chosen}
            elif part.get_content_subtype() == "related":
                seen = {id(parts[_root(part, parts)])} if parts else set()
            for subpart in parts:
                self.walk(subpart, level, files_only=files_only or id(subpart) not in seen)
        elif kind in _TEXT_TYPES and not attached:
            if not files_only and self._may_read():
                text, cut = self._text(part)
                text, self.cut = self._fit(text), self.cut or cut
                if (words := _words(text) or text.strip()) and words not in self._words:
                    self._words.add(words)
                    self.add(self.texts, text)
        elif (attached or not files_only) and self._may_read():
            self.add(self.names, _file_name(part))

    def richer(self, parts: list[MIMEPart], chosen: list[MIMEPart]) -> list[MIMEPart]:
        """The alternative of ``parts`` (a ``multipart/alternative``'s) to read in place of
        ``chosen`` (:func:`_alternative`'s answer): when it is a ``text/plain`` part whose
        text has fewer than half the words (:data:`_COUNTED_WORD`) of the text of the last
        other alternative holding an HTML body (:func:`_body`), that alternative — a
        newsletter's plain part is often a stub ("view this e-mail in your browser") while
        its HTML is the letter, which a reader's mail client shows and their searches
        recall (RFC 2046 §5.1.4 orders alternatives plainest first, "the last part is the
        richest"); else ``chosen``: a plain part of about the HTML's words is the body as
        its author wrote it, without the HTML's link and layout text. Both texts are read
        (:meth:`_text`, under the budget and cut to the characters left) and kept for the
        one read; an HTML text its parser refuses (:func:`~ncindex.text.markup.html_text`
        raises :class:`ExtractionError`: a lone surrogate a ``utf-7`` body decodes to) leaves
        ``chosen``, which was read before the rule and is readable without it. The HTML is
        parsed only when its markup can hold enough words (:func:`_most_words`): most plain
        bodies are of the HTML's words, and parsing the HTML took many times as long as
        reading the message without it (a 0.4 MB plain body beside 0.9 MB of HTML: 0.61 s
        against 0.04 s, 0.08 s with this bound; best of 5, measured 2026-12-07)."""
        if len(chosen) != 1 or chosen[0].get_content_type() != "text/plain":
            return chosen
        for other in reversed(parts):
            html = None if other is chosen[0] else _body(other, "text/html", self._html)
            if html is not None:
                plain_words = _counted_words(self._text(chosen[0])[0])
                if 2 * plain_words >= _most_words(html):  # its text cannot outnumber it
                    return chosen
                try:  # an HTML body its parser refuses: the plain one is read, as it was
                    html_words = _counted_words(self._text(html)[0])
                except ExtractionError:
                    return chosen
                if 2 * plain_words < html_words:
                    return [other]
                break
        return chosen

    def _text(self, part: MIMEPart) -> tuple[str, bool]:
        """A text part's text and whether it was cut short (:func:`_part_text`, under
        ``late`` and the characters left), read once (:meth:`richer` compares the texts
        of two alternatives, one of which is then read)."""
        if id(part) not in self._read:
            self._read[id(part)] = _part_text(part, self.late, self.room)
        return self._read[id(part)]

    def add(self, into: list[str], text: str) -> None:
        """Add ``text`` (a heading block, a part's text or a file name) to ``into``
        (``texts`` or ``names``), cut to the characters left (:meth:`_fit`), which it and
        the two characters that join it to the one before then take."""
        text = self._fit(text)
        into.append(text)
        if self.room is not None:
            self.room = max(0, self.room - len(text) - 2)

    def _fit(self, text: str) -> str:
        """``text`` cut to the characters left of ``max_chars``; when it is, nothing more is
        read and ``cut`` is set."""
        if self.room is not None and len(text) > self.room:
            text, self.cut, self.stopped = text[: self.room], True, True
        return text

    def _may_read(self) -> bool:
        """Whether the next part (a text part, an attachment's name, a forwarded message's
        heading block) may be read: the first always, each other while ``late`` answers
        ``False``; none once the characters are spent: a text cut to them (:meth:`_fit`), or
        texts that left no room (:meth:`add`), when the part is not read and the text is
        marked ``cut`` (a part after them was read whole, then cut to nothing)."""
        self._parts_read += 1
        if self.room == 0 and not self.stopped:
            self.cut = self.stopped = True
        if self._parts_read > 1 and not self.stopped and self.late():
            self.stopped = True
        return not self.stopped


def _counted_words(text: str) -> int:
    """The words of ``text`` as two alternatives' are compared (:data:`_COUNTED_WORD`)."""
    return _COUNTED_WORD.subn("", text)[1]


def _words(text: str) -> str:
    """The words of ``text`` (``\\w+`` runs), case-folded and joined by spaces: a body's
    plain and HTML renderings have the same ones."""
    return " ".join(_WORD.findall(text.casefold()))


def _is_file(part: MIMEPart) -> bool:
    """Whether ``part`` is a file the sender attached: ``Content-Disposition: attachment``,
    or a file name (Apple Mail marks attachments ``inline`` with a ``filename``); so is a
    part whose ``Content-Disposition`` the ``default`` policy cannot parse (``attachment;
    filename*`` raised ``IndexError`` in Python 3.11 and lost the whole message)."""
    try:
        return part.is_attachment() or part.get_filename() is not None
    except Exception:  # the field parsers raise assorted types on malformed fields
        return True


def _file_name(part: MIMEPart) -> str:
    """The file name of an attached ``part`` on one line, "(unnamed)" when it has none or
    its ``Content-Disposition`` cannot be parsed (:func:`_is_file`)."""
    try:
        name = part.get_filename()
    except Exception:  # the field parsers raise assorted types on malformed fields
        name = None
    return one_line(name or "(unnamed)")


def _heading(message: MIMEPart, level: int) -> str:
    """A message's heading block: its subject as a heading of ``level`` ``#`` (at most six),
    then its From, To, Cc and Date lines (:func:`_field`)."""
    subject = _field(message, "Subject") or "(no subject)"
    lines = [f"{name}: {value}" for name in _ADDRESS_HEADERS if (value := _field(message, name))]
    return "\n\n".join(filter(None, [f"{'#' * min(level, 6)} {subject}", "\n".join(lines)]))


def _field(message: MIMEPart, name: str) -> str:
    """The first ``name`` header field of ``message`` on one line ("" when there is none), as
    :class:`_Lenient` parses it."""
    return one_line(str(message.get(name, "")))


def _alternative(parts: list[MIMEPart], plain: dict[int, MIMEPart | None]) -> list[MIMEPart]:
    """The alternative of a ``multipart/alternative`` that is read, in a list (empty when
    none is text): the first ``text/plain`` one that is not empty (some mailers send an empty
    one beside the HTML body; ``get_body`` chose it and the body was lost), else the first
    multipart holding a ``text/plain`` body (:func:`_body`, its answers kept in
    ``plain``), else the first ``text/html`` or multipart one — plain text preferred, as
    :meth:`EmailMessage.get_body` with ``("plain", "html")`` did, unless it is a stub of the
    HTML (:meth:`_Reading.richer`). The others render the same body (RFC 2046 §5.1.4) and
    are not read again."""

    def rank(part: MIMEPart) -> int:
        if _is_file(part):
            return 3
        if part.get_content_type() == "text/plain":  # an empty one is no body: the HTML is
            body = part.get_payload(decode=True)  # its bytes: not decoded twice, nor guessed
            return 0 if isinstance(body, bytes) and body.strip() else 3
        if part.get_content_maintype() == "multipart":
            return 1 if _body(part, "text/plain", plain) is not None else 2
        return 2 if part.get_content_type() == "text/html" else 3

    ranks = [rank(part) for part in parts]
    best = min(ranks, default=3)
    return [] if best == 3 else [parts[ranks.index(best)]]


def _body(part: MIMEPart, kind: str, found: dict[int, MIMEPart | None]) -> MIMEPart | None:
    """The body of type ``kind`` (``text/plain`` or ``text/html``) a reader of ``part``
    sees — ``part`` itself, or in a multipart the first found among its parts (of a
    ``multipart/related`` its root, :func:`_root`; of a ``multipart/alternative`` the last
    first, RFC 2046 §5.1.4) — not in a file (:func:`_is_file`); ``None`` when there is
    none. The answer for each part is kept in ``found`` (by ``id(part)``, one ``found`` a
    ``kind``): :meth:`EmailMessage.get_body`, which chose the plain body before, searched
    each alternative nested in another again, at a cost of the square of the parts (95
    nested alternatives of 200 HTML parts each: 9 s with a budget of 0.5 s)."""
    if id(part) not in found:
        body = None
        if _is_file(part):
            pass
        elif part.get_content_maintype() == "multipart":
            parts: list[MIMEPart] = list(part.iter_parts())
            if part.get_content_subtype() == "related":
                parts = [parts[_root(part, parts)]] if parts else []
            elif part.get_content_subtype() == "alternative":
                parts.reverse()
            # "is not None": a part without header fields is falsy (``Message.__len__``),
            # and a text/plain one may have none (RFC 2045 §5.2)
            bodies = (_body(subpart, kind, found) for subpart in parts)
            body = next((each for each in bodies if each is not None), None)
        elif part.get_content_type() == kind:
            body = part
        found[id(part)] = body
    return found[id(part)]


def _root(part: MIMEPart, parts: list[MIMEPart]) -> int:
    """The index of a ``multipart/related`` part's root among its ``parts``: the one whose
    ``Content-ID`` its ``start`` parameter names, else the first (RFC 2387 §3.2)."""
    start = part.get_param("start")
    ids = [subpart.get("Content-ID") for subpart in parts]
    return ids.index(start) if isinstance(start, str) and start in ids else 0


#: Fields whose value is an address list (RFC 5322 §3.6.2, §3.6.3, §3.6.6; the ``default``
#: policy's ``AddressHeader`` ones): cut after a whole address (:func:`_field_cut`).
_ADDRESS_FIELDS = frozenset({
    "from", "sender", "reply-to", "to", "cc", "bcc", "resent-from", "resent-sender",
    "resent-to", "resent-cc", "resent-bcc",
})  # fmt: skip
#: An RFC 2047 encoded word (§2: ``=?charset?encoding?encoded-text?=``, no white space).
_ENCODED_WORD = re.compile(r"=\?[^?\s]*\?[bBqQ]\?[^?\s]*\?=")


def _field_cut(name: str, value: str) -> str:
    """``value`` (a header field ``name``'s, longer than :data:`_FIELD_CHARS`) cut to at most
    :data:`_FIELD_CHARS` characters where no half of an address or word is left: an address
    list (:data:`_ADDRESS_FIELDS`) after its last whole address (before the last comma
    outside a quoted string, a comment or angle brackets, RFC 5322 §3.2.4, §3.2.2, §3.4);
    any field, or an address list with no such comma, before its last white space (an
    RFC 2047 encoded word holds none, §2 and §5) or, in a run without any, before an
    encoded word the bound falls in, else after its last whole encoded word. A run of
    :data:`_FIELD_CHARS` characters with neither is cut at them. An encoded word stuck to
    the text before it (``Tide=?utf-8?b?R2V6ZWl0ZW4=?=``) is none by RFC 2047 §5 (it "MUST
    be separated" from adjacent text "by linear-white-space"), but Python 3.11's
    unstructured field parser (``email._header_value_parser.get_unstructured``, a
    ``Subject``'s) and ``email.header.decode_header`` decode it (``TideGezeiten``), so it
    is kept whole too: cut, its start was shown raw (``Tide=?utf-8?b?R2V6``)."""
    head = value[:_FIELD_CHARS]
    if name.lower() in _ADDRESS_FIELDS and (comma := _last_list_comma(head)) > 0:
        return head[:comma]
    space = max(head.rfind(" "), head.rfind("\t"), head.rfind("\n"), head.rfind("\r"))
    if space > 0:
        return head[:space]
    end = max((word.end() for word in _ENCODED_WORD.finditer(head)), default=0)
    # the one encoded word the bound can fall in is the first to start after the last whole
    # one (a word's start is fixed: its charset and text hold no "?"); each "=?" after that
    # is tried, each try reading on to a "?" or white space
    start = value.find("=?", end, len(head) + 1)  # (its "=" may be the bound's last one)
    while start >= 0:
        if _ENCODED_WORD.match(value, start):
            return head[:start]
        start = value.find("=?", start + 1, len(head) + 1)
    return head[:end] if end else head


def _last_list_comma(value: str) -> int:
    """The index of the last comma of ``value`` (an address list) that separates addresses —
    not in a quoted string (``\\`` escapes the next character), a comment (nested), angle
    brackets or an RFC 2047 encoded word (§5 keeps commas, quotes and parentheses out of a
    phrase's word, some mailers put them in, and Python's parser decodes such a word as one
    display name) — else -1."""
    last, quoted, comments, angle, escaped = -1, False, 0, False, False
    # each encoded word, and one the cut left unfinished at the end, as one run of letters:
    # no character of it separates or quotes
    masked = _ENCODED_WORD.sub(lambda word: "w" * len(word[0]), value)
    tail = max(masked.rfind(space) for space in " \t\r\n") + 1  # the last run of no space
    if (start := masked.find("=?", tail)) >= 0:
        masked = masked[:start] + "w" * (len(masked) - start)
    for index, char in enumerate(masked):
        if escaped:
            escaped = False
        elif char == "\\" and (quoted or comments):
            escaped = True
        elif quoted:
            quoted = char != '"'
        elif char == '"':
            quoted = True
        elif char == "(":
            comments += 1
        elif char == ")" and comments:
            comments -= 1
        elif comments:
            pass
        elif char in "<>":
            angle = char == "<"
        elif char == "," and not angle:
            last = index
    return last


@dataclass
class _Tree:
    """What the message and all its parts share: whether a part or the end of a header field
    was left out (``cut``), and whether the parser is done with them (``parsed``: their
    header fields are final)."""

    cut: bool = False
    parsed: bool = False


class _Lenient(EmailPolicy):
    """The ``default`` policy, but a header field is parsed from its first
    :data:`_FIELD_CHARS` characters at most, cut where a whole address or word ends
    (:func:`_field_cut`; ``tree`` records that one was cut), and a field its
    parser fails on is read as unstructured
    text (RFC 2047 encoded words decoded): Python 3.11's ``email._header_value_parser``
    raises on some malformed fields — an address field of a lone ``"``, a ``Content-Type``
    of ``text/plain; format*`` (``IndexError``) — and a ``Content-Type`` is parsed while the
    message is, so one such field lost the whole message, its subject and body too. The
    ``Message`` methods that read a ``Content-Type`` or ``Content-Disposition`` parameter
    read such a text as the ``compat32`` policy does. The message and its parts, made by
    the policy's ``message_factory`` (:class:`_Nested`), share its ``tree``."""

    tree: _Tree

    def __init__(self, tree: _Tree, **kw: Any) -> None:
        super().__init__(**kw)
        object.__setattr__(self, "tree", tree)  # a policy's attributes are read-only

    def header_fetch_parse(self, name: str, value: str) -> Any:
        if len(value) > _FIELD_CHARS:
            self.tree.cut = True
            value = _field_cut(name, value)
        try:
            return super().header_fetch_parse(name, value)
        except Exception:  # the field parsers raise assorted types on malformed fields
            return super().header_fetch_parse("x-unstructured", value)


class _Nested(EmailMessage):
    """An ``EmailMessage`` that knows its nesting depth (the message is 0, its parts 1, …),
    made by the feed parser through the policy's ``message_factory``. A part deeper than
    :data:`MAX_NESTED_PARTS` is not attached to its parent and says it is
    ``application/octet-stream``, so the parser reads it as one leaf up to its parent's next
    boundary (the parser recurses only into ``multipart/*`` and ``message/*``, after asking
    ``get_content_maintype``); ``tree`` (the :class:`_Lenient` policy's, shared by the
    message and all its parts) records that a part was left out. Once the message is parsed,
    each part's content type is parsed from its ``Content-Type`` once: reading the message
    asks it several times of each part (by its kind, main type, subtype, and to rank
    alternatives), and each ask
    parsed the field again — most of the time a message of thousands of parts took to read
    after it was parsed, none of it under the budget."""

    def __init__(self, policy: Policy | None = None) -> None:
        super().__init__(policy)
        self.depth = 0
        self.tree = policy.tree if isinstance(policy, _Lenient) else _Tree()
        self._type: str | None = None

    def attach(self, payload: Any) -> None:  # typeshed: Message | str, MIMEPart: Self
        if isinstance(payload, _Nested):
            payload.depth = self.depth + 1
            if payload.depth > MAX_NESTED_PARTS:
                self.tree.cut = True
                return
        super().attach(payload)

    def get_content_type(self) -> str:
        if self.depth > MAX_NESTED_PARTS:
            return "application/octet-stream"
        if not self.tree.parsed:
            return super().get_content_type()
        if self._type is None:
            self._type = super().get_content_type()
        return self._type


def _parse(data: bytes, late: Callable[[], bool]) -> Message:
    """The message parsed from ``data`` fed in :data:`_FEED_PIECE` pieces while ``late()`` is
    false (the pieces holding the header block, at most :data:`_HEADER_BYTES` of it,
    whatever it says). The ``email`` feed parser is incremental: the message closed after a
    piece holds the header fields and parts read so far."""
    end = _HEADER_END.search(data, 0, _HEADER_BYTES)
    header = end.end() if end else min(len(data), _HEADER_BYTES)
    parser = BytesFeedParser(policy=_Lenient(_Tree(), message_factory=_Nested))
    for start in range(0, len(data), _FEED_PIECE):
        if start >= header and late():
            break
        parser.feed(data[start : start + _FEED_PIECE])
    message = parser.close()
    if isinstance(message, _Nested):
        message.tree.parsed = True
    return message


#: A tag, comment, declaration or processing instruction of HTML markup: ``<`` then a letter,
#: ``/``, ``!`` or ``?`` (HTML Living Standard §13.2.5.6, tag open state; any other ``<`` is
#: text), to the next ``>`` (a comment holding one is left partly: more words, not fewer).
_TAG = re.compile(r"<[A-Za-z/!?][^>]*>")


def _most_words(part: MIMEPart) -> int:
    """At most the words (``\\w+`` runs) of an HTML ``part``'s text, not parsing it: those of
    its markup, tags left out (:data:`_TAG`) — a word of the text is, or joins, runs of the
    markup's strings, whose entity names and numbers count once each, and the elements
    :func:`~ncindex.text.markup.html_text` leaves out (``style``, ``script``) count too.
    Linear in the markup (one C regex pass, as decoding it is)."""
    return _counted_words(_TAG.sub(" ", _part_content(part)))


def _part_text(part: MIMEPart, late: Callable[[], bool], max_chars: int | None) -> tuple[str, bool]:
    """A body part's text and whether it was cut short (an HTML one read under ``late``, as
    by :func:`eml_text`, and its markup parsed only until its text is past ``max_chars``
    characters, the characters left, or its elements past
    :data:`~ncindex.text.markup.MAX_DEPTH` open: :func:`~ncindex.text.markup.html_text`;
    ``None``: no bound). A part
    that names no charset is US-ASCII by RFC 2045 §5.2, but 8-bit bodies without one are
    common (older mailers wrote their code page, newer ones UTF-8), and the ``email``
    package decodes them as ASCII with replacement characters; they and a part with a
    charset Python does not know (or a ``charset*`` parameter it cannot read) are decoded
    as a text file is
    (:func:`~ncindex.text.charsets.decode_text`: UTF-8, else a guess). NUL bytes in such a
    body (a base64 or quoted-printable one decodes to any bytes; only the raw message's are
    refused, by :func:`eml_text`) are dropped
    (:func:`~ncindex.text.charsets.decode_without_nuls`) rather than losing the whole
    message — its subject and addresses too — as binary data. A ``format=flowed`` plain
    part has its paragraphs joined (:func:`_flowed`), its lines read under ``late`` and
    only until its text is past ``max_chars``
    (:func:`~ncindex.text.flowed.unflow`)."""
    content = _part_content(part)
    if part.get_content_subtype() == "html" and content:
        return html_text(content, late=late, max_chars=max_chars)
    if (delsp := _flowed(part)) is not None:
        return unflow(content, delsp=delsp, max_chars=max_chars, late=late), False
    return content, False


def _flowed(part: MIMEPart) -> bool | None:
    """Whether a ``text/plain`` ``part`` is flowed text — ``None`` when it is not (RFC 3676
    §4: ``format`` is ``fixed`` when it is absent or unrecognised, its value and name not
    case-sensitive), else whether its soft line breaks' spaces are deleted (``delsp=yes``;
    ``no`` when absent or unrecognised). A parameter the ``email`` package reads as a
    tuple (an RFC 2231 encoded one) is read as its value."""
    if part.get_content_type() != "text/plain" or _param(part, "format") != "flowed":
        return None
    return _param(part, "delsp") == "yes"


def _param(part: MIMEPart, name: str) -> str:
    """The ``Content-Type`` parameter ``name`` of ``part``, lower-cased ("" when absent)."""
    value = part.get_param(name, "")
    return str(value[2] if isinstance(value, tuple) else value).strip().lower()


def _part_content(part: MIMEPart) -> str:
    """A body part's content, decoded as :func:`_part_text` says ("" when it is not text)."""
    try:
        if part.get_content_charset() is None:
            raise LookupError("no charset")
        content = part.get_content()
    except (LookupError, TypeError):  # TypeError: a charset* parameter (RFC 2231) unread
        payload = part.get_payload(decode=True)
        content = (
            decode_without_nuls(payload, None, len(payload))[0]
            if isinstance(payload, bytes)
            else ""
        )
    return content if isinstance(content, str) else ""
