"""Accounts in the settings: user id → app password, and the login name beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from ncindex.settings import Settings


def test_the_login_name_defaults_to_the_user_id() -> None:
    settings = Settings(accounts={"alice": SecretStr("pw")}, logins={"u1001": "carol@x.test"})
    assert settings.login_for("alice") == "alice"
    assert settings.login_for("u1001") == "carol@x.test"


def test_an_accounts_file_may_give_password_and_login(tmp_path: Path) -> None:
    path = tmp_path / "accounts.json"
    path.write_text(
        json.dumps({"alice": "pw-a", "u1001": {"password": "pw-c", "login": "carol@x.test"}})
    )
    settings = Settings(accounts_file=path)
    assert (settings.password_for("alice"), settings.login_for("alice")) == ("pw-a", "alice")
    assert (settings.password_for("u1001"), settings.login_for("u1001")) == (
        "pw-c",
        "carol@x.test",
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"login": "carol"}, 'needs a non-empty "password"'),
        ({"password": "", "login": "carol"}, 'needs a non-empty "password"'),
        ({"password": "pw", "login": ""}, '"login" must be a non-empty string'),
        ({"password": "pw", "user": "carol"}, "unknown keys"),
    ],
)
def test_a_bad_accounts_file_entry_is_refused_with_its_reason(
    tmp_path: Path, entry: dict, message: str
) -> None:
    path = tmp_path / "accounts.json"
    path.write_text(json.dumps({"u1001": entry}))
    with pytest.raises(ValidationError, match=message):
        Settings(accounts_file=path)


def test_urls_need_http_and_a_host_and_an_empty_store_path_is_unset() -> None:
    for url in ("nextcloud.example.org", "ftp://nextcloud.example.org", "http://"):
        with pytest.raises(ValidationError, match="http:// or https:// URL"):
            Settings(nextcloud_url=url)
        with pytest.raises(ValidationError, match="http:// or https:// URL"):
            Settings(qdrant_url=url)
    assert Settings(nextcloud_url="https://cloud.example.org/nc/").nextcloud_url == (
        "https://cloud.example.org/nc"
    )
    assert Settings(qdrant_path="").qdrant_path is None  # was Path("."): the working folder
