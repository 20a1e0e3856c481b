"""``__consumer_offsets``: the group's partition and the versioned, keyed record encodings."""

from __future__ import annotations

import zlib

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator import CoordinatorConfig, GroupCoordinator, TopicPartition, offsets_partition_for
from coordinator.offsets_topic import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetsRecordError,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
)


def test_partition_is_crc32_of_the_utf8_group_id():
    assert offsets_partition_for("my-group", 16) == zlib.crc32(b"my-group") % 16
    assert offsets_partition_for("grüppe", 50) == zlib.crc32("grüppe".encode()) % 50
    assert GroupCoordinator().partition_for("my-group") == offsets_partition_for("my-group", 16)


def test_keys_are_deterministic_and_distinct_by_kind():
    """Compaction keeps the newest value per key bytes, so equal keys must encode equally."""
    assert encode_key(OffsetKey("g", "t", 1)) == encode_key(OffsetKey("g", "t", 1))
    assert encode_key(OffsetKey("g", "t", 1)) != encode_key(OffsetKey("g", "t", 2))
    assert encode_key(GroupKey("g")) != encode_key(OffsetKey("g", "", 0))
    assert msgpack.unpackb(encode_key(OffsetKey("g", "t", 1))) == [1, "g", "t", 1]
    assert msgpack.unpackb(encode_key(GroupKey("g"))) == [2, "g"]


names = st.text(min_size=0, max_size=12)


@given(names, names, st.integers(0, 2**31 - 1), st.integers(-1, 2**62),
       st.none() | st.text(max_size=20), st.integers(0, 2**62))
def test_offset_records_round_trip(group, topic, partition, offset, metadata, stamp):
    key = OffsetKey(group, topic, partition)
    assert decode_key(encode_key(key)) == key
    value = OffsetValue(offset, metadata, stamp)
    assert decode_offset_value(encode_offset_value(value)) == value


members = st.builds(
    MemberValue, names, names, names, st.integers(1, 10**6), st.integers(1, 10**6),
    st.lists(names, unique=True).map(lambda ts: tuple(sorted(ts))),
    st.lists(st.builds(TopicPartition, names, st.integers(0, 100)), unique=True)
    .map(lambda tps: tuple(sorted(tps))),
)


@given(names, st.integers(0, 2**31 - 1), names, st.integers(0, 2**62),
       st.lists(members, max_size=4))
def test_group_records_round_trip(group, generation, strategy, stamp, member_values):
    assert decode_key(encode_key(GroupKey(group))) == GroupKey(group)
    value = GroupValue(generation, strategy, stamp, tuple(member_values))
    assert decode_group_value(encode_group_value(value)) == value


@pytest.mark.parametrize("data", [
    b"\xc1", msgpack.packb([9, "g"]), msgpack.packb({"v": 1}), msgpack.packb([1, "g", "t"]),
    msgpack.packb([]),
])
def test_unreadable_keys_raise(data):
    with pytest.raises(OffsetsRecordError):
        decode_key(data)


def test_unknown_value_versions_raise():
    with pytest.raises(OffsetsRecordError):
        decode_offset_value(msgpack.packb([2, 1, None, 0]))
    with pytest.raises(OffsetsRecordError):
        decode_group_value(msgpack.packb([2, 1, "range", 0, []]))
    with pytest.raises(OffsetsRecordError):
        decode_group_value(msgpack.packb([1, 1, "range", 0, [["only-an-id"]]]))


def test_config_is_validated():
    with pytest.raises(ValueError, match="group_min_session_timeout_ms"):
        CoordinatorConfig(group_min_session_timeout_ms=10, group_max_session_timeout_ms=5)
    with pytest.raises(ValueError, match="unknown strategies"):
        GroupCoordinator(CoordinatorConfig(partition_assignment_strategies=("range", "nope")))
