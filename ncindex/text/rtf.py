"""Rich Text Format to text, read by the Microsoft RTF 1.9.1 specification under the
extraction time budget.

One pass over the document's tokens (control words, control symbols, ``\\'hh`` escapes,
braces and runs of text) with a stack of group states: the groups of destinations that are
no document text (the font, colour and style tables, document information, pictures and
objects' data, field instructions, ``{\\*\\…}`` groups) are skipped, as are headers, footers,
footnotes and annotations; ``\\'hh`` bytes are decoded in the code page of the current font's
``\\fcharset`` (else the document's ``\\ansicpg``, else windows-1252); ``\\uN`` is Unicode with
its ``\\ucN`` fallback characters skipped; ``\\binN`` data is stepped over; ``\\par``,
``\\line``, ``\\sect``, ``\\page`` and ``\\row`` end lines, ``\\cell`` and ``\\tab`` are tabs.
Text after the document's outer group is ignored, as Word and WordPad do.

striprtf read the document in one call (a 12 MB RTF took 3.6 s here) that no budget could
cut short; here the budget is looked at every :data:`_LOOK_EVERY` tokens.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from ncindex.errors import ExtractionError

#: One token of RTF (1.9.1 "Conventions of an RTF Reader"): a control word with its optional
#: numeric parameter and the space that delimits it, a hex escape, a control symbol, a brace,
#: line ends (not text in RTF), or a run of plain text.
_TOKEN = re.compile(
    r"\\([a-zA-Z]{1,32})(-?\d{1,10})? ?|\\'([0-9a-fA-F]{2})|\\(.?)|([{}])|[\r\n]+|([^\\{}\r\n]+)",
    re.DOTALL,
)
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Tokens read between two looks at the clock (about a millisecond of reading here).
_LOOK_EVERY = 1024
#: Destinations whose content is not document text: the header tables (fonts, files,
#: colours, styles, lists, revision authors, RSIDs, the theme and data store of Word 2007+),
#: document information, pictures and objects' data, form fields' data and field
#: instructions (their result is text), and the parts read apart from the body in other
#: formats but not here (headers, footers, footnotes, annotations).
_SKIPPED = frozenset({
    "fonttbl", "filetbl", "colortbl", "stylesheet", "listtable", "listoverridetable",
    "revtbl", "rsidtbl", "info", "pict", "objdata", "objclass", "objname", "themedata",
    "colorschememapping", "datastore", "latentstyles", "xmlnstbl", "generator", "fldinst",
    "datafield", "header", "headerl", "headerr", "headerf", "footer", "footerl", "footerr",
    "footerf", "footnote", "annotation", "atnid", "atnauthor", "pn", "listtext", "pntext",
})  # fmt: skip
#: Control words that stand for text.
_WORDS = {
    "par": "\n", "line": "\n", "sect": "\n\n", "page": "\n\n", "row": "\n", "cell": "\t",
    "nestcell": "\t", "tab": "\t", "emdash": "\u2014", "endash": "\u2013",
    "emspace": "\u2003", "enspace": "\u2002", "qmspace": "\u2005", "bullet": "\u2022",
    "lquote": "\u2018", "rquote": "\u2019", "ldblquote": "\u201c", "rdblquote": "\u201d",
}  # fmt: skip
#: Control symbols that stand for text (``\\-``, an optional hyphen, stands for none).
_SYMBOLS = {
    "~": "\u00a0", "_": "\u2011", "-": "", "{": "{", "}": "}", "\\": "\\",
    "\n": "\n", "\r": "\n",
}  # fmt: skip
#: ``\\fcharsetN`` to its code page (RTF 1.9.1, the font table's ``\\fcharset`` values); 0 and
#: 1 (ANSI, default) are the document's own code page.
_FONT_CHARSETS = {
    2: "cp1252", 77: "mac_roman", 128: "cp932", 129: "cp949", 130: "johab", 134: "gbk",
    136: "big5", 161: "cp1253", 162: "cp1254", 163: "cp1258", 177: "cp1255", 178: "cp1256",
    186: "cp1257", 204: "cp1251", 222: "cp874", 238: "cp1250", 255: "cp437",
}  # fmt: skip
#: The character sets of the document header other than ``\\ansi`` (RTF 1.9.1).
_DOCUMENT_CHARSETS = {"mac": "mac_roman", "pc": "cp437", "pca": "cp850"}


@dataclass(frozen=True, slots=True)
class _Group:
    """What a group inherits from the one it is in: whether its content is skipped, whether it
    is the font table, the code page of its current font and its ``\\ucN``."""

    skipped: bool = False
    fonts: bool = False
    encoding: str | None = None
    uc: int = 1


def rtf_text(data: bytes, late: Callable[[], bool] | None = None) -> str:
    """The text of an RTF document, lines ended by ``\\n``. ``late`` (e.g. :meth:`Blocks.late
    <ncindex.text.blocks.Blocks.late>`, which marks the text truncated) is asked before the
    first token and every :data:`_LOOK_EVERY` tokens after it; once it answers ``True`` the
    text is that read so far. Raises :class:`ExtractionError` when ``data`` does not start
    with the ``{\\rtf`` header (RTF 1.9.1: every document does)."""
    if not data.lstrip().startswith(b"{\\rtf"):
        raise ExtractionError("not an RTF document: no {\\rtf header")
    # RTF is 7-bit text; other bytes are read as Latin-1 rather than rejected
    return _Reader(late).read(data.lstrip().decode("latin-1"))


class _Reader:
    """One document's reading: its output, its font table and its code page."""

    def __init__(self, late: Callable[[], bool] | None) -> None:
        self.late = late
        self.out: list[str] = []
        self.hexes = bytearray()  # \'hh bytes not yet decoded (a DBCS character takes two)
        self.codepage = "cp1252"
        self.font_codepages: dict[str, str] = {}
        self.font: str | None = None  # the font being defined in the font table
        self.default_font: str | None = None

    def read(self, text: str) -> str:
        stack: list[_Group] = []
        group = _Group()
        skip = 0  # \uN fallback characters still to skip
        pos, count = 0, 0
        while pos < len(text):
            if count % _LOOK_EVERY == 0 and self.late is not None and self.late():
                break
            count += 1
            match = _TOKEN.match(text, pos)
            assert match is not None  # every character starts some token
            pos = match.end()
            word, arg, hexa, symbol, brace, run = match.groups()
            if hexa is None and self.hexes:
                self._flush(group)
            if brace == "{":
                stack.append(group)
                skip = 0
            elif brace == "}":
                group = stack.pop()
                skip = 0
                if not stack:
                    break  # the document's outer group is closed: the rest is not the document
            elif run is not None:
                if skip:
                    run, skip = run[skip:], max(0, skip - len(run))
                if not group.skipped:
                    self.out.append(run)
            elif hexa is not None:
                if skip:
                    skip -= 1
                elif not group.skipped:
                    self.hexes.append(int(hexa, 16))
            elif symbol is not None:
                skip = max(0, skip - 1)
                if symbol == "*":
                    group = replace(group, skipped=True)
                elif not group.skipped:
                    self.out.append(_SYMBOLS.get(symbol, ""))
            elif word is not None:
                skip = max(0, skip - 1)
                if word == "bin":  # binary data follows: step over it
                    pos += max(0, int(arg or 0))
                elif word == "u" and arg is not None:
                    if not group.skipped:
                        self.out.append(chr(int(arg) % 0x10000))
                    skip = group.uc
                else:
                    group = self._word(group, word, arg)
        if self.hexes:
            self._flush(group)
        return _join_surrogates("".join(self.out))

    def _word(self, group: _Group, word: str, arg: str | None) -> _Group:
        """The group after control word ``word`` (its parameter ``arg``), text written."""
        if word in _SKIPPED:
            return replace(group, skipped=True, fonts=word == "fonttbl" or group.fonts)
        if word == "uc" and arg is not None:
            return replace(group, uc=max(0, int(arg)))
        if group.fonts:  # the font table: {\fN ... \fcharsetM ... name;}
            if word == "f":
                self.font = arg
            elif word == "fcharset" and self.font is not None and arg is not None:
                codepage = _FONT_CHARSETS.get(int(arg))
                if codepage is not None:
                    self.font_codepages[self.font] = codepage
            return group
        if word == "f" or (word == "plain" and self.default_font is not None):
            font = arg if word == "f" else self.default_font
            return replace(group, encoding=self.font_codepages.get(font or ""))
        if word == "deff":
            self.default_font = arg
        elif word == "ansicpg" and arg is not None:
            self.codepage = _codec(f"cp{int(arg)}") or self.codepage
        elif word in _DOCUMENT_CHARSETS:
            self.codepage = _DOCUMENT_CHARSETS[word]
        elif not group.skipped and word in _WORDS:
            self.out.append(_WORDS[word])
        return group

    def _flush(self, group: _Group) -> None:
        """Decode the ``\\'hh`` bytes read in the group's code page."""
        self.out.append(bytes(self.hexes).decode(group.encoding or self.codepage, "replace"))
        self.hexes.clear()


def _codec(name: str) -> str | None:
    try:
        return codecs.lookup(name).name
    except LookupError:  # a code page Python does not know: the document's default stays
        return None


def _join_surrogates(text: str) -> str:
    """``text`` with the UTF-16 surrogate pairs ``\\uN`` writes for characters beyond the
    Basic Multilingual Plane (``\\u-10179?\\u-8704?``) joined, a lone surrogate replaced."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
