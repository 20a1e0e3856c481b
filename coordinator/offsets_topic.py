"""The ``__consumer_offsets`` topic: which partition holds a group, and its record encodings.

A group lives in partition ``crc32(utf-8 group id) % offsets_topic_partitions`` -- the same in any
language -- and the leader of that partition is the group's coordinator.

Records are msgpack arrays whose first element is a version, so the format can grow. The key says
what a record is about, so log compaction keeps exactly the newest value per group and per
(group, topic, partition); a null value is a tombstone (deleted group, expired offset).

- offset record: key ``[1, group, topic, partition]``,
  value ``[1, offset, metadata, commit_timestamp_ms]``;
- group record: key ``[2, group]``,
  value ``[1, generation, strategy, state_timestamp_ms, [member, ...]]``;

member: ``[member_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
[topic, ...], [[topic, [partition, ...]], ...]]`` -- its subscription and its assignment.
``state_timestamp_ms`` is when the group entered the state the record describes (the offsets of
an Empty group expire counting from then).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgpack

from coordinator.assignors import Assignment, shared
from protocol.errors import ProtocolError
from protocol.partitions import TopicPartition

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
VALUE_VERSION = 1


class OffsetsRecordError(ProtocolError):
    """A ``__consumer_offsets`` record this version cannot read."""


@dataclass(frozen=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group_id: str


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    metadata: str | None
    commit_timestamp_ms: int


@dataclass(frozen=True)
class MemberValue:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    subscription: tuple[str, ...]
    assignment: Assignment


@dataclass(frozen=True)
class GroupValue:
    generation: int
    strategy: str
    state_timestamp_ms: int
    members: tuple[MemberValue, ...]


RecordKey = OffsetKey | GroupKey
Record = tuple[bytes, bytes | None]


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)  # type: ignore[no-any-return]


def _unpack(data: bytes, what: str) -> list[Any]:
    try:
        value = msgpack.unpackb(data, raw=False, use_list=True)
    except Exception as exc:
        raise OffsetsRecordError(f"{what} is not msgpack: {exc}") from None
    if not isinstance(value, list) or not value:
        raise OffsetsRecordError(f"{what} is not a versioned array: {value!r}")
    return value


def encode_key(key: RecordKey) -> bytes:
    if isinstance(key, OffsetKey):
        return _pack([OFFSET_KEY_VERSION, key.group_id, key.topic, key.partition])
    return _pack([GROUP_KEY_VERSION, key.group_id])


def decode_key(data: bytes) -> RecordKey:
    fields = _unpack(data, "record key")
    try:
        if fields[0] == OFFSET_KEY_VERSION:
            _, group_id, topic, partition = fields
            return OffsetKey(str(group_id), str(topic), int(partition))
        if fields[0] == GROUP_KEY_VERSION:
            _, group_id = fields
            return GroupKey(str(group_id))
    except (TypeError, ValueError):
        pass
    raise OffsetsRecordError(f"unknown record key {fields!r}")


def _assignment(pairs: Iterable[Any]) -> Assignment:
    return tuple(sorted(
        shared(TopicPartition(str(t), int(p))) for t, partitions in pairs for p in partitions
    ))


def _grouped(assignment: Assignment) -> list[list[Any]]:
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [[topic, sorted(ps)] for topic, ps in sorted(by_topic.items())]


def encode_offset_value(value: OffsetValue) -> bytes:
    return _pack([VALUE_VERSION, value.offset, value.metadata, value.commit_timestamp_ms])


def decode_offset_value(data: bytes) -> OffsetValue:
    fields = _unpack(data, "offset value")
    if fields[0] != VALUE_VERSION or len(fields) != 4:
        raise OffsetsRecordError(f"unknown offset value {fields!r}")
    _, offset, metadata, timestamp = fields
    return OffsetValue(int(offset), metadata, int(timestamp))


def encode_group_value(value: GroupValue) -> bytes:
    members = [
        [
            m.member_id, m.client_id, m.client_host, m.session_timeout_ms,
            m.rebalance_timeout_ms, list(m.subscription), _grouped(m.assignment),
        ]
        for m in value.members
    ]
    return _pack(
        [VALUE_VERSION, value.generation, value.strategy, value.state_timestamp_ms, members]
    )


def decode_group_value(data: bytes) -> GroupValue:
    fields = _unpack(data, "group value")
    if fields[0] != VALUE_VERSION or len(fields) != 5:
        raise OffsetsRecordError(f"unknown group value {fields!r}")
    _, generation, strategy, timestamp, members = fields
    try:
        decoded = tuple(
            MemberValue(
                str(mid), str(cid), str(host), int(session), int(rebalance),
                tuple(str(t) for t in subscription), _assignment(assignment),
            )
            for mid, cid, host, session, rebalance, subscription, assignment in members
        )
    except (TypeError, ValueError) as exc:
        raise OffsetsRecordError(f"malformed group members: {exc}") from None
    return GroupValue(int(generation), str(strategy), int(timestamp), decoded)


def offset_record(key: OffsetKey, value: OffsetValue | None) -> Record:
    return encode_key(key), None if value is None else encode_offset_value(value)


def group_record(key: GroupKey, value: GroupValue | None) -> Record:
    return encode_key(key), None if value is None else encode_group_value(value)
