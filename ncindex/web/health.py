"""``/livez`` and ``/readyz`` for the web apps (DESIGN §12).

``/livez`` answers as long as the process serves requests (no dependency is touched, so a slow
model load never fails a liveness probe). ``/readyz`` runs the app's named checks and answers
503 with each check's result while one fails; its ``reports`` add facts that do not make the
process unready (how many accounts Nextcloud refuses: the others still work). Anyone who
reaches the port may ask, so no report names a user (``ncindex status`` does, for the
operator). :class:`SharedRedis` is the check of a Redis that every replica shares, which a
running app outlives.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import redis
import structlog
from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue

from ncindex.accounts import refused_configured
from ncindex.names import Names

log = structlog.get_logger(__name__)

Check = Callable[[], None]


class SharedRedis:
    """A readiness check of the Redis every replica of an app shares: it fails until ``check``
    has passed once in this process (so a replica started with a wrong ``NCINDEX_REDIS_URL``
    never takes traffic, and a rollout with it stalls) and whenever ``check`` raises something
    other than ``redis.RedisError``, such as :class:`~ncindex.errors.RedisTooOld`. After that,
    a Redis that stops answering keeps the app ready; :attr:`outage` names the error's class
    (``None`` while Redis answers), for the ``redis_outage`` report.

    Why: unready replicas are taken out of rotation, and with one Redis for all of them that
    takes every replica out and helps no request. The search API answers without Redis (its
    calls go through a circuit breaker); the receiver answers a delivery 503 itself and keeps
    its user for a rescan once Redis is back, where a delivery refused by a proxy without
    backends is lost to it (Nextcloud sends each once: nextcloud/server
    ``apps/webhook_listeners/lib/BackgroundJobs/WebhookCall.php`` ``run`` only logs a failure).
    """

    def __init__(self, check: Check) -> None:
        self.check = check
        self.answered = False
        self.outage: str | None = None
        try:  # at start: a replica whose Redis is down as it starts stays unready
            self()
        except Exception as exc:  # reported by the probe; the app starts all the same
            log.warning("redis_not_ready_at_start", error=f"{exc}")

    def __call__(self) -> None:
        """Return when the app is ready as far as Redis goes; raise when it is not."""
        try:
            self.check()
        except redis.RedisError as exc:
            if not self.answered:
                raise
            self.outage = type(exc).__name__
            log.warning("redis_outage_app_stays_ready", error=f"{exc}")
            return
        self.answered, self.outage = True, None


def shared_reports(
    redis_ready: SharedRedis, client: redis.Redis, names: Names, accounts: Collection[str]
) -> dict[str, Callable[[], Any]]:
    """The ``/readyz`` reports every app gives: ``redis_outage`` (:attr:`SharedRedis.outage`)
    and ``accounts_refused``, how many of the configured ``accounts`` Nextcloud refuses in
    deployment ``names`` (:func:`ncindex.accounts.refused_configured`) — never which: anyone
    who reaches the port may ask."""
    return {
        "redis_outage": lambda: redis_ready.outage,
        "accounts_refused": lambda: len(refused_configured(client, names, accounts)),
    }


def health_blueprint(
    checks: Mapping[str, Check], reports: Mapping[str, Callable[[], Any]] | None = None
) -> Blueprint:
    """Blueprint with ``/livez`` and ``/readyz``; a check passes when it returns and fails
    when it raises (its exception class is reported, its text logged). Each of ``reports``
    adds its JSON-able value under its name (``null`` when it raises), readiness unchanged."""
    bp = Blueprint("health", __name__)

    @bp.get("/livez")
    def livez() -> ResponseReturnValue:
        return jsonify(status="ok")

    @bp.get("/readyz")
    def readyz() -> ResponseReturnValue:
        body, status = readiness(checks, reports)
        return jsonify(body), status

    return bp


def readiness(
    checks: Mapping[str, Check], reports: Mapping[str, Callable[[], Any]] | None = None
) -> tuple[dict[str, Any], int]:
    """The ``/readyz`` body and HTTP status (200, or 503 while a check fails) of any web app:
    ``{"status": "ok" | "unavailable", "checks": {name: "ok" | "fail: <class>"}, **reports}``.
    A check passes when it returns and fails when it raises (its exception class is reported,
    its text logged); each report adds its JSON-able value (``null`` when it raises)."""
    results = {}
    for name, check in checks.items():
        try:
            check()
            results[name] = "ok"
        except Exception as exc:  # a readiness probe reports, it never raises
            # the error's class only: its text may name hosts or paths (anyone may ask)
            log.warning("readiness_check_failed", check=name, error=f"{exc}")
            results[name] = f"fail: {type(exc).__name__}"
    ready = all(v == "ok" for v in results.values())
    extra = {}
    for name, report in (reports or {}).items():
        try:
            extra[name] = report()
        except Exception as exc:  # a report is best effort, like the checks
            log.warning("readiness_report_failed", report=name, error=f"{exc}")
            extra[name] = None
    body = {"status": "ok" if ready else "unavailable", "checks": results, **extra}
    return body, 200 if ready else 503
