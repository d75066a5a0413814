"""Tag events, folder deletes, Deck cards and News items through the pipeline, and the event
mapping of the classes added for them."""

from __future__ import annotations

import pytest
from pipeline_support import post_envelope

from ncindex.errors import EnvelopeError
from ncindex.index.indexing import Indexer
from ncindex.ingest.events import TAG_ASSIGNED, parse_envelope, plan_envelope
from ncindex.ingest.queueing import celery_app
from ncindex.ingest.registration import registration
from ncindex.sources.deck_card import (
    ACL_CREATED,
    ACL_DELETED,
    CARD_CREATED,
    CARD_DELETED,
    CARD_UPDATED,
    DECK_SUBSCRIBED,
)
from support import Stack, wait_until

ACCOUNTS = {"alice", "bob"}
ALICE = {"uid": "alice", "displayName": "Alice"}


def envelope(cls: str, user: dict[str, str] | None = ALICE, **event: object) -> dict:
    return {"event": {**event, "class": cls}, "user": user, "time": 1767225600}


def test_tag_events_map_each_object_id_to_an_index_task() -> None:
    raw = envelope(TAG_ASSIGNED, objectType="files", objectIds=["17", "9", "17"], tagIds=[3])
    plan = plan_envelope(parse_envelope(raw), ACCOUNTS)
    assert [(a.task, a.kwargs) for a in plan.actions] == [
        ("ncindex.index_node", {"user": "alice", "file_id": 9}),
        ("ncindex.index_node", {"user": "alice", "file_id": 17}),
    ]
    no_user = envelope(TAG_ASSIGNED, None, objectType="files", objectIds=["1"], tagIds=[3])
    (resolve,) = plan_envelope(parse_envelope(no_user), ACCOUNTS).actions  # by file id
    assert (resolve.task, resolve.kwargs) == ("ncindex.resolve_node", {"file_id": 1})
    other = envelope(TAG_ASSIGNED, objectType="comments", objectIds=["1"], tagIds=[3])
    assert plan_envelope(parse_envelope(other), ACCOUNTS).ignored == "tag_object_type"
    with pytest.raises(EnvelopeError) as err:
        parse_envelope(envelope(TAG_ASSIGNED, objectType="files", objectIds=["x"], tagIds=[]))
    assert err.value.field == "event.objectIds"


def test_deck_card_events_map_to_index_and_evict() -> None:
    card = {"id": 41, "title": "Ship", "stackId": 3}
    tasks = {
        cls: plan_envelope(parse_envelope(envelope(cls, card=card)), ACCOUNTS).actions[0]
        for cls in (CARD_CREATED, CARD_UPDATED, CARD_DELETED)
    }
    assert tasks[CARD_CREATED].task == tasks[CARD_UPDATED].task == "ncindex.index_document"
    assert tasks[CARD_DELETED].task == "ncindex.evict_document"
    assert tasks[CARD_UPDATED].kwargs == {"user": "alice", "doc_type": "deck_card", "doc_id": 41}
    assert plan_envelope(parse_envelope(envelope(CARD_CREATED, None, card=card)), ACCOUNTS).ignored
    with pytest.raises(EnvelopeError) as err:
        parse_envelope(envelope(CARD_UPDATED, card={"title": "no id"}))
    assert err.value.field == "event.card.id"
    # a board's ACL entry added or removed: its indexed cards are re-read as the actor
    acl = {"id": 7, "participant": {"uid": "bob"}, "type": 0, "boardId": 3}
    for cls in (ACL_CREATED, ACL_DELETED):
        (action,) = plan_envelope(parse_envelope(envelope(cls, acl=acl)), ACCOUNTS).actions
        assert (action.task, action.kwargs) == (
            "ncindex.index_related",
            {"user": "alice", "doc_type": "deck_card", "field": "board_id", "value": 3},
        )
    with pytest.raises(EnvelopeError) as err:
        parse_envelope(envelope(ACL_DELETED, acl={"id": 7}))
    assert err.value.field == "event.acl.boardId"
    # shared by someone ncindex has no account for (or by occ): read as the participant when
    # configured — a resolved user (Deck's RelationalObject: primaryKey, uid) or a bare uid
    carol = {"uid": "carol", "displayName": "Carol"}
    for participant in ({"primaryKey": "bob", "uid": "bob", "type": 0}, "bob"):
        entry = {**acl, "participant": participant}
        for user in (carol, None):
            (action,) = plan_envelope(
                parse_envelope(envelope(ACL_CREATED, user, acl=entry)), ACCOUNTS
            ).actions
            assert action.kwargs["user"] == "bob"
    for entry in (
        {**acl, "participant": {"primaryKey": "dave", "uid": "dave"}},  # not configured
        {**acl, "participant": "bob", "type": 1},  # a group named bob
    ):
        plan = plan_envelope(parse_envelope(envelope(ACL_DELETED, carol, acl=entry)), ACCOUNTS)
        assert plan.ignored == "unknown_user" and not plan.actions


def test_tag_assignment_updates_tags_without_embedding(stack: Stack) -> None:
    file_id = stack.sim.put_file("alice", "/Docs/boat.txt", b"The dinghy needs new oarlocks.")
    key = f"file:{file_id}"
    wait_until(lambda: stack.points(key), 15)
    stack.wait_idle(15)
    embedded = stack.services.embedder.dense_embedded
    tag = stack.sim.create_tag("Boats")
    stack.sim.assign_tag("alice", "/Docs/boat.txt", tag)
    wait_until(lambda: stack.points(key)[0].payload["tags"] == ["Boats"], 15)
    stack.sim.unassign_tag("alice", "/Docs/boat.txt", tag)
    wait_until(lambda: stack.points(key)[0].payload["tags"] == [], 15)
    assert stack.services.embedder.dense_embedded == embedded
    # an assignment without a user session is resolved by file id to the accounts seeing it
    stack.sim.assign_tag("alice", "/Docs/boat.txt", tag, session=False)
    stack.sim.flush_deliveries(timeout=5)
    last = [d for d in stack.sim.deliveries if d.envelope["event"]["class"] == TAG_ASSIGNED][-1]
    assert last.status == 202 and last.envelope["user"] is None
    stack.wait_idle(15)
    assert stack.points(key)[0].payload["tags"] == ["Boats"]
    assert stack.services.embedder.dense_embedded == embedded


def test_folder_delete_evicts_everything_beneath(stack: Stack) -> None:
    paths = ["/Trip/plan.md", "/Trip/days/day1.txt", "/Trip/days/deep/day2.txt", "/Keep/k.txt"]
    ids = {p: stack.sim.put_file("alice", p, f"Itinerary for {p}: ferry then bus.") for p in paths}
    wait_until(lambda: all(stack.points(f"file:{i}") for i in ids.values()), 20)
    stack.sim.delete("alice", "/Trip")
    stack.sim.flush_deliveries(timeout=5)
    gone = [f"file:{ids[p]}" for p in paths[:3]]
    wait_until(lambda: not any(stack.points(k) for k in gone), 20)
    assert stack.points(f"file:{ids['/Keep/k.txt']}")


def enable_deck_webhooks(stack: Stack) -> None:
    stack.sim.deck_webhooks = True  # Deck ≥ 1.18
    admin = stack.services.account(stack.settings.webhook_admin)
    for cls in DECK_SUBSCRIBED:
        admin.create_webhook(registration(stack.settings, cls))


def test_deck_cards_are_indexed_shared_and_evicted_through_their_events(stack: Stack) -> None:
    enable_deck_webhooks(stack)
    board = stack.sim.deck_create_board("alice", "Harbour works")
    todo = stack.sim.deck_create_stack("alice", board, "To do")
    card = stack.sim.deck_create_card(
        "alice", todo, "Dredge the inner basin", "Book the **dredger** before the spring tide."
    )
    key = f"deck_card:{card}"
    points = wait_until(lambda: stack.points(key), 20)
    payload = points[0].payload
    assert payload["board_id"] == str(board) and payload["stack_id"] == str(todo)
    assert payload["title"] == "Dredge the inner basin" and payload["acl"] == ["user:alice"]
    assert "dredger" in payload["text"]
    stack.sim.deck_share_board("alice", board, "bob")
    stack.sim.deck_update_card("alice", card, description="Book the dredger for March.")
    wait_until(lambda: "March" in stack.points(key)[0].payload["text"], 20)
    assert stack.points(key)[0].payload["acl"] == ["user:alice", "user:bob"]
    stack.sim.deck_delete_card("alice", card)
    wait_until(lambda: not stack.points(key), 20)


def test_a_card_moved_is_followed_through_its_card_updated_event(stack: Stack) -> None:
    """Deck dispatches ``CardUpdatedEvent`` for a card moved to another stack, of its board
    (nextcloud/deck ``lib/Service/CardService.php`` ``reorder``) or of another board
    (``update``, its ``stackId``): the card is re-read and its ``board_id``/``stack_id``
    follow, so a search on its new board finds it without a search having seen it moved."""
    enable_deck_webhooks(stack)
    board, other = (stack.sim.deck_create_board("alice", t) for t in ("Slipway", "Dry dock"))
    todo, done = (stack.sim.deck_create_stack("alice", board, t) for t in ("To do", "Done"))
    inbox = stack.sim.deck_create_stack("alice", other, "Inbox")
    card = stack.sim.deck_create_card("alice", todo, "Caulk the hull", "Oakum and pitch.")
    key = f"deck_card:{card}"
    wait_until(lambda: stack.points(key), 20)

    def where() -> tuple[str, str]:
        payload = stack.points(key)[0].payload
        return payload["board_id"], payload["stack_id"]

    stack.sim.deck_update_card("alice", card, stack_id=done)
    wait_until(lambda: where() == (str(board), str(done)), 20)
    stack.sim.deck_update_card("alice", card, stack_id=inbox)
    wait_until(lambda: where() == (str(other), str(inbox)), 20)
    on_other = {"field": "board_id", "op": "eq", "value": str(other)}
    assert stack.found("alice", "caulk the hull", key, filter=on_other)


def test_a_board_shared_and_unshared_reaches_its_cards_acl_through_its_acl_events(
    stack: Stack,
) -> None:
    enable_deck_webhooks(stack)
    board = stack.sim.deck_create_board("alice", "Lock gates")
    todo = stack.sim.deck_create_stack("alice", board, "To do")
    card = stack.sim.deck_create_card("alice", todo, "Grease the hinges", "Both upper gates.")
    key = f"deck_card:{card}"
    wait_until(lambda: stack.points(key), 20)
    # no card changes: only the board's AclCreatedEvent / AclDeletedEvent say it
    stack.sim.deck_share_board("alice", board, "bob")
    wait_until(lambda: stack.points(key)[0].payload["acl"] == ["user:alice", "user:bob"], 20)
    stack.settle()  # each step's tasks done (a grant re-reads the board) before the next
    stack.sim.deck_unshare_board("alice", board, "bob")
    wait_until(lambda: stack.points(key)[0].payload["acl"] == ["user:alice"], 20)
    # bob, shared the board again, writes a card and leaves the board (BoardService::leave:
    # AclDeletedEvent with bob as the actor): his card is re-read as him, which he can no
    # longer see; alice, whose board it is, keeps it
    stack.sim.deck_share_board("alice", board, "bob")
    his = f"deck_card:{stack.sim.deck_create_card('bob', todo, 'Oil the sluice', 'Monthly.')}"
    wait_until(
        lambda: [p.payload["acl"] for p in stack.points(his)] == [["user:alice", "user:bob"]], 20
    )
    stack.settle()
    stack.sim.deck_leave_board("bob", board)
    wait_until(lambda: stack.points(key)[0].payload["acl"] == ["user:alice"], 20)
    stack.wait_idle()
    assert [p.payload["acl"] for p in stack.points(his)] == [["user:alice"]]


def test_search_drop_of_a_card_rechecks_it_for_that_user(stack: Stack) -> None:
    board = stack.sim.deck_create_board("alice", "Quay repairs")
    todo = stack.sim.deck_create_stack("alice", board, "To do")
    card = stack.sim.deck_create_card("alice", todo, "Quay bollards", "Repaint the bollards.")
    stack.sim.deck_share_board("alice", board, "bob")
    key = f"deck_card:{card}"
    celery = celery_app(stack.settings)
    celery.send_task(
        "ncindex.index_document",
        kwargs={"user": "bob", "doc_type": "deck_card", "doc_id": card},
        queue="index",
    )
    wait_until(lambda: (p := stack.points(key)) and "user:bob" in p[0].payload["acl"], 20)
    # the task's own re-read of the board after its grant is over (else it, not the search,
    # sees bob gone)
    stack.wait_idle()
    # bob leaves the board; ncindex subscribes to card events only, so nothing tells it
    stack.sim.deck_unshare_board("alice", board, "bob")
    body = stack.search_as("bob", "repaint the quay bollards")
    assert key not in [f"{r['doc_type']}:{r['doc_id']}" for r in body["results"]]
    assert body["verification"]["dropped"] == 1
    # the drop queued a re-check that takes bob's access from the index; alice keeps hers
    wait_until(lambda: "user:bob" not in stack.points(key)[0].payload["acl"], 20)
    assert stack.points(key)[0].payload["acl"] == ["user:alice"]


def test_archived_card_is_not_indexed(stack: Stack) -> None:
    enable_deck_webhooks(stack)
    board = stack.sim.deck_create_board("alice", "Garden")
    todo = stack.sim.deck_create_stack("alice", board, "Beds")
    card = stack.sim.deck_create_card("alice", todo, "Plant garlic", "Before the first frost.")
    wait_until(lambda: stack.points(f"deck_card:{card}"), 20)
    stack.sim.deck_archive_card("alice", card)
    wait_until(lambda: not stack.points(f"deck_card:{card}"), 20)


def test_news_items_are_indexed_on_request_and_dropped_when_purged(stack: Stack) -> None:
    # News has no webhooks: the reconcile scan lists the items and queues these tasks
    # (tests/sync/test_scans.py::test_deck_cards_and_news_items_are_reconciled)
    feed = stack.sim.news_add_feed("alice", "https://blog.example.test/feed", "Harbour blog")
    first = stack.sim.news_add_item(
        "alice", feed, "New pier", "<p>The <b>new pier</b> opens for ferries in May.</p>"
    )
    second = stack.sim.news_add_item("alice", feed, "Crane", "<p>The crane was repainted.</p>")
    producer = celery_app(stack.settings)
    producer.send_task(
        "ncindex.index_document",
        kwargs={"user": "alice", "doc_type": "news_item", "doc_id": first},
        queue="index",
    )
    points = wait_until(lambda: stack.points(f"news_item:{first}"), 20)
    payload = points[0].payload
    assert payload["feed_id"] == str(feed) and payload["url"].startswith("https://")
    assert "new pier opens for ferries in May" in payload["text"]
    assert payload["acl"] == ["user:alice"]
    indexer = Indexer(stack.services)
    assert indexer.index_document("alice", "news_item", second).action == "indexed"
    stack.sim.news_purge_item("alice", first)
    assert indexer.index_document("alice", "news_item", first).action == "evicted"
    assert not stack.points(f"news_item:{first}")
    # so is one whose feed was deleted
    stack.sim.news_delete_feed("alice", feed)
    assert indexer.index_document("alice", "news_item", second).action == "evicted"
    assert not stack.points(f"news_item:{second}")


def test_the_receiver_ignores_card_events_of_unknown_users(stack: Stack) -> None:
    raw = envelope(CARD_CREATED, {"uid": "mallory"}, card={"id": 1, "stackId": 1})
    response = post_envelope(stack, raw)
    assert response.status_code == 202 and response.json()["ignored"] == "unknown_user"
