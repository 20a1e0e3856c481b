"""Append preparation against a reference spelled out with the codec's general reader: the same
bytes, offsets and timestamps for a good set, the same error for a bad one. The scan itself is
checked against the reader in test_scan_entries, so the reference starts from it."""

from __future__ import annotations

import struct
import zlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.errors import (
    CorruptMessageSetError,
    InvalidMessageError,
    KeylessMessageError,
    LogError,
    ProducerTimestampTypeError,
)
from broker.log.validation import prepare_append
from protocol.compression import compress, decompress
from protocol.entry_scan import scan_entries
from protocol.errors import MessageFormatError
from protocol.messageset import (
    LOG_OVERHEAD,
    Entry,
    TimestampType,
    decode_messages,
    encode_message,
    encode_records,
    inner_entries,
    read_entries,
    set_offset,
)
from tests.log.message_sets import damaged, message_sets

KEYLESS = "a compacted log cannot accept a message without a key"


def reference_prepare(
    data: bytes, next_offset: int, keys_required: bool, log_append_time: int | None
) -> tuple[bytes, list[int], list[int], list[int]]:
    """Bytes, offsets, attributes and timestamps as stored; raises what the log raises."""
    scan = scan_entries(data)
    if scan.error is not None:
        error = CorruptMessageSetError if scan.bad_crc else InvalidMessageError
        raise error(scan.error, position=scan.end)
    if scan.end != len(data):
        raise InvalidMessageError("the message set ends in an incomplete entry", position=scan.end)
    entries, _ = read_entries(data)
    if not entries:
        raise InvalidMessageError("the message set is empty")
    for entry in entries:
        refuse_log_append_time(entry, entry.position)
    pieces = []
    offsets, attributes, timestamps = [], [], []
    offset = next_offset - 1
    for entry in entries:
        raw = bytearray(data[entry.position : entry.position + LOG_OVERHEAD + entry.size])
        if entry.attributes & 0x07:
            if entry.key is not None:
                raise InvalidMessageError(
                    "compressed outer message should not have key", position=entry.position
                )
            value = entry.value or b""
            if entry.codec == 3 and len(value) > 4 and not value[4] & 0x20:
                raise InvalidMessageError(
                    f"lz4 frame with linked blocks (FLG {value[4]:#04x}): Kafka's readers "
                    "accept only independent blocks",
                    position=entry.position,
                )
            try:
                inner = inner_entries(entry)
            except MessageFormatError as exc:
                raise InvalidMessageError.wrapping(exc) from None
            for i, message in enumerate(inner):
                if message.magic != entry.magic:
                    raise InvalidMessageError(
                        f"compressed message magic {message.magic} does not equal wrapper "
                        f"magic {entry.magic}",
                        position=entry.position,
                    )
                if entry.magic and message.offset != i:
                    raise InvalidMessageError(
                        "inner offsets of a magic 1 compressed wrapper must be "
                        f"0..{len(inner) - 1}; message {i} has {message.offset}",
                        position=entry.position,
                    )
                if keys_required and message.key is None:
                    raise KeylessMessageError(KEYLESS)
            for message in inner:
                refuse_log_append_time(message, entry.position)
            offset += len(inner)
            if not entry.magic:  # absolute inner offsets, recompressed
                payload = bytearray(decompress(entry.codec, entry.value or b"", magic=0))
                for i, message in enumerate(inner):
                    set_offset(payload, message.position, offset - len(inner) + 1 + i)
                raw = bytearray(encode_message(
                    offset, None, compress(entry.codec, bytes(payload), magic=0),
                    attributes=entry.attributes, magic=0,
                ))
        else:
            if keys_required and entry.key is None:
                raise KeylessMessageError(KEYLESS)
            offset += 1
        set_offset(raw, 0, offset)
        offsets.append(offset)
        attributes.append(entry.attributes & 0xFF)
        timestamps.append(entry.timestamp)
        if log_append_time is not None and entry.magic == 1:
            attributes[-1] |= 0x08
            timestamps[-1] = log_append_time
            raw[17] = attributes[-1]
            struct.pack_into(">q", raw, 18, log_append_time)
            struct.pack_into(">I", raw, 12, zlib.crc32(raw[16:]))
        pieces.append(bytes(raw))
    return b"".join(pieces), offsets, attributes, timestamps


def refuse_log_append_time(message: Entry, position: int) -> None:
    if message.magic and message.attributes & 0x08:
        raise ProducerTimestampTypeError(
            "a producer must not set the timestamp type LogAppendTime (attributes bit 3) "
            f"(the message at byte position {position})"
        )


def outcome(prepare: Any, *args: Any) -> Any:
    try:
        return prepare(*args)
    except LogError as exc:
        return type(exc), str(exc)


def prepared(
    data: bytes, next_offset: int, keys_required: bool, log_append_time: int | None
) -> tuple[bytes, list[int], list[int], list[int]]:
    result = prepare_append(
        data,
        next_offset=next_offset,
        keys_required=keys_required,
        log_append_time=log_append_time,
    )
    entries = result.entries
    assert (result.first_offset, result.last_offset) == (next_offset, entries.offsets[-1])
    assert list(entries.positions) == [e.position for e in read_entries(result.data)[0]]
    return (
        bytes(result.data),
        list(entries.offsets),
        list(entries.attributes),
        list(entries.timestamps),
    )


@settings(max_examples=1500)
@given(
    data=damaged(message_sets),
    next_offset=st.sampled_from([0, 7, 2**40]),
    keys_required=st.booleans(),
    log_append_time=st.sampled_from([None, None, 1_800_000_000_000]),
)
def test_prepare_append_agrees_with_the_reference(
    data: bytes, next_offset: int, keys_required: bool, log_append_time: int | None
) -> None:
    args = (data, next_offset, keys_required, log_append_time)
    assert outcome(prepared, *args) == outcome(reference_prepare, *args)


def test_log_append_time_over_a_run_of_same_sized_messages_leaves_valid_crcs() -> None:
    """The stamped set decodes: every CRC was recomputed over the whole of its entry."""
    data = encode_records([(None, b"v" * 20, i) for i in range(50)])
    result = prepare_append(data, next_offset=100, log_append_time=1_800_000_000_000)
    messages, whole = decode_messages(bytes(result.data))
    assert whole == len(data)
    assert [(m.offset, m.timestamp, m.timestamp_type) for m in messages] == [
        (100 + i, 1_800_000_000_000, TimestampType.LOG_APPEND_TIME) for i in range(50)
    ]
    assert list(result.entries.sizes) == [len(data) // 50] * 50
