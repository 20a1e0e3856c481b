"""A cluster forms: registrations, one controller, the same view from every broker; topics
are placed by CreateTopics and recorded in ZooKeeper as Metadata shows them; a second broker
with a live broker's id refuses to start."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from client.admin import Admin, NewTopic
from protocol.errors import InvalidReplicationFactorError
from tests.broker_process import BrokerProcess, BrokerStartError
from tests.cluster.conftest import Cluster, until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.mark.timeout(90)
def test_three_brokers_form_a_cluster_and_agree(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(3)
    zk = cluster.zk

    assert zk.get_children("/") and zk.exists("/controller") is not None
    controller = cluster.controller_id()
    assert controller in (0, 1, 2)
    assert cluster.controller_epoch() >= 1
    assert zk.exists("/cluster/id") is not None

    assert cluster.registered() == [0, 1, 2]
    for broker_id, process in cluster.brokers.items():
        reg = cluster.json(f"/brokers/ids/{broker_id}")
        assert {"host", "port", "endpoints", "rack", "timestamp", "version"} <= reg.keys(), reg
        assert (reg["host"], reg["port"]) == ("127.0.0.1", process.port)
        assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{process.port}"]
        assert reg["rack"] is None
        assert int(reg["timestamp"]) > 0
        assert process.node_id == broker_id
        assert zk.get(f"/brokers/ids/{broker_id}")[1].ephemeralOwner != 0

    # every broker hears about the whole cluster from the controller (UpdateMetadata)
    def all_agree() -> bool:
        views = [cluster.metadata(i) for i in range(3)]
        return all(sorted(v.brokers) == [0, 1, 2] and v.controller_id == controller
                   for v in views)

    until(all_agree, 15, "every broker's Metadata lists brokers 0, 1, 2 and the controller")
    ports = {b.node_id: b.port for b in cluster.metadata(0).brokers.values()}
    assert ports == {i: p.port for i, p in cluster.brokers.items()}

    cluster.create_topic("t", partitions=4, replication_factor=3, via=(controller + 1) % 3)
    assignment = cluster.assignment("t")
    assert sorted(assignment) == [0, 1, 2, 3]
    states = cluster.states("t")
    for partition, replicas in assignment.items():
        assert sorted(replicas) == [0, 1, 2]
        state = states[partition]
        assert state["leader"] == replicas[0]  # a new partition: its first live replica
        assert sorted(state["isr"]) == [0, 1, 2]
        assert state["leader_epoch"] == 0
        assert state["controller_epoch"] == cluster.controller_epoch()
    for broker_id in range(3):
        topic = cluster.metadata(broker_id, ["t"]).topics["t"]
        assert {p: (i.leader, list(i.replicas), sorted(i.isr))
                for p, i in topic.partitions.items()} == {
            p: (states[p]["leader"], assignment[p], sorted(states[p]["isr"]))
            for p in assignment
        }, f"broker {broker_id}'s Metadata differs from ZooKeeper"


@pytest.mark.timeout(60)
def test_a_duplicate_broker_id_from_another_data_directory_refuses_to_start(
    make_cluster: Callable[..., Cluster], tmp_path: Path,
) -> None:
    cluster = make_cluster(2)
    before = cluster.json("/brokers/ids/1")
    twin = BrokerProcess(tmp_path / "twin-1", broker_id=1, settings=cluster.settings)
    cluster.extra.append(twin)
    with pytest.raises(BrokerStartError):
        twin.start()
    assert twin.returncode == 1
    log = twin.log_text()
    assert "cannot start: broker id 1 is already registered in ZooKeeper by a live broker" \
        in log, log
    assert f"127.0.0.1:{cluster.brokers[1].port}" in log
    assert "another broker_id" in log
    # the live broker keeps its registration
    assert cluster.json("/brokers/ids/1") == before
    assert cluster.brokers[1].running


# -------------------------------------------------------------------------------- placement


@pytest.mark.timeout(60)
def test_a_replication_factor_above_the_live_brokers_is_refused(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(2)
    with Admin(cluster.brokers[0].bootstrap, timeout_ms=10_000) as admin:
        results = admin.create_topics([NewTopic("too-wide", 2, 3), NewTopic("fits", 2, 2)])
    error = results["too-wide"]
    assert isinstance(error, InvalidReplicationFactorError), results
    message = str(error)
    assert "replication factor 3" in message and "live brokers (2)" in message, message
    assert results["fits"] is None
    assert not cluster.zk.exists("/brokers/topics/too-wide")
    cluster.wait_for_leaders("fits", 2)


@pytest.mark.timeout(120)
def test_six_brokers_six_partitions_rf3_spread_evenly(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(6)
    cluster.create_topic("even", partitions=6, replication_factor=3)
    assignment = cluster.assignment("even")
    leaders = Counter(cluster.leaders("even").values())
    replicas = Counter(itertools.chain.from_iterable(assignment.values()))
    assert leaders == {b: 1 for b in range(6)}, assignment
    assert replicas == {b: 3 for b in range(6)}, assignment
    assert all(len(set(r)) == 3 for r in assignment.values())
    topic = cluster.metadata(3, ["even"]).topics["even"]
    assert Counter(p.leader for p in topic.partitions.values()) == {b: 1 for b in range(6)}


@pytest.mark.timeout(90)
def test_replicas_of_each_partition_are_on_distinct_racks(
    make_cluster: Callable[..., Cluster],
) -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    cluster = make_cluster(6, per_broker={b: {"broker_rack": r} for b, r in racks.items()})
    for b, rack in racks.items():
        assert json.loads(cluster.zk.get(f"/brokers/ids/{b}")[0])["rack"] == rack
    cluster.create_topic("racked", partitions=6, replication_factor=3)
    for partition, replicas in cluster.assignment("racked").items():
        assert sorted(racks[b] for b in replicas) == ["a", "b", "c"], (partition, replicas)
