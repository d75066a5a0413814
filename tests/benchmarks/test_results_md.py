"""``benchmarks/results_md.py``: the one place the benchmark scripts write their figures
(``results/<name>.json``) and their section of ``RESULTS.md``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import results_md

DOC = """# Benchmarks

## Search

old search

## Load

old load
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A benchmarks folder with a ``RESULTS.md`` of two sections and no ``results/`` yet."""
    (tmp_path / "RESULTS.md").write_text(DOC, encoding="utf-8")
    return tmp_path


def test_publish_writes_the_json_and_replaces_only_its_section(folder: Path) -> None:
    path = results_md.publish(
        "search", {"p50_ms": 12, "users": {"b", "a"}}, "Search", "## Search\n\nnew search\n", folder
    )
    assert path == folder / "results" / "search.json"
    assert json.loads(path.read_text()) == {"p50_ms": 12, "users": ["a", "b"]}
    assert (folder / "RESULTS.md").read_text() == DOC.replace("old search", "new search")
    assert not list((folder / "results").glob("*.tmp"))


def test_a_new_section_is_appended(folder: Path) -> None:
    results_md.publish("scale", [1, 2], "Scale", "## Scale\n\nrows\n", folder)
    assert (folder / "RESULTS.md").read_text() == DOC + "\n## Scale\n\nrows\n"


def test_a_value_json_cannot_hold_is_refused(folder: Path) -> None:
    with pytest.raises(TypeError, match="object is not JSON serializable"):
        results_md.write_json("bad.json", {"x": object()}, folder)


def test_a_reading_outlives_the_runs_that_rewrite_the_section(folder: Path) -> None:
    """``<name>_reading.md`` is appended to every body built with it; none, nothing."""
    assert results_md.reading("search", folder) == []
    (folder / "search_reading.md").write_text("Read by hand.\n\n", encoding="utf-8")
    body = "\n".join(["## Search", "", "run 1", *results_md.reading("search", folder)])
    results_md.publish("search", {}, "Search", body, folder)
    body = "\n".join(["## Search", "", "run 2", *results_md.reading("search", folder)])
    results_md.publish("search", {}, "Search", body, folder)
    text = (folder / "RESULTS.md").read_text()
    assert "run 2\n\nRead by hand.\n\n## Load" in text and "run 1" not in text
