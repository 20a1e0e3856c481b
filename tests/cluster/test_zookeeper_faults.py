"""ZooKeeper goes away under a cluster, or is not there yet when a broker starts. These tests
start a ZooKeeper of their own (the session's one is shared by every test)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from client.network import NetworkClient
from protocol.apis import ApiKey
from tests.cluster.conftest import Cluster, free_port, until
from tooling.local.cluster import ZooKeeperServer, ZooKeeperUnavailableError

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper for this test alone, not started; stopped (by PID) at the end -- after
    ``make_cluster``'s brokers when the test asks for this fixture first."""
    server = ZooKeeperServer(tmp_path / "own-zk", port=free_port())
    yield server
    server.stop()


def _add_partitions(bootstrap: str, topic: str, count: int) -> None:
    """CreatePartitions (the admin client has no call for it yet)."""
    network = NetworkClient(bootstrap, client_id="cluster-test")
    try:
        body = network.send(-1, ApiKey.CREATE_PARTITIONS, {
            "topics": [{"name": topic, "count": count, "assignments": None}],
            "timeout_ms": 20_000, "validate_only": False}).result(30)
    finally:
        network.close()
    assert [t["error_code"] for t in body["topics"]] == [0], body


def _start(server: ZooKeeperServer) -> ZooKeeperServer:
    try:
        return server.start()
    except ZooKeeperUnavailableError as exc:
        pytest.fail(f"cluster tests need ZooKeeper: {exc}", pytrace=False)


@pytest.mark.timeout(120)
def test_a_zookeeper_restart_under_a_running_cluster(
    own_zookeeper: ZooKeeperServer, make_cluster: Callable[..., Cluster],
) -> None:
    _start(own_zookeeper)
    cluster = make_cluster(3, zk_connect=f"{own_zookeeper.connect}/odradek")
    cluster.create_topic("before", partitions=3, replication_factor=3)
    sessions = {b: cluster.zk.exists(f"/brokers/ids/{b}").ephemeralOwner for b in range(3)}
    cluster.reset_zk()

    down_at = time.monotonic()
    own_zookeeper.restart()
    downtime = time.monotonic() - down_at

    # every broker reconnects within its session: the same sessions hold the registrations
    def registered_again() -> bool:
        return cluster.registered() == [0, 1, 2] and cluster.controller_id() is not None

    until(registered_again, cluster.failover_bound, "brokers 0, 1, 2 registered again")
    now = {b: cluster.zk.exists(f"/brokers/ids/{b}").ephemeralOwner for b in range(3)}
    print(f"ZooKeeper down for {downtime:.2f} s; sessions kept: "
          f"{sorted(b for b in range(3) if now[b] == sessions[b])} of [0, 1, 2]")
    assert now == sessions, "a broker's session did not survive a short ZooKeeper restart"
    for process in cluster.brokers.values():
        assert process.running
        assert "Traceback" not in process.log_text()

    cluster.wait_ready()
    assert sorted(cluster.metadata(0, ["before"]).topics["before"].partitions) == [0, 1, 2]
    cluster.create_topic("after", partitions=3, replication_factor=3, via=1)
    assert sorted(cluster.assignment("after")) == [0, 1, 2]
    # the controller watches existing topics again too (kazoo forgets every watch when the
    # connection drops): partitions added to one from before the restart get leaders
    _add_partitions(cluster.brokers[cluster.controller_id() or 0].bootstrap, "before", 5)
    cluster.wait_for_leaders("before", 5)
    cluster.stop_all()  # before this test's ZooKeeper goes


@pytest.mark.timeout(90)
def test_a_broker_waits_for_an_unreachable_zookeeper_then_starts(
    own_zookeeper: ZooKeeperServer, make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(1, zk_connect=f"{own_zookeeper.connect}/odradek", start=False,
                           settings={"zookeeper_connection_timeout_ms": 500})
    process = cluster.brokers[0]
    outcome: list[BaseException | None] = []

    def start() -> None:
        try:
            process.start(timeout=60)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    starter = threading.Thread(target=start, daemon=True)
    starter.start()
    try:
        # a clear line each attempt, and no exit in between
        line = process.wait_for_log(r"event='zookeeper\.unreachable'", count=3, timeout=30)
        assert f"connect='{own_zookeeper.connect}/odradek'" in line
        assert "retry_in_s=" in line and "answered within" in line
        assert process.running and process.returncode is None
        assert not outcome, "the broker reported listening without ZooKeeper"
        assert process.log_text().count("--- start:") == 1
        _start(own_zookeeper)
    finally:
        starter.join(70)
    assert outcome == [None], outcome
    assert process.running and process.node_id == 0
    assert cluster.registered() == [0]
    until(lambda: cluster.controller_id() == 0, 10, "broker 0 elected controller")
    assert "Traceback" not in process.log_text()
    cluster.stop_all()  # before this test's ZooKeeper goes
