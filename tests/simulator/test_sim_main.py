"""``python -m ncindex.simulator``: the simulator served on its own, for a deployment pointed
at it as at a Nextcloud (there was no way to start it but ``ncindex up``'s sample, or Python)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def test_serves_under_a_web_root_with_its_users_and_takes_admin_statements() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ncindex.simulator",
            "--web-root",
            "/nextcloud",
            "--user",
            "alice:alice-app-pw",
            "--user",
            "carol:carol-app-pw:carol@example.org",
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        first = proc.stdout.readline()
        assert first.startswith("Nextcloud simulator 33.0.2 at http://127.0.0.1:"), first
        url = first.rsplit(" ", 1)[1].strip()
        assert url.endswith("/nextcloud")
        status = httpx.get(f"{url}/status.php").json()
        assert status["installed"] is True and status["versionstring"] == "33.0.2"
        assert httpx.get(url.removesuffix("/nextcloud") + "/status.php").status_code == 404
        ocs = f"{url}/ocs/v2.php/cloud/user?format=json"
        headers = {"OCS-APIRequest": "true"}
        carol = httpx.get(ocs, auth=("carol@example.org", "carol-app-pw"), headers=headers)
        assert carol.json()["ocs"]["data"]["id"] == "carol"
        assert httpx.get(ocs, auth=("carol", "carol-app-pw"), headers=headers).status_code == 401
        assert httpx.get(ocs, auth=("alice", "alice-app-pw"), headers=headers).status_code == 200
        proc.stdin.write('sim.delete_user("alice")\n')
        proc.stdin.flush()
        for _ in range(100):
            gone = httpx.get(ocs, auth=("alice", "alice-app-pw"), headers=headers)
            if gone.status_code == 401:
                break
        assert gone.status_code == 401
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def test_a_user_without_a_password_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ncindex.simulator", "--user", "alice"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--user" in done.stderr
