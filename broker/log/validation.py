"""Checking a produced message set and assigning its offsets, before anything is written.

The broker validates CRCs and the format's rules, and assigns offsets; the offsets a producer
writes in its top-level entries are ignored. A magic 1 wrapper is opened only to check its inner
messages and count them: its own offset field -- which the CRC does not cover -- becomes the
offset of its last inner message, and the compressed bytes are stored as they came. A magic 0
wrapper's inner messages carry absolute offsets: they are renumbered and the set recompressed
(``v0_wrappers``), as Kafka's broker does for magic 0.

Refused, as Kafka refuses them: an empty or partial set, a bad CRC or layout (CORRUPT_MESSAGE);
a compressed wrapper with a key, with nested compression, with inner messages of another magic,
in magic 1 with inner offsets other than 0..n-1, or an lz4 frame of linked blocks, which Kafka's
reader refuses (CORRUPT_MESSAGE); any magic 1 message with the LogAppendTime timestamp type,
which only the broker sets (INVALID_TIMESTAMP).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import itemgetter
from typing import NamedTuple

from broker.log import v0_wrappers
from broker.log.batch_validation import prepare_batches
from broker.log.errors import (
    CorruptMessageSetError,
    InvalidMessageError,
    KeylessMessageError,
    ProducerTimestampTypeError,
)
from protocol import record_batch
from protocol.compression import LZ4_FLG_BLOCK_INDEPENDENCE, Codec, decompress
from protocol.entry_scan import Scan, scan_entries
from protocol.errors import MessageFormatError
from protocol.messageset import (
    CODEC_MASK,
    HEADER_V1,
    MIN_SIZE,
    TIMESTAMP_TYPE_BIT,
    Entry,
    crc32,
    inner_entries,
    read_entries,
)
from protocol.record_batch import NO_PARTITION_LEADER_EPOCH, BatchHeader

_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_TIMESTAMP = struct.Struct(">q")
_HEADER_V0 = HEADER_V1 - (MIN_SIZE[1] - MIN_SIZE[0])  # a v0 entry has no timestamp
_LZ4_FLG = 4  # the FLG byte follows the frame's magic number


class PreparedAppend(NamedTuple):
    data: bytearray  # the set with offsets (and log-append timestamps) written in
    entries: Scan  # its entries as they will be stored: assigned offsets, final timestamps
    first_offset: int
    last_offset: int
    batches: Sequence[BatchHeader] = ()  # record batches' headers as written (magic 2)


def largest_entry_bytes(message_set: bytes | bytearray | memoryview) -> int:
    """The size of the message set's largest top-level entry (offset and size fields included,
    as Kafka's max.message.bytes counts it: a message, or a compressed wrapper whole); 0 if the
    set does not scan (``prepare_append`` then says why)."""
    scan = scan_entries(message_set, verify_crc=False)
    if scan.error is not None or not scan.positions:
        return 0
    ends = [*scan.positions[1:], scan.end]
    return max(end - start for start, end in zip(scan.positions, ends, strict=True))


def prepare_append(
    message_set: bytes | bytearray | memoryview,
    *,
    next_offset: int,
    keys_required: bool = False,
    log_append_time: int | None = None,
    leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> PreparedAppend:
    """Validate ``message_set`` and assign offsets from ``next_offset``.

    Raises ``InvalidMessageError`` / ``CorruptMessageSetError`` for malformed input,
    ``ProducerTimestampTypeError`` for a message claiming log-append time and
    ``KeylessMessageError`` when ``keys_required`` and a message has no key. With
    ``log_append_time`` (ms), every v1 top-level entry gets that timestamp and the
    log-append-time attribute, and its CRC is recomputed. A set of record batches (magic 2)
    is checked and stamped by ``batch_validation`` (``leader_epoch`` goes into each batch).
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
    if record_batch.MAGIC in scan.magics:
        if scan.magics.count(record_batch.MAGIC) != count:
            raise InvalidMessageError(
                "a produced set mixes record batches (magic 2) with older message formats")
        data, entries, batches = prepare_batches(
            message_set, scan, next_offset=next_offset, keys_required=keys_required,
            log_append_time=log_append_time, leader_epoch=leader_epoch)
        return PreparedAppend(data, entries, next_offset, entries.offsets[-1], batches)
    _refuse_log_append_time(scan.attributes, scan.magics, scan.positions)
    offsets: Sequence[int]
    if not _any_wrapper(scan.attributes):
        if keys_required and min(scan.key_lengths) < 0:
            raise KeylessMessageError(_KEYLESS)
        offsets = range(next_offset, next_offset + count)
        data = bytearray(message_set)
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
        if any(not magic and attributes & CODEC_MASK
               for magic, attributes in zip(scan.magics, scan.attributes, strict=True)):
            data = _renumber_v0_wrappers(message_set, scan, offsets)
            scan = scan_entries(data)
        else:
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


def _refuse_log_append_time(
    attributes: Sequence[int], magics: Sequence[int], positions: Sequence[int]
) -> None:
    """Only the broker sets the LogAppendTime type (bit 3, which magic 0 does not have)."""
    if attributes.count(0) == len(attributes):
        return
    for attribute, magic, position in zip(attributes, magics, positions, strict=True):
        if magic and attribute & TIMESTAMP_TYPE_BIT:
            raise ProducerTimestampTypeError(
                "a producer must not set the timestamp type LogAppendTime (attributes bit 3) "
                f"(the message at byte position {position})"
            )


def _count_inner(
    message_set: bytes | bytearray | memoryview, scan: Scan, i: int, keys_required: bool
) -> int:
    """How many messages the wrapper ``scan`` found at index ``i`` holds. The wrapper has no
    key; its inner messages must be valid, uncompressed, of its magic, without the
    LogAppendTime type and, in magic 1, numbered 0..n-1.

    The inner set is checked column-wise by ``scan_entries``; when anything is wrong, the
    codec's own reader opens the wrapper again to say what, as the protocol names it."""
    position, size, magic = scan.positions[i], scan.sizes[i], scan.magics[i]
    if scan.key_lengths[i] != -1:
        raise InvalidMessageError("compressed outer message should not have key", position=position)
    header = HEADER_V1 if magic else _HEADER_V0
    value = message_set[position + header : position + size]
    codec = Codec(scan.attributes[i] & CODEC_MASK)
    if (
        codec is Codec.LZ4
        and len(value) > _LZ4_FLG
        and not value[_LZ4_FLG] & LZ4_FLG_BLOCK_INDEPENDENCE
    ):
        raise InvalidMessageError(
            f"lz4 frame with linked blocks (FLG {value[_LZ4_FLG]:#04x}): Kafka's readers accept "
            "only independent blocks",
            position=position,
        )
    if value:  # else null or empty: not a message set either way
        try:
            raw = decompress(codec, bytes(value), magic=magic)
        except MessageFormatError:
            pass
        else:
            inner = scan_entries(raw)
            if inner.end == len(raw) and _acceptable_inner_set(inner, magic, keys_required):
                return len(inner.positions)
    return _open_wrapper(message_set, position, size, keys_required)


def _acceptable_inner_set(inner: Scan, magic: int, keys_required: bool) -> bool:
    """Whether a wrapper's inner set, scanned to its end, is acceptable as it is."""
    count = len(inner.positions)
    if inner.error is not None or not count:
        return False
    return (
        inner.magics.count(magic) == count
        and inner.attributes.count(0) == count
        and (not magic or list(inner.offsets) == list(range(count)))
        and not (keys_required and min(inner.key_lengths) < 0)
    )


def _open_wrapper(
    message_set: bytes | bytearray | memoryview, position: int, size: int, keys_required: bool
) -> int:
    """Open a wrapper with the codec's reader, raising the error it finds (see
    ``_count_inner`` for the rules)."""
    wrapper, inner = _read_wrapper(message_set, position, size)
    for i, message in enumerate(inner):
        if message.magic != wrapper.magic:
            raise InvalidMessageError(
                f"compressed message magic {message.magic} does not equal wrapper magic "
                f"{wrapper.magic}",
                position=position,
            )
        if wrapper.magic and message.offset != i:
            raise InvalidMessageError(
                f"inner offsets of a magic 1 compressed wrapper must be 0..{len(inner) - 1}; "
                f"message {i} has {message.offset}",
                position=position,
            )
        if keys_required and message.key is None:
            raise KeylessMessageError(_KEYLESS)
    _refuse_log_append_time(
        [m.attributes & 0xFF for m in inner], [m.magic for m in inner], [position] * len(inner)
    )
    return len(inner)


def _read_wrapper(
    message_set: bytes | bytearray | memoryview, position: int, size: int
) -> tuple[Entry, list[Entry]]:
    """The wrapper at ``position`` and its inner entries, offsets as stored."""
    try:
        (wrapper,), _ = read_entries(
            memoryview(message_set)[position : position + size], base_position=position
        )
        return wrapper, inner_entries(wrapper)
    except MessageFormatError as exc:
        raise InvalidMessageError.wrapping(exc) from None


def _renumber_v0_wrappers(
    message_set: bytes | bytearray | memoryview, scan: Scan, offsets: Sequence[int]
) -> bytearray:
    """The set with each magic 0 wrapper's inner messages given their absolute offsets (the
    wrapper's ``offsets`` entry is its last) and recompressed."""
    view = memoryview(message_set)
    parts: list[bytes | memoryview] = []
    for position, size, magic, attributes, last in zip(
        scan.positions, scan.sizes, scan.magics, scan.attributes, offsets, strict=True
    ):
        if magic or not attributes & CODEC_MASK:
            parts.append(view[position : position + size])
            continue
        wrapper, inner = _read_wrapper(message_set, position, size)
        first = last - len(inner) + 1
        parts.append(v0_wrappers.renumber(wrapper, inner, range(first, last + 1)))
    return bytearray(b"".join(parts))


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
