"""What ``ncindex status`` shows: queue depths, the last scan per user and doc type, index lag,
and dead letters (DESIGN §6, §12).

Everything is read from Redis: the broker's queues, reserved tasks and index lag exactly as
the ``ncindex_queue_depth``, ``ncindex_tasks_reserved`` and ``ncindex_index_lag_seconds``
gauges define them (:class:`ncindex.telemetry.QueueCollector`: how far the workers are behind
what was queued), the scan summaries :mod:`ncindex.sync.reconcile` records, and the dead-letter keys
(``<namespace>:deadletter`` and ``<namespace>:deadletter:*``) the workers write when they park a
document.

Changes no webhook announced are only known once a scan finds them, so each scan also shows
``in_sync_age_seconds``: the time since the index was last found equal to Nextcloud for that
user and doc type (``in_sync_at``, the start of the last clean scan; ``None`` before one).
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from ncindex.accounts import refused_accounts
from ncindex.names import QUEUES, Names
from ncindex.sync.reconcile import last_scans_key
from ncindex.telemetry import QueueCollector

_SAMPLE = 5


def queues(client: redis.Redis, keys: Names) -> dict[str, Any]:
    """``{"depth": {queue: n}, "reserved": n, "lag": seconds}`` as the gauges read them."""
    return QueueCollector(client, QUEUES, keys=keys).read()


def settled(client: redis.Redis, keys: Names) -> bool:
    """Whether deployment ``keys`` has nothing left to do: no message waiting on a queue, none
    delivered and unacknowledged (a running task, or a countdown a worker holds) and no
    debounce key (an event whose task is not yet sent, or sent and not yet started)."""
    if any(client.llen(keys.queue_list(q)) for q in QUEUES):
        return False
    if client.hlen(keys.unacked) or client.zcard(keys.unacked_index):
        return False
    return not any(True for _ in client.scan_iter(f"{keys.debounce_prefix}*", count=1000))


def last_scans(
    client: redis.Redis, keys: Names, now: float | None = None
) -> dict[str, dict[str, Any]]:
    """``"{user}:{doc_type}"`` → the last scan's summary with ``in_sync_age_seconds``."""
    now = time.time() if now is None else now
    out: dict[str, dict[str, Any]] = {}
    for key, raw in sorted(client.hgetall(last_scans_key(keys)).items()):
        summary = json.loads(raw)
        in_sync = summary.get("in_sync_at")
        summary["in_sync_age_seconds"] = None if in_sync is None else max(0, int(now - in_sync))
        out[key.decode()] = summary
    return out


def dead_letters(client: redis.Redis, keys: Names) -> dict[str, Any]:
    """Each dead-letter key (the ``<namespace>:deadletter`` hash of
    :mod:`ncindex.index.deadletter` and any ``<namespace>:deadletter:*`` key) with its type,
    size and a few of its entries."""
    out: dict[str, Any] = {}
    for raw_key in sorted(client.scan_iter(match=keys.deadletter + "*", count=500)):
        key = raw_key.decode()
        kind = client.type(raw_key).decode()
        entry: dict[str, Any] = {"type": kind}
        if kind == "string":
            entry["size"] = 1
            entry["sample"] = [_text(client.get(raw_key))]
        elif kind == "hash":
            entry["size"] = int(client.hlen(raw_key))
            items = list(client.hscan_iter(raw_key, count=_SAMPLE))[:_SAMPLE]
            entry["sample"] = {_text(k): _text(v) for k, v in items}
        elif kind == "list":
            entry["size"] = int(client.llen(raw_key))
            entry["sample"] = [_text(v) for v in client.lrange(raw_key, 0, _SAMPLE - 1)]
        elif kind == "set":
            entry["size"] = int(client.scard(raw_key))
            entry["sample"] = sorted(_text(v) for v in client.srandmember(raw_key, _SAMPLE))
        elif kind == "zset":
            entry["size"] = int(client.zcard(raw_key))
            entry["sample"] = [_text(v) for v in client.zrange(raw_key, 0, _SAMPLE - 1)]
        out[key] = entry
    return out


def collect_status(client: redis.Redis, keys: Names, now: float | None = None) -> dict[str, Any]:
    """The whole status of deployment ``keys``: ``queues`` (depth per queue), ``reserved``,
    ``index_lag_seconds`` (the gauge's definition), ``scans``, ``dead_letters`` and
    ``accounts_refused`` (user id → when and where Nextcloud answered 401)."""
    pipeline = queues(client, keys)
    return {
        "queues": pipeline["depth"],
        "reserved": pipeline["reserved"],
        "index_lag_seconds": round(pipeline["lag"], 1),
        "scans": last_scans(client, keys, now),
        "dead_letters": dead_letters(client, keys),
        "accounts_refused": refused_accounts(client, keys),
    }


def _text(value: bytes | None) -> str:
    return "" if value is None else value.decode("utf-8", errors="replace")
