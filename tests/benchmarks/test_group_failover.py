"""The coordinator failover benchmark (``python -m benchmarks.group failover``): registered as
an area, and one small real run -- 3 brokers, a ZooKeeper, 2 groups of 2 members, 2 s
sessions, a Catch-up of 50,000 records -- through the suite's script runner."""

from __future__ import annotations

import sys

import pytest

from benchmarks import run
from benchmarks.areas import run_script


def test_the_group_failover_area_is_registered() -> None:
    (area,) = run.select(["group_failover"])
    assert area.name == "group_failover"


@pytest.mark.integration
@pytest.mark.cluster
@pytest.mark.timeout(150)
def test_a_small_run_prints_kill_sigterm_and_catch_up_lines() -> None:
    session_ms = 2000
    lines = list(run_script([sys.executable, "-m", "benchmarks.group", "failover", "--groups",
                             "2", "--members", "2", "--records", "50000",
                             "--session-timeout-ms", str(session_ms)], time_limit=140))
    missing = [line for line in lines if line.get("status") == "missing"]
    if missing:
        pytest.fail(f"the failover benchmark needs ZooKeeper: {missing[0]['reason']}",
                    pytrace=False)
    kill, term, catch_up = lines
    assert (kill["bench"], kill["trigger"]) == ("group_failover", "kill")
    assert (term["bench"], term["trigger"]) == ("group_failover", "sigterm")
    for line in (kill, term):
        assert (line["groups"], line["members_per_group"]) == (2, 2)
        assert line["rebalanced_groups"] == 0  # loaded Steady: nobody had to rejoin
        # every step was seen, after the signal: the members noticed, the controller acted
        # (its log), the offsets partitions started loading at their new leaders (their logs),
        # the members found the new coordinator and were back in their groups
        for step in ("noticed_max_ms", "controller_time_ms", "catch_up_start_max_ms",
                     "rediscovered_max_ms", "failover_time_ms"):
            assert isinstance(line[step], float) and line[step] > 0, (step, line[step])
    # a kill is noticed when the ZooKeeper session expires, at the earliest 2/3 of it after
    # (a floor a slow machine cannot go below)
    assert kill["controller_time_ms"] >= session_ms * 2 / 3
    assert "shutdown_time_ms" in term  # the broker exited by itself after SIGTERM
    assert catch_up["bench"] == "offsets_catch_up"
    assert catch_up["records"] == 50_001  # and the one commit that created the topic
    assert catch_up["catch_up_time_ms"] > 0 and catch_up["records_per_s"] > 0
