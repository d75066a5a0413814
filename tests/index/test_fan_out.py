"""A tag event on more files than the receiver sends itself (``FAN_OUT``) is answered at once
and handed to ``ncindex.send_actions`` tasks; the worker sends the files' tasks and every file
ends up indexed — the whole stack on real parts."""

from __future__ import annotations

from pipeline_support import post_envelope

from ncindex.ingest.queueing import FAN_OUT
from support import Stack, tag_envelope


def test_a_tag_event_on_many_files_fans_out_and_indexes_them_all(stack: Stack) -> None:
    stack.sim.drop_rate = 1.0  # only the tag event below announces these files
    count = FAN_OUT * 2 + 7
    ids = [
        stack.sim.put_file("alice", f"/Bulk/log-{i:03}.md", f"Bulk log {i}: buoy {i} checked.")
        for i in range(count)
    ]
    response = post_envelope(stack, tag_envelope(*ids))
    assert response.status_code == 202
    assert response.json() == {"queued": count, "coalesced": 0}
    stack.wait_idle(120)
    missing = [i for i in ids if not stack.points(f"file:{i}")]
    assert missing == []
