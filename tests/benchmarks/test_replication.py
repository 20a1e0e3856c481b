"""The replication benchmark: its pieces that need no processes (``ss`` parsing, CPU
accounting, the failover timeline from broker logs), and one tiny real run (3 brokers, a
ZooKeeper, 2 s sessions) through the suite's script runner."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks import replication, run
from benchmarks.areas import run_script

SS = """\
0      0       127.0.0.1:51000      127.0.0.1:9001 users:(("python",pid=11,fd=9))
\t cubic wscale:7,7 rto:204 segs_out:40 segs_in:40 data_segs_out:37 data_segs_in:36 x
0      0       127.0.0.1:9001       127.0.0.1:51000 users:(("python",pid=12,fd=10))
\t cubic wscale:7,7 rto:204 data_segs_out:36 data_segs_in:37
0      0       127.0.0.1:52000      127.0.0.1:9001 users:(("python",pid=99,fd=3))
\t cubic data_segs_out:500
0      0       127.0.0.1:53000      127.0.0.1:9002 users:(("python",pid=12,fd=11))
\t cubic data_segs_out:5
"""


def test_the_replication_area_is_registered() -> None:
    (area,) = run.select(["replication"])
    assert area.name == "replication"


def test_broker_to_broker_requests_are_the_outgoing_segments_of_brokers() -> None:
    found = replication.parse_ss(SS, {11: 1, 12: 2}, {9001, 9002})
    # the accepted side (local port a broker's) and a client's socket (pid 99) are left out
    assert found == {(1, "127.0.0.1:51000", "127.0.0.1:9001"): 37,
                     (2, "127.0.0.1:53000", "127.0.0.1:9002"): 5}


def test_where_time_goes_splits_the_cpu_seconds() -> None:
    key = (1, "a", "b")
    before = replication.Usage(10.0, {0: 1.0, 1: 2.0}, 5.0, 0.5, 100.0, 1000.0, {key: 10})
    after = replication.Usage(12.0, {0: 2.0, 1: 3.5}, 6.0, 0.6, 104.0, 1004.0, {key: 210})
    line = replication.where_time_goes(before, after, messages=100_000, replicas=3)
    assert line["broker_cpu_s"] == {"0": 1.0, "1": 1.5}
    assert line["client_cpu_s"] == 1.0 and line["zookeeper_cpu_s"] == 0.1
    assert line["others_cpu_s"] == 0.4  # 4 s busy, 3.6 s of it ours
    assert line["cores_busy"] == 2.0 and line["client_busy"] == 0.5
    assert line["broker_cpu_us_per_msg"] == 25.0
    assert line["broker_to_broker_requests_per_s"] == 100
    assert line["msgs_per_follower_fetch"] == 1000.0  # 2 followers x 100,000 / 200


def test_the_limit_is_the_producer_thread_or_the_cores_or_neither() -> None:
    assert replication.limit({"client_busy": 0.95, "cores_busy": 1.99}, 2) == "the producer thread"
    assert replication.limit({"client_busy": 0.7, "cores_busy": 1.9}, 2) == "the 2 cores"
    assert replication.limit({"client_busy": 0.3, "cores_busy": 0.8}, 2) == "waiting"


def test_the_failover_timeline_comes_from_the_logs(tmp_path: Path) -> None:
    controller = tmp_path / "broker-0.log"
    follower = tmp_path / "broker-2.log"
    controller.write_text(
        "timestamp='2030-01-01T00:00:01.000000Z' level='info' event='controller.brokers_changed'"
        " dead=[1] came=[] bounced=[] live=[0, 2]\n"  # before the kill: another one
        "timestamp='2030-01-01T00:00:06.000000Z' level='info' event='controller.brokers_changed'"
        " dead=[1] came=[] bounced=[] live=[0, 2]\n"
        "timestamp='2030-01-01T00:00:06.010000Z' level='info' event='controller.state_change' "
        "topic='t' partition=10 trigger='leader elected' leader=2\n"
        "timestamp='2030-01-01T00:00:06.020000Z' level='info' event='controller.state_change' "
        "topic='t' partition=1 trigger='leader elected' leader=2\n")
    follower.write_text(
        "timestamp='2030-01-01T00:00:06.500000Z' level='info' event='log.leader_epoch.assigned'"
        f" path='{tmp_path / 't-1' / 'leader-epoch-checkpoint'}' epoch=1 start_offset=4\n")
    killed = 1893456002.0  # 2030-01-01T00:00:02Z
    timeline = replication.failover_timeline(controller, follower, "t", 1, 1, killed)
    assert timeline == {"dead_noticed_ms": 4000.0, "leader_elected_ms": 4020.0,
                        "follower_copied_ms": 4500.0}


@pytest.mark.integration
@pytest.mark.cluster
@pytest.mark.timeout(150)
def test_a_tiny_run_prints_every_line() -> None:
    session_ms = 2000
    lines = list(run_script([sys.executable, "-m", "benchmarks.replication",
                             "--messages", "3000", "--rounds", "2", "--latency-seconds", "0.3",
                             "--session-timeout-ms", str(session_ms)], time_limit=140))
    missing = [line for line in lines if line.get("status") == "missing"]
    if missing:
        pytest.fail(f"the replication benchmark needs ZooKeeper: {missing[0]['reason']}",
                    pytrace=False)
    benches = [line["bench"] for line in lines]
    assert benches == ["producer"] * 3 + ["replication_cost"] + ["latency"] * 3 + [
        "leader_failover_acks_all"]
    producers, cost, latencies, failover = lines[:3], lines[3], lines[4:7], lines[7]
    assert [p["config"] for p in producers] == ["rf1_acks1", "rf3_acks1", "rf3_acks_all"]
    assert all(p["messages"] == 3000 and p["rounds"] == 2 for p in producers)
    assert all(p["msgs_per_s"] == max(p["msgs_per_s_rounds"]) for p in producers)
    assert producers[0]["ratio"] == 1.0
    assert cost["ratio"] == producers[2]["ratio"] and cost["kafka"]["ratio"] == 0.51
    # followers copy: their requests are counted, there are none with RF 1
    assert producers[0]["where_time_goes"]["broker_to_broker_requests_per_s"] == 0
    assert producers[2]["where_time_goes"]["broker_to_broker_requests_per_s"] > 0
    assert all(line["messages"] == line["sent"] == 300 for line in latencies)
    assert all(line["p50_ms"] <= line["p99_ms"] for line in latencies)
    # a kill is noticed only when the ZooKeeper session expires (a floor a slow machine cannot
    # go below); acks=all needs the new ISR, without the old leader
    assert failover["zookeeper_session_timeout_ms"] == session_ms
    assert failover["zk_detection_window_ms"] == "1333-4000"
    assert failover["acks_1_time_ms"] >= session_ms * 2 / 3
    assert failover["acks_all_time_ms"] >= session_ms * 2 / 3
    assert failover["new_leader"] != failover["old_leader"]
    assert failover["old_leader"] not in failover["isr_after"]
    assert all(line["peak_rss_mb"] > 10 for line in lines)
