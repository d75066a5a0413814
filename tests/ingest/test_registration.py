"""``ncindex webhooks register|list|remove`` against the simulator's OCS API."""

from __future__ import annotations

import ipaddress
import json
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import redis
from click.testing import CliRunner, Result
from pydantic import SecretStr

from allinone.cli import main
from ncindex.errors import NextcloudAuthError, NextcloudProtocolError
from ncindex.ingest.events import NODE_NS, NODE_RESTORED, REQUIRED, SUBSCRIBED, TAG_EVENTS
from ncindex.ingest.registration import (
    LISTENER_CACHE_SECONDS,
    RESCAN_MARGIN_SECONDS,
    SECRET_ID_HEADER,
    RegisterResult,
    hook_uri,
    list_registrations,
    loopback_target,
    made_with_secret,
    register,
    registration,
    remove,
    rescan_once_listening,
    secret_id,
    subscribed,
)
from ncindex.nextcloud.client import NextcloudClient, make_http
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, SimulatorServer, serve_simulator
from ncindex.sources.deck_card import DECK_SUBSCRIBED


@pytest.fixture
def admin() -> Iterator[tuple[NextcloudClient, Settings]]:
    sim = NextcloudSimulator()
    sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
    server = serve_simulator(sim, host="127.0.0.1", port=0)
    settings = Settings(
        nextcloud_url=server.url,
        accounts={"admin": SecretStr("admin-pw")},
        webhook_secret=SecretStr("s3cret"),
        public_url="http://indexer.example.test",
    )
    http = make_http(settings)
    yield NextcloudClient.for_account(http, "admin", "admin-pw"), settings
    http.close()
    server.close()


def test_register_twice_gives_one_registration_per_event_class(admin) -> None:
    client, settings = admin
    first = register(client, settings)
    second = register(client, settings)
    assert len(first.created) == len(SUBSCRIBED) and first.kept == []
    assert second.created == [] and sorted(second.kept) == sorted(first.created)
    hooks = list_registrations(client, settings)
    assert sorted(h["event"] for h in hooks) == sorted(SUBSCRIBED)
    for hook in hooks:
        assert hook["uri"] == hook_uri(settings)
        assert hook["authMethod"] == "header"
        assert hook["headers"] == {
            "Content-Type": "application/json",
            SECRET_ID_HEADER: secret_id(settings),  # names the secret, does not hold it
        }
        assert "s3cret" not in str(hook["authData"])  # stored encrypted, never echoed


def test_a_rotated_secret_renews_every_registration(admin) -> None:
    """A registration made with the old secret would have every delivery refused 401: a new
    secret makes ``register`` update each class's registration in place, and doctor name
    it."""
    client, settings = admin
    first = register(client, settings)
    rotated = settings.model_copy(update={"webhook_secret": SecretStr("rotated-s3cret")})
    assert secret_id(rotated) != secret_id(settings)
    renewed = register(client, rotated)
    assert {o.status for o in renewed.outcomes} == {"renewed"}
    assert renewed.removed == [] and renewed.created == []  # updated in place, not created
    assert sorted(renewed.updated) == sorted(first.created)
    hooks = list_registrations(client, rotated)
    assert len(hooks) == len(SUBSCRIBED)
    assert all(h["headers"][SECRET_ID_HEADER] == secret_id(rotated) for h in hooks)
    again = register(client, rotated)
    assert {o.status for o in again.outcomes} == {"already"} and again.removed == []


def test_deliveries_queued_before_a_renewal_are_sent_with_the_renewed_registration() -> None:
    """nextcloud/server apps/webhook_listeners/lib/BackgroundJobs/WebhookCall.php run reads
    the registration (getById) when the queued job runs: a renewal that deleted the
    registration and made another had every delivery still queued fail ("no longer
    exists"); updated in place, they are sent (here to the simulator itself, which answers
    404)."""
    sim = NextcloudSimulator(delivery_delay=(60.0, 60.0))
    sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
    sim.add_user("alice", password="alice-pw")
    server = serve_simulator(sim, host="127.0.0.1", port=0)
    settings = Settings(
        nextcloud_url=server.url,
        accounts={"admin": SecretStr("admin-pw")},
        webhook_secret=SecretStr("s3cret"),
        public_url=server.url,
    )
    http = make_http(settings)
    try:
        client = NextcloudClient.for_account(http, "admin", "admin-pw")
        register(client, settings)
        sim.put_file("alice", "/queued.md", b"x")  # NodeCreatedEvent, NodeWrittenEvent queued
        rotated = settings.model_copy(update={"webhook_secret": SecretStr("rotated-s3cret")})
        renewed = register(client, rotated)
        assert {o.status for o in renewed.outcomes} == {"renewed"}
        assert sim.flush_deliveries(timeout=10, fast_forward=True) == 2
        assert [d.status for d in sim.deliveries] == [404, 404]
    finally:
        http.close()
        server.close()
        sim.close()


def test_a_first_registration_marks_every_account_for_a_scan_once_nextcloud_listens(
    admin, redis_url: str
) -> None:
    """webhook_listeners caches each signed-in user's list of listened classes for five
    minutes and a registration does not clear it (simulator: ``WebhookRegistry.listened``):
    what users change meanwhile is never sent, so the accounts are scanned once it expired
    (beat's side: tests/sync/test_beat_and_cli.py)."""
    client, settings = admin
    settings = settings.model_copy(update={"namespace": "first-registration"})
    store = redis.Redis.from_url(redis_url)
    try:
        first = register(client, settings)
        assert sorted(first.first_registered) == sorted(SUBSCRIBED)
        now = time.time()
        due = rescan_once_listening(store, first, settings, now=now)
        assert due == int(now) + LISTENER_CACHE_SECONDS + RESCAN_MARGIN_SECONDS
        assert int(store.get(settings.names.rescan_due) or 0) == due
        store.delete(settings.names.rescan_due)
        rotated = settings.model_copy(update={"webhook_secret": SecretStr("rotated-s3cret")})
        for again in (register(client, settings), register(client, rotated)):  # kept, renewed
            assert again.first_registered == []
            assert rescan_once_listening(store, again, settings) is None
        assert store.get(settings.names.rescan_due) is None
    finally:
        store.delete(settings.names.rescan_due)
        store.close()


def test_a_class_subscribed_since_the_last_registration_is_added_and_caught_up(
    admin, redis_url: str
) -> None:
    """A deployment registered before ncindex subscribed ``NodeTouchedEvent`` (the one event
    of a file version restored): ``register`` adds that class, keeps the others, and has the
    accounts scanned once Nextcloud listens to it (what was restored meanwhile)."""
    client, settings = admin
    settings = settings.model_copy(update={"namespace": "new-class"})
    touched = NODE_NS + "NodeTouchedEvent"
    register(client, settings)
    (old,) = [w for w in list_registrations(client, settings) if w["event"] == touched]
    client.delete_webhook(old["id"])  # as registered by an ncindex that did not subscribe it
    store = redis.Redis.from_url(redis_url)
    try:
        again = register(client, settings)
        assert again.first_registered == [touched]
        assert {o.status for o in again.outcomes if o.event_class != touched} == {"already"}
        assert rescan_once_listening(store, again, settings) is not None
        hooks = list_registrations(client, settings)
        assert sorted(h["event"] for h in hooks) == sorted(SUBSCRIBED)
    finally:
        store.delete(settings.names.rescan_due)
        store.close()


def test_register_removes_duplicates_and_remove_clears_all(admin) -> None:
    client, settings = admin
    register(client, settings)
    client.create_webhook(registration(settings, SUBSCRIBED[0]))
    result = register(client, settings)
    assert len(result.removed) == 1
    assert len(list_registrations(client, settings)) == len(SUBSCRIBED)
    assert len(remove(client, settings).removed) == len(SUBSCRIBED)
    assert list_registrations(client, settings) == []


def test_node_copied_event_is_not_registered_on_a_fresh_server(admin) -> None:
    """A copy sends the target's NodeCreatedEvent and NodeWrittenEvent too (nextcloud/server
    lib/private/Files/View.php copy): NodeCopiedEvent cost one more delivery per copy."""
    client, settings = admin
    result = register(client, settings)
    events = {h["event"] for h in list_registrations(client, settings)}
    assert NODE_NS + "NodeCopiedEvent" not in events
    assert NODE_NS + "NodeCreatedEvent" in events and NODE_NS + "NodeWrittenEvent" in events
    assert result.removed == [] and {o.status for o in result.outcomes} == {"registered"}


def test_a_node_copied_registration_made_before_is_removed(admin) -> None:
    """A server where an earlier ncindex registered NodeCopiedEvent kept delivering it for
    nothing: ``register`` deletes it and says so; the other classes are left as they were."""
    client, settings = admin
    register(client, settings)
    old = client.create_webhook(registration(settings, NODE_NS + "NodeCopiedEvent"))["id"]
    result = register(client, settings)
    assert result.removed == [old] and result.created == []
    assert [(o.event_class, o.status, o.webhook_id) for o in result.outcomes][-1] == (
        NODE_NS + "NodeCopiedEvent",
        "removed",
        old,
    )
    assert len(result.kept) == len(SUBSCRIBED)
    assert sorted(h["event"] for h in list_registrations(client, settings)) == sorted(SUBSCRIBED)
    assert [NODE_NS + "NodeCopiedEvent", "removed", f"#{old}"] in [
        line.split() for line in result.table().splitlines()
    ]


def test_register_leaves_every_registration_at_another_url_be(admin) -> None:
    """Only registrations at this deployment's exact delivery URL are ncindex's: webhook_
    listeners lists them by ``uri`` (nextcloud/server ``WebhooksController::index`` →
    ``WebhookListenerMapper::getByUri``, an ``eq`` on the column, whose tables are made
    ``utf8_bin``/``utf8mb4_bin`` on MySQL: ``lib/private/DB/ConnectionFactory.php``). Another
    app's, or another deployment's at another URL — of a class ncindex no longer subscribes
    to, or of one it does — are neither removed as unsubscribed nor as duplicates."""
    client, settings = admin
    other = settings.model_copy(update={"public_url": "https://automation.example"})
    others = [
        client.create_webhook(registration(other, NODE_NS + "NodeCopiedEvent"))["id"],
        client.create_webhook(registration(other, SUBSCRIBED[0]))["id"],
        client.create_webhook(
            registration(settings, SUBSCRIBED[0]) | {"uri": hook_uri(settings).upper()}
        )["id"],
    ]
    register(client, settings)
    result = register(client, settings.model_copy(update={"deck_webhooks": False}))
    assert result.removed == []
    assert sorted(h["id"] for h in client.list_webhooks() if h["id"] in others) == sorted(others)


def test_deck_card_events_are_registered_only_when_asked() -> None:
    sim = NextcloudSimulator(deck_webhooks=True)
    sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
    server = serve_simulator(sim, host="127.0.0.1", port=0)
    settings = Settings(
        nextcloud_url=server.url,
        accounts={"admin": SecretStr("admin-pw")},
        webhook_secret=SecretStr("s3cret"),
        public_url="http://indexer.example.test",
        deck_webhooks=True,
    )
    http = make_http(settings)
    try:
        client = NextcloudClient.for_account(http, "admin", "admin-pw")
        register(client, settings)
        events = {h["event"] for h in list_registrations(client, settings)}
        assert events == set(SUBSCRIBED) | set(DECK_SUBSCRIBED)
        # turned off: Deck's registrations go (each would still deliver, and fail a card
        # save whose event is over 4000 characters, nextcloud/server#58912)
        off = register(client, settings.model_copy(update={"deck_webhooks": False}))
        assert sorted(o.event_class for o in off.outcomes if o.status == "removed") == sorted(
            DECK_SUBSCRIBED
        )
        assert {h["event"] for h in list_registrations(client, settings)} == set(SUBSCRIBED)
    finally:
        http.close()
        server.close()


def _settings(server_url: str) -> Settings:
    return Settings(
        nextcloud_url=server_url,
        accounts={"admin": SecretStr("admin-pw")},
        webhook_secret=SecretStr("s3cret"),
        public_url="http://indexer.example.test",
        deck_webhooks=True,
    )


def _cli_env(server_url: str, redis_url: str, namespace: str) -> dict[str, str]:
    """The environment of an ``ncindex webhooks`` command as the simulator's admin, its marks
    in the session's Redis under ``namespace``."""
    return {
        "NCINDEX_NEXTCLOUD_URL": server_url,
        "NCINDEX_ACCOUNTS": '{"admin": "admin-pw"}',
        "NCINDEX_WEBHOOK_SECRET": "s3cret",
        "NCINDEX_PUBLIC_URL": "http://indexer.example.test",
        "NCINDEX_REDIS_URL": redis_url,
        "NCINDEX_NAMESPACE": namespace,
    }


def _run_register(sim: NextcloudSimulator, redis_url: str, *extra: str) -> tuple[int, str]:
    """``ncindex webhooks register`` against ``sim``, its marks in the session's Redis."""
    sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
    with serve_simulator(sim) as server:
        env = _cli_env(server.url, redis_url, "register-command") | {
            "NCINDEX_DECK_WEBHOOKS": "true"
        }
        result = CliRunner().invoke(main, ["webhooks", "register", *extra], env=env)
    return result.exit_code, result.output


def test_each_class_is_registered_on_its_own_and_refusals_are_reported() -> None:
    sim = NextcloudSimulator(version="31.0.9")  # no tag events; Deck 1.15: no card events
    try:
        sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
        with serve_simulator(sim) as server:
            settings = _settings(server.url)
            http = make_http(settings)
            try:
                result = register(NextcloudClient.for_account(http, "admin", "admin-pw"), settings)
            finally:
                http.close()
        by_class = {o.event_class: o for o in result.outcomes}
        assert {c for c, o in by_class.items() if o.status == "refused"} == set(TAG_EVENTS) | set(
            DECK_SUBSCRIBED
        )
        tag = by_class["OCP\\SystemTag\\TagAssignedEvent"]
        assert tag.reason == (
            "OCP\\SystemTag\\TagAssignedEvent is not an event class compatible with webhooks"
        )
        assert "tag changes are found by the scan only" in tag.cost and not tag.required
        assert by_class[NODE_RESTORED].status == "registered"  # files_trashbin's class
        assert result.ok  # every required class is there
        registered = {h.event for h in sim.registry.list()}
        assert registered == set(SUBSCRIBED) - set(TAG_EVENTS)
    finally:
        sim.close()


def test_the_rescan_line_is_true_for_the_namespace_the_command_runs_in(redis_url: str) -> None:
    """``webhooks register`` in a shell without NCINDEX_NAMESPACE promised every account
    "scanned at HH:MM (beat)" while ``ncindex up`` ran under ``ncindex-up``: the due time is
    kept in the command's namespace, which no beat there takes. In a namespace holding no scan,
    with scans of another in this Redis, it says so and names the command that scans; in a
    namespace holding scans, the beat of that namespace."""
    from ncindex.documents import DocType
    from ncindex.names import Names
    from ncindex.sync.reconcile import ScanReport, ScanState

    run = uuid.uuid4().hex[:8]
    here, up = f"reg-{run}", f"reg-up-{run}"
    client = redis.Redis.from_url(redis_url)
    client.flushdb()  # scans an earlier test left in another namespace would be named too
    report = ScanReport(user="alice", doc_type="file", started_at=time.time(), applied=True)
    ScanState(client, "alice", DocType.FILE, Names(up)).record(report)
    try:
        for namespace in (here, up):
            sim = NextcloudSimulator()
            sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
            try:
                with serve_simulator(sim) as server:
                    env = _cli_env(server.url, redis_url, namespace)
                    result = CliRunner().invoke(main, ["webhooks", "register"], env=env)
            finally:
                sim.close()
            assert result.exit_code == 0, result.output
            line = result.output.splitlines()[-1]
            if namespace == here:
                assert f"due in namespace {here}, which holds no scan" in line, line
                assert f"NCINDEX_NAMESPACE={up}" in line and "reconcile --apply" in line, line
            else:
                assert "scanned at" in line and f"by the beat of namespace {up}" in line, line
    finally:
        for namespace in (here, up):
            for key in client.scan_iter(match=f"{namespace}:*"):
                client.delete(key)
        client.close()


def test_register_command_prints_the_table_and_exits_0_without_optional_classes(
    redis_url: str,
) -> None:
    sim = NextcloudSimulator(version="31.0.9")
    try:
        code, output = _run_register(sim, redis_url)
    finally:
        sim.close()
    assert code == 0, output
    lines = output.splitlines()
    assert lines[0].split() == ["class", "result", "detail"]
    restored = next(line for line in lines if line.startswith(NODE_RESTORED))
    assert restored.split()[1] == "registered"
    tag = next(line for line in lines if line.startswith("OCP\\SystemTag\\TagAssignedEvent"))
    assert "refused" in tag and "is not an event class compatible with webhooks" in tag
    assert "tag changes are found by the scan only" in tag


def test_register_command_exits_1_when_a_required_class_is_refused(redis_url: str) -> None:
    sim = NextcloudSimulator()
    sim.refused_event_classes.add(REQUIRED[1])
    try:
        code, output = _run_register(sim, redis_url, "--json")
    finally:
        sim.close()
    assert code == 1
    body = json.loads(output)
    refused = {c["class"]: c["required"] for c in body["classes"] if c["result"] == "refused"}
    assert refused == {REQUIRED[1]: True} | dict.fromkeys(DECK_SUBSCRIBED, False)  # Deck 1.17
    assert body["ok"] is False
    assert body["rescan_at"] > time.time() + LISTENER_CACHE_SECONDS  # the others were new


def test_against_a_simulator_accepting_only_the_real_classes_every_class_registers(
    redis_url: str,
) -> None:
    sim = NextcloudSimulator(deck_webhooks=True)  # Deck 1.18: every class we subscribe exists
    try:
        code, output = _run_register(sim, redis_url, "--json")
    finally:
        sim.close()
    assert code == 0, output
    results = {c["class"]: c["result"] for c in json.loads(output)["classes"]}
    assert results == dict.fromkeys(SUBSCRIBED + DECK_SUBSCRIBED, "registered")


@pytest.mark.parametrize(
    ("nextcloud", "public", "refused"),
    [
        ("http://8.8.8.8:8080", "http://127.0.0.1:8081", True),  # addresses only: none sent to
        ("http://8.8.8.8:8080", "http://localhost:8081", True),
        ("http://8.8.8.8:8080", "http://[::1]:8081", True),
        ("http://nextcloud.invalid", "http://127.0.0.1:8081", True),  # does not resolve here
        ("http://8.8.8.8:8080", "http://indexer.example.test", False),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8081", False),  # a Nextcloud here may
        ("http://localhost:8080", "http://[::1]:8081", False),
    ],
)
def test_a_loopback_public_url_for_a_nextcloud_elsewhere_is_named(
    nextcloud: str, public: str, refused: bool
) -> None:
    settings = Settings(nextcloud_url=nextcloud, public_url=public)
    problem = loopback_target(settings)
    assert (problem is not None) is refused
    if problem:
        assert problem.startswith(f"NCINDEX_PUBLIC_URL {public} is a loopback address")


def _own_address() -> str | None:
    """A non-loopback address of this machine (the one it would send to TEST-NET-1 from; a
    UDP connect sends nothing), or ``None`` without one."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        address = str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()
    return None if ipaddress.ip_address(address).is_loopback else address


def test_a_nextcloud_on_this_machine_by_another_address_may_use_a_loopback_url() -> None:
    # Nextcloud installed here, reached by this machine's own address or public name: its
    # deliveries to 127.0.0.1 come back here (with allow_local_remote_servers); refusing the
    # registration was wrong
    address = _own_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    settings = Settings(nextcloud_url=f"http://{address}:8080", public_url="http://127.0.0.1:8081")
    assert loopback_target(settings) is None


def test_register_command_refuses_a_loopback_public_url_for_a_nextcloud_elsewhere() -> None:
    """It registered every class without a word, and Nextcloud could never deliver."""
    env = {
        # .invalid never resolves (RFC 6761 §6.4): no request can leave, even from old code
        "NCINDEX_NEXTCLOUD_URL": "http://nextcloud.invalid:8080",
        "NCINDEX_ACCOUNTS": '{"admin": "admin-pw"}',
        "NCINDEX_WEBHOOK_SECRET": "s3cret",
        "NCINDEX_PUBLIC_URL": "http://127.0.0.1:8081",
    }
    result = CliRunner().invoke(main, ["webhooks", "register"], env=env)
    assert result.exit_code == 1
    assert "NCINDEX_PUBLIC_URL http://127.0.0.1:8081 is a loopback address" in result.output
    assert "--force" in result.output


def test_list_and_remove_print_a_table_or_json_and_say_when_there_is_none(
    redis_url: str,
) -> None:
    """``list`` printed nothing with no registration and headerless TSV otherwise, ``remove``
    only JSON, and neither took --json: now each prints a table with a header, or a line
    saying none is registered, and one JSON object with --json."""
    sim = NextcloudSimulator()
    sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
    uri = "http://indexer.example.test/hooks/nextcloud"
    none = f"no webhooks registered for {uri}"
    try:
        with serve_simulator(sim) as server:
            env = _cli_env(server.url, redis_url, f"webhooks-{time.time_ns()}")

            def run(*args: str) -> str:
                result = CliRunner().invoke(main, ["webhooks", *args], env=env)
                assert result.exit_code == 0, result.output
                return result.output

            assert run("list") == f"{none}\n"
            assert json.loads(run("list", "--json")) == {"webhooks": []}
            assert run("remove") == f"{none}: nothing removed\n"
            nothing = {"removed": [], "gone": [], "failed": [], "untried": []}
            assert json.loads(run("remove", "--json")) == nothing
            run("register")
            ids = {h.event: h.id for h in sim.registry.list()}
            table = run("list").splitlines()
            assert table[0].split() == ["class", "id", "uri"]
            rows = {tuple(line.split()) for line in table[1:]}
            assert rows == {(c, str(i), uri) for c, i in ids.items()}
            listed = json.loads(run("list", "--json"))["webhooks"]
            assert listed == [{"class": c, "id": i, "uri": uri} for c, i in ids.items()]
            removed = run("remove").splitlines()
            assert removed[0].split() == ["class", "id", "uri"]
            assert {tuple(line.split()) for line in removed[1:-1]} == rows
            assert removed[-1] == f"removed {len(ids)} registrations"
            assert run("list") == f"{none}\n"
            run("register")
            again = sorted(h.id for h in sim.registry.list())
            assert sorted(json.loads(run("remove", "--json"))["removed"]) == again
            assert json.loads(run("remove", "--json")) == nothing
    finally:
        sim.close()


def test_a_duplicate_made_with_the_previous_secret_keeps_it_needed_until_removed(admin) -> None:
    """Rotation decided by class: a class registered with the current secret and again with
    the previous one (two runs at once, one per secret) said the previous secret could be
    emptied, after which the duplicate's deliveries were refused 401. Each registration
    counts; the duplicate is named, and ``register`` removes it."""
    from ncindex.ingest.registration import secret_rotation

    client, old = admin
    rotating = old.model_copy(
        update={
            "webhook_secret": SecretStr("rotated-s3cret"),
            "webhook_previous_secret": old.webhook_secret,
        }
    )
    register(client, rotating)
    duplicate = client.create_webhook(registration(old, SUBSCRIBED[0]))
    rotation = secret_rotation(list_registrations(client, rotating), rotating)
    assert rotation.previous == (SUBSCRIBED[0],) and rotation.duplicates == (SUBSCRIBED[0],)
    assert rotation.stale == () and not rotation.can_empty_previous
    assert "registered with the previous webhook secret" in str(rotation.advice())
    result = register(client, rotating)
    assert result.removed == [int(duplicate["id"])]
    rotation = secret_rotation(list_registrations(client, rotating), rotating)
    assert rotation.previous == () and rotation.duplicates == ()
    assert rotation.can_empty_previous


def _runs_past_a_500(
    sim: NextcloudSimulator,
    client: NextcloudClient,
    settings: Settings,
    env: dict[str, str],
    method: str,
    before_command: Callable[[], object] = lambda: None,
) -> tuple[RegisterResult, list[dict[str, Any]], Result, Result, RegisterResult]:
    """``register`` with the first webhook request of ``method`` answered 500 and what is
    listed after it; ``before_command``, then ``ncindex webhooks register`` (``env``) with
    the same fault, then with ``--json`` and none; then ``register`` once more."""
    sim.faults.set("ocs", status=500, times=1, method=method)
    result = register(client, settings)
    listed = list_registrations(client, settings)
    before_command()
    sim.faults.set("ocs", status=500, times=1, method=method)
    command = CliRunner().invoke(main, ["webhooks", "register"], env=env)
    as_json = CliRunner().invoke(main, ["webhooks", "register", "--json"], env=env)
    return result, listed, command, as_json, register(client, settings)


def test_a_failing_delete_leaves_the_rest_of_the_registration_done(redis_url: str) -> None:
    """``register`` stopped at the first deletion that raised: a duplicate Nextcloud answered
    500 for left every class after it made with the old secret (each delivery refused 401)
    and the class no longer subscribed in place. The deletion is now recorded as not done,
    every other step is taken, and the command names it at the end and exits 1; the next run
    removes it."""
    sim = NextcloudSimulator()
    sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
    try:
        with serve_simulator(sim) as server:
            old = _settings(server.url)
            rotated = old.model_copy(update={"webhook_secret": SecretStr("rotated-s3cret")})
            http = make_http(old)
            try:
                client = NextcloudClient.for_account(http, "admin", "admin-pw")
                register(client, old)
                twin = client.create_webhook(registration(old, SUBSCRIBED[0]))["id"]
                copied = client.create_webhook(registration(old, NODE_NS + "NodeCopiedEvent"))
                env = _cli_env(server.url, redis_url, "register-left") | {
                    "NCINDEX_DECK_WEBHOOKS": "true",
                    "NCINDEX_WEBHOOK_SECRET": "rotated-s3cret",
                }
                result, listed, command, as_json, again = _runs_past_a_500(
                    sim,
                    client,
                    rotated,
                    env,
                    "DELETE",
                    # a duplicate for the command's run to fail to delete
                    lambda: client.create_webhook(registration(rotated, SUBSCRIBED[1])),
                )
            finally:
                http.close()
    finally:
        sim.close()
    (failure,) = result.failed
    assert (failure.action, failure.webhook_id, failure.event_class) == (
        "remove",
        twin,
        SUBSCRIBED[0],
    )
    assert "HTTP 500" in failure.error and not result.ok
    by_class = {o.event_class: o.status for o in result.outcomes}
    assert {by_class[c] for c in SUBSCRIBED} == {"renewed"}  # (Deck 1.17 refuses its own)
    assert by_class[NODE_NS + "NodeCopiedEvent"] == "removed"
    assert result.removed == [copied["id"]]
    assert sorted(h["id"] for h in listed if h["event"] == SUBSCRIBED[0])[1] == twin
    assert all(made_with_secret(h, rotated) for h in listed if h["id"] != twin)
    assert command.exit_code == 1, command.output
    assert command.stdout.splitlines()[0].split() == ["class", "result", "detail"]
    (said,) = command.stderr.splitlines()
    assert said.startswith(f"error: registration #{twin} ({SUBSCRIBED[0]}) not removed: ")
    assert said.endswith("— `ncindex webhooks register` tries again")
    assert as_json.exit_code == 0, as_json.output  # the second run removed both
    assert json.loads(as_json.output)["failed"] == []
    assert again.ok and again.removed == [] and again.failed == []


@contextmanager
def _served_admin() -> Iterator[tuple[NextcloudSimulator, NextcloudClient, Settings]]:
    """A served simulator with an admin, that admin's client and :func:`_settings`."""
    sim = NextcloudSimulator()
    sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
    try:
        with serve_simulator(sim) as server:
            settings = _settings(server.url)
            http = make_http(settings)
            try:
                yield sim, NextcloudClient.for_account(http, "admin", "admin-pw"), settings
            finally:
                http.close()
    finally:
        sim.close()


def test_a_registration_another_admin_deleted_meanwhile_is_said_gone() -> None:
    """nextcloud/server ``WebhooksController::destroy`` answers a missing id with 200 and
    ``false`` (``WebhookListenerMapper::deleteById``: no row deleted), which ``register``
    takes as done, not as a failure — but listed it as removed: a duplicate and a class no
    longer subscribed that another admin deleted meanwhile are now ``gone``, apart."""
    with _served_admin() as (sim, client, settings):
        register(client, settings)
        twin = client.create_webhook(registration(settings, SUBSCRIBED[0]))["id"]
        copied = client.create_webhook(registration(settings, NODE_NS + "NodeCopiedEvent"))
        listed = client.list_webhooks

        def list_then_another_admin_deletes(**kwargs: object) -> list[dict[str, object]]:
            hooks = listed(**kwargs)
            sim.registry.delete(twin)
            sim.registry.delete(copied["id"])
            return hooks

        client.list_webhooks = list_then_another_admin_deletes  # type: ignore[method-assign]
        result = register(client, settings)
    assert result.ok and result.failed == []  # ok: no deletion left undone
    assert result.removed == [] and result.gone == [twin, copied["id"]]
    (row,) = (line for line in result.table().splitlines() if "NodeCopiedEvent" in line)
    assert row.split()[1:] == ["gone", f"#{copied['id']}", "already", "gone"]


def _fresh_or_rotated(server_url: str, rotated: bool) -> Settings:
    """The settings of a ``register`` run against the simulator at ``server_url``: with
    ``rotated``, after every class was registered with the secret before (each is renewed)."""
    settings = _settings(server_url)
    if not rotated:
        return settings
    http = make_http(settings)
    try:
        register(NextcloudClient.for_account(http, "admin", "admin-pw"), settings)
    finally:
        http.close()
    return settings.model_copy(update={"webhook_secret": SecretStr("rotated-s3cret")})


@pytest.mark.parametrize("rotated", [False, True], ids=["register", "renew"])
def test_a_failing_registration_leaves_the_other_classes_done(
    redis_url: str, rotated: bool
) -> None:
    """``register`` stopped at the first ``POST`` that answered 500 (nextcloud/server
    ``WebhooksController::create``/``update``: any exception of the mapper is OCS 500 "An
    internal error occurred") or timed out: every class after it was left unregistered (or,
    after a rotation, made with the old secret: each delivery refused 401). The failure is
    now recorded, the other classes registered, and the command names it at the end and
    exits 1; the next run registers it."""
    sim = NextcloudSimulator()
    sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
    first = SUBSCRIBED[0]
    try:
        with serve_simulator(sim) as server:
            settings = _fresh_or_rotated(server.url, rotated)
            before = {h.event: h.id for h in sim.registry.list()}
            env = _cli_env(server.url, redis_url, f"register-failed-{time.time_ns()}") | {
                "NCINDEX_DECK_WEBHOOKS": "true",
                "NCINDEX_WEBHOOK_SECRET": settings.webhook_secret.get_secret_value(),
            }
            http = make_http(settings)
            try:
                client = NextcloudClient.for_account(http, "admin", "admin-pw")
                result, listed, command, as_json, again = _runs_past_a_500(
                    sim, client, settings, env, "POST"
                )
            finally:
                http.close()
    finally:
        sim.close()
    (failure,) = result.failed
    action, kept = ("renew", before[first]) if rotated else ("register", None)
    assert (failure.action, failure.event_class, failure.webhook_id) == (action, first, kept)
    assert "HTTP 500" in failure.error and not result.ok
    by_class = {o.event_class: o.status for o in result.outcomes}
    done = "renewed" if rotated else "registered"
    deck = dict.fromkeys(DECK_SUBSCRIBED, "refused")  # Deck 1.17
    assert by_class == {first: "failed"} | dict.fromkeys(SUBSCRIBED[1:], done) | deck
    current = {h["event"] for h in listed if made_with_secret(h, settings)}
    assert current == set(SUBSCRIBED[1:])  # the first is missing, or left with the old secret
    assert {h["event"] for h in listed} == set(SUBSCRIBED if rotated else SUBSCRIBED[1:])
    assert command.exit_code == 1, command.output
    (row,) = (line for line in command.stdout.splitlines() if line.startswith(first + " "))
    not_done = f"#{kept} not renewed:" if rotated else "not registered:"
    assert row.split()[1] == "failed" and f"  {not_done} " in row, row
    (said,) = command.stderr.splitlines()
    named = f"registration #{kept} ({first}) not renewed" if rotated else f"{first} not registered"
    assert said.startswith(f"error: {named}: "), said
    assert said.endswith("— `ncindex webhooks register` tries again")
    body = json.loads(as_json.output)
    assert as_json.exit_code == 0, as_json.output  # the run after registered it
    assert body["failed"] == [] and body["ok"] is True
    assert {c["class"]: c["result"] for c in body["classes"]}[first] == done
    assert again.ok and again.failed == []


def test_a_refused_login_still_stops_the_registration_at_once() -> None:
    """Guard (it passes on the code before too): a 401 is not recorded as one class's
    failure — every further request would be refused, each a failed login."""
    with _served_admin() as (sim, client, settings):
        sim.faults.set("ocs", status=401, times=1, method="POST")
        with pytest.raises(NextcloudAuthError):
            register(client, settings)
        assert sim.registry.list() == []  # nothing was asked after it


def test_remove_goes_on_past_a_failing_delete_and_names_it(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``webhooks remove`` stopped at the first ``DELETE`` that answered 500, leaving every
    registration after it. The others are now deleted, the failure named at the end (exit
    1); the next run deletes it, and one another admin deleted meanwhile is said gone."""
    sim = NextcloudSimulator()
    sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
    uri = "http://indexer.example.test/hooks/nextcloud"
    try:
        with serve_simulator(sim) as server:
            env = _cli_env(server.url, redis_url, f"remove-failed-{time.time_ns()}")
            assert CliRunner().invoke(main, ["webhooks", "register"], env=env).exit_code == 0
            hooks = sorted((h.id, h.event) for h in sim.registry.list())
            sim.faults.set("ocs", status=500, times=1, method="DELETE")
            command = CliRunner().invoke(main, ["webhooks", "remove"], env=env)
            left = [(h.id, h.event) for h in sim.registry.list()]
            listed = NextcloudClient.list_webhooks

            def list_then_another_admin_deletes(
                self: NextcloudClient, uri: str | None = None
            ) -> list[dict[str, object]]:
                found = listed(self, uri)
                for hook in sim.registry.list():
                    sim.registry.delete(hook.id)
                return found

            monkeypatch.setattr(NextcloudClient, "list_webhooks", list_then_another_admin_deletes)
            as_json = CliRunner().invoke(main, ["webhooks", "remove", "--json"], env=env)
    finally:
        sim.close()
    (failed_id, failed_class), *others = hooks
    assert left == [(failed_id, failed_class)]  # the first failed, every other deleted
    assert command.exit_code == 1, command.output
    table = command.stdout.splitlines()
    assert table[0].split() == ["class", "id", "uri"]
    assert {tuple(line.split()) for line in table[1:-1]} == {(c, str(i), uri) for i, c in others}
    assert table[-1] == f"removed {len(others)} registrations"
    (said,) = command.stderr.splitlines()
    assert said.startswith(f"error: registration #{failed_id} ({failed_class}) not removed: ")
    assert "HTTP 500" in said and said.endswith("— `ncindex webhooks remove` tries again")
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output) == {
        "removed": [],
        "gone": [failed_id],
        "failed": [],
        "untried": [],
    }


def test_a_renewal_whose_registration_was_deleted_meanwhile_registers_it_anew() -> None:
    """nextcloud/server ``WebhooksController::update`` answers an id that no longer exists as
    it answers an update — 200 with the WebhookInfo it was sent — and stores nothing
    (``WebhookListenerMapper::updateWebhookListener``: ``QBMapper::update`` does not look at
    the rows changed). ``register`` read that as ``renewed`` and left the class with no
    registration at all; it now reads the registration back, registers the class anew, says
    so, and has the accounts scanned once Nextcloud listens (the class was not listened to
    meanwhile)."""
    with _served_admin() as (sim, client, settings):
        register(client, settings)
        rotated = settings.model_copy(update={"webhook_secret": SecretStr("rotated-s3cret")})
        first = SUBSCRIBED[0]
        (deleted,) = (h.id for h in sim.registry.list() if h.event == first)
        listed = client.list_webhooks

        def list_then_another_admin_deletes(**kwargs: object) -> list[dict[str, object]]:
            hooks = listed(**kwargs)
            sim.registry.delete(deleted)
            return hooks

        client.list_webhooks = list_then_another_admin_deletes  # type: ignore[method-assign]
        result = register(client, rotated)
        client.list_webhooks = listed  # type: ignore[method-assign]
        now = list_registrations(client, rotated)
    by_class = {o.event_class: o for o in result.outcomes}
    anew = by_class[first]
    assert anew.status == "registered" and anew.webhook_id not in (None, deleted)
    assert anew.reason == f"registration #{deleted} was deleted meanwhile: registered anew"
    assert {by_class[c].status for c in SUBSCRIBED[1:]} == {"renewed"}
    assert result.ok and result.created == [anew.webhook_id] and result.first_registered == [first]
    assert deleted not in result.updated
    (row,) = (line for line in result.table().splitlines() if line.startswith(first + " "))
    assert row.split()[1:3] == ["registered", f"#{anew.webhook_id}"] and "anew" in row
    mine = [h for h in now if h["event"] == first]
    assert [h["id"] for h in mine] == [anew.webhook_id] and made_with_secret(mine[0], rotated)
    assert sorted(h["event"] for h in now) == sorted(SUBSCRIBED)


class _CountingTransport(httpx.HTTPTransport):
    """The network transport, counting the requests sent by method (each attempt, answered
    or not)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: Counter[str] = Counter()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent[request.method] += 1
        return super().handle_request(request)


def test_once_nextcloud_stops_answering_the_classes_left_are_not_attempted() -> None:
    """Nextcloud going down in the middle of ``register`` had each class left wait out its
    own timeout (here a simulator that takes every ``POST`` and never answers it): a run over
    N classes made N requests and took N timeouts to report. After the first request that
    gets no answer the others are not made: the classes left are ``untried``, apart from the
    failure, with the reason."""
    sim = NextcloudSimulator()
    sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
    transport = _CountingTransport()
    try:
        with serve_simulator(sim) as server:
            settings = _settings(server.url).model_copy(update={"http_timeout": 0.5})
            http = make_http(settings, transport=transport)
            sim.faults.set("ocs", timeout=True, method="POST")  # accepts, never answers
            try:
                result = register(NextcloudClient.for_account(http, "admin", "admin-pw"), settings)
            finally:
                sim.faults.clear()  # the request hanging there is answered, to no one
                http.close()
    finally:
        sim.close()
    assert transport.sent == {"GET": 1, "POST": 1}  # the listing, the first registration
    (failure,) = result.failed
    first, *left = subscribed(settings)
    assert (failure.action, failure.event_class, failure.unreachable) == ("register", first, True)
    assert "timed out" in failure.error and not result.ok
    assert [(u.action, u.event_class, u.webhook_id) for u in result.untried] == [
        ("register", c, None) for c in left
    ]
    reason = f"Nextcloud could not be reached ({failure.error})"
    assert {u.reason for u in result.untried} == {reason}
    by_class = {o.event_class: (o.status, o.reason) for o in result.outcomes}
    assert by_class == {first: ("failed", failure.error)} | dict.fromkeys(left, ("untried", reason))
    (row,) = (line for line in result.table().splitlines() if line.startswith(left[0] + " "))
    assert row.split()[1:4] == ["untried", "not", "attempted:"]


def test_the_commands_stop_asking_a_nextcloud_that_went_down_and_say_so_once(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``webhooks register`` and ``webhooks remove`` against a Nextcloud that stopped right
    after the listing (connection refused) made one request per class left, each failing
    alike. Now the first is the one failure and the rest are not attempted: one more line on
    stderr says so, ``--json`` lists them as ``untried`` (not ``failed``), exit 1."""
    sim = NextcloudSimulator()
    sim.add_user("admin", password="admin-pw", display_name="Admin", admin=True)
    namespace = f"unreached-{time.time_ns()}"
    asked: Counter[str] = Counter()
    ocs = NextcloudClient.ocs
    listed = NextcloudClient.list_webhooks
    serving: list[SimulatorServer] = []

    def counted(self: NextcloudClient, method: str, path: str, **kwargs: Any) -> Any:
        asked[method] += 1
        return ocs(self, method, path, **kwargs)

    def list_then_nextcloud_stops(
        self: NextcloudClient, uri: str | None = None
    ) -> list[dict[str, object]]:
        found = listed(self, uri)
        serving[-1].close()
        return found

    def down_after_listing(*args: str, **env: str) -> tuple[Result, dict[str, int]]:
        """``ncindex webhooks *args`` against ``sim`` served anew, which stops answering
        after the listing; the webhook requests it then made, by method."""
        serving.append(serve_simulator(sim))
        asked.clear()
        with monkeypatch.context() as patched:
            patched.setattr(NextcloudClient, "list_webhooks", list_then_nextcloud_stops)
            patched.setattr(NextcloudClient, "ocs", counted)
            command = CliRunner().invoke(
                main, ["webhooks", *args], env=_cli_env(serving[-1].url, redis_url, namespace) | env
            )
        return command, dict(asked)

    try:
        with serve_simulator(sim) as server:
            env = _cli_env(server.url, redis_url, namespace)
            assert CliRunner().invoke(main, ["webhooks", "register"], env=env).exit_code == 0
        hooks = sorted((h.id, h.event) for h in sim.registry.list())
        renew, renew_asked = down_after_listing(
            "register", "--json", NCINDEX_WEBHOOK_SECRET="rotated-s3cret"
        )
        said, _ = down_after_listing("register", NCINDEX_WEBHOOK_SECRET="rotated-s3cret")
        gone, remove_asked = down_after_listing("remove")
    finally:
        for server in serving:
            server.close()
        sim.close()
    assert renew_asked == {"GET": 1, "POST": 1}, renew_asked  # the listing, the first renewal
    assert renew.exit_code == 1, renew.output
    body = json.loads(renew.stdout)
    first, *left = SUBSCRIBED
    ids = {event: webhook_id for webhook_id, event in hooks}
    (failed,) = body["failed"]
    assert (failed["action"], failed["class"], failed["id"]) == ("renew", first, ids[first])
    results = {c["class"]: c["result"] for c in body["classes"]}
    assert results == {first: "failed"} | dict.fromkeys(left, "untried")
    assert [(u["action"], u["class"], u["id"]) for u in body["untried"]] == [
        ("renew", c, ids[c]) for c in left
    ]
    reason = f"Nextcloud could not be reached ({failed['error']})"
    assert {u["reason"] for u in body["untried"]} == {reason} and body["ok"] is False
    assert renew.stderr == "" and said.exit_code == 1, said.output
    said_failed, said_untried = said.stderr.splitlines()
    assert said_failed.startswith(f"error: registration #{ids[first]} ({first}) not renewed: ")
    assert said_untried == (
        f"error: {len(left)} more requests not attempted: {reason} "
        "— `ncindex webhooks register` tries again"
    )
    assert sorted((h.id, h.event) for h in sim.registry.list()) == hooks  # nothing changed
    assert remove_asked == {"GET": 1, "DELETE": 1}, remove_asked  # the listing, the first
    assert gone.exit_code == 1, gone.output
    said_failed, said_untried = gone.stderr.splitlines()
    (first_id, first_listed), *_ = hooks
    assert said_failed.startswith(f"error: registration #{first_id} ({first_listed}) not removed: ")
    assert said_untried.startswith(f"error: {len(hooks) - 1} more requests not attempted: ")
    assert said_untried.endswith("— `ncindex webhooks remove` tries again")


def test_reading_a_registration_back_tells_a_deleted_one_from_an_app_turned_off() -> None:
    """``get_webhook`` (what a renewal is read back with) is ``None`` for OCS 404 only
    (``WebhooksController::show``: ``getById`` found no row); the OCS 998 404 of a route not
    served (webhook_listeners disabled) is no answer about the registration and raises."""
    with _served_admin() as (sim, client, settings):
        made = client.create_webhook(registration(settings, SUBSCRIBED[0]))
        assert client.get_webhook(made["id"]) == made
        assert client.delete_webhook(made["id"]) is True
        assert client.get_webhook(made["id"]) is None
        sim.disable_app("webhook_listeners")
        with pytest.raises(NextcloudProtocolError, match="HTTP 404"):  # XML: `format` unset
            client.get_webhook(made["id"])
