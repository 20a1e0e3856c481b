"""The scale benchmark (``python -m benchmarks.scale``): registered as an area, and one small
real run -- 200 groups of 10 members, 100 of them rebalancing, 2 topics of 20 partitions --
through the suite's script runner."""

from __future__ import annotations

import sys

import pytest

from benchmarks import run
from benchmarks.areas import run_script


def test_the_scale_area_is_registered() -> None:
    (area,) = run.select(["scale"])
    assert area.name == "scale"


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_small_run_prints_the_groups_and_partitions_lines() -> None:
    groups, partitions = run_script(
        [sys.executable, "-m", "benchmarks.scale", "--quick", "--groups", "200", "--rebalancing",
         "100", "--topics", "2", "--partitions", "20", "--messages", "2000"], time_limit=110)
    assert groups["bench"] == "scale_groups"
    assert (groups["groups"], groups["members"], groups["connections"]) == (200, 2000, 20)
    assert groups["rebalancing"] == 100
    assert groups["heartbeats_per_s"] > 0 and groups["rebalancing_heartbeats"] > 0
    assert groups["heartbeat_p50_ms"] <= groups["heartbeat_p99_ms"]
    assert groups["coordinator_bytes_per_member"] is not None
    assert partitions["bench"] == "scale_partitions"
    assert (partitions["partitions"], partitions["messages"]) == (40, 2000)
    assert partitions["startup_time_s"] > 0 and partitions["msgs_per_s"] > 0
