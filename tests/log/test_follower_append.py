"""``PartitionLog.append_as_follower``: a replica stores what its leader stored, byte for byte,
with the leader's offsets; what cannot follow the log's end is refused and nothing is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log import (
    AppendResult,
    CorruptMessageSetError,
    EpochEntry,
    InvalidMessageError,
    MessageSetLargerThanSegmentError,
    OffsetsOutOfOrderError,
    PartitionLog,
    UnexpectedAppendOffsetError,
)
from broker.log.index import MAX_RELATIVE_OFFSET
from protocol.compression import Codec
from protocol.messageset import (
    TIMESTAMP_TYPE_BIT,
    encode_message,
    encode_message_set,
    read_entries,
)
from tests.log.support import FakeClock, crash_copy, message_set, plain, read_all, triples

OpenLog = Callable[..., PartitionLog]


def _at(offset: int, records: list[tuple[bytes | None, bytes | None, int]], codec: Codec) -> bytes:
    """A set as a leader stores it: offsets from ``offset`` (a wrapper bears its last one)."""
    return encode_message_set(records, codec=codec, base_offset=offset)


def _stored(log: PartitionLog) -> bytes:
    """Every segment file's bytes, in offset order."""
    return b"".join(p.read_bytes() for p in sorted(log.directory.glob("*.log")))


def _leader(open_log: OpenLog, **config: object) -> PartitionLog:
    """A leader log of many shapes: plain runs, wrappers of every codec, v0 messages."""
    log = open_log(**config)
    for i in range(30):
        codec = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4][i % 4]
        records = [
            (b"k%d" % (i % 5), b"v%d" % j * (i % 7 + 1), 1000 + 10 * i + j)
            for j in range(i % 3 + 1)
        ]
        log.append(message_set(records, codec))
        if i % 9 == 4:
            log.append(encode_message(0, b"old", b"v0 message", magic=0))
    return log


def _replicate(leader: PartitionLog, follower: PartitionLog, chunk: int) -> int:
    """Fetch from the follower's log end and append, as a replica fetcher does; a chunk
    holding no whole entry is fetched again larger. Returns how many appends it took."""
    appends = 0
    size = chunk
    while follower.log_end_offset < leader.log_end_offset:
        data = leader.read(follower.log_end_offset, size).bytes()
        result = follower.append_as_follower(data)
        if result.last_offset < result.first_offset:
            size *= 2
            continue
        size = chunk
        appends += 1
        assert result.last_offset + 1 == follower.log_end_offset
    return appends


# ---------------------------------------------------------------------------- copying a leader


@pytest.mark.parametrize("chunk", [64, 300, 1000, 1 << 16])
@pytest.mark.parametrize("timestamps", ["CreateTime", "LogAppendTime"])
def test_a_follower_stores_what_its_leader_stored_byte_for_byte(
    open_log: OpenLog, tmp_path: Path, chunk: int, timestamps: str
) -> None:
    leader = _leader(open_log, message_timestamp_type=timestamps, segment_bytes=1024)
    follower = PartitionLog.open(
        tmp_path / "f-0", leader.config, clock=FakeClock(2_000_000_000.0)
    )  # another broker, another clock: LogAppendTime stamps are the leader's
    try:
        assert _replicate(leader, follower, chunk) > 0
        assert _stored(follower) == _stored(leader)
        assert follower.log_end_offset == leader.log_end_offset
        leader_messages = read_all(leader)
        assert read_all(follower) == leader_messages
        for message in leader_messages[::7]:
            assert follower.offset_for_timestamp(message.timestamp) == leader.offset_for_timestamp(
                message.timestamp
            )
        follower.close()
        reopened = PartitionLog.open(follower.directory, leader.config)
        assert read_all(reopened) == leader_messages
        reopened.close()
    finally:
        follower.close()


@pytest.mark.parametrize("chunk", [100, 1 << 16])
def test_a_follower_copies_a_compacted_leader_gaps_and_all(
    open_log: OpenLog, tmp_path: Path, chunk: int
) -> None:
    """Compaction leaves gaps between entries and inside recompressed wrappers, whose first
    message then sits more than one offset below the entry's own."""
    leader = open_log(segment_bytes=600, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    for i in range(20):
        records = [(b"k%d" % ((i + j) % 7), b"v%d" % i, i) for j in range(4)]
        leader.append(message_set(records, [Codec.GZIP, Codec.NONE, Codec.LZ4][i % 3]))
    leader.roll()
    assert leader.compact()
    offsets = [m.offset for m in read_all(leader)]
    assert offsets != list(range(offsets[0], offsets[-1] + 1))
    follower = open_log(tmp_path / "f-0", segment_bytes=600, cleanup_policy="compact")
    _replicate(leader, follower, chunk)
    assert _stored(follower) == _stored(leader)
    assert read_all(follower) == read_all(leader)


def test_log_append_time_stamps_are_kept(
    open_log: OpenLog, tmp_path: Path, clock: FakeClock
) -> None:
    leader = open_log(message_timestamp_type="LogAppendTime")
    leader.append(message_set([(b"a", b"1", 5), (b"b", b"2", 6)], Codec.GZIP))
    data = leader.read(0, 1 << 16).bytes()
    (entry,), _ = read_entries(data)
    assert entry.attributes & TIMESTAMP_TYPE_BIT and entry.timestamp == clock.ms
    clock.advance(60)
    follower = open_log(tmp_path / "f-0", message_timestamp_type="LogAppendTime")
    assert follower.append_as_follower(data) == AppendResult(0, 1, -1)
    assert follower.read(0, 1 << 16).bytes() == data


def test_the_first_offset_of_a_wrapper_is_that_of_its_first_message(
    open_log: OpenLog,
) -> None:
    log = open_log()
    log.append_as_follower(_at(0, [(b"a", b"1", 0)], Codec.NONE))
    result = log.append_as_follower(_at(1, [(b"b", b"2", 0)] * 3, Codec.SNAPPY))
    assert result == AppendResult(1, 3, -1)
    assert [m.offset for m in read_all(log)] == [0, 1, 2, 3]


def test_a_leader_style_append_continues_after_a_follower_one(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_follower(_at(0, [(b"a", b"1", 0)] * 4, Codec.LZ4))
    assert log.append(plain(b"b", b"2")).first_offset == 4
    assert log.append_as_follower(_at(5, [(b"c", b"3", 0)], Codec.NONE)).first_offset == 5
    assert [m.offset for m in read_all(log)] == [0, 1, 2, 3, 4, 5]


# ---------------------------------------------------------------------------- what is refused


def test_a_set_starting_below_the_log_end_is_refused(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_follower(_at(0, [(b"a", b"1", 0)] * 5, Codec.NONE))
    before = _stored(log)
    with pytest.raises(UnexpectedAppendOffsetError) as caught:
        log.append_as_follower(_at(3, [(b"b", b"2", 0)] * 4, Codec.NONE))
    message = str(caught.value)
    assert str(log.directory) in message
    assert "offsets 3..6" in message and "log end offset 5" in message
    assert (caught.value.first_offset, caught.value.last_offset) == (3, 6)
    assert caught.value.log_end_offset == 5
    assert _stored(log) == before and log.log_end_offset == 5


def test_a_wrapper_reaching_below_the_log_end_is_refused(open_log: OpenLog) -> None:
    """Its own offset (its last message's) is past the end, its first message's is not."""
    log = open_log()
    log.append_as_follower(_at(0, [(b"a", b"1", 0)] * 2, Codec.NONE))
    with pytest.raises(UnexpectedAppendOffsetError, match=r"offsets 1\.\.3"):
        log.append_as_follower(_at(1, [(b"b", b"2", 0)] * 3, Codec.GZIP))
    assert log.log_end_offset == 2


@pytest.mark.parametrize(("second", "third"), [(5, 5), (5, 4), (2, 3)])
def test_offsets_that_do_not_increase_are_refused(
    open_log: OpenLog, second: int, third: int
) -> None:
    log = open_log()
    first = encode_message(3, b"a", b"1", 0)
    data = first + encode_message(second, b"b", b"2", 0) + encode_message(third, b"c", b"3", 0)
    with pytest.raises(OffsetsOutOfOrderError) as caught:
        log.append_as_follower(data)
    bad = 1 if second <= 3 else 2
    assert caught.value.position == bad * len(first)
    assert str(log.directory) in str(caught.value)
    assert log.log_end_offset == 0 and log.size_bytes() == 0


def test_a_damaged_set_is_refused(open_log: OpenLog) -> None:
    log = open_log()
    good = _at(0, [(b"a", b"1", 0)] * 3, Codec.NONE)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptMessageSetError):
        log.append_as_follower(bytes(bad_crc))
    bad_size = bytearray(good)
    bad_size[8:12] = (3).to_bytes(4, "big")
    with pytest.raises(InvalidMessageError):
        log.append_as_follower(bytes(bad_size))
    not_gzip = encode_message(0, None, b"not gzip at all", 0, attributes=int(Codec.GZIP))
    with pytest.raises(InvalidMessageError):
        log.append_as_follower(not_gzip)
    assert log.log_end_offset == 0 and log.size_bytes() == 0


def test_an_entry_larger_than_a_segment_is_refused(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1024)
    with pytest.raises(MessageSetLargerThanSegmentError):
        log.append_as_follower(_at(0, [(b"a", b"x" * 2000, 0)], Codec.NONE))
    assert log.size_bytes() == 0


# ------------------------------------------------------------------------ what is accepted


def test_a_gap_above_the_log_end_is_accepted(open_log: OpenLog, tmp_path: Path) -> None:
    """A leader's compaction leaves gaps; so does a leader whose log starts past ours."""
    log = open_log()
    log.append_as_follower(_at(0, [(b"a", b"1", 0)] * 3, Codec.NONE))
    assert log.append_as_follower(_at(10, [(b"b", b"2", 0)] * 3, Codec.GZIP)) == AppendResult(
        10, 12, -1
    )
    assert log.log_end_offset == 13
    assert log.read(3, 1 << 16).bytes() == log.read(10, 1 << 16).bytes()
    assert log.append(plain(b"c", b"3")).first_offset == 13
    expected = [0, 1, 2, 10, 11, 12, 13]
    assert [m.offset for m in read_all(log)] == expected
    crashed = open_log(crash_copy(log.directory, tmp_path / "crash" / "t-0"))
    assert [m.offset for m in read_all(crashed)] == expected
    log.close()
    assert [m.offset for m in read_all(open_log())] == expected


def test_an_empty_log_may_start_its_first_entry_anywhere(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_follower(_at(1000, [(b"a", b"1", 0)], Codec.NONE))
    assert (log.log_start_offset, log.log_end_offset) == (0, 1001)
    assert [m.offset for m in read_all(log)] == [1000]


def test_a_trailing_partial_entry_is_left_out(open_log: OpenLog) -> None:
    log = open_log()
    whole = _at(0, [(b"a", b"1", 0)] * 3, Codec.NONE)
    partial = _at(3, [(b"b", b"2", 0)], Codec.NONE)[:20]
    assert log.append_as_follower(whole + partial) == AppendResult(0, 2, -1)
    assert _stored(log) == whole


@pytest.mark.parametrize(
    "data", [b"", b"\x00" * 11, _at(0, [(b"a", b"1" * 50, 0)], Codec.NONE)[:40]]
)
def test_a_set_without_a_whole_entry_appends_nothing(open_log: OpenLog, data: bytes) -> None:
    log = open_log()
    log.append(message_set([(b"k", b"v", 0)] * 2))
    assert log.append_as_follower(data) == AppendResult(2, 1, -1)
    assert log.log_end_offset == 2 and log.size_bytes() == 2 * len(plain(b"k", b"v"))


def test_max_message_bytes_and_keys_are_the_leaders_business(open_log: OpenLog) -> None:
    log = open_log(max_message_bytes=100, cleanup_policy="compact")
    data = _at(0, [(None, b"x" * 40, 0)] * 5, Codec.NONE)
    assert len(data) > 100
    assert log.append_as_follower(data) == AppendResult(0, 4, -1)


def test_a_set_larger_than_the_room_left_is_split_over_segments(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log(segment_bytes=1024)
    log.append_as_follower(_at(0, [(b"k", b"v" * 300, 0)], Codec.NONE))
    parts = [
        _at(1 + 10 * i, [(b"a", b"w" * 30, i)] * 10, [Codec.NONE, Codec.GZIP][i % 2])
        for i in range(12)
    ]
    data = b"".join(parts)
    assert len(data) > 3 * 1024
    assert log.append_as_follower(data) == AppendResult(1, 120, -1)
    assert len(log.segment_base_offsets) >= 4
    for path in log.directory.glob("*.log"):
        assert path.stat().st_size <= 1024
    expected = triples(read_all(log))
    assert [o for o, _k, _v in expected] == list(range(121))
    assert _stored(log) == _at(0, [(b"k", b"v" * 300, 0)], Codec.NONE) + data
    crashed = open_log(crash_copy(log.directory, tmp_path / "crash" / "t-0"))
    assert triples(read_all(crashed)) == expected
    log.close()
    assert triples(read_all(open_log())) == expected


@pytest.mark.parametrize("filled", [False, True])
def test_a_gap_of_more_than_2_to_the_32_offsets(
    open_log: OpenLog, tmp_path: Path, filled: bool
) -> None:
    """Index entries hold offsets relative to the segment's base in 32 bits: a segment is
    based close enough to the offsets it holds."""
    log = open_log()
    expected = []
    if filled:
        log.append_as_follower(_at(0, [(b"a", b"1", 0)] * 2, Codec.NONE))
        expected = [0, 1]
    far = MAX_RELATIVE_OFFSET + 10
    log.append_as_follower(
        _at(far, [(b"b", b"2", 0)] * 2, Codec.NONE) + _at(2 * far, [(b"c", b"3", 0)], Codec.LZ4)
    )
    expected += [far, far + 1, 2 * far]
    assert log.log_end_offset == 2 * far + 1
    assert [m.offset for m in read_all(log)] == expected
    assert [m.offset for m in read_all(log, start=far + 1)] == expected[-2:]
    bases = log.segment_base_offsets
    for offset in expected:
        base = max(b for b in bases if b <= offset)
        assert offset - base <= MAX_RELATIVE_OFFSET
    crashed = open_log(crash_copy(log.directory, tmp_path / "crash" / "t-0"))
    assert [m.offset for m in read_all(crashed)] == expected


def test_follower_segments_roll_by_age_at_the_sets_first_offset(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(segment_ms=1000)
    log.append_as_follower(_at(0, [(b"a", b"1", 0)], Codec.NONE))
    clock.advance(2)
    log.append_as_follower(_at(5, [(b"b", b"2", 0)], Codec.NONE))
    assert log.segment_base_offsets == (0, 5)


def test_a_follower_records_the_leader_epoch_at_the_first_offset(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_follower(_at(0, [(b"a", b"1", 0)] * 2, Codec.NONE), leader_epoch=1)
    log.append_as_follower(_at(2, [(b"a", b"1", 0)] * 2, Codec.GZIP), leader_epoch=1)
    log.append_as_follower(_at(4, [(b"a", b"1", 0)] * 2, Codec.GZIP), leader_epoch=3)
    assert log.leader_epochs.entries == (EpochEntry(1, 0), EpochEntry(3, 4))
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(_at(0, [(b"a", b"1", 0)], Codec.NONE), leader_epoch=7)
    assert log.leader_epochs.latest_epoch == 3  # a refused set records nothing


def test_a_lost_tail_of_follower_appends_is_recovered(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(segment_bytes=1 << 20)
    log.append_as_follower(_at(0, [(b"a", b"1", 0)] * 3, Codec.NONE))
    size = log.size_bytes()
    log.append_as_follower(_at(7, [(b"b", b"2", 0)] * 3, Codec.SNAPPY))
    copy = crash_copy(log.directory, tmp_path / "crash" / "t-0")
    with open(copy / f"{0:020d}.log", "r+b") as f:
        f.truncate(size + 30)
    crashed = open_log(copy)
    assert crashed.log_end_offset == 3
    assert crashed.append_as_follower(_at(7, [(b"b", b"2", 0)] * 3, Codec.SNAPPY)).first_offset == 7
    assert [m.offset for m in read_all(crashed)] == [0, 1, 2, 7, 8, 9]
