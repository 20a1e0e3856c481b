"""The ``__consumer_offsets`` partitions as this coordinator sees them: each one's loader state
and groups (``OffsetsPartition``), and the lookups from a group id to them
(``OffsetsPartitions``).

While catching up, records are read in log order into "newest value per key" maps -- exactly
what log compaction would keep -- and the groups are rebuilt from them once the load finishes.
"""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.group import Group, Member
from coordinator.group_state import GroupState
from coordinator.loader_state import REQUEST_ANSWER, LoaderState
from coordinator.offsets_topic import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    Record,
    RecordKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from protocol.errors import ErrorCode
from protocol.partitions import TopicPartition, offsets_partition_for


class OffsetsPartition:
    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.state = LoaderState.DOWN
        self.groups: dict[str, Group] = {}
        # While catching up, the newest value of each key, by the bytes the key was first seen
        # as: a partition not compacted for a while holds many commits of the same few keys,
        # and bytes hash once and compare fast, where decoding every key and hashing the
        # decoded key cost two thirds of the load. Other bytes of the same key (another
        # writer's encoding) map to the first ones, so the newest value still wins.
        self._values: dict[bytes, GroupValue | OffsetValue | None] = {}
        self._same_key: dict[bytes, bytes] = {}  # key bytes -> the first bytes of that key
        self._keys: dict[bytes, RecordKey] = {}  # first bytes -> the key, decoded once
        self._first_bytes: dict[RecordKey, bytes] = {}

    def read(self, records: Iterable[Record]) -> None:
        """Apply records in log order; a later value (or tombstone) replaces an earlier one.
        An unreadable record raises ``OffsetsRecordError``; the records before it are kept."""
        same_key, keys, values = self._same_key, self._keys, self._values
        for key_bytes, value_bytes in records:
            first = same_key.get(key_bytes)
            if first is None:
                key = decode_key(key_bytes)
                first = same_key[key_bytes] = self._first_bytes.setdefault(key, key_bytes)
                keys[first] = key
            if isinstance(keys[first], GroupKey):
                values[first] = None if value_bytes is None else decode_group_value(value_bytes)
            else:
                values[first] = None if value_bytes is None else decode_offset_value(value_bytes)

    def discard_read(self) -> None:
        for read in (self._values, self._same_key, self._keys, self._first_bytes):
            read.clear()

    def build_groups(self, now_ms: int) -> dict[str, Group]:
        """The groups the read records describe: Steady if the group record has members, else
        Empty (a group with offsets but no group record was used with manual assignment).
        Each is in its state since its record was written, so a group keeps its age across a
        coordinator move (a Steady group's record without a time: since now). Session timers
        are the caller's to start."""
        group_values: dict[str, GroupValue] = {}
        offset_values: dict[OffsetKey, OffsetValue] = {}
        for first, read in self._values.items():
            key = self._keys[first]
            if isinstance(key, GroupKey):
                if isinstance(read, GroupValue):
                    group_values[key.group_id] = read
            elif isinstance(read, OffsetValue):
                offset_values[key] = read
        groups: dict[str, Group] = {}
        for group_id, value in group_values.items():
            groups[group_id] = Group(
                group_id,
                self.partition,
                state=GroupState.STEADY if value.members else GroupState.EMPTY,
                generation=value.generation,
                strategy=value.strategy,
                protocol_type=value.protocol_type,
                leader_id=value.leader_id,
                state_since_ms=(value.state_timestamp_ms
                                if not value.members or value.state_timestamp_ms > 0
                                else now_ms),
                members={m.member_id: Member.from_value(m) for m in value.members},
            )
        for key, offset in offset_values.items():
            group = groups.get(key.group_id)
            if group is None:
                # no group record: used with manual assignment only; its offsets expire
                # counting from their commits
                group = groups[key.group_id] = Group(key.group_id, self.partition)
            group.offsets[TopicPartition(key.topic, key.partition)] = offset
        self.discard_read()
        return groups


class OffsetsPartitions:
    """Every partition of ``__consumer_offsets``, led here or not, and which one a group is in."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._partitions = {p: OffsetsPartition(p) for p in range(count)}

    def __getitem__(self, partition: int) -> OffsetsPartition:
        return self._partitions[partition]

    def get(self, partition: int) -> OffsetsPartition | None:
        return self._partitions.get(partition)

    def of(self, group_id: str) -> OffsetsPartition:
        return self._partitions[offsets_partition_for(group_id, self.count)]

    def gate(self, group_id: str) -> tuple[OffsetsPartition, ErrorCode]:
        """The group's offsets partition and how its state answers (NONE: go ahead)."""
        loader = self.of(group_id)
        if not group_id:
            return loader, ErrorCode.INVALID_GROUP_ID
        return loader, REQUEST_ANSWER[loader.state]

    def loaded_group(self, group_id: str) -> Group | None:
        loader = self.of(group_id)
        if loader.state is not LoaderState.READY:
            return None
        return loader.groups.get(group_id)

    def is_live(self, group: Group) -> bool:
        """Whether ``group`` is still the one loaded under its id (not deleted, expired or
        unloaded since a callback was set up for it)."""
        return self.loaded_group(group.group_id) is group

    def ready(self) -> list[OffsetsPartition]:
        return [p for p in self._partitions.values() if p.state is LoaderState.READY]

    def loading(self) -> bool:
        return any(p.state is LoaderState.CATCH_UP for p in self._partitions.values())

    def groups(self) -> list[Group]:
        return [g for p in self.ready() for g in p.groups.values()]
