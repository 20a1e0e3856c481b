"""Kafka's ConsumerProtocol: the bytes a Kafka consumer puts in JoinGroup's protocol metadata
(its Subscription) and the leader in SyncGroup's assignments (each member's Assignment).

The coordinator never needs them to run a client-side group -- they are opaque there -- but
decoding them lets DescribeGroups, ``odradek groups describe`` and the metrics show what a Kafka
consumer subscribes to and owns. Schemas: Kafka's ``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment``. Newer versions only append fields, so a version above the ones
read here is read as the newest known one and the rest of the bytes are ignored (Kafka's rule).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.kafka.errors import EncodeError, MalformedMessageError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

#: the versions this module writes; any version >= 0 is read
SUBSCRIPTION_VERSION = 1
ASSIGNMENT_VERSION = 0


class ConsumerProtocolError(MalformedMessageError):
    """Bytes that do not parse as a ConsumerProtocol Subscription or Assignment."""


TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    #: v1+: what the member owned before this rebalance (cooperative assignors use it)
    owned_partitions: TopicPartitions = ()


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: TopicPartitions
    user_data: bytes | None = None


class _Reader:
    """Reads from ``data`` with every length checked against the bytes left."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.what = what

    def _take(self, size: int) -> memoryview:
        if size < 0 or self.pos + size > len(self.data):
            raise ConsumerProtocolError(
                f"{self.what}: needs {size} bytes at {self.pos}, has {len(self.data) - self.pos}")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def int16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def string(self) -> str:
        size = self.int16()
        if size < 0:
            raise ConsumerProtocolError(f"{self.what}: null string at {self.pos - 2}")
        try:
            return bytes(self._take(size)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConsumerProtocolError(f"{self.what}: string is not UTF-8: {exc}") from None

    def nullable_bytes(self) -> bytes | None:
        size = self.int32()
        return None if size == -1 else bytes(self._take(size))

    def count(self, item_size: int) -> int:
        """An array's length, bounded by the bytes left (each item takes at least
        ``item_size``), so a hostile count fails at once."""
        count = self.int32()
        if count < 0 or count * item_size > len(self.data) - self.pos:
            raise ConsumerProtocolError(f"{self.what}: impossible array length {count}")
        return count

    def strings(self) -> tuple[str, ...]:
        return tuple(self.string() for _ in range(self.count(2)))

    def topic_partitions(self) -> TopicPartitions:
        result = []
        for _ in range(self.count(6)):
            topic = self.string()
            result.append((topic, tuple(self.int32() for _ in range(self.count(4)))))
        return tuple(result)

    def version(self) -> int:
        version = self.int16()
        if version < 0:
            raise ConsumerProtocolError(f"{self.what}: negative version {version}")
        return version


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def int16(self, value: int) -> None:
        self.out += _I16.pack(value)

    def int32(self, value: int) -> None:
        self.out += _I32.pack(value)

    def string(self, value: str) -> None:
        encoded = value.encode("utf-8")
        if len(encoded) > 0x7FFF:
            raise EncodeError(f"string of {len(encoded)} bytes is too long")
        self.int16(len(encoded))
        self.out += encoded

    def nullable_bytes(self, value: bytes | None) -> None:
        if value is None:
            self.int32(-1)
        else:
            self.int32(len(value))
            self.out += value

    def topic_partitions(self, value: TopicPartitions) -> None:
        self.int32(len(value))
        for topic, partitions in value:
            self.string(topic)
            self.int32(len(partitions))
            for partition in partitions:
                self.int32(partition)


def encode_subscription(subscription: Subscription, version: int = SUBSCRIPTION_VERSION
                        ) -> bytes:
    if version not in (0, 1):
        raise EncodeError(f"Subscription version {version} is not written here")
    writer = _Writer()
    writer.int16(version)
    writer.int32(len(subscription.topics))
    for topic in subscription.topics:
        writer.string(topic)
    writer.nullable_bytes(subscription.user_data)
    if version >= 1:
        writer.topic_partitions(subscription.owned_partitions)
    return bytes(writer.out)


def decode_subscription(data: bytes) -> Subscription:
    """A Subscription of any version; fields after those of v1 are ignored."""
    reader = _Reader(data, "ConsumerProtocol Subscription")
    version = reader.version()
    topics = reader.strings()
    user_data = reader.nullable_bytes()
    owned = reader.topic_partitions() if version >= 1 else ()
    return Subscription(topics, user_data, owned)


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    if not 0 <= version <= 3:  # versions 0-3 share one layout
        raise EncodeError(f"Assignment version {version} is not written here")
    writer = _Writer()
    writer.int16(version)
    writer.topic_partitions(assignment.partitions)
    writer.nullable_bytes(assignment.user_data)
    return bytes(writer.out)


def decode_assignment(data: bytes) -> Assignment:
    """An Assignment of any version; fields after those of v0 are ignored."""
    reader = _Reader(data, "ConsumerProtocol Assignment")
    reader.version()
    partitions = reader.topic_partitions()
    user_data = reader.nullable_bytes()
    return Assignment(partitions, user_data)
