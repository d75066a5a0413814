"""PowerPoint presentations (PPTX, Office Open XML, ECMA-376) by python-pptx (MIT): each slide
in presentation order as a ``# Slide n: title`` heading, the text of its other shapes (text
frames, tables as ``a | b`` rows, grouped shapes, SmartArt diagrams) in the slide's shape
order, then its speaker notes under ``Notes:``."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from ncindex.errors import ExtractionError
from ncindex.text.blocks import Blocks, one_line


def pptx_text(data: bytes, blocks: Blocks, max_slides: int) -> int:
    """The slides of a PPTX into ``blocks``, at most ``max_slides``; returns the slide count.
    Raises
    :class:`ExtractionError` when python-pptx cannot read the package or a slide."""
    from pptx import Presentation

    try:
        slides = list(Presentation(io.BytesIO(data)).slides)
    except Exception as exc:  # python-pptx raises assorted types on corrupt packages
        raise ExtractionError(f"unreadable PPTX: {type(exc).__name__}: {exc}") from exc
    for number, slide in enumerate(slides, 1):
        if number > max_slides:
            blocks.truncated = True
            break
        if blocks.late():
            break
        try:
            text = _slide(number, slide)
        except Exception as exc:  # a malformed slide part
            raise ExtractionError(f"unreadable PPTX slide {number}: {exc}") from exc
        if not blocks.add(text):
            break
    return len(slides)


def _slide(number: int, slide: Any) -> str:
    title_shape = slide.shapes.title
    title = one_line(title_shape.text_frame.text) if title_shape is not None else ""
    text = f"# Slide {number}" + (f": {title}" if title else "")
    others = (s for s in slide.shapes if title_shape is None or s.shape_id != title_shape.shape_id)
    lines = [line for line in _shape_lines(others, slide.part) if line]
    if lines:
        text += "\n\n" + "\n".join(lines)
    if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
        notes = slide.notes_slide.notes_text_frame.text.strip()
        if notes:
            text += "\n\nNotes:\n" + notes
    return text


def _shape_lines(shapes: Iterable[Any], part: Any) -> Iterator[str]:
    for shape in shapes:
        if getattr(shape, "shapes", None) is not None:  # a group shape
            yield from _shape_lines(shape.shapes, part)
        elif getattr(shape, "has_table", False) and shape.has_table:
            for row in shape.table.rows:
                yield " | ".join(t for c in row.cells if (t := one_line(c.text)))
        elif shape.has_text_frame:
            for paragraph in shape.text_frame.paragraphs:
                yield paragraph.text.strip()
        else:
            yield from _diagram_lines(shape, part)


_DGM = "{http://schemas.openxmlformats.org/drawingml/2006/diagram}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_DATA_MODEL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}dm"
#: Points of a diagram's data model that carry its text (ECMA-376 Part 1 §21.4.7 ST_PtType:
#: ``node`` is the default; ``doc``, ``pres`` and the transitions carry none).
_TEXT_POINTS = ("node", "asst")


def _diagram_lines(shape: Any, part: Any) -> list[str]:
    """The text of a SmartArt diagram (a graphic frame whose ``dgm:relIds`` names its data
    model part, ECMA-376 Part 1 §21.4.2.26), one line per paragraph of each point, in the
    data model's order; python-pptx reads none of it. A diagram whose part is missing or
    broken adds nothing rather than losing the deck."""
    from pptx.oxml import parse_xml

    lines: list[str] = []
    try:
        for ids in shape._element.iter(_DGM + "relIds"):
            model = parse_xml(part.related_part(ids.get(_DATA_MODEL)).blob)
            for point in model.iter(_DGM + "pt"):
                if point.get("type", "node") in _TEXT_POINTS:
                    for paragraph in point.iter(_A + "p"):
                        lines.append("".join(t.text or "" for t in paragraph.iter(_A + "t")))
    except SoftTimeLimitExceeded:  # the task's time is up, not the diagram's fault
        raise
    except Exception:  # a missing relationship (KeyError), broken XML and the like
        return []
    return [line.strip() for line in lines]
