"""The index converges on what Nextcloud says, under lost, late and reordered webhooks: a short
seeded run of :mod:`convergence_run` (``make bench-convergence`` runs the long one)."""

from __future__ import annotations

import pytest
from convergence_run import run

from support import Stack


@pytest.mark.parametrize("seed", [17])
def test_a_seeded_random_run_serves_nothing_ineligible_and_converges(
    stack: Stack, seed: int
) -> None:
    outcome = run(stack, seed=seed, operations=120, search_every=8)
    assert outcome.operations == 120 and outcome.searches >= 40
    assert outcome.deliveries_dropped > 0  # the faults were on
    assert outcome.served == []
    assert outcome.mismatches == {}
