"""Spreadsheets and delimited text: XLSX by openpyxl (MIT, read-only mode, cached values not
formulas) and CSV/TSV by the standard library's ``csv``. Each sheet is a ``# Sheet: name``
heading followed by one line per non-empty row, its non-empty cells joined by ``" | "`` (the
table-row form of the DOCX and ODT extractors); a sheet stops after ``max_rows`` rows."""

from __future__ import annotations

import csv
import datetime
import io
import threading
from collections.abc import Iterable
from typing import Any

from ncindex.errors import ExtractionError
from ncindex.text.blocks import Blocks, one_line

#: Rows read at most per sheet (and per CSV file); beyond it the text is marked truncated.
DEFAULT_MAX_ROWS = 20_000
#: Cells read at most per row (Excel's limit is 16,384 columns).
_MAX_COLUMNS = 1_000
#: Characters of delimited text ``csv.Sniffer`` is shown. Its quote-guessing patterns are
#: quadratic in the sample on runs of quotes and delimiters (``a,"b`` repeated): 16 KiB of
#: them took 0.9-3.9 s here, 4 KiB 0.04-0.19 s; 4 KiB is still dozens of ordinary rows.
_SNIFF_SAMPLE = 4 * 1024
_FIELD_LIMIT_LOCK = threading.Lock()


def xlsx_text(data: bytes, blocks: Blocks, max_sheets: int, max_rows: int) -> int:
    """The worksheets of an XLSX workbook in order into ``blocks``, at most ``max_sheets``
    sheets of ``max_rows`` rows, the time budget checked before each sheet and among its
    rows (:func:`_rows`); returns the sheet count. Raises :class:`ExtractionError`
    when openpyxl cannot read the workbook or a sheet."""
    from openpyxl import load_workbook

    try:
        book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises assorted types on corrupt packages
        raise ExtractionError(f"unreadable XLSX: {type(exc).__name__}: {exc}") from exc
    try:
        for number, sheet in enumerate(book.worksheets, 1):
            if number > max_sheets:
                blocks.truncated = True
                break
            if blocks.late():  # a sheet of fewer rows than _rows looks at the clock after
                break
            if not blocks.add(f"# Sheet: {one_line(sheet.title)}"):
                break
            rows = sheet.iter_rows(values_only=True, max_col=_MAX_COLUMNS)
            if not _rows(rows, blocks, max_rows):
                break
        return len(book.worksheets)
    except ExtractionError:
        raise
    except Exception as exc:  # a malformed sheet part
        raise ExtractionError(f"unreadable XLSX: {type(exc).__name__}: {exc}") from exc
    finally:
        book.close()


def csv_text(text: str, blocks: Blocks, delimiter: str, max_rows: int) -> None:
    """The rows of delimited text (``delimiter``: ``","``, ``";"``, ``"\\t"``) into
    ``blocks``, one line each, at most ``max_rows``. A field of any length is read (``csv``'s
    ``field_size_limit`` is raised to the text's length, see :func:`_allow_fields`); one past
    ``max_chars`` cuts the text there, marked truncated. Raises :class:`ExtractionError` when
    ``csv`` refuses the text (``csv.Error``)."""
    _allow_fields(len(text))
    try:
        _rows(csv.reader(io.StringIO(text), delimiter=delimiter), blocks, max_rows)
    except csv.Error as exc:
        raise ExtractionError(f"unreadable CSV: {exc}") from exc


def sniff_delimiter(text: str, default: str) -> str:
    """The delimiter of delimited text: ``csv.Sniffer``'s choice among comma, semicolon, tab
    and bar on the first :data:`_SNIFF_SAMPLE` characters, else ``default``."""
    try:
        return csv.Sniffer().sniff(text[:_SNIFF_SAMPLE], delimiters=",;\t|").delimiter
    except csv.Error:
        return default


def _allow_fields(length: int) -> None:
    """Raise ``csv``'s process-wide ``field_size_limit`` (131,072 characters by default) to
    at least ``length``: a spreadsheet cell holds up to 32,767 characters but a CSV written
    by other tools has no limit, and one long cell made the whole file unreadable. The limit
    guards a reader of a stream against unbounded memory; here the text is already in memory
    (at most twice ``max_chars`` characters, see ``extract._delimited``), so no field can be
    longer than it. Only ever raised, under a lock, so that a reader in another thread never
    sees it lowered below its own text's length."""
    with _FIELD_LIMIT_LOCK:
        if csv.field_size_limit() < length:
            csv.field_size_limit(length)


def _rows(rows: Iterable[Iterable[Any]], blocks: Blocks, max_rows: int) -> bool:
    """Add the non-empty rows; ``False`` when a bound stopped the document. The time budget
    is checked every 256 rows read, empty ones included: a sheet formatted down to row
    1,048,576 is that many empty ``<row>`` elements, each padded with empty cells by
    openpyxl (300,000 of them took 32 s with a 5 s budget when only rows with text counted)."""
    count = 0
    for seen, row in enumerate(rows, 1):
        if seen % 256 == 0 and blocks.late():
            return False
        cells = [_cell(v) for i, v in enumerate(row) if i < _MAX_COLUMNS]
        line = " | ".join(c for c in cells if c)
        if not line:
            continue
        count += 1
        if count > max_rows:
            blocks.truncated = True
            return True
        if not blocks.add(line, sep="\n\n" if count == 1 else "\n"):
            return False
    return True


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, datetime.datetime) and value.time() == datetime.time():
        return value.date().isoformat()
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return one_line(str(value))
