"""XML helpers shared by the WebDAV, system-tag and OCS handlers.

Parsing uses lxml with entity resolution, DTD loading and network access switched off, so request
bodies cannot pull in external resources. Building uses lxml element trees with the namespace
prefixes Nextcloud's Sabre server emits (``d``, ``s``, ``oc``, ``nc``).
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote

from lxml import etree
from werkzeug.wrappers import Response

DAV = "DAV:"
SABRE = "http://sabredav.org/ns"
OC = "http://owncloud.org/ns"
NC = "http://nextcloud.org/ns"
NSMAP = {"d": DAV, "s": SABRE, "oc": OC, "nc": NC}

XML_CONTENT_TYPE = "application/xml; charset=utf-8"
_EXC = "Sabre\\DAV\\Exception\\"

_PARSER = etree.XMLParser(
    resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, remove_comments=True
)


class XmlBodyError(ValueError):
    """Raised when a request body is not well-formed XML."""


def parse_xml(body: bytes) -> etree._Element | None:
    """Parse a request body safely; ``None`` for an empty body, :class:`XmlBodyError` if broken."""
    if not body.strip():
        return None
    try:
        return etree.fromstring(body, parser=_PARSER)
    except etree.XMLSyntaxError as exc:
        raise XmlBodyError(str(exc)) from exc


def clark(ns: str, name: str) -> str:
    """Return the Clark notation ``{ns}name`` of a qualified XML name."""
    return f"{{{ns}}}{name}"


SABRE_DECLARATION = b'<?xml version="1.0" encoding="utf-8"?>\n'
PHP_DECLARATION = b'<?xml version="1.0"?>\n'


def to_bytes(root: etree._Element, declaration: bytes = SABRE_DECLARATION) -> bytes:
    """Serialise an element tree as a UTF-8 XML document with Sabre's declaration; bytes."""
    return declaration + etree.tostring(root, encoding="utf-8", pretty_print=True)


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(ts: float) -> str:
    """Format Unix seconds as an RFC 1123 HTTP-date, e.g. ``Tue, 06 Jan 2026 09:15:00 GMT``, as
    sabre/http ``toDate`` does (PHP ``DateTime::format('D, d M Y H:i:s \\G\\M\\T')``) for any
    64-bit timestamp Nextcloud accepts: a year after 9999 in full (PHP's ``Y``), where Python's
    ``datetime`` stops. The date is H. Hinnant's ``civil_from_days`` (proleptic Gregorian)."""
    days, secs = divmod(math.floor(ts), 86400)
    era, doe = divmod(days + 719468, 146097)  # 400-year eras from 0000-03-01
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153  # months from March
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    hours, rest = divmod(secs, 3600)
    minutes, seconds = divmod(rest, 60)
    weekday = _DAYS[(days + 3) % 7]  # 1970-01-01 was a Thursday
    return (
        f"{weekday}, {day:02d} {_MONTHS[month - 1]} {year:04d} "
        f"{hours:02d}:{minutes:02d}:{seconds:02d} GMT"
    )


def encode_path(path: str) -> str:
    """URL-encode a path per segment the way Sabre does (keeps ``/ ( ) : @`` and unreserved)."""
    return quote(path, safe="/():@")


def sabre_error(exception: str, message: str, **extra: Any) -> bytes:
    """Build Sabre's XML error body, e.g. for ``Sabre\\DAV\\Exception\\NotFound``; bytes."""
    root = etree.Element(clark(DAV, "error"), nsmap={"d": DAV, "s": SABRE})
    etree.SubElement(root, clark(SABRE, "exception")).text = exception
    etree.SubElement(root, clark(SABRE, "message")).text = message
    for key, value in extra.items():
        etree.SubElement(root, clark(SABRE, key)).text = str(value)
    return to_bytes(root)


def dav_error(status: int, exception: str, message: str, **headers: str) -> Response:
    """A Sabre error response, e.g. ``dav_error(404, "NotFound", "File with name x …")``."""
    name = exception if "\\" in exception else _EXC + exception
    resp = Response(sabre_error(name, message), status=status, content_type=XML_CONTENT_TYPE)
    for key, value in headers.items():
        resp.headers[key.replace("_", "-")] = value
    return resp
