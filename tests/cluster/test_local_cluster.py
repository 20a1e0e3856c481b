"""The client/tooling side of a local cluster: ``ZooKeeperServer``, the session's ``zookeeper``
and ``zk_connect`` fixtures, the status counts (tooling.cluster_health), ``LocalCluster``'s
refusal to touch processes it did not start, and ``odradek cluster up / status / down`` end
to end (that last one waits for the broker's cluster mode: it skips, saying so, until
``broker start`` accepts ``--zookeeper-connect``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from client.metadata import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
from protocol.errors import ErrorCode
from tests.broker_process import REPO_ROOT, BrokerProcess
from tests.kafka_probe import assert_kafka_listener
from tooling.cli import main as cli
from tooling.cli.cluster import health_json
from tooling.cluster_health import cluster_health
from tooling.local.cluster import (
    BrokerRecord,
    ClusterRecord,
    LocalCluster,
    LocalClusterError,
    RecordedProcess,
    ZooKeeperRecord,
    ZooKeeperServer,
    ZooKeeperUnavailableError,
    find_java,
    four_letter_word,
    process_cmdline,
    with_chroot,
)

# kazoo warns when a chroot does not exist yet; here that is the point (brokers create it).
NO_CHROOT_WARNING = pytest.mark.filterwarnings("ignore:No chroot path exists:UserWarning")


def until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``condition`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def kazoo(connect: str) -> Iterator[KazooClient]:
    client = KazooClient(hosts=connect, timeout=10)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """The CLI in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        code = cli.main(argv)
    finally:
        sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------------- ZooKeeperServer


@pytest.mark.cluster
def test_zookeeper_serves_znodes_and_stops_by_pid(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk").start()
    try:
        assert server.port not in (0, 2181)
        assert server.connect == f"127.0.0.1:{server.port}"
        assert "Mode: standalone" in four_letter_word(server.port, "srvr")
        assert process_cmdline(server.pid) == server.process.cmdline
        with kazoo(server.connect) as zk:
            zk.create("/hello", b"world")
            assert zk.get("/hello")[0] == b"world"
        pid = server.pid
    finally:
        status = server.stop()
    assert status is not None and not server.running
    assert process_cmdline(pid) is None
    assert four_letter_word(server.port, "srvr", timeout=0.5) == ""
    assert "clientPortAddress=127.0.0.1" in server.config_path.read_text()


@pytest.mark.cluster
def test_zookeeper_restart_keeps_port_and_data_after_a_crash(tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path / "zk") as server:
        port, first_pid = server.port, server.pid
        with kazoo(server.connect) as zk:
            zk.create("/kept", b"1", makepath=True)
        server.kill()
        assert not server.running
        server.restart()
        assert server.port == port and server.pid != first_pid
        with kazoo(server.connect) as zk:
            assert zk.get("/kept")[0] == b"1"
    assert not server.running


def test_missing_zookeeper_says_how_to_install(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk", jar=tmp_path / "no-zookeeper.jar")
    with pytest.raises(ZooKeeperUnavailableError, match="apt-get install zookeeper"):
        server.start()
    assert not server.running


def test_java_is_found_through_java_home_then_path(tmp_path: Path) -> None:
    with pytest.raises(ZooKeeperUnavailableError, match="Java"):
        find_java({"PATH": str(tmp_path)})
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    assert find_java({"JAVA_HOME": str(tmp_path / "jdk"), "PATH": ""}) == str(java)
    assert find_java({"PATH": str(java.parent)}) == str(java)


# ----------------------------------------------------------------------- session fixtures


@pytest.mark.cluster
@NO_CHROOT_WARNING
def test_each_test_gets_its_own_chroot_in_the_shared_zookeeper(
    zookeeper: ZooKeeperServer, zk_connect: str
) -> None:
    assert zk_connect.startswith(f"127.0.0.1:{zookeeper.port}/t-")
    assert zookeeper.port != 2181
    chroot = zk_connect.partition("/")[2]
    with kazoo(zk_connect) as zk:
        zk.create("/brokers/ids/0", b"{}", makepath=True, ephemeral=True)
        with kazoo(zookeeper.connect) as root:
            assert root.exists(f"/{chroot}/brokers/ids/0") is not None
            assert root.exists("/brokers") is None
        with kazoo(f"{zookeeper.connect}/t-other-{chroot}") as other:
            assert other.exists("/brokers/ids/0") is None


@pytest.mark.cluster
@NO_CHROOT_WARNING
def test_the_session_zookeeper_allows_short_sessions(zk_connect: str) -> None:
    """A 1.5 s session is granted as asked (minSessionTimeout is low), so tests can see a
    dead broker's ephemeral node go quickly."""
    client = KazooClient(hosts=zk_connect, timeout=1.5)
    client.start(timeout=10)
    try:
        assert client._session_timeout == 1500  # kazoo keeps the negotiated timeout here
    finally:
        client.stop()
        client.close()


# -------------------------------------------------------------------------- status counts


def _metadata(partitions: list[PartitionInfo], brokers: tuple[int, ...] = (1, 2, 3),
              controller: int = 1) -> ClusterMetadata:
    topics: dict[str, dict[int, PartitionInfo]] = {}
    for p in partitions:
        topics.setdefault(p.topic, {})[p.partition] = p
    return ClusterMetadata(
        "cluster-x",
        controller,
        {b: BrokerInfo(b, "127.0.0.1", 9000 + b) for b in brokers},
        {
            name: TopicInfo(name, ErrorCode.NONE, name.startswith("__"), parts)
            for name, parts in topics.items()
        },
    )


def test_a_healthy_cluster_counts_nothing() -> None:
    health = cluster_health(_metadata([
        PartitionInfo("t", 0, 1, (1, 2, 3), (1, 2, 3)),
        PartitionInfo("t", 1, 2, (2, 3, 1), (3, 2, 1)),  # ISR order does not matter
        PartitionInfo("__consumer_offsets", 0, 3, (3, 1, 2), (3, 1, 2)),
    ]))
    assert (health.offline_partitions, health.under_replicated_partitions,
            health.preferred_leader_imbalance) == (0, 0, 0)
    assert health.healthy and health.absent_replicas == ()
    assert [(p.topic, p.partition) for p in health.partitions] == [
        ("__consumer_offsets", 0), ("t", 0), ("t", 1)
    ]
    assert [b.node_id for b in health.brokers] == [1, 2, 3]


def test_offline_under_replicated_and_imbalanced_partitions_are_counted() -> None:
    health = cluster_health(_metadata(
        [
            PartitionInfo("a", 0, -1, (3, 1), (), ErrorCode.LEADER_NOT_AVAILABLE),  # no leader
            PartitionInfo("a", 1, 1, (1, 2, 3), (1, 2)),  # ISR shrank
            PartitionInfo("a", 2, 2, (1, 2, 3), (1, 2, 3)),  # leader not the first replica
            PartitionInfo("b", 0, 4, (4, 1), (4,)),  # leader 4 is not a live broker
            PartitionInfo("b", 1, 2, (2,), (2,)),  # RF 1, fine
        ],
        brokers=(1, 2, 3),
    ))
    flags = {(p.topic, p.partition): (p.offline, p.under_replicated, p.preferred_leader)
             for p in health.partitions}
    assert flags == {
        ("a", 0): (True, True, False),
        ("a", 1): (False, True, True),
        ("a", 2): (False, False, False),
        ("b", 0): (True, True, True),
        ("b", 1): (False, False, True),
    }
    assert health.offline_partitions == 2
    assert health.under_replicated_partitions == 3
    assert health.preferred_leader_imbalance == 2  # a-0 (offline, as Kafka counts) and a-2
    assert health.absent_replicas == (4,)
    assert not health.healthy


def test_an_empty_cluster_and_the_json_form() -> None:
    health = cluster_health(ClusterMetadata())
    assert health_json(health) == {
        "cluster_id": None, "controller_id": -1, "brokers": [], "partitions": [],
        "offline_partitions": 0, "under_replicated_partitions": 0,
        "preferred_leader_imbalance": 0, "absent_replicas": [],
    }
    one = health_json(cluster_health(_metadata([PartitionInfo("t", 0, 1, (1, 2), (1,))])),
                      {1: "127.0.0.1:9101"})
    assert one["brokers"][0] == {"node_id": 1, "host": "127.0.0.1", "port": 9001,
                                 "kafka_address": "127.0.0.1:9101", "controller": True}
    assert [b["kafka_address"] for b in one["brokers"]] == ["127.0.0.1:9101", None, None]
    assert one["partitions"] == [{
        "topic": "t", "partition": 0, "leader": 1, "replicas": [1, 2], "isr": [1],
        "offline": False, "under_replicated": True, "preferred_leader": True,
    }]


# ------------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize("action", [[], ["up"], ["down"], ["status"]], ids=" ".join)
def test_cluster_commands_have_help(action: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["cluster", *action, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: odradek cluster")
    if action:
        assert "--json" in out


def test_status_bootstrap_and_dir_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["cluster", "status", "--bootstrap", "127.0.0.1:1", "--dir", "x"])
    assert exit_info.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def test_status_and_down_of_a_directory_without_a_cluster_fail_in_one_line(
    tmp_path: Path,
) -> None:
    for action in ("status", "down"):
        code, out, err = run_cli(["cluster", action, "--dir", str(tmp_path)])
        assert code == 1 and out == ""
        assert err == f"odradek: error: no cluster recorded in {tmp_path / 'cluster.json'}\n"


@pytest.mark.integration
def test_status_of_a_single_embedded_broker(broker: BrokerProcess) -> None:
    """Without ZooKeeper a broker is its own controller and leads everything: all healthy."""
    code, _, err = run_cli(["topics", "create", "s", "--partitions", "2",
                            "--bootstrap", broker.bootstrap])
    assert code == 0, err
    code, out, err = run_cli(["cluster", "status", "--bootstrap", broker.bootstrap, "--json"])
    assert code == 0, err
    status = json.loads(out)
    assert status["brokers"] == [{"node_id": broker.node_id, "host": "127.0.0.1",
                                  "port": broker.port, "kafka_address": None,
                                  "controller": True}]
    assert status["controller_id"] == broker.node_id
    mine = [(p["partition"], p["leader"], p["replicas"], p["isr"])
            for p in status["partitions"] if p["topic"] == "s"]
    node = broker.node_id
    assert mine == [(0, node, [node], [node]), (1, node, [node], [node])]
    assert (status["offline_partitions"], status["under_replicated_partitions"],
            status["preferred_leader_imbalance"]) == (0, 0, 0)

    code, out, err = run_cli(["cluster", "status", "--bootstrap", broker.bootstrap])
    assert code == 0, err
    for heading in ("brokers of cluster", "controller", "partitions", "under-replicated"):
        assert heading in out


# --------------------------------------------------------- LocalCluster: whose processes


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A process this test starts and stops itself: a stand-in for "anything at all"."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


def _record(directory: Path, process: RecordedProcess) -> None:
    record = ClusterRecord("127.0.0.1:1/odradek", process, None, ())
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cluster.json").write_text(json.dumps(record.to_json()))


def test_down_leaves_alone_a_recorded_pid_that_runs_another_program(
    tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    _record(tmp_path, RecordedProcess(bystander.pid, ("java", "something", "else")))
    code, out, err = run_cli(["cluster", "down", "--dir", str(tmp_path), "--json"])
    assert code == 0, err
    assert json.loads(out) == [
        {"process": "zookeeper", "pid": bystander.pid, "outcome": "not ours"}
    ]
    assert bystander.poll() is None
    assert not (tmp_path / "cluster.json").exists()


def test_up_refuses_a_directory_whose_cluster_runs_and_down_stops_it(
    tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    cmdline = process_cmdline(bystander.pid)
    assert cmdline is not None
    _record(tmp_path, RecordedProcess(bystander.pid, cmdline))
    with pytest.raises(LocalClusterError, match="already has a running cluster"):
        LocalCluster(tmp_path).up(1)
    assert not (tmp_path / "zookeeper").exists() and not (tmp_path / "broker-0").exists()
    assert LocalCluster(tmp_path).down() == [("zookeeper", bystander.pid, "stopped")]
    bystander.wait(10)  # its status went to down's waitpid: down reaps the children it stops
    assert process_cmdline(bystander.pid) is None


def test_record_round_trips_and_chroots() -> None:
    assert with_chroot("127.0.0.1:2181") == "127.0.0.1:2181/odradek"
    assert with_chroot("a:1,b:2/mine") == "a:1,b:2/mine"
    record = ClusterRecord("127.0.0.1:5/odradek", None, None, ())
    assert ClusterRecord.from_json(record.to_json()) == record
    assert record.to_json()["zookeeper"] == {"connect": "127.0.0.1:5/odradek",
                                             "started_here": False}


def test_record_keeps_each_brokers_kafka_address_and_reads_older_records() -> None:
    brokers = tuple(
        BrokerRecord(n, "127.0.0.1", 9000 + n, None, f"d{n}", f"l{n}", f"o{n}",
                     RecordedProcess(100 + n, ("python", "-m", "broker")),
                     kafka_address=f"127.0.0.1:{9100 + n}")
        for n in (0, 1)
    )
    record = ClusterRecord("127.0.0.1:5/odradek", None, None, brokers)
    data = record.to_json()
    assert data["kafka_bootstrap"] == "127.0.0.1:9100,127.0.0.1:9101"
    assert [b["kafka_address"] for b in data["brokers"]] == ["127.0.0.1:9100", "127.0.0.1:9101"]
    assert ClusterRecord.from_json(data) == record
    # a record written before brokers had Kafka listeners: the same brokers, no Kafka address
    for b in data["brokers"]:
        del b["kafka_address"]
    del data["kafka_bootstrap"]
    older = ClusterRecord.from_json(data)
    assert [b.kafka_address for b in older.brokers] == [None, None]
    assert older.bootstrap == record.bootstrap and older.kafka_bootstrap == ""


def test_record_keeps_every_server_of_an_ensemble_and_down_stops_them_after_the_brokers(
) -> None:
    servers = tuple(
        ZooKeeperRecord(n, 2180 + n, f"zk-{n}.log", RecordedProcess(200 + n, ("java", str(n))))
        for n in (1, 2, 3)
    )
    broker = BrokerRecord(0, "127.0.0.1", 9000, None, "d", "l", "o",
                          RecordedProcess(100, ("python", "-m", "broker")))
    record = ClusterRecord("127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183/odradek", None, None,
                           (broker,), servers)
    data = record.to_json()
    assert data["zookeeper"]["started_here"] and "pid" not in data["zookeeper"]
    assert [(z["id"], z["port"], z["pid"]) for z in data["zookeeper"]["servers"]] == [
        (1, 2181, 201), (2, 2182, 202), (3, 2183, 203)]
    assert ClusterRecord.from_json(json.loads(json.dumps(data))) == record
    assert [name for name, _ in record.processes()] == [
        "broker 0", "zookeeper 1", "zookeeper 2", "zookeeper 3"]


def test_up_refuses_an_ensemble_beside_a_zookeeper_to_use(tmp_path: Path) -> None:
    with pytest.raises(LocalClusterError, match="exclude each other"):
        LocalCluster(tmp_path).up(1, zookeeper="127.0.0.1:5", zookeepers=3)
    with pytest.raises(LocalClusterError, match="at least one ZooKeeper server"):
        LocalCluster(tmp_path).up(1, zookeepers=0)


def _processes_using(path: Path) -> list[int]:
    """PIDs whose command line names ``path`` (this test's own directory)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmdline = process_cmdline(int(entry.name))
            if cmdline and any(str(path) in arg for arg in cmdline):
                pids.append(int(entry.name))
    return pids


@pytest.mark.cluster
def test_a_failed_up_stops_what_it_started(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, broker_args=["--no-such-flag"], start_timeout=30)
    try:
        with pytest.raises(LocalClusterError, match=r"broker \d exited before listening") as info:
            cluster.up(2)
        assert "--no-such-flag" in str(info.value)  # the broker log's tail, with its complaint
        assert not cluster.record_path.exists()
        assert (tmp_path / "zookeeper" / "zookeeper.log").exists()
        assert _processes_using(tmp_path) == []
    finally:
        for pid in _processes_using(tmp_path):  # only if the assertion above failed
            os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------- end to end: needs cluster mode


def _odradek(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    return subprocess.run(
        [sys.executable, "-m", "tooling.cli", *args],
        capture_output=True, text=True, timeout=90, cwd=REPO_ROOT, env=env,
    )


@pytest.mark.cluster
@pytest.mark.integration
@pytest.mark.timeout(240)
def test_cluster_up_status_down_end_to_end(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    try:
        up = _odradek("cluster", "up", "--brokers", "3", "--rack-count", "2",
                      "--dir", str(directory), "--json")
        assert up.returncode == 0, up.stderr
        started = json.loads(up.stdout)
        assert [(b["id"], b["rack"]) for b in started["brokers"]] == [
            (0, "rack-0"), (1, "rack-1"), (2, "rack-0")
        ]
        assert started["zookeeper"]["started_here"]
        assert started["zookeeper"]["connect"].endswith("/odradek")
        bootstrap = started["bootstrap"]
        assert len(bootstrap.split(",")) == 3
        # each broker's Kafka-protocol listener, on a port of its own, answering ApiVersions
        kafka = {b["id"]: b["kafka_address"] for b in started["brokers"]}
        assert started["kafka_bootstrap"] == ",".join(kafka[n] for n in (0, 1, 2))
        assert len(set(kafka.values()) | set(bootstrap.split(","))) == 6
        for address in kafka.values():
            assert_kafka_listener(address)

        again = _odradek("cluster", "up", "--dir", str(directory))
        assert again.returncode == 1 and "already has a running cluster" in again.stderr

        def status() -> dict[str, Any]:
            result = _odradek("cluster", "status", "--dir", str(directory), "--json")
            assert result.returncode == 0, result.stderr
            parsed: dict[str, Any] = json.loads(result.stdout)
            return parsed

        def all_brokers_and_a_controller() -> dict[str, Any] | None:
            s = status()
            ids = {b["node_id"] for b in s["brokers"]}
            return s if ids == {0, 1, 2} and s["controller_id"] in ids else None

        until(all_brokers_and_a_controller, 60, "3 live brokers and a controller")
        created = _odradek("topics", "create", "replicated", "--partitions", "3",
                           "--replication-factor", "3", "--bootstrap", bootstrap)
        assert created.returncode == 0, created.stderr

        def fully_replicated() -> dict[str, Any] | None:
            s = status()
            mine = [p for p in s["partitions"] if p["topic"] == "replicated"]
            ok = len(mine) == 3 and all(
                len(p["replicas"]) == 3 and sorted(p["isr"]) == sorted(p["replicas"])
                for p in mine
            )
            return s if ok and s["offline_partitions"] == 0 else None

        final = until(fully_replicated, 60, "topic 'replicated' with 3 replicas all in sync")
        assert final["under_replicated_partitions"] == 0
        assert sum(b["controller"] for b in final["brokers"]) == 1
        assert {b["node_id"]: b["kafka_address"] for b in final["brokers"]} == kafka
        table = _odradek("cluster", "status", "--dir", str(directory))
        assert table.returncode == 0 and "replicated" in table.stdout
        assert "kafka address" in table.stdout
        assert all(address in table.stdout for address in kafka.values()), table.stdout

        down = _odradek("cluster", "down", "--dir", str(directory), "--json")
        assert down.returncode == 0, down.stderr
        outcomes = {d["process"]: d["outcome"] for d in json.loads(down.stdout)}
        assert outcomes == {"broker 2": "stopped", "broker 1": "stopped",
                            "broker 0": "stopped", "zookeeper": "stopped"}
        pids = [b["pid"] for b in started["brokers"]] + [started["zookeeper"]["pid"]]
        assert all(process_cmdline(pid) is None for pid in pids)
    finally:
        if (directory / "cluster.json").exists():
            LocalCluster(directory).down()
        for log in sorted(directory.glob("broker-*.log")):  # shown when the test failed
            print(f"===== {log.name} =====\n{log.read_text(errors='replace')[-4000:]}")


@pytest.mark.cluster
@pytest.mark.integration
@pytest.mark.timeout(120)
def test_cluster_up_with_a_zookeeper_ensemble_status_and_down(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    try:
        up = _odradek("cluster", "up", "--brokers", "2", "--zookeepers", "3",
                      "--dir", str(directory), "--json")
        assert up.returncode == 0, up.stderr
        started = json.loads(up.stdout)
        servers = started["zookeeper"]["servers"]
        assert [z["id"] for z in servers] == [1, 2, 3]
        hosts = ",".join(f"127.0.0.1:{z['port']}" for z in servers)
        assert started["zookeeper"]["connect"] == f"{hosts}/odradek"
        assert all(process_cmdline(z["pid"]) == tuple(z["cmdline"]) for z in servers)

        def ensemble_status() -> dict[str, Any] | None:
            result = _odradek("cluster", "status", "--dir", str(directory), "--json")
            assert result.returncode == 0, result.stderr
            s: dict[str, Any] = json.loads(result.stdout)
            return s if {b["node_id"] for b in s["brokers"]} == {0, 1} else None

        status = until(ensemble_status, 60, "2 live brokers")
        modes = sorted(z["mode"] for z in status["zookeeper_servers"])
        assert modes == ["follower", "follower", "leader"], status["zookeeper_servers"]

        down = _odradek("cluster", "down", "--dir", str(directory), "--json")
        assert down.returncode == 0, down.stderr
        assert [d["process"] for d in json.loads(down.stdout)] == [
            "broker 1", "broker 0", "zookeeper 1", "zookeeper 2", "zookeeper 3"]
        assert {d["outcome"] for d in json.loads(down.stdout)} == {"stopped"}
        assert all(process_cmdline(z["pid"]) is None for z in servers)
    finally:
        if (directory / "cluster.json").exists():
            LocalCluster(directory).down()
