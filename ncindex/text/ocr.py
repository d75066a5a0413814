"""Optical character recognition for images and for PDF pages without a text layer, by
Tesseract (Apache-2.0; Debian's ``tesseract-ocr`` with its ``tesseract-ocr-eng`` data) through
pytesseract (Apache-2.0), which runs the ``tesseract`` program once per image with a time
limit. PDF pages are rendered to images by pypdfium2 (Apache-2.0/BSD-3-Clause, PDFium).

OCR is slow (seconds per page, see benchmarks/RESULTS.md "Extraction"), so it runs only where
extraction runs: the ``ncindex.index_node`` and ``ncindex.index_nodes`` tasks on the ``index``
queue, never in the receiver or on the light queues. Bounds: ``max_pages`` pages (images of a
multi-frame TIFF, or scanned PDF pages) per document, and the document's extraction deadline,
passed to Tesseract as its time limit.
"""

from __future__ import annotations

import io
import shutil
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from ncindex.errors import ExtractionError, TooLarge
from ncindex.settings import Settings
from ncindex.text.blocks import Blocks

#: Resolution PDF pages are rendered at for OCR, dots per inch (Tesseract reads best at
#: 300 dpi; 200 keeps ~10-pt text legible at under half the pixels — guess, measured only
#: on the benchmark's pages).
RENDER_DPI = 200
#: Pages OCR'd at most per document (``Settings.ocr_max_pages``).
DEFAULT_MAX_PAGES = 20
#: Below this many seconds left, a page is not started.
_MIN_PAGE_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Ocr:
    """How to OCR: Tesseract ``languages`` (``"eng"``, ``"eng+deu"``: its ``-l`` argument),
    at most ``max_pages`` pages per document."""

    languages: str = "eng"
    max_pages: int = DEFAULT_MAX_PAGES


def ocr_from_settings(settings: Settings) -> Ocr | None:
    """The OCR of a deployment (``ocr_*`` settings), or ``None`` when it is turned off or
    cannot run here (:func:`ocr_problem`)."""
    if not settings.ocr_enabled or ocr_problem(settings.ocr_languages) is not None:
        return None
    return Ocr(languages=settings.ocr_languages, max_pages=settings.ocr_max_pages)


def ocr_status(settings: Settings) -> str:
    """OCR as ``/readyz`` and ``ncindex doctor`` report it: ``"ok"``, ``"off"``
    (``NCINDEX_OCR_ENABLED=false``) or ``"unavailable: <why>"`` (:func:`ocr_problem`)."""
    if not settings.ocr_enabled:
        return "off"
    problem = ocr_problem(settings.ocr_languages)
    return "ok" if problem is None else f"unavailable: {problem}"


@lru_cache(maxsize=8)
def ocr_problem(languages: str) -> str | None:
    """Why OCR cannot run with ``languages`` on this machine, or ``None`` when it can:
    ``"tesseract is not installed"`` or ``"no Tesseract language data for …"``. The answer is
    cached for the process (it runs ``tesseract --list-langs``)."""
    import pytesseract

    if shutil.which(pytesseract.pytesseract.tesseract_cmd) is None:
        return "tesseract is not installed"
    try:
        installed = set(pytesseract.get_languages())
    except SoftTimeLimitExceeded:  # the task's time is up: not an answer to cache
        raise
    except Exception as exc:  # the program fails to start or answers oddly
        return f"tesseract does not run: {type(exc).__name__}: {exc}"
    missing = [lang for lang in languages.split("+") if lang not in installed]
    if missing:
        return f"no Tesseract language data for {'+'.join(missing)}"
    return None


def ocr_page(image: Any, ocr: Ocr, blocks: Blocks) -> str | None:
    """The text Tesseract reads in a Pillow ``image``, or ``None`` (and ``blocks`` marked
    truncated) when the time budget runs out. Raises :class:`ExtractionError` when OCR is
    unavailable or Tesseract fails on the image."""
    import pytesseract

    seconds = blocks.seconds_left()
    if seconds < _MIN_PAGE_SECONDS:
        blocks.truncated = True
        return None
    problem = ocr_problem(ocr.languages)
    if problem is not None:
        raise ExtractionError(f"OCR unavailable: {problem}")
    if image.mode not in ("1", "L", "RGB"):
        image = image.convert("RGB")
    try:
        return str(pytesseract.image_to_string(image, lang=ocr.languages, timeout=seconds))
    except RuntimeError as exc:
        if "timeout" not in str(exc).lower():  # pytesseract: "Tesseract process timeout"
            raise ExtractionError(f"OCR failed: {exc}") from exc
        blocks.truncated = True
        return None
    except pytesseract.TesseractError as exc:
        raise ExtractionError(f"OCR failed: {exc}") from exc


def image_text(data: bytes, blocks: Blocks, ocr: Ocr) -> int:
    """OCR an image (PNG, JPEG, TIFF, WebP; each frame of a multi-page TIFF is a page, at
    most ``ocr.max_pages``; each turned upright by its EXIF orientation) into ``blocks``;
    returns the page count. Raises :class:`TooLarge` beyond Pillow's decompression-bomb
    bound (``Image.MAX_IMAGE_PIXELS`` pixels), :class:`ExtractionError` for an image Pillow
    cannot decode."""
    from PIL import Image, ImageOps, ImageSequence, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            frames = getattr(image, "n_frames", 1)
            for number, frame in enumerate(ImageSequence.Iterator(image), 1):
                if number > ocr.max_pages:
                    blocks.truncated = True
                    break
                frame.load()
                # a phone stores a photo as its sensor saw it, with an EXIF Orientation tag
                # (0x0112, CIPA DC-008 §4.6.4) saying how to turn it upright: Tesseract reads
                # only upright text
                text = ocr_page(ImageOps.exif_transpose(frame), ocr, blocks)
                if text is None or not blocks.add(text):
                    break
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise TooLarge(f"image too large: {exc}") from exc
    except UnidentifiedImageError as exc:
        # its message names the in-memory file object by address ("cannot identify image
        # file <_io.BytesIO object at 0x7f…>"): a reason that changed on every attempt
        raise ExtractionError("unreadable image: no image format Pillow knows") from exc
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        # Pillow's decoders raise OSError ("image file is truncated") and SyntaxError
        raise ExtractionError(f"unreadable image: {type(exc).__name__}: {exc}") from exc
    return int(frames)


def render_pdf_page(pdf: Any, number: int) -> Any:
    """Page ``number`` (0-based) of a pypdfium2 ``PdfDocument`` as a Pillow image at
    :data:`RENDER_DPI`."""
    page = pdf[number]
    try:
        return page.render(scale=RENDER_DPI / 72, grayscale=True).to_pil()
    finally:
        page.close()
