"""The version of each format's extraction: when it rises, what was read with an older one is
read again (README, "Reconciliation"; the rule for contributors, below, is also in
docs/ARCHITECTURE.md, "Where a change goes").

Every document whose text is made by :func:`ncindex.text.extract.extract_text` (files; News
items, whose HTML body is read as :data:`~ncindex.text.extract.HTML`) keeps in its payload the
format it was read as (``extractor``: :attr:`ExtractedText.format
<ncindex.text.extract.ExtractedText.format>`, so a PDF named ``notes.txt`` is ``pdf``) and that
format's version then (``extractor_version``). A reconcile scan re-reads the documents whose
version is older than :data:`EXTRACTOR_VERSIONS` holds now for their format, whatever their
etag (:func:`outdated`; paced: :mod:`ncindex.sync.reconcile`). A document indexed before the
fields existed counts as version 0 of the format its MIME type and name give
(:func:`~ncindex.text.extract.detect_format`: its bytes are not at hand).

The rule: a change that alters the text some input of a format gives (not only its speed or
its bounds' bookkeeping) adds 1 to that format's number here, in the same commit — and to
every format whose reader shares the changed code: :mod:`~ncindex.text.markup` is read by
``html``, ``eml`` (an HTML body) and ``epub`` (chapters); :mod:`~ncindex.text.charsets` by every
format that decodes text (``text``, ``markdown``, ``csv``, ``tsv``, ``ics``, ``vcf``, ``html``,
``eml``, ``epub``); :func:`~ncindex.text.extract.normalize_text` by all of them. Each bump costs
one download and extraction of every such document of every account, spread over the scans.

The numbers at the fields' introduction (version 1: read again once after the upgrade from a
release without them; 0: not): ``eml`` (plain bodies with ``format=flowed`` read in
paragraphs, RFC 3676 §4; HTML alternatives chosen when the plain one is a stub), ``html``
(tables and long pages read whole), ``epub`` (its chapters are HTML) and ``pdf`` (a page of one
line longer than the characters left keeps its first characters). The other formats are 0: a
release without the fields may have read them no worse.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ncindex.text.extract import (
    CSV,
    DOCX,
    EML,
    EPUB,
    HTML,
    ICS,
    IMAGE,
    MARKDOWN,
    ODP,
    ODS,
    ODT,
    PDF,
    PPTX,
    RTF,
    TEXT,
    TSV,
    VCF,
    XLSX,
    detect_format,
)

EXTRACTOR_VERSIONS: Mapping[str, int] = MappingProxyType(
    {
        TEXT: 0,
        MARKDOWN: 0,
        HTML: 1,
        PDF: 1,
        DOCX: 0,
        ODT: 0,
        PPTX: 0,
        ODP: 0,
        XLSX: 0,
        ODS: 0,
        CSV: 0,
        TSV: 0,
        EPUB: 1,
        RTF: 0,
        EML: 1,
        IMAGE: 0,
        ICS: 0,
        VCF: 0,
    }
)
"""Format name (:func:`~ncindex.text.extract.detect_format`'s) → the version of its extraction
now; bumped by whoever changes the text the format's reader gives (module docstring)."""


def extraction_fields(fmt: str) -> dict[str, Any]:
    """The payload fields of a document whose text was read as ``fmt``: ``extractor`` (the
    format) and ``extractor_version`` (its version now; 0 for a format not listed)."""
    return {"extractor": fmt, "extractor_version": EXTRACTOR_VERSIONS.get(fmt, 0)}


def outdated(
    extractor: str | None, version: int | None, mime_type: str | None, path: str | None
) -> bool:
    """Whether a document stored with these payload fields was read by an older extraction
    than its format's now: ``extractor`` and ``version`` as :func:`extraction_fields` wrote
    them (``None`` for a document indexed before they existed: the format is then the one
    ``mime_type`` and ``path``'s file name give, and the version 0)."""
    fmt = extractor or _format_of(mime_type, posixpath.splitext(path or "")[1].lower())
    if fmt is None:
        return False
    return (version or 0) < EXTRACTOR_VERSIONS.get(fmt, 0)


@functools.lru_cache(maxsize=1024)
def _format_of(mime_type: str | None, extension: str) -> str | None:
    """:func:`~ncindex.text.extract.detect_format` of a file named ``*{extension}``, cached: a
    scan asks it for every document indexed without the fields (20,000: 0.21 s uncached, 0.11 s
    so)."""
    return detect_format(mime_type, f"file{extension}")
