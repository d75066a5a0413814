"""Text from document bytes, every format ncindex reads — bounded (DESIGN §6, §8).

The format is chosen by MIME type, then by file extension (Nextcloud reports
``application/octet-stream`` for types it does not know); bytes that begin with a format's
signature are read as that format whatever the name says (:func:`sniff_format`). This
module decides the format and holds plain text; each other family has its module:
:mod:`~ncindex.text.word` (DOCX), :mod:`~ncindex.text.pdf` (and :mod:`~ncindex.text.ocr`
for scans and images), :mod:`~ncindex.text.markup` (HTML), :mod:`~ncindex.text.odf` (ODT,
ODP, ODS), :mod:`~ncindex.text.slides` (PPTX), :mod:`~ncindex.text.sheets` (XLSX, CSV,
TSV), :mod:`~ncindex.text.ebook` (EPUB), :mod:`~ncindex.text.rtf` and
:mod:`~ncindex.text.mail` (EML), :mod:`~ncindex.text.cards` (iCalendar, vCard).

Every input is bounded: the bytes read (``max_bytes``, and the uncompressed size of zip-based
formats), the pages, slides, sheets or chapters (``max_pages``), the rows of a sheet, the
pages OCR'd, a wall-clock budget (``max_seconds``) looked at between pages (and before each
operator of a PDF page), slides, rows, chapters, paragraphs, calendar lines, e-mail
attachments, pieces of HTML and e-mail messages (OCR gets what is left as Tesseract's time
limit; RTF is read whole), the characters of an e-mail's header field, and the characters
returned (``max_chars``, which also stops a PDF page, an e-mail part or the parse of HTML
markup being read; so do more than :data:`~ncindex.text.markup.MAX_DEPTH` elements open in
it); text
beyond a bound is cut and reported as ``truncated``, and so is a
document part that could not be read while the rest was (a PDF page or form, a DOCX
header, footer, notes or comments part). Corrupt or unreadable input raises
:class:`~ncindex.errors.ExtractionError` with a reason; input over a byte bound raises
:class:`~ncindex.errors.TooLarge`.

Libraries (all permissive): pypdf (BSD-3-Clause), python-docx, python-pptx and openpyxl
(MIT), odfpy (Apache-2.0/LGPL dual), lxml (BSD-3-Clause) for HTML, striprtf
(BSD-3-Clause), pytesseract (Apache-2.0) and pypdfium2 (Apache-2.0/BSD-3-Clause), vobject
(Apache-2.0) for iCalendar and vCard, charset-normalizer (MIT) for the encoding of legacy text files
(:mod:`~ncindex.text.charsets`). Outlook ``.msg`` files are
not read: the library that reads them (extract-msg) is GPL-3.0.

The returned text is normalised: ``\\n`` line ends, no control characters other than tab and
newline, at most one blank line in a row. Offsets of chunks refer to this text. Slides,
sheets, e-books and e-mails are returned as markdown (a ``#`` heading per slide, sheet,
chapter heading and message) so the chunker splits on them.
"""

from __future__ import annotations

import io
import re
import unicodedata
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from pathlib import PurePosixPath

from celery.exceptions import SoftTimeLimitExceeded

from ncindex.errors import ExtractionError, TooLarge
from ncindex.text.blocks import Blocks
from ncindex.text.charsets import declared_markup_encoding, decode_text, decode_without_nuls
from ncindex.text.ocr import Ocr

#: Pages, slides, sheets or chapters read at most (pypdf reads ~190 pages/s here, so about
#: 3 s of PDF work).
DEFAULT_MAX_PAGES = 500
#: Largest uncompressed size of a zip-based document (all members together), bytes.
DEFAULT_MAX_UNZIPPED_BYTES = 256 * 1024 * 1024
#: Wall-clock budget for reading one document, seconds; checked between pages (and inside one).
DEFAULT_MAX_SECONDS = 60.0

TEXT, MARKDOWN, HTML, PDF, DOCX, ODT = "text", "markdown", "html", "pdf", "docx", "odt"
PPTX, ODP, XLSX, ODS, CSV, TSV = "pptx", "odp", "xlsx", "ods", "csv", "tsv"
EPUB, RTF, EML, IMAGE = "epub", "rtf", "eml", "image"
ICS, VCF = "ics", "vcf"
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
    "text/calendar": ICS,
    "text/vcard": VCF,
    "text/x-vcard": VCF,
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
    **dict.fromkeys(("ics", "ical"), ICS),
    **dict.fromkeys(("vcf", "vcard"), VCF),
}

# Control characters removed from extracted text: C0 except tab and newline, DEL, C1.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")
# Terminal escape sequences (ECMA-48 §5.4 control sequences: ESC [, parameter bytes 0x30–0x3F,
# intermediate bytes 0x20–0x2F, a final byte 0x40–0x7E; §8.3.89 operating system commands:
# ESC ] … BEL or ESC backslash): the colours of a log captured from a terminal. Removing only the
# ESC left ``[31mERROR[0m`` in the text.
_TERMINAL_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_BLANK_RUNS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+\n")
# The Latin ligatures (U+FB00–U+FB06, Unicode's Alphabetic Presentation Forms) as their
# letters (their NFKC forms): PDFs typeset by TeX, InDesign or Word map the ligature glyphs to
# them, and the dense model's tokenizer reads ``ﬁnance`` as ``ﬁ ##nan ##ce`` and ``oﬃce`` as
# [UNK] (a query's similarity to such a page fell from 0.77 to 0.17). Python's own database
# serves (not unicodedata2's, as snippets use): these characters are of Unicode 1.1, and their
# normal forms cannot change (Unicode's normalization stability policy).
_LIGATURES = str.maketrans(
    {chr(c): unicodedata.normalize("NFKC", chr(c)) for c in range(0xFB00, 0xFB07)}
)


@dataclass(frozen=True, slots=True)
class ExtractedText:
    """Text extracted from one document.

    ``text`` is at most ``max_chars`` characters; ``format`` is the format it was read as (a
    format name above: the bytes' own when they carry a signature, :func:`sniff_format`; its
    extraction's version is :data:`ncindex.text.versions.EXTRACTOR_VERSIONS`'s); ``markdown``
    tells the chunker to split on markdown structure; ``pages`` is the document's count of
    pages (PDF, image frames), slides, sheets or ``None``; ``truncated`` is true when a bound
    (bytes, pages, rows, characters, time) cut the text short or part of the document could
    not be read (a PDF page or form pypdf raises on, a DOCX part after the body that does not
    parse).
    """

    text: str
    format: str
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


#: Leading bytes that name a format whatever the file is called (Nextcloud types a file by
#: its extension alone: nextcloud/server lib/private/Files/Storage/Local.php ``getMetaData``
#: calls ``IMimeTypeDetector::detectPath``): ISO 32000-1 §7.5.2 (PDF header), RTF 1.9.1
#: (``{\\rtf``), PNG §5.2, JPEG/JFIF (SOI then a marker), TIFF 6.0 §2 (both byte orders).
_SIGNATURES = (
    (b"%PDF-", PDF),
    (b"{\\rtf", RTF),
    (b"\x89PNG\r\n\x1a\n", IMAGE),
    (b"\xff\xd8\xff", IMAGE),
    (b"II*\x00", IMAGE),
    (b"MM\x00*", IMAGE),
)
#: The part every package of a format has (ECMA-376 Part 1 §11.3.10, §12.3.10, §13.3.6: the
#: main document, workbook and presentation parts at the names Office writes them).
_OOXML_PARTS = (
    ("word/document.xml", DOCX),
    ("xl/workbook.xml", XLSX),
    ("ppt/presentation.xml", PPTX),
)


def sniff_format(data: bytes) -> str | None:
    """The format ``data``'s own bytes declare, or ``None`` when they name none this module
    reads: a signature above, WebP's RIFF header, or a zip package — OpenDocument and EPUB by
    their uncompressed ``mimetype`` member (ODF 1.3 Part 2 §3.3, EPUB OCF 3.3 §4.2.2), Office
    Open XML by its main part. A PDF named ``notes.txt`` is read as a PDF, not indexed as its
    raw bytes."""
    for signature, fmt in _SIGNATURES:
        if data.startswith(signature):
            return fmt
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return IMAGE
    if not data.startswith(b"PK\x03\x04"):
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            if "mimetype" in names:
                with archive.open("mimetype") as member:
                    declared = member.read(100).decode("ascii", "replace").strip()
                return _MIME_FORMATS.get(declared)
    except (zipfile.BadZipFile, ValueError, EOFError, OSError, RuntimeError):
        return None  # left to the named format's reader, which reports it
    return next((fmt for part, fmt in _OOXML_PARTS if part in names), None)


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

    ``mime_type`` and ``filename`` choose the format (:func:`detect_format`), unless the
    bytes carry another format's signature (:func:`sniff_format`). Bounds:
    ``max_chars`` characters of text are returned (``Settings.max_document_chars``);
    ``max_pages`` PDF pages, slides, sheets or e-book chapters are read
    (``Settings.max_pdf_pages``); ``max_rows`` rows per sheet or CSV file
    (:data:`~ncindex.text.sheets.DEFAULT_MAX_ROWS` when ``None``); ``max_bytes`` bytes of
    input are accepted (``Settings.max_download_bytes``; ``None`` = no check); zip-based
    documents may unpack to ``max_unzipped_bytes``; reading stops after ``max_seconds``
    seconds. ``ocr`` (``None``: off) reads images and PDF pages without a text layer.

    An empty ``data`` is no text, whatever the format. Raises
    :class:`~ncindex.errors.ExtractionError` for an unsupported type, an image while
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
    if not data:
        # an empty file — a placeholder, an upload that never finished — has no text, whatever
        # its format: it is indexed as no text (skipped as no_text), not parked as unreadable
        return ExtractedText(text="", format=fmt, markdown=False, pages=None, truncated=False)
    fmt = sniff_format(data) or fmt
    if fmt in OCR_FORMATS and ocr is None:
        raise ExtractionError(f"OCR is off: {filename!r} is an image ({mime_type!r})")
    if fmt in (TEXT, MARKDOWN):
        text, cut = decode_text(data, _charset(mime_type), max_chars)
        return _result(text, max_chars, fmt, markdown=fmt == MARKDOWN, pages=None, truncated=cut)
    if fmt in _ZIPPED:
        _check_zip(data, max_unzipped_bytes)
    blocks = Blocks(max_chars, max_seconds)
    job = _Job(data, mime_type, filename, blocks, max_pages, rows, ocr)
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
        blocks.text(), max_chars, fmt, markdown=markdown, pages=pages, truncated=blocks.truncated
    )


@dataclass(frozen=True, slots=True)
class _Job:
    data: bytes
    mime_type: str | None
    filename: str
    blocks: Blocks
    max_pages: int
    max_rows: int
    ocr: Ocr | None


def _html(job: _Job) -> None:
    from ncindex.text.markup import html_text

    # the transport's charset, else the page's own <meta charset> or XML declaration (WHATWG
    # HTML §13.2.3.2); decoded here, not by html_text's bytes path (bs4's EncodingDetector),
    # whose guess reads the markup too
    declared = _charset(job.mime_type) or declared_markup_encoding(job.data)
    # a stray NUL byte does not make a page binary: an HTML parser reads past it
    text, _ = decode_without_nuls(job.data, declared, len(job.data), markup=True)
    text, cut = html_text(text, late=job.blocks.late, max_chars=job.blocks.room())
    job.blocks.add(text)
    job.blocks.truncated = job.blocks.truncated or cut


def _pdf(job: _Job) -> int:
    from ncindex.text.pdf import pdf_text

    return pdf_text(job.data, job.blocks, job.max_pages, job.ocr, job.filename)


def _image(job: _Job) -> int:
    from ncindex.text.ocr import image_text

    assert job.ocr is not None  # extract_text refuses images without OCR
    return image_text(job.data, job.blocks, job.ocr)


def _docx(job: _Job) -> None:
    from ncindex.text.word import docx_text

    docx_text(job.data, job.blocks, job.filename)


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
        text, cut = decode_text(job.data, _charset(job.mime_type), 2 * job.blocks.max_chars)
        job.blocks.truncated = job.blocks.truncated or cut
        if job.blocks.late():  # the charset guess can spend it; the sniff is not interrupted
            return
        csv_text(text, job.blocks, sniff_delimiter(text, default), job.max_rows)

    return read


def _epub(job: _Job) -> int:
    from ncindex.text.ebook import epub_text

    return epub_text(job.data, job.blocks, job.max_pages)


def _rtf(job: _Job) -> None:
    from ncindex.text.rtf import rtf_text

    job.blocks.add(rtf_text(job.data))


def _cards(job: _Job) -> None:
    from ncindex.text.cards import card_text

    text, cut = decode_text(job.data, _charset(job.mime_type), job.blocks.max_chars)
    card_text(text, job.blocks)
    job.blocks.truncated = job.blocks.truncated or cut


def _eml(job: _Job) -> None:
    from ncindex.text.mail import eml_text

    text, cut = eml_text(job.data, late=job.blocks.late, max_chars=job.blocks.max_chars)
    job.blocks.add(text)
    job.blocks.truncated = job.blocks.truncated or cut


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
    ICS: (_cards, True),
    VCF: (_cards, True),
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
    """``text`` with ``\\n`` line ends, form feeds as line ends, terminal escape sequences and
    control characters (other than tab and newline) removed, Latin ligatures (``ﬁ``) as their
    letters, trailing spaces stripped and runs of blank lines cut to one."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x0c", "\n")
    text = _CONTROL.sub("", _TERMINAL_ESCAPES.sub("", text)).translate(_LIGATURES)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _BLANK_RUNS.sub("\n\n", text).strip("\n")


def _result(
    text: str, max_chars: int, fmt: str, *, markdown: bool, pages: int | None, truncated: bool
) -> ExtractedText:
    text = normalize_text(text)
    if len(text) > max_chars:
        text, truncated = text[:max_chars], True
    return ExtractedText(text=text, format=fmt, markdown=markdown, pages=pages, truncated=truncated)


# --- zip archives --------------------------------------------------------------------------


def _check_zip(data: bytes, max_unzipped_bytes: int) -> None:
    """Reject archives that are not zip files or would unpack beyond the bound (zip bombs).
    A member's declared size bounds what ``zipfile`` will read from it."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    # RuntimeError includes zipfile's NotImplementedError: a member needing a newer zip version
    # ("zip file version 6.4") or an unsupported compression method
    except (zipfile.BadZipFile, ValueError, EOFError, OSError, RuntimeError) as exc:
        if data.startswith(_CFB_SIGNATURE):
            raise ExtractionError(_cfb_reason(data)) from exc
        raise ExtractionError(f"not a valid document archive: {exc}") from exc
    if unpacked > max_unzipped_bytes:
        raise TooLarge(f"archive unpacks to {unpacked} bytes (limit {max_unzipped_bytes})")


#: The header signature of a Compound File Binary container ([MS-CFB] §2.2), the file format
#: of Office 97–2003 documents and of every password-protected Office document.
_CFB_SIGNATURE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
#: The stream name ([MS-OFFCRYPTO] §2.3.4: ``EncryptionInfo`` and ``EncryptedPackage``) that
#: a password-protected DOCX, XLSX or PPTX keeps its encrypted package in; directory entry
#: names are UTF-16LE ([MS-CFB] §2.6.1).
_ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")


def _cfb_reason(data: bytes) -> str:
    """Why a CFB container under a zip-based format's name cannot be read: a password or a
    legacy binary format (a user's "Save as" without "Save as type", or a renamed file)."""
    if _ENCRYPTED_PACKAGE in data:
        return "encrypted Office document (needs a password)"
    return "a legacy Office document (.doc, .xls, .ppt: not read) under a newer format's name"
