"""``odradek demo`` from start to end: its own broker, the narration, the cleanup."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.broker_process import REPO_ROOT

pytestmark = pytest.mark.integration


def test_the_demo_narrates_a_rebalance_and_cleans_up(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "tooling.cli", "demo", "--phase-seconds", "0.5"],
        capture_output=True, text=True, timeout=100, env=env, cwd=REPO_ROOT,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    started = re.search(r"broker started in (\S+) \(pid (\d+)\)", out)
    assert started, out
    for member in ("c1", "c2", "c3"):
        assert re.search(rf"{member}\s+Start up & discover coordinator -> Part of a group", out)
    assert "stopping c3" in out and re.search(r"c3\s+Part of a group -> Down", out)
    assert re.search(r"c1\s+Part of a group -> Stopped consumption", out)
    again = out.split("starting c3 again", 1)[1]
    assert re.search(r"group\s+Steady, generation \d+, 3 member\(s\)", again)
    assert "lag" in out and "demo-group" in out  # the describe table at the end
    assert "broker stopped" in out
    # Everything it started is gone: the broker process and its temporary directory.
    assert not os.path.exists(started[1])
    with pytest.raises(ProcessLookupError):
        os.kill(int(started[2]), 0)


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_the_cluster_demo_kills_the_coordinator_and_the_group_moves(tmp_path) -> None:
    """``demo --cluster`` starts its own ZooKeeper and three brokers, kills -9 the broker
    coordinating the group midway and narrates the group moving to the new leader of its
    ``__consumer_offsets`` partition; then tears everything down."""
    from tooling.local.cluster import ZOOKEEPER_JAR, process_cmdline

    if not ZOOKEEPER_JAR.is_file():
        pytest.fail("cluster tests need ZooKeeper: apt-get install zookeeper", pytrace=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "tooling.cli", "demo", "--cluster", "--phase-seconds", "0.5",
         "--zookeeper-session-timeout-ms", "4000"],
        capture_output=True, text=True, timeout=110, env=env, cwd=REPO_ROOT,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    zookeeper = re.search(r"ZooKeeper started in (\S+) \(pid (\d+)\)", out)
    assert zookeeper, out
    brokers = {int(b): int(pid) for b, pid in
               re.findall(r"broker (\d) started \(pid (\d+)\), listening on", out)}
    assert sorted(brokers) == [0, 1, 2]
    coordinated = re.search(r"group 'demo-group' is coordinated by broker (\d) \((\S+)\), the "
                            r"leader of __consumer_offsets partition (\d+)", out)
    assert coordinated, out
    dead = int(coordinated[1])
    assert f"kill -9 broker {dead} (pid {brokers[dead]})" in out
    after = out.split("kill -9 broker", 1)[1]
    # the members lose the coordinator at once (its sockets close), then find the new one
    for member in ("c1", "c2", "c3"):
        assert re.search(rf"{member}\s+Part of a group -> Re-discover coordinator", after)
        found = re.search(rf"{member}\s+Re-discover coordinator -> Part of a group "
                          r"\(coordinator is broker (\d)\)", after)
        assert found and int(found[1]) != dead, after
    answers = re.findall(r"FindCoordinator: broker (\d)", after)
    assert answers and int(answers[-1]) != dead
    moved = re.search(rf"the group moved from broker {dead} to broker (\d) in [\d.]+ s, "
                      r"generation (\d+) unchanged", after)
    assert moved and int(moved[1]) != dead, after
    assert re.search(rf"group\s+Steady, generation {moved[2]}, 3 member\(s\), coordinator "
                     rf"broker {moved[1]}", after)
    # then the usual leave and rejoin, on the new coordinator, and the describe table
    again = after.split("starting c3 again", 1)[1]
    assert re.search(rf"group\s+Steady, generation \d+, 3 member\(s\), coordinator broker "
                     rf"{moved[1]}", again)
    assert "IN-STATE-FOR" in out and f"({moved[1]})" in out.split("group demo-group", 1)[1]
    # everything it started is gone: brokers, ZooKeeper, the temporary directory
    assert f"broker {dead} (pid {brokers[dead]}): not running" in out
    assert "ZooKeeper stopped" in out
    assert not os.path.exists(zookeeper[1])
    for pid in [*brokers.values(), int(zookeeper[2])]:
        # gone, a zombie left to init, or the PID reused by another program
        cmdline = process_cmdline(pid)
        assert cmdline is None or str(tmp_path) not in " ".join(cmdline), (pid, cmdline, out)


@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_sigterm_stops_the_cluster_demo_and_everything_it_started(tmp_path) -> None:
    """SIGTERM in the middle of the failover (Ctrl-C does the same): the consumers, the
    brokers (in sessions of their own, so a terminal's Ctrl-C would not reach them) and
    ZooKeeper are stopped by PID, the temporary directory removed; exit status 143."""
    import signal

    from tooling.local.cluster import ZOOKEEPER_JAR, process_cmdline

    if not ZOOKEEPER_JAR.is_file():
        pytest.fail("cluster tests need ZooKeeper: apt-get install zookeeper", pytrace=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["TMPDIR"] = str(tmp_path)
    demo = subprocess.Popen(
        [sys.executable, "-m", "tooling.cli", "demo", "--cluster", "--phase-seconds", "0.5",
         "--zookeeper-session-timeout-ms", "4000"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO_ROOT,
    )
    try:
        assert demo.stdout is not None
        lines = []
        for line in demo.stdout:
            lines.append(line)
            if "kill -9 broker" in line:
                break
        demo.send_signal(signal.SIGTERM)
        out = "".join(lines) + demo.stdout.read()
        assert demo.wait(60) == 128 + signal.SIGTERM, out
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    pids = [int(pid) for pid in re.findall(r"\(pid (\d+)\)", out)]
    assert len(set(pids)) == 4, out  # ZooKeeper and three brokers
    for pid in pids:  # gone, a zombie left to init, or the PID reused by another program
        cmdline = process_cmdline(pid)
        assert cmdline is None or str(tmp_path) not in " ".join(cmdline), (pid, cmdline, out)
    started = re.search(r"ZooKeeper started in (\S+) ", out)
    assert started and not os.path.exists(started[1])
    assert "ZooKeeper stopped" in out
