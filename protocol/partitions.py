"""What every package names the same way: a topic's partition, and the offsets topic with the
partition a group's offsets -- and so its coordinator -- live in."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import NamedTuple

#: Kafka's name: groups' members, generations and committed offsets are records of this topic
OFFSETS_TOPIC = "__consumer_offsets"


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """Partitions grouped by topic, topics and partitions sorted, each once: the shape of the
    topic arrays in requests and answers."""
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        out.setdefault(topic, []).append(partition)
    return out


def offsets_partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group, whose leader coordinates it: crc32 of
    the id's UTF-8 bytes modulo the topic's partition count (docs/protocol.md,
    FindCoordinator), the same in every client and every language on purpose."""
    return zlib.crc32(group_id.encode("utf-8")) % partitions
