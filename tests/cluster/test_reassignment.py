"""Partition reassignment (Kafka's kafka-reassign-partitions): the new replicas are added and
catch up, the old ones go once the new ones are in sync, and nothing acknowledged is lost on the
way -- under a producer, and through `odradek topics reassign`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from client.admin import Admin
from client.consumer import Consumer
from client.producer import Producer
from client.records import TopicPartition
from tests.cluster.conftest import Cluster, until

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
