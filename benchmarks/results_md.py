"""Where the benchmarks put their results: ``benchmarks/results/<name>.json`` (the figures) and
one ``## Title`` section of ``benchmarks/RESULTS.md`` per benchmark, each rewritten by its own
``make bench-*`` run without touching the others (:func:`publish` does both); a section ends
with the benchmark's hand-written reading, ``benchmarks/<name>_reading.md`` (:func:`reading`),
which no run rewrites."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
RESULTS_DIR = BENCHMARKS / "results"
RESULTS_MD = BENCHMARKS / "RESULTS.md"


def publish(name: str, result: Any, title: str, body: str, root: Path = BENCHMARKS) -> Path:
    """Write ``result`` to ``root/results/<name>.json`` (:func:`write_json`) and ``body`` as
    the ``## {title}`` section of ``root/RESULTS.md`` (:func:`write_section`); returns the
    JSON's path."""
    path = write_json(f"{name}.json", result, root / "results")
    write_section(title, body, root / "RESULTS.md")
    return path


def write_json(name: str, data: Any, folder: Path = RESULTS_DIR) -> Path:
    """Write ``data`` to ``folder / name`` as indented JSON (sets as sorted lists) through a
    temporary file, so a reader never sees half of it; returns the path. Raises
    ``TypeError`` for a value JSON cannot hold."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=_sorted_set) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


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


def reading(name: str, root: Path = BENCHMARKS) -> list[str]:
    """The hand-written reading of a benchmark's runs, ``root/<name>_reading.md``, as lines to
    append to its section (a blank line first); none without the file. A run rewrites its
    section but never this file, so what was learnt by hand outlives the next run."""
    path = root / f"{name}_reading.md"
    if not path.exists():
        return []
    return ["", path.read_text(encoding="utf-8").rstrip()]


def _sorted_set(value: Any) -> list[Any]:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
