"""``ncindex status`` on a terminal: the status of :func:`ncindex.sync.status.collect_status`
drawn with rich (tables and progress bars), redrawn in place by ``--watch``; and the progress
bar the long commands (``reconcile --apply``, ``reindex --wait``, ``eval``) show on stderr
when it is a terminal.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console, Group
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from ncindex.doctor import utc_time
from ncindex.progress import INDEX_REBUILD_NOTE_SECONDS
from ncindex.wording import counted


def duration(seconds: float | None) -> str:
    """``"3 h 05 min"``, ``"4 min 10 s"``, ``"12 s"``; ``"?"`` for ``None`` (no rate yet)."""
    if seconds is None:
        return "?"
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds} s"


def optimizer_lines(store: dict[str, Any], now: float) -> list[str]:
    """One line per model for the embedded engine's background optimiser, from ``store``
    (:func:`ncindex.store.store_status`; none for a Qdrant server) at Unix time ``now``: its
    state, its last run (when it ended, how long it and its copy, optimise and swap steps
    took, how long writes waited at most; or why it failed) and the shard's size. A figure
    missing from the state shows as ``?``. First, when the store could not be read (a Qdrant
    server down), why."""
    lines = [f"store: not readable: {store['error']}"] if store.get("error") else []
    for slug, opt in store.get("optimizer", {}).items():
        size = (
            f"{counted(opt.get('points', '?'), 'point')} in "
            f"{counted(opt.get('segments', '?'), 'segment')}, "
            f"{opt.get('unindexed_points', '?')} unindexed"
        )
        state = opt.get("state", "?")
        started, finished = _number(opt, "started_at"), _number(opt, "finished_at")
        if state == "optimising":
            run = f"optimising for {_span(started, now)}"
        elif finished is None and not opt.get("outcome"):
            # a run that started and never recorded its end: the process died during it
            run = (
                f"{state}, never optimised"
                if started is None
                else f"{state}; last run interrupted (started {_span(started, now)} ago)"
            )
        elif opt.get("outcome", "failed" if opt.get("error") else None) == "failed":
            # (a state written before runs had an outcome names its failure by its error)
            run = (
                f"{state}; last run failed {_span(finished, now)} ago after "
                f"{_span(started, finished)}: {opt.get('error')}"
            )
        else:
            steps = ", ".join(
                f"{name} {seconds:.1f}"
                for name, key in (
                    ("copy", "copy_seconds"),
                    ("optimise", "optimise_seconds"),
                    ("swap", "swap_seconds"),
                )
                if (seconds := _number(opt, key)) is not None
            )
            took = (
                f"{finished - started:.1f}"
                if started is not None and finished is not None and started <= finished
                else "?"
            )
            waited = _number(opt, "locked_seconds")
            run = (
                f"{state}; last optimised {_span(finished, now)} ago in {took} s"
                + (f" ({steps} s)" if steps else "")
                + (f", writes waited at most {waited:.1f} s" if waited is not None else "")
            )
        lines.append(f"store {slug}: {run}; {size}")
    return lines


def analyzer_lines(analyzer: dict[str, Any] | None) -> list[str]:
    """The line of the BM25 analyzer sample (:func:`ncindex.sync.status.analyzer_status`):
    the upgrade to run, or the current version alone; none when the store was not read (the
    embedded one belongs to ``ncindex up``: ``ncindex doctor`` samples it while that is
    stopped)."""
    if analyzer is None:
        return []
    if analyzer["upgrade"]:
        return [f"analyzer: {analyzer['upgrade']}"]
    sampled = sum(analyzer["sampled"].values())
    shown = counted(sampled, "document")
    return [f"analyzer: {analyzer['current']} ({shown} sampled, all current)"]


def extraction_lines(outdated: int | None) -> list[str]:
    """The line of the documents the last scans found read by an older extraction
    (``outdated_extraction`` of :func:`~ncindex.sync.status.collect_status`): being read
    again, ``reconcile_page_requests`` per user and doc type at a time; none when there are
    none."""
    if not outdated:
        return []
    shown = counted(outdated, "document")
    return [f"extraction: {shown} read by an older extractor, being read again by the scans"]


def reindex_lines(reindex: dict[str, Any] | None, now: float) -> list[str]:
    """The line of a reindex step under way or failed (``data["reindex"]`` of
    :func:`~ncindex.sync.status.collect_status`) at Unix time ``now``: what is rebuilt, since
    when, how far (documents done of those to do, once the step has listed them) and when it
    last moved; that it stalled (``stalled``: no record for
    :data:`~ncindex.index.reindex.STALLED_SECONDS`) and what resumes it; or why it failed. None
    when no step is under way."""
    if reindex is None:
        return []
    started = _number(reindex, "started_at")
    since = (
        f"since {utc_time(started)} ({_span(started, now)} ago)"
        if started is not None
        else "since ? (an older release's record)"
    )
    moved = f"last progress {_span(_number(reindex, 'updated_at'), now)} ago"
    if reindex["state"] == "failed":
        return [
            f"reindex: failed {_span(_number(reindex, 'updated_at'), now)} ago: "
            f"{reindex.get('error')} — `ncindex reindex` shows the models; the same "
            "`ncindex reindex` command run again resumes the step"
        ]
    documents, remaining = reindex.get("documents"), reindex.get("remaining")
    if isinstance(documents, int) and isinstance(remaining, int) and documents > 0:
        done = max(0, documents - remaining)
        far = f"{done} of {counted(documents, 'document')} done ({done / documents:.0%})"
    elif documents == 0:
        far = "no document to do"
    else:
        far = "documents not counted yet"
    what = (
        f"building the collection of model {reindex['model']} (search uses the live one "
        "until the switch)"
        if reindex["state"] == "building"
        else f"rewriting the BM25 vectors of older analyzers with {reindex['model']}"
    )
    if reindex.get("stalled"):
        return [
            f"reindex: stalled — {what} {since}: {far}; no progress for "
            f"{_span(_number(reindex, 'updated_at'), now)}: its worker died or its message "
            "waits behind the index queue; the same `ncindex reindex` command run again "
            "resumes the step"
        ]
    return [f"reindex: {what} {since}: {far}; {moved}"]


def index_rebuild_lines(notes: list[dict[str, Any]], now: float) -> list[str]:
    """One line per payload index being made again (``data["index_rebuilds"]`` of
    :func:`~ncindex.sync.status.collect_status`, :class:`ncindex.progress.IndexRebuilds`) at
    Unix time ``now``: which, over how many points, since when; for a Qdrant server, which
    builds it in the background without saying when it ends, that it was asked then."""
    lines = []
    for note in notes:
        started = _number(note, "started_at")
        when = f"{utc_time(started)} ({_span(started, now)} ago)" if started is not None else "?"
        index = (
            f"the {note.get('field', '?')} index of {note.get('collection', '?')} "
            f"({counted(note.get('points', '?'), 'point')})"
        )
        if note.get("waits"):
            lines.append(
                f"index: {index} is being made again since {when}, by the process that opened "
                "the store, which waits for it"
            )
        else:
            lines.append(
                f"index: Qdrant was asked at {when} to make {index} again; it builds it in the "
                "background and does not say when it is done (this line goes "
                f"{duration(INDEX_REBUILD_NOTE_SECONDS)} after the request)"
            )
    return lines


def other_namespaces_line(data: dict[str, Any]) -> str | None:
    """The line saying which other namespaces hold ncindex data (``data["other_namespaces"]``
    of :func:`~ncindex.sync.status.collect_status`: only when this one holds no scan and no
    worker answered), naming ``NCINDEX_NAMESPACE``; ``None`` when there are none."""
    others = data.get("other_namespaces") or []
    if not others:
        return None
    return (
        "no scan and no worker in this namespace, but scans of other namespaces are in this "
        f"Redis: {', '.join(others)} — set NCINDEX_NAMESPACE to one of them (`make run` uses "
        "ncindex-up)"
    )


def unknown_counts(store: dict[str, Any]) -> str:
    """Why the indexed counts show ``?``, in a few words, from ``data["store"]`` of ``ncindex
    status``: the store did not answer (its ``error`` is on the store's own line), or it is
    the embedded one, which ``ncindex up`` holds and ``status`` does not open
    (:func:`ncindex.store.store_status`)."""
    if store.get("error"):
        return "store not readable"
    if store.get("engine") == "qdrant-edge":
        return "embedded store: counted with NCINDEX_QDRANT_URL only"
    return "not counted"


def _number(entry: dict[str, Any], key: str) -> float | None:
    """``entry[key]`` as a float when it is a real number (not a bool, not NaN, infinite or
    past a float's range), else None."""
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        return None
    return number if math.isfinite(number) else None


def _span(since: float | None, until: float | None) -> str:
    """:func:`duration` from ``since`` to ``until`` (Unix seconds); ``"?"`` when either is
    unknown or ``since`` is later."""
    if since is None or until is None or since > until:
        return "?"
    return duration(until - since)


def render(data: dict[str, Any]) -> Group:
    """The status as rich renderables: a summary (with the embedded engine's optimiser:
    :func:`optimizer_lines`, and the analyzer sample: :func:`analyzer_lines`), one row per
    user with a progress bar of their first indexing (full once done), and the skipped
    documents per rule."""
    total = data["total"]
    rates = total["rates"]
    workers = data.get("workers")
    seen = "not asked" if workers is None else (", ".join(workers) if workers else "none answered")
    queues = ", ".join(f"{q} {n}" for q, n in data["queues"].items())
    nextcloud = data.get("nextcloud") or {}
    summary = Text.assemble(
        ("nextcloud ", "bold"),
        (f"{nextcloud.get('summary', '?')}\n", "red" if nextcloud.get("problem") else ""),
        *(
            part
            for rotation in [data.get("webhook_rotation")]
            if rotation
            for part in (("webhook secret ", "bold"), (f"{rotation['advice']}\n", "yellow"))
        ),
        *(
            part
            for surplus in [data.get("webhook_surplus")]
            if surplus
            for part in (("webhooks ", "bold"), (f"{surplus}\n", "yellow"))
        ),
        ("queues ", "bold"),
        f"{queues}; reserved {data['reserved']}; index lag {data['index_lag_seconds']} s\n",
        ("workers ", "bold"),
        f"{seen}\n",
        ("total ", "bold"),
        f"pending {total['pending']}, {rates['documents_per_second']} documents/s, "
        f"{rates['chunks_per_second']} chunks/s (last {duration(rates['window_seconds'])}), "
        f"backlog ETA {duration(total['eta_seconds'])}; dead letter {total['dead_letter']}, "
        f"failing {total['failing']}",
        *(f"\n{line}" for line in optimizer_lines(data.get("store", {}), time.time())),
        *(f"\n{line}" for line in analyzer_lines(data.get("analyzer"))),
        *(f"\n{line}" for line in extraction_lines(data.get("outdated_extraction"))),
        *((f"\n{line}", "yellow") for line in reindex_lines(data.get("reindex"), time.time())),
        *(
            (f"\n{line}", "yellow")
            for line in index_rebuild_lines(data.get("index_rebuilds", []), time.time())
        ),
        *((f"\n{line}", "yellow") for line in [other_namespaces_line(data)] if line),
    )
    table = Table(title="per user (docs: indexed documents; pend: pending)", expand=False)
    if any(row.get("indexed") is None for row in data["users"].values()):
        table.caption = f"docs ?: {unknown_counts(data.get('store', {}))}"
    width = max((len(u) for u in data["users"]), default=4)
    table.add_column("user", no_wrap=True, min_width=min(width, 24))
    for name in ("docs", "pend"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("first indexing", no_wrap=True, min_width=16)
    for name in ("doc/s", "chunk/s", "ETA", "dead/fail"):
        table.add_column(name, justify="right", no_wrap=True)
    for user, row in data["users"].items():
        first = row["first_indexing"]
        done = first["state"] == "done"
        fraction = 1.0 if done else (first["progress"] or 0.0)
        bar = Table.grid(padding=(0, 1))
        bar.add_row(
            ProgressBar(total=1.0, completed=fraction, width=10),
            f"{fraction:.0%}" if first["state"] != "not_started" else "-",
        )
        indexed = row.get("indexed")
        table.add_row(
            user,
            "?" if indexed is None else str(sum(indexed.values())),
            str(row["pending"]),
            bar,
            str(row["rates"]["documents_per_second"]),
            str(row["rates"]["chunks_per_second"]),
            duration(row["eta_seconds"]),
            f"{row['dead_letter']}/{row['failing']}",
        )
    skipped = Text(
        "\n".join(
            f"skipped for {user} by rule: "
            + ", ".join(f"{k} {v}" for k, v in row["skipped"].items())
            for user, row in data["users"].items()
            if row["skipped"]
        )
    )
    return Group(summary, table, skipped)


@contextmanager
def progress_bar(description: str, total: int | None) -> Iterator[Callable[..., None]]:
    """A progress bar on stderr while the block runs, when stderr is a terminal (else
    nothing is drawn). Yields ``step(advance=1, *, completed=None, total=None,
    description=None)``: advance by ``advance`` steps, or set what is ``completed`` out of
    ``total`` and what is being done."""
    console = Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
    )
    with bar:
        task = bar.add_task(description, total=total)

        def step(
            advance: int = 1,
            *,
            completed: int | None = None,
            total: int | None = None,
            description: str | None = None,
        ) -> None:
            if completed is None:
                bar.update(task, advance=advance, total=total, description=description)
            else:
                bar.update(task, completed=completed, total=total, description=description)

        yield step
