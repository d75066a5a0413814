"""The beat schedule as data, the check task's lock, and the ``reconcile`` / ``status``
commands run as a user would (environment settings, their own store)."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from celery.beat import Scheduler, Service
from click.testing import CliRunner

import workers.beat
from allinone.cli import main
from ncindex.ingest.events import REQUIRED
from ncindex.ingest.registration import (
    LISTENER_CACHE_SECONDS,
    RESCAN_MARGIN_SECONDS,
    ClassOutcome,
    RegisterResult,
    rescan_once_listening,
)
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, SimulatorServer, serve_simulator
from ncindex.sync.reconcile import scan_lock
from support import beir_dataset
from workers.beat import beat_schedule, check_lock_seconds, configure_beat, expires_seconds
from workers.celery_app import create_celery


def test_the_schedule_comes_from_settings() -> None:
    settings = Settings(reconcile_periods={"note": 600, "file": 1200, "deck_card": 60})
    schedule = beat_schedule(settings)
    assert sorted(schedule) == [
        "outage-requeue",
        "poll-shares",
        "reconcile-deck_card",
        "reconcile-file",
        "reconcile-news_item",  # left out of the periods: its default, not no scan at all
        "reconcile-note",
        "rescan-if-forgotten",
        "revoke-app-passwords",
        "sweep-gathered",
    ]
    assert schedule["reconcile-news_item"]["schedule"] == timedelta(seconds=3600)
    note = schedule["reconcile-note"]
    assert note["task"] == "ncindex.reconcile_check"
    assert note["schedule"] == timedelta(seconds=600)
    assert note["kwargs"] == {"doc_type": "note"}
    assert note["options"]["queue"] == "reconcile"
    assert 0 < note["options"]["expires"] < 600
    disabled = beat_schedule(settings.model_copy(update={"reconcile_disable": ["file"]}))
    assert sorted(disabled) == [
        "outage-requeue", "poll-shares", "reconcile-deck_card", "reconcile-news_item",
        "reconcile-note", "rescan-if-forgotten", "revoke-app-passwords", "sweep-gathered",
    ]  # fmt: skip
    assert "last_run_at" not in note  # ncindex up requests its own scans as it starts


def test_shares_are_polled_every_share_poll_seconds_while_files_or_notes_are_scanned() -> None:
    """Nextcloud sends no webhook for a share (ncindex.sync.shares): beat sends the poll,
    to the reconcile queue, every ``share_poll_seconds``; 0 turns it off, and so does
    turning off both scans whose documents shares carry."""
    poll = beat_schedule(Settings(share_poll_seconds=45))["poll-shares"]
    assert poll["task"] == "ncindex.poll_shares"
    assert poll["schedule"] == timedelta(seconds=45)
    assert poll["options"]["queue"] == "reconcile"
    assert 0 < poll["options"]["expires"] < 45
    assert "poll-shares" in beat_schedule(Settings(reconcile_disable=["file"]))
    assert "poll-shares" not in beat_schedule(Settings(share_poll_seconds=0))
    off = Settings(reconcile_disable=["file", "note"])
    assert "poll-shares" not in beat_schedule(off)


def test_the_beat_of_a_deployment_scans_at_its_first_tick() -> None:
    """Celery's in-memory schedule waits a period from each start; a beat restarted more often
    than that never scanned. Its reconcile checks and share poll are due at once; the others a
    minute on."""
    settings = Settings(
        nextcloud_url="http://nextcloud.invalid",
        reconcile_periods={"note": 900, "file": 1800},
        reconcile_disable=["deck_card", "news_item"],
    )
    app = configure_beat(create_celery(settings), settings, scan_at_start=True)
    try:
        due = {
            name: entry.is_due().is_due
            for name, entry in Scheduler(app, lazy=False).schedule.items()
        }
        assert due == {
            "reconcile-note": True, "reconcile-file": True, "poll-shares": True,
            "outage-requeue": False, "rescan-if-forgotten": False, "sweep-gathered": False,
            "revoke-app-passwords": False,
        }  # fmt: skip
    finally:
        app.close()


def test_the_deployment_beat_has_its_stop_handler_before_it_logs_starting() -> None:
    """``celery -A workers.beat beat`` stops on ncindex's handler (``_StopOnce``) from where
    Celery installs its own (``install_sync_handler``, before ``Service.start`` logs "beat:
    Starting..."). Installed at ``beat_init`` it left Celery's handler — close the scheduler
    and raise ``SystemExit`` wherever the main thread is — for the ~40 ms ``Service.start``
    builds the scheduler after that line, where a test or supervisor that waited for it
    signalled."""
    app = workers.beat.app
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        service = Service(app, scheduler_cls=app.conf.beat_scheduler)
        app.Beat().install_sync_handler(service)
        installed = {sig: type(signal.getsignal(sig)).__name__ for sig in handlers}
        assert installed == {signal.SIGTERM: "_StopOnce", signal.SIGINT: "_StopOnce"}
        assert type(service._is_shutdown).__name__ == "_StopFlag"
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        vars(workers.beat).pop("app", None)
        app.close()


@contextmanager
def worker_app(redis_url: str, **settings: Any) -> Iterator[tuple[Celery, redis.Redis]]:
    """The workers' Celery app (tasks imported) for accounts alice and bob on the session's
    Redis, flushed before and after, and a client on that Redis."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    app = create_celery(
        Settings(
            redis_url=redis_url,
            nextcloud_url="http://nextcloud.invalid",
            accounts={"alice": "a", "bob": "b"},
            **settings,
        )
    )
    try:
        app.loader.import_default_modules()
        yield app, client
    finally:
        app.close()
        client.flushdb()
        client.close()


def test_a_redis_that_lost_its_state_has_every_account_scanned(redis_url: str) -> None:
    """A first start, or a Redis restarted empty (queued and debounced tasks gone, Nextcloud
    never delivers twice): every account and enabled doc type is scanned, once."""
    with worker_app(redis_url, reconcile_disable=["news_item"]) as (app, client):
        rescan = app.tasks["ncindex.rescan_if_forgotten"]
        assert rescan.apply().get() == 2 * 3  # note, file, deck_card
        assert client.llen("reconcile") == 6
        assert rescan.apply().get() == 0  # remembered
        client.flushdb()  # Redis restarted without its data
        assert rescan.apply().get() == 6
        # the users of deliveries the receiver refused 503: configured ones, each type once
        client.flushdb()
        users = app.tasks["ncindex.rescan_users"]
        assert users.apply(kwargs={"users": ["alice", "mallory"]}).get() == 3
        assert users.apply(kwargs={"users": ["alice"]}).get() == 0  # still queued


def test_the_scan_a_first_registration_asked_for_is_sent_once_due(redis_url: str) -> None:
    """After a first webhook registration Nextcloud may not send users' changes for five
    minutes (its cached list of listened classes): beat's minute tick scans every account
    once that is over, and only once."""
    with worker_app(redis_url, reconcile_disable=["news_item"]) as (app, client):
        rescan = app.tasks["ncindex.rescan_if_forgotten"]
        assert rescan.apply().get() == 6  # the first start's scans
        client.delete("reconcile", *client.scan_iter("*:pending:*"))  # as if they ran
        keys = Settings().names
        new = RegisterResult([ClassOutcome(REQUIRED[0], "registered", 1)])
        due = rescan_once_listening(client, new, Settings())
        assert due is not None
        assert rescan.apply().get() == 0  # not yet
        client.set(keys.rescan_due, due - LISTENER_CACHE_SECONDS - RESCAN_MARGIN_SECONDS)
        assert rescan.apply().get() == 6  # alice and bob, note, file and deck_card
        assert client.get(keys.rescan_due) is None
        client.delete("reconcile", *client.scan_iter("*:pending:*"))
        assert rescan.apply().get() == 0  # once


def test_periods_of_some_types_leave_the_others_at_their_defaults() -> None:
    """``{"file": 600}`` took every other type's periodic scan away without a word (beat
    scheduled only the types listed; ``NCINDEX_RECONCILE_DISABLE`` is what turns one off)."""
    settings = Settings(reconcile_periods={"file": 600})
    periods = {"note": 900, "file": 600, "deck_card": 1800, "news_item": 3600}
    assert settings.reconcile_periods == periods
    scans = {name for name in beat_schedule(settings) if name.startswith("reconcile-")}
    assert scans == {f"reconcile-{doc_type}" for doc_type in periods}


@pytest.mark.parametrize("period", [10, 60, 900, 86400])
def test_locks_and_expiry_are_shorter_than_the_period(period: int) -> None:
    assert 0 < check_lock_seconds(period) < period
    assert 0 < expires_seconds(period) < period


def test_settings_reject_unknown_doc_types() -> None:
    with pytest.raises(ValueError, match="unknown doc types"):
        Settings(reconcile_disable=["calendar"])
    with pytest.raises(ValueError, match="at least 10"):
        Settings(reconcile_periods={"note": 1})


def test_overlapping_checks_do_not_stack_scans(redis_url: str) -> None:
    with worker_app(redis_url) as (app, client):
        check = app.tasks["ncindex.reconcile_check"]
        assert check.apply(kwargs={"doc_type": "note"}).get() == 2
        assert check.apply(kwargs={"doc_type": "note"}).get() == 0  # the lock holds
        client.delete("ncindex:lock:reconcile-check:note")  # the lock expired: next period
        assert check.apply(kwargs={"doc_type": "note"}).get() == 0  # scans still queued
        assert client.llen("reconcile") == 2
        assert 0 < client.ttl("ncindex:lock:reconcile-check:note") <= check_lock_seconds(900)


@pytest.fixture
def nextcloud() -> Iterator[tuple[NextcloudSimulator, SimulatorServer]]:
    sim = NextcloudSimulator()
    sim.add_user("alice", password="alice-pw")
    for i in range(3):
        sim.put_file("alice", f"/Docs/f{i}.md", f"# File {i}\nlantern {i}")
    sim.put_file("alice", "/Notes/Plan.md", "# Plan\nships")
    server = serve_simulator(sim, host="127.0.0.1", port=0)
    yield sim, server
    server.close()
    sim.close()


def cli_env(nextcloud_url: str, redis_url: str, model_dir: Path, tmp_path: Path) -> dict[str, str]:
    """The ``ncindex`` command's environment for account alice of the simulator at
    ``nextcloud_url``, its store under ``tmp_path``."""
    return {
        "NCINDEX_NEXTCLOUD_URL": nextcloud_url,
        "NCINDEX_ACCOUNTS": json.dumps({"alice": "alice-pw"}),
        "NCINDEX_REDIS_URL": redis_url,
        "NCINDEX_QDRANT_PATH": str(tmp_path / "qdrant"),
        "NCINDEX_MODEL_DIR": str(model_dir),
        "NCINDEX_LOG_LEVEL": "WARNING",
    }


def test_reconcile_and_status_commands(
    nextcloud: tuple[NextcloudSimulator, SimulatorServer],
    redis_url: str,
    model_dir: Path,
    tmp_path: Path,
) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    env = cli_env(nextcloud[1].url, redis_url, model_dir, tmp_path)
    runner = CliRunner()
    dry = runner.invoke(main, ["reconcile", "--doc-type", "file"], env=env)
    assert dry.exit_code == 0, dry.output
    assert "alice file: listed 3, indexed 0" in dry.output and "new 3" in dry.output
    assert "would enqueue 3 (dry run)" in dry.output
    assert client.llen("index") == 0

    applied = runner.invoke(main, ["reconcile", "--user", "alice", "--apply", "--json"], env=env)
    assert applied.exit_code == 0, applied.output
    reports = [json.loads(line) for line in applied.output.splitlines() if line.startswith("{")]
    enqueued = [(r["doc_type"], r["enqueued"]) for r in reports]
    assert enqueued == [("note", 1), ("file", 3), ("deck_card", 0), ("news_item", 0)]
    assert sorted(c["path"] for c in reports[1]["index"]) == [f"/Docs/f{i}.md" for i in range(3)]
    assert client.llen("index") == 2  # the note's task, and one task of the three files

    status = runner.invoke(main, ["status", "--json"], env=env)
    assert status.exit_code == 0, status.output
    data = json.loads(status.output)
    assert data["queues"]["index"] == 2
    assert sorted(data["scans"]) == [
        "alice:deck_card",
        "alice:file",
        "alice:news_item",
        "alice:note",
    ]
    assert data["scans"]["alice:file"]["changes"]["new"] == 3
    assert data["scans"]["alice:file"]["in_sync_age_seconds"] is None  # never in sync yet
    assert data["index_lag_seconds"] >= 0 and data["reserved"] == 0
    client.hset("ncindex:deadletter", "node:42", json.dumps({"reason": "killed the worker"}))
    text = runner.invoke(main, ["status"], env=env)
    assert "dead letters: 1" in text.output and "killed the worker" in text.output
    assert re.search(
        r"scan alice:file: \d+ s ago, listed \d+, \d+ requests, new 3; never in sync yet\n",
        text.output,
    ), text.output

    unknown = runner.invoke(main, ["reconcile", "--user", "mallory"], env=env)
    assert unknown.exit_code != 0 and "mallory" in unknown.output
    client.flushdb()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["reconcile", "--wait", "5"], "--wait applies only with --apply"),
        (["status", "--watch", "--json", "--iterations", "1"], "--json cannot be combined"),
        (["status", "--interval", "5"], "--interval applies only with --watch"),
    ],
)
def test_options_reconcile_and_status_would_ignore_are_refused(
    args: list[str],
    message: str,
    nextcloud: tuple[NextcloudSimulator, SimulatorServer],
    redis_url: str,
    model_dir: Path,
    tmp_path: Path,
) -> None:
    """``--wait`` is for ``reconcile --apply`` (a dry run takes no lock), ``--json`` is not
    for ``status --watch`` and ``--interval`` only for it: each is refused (exit 2), naming
    it, before anything is scanned or shown."""
    env = cli_env(nextcloud[1].url, redis_url, model_dir, tmp_path)
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert "alice" not in result.output and "queues:" not in result.output


def test_reconcile_apply_takes_the_scan_lock_of_the_task(
    nextcloud: tuple[NextcloudSimulator, SimulatorServer],
    redis_url: str,
    model_dir: Path,
    tmp_path: Path,
) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    env = cli_env(nextcloud[1].url, redis_url, model_dir, tmp_path)
    settings = Settings(
        redis_url=redis_url, nextcloud_url=nextcloud[1].url, accounts={"alice": "alice-pw"}
    )
    runner = CliRunner()
    # a scan of alice's files is running (the task's lock, taken through the same helper)
    with scan_lock(client, settings.names, "alice", "file", ttl=60, wait=0) as held:
        assert held
        busy = runner.invoke(main, ["reconcile", "--doc-type", "file", "--apply"], env=env)
        assert busy.exit_code == 3, busy.output
        assert "alice file: a scan is running; skipped" in busy.output
        assert client.llen("index") == 0
        # the lock is the task's: a scan task delivered now skips too
        app = create_celery(settings)
        try:
            app.loader.import_default_modules()
            scan = app.tasks["ncindex.reconcile_scan"]
            outcome = scan.apply(kwargs={"user": "alice", "doc_type": "file"}).get()
            assert outcome == {"skipped": "running"}
        finally:
            app.close()
        # a dry run takes no lock
        dry = runner.invoke(main, ["reconcile", "--doc-type", "file"], env=env)
        assert dry.exit_code == 0 and "would enqueue 3" in dry.output
    done = runner.invoke(main, ["reconcile", "--doc-type", "file", "--apply"], env=env)
    assert done.exit_code == 0, done.output
    assert "enqueued 3" in done.output or "enqueue 3" in done.output, done.output
    assert client.llen("index") == 1  # the three files in one ncindex.index_nodes task
    client.flushdb()


def test_long_commands_draw_progress_bars_on_a_terminal(
    nextcloud: tuple[NextcloudSimulator, SimulatorServer],
    redis_url: str,
    model_dir: Path,
    tmp_path: Path,
) -> None:
    redis.Redis.from_url(redis_url).flushdb()
    env = cli_env(nextcloud[1].url, redis_url, model_dir, tmp_path)
    terminal = env | {"TTY_COMPATIBLE": "1"}  # rich: stderr is a terminal
    runner = CliRunner()
    applied = runner.invoke(main, ["reconcile", "--apply"], env=terminal)
    assert applied.exit_code == 0, applied.output
    assert "4/4" in applied.stderr  # one scan per doc type of the one account
    assert "alice file: listed 3" in applied.stdout
    plain = runner.invoke(main, ["reconcile"], env=env)
    assert plain.stderr == ""  # no terminal, no bar

    data = beir_dataset(tmp_path / "beir")
    evaluated = runner.invoke(main, ["eval", str(data), "--mode", "bm25"], env=terminal)
    assert evaluated.exit_code == 0, evaluated.output
    assert "library queries" in evaluated.stderr and "2/2" in evaluated.stderr
    assert "bm25 (library)" in evaluated.stdout
