"""Reconciliation on real parts: the simulator loses 30 % of its webhook deliveries and delays
and reorders the rest while 300 documents across three users are created, edited, moved
(single files, notes between categories, whole folders, a note out of the notes folder),
copied, deleted (files and a folder), shared and unshared. After one reconcile pass the index
equals the ground truth exactly — ``doc_key`` with ``acl``, per-user paths and etag — and
flushing Redis in the middle of more changes changes nothing after one more pass."""

from __future__ import annotations

import random

from reconcile_support import differences, ground_truth, index_state

from support import Stack

USERS = ["alice", "bob", "carol"]
WORDS = [
    "harbour",
    "lantern",
    "compass",
    "anchor",
    "tide",
    "reef",
    "gull",
    "mast",
    "keel",
    "rope",
    "chart",
    "storm",
    "beacon",
    "island",
    "current",
    "sail",
    "drift",
    "buoy",
    "pier",
    "wave",
    "shell",
    "coral",
    "dune",
    "cliff",
]


def text(rng: random.Random, label: str) -> str:
    """A short one-chunk document."""
    return f"# {label}\n\n" + " ".join(rng.choice(WORDS) for _ in range(12)) + "\n"


def note(user: str, i: int) -> str:
    return f"/Notes/Cat{i % 5}/{user}-n{i}.md"


def file(user: str, i: int) -> str:
    sub = "Sub/" if i % 10 >= 7 else ""
    return f"/Docs/F{i % 5}/{sub}{user}-f{i}.md"


def create_corpus(stack: Stack, rng: random.Random) -> None:
    """50 notes and 50 files per user: 300 documents."""
    for user in USERS:
        for i in range(50):
            stack.sim.put_file(user, note(user, i), text(rng, f"{user} note {i}"))
            stack.sim.put_file(user, file(user, i), text(rng, f"{user} file {i}"))


def churn(stack: Stack, rng: random.Random) -> None:
    """Edits, moves, copies, deletes and shares, while deliveries are in flight."""
    sim = stack.sim
    for user in USERS:
        for i in (5, 10, 15, 20, 25):  # edits: notes of Cat0 and files of F0
            sim.put_file(user, note(user, i), text(rng, f"{user} note {i} edited"))
            sim.put_file(user, file(user, i), text(rng, f"{user} file {i} edited"))
        for i in (30, 35, 40):  # single file moves (F0 → Moved)
            sim.move(user, file(user, i), f"/Docs/Moved/{user}-f{i}.md")
        for i in (45, 0):  # notes to another category
            sim.move(user, note(user, i), f"/Notes/Cat4/{user}-n{i}.md")
        sim.move(user, "/Docs/F1", "/Archive/F1")  # folder move: one event for 10 files
        sim.move(user, "/Notes/Cat1", "/Notes/Cat1b")  # a category renamed: 10 notes
        for i in (2, 12, 22):  # file deletes
            sim.delete(user, file(user, i))
        for i in (3, 13):  # note deletes
            sim.delete(user, note(user, i))
        sim.delete(user, "/Docs/F2/Sub")  # folder delete: one event for 2 files
    sim.move("bob", note("bob", 8), "/Docs/F0/bob-n8.md")  # a note becomes a file
    sim.copy("alice", file("alice", 25), "/Docs/F0/alice-f25-copy.md")
    sim.share("alice", "/Docs/F3", "bob")  # mounted at /F3 for bob
    sim.share("bob", "/Docs/F3", "carol")  # mounted at /F3 for carol
    sim.share("carol", file("carol", 4), "alice")  # one file, mounted at /carol-f4.md
    sim.share("alice", "/Docs/F4", "carol")  # mounted at /F4 for carol
    sim.put_file("alice", file("alice", 33), text(rng, "alice file 33 edited while shared"))


def churn_again(stack: Stack, rng: random.Random) -> None:
    """Unshares and changes below shares, plus a few more edits and deletes."""
    sim = stack.sim
    sim.unshare("alice", "/Docs/F3", "bob")
    sim.put_file("carol", "/F4/alice-f24.md", text(rng, "alice file 24 edited by carol"))
    sim.move("alice", file("alice", 14), "/Docs/F0/alice-f14.md")  # out of carol's share
    for user in USERS:
        sim.put_file(user, note(user, 9), text(rng, f"{user} note 9 edited again"))
        sim.delete(user, file(user, 45))


def churn_after_flush(stack: Stack, rng: random.Random) -> None:
    sim = stack.sim
    sim.unshare("carol", file("carol", 4), "alice")
    sim.move("bob", "/Archive/F1", "/Docs/F1-back")
    for user in USERS:
        sim.put_file(user, f"/Notes/Cat0/{user}-late.md", text(rng, f"{user} late note"))
        sim.put_file(user, file(user, 19), text(rng, f"{user} file 19 edited late"))


def test_one_pass_restores_the_index_despite_lost_and_reordered_webhooks(rstack: Stack) -> None:
    rng = random.Random(42)
    sim = rstack.sim
    sim.drop_rate = 0.3
    sim.delivery_delay = (0.0, 0.3)
    sim.reorder = True
    create_corpus(rstack, rng)
    churn(rstack, rng)
    rstack.settle()
    expected = ground_truth(rstack, USERS)
    assert len(expected) >= 250  # most of the 300 are still there
    assert differences(expected, index_state(rstack))  # the webhooks alone fell short

    rstack.reconcile(USERS)
    assert differences(ground_truth(rstack, USERS), index_state(rstack)) == {}

    churn_again(rstack, rng)
    rstack.services.redis.flushdb()  # queues, locks, debounce keys and scan state: all gone
    churn_after_flush(rstack, rng)
    rstack.settle()
    assert differences(ground_truth(rstack, USERS), index_state(rstack))  # unshares: no event
    rstack.reconcile(USERS)
    assert differences(ground_truth(rstack, USERS), index_state(rstack)) == {}
