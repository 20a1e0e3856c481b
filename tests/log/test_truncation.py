"""``truncate_to`` and ``truncate_fully_and_start_at``: a follower drops what its leader does
not have. Entries go whole; later segments go; the cut segment's file and indexes are cut as a
rebuild would make them; state files follow; appends, reads, reopening and recovery agree."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.log import EpochEntry, LogConfig, PartitionLog, compaction
from broker.log.layout import CLEANER_CHECKPOINT, RECOVERY_POINT, read_offset_file
from broker.log.segment import Segment
from protocol.compression import Codec
from protocol.messageset import encode_message_set, read_entries
from tests.log.support import FakeClock, crash_copy, message_set, plain, read_all, small_config

OpenLog = Callable[..., PartitionLog]
Record = tuple[bytes | None, bytes | None, int]
CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]


class Built:
    """A closed log of several segments, plain entries and wrappers of every codec, with
    timestamps that go up and down; and what it holds."""

    def __init__(self, directory: Path, config: LogConfig) -> None:
        self.directory = directory
        self.config = config
        log = PartitionLog.open(directory, config, clock=FakeClock())
        self.model: dict[int, Record] = {}
        self.entries: list[tuple[int, int, int]] = []  # first offset, last offset, end byte
        for i in range(40):
            codec = CODECS[i % 4] if i % 3 else Codec.NONE
            count = 1 + i % 4
            ts = [(7919 * (i * 4 + j)) % 1000 for j in range(count)]
            records: list[Record] = [(b"k%d" % (i % 6), b"v" * (i % 9 * 5), t) for t in ts]
            result = log.append(message_set(records, codec))
            if codec is Codec.NONE:
                for j in range(count):
                    self.entries.append((result.first_offset + j, result.first_offset + j, 0))
            else:
                self.entries.append((result.first_offset, result.last_offset, 0))
            for j, record in enumerate(records):
                self.model[result.first_offset + j] = record
        self.end = log.log_end_offset
        self.bases = log.segment_base_offsets
        log.close()
        self.stored = _stored(directory)
        # The byte each entry ends at, across the segment files, from the stored headers.
        position = 0
        for k, (first, last, _end) in enumerate(self.entries):
            size = int.from_bytes(self.stored[position + 8 : position + 12], "big") + 12
            assert int.from_bytes(self.stored[position : position + 8], "big") == last
            position += size
            self.entries[k] = (first, last, position)

    def copy(self, target: Path, *, crashed: bool) -> Path:
        if crashed:
            return crash_copy(self.directory, target)
        shutil.copytree(self.directory, target)
        return target

    def expected_end(self, offset: int) -> int:
        if offset >= self.end:
            return self.end
        kept = [last for _first, last, _end in self.entries if last < offset]
        return kept[-1] + 1 if kept else 0

    def expected_bytes(self, new_end: int) -> bytes:
        ends = [end for _first, last, end in self.entries if last < new_end]
        return self.stored[: ends[-1] if ends else 0]


def _stored(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def _messages(log: PartitionLog) -> dict[int, Record]:
    return {m.offset: (m.key, m.value, m.timestamp) for m in read_all(log)}


def _first_at_or_after(model: dict[int, Record], timestamp: int) -> tuple[int, int] | None:
    matches = [o for o in sorted(model) if model[o][2] >= timestamp]
    return (matches[0], model[matches[0]][2]) if matches else None


def _check_indexes_as_rebuilt(log: PartitionLog, tmp_path: Path) -> None:
    """The active segment's indexes are what a rebuild from its .log gives (the time index
    may also keep the entry sealing gave it, when nothing of it was cut)."""
    base = log.active_segment_base_offset
    name = f"{base:020d}"
    rebuilt_dir = tmp_path / "rebuilt"
    rebuilt_dir.mkdir()
    shutil.copy(log.directory / f"{name}.log", rebuilt_dir)
    segment = Segment.open(rebuilt_dir, base, log.config.index_interval_bytes)
    segment.close_indexes()
    ours = (log.directory / f"{name}.index").read_bytes()
    theirs = (rebuilt_dir / f"{name}.index").read_bytes()
    assert ours == theirs
    ours = (log.directory / f"{name}.timeindex").read_bytes()
    theirs = (rebuilt_dir / f"{name}.timeindex").read_bytes()
    assert ours.startswith(theirs) and len(ours) - len(theirs) in (0, 12)
    shutil.rmtree(rebuilt_dir)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    config = small_config(segment_bytes=600, index_interval_bytes=64)
    built = Built(tmp_path_factory.mktemp("built") / "t-0", config)
    assert len(built.bases) >= 5
    return built


# ------------------------------------------------------------------- every offset, two ways


@pytest.mark.parametrize("crashed", [False, True], ids=["clean", "crashed"])
def test_truncating_to_every_offset(built: Built, tmp_path: Path, crashed: bool) -> None:
    for offset in range(built.end + 3):
        directory = built.copy(tmp_path / f"at{offset}" / "t-0", crashed=crashed)
        clock = FakeClock()
        log = PartitionLog.open(directory, built.config, clock=clock)
        log.high_watermark = built.end
        expected_end = built.expected_end(offset)
        assert log.truncate_to(offset) == expected_end, offset
        assert log.log_end_offset == expected_end
        assert log.log_start_offset == 0
        assert log.high_watermark == expected_end
        assert read_offset_file(directory / RECOVERY_POINT) == expected_end
        model = {o: r for o, r in built.model.items() if o < expected_end}
        assert _stored(directory) == built.expected_bytes(expected_end), offset
        assert _messages(log) == model, offset
        assert sum(p.stat().st_size for p in directory.glob("*.log")) == log.size_bytes()
        assert log.segment_base_offsets == tuple(b for b in built.bases if b < max(expected_end, 1))
        _check_indexes_as_rebuilt(log, tmp_path)
        for timestamp in (0, 250, 500, 999, 1000):
            assert log.offset_for_timestamp(timestamp) == _first_at_or_after(model, timestamp)

        # Appending again, both ways, and reading back
        result = log.append(message_set([(b"new", b"1", 2000), (b"new", b"2", 5)], Codec.GZIP))
        assert result.first_offset == expected_end
        model[expected_end] = (b"new", b"1", 2000)
        model[expected_end + 1] = (b"new", b"2", 5)
        fetched = encode_message_set([(b"f", b"3", 1)], base_offset=expected_end + 5)
        assert log.append_as_follower(fetched).first_offset == expected_end + 5
        model[expected_end + 5] = (b"f", b"3", 1)
        assert _messages(log) == model
        for timestamp in (0, 2, 6, 1500, 2000, 2001):
            assert log.offset_for_timestamp(timestamp) == _first_at_or_after(model, timestamp)

        # Recovery agrees, after a clean stop and after a crash
        after_crash = PartitionLog.open(
            crash_copy(directory, tmp_path / f"at{offset}-crash" / "t-0"), built.config
        )
        assert after_crash.log_end_offset == expected_end + 6
        assert _messages(after_crash) == model
        after_crash.close()
        log.close()
        reopened = PartitionLog.open(directory, built.config)
        assert reopened.log_end_offset == expected_end + 6
        assert _messages(reopened) == model
        reopened.close()
        shutil.rmtree(tmp_path / f"at{offset}")
        shutil.rmtree(tmp_path / f"at{offset}-crash")


def test_truncating_at_or_beyond_the_log_end_changes_nothing(built: Built, tmp_path: Path) -> None:
    directory = built.copy(tmp_path / "t-0", crashed=False)
    log = PartitionLog.open(directory, built.config)
    files = {p.name: p.read_bytes() for p in directory.iterdir()}
    for offset in (built.end, built.end + 1, 10**12):
        assert log.truncate_to(offset) == built.end
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == files
    log.close()


@pytest.mark.parametrize("offset", [-1, -100])
def test_negative_offsets_are_refused(open_log: OpenLog, offset: int) -> None:
    log = open_log()
    log.append(plain(b"k", b"v"))
    with pytest.raises(ValueError, match="negative"):
        log.truncate_to(offset)
    with pytest.raises(ValueError, match="negative"):
        log.truncate_fully_and_start_at(offset)
    assert log.log_end_offset == 1


# --------------------------------------------------------------------- the log start and below


def _after_retention(open_log: OpenLog) -> PartitionLog:
    log = open_log(segment_bytes=200, retention_bytes=300)  # two entries a segment
    for i in range(12):
        log.append(plain(b"k%d" % i, b"v" * 40, i))
    assert log.enforce_retention() == 4
    assert log.log_start_offset == 8
    return log


def test_truncating_to_the_log_start_empties_the_log(open_log: OpenLog) -> None:
    log = _after_retention(open_log)
    assert log.truncate_to(8) == 8
    assert (log.log_start_offset, log.log_end_offset) == (8, 8)
    assert log.segment_base_offsets == (8,)
    assert log.append(plain(b"k", b"v")).first_offset == 8


@pytest.mark.parametrize("offset", [0, 3, 7])
def test_truncating_below_the_log_start_starts_an_empty_log_there(
    open_log: OpenLog, offset: int
) -> None:
    log = _after_retention(open_log)
    assert log.truncate_to(offset) == offset
    assert (log.log_start_offset, log.log_end_offset) == (offset, offset)
    assert sorted(p.name for p in log.directory.glob("*.log")) == [f"{offset:020d}.log"]
    assert log.append(plain(b"k", b"v")).first_offset == offset
    log.close()
    reopened = open_log()
    assert (reopened.log_start_offset, reopened.log_end_offset) == (offset, offset + 1)


@pytest.mark.parametrize("offset", [0, 5, 12, 1000])
def test_truncate_fully_and_start_at(open_log: OpenLog, tmp_path: Path, offset: int) -> None:
    log = open_log(segment_bytes=200, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    for i in range(12):
        log.append(plain(b"k%d" % (i % 3), b"v" * 40, i), leader_epoch=i // 4)
    log.compact()
    log.high_watermark = 10
    log.truncate_fully_and_start_at(offset)
    assert (log.log_start_offset, log.log_end_offset) == (offset, offset)
    assert log.high_watermark == offset
    assert log.leader_epochs.entries == ()
    assert read_offset_file(log.directory / RECOVERY_POINT) == offset
    assert read_offset_file(log.directory / CLEANER_CHECKPOINT) == offset
    assert sorted(p.name for p in log.directory.glob("*.log")) == [f"{offset:020d}.log"]
    assert read_all(log) == []
    crashed = open_log(crash_copy(log.directory, tmp_path / "crash" / "t-0"))
    assert (crashed.log_start_offset, crashed.log_end_offset) == (offset, offset)
    fetched = encode_message_set([(b"k", b"v", 0)] * 2, base_offset=offset)
    assert log.append_as_follower(fetched, leader_epoch=9).first_offset == offset
    assert log.leader_epochs.entries == (EpochEntry(9, offset),)
    log.close()
    reopened = open_log()
    assert [m.offset for m in read_all(reopened)] == [offset, offset + 1]


# ----------------------------------------------------------------------- state that follows


def test_the_high_watermark_is_clamped_by_truncation(open_log: OpenLog) -> None:
    log = open_log()
    log.append(message_set([(b"k", b"v", 0)] * 10))
    assert log.truncate_to(7) == 7 and log.high_watermark == 7  # following the log end
    log.high_watermark = 4
    assert log.truncate_to(6) == 6 and log.high_watermark == 4
    assert log.truncate_to(2) == 2 and log.high_watermark == 2
    log.append(plain(b"k", b"v"))
    assert log.high_watermark == 2  # set once: it stays until set again


def test_the_recovery_point_moves_down_with_a_truncation(open_log: OpenLog, tmp_path: Path) -> None:
    """Data appended after a truncation below the recovery point is checked after a crash,
    however many segments it spans."""
    log = open_log(segment_bytes=300)
    for i in range(50):
        log.append(plain(b"k%d" % i, b"v" * 20))
    log.flush()
    assert read_offset_file(log.directory / RECOVERY_POINT) == 50
    assert log.truncate_to(20) == 20
    assert read_offset_file(log.directory / RECOVERY_POINT) == 20
    for i in range(30):
        log.append(plain(b"n%d" % i, b"w" * 20))
    copy = crash_copy(log.directory, tmp_path / "crash" / "t-0")
    bases = log.segment_base_offsets
    damaged = max(b for b in bases if b <= 30)
    assert damaged != bases[-1]  # not the last segment, which is always checked
    path = copy / f"{damaged:020d}.log"
    entries, _ = read_entries(path.read_bytes())
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # in the value of its last entry: a bad CRC
    path.write_bytes(bytes(data))
    crashed = open_log(copy)
    assert crashed.log_end_offset == entries[-1].offset
    assert [m.offset for m in read_all(crashed)] == list(range(entries[-1].offset))


def test_the_cleaner_checkpoint_moves_down_with_a_truncation(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=200, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    for i in range(12):
        log.append(plain(b"k%d" % (i % 3), b"v" * 40, i))
    assert log.compact()
    assert read_offset_file(log.directory / CLEANER_CHECKPOINT) == log.active_segment_base_offset
    assert [m.offset for m in read_all(log)] == [7, 8, 9, 10, 11]
    assert log.truncate_to(9) == 9
    assert log.active_segment_base_offset == 8
    assert read_offset_file(log.directory / CLEANER_CHECKPOINT) == 8
    for i in range(12):
        log.append(plain(b"k%d" % (i % 3), b"w" * 40, i))
    log.roll()
    assert log.compact()
    latest = {m.key: m.value for m in read_all(log)}
    assert latest == {b"k0": b"w" * 40, b"k1": b"w" * 40, b"k2": b"w" * 40}


@pytest.mark.parametrize("offset", range(12))
def test_truncation_into_a_compacted_gap(open_log: OpenLog, offset: int) -> None:
    log = open_log(segment_bytes=200, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    for i in range(12):
        log.append(plain(b"k%d" % (i % 3), b"v" * 40, i))
    log.compact()
    kept = [m.offset for m in read_all(log)]
    assert kept != list(range(12))
    below = [o for o in kept if o < offset]
    assert log.truncate_to(offset) == (below[-1] + 1 if below else 0)
    assert [m.offset for m in read_all(log)] == below


def test_compaction_running_across_a_truncation_is_abandoned(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The truncation cuts the last closed segment, which then takes new entries and is rolled
    again: the same segments as when the pass began, but the cleaned copies were made from what
    they held before. Swapping them in would bring removed entries back and lose new ones."""
    log = open_log(segment_bytes=200, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    for i in range(12):
        log.append(plain(b"k%d" % i, b"v" * 40, i))  # two entries a segment
    log.roll()
    assert log.segment_base_offsets == (0, 2, 4, 6, 8, 10, 12)
    real = compaction.write_cleaned
    calls = []

    def truncating(*args: object, **kwargs: object) -> Segment:
        if not calls:
            assert log.truncate_to(11) == 11
            log.append(plain(b"n0", b"w" * 40, 0))
            log.roll()
            assert log.segment_base_offsets == (0, 2, 4, 6, 8, 10, 12)
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(compaction, "write_cleaned", truncating)
    assert not log.compact()
    assert [m.key for m in read_all(log)] == [b"k%d" % i for i in range(11)] + [b"n0"]
    assert not list(log.directory.glob("*.cleaned"))


def test_a_flush_running_across_a_truncation_leaves_the_recovery_point(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log()
    log.append(message_set([(b"k", b"v", 0)] * 6))
    log.flush()
    log.append(message_set([(b"k", b"v", 0)] * 4))
    real = Segment.fsync
    done = []

    def truncating(segment: Segment) -> None:
        if not done:
            done.append(1)
            log.truncate_to(4)
        real(segment)

    monkeypatch.setattr(Segment, "fsync", truncating)
    log.flush()
    assert log.log_end_offset == 4
    assert read_offset_file(log.directory / RECOVERY_POINT) == 4


def test_readers_of_a_deleted_segment_keep_their_bytes(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=200)
    for i in range(8):
        log.append(plain(b"k%d" % i, b"v" * 40, i))
    answered = log.read(6, 1 << 16)
    expected = answered.bytes()
    log.truncate_to(2)
    assert answered.bytes() == expected  # the unlinked inode is still open


# -------------------------------------------------------------------- against a simple model

KEYS = st.sampled_from([b"a", b"b", b"c", b"d"])
VALUES = st.one_of(st.none(), st.binary(max_size=80))
TIMESTAMPS = st.integers(min_value=0, max_value=1000)


class TruncationMachine(RuleBasedStateMachine):
    """Appends (leader and follower style, gaps, every codec, leader epochs), truncations,
    rolls, retention, reopening cleanly or after a crash: the log holds what a model says."""

    config = LogConfig(
        segment_bytes=700, index_interval_bytes=96, retention_ms=None, retention_bytes=2000
    )

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="odradek-truncation-"))
        self.generation = 0
        self.clock = FakeClock()
        self.log = PartitionLog.open(self._next_dir(), self.config, clock=self.clock)
        self.model: dict[int, Record] = {}
        self.entries: list[list[int]] = []  # the offsets of each entry, in order
        self.epochs: list[tuple[int, int]] = []
        self.next_epoch = 0
        self.start = self.end = 0
        self.last_in_active = False  # the last entry sits in the active segment

    def _next_dir(self) -> Path:
        self.generation += 1
        return self.root / str(self.generation) / "t-0"

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def _records(self, data: st.DataObject, count: int) -> list[Record]:
        return [(data.draw(KEYS), data.draw(VALUES), data.draw(TIMESTAMPS)) for _ in range(count)]

    def _appended(self, first: int, records: list[Record], codec: Codec, epoch: int | None) -> None:
        offsets = list(range(first, first + len(records)))
        for offset, record in zip(offsets, records, strict=True):
            self.model[offset] = record
        if codec is Codec.NONE:
            self.entries.extend([o] for o in offsets)
        else:
            self.entries.append(offsets)
        if epoch is not None and (not self.epochs or epoch > self.epochs[-1][0]):
            self.epochs.append((epoch, first))
        self.end = offsets[-1] + 1
        self.last_in_active = True

    def _epoch(self, data: st.DataObject) -> int | None:
        if not data.draw(st.booleans()):
            return None
        self.next_epoch += data.draw(st.integers(0, 1))
        return self.next_epoch

    @rule(data=st.data(), codec=st.sampled_from(CODECS), count=st.integers(1, 5))
    def append(self, data: st.DataObject, codec: Codec, count: int) -> None:
        records = self._records(data, count)
        epoch = self._epoch(data)
        result = self.log.append(message_set(records, codec), leader_epoch=epoch)
        assert result.first_offset == self.end
        self._appended(self.end, records, codec, epoch)

    @rule(
        data=st.data(),
        codec=st.sampled_from(CODECS),
        count=st.integers(1, 5),
        gap=st.sampled_from([0, 0, 1, 7]),
    )
    def append_as_follower(self, data: st.DataObject, codec: Codec, count: int, gap: int) -> None:
        records = self._records(data, count)
        epoch = self._epoch(data)
        first = self.end + gap
        fetched = encode_message_set(records, codec=codec, base_offset=first)
        assert self.log.append_as_follower(fetched, leader_epoch=epoch).first_offset == first
        self._appended(first, records, codec, epoch)

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(max(self.start - 2, 0), self.end + 2))
        if offset >= self.end:
            pass
        elif offset < self.start:
            self._emptied_at(offset)
        else:
            self.entries = [e for e in self.entries if e[-1] < offset]
            self.end = self.entries[-1][-1] + 1 if self.entries else self.start
            self.model = {o: r for o, r in self.model.items() if o < self.end}
            self.epochs = [e for e in self.epochs if e[1] < self.end]
            self.last_in_active = False
        assert self.log.truncate_to(offset) == self.end

    @rule(data=st.data())
    def truncate_fully_and_start_at(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.end + 10))
        self.log.truncate_fully_and_start_at(offset)
        self._emptied_at(offset)

    def _emptied_at(self, offset: int) -> None:
        self.model, self.entries, self.epochs = {}, [], []
        self.start = self.end = offset
        self.last_in_active = False

    @rule()
    def roll(self) -> None:
        self.log.roll()
        self.last_in_active = False

    @rule()
    def enforce_retention(self) -> None:
        self.log.enforce_retention()
        self.start = self.log.log_start_offset
        self.model = {o: r for o, r in self.model.items() if o >= self.start}
        self.entries = [e for e in self.entries if e[0] >= self.start]
        below = [e for e in self.epochs if e[1] <= self.start]
        if below:
            self.epochs = [(below[-1][0], self.start)] + [
                e for e in self.epochs if e[1] > self.start
            ]

    @rule()
    def reopen_cleanly(self) -> None:
        self.log.close()
        self.log = PartitionLog.open(self.log.directory, self.config, clock=self.clock)

    @rule()
    def reopen_after_a_crash(self) -> None:
        copy = crash_copy(self.log.directory, self._next_dir())
        self.log.close()
        self.log = PartitionLog.open(copy, self.config, clock=self.clock)

    @precondition(lambda self: self.last_in_active and self.entries)
    @rule(cut=st.integers(1, 26))
    def crash_losing_the_last_entry(self, cut: int) -> None:
        active_base = self.log.active_segment_base_offset
        copy = crash_copy(self.log.directory, self._next_dir())
        active = copy / f"{active_base:020d}.log"
        data = active.read_bytes()
        active.write_bytes(data[: len(data) - cut])
        self.log.close()
        self.log = PartitionLog.open(copy, self.config, clock=self.clock)
        lost = self.entries.pop()
        for offset in lost:
            del self.model[offset]
        before = [e for e in self.entries if e[0] >= active_base]
        self.end = before[-1][-1] + 1 if before else active_base
        self.epochs = [e for e in self.epochs if e[1] < self.end]
        self.last_in_active = False

    @rule()
    def read_everything(self) -> None:
        assert _messages(self.log) == self.model

    @rule(timestamp=TIMESTAMPS)
    def offset_for_timestamp(self, timestamp: int) -> None:
        assert self.log.offset_for_timestamp(timestamp) == _first_at_or_after(self.model, timestamp)

    @invariant()
    def offsets_match(self) -> None:
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start
        assert self.log.leader_epochs.entries == tuple(EpochEntry(*e) for e in self.epochs)


TestTruncation = TruncationMachine.TestCase
TestTruncation.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
