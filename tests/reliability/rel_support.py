"""Helpers of the reliability tests: the settings of their stacks (:func:`support.build_stack`),
a corpus with private documents of two users and a shared folder, ground truth read from the
simulator, and hypothesis profiles.

Profiles (``NCINDEX_HYPOTHESIS_PROFILE``): ``rel-ci`` (default, a few hundred cases over the
module, for ``make test``) and ``rel-fuzz`` (``make fuzz``: ≥ 10,000 cases per fuzz test).
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from hypothesis import HealthCheck, settings

from ncindex.errors import StoreUnavailable
from ncindex.simulator import NextcloudSimulator

_COMMON = {
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
    "print_blob": True,
}
settings.register_profile("rel-ci", max_examples=150, **_COMMON)
settings.register_profile("rel-fuzz", max_examples=10_000, **_COMMON)
PROFILE = os.environ.get("NCINDEX_HYPOTHESIS_PROFILE", "rel-ci")


def fuzz_settings(ci_examples: int | None = None) -> settings:
    """Settings of a fuzz test: the active profile; in CI at most ``ci_examples`` cases."""
    base = settings.get_profile(PROFILE)
    if PROFILE == "rel-ci" and ci_examples is not None:
        return settings(base, max_examples=ci_examples)
    return base


# --- the fixture corpus: private documents of alice and bob, a folder alice shares with bob ---

ALICE_PRIVATE = {
    "/Private/diary.md": "Alice diary: the lighthouse keeper walked to the harbour at dawn.",
    "/Private/salary.txt": "Alice salary review: budget lighthouse compressor and oyster farm.",
    "/Notes/Secret/Recipe.md": "# Recipe\nAlice's secret oyster soup with lighthouse herbs.",
    "/Private/hostile.md": (
        "Hostile <script>alert('lighthouse')</script> text with <img src=x onerror=alert(1)> "
        'and "quotes" & <mark>fake marks</mark> near the lighthouse harbour.'
    ),
}
BOB_PRIVATE = {
    "/Private/bob-diary.md": "Bob diary: the lighthouse lens key is hidden under the harbour.",
    "/Notes/Home/Garden.md": "# Garden\nBob plants tulips and oysters by the lighthouse.",
    "/Work/report.txt": "Bob report: harbour budget and lighthouse compressor maintenance.",
}
SHARED = {
    "/Shared/plan.md": "Shared lighthouse plan: polish the lens, fix the harbour compressor.",
    "/Shared/minutes.txt": "Shared minutes: oyster farm budget and lighthouse keeper schedule.",
}
SHARED_FOLDER = "/Shared"


def seed_corpus(sim: NextcloudSimulator) -> None:
    """Write the corpus (webhooks fire for each write) and share ``/Shared`` with bob."""
    for path, text in ALICE_PRIVATE.items():
        sim.put_file("alice", path, text.encode())
    for path, text in SHARED.items():
        sim.put_file("alice", path, text.encode())
    for path, text in BOB_PRIVATE.items():
        sim.put_file("bob", path, text.encode())
    sim.share("alice", SHARED_FOLDER, "bob")


def keys_of(sim: NextcloudSimulator, user: str, paths: dict[str, str]) -> set[str]:
    """The ``doc_key``s of ``paths`` in ``user``'s tree (notes under ``/Notes``)."""
    out = set()
    for path in paths:
        file_id = sim.file_id(user, path)
        assert file_id is not None, path
        out.add(f"{'note' if path.startswith('/Notes/') else 'file'}:{file_id}")
    return out


def visible_keys(sim: NextcloudSimulator, user: str) -> set[str]:
    """``doc_key``s of every indexable document ``user`` can see right now (ground truth)."""
    out = set()
    for file_id, path in sim.visible_files(user).items():
        if path.endswith((".md", ".txt")):
            out.add(f"{'note' if path.startswith('/Notes/') else 'file'}:{file_id}")
    return out


# --- the stacks of these tests ------------------------------------------------------------

#: :class:`Settings` of the reliability tests' stacks (:func:`support.build_stack` with these
#: as keywords): a shorter debounce, no rate limit, Nextcloud requests fail within 2 s.
STACK_SETTINGS: dict[str, Any] = {
    "debounce_seconds": 0.2,
    "search_rate_limit": "",
    "http_timeout": 2.0,
}


class Flaky:
    """Makes ``method`` of ``target`` raise ``StoreUnavailable`` for its next ``times`` calls
    (``None``: until :meth:`heal`)."""

    def __init__(self, target: Any, method: str, times: int | None = None) -> None:
        self.target, self.method, self.times = target, method, times
        self.failed = 0
        self.real = getattr(target, method)
        self._lock = threading.Lock()
        setattr(target, method, self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            failing = self.times is None or self.failed < self.times
            if failing:
                self.failed += 1
        if failing:
            raise StoreUnavailable(f"{self.method}: store unreachable (injected)")
        return self.real(*args, **kwargs)

    def heal(self) -> None:
        """Put the real method back."""
        setattr(self.target, self.method, self.real)


MARK = re.compile(r"</?mark>")


def snippet_is_safe(snippet: str) -> bool:
    """Whether a snippet holds no markup but ``<mark>``/``</mark>`` (everything else escaped)."""
    return "<" not in MARK.sub("", snippet) and ">" not in MARK.sub("", snippet)
