"""The receiver's answers over real HTTP: 202, 401, 413, 400 with the field, 503 when the
broker is down, debounce (repeats coalesced, every key claimed in one pipeline, no key left
behind for a task that was not sent), and a real-format envelope without Content-Type becoming
searchable."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import httpx
import pytest
import redis
from pydantic import SecretStr

from ncindex.queueing import DEBOUNCE_PREFIX, celery_app
from ncindex.redis_server import RedisProcess, start_redis
from ncindex.settings import Settings
from support import Stack, wait_until
from webhook_receiver import create_app

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
def private_redis() -> Iterator[RedisProcess]:
    server = start_redis()
    yield server
    server.stop()


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


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"not json", "body"),
        (b"[1, 2]", "body"),
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
    stranger = envelope("/mallory/files/a.md", 7)
    assert post(client, settings, php_json(stranger)).get_json()["ignored"] == "unknown_user"


def test_broker_down_is_503_never_2xx(receiver, private_redis: RedisProcess) -> None:
    client, settings = receiver
    private_redis.stop()
    response = post(client, settings, php_json(envelope("/alice/files/Notes/a.md", 7)))
    assert response.status_code == 503
    assert response.get_json()["code"] == "backend_unavailable"
    private_redis.start_again()
    response = post(client, settings, php_json(envelope("/alice/files/Notes/a.md", 8)))
    assert response.status_code == 202


def tag_envelope(*file_ids: int) -> dict:
    return {
        "event": {
            "class": TAG_ASSIGNED,
            "objectType": "files",
            "objectIds": [str(i) for i in file_ids],
            "tagIds": [3],
        },
        "user": {"uid": "alice", "displayName": "Alice"},
        "time": 1767225601,
    }


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
    )
    client = redis.Redis.from_url(private_redis.url)
    yield settings, client
    client.close()


def test_repeats_inside_the_debounce_window_are_coalesced(debounced) -> None:
    settings, client = debounced
    http = create_app(settings, producer=celery_app(settings)).test_client()
    answers = [
        post(http, settings, php_json(envelope("/alice/files/Notes/a.md", 7))).get_json()
        for _ in range(3)
    ]
    assert answers == [{"queued": 1, "coalesced": 0}] + [{"queued": 0, "coalesced": 1}] * 2
    assert client.llen("index") == 1
    assert client.pttl(f"{DEBOUNCE_PREFIX}index:alice:7") > 30_000

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
    assert sorted(client.keys(f"{DEBOUNCE_PREFIX}*")) == [
        f"{DEBOUNCE_PREFIX}index:alice:5".encode()
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
