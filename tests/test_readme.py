"""The README stays true: it opens with the two set-up commands, lists every setting with its
default, runs the distributed roles as deploy/Procfile does, and shows only commands, options
and variables that something reads."""

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


def _code_spans() -> list[str]:
    """The README's inline code spans (a span may wrap over a line or two) and the command
    lines of its ```sh blocks, whitespace collapsed."""
    spans = re.findall(r"(?<!`)`([^`\n]+(?:\n[^`\n]+){0,2})`(?!`)", README)
    return [" ".join(span.split()) for span in spans + _shell_lines(README)]


def test_every_ncindex_command_and_option_shown_exists() -> None:
    """Each ``ncindex <command> [--option …]`` the README shows, in a shell block or inline,
    is a command of the CLI taking those options (a renamed command or option otherwise
    lingers in the README). A guard: it found nothing stale when written."""
    import click

    from allinone.cli import main

    shown = [
        m.group(1).split()
        for span in _code_spans()
        if (m := re.match(r"(?:\S*/)?ncindex ([a-z][\w-]*(?: [^`#;]*)?)", _command(span)))
    ]
    assert len(shown) >= 50
    stale = []
    for words in shown:
        command = main.commands.get(words[0])
        if command is None:
            stale.append(" ".join(words))
            continue
        rest = words[1:]
        if isinstance(command, click.Group) and rest and rest[0] in command.commands:
            command, rest = command.commands[rest[0]], rest[1:]
        options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        given = {o for w in rest for o in re.findall(r"--[a-z][\w-]*", w)}
        stale += [f"{command.name} {o}" for o in sorted(given - options - {"--help"})]
    assert stale == []


def test_every_variable_named_is_read_and_the_procfiles_are_named() -> None:
    """Each ``NCINDEX_`` variable the README names is a setting or one that another part reads
    (``ncindex doctor`` knows them all), and each one deploy/Procfile reads is named: its
    ports (``NCINDEX_RECEIVER_PORT``, …) were in no document, so a newcomer whose 8081 was
    taken had to read the Procfile."""
    from ncindex.doctor import OTHER_VARIABLES

    settings = {f"NCINDEX_{n.upper()}" for n in Settings.model_fields}
    named = set(re.findall(r"\bNCINDEX_[A-Z0-9_]*[A-Z0-9]\b", README))
    assert sorted(named - settings - OTHER_VARIABLES) == []
    procfile = (ROOT / "deploy" / "Procfile").read_text(encoding="utf-8")
    read = set(re.findall(r"\$\{(NCINDEX_\w+)", procfile)) | set(
        re.findall(r"\b(NCINDEX_\w+)=", procfile)
    )
    assert read and sorted(read - named) == []


def _table_default(cell: str) -> object:
    """The value of a Settings table's Default cell (its first code span): ``unset`` is None,
    ``(empty)`` the empty string, JSON or a Python literal their value, else the text."""
    import ast
    import json

    text = cell.split("`")[1]
    if text in ("unset", "(empty)"):
        return None if text == "unset" else ""
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError):
            pass
    return text


def test_the_settings_table_gives_each_settings_default() -> None:
    """The Default column of README's Settings table is each setting's default (the
    abbreviated MIME list: its quoted types are defaults). A guard: every row held when
    written."""
    from pydantic import SecretStr

    table = README.split("\n## Settings", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `NCINDEX_(\w+)` \| (.+?) \| ", table, flags=re.M)
    assert len(rows) == len(Settings.model_fields)
    wrong = []
    for name, cell in rows:
        default = Settings.model_fields[name.lower()].get_default(call_default_factory=True)
        if isinstance(default, SecretStr):
            default = default.get_secret_value()
        elif isinstance(default, Path):
            default = str(default).replace(str(Path.home()), "~", 1)
        shown = _table_default(cell)
        if name == "INDEX_MIME_TYPES":
            quoted = re.findall(r"'([^']+)'", cell)
            if not quoted or set(quoted) - set(default):
                wrong.append(name)
        elif shown != default:
            wrong.append(f"{name}: README {shown!r}, settings {default!r}")
    assert wrong == []
