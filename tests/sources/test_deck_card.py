"""Deck cards read as a user against the simulator: a card of a deleted stack is gone, although
Deck's card GET still answers it (nextcloud/deck ``StackService::delete`` only marks the stack;
``PermissionService::checkPermission`` does not look at it), both when it is indexed and when a
search verifies it."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest
import redis

from ncindex.errors import NotFound
from ncindex.names import Names
from ncindex.nextcloud.client import NextcloudClient
from ncindex.search.verify import VerificationCounts, VerifyOnRead
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.sources.base import Checked, Verdict
from ncindex.sources.deck_card import SOURCE, fetch_card, stack_is_live


@pytest.fixture
def alice() -> Iterator[tuple[NextcloudSimulator, NextcloudClient]]:
    sim = NextcloudSimulator(seed=1)
    sim.add_user("alice", "alice-pw", "Alice Adams")
    with serve_simulator(sim) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        yield sim, NextcloudClient.for_account(http, "alice", "alice-pw")
    sim.close()


@pytest.fixture
def cache(redis_url: str) -> tuple[redis.Redis, Names]:
    """A Redis client and a namespace of its own for the stack → board cache."""
    return redis.Redis.from_url(redis_url), Names(f"t{uuid.uuid4().hex[:8]}")


def test_a_card_of_a_deleted_stack_is_gone(
    alice: tuple[NextcloudSimulator, NextcloudClient], cache: tuple[redis.Redis, Names]
) -> None:
    sim, client = alice
    board = sim.deck_create_board("alice", "Roadmap")
    done = sim.deck_create_stack("alice", board, "Done")
    card = sim.deck_create_card("alice", done, "Shipped", "v2 is out")
    doc, acl = fetch_card(client, *cache, card, None)
    assert doc.title == "Shipped" and doc.extra == {"board_id": str(board), "stack_id": str(done)}
    assert acl == {"user:alice"}

    sim.deck_delete_stack("alice", done)
    with pytest.raises(NotFound, match="stack"):
        fetch_card(client, *cache, card, None)


def test_a_card_whose_stack_moved_to_another_board_is_read_on_that_board(
    alice: tuple[NextcloudSimulator, NextcloudClient], cache: tuple[redis.Redis, Names]
) -> None:
    """Deck's stack PUT can move a stack to another board (nextcloud/deck
    ``StackService::update``: ``setBoardId``); the cached stack → board said the old board,
    which no longer lists the stack, and the card was taken for one of a deleted stack."""
    sim, client = alice
    roadmap, archive = (sim.deck_create_board("alice", t) for t in ("Roadmap", "Archive"))
    done = sim.deck_create_stack("alice", roadmap, "Done")
    card = sim.deck_create_card("alice", done, "Shipped", "v2 is out")
    doc, _ = fetch_card(client, *cache, card, None)
    assert doc.extra == {"board_id": str(roadmap), "stack_id": str(done)}

    sim.deck_move_stack("alice", done, archive)
    doc, _ = fetch_card(client, *cache, card, doc.extra)
    assert doc.extra == {"board_id": str(archive), "stack_id": str(done)}
    sim.deck_delete_stack("alice", done)  # deleted on the board it moved to: gone
    with pytest.raises(NotFound, match="stack"):
        fetch_card(client, *cache, card, doc.extra)


def verified_after(
    sim: NextcloudSimulator,
    cache: tuple[redis.Redis, Names],
    cards: list[int],
    change: Callable[[], None],
    transport: httpx.BaseTransport | None = None,
) -> tuple[list[Checked], VerificationCounts, list[str]]:
    """``cards`` indexed as alice (their payloads as the index holds them), then ``change``
    made, then verified in one page as a search verifies them: the checks, their counts and
    the paths of the requests the verification made (through ``transport``, default
    httpx's own). Closes ``sim``."""
    seen: list[str] = []
    with (
        serve_simulator(sim) as srv,
        httpx.Client(
            base_url=srv.url,
            timeout=10,
            event_hooks={"request": [lambda r: seen.append(r.url.path)]},
            transport=transport,
        ) as http,
    ):
        client = NextcloudClient.for_account(http, "alice", "alice-pw")
        payloads = []
        for card in cards:
            doc, _ = fetch_card(client, *cache, card, None)
            key = {"doc_type": "deck_card", "doc_id": str(card), "doc_key": f"deck_card:{card}"}
            payloads.append(key | {"etag": doc.etag} | doc.extra)
        change()
        seen.clear()
        verifier, counts = VerifyOnRead(4), VerificationCounts()
        checked = verifier.check(client, payloads, counts)
        verifier.close()
    sim.close()
    return checked, counts, seen


class _FailingPath(httpx.HTTPTransport):
    """A transport answering 503 to every request for ``path`` (Nextcloud failing it)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == self.path:
            return httpx.Response(503, text="Service Unavailable")
        return super().handle_request(request)


class _Together(httpx.HTTPTransport):
    """A transport that sends the requests for ``paths`` on only once one of each is under
    way at the same time (a barrier); when they do not all come within 10 s, each is
    answered 503 instead."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__()
        self.paths = set(paths)
        self.barrier = threading.Barrier(len(paths), timeout=10)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path in self.paths:
            try:
                self.barrier.wait()
            except threading.BrokenBarrierError:
                return httpx.Response(503, text="Service Unavailable")
        return super().handle_request(request)


def roadmap() -> tuple[NextcloudSimulator, int, int, list[int]]:
    """alice's board "Roadmap": card "Test" in stack "To do", "Ship" and "Announce" in "Done".
    The simulator, the board's id, the "Done" stack's and the cards'."""
    sim = NextcloudSimulator(seed=1)
    sim.add_user("alice", "alice-pw", "Alice Adams")
    board = sim.deck_create_board("alice", "Roadmap")
    todo, done = (sim.deck_create_stack("alice", board, t) for t in ("To do", "Done"))
    cards = [
        sim.deck_create_card("alice", todo, "Test", "the release"),
        sim.deck_create_card("alice", done, "Ship", "v2"),
        sim.deck_create_card("alice", done, "Announce", "v2 is out"),
    ]
    return sim, board, done, cards


def test_a_search_drops_the_cards_of_a_stack_deleted_since_with_one_board_get(
    cache: tuple[redis.Redis, Names],
) -> None:
    sim, board, done, cards = roadmap()
    checked, counts, seen = verified_after(
        sim, cache, cards, lambda: sim.deck_delete_stack("alice", done)
    )
    # the card GETs still answer the cards of the deleted stack (unchanged: 304)
    assert [(c.verdict, c.reason) for c in checked] == [
        (Verdict.KEPT, None),
        (Verdict.INELIGIBLE, "stack_deleted"),
        (Verdict.INELIGIBLE, "stack_deleted"),
    ]
    assert counts.ineligible == 2 and counts.kept == 1
    assert seen.count(f"/index.php/apps/deck/api/v1.0/boards/{board}") == 1 and len(seen) == 4


def test_a_card_moved_since_it_was_indexed_is_judged_in_the_stack_it_is_in_now(
    cache: tuple[redis.Redis, Names],
) -> None:
    # the card GET reads only the card id and answers its stackId now (nextcloud/deck
    # CardApiController::get → CardService::find); a move sets lastModified, so the
    # conditional GET answers the card whole, in its new stack
    now = [1_800_000_000.0]
    sim = NextcloudSimulator(seed=1, clock=lambda: now[0])
    sim.add_user("alice", "alice-pw", "Alice Adams")
    board, other = sim.deck_create_board("alice", "Roadmap"), sim.deck_create_board("alice", "Ops")
    stacks = ("To do", "Done", "Later")
    todo, done, later = (sim.deck_create_stack("alice", board, t) for t in stacks)
    elsewhere = sim.deck_create_stack("alice", other, "Inbox")
    titles = ("Paint", "Order", "Sweep", "Ship")
    cards = [sim.deck_create_card("alice", todo, t) for t in titles[:3]]
    cards.append(sim.deck_create_card("alice", done, titles[3]))

    def move() -> None:
        now[0] += 60
        sim.deck_update_card("alice", cards[0], stack_id=done)  # on the same board
        sim.deck_update_card("alice", cards[1], stack_id=elsewhere)  # to another board
        sim.deck_update_card("alice", cards[2], stack_id=later)
        sim.deck_delete_stack("alice", later)  # the stack it was moved to, deleted since
        sim.deck_delete_stack("alice", todo)  # the stack they were indexed in

    checked, _, seen = verified_after(sim, cache, cards, move)

    def at(stack: int, on: int) -> dict[str, str]:
        return {"stack_id": str(stack), "board_id": str(on)}

    assert [(c.verdict, c.reason, c.moved_to) for c in checked] == [
        (Verdict.KEPT, None, at(done, board)),
        (Verdict.KEPT, None, at(elsewhere, other)),
        (Verdict.INELIGIBLE, "stack_deleted", at(later, board)),
        (Verdict.KEPT, None, None),  # unchanged (304), its stack live on its board
    ]
    stack_gets = [p for p in seen if "/stacks/" in p and "/cards/" not in p]
    assert sorted(stack_gets) == sorted(
        f"/index.php/apps/deck/api/v1.0/boards/0/stacks/{s}" for s in (done, elsewhere, later)
    )
    assert seen.count(f"/index.php/apps/deck/api/v1.0/boards/{board}") == 1
    assert seen.count(f"/index.php/apps/deck/api/v1.0/boards/{other}") == 1
    # card GETs, the moved cards' stacks, the page's board, the board one card moved to
    assert len(seen) == 4 + 3 + 1 + 1
    # a moved card's stack title is its check's stack GET's; moved within its board, its
    # board's title is that board's GET's, made for the page anyway; moved to another board,
    # that board's GET's (the stack GET names only its boardId)
    assert [(c.board_title, c.stack_title) for c in checked] == [
        ("Roadmap", "Done"),
        ("Ops", "Inbox"),
        (None, None),
        ("Roadmap", "Done"),
    ]


def test_cards_moved_to_other_boards_name_them_with_one_board_get_each(
    cache: tuple[redis.Redis, Names],
) -> None:
    """A card moved to another board showed no board title in results, only its stack's: the
    page's board GETs are those of the boards the cards were indexed on. Each board the page's
    cards moved to, and no card of the page was indexed on, is asked once, however many cards
    moved there; one another card of the page is indexed on is not asked twice."""
    now = [1_800_000_000.0]
    sim = NextcloudSimulator(seed=1, clock=lambda: now[0])
    sim.add_user("alice", "alice-pw", "Alice Adams")
    roadmap_, ops, home = (sim.deck_create_board("alice", t) for t in ("Roadmap", "Ops", "Home"))
    todo = sim.deck_create_stack("alice", roadmap_, "To do")
    inbox, chores = (
        sim.deck_create_stack("alice", ops, "Inbox"),
        sim.deck_create_stack("alice", home, "Chores"),
    )
    cards = [sim.deck_create_card("alice", todo, t) for t in ("Paint", "Order", "Sweep")]
    cards.append(sim.deck_create_card("alice", inbox, "Triage"))  # indexed on Ops

    def move() -> None:
        now[0] += 60
        sim.deck_update_card("alice", cards[0], stack_id=chores)  # two cards to Home
        sim.deck_update_card("alice", cards[1], stack_id=chores)
        sim.deck_update_card("alice", cards[2], stack_id=inbox)  # one to Ops, read anyway

    checked, _, seen = verified_after(sim, cache, cards, move)
    assert [(c.verdict, c.board_title, c.stack_title) for c in checked] == [
        (Verdict.KEPT, "Home", "Chores"),
        (Verdict.KEPT, "Home", "Chores"),
        (Verdict.KEPT, "Ops", "Inbox"),
        (Verdict.KEPT, "Ops", "Inbox"),
    ]
    for board in (roadmap_, ops, home):
        assert seen.count(f"/index.php/apps/deck/api/v1.0/boards/{board}") == 1
    assert len(seen) == 4 + 3 + 3  # card GETs, the moved cards' stacks, one GET per board


def test_the_board_gets_of_cards_moved_to_other_boards_are_made_at_once(
    cache: tuple[redis.Redis, Names],
) -> None:
    """The GET of each board the page's cards moved to (for its title) was sent when the
    settling came to its card and waited for there, one after another: a page of cards moved
    to n boards took n round trips more. They are all sent first, and run at once in the
    verifier pool: here the board GETs are answered only once both are under way together (a
    barrier; failing after 10 s, the cards would have no board titles)."""
    now = [1_800_000_000.0]
    sim = NextcloudSimulator(seed=1, clock=lambda: now[0])
    sim.add_user("alice", "alice-pw", "Alice Adams")
    old = sim.deck_create_board("alice", "Old")
    todo = sim.deck_create_stack("alice", old, "To do")
    boards = [sim.deck_create_board("alice", t) for t in ("Ops", "Home")]
    stacks = [sim.deck_create_stack("alice", b, "Inbox") for b in boards]
    cards = [sim.deck_create_card("alice", todo, t) for t in ("Paint", "Sweep")]

    def move() -> None:
        now[0] += 60
        for card, stack in zip(cards, stacks, strict=True):
            sim.deck_update_card("alice", card, stack_id=stack)

    board_gets = [f"/index.php/apps/deck/api/v1.0/boards/{b}" for b in boards]
    checked, _, _ = verified_after(sim, cache, cards, move, _Together(board_gets))
    assert [(c.verdict, c.board_title) for c in checked] == [
        (Verdict.KEPT, "Ops"),
        (Verdict.KEPT, "Home"),
    ]


@pytest.mark.parametrize("case", ["old board deleted", "new board's GET fails"])
def test_a_card_moved_to_another_board_is_judged_by_its_own_check(
    cache: tuple[redis.Redis, Names], case: str
) -> None:
    """A card moved to another board is judged by its own check (card GET, then the GET of the
    stack it is in now); the board GETs say nothing of whether it is kept.

    - The board it left, deleted since, does not drop it: its indexed board's GET is not read
      for it (the board it is on now is, for its title).
    - The GET of the board it moved to, asked for that board's title alone, failing (a 5xx)
      made it an ``ERROR`` (unconfirmed; its text withheld under ``hide_text``): it stays
      ``KEPT`` with its stack's title and no board title. (A 403 there still drops it: Deck's
      card GET checks the same board permission, nextcloud/deck
      ``lib/Service/PermissionService.php`` ``checkPermission``.)"""
    now = [1_800_000_000.0]
    sim = NextcloudSimulator(seed=1, clock=lambda: now[0])
    sim.add_user("alice", "alice-pw", "Alice Adams")
    old, new = sim.deck_create_board("alice", "Old"), sim.deck_create_board("alice", "New")
    todo, inbox = (
        sim.deck_create_stack("alice", old, "To do"),
        sim.deck_create_stack("alice", new, "Inbox"),
    )
    card = sim.deck_create_card("alice", todo, "Paint")
    fails = case == "new board's GET fails"

    def move() -> None:
        now[0] += 60
        sim.deck_update_card("alice", card, stack_id=inbox)
        if not fails:
            sim.deck_delete_board("alice", old)

    board_get = f"/index.php/apps/deck/api/v1.0/boards/{new}"
    checked, counts, seen = verified_after(
        sim, cache, [card], move, _FailingPath(board_get) if fails else None
    )
    assert board_get in seen
    assert [(c.verdict, c.board_title, c.stack_title) for c in checked] == [
        (Verdict.KEPT, None if fails else "New", "Inbox")
    ]
    assert counts.errors == 0


def test_a_search_names_each_cards_board_and_stack_as_they_are_now(
    cache: tuple[redis.Redis, Names],
) -> None:
    """A card result did not say which board it is on. Its check's board GET (one per board of
    the page, made anyway) gives the board's and the stack's titles as they are now: a board or
    stack renamed after the card was indexed changes no card (no ETag, no card event; Deck's
    ``BoardService::update`` dispatches ``BoardUpdatedEvent``, which ncindex does not
    subscribe), so titles stored with the card would stay the old ones. The rename is made in
    the simulator's state: what reaches ncindex of it is only the board GET's answer."""
    sim, board, done, cards = roadmap()

    def rename() -> None:
        with sim.lock:
            sim.deck.boards[board].title = "Roadmap 2027"
            sim.deck.stacks[done].title = "Shipped"

    checked, _, seen = verified_after(sim, cache, cards, rename)
    assert [(c.verdict, c.board_title, c.stack_title) for c in checked] == [
        (Verdict.KEPT, "Roadmap 2027", "To do"),
        (Verdict.KEPT, "Roadmap 2027", "Shipped"),
        (Verdict.KEPT, "Roadmap 2027", "Shipped"),
    ]
    assert len(seen) == 3 + 1  # the card GETs and the page's board GET: no request more


def test_a_board_without_a_stacks_list_says_nothing() -> None:
    assert stack_is_live({"id": 3}, 5)
    assert stack_is_live({"stacks": [{"id": 5}]}, 5)
    assert not stack_is_live({"stacks": []}, 5)
    assert not stack_is_live({"stacks": [{"id": 6}]}, 5)


def test_the_members_of_a_group_the_board_is_shared_with_see_its_cards(
    alice: tuple[NextcloudSimulator, NextcloudClient], cache: tuple[redis.Redis, Names]
) -> None:
    sim, client = alice
    for user in ("bob", "carol", "dave"):
        sim.add_user(user, f"{user}-pw")
    sim.deck_set_group("crew", {"bob", "carol"})
    board = sim.deck_create_board("alice", "Harbour")
    todo = sim.deck_create_stack("alice", board, "To do")
    card = sim.deck_create_card("alice", todo, "Dredge", "the channel")
    sim.deck_share_board("alice", board, "crew", group=True)
    sim.deck_share_board("alice", board, "dave")
    _, acl = fetch_card(client, *cache, card, None)
    # the group's own entry (type 1, its gid as uid) names no user
    assert acl == {"user:alice", "user:bob", "user:carol", "user:dave"}


def test_a_card_archived_since_it_was_indexed_is_not_kept_on_read(
    cache: tuple[redis.Redis, Names],
) -> None:
    # archiving sets lastModified (CardService::archive → CardMapper::update), so the
    # conditional GET answers the card whole, archived
    now = [1_800_000_000.0]
    sim = NextcloudSimulator(seed=1, clock=lambda: now[0])
    sim.add_user("alice", "alice-pw", "Alice Adams")
    board = sim.deck_create_board("alice", "Roadmap")
    todo = sim.deck_create_stack("alice", board, "To do")
    card = sim.deck_create_card("alice", todo, "Paint", "The fence, white")
    with serve_simulator(sim) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        client = NextcloudClient.for_account(http, "alice", "alice-pw")
        doc, _ = fetch_card(client, *cache, card, None)
        payload = {"doc_id": str(card), "etag": doc.etag} | doc.extra
        assert SOURCE.verify(client, payload).verdict is Verdict.KEPT  # unchanged: 304
        now[0] += 60
        sim.deck_archive_card("alice", card)
        checked = SOURCE.verify(client, payload)
    sim.close()
    assert (checked.verdict, checked.reason) == (Verdict.INELIGIBLE, "archived")
