"""The tasks' base class (``workers.base.NcindexTask``) on the whole stack: each run is counted
by task and outcome."""

from __future__ import annotations

from ncindex.telemetry import TASKS
from support import Stack


def count(task: str, outcome: str) -> float:
    """``ncindex_tasks_total{task, outcome}`` in this process (the stack's worker is a thread)."""
    return TASKS.labels(task, outcome)._value.get()


def test_runs_are_counted_by_task_and_outcome(stack: Stack) -> None:
    before = count("ncindex.index_node", "ok")
    stack.sim.put_file("alice", "/Notes/Counted.md", b"# Counted\n\nA note that is indexed once.")
    stack.sim.flush_deliveries(timeout=10)
    stack.wait_idle(30)
    assert count("ncindex.index_node", "ok") > before
