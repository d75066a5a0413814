"""A seeded, randomised run over the simulator that checks the index converges on Nextcloud's
truth (issue 17): ``make bench-convergence`` runs it long, ``tests/sync/test_convergence.py``
runs a short one in ``make test``.

Several users create, edit, rename, move, delete and restore files and folders, copy folders,
tag and untag the gate and the excluded tag, share, unshare and re-share folders, move notes
between categories, and change Deck cards and News items, while 30 % of the webhook deliveries
are dropped and the rest are delayed and reordered. Every few operations each user searches;
every result is checked against the simulator at that moment (``ineligible_served``: a result
the caller may not see, or that the index rules exclude). After the run the deliveries are
flushed, the queues drained, one reconcile pass runs and the queues are drained again; then
every document's presence, ``acl``, ``paths`` and ``tags`` are compared with the simulator
(``mismatches_after_reconcile``).

The truth is computed here, independently of ncindex: a file or note is indexed for a user
when the user sees it, it is Markdown or text (a note: below ``/Notes``), it carries the gate
tag and not the excluded tag; a Deck card when the user owns or shares its board and it is
not archived; a News item when it belongs to the user's feed and is not purged.
"""

from __future__ import annotations

import posixpath
import random
import time
from dataclasses import dataclass, field
from typing import Any

from qdrant_client import models

from ncindex.simulator.state import StateError
from support import Stack

USERS = ("alice", "bob", "carol")
GATE, EXCLUDED = "searchable", "secret"
WORDS = ("harbour", "beacon", "anchor", "reef", "tide", "mast", "keel", "buoy")
QUERY = "lantern"


def configure(stack: Stack, seed: int) -> None:
    """The rules and the faults of a run: the tag gate and excluded tag, no grace period, the
    removal guards off (a randomised run removes most of a user's documents at times, which
    the guards would hold for a second scan), 30 % of deliveries dropped, the rest delayed up
    to 0.5 s and reordered."""
    settings = stack.settings
    settings.index_required_tags = [GATE]
    settings.index_excluded_tags = [EXCLUDED]
    settings.reconcile_grace_seconds = 0
    settings.reconcile_max_removal_share = 1.0
    settings.reconcile_guard_min_docs = 1_000_000
    stack.sim.drop_rate = 0.3
    stack.sim.engine.delay = (0.0, 0.5)
    stack.sim.engine.reorder = True
    stack.sim.engine._rng.seed(seed)  # the simulator's own seeded drop/delay draws


@dataclass
class World:
    """What the driver did, for the truth of Deck and News (files come from the simulator)."""

    tags: dict[str, int] = field(default_factory=dict)
    boards: dict[int, dict[str, Any]] = field(default_factory=dict)
    cards: dict[int, dict[str, Any]] = field(default_factory=dict)
    feeds: dict[str, int] = field(default_factory=dict)
    items: dict[int, str] = field(default_factory=dict)
    shares: set[tuple[str, str, str]] = field(default_factory=set)
    counter: int = 0


@dataclass
class Outcome:
    """The figures of a run (the keys of ``convergence.json``)."""

    operations: int = 0
    deliveries_dropped: int = 0
    searches: int = 0
    ineligible_served: int = 0
    mismatches_after_reconcile: int = 0
    seconds_to_converge: float = 0.0
    served: list[dict[str, Any]] = field(default_factory=list)
    mismatches: dict[str, Any] = field(default_factory=dict)
    by_kind: dict[str, int] = field(default_factory=dict)


# --- the truth --------------------------------------------------------------------------


def file_truth(stack: Stack, user: str, file_id: int) -> tuple[str, str, list[str]] | None:
    """``(doc_type, path, tags)`` when ``user`` should find file ``file_id`` indexed now."""
    sim = stack.sim
    path = sim.path_of(user, file_id)
    if path is None:
        return None
    node = sim.node(user, path)
    if node is None or node.is_dir:
        return None
    ext = posixpath.splitext(path)[1].lower()
    if ext not in (".md", ".txt"):
        return None
    tags = sim.tags_of(user, path)
    folded = {t.casefold() for t in tags}
    if GATE not in folded or EXCLUDED in folded:
        return None
    return ("note" if path.startswith("/Notes/") else "file"), path, sorted(tags)


def truth(stack: Stack, world: World) -> dict[str, dict[str, Any]]:
    """``doc_key`` → ``{"acl", "paths", "tags"}`` of everything that should be indexed."""
    out: dict[str, dict[str, Any]] = {}
    for user in USERS:
        for file_id in stack.sim.visible_files(user):
            found = file_truth(stack, user, file_id)
            if found is None:
                continue
            doc_type, path, tags = found
            doc = out.setdefault(f"{doc_type}:{file_id}", {"acl": set(), "paths": {}, "tags": tags})
            doc["acl"].add(f"user:{user}")
            doc["paths"][user] = path
    for card_id, card in world.cards.items():
        if card["archived"]:
            continue
        board = world.boards[card["board"]]
        acl = {f"user:{u}" for u in {board["owner"], *board["members"]}}
        out[f"deck_card:{card_id}"] = {"acl": acl, "paths": {}, "tags": []}
    for item_id, user in world.items.items():
        out[f"news_item:{item_id}"] = {"acl": {f"user:{user}"}, "paths": {}, "tags": []}
    return out


def index_state(stack: Stack) -> dict[str, dict[str, Any]]:
    """The same shape read from the store (first chunk of every document)."""
    flt = models.Filter(
        must=[models.FieldCondition(key="chunk_index", match=models.MatchValue(value=0))]
    )
    out: dict[str, dict[str, Any]] = {}
    fields = ["doc_key", "acl", "paths", "tags"]
    for payload in stack.services.store.scroll(flt, fields):
        out[payload["doc_key"]] = {
            "acl": set(payload["acl"]),
            "paths": dict(payload.get("paths") or {}),
            "tags": sorted(payload.get("tags") or []),
        }
    return out


def served_wrongly(stack: Stack, world: World, user: str, result: dict[str, Any]) -> bool:
    """Whether a search result is one ``user`` may not see, or that the rules exclude, now."""
    doc_type, doc_id = result["doc_type"], int(result["doc_id"])
    if doc_type in ("file", "note"):
        found = file_truth(stack, user, doc_id)
        return found is None or found[0] != doc_type
    if doc_type == "deck_card":
        card = world.cards.get(doc_id)
        if card is None or card["archived"]:
            return True
        board = world.boards[card["board"]]
        return user not in {board["owner"], *board["members"]}
    return world.items.get(doc_id) != user


# --- the operations -----------------------------------------------------------------------


def _text(world: World, rng: random.Random) -> bytes:
    world.counter += 1
    words = " ".join(rng.choice(WORDS) for _ in range(6))
    return f"# Doc {world.counter}\n\n{QUERY} {words} {world.counter}\n".encode()


def _own_nodes(stack: Stack, user: str, *, folders: bool) -> list[str]:
    """Paths of ``user``'s own files (or folders, not the notes folder), outside shares."""
    out = []
    sim = stack.sim
    with sim.lock:
        for path, node in sim.tree.walk_view(user, "/"):
            if node.is_home or node.owner != user or node.is_dir != folders:
                continue
            if folders and path in ("/Notes",):
                continue
            out.append(path)
    return sorted(out)


def step(stack: Stack, world: World, rng: random.Random) -> str:
    """One random operation; returns its kind (``noop`` when it had nothing to act on)."""
    sim = stack.sim
    user = rng.choice(USERS)
    kind = rng.choices(
        [
            "create",
            "edit",
            "move_file",
            "move_folder",
            "delete",
            "restore",
            "copy_folder",
            "tag",
            "untag",
            "exclude",
            "unexclude",
            "share",
            "unshare",
            "note_create",
            "note_move",
            "deck",
            "news",
        ],
        weights=[14, 10, 5, 3, 5, 3, 2, 5, 4, 3, 3, 4, 3, 6, 4, 5, 4],
    )[0]
    files = _own_nodes(stack, user, folders=False)
    folders = _own_nodes(stack, user, folders=True)
    try:
        if kind == "create":
            folder = rng.choice(
                [f"/P{rng.randrange(4)}", f"/P{rng.randrange(4)}/S{rng.randrange(2)}"]
            )
            ext = rng.choice([".md", ".md", ".txt", ".bin"])
            path = f"{folder}/f{world.counter}{ext}"
            sim.put_file(user, path, _text(world, rng))
            if rng.random() < 0.85:
                sim.assign_tag(user, path, world.tags[GATE])
        elif kind == "note_create":
            path = f"/Notes/C{rng.randrange(3)}/n{world.counter}.md"
            sim.put_file(user, path, _text(world, rng))
            sim.assign_tag(user, path, world.tags[GATE])
        elif not files and kind in (
            "edit",
            "move_file",
            "delete",
            "tag",
            "untag",
            "exclude",
            "unexclude",
            "note_move",
        ):
            return "noop"
        elif kind == "edit":
            sim.put_file(user, rng.choice(files), _text(world, rng))
        elif kind == "move_file":
            src = rng.choice([f for f in files if not f.startswith("/Notes/")] or files)
            dst = f"/P{rng.randrange(4)}/m{world.counter}{posixpath.splitext(src)[1]}"
            world.counter += 1
            if sim.path_of(user, sim.file_id(user, src) or 0) and not sim.node(user, dst):
                sim.move(user, src, dst)
        elif kind == "note_move":
            notes = [f for f in files if f.startswith("/Notes/")]
            if not notes:
                return "noop"
            src = rng.choice(notes)
            dst = f"/Notes/C{rng.randrange(3)}/{posixpath.basename(src)}"
            if dst == src or sim.node(user, dst):
                return "noop"
            sim.move(user, src, dst)
        elif kind == "delete":
            target = rng.choice(files + folders[:2]) if folders else rng.choice(files)
            sim.delete(user, target)
        elif kind == "tag":
            sim.assign_tag(user, rng.choice(files), world.tags[GATE])
        elif kind == "untag":
            sim.unassign_tag(user, rng.choice(files), world.tags[GATE])
        elif kind == "exclude":
            sim.assign_tag(user, rng.choice(files), world.tags[EXCLUDED])
        elif kind == "unexclude":
            sim.unassign_tag(user, rng.choice(files), world.tags[EXCLUDED])
        elif kind == "restore":
            trash = sim.trash(user)
            if not trash:
                return "noop"
            sim.restore(user, rng.choice(trash)["id"])
        elif kind in ("move_folder", "copy_folder", "share", "unshare"):
            tops = [f for f in folders if f.count("/") == 1]
            if not tops:
                return "noop"
            folder = rng.choice(tops)
            if kind == "move_folder":
                dst = f"/P{rng.randrange(6)}"
                if sim.node(user, dst):
                    dst = f"{dst}/Moved{world.counter}"
                    world.counter += 1
                sim.move(user, folder, dst)
            elif kind == "copy_folder":
                dst = f"/Copy{world.counter}"
                world.counter += 1
                sim.copy(user, folder, dst)
            elif kind == "share":
                other = rng.choice([u for u in USERS if u != user])
                sim.share(user, folder, other, f"/From {user}{folder}")
                world.shares.add((user, folder, other))
            else:
                mine = [s for s in world.shares if s[0] == user]
                if not mine:
                    return "noop"
                owner, path, other = rng.choice(sorted(mine))
                world.shares.discard((owner, path, other))
                if sim.node(owner, path):
                    sim.unshare(owner, path, other)
        elif kind == "deck":
            deck_step(stack, world, rng, user)
        elif kind == "news":
            news_step(stack, world, rng, user)
    except StateError:  # the simulator refused (a name clash, a move into itself)
        return "refused"
    return kind


def deck_step(stack: Stack, world: World, rng: random.Random, user: str) -> None:
    """Create a board (first time), a card, an edit, an archive, or a share change."""
    sim = stack.sim
    own = [b for b, board in world.boards.items() if board["owner"] == user]
    if not own:
        board_id = sim.deck_create_board(user, f"{user} board")
        world.boards[board_id] = {
            "owner": user,
            "members": set(),
            "stack": sim.deck_create_stack(user, board_id, "To do"),
        }
        return
    board_id = rng.choice(own)
    board = world.boards[board_id]
    cards = [c for c, card in world.cards.items() if card["board"] == board_id]
    action = rng.choice(["card", "card", "edit", "archive", "share", "unshare"])
    if action == "card" or not cards:
        card_id = sim.deck_create_card(
            user, board["stack"], f"Card {world.counter}", _text(world, rng).decode()
        )
        world.cards[card_id] = {"board": board_id, "archived": False}
    elif action == "edit":
        sim.deck_update_card(user, rng.choice(cards), description=_text(world, rng).decode())
    elif action == "archive":
        card_id = rng.choice(cards)
        archived = not world.cards[card_id]["archived"]
        sim.deck_archive_card(user, card_id, archived)
        world.cards[card_id]["archived"] = archived
    elif action == "share":
        other = rng.choice([u for u in USERS if u != user])
        sim.deck_share_board(user, board_id, other)
        board["members"].add(other)
    else:
        if board["members"]:
            other = rng.choice(sorted(board["members"]))
            sim.deck_unshare_board(user, board_id, other)
            board["members"].discard(other)


def news_step(stack: Stack, world: World, rng: random.Random, user: str) -> None:
    """Add an item to the user's feed (subscribing first), or purge one."""
    sim = stack.sim
    if user not in world.feeds:
        world.feeds[user] = sim.news_add_feed(user, f"https://{user}.example.test/feed", user)
    mine = [i for i, owner in world.items.items() if owner == user]
    if mine and rng.random() < 0.3:
        item = rng.choice(mine)
        sim.news_purge_item(user, item)
        del world.items[item]
        return
    item = sim.news_add_item(
        user, world.feeds[user], f"News {world.counter}", f"<p>{_text(world, rng).decode()}</p>"
    )
    world.items[item] = user


# --- the run ------------------------------------------------------------------------------


def run(stack: Stack, *, seed: int, operations: int, search_every: int = 10) -> Outcome:
    """The run (module docstring); returns its :class:`Outcome`."""
    rng = random.Random(seed)
    configure(stack, seed)
    world = World(tags={GATE: stack.sim.create_tag(GATE), EXCLUDED: stack.sim.create_tag(EXCLUDED)})
    outcome = Outcome()
    for user in USERS:  # something to start from, and scan state to compare with later
        for i in range(3):
            path = f"/P{i}/start{i}.md"
            stack.sim.put_file(user, path, _text(world, rng))
            stack.sim.assign_tag(user, path, world.tags[GATE])
    stack.settle(600)
    stack.reconcile(USERS)
    done = 0
    while done < operations:
        kind = step(stack, world, rng)
        if kind in ("noop", "refused"):
            outcome.by_kind[kind] = outcome.by_kind.get(kind, 0) + 1
            continue
        done += 1
        outcome.by_kind[kind] = outcome.by_kind.get(kind, 0) + 1
        if done % search_every == 0:
            for user in USERS:
                body = stack.search_as(user, QUERY, limit=20)
                outcome.searches += 1
                for result in body["results"]:
                    if served_wrongly(stack, world, user, result):
                        outcome.ineligible_served += 1
                        outcome.served.append({"user": user, "after": done, **result})
    outcome.operations = done
    started = time.monotonic()
    stack.settle(600)
    stack.reconcile(USERS)
    outcome.seconds_to_converge = round(time.monotonic() - started, 2)
    outcome.deliveries_dropped = len(stack.sim.engine.dropped)
    expected, actual = truth(stack, world), index_state(stack)
    for key in sorted(expected.keys() | actual.keys()):
        if expected.get(key) != actual.get(key):
            outcome.mismatches[key] = {"expected": expected.get(key), "indexed": actual.get(key)}
    outcome.mismatches_after_reconcile = len(outcome.mismatches)
    outcome.by_kind["expected_documents"] = len(expected)
    return outcome
