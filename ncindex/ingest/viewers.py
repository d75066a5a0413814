"""Who can see a node: the configured accounts to read an event as when it named nobody, or
those of a few accounts that may see a document new to the index (or moved) too
(:attr:`ncindex.index.steps.Outcome.viewers`).

An event without a configured session user (``"user": null`` from occ, cron, a workflow rule,
an admin; or the view of an unconfigured user) says which file changed but not as whom to read
it. :func:`viewers_of` asks each configured account with a WebDAV SEARCH by file id (one request
per account; reference §3.4) and returns those that see it; the ``ncindex.resolve_node`` task
(:func:`ncindex.ingest.events.resolve_node`) then indexes the file as each of them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from ncindex.errors import NextcloudAuthError, NotFound

if TYPE_CHECKING:
    from ncindex.runtime import Services


def viewers_of(
    services: Services, file_id: int, among: Collection[str] | None = None
) -> tuple[list[str], list[str]]:
    """The configured accounts (user ids, in configuration order; only those of ``among``
    when given) that can see ``file_id``, and those Nextcloud says cannot (not found by id).

    One WebDAV SEARCH by id per account; an account Nextcloud refuses (401) is recorded
    (:func:`ncindex.accounts.record_refused`) and is in neither list. Transient errors
    propagate (``NextcloudUnavailable``): the caller retries."""
    viewers: list[str] = []
    unseen: list[str] = []
    for user in services.settings.accounts:
        if among is not None and user not in among:
            continue
        try:
            services.account(user).find_by_id(file_id)
        except NotFound:
            unseen.append(user)
            continue
        except NextcloudAuthError as exc:
            services.account_refused(user, exc)
            continue
        viewers.append(user)
    return viewers, unseen
