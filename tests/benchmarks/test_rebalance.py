"""The rebalance benchmark (``python -m benchmarks.rebalance``): registered as an area, its
figures computed from deliveries as documented, its counts turned into measurements the aims
read, and one small real run (4 members, eager and static) through the suite's script runner:
a static member's restart and a static rolling restart rebalance nothing, an eager one stops
every partition."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from benchmarks import aims, rebalance, run
from benchmarks.areas import run_script
from benchmarks.measurements import Measurement, join, normalise

EVENT_FIELDS = {
    "bench", "members", "partitions", "protocol", "strategy", "rate_per_s", "session_timeout_ms",
    "heartbeat_interval_ms", "down_ms", "rebalances", "partitions_paused", "unmoved_partitions",
    "unmoved_max_pause_ms", "steady_p99_gap_ms", "ratio_unmoved_pause_to_steady_p99",
    "throughput_dip_pct", "time_to_stable_ms", "kafka_classic_floor_ms",
}
ROLLING_FIELDS = {
    "bench", "members", "partitions", "protocol", "strategy", "rate_per_s", "session_timeout_ms",
    "heartbeat_interval_ms", "down_ms", "restarted", "rebalances", "partitions_paused",
    "total_time_ms", "unmoved_max_pause_ms", "kafka_classic_floor_ms",
}


def test_the_rebalance_area_is_registered() -> None:
    (area,) = run.select(["rebalance"])
    assert area.name == "rebalance"


def test_a_pause_is_the_gap_between_deliveries_up_to_the_window_s_end() -> None:
    times = [1.0, 1.1, 1.2, 2.0, 2.1]  # reported out of order by two hosts: sorted first
    assert rebalance.gaps_within([2.1, 1.0, 1.2, 1.1, 2.0], 1.15, 3.0) == pytest.approx(
        [0.1, 0.8, 0.1, 0.9])  # the last: nothing delivered from 2.1 to the window's end
    assert max(rebalance.gaps_within(times, 0.0, 1.5)) == pytest.approx(0.3)  # open at 1.5


def test_unmoved_partitions_keep_their_owner_and_are_not_the_restarted_member_s() -> None:
    before = {0: (0, 0), 1: (0, 0), 2: (1, 0), 3: (2, 0), 4: (2, 0)}
    after = {0: (0, 1), 1: (1, 0), 2: (1, 0), 3: (2, 0), 4: (1, 0)}
    assert rebalance.unmoved_partitions(before, after, restarted=0) == [2, 3]
    static = {0: (0, 1), 1: (0, 1), 2: (1, 0), 3: (2, 0), 4: (2, 0)}
    assert rebalance.unmoved_partitions(before, static, restarted=0) == [2, 3, 4]


def test_the_dip_is_the_slowest_whole_bucket_against_the_steady_mean() -> None:
    rec = rebalance.Recorded()
    for bucket, count in enumerate([100, 100, 100, 100, 100, 25, 100, 100]):
        rec.buckets[bucket] = count
    width = rebalance.BUCKET_S
    # steady: buckets 1-3 (whole ones within 0.5 .. 4.5 widths); event: buckets 5-6
    assert rebalance.throughput_dip_pct(rec, (0.5 * width, 4.5 * width), 4.5 * width,
                                        7.5 * width) == 75.0


def _line(protocol: str, rolling: bool = False, **figures: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "bench": "rebalance_rolling" if rolling else "rebalance", "members": 10,
        "partitions": 60, "protocol": protocol, "strategy": "sticky", "rate_per_s": 2000,
        "session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "down_ms": 1000,
        "kafka_classic_floor_ms": 7001.2, "partitions_paused": 6, **figures}
    return line


def _measurements(*lines: dict[str, Any]) -> list[Measurement]:
    found: list[Measurement] = []
    for line in lines:
        for raw in rebalance.as_measurements(line):
            item = normalise("rebalance", raw)
            assert isinstance(item, list)
            found += item
    return join(found)


def test_counts_the_dip_and_the_floor_become_measurements_with_stable_parameters() -> None:
    measured = _measurements(_line("eager", rebalances=2, unmoved_partitions=51,
                                   throughput_dip_pct=12.5, time_to_stable_ms=1093.8,
                                   ratio_unmoved_pause_to_steady_p99=None))
    found = {m.name: (m.value, m.unit) for m in measured}
    assert found == {
        "rebalance.rebalances": (2, "rebalances"),
        "rebalance.partitions_paused": (6, "partitions"),
        "rebalance.unmoved_partitions": (51, "partitions"),
        "rebalance.throughput_dip_pct": (12.5, "%"),
        "rebalance.kafka_classic_floor_ms": (7001.2, "ms"),
        "rebalance.time_to_stable_ms": (1093.8, "ms"),
    }  # a ratio that could not be taken is left out
    # --compare matches lines by their parameters: only the settings of the case
    assert {tuple(sorted(m.params)) for m in measured} == {(
        "down_ms", "heartbeat_interval_ms", "members", "partitions", "protocol", "rate_per_s",
        "session_timeout_ms", "strategy")}


def _rebalance_outcomes(lines: list[Measurement]) -> list[aims.Outcome]:
    return [o for o in aims.evaluate(lines) if o.aim.figures[0].area == "rebalance"]


def test_the_aims_read_incremental_s_pause_and_static_s_rolling_restart() -> None:
    lines = _measurements(
        _line("eager", ratio_unmoved_pause_to_steady_p99=5.0, unmoved_max_pause_ms=250.0),
        _line("incremental", ratio_unmoved_pause_to_steady_p99=1.5, unmoved_max_pause_ms=75.0,
              steady_p99_gap_ms=50.0),
        _line("eager", rolling=True, rebalances=20, restarted=10),
        _line("static", rolling=True, rebalances=0, restarted=10),
    )
    pause, static = _rebalance_outcomes(lines)
    assert [r.value for r in pause.readings] == [1.5]  # the incremental line, not eager's
    assert pause.reached == aims.YES
    assert "pause ms 75" in pause.readings[0].text
    assert [r.value for r in static.readings] == [0]
    assert static.reached == aims.YES
    moved = _measurements(_line("static", rolling=True, rebalances=3, restarted=10))
    assert _rebalance_outcomes(moved)[1].reached == aims.NO


def test_the_aims_are_not_measured_without_the_area() -> None:
    assert {o.reached for o in _rebalance_outcomes([])} == {aims.NOT_MEASURED}


@pytest.mark.integration
@pytest.mark.timeout(150)
def test_a_small_run_static_restarts_rebalance_nothing_eager_ones_stop_everything() -> None:
    members = 4
    lines = list(run_script(
        [sys.executable, "-m", "benchmarks.rebalance", "--quick", "--members", str(members),
         "--protocol", "eager", "--protocol", "static"], time_limit=140))
    assert [(line["bench"], line["protocol"]) for line in lines] == [
        ("rebalance", "eager"), ("rebalance_rolling", "eager"),
        ("rebalance", "static"), ("rebalance_rolling", "static")]
    eager, eager_rolling, static, static_rolling = lines
    for line in (eager, static):
        assert line.keys() - {"peak_rss_mb"} == EVENT_FIELDS
    for line in (eager_rolling, static_rolling):
        assert line.keys() - {"peak_rss_mb"} == ROLLING_FIELDS
        assert line["restarted"] == members
    partitions = eager["partitions"]
    share = partitions // members  # sticky: each member owns as many
    # a static member's restart: its own partitions stop, nobody else's; no new generation
    assert static["rebalances"] == 0 and static_rolling["rebalances"] == 0
    assert static["partitions_paused"] == share
    assert static["unmoved_partitions"] == partitions - share
    assert static_rolling["partitions_paused"] == partitions  # each member's own, once
    # an eager restart rebalances, and every member let go of every partition it had
    assert eager["rebalances"] >= 1 and eager_rolling["rebalances"] >= members
    assert eager["partitions_paused"] >= partitions
    for line in lines:
        for key in ("unmoved_max_pause_ms", "time_to_stable_ms", "steady_p99_gap_ms",
                    "total_time_ms", "kafka_classic_floor_ms"):
            if key in line:
                assert isinstance(line[key], float) and line[key] >= 0, (key, line[key])
    names = {m.name for m in _measurements(*lines)}
    assert names >= {"rebalance.rebalances", "rebalance.partitions_paused",
                     "rebalance_rolling.rebalances", "rebalance_rolling.restarted"}
