"""Calendars and address books exported as files: iCalendar (``.ics``, RFC 5545) and vCard
(``.vcf``, RFC 6350 for 4.0 and 3.0's RFC 2426, and the 2.1 that phones still export).

Read as their content lines rather than as plain text, because plain text loses words: a
line longer than 75 octets is folded (RFC 5545 §3.1, RFC 6350 §3.2: a line break and one
space or tab, often inside a word); vCard 2.1 writes non-ASCII names quoted-printable
(``FN;CHARSET=UTF-8;ENCODING=QUOTED-PRINTABLE:J=C3=BC=72gen``, soft line breaks ending in
``=``), and text values escape ``,`` ``;`` and line ends with backslashes (RFC 5545
§3.3.11). Each event, task, journal entry or contact is a block with its title as a ``#``
heading (``SUMMARY``, ``FN``) and one ``Name: value`` line per property a person would
search for; alarms and time-zone definitions are left out.

The content lines are read by vobject (Apache-2.0): its ``getLogicalLines`` unfolds lines and
joins quoted-printable soft line breaks, its ``textLineToContentLine`` splits a line into
group, name, parameters and value and decodes quoted-printable in the line's ``CHARSET``, and
its ``stringToTextValues``, ``splitFields`` and ``stringToDate``/``stringToDateTime`` undo
escapes, split structured values and read dates. Those are the two steps vobject's own
``readComponents`` is built from; it is not used itself because it yields a whole
``VCALENDAR`` (one per file) only once every line is read — no place to check the time
budget, several times the file's size in memory, and nothing at all from a file cut at the
byte bound ("Component VCALENDAR was never closed"). So this module keeps the component
stack: which entry a line belongs to, and which components (alarms, time zones) to skip.
"""

from __future__ import annotations

import io
import quopri
from typing import Any

from vobject.base import VObjectError, getLogicalLines, parseLine, textLineToContentLine
from vobject.icalendar import stringToDate, stringToDateTime, stringToTextValues
from vobject.vcard import splitFields

from ncindex.errors import ExtractionError
from ncindex.text.blocks import Blocks, one_line
from ncindex.text.charsets import decode_text

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
#: Properties whose value is structured: components separated by ``;`` (RFC 6350 §6.2.2,
#: §6.3.1, §6.6.4).
_STRUCTURED = frozenset({"N", "ADR", "ORG"})
#: What reading one line raises when it cannot be read: vobject's ``ParseError`` (no
#: ``name:value``), ``ExtractionError`` (a quoted-printable value of NUL bytes: binary).
_UNREADABLE_LINE = (VObjectError, ExtractionError)


def card_text(text: str, blocks: Blocks) -> None:
    """The entries of an iCalendar or vCard file's ``text`` into ``blocks`` as markdown
    blocks (see the module), until the blocks' character or time budget is spent.

    A line vobject cannot read is skipped, as its ``readComponents(ignoreUnreadable=True)``
    does, so one contact's odd line does not cost the whole address book; an entry still
    open at the end (a file cut at the byte bound) is left out. Raises
    :class:`~ncindex.errors.ExtractionError` when the text holds no component at all (no
    ``BEGIN:VCALENDAR``/``BEGIN:VCARD`` line: not a calendar or address book), with the
    first unreadable line's reason when there was one."""
    stack: list[str] = []
    title, lines = "", list[str]()
    first_error: str | None = None
    seen_component = False
    # newline=None: a file with bare CR line ends (classic Mac OS exports) is split too
    # (vobject's own line numbers count the first line 0 and the others from 1: not shown)
    logical = enumerate(getLogicalLines(io.StringIO(text, newline=None), True), 1)
    for number, (raw, _) in logical:
        if blocks.late():
            return
        try:
            name, params, value = _content_line(raw)
        except _UNREADABLE_LINE as exc:
            detail = exc.msg if isinstance(exc, VObjectError) else f"{type(exc).__name__}: {exc}"
            first_error = first_error or f"content line {number}: {detail}"
            continue
        if name == "BEGIN":
            seen_component = True
            stack.append(value.strip().upper())
            if not _skipping(stack):
                title, lines = "", []
        elif name == "END":
            if not _skipping(stack) and (title or lines):
                entry = "\n".join([f"# {title or '(untitled)'}", "", *lines])
                title, lines = "", []
                if not blocks.add(entry):
                    return
            if stack:
                stack.pop()
        elif not _skipping(stack):
            shown = _value(name, params, value)
            if name in _TITLES and shown and not title:
                title = one_line(shown)
            elif name in _LABELS and shown:
                lines.append(f"{_LABELS[name]}: {shown}")
    if not seen_component:
        reason = first_error or "no BEGIN:VCALENDAR or BEGIN:VCARD line"
        raise ExtractionError(f"not an iCalendar or vCard file: {reason}")


def _content_line(raw: str) -> tuple[str, dict[str, list[str]], str]:
    """A logical line's name (upper case, group dropped), parameters (names upper case) and
    value, quoted-printable decoded. Raises what :data:`_UNREADABLE_LINE` names.

    vobject decodes a quoted-printable value strictly in the line's ``CHARSET``, else in
    UTF-8, and raises for bytes not in it or a charset Python does not know (an address
    book from an older phone or mail program: ``FN;ENCODING=QUOTED-PRINTABLE:M=FCller``,
    Windows-1252 bytes and no ``CHARSET``). Such a value is decoded here as ncindex decodes
    a text file (:func:`~ncindex.text.charsets.decode_text`: UTF-8, the declared charset,
    else a guess), so one name in a legacy charset does not lose the line."""
    try:
        line = textLineToContentLine(raw)
        return line.name, line.params, str(line.value)
    except (UnicodeError, LookupError, TypeError):
        pass  # raised only by vobject's quoted-printable decoding (ContentLine.__init__)
    name, param_list, value, _ = parseLine(raw)
    params = {param[0].upper(): param[1:] for param in param_list}
    data = quopri.decodestring(value.encode("utf-8"))
    declared = (params.get("CHARSET") or [None])[0]
    return name.upper(), params, decode_text(data, declared, len(data))[0]


def _skipping(stack: list[str]) -> bool:
    return any(component in _SKIPPED for component in stack)


def _value(name: str, params: dict[str, list[str]], value: str) -> str:
    """The text a property's (quoted-printable-decoded) ``value`` is shown as."""
    if name in ("ORGANIZER", "ATTENDEE"):  # a calendar user address (RFC 5545 §3.8.4.1, .3)
        address = value[len("mailto:") :] if value.lower().startswith("mailto:") else value
        common = (params.get("CN") or [""])[0]  # the person's name (RFC 5545 §3.2.2)
        return f"{common} <{address}>" if common else address
    if name in ("DTSTART", "DUE", "BDAY"):
        return _date(value)
    if name in _STRUCTURED:
        parts = (_text(part) for part in splitFields(value))
        return one_line(" ".join(part for part in parts if part))
    return _text(stringToTextValues(value)).strip()


def _text(values: Any) -> str:
    """Unescaped text values (``stringToTextValues`` splits on unescaped ``,``, or one
    field of ``splitFields``: a string or such a list) joined as they were written."""
    return values if isinstance(values, str) else ",".join(values)


def _date(value: str) -> str:
    """``20260105T090000`` as ``2026-01-05 09:00``, ``20260531`` as ``2026-05-31`` (RFC 5545
    §3.3.4, §3.3.5; the wall-clock time, whatever its ``TZID``); any other form as written."""
    value = value.strip()
    try:
        if len(value) == 8:
            return stringToDate(value).isoformat()
        return str(stringToDateTime(value).strftime("%Y-%m-%d %H:%M"))
    except (VObjectError, ValueError):
        return value
