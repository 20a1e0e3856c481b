"""The short chaos campaign CI runs: a fixed list of seeds, each a run of overlapping faults
on a 3-broker cluster with producers and two consumer groups, checked by tests/chaos/checker.py.
Every invariant the checker knows must hold; the run's figures (acknowledged messages, lost,
duplicates, faults by kind) are printed. Longer campaigns: ``python -m tests.chaos --seed N
--faults 40`` (docs/reliability.md keeps their table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.campaign import Campaign, Config
from tests.chaos.checker import check

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: the seeds CI runs, each drawing its own schedule of faults
SEEDS = (1, 2)
FAULTS = 6


@pytest.mark.timeout(240)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_short_chaos_run_breaks_no_invariant(seed: int, tmp_path: Path) -> None:
    run_dir = tmp_path / f"seed-{seed}"
    Campaign(Config(seed=seed, faults=FAULTS), run_dir).run()
    report = check(run_dir)
    print(f"\nCHAOS seed {seed}: {report.to_json()}")
    assert report.ok, report.render()
    assert report.figures["acknowledged"] > 0
    assert sum(report.figures["faults_by_kind"].values()) == FAULTS
