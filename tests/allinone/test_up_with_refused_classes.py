"""``ncindex up`` against a Nextcloud that refuses some event classes, or fails to register
one (a 500), starts with the rest and says what is missing and what it costs.

It runs in a child process: ``allinone.embedded.start`` makes its Celery app the process's
default and starts a worker and beat that must not leak into the other tests."""

from __future__ import annotations

from pathlib import Path

from support import run_scenario

SCENARIO = r"""
import json, sys
from pathlib import Path
from pydantic import SecretStr
from structlog.testing import capture_logs
from allinone.embedded import start
from ncindex.redis_server import start_redis
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator

tmp = Path(sys.argv[1])
sim = NextcloudSimulator(version="31.0.9")  # no tag events before 32
sim.add_user("admin", "admin-pw", "Admin", admin=True)
server = serve_simulator(sim)
redis_server = start_redis()
settings = Settings(
    nextcloud_url=server.url,
    accounts={"admin": SecretStr("admin-pw")},
    webhook_secret=SecretStr("s3cret"),
    redis_url=redis_server.url,
    data_dir=tmp,
    qdrant_path=tmp / "qdrant",
    port=0,
)
sim.faults.set("ocs", status=500, times=1, method="POST")  # the first registration
with capture_logs() as logs:
    running = start(settings, load_sample=False)
try:
    out = {
        "refused": [o.event_class for o in running.webhooks.refused],
        "lines": running.webhooks.missing_lines(),
        "registered": sorted(r.event for r in sim.registry.list()),
        "failed": [f.event_class for f in running.webhooks.failed],
        "logged": [e for e in logs if e["event"] == "webhook_failed"],
    }
finally:
    running.close()
    server.close(close_simulator=True)
    redis_server.stop()
print("\nRESULT " + json.dumps(out), flush=True)
"""


def test_up_starts_with_what_it_could_register_and_says_what_is_missing(tmp_path: Path) -> None:
    """A class whose registration answered 500 stopped ``ncindex up`` from starting at all:
    it is logged (``webhook_failed``) and the rest registered, as a refused class is."""
    result = run_scenario(SCENARIO, tmp_path)
    assert result["refused"] == [
        "OCP\\SystemTag\\TagAssignedEvent",
        "OCP\\SystemTag\\TagUnassignedEvent",
    ]
    assert all("tag changes are found by the scan only" in line for line in result["lines"])
    assert "OCA\\Files_Trashbin\\Events\\NodeRestoredEvent" in result["registered"]
    assert "OCP\\Files\\Events\\Node\\NodeWrittenEvent" in result["registered"]
    # the first class registered (nextcloud/server WebhooksController::create: OCS 500)
    (failed,) = result["failed"]
    assert failed not in result["registered"]
    (logged,) = result["logged"]
    assert logged["action"] == "register" and logged["log_level"] == "warning"
    assert logged["detail"].startswith(f"{failed} not registered: ")
