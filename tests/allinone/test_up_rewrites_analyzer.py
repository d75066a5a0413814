"""``ncindex up`` started on a store whose points an older BM25 analyzer made queues the
rewrite itself (``allinone.embedded.rewrite_older_analyzer``): ``ncindex doctor`` and
``ncindex status``, which warn about such points elsewhere, cannot read the embedded store
while ``up`` holds it, so an upgraded ``make run`` would otherwise keep them unnoticed.

It runs in a child process, like ``test_up_without_sample``: ``allinone.embedded.start``
makes its Celery app the process's default and starts a worker and beat."""

from __future__ import annotations

from pathlib import Path

from support import UP_BESIDE_A_SIMULATOR, run_scenario

SCENARIO = (
    UP_BESIDE_A_SIMULATOR
    + r"""
import httpx
from ncindex.embedding.analyzer import ANALYZER_VERSION
from ncindex.index.reindex import sample_analyzers

auth = ("admin", "admin-pw")

def wait(check, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    return check()

try:
    running = start(settings, load_sample=False)
    try:
        dav = server.url + "/remote.php/dav/files/admin/kiln.md"
        httpx.put(dav, auth=auth, content=b"# Kiln\nFire the stoneware kiln to cone six.")
        store = running.services.store
        wait(lambda: sum(sample_analyzers(store).values()))
        keys = {p["doc_key"] for p in store.scroll(None, ["doc_key"])}
        for key in keys:  # as an earlier release wrote them
            store.set_payload(key, {"analyzer": "en-3"})
        before = dict(sample_analyzers(store))
    finally:
        running.close()
    running = start(settings, load_sample=False)
    try:
        store = running.services.store
        wait(lambda: set(sample_analyzers(store)) == {ANALYZER_VERSION})
        after = dict(sample_analyzers(store))
    finally:
        running.close()
finally:
    server.close(close_simulator=True)
    redis_server.stop()
print("\nRESULT " + json.dumps({"before": before, "after": after, "current": ANALYZER_VERSION}))
"""
)


def test_up_rewrites_the_points_of_an_older_analyzer(tmp_path: Path) -> None:
    result = run_scenario(SCENARIO, tmp_path)
    assert result["before"] == {"en-3": 1}
    assert result["after"] == {result["current"]: 1}
