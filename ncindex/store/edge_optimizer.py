"""Keeps the embedded engine (Qdrant Edge) optimised in the background.

Qdrant Edge never runs its segment optimisers by itself (merging segments, building HNSW and
the quantised vectors), so without this a growing shard is searched by scanning every point the
filter lets through. And Edge's ``optimize`` holds the Python GIL for its whole run, so it cannot
run on a thread of the process that serves searches: :class:`EdgeOptimizer` checks the shards
every ``check_seconds`` and, when at least ``after_points`` points sit outside HNSW-indexed
segments, optimises a copy of the shard in a child process
(``python -m ncindex.store.edge_optimizer PATH [BM25_THRESHOLD]``) and swaps it in
(:meth:`~ncindex.store.qdrant_edge.QdrantEdgeStore.optimise_aside`).

Its state is written to ``optimizer.json`` in the store's root (one entry per model slug), for
``ncindex status`` in another process (:func:`read_state`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import structlog

from ncindex.errors import StoreUnavailable
from ncindex.store.port import PointRecord, SparseVector
from ncindex.store.qdrant_edge import OptimisedCopy, QdrantEdgeStore

log = structlog.get_logger(__name__)

STATE_FILE = "optimizer.json"
"""The optimiser's state, in the embedded store's root folder."""

CHILD_TIMEOUT_SECONDS = 6 * 3600
"""Longest life of one child (optimising the copy, then taking its replays), seconds;
optimising a million points took 47–65 min here with both cores shared (bench-scale)."""


def unindexed_points(info: dict[str, int]) -> int:
    """Points whose dense vector is outside an HNSW-indexed segment, from
    :meth:`QdrantEdgeStore.info`. Edge's ``indexed_vectors`` counts the BM25 vectors of every
    segment (a sparse index is always built) plus the dense vectors of optimised segments
    (measured: 20,000 fresh points show 20,000; after ``optimize`` 40,000), so with a BM25
    vector on every chunk the dense vectors indexed are ``indexed_vectors - points``."""
    points = info["points"]
    return min(points, max(0, 2 * points - info["indexed_vectors"]))


def optimise_in_child(path: Path, sparse_threshold: int | None = None) -> ChildOptimisation:
    """Optimise the closed shard copy at ``path`` in a child Python process (this module's
    ``__main__``), so the optimisers hold another interpreter's GIL, and keep it open there for
    the writes that catch it up (:class:`ChildOptimisation`); the segments it builds get the
    BM25 full-scan threshold ``sparse_threshold`` (points; ``None``: the shard's own). Raises
    ``StoreUnavailable`` when the child fails or outlives ``CHILD_TIMEOUT_SECONDS``."""
    return ChildOptimisation(path, sparse_threshold)


class ChildOptimisation:
    """A child process that loads the shard copy at ``path``, optimises it (with the BM25
    full-scan threshold ``sparse_threshold``, :meth:`QdrantEdgeStore.optimize`) and flushes it, then
    holds it open and applies what it is sent (the
    :class:`~ncindex.store.qdrant_edge.OptimisedCopy` a
    :meth:`~ncindex.store.qdrant_edge.QdrantEdgeStore.optimise_aside` replays into), so the
    copy is loaded, written and closed by another interpreter's GIL. The protocol, one line
    each way on its standard input and output: the child says ``optimised``; ``replay
    {json}`` (``doc_keys`` and their ``points``) is answered ``ok``, ``flush`` ``flushed``;
    ``close`` is answered ``closed`` once the copy is flushed and closed (the child's exit, which
    frees its memory, is awaited by a thread of its own). Constructing it waits until the copy is
    optimised. Any failure (the child's exit, a wrong answer, ``timeout`` seconds in all)
    raises ``StoreUnavailable`` with the end of the child's standard error, and kills it."""

    def __init__(
        self,
        path: Path,
        sparse_threshold: int | None = None,
        timeout: float = CHILD_TIMEOUT_SECONDS,
    ) -> None:
        self.path = path
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - kept open for the child's life
        threshold = [] if sparse_threshold is None else [str(sparse_threshold)]
        self._proc = subprocess.Popen(  # noqa: S603 - our own module, by this interpreter
            [sys.executable, "-m", "ncindex.store.edge_optimizer", str(path), *threshold],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._deadline = threading.Timer(timeout, self._proc.kill)
        self._deadline.daemon = True
        self._deadline.start()
        self._expect("optimised")

    def replace_documents(self, doc_keys: Sequence[str], points: Sequence[PointRecord]) -> None:
        """Replace the documents ``doc_keys`` of the copy with ``points`` (in the child)."""
        batch = {"doc_keys": list(doc_keys), "points": [_encode(p) for p in points]}
        self._send("replay " + json.dumps(batch))
        self._expect("ok")

    def flush(self) -> None:
        """Have the child flush the copy."""
        self._send("flush")
        self._expect("flushed")

    def close(self) -> None:
        """Have the child flush and close the copy; its exit is awaited in the background."""
        self._send("close")
        self._expect("closed")
        threading.Thread(target=self._reap, name="edge-optimizer-reap", daemon=True).start()

    def _reap(self) -> None:
        try:
            self._proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._release()

    def abort(self) -> None:
        """Kill the child (the copy is left as it is, for the caller to delete)."""
        self._proc.kill()
        self._proc.wait()
        self._release()

    def _release(self) -> None:
        self._deadline.cancel()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()

    def _send(self, line: str) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
        except OSError as exc:
            raise self._failure(f"cannot write to it: {exc}") from exc

    def _expect(self, word: str) -> None:
        assert self._proc.stdout is not None
        said = self._proc.stdout.readline().strip()
        if said != word:
            raise self._failure(f"said {said[:100]!r} where {word!r} was due")

    def _failure(self, what: str) -> StoreUnavailable:
        self._proc.kill()
        code = self._proc.wait()
        self._stderr.seek(0)
        stderr = self._stderr.read()[-500:].decode(errors="replace")
        self._release()
        return StoreUnavailable(
            f"optimising {str(self.path)!r} failed: the child {what} (exit {code}); {stderr}"
        )


def _encode(point: PointRecord) -> dict[str, Any]:
    sparse = point.sparse
    return {
        "id": point.id,
        "payload": point.payload,
        "dense": point.dense,
        "sparse": None if sparse is None else [sparse.indices, sparse.values],
    }


def _decode(raw: dict[str, Any]) -> PointRecord:
    sparse = raw["sparse"]
    return PointRecord(
        id=raw["id"],
        payload=raw["payload"],
        dense=raw["dense"],
        sparse=None if sparse is None else SparseVector(indices=sparse[0], values=sparse[1]),
    )


def read_state(root: Path) -> dict[str, Any]:
    """The optimiser's last state per model slug (``{}`` when it never ran): ``state``
    (``"idle"``, ``"optimising"`` or ``"failed"``), ``checked_at`` (Unix seconds), ``points``,
    ``segments``, ``unindexed_points``, and of the last run (absent before the first):
    ``started_at`` / ``finished_at`` (Unix seconds), ``outcome`` (``"optimised"`` or
    ``"failed"``; absent while it runs), its ``error`` and the seconds of its steps
    (:meth:`~ncindex.store.qdrant_edge.QdrantEdgeStore.optimise_aside`; a failed run has
    none)."""
    try:
        # NaN and Infinity read as None (not a time; 1e400, read as infinity, is dropped below)
        raw = json.loads(
            (Path(root) / STATE_FILE).read_text(encoding="utf-8"),
            parse_constant=lambda _: None,
        )
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    # a file written by hand or cut short: an entry that is not an object is left out, a
    # number that is not finite is dropped (status shows "?" for it)
    return {
        slug: {
            k: v for k, v in entry.items() if not (isinstance(v, float) and not math.isfinite(v))
        }
        for slug, entry in raw.items()
        if isinstance(entry, dict)
    }


class EdgeOptimizer:
    """A daemon thread optimising the Edge shards ``stores()`` returns (the live model's and a
    mirror model's) whenever ``after_points`` or more points are unindexed beyond those its
    last run left unindexed (segments still below the layout's indexing threshold), checking
    every ``check_seconds``. ``optimise`` runs the optimisers on a shard copy and holds it
    (default: :func:`optimise_in_child`). ``after_points`` 0 turns it off."""

    def __init__(
        self,
        stores: Callable[[], Iterable[QdrantEdgeStore]],
        *,
        after_points: int,
        check_seconds: float,
        optimise: Callable[[Path, int], OptimisedCopy] = optimise_in_child,
    ) -> None:
        self._stores = stores
        self.after_points = after_points
        self.check_seconds = check_seconds
        self._optimise = optimise
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._left_unindexed: dict[str, int] = {}

    def start(self) -> None:
        """Start the checking thread (nothing when ``after_points`` is 0)."""
        if self.after_points <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="edge-optimizer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Ask the thread to stop and wait up to ``timeout`` seconds; an optimisation under way
        finishes first (its child process is not killed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.check_seconds):
            try:
                self.check_once()
            except Exception:  # the thread must outlive one failing round; logged with its cause
                log.exception("edge_optimizer_round_failed")

    def check_once(self) -> list[str]:
        """Optimise every shard that needs it now; returns the model slugs optimised."""
        done: list[str] = []
        for store in self._stores():
            if self._stop.is_set():
                break
            info = store.info()
            unindexed = unindexed_points(info)
            entry: dict[str, Any] = {
                "state": "idle",
                "checked_at": time.time(),
                **info,
                "unindexed_points": unindexed,
            }
            # points left unindexed by the last run (segments below the indexing threshold)
            # do not count again, or a small shard would be copied on every check
            left = self._left_unindexed.get(store.model_slug, 0)
            if unindexed - min(left, unindexed) < self.after_points:
                self._record(store, entry)
                continue
            entry.update(state="optimising", started_at=time.time())
            self._record(store, entry, new_run=True)
            try:
                report = store.optimise_aside(self._optimise)
            except (StoreUnavailable, OSError) as exc:  # OSError: the copy (a full disk)
                entry.update(
                    state="failed", outcome="failed", finished_at=time.time(), error=str(exc)
                )
                self._record(store, entry)
                log.warning("edge_optimize_failed", model=store.model_slug, error=str(exc))
                continue
            after = store.info()
            self._left_unindexed[store.model_slug] = unindexed_points(after)
            entry.update(
                state="idle",
                outcome="optimised",
                finished_at=time.time(),
                error=None,
                **report,
                **after,
                unindexed_points=unindexed_points(after),
            )
            self._record(store, entry)
            log.info("edge_optimized", model=store.model_slug, **report, **after)
            done.append(store.model_slug)
        return done

    @staticmethod
    def _record(store: QdrantEdgeStore, entry: dict[str, Any], new_run: bool = False) -> None:
        """Write ``entry`` as the model's state: merged over what the last run recorded (its
        outcome, times and steps stay visible between runs), or, for a ``new_run``, in its
        place, so a run that fails shows none of the run before's figures."""
        state = read_state(store.root)
        earlier = {} if new_run else state.get(store.model_slug, {})
        state[store.model_slug] = {**earlier, **entry}
        tmp = store.root / f".{STATE_FILE}.{os.getpid()}.tmp"
        with contextlib.suppress(OSError):  # the state is informative; indexing must go on
            tmp.write_text(json.dumps(state, indent=1), encoding="utf-8")
            os.replace(tmp, store.root / STATE_FILE)


def _main(argv: list[str]) -> int:
    """Child entry of :class:`ChildOptimisation`: load the shard copy ``argv[0]``, optimise
    (with the BM25 full-scan threshold ``argv[1]``, if given), flush, say ``optimised``, apply
    ``replay`` and ``flush`` lines until ``close`` (or the end of input), then close it and
    say ``closed``."""
    path = Path(argv[0])
    threshold = int(argv[1]) if len(argv) > 1 else None
    copy = QdrantEdgeStore(path.parent, path.name)  # opens the existing shard on first use
    try:
        copy.optimize(threshold)
        copy.flush()
        print("optimised", flush=True)
        for line in sys.stdin:
            command, _, body = line.rstrip("\n").partition(" ")
            if command == "close":
                break
            if command == "flush":
                copy.flush()
                print("flushed", flush=True)
                continue
            if command != "replay":
                raise ValueError(f"unknown command {command!r}")
            batch = json.loads(body)
            copy.replace_documents(batch["doc_keys"], [_decode(p) for p in batch["points"]])
            print("ok", flush=True)
    finally:
        copy.close()
    print("closed", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
