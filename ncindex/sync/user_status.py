"""One user's view of the index: what ``GET /v1/status`` answers the caller and the MCP
``index_status`` tool returns (issue 25).

Everything is about ``user`` only: documents ``user`` can read in the index (``acl`` holds
``user``'s principal), counted per doc type; ``user``'s pending items (documents, and folders still
to be looked at), dead-letter entries and failing documents (those whose task ran as ``user``),
skipped documents per rule, the last scan of each doc type, and ``user``'s first indexing with its
progress and ETA from the measured rate (:mod:`ncindex.progress`). No other user's documents, paths
or counts appear.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import redis
from pydantic import BaseModel, Field

from ncindex.documents import DocType
from ncindex.errors import BrokerUnavailable
from ncindex.index.deadletter import DeadLetters
from ncindex.progress import FailingDocuments, Progress, eta_seconds
from ncindex.runtime import Services
from ncindex.store.queries import acl_condition, document_counts, first_chunks
from ncindex.sync.reconcile import last_scans_key


class LastScan(BaseModel):
    """The last scan of one doc type (:mod:`ncindex.sync.reconcile`)."""

    finished_at: float = Field(description="When it ended, Unix seconds.")
    clean: bool = Field(description="It found the index equal to Nextcloud.")
    listed: int = Field(description="Documents the listing returned.")
    error: str | None = Field(None, description="Why the listing failed, if it did.")
    unavailable: str | None = Field(
        None, description="The app is not installed or not enabled for the user."
    )
    in_sync_at: float | None = Field(
        None, description="Start of the last clean scan, Unix seconds; null before one."
    )


class DocTypeStatus(BaseModel):
    """One doc type of the user."""

    indexed: int = Field(description="Documents the user can read in the index.")
    last_scan: LastScan | None = Field(None, description="Null when none was recorded.")


class DeadLetterEntry(BaseModel):
    """A document parked until it changes."""

    subject: str = Field(description="`node:<file id>` (files, notes) or `<doc_type>:<id>`.")
    reason: str
    parked_at: float = Field(description="Unix seconds.")
    attempts: int = Field(description="Runs counted before it was parked (0: parked at once).")
    path: str | None = Field(None, description="The file's path in the user's view.")
    mime_type: str | None = None


class FailingEntry(BaseModel):
    """A document whose last run failed."""

    subject: str
    attempts: int = Field(description="Runs that failed in a row.")
    last_error: str
    at: float = Field(description="When the last run failed, Unix seconds.")
    retrying: bool = Field(description="A retry is scheduled.")


class SkippedEntry(BaseModel):
    """A document an indexing rule leaves out, and the rule."""

    subject: str = Field(description="node:<file id> or <doc_type>:<id>.")
    reason: str = Field(description="The rule, as counted in skipped.")
    path: str | None = Field(description="Its path in the caller's view; null when not known.")


class TruncatedEntry(BaseModel):
    """A document indexed with its text cut short by a bound: what lies beyond the cut is
    not searchable."""

    subject: str = Field(description="node:<file id> or <doc_type>:<id>.")
    path: str = Field(description="Its path in the caller's view (its doc_key without one).")


class FirstIndexing(BaseModel):
    """The user's first indexing: from the first document queued for the user until nothing
    of theirs was pending for the first time."""

    state: str = Field(description="not_started, running or done.")
    started_at: float | None = Field(None, description="Unix seconds.")
    done_at: float | None = Field(None, description="Unix seconds.")
    finished: int = Field(
        description="Distinct documents finished during it (one indexed twice counts once)."
    )
    progress: float | None = Field(
        None, description="finished / (finished + pending), 0 to 1, while it runs."
    )
    eta_seconds: float | None = Field(
        None,
        description="pending / the user's measured rate, while it runs; null until a "
        "document has finished in the rate window.",
    )


class Throughput(BaseModel):
    """Documents and chunks of the user finished per second, measured over the window."""

    documents_per_second: float = Field(description="Documents finished per second.")
    chunks_per_second: float = Field(description="Chunks embedded and stored per second.")
    window_seconds: float = Field(
        description="Seconds the rates are taken over: of the last 300, those from the "
        "first in which a document finished (0 rates when none did)."
    )


class UserStatus(BaseModel):
    """Body of ``GET /v1/status``: the index as it concerns the caller only."""

    user: str = Field(description="The caller's Nextcloud user id.")
    now: str = Field(
        description="The server's clock when it answered: an RFC 3339 / ISO 8601 date-time "
        "in UTC to the second, `Z`-suffixed (`2026-12-07T02:03:04Z`; not Unix seconds). The "
        '"now" to reckon a relative time ("last month") from for `modified_after` / '
        "`modified_before`, which take it as it is, whatever the caller's own clock says.",
        json_schema_extra={"format": "date-time", "examples": ["2026-12-07T02:03:04Z"]},
    )
    doc_types: dict[str, DocTypeStatus] = Field(description="Keyed by doc_type.")
    pending: int = Field(description="Documents queued for the user, not yet processed.")
    failed: int = Field(description="Dead-letter entries plus failing documents not retried.")
    dead_letter: list[DeadLetterEntry] = Field(
        description="Documents given up on until they change (their error in `reason`)."
    )
    failing: list[FailingEntry] = Field(description="Documents whose last runs failed.")
    skipped: dict[str, int] = Field(
        description="Documents a rule leaves out, per rule: excluded_path, "
        "path_not_included, excluded_tag, missing_required_tag, unsupported_format, "
        "mime_type, not readable, download refused, archived, no_text."
    )
    skipped_documents: list[SkippedEntry] = Field(
        description="The documents counted in skipped, each with its rule and path, by path."
    )
    truncated: list[TruncatedEntry] = Field(
        description="Documents indexed only in part: a bound (NCINDEX_MAX_DOCUMENT_CHARS, "
        "NCINDEX_MAX_PDF_PAGES, NCINDEX_MAX_SHEET_ROWS, NCINDEX_OCR_MAX_PAGES, "
        "NCINDEX_EXTRACT_MAX_SECONDS) cut their text, and what lies beyond it is not found."
    )
    first_indexing: FirstIndexing
    throughput: Throughput


def user_status(services: Services, user_id: str, now: float | None = None) -> dict[str, Any]:
    """The status of ``user_id`` as a JSON-able dict (:class:`UserStatus`'s fields), for
    ``GET /v1/status`` and the MCP ``index_status`` tool alike. Reads Redis and the store (the
    documents per doc type, each counted once: :func:`~ncindex.store.queries.document_counts`).

    Raises :class:`~ncindex.errors.BrokerUnavailable` when Redis cannot be read — at once
    while the search apps' circuit breaker (``services.redis_breaker``) is open, after its
    0.5 s timeouts when Redis stalls (it is asked through the breaker first): most of the
    answer lives in Redis alone. Before, each read waited out ``services.redis``'s 5 s socket
    timeout on a stalled Redis, call after call. :class:`~ncindex.errors.StoreUnavailable`
    as the store raises it."""
    try:
        services.redis_breaker.call("ping")
        return _read_status(services, user_id, time.time() if now is None else now)
    except redis.RedisError as exc:
        raise BrokerUnavailable(f"redis: {exc}") from exc


def _read_status(services: Services, user_id: str, now: float) -> dict[str, Any]:
    keys = services.settings.names
    client = services.redis
    progress = Progress(client, keys)
    scans = client.hmget(last_scans_key(keys), [f"{user_id}:{t.value}" for t in DocType])
    indexed = document_counts(services.store, "doc_type", first_chunks(acl_condition(user_id)))
    doc_types = {
        doc_type.value: DocTypeStatus(
            indexed=indexed.get(doc_type.value, 0), last_scan=_last_scan(raw)
        )
        for doc_type, raw in zip(DocType, scans, strict=True)
    }
    letters = [
        DeadLetterEntry(
            subject=e.subject,
            reason=e.reason,
            parked_at=e.parked_at,
            attempts=e.deliveries,
            path=e.path or None,
            mime_type=e.mime_type or None,
        )
        for e in DeadLetters(client, keys).entries()
        if e.user == user_id
    ]
    failing = [
        FailingEntry(
            subject=f.subject,
            attempts=f.attempts,
            last_error=f.last_error,
            at=f.at,
            retrying=f.retrying,
        )
        for f in FailingDocuments(client, keys).entries()
        if f.user == user_id
    ]
    pending = progress.pending(user_id, now)
    rates = progress.rates(user_id, now=now)
    status = UserStatus(
        user=user_id,
        now=iso_utc(now),
        doc_types=doc_types,
        pending=pending,
        failed=len(letters) + sum(1 for f in failing if not f.retrying),
        dead_letter=letters,
        failing=failing,
        skipped=progress.skipped(user_id),
        skipped_documents=[
            SkippedEntry(subject=subject, reason=rule, path=path)
            for subject, rule, path in progress.skipped_documents(user_id)
        ],
        truncated=[
            TruncatedEntry(subject=subject, path=path)
            for subject, path in progress.truncated(user_id).items()
        ],
        first_indexing=first_indexing(progress, user_id, pending, rates.documents_per_second),
        throughput=Throughput(
            documents_per_second=round(rates.documents_per_second, 3),
            chunks_per_second=round(rates.chunks_per_second, 3),
            window_seconds=rates.window_seconds,
        ),
    )
    return status.model_dump(mode="json")


def iso_utc(seconds: float) -> str:
    """``seconds`` (Unix) as ISO 8601 / RFC 3339 in UTC to the second, ``Z``-suffixed
    (``2026-12-07T02:03:04Z``): a string ``modified_after`` takes as it is
    (:data:`~ncindex.search.filters.TIME_PATTERN`)."""
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def first_indexing(progress: Progress, user: str, pending: int, per_second: float) -> FirstIndexing:
    """``user``'s first indexing, with progress and ETA while it runs (``pending`` documents
    left, finishing at ``per_second``)."""
    first = progress.first_indexing(user)
    started, done, finished = first["started_at"], first["done_at"], int(first["finished"] or 0)
    if started is None:
        return FirstIndexing(state="not_started", finished=0)
    if done is not None:
        return FirstIndexing(
            state="done", started_at=started, done_at=done, finished=finished, progress=1.0
        )
    total = finished + pending
    return FirstIndexing(
        state="running",
        started_at=started,
        finished=finished,
        progress=round(finished / total, 4) if total else None,
        eta_seconds=eta_seconds(pending, per_second),
    )


def _last_scan(raw: bytes | str | None) -> LastScan | None:
    if raw is None:
        return None
    summary = json.loads(raw)
    return LastScan(
        finished_at=round(summary["at"] + summary.get("seconds", 0.0), 3),
        clean=bool(summary.get("clean")),
        listed=int(summary.get("listed", 0)),
        error=summary.get("error"),
        unavailable=summary.get("unavailable"),
        in_sync_at=summary.get("in_sync_at"),
    )
