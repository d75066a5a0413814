"""The CPUs a process may use, a container's CPU limit counted, and the ONNX threads that
follow from them (:mod:`ncindex.embedding.cpu_limit`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ncindex.embedding.cpu_limit import limited_cpus, quota_cpus, usable_cpus
from ncindex.embedding.models import install_models

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("200000 100000\n", 2),  # the chart's limit of "2"
        ("150000 100000", 2),  # 1.5 CPUs: rounded up
        ("50000 100000", 1),  # 500m
        ("1000 100000", 1),  # a hundredth of a CPU: still one thread
        ("max 100000\n", None),  # no limit
        ("", None),
        ("200000", None),
        ("-1 100000", None),
        ("0 100000", None),
        ("200000 0", None),
        ("２ 1", None),
    ],
)
def test_quota_cpus_reads_cgroup_v2_cpu_max(text: str, cpus: int | None) -> None:
    assert quota_cpus(text) == cpus


def test_usable_cpus_takes_the_smaller_of_affinity_and_quota(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    assert usable_cpus(cpu_max) == affinity  # no such file: cgroup v1 or none
    cpu_max.write_text("max 100000\n")
    assert usable_cpus(cpu_max) == affinity
    assert limited_cpus(cpu_max) is (None if affinity == os.cpu_count() else affinity)
    cpu_max.write_text("100000 100000\n")
    assert usable_cpus(cpu_max) == 1
    cpu_max.write_text(f"{(affinity + 8) * 100000} 100000\n")  # a quota above the mask
    assert usable_cpus(cpu_max) == affinity


SESSION_THREADS = """
import os, sys
from pathlib import Path
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from ncindex.embedding.embedder import Embedder
from ncindex.settings import Settings
embedder = Embedder(Settings(model_dir=Path(sys.argv[1])))
embedder.load()
print(embedder._dense.model.model.get_session_options().intra_op_num_threads)
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a machine of 2 CPUs or more")
def test_onnx_threads_follow_a_cpuset_when_embed_threads_is_unset(tmp_path: Path) -> None:
    """With ``embed_threads`` unset the model got ``threads=None``: ONNX Runtime sized its
    pool to the host's cores, not to the 1 CPU this process may run on."""
    install_models(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCINDEX_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", SESSION_THREADS, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1"], done.stdout + done.stderr
