"""A configured account whose Nextcloud user was deleted: its documents leave the index.

Nextcloud tells no one of a deleted user. ``OCP\\User\\Events\\UserDeletedEvent`` and
``BeforeUserDeletedEvent`` (nextcloud/server ``lib/public/User/Events/``) extend ``Event``
without implementing ``OCP\\EventDispatcher\\IWebhookCompatibleEvent`` (still so in the
version with ``getUid``, ``@since 31.0.0``; of the user events only
``UserFirstTimeLoggedInEvent`` implements it), and webhook_listeners registers only classes that
do (``apps/webhook_listeners/lib/Db/WebhookListenerMapper.php`` ``addWebhookListener``: OCS
400 otherwise); deleting the home removes its files on disk without any file event
(``lib/private/User/User.php`` ``delete``: ``rmdirr($homePath)``). What ncindex sees is the
deleted user's app password refused (401): the account is then listed as refused
(:mod:`ncindex.accounts`) and its scans fail without touching the index.

So when a scan of an account ends refused, :func:`check_deleted` asks Nextcloud, as the webhook
admin (``Settings.webhook_admin``), whether the user still exists
(:meth:`ncindex.nextcloud.client.NextcloudClient.user_exists`: ``GET
/ocs/v2.php/cloud/users/{uid}``). Only the definite answer — OCS 404 "User does not exist",
heard by a scan's check and again by one at least :data:`CONFIRM_SECONDS` later (at once by
``ncindex forget``) — evicts the user (:meth:`ncindex.index.indexing.Indexer.forget_user`)
and deletes what Redis keeps of them (:func:`forget_user_state`);
a user that exists
(refused for a revoked app password, a wrong login name, disabled), an admin refused, a
timeout, a 5xx or any other answer leaves everything as it is, for the next check.
"""

from __future__ import annotations

import time
from enum import StrEnum

import redis
import structlog

from ncindex.accounts import Lookup, record_deleted
from ncindex.documents import DocType
from ncindex.errors import NcindexError, NextcloudAuthError
from ncindex.index.indexing import Indexer
from ncindex.names import Names
from ncindex.progress import FailingDocuments
from ncindex.runtime import Services

log = structlog.get_logger(__name__)


class Deleted(StrEnum):
    """What :func:`check_deleted` found."""

    FORGOTTEN = "forgotten"
    """Nextcloud says the user does not exist: their documents left the index."""
    EXISTS = "exists"
    """The user exists: nothing changed."""
    UNCONFIRMED = "unconfirmed"
    """Nextcloud said the user does not exist, first less than :data:`CONFIRM_SECONDS` ago:
    nothing changed until a later check says so again."""
    UNKNOWN = "unknown"
    """No definite answer (the admin refused, Nextcloud unavailable, an unexpected answer,
    or the user is the webhook admin itself): nothing changed."""


CONFIRM_SECONDS = 1800
"""How long after Nextcloud first says a user does not exist a scan's check must hear it again
before the index forgets them (seconds; the first hold of a refused credential,
:data:`ncindex.accounts.REFUSED_RECHECK_SECONDS`, so the next refused scan asks). A user
backend that goes away for a while (user_oidc or user_saml disabled by an upgrade, an LDAP
directory that lost its users) makes Nextcloud answer the same for users who come back;
forgetting them costs re-indexing everything they hold."""

CONFIRM_TTL = 7 * 86_400
"""How long the first answer is remembered (seconds): a user said missing once and not asked
again within a week starts over."""


def check_deleted(
    services: Services,
    indexer: Indexer,
    user: str,
    *,
    held_back: bool = True,
    confirm: bool = True,
    now: float | None = None,
    known: Lookup | None = None,
) -> tuple[Deleted, int]:
    """Ask Nextcloud, as the webhook admin, whether ``user`` still exists; when it says no,
    take ``user`` out of the index (:meth:`Indexer.forget_user`) and out of Redis
    (:func:`forget_user_state`), and note it on their refusal
    entry (:func:`ncindex.accounts.record_deleted`). Returns what was found and how many
    documents changed (0 unless :attr:`Deleted.FORGOTTEN`). Never raises for Nextcloud's
    answers (an unclear one is :attr:`Deleted.UNKNOWN`, logged); raises ``StoreUnavailable``
    when the index cannot be written and ``redis.RedisError`` when Redis cannot be.
    ``held_back`` false asks even while a refusal of the admin's credential holds it back
    (:meth:`ncindex.runtime.Services.account`: an operator's ``ncindex forget``); true, such a
    hold is :attr:`Deleted.UNKNOWN` without asking. The admin's credential refused (401) is
    recorded as its own requests' refusals are (:meth:`~ncindex.runtime.Services.account_refused`),
    so the next checks hold it back rather than send it again with every refused scan.
    ``confirm`` (a scan's check): the first "does not exist" is remembered (Redis, Unix
    seconds ``now``) and the user is forgotten only when a check at least
    :data:`CONFIRM_SECONDS` later hears it again (:attr:`Deleted.UNCONFIRMED` meanwhile); an
    answer that the user exists forgets the first. False (``ncindex forget``): at once.
    ``known``: what the webhook admin was just told of ``user`` about the refusal
    (:meth:`~ncindex.runtime.Services.account_refused`, the same ``GET
    /ocs/v2.php/cloud/users/{uid}``): an answer is read instead of asking again; ``None``, or
    a lookup Nextcloud did not answer, asks."""
    admin = services.settings.webhook_admin
    if admin == user:  # refused itself: its own word on itself is no answer
        return Deleted.UNKNOWN, 0
    try:
        exists = (
            known.account is not None
            if known is not None and known.answered
            else services.account(admin, held_back=held_back).user_exists(user)
        )
    except NcindexError as exc:
        log.warning("user_existence_unknown", user=user, admin=admin, error=str(exc))
        if isinstance(exc, NextcloudAuthError):  # held back from now on, as its own requests
            try:
                services.account_refused(admin, exc)
            except redis.RedisError as failure:
                log.warning("account_refusal_not_recorded", user=admin, error=str(failure))
        return Deleted.UNKNOWN, 0
    missing_since = services.settings.names.missing_user(user)
    if exists:
        services.redis.delete(missing_since)
        return Deleted.EXISTS, 0
    now = time.time() if now is None else now
    if confirm:
        heard = services.redis.set(missing_since, now, nx=True, get=True, ex=CONFIRM_TTL)
        first = now if heard is None else float(heard)
        if now - first < CONFIRM_SECONDS:
            log.warning("user_missing_unconfirmed", user=user, first_at=first)
            return Deleted.UNCONFIRMED, 0
    documents = indexer.forget_user(user)
    try:
        forget_user_state(services.redis, services.settings.names, user)
    except redis.RedisError as exc:  # the missing-user mark kept: the next check tries again
        log.warning("user_state_not_forgotten", user=user, error=str(exc))
    try:
        record_deleted(services.redis, services.settings.names, user, documents)
    except redis.RedisError as exc:  # the eviction is done; only the note is lost
        log.warning("user_deleted_not_recorded", user=user, error=str(exc))
    log.warning("user_deleted_forgotten", user=user, documents=documents)
    return Deleted.FORGOTTEN, documents


def forget_user_state(client: redis.Redis, keys: Names, user: str) -> int:
    """Delete what Redis keeps of configured account ``user``, whose user Nextcloud deleted, so
    that a user created again with this uid starts clean (scanned in full, first indexing
    counted anew, no held removals, stale folder etags or Notes settings of the old one): the
    keys :meth:`~ncindex.names.Names.of_user` names for every doc type (those of the
    missing-user mark included: a second deletion is confirmed again), their last scans'
    summaries, ``user`` in :attr:`~ncindex.names.Names.progress_users` and the failing documents
    last run as ``user`` (a retry as a deleted user is refused). Kept: ``user``'s refusal entry
    (:attr:`~ncindex.names.Names.refused_accounts`), which holds the refused credential back
    from Nextcloud's brute-force protection and tells ``ncindex status`` of the deletion (a new
    app password is sent at once and clears it); the scan lock, held by the scan that may be
    calling; the per-user counts of the throughput buckets, which expire within
    :data:`ncindex.progress.KEEP_SECONDS`; and what is a document's, not ``user``'s (the dead
    letter, the tasks parked for an outage, which a refusal ends). Returns how many keys, hash
    fields and set members were deleted. Raises ``redis.RedisError``."""
    exact, patterns = keys.of_user(user, [t.value for t in DocType])
    found = list(exact)
    for pattern in patterns:
        found += client.scan_iter(match=pattern, count=1000)
    failing = [f.subject for f in FailingDocuments(client, keys).entries() if f.user == user]
    pipe = client.pipeline(transaction=False)
    pipe.delete(*found)
    pipe.hdel(keys.last_scans, *(f"{user}:{t.value}" for t in DocType))
    pipe.srem(keys.progress_users, user)
    if failing:
        pipe.hdel(keys.failing, *failing)
    deleted = sum(int(n) for n in pipe.execute())
    log.info("user_state_forgotten", user=user, deleted=deleted)
    return deleted
