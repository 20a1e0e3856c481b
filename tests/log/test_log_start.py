"""``advance_log_start`` (DeleteRecords): the log start moves above the first segment's base,
whole segments below it go, and the ``log-start-offset`` file keeps it across reopening."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log import LogOffsetOutOfRangeError, PartitionLog, layout
from tests.log.support import FakeClock, crash_copy, plain, read_all

OpenLog = Callable[..., PartitionLog]


def _fill(log: PartitionLog, count: int) -> None:
    for i in range(count):
        log.append(plain(b"k%d" % i, b"v" * 40, 0))


def test_advance_log_start_deletes_whole_segments_and_hides_the_rest(
    open_log: OpenLog, tmp_path: Path, clock: FakeClock
) -> None:
    log = open_log(segment_bytes=1024)
    _fill(log, 60)
    bases = log.segment_base_offsets
    assert len(bases) > 3
    cut = bases[2] + 3  # inside the third segment
    assert log.advance_log_start(cut)
    assert log.log_start_offset == cut
    assert log.segment_base_offsets == bases[2:]
    for base in bases[:2]:
        assert not (log.directory / f"{base:020d}.log").exists()
    with pytest.raises(LogOffsetOutOfRangeError):
        log.read(cut - 1, 100)
    assert read_all(log)[0].offset == cut
    assert [m.offset for m in read_all(log) if m.offset >= cut] == list(range(cut, 60))
    assert log.offset_for_timestamp(-2) == (cut, -1)
    assert log.offset_for_timestamp(0) == (cut, 0)  # never below the log start
    assert not log.advance_log_start(cut - 1)  # lower: nothing changes
    assert log.log_start_offset == cut
    with pytest.raises(LogOffsetOutOfRangeError):
        log.advance_log_start(61)
    assert layout.read_offset_file(log.directory / layout.LOG_START_OFFSET) == cut

    copy = crash_copy(log.directory, tmp_path / "crashed-0")  # no clean shutdown
    log.close()
    assert open_log(log.directory).log_start_offset == cut
    assert open_log(copy).log_start_offset == cut


def test_the_log_start_can_reach_the_log_end_and_a_follower_restart_lowers_it(
    open_log: OpenLog,
) -> None:
    log = open_log(segment_bytes=1024)
    _fill(log, 20)
    assert log.advance_log_start(20)
    assert (log.log_start_offset, log.log_end_offset) == (20, 20)
    assert read_all(log) == []
    log.append(plain(b"k", b"v", 0))
    assert [m.offset for m in read_all(log)] == [20]
    # a follower starting over below it (truncate_fully_and_start_at) moves it down
    log.truncate_fully_and_start_at(5)
    assert (log.log_start_offset, log.log_end_offset) == (5, 5)
    log.close()
    assert open_log(log.directory).log_start_offset == 5
