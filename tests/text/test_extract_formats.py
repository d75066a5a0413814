"""Presentations, spreadsheets, delimited text, e-books, RTF and e-mail: files made by the real
writer libraries (tests/docmakers.py), each found by its known sentences at exact offsets,
structure kept (a heading per slide, sheet, chapter, message), bounds honoured, corrupt files
refused with a reason."""

from __future__ import annotations

import base64
import io
import re
import zipfile
from typing import Any

import pytest
from docmakers import (
    corrupt_files,
    csv_bytes,
    docx_bytes,
    eml_bytes,
    epub_bytes,
    odp_bytes,
    ods_bytes,
    odt_bytes,
    pptx_bytes,
    rtf_bytes,
    xlsx_bytes,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ncindex.errors import ExtractionError, TooLarge
from ncindex.sources.eligibility import effective_mime
from ncindex.text import mail
from ncindex.text.extract import ExtractedText, detect_format, extract_text
from ncindex.text.ocr import Ocr

PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
ODP = "application/vnd.oasis.opendocument.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
ODS = "application/vnd.oasis.opendocument.spreadsheet"

SLIDES = [
    ("Harbour renovation", "The pier pilings were replaced with greenheart timber.", "Ask Rui."),
    ("Budget", "Dredging the channel costs forty thousand euros.", "Mention the grant."),
    ("Next steps", "Tenders for the crane close on the ninth of March.", "Thank the team."),
]
SHEETS = {
    "Inventory": [["Item", "Count", "Shelf"], ["Copper kettles", 12, "B4"], ["Brass lamps", 3]],
    "Suppliers": [["Name", "City"], ["Ferreira & Filhos", "Porto"]],
}


def extract(data: bytes, mime: str | None, name: str, **kw) -> ExtractedText:
    return extract_text(
        data, mime_type=mime, filename=name, max_chars=kw.pop("max_chars", 10**6), **kw
    )


def at(text: str, sentence: str) -> int:
    """The offset of ``sentence`` in ``text``, checked by slicing at it."""
    start = text.index(sentence)
    assert text[start : start + len(sentence)] == sentence
    return start


def in_order(text: str, parts: list[str]) -> list[int]:
    offsets = [at(text, p) for p in parts]
    assert offsets == sorted(offsets), parts
    return offsets


@pytest.mark.parametrize(
    ("make", "mime", "name"), [(pptx_bytes, PPTX, "deck.pptx"), (odp_bytes, ODP, "deck.odp")]
)
def test_slides_in_order_with_a_heading_each_and_their_notes(make, mime, name) -> None:
    for declared in (mime, "application/octet-stream", None):
        result = extract(make(SLIDES), declared, name)
        text = result.text
        assert result.markdown and result.pages == 3 and not result.truncated
        parts = []
        for number, (title, body, notes) in enumerate(SLIDES, 1):
            parts += [f"# Slide {number}: {title}\n", body, f"Notes:\n{notes}"]
        in_order(text, parts)
        assert text.startswith("# Slide 1: Harbour renovation\n\nThe pier pilings")


@pytest.mark.parametrize(
    ("make", "mime", "name"), [(pptx_bytes, PPTX, "deck.pptx"), (odp_bytes, ODP, "deck.odp")]
)
def test_slides_are_bounded(make, mime, name) -> None:
    result = extract(make(SLIDES), mime, name, max_pages=2)
    assert result.truncated and "Slide 2" in result.text and "Slide 3" not in result.text
    result = extract(make(SLIDES), mime, name, max_chars=60)
    assert result.truncated and len(result.text) == 60


_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_DGM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


def smartart_pptx(points: list[tuple[str, str]], data_xml: str | None = None) -> bytes:
    """A one-slide PPTX with a SmartArt graphic frame whose data model holds ``points``
    (type, text), by python-pptx (which writes no SmartArt: the frame and the data model
    part are added as PowerPoint writes them, ECMA-376 Part 1 §21.4)."""
    from pptx import Presentation
    from pptx.opc.package import Part
    from pptx.opc.packuri import PackURI
    from pptx.oxml import parse_xml

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])  # title only
    slide.shapes.title.text = "Process"
    model = "".join(
        f'<dgm:pt modelId="{n}" type="{kind}"><dgm:t><a:bodyPr/><a:p><a:r><a:t>{text}</a:t>'
        "</a:r></a:p></dgm:t></dgm:pt>"
        for n, (kind, text) in enumerate(points)
    )
    data = data_xml or (
        f'<dgm:dataModel xmlns:dgm="{_DGM}" xmlns:a="{_A}"><dgm:ptLst>{model}</dgm:ptLst>'
        "</dgm:dataModel>"
    )
    part = Part(
        PackURI("/ppt/diagrams/data1.xml"),
        "application/vnd.openxmlformats-officedocument.drawingml.diagramData+xml",
        slide.part.package,
        data.encode(),
    )
    rid = slide.part.relate_to(part, f"{_R}/diagramData")
    slide.shapes._spTree.append(
        parse_xml(
            f'<p:graphicFrame xmlns:p="{_P}" xmlns:a="{_A}"><p:nvGraphicFramePr>'
            '<p:cNvPr id="9" name="Diagram 1"/><p:cNvGraphicFramePr/><p:nvPr/>'
            '</p:nvGraphicFramePr><p:xfrm><a:off x="0" y="0"/><a:ext cx="9" cy="9"/></p:xfrm>'
            f'<a:graphic><a:graphicData uri="{_DGM}"><dgm:relIds xmlns:dgm="{_DGM}" '
            f'xmlns:r="{_R}" r:dm="{rid}" r:lo="" r:qs="" r:cs=""/></a:graphicData></a:graphic>'
            "</p:graphicFrame>"
        )
    )
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def test_smartart_text_is_read() -> None:
    """A SmartArt diagram's text lives in its data model part, which python-pptx never reads:
    a process diagram's steps were not indexed."""
    data = smartart_pptx(
        [("doc", ""), ("node", "Survey the pier"), ("parTrans", ""), ("node", "Order timber")]
    )
    assert extract(data, PPTX, "plan.pptx").text == (
        "# Slide 1: Process\n\nSurvey the pier\nOrder timber"
    )
    broken = smartart_pptx([], data_xml="<dgm:dataModel")  # a broken diagram loses no slide
    assert extract(broken, PPTX, "plan.pptx").text == "# Slide 1: Process"


def test_the_task_time_limit_while_reading_a_diagram_is_raised_as_it_is(monkeypatch) -> None:
    """A broken diagram is skipped by a catch-all; Celery's soft time limit is not that."""
    import pptx.oxml
    from celery.exceptions import SoftTimeLimitExceeded

    def overrun(*args: object, **kwargs: object) -> None:
        raise SoftTimeLimitExceeded()

    data = smartart_pptx([("node", "Survey the pier")])
    monkeypatch.setattr(pptx.oxml, "parse_xml", overrun)
    with pytest.raises(SoftTimeLimitExceeded):
        extract(data, PPTX, "plan.pptx")


def test_xlsx_sheet_by_sheet_rows_as_lines() -> None:
    result = extract(xlsx_bytes(SHEETS), XLSX, "stock.xlsx")
    assert result.markdown and result.pages == 2
    assert result.text == (
        "# Sheet: Inventory\n\nItem | Count | Shelf\nCopper kettles | 12 | B4\nBrass lamps | 3"
        "\n\n# Sheet: Suppliers\n\nName | City\nFerreira & Filhos | Porto"
    )


def test_ods_sheet_by_sheet_and_its_repeated_filler_rows_cost_nothing() -> None:
    sheets = {k: [[str(c) for c in row] for row in rows] for k, rows in SHEETS.items()}
    result = extract(ods_bytes(sheets), ODS, "stock.ods")
    assert result.pages == 2 and not result.truncated
    in_order(
        result.text,
        [
            "# Sheet: Inventory\n",
            "Copper kettles | 12 | B4",
            "# Sheet: Suppliers\n",
            "Ferreira & Filhos | Porto",
        ],
    )


@pytest.mark.parametrize("kind", ["xlsx", "ods", "csv"])
def test_huge_sheets_are_capped_by_rows_and_sheets(kind) -> None:
    rows = [[f"row {n}", f"value {n}"] for n in range(500)]
    if kind == "xlsx":
        data, mime, name = xlsx_bytes({"A": rows, "B": rows}), XLSX, "big.xlsx"
    elif kind == "ods":
        data, mime, name = ods_bytes({"A": rows, "B": rows}), ODS, "big.ods"
    else:
        data, mime, name = csv_bytes(rows), "text/csv", "big.csv"
    result = extract(data, mime, name, max_rows=100, max_pages=1)
    assert result.truncated
    assert "row 99 | value 99" in result.text and "row 100 |" not in result.text
    assert "# Sheet: B" not in result.text


def test_empty_formatted_rows_count_against_the_time_budget() -> None:
    """A sheet formatted far below its data is thousands of empty rows; the budget was
    checked only after rows with text, so reading them was never cut (300,000 took 32 s
    against a 5 s budget)."""
    from openpyxl import Workbook
    from openpyxl.styles import Font

    book = Workbook()
    sheet = book.active
    sheet["A1"] = "Header"
    for row in range(2, 2000):
        sheet.cell(row=row, column=1).font = Font(bold=True)  # styled, empty
    sheet["A2000"] = "Footer"
    out = io.BytesIO()
    book.save(out)
    # a budget spent before the first row is read: only where it is checked matters
    result = extract(out.getvalue(), XLSX, "template.xlsx", max_seconds=1e-9)
    assert result.truncated and "Footer" not in result.text


@pytest.mark.parametrize(
    ("make", "mime", "name"), [(xlsx_bytes, XLSX, "t.xlsx"), (ods_bytes, ODS, "t.ods")]
)
def test_spreadsheets_look_at_the_time_budget_before_each_sheet(make, mime, name) -> None:
    """XLSX looked at the budget only every 256 rows of a sheet, so a workbook of short
    sheets was read whole whatever ``max_seconds`` said; ODS only after a row with text."""
    data = make({f"Sheet {n}": [[f"Tide {n}"]] for n in range(20)})
    # a budget spent before the first sheet is read: only where it is checked matters
    result = extract(data, mime, name, max_seconds=1e-9)
    assert result.truncated and result.text == ""
    whole = extract(data, mime, name)
    assert not whole.truncated and "Tide 19" in whole.text


def test_empty_ods_rows_count_against_the_time_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ODS reader looked at the budget only after a row with text, so thousands of empty
    rows written one by one (not as one repeated row) were read whatever the budget said.
    Looks at the clock: one when ``Blocks`` is made, one before the sheet, one every 256
    rows seen."""
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    import ncindex.text.blocks

    document = OpenDocumentSpreadsheet()
    table = Table(name="Tides")
    document.spreadsheet.addElement(table)
    for _ in range(600):
        row = TableRow()
        row.addElement(TableCell())
        table.addElement(row)
    row, cell = TableRow(), TableCell(valuetype="string")
    cell.addElement(P(text="Tide 600"))
    row.addElement(cell)
    table.addElement(row)
    out = io.BytesIO()
    document.write(out)
    whole = extract(out.getvalue(), ODS, "tides.ods")
    assert not whole.truncated and "Tide 600" in whole.text
    monkeypatch.setattr(ncindex.text.blocks, "time", _Clock())
    # made at 1, the deadline is 3.5: the looks before the sheet (2) and at row 256 (3) pass,
    # the one at row 512 (4) does not
    result = extract(out.getvalue(), ODS, "tides.ods", max_seconds=2.5)
    assert result.truncated and result.text == "# Sheet: Tides"


def test_csv_and_tsv_rows_as_lines() -> None:
    rows = [
        ["city", "note"],
        ["Lisbon", "The tram 28, yellow, climbs to the castle."],
        ["Porto", ""],
    ]
    for data, mime, name in [
        (csv_bytes(rows), "text/csv", "cities.csv"),
        (csv_bytes(rows, "\t"), "text/tab-separated-values", "cities.tsv"),
        (csv_bytes(rows, ";"), "text/plain", "cities.csv"),
        (csv_bytes(rows), "application/octet-stream", "cities.csv"),
    ]:
        assert detect_format(mime, name) in ("csv", "tsv")
        result = extract(data, mime, name)
        assert result.text == (
            "city | note\nLisbon | The tram 28, yellow, climbs to the castle.\nPorto"
        ), name


def test_a_csv_cut_at_the_bytes_its_characters_can_need_is_marked_truncated() -> None:
    # empty cells make no text, so only the byte cut (4 bytes a character) can stop it
    rows = [["", "", "", ""]] * 5000 + [["The tail row is past the cut."]]
    result = extract(csv_bytes(rows), "text/csv", "sparse.csv", max_chars=100)
    assert result.truncated and result.text == ""
    assert "tail row" in extract(csv_bytes(rows), "text/csv", "sparse.csv").text


def test_a_csv_with_one_cell_past_csv_s_field_size_limit_is_read() -> None:
    """A field over 131,072 characters (the ``csv`` module's default ``field_size_limit``)
    made the whole file "unreadable CSV". It is read; past ``max_chars`` the text is cut
    there and marked truncated."""
    long_cell = "The minutes ran long. " * 10_000  # 220,000 characters
    rows = [["topic", "notes"], ["harbour", long_cell], ["pier", "Rebuilt in May."]]
    whole = extract(csv_bytes(rows), "text/csv", "minutes.csv")
    assert not whole.truncated
    assert whole.text == f"topic | notes\nharbour | {long_cell.strip()}\npier | Rebuilt in May."
    cut = extract(csv_bytes(rows), "text/csv", "minutes.csv", max_chars=150_000)
    assert cut.truncated and len(cut.text) == 150_000
    assert cut.text.startswith("topic | notes\nharbour | The minutes ran long.")


def test_a_csv_whose_budget_is_spent_before_it_is_sniffed_is_not_read() -> None:
    """The budget was first looked at after the delimiter sniff and 256 rows: ``csv.Sniffer``
    (not interruptible, 0.9-3.9 s here on 16 KiB of ``a,"b``) and those rows ran whatever it
    said. It is looked at before the sniff, as DOCX and ODT look before the first
    paragraph."""
    data = csv_bytes([["city", "note"], ["Lisbon", "The tram climbs."]])
    result = extract(data, "text/csv", "cities.csv", max_seconds=1e-9)
    assert result.truncated and result.text == ""
    assert extract(data, "text/csv", "cities.csv").text == "city | note\nLisbon | The tram climbs."


def test_epub_chapters_in_spine_order_with_headings() -> None:
    chapters = [
        ("The Lighthouse", "The keeper wound the clockwork lens every four hours."),
        ("The Storm", "Waves broke over the gallery rail on the night of the wreck."),
        ("The Rescue", "Nine sailors were hauled up the cliff path by lantern light."),
    ]
    result = extract(epub_bytes(chapters), "application/epub+zip", "book.epub")
    assert result.markdown and result.pages is not None and result.pages >= 3
    parts = [p for h, s in chapters for p in (f"# {h}\n", s)]
    in_order(result.text, parts)
    assert "<" not in result.text
    bounded = extract(epub_bytes(chapters), None, "book.epub", max_pages=2)
    assert bounded.truncated and "The Rescue" not in bounded.text


@pytest.mark.parametrize(
    ("make", "mime", "name"),
    [
        (docx_bytes, "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
         "minutes.docx"),
        (odt_bytes, "application/vnd.oasis.opendocument.text", "minutes.odt"),
    ],
)  # fmt: skip
def test_text_documents_honour_the_time_budget(make, mime, name) -> None:
    """DOCX and ODT were read to the end whatever ``max_seconds`` said (a document has no
    pages to check a budget between) and never marked truncated."""
    data = make([f"Item {n} was agreed." for n in range(50)])
    # a budget spent before the first paragraph is read: only where it is checked matters
    result = extract(data, mime, name, max_seconds=1e-9)
    assert result.truncated and result.text == ""
    whole = extract(data, mime, name)
    assert not whole.truncated and "Item 49 was agreed." in whole.text


class _Clock:
    """A ``time`` stand-in for :mod:`ncindex.text.blocks` whose ``monotonic`` is one second
    later at each look: the budget is spent at a known look, whatever the machine's speed."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now


def test_an_epub_chapter_is_cut_by_the_time_budget_while_it_is_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The budget was checked only between chapters, so one long chapter was parsed whole
    (its HTML is a web page of any size). Looks at the clock: one when ``Blocks`` is made,
    one before each chapter, one before each 64 KiB piece of a chapter's markup."""
    import ncindex.text.blocks

    tides = "\n\n".join(f"Tide {n} at the quay." for n in range(10_000))
    data = epub_bytes([("Tides", tides)])
    whole = extract(data, "application/epub+zip", "tides.epub")
    assert not whole.truncated and "Tide 9999 at the quay." in whole.text
    monkeypatch.setattr(ncindex.text.blocks, "time", _Clock())
    # made at 1, the deadline is 7.5: the looks before pandoc's title page (2) and its one
    # piece (3) and before the long chapter (4) pass, as do three pieces of it (5-7); the
    # fourth piece is not parsed (the chapter is five)
    result = extract(data, "application/epub+zip", "tides.epub", max_seconds=6.5)
    assert result.truncated
    assert "Tide 0 at the quay." in result.text and "Tide 9999 at the quay." not in result.text
    assert "Tide 6000 at the quay." in result.text  # what was parsed is kept


def _one_chapter_epub(chapter: bytes) -> bytes:
    """An EPUB whose spine is the one XHTML ``chapter``, its bytes as given (pandoc writes
    only UTF-8): the mimetype, container and package document of EPUB 3.3 §4.2, §5."""
    opf = (
        '<?xml version="1.0" encoding="UTF-8"?><package xmlns="http://www.idpf.org/2007/opf"'
        ' version="3.0"><manifest><item id="c1" href="c1.xhtml"'
        ' media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c1"/></spine>'
        "</package>"
    )
    container = (
        '<?xml version="1.0"?><container version="1.0"'
        ' xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile'
        ' full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
        "</rootfiles></container>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip")
        archive.writestr("META-INF/container.xml", container)
        archive.writestr("OEBPS/content.opf", opf)
        archive.writestr("OEBPS/c1.xhtml", chapter)
    return out.getvalue()


def test_an_epub_chapter_s_commented_out_meta_charset_is_not_its_encoding() -> None:
    """EPUB chapters went through BeautifulSoup's own declared-encoding search, which took a
    ``<meta charset>`` inside a comment (and is quadratic on a run of ``<meta ``); a chapter
    is now decoded by the prescan web pages use (charsets.declared_markup_encoding)."""
    text = "Привет, как дела? Это проверка кодировки."
    chapter = (
        '<html><head><!-- <meta charset="iso-8859-1"> --><meta charset="windows-1251">'
        f"</head><body><p>{text}</p></body></html>"
    ).encode("cp1251")
    result = extract(_one_chapter_epub(chapter), "application/epub+zip", "privet.epub")
    assert result.text == text


def test_rtf_paragraphs() -> None:
    paragraphs = [
        "The orchard cider press dates from 1887.",
        "Grüße an die Kelterei: ça coûte cinq euros.",
    ]
    result = extract(rtf_bytes(paragraphs), "text/rtf", "press.rtf")
    in_order(result.text, paragraphs)
    assert "\\" not in result.text and "{" not in result.text
    assert (
        extract(rtf_bytes(paragraphs), "application/octet-stream", "press.rtf").text == result.text
    )


def test_eml_heading_block_plain_body_and_attachment_names() -> None:
    data = eml_bytes(
        "Ferry timetable for the winter",
        "The last ferry to the island now leaves at 18:40.\n",
        html="<p>HTML copy of the <b>timetable</b> that must not be read.</p>",
        attachments={"timetable.pdf": b"%PDF-1.4 not read", "map.png": b"\x89PNG"},
    )
    result = extract(data, "message/rfc822", "ferry.eml")
    assert result.markdown
    text = result.text
    in_order(
        text,
        [
            "# Ferry timetable for the winter\n",
            "From: Alice Example <alice@example.org>\n",
            "To: Bob Example <bob@example.org>\n",
            "Date: Tue, 01 Dec 2026 09:30:00 +0000",
            "The last ferry to the island now leaves at 18:40.",
            "Attachments: timetable.pdf, map.png",
        ],
    )
    assert "HTML copy" not in text and "%PDF" not in text
    assert effective_mime("application/octet-stream", "/Mail/ferry.eml") == "message/rfc822"


def test_eml_html_only_body_is_read_as_text() -> None:
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"] = "Newsletter"
    message.set_content("<h1>Market day</h1><p>Cheese stalls open at seven.</p>", subtype="html")
    result = extract(message.as_bytes(), None, "news.eml")
    assert "Market day\n\nCheese stalls open at seven." in result.text and "<p>" not in result.text


def test_an_eml_html_body_honours_the_time_budget() -> None:
    """An e-mail's HTML body was parsed whole whatever ``max_seconds`` said (a 9 MB one took
    7 s here) and never marked truncated; the heading block is kept."""
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"] = "Tides"
    message.set_content("".join(f"<p>Tide {n} at the quay.</p>" for n in range(50)), "html")
    # a budget spent before the first piece of the body is parsed: only where it is checked
    # matters (the message's first piece is parsed whatever the budget says)
    result = extract(message.as_bytes(), "message/rfc822", "tides.eml", max_seconds=1e-9)
    assert result.truncated and result.text == "# Tides"
    whole = extract(message.as_bytes(), "message/rfc822", "tides.eml")
    assert not whole.truncated and "Tide 49 at the quay." in whole.text


def _pieces_parsed(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[int]:
    """The pieces of markup each :func:`~ncindex.text.markup.html_text` call of ``module``
    parsed, in order: its ``late`` is asked before each piece."""
    from ncindex.text import markup

    pieces: list[int] = []

    def counted(data: Any, **kwargs: Any) -> tuple[str, bool]:
        late = kwargs["late"]
        pieces.append(0)

        def looked() -> bool:
            pieces[-1] += 1
            return bool(late())

        return markup.html_text(data, **{**kwargs, "late": looked})

    monkeypatch.setattr(module, "html_text", counted)
    return pieces


def test_an_eml_html_body_far_past_max_chars_is_not_parsed_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An e-mail's HTML body was parsed whole whatever ``max_chars`` said, then cut (a 94 MB
    one took 64 s and 1.9 GB). Its markup is parsed now only until its text is past the
    characters left: of a 2.9 MB body (45 pieces of 64 KiB) one piece; the text is the same
    as a body parsed whole gives, cut."""
    from email.message import EmailMessage

    def tides(paragraphs: int) -> bytes:
        message = EmailMessage()
        message["Subject"] = "Tides"
        body = "".join(f"<p>Tide {n} at the quay.</p>" for n in range(paragraphs))
        message.set_content(body, "html")
        return message.as_bytes()

    short = extract(tides(1000), "message/rfc822", "tides.eml", max_chars=1000)
    assert short.truncated and "Tide 999 at" not in short.text  # 22,000 characters: cut
    pieces = _pieces_parsed(monkeypatch, mail)
    result = extract(tides(100_000), "message/rfc822", "tides.eml", max_chars=1000)
    assert pieces == [1]
    assert result.truncated and result.text == short.text


def test_an_eml_html_body_of_many_elements_is_read_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An HTML body of many elements and little text was parsed only until ``MAX_ELEMENTS``
    (300,000) elements were, the message's text marked truncated (BeautifulSoup's tree held
    each). No tree is built now: 320,000 elements are read whole, each 64 KiB piece asked of
    the time budget."""
    from email.message import EmailMessage

    from ncindex.text import markup

    message = EmailMessage()
    message["Subject"] = "Log"
    body = f"<p>Harbour log</p>{'<div><span></span></div>' * 160_000}deep"
    message.set_content(body, "html")
    pieces = _pieces_parsed(monkeypatch, mail)
    result = extract(message.as_bytes(), "message/rfc822", "log.eml")
    assert len(pieces) == 1 and pieces[0] >= len(body) // markup._FEED_PIECE
    assert not result.truncated and result.text.startswith("# Log\n\nHarbour log")
    assert result.text.endswith("Harbour log\n\ndeep")


def test_an_epub_chapter_far_past_max_chars_is_not_parsed_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An EPUB chapter's markup was parsed whole whatever ``max_chars`` said, then cut: it
    is parsed now only until its text is past the characters left (one piece of five), and
    the chapters after it are not read."""
    from ncindex.text import ebook

    def book(paragraphs: int) -> bytes:
        tides = "\n\n".join(f"Tide {n} at the quay." for n in range(paragraphs))
        return epub_bytes([("Tides", tides), ("Moorings", "Ring 4 is free.")])

    short = extract(book(1000), "application/epub+zip", "tides.epub", max_chars=1000)
    assert short.truncated and "Tide 999 at" not in short.text
    pieces = _pieces_parsed(monkeypatch, ebook)
    result = extract(book(10_000), "application/epub+zip", "tides.epub", max_chars=1000)
    assert pieces[1:] == [1]  # the title page pandoc writes, then the long chapter
    assert result.truncated and result.text == short.text


def test_an_eml_is_parsed_under_the_time_budget() -> None:
    """The ``email`` parser read the whole message whatever ``max_seconds`` said (100,000
    small MIME parts took 111 s here). The first piece is parsed whatever the budget
    says: the header fields and the body read so far are the text."""
    tides = "".join(f"Tide {n} at the quay.\n" for n in range(5000))  # about 110 KB
    data = eml_bytes("Tides", tides, attachments={"chart.pdf": b"%PDF-1.4"})
    result = extract(data, "message/rfc822", "tides.eml", max_seconds=1e-9)
    assert result.truncated and result.text.startswith("# Tides\n\nFrom: Alice Example")
    assert "Tide 0 at the quay." in result.text and "Tide 4999 at the quay." not in result.text
    assert "Attachments:" not in result.text
    whole = extract(data, "message/rfc822", "tides.eml")
    assert not whole.truncated and "Tide 4999 at the quay." in whole.text
    assert whole.text.endswith("Attachments: chart.pdf")


def test_an_eml_parser_runs_past_its_budget_by_one_small_piece() -> None:
    """The parser looked at the clock every 64 KiB, and 64 KiB of empty MIME parts took it
    0.8 s between two looks here (a 2 s budget ran to about 3 s). Counted, not timed: with
    the budget spent after the header block, the parser reads one 4 KiB piece past it, so
    under a thousand of the 13,000 parts, where 64 KiB pieces read all of them."""
    data = b"Subject: Parts\nContent-Type: multipart/mixed; boundary=b\n\n"
    data += b"--b\n\n" * 13_000 + b"--b--\n"
    message = mail._parse(data, late=lambda: True)
    assert 0 < len(list(message.iter_parts())) < 1_000


def test_an_eml_header_block_past_the_first_piece_is_read_under_the_time_budget() -> None:
    """A message whose trace fields (a relay's Received, a list's ARC and DKIM lines) run
    past the first piece lost its subject and addresses once the budget was spent:
    the parser stopped inside the header block, and the text was "# (no subject)". The
    header block is read whatever the budget says; the body after it is cut."""
    trace = "".join(
        f"Received: from relay{n}.example by mx.example; Mon, 7 Dec 2026 05:00:00 +0000\r\n"
        for n in range(1000)
    )  # about 77 KB
    tides = "".join(f"Tide {n} at the quay.\n" for n in range(5000))  # about 110 KB
    data = trace.encode() + eml_bytes("Tides", tides)
    result = extract(data, "message/rfc822", "tides.eml", max_seconds=1e-9)
    assert result.truncated and result.text.startswith("# Tides\n\nFrom: Alice Example")
    assert "Tide 4999 at the quay." not in result.text


def test_eml_attachments_are_listed_under_the_time_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Listing a message's attachments looked at no budget (20,000 of them took 2.9 s here).
    Looks at the clock: one when ``Blocks`` is made, one before each attachment (a message
    shorter than one piece is parsed without a look)."""
    import ncindex.text.blocks

    data = eml_bytes(
        "Charts", "See the charts.\n", attachments={f"c{n}.pdf": b"%PDF" for n in range(5)}
    )
    monkeypatch.setattr(ncindex.text.blocks, "time", _Clock())
    # made at 1, the deadline is 3.5: the looks before the first (2) and second (3)
    # attachments pass, the one before the third (4) does not
    result = extract(data, "message/rfc822", "charts.eml", max_seconds=2.5)
    assert result.truncated and result.text.endswith(
        "See the charts.\n\nAttachments: c0.pdf, c1.pdf"
    )


def _nested_eml(levels: int) -> bytes:
    """A multipart/mixed message: a plain body, then ``levels`` multipart/mixed parts each
    inside the one before (the innermost holding a text part ``levels + 1`` deep), then a PDF
    attachment, as RFC 2046 §5.1.1 writes them."""
    opening = b"".join(
        b'Content-Type: multipart/mixed; boundary="n%d"\r\n\r\n--n%d\r\n' % (n, n)
        for n in range(levels)
    )
    closing = b"".join(b"\r\n--n%d--\r\n" % n for n in reversed(range(levels)))
    return (
        b"Subject: Ferry\r\nFrom: alice@example.org\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="top"\r\n\r\n'
        b"--top\r\nContent-Type: text/plain\r\n\r\nThe ferry leaves at nine.\r\n"
        b"--top\r\n" + opening + b"Content-Type: text/plain\r\n\r\nDeep note.\r\n" + closing
        + b"--top\r\nContent-Type: application/pdf\r\n"
        b'Content-Disposition: attachment; filename="timetable.pdf"\r\n\r\n%PDF-1.4\r\n'
        b"--top--\r\n"
    )  # fmt: skip


def test_an_eml_s_parts_nested_too_deep_are_left_out_and_the_rest_read() -> None:
    """The ``email`` parser recurses once per nested part: 2,000 nested multiparts ended as
    "unreadable e-mail: RecursionError" (after 1.5 s here), subject and body lost. Parts
    deeper than Dovecot's limit of 100 are left out, the text marked truncated; the deep
    text part is read when it is within the limit."""
    text = "# Ferry\n\nFrom: alice@example.org\n\nThe ferry leaves at nine.\n\n{}"
    deep = extract(_nested_eml(2000), "message/rfc822", "ferry.eml")
    assert deep.truncated and deep.text == text.format("Attachments: timetable.pdf")
    # the message is 0 deep, the nest's parts 1 to 99: its text part is 100 deep
    at_limit = extract(_nested_eml(99), "message/rfc822", "ferry.eml")
    assert not at_limit.truncated
    assert at_limit.text == text.format("Deep note.\n\nAttachments: timetable.pdf")
    past = extract(_nested_eml(100), "message/rfc822", "ferry.eml")
    assert past.truncated and past.text == text.format("Attachments: timetable.pdf")


def _multipart(subtype: str, *parts: str, params: str = "") -> str:
    """A ``multipart/<subtype>`` entity (header block and body, RFC 2046 §5.1.1) of ``parts``
    (each an entity of its own), its boundary made from the subtype and the nesting."""
    boundary = f"={subtype}-{sum(p.count('--=') for p in parts)}="
    body = "".join(f"--{boundary}\r\n{part}\r\n" for part in parts)
    return (
        f'Content-Type: multipart/{subtype}; boundary="{boundary}"{params}\r\n\r\n'
        f"{body}--{boundary}--"
    )


def _leaf(kind: str, body: str, headers: str = "") -> str:
    """A leaf entity of type ``kind`` (UTF-8 text; other bodies as given) with ``headers``."""
    charset = '; charset="utf-8"' if kind.startswith("text/") else ""
    return f"Content-Type: {kind}{charset}\r\n{headers}\r\n{body}"


def _message(subject: str, entity: str, sender: str = "Alice Example <alice@example.org>") -> str:
    return (
        f"From: {sender}\r\nTo: Bob Example <bob@example.org>\r\nSubject: {subject}\r\n"
        f"Date: Tue, 01 Dec 2026 09:30:00 +0000\r\nMIME-Version: 1.0\r\n{entity}"
    )


_ATTACHED_PDF = _leaf(
    "application/pdf",
    "JVBERi0xLjQgbm90IHJlYWQ=",
    'Content-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename="rota.pdf"\r\n',
)


def _alternative(plain: str, html: str) -> str:
    return _multipart("alternative", _leaf("text/plain", plain), _leaf("text/html", html))


def _forwarding(body: str, forwarded: str, *after: str, **sender: str) -> str:
    """A message "Fwd: Harbour rota" (``sender=`` as :func:`_message` takes it) of a
    ``multipart/mixed``: ``body``, the message ``forwarded`` inline (``message/rfc822``),
    then ``after``."""
    inline = _leaf("message/rfc822", forwarded, "Content-Disposition: inline\r\n")
    return _message("Fwd: Harbour rota", _multipart("mixed", body, inline, *after), **sender)


def test_eml_text_parts_a_reader_sees_are_each_read_once() -> None:
    """Only the one body ``get_body`` chose was read: a list's footer (a second inline
    ``text/plain`` part of the ``multipart/mixed`` a list wraps the message in) and a
    message forwarded inline (``message/rfc822``, as mutt's ``mime_forward`` sends it)
    were listed as "(unnamed)" attachments, their text lost. Each is read now, the HTML
    alternative of each body still not, attachments still by name only."""
    forwarded = _message(
        "Harbour rota",
        _multipart(
            "mixed",
            _alternative("Rui takes the night shift on Friday.", "<p>HTML rota, not read</p>"),
            _ATTACHED_PDF,
        ),
        sender="Rui Costa <rui@example.org>",
    )
    data = _forwarding(
        _alternative("See the rota below.", "<p>HTML note, not read</p>"),
        forwarded,
        _leaf("text/plain", "harbour-list mailing list\nhttps://lists.example.org/harbour"),
    )
    text = extract(data.encode(), "message/rfc822", "fwd.eml").text
    assert text == (
        "# Fwd: Harbour rota\n\nFrom: Alice Example <alice@example.org>\n"
        "To: Bob Example <bob@example.org>\nDate: Tue, 01 Dec 2026 09:30:00 +0000\n\n"
        "See the rota below.\n\n"
        "## Harbour rota\n\nFrom: Rui Costa <rui@example.org>\n"
        "To: Bob Example <bob@example.org>\nDate: Tue, 01 Dec 2026 09:30:00 +0000\n\n"
        "Rui takes the night shift on Friday.\n\n"
        "harbour-list mailing list\nhttps://lists.example.org/harbour\n\n"
        "Attachments: rota.pdf"
    )


def test_an_eml_message_forwarded_as_an_attachment_is_listed_by_name() -> None:
    """A message forwarded as an attachment (``Content-Disposition: attachment``, as
    Thunderbird's and Gmail's "forward as attachment" send it) stays a name, as any
    attachment; so does a text file attached ``inline`` with a file name (Apple Mail), but
    for a message's own body (of one forwarded inline too: that one was listed). A guard for
    the rest: the old code listed these too."""
    forwarded = _message("Harbour rota", _leaf("text/plain", "Rui takes the night shift."))
    data = _message(
        "Fwd: Harbour rota",
        _multipart(
            "mixed",
            _leaf("text/plain", "The rota is attached."),
            _leaf(
                "message/rfc822",
                forwarded,
                'Content-Disposition: attachment; filename="Harbour rota.eml"\r\n',
            ),
            _leaf(
                "text/plain", "Sailing notes", 'Content-Disposition: inline; filename="n.txt"\r\n'
            ),
        ),
    )
    text = extract(data.encode(), "message/rfc822", "fwd.eml").text
    assert text.endswith("The rota is attached.\n\nAttachments: Harbour rota.eml, n.txt")
    assert "Rui takes" not in text and "Sailing notes" not in text
    # a message whose whole body is a named text part: that body is what there is to read
    whole = _message(
        "Notes",
        _leaf("text/plain", "Sailing notes", 'Content-Disposition: inline; filename="n.txt"\r\n'),
    )
    assert extract(whole.encode(), "message/rfc822", "n.eml").text.endswith("\n\nSailing notes")
    # so is a message forwarded inline whose whole body is one (it was listed as "n.txt")
    forwarded = _message(
        "Fwd: Notes",
        _multipart("mixed", _leaf("message/rfc822", whole, "Content-Disposition: inline\r\n")),
    )
    text = extract(forwarded.encode(), "message/rfc822", "f.eml").text
    assert text.endswith("\n\nSailing notes") and "Attachments" not in text


def test_eml_related_html_and_attachments_inside_an_alternative() -> None:
    """An HTML-only message with its images (``multipart/related``, RFC 2387: the root is
    read, the images listed when they have a name) and Apple Mail's rich text with an
    attachment placed in it (``multipart/alternative`` of the plain text and a
    ``multipart/mixed`` of HTML, the file and more HTML): the plain text is read once and
    the file, inside the alternative not read, is listed (it was lost)."""
    b64 = "Content-Transfer-Encoding: base64\r\n"
    related = _multipart(
        "related",
        _leaf("image/png", "iVBORw0K", f"Content-ID: <logo>\r\n{b64}"),
        _leaf("text/html", '<p>Boat <b>show</b>.</p><img src="cid:logo">', "Content-ID: <root>\n"),
        _leaf("image/jpeg", "/9j/4AAQ",
              f'Content-ID: <deck>\r\n{b64}Content-Disposition: inline; filename="deck.jpg"\r\n'),
        params='; type="text/html"; start="<root>"',
    )  # fmt: skip
    text = extract(_message("Boat show", related).encode(), "message/rfc822", "b.eml").text
    assert text.endswith("\n\nBoat show.\n\nAttachments: deck.jpg")
    apple = _multipart(
        "alternative",
        _leaf("text/plain", "Here is the rota.\n\n<rota.pdf>\n\nSee you on Friday."),
        _multipart(
            "mixed",
            _leaf("text/html", "<p>Here is the rota.</p>"),
            _leaf("application/pdf", "JVBERi0x",
                  f'{b64}Content-Disposition: inline; filename="rota.pdf"\r\n'),
            _leaf("text/html", "<p>See you on Friday.</p>"),
        ),
    )  # fmt: skip
    text = extract(_message("Rota", apple).encode(), "message/rfc822", "r.eml").text
    assert text.endswith(
        "\n\nHere is the rota.\n\n<rota.pdf>\n\nSee you on Friday.\n\nAttachments: rota.pdf"
    )
    assert text.count("Here is the rota.") == 1


def test_icalendar_events_are_read_by_property_unfolded_and_unescaped() -> None:
    """Read as plain text, a folded line split a word (``fol`` / ``ded``), escapes stayed
    (``appointment\\, bring``) and alarms and time zones were indexed as the event's text."""
    ics = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Nextcloud//Calendar//EN\r\n"
        "BEGIN:VTIMEZONE\r\nTZID:Europe/Berlin\r\nEND:VTIMEZONE\r\n"
        "BEGIN:VEVENT\r\nUID:1\r\nSUMMARY:Dentist appointment\\, bring X-ray\r\n"
        "DESCRIPTION:Ask about the wisdom tooth that is fol\r\n ded away\\nand the bill\r\n"
        "LOCATION:Praxis Dr. Müller\\; 2nd floor\r\n"
        "DTSTART;TZID=Europe/Berlin:20260105T090000\r\n"
        'ORGANIZER;CN="Anna Berg":mailto:anna@example.org\r\n'
        "BEGIN:VALARM\r\nACTION:DISPLAY\r\nDESCRIPTION:Reminder\r\nEND:VALARM\r\n"
        "END:VEVENT\r\nBEGIN:VTODO\r\nSUMMARY:File taxes\r\nDUE;VALUE=DATE:20260531\r\n"
        "END:VTODO\r\nEND:VCALENDAR\r\n"
    ).encode()
    result = extract(ics, "text/calendar", "dentist.ics")
    assert result.markdown
    assert result.text == (
        "# Dentist appointment, bring X-ray\n\n"
        "Description: Ask about the wisdom tooth that is folded away\nand the bill\n"
        "Location: Praxis Dr. Müller; 2nd floor\nStart: 2026-01-05 09:00\n"
        "Organizer: Anna Berg <anna@example.org>\n\n# File taxes\n\nDue: 2026-05-31"
    )


def test_vcard_2_1_quoted_printable_names_are_decoded() -> None:
    """A phone's contact export (vCard 2.1) writes non-ASCII names quoted-printable: read as
    plain text, ``Jürgen Müller`` was ``J=C3=BC=72=67=65=6E=20=4D…`` and never found."""
    vcf = (
        b"BEGIN:VCARD\r\nVERSION:2.1\r\n"
        b"N;CHARSET=UTF-8;ENCODING=QUOTED-PRINTABLE:=4D=C3=BC=6C=6C=65=72;J=C3=BC=72=67=65=6E;;;\r\n"
        b"FN;CHARSET=UTF-8;ENCODING=QUOTED-PRINTABLE:J=C3=BC=72=67=65=6E=20=4D=C3=BC=6C=6C=\r\n"
        b"=65=72\r\nTEL;CELL:+49 170 1234567\r\nEND:VCARD\r\n"
        b"BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Jane Doe\r\nORG:ACME\\, Inc.;Harbour unit\r\n"
        b"item1.EMAIL;TYPE=INTERNET:jane@example.org\r\n"
        b"ADR;TYPE=HOME:;;Hauptstr. 5;K\xc3\xb6ln;;50667;Germany\r\n"
        b"PHOTO;ENCODING=b;TYPE=JPEG:/9j/4AAQSkZJRgABAQAAAQABAAD\r\nEND:VCARD\r\n"
    )
    assert extract(vcf, "text/vcard", "contacts.vcf").text == (
        "# Jürgen Müller\n\nName: Müller Jürgen\nPhone: +49 170 1234567\n\n"
        "# Jane Doe\n\nOrganization: ACME, Inc. Harbour unit\nEmail: jane@example.org\n"
        "Address: Hauptstr. 5 Köln 50667 Germany"
    )
    assert extract(vcf, "application/octet-stream", "/Backup/contacts.vcf").text.startswith("# J")


def _calendar(events: int) -> bytes:
    body = "".join(
        f"BEGIN:VEVENT\r\nUID:{n}\r\nSUMMARY:Tide {n}\r\nEND:VEVENT\r\n" for n in range(events)
    )
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\n{body}END:VCALENDAR\r\n".encode()


def test_calendar_cut_at_the_byte_bound_keeps_its_complete_events() -> None:
    """Beyond the bytes ``max_chars`` characters can need (4,004 bytes here), a calendar's
    ``END:VCALENDAR`` is cut off: its complete events are the text, marked truncated, and the
    cut one is left out (a parser that wants the whole ``VCALENDAR`` gives nothing)."""
    result = extract(_calendar(500), "text/calendar", "tides.ics", max_chars=1000)
    events = result.text.split("\n\n")
    assert result.truncated and 50 < len(events) < 100
    assert events == [f"# Tide {n}" for n in range(len(events))]


def test_calendars_and_address_books_honour_the_time_budget() -> None:
    """Cards were read to the end whatever ``max_seconds`` said (a calendar of thousands of
    events has no pages to check a budget between)."""
    for data, mime, name in [
        (_calendar(50), "text/calendar", "tides.ics"),
        (b"BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Rui Costa\r\nEND:VCARD\r\n" * 50, None, "c.vcf"),
    ]:
        # a budget spent before the first line is read: only where it is checked matters
        result = extract(data, mime, name, max_seconds=1e-9)
        assert result.truncated and result.text == ""


def test_vcard_2_1_legacy_charsets_and_unreadable_lines() -> None:
    """A quoted-printable value is decoded in its ``CHARSET`` (ISO-8859-1, over a soft line
    break); without one, its Windows-1252 bytes were read as UTF-8 (``M\ufffdller``, never
    found) and a charset Python does not know as UTF-8 too; a line that cannot be read (no
    ``:``) is skipped and the rest of the address book kept."""
    vcf = (
        b"BEGIN:VCARD\r\nVERSION:2.1\r\n"
        b"FN;CHARSET=ISO-8859-1;ENCODING=QUOTED-PRINTABLE:Fran=E7oise Le=\r\n=F1a\r\n"
        b"this line has no colon\r\nNOTE;CHARSET=X-NOWHERE;QUOTED-PRINTABLE:Gar=E7on\r\n"
        b"TEL;HOME:+33 1 23 45 67 89\r\nEND:VCARD\r\n"
        b"BEGIN:VCARD\r\nVERSION:2.1\r\nFN;ENCODING=QUOTED-PRINTABLE:J=FCrgen M=FCller\r\n"
        b"END:VCARD\r\n"
    )
    assert extract(vcf, "text/x-vcard", "phone.vcf").text == (
        "# Fran\u00e7oise Le\u00f1a\n\nNote: Gar\u00e7on\nPhone: +33 1 23 45 67 89\n\n"
        "# J\u00fcrgen M\u00fcller"
    )


def test_eml_8bit_body_without_a_charset_is_not_read_as_ascii() -> None:
    """A body part naming no charset is US-ASCII by RFC 2045 §5.2, and the ``email`` package
    replaced every 8-bit byte of such a Latin-1 body with U+FFFD."""
    data = (
        "From: a@example.org\r\nSubject: Caf\xe9\r\nContent-Type: text/plain\r\n"
        "Content-Transfer-Encoding: 8bit\r\n\r\nD\xe9j\xe0 vu au caf\xe9 de la gare.\r\n"
    ).encode("latin-1")
    text = extract(data, "message/rfc822", "old.eml").text
    assert (
        text.endswith("\n\nDéjà vu au café de la gare.")
        and "\ufffd" not in text.split("\n\n", 2)[2]
    )


@pytest.mark.parametrize(("name", "mime", "data", "reason"), corrupt_files())
def test_corrupt_files_raise_with_a_reason(name, mime, data, reason) -> None:
    with pytest.raises(ExtractionError, match=reason):
        extract(data, mime, name, ocr=Ocr())


def test_zip_bombs_are_refused_for_every_zipped_format() -> None:
    for data, mime, name in [
        (pptx_bytes(SLIDES), PPTX, "a.pptx"),
        (xlsx_bytes(SHEETS), XLSX, "a.xlsx"),
        (epub_bytes([("One", "Text.")]), None, "a.epub"),
    ]:
        with pytest.raises(TooLarge):
            extract(data, mime, name, max_unzipped_bytes=1000)


def sample_files() -> list[tuple[str, str | None, bytes, list[str]]]:
    """``(name, mime, bytes, known sentences)`` of one file of each new format."""
    return [
        ("deck.pptx", PPTX, pptx_bytes(SLIDES), [s[1] for s in SLIDES]),
        ("deck.odp", ODP, odp_bytes(SLIDES), [s[1] for s in SLIDES]),
        ("stock.xlsx", XLSX, xlsx_bytes(SHEETS), ["Copper kettles | 12 | B4"]),
        (
            "stock.ods",
            ODS,
            ods_bytes({"Inventory": [["Copper kettles", "12"]]}),
            ["Copper kettles | 12"],
        ),
        (
            "cities.csv",
            "text/csv",
            csv_bytes([["Lisbon", "The tram climbs to the castle."]]),
            ["The tram climbs to the castle."],
        ),
        (
            "book.epub",
            None,
            epub_bytes([("Keeper", "The keeper wound the clockwork lens.")]),
            ["The keeper wound the clockwork lens."],
        ),
        (
            "press.rtf",
            "text/rtf",
            rtf_bytes(["The cider press dates from 1887."]),
            ["The cider press dates from 1887."],
        ),
        (
            "ferry.eml",
            "message/rfc822",
            eml_bytes("Ferry", "The last ferry leaves at 18:40.\n"),
            ["The last ferry leaves at 18:40."],
        ),
        (
            "tides.ics",
            "text/calendar",
            b"BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nSUMMARY:Spring tide\r\nDESCRIPTION:The causeway "
            b"floods at noon.\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
            ["The causeway floods at noon."],
        ),
        (
            "crew.vcf",
            None,
            b"BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Rui Costa\r\nNOTE:Skipper of the pilot boat.\r\n"
            b"END:VCARD\r\n",
            ["Skipper of the pilot boat."],
        ),
    ]


@pytest.mark.parametrize(("name", "mime", "data", "sentences"), sample_files())
def test_chunk_offsets_point_at_the_known_sentences(
    make_chunker, name, mime, data, sentences
) -> None:
    result = extract(data, mime, name)
    chunks = make_chunker(24, 4).chunk_text(result.text, markdown=result.markdown)
    assert chunks
    for chunk in chunks:
        assert result.text[chunk.char_start : chunk.char_end] == chunk.text
    for sentence in sentences:
        start = at(result.text, sentence)
        assert any(c.char_start <= start and start + len(sentence) <= c.char_end for c in chunks), (
            name,
            sentence,
        )


@pytest.fixture(scope="module")
def new_samples() -> list[tuple[bytes, str | None, str]]:
    return [(data, mime, name) for name, mime, data, _ in sample_files()]


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    which=st.integers(0, 9),
    cut=st.none() | st.integers(0, 2**24),
    flips=st.lists(st.tuples(st.integers(0, 2**24), st.integers(0, 255)), max_size=8),
)
def test_mangled_files_of_the_new_formats_never_escape_the_error_contract(
    new_samples, which, cut, flips
) -> None:
    """Truncated or bit-flipped files give text or ExtractionError/TooLarge, never another
    exception (positions modulo the length, so a case replays the same)."""
    raw, mime, name = new_samples[which]
    mangled = bytearray(raw if cut is None else raw[: cut % (len(raw) + 1)])
    for i, byte in flips:
        if mangled:
            mangled[i % len(mangled)] = byte
    try:
        out = extract(bytes(mangled), mime, name, max_chars=5000)
    except (ExtractionError, TooLarge):
        return
    assert isinstance(out.text, str) and len(out.text) <= 5000


def test_eml_body_decoding_to_nul_bytes_keeps_the_message() -> None:
    """A base64 body without a charset that decodes to bytes holding a NUL: the raw message
    has none (it is not refused as binary), and the body used to be decoded leniently; read
    as a text file is, its NUL made the whole message unreadable, subject and addresses too.
    The NUL is dropped, as from any extracted text, and the rest still decoded (Latin-1)."""
    body = base64.b64encode("Déjà vu au café\x00 de la gare.".encode("latin-1")).decode()
    data = (
        "From: a@example.org\r\nSubject: Report\r\nContent-Type: text/plain\r\n"
        f"Content-Transfer-Encoding: base64\r\n\r\n{body}\r\n"
    ).encode()
    text = extract(data, "message/rfc822", "report.eml").text
    assert text.startswith("# Report\n\nFrom: a@example.org")
    assert text.endswith("\n\nDéjà vu au café de la gare.")


def test_html_with_a_stray_nul_byte_is_read() -> None:
    """An HTML file holding one NUL byte (a page saved by a broken tool) was read by
    BeautifulSoup, which reads past it; decoded as a text file is, it failed as "binary
    data". The NUL is dropped, as from an e-mail body, and the page read (Latin-1, as its
    <meta charset> says)."""
    data = (
        b'<html><head><meta charset="iso-8859-1"><title>Caf\xe9</title></head>'
        b"<body><p>D\xe9j\xe0 vu\x00 au caf\xe9.</p></body></html>"
    )
    text = extract(data, "text/html", "page.html").text
    assert "Déjà vu au café." in text


def test_an_eml_field_or_part_its_parser_fails_on_keeps_the_message() -> None:
    """Python 3.11's ``email`` field parsers raise on some malformed fields: an address
    field of a lone ``"`` (``IndexError``), a ``Content-Disposition`` of ``attachment;
    filename*`` (``IndexError``). Once a message forwarded inline was read, either one in
    it lost the whole message, its subject and body too, as "unreadable e-mail"; in the
    message's own From line it always did, and so did a part's ``Content-Type`` of
    ``text/plain; format*`` (parsed while the message is) or ``charset*``. The field is read
    as unstructured text, the part with the disposition listed as an unnamed file, the text
    parts read."""
    forwarded = 'From: "\r\nSubject: Harbour rota\r\nMIME-Version: 1.0\r\n' + _multipart(
        "mixed",
        _leaf("text/plain", "Rui takes the night shift."),
        _leaf("application/pdf", "%PDF", "Content-Disposition: attachment; filename*\r\n"),
    )
    unreadable_types = (
        "Content-Type: text/plain; format*\r\n\r\nThe harbour closes at ten.",
        "Content-Type: text/plain; charset*\r\n\r\nThe last ferry leaves at eleven.",
    )
    data = _forwarding(
        _leaf("text/plain", "See the rota below."), forwarded, *unreadable_types, sender='"'
    )
    text = extract(data.encode(), "message/rfc822", "fwd.eml").text
    assert text.startswith('# Fwd: Harbour rota\n\nFrom: "\nTo: Bob Example <bob@example.org>')
    assert 'See the rota below.\n\n## Harbour rota\n\nFrom: "\n\nRui takes the night shift.' in text
    assert text.endswith(
        "The harbour closes at ten.\n\nThe last ferry leaves at eleven.\n\nAttachments: (unnamed)"
    )


def test_eml_nested_alternatives_are_searched_for_plain_text_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Choosing the alternative to read asked ``get_body`` of each nested alternative, which
    searched all the parts inside it again: the cost grew with the square of the parts and
    asked no budget (95 nested alternatives of 200 HTML parts each: 9 s with a budget of
    0.5 s). Each part's content type is looked at a few times, whatever the nesting."""
    from email.message import Message

    looks = 0
    content_type = Message.get_content_type

    def counted(self: Message) -> str:
        nonlocal looks
        looks += 1
        return content_type(self)

    monkeypatch.setattr(Message, "get_content_type", counted)
    entity = _leaf("text/html", "<p>The ferry leaves at nine.</p>")
    for _ in range(40):
        entity = _multipart("alternative", entity, *[_leaf("text/html", "<p>x</p>")] * 10)
    text = extract(_message("Ferry", entity).encode(), "message/rfc822", "f.eml").text
    assert text.endswith("\n\nThe ferry leaves at nine.")
    parts = 1 + 40 * 11  # the message and its parts
    assert looks < 20 * parts


def test_eml_forwarded_messages_heading_blocks_are_read_under_the_time_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The heading block of each message forwarded inline was read whatever the budget said:
    a digest of thousands of messages with no body (an empty ``multipart/mixed`` each) took
    twice its budget. Each block counts as a part read. Looks at the clock: one when
    ``Blocks`` is made, one before each heading block but the first (the message is
    shorter than one piece and parsed without a look)."""
    import ncindex.text.blocks

    digest = _multipart(
        "digest",
        # no header fields of the part: the default type of a digest's part, a message
        *[
            f'\r\nSubject: m{n}\r\nContent-Type: multipart/mixed; boundary="e{n}"\r\n'
            for n in range(4)
        ],
    )
    monkeypatch.setattr(ncindex.text.blocks, "time", _Clock())
    # made at 1, the deadline is 2.5: the look before m1 (2) passes, the one before m2 not
    result = extract(
        _message("Digest", digest).encode(), "message/rfc822", "d.eml", max_seconds=1.5
    )
    assert result.truncated and result.text.endswith("## m0\n\n## m1")


def test_an_eml_body_sent_as_plain_and_html_parts_of_a_mixed_is_read_once() -> None:
    """Some mailers send a body's plain and HTML renderings as two inline parts of a
    ``multipart/mixed`` rather than of an alternative (RFC 2046 §5.1.4): each was read,
    the body twice. A text part of the same words as one read is left out; a list's
    footer, other words, is still read."""
    data = _message(
        "Ferry",
        _multipart(
            "mixed",
            _leaf("text/plain", "The ferry leaves at nine.\n"),
            _leaf("text/html", "<p>The <b>ferry</b> leaves at nine.</p>"),
            _leaf("text/plain", "harbour-list mailing list"),
        ),
    )
    text = extract(data.encode(), "message/rfc822", "f.eml").text
    assert text.count("ferry") == 1 and text.endswith("\n\nharbour-list mailing list")


def test_an_eml_s_stub_plain_alternative_leaves_the_html_letter_to_read() -> None:
    """A newsletter's plain alternative is often a stub ("view this e-mail in your browser")
    beside the HTML letter a reader's client shows (RFC 2046 §5.1.4: the last alternative is
    the richest): the plain one was read, as ``get_body`` prefers it, and the letter lost.
    A plain alternative of fewer than half the words of the HTML's text gives way to the
    HTML now — a ``text/html`` part, or the root of a ``multipart/related`` with its
    images; one of about the HTML's words is still read
    (:func:`test_an_eml_s_empty_plain_alternative_leaves_the_html_body_to_read`)."""
    stub = "View this e-mail in your browser: https://news.example.org/42"  # 11 words
    paragraphs = [  # 43 words, and 2 of the heading
        "The new pontoon opens on Friday at the east quay.",
        "Berths for visiting boats can be booked at the harbour office from Monday.",
        "The fuel dock closes for repairs from the tenth to the twelfth.",
        "Ring 4 is free again after the storm.",
    ]
    letter = "<h1>Harbour news</h1>" + "".join(f"<p>{line}</p>" for line in paragraphs)
    read = "\n\nHarbour news\n\n" + "\n\n".join(paragraphs)
    text = extract(
        _message("News", _alternative(stub, letter)).encode(), "message/rfc822", "n.eml"
    ).text
    assert text.endswith(read) and "browser" not in text
    related = _multipart(
        "related",
        _leaf("text/html", letter + '<img src="cid:logo">'),
        _leaf(
            "image/png", "iVBORw0K", "Content-ID: <logo>\r\nContent-Transfer-Encoding: base64\r\n"
        ),
    )
    entity = _multipart("alternative", _leaf("text/plain", stub), related)
    text = extract(_message("News", entity).encode(), "message/rfc822", "n.eml").text
    assert text.endswith(read) and "browser" not in text
    plain = "\n\n".join(["Harbour news", *paragraphs[:3], "-- \nThe harbour office"])  # 37
    text = extract(
        _message("News", _alternative(plain, letter)).encode(), "message/rfc822", "n.eml"
    ).text
    assert text.endswith("\n\n--\nThe harbour office") and "Ring 4" not in text


@pytest.fixture
def parsed_html(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The markup of each HTML body :mod:`ncindex.text.mail` parses, in order."""
    markups: list[str] = []
    parse = mail.html_text

    def counted(markup: str, **kw: Any) -> tuple[str, bool]:
        markups.append(markup)
        return parse(markup, **kw)

    monkeypatch.setattr(mail, "html_text", counted)
    return markups


def test_an_eml_s_html_alternative_is_not_parsed_when_it_cannot_outnumber_the_plain_one(
    parsed_html: list[str],
) -> None:
    """To compare the plain alternative's words with the HTML's, the HTML was parsed for
    every ``multipart/alternative``, most of them a plain body of the HTML's words, whose
    HTML is then not read: a message of a 0.4 MB plain body and its 0.9 MB HTML took 0.61 s
    to read, 0.04 s before the comparison (best of 5, here). The HTML is parsed now only
    when its markup, tags left out, holds more than twice the plain body's words (its text
    can hold no more): not for a plain body of the HTML's words, still for a stub."""
    paragraphs = [f"Paragraph {n} on the tides at the north quay this week." for n in range(50)]
    letter = (
        "<html><head><style>p {color: navy}</style></head><body><table>"
        + "".join(
            f'<tr><td style="padding: 4px"><p>{line}</p><a href="https://example.org/{n}">more</a>'
            "</td></tr>"
            for n, line in enumerate(paragraphs)
        )
        + "</table></body></html>"
    )
    plain = "\n\n".join(paragraphs)
    text = extract(
        _message("Tides", _alternative(plain, letter)).encode(), "message/rfc822", "t.eml"
    ).text
    assert text.endswith("\n\n" + plain) and parsed_html == []
    stub = "View this e-mail in your browser."
    text = extract(
        _message("Tides", _alternative(stub, letter)).encode(), "message/rfc822", "t.eml"
    ).text
    assert "Paragraph 49 on the tides" in text and "browser" not in text and len(parsed_html) == 1


def test_an_eml_alternative_the_reader_does_not_see_has_no_html_parsed(
    parsed_html: list[str],
) -> None:
    """:meth:`mail._Reading.richer` read and parsed the texts of an alternative nested in a
    part the reader does not see (here one that is not the root of a ``multipart/related``),
    of which only the files are listed: its HTML was parsed for nothing, under the budget
    of what is read. It is not now; the files are still listed."""
    plain = "The ferry leaves the north quay at six, weather permitting, all week."
    hidden = _multipart(
        "alternative",
        _leaf("text/plain", "See the timetable."),
        _leaf("text/html", "<p>" + "Hidden timetable line of the ferry. " * 40 + "</p>"),
        _ATTACHED_PDF,
    )
    related = _multipart("related", _leaf("text/html", f"<p>{plain}</p>"), hidden)
    entity = _multipart("alternative", _leaf("text/plain", plain), related)
    text = extract(_message("Ferry", entity).encode(), "message/rfc822", "f.eml").text
    assert text.endswith(f"\n\n{plain}\n\nAttachments: rota.pdf") and parsed_html == []


def test_an_eml_s_html_alternative_that_cannot_be_read_leaves_the_plain_one_read() -> None:
    """Of a ``multipart/alternative`` the HTML is read beside the plain part to compare
    their words (:meth:`mail._Reading.richer`); an HTML part the HTML parser refuses — a
    ``charset=utf-7`` one whose ``+2AA-`` Python decodes to a lone surrogate — raised
    ``ExtractionError`` there and lost the whole message, its subject and plain body too,
    though the plain body is the one read. The plain one is read now."""
    plain = "The ferry leaves the north quay at six, weather permitting, all week."
    html = "Content-Type: text/html; charset=utf-7\r\n\r\n<p>The ferry +2AA- leaves</p>"
    entity = _multipart("alternative", _leaf("text/plain", plain), html)
    result = extract(_message("Ferry", entity).encode(), "message/rfc822", "f.eml")
    assert result.text.startswith("# Ferry\n\n") and result.text.endswith("\n\n" + plain)


def test_an_eml_s_stub_plain_alternative_in_chinese_or_japanese_leaves_the_html_to_read() -> None:
    """Words were counted as ``\\w+`` runs: Chinese and Japanese are written without spaces,
    so a clause is one run, and a stub's link (``https``, ``news``, ``example``, ``cn``…)
    outnumbered a short letter: the stub was read and the letter lost. A Han, kana or CJK
    symbol character counts as a word now (its run of others as one, as before); a plain
    body of the HTML's text is still read."""
    cases = [
        (
            "如果邮件无法正常显示，请点击这里在浏览器中查看：https://news.example.cn/2026/12",
            [
                "新码头将于周五在东岸开放，欢迎各位船东前来参观。",
                "访客船只的泊位可以从周一起在港务处预订，费用不变。",
                "加油码头从十日到十二日关闭维修，请提前加满燃油。",
                "风暴过后，四号系泊环已经重新可以使用。",
            ],
        ),
        (
            "メールが正しく表示されない場合はこちら：https://news.example.jp/2026/12",
            [
                "新しい桟橋は金曜日に東岸で開きます、ぜひお越しください。",
                "来訪船の係留は月曜日から港湾事務所で予約できます、料金は同じです。",
                "給油所は十日から十二日まで修理のため閉まります。",
                "嵐のあと、四番の係留リングは再び使えます。",
            ],
        ),
    ]
    for stub, paragraphs in cases:
        letter = "".join(f"<p>{line}</p>" for line in paragraphs)
        text = extract(
            _message("News", _alternative(stub, letter)).encode(), "message/rfc822", "n.eml"
        ).text
        assert text.endswith("\n\n".join(paragraphs)) and "https" not in text, stub
        plain = "\n\n".join(paragraphs) + "\n\n-- \n港务处"
        text = extract(
            _message("News", _alternative(plain, letter)).encode(), "message/rfc822", "n.eml"
        ).text
        assert text.endswith("--\n港务处"), stub


def test_an_eml_s_empty_plain_alternative_leaves_the_html_body_to_read() -> None:
    """Some mailers send an empty ``text/plain`` alternative beside the HTML body: the plain
    one was chosen, as ``get_body`` prefers it, and the body was lost (a reader's mail client
    shows the HTML). An empty plain alternative is passed over; one with text still wins."""
    empty = _message("Tides", _alternative(" \r\n", "<p>High water at <b>six</b>.</p>"))
    assert extract(empty.encode(), "message/rfc822", "t.eml").text.endswith(
        "\n\nHigh water at six."
    )
    plain = _message("Tides", _alternative("High water at six.", "<p>HTML copy</p>"))
    text = extract(plain.encode(), "message/rfc822", "t.eml").text
    assert text.endswith("\n\nHigh water at six.") and "HTML copy" not in text


def test_an_empty_or_headerless_forwarded_message_adds_no_heading() -> None:
    """A ``message/rfc822`` part that is empty, or holds text without header fields (a
    mailer's broken forward), was read under a heading "## (no subject)" of a message that
    is not there. No heading is made for it; text it holds is read."""
    for inner, rest in (("", ""), ("The ferry is late.", "\n\nThe ferry is late.")):
        data = _forwarding(_leaf("text/plain", "See below."), inner)
        text = extract(data.encode(), "message/rfc822", "f.eml").text
        assert text.endswith("\n\nSee below." + rest) and "(no subject)" not in text, inner


def test_an_eml_part_s_content_type_is_parsed_once_when_the_message_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reading a parsed message asked each part's content type several times (its kind,
    main type, subtype, and to rank alternatives), and each ask parsed its ``Content-Type``
    again: reading took as long as parsing (5,000 parts: about 1 s each here), and
    asks no budget until a part is read. Looks at the field while the message is read, after
    it is parsed: about three a part (its content type once, its file name, its kind as
    an alternative); six before."""
    from email.policy import EmailPolicy

    import ncindex.text.mail

    looks = {"all": 0, "parsed": 0}
    fetch, parse = EmailPolicy.header_fetch_parse, ncindex.text.mail._parse

    def counted(self: EmailPolicy, name: str, value: str) -> object:
        looks["all"] += name.lower() == "content-type"
        return fetch(self, name, value)

    def parsed(*args: object) -> object:
        message = parse(*args)  # type: ignore[arg-type]
        looks["parsed"] = looks["all"]
        return message

    monkeypatch.setattr(EmailPolicy, "header_fetch_parse", counted)
    monkeypatch.setattr(ncindex.text.mail, "_parse", parsed)
    html = [_leaf("text/html", f"<p>Tide {n}</p>") for n in range(200)]
    entity = _multipart("alternative", _multipart("mixed", *html), _leaf("text/plain", "Tides"))
    text = extract(_message("Tides", entity).encode(), "message/rfc822", "t.eml").text
    assert text.endswith("\n\nTides")
    assert looks["all"] - looks["parsed"] < 4 * (len(html) + 3)


def test_an_eml_header_field_is_parsed_from_its_first_16_kib() -> None:
    """The header parser's time grows with the square of a field's length, and the heading
    block is read whatever the budget says: a ``From`` of 0.9 MiB of addresses took 120 s
    here, a ``Subject`` of 1 MiB of encoded words 68 s and 18 GB. A field is parsed from its
    first 16 KiB, the text marked truncated; the subject and body are still read."""
    crowd = ", ".join(f"Sailor {n} <sailor{n}@example.org>" for n in range(3000))  # 98 KB
    data = _message("Crew list", _leaf("text/plain", "All hands at six."), sender=crowd)
    result = extract(data.encode(), "message/rfc822", "crew.eml")
    assert result.truncated and result.text.startswith("# Crew list\n\nFrom: Sailor 0 <")
    [sender] = [line for line in result.text.split("\n") if line.startswith("From: ")]
    # the parser quotes the cut display name: a few characters more
    assert len(sender) < 16 * 1024 + 16 and "Sailor 2999" not in sender
    assert result.text.endswith("\n\nAll hands at six.")
    short = _message("Crew list", _leaf("text/plain", "All hands."), sender="Rui <r@example.org>")
    assert not extract(short.encode(), "message/rfc822", "crew.eml").truncated


def test_an_eml_header_field_cut_at_16_kib_keeps_whole_encoded_words_and_addresses() -> None:
    """A field past 16 KiB was cut at 16 KiB, inside an RFC 2047 encoded word (its start
    shown raw: ``=?utf-8?b?R2V6``) or an address (``Sailor 412 <sailor412@exa``). It is
    cut now after its last whole encoded word or address, wherever 16 KiB falls."""
    import base64

    word = "=?utf-8?b?" + base64.b64encode("Gezeitenübersicht".encode()).decode() + "?="
    for shift in range(0, len(word) + 1, 3):  # 16 KiB falls in a word's every third place
        subject = "Tides" + "x" * shift + " " + " ".join([word] * 600)  # 600 x 38 characters
        data = _message(subject, _leaf("text/plain", "Tide."))
        result = extract(data.encode(), "message/rfc822", "tides.eml")
        heading = result.text.split("\n", 1)[0]
        assert result.truncated and "=?" not in heading and "?=" not in heading, shift
        assert heading.startswith(f"# Tides{'x' * shift} Gezeitenübersicht"), shift
        assert heading.endswith("Gezeitenübersicht"), shift
    for shift in range(0, 34, 3):  # 16 KiB falls in an address's every third place
        crowd = (
            "x" * shift + ", " + ", ".join(f"Sailor {n} <s{n:03}@example.org>" for n in range(600))
        )
        data = _message("Crew", _leaf("text/plain", "All hands."), sender=crowd)
        result = extract(data.encode(), "message/rfc822", "crew.eml")
        [sender] = [line for line in result.text.split("\n") if line.startswith("From: ")]
        last = sender.rsplit(", ", 1)[1]
        assert result.truncated and re.fullmatch(r"Sailor (\d+) <s\1@example\.org>", last), last


def test_an_eml_address_field_cut_at_16_kib_keeps_encoded_words_holding_a_comma() -> None:
    """An address list was cut before its last comma outside quotes, comments and angle
    brackets, but a comma inside an RFC 2047 encoded word (``=?utf-8?q?Sailor,_412?=``:
    RFC 2047 §5 keeps it out of a phrase's word, some mailers put it in, Python's parser
    decodes such a word as one display name) was taken for one: the word was split and its
    start shown raw. An encoded word is one piece now, wherever 16 KiB falls in it."""
    for shift in range(0, 40, 3):
        crowd = (
            "x" * shift
            + ", "
            + ", ".join(f"=?utf-8?q?Sailor,_{n:03}?= <s{n:03}@example.org>" for n in range(600))
        )
        data = _message("Crew", _leaf("text/plain", "All hands."), sender=crowd)
        result = extract(data.encode(), "message/rfc822", "crew.eml")
        [sender] = [line for line in result.text.split("\n") if line.startswith("From: ")]
        assert result.truncated and "=?" not in sender and "?=" not in sender, shift
        last = sender.rsplit(">, ", 1)[1]
        assert re.fullmatch(r'"Sailor, (\d+)" <s\1@example\.org>', last), (shift, last)


_FIELD_ATOMS = st.sampled_from([
    "=?utf-8?b?R2V6ZWl0ZW4=?=", "=?utf-8?q?Doe,_John?=", "=?utf-8?q?(a)_\"b\"?=", " ", ", ",
    '"A, B" <a@b>', "(c, d)", "<x,y@z>", "undisclosed-recipients:;", "G: a@b, c@d;",
    "\r\n ", "word", "\\", '"', "(", ")", "<", ">", "=?", "?=",
])  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    atoms=st.lists(_FIELD_ATOMS, min_size=1, max_size=60),
    name=st.sampled_from(["Subject", "To", "From", "X-Note"]),
)
# an encoded word stuck to the text before it, in a run of no white space the bound falls in
@example(atoms=["word"] * 23 + ["=?utf-8?b?R2V6ZWl0ZW4=?="], name="Subject")
# ... and one whose "=" is the bound's last character, the "=?" before it no encoded word
@example(
    atoms=["undisclosed-recipients:;"] * 3
    + ["<", "=?", "undisclosed-recipients:;", "=?utf-8?q?Doe,_John?="],
    name="From",
)
def test_an_eml_header_field_cut_is_a_prefix_within_the_bound_splitting_no_encoded_word(
    atoms: list[str], name: str
) -> None:
    """:func:`mail._field_cut` (at a bound of 100 characters here) gives a prefix of the
    field of at most the bound, which ends before or after each RFC 2047 encoded word of
    the field, never inside one — one stuck to the text before it too (``wordword=?utf-8?b?
    R2V6ZWl0ZW4=?=``: none by RFC 2047 §5, but Python 3.11 decodes it in an unstructured
    field, a ``Subject``'s, as ``email.header.decode_header`` does; cut in it, its start
    was shown raw). The examples always run: drawn the same way at random, the first kind
    failed 57 times in 400,000 draws, the second once in 400,000 once the first was fixed;
    both failed on the cut before."""
    value = "".join(atoms)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mail, "_FIELD_CHARS", 100)
        cut = mail._field_cut(name, value)
    assert value.startswith(cut) and len(cut) <= 100
    for word in mail._ENCODED_WORD.finditer(value):
        assert not word.start() < len(cut) < word.end(), (cut, word.group())


def test_an_eml_s_text_is_read_up_to_max_chars(monkeypatch: pytest.MonkeyPatch) -> None:
    """A body part was read whole whatever ``max_chars`` said, then its words compared with
    the parts read before, and every part after it read too: a 40 MB plain body took 2 s
    comparing words and 779 MB of memory here, with ``max_chars`` of 2 M. A part's text is
    cut to the characters left before it is compared, and nothing is read after it."""
    compared: list[int] = []
    words = mail._words

    def counted(text: str) -> str:
        compared.append(len(text))
        return words(text)

    monkeypatch.setattr(mail, "_words", counted)
    tides = "".join(f"Tide {n} at the quay.\n" for n in range(20_000))  # 440 KB
    footer = _leaf("text/plain", "harbour-list mailing list")
    data = _message("Tides", _multipart("mixed", _leaf("text/plain", tides), footer))
    result = extract(data.encode(), "message/rfc822", "tides.eml", max_chars=1000)
    assert result.truncated and len(result.text) == 1000
    assert result.text.startswith("# Tides\n\nFrom: Alice") and "Tide 0 at the quay." in result.text
    assert len(compared) == 1 and compared[0] < 1000  # the footer is not read


def _lines_pdf(lines: list[str]) -> bytes:
    """A one-page PDF, written by hand, whose content shows ``lines`` (ASCII, no parentheses)
    one a line, each by the ``'`` operator (ISO 32000-1 §9.4.3: to the next line, then
    show) in Helvetica (a standard font, §9.6.2.2)."""
    shown = "".join(f"({line}) '\n" for line in lines)
    return _page_pdf(f"BT /F1 10 Tf 12 TL 72 800 Td\n{shown}ET".encode())


def _page_pdf(content: bytes) -> bytes:
    """A one-page PDF, written by hand, of ``content`` (its content stream) with Helvetica
    as its font ``/F1``."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
    ]
    return _written(objects)


def _written(objects: list[bytes]) -> bytes:
    """A PDF file of ``objects`` (numbered from 1, the first the catalog) and its cross
    reference table (ISO 32000-1 §7.5)."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def test_a_pdf_page_is_cut_by_the_time_budget_while_it_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The budget was looked at between pages only, so a page's content was read whole
    (a page of 300,000 ``Tj`` operators: 9 s with a budget of 1 s here). It is looked at
    before each operator now; the lines put out before it ran out are kept, the text
    marked truncated. Looks at the clock: one when ``Blocks`` is made, one before the page,
    one before each operator (``BT``, ``Tf``, ``TL``, ``Td``, then one a line)."""
    import ncindex.text.blocks

    data = _lines_pdf([f"Tide {n} at the quay." for n in range(2000)])
    whole = extract(data, "application/pdf", "tides.pdf")
    assert not whole.truncated and whole.text.endswith("Tide 1999 at the quay.")
    monkeypatch.setattr(ncindex.text.blocks, "time", _Clock())
    # made at 1, the deadline is 21.5: the looks before lines 0 to 14 (7 to 21) pass
    result = extract(data, "application/pdf", "tides.pdf", max_seconds=20.5)
    assert result.truncated and result.pages == 1
    assert result.text.startswith("Tide 0 at the quay.\nTide 1 at the quay.\n")
    assert "Tide 13 at the quay." in result.text and "Tide 15 " not in result.text


def test_a_pdf_page_is_read_up_to_the_characters_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page's content was read whole whatever ``max_chars`` said, its text cut after.
    pypdf stops once the lines it put out exceed the characters left (or a line's strings
    twice them and 4 KiB). Counted by pypdf's text-showing operations, not timed."""
    from pypdf._text_extraction._text_extractor import TextExtraction

    shown = 0
    process = TextExtraction.process_operation

    def counted(self: TextExtraction, operator: bytes, operands: list[object]) -> None:
        nonlocal shown
        shown += operator == b"Tj"
        process(self, operator, operands)

    monkeypatch.setattr(TextExtraction, "process_operation", counted)
    data = _lines_pdf([f"Tide {n:04} at the quay." for n in range(2000)])  # 23 chars a line
    result = extract(data, "application/pdf", "tides.pdf", max_chars=1000)
    assert result.truncated and len(result.text) == 1000
    assert result.text.startswith("Tide 0000 at the quay.\nTide 0001 at the quay.\n")
    assert shown < 100  # 44 lines hold 1000 characters, of 2000


def test_a_pdf_page_of_one_line_longer_than_the_characters_left_keeps_its_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A page of one unbroken line whose strings exceed twice the characters left and
    4 KiB was stopped before the line was put out: its text was lost whole (the whole page
    read gave its first ``max_chars`` characters). The strings past that are cut now and
    the line put out: the first characters are kept, marked truncated — of one ``Tj`` of
    46,000 characters, of 2,000 ``Tj`` on one line, and of a ``TJ`` array of them."""
    words = [f"Tide {n:04} at the quay. " for n in range(2000)]  # 23 characters each
    contents = [
        f"BT /F1 10 Tf 72 800 Td ({''.join(words)}) Tj ET",
        "BT /F1 10 Tf 72 800 Td " + "".join(f"({word}) Tj " for word in words) + "ET",
        "BT /F1 10 Tf 72 800 Td [" + "".join(f"({word}) 0 " for word in words) + "] TJ ET",
    ]
    for content in contents:
        result = extract(_page_pdf(content.encode()), "application/pdf", "t.pdf", max_chars=1000)
        assert result.truncated and len(result.text) == 1000, content[:40]
        assert result.text.startswith("Tide 0000 at the quay. Tide 0001 at the quay."), content[:40]
        whole = extract(_page_pdf(content.encode()), "application/pdf", "t.pdf")
        assert result.text == whole.text[:1000]


def test_a_figure_on_a_pdf_page_takes_none_of_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A form XObject that shows no text (a figure of vector drawing, as LaTeX includes a
    PDF figure) was skipped by pypdf unread, but with the visitors that stop a page it is
    parsed and visited operator by operator: a figure of 200,000 tokens took 0.8 s instead
    of 0.1 s, and its operators were looked at against the budget, which then ran out
    before the text after it. Looks at the clock: one when ``Blocks`` is made, one before
    the page, one before each of the page's 14 operators; none for the figure's 3,000."""
    import ncindex.text.blocks

    drawing = b"".join(b"%d 0 m %d 10 l S\n" % (n, n) for n in range(1000))
    content = (
        b"BT /F1 10 Tf 72 800 Td (Above the figure) Tj ET q /Fig Do Q "
        b"BT /F1 10 Tf 72 400 Td (Below the figure) Tj ET"
    )
    data = _written(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources "
            b"<< /Font << /F1 4 0 R >> /XObject << /Fig 6 0 R >> >> /Contents 5 0 R >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
            b"<< /Type /XObject /Subtype /Form /BBox [0 0 595 842] /Resources "
            b"<< /ProcSet [/PDF] >> /Length %d >>\nstream\n%s\nendstream" % (len(drawing), drawing),
        ]
    )
    monkeypatch.setattr(ncindex.text.blocks, "time", _Clock())
    result = extract(data, "application/pdf", "figure.pdf", max_seconds=100)
    assert result.text == "Above the figure\nBelow the figure" and not result.truncated
    # a figure whose object is missing is pypdf's to skip (it logs it): the page is read
    missing = data.replace(b"/XObject << /Fig 6 0 R >>", b"/XObject << /Fig 9 0 R >>")
    result = extract(missing, "application/pdf", "figure.pdf", max_seconds=100)
    assert result.text == "Above the figure\nBelow the figure" and not result.truncated


@pytest.mark.parametrize("spare", [0, 1, 2])
def test_an_eml_part_after_the_text_that_fills_max_chars_is_not_read(
    monkeypatch: pytest.MonkeyPatch, spare: int
) -> None:
    """A text that filled the characters left but for its separator (0 to 2 of them to
    spare) left no room, yet did not stop the reading: the next part was read whole (a
    440 KB body here), then cut to nothing. It is not read now, and the text is marked
    truncated (that part's text is left out)."""
    read: list[int] = []
    part_text = mail._part_text

    def counted(part: Any, late: Any, max_chars: Any) -> tuple[str, bool]:
        text, cut = part_text(part, late, max_chars)
        read.append(len(text))
        return text, cut

    monkeypatch.setattr(mail, "_part_text", counted)
    first = _leaf("text/plain", "All hands at six.")
    tides = _leaf("text/plain", "".join(f"Tide {n} at the quay.\n" for n in range(20_000)))
    whole = extract(_message("Crew", first).encode(), "message/rfc822", "crew.eml")
    read.clear()
    data = _message("Crew", _multipart("mixed", first, tides)).encode()
    result = extract(data, "message/rfc822", "crew.eml", max_chars=len(whole.text) + spare)
    assert result.text == whole.text and result.truncated
    assert read == [len("All hands at six.")]
