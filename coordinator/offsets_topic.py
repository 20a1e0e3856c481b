"""The ``__consumer_offsets`` topic: which partition holds a group, and its record encodings.

A group lives in partition ``crc32(utf-8 group id) % offsets_topic_partitions`` -- the same in any
language -- and the leader of that partition is the group's coordinator.

Records are msgpack arrays whose first element is a version, so the format can grow. The key says
what a record is about, so log compaction keeps exactly the newest value per group and per
(group, topic, partition); a null value is a tombstone (deleted group, expired offset).

- offset record: key ``[1, group, topic, partition]``,
  value ``[1, offset, metadata, commit_timestamp_ms]``;
- group record: key ``[2, group]``,
  value ``[1, generation, strategy, state_timestamp_ms, [member, ...]]`` for a group the broker
  assigns, and ``[2, generation, strategy, state_timestamp_ms, [member, ...], protocol_type,
  leader_id]`` for one whose leader assigns (Kafka's classic protocol: strategy is then the
  chosen protocol);

member: ``[member_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
[topic, ...], [[topic, [partition, ...]], ...]]`` -- its subscription and its assignment; in
version 2 followed by ``metadata, assignment_bytes, [[protocol, metadata], ...]``: its metadata
for the chosen protocol, the assignment the leader sent, and every protocol it offered (so a
rejoin after a failover is recognised as unchanged). ``state_timestamp_ms`` is when the group
entered the state the record describes (the offsets of an Empty group expire counting from
then). Groups the broker assigns are still written as version 1, which every broker reads --
unless a member is static (KIP-345): then version 3, each member followed by its
``group_instance_id`` (null for a dynamic one), so a coordinator that loads the group knows
whose place a restarting static member takes.
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
#: the group value of a group whose leader assigns
GROUP_VALUE_VERSION_CLIENT_SIDE = 2
GROUP_VALUE_VERSION_STATIC = 3


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
    metadata: bytes = b""
    assignment_bytes: bytes = b""
    protocols: tuple[tuple[str, bytes], ...] = ()
    instance_id: str | None = None  # a static member's group_instance_id


@dataclass(frozen=True)
class GroupValue:
    generation: int
    strategy: str
    state_timestamp_ms: int
    members: tuple[MemberValue, ...]
    #: "" for a group the broker assigns (written as version 1)
    protocol_type: str = ""
    leader_id: str = ""


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
    client_side = bool(value.protocol_type)
    static = not client_side and any(m.instance_id is not None for m in value.members)
    members = []
    for m in value.members:
        member: list[Any] = [
            m.member_id, m.client_id, m.client_host, m.session_timeout_ms,
            m.rebalance_timeout_ms, list(m.subscription), _grouped(m.assignment),
        ]
        if client_side:
            member += [m.metadata, m.assignment_bytes, [[n, b] for n, b in m.protocols]]
        elif static:
            member.append(m.instance_id)
        members.append(member)
    if not client_side:
        version = GROUP_VALUE_VERSION_STATIC if static else VALUE_VERSION
        return _pack(
            [version, value.generation, value.strategy, value.state_timestamp_ms, members]
        )
    return _pack([
        GROUP_VALUE_VERSION_CLIENT_SIDE, value.generation, value.strategy,
        value.state_timestamp_ms, members, value.protocol_type, value.leader_id,
    ])


def _member_value(fields: list[Any]) -> MemberValue:
    mid, cid, host, session, rebalance, subscription, assignment = fields[:7]
    metadata, assignment_bytes, protocols = fields[7:] if len(fields) == 10 else (b"", b"", [])
    instance_id = fields[7] if len(fields) == 8 else None
    if not isinstance(metadata, bytes) or not isinstance(assignment_bytes, bytes):
        raise TypeError("member metadata and assignment are not bytes")
    if instance_id is not None and not isinstance(instance_id, str):
        raise TypeError("member instance id is not a string")
    return MemberValue(
        str(mid), str(cid), str(host), int(session), int(rebalance),
        tuple(str(t) for t in subscription), _assignment(assignment),
        metadata, assignment_bytes, tuple((str(n), bytes(b)) for n, b in protocols),
        instance_id,
    )


def decode_group_value(data: bytes) -> GroupValue:
    fields = _unpack(data, "group value")
    if (fields[0], len(fields)) not in ((VALUE_VERSION, 5), (GROUP_VALUE_VERSION_CLIENT_SIDE, 7),
                                        (GROUP_VALUE_VERSION_STATIC, 5)):
        raise OffsetsRecordError(f"unknown group value {fields!r}")
    generation, strategy, timestamp, members = fields[1:5]
    client_side = fields[0] == GROUP_VALUE_VERSION_CLIENT_SIDE
    protocol_type, leader_id = fields[5:] if client_side else ("", "")
    member_length = {VALUE_VERSION: 7, GROUP_VALUE_VERSION_CLIENT_SIDE: 10,
                     GROUP_VALUE_VERSION_STATIC: 8}[fields[0]]
    try:
        if any(len(m) != member_length for m in members):
            raise ValueError(f"a member is not {member_length} fields")
        decoded = tuple(_member_value(m) for m in members)
    except (TypeError, ValueError) as exc:
        raise OffsetsRecordError(f"malformed group members: {exc}") from None
    return GroupValue(int(generation), str(strategy), int(timestamp), decoded,
                      str(protocol_type), str(leader_id))


def offset_record(key: OffsetKey, value: OffsetValue | None) -> Record:
    return encode_key(key), None if value is None else encode_offset_value(value)


def group_record(key: GroupKey, value: GroupValue | None) -> Record:
    return encode_key(key), None if value is None else encode_group_value(value)
