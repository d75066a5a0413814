"""Rich Text Format (Microsoft RTF 1.9.1 specification) by striprtf (BSD-3-Clause): control
words dropped, ``\\'hh`` escapes decoded in the document's ``\\ansicpg`` code page (cp1252 when
none is declared), ``\\uN`` escapes as Unicode, ``\\par`` as line ends."""

from __future__ import annotations

import codecs
import contextlib
import re

from ncindex.errors import ExtractionError

_CODE_PAGE = re.compile(rb"\\ansicpg(\d{3,5})")


def rtf_text(data: bytes) -> str:
    """The text of an RTF document. Raises :class:`ExtractionError` when ``data`` does not
    start with the ``{\\rtf`` header (RTF 1.9.1: every document does) or cannot be parsed."""
    from striprtf.striprtf import rtf_to_text

    if not data.lstrip().startswith(b"{\\rtf"):
        raise ExtractionError("not an RTF document: no {\\rtf header")
    match = _CODE_PAGE.search(data[:4096])
    encoding = "cp1252"
    if match:
        with contextlib.suppress(LookupError):  # unknown to Python: the Western default
            encoding = codecs.lookup(f"cp{int(match.group(1))}").name
    try:  # RTF is 7-bit text; other bytes are read as Latin-1 rather than rejected
        return str(rtf_to_text(data.decode("latin-1"), encoding=encoding, errors="replace"))
    except Exception as exc:  # striprtf raises assorted types on malformed groups
        raise ExtractionError(f"unreadable RTF: {type(exc).__name__}: {exc}") from exc
