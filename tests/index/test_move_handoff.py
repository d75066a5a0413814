"""A move whose re-reads go to the ``index`` queue (``ncindex.move_path`` writes payloads
only): the index between the move and those re-reads, and a move's task run again.

A note moved out of the notes folder becomes a file, a new doc key, embedded by the re-read:
until it runs (a busy or stopped index worker), the note still indexed kept the path the
file left. And a task run again (a publish refused: ``BrokerUnavailable`` retries it; a
worker killed after its writes: redelivered) finds nothing left under the old path: what it
queued must still be re-read (a guard: it passes before and after the change of this file,
because the moved folder's walk queues its notes again).
"""

from __future__ import annotations

from typing import Any

import pytest

from ncindex import names
from ncindex.errors import BrokerUnavailable
from support import Stack, wait_until
from workers import tasks


def test_a_move_refused_by_the_broker_still_re_reads_the_notes_it_moved(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/Notes/Trips/Ferry.md is indexed in category Trips; the folder is renamed to
    /Notes/Voyages, and the first publish of an ``ncindex.index_node`` is refused. The
    retried ``move_path`` still has the note re-read: it ends in category Voyages (a guard,
    see above)."""
    note = stack.sim.put_file("alice", "/Notes/Trips/Ferry.md", "# Ferry\nThe ferry leaves at 7.")
    stack.settle()
    assert stack.points(f"note:{note}")[0].payload["category"] == "Trips"
    refused: list[int] = []
    enqueue = tasks.enqueue

    def refuse_once(producer: Any, client: Any, actions: Any, *args: Any, **kwargs: Any) -> Any:
        actions = list(actions)
        if not refused and any(a.task == names.INDEX_NODE for a in actions):
            refused.append(len(actions))
            raise BrokerUnavailable("publish refused (test)")
        return enqueue(producer, client, actions, *args, **kwargs)

    monkeypatch.setattr(tasks, "enqueue", refuse_once)
    stack.sim.move("alice", "/Notes/Trips", "/Notes/Voyages")
    stack.settle()
    assert refused, "no index_node was queued"
    payload = wait_until(
        lambda: (p := stack.points(f"note:{note}")[0].payload)["category"] == "Voyages" and p, 30
    )
    assert payload["paths"] == {"alice": "/Notes/Voyages/Ferry.md"}


def test_a_note_moved_out_of_the_notes_folder_shows_its_new_path_until_its_re_read(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/Notes/Kiln.md is indexed as a note, then moved to /Docs/Kiln.md: a file now, a new
    doc key, embedded by the ``ncindex.index_node`` the move queues on the ``index`` queue.
    Held back here (as a busy or stopped index worker would hold it), the note still
    indexed shows where the file now is (before: /Notes/Kiln.md, a path that no longer
    exists); once the re-read runs, only ``file:<id>`` is left, at that path."""
    note = stack.sim.put_file("alice", "/Notes/Kiln.md", "# Kiln\nThe kiln is fired on Fridays.")
    stack.sim.mkdir("alice", "/Docs")  # made by the move, its walk would index the file
    stack.settle()
    assert stack.points(f"note:{note}")[0].payload["paths"] == {"alice": "/Notes/Kiln.md"}
    held: list[tuple[Any, ...]] = []
    enqueue = tasks.enqueue

    def hold_index_nodes(producer: Any, client: Any, actions: Any, *args: Any, **kw: Any) -> Any:
        actions = list(actions)
        if any(a.task == names.INDEX_NODE for a in actions):
            held.append((producer, client, actions, args, kw))
            return len(actions), 0
        return enqueue(producer, client, actions, *args, **kw)

    monkeypatch.setattr(tasks, "enqueue", hold_index_nodes)
    stack.sim.move("alice", "/Notes/Kiln.md", "/Docs/Kiln.md")
    stack.settle()
    assert [a.kwargs["file_id"] for h in held for a in h[2]] == [note]
    assert stack.points(f"note:{note}")[0].payload["paths"] == {"alice": "/Docs/Kiln.md"}
    monkeypatch.setattr(tasks, "enqueue", enqueue)
    for producer, client, actions, args, kw in held:
        enqueue(producer, client, actions, *args, **kw)
    stack.settle()
    assert not stack.points(f"note:{note}")
    assert stack.points(f"file:{note}")[0].payload["paths"] == {"alice": "/Docs/Kiln.md"}
