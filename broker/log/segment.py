"""One segment: a ``.log`` file of entries starting at a base offset, with its two indexes.

Only the last segment of a log (the active one) is appended to; a rolled segment is sealed and
never changes again, except that retention may delete it and compaction may replace it.
"""

from __future__ import annotations

import contextlib
import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from itertools import accumulate, compress, islice, repeat
from operator import gt
from pathlib import Path

import structlog

from broker.log import layout
from broker.log.errors import CorruptSegmentError
from broker.log.index import OffsetIndex, TimeIndex
from protocol import record_batch
from protocol.entry_scan import Scan, entry_size_at, scan_entries
from protocol.messageset import LOG_OVERHEAD, MIN_SIZE, Entry, read_entries

log = structlog.get_logger(__name__)

# offset, size, crc, magic, attributes, timestamp: 26 bytes, which even the smallest entry has
_HEADER = struct.Struct(">qiIBBq")
_OFFSET_SIZE = struct.Struct(">qi")
_HEADER_BLOCK = 8192
# a record batch's attributes, last offset delta, first and max timestamps (from byte 21)
_BATCH_HEAD = struct.Struct(">hiqq")
_BATCH_HEAD_AT = record_batch.ATTRIBUTES_AT
_BATCH_HEAD_END = _BATCH_HEAD_AT + _BATCH_HEAD.size
_LAST_DELTA = struct.Struct(">i")
_MAGIC_AT = record_batch.MAGIC_AT
_CRC_END = _MAGIC_AT + 1  # every whole entry reaches its magic byte
_SCAN_CHUNK = 1 << 20
# The append starts the active segment remembers for find_position (``_remember_start``):
# between this many and twice as many, 16 bytes each.
APPEND_STARTS_KEPT = 128


class SegmentFile:
    """The open descriptor of a ``.log`` file, closed when the last holder lets go of it.

    The segment list, and every ``ReadResult`` handed to the network layer, hold a reference.
    Retention and compaction unlink files and drop the list's reference, but a read already
    answered keeps its descriptor (and the unlinked inode) until it has been sent: seed 000's
    copy-on-write segment list, without a lock on the read path.
    """

    __slots__ = ("_fd",)

    def __init__(self, path: Path, flags: int) -> None:
        self._fd = os.open(path, os.O_RDWR | flags, 0o644)

    def fileno(self) -> int:
        return self._fd

    def pread(self, length: int, position: int) -> bytes:
        data = os.pread(self._fd, length, position)
        if len(data) < length:  # a regular file returns short only at its end, but be exact
            parts = [data]
            got = len(data)
            while got < length:
                more = os.pread(self._fd, length - got, position + got)
                if not more:
                    break
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        return data

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


class Segment:
    """A segment's file, indexes and the running state appends need."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        file: SegmentFile,
        index_interval_bytes: int,
        *,
        suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.file = file
        self.suffix = suffix
        self.index_interval_bytes = index_interval_bytes
        self.size = os.fstat(file.fileno()).st_size
        self.index = OffsetIndex(self.path(layout.INDEX), base_offset)
        self.time_index = TimeIndex(self.path(layout.TIME_INDEX), base_offset)
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.bytes_since_index = 0
        self.first_append_time: float | None = None  # wall clock, for rolling by segment_ms
        self.sealed = False
        # whether any entry is a record batch (magic 2), which producer state is rebuilt from:
        # False for a new segment or one every entry of was scanned without one; None unknown
        self.holds_batches: bool | None = None if self.size else False
        # Where recent appends began: the log end offsets before them and the positions they
        # wrote at, the offsets a reader that has caught up asks for next (find_position). One
        # attribute, replaced whole by a truncation (which may run in a worker thread while
        # the event loop reads), so that a reader sees both columns of one version.
        self._append_starts = (array("q"), array("q"))

    def path(self, suffix: str) -> Path:
        return layout.segment_path(self.directory, self.base_offset, suffix, self.suffix)

    def __repr__(self) -> str:
        return (
            f"Segment(base={self.base_offset}, next={self.next_offset}, size={self.size}"
            f"{', sealed' if self.sealed else ''})"
        )

    # ---------------------------------------------------------------------------------------
    # Opening

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, index_interval_bytes: int, *, suffix: str = ""
    ) -> Segment:
        """A new, empty segment (``suffix`` names a compacted segment being written)."""
        flags = os.O_CREAT | (os.O_TRUNC if suffix else os.O_EXCL)
        path = layout.segment_path(directory, base_offset, layout.LOG, suffix)
        segment = cls(
            directory, base_offset, SegmentFile(path, flags), index_interval_bytes, suffix=suffix
        )
        segment.index.reset()
        segment.time_index.reset()
        return segment

    @classmethod
    def open(cls, directory: Path, base_offset: int, index_interval_bytes: int) -> Segment:
        """An existing segment after a clean shutdown: indexes are loaded (rebuilt if missing
        or damaged) and only the entries after the last index entry are read."""
        path = layout.segment_path(directory, base_offset, layout.LOG)
        segment = cls(directory, base_offset, SegmentFile(path, 0), index_interval_bytes)
        if not segment._load_indexes():
            truncated, reason = segment.recover()
            log.warning(
                "log.segment.indexes_rebuilt",
                segment=str(path),
                bytes_removed=truncated,
                reason=reason,
            )
        return segment

    @classmethod
    def recovered(
        cls, directory: Path, base_offset: int, index_interval_bytes: int
    ) -> tuple[Segment, int, str | None]:
        """An existing segment checked by ``recover``, its indexes rebuilt. Indexes that
        differ from the rebuilt ones (beyond the entry ``seal`` adds) are reported."""
        path = layout.segment_path(directory, base_offset, layout.LOG)
        segment = cls(directory, base_offset, SegmentFile(path, 0), index_interval_bytes)
        found = [_read_or_none(segment.path(suffix)) for suffix in _INDEXES]
        truncated, reason = segment.recover()
        if not truncated:
            for suffix, before in zip(_INDEXES, found, strict=True):
                after = segment.path(suffix).read_bytes()
                sealed_extra = TimeIndex.ENTRY.size if suffix == layout.TIME_INDEX else 0
                if before is None or not (
                    before.startswith(after) and len(before) - len(after) <= sealed_extra
                ):
                    log.warning(
                        "log.segment.index_rebuilt",
                        index=str(segment.path(suffix)),
                        found_bytes=None if before is None else len(before),
                        rebuilt_bytes=len(after),
                    )
        return segment, truncated, reason

    def _load_indexes(self) -> bool:
        index = OffsetIndex.load(self.path(layout.INDEX), self.base_offset, self.size)
        time_index = TimeIndex.load(self.path(layout.TIME_INDEX), self.base_offset)
        if index is None or time_index is None:
            return False
        last = index.last()
        if last is not None:
            # The last entry must point at an entry with that offset, or the index is stale.
            head = self.file.pread(LOG_OVERHEAD, last[1])
            if len(head) < LOG_OVERHEAD or struct.unpack_from(">q", head)[0] != last[0]:
                return False
        self.index, self.time_index = index, time_index
        largest = time_index.last()
        self.max_timestamp = largest[0] if largest else -1
        start = last[1] if last is not None else 0
        self.bytes_since_index = self.size - start
        try:
            for _pos, offset, _size, _magic, _attributes, timestamp in self._headers(start):
                self.next_offset = offset + 1
                self.max_timestamp = max(self.max_timestamp, timestamp)
        except CorruptSegmentError:
            return False
        # A time index pointing past the segment's end is as stale as a bad offset index.
        return largest is None or largest[1] < self.next_offset

    def recover(self) -> tuple[int, str | None]:
        """Check every entry (whole, CRC, offsets increasing), truncate the file at the first
        bad one and rebuild both indexes. Returns the bytes cut off and why."""
        self.index.reset()
        self.time_index.reset()
        self._forget_starts_from(0)
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.bytes_since_index = 0
        self.holds_batches = False
        file_size = os.fstat(self.file.fileno()).st_size
        pos = 0
        reason: str | None = None
        after = self.base_offset - 1
        while pos < file_size:
            buf = self.file.pread(min(_SCAN_CHUNK, file_size - pos), pos)
            scan = scan_entries(buf, after_offset=after)
            if not scan.positions and scan.error is None:
                need = entry_size_at(buf, 0)
                if need is None or need > file_size - pos:
                    reason = "incomplete entry at the end of the file"
                    break
                buf = self.file.pread(need, pos)  # one entry larger than the chunk
                scan = scan_entries(buf, after_offset=after)
            self._account(scan, pos)
            if scan.offsets:
                after = scan.offsets[-1]
            pos += scan.end
            if scan.error is not None:
                reason = scan.error
                break
        self.index.write_pending()
        self.time_index.write_pending()
        if pos < file_size:
            os.ftruncate(self.file.fileno(), pos)
        self.size = pos
        return file_size - pos, reason

    # ---------------------------------------------------------------------------------------
    # Writing

    def append(self, data: bytes | bytearray | memoryview, entries: Scan, now: float) -> None:
        """Write validated entries at the end; ``entries`` describes them as stored (their
        final offsets and timestamps)."""
        position = self.size
        fd = self.file.fileno()
        view = memoryview(data)
        written = 0
        try:
            while written < len(data):
                written += os.pwrite(fd, view[written:], position + written)
        except OSError:
            os.ftruncate(fd, position)  # leave no partial entry behind (disk full, ...)
            raise
        self._remember_start(self.next_offset, position)
        self._account(entries, position)
        self.index.write_pending()
        self.time_index.write_pending()
        self.size = position + len(data)
        if self.first_append_time is None:
            self.first_append_time = now

    def _account(self, entries: Scan, base_position: int) -> None:
        """Index entries written at ``base_position``: an offset-index entry for the first
        entry after ``index_interval_bytes`` more bytes, and with it a time-index entry
        (largest timestamp so far, that entry's offset) when the largest timestamp grew. The
        same walk serves appends and rebuilds, so both give one index. It works per index
        entry, not per message (``index_points``, ``largest_timestamps``)."""
        count = len(entries.positions)
        if not count:
            return
        if self.holds_batches is False and record_batch.MAGIC in entries.magics:
            self.holds_batches = True
        indexed, indexed_at, since_end = index_points(
            entries.sizes, self.bytes_since_index, self.index_interval_bytes
        )
        largest, largest_end = largest_timestamps(entries.timestamps, indexed, self.max_timestamp)
        if indexed:
            index_offsets = picked(entries.offsets, indexed)
            positions = map(base_position.__add__, picked(entries.positions, indexed))
            self.index.extend(index_offsets, list(positions))
            # a time-index entry where the largest timestamp (never decreasing) grew
            first = bisect_right(largest, self.time_index.last_timestamp)
            largest, index_offsets = largest[first:], index_offsets[first:]
            grew = [True, *map(gt, islice(largest, 1, None), largest)] if largest else []
            self.time_index.extend(
                list(compress(largest, grew)), list(compress(index_offsets, grew))
            )
        self.bytes_since_index = since_end - indexed_at
        self.max_timestamp = largest_end
        self.next_offset = entries.offsets[-1] + 1

    def truncate_to(self, offset: int) -> int:
        """Remove every entry holding ``offset`` or a later one -- a compressed wrapper goes
        whole when any of its messages does -- from the file and both indexes, and reopen the
        segment for appends. Not durable until ``fsync``. Returns the bytes removed."""
        position = self.find_position(offset)
        removed = self.size - position
        self.sealed = False
        if not removed:
            return 0
        # Indexes first: a crash in between leaves them short of the file, which opening
        # reads on from (an index pointing past the file's end would be rebuilt).
        self.index.truncate_to_position(position)
        self.time_index.truncate_to_offset(offset)
        self._forget_starts_from(position)
        os.ftruncate(self.file.fileno(), position)
        self.size = position
        # The running state from the last index entry on, as opening does: every entry up to
        # it is summed up by the time index's last entry (the largest timestamp so far).
        last = self.index.last()
        start = last[1] if last is not None else 0
        self.next_offset = self.base_offset
        self.max_timestamp = self.time_index.last_timestamp
        for _pos, entry_offset, _size, _magic, _attributes, timestamp in self._headers(start):
            self.next_offset = entry_offset + 1
            self.max_timestamp = max(self.max_timestamp, timestamp)
        self.bytes_since_index = self.size - start
        return removed

    def seal(self) -> None:
        """No more appends: record the segment's largest timestamp in its time index, so that
        it is known after a restart without reading the segment."""
        if self.max_timestamp > self.time_index.last_timestamp:
            self.time_index.extend([self.max_timestamp], [self.next_offset - 1])
            self.time_index.write_pending()
        self.sealed = True
        self._forget_starts_from(0)  # only the active segment is read at its latest appends

    def fsync(self) -> None:
        os.fsync(self.file.fileno())
        self.index.fsync()
        self.time_index.fsync()
        if self.sealed:
            self.index.close()
            self.time_index.close()

    def close_indexes(self) -> None:
        self.index.close()
        self.time_index.close()

    def delete_files(self) -> None:
        """Unlink the files; readers holding the descriptor keep reading the old inode."""
        self.close_indexes()
        for suffix in layout.SEGMENT_SUFFIXES:
            self.path(suffix).unlink(missing_ok=True)

    def install(self) -> None:
        """Give a compacted segment its final names, replacing the segment it was made from."""
        for suffix in layout.SEGMENT_SUFFIXES:
            os.replace(
                self.path(suffix), layout.segment_path(self.directory, self.base_offset, suffix)
            )
        self.suffix = ""
        self.index.moved_to(self.path(layout.INDEX))
        self.time_index.moved_to(self.path(layout.TIME_INDEX))

    # ---------------------------------------------------------------------------------------
    # Reading

    def _headers(self, position: int) -> Iterator[tuple[int, int, int, int, int, int]]:
        """``(position, offset, size, magic, attributes, timestamp)`` of each entry from
        ``position`` on, reading headers in blocks and skipping over values."""
        end = self.size
        pread = self.file.pread
        unpack = _HEADER.unpack_from
        batch_head = _BATCH_HEAD.unpack_from
        min_size = MIN_SIZE[0]
        while position < end:
            block = pread(min(_HEADER_BLOCK, end - position), position)
            n = len(block)
            p = 0
            while p + _HEADER.size <= n:
                offset, size, _crc, magic, attributes, timestamp = unpack(block, p)
                if size < min_size or position + p + LOG_OVERHEAD + size > end:
                    raise CorruptSegmentError(
                        f"{self.path(layout.LOG)}: bad entry size {size} at position {position + p}"
                    )
                if magic == record_batch.MAGIC:  # its last offset and max timestamp
                    if p + _BATCH_HEAD_END > n:
                        break  # read on from this batch
                    attributes, delta, _first, timestamp = batch_head(block, p + _BATCH_HEAD_AT)
                    offset += delta
                yield (
                    position + p,
                    offset,
                    LOG_OVERHEAD + size,
                    magic,
                    attributes,
                    (timestamp if magic else -1),
                )
                p += LOG_OVERHEAD + size
            if p == 0:
                raise CorruptSegmentError(
                    f"{self.path(layout.LOG)}: truncated entry at position {position}"
                )
            position += p

    def first_timestamp_ms(self) -> int:
        """The first entry's timestamp (a compressed set's: its largest), -1 when it carries
        none or the segment is empty: one header read."""
        for *_, timestamp in self._headers(0):
            return timestamp
        return -1

    def find_position(self, offset: int) -> int:
        """The position of the first entry holding ``offset`` or a later one; ``size`` if
        there is none (the offset is beyond this segment, or compacted away at its end)."""
        end = self.size
        if offset >= self.next_offset:
            return end
        starts, positions = self._append_starts
        i = bisect_left(starts, offset)
        if i < len(starts) and starts[i] == offset:
            return positions[i]
        # The read path: _headers' loop, inlined and reading only offset and size.
        # A short read (a file cut meanwhile) ends the inner loop early, as a block end does.
        position, exact = self.index.lookup(offset)
        if exact:
            return position
        fd = self.file.fileno()
        unpack = _OFFSET_SIZE.unpack_from
        last_delta = _LAST_DELTA.unpack_from
        min_size = MIN_SIZE[0]
        while position < end:
            block = os.pread(fd, min(_HEADER_BLOCK, end - position), position)
            last = len(block) - LOG_OVERHEAD
            p = 0
            while p <= last:
                entry_offset, size = unpack(block, p)
                if p + _CRC_END <= len(block) and block[p + _MAGIC_AT] == record_batch.MAGIC:
                    if p + _BATCH_HEAD_END > len(block):
                        break  # read on from this batch
                    entry_offset += last_delta(block, p + record_batch.LAST_OFFSET_DELTA_AT)[0]
                if entry_offset >= offset:
                    return position + p
                if size < min_size:
                    raise CorruptSegmentError(
                        f"{self.path(layout.LOG)}: bad entry size {size} at {position + p}"
                    )
                p += LOG_OVERHEAD + size
            if p == 0:
                raise CorruptSegmentError(
                    f"{self.path(layout.LOG)}: truncated entry at position {position}"
                )
            position += p
        return end

    def _remember_start(self, offset: int, position: int) -> None:
        """Record that the first entry holding ``offset`` or a later one is at ``position``:
        true of the log end offset before an append and the position it writes at, since every
        entry before has a lower offset and every appended one a higher or equal one. Kept
        until a truncation cuts below ``position``; only the latest ones. Appends and reads
        run in one thread (the event loop), so the columns are changed in place here."""
        starts, positions = self._append_starts
        if len(starts) >= 2 * APPEND_STARTS_KEPT:
            del starts[:APPEND_STARTS_KEPT]
            del positions[:APPEND_STARTS_KEPT]
        starts.append(offset)
        positions.append(position)

    def _forget_starts_from(self, position: int) -> None:
        """Drop the remembered append starts at ``position`` or beyond (the file is cut there)."""
        starts, positions = self._append_starts
        keep = bisect_left(positions, position)
        self._append_starts = (starts[:keep], positions[:keep])

    def headers_from(self, offset: int) -> Iterator[tuple[int, int, int, int, int, int]]:
        """The headers of the entries holding ``offset`` and later ones."""
        return self._headers(self.find_position(offset))

    def read_entry(self, position: int, size: int) -> Entry:
        entries, _ = read_entries(self.file.pread(size, position), base_position=position)
        if not entries:
            raise CorruptSegmentError(f"{self.path(layout.LOG)}: no entry at position {position}")
        return entries[0]

    def last_modified_ms(self) -> int:
        """The segment's age for retention and tombstones: its largest timestamp, or the
        file's modification time when no message carries one."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.fstat(self.file.fileno()).st_mtime_ns // 1_000_000


_INDEXES = (layout.INDEX, layout.TIME_INDEX)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def index_points(
    sizes: Sequence[int], since_index: int, interval: int
) -> tuple[Sequence[int], int, int]:
    """Which of consecutive entries (at least one) of ``sizes`` bytes get an offset-index
    entry, when ``since_index`` bytes were written since the last one: the first entry after
    ``interval`` more bytes, and so on. Returns their indexes, the bytes written before the
    last of them (0 when none) and before the end, both counted from the last index entry
    before these entries.

    Entries of one size (a producer's usual set) are placed by arithmetic; others by running
    sums and one binary search per index entry."""
    count = len(sizes)
    stride = sizes[0]
    if sizes.count(stride) == count:
        first = max(0, -(-(interval - since_index) // stride))
        indexed: Sequence[int] = range(first, count, max(1, -(-interval // stride)))
        end = since_index + count * stride
        return indexed, (since_index + indexed[-1] * stride if indexed else 0), end
    # since[i]: bytes since the last index entry, before entry i
    since = list(accumulate(sizes, initial=since_index))
    found: list[int] = []
    indexed_at = 0
    i = bisect_left(since, interval, 0, count)
    while i < count:
        found.append(i)
        indexed_at = since[i]
        i = bisect_left(since, indexed_at + interval, i + 1, count)
    return found, indexed_at, since[count]


def largest_timestamps(
    timestamps: Sequence[int], indexed: Sequence[int], largest: int
) -> tuple[list[int], int]:
    """The largest timestamp up to and including each entry of ``indexed`` (in order), and
    over all the ``timestamps`` (at least one), starting from ``largest``. Timestamps in
    order (a producer's usual set) need no running maximum: each is the largest so far."""
    listed = list(timestamps)
    if listed == sorted(listed):
        at = picked(listed, indexed)
        if at and at[0] < largest:
            at = list(map(max, repeat(largest), at))
        return at, max(largest, listed[-1])
    running = list(accumulate(listed, max, initial=largest))
    return picked(running[1:], indexed), running[-1]


def picked(column: Sequence[int], indexed: Sequence[int]) -> list[int]:
    """The items of ``column`` at ``indexed`` (a range: one slice)."""
    if isinstance(indexed, range):
        return list(column[indexed.start : indexed.stop : indexed.step])
    return list(map(column.__getitem__, indexed))

