"""``ncindex up`` that cannot start says which setting is at fault and leaves nothing running:
before, a port in use or an unknown host ended the process with werkzeug's lines alone
("Address already in use", "Name or service not known") and left the private redis-server it
had started running, its parent gone."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from allinone import embedded
from ncindex.redis_server import RedisProcess
from ncindex.settings import Settings

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
