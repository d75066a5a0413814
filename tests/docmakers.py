"""Documents of every indexed format, written by the real writer libraries — never hand-made
bytes: reportlab (PDF), python-docx (DOCX), odfpy (ODT, ODP, ODS), python-pptx (PPTX),
openpyxl (XLSX), the standard library's ``csv`` and ``email`` (CSV, EML), pandoc through
pypandoc-binary (EPUB, RTF; a test-only tool, GPL, never shipped), Pillow (PNG, JPEG, TIFF,
WebP and a scanned PDF: an image of known text with no text layer)."""

from __future__ import annotations

import csv
import io
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from email.message import EmailMessage
from pathlib import Path

PPTX_MIME = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
ODP_MIME = "application/vnd.oasis.opendocument.presentation"
XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
ODS_MIME = "application/vnd.oasis.opendocument.spreadsheet"


def pdf_bytes(pages: Sequence[str]) -> bytes:
    """A PDF with one page per entry of ``pages`` (each a line of text), by reportlab."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    pdf = canvas.Canvas(out, pagesize=A4, invariant=1)
    for text in pages:
        pdf.drawString(72, 750, text)
        pdf.showPage()
    pdf.save()
    return out.getvalue()


def docx_bytes(paragraphs: Sequence[str], heading: str = "Report") -> bytes:
    """A DOCX with a heading and ``paragraphs``, by python-docx."""
    import docx

    document = docx.Document()
    document.add_heading(heading, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def odt_bytes(paragraphs: Sequence[str]) -> bytes:
    """An ODT with ``paragraphs``, by odfpy."""
    from odf.opendocument import OpenDocumentText
    from odf.text import P

    document = OpenDocumentText()
    for text in paragraphs:
        document.text.addElement(P(text=text))
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def html_bytes(paragraphs: Sequence[str], title: str = "Page") -> bytes:
    """An HTML page with ``paragraphs`` (and a script that must not be indexed)."""
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (
        f"<!doctype html><html><head><title>{title}</title>"
        f"<script>var hidden = 'javascript noise';</script></head><body>{body}</body></html>"
    ).encode()


def pptx_bytes(slides: Sequence[tuple[str, str, str]]) -> bytes:
    """A PPTX with one "Title and Content" slide per ``(title, body, notes)``, by
    python-pptx."""
    from pptx import Presentation

    deck = Presentation()
    for title, body, notes in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        slide.notes_slide.notes_text_frame.text = notes
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def odp_bytes(slides: Sequence[tuple[str, str, str]]) -> bytes:
    """An ODP with one page per ``(title, body, notes)`` (title and outline frames, a notes
    frame), by odfpy."""
    from odf.draw import Frame, Page, TextBox
    from odf.namespaces import PRESENTATIONNS
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import Notes
    from odf.style import MasterPage, PageLayout
    from odf.text import P

    document = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Master", pagelayoutname=layout)
    document.masterstyles.addElement(master)

    def frame(parent, kind: str, text: str) -> None:
        box = Frame(width="24cm", height="4cm", x="1cm", y="1cm")
        box.setAttrNS(PRESENTATIONNS, "class", kind)
        content = TextBox()
        content.addElement(P(text=text))
        box.addElement(content)
        parent.addElement(box)

    for number, (title, body, notes) in enumerate(slides, 1):
        page = Page(masterpagename=master, name=f"page{number}")
        document.presentation.addElement(page)
        frame(page, "title", title)
        frame(page, "outline", body)
        speaker = Notes()
        page.addElement(speaker)
        frame(speaker, "notes", notes)
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def xlsx_bytes(sheets: Mapping[str, Sequence[Sequence[object]]]) -> bytes:
    """An XLSX with one worksheet per entry (name → rows of cell values), by openpyxl."""
    from openpyxl import Workbook

    book = Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(list(row))
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def ods_bytes(sheets: Mapping[str, Sequence[Sequence[str]]]) -> bytes:
    """An ODS with one table per entry (name → rows of strings) and, like LibreOffice, an
    empty row repeated to the sheet's end, by odfpy."""
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    document = OpenDocumentSpreadsheet()
    for name, rows in sheets.items():
        table = Table(name=name)
        document.spreadsheet.addElement(table)
        for row in rows:
            line = TableRow()
            table.addElement(line)
            for value in row:
                cell = TableCell(valuetype="string")
                cell.addElement(P(text=value))
                line.addElement(cell)
        filler = TableRow(numberrowsrepeated="1048000")
        filler.addElement(TableCell(numbercolumnsrepeated="1024"))
        table.addElement(filler)
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def csv_bytes(rows: Sequence[Sequence[str]], delimiter: str = ",") -> bytes:
    """Delimited text (CSV, or TSV with ``delimiter="\\t"``) by the ``csv`` module."""
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter).writerows(rows)
    return out.getvalue().encode()


def _pandoc(markdown: str, to: str, suffix: str, title: str) -> bytes:
    import pypandoc

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"out{suffix}"
        pypandoc.convert_text(
            markdown,
            to,
            format="markdown",
            outputfile=str(path),
            extra_args=["--standalone", f"--metadata=title:{title}"],
        )
        return path.read_bytes()


def epub_bytes(chapters: Sequence[tuple[str, str]], title: str = "Fixture") -> bytes:
    """An EPUB 3 titled ``title`` with one chapter per ``(heading, paragraph)``, by pandoc."""
    markdown = "".join(f"# {h}\n\n{p}\n\n" for h, p in chapters)
    return _pandoc(markdown, "epub3", ".epub", title)


def rtf_bytes(paragraphs: Sequence[str], title: str = "Fixture") -> bytes:
    """An RTF document titled ``title`` with ``paragraphs``, by pandoc."""
    return _pandoc("\n\n".join(paragraphs) + "\n", "rtf", ".rtf", title)


def eml_bytes(
    subject: str,
    plain: str,
    html: str | None = None,
    attachments: Mapping[str, bytes] | None = None,
) -> bytes:
    """An RFC 5322 message with a text body (and an HTML alternative and attachments), by
    the ``email`` package."""
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = "Alice Example <alice@example.org>"
    message["To"] = "Bob Example <bob@example.org>"
    message["Date"] = "Tue, 01 Dec 2026 09:30:00 +0000"
    message.set_content(plain)
    if html is not None:
        message.add_alternative(html, subtype="html")
    for name, data in (attachments or {}).items():
        message.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return message.as_bytes()


def text_image(lines: Sequence[str]):
    """A white Pillow image with ``lines`` in black 40-pixel type (Pillow's bundled font)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=40)
    image = Image.new("RGB", (1800, 120 + 70 * len(lines)), "white")
    draw = ImageDraw.Draw(image)
    for number, line in enumerate(lines):
        draw.text((60, 60 + 70 * number), line, fill="black", font=font)
    return image


def image_bytes(lines: Sequence[str], fmt: str = "PNG") -> bytes:
    """An image file (``"PNG"``, ``"JPEG"``, ``"TIFF"``, ``"WEBP"``) of ``lines``, by Pillow."""
    out = io.BytesIO()
    text_image(lines).save(out, format=fmt)
    return out.getvalue()


def scanned_pdf_bytes(pages: Sequence[Sequence[str]]) -> bytes:
    """A PDF of page images (no text layer, as a scanner writes), one per entry of
    ``pages``, by Pillow."""
    images = [text_image(lines) for lines in pages]
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:], resolution=150)
    return out.getvalue()


def _zip_with(data: bytes, member: str, content: bytes) -> bytes:
    """``data`` (a zip) with ``member`` replaced by ``content``, by ``zipfile``."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            target.writestr(info, content if info.filename == member else source.read(info))
    return out.getvalue()


def corrupt_files() -> list[tuple[str, str, bytes, str]]:
    """``(name, mime, bytes, reason)`` of a corrupt file of each format read since issue 23:
    cut short, a part replaced by broken XML, or other bytes under the format's name;
    ``reason`` is a part of the :class:`~ncindex.errors.ExtractionError` message."""
    deck = pptx_bytes([("Title", "Body.", "Notes.")])
    book = epub_bytes([("One", "Text.")])
    return [
        ("deck.pptx", PPTX_MIME, deck[: len(deck) // 2], "not a valid document archive"),
        (
            "deck2.pptx",
            PPTX_MIME,
            _zip_with(deck, "ppt/presentation.xml", b"<p:pres"),
            "unreadable PPTX",
        ),
        ("deck.odp", ODP_MIME, b"PK\x03\x04 truncated", "not a valid document archive"),
        (
            "deck2.odp",
            ODP_MIME,
            _zip_with(odp_bytes([("Title", "Body.", "Notes.")]), "content.xml", b"<x"),
            "unreadable ODP",
        ),
        (
            "stock.xlsx",
            XLSX_MIME,
            _zip_with(xlsx_bytes({"A": [["a", 1]]}), "xl/workbook.xml", b"<wb"),
            "unreadable XLSX",
        ),
        (
            "stock.ods",
            ODS_MIME,
            _zip_with(ods_bytes({"A": [["a"]]}), "content.xml", b"<o"),
            "unreadable ODS",
        ),
        (
            "book.epub",
            "application/epub+zip",
            _zip_with(book, "META-INF/container.xml", b"<c"),
            "unreadable EPUB",
        ),
        ("table.csv", "text/csv", b"a,b\n\x00\x01\x02", "binary data"),
        # other bytes that no signature names (a PDF or PNG signature would be read as such)
        ("press.rtf", "text/rtf", b"<p>this is no RTF</p>", "not an RTF document"),
        ("mail.eml", "message/rfc822", b"\x7fELF\x02\x01\x01\x00\x00", "not an e-mail message"),
        ("scan.png", "image/png", image_bytes(["Cut short"])[:300], "unreadable image"),
        # a web server's error page saved under the calendar's name; a typed list as a .vcf
        ("cal.ics", "text/calendar", b"<html><p>502 Bad Gateway</p></html>", "not an iCalendar"),
        ("crew.vcf", "text/vcard", b"Rui Costa, +351 912 345 678\n", "content line 1: Failed"),
    ]
