"""``odradek demo`` from start to end: its own broker, the narration, the cleanup; and
``scripts/run``, the README's main command, which runs the demo against a broker of its own.
Each says where Kafka's clients connect, and that address answers Kafka's ApiVersions."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.broker_process import REPO_ROOT
from tests.kafka_probe import assert_kafka_listener
from tooling.cli import main as cli

pytestmark = pytest.mark.integration

#: what the demo prints of the messages kcat reads back through the Kafka listener
KCAT_READ = re.compile(r"kcat\s+partition 0, offset 0: key \d+, value message \d+")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["TMPDIR"] = str(tmp_path)
    return env


def _run_probing_kafka(
    argv: Sequence[str], kafka_line: re.Pattern[str], env: dict[str, str], cwd: Path
) -> tuple[int, str, list[str]]:
    """Run ``argv`` to its end (stderr with stdout); each Kafka address a line names (group 1
    of ``kafka_line``) is sent ApiVersions the moment the line is read, while the process that
    printed it still serves. Returns the exit status, the output and the addresses probed."""
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, cwd=cwd)
    lines: list[str] = []
    probed: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            found = kafka_line.search(line)
            if found:
                assert_kafka_listener(found[1])
                probed.append(found[1])
        return proc.wait(30), "".join(lines), probed
    finally:
        if proc.poll() is None:  # the assertion above failed: stop it, by its PID
            proc.kill()
            proc.wait()


def test_kafka_bootstrap_goes_with_bootstrap(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's own brokers get a Kafka listener of their own; naming one is for a broker
    given with --bootstrap only, and nothing is started when it is misused."""
    assert cli.main(["demo", "--kafka-bootstrap", "127.0.0.1:1"]) == 1
    assert "--kafka-bootstrap goes with --bootstrap" in capsys.readouterr().err


def test_the_demo_narrates_a_rebalance_and_cleans_up(tmp_path) -> None:
    status, out, probed = _run_probing_kafka(
        [sys.executable, "-m", "tooling.cli", "demo", "--phase-seconds", "0.5"],
        re.compile(r"broker started in .*; Kafka clients: (127\.0\.0\.1:\d+)$"),
        _env(tmp_path), REPO_ROOT,
    )
    assert status == 0, out
    started = re.search(r"broker started in (\S+) \(pid (\d+)\), listening on "
                        r"127\.0\.0\.1:(\d+); Kafka clients: 127\.0\.0\.1:(\d+)", out)
    assert started, out
    assert len(probed) == 1 and started[4] != started[3], out
    if shutil.which("kcat"):  # its reading of the topic, through the Kafka listener
        assert KCAT_READ.search(out), out
    for member in ("c1", "c2", "c3"):
        assert re.search(rf"{member}\s+Start up & discover coordinator -> Part of a group", out)
    assert "stopping c3" in out and re.search(r"c3\s+Part of a group -> Down", out)
    # incremental rebalancing: the members that stay keep consuming while they rejoin
    assert re.search(r"c1\s+Part of a group -> Rejoining while consuming", out)
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
    status, out, probed = _run_probing_kafka(
        [sys.executable, "-m", "tooling.cli", "demo", "--cluster", "--phase-seconds", "0.5",
         "--zookeeper-session-timeout-ms", "4000"],
        re.compile(r"broker \d started .*; Kafka clients: (127\.0\.0\.1:\d+)$"),
        _env(tmp_path), REPO_ROOT,
    )
    assert status == 0, out
    zookeeper = re.search(r"ZooKeeper started in (\S+) \(pid (\d+)\)", out)
    assert zookeeper, out
    brokers = {int(b): int(pid) for b, pid in
               re.findall(r"broker (\d) started \(pid (\d+)\), listening on", out)}
    assert sorted(brokers) == [0, 1, 2]
    assert len(set(probed)) == 3, out  # a Kafka listener of each broker's own, answering
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
    if shutil.which("kcat"):  # the surviving brokers' Kafka listeners serve the topic
        assert KCAT_READ.search(after), out
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


@pytest.mark.timeout(150)
def test_scripts_run_starts_a_broker_with_a_kafka_listener_and_runs_the_demo(
    tmp_path: Path,
) -> None:
    """``scripts/run --demo-only`` in a copy whose ``_venv.sh`` only puts this interpreter's
    ``odradek`` on PATH (the real one would install into the repository's .venv). Its broker
    takes the Kafka listener a ``--config`` names (a free port here) instead of 127.0.0.1:9093,
    prints where Kafka's clients connect, hands that to the demo, and stops after it."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    shutil.copy(REPO_ROOT / "scripts" / "run", scripts / "run")
    (scripts / "_venv.sh").write_text(
        'cd "$(dirname "${BASH_SOURCE[0]}")/.."\n'
        f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:\"$PATH\"\n"
    )
    config = tmp_path / "broker.toml"
    config.write_text('kafka_listeners = "PLAINTEXT://127.0.0.1:0"\n'
                      f'data_dir = "{tmp_path / "data"}"\n')
    status, out, probed = _run_probing_kafka(
        ["bash", str(scripts / "run"), "--demo-only", "--port", "0", "--config", str(config)],
        re.compile(r"^Kafka clients \(kcat, librdkafka, kafka-python, kafkajs\): "
                   r"(127\.0\.0\.1:\d+)$"),
        _env(tmp_path), tmp_path,
    )
    assert status == 0, out
    listening = re.search(r"^odradek broker \d+ listening on 127\.0\.0\.1:(\d+) \(log: "
                          r"\./odradek-broker\.log\)$", out, re.MULTILINE)
    assert listening, out
    assert len(probed) == 1 and not probed[0].endswith((":0", ":9093")), out
    assert "Kafka clients" in out.splitlines()[out.splitlines().index(listening[0]) + 1]
    assert "broker started" not in out  # the demo used the script's broker
    assert "demo-group" in out and "produced" in out
    if shutil.which("kcat"):  # the demo was told the Kafka listener, and read through it
        assert KCAT_READ.search(out), out
    assert (tmp_path / "odradek-broker.log").exists()
