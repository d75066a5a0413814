"""The ``ncindex`` command line (click): ``up``, ``models``, ``webhooks``, ``doctor``, ``extract``,
``eval``, ``reconcile``, ``forget``, ``release``, ``status``, ``failures``, ``retry``, ``reindex``.

Every command reads the same :class:`~ncindex.settings.Settings` from the environment
(``NCINDEX_*``) as the apps do.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click
from click.core import ParameterSource

from allinone.stopping import StopSignals
from ncindex import __version__
from ncindex.documents import DocType
from ncindex.errors import Forbidden, NcindexError, NextcloudAuthError, NextcloudUnavailable
from ncindex.progress import Progress
from ncindex.settings import (
    Settings,
    is_mime_type,
    is_tag_name,
    load_settings,
    url_without_password,
)
from ncindex.telemetry import configure_logging
from ncindex.wording import counted

_P = ParamSpec("_P")
_T = TypeVar("_T")

if TYPE_CHECKING:
    from allinone.embedded import Embedded
    from ncindex.ingest.registration import Failed, RegisterResult, Untried
    from ncindex.nextcloud.client import NextcloudClient


class _Commands(click.Group):
    """Reports configuration, Redis and Nextcloud errors as one line (exit 1), not a
    traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        import redis

        try:
            return super().invoke(ctx)
        except redis.RedisError as exc:  # Redis down or refusing: every command needs it
            url = ctx.obj.redis_url if isinstance(ctx.obj, Settings) else "NCINDEX_REDIS_URL"
            raise click.ClickException(_redis_problem(url, exc)) from None
        except NextcloudUnavailable as exc:  # its text names the path, not the server
            url = ctx.obj.nextcloud_url if isinstance(ctx.obj, Settings) else ""
            where = f" (NCINDEX_NEXTCLOUD_URL={url_without_password(url)})" if url else ""
            raise click.ClickException(f"NextcloudUnavailable: {exc}{where}") from None
        except NcindexError as exc:  # its class names the failure (NextcloudUnavailable, …)
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
        except ValueError as exc:  # a message meant for the user as it is
            raise click.ClickException(str(exc)) from None
        except KeyError as exc:  # its text is only the key: the class says what it is
            raise click.ClickException(f"KeyError: {exc}") from None


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ncindex")
@click.pass_context
def main(ctx: click.Context) -> None:
    """ncindex: a verified hybrid-search index of a Nextcloud."""
    settings = load_settings()  # SettingsError (a ValueError): one line, below
    configure_logging(
        _command_log_level(settings, ctx.invoked_subcommand), json_lines=settings.log_json
    )
    ctx.obj = settings


def _command_log_level(settings: Settings, command: str | None) -> str:
    """The level ``ncindex <command>`` logs at: ``NCINDEX_LOG_LEVEL`` when it is set. Unset,
    a one-shot command logs warnings and errors only (what it finds is its output: at INFO,
    ``reconcile`` repeated each report line as a JSON line on stderr), and ``up`` starts at
    the setting's default (INFO) and keeps only warnings and errors once it is up
    (:func:`_serve`). The long-running roles (worker, beat, receiver, search API) do not run
    through here and log at ``NCINDEX_LOG_LEVEL``, INFO by default."""
    return settings.log_level if _log_level_set(settings) or command == "up" else "WARNING"


def _log_level_set(settings: Settings) -> bool:
    """Whether ``NCINDEX_LOG_LEVEL`` was given (not the default)."""
    return "log_level" in settings.model_fields_set


def _redis_problem(url: str, exc: Exception) -> str:
    """The line a command ends with when Redis at ``url`` fails it: the URL without its
    password, the error and what to check (:func:`ncindex.redis_server.unreachable`)."""
    from ncindex.redis_server import unreachable

    return unreachable(url_without_password(url), exc)


def _only_with(name: str, applies: bool, needs: str) -> None:
    """Refuse the current command's option of parameter ``name`` when the command line gives
    it where it would be ignored (``applies`` false): a usage error (exit 2) naming the option
    and what it needs."""
    ctx = click.get_current_context()
    if applies or ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE:
        return
    option = next(p for p in ctx.command.params if p.name == name).opts[0]
    raise click.UsageError(f"{option} applies only with {needs}", ctx)


def _require_accounts(settings: Settings, users: Iterable[str]) -> None:
    """Refuse ``--user`` values that are not configured accounts (NCINDEX_ACCOUNTS): a usage
    error (exit 2) naming them."""
    unknown = [u for u in users if u not in settings.accounts]
    if unknown:
        raise click.BadParameter(
            f"not a configured account: {', '.join(unknown)}", param_hint="'--user'"
        )


def _require_writable(path: Path, option: str) -> None:
    """Refuse (exit 2, naming ``option``) a file ``path`` that could not be written: its
    folder missing, the file not writable, or when there is no file yet its folder."""
    folder = path.parent
    if not folder.is_dir():
        raise click.BadParameter(f"folder {folder} does not exist", param_hint=f"'{option}'")
    if not os.access(path if path.exists() else folder, os.W_OK):
        raise click.BadParameter(f"{path} cannot be written", param_hint=f"'{option}'")


@main.command()
@click.pass_obj
def models(settings: Settings) -> None:
    """Assemble the offline embedding models into NCINDEX_MODEL_DIR (no download)."""
    from ncindex.embedding.models import install_models

    try:
        paths = install_models(settings.model_dir)
    except OSError as exc:  # the folder cannot be made or written: a traceback before
        raise click.ClickException(_model_dir_problem(settings, exc)) from None
    click.echo(f"dense model: {paths.dense_dir} (BM25 needs no model files)")


def _model_dir_problem(settings: Settings, exc: OSError) -> str:
    """The line a command ends with when the models cannot be written into
    ``NCINDEX_MODEL_DIR``."""
    return (
        f"cannot write the models into NCINDEX_MODEL_DIR ({settings.model_dir}): "
        f"{exc.strerror or exc}"
    )


@main.command()
@click.option("--no-sample", is_flag=True, help="Do not load the sample corpus (simulator only).")
@click.pass_obj
def up(settings: Settings, no_sample: bool) -> None:
    """Run everything in one process on the embedded engine (see README)."""
    from allinone import embedded
    from ncindex.errors import RedisTooOld

    # a configured Nextcloud gets no sample corpus anyway: the flag would be ignored
    _only_with(
        "no_sample",
        not settings.nextcloud_url,
        "the bundled sample Nextcloud (NCINDEX_NEXTCLOUD_URL unset)",
    )
    # handlers first: a signal while starting stops it once it has started (the watchdog
    # bounds that too), instead of leaving a private redis-server or the store half-open
    signals = StopSignals(settings.shutdown_grace)
    try:
        try:
            running = embedded.start(settings, load_sample=not no_sample)
        except RedisTooOld as exc:
            raise click.ClickException(str(exc)) from exc
        if running.redis is not None:
            signals.children.append(running.redis.process.pid)
        _serve(running, settings, signals, quiet=not _log_level_set(settings))
    finally:
        signals.restore()


def _serve(running: Embedded, settings: Settings, signals: StopSignals, *, quiet: bool) -> None:
    """Print what a user needs, wait for a stop signal, stop. ``quiet`` (no
    ``NCINDEX_LOG_LEVEL`` set): only warnings and errors are logged from here on, and a line
    every :data:`PROGRESS_SECONDS` says how the indexing goes instead of each task's lines."""
    url = running.url
    click.echo(
        f"\nncindex is up: {url}  (receiver {url}/hooks/nextcloud, search {url}/v1/search, "
        f"MCP {url}/mcp, RCP {url}/rcp)"
    )
    click.echo(f"Search page: {url}/  (sign in with your Nextcloud account)")
    # which of the two: "NCINDEX_REDIS_URL or the default" left a user guessing whether the
    # variable was read (settings read the environment alone: no env file)
    redis_owner = (
        "a private redis-server"
        if running.redis
        else "NCINDEX_REDIS_URL"
        if "redis_url" in settings.model_fields_set
        else "the default; NCINDEX_REDIS_URL is not set"
    )
    # never the password (userinfo or query): this output lands in terminals and logs
    redis_url = url_without_password(running.settings.redis_url)
    left_out = redis_url != running.settings.redis_url
    if running.redis is not None and "redis_url" in settings.model_fields_set:
        click.echo(
            f"NCINDEX_REDIS_URL {url_without_password(settings.redis_url)} did not answer: "
            f"started a private redis-server at {redis_url} instead (gone when this stops)"
        )
    click.echo(f"Redis: {redis_url} ({redis_owner}{'; credentials left out' if left_out else ''})")
    click.echo(
        f"Watch the indexing: NCINDEX_REDIS_URL={redis_url} "
        f"NCINDEX_NAMESPACE={running.settings.namespace} {ncindex_command()} status --watch"
        + (" (put the URL's user and password back in)" if left_out else "")
    )
    from ncindex.ingest.registration import loopback_target

    unreachable = loopback_target(running.settings)
    if unreachable:
        click.echo(f"Warning: {unreachable}; until then changes reach the index only by scans.")
    if running.webhooks is not None and running.webhooks.refused:
        click.echo("Webhooks Nextcloud refused (ncindex runs without them):")
        for line in running.webhooks.missing_lines():
            click.echo(f"  - {line}")
    for line in _webhook_lines(
        running, chosen_secret=bool(settings.webhook_secret.get_secret_value())
    ):
        click.echo(line)
    if running.simulator is not None:
        from ncindex.simulator.sample import SAMPLE_ACCOUNTS

        user, password = "alice", running.settings.password_for("alice")
        users = ", ".join(f"{uid} / {pw}" for uid, pw in SAMPLE_ACCOUNTS.items())
        if running.sample is None:
            click.echo(
                f"Serving an empty sample Nextcloud at {running.settings.nextcloud_url} "
                f"(--no-sample). Users and app passwords: {users}. Upload over WebDAV, e.g.\n\n"
                f"  curl -s -u {user}:{password} -T notes.md "
                f"{running.settings.nextcloud_url}/remote.php/dav/files/{user}/notes.md\n"
            )
        else:
            _sample_hints(running, url, user, password, users)
    grace = running.settings.shutdown_grace
    click.echo(
        f"Stop with Ctrl-C or SIGTERM: running tasks get {grace:g} s to finish, the others go "
        "back to their queues; a second signal after that ends the process at once."
    )
    if quiet:
        click.echo(
            "Logging warnings and errors only, and the indexing's progress every "
            f"{PROGRESS_SECONDS:g} s; NCINDEX_LOG_LEVEL=INFO logs every task."
        )
        logging.getLogger().setLevel(logging.WARNING)
        # werkzeug gives its own logger the level INFO when it first logs a request
        # (werkzeug._internal._log, a logger left at NOTSET), so the root's level alone left
        # a line per webhook delivery and search
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        threading.Thread(target=_report_progress, args=(running, signals), daemon=True).start()
    if running.sample is not None:
        threading.Thread(target=_report_sample, args=(running, signals), daemon=True).start()
    signals.wait()
    click.echo("stopping")
    stopped = running.close()
    click.echo("stopped")
    if stopped is False:
        # tasks past the grace period went back to their queues, but their threads still
        # run, and the interpreter's exit joins the threads of Celery's pool (its
        # ThreadPoolExecutor): measured, 3 min 30 s of a batch of large files before the
        # process ended. End it now, as the stop promises.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def ncindex_command(argv0: str | None = None) -> str:
    """How a user runs ``ncindex`` from a shell like the one this process started in, for
    the commands the start-up lines print: ``ncindex`` when that name on ``PATH`` is this
    very script; else the path this process was started by (``argv0``, default
    ``sys.argv[0]``: ``.venv/bin/ncindex`` under ``make run``, whose venv is on no
    ``PATH``, made absolute: a fresh shell may start elsewhere), when that is an ``ncindex``
    script; else the ``ncindex`` script beside this Python (a venv's ``bin``); else
    ``python -m allinone.cli`` with this Python. Shell-quoted.
    """
    import shutil

    started = Path(sys.argv[0] if argv0 is None else argv0)
    beside = Path(sys.executable).parent / "ncindex"
    on_path = shutil.which("ncindex")
    for candidate in (started, beside):
        if candidate.name != "ncindex" or not candidate.is_file():
            continue
        if on_path and Path(on_path).resolve() == candidate.resolve():
            return "ncindex"
        return shlex.quote(str(candidate.absolute()))  # from any directory
    return f"{shlex.quote(sys.executable)} -m allinone.cli"


def _sample_hints(running: Embedded, url: str, user: str, password: str, users: str) -> None:
    """The banner's lines for the bundled sample corpus: its size, the accounts and two
    searches to try."""
    click.echo(
        f"Serving the bundled sample Nextcloud at {running.settings.nextcloud_url} "
        f"({counted(running.sample.documents, 'document')}, indexing in the "
        f"background). Users and app passwords: {users}."
    )
    click.echo("Try:\n")
    body = json.dumps({"query": "vitamin D deficiency and bone health", "limit": 5})
    click.echo(
        f"  curl -s -u {user}:{password} -H 'Content-Type: application/json' \\\n"
        f"       -d '{body}' {url}/v1/search\n"
    )
    click.echo(
        "Other formats are in /Documents/Formats: search, say, "
        '"zebrafish heart regeneration" (a slide of an ODP, as bob) or '
        '"freezer malaria serum samples" (a spreadsheet row).\n'
    )


def _webhook_lines(running: Embedded, *, chosen_secret: bool) -> list[str]:
    """What a user needs to post a webhook by hand: the receiver's URL, the secret header
    and its value (the variable's name when the user chose it), and a ``curl`` posting a
    ``NodeWrittenEvent`` envelope in webhook_listeners' format (``ncindex.ingest.events``;
    reference/nextcloud-api.md §1.2) — for a sample file when the simulator runs."""
    settings = running.settings
    header = settings.webhook_secret_header
    secret = (
        "$NCINDEX_WEBHOOK_SECRET" if chosen_secret else settings.webhook_secret.get_secret_value()
    )
    hook = f"{running.url}/hooks/nextcloud"
    file_id, user, path = 42, "alice", "/Documents/Plan.md"  # placeholders: one of your files
    sample = running.sample
    if sample is not None:
        user, path, file_id = next(
            (o, p, f) for o, p, f in sample.placements.values() if p.startswith("/Documents/")
        )
    envelope = {
        "event": {
            "node": {"id": file_id, "path": f"/{user}/files{path}"},
            "class": "OCP\\Files\\Events\\Node\\NodeWrittenEvent",
        },
        "user": {"uid": user, "displayName": user.capitalize()},
        "time": int(time.time()),
    }
    which = (
        "a sample file of " + user
        if sample is not None
        else "replace the id and path with a file of yours"
    )
    value = (
        "the value of NCINDEX_WEBHOOK_SECRET"
        if chosen_secret
        else f"{secret}  (random for this run; set NCINDEX_WEBHOOK_SECRET to choose it)"
    )
    return [
        f"Webhook receiver: POST {hook}",
        f"Secret header: {header}: {value}",
        f"Post a webhook by hand ({which}; answered 202):\n",
        f'  curl -s -H "{header}: {secret}" -H "Content-Type: application/json" \\\n'
        f"       -d {shlex.quote(json.dumps(envelope))} {hook}\n",
    ]


#: How often ``ncindex up`` without ``NCINDEX_LOG_LEVEL`` says how the indexing goes, seconds.
PROGRESS_SECONDS = 15.0

#: How long ``ncindex status`` waits for Nextcloud's ``/status.php`` on each refresh, seconds:
#: a firewalled server slows a ``--watch`` redraw by this much, not by the HTTP timeout.
STATUS_PROBE_SECONDS = 3.0

#: How long ``ncindex status --watch`` keeps showing what is costly to ask on every frame,
#: seconds: the webhook registrations (the secret rotation's line and the surplus
#: registrations'), and the other namespaces holding scans. The registrations change only
#: when an admin runs ``ncindex webhooks register``, and each ask is an OCS request signed in
#: as the webhook admin: one each 2 s frame, with that password refused, was a failed login
#: per frame, which Nextcloud records against this host's address and answers with growing
#: delays (nextcloud/server lib/private/User/Session.php ``handleLoginFailed``: the
#: brute-force throttler's ``registerAttempt('login', ...)``), slowing every request ncindex
#: makes. The other namespaces are found by a SCAN of the whole Redis database
#: (:func:`ncindex.sync.status.other_namespaces`), whose cost grows with every key in it.
SLOW_REFRESH_SECONDS = 60.0


def kept_for(seconds: float, ask: Callable[_P, _T]) -> Callable[_P, _T]:
    """``ask`` that is called again only once ``seconds`` have passed since it last was (a
    monotonic clock), and else gives its last answer (whatever the arguments): what ``ncindex
    status --watch`` asks at most once per :data:`SLOW_REFRESH_SECONDS`."""
    kept: list[tuple[float, _T]] = []

    def answer(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        if not kept or time.monotonic() - kept[0][0] >= seconds:
            kept[:] = [(time.monotonic(), ask(*args, **kwargs))]
        return kept[0][1]

    return answer


def progress_line(progress: Progress, was_busy: bool) -> tuple[str | None, bool]:
    """The line ``ncindex up`` prints about the indexing, and whether anything is pending: the
    members of every account's pending set (:meth:`~ncindex.progress.Progress.pending`) and
    the runs finished per second over the last minute, while anything is pending; "caught up"
    once, when nothing is any more; ``None`` while idle.

    Both count per account and subject, not documents, and the line says so: a file shared
    with two accounts is pending (and finished) once for each, and a folder is pending until a
    worker looks at it — a created folder's event names only the node's id and path
    (nextcloud/server ``lib/public/Files/Events/Node/AbstractNodeEvent.php``
    ``getWebhookSerializable``), so its task is queued as a file's is. Called "documents",
    the first line of ``make run``'s 368-document sample said "376 documents pending" (its
    39 folders and the 45 files alice shares with bob counted too, while its last events
    were still arriving)."""
    pending = sum(progress.pending(user) for user in progress.users())
    if not pending:
        return ("Indexing: caught up, nothing pending." if was_busy else None), False
    rate = progress.rates(seconds=60)
    return (
        f"Indexing: {pending} pending, counted per account (files, folders, notes, cards, "
        f"news items); {rate.documents} finished in the last {rate.window_seconds:.0f} s "
        f"({rate.documents_per_second:.1f}/s).",
        True,
    )


def _report_progress(running: Embedded, signals: StopSignals) -> None:
    """Print :func:`progress_line` every :data:`PROGRESS_SECONDS` until stopped (a Redis
    error skips a line)."""
    import redis

    progress = Progress(running.services.redis, running.settings.names)
    busy = False
    while not signals.wait(PROGRESS_SECONDS):
        try:
            line, busy = progress_line(progress, busy)
        except redis.RedisError:
            continue
        if line is not None:
            click.echo(line)


def _report_sample(running: Embedded, signals: StopSignals) -> None:
    """Say once when every sample document is current in the store
    (:meth:`~allinone.embedded.Embedded.sample_current`, seen twice 1 s apart)."""
    started = time.monotonic()
    seen = 0
    while not signals.wait(1.0):
        seen = seen + 1 if running.sample_current() else 0
        if seen == 2:
            seconds = time.monotonic() - started
            click.echo(
                "Sample corpus indexed: "
                f"{counted(running.sample.documents, 'document')} current in the store after "
                f"{seconds:.0f} s. Search page: {running.url}/ (alice / "
                f"{running.settings.password_for('alice')}), or the curl printed at the start."
            )  # the start's lines may have scrolled away by now
            return


class _AdminCommands(click.Group):
    """The webhook commands, which act as ``settings.webhook_admin``: a refusal (401, 403)
    names that account and what it must be — an admin, or a user delegated webhook_listeners'
    "Webhooks" admin setting (nextcloud/server ``WebhooksController``: every route is
    ``#[AuthorizedAdminSetting(settings: Admin::class)]``)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (Forbidden, NextcloudAuthError) as exc:
            admin = ctx.obj.webhook_admin if isinstance(ctx.obj, Settings) else "?"
            raise click.ClickException(
                f"{type(exc).__name__}: {exc} — the webhook commands act as {admin!r} "
                "(NCINDEX_ADMIN_USER, else the first of NCINDEX_ACCOUNTS), which must be a "
                'Nextcloud admin, or in a group delegated the "Webhooks" admin privilege, '
                "with a valid app password"
            ) from None


@main.group(cls=_AdminCommands)
def webhooks() -> None:
    """Manage the webhook_listeners registrations pointing at this deployment."""


def _rescan_once_listening(
    settings: Settings, result: RegisterResult
) -> tuple[int | None, list[str]]:
    """:func:`~ncindex.ingest.registration.rescan_once_listening` in this deployment's Redis:
    the due time, or ``None`` (nothing registered for the first time, or Redis unreachable:
    said on stderr, the registration stands); and, with a due time, the other namespaces
    holding scans when this one holds none (:func:`ncindex.sync.status.other_namespaces`):
    then no beat of this namespace is known to take the due time — ``ncindex up`` runs under
    ``ncindex-up`` — and the caller says so instead of promising the rescan."""
    import redis

    from ncindex.ingest.registration import rescan_once_listening
    from ncindex.sync.reconcile import last_scans_key
    from ncindex.sync.status import other_namespaces

    client = redis.Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=2)
    try:
        due = rescan_once_listening(client, result, settings)
        if due is None or client.exists(last_scans_key(settings.names)):
            return due, []
        return due, other_namespaces(client, settings.names)
    except redis.RedisError as exc:
        click.echo(
            f"warning: no scan asked for after the new registrations ({exc}); events users "
            "make in the next 5 minutes are found by the next periodic scan",
            err=True,
        )
        return None, []
    finally:
        client.close()


def _rescan_line(settings: Settings, due: int, others: list[str]) -> str:
    """The line ``webhooks register`` ends with when it marked the accounts for a rescan at
    ``due`` (Unix seconds): the beat of this namespace scans them then — or, when this
    namespace holds no scan and ``others`` do, that nothing here may take it and the command
    that scans every account in the namespace that runs."""
    at = time.strftime("%H:%M:%S", time.localtime(due))
    cache = "Nextcloud caches each user's listened events for 5 minutes: "
    namespace = settings.namespace
    if not others:
        return f"{cache}every account is scanned at {at} by the beat of namespace {namespace}"
    return (
        f"{cache}the rescan at {at} is due in namespace {namespace}, which holds no scan — "
        f"scans of {', '.join(others)} are in this Redis (`ncindex up` uses ncindex-up), whose "
        f"beat does not take it: after {at} run `NCINDEX_NAMESPACE={others[0]} "
        f"{ncindex_command()} reconcile --apply` to scan every account"
    )


def _admin(settings: Settings) -> NextcloudClient:
    """The webhook admin's client for an operator's ``webhooks`` command: sent even while a
    refusal holds its credential back (the operator asks Nextcloud once, as they asked)."""
    from ncindex.runtime import Services

    return Services(settings).account(settings.webhook_admin, held_back=False)


@webhooks.command("register")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option(
    "--force",
    is_flag=True,
    help="Register a loopback NCINDEX_PUBLIC_URL with a Nextcloud on another machine all the same.",
)
@click.pass_obj
def webhooks_register(settings: Settings, as_json: bool, force: bool) -> None:
    """Register one webhook per event class (idempotent).

    Prints each class with ``registered``, ``already``, ``renewed`` (updated in place: the one
    there was made with another webhook secret), ``refused`` and Nextcloud's reason,
    ``failed`` (its registration or renewal failed: a 5xx, a timeout), ``untried`` (its
    request not made: Nextcloud could not be reached), ``removed`` (a class
    no longer subscribed: ``NodeCopiedEvent``, Deck's with NCINDEX_DECK_WEBHOOKS off),
    ``gone`` (such a one already deleted) or ``left`` (its deletion failed); a renewal
    whose registration was deleted meanwhile is registered anew (``registered``, saying so);
    exits 1 when a class the index cannot work without (file created, written,
    deleted, renamed) is refused — an optional one is skipped with what it costs — or when
    a request failed (a class not registered or renewed, a duplicate or a class no longer
    subscribed not deleted): the rest is done first, and each failure named at the end
    (``failed`` in --json). Once a request gets no answer (connection refused or reset, a
    timeout) the requests left are not made: one line says so (``untried`` in --json). A 401
    stops it at once.
    Refuses (exit 1, unless --force) a loopback NCINDEX_PUBLIC_URL when Nextcloud is on
    another machine: it could never deliver there.
    """
    from ncindex.ingest.registration import loopback_target, register

    problem = loopback_target(settings)
    if problem and not force:
        raise click.ClickException(f"{problem} (or register anyway with --force)")
    if problem:
        click.echo(f"warning: {problem}", err=True)
    result = register(_admin(settings), settings)
    rescan_at, others = _rescan_once_listening(settings, result)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "classes": [
                        {
                            "class": o.event_class,
                            "result": o.status,
                            "id": o.webhook_id,
                            "reason": o.reason,
                            "required": o.required,
                            "cost": o.cost,
                        }
                        for o in result.outcomes
                    ],
                    "removed": result.removed,
                    "gone": result.gone,
                    "failed": [f.row() for f in result.failed],
                    "untried": [u.row() for u in result.untried],
                    "ok": result.ok,
                    "rescan_at": rescan_at,
                    "namespace": settings.namespace,
                    "namespaces_holding_scans": others,
                }
            )
        )
    else:
        click.echo(result.table())
        if result.removed:
            click.echo(f"removed registrations: {result.removed}")
        if result.gone:
            click.echo(f"already gone: {result.gone}")
        if rescan_at is not None:
            click.echo(_rescan_line(settings, rescan_at, others))
        _say_failed(result.failed, result.untried, "register")
    if not result.ok:
        raise SystemExit(1)


@webhooks.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.pass_obj
def webhooks_list(settings: Settings, as_json: bool) -> None:
    """List the registrations pointing at this deployment: a table of class, id and delivery
    URL, or with --json ``{"webhooks": [{"class", "id", "uri"}]}``."""
    from ncindex.ingest.registration import list_registrations

    hooks = list_registrations(_admin(settings), settings)
    if as_json:
        click.echo(json.dumps({"webhooks": [_hook_row(h) for h in hooks]}))
        return
    click.echo(_hooks_table(hooks) if hooks else _no_webhooks(settings))


@webhooks.command("remove")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.pass_obj
def webhooks_remove(settings: Settings, as_json: bool) -> None:
    """Delete every registration pointing at this deployment; prints a table of those
    deleted (class, id, delivery URL) and the ids of those already gone, or with --json
    ``{"removed": [ids], "gone": [ids], "failed": [{"action", "class", "id", "error"}],
    "untried": [{"action", "class", "id", "reason"}]}``. A deletion that fails (a 5xx, a
    timeout) is named at the end, after the others are made, and exits 1; once one gets no
    answer (connection refused or reset, a timeout) the others are not made (``untried``),
    said in one line; a 401 stops it at once."""
    from ncindex.ingest.registration import remove

    removal = remove(_admin(settings), settings)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "removed": [int(h["id"]) for h in removal.removed],
                    "gone": [int(h["id"]) for h in removal.gone],
                    "failed": [f.row() for f in removal.failed],
                    "untried": [u.row() for u in removal.untried],
                }
            )
        )
    elif not (removal.removed or removal.gone or removal.failed):
        click.echo(f"{_no_webhooks(settings)}: nothing removed")
    else:
        removed = removal.removed
        if removed:
            click.echo(_hooks_table(removed))
        click.echo(f"removed {len(removed)} registration{'' if len(removed) == 1 else 's'}")
        if removal.gone:
            click.echo(f"already gone: {[int(h['id']) for h in removal.gone]}")
        _say_failed(removal.failed, removal.untried, "remove")
    if removal.failed or removal.untried:
        raise SystemExit(1)


def _say_failed(failed: list[Failed], untried: list[Untried], command: str) -> None:
    """Name each failed request of ``ncindex webhooks <command>`` on stderr
    (:meth:`~ncindex.ingest.registration.Failed.line`), then, in one line, those not
    attempted (:func:`~ncindex.ingest.registration.untried_line`)."""
    from ncindex.ingest.registration import untried_line

    for failure in failed:
        click.echo(f"error: {failure.line(command)}", err=True)
    line = untried_line(untried, command)
    if line is not None:
        click.echo(f"error: {line}", err=True)


def _hook_row(hook: dict[str, Any]) -> dict[str, Any]:
    """A registration as the webhook commands show it: its ``class`` (webhook_listeners'
    ``event``, without a leading backslash), ``id`` and delivery ``uri``."""
    from ncindex.ingest.registration import listed_class

    return {
        "class": listed_class(hook),
        "id": int(hook["id"]),
        "uri": hook.get("uri"),
    }


def _hooks_table(hooks: list[dict[str, Any]]) -> str:
    """Registrations as a plain-text table with a header: class, id, delivery URL."""
    rows = [_hook_row(h) for h in hooks]
    width = max(len("class"), *(len(r["class"]) for r in rows))
    ids = max(len("id"), *(len(str(r["id"])) for r in rows))
    lines = [f"{'class':<{width}}  {'id':>{ids}}  uri"]
    lines += [f"{r['class']:<{width}}  {r['id']:>{ids}}  {r['uri']}" for r in rows]
    return "\n".join(lines)


def _no_webhooks(settings: Settings) -> str:
    """The line the webhook commands print when no registration points at this deployment."""
    from ncindex.ingest.registration import hook_uri

    return f"no webhooks registered for {hook_uri(settings)}"


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the lines as a JSON list.")
@click.pass_obj
def doctor(settings: Settings, as_json: bool) -> None:
    """Check the set-up: Redis, the webhook secret, the store, the model, the configured
    Nextcloud (version, apps, accounts, webhooks), the public URL, OCR.

    Prints one line per finding with a verdict (ok, warn, fail, note); exits 1 when a line
    fails. Without NCINDEX_NEXTCLOUD_URL that is one failing line, and the checks that do not
    ask Nextcloud (Redis, the secret, the store, the model, OCR, ...) run all the same; with
    no setting of a deployment either (beside `make run`) a note says there is nothing to
    check but Redis, the store, the model and OCR.
    """
    from ncindex.doctor import failed, render, run_checks

    lines = run_checks(settings)
    if as_json:
        click.echo(
            json.dumps(
                [{"check": x.check, "verdict": x.verdict, "detail": x.detail} for x in lines]
            )
        )
    else:
        click.echo(render(lines))
    if failed(lines):
        raise SystemExit(1)


#: The setting behind each reason of :meth:`Eligibility.file_reason`, for ``ncindex extract``.
_RULE_SETTINGS = {
    "unsupported_format": "no extractor reads this type",
    "ocr_unavailable": "NCINDEX_OCR_ENABLED / tesseract (see ncindex doctor)",
    "mime_type": "NCINDEX_INDEX_MIME_TYPES",
    "excluded_path": "NCINDEX_INDEX_EXCLUDE_GLOBS",
    "path_not_included": "NCINDEX_INDEX_INCLUDE_GLOBS",
    "excluded_tag": "NCINDEX_INDEX_EXCLUDED_TAGS",
    "missing_required_tag": "NCINDEX_INDEX_REQUIRED_TAGS",
    "too_large": "NCINDEX_MAX_DOWNLOAD_BYTES",
}


def _mime_type(ctx: click.Context, param: click.Parameter, mime: str | None) -> str | None:
    """``--mime`` as given, which must be a MIME type ``type/subtype``, as
    ``NCINDEX_INDEX_MIME_TYPES`` takes them (:func:`~ncindex.settings.is_mime_type`; no
    pattern: Nextcloud reports a file's type). Raises ``click.BadParameter``."""
    if mime is not None and not is_mime_type(mime):
        raise click.BadParameter(f"{mime!r} is not a MIME type such as text/markdown")
    return mime


def _nextcloud_path(ctx: click.Context, param: click.Parameter, path: str | None) -> str | None:
    """``--path`` as given, which must start with ``/`` (a relative one would be judged by
    the globs as no path Nextcloud has) and be a path Nextcloud could send, as the webhook
    receiver requires (:func:`~ncindex.ingest.events.check_nextcloud_path`: no ``.`` or ``..``
    segment, no NUL byte). Raises ``click.BadParameter``."""
    from ncindex.ingest.events import check_nextcloud_path

    if path is None:
        return None
    if not path.startswith("/"):
        raise click.BadParameter(f"must start with / (/{path.lstrip('./')}, say)")
    try:
        return check_nextcloud_path(path)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _tag_names(
    ctx: click.Context, param: click.Parameter, tags: tuple[str, ...]
) -> tuple[str, ...]:
    """``--tag`` values, each a name a system tag could have, as the tag settings require
    (:func:`~ncindex.settings.is_tag_name`: not empty). Raises ``click.BadParameter``."""
    if not all(is_tag_name(tag) for tag in tags):
        raise click.BadParameter("a tag name is empty")
    return tags


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--mime",
    callback=_mime_type,
    help="The MIME type Nextcloud reports (default: by the extension).",
)
@click.option(
    "--path",
    "nc_path",
    callback=_nextcloud_path,
    help="The file's path in Nextcloud (from the user's files root: /Documents/a.pdf), "
    "for the globs.",
)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    callback=_tag_names,
    help="A system tag the file carries (repeatable).",
)
@click.option("--chunks", "show_chunks", is_flag=True, help="Also print each chunk.")
@click.option(
    "--chars",
    default=2000,
    show_default=True,
    type=click.IntRange(min=0),
    help="Characters of text printed.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def extract(
    settings: Settings,
    file: Path,
    mime: str | None,
    nc_path: str | None,
    tags: tuple[str, ...],
    show_chunks: bool,
    chars: int,
    as_json: bool,
) -> None:
    """Show what ncindex makes of FILE: its MIME type, whether the indexing rules take it (and
    which rule says no), its text and, with --chunks, its chunks with offsets and tokens.

    Uses the same settings and bounds as the workers: at most NCINDEX_MAX_DOWNLOAD_BYTES
    bytes are read. Exits 1 when the file cannot be extracted (over that bound, too), with the
    reason.
    """
    from ncindex.errors import ExtractionError, TooLarge
    from ncindex.sources.eligibility import Eligibility, effective_mime
    from ncindex.text.extract import detect_format, extension_mime, extract_text
    from ncindex.text.ocr import ocr_from_settings

    limit = settings.max_download_bytes
    data = _read_at_most(file, limit + 1)  # a byte more tells a file over the limit
    path = nc_path or f"/{file.name}"
    reported = mime or extension_mime(file.name) or "application/octet-stream"
    reason = Eligibility.from_settings(settings).file_reason(path, reported, list(tags))
    if reason is None and len(data) > limit:
        reason = "too_large"
    info = file.stat()
    report: dict[str, Any] = {
        "file": str(file),
        # a device or a pipe has no size: the bytes read (at most the limit + 1)
        "bytes": info.st_size if stat.S_ISREG(info.st_mode) else len(data),
        "mime_type": effective_mime(reported, path) or reported,
        "mime_source": "--mime" if mime else "extension",
        "format": detect_format(reported, file.name),
        "indexed": reason is None,
        "rule": reason,
        "rule_setting": _RULE_SETTINGS.get(reason or ""),
    }
    started = time.perf_counter()
    try:
        if len(data) > limit:  # as a worker's download: TooLarge, parked in the dead letter
            raise TooLarge(f"{file}: more than {limit} bytes")
        extracted = extract_text(
            data,
            mime_type=reported,
            filename=file.name,
            max_chars=settings.max_document_chars,
            max_pages=settings.max_pdf_pages,
            max_seconds=settings.extract_max_seconds,
            max_rows=settings.max_sheet_rows,
            ocr=ocr_from_settings(settings),
        )
    except (ExtractionError, TooLarge) as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
        _print_extract(report, as_json)
        raise SystemExit(1) from None
    report |= {
        "seconds": round(time.perf_counter() - started, 3),
        "characters": len(extracted.text),
        "pages": extracted.pages,
        "markdown": extracted.markdown,
        "truncated": extracted.truncated,
        "text": extracted.text[: max(chars, 0)],
    }
    if show_chunks:
        from ncindex.text.chunking import Chunker

        try:
            chunker = Chunker.from_settings(settings)  # builds the packaged model if missing
        except OSError as exc:
            raise click.ClickException(_model_dir_problem(settings, exc)) from None
        report["chunks"] = [
            {
                "index": c.index,
                "start": c.char_start,
                "end": c.char_end,
                "tokens": chunker.count_tokens(c.text, special_tokens=False),
                "text": c.text,
            }
            for c in chunker.chunk_text(extracted.text, markdown=extracted.markdown)
        ]
    _print_extract(report, as_json)


def _read_at_most(file: Path, count: int) -> bytes:
    """The first ``count`` bytes of ``file`` (all of a shorter one): memory is bounded by
    ``count`` for a regular file, a device or a pipe alike (a buffered ``read(count)`` reads
    until it has them or the stream ends)."""
    with file.open("rb") as stream:
        return stream.read(count)


def _print_extract(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False))
        return
    rule = "indexed" if report["indexed"] else f"not indexed: {report['rule']}"
    if report["rule_setting"]:
        rule += f" ({report['rule_setting']})"
    click.echo(f"file       {report['file']} ({report['bytes']} bytes)")
    click.echo(f"mime type  {report['mime_type']} (from the {report['mime_source']})")
    click.echo(f"format     {report['format'] or 'unsupported'}")
    click.echo(f"rules      {rule}")
    if "error" in report:
        click.echo(f"error      {report['error']}", err=True)
        return
    flags = ", ".join(
        [f"{report['pages']} pages" if report["pages"] is not None else "no pages"]
        + (["markdown"] if report["markdown"] else [])
        + (["truncated"] if report["truncated"] else [])
    )
    click.echo(f"text       {report['characters']} characters, {flags}, {report['seconds']} s")
    shown = len(report["text"])
    click.echo(f"--- text (first {shown} of {report['characters']} characters) ---")
    click.echo(report["text"])
    for chunk in report.get("chunks", []):
        click.echo(
            f"--- chunk {chunk['index']}: characters {chunk['start']}-{chunk['end']}, "
            f"{chunk['tokens']} tokens ---"
        )
        click.echo(chunk["text"])


@main.command("eval")
@click.argument(
    "dataset", type=click.Path(exists=True, file_okay=False, dir_okay=True, path_type=Path)
)
@click.option(
    "--via",
    type=click.Choice(["library", "product", "both"]),
    default="library",
    show_default=True,
    help="library: the product's parts in-process (fast); product: simulator → webhooks → "
    "workers → /v1/search over HTTP (hybrid modes only); both: run both and compare.",
)
@click.option(
    "--mode",
    "modes",
    multiple=True,
    type=click.Choice(["bm25", "dense", "hybrid_rrf", "hybrid_dbsf"]),
    help="Modes to evaluate (repeatable; default: all the path offers).",
)
@click.option(
    "--model",
    "model_names",
    multiple=True,
    help="Dense model to evaluate (repeatable, to compare models; default NCINDEX_DENSE_MODEL).",
)
@click.option("--split", default="test", show_default=True, help="qrels/<split>.tsv to use.")
@click.option("--queries", type=click.IntRange(1), help="Evaluate a subset of judged queries…")
@click.option("--docs", type=click.IntRange(1), help="…over a corpus cut to this many documents.")
@click.option(
    "--cache",
    type=click.Path(dir_okay=False, path_type=Path),
    help="SQLite file caching dense chunk vectors (library path) across runs.",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the report to this JSON file (its folder must exist).",
)
@click.pass_obj
def eval_command(
    settings: Settings,
    dataset: Path,
    via: str,
    modes: tuple[str, ...],
    model_names: tuple[str, ...],
    split: str,
    queries: int | None,
    docs: int | None,
    cache: Path | None,
    json_out: Path | None,
) -> None:
    """Retrieval quality on a BEIR-layout DATASET folder (corpus.jsonl, queries.jsonl,
    qrels/<split>.tsv): nDCG@10, Recall@10, Recall@100, MRR@10 and the zero-result rate per
    mode, under the current settings; per model with several --model options."""
    from allinone.status_view import progress_bar
    from evaluation import load_beir
    from evaluation.beir import DatasetError
    from evaluation.runner import table

    _only_with("cache", via != "product", "--via library or both")
    if json_out is not None:
        _require_writable(json_out, "--json")  # now, not after the run: its results go there
    if cache is not None:
        _require_cache(cache)
    try:
        data = load_beir(dataset, split)
        if queries or docs:
            data = data.subset(queries or len(data.qrels), docs or len(data.corpus))
    except (DatasetError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"{data.name}: {counted(len(data.corpus), 'document')}, "
        f"{counted(len(data.qrels), 'judged query', 'judged queries')}"
    )
    report: dict[str, object] = {"dataset": data.name, "queries": len(data.qrels)}
    rows: dict[str, dict[str, float]] = {}
    echo = click.echo
    names = list(dict.fromkeys(model_names)) or [settings.dense_model]
    per_model: dict[str, dict[str, object]] = {}
    with progress_bar("eval", None) as step:
        _eval_models(settings, data, via, modes, names, cache, step, per_model, rows, echo)
    if len(names) == 1:
        report |= per_model[names[0]]
    else:
        report["models"] = per_model
    click.echo(table(rows))
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def _require_cache(path: Path) -> None:
    """Open ``--cache`` as the run will (creating the file and its folder when missing) and
    refuse it (exit 2) when it is not an SQLite database or cannot be written."""
    import sqlite3

    from evaluation.cache import VectorCache

    try:
        VectorCache(path, "").close()
    except (OSError, sqlite3.Error) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="'--cache'") from None
    _require_writable(path, "--cache")


def _eval_models(
    settings: Settings,
    data: Any,
    via: str,
    modes: tuple[str, ...],
    names: list[str],
    cache: Path | None,
    step: Any,
    per_model: dict[str, dict[str, object]],
    rows: dict[str, dict[str, float]],
    echo: Any,
) -> None:
    """``ncindex eval``'s runs, one per model and path, with a progress bar (``step``)."""
    from evaluation import MODES
    from evaluation.product import PRODUCT_MODES
    from evaluation.runner import run_library, run_product
    from ncindex.embedding.embedder import Embedder

    for name in names:
        run = settings.model_copy(update={"dense_model": name})
        embedder = Embedder(run)
        label = f"{name}: " if len(names) > 1 else ""
        out = per_model[name] = {}

        def report(what: str, done: int, total: int, label: str = label) -> None:
            step(completed=done, total=total, description=f"{label}{what}")

        if via in ("library", "both"):
            wanted = list(modes) or list(MODES)
            metrics, facts = run_library(
                run,
                data,
                embedder=embedder,
                modes=wanted,
                cache_path=cache,
                echo=echo,
                progress=lambda what, done, total: report(f"library {what}", done, total),
            )
            out["library"] = {m: v.as_dict() for m, v in metrics.items()} | {"facts": facts}
            rows |= {f"{label}{m} (library)": v.as_dict() for m, v in metrics.items()}
        if via in ("product", "both"):
            wanted = [m for m in (modes or PRODUCT_MODES) if m in PRODUCT_MODES]
            if not wanted:
                raise click.ClickException(f"the product path runs only {', '.join(PRODUCT_MODES)}")
            metrics, facts = run_product(
                run,
                data,
                embedder=embedder,
                modes=wanted,
                echo=echo,
                progress=lambda what, done, total: report(f"product {what}", done, total),
            )
            out["product"] = {m: v.as_dict() for m, v in metrics.items()} | {"facts": facts}
            rows |= {f"{label}{m} (product)": v.as_dict() for m, v in metrics.items()}


_SCAN_TYPES = tuple(t.value for t in DocType)


@main.command()
@click.option("--user", "users", multiple=True, help="Account to scan (repeatable; default all).")
@click.option(
    "--doc-type",
    "doc_types",
    multiple=True,
    type=click.Choice(_SCAN_TYPES),
    help="Doc type to scan (repeatable; default every indexed type).",
)
@click.option(
    "--apply", is_flag=True, help="Enqueue the changes and store scan state (default: report)."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON report per scan, with changes.")
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="With --apply: seconds to wait for a running scan of the same user and type.",
)
@click.pass_obj
def reconcile(
    settings: Settings,
    users: tuple[str, ...],
    doc_types: tuple[str, ...],
    apply: bool,
    as_json: bool,
    wait: float,
) -> None:
    """Compare Nextcloud with the index and report what differs; --apply enqueues the fixes.

    Runs the scan code of the ``ncindex.reconcile_scan`` task in this process. A dry run
    (the default) enqueues nothing and leaves the stored scan state alone. With --apply each
    scan takes the same per-user, per-type lock as the task; when a scan of that user and type
    is running (and still is after --wait seconds) it says so and skips it (exit status 3).
    """
    from allinone.status_view import progress_bar
    from ncindex.errors import StoreUnavailable, UnsupportedDocType
    from ncindex.index.indexing import Indexer
    from ncindex.ingest.queueing import celery_app
    from ncindex.runtime import Services
    from ncindex.sync.reconcile import Reconciler, scan_lock, scan_types

    _only_with("wait", apply, "--apply (a dry run takes no lock, so waits for none)")
    if not settings.accounts:  # nothing to scan: say so rather than print nothing
        raise _no_accounts(settings)
    _require_accounts(settings, users)
    services = Services(settings)
    try:
        services.store  # noqa: B018  (open it now to report a busy embedded store clearly)
    except StoreUnavailable as exc:
        raise click.ClickException(
            f"cannot open the vector store ({exc}); the embedded store allows one process — "
            "stop `ncindex up` or use a Qdrant server (NCINDEX_QDRANT_URL)"
        ) from exc
    producer = celery_app(settings) if apply else None
    reconciler = Reconciler(services, Indexer(services), producer)
    failed = busy = False
    ttl = settings.lock_ttl
    types = list(doc_types or [t.value for t in scan_types()])
    accounts = list(users or settings.accounts)
    try:
        with progress_bar("scans", len(types) * len(accounts)) as step:
            for doc_type in types:
                for user in accounts:
                    step(0, description=f"scanning {user} {doc_type}")
                    lock = (
                        scan_lock(
                            services.redis, settings.names, user, doc_type, ttl=ttl, wait=wait
                        )
                        if apply
                        else contextlib.nullcontext(True)  # a dry run changes nothing: no lock
                    )
                    with lock as held:
                        if not held:
                            busy = True
                            click.echo(f"{user} {doc_type}: a scan is running; skipped", err=True)
                            step()
                            continue
                        try:
                            report = reconciler.scan(user, doc_type, apply=apply)
                        except UnsupportedDocType as exc:
                            click.echo(f"{doc_type}: {exc.detail}", err=True)
                            step(len(accounts) - accounts.index(user))
                            break
                    step()
                    failed |= report.error is not None
                    if as_json:
                        click.echo(json.dumps(report.to_json()))
                        continue
                    click.echo(_describe(report))
    finally:
        if producer is not None:
            producer.close()
        services.close()
    if failed:
        raise SystemExit(1)
    if busy:
        raise SystemExit(3)


def _no_accounts(settings: Settings) -> click.ClickException:
    """The error of an account command run with no account configured: without
    ``NCINDEX_NEXTCLOUD_URL`` too, the accounts are those of the simulator ``ncindex up``
    serves inside its own process (random admin password, nothing written down), which this
    process cannot reach; what to do instead is said."""
    message = "no Nextcloud accounts configured (NCINDEX_ACCOUNTS)"
    if not settings.nextcloud_url:
        message += (
            "; without NCINDEX_NEXTCLOUD_URL, `ncindex up` (`make run`) serves a Nextcloud "
            "simulator inside its own process, which account commands cannot reach: start "
            "`ncindex up` again — it makes the simulator's users before its worker runs and "
            "ends their holds (a refusal or a missing user kept in Redis from the run before)"
        )
    return click.ClickException(message)


@main.command()
@click.argument("user")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def forget(settings: Settings, user: str, as_json: bool) -> None:
    """Take USER, a user deleted from Nextcloud, out of the index now.

    Asks Nextcloud as the webhook admin (NCINDEX_ADMIN_USER) whether USER still exists
    (GET /ocs/v2.php/cloud/users/USER). Only Nextcloud's answer "User does not exist" (OCS
    404) forgets them: the documents only they held, and the files and notes they owned, are
    deleted; they leave the acl of the others. A refused account's scans do the same on their
    own; this does it at once. Exit 1, nothing changed, when USER exists or Nextcloud gives no
    clear answer (the admin refused, Nextcloud unavailable).
    """
    from ncindex.errors import StoreUnavailable
    from ncindex.index.indexing import Indexer
    from ncindex.runtime import Services
    from ncindex.sync.deleted import Deleted, check_deleted

    if not settings.accounts:
        raise _no_accounts(settings)
    services = Services(settings)
    try:
        try:
            # the operator's own command: asked even while a refusal holds the admin back
            found, documents = check_deleted(
                services, Indexer(services), user, held_back=False, confirm=False
            )
        except StoreUnavailable as exc:
            raise click.ClickException(
                f"cannot open the vector store ({exc}); the embedded store allows one process "
                "— stop `ncindex up` or use a Qdrant server (NCINDEX_QDRANT_URL)"
            ) from exc
    finally:
        services.close()
    if as_json:
        click.echo(json.dumps({"user": user, "found": found.value, "documents": documents}))
    if found is Deleted.FORGOTTEN:
        if not as_json:
            click.echo(
                f"{user}: Nextcloud says the user does not exist; "
                f"{counted(documents, 'document')} changed"
            )
        return
    if found is Deleted.EXISTS:
        message = f"{user} exists in Nextcloud: nothing forgotten"
    elif user == settings.webhook_admin:
        message = f"{user} is the webhook admin, whose credentials ask: nothing forgotten"
    else:
        message = (
            f"Nextcloud gave {settings.webhook_admin} no clear answer about {user} (see the "
            "log): nothing forgotten"
        )
    if as_json:
        raise SystemExit(1)
    raise click.ClickException(message)


@main.command()
@click.argument("user")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def release(settings: Settings, user: str, as_json: bool) -> None:
    """Check USER's app password now and end its hold if Nextcloud accepts it.

    After Nextcloud refuses an account's app password, ncindex does not send it again for 30
    minutes, then 1, 2, 4, at most 6 hours (each refused login slows every login from this
    machine). Once the cause is fixed in Nextcloud (the account enabled again, the user
    backend back), this asks GET /ocs/v2.php/cloud/user with it once, whatever the hold: if
    Nextcloud answers USER's user id, the refusal is forgotten and scans and tasks send it
    again at once. Exit 1, the hold kept, when Nextcloud refuses it (the refusal is recorded:
    the hold starts again from now) or the login name is another user's.
    """
    from ncindex.doctor import utc_time
    from ncindex.runtime import Services

    if not settings.accounts:
        raise _no_accounts(settings)
    if user not in settings.accounts:
        raise click.BadParameter("not a configured account (NCINDEX_ACCOUNTS)", param_hint="USER")
    services = Services(settings)
    try:
        result = services.release(user)
    except NextcloudAuthError as exc:
        raise click.ClickException(
            f"{user}: Nextcloud refused its app password again ({exc}); the hold stays, from "
            "now — check its app password (NCINDEX_ACCOUNTS or NCINDEX_ACCOUNTS_FILE) and its "
            "login name (NCINDEX_LOGINS)"
        ) from None
    finally:
        services.close()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "user": user,
                    "user_id": result.user_id,
                    "refusal": result.refusal,
                    "held_until": None if result.hold is None else result.hold.until,
                    "released": result.released,
                }
            )
        )
    if result.user_id != user:
        message = (
            f"login {result.login!r} is user {result.user_id!r}, configured as {user!r}: "
            "nothing released; name the user id as the account and the login in NCINDEX_LOGINS"
        )
        if as_json:
            raise SystemExit(1)
        raise click.ClickException(message)
    if as_json:
        return
    accepted = f"{user}: Nextcloud accepts its app password (login {result.login!r})"
    if result.refusal is None:
        click.echo(f"{accepted}; no refusal was recorded: nothing to release")
    elif not result.released:
        click.echo(f"{accepted}; a refusal recorded meanwhile stays: run it again")
    elif result.hold is None:
        click.echo(f"{accepted}; its refusal ({result.refusal.get('where', '')}) is forgotten")
    else:
        click.echo(
            f"{accepted}; released the hold that would have lasted until "
            f"{utc_time(result.hold.until)} (refused {utc_time(result.hold.since)}: "
            f"{result.hold.refusal}): its scans and tasks send it again now"
        )


def _describe(report: object) -> str:
    from ncindex.sync.reconcile import ScanReport

    assert isinstance(report, ScanReport)
    head = f"{report.user} {report.doc_type}: "
    if report.error and report.user_deleted == "forgotten":
        return head + (
            f"listing failed ({report.error}); Nextcloud says the user does not exist: "
            f"{counted(report.forgotten, 'document')} changed"
        )
    if report.error and report.user_deleted == "unconfirmed":
        return head + (
            f"listing failed ({report.error}); Nextcloud says the user does not exist, for the "
            "first time in 30 minutes: forgotten when a later scan hears it again"
        )
    if report.error:
        return head + f"listing failed ({report.error}); nothing enqueued"
    if report.unavailable:
        return head + f"app not available ({report.unavailable}); skipped"
    counts = report.counts()
    changes = ", ".join(f"{k} {v}" for k, v in counts.items() if v) or "in sync"
    line = (
        f"{head}listed {report.listed}, indexed {report.indexed}, "
        f"{counted(report.requests, 'request')}; "
        f"{changes}"
    )
    if report.guard:
        line += f"; guard {report.guard}"
    if report.forbidden:
        line += f"; {counted(report.forbidden, 'folder')} not readable (403), skipped"
    if report.outdated:
        line += f"; {counted(report.outdated, 'document')} read by an older extraction"
    if report.applied:
        line += f"; enqueued {report.enqueued}"
        if report.coalesced:
            line += f" ({report.coalesced} already pending)"
    else:
        would = len(report.index) + len(report.reread) + len(report.remove)
        line += f"; would enqueue {would} (dry run)"
    return line


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON object.")
@click.option("--watch", is_flag=True, help="Redraw every --interval seconds, with progress bars.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="Seconds between --watch frames.",
)
@click.option("--iterations", type=click.IntRange(min=1), hidden=True, help="Stop --watch after N.")
@click.pass_obj
def status(
    settings: Settings, as_json: bool, watch: bool, interval: float, iterations: int | None
) -> None:
    """Nextcloud's own status (/status.php), queue depths, workers seen, last scan per user and
    doc type, index lag, dead letters;
    per user (the configured accounts and every user a document was queued for) and in total:
    pending items (documents and folders, queued per account: a shared file counts for each),
    documents/s and chunks/s over the last minutes, the first indexing's
    progress and the backlog's ETA. Indexed counts per user, and whether documents of an older
    BM25 analyzer wait for `ncindex reindex --analyzer` (a sample of them), need a Qdrant
    server (NCINDEX_QDRANT_URL): the embedded store belongs to `ncindex up`. A rebuild under
    way: a reindex step (`ncindex reindex --model` or `--analyzer`: since when, how far) and
    a payload index made again at start. From the registrations Nextcloud lists for this
    deployment (as `ncindex doctor` decides it): classes registered more than once or no
    longer subscribed, which `ncindex webhooks register` removes, and while
    NCINDEX_WEBHOOK_PREVIOUS_SECRET is set, whether it can be emptied."""
    import redis as redis_lib

    from ncindex.errors import StoreUnavailable
    from ncindex.ingest.queueing import celery_app
    from ncindex.nextcloud.client import make_http
    from ncindex.nextcloud.server_status import server_status
    from ncindex.progress import Progress
    from ncindex.runtime import Services, configured_credentials
    from ncindex.store import store_status
    from ncindex.sync.status import collect_status, other_namespaces, webhook_registrations

    if watch and as_json:
        raise click.UsageError("--json cannot be combined with --watch (it prints one object)")
    _only_with("interval", watch, "--watch")
    _only_with("iterations", watch, "--watch")
    client = _redis(settings)
    services = Services(settings)  # lazy: the store with a Qdrant server only, Nextcloud's
    # OCS API for the registrations only (webhook_registrations)
    producer = celery_app(settings)
    http = make_http(settings) if settings.nextcloud_url else None
    credentials = configured_credentials(settings)
    registrations = kept_for(SLOW_REFRESH_SECONDS, webhook_registrations)
    others = kept_for(SLOW_REFRESH_SECONDS, lambda: other_namespaces(client, settings.names))

    def collect() -> dict[str, Any]:
        try:
            replies = producer.control.ping(timeout=0.5)
            workers = sorted(name for reply in replies for name in reply)
        except Exception:  # the broker is down: the Redis reads below say so
            workers = None
        users = sorted(set(settings.accounts) | set(Progress(client, settings.names).users()))
        problem = None
        try:
            store = services.store if settings.qdrant_url else None
            data = collect_status(
                client,
                settings.names,
                users=users,
                store=store,
                workers=workers,
                credentials=credentials,
                others=others,
            )
        except StoreUnavailable as exc:  # the rest is still worth showing: counts say "?"
            problem = str(exc)
            data = collect_status(
                client,
                settings.names,
                users=users,
                workers=workers,
                credentials=credentials,
                others=others,
            )
        data["store"] = store_status(settings) | ({"error": problem} if problem else {})
        if problem is None and store is not None:
            try:
                data["store"]["layout_drift"] = _layout_drift(store)
            except StoreUnavailable as exc:
                data["store"]["error"] = str(exc)
        data["nextcloud"] = server_status(
            http, settings.nextcloud_url, timeout=STATUS_PROBE_SECONDS
        ).as_dict()
        listed = registrations(services, nextcloud_up=data["nextcloud"]["problem"] is None)
        data["webhook_rotation"] = listed["rotation"]
        data["webhook_surplus"] = listed["surplus"]
        return data

    try:
        if watch:
            _watch(collect, interval, iterations)
            return
        data = collect()
    except redis_lib.RedisError as exc:
        raise click.ClickException(_redis_problem(settings.redis_url, exc)) from exc
    finally:
        producer.close()
        if http is not None:
            http.close()
        services.close()
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    _print_status(data)


def _layout_drift(store: Any) -> list[dict[str, Any]]:
    """The live collection's differences from the settings' layout, as JSON objects
    (:meth:`~ncindex.store.qdrant_server.QdrantServerStore.layout_drift`, one ``GET``);
    ``[]`` for another engine. Raises ``StoreUnavailable``."""
    from dataclasses import asdict

    from ncindex.store.qdrant_server import QdrantServerStore

    if not isinstance(store, QdrantServerStore):
        return []
    return [asdict(d) for d in store.layout_drift()]


def _watch(collect: Any, interval: float, iterations: int | None) -> None:
    """Redraw the status every ``interval`` seconds on a terminal; to a pipe or a file, where
    nothing can be redrawn, write one frame after another (each flushed as it is written)."""
    from rich.console import Console
    from rich.live import Live

    from allinone.status_view import render

    count = 0
    console = Console()
    if not console.is_terminal:
        try:
            while True:
                console.print(render(collect()))
                console.file.flush()
                if iterations is not None and (count := count + 1) >= iterations:
                    return
                time.sleep(interval)
        except KeyboardInterrupt:
            return
    with Live(render(collect()), console=console, refresh_per_second=4) as live:
        try:
            while iterations is None or (count := count + 1) < iterations:
                time.sleep(interval)
                live.update(render(collect()))
        except KeyboardInterrupt:
            pass


def _print_status(data: dict[str, Any]) -> None:
    from allinone.status_view import (
        analyzer_lines,
        duration,
        extraction_lines,
        index_rebuild_lines,
        optimizer_lines,
        other_namespaces_line,
        reindex_lines,
        unknown_counts,
    )
    from ncindex.accounts import cause_text
    from ncindex.doctor import utc_time

    click.echo(f"nextcloud: {data['nextcloud']['summary']}")
    if rotation := data.get("webhook_rotation"):
        click.echo(f"webhook secret: {rotation['advice']}")
    if surplus := data.get("webhook_surplus"):
        click.echo(f"webhooks: {surplus}")
    click.echo(
        "queues: "
        + ", ".join(f"{k} {v}" for k, v in data["queues"].items())
        + f"; reserved {data['reserved']}"
    )
    click.echo(f"index lag: {data['index_lag_seconds']} s")
    for line in reindex_lines(data["reindex"], time.time()):
        click.echo(line)
    for line in index_rebuild_lines(data["index_rebuilds"], time.time()):
        click.echo(line)
    if not data["scans"]:
        click.echo("scans: none recorded")
    if line := other_namespaces_line(data):
        click.echo(line)
    for key, scan in data["scans"].items():
        changes = ", ".join(f"{k} {v}" for k, v in scan["changes"].items() if v) or "in sync"
        state = (
            f"failed: {scan['error']}"
            if scan.get("error")
            else f"app not available: {scan['unavailable']}"
            if scan.get("unavailable")
            else changes
        )
        age = scan["in_sync_age_seconds"]
        synced = (
            ""  # this scan found it in sync
            if state == "in sync"
            else "; never in sync yet"
            if age is None
            else f"; last in sync {duration(age)} ago"
        )
        click.echo(
            f"scan {key}: {duration(time.time() - scan['at'])} ago, listed {scan['listed']}, "
            f"{counted(scan['requests'], 'request')}, {state}{synced}"
        )
    letters = data["dead_letters"]
    click.echo(f"dead letters: {sum(e['size'] for e in letters.values()) if letters else 0}")
    for line in optimizer_lines(data["store"], time.time()):
        click.echo(line)
    if drift := data["store"].get("layout_drift"):
        click.echo(
            "layout: the live collection differs from "
            f"{counted(len(drift), 'NCINDEX_QDRANT_* setting')} (`ncindex doctor` names each; "
            "`ncindex reindex --layout` applies "
            "what Qdrant can change in place)"
        )
    for line in analyzer_lines(data["analyzer"]):
        click.echo(line)
    for line in extraction_lines(data["outdated_extraction"]):
        click.echo(line)
    for key, entry in letters.items():
        click.echo(f"  {key} ({entry['type']}, {entry['size']}): {entry['sample']}")
    refused = data["accounts_refused"]
    click.echo(f"accounts Nextcloud refuses (401): {len(refused)}")
    for user, entry in refused.items():
        at = entry.get("at")
        since = f"{duration(time.time() - at)} ago" if isinstance(at, int | float) else "?"
        deleted = entry.get("deleted")
        if isinstance(deleted, dict):
            todo = (
                "no longer configured: nothing left to do"
                if entry.get("configured") is False
                else "remove the account from NCINDEX_ACCOUNTS"
            )
            click.echo(
                f"  {user}: since {since}; Nextcloud says the user does not exist — "
                f"{counted(deleted.get('documents', '?'), 'document')} forgotten; {todo}"
            )
            continue
        missing = entry.get("missing_since")
        if isinstance(missing, int | float):
            from ncindex.sync.deleted import CONFIRM_SECONDS

            click.echo(
                f"  {user}: since {since}, {entry.get('where', '')} — Nextcloud said at "
                f"{utc_time(missing)} that the user does not exist (deleted): a scan that hears "
                f"it again from {utc_time(missing + CONFIRM_SECONDS)} takes its documents out of "
                f"the index, `ncindex forget {user}` does it now; then remove the account"
            )
            continue
        until = entry.get("held_until")
        held = (
            f"; held back until {utc_time(until)} (in {duration(until - time.time())}): not sent "
            f"before then, unless `ncindex release {user}` finds that it works again"
            if isinstance(until, int | float)
            else ""
        )
        if entry.get("replaced"):
            click.echo(
                f"  {user}: since {since}, {entry.get('where', '')} — of the app password it had "
                "before: the one configured now was not refused; processes read the settings "
                "when they start, so restart those started before the change (`ncindex up`, "
                "the workers, beat, the receiver and the search API) — the next request "
                "Nextcloud accepts clears this"
            )
            continue
        told = cause_text(entry.get("cause"), user) or (
            "check its app password (NCINDEX_ACCOUNTS or NCINDEX_ACCOUNTS_FILE) and its login "
            "name (NCINDEX_LOGINS)"
        )
        click.echo(f"  {user}: since {since}, {entry.get('where', '')} — {told}{held}")
    workers = data["workers"]
    click.echo(
        "workers: "
        + ("not asked" if workers is None else ", ".join(workers) or "none answered a ping")
    )
    total = data["total"]
    rates = total["rates"]
    eta = "none: no worker answered a ping" if workers == [] else duration(total["eta_seconds"])
    click.echo(
        f"total: pending {total['pending']}, {rates['documents_per_second']} documents/s, "
        f"{rates['chunks_per_second']} chunks/s over {rates['window_seconds']} s, backlog ETA "
        f"{eta}, dead letter {total['dead_letter']}, failing {total['failing']}"
    )
    for user, row in data["users"].items():
        first = row["first_indexing"]
        state = first["state"]
        if state == "running":
            progress = first["progress"]
            state = (
                f"first indexing {progress:.0%}" if progress is not None else "first indexing"
            ) + f", ETA {duration(first['eta_seconds'])}"
        indexed = row.get("indexed")
        counts = (
            ", ".join(f"{k} {v}" for k, v in indexed.items())
            if indexed
            else f"indexed: ? ({unknown_counts(data['store'])})"
        )
        skipped = ", ".join(f"{k} {v}" for k, v in row["skipped"].items()) or "none"
        click.echo(
            f"user {user}: {counts}; pending {row['pending']}; "
            f"{row['rates']['documents_per_second']} documents/s; {state}; dead letter "
            f"{row['dead_letter']}, failing {row['failing']}; skipped {skipped}"
            + (f"; truncated {row['truncated']}" if row.get("truncated") else "")
        )


def _redis(settings: Settings) -> Any:
    import redis as redis_lib

    return redis_lib.Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=2)


@main.command()
@click.option("--user", help="Only this account's documents.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@click.pass_obj
def failures(settings: Settings, user: str | None, as_json: bool) -> None:
    """Dead-lettered and failing documents: reason or last error, attempts, and for a file
    its path and MIME type. `ncindex retry` sends them back."""
    import redis as redis_lib

    from ncindex.sync.failures import list_failures

    if user is not None:
        _require_accounts(settings, [user])
    try:
        rows = list_failures(_redis(settings), settings.names, user)
    except redis_lib.RedisError as exc:
        raise click.ClickException(_redis_problem(settings.redis_url, exc)) from exc
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in rows], indent=2))
        return
    if not rows:
        click.echo("no failed documents")
        return
    for row in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(row.at))
        state = (
            "dead letter"
            if row.kind == "dead_letter"
            else ("failing, retry scheduled" if row.retrying else "failing")
        )
        click.echo(f"{row.subject}  {row.user}  {state}  {row.attempts} attempts  {when} UTC")
        if row.path or row.mime_type:
            click.echo(f"  file: {row.path or '?'} ({row.mime_type or 'MIME type unknown'})")
        click.echo(f"  {row.reason}")


@main.command()
@click.argument("doc_key", required=False)
@click.option("--all", "retry_all", is_flag=True, help="Every listed document.")
@click.option("--user", help="With --all: only this account's documents.")
@click.pass_obj
def retry(settings: Settings, doc_key: str | None, retry_all: bool, user: str | None) -> None:
    """Send failed documents back to the workers: DOC_KEY (file:<id>, note:<id>,
    deck_card:<id>, news_item:<id>, or a subject node:<id> as `ncindex failures` lists it), or
    --all. Each leaves the dead letter and is indexed again; a file that has not changed is
    parked again with the same reason."""
    from ncindex.ingest.queueing import celery_app
    from ncindex.sync.failures import list_failures, subject_of
    from ncindex.sync.failures import retry as send_back

    if (doc_key is None) == (not retry_all):
        raise click.UsageError("give one DOC_KEY or --all")
    _only_with("user", retry_all, "--all")
    if user is not None:
        _require_accounts(settings, [user])
    client = _redis(settings)
    rows = list_failures(client, settings.names, user)
    if doc_key is not None:
        subject = subject_of(doc_key)
        rows = [r for r in rows if r.subject == subject]
        if not rows:
            raise click.ClickException(f"{doc_key} is neither in the dead letter nor failing")
    producer = celery_app(settings)
    try:
        for row in rows:
            send_back(producer, client, settings.names, row)
            click.echo(f"retrying {row.subject} ({row.user})")
    finally:
        producer.close()
    click.echo(f"{len(rows)} sent back")


@main.command()
@click.option("--model", "model", help="Build this dense model's collection, then switch to it.")
@click.option("--back", is_flag=True, help="Swap the live and the standby model (instant).")
@click.option("--finish", is_flag=True, help="Stop keeping the second model; drop its collection.")
@click.option(
    "--analyzer",
    is_flag=True,
    help="Rewrite the BM25 vectors an older analyzer version made (in place, search stays up).",
)
@click.option(
    "--layout",
    is_flag=True,
    help="Qdrant server: change the collections' layout to the NCINDEX_QDRANT_* settings where "
    "Qdrant can in place; name what only a new collection takes.",
)
@click.option(
    "--wait",
    "wait_seconds",
    type=click.FloatRange(min=0),
    default=None,
    help="With --model, --finish or --analyzer: wait up to this many seconds for the "
    "workers to be done; with --layout, for Qdrant to have rebuilt the collections (else "
    "until it has).",
)
@click.pass_obj
def reindex(
    settings: Settings,
    model: str | None,
    back: bool,
    finish: bool,
    analyzer: bool,
    layout: bool,
    wait_seconds: float | None,
) -> None:
    """Change the dense model or the BM25 analyzer without downtime; with no option, show the
    models.

    --model NAME: the workers build NAME's collection (its ONNX and tokenizer files in
    NCINDEX_MODEL_DIR/<last part of NAME>) while search keeps using the live model, then
    switch to it atomically; the old model stays current as the standby. --back switches
    back. --finish drops the second model. --analyzer: the workers rewrite, document by
    document, the BM25 vectors an older version of the analysis chain made (after an upgrade
    that changed ANALYZER_VERSION). Compare models first with `ncindex eval DIR --model A
    --model B`. --layout (Qdrant server): set on the live collection (and a standby or one
    being built) the layout parameters the NCINDEX_QDRANT_* settings now ask for, which a
    collection otherwise keeps from its creation (`ncindex doctor` lists them): Qdrant
    applies them in place and rebuilds the segments they concern in the background, which
    this follows until the collection is green (Ctrl-C leaves Qdrant at it); a raised
    replication factor is recorded, but the replicas of existing shards are Qdrant's cluster
    API's to add; the shard number only a new collection takes.
    """
    from ncindex import names
    from ncindex.errors import ReindexError
    from ncindex.index.indexing import Indexer
    from ncindex.index.reindex import Reindexer, progress, require_model_files
    from ncindex.ingest.queueing import PUBLISH_RETRY, celery_app
    from ncindex.runtime import Services
    from ncindex.store import model_slug

    if sum((model is not None, back, finish, analyzer, layout)) > 1:
        raise click.UsageError("choose one of --model, --back, --finish, --analyzer, --layout")
    _only_with(
        "wait_seconds",
        model is not None or finish or analyzer or layout,
        "--model, --finish, --analyzer or --layout",
    )
    services = Services(settings)
    reindexer = Reindexer(services, Indexer(services))  # here only the pointers are used
    try:
        if layout:
            _apply_layout(settings, reindexer.pointers(), wait_seconds)
            return
        if back:
            moved = reindexer.back()
            click.echo(f"live: {moved.active}; standby: {moved.standby}")
            return
        if finish and reindexer.pointers().mirror is None:  # the task would have nothing to do
            raise ReindexError("no second model to finish (no standby, none being built)")
        if model is not None:
            require_model_files(settings, model)  # here, before a worker finds out
        if model is not None and reindexer.pointers().active == model_slug(model):
            raise click.ClickException(
                f"model {model!r} is already live (changed NCINDEX_QDRANT_* settings reach its "
                "collection through `ncindex reindex --layout`; see `ncindex doctor`)"
            )
        if model is not None or finish or analyzer:
            before = progress(services).get("seq")
            task, kwargs = (
                (names.REINDEX_MODEL, {"model": model})
                if model is not None
                else (names.REINDEX_ANALYZER if analyzer else names.REINDEX_FINISH, {})
            )
            celery_app(settings).send_task(
                task, kwargs=kwargs, queue=names.INDEX, retry_policy=PUBLISH_RETRY
            )
            click.echo(f"queued {task} {kwargs or ''}".rstrip())
            if wait_seconds is not None:
                done = {"switched"} if model else {"reanalyzed"} if analyzer else {"dropped"}
                _wait_reindex(services, before, done, wait_seconds)
        _show_models(reindexer.pointers(), progress(services))
    except ReindexError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        services.close()


def _apply_layout(settings: Settings, pointers: Any, wait_seconds: float | None) -> None:
    """``ncindex reindex --layout``: apply the settings' layout to each collection the model
    pointers name (:meth:`~ncindex.store.qdrant_server.QdrantServerStore.apply_layout`),
    print, per collection, what was set and what was not, and follow Qdrant's rebuild of each
    changed collection until it is green (:func:`_wait_optimized`; all of them within
    ``wait_seconds`` if given). Raises ``click.ClickException`` on the embedded engine, whose
    shard takes a layout only when it is created."""
    from ncindex.store import open_store
    from ncindex.store.qdrant_server import QdrantServerStore

    if not settings.qdrant_url:
        raise click.ClickException(
            "--layout changes a Qdrant server's collections (NCINDEX_QDRANT_URL); the embedded "
            'engine\'s shard keeps the layout it was created with (README "Collection layout")'
        )
    slugs = [s for s in (pointers.active, pointers.standby, pointers.building) if s]
    if not slugs:
        click.echo("no collection yet: the first one is created with the settings' layout")
        return
    deadline = None if wait_seconds is None else time.monotonic() + wait_seconds
    for slug in slugs:
        store = open_store(settings, model_slug=slug)
        try:
            assert isinstance(store, QdrantServerStore)  # a URL is set
            drift = store.apply_layout()
            if not drift:
                click.echo(f"{store.collection}: has the layout the settings ask for")
            for item in drift:
                verdict = "set" if item.in_place else "NOT applied"
                click.echo(
                    f"{store.collection}: {verdict}: {item.setting} {item.live} -> {item.wanted}"
                    f" ({item.how})"
                )
            if any(item.in_place for item in drift):
                _wait_optimized(store, deadline)
        finally:
            store.close()


def _wait_optimized(store: Any, deadline: float | None) -> None:
    """Poll ``store``'s collection (:meth:`~ncindex.store.qdrant_server.QdrantServerStore.
    optimization`, every second) until Qdrant reports it green (or grey: nothing runs until
    an update triggers the optimisers), with a progress bar of its indexed vectors; stop at
    ``deadline`` (``time.monotonic()``) if one is given. Raises ``click.ClickException`` on
    an optimiser error or at the deadline: Qdrant goes on either way."""
    from allinone.status_view import progress_bar

    with progress_bar(f"{store.collection}: Qdrant rebuilding", None) as step:
        while True:
            state = store.optimization()
            if state.error is not None:
                raise click.ClickException(f"{store.collection}: optimiser error: {state.error}")
            if state.status == "green":
                click.echo(f"{store.collection}: rebuilt (green)")
                return
            if state.status == "grey":  # optimisations pending until an update triggers them
                click.echo(f"{store.collection}: grey (Qdrant optimises at its next update)")
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise click.ClickException(
                    f"{store.collection}: still {state.status} (Qdrant is rebuilding it; "
                    "it goes on): see `ncindex doctor`"
                )
            step(
                completed=min(state.indexed, state.points),
                total=state.points or None,
                description=f"{store.collection}: Qdrant rebuilding ({state.status})",
            )
            time.sleep(1)


def _wait_reindex(services: Any, before: str | None, done: set[str], seconds: float) -> None:
    from allinone.status_view import progress_bar
    from ncindex.index.reindex import progress

    done = done | {"failed"}
    deadline = time.monotonic() + seconds
    with progress_bar("reindex: waiting for a worker", None) as step:
        while time.monotonic() < deadline:
            state = progress(services)
            if state.get("seq") != before:
                if state.get("state") in done:
                    if state["state"] == "failed":
                        raise click.ClickException(f"reindex failed: {state.get('error')}")
                    return
                total = int(state.get("documents") or 0)
                left = int(state.get("remaining") or 0)
                step(
                    completed=max(0, total - left),
                    total=total or None,
                    description=f"reindex {state.get('model', '')}: {state.get('state', '')}",
                )
            time.sleep(1)
    raise click.ClickException(f"not done after {seconds:g} s; see `ncindex reindex`")


def _show_models(pointers: Any, state: dict[str, str]) -> None:
    click.echo(f"live: {pointers.active or 'none yet'}")
    if pointers.standby:
        click.echo(f"standby: {pointers.standby} (kept current; `ncindex reindex --back`)")
    if pointers.building:
        click.echo(f"building: {pointers.building}")
    if state:
        line = ", ".join(f"{k} {state[k]}" for k in sorted(state))
        click.echo(f"last step: {line}")


if __name__ == "__main__":  # ``python -m allinone.cli``, as :func:`ncindex_command` prints
    main()
