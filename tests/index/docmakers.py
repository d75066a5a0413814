"""Documents of every indexed format, written by the real writer libraries (reportlab for
PDF, python-docx for DOCX, odfpy for ODT) — never hand-made bytes."""

from __future__ import annotations

import io
from collections.abc import Sequence


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
