"""Checking stored entries without decoding them: the scan behind append, recovery, indexes
and the message sets a mirror passes on (client/message_sets.py).

The codec (protocol.messageset) decodes entries into keys and values for consumers. The log only
needs to know that each entry is whole and well formed and where it sits, so this scan reads the
headers and lengths in place, checks the CRC over the bytes it covers and copies nothing it
keeps. It never raises for bad bytes: it stops and says why, because recovery truncates where a
producer's request is rejected.

The result is a set of columns (positions, offsets, sizes, ...), not one object per entry. Well
formed v1 entries -- nearly all there are -- take a fast path: one precompiled unpack per entry,
and runs of same-shaped entries (equal key and value lengths, so a fixed stride) are checked
column-wise by C calls (extended slices, ``lstrip``, one ``unpack`` per column, ``map``): per
message only its CRC is computed. Anything else (v0 entries, invalid ones) goes through the
careful one-entry check, which names what is wrong. Every path makes every check; the tests
hold the scan to the codec's general reader, entry for entry and error for error.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from functools import lru_cache
from itertools import islice, repeat
from operator import itemgetter, lt
from typing import NamedTuple

from protocol import record_batch, speedups
from protocol.compression import Codec
from protocol.errors import CorruptMessageError, MessageFormatError
from protocol.messageset import CODEC_MASK, HEADER_V1, LOG_OVERHEAD, MIN_SIZE, crc32

# offset, size, crc, magic, attributes, timestamp, key length, and the value length where it
# is when the key is null (the common case)
_HEAD_V1 = struct.Struct(">qiIBBqii")
_OFFSET_SIZE = struct.Struct(">qi")
_CRC_MAGIC_ATTR = struct.Struct(">IBB")
_TIMESTAMP_KEY_LENGTH = struct.Struct(">qi")
_RUN_SHAPE = struct.Struct(">iBBii")  # size, magic, attributes, key length, value length
_INT32 = struct.Struct(">i")
_MAX_CODEC = max(Codec)
_CRC_START = 16  # the CRC covers the entry from its magic byte on
_RUN_FIRST = 16  # chunks of a run: the first, then four times larger up to the last
_RUN_MAX = 4096
_SLICES_FROM = 4096  # entries this large have their CRCs computed over views, not copies


class Scan(NamedTuple):
    """Entries found by ``scan_entries``, one column per header field."""

    positions: Sequence[int]  # of each entry's first byte, in the scanned buffer
    offsets: Sequence[int]  # for a compressed wrapper, the offset of its last inner message
    sizes: Sequence[int]  # bytes of the whole entry, LOG_OVERHEAD included
    magics: Sequence[int]
    attributes: Sequence[int]
    timestamps: Sequence[int]  # -1 for magic 0
    key_lengths: Sequence[int]  # -1 for a null key
    end: int  # position just past the last whole, valid entry
    error: str | None  # why the entry at ``end`` is invalid; None when it is only incomplete
    bad_crc: bool  # the entry at ``end`` is whole and well sized but fails its CRC


class _Columns(NamedTuple):
    """The columns of a Scan while it is built."""

    positions: list[int]
    offsets: list[int]
    sizes: list[int]
    magics: list[int]
    attributes: list[int]
    timestamps: list[int]
    key_lengths: list[int]


class _Invalid(NamedTuple):
    """Why an entry is invalid, as ``Scan.error`` and ``Scan.bad_crc`` report it."""

    reason: str
    bad_crc: bool


def scan_entries(
    data: bytes | bytearray | memoryview,
    *,
    start: int = 0,
    verify_crc: bool = True,
    after_offset: int | None = None,
) -> Scan:
    """The whole, valid entries of ``data`` from ``start`` on.

    Stops at the end of ``data``, at an incomplete trailing entry (``error`` None, ``end`` short
    of ``len(data)``) or at the first invalid one (``error`` says why). With ``after_offset``,
    offsets must also increase strictly from it on, as they do in a stored segment.
    """
    buf = data if isinstance(data, bytes | bytearray) else bytes(data)  # for extended slices
    found = _Columns([], [], [], [], [], [], [])
    pos, last = start, after_offset
    while True:
        pos, last = _scan_v1(buf, pos, verify_crc, last, found)
        entry = _check_one(buf, pos, verify_crc, last)
        if entry is None or isinstance(entry, _Invalid):
            break
        for column, value in zip(found, (pos, *entry), strict=True):
            column.append(value)
        pos += entry[1]
        if last is not None:
            last = entry[0]
    return Scan(
        *found,
        pos,
        entry.reason if entry is not None else None,
        entry.bad_crc if entry is not None else False,
    )


def _py_scan_v1(
    data: bytes | bytearray,
    pos: int,
    verify_crc: bool,
    last: int | None,
    found: _Columns,
) -> tuple[int, int | None]:
    """Add the valid v1 entries from ``pos`` on to ``found``, as far as they go; returns where
    they end (at anything else: ``_check_one`` looks at it) and the last offset if ``last`` was
    given. Every check of ``_check_one`` is made here too."""
    view = memoryview(data)
    n = len(data)
    head = _HEAD_V1.unpack_from
    int32 = _INT32.unpack_from
    positions, offsets, sizes, magics, attributes_col, timestamps, key_lengths = found
    while pos + HEADER_V1 <= n:
        offset, size, crc, magic, attributes, timestamp, klen, vlen = head(data, pos)
        whole = LOG_OVERHEAD + size
        end = pos + whole
        if (
            magic != 1
            or size < MIN_SIZE[1]
            or end > n
            or attributes & CODEC_MASK > _MAX_CODEC
            or (last is not None and offset <= last)
        ):
            break
        if klen != -1:
            if klen < 0 or pos + HEADER_V1 + klen > end:
                break
            (vlen,) = int32(data, pos + HEADER_V1 - 4 + klen)
            room = whole - HEADER_V1 - klen
        else:
            room = whole - HEADER_V1
        if (vlen != room and (vlen != -1 or room)) or (
            verify_crc and crc32(view[pos + _CRC_START : end]) != crc
        ):
            break
        positions.append(pos)
        offsets.append(offset)
        sizes.append(whole)
        magics.append(1)
        attributes_col.append(attributes)
        timestamps.append(timestamp)
        key_lengths.append(klen)
        if last is not None:
            last = offset
        pos = end
        # Many more entries of this size follow (the first and the last of a first chunk
        # say so)? Check them as a run.
        if (
            end + _RUN_FIRST * whole <= n
            and int32(data, end + 8)[0] == size
            and int32(data, end + (_RUN_FIRST - 1) * whole + 8)[0] == size
        ):
            pos, last = _scan_run(data, pos, whole, attributes, klen, vlen, verify_crc, last, found)
    return pos, last


@lru_cache(maxsize=256)
def _run_layout(key_length: int, whole: int) -> tuple[tuple[int, ...], struct.Struct]:
    """For entries of this key length and size: where the bytes of the fields that are equal
    in a run sit (size, magic, attributes, key and value lengths: ``_RUN_SHAPE``), and a
    struct reading the bytes each CRC covers."""
    value_length_at = HEADER_V1 - 4 + max(key_length, 0)
    equal_at = (*range(8, 12), 16, 17, *range(26, 30), *range(value_length_at, value_length_at + 4))
    return equal_at, struct.Struct(f">{_CRC_START}x{whole - _CRC_START}s")


def _scan_run(
    data: bytes | bytearray,
    pos: int,
    whole: int,
    attributes: int,
    klen: int,
    vlen: int,
    verify_crc: bool,
    last: int | None,
    found: _Columns,
) -> tuple[int, int | None]:
    """Add the stretch of entries at ``pos`` shaped like the one before it (v1, same size,
    attributes, key and value lengths), as far as it goes; returns where it ends.

    Entries of one shape sit at a fixed stride, so each byte of a header field, over a chunk
    of them, is one extended slice: the bytes of the fields that must be equal are checked
    with ``lstrip``, and offsets, stored CRCs and timestamps are gathered field by field and
    read or compared in one call each. Per entry only its CRC is computed. Chunks start small
    and grow, so a short run costs little more than the entry-at-a-time path -- unless the data
    ends in an entry of this size, at this stride (a set of one size, as producers send them):
    then the first chunk is as large as they come."""
    view = memoryview(data)
    equal_at, covered = _run_layout(klen, whole)
    shape = _RUN_SHAPE.pack(whole - LOG_OVERHEAD, 1, attributes, klen, vlen)
    expected = [shape[i : i + 1] for i in range(len(shape))]
    # A set of entries of one size (what producers send) ends in one too: one chunk for all.
    last_at = len(data) - whole
    one_size = not (last_at - pos) % whole and data[last_at + 8 : last_at + 12] == shape[:4]
    chunk = _RUN_MAX if one_size else _RUN_FIRST
    while (count := min(chunk, (len(data) - pos) // whole)) > 1:
        stop = pos + count * whole
        good = count
        for at, byte in zip(equal_at, expected, strict=True):
            column = data[pos + at : stop : whole]
            good = min(good, len(column) - len(column.lstrip(byte)))
        if verify_crc:
            bodies: Iterator[bytes | memoryview]
            if whole < _SLICES_FROM:  # copies of short bodies cost less than views of them
                bodies = map(itemgetter(0), covered.iter_unpack(view[pos:stop]))
            else:
                starts = range(pos + _CRC_START, stop, whole)
                ends = range(pos + whole, stop + 1, whole)
                bodies = map(view.__getitem__, map(slice, starts, ends))
            computed = struct.pack(f">{count}I", *map(crc32, bodies))
            stored = _gather(data, pos + 12, stop, 4, whole)
            if computed != stored:
                good = min(good, _first_difference(computed, stored, 4))
        offsets = struct.unpack(f">{count}q", _gather(data, pos, stop, 8, whole))
        if last is not None:
            increasing = list(map(lt, (last, *offsets), offsets))
            if not all(increasing):
                good = min(good, increasing.index(False))
            if good:
                last = offsets[good - 1]
        if good:
            timestamps = struct.unpack(f">{count}q", _gather(data, pos + 18, stop, 8, whole))
            found.positions.extend(range(pos, pos + good * whole, whole))
            found.offsets.extend(islice(offsets, good))
            found.sizes.extend(repeat(whole, good))
            found.magics.extend(repeat(1, good))
            found.attributes.extend(repeat(attributes, good))
            found.timestamps.extend(islice(timestamps, good))
            found.key_lengths.extend(repeat(klen, good))
            pos += good * whole
        if good < count:
            break  # the entry-at-a-time path looks at the next entry
        chunk = min(chunk * 4, _RUN_MAX)
    return pos, last


def _gather(data: bytes | bytearray, start: int, stop: int, width: int, stride: int) -> bytearray:
    """The ``width``-byte fields at ``start``, ``start + stride``, ... before ``stop``, back to
    back: one extended slice per byte."""
    out = bytearray(width * ((stop - start + stride - 1) // stride))
    for i in range(width):
        out[i::width] = data[start + i : stop : stride]
    return out


def _first_difference(a: bytes, b: bytes | bytearray, width: int) -> int:
    """Index of the first ``width``-byte field in which ``a`` and ``b`` differ."""
    return next(i for i in range(0, len(a), width) if a[i : i + width] != b[i : i + width]) // width


# The scan's hot path: the C accelerator's when it is built (the same columns and the same
# stopping place for every input; protocol.speedups chooses, once), else the Python above.
_scan_v1 = _py_scan_v1 if speedups.native is None else speedups.native.scan_v1


def _check_one(
    data: bytes | bytearray, pos: int, verify_crc: bool, last: int | None
) -> tuple[int, int, int, int, int, int] | _Invalid | None:
    """The entry at ``pos``, checked field by field: its offset, whole size, magic,
    attributes, timestamp and key length; or why it is invalid; None at the end of ``data``
    or an incomplete entry."""
    n = len(data)
    if pos + LOG_OVERHEAD > n:
        return None
    offset, size = _OFFSET_SIZE.unpack_from(data, pos)
    if size < MIN_SIZE[0]:
        return _Invalid(f"entry size {size} is below the minimum {MIN_SIZE[0]}", False)
    end = pos + LOG_OVERHEAD + size
    if end > n:
        return None
    if data[pos + _CRC_START] == record_batch.MAGIC:
        return _check_batch(data, pos, end, verify_crc, last)
    crc, magic, attributes = _CRC_MAGIC_ATTR.unpack_from(data, pos + 12)
    if verify_crc and (computed := crc32(memoryview(data)[pos + _CRC_START : end])) != crc:
        return _Invalid(f"CRC mismatch: stored {crc:#010x}, computed {computed:#010x}", True)
    if magic == 1:
        if size < MIN_SIZE[1]:
            return _Invalid(f"v1 entry size {size} is below the minimum {MIN_SIZE[1]}", False)
        timestamp, klen = _TIMESTAMP_KEY_LENGTH.unpack_from(data, pos + 18)
        p = pos + 30
    elif magic == 0:
        timestamp = -1
        (klen,) = _INT32.unpack_from(data, pos + 18)
        p = pos + 22
    else:
        return _Invalid(f"unknown magic {magic}", False)
    if klen > 0:
        p += klen
    if klen < -1 or p + 4 > end:
        return _Invalid(f"key length {klen} does not fit the entry", False)
    (vlen,) = _INT32.unpack_from(data, p)
    if (vlen != -1 or p + 4 != end) and (vlen < 0 or p + 4 + vlen != end):
        return _Invalid(f"value length {vlen} does not fit the entry", False)
    # after the lengths, as the codec's reader checks them: the same bytes, the same error
    if attributes & CODEC_MASK > _MAX_CODEC:
        return _Invalid(f"unknown compression codec {attributes & CODEC_MASK}", False)
    if last is not None and offset <= last:
        return _Invalid(f"offset {offset} does not follow offset {last}", False)
    return offset, end - pos, magic, attributes, timestamp, klen


def _check_batch(
    data: bytes | bytearray, pos: int, end: int, verify_crc: bool, last: int | None
) -> tuple[int, int, int, int, int, int] | _Invalid:
    """The record batch (magic 2) at ``pos``, whole in ``data``, as ``_check_one`` gives an
    entry: its last offset, size, magic, attributes, max timestamp and key length -1 (a batch
    has no key of its own, as a compressed wrapper has none). Its base offset must follow
    ``last``."""
    if end - pos < record_batch.HEADER_BYTES:
        length = end - pos - LOG_OVERHEAD
        return _Invalid(f"batchLength {length} is below the minimum "
                        f"{record_batch.MIN_BATCH_LENGTH}", False)
    try:
        header = record_batch.check_batch(data, pos, verify_crc=verify_crc)
        assert header is not None  # the batch's length is the entry's: it is whole
    except MessageFormatError as exc:
        return _Invalid(exc.reason, isinstance(exc, CorruptMessageError))
    if last is not None and header.base_offset <= last:
        return _Invalid(f"offset {header.base_offset} does not follow offset {last}", False)
    return (
        header.last_offset, header.size, record_batch.MAGIC, header.attributes,
        header.max_timestamp, -1,
    )


def entry_size_at(data: bytes | bytearray | memoryview, position: int) -> int | None:
    """The whole size of the entry starting at ``position`` if its header is there."""
    if position + LOG_OVERHEAD > len(data):
        return None
    size: int = _OFFSET_SIZE.unpack_from(data, position)[1]
    return LOG_OVERHEAD + size
