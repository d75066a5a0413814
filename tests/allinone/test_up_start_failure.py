"""``ncindex up`` that cannot start says which setting is at fault and leaves nothing running:
before, a port in use or an unknown host ended the process with werkzeug's lines alone
("Address already in use", "Name or service not known"), and that or a Nextcloud refusing the
webhook registration left the private redis-server it had started running, its parent gone."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from allinone import embedded
from ncindex.redis_server import RedisProcess
from ncindex.settings import Settings
from support import run_scenario

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server")


def test_a_port_in_use_is_named_and_the_private_redis_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[RedisProcess] = []

    def start_redis() -> RedisProcess:
        process = real_start_redis()
        started.append(process)
        return process

    real_start_redis = embedded.start_redis
    monkeypatch.setattr(embedded, "start_redis", start_redis)
    try:
        with socket.create_server(("127.0.0.1", 0)) as busy:
            port = busy.getsockname()[1]
            settings = Settings(
                redis_url="redis://127.0.0.1:9/0",  # nothing answers: a private one is started
                data_dir=tmp_path,
                port=port,
            )
            said = rf"cannot listen on 127.0.0.1:{port} \(NCINDEX_HOST, NCINDEX_PORT\)"
            with pytest.raises(ValueError, match=said):
                embedded.start(settings, load_sample=False)
        (private,) = started
        assert private.process.poll() is not None  # stopped, not left behind
    finally:
        for process in started:
            process.stop()


SCENARIO = r"""
import json, sys
from pathlib import Path
from allinone import embedded
from ncindex.redis_server import free_port
from ncindex.settings import Settings

tmp = Path(sys.argv[1])
started = []
real_start_redis = embedded.start_redis

def start_redis():
    process = real_start_redis()
    started.append(process)
    return process

embedded.start_redis = start_redis
settings = Settings(
    redis_url="redis://127.0.0.1:9/0",  # nothing answers: a private one is started
    nextcloud_url=f"http://127.0.0.1:{free_port()}",  # nor here: the registration fails
    accounts={"alice": "pw"},
    webhook_secret="s3cret",
    data_dir=tmp,
    qdrant_path=tmp / "qdrant",
    port=0,
)
try:
    embedded.start(settings, load_sample=False)
    error = None
except Exception as exc:
    error = type(exc).__name__
out = {"error": error, "stopped": [p.process.poll() is not None for p in started]}
for process in started:
    process.stop()
print("\nRESULT " + json.dumps(out), flush=True)
"""


def test_a_start_that_fails_after_the_worker_started_stops_everything(
    tmp_path: Path, model_dir: Path
) -> None:
    """Nextcloud unreachable at the webhook registration: the worker, beat and HTTP port had
    started, and the private redis-server was left running when the process ended."""
    result = run_scenario(SCENARIO, tmp_path)
    assert result == {"error": "NextcloudUnavailable", "stopped": [True]}
