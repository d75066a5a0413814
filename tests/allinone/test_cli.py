"""The command line reports bad configuration as one line and exit status 1, and refuses an
option it would ignore or that names nothing (exit status 2) before doing anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner, Result

from allinone.cli import main, progress_line
from ncindex import __version__
from ncindex.errors import NextcloudAuthError
from ncindex.names import Names
from ncindex.progress import Progress
from ncindex.settings import Settings
from support import ROOT, beir_dataset


def test_bad_setting_is_one_line_naming_the_variable() -> None:
    result = CliRunner().invoke(main, ["webhooks", "list"], env={"NCINDEX_PORT": "abc"})
    assert result.exit_code == 1
    assert "setting NCINDEX_PORT" in result.output
    assert "Traceback" not in result.output


def test_every_bad_setting_is_named_with_its_error_type() -> None:
    env = {
        "NCINDEX_QDRANT_HNSW_M": "-1",
        "NCINDEX_QDRANT_MAX_SEGMENT_SIZE_KB": "99999999999999999999",
        "NCINDEX_QDRANT_SPARSE_FULL_SCAN_SHARE": "nan",
        "NCINDEX_EDGE_OPTIMIZE_CHECK_SECONDS": "1e-9",
        "NCINDEX_QDRANT_URL": "not a url",
        "NCINDEX_LOG_LEVEL": "verbose",
    }
    result = CliRunner().invoke(main, ["webhooks", "list"], env=env)
    assert result.exit_code == 1 and "Traceback" not in result.output
    found = {
        part.split(":", 1)[0].removeprefix("setting "): part.rsplit("[", 1)[-1].rstrip("]")
        for part in result.output.removeprefix("Error: ").strip().split("; ")
    }
    assert found == {
        "NCINDEX_QDRANT_HNSW_M": "greater_than_equal",
        "NCINDEX_QDRANT_MAX_SEGMENT_SIZE_KB": "less_than_equal",
        "NCINDEX_QDRANT_SPARSE_FULL_SCAN_SHARE": "finite_number",
        "NCINDEX_EDGE_OPTIMIZE_CHECK_SECONDS": "greater_than_equal",
        "NCINDEX_QDRANT_URL": "value_error",
        "NCINDEX_LOG_LEVEL": "value_error",
    }
    assert "99999999999999999999" not in result.output  # never the value
    crossed = {
        "NCINDEX_QDRANT_REPLICATION_FACTOR": "2",
        "NCINDEX_QDRANT_WRITE_CONSISTENCY_FACTOR": "3",
    }
    result = CliRunner().invoke(main, ["webhooks", "list"], env=crossed)
    assert result.exit_code == 1
    assert "settings: Value error, qdrant_write_consistency_factor must not exceed" in result.output


def test_unreadable_accounts_and_a_wrong_redis_scheme_are_named(tmp_path) -> None:
    """Each was a traceback, or a message naming pydantic's source instead of the variable."""
    broken = tmp_path / "accounts.json"
    broken.write_text("{alice: pw")
    cases = {
        "NCINDEX_ACCOUNTS": ("{bad", "setting NCINDEX_ACCOUNTS: not valid JSON"),
        "NCINDEX_ACCOUNTS_FILE": (str(tmp_path / "none.json"), "none.json cannot be read"),
        "NCINDEX_REDIS_URL": ("htp://127.0.0.1:6379/0", "redis://, rediss:// or unix://"),
    }
    for variable, (value, said) in cases.items():
        result = CliRunner().invoke(main, ["status"], env={variable: value})
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert said in result.output, result.output
    result = CliRunner().invoke(main, ["status"], env={"NCINDEX_ACCOUNTS_FILE": str(broken)})
    assert "accounts.json is not JSON" in result.output and "alice: pw" not in result.output


@pytest.mark.parametrize(
    ("url", "said"),
    [
        # redis-py passes each query parameter to the scheme's connection class: only
        # rediss://'s SSLConnection takes ssl_* (TypeError from AbstractConnection.__init__)
        (
            "redis://127.0.0.1:6379/0?ssl_password=hunter2",
            "setting NCINDEX_REDIS_URL: Value error, redis-py takes no ssl_password on a "
            "redis:// URL (ssl_* need rediss://) [value_error]",
        ),
        ("unix:///tmp/redis.sock?ssl_keyfile=/k.pem", "takes no ssl_keyfile on a unix:// URL"),
        ("redis://127.0.0.1:6379/0?Password=hunter2", "takes no Password on a redis:// URL"),
        # parse_url's own refusals (ValueError) and the connection's (ConnectionError)
        ("redis://127.0.0.1:6379/0?db=one", "Invalid value for 'db' in connection URL"),
        ("redis://127.0.0.1:6379/0?protocol=5", "protocol must be either 2 or 3"),
    ],
)
def test_a_query_redis_py_refuses_is_one_line_naming_the_variable(url: str, said: str) -> None:
    """A parameter the connection class does not take ended every command in redis-py's
    traceback at its first Redis command; the others ended in a line naming no setting."""
    result = CliRunner().invoke(main, ["status"], env={"NCINDEX_REDIS_URL": url})
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith("Error: setting NCINDEX_REDIS_URL: "), result.output
    assert said in result.output and "hunter2" not in result.output, result.output
    assert result.output.count("\n") == 1, result.output


def test_a_query_redis_py_takes_is_accepted() -> None:
    """Accepted: what the connection class takes, as rediss://'s ``ssl_*`` (which Celery's
    kombu passes on to redis-py in its ``ssl`` options too)."""
    url = "rediss://127.0.0.1:6380/0?ssl_password=pw&ssl_cert_reqs=required"
    assert Settings(redis_url=url).redis_url == url


def test_missing_accounts_and_unreachable_nextcloud_are_reported() -> None:
    env = {"NCINDEX_NEXTCLOUD_URL": "http://127.0.0.1:9", "NCINDEX_ACCOUNTS": "{}"}
    result = CliRunner().invoke(main, ["webhooks", "list"], env=env)
    assert result.exit_code == 1 and "no Nextcloud accounts configured" in result.output
    assert "ValueError" not in result.output  # a message for the user, not a Python class
    nested = CliRunner().invoke(
        main, ["webhooks", "list"], env={"NCINDEX_ACCOUNTS": '{"alice": 5}'}
    )
    assert "setting NCINDEX_ACCOUNTS[alice]" in nested.output, nested.output
    env["NCINDEX_ACCOUNTS"] = '{"admin": "pw"}'
    result = CliRunner().invoke(main, ["webhooks", "list"], env=env)
    assert result.exit_code == 1 and "NextcloudUnavailable" in result.output
    # it said "GET /ocs/...: [Errno 111] Connection refused": no host, no setting
    assert "(NCINDEX_NEXTCLOUD_URL=http://127.0.0.1:9)" in result.output, result.output


def test_up_against_a_nextcloud_names_every_missing_setting_at_once(redis_url: str) -> None:
    """``NCINDEX_NEXTCLOUD_URL=… make run`` refused one missing setting per run: the webhook
    secret, then, once set, the accounts. Both are named in the first refusal."""
    env = {
        "NCINDEX_REDIS_URL": redis_url,
        "NCINDEX_NEXTCLOUD_URL": "http://127.0.0.1:9",
        "NCINDEX_ACCOUNTS": "{}",
        "NCINDEX_WEBHOOK_SECRET": "",
    }
    result = CliRunner().invoke(main, ["up"], env=env)
    assert result.exit_code == 1, result.output
    said = result.output.strip().splitlines()[-1]
    assert said.startswith(
        "Error: a configured Nextcloud (NCINDEX_NEXTCLOUD_URL=http://127.0.0.1:9)"
    )
    assert "NCINDEX_WEBHOOK_SECRET" in said and "NCINDEX_ACCOUNTS" in said, said


@pytest.mark.parametrize(
    "url",
    [
        "redis://:hunter2@127.0.0.1:9/0",  # nothing listens on port 9
        # redis-py's from_url reads these query parameters as credentials too
        "redis://127.0.0.1:9/0?password=hunter2",
        "redis://127.0.0.1:9/0?username=hunter2&pass%77ord=hunter2",
        "rediss://127.0.0.1:9/0?ssl_password=hunter2",
    ],
)
@pytest.mark.parametrize(
    "args",
    [["retry", "--all"], ["retry", "file:1"], ["reindex"], ["failures"], ["status"]],
)
def test_redis_down_is_one_line_without_its_password(
    args: list[str], url: str, tmp_path: Path
) -> None:
    """``retry`` and ``reindex`` ended in redis-py's traceback; ``failures`` and ``status``
    said the URL with its password (a password in the query: all of them)."""
    env = {"NCINDEX_REDIS_URL": url, "NCINDEX_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    scheme = url.partition(":")[0]
    assert result.output.startswith(f"Error: Redis at {scheme}://127.0.0.1:9/0: ConnectionError")
    assert "hunter2" not in result.output
    assert "— is Redis running there? Check NCINDEX_REDIS_URL" in result.output


def test_a_unix_socket_redis_url_is_named_as_it_was_written(tmp_path: Path) -> None:
    """A URL without credentials is said as it is: the messages' password filter rebuilt it
    with ``urlunsplit``, which wrote ``unix:///path`` as ``unix:/path`` (and ``ncindex up``
    then said credentials had been left out)."""
    url = f"unix://{tmp_path}/none.sock?db=1"  # no socket there
    env = {"NCINDEX_REDIS_URL": url, "NCINDEX_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(main, ["status"], env=env)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert result.output.startswith(f"Error: Redis at {url}: ConnectionError"), result.output


def test_status_with_the_qdrant_server_down_shows_the_rest(redis_url: str) -> None:
    """It ended with ``Error: StoreUnavailable`` and showed nothing: queues, scans, dead
    letters and workers are read from Redis, and only the indexed counts need the store."""
    env = {
        "NCINDEX_REDIS_URL": redis_url,
        "NCINDEX_NAMESPACE": f"cli-{uuid.uuid4().hex[:8]}",
        "NCINDEX_QDRANT_URL": "http://127.0.0.1:9",  # nothing listens there
        "NCINDEX_ACCOUNTS": '{"alice": "pw"}',
    }
    result = CliRunner().invoke(main, ["status"], env=env)
    assert result.exit_code == 0, result.output
    assert "queues: " in result.output, result.output
    assert "user alice: indexed: ? (store not readable);" in result.output
    assert "store: not readable: qdrant" in result.output
    result = CliRunner().invoke(main, ["status", "--json"], env=env)
    assert result.exit_code == 0, result.output
    store = json.loads(result.output)["store"]
    assert store["engine"] == "qdrant-server" and "Connection refused" in store["error"]


def test_status_in_an_empty_namespace_names_the_namespaces_holding_data(redis_url: str) -> None:
    """``make run`` keeps its keys under ``ncindex-up``; ``ncindex status`` in a shell without
    NCINDEX_NAMESPACE said "scans: none recorded" and "workers: none answered a ping" and
    nothing more. It names the namespaces whose scans are in this Redis, and the variable."""
    from ncindex.documents import DocType
    from ncindex.sync.reconcile import ScanReport, ScanState, last_scans_key

    other = f"cli-up-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url)
    key = last_scans_key(Names(other))
    report = ScanReport(user="alice", doc_type="file", started_at=time.time(), applied=True)
    ScanState(client, "alice", DocType.FILE, Names(other)).record(report)
    try:
        env = {"NCINDEX_REDIS_URL": redis_url, "NCINDEX_NAMESPACE": f"cli-{other[7:]}"}
        result = CliRunner().invoke(main, ["status"], env=env)
        assert result.exit_code == 0, result.output
        line = next(s for s in result.output.splitlines() if "other namespaces" in s)
        assert other in line and "NCINDEX_NAMESPACE" in line, result.output
        data = json.loads(CliRunner().invoke(main, ["status", "--json"], env=env).output)
        assert other in data["other_namespaces"]
        # in the namespace that holds the scans, nothing is said of other namespaces
        env["NCINDEX_NAMESPACE"] = other
        result = CliRunner().invoke(main, ["status"], env=env)
        assert result.exit_code == 0 and "other namespaces" not in result.output, result.output
    finally:
        client.delete(key)
        client.close()


def test_up_refuses_no_sample_with_a_configured_nextcloud() -> None:
    """A configured Nextcloud gets no sample corpus: ``--no-sample`` was taken and ignored."""
    env = {"NCINDEX_NEXTCLOUD_URL": "http://127.0.0.1:9", "NCINDEX_ACCOUNTS": '{"a": "pw"}'}
    result = CliRunner().invoke(main, ["up", "--no-sample"], env=env)
    assert result.exit_code == 2, result.output
    assert "--no-sample applies only with the bundled sample Nextcloud" in result.output


def test_version_and_short_help() -> None:
    assert __version__ in CliRunner().invoke(main, ["--version"]).output
    assert "Usage:" in CliRunner().invoke(main, ["-h"]).output


def test_the_sample_indexed_line_repeats_the_search_page(capsys) -> None:
    """By the time the sample is indexed the start's lines have scrolled away under the
    tasks' log lines: the line that says so names the search page and alice's password."""
    from types import SimpleNamespace

    from pydantic import SecretStr

    from allinone.cli import _report_sample

    running = SimpleNamespace(
        url="http://127.0.0.1:8080",
        sample=SimpleNamespace(documents=368),
        settings=Settings(accounts={"alice": SecretStr("alice-pw")}),
        sample_current=lambda: True,
    )
    signals = SimpleNamespace(wait=lambda timeout: False)
    _report_sample(running, signals)
    out = capsys.readouterr().out
    assert out.startswith("Sample corpus indexed: 368 documents current in the store after ")
    assert "Search page: http://127.0.0.1:8080/ (alice / alice-pw)" in out


def _up_stand_in(settings: Settings, private: Any = None, close: Any = None) -> Any:
    """What ``_serve`` reads of a running ``ncindex up``: its URL and ``settings``, no sample,
    no webhooks, ``private`` (its private redis-server, or ``None``) and ``close``."""
    from types import SimpleNamespace

    return SimpleNamespace(
        url="http://127.0.0.1:8080",
        settings=settings,
        redis=private,
        webhooks=None,
        simulator=None,
        sample=None,
        close=close or (lambda: None),
    )


@pytest.mark.parametrize(
    "url",
    [
        "redis://default:hunter2@127.0.0.1:6379/0",
        "redis://127.0.0.1:6379/0?username=default&pass%77ord=hunter2",
    ],
)
def test_up_prints_the_redis_url_without_its_password(url: str, capsys) -> None:
    """``ncindex up``'s "Redis:" and "Watch the indexing" lines printed NCINDEX_REDIS_URL as
    it was, password and all, into the terminal and whatever logs it."""
    from types import SimpleNamespace

    from allinone.cli import _serve

    settings = Settings(redis_url=url, nextcloud_url="http://127.0.0.1:9", namespace="nci")
    closed: list[bool] = []
    running = _up_stand_in(settings, close=lambda: closed.append(True))
    signals = SimpleNamespace(wait=lambda: None)  # a stop signal at once
    _serve(running, settings, signals, quiet=False)
    out = capsys.readouterr().out
    assert closed and "hunter2" not in out, out
    shown = "redis://127.0.0.1:6379/0"
    assert f"Redis: {shown} (NCINDEX_REDIS_URL; credentials left out)" in out
    assert f"Watch the indexing: NCINDEX_REDIS_URL={shown} NCINDEX_NAMESPACE=nci " in out


def test_up_says_whether_the_redis_url_is_set_or_the_default(monkeypatch, capsys) -> None:
    """The "Redis:" line said "NCINDEX_REDIS_URL or the default" whether the variable was set
    or not; it names the one in use."""
    from types import SimpleNamespace

    from allinone.cli import _serve

    monkeypatch.delenv("NCINDEX_REDIS_URL", raising=False)
    signals = SimpleNamespace(wait=lambda: None)  # a stop signal at once
    default = Settings(nextcloud_url="http://127.0.0.1:9", namespace="nci")
    _serve(_up_stand_in(default), default, signals, quiet=False)
    shown = default.redis_url
    assert (
        f"Redis: {shown} (the default; NCINDEX_REDIS_URL is not set)\n" in capsys.readouterr().out
    )
    monkeypatch.setenv("NCINDEX_REDIS_URL", "redis://127.0.0.1:6379/10")
    given = Settings(nextcloud_url="http://127.0.0.1:9", namespace="nci")
    _serve(_up_stand_in(given), given, signals, quiet=False)
    assert "Redis: redis://127.0.0.1:6379/10 (NCINDEX_REDIS_URL)\n" in capsys.readouterr().out


@pytest.mark.parametrize("explicit", [True, False])
def test_up_says_when_the_redis_url_set_did_not_answer(explicit: bool, capsys) -> None:
    """An NCINDEX_REDIS_URL set but not answering made ``ncindex up`` start a private
    redis-server without a word of the URL given; one line says so (only when it was set)."""
    from types import SimpleNamespace

    from allinone.cli import _serve
    from ncindex.redis_server import start_redis

    given = Settings(namespace="nci", nextcloud_url="http://127.0.0.1:9")
    if explicit:
        given = Settings(
            namespace="nci", nextcloud_url="http://127.0.0.1:9", redis_url="redis://u:pw@h:9/0"
        )
    private = start_redis()
    try:
        running = _up_stand_in(given.model_copy(update={"redis_url": private.url}), private=private)
        _serve(running, given, SimpleNamespace(wait=lambda: None), quiet=False)
    finally:
        private.stop()
    said = [s for s in capsys.readouterr().out.splitlines() if "did not answer" in s]
    if explicit:
        assert said == [
            f"NCINDEX_REDIS_URL redis://h:9/0 did not answer: started a private redis-server "
            f"at {private.url} instead (gone when this stops)"
        ]
    else:
        assert said == []


def test_the_printed_status_command_runs_in_a_fresh_shell(monkeypatch, capsys) -> None:
    """``make run`` starts ``.venv/bin/ncindex up``, whose venv is on no PATH: the "Watch the
    indexing" line said ``ncindex status --watch``, "command not found" in a fresh shell. The
    command it prints runs there, from any directory (``--version`` for ``status --watch``)."""
    from types import SimpleNamespace

    from allinone.cli import _serve

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", [".venv/bin/ncindex", "up"])
    fresh = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    monkeypatch.setenv("PATH", fresh["PATH"])
    settings = Settings(nextcloud_url="http://127.0.0.1:9", namespace="nci")
    _serve(_up_stand_in(settings), settings, SimpleNamespace(wait=lambda: None), quiet=False)
    line = next(s for s in capsys.readouterr().out.splitlines() if "status --watch" in s)
    command = line.split("NCINDEX_NAMESPACE=nci ", 1)[1].split(" status --watch")[0]
    assert command == str(ROOT / ".venv/bin/ncindex"), line
    ran = subprocess.run(  # a fresh shell may start in another directory (its home)
        f"{command} --version", shell=True, env=fresh, cwd="/", capture_output=True, text=True
    )
    assert ran.returncode == 0 and __version__ in ran.stdout, ran.stderr


def test_the_printed_command_is_the_bare_name_when_path_finds_this_script(monkeypatch) -> None:
    """With the venv's ``bin`` on PATH (an activated venv) the bare name works and is shown;
    started some other way (``python -m``, a test runner) the script beside this Python."""
    from allinone.cli import ncindex_command

    script = Path(sys.executable).parent / "ncindex"
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    assert ncindex_command(str(script)) == "ncindex"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert ncindex_command("/nowhere/pytest") == str(script)
    # make run starts .venv/bin/ncindex: printed as it runs from another directory too
    monkeypatch.chdir(script.parent.parent)
    assert ncindex_command(f"bin/{script.name}") == str(Path.cwd() / "bin" / script.name)


def test_the_progress_line_follows_what_is_pending_per_account(redis_url: str) -> None:
    """``ncindex up`` without NCINDEX_LOG_LEVEL prints this instead of every task's lines:
    what is pending and the recent rate while busy, "caught up" once, nothing while idle.
    What is pending is counted per account and subject — a file shared with bob is pending
    for alice and for bob, a folder until a worker looks — and the line said "documents
    pending": ``make run``'s first line read "376 documents pending" for its 368 documents."""
    keys = Names(f"t{uuid.uuid4().hex[:8]}")
    progress = Progress(redis.Redis.from_url(redis_url), keys)
    assert progress_line(progress, was_busy=False) == (None, False)
    progress.queued("alice", ["node:1", "node:2"])  # node:2: a folder, until looked at
    progress.queued("bob", ["node:1", "node:3"])  # node:1: alice's file, shared with bob
    progress.finished("bob", "node:3", "indexed", 2)
    line, busy = progress_line(progress, was_busy=False)
    assert busy and line is not None
    assert line.startswith(
        "Indexing: 3 pending, counted per account (files, folders, notes, cards, news items); "
        "1 finished in the last "
    ), line
    assert "documents" not in line
    progress.finished("bob", "node:1", "indexed", 1)
    for subject in ("node:1", "node:2"):
        progress.finished("alice", subject, "indexed", 1)
    assert progress_line(progress, was_busy=True) == (
        "Indexing: caught up, nothing pending.",
        False,
    )
    assert progress_line(progress, was_busy=False) == (None, False)


def test_a_quiet_up_logs_no_line_per_request() -> None:
    """``ncindex up`` without NCINDEX_LOG_LEVEL says it logs warnings and errors only once
    started, yet every webhook delivery and search went on being logged at INFO by werkzeug
    (its logger has a level of its own once it has logged a request, which the root logger's
    level does not override)."""
    import logging
    from types import SimpleNamespace

    from allinone.cli import _serve

    root, wz = logging.getLogger(), logging.getLogger("werkzeug")
    saved = root.level, wz.level
    # werkzeug's level as its first logged request sets it in a fresh process (werkzeug
    # ``_internal._log``: INFO when unset, once per process, so a request made here would not
    # set it again after an earlier test's)
    wz.setLevel(logging.INFO)
    try:
        settings = Settings(nextcloud_url="http://127.0.0.1:9", namespace="nci")
        running = _up_stand_in(settings)
        running.services = SimpleNamespace(redis=None)  # for the progress thread
        _serve(running, settings, SimpleNamespace(wait=lambda *_: True), quiet=True)
        assert not wz.isEnabledFor(logging.INFO)
        assert not root.isEnabledFor(logging.INFO)
    finally:
        root.setLevel(saved[0])
        wz.setLevel(saved[1])


def test_a_one_shot_command_logs_warnings_only_unless_the_level_is_set(
    redis_url: str, tmp_path: Path, model_dir: Path
) -> None:
    """NCINDEX_LOG_LEVEL defaults to INFO, and ``ncindex reconcile`` (with --json too) wrote
    each report again as a ``reconcile_scan`` JSON line on stderr. Unset, a one-shot command
    logs warnings and errors only; set, it logs at that level. A subprocess: logging is
    configured once per process."""
    from ncindex.simulator import NextcloudSimulator, serve_simulator

    sim = NextcloudSimulator()
    sim.add_user("alice", password="alice-pw")
    sim.put_file("alice", "/Docs/tides.md", "# Tides\nhigh water at noon")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCINDEX_")} | {
        "PYTHONPATH": str(ROOT),
        "NCINDEX_ACCOUNTS": json.dumps({"alice": "alice-pw"}),
        "NCINDEX_REDIS_URL": redis_url,
        "NCINDEX_NAMESPACE": f"cli-{uuid.uuid4().hex[:8]}",
        "NCINDEX_DATA_DIR": str(tmp_path / "data"),
        "NCINDEX_MODEL_DIR": str(model_dir),
    }
    command = [str(Path(sys.executable).parent / "ncindex"), "reconcile", "--doc-type", "file"]
    try:
        with serve_simulator(sim) as server:
            env["NCINDEX_NEXTCLOUD_URL"] = server.url
            runs = {
                (level, json_out): subprocess.run(
                    command + (["--json"] if json_out else []),
                    env=env | ({"NCINDEX_LOG_LEVEL": level} if level else {}),
                    capture_output=True,
                    text=True,
                    timeout=120,
                    check=False,
                )
                for level in ("", "INFO")
                for json_out in (False, True)
            }
    finally:
        sim.close()
    for (level, json_out), done in runs.items():
        assert done.returncode == 0, done.stderr
        assert "alice" in done.stdout and "file" in done.stdout  # the report itself
        logged = '"event": "reconcile_scan"' in done.stderr
        assert logged is (level == "INFO"), (level, json_out, done.stderr)


def test_reconcile_without_accounts_says_so() -> None:
    result = CliRunner().invoke(main, ["reconcile"], env={"NCINDEX_ACCOUNTS": "{}"})
    assert result.exit_code == 1
    assert "no Nextcloud accounts configured (NCINDEX_ACCOUNTS)" in result.output


def test_account_commands_without_a_nextcloud_say_what_to_do_under_make_run() -> None:
    """Under ``make run`` (no NCINDEX_NEXTCLOUD_URL, no accounts) the accounts are those of the
    simulator inside ``ncindex up``: the error says so and what to do, not only that none is
    configured (before: only ``no Nextcloud accounts configured``). With a Nextcloud URL set,
    the short message stays."""
    for args in (["release", "alice"], ["forget", "alice"], ["reconcile"]):
        result = CliRunner().invoke(main, args, env={"NCINDEX_ACCOUNTS": "{}"})
        assert result.exit_code == 1, result.output
        assert "no Nextcloud accounts configured (NCINDEX_ACCOUNTS); " in result.output
        assert "start `ncindex up` again" in result.output, result.output
    env = {"NCINDEX_ACCOUNTS": "{}", "NCINDEX_NEXTCLOUD_URL": "http://127.0.0.1:9"}
    result = CliRunner().invoke(main, ["release", "alice"], env=env)
    assert result.output == "Error: no Nextcloud accounts configured (NCINDEX_ACCOUNTS)\n"


def _env(redis_url: str, tmp_path: Path, model_dir: Path) -> dict[str, str]:
    """Settings of a command that finds Redis, its own store folder and the models."""
    return {
        "NCINDEX_ACCOUNTS": json.dumps({"alice": "alice-pw"}),
        "NCINDEX_REDIS_URL": redis_url,
        "NCINDEX_DATA_DIR": str(tmp_path / "data"),
        "NCINDEX_MODEL_DIR": str(model_dir),
        "NCINDEX_LOG_LEVEL": "WARNING",
    }


def _refused(result: Result, *words: str) -> None:
    """A usage error (exit 2), one message naming ``words``, no traceback."""
    assert result.exit_code == 2, result.output
    assert all(w in result.output for w in words), result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (
            ["reindex", "--wait", "5"],
            "--wait applies only with --model, --finish, --analyzer or --layout",
        ),
        (["reindex", "--back", "--wait", "5"], "--wait applies only with"),
        (["retry", "file:1", "--user", "alice"], "--user applies only with --all"),
        (["failures", "--user", "nobody"], "'--user': not a configured account: nobody"),
        (["retry", "--all", "--user", "nobody"], "'--user': not a configured account: nobody"),
    ],
)
def test_options_that_would_be_ignored_or_match_nothing_are_refused(
    args: list[str], named: str, redis_url: str, tmp_path: Path, model_dir: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    _refused(CliRunner().invoke(main, args, env=_env(redis_url, tmp_path, model_dir)), named)
    assert client.dbsize() == 0  # refused before anything was queued or sent back


def test_reindex_finish_without_a_second_model_is_refused_like_back(
    redis_url: str, tmp_path: Path, model_dir: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    env = _env(redis_url, tmp_path, model_dir)
    back = CliRunner().invoke(main, ["reindex", "--back"], env=env)
    assert back.exit_code == 1 and "no standby model to switch back to" in back.output
    for args in (["reindex", "--finish"], ["reindex", "--finish", "--wait", "5"]):
        finish = CliRunner().invoke(main, args, env=env)
        assert finish.exit_code == 1, finish.output
        assert "no second model to finish (no standby, none being built)" in finish.output
        assert "queued" not in finish.output and "Traceback" not in finish.output
    assert client.dbsize() == 0  # no ncindex.reindex_finish task queued


def test_eval_refuses_a_json_file_it_could_not_write_before_the_run(
    redis_url: str, tmp_path: Path, model_dir: Path
) -> None:
    data = str(beir_dataset(tmp_path / "beir"))
    env = _env(redis_url, tmp_path, model_dir)
    missing = tmp_path / "missing" / "out.json"
    args = ["eval", data, "--mode", "bm25", "--json", str(missing)]
    result = CliRunner().invoke(main, args, env=env)
    _refused(result, "'--json'", f"folder {missing.parent} does not exist")
    assert "judged queries" not in result.output  # refused before the run, not after it


def test_eval_refuses_a_cache_that_is_not_sqlite_before_the_run(
    redis_url: str, tmp_path: Path, model_dir: Path
) -> None:
    data = str(beir_dataset(tmp_path / "beir"))
    env = _env(redis_url, tmp_path, model_dir)
    text = tmp_path / "a.txt"
    text.write_text("not a database, just words\n")
    result = CliRunner().invoke(
        main, ["eval", data, "--mode", "bm25", "--cache", str(text)], env=env
    )
    _refused(result, "'--cache'", "file is not a database")
    assert "judged queries" not in result.output
    assert text.read_text() == "not a database, just words\n"
    result = CliRunner().invoke(
        main, ["eval", data, "--via", "product", "--cache", str(tmp_path / "c.sqlite")], env=env
    )
    _refused(result, "--cache applies only with --via library or both")
    # a cache that does not exist yet is made, with its folder, and the run writes its JSON
    cache, out = tmp_path / "new" / "vectors.sqlite", tmp_path / "out.json"
    args = ["eval", data, "--mode", "bm25", "--cache", str(cache), "--json", str(out)]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 0, result.output
    assert cache.is_file() and json.loads(out.read_text())["queries"] == 2


def test_a_webhook_command_refused_names_the_account_it_acts_as() -> None:
    """A 403 (not an admin) or 401 said only Nextcloud's words, not which account was used;
    the account may be an admin or a user delegated the "Webhooks" admin setting
    (nextcloud/server WebhooksController: #[AuthorizedAdminSetting(settings: Admin::class)])."""
    from ncindex.simulator import NextcloudSimulator, serve_simulator

    sim = NextcloudSimulator(seed=1)
    sim.add_user("bob", "bob-pw")  # not an admin
    with serve_simulator(sim) as srv:
        env = {"NCINDEX_NEXTCLOUD_URL": srv.url, "NCINDEX_ACCOUNTS": '{"bob": "bob-pw"}'}
        refused = CliRunner().invoke(main, ["webhooks", "list"], env=env)
        sim.delegate_setting("bob", "OCA\\WebhookListeners\\Settings\\Admin")
        delegated = CliRunner().invoke(main, ["webhooks", "list", "--json"], env=env)
        env["NCINDEX_ACCOUNTS"] = '{"bob": "wrong"}'
        wrong = CliRunner().invoke(main, ["webhooks", "list"], env=env)
    sim.close()
    for result, kind in ((refused, "Forbidden"), (wrong, "NextcloudAuthError")):
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert kind in result.output and "act as 'bob' (NCINDEX_ADMIN_USER" in result.output
        assert 'delegated the "Webhooks" admin privilege' in result.output
    assert delegated.exit_code == 0, delegated.output
    assert json.loads(delegated.output) == {"webhooks": []}


def test_forget_takes_a_user_deleted_from_nextcloud_out_of_the_index(
    redis_url: str, tmp_path: Path, model_dir: Path
) -> None:
    """``ncindex forget carol`` after ``occ user:delete carol``: Nextcloud answers the admin
    OCS 404 "User does not exist" (nextcloud/server ``AUserDataOCSController::getUserData``),
    so her private file leaves the index and ``user:carol`` the acl of alice's file shared
    with her. ``forget bob`` (he exists) changes nothing and exits 1. Both are asked while a
    refusal holds alice's (the webhook admin's) credential back: the operator's command."""
    from ncindex.index.indexing import Indexer
    from ncindex.runtime import Services
    from ncindex.simulator import NextcloudSimulator, serve_simulator

    sim = NextcloudSimulator()
    sim.add_user("alice", password="alice-pw", admin=True)
    sim.add_user("bob", password="bob-pw")
    sim.add_user("carol", password="carol-pw")
    private = sim.put_file("carol", "/Mine/diary.md", "# Diary\nprivate walrus")
    sim.add_user("dave", password="dave-pw")
    only = sim.put_file("dave", "/Mine/one.md", "# One\nsingle heron")
    shared = sim.put_file("alice", "/Docs/s.md", "# S\nshared salt")
    sim.share("alice", "/Docs/s.md", "carol")
    env = _env(redis_url, tmp_path, model_dir) | {
        "NCINDEX_ACCOUNTS": json.dumps(
            {"alice": "alice-pw", "carol": "carol-pw", "dave": "dave-pw"}
        ),
        "NCINDEX_NAMESPACE": f"cli-{uuid.uuid4().hex[:8]}",
    }

    def acl(services: Services, doc_key: str) -> list[str]:
        points = services.store.document_points(doc_key)
        return sorted(points[0].payload["acl"]) if points else []

    try:
        with serve_simulator(sim) as server:
            env["NCINDEX_NEXTCLOUD_URL"] = server.url
            with pytest.MonkeyPatch.context() as mp:
                for key, value in env.items():
                    mp.setenv(key, value)
                services = Services(Settings())
            try:
                indexer = Indexer(services)
                pairs = (("carol", private), ("alice", shared), ("carol", shared), ("dave", only))
                for user, file_id in pairs:
                    indexer.index_node(user, file_id)
                assert acl(services, f"file:{shared}") == ["user:alice", "user:carol"]
                # a refusal of the webhook admin's credential holds it back from the scans;
                # forget is the operator's own command and asks anyway
                services.account_refused("alice", NextcloudAuthError("401 (test)"))
            finally:
                services.close()
            kept = CliRunner().invoke(main, ["forget", "bob"], env=env)
            assert kept.exit_code == 1 and "bob exists in Nextcloud" in kept.output
            sim.delete_user("carol")
            done = CliRunner().invoke(main, ["forget", "carol", "--json"], env=env)
            assert done.exit_code == 0, done.output
            assert json.loads(done.output) == {
                "user": "carol",
                "found": "forgotten",
                "documents": 2,
            }
            sim.delete_user("dave")
            said = CliRunner().invoke(main, ["forget", "dave"], env=env)
            assert said.exit_code == 0, said.output
            # it said "1 documents changed"
            assert (
                said.output == "dave: Nextcloud says the user does not exist; 1 document changed\n"
            )
    finally:
        sim.close()
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        services = Services(Settings())
    try:
        assert acl(services, f"file:{private}") == []
        assert acl(services, f"file:{shared}") == ["user:alice"]
    finally:
        services.close()


def test_a_count_of_one_is_said_in_the_singular() -> None:
    """``ncindex forget`` printed "1 documents changed"; the scan lines, the status's
    refused-account line and the analyzer sample said "1 requests", "1 folders" the same way."""
    from allinone.cli import _describe
    from allinone.status_view import analyzer_lines
    from ncindex.sync.reconcile import ScanReport

    one = ScanReport("carol", "file", started_at=0.0, applied=True, requests=1, forbidden=1)
    line = _describe(one)
    assert ", 1 request; " in line and "; 1 folder not readable (403)" in line, line
    gone = ScanReport("carol", "file", 0.0, True, error="401", user_deleted="forgotten")
    gone.forgotten = 1
    assert _describe(gone).endswith(": 1 document changed")
    two = ScanReport("carol", "file", 0.0, True, requests=2, forbidden=2)
    assert ", 2 requests; " in _describe(two) and "; 2 folders not" in _describe(two)
    sampled = {"upgrade": None, "current": "en-3", "sampled": {"en-3": 1}}
    assert analyzer_lines(sampled) == ["analyzer: en-3 (1 document sampled, all current)"]


def _scans(client: redis.Redis) -> int:
    """The SCAN and KEYS commands ``client``'s server answered since its stats were reset."""
    stats = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("scan", "keys"))


def _frames(env: dict[str, str], count: int) -> str:
    args = ["status", "--watch", "--iterations", str(count), "--interval", "0.1"]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 0, result.output
    return result.output


def test_a_watch_frame_sends_no_scan_of_the_keyspace(private_redis: Any) -> None:
    """``ncindex status --watch`` scanned the whole Redis keyspace on every frame: for the
    users with a first-indexing record, the dead-letter keys and the index rebuild notes (and,
    in a namespace holding no scan, the other namespaces' summaries): in a Redis shared with
    millions of keys each 2 s frame walked them all. Counted by this test's own Redis (``INFO
    commandstats``, beside 5,000 keys of no ncindex's): a watch in a namespace holding scans
    sends no SCAN once the first status has added the first-indexing records written before
    their set was kept; in one holding none, four frames send as many as one (the other
    namespaces are looked for once a minute). What the scans found is still shown."""
    from ncindex.documents import DocType
    from ncindex.index.deadletter import DeadLetter, DeadLetters
    from ncindex.progress import IndexRebuilds
    from ncindex.sync.reconcile import ScanReport, ScanState

    client = redis.Redis.from_url(private_redis.url)
    try:
        for start in range(0, 5000, 500):
            client.mset({f"elsewhere:{n}": n for n in range(start, start + 500)})
        names = Names("watchcost")
        Progress(client, names).queued("bob", ["node:1"])
        client.hset(names.first_indexing("carol"), "started_at", "1")  # before the set
        DeadLetters(client, names).park(DeadLetter("node:2", "bob", "unreadable", "e1", "t"))
        IndexRebuilds(client, names).begun("docs", "title", 10, waits=False)
        report = ScanReport(user="bob", doc_type="file", started_at=time.time(), applied=True)
        ScanState(client, "bob", DocType.FILE, names).record(report)
        env = {"NCINDEX_REDIS_URL": private_redis.url, "NCINDEX_NAMESPACE": "watchcost"}
        data = json.loads(CliRunner().invoke(main, ["status", "--json"], env=env).output)
        assert sorted(data["users"]) == ["bob", "carol"]
        assert data["dead_letters"][names.deadletter]["size"] == 1
        assert [n["field"] for n in data["index_rebuilds"]] == ["title"]
        client.config_resetstat()
        output = _frames(env, 4)
        assert _scans(client) == 0
        assert "dead letter 1" in output and "carol" in output
        env["NCINDEX_NAMESPACE"] = "watchcost-empty"
        _frames(env, 1)  # the first status in a namespace looks for first-indexing records
        client.config_resetstat()
        _frames(env, 1)
        one = _scans(client)
        client.config_resetstat()
        _frames(env, 4)
        assert _scans(client) == one > 0
    finally:
        client.close()
