"""Checking a produced message set and assigning its offsets, before anything is written.

The broker validates CRCs and assigns offsets; it does not recompress (DESIGN.md). A compressed
wrapper is opened only to check its inner messages and count them: its own offset field -- which
the CRC does not cover -- becomes the offset of its last inner message, and the compressed bytes
are stored as they came.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import itemgetter
from typing import NamedTuple

from broker.log.entries import Scan, scan_entries
from broker.log.errors import (
    CorruptMessageSetError,
    InvalidMessageError,
    KeylessMessageError,
)
from protocol.compression import Codec, decompress
from protocol.errors import MessageFormatError
from protocol.messageset import (
    CODEC_MASK,
    HEADER_V1,
    MIN_SIZE,
    TIMESTAMP_TYPE_BIT,
    crc32,
    open_wrapper,
    read_entries,
)

_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_TIMESTAMP = struct.Struct(">q")
_HEADER_V0 = HEADER_V1 - (MIN_SIZE[1] - MIN_SIZE[0])  # a v0 entry has no timestamp


class PreparedAppend(NamedTuple):
    data: bytearray  # the set with offsets (and log-append timestamps) written in
    entries: Scan  # its entries as they will be stored: assigned offsets, final timestamps
    first_offset: int
    last_offset: int


def prepare_append(
    message_set: bytes | bytearray | memoryview,
    *,
    next_offset: int,
    keys_required: bool = False,
    log_append_time: int | None = None,
) -> PreparedAppend:
    """Validate ``message_set`` and assign offsets from ``next_offset``.

    Raises ``InvalidMessageError`` / ``CorruptMessageSetError`` for malformed input and
    ``KeylessMessageError`` when ``keys_required`` and a message has no key. With
    ``log_append_time`` (ms), every v1 top-level entry gets that timestamp and the
    log-append-time attribute, and its CRC is recomputed.
    """
    scan = scan_entries(message_set)
    if scan.error is not None:
        error = CorruptMessageSetError if scan.bad_crc else InvalidMessageError
        raise error(scan.error, position=scan.end)
    if scan.end != len(message_set):
        raise InvalidMessageError("the message set ends in an incomplete entry", position=scan.end)
    count = len(scan.positions)
    if not count:
        raise InvalidMessageError("the message set is empty")
    offsets: Sequence[int]
    if not _any_wrapper(scan.attributes):
        if keys_required and min(scan.key_lengths) < 0:
            raise KeylessMessageError(_KEYLESS)
        offsets = range(next_offset, next_offset + count)
    else:
        # each entry takes the offset of its last message: a wrapper's count of them on
        counts = [
            _count_inner(message_set, scan, i, keys_required)
            if attributes & CODEC_MASK
            else _count_plain(key_length, keys_required)
            for i, (attributes, key_length) in enumerate(
                zip(scan.attributes, scan.key_lengths, strict=True)
            )
        ]
        offsets = list(accumulate(counts, initial=next_offset - 1))[1:]
    data = bytearray(message_set)
    _write_offsets(data, scan, offsets)
    entries = scan._replace(offsets=offsets)
    if log_append_time is not None:
        entries = _stamp(data, entries, log_append_time)
    return PreparedAppend(data, entries, next_offset, offsets[-1])


_KEYLESS = "a compacted log cannot accept a message without a key"


def _any_wrapper(attributes: Sequence[int]) -> bool:
    """Whether any entry is a compressed wrapper. Plain entries' attributes are nearly always
    0 or the timestamp-type bit alone, and ``count`` finds those fastest."""
    if attributes.count(0) + attributes.count(TIMESTAMP_TYPE_BIT) == len(attributes):
        return False
    return any(map(CODEC_MASK.__and__, attributes))


def _write_offsets(data: bytearray, scan: Scan, offsets: Sequence[int]) -> None:
    """Write each entry's offset into ``data``, which holds exactly the scanned entries."""
    stride = _one_size(scan)
    if stride:
        _write_fields(data, 0, stride, struct.pack(f">{len(offsets)}q", *offsets), _OFFSET.size)
    else:
        deque(map(_OFFSET.pack_into, repeat(data), scan.positions, offsets), maxlen=0)


def _one_size(scan: Scan) -> int | None:
    """The size of every scanned entry if they all have one size."""
    sizes = scan.sizes
    return sizes[0] if sizes.count(sizes[0]) == len(sizes) else None


def _write_fields(data: bytearray, at: int, stride: int, fields: bytes, width: int) -> None:
    """Write ``fields`` (``width`` bytes each, back to back) into entries of one size: the
    first at ``at``, the next ``stride`` bytes further on, and so on. One extended slice per
    byte of a field, whatever the number of entries."""
    for i in range(width):
        data[at + i :: stride] = fields[i::width]


def _count_plain(key_length: int, keys_required: bool) -> int:
    if keys_required and key_length < 0:
        raise KeylessMessageError(_KEYLESS)
    return 1


def _count_inner(
    message_set: bytes | bytearray | memoryview, scan: Scan, i: int, keys_required: bool
) -> int:
    """How many messages the wrapper ``scan`` found at index ``i`` holds. They must be valid,
    uncompressed and numbered consecutively (so that rewriting the wrapper's offset renumbers
    them all).

    The inner set is checked column-wise by ``scan_entries``; when anything is wrong, the
    codec's own reader opens the wrapper again to say what, as the protocol names it."""
    position, size = scan.positions[i], scan.sizes[i]
    header = HEADER_V1 if scan.magics[i] else _HEADER_V0
    value = message_set[position + header + max(scan.key_lengths[i], 0) : position + size]
    if value:  # else null or empty: not a message set either way
        codec = Codec(scan.attributes[i] & CODEC_MASK)
        try:
            raw = decompress(codec, bytes(value))
        except MessageFormatError:
            pass
        else:
            inner = scan_entries(raw)
            if inner.end == len(raw) and _consecutive_plain_messages(inner, keys_required):
                return len(inner.positions)
    return _open_wrapper(message_set, position, size, keys_required)


def _consecutive_plain_messages(inner: Scan, keys_required: bool) -> bool:
    """Whether a wrapper's inner set, scanned to its end, is acceptable as it is."""
    count = len(inner.positions)
    if inner.error is not None or not count:
        return False
    first = inner.offsets[0]
    return (
        not any(map(CODEC_MASK.__and__, inner.attributes))
        and list(inner.offsets) == list(range(first, first + count))
        and not (keys_required and min(inner.key_lengths) < 0)
    )


def _open_wrapper(
    message_set: bytes | bytearray | memoryview, position: int, size: int, keys_required: bool
) -> int:
    """Open a wrapper with the codec's reader, raising the error it finds: the inner messages
    must be valid, uncompressed and numbered consecutively."""
    try:
        (wrapper,), _ = read_entries(
            memoryview(message_set)[position : position + size], base_position=position
        )
        inner = open_wrapper(wrapper)
    except MessageFormatError as exc:
        raise InvalidMessageError.wrapping(exc) from None
    first = inner[0].offset
    for i, message in enumerate(inner):
        if message.offset != first + i:
            raise InvalidMessageError(
                "inner offsets of a compressed wrapper must be consecutive", position=position
            )
        if keys_required and message.key is None:
            raise KeylessMessageError(_KEYLESS)
    return len(inner)


def _stamp(data: bytearray, entries: Scan, timestamp: int) -> Scan:
    """Give every v1 entry the broker's timestamp (seed 000: timestamp-type bit 3)."""
    count = len(entries.positions)
    stride = _one_size(entries)
    if not stride or entries.magics.count(1) != count:
        return _stamp_one_by_one(data, entries, timestamp)
    attributes = list(map(TIMESTAMP_TYPE_BIT.__or__, entries.attributes))
    _write_fields(data, 17, stride, bytes(attributes), 1)
    _write_fields(data, 18, stride, _TIMESTAMP.pack(timestamp) * count, _TIMESTAMP.size)
    covered = struct.Struct(f">16x{stride - 16}s").iter_unpack(data)
    crcs = struct.pack(f">{count}I", *map(crc32, map(itemgetter(0), covered)))
    _write_fields(data, 12, stride, crcs, _CRC.size)
    return entries._replace(attributes=attributes, timestamps=[timestamp] * count)


def _stamp_one_by_one(data: bytearray, entries: Scan, timestamp: int) -> Scan:
    """``_stamp`` for entries of several sizes, or with v0 entries (which have no timestamp)."""
    view = memoryview(data)
    attributes = list(entries.attributes)
    timestamps = list(entries.timestamps)
    for i, (position, size, magic) in enumerate(
        zip(entries.positions, entries.sizes, entries.magics, strict=True)
    ):
        if magic != 1:
            continue
        attributes[i] |= TIMESTAMP_TYPE_BIT
        timestamps[i] = timestamp
        data[position + 17] = attributes[i]
        _TIMESTAMP.pack_into(data, position + 18, timestamp)
        _CRC.pack_into(data, position + 12, crc32(view[position + 16 : position + size]))
    return entries._replace(attributes=attributes, timestamps=timestamps)
