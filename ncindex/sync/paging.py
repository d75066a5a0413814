"""A reconcile scan of a big account, paged across tasks (issue 20).

A cold scan of an account of 100,000 documents is a thousand ``PROPFIND`` requests or five
hundred Notes chunks: longer than a task may run (``task_soft_time_limit``) once Nextcloud
takes a fraction of a second per request, and all of it lost when the worker dies. So the
``ncindex.reconcile_scan`` task lists one *page* — at most ``reconcile_page_requests``
requests (:meth:`ncindex.sources.base.Source.list` with ``limit``) — and, while the
listing is unfinished, keeps the page in Redis beside the user's :class:`ScanState` and sends
itself on with the page number (``page``) to list the next one. The task that lists the last
page compares the whole listing with the index, enqueues and commits
(:meth:`ncindex.sync.reconcile.Reconciler.scan` with ``pages``); before that nothing is
compared, enqueued or committed, so no document is ever removed on a partial listing.

What one page keeps (one ``MULTI`` transaction, so a worker killed mid-write keeps all of it or
none): its documents (merged with those of earlier pages: a file listed at two paths; a note
listed again, changed, by a later chunk replaces its earlier entry), the
folders it listed with their etags, the folders it skipped (covered), the forbidden ones, the
files a rule left out, and the progress — pages listed, requests made, when the listing began,
the source's cursor, the full-walk and external-walk flags, the folders found unreachable
and those to revisit (files) and the Notes marker. Keys:
``<scan state>:pages`` (progress, JSON), ``…:pages:docs`` / ``folders`` / ``skipped``
(hashes), ``…:pages:covered`` (set), ``…:pages:forbidden`` (list); all expire
:data:`PAGES_TTL_SECONDS` after the last page kept, so a paged scan whose every task was
lost and that no later scan resumed starts over.

Resuming: a killed worker's page task comes back when Redis redelivers it (acks late) or with
the next scan beat sends; either lists the page after the last one kept — the page being
listed when the worker died is listed again, nothing before it. A continuation whose page was
listed already (a duplicate delivery) is *stale* and returns at once, so one scan never forks
into two chains of tasks. A listing of one page keeps nothing in Redis.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ncindex.nextcloud.client import NextcloudClient
from ncindex.redis_replies import as_text
from ncindex.sources.base import Context, Listing, Seen, Source
from ncindex.sync.reconcile import ScanState

PAGES_TTL_SECONDS = 86_400
"""How long the pages of an unfinished listing are kept after the last one (seconds)."""


@dataclass(frozen=True, slots=True)
class PageProgress:
    """Where a paged listing stands: ``pages`` listed and kept, ``requests`` made by them,
    ``since`` the Unix time the listing began, and what the next page resumes from (the
    source's ``cursor``, ``full_walk``, ``external_walk``, ``marker``, and the folders
    ``unreachable`` and to ``revisit``: :class:`~ncindex.sources.base.Listing`)."""

    pages: int
    requests: int
    since: float
    cursor: Any
    full_walk: bool
    external_walk: bool
    marker: int | None
    # absent from the progress of a listing begun before they were kept
    unreachable: list[str] = field(default_factory=list)
    revisit: list[str] = field(default_factory=list)


class ListingPages:
    """The pages of one user's and doc type's listing kept in Redis (see the module
    docstring); implements :class:`ncindex.sync.reconcile.Pages`.

    ``limit`` is the requests one page may make (``reconcile_page_requests``); ``page`` the
    page number a continuation task was sent for (``None``: a scan requested by beat or by
    hand, which resumes whatever listing is unfinished, or starts one)."""

    def __init__(self, state: ScanState, limit: int, page: int | None = None) -> None:
        self.redis = state.redis
        self.key = state.base + ":pages"
        self.limit = limit
        self.page = page
        self._progress = self._read()
        self._pages = 0 if self._progress is None else self._progress.pages

    def _part(self, name: str) -> str:
        return f"{self.key}:{name}"

    def _read(self) -> PageProgress | None:
        """The progress kept, or ``None`` (none, or unreadable: the listing starts over)."""
        raw = self.redis.get(self.key)
        if raw is None:
            return None
        try:
            return PageProgress(**json.loads(raw))
        except (TypeError, ValueError):
            self.discard()
            return None

    def stale(self) -> bool:
        """A continuation whose page is not the next one to list (listed already, or the
        listing finished or was discarded meanwhile)."""
        if self.page is None:
            return False
        return self._progress is None or self._progress.pages != self.page

    def first(self) -> bool:
        """Whether no page is kept: the next page starts the listing."""
        return self._progress is None

    def pages(self) -> int:
        """Pages listed so far, the last one included."""
        return self._pages

    def next(
        self, source: Source, ctx: Context, client: NextcloudClient, state: ScanState
    ) -> tuple[Listing, Listing | None]:
        """List the next page (at most :attr:`limit` requests); returns it, and the whole
        listing once it is complete (``None`` while not: the page was kept). Raises what
        the source's listing raises (nothing is kept then)."""
        since = time.time()
        progress = self._progress
        visited: dict[str, str] = {}
        resume = None
        if progress is not None:
            folders = {
                as_text(k): as_text(v) for k, v in self.redis.hgetall(self._part("folders")).items()
            }
            visited = dict(folders)
            resume = Listing(
                folders=folders,
                full_walk=progress.full_walk,
                external_walk=progress.external_walk,
                marker=progress.marker,
                cursor=progress.cursor,
                unreachable=set(progress.unreachable),
                revisit=set(progress.revisit),
            )
        page = source.list(ctx, client, state, resume, self.limit)
        self._pages += 1
        if progress is None and page.cursor is None:
            return page, page
        relisted = source.relists_changed
        if page.cursor is not None:
            self._keep(progress, page, visited, since, relisted)
            return page, None
        assert progress is not None
        return page, self._whole(progress, page, relisted)

    def _keep(
        self,
        progress: PageProgress | None,
        page: Listing,
        visited: dict[str, str],
        since: float,
        relisted: bool,
    ) -> None:
        """Add ``page`` to what is kept and advance the progress, in one transaction:
        ``visited`` the folder etags kept before it, of which the page may have changed some
        (a folder above an external storage is kept unsettled once that storage is found,
        :data:`ncindex.sources.file.UNSETTLED`); ``relisted``: the source's
        :attr:`~ncindex.sources.base.Source.relists_changed` (:func:`_merge`)."""
        docs = dict(page.docs)
        if progress is not None and docs:
            ids = list(docs)
            for doc_id, raw in zip(ids, self.redis.hmget(self._part("docs"), ids), strict=True):
                if raw is not None:
                    docs[doc_id] = _merge(_decode(doc_id, raw), docs[doc_id], relisted)
        after = PageProgress(
            pages=self._pages,
            requests=(0 if progress is None else progress.requests) + page.requests,
            since=since if progress is None else progress.since,
            cursor=page.cursor,
            full_walk=page.full_walk,
            external_walk=page.external_walk,
            marker=page.marker,
            unreachable=sorted(page.unreachable),
            revisit=sorted(page.revisit),
        )
        pipe = self.redis.pipeline(transaction=True)
        if docs:
            pipe.hset(self._part("docs"), mapping={i: _encode(s) for i, s in docs.items()})
        if any(visited.get(p) != e for p, e in page.folders.items()):
            pipe.hset(
                self._part("folders"),
                mapping={p: e for p, e in page.folders.items() if visited.get(p) != e},
            )
        if page.covered:
            pipe.sadd(self._part("covered"), *page.covered)
        if page.forbidden:
            pipe.rpush(self._part("forbidden"), *page.forbidden)
        if page.skipped:
            pipe.hset(self._part("skipped"), mapping={k: v for k, v in page.skipped.items()})
        pipe.set(self.key, json.dumps(asdict(after)))
        for key in (self.key, *(self._part(n) for n in _PARTS)):
            pipe.expire(key, PAGES_TTL_SECONDS)
        pipe.execute()
        self._progress = after

    def _whole(self, progress: PageProgress, page: Listing, relisted: bool) -> Listing:
        """The pages kept and the last ``page`` (which holds every folder listed) as one
        listing; ``relisted`` as for :meth:`_keep`."""
        kept = {as_text(k): as_text(v) for k, v in self.redis.hgetall(self._part("docs")).items()}
        # one JSON document of every entry: a hundred thousand loads() calls cost seconds
        rows = json.loads("[" + ",".join(kept.values()) + "]")
        docs = {
            k: Seen(k, etag, path, tuple(also_at))
            for k, (etag, path, also_at) in zip(kept, rows, strict=True)
        }
        if page.names_all:  # the last page names every document there is (Notes)
            docs = {k: v for k, v in docs.items() if k in page.docs}
        for doc_id, seen in page.docs.items():
            old = docs.get(doc_id)
            docs[doc_id] = seen if old is None else _merge(old, seen, relisted)
        covered = {as_text(m) for m in self.redis.smembers(self._part("covered"))}
        forbidden = [as_text(m) for m in self.redis.lrange(self._part("forbidden"), 0, -1)]
        skipped = {
            as_text(k): as_text(v) for k, v in self.redis.hgetall(self._part("skipped")).items()
        }
        return Listing(
            docs=docs,
            forbidden=forbidden + page.forbidden,
            covered=covered | page.covered,
            folders=page.folders,
            marker=page.marker,
            requests=progress.requests + page.requests,
            full_walk=page.full_walk,
            external_walk=page.external_walk,
            skipped=None if page.skipped is None else skipped | page.skipped,
            since=progress.since,
            unreachable=page.unreachable,
            revisit=page.revisit,
        )

    def discard(self) -> None:
        """Forget the pages kept (the scan is over, or must start again)."""
        self.redis.delete(self.key, *(self._part(n) for n in _PARTS))


_PARTS = ("docs", "folders", "covered", "forbidden", "skipped")


def _encode(seen: Seen) -> str:
    return json.dumps([seen.etag, seen.path, list(seen.also_at)])


def _decode(doc_id: str, raw: bytes | str) -> Seen:
    etag, path, also_at = json.loads(raw)
    return Seen(doc_id, etag, path, tuple(also_at))


def _merge(old: Seen, new: Seen, relisted: bool) -> Seen:
    """One document listed on two pages, ``new`` on the later one: a Notes id-only entry
    never replaces a full one; with ``relisted``
    (:attr:`~ncindex.sources.base.Source.relists_changed`: a note edited or renamed after its
    chunk comes again whole, with its new etag and ``internalPath``) the later full entry
    replaces the earlier, as it does in one listing; otherwise a file listed at two paths
    keeps both (as one listing keeps them)."""
    if new.etag is None and new.path is None:
        return old
    if relisted or (old.etag is None and old.path is None):
        return new
    more = [p for p in (new.path, *new.also_at) if p is not None and not old.at(p)]
    return replace(old, also_at=(*old.also_at, *more)) if more else old
