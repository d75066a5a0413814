"""Accounts in the settings: user id → app password, and the login name beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from pydantic import SecretStr, ValidationError

from ncindex.accounts import (
    REFUSED_RECHECK_SECONDS,
    clear_refused_if,
    credential_fingerprint,
    held_until,
    record_deleted,
    record_refused,
    refused_accounts,
)
from ncindex.names import Names
from ncindex.settings import Settings


def test_the_login_name_defaults_to_the_user_id() -> None:
    accounts = {"alice": SecretStr("pw"), "u1001": SecretStr("pw-c")}
    settings = Settings(accounts=accounts, logins={"u1001": "carol@x.test"})
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
    # every result's open_url starts with it: credentials there went to every searcher
    for url in ("https://admin:secret@cloud.example.org", "https://admin@cloud.example.org"):
        with pytest.raises(ValidationError, match="must not hold a user name or password"):
            Settings(nextcloud_url=url)


def test_the_public_url_needs_http_and_a_host() -> None:
    """Refused, not registered with Nextcloud as ``notaurl/hooks/nextcloud`` (doctor then said
    only that ``''`` does not resolve)."""
    for url in ("", "ncindex.example.org", "ftp://ncindex.example.org", "http://"):
        with pytest.raises(ValidationError, match="http:// or https:// URL"):
            Settings(public_url=url)
    assert Settings(public_url="https://example.org/ncindex/").public_url == (
        "https://example.org/ncindex"
    )
    for url in ("https://example.org/hooks/nextcloud", "https://example.org/?x=1"):
        with pytest.raises(ValidationError, match="without /hooks/nextcloud or"):
            Settings(public_url=url)  # the delivery URL is this one + /hooks/nextcloud


@pytest.mark.parametrize("header", ["", "X Secret", "X-Secret:", "X-Sécret"])
def test_the_webhook_secret_header_must_be_a_header_name(header: str) -> None:
    """An empty or spaced name was accepted, registered as it was, and every delivery was
    then refused 401 (``ncindex doctor`` said "set; sent in " and nothing more)."""
    with pytest.raises(ValidationError, match="webhook_secret_header"):
        Settings(webhook_secret_header=header)


def test_the_admin_user_must_be_a_configured_account(tmp_path: Path) -> None:
    """Webhook registration uses the admin's app password from the accounts: an admin user
    without one gave ``Error: KeyError: 'admin'`` in ``ncindex doctor`` and ``webhooks``."""
    alice = {"alice": SecretStr("pw")}
    with pytest.raises(ValidationError, match="NCINDEX_ADMIN_USER must name one of") as caught:
        Settings(accounts=alice, admin_user="admin")
    assert "'admin'" not in str(caught.value)  # an error never repeats a value
    assert Settings(accounts=alice, admin_user="alice").webhook_admin == "alice"
    path = tmp_path / "accounts.json"
    path.write_text(json.dumps({"admin": "pw-admin"}))
    assert Settings(accounts=alice, accounts_file=path, admin_user="admin").webhook_admin == "admin"
    with pytest.raises(ValidationError, match="NCINDEX_ADMIN_USER must name one of"):
        Settings(admin_user="admin")  # no accounts at all (`up`'s simulator has its own admin)
    assert Settings(accounts=alice, admin_user="").webhook_admin == "alice"  # empty: unset


def test_a_qdrant_server_and_an_embedded_path_exclude_each_other(tmp_path: Path) -> None:
    """Both set, the path was ignored without a word (the server wins)."""
    with pytest.raises(ValidationError, match="exclude each other"):
        Settings(qdrant_url="http://qdrant:6333", qdrant_path=tmp_path)
    assert Settings(qdrant_url="http://qdrant:6333", qdrant_path="").qdrant_path is None


def test_settings_in_the_wrong_order_name_both_variables_and_values() -> None:
    """It said "task_time_limit must be below visibility_timeout": an operator who set
    NCINDEX_VISIBILITY_TIMEOUT=60 had to find the variable and the default of the other."""
    with pytest.raises(ValidationError) as refused:
        Settings(visibility_timeout=200)
    assert (
        "task_time_limit must be below visibility_timeout: NCINDEX_TASK_TIME_LIMIT is 300, its "
        "default; NCINDEX_VISIBILITY_TIMEOUT is 200"
    ) in str(refused.value)
    with pytest.raises(ValidationError, match="NCINDEX_CHUNK_OVERLAP_TOKENS is 300; "):
        Settings(chunk_overlap_tokens=300, chunk_tokens=200)


def test_an_extraction_cap_at_or_past_the_soft_time_limit_is_refused() -> None:
    """It was taken: the task was stopped at its soft time limit (the document parked as
    failed) before the extraction gave up and indexed what it had read."""
    for cap in (240, 600):
        with pytest.raises(ValidationError, match="extract_max_seconds must be below task_soft"):
            Settings(extract_max_seconds=cap, task_soft_time_limit=240)
    assert Settings(extract_max_seconds=239.5, task_soft_time_limit=240).extract_max_seconds


def test_a_login_of_no_configured_account_is_refused() -> None:
    """A misspelt user id in NCINDEX_LOGINS was ignored: the account went on signing in
    with its user id and was refused 401, while its login was set."""
    with pytest.raises(ValidationError, match="each key of NCINDEX_LOGINS must be one of"):
        Settings(accounts={"u1001": SecretStr("pw")}, logins={"U1001": "carol@x.test"})


def test_a_search_rate_limit_of_zero_requests_is_refused() -> None:
    """``0/minute`` was taken: every search, context, RCP and MCP call answered 429."""
    with pytest.raises(ValidationError, match="a limit of 0 requests refuses every request"):
        Settings(search_rate_limit="600/minute;0/second")
    assert Settings(search_rate_limit="").search_rate_limit == ""  # unlimited
    assert Settings(search_rate_limit="20/second").search_rate_limit == "20/second"


def test_an_empty_user_id_or_app_password_is_refused(tmp_path: Path) -> None:
    """Both were taken from NCINDEX_ACCOUNTS, and from the file's plain form, though the
    file's object form refused an empty password: every request of the account was 401."""
    with pytest.raises(ValidationError, match="'alice' has an empty app password"):
        Settings(accounts={"alice": SecretStr("")})
    with pytest.raises(ValidationError, match="a user id is empty"):
        Settings(accounts={" ": SecretStr("pw")})
    path = tmp_path / "accounts.json"
    path.write_text(json.dumps({"alice": ""}))
    with pytest.raises(ValidationError, match="'alice' has an empty app password"):
        Settings(accounts_file=path)


def test_an_empty_data_or_model_folder_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each was Path("."): the embedded store, or the models built where they were missing,
    went into the working folder (as an empty NCINDEX_QDRANT_PATH did before)."""
    monkeypatch.setenv("NCINDEX_DATA_DIR", "")
    monkeypatch.setenv("NCINDEX_MODEL_DIR", " ")
    settings = Settings()
    assert settings.data_dir == Settings.model_fields["data_dir"].default
    assert settings.model_dir == Settings.model_fields["model_dir"].default


def test_an_empty_value_of_a_setting_unset_by_default_is_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """README's Settings table gives these the default ``unset``, and an env file or template
    that leaves one empty (``NCINDEX_ACCOUNTS_FILE=``) means just that. An empty
    NCINDEX_ACCOUNTS_FILE was Path("."), refused as "accounts_file . cannot be read: Is a
    directory"; an empty NCINDEX_EMBED_THREADS was refused as no integer."""
    unset = [name for name, field in Settings.model_fields.items() if field.default is None]
    assert {"accounts_file", "embed_threads", "qdrant_path", "nextcloud_url"} <= set(unset)
    for name in unset:
        monkeypatch.setenv(f"NCINDEX_{name.upper()}", "")
    settings = Settings()
    assert [name for name in unset if getattr(settings, name)] == []
    assert settings.accounts == {} and settings.embed_threads is None


def test_the_settings_doc_type_names_are_the_doc_types() -> None:
    """settings.py may not import ncindex.documents (the layers), so it names the doc types
    its per-type settings take again; the two lists must agree."""
    from ncindex.documents import DocType
    from ncindex.settings import DOC_TYPE_NAMES

    assert sorted(DOC_TYPE_NAMES) == sorted(t.value for t in DocType)


def test_a_refused_credential_is_held_back_longer_each_time_and_only_that_one(
    redis_url: str,
) -> None:
    """``ncindex.accounts.held_until``: a refusal holds back the very credential it refused, 30
    minutes after a first refusal, twice as long after each further one, at most 6 hours;
    another credential, a refusal without a fingerprint (written before fingerprints were)
    or an unreadable entry hold nothing."""
    client = redis.Redis.from_url(redis_url)
    keys = Names("test-held-until")
    client.delete(keys.refused_accounts)
    first, longest = REFUSED_RECHECK_SECONDS
    old = credential_fingerprint("carol", "app-pw-1")
    new = credential_fingerprint("carol", "app-pw-2")
    assert old != new and len(old) == 16 and "app-pw" not in old
    holds = []
    at = 1000.0
    for _ in range(7):  # each refusal the re-check's, once the hold before it ended
        record_refused(client, keys, "carol", "PROPFIND …: HTTP 401", now=at, credential=old)
        raw = client.hget(keys.refused_accounts, "carol")
        until = held_until(raw, old, now=at)
        assert until is not None and held_until(raw, old, now=until) is None
        assert held_until(raw, new, now=at) is None
        holds.append(until - at)
        at = until
    assert holds == [first, 2 * first, 4 * first, 8 * first, longest, longest, longest]
    record_refused(client, keys, "carol", "x", now=9000, credential=new)  # another credential
    assert held_until(client.hget(keys.refused_accounts, "carol"), new, now=9000) == 9000 + first
    assert refused_accounts(client, keys, now=9000)["carol"] == {
        "at": 9000,
        "where": "x",
        "times": 1,
        "cause": None,
        "held_until": 9000 + first,
    }
    assert refused_accounts(client, keys, now=9000 + first)["carol"]["held_until"] is None
    assert held_until(json.dumps({"at": 1000, "where": "x"}), old, now=1001) is None
    assert held_until(b"{not json", old, now=1001) is None
    assert held_until(None, old, now=1001) is None
    client.delete(keys.refused_accounts)


def test_refusals_of_requests_in_flight_together_do_not_lengthen_the_hold(redis_url: str) -> None:
    """Tasks in flight at once when an app password is revoked (or its account disabled) are
    all refused, each before any hold was recorded: they are one refusal, not several in a row
    (``record_refused`` counted each, so four workers' refusals held the credential 4 hours, not
    30 minutes, and an account let in again an hour later stayed held for hours, each of its
    tasks failing as refused). A refusal after the hold ended is counted."""
    client = redis.Redis.from_url(redis_url)
    keys = Names("test-held-burst")
    client.delete(keys.refused_accounts)
    first, _ = REFUSED_RECHECK_SECONDS
    pw = credential_fingerprint("dave", "app-pw")
    for second in range(4):  # four tasks refused within seconds of each other
        record_refused(client, keys, "dave", "GET …: HTTP 401", now=5000 + second, credential=pw)
    raw = client.hget(keys.refused_accounts, "dave")
    assert json.loads(raw)["times"] == 1
    assert held_until(raw, pw, now=5003) == 5003 + first
    record_refused(client, keys, "dave", "SEARCH …: HTTP 401", now=5003 + first, credential=pw)
    raw = client.hget(keys.refused_accounts, "dave")
    assert json.loads(raw)["times"] == 2
    assert held_until(raw, pw, now=5003 + first) == 5003 + 3 * first
    client.delete(keys.refused_accounts)


def test_a_refusal_is_cleared_only_if_it_did_not_change_since_it_was_read(redis_url: str) -> None:
    """``clear_refused_if`` (a request that Nextcloud accepted, the entry read before it):
    the entry read goes; one that changed since — refused again by a request of the same
    credential, or a ``deleted`` note recorded meanwhile (``record_deleted``) — stays."""
    client = redis.Redis.from_url(redis_url)
    keys = Names("test-clear-if")
    client.delete(keys.refused_accounts)
    pw = credential_fingerprint("erin", "app-pw")
    record_refused(client, keys, "erin", "GET …: HTTP 401", now=1000, credential=pw)
    read = client.hget(keys.refused_accounts, "erin")
    assert read is not None
    record_refused(client, keys, "erin", "SEARCH …: HTTP 401", now=1001, credential=pw)
    assert not clear_refused_if(client, keys, "erin", read)
    assert list(refused_accounts(client, keys)) == ["erin"]
    read = client.hget(keys.refused_accounts, "erin")
    assert read is not None
    record_deleted(client, keys, "erin", 3, now=1002)
    assert not clear_refused_if(client, keys, "erin", read)
    assert refused_accounts(client, keys)["erin"]["deleted"]["documents"] == 3
    read = client.hget(keys.refused_accounts, "erin")
    assert read is not None
    assert clear_refused_if(client, keys, "erin", read)
    assert refused_accounts(client, keys) == {}
    assert not clear_refused_if(client, keys, "erin", read)  # nothing left: nothing done


def test_a_deleted_users_note_outlives_the_refusals_after_it(redis_url: str) -> None:
    """A refused account whose Nextcloud user was deleted: its entry says so with the
    documents forgotten (``record_deleted``, ``ncindex status``). Each refused scan records
    its refusal again and asks again, and a later check finds nothing left (0 documents):
    the note must keep the first check's count. ``record_refused`` wrote a fresh entry, so
    after the next refusal (the hold ended) status said 0 documents forgotten."""
    client = redis.Redis.from_url(redis_url)
    keys = Names("test-deleted-note")
    client.delete(keys.refused_accounts)
    first, _ = REFUSED_RECHECK_SECONDS
    pw = credential_fingerprint("carol", "app-pw")
    record_refused(client, keys, "carol", "PROPFIND …: HTTP 401", now=1000, credential=pw)
    record_deleted(client, keys, "carol", 7, now=1001)
    record_refused(client, keys, "carol", "PROPFIND …: HTTP 401", now=1000 + first, credential=pw)
    record_deleted(client, keys, "carol", 0, now=1001 + first)
    entry = refused_accounts(client, keys)["carol"]
    assert entry["deleted"]["documents"] == 7
    assert entry["times"] == 2
    client.delete(keys.refused_accounts)
