"""Verify-on-read: re-check search candidates against Nextcloud as the searching user.

Qdrant proposes, Nextcloud disposes (DESIGN §1, §9). Each doc_type has the cheapest
authoritative check (DESIGN §4 table), its source's :meth:`~ncindex.sources.base.Source.verify`
(:data:`VERIFIERS`); a candidate the user can no longer see is dropped
(404, 403; a file listed without read permission), a transient error keeps it (fail-open)
and is counted, an unknown doc_type keeps it with a warning. Checks run concurrently up to
``verify_concurrency``. What the checks of a page share is asked once, beside them
(:meth:`~ncindex.sources.base.Source.page_requests`: a Deck board's GET for its live stacks),
and its answer settles each candidate its own check kept
(:meth:`~ncindex.sources.base.Source.settle`: a card of a deleted stack is ``ineligible``).

A file or note the user can still see is then held to the index rules as they are now
(:mod:`ncindex.sources.eligibility`: include/exclude globs on its current path, the MIME list
for files, the tag gate and the excluded tags): one that the rules exclude is dropped as
``ineligible``, counted apart from the ones that are gone. Tag membership is fetched once per
search (:class:`TagMembership`: one ``PROPFIND`` of the system tags, then one ``REPORT
oc:filter-files`` per gate or excluded tag, as the searching user) and intersected with the
candidates, so a file untagged, or tagged with an excluded tag, leaves the results at once
even when the tag's webhook was lost. Which doc types the rules apply to, and which rules, is
their source's (:attr:`~ncindex.sources.base.Source.ruled`,
:meth:`~ncindex.sources.base.Source.rule_reason`); Deck cards and News items have none.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog

from ncindex.documents import DocType
from ncindex.errors import (
    Forbidden,
    NextcloudAuthError,
    NextcloudProtocolError,
    NotFound,
    TransientError,
)
from ncindex.nextcloud.client import NextcloudClient
from ncindex.sources.base import Answer, Checked, PageRequest, Source, Verdict
from ncindex.sources.eligibility import Eligibility
from ncindex.sources.registry import SOURCES
from ncindex.telemetry import VERIFICATIONS

log = structlog.get_logger(__name__)


#: A verifier checks one candidate (its best chunk's payload) as the client's user.
Verifier = Callable[[NextcloudClient, dict[str, Any]], Checked]

VERIFIERS: dict[str, Verifier] = {t.value: s.verify for t, s in SOURCES.items()}
"""doc_type → its verifier (:meth:`ncindex.sources.base.Source.verify`); every
:class:`DocType` has one (a test enforces it)."""

BATCHED: dict[str, str] = {
    t.value: s.verified_with for t, s in SOURCES.items() if s.verified_with is not None
}
"""doc_type → the request its candidates are checked in, several at a time and with those of
the other doc types of the same request (:attr:`ncindex.sources.base.Source.verified_with`,
:meth:`~ncindex.sources.base.Source.verify_many`): files and notes, one WebDAV SEARCH."""


def _source_of(payload: dict[str, Any]) -> Source | None:
    """The source of a candidate's doc type (``None``: a doc type this code does not know)."""
    try:
        return SOURCES[DocType(payload.get("doc_type", ""))]
    except ValueError:
        return None


def _raise(exc: Exception) -> Checked:
    """Raise ``exc`` (a failed batch's error, given to each of its candidates)."""
    raise exc


def _given(checked: Checked) -> Checked:
    """``checked`` (a batch's verdict for one candidate)."""
    return checked


@dataclass(slots=True)
class VerificationCounts:
    """Counts reported with every search response: ``dropped`` are gone for the user,
    ``ineligible`` readable but excluded by the index rules now; ``kept`` is the rest, of
    which ``errors`` and ``unverified`` were kept unconfirmed and ``withheld`` (counted by the
    search, :class:`~ncindex.search.service.SearchService`) were not shown for that."""

    checked: int = 0
    kept: int = 0
    dropped: int = 0
    ineligible: int = 0
    errors: int = 0
    unverified: int = 0
    withheld: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counts for the response body."""
        return {
            "checked": self.checked,
            "kept": self.kept,
            "dropped": self.dropped,
            "ineligible": self.ineligible,
            "errors": self.errors,
            "unverified": self.unverified,
            "withheld": self.withheld,
        }


class TagMembership:
    """The ids of the files carrying each configured gate and excluded tag, as one searching
    user sees them: fetched on first need — one ``PROPFIND /remote.php/dav/systemtags/`` for
    the tag ids, then one ``REPORT oc:filter-files`` per tag (nextcloud/server
    ``apps/dav/lib/Connector/Sabre/FilesReportPlugin.php``) — and kept for the rest of the
    search (every round and every verifier thread share it). A configured tag that does not
    exist, or that the user cannot see, tags nothing. Raises what the client raises
    (``TransientError`` when Nextcloud is unreachable: the caller keeps the candidates).

    Not the ``nc:system-tags`` of the page's SEARCH, although that answer is already at hand:
    in an answer of several files, nextcloud/server
    ``apps/dav/lib/SystemTag/SystemTagPlugin.php`` ``getTagsForFile`` keys the tags cached
    from earlier files by their place in the file's tag list and the ones it fetches
    (``SystemTagManager::getTagsByIds``) by their id, then merges them with ``+=``, which
    drops a fetched tag whose id equals a cached one's place: a file can be listed without a
    tag it carries (an excluded tag missed, a gate tag lost). The listing does not go
    through that code."""

    def __init__(self, eligibility: Eligibility) -> None:
        self.names = sorted(eligibility.required_tags | eligibility.excluded_tags)
        self._files: dict[str, set[int]] | None = None
        self._error: Exception | None = None
        self._lock = threading.Lock()
        #: requests made to Nextcloud (benchmarks read it)
        self.requests = 0

    def fetch(self, client: NextcloudClient) -> None:
        """Fetch the membership now, unless fetched already (the search calls it in the
        verifier pool while it embeds and queries, so the requests overlap that work). A
        failure is kept and raised again by :meth:`tags_of`."""
        with self._lock:
            if self._files is not None or not self.names:
                return
            try:
                ids = client.system_tag_ids()
                self.requests += 1
                files: dict[str, set[int]] = {}
                for name in self.names:
                    files[name] = client.tagged_ids(ids[name]) if name in ids else set()
                    self.requests += name in ids
            except Exception as exc:  # re-raised where the verdict is made
                self._error = exc
                return
            self._files = files

    def tags_of(self, client: NextcloudClient, file_id: int) -> list[str]:
        """The configured tags (case-folded names) file ``file_id`` carries."""
        if not self.names:
            return []
        self.fetch(client)
        if self._files is None:
            error, self._error = self._error, None
            assert error is not None
            raise error
        return [name for name in self.names if file_id in self._files[name]]


def _judged(payload: dict[str, Any], check: Callable[[], Checked]) -> Checked:
    """``check()``, with the errors of a check turned into verdicts: ``NotFound``/``Forbidden``
    drop the candidate, a transient error or a wrong answer keeps it (``ERROR``), a payload
    this code cannot read drops it; ``NextcloudAuthError`` (the caller's own credentials
    failed) is raised."""
    try:
        return check()
    except (NotFound, Forbidden):  # gone, or Nextcloud refuses this user (DESIGN §9)
        return Checked(Verdict.DROPPED)
    except NextcloudAuthError:
        raise  # the caller's own credentials failed: the whole search is unauthenticated
    except (TransientError, NextcloudProtocolError) as exc:
        # Nextcloud unreachable, or an answer of the wrong shape: keep it (fail-open)
        log.warning("verify_failed", doc_key=payload.get("doc_key"), error=str(exc))
        return Checked(Verdict.ERROR)
    except (KeyError, TypeError, ValueError) as exc:
        # a payload this code cannot read, or a bug in a check: nobody has checked the
        # result, so it is not shown (fail-closed); its re-check re-reads Nextcloud
        log.error("verify_broken", doc_key=payload.get("doc_key"), error=repr(exc))
        return Checked(Verdict.DROPPED)


class _Sent(Exception):
    """Raised to :meth:`Checks.verdicts`' first settling pass by the answer of a request the
    page did not make, just sent: that candidate is settled again once every such request of
    the page is on its way."""


class Checks:
    """The checks of a batch of candidates under way (:meth:`VerifyOnRead.start`), and the
    requests they share (:meth:`~ncindex.sources.base.Source.page_requests`, by key);
    ``send`` makes a request the settling asks for that the page did not make (in the
    verifier pool, as the searching user)."""

    def __init__(
        self,
        candidates: list[dict[str, Any]],
        batches: list[tuple[list[int], Future[list[Checked]]]],
        singles: list[tuple[int, Future[Checked]]],
        shared: dict[str, Future[Any]] | None = None,
        send: Callable[[PageRequest], Future[Any]] | None = None,
    ) -> None:
        self._candidates = candidates
        self._batches = batches
        self._singles = singles
        self._shared = shared or {}
        self._send = send
        self._sent: set[str] = set()  # keys of the requests the settling asked for

    def _answer(self, key: str, request: PageRequest | None = None, *, wait: bool = True) -> Any:
        """The answer of the shared request ``key`` (raises what it raised); one the page
        did not make is sent now with ``request`` and kept for the page's other candidates
        (:class:`~ncindex.sources.base.Answer`; ``KeyError`` without ``request``). Without
        ``wait``, :class:`_Sent` for such a request not answered yet."""
        if key not in self._shared and request is not None and self._send is not None:
            self._shared[key] = self._send(request)
            self._sent.add(key)
        if not wait and key in self._sent and not self._shared[key].done():
            raise _Sent(key)
        return self._shared[key].result()

    def _settled(self, i: int, checked: Checked, answer: Answer) -> Checked:
        """Candidate ``i``'s verdict ``checked``, settled by its source with ``answer`` when
        it is kept (raises :class:`_Sent` as ``answer`` does)."""
        payload = self._candidates[i]
        source = _source_of(payload)
        if checked.verdict is not Verdict.KEPT or source is None:
            return checked
        return _judged(payload, partial(source.settle, payload, checked, answer))

    def verdicts(self, counts: VerificationCounts) -> list[Checked]:
        """Wait for the checks: one verdict per candidate, in order, a kept one settled by
        its source with the shared requests' answers
        (:meth:`~ncindex.sources.base.Source.settle`); ``counts`` is updated. Raises
        ``NextcloudAuthError`` if the caller's own credentials failed."""
        verdicts: dict[int, Checked] = {}
        for idx, future in self._batches:
            verdicts.update(zip(idx, future.result(), strict=True))
        for i, single in self._singles:
            verdicts[i] = single.result()
        results = [verdicts[i] for i in range(len(self._candidates))]
        if self._shared:
            # a first pass sends every request the settling asks for that the page did not
            # make, and settles the candidates that asked for none; those that did are settled
            # once all are on their way: they run at once in the pool, not one after another
            first = partial(self._answer, wait=False)
            later: list[int] = []
            for i in range(len(self._candidates)):
                try:
                    results[i] = self._settled(i, results[i], first)
                except _Sent:
                    later.append(i)
            for i in later:
                results[i] = self._settled(i, results[i], self._answer)
        for payload, checked in zip(self._candidates, results, strict=True):
            counts.checked += 1
            if checked.verdict is Verdict.DROPPED:
                counts.dropped += 1
            elif checked.verdict is Verdict.INELIGIBLE:
                counts.ineligible += 1
            elif checked.verdict is Verdict.ERROR:
                counts.errors += 1
            elif checked.verdict is Verdict.UNVERIFIED:
                counts.unverified += 1
            if checked.verdict not in (Verdict.DROPPED, Verdict.INELIGIBLE):
                counts.kept += 1
            VERIFICATIONS.labels(payload.get("doc_type", "?"), checked.verdict.value).inc()
        return results


class VerifyOnRead:
    """Runs the verifiers for a batch of candidates with a shared thread pool, then holds
    files and notes to ``eligibility`` (the index rules; ``None``: not checked)."""

    def __init__(
        self,
        concurrency: int,
        verifiers: dict[str, Verifier] | None = None,
        eligibility: Eligibility | None = None,
    ) -> None:
        self.verifiers = VERIFIERS if verifiers is None else verifiers
        #: doc type → the request its candidates are checked together in (only with the
        #: sources' own verifiers: a caller's ``verifiers`` are called one candidate at a time)
        self.batched = BATCHED if verifiers is None else {}
        #: whether the sources' shared requests are made (only with their own verifiers)
        self.shared = verifiers is None
        self.eligibility = eligibility
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="verify")

    def membership(self, client: NextcloudClient | None = None) -> TagMembership | None:
        """A fresh :class:`TagMembership` for one search (``None`` without rules); with
        ``client``, its fetch starts at once in the verifier pool (it overlaps the query)."""
        if self.eligibility is None:
            return None
        membership = TagMembership(self.eligibility)
        if client is not None and membership.names:
            self._pool.submit(membership.fetch, client)
        return membership

    def check(
        self,
        client: NextcloudClient,
        candidates: Sequence[dict[str, Any]],
        counts: VerificationCounts,
        membership: TagMembership | None = None,
    ) -> list[Checked]:
        """One verdict per candidate payload (deduplicated by the caller on ``doc_key``), in
        order; ``counts`` is updated. ``membership`` is the search's tag membership (pass the
        same one for every round of a search; default: one for this call).

        The checks run concurrently: two or more candidates checked by the same kind of
        request (:attr:`~ncindex.sources.base.Source.verified_with`: files and notes, one
        WebDAV SEARCH) go together, the others one request each. :meth:`start` sends them
        and returns at once, for a caller with work to do meanwhile."""
        return self.start(client, candidates, membership).verdicts(counts)

    def start(
        self,
        client: NextcloudClient,
        candidates: Sequence[dict[str, Any]],
        membership: TagMembership | None = None,
    ) -> Checks:
        """The checks of :meth:`check`, sent in the verifier pool; their verdicts are
        :meth:`Checks.verdicts`."""
        tags = membership if membership is not None else self.membership()
        groups: dict[str, list[int]] = {}
        for i, payload in enumerate(candidates):
            request = self.batched.get(payload.get("doc_type", ""))
            if request is not None:
                groups.setdefault(request, []).append(i)
        shared = self._shared(client, candidates)
        together = [idx for idx in groups.values() if len(idx) > 1]
        alone = sorted(set(range(len(candidates))) - {i for idx in together for i in idx})
        batches = [
            (idx, self._pool.submit(self._many, client, [candidates[i] for i in idx], tags))
            for idx in together
        ]
        singles = [(i, self._pool.submit(self._one, client, candidates[i], tags)) for i in alone]
        send = partial(self._send, client)
        return Checks(list(candidates), batches, singles, shared, send)

    def _shared(
        self, client: NextcloudClient, candidates: Sequence[dict[str, Any]]
    ) -> dict[str, Future[Any]]:
        """The requests the candidates' checks share
        (:meth:`~ncindex.sources.base.Source.page_requests`), sent in the pool before the
        checks (nothing in the pool waits for them: :meth:`Checks.verdicts` does)."""
        if not self.shared:
            return {}
        by_source: dict[DocType, list[dict[str, Any]]] = {}
        for payload in candidates:
            source = _source_of(payload)
            if source is not None:
                by_source.setdefault(source.doc_type, []).append(payload)
        requests: dict[str, PageRequest] = {}
        for doc_type, payloads in by_source.items():
            try:
                requests.update(SOURCES[doc_type].page_requests(payloads))
            except (KeyError, TypeError, ValueError) as exc:  # a payload it cannot read
                log.error("page_requests_broken", doc_type=doc_type.value, error=repr(exc))
        return {key: self._pool.submit(request, client) for key, request in requests.items()}

    def _send(self, client: NextcloudClient, request: PageRequest) -> Future[Any]:
        """``request`` sent in the pool, as ``client``'s user."""
        return self._pool.submit(request, client)

    def _many(
        self,
        client: NextcloudClient,
        payloads: list[dict[str, Any]],
        tags: TagMembership | None,
    ) -> list[Checked]:
        """Candidates checked by one kind of request in one go (the ``verify_many`` of the
        first one's source, :attr:`~ncindex.sources.base.Source.verified_with`), then
        each held to the rules as :meth:`_one` does; when the batch fails, each gets the
        verdict its failure gives one candidate (a payload the source cannot read: each is
        checked alone, so only that one is dropped)."""
        source = SOURCES[DocType(payloads[0]["doc_type"])]
        try:
            checked = source.verify_many(client, payloads)
        except (KeyError, TypeError, ValueError):
            return [self._one(client, p, tags) for p in payloads]
        except NextcloudAuthError:
            raise
        except Exception as failure:  # the verdict of each candidate, as one alone would get
            return [self._one(client, p, tags, partial(_raise, failure)) for p in payloads]
        return [
            self._one(client, p, tags, partial(_given, c))
            for p, c in zip(payloads, checked, strict=True)
        ]

    def _one(
        self,
        client: NextcloudClient,
        payload: dict[str, Any],
        tags: TagMembership | None,
        check: Callable[[], Checked] | None = None,
    ) -> Checked:
        """The verdict of one candidate: ``check()`` (default: its doc type's verifier),
        held to the rules when kept, with the check's errors turned into verdicts."""
        if check is None:
            verifier = self.verifiers.get(payload.get("doc_type", ""))
            if verifier is None:
                log.warning("no_verifier", doc_type=payload.get("doc_type"))
                return Checked(Verdict.UNVERIFIED)
            check = partial(verifier, client, payload)
        return _judged(payload, partial(self._ruled, client, payload, check, tags))

    def _ruled(
        self,
        client: NextcloudClient,
        payload: dict[str, Any],
        check: Callable[[], Checked],
        tags: TagMembership | None,
    ) -> Checked:
        """``check()``, held to the rules (:meth:`_rules`) when kept."""
        checked = check()
        if checked.verdict is Verdict.KEPT and tags is not None:
            return self._rules(client, payload, checked, tags)
        return checked

    def _rules(
        self,
        client: NextcloudClient,
        payload: dict[str, Any],
        checked: Checked,
        tags: TagMembership,
    ) -> Checked:
        """``checked`` (kept), or ``INELIGIBLE`` with the reason when the index rules exclude
        the file or note now: globs on its current path (as the SEARCH by file id gave it),
        the MIME list (files), the tag gate and excluded tags."""
        source = _source_of(payload)
        if source is None or not source.ruled or self.eligibility is None:
            return checked
        assert client.user is not None
        path = checked.path or (payload.get("paths") or {}).get(client.user)
        if path is None:
            return checked  # nothing to judge the globs on: kept as verified
        names = tags.tags_of(client, int(payload["doc_id"]))
        mime = checked.mime_type or payload.get("mime_type")
        reason = source.rule_reason(self.eligibility, path, mime, names)
        if reason is None:
            return checked
        return Checked(Verdict.INELIGIBLE, checked.path, checked.mime_type, reason)

    def close(self) -> None:
        """Stop the thread pool."""
        self._pool.shutdown(wait=False)
