"""PDF text by pypdf (BSD-3-Clause; ~190 pages/s measured here), pages in order, each page's
text a block; a page with no text layer (a scan) is OCR'd (:mod:`ncindex.text.ocr`) when OCR
is on and available, at most ``Ocr.max_pages`` such pages per document, and so is a scan
that carries a stamp of a few words. The values typed into a form's fields follow the
pages, one per line. The time budget and the characters left are looked at before each
operator of a page too (:class:`_Watch`); a page they cut keeps the lines read and ends
the reading. A page pypdf cannot read is logged (the file's name and the page's
number) and left out, and so is a form it cannot read; the text is then marked
``truncated``: the rest is kept, and the document is known to be partial."""

from __future__ import annotations

import io
import logging
import re
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from ncindex.errors import ExtractionError
from ncindex.text.blocks import Blocks
from ncindex.text.ocr import Ocr, ocr_page, ocr_problem, render_pdf_page

log = logging.getLogger(__name__)


def pdf_text(data: bytes, blocks: Blocks, max_pages: int, ocr: Ocr | None, name: str) -> int:
    """Read at most ``max_pages`` pages of a PDF into ``blocks``; returns the page count. A
    page pypdf raises on is skipped, logged with the file's ``name`` and the page's number
    (1-based), and marks ``blocks`` truncated; so does a form pypdf cannot read (its values
    are left out). Raises :class:`ExtractionError` for an encrypted (password) or corrupt PDF, or
    one whose pages all fail."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise ExtractionError("encrypted PDF (needs a password)")
        total = len(reader.pages)
    except ExtractionError:
        raise
    except Exception as exc:  # pypdf raises assorted types on corrupt files
        raise ExtractionError(f"unreadable PDF: {type(exc).__name__}: {exc}") from exc
    if ocr is not None and ocr_problem(ocr.languages) is not None:
        ocr = None  # text layers only; /readyz and `ncindex doctor` report why
    scans = _Scans(data, ocr)
    failed, read = 0, 0
    try:
        for number in range(min(total, max_pages)):
            if blocks.late():
                break
            read += 1
            try:
                page_text, cut = _page_text(reader.pages[number], blocks)
            except SoftTimeLimitExceeded:  # the task's time is up, not this page's fault
                raise
            except Exception as exc:  # one bad page must not lose the others
                failed += 1
                log.warning(
                    "%s: PDF page %d of %d left out, pypdf cannot read it: %s: %s",
                    name,
                    number + 1,
                    total,
                    type(exc).__name__,
                    exc,
                )
                continue
            if cut:  # a bound ran out inside the page: what pypdf had put out is the last text
                blocks.truncated = True
                blocks.add(page_text)
                break
            if not page_text.strip():
                page_text = scans.read(number, blocks) or ""
            elif len("".join(page_text.split())) < _STAMP_CHARS and scans.mostly_image(number):
                page_text += "\n" + (scans.read(number, blocks) or "")
            if not blocks.add(page_text):
                break
        else:
            blocks.truncated = blocks.truncated or total > max_pages
    finally:
        scans.close()
    if read and failed == read:
        raise ExtractionError(f"unreadable PDF: none of {read} pages could be read")
    if not blocks.truncated:  # no bound stopped the reading
        values = _form_values(reader, name)
        if values is None:
            blocks.truncated = True  # the form's values are lost
        else:
            blocks.add("\n".join(values))
    blocks.truncated = blocks.truncated or failed > 0  # the failed pages' text is lost
    return total


#: The operators that show text (ISO 32000-1 §9.4.3, Table 107) and the one that paints a
#: form XObject, which may (§8.10). A page whose content has none of these bytes has no
#: text: pypdf then returns "" without parsing it, unless a visitor is given (pypdf
#: ``_get_content_stream_for_text``), so :func:`_page_text` gives none (a page of 1 M
#: tokens of vector drawing took 0.02 s without and 5.6 s with one, measured 2026-12-07).
_MAY_SHOW_TEXT = re.compile(rb"T[jJ]|Do|['\"]")
_SHOW_OPERATORS = frozenset({b"Tj", b"TJ", b"'", b'"'})
#: Bytes of strings a line may show past twice the characters left (:class:`_Watch`): the
#: strings past them are cut, and the page stopped once the line is put out.
_LINE_SLACK = 4096


class _PageCut(BaseException):
    """Raised by :class:`_Watch` to stop pypdf inside a page. Not an ``Exception``: pypdf
    catches those around a form XObject's text (``PageObject._extract_text``, "Impossible to
    decode XFormObject") and reads on."""


class _Watch:
    """pypdf's visitors for one page (``PageObject.extract_text``'s ``visitor_operand_before``
    and ``visitor_text``), which stop it (:class:`_PageCut`): :meth:`before`, before each
    operator, once ``blocks``' time is spent, and which cuts the strings a text-showing
    operator is given (in place: pypdf reads the operands after the visitor) once those of
    the line being read (not yet put out: a text object's line) would exceed twice the
    characters ``blocks`` has room for and :data:`_LINE_SLACK` (a code of a CID font is two
    bytes, ISO 32000-1 §9.7.6.2), the line then ``full``; :meth:`text`, as pypdf puts text
    out (at each text object's end, font change and new line: what ``extract_text``
    returns is the sum of the ``pieces``), once they exceed that room or a full line is put
    out. A line longer than the room (a page of one unbroken line) so gives its first
    characters, not nothing. pypdf's own ``stream_parsing_work_maximum_count`` (2 M tokens)
    bounds the content it parses before the first operator."""

    def __init__(self, blocks: Blocks) -> None:
        self.blocks = blocks
        self.room = blocks.room()  # characters still to put out
        self.line = 0  # bytes of strings shown since the last piece
        self.full = False  # the line's strings were cut
        self.pieces: list[str] = []

    def before(self, operator: bytes, operands: list[Any], *_: Any) -> None:
        if operator in _SHOW_OPERATORS:
            limit = 2 * self.room + _LINE_SLACK
            if self.full or self.line + _shown(operands) > limit:
                self.full = True
                self.line += _clip(operands, max(0, limit - self.line))
            else:
                self.line += _shown(operands)
        if self.blocks.late():
            raise _PageCut

    def text(self, text: str, *_: Any) -> None:
        self.pieces.append(text)
        self.room -= len(text)
        self.line = 0
        if self.room < 0 or self.full:
            raise _PageCut


def _shown(operands: list[Any]) -> int:
    """Bytes of the strings in a text-showing operator's operands (``TJ``'s in its array)."""
    return sum(
        _shown(operand) if isinstance(operand, list) else len(operand)
        for operand in operands
        if isinstance(operand, (list, str, bytes))
    )


def _clip(operands: list[Any], allowed: int) -> int:
    """Cut the strings of a text-showing operator's operands (``TJ``'s in its array) in
    place to their first ``allowed`` bytes in all, each to an even number (a CID font's
    two-byte codes are not split, ISO 32000-1 §9.7.6.2); returns the bytes kept. Numbers
    (``"``'s spacings, ``TJ``'s offsets) and names are left as they are."""
    from pypdf.generic import NameObject

    kept = 0
    for index, operand in enumerate(operands):
        if isinstance(operand, list):
            kept += _clip(operand, allowed - kept)
        elif isinstance(operand, (str, bytes)) and not isinstance(operand, NameObject):
            operands[index] = operand[: max(0, allowed - kept) // 2 * 2]
            kept += len(operands[index])
    return kept


def _page_text(page: Any, blocks: Blocks) -> tuple[str, bool]:
    """The text of one pypdf page and whether a bound cut it (:class:`_Watch`: the time
    budget, or the characters left), then the text pypdf had put out before it stopped: a
    page's content was read whole before the budget was looked at (a page of 300,000
    ``Tj`` operators: 9 s with a budget of 1 s here)."""
    contents = page.get_contents()
    if contents is None or not _MAY_SHOW_TEXT.search(contents.get_data()):
        return "", False
    watch = _Watch(blocks)
    try:
        text = _with_blank_figures(page, contents.get_data()).extract_text(
            visitor_operand_before=watch.before, visitor_text=watch.text
        )
    except _PageCut:
        return "".join(watch.pieces), True
    return text or "", watch.full  # a full line not put out before the end: cut all the same


#: A name followed by ``Do``: the form or image XObject a content stream paints (ISO 32000-1
#: §8.8, §8.10; a name is ``/`` and regular characters, §7.3.5, delimiters §7.2.2 Table 2).
_PAINTED = re.compile(
    rb"/([^\x00\t\n\f\r ()<>\[\]{}/%]*)[\x00\t\n\f\r ]*Do(?![^\x00\t\n\f\r ()<>\[\]{}/%])"
)
_NAME_ESCAPE = re.compile(rb"#([0-9A-Fa-f]{2})")  # §7.3.5: #xx is the byte xx


def _with_blank_figures(page: Any, content: bytes) -> Any:
    """``page``, or a copy of it (a pypdf ``PageObject`` sharing its objects) in which each
    form XObject its ``content`` paints whose own content has no :data:`_MAY_SHOW_TEXT`
    byte (a figure of vector drawing) is an empty form without resources. pypdf skips such a
    form unread without visitors, but parses it whole, operator by operator, with them
    (``_get_content_stream_for_text``, ``has_visitor``): a page showing a line and painting
    a figure of 200,000 tokens of drawing took 0.8 s with :class:`_Watch` and 0.1 s without
    (measured 2026-12-07), the time a paper's figures then took from its budget. pypdf reads
    an empty form without resources as no text, and a text-less one as no text, so the text
    is the same. Forms painted inside a form are left as they are. A form that cannot be
    resolved or whose content cannot be decoded is left to pypdf, which logs it and reads
    on (the page is not lost for it)."""
    from pypdf import PageObject
    from pypdf.generic import DictionaryObject, NameObject, StreamObject

    painted = {
        "/" + _NAME_ESCAPE.sub(lambda m: bytes([int(m[1], 16)]), raw).decode("utf-8", "replace")
        for raw in _PAINTED.findall(content)
    }
    resources = page.get_inherited("/Resources")
    resources = resources.get_object() if resources is not None else None
    if not painted or not isinstance(resources, DictionaryObject):
        return page
    xobjects = resources.get("/XObject")
    xobjects = xobjects.get_object() if xobjects is not None else None
    if not isinstance(xobjects, DictionaryObject):
        return page
    blank = StreamObject()
    blank[NameObject("/Type")] = NameObject("/XObject")
    blank[NameObject("/Subtype")] = NameObject("/Form")
    figures = {name: blank for name in painted & set(xobjects) if _draws_only(xobjects, name)}
    if not figures:
        return page
    view = PageObject(page.pdf)
    view.update(page)
    view[NameObject("/Resources")] = DictionaryObject(
        {**resources, NameObject("/XObject"): DictionaryObject({**xobjects, **figures})}
    )
    return view


def _draws_only(xobjects: Any, name: str) -> bool:
    """Whether the XObject ``name`` of ``xobjects`` (a resource dictionary) is a form whose
    content has none of the :data:`_MAY_SHOW_TEXT` bytes; ``False`` for an image, anything
    else, or a form that cannot be resolved or decoded."""
    from pypdf.generic import StreamObject

    try:
        form = xobjects[name].get_object()
        if not isinstance(form, StreamObject) or form.get("/Subtype") != "/Form":
            return False
        data = form.get_data()
    except Exception:  # a missing object, a filter pypdf cannot undo: pypdf logs it, reading
        return False
    return not _MAY_SHOW_TEXT.search(data)


#: Field types whose value is text a person typed or chose (ISO 32000-1 §12.7.4.3 text
#: fields, §12.7.4.4 choice fields); buttons' values are state names (``/Yes``, ``/Off``).
_TEXT_FIELDS = ("/Tx", "/Ch")


def _form_values(reader: Any, name: str) -> list[str] | None:
    """The values of a filled-in form's text and choice fields (ISO 32000-1 §12.7: the
    interactive form, ``/AcroForm``), one per line in the form's order: page text extraction
    never sees them (they live in widget annotations, not the page's content stream).
    ``None`` for a form pypdf cannot read (logged with the file's ``name``)."""
    try:
        fields = reader.get_fields() or {}
    except SoftTimeLimitExceeded:
        raise
    except Exception as exc:  # a broken form must not lose the pages read
        log.warning(
            "%s: PDF form left out, pypdf cannot read it: %s: %s", name, type(exc).__name__, exc
        )
        return None
    values: list[str] = []
    for field in fields.values():
        value = field.get("/V")
        if field.get("/FT") not in _TEXT_FIELDS or value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and item.strip():
                values.append(item.strip())
    return values


#: A page whose text layer has fewer non-blank characters than this while images cover at
#: least :data:`_SCAN_COVER` of it is a scan with a stamp on it — a scanner's date line, a
#: fax header, a Bates number, "Page 1 of 3" added after scanning — and is OCR'd too: its
#: layer alone would stand for the whole page.
_STAMP_CHARS = 64
_SCAN_COVER = 0.5


class _Scans:
    """The pages OCR'd so far and the pypdfium2 document they are rendered from (opened on
    the first scanned page)."""

    def __init__(self, data: bytes, ocr: Ocr | None) -> None:
        self.data, self.ocr, self.done = data, ocr, 0
        self.pdf: Any = None

    def read(self, number: int, blocks: Blocks) -> str | None:
        if self.ocr is None:
            return None
        if self.done >= self.ocr.max_pages:
            blocks.truncated = True
            return None
        import pypdfium2

        try:
            image = render_pdf_page(self._document(), number)
        except pypdfium2.PdfiumError:  # PDFium cannot open or render what pypdf read
            return None
        self.done += 1
        return ocr_page(image, self.ocr, blocks)

    def mostly_image(self, number: int) -> bool:
        """Whether images cover at least :data:`_SCAN_COVER` of page ``number`` (0-based), by
        PDFium's bounds of the page's image objects (within forms too); ``False`` while OCR
        is off, once ``Ocr.max_pages`` pages are OCR'd (a page its layer reads is not cut
        short: slides with a background picture look the same), or when PDFium cannot read
        the page."""
        if self.ocr is None or self.done >= self.ocr.max_pages:
            return False
        import pypdfium2
        import pypdfium2.raw

        try:
            page = self._document()[number]
            try:
                width, height = page.get_size()
                covered = 0.0
                images = page.get_objects(filter=[pypdfium2.raw.FPDF_PAGEOBJ_IMAGE], max_depth=3)
                for image in images:
                    left, bottom, right, top = image.get_bounds()
                    covered += (right - left) * (top - bottom)
            finally:
                page.close()
        except pypdfium2.PdfiumError:
            return False
        return bool(covered >= _SCAN_COVER * width * height)

    def _document(self) -> Any:
        import pypdfium2

        if self.pdf is None:
            self.pdf = pypdfium2.PdfDocument(self.data)
        return self.pdf

    def close(self) -> None:
        if self.pdf is not None:
            self.pdf.close()
