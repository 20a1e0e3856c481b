from __future__ import annotations

from collections.abc import Callable

import pytest

from broker.log import LogOffsetOutOfRangeError, PartitionLog
from protocol.messageset import decode_messages
from tests.log.support import FakeClock, plain, read_all

OpenLog = Callable[..., PartitionLog]
HOUR_MS = 3600 * 1000


def _fill(log: PartitionLog, count: int, timestamp: int) -> None:
    for i in range(count):
        log.append(plain(b"k%d" % i, b"v" * 40, timestamp))


def test_retention_by_age_deletes_old_closed_segments(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(segment_bytes=1024, retention_ms=HOUR_MS)
    _fill(log, 40, clock.ms - 3 * HOUR_MS)  # old
    log.roll()
    _fill(log, 30, clock.ms)  # fresh
    old_end = 40
    assert log.enforce_retention() >= 2
    assert log.log_start_offset == old_end
    assert [m.offset for m in read_all(log)] == list(range(40, 70))
    with pytest.raises(LogOffsetOutOfRangeError):
        log.read(0, 100)
    for base in range(old_end):
        assert not (log.directory / f"{base:020d}.log").exists()
    assert log.enforce_retention() == 0


def test_retention_never_deletes_the_active_segment(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(segment_bytes=1024, retention_ms=HOUR_MS)
    _fill(log, 30, clock.ms - 3 * HOUR_MS)
    segments = len(log.segment_base_offsets)
    assert segments > 1
    assert log.enforce_retention() == segments - 1
    assert len(log.segment_base_offsets) == 1
    assert log.log_start_offset == log.active_segment_base_offset
    assert log.log_end_offset == 30
    assert [m.offset for m in read_all(log)] == list(range(log.log_start_offset, 30))


def test_retention_by_age_follows_the_clock(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(segment_bytes=1024, retention_ms=HOUR_MS)
    _fill(log, 30, clock.ms)
    log.roll()
    assert log.enforce_retention() == 0
    closed = len(log.segment_base_offsets) - 1
    clock.advance(3601)
    assert log.enforce_retention() == closed
    assert log.segment_base_offsets == (30,)


def test_retention_by_size_keeps_at_least_retention_bytes(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1024, retention_bytes=2500)
    _fill(log, 100, 0)
    total = log.size_bytes()
    deleted = log.enforce_retention()
    assert deleted > 0
    assert 2500 <= log.size_bytes() < total
    sizes = [(log.directory / f"{b:020d}.log").stat().st_size for b in log.segment_base_offsets]
    assert log.size_bytes() - sizes[0] < 2500  # one more deletion would go below the limit
    assert [m.offset for m in read_all(log)] == list(range(log.log_start_offset, 100))


def test_a_compacted_log_is_not_deleted_by_retention(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(segment_bytes=1024, retention_ms=1, retention_bytes=1, cleanup_policy="compact")
    _fill(log, 50, clock.ms - 3 * HOUR_MS)
    assert log.enforce_retention() == 0
    assert log.log_start_offset == 0


def test_a_read_answered_before_deletion_stays_readable(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(segment_bytes=1024, retention_ms=HOUR_MS)
    _fill(log, 30, clock.ms - 3 * HOUR_MS)
    log.roll()
    result = log.read(0, 600)
    before = result.bytes()
    assert log.enforce_retention() > 0
    assert not (log.directory / f"{0:020d}.log").exists()
    assert result.bytes() == before  # the descriptor keeps the unlinked file
    assert decode_messages(before)[0][0].offset == 0


def test_a_reader_iterating_while_segments_are_deleted(open_log: OpenLog, clock: FakeClock) -> None:
    """A consumer walks the log while retention runs between its fetches: everything it gets
    is what was written at that offset, in order; once its position is deleted it is told so."""
    log = open_log(segment_bytes=1024, retention_bytes=3000)
    written = {}
    for i in range(200):
        value = b"%05d" % i + b"v" * 30
        log.append(plain(b"k", value, 0))
        written[i] = value
    offset, seen = 0, []
    while True:
        try:
            result = log.read(offset, 300)
        except LogOffsetOutOfRangeError:
            assert offset < log.log_start_offset
            break
        log.enforce_retention()  # between the answer and its use
        messages, _ = decode_messages(result.bytes())
        for m in messages:
            if m.offset >= offset:
                assert m.value == written[m.offset]
                seen.append(m.offset)
        offset = messages[-1].offset + 1
        for _ in range(3):  # the producer keeps writing
            value = b"%05d" % (len(written)) + b"v" * 30
            written[log.append(plain(b"k", value, 0)).first_offset] = value
        if offset >= log.log_end_offset:
            break
    assert seen == list(range(seen[0], seen[-1] + 1))
