"""Model-based test: random appends (every codec), reads, rolls, retention, compaction and
clean or crashing reopenings, checked against an in-memory model of what must be readable."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import assume, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.log import LogConfig, PartitionLog
from protocol.compression import Codec
from protocol.messageset import decode_messages
from tests.log.support import FakeClock, crash_copy, message_set, read_all

Model = dict[int, tuple[bytes | None, bytes | None, int]]  # offset -> key, value, timestamp

KEYS = st.sampled_from([b"a", b"b", b"c", b"d", b"e"])
VALUES = st.one_of(st.none(), st.binary(max_size=120))
TIMESTAMPS = st.integers(min_value=0, max_value=1000)


class LogMachine(RuleBasedStateMachine):
    config = LogConfig(
        segment_bytes=1024,
        index_interval_bytes=96,
        retention_ms=None,
        retention_bytes=2500,
    )
    keys = st.one_of(st.none(), KEYS)

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="odradek-log-"))
        self.generation = 0
        self.clock = FakeClock()
        self.log = PartitionLog.open(self._next_dir(), self.config, clock=self.clock)
        self.model: Model = {}
        self.start = self.end = 0
        self.last_entry: list[int] | None = (
            None  # offsets of the last entry, if in the active segment
        )

    def _next_dir(self) -> Path:
        self.generation += 1
        return self.root / str(self.generation) / "t-0"

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # ---------------------------------------------------------------------------------------

    @rule(data=st.data(), codec=st.sampled_from(list(Codec)), count=st.integers(1, 6))
    def append(self, data: st.DataObject, codec: Codec, count: int) -> None:
        records = [
            (data.draw(self.keys), data.draw(VALUES), data.draw(TIMESTAMPS)) for _ in range(count)
        ]
        result = self.log.append(message_set(records, codec))
        assert (result.first_offset, result.last_offset) == (self.end, self.end + count - 1)
        for i, record in enumerate(records):
            self.model[self.end + i] = record
        offsets = list(range(self.end, self.end + count))
        self.last_entry = offsets if codec is not Codec.NONE else offsets[-1:]
        self.end += count

    @rule(data=st.data(), max_bytes=st.integers(0, 1500))
    def read(self, data: st.DataObject, max_bytes: int) -> None:
        offset = data.draw(st.integers(self.start, self.end))
        chunk = self.log.read(offset, max_bytes).bytes()
        assert len(chunk) <= max_bytes
        messages, _ = decode_messages(chunk)
        fresh = [m for m in messages if m.offset >= offset]
        if fresh:
            expected = [o for o in sorted(self.model) if offset <= o <= fresh[-1].offset]
            assert [m.offset for m in fresh] == expected
            for m in fresh:
                assert (m.key, m.value, m.timestamp) == self.model[m.offset]

    @rule()
    def read_everything(self) -> None:
        messages = read_all(self.log, chunk=700)
        assert {m.offset: (m.key, m.value, m.timestamp) for m in messages} == {
            o: r for o, r in self.model.items() if o >= self.log.log_start_offset
        }

    @rule(timestamp=TIMESTAMPS)
    def offset_for_timestamp(self, timestamp: int) -> None:
        matches = [o for o in sorted(self.model) if self.model[o][2] >= timestamp]
        expected = (matches[0], self.model[matches[0]][2]) if matches else None
        assert self.log.offset_for_timestamp(timestamp) == expected

    @rule()
    def roll(self) -> None:
        self.log.roll()
        self.last_entry = None

    @rule()
    def reopen_cleanly(self) -> None:
        self.log.close()
        self.log = PartitionLog.open(self.log.directory, self.config, clock=self.clock)

    @rule()
    def reopen_after_a_crash(self) -> None:
        copy = crash_copy(self.log.directory, self._next_dir())
        self.log.close()
        self.log = PartitionLog.open(copy, self.config, clock=self.clock)

    @precondition(lambda self: self.last_entry is not None)
    @rule(cut=st.integers(1, 26), garbage=st.binary(max_size=64))
    def crash_losing_the_last_entry(self, cut: int, garbage: bytes) -> None:
        """The last entry's tail never reached the disk, and maybe garbage did instead."""
        assert self.last_entry is not None
        copy = crash_copy(self.log.directory, self._next_dir())
        active = copy / f"{self.log.active_segment_base_offset:020d}.log"
        data = active.read_bytes()
        assume(garbage[:cut] != data[len(data) - cut :])  # else the entry is whole after all
        active.write_bytes(data[: len(data) - cut] + garbage)
        self.log.close()
        self.log = PartitionLog.open(copy, self.config, clock=self.clock)
        for offset in self.last_entry:
            del self.model[offset]
        self.end = self.last_entry[0]
        self.last_entry = None

    @rule(garbage=st.binary(min_size=1, max_size=200))
    def crash_with_a_garbage_tail(self, garbage: bytes) -> None:
        copy = crash_copy(self.log.directory, self._next_dir())
        active = copy / f"{self.log.active_segment_base_offset:020d}.log"
        active.write_bytes(active.read_bytes() + garbage)
        self.log.close()
        self.log = PartitionLog.open(copy, self.config, clock=self.clock)

    @rule()
    def enforce_retention(self) -> None:
        self.log.enforce_retention()
        self.start = self.log.log_start_offset
        assert self.start in self.log.segment_base_offsets
        self.model = {o: r for o, r in self.model.items() if o >= self.start}

    @invariant()
    def offsets_match(self) -> None:
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start


class CompactedLogMachine(LogMachine):
    config = LogConfig(
        segment_bytes=1024,
        index_interval_bytes=96,
        cleanup_policy="compact",
        min_cleanable_dirty_ratio=0.0,
        delete_retention_ms=10**14,  # tombstones stay; their expiry has its own test
    )
    keys = KEYS

    @rule()
    def compact(self) -> None:
        active = self.log.active_segment_base_offset
        if not self.log.compact():
            return
        latest: dict[bytes | None, int] = {}
        for offset in sorted(self.model):
            if offset < active:
                latest[self.model[offset][0]] = offset
        self.model = {o: r for o, r in self.model.items() if o >= active or latest[r[0]] == o}


SETTINGS = settings(max_examples=75, stateful_step_count=40, deadline=None)
TestLog = LogMachine.TestCase
TestLog.settings = SETTINGS
TestCompactedLog = CompactedLogMachine.TestCase
TestCompactedLog.settings = SETTINGS
