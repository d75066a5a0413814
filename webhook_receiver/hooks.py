"""``POST /hooks/nextcloud``: authenticate, validate, map, debounce, enqueue (DESIGN §5).

Answers: 202 ``{"queued": n, "coalesced": m}``, with ``"resolving": reason`` (``no_user``,
``unknown_user``) when the event names no configured user, so its nodes are indexed only for
the configured accounts that can see them (``ncindex.resolve_node``: none may); 202
``{"queued": 0, "ignored": reason}`` for an event ncindex does not act on; 401 for a missing
or wrong secret; 413 for a body over the limit; 400 with ``code`` and ``field`` for a body
that is not a valid envelope (or cannot be read whole: broken chunked framing, fewer bytes
than its Content-Length); 503 when Redis or the broker did not take the task — never a 2xx
for an event that was not queued.

Nextcloud never delivers a webhook twice (nextcloud/server
``apps/webhook_listeners/lib/BackgroundJobs/WebhookCall.php``: a ``QueuedJob``, removed before
it runs, whose ``run`` only logs a non-2xx answer or a failed request), so the users of the
deliveries refused 503 are kept (in this process) and, once the broker takes a task again,
``ncindex.rescan_users`` is sent for them: their scans find what those deliveries would have
said, without waiting for the next period. The send is tried with each later delivery and,
whether or not one comes, every :data:`RETRY_AFTER_SECONDS` by a thread of the receiver's own.
"""

from __future__ import annotations

import hmac
import json
import threading

import redis
import structlog
from flask import Blueprint, Response, request

from ncindex import names, strict_json
from ncindex.errors import BrokerUnavailable, EnvelopeError
from ncindex.ingest.events import Action, parse_envelope, plan_envelope
from ncindex.ingest.queueing import Producer, enqueue
from ncindex.settings import Settings
from ncindex.telemetry import WEBHOOK_EVENTS
from ncindex.web.problems import problem, read_body

log = structlog.get_logger(__name__)
_QUEUED = WEBHOOK_EVENTS.labels("queued", "")
_COALESCED = WEBHOOK_EVENTS.labels("coalesced", "")
#: Seconds a refused delivery's ``Retry-After`` names, and between two tries of the receiver's
#: thread to send the scan of the refused deliveries' users.
RETRY_AFTER_SECONDS = 5


def accepted(**counts: int | str) -> Response:
    """A 202 answer with ``counts`` as its JSON body (cheaper than ``jsonify``)."""
    return Response(json.dumps(counts), status=202, mimetype="application/json")


class Receiver:
    """The receiver's state: settings, the task producer and Redis (debounce keys)."""

    def __init__(self, settings: Settings, producer: Producer, redis_client: redis.Redis) -> None:
        self.settings = settings
        self.producer = producer
        self.redis = redis_client
        # the current secret, and while it is rotated the former one, which Nextcloud's
        # registrations carry until `ncindex webhooks register` renews them
        self._secrets = [
            s.get_secret_value().encode("utf-8")
            for s in (settings.webhook_secret, settings.webhook_previous_secret)
            if s.get_secret_value()
        ]
        self._missed: set[str] = set()  # users of deliveries refused 503, not yet rescanned
        self._missed_lock = threading.Lock()
        self._retrier: threading.Thread | None = None  # runs while ``_missed`` holds users
        self._closed = threading.Event()

    def missed(self, actions: list[Action]) -> None:
        """Keep the users of a delivery refused 503 (every account when an action names none:
        it was to be resolved by file id), and start the thread that sends their scan once the
        broker takes it, should no other delivery come (a quiet Nextcloud would otherwise leave
        them to the next period's scan)."""
        users = {a.kwargs.get("user") for a in actions}
        named = {u for u in users if isinstance(u, str)}
        with self._missed_lock:
            self._missed |= named if users == named else named | set(self.settings.accounts)
            if self._retrier is None:
                self._retrier = threading.Thread(
                    target=self._retry_missed, name="ncindex-missed-rescan", daemon=True
                )
                self._retrier.start()

    def close(self) -> None:
        """End the retrier thread at once (within its wait, not after it): the users it kept
        are left to the next period's scan. For a receiver dropped while its process goes on,
        as a test's is: otherwise, with its Redis gone, the thread would try every
        :data:`RETRY_AFTER_SECONDS` for the life of the process."""
        self._closed.set()

    def _retry_missed(self) -> None:
        """The retrier thread: every :data:`RETRY_AFTER_SECONDS`, :meth:`catch_up`; ends once no
        user is kept (a later :meth:`missed` starts another), or once :meth:`close` is called."""
        while not self._closed.wait(RETRY_AFTER_SECONDS):
            self.catch_up()
            with self._missed_lock:
                if not self._missed:
                    self._retrier = None
                    return

    def catch_up(self) -> None:
        """Once the broker took a task again: send ``ncindex.rescan_users`` for the users kept
        by :meth:`missed` (kept again when that send fails too)."""
        if not self._missed:  # the common case, read without the lock
            return
        with self._missed_lock:
            users, self._missed = self._missed, set()
        if not users:
            return
        try:
            self.producer.send_task(
                names.RESCAN_USERS, kwargs={"users": sorted(users)}, queue=names.RECONCILE
            )
        except Exception as exc:  # kombu/redis raise several types: try with the next one
            with self._missed_lock:
                self._missed |= users
            log.warning("missed_rescan_not_sent", users=len(users), error=str(exc))
            return
        log.info("missed_rescan_sent", users=len(users))

    def authorized(self, header_value: str | None) -> bool:
        """Constant-time comparison of the secret header (``hmac.compare_digest``) with the
        UTF-8 bytes of ``webhook_secret`` and, when set, of ``webhook_previous_secret`` (each
        compared, whichever matches).

        WSGI servers hand header values over decoded as latin-1 (PEP 3333), so
        ``header_value.encode("latin-1")`` gives back the bytes the client sent: a non-ASCII
        secret matches when sent as UTF-8. A value that is not latin-1 (only possible outside
        a real server) is unauthorized."""
        try:
            sent = (header_value or "").encode("latin-1")
        except UnicodeEncodeError:
            return False
        matches = [hmac.compare_digest(sent, secret) for secret in self._secrets]
        return any(matches)


def hooks_blueprint(receiver: Receiver) -> Blueprint:
    """Blueprint with the delivery endpoint bound to ``receiver``."""
    bp = Blueprint("hooks", __name__)

    @bp.post("/hooks/nextcloud")
    def nextcloud() -> Response:
        if not receiver.authorized(request.headers.get(receiver.settings.webhook_secret_header)):
            WEBHOOK_EVENTS.labels("rejected", "unauthenticated").inc()
            return problem(
                401,
                "unauthenticated",
                "missing or wrong webhook secret",
                field=receiver.settings.webhook_secret_header,
            )
        # 413 past the limit, with or without a Content-Length (chunked uploads too)
        body = read_body(request, receiver.settings.webhook_max_body_bytes)
        try:
            # Nextcloud sends no Content-Type unless registered with one
            raw = strict_json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            WEBHOOK_EVENTS.labels("rejected", "invalid_json").inc()
            return problem(400, "invalid_json", f"body is not JSON: {exc}", field="body")
        try:
            envelope = parse_envelope(raw)
        except EnvelopeError as exc:
            WEBHOOK_EVENTS.labels("rejected", "invalid_envelope").inc()
            return problem(400, "invalid_envelope", exc.message, field=exc.field)
        plan = plan_envelope(envelope, receiver.settings.accounts)
        if plan.ignored:
            WEBHOOK_EVENTS.labels("ignored", plan.ignored).inc()
            return accepted(queued=0, ignored=plan.ignored)
        try:
            queued, coalesced = enqueue(
                receiver.producer,
                receiver.redis,
                plan.actions,
                receiver.settings.debounce_seconds,
                keys=receiver.settings.names,
                batch_docs=receiver.settings.index_batch_docs,
            )
        except BrokerUnavailable as exc:
            WEBHOOK_EVENTS.labels("rejected", "backend_unavailable").inc()
            log.warning("enqueue_failed", error=str(exc))
            receiver.missed(plan.actions)
            return problem(
                503,
                "backend_unavailable",
                "could not queue the event",
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        receiver.catch_up()
        if queued:
            _QUEUED.inc(queued)
        if coalesced:
            _COALESCED.inc(coalesced)
        if plan.resolving is None:
            return accepted(queued=queued, coalesced=coalesced)
        uid = envelope.user.uid if envelope.user is not None else None
        log.info("delivery_resolving", reason=plan.resolving, user=uid, queued=queued)
        return accepted(queued=queued, coalesced=coalesced, resolving=plan.resolving)

    return bp
