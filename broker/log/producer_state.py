"""The idempotent producer's state in one partition (KIP-98), as the leader keeps it.

Per producer id: its epoch, the last five batches it wrote (first and last sequence, first and
last offset, timestamp), oldest first, and the last timestamp. With it the leader tells a retry
from new data: a producer resends a batch whose answer it lost, and without this state the
retry is written twice (issue 27: 3-15 duplicates per run of 10 leader kills). The rules are
Kafka 2.4's (``ProducerStateManager``, ``ProducerAppendInfo``,
``Log.analyzeAndValidateProducerState``).

``check`` (a client's batch, before the append), in this order:

1. Same epoch as known and the same (first, last) sequence as one of the last five batches:
   ``Duplicate`` carrying the original batch. Kafka (since 1.0) then answers the produce with
   NONE, the original base offset and its timestamp, writing nothing. DUPLICATE_SEQUENCE_NUMBER
   is for a duplicate whose offsets are not known; Kafka 2.x never answers it, nor does this.
2. An epoch older than the known one: INVALID_PRODUCER_EPOCH (Kafka's ProducerFencedException).
3. A newer epoch, or a producer id not known: the batch must start at sequence 0. Otherwise
   OUT_OF_ORDER_SEQUENCE_NUMBER when an older epoch is known, UNKNOWN_PRODUCER_ID when none is.
   The latter is the rule of Kafka 1.0-2.4 for a producer whose state expired or was truncated
   away: the client compares its last acknowledged offset with the log start offset and resets
   its sequences if retention removed its data. Kafka 2.5+ (KIP-360) accepts any sequence
   there instead; that needs a client able to bump its epoch (InitProducerId v3), which the
   0.11 API table does not offer, and it lets an old retry of an expired producer in silently.
4. The known epoch: the batch must follow the last one, ``first == last + 1`` with sequences
   wrapping from 2**31 - 1 to 0; otherwise OUT_OF_ORDER_SEQUENCE_NUMBER, which is also the
   answer to a retry of a batch older than the last five, as in Kafka 2.x (1.x answered it
   DUPLICATE_SEQUENCE_NUMBER without offsets); a producer with at most five requests in
   flight retries only batches among the last five written. A known epoch without any batch
   (only in a Kafka snapshot of a producer that wrote nothing but a transaction marker)
   answers UNKNOWN_PRODUCER_ID to a sequence other than 0.

The expected refusals are values (``Reject``), not exceptions. A batch with producer id -1 is
not the table's business; a producer id >= 0 with sequence -1 is refused before, by the
broker's validation (Kafka's LogValidator: "Invalid sequence number").

What the broker calls, and when (the table is not thread-safe: PartitionLog calls it under its
own lock, like the leader-epoch cache):

- opening the log: ``ProducerStates.load(dir, log_start=, log_end=)`` gives the table as of the
  newest usable snapshot and the offset to replay from; ``replay(header)`` every magic 2 batch
  of the log from there to the log end; then ``expire(now_ms)``.
- a client's produce (leader): ``check(header)``; ``Append`` → append, then
  ``update(header)`` with the header as written (base offset assigned, LogAppendTime's max
  timestamp set). Kafka's clients send one batch per partition per request; odradek's
  producer, with one request per partition in flight, sends what queued (up to five batches):
  validation makes them one producer's, numbered on from each other, so the first is checked
  here and the rest follow from it -- or, for a retried request, each is a ``Duplicate``.
- a follower's append, or any batch already written: ``replay(header)``; the leader checked it
  and the log is the truth, so nothing is refused (Kafka's AppendOrigin.Replication).
- truncation by leader epoch to ``offset``: ``truncate_to(offset, dir, log_start=)`` reloads the
  newest snapshot at or below ``offset`` (none: empty at the log start), deletes the snapshots
  above it and returns where to replay from; ``replay`` the headers from there to ``offset``.
  The state of truncated batches cannot be undone in memory: an epoch bump forgot the older
  epoch's batches and a window of five forgot the sixth-last, which the log still holds.
  The log emptied (``truncate_fully_and_start_at``): ``truncate_fully(dir, start)``.
- retention or DeleteRecords moving the log start: ``truncate_from_start(log_start)`` keeps
  every producer until it expires, even one whose last batch is now below the log start (Kafka
  2.4+, KAFKA-7190: dropping them answered UNKNOWN_PRODUCER_ID to idle producers of quiet
  partitions); then ``write_snapshot(dir, log_end)`` if no snapshot at or above the new log
  start is left, and only then ``delete_snapshots(dir, below=log_start)``, so that the
  producers survive a restart too.
- on a segment roll and on close: ``write_snapshot(dir, log_end)`` (Kafka: at every roll, so
  a restart replays at most the active segment); ``delete_snapshots(dir, below=...)`` keeps a
  few (Kafka keeps the ones at the last two segments' bases, for truncation).
- every ``producer_id_expiration_ms`` check interval (Kafka: 10 minutes): ``expire(now_ms)``
  drops the producers whose last timestamp is ``PRODUCER_ID_EXPIRATION_MS`` (1 day, Kafka
  3.4+'s ``producer.id.expiration.ms``; before 3.4 it was ``transactional.id.expiration.ms``,
  7 days) or more in the past. The timestamp is the batch's max timestamp, as Kafka keeps it
  (the producer's clock under CreateTime).

Snapshots: ``<offset, 20 digits>.snapshot`` in the partition directory, the state of every
batch below ``offset``, in Kafka's layout (version 1), big-endian::

    version int16 (1), crc uint32 (CRC-32C of every byte after it), entries: int32 count, then
    per entry producer id int64, epoch int16, last sequence int32, last offset int64, offset
    delta int32, timestamp int64, coordinator epoch int32, current txn first offset int64

Kafka writes one entry per producer, its newest batch, so after a restart it recognises only
a retry of that batch. Here a producer has one entry per batch it keeps, oldest first, so all
five survive; Kafka's reader keeps the last entry of each producer id, the one it would have
written itself, so the files stay readable both ways. The offset delta is both the offset and
the sequence distance of the batch's first record from its last (a batch's offsets and
sequences are dense); a producer known without a batch is one entry with last offset -1. No
transactions: the coordinator epoch is kept as read (-1 from here), the current txn first
offset is written -1 and ignored when read. A snapshot is written to a temporary file,
fsynced, renamed and its directory fsynced. One that does not read back (short, a version
other than 1, a CRC mismatch) is logged as a warning and deleted, as Kafka does, and the next
older one is tried.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

import structlog

from broker.log import layout
from broker.log.errors import CorruptCheckpointError
from protocol.errors import ErrorCode
from protocol.record_batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, crc32c

log = structlog.get_logger(__name__)

#: Kafka's producer.id.expiration.ms default (3.4+): a producer idle this long is forgotten
PRODUCER_ID_EXPIRATION_MS = 86_400_000
#: Kafka's ProducerStateEntry.NumBatchesToRetain, and the most in-flight requests a producer
#: may have for its retries to be recognised (max.in.flight.requests.per.connection <= 5)
BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
NO_COORDINATOR_EPOCH = -1
SEQUENCE_MODULUS = 1 << 31  # sequences are int32 and wrap from 2**31 - 1 to 0

_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")
_PREFIX = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_FROM = _PREFIX.size  # the CRC covers the entries, their count included


class ProducerBatch(Protocol):
    """The fields of a batch header the table reads; ``protocol.record_batch.BatchHeader`` has
    them. ``base_offset`` and ``last_offset`` are read by ``update`` and ``replay`` only."""

    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def last_sequence(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def is_control(self) -> bool: ...


class BatchMetadata(NamedTuple):
    """One batch a producer wrote, as much of it as a retry is recognised and answered by."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int

    @classmethod
    def of(cls, batch: ProducerBatch) -> BatchMetadata:
        return cls(batch.base_sequence, batch.last_sequence, batch.base_offset,
                   batch.last_offset, batch.max_timestamp)


@dataclass(frozen=True)
class ProducerEntry:
    """What one partition knows of one producer id; replaced whole on every change."""

    producer_id: int
    epoch: int
    batches: tuple[BatchMetadata, ...]  # the last (up to) five, oldest first
    last_timestamp: int
    coordinator_epoch: int = NO_COORDINATOR_EPOCH

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def with_batch(self, epoch: int, batch: BatchMetadata) -> ProducerEntry:
        """This entry after ``batch``: a new epoch forgets the old epoch's batches (Kafka's
        ``maybeUpdateProducerEpoch``), and the window keeps the newest five."""
        kept = self.batches if epoch == self.epoch else ()
        return ProducerEntry(self.producer_id, epoch, (*kept, batch)[-BATCHES_TO_RETAIN:],
                             batch.timestamp, self.coordinator_epoch)

    def find(self, first_sequence: int, last_sequence: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                return batch
        return None


@dataclass(frozen=True)
class Append:
    """The batch may be written."""


@dataclass(frozen=True)
class Duplicate:
    """The batch was written before: answer with ``original``'s offsets, write nothing."""

    original: BatchMetadata


@dataclass(frozen=True)
class Reject:
    """The batch must not be written; answer ``error``."""

    error: ErrorCode  # OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH or UNKNOWN_PRODUCER_ID
    reason: str


Check = Append | Duplicate | Reject
APPEND = Append()


class ProducerStateError(Exception):
    """The table was misused: ``update`` with a batch ``check`` would not let in, or a
    snapshot at an offset below batches the table holds."""


class CorruptSnapshotError(CorruptCheckpointError):
    """A ``.snapshot`` file does not read back; the message names the file and why."""


class Snapshot(NamedTuple):
    offset: int  # the state of every batch below this offset
    producers: dict[int, ProducerEntry]


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """Whether ``next_sequence`` directly follows ``last_sequence`` (-1: nothing yet)."""
    return next_sequence == (last_sequence + 1) % SEQUENCE_MODULUS


class ProducerStates:
    """The producers of one partition (see the module docstring for the rules and when the
    broker calls what). ``end_offset``: every batch the table has seen is below it."""

    def __init__(self, producers: Iterable[ProducerEntry] = (), end_offset: int = 0) -> None:
        self._producers = {entry.producer_id: entry for entry in producers}
        self._end_offset = end_offset

    @property
    def end_offset(self) -> int:
        return self._end_offset

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def active_producers(self) -> dict[int, ProducerEntry]:
        """Every producer known, by id (a copy; the entries are immutable): for ``log dump``
        and a describe-producers view."""
        return dict(self._producers)

    def __len__(self) -> int:
        return len(self._producers)

    def __repr__(self) -> str:
        entries = sorted(self._producers.values(), key=lambda e: e.producer_id)
        return f"ProducerStates(end_offset={self._end_offset}, {entries})"

    # -- a client's batch -----------------------------------------------------------------

    def check(self, batch: ProducerBatch) -> Check:
        """Whether a client's batch may be appended (Kafka 2.4's rules, in the module
        docstring). Only its producer id, epoch and sequences are read."""
        producer_id, epoch = batch.producer_id, batch.producer_epoch
        first, last = batch.base_sequence, batch.last_sequence
        if producer_id < 0 or first < 0:
            raise ValueError(f"batch of producer {producer_id} with sequence {first}: "
                             "only idempotent batches with sequences are checked")
        entry = self._producers.get(producer_id)
        known_epoch = entry.epoch if entry is not None else NO_PRODUCER_EPOCH
        if entry is not None and epoch == entry.epoch:
            original = entry.find(first, last)
            if original is not None:
                return Duplicate(original)
        if epoch < known_epoch:
            return Reject(ErrorCode.INVALID_PRODUCER_EPOCH,
                          f"producer {producer_id}: epoch {epoch} is older than {known_epoch}")
        if epoch != known_epoch:
            if first == 0:
                return APPEND
            if known_epoch != NO_PRODUCER_EPOCH:
                return Reject(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                              f"producer {producer_id}: new epoch {epoch} must start at "
                              f"sequence 0, not {first}")
            return Reject(ErrorCode.UNKNOWN_PRODUCER_ID,
                          f"producer {producer_id} is not known here (expired, or its "
                          f"batches were removed) and sequence {first} is not 0")
        assert entry is not None
        if not entry.batches and first != 0:
            return Reject(ErrorCode.UNKNOWN_PRODUCER_ID,
                          f"producer {producer_id}: epoch {epoch} is known, its next "
                          f"sequence is not; {first} is not 0")
        if not in_sequence(entry.last_sequence, first):
            return Reject(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                          f"producer {producer_id}: sequence {first} does not follow "
                          f"{entry.last_sequence}")
        return APPEND

    def update(self, batch: ProducerBatch) -> None:
        """Record a client's batch just written, with its offsets assigned. Raises
        ``ProducerStateError`` unless ``check`` lets it in: nothing may change the table
        between the check and the append."""
        outcome = self.check(batch)
        if not isinstance(outcome, Append):
            raise ProducerStateError(f"update with a batch check refuses: {outcome}")
        self._apply(batch)

    # -- the log as written -----------------------------------------------------------------

    def replay(self, batch: ProducerBatch) -> None:
        """Take in a batch as the log holds it (loading, a follower's append, rebuilding after
        truncation), in log order, without checking it. Batches without a producer id, and
        control batches (transaction markers; there are no transactions), leave the table as
        it was."""
        if batch.producer_id < 0 or batch.is_control:
            return
        self._apply(batch)

    def _apply(self, batch: ProducerBatch) -> None:
        producer_id = batch.producer_id
        entry = self._producers.get(producer_id) or ProducerEntry(
            producer_id, NO_PRODUCER_EPOCH, (), batch.max_timestamp
        )
        self._producers[producer_id] = entry.with_batch(batch.producer_epoch,
                                                        BatchMetadata.of(batch))
        self._end_offset = max(self._end_offset, batch.last_offset + 1)

    # -- the log changing under the table -----------------------------------------------------

    def truncate_to(self, offset: int, directory: Path, *, log_start: int) -> int:
        """The log now ends at ``offset``: forget every batch at or above it. Snapshots above
        ``offset`` are deleted; when the table holds a batch at or above ``offset``, it is
        replaced by the newest snapshot at or below ``offset`` and at or above ``log_start``
        (none: empty, at ``log_start``). Returns the offset from which the broker must
        ``replay`` its log's batches up to ``offset`` (``offset``: nothing to replay)."""
        delete_snapshots(directory, above=offset)
        if offset >= self._end_offset:
            return offset
        snapshot = load_latest_snapshot(directory, at_most=offset, at_least=log_start)
        self._producers, self._end_offset = _restored(snapshot, log_start)
        log.info("log.producer_state.truncated", directory=str(directory), offset=offset,
                 replay_from=self._end_offset, producers=len(self._producers))
        return self._end_offset

    def truncate_fully(self, directory: Path, start_offset: int) -> None:
        """The log was emptied and starts again at ``start_offset`` (a follower far behind
        its leader): forget every producer and delete every snapshot."""
        delete_snapshots(directory, above=-1)  # every one
        self._producers, self._end_offset = {}, start_offset

    def truncate_from_start(self, log_start: int) -> None:
        """The log now starts at ``log_start``. Every producer stays until it expires (see the
        module docstring); only ``end_offset`` moves up to ``log_start`` if below it."""
        self._end_offset = max(self._end_offset, log_start)

    def expire(self, now_ms: int,
               producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> list[int]:
        """Forget the producers whose last timestamp is ``producer_id_expiration_ms`` or more
        before ``now_ms``; returns their ids."""
        expired = [pid for pid, entry in self._producers.items()
                   if now_ms - entry.last_timestamp >= producer_id_expiration_ms]
        for pid in expired:
            del self._producers[pid]
        if expired:
            log.info("log.producer_state.expired", producer_ids=expired, now_ms=now_ms)
        return expired

    # -- snapshots ------------------------------------------------------------------------------

    def write_snapshot(self, directory: Path, offset: int) -> Path:
        """Write the table as ``<offset>.snapshot`` in ``directory``, durably (temp file,
        fsync, rename, fsync of the directory). ``offset`` is where the log ends: no batch the
        table holds may be at or above it."""
        if offset < self._end_offset:
            raise ProducerStateError(
                f"a snapshot at {offset} cannot hold batches up to {self._end_offset - 1}")
        path = snapshot_path(directory, offset)
        layout.write_atomically(path, encode_snapshot(self._producers.values()), durable=True)
        return path

    @classmethod
    def load(cls, directory: Path, *, log_start: int, log_end: int) -> tuple[ProducerStates, int]:
        """The table of a log being opened: deletes snapshots above ``log_end`` (left by an
        unclean stop), loads the newest one in ``[log_start, log_end]``. Returns it and the
        offset from which the broker must ``replay`` its log to ``log_end``."""
        delete_snapshots(directory, above=log_end)
        snapshot = load_latest_snapshot(directory, at_most=log_end, at_least=log_start)
        producers, end_offset = _restored(snapshot, log_start)
        return cls(producers.values(), end_offset), end_offset


def _restored(snapshot: Snapshot | None, log_start: int) -> tuple[dict[int, ProducerEntry], int]:
    if snapshot is None:
        return {}, log_start
    return snapshot.producers, max(snapshot.offset, log_start)


# -- snapshot files -------------------------------------------------------------------------------


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    """The offsets of the snapshots in ``directory``, ascending (none if it does not exist)."""
    try:
        names = [path.name for path in directory.iterdir()]
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(_SNAPSHOT_NAME.match, names) if m)


def encode_snapshot(producers: Iterable[ProducerEntry]) -> bytes:
    """A snapshot file's bytes: per producer (by id) one entry per batch kept, oldest first."""
    rows = []
    for entry in sorted(producers, key=lambda e: e.producer_id):
        # known without a batch: Kafka's entry with last offset -1
        fields = [(b.last_sequence, b.last_offset, b.last_offset - b.first_offset, b.timestamp)
                  for b in entry.batches] or [(NO_SEQUENCE, -1, 0, entry.last_timestamp)]
        for last_sequence, last_offset, delta, timestamp in fields:
            rows.append(_ENTRY.pack(entry.producer_id, entry.epoch, last_sequence, last_offset,
                                    delta, timestamp, entry.coordinator_epoch, -1))
    body = _COUNT.pack(len(rows)) + b"".join(rows)
    return _PREFIX.pack(SNAPSHOT_VERSION, crc32c(body)) + body


def decode_snapshot(data: bytes, name: str = "snapshot") -> dict[int, ProducerEntry]:
    """The producers of a snapshot file's bytes; ``CorruptSnapshotError`` if they are not one."""
    if len(data) < _PREFIX.size + _COUNT.size:
        raise CorruptSnapshotError(f"{name}: {len(data)} bytes, too short for a snapshot")
    version, crc = _PREFIX.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{name}: version {version}, not {SNAPSHOT_VERSION}")
    if crc32c(memoryview(data)[_CRC_FROM:]) != crc:
        raise CorruptSnapshotError(f"{name}: CRC-32C does not match the contents")
    (count,) = _COUNT.unpack_from(data, _PREFIX.size)
    start = _PREFIX.size + _COUNT.size
    if count < 0 or len(data) != start + count * _ENTRY.size:
        raise CorruptSnapshotError(f"{name}: {count} entries do not fill {len(data)} bytes")
    producers: dict[int, ProducerEntry] = {}
    for pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, _txn in (
        _ENTRY.iter_unpack(memoryview(data)[start:])
    ):
        entry = producers.get(pid)
        if entry is None or last_offset < 0:
            entry = ProducerEntry(pid, epoch, (), timestamp, coordinator_epoch)
        if last_offset >= 0:
            batch = BatchMetadata((last_seq - delta) % SEQUENCE_MODULUS, last_seq,
                                  last_offset - delta, last_offset, timestamp)
            entry = entry.with_batch(epoch, batch)
        producers[pid] = entry
    return producers


def load_latest_snapshot(directory: Path, *, at_most: int | None = None,
                         at_least: int = 0) -> Snapshot | None:
    """The newest snapshot with an offset in ``[at_least, at_most]`` that reads back; a
    damaged one is logged, deleted (as Kafka does) and the next older one tried; one that
    cannot be read (an I/O error) is logged and skipped. None when there is none."""
    for offset in reversed(snapshot_offsets(directory)):
        if offset < at_least:
            break
        if at_most is not None and offset > at_most:
            continue
        path = snapshot_path(directory, offset)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as exc:  # not the file's fault: skipped, kept
            log.warning("log.producer_state.snapshot_unreadable", path=str(path), error=str(exc))
            continue
        try:
            return Snapshot(offset, decode_snapshot(data, str(path)))
        except CorruptSnapshotError as exc:
            log.warning("log.producer_state.snapshot_damaged", path=str(path), error=str(exc))
            path.unlink(missing_ok=True)
    return None


def delete_snapshots(directory: Path, *, below: int | None = None,
                     above: int | None = None) -> list[int]:
    """Delete the snapshots with an offset below ``below`` or above ``above``; returns their
    offsets. The directory is fsynced when a name went."""
    doomed = [offset for offset in snapshot_offsets(directory)
              if (below is not None and offset < below) or (above is not None and offset > above)]
    for offset in doomed:
        snapshot_path(directory, offset).unlink(missing_ok=True)
    if doomed:
        layout.fsync_dir(directory)
    return doomed


def describe(producers: Mapping[int, ProducerEntry]) -> list[dict[str, object]]:
    """One row per producer, by id, as ``log dump`` and a describe view show them."""
    return [
        {"producer_id": e.producer_id, "epoch": e.epoch, "last_sequence": e.last_sequence,
         "last_offset": e.last_offset, "last_timestamp": e.last_timestamp,
         "coordinator_epoch": e.coordinator_epoch,
         "batches": [b._asdict() for b in e.batches]}
        for e in sorted(producers.values(), key=lambda e: e.producer_id)
    ]
