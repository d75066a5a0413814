"""``NCINDEX_WORKER_MAX_MEMORY_PER_CHILD`` values that cannot work are refused at start or
said in the worker's log (:mod:`workers.pool_memory`); the bound in a real worker is
tests/index/test_worker_recycling.py's."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest
from pydantic import ValidationError
from structlog.testing import capture_logs

from ncindex.settings import Settings
from workers import pool_memory


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1200", "at least 131072"),  # MiB meant: every pool process replaced after each task
        ("1", "at least 131072"),
        ("1G", "without a unit"),
        ("900MiB", "without a unit"),
        ("-1", "greater than or equal to 0"),
        ("1.5", "valid integer"),
    ],
)
def test_a_bound_that_cannot_be_meant_is_refused_naming_its_unit(value: str, message: str) -> None:
    """A value under 128 MiB (a unit taken for another) or with a unit is refused, the message
    saying KiB. (Before, 1200 and 1 were taken, and every pool process was replaced after
    each task, the model loaded again each time: the test failed there.)"""
    with pytest.raises(ValidationError, match=message) as refused:
        Settings(worker_max_memory_per_child=value)
    assert {e["loc"][0] for e in refused.value.errors()} == {"worker_max_memory_per_child"}
    assert Settings(worker_max_memory_per_child="0").worker_max_memory_per_child == 0
    assert Settings(worker_max_memory_per_child=131_072).worker_max_memory_per_child == 131_072


def test_the_memory_limit_is_the_cgroups_or_the_machines(tmp_path: Path) -> None:
    machine = pool_memory.memory_limit_kib(tmp_path / "none")
    assert machine > 0
    (tmp_path / "memory.max").write_text("max\n")
    assert pool_memory.memory_limit_kib(tmp_path) == machine
    (tmp_path / "memory.max").write_text("1073741824\n")
    assert pool_memory.memory_limit_kib(tmp_path) == 1_048_576
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text("2147483648\n")
    assert pool_memory.memory_limit_kib(v1) == 2_097_152


def test_a_bound_past_the_memory_limit_is_said_at_start() -> None:
    """1,200,000 KiB under a 1 GiB limit (the chart's light group had it) is never reached: a
    warning names the setting and both figures; a bound below it or none says nothing."""
    with capture_logs() as logs:
        pool_memory.check_reachable(1_200_000, 4, 1_048_576)
        pool_memory.check_reachable(300_000, 4, 1_048_576)
        pool_memory.check_reachable(None, 4, 1_048_576)
    assert [(e["event"], e["setting"], e["bound_kib"], e["limit_kib"]) for e in logs] == [
        (
            "worker_memory_bound_unreachable",
            "NCINDEX_WORKER_MAX_MEMORY_PER_CHILD",
            1_200_000,
            1_048_576,
        )
    ]


def test_a_pool_process_starting_past_its_bound_says_so() -> None:
    """A pool process whose peak at start is already past the bound would be replaced after
    every task: it logs an error naming the setting; one under it, or no bound, nothing."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with capture_logs() as logs:
        pool_memory.check_fresh(peak - 1)
        pool_memory.check_fresh(peak * 4)
        pool_memory.check_fresh(None)
    assert [(e["event"], e["log_level"], e["bound_kib"]) for e in logs] == [
        ("pool_process_past_memory_bound", "error", peak - 1)
    ]


def test_a_recycled_pool_process_says_how_many_tasks_it_ran(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``tasks`` of 1 line after line is a bound below what one task leaves behind."""
    from billiard.pool import EX_RECYCLE

    monkeypatch.setattr(pool_memory, "_tasks_run", 0)
    pool_memory.count_task()
    with capture_logs() as logs:
        pool_memory.note_recycled(pid=41, exitcode=EX_RECYCLE)
        pool_memory.note_recycled(pid=42, exitcode=0)
    assert [(e["event"], e["pid"], e["tasks"]) for e in logs] == [("pool_process_recycled", 41, 1)]


def test_the_bound_is_a_prefork_pools_only() -> None:
    """The solo pool sends ``worker_process_init`` in the worker itself, whose peak (its model
    and store loaded) passed the default bound: a CI run's solo worker logged
    ``pool_process_past_memory_bound`` as an error for a bound it ignores. Only a prefork
    worker has one."""
    from types import SimpleNamespace

    from celery.concurrency import get_implementation

    def worker(pool: str, bound: int | None = 1_200_000) -> SimpleNamespace:
        return SimpleNamespace(pool_cls=get_implementation(pool), max_memory_per_child=bound)

    assert pool_memory.pool_bound(worker("prefork")) == 1_200_000
    assert pool_memory.pool_bound(worker("prefork", None)) is None
    assert pool_memory.pool_bound(worker("solo")) is None
    assert pool_memory.pool_bound(worker("threads")) is None
    assert pool_memory.pool_bound(SimpleNamespace()) is None
