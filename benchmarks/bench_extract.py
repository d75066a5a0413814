"""Extraction speed per format on this machine: seconds per MB of input for every format
ncindex reads, and seconds per page for OCR (scanned PDF pages and images).

Each document is made from the bundled SciFact abstracts by the same writer libraries as the
tests (``tests/docmakers.py``: reportlab, python-docx, odfpy, python-pptx, openpyxl, csv,
pandoc, email, Pillow) and extracted by :func:`ncindex.text.extract.extract_text` with no
character bound, the median of ``RUNS`` runs. Writes ``benchmarks/results/extract.json`` and
the "Extraction" section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import io
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from results_md import publish

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "tests"))

import docmakers  # noqa: E402  (tests/ is put on the path just above)

from ncindex.simulator.sample import sample_documents  # noqa: E402
from ncindex.text.extract import extension_mime, extract_text  # noqa: E402
from ncindex.text.ocr import Ocr, ocr_problem  # noqa: E402

RUNS = 3
OCR_PAGES = 4


def abstracts(count: int) -> list[tuple[str, str]]:
    docs = sample_documents()
    return [(docs[i % len(docs)].title, docs[i % len(docs)].text) for i in range(count)]


def pdf_with_text(items: list[tuple[str, str]]) -> bytes:
    """A text-layer PDF, one abstract per page wrapped at 90 characters, by reportlab."""
    import textwrap

    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    pdf = canvas.Canvas(out, pagesize=A4, invariant=1)
    for title, text in items:
        y = 800
        for line in [title, *textwrap.wrap(text, 90)][:48]:
            pdf.drawString(40, y, line)
            y -= 16
        pdf.showPage()
    pdf.save()
    return out.getvalue()


def documents() -> dict[str, tuple[str, bytes]]:
    """Format name → (file name, bytes): a few hundred abstracts each."""
    items = abstracts(400)
    paragraphs = [f"{t}. {x}" for t, x in items]
    rows = [[t, x[:200], str(len(x))] for t, x in items] * 5
    markdown = "".join(f"# {t}\n\n{x}\n\n" for t, x in items)
    return {
        "plain text": ("a.txt", "\n\n".join(paragraphs).encode()),
        "markdown": ("a.md", markdown.encode()),
        "HTML": ("a.html", docmakers.html_bytes(paragraphs)),
        "PDF (text layer)": ("a.pdf", pdf_with_text(items[:200])),
        "DOCX": ("a.docx", docmakers.docx_bytes(paragraphs)),
        "ODT": ("a.odt", docmakers.odt_bytes(paragraphs)),
        "PPTX": ("a.pptx", docmakers.pptx_bytes([(t, x, "Notes.") for t, x in items[:150]])),
        "ODP": ("a.odp", docmakers.odp_bytes([(t, x, "Notes.") for t, x in items[:150]])),
        "XLSX": ("a.xlsx", docmakers.xlsx_bytes({"Abstracts": rows})),
        "ODS": ("a.ods", docmakers.ods_bytes({"Abstracts": rows})),
        "CSV": ("a.csv", docmakers.csv_bytes(rows)),
        "EPUB": ("a.epub", docmakers.epub_bytes(items)),
        "RTF": ("a.rtf", docmakers.rtf_bytes(paragraphs)),
        "EML": ("a.eml", docmakers.eml_bytes("Abstracts", "\n\n".join(paragraphs))),
    }


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    seconds, result = [], None
    for _ in range(RUNS):
        started = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), result


def extract(name: str, data: bytes, ocr: Ocr | None = None) -> Any:
    return extract_text(
        data,
        mime_type=extension_mime(name),
        filename=name,
        max_chars=10**9,
        max_pages=10**4,
        max_rows=10**6,
        max_seconds=600,
        ocr=ocr,
    )


def main() -> int:
    formats = {}
    for label, (name, data) in documents().items():
        seconds, result = timed(lambda n=name, d=data: extract(n, d))
        megabytes = len(data) / 1e6
        formats[label] = {
            "bytes": len(data),
            "characters": len(result.text),
            "seconds": round(seconds, 4),
            "seconds_per_mb": round(seconds / megabytes, 3),
            "chars_per_second": round(len(result.text) / seconds),
        }
        print(label, formats[label], flush=True)
    problem = ocr_problem("eng")
    if problem is not None:
        print(f"OCR not measured: {problem}")
        return 1
    lines = [t[:60] for t, _ in abstracts(24)]
    scan = docmakers.scanned_pdf_bytes([lines[i * 6 : i * 6 + 6] for i in range(OCR_PAGES)])
    image = docmakers.image_bytes(lines[:6])
    ocr = {}
    for label, name, data, pages in [
        ("scanned PDF page (200 dpi render)", "scan.pdf", scan, OCR_PAGES),
        ("PNG image", "scan.png", image, 1),
    ]:
        seconds, result = timed(lambda n=name, d=data: extract(n, d, Ocr(max_pages=100)))
        ocr[label] = {
            "pages": pages,
            "bytes": len(data),
            "characters": len(result.text),
            "seconds_per_page": round(seconds / pages, 3),
        }
        print(label, ocr[label], flush=True)
    result = {
        "formats": formats,
        "ocr": ocr,
        "runs": RUNS,
        "machine": machine(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }
    table = render(result)
    print(table)
    publish("extract", result, "Extraction", table)
    return 0


def machine() -> str:
    """CPU, cores, Python, and the 1-minute load average (seconds depend on it)."""
    load = os.getloadavg()[0]
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {load:.1f} at the end of the run"
    )


def render(r: dict[str, Any]) -> str:
    rows = [
        "## Extraction",
        "",
        f"`make bench-extract` — {r['date']}, {r['machine']}. Documents made from the sample's "
        "SciFact abstracts by the tests' writer libraries, extracted with no character bound; "
        f"the median of {r['runs']} runs. Seconds per MB are of the file's bytes (zip-based "
        "formats are compressed, so a MB of them holds more text).",
        "",
        "| format | file bytes | characters | seconds | seconds / MB | characters / s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, f in r["formats"].items():
        rows.append(
            f"| {label} | {f['bytes']:,} | {f['characters']:,} | {f['seconds']:.3f} | "
            f"{f['seconds_per_mb']:.3f} | {f['chars_per_second']:,} |"
        )
    rows += [
        "",
        "| OCR (Tesseract, eng) | pages | characters | seconds / page |",
        "|---|---:|---:|---:|",
    ]
    for label, o in r["ocr"].items():
        rows.append(f"| {label} | {o['pages']} | {o['characters']:,} | {o['seconds_per_page']} |")
    rows += [
        "",
        "OCR pages are 1800-pixel-wide images of six lines of 40-pixel type; a scanned A4 page "
        "of dense text takes longer. The seconds depend on the machine's load (in the header): "
        "Tesseract competes for the same cores. At a few seconds a page, the budget of "
        "`NCINDEX_EXTRACT_MAX_SECONDS` (60) ends a long scan before `NCINDEX_OCR_MAX_PAGES` "
        "(20) does; the text read so far is indexed and marked truncated, well inside a "
        "task's time limit (`NCINDEX_TASK_SOFT_TIME_LIMIT`, 240 s).",
        "",
    ]
    return "\n".join(rows)


if __name__ == "__main__":
    raise SystemExit(main())
