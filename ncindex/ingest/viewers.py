"""Who can see a node: the configured accounts to read an event as when it named nobody, or
those of a few accounts that may see a document new to the index (or moved) too
(:attr:`ncindex.index.steps.Outcome.viewers`).

An event without a configured session user (``"user": null`` from occ, cron, a workflow rule,
an admin; or the view of an unconfigured user) says which file changed but not as whom to read
it. :func:`viewers_of` asks each configured account with a WebDAV SEARCH by file id (one request
per account; reference §3.4) and returns those that see it; the ``ncindex.resolve_node`` task
(:func:`workers.queue_tasks.resolve_node`) then indexes the file as each of them. One account's
failure is that account's alone (:attr:`Viewers.failed`): the others' answers still count.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ncindex.errors import NcindexError, NextcloudAuthError, NotFound

if TYPE_CHECKING:
    from ncindex.runtime import Services


@dataclass(frozen=True, slots=True)
class Viewers:
    """What the accounts asked by :func:`viewers_of` answered, user ids in configuration
    order: ``seen`` can see the node, ``unseen`` cannot (Nextcloud found no such id in their
    view), and ``failed`` maps each account whose SEARCH failed otherwise to its error
    (``NextcloudUnavailable``: a timeout, 5xx, 423, 429; ``NextcloudProtocolError``: an
    answer not in Nextcloud's format, a 404 for the search's scope): whether it sees the node
    is unknown."""

    seen: list[str] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)
    failed: dict[str, NcindexError] = field(default_factory=dict)


def viewers_of(services: Services, file_id: int, among: Collection[str] | None = None) -> Viewers:
    """Ask each configured account (only those of ``among`` when given) whether it can see
    ``file_id``: one WebDAV SEARCH by id per account
    (:meth:`~ncindex.nextcloud.client.NextcloudClient.find_by_id`). An account Nextcloud
    refuses (401, or held back after one) is recorded
    (:meth:`~ncindex.runtime.Services.account_refused`) and is in no list; any other failure
    of one account's SEARCH goes to :attr:`Viewers.failed` and the next account is asked.
    Raises ``redis.RedisError`` when a refusal cannot be read or recorded."""
    viewers = Viewers()
    for user in services.settings.accounts:
        if among is not None and user not in among:
            continue
        try:
            services.account(user).find_by_id(file_id)
        except NotFound:
            viewers.unseen.append(user)
        except NextcloudAuthError as exc:
            services.account_refused(user, exc)
        except NcindexError as exc:
            viewers.failed[user] = exc
        else:
            viewers.seen.append(user)
    return viewers
