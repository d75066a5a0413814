"""Enqueue planned actions on the broker, with per-document debounce (DESIGN §5).

One save fires several events (Created + Written, or Written twice). The first event for a
debounce key claims ``<namespace>:debounce:<key>`` in Redis (``SET NX GET`` with an expiry), sends
its task with a countdown of ``debounce_seconds`` and marks the key sent; repeats inside the
window find the key sent and are coalesced (see :func:`enqueue`; one that finds it still being
sent claims it again for a moment, :data:`CLAIM_WAIT_SECONDS`). The operation is part of
the key (``index:…``, ``evict:…``), so a pending index never swallows a delete. The task
deletes the key when it starts, before it reads Nextcloud, so an event arriving while it runs
schedules a fresh run.

Tasks are sent by name (``send_task``), so the receiver never imports the workers' code,
fastembed or the vector store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import time
from collections.abc import Iterable
from typing import Any, Protocol, cast

import redis
import structlog
from celery import Celery
from kombu import Queue
from redis.commands.core import Script

from ncindex import names
from ncindex.celery_broker import celery_broker
from ncindex.errors import BrokerUnavailable, RedisTooOld
from ncindex.ingest.events import Action, index_node
from ncindex.names import Names
from ncindex.progress import Progress, task_subject
from ncindex.settings import Settings

log = structlog.get_logger(__name__)

#: A debounce key's value while its claimer sends the task: ``pending:<token>``.
PENDING = b"pending:"
#: A debounce key's value once its task is on the queue: only such a key coalesces events.
SENT = b"sent"
#: The most actions one :func:`send_actions` call sends itself; more are handed to
#: ``ncindex.send_actions`` tasks of this many each, so a tag event on thousands of files is
#: answered in well under Nextcloud's 30 s client timeout (each publish takes ~1 ms).
FAN_OUT = 100
#: The oldest Redis whose ``SET`` takes ``NX`` and ``GET`` together (the debounce claim).
MIN_REDIS_VERSION = (7, 0)
#: For each key (``KEYS``) still holding the token ``ARGV[1]``: marks it ``sent`` (keeping its
#: expiry) where ``ARGV[i + 1]`` is ``1``, deletes it where ``0`` (compare-and-set/-delete).
# No registered client: each call passes one (Script.__call__'s ``client``), and the script is
# bytes, so none is needed for its encoding either; redis-py's annotation asks for a client.
_SETTLE = Script(
    None,  # type: ignore[arg-type]
    b"for i, key in ipairs(KEYS) do "
    b"if redis.call('GET', key) == ARGV[1] then "
    b"if ARGV[i + 1] == '1' then redis.call('SET', key, 'sent', 'KEEPTTL') "
    b"else redis.call('DEL', key) end end end "
    b"return 0",
)
#: Appends ``ARGV[3..]`` to the list ``KEYS[1]`` (a user's gathered actions) and sets
#: ``KEYS[2]`` (its flush marker) to ``ARGV[1]`` for ``ARGV[2]`` ms unless it is set: answers 1
#: when it was set here (the caller sends the flush task), else 0. One script, so a flush's
#: take (:data:`_TAKE`) runs wholly before or after it: an action it misses finds no marker.
_GATHER = Script(
    None,  # type: ignore[arg-type]
    b"redis.call('RPUSH', KEYS[1], unpack(ARGV, 3)) "
    b"if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end "
    b"return 0",
)
#: A flush run's take: deletes the marker ``KEYS[3]``; unless the run already holds a taken
#: list ``KEYS[2]`` (a redelivery), renames the gathered list ``KEYS[1]`` to it, expiring in
#: ``ARGV[1]`` s; answers the taken list's entries.
_TAKE = Script(
    None,  # type: ignore[arg-type]
    b"redis.call('DEL', KEYS[3]) "
    b"if redis.call('EXISTS', KEYS[2]) == 0 and redis.call('EXISTS', KEYS[1]) == 1 then "
    b"redis.call('RENAME', KEYS[1], KEYS[2]) redis.call('EXPIRE', KEYS[2], ARGV[1]) end "
    b"return redis.call('LRANGE', KEYS[2], 0, -1)",
)
#: How long the sweep's flush marker lives, seconds (a receiver's lives as long as the
#: debounce keys it guards).
FLUSH_MARKER_SECONDS = 60
#: How long a flush run keeps what it took, seconds: past any retry of its task.
TAKEN_SECONDS = 86_400
#: A taken list older than this (seconds) belongs to a flush run that gave up — its retries
#: (``workers.tasks.RETRY``: at most 8, each within 300 s) and the broker's visibility
#: timeout are long past: :func:`sweep_gathered` puts it back on its user's list.
TAKEN_STALE_SECONDS = 3_600
#: Moves the list ``KEYS[1]`` (a stale taken list) onto the end of ``KEYS[2]`` (its user's
#: gathered list) and deletes it; answers how many entries moved.
_PUT_BACK = Script(
    None,  # type: ignore[arg-type]
    b"local items = redis.call('LRANGE', KEYS[1], 0, -1) "
    b"for _, item in ipairs(items) do redis.call('RPUSH', KEYS[2], item) end "
    b"redis.call('DEL', KEYS[1]) return #items",
)
#: How long a sender that found a key claimed by another sender, still pending, keeps claiming
#: it again (seconds, pauses of 1 ms doubling up to 16 ms) before it sends its own task: one
#: save's events (Created + Written) arrive together, and the other sender's publish takes a
#: millisecond or two — longer on a busy machine — after which the key is sent (coalesce) or
#: released (claim it).
CLAIM_WAIT_SECONDS = 0.1
#: Publishing retries briefly, then fails: the receiver must answer 503, not hang.
PUBLISH_RETRY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}


def celery_app(settings: Settings) -> Celery:
    """A Celery app on ``settings.redis_url`` without tasks (a producer; the workers add
    theirs), its Redis keys under the deployment's namespace (kombu's ``global_keyprefix``,
    :attr:`~ncindex.names.Names.broker_prefix`): late acks, reject-on-worker-lost, prefetch 1,
    JSON only, worker task events, time limits below the Redis visibility timeout (DESIGN §6),
    unacked messages of a dead worker swept back every tenth of the visibility timeout.

    Workers send task events (Flower's task list and its ``/metrics``); the producer sends no
    ``task-sent`` event: it would cost a second publish per queued task and nothing reads it.

    The broker is ``settings.redis_url`` said in kombu's terms (:func:`celery_broker`: a
    ``unix://`` URL as ``redis+socket://``, the query as transport options, ``rediss://``'s
    TLS options as ``broker_use_ssl``); the URL's own transport options (``?socket_timeout=``,
    …) win over the defaults below, as they do for redis-py. The URL itself is kept as
    ``app.conf.ncindex_redis_url`` for the code that reaches Redis through redis-py."""
    broker = celery_broker(settings.redis_url)
    app = Celery("ncindex", broker=broker.url, set_as_current=False)
    # kombu restores a dead worker's unacked messages in sweeps every ``interval × throttle``
    # seconds (default 10 × 10): sweep every tenth of the visibility timeout (1–10 s) instead,
    # so a killed worker's tasks come back soon after the timeout, not up to 100 s later.
    transport = {
        "visibility_timeout": settings.visibility_timeout,
        "unacked_restore_interval": max(1, min(10, settings.visibility_timeout // 10)),
        "unacked_restore_throttle": 1,
        # a Redis that accepts connections but does not answer must fail a publish in
        # seconds (the receiver answers 503), not hold the request; above BRPOP's 1 s poll
        "socket_timeout": 2,
        "socket_connect_timeout": 2,
        "global_keyprefix": settings.names.broker_prefix,
    } | broker.transport_options
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        result_backend=None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_soft_time_limit=settings.task_soft_time_limit,
        task_time_limit=settings.task_time_limit,
        broker_transport_options=transport,
        broker_use_ssl=broker.use_ssl,
        result_backend_transport_options=transport,
        visibility_timeout=settings.visibility_timeout,
        worker_send_task_events=True,
        task_send_sent_event=False,
        task_default_queue=names.INGEST,
        task_queues=[Queue(name) for name in names.QUEUES],
        broker_connection_retry_on_startup=True,
        broker_connection_timeout=2,
        worker_hijack_root_logger=False,
        # read by the workers' signal handlers (workers.heartbeat), which see only the app
        ncindex_namespace=settings.namespace,
        ncindex_redis_url=settings.redis_url,
    )
    return app


class Producer(Protocol):
    """What sends a task: ``celery.Celery.send_task`` has this shape."""

    def send_task(self, name: str, **options: Any) -> Any: ...


def debounce_key(action: Action, keys: Names) -> str | None:
    """The Redis key that coalesces ``action``, or ``None`` if it is never coalesced."""
    return keys.debounce_prefix + action.debounce_key if action.debounce_key else None


class _Claim:
    """One action's debounce key in an :func:`enqueue` call."""

    __slots__ = ("coalesced", "key", "mine", "sent")

    def __init__(self, key: str | None) -> None:
        self.key = key
        self.mine = False  # claimed by this call: marked sent, or released if not sent
        self.coalesced = False
        self.sent = False


def _keys(claims: Iterable[_Claim]) -> list[str]:
    """The debounce keys of ``claims`` (those without one left out)."""
    return [claim.key for claim in claims if claim.key is not None]


def enqueue(
    producer: Producer,
    redis_client: redis.Redis,
    actions: Iterable[Action],
    debounce_seconds: float,
    *,
    keys: Names,
    batch_docs: int = 1,
) -> tuple[int, int]:
    """The receiver's :func:`send_actions`: debounced tasks wait ``debounce_seconds`` and their
    keys live four times as long (at least 1 s), so a task started late still coalesces; with
    ``debounce_seconds`` 0 nothing is debounced; the keys are ``keys``'s; ``batch_docs`` as
    there. Returns ``(queued, coalesced)``."""
    if debounce_seconds <= 0:
        return send_actions(
            producer,
            redis_client,
            actions,
            keys=keys,
            countdown=None,
            key_seconds=None,
            batch_docs=batch_docs,
        )
    return send_actions(
        producer,
        redis_client,
        actions,
        keys=keys,
        countdown=debounce_seconds,
        key_seconds=max(1.0, 4 * debounce_seconds),
        batch_docs=batch_docs,
    )


def send_actions(
    producer: Producer,
    redis_client: redis.Redis,
    actions: Iterable[Action],
    *,
    keys: Names,
    countdown: float | None,
    key_seconds: float | None,
    batch_docs: int = 1,
) -> tuple[int, int]:
    """Send each action's task, coalescing against pending ones; returns ``(queued, coalesced)``
    (counted in actions).

    More than :data:`FAN_OUT` actions are queued in parts for workers to send (they count as
    queued; what coalesces is decided there). With a ``countdown`` and ``batch_docs`` over 1,
    the debounced ``ncindex.index_node`` actions left to send are gathered per user and sent
    in batches once the countdown has passed (:func:`_gather`); otherwise the
    ``ncindex.index_node`` actions go out as ``ncindex.index_nodes`` tasks of up to
    ``batch_docs`` files of one user each (:func:`_messages`); ``batch_docs`` 1 sends one task
    per action.

    ``keys`` names the debounce keys (:attr:`~ncindex.names.Names.debounce_prefix`);
    ``key_seconds`` is how long a debounce key lives (``None``: no debounce, every task is
    sent); ``countdown`` delays the tasks of debounced actions, seconds. The keys of all
    actions are claimed in one round trip (:func:`_claim`). An action is coalesced only
    into a key marked :data:`SENT`: a key still :data:`PENDING` belongs to a sender whose
    publish may fail (or to a claim Redis took after the claimer gave up waiting), so it is
    claimed again for up to :data:`CLAIM_WAIT_SECONDS` (:func:`_claim_pending`) and, still
    pending then, the action sends its own task — a duplicate run of an idempotent task costs
    work, a swallowed event would lose a change. The keys claimed here are marked sent once
    their tasks are out (a compare-and-set on the token, one command). Raises
    :class:`BrokerUnavailable` when Redis or the broker fails; the keys claimed for tasks that
    could not be sent are released (compare-and-delete), so nothing is swallowed.
    """
    actions = list(actions)
    if len(actions) > FAN_OUT:
        _track(redis_client, keys, actions)
        return _fan_out(producer, actions, countdown, key_seconds), 0
    claims = [_Claim(debounce_key(a, keys) if key_seconds else None) for a in actions]
    keyed = [c for c in claims if c.key]
    token = PENDING + secrets.token_hex(8).encode()
    if keyed:
        assert key_seconds is not None
        try:
            _claim_pending(redis_client, keyed, token, int(key_seconds * 1000))
        except redis.RedisError as exc:
            raise BrokerUnavailable(f"redis: {exc}") from exc
    # pending before the tasks are out: a task may end before this call returns
    _track(redis_client, keys, [a for a, c in zip(actions, claims, strict=True) if not c.coalesced])
    gathering = countdown is not None and batch_docs > 1
    gathered = [
        place
        for place, (action, claim) in enumerate(zip(actions, claims, strict=True))
        if gathering
        and action.task == names.INDEX_NODE
        and claim.key is not None
        and not claim.coalesced
    ]
    queued = 0
    if gathered:
        assert countdown is not None and key_seconds is not None  # a claimed key has a life
        try:
            queued += _gather(
                producer,
                redis_client,
                keys,
                [(actions[place], claims[place]) for place in gathered],
                countdown,
                key_seconds,
            )
        except BrokerUnavailable:
            _settle(redis_client, claims, token)
            raise
    left = set(gathered)
    for message in _messages(
        [a for place, a in enumerate(actions) if place not in left],
        [c for place, c in enumerate(claims) if place not in left],
        batch_docs,
    ):
        try:
            producer.send_task(
                message.task,
                kwargs=message.kwargs,
                queue=message.queue,
                countdown=countdown if message.debounced else None,
                retry_policy=PUBLISH_RETRY,
            )
        except Exception as exc:  # kombu/redis raise several types; none may be acknowledged
            _settle(redis_client, claims, token)
            raise BrokerUnavailable(f"broker: {exc}") from exc
        for claim in message.claims:
            claim.sent = True
        queued += len(message.claims)
    _settle(redis_client, claims, token)
    return queued, len(actions) - queued


def _gather(
    producer: Producer,
    redis_client: redis.Redis,
    keys: Names,
    pairs: list[tuple[Action, _Claim]],
    countdown: float,
    key_seconds: float,
) -> int:
    """Gather debounced ``ncindex.index_node`` actions (with their claims) on their users'
    lists (:meth:`~ncindex.names.Names.gathered`) instead of sending a task each; the first
    action gathered for a user while no flush is on its way sends ``ncindex.flush_gathered``
    with ``countdown``, whose run sends what was gathered by then in ``ncindex.index_nodes``
    batches (:func:`send_gathered`). So the files of many events of one debounce window — a
    folder synced by a desktop client, one webhook delivery each — are indexed in batches,
    while a lone event waits what its task would have. Each claim is marked sent once its
    action is on its list; returns how many were. Raises :class:`BrokerUnavailable` when
    Redis or the broker fails: what was gathered stays, and so does the flush marker (another
    sender may already have gathered behind it), for a later flush to send once the marker
    has expired — the next event's or :func:`sweep_gathered`'s (a duplicate run of an
    idempotent task costs work; a lost one would lose a change)."""
    per_user: dict[str, list[tuple[Action, _Claim]]] = {}
    for action, claim in pairs:
        per_user.setdefault(action.kwargs["user"], []).append((action, claim))
    gathered = 0
    for user, members in per_user.items():
        entries = [
            json.dumps({"file_id": a.kwargs["file_id"], "debounce_key": c.key, "queue": a.queue})
            for a, c in members
        ]
        marker = keys.gathered_flush(user)
        try:
            first = _GATHER(
                [keys.gathered(user), marker],
                [b"1", int(key_seconds * 1000), *entries],
                redis_client,
            )
        except redis.RedisError as exc:
            raise BrokerUnavailable(f"redis: {exc}") from exc
        if first:
            # if this fails, the marker stays: another sender may have gathered behind it
            # already; once it expires, the next event or the sweep sends the flush
            _send_flush(producer, user, countdown)
        for _, claim in members:
            claim.sent = True
        gathered += len(members)
    return gathered


def _send_flush(producer: Producer, user: str, countdown: float | None) -> None:
    """Send ``ncindex.flush_gathered`` for ``user`` on the ``ingest`` queue after
    ``countdown`` seconds (``None``: at once). Raises :class:`BrokerUnavailable`."""
    try:
        producer.send_task(
            names.FLUSH_GATHERED,
            kwargs={"user": user},
            queue=names.INGEST,
            countdown=countdown,
            retry_policy=PUBLISH_RETRY,
        )
    except Exception as exc:  # kombu/redis raise several types
        raise BrokerUnavailable(f"broker: {exc}") from exc


def send_gathered(
    producer: Producer,
    redis_client: redis.Redis,
    user: str,
    *,
    keys: Names,
    run: str,
    batch_docs: int,
) -> int:
    """The run ``run`` (a task id) of ``ncindex.flush_gathered`` for ``user``: take the
    actions gathered for ``user`` (:func:`_gather`) and send them at once, in
    ``ncindex.index_nodes`` tasks of up to ``batch_docs`` files (a lone file as
    ``ncindex.index_node``), each carrying its files' debounce keys, which the task deletes
    when it starts. The take renames the list under the run's name first, so a redelivered
    or retried run sends what it took again (idempotent tasks), and an action gathered
    after the take finds no flush on its way and sends the next. Returns how many actions
    were sent; an entry that cannot be read is skipped with a warning. Raises
    :class:`BrokerUnavailable` when Redis or the broker fails (the taken list is kept for
    the retry)."""
    taken = keys.gathered_taken(user, run)
    try:
        raw = _TAKE(
            [keys.gathered(user), taken, keys.gathered_flush(user)],
            [TAKEN_SECONDS],
            redis_client,
        )
    except redis.RedisError as exc:
        raise BrokerUnavailable(f"redis: {exc}") from exc
    actions: list[Action] = []
    claims: list[_Claim] = []
    for item in raw:
        try:
            entry = json.loads(item)
            action = dataclasses.replace(
                index_node(user, int(entry["file_id"])), queue=str(entry["queue"])
            )
            key = entry["debounce_key"]
        except (ValueError, KeyError, TypeError):
            log.warning("gathered_unreadable", user=user, entry=repr(item)[:200])
            continue
        actions.append(action)
        claims.append(_Claim(key if isinstance(key, str) else None))
    sent = 0
    for message in _messages(actions, claims, batch_docs):
        try:
            producer.send_task(
                message.task,
                kwargs=message.kwargs,
                queue=message.queue,
                retry_policy=PUBLISH_RETRY,
            )
        except Exception as exc:  # kombu/redis raise several types
            raise BrokerUnavailable(f"broker: {exc}") from exc
        sent += len(message.claims)
    with contextlib.suppress(redis.RedisError):  # it expires
        redis_client.delete(taken)
    return sent


@dataclasses.dataclass(slots=True)
class _Message:
    """One task to send: its name, keyword arguments and queue, whether it is debounced (it
    waits the countdown), and the claims of the actions it carries."""

    task: str
    kwargs: dict[str, Any]
    queue: str
    debounced: bool
    claims: list[_Claim]


def _messages(actions: list[Action], claims: list[_Claim], batch_docs: int) -> list[_Message]:
    """The tasks that send the actions not coalesced, in their order: one per action, except
    that ``ncindex.index_node`` actions of one user, queue and debounce (keyed or not) are
    gathered into ``ncindex.index_nodes`` tasks of up to ``batch_docs`` files each
    (``{"user", "file_ids", "debounce_keys"}``, the keys in the ids' order, ``None`` where an
    action has none), placed where their first action was; a group of one stays an
    ``index_node``."""
    placed: list[tuple[int, _Message]] = []
    groups: dict[tuple[str, str, bool], list[tuple[int, Action, _Claim]]] = {}
    for place, (action, claim) in enumerate(zip(actions, claims, strict=True)):
        if claim.coalesced:
            continue
        if batch_docs > 1 and action.task == names.INDEX_NODE:
            group = (action.kwargs["user"], action.queue, claim.key is not None)
            groups.setdefault(group, []).append((place, action, claim))
        else:
            placed.append((place, _single(action, claim)))
    for (user, queue, debounced), members in groups.items():
        for start in range(0, len(members), batch_docs):
            part = members[start : start + batch_docs]
            if len(part) == 1:
                message = _single(part[0][1], part[0][2])
            else:
                kwargs = {
                    "user": user,
                    "file_ids": [action.kwargs["file_id"] for _, action, _ in part],
                    "debounce_keys": [claim.key for _, _, claim in part],
                }
                claimed = [claim for _, _, claim in part]
                message = _Message(names.INDEX_NODES, kwargs, queue, debounced, claimed)
            placed.append((part[0][0], message))
    return [message for _, message in sorted(placed, key=lambda pair: pair[0])]


def _single(action: Action, claim: _Claim) -> _Message:
    """The task of one action: its keyword arguments with its debounce key, if it has one."""
    kwargs = dict(action.kwargs)
    if claim.key:
        kwargs["debounce_key"] = claim.key
    return _Message(action.task, kwargs, action.queue, claim.key is not None, [claim])


def sweep_gathered(producer: Producer, redis_client: redis.Redis, *, keys: Names) -> int:
    """Beat, every minute: send ``ncindex.flush_gathered`` for each user whose gathered list
    holds actions while no flush marker is set — a flush whose publish failed, a sender that
    died between setting the marker and sending the flush, a flush no worker knew (a worker
    older than its receiver) — and first put back on its user's list each taken list older
    than :data:`TAKEN_STALE_SECONDS` (a flush run that gave up). A flush too many costs a
    Redis round trip. Returns how many flushes were sent. Raises ``redis.RedisError`` and
    :class:`BrokerUnavailable`."""
    taken_prefix = keys.key("gathered-taken")
    for key in redis_client.scan_iter(match=f"{taken_prefix}:*", count=1000):
        ttl = redis_client.ttl(key)
        if 0 < ttl < TAKEN_SECONDS - TAKEN_STALE_SECONDS:
            user = key.decode()[len(taken_prefix) + 1 :].rpartition(":")[0]
            moved = _PUT_BACK([key, keys.gathered(user)], [], redis_client)
            log.warning("gathered_put_back", user=user, actions=moved)
    prefix = keys.gathered("")
    sent = 0
    for key in redis_client.scan_iter(match=f"{prefix}*", count=1000):
        user = key.decode()[len(prefix) :]
        marker = keys.gathered_flush(user)
        if not redis_client.set(marker, b"1", nx=True, ex=FLUSH_MARKER_SECONDS):
            continue  # a flush is on its way
        _send_flush(producer, user, None)
        sent += 1
    if sent:
        log.info("gathered_swept", flushes=sent)
    return sent


def _track(redis_client: redis.Redis, keys: Names, actions: Iterable[Action]) -> None:
    """Record the documents of the index tasks in ``actions`` as pending for their users
    (:class:`ncindex.progress.Progress`), before they are sent: a task can end before its
    sender goes on. One whose publish then fails stays pending until
    :data:`~ncindex.progress.PENDING_HORIZON` (rare: Redis is the broker). A failure here is
    only logged: what shows progress must never refuse a change."""
    per_user: dict[str, list[str]] = {}
    for action in actions:
        subject = task_subject(action.task, action.kwargs)
        user = action.kwargs.get("user")
        if subject is not None and isinstance(user, str):
            per_user.setdefault(user, []).append(subject)
    try:
        progress = Progress(redis_client, keys)
        for user, subjects in per_user.items():
            progress.queued(user, subjects)
    except redis.RedisError as exc:
        log.warning("pending_not_recorded", users=len(per_user), error=str(exc))


def _claim(
    redis_client: redis.Redis, keys: list[str], token: bytes, milliseconds: int
) -> list[bytes | None]:
    """Claim each key with ``token`` for ``milliseconds`` unless it is held: per key ``None``
    (claimed here) or the value that holds it (:data:`SENT`, or another claimer's pending
    token). ``SET NX PX GET`` (Redis ≥ 7.0) is one command per key, sent alone for one key
    (the common case: a pipeline costs as much CPU again) and pipelined for several.

    Measured against the Lua script that did the same (``SET NX``, else ``GET``), per claim,
    medians of 5 × 5,000 calls in two runs on a busy machine: 36 and 55 against 48 and 61 µs
    of the receiver's CPU, 13 and 18 against 23 and 28 µs of Redis's. Raises
    ``redis.RedisError``."""
    if len(keys) == 1:
        held = redis_client.set(keys[0], token, nx=True, px=milliseconds, get=True)
        return [cast("bytes | None", held)]  # with GET, SET answers the value held or None
    pipe = redis_client.pipeline(transaction=False)
    for key in keys:
        pipe.set(key, token, nx=True, px=milliseconds, get=True)
    return pipe.execute()


def _claim_pending(
    redis_client: redis.Redis, claims: list[_Claim], token: bytes, milliseconds: int
) -> None:
    """Claim the keys of ``claims`` with ``token`` (:func:`_claim`), each ``mine`` when
    claimed here and ``coalesced`` when held :data:`SENT`; a key another sender holds still
    pending is claimed again after pauses of 1, 2, 4, 8, 16, 16 … ms for up to
    :data:`CLAIM_WAIT_SECONDS`, until it is sent (coalesce into it) or gone (then it is
    claimed here: its task started, or its publish failed). One still pending then is left
    neither mine nor coalesced: the caller sends its own task. Raises ``redis.RedisError``."""
    deadline = time.monotonic() + CLAIM_WAIT_SECONDS
    pause = 0.001
    waiting = claims
    while True:
        held = _claim(redis_client, _keys(waiting), token, milliseconds)
        for claim, value in zip(waiting, held, strict=True):
            claim.mine = value is None
            claim.coalesced = value == SENT
        waiting = [c for c in waiting if not (c.mine or c.coalesced)]
        if not waiting or time.monotonic() + pause > deadline:
            return
        time.sleep(pause)
        pause = min(2 * pause, 0.016)


def check_redis(redis_client: redis.Redis) -> None:
    """A readiness check: Redis answers and is at least :data:`MIN_REDIS_VERSION`; raises
    ``redis.RedisError``, or :class:`RedisTooOld` naming both versions."""
    version = str(redis_client.info("server")["redis_version"])
    found = tuple(int(part) for part in version.split(".")[:2])
    if found < MIN_REDIS_VERSION:
        needed = ".".join(map(str, MIN_REDIS_VERSION))
        raise RedisTooOld(f"Redis {version} answers; ncindex needs {needed} or later")


def _fan_out(
    producer: Producer, actions: list[Action], countdown: float | None, key_seconds: float | None
) -> int:
    """Queue ``actions`` as ``ncindex.send_actions`` tasks of :data:`FAN_OUT` each, on the
    ``ingest`` queue (a worker calls :func:`send_actions` with them); returns how many actions
    were queued. Raises :class:`BrokerUnavailable` if a publish fails (the parts already
    queued run; a retried delivery only repeats idempotent tasks)."""
    for start in range(0, len(actions), FAN_OUT):
        part = [dataclasses.asdict(action) for action in actions[start : start + FAN_OUT]]
        try:
            producer.send_task(
                names.SEND_ACTIONS,
                kwargs={"actions": part, "countdown": countdown, "key_seconds": key_seconds},
                queue=names.INGEST,
                retry_policy=PUBLISH_RETRY,
            )
        except Exception as exc:  # kombu/redis raise several types; none may be acknowledged
            raise BrokerUnavailable(f"broker: {exc}") from exc
    return len(actions)


def _settle(redis_client: redis.Redis, claims: list[_Claim], token: bytes) -> None:
    """Mark each key claimed here whose task was sent :data:`SENT` and release the others,
    both only while the key still holds ``token`` (a Lua compare-and-set or -delete; the task
    may already have started and deleted it), in one command (:data:`_SETTLE`). A failure is
    only logged: a key left pending makes later events send their own task, and it expires."""
    mine = [claim for claim in claims if claim.mine]
    if not mine:
        return
    try:
        _SETTLE(_keys(mine), [token, *(int(c.sent) for c in mine)], redis_client)
    except redis.RedisError as exc:
        log.warning("debounce_settle_failed", keys=len(mine), error=str(exc))


def clear_debounce(redis_client: redis.Redis, keys: Names, *key: str | None) -> None:
    """Called by a task as it starts: later events for its documents schedule anew. Only
    keys under ``keys``'s debounce prefix are deleted (they come from the message), in one
    command."""
    mine = [k for k in key if k and k.startswith(keys.debounce_prefix)]
    if mine:
        redis_client.delete(*mine)


# --- outages -------------------------------------------------------------------------------


def park_for_outage(
    client: redis.Redis,
    keys: Names,
    task_id: str,
    name: str,
    kwargs: dict[str, Any],
    queue: str | None,
) -> None:
    """Keep a task that gave up while Nextcloud was unavailable (``Names.outage_parked``), so
    that :func:`requeue_parked` sends it again as soon as Nextcloud answers."""
    entry = {"name": name, "kwargs": kwargs, "queue": queue}
    client.hset(keys.outage_parked, task_id, json.dumps(entry))


def requeue_parked(producer: Producer, client: redis.Redis, keys: Names) -> int:
    """Send every task :func:`park_for_outage` kept (each once: it is removed from the hash
    before it is sent; one that cannot be read is dropped with a warning). Returns how many
    were sent. Raises ``BrokerUnavailable`` when the broker does not take one (it is kept)."""
    sent = 0
    for task_id, raw in client.hgetall(keys.outage_parked).items():
        if not client.hdel(keys.outage_parked, task_id):
            continue  # another process took it
        try:
            entry = json.loads(raw)
            name, kwargs, queue = entry["name"], dict(entry["kwargs"]), entry.get("queue")
        except (ValueError, KeyError, TypeError):
            log.warning("outage_parked_unreadable", task_id=task_id)
            continue
        try:
            producer.send_task(name, kwargs=kwargs, queue=queue)
        except Exception as exc:
            client.hset(keys.outage_parked, task_id, raw)
            raise BrokerUnavailable(f"could not requeue {name}: {exc}") from exc
        sent += 1
    if sent:
        log.info("outage_requeued", tasks=sent)
    return sent
