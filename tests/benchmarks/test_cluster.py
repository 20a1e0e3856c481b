"""The cluster availability benchmark: its summary of probe times (no processes), and one small
real run (3 brokers, a ZooKeeper, 3 partitions, 2 s sessions) through the suite's script
runner."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from benchmarks import cluster, run
from benchmarks.areas import run_script


def test_the_cluster_area_is_registered() -> None:
    (area,) = run.select(["cluster"])
    assert area.name == "cluster"


def test_results_give_max_and_median_over_the_led_partitions(tmp_path: Path) -> None:
    victim = cluster.Broker(tmp_path, 1, "127.0.0.1:1/x", 6000)
    probe = cluster.FailoverProbe({0: "127.0.0.1:1", 1: "127.0.0.1:2", 2: "127.0.0.1:3"},
                                  "t", [0, 1, 2], victim)
    try:
        probe.signalled_at = 100.0
        probe.times[0] = cluster.Times(99.99, True, 100.5, 0, 100.4)
        probe.times[1] = cluster.Times(99.99, True, 100.7, 2, 100.6)
        probe.times[2] = cluster.Times(100.8, True, 100.6, 2, 100.6)  # old leader accepted later
        line = probe.results()
        assert probe.new_leaders() == {0: 1, 2: 2}
    finally:
        probe.close()
    assert line["produce_max_ms"] == 700.0 and line["produce_median_ms"] == 600.0
    assert line["metadata_max_ms"] == 600.0 and line["metadata_median_ms"] == 600.0
    assert line["gap_max_ms"] == 710.0 and line["gap_median_ms"] == 510.0
    assert line["overlap_partitions"] == 1


@pytest.mark.integration
@pytest.mark.cluster
@pytest.mark.timeout(150)
def test_a_small_run_prints_the_three_lines(tmp_path: Path) -> None:
    session_ms = 2000
    workdir = tmp_path / "run"
    lines = list(run_script([sys.executable, "-m", "benchmarks.cluster", "--partitions", "3",
                             "--session-timeout-ms", str(session_ms), "--keep", str(workdir)],
                            time_limit=140))
    missing = [line for line in lines if line.get("status") == "missing"]
    if missing:
        pytest.fail(f"the cluster benchmark needs ZooKeeper: {missing[0]['reason']}",
                    pytrace=False)
    kill, term, controller = lines
    assert (kill["bench"], kill["trigger"]) == ("leader_failover", "kill")
    assert (term["bench"], term["trigger"]) == ("leader_failover", "sigterm")
    assert controller["bench"] == "controller_failover"
    # a kill is noticed only when the ZooKeeper session expires: at the earliest a session
    # timeout after the last ping, which may be a third of the timeout old (a floor a slow
    # machine cannot go below)
    assert kill["zk_detection_window_ms"] == "1333-4000"
    assert kill["produce_median_ms"] >= session_ms * 2 / 3
    assert controller["new_controller_time_ms"] >= session_ms * 2 / 3
    assert controller["new_controller"] != controller["old_controller"]
    assert controller["new_epoch"] > controller["old_epoch"]
    assert "topic_create_time_ms" in controller
    # a controlled shutdown hands over before the broker goes: the controller moved every
    # leadership of the broker stopped with SIGTERM, which was told so before it stopped
    logs = "".join(path.read_text(errors="replace") for path in workdir.glob("broker-*.log"))
    assert re.search(r"event='controller\.controlled_shutdown' broker_id=\d+ moved=[1-9]\d* "
                     r"remaining=0", logs)
    assert "event='cluster.controlled_shutdown_done'" in logs
    assert "controlled_shutdown_incomplete" not in logs
    assert all(line["peak_rss_mb"] > 10 for line in lines)
