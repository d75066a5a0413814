"""The extraction versions (:mod:`ncindex.text.versions`): every format has one, a document is
outdated only when its format's version rose since it was read, and the format recorded is
the one the bytes were read as."""

from __future__ import annotations

import pytest

from ncindex.text import extract
from ncindex.text.extract import extract_text
from ncindex.text.versions import EXTRACTOR_VERSIONS, extraction_fields, outdated


def test_every_format_has_a_version() -> None:
    """A guard (new with the module): a format added to the extractor must say its version."""
    formats = set(extract._MIME_FORMATS.values()) | set(extract._EXT_FORMATS.values())
    assert formats == set(EXTRACTOR_VERSIONS)


@pytest.mark.parametrize(
    ("extractor", "version", "mime", "path", "expected"),
    [
        ("eml", 1, "message/rfc822", "/m.eml", False),  # read by the version of now
        ("eml", 0, "message/rfc822", "/m.eml", True),  # by an older one
        (None, None, "message/rfc822", "/m.eml", True),  # before the fields: version 0
        (None, None, "text/markdown", "/a.md", False),  # markdown is still version 0
        (None, None, "application/octet-stream", "/scan.pdf", True),  # by its name
        ("pdf", 1, "text/plain", "/notes.txt", False),  # the format read, not the name's
        (None, None, "application/x-unknown", "/a.bin", False),  # no extractor reads it
        ("gone", 3, None, "/a.x", False),  # a format no longer listed
    ],
)
def test_outdated(
    extractor: str | None, version: int | None, mime: str, path: str, expected: bool
) -> None:
    assert outdated(extractor, version, mime, path) is expected


def test_the_format_read_is_the_bytes_own() -> None:
    rtf = extract_text(
        b"{\\rtf1\\ansi Harbour rota}", mime_type="text/plain", filename="notes.txt", max_chars=100
    )
    assert (rtf.format, rtf.text) == ("rtf", "Harbour rota")
    read = extract_text(b"# Title\n", mime_type="text/plain", filename="a.md", max_chars=100)
    assert read.format == "markdown"
    assert extraction_fields(read.format) == {"extractor": "markdown", "extractor_version": 0}
    empty = extract_text(b"", mime_type="message/rfc822", filename="m.eml", max_chars=100)
    assert extraction_fields(empty.format) == {"extractor": "eml", "extractor_version": 1}
