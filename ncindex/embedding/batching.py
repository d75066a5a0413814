"""Embedding batches across documents: concurrent tasks of one worker share model calls.

A worker running several tasks at once (Celery's ``threads`` pool) would otherwise call the
model once per document, with the two or three chunks a typical document has. The
:class:`EmbedBatcher` lets the calls meet: a caller whose request is still waiting becomes a
*leader* when no leader is running, or when fewer than ``max_calls`` are and at least
``min_texts`` texts wait; it runs the model on every request waiting at that moment (up to
``max_texts`` texts, oldest first), then on those that arrived meanwhile, until its own request
is done; it then hands leadership to a waiting caller. No caller waits for a timer: with one
task at a time (``solo`` pool) each call runs at once, as before.

``min_texts`` is what makes calls share: each call costs a fixed part besides its texts (about
as much as 16 token slots: :data:`ncindex.embedding.embedder.CALL_COST_TOKENS`), so a second
call started for the one text that just arrived costs more CPU than that text waiting for the
running call to end and sharing the next one. A worker indexing one-chunk documents made one
call per 1.2 texts with every request free to lead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(eq=False)
class _Request(Generic[T]):
    texts: list[str]
    result: list[T] | None = None
    error: BaseException | None = None
    taken: bool = False
    done: bool = False


class EmbedBatcher(Generic[T]):
    """Shares calls of ``embed`` (texts → one result per text, in order) between threads.

    ``max_texts`` bounds the texts of one shared call (a single request larger than that
    runs alone); ``max_calls`` bounds the calls running at once (each in its leader's thread;
    more than one only pays when ``embed`` releases the GIL and each call leaves cores idle,
    such as an ONNX session on fewer threads than cores); a call beside a running one starts
    only once ``min_texts`` texts wait (default 1: whenever a request waits). Raises
    ``ValueError`` for a bound below 1. An exception raised by ``embed`` is
    raised in every caller whose texts were in that call. ``calls`` counts the calls made (for
    tests and metrics).
    """

    def __init__(
        self,
        embed: Callable[[list[str]], list[T]],
        max_texts: int = 64,
        max_calls: int = 1,
        min_texts: int = 1,
    ) -> None:
        for name, bound in (
            ("max_texts", max_texts),
            ("max_calls", max_calls),
            ("min_texts", min_texts),
        ):
            if bound < 1:
                raise ValueError(f"{name} must be at least 1")
        self._embed = embed
        self._max = max_texts
        self._max_calls = max_calls
        self._min = min_texts
        self._cond = threading.Condition()
        self._pending: list[_Request[T]] = []
        self._waiting_texts = 0
        self._leaders = 0
        self.calls = 0

    @property
    def pending(self) -> int:
        """Requests waiting for a call right now."""
        with self._cond:
            return len(self._pending)

    def embed(self, texts: Sequence[str]) -> list[T]:
        """Results for ``texts`` (in order), computed in a call shared with other threads."""
        if not texts:
            return []
        request: _Request[T] = _Request(list(texts))
        with self._cond:
            self._pending.append(request)
            self._waiting_texts += len(request.texts)
            while not request.taken and not self._may_lead():
                self._cond.wait()
            lead = not request.taken
            if lead:
                self._leaders += 1
        if lead:
            try:
                while not request.done:
                    batch = self._take()
                    if not batch:  # another leader took this request: wait for its call
                        break
                    self._run(batch)
            finally:
                with self._cond:
                    self._leaders -= 1
                    self._cond.notify_all()
        with self._cond:
            while not request.done:
                self._cond.wait()
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    def _may_lead(self) -> bool:
        """Whether a waiting caller may start a call now (the condition held)."""
        if self._leaders == 0:
            return True
        return self._leaders < self._max_calls and self._waiting_texts >= self._min

    def _take(self) -> list[_Request[T]]:
        with self._cond:
            batch: list[_Request[T]] = []
            size = 0
            while self._pending and (not batch or size + len(self._pending[0].texts) <= self._max):
                size += len(self._pending[0].texts)
                request = self._pending.pop(0)
                self._waiting_texts -= len(request.texts)
                request.taken = True
                batch.append(request)
            return batch

    def _run(self, batch: list[_Request[T]]) -> None:
        texts = [t for r in batch for t in r.texts]
        try:
            with self._cond:
                self.calls += 1
            results = self._embed(texts)
            if len(results) != len(texts):
                raise RuntimeError(f"embed returned {len(results)} results for {len(texts)}")
        except BaseException as exc:  # handed to every caller of this call
            with self._cond:
                for r in batch:
                    r.error, r.done = exc, True
                self._cond.notify_all()
            return
        with self._cond:
            start = 0
            for r in batch:
                r.result, start = list(results[start : start + len(r.texts)]), start + len(r.texts)
                r.done = True
            self._cond.notify_all()
