"""Helpers for the pipeline tests: fill topics with known messages, read what Spark returns,
and look at a group's committed offsets."""

from __future__ import annotations

from typing import Any, NamedTuple

from pyspark.sql import DataFrame

from client import Admin, Producer, TopicPartition
from client.network import NetworkClient
from protocol.apis import ApiKey

BASE_TIME_MS = 1_700_000_000_000


class Sent(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    timestamp: int


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(name, partitions)


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    partitions: int,
    compression: str = "none",
    first: int = 0,
) -> list[Sent]:
    """``count`` messages numbered from ``first``: value ``v<i>``, key ``k<i % 5>`` (none for
    every seventh), partition ``i % partitions``, timestamp BASE_TIME_MS + i seconds. Returns
    where each was stored."""
    with Producer(bootstrap, compression=compression, linger_ms=5) as producer:
        pending = []
        for i in range(first, first + count):
            key = None if i % 7 == 0 else b"k%d" % (i % 5)
            value = b"v%d" % i
            timestamp = BASE_TIME_MS + i * 1000
            future = producer.send(
                topic, value, key=key, partition=i % partitions, timestamp=timestamp
            )
            pending.append((future, key, value, timestamp))
        producer.flush()
        sent = []
        for future, key, value, timestamp in pending:
            meta = future.result(10)
            sent.append(Sent(meta.topic, meta.partition, meta.offset, key, value, timestamp))
    return sent


def rows_of(df: DataFrame) -> list[Sent]:
    """The DataFrame's rows as ``Sent`` tuples (timestamps back in milliseconds)."""
    return [row_to_sent(row) for row in df.collect()]


def row_to_sent(row: Any) -> Sent:
    millis = round(row.timestamp.timestamp() * 1000) if row.timestamp is not None else -1
    return Sent(row.topic, row.partition, row.offset, row.key, row.value, millis)


def committed_offsets(bootstrap: str, group_id: str) -> dict[TopicPartition, int]:
    """The group's committed offsets, read from its coordinator (OffsetFetch)."""
    network = NetworkClient(bootstrap)
    try:
        found = network.send(network.least_loaded_node(), ApiKey.FIND_COORDINATOR,
                             {"group_id": group_id}).result(10)
        network.set_brokers({found["node_id"]: (found["host"], found["port"])})
        body = network.send(found["node_id"], ApiKey.OFFSET_FETCH,
                            {"group_id": group_id, "topics": None}).result(10)
    finally:
        network.close()
    return {
        TopicPartition(t["name"], p["partition"]): p["offset"]
        for t in body["topics"]
        for p in t["partitions"]
        if p["offset"] >= 0
    }
