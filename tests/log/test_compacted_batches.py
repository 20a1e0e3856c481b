"""Compaction of logs holding all three magics: v0 messages, v1 messages and wrappers, and
record batches (magic 2) of every codec, with headers. A batch that loses records is written
again around the rest with its offset range, producer fields and codec; one left empty stays,
as its header, while it is the last batch of a producer the partition tracks; the producer
state answers its retry as a duplicate after compaction, a restart and recovery."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log import InvalidMessageError, PartitionLog
from protocol import record_batch
from protocol.compression import BatchCodec, Codec
from protocol.messageset import encode_message_set
from protocol.record_batch import decode_batches, encode_batch
from tests.log.support import (
    FakeClock,
    Headers,
    Row,
    crash_copy,
    header,
    last_offset,
    read_rows,
    stored,
)

OpenLog = Callable[..., PartitionLog]
DAY_MS = 24 * 3600 * 1000
SETTINGS: dict[str, object] = {
    "cleanup_policy": "compact",
    "segment_bytes": 1024,
    "index_interval_bytes": 64,
    "min_cleanable_dirty_ratio": 0.0,
    "delete_retention_ms": DAY_MS,
}


def compacted_log(open_log: OpenLog, directory: Path | None = None) -> PartitionLog:
    return open_log(directory, **SETTINGS)


def batches(log: PartitionLog) -> dict[int, bytes]:
    """The stored record batches, by base offset (a read stops at a segment's end)."""
    found: dict[int, bytes] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset and (data := log.read(offset, 1 << 20).bytes()):
        entries = stored(data)
        found.update((header(e).base_offset, e) for e, _ in entries if e[16] == record_batch.MAGIC)
        offset = last_offset(*entries[-1]) + 1
    return found


def v2(rows: list[tuple[bytes, bytes | None]], ts: int, codec: BatchCodec = BatchCodec.NONE,
       headers: Headers = (), **fields: int) -> bytes:
    records = [(k, v, ts + i, headers) for i, (k, v) in enumerate(rows)]
    return encode_batch(records, codec=codec, **fields)  # type: ignore[arg-type]


def _mixed_appends(log: PartitionLog, now_ms: int) -> list[Row]:
    """Appends every magic and codec in turn over several segments, keys from a small set so
    that compaction removes most records, leaves some batches and wrappers partly and some
    whole; what each offset holds."""
    expected: list[Row] = []
    codecs = list(BatchCodec)
    for i in range(40):
        keys = [b"k%d" % ((i * 3 + j) % 7) for j in range(1 + i % 4)]
        if i % 9 == 8:
            keys = [b"solo-%d" % i] * (1 + i % 3)  # a key no later entry has
        values = [b"%d-%d:" % (i, j) + b"x" * (i % 5) for j in range(len(keys))]
        ts = now_ms + 100 * i
        kind = i % 4
        headers: Headers = ()
        if kind == 0:
            data = encode_message_set([(k, v, -1) for k, v in zip(keys, values, strict=True)],
                                      magic=0)
        elif kind == 1:
            data = encode_message_set(
                [(k, v, ts + j) for j, (k, v) in enumerate(zip(keys, values, strict=True))],
                codec=Codec.GZIP if i % 8 == 1 else Codec.NONE)
        else:
            headers = (("trace", b"%d" % i), ("empty", None))
            codec = codecs[(i // 4) % len(codecs)]
            data = v2(list(zip(keys, values, strict=True)), ts, codec, headers)
        first = log.append(data).first_offset
        expected += [(first + j, k, v, headers)
                     for j, (k, v) in enumerate(zip(keys, values, strict=True))]
    return expected


def newest_per_key(expected: list[Row], below: int) -> list[Row]:
    latest = {row[1]: row[0] for row in expected if row[0] < below}
    return [row for row in expected if row[0] >= below or latest[row[1]] == row[0]]


def test_a_mixed_log_keeps_the_newest_record_per_key_and_reads_back_at_every_offset(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = compacted_log(open_log)
    expected = _mixed_appends(log, clock.ms)
    log.roll()
    before = batches(log)
    assert {header(b).codec for b in before.values()} == set(BatchCodec)
    assert log.compact()
    kept = newest_per_key(expected, log.active_segment_base_offset)
    assert len(kept) < len(expected) / 2
    assert read_rows(log) == kept
    for offset in range(log.log_end_offset):
        following = [row for row in kept if row[0] >= offset]
        assert read_rows(log, offset, chunk=256)[:1] == following[:1]
    # each batch still there kept its offset range, producer fields and codec; one that lost
    # no record is the same bytes; one that lost all (no producer) is gone
    after = batches(log)
    survivors = {row[0] for row in kept}
    for base, original in before.items():
        old = header(original)
        offsets = set(range(old.base_offset, old.last_offset + 1))
        if base not in after:
            assert not offsets & survivors
            continue
        new = header(after[base])
        assert new._replace(crc=0, batch_length=0, record_count=0, base_timestamp=0,
                            max_timestamp=0) == old._replace(crc=0, batch_length=0,
                                                             record_count=0, base_timestamp=0,
                                                             max_timestamp=0)
        assert new.record_count == len(offsets & survivors) > 0
        if new.record_count == old.record_count:
            assert after[base] == original
        record_batch.check_crc(after[base], new, 0)
    assert any(header(b).record_count < header(before[o]).record_count for o, b in after.items()
               if header(before[o]).codec is not BatchCodec.NONE)  # some were recompressed


def test_a_compacted_mixed_log_recovers_after_a_crash(
    open_log: OpenLog, clock: FakeClock, tmp_path: Path
) -> None:
    log = compacted_log(open_log)
    expected = _mixed_appends(log, clock.ms)
    log.roll()
    assert log.compact()
    kept = newest_per_key(expected, log.active_segment_base_offset)
    log.flush()
    crashed = compacted_log(open_log, crash_copy(log.directory, tmp_path / "crashed-0"))
    assert crashed.recovery_loss is None
    assert crashed.log_end_offset == log.log_end_offset
    assert read_rows(crashed) == kept
    # the index points still find every offset after recovery rebuilt them
    for offset in range(0, crashed.log_end_offset, 3):
        assert read_rows(crashed, offset, chunk=256)[:1] == [r for r in kept if r[0] >= offset][:1]


def test_tombstones_in_batches_stay_for_delete_retention_ms_then_go(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = compacted_log(open_log)
    log.append(v2([(b"gone", b"1"), (b"kept", b"1")], clock.ms, BatchCodec.LZ4))
    log.append(v2([(b"gone", None), (b"kept", b"2")], clock.ms, BatchCodec.LZ4))
    log.roll()
    assert log.compact()
    assert [(r[1], r[2]) for r in read_rows(log)] == [(b"gone", None), (b"kept", b"2")]
    log.append(v2([(b"other", b"x")], clock.ms))
    log.roll()
    clock.advance(DAY_MS / 1000 + 1)
    assert log.compact()
    assert [(r[1], r[2]) for r in read_rows(log)] == [(b"kept", b"2"), (b"other", b"x")]


def idem(rows: list[tuple[bytes, bytes | None]], seq: int, ts: int, *, pid: int = 42,
         epoch: int = 0, codec: BatchCodec = BatchCodec.NONE) -> bytes:
    return v2(rows, ts, codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def _superseded_producers(log: PartitionLog, now_ms: int) -> tuple[bytes, bytes]:
    """Producer 42 and producer 7 each write batches, every record of which a later plain
    batch supersedes; 42's last batch sits in a closed segment. Returns 42's and 7's last
    batches as sent."""
    log.append(idem([(b"a", b"old"), (b"b", b"old")], 0, now_ms, pid=7))
    last_7 = idem([(b"a", b"old2")], 2, now_ms, pid=7, codec=BatchCodec.GZIP)
    log.append(last_7)
    log.append(idem([(b"c", b"old")], 0, now_ms, pid=42))
    last_42 = idem([(b"c", b"old2"), (b"d", b"old2")], 1, now_ms, pid=42,
                   codec=BatchCodec.ZSTD)
    log.append(last_42)
    log.append(v2([(k, b"new") for k in (b"a", b"b", b"c", b"d")], now_ms))
    log.roll()
    return last_42, last_7


def test_an_emptied_batch_stays_only_as_a_live_producers_last(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = compacted_log(open_log)
    last_42, _ = _superseded_producers(log, clock.ms)
    log.expire_producers(clock() + 2 * DAY_MS / 1000)  # both forgotten; 42 starts again
    assert not log.producers.active_producers()
    log.append(idem([(b"e", b"x")], 0, clock.ms, pid=42))  # 42 is back; 7 is not
    log.roll()
    end_before = log.log_end_offset
    # 42's old last batch (offsets 4-5) is no longer its last: dropped like 7's batches
    assert log.compact()
    assert sorted(batches(log)) == [6, 10]
    assert log.log_end_offset == end_before
    # a producer whose last batch loses every record keeps it, as an empty header
    log = compacted_log(open_log, log.directory.with_name("other-0"))
    last_42, last_7 = _superseded_producers(log, clock.ms)
    assert log.compact()
    kept = batches(log)
    assert sorted(kept) == [2, 4, 6]  # 7's and 42's last batches, then the plain one
    for base, sent in ((4, last_42), (2, last_7)):
        empty, original = header(kept[base]), header(sent)
        assert empty.record_count == 0 and len(kept[base]) == record_batch.HEADER_BYTES
        assert empty.codec is BatchCodec.NONE
        assert (empty.last_offset_delta, empty.producer_id, empty.producer_epoch,
                empty.base_sequence, empty.max_timestamp) == (
            original.last_offset_delta, original.producer_id, original.producer_epoch,
            original.base_sequence, original.max_timestamp)
        record_batch.check_crc(kept[base], empty, 0)
    assert [r[:3] for r in read_rows(log)] == [(6 + i, k, b"new") for i, k in
                                               enumerate((b"a", b"b", b"c", b"d"))]
    for offset in range(log.log_end_offset):  # offsets inside an empty batch read on
        assert read_rows(log, offset, chunk=128)[:1] == read_rows(log, max(offset, 6))[:1]


@pytest.mark.parametrize("reopen", ["no", "snapshot", "log-only"])
def test_a_retried_last_batch_is_a_duplicate_after_compaction(
    open_log: OpenLog, clock: FakeClock, tmp_path: Path, reopen: str
) -> None:
    log = compacted_log(open_log)
    last_42, last_7 = _superseded_producers(log, clock.ms)
    assert log.compact()
    if reopen == "snapshot":
        log.close()
        log = compacted_log(open_log, log.directory)
    elif reopen == "log-only":
        log.flush()
        copy = crash_copy(log.directory, tmp_path / "copy-0")
        for path in copy.glob("*.snapshot"):
            path.unlink()
        log = compacted_log(open_log, copy)
        assert log.recovery_loss is None
    end = log.log_end_offset
    again = log.append(last_42)
    assert (again.first_offset, again.last_offset) == (4, 5)
    assert log.append(last_7).first_offset == 2
    assert log.log_end_offset == end
    assert log.append(idem([(b"e", b"next")], 3, clock.ms, pid=42)).first_offset == end
    assert log.append(idem([(b"f", b"next")], 3, clock.ms, pid=7)).first_offset == end + 1


def test_a_produced_batch_with_gaps_between_its_offsets_is_refused(open_log: OpenLog,
                                                                   clock: FakeClock) -> None:
    """Only compaction leaves gaps: a client's batch must hold offsets 0..n-1."""
    log = open_log()
    sent = v2([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], clock.ms)
    full = record_batch.read_batch_header(sent)
    assert full is not None
    (decoded,) = decode_batches(sent)
    gapped = record_batch.encode_retained(full, [decoded.records[0], decoded.records[2]])
    with pytest.raises(InvalidMessageError, match=r"offset deltas must be 0\.\.1"):
        log.append(gapped)
    assert log.log_end_offset == 0
    # a follower takes it as the leader stored it
    result = log.append_as_follower(record_batch.with_base_offset(gapped, 0), leader_epoch=0)
    assert (result.first_offset, result.last_offset) == (0, 2)
    assert [r[0] for r in read_rows(log)] == [0, 2]


def test_a_bounded_key_map_over_batches_gives_the_same_log_in_several_passes(
    open_log: OpenLog, clock: FakeClock, tmp_path: Path
) -> None:
    """The map fills in the middle of a batch: records past its end are kept for the next
    pass, which finishes the job."""
    from broker.log import compaction

    unbounded = compacted_log(open_log, tmp_path / "u-0")
    bounded = open_log(tmp_path / "b-0", **{
        **SETTINGS, "cleaner_dedupe_buffer_bytes": 4 * compaction.map_entry_bytes(b"k0")})
    for log in (unbounded, bounded):
        _mixed_appends(log, clock.ms)
        log.roll()
        assert log.compact()
    assert read_rows(bounded) == read_rows(unbounded)
    assert batches(bounded) == batches(unbounded)


def test_a_log_append_time_batch_keeps_its_timestamp_type_and_time(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(**{**SETTINGS, "message_timestamp_type": "LogAppendTime"})
    log.append(v2([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], 5, BatchCodec.SNAPPY))
    clock.advance(10)
    log.append(v2([(b"a", b"2")], 5))
    log.roll()
    assert log.compact()
    first = header(batches(log)[0])
    assert first.timestamp_type.name == "LOG_APPEND_TIME"
    assert first.max_timestamp == clock.ms - 10_000 and first.record_count == 2
    assert first.codec is BatchCodec.SNAPPY
    assert [(r[0], r[1]) for r in read_rows(log)] == [(1, b"b"), (2, b"c"), (3, b"a")]
    assert log.offset_for_timestamp(clock.ms - 10_000) == (1, clock.ms - 10_000)
