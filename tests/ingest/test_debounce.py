"""The debounce claim protocol (``ncindex.ingest.queueing.send_actions``) on a real Redis with a
real Celery producer: an event is coalesced only into a key whose task is on the queue, so a claim
whose publish failed, or that Redis took after its claimer gave up waiting, never swallows a
later event; a claim is marked sent only while it is still the claimer's."""

from __future__ import annotations

import json
import secrets
import signal
from collections.abc import Iterator

import pytest
import redis
from celery import Celery
from pydantic import SecretStr

from ncindex.errors import BrokerUnavailable, RedisTooOld
from ncindex.ingest.events import index_node
from ncindex.ingest.queueing import (
    FAN_OUT,
    PENDING,
    SENT,
    TAKEN_SECONDS,
    TAKEN_STALE_SECONDS,
    celery_app,
    check_redis,
    enqueue,
    send_gathered,
    sweep_gathered,
)
from ncindex.names import Names
from ncindex.redis_server import RedisProcess
from ncindex.settings import Settings
from support import wait_until
from webhook_receiver import create_app

NAMES = Names()
KEY = f"{NAMES.debounce_prefix}index:alice:7"
WRITTEN = "OCP\\Files\\Events\\Node\\NodeWrittenEvent"


@pytest.fixture
def settings(private_redis: RedisProcess) -> Settings:
    return Settings(
        redis_url=private_redis.url,
        webhook_secret=SecretStr(secrets.token_urlsafe(12)),
        accounts={"alice": SecretStr("pw")},
        debounce_seconds=30,
    )


@pytest.fixture
def client(private_redis: RedisProcess) -> Iterator[redis.Redis]:
    # a short timeout, so a stopped Redis fails a call in 1 s
    client = redis.Redis.from_url(private_redis.url, socket_timeout=1, socket_connect_timeout=1)
    yield client
    client.close()


@pytest.fixture
def producer(settings: Settings) -> Iterator[Celery]:
    app = celery_app(settings)
    yield app
    app.close()


class Hooked:
    """A real producer that runs ``before`` on each send, then sends or raises."""

    def __init__(self, producer, before=None, fail: bool = False) -> None:
        self.producer, self.before, self.fail = producer, before, fail

    def send_task(self, name: str, **options):
        if self.before:
            self.before()
        if self.fail:
            raise ConnectionError("broker went away")
        return self.producer.send_task(name, **options)


def test_repeats_coalesce_only_into_a_sent_key(producer: Celery, client: redis.Redis) -> None:
    assert enqueue(producer, client, [index_node("alice", 7)], 30, keys=NAMES) == (1, 0)
    assert client.get(KEY) == SENT
    assert client.pttl(KEY) > 100_000  # four windows
    assert enqueue(producer, client, [index_node("alice", 7)], 30, keys=NAMES) == (0, 1)
    assert client.llen("index") == 1


def test_a_pending_claim_does_not_swallow_an_event(producer: Celery, client: redis.Redis) -> None:
    # a claim whose sender has not (or never) put its task on the queue
    client.set(KEY, PENDING + b"someone-else", px=60_000)
    assert enqueue(producer, client, [index_node("alice", 7)], 30, keys=NAMES) == (1, 0)
    assert client.llen("index") == 1
    assert client.get(KEY) == PENDING + b"someone-else"  # not ours to mark or release


class Racing:
    """A real Redis client on which another sender's publish ends (``after``) just after the
    first claim made through it."""

    def __init__(self, client: redis.Redis, after) -> None:
        self.client, self.after, self.claims = client, after, 0

    def set(self, *args, **kwargs):
        held = self.client.set(*args, **kwargs)
        self.claims += 1
        if self.claims == 1:
            self.after()
        return held

    def __getattr__(self, name: str):
        return getattr(self.client, name)


def test_an_event_meeting_a_claim_being_sent_waits_and_coalesces(
    producer: Celery, client: redis.Redis
) -> None:
    # one save's two events at once: the other sender's task goes out while this one waits
    client.set(KEY, PENDING + b"someone-else", px=60_000)
    racing = Racing(client, lambda: client.set(KEY, SENT, keepttl=True))
    assert enqueue(producer, racing, [index_node("alice", 7)], 30, keys=NAMES) == (0, 1)
    assert racing.claims == 2  # claimed again once
    assert client.llen("index") == 0


def test_an_event_meeting_a_claim_released_claims_it(producer: Celery, client: redis.Redis) -> None:
    # the other sender's publish failed (or its task started): the key is free again
    client.set(KEY, PENDING + b"someone-else", px=60_000)
    racing = Racing(client, lambda: client.delete(KEY))
    assert enqueue(producer, racing, [index_node("alice", 7)], 30, keys=NAMES) == (1, 0)
    assert client.llen("index") == 1
    assert client.get(KEY) == SENT  # its own claim, marked sent


def test_an_event_during_a_publish_that_fails_is_queued(
    producer: Celery, client: redis.Redis
) -> None:
    answers = []

    def concurrent_delivery() -> None:  # arrives while the first sender is publishing
        answers.append(enqueue(producer, client, [index_node("alice", 7)], 30, keys=NAMES))

    failing = Hooked(producer, before=concurrent_delivery, fail=True)
    with pytest.raises(BrokerUnavailable):
        enqueue(failing, client, [index_node("alice", 7)], 30, keys=NAMES)
    assert answers == [(1, 0)]  # queued its own task, not coalesced into the failing one
    assert client.llen("index") == 1
    assert client.get(KEY) is None  # the failed claim was released


def test_a_key_taken_over_before_the_mark_is_left_alone(
    producer: Celery, client: redis.Redis
) -> None:

    def task_started_and_reclaimed() -> None:
        # between the send and the mark: the task started (deleting the key) and another
        # delivery claimed it anew
        client.delete(KEY)
        client.set(KEY, PENDING + b"next-claim", px=60_000)

    assert enqueue(Hooked(producer, before=task_started_and_reclaimed), client,
                   [index_node("alice", 7)], 30, keys=NAMES) == (1, 0)  # fmt: skip
    assert client.get(KEY) == PENDING + b"next-claim"


def test_several_keys_are_claimed_in_one_call(producer: Celery, client: redis.Redis) -> None:
    sent, pending, free = (f"{NAMES.debounce_prefix}index:alice:{i}" for i in (1, 2, 3))
    client.set(sent, SENT, px=60_000)
    client.set(pending, PENDING + b"someone-else", px=60_000)
    actions = [index_node("alice", i) for i in (1, 2, 3)]
    assert enqueue(producer, client, actions, 30, keys=NAMES) == (
        2,
        1,
    )  # the pending one sends its own
    assert client.llen("index") == 2
    assert client.get(pending) == PENDING + b"someone-else"
    assert client.get(free) == SENT
    assert client.pttl(free) > 100_000


def test_the_claim_needs_redis_7(client: redis.Redis) -> None:
    check_redis(client)  # the test Redis is new enough

    class Old:
        def info(self, section: str) -> dict[str, str]:
            return {"redis_version": "6.2.14"}

    with pytest.raises(RedisTooOld, match=r"Redis 6\.2\.14 answers; ncindex needs 7\.0"):
        check_redis(Old())  # type: ignore[arg-type]


def test_many_actions_are_handed_to_fan_out_tasks(producer: Celery, client: redis.Redis) -> None:
    actions = [index_node("alice", i) for i in range(FAN_OUT * 2 + 1)]
    assert enqueue(producer, client, actions, 30, keys=NAMES) == (len(actions), 0)
    assert client.llen("ingest") == 3  # one task per part of FAN_OUT, for a worker to send
    assert client.llen("index") == 0
    assert not client.keys(f"{NAMES.debounce_prefix}*")  # claimed by the workers, not here


def test_a_stalled_redis_is_503_and_its_late_claim_swallows_nothing(
    settings: Settings, producer: Celery, private_redis: RedisProcess
) -> None:
    app = create_app(settings, producer=producer)
    http = app.test_client()
    headers = {settings.webhook_secret_header: settings.webhook_secret.get_secret_value()}
    body = {
        "event": {"class": WRITTEN, "node": {"id": 7, "path": "/alice/files/a.md"}},
        "user": {"uid": "alice"},
        "time": 1767225601,
    }
    other = {**body, "event": {"class": WRITTEN, "node": {"id": 8, "path": "/alice/files/b.md"}}}
    assert http.post("/hooks/nextcloud", json=other, headers=headers).status_code == 202
    private_redis.process.send_signal(signal.SIGSTOP)  # connections open, nothing answered
    try:
        assert http.post("/hooks/nextcloud", json=body, headers=headers).status_code == 503
    finally:
        private_redis.process.send_signal(signal.SIGCONT)
    check = redis.Redis.from_url(private_redis.url)
    # Redis runs the claim it had buffered: a pending key with no task behind it
    assert wait_until(lambda: check.get(KEY), timeout=5).startswith(PENDING)
    # file 8's action is gathered, one flush on its way for alice's
    assert check.llen(NAMES.gathered("alice")) == 1 and check.llen("ingest") == 1
    answer = http.post("/hooks/nextcloud", json=body, headers=headers)
    assert answer.status_code == 202
    assert answer.get_json() == {"queued": 1, "coalesced": 0}
    assert check.llen(NAMES.gathered("alice")) == 2 and check.llen("ingest") == 1
    check.close()
    app.extensions["ncindex_receiver"].redis.close()


def test_a_flush_that_cannot_be_sent_swallows_nothing(
    producer: Celery, client: redis.Redis
) -> None:
    """The gathered action stays and its key is released; the flush marker stays too —
    another delivery may have gathered behind it, as here — and once it has expired the
    sweep sends the flush that sends both."""
    failing = Hooked(producer, fail=True)
    with pytest.raises(BrokerUnavailable):
        enqueue(failing, client, [index_node("alice", 7)], 30, keys=NAMES, batch_docs=32)
    assert client.llen(NAMES.gathered("alice")) == 1 and not client.exists(KEY)
    behind = enqueue(producer, client, [index_node("alice", 8)], 30, keys=NAMES, batch_docs=32)
    assert behind == (1, 0) and client.llen("ingest") == 0
    assert sweep_gathered(producer, client, keys=NAMES) == 0  # the marker has not expired
    client.delete(NAMES.gathered_flush("alice"))  # as it expires
    assert sweep_gathered(producer, client, keys=NAMES) == 1 and client.llen("ingest") == 1
    assert sweep_gathered(producer, client, keys=NAMES) == 0  # its flush is on its way
    assert send_gathered(producer, client, "alice", keys=NAMES, run="r", batch_docs=32) == 2
    assert client.llen("index") == 1  # one ncindex.index_nodes task of both


def test_the_sweep_puts_back_what_a_flush_that_gave_up_took(
    producer: Celery, client: redis.Redis
) -> None:
    """A taken list older than any retry of its flush goes back on its user's list and is
    sent; a recent one is left to its run."""
    entry = json.dumps({"file_id": 7, "debounce_key": KEY, "queue": "index"})
    stale, recent = NAMES.gathered_taken("a:b", "old"), NAMES.gathered_taken("a:b", "new")
    client.rpush(stale, entry)
    client.expire(stale, TAKEN_SECONDS - TAKEN_STALE_SECONDS - 10)
    client.rpush(recent, entry)
    client.expire(recent, TAKEN_SECONDS - 10)
    assert sweep_gathered(producer, client, keys=NAMES) == 1
    assert not client.exists(stale) and client.llen(recent) == 1
    assert client.llen(NAMES.gathered("a:b")) == 1  # a user id with ":" is read back whole
    assert send_gathered(producer, client, "a:b", keys=NAMES, run="s", batch_docs=32) == 1


def test_a_flush_run_again_sends_what_it_took_and_later_actions_wait_for_the_next(
    producer: Celery, client: redis.Redis
) -> None:
    """A run that dies after its take is redelivered with the same id and sends the same
    actions again (idempotent tasks); an action gathered after the take is not lost to it:
    it finds no flush on its way and sends the next."""
    enqueue(producer, client, [index_node("alice", 7)], 30, keys=NAMES, batch_docs=32)
    dead = Hooked(producer, fail=True)  # the run took the list, then the broker failed
    with pytest.raises(BrokerUnavailable):
        send_gathered(dead, client, "alice", keys=NAMES, run="r", batch_docs=32)
    assert client.llen(NAMES.gathered_taken("alice", "r")) == 1
    enqueue(producer, client, [index_node("alice", 8)], 30, keys=NAMES, batch_docs=32)
    assert client.llen("ingest") == 2  # the first flush, and the one for file 8
    assert send_gathered(producer, client, "alice", keys=NAMES, run="r", batch_docs=32) == 1
    assert not client.exists(NAMES.gathered_taken("alice", "r"))
    assert send_gathered(producer, client, "alice", keys=NAMES, run="s", batch_docs=32) == 1
    assert client.llen("index") == 2 and not client.exists(NAMES.gathered("alice"))
