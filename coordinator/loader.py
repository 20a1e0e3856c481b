"""One ``__consumer_offsets`` partition as this coordinator sees it: loader state and its groups.

While catching up, records are read in log order into "newest value per key" maps -- exactly
what log compaction would keep -- and the groups are rebuilt from them once the load finishes.
"""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.assignors import TopicPartition
from coordinator.group import Group, Member
from coordinator.group_state import GroupState
from coordinator.loader_state import LoaderState
from coordinator.offsets_topic import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    Record,
    decode_group_value,
    decode_key,
    decode_offset_value,
)


class OffsetsPartition:
    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.state = LoaderState.DOWN
        self.groups: dict[str, Group] = {}
        self._group_values: dict[str, GroupValue | None] = {}
        self._offset_values: dict[OffsetKey, OffsetValue | None] = {}

    def read(self, records: Iterable[Record]) -> None:
        """Apply records in log order; a later value (or tombstone) replaces an earlier one."""
        for key_bytes, value_bytes in records:
            key = decode_key(key_bytes)
            if isinstance(key, GroupKey):
                self._group_values[key.group_id] = (
                    None if value_bytes is None else decode_group_value(value_bytes)
                )
            else:
                self._offset_values[key] = (
                    None if value_bytes is None else decode_offset_value(value_bytes)
                )

    def discard_read(self) -> None:
        self._group_values.clear()
        self._offset_values.clear()

    def build_groups(self, now_ms: int) -> dict[str, Group]:
        """The groups the read records describe: Steady if the group record has members, else
        Empty (a group with offsets but no group record was used with manual assignment).
        Session timers are the caller's to start."""
        groups: dict[str, Group] = {}
        for group_id, value in self._group_values.items():
            if value is None:
                continue
            groups[group_id] = Group(
                group_id,
                self.partition,
                state=GroupState.STEADY if value.members else GroupState.EMPTY,
                generation=value.generation,
                strategy=value.strategy,
                state_since_ms=value.state_timestamp_ms if not value.members else now_ms,
                members={m.member_id: Member.from_value(m) for m in value.members},
            )
        for key, offset in self._offset_values.items():
            if offset is None:
                continue
            group = groups.get(key.group_id)
            if group is None:
                # no group record: used with manual assignment only; its offsets expire
                # counting from their commits
                group = groups[key.group_id] = Group(key.group_id, self.partition)
            group.offsets[TopicPartition(key.topic, key.partition)] = offset
        self.discard_read()
        return groups
