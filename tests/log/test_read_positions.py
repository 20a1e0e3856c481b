"""Where a read starts: the append starts a segment remembers (``Segment.find_position``) give
the same position as a scan of the stored entries, across appends, rolls, truncations (a
follower), retention and reopening."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log import LogOffsetOutOfRangeError, PartitionLog
from broker.log.layout import LOG, segment_path
from broker.log.segment import APPEND_STARTS_KEPT
from protocol.compression import Codec
from protocol.messageset import read_entries
from tests.log.support import FakeClock, message_set, plain, read_all, triples

OpenLog = Callable[..., PartitionLog]


def scanned_start(log: PartitionLog, offset: int) -> tuple[int, int] | None:
    """``(segment base, position)`` of the first stored entry holding ``offset`` or a later
    one, found by decoding every segment file: what a read at ``offset`` must start at."""
    for base in log.segment_base_offsets:
        data = segment_path(log.directory, base, LOG).read_bytes()
        entries, _ = read_entries(data)
        for entry in entries:
            if entry.offset >= offset:
                return base, entry.position
    return None


def assert_reads_start_right(log: PartitionLog, offsets: list[int]) -> None:
    for offset in offsets:
        expected = scanned_start(log, offset)
        assert expected is not None, offset
        result = log.read(offset, 1 << 20)
        base = expected[0]
        data = segment_path(log.directory, base, LOG).read_bytes()
        assert result.position == expected[1], offset
        assert result.bytes() == data[expected[1] : expected[1] + result.length], offset


def mixed_sets(count: int) -> list[bytes]:
    """Sets of one to three messages of varied sizes, some compressed (a wrapper's stored
    offset is its last message's, above the offset a reader asks for)."""
    return [
        message_set(
            [(b"k", b"v" * (7 * i % 50), i) for _ in range(1 + i % 3)],
            Codec.GZIP if i % 4 == 1 else Codec.NONE,
        )
        for i in range(count)
    ]


def test_reads_at_and_around_every_append_start_match_a_scan(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1 << 20)
    starts = [log.append(data).first_offset for data in mixed_sets(30)]
    around = sorted({o + d for o in starts for d in (0, 1, 2)} - {log.log_end_offset})
    assert_reads_start_right(log, [o for o in around if o < log.log_end_offset])


def test_append_starts_stay_right_across_rolls_and_reopening(open_log: OpenLog) -> None:
    log = open_log()  # 4 KiB segments
    starts = [log.append(data).first_offset for data in mixed_sets(120)]
    assert len(log.segment_base_offsets) > 3
    assert_reads_start_right(log, starts)
    expected = triples(read_all(log))
    log.close()
    reopened = open_log()
    assert_reads_start_right(reopened, starts)
    assert triples(read_all(reopened)) == expected


def test_only_the_latest_append_starts_are_kept_and_older_ones_still_read_right(
    open_log: OpenLog,
) -> None:
    log = open_log(segment_bytes=1 << 20, index_interval_bytes=1 << 16)
    count = 2 * APPEND_STARTS_KEPT + 10
    starts = [log.append(plain(b"k", b"v" * (i % 40))).first_offset for i in range(count)]
    assert_reads_start_right(log, starts)


@pytest.mark.parametrize("as_follower", [False, True], ids=["leader", "follower"])
def test_a_truncation_forgets_the_append_starts_past_the_cut(
    open_log: OpenLog, tmp_path: Path, as_follower: bool
) -> None:
    log = open_log(segment_bytes=1 << 20, index_interval_bytes=1 << 16)
    for i in range(5):  # offsets 0-9, two small messages a set: starts 0, 2, 4, 6, 8
        log.append(message_set([(b"k", b"a", i), (b"k", b"b", i)]))
    assert log.truncate_to(4) == 4
    # Different sizes from 4 on: the positions of 6 and 8 are not what they were.
    larger = [message_set([(b"k", b"x" * 300, 0)] * 3), message_set([(b"k", b"y" * 5, 0)] * 3)]
    if as_follower:
        source = open_log(tmp_path / "leader-0", segment_bytes=1 << 20)
        source.append(message_set([(b"k", b"a", 0)] * 4))
        for data in larger:
            source.append(data)
        log.append_as_follower(source.read(4, 1 << 20).bytes())
    else:
        for data in larger:
            log.append(data)
    assert log.log_end_offset == 10
    assert_reads_start_right(log, list(range(10)))
    assert [m.value for m in read_all(log, 4)] == [b"x" * 300] * 3 + [b"y" * 5] * 3


def test_a_read_taken_before_retention_deletes_its_segment_still_reads_it(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(retention_ms=1000)
    sets = mixed_sets(60)
    starts = [log.append(data).first_offset for data in sets[:5]]
    assert log.segment_base_offsets == (0,)  # still the active segment: a remembered start
    assert_reads_start_right(log, starts)
    held = log.read(starts[-1], 1 << 20)
    before = held.bytes()
    starts += [log.append(data).first_offset for data in sets[5:]]
    clock.advance(3600)
    assert log.enforce_retention() >= 1
    assert log.log_start_offset > starts[4]
    assert held.bytes() == before  # the descriptor outlives the unlinked file
    with pytest.raises(LogOffsetOutOfRangeError):
        log.read(starts[4], 1 << 20)
    assert_reads_start_right(log, [o for o in starts if o >= log.log_start_offset])


@pytest.mark.parametrize("interval", [0, 256], ids=["every-entry-indexed", "sparse-index"])
def test_reads_at_every_offset_match_a_scan_whether_indexed_or_not(
    open_log: OpenLog, interval: int
) -> None:
    log = open_log(segment_bytes=1 << 20, index_interval_bytes=interval)
    for data in mixed_sets(40):
        log.append(data)
    log.close()  # reopened: no append starts remembered, every read goes through the index
    reopened = open_log(segment_bytes=1 << 20, index_interval_bytes=interval)
    assert_reads_start_right(reopened, list(range(reopened.log_end_offset)))
