"""The README stays true: it opens with the two set-up commands, lists every setting, and
runs the distributed roles as deploy/Procfile does."""

from __future__ import annotations

import re
from pathlib import Path

from ncindex.settings import Settings

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_opens_with_the_two_commands() -> None:
    head = README[:800]
    assert "make run" in head and "make test" in head


def test_readme_lists_every_setting() -> None:
    missing = [n for n in Settings.model_fields if f"`NCINDEX_{n.upper()}`" not in README]
    assert missing == []


def _shell_lines(markdown: str) -> list[str]:
    """The command lines of ``markdown``'s ```sh blocks, comments dropped."""
    blocks = re.findall(r"^```sh\n(.*?)^```", markdown, flags=re.M | re.S)
    lines = (line.split("  #", 1)[0].strip() for block in blocks for line in block.splitlines())
    return [line for line in lines if line]


def _command(line: str) -> str:
    """``line`` without its leading ``NAME=value`` assignments, each ``${NAME:-default}``
    replaced by its default (as the shell does with ``NAME`` unset)."""
    words = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", line).split()
    while words and re.fullmatch(r"\w+=\S*", words[0]):
        words.pop(0)
    return " ".join(words)


def _procfile_commands() -> dict[str, str]:
    """deploy/Procfile's roles: name → command (:func:`_command`)."""
    text = (ROOT / "deploy" / "Procfile").read_text(encoding="utf-8")
    roles = (line.split(": ", 1) for line in text.splitlines() if line and line[0] != "#")
    return {name: _command(line) for name, line in roles}


def test_running_distributed_shows_the_procfile_commands() -> None:
    """README's "Running distributed" said ``gunicorn -b :8081 webhook_receiver.wsgi:app``: run that
    way gunicorn had none of deploy/gunicorn.conf.py (one sync worker, text logs, no queue
    gauges, no start-up secret check), unlike the Procfile the README also points at."""
    section = README.split("## Running distributed", 1)[1].split("\n## ", 1)[0]
    shown = [_command(line) for line in _shell_lines(section)]
    assert sorted(shown) == sorted(_procfile_commands().values())


def test_every_gunicorn_command_uses_the_configuration() -> None:
    """Each gunicorn command the README or the Procfile gives loads deploy/gunicorn.conf.py."""
    commands = [_command(line) for line in _shell_lines(README)]
    commands += _procfile_commands().values()
    gunicorn = [c for c in commands if c.startswith("gunicorn ")]
    assert len(gunicorn) >= 6
    assert [c for c in gunicorn if "-c deploy/gunicorn.conf.py " not in c] == []
