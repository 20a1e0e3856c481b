"""Record batches (magic 2) in the log, beside magic 0 and 1 entries: appends assign base
offsets and leader epochs by patching the header, LogAppendTime restamps it, and indexes,
recovery, reads, ListOffsets by time and follower appends work across every boundary of a
mixed log. Batches are built by ``encode_batch`` here; tests/protocol holds it to hand-built
bytes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log import (
    CorruptMessageSetError,
    InvalidMessageError,
    KeylessMessageError,
    PartitionLog,
)
from broker.log.errors import ProducerTimestampTypeError
from protocol import record_batch
from protocol.compression import BatchCodec, Codec
from protocol.record_batch import decode_batches, encode_batch
from tests.log.support import FakeClock, crash_copy, message_set, read_rows

OpenLog = Callable[..., PartitionLog]


NOW_MS = FakeClock().ms  # the clock's start: timestamps producer state does not expire


def batch(values: list[bytes], *, ts: int = NOW_MS, codec: BatchCodec = BatchCodec.NONE,
          key: bytes | None = b"k", headers: tuple[tuple[str, bytes | None], ...] = (),
          **fields: int) -> bytes:
    records = [(key, v, ts + i, headers) for i, v in enumerate(values)]
    return encode_batch(records, base_offset=0, codec=codec, **fields)  # type: ignore[arg-type]


def test_an_appended_batch_gets_its_base_offset_and_the_leader_epoch_and_keeps_its_bytes(
    open_log: OpenLog,
) -> None:
    log = open_log()
    log.append(message_set([(b"a", b"1", 5)]))
    sent = batch([b"x", b"y", b"z"], headers=(("h", b"v"),))
    result = log.append(sent, leader_epoch=7)
    assert (result.first_offset, result.last_offset, result.log_append_time) == (1, 3, -1)
    stored = log.read(1, 1 << 16).bytes()
    assert stored[:8] == (1).to_bytes(8, "big")
    assert int.from_bytes(stored[12:16], "big") == 7  # partition leader epoch
    assert stored[16:] == sent[16:]  # magic, CRC, attributes, records: as sent
    assert [r[:3] for r in read_rows(log)] == [
        (0, b"a", b"1"), (1, b"k", b"x"), (2, b"k", b"y"), (3, b"k", b"z")]
    assert read_rows(log, 2)[0] == (2, b"k", b"y", (("h", b"v"),))


def test_log_append_time_restamps_the_batch_and_recomputes_its_crc(open_log: OpenLog,
                                                                   clock: FakeClock) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    result = log.append(batch([b"x", b"y"], ts=5))
    assert result.log_append_time == clock.ms
    stored = log.read(0, 1 << 16).bytes()
    (b,) = decode_batches(stored)  # the CRC checks
    assert b.header.max_timestamp == clock.ms
    assert [r.timestamp for r in b.records] == [clock.ms, clock.ms]


@pytest.mark.parametrize("codec", list(BatchCodec))
def test_every_codec_is_stored_and_read_back(open_log: OpenLog, codec: BatchCodec) -> None:
    log = open_log()
    log.append(batch([b"v%d" % i * 20 for i in range(10)], codec=codec))
    assert [r[2] for r in read_rows(log)] == [b"v%d" % i * 20 for i in range(10)]


def test_bad_batches_are_refused_and_nothing_is_written(open_log: OpenLog) -> None:
    log = open_log()
    good = batch([b"x"])
    damaged = bytearray(good)
    damaged[-1] ^= 1
    with pytest.raises(CorruptMessageSetError, match="CRC-32C"):
        log.append(bytes(damaged))
    with pytest.raises(InvalidMessageError, match="mixes record batches"):
        log.append(message_set([(b"a", b"1", 5)]) + good)
    with pytest.raises(InvalidMessageError, match="control batches"):
        log.append(encode_batch([(None, b"\0\0\0\0", 1, ())], is_control=True))
    with pytest.raises(InvalidMessageError, match="transactional"):
        log.append(batch([b"x"], is_transactional=True, producer_id=1, producer_epoch=0,
                         base_sequence=0))
    with pytest.raises(InvalidMessageError, match="needs a sequence"):
        log.append(batch([b"x"], producer_id=1, producer_epoch=0))
    with pytest.raises(InvalidMessageError, match="one producer's"):
        log.append(batch([b"x"], producer_id=1, producer_epoch=0, base_sequence=0)
                   + batch([b"y"], producer_id=2, producer_epoch=0, base_sequence=1))
    with pytest.raises(InvalidMessageError, match="one producer's"):
        log.append(batch([b"x"]) + batch([b"y"], producer_id=2, producer_epoch=0,
                                         base_sequence=0))
    with pytest.raises(ProducerTimestampTypeError):
        log.append(encode_batch([(b"k", b"v", 1, ())],
                                timestamp_type=record_batch.TimestampType.LOG_APPEND_TIME))
    assert log.log_end_offset == 0


def test_a_compacted_log_refuses_a_batch_with_a_keyless_record(open_log: OpenLog) -> None:
    log = open_log(cleanup_policy="compact")
    with pytest.raises(KeylessMessageError, match="without a key"):
        log.append(encode_batch([(b"k", b"v", 1, ()), (None, b"w", 1, ())]))
    assert log.log_end_offset == 0


def test_several_plain_batches_in_one_set_get_consecutive_offsets(open_log: OpenLog) -> None:
    log = open_log()
    result = log.append(batch([b"a", b"b"]) + batch([b"c"]) + batch([b"d", b"e", b"f"]))
    assert (result.first_offset, result.last_offset) == (0, 5)
    assert [r[0] for r in read_rows(log)] == list(range(6))


def _mixed_log(log: PartitionLog) -> list[tuple[int, bytes]]:
    """Appends every magic and codec in turn, over several segments; what each offset holds."""
    expected: list[tuple[int, bytes]] = []
    for i in range(30):
        values = [b"%d-%d" % (i, j) * 10 for j in range(1 + i % 3)]
        kind = i % 5
        if kind == 0:
            data = message_set([(b"k", v, 100 * i + j) for j, v in enumerate(values)])
        elif kind == 1:
            data = message_set([(b"k", v, 100 * i + j) for j, v in enumerate(values)],
                               Codec.GZIP)
        elif kind == 2:
            data = encode_message_set_v0(values)
        else:
            data = batch(values, ts=100 * i,
                         codec=BatchCodec.ZSTD if kind == 3 else BatchCodec.NONE)
        first = log.append(data).first_offset
        expected += [(first + j, v) for j, v in enumerate(values)]
    return expected


def encode_message_set_v0(values: list[bytes]) -> bytes:
    from protocol.messageset import encode_message_set

    return encode_message_set([(b"k", v, -1) for v in values], magic=0)


def test_a_mixed_log_reads_at_every_offset_and_recovers_after_a_crash(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log(segment_bytes=1024, index_interval_bytes=64)
    expected = _mixed_log(log)
    assert len(log.segment_base_offsets) > 3
    for offset, value in expected:
        assert read_rows(log, offset, chunk=512)[0][:3:2] == (offset, value)
    log.flush()
    crashed = open_log(crash_copy(log.directory, tmp_path / "crashed-0"),
                       segment_bytes=1024, index_interval_bytes=64)
    assert crashed.recovery_loss is None
    assert [(r[0], r[2]) for r in read_rows(crashed)] == expected
    # a torn tail: the last batch cut in half is dropped, the rest stays
    last = crashed.directory / f"{crashed.active_segment_base_offset:020d}.log"
    crashed.close()
    size = last.stat().st_size
    with last.open("r+b") as f:
        f.truncate(size - 10)
    torn = open_log(crashed.directory, segment_bytes=1024, index_interval_bytes=64)
    assert torn.log_end_offset < expected[-1][0] + 1
    assert [(r[0], r[2]) for r in read_rows(torn)] == expected[: torn.log_end_offset]


def test_offset_for_timestamp_looks_inside_batches(open_log: OpenLog) -> None:
    log = open_log()
    log.append(message_set([(b"k", b"a", 10)]))
    log.append(batch([b"b", b"c", b"d"], ts=20))  # timestamps 20, 21, 22
    log.append(message_set([(b"k", b"e", 30)]))
    assert log.offset_for_timestamp(21) == (2, 21)
    assert log.offset_for_timestamp(15) == (1, 20)
    assert log.offset_for_timestamp(23) == (4, 30)


def test_a_follower_appends_the_leaders_batches_as_stored(
    open_log: OpenLog, tmp_path: Path
) -> None:
    leader = open_log()
    _mixed_log(leader)
    follower = open_log(tmp_path / "f-0")
    data = leader.read(0, 1 << 20).bytes()
    result = follower.append_as_follower(data, leader_epoch=3)
    assert (result.first_offset, result.last_offset) == (0, leader.log_end_offset - 1)
    assert follower.read(0, 1 << 20).bytes() == data


# ---------------------------------------------------------------------------------------------
# Idempotent producers through the log


def idem(values: list[bytes], seq: int, *, pid: int = 42, epoch: int = 0) -> bytes:
    return batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_a_retried_batch_is_answered_with_its_first_offsets_and_written_once(
    open_log: OpenLog,
) -> None:
    log = open_log()
    first = log.append(idem([b"a", b"b"], 0))
    log.append(idem([b"c"], 2))
    again = log.append(idem([b"a", b"b"], 0))
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset)
    assert [r[2] for r in read_rows(log)] == [b"a", b"b", b"c"]


def test_a_set_of_one_producers_batches_is_checked_and_retried_whole(open_log: OpenLog) -> None:
    from broker.log import ProducerSequenceError

    log = open_log()
    request = idem([b"a", b"b"], 0) + idem([b"c"], 2) + idem([b"d"], 3)
    first = log.append(request)
    assert (first.first_offset, first.last_offset) == (0, 3)
    again = log.append(request)  # the response was lost: the same request again
    assert (again.first_offset, again.last_offset) == (0, 3)
    assert log.log_end_offset == 4
    with pytest.raises(ProducerSequenceError, match="within one produced set"):
        log.append(idem([b"e"], 4) + idem([b"f"], 6))
    with pytest.raises(ProducerSequenceError, match="the same set was not"):
        log.append(idem([b"d"], 3) + idem([b"e"], 4))  # half retry, half new
    assert log.append(idem([b"e"], 4) + idem([b"f"], 5)).first_offset == 4


def test_gaps_old_epochs_and_unknown_producers_are_refused(open_log: OpenLog) -> None:
    from broker.log import ProducerSequenceError
    from protocol.errors import ErrorCode

    log = open_log()
    log.append(idem([b"a"], 0, epoch=1))
    with pytest.raises(ProducerSequenceError) as gap:
        log.append(idem([b"x"], 5, epoch=1))
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(ProducerSequenceError) as fenced:
        log.append(idem([b"x"], 1, epoch=0))
    assert fenced.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(ProducerSequenceError) as unknown:
        log.append(idem([b"x"], 3, pid=7))
    assert unknown.value.code == ErrorCode.UNKNOWN_PRODUCER_ID
    assert log.log_end_offset == 1


@pytest.mark.parametrize("snapshot", [True, False], ids=["from-a-snapshot", "from-the-log"])
def test_producer_state_survives_a_restart(open_log: OpenLog, tmp_path: Path,
                                           snapshot: bool) -> None:
    log = open_log(segment_bytes=1024)
    for seq in range(0, 40, 2):
        log.append(idem([b"%d" % seq * 30, b"x"], seq))
    assert len(log.segment_base_offsets) > 2
    if snapshot:
        log.close()
        assert list(log.directory.glob("*.snapshot"))
        reopened = open_log(log.directory, segment_bytes=1024)
    else:
        log.flush()
        copy = crash_copy(log.directory, tmp_path / "copy-0")
        for path in copy.glob("*.snapshot"):
            path.unlink()
        reopened = open_log(copy, segment_bytes=1024)
    end = reopened.log_end_offset
    again = reopened.append(idem([b"%d" % 38 * 30, b"x"], 38))  # the last batch, retried
    assert (again.first_offset, again.last_offset) == (end - 2, end - 1)
    assert reopened.log_end_offset == end
    assert reopened.append(idem([b"new"], 40)).first_offset == end


def test_truncation_forgets_the_batches_cut_off(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1024)
    for seq in range(10):
        log.append(idem([b"v" * 100], seq))
    log.truncate_to(6)  # batches 6..9 are gone: the producer must resend them
    assert log.append(idem([b"v" * 100], 6)).first_offset == 6
    log.truncate_to(3)
    assert log.append(idem([b"v" * 100], 3)).first_offset == 3
    log.truncate_fully_and_start_at(20)
    from broker.log import ProducerSequenceError

    with pytest.raises(ProducerSequenceError):
        log.append(idem([b"v"], 4))
    assert log.append(idem([b"v"], 0, epoch=1)).first_offset == 20


def test_producers_outlive_retention_of_their_last_batch(open_log: OpenLog,
                                                         clock: FakeClock) -> None:
    log = open_log(segment_bytes=1024, retention_ms=1000)
    log.append(idem([b"v" * 300], 0))
    for _ in range(8):
        log.append(batch([b"w" * 300]))
    clock.advance(3600)
    log.append(batch([b"w" * 300]))
    assert log.enforce_retention() > 0
    assert log.log_start_offset > 0  # the producer's batch is gone
    retried = log.append(idem([b"v" * 300], 0))
    assert retried.first_offset == 0  # still known: answered as a duplicate
    log.close()
    reopened = open_log(log.directory, segment_bytes=1024, retention_ms=1000)
    assert reopened.append(idem([b"v"], 1)).first_offset == reopened.log_end_offset - 1


def test_idle_producers_expire(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(producer_id_expiration_ms=60_000)
    log.append(idem([b"a"], 0, pid=1))
    clock.advance(30)
    log.append(batch([b"x"], ts=clock.ms, producer_id=2, producer_epoch=0, base_sequence=0))
    clock.advance(40)  # producer 1 wrote 70 s ago, producer 2 40 s ago
    assert log.expire_producers() == [1]
    assert sorted(log.producers.active_producers()) == [2]


def test_a_follower_keeps_the_producers_of_a_fetched_set_that_spans_rolls(
    open_log: OpenLog, tmp_path: Path
) -> None:
    """A fetched set split over new segments: each roll snapshots the state with every batch
    written before it, so a restart after a crash, from the newest snapshot and the log after
    it, still knows the producer's last five batches."""
    leader = open_log()
    for seq in range(0, 24, 2):
        leader.append(idem([b"v" * 200, b"w"], seq))
    follower = open_log(tmp_path / "f-0", segment_bytes=1024)
    data = leader.read(0, 1 << 20).bytes()
    first_batch = int.from_bytes(data[8:12], "big") + 12
    follower.append_as_follower(data[:first_batch], leader_epoch=0)  # a producer known...
    follower.append_as_follower(data[first_batch:], leader_epoch=0)  # ...then several rolls
    assert len(follower.segment_base_offsets) > 2
    follower.flush()
    crashed = open_log(crash_copy(follower.directory, tmp_path / "crashed-0"), segment_bytes=1024)
    assert list(crashed.directory.glob("*.snapshot"))
    for seq in (14, 22):  # the oldest of the last five, in a closed segment, and the newest
        again = crashed.append(idem([b"v" * 200, b"w"], seq))
        assert (again.first_offset, again.last_offset) == (seq, seq + 1)
    assert crashed.log_end_offset == 24
