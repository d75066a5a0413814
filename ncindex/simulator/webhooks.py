"""webhook_listeners: the registration registry, which registrations an event fires
(``eventFilter``: :mod:`ncindex.simulator.eventfilter`) and delivery.

Delivery follows Nextcloud (reference §1.2): at dispatch time the envelope is snapshotted and one
job per matching registration is queued; a background thread posts it later (delay drawn from
``delivery_delay`` seconds, optionally out of order, optionally dropped), exactly one attempt, no
retry. The registration is looked up again when the job runs, so deleting a registration makes
its queued jobs fail like ``WebhookCall`` does.

Which classes are listened to at all is decided once per request, when webhook_listeners boots,
and cached per user for :data:`LISTENER_CACHE_SECONDS` (:meth:`WebhookRegistry.listened`): a
class registered while a user's list is cached is not delivered for that user's changes until
the list expires.
"""

from __future__ import annotations

import hashlib
import heapq
import ipaddress
import itertools
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import httpx

from ncindex.simulator.eventfilter import mongo_match
from ncindex.simulator.phpjson import php_json_decoded, php_json_encode

__all__ = [
    "JOB_ARGUMENT_LIMIT",
    "LISTENER_CACHE_SECONDS",
    "Delivery",
    "DeliveryEngine",
    "JobArgumentError",
    "Registration",
    "WebhookError",
    "WebhookRegistry",
]


class WebhookError(Exception):
    """A registration request was refused; ``status`` is the OCS/HTTP status (400/403/404/500)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


JOB_ARGUMENT_LIMIT = 4000
"""The most characters a background job's ``json_encode``-d argument may have: nextcloud/server
``lib/private/BackgroundJob/JobList.php`` ``add`` throws ``\\InvalidArgumentException`` past it."""


class JobArgumentError(Exception):
    """``JobList::add`` refused a ``WebhookCall`` job: its argument ``[$data, $webhookId,
    bin2hex(random_bytes(5))]`` (nextcloud/server ``apps/webhook_listeners/lib/Listener/
    WebhooksEventListener.php`` ``handle``), ``json_encode``-d, is over
    :data:`JOB_ARGUMENT_LIMIT` characters. Nothing catches it (nextcloud/server#58912): the
    event is never delivered and the change that dispatched it fails (a Deck card's edit
    answers an error, the card saved). Whether Nextcloud 30 had the ten-character salt already
    is a guess (the limit is then reached ten characters later)."""

    php_class = "InvalidArgumentException"


class Delivery(NamedTuple):
    """One attempted delivery: registration id, url, HTTP status or error text, envelope."""

    registration_id: int
    url: str
    status: int | str
    envelope: dict[str, Any]


@dataclass
class Registration:
    """A webhook registration as stored by webhook_listeners (authData kept in clear here)."""

    id: int
    user_id: str | None
    http_method: str
    uri: str
    event: str
    event_filter: dict[str, Any] | list[Any]
    user_id_filter: str
    headers: dict[str, str] | None
    auth_method: str
    auth_data: dict[str, str] | None
    token_needed: dict[str, Any] | None = None
    app_id: str | None = None
    cipher: str | None = field(default=None, repr=False)

    def to_json(self, *, token_needed: bool = True) -> dict[str, Any]:
        """WebhookInfo in Nextcloud's field order (``WebhookListener::jsonSerialize``);
        ``authData`` is an opaque string or None. ``tokenNeeded`` is a field from Nextcloud 33
        (nextcloud/server#55790); ``token_needed=False`` leaves it out as 30–32 do."""
        info = {
            "id": self.id,
            "appId": self.app_id,
            "userId": self.user_id,
            "httpMethod": self.http_method,
            "uri": self.uri,
            "event": self.event,
            # PHP's empty array is json_encode-d as [] whatever JSON it was decoded from
            "eventFilter": self.event_filter if self.event_filter else [],
            "userIdFilter": self.user_id_filter,
            "headers": self.headers if self.headers or self.headers is None else [],
            "authMethod": self.auth_method,
            "authData": self.cipher,
        }
        if token_needed:
            info["tokenNeeded"] = self.token_needed
        return info

    def request_headers(self) -> dict[str, str]:
        """Headers to send: registration ``headers`` merged with ``authData`` (header auth
        only: ``WebhookCall::run``)."""
        out = dict(self.headers or {})
        if self.auth_method == "header" and self.auth_data:
            out.update({str(k): str(v) for k, v in self.auth_data.items()})
        return out


# ---------------------------------------------------------------------------- registry

LISTENER_CACHE_SECONDS = 300.0
"""How long webhook_listeners caches a user's list of classes with a registration:
nextcloud/server ``apps/webhook_listeners/lib/Db/WebhookListenerMapper.php``
``getAllConfiguredEvents`` ("cache for 5 minutes", key ``eventsUsedInWebhooks_<uid>``), read at
every boot by ``lib/AppInfo/Application.php`` ``registerRuleListeners``, which adds the event
listener for those classes only."""


class WebhookRegistry:
    """Thread-safe store of registrations; validates like webhook_listeners' mapper.

    ``compatible`` returns the set of webhook-compatible event classes at call time;
    ``token_needed`` says whether the server knows the ``tokenNeeded`` parameter (33+).
    """

    def __init__(
        self,
        compatible: Callable[[], frozenset[str]],
        *,
        seed: int = 0,
        token_needed: bool = True,
    ) -> None:
        self._compatible = compatible
        self.token_needed = token_needed
        self._lock = threading.Lock()
        self._items: dict[int, Registration] = {}
        self._next_id = 1
        self._salt = f"sim-{seed}"
        #: seconds a user's listened classes stay cached (:meth:`listened`; 0: no cache)
        self.listener_cache_seconds = LISTENER_CACHE_SECONDS
        self._listened: dict[str, tuple[float, frozenset[str]]] = {}

    def listened(self, user: str | None, now: float) -> frozenset[str]:
        """The classes an event listener is added for in a request booted as ``user`` (``None``:
        booted without a user) at ``now`` (Unix seconds): those with a registration whose
        ``userIdFilter`` is empty or ``user``, as nextcloud/server
        ``WebhookListenerMapper::getAllConfiguredEvents`` answers them — from its cache while the
        list read within the last :attr:`listener_cache_seconds` is there. Registering or
        updating clears only the cached list of the registration's own ``userIdFilter``
        (``addWebhookListener``/``updateWebhookListener``: ``cache->remove(buildCacheKey(
        $userIdFilter))``; ``deleteById`` clears nothing), so a user's list cached before a
        class was registered with an empty filter hides that class's events for up to five
        minutes."""
        key = user or ""
        with self._lock:
            cached = self._listened.get(key)
            if cached is not None and cached[0] > now:
                return cached[1]
            classes = frozenset(
                r.event for r in self._items.values() if r.user_id_filter in ("", key)
            )
            if self.listener_cache_seconds > 0:
                self._listened[key] = (now + self.listener_cache_seconds, classes)
            return classes

    def _validate(self, params: dict[str, Any]) -> dict[str, Any]:
        for name in ("httpMethod", "uri", "event"):
            value = params.get(name)
            if value is None:
                raise WebhookError(400, f'Missing required parameter "{name}"')
            if not isinstance(value, str):
                raise WebhookError(400, f'Parameter "{name}" must be a string')
        # WebhooksController::create: AuthMethod::from($authMethod ?? 'none'): only a missing
        # or null authMethod is "none"; "" is no AuthMethod case (\ValueError → OCS 400)
        auth_method = params.get("authMethod")
        if auth_method is None:
            auth_method = "none"
        if auth_method not in ("none", "header"):
            raise WebhookError(400, "This auth method does not exist")
        # WebhookListenerMapper::addWebhookListener: ltrim($event, '\\'), then class_exists and
        # is_a(IWebhookCompatibleEvent) or \UnexpectedValueException → OCSBadRequestException
        # (WebhooksController::create), i.e. OCS 400 with the exception's message
        event = str(params["event"]).lstrip("\\")
        if event not in self._compatible():
            raise WebhookError(400, f"{event} is not an event class compatible with webhooks")
        # ?array $eventFilter: a JSON object or list, stored as given (WebhookListenerMapper::
        # addWebhookListener: $eventFilter ?? []); a query of queries is a list
        event_filter = params.get("eventFilter")
        if event_filter is None:
            event_filter = []
        if not isinstance(event_filter, dict | list):
            raise WebhookError(400, "eventFilter must be an object")  # a guess: TypeError
        headers = params.get("headers")
        if headers == []:
            headers = {}
        if headers is not None and not isinstance(headers, dict):
            raise WebhookError(400, "headers must be an object")
        # WebhookListener::setAuthDataClear: null with the header method is refused; any
        # array (an empty one too, and whatever the method) is stored, encrypted
        auth_data = params.get("authData")
        if auth_data == []:
            auth_data = {}
        if auth_data is None and auth_method == "header":
            raise WebhookError(
                400, "Header auth method needs an associative array of headers as auth data"
            )
        if auth_data is not None and not isinstance(auth_data, dict):
            raise WebhookError(400, "authData must be an object")
        user_id_filter = params.get("userIdFilter") or ""
        return {
            "http_method": params["httpMethod"],
            "uri": params["uri"],
            "event": event,
            "event_filter": event_filter,
            "user_id_filter": str(user_id_filter),
            "headers": {str(k): str(v) for k, v in headers.items()} if headers else headers,
            "auth_method": auth_method,
            "auth_data": (
                None if auth_data is None else {str(k): str(v) for k, v in auth_data.items()}
            ),
            "token_needed": params.get("tokenNeeded") if self.token_needed else None,
        }

    def _cipher(self, reg_id: int, auth_data: dict[str, str] | None) -> str | None:
        if auth_data is None:
            return None
        digest = hashlib.sha256(
            f"{self._salt}:{reg_id}:{php_json_encode(auth_data)}".encode()
        ).hexdigest()
        return f"{digest}|{hashlib.md5(digest.encode(), usedforsecurity=False).hexdigest()}|3"

    def create(self, user_id: str | None, params: dict[str, Any]) -> Registration:
        """Validate ``params`` (OCS names) and store a registration; :class:`WebhookError`."""
        fields = self._validate(params)
        with self._lock:
            reg = Registration(id=self._next_id, user_id=user_id, **fields)
            reg.cipher = self._cipher(reg.id, reg.auth_data)
            self._items[reg.id] = reg
            self._next_id += 1
            self._listened.pop(reg.user_id_filter, None)
            return reg

    def update(self, reg_id: int, user_id: str | None, params: dict[str, Any]) -> Registration:
        """Replace every field of registration ``reg_id`` (POST /webhooks/{id}).

        An id that names no registration is answered like an update all the same and stores
        nothing: nextcloud/server ``apps/webhook_listeners/lib/Db/WebhookListenerMapper.php``
        ``updateWebhookListener`` returns ``QBMapper::update``'s entity, which does not look
        at how many rows the UPDATE changed."""
        fields = self._validate(params)
        with self._lock:
            reg = Registration(id=reg_id, user_id=user_id, **fields)
            reg.cipher = self._cipher(reg.id, reg.auth_data)
            if reg_id in self._items:
                self._items[reg_id] = reg
            self._listened.pop(reg.user_id_filter, None)
            return reg

    def info(self, reg: Registration) -> dict[str, Any]:
        """WebhookInfo of ``reg`` as this server version serializes it."""
        return reg.to_json(token_needed=self.token_needed)

    def get(self, reg_id: int) -> Registration | None:
        """The registration ``reg_id`` or ``None``."""
        with self._lock:
            return self._items.get(reg_id)

    def delete(self, reg_id: int) -> bool:
        """Delete a registration; True when one was deleted."""
        with self._lock:
            return self._items.pop(reg_id, None) is not None

    def delete_by_app(self, app_id: str) -> int:
        """Delete every registration of an ExApp; returns the count."""
        with self._lock:
            ids = [r.id for r in self._items.values() if r.app_id == app_id]
            for reg_id in ids:
                del self._items[reg_id]
            return len(ids)

    def list(self, uri: str | None = None) -> list[Registration]:
        """All registrations (or those with exactly ``uri``), by id."""
        with self._lock:
            regs = sorted(self._items.values(), key=lambda r: r.id)
        return [r for r in regs if uri is None or r.uri == uri]

    def matching(self, envelope: dict[str, Any]) -> Iterator[Registration]:
        """The registrations that fire for this envelope (class, ``userIdFilter``,
        ``eventFilter``), by id, each yielded before the next filter is evaluated: nextcloud/
        server ``WebhooksEventListener::handle`` queues each job as its filter passes, so the
        jobs queued before a filter throws (:class:`~ncindex.simulator.eventfilter.
        FilterError`, raised from here) stay queued."""
        cls = envelope["event"]["class"]
        user = envelope.get("user")
        for reg in self.list():
            if reg.event != cls:
                continue
            if reg.user_id_filter and (user is None or user.get("uid") != reg.user_id_filter):
                continue
            if mongo_match(envelope, reg.event_filter):
                yield reg


# ---------------------------------------------------------------------------- delivery


@dataclass(order=True)
class _Job:
    due: float
    seq: int
    registration_id: int = field(compare=False)
    envelope: dict[str, Any] = field(compare=False)


def _is_local(host: str) -> bool:
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    for info in infos:
        addr = ipaddress.ip_address(info[4][0])
        if addr.is_private or addr.is_loopback or addr.is_link_local or addr.is_reserved:
            return True
    return False


class DeliveryEngine:
    """Posts queued envelopes in background threads, once each, like ``WebhookCall`` jobs.

    ``delay`` is a ``(min, max)`` range in seconds drawn per job; ``reorder`` shuffles jobs that
    are due together; ``drop_rate`` (0–1) drops jobs silently; ``timeout`` seconds per request;
    ``workers`` parallel senders; ``allow_local`` mirrors ``allow_local_remote_servers``.
    """

    def __init__(
        self,
        registry: WebhookRegistry,
        *,
        delay: tuple[float, float] = (0.0, 0.0),
        drop_rate: float = 0.0,
        reorder: bool = False,
        seed: int = 0,
        timeout: float = 30.0,
        workers: int = 4,
        user_agent: str = "Nextcloud Server Crawler",
        allow_local: bool = True,
    ) -> None:
        self.registry = registry
        self.delay = (float(delay[0]), float(delay[1]))
        self.drop_rate = float(drop_rate)
        self.reorder = reorder
        self.timeout = timeout
        self.user_agent = user_agent
        self.allow_local = allow_local
        self.deliveries: list[Delivery] = []
        self.dropped: list[tuple[int, dict[str, Any]]] = []
        self._rng = random.Random(seed)
        self._seq = itertools.count()
        self._heap: list[_Job] = []
        self._cond = threading.Condition()
        self._inflight = 0
        self._finished = 0
        self._fast_forward = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nc-webhook")
        self._client = httpx.Client(timeout=timeout, follow_redirects=True, trust_env=False)
        for name in ("accept", "user-agent"):
            self._client.headers.pop(name, None)

    def enqueue(self, registration_id: int, envelope: dict[str, Any]) -> None:
        """Queue one delivery of ``envelope`` for a registration (snapshot taken by caller),
        as ``JobList::add`` queues a ``WebhookCall``: raises :class:`JobArgumentError` for an
        argument over :data:`JOB_ARGUMENT_LIMIT` characters.

        What is sent is the envelope as the job gets it back, not as it was queued:
        nextcloud/server ``lib/private/BackgroundJob/JobList.php`` stores the argument
        ``json_encode``-d and ``buildJob`` hands it to the job as ``json_decode($row['argument'],
        true)``; ``apps/webhook_listeners/lib/BackgroundJobs/WebhookCall.php`` ``run`` sends
        ``json_encode($data)`` of that (:func:`~ncindex.simulator.phpjson.php_json_decoded`:
        an empty object arrives as ``[]``, ``{"0": …, "1": …}`` as a list)."""
        # the salt's value (bin2hex(random_bytes(5))) is never sent: only its length counts
        argument = php_json_encode([envelope, registration_id, "0" * 10])
        if len(argument) > JOB_ARGUMENT_LIMIT:
            raise JobArgumentError(
                "Background job arguments can't exceed 4000 characters (json encoded)"
            )
        with self._cond:
            if self._closed:
                return
            if self.drop_rate and self._rng.random() < self.drop_rate:
                self.dropped.append((registration_id, envelope))
                return
            lo, hi = self.delay
            wait = self._rng.uniform(lo, hi) if hi > lo else lo
            heapq.heappush(
                self._heap,
                _Job(
                    time.monotonic() + wait,
                    next(self._seq),
                    registration_id,
                    php_json_decoded(envelope),
                ),
            )
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="nc-webhook-scheduler", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def pending(self) -> int:
        """Jobs queued or being sent."""
        with self._cond:
            return len(self._heap) + self._inflight

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    now = time.monotonic()
                    if self._heap and (self._fast_forward or self._heap[0].due <= now):
                        break
                    timeout = (self._heap[0].due - now) if self._heap else None
                    self._cond.wait(timeout)
                if self._closed:
                    return
                now = time.monotonic()
                due: list[_Job] = []
                while self._heap and (self._fast_forward or self._heap[0].due <= now):
                    due.append(heapq.heappop(self._heap))
                if self.reorder:
                    self._rng.shuffle(due)
                self._inflight += len(due)
            for job in due:
                self._pool.submit(self._attempt, job)

    def _attempt(self, job: _Job) -> None:
        reg = self.registry.get(job.registration_id)
        url = reg.uri if reg is not None else ""
        status: int | str
        try:
            if reg is None:
                status = f"error: webhook {job.registration_id} no longer exists"
            else:
                status = self._send(reg, job.envelope)
        except Exception as exc:  # one attempt, errors are recorded, never retried
            status = f"error: {type(exc).__name__}: {exc}"
        with self._cond:
            self.deliveries.append(Delivery(job.registration_id, url, status, job.envelope))
            self._inflight -= 1
            self._finished += 1
            self._cond.notify_all()

    def _send(self, reg: Registration, envelope: dict[str, Any]) -> int | str:
        host = urlsplit(reg.uri).hostname or ""
        if not self.allow_local and _is_local(host):
            return f'error: LocalServerException: Host "{host}" violates local access rules'
        headers = {"User-Agent": self.user_agent, "Accept-Encoding": "gzip"}
        headers.update(reg.request_headers())
        body = php_json_encode(envelope).encode()
        try:
            resp = self._client.request(reg.http_method, reg.uri, content=body, headers=headers)
        except httpx.TimeoutException as exc:
            return f"error: timeout: {exc}"
        except httpx.HTTPError as exc:
            return f"error: {type(exc).__name__}: {exc}"
        return resp.status_code

    def flush(self, timeout: float = 10.0, *, fast_forward: bool = False) -> int:
        """Block until every queued job was attempted; returns how many finished meanwhile.

        ``fast_forward`` ignores the remaining delays. Raises ``TimeoutError`` after
        ``timeout`` seconds with jobs still pending.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            start = self._finished
            if fast_forward:
                self._fast_forward += 1
                self._cond.notify_all()
            try:
                while self._heap or self._inflight:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(
                            f"{len(self._heap) + self._inflight} webhook deliveries still pending"
                        )
                    self._cond.wait(left)
            finally:
                if fast_forward:
                    self._fast_forward -= 1
            return self._finished - start

    def close(self) -> None:
        """Stop the scheduler, drop what is still queued and close the HTTP client."""
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify_all()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._client.close()
