"""The sparse indexes of a segment: offset -> position, and timestamp -> offset.

Both are append-only files of fixed-size big-endian entries, held in memory as two columns for
binary search. They are a cache of the log: whenever one is missing or does not pass the checks
in ``load`` it is rebuilt from the segment (seed 003: "these indexes can be regenerated").

    .index      relative offset uint32, position uint32   (8 bytes an entry)
    .timeindex  timestamp int64, relative offset uint32    (12 bytes an entry)

Relative offsets are ``offset - base_offset``; a segment rolls before they would overflow.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from itertools import islice
from operator import le, lt
from pathlib import Path
from typing import ClassVar

MAX_RELATIVE_OFFSET = (1 << 32) - 1


class _SparseIndex:
    """Two sorted columns kept in memory and appended to a file."""

    ENTRY: ClassVar[struct.Struct]
    KEY_TYPE: ClassVar[str]

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._keys = array(self.KEY_TYPE)
        self._values = array("I")
        self._pending = bytearray()
        self._fd: int | None = None

    def _extend(self, keys: list[int], values: list[int]) -> None:
        self._keys.extend(keys)
        self._values.extend(values)
        fields = [0] * (2 * len(keys))  # key, value, key, value, ...
        fields[::2], fields[1::2] = keys, values
        self._pending += struct.pack(f">{self.ENTRY.format[1:] * len(keys)}", *fields)

    def _read(self) -> bool:
        """Load the file; False when it is missing or not a whole number of sorted entries."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(data) % self.ENTRY.size:
            return False
        columns = tuple(zip(*self.ENTRY.iter_unpack(data), strict=True)) or ((), ())
        keys, values = self._keys, self._values
        keys.extend(columns[0])
        values.extend(columns[1])
        return all(map(lt, keys, islice(keys, 1, None))) and all(
            map(le, values, islice(values, 1, None))
        )

    def write_pending(self) -> None:
        """Append the entries added since the last call to the file (one write)."""
        if not self._pending:
            return
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        data, self._pending = bytes(self._pending), bytearray()
        written = 0
        while written < len(data):
            written += os.write(self._fd, data[written:])

    def reset(self) -> None:
        """Empty the index and its file (before a rebuild)."""
        self.close()
        self._keys = array(self.KEY_TYPE)
        self._values = array("I")
        self._pending = bytearray()
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))

    def _truncate(self, count: int) -> None:
        """Keep the first ``count`` entries, in memory and in the file (which is left open
        for appending: the segment is the active one again)."""
        self.write_pending()
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if count < len(self._keys):
            del self._keys[count:]
            del self._values[count:]
        os.ftruncate(self._fd, count * self.ENTRY.size)

    def fsync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Stop appending (the segment was sealed); lookups keep working."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def moved_to(self, path: Path) -> None:
        self.path = path


class OffsetIndex(_SparseIndex):
    """Offset -> byte position of an entry, one entry every ``index_interval_bytes``."""

    ENTRY = struct.Struct(">II")
    KEY_TYPE = "I"

    @classmethod
    def load(cls, path: Path, base_offset: int, log_size: int) -> OffsetIndex | None:
        index = cls(path, base_offset)
        if not index._read() or (index._values and index._values[-1] >= log_size):
            return None
        return index

    def extend(self, offsets: list[int], positions: list[int]) -> None:
        self._extend(list(map((-self.base_offset).__add__, offsets)), positions)

    def lookup(self, offset: int) -> tuple[int, bool]:
        """``(position, True)`` when an entry of ``offset`` is indexed: the first entry holding
        ``offset`` or a later one is there, no scan needed (stored offsets increase; a wrapper
        bears its last message's), and at 0 for the base offset or one below it. Otherwise
        ``(position, False)``: where to start scanning, the last indexed entry whose offset is
        below it (it ends before ``offset`` begins), else 0."""
        relative = offset - self.base_offset
        if relative <= 0:
            return 0, True
        if relative > MAX_RELATIVE_OFFSET:
            relative = MAX_RELATIVE_OFFSET + 1
        keys = self._keys
        i = bisect_right(keys, relative) - 1
        if i < 0:
            return 0, False
        return self._values[i], keys[i] == relative

    def truncate_to_position(self, position: int) -> None:
        """Drop the entries pointing at ``position`` or beyond (the log was cut there)."""
        self._truncate(bisect_left(self._values, position))

    def last(self) -> tuple[int, int] | None:
        """``(offset, position)`` of the last entry."""
        if not self._keys:
            return None
        return self.base_offset + self._keys[-1], self._values[-1]


class TimeIndex(_SparseIndex):
    """Largest timestamp so far -> the offset holding it, appended when it grows."""

    ENTRY = struct.Struct(">qI")
    KEY_TYPE = "q"

    @classmethod
    def load(cls, path: Path, base_offset: int) -> TimeIndex | None:
        index = cls(path, base_offset)
        return index if index._read() else None

    def extend(self, timestamps: list[int], offsets: list[int]) -> None:
        self._extend(timestamps, list(map((-self.base_offset).__add__, offsets)))

    def truncate_to_offset(self, offset: int) -> None:
        """Drop the entries for ``offset`` or later ones (the log was cut before it)."""
        self._truncate(bisect_left(self._values, max(offset - self.base_offset, 0)))

    @property
    def last_timestamp(self) -> int:
        return self._keys[-1] if self._keys else -1

    def last(self) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the last entry."""
        if not self._keys:
            return None
        return self._keys[-1], self.base_offset + self._values[-1]

    def lookup(self, timestamp: int) -> int:
        """An offset from which to scan for the first message at or after ``timestamp``: every
        message up to the last entry below ``timestamp`` is older than it."""
        i = bisect_left(self._keys, timestamp) - 1
        return self.base_offset + self._values[i] if i >= 0 else self.base_offset
