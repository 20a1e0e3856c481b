"""The log start inside a record batch (DeleteRecords, a follower following its leader's log
start) and retention over segments of batches: reads from the log start return the batch that
holds it, reads below it are refused, ListOffsets' earliest gives it, and it survives a
restart; the producer state outlives the records it came from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log import LogOffsetOutOfRangeError, PartitionLog
from protocol import record_batch
from protocol.compression import BatchCodec, Codec
from protocol.messageset import decode_messages, encode_message_set
from protocol.record_batch import decode_batches, encode_batch
from tests.log.support import FakeClock, crash_copy

OpenLog = Callable[..., PartitionLog]
EARLIEST = -2


def first_entry(log: PartitionLog, offset: int) -> tuple[int, int, list[int]]:
    """Base and last offset of the entry a read at ``offset`` starts with, and its offsets."""
    data = log.read(offset, 1 << 16).bytes()
    assert data
    size = 12 + int.from_bytes(data[8:12], "big")
    entry = data[:size]
    if entry[16] == record_batch.MAGIC:
        (b,) = decode_batches(entry)
        return b.header.base_offset, b.header.last_offset, [r.offset for r in b.records]
    messages, _ = decode_messages(entry)
    return messages[0].offset, messages[-1].offset, [m.offset for m in messages]


def fill(log: PartitionLog, now_ms: int, batches: int = 30) -> None:
    """Batches of five records (every codec in turn, some idempotent) with a v1 gzip wrapper
    of three messages after every fourth."""
    codecs = list(BatchCodec)
    for i in range(batches):
        records = [(b"k%d" % j, b"v%d-%d" % (i, j) * 8, now_ms + i) for j in range(5)]
        fields = {"producer_id": 42, "producer_epoch": 0, "base_sequence": 5 * (i // 2)} \
            if i % 2 == 0 else {}
        log.append(encode_batch(records, codec=codecs[i % len(codecs)],
                                **fields))  # type: ignore[arg-type]
        if i % 4 == 3:
            log.append(encode_message_set([(b"w", b"x" * 30, now_ms + i)] * 3,
                                          codec=Codec.GZIP))


@pytest.mark.parametrize("inside", [1, 4], ids=["second-record", "last-record"])
def test_the_log_start_inside_a_batch(open_log: OpenLog, clock: FakeClock, tmp_path: Path,
                                      inside: int) -> None:
    log = open_log(segment_bytes=1024)
    fill(log, clock.ms)
    bases = log.segment_base_offsets
    assert len(bases) > 3
    # the first batch of the third segment (not a wrapper), then a few records into it
    base, last, offsets = first_entry(log, bases[2])
    while len(offsets) != 5:
        base, last, offsets = first_entry(log, last + 1)
    cut = base + inside
    assert log.advance_log_start(cut)
    assert log.log_start_offset == cut
    assert log.segment_base_offsets[0] <= base  # the segment holding the batch stays
    assert first_entry(log, cut) == (base, base + 4, list(range(base, base + 5)))
    with pytest.raises(LogOffsetOutOfRangeError):
        log.read(cut - 1, 100)
    assert log.offset_for_timestamp(EARLIEST) == (cut, -1)
    found = log.offset_for_timestamp(0)
    assert found is not None and found[0] == cut  # never below the log start
    end = log.log_end_offset
    log.close()
    for reopened in (open_log(log.directory, segment_bytes=1024),
                     open_log(crash_copy(log.directory, tmp_path / "crashed-0"),
                              segment_bytes=1024)):
        assert (reopened.log_start_offset, reopened.log_end_offset) == (cut, end)
        assert first_entry(reopened, cut)[0] == base
        assert reopened.offset_for_timestamp(EARLIEST) == (cut, -1)


def test_a_follower_follows_the_leaders_log_start_into_a_batch(
    open_log: OpenLog, clock: FakeClock, tmp_path: Path
) -> None:
    leader = open_log(segment_bytes=1024)
    fill(leader, clock.ms, batches=8)
    follower = open_log(tmp_path / "f-0", segment_bytes=1024)
    offset = 0
    while offset < leader.log_end_offset:  # as a replica fetcher copies, read by read
        data = leader.read(offset, 1 << 16).bytes()
        offset = follower.append_as_follower(data, leader_epoch=0).last_offset + 1
    assert leader.advance_log_start(12) and follower.advance_log_start(12)
    assert first_entry(follower, 12) == first_entry(leader, 12) == (10, 14, list(range(10, 15)))
    assert follower.read(12, 1 << 16).bytes() == leader.read(12, 1 << 16).bytes()


def test_retention_over_batches_keeps_the_producer_whose_batches_it_deleted(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(segment_bytes=1024, retention_bytes=1100)
    fill(log, clock.ms)
    last_sent = encode_batch([(b"k", b"last", clock.ms)], producer_id=42, producer_epoch=0,
                             base_sequence=75)
    last = log.append(last_sent)
    log.roll()
    log.append(encode_batch([(b"k", b"pad" * 300, clock.ms)]))
    log.roll()
    log.append(encode_batch([(b"k", b"pad" * 300, clock.ms)]))
    assert log.enforce_retention() > 0
    start = log.log_start_offset
    assert start > last.last_offset  # the producer's batches are all gone
    assert start == log.segment_base_offsets[0]
    assert first_entry(log, start)[0] == start
    assert log.offset_for_timestamp(EARLIEST) == (start, -1)
    again = log.append(last_sent)  # retried: still known, answered with its offset
    assert again.first_offset == last.first_offset
    nxt = encode_batch([(b"k", b"next", clock.ms)], producer_id=42, producer_epoch=0,
                       base_sequence=76)
    assert log.append(nxt).first_offset == log.log_end_offset - 1
