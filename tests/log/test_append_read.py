from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log import (
    CorruptMessageSetError,
    InvalidMessageError,
    KeylessMessageError,
    LogError,
    LogOffsetOutOfRangeError,
    MessageSetLargerThanSegmentError,
    MessageSetTooLargeError,
    PartitionLog,
)
from broker.log.errors import error_code
from protocol.compression import Codec, compress
from protocol.errors import ErrorCode, MessageFormatError
from protocol.messageset import (
    LOG_OVERHEAD,
    decode_messages,
    encode_message,
    encode_records,
    read_entries,
)
from tests.log.support import FakeClock, message_set, plain, read_all, triples

OpenLog = Callable[..., PartitionLog]
CODECS = list(Codec)


def test_appends_get_consecutive_offsets(open_log: OpenLog) -> None:
    log = open_log()
    first = log.append(message_set([(b"a", b"1", 1), (b"b", b"2", 2)]))
    second = log.append(plain(b"c", b"3", 3))
    assert (first.first_offset, first.last_offset) == (0, 1)
    assert (second.first_offset, second.last_offset) == (2, 2)
    assert first.log_append_time == -1
    assert (log.log_start_offset, log.log_end_offset) == (0, 3)
    assert triples(read_all(log)) == [(0, b"a", b"1"), (1, b"b", b"2"), (2, b"c", b"3")]


@pytest.mark.parametrize("codec", CODECS[1:], ids=lambda c: c.name.lower())
def test_a_compressed_wrapper_is_stored_as_it_came_but_for_its_offset(
    open_log: OpenLog, codec: Codec
) -> None:
    log = open_log()
    log.append(plain(b"x", b"before"))
    produced = message_set([(b"k%d" % i, b"v%d" % i, 100 + i) for i in range(5)], codec)
    result = log.append(produced)
    assert (result.first_offset, result.last_offset) == (1, 5)
    stored = log.read(1, 1 << 20).bytes()
    assert len(stored) == len(produced)
    assert stored[8:] == produced[8:]  # only the 8-byte offset field differs
    assert struct.unpack(">q", stored[:8])[0] == 5
    assert triples(read_all(log, 1)) == [(1 + i, b"k%d" % i, b"v%d" % i) for i in range(5)]


def test_a_set_mixing_wrappers_and_plain_messages(open_log: OpenLog) -> None:
    log = open_log()
    data = (
        plain(b"a", b"1")
        + message_set([(b"b", b"2", 0), (b"c", b"3", 0)], Codec.LZ4)
        + plain(b"d", b"4")
    )
    result = log.append(data)
    assert (result.first_offset, result.last_offset) == (0, 3)
    assert [m.key for m in read_all(log)] == [b"a", b"b", b"c", b"d"]


def _bad_crc() -> bytes:
    data = bytearray(message_set([(b"k", b"value", 0), (b"k2", b"value", 0)]))
    data[-1] ^= 0xFF
    return bytes(data)


def _garbage_wrapper() -> bytes:
    return encode_message(0, None, b"not gzip at all", 0, attributes=int(Codec.GZIP))


def _gapped_wrapper() -> bytes:
    inner = encode_message(0, b"a", b"1") + encode_message(2, b"b", b"2")
    return encode_message(2, None, compress(Codec.GZIP, inner), 0, attributes=int(Codec.GZIP))


@pytest.mark.parametrize(
    ("data", "error", "code"),
    [
        (_bad_crc(), CorruptMessageSetError, ErrorCode.CORRUPT_MESSAGE),
        (plain(b"k", b"v")[:-3], InvalidMessageError, ErrorCode.CORRUPT_MESSAGE),
        (b"", InvalidMessageError, ErrorCode.CORRUPT_MESSAGE),
        (b"\x00" * 12, InvalidMessageError, ErrorCode.CORRUPT_MESSAGE),
        (_garbage_wrapper(), InvalidMessageError, ErrorCode.CORRUPT_MESSAGE),
        (_gapped_wrapper(), InvalidMessageError, ErrorCode.CORRUPT_MESSAGE),
        (plain(b"k", b"x" * 3000), MessageSetTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    ],
    ids=["bad-crc", "incomplete", "empty", "bad-size", "bad-payload", "gapped-inner", "too-large"],
)
def test_a_rejected_set_writes_nothing(
    open_log: OpenLog, data: bytes, error: type[LogError], code: ErrorCode
) -> None:
    log = open_log(max_message_bytes=2000)
    log.append(plain(b"k", b"kept"))
    before = (log.log_end_offset, log.size_bytes(), log.read(0, 1 << 20).bytes())
    with pytest.raises(error) as caught:
        log.append(data)
    assert caught.value.code is code
    assert (log.log_end_offset, log.size_bytes(), log.read(0, 1 << 20).bytes()) == before
    assert log.append(plain(b"k", b"next")).first_offset == 1


def test_format_errors_are_also_protocol_errors(open_log: OpenLog) -> None:
    with pytest.raises(MessageFormatError):
        open_log().append(_bad_crc())


def test_a_set_larger_than_a_segment_is_refused(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1024, max_message_bytes=1 << 20)
    with pytest.raises(MessageSetLargerThanSegmentError) as caught:
        log.append(plain(b"k", b"x" * 2000))
    assert caught.value.code is ErrorCode.RECORD_LIST_TOO_LARGE


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_a_compacted_log_refuses_messages_without_a_key(open_log: OpenLog, codec: Codec) -> None:
    log = open_log(cleanup_policy="compact")
    with pytest.raises(KeylessMessageError) as caught:
        log.append(message_set([(b"k", b"1", 0), (None, b"2", 0)], codec))
    assert caught.value.code is ErrorCode.INVALID_RECORD  # not retriable, unlike CORRUPT_MESSAGE
    assert isinstance(caught.value, ValueError)
    assert log.log_end_offset == 0 and log.size_bytes() == 0
    log.append(message_set([(b"k", b"1", 0), (b"j", None, 0)], codec))
    assert log.log_end_offset == 2


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.SNAPPY], ids=["plain", "snappy"])
def test_log_append_time_stamps_the_brokers_clock(
    open_log: OpenLog, clock: FakeClock, codec: Codec
) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    result = log.append(message_set([(b"a", b"1", 5), (b"b", b"2", 6)], codec))
    assert result.log_append_time == clock.ms
    messages, _ = decode_messages(log.read(0, 1 << 20).bytes())  # CRCs verified
    assert [(m.timestamp, m.timestamp_type) for m in messages] == [(clock.ms, 1)] * 2


def test_v0_messages_are_accepted(open_log: OpenLog) -> None:
    log = open_log()
    log.append(encode_message(0, b"k", b"old", magic=0))
    (message,) = read_all(log)
    assert (message.offset, message.value, message.timestamp) == (0, b"old", -1)


# ------------------------------------------------------------------------------------------
# Reads


def _fill(log: PartitionLog, count: int, size: int = 40) -> None:
    for i in range(count):
        log.append(plain(b"k%d" % i, b"%d:" % i + b"v" * size, 1000 + i))


def test_reading_at_the_log_end_is_empty_and_beyond_it_out_of_range(open_log: OpenLog) -> None:
    log = open_log()
    _fill(log, 3)
    empty = log.read(3, 1000)
    assert (empty.length, empty.bytes()) == (0, b"")
    for offset in (-1, 4):
        with pytest.raises(LogOffsetOutOfRangeError) as caught:
            log.read(offset, 1000)
        assert caught.value.code is ErrorCode.OFFSET_OUT_OF_RANGE


def test_every_offset_reads_from_its_own_message(open_log: OpenLog) -> None:
    log = open_log(index_interval_bytes=100)
    _fill(log, 200)
    assert len(log.segment_base_offsets) > 2
    for offset in range(200):
        messages, _ = decode_messages(log.read(offset, 300).bytes())
        assert messages[0].offset == offset


def test_a_read_may_end_in_a_partial_message(open_log: OpenLog) -> None:
    log = open_log()
    _fill(log, 5)
    one = len(log.read(0, 1 << 20).bytes()) // 5
    result = log.read(1, one + one // 2)
    assert result.length == one + one // 2
    messages, whole = decode_messages(result.bytes())
    assert [m.offset for m in messages] == [1] and whole == one


def test_an_offset_inside_a_wrapper_reads_the_whole_wrapper(open_log: OpenLog) -> None:
    log = open_log()
    log.append(message_set([(b"k%d" % i, b"v", 0) for i in range(4)], Codec.GZIP))
    messages, _ = decode_messages(log.read(2, 1 << 20).bytes())
    assert [m.offset for m in messages] == [0, 1, 2, 3]  # the consumer skips 0 and 1


def test_a_read_stays_within_one_segment(open_log: OpenLog) -> None:
    log = open_log()
    _fill(log, 200)
    bases = log.segment_base_offsets
    messages, _ = decode_messages(log.read(0, 1 << 20).bytes())
    assert messages[-1].offset == bases[1] - 1


def test_max_offset_stops_the_read_before_it(open_log: OpenLog) -> None:
    log = open_log()
    _fill(log, 10)
    messages, _whole = decode_messages(log.read(2, 1 << 20, max_offset=6).bytes())
    assert [m.offset for m in messages] == [2, 3, 4, 5]
    assert log.read(6, 1 << 20, max_offset=6).length == 0


def test_high_watermark_follows_the_log_end_until_set(open_log: OpenLog) -> None:
    log = open_log()
    _fill(log, 5)
    assert log.high_watermark == 5
    log.high_watermark = 3
    _fill(log, 2)
    assert log.high_watermark == 3
    with pytest.raises(ValueError, match="high watermark"):
        log.high_watermark = 8


def test_a_read_result_can_be_sent_with_sendfile(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    _fill(log, 20)
    result = log.read(7, 500)
    with open(tmp_path / "sent", "wb") as out:
        sent = 0
        while sent < result.length:
            sent += os.sendfile(
                out.fileno(), result.fileno(), result.position + sent, result.length - sent
            )
    assert (tmp_path / "sent").read_bytes() == result.bytes()
    assert len(result.bytes()) == 500


def test_segments_roll_by_size_and_are_named_by_base_offset(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1024)
    _fill(log, 100)
    bases = log.segment_base_offsets
    assert len(bases) > 3 and bases[0] == 0
    for base in bases:
        assert (log.directory / f"{base:020d}.log").stat().st_size <= 1024
        assert (log.directory / f"{base:020d}.index").exists()
        assert (log.directory / f"{base:020d}.timeindex").exists()
    assert [m.offset for m in read_all(log)] == list(range(100))


def test_segments_roll_by_age(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(segment_ms=60_000, segment_bytes=1 << 20)
    _fill(log, 3)
    clock.advance(59)
    _fill(log, 1)
    assert log.segment_base_offsets == (0,)
    clock.advance(2)
    _fill(log, 1)
    assert log.segment_base_offsets == (0, 4)


def test_segment_age_counts_from_its_first_message_across_a_reopen(
    open_log: OpenLog, clock: FakeClock
) -> None:
    """segment_ms counts from the segment's first message, not from the first append since
    the log was opened: a restart does not postpone the roll."""
    log = open_log(segment_ms=60_000, segment_bytes=1 << 20)
    log.append(plain(b"k", b"first", clock.ms))
    log.close()
    clock.advance(61)
    log = open_log(segment_ms=60_000, segment_bytes=1 << 20)
    log.append(plain(b"k", b"second", clock.ms))
    assert log.segment_base_offsets == (0, 1)


def test_a_reopened_segment_with_a_future_timestamp_counts_from_the_reopen(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(segment_ms=60_000, segment_bytes=1 << 20)
    log.append(plain(b"k", b"first", clock.ms + 3_600_000))  # a producer clock ahead
    log.close()
    clock.advance(30)
    log = open_log(segment_ms=60_000, segment_bytes=1 << 20)
    clock.advance(59)
    log.append(plain(b"k", b"second", clock.ms))
    assert log.segment_base_offsets == (0,)
    clock.advance(2)
    log.append(plain(b"k", b"third", clock.ms))
    assert log.segment_base_offsets == (0, 2)


def test_roll_on_request_and_never_an_empty_segment(open_log: OpenLog) -> None:
    log = open_log()
    log.roll()
    assert log.segment_base_offsets == (0,)
    _fill(log, 2)
    log.roll()
    log.roll()
    assert log.segment_base_offsets == (0, 2)
    assert log.active_segment_base_offset == 2


# ------------------------------------------------------------------------------------------
# Timestamps


def test_offset_for_timestamp(open_log: OpenLog) -> None:
    log = open_log(index_interval_bytes=64)
    for i in range(100):
        log.append(plain(b"k", b"v" * 30, 1000 + 10 * i))
    assert len(log.segment_base_offsets) > 1
    assert log.offset_for_timestamp(-2) == (0, -1)
    assert log.offset_for_timestamp(-1) == (100, -1)
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1500) == (50, 1500)
    assert log.offset_for_timestamp(1501) == (51, 1510)
    assert log.offset_for_timestamp(1990) == (99, 1990)
    assert log.offset_for_timestamp(1991) is None


def test_offset_for_timestamp_with_timestamps_out_of_order(open_log: OpenLog) -> None:
    log = open_log(index_interval_bytes=0)
    for ts in (100, 300, 200, 400, 250, 500):
        log.append(plain(b"k", b"v", ts))
    assert log.offset_for_timestamp(250) == (1, 300)
    assert log.offset_for_timestamp(301) == (3, 400)


def test_offset_for_timestamp_looks_inside_wrappers(open_log: OpenLog) -> None:
    log = open_log()
    log.append(plain(b"k", b"v", 10))
    log.append(message_set([(b"a", b"1", 20), (b"b", b"2", 30), (b"c", b"3", 40)], Codec.GZIP))
    assert log.offset_for_timestamp(25) == (2, 30)
    assert log.offset_for_timestamp(40) == (3, 40)


def test_timestamp_lookup_survives_a_reopen(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(index_interval_bytes=64)
    for i in range(60):
        log.append(plain(b"k", b"v" * 30, 1000 + i))
    expected = [log.offset_for_timestamp(t) for t in range(990, 1070, 7)]
    log.close()
    again = open_log()
    assert [again.offset_for_timestamp(t) for t in range(990, 1070, 7)] == expected


# ------------------------------------------------------------------------------------------
# Flushing


def _recovery_point(log: PartitionLog) -> int | None:
    path = log.directory / "recovery-point"
    return int(path.read_text()) if path.exists() else None


def test_flush_every_n_messages(open_log: OpenLog, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    log = open_log(flush_messages=10)
    synced.clear()
    log.append(message_set([(b"k", b"v", 0)] * 6))
    assert synced == [] and _recovery_point(log) == 0
    log.append(message_set([(b"k", b"v", 0)] * 4, Codec.GZIP))  # 10 messages: flush
    assert synced and _recovery_point(log) == 10
    synced.clear()
    log.append(plain(b"k", b"v"))
    assert synced == [] and _recovery_point(log) == 10


def test_flush_after_flush_ms(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(flush_ms=1000)
    assert not log.maybe_flush()  # nothing written
    log.append(plain(b"k", b"v"))
    clock.advance(0.5)
    assert not log.maybe_flush()
    clock.advance(0.6)
    assert log.maybe_flush()
    assert _recovery_point(log) == 1
    assert not log.maybe_flush()


def test_flush_ms_is_also_honoured_by_an_append(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(flush_ms=1000)
    log.append(plain(b"k", b"v"))
    clock.advance(2)
    log.append(plain(b"k", b"v"))
    assert _recovery_point(log) == 2


def test_entries_are_stored_exactly_as_the_seed_lays_them_out(open_log: OpenLog) -> None:
    log = open_log()
    log.append(encode_records([(b"key", b"value", 42)]))
    raw = (log.directory / f"{0:020d}.log").read_bytes()
    offset, size, _crc, magic, attributes, timestamp, klen = struct.unpack_from(">qiIbbqi", raw)
    assert (offset, size, magic, attributes, timestamp, klen) == (
        0,
        4 + 1 + 1 + 8 + 4 + 3 + 4 + 5,
        1,
        0,
        42,
        3,
    )
    assert len(raw) == LOG_OVERHEAD + size
    (entry,), _ = read_entries(raw)
    assert (entry.key, entry.value) == (b"key", b"value")


def test_error_code_maps_every_failure(open_log: OpenLog) -> None:
    log = open_log(max_message_bytes=100)
    for data, code in (
        (_bad_crc(), ErrorCode.CORRUPT_MESSAGE),
        (plain(b"k", b"x" * 200), ErrorCode.MESSAGE_TOO_LARGE),
    ):
        with pytest.raises(LogError) as caught:
            log.append(data)
        assert error_code(caught.value) is code
    assert error_code(MessageFormatError("bad")) is ErrorCode.CORRUPT_MESSAGE
    assert error_code(OSError("disk")) is ErrorCode.UNKNOWN_SERVER_ERROR


def test_max_message_bytes_bounds_each_message_not_the_set(open_log: OpenLog) -> None:
    """Kafka's max.message.bytes is per message (or compressed wrapper): a producer's request
    of several messages each under it is written whole, larger than the limit as it is."""
    log = open_log(max_message_bytes=2000, segment_bytes=1 << 20)
    each = plain(b"k", b"x" * 1500)
    assert len(each) < 2000 < 3 * len(each)
    result = log.append(each * 3)
    assert (result.first_offset, result.last_offset) == (0, 2)
    with pytest.raises(MessageSetTooLargeError, match=r"a message of 2[0-9]{3} bytes exceeds"):
        log.append(each + plain(b"k", b"x" * 2100))
    assert log.log_end_offset == 3  # the refused set wrote nothing
