"""Verify-on-read: re-check search candidates against Nextcloud as the searching user.

Qdrant proposes, Nextcloud disposes (DESIGN §1, §9). Each doc_type has the cheapest
authoritative check (DESIGN §4 table); a candidate the user can no longer see is dropped
(404, 403; a file listed without read permission), a transient error keeps it (fail-open)
and is counted, an unknown doc_type keeps it with a warning. Checks run concurrently up to
``verify_concurrency``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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
from ncindex.telemetry import VERIFICATIONS

log = structlog.get_logger(__name__)


class Verdict(StrEnum):
    """Result of one check."""

    KEPT = "kept"
    DROPPED = "dropped"
    ERROR = "error"  # transient failure: kept (fail-open) and counted
    UNVERIFIED = "unverified"  # no verifier for the doc_type: kept with a warning


@dataclass(slots=True)
class Checked:
    """A verdict and, when the check reveals it, the document's current path for the user."""

    verdict: Verdict
    path: str | None = None


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
    return Checked(Verdict.KEPT, entry.path)


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
    find_news_item(client, int(feed), int(payload["doc_id"]))
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
    """Counts reported with every search response."""

    checked: int = 0
    kept: int = 0
    dropped: int = 0
    errors: int = 0
    unverified: int = 0
    dropped_keys: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        """The counts for the response body."""
        return {
            "checked": self.checked,
            "kept": self.kept,
            "dropped": self.dropped,
            "errors": self.errors,
            "unverified": self.unverified,
        }


class VerifyOnRead:
    """Runs the verifiers for a batch of candidates with a shared thread pool."""

    def __init__(self, concurrency: int, verifiers: dict[str, Verifier] | None = None) -> None:
        self.verifiers = VERIFIERS if verifiers is None else verifiers
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="verify")

    def check(
        self,
        client: NextcloudClient,
        candidates: Sequence[dict[str, Any]],
        counts: VerificationCounts,
    ) -> list[Checked]:
        """One verdict per candidate payload (deduplicated by the caller on ``doc_key``), in
        order; ``counts`` is updated."""
        results = list(self._pool.map(lambda p: self._one(client, p), candidates))
        for payload, checked in zip(candidates, results, strict=True):
            counts.checked += 1
            if checked.verdict is Verdict.DROPPED:
                counts.dropped += 1
                counts.dropped_keys.append(payload["doc_key"])
            elif checked.verdict is Verdict.ERROR:
                counts.errors += 1
            elif checked.verdict is Verdict.UNVERIFIED:
                counts.unverified += 1
            if checked.verdict is not Verdict.DROPPED:
                counts.kept += 1
            VERIFICATIONS.labels(payload.get("doc_type", "?"), checked.verdict.value).inc()
        return results

    def _one(self, client: NextcloudClient, payload: dict[str, Any]) -> Checked:
        verifier = self.verifiers.get(payload.get("doc_type", ""))
        if verifier is None:
            log.warning("no_verifier", doc_type=payload.get("doc_type"))
            return Checked(Verdict.UNVERIFIED)
        try:
            return verifier(client, payload)
        except (NotFound, Forbidden):  # gone, or Nextcloud refuses this user (DESIGN §9)
            return Checked(Verdict.DROPPED)
        except NextcloudAuthError:
            raise  # the caller's own credentials failed: the whole search is unauthenticated
        except (TransientError, NextcloudProtocolError, KeyError, TypeError, ValueError) as exc:
            # Unreachable, or an answer (or payload) of the wrong shape: keep it (fail-open).
            log.warning("verify_failed", doc_key=payload.get("doc_key"), error=str(exc))
            return Checked(Verdict.ERROR)

    def close(self) -> None:
        """Stop the thread pool."""
        self._pool.shutdown(wait=False)
