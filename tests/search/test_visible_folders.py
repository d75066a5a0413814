"""The folder list's check against Nextcloud (:func:`ncindex.search.facets.visible_folders`),
as bob's ncindex client to the simulator served over HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ncindex.nextcloud.client import NextcloudClient, make_http
from ncindex.search import facets
from ncindex.settings import Settings
from ncindex.simulator import NextcloudSimulator, serve_simulator


@pytest.fixture
def sim() -> Iterator[NextcloudSimulator]:
    """A simulator with bob."""
    simulator = NextcloudSimulator(delivery_delay=(0.0, 0.0), seed=1)
    simulator.add_user("bob", "bob-pw", "Bob")
    yield simulator
    simulator.close()


@pytest.fixture
def bob(sim: NextcloudSimulator) -> Iterator[NextcloudClient]:
    """Bob's ncindex client to the simulator served over HTTP."""
    with serve_simulator(sim) as server:
        http = make_http(Settings(nextcloud_url=server.url))
        yield NextcloudClient.for_account(http, "bob", "bob-pw")
        http.close()


def test_an_answer_cut_short_by_the_limit_drops_no_folder(
    sim: NextcloudSimulator, bob: NextcloudClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nextcloud counts the searched folder (bob's files) among ``d:nresults`` and leaves it
    out afterwards (``QuerySearchHelper::searchInCaches``, ``Folder::search``), so an answer
    cut short holds one folder fewer than asked for: asked for as many as the limit, it
    would look complete and drop a folder it left out. Bob has three folders."""
    for path in ("/Work/A", "/Work/B"):
        sim.mkdir("bob", path)
    listed = ["/Work", "/Work/A", "/Work/B", "/Work/Gone"]
    monkeypatch.setattr(facets, "FOLDER_SEARCH_LIMIT", 3)
    assert facets.visible_folders(bob, listed) == listed  # perhaps cut short: as indexed
    monkeypatch.setattr(facets, "FOLDER_SEARCH_LIMIT", 4)
    assert facets.visible_folders(bob, listed) == ["/Work", "/Work/A", "/Work/B"]
