"""The idempotent producer's state per partition: Kafka 2.4's answers to each batch, the window
of five, sequence wrap, epochs, truncation, retention, expiry and snapshots; and a state machine
in which restarting from any snapshot plus the log always gives the state of never restarting."""

from __future__ import annotations

import shutil
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import google_crc32c
import hypothesis.strategies as st
import pytest
from hypothesis import event, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from structlog.testing import capture_logs

from broker.log.producer_state import (
    APPEND,
    BATCHES_TO_RETAIN,
    PRODUCER_ID_EXPIRATION_MS,
    Append,
    BatchMetadata,
    Check,
    CorruptSnapshotError,
    Duplicate,
    ProducerEntry,
    ProducerStateError,
    ProducerStates,
    Reject,
    decode_snapshot,
    delete_snapshots,
    describe,
    encode_snapshot,
    load_latest_snapshot,
    snapshot_offsets,
    snapshot_path,
)
from protocol.errors import ErrorCode
from protocol.record_batch import (
    CONTROL_BIT,
    HEADER_BYTES,
    MAGIC,
    BatchHeader,
    encode_batch,
    read_batch_header,
)

MAX_SEQ = (1 << 31) - 1
PID = 1000


def batch(pid: int = PID, epoch: int = 0, seq: int = 0, count: int = 1, offset: int = 0,
          ts: int = 0, attributes: int = 0) -> BatchHeader:
    """A batch header as the broker sees it; ``offset`` is the base offset once assigned."""
    return BatchHeader(offset, HEADER_BYTES - 12, 0, MAGIC, 0, attributes, count - 1, ts, ts,
                       pid, epoch, seq, count)


class Partition:
    """A log of batch headers in front of a table, appending as the broker will."""

    def __init__(self) -> None:
        self.states = ProducerStates()
        self.log: list[BatchHeader] = []
        self.end = 0

    def produce(self, header: BatchHeader) -> Check:
        outcome = self.states.check(header)
        if isinstance(outcome, Append):
            header = header._replace(base_offset=self.end)
            self.log.append(header)
            self.end = header.next_offset
            self.states.update(header)
        return outcome

    def send(self, seq: int, count: int = 1, *, epoch: int = 0, pid: int = PID,
             ts: int = 0) -> BatchHeader:
        """A batch that must be appended; the header as written."""
        assert self.produce(batch(pid, epoch, seq, count, ts=ts)) == APPEND
        return self.log[-1]


def error_of(outcome: Check) -> ErrorCode | None:
    return outcome.error if isinstance(outcome, Reject) else None


# -- check: Kafka's answers --------------------------------------------------------------------


def test_a_new_producer_starts_at_sequence_0_and_continues_in_order() -> None:
    p = Partition()
    first = p.send(0, 3, ts=10)
    second = p.send(3, 2, ts=20)
    entry = p.states.entry(PID)
    assert entry == ProducerEntry(PID, 0, (BatchMetadata.of(first), BatchMetadata.of(second)), 20)
    assert (entry.last_sequence, entry.last_offset) == (4, 4)


def test_an_unknown_producer_not_at_sequence_0_is_unknown_producer_id() -> None:
    # Kafka 2.0-2.4: the producer's state expired or its batches were removed; the client
    # compares its last acknowledged offset with the log start offset to decide.
    p = Partition()
    assert error_of(p.produce(batch(seq=7))) is ErrorCode.UNKNOWN_PRODUCER_ID
    assert p.log == []


def test_an_older_epoch_is_fenced_with_invalid_producer_epoch() -> None:
    p = Partition()
    p.send(0, epoch=3)
    assert error_of(p.produce(batch(epoch=2, seq=1))) is ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_retry_from_before_an_epoch_bump_is_fenced_not_a_duplicate() -> None:
    p = Partition()
    p.send(0, epoch=0)
    p.send(0, epoch=1)
    assert error_of(p.produce(batch(epoch=0, seq=0))) is ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_new_epoch_must_start_at_sequence_0() -> None:
    p = Partition()
    p.send(0, 5)
    assert error_of(p.produce(batch(epoch=1, seq=5))) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert isinstance(p.produce(batch(epoch=1, seq=0)), Append)


def test_an_epoch_bump_resets_the_sequences_and_forgets_the_old_batches() -> None:
    p = Partition()
    p.send(0, 2)
    p.send(2, 2)
    bumped = p.send(0, 1, epoch=1)
    entry = p.states.entry(PID)
    assert entry is not None and entry.epoch == 1
    assert entry.batches == (BatchMetadata.of(bumped),)
    # the old epoch's continuation is out of order in the new one
    assert error_of(p.produce(batch(epoch=1, seq=4))) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert isinstance(p.produce(batch(epoch=1, seq=1)), Append)


@pytest.mark.parametrize("seq", [5, 7, 100, 1, 0])
def test_a_gap_or_a_step_back_is_out_of_order(seq: int) -> None:
    p = Partition()
    p.send(0, 3)
    p.send(3, 2)  # last sequence 4; 5 follows
    outcome = p.produce(batch(seq=seq))
    if seq == 5:
        assert outcome == APPEND
    else:
        assert error_of(outcome) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_batch_overlapping_a_written_one_is_out_of_order_not_a_duplicate() -> None:
    p = Partition()
    p.send(0, 3)
    assert error_of(p.produce(batch(seq=0, count=2))) is (
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    assert error_of(p.produce(batch(seq=1, count=2))) is (
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    )


def test_each_of_the_last_five_batches_is_answered_as_a_duplicate_with_its_offsets() -> None:
    p = Partition()
    p.send(0, 2, epoch=4, ts=1)  # the sixth-last, forgotten
    written = [p.send(2 + 3 * i, 3, epoch=4, ts=100 + i) for i in range(BATCHES_TO_RETAIN)]
    before = p.states.active_producers()
    for header in written:
        outcome = p.produce(batch(epoch=4, seq=header.base_sequence, count=3, ts=999))
        assert outcome == Duplicate(
            BatchMetadata(header.base_sequence, header.last_sequence, header.base_offset,
                          header.last_offset, header.max_timestamp)
        )
    assert p.states.active_producers() == before  # nothing written, nothing changed
    assert len(p.log) == 1 + BATCHES_TO_RETAIN


def test_a_retry_of_the_sixth_last_batch_is_out_of_order_as_in_kafka() -> None:
    # Kafka 2.x keeps five batches: an older retry is neither recognised nor in sequence.
    p = Partition()
    oldest = p.send(0, 2)
    for i in range(BATCHES_TO_RETAIN):
        p.send(2 + i)
    outcome = p.produce(batch(seq=oldest.base_sequence, count=2))
    assert error_of(outcome) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequences_wrap_from_int32_max_to_0() -> None:
    p = Partition()
    p.states.replay(batch(seq=MAX_SEQ - 4, count=5, offset=0))  # last sequence 2**31 - 1
    p.end = 5
    for wrong in (1, MAX_SEQ):
        assert error_of(p.produce(batch(seq=wrong))) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    after = p.send(0, 2)
    assert (after.base_sequence, after.last_sequence) == (0, 1)


def test_a_batch_crossing_the_wrap_continues_and_is_recognised_when_retried() -> None:
    p = Partition()
    p.states.replay(batch(seq=MAX_SEQ - 10, count=9, offset=0))  # ends at 2**31 - 3
    p.end = 9
    crossing = p.send(MAX_SEQ - 1, 4)  # 2**31 - 2, 2**31 - 1, 0, 1
    assert crossing.last_sequence == 1
    assert p.produce(batch(seq=MAX_SEQ - 1, count=4)) == Duplicate(BatchMetadata.of(crossing))
    assert error_of(p.produce(batch(seq=3))) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert isinstance(p.produce(batch(seq=2)), Append)


def test_a_known_epoch_without_a_batch_only_takes_sequence_0() -> None:
    # only from a Kafka snapshot of a producer that wrote nothing but a transaction marker
    states = ProducerStates([ProducerEntry(PID, 2, (), 50)])
    assert error_of(states.check(batch(epoch=2, seq=4))) is ErrorCode.UNKNOWN_PRODUCER_ID
    assert states.check(batch(epoch=2, seq=0)) == APPEND


def test_update_refuses_a_batch_check_would_not_let_in() -> None:
    p = Partition()
    written = p.send(0, 2)
    with pytest.raises(ProducerStateError):
        p.states.update(written._replace(base_offset=10))  # a duplicate
    with pytest.raises(ProducerStateError):
        p.states.update(batch(seq=9, offset=10))  # a gap


def test_check_takes_idempotent_batches_only() -> None:
    states = ProducerStates()
    with pytest.raises(ValueError):
        states.check(batch(pid=-1, seq=-1))
    with pytest.raises(ValueError):
        states.check(batch(seq=-1))


def test_headers_read_from_real_batches_are_checked_by_their_sequences() -> None:
    raw = encode_batch([(b"k", b"v", 5)] * 3, producer_id=PID, producer_epoch=1,
                       base_sequence=MAX_SEQ - 1)
    header = read_batch_header(raw)
    assert header is not None
    states = ProducerStates()
    assert error_of(states.check(header)) is ErrorCode.UNKNOWN_PRODUCER_ID
    states.replay(header)
    assert states.check(header) == Duplicate(BatchMetadata(MAX_SEQ - 1, 0, 0, 2, 5))


# -- replay ------------------------------------------------------------------------------------


def test_replay_takes_the_log_as_written_without_checking() -> None:
    states = ProducerStates()
    states.replay(batch(epoch=3, seq=7, offset=0))  # not at sequence 0: still taken
    states.replay(batch(epoch=3, seq=20, offset=1))  # a gap: still taken
    entry = states.entry(PID)
    assert entry is not None and [b.first_sequence for b in entry.batches] == [7, 20]
    assert states.end_offset == 2


def test_replay_skips_batches_without_a_producer_and_control_batches() -> None:
    states = ProducerStates()
    states.replay(batch(pid=-1, epoch=-1, seq=-1, offset=0))
    states.replay(batch(seq=0, offset=1, attributes=CONTROL_BIT))
    assert states.active_producers() == {}


# -- log start, expiry -------------------------------------------------------------------------


def test_retention_keeps_a_producer_whose_last_batch_is_below_the_log_start() -> None:
    # Kafka 2.4+ (KAFKA-7190): a quiet producer is not told UNKNOWN_PRODUCER_ID after retention.
    p = Partition()
    written = p.send(0, 2)
    p.send(0, pid=PID + 1)
    before = p.states.active_producers()
    p.states.truncate_from_start(10)
    assert p.states.active_producers() == before
    assert p.states.end_offset == 10
    assert isinstance(p.produce(batch(seq=2)), Append)
    assert p.produce(batch(seq=0, count=2)) == Duplicate(BatchMetadata.of(written))


def test_a_producer_idle_for_the_expiration_is_forgotten_and_then_unknown() -> None:
    p = Partition()
    p.send(0, ts=1_000)
    p.send(0, pid=PID + 1, ts=5_000)
    assert PRODUCER_ID_EXPIRATION_MS == 86_400_000
    assert p.states.expire(1_000 + PRODUCER_ID_EXPIRATION_MS - 1) == []
    assert p.states.expire(1_000 + PRODUCER_ID_EXPIRATION_MS) == [PID]
    assert list(p.states.active_producers()) == [PID + 1]
    assert error_of(p.produce(batch(seq=1))) is ErrorCode.UNKNOWN_PRODUCER_ID
    assert isinstance(p.produce(batch(seq=0)), Append)  # a producer may start over


def test_expiry_takes_the_setting() -> None:
    p = Partition()
    p.send(0, ts=0)
    assert p.states.expire(99, producer_id_expiration_ms=100) == []
    assert p.states.expire(100, producer_id_expiration_ms=100) == [PID]


# -- truncation --------------------------------------------------------------------------------


def _replayed(headers: list[BatchHeader]) -> ProducerStates:
    states = ProducerStates()
    for header in headers:
        states.replay(header)
    return states


def test_truncation_then_replay_equals_never_having_appended(tmp_path: Path) -> None:
    p = Partition()
    for i in range(7):  # more than the window, across an epoch bump
        p.send(i)
    cut = p.end
    p.send(0, epoch=1)
    p.send(1, 3, epoch=1)
    p.send(0, pid=PID + 1)
    replay_from = p.states.truncate_to(cut, tmp_path, log_start=0)
    assert replay_from == 0  # no snapshot: the whole log
    for header in p.log:
        if replay_from <= header.base_offset < cut:
            p.states.replay(header)
    p.log = [h for h in p.log if h.base_offset < cut]
    assert p.states.active_producers() == _replayed(p.log).active_producers()
    assert p.states.entry(PID) is not None and p.states.entry(PID).epoch == 0  # type: ignore[union-attr]
    assert p.states.entry(PID + 1) is None


def test_truncation_reloads_the_newest_snapshot_at_or_below_and_deletes_those_above(
    tmp_path: Path,
) -> None:
    p = Partition()
    for i in range(4):
        p.send(i)
        p.states.write_snapshot(tmp_path, p.end)
    assert snapshot_offsets(tmp_path) == [1, 2, 3, 4]
    assert p.states.truncate_to(2, tmp_path, log_start=0) == 2  # replay nothing: at 2 exactly
    assert snapshot_offsets(tmp_path) == [1, 2]
    assert p.states.active_producers() == _replayed(p.log[:2]).active_producers()


def test_truncation_at_or_past_the_end_changes_nothing(tmp_path: Path) -> None:
    p = Partition()
    p.send(0, 3)
    before = p.states.active_producers()
    p.states.write_snapshot(tmp_path, 9)
    assert p.states.truncate_to(3, tmp_path, log_start=0) == 3
    assert p.states.active_producers() == before
    assert snapshot_offsets(tmp_path) == []  # 9 is past the new end


def test_truncation_ignores_snapshots_below_the_log_start(tmp_path: Path) -> None:
    p = Partition()
    for i in range(4):
        p.send(i)
        p.states.write_snapshot(tmp_path, p.end)
    assert p.states.truncate_to(3, tmp_path, log_start=3) == 3
    assert p.states.truncate_to(2, tmp_path, log_start=3) == 3
    assert p.states.active_producers() == {}  # nothing to replay: empty at the log start


def test_truncating_fully_forgets_everything(tmp_path: Path) -> None:
    p = Partition()
    p.send(0)
    p.states.write_snapshot(tmp_path, 1)
    p.states.truncate_fully(tmp_path, 50)
    assert (p.states.active_producers(), p.states.end_offset) == ({}, 50)
    assert snapshot_offsets(tmp_path) == []


# -- snapshots ---------------------------------------------------------------------------------


def _kafka_layout(entries: list[tuple[int, int, int, int, int, int]]) -> bytes:
    """Kafka's ProducerStateManager snapshot schema, version 1, built by hand from it: rows of
    (producer id, epoch, last sequence, last offset, offset delta, timestamp)."""
    body = struct.pack(">i", len(entries)) + b"".join(
        struct.pack(">qhiqiqiq", pid, epoch, seq, offset, delta, ts, -1, -1)
        for pid, epoch, seq, offset, delta, ts in entries
    )
    return struct.pack(">hI", 1, google_crc32c.value(body)) + body


def _kafka_reads(data: bytes) -> dict[int, tuple[int, int, int, int, int]]:
    """What Kafka's loadFromSnapshot keeps: one entry per producer id, the last row read."""
    rows = struct.iter_unpack(">qhiqiqiq", data[10:])
    return {pid: (epoch, seq, offset, delta, ts) for pid, epoch, seq, offset, delta, ts, *_ in rows}


def test_a_snapshot_of_one_batch_per_producer_is_kafkas_bytes(tmp_path: Path) -> None:
    p = Partition()
    p.send(0, 3, ts=77)
    p.send(0, 2, epoch=5, pid=7, ts=88)
    path = p.states.write_snapshot(tmp_path, 5)
    assert path.name == "00000000000000000005.snapshot"
    assert path.read_bytes() == _kafka_layout([(7, 5, 1, 4, 1, 88), (PID, 0, 2, 2, 2, 77)])


def test_a_snapshot_keeps_all_five_batches_and_kafka_reads_the_newest(tmp_path: Path) -> None:
    p = Partition()
    for i in range(7):
        p.send(2 * i, 2, epoch=1, ts=i)
    p.states.write_snapshot(tmp_path, p.end)
    snapshot = load_latest_snapshot(tmp_path)
    assert snapshot is not None and snapshot.offset == p.end
    assert snapshot.producers == p.states.active_producers()
    assert len(snapshot.producers[PID].batches) == BATCHES_TO_RETAIN
    newest = p.log[-1]
    assert _kafka_reads(snapshot_path(tmp_path, p.end).read_bytes()) == {
        PID: (1, newest.last_sequence, newest.last_offset, 1, newest.max_timestamp)
    }


def test_kafkas_snapshot_is_read_including_a_producer_without_a_batch() -> None:
    data = _kafka_layout([(3, 2, 9, 40, 4, 1234), (4, 7, -1, -1, 0, 999)])
    assert decode_snapshot(data) == {
        3: ProducerEntry(3, 2, (BatchMetadata(5, 9, 36, 40, 1234),), 1234),
        4: ProducerEntry(4, 7, (), 999),
    }
    assert encode_snapshot(decode_snapshot(data).values()) == data


def test_a_snapshot_round_trips_wrapped_sequences_and_producers_without_batches(
    tmp_path: Path,
) -> None:
    states = ProducerStates([ProducerEntry(9, 1, (), 42)])
    states.replay(batch(seq=MAX_SEQ - 1, count=4, offset=0, ts=3))
    states.write_snapshot(tmp_path, 4)
    loaded, replay_from = ProducerStates.load(tmp_path, log_start=0, log_end=4)
    assert replay_from == 4
    assert loaded.active_producers() == states.active_producers()
    assert loaded.entry(PID).batches[0].first_sequence == MAX_SEQ - 1  # type: ignore[union-attr]


@pytest.mark.parametrize("damage", ["flip", "short", "version", "empty", "extra"])
def test_a_damaged_snapshot_is_skipped_for_an_older_one(tmp_path: Path, damage: str) -> None:
    p = Partition()
    p.send(0)
    p.states.write_snapshot(tmp_path, 1)
    p.send(1)
    newest = p.states.write_snapshot(tmp_path, 2)
    data = bytearray(newest.read_bytes())
    if damage == "flip":
        data[-3] ^= 0x40
    elif damage == "short":
        del data[-5:]
    elif damage == "version":
        data[1] = 2
    elif damage == "empty":
        data.clear()
    else:
        data += b"\0"
    newest.write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data))
    with capture_logs() as logs:
        snapshot = load_latest_snapshot(tmp_path)
    assert snapshot is not None and snapshot.offset == 1
    assert snapshot.producers == _replayed(p.log[:1]).active_producers()
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "log.producer_state.snapshot_damaged"
    ]
    assert snapshot_offsets(tmp_path) == [1]  # deleted, as Kafka does


def test_a_snapshot_whose_entries_do_not_fill_it_is_damaged_even_with_a_good_crc() -> None:
    data = bytearray(_kafka_layout([(3, 2, 9, 40, 4, 1234)]))
    struct.pack_into(">i", data, 6, 2)  # two entries said, one there
    struct.pack_into(">I", data, 2, google_crc32c.value(bytes(data[6:])))
    with pytest.raises(CorruptSnapshotError, match="2 entries"):
        decode_snapshot(bytes(data))


def test_a_snapshot_that_cannot_be_read_is_skipped_and_kept(tmp_path: Path) -> None:
    p = Partition()
    p.send(0)
    p.states.write_snapshot(tmp_path, 1)
    snapshot_path(tmp_path, 9).mkdir()  # reading it fails, through no fault of its bytes
    with capture_logs() as logs:
        snapshot = load_latest_snapshot(tmp_path)
    assert snapshot is not None and snapshot.offset == 1
    assert [e["event"] for e in logs] == ["log.producer_state.snapshot_unreadable"]
    assert snapshot_path(tmp_path, 9).is_dir()


def test_every_snapshot_damaged_means_replaying_the_whole_log(tmp_path: Path) -> None:
    p = Partition()
    p.send(0)
    p.states.write_snapshot(tmp_path, 1)
    snapshot_path(tmp_path, 1).write_bytes(b"\0\1garbage")
    with capture_logs():
        loaded, replay_from = ProducerStates.load(tmp_path, log_start=0, log_end=1)
    assert (loaded.active_producers(), replay_from) == ({}, 0)


def test_a_snapshot_below_batches_the_table_holds_is_refused(tmp_path: Path) -> None:
    p = Partition()
    p.send(0, 3)
    with pytest.raises(ProducerStateError):
        p.states.write_snapshot(tmp_path, 2)


def test_load_drops_snapshots_past_the_log_end_and_ignores_those_below_the_start(
    tmp_path: Path,
) -> None:
    p = Partition()
    for i in range(5):
        p.send(i)
        p.states.write_snapshot(tmp_path, p.end)
    loaded, replay_from = ProducerStates.load(tmp_path, log_start=0, log_end=3)
    assert replay_from == 3 and snapshot_offsets(tmp_path) == [1, 2, 3]
    assert loaded.active_producers() == _replayed(p.log[:3]).active_producers()
    loaded, replay_from = ProducerStates.load(tmp_path, log_start=4, log_end=4)
    assert (loaded.active_producers(), replay_from) == ({}, 4)


def test_delete_snapshots_below_and_above_and_only_snapshot_files(tmp_path: Path) -> None:
    states = ProducerStates()
    for offset in (0, 5, 10, 15):
        states.write_snapshot(tmp_path, offset)
    (tmp_path / "00000000000000000020.snapshot.tmp").write_bytes(b"")
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    assert delete_snapshots(tmp_path, below=5) == [0]
    assert delete_snapshots(tmp_path, above=10) == [15]
    assert snapshot_offsets(tmp_path) == [5, 10]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000000.log", "00000000000000000005.snapshot",
        "00000000000000000010.snapshot", "00000000000000000020.snapshot.tmp",
    ]
    assert snapshot_offsets(tmp_path / "missing") == []


def test_describe_lists_producers_by_id() -> None:
    p = Partition()
    p.send(0, 2, pid=9, ts=4)
    p.send(0, pid=3, epoch=2, ts=5)
    rows = describe(p.states.active_producers())
    assert [(r["producer_id"], r["epoch"], r["last_sequence"], r["last_offset"],
             r["last_timestamp"]) for r in rows] == [(3, 2, 0, 2, 5), (9, 0, 1, 1, 4)]


# -- the state machine -------------------------------------------------------------------------


def expected_producers(log: list[BatchHeader]) -> dict[int, ProducerEntry]:
    """Each producer's state from the log alone, stated apart from the code: its last batch's
    epoch, the newest five of its trailing batches of that epoch, the last one's timestamp."""
    by_producer: dict[int, list[BatchHeader]] = {}
    for header in log:
        if header.producer_id >= 0:
            by_producer.setdefault(header.producer_id, []).append(header)
    producers = {}
    for pid, headers in by_producer.items():
        epoch = headers[-1].producer_epoch
        run: list[BatchHeader] = []
        for header in headers:
            run = [*run, header] if header.producer_epoch == epoch else []
        window = tuple(BatchMetadata.of(h) for h in run[-BATCHES_TO_RETAIN:])
        producers[pid] = ProducerEntry(pid, epoch, window, headers[-1].max_timestamp)
    return producers


def expected_outcome(entry: ProducerEntry | None, header: BatchHeader) -> Check:
    """Kafka 2.4's answer, restated from its ProducerAppendInfo."""
    first, last, epoch = header.base_sequence, header.last_sequence, header.producer_epoch
    if entry is not None and epoch == entry.epoch:
        for b in entry.batches:
            if (b.first_sequence, b.last_sequence) == (first, last):
                return Duplicate(b)
    if entry is not None and epoch < entry.epoch:
        return Reject(ErrorCode.INVALID_PRODUCER_EPOCH, "")
    if entry is None or epoch > entry.epoch:
        if first == 0:
            return APPEND
        return Reject(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER if entry is not None
                      else ErrorCode.UNKNOWN_PRODUCER_ID, "")
    if first == (entry.last_sequence + 1) % (1 << 31):
        return APPEND
    return Reject(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, "")


def _same(outcome: Check, expected: Check) -> bool:
    if isinstance(outcome, Reject) and isinstance(expected, Reject):
        return outcome.error is expected.error
    return outcome == expected


@dataclass
class Client:
    pid: int
    epoch: int = 0
    next_seq: int = 0
    sent: list[BatchHeader] = field(default_factory=list)  # as first sent, newest last


class ProducerStateMachine(RuleBasedStateMachine):
    """Clients send, retry, bump their epochs, wrap their sequences and act as zombies; the log
    is truncated, snapshots are written and damaged, and the broker restarts from the newest
    readable snapshot plus its log. The table always equals the state the log alone implies,
    and every answer is Kafka's, so a retry within the last five is always a duplicate."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="producer-state-"))
        self.states = ProducerStates()
        self.log: list[BatchHeader] = []
        self.end = 0
        self.now = 1_000
        self.clients = [Client(100), Client(200, epoch=3), Client(300, next_seq=MAX_SEQ - 6)]
        # the third client's sequences are about to wrap
        self.log.append(batch(300, 0, MAX_SEQ - 9, 3, offset=0, ts=self.now))
        self.end = 3
        self.states.replay(self.log[0])

    def teardown(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def _produce(self, header: BatchHeader) -> Check:
        expected = expected_outcome(expected_producers(self.log).get(header.producer_id), header)
        outcome = self.states.check(header)
        assert _same(outcome, expected), (header, outcome, expected)
        if isinstance(outcome, Append):
            written = header._replace(base_offset=self.end)
            self.log.append(written)
            self.end = written.next_offset
            self.states.update(written)
        return outcome

    @rule(which=st.integers(0, 2), count=st.integers(1, 4))
    def send(self, which: int, count: int) -> None:
        client = self.clients[which]
        self.now += 1
        header = batch(client.pid, client.epoch, client.next_seq, count, ts=self.now)
        client.sent.append(header)
        if isinstance(self._produce(header), Append):
            client.next_seq = (client.next_seq + count) % (1 << 31)

    @precondition(lambda self: any(c.sent for c in self.clients))
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        """Resend one of a client's batches, up to two older than the window of five."""
        client = data.draw(st.sampled_from([c for c in self.clients if c.sent]))
        back = data.draw(st.integers(1, min(len(client.sent), BATCHES_TO_RETAIN + 2)))
        header = client.sent[-back]
        mine = [h for h in self.log if h.producer_id == client.pid]
        # the last five it wrote, unless its epoch was bumped since (epochs only grow here)
        recent = [h for h in mine[-BATCHES_TO_RETAIN:]
                  if h.producer_epoch == mine[-1].producer_epoch]
        outcome = self._produce(header)
        event(f"retry: {type(outcome).__name__}")
        for written in recent:
            if (written.producer_epoch, written.base_sequence, written.last_sequence) == (
                header.producer_epoch, header.base_sequence, header.last_sequence
            ):
                assert outcome == Duplicate(BatchMetadata.of(written))

    @rule(which=st.integers(0, 2))
    def bump_epoch(self, which: int) -> None:
        client = self.clients[which]
        client.epoch, client.next_seq = client.epoch + 1, 0

    @rule(which=st.integers(0, 2))
    def resync(self, which: int) -> None:
        """The client learns where the partition is (after a truncation lost its batches)."""
        client = self.clients[which]
        entry = expected_producers(self.log).get(client.pid)
        if entry is not None and entry.batches:
            client.epoch = entry.epoch
            client.next_seq = (entry.last_sequence + 1) % (1 << 31)

    @rule(which=st.integers(0, 2))
    def zombie(self, which: int) -> None:
        client = self.clients[which]
        if client.epoch:
            self._produce(batch(client.pid, client.epoch - 1, client.next_seq, ts=self.now))

    @rule()
    def plain(self) -> None:
        header = batch(-1, -1, -1, 2, offset=self.end)
        self.log.append(header)
        self.end = header.next_offset
        self.states.replay(header)

    @precondition(lambda self: self.log)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        cut = data.draw(st.sampled_from([h.base_offset for h in self.log] + [self.end]))
        replay_from = self.states.truncate_to(cut, self.directory, log_start=0)
        self.log = [h for h in self.log if h.base_offset < cut]
        self.end = cut
        for header in self.log:
            if header.base_offset >= replay_from:
                self.states.replay(header)
        assert all(offset <= cut for offset in snapshot_offsets(self.directory))

    @rule()
    def snapshot(self) -> None:
        self.states.write_snapshot(self.directory, self.end)

    @precondition(lambda self: bool(snapshot_offsets(self.directory)))
    @rule()
    def damage_newest_snapshot(self) -> None:
        path = snapshot_path(self.directory, snapshot_offsets(self.directory)[-1])
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))

    @rule()
    def restart(self) -> None:
        with capture_logs():
            self.states, replay_from = ProducerStates.load(self.directory, log_start=0,
                                                           log_end=self.end)
        for header in self.log:
            if header.base_offset >= replay_from:
                self.states.replay(header)
        event(f"restart: {'from a snapshot' if replay_from else 'from the log start'}")

    @invariant()
    def the_table_is_what_the_log_implies(self) -> None:
        assert self.states.active_producers() == expected_producers(self.log)


ProducerStateMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=50, deadline=None
)
test_producer_state_machine = ProducerStateMachine.TestCase
