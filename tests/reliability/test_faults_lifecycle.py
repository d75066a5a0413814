"""Lifecycle faults on real parts: access taken away while a task that read a document before
the change writes after it."""

from __future__ import annotations

from typing import Any

import pytest

from support import Stack


@pytest.mark.parametrize("batch", [False, True], ids=["index_node", "index_nodes"])
def test_a_share_revoked_while_a_metadata_update_is_in_flight_is_not_written_back(
    fresh_stack: Stack, batch: bool
) -> None:
    """Bob's task for a file newly shared with him finds its text unchanged (a metadata-only
    update: his access and path are added, no embedding). Alice revokes the share after the
    task read the file and before it writes: the write must not leave bob in the ``acl``
    (before: he stayed there until his next scan and its grace period, the task never looked
    again, as it does after writing a new version)."""
    stack = fresh_stack
    stack.sim.drop_rate = 1.0  # the indexer is driven by hand here
    indexer = stack.celery.ncindex_indexer  # type: ignore[attr-defined]
    fid = stack.sim.put_file("alice", "/Shared/plan.txt", b"Rebuild the stone bridge in June.")
    assert indexer.index_node("alice", fid).action == "indexed"
    stack.sim.share("alice", "/Shared/plan.txt", "bob")
    real_fetch = indexer.steps.fetch
    revoked: list[bool] = []

    def fetch_then_revoke(*args: Any, **kwargs: Any) -> Any:
        fetched = real_fetch(*args, **kwargs)
        if not revoked:  # bob's read is done: the share goes before his write
            revoked.append(stack.sim.unshare("alice", "/Shared/plan.txt", "bob"))
        return fetched

    indexer.steps.fetch = fetch_then_revoke  # type: ignore[method-assign]
    try:
        if batch:
            outcome = indexer.index_nodes("bob", [fid]).outcomes[fid]
        else:
            outcome = indexer.index_node("bob", fid)
    finally:
        indexer.steps.fetch = real_fetch  # type: ignore[method-assign]
    assert revoked == [True]
    payload = stack.points(f"file:{fid}")[0].payload
    assert payload["acl"] == ["user:alice"], (outcome, payload["acl"])
    assert payload["paths"] == {"alice": "/Shared/plan.txt"}
    assert outcome.action == "evicted"
