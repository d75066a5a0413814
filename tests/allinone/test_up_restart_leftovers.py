"""``ncindex up`` started again over a Redis that kept the first run's state: its simulator's
users exist before its worker takes the tasks left over, and a refusal kept from before ends.

A user restarted ``make run`` in the middle of the first indexing: the worker took the scans
left in Redis before the fresh simulator had its users, so the first got HTTP 401, the webhook
admin's lookup answered "User does not exist", and alice was listed as deleted in Nextcloud
and held back for 30 minutes, the sample never indexed. Here ``ncindex up --no-sample`` (a
subprocess, like ``test_up_stop``) starts over this test's Redis with a scan of alice's files
left on the reconcile queue and a refusal of bob (cause: deleted) kept from the run before.
Before the fix both ended refused: bob's entry stayed, and alice's scan was refused (the users
were added after the worker started and the webhooks were registered).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import redis

from ncindex import names
from ncindex.accounts import Lookup, credential_fingerprint, record_refused
from ncindex.ingest.queueing import celery_app
from ncindex.names import Names
from ncindex.redis_server import free_port
from ncindex.settings import Settings
from ncindex.simulator.sample import SAMPLE_ACCOUNTS
from ncindex.sync.status import settled
from support import ROOT, wait_until

NCINDEX = str(Path(sys.executable).parent / "ncindex")


def test_a_restart_over_leftover_tasks_leaves_the_sample_users_unrefused(
    redis_url: str, model_dir: Path, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    keys = Names("ncindex-up")
    producer = celery_app(Settings(redis_url=redis_url, namespace=keys.namespace))
    try:  # what the interrupted run left: a scan on the queue, a refusal of bob
        producer.send_task(
            names.RECONCILE_SCAN,
            kwargs={"user": "alice", "doc_type": "file"},
            queue=names.RECONCILE,
        )
    finally:
        producer.close()
    record_refused(
        client,
        keys,
        "bob",
        "PROPFIND /remote.php/dav/files/bob: HTTP 401",
        credential=credential_fingerprint("bob", SAMPLE_ACCOUNTS["bob"]),
        lookup=Lookup(answered=True, account=None),  # the admin heard "does not exist"
    )
    assert client.hget(keys.refused_accounts, "bob") is not None
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCINDEX_")} | {
        "PYTHONPATH": str(ROOT),
        "NCINDEX_REDIS_URL": redis_url,
        "NCINDEX_PORT": str(port),
        "NCINDEX_DATA_DIR": str(tmp_path / "data"),
        "NCINDEX_MODEL_DIR": str(model_dir),
        "NCINDEX_LOG_JSON": "true",
    }
    log = tmp_path / "up.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [NCINDEX, "up", "--no-sample"], env=env, cwd=ROOT, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:

        def answers() -> bool:
            assert proc.poll() is None, log.read_text()
            try:
                return httpx.get(f"http://127.0.0.1:{port}/livez", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(answers, 180, interval=0.2)
        wait_until(lambda: '"reconcile_requested"' in log.read_text(), 60, interval=0.2)
        # the start's scans queued after the leftover one: settled, it ran too
        wait_until(lambda: settled(client, keys) and settled(client, keys), 180, interval=0.3)
        refused = {
            user.decode(): json.loads(entry)
            for user, entry in client.hgetall(keys.refused_accounts).items()
        }
        assert "alice" not in refused, refused.get("alice")  # the scan left over: the race
        assert refused == {}, refused  # bob's refusal, kept from the run before
        assert '"account_refused"' not in log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
