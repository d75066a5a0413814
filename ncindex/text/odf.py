"""OpenDocument text, presentations and spreadsheets (ODT, ODP, ODS) by odfpy
(Apache-2.0/LGPL dual licence).

Element names follow OASIS OpenDocument 1.3 Part 3: ``text:p`` / ``text:h`` (§5.1, §5.2),
``draw:page`` (a slide, §10.2.4) with ``presentation:notes`` (§10.2.5) and
``presentation:class="title"`` frames (§19.393), ``table:table`` / ``table:table-row`` /
``table:table-cell`` with ``table:number-rows-repeated`` and
``table:number-columns-repeated`` (§9.1; an empty row or cell repeated to the sheet's end is
how LibreOffice writes the rest of a sheet, so repeats are capped).

Review comments (``office:annotation``, §14.1: its author ``dc:creator`` and date, then its
``text:p`` and ``text:list`` content; Impress writes the same element as
``officeooo:annotation``, in the ``http://openoffice.org/2009/office`` namespace, under
``draw:page``) sit inside the paragraph, cell or slide they remark on. They are taken out
before the text is read, so that a sentence, a cell or a slide's body stays its own, and read
apart as DOCX comments are: in a text document after its body, headers and footers; on a
slide after its notes (``Comments:``); in a sheet after its rows (``Comments:``). A text
document's headers and footers live in ``styles.xml``, in each master page
(``style:master-page``, §16.9) as ``style:header`` / ``style:footer`` (§16.10, §16.11),
``style:header-left`` / ``style:footer-left`` (§16.12, §16.13) and, since ODF 1.3,
``style:header-first`` / ``style:footer-first`` (OASIS OFFICE-3789); those read after the
body, a text repeated by several master pages once, one whose ``style:display`` is
``false`` (not shown) not at all.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from ncindex.errors import ExtractionError
from ncindex.text.blocks import Blocks, one_line

_TEXT_NS = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_TABLE_NS = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_DRAW_NS = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
_PRESENTATION_NS = "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"
_OFFICE_NS = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
_STYLE_NS = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
#: A review comment: ODF's element, and the one LibreOffice Impress writes on a slide.
_ANNOTATIONS = frozenset(
    {(_OFFICE_NS, "annotation"), ("http://openoffice.org/2009/office", "annotation")}
)
#: A master page's headers, then its footers (the order a page shows them).
_HEADERS = ("header", "header-left", "header-first")
_FOOTERS = ("footer", "footer-left", "footer-first")

#: The most spaces one ``<text:s text:c="…">`` stands for here (ODF 1.3 §6.1.3: a count of
#: spaces; odfpy would build a string of any size, two billion spaces for ``2147483648``).
_MAX_SPACE_RUN = 1000
#: The most times one repeated row or cell is written out (a sheet's repeated filler).
_MAX_REPEAT = 100


def _load(data: bytes, kind: str) -> Any:
    from odf.opendocument import load

    try:
        document = load(io.BytesIO(data))
    except Exception as exc:  # odfpy raises assorted types on corrupt files
        raise ExtractionError(f"unreadable {kind}: {type(exc).__name__}: {exc}") from exc
    _bound_space_runs(document)
    _set_notes_apart(document)
    return document


def _guarded(kind: str, walk: Iterator[str]) -> list[str]:
    try:
        return list(walk)
    except RecursionError as exc:
        raise ExtractionError(f"unreadable {kind}: nesting too deep") from exc
    except ExtractionError:
        raise
    except Exception as exc:  # odfpy's text extraction on odd attribute values and the like
        raise ExtractionError(f"unreadable {kind}: {type(exc).__name__}: {exc}") from exc


def _bound_space_runs(document: Any) -> None:
    """Clamp every ``text:c`` to ``1.._MAX_SPACE_RUN`` (a value that is no count: 1)."""
    from odf.text import S

    for run in document.getElementsByType(S):
        count = run.getAttrNS(_TEXT_NS, "c")
        if count is None:
            continue
        n = int(count) if count.isascii() and count.isdigit() else 1
        run.setAttrNS(_TEXT_NS, "c", str(min(max(n, 1), _MAX_SPACE_RUN)))


def _set_notes_apart(document: Any) -> None:
    """A footnote or endnote (``text:note``, ODF 1.3 Part 3 §6.3.2) sits inside its
    paragraph: its citation mark is dropped and its body set apart by spaces, so
    ``sentence¹`` and the note ``See annex`` read ``sentence See annex``, not
    ``sentence1See annex``."""
    from odf.element import Text
    from odf.text import Note, NoteCitation

    for citation in document.getElementsByType(NoteCitation):
        citation.parentNode.removeChild(citation)
    for note in document.getElementsByType(Note):
        note.parentNode.insertBefore(Text(" "), note)
        note.appendChild(Text(" "))


def odt_text(data: bytes, blocks: Blocks) -> None:
    """Headings, paragraphs, list items and table rows of an ODT body, in document order,
    then its headers, its footers and its review comments, into ``blocks``; the time budget
    is checked before each block."""
    document = _load(data, "ODT")
    if document.text is None:  # odfpy loads a content.xml without <office:text> as no body
        raise ExtractionError("unreadable ODT: no text body")
    for part in _guarded("ODT", _odt_parts(document.text, document.masterstyles)):
        if blocks.late() or not blocks.add(part):
            return


def _odt_parts(body: Any, master_styles: Any) -> Iterator[str]:
    comments = _take_annotations(body)
    yield from _walk(body)
    seen: set[tuple[str, ...]] = set()
    for margin in _headers_and_footers(master_styles):
        remarks = _take_annotations(margin)
        lines = tuple(_walk(margin))
        if lines not in seen:  # the same letterhead (and its comments) on several master pages
            seen.add(lines)
            comments.extend(remarks)
            yield from lines
    for comment in comments:
        yield from _walk(comment)


def _headers_and_footers(master_styles: Any) -> list[Any]:
    """The shown headers of every master page, then the shown footers, in document order."""
    pages = [
        page
        for page in (master_styles.childNodes if master_styles is not None else [])
        if _is(page, _STYLE_NS, "master-page")
    ]
    return [
        margin
        for names in (_HEADERS, _FOOTERS)
        for page in pages
        for margin in page.childNodes
        if margin.nodeType == margin.ELEMENT_NODE
        and margin.qname[0] == _STYLE_NS
        and margin.qname[1] in names
        and margin.getAttrNS(_STYLE_NS, "display") != "false"
    ]


def _take_annotations(root: Any) -> list[Any]:
    """The review comments below ``root`` in document order, each taken out of the tree
    (one inside another stays in it)."""
    found: list[Any] = []
    stack = [iter(root.childNodes)]
    while stack:
        node = next(stack[-1], None)
        if node is None:
            stack.pop()
        elif node.nodeType == node.ELEMENT_NODE:
            if node.qname in _ANNOTATIONS:
                found.append(node)
            else:
                stack.append(iter(node.childNodes))
    for node in found:
        node.parentNode.removeChild(node)
    return found


def _comment_lines(comments: list[Any], kind: str) -> list[str]:
    """The text of ``comments`` (their paragraphs, not their author or date), a line each."""
    return [line for line in _guarded(kind, _each_walked(comments)) if line.strip()]


def _each_walked(nodes: list[Any]) -> Iterator[str]:
    for node in nodes:
        yield from _walk(node)


def odp_text(data: bytes, blocks: Blocks, max_slides: int) -> int:
    """Each slide of an ODP presentation in order, at most ``max_slides``: a ``# Slide n:
    title`` heading, the slide's other text, then its speaker notes under ``Notes:`` and its
    review comments under ``Comments:``. Returns the slide count."""
    document = _load(data, "ODP")
    if document.presentation is None:
        raise ExtractionError("unreadable ODP: no presentation body")
    pages = [c for c in document.presentation.childNodes if _is(c, _DRAW_NS, "page")]
    for number, page in enumerate(pages, 1):
        if number > max_slides:
            blocks.truncated = True
            break
        if blocks.late():
            break
        title: list[str] = []
        body: list[str] = []
        notes: list[str] = []
        comments = _comment_lines(_take_annotations(page), "ODP")
        for child in page.childNodes:
            if _is(child, _PRESENTATION_NS, "notes"):
                notes.extend(_guarded("ODP", _walk(child)))
            elif child.nodeType == child.ELEMENT_NODE:
                is_title = child.getAttrNS(_PRESENTATION_NS, "class") == "title"
                (title if is_title else body).extend(_guarded("ODP", _walk(child)))
        if not blocks.add(_slide(number, title, body, notes, comments)):
            break
    return len(pages)


def ods_text(data: bytes, blocks: Blocks, max_sheets: int, max_rows: int) -> int:
    """Each sheet of an ODS spreadsheet in order, at most ``max_sheets``: a ``# Sheet: name``
    heading, then one line per non-empty row (cells ``a | b | c``), at most ``max_rows`` rows
    per sheet, then the sheet's cell comments under ``Comments:``. Returns the sheet
    count."""
    document = _load(data, "ODS")
    if document.spreadsheet is None:
        raise ExtractionError("unreadable ODS: no spreadsheet body")
    tables = [c for c in document.spreadsheet.childNodes if _is(c, _TABLE_NS, "table")]
    _ods_tables(tables, blocks, max_sheets, max_rows)
    return len(tables)


def _ods_tables(tables: list[Any], blocks: Blocks, max_sheets: int, max_rows: int) -> None:
    for number, table in enumerate(tables, 1):
        if number > max_sheets:
            blocks.truncated = True
            return
        if blocks.late():
            return
        name = one_line(table.getAttrNS(_TABLE_NS, "name") or f"Sheet {number}")
        if not blocks.add(f"# Sheet: {name}"):
            return
        comments = _comment_lines(_take_annotations(table), "ODS")
        rows = 0
        for seen, line in enumerate(_guarded("ODS", _rows(table)), 1):
            # the budget is looked at after each row with text and every 256 rows seen: a
            # sheet formatted far below its data is thousands of empty rows
            if not line:
                if seen % 256 == 0 and blocks.late():
                    return
                continue
            rows += 1
            if rows > max_rows:
                blocks.truncated = True
                break
            if not blocks.add(line, sep="\n\n" if rows == 1 else "\n") or blocks.late():
                return
        if comments and not blocks.add("Comments:\n" + "\n".join(comments)):
            return


def _slide(
    number: int, title: list[str], body: list[str], notes: list[str], comments: list[str]
) -> str:
    heading = one_line(" ".join(title))
    text = f"# Slide {number}" + (f": {heading}" if heading else "")
    lines = [line for line in body if line.strip()]
    if lines:
        text += "\n\n" + "\n".join(lines)
    notes = [line for line in notes if line.strip()]
    if notes:
        text += "\n\nNotes:\n" + "\n".join(notes)
    if comments:
        text += "\n\nComments:\n" + "\n".join(comments)
    return text


def _is(node: Any, ns: str, name: str) -> bool:
    return bool(node.nodeType == node.ELEMENT_NODE and node.qname == (ns, name))


def _repeat(node: Any, attribute: str) -> int:
    value = node.getAttrNS(_TABLE_NS, attribute) or "1"
    return min(int(value), _MAX_REPEAT) if value.isascii() and value.isdigit() else 1


def _rows(table: Any) -> Iterator[str]:
    """One ``a | b`` line per row of a table (row groups and headers included), ``""`` for an
    empty one (a repeated empty row once)."""
    for child in table.childNodes:
        if _is(child, _TABLE_NS, "table-row"):
            cells: list[str] = []
            for cell in child.childNodes:
                if _is(cell, _TABLE_NS, "table-cell"):
                    text = " ".join(" ".join(_walk(cell)).split())
                    if text:
                        cells.extend([text] * _repeat(cell, "number-columns-repeated"))
            if not cells:
                yield ""
                continue
            for _ in range(_repeat(child, "number-rows-repeated")):
                yield " | ".join(cells)
        elif child.nodeType == child.ELEMENT_NODE and not _is(child, _TABLE_NS, "table"):
            yield from _rows(child)  # table:table-rows, table:table-header-rows, row groups


#: Where a document keeps what is no longer its text: ``text:tracked-changes`` (ODF 1.3 Part 3
#: §5.5.1) holds each tracked deletion's removed paragraphs (``text:deletion``, §5.5.6).
_NOT_TEXT = frozenset({(_TEXT_NS, "tracked-changes")})


def _walk(node: Any) -> Iterator[str]:
    """Paragraphs and headings under ``node`` in document order; a table row as ``a | b``;
    removed text (:data:`_NOT_TEXT`) left out."""
    from odf import teletype

    for child in node.childNodes:
        if child.nodeType != child.ELEMENT_NODE or child.qname in _NOT_TEXT:
            continue
        if child.qname in ((_TEXT_NS, "p"), (_TEXT_NS, "h")):
            yield teletype.extractText(child)
        elif child.qname == (_TABLE_NS, "table-row"):
            cells = [
                " ".join(" ".join(_walk(cell)).split())
                for cell in child.childNodes
                if _is(cell, _TABLE_NS, "table-cell")
            ]
            yield " | ".join(c for c in cells if c)
        else:
            yield from _walk(child)
