"""Text from document bytes, every format ncindex reads — bounded (DESIGN §6, §8).

The format is chosen by MIME type, then by file extension (Nextcloud reports
``application/octet-stream`` for types it does not know). This module decides the format and
holds plain text and DOCX; each other family has its module: :mod:`~ncindex.text.pdf` (and
:mod:`~ncindex.text.ocr` for scans and images), :mod:`~ncindex.text.markup` (HTML),
:mod:`~ncindex.text.odf` (ODT, ODP, ODS), :mod:`~ncindex.text.slides` (PPTX),
:mod:`~ncindex.text.sheets` (XLSX, CSV, TSV), :mod:`~ncindex.text.ebook` (EPUB),
:mod:`~ncindex.text.rtf` and :mod:`~ncindex.text.mail` (EML).

Every input is bounded: the bytes read (``max_bytes``, and the uncompressed size of zip-based
formats), the pages, slides, sheets or chapters (``max_pages``), the rows of a sheet, the
pages OCR'd, a wall-clock budget checked between pages (``max_seconds``; OCR gets what is
left as Tesseract's time limit), and the characters returned (``max_chars``); text beyond a
bound is cut and reported as ``truncated``. Corrupt or unreadable input raises
:class:`~ncindex.errors.ExtractionError` with a reason; input over a byte bound raises
:class:`~ncindex.errors.TooLarge`.

Libraries (all permissive): pypdf (BSD-3-Clause), python-docx, python-pptx and openpyxl
(MIT), odfpy (Apache-2.0/LGPL dual), BeautifulSoup 4 (MIT) on lxml (BSD-3-Clause), striprtf
(BSD-3-Clause), pytesseract (Apache-2.0) and pypdfium2 (Apache-2.0/BSD-3-Clause),
charset-normalizer (MIT) for the encoding of legacy text files. Outlook ``.msg`` files are
not read: the library that reads them (extract-msg) is GPL-3.0.

The returned text is normalised: ``\\n`` line ends, no control characters other than tab and
newline, at most one blank line in a row. Offsets of chunks refer to this text. Slides,
sheets, e-books and e-mails are returned as markdown (a ``#`` heading per slide, sheet,
chapter heading and message) so the chunker splits on them.
"""

from __future__ import annotations

import codecs
import io
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import PurePosixPath
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from ncindex.errors import ExtractionError, TooLarge
from ncindex.text.blocks import Blocks
from ncindex.text.ocr import Ocr

#: Pages, slides, sheets or chapters read at most (pypdf reads ~190 pages/s here, so about
#: 3 s of PDF work).
DEFAULT_MAX_PAGES = 500
#: Largest uncompressed size of a zip-based document (all members together), bytes.
DEFAULT_MAX_UNZIPPED_BYTES = 256 * 1024 * 1024
#: Wall-clock budget for reading one document, seconds; checked between pages.
DEFAULT_MAX_SECONDS = 60.0

TEXT, MARKDOWN, HTML, PDF, DOCX, ODT = "text", "markdown", "html", "pdf", "docx", "odt"
PPTX, ODP, XLSX, ODS, CSV, TSV = "pptx", "odp", "xlsx", "ods", "csv", "tsv"
EPUB, RTF, EML, IMAGE = "epub", "rtf", "eml", "image"
#: Formats read only by OCR.
OCR_FORMATS = frozenset({IMAGE})
#: Formats stored in a zip archive (checked against ``max_unzipped_bytes`` first).
_ZIPPED = frozenset({DOCX, ODT, PPTX, ODP, XLSX, ODS, EPUB})

#: Text files that Nextcloud types ``application/*``, by extension: nextcloud/server
#: resources/config/mimetypemapping.dist.json gives each of these a ``text/*`` secure
#: alternative (``"json": ["application/json", "text/plain"]``, ``"php": ["application/x-php",
#: "text/x-php"]``), i.e. Nextcloud itself takes them for text. Read as plain text.
_TEXT_APPLICATION_MIMES = {
    "json": "application/json",
    "js": "application/javascript",
    "xml": "application/xml",
    "yaml": "application/yaml",
    "yml": "application/yaml",
    "php": "application/x-php",
}

# IANA media types (https://www.iana.org/assignments/media-types/) and the ones Nextcloud's
# resources/config/mimetypemapping.dist.json assigns to these extensions.
_MIME_FORMATS = {
    "text/plain": TEXT,
    "text/markdown": MARKDOWN,
    "text/x-markdown": MARKDOWN,
    "text/html": HTML,
    "application/xhtml+xml": HTML,
    "application/pdf": PDF,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": DOCX,
    "application/vnd.oasis.opendocument.text": ODT,
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": PPTX,
    "application/vnd.oasis.opendocument.presentation": ODP,
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": XLSX,
    "application/vnd.oasis.opendocument.spreadsheet": ODS,
    "text/csv": CSV,
    "application/csv": CSV,
    "text/tab-separated-values": TSV,
    "application/epub+zip": EPUB,
    "text/rtf": RTF,
    "application/rtf": RTF,
    "message/rfc822": EML,
    "image/png": IMAGE,
    "image/jpeg": IMAGE,
    "image/tiff": IMAGE,
    "image/webp": IMAGE,
    **dict.fromkeys(_TEXT_APPLICATION_MIMES.values(), TEXT),
}
# text/* types that are markup or binary-ish rather than readable text
_TEXT_EXCLUDED = {"text/vnd.graphviz"}
_EXT_FORMATS = {
    **dict.fromkeys(("txt", "text", "log", "org", "rst", "note", *_TEXT_APPLICATION_MIMES), TEXT),
    **dict.fromkeys(("md", "markdown", "mdown", "mkd", "mkdn"), MARKDOWN),
    **dict.fromkeys(("html", "htm", "xhtml"), HTML),
    **dict.fromkeys(("png", "jpg", "jpeg", "tif", "tiff", "webp"), IMAGE),
    "pdf": PDF,
    "docx": DOCX,
    "odt": ODT,
    "pptx": PPTX,
    "odp": ODP,
    "xlsx": XLSX,
    "ods": ODS,
    "csv": CSV,
    "tsv": TSV,
    "tab": TSV,
    "epub": EPUB,
    "rtf": RTF,
    "eml": EML,
}

# Control characters removed from extracted text: C0 except tab and newline, DEL, C1.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")
_BLANK_RUNS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+\n")


@dataclass(frozen=True, slots=True)
class ExtractedText:
    """Text extracted from one document.

    ``text`` is at most ``max_chars`` characters; ``markdown`` tells the chunker to split on
    markdown structure; ``pages`` is the document's count of pages (PDF, image frames),
    slides, sheets or ``None``; ``truncated`` is true when a bound (bytes, pages, rows,
    characters, time) cut the text short.
    """

    text: str
    markdown: bool
    pages: int | None
    truncated: bool


def detect_format(mime_type: str | None, filename: str) -> str | None:
    """The extractor for a file: one of the format names above (``"pdf"``, ``"pptx"``,
    ``"image"``…) or ``None`` (unsupported). The MIME type decides (parameters such as
    ``charset`` ignored); a generic or missing one defers to the extension; a ``text/plain``
    file with a markdown, CSV or TSV extension is that format."""
    mime = _media_type(mime_type)
    by_ext = _EXT_FORMATS.get(PurePosixPath(filename).suffix.lower().lstrip("."))
    by_mime = _MIME_FORMATS.get(mime)
    if by_mime is None and mime.startswith("text/") and mime not in _TEXT_EXCLUDED:
        by_mime = TEXT
    if by_mime == TEXT and by_ext in (MARKDOWN, CSV, TSV):
        return by_ext
    return by_mime or by_ext


#: The MIME type each format stands for when Nextcloud reports a generic one (the first of
#: :data:`_MIME_FORMATS`; images by their extension).
_CANONICAL_MIME = {fmt: mime for mime, fmt in reversed(_MIME_FORMATS.items())}
_IMAGE_MIME = {
    **dict.fromkeys(("jpg", "jpeg"), "image/jpeg"),
    **dict.fromkeys(("tif", "tiff"), "image/tiff"),
    "png": "image/png",
    "webp": "image/webp",
}


def extension_mime(filename: str) -> str | None:
    """The media type a file name's extension stands for (``report.pptx`` → the PPTX type),
    or ``None`` for an extension no extractor reads."""
    ext = PurePosixPath(filename).suffix.lower().lstrip(".")
    fmt = _EXT_FORMATS.get(ext)
    known = _IMAGE_MIME.get(ext) or _TEXT_APPLICATION_MIMES.get(ext)
    return known or (_CANONICAL_MIME.get(fmt) if fmt else None)


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
    max_rows: int | None = None,
    ocr: Ocr | None = None,
) -> ExtractedText:
    """Extract the text of a document from its bytes.

    ``mime_type`` and ``filename`` choose the format (:func:`detect_format`). Bounds:
    ``max_chars`` characters of text are returned (``Settings.max_document_chars``);
    ``max_pages`` PDF pages, slides, sheets or e-book chapters are read
    (``Settings.max_pdf_pages``); ``max_rows`` rows per sheet or CSV file
    (:data:`~ncindex.text.sheets.DEFAULT_MAX_ROWS` when ``None``); ``max_bytes`` bytes of
    input are accepted (``Settings.max_download_bytes``; ``None`` = no check); zip-based
    documents may unpack to ``max_unzipped_bytes``; reading stops after ``max_seconds``
    seconds. ``ocr`` (``None``: off) reads images and PDF pages without a text layer.

    Raises :class:`~ncindex.errors.ExtractionError` for an unsupported type, an image while
    OCR is off or unavailable, binary data in a text file (NUL bytes), an encrypted or
    corrupt document (never for Celery's ``SoftTimeLimitExceeded``, which a parser's
    catch-all may have wrapped in one: that is raised as it is);
    :class:`~ncindex.errors.TooLarge` when ``data`` exceeds ``max_bytes``, an archive exceeds
    ``max_unzipped_bytes`` or an image Pillow's pixel bound; ``ValueError`` for a bound
    below 1.
    """
    from ncindex.text.sheets import DEFAULT_MAX_ROWS

    rows = DEFAULT_MAX_ROWS if max_rows is None else max_rows
    if min(max_chars, max_pages, max_unzipped_bytes, rows) < 1:
        raise ValueError("max_chars, max_pages, max_rows and max_unzipped_bytes must be >= 1")
    if max_bytes is not None and len(data) > max_bytes:
        raise TooLarge(f"{len(data)} bytes exceeds the limit of {max_bytes} bytes")
    fmt = detect_format(mime_type, filename)
    if fmt is None:
        raise ExtractionError(f"unsupported file type {mime_type!r} ({filename!r})")
    if fmt in OCR_FORMATS and ocr is None:
        raise ExtractionError(f"OCR is off: {filename!r} is an image ({mime_type!r})")
    if fmt in (TEXT, MARKDOWN):
        text, cut = _decode_text(data, _charset(mime_type), max_chars)
        return _result(text, max_chars, markdown=fmt == MARKDOWN, pages=None, truncated=cut)
    if fmt in _ZIPPED:
        _check_zip(data, max_unzipped_bytes)
    blocks = Blocks(max_chars, max_seconds)
    job = _Job(data, mime_type, blocks, max_pages, rows, ocr)
    reader, markdown = _READERS[fmt]
    try:
        pages = reader(job)
    except ExtractionError as exc:
        if isinstance(exc.__cause__, SoftTimeLimitExceeded):
            # a parser's catch-all wrapped the worker task's soft time limit: the document
            # is not unreadable, the task overran (its task parks it as such)
            raise exc.__cause__ from None
        raise
    return _result(
        blocks.text(), max_chars, markdown=markdown, pages=pages, truncated=blocks.truncated
    )


@dataclass(frozen=True, slots=True)
class _Job:
    data: bytes
    mime_type: str | None
    blocks: Blocks
    max_pages: int
    max_rows: int
    ocr: Ocr | None


def _html(job: _Job) -> None:
    from ncindex.text.markup import html_text

    job.blocks.add(html_text(job.data))


def _pdf(job: _Job) -> int:
    from ncindex.text.pdf import pdf_text

    return pdf_text(job.data, job.blocks, job.max_pages, job.ocr)


def _image(job: _Job) -> int:
    from ncindex.text.ocr import image_text

    assert job.ocr is not None  # extract_text refuses images without OCR
    return image_text(job.data, job.blocks, job.ocr)


def _docx(job: _Job) -> None:
    for part in _docx_parts(job.data):
        if not job.blocks.add(part):
            return


def _odt(job: _Job) -> None:
    from ncindex.text.odf import odt_text

    odt_text(job.data, job.blocks)


def _odp(job: _Job) -> int:
    from ncindex.text.odf import odp_text

    return odp_text(job.data, job.blocks, job.max_pages)


def _ods(job: _Job) -> int:
    from ncindex.text.odf import ods_text

    return ods_text(job.data, job.blocks, job.max_pages, job.max_rows)


def _pptx(job: _Job) -> int:
    from ncindex.text.slides import pptx_text

    return pptx_text(job.data, job.blocks, job.max_pages)


def _xlsx(job: _Job) -> int:
    from ncindex.text.sheets import xlsx_text

    return xlsx_text(job.data, job.blocks, job.max_pages, job.max_rows)


def _delimited(default: str) -> Callable[[_Job], None]:
    def read(job: _Job) -> None:
        from ncindex.text.sheets import csv_text, sniff_delimiter

        # the rows' text can be longer than max_chars characters of the file (quotes go)
        text, cut = _decode_text(job.data, _charset(job.mime_type), 2 * job.blocks.max_chars)
        csv_text(text, job.blocks, sniff_delimiter(text, default), job.max_rows)
        job.blocks.truncated = job.blocks.truncated or cut

    return read


def _epub(job: _Job) -> int:
    from ncindex.text.ebook import epub_text

    return epub_text(job.data, job.blocks, job.max_pages)


def _rtf(job: _Job) -> None:
    from ncindex.text.rtf import rtf_text

    job.blocks.add(rtf_text(job.data))


def _eml(job: _Job) -> None:
    from ncindex.text.mail import eml_text

    job.blocks.add(eml_text(job.data))


#: Each format's reader (returns the page count or ``None``) and whether its text is markdown.
_READERS: dict[str, tuple[Callable[[_Job], int | None], bool]] = {
    HTML: (_html, False),
    PDF: (_pdf, False),
    IMAGE: (_image, False),
    DOCX: (_docx, False),
    ODT: (_odt, False),
    ODP: (_odp, True),
    ODS: (_ods, True),
    PPTX: (_pptx, True),
    XLSX: (_xlsx, True),
    CSV: (_delimited(","), False),
    TSV: (_delimited("\t"), False),
    EPUB: (_epub, True),
    RTF: (_rtf, False),
    EML: (_eml, True),
}


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
    known = _known_encoding(declared)
    if known:
        try:
            return head.decode(known, errors="replace"), cut
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


# --- zip archives and DOCX ----------------------------------------------------------------


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
