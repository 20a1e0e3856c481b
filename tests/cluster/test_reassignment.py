"""Partition reassignment (Kafka's kafka-reassign-partitions): the new replicas are added and
catch up, the old ones go once the new ones are in sync, and nothing acknowledged is lost on the
way -- under a producer, and through `odradek topics reassign`."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from broker.cluster import zk_layout as zk
from broker.cluster.controller import Controller
from broker.cluster.zookeeper import ZooKeeper
from broker.settings import BrokerSettings
from client.admin import Admin
from client.consumer import Consumer
from client.producer import Producer
from client.records import TopicPartition
from tests.cluster.conftest import Cluster, until
from tests.cluster.lone_controller import fenced_write

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def read_all(bootstrap: str, topic: str, partition: int, end: int) -> list[bytes]:
    consumer = Consumer(bootstrap, auto_offset_reset="earliest")
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        values: list[bytes] = []
        until(lambda: values.extend(r.value or b"" for r in consumer.poll(200)) or
              len(values) >= end, 30, f"{end} records of {topic}-{partition}")
        return values
    finally:
        consumer.close()


@pytest.mark.timeout(120)
def test_a_partition_moves_to_three_new_brokers_under_load_with_no_loss(
    make_cluster: Callable[..., Cluster], tmp_path: Path,
) -> None:
    cluster = make_cluster(6)
    cluster.create_topic("moving", partitions=1, replication_factor=3)
    old = cluster.assignment("moving")[0]
    new = [b for b in range(6) if b not in old]
    bootstrap = cluster.brokers[new[0]].bootstrap
    acknowledged: list[bytes] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def produce() -> None:
        with Producer(bootstrap, acks="all", linger_ms=1, retries=1000,
                      delivery_timeout_ms=60_000) as producer:
            seq = 0
            while not stop.is_set():
                value = f"m{seq}".encode()
                future = producer.send("moving", value=value, partition=0)
                producer.flush()
                try:
                    future.result(30)
                    acknowledged.append(value)
                except Exception as exc:  # counted: the test fails on any
                    failures.append(exc)
                seq += 1

    sender = threading.Thread(target=produce)
    sender.start()
    try:
        until(lambda: len(acknowledged) >= 200, 30, "200 acknowledged sends before the move")
        with Admin(bootstrap) as admin:
            admin.reassign_partitions({("moving", 0): new})
        until(lambda: cluster.assignment("moving")[0] == new
              and set(cluster.state("moving", 0)["isr"]) == set(new),
              60, f"moving-0 reassigned to {new} with all of them in sync")
        count = len(acknowledged)
        until(lambda: len(acknowledged) >= count + 100, 30, "sends acknowledged after the move")
    finally:
        stop.set()
        sender.join(60)
    assert not failures, failures[:3]
    assert cluster.state("moving", 0)["leader"] in new
    values = read_all(bootstrap, "moving", 0, len(acknowledged))
    lost = set(acknowledged) - set(values)
    print(f"reassignment: acknowledged={len(acknowledged)} lost={len(lost)} "
          f"duplicates={len(values) - len(set(values))}")
    assert not lost
    for broker_id in old:  # the old replicas' logs are deleted
        until(lambda b=broker_id: not (cluster.brokers[b].data_dir / "moving-0").exists(),
              20, f"the old replica on broker {broker_id} deleted")


@pytest.mark.timeout(90)
def test_the_cli_moves_a_partition_and_reports_progress(
    make_cluster: Callable[..., Cluster],
) -> None:
    from tooling.cli import main as cli

    cluster = make_cluster(3)
    cluster.create_topic("cli-moving", partitions=1, replication_factor=1)
    (old,) = cluster.assignment("cli-moving")[0]
    target = [b for b in range(3) if b != old]
    bootstrap = cluster.brokers[target[0]].bootstrap
    args = ["topics", "reassign", "cli-moving", "--partition", "0",
            "--replicas", ",".join(map(str, target)), "--bootstrap", bootstrap]
    assert cli.main(args) == 0
    assert cluster.assignment("cli-moving")[0] == target
    bad = ["topics", "reassign", "cli-moving", "--partition", "0", "--replicas", "0,0",
           "--bootstrap", bootstrap]
    assert cli.main(bad) == 1


# --------------------------------------------------------------- fencing, one controller alone

def _closed_port() -> int:
    """A loopback port nobody listens on: the registered brokers' address."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _lay_out_partition(client: KazooClient, topic: str) -> None:
    """A topic with one partition on broker 0, and brokers 0 and 1 registered (ephemeral nodes
    of ``client``'s session), so a move to broker 1 is one the controller accepts."""
    for path in zk.PERSISTENT_PATHS:
        client.ensure_path(path)
    client.create(zk.topic_path(topic), zk.encode_assignment({0: [0]}))
    client.create(zk.state_path(topic, 0), zk.LeaderIsr(0, 0, (0,), 1).encode(), makepath=True)
    client.create(zk.topic_config_path(topic), zk.encode_topic_config({}))
    port = _closed_port()
    for broker_id in (0, 1):
        client.create(zk.broker_path(broker_id),
                      zk.BrokerRegistration(broker_id, "127.0.0.1", port).encode(),
                      ephemeral=True)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("replaced", [False, True], ids=["current", "replaced"])
def test_only_the_current_controller_saves_the_reassignments(
    zk_connect: str, tmp_path: Path, replaced: bool,
) -> None:
    """A reassignment is saved to /admin/reassign_partitions (a new controller resumes it from
    there) under the controller-epoch check of every controller write: once another controller
    was elected, the old one writes nothing there, fails with NotControllerAnyMore and steps
    down."""
    topic = "fenced-move"
    tp = TopicPartition(topic, 0)
    settings = BrokerSettings(data_dir=str(tmp_path), zookeeper_connect=zk_connect,
                              auto_leader_rebalance_enable=False)

    async def write(controller: Controller) -> None:
        assert await controller.reassign([(tp, [1])]) == {tp: None}

    async def check(zoo: ZooKeeper, _: None) -> None:
        if not replaced:
            data, _stat = await zoo.call(zoo.kazoo.get, zk.REASSIGN_PARTITIONS)
            assert zk.decode_reassignments(data) == {(topic, 0): (1,)}
            return
        assert await zoo.call(zoo.kazoo.exists, zk.REASSIGN_PARTITIONS) is None
        data, _stat = await zoo.call(zoo.kazoo.get, zk.topic_path(topic))
        assert zk.decode_assignment(topic, data) == {0: (0,)}

    fenced_write(settings, lambda client: _lay_out_partition(client, topic), write, check,
                 replaced=replaced)
