"""pyproject.toml ships every folder of data inside a package as a package of its own: a
folder shipped only as another package's data made setuptools warn "Package '…' is absent
from the packages configuration" on the first ``make run`` (its ``pip install -e``)."""

from __future__ import annotations

import tomllib

from support import ROOT


def test_every_data_folder_of_a_package_is_a_listed_package() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = pyproject["tool"]["setuptools"]
    packages = set(setuptools["packages"])
    folders = {
        ".".join(folder.relative_to(ROOT).parts)
        for package in packages
        for folder in (ROOT / package.replace(".", "/")).iterdir()
        if folder.is_dir() and folder.name.isidentifier() and folder.name != "__pycache__"
    }
    assert folders - packages == set()
    data = setuptools["package-data"]
    # each data folder declares its own files, not as "folder/*" of the package above it
    assert not [p for files in data.values() for p in files if "/" in p], data
    assert {"ncindex.simulator.data.formats", "search_api.pages", "search_api.static"} <= set(data)
