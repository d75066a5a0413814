"""EPUB e-books (EPUB 3.3, W3C Recommendation; EPUB 2 alike) read with the standard library's
``zipfile`` and defusedxml (PSF licence): ``META-INF/container.xml`` names the package document
(the OPF, EPUB 3.3 §4.2.6.3.1), whose ``<spine>`` lists the chapters' manifest ids in reading
order (§5.7). Each chapter's XHTML becomes text with its headings as markdown lines; the time
budget is checked between chapters and while a chapter is parsed (the chapter read so far is
kept, the text marked ``truncated``)."""

from __future__ import annotations

import io
import posixpath
import zipfile
import zlib
from urllib.parse import unquote
from xml.etree.ElementTree import Element

from ncindex.errors import ExtractionError
from ncindex.text.blocks import Blocks
from ncindex.text.charsets import declared_markup_encoding, decode_without_nuls
from ncindex.text.markup import html_text

_CONTAINER_NS = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF_NS = "{http://www.idpf.org/2007/opf}"
_XHTML_TYPES = {"application/xhtml+xml", "text/html"}


def epub_text(data: bytes, blocks: Blocks, max_chapters: int) -> int:
    """The spine's chapters of an EPUB in reading order into ``blocks``, at most
    ``max_chapters``; returns the chapter count. The archive's unpacked size is checked by
    the caller. Raises :class:`ExtractionError` when the container, the package document or
    a chapter is missing or malformed."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            opf_path = _rootfile(_xml(archive, "META-INF/container.xml"))
            chapters = _spine(_xml(archive, opf_path), posixpath.dirname(opf_path))
            for number, path in enumerate(chapters, 1):
                if number > max_chapters:
                    blocks.truncated = True
                    break
                if blocks.late():
                    break
                # the budget is checked while the chapter's markup is parsed too: a chapter
                # is a web page of any size
                chapter, cut = html_text(
                    _decoded(_read(archive, path)),
                    headings=True,
                    late=blocks.late,
                    max_chars=blocks.room(),
                )
                blocks.truncated = blocks.truncated or cut
                if not blocks.add(chapter) or blocks.truncated:
                    break
            return len(chapters)
    # zlib.error: a damaged deflate stream; RuntimeError includes zipfile's NotImplementedError
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, RuntimeError, ValueError) as exc:
        raise ExtractionError(f"unreadable EPUB: {type(exc).__name__}: {exc}") from exc


def _decoded(markup: bytes) -> str:
    """A chapter's XHTML as text, in the encoding its XML declaration or ``<meta charset>``
    names (:func:`~ncindex.text.charsets.declared_markup_encoding`, a linear prescan that
    steps over comments), else as :func:`~ncindex.text.charsets.decode_text` guesses: decoded
    here, as a web page is, so that :func:`~ncindex.text.markup.html_text` is handed text and
    bs4's ``EncodingDetector`` does not run its declared-encoding search (quadratic on a run
    of ``<meta ``)."""
    text, _ = decode_without_nuls(
        markup, declared_markup_encoding(markup), len(markup), markup=True
    )
    return text


def _read(archive: zipfile.ZipFile, path: str) -> bytes:
    try:
        return archive.read(path)
    except KeyError:
        raise ExtractionError(f"unreadable EPUB: {path!r} is missing") from None


def _xml(archive: zipfile.ZipFile, path: str) -> Element:
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import ParseError, fromstring

    try:
        return fromstring(_read(archive, path))
    except (ParseError, DefusedXmlException) as exc:
        raise ExtractionError(f"unreadable EPUB: {path}: {exc}") from exc


def _rootfile(container: Element) -> str:
    for rootfile in container.iter(f"{_CONTAINER_NS}rootfile"):
        path = rootfile.get("full-path")
        if path and rootfile.get("media-type", "application/oebps-package+xml").endswith("xml"):
            return path
    raise ExtractionError("unreadable EPUB: container.xml names no package document")


def _spine(opf: Element, base: str) -> list[str]:
    """The archive paths of the spine's XHTML documents, in reading order."""
    manifest = {
        item.get("id"): item
        for item in opf.iter(f"{_OPF_NS}item")
        if item.get("id") and item.get("href")
    }
    spine = opf.find(f"{_OPF_NS}spine")
    if spine is None:
        raise ExtractionError("unreadable EPUB: the package document has no spine")
    paths = []
    for itemref in spine.iter(f"{_OPF_NS}itemref"):
        item = manifest.get(itemref.get("idref"))
        if item is None or item.get("media-type") not in _XHTML_TYPES:
            continue
        href = unquote(str(item.get("href")).split("#", 1)[0])
        paths.append(posixpath.normpath(posixpath.join(base, href)))
    return paths
