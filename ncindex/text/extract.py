"""Text from document bytes: plain text, markdown, HTML, PDF, DOCX, ODT — bounded (DESIGN §6, §8).

The format is chosen by MIME type, then by file extension (Nextcloud reports
``application/octet-stream`` for types it does not know). Every input is bounded: the bytes
read (``max_bytes``, and the uncompressed size of DOCX/ODT zip archives), the PDF pages
(``max_pages``) and a wall-clock budget between PDF pages, and the characters returned
(``max_chars``); text beyond a bound is cut and reported as ``truncated``. Corrupt or
unreadable input raises :class:`~ncindex.errors.ExtractionError` with a reason; input over a
byte bound raises :class:`~ncindex.errors.TooLarge`.

Libraries (all permissive): pypdf (BSD-3-Clause; ~190 pages/s measured here), python-docx
(MIT), odfpy (Apache-2.0/LGPL dual), BeautifulSoup 4 (MIT) on lxml (BSD-3-Clause),
charset-normalizer (MIT) for the encoding of legacy text files.

The returned text is normalised: ``\\n`` line ends, no control characters other than tab and
newline, at most one blank line in a row. Offsets of chunks refer to this text.
"""

from __future__ import annotations

import codecs
import io
import re
import time
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import PurePosixPath
from typing import Any

from ncindex.errors import ExtractionError, TooLarge

#: PDF pages read at most (pypdf reads ~190 pages/s here, so about 3 s of work).
DEFAULT_MAX_PAGES = 500
#: Largest uncompressed size of a DOCX/ODT archive, bytes (all members together).
DEFAULT_MAX_UNZIPPED_BYTES = 256 * 1024 * 1024
#: Wall-clock budget for reading PDF pages, seconds; checked between pages.
DEFAULT_MAX_SECONDS = 60.0

TEXT, MARKDOWN, HTML, PDF, DOCX, ODT = "text", "markdown", "html", "pdf", "docx", "odt"

# IANA media types (https://www.iana.org/assignments/media-types/) and the ones Nextcloud's
# mimetypemapping.dist.json assigns to these extensions.
_MIME_FORMATS = {
    "text/plain": TEXT,
    "text/markdown": MARKDOWN,
    "text/x-markdown": MARKDOWN,
    "text/html": HTML,
    "application/xhtml+xml": HTML,
    "application/pdf": PDF,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": DOCX,
    "application/vnd.oasis.opendocument.text": ODT,
}
# text/* types that are markup or binary-ish rather than readable text
_TEXT_EXCLUDED = {"text/rtf", "text/vnd.graphviz"}
_EXT_FORMATS = {
    **dict.fromkeys(("txt", "text", "log", "csv", "tsv", "org", "rst", "note"), TEXT),
    **dict.fromkeys(("md", "markdown", "mdown", "mkd", "mkdn"), MARKDOWN),
    **dict.fromkeys(("html", "htm", "xhtml"), HTML),
    "pdf": PDF,
    "docx": DOCX,
    "odt": ODT,
}

# Control characters removed from extracted text: C0 except tab and newline, DEL, C1.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")
_BLANK_RUNS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+\n")
_SPACES = re.compile(r"[ \t\u00a0]+")


@dataclass(frozen=True, slots=True)
class ExtractedText:
    """Text extracted from one document.

    ``text`` is at most ``max_chars`` characters; ``markdown`` tells the chunker to split on
    markdown structure; ``pages`` is the document's page count (PDF) or ``None``;
    ``truncated`` is true when a bound (bytes, pages, characters, time) cut the text short.
    """

    text: str
    markdown: bool
    pages: int | None
    truncated: bool


def detect_format(mime_type: str | None, filename: str) -> str | None:
    """The extractor for a file: ``"text"``, ``"markdown"``, ``"html"``, ``"pdf"``, ``"docx"``,
    ``"odt"`` or ``None`` (unsupported). The MIME type decides (parameters such as ``charset``
    ignored); a generic or missing one defers to the extension, and a ``text/plain`` file with
    a markdown extension is markdown."""
    mime = _media_type(mime_type)
    by_ext = _EXT_FORMATS.get(PurePosixPath(filename).suffix.lower().lstrip("."))
    by_mime = _MIME_FORMATS.get(mime)
    if by_mime is None and mime.startswith("text/") and mime not in _TEXT_EXCLUDED:
        by_mime = TEXT
    if by_mime == TEXT and by_ext == MARKDOWN:
        return MARKDOWN
    return by_mime or by_ext


def is_supported(mime_type: str | None, filename: str) -> bool:
    """Whether :func:`extract_text` can read a file of this MIME type and name."""
    return detect_format(mime_type, filename) is not None


def extract_text(
    data: bytes,
    *,
    mime_type: str | None,
    filename: str,
    max_chars: int,
    max_pages: int = DEFAULT_MAX_PAGES,
    max_bytes: int | None = None,
    max_unzipped_bytes: int = DEFAULT_MAX_UNZIPPED_BYTES,
    max_seconds: float = DEFAULT_MAX_SECONDS,
) -> ExtractedText:
    """Extract the text of a document from its bytes.

    ``mime_type`` and ``filename`` choose the format (:func:`detect_format`). Bounds:
    ``max_chars`` characters of text are returned (``Settings.max_document_chars``);
    ``max_pages`` PDF pages are read; ``max_bytes`` bytes of input are accepted
    (``Settings.max_download_bytes``; ``None`` = no check); DOCX/ODT archives may unpack to
    ``max_unzipped_bytes``; PDF pages stop being read after ``max_seconds`` seconds.

    Raises :class:`~ncindex.errors.ExtractionError` for an unsupported type, binary data in a
    text file (NUL bytes), an encrypted or corrupt document; :class:`~ncindex.errors.TooLarge`
    when ``data`` exceeds ``max_bytes`` or an archive exceeds ``max_unzipped_bytes``;
    ``ValueError`` for a bound below 1.
    """
    if max_chars < 1 or max_pages < 1 or max_unzipped_bytes < 1:
        raise ValueError("max_chars, max_pages and max_unzipped_bytes must be at least 1")
    if max_bytes is not None and len(data) > max_bytes:
        raise TooLarge(f"{len(data)} bytes exceeds the limit of {max_bytes} bytes")
    fmt = detect_format(mime_type, filename)
    if fmt is None:
        raise ExtractionError(f"unsupported file type {mime_type!r} ({filename!r})")
    if fmt in (TEXT, MARKDOWN):
        text, cut = _decode_text(data, _charset(mime_type), max_chars)
        return _result(text, max_chars, markdown=fmt == MARKDOWN, pages=None, truncated=cut)
    if fmt == HTML:
        return _result(_html_text(data), max_chars, markdown=False, pages=None, truncated=False)
    if fmt == PDF:
        text, pages, cut = _pdf_text(data, max_chars, max_pages, max_seconds)
        return _result(text, max_chars, markdown=False, pages=pages, truncated=cut)
    _check_zip(data, max_unzipped_bytes)
    parts = _docx_parts(data) if fmt == DOCX else _odt_parts(data)
    text, cut = _join_bounded(parts, max_chars)
    return _result(text, max_chars, markdown=False, pages=None, truncated=cut)


# --- common --------------------------------------------------------------------------------


def _media_type(mime_type: str | None) -> str:
    return (mime_type or "").split(";", 1)[0].strip().lower()


def _charset(mime_type: str | None) -> str | None:
    if not mime_type or ";" not in mime_type:
        return None
    msg = Message()
    msg["content-type"] = mime_type
    value = msg.get_param("charset")
    return value if isinstance(value, str) and value else None


def normalize_text(text: str) -> str:
    """``text`` with ``\\n`` line ends, form feeds as line ends, control characters (other than
    tab and newline) removed, trailing spaces stripped and runs of blank lines cut to one."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x0c", "\n")
    text = _CONTROL.sub("", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _BLANK_RUNS.sub("\n\n", text).strip("\n")


def _result(
    text: str, max_chars: int, *, markdown: bool, pages: int | None, truncated: bool
) -> ExtractedText:
    text = normalize_text(text)
    if len(text) > max_chars:
        text, truncated = text[:max_chars], True
    return ExtractedText(text=text, markdown=markdown, pages=pages, truncated=truncated)


def _join_bounded(parts: Iterator[str], max_chars: int) -> tuple[str, bool]:
    """Join non-empty ``parts`` with blank lines, stopping once past ``max_chars``."""
    out: list[str] = []
    size = 0
    for part in parts:
        part = part.strip()
        if not part:
            continue
        out.append(part)
        size += len(part) + 2
        if size > max_chars:
            return "\n\n".join(out), True
    return "\n\n".join(out), False


# --- plain text ----------------------------------------------------------------------------

_BOMS = (  # UTF-32 before UTF-16: the UTF-32-LE BOM begins with the UTF-16-LE one
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Bytes sampled for charset detection (charset-normalizer is slow on large inputs).
_DETECT_SAMPLE = 64 * 1024


def _decode_text(data: bytes, declared: str | None, max_chars: int) -> tuple[str, bool]:
    """Decode at most the bytes ``max_chars`` characters can need: UTF-8 (strict), UTF-8 with
    a BOM or another Unicode BOM, the declared charset, then charset-normalizer's best guess,
    then cp1252 with replacement characters. Returns the text and whether bytes were cut."""
    limit = 4 * max_chars + 4  # no encoding used here takes more than 4 bytes per character
    cut = len(data) > limit
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            body = data[len(bom) : len(bom) + limit]
            return codecs.getincrementaldecoder(encoding)("replace").decode(body), cut
    head = data[:limit]
    if b"\x00" in head:
        raise ExtractionError("binary data: NUL bytes in a text file")
    try:
        return codecs.getincrementaldecoder("utf-8")("strict").decode(head, final=not cut), cut
    except UnicodeDecodeError:
        pass
    encoding = _known_encoding(declared)
    if encoding:
        try:
            return head.decode(encoding, errors="replace"), cut
        except (LookupError, UnicodeError, ValueError):
            pass  # a codec that is no text encoding (base64, rot13, idna, punycode…): guess
    return head.decode(_guess_encoding(head) or "cp1252", errors="replace"), cut


def _known_encoding(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name).name
    except (LookupError, ValueError):  # unknown, or a name with a NUL in it
        return None


def _guess_encoding(data: bytes) -> str | None:
    """charset-normalizer's guess, with two preferences among the guesses that decode as
    cleanly as its first (its "chaos" measure within 0.01): Windows/ISO code pages over the
    classic Mac ones (short Russian cp1251 text is otherwise read as mac_cyrillic), and
    windows-1252 — the legacy default of Western locales, which WHATWG's Encoding Standard
    also uses for ``latin1`` — when it ties with the best (short French is otherwise cp1250)."""
    from charset_normalizer import from_bytes

    matches = list(from_bytes(data[:_DETECT_SAMPLE]))
    if not matches:
        return None
    plausible = [m for m in matches if m.chaos <= matches[0].chaos + 0.01]
    preferred = [m for m in plausible if not m.encoding.startswith("mac_")] or plausible
    best = preferred[0]
    for match in preferred:
        tied = match.chaos <= best.chaos + 0.01 and match.coherence >= best.coherence - 0.01
        if tied and "cp1252" in (match.encoding, *match.could_be_from_charset):
            return "cp1252"
    return _known_encoding(best.encoding)


# --- HTML ----------------------------------------------------------------------------------

# Elements whose content is not document text.
_HTML_DROP = ("script", "style", "noscript", "template", "svg", "canvas", "iframe", "object")
# Elements that start a new line (HTML Living Standard's block-level and table structure).
_HTML_BLOCKS = (
    "address", "article", "aside", "blockquote", "caption", "dd", "details", "div", "dl",
    "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
    "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary",
    "table", "tr", "ul", "title",
)  # fmt: skip


def _html_text(data: bytes) -> str:
    from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, XMLParsedAsHTMLWarning

    try:
        with warnings.catch_warnings():
            # advisory warnings about the input, not errors: XHTML parsed as HTML, or a
            # document so short it looks like a file name
            warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
            warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
            soup = BeautifulSoup(data, "lxml")
        for tag in soup.find_all(_HTML_DROP):
            tag.decompose()
        # separators go inside the tags (insert and append are O(children of the tag)):
        # insert_before and replace_with look the tag up among its parent's children,
        # quadratic for 20,000 sibling paragraphs (14 s, found by fuzzing)
        for tag in soup.find_all("br"):
            tag.insert(0, "\n")
        for tag in soup.find_all(("td", "th")):
            tag.append(" ")
        for tag in soup.find_all(_HTML_BLOCKS):
            tag.insert(0, "\n")
            tag.append("\n")
        raw = soup.get_text()
    except Exception as exc:  # parsers raise assorted types on hostile markup
        raise ExtractionError(f"unreadable HTML: {type(exc).__name__}: {exc}") from exc
    lines = (_SPACES.sub(" ", line).strip() for line in raw.split("\n"))
    return "\n".join(lines)


# --- PDF -----------------------------------------------------------------------------------


def _pdf_text(
    data: bytes, max_chars: int, max_pages: int, max_seconds: float
) -> tuple[str, int, bool]:
    from pypdf import PdfReader

    deadline = time.monotonic() + max_seconds
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise ExtractionError("encrypted PDF (needs a password)")
        total = len(reader.pages)
    except ExtractionError:
        raise
    except Exception as exc:  # pypdf raises assorted types on corrupt files
        raise ExtractionError(f"unreadable PDF: {type(exc).__name__}: {exc}") from exc

    texts: list[str] = []
    size, failed, read = 0, 0, 0
    truncated = total > max_pages
    for number in range(min(total, max_pages)):
        if time.monotonic() > deadline:
            truncated = True
            break
        read += 1
        try:
            page_text = reader.pages[number].extract_text() or ""
        except Exception:  # one bad page must not lose the others
            failed += 1
            continue
        texts.append(page_text)
        size += len(page_text) + 2
        if size > max_chars:  # enough text; _result cuts it to max_chars exactly
            truncated = truncated or number + 1 < total
            break
    if read and failed == read:
        raise ExtractionError(f"unreadable PDF: none of {read} pages could be read")
    return "\n\n".join(texts), total, truncated


# --- DOCX and ODT --------------------------------------------------------------------------


def _check_zip(data: bytes, max_unzipped_bytes: int) -> None:
    """Reject archives that are not zip files or would unpack beyond the bound (zip bombs).
    A member's declared size bounds what ``zipfile`` will read from it."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    # RuntimeError includes zipfile's NotImplementedError: a member needing a newer zip version
    # ("zip file version 6.4") or an unsupported compression method
    except (zipfile.BadZipFile, ValueError, EOFError, OSError, RuntimeError) as exc:
        raise ExtractionError(f"not a valid document archive: {exc}") from exc
    if unpacked > max_unzipped_bytes:
        raise TooLarge(f"archive unpacks to {unpacked} bytes (limit {max_unzipped_bytes})")


def _docx_parts(data: bytes) -> Iterator[str]:
    """Paragraphs and table rows of a DOCX body, in document order (tables: ``a | b`` rows)."""
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(document.iter_inner_content())
    except Exception as exc:  # python-docx raises assorted types on corrupt files
        raise ExtractionError(f"unreadable DOCX: {type(exc).__name__}: {exc}") from exc
    return _docx_blocks(blocks, Table)


def _docx_blocks(blocks: list[Any], table_type: type) -> Iterator[str]:
    for block in blocks:
        try:
            if isinstance(block, table_type):
                yield from _docx_table(block)
            else:
                yield block.text
        except Exception as exc:  # malformed table grids and the like
            raise ExtractionError(f"unreadable DOCX: {type(exc).__name__}: {exc}") from exc


def _docx_table(table: Any) -> Iterator[str]:
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell repeats once per grid column it spans
                continue
            seen.add(id(cell._tc))
            text = " ".join(cell.text.split())
            if text:
                cells.append(text)
        yield " | ".join(cells)


def _odt_parts(data: bytes) -> Iterator[str]:
    """Headings, paragraphs, list items and table rows of an ODT body, in document order."""
    from odf.opendocument import load

    try:
        document = load(io.BytesIO(data))
        body = document.text
    except Exception as exc:  # odfpy raises assorted types on corrupt files
        raise ExtractionError(f"unreadable ODT: {type(exc).__name__}: {exc}") from exc
    if body is None:  # odfpy loads a content.xml without <office:text> as no body
        raise ExtractionError("unreadable ODT: no text body")
    _bound_space_runs(document)
    try:
        return iter(list(_odt_walk(body)))
    except RecursionError as exc:
        raise ExtractionError("unreadable ODT: nesting too deep") from exc
    except Exception as exc:  # odfpy's text extraction on odd attribute values and the like
        raise ExtractionError(f"unreadable ODT: {type(exc).__name__}: {exc}") from exc


#: The most spaces one ``<text:s text:c="…">`` stands for here (ODF 1.3 §6.1.3: a count of
#: spaces; odfpy would build a string of any size, two billion spaces for ``2147483648``).
_MAX_SPACE_RUN = 1000


def _bound_space_runs(document: Any) -> None:
    """Clamp every ``text:c`` to ``1.._MAX_SPACE_RUN`` (a value that is no count: 1)."""
    from odf.text import S

    for run in document.getElementsByType(S):
        count = run.getAttrNS(_TEXT_NS, "c")
        if count is None:
            continue
        n = int(count) if count.isascii() and count.isdigit() else 1
        run.setAttrNS(_TEXT_NS, "c", str(min(max(n, 1), _MAX_SPACE_RUN)))


_TEXT_NS = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_TABLE_NS = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"


def _odt_walk(node: Any) -> Iterator[str]:
    from odf import teletype

    for child in node.childNodes:
        if child.nodeType != child.ELEMENT_NODE:
            continue
        if child.qname in ((_TEXT_NS, "p"), (_TEXT_NS, "h")):
            yield teletype.extractText(child)
        elif child.qname == (_TABLE_NS, "table-row"):
            cells = [
                " ".join(" ".join(_odt_walk(cell)).split())
                for cell in child.childNodes
                if cell.nodeType == cell.ELEMENT_NODE and cell.qname == (_TABLE_NS, "table-cell")
            ]
            yield " | ".join(c for c in cells if c)
        else:
            yield from _odt_walk(child)
