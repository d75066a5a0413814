"""Register ncindex's webhooks with Nextcloud's webhook_listeners, idempotently (DESIGN §5).

One registration per event class (reference/nextcloud-api.md §1.1), all pointing at
``{public_url}/hooks/nextcloud``, authenticated with the secret header (``authMethod:
header``; Nextcloud stores it encrypted) and sent with a ``Content-Type: application/json``
header (Nextcloud adds none by itself).

Each class is registered on its own: Nextcloud refuses a class that does not exist on that
server or whose app is off (nextcloud/server ``WebhookListenerMapper::addWebhookListener``:
OCS 400 "<class> is not an event class compatible with webhooks" — the tag events before
Nextcloud 32, Deck's card events before Deck 1.18, any class of a disabled app), and the
others are registered all the same. Only a refused class of :data:`~ncindex.ingest.events.REQUIRED`
makes the registration fail (:attr:`RegisterResult.ok`); what each optional one costs is
:func:`~ncindex.ingest.events.cost_without`. A request that fails otherwise (a 5xx, an answer
that is no OCS envelope) leaves its class unregistered, its registration unrenewed or undeleted,
and the rest is done all the same (:class:`Failed`, :attr:`RegisterResult.failed`;
:func:`remove` likewise) — unless Nextcloud gave no answer at all (``NextcloudUnavailable``
with ``unreachable``: connection refused or reset, a timeout): then the requests left are not
made, each would wait as long for nothing, and are recorded as not attempted
(:class:`Untried`).

A class registered for the first time is not delivered at once for everyone: webhook_listeners
adds its event listener only for the classes in a list it caches per user for five minutes
(:data:`LISTENER_CACHE_SECONDS`), and a registration clears only the list of requests booted
without a user. So changes a signed-in user makes in the five minutes after the first
registration may never be sent: :func:`rescan_once_listening` has every account scanned once
that cache has expired (without it the next periodic scan would find them, up to
``reconcile_periods`` later).
"""

from __future__ import annotations

import hashlib
import hmac
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import redis

from ncindex.errors import NcindexError, NextcloudAuthError, NextcloudRefused, NextcloudUnavailable
from ncindex.ingest.events import DOCUMENT_EVENTS, REQUIRED, SUBSCRIBED, cost_without
from ncindex.nextcloud.client import NextcloudClient
from ncindex.settings import Settings
from ncindex.urls import is_loopback_host

LISTENER_CACHE_SECONDS = 300
"""How long Nextcloud may go on ignoring a newly registered class for a user: nextcloud/server
``apps/webhook_listeners/lib/AppInfo/Application.php`` ``registerRuleListeners`` adds the event
listener, at every request's boot, only for the classes
``lib/Db/WebhookListenerMapper.php`` ``getAllConfiguredEvents($uid)`` lists, a list it caches
for five minutes under ``eventsUsedInWebhooks_<uid>``; ``addWebhookListener`` removes only the
key of the new registration's ``userIdFilter`` (empty for ncindex's), i.e. the list of requests
booted without a user, so a signed-in user's cached list (web interface, clients with a
session) lacks the new class until it expires."""
RESCAN_MARGIN_SECONDS = 30
"""Added to :data:`LISTENER_CACHE_SECONDS` before the catch-up scan (a request booted just
before the registration may still be running)."""


def subscribed(settings: Settings) -> tuple[str, ...]:
    """The event classes to register: file and tag events, plus each source's events when
    it subscribes under ``settings`` (Deck card events with ``settings.deck_webhooks``: Deck
    ≥ 1.18; reference §1.4)."""
    return SUBSCRIBED + tuple(
        cls for cls, (source, _) in DOCUMENT_EVENTS.items() if source.subscribes(settings)
    )


def hook_uri(settings: Settings) -> str:
    """The delivery URL Nextcloud calls."""
    return settings.public_url.rstrip("/") + "/hooks/nextcloud"


def loopback_target(settings: Settings) -> str | None:
    """Why Nextcloud cannot deliver to :func:`hook_uri`, or ``None``: ``NCINDEX_PUBLIC_URL``
    names a loopback host (:func:`ncindex.urls.is_loopback_host`) while
    ``NCINDEX_NEXTCLOUD_URL``'s host is not on this machine (it resolves to an address that
    is neither loopback nor one of this machine's own, :func:`_on_this_machine`, or it does
    not resolve): each delivery would go to Nextcloud's own machine. A Nextcloud on this
    machine, reached by loopback or by this machine's own address or name, may reach a
    loopback URL (with ``allow_local_remote_servers``, see ``ncindex doctor``)."""
    if not settings.nextcloud_url or not is_loopback_host(urlsplit(settings.public_url).hostname):
        return None
    host = urlsplit(settings.nextcloud_url).hostname
    if is_loopback_host(host):
        return None
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM)
    except OSError:
        infos = []
    if infos and all(_on_this_machine(family, address) for family, *_, address in infos):
        return None  # a name or an address of this machine (/etc/hosts, its own interface)
    return (
        f"NCINDEX_PUBLIC_URL {settings.public_url} is a loopback address, and the Nextcloud at "
        f"{settings.nextcloud_url} is not on this machine: it could never deliver there. Set "
        "NCINDEX_PUBLIC_URL to a URL of this deployment that Nextcloud reaches"
    )


def _on_this_machine(family: int, address: tuple[Any, ...]) -> bool:
    """Whether ``address`` (a ``getaddrinfo`` socket address) is loopback or one of this
    machine's own: a socket can be bound to it (nothing is sent)."""
    if is_loopback_host(str(address[0])):
        return True
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((address[0], 0, *address[2:]))
    except OSError:
        return False
    return True


#: A header of each registration naming the secret it was made with — not the secret: an
#: HMAC-SHA256 of the delivery URL under it, 16 hex digits (:func:`secret_id`). Nextcloud
#: stores ``authData`` encrypted and lists it so (nextcloud/server apps/webhook_listeners
#: lib/Db/WebhookListener.php, ``jsonSerialize``), but lists ``headers`` as given: a
#: registration made before the secret changed is known by this header.
SECRET_ID_HEADER = "X-Ncindex-Secret-Id"  # noqa: S105 (a header's name)


def secret_id(settings: Settings, secret: str | None = None) -> str:
    """The :data:`SECRET_ID_HEADER` value of ``secret`` (default ``settings``'s webhook
    secret) and ``settings``'s delivery URL."""
    if secret is None:
        secret = settings.webhook_secret.get_secret_value()
    return hmac.new(secret.encode(), hook_uri(settings).encode(), hashlib.sha256).hexdigest()[:16]


def made_with_secret(
    webhook: dict[str, Any], settings: Settings, secret: str | None = None
) -> bool:
    """Whether the listed registration ``webhook`` was made with ``secret`` (default
    ``settings``'s webhook secret) for ``settings``'s delivery URL."""
    headers = webhook.get("headers")
    return isinstance(headers, dict) and headers.get(SECRET_ID_HEADER) == secret_id(
        settings, secret
    )


@dataclass(frozen=True, slots=True)
class SecretRotation:
    """The registrations Nextcloud lists for this deployment's delivery URL, by the secret
    each was made with (:func:`made_with_secret`): ``unwanted`` (classes listed that are no
    longer subscribed, whatever their secret: ``register`` deletes them), and of the
    subscribed ones ``registered`` (every class listed),
    ``previous`` (classes with a registration made with ``NCINDEX_WEBHOOK_PREVIOUS_SECRET``,
    which the receiver accepts while it is set), ``stale`` (classes with a registration made
    with neither secret: refused 401) and ``duplicates`` (classes listed more than once: each
    change is delivered once per registration), each sorted; ``previous_set`` says whether
    that setting is set. Each registration counts, not each class: a class registered with
    the current secret and again with the previous one (two ``webhooks register`` runs at
    once, one per secret; a run whose deletion of the duplicate failed) is in ``previous``,
    since emptying that secret would have the duplicate's deliveries refused 401. The one
    home of when the previous secret can be emptied, for ``ncindex doctor``'s webhooks line
    and ``ncindex status`` (README "Rotating secrets")."""

    registered: tuple[str, ...]
    previous: tuple[str, ...]
    stale: tuple[str, ...]
    previous_set: bool
    unwanted: tuple[str, ...] = ()
    duplicates: tuple[str, ...] = ()

    @property
    def can_empty_previous(self) -> bool:
        """Whether the previous secret is set and no longer needed: Nextcloud lists at least
        one registration, and every one (duplicates too) carries the current secret."""
        return self.previous_set and bool(self.registered) and not self.previous and not self.stale

    def advice(self) -> str | None:
        """What to do about the previous secret: renew the registrations still made with it,
        then empty it; or empty it now (:attr:`can_empty_previous`); ``None`` when neither
        applies (it is unset, or registrations made with another secret or none listed are
        what to see to first: ``ncindex doctor``'s other webhooks lines)."""
        if self.previous:
            return (
                f"registered with the previous webhook secret: {', '.join(self.previous)} — "
                "accepted while NCINDEX_WEBHOOK_PREVIOUS_SECRET is set; run `ncindex webhooks "
                "register`, then empty it"
            )
        if self.can_empty_previous:
            return (
                "every registration carries the current webhook secret: empty "
                "NCINDEX_WEBHOOK_PREVIOUS_SECRET (chart: secrets.previousWebhookSecret), which "
                "still lets the former secret post deliveries"
            )
        return None

    def surplus(self) -> str | None:
        """The registrations ``ncindex webhooks register`` removes, in one line with that
        command: the classes registered more than once (:attr:`duplicates`) and those no
        longer subscribed (:attr:`unwanted`); ``None`` when there are neither. The one
        wording of them, for ``ncindex doctor``'s webhooks line and ``ncindex status``."""
        parts = []
        if self.duplicates:
            parts.append(
                f"registered more than once: {', '.join(self.duplicates)} — each change is "
                "delivered once per registration"
            )
        if self.unwanted:
            parts.append(
                f"registered but no longer subscribed: {', '.join(self.unwanted)} — each "
                "delivery is one the index does not need"
            )
        if not parts:
            return None
        return "; ".join([*parts, "`ncindex webhooks register` removes them"])


def listed_class(webhook: dict[str, Any]) -> str:
    """The event class of ``webhook`` as webhook_listeners lists it (``event``), without a
    leading backslash."""
    return str(webhook.get("event", "")).lstrip("\\")


def secret_rotation(hooks: list[dict[str, Any]], settings: Settings) -> SecretRotation:
    """:class:`SecretRotation` of ``hooks`` (:meth:`NextcloudClient.list_webhooks` of this
    deployment's delivery URL) under ``settings``'s two webhook secrets."""

    previous = settings.webhook_previous_secret.get_secret_value()
    needed = set(subscribed(settings))
    # a class no longer subscribed counts as unwanted whatever its secret: `webhooks register`
    # deletes it rather than renew it, and the index needs none of its deliveries
    unwanted = {listed_class(h) for h in hooks} - needed
    hooks = [h for h in hooks if listed_class(h) in needed]
    listed = Counter(listed_class(h) for h in hooks)
    accepted, stale = set(), set()
    for hook in hooks:  # each registration, not each class: a duplicate has its own secret
        if made_with_secret(hook, settings):
            continue
        if previous and made_with_secret(hook, settings, previous):
            accepted.add(listed_class(hook))
        else:
            stale.add(listed_class(hook))
    return SecretRotation(
        registered=tuple(sorted(listed)),
        previous=tuple(sorted(accepted)),
        stale=tuple(sorted(stale)),
        previous_set=bool(previous),
        unwanted=tuple(sorted(unwanted)),
        duplicates=tuple(sorted(c for c, n in listed.items() if n > 1)),
    )


def registration(settings: Settings, event_class: str) -> dict[str, Any]:
    """The create parameters for one event class."""
    return {
        "httpMethod": "POST",
        "uri": hook_uri(settings),
        "event": event_class,
        "eventFilter": [],
        "userIdFilter": "",
        "headers": {"Content-Type": "application/json", SECRET_ID_HEADER: secret_id(settings)},
        "authMethod": "header",
        "authData": {settings.webhook_secret_header: settings.webhook_secret.get_secret_value()},
    }


@dataclass(frozen=True, slots=True)
class ClassOutcome:
    """What became of one event class: ``registered`` now (with a ``reason`` when the
    registration it was to renew had been deleted meanwhile: it is registered anew),
    ``already`` there (its id), ``renewed`` (the one there, made with another secret or before
    the secret was named, updated in place: same id), ``refused`` by Nextcloud with its
    ``reason``, ``failed``: the registration or renewal raised otherwise (the error in
    ``reason``; for a renewal the id of the registration left as it was), ``untried``: its
    request was not made, Nextcloud could not be reached (:class:`Untried`; the id of a
    registration left as it was), ``removed``: a registration of a class no longer
    subscribed (its id; :func:`subscribed`: one ncindex no longer registers,
    :data:`~ncindex.ingest.events.NOT_SUBSCRIBED`, or Deck's with ``deck_webhooks`` off),
    ``gone``: such a registration Nextcloud found already deleted, or ``left``: such a
    registration whose deletion failed (the error in ``reason``); ``required`` says whether
    the index needs it, ``cost`` what is lost without it."""

    event_class: str
    status: Literal[
        "registered",
        "already",
        "renewed",
        "refused",
        "failed",
        "untried",
        "removed",
        "gone",
        "left",
    ]
    webhook_id: int | None = None
    reason: str = ""
    required: bool = False
    cost: str = ""


#: What a failed request was to do, and what its line says was not done (:meth:`Failed.line`).
_NOT_DONE = {"register": "not registered", "renew": "not renewed", "remove": "not removed"}


@dataclass(frozen=True, slots=True)
class Failed:
    """A request :func:`register` or :func:`remove` made for one class that raised (any
    ``NcindexError`` but a 401 and, for ``register``/``renew``, an OCS 400 refusal: a 5xx,
    a timeout, an answer that is no OCS envelope): its ``action`` — ``register`` (``POST
    /webhooks``; ``webhook_id`` ``None``), ``renew`` (``POST /webhooks/{id}`` and the
    ``GET`` that reads it back: the registration ``webhook_id`` is left as it was, or its
    renewal is not confirmed) or ``remove`` (``DELETE``: ``webhook_id`` is left in place) —,
    the ``event_class``, the ``error`` as the exception says it and whether Nextcloud gave no
    answer at all (``unreachable``, ``NextcloudUnavailable.unreachable``: the requests after it are
    :class:`Untried`). The one home of how such a failure is reported: :meth:`line`,
    :meth:`row`."""

    action: Literal["register", "renew", "remove"]
    event_class: str
    webhook_id: int | None
    error: str
    unreachable: bool = False

    def line(self, command: str) -> str:
        """One line naming the registration (or class), what was not done and the error, and
        that ``ncindex webhooks <command>`` tries again."""
        what = (
            self.event_class
            if self.webhook_id is None
            else f"registration #{self.webhook_id} ({self.event_class})"
        )
        return (
            f"{what} {_NOT_DONE[self.action]}: {self.error} — `ncindex webhooks {command}` "
            "tries again"
        )

    def row(self) -> dict[str, Any]:
        """The failure as ``--json`` lists it: ``{"action", "class", "id", "error"}``
        (``id`` ``null`` for ``register``)."""
        return _request_row(self) | {"error": self.error}


@dataclass(frozen=True, slots=True)
class Untried:
    """A request :func:`register` or :func:`remove` did not make because one before it in the
    same run got no answer from Nextcloud (:attr:`Failed.unreachable`: refused, reset, timed
    out), so that a run does not wait out one timeout per request left: its ``action``,
    ``event_class`` and ``webhook_id`` as in :class:`Failed` (nothing was changed), and the
    ``reason``, naming that failure. The one home of how these are reported: :meth:`row`,
    :func:`untried_line`."""

    action: Literal["register", "renew", "remove"]
    event_class: str
    webhook_id: int | None
    reason: str

    def row(self) -> dict[str, Any]:
        """The request as ``--json`` lists it: ``{"action", "class", "id", "reason"}``
        (``id`` ``null`` for ``register``)."""
        return _request_row(self) | {"reason": self.reason}


def _request_row(request: Failed | Untried) -> dict[str, Any]:
    """The ``action``, ``class`` and ``id`` of ``request`` as ``--json`` lists them."""
    return {"action": request.action, "class": request.event_class, "id": request.webhook_id}


def untried_line(untried: list[Untried], command: str) -> str | None:
    """One line saying how many requests of ``ncindex webhooks <command>`` were not attempted
    (:class:`Untried`) and why, and that the command tries again; ``None`` when none."""
    if not untried:
        return None
    count = len(untried)
    return (
        f"{count} more request{'' if count == 1 else 's'} not attempted: {untried[0].reason} "
        f"— `ncindex webhooks {command}` tries again"
    )


@dataclass(slots=True)
class RegisterResult:
    """What :func:`register` did: one :class:`ClassOutcome` per class (in subscription order,
    then the classes no longer subscribed), the ids of the registrations it removed
    (duplicates, a refused class's, a class's no longer subscribed), of those Nextcloud found
    already deleted (``gone``), the requests that failed (:class:`Failed`, in the order
    tried) and those not made once Nextcloud could not be reached (:class:`Untried`)."""

    outcomes: list[ClassOutcome] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    gone: list[int] = field(default_factory=list)
    failed: list[Failed] = field(default_factory=list)
    untried: list[Untried] = field(default_factory=list)

    @property
    def created(self) -> list[int]:
        """Ids this call registered anew (``POST /webhooks``; not the renewed ones)."""
        return [o.webhook_id for o in self.outcomes if o.status == "registered" and o.webhook_id]

    @property
    def updated(self) -> list[int]:
        """Ids this call renewed in place with the current secret (``POST /webhooks/{id}``,
        nextcloud/server ``WebhooksController::update``: the id stays)."""
        return [o.webhook_id for o in self.outcomes if o.status == "renewed" and o.webhook_id]

    @property
    def first_registered(self) -> list[str]:
        """Classes registered by this call that had no registration for this deployment before
        (``registered``; a ``renewed`` class was listened to already)."""
        return [o.event_class for o in self.outcomes if o.status == "registered"]

    @property
    def kept(self) -> list[int]:
        """Ids that were registered already."""
        return [o.webhook_id for o in self.outcomes if o.status == "already" and o.webhook_id]

    @property
    def refused(self) -> list[ClassOutcome]:
        """Classes Nextcloud refused."""
        return [o for o in self.outcomes if o.status == "refused"]

    @property
    def ok(self) -> bool:
        """No class the index cannot work without was refused, and no request failed or was
        left untried."""
        return not any(o.required for o in self.refused) and not self.failed and not self.untried

    def missing_lines(self) -> list[str]:
        """One line per refused class: its name, Nextcloud's reason and what it costs."""
        return [
            f"{o.event_class} refused ({o.reason})"
            + (": REQUIRED, the index cannot follow changes" if o.required else f": {o.cost}")
            for o in self.refused
        ]

    def table(self) -> str:
        """A plain-text table: class, outcome, and the reason and cost of a refusal, the
        error of a failure, why a request was not attempted or a registration made anew."""
        width = max((len(o.event_class) for o in self.outcomes), default=5)
        lines = [f"{'class':<{width}}  result      detail"]
        for o in self.outcomes:
            detail = f"#{o.webhook_id}" if o.webhook_id else ""
            if o.status == "refused":
                detail = o.reason + ("; required" if o.required else f"; {o.cost}")
            elif o.status in ("failed", "left"):
                action = "remove" if o.status == "left" else "renew" if o.webhook_id else "register"
                detail = f"{detail} {_NOT_DONE[action]}: {o.reason}".lstrip()
            elif o.status == "untried":
                detail = f"{detail} not attempted: {o.reason}".lstrip()
            elif o.status == "gone":
                detail += " already gone"
            elif o.reason:  # registered anew: the registration to renew was gone
                detail += f" ({o.reason})"
            lines.append(f"{o.event_class:<{width}}  {o.status:<10}  {detail}")
        return "\n".join(lines)


def register(client: NextcloudClient, settings: Settings) -> RegisterResult:
    """Make sure exactly one registration per subscribed class points at this deployment,
    and none of another class: one registered by an earlier ncindex that no longer subscribes
    it, or Deck's once ``deck_webhooks`` is off, is deleted (``removed``).

    An existing registration for our URI and class is kept when it was made with the current
    secret (:func:`made_with_secret`; the secret itself cannot be read back); otherwise the
    oldest is updated in place with the current one (``renewed``, ``POST /webhooks/{id}``):
    a rotated ``NCINDEX_WEBHOOK_SECRET`` would have every delivery refused 401, and
    nextcloud/server ``apps/webhook_listeners/lib/BackgroundJobs/WebhookCall.php`` ``run``
    reads the registration (``getById``) when a queued job runs, so the deliveries queued
    before the renewal are sent with the new secret, where a registration deleted and made
    anew would have them fail. Duplicates are deleted: one run leaves one registration per
    class, but two runs at once (two deployments at one URL, an init job beside a manual run;
    during a rotation, one per secret) may each find none and create one. A renewal whose
    registration was deleted since the listing (another admin, a ``webhooks remove`` beside
    it) is registered anew (``registered``, with the old id in ``reason``), not ``renewed``:
    ``WebhooksController::update`` answers a missing id as an update and stores nothing
    (:meth:`NextcloudClient.update_webhook`, which reads it back to tell); the class was not
    listened to meanwhile, so it counts in :attr:`RegisterResult.first_registered` and its
    changes are caught up by :func:`rescan_once_listening`. A class Nextcloud
    refuses (``NextcloudRefused``, OCS 400) is recorded with the reason, its stale registration
    deleted, and the rest go on. A registration, renewal or deletion that fails otherwise (any
    ``NcindexError`` but a 401: a 5xx — nextcloud/server ``WebhooksController::create``,
    ``update`` and ``destroy`` answer any other exception with OCS 500 "An internal error
    occurred" —, an answer that is no OCS envelope) is recorded in
    :attr:`RegisterResult.failed` and everything else is done all the same; once one got no
    answer at all (``NextcloudUnavailable.unreachable``: refused, reset, timed out) the
    requests left are not made but recorded in :attr:`RegisterResult.untried` (their classes
    ``untried``, a class no longer subscribed too). A deletion that
    finds the registration already gone is no failure (``gone``): ``destroy`` answers a
    missing id with 200 and ``false`` (``WebhookListenerMapper::deleteById``: no row
    deleted), not a 404, so an OCS 404 there is a route that is not served (webhook_listeners
    disabled meanwhile) and counts as a failure. Raises ``NextcloudAuthError`` when the
    account's app password is refused (401; every further request would be, each a failed
    login), ``Forbidden`` (OCS 403) when the account may not manage webhooks: it is neither
    an admin nor in a group delegated webhook_listeners' "Webhooks" admin setting
    (nextcloud/server ``WebhooksController``, ``#[AuthorizedAdminSetting(settings:
    Admin::class)]``; ``SecurityMiddleware::beforeController``, which answers the listing
    before anything is changed).
    """
    existing = client.list_webhooks(uri=hook_uri(settings))
    result = RegisterResult()
    for event_class in subscribed(settings):
        required = event_class in REQUIRED
        mine = sorted(
            (w for w in existing if listed_class(w) == event_class),
            key=lambda w: (not made_with_secret(w, settings), int(w["id"])),
        )
        current = bool(mine) and made_with_secret(mine[0], settings)
        if current:
            result.outcomes.append(
                ClassOutcome(event_class, "already", int(mine[0]["id"]), required=required)
            )
        for stale in mine[1:]:
            _delete(client, stale, event_class, result)
        if current:
            continue
        body = registration(settings, event_class)
        webhook_id = int(mine[0]["id"]) if mine else None
        gone: int | None = None  # the registration to renew, found deleted meanwhile
        try:
            made = _attempt(
                partial(client.update_webhook, webhook_id, body)
                if webhook_id is not None
                else partial(client.create_webhook, body),
                "renew" if mine else "register",
                event_class,
                webhook_id,
                result,
                refusals=True,
            )
            if made is None:  # deleted since it was listed: nothing was stored, register anew
                gone = webhook_id
                made = _attempt(
                    partial(client.create_webhook, body),
                    "register",
                    event_class,
                    None,
                    result,
                    refusals=True,
                )
        except NextcloudRefused as exc:
            if mine and gone is None:  # a class this server no longer has: nothing listens
                _delete(client, mine[0], event_class, result)
            result.outcomes.append(
                ClassOutcome(
                    event_class,
                    "refused",
                    reason=exc.message or f"OCS {exc.status}",
                    required=required,
                    # the server's version is not asked: a refused class may be one it lacks
                    cost=cost_without(event_class),
                )
            )
            continue
        if isinstance(made, Failed | Untried):
            result.outcomes.append(
                ClassOutcome(
                    event_class,
                    "failed" if isinstance(made, Failed) else "untried",
                    made.webhook_id,
                    reason=made.error if isinstance(made, Failed) else made.reason,
                    required=required,
                    cost=cost_without(event_class),
                )
            )
            continue
        result.outcomes.append(
            ClassOutcome(event_class, "renewed", int(made["id"]), required=required)
            if mine and gone is None
            else ClassOutcome(
                event_class,
                "registered",
                int(made["id"]),
                reason=f"registration #{gone} was deleted meanwhile: registered anew"
                if gone is not None
                else "",
                required=required,
            )
        )
    wanted = set(subscribed(settings))
    for webhook in existing:
        event_class = listed_class(webhook)
        if event_class not in wanted:
            done = _delete(client, webhook, event_class, result)
            webhook_id = int(webhook["id"])
            if isinstance(done, Failed):
                result.outcomes.append(ClassOutcome(event_class, "left", webhook_id, done.error))
            elif isinstance(done, Untried):
                result.outcomes.append(
                    ClassOutcome(event_class, "untried", webhook_id, done.reason)
                )
            else:
                result.outcomes.append(ClassOutcome(event_class, done, webhook_id))
    return result


_T = TypeVar("_T")


def _attempt(
    call: Callable[[], _T],
    action: Literal["register", "renew", "remove"],
    event_class: str,
    webhook_id: int | None,
    run: RegisterResult | Removal,
    *,
    refusals: bool = False,
) -> _T | Failed | Untried:
    """What ``call`` (one webhook request of ``run``) returns, or the :class:`Failed` ``action``
    with the error it raised (any ``NcindexError``), appended to ``run.failed``. Once a request
    of ``run`` got no answer (:attr:`Failed.unreachable`) ``call`` is not made: the
    :class:`Untried` ``action`` is appended to ``run.untried`` and returned. Raises
    ``NextcloudAuthError`` (the account's app password refused: every further request would
    be, each a failed login) and, with ``refusals``, ``NextcloudRefused`` (OCS 400: the caller
    has its own answer to it)."""
    stop = next((f for f in run.failed if f.unreachable), None)
    if stop is not None:
        untried = Untried(
            action, event_class, webhook_id, f"Nextcloud could not be reached ({stop.error})"
        )
        run.untried.append(untried)
        return untried
    try:
        return call()
    except NextcloudAuthError:
        raise
    except NcindexError as exc:
        if refusals and isinstance(exc, NextcloudRefused):
            raise
        failed = Failed(
            action,
            event_class,
            webhook_id,
            str(exc),
            isinstance(exc, NextcloudUnavailable) and exc.unreachable,
        )
        run.failed.append(failed)
        return failed


def _delete(
    client: NextcloudClient, webhook: dict[str, Any], event_class: str, result: RegisterResult
) -> Literal["removed", "gone"] | Failed | Untried:
    """Delete registration ``webhook`` (as listed) of ``event_class`` for :func:`register`:
    its id joins ``result.removed``, or ``result.gone`` when Nextcloud found it gone
    (``false``); returns which, or the :class:`Failed` or :class:`Untried` :func:`_attempt`
    recorded. Raises ``NextcloudAuthError`` (the account's app password refused)."""
    webhook_id = int(webhook["id"])
    done = _attempt(
        partial(client.delete_webhook, webhook_id), "remove", event_class, webhook_id, result
    )
    if isinstance(done, Failed | Untried):
        return done
    (result.removed if done else result.gone).append(webhook_id)
    return "removed" if done else "gone"


def rescan_once_listening(
    client: redis.Redis, result: RegisterResult, settings: Settings, now: float | None = None
) -> int | None:
    """When ``result`` registered a class for the first time, mark every configured account
    to be scanned once Nextcloud listens to it for everyone: :attr:`~ncindex.names.Names.
    rescan_due` is set to ``now`` (Unix seconds; default the clock) +
    :data:`LISTENER_CACHE_SECONDS` + :data:`RESCAN_MARGIN_SECONDS`, and beat's minute tick
    (:func:`ncindex.sync.reconcile.rescan_if_due`) requests the scans from then: they find
    what Nextcloud did not send while users' cached lists lacked the class (module
    docstring). A due time kept in Redis, not a task with a countdown, which a worker would
    hold unacknowledged for five minutes. Returns the due time (Unix seconds), ``None`` when
    nothing was registered for the first time. Raises ``redis.RedisError``."""
    if not result.first_registered:
        return None
    due = int(time.time() if now is None else now) + LISTENER_CACHE_SECONDS + RESCAN_MARGIN_SECONDS
    # kept an hour past due: a deployment without beat has no use for it after that
    client.set(settings.names.rescan_due, due, exat=due + 3600)
    return due


def list_registrations(client: NextcloudClient, settings: Settings) -> list[dict[str, Any]]:
    """Registrations pointing at this deployment, as webhook_listeners lists them (``id``,
    ``event``, ``uri``, ...: nextcloud/server ``WebhookListener::jsonSerialize``)."""
    return client.list_webhooks(uri=hook_uri(settings))


@dataclass(slots=True)
class Removal:
    """What :func:`remove` did: the registrations it deleted (``removed``) and those Nextcloud
    found already deleted (``gone``), as :func:`list_registrations` lists them, the
    deletions that failed (:class:`Failed`, each a ``remove``, in the order tried) and those
    not made once Nextcloud could not be reached (:class:`Untried`)."""

    removed: list[dict[str, Any]] = field(default_factory=list)
    gone: list[dict[str, Any]] = field(default_factory=list)
    failed: list[Failed] = field(default_factory=list)
    untried: list[Untried] = field(default_factory=list)


def remove(client: NextcloudClient, settings: Settings) -> Removal:
    """Delete every registration pointing at this deployment. A deletion that fails (any
    ``NcindexError`` but a 401, as in :func:`register`) is recorded and the others are made
    all the same — unless it got no answer (``NextcloudUnavailable.unreachable``): the rest
    are then not made (:attr:`Removal.untried`); one already gone
    (``WebhooksController::destroy`` answers ``false``) is ``gone``. Raises
    ``NextcloudAuthError`` (the account's app password refused: every further request would
    be, each a failed login), and what the listing raises."""
    removal = Removal()
    for webhook in client.list_webhooks(uri=hook_uri(settings)):
        webhook_id = int(webhook["id"])
        event_class = listed_class(webhook)
        done = _attempt(
            partial(client.delete_webhook, webhook_id), "remove", event_class, webhook_id, removal
        )
        if not isinstance(done, Failed | Untried):
            (removal.removed if done else removal.gone).append(webhook)
    return removal
