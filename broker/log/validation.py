"""Checking a produced message set and assigning its offsets, before anything is written.

The broker validates CRCs and assigns offsets; it does not recompress (DESIGN.md). A compressed
wrapper is opened only to check its inner messages and count them: its own offset field -- which
the CRC does not cover -- becomes the offset of its last inner message, and the compressed bytes
are stored as they came.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from broker.log.entries import Scan, scan_entries
from broker.log.errors import (
    CorruptMessageSetError,
    InvalidMessageError,
    KeylessMessageError,
)
from protocol.errors import MessageFormatError
from protocol.messageset import (
    CODEC_MASK,
    TIMESTAMP_TYPE_BIT,
    crc32,
    open_wrapper,
    read_entries,
)

_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_TIMESTAMP = struct.Struct(">q")


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
    data = bytearray(message_set)
    pack_offset = _OFFSET.pack_into
    offsets: Sequence[int]
    if not any(map(CODEC_MASK.__and__, scan.attributes)):
        if keys_required and min(scan.key_lengths) < 0:
            raise KeylessMessageError(_KEYLESS)
        offsets = range(next_offset, next_offset + count)
        for position, offset in zip(scan.positions, offsets, strict=True):
            pack_offset(data, position, offset)
    else:
        offsets = []
        offset = next_offset
        for position, size, attributes, key_length in zip(
            scan.positions, scan.sizes, scan.attributes, scan.key_lengths, strict=True
        ):
            if attributes & CODEC_MASK:
                offset += _count_inner(message_set, position, size, keys_required) - 1
            elif keys_required and key_length < 0:
                raise KeylessMessageError(_KEYLESS)
            pack_offset(data, position, offset)
            offsets.append(offset)
            offset += 1
    entries = scan._replace(offsets=offsets)
    if log_append_time is not None:
        entries = _stamp(data, entries, log_append_time)
    return PreparedAppend(data, entries, next_offset, offsets[-1])


_KEYLESS = "a compacted log cannot accept a message without a key"


def _count_inner(
    message_set: bytes | bytearray | memoryview, position: int, size: int, keys_required: bool
) -> int:
    """Open a wrapper: its inner messages must be valid, uncompressed and numbered
    consecutively (so that rewriting the wrapper's offset renumbers them all)."""
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
