"""OCR with the real Tesseract: images of known text made by Pillow (PNG, JPEG, TIFF with two
frames, WebP) and a scanned PDF (page images, no text layer), found at exact offsets; pages
and time bounded; OCR off, a missing language and a corrupt image each say why."""

from __future__ import annotations

import io

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from docmakers import image_bytes, scanned_pdf_bytes, text_image

from ncindex.errors import ExtractionError
from ncindex.settings import Settings
from ncindex.sources.eligibility import Eligibility
from ncindex.text.extract import extract_text
from ncindex.text.ocr import Ocr, ocr_from_settings, ocr_problem

SENTENCE = "The tide mill grinds oats at dawn"
OTHER = "Salt pans glitter beyond the dyke"


def ocr(data: bytes, mime: str | None, name: str, **kw):
    return extract_text(
        data,
        mime_type=mime,
        filename=name,
        max_chars=kw.pop("max_chars", 10**6),
        ocr=kw.pop("ocr", Ocr()),
        **kw,
    )


@pytest.mark.parametrize(
    ("fmt", "mime", "name"),
    [
        ("PNG", "image/png", "scan.png"),
        ("JPEG", "image/jpeg", "scan.jpg"),
        ("WEBP", "image/webp", "scan.webp"),
        ("TIFF", "application/octet-stream", "scan.tif"),
    ],
)
def test_images_are_read_by_ocr(fmt, mime, name) -> None:
    result = ocr(image_bytes([SENTENCE, OTHER], fmt), mime, name)
    start = result.text.index(SENTENCE)
    assert result.text[start : start + len(SENTENCE)] == SENTENCE
    assert result.text.index(OTHER) > start and result.pages == 1 and not result.truncated


def test_each_tiff_frame_is_a_page_and_pages_are_bounded() -> None:
    out = io.BytesIO()
    frames = [text_image([SENTENCE]), text_image([OTHER]), text_image(["Third page"])]
    frames[0].save(out, format="TIFF", save_all=True, append_images=frames[1:])
    result = ocr(out.getvalue(), "image/tiff", "pages.tiff", ocr=Ocr(max_pages=2))
    assert result.pages == 3 and result.truncated
    assert result.text.index(SENTENCE) < result.text.index(OTHER)
    assert "Third" not in result.text


def test_a_phone_photo_is_turned_upright_by_its_exif_orientation() -> None:
    """A phone stores the sensor's pixels and an EXIF Orientation tag (6: turn 90° clockwise
    to view); Tesseract read the sideways text as ``1dl30344 V AO OLOHd``."""
    from PIL import Image

    sideways = text_image([SENTENCE]).rotate(90, expand=True).convert("RGB")
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation
    out = io.BytesIO()
    sideways.save(out, format="JPEG", exif=exif.tobytes())
    assert SENTENCE in ocr(out.getvalue(), "image/jpeg", "IMG_0042.jpg").text


def test_a_scanned_pdf_is_read_page_by_page_and_ocr_pages_are_bounded() -> None:
    data = scanned_pdf_bytes([[SENTENCE], [OTHER], ["Third page"]])
    assert (
        extract_text(data, mime_type="application/pdf", filename="s.pdf", max_chars=1000).text == ""
    )
    result = ocr(data, "application/pdf", "s.pdf")
    assert result.pages == 3 and not result.truncated
    assert result.text.index(SENTENCE) < result.text.index(OTHER) < result.text.index("Third page")
    bounded = ocr(data, "application/pdf", "s.pdf", ocr=Ocr(max_pages=1))
    assert bounded.truncated and SENTENCE in bounded.text and OTHER not in bounded.text


def test_a_scan_with_a_stamp_of_a_few_words_is_ocrd_too() -> None:
    """A scanner's date line or a Bates number added after scanning gives the page a text
    layer of a few words: only an empty layer was OCR'd, so the page's content was lost."""
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    pdf = canvas.Canvas(out, pagesize=(612, 792))
    page = text_image([SENTENCE, *[""] * 20])  # an A4-ish page, the text at its top
    pdf.drawImage(ImageReader(page), 0, 0, width=612, height=792)
    pdf.setFont("Helvetica", 8)
    pdf.drawString(20, 20, "ACME-000123")
    pdf.showPage()
    pdf.drawString(72, 700, "A page of text with a small logo stays as its text layer says.")
    pdf.drawImage(ImageReader(text_image(["LOGO"])), 72, 600, width=90, height=12)
    pdf.showPage()
    pdf.save()
    result = ocr(out.getvalue(), "application/pdf", "bates.pdf")
    assert result.text.startswith("ACME-000123\n\n")
    assert SENTENCE in result.text and "LOGO" not in result.text


def test_stamped_pages_past_the_ocr_bound_do_not_cut_the_document_short() -> None:
    """Past ``Ocr.max_pages`` a page with a text layer is read by it: a deck exported with a
    background picture on every slide was listed as truncated."""
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    pdf = canvas.Canvas(out, pagesize=(612, 792))
    for title in ("Agenda", "Budget"):
        pdf.drawImage(ImageReader(text_image([SENTENCE, *[""] * 20])), 0, 0, width=612, height=792)
        pdf.drawString(72, 40, title)
        pdf.showPage()
    pdf.save()
    result = ocr(out.getvalue(), "application/pdf", "deck.pdf", ocr=Ocr(max_pages=1))
    assert not result.truncated
    assert result.text.count(SENTENCE) == 1 and result.text.endswith("Budget")


def test_the_time_budget_stops_ocr() -> None:
    data = scanned_pdf_bytes([[SENTENCE], [OTHER]])
    result = ocr(data, "application/pdf", "s.pdf", max_seconds=0.5)
    assert result.truncated and result.text == ""


def test_ocr_off_missing_languages_and_corrupt_images_say_why() -> None:
    with pytest.raises(ExtractionError, match="OCR is off"):
        extract_text(image_bytes([SENTENCE]), mime_type="image/png", filename="a.png", max_chars=99)
    assert ocr_problem("eng+qqq") == "no Tesseract language data for qqq"
    with pytest.raises(ExtractionError, match="OCR unavailable: no Tesseract language data"):
        ocr(image_bytes([SENTENCE]), "image/png", "a.png", ocr=Ocr(languages="eng+qqq"))
    with pytest.raises(ExtractionError, match="unreadable image"):
        ocr(image_bytes([SENTENCE])[:200], "image/png", "a.png")
    assert ocr_from_settings(Settings(ocr_enabled=False)) is None
    assert ocr_from_settings(Settings(ocr_languages="eng+qqq")) is None
    assert ocr_from_settings(Settings()) == Ocr(languages="eng", max_pages=20)
    assert Eligibility.from_settings(Settings()).file_reason("/a.png", "image/png", []) is None
    off = Eligibility.from_settings(Settings(ocr_enabled=False))
    assert off.file_reason("/a.png", "image/png", []) == "ocr_unavailable"


def test_the_reason_for_bytes_that_are_no_image_is_the_same_every_time() -> None:
    """Pillow's message named the in-memory file by its address (``<_io.BytesIO object at
    0x7f…>``), so the dead letter's reason differed on every attempt."""
    reasons = set()
    for _ in range(2):
        with pytest.raises(ExtractionError) as caught:
            ocr(b"\x89PNG\r\n\x1a\n" + bytes(50), "image/png", "broken.png")
        reasons.add(str(caught.value))
    assert reasons == {"unreadable image: no image format Pillow knows"}


def test_an_image_beyond_pillows_pixel_bound_is_too_large(monkeypatch) -> None:
    from PIL import Image

    from ncindex.errors import TooLarge

    data = image_bytes([SENTENCE])  # 1800 × 190 pixels
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 200_000)  # warns above, refuses above 2×
    with pytest.raises(TooLarge, match="image too large"):
        ocr(data, "image/png", "big.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100_000)
    with pytest.raises(TooLarge, match="image too large"):
        ocr(data, "image/png", "big.png")


def test_the_task_time_limit_while_probing_tesseract_is_not_cached_as_its_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probe's answer is cached for the process; a soft time limit reaching it is the
    task's, so it is raised, not kept as "tesseract does not run" (OCR off until a restart)."""
    import pytesseract

    def overrun() -> list[str]:
        raise SoftTimeLimitExceeded()

    ocr_problem.cache_clear()
    with monkeypatch.context() as patched:
        patched.setattr(pytesseract, "get_languages", overrun)
        with pytest.raises(SoftTimeLimitExceeded):
            ocr_problem("qqq")
    assert ocr_problem("qqq") == "no Tesseract language data for qqq"
    ocr_problem.cache_clear()
