"""The README stays true: it opens with the two set-up commands and lists every setting."""

from __future__ import annotations

from pathlib import Path

from ncindex.settings import Settings

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def test_readme_opens_with_the_two_commands() -> None:
    head = README[:800]
    assert "make run" in head and "make test" in head


def test_readme_lists_every_setting() -> None:
    missing = [n for n in Settings.model_fields if f"`NCINDEX_{n.upper()}`" not in README]
    assert missing == []
