"""How what an admin reads is worded (the command line, ``ncindex doctor``, ``ncindex
status``), kept free of imports (the command line loads it at start)."""

from __future__ import annotations


def counted(count: object, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural (``plural``, default ``noun + "s"``)
    unless the count is 1: ``"1 document"``, ``"3 documents"``, ``"? documents"``."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
