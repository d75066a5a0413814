"""``ncindex doctor`` against the simulator: a healthy Nextcloud, then each fault it names."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import redis as redis_lib
import structlog
from click.testing import CliRunner
from pydantic import SecretStr

from allinone.cli import main
from ncindex.accounts import (
    REFUSED_RECHECK_SECONDS,
    clear_refused,
    credential_fingerprint,
    record_refused,
)
from ncindex.doctor import (
    CHECKS,
    Context,
    Line,
    check_model,
    check_public_url,
    failed,
    render,
    run_checks,
)
from ncindex.embedding.analyzer import ANALYZER_VERSION, LACKING
from ncindex.errors import AccountHeld, NextcloudAuthError
from ncindex.index.reindex import sample_analyzers
from ncindex.ingest.events import NODE_NS, REQUIRED, TAG_ASSIGNED
from ncindex.ingest.registration import register
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, SimulatorServer, serve_simulator
from ncindex.store import PointRecord, SparseVector, VectorStore, open_store
from ncindex.store.schema import model_slug

PUBLIC = "http://8.8.8.8:8080"  # a public address literal: nothing is sent to it


def make_sim(**kwargs: object) -> NextcloudSimulator:
    sim = NextcloudSimulator(**kwargs)  # type: ignore[arg-type]
    sim.add_user("admin", "admin-pw", "Admin", admin=True)
    sim.add_user("alice", "alice-pw", "Alice")
    return sim


#: The session's Redis (:func:`use_the_session_redis`): doctor checks that Redis answers; and
#: a data folder of the test's own, where doctor reads the embedded store's model pointers.
REDIS = {"url": "", "data_dir": ""}


@pytest.fixture(autouse=True)
def use_the_session_redis(redis_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    REDIS["url"] = redis_url
    REDIS["data_dir"] = str(tmp_path)
    monkeypatch.setenv("NCINDEX_REDIS_URL", redis_url)  # for the command's own settings


def settings_for(server: SimulatorServer, **update: object) -> Settings:
    base = {
        "redis_url": REDIS["url"],
        "data_dir": REDIS["data_dir"],
        "nextcloud_url": server.url,
        "accounts": {"admin": SecretStr("admin-pw"), "alice": SecretStr("alice-pw")},
        "admin_user": "admin",
        "webhook_secret": SecretStr("s3cret-s3cret-s3cret"),
        "public_url": PUBLIC,
    }
    return Settings(**(base | update))


def checks_on(version: str) -> list[Line]:
    """Every line of doctor's checks against a simulated Nextcloud ``version``."""
    sim = make_sim(version=version)
    try:
        with serve_simulator(sim) as server:
            return run_checks(settings_for(server))
    finally:
        sim.close()


@pytest.fixture
def served() -> Iterator[tuple[NextcloudSimulator, SimulatorServer]]:
    sim = make_sim()
    with serve_simulator(sim) as server:
        yield sim, server
    sim.close()


def verdicts(lines: list[Line], check: str) -> list[str]:
    return [line.verdict for line in lines if line.check == check]


def detail(lines: list[Line], check: str) -> str:
    return " | ".join(line.detail for line in lines if line.check == check)


def registered(server: SimulatorServer, settings: Settings) -> None:
    from ncindex.runtime import Services

    services = Services(settings)
    try:
        register(services.account("admin"), settings)
    finally:
        services.close()


def also_registered(server: SimulatorServer, settings: Settings, *classes: str) -> None:
    """Registrations of ``classes`` beside those of :func:`registered`, made as ``settings``
    make them (a second run, an earlier ncindex)."""
    from ncindex.ingest.registration import registration
    from ncindex.runtime import Services

    services = Services(settings)
    try:
        admin = services.account("admin")
        for event_class in classes:
            admin.create_webhook(registration(settings, event_class))
    finally:
        services.close()


def test_a_healthy_nextcloud_has_no_failing_line(served) -> None:
    _, server = served
    settings = settings_for(server)
    registered(server, settings)
    lines = run_checks(settings)
    assert not failed(lines), render(lines)
    assert verdicts(lines, "server") == ["ok"] and "Nextcloud 33.0.2" in detail(lines, "server")
    assert detail(lines, "app notes") == "Notes 6.0.2"
    assert "Deck 1.17.4" in detail(lines, "app deck") and "1.18" in detail(lines, "app deck")
    assert verdicts(lines, "app webhook_listeners") == ["ok"]
    assert verdicts(lines, "account alice") == ["ok"]
    assert verdicts(lines, "webhooks") == ["ok"]
    assert verdicts(lines, "public url") == ["ok"]
    assert verdicts(lines, "deliveries") == ["note"]
    assert "occ background-job:worker" in detail(lines, "deliveries")
    assert verdicts(lines, "ocr") == ["ok"] and detail(lines, "ocr") == "tesseract with eng"
    table = render(lines).splitlines()
    assert table[0].split() == ["check", "verdict", "detail"]
    assert len(table) == len(lines) + 1


def test_unreachable_nextcloud_fails_and_skips_the_rest() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = Settings(
        nextcloud_url=f"http://127.0.0.1:{port}",
        accounts={"alice": SecretStr("pw")},
        webhook_secret=SecretStr("s"),
        public_url=PUBLIC,
        redis_url=f"redis://127.0.0.1:{port}/0",  # nothing listens there either
    )
    lines = run_checks(settings)
    assert verdicts(lines, "server") == ["fail"] and "not reachable" in detail(lines, "server")
    assert verdicts(lines, "redis") == ["fail"]
    assert "is Redis running there? Check NCINDEX_REDIS_URL" in detail(lines, "redis")
    assert verdicts(lines, "accounts") == ["fail"] and "skipped" in detail(lines, "accounts")
    assert failed(lines)


def test_without_an_account_every_skipped_check_says_so(served) -> None:
    """With no account configured the webhooks line said "skipped: webhook_listeners not
    available" and the apps line "no reachable Nextcloud or no account"; each now names the
    missing account and where to configure one."""
    _, server = served
    lines = run_checks(settings_for(server, accounts={}, admin_user=None))
    assert verdicts(lines, "server") == ["ok"]
    said = "(NCINDEX_ACCOUNTS or NCINDEX_ACCOUNTS_FILE)"
    assert detail(lines, "apps") == f"skipped: no account configured {said}"
    assert detail(lines, "accounts") == f"none configured {said}"
    assert detail(lines, "webhooks") == f"skipped: no account configured {said}"
    assert "webhook_listeners" not in render(lines)


def test_an_unreachable_nextcloud_without_accounts_names_both() -> None:
    """The accounts line said "skipped: Nextcloud not reachable", hiding that none was set."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = Settings(
        nextcloud_url=f"http://127.0.0.1:{port}",
        accounts={},
        webhook_secret=SecretStr("s"),
        public_url=PUBLIC,
        redis_url=REDIS["url"],
    )
    lines = run_checks(settings)
    assert detail(lines, "apps") == "skipped: Nextcloud not reachable"
    assert detail(lines, "accounts").startswith("none configured")
    assert detail(lines, "webhooks") == "skipped: Nextcloud not reachable"


@pytest.mark.parametrize(
    ("version", "verdict", "text"),
    [("29.0.9", "fail", "webhooks need Nextcloud 30"), ("34.0.1", "warn", "newer than")],
)
def test_unsupported_versions(version: str, verdict: str, text: str) -> None:
    lines = checks_on(version)
    assert verdicts(lines, "server") == [verdict] and text in detail(lines, "server")


def test_maintenance_mode_fails(served) -> None:
    sim, server = served
    sim.maintenance = True
    lines = run_checks(settings_for(server))
    assert verdicts(lines, "server") == ["fail"] and "maintenance" in detail(lines, "server")


def test_disabled_apps(served) -> None:
    sim, server = served
    for app in ("webhook_listeners", "notes", "deck", "news"):
        sim.disable_app(app)
    lines = run_checks(settings_for(server))
    assert verdicts(lines, "app webhook_listeners") == ["fail"]
    assert "occ app:enable webhook_listeners" in detail(lines, "app webhook_listeners")
    assert verdicts(lines, "app notes") == ["warn"]
    assert verdicts(lines, "app deck") == ["warn"]
    assert verdicts(lines, "app news") == ["warn"]
    assert verdicts(lines, "webhooks") == ["fail"]  # skipped: nothing to list
    assert failed(lines)


def test_a_wrong_app_password_fails_that_account(served) -> None:
    _, server = served
    settings = settings_for(
        server, accounts={"admin": SecretStr("admin-pw"), "alice": SecretStr("wrong")}
    )
    lines = run_checks(settings)
    assert verdicts(lines, "account admin") == ["ok"]
    assert verdicts(lines, "account alice") == ["fail"]
    assert "refused (401)" in detail(lines, "account alice")


def test_a_refused_account_says_whether_its_user_was_deleted(served) -> None:
    """An account refused (401) because its Nextcloud user was deleted got the same line as a
    mistyped app password ("wrong or revoked … set it in NCINDEX_LOGINS"), sending the admin
    to make a new password for a user that no longer exists. doctor now asks Nextcloud as
    the webhook admin (``GET /ocs/v2.php/cloud/users/{uid}``): a deleted user is named so,
    with ``ncindex forget``; a revoked password of a user that exists says the user exists."""
    sim, server = served
    sim.add_user("carol", "carol-pw", "Carol")
    sim.add_user("dave", "dave-pw", "Dave")
    settings = settings_for(
        server,
        accounts={
            "admin": SecretStr("admin-pw"),
            "alice": SecretStr("alice-pw"),
            "carol": SecretStr("revoked-pw"),
            "dave": SecretStr("dave-pw"),
        },
    )
    sim.delete_user("dave")
    lines = run_checks(settings)
    assert verdicts(lines, "account carol") == ["fail"]
    assert verdicts(lines, "account dave") == ["fail"]
    carol, dave = detail(lines, "account carol"), detail(lines, "account dave")
    assert "the user exists and is enabled" in carol and "does not exist" not in carol
    assert "Nextcloud says user 'dave' does not exist (deleted)" in dave
    assert "`ncindex forget dave`" in dave and "NCINDEX_LOGINS" not in dave


def test_a_refused_account_says_why_as_nextcloud_s_admin_tells(served) -> None:
    """A refused account was told to check its app password, its login name or whether it was
    disabled, all at once; disabled is the commonest cause and needs the user enabled, not a
    new password. Nextcloud's admin sees ``enabled`` in ``GET /ocs/v2.php/cloud/users/{uid}``
    (nextcloud/server ``AUserDataOCSController::getUserData``). doctor now says which: alice
    disabled, carol's app password revoked, dave deleted. The first refusal of each, recorded by
    a task, asks that once (not again for the refusals of requests already in flight) and
    ``ncindex status`` (text and JSON), doctor's held line and the ``account_refused`` warning
    say it; that lookup forgets no deleted user (only two scans' checks do)."""
    sim, server = served
    sim.add_user("carol", "carol-pw", "Carol")
    sim.add_user("dave", "dave-pw", "Dave")
    namespace = f"why-{uuid.uuid4().hex[:8]}"
    passwords = {"admin": "admin-pw", "alice": "alice-pw", "carol": "carol-pw", "dave": "dave-pw"}
    settings = settings_for(
        server,
        namespace=namespace,
        accounts={user: SecretStr(pw) for user, pw in passwords.items()},
    )
    sim.disable_user("alice")
    sim.tree.users["carol"].passwords.clear()  # her app password revoked
    sim.tree.users["carol"].token_logins.clear()
    sim.delete_user("dave")
    checked = run_checks(settings)
    alice, carol = detail(checked, "account alice"), detail(checked, "account carol")
    assert "disabled in Nextcloud (enable the user, then `ncindex release alice`" in alice
    assert "app password refused (revoked or changed: set a new one" in carol
    assert "disabled" not in carol and "does not exist (deleted)" in detail(checked, "account dave")
    services = Services(settings)
    sim.request_log.clear()
    try:
        with structlog.testing.capture_logs() as logs:
            for user in ("alice", "carol", "dave"):
                with pytest.raises(NextcloudAuthError) as refused:
                    services.account(user).current_user()
                for _ in range(3):  # tasks in flight at once, refused one after another
                    services.account_refused(user, refused.value)
        asked = [p for _, p, _ in sim.request_log if p.startswith("/ocs/v2.php/cloud/users/")]
        assert asked == [f"/ocs/v2.php/cloud/users/{u}" for u in ("alice", "carol", "dave")]
        said = {e["user"]: e.get("cause", "") for e in logs if e["event"] == "account_refused"}
        assert said["alice"].startswith("disabled in Nextcloud (enable the user")
        assert said["carol"].startswith("app password refused (revoked or changed")
        assert said["dave"].startswith("deleted in Nextcloud")
        keys = settings.names
        assert services.redis.get(keys.missing_user("dave")) is None  # nothing forgotten
        assert "deleted" not in json.loads(services.redis.hget(keys.refused_accounts, "dave"))
        env = {
            "NCINDEX_REDIS_URL": REDIS["url"],
            "NCINDEX_NAMESPACE": namespace,
            "NCINDEX_ACCOUNTS": json.dumps(passwords),
        }
        text = CliRunner().invoke(main, ["status"], env=env)
        data = json.loads(CliRunner().invoke(main, ["status", "--json"], env=env).output)
        held = run_checks(settings)
    finally:
        services.redis.delete(settings.names.refused_accounts)
        for user in ("alice", "carol", "dave"):
            services.redis.delete(settings.names.refusal_asked(user))
        services.close()
    lines = {line.split(":")[0].strip(): line for line in text.output.splitlines()}
    assert "— disabled in Nextcloud (enable the user, then `ncindex release" in lines["alice"]
    assert "— app password refused (revoked or changed" in lines["carol"]
    assert (
        "— deleted in Nextcloud, as far as its admin was told (the user does not exist"
        in lines["dave"]
    )
    refused = data["accounts_refused"]
    assert [refused[u]["cause"] for u in ("alice", "carol", "dave")] == [
        "disabled",
        "refused",
        "deleted",
    ]
    assert "; disabled in Nextcloud (enable the user" in detail(held, "account alice")
    assert detail(held, "account alice").startswith("held back since ")


@pytest.fixture
def alice_disabled(served) -> Iterator[tuple[NextcloudSimulator, Services, NextcloudAuthError]]:
    """alice disabled in the simulator and a task's request of hers refused (not recorded):
    the simulator, the Services of a namespace of its own (its refusal keys deleted after)
    and the refusal."""
    sim, server = served
    settings = settings_for(server, namespace=f"again-{uuid.uuid4().hex[:8]}")
    services = Services(settings)
    keys = settings.names
    try:
        sim.disable_user("alice")
        with pytest.raises(NextcloudAuthError) as refused:
            services.account("alice").current_user()
        yield sim, services, refused.value
    finally:
        services.redis.delete(keys.refused_accounts, keys.refusal_asked("alice"))
        services.close()


@pytest.fixture
def alice_enabled_again(alice_disabled) -> tuple[NextcloudSimulator, Services]:
    """alice's refusal (:func:`alice_disabled`) recorded, the webhook admin asked why
    (``disabled``), then alice enabled again (``occ user:enable``)."""
    sim, services, refused = alice_disabled
    services.account_refused("alice", refused)
    entry = services.redis.hget(services.settings.names.refused_accounts, "alice")
    assert json.loads(entry)["cause"] == "disabled"
    sim.disable_user("alice", enabled=True)
    return sim, services


def revoke_alice(sim: NextcloudSimulator) -> None:
    """alice's app password revoked in the simulator."""
    sim.tree.users["alice"].passwords.clear()
    sim.tree.users["alice"].token_logins.clear()


def test_release_refused_again_asks_why_again(alice_enabled_again) -> None:
    """``ncindex release`` sends the credential now, whatever the hold, after the operator
    fixed what the refusal's cause said: alice was disabled; she is enabled again but her app
    password was revoked meanwhile, and release is refused. That refusal was of a request sent
    now, not one in flight before the hold: the webhook admin is asked again, and status no
    longer says "disabled in Nextcloud (enable the user…)" of an enabled user (it kept the
    first refusal's cause: its hold, and the claim of that first lookup, skipped the
    lookup)."""
    sim, services = alice_enabled_again
    revoke_alice(sim)  # and her app password revoked meanwhile
    with pytest.raises(NextcloudAuthError):
        services.release("alice")
    refused = services.redis.hget(services.settings.names.refused_accounts, "alice")
    assert json.loads(refused)["cause"] == "refused", refused


def test_a_refusal_after_the_credential_was_accepted_again_is_asked_why(
    alice_enabled_again,
) -> None:
    """The claim that a refusal of a credential was asked about (``Names.refusal_asked``,
    30 minutes) outlived the refusal: alice, disabled, refused and asked about, is enabled
    and released (Nextcloud accepts her app password: the entry is forgotten); her app
    password is then revoked, and that new refusal within the 30 minutes was not asked about
    (the claim held the same credential), so status named no cause. An accepted credential
    now forgets the claim with the entry."""
    sim, services = alice_enabled_again
    assert services.release("alice").released
    revoke_alice(sim)
    with pytest.raises(NextcloudAuthError) as refused:
        services.account("alice").current_user()
    services.account_refused("alice", refused.value)
    entry = services.redis.hget(services.settings.names.refused_accounts, "alice")
    assert json.loads(entry).get("cause") == "refused", entry


def test_a_refusal_s_cause_unknown_in_maintenance_or_with_the_admin_held_is_asked_later(
    alice_disabled,
) -> None:
    """Guard (passes before this branch too): the lookup of a refusal's cause when Nextcloud is
    in maintenance (503) sends one request, records the refusal without a cause and neither
    holds nor refuses the webhook admin; with the admin held back it sends nothing. Once the
    hold and the claim have passed (here: moved back, deleted), the next refusal is asked
    about and gets its cause."""
    sim, services, refused = alice_disabled
    keys = services.settings.names
    sim.maintenance = True
    sim.request_log.clear()
    services.account_refused("alice", refused)
    assert [p for _, p, _ in sim.request_log] == ["/ocs/v2.php/cloud/users/alice"]
    assert "cause" not in json.loads(services.redis.hget(keys.refused_accounts, "alice"))
    assert services.redis.hget(keys.refused_accounts, "admin") is None
    sim.maintenance = False
    entry = json.loads(services.redis.hget(keys.refused_accounts, "alice"))
    entry["at"] -= REFUSED_RECHECK_SECONDS[0] + 1  # the hold has ended
    services.redis.hset(keys.refused_accounts, "alice", json.dumps(entry))
    services.redis.delete(keys.refusal_asked("alice"))  # and the claim expired
    record_refused(services.redis, keys, "admin", "x", credential=services.credential_of("admin"))
    sim.request_log.clear()
    services.account_refused("alice", refused)  # the admin held: nothing sent
    assert not sim.request_log
    clear_refused(services.redis, keys, "admin")
    entry = json.loads(services.redis.hget(keys.refused_accounts, "alice"))
    entry["at"] -= 8 * REFUSED_RECHECK_SECONDS[0]  # its (longer) hold has ended too
    services.redis.hset(keys.refused_accounts, "alice", json.dumps(entry))
    services.redis.delete(keys.refusal_asked("alice"))
    services.account_refused("alice", refused)
    assert json.loads(services.redis.hget(keys.refused_accounts, "alice"))["cause"] == "disabled"


def test_a_cause_told_before_is_not_kept_when_the_next_lookup_gets_no_answer(
    alice_enabled_again,
) -> None:
    """alice was disabled, refused and asked about (``disabled``); she is enabled again and
    her app password revoked (its credential unchanged in ncindex). Her next refusal, once
    the hold and the claim have passed, is asked about while Nextcloud is in maintenance
    (503): no answer, and the entry kept "disabled" from the refusal before, so status told
    the operator to enable a user who is enabled. A lookup that gets no answer now leaves
    the entry without a cause (status: none recorded); one not made (a refusal of a request
    sent before the hold began, or another process asked) still keeps it."""
    sim, services = alice_enabled_again
    keys = services.settings.names
    revoke_alice(sim)
    entry = json.loads(services.redis.hget(keys.refused_accounts, "alice"))
    entry["at"] -= REFUSED_RECHECK_SECONDS[0] + 1  # the hold has ended
    services.redis.hset(keys.refused_accounts, "alice", json.dumps(entry))
    services.redis.delete(keys.refusal_asked("alice"))  # and the claim expired
    with pytest.raises(NextcloudAuthError) as refused:
        services.account("alice").current_user()
    sim.maintenance = True
    sim.request_log.clear()
    services.account_refused("alice", refused.value)
    assert [p for _, p, _ in sim.request_log] == ["/ocs/v2.php/cloud/users/alice"]
    assert "cause" not in json.loads(services.redis.hget(keys.refused_accounts, "alice"))
    sim.maintenance = False
    record_refused(services.redis, keys, "alice", "refused again", credential=entry["credential"])
    services.redis.hset(
        keys.refused_accounts,
        "alice",
        json.dumps(
            {**json.loads(services.redis.hget(keys.refused_accounts, "alice")), "cause": "refused"}
        ),
    )
    sim.request_log.clear()
    services.account_refused("alice", refused.value)  # held: not asked, the cause kept
    assert not sim.request_log
    assert json.loads(services.redis.hget(keys.refused_accounts, "alice"))["cause"] == "refused"


def test_refusal_entries_of_the_version_before_causes_have_cause_null(served) -> None:
    """A Redis written before refusals said why holds entries without ``cause`` (and one
    written by a later version may hold a cause this one does not know). ``ncindex status``,
    its ``--json`` and doctor read them; ``--json`` gave ``cause`` only where one was recorded,
    so a reader of ``accounts_refused[user]["cause"]`` failed on the old entries, and passed
    an unknown value on. Every entry now has ``cause``: a :class:`~ncindex.accounts.Cause`
    value or ``null``, as ``held_until`` is always there."""
    sim, server = served
    sim.add_user("carol", "carol-pw", "Carol")
    namespace = f"old-{uuid.uuid4().hex[:8]}"
    passwords = {"admin": "admin-pw", "alice": "alice-pw", "carol": "carol-pw"}
    settings = settings_for(
        server,
        namespace=namespace,
        accounts={user: SecretStr(pw) for user, pw in passwords.items()},
    )
    services = Services(settings)
    keys = settings.names
    at = int(time.time())
    try:
        for user, extra in (("alice", {}), ("carol", {"cause": "suspended"})):
            entry = {"at": at, "where": "GET /ocs/v2.php/cloud/user: HTTP 401"}
            entry |= {"credential": services.credential_of(user), "times": 1} | extra
            services.redis.hset(keys.refused_accounts, user, json.dumps(entry))
        env = {
            "NCINDEX_REDIS_URL": REDIS["url"],
            "NCINDEX_NAMESPACE": namespace,
            "NCINDEX_ACCOUNTS": json.dumps(passwords),
        }
        text = CliRunner().invoke(main, ["status"], env=env)
        raw = CliRunner().invoke(main, ["status", "--json"], env=env)
        held = run_checks(settings)
    finally:
        services.redis.delete(keys.refused_accounts)
        services.close()
    assert text.exit_code == 0 and raw.exit_code == 0, text.output + raw.output
    refused = json.loads(raw.output)["accounts_refused"]
    assert [refused[user]["cause"] for user in ("alice", "carol")] == [None, None]
    assert "check its app password" in text.output
    assert detail(held, "account alice").startswith("held back since ")


def test_a_held_account_says_since_until_when_and_why(served) -> None:
    """doctor's account line for an account whose credential ncindex holds back after a
    refusal (``ncindex.runtime.Services.account`` raises ``AccountHeld``, nothing sent) said
    only "not checked: … not sent again before …": not since when, nor the refusal, nor how to
    end the hold — an operator who had fixed the cause in Nextcloud could only wait up to six
    hours. It now says since and until when (UTC), the refusal recorded, and names ``ncindex
    release``; it never says "refused (401)", which sent operators to replace a good password."""
    _, server = served
    settings = settings_for(server)
    services = Services(settings)
    try:
        credential = services.credential_of("alice")
        at = int(time.time()) - 60
        where = "PROPFIND /remote.php/dav/files/alice/: HTTP 401"
        record_refused(services.redis, settings.names, "alice", where, at, credential=credential)
        lines = run_checks(settings)
        assert verdicts(lines, "account alice") == ["fail"]
        said = detail(lines, "account alice")
        since, until = (
            time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))
            for t in (at, at + REFUSED_RECHECK_SECONDS[0])
        )
        assert said.startswith(f"held back since {since} until {until}: "), said
        assert f"Nextcloud refused its app password ({where})" in said
        assert "`ncindex release alice` checks it now and ends the hold" in said
        assert "refused (401)" not in said and "wrong or revoked" not in said
    finally:
        clear_refused(services.redis, settings.names, "alice")
        services.close()


def test_release_ends_a_hold_once_nextcloud_accepts_the_credential_again(served) -> None:
    """An account disabled in Nextcloud (``occ user:disable``) is refused and held back; an
    admin enables it again, and its scans and tasks kept ending at once for up to six hours
    (30 minutes doubling per refusal), with no command to end the hold of an account that is
    not the webhook admin (``up`` and ``webhooks`` send the admin's whatever the hold). ``ncindex
    release`` asks Nextcloud once, whatever the hold: refused, it records the refusal and
    exits 1, the hold kept; accepted, the refusal is forgotten and doctor checks it again."""
    sim, server = served
    settings = settings_for(server)
    env = {
        "NCINDEX_NEXTCLOUD_URL": server.url,
        "NCINDEX_ACCOUNTS": json.dumps({"admin": "admin-pw", "alice": "alice-pw"}),
        "NCINDEX_ADMIN_USER": "admin",
        "NCINDEX_REDIS_URL": REDIS["url"],
    }
    services = Services(settings)
    try:
        sim.disable_user("alice")
        with pytest.raises(NextcloudAuthError) as refused:
            services.account("alice").current_user()  # a task's request, refused
        services.account_refused("alice", refused.value)
        with pytest.raises(AccountHeld):
            services.account("alice").current_user()  # the next one: held, not sent
        still = CliRunner().invoke(main, ["release", "alice"], env=env)
        assert still.exit_code == 1, still.output
        assert "alice: Nextcloud refused its app password again" in still.output
        with pytest.raises(AccountHeld):  # the refusal recorded: still held
            services.account("alice").current_user()
        sim.disable_user("alice", enabled=True)  # occ user:enable
        assert verdicts(run_checks(settings), "account alice") == ["fail"]  # held: not asked
        released = CliRunner().invoke(main, ["release", "alice"], env=env)
        assert released.exit_code == 0, released.output
        assert released.output.startswith(
            "alice: Nextcloud accepts its app password (login 'alice'); released the hold "
            "that would have lasted until "
        ), released.output
        assert services.redis.hget(settings.names.refused_accounts, "alice") is None
        assert services.account("alice").current_user() == "alice"  # sent again
        assert verdicts(run_checks(settings), "account alice") == ["ok"]
        again = CliRunner().invoke(main, ["release", "alice", "--json"], env=env)
        assert again.exit_code == 0, again.output
        assert json.loads(again.output) == {
            "user": "alice",
            "user_id": "alice",
            "refusal": None,
            "held_until": None,
            "released": False,
        }
        unknown = CliRunner().invoke(main, ["release", "mallory"], env=env)
        assert unknown.exit_code == 2 and "not a configured account" in unknown.output
    finally:
        clear_refused(services.redis, settings.names, "alice")
        services.close()


def test_release_after_a_new_app_password_releases_no_hold(served) -> None:
    """A refusal of alice's old app password, and the operator configured a new one: that
    credential is tried at once (``Services.account`` holds only the refused one), yet
    ``ncindex release`` said it "released the hold that would have lasted until …". It now
    says the refusal is forgotten, and its JSON has no ``held_until``."""
    _, server = served
    settings = settings_for(server)
    env = {
        "NCINDEX_NEXTCLOUD_URL": server.url,
        "NCINDEX_ACCOUNTS": json.dumps({"admin": "admin-pw", "alice": "alice-pw"}),
        "NCINDEX_ADMIN_USER": "admin",
        "NCINDEX_REDIS_URL": REDIS["url"],
    }
    services = Services(settings)
    where = "PROPFIND /remote.php/dav/files/alice/: HTTP 401"
    old = credential_fingerprint("alice", "alice-old-pw")
    try:
        for flag in ([], ["--json"]):
            record_refused(services.redis, settings.names, "alice", where, credential=old)
            released = CliRunner().invoke(main, ["release", "alice", *flag], env=env)
            assert released.exit_code == 0, released.output
            if flag:
                assert json.loads(released.output)["held_until"] is None
            else:
                assert released.output == (
                    "alice: Nextcloud accepts its app password (login 'alice'); its refusal "
                    f"({where}) is forgotten\n"
                )
            assert services.redis.hget(settings.names.refused_accounts, "alice") is None
    finally:
        clear_refused(services.redis, settings.names, "alice")
        services.close()


def test_a_login_name_that_differs_from_the_user_id(served) -> None:
    sim, server = served
    sim.add_user("u1001", "carol-pw", "Carol", login_name="carol@example.test")
    accounts = {"admin": SecretStr("admin-pw"), "u1001": SecretStr("carol-pw")}
    without = run_checks(settings_for(server, accounts=accounts))
    assert verdicts(without, "account u1001") == ["fail"]
    assert "NCINDEX_LOGINS" in detail(without, "account u1001")
    fixed = run_checks(
        settings_for(server, accounts=accounts, logins={"u1001": "carol@example.test"})
    )
    assert verdicts(fixed, "account u1001") == ["ok"]
    assert "'carol@example.test' → user id 'u1001'" in detail(fixed, "account u1001")
    # an account named by its login instead of its user id
    misnamed = run_checks(
        settings_for(
            server,
            accounts={"admin": SecretStr("admin-pw"), "carol@example.test": SecretStr("carol-pw")},
        )
    )
    assert verdicts(misnamed, "account carol@example.test") == ["fail"]
    assert "is user 'u1001'" in detail(misnamed, "account carol@example.test")


def test_missing_webhooks_fail_for_required_and_warn_for_optional(served) -> None:
    sim, server = served
    settings = settings_for(server)
    lines = run_checks(settings)
    assert "fail" in verdicts(lines, "webhooks")
    assert all(c in detail(lines, "webhooks") for c in REQUIRED)
    registered(server, settings)
    hook = next(r for r in sim.registry.list() if r.event == TAG_ASSIGNED)
    sim.registry.delete(hook.id)
    lines = run_checks(settings)
    assert verdicts(lines, "webhooks") == ["warn"]
    assert "tag changes are found by the scan only" in detail(lines, "webhooks")


def test_a_registration_no_longer_subscribed_is_named(served) -> None:
    """A server where an earlier ncindex registered NodeCopiedEvent (a copy sends the
    target's created and written events too) went on delivering it, and doctor said "ok":
    it now names it and the command that removes it."""
    _, server = served
    settings = settings_for(server)
    registered(server, settings)
    also_registered(server, settings, NODE_NS + "NodeCopiedEvent")
    lines = run_checks(settings)
    assert verdicts(lines, "webhooks") == ["warn"]
    assert detail(lines, "webhooks") == (
        f"registered but no longer subscribed: {NODE_NS}NodeCopiedEvent — each delivery is "
        "one the index does not need; `ncindex webhooks register` removes them"
    )


def test_a_registration_no_longer_subscribed_is_named_whatever_its_secret(served) -> None:
    """An earlier ncindex's NodeCopiedEvent registration made before the secret was rotated
    was a failure, "registered with another webhook secret … until `ncindex webhooks
    register` renews them": register deletes it instead, and the index needs none of its
    deliveries. It is named as a class no longer subscribed."""
    from ncindex.ingest.registration import registration
    from ncindex.runtime import Services

    _, server = served
    old = settings_for(server)
    rotated = settings_for(server, webhook_secret=SecretStr("rotated-s3cret"))
    registered(server, rotated)  # every subscribed class with the current secret
    services = Services(old)
    try:
        services.account("admin").create_webhook(registration(old, NODE_NS + "NodeCopiedEvent"))
    finally:
        services.close()
    lines = run_checks(rotated)
    assert verdicts(lines, "webhooks") == ["warn"]
    assert detail(lines, "webhooks").startswith(
        f"registered but no longer subscribed: {NODE_NS}NodeCopiedEvent — "
    )


REGISTER = "tag changes are found by the scan only — run `ncindex webhooks register`"


@pytest.mark.parametrize(
    ("version", "said", "suggested"),
    [
        ("33.0.2", REGISTER, True),
        ("32.0.0", REGISTER, True),
        ("31.0.9", "tag changes are found by the scan only (the event needs Nextcloud 32)", False),
    ],
)
def test_a_missing_tag_class_is_explained_by_the_servers_version(
    version: str, said: str, suggested: bool
) -> None:
    """On Nextcloud 33 with nothing registered it said "tag events need Nextcloud 32", and no
    missing optional class suggested `ncindex webhooks register`. The tag events exist from
    32 (nextcloud/server TagAssignedEvent ``@since 32.0.0``): registering is the fix there,
    and needs a newer server before."""
    lines = checks_on(version)
    warned = [line.detail for line in lines if line.check == "webhooks" and line.verdict == "warn"]
    assert f"not registered: {TAG_ASSIGNED}: {said}" in warned
    touched = (
        f"not registered: {NODE_NS}NodeTouchedEvent: "
        "restored file versions are found by the scan only"
    )
    assert f"{touched} — run `ncindex webhooks register`" in warned  # every server has it
    assert ("Nextcloud 32" in " ".join(warned)) is not suggested


def test_redis_and_the_webhook_secret_are_checked(served) -> None:
    _, server = served
    lines = run_checks(settings_for(server))
    assert verdicts(lines, "redis") == ["ok"] and verdicts(lines, "webhook secret") == ["ok"]
    lines = run_checks(
        settings_for(
            server, redis_url="redis://user:hunter2@127.0.0.1:9/0", webhook_secret=SecretStr("")
        )
    )
    assert verdicts(lines, "redis") == ["fail"] and "hunter2" not in render(lines)
    said = detail(lines, "redis")
    assert said.startswith("Redis at redis://127.0.0.1:9/0: ConnectionError")
    assert said.endswith("— is Redis running there? Check NCINDEX_REDIS_URL (host, port, "
                         "database; rediss:// for TLS)")  # fmt: skip
    assert verdicts(lines, "webhook secret") == ["fail"]
    assert "NCINDEX_WEBHOOK_SECRET is not set" in detail(lines, "webhook secret")
    # a password in the query, which redis-py's from_url reads too, was shown
    lines = run_checks(
        settings_for(server, redis_url="redis://127.0.0.1:9/0?password=hunter2&db=0")
    )
    assert verdicts(lines, "redis") == ["fail"] and "hunter2" not in render(lines)
    assert detail(lines, "redis").startswith("Redis at redis://127.0.0.1:9/0?db=0: Connection")
    # a Redis that answers, refusing the password: it said only "does not answer"
    from ncindex.redis_server import start_redis

    private = start_redis()
    try:
        redis_lib.Redis.from_url(private.url).config_set("requirepass", "right-one")
        url = f"redis://:hunter2@127.0.0.1:{private.port}/0"
        lines = run_checks(settings_for(server, redis_url=url))
    finally:
        private.stop()
    said = detail(lines, "redis")
    assert verdicts(lines, "redis") == ["fail"] and "hunter2" not in render(lines)
    assert "AuthenticationError" in said
    assert said.endswith("— check the user name and password in NCINDEX_REDIS_URL")


@pytest.mark.parametrize(
    ("secret", "said"),
    [
        ("s3cret", "fewer than 16 characters (the chart refuses it)"),
        ("change-me-to-a-long-random-string", "deploy/ncindex.env.example's placeholder"),
    ],
)
@pytest.mark.parametrize("setting", ["webhook_secret", "webhook_previous_secret"])
def test_a_short_or_example_webhook_secret_is_a_warning(
    served, secret: str, said: str, setting: str
) -> None:
    """Both were "ok": the chart refuses a secret under 16 characters, and the example file's
    placeholder is known to anyone who read it. The receiver accepts the previous secret as
    well, so it was a way past a strong current one that the doctor did not look at."""
    _, server = served
    lines = run_checks(settings_for(server, **{setting: SecretStr(secret)}))
    assert verdicts(lines, "webhook secret") == ["warn"]
    assert detail(lines, "webhook secret").startswith(f"NCINDEX_{setting.upper()} ")
    assert said in detail(lines, "webhook secret") and secret not in render(lines)


def test_a_previous_webhook_secret_still_set_is_a_note(served) -> None:
    """A previous secret left set after the rotation keeps a second secret accepted for good:
    the doctor said "ok" and nothing of it."""
    _, server = served
    old = "the-old-secret-0123456789"
    lines = run_checks(settings_for(server, webhook_previous_secret=SecretStr(old)))
    assert verdicts(lines, "webhook secret") == ["note"]
    said = detail(lines, "webhook secret")
    assert "NCINDEX_WEBHOOK_PREVIOUS_SECRET is accepted too" in said and old not in render(lines)


def test_the_store_is_named_and_the_embedded_ones_limit_said(served) -> None:
    _, server = served
    lines = run_checks(settings_for(server, qdrant_path="/srv/index"))
    assert verdicts(lines, "store") == ["note"]
    assert "/srv/index" in detail(lines, "store") and "NCINDEX_QDRANT_URL" in detail(lines, "store")
    with stand_in_qdrant() as url:
        lines = run_checks(settings_for(server, qdrant_url=url))
    assert verdicts(lines, "store") == ["ok"]
    assert detail(lines, "store") == f"Qdrant server at {url} answers"
    assert verdicts(lines, "model") == ["ok"] and "no index yet" in detail(lines, "model")


def test_an_embedded_store_folder_that_cannot_be_made_fails_naming_the_setting(
    served, tmp_path: Path
) -> None:
    """It was a "note" naming the folder, and `ncindex up` then stopped on "StoreUnavailable:
    cannot read …/active_model: [Errno 20] Not a directory"."""
    _, server = served
    (tmp_path / "a-file").touch()
    lines = run_checks(settings_for(server, qdrant_path=tmp_path / "a-file" / "qdrant"))
    assert verdicts(lines, "store") == ["fail"] and failed(lines)
    assert detail(lines, "store").endswith("fix NCINDEX_QDRANT_PATH")
    lines = run_checks(settings_for(server, data_dir=tmp_path / "a-file"))
    assert verdicts(lines, "store") == ["fail"]
    assert detail(lines, "store").endswith("fix NCINDEX_DATA_DIR")
    lines = run_checks(settings_for(server, qdrant_path=tmp_path / "new" / "qdrant"))
    assert verdicts(lines, "store") == ["note"]


def test_a_dense_model_other_than_the_live_indexs_is_named(served, tmp_path: Path) -> None:
    """NCINDEX_DENSE_MODEL changed after the index was built was not used, without a word:
    the live model (the store's pointers) keeps serving until `ncindex reindex --model`."""
    _, server = served
    settings = settings_for(server, qdrant_path=tmp_path / "q", model_dir=tmp_path / "models")
    store = open_store(settings, model_slug="other-model")  # the index was built with it
    store.ensure_collection(8)
    store.close()
    lines = run_checks(settings)  # its files are not in the model folder: nothing can embed
    assert verdicts(lines, "model") == ["fail"] and failed(lines)
    assert "'other-model', whose files are not under NCINDEX_MODEL_DIR" in detail(lines, "model")
    (tmp_path / "models" / "other-model").mkdir(parents=True)
    lines = run_checks(settings)
    assert verdicts(lines, "model") == ["warn"]
    assert detail(lines, "model").startswith(
        "NCINDEX_DENSE_MODEL is sentence-transformers/all-MiniLM-L6-v2, but the live index was "
        "built with other-model"
    )
    assert "`ncindex reindex --model sentence-transformers/all-MiniLM-L6-v2`" in detail(
        lines, "model"
    )
    same = settings.model_copy(update={"dense_model": "acme/Other-Model"})
    (line,) = check_model(Context(same, Services(same)))  # its files are not there
    assert line.verdict == "fail" and "built with acme/Other-Model" in line.detail
    folder = tmp_path / "models" / "Other-Model"
    assert f"its files are not in {folder} (NCINDEX_MODEL_DIR)" in line.detail
    folder.mkdir()
    for name in ("model.onnx", "tokenizer_config.json", "tokenizer.json", "config.json"):
        (folder / name).touch()
    (folder / "special_tokens_map.json").touch()
    (folder / "vocab.txt").touch()
    (line,) = check_model(Context(same, Services(same)))
    assert line.verdict == "ok" and "built with acme/Other-Model" in line.detail


def test_the_live_models_files_missing_from_the_model_dir_are_not_ok(
    served, tmp_path: Path
) -> None:
    """A wrong NCINDEX_MODEL_DIR was "ok" ("the live index was built with …") while no process
    could load the model from it: the packaged model's files are built by the first process
    that embeds (a warning), unless the folder cannot be written (a failure naming the
    setting)."""
    _, server = served
    settings = settings_for(server, qdrant_path=tmp_path / "q", model_dir=tmp_path / "models")
    store = open_store(settings, model_slug=model_slug(settings.dense_model))
    store.ensure_collection(8)
    store.close()
    lines = run_checks(settings)
    assert verdicts(lines, "model") == ["warn"]
    assert detail(lines, "model").startswith(
        "the live index was built with sentence-transformers/all-MiniLM-L6-v2, but its files "
        f"are not in {tmp_path / 'models' / 'all-MiniLM-L6-v2'} (NCINDEX_MODEL_DIR)"
    )
    assert "`ncindex models` builds them now" in detail(lines, "model")
    (tmp_path / "a-file").touch()
    unwritable = settings.model_copy(update={"model_dir": tmp_path / "a-file" / "models"})
    (line,) = check_model(Context(unwritable, Services(unwritable)))
    assert line.verdict == "fail" and "cannot be written" in line.detail
    assert "NCINDEX_MODEL_DIR" in line.detail


def test_points_of_an_older_analyzer_are_a_warning_naming_the_command(
    served, tmp_path: Path
) -> None:
    """After the analyzer moved from en-2 nothing said that en-2 points were still there, whose
    BM25 half some queries miss until `ncindex reindex --analyzer`: the check reads the
    ``analyzer`` of a bounded sample of first chunks (a later chunk does not count)."""
    _, server = served
    settings = settings_for(server, qdrant_path=tmp_path / "q")
    assert detail(run_checks(settings), "analyzer").startswith("no index yet")
    store = open_store(settings, model_slug=model_slug(settings.dense_model))
    store.ensure_collection(8)
    assert detail(run_checks_closing(store, settings), "analyzer") == "no document indexed yet"
    versions = {"note:1": "en-2", "note:2": "en-2", "note:3": ANALYZER_VERSION}
    store = open_store(settings, model_slug=model_slug(settings.dense_model))
    store.upsert(
        [
            PointRecord(
                id=f"00000000-0000-4000-8000-{i * 10 + chunk:012d}",
                dense=[1.0 + i + chunk] * 8,
                sparse=SparseVector(indices=[i], values=[1.0]),
                payload={
                    "doc_key": key,
                    "chunk_index": chunk,
                    "analyzer": version if chunk == 0 else "en-1",
                },
            )
            for i, (key, version) in enumerate(versions.items())
            for chunk in (0, 1)
        ]
    )
    assert sample_analyzers(store, sample=2).total() == 2  # one page of the sample, no more
    held = run_checks(settings)  # the shard is open here, as in `ncindex up`: not readable
    assert verdicts(held, "analyzer") == ["note"]
    assert detail(held, "analyzer").startswith("skipped: the live collection is not readable")
    lines = run_checks_closing(store, settings)
    assert verdicts(lines, "analyzer") == ["warn"]
    said = detail(lines, "analyzer")
    assert said.startswith("2 of 3 documents sampled (a sample of the first chunks")
    assert f"older analyzer: en-2 (2); the current one is {ANALYZER_VERSION}" in said
    lacking = "; ".join(LACKING[v] for v in ("en-2", "en-3", "en-4", "en-5", "en-6"))
    assert said.endswith(f"miss their BM25 half: {lacking}")
    assert "`ncindex reindex --analyzer`" in said and "en-1" not in said
    store = open_store(settings, model_slug=model_slug(settings.dense_model))
    for key in versions:
        store.set_payload(key, {"analyzer": ANALYZER_VERSION})
    lines = run_checks_closing(store, settings)
    assert verdicts(lines, "analyzer") == ["ok"]
    assert detail(lines, "analyzer").startswith(
        f"{ANALYZER_VERSION} made every document sampled: 3 documents (at most"
    )
    # A later release's points (a rolling upgrade under way, seen from a pod of the earlier
    # one) were called older, with the command that would rewrite them back.
    store = open_store(settings, model_slug=model_slug(settings.dense_model))
    store.set_payload("note:1", {"analyzer": "en-99"})
    lines = run_checks_closing(store, settings)
    assert verdicts(lines, "analyzer") == ["note"]
    said = detail(lines, "analyzer")
    assert said.startswith("1 of 3 documents sampled have BM25 vectors of a later analyzer")
    assert "en-99 (1)" in said and "older" not in said
    # One document sampled: "1 document", not "1 documents" (nor "all 1 documents")
    store = open_store(settings, model_slug=model_slug(settings.dense_model))
    store.delete_document("note:2")
    store.delete_document("note:3")
    lines = run_checks_closing(store, settings)
    said = detail(lines, "analyzer")
    assert said.startswith("1 of 1 document sampled have BM25 vectors of a later analyzer")
    store = open_store(settings, model_slug=model_slug(settings.dense_model))
    store.set_payload("note:1", {"analyzer": "en-2"})
    said = detail(run_checks_closing(store, settings), "analyzer")
    assert said.startswith("1 of 1 document sampled (a sample of the first chunks")
    store = open_store(settings, model_slug=model_slug(settings.dense_model))
    store.set_payload("note:1", {"analyzer": ANALYZER_VERSION})
    said = detail(run_checks_closing(store, settings), "analyzer")
    assert said.startswith(f"{ANALYZER_VERSION} made every document sampled: 1 document (at most")


def run_checks_closing(store: VectorStore, settings: Settings) -> list[Line]:
    """Doctor's lines once ``store`` is closed (an embedded shard opens in one place)."""
    store.close()
    return run_checks(settings)


@contextmanager
def stand_in_qdrant(key: str | None = None) -> Iterator[str]:
    """A stand-in Qdrant server's URL: ``GET /collections`` answers 200, or 401 without
    ``key`` in the ``api-key`` header when one is given."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            refused = key is not None and self.headers.get("api-key") != key
            listed = "aliases" if self.path == "/aliases" else "collections"
            body = b'{"result": {"%s": []}, "status": "ok"}' % listed.encode()
            known = self.path in ("/collections", "/aliases")
            self.send_response(401 if refused else 200 if known else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_qdrant_server_that_does_not_answer_or_refuses_the_key_fails(served) -> None:
    """It was "ok" for any URL: the doctor did not ask the server."""
    _, server = served
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there
    lines = run_checks(settings_for(server, qdrant_url=f"http://127.0.0.1:{port}"))
    assert verdicts(lines, "store") == ["fail"] and "does not answer" in detail(lines, "store")
    with stand_in_qdrant(key="right") as url:
        lines = run_checks(settings_for(server, qdrant_url=url))
        assert verdicts(lines, "store") == ["fail"]
        assert "asks for an API key (NCINDEX_QDRANT_API_KEY is unset)" in detail(lines, "store")
        wrong = settings_for(server, qdrant_url=url, qdrant_api_key=SecretStr("wrong"))
        assert "refuses NCINDEX_QDRANT_API_KEY: HTTP 401" in detail(run_checks(wrong), "store")
        right = settings_for(server, qdrant_url=url, qdrant_api_key=SecretStr("right"))
        assert verdicts(run_checks(right), "store") == ["ok"]


def test_registrations_made_with_another_secret_fail(served) -> None:
    _, server = served
    registered(server, settings_for(server))
    rotated = settings_for(server, webhook_secret=SecretStr("rotated-s3cret"))
    lines = run_checks(rotated)
    assert verdicts(lines, "webhooks") == ["fail"]
    assert "registered with another webhook secret" in detail(lines, "webhooks")
    registered(server, rotated)
    assert verdicts(run_checks(rotated), "webhooks") == ["ok"]


def test_a_previous_secret_is_named_until_it_can_be_emptied(served) -> None:
    """With ``NCINDEX_WEBHOOK_PREVIOUS_SECRET`` set (a rotation), registrations still made with
    it were said to be refused 401, which the receiver no longer does; and once ``ncindex
    webhooks register`` had renewed them all, nothing said to empty the previous secret, which
    goes on letting the former one post deliveries."""
    _, server = served
    old = settings_for(server)
    registered(server, old)
    rotating = settings_for(
        server,
        webhook_secret=SecretStr("rotated-s3cret"),
        webhook_previous_secret=old.webhook_secret,
    )
    lines = run_checks(rotating)
    assert verdicts(lines, "webhooks") == ["warn"]
    assert "registered with the previous webhook secret" in detail(lines, "webhooks")
    assert "then empty it" in detail(lines, "webhooks")
    registered(server, rotating)  # renews each registration with the current secret
    lines = run_checks(rotating)
    assert verdicts(lines, "webhooks") == ["warn"]
    assert "empty NCINDEX_WEBHOOK_PREVIOUS_SECRET" in detail(lines, "webhooks")
    rotated = settings_for(server, webhook_secret=SecretStr("rotated-s3cret"))
    assert verdicts(run_checks(rotated), "webhooks") == ["ok"]


def test_a_class_registered_twice_is_a_warning_and_keeps_the_previous_secret(served) -> None:
    """A class registered with the current secret and again with the previous one: doctor
    said to empty the previous secret (it decided by class), which had the duplicate's
    deliveries refused 401. The duplicate is named, and the previous secret kept."""
    from ncindex.ingest.events import SUBSCRIBED
    from ncindex.ingest.registration import registration

    _, server = served
    old = settings_for(server)
    rotating = settings_for(
        server,
        webhook_secret=SecretStr("rotated-s3cret"),
        webhook_previous_secret=old.webhook_secret,
    )
    registered(server, rotating)
    services = Services(old)
    try:
        services.account("admin").create_webhook(registration(old, SUBSCRIBED[0]))
    finally:
        services.close()
    lines = run_checks(rotating)
    said = detail(lines, "webhooks")
    assert f"registered more than once: {SUBSCRIBED[0]} — " in said
    assert "registered with the previous webhook secret" in said
    assert "empty NCINDEX_WEBHOOK_PREVIOUS_SECRET" not in said
    assert set(verdicts(lines, "webhooks")) == {"warn"}
    registered(server, rotating)  # removes the duplicate
    said = detail(run_checks(rotating), "webhooks")
    assert "more than once" not in said and "empty NCINDEX_WEBHOOK_PREVIOUS_SECRET" in said


def rotation_env(
    server: SimulatorServer, old: Settings, tmp_path: Path, namespace: str
) -> dict[str, str]:
    """The environment of an ``ncindex status`` run mid-rotation: the webhook secret rotated,
    ``old``'s kept as the previous one."""
    return {
        "NCINDEX_NEXTCLOUD_URL": server.url,
        "NCINDEX_ACCOUNTS": json.dumps({"admin": "admin-pw", "alice": "alice-pw"}),
        "NCINDEX_ADMIN_USER": "admin",
        "NCINDEX_WEBHOOK_SECRET": "rotated-s3cret",
        "NCINDEX_WEBHOOK_PREVIOUS_SECRET": old.webhook_secret.get_secret_value(),
        "NCINDEX_PUBLIC_URL": PUBLIC,
        "NCINDEX_REDIS_URL": REDIS["url"],
        "NCINDEX_DATA_DIR": str(tmp_path),
        "NCINDEX_NAMESPACE": namespace,
    }


def test_status_says_as_doctor_does_when_the_previous_secret_can_be_emptied(
    served, tmp_path: Path
) -> None:
    """Only the doctor said it: ``ncindex status``, what an admin watches during the rollout,
    showed nothing of a previous secret left set (which goes on letting the former one post
    deliveries). It asks the same registrations and decides as the doctor does."""
    _, server = served
    old = settings_for(server)
    registered(server, old)
    env = rotation_env(server, old, tmp_path, "rotationstatus")

    def status(*args: str) -> str:
        result = CliRunner().invoke(main, ["status", *args], env=env)
        assert result.exit_code == 0, result.output
        return result.output

    said = status().split("webhook secret: ", 1)[1].splitlines()[0]
    assert said.startswith("registered with the previous webhook secret: ")
    assert said.endswith("run `ncindex webhooks register`, then empty it")
    assert json.loads(status("--json"))["webhook_rotation"]["can_empty"] is False
    rotating = settings_for(
        server,
        webhook_secret=SecretStr("rotated-s3cret"),
        webhook_previous_secret=old.webhook_secret,
    )
    registered(server, rotating)
    (doctor_said,) = [line.detail for line in run_checks(rotating) if line.check == "webhooks"]
    said = status().split("webhook secret: ", 1)[1].splitlines()[0]
    assert said == doctor_said and "empty NCINDEX_WEBHOOK_PREVIOUS_SECRET" in said
    assert json.loads(status("--json"))["webhook_rotation"] == {"can_empty": True, "advice": said}
    assert "webhook secret every registration carries the current" in status(
        "--watch", "--iterations", "1"
    )
    # the webhook admin's app password refused: the list is not read, and status says so
    env["NCINDEX_ACCOUNTS"] = json.dumps({"admin": "wrong-pw", "alice": "alice-pw"})
    said = status().split("webhook secret: ", 1)[1].splitlines()[0]
    assert said.startswith(
        "NCINDEX_WEBHOOK_PREVIOUS_SECRET is set (a secret rotation), but the registrations "
        "could not be listed as admin: GET /ocs/v2.php/apps/webhook_listeners/api/v1/webhooks: "
        "HTTP 401"
    )
    assert said.endswith("— `ncindex doctor` says when it can be emptied")
    assert json.loads(status("--json"))["webhook_rotation"]["can_empty"] is None
    env["NCINDEX_WEBHOOK_PREVIOUS_SECRET"] = ""
    assert "webhook secret" not in status()
    assert json.loads(status("--json"))["webhook_rotation"] is None


def test_status_watch_asks_for_the_registrations_once_a_minute_not_every_frame(
    served, tmp_path: Path
) -> None:
    """``ncindex status --watch`` during a rotation listed the registrations on every frame
    (every 2 s): an OCS request signed in as the webhook admin each time, and with that
    password refused, a failed login per frame for Nextcloud's brute-force throttle to
    count. The answer is kept for REGISTRATIONS_REFRESH_SECONDS and shown on every frame."""
    sim, server = served
    old = settings_for(server)
    registered(server, old)
    env = rotation_env(server, old, tmp_path, "rotationwatch")
    listed = sim.request_count("ocs", "GET")
    args = ["status", "--watch", "--iterations", "3", "--interval", "0.1"]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 0, result.output
    assert result.output.count("registered with the previous webhook secret: ") == 3
    assert sim.request_count("ocs", "GET") - listed == 1


def test_status_names_duplicate_and_unsubscribed_registrations_as_doctor_does(
    served, tmp_path: Path
) -> None:
    """``ncindex status`` said nothing of a class registered twice (each change delivered
    twice) or of one no longer subscribed, which only the doctor named: it shows the doctor's
    line, and the line goes once ``ncindex webhooks register`` has removed them."""
    from ncindex.ingest.events import SUBSCRIBED

    _, server = served
    settings = settings_for(server)
    registered(server, settings)
    also_registered(server, settings, SUBSCRIBED[0], NODE_NS + "NodeCopiedEvent")
    env = rotation_env(server, settings, tmp_path, "surplusstatus")
    env["NCINDEX_WEBHOOK_SECRET"] = settings.webhook_secret.get_secret_value()
    env["NCINDEX_WEBHOOK_PREVIOUS_SECRET"] = ""

    def status(*args: str) -> str:
        result = CliRunner().invoke(main, ["status", *args], env=env)
        assert result.exit_code == 0, result.output
        return result.output

    (doctor_said,) = [line.detail for line in run_checks(settings) if line.check == "webhooks"]
    assert doctor_said.startswith(f"registered more than once: {SUBSCRIBED[0]} — ")
    assert f"registered but no longer subscribed: {NODE_NS}NodeCopiedEvent — " in doctor_said
    assert doctor_said.endswith("`ncindex webhooks register` removes them")
    said = status().split("webhooks: ", 1)[1].splitlines()[0]
    assert said == doctor_said
    data = json.loads(status("--json"))
    assert data["webhook_surplus"] == doctor_said and data["webhook_rotation"] is None
    assert "webhooks registered more than once: " in status("--watch", "--iterations", "1")
    registered(server, settings)  # removes the duplicate and the unsubscribed class
    assert "webhooks:" not in status()
    assert json.loads(status("--json"))["webhook_surplus"] is None


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080", "http://10.1.2.3:8080"])
def test_a_local_public_url_is_a_warning(served, url: str) -> None:
    _, server = served
    lines = run_checks(settings_for(server, public_url=url))
    assert verdicts(lines, "public url") == ["warn"]
    assert "allow_local_remote_servers" in detail(lines, "public url")


def test_a_loopback_public_url_for_a_nextcloud_elsewhere_fails() -> None:
    """It was a warning about allow_local_remote_servers, as if Nextcloud could reach it."""
    settings = Settings(
        nextcloud_url="http://nextcloud.invalid", public_url="http://127.0.0.1:8080"
    )
    services = Services(settings)  # nothing is sent: the check reads the settings
    try:
        (line,) = check_public_url(Context(settings, services))
    finally:
        services.close()
    assert line.verdict == "fail" and "NCINDEX_PUBLIC_URL" in line.detail


def test_the_command_prints_the_table_and_its_exit_code(served) -> None:
    _, server = served
    env: dict[str, str] = {
        "NCINDEX_NEXTCLOUD_URL": server.url,
        "NCINDEX_ACCOUNTS": json.dumps({"admin": "admin-pw"}),
        "NCINDEX_WEBHOOK_SECRET": "s3cret",
        "NCINDEX_PUBLIC_URL": PUBLIC,
        "NCINDEX_REDIS_URL": REDIS["url"],
    }
    result = CliRunner().invoke(main, ["doctor"], env=env)
    assert result.exit_code == 1  # no webhooks registered yet
    assert result.output.splitlines()[0].split() == ["check", "verdict", "detail"]
    assert CliRunner().invoke(main, ["webhooks", "register"], env=env).exit_code == 0
    result = CliRunner().invoke(main, ["doctor", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert {line["verdict"] for line in json.loads(result.output)} <= {"ok", "warn", "note"}


def test_a_check_is_added_by_appending_to_the_list(served, monkeypatch: pytest.MonkeyPatch) -> None:
    _, server = served

    def extra(ctx: object) -> list[Line]:
        return [Line("extra", "warn", "an extra finding")]

    monkeypatch.setattr("ncindex.doctor.CHECKS", [*CHECKS, ("extra", extra)])
    lines = run_checks(settings_for(server))
    assert lines[-1] == Line("extra", "warn", "an extra finding")


def test_missing_ocr_is_a_warning_and_ocr_off_a_note(served) -> None:
    _, server = served
    lines = run_checks(settings_for(server, ocr_languages="eng+qqq"))
    assert verdicts(lines, "ocr") == ["warn"]
    assert detail(lines, "ocr").startswith("unavailable: no Tesseract language data for qqq")
    lines = run_checks(settings_for(server, ocr_enabled=False))
    assert verdicts(lines, "ocr") == ["note"] and "images are not indexed" in detail(lines, "ocr")


def test_a_misspelt_variable_is_a_warning_naming_the_setting_it_resembles(served) -> None:
    _, server = served
    from ncindex.doctor import Context, check_variables
    from ncindex.runtime import Services

    ctx = Context(settings_for(server), Services(settings_for(server)))
    try:
        env = {
            "NCINDEX_QDRANT_HNSW_MM": "4",
            "NCINDEX_QDRANT_MAX_SEGMENT_SIZE": "65536",
            "NCINDEX_QDRANT_HNSW_M": "24",  # a setting
            "NCINDEX_HEARTBEAT_FILE": "/tmp/beat",  # read by the worker's heartbeat
            "PATH": "/usr/bin",
        }
        lines = check_variables(ctx, env)
        assert [(line.verdict, line.detail) for line in lines] == [
            ("warn", "NCINDEX_QDRANT_HNSW_MM is not a setting and is ignored; did you mean "
                     "NCINDEX_QDRANT_HNSW_M?"),
            ("warn", "NCINDEX_QDRANT_MAX_SEGMENT_SIZE is not a setting and is ignored; did you "
                     "mean NCINDEX_QDRANT_MAX_SEGMENT_SIZE_KB?"),
        ]  # fmt: skip
        assert [line.verdict for line in check_variables(ctx, {"NCINDEX_PORT": "1"})] == ["ok"]
    finally:
        ctx.services.close()


def test_without_a_nextcloud_url_every_check_that_needs_none_still_runs() -> None:
    """It stopped at the missing URL: one line (``Error: ...`` without --json), and nothing
    of Redis, the secret, the store, the model, the analyzer or OCR."""
    env = {
        "NCINDEX_NEXTCLOUD_URL": "",
        "NCINDEX_DATA_DIR": REDIS["data_dir"],
        "NCINDEX_WEBHOOK_SECRET": "s3cret-s3cret-s3cret",
        "NCINDEX_PUBLIC_URL": PUBLIC,
    }
    result = CliRunner().invoke(main, ["doctor", "--json"], env=env)
    assert result.exit_code == 1
    lines = [Line(**line) for line in json.loads(result.output)]
    assert [line for line in lines if line.verdict == "fail"] == [
        Line(
            "server",
            "fail",
            "NCINDEX_NEXTCLOUD_URL is not set: there is no Nextcloud to check "
            "(not checked: apps, accounts, webhooks)",
        )
    ]
    assert [line.check for line in lines] == [
        "variables",
        "redis",
        "webhook secret",
        "store",
        "model",
        "analyzer",
        "server",
        "public url",
        "deliveries",
        "ocr",
    ]
    assert verdicts(lines, "redis") == ["ok"] and verdicts(lines, "webhook secret") == ["ok"]
    assert verdicts(lines, "model") == ["ok"] and verdicts(lines, "ocr") == ["ok"]
    text = CliRunner().invoke(main, ["doctor"], env=env)
    assert text.exit_code == 1
    assert text.output.splitlines()[0].split() == ["check", "verdict", "detail"]
    assert len(text.output.splitlines()) == len(lines) + 1


def test_a_wrong_admin_password_is_named_so_on_the_webhook_line(served) -> None:
    _, server = served
    lines = run_checks(settings_for(server, accounts={"admin": SecretStr("wrong")}))
    assert verdicts(lines, "app webhook_listeners") == ["fail"]
    said = detail(lines, "app webhook_listeners")
    assert "app password is refused" in said and "needs an admin account" not in said
    # the webhooks line said "skipped: webhook_listeners not available", as if the app were
    # off, and the News line only "HTTP 401": each names the password and the line to read
    assert detail(lines, "webhooks") == (
        "skipped: admin's app password is refused: the `account admin` line says what to fix"
    )
    assert detail(lines, "app news").endswith(
        ": admin's app password is refused (the `account admin` line says what to fix)"
    )
    assert verdicts(lines, "account admin") == ["fail"]


def test_a_webhook_admin_that_may_not_manage_webhooks_is_told_what_it_must_be(served) -> None:
    """nextcloud/server WebhooksController: #[AuthorizedAdminSetting(settings: Admin::class)]
    — an admin, or a user delegated the "Webhooks" setting, lists the webhooks."""
    sim, server = served
    settings = settings_for(server, admin_user="alice")
    said = detail(run_checks(settings), "app webhook_listeners")
    assert "HTTP 403" in said and 'delegated the "Webhooks" admin privilege' in said
    sim.delegate_setting("alice", "OCA\\WebhookListeners\\Settings\\Admin")
    assert verdicts(run_checks(settings), "app webhook_listeners") == ["ok"]


def test_without_a_nextcloud_url_a_misspelt_one_is_named() -> None:
    result = CliRunner().invoke(main, ["doctor"], env={"NCINDEX_NEXTCLOUD_ULR": "https://x.org"})
    assert result.exit_code == 1
    assert "NCINDEX_NEXTCLOUD_URL is not set" in result.output
    assert "NCINDEX_NEXTCLOUD_ULR is not a setting" in result.output
    assert "did you mean NCINDEX_NEXTCLOUD_URL?" in result.output


def test_beside_make_run_doctor_says_there_is_nothing_to_check() -> None:
    """Run beside ``make run`` (no NCINDEX_NEXTCLOUD_URL, no setting of a deployment), doctor
    failed "NCINDEX_WEBHOOK_SECRET is not set: the webhook receiver refuses to start" and
    warned of the public URL http://127.0.0.1:8080 — things ``ncindex up`` makes for its
    sample. It says so in a note, leaves those checks out and exits 0."""
    env = {"NCINDEX_DATA_DIR": REDIS["data_dir"]}
    result = CliRunner().invoke(main, ["doctor", "--json"], env=env)
    lines = [Line(**line) for line in json.loads(result.output)]
    assert result.exit_code == 0, result.output
    checks = [line.check for line in lines]
    assert "webhook secret" not in checks and "public url" not in checks, checks
    assert verdicts(lines, "server") == ["note"]
    said = detail(lines, "server")
    assert "make run" in said and "nothing to check" in said and "NCINDEX_NEXTCLOUD_URL" in said
    # one setting of a deployment without the URL: the URL is missing, and doctor fails
    env["NCINDEX_WEBHOOK_SECRET"] = "s3cret-s3cret-s3cret"
    result = CliRunner().invoke(main, ["doctor", "--json"], env=env)
    assert result.exit_code == 1, result.output


def test_a_qdrant_server_without_the_url_is_a_deployment() -> None:
    """A Qdrant server URL says a deployment is meant, not ``make run``'s sample: without
    NCINDEX_NEXTCLOUD_URL doctor fails, where it took it for the sample and exited 0."""
    env = {"NCINDEX_DATA_DIR": REDIS["data_dir"], "NCINDEX_QDRANT_URL": "http://qdrant:6333"}
    result = CliRunner().invoke(main, ["doctor", "--json"], env=env)
    lines = [Line(**line) for line in json.loads(result.output)]
    assert result.exit_code == 1, result.output
    assert verdicts(lines, "server") == ["fail"]
