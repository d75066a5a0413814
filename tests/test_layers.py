"""The import contracts (``[tool.importlinter]`` in pyproject.toml, run by ``lint-imports`` in
``make test``) name every part of the library, so a module added later cannot escape them."""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path

import ncindex

ROOT = Path(__file__).resolve().parents[1]


def contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["name"]: c for c in config["contracts"]}


def test_the_simulator_contract_names_every_other_part_of_the_library() -> None:
    parts = {f"ncindex.{m.name}" for m in pkgutil.iter_modules(ncindex.__path__)}
    (simulator,) = (
        c for c in contracts().values() if "ncindex.simulator" in c.get("forbidden_modules", [])
    )
    sources = {s for s in simulator["source_modules"] if s.startswith("ncindex.")}
    assert sources == parts - {"ncindex.simulator", "ncindex.testing"}
