"""aiokafka, which writes record batches (message format v2) only, through the Kafka listener:
headers round trip through the broker to aiokafka's consumer and odradek's own, an idempotent
producer's batches are written once, and two members of one group split a topic's partitions
and commit where the next member resumes. (The scenarios every client runs -- codecs, reads
from an offset, commits handed between clients, a killed member -- take aiokafka too.)"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from client import Consumer, TopicPartition
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.kafka_clients.conftest import unique_topic

pytestmark = pytest.mark.integration

TIMEOUT_S = 30.0
HEADERS = [("trace", b"abc"), ("empty", b""), ("trace", b"second")]


async def _produce(bootstrap: str, topic: str, values: list[bytes], **options: Any) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **options)
    await asyncio.wait_for(producer.start(), TIMEOUT_S)
    try:
        futures = [await producer.send(topic, value=v, key=b"k%d" % i, partition=i % 2,
                                       headers=HEADERS)
                   for i, v in enumerate(values)]
        await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S)
    finally:
        await producer.stop()


async def _read(bootstrap: str, topic: str, count: int) -> list[Any]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await asyncio.wait_for(consumer.start(), TIMEOUT_S)
    try:
        out: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                out += records
        return out
    finally:
        await consumer.stop()


def _partitions(broker: BrokerProcess, topic: str, count: int) -> None:
    with RawClient(broker.address) as client:
        client.create_topic(topic, count)


def test_headers_round_trip_to_aiokafka_and_the_native_consumer(
        kafka_broker: BrokerProcess) -> None:
    topic = unique_topic("aiokafka-headers")
    _partitions(kafka_broker, topic, 2)
    values = [b"v%d" % i for i in range(20)]
    asyncio.run(_produce(kafka_broker.kafka_bootstrap, topic, values))
    got = asyncio.run(_read(kafka_broker.kafka_bootstrap, topic, len(values)))
    assert sorted(r.value for r in got) == sorted(values)
    assert all(list(r.headers) == HEADERS for r in got)
    with Consumer(kafka_broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        native: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(native) < len(values) and time.monotonic() < deadline:
            native += consumer.poll(timeout_ms=500)
    assert sorted(r.value for r in native) == sorted(values)
    assert all(list(r.headers) == HEADERS for r in native)


def test_an_idempotent_producer_writes_each_batch_once(kafka_broker: BrokerProcess) -> None:
    topic = unique_topic("aiokafka-idempotent")
    _partitions(kafka_broker, topic, 2)
    values = [b"i%d" % i for i in range(50)]
    asyncio.run(_produce(kafka_broker.kafka_bootstrap, topic, values, enable_idempotence=True,
                         acks="all"))
    got = asyncio.run(_read(kafka_broker.kafka_bootstrap, topic, len(values) + 1))
    assert sorted(r.value for r in got) == sorted(values)
    for partition in (0, 1):
        offsets = [r.offset for r in got if r.partition == partition]
        assert offsets == list(range(len(offsets)))


async def _member(bootstrap: str, group: str, topic: str, wanted: int,
                  seen: list[tuple[int, int]], assigned: list[set[int]],
                  done: asyncio.Event) -> None:
    """A group member that notes its assignment, records (partition, offset) and commits each
    batch of records, until ``done``."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                session_timeout_ms=10_000, heartbeat_interval_ms=500)
    await asyncio.wait_for(consumer.start(), TIMEOUT_S)
    try:
        while not done.is_set():
            for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                seen += [(tp.partition, r.offset) for r in records]
                await consumer.commit({tp: records[-1].offset + 1})
            assigned.append({tp.partition for tp in consumer.assignment()})
            if len(seen) >= wanted:
                done.set()
    finally:
        await consumer.stop()


def test_two_members_of_a_group_split_the_partitions_and_commit(
        kafka_broker: BrokerProcess) -> None:
    topic, group = unique_topic("aiokafka-group"), unique_topic("g-aiokafka")
    _partitions(kafka_broker, topic, 2)
    values = [b"g%d" % i for i in range(40)]
    bootstrap = kafka_broker.kafka_bootstrap

    async def run() -> list[list[tuple[int, int]]]:
        seen: list[list[tuple[int, int]]] = [[], []]
        assigned: list[list[set[int]]] = [[], []]
        done = [asyncio.Event(), asyncio.Event()]
        members = [asyncio.create_task(_member(bootstrap, group, topic, 20, seen[i],
                                               assigned[i], done[i])) for i in (0, 1)]
        deadline = time.monotonic() + TIMEOUT_S
        # produce once the group is stable with one partition each
        while not all(a and len(a[-1]) == 1 for a in assigned):
            assert time.monotonic() < deadline, assigned
            await asyncio.sleep(0.05)
        await _produce(bootstrap, topic, values)
        await asyncio.wait_for(asyncio.gather(*members), TIMEOUT_S)
        return seen

    first, second = asyncio.run(run())
    # each member read one whole partition (20 records, offsets 0..19), not the other's
    assert sorted([{p for p, _ in first}, {p for p, _ in second}], key=min) == [{0}, {1}]
    for seen in (first, second):
        assert [o for _, o in seen] == list(range(20))
    with Consumer(kafka_broker.bootstrap, group_id=group) as consumer:
        committed = [consumer.committed(TopicPartition(topic, p)) for p in (0, 1)]
    assert committed == [20, 20]
