"""The command line reports bad configuration as one line and exit status 1."""

from __future__ import annotations

from click.testing import CliRunner

from allinone.cli import main
from ncindex import __version__


def test_bad_setting_is_one_line_naming_the_variable() -> None:
    result = CliRunner().invoke(main, ["webhooks", "list"], env={"NCINDEX_PORT": "abc"})
    assert result.exit_code == 1
    assert "setting NCINDEX_PORT" in result.output
    assert "Traceback" not in result.output


def test_missing_accounts_and_unreachable_nextcloud_are_reported() -> None:
    env = {"NCINDEX_NEXTCLOUD_URL": "http://127.0.0.1:9", "NCINDEX_ACCOUNTS": "{}"}
    result = CliRunner().invoke(main, ["webhooks", "list"], env=env)
    assert result.exit_code == 1 and "no Nextcloud accounts configured" in result.output
    env["NCINDEX_ACCOUNTS"] = '{"admin": "pw"}'
    result = CliRunner().invoke(main, ["webhooks", "list"], env=env)
    assert result.exit_code == 1 and "NextcloudUnavailable" in result.output


def test_version_and_short_help() -> None:
    assert __version__ in CliRunner().invoke(main, ["--version"]).output
    assert "Usage:" in CliRunner().invoke(main, ["-h"]).output
