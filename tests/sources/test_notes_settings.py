"""Which files are notes: the user's own Notes suffix counts, as in nextcloud/notes
``NotesService::isNote`` (built-in extensions, or the user's ``customSuffix``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import redis

from ncindex.documents import DocType
from ncindex.nextcloud.client import NextcloudClient
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.sources.eligibility import classify

NOTES = "/index.php/apps/notes/api/v1"


@dataclass
class Ctx:
    settings: Settings
    redis: redis.Redis


@pytest.fixture
def served() -> Iterator[tuple[NextcloudSimulator, httpx.Client]]:
    sim = NextcloudSimulator(seed=1)
    sim.add_user("alice", "alice-pw", "Alice Adams")
    with serve_simulator(sim) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        yield sim, http
    sim.close()


def test_a_file_with_the_users_own_suffix_is_a_note(
    served: tuple[NextcloudSimulator, httpx.Client], redis_url: str
) -> None:
    sim, http = served
    client = NextcloudClient.for_account(http, "alice", "alice-pw")
    ctx = Ctx(Settings(namespace=f"t{uuid.uuid4().hex[:8]}"), redis.Redis.from_url(redis_url))
    auth = ("alice", "alice-pw")
    assert http.put(f"{NOTES}/settings", json={"fileSuffix": ".wiki"}, auth=auth).is_success
    sim.put_file("alice", "/Notes/Plan.wiki", b"# Plan")
    sim.put_file("alice", "/Notes/Other.text", b"# Other")
    listed = {n["title"] for n in http.get(f"{NOTES}/notes", auth=auth).json()}
    assert listed == {"Plan"}  # the Notes app's own view
    entries = {e.path: e for e in client.propfind("/Notes")}
    ref, _ = classify(ctx, client, entries["/Notes/Plan.wiki"])
    assert ref is not None and ref.doc_type is DocType.NOTE
    other, _ = classify(ctx, client, entries["/Notes/Other.text"])
    assert other is None or other.doc_type is DocType.FILE
    # read back from the Redis cache, the suffix still counts
    again, _ = classify(ctx, client, entries["/Notes/Plan.wiki"])
    assert again is not None and again.doc_type is DocType.NOTE
