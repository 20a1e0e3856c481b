"""The log of one partition: a directory of segments, appended to at the end, read by offset.

Plain synchronous file I/O, quick per call: the server calls it from its trio tasks. Appends and
reads come from one thread (the event loop). The maintenance calls -- ``flush``,
``maybe_flush``, ``enforce_retention``, ``compact`` -- may run in a worker thread at the same
time: they change shared state only under the log's lock, for short steps, and readers never take
the lock (they work on a snapshot of the segment list).

Replication adds ``append_as_follower`` (entries fetched from the leader, offsets kept),
``truncate_to`` / ``truncate_fully_and_start_at`` (a follower dropping what the leader does not
have), the leader-epoch cache (``leader_epochs``) and a high watermark that, for a replicated
log, starts at its checkpoint and moves only when set. Truncation holds the lock throughout,
fsyncs included: nothing is appended to a partition while it is being truncated anyway. A
read running in another thread at that moment may come back short or fail with
``CorruptSegmentError``, as a read of a file being cut does.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from itertools import islice
from operator import add, lt
from pathlib import Path
from typing import NamedTuple

import structlog

from broker.log import compaction, layout, producer_state, v0_wrappers
from broker.log.config import LogConfig
from broker.log.errors import (
    CorruptMessageSetError,
    CorruptSegmentError,
    InvalidMessageError,
    LogClosedError,
    LogOffsetOutOfRangeError,
    MessageSetLargerThanSegmentError,
    MessageSetTooLargeError,
    OffsetsOutOfOrderError,
    ProducerSequenceError,
    UnexpectedAppendOffsetError,
)
from broker.log.index import MAX_RELATIVE_OFFSET
from broker.log.leader_epochs import LeaderEpochCache
from broker.log.producer_state import BatchMetadata, Duplicate, ProducerStates, Reject
from broker.log.segment import Segment, SegmentFile
from broker.log.segment_list import SegmentList
from broker.log.validation import largest_entry_bytes, prepare_append
from protocol import record_batch
from protocol.entry_scan import Scan, scan_entries
from protocol.errors import ErrorCode, MessageFormatError
from protocol.messageset import CODEC_MASK, TIMESTAMP_TYPE_BIT, open_wrapper, read_entries
from protocol.record_batch import BatchHeader

log = structlog.get_logger(__name__)

# ListOffsets' special timestamps (Kafka's numbers).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


class AppendResult(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time: int  # the broker's timestamp (ms) with LogAppendTime, else -1


class ReadResult(NamedTuple):
    """A run of stored bytes: ``length`` bytes of ``file`` from ``position``.

    Send it without copying (``os.sendfile(sock, result.fileno(), result.position,
    result.length)``) or take ``bytes()``. It may end in a partial entry. The descriptor stays
    valid while the result is referenced, even if retention or compaction removes the segment.
    A named tuple: made on every fetch of every partition, it costs half a frozen dataclass.
    """

    file: SegmentFile | None
    position: int
    length: int
    offset: int  # the offset that was asked for
    # False when the segment read holds no record batch (magic 2), so readers that cannot take
    # them get these bytes as they are; True when it may (down-conversion looks)
    batches: bool = False

    def fileno(self) -> int:
        if self.file is None:
            raise ValueError("an empty read result has no file")
        return self.file.fileno()

    def bytes(self) -> bytes:
        if self.file is None or not self.length:
            return b""
        return self.file.pread(self.length, self.position)


class RecoveryLoss(NamedTuple):
    """What opening cut from a damaged log: every offset from ``first_offset`` (the log end
    offset after it) up to ``old_end`` (the log end before, as far as it could be read; -1 when
    it could not) is gone."""

    first_offset: int
    old_end: int
    bytes_removed: int
    segments_deleted: int
    reason: str | None


class PartitionLog:
    """Segments, indexes, recovery, flushing, retention and compaction of one partition."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: SegmentList,
        clock: Callable[[], float],
        cleaner_checkpoint: int,
        *,
        leader_epochs: LeaderEpochCache | None = None,
        replicated: bool = False,
        high_watermark: int | None = None,
        log_start_offset: int | None = None,
        on_flush: Callable[[float], None] | None = None,
        producers: ProducerStates | None = None,
    ) -> None:
        self._directory = directory
        # The log start: the first segment's base offset, or above it once DeleteRecords moved
        # it (``advance_log_start``); kept in the ``log-start-offset`` file.
        self._log_start = min(
            max(log_start_offset or 0, segments.log_start_offset), segments.log_end_offset
        )
        self._config = config
        self._segments: SegmentList | None = segments
        self._clock = clock
        self._on_flush = on_flush
        self._lock = threading.RLock()
        self._compacting = threading.Lock()
        self._recovery_point = segments.log_end_offset
        self._cleaner_checkpoint = cleaner_checkpoint
        self._messages_since_flush = 0
        self._last_flush = clock()
        self._unflushed: list[Segment] = []  # sealed since the last flush
        self._directory_changed = False
        self._truncations = 0  # flush and compaction drop what they did across a truncation
        self._leader_epochs = leader_epochs or LeaderEpochCache(
            directory / layout.LEADER_EPOCH_CHECKPOINT
        )
        self._replicated = replicated
        # the idempotent producers' sequences (KIP-98), as of the log end
        self._producers = producers or ProducerStates(end_offset=segments.log_end_offset)
        #: what opening dropped from a damaged log (None: nothing)
        self.recovery_loss: RecoveryLoss | None = None
        self._high_watermark: int | None = None
        if replicated:
            start, end = self._log_start, segments.log_end_offset
            wanted = start if high_watermark is None else high_watermark
            self._high_watermark = min(max(wanted, start), end)

    # ---------------------------------------------------------------------------------------
    # Opening and recovery

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        clock: Callable[[], float] = time.time,
        replicated: bool = False,
        high_watermark: int | None = None,
        on_flush: Callable[[float], None] | None = None,
    ) -> PartitionLog:
        """Open (or create) the log in ``directory``. Every segment is checked entry by entry
        (whole, CRC, offsets increasing), after a clean shutdown too: damage in a closed
        segment -- rot, a bad write, a flipped byte -- is found before a byte of it is served
        or replicated. The log is cut at the first bad entry and later segments are deleted
        (what follows a hole cannot be trusted); ``recovery_loss`` says what went. Both indexes
        of every segment are rebuilt from its entries, so a damaged index is never used.

        ``replicated``: the high watermark starts at ``high_watermark`` (the checkpointed one;
        the log start offset when None), clamped to the log, and moves only when set. Otherwise
        it follows the log end offset until set (a single broker). The leader-epoch cache is
        loaded and cut to the log as recovered. Segments written before magic 0 wrappers held
        absolute inner offsets are converted first, once (``v0_wrappers.upgrade_segments``).
        ``on_flush`` is called with each flush's duration in seconds, from whichever thread
        flushed (the broker's metrics: Kafka's LogFlushRateAndTimeMs)."""
        directory = Path(directory)
        if not directory.is_dir():
            directory.mkdir(parents=True)
            layout.fsync_dir(directory.parent)
        compaction.finish_interrupted_swap(directory)
        for leftover in directory.glob(f"*{layout.TMP}"):
            leftover.unlink()
        v0_wrappers.upgrade_segments(directory)
        bases = _segment_bases(directory)
        marker = directory / layout.CLEAN_SHUTDOWN
        clean = marker.exists()
        segments, loss = _recover(directory, bases, config.index_interval_bytes)
        if not segments:
            segments = [Segment.create(directory, 0, config.index_interval_bytes)]
        for segment in segments[:-1]:
            segment.seal()
        if clean and loss is None:  # rebuilt indexes need no fsync: every start rebuilds them
            for segment in segments[:-1]:
                segment.close_indexes()
        else:
            for segment in segments:
                segment.fsync()
            layout.write_offset_file(
                directory / layout.RECOVERY_POINT, segments[-1].next_offset, durable=True
            )
        if segments[-1].size:
            segments[-1].first_append_time = _roll_clock_start(segments[-1], clock())
        checkpoint = layout.read_offset_file(directory / layout.CLEANER_CHECKPOINT)
        checkpoint = min(checkpoint or 0, segments[-1].base_offset)
        leader_epochs = LeaderEpochCache.load(directory / layout.LEADER_EPOCH_CHECKPOINT)
        leader_epochs.truncate_from_end(segments[-1].next_offset)  # a lost tail's epochs
        log_start = layout.read_offset_file(directory / layout.LOG_START_OFFSET) or 0
        log_start = min(max(log_start, segments[0].base_offset), segments[-1].next_offset)
        leader_epochs.truncate_from_start(log_start)
        if loss is not None:
            cleaner = layout.read_offset_file(directory / layout.CLEANER_CHECKPOINT)
            if cleaner is not None and cleaner > checkpoint:
                layout.write_offset_file(
                    directory / layout.CLEANER_CHECKPOINT, checkpoint, durable=True
                )
            log.error(
                "log.recovery.data_dropped",
                directory=str(directory),
                clean_shutdown=clean,
                first_offset_dropped=loss.first_offset,
                old_log_end_offset=loss.old_end,
                bytes_removed=loss.bytes_removed,
                segments_deleted=loss.segments_deleted,
                reason=loss.reason,
            )
        if clean:
            marker.unlink()
        layout.fsync_dir(directory)
        end = segments[-1].next_offset
        producers, replay_from = ProducerStates.load(directory, log_start=log_start, log_end=end)
        opened = cls(
            directory,
            config,
            SegmentList(segments),
            clock,
            checkpoint,
            leader_epochs=leader_epochs,
            replicated=replicated,
            high_watermark=high_watermark,
            log_start_offset=log_start,
            on_flush=on_flush,
            producers=producers,
        )
        opened.recovery_loss = loss
        opened._replay_producers(replay_from)
        producers.expire(int(clock() * 1000), config.producer_id_expiration_ms)
        return opened

    # ---------------------------------------------------------------------------------------
    # Properties

    def _live(self) -> SegmentList:
        segments = self._segments
        if segments is None:
            raise LogClosedError(f"the log in {self._directory} is closed")
        return segments

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def config(self) -> LogConfig:
        return self._config

    def reconfigure(self, config: LogConfig) -> None:
        """Apply changed topic settings; they take effect from the next call on."""
        self._config = config

    @property
    def log_start_offset(self) -> int:
        return self._start(self._live())

    def _start(self, segments: SegmentList) -> int:
        """The log start: the first segment's base, or the offset DeleteRecords moved it to."""
        return max(self._log_start, segments.log_start_offset)

    @property
    def log_end_offset(self) -> int:
        """The offset the next message will get."""
        return self._live().log_end_offset

    @property
    def replicated(self) -> bool:
        """Whether the high watermark is kept by replication (see ``open``)."""
        return self._replicated

    @property
    def leader_epochs(self) -> LeaderEpochCache:
        """The partition's leader-epoch cache (``leader-epoch-checkpoint``)."""
        return self._leader_epochs

    @property
    def high_watermark(self) -> int:
        """The offset consumers may read up to. For a log that is not ``replicated``, follows
        the log end offset until set; for a replicated one, starts at its checkpoint. Never
        above the log end offset; truncation lowers it with the log end."""
        end = self.log_end_offset
        return end if self._high_watermark is None else min(self._high_watermark, end)

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        segments = self._live()
        if not self._start(segments) <= offset <= segments.log_end_offset:
            raise ValueError(
                f"high watermark {offset} is outside [{self._start(segments)}, "
                f"{segments.log_end_offset}]"
            )
        self._high_watermark = offset

    @property
    def segment_base_offsets(self) -> tuple[int, ...]:
        return self._live().bases

    @property
    def active_segment_base_offset(self) -> int:
        return self._live().active.base_offset

    def size_bytes(self) -> int:
        return self._live().size_bytes()

    # ---------------------------------------------------------------------------------------
    # Appending

    def append(self, message_set: bytes, *, leader_epoch: int | None = None) -> AppendResult:
        """Validate a produced message set, assign its offsets and write it. Nothing is
        written when it is rejected. ``leader_epoch``: the epoch of the leader appending; when
        newer than the cache's latest, it is recorded (durably, before the write) as starting
        at the set's first offset."""
        config = self._config
        # Kafka's limit is per entry: a producer's request may carry many messages each under
        # it (only a set over the limit needs the entries' sizes)
        if len(message_set) > config.max_message_bytes and (
            largest := largest_entry_bytes(message_set)) > config.max_message_bytes:
            raise MessageSetTooLargeError(
                f"a message of {largest} bytes exceeds max_message_bytes="
                f"{config.max_message_bytes}"
            )
        if len(message_set) > config.segment_bytes:
            raise MessageSetLargerThanSegmentError(
                f"message set of {len(message_set)} bytes exceeds segment_bytes="
                f"{config.segment_bytes}"
            )
        now = self._clock()
        append_time = int(now * 1000) if config.log_append_time else None
        with self._lock:
            active = self._live().active
            prepared = prepare_append(
                message_set,
                next_offset=active.next_offset,
                keys_required=config.compacted,
                log_append_time=append_time,
                leader_epoch=(
                    self._leader_epochs.latest_epoch if leader_epoch is None else leader_epoch
                ),
            )
            idempotent = [b for b in prepared.batches if b.producer_id >= 0]
            if idempotent:
                retried = self._check_producer(idempotent)
                if retried is not None:
                    log.info("log.duplicate_batches", directory=str(self._directory),
                             producer_id=idempotent[0].producer_id,
                             first_sequence=idempotent[0].base_sequence,
                             first_offset=retried.first_offset, batches=len(idempotent))
                    return AppendResult(
                        retried.first_offset, retried.last_offset,
                        retried.timestamp if append_time is not None else -1,
                    )
            if leader_epoch is not None:
                self._leader_epochs.assign(leader_epoch, prepared.first_offset)
            if self._should_roll(active, len(prepared.data), prepared.last_offset, now):
                active = self._roll()
            active.append(prepared.data, prepared.entries, now)
            for batch in idempotent:
                self._producers.update(batch)
            flush_due = self._count_unflushed(prepared.last_offset - prepared.first_offset + 1, now)
        if flush_due:
            self.flush()
        return AppendResult(
            prepared.first_offset,
            prepared.last_offset,
            append_time if append_time is not None else -1,
        )

    def _count_unflushed(self, messages: int, now: float) -> bool:
        """Count appended messages; whether a flush is due (``flush_messages``, ``flush_ms``)."""
        config = self._config
        self._messages_since_flush += messages
        return (
            config.flush_messages is not None
            and self._messages_since_flush >= config.flush_messages
        ) or (config.flush_ms is not None and (now - self._last_flush) * 1000 >= config.flush_ms)

    def append_as_follower(
        self, message_set: bytes | bytearray | memoryview, *, leader_epoch: int | None = None
    ) -> AppendResult:
        """Append entries fetched from the leader exactly as the leader stored them: offsets,
        timestamps (LogAppendTime ones included) and compressed wrappers are kept byte for
        byte. Each entry is checked as ``append`` checks a produced one (whole, sizes, magic,
        codec, CRC); the messages inside wrappers are not decompressed (the leader checked
        them), except the first entry's, to learn the set's first offset.

        A trailing partial entry (a fetch response may end in one) is left out; a set with no
        whole entry appends nothing and returns ``AppendResult(end, end - 1, -1)``, ``end``
        being the log end offset. Otherwise returns the first offset (the first message of
        the first entry) and the last one; ``log_append_time`` is -1.

        Refused, with nothing written: entries whose offsets do not increase
        (``OffsetsOutOfOrderError``); a set whose first offset is below the log end offset
        (``UnexpectedAppendOffsetError``); a malformed set (``InvalidMessageError`` /
        ``CorruptMessageSetError``); an entry larger than ``segment_bytes``. A first offset
        above the log end offset is accepted: a leader's compaction leaves gaps, and its log
        may start past ours. ``max_message_bytes`` and the key rule of compacted topics are the
        leader's to enforce (its settings may have changed since). A set larger than the
        room left in the active segment is split, at entry boundaries, over new segments.

        ``leader_epoch``: the leader epoch that wrote these entries; when newer than the
        cache's latest it is recorded as starting at the first offset. Message format v1
        carries no epoch per entry, so a fetcher whose data spans an epoch change appends it
        in two calls, split at the new epoch's start offset."""
        scan = scan_entries(message_set)
        if scan.error is not None:
            error = CorruptMessageSetError if scan.bad_crc else InvalidMessageError
            raise error(scan.error, position=scan.end)
        offsets = scan.offsets
        count = len(offsets)
        if count > 1 and not all(map(lt, offsets, islice(offsets, 1, None))):
            i = next(i for i in range(1, count) if offsets[i] <= offsets[i - 1])
            raise OffsetsOutOfOrderError(
                self._directory, offsets[i], offsets[i - 1], scan.positions[i]
            )
        if count and max(scan.sizes) > self._config.segment_bytes:
            raise MessageSetLargerThanSegmentError(
                f"an entry of {max(scan.sizes)} bytes exceeds segment_bytes="
                f"{self._config.segment_bytes}"
            )
        first = _first_offset(message_set, scan) if count else 0
        now = self._clock()
        with self._lock:
            end = self._live().log_end_offset
            if not count:
                return AppendResult(end, end - 1, -1)
            if first < end:
                raise UnexpectedAppendOffsetError(self._directory, first, offsets[-1], end)
            if leader_epoch is not None:
                self._leader_epochs.assign(leader_epoch, first)
            self._write_fetched(message_set, scan, first, now)
            flush_due = self._count_unflushed(offsets[-1] - first + 1, now)
        if flush_due:
            self.flush()
        return AppendResult(first, offsets[-1], -1)

    def _write_fetched(
        self, data: bytes | bytearray | memoryview, scan: Scan, first: int, now: float
    ) -> None:
        """Write checked entries with their own offsets, rolling as often as they need."""
        segment_bytes = self._config.segment_bytes
        offsets = scan.offsets
        active = self._live().active
        if self._should_roll(active, scan.end, offsets[-1], now):
            active = self._roll(max(active.next_offset, first))
        if (
            active.size + scan.end <= segment_bytes
            and offsets[-1] - active.base_offset <= MAX_RELATIVE_OFFSET
        ):
            whole = data if scan.end == len(data) else memoryview(data)[: scan.end]
            active.append(whole, scan, now)
            self._replay_batches(whole, scan)
            return
        # Larger than the room left: runs of entries, each filling a segment.
        view = memoryview(data)
        positions = scan.positions
        ends = list(map(add, positions, scan.sizes))
        i, low = 0, first  # low: the smallest offset entry i can hold
        while i < len(positions):
            j = min(
                bisect_right(ends, positions[i] + segment_bytes - active.size, i),
                bisect_right(offsets, active.base_offset + MAX_RELATIVE_OFFSET, i),
            )
            if j == i:
                # A gap of 2**32 offsets or more only fits a segment based past its start.
                base = max(active.next_offset, low, offsets[i] - MAX_RELATIVE_OFFSET)
                active = self._roll(base) if active.size else self._rebase_active(base)
                continue
            piece, piece_scan = view[positions[i] : ends[j - 1]], _slice(scan, i, j, ends[j - 1])
            active.append(piece, piece_scan, now)
            self._replay_batches(piece, piece_scan)  # before a roll snapshots the state
            i, low = j, offsets[j - 1] + 1

    def _should_roll(self, active: Segment, size: int, last_offset: int, now: float) -> bool:
        if not active.size:
            return False
        config = self._config
        return (
            active.size + size > config.segment_bytes
            or last_offset - active.base_offset > MAX_RELATIVE_OFFSET
            or (
                active.first_append_time is not None
                and (now - active.first_append_time) * 1000 >= config.segment_ms
            )
        )

    def roll(self) -> None:
        """Start a new active segment now (nothing happens while the active one is empty)."""
        with self._lock:
            if self._live().active.size:
                self._roll()

    def _roll(self, base_offset: int | None = None) -> Segment:
        """Seal the active segment and start one at ``base_offset`` (default: the log end; a
        follower's may be higher, after a gap)."""
        segments = self._live()
        old = segments.active
        old.seal()
        base = old.next_offset if base_offset is None else base_offset
        self._snapshot_producers(old.next_offset)
        new = Segment.create(self._directory, base, self._config.index_interval_bytes)
        self._unflushed.append(old)
        self._directory_changed = True
        self._segments = segments.rolled(new)
        log.debug("log.rolled", directory=str(self._directory), base_offset=new.base_offset)
        return new

    def _rebase_active(self, base_offset: int) -> Segment:
        """Replace the empty active segment by one based at ``base_offset``."""
        segments = self._live()
        segments.active.delete_files()
        new = Segment.create(self._directory, base_offset, self._config.index_interval_bytes)
        self._directory_changed = True
        self._segments = SegmentList((*segments.closed, new))
        return new

    # ---------------------------------------------------------------------------------------
    # Reading

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> ReadResult:
        """Up to ``max_bytes`` stored bytes from the entry holding ``offset``, stopping before
        ``max_offset`` (the high watermark, for consumers). Reading at the log end offset gives
        an empty result; an offset outside [log start, log end] raises
        ``LogOffsetOutOfRangeError``."""
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        segments = self._segments
        if segments is None:
            raise LogClosedError(f"the log in {self._directory} is closed")
        # The common case inlined: the active segment (a reader keeping up with the appends).
        active = segments.segments[-1]
        end = active.next_offset
        start = self._log_start
        if start < segments.bases[0]:
            start = segments.bases[0]
        if not start <= offset <= end:
            raise LogOffsetOutOfRangeError(offset, start, end)
        limit = end if max_offset is None or max_offset > end else max_offset
        if offset >= limit or not max_bytes:
            return ReadResult(None, 0, 0, offset)
        if offset >= active.base_offset:
            segment = active
            position = segment.find_position(offset)
            if position >= segment.size:
                return ReadResult(None, 0, 0, offset)
        else:
            for segment in segments.segments[segments.floor(offset) :]:
                position = segment.find_position(offset)
                if position < segment.size:
                    break
            else:
                return ReadResult(None, 0, 0, offset)  # compacted away up to the end
        stop = segment.size
        if limit < segment.next_offset:
            stop = segment.find_position(limit)
        length = stop - position
        if length > max_bytes:
            length = max_bytes
        elif length <= 0:
            return ReadResult(None, 0, 0, offset)
        return ReadResult(segment.file, position, length, offset,
                          segment.holds_batches is not False)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first message whose timestamp is at or after
        ``timestamp_ms``, or None. Kafka's -2 (earliest) and -1 (latest) give the log start and
        end offsets, with timestamp -1."""
        segments = self._live()
        if timestamp_ms == EARLIEST_TIMESTAMP:
            return self._start(segments), -1
        if timestamp_ms == LATEST_TIMESTAMP:
            return segments.log_end_offset, -1
        if timestamp_ms < 0:
            raise ValueError(f"timestamp must be >= 0, -1 or -2, got {timestamp_ms}")
        found = self._find_timestamp(segments, timestamp_ms)
        if found is None:
            return None
        return max(found[0], self._start(segments)), found[1]  # none below the log start

    @staticmethod
    def _find_timestamp(segments: SegmentList, timestamp_ms: int) -> tuple[int, int] | None:
        for segment in segments.segments:
            if segment.max_timestamp < timestamp_ms:
                continue
            start = segment.time_index.lookup(timestamp_ms)
            for position, offset, size, magic, attributes, ts in segment.headers_from(start):
                if ts < timestamp_ms:
                    continue
                if magic == record_batch.MAGIC:
                    return _batch_offset_for(segment.file.pread(size, position), timestamp_ms)
                if not attributes & CODEC_MASK:
                    return offset, ts
                inner = open_wrapper(segment.read_entry(position, size))
                if attributes & TIMESTAMP_TYPE_BIT:  # log-append time: the wrapper's counts
                    return inner[0].offset, ts
                for message in inner:
                    if message.timestamp >= timestamp_ms:
                        return message.offset, message.timestamp
        return None

    # ---------------------------------------------------------------------------------------
    # Flushing

    def flush(self) -> None:
        """fsync everything written so far and move the recovery point to the log end."""
        started = time.perf_counter()
        with self._lock:
            segments = self._live()
            pending = [*self._unflushed, segments.active]
            target = segments.log_end_offset
            directory_changed = self._directory_changed
            truncations = self._truncations
            self._unflushed = []
            self._directory_changed = False
            self._messages_since_flush = 0
            self._last_flush = self._clock()
        for segment in pending:  # outside the lock: appends go on meanwhile
            segment.fsync()
        if directory_changed:
            layout.fsync_dir(self._directory)
        with self._lock:
            if (
                target > self._recovery_point
                and self._segments is not None
                and self._truncations == truncations  # else target may be past a cut
            ):
                self._recovery_point = target
                # Not fsynced: a lost update only makes recovery start earlier.
                layout.write_offset_file(self._directory / layout.RECOVERY_POINT, target)
        if self._on_flush is not None:
            self._on_flush(time.perf_counter() - started)

    def maybe_flush(self, now: float | None = None) -> bool:
        """Flush when data has been waiting ``flush_ms`` (called by the server's timer)."""
        flush_ms = self._config.flush_ms
        now = self._clock() if now is None else now
        if (
            flush_ms is None
            or self._segments is None
            or not self._messages_since_flush
            or (now - self._last_flush) * 1000 < flush_ms
        ):
            return False
        self.flush()
        return True

    # ---------------------------------------------------------------------------------------
    # Truncation and leader epochs (replication)

    def truncate_to(self, offset: int) -> int:
        """Remove every entry holding ``offset`` or a later one, and return the new log end
        offset. Entries go whole (Kafka truncates at entry boundaries): a compressed wrapper
        holding ``offset`` goes with all its messages, so the new log end -- the offset after
        the last remaining entry, or the log start when none remains -- may be below
        ``offset``. Later segments are deleted; the segment holding the cut becomes the active
        one, its file and both indexes cut. The recovery point, the high watermark and the
        cleaner checkpoint are lowered to fit, and the leader-epoch cache loses the epochs
        starting at or after the new end. Durable (fsynced) when it returns.

        ``offset`` at or above the log end offset changes nothing. Below the log start offset,
        the log is emptied and starts at ``offset`` (``truncate_fully_and_start_at``)."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self._directory} to a negative offset {offset}")
        with self._lock:
            segments = self._live()
            old_end = segments.log_end_offset
            if offset >= old_end:
                return old_end
            if offset < self._start(segments):
                self._start_empty_at(offset)
                end = offset
            else:
                end = self._truncate_segments(segments, offset)
        log.info(
            "log.truncated",
            directory=str(self._directory),
            offset=offset,
            old_log_end_offset=old_end,
            log_end_offset=end,
        )
        return end

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset`` (log start = log end =
        ``offset``): a follower whose log is wholly behind its leader's log start. The
        leader-epoch cache is cleared; the recovery point, cleaner checkpoint and the high
        watermark (if held) become ``offset``. Durable when it returns."""
        if offset < 0:
            raise ValueError(f"cannot start {self._directory} at a negative offset {offset}")
        with self._lock:
            old = self._live()
            self._start_empty_at(offset)
        log.info(
            "log.truncated_fully",
            directory=str(self._directory),
            old_log_start_offset=self._start(old),
            old_log_end_offset=old.log_end_offset,
            log_start_offset=offset,
        )

    def _truncate_segments(self, segments: SegmentList, offset: int) -> int:
        """``truncate_to`` for log start <= ``offset`` < log end."""
        index = segments.floor(offset)
        keep = segments.segments[: index + 1]
        if keep[-1].find_position(offset) == 0:
            keep = keep[:-1]  # left empty: the one before ends the log
        while keep and not keep[-1].size:  # so do empty ones compaction left (but the first)
            keep = keep[:-1]
        keep = keep or segments.segments[:1]
        self._truncations += 1
        for segment in reversed(segments.segments[len(keep) :]):  # newest first: no holes
            segment.delete_files()
        last = keep[-1]
        last.truncate_to(offset)
        if last.first_append_time is None and last.size:
            last.first_append_time = _roll_clock_start(last, self._clock())
        self._segments = SegmentList(keep)
        self._unflushed = [s for s in self._unflushed if s in keep and s is not last]
        os.fsync(last.file.fileno())
        last.index.fsync()
        last.time_index.fsync()
        self._after_truncation(
            min(self._recovery_point, last.next_offset),
            min(self._cleaner_checkpoint, last.base_offset),
        )
        self._leader_epochs.truncate_from_end(last.next_offset)
        replay_from = self._producers.truncate_to(
            last.next_offset, self._directory, log_start=self._start(self._live()))
        self._replay_producers(replay_from, last.next_offset)
        return last.next_offset

    def _start_empty_at(self, offset: int) -> None:
        segments = self._live()
        self._truncations += 1
        for segment in reversed(segments.segments):
            segment.delete_files()
        new = Segment.create(self._directory, offset, self._config.index_interval_bytes)
        self._segments = SegmentList([new])
        self._unflushed = []
        if self._log_start != offset:
            self._log_start = offset
            layout.write_offset_file(
                self._directory / layout.LOG_START_OFFSET, offset, durable=True
            )
        self._after_truncation(offset, offset)
        self._leader_epochs.clear()
        self._producers.truncate_fully(self._directory, offset)

    def _after_truncation(self, recovery_point: int, cleaner_checkpoint: int) -> None:
        """Bring the state files and the high watermark in line with the cut segments. Writing
        the recovery point durably also makes the deletions durable (it fsyncs the
        directory)."""
        segments = self._live()
        if cleaner_checkpoint != self._cleaner_checkpoint:
            self._cleaner_checkpoint = cleaner_checkpoint
            layout.write_offset_file(
                self._directory / layout.CLEANER_CHECKPOINT, cleaner_checkpoint, durable=True
            )
        self._recovery_point = recovery_point
        layout.write_offset_file(
            self._directory / layout.RECOVERY_POINT, recovery_point, durable=True
        )
        if self._high_watermark is not None:
            self._high_watermark = min(
                max(self._high_watermark, self._start(segments)), segments.log_end_offset
            )

    def assign_leader_epoch(self, epoch: int) -> bool:
        """Record that ``epoch`` starts at the log end offset, as a new leader does on taking
        over (KIP-279: its epoch is known before it writes). See ``LeaderEpochCache.assign``."""
        with self._lock:
            return self._leader_epochs.assign(epoch, self._live().log_end_offset)

    def end_offset_for_epoch(self, requested_epoch: int) -> tuple[int, int]:
        """``LeaderEpochCache.end_offset_for`` with this log's end offset: the answer to
        OffsetsForLeaderEpoch."""
        with self._lock:
            return self._leader_epochs.end_offset_for(requested_epoch, self._live().log_end_offset)

    # ---------------------------------------------------------------------------------------
    # Idempotent producers (KIP-98): their state follows the log (broker.log.producer_state)

    @property
    def producers(self) -> ProducerStates:
        """The idempotent producers' state as of the log end (read it under no lock: for
        describing only)."""
        return self._producers

    def expire_producers(self, now: float | None = None) -> list[int]:
        """Forget the producers idle for ``producer_id_expiration_ms``; their ids."""
        now_ms = int((self._clock() if now is None else now) * 1000)
        with self._lock:
            return self._producers.expire(now_ms, self._config.producer_id_expiration_ms)

    def _check_producer(self, batches: list[BatchHeader]) -> BatchMetadata | None:
        """Check an idempotent producer's batches (one producer's, numbered on from each
        other: validation saw to it) against its state. A retry -- every batch written
        before -- gives what the first write covered, to answer with; new batches give None;
        anything else raises ``ProducerSequenceError``."""
        checked = self._producers.check(batches[0])
        if isinstance(checked, Reject):
            raise ProducerSequenceError(checked.error, checked.reason)
        if not isinstance(checked, Duplicate):
            return None
        first = last = checked.original
        for batch in batches[1:]:
            again = self._producers.check(batch)
            if not isinstance(again, Duplicate):  # part written before, part not: no producer
                raise ProducerSequenceError(  # resends a request otherwise than it sent it
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {batch.producer_id}: sequence {first.first_sequence} was "
                    f"written before, sequence {batch.base_sequence} of the same set was not")
            last = again.original
        return first._replace(last_sequence=last.last_sequence, last_offset=last.last_offset,
                              timestamp=max(first.timestamp, last.timestamp))

    def _replay_producers(self, from_offset: int, to_offset: int | None = None) -> None:
        """Take the record batches stored from ``from_offset`` (to ``to_offset``) into the
        producer state: after opening from a snapshot, after a truncation. Segments known to
        hold no batch are skipped unread."""
        segments = self._live()
        end = segments.log_end_offset if to_offset is None else to_offset
        if from_offset >= end:
            return
        replayed = 0
        for segment in segments.segments[segments.floor(max(from_offset, 0)) :]:
            if segment.base_offset >= end:
                break
            if segment.holds_batches is False or segment.next_offset <= from_offset:
                continue
            for position, offset, _size, magic, _attributes, _ts in segment.headers_from(
                max(from_offset, segment.base_offset)
            ):
                if offset >= end:
                    break
                if magic != record_batch.MAGIC or offset < from_offset:
                    continue
                header = record_batch.read_batch_header(
                    segment.file.pread(record_batch.HEADER_BYTES, position))
                if header is not None and header.base_offset >= from_offset:
                    self._producers.replay(header)
                    replayed += 1
        if replayed:
            log.info("log.producer_state.replayed", directory=str(self._directory),
                     from_offset=from_offset, to_offset=end, batches=replayed,
                     producers=len(self._producers))

    def _replay_batches(self, data: bytes | bytearray | memoryview, scan: Scan) -> None:
        """Take a follower's appended batches into the producer state (the leader checked
        them; the log is the truth)."""
        if record_batch.MAGIC not in scan.magics:
            return
        for position, magic in zip(scan.positions, scan.magics, strict=True):
            if magic == record_batch.MAGIC:
                header = record_batch.read_batch_header(data, position)
                if header is not None:
                    self._producers.replay(header)

    def _snapshot_producers(self, offset: int) -> None:
        """Write the producer state at ``offset`` (the log end) when there is any, or was:
        at every roll and on close, so that opening replays at most the active segment.
        Snapshots below the active segment's base go; the one at it stays, for a truncation
        into the active segment to start from."""
        if not len(self._producers) and not producer_state.snapshot_offsets(self._directory):
            return
        self._producers.write_snapshot(self._directory, offset)
        producer_state.delete_snapshots(self._directory, below=self._live().active.base_offset)

    # ---------------------------------------------------------------------------------------
    # Retention

    def enforce_retention(self, now: float | None = None) -> int:
        """Delete the oldest closed segments past ``retention_ms`` or beyond
        ``retention_bytes`` (never the active one, nor one holding offsets at or above the high
        watermark: followers may still need them). Returns how many were deleted."""
        config = self._config
        if config.compacted:
            return 0
        now_ms = int((self._clock() if now is None else now) * 1000)
        with self._lock:
            segments = self._live()
            closed = segments.closed
            if self._high_watermark is not None:
                high_watermark = self._high_watermark
                below = 0
                while below < len(closed) and closed[below].next_offset <= high_watermark:
                    below += 1
                closed = closed[:below]
            count = 0
            if config.retention_ms is not None:
                while (
                    count < len(closed)
                    and now_ms - closed[count].last_modified_ms() > config.retention_ms
                ):
                    count += 1
            if config.retention_bytes is not None:
                excess = segments.size_bytes() - config.retention_bytes
                excess -= sum(s.size for s in closed[:count])
                while count < len(closed) and excess - closed[count].size >= 0:
                    excess -= closed[count].size
                    count += 1
            if not count:
                return 0
            remaining = self._delete_oldest(segments, count)
            log_start = self._start(remaining)
            self._leader_epochs.truncate_from_start(log_start)
            self._producers_from_start(log_start)
        log.info(
            "log.retention",
            directory=str(self._directory),
            segments_deleted=count,
            log_start_offset=log_start,
        )
        return count

    def _producers_from_start(self, log_start: int) -> None:
        """The log start moved: producers stay until they expire (KAFKA-7190), and a snapshot
        at or above the new start keeps them across a restart before the older ones go."""
        self._producers.truncate_from_start(log_start)
        offsets = producer_state.snapshot_offsets(self._directory)
        if len(self._producers) and not any(o >= log_start for o in offsets):
            self._producers.write_snapshot(self._directory, self._live().log_end_offset)
        producer_state.delete_snapshots(self._directory, below=log_start)

    def _delete_oldest(self, segments: SegmentList, count: int) -> SegmentList:
        """Drop the ``count`` oldest closed segments of ``segments``, files included (retention,
        DeleteRecords); under the lock. What remains."""
        self._segments = remaining = segments.without_first(count)
        for segment in segments.closed[:count]:
            segment.delete_files()
            if segment in self._unflushed:
                self._unflushed.remove(segment)
        self._directory_changed = True
        return remaining

    def advance_log_start(self, offset: int) -> bool:
        """Move the log start up to ``offset`` (DeleteRecords; a follower following its
        leader's log start): reads below it fail with ``LogOffsetOutOfRangeError`` and
        ListOffsets' earliest gives it. The closed segments wholly below it are deleted at once;
        the one holding it stays until retention passes it. Durable (the ``log-start-offset``
        file) when it returns. An offset at or below the log start changes nothing (False);
        one above the log end offset raises ``LogOffsetOutOfRangeError``."""
        with self._lock:
            segments = self._live()
            start, end = self._start(segments), segments.log_end_offset
            if offset <= start:
                return False
            if offset > end:
                raise LogOffsetOutOfRangeError(offset, start, end)
            layout.write_offset_file(self._directory / layout.LOG_START_OFFSET, offset,
                                     durable=True)
            self._log_start = offset
            closed = segments.closed
            count = 0
            while count < len(closed) and closed[count].next_offset <= offset:
                count += 1
            if count:
                self._delete_oldest(segments, count)
            self._leader_epochs.truncate_from_start(offset)
            self._producers_from_start(offset)
            if self._high_watermark is not None and self._high_watermark < offset:
                self._high_watermark = offset
        log.info(
            "log.start_advanced",
            directory=str(self._directory),
            log_start_offset=offset,
            segments_deleted=count,
        )
        return True

    # ---------------------------------------------------------------------------------------
    # Compaction

    def compact(self, now: float | None = None) -> bool:
        """Compact the closed segments, when the policy is ``compact`` and the dirty ratio
        reaches ``min_cleanable_dirty_ratio``: one pass, or several when the dirty keys do not
        fit ``cleaner_dedupe_buffer_bytes`` (each pass cleans up to the end of its key map and
        moves the cleaner checkpoint there). Returns whether it ran."""
        config = self._config
        if not config.compacted or not self._compacting.acquire(blocking=False):
            return False
        try:
            when = self._clock() if now is None else now
            ran = self._compact(config, when, check_ratio=True)
            while ran is not None and ran.full:  # the rest of the dirty section
                ran = self._compact(config, when, check_ratio=False)
            return ran is not None
        finally:
            self._compacting.release()

    def _compact(
        self, config: LogConfig, now: float, *, check_ratio: bool
    ) -> compaction.OffsetMap | None:
        """One pass; its offset map, or None when it did not run."""
        with self._lock:
            segments = self._live()
            closed = segments.closed
            checkpoint = self._cleaner_checkpoint
            truncations = self._truncations
            producers_last = {
                pid: entry.last_offset
                for pid, entry in self._producers.active_producers().items()
            }
        ratio, dirty = compaction.dirty_ratio(closed, checkpoint)
        if not dirty or (check_ratio and ratio < config.min_cleanable_dirty_ratio):
            return None
        cleaned: list[Segment] = []
        try:
            mapped = compaction.offset_map(
                (s for s in closed if s.next_offset > checkpoint),
                checkpoint,
                config.cleaner_dedupe_buffer_bytes,
            )
            upto = mapped.end if mapped.full else None
            horizon = int(now * 1000) - config.delete_retention_ms
            for group in compaction.groups(closed, config.segment_bytes):
                cleaned.append(
                    compaction.write_cleaned(
                        group, mapped.latest, horizon, config.index_interval_bytes, upto,
                        producers_last,
                    )
                )
            with self._lock:
                current = self._live()
                if current.segments[: len(closed)] != closed or self._truncations != truncations:
                    raise _Abandoned  # a segment may have been cut meanwhile
                self._swap(closed, cleaned, current)
                self._cleaner_checkpoint = (
                    mapped.end + 1 if mapped.full else segments.active.base_offset
                )
                layout.write_offset_file(
                    self._directory / layout.CLEANER_CHECKPOINT, self._cleaner_checkpoint
                )
        except _Abandoned:
            _discard(cleaned)
            return None
        except (LogClosedError, OSError):
            _discard(cleaned)
            if self._segments is None:  # closed or deleted meanwhile
                return None
            raise
        log.info(
            "log.compacted",
            directory=str(self._directory),
            segments_in=len(closed),
            segments_out=len(cleaned),
            bytes_in=sum(s.size for s in closed),
            bytes_out=sum(s.size for s in cleaned),
            dirty_ratio=round(ratio, 3),
            keys_mapped=len(mapped.latest),
            cleaned_upto=mapped.end if mapped.full else segments.active.base_offset - 1,
        )
        return mapped

    def _swap(self, old: tuple[Segment, ...], new: list[Segment], current: SegmentList) -> None:
        """Replace ``old`` (the first segments) by ``new``: manifest first, so that a crash
        part-way is completed at the next open; then one segment-list replacement."""
        manifest = self._directory / layout.SWAP_MANIFEST
        new_bases = [s.base_offset for s in new]
        layout.write_swap_manifest(manifest, [s.base_offset for s in old], new_bases)
        for segment in old:
            if segment.base_offset in new_bases:
                segment.close_indexes()  # its files are replaced by rename below
            else:
                segment.delete_files()
        for segment in new:
            segment.install()
        self._segments = current.replacing_first(len(old), new)
        self._unflushed = [s for s in self._unflushed if s not in old]
        manifest.unlink()
        layout.fsync_dir(self._directory)

    # ---------------------------------------------------------------------------------------
    # Closing

    def close(self) -> None:
        """Flush, record a clean shutdown and let go of the files (idempotent)."""
        with self._lock:
            if self._segments is None:
                return
            self._segments.active.seal()
            self.flush()
            self._snapshot_producers(self._segments.log_end_offset)
            (self._directory / layout.CLEAN_SHUTDOWN).touch()
            layout.fsync_dir(self._directory)
            self._release()

    def delete(self) -> None:
        """Close and remove the whole directory (the topic was deleted). The directory is
        first renamed out of the ``<topic>-<partition>`` pattern, so that a crash part-way
        does not leave a log that is opened again."""
        with self._lock:
            self._release()
            doomed = self._directory.with_name(self._directory.name + DELETING_SUFFIX)
            if doomed.exists():
                shutil.rmtree(doomed)
            if self._directory.exists():
                os.rename(self._directory, doomed)
                layout.fsync_dir(doomed.parent)
                shutil.rmtree(doomed)

    def _release(self) -> None:
        if self._segments is not None:
            for segment in self._segments.segments:
                segment.close_indexes()
        self._segments = None
        self._unflushed = []

    def __repr__(self) -> str:
        if self._segments is None:
            return f"PartitionLog({str(self._directory)!r}, closed)"
        return (
            f"PartitionLog({str(self._directory)!r}, start={self.log_start_offset}, "
            f"end={self.log_end_offset}, segments={len(self._segments.segments)})"
        )


DELETING_SUFFIX = ".deleting"


class _Abandoned(Exception):
    """The segment list changed under a compaction pass; its output is thrown away."""


def _first_offset(message_set: bytes | bytearray | memoryview, scan: Scan) -> int:
    """The offset of the first message of a checked set: its first entry's, for a record
    batch its base offset, or for a compressed wrapper (which bears its last message's) that
    of its first inner message."""
    if scan.magics[0] == record_batch.MAGIC:
        return record_batch.read_base_offset(message_set, scan.positions[0])
    if not scan.attributes[0] & CODEC_MASK:
        return scan.offsets[0]
    try:
        (wrapper,), _ = read_entries(memoryview(message_set)[: scan.sizes[0]])
        return open_wrapper(wrapper)[0].offset
    except MessageFormatError as exc:
        raise InvalidMessageError.wrapping(exc) from None


def _batch_offset_for(batch: bytes, timestamp_ms: int) -> tuple[int, int]:
    """The first record of a stored batch (whose max timestamp reaches ``timestamp_ms``) at or
    after ``timestamp_ms``, and its timestamp; with LogAppendTime, the batch's first."""
    header = record_batch.read_batch_header(batch)
    assert header is not None  # stored whole
    if (header.attributes & record_batch.TIMESTAMP_TYPE_BIT
            and header.record_count == header.last_offset_delta + 1):  # not compacted
        return header.base_offset, header.max_timestamp
    for record in record_batch.decode_records(batch, header):
        if record.timestamp >= timestamp_ms:
            return record.offset, record.timestamp
    return header.last_offset, header.max_timestamp  # an empty batch compaction left


def _slice(scan: Scan, i: int, j: int, end: int) -> Scan:
    """Entries ``i`` to ``j`` of ``scan`` (which end at ``end``), positions counted from the
    first of them."""
    start = scan.positions[i]
    return Scan(
        [position - start for position in scan.positions[i:j]],
        scan.offsets[i:j],
        scan.sizes[i:j],
        scan.magics[i:j],
        scan.attributes[i:j],
        scan.timestamps[i:j],
        scan.key_lengths[i:j],
        end - start,
        None,
        False,
    )


def _discard(cleaned: list[Segment]) -> None:
    for segment in cleaned:
        if segment.suffix:
            segment.delete_files()


def _roll_clock_start(segment: Segment, now: float) -> float:
    """Where segment_ms counts from for a segment reopened with data: its first message's
    timestamp (as Kafka counts from the first batch's), so a restart does not postpone the
    roll; ``now`` when that carries none (magic 0) or lies in the future."""
    first_ms = segment.first_timestamp_ms()
    return now if first_ms < 0 else min(now, first_ms / 1000)


def _segment_bases(directory: Path) -> list[int]:
    """Base offsets of the segments in ``directory``; index files without a log are dropped."""
    logs: set[int] = set()
    others: list[tuple[int, Path]] = []
    for path in directory.iterdir():
        parsed = layout.parse_segment_name(path.name)
        if parsed is None:
            continue
        base, suffix = parsed
        if suffix == layout.LOG:
            logs.add(base)
        else:
            others.append((base, path))
    for base, path in others:
        if base not in logs:
            path.unlink()
    return sorted(logs)


def _recover(
    directory: Path, bases: list[int], index_interval_bytes: int
) -> tuple[list[Segment], RecoveryLoss | None]:
    """Open and check every segment, entry by entry, rebuilding its indexes. At the first bad
    entry the segment is truncated and every later segment deleted: what follows a hole cannot
    be trusted. Returns the segments and what was lost (None: nothing)."""
    segments: list[Segment] = []
    for i, base in enumerate(bases):
        segment, truncated, reason = Segment.recovered(directory, base, index_interval_bytes)
        segments.append(segment)
        if not truncated:
            continue
        later = bases[i + 1 :]
        # the cut entries' offsets cannot be trusted; a later segment's can be tried
        old_end = _last_end(directory, later[-1], index_interval_bytes) if later else -1
        log.warning(
            "log.recovery.truncated",
            directory=str(directory),
            base_offset=base,
            position=segment.size,
            bytes_removed=truncated,
            reason=reason,
        )
        removed = truncated
        for doomed in later:
            for suffix in layout.SEGMENT_SUFFIXES:
                path = layout.segment_path(directory, doomed, suffix)
                if suffix == layout.LOG and path.exists():
                    removed += path.stat().st_size
                path.unlink(missing_ok=True)
        return segments, RecoveryLoss(segment.next_offset, old_end, removed, len(later), reason)
    return segments, None


def _last_end(directory: Path, base: int, index_interval_bytes: int) -> int:
    """The log end a segment about to be deleted reached, read from its last index entry on
    (-1 when that cannot be read either)."""
    try:
        segment = Segment.open(directory, base, index_interval_bytes)
    except (OSError, CorruptSegmentError):
        return -1
    segment.close_indexes()
    return segment.next_offset
