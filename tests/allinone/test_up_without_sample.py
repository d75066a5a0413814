"""``ncindex up --no-sample`` (``start(..., load_sample=False)`` with no Nextcloud configured)
serves an empty simulator whose accounts exist: the users and app passwords the banner names
sign in, to the search API and to WebDAV, and what they upload is indexed.

It runs in a child process, like ``test_up_serves_mcp``: ``allinone.embedded.start`` makes its
Celery app the process's default and starts a worker and beat."""

from __future__ import annotations

from pathlib import Path

from support import run_scenario

SCENARIO = r"""
import json, sys, time
from pathlib import Path
import httpx
from allinone.embedded import start
from ncindex.redis_server import start_redis
from ncindex.settings import Settings
from ncindex.simulator.sample import SAMPLE_ACCOUNTS
from ncindex.sync.status import settled

tmp = Path(sys.argv[1])
redis_server = start_redis()
settings = Settings(redis_url=redis_server.url, data_dir=tmp, qdrant_path=tmp / "qdrant", port=0,
                    debounce_seconds=0.3)  # not the 2 s default: only the upload's wait
running = start(settings, load_sample=False)
auth = ("alice", SAMPLE_ACCOUNTS["alice"])
try:
    status = httpx.get(running.url + "/v1/status", auth=auth).status_code
    deadline = time.monotonic() + 60  # the start's reconcile pass over: the upload is not its
    keys = running.settings.names
    while not settled(running.services.redis, keys) and time.monotonic() < deadline:
        time.sleep(0.3)
    dav = running.settings.nextcloud_url + "/remote.php/dav/files/alice/kiln.md"
    put = httpx.put(dav, auth=auth, content=b"# Kiln\nFire the stoneware kiln to cone six.")
    found = []
    deadline = time.monotonic() + 60
    while not found and time.monotonic() < deadline:
        time.sleep(0.5)
        answer = httpx.post(running.url + "/v1/search", auth=auth, json={"query": "stoneware kiln"})
        found = [r["path"] for r in answer.json().get("results", [])]
    delivered = sorted({d.status for d in running.simulator.engine.deliveries
                        if "kiln.md" in json.dumps(d.envelope)})
    out = {"status": status, "put": put.status_code, "found": found,
           "sample": running.sample is not None, "delivered": delivered}
finally:
    running.close()
    redis_server.stop()
print("\nRESULT " + json.dumps(out), flush=True)
"""


def test_an_empty_simulator_has_the_accounts_it_names(tmp_path: Path) -> None:
    result = run_scenario(SCENARIO, tmp_path)
    # the upload after the start reached the index by webhook delivery (registered after the
    # users were made), not only by the start's reconcile pass, which was over before it
    assert result == {
        "status": 200, "put": 201, "found": ["/kiln.md"], "sample": False, "delivered": [202],
    }  # fmt: skip
