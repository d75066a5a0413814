"""The whole pipeline against Nextcloud's real formats and setups: a sub-path install, events
without a session user, login names that differ from user ids, a refused account, a note or
a folder an access-control rule blocks, and the trash restore."""

from __future__ import annotations

import time

from pydantic import SecretStr

from ncindex.accounts import refused_accounts
from ncindex.documents import DocType
from ncindex.index.indexing import Indexer
from ncindex.ingest.queueing import celery_app
from ncindex.names import QUEUES
from ncindex.sync.reconcile import Reconciler
from ncindex.sync.status import collect_status
from ncindex.telemetry import QueueCollector
from support import Stack


def settle(stack: Stack) -> None:
    stack.sim.flush_deliveries(timeout=60)
    stack.wait_idle(60)


def test_the_whole_cycle_under_a_sub_path(subpath_stack: Stack) -> None:
    stack = subpath_stack
    assert stack.settings.nextcloud_url.endswith("/nextcloud")
    # register: done by the fixture through /nextcloud/ocs/…; every class went in
    assert {r.event for r in stack.sim.registry.list()} >= {
        "OCP\\Files\\Events\\Node\\NodeWrittenEvent",
        "OCA\\Files_Trashbin\\Events\\NodeRestoredEvent",
    }
    # deliveries → index
    note = stack.sim.put_file(
        "alice", "/Notes/Bridge.md", "# Bridge\nThe stone bridge opens in June."
    )
    doc = stack.sim.put_file("alice", "/Docs/ferry.md", "# Ferry\nThe ferry timetable changes.")
    settle(stack)
    assert stack.points(f"note:{note}") and stack.points(f"file:{doc}")
    # search, verified by WebDAV SEARCH whose hrefs start with /nextcloud
    body = stack.search_as("alice", "ferry timetable")
    assert body["results"][0]["doc_id"] == str(doc)
    assert body["results"][0]["path"] == "/Docs/ferry.md"
    assert body["verification"]["errors"] == 0 and body["verification"]["kept"] >= 1
    # reconcile: a share fires no webhook; bob's scan finds it (PROPFIND hrefs under the root)
    stack.sim.share("alice", "/Docs", "bob")
    producer = celery_app(stack.settings)
    try:
        report = Reconciler(stack.services, Indexer(stack.services), producer).scan(
            "bob", DocType.FILE
        )
    finally:
        producer.close()
    assert report.error is None and report.listed == 1, report.summary()
    stack.wait_idle(60)
    assert stack.found("bob", "ferry timetable", f"file:{doc}") is not None
    # verification drops what bob no longer sees
    stack.sim.drop_rate = 1.0
    stack.sim.unshare("alice", "/Docs", "bob")
    assert stack.found("bob", "ferry timetable", f"file:{doc}") is None
    stack.sim.drop_rate = 0.0
    # delete → evicted; restore from the trash (files_trashbin's event) → indexed again
    stack.sim.delete("alice", "/Docs/ferry.md")
    settle(stack)
    assert not stack.points(f"file:{doc}")
    stack.sim.restore("alice", doc)
    settle(stack)
    assert stack.points(f"file:{doc}")


def test_a_session_less_tag_assignment_reaches_every_viewer(stack: Stack) -> None:
    doc = stack.sim.put_file("alice", "/Shared/plan.md", "# Plan\nRebuild the stone bridge.")
    stack.sim.share("alice", "/Shared", "bob")
    settle(stack)
    tag = stack.sim.create_tag("urgent")
    stack.sim.assign_tag("alice", "/Shared/plan.md", tag, session=False)  # "user": null
    assert stack.sim.events[-1]["user"] is None
    settle(stack)
    payload = stack.points(f"file:{doc}")[0].payload
    assert payload["tags"] == ["urgent"]
    assert payload["acl"] == ["user:alice", "user:bob"]  # resolved for both viewers


def test_a_login_name_that_is_not_the_user_id(stack: Stack) -> None:
    stack.sim.add_user("u1001", "dave-pw", "Dave", login_name="dave@example.test")
    stack.settings.accounts["u1001"] = SecretStr("dave-pw")
    stack.settings.logins["u1001"] = "dave@example.test"
    doc = stack.sim.put_file("u1001", "/notes.md", "# Lighthouse\nThe lighthouse keeper's log.")
    settle(stack)
    assert stack.points(f"file:{doc}")[0].payload["acl"] == ["user:u1001"]
    response = stack.search.post(
        "/v1/search", json={"query": "lighthouse keeper"}, auth=("dave@example.test", "dave-pw")
    )
    assert response.status_code == 200
    assert [r["doc_id"] for r in response.get_json()["results"]] == [str(doc)]


def test_a_refused_account_is_reported_and_its_tasks_end(stack: Stack) -> None:
    stack.sim.tree.users["carol"].passwords.clear()  # carol's app password revoked
    stack.sim.tree.users["carol"].token_logins.clear()
    stack.sim.put_file("carol", "/a.md", "# A\ncarol's text")
    settle(stack)  # the index task met 401: recorded, not retried
    keys = stack.settings.names
    assert list(refused_accounts(stack.services.redis, keys)) == ["carol"]
    ready = stack.search.get("/readyz")
    assert ready.status_code == 200 and ready.get_json()["accounts_refused"] == 1
    assert list(collect_status(stack.services.redis, keys)["accounts_refused"]) == ["carol"]
    gauges = {
        (m.name, tuple(s.labels.items())): s.value
        for m in QueueCollector(
            stack.services.redis, QUEUES, keys=keys, accounts=stack.settings.accounts
        ).collect()
        for s in m.samples
    }
    assert gauges[("ncindex_account_refused", (("user", "carol"),))] == 1
    # a new app password (Nextcloud generates each one anew): the next scan gets through and
    # clears it; the refused one is not sent again for a while (ncindex.accounts.held_until)
    stack.sim.add_app_password("carol", "carol-new-app-pw")
    stack.settings.accounts["carol"] = SecretStr("carol-new-app-pw")
    producer = celery_app(stack.settings)
    try:
        Reconciler(stack.services, Indexer(stack.services), producer).scan("carol", DocType.FILE)
    finally:
        producer.close()
    assert refused_accounts(stack.services.redis, keys) == {}


def test_a_blocked_note_is_dropped_by_verification(stack: Stack) -> None:
    note = stack.sim.put_file("alice", "/Notes/Vault.md", "# Vault\nThe vault combination.")
    settle(stack)
    assert stack.found("alice", "vault combination", f"note:{note}") is not None
    stack.sim.drop_rate = 1.0
    stack.sim.block_access("alice", "/Notes/Vault.md")  # Notes answers 200, "error": true
    body = stack.search_as("alice", "vault combination")
    assert all(r["doc_id"] != str(note) for r in body["results"])
    assert body["verification"]["dropped"] >= 1


def test_a_folder_that_answers_403_is_skipped_and_counted(stack: Stack) -> None:
    stack.sim.put_file("alice", "/Open/a.md", "# Open\nopen text")
    hidden = stack.sim.put_file("alice", "/Closed/b.md", "# Closed\nclosed text")
    settle(stack)
    stack.sim.drop_rate = 1.0
    stack.sim.block_access("alice", "/Closed")  # PROPFIND Depth 1 of /Closed: 403
    stack.settings.reconcile_grace_seconds = 0
    producer = celery_app(stack.settings)
    try:
        report = Reconciler(stack.services, Indexer(stack.services), producer).scan(
            "alice", DocType.FILE
        )
    finally:
        producer.close()
    assert report.error is None and report.forbidden == 1, report.summary()
    assert report.summary()["forbidden_folders"] == 1
    assert report.listed == 1  # /Open/a.md still listed
    assert [c.doc_id for c in report.remove] == [str(hidden)]  # re-checked by id …
    stack.wait_idle(60)
    deadline = time.monotonic() + 30
    while stack.points(f"file:{hidden}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not stack.points(f"file:{hidden}")  # … and found unreadable: removed
