"""Model changes without downtime: ``ncindex reindex`` (seed ADR-011, issue 6).

A new dense model gets its own collection, filled in the background while search keeps using
the live one, then the model pointers (:class:`~ncindex.store.port.ModelPointers`) move in one
atomic step. The steps, each a method of :class:`Reindexer`:

1. :meth:`~Reindexer.start` — open the new model (its files under ``Settings.model_dir``),
   create its collection, point ``building`` at it, and wait until every process has re-read
   the pointers (``2 × model_check_seconds``): from then on every write is mirrored into it
   (:mod:`ncindex.embedding.live_models`).
2. :meth:`~Reindexer.build` — copy every document of the live collection: under the
   document's lock (the one indexing holds), its points are read and written to the new
   collection with the new model's dense vectors computed from the chunk texts; BM25 vectors
   and payloads are copied as they are. Chunks are not cut again, so the new model must
   accept ``Settings.chunk_tokens`` tokens. Documents whose chunk-0 payload already matches
   are skipped, so a build that stopped resumes where it was. Works until a deadline and
   reports what remains (the Celery task then queues itself again).
3. :meth:`~Reindexer.switch` — ``active`` ← the new model, ``standby`` ← the old one, which
   keeps receiving every write, so :meth:`~Reindexer.back` is an instant, lossless switch back.
4. :meth:`~Reindexer.finish` — stop mirroring and drop the second model's collection.

A new version of the BM25 analysis chain (:data:`~ncindex.embedding.analyzer.ANALYZER_VERSION`)
needs no second collection: BM25 vectors do not depend on the dense model, and a plain word
keeps its term id across versions, so search goes on while :meth:`~Reindexer.reanalyze`
rewrites, document by document under its lock, the BM25 vectors of every point an older
analyzer made (payload ``analyzer``), in place in the live collection and in the mirror's.
A model build (step 2) also recomputes them on the way, and indexing never reuses an old
version's BM25 vector.

Progress is kept in Redis (``<namespace>:reindex``, :func:`record_progress`) for ``ncindex
reindex`` (no option) and ``ncindex status`` (a step under way: since when, how far).
``ncindex doctor`` and ``ncindex status`` tell whether a rewrite is due from a sample of the
live collection's first chunks (:func:`sample_analyzers`, :func:`analyzer_upgrade_due`).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections import Counter, deque
from dataclasses import asdict, dataclass

import redis
import structlog
from redis.typing import EncodableT

from ncindex.documents import DocRef
from ncindex.embedding.analyzer import ANALYZER_VERSION, LACKING
from ncindex.embedding.live_models import ModelHandle, mirror_points
from ncindex.embedding.models import model_paths
from ncindex.errors import LockBusy, ModelError, ReindexError
from ncindex.index.indexing import Indexer
from ncindex.names import Names
from ncindex.redis_replies import as_text
from ncindex.runtime import Services
from ncindex.settings import Settings
from ncindex.store import ModelPointers, VectorStore, model_slug
from ncindex.store.queries import first_chunks
from ncindex.wording import counted

log = structlog.get_logger(__name__)

#: Chunk-0 payload fields compared to decide that a document's copy is current.
COMPARED_FIELDS = (
    "content_hash",
    "chunk_count",
    "acl",
    "paths",
    "title",
    "tags",
    "category",
    "etag",
    "modified_at",
    "analyzer",
    "extractor",
    "extractor_version",
)


#: How many documents' first chunks :func:`sample_analyzers` reads: one scroll page of their
#: ``analyzer`` field, whatever the store holds (a million chunks included).
ANALYZER_SAMPLE = 1000

#: The payload ``analyzer`` of a point written before the field existed, as it is shown.
NO_ANALYZER = "(none)"


@dataclass(frozen=True, slots=True)
class BuildReport:
    """One build run: ``documents`` in the live collection, ``copied`` and ``removed`` in
    the new one by this run, ``remaining`` to copy when the deadline came (0 when done)."""

    model: str
    documents: int
    copied: int
    removed: int
    remaining: int


def require_model_files(settings: Settings, name: str) -> None:
    """Raise :class:`~ncindex.embedding.models.ModelError` unless dense model ``name``'s ONNX and
    tokenizer files are in ``settings.model_dir`` (README, "Changing the embedding model")."""
    paths = model_paths(settings.model_dir, name)
    if not paths.dense_ready():
        raise ModelError(f"model {name!r}: no model.onnx and tokenizer files in {paths.dense_dir}")


def _summaries(store: VectorStore) -> dict[str, str]:
    """doc_key → the JSON of its chunk-0 :data:`COMPARED_FIELDS`, for every document."""
    out: dict[str, str] = {}
    for payload in store.scroll(first_chunks(), ["doc_key", *COMPARED_FIELDS]):
        fields = {f: payload.get(f) for f in COMPARED_FIELDS}
        out[payload["doc_key"]] = json.dumps(fields, sort_keys=True, default=str)
    return out


def sample_analyzers(store: VectorStore, sample: int = ANALYZER_SAMPLE) -> Counter[str]:
    """Analyzer version (payload ``analyzer``; :data:`NO_ANALYZER` when absent) → how many of
    at most ``sample`` documents' first chunks it made: the first ``sample`` in point-id order,
    read in one scroll page holding only that field. Point ids begin with a hash of the
    document key (:func:`~ncindex.documents.point_id`), so these are documents spread over
    the store, not its oldest or newest; a document outside the sample is not seen. An empty
    collection gives an empty count. Raises ``StoreUnavailable``."""
    payloads = store.scroll(first_chunks(), ["analyzer"], page_size=sample)
    return Counter(str(p.get("analyzer", NO_ANALYZER)) for p in itertools.islice(payloads, sample))


def analyzer_upgrade_due(counts: Counter[str]) -> str | None:
    """What to tell the operator when ``counts`` (:func:`sample_analyzers`) holds a version
    other than :data:`~ncindex.embedding.analyzer.ANALYZER_VERSION`: the versions found, what
    their points lack meanwhile (:data:`~ncindex.embedding.analyzer.LACKING`, from the oldest
    version found; README, "The BM25 analyzer") and the command that rewrites them; ``None``
    when every sampled document is current or of a later release (:func:`is_newer_analyzer`,
    which this release's rewrite leaves), or none was sampled."""
    older = {version: n for version, n in counts.items() if is_older_analyzer(version)}
    if not older:
        return None
    found = ", ".join(f"{version} ({n})" for version, n in sorted(older.items()))
    since = list(LACKING)
    oldest = min(since.index(v) if v in LACKING else 0 for v in older)
    lacking = "; ".join(LACKING[v] for v in since[oldest:])
    return (
        f"{sum(older.values())} of {counted(counts.total(), 'document')} sampled (a sample of "
        "the first "
        f"chunks, not every document) have BM25 vectors of an older analyzer: {found}; the "
        f"current one is {ANALYZER_VERSION}. Until `ncindex reindex --analyzer` rewrites them, "
        f"queries for what those lack miss their BM25 half: {lacking}"
    )


#: How a released chain names itself: ``en-`` and its number (:data:`ANALYZER_VERSION`).
_RELEASED = re.compile(r"en-([1-9][0-9]*)")


def is_newer_analyzer(version: str) -> bool:
    """Whether ``version`` names a later chain than this release's: ``en-N`` with ``N``
    above :data:`~ncindex.embedding.analyzer.ANALYZER_VERSION`'s (a later release's workers
    ran beside this one's during a rolling upgrade, or before a rollback).
    :meth:`Reindexer.reanalyze` leaves such points as they are, since rewriting them would
    take from them what the later chain adds. Anything else that is not the current version
    (one :data:`~ncindex.embedding.analyzer.LACKING` names, ``en-1``, :data:`NO_ANALYZER`, or
    a value no release writes) is older: left, it would never be rewritten."""
    found, current = _RELEASED.fullmatch(version), _RELEASED.fullmatch(ANALYZER_VERSION)
    assert current is not None  # ANALYZER_VERSION is en-N
    return found is not None and int(found[1]) > int(current[1])


def is_older_analyzer(version: str) -> bool:
    """Whether points whose payload ``analyzer`` is ``version`` are to be rewritten by this
    release's chain: neither :data:`~ncindex.embedding.analyzer.ANALYZER_VERSION` nor a later
    one (:func:`is_newer_analyzer`)."""
    return version != ANALYZER_VERSION and not is_newer_analyzer(version)


class Reindexer:
    """The reindex steps on one process's :class:`Services` and :class:`Indexer` (its locks)."""

    def __init__(self, services: Services, indexer: Indexer) -> None:
        self.services = services
        self.indexer = indexer
        self.settings = services.settings

    # --- pointers -------------------------------------------------------------------------

    def pointers(self) -> ModelPointers:
        """The model pointers as the store has them now."""
        return self.services.models.root.models()

    def _move(self, pointers: ModelPointers) -> None:
        """Move the pointers (this process, like every other, sees them within
        ``model_check_seconds``; nothing is opened here, so the CLI can call it)."""
        self.services.models.root.set_models(pointers)
        log.info("models_moved", active=pointers.active, mirror=pointers.mirror)

    def _settle(self) -> None:
        """Wait until every process has re-read the pointers."""
        time.sleep(2 * self.settings.model_check_seconds)

    # --- steps ----------------------------------------------------------------------------

    def start(self, name: str) -> ModelHandle:
        """Open model ``name`` and make it the building model; returns its handle once every
        process mirrors writes into it. Resumes a build of the same model.

        Raises :class:`~ncindex.embedding.models.ModelError` when the model's files are missing or
        do not load, :class:`ReindexError` when it is already live, when another second model
        exists (finish it first) or when it accepts fewer tokens than ``chunk_tokens``.
        """
        slug = model_slug(name)
        require_model_files(self.settings, name)
        pointers = self.pointers()
        if pointers.active is None:
            pointers = self.services.models.view().pointers
        if slug == pointers.active:
            raise ReindexError(f"model {slug!r} is already live")
        if pointers.mirror not in (None, slug) or pointers.standby == slug:
            raise ReindexError(
                f"model {pointers.mirror!r} is already kept beside the live one: "
                "run `ncindex reindex --finish` first"
            )
        handle = self.services.models.handle(slug)
        handle.embedder.load()  # a broken model fails here, before any write is mirrored
        tokens = handle.embedder.max_tokens
        if tokens < self.settings.chunk_tokens + 2:
            raise ReindexError(
                f"model {slug!r} accepts {tokens} tokens, chunks have up to "
                f"{self.settings.chunk_tokens}: lower NCINDEX_CHUNK_TOKENS and re-index instead"
            )
        if pointers.building != slug:
            self._move(ModelPointers(active=pointers.active, building=slug))
            self.record(slug, "building")  # from now on: counted once build() has listed
            self._settle()
        return handle

    def build(self, deadline: float) -> BuildReport:
        """Copy what the building model lacks until ``deadline`` (``time.monotonic()``
        seconds); a document whose lock stays busy is tried again later. Raises
        :class:`ReindexError` when no model is being built, ``StoreUnavailable`` and
        ``ModelError`` from the store and the model."""
        view = self.services.models.refresh()
        if view.pointers.building is None or view.mirror is None:
            raise ReindexError("no model is being built: run `ncindex reindex --model NAME`")
        live, target = view.live, view.mirror
        source, built = _summaries(live.store), _summaries(target.store)
        stale = sorted(k for k, v in source.items() if built.get(k) != v)
        extra = sorted(set(built) - set(source))
        done = {True: 0, False: 0}  # copied, removed
        left = deque(stale + extra)
        while left and time.monotonic() < deadline:
            key = left.popleft()
            try:
                with self.indexer.lock(DocRef.parse(key), wait=1.0):
                    done[self._copy(key, live, target)] += 1
            except LockBusy:
                left.append(key)  # a task holds it (and mirrors what it writes): try later
                time.sleep(0.05)
            self.record(target.slug, "building", documents=len(source), remaining=len(left))
        report = BuildReport(target.slug, len(source), done[True], done[False], len(left))
        log.info("reindex_build", **asdict(report))
        return report

    @staticmethod
    def _copy(key: str, live: ModelHandle, target: ModelHandle) -> bool:
        """Make ``target``'s points of ``key`` those of ``live``; ``False`` when ``live`` has
        none (they were removed from ``target``)."""
        points = live.store.document_points(key, with_vectors=True)
        if not points:
            target.store.delete_document(key)
            return False
        target.store.upsert(mirror_points(points, target))
        target.store.delete_document(key, keep={p.id for p in points})
        return True

    def reanalyze(self, deadline: float) -> BuildReport:
        """Rewrite the BM25 vectors (and the ``analyzer`` payload field) of every document of
        the live collection whose chunk 0 an older analyzer made (:func:`is_older_analyzer`;
        a later release's points, :func:`is_newer_analyzer`, are left and logged), until
        ``deadline`` (``time.monotonic()`` seconds); dense vectors and the rest of the payload
        stay. The
        write goes through the live view, so a mirror model gets it too. Returns a
        :class:`BuildReport` (``copied`` = documents rewritten). Raises ``StoreUnavailable``."""
        view = self.services.models.refresh()
        live = view.live
        versions = {
            p["doc_key"]: str(p.get("analyzer", NO_ANALYZER))
            for p in live.store.scroll(first_chunks(), ["doc_key", "analyzer"])
        }
        stale = sorted(key for key, version in versions.items() if is_older_analyzer(version))
        newer = Counter(v for v in versions.values() if is_newer_analyzer(v))
        if newer:
            # During a rolling upgrade a worker of this (older) release may take the task a
            # newer release's `ncindex reindex --analyzer` queued: it leaves their points be.
            log.warning("reanalyze_newer_versions_left", versions=dict(newer))
        left, done = deque(stale), 0
        while left and time.monotonic() < deadline:
            key = left.popleft()
            try:
                with self.indexer.lock(DocRef.parse(key), wait=1.0):
                    points = live.store.document_points(key, with_vectors=True)
                    for p in points:
                        p.sparse = live.embedder.embed_documents_sparse([p.payload["text"]])[0]
                        p.payload["analyzer"] = ANALYZER_VERSION
                    view.store.upsert(points)
                    done += 1
            except LockBusy:
                left.append(key)  # a task holds it and writes it with the new analyzer anyway
                time.sleep(0.05)
            self.record(ANALYZER_VERSION, "reanalyzing", documents=len(stale), remaining=len(left))
        report = BuildReport(ANALYZER_VERSION, len(stale), done, 0, len(left))
        if not left:
            self.record(ANALYZER_VERSION, "reanalyzed", documents=len(stale))
        log.info("reanalyze", **asdict(report))
        return report

    def switch(self) -> ModelPointers:
        """Make the building model live and keep the old one as the standby. Raises
        :class:`ReindexError` when no model is being built."""
        pointers = self.pointers()
        if pointers.building is None:
            raise ReindexError("no model is being built")
        moved = ModelPointers(active=pointers.building, standby=pointers.active)
        self._move(moved)
        self.record(moved.active or "", "switched")
        return moved

    def back(self) -> ModelPointers:
        """Swap the live and standby models (instant: the standby is current). Raises
        :class:`ReindexError` without a standby (a model still being built cannot serve)."""
        pointers = self.pointers()
        if pointers.standby is None:
            raise ReindexError(
                "no standby model to switch back to"
                + (f" ({pointers.building!r} is still being built)" if pointers.building else "")
            )
        moved = ModelPointers(active=pointers.standby, standby=pointers.active)
        self._move(moved)
        self.record(moved.active or "", "switched back")
        return moved

    def finish(self) -> str | None:
        """Stop mirroring and drop the second model's collection (a standby, or a build being
        abandoned); returns its slug, ``None`` when there was none."""
        pointers = self.pointers()
        other = pointers.mirror
        if other is None:
            return None
        self._move(ModelPointers(active=pointers.active))
        self._settle()
        self.services.models.forget(other)
        self.services.models.root.drop_model(other)
        self.record(other, "dropped")
        return other

    # --- progress -------------------------------------------------------------------------

    def record(
        self,
        model: str,
        state: str,
        *,
        documents: int | None = None,
        remaining: int = 0,
        error: str | None = None,
    ) -> None:
        """Record a step's progress in Redis (:func:`record_progress`)."""
        record_progress(
            self.services.redis,
            self.settings.names,
            model,
            state,
            documents=documents,
            remaining=remaining,
            error=error,
        )


#: The states of a step still under way (``ncindex status`` shows them as a rebuild).
UNDER_WAY = frozenset({"building", "reanalyzing"})

#: A step under way whose last record is older than this (seconds) is shown as stalled. A
#: live build or rewrite records after every document (:meth:`Reindexer.build`), a document's
#: copy is bounded by the task time limit (300 s by default), and a run cut off or ended
#: queues the step again, its retries backing off at most 300 s: an hour without a record is
#: twelve default time limits — its worker died with the message lost, or the message waits
#: behind a long ``index`` queue (``ncindex status`` shows its depth beside it).
STALLED_SECONDS = 3600


def record_progress(
    client: redis.Redis,
    keys: Names,
    model: str,
    state: str,
    *,
    documents: int | None = None,
    remaining: int = 0,
    error: str | None = None,
) -> None:
    """Record a reindex step's progress in ``keys.reindex_progress`` for :func:`progress`
    (``seq`` counts the records). A record of another ``model`` or ``state`` than the last
    one begins a step: its ``started_at`` is now (Unix seconds), and a ``documents`` it does
    not give is dropped (the last step's is not this one's); the runs of one step (a build
    queues itself again until done) keep the ``started_at`` of its first. ``error`` goes
    with the ``failed`` state. Raises ``redis.RedisError``."""
    key = keys.reindex_progress
    last_model, last_state = (
        as_text(v) if v is not None else None for v in client.hmget(key, "model", "state")
    )
    now = int(time.time())
    fields: dict[EncodableT, EncodableT] = {
        "model": model,
        "state": state,
        "remaining": remaining,
        "updated_at": now,
    }
    dropped = []
    if (last_model, last_state) != (model, state):
        fields["started_at"] = now
        if documents is None:
            dropped.append("documents")
    if documents is not None:
        fields["documents"] = documents
    if error is None:
        dropped.append("error")
    else:
        fields["error"] = error
    pipe = client.pipeline()
    pipe.hset(key, mapping=fields)
    if dropped:
        pipe.hdel(key, *dropped)
    pipe.hincrby(key, "seq", 1)
    pipe.execute()


def progress(services: Services) -> dict[str, str]:
    """:func:`read_progress` of ``services``' deployment."""
    return read_progress(services.redis, services.settings.names)


def read_progress(client: redis.Redis, keys: Names) -> dict[str, str]:
    """The last progress a reindex step recorded (empty when none): ``model``, ``state``
    (``building``, ``switched``, ``switched back``, ``dropped``, ``reanalyzing``,
    ``reanalyzed``, ``failed``), ``documents``, ``remaining``, ``started_at`` (when the step
    began; absent in a record made before it was kept) and ``updated_at`` (Unix seconds),
    ``error`` and ``seq`` (counts the records, so a waiting caller can tell a new one from an
    old one). Raises ``redis.RedisError``."""
    raw = client.hgetall(keys.reindex_progress)
    return {as_text(k): as_text(v) for k, v in raw.items()}
