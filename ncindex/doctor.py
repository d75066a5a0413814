"""``ncindex doctor``: check a configured Nextcloud and say, line by line, what works.

Each check in :data:`CHECKS` looks at one thing and returns :class:`Line`\\ s with a verdict:
``ok``, ``warn`` (works, with a cost the detail names), ``fail`` (ncindex cannot work as
configured; the command exits 1) or ``note`` (advice). A check that needs something an
earlier one found missing says it was skipped. Without ``NCINDEX_NEXTCLOUD_URL`` the server
check's one failing line says so, the checks that ask Nextcloud (:data:`ASK_NEXTCLOUD`) are
left out, and the others run — unless no setting of a deployment is given either
(:func:`sample_run`: ``make run``'s sample, whose secret and URLs ``ncindex up`` makes): then
the server's line is a note, and the checks of :data:`SAMPLE_MADE` are left out too. To add
a check, append ``(name, function)`` to :data:`CHECKS`.

What is checked, and from which source:

* the environment: ``NCINDEX_`` variables that are no setting (a misspelt name is otherwise
  ignored, its setting left at its default), with the closest setting's name;
* Redis at ``NCINDEX_REDIS_URL``: it answers, and is 7.0 or later; the webhook secret is set
  (the receiver refuses to start without it); the vector store (a Qdrant server, which must
  answer with the API key, or the embedded one, which one process at a time may open);
* the embedding model: ``NCINDEX_DENSE_MODEL`` against the model the live index was built
  with (the store's model pointers; :func:`check_model`);
* on a Qdrant server, the collections' layout against the ``NCINDEX_QDRANT_*`` settings
  (:func:`check_layout`);
* the server: ``GET /status.php`` (``installed``, ``maintenance``, ``needsDbUpgrade``,
  ``versionstring``: :mod:`ncindex.nextcloud.server_status`); the versions ncindex supports
  are 30–33 (webhook_listeners ships from 30);
* the apps: webhook_listeners (its OCS list answers; it ships with the server), Notes and Deck
  (their capabilities: ``notes.version``, ``deck.version``; Deck's card events need 1.18), News
  (``GET /index.php/apps/news/api/v1-3/version``);
* each account: ``GET /ocs/v2.php/cloud/user`` with its login name and app password must answer
  its user id (an app password only works with the login name it was created under:
  ``Session::validateTokenLoginName``); an account held back after a refusal
  (:meth:`ncindex.runtime.Services.account`) is not asked: its line says since and until when,
  the refusal, and that ``ncindex release`` ends the hold;
* the registered webhooks against the classes ncindex subscribes to
  (:data:`ncindex.ingest.events.SUBSCRIBED`; the required ones
  :data:`ncindex.ingest.events.REQUIRED`) and the secret each was made with: another one
  fails (every delivery refused 401), ``NCINDEX_WEBHOOK_PREVIOUS_SECRET`` warns (accepted
  until renewed), and a previous secret still set once every registration carries the
  current one warns that it can be emptied (the same list, no further request); a class
  registered that ncindex no longer subscribes to warns, whatever secret it was made with
  (``webhooks register`` removes it rather than renew it);
* ``NCINDEX_PUBLIC_URL``: a loopback one with a Nextcloud on another machine fails
  (:func:`ncindex.ingest.registration.loopback_target`); Nextcloud refuses to call a local
  address unless ``config.php`` has ``'allow_local_remote_servers' => true``
  (``lib/private/Http/Client/Client.php`` → ``LocalAddressChecker``);
* OCR on this machine: the ``tesseract`` program and the language data of
  ``NCINDEX_OCR_LANGUAGES`` (:func:`ncindex.text.ocr.ocr_status`);
* a note: deliveries are background jobs (``WebhookCall`` is a ``QueuedJob``), so with cron they
  wait for its next run unless ``occ background-job:worker`` runs (the admin manual's advice).
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import socket
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
import redis

from ncindex.accounts import Cause, cause_of, cause_text, refused_entry
from ncindex.embedding.analyzer import ANALYZER_VERSION
from ncindex.embedding.live_models import model_name_for
from ncindex.embedding.models import PACKAGED_DENSE_MODEL, model_paths
from ncindex.errors import (
    AccountHeld,
    ModelError,
    NcindexError,
    NextcloudAuthError,
    NotFound,
    RedisTooOld,
    StoreUnavailable,
)
from ncindex.index.reindex import (
    ANALYZER_SAMPLE,
    analyzer_upgrade_due,
    is_newer_analyzer,
    sample_analyzers,
)
from ncindex.ingest.events import REQUIRED, cost_without, missing_from
from ncindex.ingest.queueing import check_redis as check_redis_version
from ncindex.ingest.registration import (
    hook_uri,
    loopback_target,
    secret_rotation,
    subscribed,
)
from ncindex.nextcloud.apps import NEWS_API
from ncindex.nextcloud.client import version_tuple
from ncindex.nextcloud.server_status import server_status
from ncindex.redis_server import unreachable
from ncindex.runtime import Services
from ncindex.settings import Settings, url_without_password, weak_webhook_secret
from ncindex.store import VectorStore, edge_root, model_slug, open_store
from ncindex.text.ocr import ocr_status
from ncindex.wording import counted

Verdict = Literal["ok", "warn", "fail", "note"]
SUPPORTED_MAJORS = range(30, 34)
NEWS_VERSION = f"{NEWS_API}/version"
ACCOUNT_VARIABLES = "NCINDEX_ACCOUNTS or NCINDEX_ACCOUNTS_FILE"
WORKER_COMMAND = (
    "occ background-job:worker -t 60 'OCA\\WebhookListeners\\BackgroundJobs\\WebhookCall'"
)


@dataclass(frozen=True, slots=True)
class Line:
    """One verdict: ``check`` (what was looked at), ``verdict``, ``detail`` (what was found
    and what it costs)."""

    check: str
    verdict: Verdict
    detail: str


@dataclass(slots=True)
class Context:
    """What the checks share: the settings, the process services, and what earlier checks
    learned (``version`` of the server, its ``capabilities``, whether it was ``reachable`` and
    webhook_listeners answered, else why not: ``webhooks_unread``); ``sample``:
    :func:`sample_run`."""

    settings: Settings
    services: Services
    reachable: bool = False
    version: str = ""
    capabilities: dict[str, Any] = field(default_factory=dict)
    webhooks_api: bool = False
    webhooks_unread: str = "webhook_listeners not available"
    sample: bool = False


Check = Callable[[Context], list[Line]]


def check_server(ctx: Context) -> list[Line]:
    """Reachable, installed, not in maintenance nor waiting for its upgrade, and a supported
    version (:func:`~ncindex.nextcloud.server_status.server_status`); without
    ``NCINDEX_NEXTCLOUD_URL``, one failing line naming the checks left out
    (:data:`ASK_NEXTCLOUD`) — a note instead for ``make run``'s sample (``ctx.sample``:
    :func:`sample_run`)."""
    if not ctx.settings.nextcloud_url and ctx.sample:
        left_out = ", ".join(name for name, _ in CHECKS if name in ASK_NEXTCLOUD | SAMPLE_MADE)
        detail = (
            "NCINDEX_NEXTCLOUD_URL is not set, nor any setting of a deployment: this is "
            "`ncindex up` (make run) with its sample Nextcloud, which makes its own secret and "
            "URLs — nothing to check there. To check a deployment, run doctor with its settings "
            "(NCINDEX_NEXTCLOUD_URL, NCINDEX_ACCOUNTS, NCINDEX_WEBHOOK_SECRET, "
            f"NCINDEX_PUBLIC_URL) (not checked: {left_out})"
        )
        return [Line("server", "note", detail)]
    if not ctx.settings.nextcloud_url:
        left_out = ", ".join(name for name, _ in CHECKS if name in ASK_NEXTCLOUD)
        detail = "NCINDEX_NEXTCLOUD_URL is not set: there is no Nextcloud to check"
        return [Line("server", "fail", f"{detail} (not checked: {left_out})")]
    status = server_status(ctx.services.http, ctx.settings.nextcloud_url)
    ctx.version = status.version
    if status.problem is not None:
        return [Line("server", "fail", status.problem)]
    ctx.reachable = True
    major = _major(ctx.version)
    if major is None or major < SUPPORTED_MAJORS.start:
        return [Line("server", "fail", f"Nextcloud {ctx.version}: webhooks need Nextcloud 30")]
    if major >= SUPPORTED_MAJORS.stop:
        return [Line("server", "warn", f"Nextcloud {ctx.version}: newer than the tested 30–33")]
    return [Line("server", "ok", f"Nextcloud {ctx.version} at {ctx.settings.nextcloud_url}")]


def _missing_for_requests(ctx: Context) -> str | None:
    """Why no account can ask Nextcloud (it was not reachable, no account is configured), or
    ``None``: the reason the checks that need both give when skipped."""
    if not ctx.reachable:
        return "Nextcloud not reachable"
    if not ctx.settings.accounts:
        return f"no account configured ({ACCOUNT_VARIABLES})"
    return None


def check_apps(ctx: Context) -> list[Line]:
    """webhook_listeners, Notes, Deck and News: enabled, with their versions."""
    missing = _missing_for_requests(ctx)
    if missing:
        return [Line("apps", "fail", f"skipped: {missing}")]
    first = next(iter(ctx.settings.accounts))
    lines = []
    # clears=False throughout: a check writes nothing, and the shell running it may hold
    # another app password than the workers, whose refusal must stay recorded
    try:
        data = ctx.services.account(first, clears=False).ocs(
            "GET", "/ocs/v2.php/cloud/capabilities"
        )
        ctx.capabilities = dict(data.get("capabilities") or {}) if isinstance(data, dict) else {}
    except NcindexError as exc:
        lines.append(Line("apps", "warn", f"capabilities not readable: {exc}"))
    try:
        ctx.services.account(ctx.settings.webhook_admin, clears=False).list_webhooks()
        ctx.webhooks_api = True
        lines.append(Line("app webhook_listeners", "ok", f"enabled (ships with {ctx.version})"))
    except NotFound:
        ctx.webhooks_unread = "webhook_listeners not enabled"
        lines.append(
            Line(
                "app webhook_listeners",
                "fail",
                "not enabled: no change reaches the index but by scans "
                "(occ app:enable webhook_listeners)",
            )
        )
    except NextcloudAuthError as exc:  # the password, not the account's rights (401)
        admin = ctx.settings.webhook_admin
        ctx.webhooks_unread = (
            f"{admin}'s app password is refused: the `account {admin}` line says what to fix"
        )
        lines.append(
            Line(
                "app webhook_listeners",
                "fail",
                f"{admin}'s app password is refused ({exc}); the webhook list was not read "
                f"(NCINDEX_ACCOUNTS; the `account {admin}` line says more)",
            )
        )
    except NcindexError as exc:
        ctx.webhooks_unread = (
            f"the webhook list is refused to {ctx.settings.webhook_admin} (see `app "
            "webhook_listeners`)"
        )
        lines.append(
            Line(
                "app webhook_listeners",
                "fail",
                f"the webhook list is refused to {ctx.settings.webhook_admin} ({exc}); "
                "registering webhooks needs an admin account, or one in a group delegated "
                'the "Webhooks" admin privilege (NCINDEX_ADMIN_USER)',
            )
        )
    notes = (ctx.capabilities.get("notes") or {}).get("version")
    lines.append(
        Line("app notes", "ok", f"Notes {notes}")
        if notes
        else Line("app notes", "warn", "not enabled: notes are not indexed as notes")
    )
    deck = (ctx.capabilities.get("deck") or {}).get("version")
    if not deck:
        lines.append(Line("app deck", "warn", "not enabled: no Deck cards are indexed"))
    elif version_tuple(deck) >= (1, 18):
        lines.append(Line("app deck", "ok", f"Deck {deck} (card events)"))
    else:
        lines.append(
            Line("app deck", "ok", f"Deck {deck}: card changes are found by scans (events: 1.18)")
        )
    try:
        response = ctx.services.account(first, clears=False).request("GET", NEWS_VERSION)
        version = response.json().get("version")
        lines.append(Line("app news", "ok", f"News {version} (polled by scans)"))
    except NotFound:
        lines.append(Line("app news", "warn", "not enabled: no News items are indexed"))
    except NextcloudAuthError as exc:
        detail = f"version not readable: {exc}: {refused(first)}"
        lines.append(Line("app news", "warn", detail))
    except (NcindexError, ValueError, AttributeError) as exc:
        lines.append(Line("app news", "warn", f"version not readable: {exc}"))
    return lines


def refused(user: str) -> str:
    """Why a check that asked Nextcloud as configured account ``user`` learnt nothing when
    Nextcloud refused its app password (401): what the ``account`` line of ``user`` says."""
    return f"{user}'s app password is refused (the `account {user}` line says what to fix)"


def check_accounts(ctx: Context) -> list[Line]:
    """Each account's credentials: its login name and app password answer its user id."""
    if not ctx.settings.accounts:
        return [Line("accounts", "fail", f"none configured ({ACCOUNT_VARIABLES})")]
    if not ctx.reachable:
        return [Line("accounts", "fail", "skipped: Nextcloud not reachable")]
    lines = []
    for user in ctx.settings.accounts:
        login = ctx.settings.login_for(user)
        name = f"account {user}"
        try:
            uid = ctx.services.account(user, clears=False).current_user()
        except AccountHeld as exc:
            # nothing was sent (ncindex.runtime.Services.account): it is no verdict on the
            # password, and saying "refused (401)" sent operators to replace a good one
            try:  # why, as Nextcloud's admin told when the refusal was recorded
                entry = ctx.services.redis.hget(ctx.settings.names.refused_accounts, user)
            except redis.RedisError:
                entry = None
            cause = cause_text(refused_entry(entry).get("cause"), user)
            lines.append(Line(name, "fail", held_detail(user, exc, cause)))
            continue
        except NextcloudAuthError:
            lines.append(Line(name, "fail", refused_detail(ctx, user, login)))
            continue
        except NcindexError as exc:
            lines.append(Line(name, "fail", f"not checkable: {exc}"))
            continue
        if uid != user:
            lines.append(
                Line(
                    name,
                    "fail",
                    f"login {login!r} is user {uid!r}, configured as {user!r}: name the user "
                    "id as the account and the login in NCINDEX_LOGINS",
                )
            )
        else:
            lines.append(Line(name, "ok", f"login {login!r} → user id {uid!r}"))
    return lines


def refused_detail(ctx: Context, user: str, login: str) -> str:
    """What doctor says of account ``user`` whose app password Nextcloud refused (401) for
    ``login``: whether the user still exists and is enabled, asked as the webhook admin
    (:meth:`~ncindex.nextcloud.client.NextcloudClient.user_account`, ``GET
    /ocs/v2.php/cloud/users/{uid}``: :func:`~ncindex.accounts.cause_of`; nothing recorded).
    A deleted user is refused too, as Nextcloud tells no one of a deletion
    (:mod:`ncindex.sync.deleted`): that case needs ``ncindex forget`` and the account removed,
    a disabled one needs the user enabled, neither a new app password. When the answer is no
    definite one (the account is the admin itself, the admin refused or no admin of the user,
    Nextcloud unavailable), every cause is named."""
    wrong = (
        "the app password is wrong or revoked (make a new one in its Settings → Security), "
        "the account disabled, or the password created under another login name (LDAP, "
        'e-mail): set it in NCINDEX_LOGINS or the accounts file\'s "login"'
    )
    admin = ctx.settings.webhook_admin
    cause: Cause | None = None
    exists: bool | None = None
    if admin != user:
        try:
            account = ctx.services.account(admin, clears=False).user_account(user)
        except NcindexError:
            pass
        else:
            exists, cause = account is not None, cause_of(account)
    if cause is Cause.DELETED:
        return (
            f"refused (401): Nextcloud says user {user!r} does not exist (deleted) — its "
            f"documents leave the index at once with `ncindex forget {user}` (else after two "
            "refused scans 30 minutes apart); then remove the account from NCINDEX_ACCOUNTS or "
            "the accounts file"
        )
    if cause is not None:
        return f"refused (401) for login {login!r}: {cause_text(cause, user)}"
    if exists:
        return f"refused (401) for login {login!r}; the user exists in Nextcloud: {wrong}"
    return (
        f"refused (401) for login {login!r}: {wrong}; or the user was deleted (whether it "
        f"exists could not be asked as the webhook admin {admin!r})"
    )


def held_detail(user: str, exc: AccountHeld, cause: str | None = None) -> str:
    """What doctor says of account ``user`` held back after a refusal (``exc``, raised before
    anything was sent): since when and until when (UTC), the refusal recorded, why when
    Nextcloud's admin told (``cause``: :func:`~ncindex.accounts.cause_text` of the entry's
    ``cause``), and how to end the hold at once (``ncindex release``, once the cause is fixed
    in Nextcloud)."""
    if exc.since is None or exc.until is None:  # rebuilt from its message: all it says
        return f"not checked: {exc}"
    times = f" ({exc.times} refusals in a row)" if exc.times and exc.times > 1 else ""
    why = f"; {cause}" if cause else ""
    return (
        f"held back since {utc_time(exc.since)} until {utc_time(exc.until)}: Nextcloud refused its "
        f"app password ({exc.refusal}){times}{why}, and each refused login counts against this "
        "machine in Nextcloud's brute-force protection, so it was not sent (not checked). Once "
        "it works again (the account enabled, the password or login name fixed), `ncindex "
        f"release {user}` checks it now and ends the hold; a new app password in "
        "NCINDEX_ACCOUNTS is tried at once"
    )


def utc_time(seconds: float) -> str:
    """Unix ``seconds`` as ``YYYY-MM-DD HH:MM:SS UTC``, as doctor and the commands about a
    hold (``ncindex status``, ``ncindex release``) write a moment."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def check_webhooks(ctx: Context) -> list[Line]:
    """The registrations pointing at this deployment against the classes needed, and the
    secret each was made with (:func:`~ncindex.ingest.registration.secret_rotation`: the
    current one, ``NCINDEX_WEBHOOK_PREVIOUS_SECRET`` while it is set, or another), the
    classes registered more than once or no longer subscribed (a warning:
    :meth:`~ncindex.ingest.registration.SecretRotation.surplus`), and whether that previous
    secret can be emptied (``ncindex status`` says the same of both)."""
    if not ctx.webhooks_api:
        reason = _missing_for_requests(ctx) or ctx.webhooks_unread
        return [Line("webhooks", "fail", f"skipped: {reason}")]
    try:
        hooks = ctx.services.account(ctx.settings.webhook_admin, clears=False).list_webhooks(
            uri=hook_uri(ctx.settings)
        )
    except NcindexError as exc:
        return [Line("webhooks", "fail", f"not listable: {exc}")]
    rotation = secret_rotation(hooks, ctx.settings)
    needed = subscribed(ctx.settings)
    missing_required = [c for c in needed if c in REQUIRED and c not in rotation.registered]
    missing = [c for c in needed if c not in REQUIRED and c not in rotation.registered]
    lines = []
    if missing_required:
        lines.append(
            Line(
                "webhooks",
                "fail",
                f"not registered: {', '.join(missing_required)} — run `ncindex webhooks "
                "register`; until then changes reach the index only by scans",
            )
        )
    if rotation.stale:
        lines.append(
            Line(
                "webhooks",
                "fail",
                f"registered with another webhook secret: {', '.join(rotation.stale)} — "
                "Nextcloud's deliveries are refused 401 until `ncindex webhooks register` "
                "renews them",
            )
        )
    if (surplus := rotation.surplus()) is not None:
        lines.append(Line("webhooks", "warn", surplus))
    if (advice := rotation.advice()) is not None:
        lines.append(Line("webhooks", "warn", advice))
    major = _major(ctx.version)
    for event_class in missing:
        detail = f"not registered: {event_class}: {cost_without(event_class, major)}"
        if missing_from(event_class, major) is None:  # this server has it: registering helps
            detail += " — run `ncindex webhooks register`"
        lines.append(Line("webhooks", "warn", detail))
    if not lines:
        uri = hook_uri(ctx.settings)
        lines.append(
            Line(
                "webhooks", "ok", f"{counted(len(needed), 'class', 'classes')} registered for {uri}"
            )
        )
    return lines


def check_public_url(ctx: Context) -> list[Line]:
    """Whether Nextcloud may deliver to ``NCINDEX_PUBLIC_URL``."""
    url = ctx.settings.public_url
    unreachable = loopback_target(ctx.settings)
    if unreachable:
        return [Line("public url", "fail", unreachable)]
    host = urlsplit(url).hostname or ""
    try:
        # the host of an AF_INET or AF_INET6 address (typeshed's sockaddr also allows an int)
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except OSError:
        return [Line("public url", "warn", f"{host!r} does not resolve here; Nextcloud must")]
    local = sorted(a for a in addresses if _is_local(a))
    if local:
        return [
            Line(
                "public url",
                "warn",
                f"{url} is a local address ({', '.join(local)}): Nextcloud refuses to deliver "
                "to it unless its config.php has 'allow_local_remote_servers' => true",
            )
        ]
    return [Line("public url", "ok", f"{url} (Nextcloud delivers to {hook_uri(ctx.settings)})")]


def check_background_jobs(ctx: Context) -> list[Line]:
    """Deliveries are background jobs: how soon they run."""
    return [
        Line(
            "deliveries",
            "note",
            "each delivery is a background job: with system cron it waits for the next run "
            f"(5 minutes); for prompt deliveries run {WORKER_COMMAND} (the admin manual's advice)",
        )
    ]


def check_ocr(ctx: Context) -> list[Line]:
    """Whether images and scanned PDF pages can be OCR'd on this machine."""
    status = ocr_status(ctx.settings)
    languages = ctx.settings.ocr_languages
    if status == "ok":
        return [Line("ocr", "ok", f"tesseract with {languages}")]
    if status == "off":
        return [Line("ocr", "note", "off (NCINDEX_OCR_ENABLED=false): images are not indexed")]
    return [
        Line(
            "ocr",
            "warn",
            f"{status}: images are not indexed and scanned PDF pages yield no text "
            "(install tesseract-ocr and tesseract-ocr-<lang> for each language)",
        )
    ]


#: ``NCINDEX_`` variables that are not settings but are read elsewhere: the worker's
#: heartbeat (:mod:`workers.heartbeat`), the ports of ``deploy/Procfile``'s processes, and the
#: test suite's and benchmarks' own (``tests/conftest.py``, ``tests/deploy``).
OTHER_VARIABLES = frozenset(
    {
        "NCINDEX_HEARTBEAT_FILE",
        "NCINDEX_HEARTBEAT_INTERVAL",
        "NCINDEX_RECEIVER_PORT",
        "NCINDEX_SEARCH_PORT",
        "NCINDEX_MCP_PORT",
        "NCINDEX_FLOWER_PORT",
        "NCINDEX_TEST_REDIS_URL",
        "NCINDEX_HYPOTHESIS_PROFILE",
        "NCINDEX_RELIABILITY_LONG",
        "NCINDEX_SCREENSHOTS",
        "NCINDEX_IMAGE",
        "NCINDEX_IMAGE_TEST",
    }
)


def check_variables(ctx: Context, environ: Mapping[str, str] | None = None) -> list[Line]:
    """``NCINDEX_`` variables of the environment (``environ``, default ``os.environ``) that no
    setting reads: a misspelt name is otherwise ignored without a word (pydantic-settings
    ignores unknown variables), its setting left at its default. Needs nothing of ``ctx``."""
    known = _known_variables()
    unknown = _unknown_variables(environ)
    if not unknown:
        return [Line("variables", "ok", "every NCINDEX_ variable is known")]
    return [
        Line(
            "variables",
            "warn",
            f"{name} is not a setting and is ignored"
            + "".join(
                f"; did you mean {match}?"
                for match in difflib.get_close_matches(name.upper(), sorted(known), n=1)
            ),
        )
        for name in unknown
    ]


def _known_variables() -> set[str]:
    """Every ``NCINDEX_`` variable some part of ncindex reads."""
    return {"NCINDEX_" + name.upper() for name in Settings.model_fields} | OTHER_VARIABLES


def _unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """The ``NCINDEX_`` variables of ``environ`` (default ``os.environ``) no part reads, sorted."""
    known = _known_variables()
    return sorted(
        name
        for name in (os.environ if environ is None else environ)
        if name.upper().startswith("NCINDEX_") and name.upper() not in known
    )


def check_redis(ctx: Context) -> list[Line]:
    """Redis answers at ``NCINDEX_REDIS_URL`` and is recent enough (every process needs it:
    the queues, locks, debounce and sessions live there)."""
    shown = url_without_password(ctx.settings.redis_url)
    try:
        check_redis_version(ctx.services.redis)
    except RedisTooOld as exc:
        return [Line("redis", "fail", str(exc))]
    except (redis.RedisError, ValueError, OSError) as exc:
        return [Line("redis", "fail", unreachable(shown, exc))]
    return [Line("redis", "ok", f"{shown} answers")]


def check_store(ctx: Context) -> list[Line]:
    """Which vector store the processes use: a Qdrant server, or the embedded one, which one
    process at a time may open (its write-ahead log is locked), and which fails when its
    folder can be neither written nor made."""
    settings = ctx.settings
    if settings.qdrant_url:
        return [check_qdrant_server(settings)]
    root = edge_root(settings)
    if not _writable(root):
        setting = "NCINDEX_QDRANT_PATH" if settings.qdrant_path else "NCINDEX_DATA_DIR"
        detail = (
            f"embedded (Qdrant Edge) under {root}: not a folder that can be written or made "
            f"(a file in its path, or no write permission): no process can open the index; "
            f"fix {setting}"
        )
        return [Line("store", "fail", detail)]
    return [
        Line(
            "store",
            "note",
            f"embedded (Qdrant Edge) under {edge_root(settings)}: one "
            "process opens it (`ncindex up`); the distributed roles need NCINDEX_QDRANT_URL",
        )
    ]


def check_qdrant_server(settings: Settings) -> Line:
    """The Qdrant server at ``NCINDEX_QDRANT_URL`` answers its collection list
    (``GET /collections``) with ``NCINDEX_QDRANT_API_KEY``; a server that does not answer, or
    refuses the key (401, 403), fails."""
    url = settings.qdrant_url
    key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
    try:
        response = httpx.get(
            f"{url}/collections", headers={"api-key": key} if key else {}, timeout=5.0
        )
    except httpx.HTTPError as exc:
        return Line("store", "fail", f"Qdrant server at {url} does not answer: {exc}")
    if response.status_code in (401, 403):
        said = (
            "refuses NCINDEX_QDRANT_API_KEY"
            if key
            else "asks for an API key (NCINDEX_QDRANT_API_KEY is unset)"
        )
        return Line("store", "fail", f"Qdrant server at {url} {said}: HTTP {response.status_code}")
    if response.status_code != 200:
        return Line("store", "fail", f"Qdrant server at {url} answers HTTP {response.status_code}")
    return Line("store", "ok", f"Qdrant server at {url} answers")


def check_model(ctx: Context) -> list[Line]:
    """Whether ``NCINDEX_DENSE_MODEL`` is the model the live index was built with. The store's
    model pointers record that (:meth:`~ncindex.store.port.VectorStore.models`: an alias on the
    Qdrant server, the alias file of the embedded engine, read without opening a shard, so
    ``ncindex up`` may hold it); the setting only names the model of a new, empty index
    (:mod:`ncindex.embedding.live_models`), so a change of it is silently not used until
    ``ncindex reindex --model`` builds that model's collection. Another model live is a
    warning; one whose files are not under ``NCINDEX_MODEL_DIR`` (no process can embed
    with it) fails."""
    settings = ctx.settings
    configured = settings.dense_model
    slug = model_slug(configured)
    store = _open_store(settings, slug)
    try:
        pointers = store.models()
    except NcindexError as exc:
        return [Line("model", "warn", f"skipped: the store's model pointers not readable: {exc}")]
    finally:
        store.close()
    live = pointers.active
    if live is None or live == slug:
        said = (
            f"no index yet: it will be built with {configured}"
            if live is None
            else f"the live index was built with {configured}"
        )
        return [_files_line(settings, said)]
    try:
        name = model_name_for(settings, live)
    except ModelError:
        return [
            Line(
                "model",
                "fail",
                f"the live index was built with model {live!r}, whose files are not under "
                f"NCINDEX_MODEL_DIR ({settings.model_dir}): no process can embed a query or a "
                f"document for it. Put that model's folder there, or build {configured} "
                f"(NCINDEX_DENSE_MODEL) with `ncindex reindex --model {configured}`",
            )
        ]
    if pointers.building == slug:
        detail = (
            f"NCINDEX_DENSE_MODEL is {configured}, still being built by `ncindex reindex` "
            f"(see `ncindex reindex`); {name} serves until it switches"
        )
    elif pointers.standby == slug:
        detail = (
            f"NCINDEX_DENSE_MODEL is {configured}, the standby model; the live index was built "
            f"with {name}, which serves: `ncindex reindex --back` switches back to "
            f"{configured}, or set NCINDEX_DENSE_MODEL={name}"
        )
    else:
        detail = (
            f"NCINDEX_DENSE_MODEL is {configured}, but the live index was built with {name}, "
            f"which keeps serving (the setting only names a new index's model): to use "
            f"{configured}, reindex with `ncindex reindex --model {configured}` (search stays "
            f"up while it builds); or set NCINDEX_DENSE_MODEL={name}"
        )
    return [Line("model", "warn", detail)]


def check_layout(ctx: Context) -> list[Line]:
    """On a Qdrant server, whether the collections the model pointers name (the live one,
    and a standby or one being built) have the layout the ``NCINDEX_QDRANT_*`` settings ask
    for (:func:`~ncindex.store.qdrant_server.layout_drift`, one ``GET /collections/{name}``
    each): a layout is given to a collection when it is created, so a setting changed since
    (``helm upgrade``) does nothing by itself. A warning per differing setting names its
    live and its wanted value and what applies it (``ncindex reindex --layout``, or a new
    collection for the shard number). The embedded engine is not compared (README
    "Collection layout" says what reaches an existing shard)."""
    from ncindex.store.qdrant_server import QdrantServerStore

    settings = ctx.settings
    if not settings.qdrant_url:
        return []
    store = _open_store(settings, model_slug(settings.dense_model))
    if not isinstance(store, QdrantServerStore):  # open_store with a URL makes one
        store.close()
        return []
    lines: list[Line] = []
    try:
        pointers = store.models()
        named = [("live", pointers.active), ("standby", pointers.standby)]
        named.append(("being built", pointers.building))
        for role, slug in named:
            if slug is None:
                continue
            other = store.use_model(slug)
            for drift in other.layout_drift():
                detail = f"{role} collection {other.collection!r}: {drift.describe()}"
                lines.append(Line("layout", "warn", detail))
    except StoreUnavailable as exc:
        return [Line("layout", "warn", f"skipped: the collections are not readable: {exc}")]
    finally:
        store.close()
    if pointers.active is None:
        return [Line("layout", "ok", "no collection yet: it will be created with the settings")]
    return lines or [
        Line("layout", "ok", "the collections have the layout the NCINDEX_QDRANT_* settings ask")
    ]


def check_analyzer(ctx: Context) -> list[Line]:
    """Whether an older BM25 analyzer made some of the live collection's vectors (points keep
    the payload ``analyzer``; they stay until ``ncindex reindex --analyzer`` rewrites them,
    and meanwhile some queries miss their BM25 half). Reads the ``analyzer`` field of at most
    :data:`~ncindex.index.reindex.ANALYZER_SAMPLE` documents' first chunks
    (:func:`~ncindex.index.reindex.sample_analyzers`), never the whole store: a warning names
    the versions found and the command; a live collection not readable here (the embedded
    one open in ``ncindex up``) is a note that it was skipped."""
    settings = ctx.settings
    store = _open_store(settings, model_slug(settings.dense_model))
    live: VectorStore | None = None
    try:
        active = store.models().active
        if active is None:
            return [Line("analyzer", "ok", "no index yet: it will be built with the current one")]
        live = store.use_model(active)
        counts = sample_analyzers(live)
    except StoreUnavailable as exc:
        return [Line("analyzer", "note", f"skipped: the live collection is not readable: {exc}")]
    finally:
        if live is not None:
            live.close()
        store.close()
    due = analyzer_upgrade_due(counts)
    if due is not None:
        return [Line("analyzer", "warn", due)]
    newer = {version: n for version, n in counts.items() if is_newer_analyzer(version)}
    if newer:
        found = ", ".join(f"{version} ({n})" for version, n in sorted(newer.items()))
        return [
            Line(
                "analyzer",
                "note",
                f"{sum(newer.values())} of {counted(counts.total(), 'document')} sampled have BM25 "
                "vectors "
                f"of a later analyzer than this release's {ANALYZER_VERSION}: {found}. A later "
                "release indexed them (a rollout under way, or rolled back); run the doctor "
                "and `ncindex reindex --analyzer` from the release the rollout ends with",
            )
        ]
    if not counts:
        return [Line("analyzer", "ok", "no document indexed yet")]
    return [
        Line(
            "analyzer",
            "ok",
            f"{ANALYZER_VERSION} made every document sampled: "
            f"{counted(counts.total(), 'document')} (at most {ANALYZER_SAMPLE} first chunks, "
            "not every document)",
        )
    ]


def _open_store(settings: Settings, slug: str) -> VectorStore:
    """The store of model ``slug``, opened as configured, without qdrant-client's warning
    about an API key over plain HTTP (the store check's line is about the server)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Api key is used with an insecure", UserWarning)
        return open_store(settings, model_slug=slug)


def _files_line(settings: Settings, said: str) -> Line:
    """The model line for ``NCINDEX_DENSE_MODEL`` as the model in use (``said`` tells how):
    ok when its files are under ``NCINDEX_MODEL_DIR``; the packaged model is built there by
    the first process that embeds (:func:`~ncindex.embedding.models.ready_model`), a warning
    (a failure when that folder cannot be written); another model's missing files fail, as no
    process can embed a query or a document without them."""
    configured = settings.dense_model
    paths = model_paths(settings.model_dir, configured)
    folder = paths.dense_dir
    if paths.dense_ready():
        return Line("model", "ok", said)
    if configured != PACKAGED_DENSE_MODEL:
        verdict: Verdict = "fail"
        fix = "put the model's folder there (model.onnx and its tokenizer files)"
    elif _writable(settings.model_dir):
        verdict = "warn"
        fix = "the first process that embeds builds them; `ncindex models` builds them now"
    else:
        verdict = "fail"
        fix = "that folder cannot be written, so they cannot be built: fix NCINDEX_MODEL_DIR"
    detail = f"{said}, but its files are not in {folder} (NCINDEX_MODEL_DIR): {fix}"
    return Line("model", verdict, detail)


def _writable(path: Path) -> bool:
    """Whether ``path``, or the nearest folder above it that exists, can be written to (where
    ``mkdir -p`` and the files would go)."""
    for folder in (path, *path.parents):
        if folder.exists():
            return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)
    return False


def check_webhook_secret(ctx: Context) -> list[Line]:
    """The secret Nextcloud's deliveries carry is set (the receiver refuses to start without
    it), and is neither short nor the example file's placeholder (whoever knows it can post
    deliveries: :func:`ncindex.settings.weak_webhook_secret`, which the receiver logs at its
    start too). ``NCINDEX_WEBHOOK_PREVIOUS_SECRET``, which the receiver accepts as well
    (:meth:`webhook_receiver.hooks.Receiver.authorized`), is held to the same, and while it
    is set a note says the rotation is to be finished (README "Rotating secrets")."""
    secret = ctx.settings.webhook_secret.get_secret_value()
    header = ctx.settings.webhook_secret_header
    if not secret:
        detail = "NCINDEX_WEBHOOK_SECRET is not set: the webhook receiver refuses to start"
        return [Line("webhook secret", "fail", detail)]
    weakness = weak_webhook_secret(ctx.settings)
    if weakness:
        return [Line("webhook secret", "warn", weakness)]
    previous = ctx.settings.webhook_previous_secret.get_secret_value()
    if previous:
        detail = (
            f"set; sent in {header}. NCINDEX_WEBHOOK_PREVIOUS_SECRET is accepted too: once "
            "`ncindex webhooks register` has renewed the registrations, empty it"
        )
        return [Line("webhook secret", "note", detail)]
    return [Line("webhook secret", "ok", f"set; sent in {header}")]


#: The checks that ask Nextcloud, left out without ``NCINDEX_NEXTCLOUD_URL`` (the server
#: check's one line says so); every other check runs all the same.
ASK_NEXTCLOUD = frozenset({"apps", "accounts", "webhooks"})

#: The checks of what ``ncindex up`` makes for its sample Nextcloud (a random secret, its own
#: URL as the public one, deliveries it posts itself): left out for :func:`sample_run`.
SAMPLE_MADE = frozenset({"webhook secret", "public url", "deliveries"})

#: The settings that say a deployment is meant (with no ``NCINDEX_NEXTCLOUD_URL``, the URL is
#: what is missing), as :class:`~ncindex.settings.Settings` fields.
DEPLOYMENT_SETTINGS = frozenset(
    {
        "nextcloud_url",
        "accounts",
        "accounts_file",
        "logins",
        "webhook_secret",
        "public_url",
        "qdrant_url",
    }
)


def sample_run(settings: Settings, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``settings`` are those of ``make run``'s sample: no setting of
    :data:`DEPLOYMENT_SETTINGS` given (by variable or argument, ``NCINDEX_NEXTCLOUD_URL=""``
    included) and no misspelt ``NCINDEX_`` variable in ``environ`` (default ``os.environ``),
    which may be the missing URL."""
    return not (settings.model_fields_set & DEPLOYMENT_SETTINGS) and not _unknown_variables(environ)


#: The checks in the order they run; append ``(name, function)`` to add one.
CHECKS: list[tuple[str, Check]] = [
    ("variables", check_variables),
    ("redis", check_redis),
    ("webhook secret", check_webhook_secret),
    ("store", check_store),
    ("model", check_model),
    ("layout", check_layout),
    ("analyzer", check_analyzer),
    ("server", check_server),
    ("apps", check_apps),
    ("accounts", check_accounts),
    ("webhooks", check_webhooks),
    ("public url", check_public_url),
    ("deliveries", check_background_jobs),
    ("ocr", check_ocr),
]


def run_checks(settings: Settings, services: Services | None = None) -> list[Line]:
    """Every line of every check in :data:`CHECKS`, in order; without a Nextcloud URL, every
    check but those of :data:`ASK_NEXTCLOUD` (a misspelt ``NCINDEX_NEXTCLOUD_URL``, the
    likeliest cause, is named by the variables check), and for ``make run``'s sample
    (:func:`sample_run`) not those of :data:`SAMPLE_MADE` either."""
    own = services is None
    ctx = Context(settings, services or Services(settings), sample=sample_run(settings))
    try:
        lines: list[Line] = []
        for name, check in CHECKS:
            if name in ASK_NEXTCLOUD and not settings.nextcloud_url:
                continue
            if name in SAMPLE_MADE and ctx.sample:
                continue
            lines.extend(check(ctx))
        return lines
    finally:
        if own:
            ctx.services.close()


def render(lines: list[Line]) -> str:
    """The lines as a plain-text table: check, verdict, detail."""
    width = max([len("check"), *(len(line.check) for line in lines)])
    out = [f"{'check':<{width}}  verdict  detail"]
    out += [f"{line.check:<{width}}  {line.verdict:<7}  {line.detail}" for line in lines]
    return "\n".join(out)


def failed(lines: list[Line]) -> bool:
    """Whether any line is a ``fail`` (the command's exit status 1)."""
    return any(line.verdict == "fail" for line in lines)


def _is_local(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    return ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved


def _major(version: str) -> int | None:
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None
