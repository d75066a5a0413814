"""Calendars and address books exported as files: iCalendar (``.ics``, RFC 5545) and vCard
(``.vcf``, RFC 6350 for 4.0 and 3.0's RFC 2426, and the 2.1 that phones still export).

Read as their content lines rather than as plain text, because plain text loses words: a
line longer than 75 octets is folded (RFC 5545 §3.1, RFC 6350 §3.2: a line break and one
space or tab, often inside a word); vCard 2.1 writes non-ASCII names quoted-printable
(``FN;ENCODING=QUOTED-PRINTABLE:J=C3=BC=72gen``), and text values escape ``,`` ``;`` and
line ends with backslashes (RFC 5545 §3.3.11). Each event, task, journal entry or contact
is a block with its title as a ``#`` heading (``SUMMARY``, ``FN``) and one ``Name: value``
line per property a person would search for; alarms and time-zone definitions are left out.
"""

from __future__ import annotations

import quopri
import re

from ncindex.text.charsets import decode_text, known_encoding

#: Properties kept, with the label they are shown under (RFC 5545 §3.8, RFC 6350 §6).
_LABELS = {
    "DESCRIPTION": "Description",
    "LOCATION": "Location",
    "DTSTART": "Start",
    "DUE": "Due",
    "ORGANIZER": "Organizer",
    "ATTENDEE": "Attendee",
    "CATEGORIES": "Categories",
    "COMMENT": "Comment",
    "N": "Name",
    "NICKNAME": "Nickname",
    "ORG": "Organization",
    "TITLE": "Title",
    "ROLE": "Role",
    "EMAIL": "Email",
    "TEL": "Phone",
    "ADR": "Address",
    "URL": "URL",
    "BDAY": "Birthday",
    "NOTE": "Note",
}
#: The property that titles a component.
_TITLES = ("SUMMARY", "FN")
#: Components whose properties are not the entry's own text (RFC 5545 §3.6.5, §3.6.6).
_SKIPPED = frozenset({"VALARM", "VTIMEZONE", "STANDARD", "DAYLIGHT"})
_FOLD = re.compile(r"\r?\n[ \t]")
_QP_SOFT_BREAK = re.compile(r"=\r?\n")
_ESCAPE = re.compile(r"\\(.)")
#: The parameter holding a person's name on an address property (RFC 5545 §3.2.2 ``CN``).
_COMMON_NAME = re.compile(r';CN="?([^";:]*)"?', re.IGNORECASE)
_DATE = re.compile(r"(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2}))?")


def card_text(data: bytes, max_chars: int) -> tuple[str, bool]:
    """The entries of an iCalendar or vCard file as markdown blocks (see the module), from
    at most the bytes ``max_chars`` characters can need; returns the text and whether bytes
    were cut. Raises :class:`~ncindex.errors.ExtractionError` for binary data."""
    text, cut = decode_text(data, None, max_chars)
    text = _FOLD.sub("", text)
    blocks: list[str] = []
    stack: list[str] = []
    title, lines = "", list[str]()
    pending = ""
    for line in text.splitlines():
        line, pending = pending + line, ""
        name, params, value = _split(line)
        if "QUOTED-PRINTABLE" in params.upper() and value.endswith("="):
            pending = line + "\n"  # a soft line break: the value goes on on the next line
            continue
        if name == "BEGIN":
            stack.append(value.strip().upper())
            if not _skipping(stack):
                title, lines = "", []
        elif name == "END":
            if not _skipping(stack) and (title or lines):
                blocks.append("\n".join([f"# {title or '(untitled)'}", "", *lines]))
                title, lines = "", []
            if stack:
                stack.pop()
        elif not _skipping(stack):
            shown = _value(name, params, value)
            if name in _TITLES and shown and not title:
                title = " ".join(shown.split())
            elif name in _LABELS and shown:
                lines.append(f"{_LABELS[name]}: {shown}")
    return "\n\n".join(blocks), cut


def _skipping(stack: list[str]) -> bool:
    return any(component in _SKIPPED for component in stack)


def _split(line: str) -> tuple[str, str, str]:
    """A content line's name (upper case, group prefix dropped), parameters and value."""
    head, _, value = line.partition(":")
    name, _, params = head.partition(";")
    return name.rpartition(".")[2].strip().upper(), params, value


def _value(name: str, params: str, value: str) -> str:
    upper = params.upper()
    if "QUOTED-PRINTABLE" in upper:
        raw = quopri.decodestring(_QP_SOFT_BREAK.sub("", value).encode("latin-1", "replace"))
        charset = re.search(r"CHARSET=([\w-]+)", upper)
        encoding = known_encoding(charset.group(1) if charset else None) or "utf-8"
        value = raw.decode(encoding, "replace")
    if name in ("ORGANIZER", "ATTENDEE"):
        common = _COMMON_NAME.search(";" + params)
        address = value.removeprefix("mailto:").removeprefix("MAILTO:")
        return f"{common.group(1)} <{address}>" if common and common.group(1) else address
    if name in ("DTSTART", "DUE", "BDAY"):
        date = _DATE.match(value)
        if date:
            day = "-".join(date.group(1, 2, 3))
            return f"{day} {date.group(4)}:{date.group(5)}" if date.group(4) else day
    if name in ("N", "ADR", "ORG"):  # structured: components separated by ';'
        value = " ".join(part for part in _unescaped_parts(value) if part)
        return " ".join(value.split())
    return _ESCAPE.sub(_unescape, value).strip()


def _unescaped_parts(value: str) -> list[str]:
    parts = re.split(r"(?<!\\);", value)
    return [_ESCAPE.sub(_unescape, part).strip() for part in parts]


def _unescape(match: re.Match[str]) -> str:
    char = match.group(1)
    return "\n" if char in "nN" else char
