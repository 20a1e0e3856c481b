"""Which partition a message goes to.

Keyed messages: ``murmur2(key) & 0x7fffffff`` modulo the partition count -- exactly Kafka's
default partitioner (``Utils.toPositive(Utils.murmur2(keyBytes)) % numPartitions``), which the
Java client, librdkafka's ``murmur2`` partitioner and kafka-python also implement. We chose it
over crc32 so a key lands on the same partition as it would from any Kafka client, and the test
vectors in docs/clients.md can be checked against those implementations. It is pure integer
arithmetic on 32-bit words, so any language reproduces it; in Python it costs about a
microsecond for a short key (crc32 would be cheaper, but speaks only for itself).

Messages without a key are sticky: they all go to one partition while its open batch has room;
a message that would need a new batch there (the open one is full, or already sent) moves them
to the next partition, round robin. Fast producers fill whole batches, slow ones spread their
messages over all partitions (Kafka's sticky partitioner, KIP-480, with round robin for the
move; the producer asks ``batch_closed`` when to move).

A user partitioner is any callable ``(topic, key, partitions) -> partition``.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence

Partitioner = Callable[[str, bytes | None, Sequence[int]], int]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS = struct.Struct("<I")


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data``, as the signed int Java returns."""
    length = len(data)
    h = _SEED ^ length
    whole = length & ~3
    for (k,) in _WORDS.iter_unpack(data[:whole]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= data[whole + 2] << 16
        if tail >= 2:
            h ^= data[whole + 1] << 8
        h = ((h ^ data[whole]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partition_count: int) -> int:
    """The partition index (0-based) a key maps to among ``partition_count`` partitions."""
    return (murmur2(key) & 0x7FFFFFFF) % partition_count


class DefaultPartitioner:
    """murmur2 for keys, sticky round robin for null keys (see the module docstring)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}  # topic -> index into its partitions

    def __call__(self, topic: str, key: bytes | None, partitions: Sequence[int]) -> int:
        if key is not None:
            return partitions[partition_for_key(key, len(partitions))]
        index = self._sticky.get(topic)
        if index is None:
            index = self._sticky[topic] = self._rng.randrange(len(partitions))
        return partitions[index % len(partitions)]

    def batch_closed(self, topic: str, partition: int, partitions: Sequence[int]) -> None:
        """``partition`` has no room for the next null-keyed message: move to the next one."""
        index = self._sticky.get(topic)
        if index is not None and partitions[index % len(partitions)] == partition:
            self._sticky[topic] = (index + 1) % len(partitions)
