"""Verify-on-read: re-check search candidates against Nextcloud as the searching user.

Qdrant proposes, Nextcloud disposes (DESIGN §1, §9). Each doc_type has the cheapest
authoritative check (DESIGN §4 table); a candidate the user can no longer see is dropped
(404, 403; a file listed without read permission), a transient error keeps it (fail-open)
and is counted, an unknown doc_type keeps it with a warning. Checks run concurrently up to
``verify_concurrency``.

A file or note the user can still see is then held to the index rules as they are now
(:mod:`ncindex.sources.eligibility`: include/exclude globs on its current path, the MIME list
for files, the tag gate and the excluded tags): one that the rules exclude is dropped as
``ineligible``, counted apart from the ones that are gone. Tag membership is fetched once per
search (:class:`TagMembership`: one ``PROPFIND`` of the system tags, then one ``REPORT
oc:filter-files`` per gate or excluded tag, as the searching user) and intersected with the
candidates, so a file untagged, or tagged with an excluded tag, leaves the results at once
even when the tag's webhook was lost. Deck cards and News items have no such rules.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
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
from ncindex.nextcloud.apps import find_news_item, get_deck_card
from ncindex.nextcloud.client import NextcloudClient
from ncindex.sources.eligibility import Eligibility
from ncindex.telemetry import VERIFICATIONS

log = structlog.get_logger(__name__)


class Verdict(StrEnum):
    """Result of one check."""

    KEPT = "kept"
    DROPPED = "dropped"  # gone for the user: deleted, unshared, unreadable
    INELIGIBLE = "ineligible"  # still readable, but the index rules exclude it now
    ERROR = "error"  # transient failure: kept (fail-open) and counted
    UNVERIFIED = "unverified"  # no verifier for the doc_type: kept with a warning


@dataclass(slots=True)
class Checked:
    """A verdict and, when the check reveals it, the document's current path for the user
    and MIME type (files); ``reason`` why an ``INELIGIBLE`` one is excluded (an
    :class:`~ncindex.sources.eligibility.Eligibility` reason)."""

    verdict: Verdict
    path: str | None = None
    mime_type: str | None = None
    reason: str | None = None


#: A verifier checks one candidate (its best chunk's payload) as the client's user.
Verifier = Callable[[NextcloudClient, dict[str, Any]], Checked]


def verify_note(client: NextcloudClient, payload: dict[str, Any]) -> Checked:
    """``GET /notes/{id}`` (conditional on the indexed etag; 304 and 200 both mean readable;
    404 means gone)."""
    client.get_note(int(payload["doc_id"]), etag=payload.get("etag"))
    return Checked(Verdict.KEPT)


def verify_file(client: NextcloudClient, payload: dict[str, Any]) -> Checked:
    """WebDAV SEARCH by file id in the user's view (empty ⇒ gone); gives the current path. A
    file listed without read permission (an access-control rule blocks it) is dropped."""
    entry = client.find_by_id(int(payload["doc_id"]))
    if not entry.readable:
        return Checked(Verdict.DROPPED)
    return Checked(Verdict.KEPT, entry.path, entry.content_type)


def verify_deck_card(client: NextcloudClient, payload: dict[str, Any]) -> Checked:
    """Deck card GET (conditional on the indexed etag); Deck answers 403 for a card that is
    missing, deleted or not visible, which means gone. A payload without ``board_id`` and
    ``stack_id`` cannot be checked (``UNVERIFIED``)."""
    board, stack = payload.get("board_id"), payload.get("stack_id")
    if board is None or stack is None:
        log.warning("deck_card_without_board", doc_key=payload.get("doc_key"))
        return Checked(Verdict.UNVERIFIED)
    get_deck_card(client, int(board), int(stack), int(payload["doc_id"]), etag=payload.get("etag"))
    return Checked(Verdict.KEPT)


def verify_news_item(client: NextcloudClient, payload: dict[str, Any]) -> Checked:
    """One News item-list request below the item's id (no single-item GET exists); a
    payload without ``feed_id`` cannot be checked (``UNVERIFIED``)."""
    feed = payload.get("feed_id")
    if feed is None:
        log.warning("news_item_without_feed", doc_key=payload.get("doc_key"))
        return Checked(Verdict.UNVERIFIED)
    find_news_item(client, int(payload["doc_id"]), int(feed))
    return Checked(Verdict.KEPT)


VERIFIERS: dict[str, Verifier] = {
    DocType.NOTE.value: verify_note,
    DocType.FILE.value: verify_file,
    DocType.DECK_CARD.value: verify_deck_card,
    DocType.NEWS_ITEM.value: verify_news_item,
}
"""doc_type → its verifier; every :class:`DocType` has one (a test enforces it)."""


@dataclass(slots=True)
class VerificationCounts:
    """Counts reported with every search response: ``dropped`` are gone for the user,
    ``ineligible`` readable but excluded by the index rules now; ``kept`` is the rest."""

    checked: int = 0
    kept: int = 0
    dropped: int = 0
    ineligible: int = 0
    errors: int = 0
    unverified: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counts for the response body."""
        return {
            "checked": self.checked,
            "kept": self.kept,
            "dropped": self.dropped,
            "ineligible": self.ineligible,
            "errors": self.errors,
            "unverified": self.unverified,
        }


#: Doc types the index rules (globs, MIME list, tags) apply to.
RULED_TYPES = frozenset({DocType.FILE.value, DocType.NOTE.value})


class TagMembership:
    """The ids of the files carrying each configured gate and excluded tag, as one searching
    user sees them: fetched on first need — one ``PROPFIND /remote.php/dav/systemtags/`` for
    the tag ids, then one ``REPORT oc:filter-files`` per tag (nextcloud/server
    ``apps/dav/lib/Connector/Sabre/FilesReportPlugin.php``) — and kept for the rest of the
    search (every round and every verifier thread share it). A configured tag that does not
    exist, or that the user cannot see, tags nothing. Raises what the client raises
    (``TransientError`` when Nextcloud is unreachable: the caller keeps the candidates)."""

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
        same one for every round of a search; default: one for this call)."""
        tags = membership if membership is not None else self.membership()
        results = list(self._pool.map(lambda p: self._one(client, p, tags), candidates))
        for payload, checked in zip(candidates, results, strict=True):
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

    def _one(
        self, client: NextcloudClient, payload: dict[str, Any], tags: TagMembership | None
    ) -> Checked:
        verifier = self.verifiers.get(payload.get("doc_type", ""))
        if verifier is None:
            log.warning("no_verifier", doc_type=payload.get("doc_type"))
            return Checked(Verdict.UNVERIFIED)
        try:
            checked = verifier(client, payload)
            if checked.verdict is Verdict.KEPT and tags is not None:
                return self._rules(client, payload, checked, tags)
            return checked
        except (NotFound, Forbidden):  # gone, or Nextcloud refuses this user (DESIGN §9)
            return Checked(Verdict.DROPPED)
        except NextcloudAuthError:
            raise  # the caller's own credentials failed: the whole search is unauthenticated
        except (TransientError, NextcloudProtocolError, KeyError, TypeError, ValueError) as exc:
            # Unreachable, or an answer (or payload) of the wrong shape: keep it (fail-open).
            log.warning("verify_failed", doc_key=payload.get("doc_key"), error=str(exc))
            return Checked(Verdict.ERROR)

    def _rules(
        self,
        client: NextcloudClient,
        payload: dict[str, Any],
        checked: Checked,
        tags: TagMembership,
    ) -> Checked:
        """``checked`` (kept), or ``INELIGIBLE`` with the reason when the index rules exclude
        the file or note now: globs on its current path (as a SEARCH by file id gives it; for
        a note asked only while the globs can exclude a path), the MIME list (files), the tag
        gate and excluded tags."""
        doc_type = payload.get("doc_type")
        if doc_type not in RULED_TYPES or self.eligibility is None:
            return checked
        assert client.user is not None
        if doc_type == DocType.NOTE.value and self.eligibility.has_path_rules:
            # a note's current path: the Notes API gives only its category, so ask WebDAV by
            # file id (a note's id is its file's) — one request, only while globs can exclude
            checked.path = client.find_by_id(int(payload["doc_id"])).path
        path = checked.path or (payload.get("paths") or {}).get(client.user)
        if path is None:
            return checked  # nothing to judge the globs on: kept as verified
        names = tags.tags_of(client, int(payload["doc_id"]))
        if doc_type == DocType.FILE.value:
            mime = checked.mime_type or payload.get("mime_type")
            reason = self.eligibility.file_reason(path, mime, names)
        else:
            reason = self.eligibility.path_and_tags_reason(path, names)
        if reason is None:
            return checked
        return Checked(Verdict.INELIGIBLE, checked.path, checked.mime_type, reason)

    def close(self) -> None:
        """Stop the thread pool."""
        self._pool.shutdown(wait=False)
