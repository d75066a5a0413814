"""Word documents (DOCX, Office Open XML WordprocessingML, ECMA-376 Part 1 §17): the package
opened by python-docx (MIT), the body read from its XML in document order.

python-docx's ``Paragraph.text`` and ``Document.iter_inner_content`` see only a paragraph's
own runs and hyperlinks and the body's own paragraphs and tables, so Word's everyday
structures were lost: content controls (``w:sdt``, §17.5.2: cover pages, tables of
contents, form fields), tracked insertions (``w:ins``, §17.13.5.18), text boxes
(``w:txbxContent``, §17.17.1) and fields (``w:fldSimple``). Here a paragraph is every
``w:t`` below it (``w:tab`` a tab, ``w:br``/``w:cr`` a line end), less deleted and moved-away
text (``w:del``, ``w:moveFrom``) and Markup Compatibility fallbacks (``mc:Fallback``: a
second copy of a text box); a text box is a paragraph block of its own after its anchor's.
The parts python-docx's body never reaches follow the body, read from their own XML the
same way: headers and footers (a text repeated by several sections' parts once), footnotes
and endnotes, and review comments (visible content in Word, where a reviewer's remark is as
much the document's text as a footnote: a word found only in a comment is found). Such a
part that does not parse is logged and left out, and the text marked ``truncated``: the rest
is kept, and the document is known to be partial.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from ncindex.errors import ExtractionError
from ncindex.text.blocks import Blocks

log = logging.getLogger(__name__)

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
#: Containers of block content read through (content controls, custom XML, their content).
_BLOCK_WRAPPERS = frozenset({_W + "sdt", _W + "sdtContent", _W + "customXml"})
#: Subtrees whose text is not the document's current text (or repeats another's).
_SKIPPED = frozenset({_W + "del", _W + "moveFrom", _MC_FALLBACK, _W + "sdtPr"})
_LINE_ENDS = frozenset({_W + "br", _W + "cr"})


def docx_text(data: bytes, blocks: Blocks, name: str) -> None:
    """Paragraphs and table rows (``a | b``) of a DOCX body in document order, then its
    headers and footers, footnotes and endnotes, and comments, into ``blocks``; the time
    budget is checked before each block. A part after the body that does not parse is
    logged (with the file's ``name`` and the part's), left out and marks ``blocks``
    truncated. Raises :class:`ExtractionError` when
    python-docx cannot open the package or the body is malformed (nesting too deep)."""
    try:
        main = _main_part(data)
        body = main.element.body
        related = {
            reltype: list(
                dict.fromkeys(  # a part that several relationships name is read once
                    rel.target_part
                    for rel in main.rels.values()
                    if rel.reltype == reltype and not rel.is_external
                )
            )
            for reltype in _AFTER_BODY
        }
    except Exception as exc:  # python-docx raises assorted types on corrupt files
        raise ExtractionError(f"unreadable DOCX: {type(exc).__name__}: {exc}") from exc
    for part in _guarded(_body_and_after(body, related, blocks, name)):
        if blocks.late() or not blocks.add(part):
            return


def _main_part(data: bytes) -> Any:
    """The main document part of a DOCX package, opened as ``docx.Document`` opens it
    (python-docx's ``docx.api.Document``: ``Package.open``, whose ``Unmarshaller`` makes
    each part by a ``PartFactory``), except that the parts read after the body stay their
    bytes: python-docx parses a header, footer or comments part when the package is opened,
    so one that does not parse made the whole document unreadable."""
    from docx.opc.constants import CONTENT_TYPE
    from docx.opc.package import Unmarshaller
    from docx.opc.part import Part, PartFactory
    from docx.opc.pkgreader import PackageReader
    from docx.package import Package

    class Factory(PartFactory):
        @staticmethod
        def part_class_selector(content_type: str, reltype: str) -> type[Part] | None:
            return Part if reltype in _AFTER_BODY else None

    package = Package()
    reader = PackageReader.from_file(io.BytesIO(data))  # type: ignore[no-untyped-call]
    Unmarshaller.unmarshal(reader, package, Factory)  # type: ignore[no-untyped-call]
    main = package.main_document_part
    if main.content_type != CONTENT_TYPE.WML_DOCUMENT_MAIN:
        raise ValueError(f"not a Word document, content type is {main.content_type!r}")
    return main


_RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
#: The relationships from the main document to the parts read after the body, in that order,
#: and whether each child of a part's root is one item (a note, a comment) rather than the
#: root holding block content itself. ECMA-376 Part 1 §17.10: ``w:hdr``/``w:ftr`` hold block
#: content; §17.11: ``w:footnotes``/``w:endnotes``, each note a ``w:footnote``/``w:endnote``
#: of block content; §17.13.4: ``w:comments``, each ``w:comment`` of block content.
#: python-docx reads headers and footers only by section and the rest not at all.
_AFTER_BODY = {
    _RELS + "header": False,
    _RELS + "footer": False,
    _RELS + "footnotes": True,
    _RELS + "endnotes": True,
    _RELS + "comments": True,
}


def _body_and_after(
    body: Any, related: dict[str, list[Any]], blocks: Blocks, name: str
) -> Iterator[str]:
    yield from _blocks(body)
    seen: set[tuple[str, ...]] = set()
    for reltype, parts in related.items():
        for part in parts:
            root = _root(part, name)
            if root is None:
                blocks.truncated = True  # the part's text is lost
                continue
            if not _AFTER_BODY[reltype]:
                # the same header or footer text in each section's (or first/even page) part
                lines = tuple(_blocks(root))
                if lines not in seen:
                    seen.add(lines)
                    yield from lines
                continue
            for item in root:
                # separators and continuation notices (w:type, §17.18.33) are rules, not text
                if item.get(_W + "type") in (None, "normal"):
                    yield from _blocks(item)


def _root(part: Any, name: str) -> Any:
    """The root element of a part's XML; ``None`` when it is broken (logged with the file's
    ``name`` and the part's: the body read must not be lost for it)."""
    from docx.oxml import parse_xml

    try:
        return parse_xml(part.blob)
    except SoftTimeLimitExceeded:  # the task's time is up, not the part's fault
        raise
    except Exception as exc:  # lxml's XMLSyntaxError and the like
        log.warning(
            "%s: DOCX part %s left out, it does not parse: %s: %s",
            name,
            part.partname,
            type(exc).__name__,
            exc,
        )
        return None


def _guarded(parts: Iterator[str]) -> Iterator[str]:
    try:
        yield from parts
    except RecursionError as exc:
        raise ExtractionError("unreadable DOCX: nesting too deep") from exc


def _blocks(container: Any) -> Iterator[str]:
    """The paragraphs and table rows of a body, cell, content control or text box."""
    for child in container:
        if child.tag == _W + "p":
            boxes: list[Any] = []
            yield _paragraph(child, boxes)
            for box in boxes:
                yield from _blocks(box)
        elif child.tag == _W + "tbl":
            yield from _table(child)
        elif child.tag in _BLOCK_WRAPPERS:
            yield from _blocks(child)


def _table(table: Any) -> Iterator[str]:
    """One ``a | b`` line per row (a merged cell is one ``w:tc``, written once)."""
    for row in _children(table, _W + "tr"):
        cells = (" ".join(" ".join(_blocks(cell)).split()) for cell in _children(row, _W + "tc"))
        yield " | ".join(c for c in cells if c)


def _children(element: Any, tag: str) -> Iterator[Any]:
    """The ``tag`` children of ``element``, through content controls and custom XML."""
    for child in element:
        if child.tag == tag:
            yield child
        elif child.tag in _BLOCK_WRAPPERS:
            yield from _children(child, tag)


def _paragraph(element: Any, boxes: list[Any]) -> str:
    """The text of a paragraph; its text boxes are appended to ``boxes``."""
    parts: list[str] = []
    _runs(element, parts, boxes)
    return "".join(parts)


def _runs(element: Any, parts: list[str], boxes: list[Any]) -> None:
    for child in element:
        tag = child.tag
        if tag == _W + "t":
            parts.append(child.text or "")
        elif tag == _W + "tab":
            parts.append("\t")
        elif tag in _LINE_ENDS:
            parts.append("\n")
        elif tag == _W + "txbxContent":
            boxes.append(child)
        elif tag not in _SKIPPED:
            _runs(child, parts, boxes)
