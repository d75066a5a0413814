"""The receiver's answers over real HTTP: 202, 401, 413, 400 with the field, 503 when the
broker is down, debounce (repeats coalesced, every key claimed in one pipeline, no key left
behind for a task that was not sent), and a real-format envelope without Content-Type becoming
searchable."""

from __future__ import annotations

import base64
import io
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path

import httpx
import pytest
import redis
from pydantic import SecretStr, ValidationError

from ncindex.ingest.queueing import celery_app, send_gathered
from ncindex.names import Names
from ncindex.redis_server import RedisProcess, free_port, start_redis
from ncindex.settings import Settings
from support import Stack, tag_envelope, wait_until
from webhook_receiver import create_app

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
WRITTEN = "OCP\\Files\\Events\\Node\\NodeWrittenEvent"
TAG_ASSIGNED = "OCP\\SystemTag\\TagAssignedEvent"


def envelope(path: str, file_id: int | None, event_class: str = WRITTEN) -> dict:
    node = {"path": path} if file_id is None else {"id": file_id, "path": path}
    return {
        "event": {"node": node, "class": event_class},
        "user": {"uid": "alice", "displayName": "Alice"},
        "time": 1767225601,
    }


def php_json(value: dict) -> bytes:
    """JSON as PHP's json_encode writes it: slashes escaped."""
    return json.dumps(value).replace("/", "\\/").encode()


@pytest.fixture
def receiver(private_redis: RedisProcess):
    settings = Settings(
        redis_url=private_redis.url,
        webhook_secret=SecretStr(secrets.token_urlsafe(12)),
        accounts={"alice": SecretStr("pw")},
        webhook_max_body_bytes=4096,
        debounce_seconds=0,
    )
    app = create_app(settings, producer=celery_app(settings))
    return app.test_client(), settings


def post(client, settings: Settings, body: bytes, secret: str | None = None):
    headers = {settings.webhook_secret_header: secret or settings.webhook_secret.get_secret_value()}
    return client.post("/hooks/nextcloud", data=body, headers=headers)


def test_readyz_reports_ocr_without_making_the_app_unready(receiver, private_redis) -> None:
    client, settings = receiver
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.get_json()["ocr"] == "ok"
    missing = settings.model_copy(update={"ocr_languages": "eng+qqq"})
    ready = create_app(missing, producer=celery_app(missing)).test_client().get("/readyz")
    assert ready.status_code == 200
    assert ready.get_json()["ocr"] == "unavailable: no Tesseract language data for qqq"


def test_a_user_no_longer_configured_is_not_reported_refused(receiver, private_redis) -> None:
    """A deleted user's refusal entry stays (its dead credential is not sent again), but once
    the account is removed from NCINDEX_ACCOUNTS ``/readyz`` and the gauge
    ``ncindex_account_refused`` no longer report it — they did for good. A refused account
    never makes the receiver unready."""
    from prometheus_client import CollectorRegistry, generate_latest

    from ncindex.accounts import record_refused, refused_accounts
    from ncindex.names import QUEUES
    from ncindex.telemetry import QueueCollector

    client, settings = receiver
    keys = settings.names
    store = redis.Redis.from_url(settings.redis_url)
    for user in ("alice", "carol"):  # carol: deleted, forgotten, removed from the accounts
        record_refused(store, keys, user, "GET /remote.php/dav/files -> 401", credential="x")
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.get_json()["accounts_refused"] == 1
    assert b"alice" not in ready.data, ready.data  # public: how many, never who
    registry = CollectorRegistry()
    registry.register(QueueCollector(store, QUEUES, keys=keys, accounts=settings.accounts))
    gauges = generate_latest(registry).decode()
    assert 'ncindex_account_refused{user="alice"} 1.0' in gauges
    assert 'user="carol"' not in gauges, gauges
    assert sorted(refused_accounts(store, keys)) == ["alice", "carol"]  # the entry stays
    store.close()


def test_missing_or_wrong_secret_is_401(receiver) -> None:
    client, settings = receiver
    body = php_json(envelope("/alice/files/a.md", 5))
    assert client.post("/hooks/nextcloud", data=body).status_code == 401
    response = post(client, settings, body, secret="wrong")
    assert response.status_code == 401
    assert response.get_json()["code"] == "unauthenticated"
    assert response.content_type == "application/problem+json"


def test_oversized_body_is_413(receiver) -> None:
    client, settings = receiver
    big = envelope("/alice/files/a.md", 5)
    big["padding"] = "x" * 5000
    response = post(client, settings, php_json(big))
    assert response.status_code == 413
    assert response.get_json()["code"] == "payload_too_large"
    limit = settings.webhook_max_body_bytes  # said, and machine-readable
    assert response.get_json()["limit"] == limit
    assert f"{limit} bytes" in response.get_json()["detail"]


def test_the_body_limit_is_never_below_what_nextcloud_sends(private_redis) -> None:
    """A WebhookCall job's argument is at most 4000 characters of json_encode (nextcloud/server
    lib/private/BackgroundJob/JobList.php add), so a body comes close to 4000 bytes (a Deck
    card's long description, a deep path): a lower limit refused such deliveries, for good."""
    with pytest.raises(ValueError, match="greater than or equal to 4000"):
        Settings(webhook_max_body_bytes=3999)
    settings = Settings(
        redis_url=private_redis.url,
        webhook_secret=SecretStr(secrets.token_urlsafe(12)),
        accounts={"alice": SecretStr("pw")},
        webhook_max_body_bytes=4000,
        debounce_seconds=0,
    )
    client = create_app(settings, producer=celery_app(settings)).test_client()
    # a path 15 names of 250 characters deep: the job argument [$data, 7, "<10 hex digits>"]
    # is 3978 characters, the body 3961 bytes
    body = php_json(envelope("/alice/files/" + "/".join(["d" * 250] * 15), 5))
    assert len(body) == 3961 and len(b"[" + body + b',7,"0123456789"]') <= 4000
    assert post(client, settings, body).status_code == 202


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"not json", "body"),
        (b"[1, 2]", "body"),
        # a well-formed envelope, but in UTF-16: RFC 8259 §8.1 says UTF-8 (it was queued)
        (php_json(envelope("/alice/files/a.md", 5)).decode().encode("utf-16"), "body"),
        (json.dumps({"user": None, "time": 1}).encode(), "event"),
        (
            json.dumps(
                {"event": {"node": {"id": 1, "path": "/a/files/x"}}, "user": None, "time": 1}
            ).encode(),
            "event.class",
        ),
        (json.dumps({"event": {"class": WRITTEN}, "user": None, "time": 1}).encode(), "event.node"),
        (
            json.dumps(
                {
                    "event": {"class": WRITTEN, "node": {"id": "x", "path": "/a"}},
                    "user": None,
                    "time": 1,
                }
            ).encode(),
            "event.node.id",
        ),
        (
            json.dumps(
                {
                    "event": {"class": WRITTEN, "node": {"id": 1, "path": "/a"}},
                    "user": None,
                    "time": "soon",
                }
            ).encode(),
            "time",
        ),
        (
            json.dumps(
                {
                    "event": {
                        "class": "OCP\\Files\\Events\\Node\\NodeRenamedEvent",
                        "target": {"id": 1, "path": "/a/files/x"},
                    },
                    "user": None,
                    "time": 1,
                }
            ).encode(),
            "event.source",
        ),
    ],
)
def test_invalid_envelope_is_400_naming_the_field(receiver, body: bytes, field: str) -> None:
    client, settings = receiver
    response = post(client, settings, body)
    assert response.status_code == 400
    problem = response.get_json()
    assert problem["field"] == field
    assert problem["code"] in ("invalid_json", "invalid_envelope")


def test_valid_event_is_queued_and_uninteresting_ones_ignored(receiver) -> None:
    client, settings = receiver
    response = post(client, settings, php_json(envelope("/alice/files/Notes/a.md", 7)))
    assert response.status_code == 202
    assert response.get_json() == {"queued": 1, "coalesced": 0}
    other = envelope("/alice/files/a.md", 7, "OCP\\Calendar\\Events\\CalendarObjectCreatedEvent")
    assert post(client, settings, php_json(other)).get_json() == {
        "queued": 0,
        "ignored": "event_class",
    }
    # a delete in an unconfigured view without the node's id names nothing to resolve
    stranger = envelope("/mallory/files/a.md", None, "OCP\\Files\\Events\\Node\\NodeDeletedEvent")
    assert post(client, settings, php_json(stranger)).get_json()["ignored"] == "unknown_user"
    # an unconfigured view's write is resolved by id (ncindex.resolve_node), not ignored, and
    # the answer says so: a bare {"queued": 1} for user zed read as if zed's file would be
    # indexed, when only the configured accounts that can see it get it (none may)
    shared = envelope("/mallory/files/a.md", 7)
    assert post(client, settings, php_json(shared)).get_json() == {
        "queued": 1,
        "coalesced": 0,
        "resolving": "unknown_user",
    }


def test_a_redis_outage_keeps_a_started_receiver_ready(receiver, private_redis) -> None:
    """All receivers share one Redis: were they unready while it is down (the chart's
    readinessProbe is ``/readyz``), Nextcloud's deliveries would be refused by the Service
    without endpoints, never sent again (``WebhookCall::run`` only logs), and never seen by
    a receiver that would have the user rescanned. A receiver that never reached its Redis
    (a wrong ``NCINDEX_REDIS_URL``) stays unready."""
    client, settings = receiver
    assert client.get("/readyz").status_code == 200
    private_redis.stop()
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.data
    assert ready.get_json()["redis_outage"] == "ConnectionError"
    never = create_app(settings, producer=celery_app(settings)).test_client()
    assert never.get("/readyz").status_code == 503
    response = post(client, settings, php_json(envelope("/alice/files/Notes/a.md", 7)))
    assert response.status_code == 503  # answered by the receiver, which keeps alice
    private_redis.start_again()
    assert client.get("/readyz").get_json()["redis_outage"] is None
    assert never.get("/readyz").status_code == 200


def test_broker_down_is_503_never_2xx(receiver, private_redis: RedisProcess) -> None:
    client, settings = receiver
    private_redis.stop()
    response = post(client, settings, php_json(envelope("/alice/files/Notes/a.md", 7)))
    assert response.status_code == 503
    assert response.get_json()["code"] == "backend_unavailable"
    private_redis.start_again()
    response = post(client, settings, php_json(envelope("/alice/files/Notes/a.md", 8)))
    assert response.status_code == 202
    # Nextcloud never retries the refused delivery: once the broker takes tasks again, the
    # next delivery also sends a scan of the refused one's user (once)
    with redis.Redis.from_url(private_redis.url) as broker:
        sent = [json.loads(m) for m in broker.lrange("reconcile", 0, -1)]
        assert [m["headers"]["task"] for m in sent] == ["ncindex.rescan_users"]
        _, kwargs, _ = json.loads(base64.b64decode(sent[0]["body"]))
        assert kwargs == {"users": ["alice"]}
        post(client, settings, php_json(envelope("/alice/files/Notes/a.md", 9)))
        assert broker.llen("reconcile") == 1


def test_a_refused_deliverys_user_is_rescanned_without_another_delivery(
    receiver, private_redis: RedisProcess
) -> None:
    """Nextcloud sends a delivery once and only logs a 5xx (nextcloud/server
    ``apps/webhook_listeners/lib/BackgroundJobs/WebhookCall.php`` ``run``): with no later
    delivery to carry it (a quiet Nextcloud), the scan of the refused delivery's user is still
    sent once the broker is back (was: only with the next delivery, else the period's scan)."""
    client, settings = receiver
    private_redis.stop()
    response = post(client, settings, php_json(envelope("/alice/files/Notes/a.md", 7)))
    assert response.status_code == 503
    private_redis.start_again()
    with redis.Redis.from_url(private_redis.url) as broker:
        wait_until(lambda: broker.llen("reconcile"), timeout=60)
        sent = [json.loads(m) for m in broker.lrange("reconcile", 0, -1)]
        assert [m["headers"]["task"] for m in sent] == ["ncindex.rescan_users"]
        _, kwargs, _ = json.loads(base64.b64decode(sent[0]["body"]))
        assert kwargs == {"users": ["alice"]}


def test_a_closed_receiver_stops_retrying_a_broker_that_is_gone(
    receiver, private_redis: RedisProcess
) -> None:
    """A refused delivery starts the thread that retries its user's scan every 5 s while the
    broker is gone; :meth:`Receiver.close` ends it at once, not at its next try (before, a
    test's receiver whose Redis had been stopped logged a warning every 5 s for the rest of
    the session)."""
    client, settings = receiver
    private_redis.stop()
    response = post(client, settings, php_json(envelope("/alice/files/Notes/a.md", 7)))
    assert response.status_code == 503
    (retrier,) = [t for t in threading.enumerate() if t.name == "ncindex-missed-rescan"]
    client.application.extensions["ncindex_receiver"].close()
    retrier.join(timeout=2)  # under the 5 s between two tries
    assert not retrier.is_alive()


class FailingAfter:
    """A real Celery producer whose sends fail after the first ``ok`` ones (a broker lost
    mid-envelope)."""

    def __init__(self, producer, ok: int) -> None:
        self.producer, self.ok = producer, ok

    def send_task(self, name: str, **options):
        if self.ok == 0:
            raise ConnectionError("broker went away")
        self.ok -= 1
        return self.producer.send_task(name, **options)


@pytest.fixture
def debounced(private_redis: RedisProcess):
    settings = Settings(
        redis_url=private_redis.url,
        webhook_secret=SecretStr(secrets.token_urlsafe(12)),
        accounts={"alice": SecretStr("pw")},
        debounce_seconds=30,
        index_batch_docs=1,  # one task per file; the batches have their own test
    )
    client = redis.Redis.from_url(private_redis.url)
    yield settings, client
    client.close()


def index_messages(client: redis.Redis) -> list[tuple[str, dict]]:
    """The tasks on the ``index`` queue, oldest first: ``(name, kwargs)``."""
    messages = [json.loads(m) for m in reversed(client.lrange("index", 0, -1))]
    return [(m["headers"]["task"], json.loads(base64.b64decode(m["body"]))[1]) for m in messages]


def test_the_files_of_many_events_are_gathered_and_go_out_as_batches(debounced) -> None:
    settings, client = debounced
    accounts = {**settings.accounts, "bob": SecretStr("pw")}
    settings = settings.model_copy(update={"index_batch_docs": 2, "accounts": accounts})
    producer = celery_app(settings)
    http = create_app(settings, producer=producer).test_client()
    post(http, settings, php_json(envelope("/alice/files/Notes/a.md", 7)))
    bobs = {**envelope("/bob/files/b.md", 9), "user": {"uid": "bob", "displayName": "Bob"}}
    assert post(http, settings, php_json(bobs)).get_json() == {"queued": 1, "coalesced": 0}
    # 7 is gathered; of the tag event, 5, 6 and 8 join it (7 coalesces): no index task yet,
    # one flush per user on its way, sent with the debounce's countdown
    answer = post(http, settings, php_json(tag_envelope(5, 6, 7, 8))).get_json()
    assert answer == {"queued": 3, "coalesced": 1}
    assert index_messages(client) == []
    flushes = [json.loads(m) for m in reversed(client.lrange("ingest", 0, -1))]
    assert [m["headers"]["task"] for m in flushes] == ["ncindex.flush_gathered"] * 2
    assert [json.loads(base64.b64decode(m["body"]))[1] for m in flushes] == [
        {"user": "alice"},
        {"user": "bob"},
    ]
    assert all(m["headers"]["eta"] for m in flushes)
    # every file's key is sent: a repeat of the event coalesces into what is gathered
    answer = post(http, settings, php_json(tag_envelope(5, 6, 7, 8))).get_json()
    assert answer == {"queued": 0, "coalesced": 4}
    # alice's flush: her files two to a task, in the order gathered, with their keys
    keys = settings.names
    assert send_gathered(producer, client, "alice", keys=keys, run="r1", batch_docs=2) == 4
    prefix = keys.debounce_prefix
    assert index_messages(client) == [
        (
            "ncindex.index_nodes",
            {
                "user": "alice",
                "file_ids": [7, 5],
                "debounce_keys": [f"{prefix}index:alice:7", f"{prefix}index:alice:5"],
            },
        ),
        (
            "ncindex.index_nodes",
            {
                "user": "alice",
                "file_ids": [6, 8],
                "debounce_keys": [f"{prefix}index:alice:6", f"{prefix}index:alice:8"],
            },
        ),
    ]
    assert client.llen(keys.gathered("bob")) == 1 and not client.exists(keys.gathered("alice"))
    # the flush is done: alice's next event sends the next one
    post(http, settings, php_json(envelope("/alice/files/c.md", 11)))
    assert client.llen("ingest") == 3


def test_repeats_inside_the_debounce_window_are_coalesced(debounced) -> None:
    settings, client = debounced
    http = create_app(settings, producer=celery_app(settings)).test_client()
    answers = [
        post(http, settings, php_json(envelope("/alice/files/Notes/a.md", 7))).get_json()
        for _ in range(3)
    ]
    assert answers == [{"queued": 1, "coalesced": 0}] + [{"queued": 0, "coalesced": 1}] * 2
    assert client.llen("index") == 1
    assert client.pttl(f"{Names().debounce_prefix}index:alice:7") > 30_000

    # a tag event claims the keys of all its files at once: 7 is pending, 5 and 6 are not
    answer = post(http, settings, php_json(tag_envelope(5, 6, 7))).get_json()
    assert answer == {"queued": 2, "coalesced": 1}
    assert client.llen("index") == 3


def test_a_task_that_could_not_be_sent_leaves_no_debounce_key(debounced) -> None:
    settings, client = debounced
    producer = FailingAfter(celery_app(settings), ok=1)
    http = create_app(settings, producer=producer).test_client()
    response = post(http, settings, php_json(tag_envelope(5, 6, 7)))
    assert response.status_code == 503
    assert response.get_json()["code"] == "backend_unavailable"
    # file 5's task went out and keeps its key; 6 and 7 were claimed, not sent, and released
    assert client.llen("index") == 1
    assert sorted(client.keys(f"{Names().debounce_prefix}*")) == [
        f"{Names().debounce_prefix}index:alice:5".encode()
    ]
    producer.ok = 10
    answer = post(http, settings, php_json(tag_envelope(5, 6, 7))).get_json()
    assert answer == {"queued": 2, "coalesced": 1}


def test_real_format_envelope_without_content_type_becomes_searchable(stack: Stack) -> None:
    # Written behind the webhooks' back, then announced by a hand-made delivery.
    stack.sim.drop_rate = 1.0
    file_id = stack.sim.put_file(
        "alice", "/Notes/Kiln.md", b"# Kiln\nFire the stoneware kiln to cone six."
    )
    body = php_json(envelope("/alice/files/Notes/Kiln.md", file_id))
    response = httpx.post(
        f"{stack.receiver_url}/hooks/nextcloud",
        content=body,
        headers={
            stack.settings.webhook_secret_header: stack.settings.webhook_secret.get_secret_value(),
            "User-Agent": "Nextcloud-Server-Crawler/32.0.0",
        },
    )
    assert "content-type" not in {k.lower() for k in response.request.headers}
    assert response.status_code == 202
    wait_until(lambda: stack.found("alice", "stoneware kiln", f"note:{file_id}"), 10)


# --- hostile input: ids, unreadable bodies, non-ASCII secrets ------------------------------------


@pytest.mark.parametrize(
    ("event", "field"),
    [
        (
            {"class": TAG_ASSIGNED, "objectType": "files", "objectIds": ["\u00b2"]},
            "event.objectIds",
        ),
        (
            {"class": TAG_ASSIGNED, "objectType": "files", "objectIds": ["\uff11"]},
            "event.objectIds",
        ),
        (
            {"class": "OCA\\Deck\\Event\\CardCreatedEvent", "card": {"id": "\u00b3"}},
            "event.card.id",
        ),
    ],
    ids=["superscript-two", "fullwidth-one", "card-superscript-three"],
)
def test_unicode_digit_ids_are_400_naming_the_field(receiver, event: dict, field: str) -> None:
    client, settings = receiver
    body = {"event": event, "user": {"uid": "alice"}, "time": 1}
    response = post(client, settings, json.dumps(body).encode())
    assert response.status_code == 400, response.get_json()  # was: 500 (int("²"))
    assert (response.get_json()["code"], response.get_json()["field"]) == (
        "invalid_envelope",
        field,
    )


def test_a_rename_that_queues_nothing_says_why(receiver) -> None:
    client, settings = receiver
    event = {
        "class": "OCP\\Files\\Events\\Node\\NodeRenamedEvent",
        "source": {"path": "/alice/files_trashbin/files/x.md.d1767226000"},
        "target": {"path": "/alice/files/x.md"},
    }
    response = post(client, settings, php_json({"event": event, "user": None, "time": 1}))
    assert response.status_code == 202
    assert response.get_json() == {"queued": 0, "ignored": "node_without_id"}


class BrokenStream(io.RawIOBase):
    """A request body whose read fails, as a server's does for broken framing."""

    def readinto(self, buffer) -> int:
        raise OSError("connection reset by peer")


@pytest.mark.parametrize("stream", ["short", "broken"])
def test_a_body_that_cannot_be_read_whole_is_400(
    receiver, private_redis: RedisProcess, stream: str
) -> None:
    client, settings = receiver
    body = php_json(envelope("/alice/files/a.md", 5))  # complete JSON
    # as gunicorn hands it over: the raw stream (input terminated), which answers a short read
    # at EOF when the client sent less than its Content-Length, and raises for broken framing
    environ = {
        "wsgi.input": io.BytesIO(body) if stream == "short" else BrokenStream(),
        "wsgi.input_terminated": True,
        "CONTENT_LENGTH": str(len(body) + 50),
    }
    response = client.post(
        "/hooks/nextcloud",
        environ_overrides=environ,
        headers={settings.webhook_secret_header: settings.webhook_secret.get_secret_value()},
    )
    assert response.status_code == 400  # was: 202 (short) and 500 (broken)
    assert response.content_type == "application/problem+json"
    assert (response.get_json()["code"], response.get_json()["field"]) == ("invalid_value", "body")
    assert redis.Redis.from_url(private_redis.url).llen("index") == 0


NON_ASCII_SECRET = "p\u00e4ssw\u00f6rd-\u20ac-0123456789"


def test_a_non_ascii_secret_is_compared_as_the_bytes_sent(private_redis: RedisProcess) -> None:
    settings = Settings(
        redis_url=private_redis.url,
        webhook_secret=SecretStr(NON_ASCII_SECRET),
        accounts={"alice": SecretStr("pw")},
        debounce_seconds=0,
    )
    client = create_app(settings, producer=celery_app(settings)).test_client()
    body = php_json(envelope("/alice/files/a.md", 5))
    # a WSGI server hands over the header's UTF-8 bytes decoded as latin-1 (PEP 3333)
    as_served = NON_ASCII_SECRET.encode("utf-8").decode("latin-1")
    assert post(client, settings, body, secret=as_served).status_code == 202
    for wrong in (NON_ASCII_SECRET, "p\u00e4ssw\u00f6rd"):  # "€" is not latin-1: 401, not 500
        response = post(client, settings, body, secret=wrong)
        assert response.status_code == 401
        assert response.get_json()["code"] == "unauthenticated"


def test_while_the_secret_is_rotated_the_previous_one_is_accepted(
    private_redis: RedisProcess,
) -> None:
    """A rotated webhook secret reaches the receivers as they roll (``helm upgrade``), and
    Nextcloud's registrations carry the old one until ``ncindex webhooks register`` renews
    them: every delivery in between was refused 401, and Nextcloud sends each once. The
    former secret, set as ``webhook_previous_secret``, is accepted until it is emptied."""
    rotating = Settings(
        redis_url=private_redis.url,
        webhook_secret=SecretStr("the-new-secret-0123456789"),
        webhook_previous_secret=SecretStr("the-old-secret-0123456789"),
        accounts={"alice": SecretStr("pw")},
        debounce_seconds=0,
    )
    body = php_json(envelope("/alice/files/a.md", 5))
    client = create_app(rotating, producer=celery_app(rotating)).test_client()
    for secret in ("the-new-secret-0123456789", "the-old-secret-0123456789"):
        assert post(client, rotating, body, secret=secret).status_code == 202
    assert post(client, rotating, body, secret="wrong").status_code == 401
    assert client.post("/hooks/nextcloud", data=body).status_code == 401  # no header
    done = rotating.model_copy(update={"webhook_previous_secret": SecretStr("")})
    client = create_app(done, producer=celery_app(done)).test_client()
    assert post(client, done, body, secret="the-old-secret-0123456789").status_code == 401
    assert client.post("/hooks/nextcloud", data=body).status_code == 401  # "" is no secret


@pytest.mark.parametrize("setting", ["webhook_secret", "webhook_previous_secret"])
@pytest.mark.parametrize(
    "secret", ["the-secret-0123456789\n", " the-secret-0123456789", "the-secret\r\n-0123456789"]
)
def test_a_secret_nextcloud_cannot_send_as_it_is_refused(setting: str, secret: str) -> None:
    """Nextcloud sends the secret as a header through Guzzle, which trims spaces and tabs off
    a header value and refuses a line break (guzzle/psr7 MessageTrait::trimAndValidateHeaderValues):
    a secret taken from a file with its final newline, or with a space at an end, was accepted
    at start, and every delivery was then refused 401 or never sent. An inner tab or space
    is a header value's own, and stays."""
    with pytest.raises(ValidationError) as refused:
        Settings(**{setting: SecretStr(secret)})
    assert refused.value.errors()[0]["loc"] == (setting,)
    assert secret not in str(refused.value)
    kept = "the secret\t0123456789"
    assert Settings(**{setting: SecretStr(kept)}).model_dump()[setting].get_secret_value() == kept


class Served:
    """The receiver under gunicorn (``deploy/gunicorn.conf.py``) with :data:`NON_ASCII_SECRET`,
    on a private Redis; its JSON log lines in ``log``."""

    def __init__(self, tmp: Path) -> None:
        self.redis_proc = start_redis()
        self.redis = redis.Redis.from_url(self.redis_proc.url)
        self.port = free_port()
        self.log = tmp / "gunicorn.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NCINDEX_", "PROMETHEUS_"))}
        env.update(
            PYTHONPATH=str(ROOT),
            PROMETHEUS_MULTIPROC_DIR=str(tmp / "prometheus"),
            NCINDEX_REDIS_URL=self.redis_proc.url,
            NCINDEX_WEBHOOK_SECRET=NON_ASCII_SECRET,
            NCINDEX_ACCOUNTS=json.dumps({"alice": "pw"}),
            NCINDEX_DEBOUNCE_SECONDS="0",
        )
        self.handle = self.log.open("wb")
        self.popen = subprocess.Popen(
            [str(BIN / "gunicorn"), "-c", str(ROOT / "deploy" / "gunicorn.conf.py"),
             "--bind", f"127.0.0.1:{self.port}", "webhook_receiver.wsgi:app"],
            env=env, cwd=ROOT, stdout=self.handle, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def ready(self) -> bool:
        """Whether ``/livez`` answers (fails the test if gunicorn exited)."""
        assert self.popen.poll() is None, self.log.read_text()
        return exchange(self.port, b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n").startswith(
            b"HTTP/1.1 200"
        )

    def json_lines(self) -> list[dict]:
        """The JSON log lines written so far."""
        return [json.loads(line) for line in self.log.read_text().splitlines() if line[:1] == "{"]

    def stop(self) -> None:
        """Stop gunicorn (SIGTERM, SIGKILL after 30 s) and Redis."""
        self.popen.terminate()
        try:
            self.popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        self.handle.close()
        self.redis.close()
        self.redis_proc.stop()


def exchange(port: int, data: bytes, *, half_close: bool = False) -> bytes:
    """Send ``data`` on a new connection (``Connection: close`` is added to its head), then
    read the answer until the server closes; ``b""`` if nothing could be sent."""
    data = data.replace(b"\r\n", b"\r\nConnection: close\r\n", 1)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(data)
            if half_close:
                conn.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
            return answer
    except OSError:
        return b""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One gunicorn-served receiver for this module's raw-HTTP tests."""
    server = Served(tmp_path_factory.mktemp("gunicorn-receiver"))
    try:
        wait_until(server.ready, timeout=60, interval=0.3)
        yield server
    finally:
        server.stop()


def head(body_header: bytes, secret: str = NON_ASCII_SECRET) -> bytes:
    """A delivery's request head with the secret sent as UTF-8 and ``body_header``."""
    return (
        b"POST /hooks/nextcloud HTTP/1.1\r\nHost: x\r\n"
        + b"X-Ncindex-Secret: " + secret.encode("utf-8") + b"\r\n"
        + body_header + b"\r\n\r\n"
    )  # fmt: skip


def problem_of(answer: bytes) -> tuple[int, dict]:
    """The status and JSON body of a raw HTTP answer."""
    status = int(answer.split(b" ", 2)[1])
    return status, json.loads(answer.partition(b"\r\n\r\n")[2])


def test_non_ascii_secret_sent_as_utf8_is_accepted_under_gunicorn(served: Served) -> None:
    body = php_json(envelope("/alice/files/a.md", 31))
    ok = exchange(served.port, head(b"Content-Length: %d" % len(body)) + body)
    assert problem_of(ok) == (202, {"queued": 1, "coalesced": 0}), ok[:300]  # was: 401
    wrong = head(b"Content-Length: %d" % len(body), secret="p\u00e4ssw\u00f6rd") + body
    assert problem_of(exchange(served.port, wrong))[0] == 401


@pytest.mark.parametrize(
    ("request_head", "status", "code", "field"),
    [
        (b"GARBAGE\r\n\r\n", 400, "invalid_http", None),
        (head(b"Content-Length: abc"), 400, "invalid_http", None),
        (b"POST /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "uri_too_long", "url"),
        (head(b"\r\n".join(b"X-H%d: 1" % i for i in range(120))), 431, "headers_too_large",
         "headers"),
        (head(b"Transfer-Encoding: gzip"), 400, "invalid_http", None),
        (head(b"Expect: foo"), 417, "expectation_failed", "Expect"),
        (head(b"Transfer-Encoding: xchunked"), 501, "not_implemented", None),
    ],
    ids=["request-line", "content-length", "long-url", "many-headers", "transfer-coding",
         "expect", "unknown-coding"],
)  # fmt: skip
def test_requests_gunicorn_cannot_parse_get_problem_json(
    served: Served, request_head: bytes, status: int, code: str, field: str | None
) -> None:
    answer = exchange(served.port, request_head)
    assert b"\r\ncontent-type: application/problem+json\r\n" in answer.lower(), answer[:300]
    # the standard reason phrase (gunicorn sends "501 Bad Request")
    assert answer.startswith(f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n".encode())
    got, problem = problem_of(answer)  # was: gunicorn's HTML page
    assert (got, problem["code"], problem.get("field")) == (status, code, field)
    assert problem["status"] == status and problem["detail"]


@pytest.mark.parametrize("size", [b"zz", b"-5"])
def test_broken_chunked_framing_is_400_under_gunicorn(served: Served, size: bytes) -> None:
    body = php_json(envelope("/alice/files/a.md", 32))
    chunked = size + b"\r\n" + body + b"\r\n0\r\n\r\n"
    answer = exchange(served.port, head(b"Transfer-Encoding: chunked") + chunked)
    status, problem = problem_of(answer)
    assert status == 400, answer[:300]  # was: 500, gunicorn's InvalidChunkSize unhandled
    assert (problem["code"], problem["field"]) == ("invalid_value", "body")


def test_body_shorter_than_its_content_length_is_400_under_gunicorn(served: Served) -> None:
    body = php_json(envelope("/alice/files/a.md", 33))  # complete JSON, 50 bytes short
    before = served.redis.llen("index")
    answer = exchange(
        served.port, head(b"Content-Length: %d" % (len(body) + 50)) + body, half_close=True
    )
    status, problem = problem_of(answer)
    assert status == 400, answer[:300]  # was: 202 queued 1 (gunicorn's short read at EOF)
    assert (problem["code"], problem["field"]) == ("invalid_value", "body")
    assert served.redis.llen("index") == before


def test_a_client_gone_mid_body_is_not_a_500_under_gunicorn(served: Served) -> None:
    body = php_json(envelope("/alice/files/gone.md", 34))
    seen = len(served.json_lines())
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        # one chunk, then the connection closes without the last chunk
        conn.sendall(head(b"Transfer-Encoding: chunked") + b"%x\r\n" % len(body) + body + b"\r\n")

    def logged() -> list[dict]:
        return [line for line in served.json_lines()[seen:] if line.get("path")]

    (access,) = wait_until(logged, timeout=10)
    assert (access["path"], access["status"]) == ("/hooks/nextcloud", 400)  # was: 500
    assert not [x for x in served.json_lines()[seen:] if x.get("event") == "unhandled error"]


@pytest.mark.parametrize(
    ("field", "secret", "name"),
    [
        ("webhook_secret", "mysecret", "NCINDEX_WEBHOOK_SECRET has fewer than 16"),
        ("webhook_previous_secret", "short", "NCINDEX_WEBHOOK_PREVIOUS_SECRET has fewer"),
        ("webhook_secret", "change-me-to-a-long-random-string", "placeholder"),
    ],
)
def test_a_weak_webhook_secret_is_warned_of_at_start(
    private_redis: RedisProcess, field: str, secret: str, name: str
) -> None:
    """The receiver (and so ``ncindex up``) took an 8-character secret without a word while
    ``ncindex doctor`` warned of it: it starts all the same, and logs the doctor's sentence."""
    from structlog.testing import capture_logs

    from ncindex.settings import weak_webhook_secret

    strong = Settings(redis_url=private_redis.url, webhook_secret=SecretStr("x" * 16))
    weak = strong.model_copy(update={field: SecretStr(secret)})
    with capture_logs() as logs:
        create_app(strong, producer=celery_app(strong))
    assert not [e for e in logs if e["event"] == "webhook_secret_weak"], logs
    with capture_logs() as logs:
        create_app(weak, producer=celery_app(weak))
    [warning] = [e for e in logs if e["event"] == "webhook_secret_weak"]
    assert warning["log_level"] == "warning" and name in warning["problem"]
    assert warning["problem"] == weak_webhook_secret(weak)
