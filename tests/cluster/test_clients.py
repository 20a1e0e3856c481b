"""Clients against a cluster: given one bootstrap address they find every partition's leader,
and when a leader dies (kill -9) they follow the partitions to their new leaders on their own.

The broker killed is not the group's coordinator (coordinator failover is not tested here).
Nothing here depends on replication. Without it a new leader does not have what the old one
had, so the consumer's position on it is out of range and resets to the earliest offset
(auto_offset_reset) -- this test produces fewer messages after the kill than before it to each
partition, so that reset happens before the new messages are read and none is skipped."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from client.consumer import Consumer
from client.group_admin import GroupAdmin
from client.producer import Producer
from tests.cluster.conftest import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

PARTITIONS = 6
BEFORE = 30  # messages per partition before the kill
AFTER = 10  # ... and after it: fewer, see the module docstring


def _produce(producer: Producer, topic: str, label: str, per_partition: int) -> set[bytes]:
    futures = [producer.send(topic, f"{label}-{p}-{i}".encode(), partition=p)
               for i in range(per_partition) for p in range(PARTITIONS)]
    producer.flush(90)
    for future in futures:
        future.result(0)  # raises the send's error, if any
    return {f"{label}-{p}-{i}".encode() for i in range(per_partition) for p in range(PARTITIONS)}


def _consume(consumer: Consumer, wanted: set[bytes], got: set[bytes], timeout: float,
             what: str) -> None:
    deadline = time.monotonic() + timeout
    while not wanted <= got:
        if time.monotonic() > deadline:
            missing = sorted(wanted - got)
            raise AssertionError(f"not within {timeout:g} s: {what}; {len(missing)} missing, "
                                 f"e.g. {missing[:5]}")
        for record in consumer.poll(200):
            assert record.value is not None
            got.add(record.value)


@pytest.mark.timeout(120)
def test_producer_and_group_consumer_follow_leaders_after_a_kill(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    cluster.create_topic("clients", partitions=PARTITIONS, replication_factor=3)
    entry = cluster.controller_id()
    assert entry is not None
    bootstrap = cluster.brokers[entry].bootstrap  # one address only
    group = "g-failover"

    producer = Producer(bootstrap, acks=1, retry_backoff_ms=100, request_timeout_ms=5_000,
                        delivery_timeout_ms=90_000)
    consumer = Consumer(bootstrap, group_id=group, auto_offset_reset="earliest",
                        session_timeout_ms=20_000, heartbeat_interval_ms=1_000,
                        retry_backoff_ms=100, request_timeout_ms=5_000)
    try:
        consumer.subscribe(["clients"])
        first = _produce(producer, "clients", "before", BEFORE)
        got: set[bytes] = set()
        _consume(consumer, first, got, 60, "every message produced before the kill")
        assert {tp.partition for tp in consumer.assignment()} == set(range(PARTITIONS))

        with GroupAdmin(bootstrap, timeout_ms=20_000) as admin:
            coordinator = admin.find_coordinator(group).node_id
        leaders = cluster.leaders("clients")
        candidates = [b for b in range(3) if b != coordinator and b in leaders.values()]
        # rather not the bootstrap broker either, so the clients' one address stays valid
        victim = sorted(candidates, key=lambda b: b == entry)[0]
        moved = sorted(p for p, leader in leaders.items() if leader == victim)
        print(f"coordinator {coordinator}, bootstrap {entry}, killing broker {victim} "
              f"(leader of {moved})")

        killed_at = time.monotonic()
        cluster.brokers[victim].kill()
        second = _produce(producer, "clients", "after", AFTER)
        produced_after = time.monotonic() - killed_at
        _consume(consumer, second, got, 60, "every message produced after the kill")
        consumed_after = time.monotonic() - killed_at
        print(f"after kill -9 of broker {victim}: every send acknowledged after "
              f"{produced_after:.2f} s, every message consumed after {consumed_after:.2f} s")

        states = cluster.states("clients")
        assert all(states[p]["leader"] not in (victim, -1) for p in moved)
        assert consumer.member_id and consumer.assignment() == {
            tp for tp in consumer.assignment() if tp.topic == "clients"}
        assert {tp.partition for tp in consumer.assignment()} == set(range(PARTITIONS))
    finally:
        consumer.close(10_000)
        producer.close(10)
