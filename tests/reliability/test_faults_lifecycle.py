"""Lifecycle faults on real parts: access taken away while a task that read a document before
the change writes after it."""

from __future__ import annotations

from typing import Any

import pytest

from ncindex.errors import NextcloudAuthError, NextcloudUnavailable, StoreUnavailable
from support import Stack


@pytest.mark.parametrize("touched", [False, True], ids=["same_etag", "new_etag"])
@pytest.mark.parametrize("batch", [False, True], ids=["index_node", "index_nodes"])
def test_a_share_revoked_while_a_metadata_update_is_in_flight_is_not_written_back(
    fresh_stack: Stack, batch: bool, touched: bool
) -> None:
    """Bob's task for a file newly shared with him finds its text unchanged (a metadata-only
    update: his access and path are added, no embedding). Alice revokes the share after the
    task read the file and before it writes: the write must not leave bob in the ``acl``
    (before: he stayed there until his next scan and its grace period, the task never looked
    again, as it does after writing a new version).

    ``touched``: the file has a new etag with the same text (touched without an event,
    alice's index still at the older version), so bob's task downloads it and finds the text
    unchanged in ``write_documents`` — a walk of a folder newly shared with him still running
    when the share poll sees the share gone, whose re-check found nothing of bob's yet. That
    write was not looked up again either (only a new text or an unchanged etag was)."""
    stack = fresh_stack
    sim, indexer, fid = alices_file_shared_with_bob(stack)
    if touched:
        sim.touch("alice", "/Shared/plan.txt", 1_900_000_000)  # a new etag, no event
    real_fetch = indexer.steps.fetch
    revoked: list[bool] = []

    def fetch_then_revoke(*args: Any, **kwargs: Any) -> Any:
        fetched = real_fetch(*args, **kwargs)
        assert (fetched.doc is not None) is touched  # downloaded only at a new etag
        if not revoked:  # bob's read is done: the share goes before his write
            revoked.append(sim.unshare("alice", "/Shared/plan.txt", "bob"))
        return fetched

    indexer.steps.fetch = fetch_then_revoke  # type: ignore[method-assign]
    try:
        if batch:
            outcome = indexer.index_nodes("bob", [fid]).outcomes[fid]
        else:
            outcome = indexer.index_node("bob", fid)
    finally:
        indexer.steps.fetch = real_fetch  # type: ignore[method-assign]
    assert revoked == [True]
    payload = stack.points(f"file:{fid}")[0].payload
    assert payload["acl"] == ["user:alice"], (outcome, payload["acl"])
    assert payload["paths"] == {"alice": "/Shared/plan.txt"}
    assert outcome.action == "evicted"


@pytest.mark.parametrize("batch", [False, True], ids=["index_node", "index_nodes"])
def test_a_grant_whose_look_up_fails_is_taken_back_so_the_retry_looks_again(
    fresh_stack: Stack, batch: bool
) -> None:
    """Bob's metadata-only update for a file newly shared with him (his access and path
    added) is looked up by id after its write, and that SEARCH fails (503): the write's grant
    is taken back — ``acl`` and paths as before it — and the failure goes on (``index_node``
    raises for its task's retry; ``index_nodes`` leaves the file to a task of its own). That
    run grants again and looks again, so a share revoked during it is not written back
    (before: the grant stayed, the retry found bob in the ``acl`` already, wrote nothing new
    and never looked again; bob kept the file until his next scan)."""
    stack = fresh_stack
    sim, indexer, fid = alices_file_shared_with_bob(stack)
    real_fetch = indexer.steps.fetch

    def fetch_then_fail(*args: Any, **kwargs: Any) -> Any:
        fetched = real_fetch(*args, **kwargs)
        sim.faults.set("dav-search", status=503)  # the look-up after the write fails
        return fetched

    indexer.steps.fetch = fetch_then_fail  # type: ignore[method-assign]
    try:
        if batch:
            result = indexer.index_nodes("bob", [fid])
            assert (result.alone, result.outcomes) == ([fid], {}), result
        else:
            with pytest.raises(NextcloudUnavailable):
                indexer.index_node("bob", fid)
    finally:
        indexer.steps.fetch = real_fetch  # type: ignore[method-assign]
        sim.faults.clear()
    payload = stack.points(f"file:{fid}")[0].payload
    assert payload["acl"] == ["user:alice"]
    assert payload["paths"] == {"alice": "/Shared/plan.txt"}

    # the retry (the file's own task): the share is revoked between its read and its write
    revoked: list[bool] = []

    def fetch_then_revoke(*args: Any, **kwargs: Any) -> Any:
        fetched = real_fetch(*args, **kwargs)
        if not revoked:
            revoked.append(sim.unshare("alice", "/Shared/plan.txt", "bob"))
        return fetched

    indexer.steps.fetch = fetch_then_revoke  # type: ignore[method-assign]
    try:
        outcome = indexer.index_node("bob", fid)
    finally:
        indexer.steps.fetch = real_fetch  # type: ignore[method-assign]
    assert revoked == [True]
    assert outcome.action == "evicted"
    payload = stack.points(f"file:{fid}")[0].payload
    assert payload["acl"] == ["user:alice"]
    assert payload["paths"] == {"alice": "/Shared/plan.txt"}


def store_writes_fail(indexer: Any) -> None:
    """Make every payload write and document delete of ``indexer``'s store raise
    ``StoreUnavailable`` (the roll-backs' writes), until :func:`store_writes_back`."""

    def fail(*args: Any, **kwargs: Any) -> None:
        raise StoreUnavailable("store down during the roll-back")

    indexer.services.store.set_payload = fail
    indexer.services.store.delete_document = fail


def store_writes_back(indexer: Any) -> None:
    """Undo :func:`store_writes_fail` (the instance attributes hid the class's methods)."""
    del indexer.services.store.set_payload
    del indexer.services.store.delete_document


def alices_file_shared_with_bob(stack: Stack) -> tuple[Any, Any, int]:
    """``stack``'s simulator (its deliveries dropped: the indexer is driven by hand), the
    worker's indexer, and alice's ``/Shared/plan.txt``, indexed for her and then shared with
    bob (his grant not yet written): ``(sim, indexer, file_id)``."""
    sim = stack.sim
    sim.drop_rate = 1.0
    indexer = stack.celery.ncindex_indexer  # type: ignore[attr-defined]
    fid = sim.put_file("alice", "/Shared/plan.txt", b"Rebuild the stone bridge in June.")
    assert indexer.index_node("alice", fid).action == "indexed"
    sim.share("alice", "/Shared/plan.txt", "bob")
    return sim, indexer, fid


@pytest.mark.parametrize(
    ("batch", "status", "raised"),
    [(False, 503, NextcloudUnavailable), (True, 401, NextcloudAuthError)],
    ids=["index_node", "index_nodes"],
)
def test_a_failed_grant_roll_back_keeps_the_error_that_caused_it(
    fresh_stack: Stack, batch: bool, status: int, raised: type[Exception]
) -> None:
    """Bob's grant is looked up after its write and that SEARCH fails (503; 401 for the
    batch, which raises only a refusal), and the store fails too while the grant is taken
    back: the look-up's error is raised — the task retries Nextcloud's outage, records bob's
    refusal — with the roll-back's failure attached as a note (before: the roll-back's
    ``StoreUnavailable`` replaced it, and a refused account was retried as a store outage)."""
    stack = fresh_stack
    sim, indexer, fid = alices_file_shared_with_bob(stack)
    real_fetch = indexer.steps.fetch
    real_update = indexer.steps.update_metadata

    def fetch_then_fail(*args: Any, **kwargs: Any) -> Any:
        fetched = real_fetch(*args, **kwargs)
        sim.faults.set("dav-search", status=status)  # the look-up after the write fails
        return fetched

    def update_then_fail(*args: Any, **kwargs: Any) -> Any:
        updated = real_update(*args, **kwargs)  # bob's grant: his acl entry and path
        store_writes_fail(indexer)  # and the roll-back's write fails
        return updated

    indexer.steps.fetch = fetch_then_fail  # type: ignore[method-assign]
    indexer.steps.update_metadata = update_then_fail  # type: ignore[method-assign]
    try:
        with pytest.raises(raised) as caught:
            if batch:
                indexer.index_nodes("bob", [fid])
            else:
                indexer.index_node("bob", fid)
    finally:
        del indexer.steps.fetch, indexer.steps.update_metadata
        store_writes_back(indexer)
        sim.faults.clear()
    assert caught.value.__notes__ == [
        f"taking back the grant of file:{fid} failed too: "
        "StoreUnavailable: store down during the roll-back"
    ]


def alices_card(stack: Stack) -> tuple[Any, Any, int, int]:
    """``stack``'s simulator (its deliveries dropped: the indexer is driven by hand), the
    worker's indexer, and alice's board "Bridge" with one card on it: ``(sim, indexer, board,
    card)``."""
    sim = stack.sim
    sim.drop_rate = 1.0
    indexer = stack.celery.ncindex_indexer  # type: ignore[attr-defined]
    board = sim.deck_create_board("alice", "Bridge")
    card = sim.deck_create_card(
        "alice", sim.deck_create_stack("alice", board, "To do"), "Stone", "Rebuild it in June."
    )
    return sim, indexer, board, card


def a_card_grant_whose_roll_back_failed(
    stack: Stack,
) -> tuple[Any, Any, int, int, NextcloudUnavailable]:
    """Alice's card (:func:`alices_card`) on a board shared with bob, indexed by a run whose
    board GET after the write fails (Deck answers 503) and whose roll-back fails too (the
    store fails while taking bob's grant back): ``(sim, indexer, board, card, error)``, the
    run's ``NextcloudUnavailable``; the faults are cleared again."""
    sim, indexer, board, card = alices_card(stack)
    sim.deck_share_board("alice", board, "bob")
    real_fetch, real_write = indexer.steps.fetch, indexer.steps.write_document

    def fetch_then_fail(*args: Any, **kwargs: Any) -> Any:
        fetched = real_fetch(*args, **kwargs)
        sim.faults.set("deck", status=503)
        return fetched

    def write_then_fail(*args: Any, **kwargs: Any) -> Any:
        written = real_write(*args, **kwargs)
        store_writes_fail(indexer)
        return written

    indexer.steps.fetch = fetch_then_fail  # type: ignore[method-assign]
    indexer.steps.write_document = write_then_fail  # type: ignore[method-assign]
    try:
        with pytest.raises(NextcloudUnavailable) as caught:
            indexer.index_document("alice", "deck_card", card)
    finally:
        del indexer.steps.fetch, indexer.steps.write_document
        store_writes_back(indexer)
        sim.faults.clear()
    return sim, indexer, board, card, caught.value


@pytest.mark.parametrize("reader", ["alice", "bob"], ids=["new_card", "newly_shared"])
def test_a_board_unshared_while_a_card_is_in_flight_is_not_written_back(
    fresh_stack: Stack, reader: str
) -> None:
    """A card's task reads its board's participants (bob among them), then alice unshares the
    board from bob before the task writes. Neither a card new to the index (alice's task) nor
    a card bob's own task indexes for him (newly shared: alice's task indexed it before) may
    keep bob in its ``acl`` (before: he stayed until his Deck scan and its grace: the board
    unshare's ``AclDeletedEvent``, when subscribed at all, re-reads only the cards the index
    held on the board then, and its task for a card held ran after the write). One board GET
    after the write, for a write that grants; none for one that does not."""
    stack = fresh_stack
    sim, indexer, board, card = alices_card(stack)
    key = f"deck_card:{card}"
    if reader == "bob":
        assert indexer.index_document("alice", "deck_card", card).action == "indexed"
    sim.deck_share_board("alice", board, "bob")
    real_fetch = indexer.steps.fetch
    revoked: list[bool] = []

    def fetch_then_revoke(*args: Any, **kwargs: Any) -> Any:
        fetched = real_fetch(*args, **kwargs)
        if not revoked:  # the board was read: bob goes before the write
            revoked.append(sim.deck_unshare_board("alice", board, "bob"))
        return fetched

    indexer.steps.fetch = fetch_then_revoke  # type: ignore[method-assign]
    try:
        outcome = indexer.index_document(reader, "deck_card", card)
    finally:
        indexer.steps.fetch = real_fetch  # type: ignore[method-assign]
    assert revoked == [True]
    assert [p.payload["acl"] for p in stack.points(key)][:1] == [["user:alice"]], outcome
    assert outcome.action == ("indexed" if reader == "alice" else "evicted")
    # the cost: a write that grants (bob added) asks for the board once more — card GET,
    # board GET, board GET; one that grants nobody anything new does not (card, board)
    sim.deck_share_board("alice", board, "bob")
    sim.reset_request_counts()
    assert indexer.index_document("alice", "deck_card", card).action == "updated"
    assert sim.request_count("deck") == 3, sim.request_log
    sim.reset_request_counts()
    assert indexer.index_document("alice", "deck_card", card).action == "unchanged"
    sim.deck_update_card("alice", card, description="Rebuild it in July.")
    assert indexer.index_document("alice", "deck_card", card).action == "indexed"
    assert sim.request_count("deck") == 4, sim.request_log


def test_a_card_whose_board_cannot_be_read_again_keeps_no_access_it_granted(
    fresh_stack: Stack,
) -> None:
    """The board GET after a card's write fails (Deck answers 503): what the write granted
    is taken back — a card new to the index is deleted — and the task fails, so its retry
    grants and asks again (before the re-read, and without taking it back, the retry would find
    the acl held already and not ask)."""
    stack = fresh_stack
    sim, indexer, board, card = alices_card(stack)
    sim.deck_share_board("alice", board, "bob")
    real_fetch = indexer.steps.fetch

    def fetch_then_fail(*args: Any, **kwargs: Any) -> Any:
        fetched = real_fetch(*args, **kwargs)
        sim.faults.set("deck", status=503)
        return fetched

    indexer.steps.fetch = fetch_then_fail  # type: ignore[method-assign]
    try:
        with pytest.raises(NextcloudUnavailable):
            indexer.index_document("alice", "deck_card", card)
    finally:
        indexer.steps.fetch = real_fetch  # type: ignore[method-assign]
        sim.faults.clear()
    assert stack.points(f"deck_card:{card}") == []
    assert indexer.index_document("alice", "deck_card", card).action == "indexed"
    payload = stack.points(f"deck_card:{card}")[0].payload
    assert payload["acl"] == ["user:alice", "user:bob"]


def test_a_card_whose_roll_back_fails_keeps_the_board_error(fresh_stack: Stack) -> None:
    """The board GET after a new card's write fails (Deck answers 503) and so does deleting
    the card again (the store fails): the task raises Deck's ``NextcloudUnavailable`` — kept
    as an outage, sent again once Nextcloud answers — with the store's failure attached as a
    note (before: the store's ``StoreUnavailable`` replaced it)."""
    *_, card, caught = a_card_grant_whose_roll_back_failed(fresh_stack)
    assert caught.__notes__ == [
        f"taking back the grant of deck_card:{card} failed too: "
        "StoreUnavailable: store down during the roll-back"
    ]


def test_a_card_grant_left_unconfirmed_reads_the_board_again_on_the_retry(
    fresh_stack: Stack,
) -> None:
    """A card's board GET after its write fails (503) and so does taking the grant back (the
    store fails): bob stays in the ``acl``, unconfirmed. Alice unshares the board from bob
    between the retry's read and its write. The retry finds bob held already and the board
    the same, yet must read the board again (the grant's mark) and take bob out (before: it
    granted nothing new, never asked, and bob kept the card until the next Deck scan)."""
    stack = fresh_stack
    sim, indexer, board, card, _ = a_card_grant_whose_roll_back_failed(stack)
    real_fetch = indexer.steps.fetch
    key = f"deck_card:{card}"
    assert stack.points(key)[0].payload["acl"] == ["user:alice", "user:bob"]  # unconfirmed

    revoked: list[bool] = []

    def fetch_then_revoke(*args: Any, **kwargs: Any) -> Any:
        fetched = real_fetch(*args, **kwargs)
        if not revoked:  # the retry read the board with bob: he goes before its write
            revoked.append(sim.deck_unshare_board("alice", board, "bob"))
        return fetched

    indexer.steps.fetch = fetch_then_revoke  # type: ignore[method-assign]
    try:
        indexer.index_document("alice", "deck_card", card)
    finally:
        del indexer.steps.fetch
    assert revoked == [True]
    assert stack.points(key)[0].payload["acl"] == ["user:alice"]
    # the mark is cleared once the board was read: the next run grants nothing, asks nothing
    sim.reset_request_counts()
    assert indexer.index_document("alice", "deck_card", card).action == "unchanged"
    assert sim.request_count("deck") == 2, sim.request_log


def revoke_in_bobs_next_run(indexer: Any, sim: Any, fid: int) -> Any:
    """Bob's next run of ``indexer`` for file ``fid`` (``index_node``), alice's share of
    ``/Shared/plan.txt`` revoked between its read and its write; returns its outcome."""
    real_fetch = indexer.steps.fetch
    revoked: list[bool] = []

    def fetch_then_revoke(*args: Any, **kwargs: Any) -> Any:
        fetched = real_fetch(*args, **kwargs)
        if not revoked:
            revoked.append(sim.unshare("alice", "/Shared/plan.txt", "bob"))
        return fetched

    indexer.steps.fetch = fetch_then_revoke
    try:
        return indexer.index_node("bob", fid)
    finally:
        del indexer.steps.fetch
        assert revoked == [True]


class Killed(BaseException):
    """The worker dying: raised past every ``except Exception``, so nothing after it runs."""


@pytest.mark.parametrize(
    ("batch", "after_write"),
    [(False, "roll-back fails"), (True, "roll-back fails"), (False, "killed")],
    ids=["index_node", "index_nodes", "killed-before-look-up"],
)
def test_a_grant_left_unconfirmed_is_looked_up_again_by_the_next_run(
    fresh_stack: Stack, batch: bool, after_write: str
) -> None:
    """Bob's grant (a metadata-only update of a file newly shared with him) stays written
    unconfirmed: its look-up fails (503) and so does taking it back (the store fails) — or
    the worker dies between the write and the look-up. The next run for bob (the retry, the
    file's own task, the redelivery) finds him in the ``acl`` already; alice revokes the
    share between its read and its write. That run must look up after its write as for a new
    grant and take bob's access out (before: it wrote nothing new for him, never looked
    again, and he kept the file until his next scan)."""
    stack = fresh_stack
    sim, indexer, fid = alices_file_shared_with_bob(stack)
    real_fetch = indexer.steps.fetch
    real_update = indexer.steps.update_metadata

    def fetch_then_fail(*args: Any, **kwargs: Any) -> Any:
        fetched = real_fetch(*args, **kwargs)
        sim.faults.set("dav-search", status=503)  # the look-up after the write fails
        return fetched

    def update_then_fail(*args: Any, **kwargs: Any) -> Any:
        updated = real_update(*args, **kwargs)  # bob's grant
        if after_write == "killed":
            raise Killed
        store_writes_fail(indexer)  # and the roll-back's write fails
        return updated

    indexer.steps.fetch = fetch_then_fail  # type: ignore[method-assign]
    indexer.steps.update_metadata = update_then_fail  # type: ignore[method-assign]
    try:
        if batch:
            assert indexer.index_nodes("bob", [fid]).alone == [fid]
        else:
            with pytest.raises(Killed if after_write == "killed" else NextcloudUnavailable):
                indexer.index_node("bob", fid)
    finally:
        del indexer.steps.fetch, indexer.steps.update_metadata
        if after_write != "killed":
            store_writes_back(indexer)
        sim.faults.clear()
    payload = stack.points(f"file:{fid}")[0].payload
    assert payload["acl"] == ["user:alice", "user:bob"]  # the grant stayed, unconfirmed

    outcome = revoke_in_bobs_next_run(indexer, sim, fid)
    assert outcome.action == "evicted"
    payload = stack.points(f"file:{fid}")[0].payload
    assert payload["acl"] == ["user:alice"]
    assert payload["paths"] == {"alice": "/Shared/plan.txt"}
    names = indexer.settings.names
    assert indexer.services.redis.exists(names.unconfirmed_grants("bob")) == 0
