"""Embedding calls shared between the concurrent tasks of one worker."""

from __future__ import annotations

import threading

import pytest

from ncindex.embedding.batching import EmbedBatcher
from support import wait_until


def test_single_caller_runs_at_once() -> None:
    batcher = EmbedBatcher(lambda texts: [t.upper() for t in texts])
    assert batcher.embed(["a", "b"]) == ["A", "B"]
    assert batcher.embed([]) == []
    assert batcher.calls == 1


def test_requests_waiting_during_a_call_share_the_next_one() -> None:
    release = threading.Event()
    sizes: list[int] = []

    def embed(texts: list[str]) -> list[str]:
        sizes.append(len(texts))
        if len(sizes) == 1:
            release.wait(10)  # hold the first call until the others queued up
        return [f"v:{t}" for t in texts]

    batcher = EmbedBatcher(embed, max_texts=64)
    results: dict[int, list[str]] = {}

    def call(i: int) -> None:
        results[i] = batcher.embed([f"{i}.{j}" for j in range(i + 1)])

    threads = [threading.Thread(target=call, args=(0,))]
    threads[0].start()
    wait_until(lambda: sizes, 5, interval=0.01)
    threads += [threading.Thread(target=call, args=(i,)) for i in range(1, 5)]
    for t in threads[1:]:
        t.start()
    wait_until(lambda: batcher.pending == 4, 5, interval=0.01)
    release.set()
    for t in threads:
        t.join(10)
    assert sizes == [1, 2 + 3 + 4 + 5]  # four documents' chunks in one call
    assert results == {i: [f"v:{i}.{j}" for j in range(i + 1)] for i in range(5)}


def test_max_texts_splits_calls_and_errors_reach_every_caller_of_the_call() -> None:
    release = threading.Event()
    sizes: list[int] = []

    def embed(texts: list[str]) -> list[str]:
        sizes.append(len(texts))
        if len(sizes) == 1:
            release.wait(10)
        if "boom" in texts:
            raise RuntimeError("model failed")
        return texts

    batcher = EmbedBatcher(embed, max_texts=3)
    outcomes: dict[str, object] = {}

    def call(name: str, texts: list[str]) -> None:
        try:
            outcomes[name] = batcher.embed(texts)
        except RuntimeError as exc:
            outcomes[name] = str(exc)

    first = threading.Thread(target=call, args=("first", ["x"]))
    first.start()
    wait_until(lambda: sizes, 5, interval=0.01)
    others = [
        threading.Thread(target=call, args=("a", ["a1", "a2"])),
        threading.Thread(target=call, args=("b", ["boom"])),
        threading.Thread(target=call, args=("c", ["c1", "c2", "c3"])),
    ]
    for n, t in enumerate(others, start=1):
        t.start()  # one after the other, so the queue order is a, b, c
        wait_until(lambda n=n: batcher.pending == n, 5, interval=0.01)
    release.set()
    for t in [first, *others]:
        t.join(10)
    assert sizes == [1, 3, 3]  # a+b share one call; c alone (the bound)
    assert outcomes == {
        "first": ["x"],
        "a": "model failed",
        "b": "model failed",
        "c": ["c1", "c2", "c3"],
    }


def test_max_calls_run_at_once_and_no_request_runs_twice() -> None:
    release = threading.Event()
    running: list[list[str]] = []
    seen: list[str] = []
    lock = threading.Lock()

    def embed(texts: list[str]) -> list[str]:
        with lock:
            running.append(texts)
            seen.extend(texts)
        if len(running) <= 2:
            release.wait(10)  # hold the first two calls until both run
        return [f"v:{t}" for t in texts]

    batcher = EmbedBatcher(embed, max_texts=64, max_calls=2)
    results: dict[int, list[str]] = {}

    def call(i: int) -> None:
        results[i] = batcher.embed([f"{i}.a", f"{i}.b"])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for n, t in enumerate(threads, start=1):
        t.start()
        wait_until(lambda n=n: len(running) == n, 5, interval=0.01)  # two leaders, two calls
    threads += [threading.Thread(target=call, args=(i,)) for i in range(2, 6)]
    for t in threads[2:]:
        t.start()
    wait_until(lambda: batcher.pending == 4, 5, interval=0.01)  # a third call waits
    release.set()
    for t in threads:
        t.join(10)
    assert results == {i: [f"v:{i}.a", f"v:{i}.b"] for i in range(6)}
    assert sorted(seen) == sorted(f"{i}.{x}" for i in range(6) for x in "ab")
    assert batcher.calls == len(running) <= 4


def test_a_call_beside_a_running_one_waits_for_min_texts() -> None:
    release = threading.Event()
    sizes: list[int] = []
    lock = threading.Lock()

    def embed(texts: list[str]) -> list[str]:
        with lock:
            sizes.append(len(texts))
        release.wait(10)  # hold every call until the end
        return [f"v:{t}" for t in texts]

    batcher = EmbedBatcher(embed, max_texts=64, max_calls=2, min_texts=3)
    results: dict[str, list[str]] = {}
    threads: list[threading.Thread] = []

    def start(name: str, texts: list[str]) -> None:
        thread = threading.Thread(target=lambda: results.update({name: batcher.embed(texts)}))
        thread.start()
        threads.append(thread)

    start("a", ["a"])
    wait_until(lambda: sizes == [1], 5, interval=0.01)
    start("b", ["b"])
    wait_until(lambda: batcher.pending == 1, 5, interval=0.01)
    assert sizes == [1]  # one text waiting starts no second call
    start("c", ["c1", "c2"])
    wait_until(lambda: len(sizes) == 2, 5, interval=0.01)
    assert sizes == [1, 3]  # three waiting: a second call, for both requests
    assert batcher.pending == 0
    release.set()
    for thread in threads:
        thread.join(10)
    assert results == {"a": ["v:a"], "b": ["v:b"], "c": ["v:c1", "v:c2"]}
    assert batcher.calls == 2


def test_bounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_texts"):
        EmbedBatcher(lambda texts: texts, max_texts=0)
    with pytest.raises(ValueError, match="max_calls"):
        EmbedBatcher(lambda texts: texts, max_calls=0)
    with pytest.raises(ValueError, match="min_texts"):
        EmbedBatcher(lambda texts: texts, min_texts=0)
