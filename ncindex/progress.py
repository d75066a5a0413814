"""What the write path records so that people can see it move: documents pending per user,
documents left out by a rule, documents finished per time bucket (rates, ETA), each user's
first indexing, and the documents whose tasks keep failing (issue 25).

All of it is in Redis under the deployment's namespace (keys in :class:`ncindex.names.Names`),
written by the producers and the workers and read by ``GET /v1/status``
(:mod:`ncindex.sync.user_status`) and ``ncindex status`` (:mod:`ncindex.sync.status`):

- ``pending:<user>`` — a sorted set of the documents (subjects, as the dead letter names them:
  ``node:<file id>`` or ``<doc_type>:<id>``) an index task was queued for as ``user`` and has
  not ended for, scored by when it was first queued (Unix seconds). Added when a task is sent
  (:func:`ncindex.ingest.queueing.send_actions`), removed when its run ends in any way but a
  retry. A member older than :data:`PENDING_HORIZON` is dropped when read: its message was
  lost (Redis flushed, a purge), so it will never end.
- ``skipped:<user>`` — a hash subject → the rule that leaves the document out
  (:mod:`ncindex.sources.eligibility`'s reasons, and the indexer's ``not readable``,
  ``download refused``, ``archived``, ``no_text``), followed by a tab and the document's path
  in the user's view when it is known (:func:`skip_value`; a rule alone was written before),
  written by the index task and replaced by each full walk of the user's files (reconcile).
- ``truncated:<user>`` — a hash subject → path (its doc_key for a document without one) of
  the documents indexed with their text cut short by a bound (``max_document_chars``,
  pages, rows, seconds): what lies beyond the cut cannot be found. Written by the index task;
  a run that reads the document again, evicts, skips or parks it takes it out.
- ``throughput:<bucket>`` — a hash per :data:`BUCKET_SECONDS` of documents and chunks
  finished, in total (``documents``, ``chunks``) and per user (``documents:<user>``,
  ``chunks:<user>``); each expires :data:`KEEP_SECONDS` after its bucket, so at most
  ``KEEP_SECONDS / BUCKET_SECONDS + 1`` of them exist.
- ``first-indexing:<user>`` — when the first task was queued for ``user`` (``started_at``),
  and when nothing was pending any more for the first time (``done_at``, with ``finished``:
  how many distinct documents finished since the start). While it runs, the documents
  finished are the set ``first-indexed:<user>``: a document indexed twice (its upload's
  event, then the scan) counts once. A scan that finds the user's documents indexed, sends
  nothing and finds nothing recorded (Redis restarted empty) records it done with what the
  index holds (:meth:`Progress.found_indexed`). Each user with such a record is a member of
  the set ``progress-users`` (:meth:`Progress.users`).
- ``failing`` — a hash subject → JSON of the last failed or retried run of a document:
  ``user``, ``task``, ``kwargs``, ``attempts`` (runs that failed in a row), ``last_error``,
  ``at``; removed when a run of it ends without an error.
- ``index-rebuild:<collection>:<field>`` — a payload index a process's ``ensure_collection``
  is making again in a collection holding points (:class:`IndexRebuilds`): JSON of
  ``collection``, ``field``, ``points``, ``waits`` and ``started_at``; deleted when a build
  the process waits for ends, else expiring after :data:`INDEX_REBUILD_NOTE_SECONDS`. Each
  note's key is a member of the sorted set ``index-rebuilds``, scored with the Unix second it
  expires at, so that ``ncindex status`` reads them without a SCAN.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import redis
from redis.commands.core import Script
from redis.typing import EncodableT

from ncindex import names
from ncindex.names import Names
from ncindex.redis_replies import as_text

#: Length of a throughput bucket, seconds.
BUCKET_SECONDS = 10
#: How long a throughput bucket is kept, seconds (the longest rate window that can be asked).
KEEP_SECONDS = 900
#: The rate window ``ncindex status`` and ``/v1/status`` use by default, seconds.
RATE_SECONDS = 300
#: Outcomes after which a document is no longer cut short unless the run says so: its text
#: was read again, or it left the index.
_TEXT_READ_OR_GONE = frozenset({"indexed", "evicted", "ineligible", "dead_letter"})
#: A pending document older than this (seconds) is taken to be lost and dropped when read.
PENDING_HORIZON = 7 * 86400

#: A run for ``ARGV[1]`` ended (Unix seconds ``ARGV[2]``) while ``KEYS[1]`` (a user's
#: first-indexing hash) has started and not ended: the subject joins the set ``KEYS[2]``
#: (expiring in ``ARGV[3]`` s, should a worker of the release before end the run) and, when
#: the pending set ``KEYS[3]`` is empty, the first indexing ends — ``finished`` is the set's
#: size (plus a count of runs that release kept in the same field), ``done_at`` the time — and
#: the set is deleted. One script, so two runs ending at once end it once.
_FIRST_FINISHED = Script(
    None,  # type: ignore[arg-type]
    b"if redis.call('HEXISTS', KEYS[1], 'started_at') == 0 "
    b"or redis.call('HEXISTS', KEYS[1], 'done_at') == 1 then return 0 end "
    b"redis.call('SADD', KEYS[2], ARGV[1]) redis.call('EXPIRE', KEYS[2], ARGV[3]) "
    b"if redis.call('ZCARD', KEYS[3]) == 0 then "
    b"local before = tonumber(redis.call('HGET', KEYS[1], 'finished') or '0') or 0 "
    b"redis.call('HSET', KEYS[1], 'finished', before + redis.call('SCARD', KEYS[2]), "
    b"'done_at', ARGV[2]) "
    b"redis.call('DEL', KEYS[2]) end "
    b"return 1",
)


#: ``KEYS[1]`` (a user's first-indexing hash) has no start and the pending set ``KEYS[2]`` is
#: empty: record a first indexing done at ``ARGV[1]`` (Unix seconds) with ``ARGV[2]``
#: documents finished, and user ``ARGV[3]`` in the set ``KEYS[3]``
#: (:attr:`~ncindex.names.Names.progress_users`); answers 1 when it did, else 0.
_FOUND_DONE = Script(
    None,  # type: ignore[arg-type]
    b"if redis.call('HEXISTS', KEYS[1], 'started_at') == 1 "
    b"or redis.call('ZCARD', KEYS[2]) > 0 then return 0 end "
    b"redis.call('HSET', KEYS[1], 'started_at', ARGV[1], 'done_at', ARGV[1], "
    b"'finished', ARGV[2]) "
    b"redis.call('SADD', KEYS[3], ARGV[3]) "
    b"return 1",
)


NODE_PREFIX = "node:"
"""The prefix of a file's or note's subject (:func:`node_subject`)."""


def node_subject(file_id: int | str) -> str:
    """The subject of a file or note: ``"node:<file id>"`` (one id, either type)."""
    return f"{NODE_PREFIX}{file_id}"


def task_subject(task: str, kwargs: Mapping[str, Any]) -> str | None:
    """The subject a tracked task works on (``node:<file id>``, ``<doc_type>:<id>``), or
    ``None`` for a task that is not about one document."""
    if task == names.INDEX_NODE and "file_id" in kwargs:
        return node_subject(kwargs["file_id"])
    if task == names.INDEX_DOCUMENT and {"doc_type", "doc_id"} <= kwargs.keys():
        if kwargs["doc_type"] in ("file", "note"):
            return node_subject(kwargs["doc_id"])
        return f"{kwargs['doc_type']}:{kwargs['doc_id']}"
    return None


@dataclass(frozen=True, slots=True)
class Rates:
    """Documents and chunks finished per second over ``window_seconds`` (the part of the
    asked window that saw activity, at least one bucket; 0 rates when nothing finished)."""

    documents_per_second: float
    chunks_per_second: float
    window_seconds: float
    documents: int
    chunks: int


class Progress:
    """The progress records of deployment ``keys`` on one Redis client."""

    def __init__(self, client: redis.Redis, keys: Names) -> None:
        self.redis = client
        self.keys = keys

    # --- writing -----------------------------------------------------------------------------

    def queued(self, user: str, subjects: Iterable[str], now: float | None = None) -> None:
        """Tasks were sent for ``subjects`` as ``user``: they are pending (their first
        queueing time is kept), and ``user``'s first indexing starts if it has not."""
        subjects = list(subjects)
        if not subjects:
            return
        now = time.time() if now is None else now
        pipe = self.redis.pipeline(transaction=False)
        pipe.zadd(self.keys.pending(user), dict.fromkeys(subjects, now), nx=True)
        pipe.hsetnx(self.keys.first_indexing(user), "started_at", f"{now:.3f}")
        pipe.sadd(self.keys.progress_users, user)
        pipe.execute()

    def finished(
        self,
        user: str,
        subject: str,
        action: str,
        chunks: int = 0,
        reason: str | None = None,
        now: float | None = None,
        *,
        clear_failures: bool = False,
        truncated: str | None = None,
        path: str | None = None,
    ) -> None:
        """A run for ``subject`` as ``user`` ended with ``action`` (an indexer outcome, or
        ``failed``) after embedding ``chunks``: it is no longer pending, it counts in the
        throughput, an ``ineligible`` one is recorded under its rule (``reason``; ``no_text``
        without one) with its ``path`` (when known) and any other takes it out of the skipped.
        ``truncated`` (the outcome's
        :attr:`~ncindex.index.steps.Outcome.truncated`: a path) records the document as cut
        short; without it, an ``indexed``, ``evicted``, ``ineligible`` or ``dead_letter`` run
        takes it out of the truncated (an ``unchanged`` one did not read its text). Ends the
        first indexing when nothing of ``user`` is pending any more. With ``clear_failures``
        the subject's failures are forgotten too (:meth:`FailingDocuments.clear`), in the same
        round trip."""
        now = time.time() if now is None else now
        keys = self.keys
        bucket = keys.throughput(int(now // BUCKET_SECONDS))
        pipe = self.redis.pipeline(transaction=False)
        if clear_failures:
            pipe.hdel(keys.failing, subject)
        pipe.zrem(keys.pending(user), subject)
        if action == "ineligible":
            pipe.hset(keys.skipped(user), subject, skip_value(reason or "no_text", path))
        else:
            pipe.hdel(keys.skipped(user), subject)
        if truncated is not None:
            pipe.hset(keys.truncated(user), subject, truncated)
        elif action in _TEXT_READ_OR_GONE:
            pipe.hdel(keys.truncated(user), subject)
        for name, value in (("documents", 1), ("chunks", int(chunks))):
            pipe.hincrby(bucket, name, value)
            pipe.hincrby(bucket, f"{name}:{user}", value)
        pipe.expire(bucket, KEEP_SECONDS + BUCKET_SECONDS)
        _FIRST_FINISHED(
            [keys.first_indexing(user), keys.first_indexed(user), keys.pending(user)],
            [subject, f"{now:.3f}", PENDING_HORIZON],
            pipe,
        )
        pipe.execute()

    def first_indexing_unknown(self, user: str) -> bool:
        """Whether nothing is recorded of ``user``'s first indexing (no start)."""
        return not self.redis.hexists(self.keys.first_indexing(user), "started_at")

    def found_indexed(self, user: str, documents: int, now: float | None = None) -> bool:
        """A scan found ``documents`` (> 0) of ``user``'s documents indexed while nothing is
        recorded of their first indexing and nothing is pending: it happened before this
        Redis's records (Redis restarted empty, or a store kept from another deployment),
        so it is recorded done, at ``now``, with ``documents`` finished — else their status
        said ``not_started`` beside a full index, until a change started a "first indexing"
        of one document. Returns whether it was recorded."""
        if documents <= 0:
            return False
        now = time.time() if now is None else now
        keys = [self.keys.first_indexing(user), self.keys.pending(user), self.keys.progress_users]
        return bool(_FOUND_DONE(keys, [f"{now:.3f}", int(documents), user], self.redis))

    def restart_first_indexing(self, user: str) -> None:
        """Forget ``user``'s first indexing (its start, end and count), so the next
        :meth:`queued` starts it again: the index lost everything of ``user`` (a new or wiped
        store beside a kept Redis) and is being rebuilt."""
        self.redis.delete(self.keys.first_indexing(user), self.keys.first_indexed(user))

    def record_skips(
        self, user: str, skipped: Mapping[str, str], listed: Iterable[str], *, full: bool
    ) -> None:
        """A scan of ``user``'s files found ``skipped`` (subject → :func:`skip_value`: the rule
        and the path) and the indexable
        ``listed`` subjects; a ``full`` walk replaces what was recorded of files and notes
        (``node:`` subjects), a partial one updates the documents it saw."""
        key = self.keys.skipped(user)
        if full:
            gone = [k for k in self.redis.hkeys(key) if as_text(k, "replace").startswith("node:")]
        else:
            gone = [s.encode() for s in listed]
        pipe = self.redis.pipeline()
        if gone:
            pipe.hdel(key, *gone)
        if skipped:
            mapping: dict[EncodableT, EncodableT] = {k: v for k, v in skipped.items()}
            pipe.hset(key, mapping=mapping)
        pipe.execute()

    # --- reading -----------------------------------------------------------------------------

    def pending(self, user: str, now: float | None = None) -> int:
        """How many documents are pending for ``user`` (lost ones dropped first)."""
        now = time.time() if now is None else now
        pipe = self.redis.pipeline(transaction=False)
        pipe.zremrangebyscore(self.keys.pending(user), "-inf", now - PENDING_HORIZON)
        pipe.zcard(self.keys.pending(user))
        return int(pipe.execute()[1])

    def truncated(self, user: str) -> dict[str, str]:
        """Documents of ``user`` indexed with their text cut short: subject → path (or
        doc_key), sorted by path."""
        raw = self.redis.hgetall(self.keys.truncated(user))
        pairs = ((as_text(k, "replace"), as_text(v, "replace")) for k, v in raw.items())
        return dict(sorted(pairs, key=lambda pair: (pair[1], pair[0])))

    def skipped(self, user: str) -> dict[str, int]:
        """Documents of ``user`` left out, counted per rule."""
        values = self.redis.hvals(self.keys.skipped(user))
        return dict(sorted(Counter(parse_skip(as_text(v))[0] for v in values).items()))

    def skipped_documents(self, user: str) -> list[tuple[str, str, str | None]]:
        """Documents of ``user`` left out: ``(subject, rule, path)`` each, ``path`` ``None``
        when not known (a Deck card, or recorded before paths were), sorted by path."""
        raw = self.redis.hgetall(self.keys.skipped(user))
        out = [(as_text(k, "replace"), *parse_skip(as_text(v, "replace"))) for k, v in raw.items()]
        return sorted(out, key=lambda row: (row[2] or "", row[0]))

    def rates(
        self, user: str | None = None, seconds: int = RATE_SECONDS, now: float | None = None
    ) -> Rates:
        """Documents and chunks finished per second over the last ``seconds`` (at most
        :data:`KEEP_SECONDS`), for ``user`` or (``None``) everyone. The rate is taken over
        the window from the first bucket in it that saw a document finish, so a burst that
        started a minute ago is not diluted over five."""
        now = time.time() if now is None else now
        seconds = max(BUCKET_SECONDS, min(int(seconds), KEEP_SECONDS))
        last = int(now // BUCKET_SECONDS)
        first = int((now - seconds) // BUCKET_SECONDS) + 1
        pipe = self.redis.pipeline(transaction=False)
        suffix = f":{user}" if user is not None else ""
        for bucket in range(first, last + 1):
            pipe.hmget(self.keys.throughput(bucket), f"documents{suffix}", f"chunks{suffix}")
        documents = chunks = 0
        active: int | None = None
        for bucket, (docs, chunk) in zip(range(first, last + 1), pipe.execute(), strict=True):
            if docs and int(docs):
                active = bucket if active is None else active
                documents += int(docs)
                chunks += int(chunk or 0)
        if active is None:
            return Rates(0.0, 0.0, float(seconds), 0, 0)
        span = max(float(BUCKET_SECONDS), now - active * BUCKET_SECONDS)
        return Rates(documents / span, chunks / span, round(span, 1), documents, chunks)

    def users(self) -> list[str]:
        """Every user a document was queued for (they have a first-indexing record), sorted:
        the members of :attr:`~ncindex.names.Names.progress_users`, which :meth:`queued` and
        :meth:`found_indexed` add to where they write that record — two commands whatever the
        keyspace holds (``ncindex status --watch`` asks every frame). The records written
        before that set was kept are added to it by one SCAN of the keyspace per namespace,
        at the first call, which marks it done (:attr:`~ncindex.names.Names.
        progress_users_listed`). Raises ``redis.RedisError``."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.exists(self.keys.progress_users_listed)
        pipe.smembers(self.keys.progress_users)
        listed, members = pipe.execute()
        users = {as_text(m) for m in members}
        if not listed:
            prefix = self.keys.first_indexing("")
            found = {
                as_text(k)[len(prefix) :]
                for k in self.redis.scan_iter(match=prefix + "*", count=1000)
            }
            pipe = self.redis.pipeline(transaction=False)
            if found:
                pipe.sadd(self.keys.progress_users, *found)
            pipe.set(self.keys.progress_users_listed, 1)
            pipe.execute()
            users |= found
        return sorted(users)

    def first_indexing(self, user: str) -> dict[str, float | int | None]:
        """``{"started_at", "done_at", "finished"}`` of ``user``'s first indexing (Unix
        seconds, ``None`` when not yet; distinct documents finished during it)."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.hgetall(self.keys.first_indexing(user))
        pipe.scard(self.keys.first_indexed(user))
        record, running = pipe.execute()
        raw = {as_text(k): as_text(v) for k, v in record.items()}
        return {
            "started_at": float(raw["started_at"]) if "started_at" in raw else None,
            "done_at": float(raw["done_at"]) if "done_at" in raw else None,
            # while it runs, the set (and what a worker of the release before counted)
            "finished": int(raw.get("finished", 0)) + (0 if "done_at" in raw else int(running)),
        }


def eta_seconds(pending: int, per_second: float) -> float | None:
    """Seconds until ``pending`` documents are done at ``per_second``; 0 with nothing
    pending, ``None`` when nothing was measured to go on (a rate of 0)."""
    if pending <= 0:
        return 0.0
    if per_second <= 0:
        return None
    return round(pending / per_second, 1)


@dataclass(frozen=True, slots=True)
class Failure:
    """The last failed (or retried) run of a document: ``subject``, the ``user`` it ran as,
    the ``task`` and its ``kwargs`` (to send it again), ``attempts`` (runs that failed in a
    row), ``last_error`` (``"<exception class>: <message>"``), ``at`` (Unix seconds) and
    whether Celery will still ``retry`` it."""

    subject: str
    user: str
    task: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    attempts: int = 1
    last_error: str = ""
    at: float = 0.0
    retrying: bool = False


class FailingDocuments:
    """The documents whose last run failed, of deployment ``keys`` (hash ``failing``)."""

    def __init__(self, client: redis.Redis, keys: Names) -> None:
        self.redis = client
        self.key = keys.failing

    def failed(
        self,
        subject: str,
        user: str,
        task: str,
        kwargs: Mapping[str, Any],
        error: BaseException,
        *,
        retrying: bool,
    ) -> Failure:
        """Count one more failed run of ``subject``; returns what is stored."""
        previous = self.get(subject)
        entry = Failure(
            subject,
            user,
            task,
            {k: v for k, v in kwargs.items() if k != "debounce_key"},
            (previous.attempts + 1) if previous else 1,
            f"{type(error).__name__}: {error}"[:2000],
            round(time.time(), 3),
            retrying,
        )
        self.redis.hset(self.key, subject, json.dumps(asdict(entry)))
        return entry

    def get(self, subject: str) -> Failure | None:
        """The entry of ``subject``, or ``None``."""
        raw = self.redis.hget(self.key, subject)
        return Failure(**json.loads(raw)) if raw else None

    def clear(self, subject: str) -> bool:
        """Forget ``subject``'s failures; ``True`` when there were some."""
        return bool(self.redis.hdel(self.key, subject))

    def entries(self) -> list[Failure]:
        """Every failing document, most recent first."""
        raw = self.redis.hvals(self.key)
        return sorted((Failure(**json.loads(v)) for v in raw), key=lambda f: -f.at)


def skip_value(rule: str, path: str | None) -> str:
    """What the skipped hash holds for a document left out by ``rule`` at ``path`` (its path
    in the user's view, ``None`` when not known): ``rule``, then a tab and ``path``."""
    return rule if path is None else f"{rule}\t{path}"


def parse_skip(value: str) -> tuple[str, str | None]:
    """``(rule, path)`` of a skipped hash value (:func:`skip_value`); ``path`` ``None`` for a
    value with none."""
    rule, tab, path = value.partition("\t")
    return rule, path if tab else None


#: How long the note of an index rebuild a Qdrant server does in the background is kept,
#: seconds: Qdrant does not say when it ends, so the note says when it was asked for, for
#: this long (a title index of a million points takes minutes, not hours).
INDEX_REBUILD_NOTE_SECONDS = 3600

#: How long the note of a rebuild the process waits for is kept at most, seconds, should
#: the process die during it (it deletes the note when the build ends).
INDEX_REBUILD_WAIT_SECONDS = 6 * 3600


class IndexRebuilds:
    """The payload indexes being made again (``index-rebuild:*`` keys; see the module
    docstring), for ``ncindex status``. Informative: a Redis error while writing is the
    caller's to ignore. Raises ``redis.RedisError``."""

    def __init__(self, client: redis.Redis, keys: Names) -> None:
        self.client = client
        self.keys = keys

    def _key(self, collection: str, field: str) -> str:
        return self.keys.key("index-rebuild", collection, field)

    def begun(self, collection: str, field: str, points: int, waits: bool) -> None:
        """Note that ``field``'s index of ``collection`` (holding ``points`` points) is being
        made again now, by a process that ``waits`` for it (or that queued it)."""
        now = time.time()
        note = {
            "collection": collection,
            "field": field,
            "points": points,
            "waits": waits,
            "started_at": now,
        }
        ttl = INDEX_REBUILD_WAIT_SECONDS if waits else INDEX_REBUILD_NOTE_SECONDS
        key = self._key(collection, field)
        pipe = self.client.pipeline(transaction=False)
        pipe.set(key, json.dumps(note), ex=ttl)
        pipe.zadd(self.keys.index_rebuilds, {key: now + ttl})
        pipe.execute()

    def ended(self, collection: str, field: str) -> None:
        """Delete the note of a build that ended."""
        key = self._key(collection, field)
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(key)
        pipe.zrem(self.keys.index_rebuilds, key)
        pipe.execute()

    def entries(self) -> list[dict[str, Any]]:
        """The notes, by collection and field (an unreadable one is left out): the keys the
        sorted set lists (those expired are dropped from it first), then their values — two
        round trips whatever the keyspace holds (``ncindex status --watch`` asks every frame;
        a SCAN of it, 1,000 keys a call, grew with every key of a shared Redis). A note
        written by a release before the set was kept is not listed; it expires within
        :data:`INDEX_REBUILD_WAIT_SECONDS`."""
        pipe = self.client.pipeline(transaction=False)
        pipe.zremrangebyscore(self.keys.index_rebuilds, "-inf", time.time())
        pipe.zrange(self.keys.index_rebuilds, 0, -1)
        _, listed = pipe.execute()
        keys = sorted(listed)
        out = []
        for raw in self.client.mget(keys) if keys else []:
            try:
                note = json.loads(raw) if raw is not None else None
            except ValueError:
                continue
            if isinstance(note, dict):
                out.append(note)
        return out
