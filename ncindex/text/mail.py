"""E-mail messages (``.eml``, RFC 5322 with MIME, RFC 2045–2049) by the standard library's
``email`` package (its ``default`` policy decodes RFC 2047 headers): a heading block (the
subject as a ``#`` heading; From, To, Cc and Date lines), the body — the ``text/plain`` part
preferred over ``text/html`` (``EmailMessage.get_body``) — and the attachments listed by file
name, never extracted. The message is parsed, its HTML body read and its attachments listed
under the caller's time budget: a message of thousands of small MIME parts took the parser
minutes (100,000 parts in 3.6 MB: 111 s here). Parts nested deeper than
:data:`MAX_NESTED_PARTS` are left out: the ``email`` feed parser recurses once per level
(2,000 nested multiparts ended in a ``RecursionError`` and lost the whole message)."""

from __future__ import annotations

import re
from collections.abc import Callable
from email import policy
from email.message import EmailMessage, Message, MIMEPart
from email.parser import BytesFeedParser
from email.policy import Policy
from typing import Any

from ncindex.errors import ExtractionError
from ncindex.text.blocks import one_line
from ncindex.text.charsets import decode_without_nuls
from ncindex.text.markup import html_text

_ADDRESS_HEADERS = ("From", "To", "Cc", "Date")
#: MIME parts nested deeper than this are left out of the message (the text marked truncated):
#: Dovecot's message parser's default limit (src/lib-mail/message-parser.h,
#: MESSAGE_PARSER_DEFAULT_MAX_NESTED_MIME_PARTS), well inside Python's recursion limit.
MAX_NESTED_PARTS = 100
#: Bytes of the message fed to the parser between two looks at the clock.
_FEED_PIECE = 64 * 1024
#: Bytes of a header block fed whatever the clock says: a long trace (Received, ARC and
#: DKIM fields a list or relay adds) put the Subject and From past the first piece.
_HEADER_BYTES = 1024 * 1024
#: The blank line that ends a header block (RFC 5322 §2.1; lines end CRLF or, on disk, LF).
_HEADER_END = re.compile(rb"\r?\n\r?\n")


def _never() -> bool:
    return False


def eml_text(data: bytes, late: Callable[[], bool] = _never) -> tuple[str, bool]:
    """The text of an e-mail message, and whether parts nested deeper than
    :data:`MAX_NESTED_PARTS` were left out of it. ``late`` (e.g. :meth:`Blocks.late
    <ncindex.text.blocks.Blocks.late>`, which marks the text truncated) is asked between the
    :data:`_FEED_PIECE` pieces of the message fed to the parser (once its header block,
    up to :data:`_HEADER_BYTES`, is read: the subject and addresses are there), between
    the pieces of an HTML body's markup and before each attachment's name; once it answers
    ``True`` the rest is not read and the text is what was. Raises
    :class:`ExtractionError` when ``data`` holds no header fields (not a message) or a
    header or part cannot be decoded."""
    if b"\x00" in data[:4096]:
        raise ExtractionError("not an e-mail message: binary data")
    try:
        message = _parse(data, late)
        if not isinstance(message, _Nested) or not message.keys():
            raise ExtractionError("not an e-mail message: no header fields")
        subject = one_line(str(message.get("Subject", ""))) or "(no subject)"
        lines = [
            f"{name}: {one_line(str(message[name]))}" for name in _ADDRESS_HEADERS if message[name]
        ]
        text = f"# {subject}\n\n" + "\n".join(lines)
        body = message.get_body(preferencelist=("plain", "html"))
        if body is not None:
            text += "\n\n" + _part_text(body, late)
        names = []
        for attachment in message.iter_attachments():
            if late():
                break
            names.append(one_line(attachment.get_filename() or "(unnamed)"))
        if names:
            text += "\n\nAttachments: " + ", ".join(names)
    except ExtractionError:
        raise
    except Exception as exc:  # header parsers raise assorted types on malformed fields
        raise ExtractionError(f"unreadable e-mail: {type(exc).__name__}: {exc}") from exc
    return text, message.cut[0]


class _Nested(EmailMessage):
    """An ``EmailMessage`` that knows its nesting depth (the message is 0, its parts 1, …),
    made by the feed parser through the policy's ``message_factory``. A part deeper than
    :data:`MAX_NESTED_PARTS` is not attached to its parent and says it is
    ``application/octet-stream``, so the parser reads it as one leaf up to its parent's next
    boundary (the parser recurses only into ``multipart/*`` and ``message/*``, after asking
    ``get_content_maintype``); ``cut`` (one list shared by the message and all its parts)
    records that a part was left out."""

    def __init__(self, policy: Policy | None = None) -> None:
        super().__init__(policy)
        self.depth = 0
        self.cut = [False]

    def attach(self, payload: Any) -> None:  # typeshed: Message | str, MIMEPart: Self
        if isinstance(payload, _Nested):
            payload.depth, payload.cut = self.depth + 1, self.cut
            if payload.depth > MAX_NESTED_PARTS:
                self.cut[0] = True
                return
        super().attach(payload)

    def get_content_type(self) -> str:
        if self.depth > MAX_NESTED_PARTS:
            return "application/octet-stream"
        return super().get_content_type()


def _parse(data: bytes, late: Callable[[], bool]) -> Message:
    """The message parsed from ``data`` fed in :data:`_FEED_PIECE` pieces while ``late()`` is
    false (the pieces holding the header block, at most :data:`_HEADER_BYTES` of it,
    whatever it says). The ``email`` feed parser is incremental: the message closed after a
    piece holds the header fields and parts read so far."""
    end = _HEADER_END.search(data, 0, _HEADER_BYTES)
    header = end.end() if end else min(len(data), _HEADER_BYTES)
    parser = BytesFeedParser(policy=policy.default.clone(message_factory=_Nested))
    for start in range(0, len(data), _FEED_PIECE):
        if start >= header and late():
            break
        parser.feed(data[start : start + _FEED_PIECE])
    return parser.close()


def _part_text(part: MIMEPart, late: Callable[[], bool]) -> str:
    """A body part's text (an HTML one read under ``late``, as by :func:`eml_text`). A part
    that names no charset is US-ASCII by RFC 2045 §5.2, but 8-bit bodies without one are
    common (older mailers wrote their code page, newer ones UTF-8), and the ``email``
    package decodes them as ASCII with replacement characters; they and a part with a
    charset Python does not know are decoded as a text file is
    (:func:`~ncindex.text.charsets.decode_text`: UTF-8, else a guess). NUL bytes in such a
    body (a base64 or quoted-printable one decodes to any bytes; only the raw message's are
    refused, by :func:`eml_text`) are dropped
    (:func:`~ncindex.text.charsets.decode_without_nuls`) rather than losing the whole
    message — its subject and addresses too — as binary data."""
    try:
        if part.get_content_charset() is None:
            raise LookupError("no charset")
        content = part.get_content()
    except LookupError:
        payload = part.get_payload(decode=True)
        content = (
            decode_without_nuls(payload, None, len(payload))[0]
            if isinstance(payload, bytes)
            else ""
        )
    if not isinstance(content, str):
        return ""
    if part.get_content_subtype() == "html":
        return html_text(content, late=late)
    return content
