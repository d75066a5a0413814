"""``benchmarks/RESULTS.md``: one ``## Title`` section per benchmark, each rewritten by its own
``make bench-*`` run without touching the others."""

from __future__ import annotations

import re
from pathlib import Path

RESULTS_MD = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(title: str, body: str, path: Path = RESULTS_MD) -> None:
    """Replace the ``## {title}`` section of ``path`` (up to the next ``## `` heading) with
    ``body``, which starts with that heading, or append it when there is none yet."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    section = body.rstrip("\n") + "\n\n"
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
