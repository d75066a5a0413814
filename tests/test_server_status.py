"""Nextcloud's ``/status.php`` as ``ncindex status`` reports it (and ``ncindex doctor`` judges
it): the simulator up, in maintenance, gone, or none configured; each field of the answer; and
the accounts it refuses as the status shows them."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest
import redis
from click.testing import CliRunner

from allinone.cli import main
from ncindex.accounts import (
    REFUSED_RECHECK_SECONDS,
    credential_fingerprint,
    record_deleted,
    record_refused,
)
from ncindex.nextcloud.server_status import CHECK_URL, UNCONFIGURED, server_status
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator

#: What a 5xx answer says to do.
FAILS = "Nextcloud, or a proxy in front of it, fails: their logs say why"


def status_output(env: dict[str, str], *args: str) -> str:
    result = CliRunner().invoke(main, ["status", *args], env=env)
    assert result.exit_code == 0, result.output
    return result.output


def test_status_says_what_nextcloud_answers(redis_url: str) -> None:
    sim = NextcloudSimulator()
    with serve_simulator(sim) as server:
        env = {"NCINDEX_REDIS_URL": redis_url, "NCINDEX_NEXTCLOUD_URL": server.url}
        text = status_output(env)
        assert text.splitlines()[0] == f"nextcloud: Nextcloud {sim.version} at {server.url}"
        sim.maintenance = True
        text = status_output(env)
        assert text.splitlines()[0] == f"nextcloud: Nextcloud {sim.version} is in maintenance mode"
        data = json.loads(status_output(env, "--json"))["nextcloud"]
        assert data["maintenance"] is True and data["problem"] == data["summary"]
        watched = status_output(env, "--watch", "--interval", "0.1", "--iterations", "2")
        assert "is in maintenance mode" in watched
    sim.close()
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{free.getsockname()[1]}"
    text = status_output({"NCINDEX_REDIS_URL": redis_url, "NCINDEX_NEXTCLOUD_URL": gone})
    assert text.splitlines()[0].startswith(f"nextcloud: not reachable at {gone}: ")
    assert text.splitlines()[0].endswith(f" — {CHECK_URL}, and that Nextcloud runs there")
    # a URL missing the sub-path Nextcloud is served under: HTTP 404 of another site
    sim = NextcloudSimulator(web_root="/nextcloud")
    with serve_simulator(sim) as server:
        bare = server.url.removesuffix("/nextcloud")
        env = {"NCINDEX_REDIS_URL": redis_url, "NCINDEX_NEXTCLOUD_URL": bare}
        assert status_output(env).splitlines()[0] == (
            f"nextcloud: {bare}/status.php answered HTTP 404 without a JSON object (is it "
            f"Nextcloud?) — {CHECK_URL}"
        )
    sim.close()
    unset = {"NCINDEX_REDIS_URL": redis_url}  # `ncindex up` serves its simulator: no problem
    assert status_output(unset).splitlines()[0] == f"nextcloud: {UNCONFIGURED}"
    assert json.loads(status_output(unset, "--json"))["nextcloud"]["problem"] is None


@pytest.mark.parametrize(
    ("status", "body", "problem"),
    [
        (200, {"installed": True, "versionstring": "31.0.4", "version": "31.0.4.1"}, None),
        (200, {"installed": False}, "Nextcloud is not installed"),
        (200, {"installed": True, "needsDbUpgrade": True, "versionstring": "32.0.0"},
         "Nextcloud 32.0.0 waits for its upgrade to run (occ upgrade)"),
        (200, {"installed": True, "version": "30.0.1.2"}, None),  # no versionstring
        (503, {"installed": True},
         f"https://cloud.example/status.php answered HTTP 503: unavailable — {FAILS}"),
        # a proxy's error page in front of a Nextcloud that is down: not "is it Nextcloud?"
        (503, "<html><body>503 Service Unavailable</body></html>",
         f"https://cloud.example/status.php answered HTTP 503: unavailable — {FAILS}"),
        (502, "Bad Gateway",
         f"https://cloud.example/status.php answered HTTP 502: unavailable — {FAILS}"),
        (400, {"error": "Trusted domain error.", "code": 15},  # lib/base.php OC::init
         "Nextcloud at https://cloud.example does not trust the host 'cloud.example': add it "
         "to trusted_domains in its config.php"),
        (200, "[" * 100_000 + "]" * 100_000,  # past the JSON parser's nesting depth
         "https://cloud.example/status.php answered HTTP 200 without a JSON object (is it "
         f"Nextcloud?) — {CHECK_URL}"),
        (200, ["not", "an", "object"],
         "https://cloud.example/status.php answered HTTP 200 without a JSON object (is it "
         f"Nextcloud?) — {CHECK_URL}"),
    ],
)  # fmt: skip
def test_each_answer_of_status_php(status: int, body: object, problem: str | None) -> None:
    """nextcloud/server ``status.php``: ``installed``, ``maintenance``, ``needsDbUpgrade``,
    ``version``, ``versionstring`` (what people see), ``edition``, ``productname``."""
    url = "https://cloud.example"
    answer = httpx.MockTransport(
        lambda request: (
            httpx.Response(status, text=body)
            if isinstance(body, str)
            else httpx.Response(status, json=body)
        )
    )
    with httpx.Client(base_url=url, transport=answer) as http:
        found = server_status(http, url)
    assert found.problem == problem
    if problem is None:
        version = body["versionstring"] if "versionstring" in body else body["version"]  # type: ignore[index,operator]
        assert found.summary() == f"Nextcloud {version} at {url}"
    not_json = httpx.MockTransport(lambda request: httpx.Response(200, text="<html>"))
    with httpx.Client(base_url=url, transport=not_json) as http:
        assert server_status(http, url).problem == (
            f"{url}/status.php answered HTTP 200 without a JSON object (is it Nextcloud?) — "
            f"{CHECK_URL}"
        )


def test_a_refused_account_is_shown_with_its_age_and_the_settings_to_fix(redis_url: str) -> None:
    """It said "since 1796574747" (Unix seconds) and named only NCINDEX_LOGINS."""
    settings = Settings(redis_url=redis_url, namespace="status-refused")
    with redis.Redis.from_url(redis_url) as client:
        client.delete(settings.names.refused_accounts)
        where = "SEARCH /remote.php/dav/: HTTP 401"
        record_refused(client, settings.names, "alice", where, now=time.time() - 3 * 3600)
        try:
            env = {"NCINDEX_REDIS_URL": redis_url, "NCINDEX_NAMESPACE": "status-refused"}
            lines = status_output(env).splitlines()
        finally:
            client.delete(settings.names.refused_accounts)
    assert "accounts Nextcloud refuses (401): 1" in lines
    assert (
        f"  alice: since 3 h 00 min ago, {where} — check its app password (NCINDEX_ACCOUNTS or "
        "NCINDEX_ACCOUNTS_FILE) and its login name (NCINDEX_LOGINS)"
    ) in lines


def test_a_held_account_says_until_when_and_how_to_end_the_hold(redis_url: str) -> None:
    """An account whose refused credential ncindex holds back (``ncindex.accounts.hold_of``)
    was shown as any refusal: nothing said that its scans and tasks end at once until the
    hold ends, nor when, nor that ``ncindex release`` ends it. The JSON has ``held_until``."""
    settings = Settings(redis_url=redis_url, namespace="status-held")
    at = int(time.time()) - 600
    until = at + REFUSED_RECHECK_SECONDS[0]
    with redis.Redis.from_url(redis_url) as client:
        client.delete(settings.names.refused_accounts)
        where = "SEARCH /remote.php/dav/: HTTP 401"
        fingerprint = credential_fingerprint("alice", "alice-pw")
        record_refused(client, settings.names, "alice", where, now=at, credential=fingerprint)
        try:
            env = {"NCINDEX_REDIS_URL": redis_url, "NCINDEX_NAMESPACE": "status-held"}
            lines = status_output(env).splitlines()
            data = json.loads(status_output(env, "--json"))["accounts_refused"]
        finally:
            client.delete(settings.names.refused_accounts)
    gmt = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(until))
    line = next(x for x in lines if x.startswith("  alice: since 10 min"))
    assert f", {where} — check its app password" in line, line
    assert f"; held back until {gmt} (in 19 min" in line or f"until {gmt} (in 20 min" in line
    assert line.endswith(
        "not sent before then, unless `ncindex release alice` finds that it works again"
    ), line
    assert data["alice"]["held_until"] == until


def test_an_account_given_a_new_app_password_is_not_shown_held(redis_url: str) -> None:
    """The hold is of the credential refused (``ncindex.accounts.hold_of``): an account whose
    configured app password is another one now is tried at once, yet status said "held back
    until …" for it all the same. Now only an account still configured with the refused
    credential is shown held, and one given a new app password is not told to check it."""
    settings = Settings(redis_url=redis_url, namespace="status-new-password")
    at = int(time.time()) - 600
    where = "SEARCH /remote.php/dav/: HTTP 401"
    with redis.Redis.from_url(redis_url) as client:
        client.delete(settings.names.refused_accounts)
        for user in ("alice", "bob"):
            refused = credential_fingerprint(user, f"{user}-old-pw")
            record_refused(client, settings.names, user, where, now=at, credential=refused)
        try:
            env = {
                "NCINDEX_REDIS_URL": redis_url,
                "NCINDEX_NAMESPACE": "status-new-password",
                "NCINDEX_ACCOUNTS": json.dumps({"alice": "alice-new-pw", "bob": "bob-old-pw"}),
            }
            lines = status_output(env).splitlines()
            data = json.loads(status_output(env, "--json"))["accounts_refused"]
        finally:
            client.delete(settings.names.refused_accounts)
    alice = next(x for x in lines if x.startswith("  alice: since 10 min"))
    bob = next(x for x in lines if x.startswith("  bob: since 10 min"))
    assert "held back" not in alice, alice
    assert "; held back until " in bob, bob
    assert data["alice"]["held_until"] is None
    assert data["bob"]["held_until"] == at + REFUSED_RECHECK_SECONDS[0]
    # alice's line told the admin who had just fixed her password to "check its app
    # password": it now says the refusal is of the old one and that the processes started
    # before the change still send it (settings are read at start)
    assert "check its app password" not in alice, alice
    assert "of the app password it had before" in alice and "restart those started" in alice
    assert "check its app password" in bob, bob
    assert data["alice"]["replaced"] is True and data["bob"]["replaced"] is False


def test_a_refused_account_whose_user_was_deleted_says_so(redis_url: str) -> None:
    """A refused account Nextcloud says no longer exists (OCS 404 "User does not exist") and
    whose documents were forgotten is shown as such, not as an app password to fix."""
    settings = Settings(redis_url=redis_url, namespace="status-deleted")
    with redis.Redis.from_url(redis_url) as client:
        client.delete(settings.names.refused_accounts)
        where = "PROPFIND /remote.php/dav/files/carol/: HTTP 401"
        record_refused(client, settings.names, "carol", where, now=time.time() - 3600)
        record_deleted(client, settings.names, "carol", 3)
        try:
            env = {"NCINDEX_REDIS_URL": redis_url, "NCINDEX_NAMESPACE": "status-deleted"}
            configured = env | {"NCINDEX_ACCOUNTS": json.dumps({"carol": "carol-pw"})}
            lines = status_output(configured).splitlines()
            # the admin did as told: the line said to remove the account all the same
            removed = status_output(env | {"NCINDEX_ACCOUNTS": "{}"}).splitlines()
        finally:
            client.delete(settings.names.refused_accounts)
    said = "  carol: since 1 h 00 min ago; Nextcloud says the user does not exist — 3 documents "
    assert said + "forgotten; remove the account from NCINDEX_ACCOUNTS" in lines
    assert said + "forgotten; no longer configured: nothing left to do" in removed


def test_a_refused_account_nextcloud_once_said_is_deleted_says_so(redis_url: str) -> None:
    """A deleted user's account, refused, whose deletion a scan heard once and waits to hear
    again 30 minutes later (``ncindex.sync.deleted.check_deleted``): status told the admin to
    "check its app password" for that half hour and more. It now says Nextcloud said the user
    does not exist, when the index forgets them, and ``ncindex forget``."""
    settings = Settings(redis_url=redis_url, namespace="status-missing")
    heard = time.time() - 120
    with redis.Redis.from_url(redis_url) as client:
        client.delete(settings.names.refused_accounts)
        where = "PROPFIND /remote.php/dav/files/dave/: HTTP 401"
        for user in ("dave", "erin"):
            record_refused(client, settings.names, user, where, now=heard)
        client.set(settings.names.missing_user("dave"), heard)
        try:
            env = {"NCINDEX_REDIS_URL": redis_url, "NCINDEX_NAMESPACE": "status-missing"}
            lines = status_output(env).splitlines()
            data = json.loads(status_output(env, "--json"))["accounts_refused"]
        finally:
            client.delete(settings.names.refused_accounts, settings.names.missing_user("dave"))
    dave = next(x for x in lines if x.startswith("  dave: "))
    erin = next(x for x in lines if x.startswith("  erin: "))
    gmt = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(heard + 1800))
    assert "that the user does not exist (deleted)" in dave and "check its app" not in dave
    assert f"hears it again from {gmt}" in dave and "`ncindex forget dave` does it now" in dave
    assert "check its app password" in erin
    assert data["dave"]["missing_since"] == heard and data["erin"]["missing_since"] is None
