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


def test_readme_names_the_commands_that_need_a_configured_nextcloud() -> None:
    """README said only ``webhooks`` needs a configured Nextcloud beside ``make run``; a newcomer
    who tried ``ncindex reconcile`` or ``ncindex forget`` there met "no Nextcloud accounts
    configured" with no word of it. Each command that stops so is named in that sentence."""
    from click.testing import CliRunner

    from allinone.cli import main

    env = {"NCINDEX_ACCOUNTS": "{}", "NCINDEX_NEXTCLOUD_URL": ""}
    refusing = []
    for name, args in {
        "reconcile": ["reconcile"],
        "forget": ["forget", "carol"],
        "release": ["release", "carol"],
        "webhooks": ["webhooks", "list"],
    }.items():
        result = CliRunner().invoke(main, args, env=env)
        assert result.exit_code == 1, result.output
        if "no Nextcloud accounts configured" in result.output:
            refusing.append(name)
    assert refusing == ["reconcile", "forget", "release", "webhooks"]
    section = README.split("The `ncindex` command lives in", 1)[1].split("\n\n", 1)[0]
    sentence = section.split("need a configured Nextcloud", 1)[0].rsplit(", and ", 1)[1]
    assert [n for n in refusing if f"`{n}`" not in sentence] == []


def test_readme_states_when_the_title_branch_is_skipped() -> None:
    """The title branch's limits are the code's: a pasted long file name (more than
    TITLE_BRANCH_MAX_WORDS words) gets no title rank, which README did not say."""
    from ncindex.search.service import TITLE_BRANCH_MAX_POINTS, TITLE_BRANCH_MAX_WORDS

    section = README.split("A file is also found by its name", 1)[1].split("\n\n", 1)[0]
    flat = " ".join(section.split())
    assert f"more than {TITLE_BRANCH_MAX_WORDS} words" in flat
    assert f"more than {TITLE_BRANCH_MAX_POINTS:,} such chunks" in flat
