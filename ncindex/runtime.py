"""The process's shared services, built lazily from one :class:`Settings`.

Each process (a gunicorn worker, a Celery worker, or the one process of ``ncindex up``) holds
one :class:`Services`: a Redis client, the pooled Nextcloud HTTP client, and the embedding
models with their collections (:class:`~ncindex.embedding.live_models.LiveModels`: the store's model
pointers say which model is live). They are created on first use, once, under a lock, so an
app factory can be cheap and a model loads off the request path.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

import httpx
import redis
import structlog

from ncindex.accounts import (
    REFUSED_RECHECK_SECONDS,
    Hold,
    Lookup,
    clear_refused_if,
    credential_fingerprint,
    hold_of,
    record_refused,
    refused_entry,
)
from ncindex.embedding.embedder import Embedder
from ncindex.embedding.live_models import LiveModels
from ncindex.errors import AccountHeld, NcindexError, NextcloudAuthError
from ncindex.nextcloud.client import HeaderAuth, NextcloudClient, make_http
from ncindex.progress import IndexRebuilds
from ncindex.redis_breaker import RedisBreaker
from ncindex.redis_replies import as_text
from ncindex.settings import Settings
from ncindex.store import VectorStore
from ncindex.store.port import IndexRebuild

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Release:
    """What :meth:`Services.release` found: Nextcloud accepted configured account ``user``'s
    credential (login name ``login``) and answered user id ``user_id``; ``refusal``: its
    refusal entry before (``{"at", "where", …}``: :func:`ncindex.accounts.refused_accounts`'s
    shape, without ``held_until``), ``None`` when there was none; ``hold``: the hold that entry
    set then on the configured credential (:func:`ncindex.accounts.hold_of`), ``None`` when
    none — also when the refused credential is not the configured one (a new app password,
    tried at once: there was no hold to release); ``released``: whether the
    entry was forgotten."""

    user: str
    login: str
    user_id: str
    refusal: dict[str, Any] | None
    hold: Hold | None
    released: bool


def credential_of(settings: Settings, user: str) -> str:
    """The :func:`~ncindex.accounts.credential_fingerprint` of configured account ``user``'s
    login name and app password in ``settings``; raises ``KeyError`` if not configured."""
    password = settings.password_for(user)
    return credential_fingerprint(settings.login_for(user) or user, password)


def configured_credentials(settings: Settings) -> dict[str, str]:
    """User id → :func:`credential_of` for every account configured in ``settings``: what a
    refusal's hold is judged against (:func:`ncindex.accounts.refused_accounts`)."""
    return {user: credential_of(settings, user) for user in settings.accounts}


class Services:
    """Lazily built clients for one process. ``http_transport`` replaces the network for the
    Nextcloud client (tests); ``store`` and ``embedder`` may be handed in to share them: they
    are those of ``Settings.dense_model`` (see
    :class:`~ncindex.embedding.live_models.LiveModels`). ``load_model`` false leaves the live
    dense model unloaded until something embeds (a Celery worker:
    :func:`workers.celery_app.create_celery`); true loads it with the first read of the
    store, off the request path of a process serving searches."""

    def __init__(
        self,
        settings: Settings,
        *,
        http_transport: httpx.BaseTransport | None = None,
        store: VectorStore | None = None,
        embedder: Embedder | None = None,
        load_model: bool = True,
    ) -> None:
        self.settings = settings
        self._load_model = load_model
        self._http_transport = http_transport
        self._lock = threading.RLock()
        self._given_store = store
        self._given_embedder = embedder

    @cached_property
    def redis(self) -> redis.Redis:
        """Redis client for locks, debounce keys and caches (short socket timeouts)."""
        return redis.Redis.from_url(
            self.settings.redis_url, socket_timeout=5, socket_connect_timeout=2
        )

    @cached_property
    def redis_breaker(self) -> RedisBreaker:
        """Redis for the search API's calls (login cache, exemption, RCP sessions): short
        timeouts behind a circuit breaker, so a stalled Redis fails them fast."""
        return RedisBreaker(self.settings.redis_url)

    @cached_property
    def http(self) -> httpx.Client:
        """The pooled Nextcloud HTTP client."""
        with self._lock:
            return make_http(self.settings, self._http_transport)

    @cached_property
    def models(self) -> LiveModels:
        """The embedding models of this process and which one is live; a payload index a
        collection makes again is noted for ``ncindex status`` (:meth:`note_rebuild`)."""
        with self._lock:
            return LiveModels(
                self.settings,
                store=self._given_store,
                embedder=self._given_embedder,
                on_rebuild=self.note_rebuild,
                load_live=self._load_model,
            )

    def note_rebuild(self, rebuild: IndexRebuild, done: bool) -> None:
        """Note in Redis that ``rebuild`` began, or delete the note once ``done``
        (:class:`~ncindex.progress.IndexRebuilds`). A Redis error is logged: the note is
        informative, the collection is what matters."""
        notes = IndexRebuilds(self.redis, self.settings.names)
        try:
            if done:
                notes.ended(rebuild.collection, rebuild.field)
            else:
                notes.begun(rebuild.collection, rebuild.field, rebuild.points, rebuild.waits)
        except redis.RedisError as exc:
            log.warning("index_rebuild_not_noted", field=rebuild.field, error=str(exc))
        log.info(
            "index_rebuild_ended" if done else "index_rebuild_begun",
            collection=rebuild.collection,
            field=rebuild.field,
            points=rebuild.points,
            waits=rebuild.waits,
        )

    @property
    def embedder(self) -> Embedder:
        """The live model's embedder (the thread's pinned view inside
        :meth:`LiveModels.pinned`): loaded unless ``load_model`` was false, when it loads at
        its first embedding."""
        return self.models.view().embedder

    @property
    def store(self) -> VectorStore:
        """The live model's collection, ensured; writes also go to the mirror model's while
        there is one (the thread's pinned view inside :meth:`LiveModels.pinned`)."""
        return self.models.view().store

    def account(self, user: str, *, held_back: bool = True, clears: bool = True) -> NextcloudClient:
        """Client acting as configured account ``user`` (authenticating with its login name);
        raises ``KeyError`` if not configured. Its first request raises
        :class:`~ncindex.errors.AccountHeld` instead of being sent while Nextcloud's refusal of
        this very credential is recent (:func:`ncindex.accounts.hold_of`: each refused login
        slows down every login from this machine); if Redis cannot say, it is sent. When it
        found a refusal entry that holds nothing back (the hold ended, or the credential
        changed since), the first answer Nextcloud accepts clears that entry
        (:func:`ncindex.accounts.clear_refused_if`; :attr:`NextcloudClient.accepted`), so its
        ``times`` do not lengthen the hold of a later, unrelated refusal: one Redis write per
        such client, none for an account without an entry. ``clears`` false leaves the entry
        whatever the answers: a dry-run scan or a check (``ncindex doctor``) writes nothing.
        ``held_back`` false sends it whatever the hold: an operator's own command (``ncindex
        up``'s start, ``ncindex webhooks register``) asks Nextcloud once, as they asked."""
        password = self.settings.password_for(user)
        client = NextcloudClient.for_account(
            self.http, user, password, login=self.settings.login_for(user)
        )
        credential = self.credential_of(user)

        def guard() -> None:
            try:
                entry = self.redis_breaker.call("hget", self.settings.names.refused_accounts, user)
            except redis.RedisError:
                return  # Redis cannot say: send it (holding back protects capacity, not access)
            hold = hold_of(entry, credential)
            if hold is not None:
                again = datetime.fromtimestamp(hold.until, UTC).isoformat(timespec="seconds")
                raise AccountHeld(
                    f"{user}: Nextcloud refused this app password; not sent again before "
                    f"{again}, as each refused login counts against this machine in Nextcloud's "
                    "brute-force protection (a new app password is tried at once)",
                    since=hold.since,
                    until=hold.until,
                    refusal=hold.refusal,
                    times=hold.times,
                )
            if entry is not None and clears:
                client.accepted = lambda: self._refusal_passed(user, entry)

        if held_back:
            client.guard = guard
        return client

    def account_refused(
        self, user: str, exc: NextcloudAuthError, *, sent_now: bool = False
    ) -> Lookup | None:
        """Record that Nextcloud refused configured account ``user`` (``exc``, a 401 or a
        disabled account's login) with its credential's fingerprint
        (:func:`ncindex.accounts.record_refused`), so that :meth:`account` holds it back; an
        :class:`~ncindex.errors.AccountHeld` (nothing was sent) records nothing. The first
        refusal of a credential also asks Nextcloud, as the webhook admin, about the user
        (:meth:`refusal_lookup`), whose cause is recorded as the entry's ``cause``; so does a
        refusal of a request sent whatever the hold (``sent_now``: ``ncindex release``,
        :meth:`release`). Returns that lookup (``None`` when none was made), which a refused
        scan's deleted-user check reads instead of asking again
        (:func:`ncindex.sync.deleted.check_deleted`). Raises ``redis.RedisError`` when Redis
        cannot be written."""
        if isinstance(exc, AccountHeld):
            return None
        try:
            credential: str | None = self.credential_of(user)
        except KeyError:  # not (or no longer) configured
            credential = None
        lookup = (
            None if credential is None else self.refusal_lookup(user, credential, sent_now=sent_now)
        )
        record_refused(
            self.redis, self.settings.names, user, str(exc), credential=credential, lookup=lookup
        )
        return lookup

    def refusal_lookup(
        self, user: str, credential: str, *, sent_now: bool = False
    ) -> Lookup | None:
        """What Nextcloud says of the user of account ``user`` whose credential of fingerprint
        ``credential`` it refused, asked as the webhook admin (``GET
        /ocs/v2.php/cloud/users/{uid}``: :class:`~ncindex.accounts.Lookup`, whose cause
        :func:`ncindex.accounts.cause_of` tells), once per refusal: not while a refusal of
        that credential holds it back (the answer to a request sent before the hold began: the
        refusal that began it asked), nor when another process already asked of it within
        the first hold (:attr:`~ncindex.names.Names.refusal_asked`: tasks refused at once).
        ``sent_now``: the refused request was sent whatever the hold (:meth:`release`, after
        the operator fixed what the cause said): asked again, as the cause may have changed
        (a user enabled again whose app password was revoked meanwhile). ``None`` (not
        asked) then, and when the user is the admin itself or the admin is not configured;
        a lookup not ``answered`` when the admin is held back or refused (recorded:
        :meth:`account_refused`) or Nextcloud gave no clear answer (logged). Only reads: a
        user Nextcloud says does not exist is :attr:`~ncindex.accounts.Cause.DELETED`, and
        nothing leaves the index (that takes two scans' checks:
        :func:`ncindex.sync.deleted.check_deleted`).
        Raises ``redis.RedisError``."""
        admin = self.settings.webhook_admin
        names = self.settings.names
        if admin == user or admin not in self.settings.accounts:
            return None
        if not sent_now and hold_of(self.redis.hget(names.refused_accounts, user), credential):
            return None
        asked = self.redis.set(
            names.refusal_asked(user), credential, ex=REFUSED_RECHECK_SECONDS[0], get=True
        )
        if not sent_now and isinstance(asked, bytes | str) and as_text(asked) == credential:
            return None
        try:
            return Lookup(answered=True, account=self.account(admin).user_account(user))
        except NcindexError as exc:
            log.warning("refusal_cause_unknown", user=user, admin=admin, error=str(exc))
            if isinstance(exc, NextcloudAuthError):  # held back from now on, as its own requests
                self.account_refused(admin, exc)
            return Lookup(answered=False)

    def release(self, user: str) -> Release:
        """An operator's check of configured account ``user``'s credential (``ncindex release``):
        ``GET /ocs/v2.php/cloud/user`` with it now, sent whatever the hold (the operator asks
        Nextcloud once, as the webhook commands do). When Nextcloud answers with ``user`` as
        the user id, the account's refusal entry read before the request is forgotten
        (:func:`ncindex.accounts.clear_refused_if`: one recorded meanwhile, by a task refused
        after it, stays), so scans and tasks send the credential again at once instead of at the
        hold's end; an answer naming another user id forgets nothing (the login name belongs to
        another user: ``NCINDEX_LOGINS``). Returns the :class:`Release`. A refusal (401, or a
        disabled account's login) is recorded as any other (:meth:`account_refused`: the hold
        starts again from now) and raised as ``NextcloudAuthError``; ``KeyError`` when ``user``
        is not configured; any other ``NcindexError`` (Nextcloud unavailable) and
        ``redis.RedisError`` as raised, nothing changed."""
        entry = self.redis.hget(self.settings.names.refused_accounts, user)
        client = self.account(user, held_back=False)
        try:
            uid = client.current_user()
        except NextcloudAuthError as exc:
            self.account_refused(user, exc, sent_now=True)
            raise
        hold = hold_of(entry, self.credential_of(user))
        refusal = refused_entry(entry)
        released = (
            uid == user
            and entry is not None
            and clear_refused_if(self.redis, self.settings.names, user, entry)
        )
        return Release(
            user=user,
            login=self.settings.login_for(user) or user,
            user_id=uid,
            refusal=refusal or None,
            hold=hold,
            released=released,
        )

    def _refusal_passed(self, user: str, entry: bytes | str) -> None:
        """Nextcloud accepted a request of ``user``'s, whose refusal entry read ``entry``
        before it: clear the entry unless it changed since
        (:func:`ncindex.accounts.clear_refused_if`). A Redis that cannot be written leaves it
        for the next such request or the account's next scan (logged, not raised: the
        request succeeded)."""
        try:
            clear_refused_if(self.redis, self.settings.names, user, entry)
        except redis.RedisError as exc:
            log.warning("account_refusal_not_cleared", user=user, error=str(exc))

    def credential_of(self, user: str) -> str:
        """:func:`credential_of` of this process's settings."""
        return credential_of(self.settings, user)

    def caller(self, authorization: str) -> NextcloudClient:
        """Client acting with a caller's own ``Authorization`` header (Basic or Bearer)."""
        return NextcloudClient(self.http, HeaderAuth(authorization))

    def close(self) -> None:
        """Close what was opened."""
        for name in ("models", "http", "redis", "redis_breaker"):
            if name in self.__dict__:
                self.__dict__[name].close()
