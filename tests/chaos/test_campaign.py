"""The short chaos campaign CI runs: a fixed list of seeds, each a run of overlapping faults
on a 3-broker cluster with producers and two consumer groups, checked by tests/chaos/checker.py;
and one seed with every broker and ZooKeeper server on a host of its own (network namespaces,
skipped where they cannot be made).
Every invariant the checker knows must hold; the run's figures (acknowledged messages, lost,
duplicates, faults by kind) are printed. Longer campaigns: ``python -m tests.chaos --seed N
--faults 40`` (docs/reliability.md keeps their table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.campaign import Campaign, Config
from tests.chaos.checker import check
from tests.netns import NetworkUnavailableError, PrivateNetwork

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: the seeds CI runs, each drawing its own schedule of faults
SEEDS = (1, 2)
FAULTS = 6


#: the seed CI runs on distinct hosts
HOSTS_SEED = 21


def _run_and_check(config: Config, run_dir: Path) -> None:
    Campaign(config, run_dir).run()
    report = check(run_dir)
    print(f"\nCHAOS seed {config.seed}{' (hosts)' if config.hosts else ''}: "
          f"{report.to_json()}")
    assert report.ok, report.render()
    assert report.figures["acknowledged"] > 0
    assert sum(report.figures["faults_by_kind"].values()) == config.faults


@pytest.mark.timeout(240)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_short_chaos_run_breaks_no_invariant(seed: int, tmp_path: Path) -> None:
    _run_and_check(Config(seed=seed, faults=FAULTS), tmp_path / f"seed-{seed}")


@pytest.mark.timeout(240)
def test_a_short_chaos_run_on_distinct_hosts_breaks_no_invariant(tmp_path: Path) -> None:
    try:  # can this machine make the hosts? (the run makes its own)
        PrivateNetwork(["probe"]).open().close()
    except NetworkUnavailableError as exc:
        pytest.skip(str(exc))
    _run_and_check(Config(seed=HOSTS_SEED, faults=FAULTS, hosts=True),
                   tmp_path / f"hosts-seed-{HOSTS_SEED}")
