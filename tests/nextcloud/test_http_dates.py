"""HTTP dates as Unix seconds for any year Nextcloud writes (ncindex.nextcloud.http_dates)."""

from __future__ import annotations

import httpx
import pytest

from ncindex.nextcloud.client import NextcloudClient
from ncindex.nextcloud.http_dates import http_date_seconds
from ncindex.simulator import NextcloudSimulator, serve_simulator
from ncindex.simulator.xmlutil import http_date

FAR = 300_000_000_000  # Unix seconds: 15 August 11476, an mtime Nextcloud accepts (> one day)


@pytest.mark.parametrize(
    "seconds", [86_401, 1_767_225_600, 253_402_300_799, 253_402_300_800, FAR, -9_460_800_000]
)
def test_the_date_sabre_writes_is_read_back(seconds: int) -> None:
    # the simulator's writer counts days its own way (civil_from_days), as PHP's Y does
    assert http_date_seconds(http_date(seconds)) == seconds


def test_the_obsolete_forms_and_a_bad_date() -> None:
    for form in ("Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT"):
        assert http_date_seconds(form) == 784_111_777
    assert http_date_seconds("Sun, 06 Nov 1994 10:49:37 +0200") == 784_111_777
    with pytest.raises(ValueError, match="not an HTTP date"):
        http_date_seconds("yesterday")
    for impossible in ("Tue, 31 Feb 2026 00:00:00 GMT", "Tue, 06 Jan 2026 25:00:00 GMT"):
        with pytest.raises(ValueError):
            http_date_seconds(impossible)


def test_a_file_dated_after_9999_does_not_break_its_folder_listing() -> None:
    """Sabre writes the year in full, and ``parsedate_to_datetime`` raised on it, so the
    listing of the whole folder failed as a protocol error."""
    sim = NextcloudSimulator()
    sim.add_user("alice", "alice-pw", "Alice")
    far = sim.put_file("alice", "/Docs/far.md", b"# Far\n", mtime=FAR)
    sim.put_file("alice", "/Docs/near.md", b"# Near\n", mtime=1_767_225_600)
    try:
        with serve_simulator(sim) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
            entries = NextcloudClient.for_account(http, "alice", "alice-pw").propfind("/Docs", 1)
    finally:
        sim.close()
    dated = {e.path: e.modified_at for e in entries[1:]}
    assert dated == {"/Docs/far.md": FAR, "/Docs/near.md": 1_767_225_600}
    assert far in {e.file_id for e in entries}
