"""Dead letter and delivery counts, kept in Redis (DESIGN §6).

Celery keeps no delivery count, so ncindex keeps one per document: a task counts a run in
the hash ``<namespace>:runs:<subject>`` when it starts working on a document (holding the
document's lock), notes there the version (etag) it works on once it knows it, and deletes the
hash when it ends in any way Python sees — success, error, retry. A count that is still there
at the next start means the previous run never ended: its worker was killed (OOM, segfault,
hard time limit, SIGKILL). After ``dead_letter_after`` such runs the document is *parked* —
unless it has changed since the version those runs noted: then the new version gets runs of
its own.

A parked document is an entry of the Redis hash ``<namespace>:deadletter`` (field = subject,
value = JSON of :class:`DeadLetter`) with the reason and the etag it had. Tasks for it do
nothing while its etag is unchanged; a new etag (the user fixed or replaced the file) releases
it and it is processed again. Documents whose bytes cannot be extracted (corrupt PDF) or that
exceed a size bound are parked at once.

Subjects: ``node:<file id>`` for files and notes (one id, either type), ``<doc_type>:<id>``
otherwise.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import redis
import structlog

from ncindex import names
from ncindex.names import Names
from ncindex.progress import node_subject

__all__ = ["DeadLetter", "DeadLetters", "Deliveries", "node_subject"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One parked document: ``subject`` (see module docstring), the ``user`` it was processed
    as, ``reason`` (text), ``etag`` it had when parked, the ``task`` name and its ``kwargs``,
    ``parked_at`` (Unix seconds), ``deliveries`` (runs counted, 0 for a parse failure), and
    for a file the ``path`` (in ``user``'s view) and ``mime_type`` Nextcloud reported ("" when
    not known: an entry parked before they were recorded, or a Deck card or News item)."""

    subject: str
    user: str
    reason: str
    etag: str
    task: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    parked_at: int = 0
    deliveries: int = 0
    path: str = ""
    mime_type: str = ""


class DeadLetters:
    """The dead letter of deployment ``keys`` on one Redis client."""

    def __init__(self, client: redis.Redis, keys: Names) -> None:
        self.redis = client
        self.key = keys.deadletter

    def park(self, entry: DeadLetter) -> DeadLetter:
        """Store ``entry`` (replacing an older one of its subject); ``parked_at`` is set to now
        when 0. Returns what was stored."""
        if not entry.parked_at:
            entry = DeadLetter(**(asdict(entry) | {"parked_at": int(time.time())}))
        self.redis.hset(self.key, entry.subject, json.dumps(asdict(entry)))
        return entry

    def put(
        self,
        subject: str,
        user: str,
        etag: str,
        reason: str,
        task: str,
        *,
        deliveries: int = 0,
        path: str = "",
        mime_type: str = "",
        **kwargs: Any,
    ) -> DeadLetter:
        """Park ``subject`` with ``reason`` until its ``etag`` changes, and log it
        (``dead_letter``): ``task`` and its ``kwargs`` (besides ``user``) send it again
        (``ncindex retry``); ``deliveries`` counts the runs that never ended (0 for a document
        whose bytes cannot become text); a file's ``path`` and ``mime_type`` are kept for
        ``ncindex failures``. Returns what was stored."""
        entry = self.park(
            DeadLetter(
                subject,
                user,
                reason,
                etag,
                task,
                {"user": user, **kwargs},
                deliveries=deliveries,
                path=path,
                mime_type=mime_type,
            )
        )
        log.warning("dead_letter", subject=subject, user=user, reason=reason)
        return entry

    def put_node(
        self,
        file_id: int,
        user: str,
        etag: str,
        reason: str,
        *,
        deliveries: int = 0,
        path: str = "",
        mime_type: str = "",
    ) -> DeadLetter:
        """:meth:`put` for file ``file_id`` (a file or a note: subject ``node:<id>``, sent
        again as ``ncindex.index_node``)."""
        return self.put(
            node_subject(file_id),
            user,
            etag,
            reason,
            names.INDEX_NODE,
            deliveries=deliveries,
            path=path,
            mime_type=mime_type,
            file_id=file_id,
        )

    def get(self, subject: str) -> DeadLetter | None:
        """The entry of ``subject``, or ``None`` when it is not parked."""
        raw = self.redis.hget(self.key, subject)
        return DeadLetter(**json.loads(raw)) if raw else None

    def release(self, subject: str) -> bool:
        """Take ``subject`` out of the dead letter; ``True`` when it was in it."""
        return bool(self.redis.hdel(self.key, subject))

    def entries(self) -> list[DeadLetter]:
        """Every parked document, oldest first; an entry that is not one (written by hand, or
        by another version) is left out."""
        out = []
        for value in self.redis.hvals(self.key):
            try:
                out.append(DeadLetter(**json.loads(value)))
            except (ValueError, TypeError):
                continue
        return sorted(out, key=_order)

    def blocked(self, subject: str, etag: str) -> DeadLetter | None:
        """The entry when ``subject`` is parked with this very ``etag`` (skip it); a parked
        entry with another etag is released (the document changed) and ``None`` returned."""
        entry = self.get(subject)
        if entry is None:
            return None
        if entry.etag == etag:
            return entry
        self.release(subject)
        return None


def _order(entry: DeadLetter) -> tuple[int, str]:
    return entry.parked_at, entry.subject


class Deliveries:
    """Per-document runs that started and have not ended (see module docstring), and the
    version (etag) the last of them noted.

    Each subject is a Redis hash (``runs``: count, ``etag``: the noted version) that expires
    ``ttl`` seconds after its run started, so a count left by a run killed long ago does not
    count against a document forever.
    """

    def __init__(self, client: redis.Redis, keys: Names, ttl: int) -> None:
        self.redis = client
        self.prefix = keys.runs_prefix
        self.ttl = ttl

    def start(self, subject: str) -> tuple[int, str | None]:
        """Count one more run of ``subject``; returns the count including this run (1 when
        every earlier run ended) and the etag the unfinished ones noted (``None``: none
        noted)."""
        key = self.prefix + subject
        pipe = self.redis.pipeline()
        pipe.hincrby(key, "runs", 1)
        pipe.hget(key, "etag")
        pipe.expire(key, self.ttl)
        count, etag, _ = pipe.execute()
        return int(count), etag.decode() if etag is not None else None

    def working_on(self, subject: str, etag: str) -> None:
        """Note the version this run of ``subject`` works on (the expiry is set again: a hash
        lost meanwhile, Redis flushed, must not come back without one)."""
        key = self.prefix + subject
        pipe = self.redis.pipeline()
        pipe.hset(key, "etag", etag)
        pipe.expire(key, self.ttl)
        pipe.execute()

    def restart(self, subject: str) -> None:
        """Count only this run: the unfinished ones were on a version that is gone."""
        key = self.prefix + subject
        pipe = self.redis.pipeline()
        pipe.delete(key)
        pipe.hset(key, "runs", 1)
        pipe.expire(key, self.ttl)
        pipe.execute()

    def finish(self, subject: str) -> None:
        """The run ended (in any way Python sees): forget the count."""
        self.redis.delete(self.prefix + subject)
