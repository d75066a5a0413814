"""What ``ncindex status`` shows: queue depths, the last scan per user and doc type, index lag,
dead letters (DESIGN §6, §12), the workers that answered, and per user and in total the pending
documents, rates (documents and chunks per second over the last minutes), the first indexing's
progress and the ETA of the backlog (:mod:`ncindex.progress`, issue 25).

Everything is read from Redis: the broker's queues, reserved tasks and index lag exactly as
the ``ncindex_queue_depth``, ``ncindex_tasks_reserved`` and ``ncindex_index_lag_seconds``
gauges define them (:class:`ncindex.telemetry.QueueCollector`: how far the workers are behind
what was queued), the scan summaries :mod:`ncindex.sync.reconcile` records, and the dead-letter
hash (``<namespace>:deadletter``) the workers write when they park a document. Each is read by
the name of its key: a frame of ``ncindex status --watch`` costs the same whatever else the
Redis database holds, but for :func:`other_namespaces`, a SCAN the command asks for at most once
a minute.

Changes no webhook announced are only known once a scan finds them, so each scan also shows
``in_sync_age_seconds``: the time since the index was last found equal to Nextcloud for that
user and doc type (``in_sync_at``, the start of the last clean scan; ``None`` before one).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import redis

from ncindex.accounts import refused_accounts
from ncindex.documents import DocType
from ncindex.embedding.analyzer import ANALYZER_VERSION
from ncindex.errors import NcindexError
from ncindex.index.reindex import (
    STALLED_SECONDS,
    UNDER_WAY,
    analyzer_upgrade_due,
    read_progress,
    sample_analyzers,
)
from ncindex.ingest.registration import hook_uri, secret_rotation
from ncindex.names import NAMESPACE_PATTERN, QUEUES, Names
from ncindex.progress import (
    RATE_SECONDS,
    FailingDocuments,
    IndexRebuilds,
    Progress,
    Rates,
    eta_seconds,
)
from ncindex.redis_replies import as_text
from ncindex.runtime import Services
from ncindex.store import VectorStore
from ncindex.store.queries import acl_condition, document_counts, first_chunks
from ncindex.sync.reconcile import last_scans_key
from ncindex.sync.user_status import first_indexing
from ncindex.telemetry import QueueCollector

_SAMPLE = 5


def queues(client: redis.Redis, keys: Names) -> dict[str, Any]:
    """``{"depth": {queue: n}, "reserved": n, "lag": seconds}`` as the gauges read them."""
    return QueueCollector(client, QUEUES, keys=keys, accounts=()).read()


def settled(client: redis.Redis, keys: Names, queues: Iterable[str] = QUEUES) -> bool:
    """Whether deployment ``keys`` has nothing left to do on ``queues`` (default: all of
    them): no message waiting on a queue, none delivered and unacknowledged (a running task,
    or a countdown or retry a worker holds until its time: Celery's ETA messages sit in
    ``unacked`` on the Redis transport) and no debounce key (an event whose task is not yet
    sent, or sent and not yet started).

    One reading: for a moment after a worker pops a message it is on no queue and not yet in
    ``unacked`` (kombu records it after ``BRPOP``), so a caller that must be sure reads it
    twice, a fraction of a second apart."""
    if any(client.llen(keys.queue_list(q)) for q in queues):
        return False
    if client.hlen(keys.unacked) or client.zcard(keys.unacked_index):
        return False
    return not any(True for _ in client.scan_iter(f"{keys.debounce_prefix}*", count=1000))


def last_scans(
    client: redis.Redis, keys: Names, now: float | None = None
) -> dict[str, dict[str, Any]]:
    """``"{user}:{doc_type}"`` → the last scan's summary with ``in_sync_age_seconds``."""
    now = time.time() if now is None else now
    out: dict[str, dict[str, Any]] = {}
    for key, raw in sorted(client.hgetall(last_scans_key(keys)).items()):
        summary = json.loads(raw)
        in_sync = summary.get("in_sync_at")
        summary["in_sync_age_seconds"] = None if in_sync is None else max(0, int(now - in_sync))
        out[as_text(key)] = summary
    return out


#: How many keys :func:`other_namespaces` looks at, at most (SCAN ``COUNT`` 1000 a call): a
#: bound on what a status costs in a Redis holding millions of keys.
OTHER_NAMESPACES_KEYS = 100_000


def other_namespaces(client: redis.Redis, keys: Names) -> list[str]:
    """The namespaces other than ``keys.namespace`` whose scans left their summary hash
    (``<namespace>:reconcile:last``, :func:`~ncindex.sync.reconcile.last_scans_key`) in this
    Redis database, sorted: what ``ncindex status`` names when its own namespace holds no
    scan and no worker answered (``make run`` uses ``ncindex-up``, a shell's
    ``ncindex status`` ``ncindex``). Looks at :data:`OTHER_NAMESPACES_KEYS` keys at most, so
    a database larger than that may hide some. Raises ``redis.RedisError``."""
    namespace = re.compile(NAMESPACE_PATTERN.rstrip("$") + ":reconcile:last$")
    found: set[str] = set()
    cursor, looked = 0, 0
    while True:
        cursor, batch = client.scan(cursor, match="*:reconcile:last", count=1000)
        found.update(as_text(k).split(":", 1)[0] for k in batch if namespace.match(as_text(k)))
        looked += 1000
        if not cursor or looked >= OTHER_NAMESPACES_KEYS:
            return sorted(found - {keys.namespace})


def dead_letters(client: redis.Redis, keys: Names) -> dict[str, Any]:
    """The dead letter, ``{"<namespace>:deadletter": {"type": "hash", "size": n, "sample":
    {subject: entry}}}`` with at most :data:`_SAMPLE` of its entries (one ``HSCAN`` call), or
    ``{}`` while nothing is parked: the one key the workers park documents in
    (:mod:`ncindex.index.deadletter`), read by its name — a frame of ``ncindex status --watch``
    costs three commands, not a SCAN of the whole keyspace. Raises ``redis.RedisError``."""
    pipe = client.pipeline(transaction=False)
    pipe.hlen(keys.deadletter)
    pipe.hscan(keys.deadletter, 0, count=_SAMPLE)
    size, (_, items) = pipe.execute()
    if not size:
        return {}
    sample = dict(list(items.items())[:_SAMPLE])
    return {
        keys.deadletter: {
            "type": "hash",
            "size": int(size),
            "sample": {_text(k): _text(v) for k, v in sample.items()},
        }
    }


def per_user(
    client: redis.Redis,
    keys: Names,
    users: list[str],
    now: float,
    store: VectorStore | None = None,
) -> dict[str, dict[str, Any]]:
    """For each of ``users``: ``pending``, ``dead_letter`` and ``failing`` counts, ``skipped``
    per rule, ``truncated`` (documents indexed with their text cut short), ``rates``
    (:func:`rates_dict`), ``eta_seconds`` of their pending items (documents and folders queued
    for that user), ``first_indexing`` (state, progress, ETA) and, with ``store``, ``indexed``
    per doc type: the documents ``user`` may read, each counted once even while its new
    version is written beside the old one (:func:`~ncindex.store.queries.document_counts`,
    as ``GET /v1/status`` counts them). Per user that costs two exact facets of the engine
    (``doc_type``, and ``doc_key``: one value per document the user reads) and a read of the
    few documents held in two versions, in place of a count per doc type."""
    progress = Progress(client, keys)
    parked: dict[str, int] = {}
    for raw in client.hvals(keys.deadletter):
        try:
            owner = str(json.loads(raw).get("user", ""))
        except (ValueError, AttributeError):
            owner = ""
        parked[owner] = parked.get(owner, 0) + 1
    failing: dict[str, int] = {}
    for entry in FailingDocuments(client, keys).entries():
        failing[entry.user] = failing.get(entry.user, 0) + 1
    out: dict[str, dict[str, Any]] = {}
    for user in users:
        pending = progress.pending(user, now)
        rates = progress.rates(user, now=now)
        row: dict[str, Any] = {
            "pending": pending,
            "dead_letter": parked.get(user, 0),
            "failing": failing.get(user, 0),
            "skipped": progress.skipped(user),
            "truncated": len(progress.truncated(user)),
            "rates": rates_dict(rates),
            "eta_seconds": eta_seconds(pending, rates.documents_per_second),
            "first_indexing": first_indexing(
                progress, user, pending, rates.documents_per_second
            ).model_dump(mode="json"),
        }
        if store is not None:
            counts = document_counts(store, "doc_type", first_chunks(acl_condition(user)))
            row["indexed"] = {t.value: counts.get(t.value, 0) for t in DocType}
        out[user] = row
    return out


def rates_dict(rates: Rates) -> dict[str, float]:
    """``documents_per_second``, ``chunks_per_second`` (3 decimals) and ``window_seconds``."""
    return {
        "documents_per_second": round(rates.documents_per_second, 3),
        "chunks_per_second": round(rates.chunks_per_second, 3),
        "window_seconds": rates.window_seconds,
    }


def _with_missing_since(
    client: redis.Redis, keys: Names, refused: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """``refused`` (:func:`~ncindex.accounts.refused_accounts`) with ``missing_since`` on each
    entry: when a scan's check first heard Nextcloud say the user does not exist (Unix
    seconds, :func:`ncindex.sync.deleted.check_deleted`, which forgets the user when a check
    :data:`~ncindex.sync.deleted.CONFIRM_SECONDS` later hears it again), else ``None``. An
    unreadable value reads as ``None``."""
    for user, entry in refused.items():
        raw = client.get(keys.missing_user(user))
        try:
            entry["missing_since"] = None if raw is None else float(as_text(raw))
        except ValueError:
            entry["missing_since"] = None
    return refused


def collect_status(
    client: redis.Redis,
    keys: Names,
    now: float | None = None,
    *,
    users: list[str] | None = None,
    store: VectorStore | None = None,
    workers: list[str] | None = None,
    credentials: Mapping[str, str] | None = None,
    others: Callable[[], list[str]] | None = None,
) -> dict[str, Any]:
    """The whole status of deployment ``keys``: ``queues`` (depth per queue), ``reserved``,
    ``index_lag_seconds`` (the gauge's definition), ``scans``, ``dead_letters``,
    ``accounts_refused`` (user id → when and where Nextcloud answered 401, and until when it is
    held back: :func:`~ncindex.accounts.refused_accounts` with ``credentials``, user id → the
    fingerprint configured now), ``users`` (:func:`per_user` for ``users``; indexed counts only
    with ``store``), ``total`` (pending, dead letter, failing, rates over the last
    :data:`~ncindex.progress.RATE_SECONDS` and the ETA of the whole backlog), ``workers`` (the
    names that answered a ping, as given; ``None``: not asked), ``analyzer``
    (:func:`analyzer_status`; ``None`` without ``store``), ``outdated_extraction`` (the
    documents the last scans found read by an older extraction than their format's now, all
    users and doc types: :mod:`ncindex.text.versions`; being read again), ``reindex``
    (:func:`reindex_status`: a rebuild under way or failed), ``index_rebuilds`` (payload
    indexes being made again: :meth:`~ncindex.progress.IndexRebuilds.entries`),
    ``other_namespaces`` (when this one holds no scan and no worker answered, what ``others``
    answers — default :func:`other_namespaces`, a SCAN of the keyspace, which ``ncindex status
    --watch`` keeps for a minute — else empty).
    With ``workers`` empty (asked, and none answered) every ETA is ``None``: the rates measured
    before say nothing of when a backlog nobody works on ends (they showed "ETA 42 s" a minute
    after the last worker was killed)."""
    now = time.time() if now is None else now
    pipeline = queues(client, keys)
    rows = per_user(client, keys, list(users or []), now, store)
    total_rates = Progress(client, keys).rates(None, RATE_SECONDS, now)
    pending = sum(r["pending"] for r in rows.values())
    total_eta = eta_seconds(pending, total_rates.documents_per_second)
    if workers == []:
        total_eta = None
        for row in rows.values():
            row["eta_seconds"] = row["first_indexing"]["eta_seconds"] = None
    scans = last_scans(client, keys, now)
    return {
        "queues": pipeline["depth"],
        "reserved": pipeline["reserved"],
        "index_lag_seconds": round(pipeline["lag"], 1),
        "scans": scans,
        "other_namespaces": []
        if scans or workers
        else (others or (lambda: other_namespaces(client, keys)))(),
        "dead_letters": dead_letters(client, keys),
        "accounts_refused": _with_missing_since(
            client, keys, refused_accounts(client, keys, credentials=credentials)
        ),
        "workers": workers,
        "users": rows,
        "total": {
            "pending": pending,
            "dead_letter": int(client.hlen(keys.deadletter)),
            "failing": int(client.hlen(keys.failing)),
            "rates": rates_dict(total_rates),
            "eta_seconds": total_eta,
        },
        "analyzer": None if store is None else analyzer_status(store),
        "outdated_extraction": sum(int(s.get("outdated") or 0) for s in scans.values()),
        "reindex": reindex_status(client, keys, now),
        "index_rebuilds": IndexRebuilds(client, keys).entries(),
    }


def reindex_status(
    client: redis.Redis, keys: Names, now: float | None = None
) -> dict[str, Any] | None:
    """The reindex step under way (building a model's collection, rewriting BM25 vectors:
    :data:`~ncindex.index.reindex.UNDER_WAY`) or the one that failed, from its last record
    (:func:`~ncindex.index.reindex.read_progress`): ``state``, ``model`` (the slug being
    built, the analyzer version written; ``""`` for a failed step that names none),
    ``started_at`` and ``updated_at`` (Unix seconds; ``None`` when not recorded),
    ``documents`` (to copy or rewrite; ``None`` until the step has listed them),
    ``remaining``, ``error`` and ``stalled`` (a step under way whose last record is older
    than :data:`~ncindex.index.reindex.STALLED_SECONDS` at Unix time ``now``:
    its worker died; the same ``ncindex reindex`` command resumes it); ``None`` when the
    last step ended (``switched``, ``reanalyzed``, ``dropped`` …) or none ever ran. Raises
    ``redis.RedisError``."""
    now = time.time() if now is None else now
    state = read_progress(client, keys)
    if state.get("state") not in UNDER_WAY | {"failed"}:
        return None
    updated = _number(state.get("updated_at"))
    return {
        "state": state["state"],
        "model": state.get("model", ""),
        "started_at": _number(state.get("started_at")),
        "updated_at": updated,
        "documents": _count(state.get("documents")),
        "remaining": _count(state.get("remaining")),
        "error": state.get("error"),
        "stalled": state["state"] in UNDER_WAY
        and updated is not None
        and now - updated > STALLED_SECONDS,
    }


def _number(value: str | None) -> float | None:
    """``value`` as a finite float; ``None`` when absent or not one (a hand-written hash)."""
    try:
        number = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _count(value: str | None) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def analyzer_status(store: VectorStore) -> dict[str, Any]:
    """The BM25 analyzer versions of a sample of ``store``'s documents
    (:func:`~ncindex.index.reindex.sample_analyzers`, one scroll page): ``current`` (the
    running version), ``sampled`` (version → documents) and ``upgrade`` (what to run and why,
    :func:`~ncindex.index.reindex.analyzer_upgrade_due`; ``None`` when every sampled document
    is current). Raises ``StoreUnavailable``."""
    counts = sample_analyzers(store)
    return {
        "current": ANALYZER_VERSION,
        "sampled": dict(counts),
        "upgrade": analyzer_upgrade_due(counts),
    }


def webhook_registrations(services: Services, *, nextcloud_up: bool = True) -> dict[str, Any]:
    """What ``ncindex status`` says of the registrations the webhook admin account lists for
    this deployment's delivery URL (one OCS request, recording nothing of a refusal and not
    sent while a refusal of that password holds it back), decided as ``ncindex doctor``'s
    webhooks line decides it (:class:`~ncindex.ingest.registration.SecretRotation`):
    ``rotation`` — ``None`` when ``NCINDEX_WEBHOOK_PREVIOUS_SECRET`` is unset, else
    ``{"can_empty": bool | None, "advice": str}``, ``can_empty`` ``None`` when they could not
    be listed (``advice`` says why); ``surplus`` — the classes registered more than once or
    no longer subscribed and the command that removes them
    (:meth:`~ncindex.ingest.registration.SecretRotation.surplus`), ``None`` when there are
    none or they could not be listed (``ncindex doctor`` says why). Without a rotation the
    list is asked only when ``nextcloud_up`` (``/status.php`` answered: a Nextcloud that does
    not would hold each refresh up for the HTTP timeout) and Nextcloud and an account are
    configured."""
    settings = services.settings
    rotating = bool(settings.webhook_previous_secret.get_secret_value())
    if not rotating and not (nextcloud_up and settings.nextcloud_url and settings.accounts):
        return {"rotation": None, "surplus": None}
    said = "NCINDEX_WEBHOOK_PREVIOUS_SECRET is set (a secret rotation)"
    asking = f" as {settings.webhook_admin}" if settings.accounts else ""
    try:
        if not settings.nextcloud_url:
            raise ValueError("NCINDEX_NEXTCLOUD_URL is not set")
        client = services.account(settings.webhook_admin, clears=False)  # (the settings
        # refuse an NCINDEX_ADMIN_USER not in NCINDEX_ACCOUNTS; no account: ValueError)
        hooks = client.list_webhooks(uri=hook_uri(settings))
    except (NcindexError, ValueError) as exc:
        unlisted = (
            f"{said}, but the registrations could not be listed{asking}: {exc} — `ncindex "
            "doctor` says when it can be emptied"
        )
        return {
            "rotation": {"can_empty": None, "advice": unlisted} if rotating else None,
            "surplus": None,
        }
    found = secret_rotation(hooks, settings)
    advice = found.advice() or (
        f"{said}: keep it until `ncindex webhooks register` has renewed every registration "
        "(`ncindex doctor`'s webhooks line says what is missing)"
    )
    return {
        "rotation": {"can_empty": found.can_empty_previous, "advice": advice} if rotating else None,
        "surplus": found.surplus(),
    }


def _text(value: bytes | str | None) -> str:
    return "" if value is None else as_text(value, "replace")
