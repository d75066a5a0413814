"""``ncindex failures`` and ``ncindex retry``: the documents that did not make it into the
index, with what to do about them (issue 25).

Two kinds are listed: documents parked in the dead letter (:mod:`ncindex.index.deadletter`:
bytes that cannot become text, too large, a worker killed repeatedly, a run past the soft time
limit) and documents whose last task run failed or is being retried
(:class:`ncindex.progress.FailingDocuments`). A retry takes a document out of both, forgets its
counted runs, and sends its index task again on the ``index`` queue — a parked document whose
file did not change is parked again by that run, with the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis

from ncindex import names
from ncindex.errors import BrokerUnavailable
from ncindex.index.deadletter import DeadLetters
from ncindex.ingest.queueing import PUBLISH_RETRY, Producer
from ncindex.names import Names
from ncindex.progress import FailingDocuments, Progress, node_subject
from ncindex.sources.registry import NODE_TYPES, SOURCES


@dataclass(frozen=True, slots=True)
class FailedDocument:
    """One document to act on: ``kind`` ``dead_letter`` or ``failing``; ``reason`` (why it
    was parked, or the last error), ``attempts`` (runs counted), ``at`` (Unix seconds), the
    ``task`` and ``kwargs`` a retry sends, and for a file its ``path`` and ``mime_type`` when
    known ("" otherwise)."""

    subject: str
    user: str
    kind: str
    reason: str
    attempts: int
    at: float
    task: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    mime_type: str = ""
    retrying: bool = False

    def as_dict(self) -> dict[str, Any]:
        """JSON-able fields (for ``--json``)."""
        return {
            "subject": self.subject,
            "user": self.user,
            "kind": self.kind,
            "reason": self.reason,
            "attempts": self.attempts,
            "at": self.at,
            "task": self.task,
            "kwargs": self.kwargs,
            "path": self.path or None,
            "mime_type": self.mime_type or None,
            "retrying": self.retrying,
        }


def subject_of(doc_key: str) -> str:
    """The dead-letter subject of ``doc_key``: ``file:42``, ``note:42`` and ``node:42`` are
    all ``node:42`` (one file id, either type); ``deck_card:7`` and ``news_item:7`` are
    themselves. Raises ``ValueError`` for anything else."""
    kind, _, ident = doc_key.partition(":")
    if not ident or not ident.isdigit():
        raise ValueError(
            f"not a document key (file:<id>, note:<id>, deck_card:<id>, …): {doc_key!r}"
        )
    if kind == "node" or kind in NODE_TYPES:
        return node_subject(ident)
    if kind in SOURCES:
        return f"{kind}:{ident}"
    raise ValueError(f"unknown doc type {kind!r} in {doc_key!r}")


def list_failures(
    client: redis.Redis, keys: Names, user: str | None = None
) -> list[FailedDocument]:
    """Dead-lettered documents (oldest first), then failing ones (most recent first), of
    ``user`` or of everyone. A document both parked and failing is listed as parked."""
    rows = [
        FailedDocument(
            e.subject,
            e.user,
            "dead_letter",
            e.reason,
            e.deliveries,
            float(e.parked_at),
            e.task,
            dict(e.kwargs),
            e.path,
            e.mime_type,
        )
        for e in DeadLetters(client, keys).entries()
        if user is None or e.user == user
    ]
    parked = {r.subject for r in rows}
    rows += [
        FailedDocument(
            f.subject,
            f.user,
            "failing",
            f.last_error,
            f.attempts,
            f.at,
            f.task,
            dict(f.kwargs),
            retrying=f.retrying,
        )
        for f in FailingDocuments(client, keys).entries()
        if (user is None or f.user == user) and f.subject not in parked
    ]
    return rows


def retry(producer: Producer, client: redis.Redis, keys: Names, row: FailedDocument) -> None:
    """Send ``row`` back: out of the dead letter (first, so that its run is not skipped as
    parked) and the failing list, its run count forgotten, its task sent on the ``index``
    queue and the document pending again. Raises :class:`BrokerUnavailable` when the task
    cannot be sent; the dead-letter entry is then put back (the failing entry is not: the next
    failed run counts from one)."""
    letters = DeadLetters(client, keys)
    parked = letters.get(row.subject)
    letters.release(row.subject)
    client.delete(keys.runs_prefix + row.subject)
    FailingDocuments(client, keys).clear(row.subject)
    Progress(client, keys).queued(row.user, [row.subject])  # before: the run may end at once
    try:
        producer.send_task(
            row.task, kwargs=row.kwargs, queue=names.INDEX, retry_policy=PUBLISH_RETRY
        )
    except Exception as exc:  # kombu/redis raise several types
        if parked is not None:
            letters.park(parked)
        raise BrokerUnavailable(f"broker: {exc}") from exc
