"""The message-set codec against byte vectors built by hand from seed 000 section 5.4.

    offset 8 | message length 4 | crc 4 | magic 1 | attributes 1 | timestamp 8 (magic > 0)
    | key length 4 | key K | value length 4 | value V

The vectors are packed with ``struct`` and checksummed with crcmod (not the codec's zlib.crc32),
so the codec is compared with the layout, not with itself.
"""

from __future__ import annotations

import struct

import crcmod.predefined
import pytest

from protocol.errors import CorruptMessageError, MessageFormatError
from protocol.messageset import (
    Entry,
    Message,
    TimestampType,
    decode_messages,
    encode_message,
    encode_message_set,
    encode_records,
    read_entries,
    set_offset,
)

seed_crc32 = crcmod.predefined.mkPredefinedCrcFun("crc-32")


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(data)) + data


def v1(offset: int, key: bytes | None, value: bytes | None, timestamp: int,
       attributes: int = 0) -> bytes:
    """One v1 entry, field by field as the seed lists them."""
    body = struct.pack(">bbq", 1, attributes, timestamp) + _bytes_field(key) + _bytes_field(value)
    return struct.pack(">qiI", offset, 4 + len(body), seed_crc32(body)) + body


def v0(offset: int, key: bytes | None, value: bytes | None, attributes: int = 0) -> bytes:
    body = struct.pack(">bb", 0, attributes) + _bytes_field(key) + _bytes_field(value)
    return struct.pack(">qiI", offset, 4 + len(body), seed_crc32(body)) + body


V1_CASES = [
    pytest.param(7, b"key", b"value", 1_700_000_000_000, 0, id="key-and-value"),
    pytest.param(0, None, b"value", 0, 0, id="null-key"),
    pytest.param(2**40, b"k", None, -1, 0, id="null-value-no-timestamp"),
    pytest.param(3, None, None, 5, 0, id="null-key-and-value"),
    pytest.param(4, b"", b"", 6, 0, id="empty-not-null"),
    pytest.param(5, b"k", b"v" * 300, 1_700_000_000_001, 0x08, id="log-append-time"),
    pytest.param(-1, b"\xff" * 3, b"\x00", 2**62, 0, id="binary-bytes"),
]


@pytest.mark.parametrize(("offset", "key", "value", "timestamp", "attributes"), V1_CASES)
def test_v1_vector_decodes_to_its_fields(
    offset: int, key: bytes | None, value: bytes | None, timestamp: int, attributes: int
) -> None:
    raw = v1(offset, key, value, timestamp, attributes)
    size = 4 + 1 + 1 + 8 + 4 + len(key or b"") + 4 + len(value or b"")  # the seed's formula
    (entry,), whole = read_entries(raw)
    assert whole == len(raw) == 12 + size
    assert entry == Entry(offset, 0, size, seed_crc32(raw[16:]), 1, attributes, timestamp, key,
                          value)
    assert entry.timestamp_type == TimestampType(attributes >> 3)
    assert decode_messages(raw) == ([Message(offset, timestamp, attributes >> 3, key, value)],
                                    len(raw))


@pytest.mark.parametrize(("offset", "key", "value", "timestamp", "attributes"), V1_CASES)
def test_encoder_writes_the_v1_vector(
    offset: int, key: bytes | None, value: bytes | None, timestamp: int, attributes: int
) -> None:
    raw = v1(offset, key, value, timestamp, attributes)
    assert encode_message(offset, key, value, timestamp, attributes=attributes) == raw
    assert encode_records([(key, value, timestamp)], base_offset=offset,
                          attributes=attributes) == raw


@pytest.mark.parametrize(
    ("offset", "key", "value"),
    [(0, b"key", b"value"), (9, None, b"v"), (10, b"k", None), (11, None, None)],
)
def test_v0_vector_decodes_and_is_written(offset: int, key: bytes | None, value: bytes | None
                                          ) -> None:
    raw = v0(offset, key, value)
    (entry,), whole = read_entries(raw)
    assert whole == len(raw)
    assert (entry.offset, entry.magic, entry.key, entry.value) == (offset, 0, key, value)
    assert entry.timestamp == -1 and entry.timestamp_type is TimestampType.CREATE_TIME
    assert entry.size == 4 + 1 + 1 + 4 + len(key or b"") + 4 + len(value or b"")
    assert decode_messages(raw) == ([Message(offset, -1, 0, key, value)], len(raw))
    assert encode_message(offset, key, value, magic=0) == raw


def test_a_set_is_entries_back_to_back_with_consecutive_offsets() -> None:
    records = [(b"a", b"1", 10), (None, b"22", 11), (b"ccc", None, 12)]
    expected = v1(100, b"a", b"1", 10) + v1(101, None, b"22", 11) + v1(102, b"ccc", None, 12)
    assert encode_message_set(records, base_offset=100) == expected
    entries, whole = read_entries(expected)
    assert whole == len(expected)
    assert [e.position for e in entries] == [0, entries[0].end, entries[1].end]
    assert [(m.offset, m.key, m.value, m.timestamp) for m in decode_messages(expected)[0]] == [
        (100, b"a", b"1", 10), (101, None, b"22", 11), (102, b"ccc", None, 12)]


def test_log_append_time_marks_every_message() -> None:
    raw = encode_message_set([(None, b"x", 5), (None, b"y", 6)],
                             timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert raw == v1(0, None, b"x", 5, 0x08) + v1(1, None, b"y", 6, 0x08)
    assert {m.timestamp_type for m in decode_messages(raw)[0]} == {1}


def test_empty_input() -> None:
    assert encode_message_set([]) == b""
    assert read_entries(b"") == ([], 0)
    assert decode_messages(b"") == ([], 0)


def test_set_offset_rewrites_only_the_offset() -> None:
    raw = bytearray(v1(0, b"k", b"v", 1) + v1(1, b"k", b"w", 2))
    second = read_entries(raw)[0][1].position
    set_offset(raw, second, 500)
    assert bytes(raw) == v1(0, b"k", b"v", 1) + v1(500, b"k", b"w", 2)
    assert [m.offset for m in decode_messages(raw)[0]] == [0, 500]  # the CRC still holds


def test_base_position_is_added_to_positions_and_errors() -> None:
    raw = v1(0, None, b"a", 1) + v1(1, None, b"b", 2)
    entries, _ = read_entries(raw, base_position=4096)
    assert [e.position for e in entries] == [4096, 4096 + len(raw) // 2]
    damaged = bytearray(raw)
    damaged[-1] ^= 0xFF
    with pytest.raises(CorruptMessageError) as info:
        read_entries(damaged, base_position=4096)
    assert info.value.position == 4096 + len(raw) // 2


# ------------------------------------------------------------------- partial trailing entries

SET = v1(0, b"k0", b"first", 1) + v1(1, None, b"second-value", 2) + v1(2, b"k2", None, 3)
BOUNDARIES = [0, len(v1(0, b"k0", b"first", 1)),
              len(v1(0, b"k0", b"first", 1)) + len(v1(1, None, b"second-value", 2)), len(SET)]


@pytest.mark.parametrize("cut", range(len(SET) + 1))
def test_a_partial_trailing_entry_is_left_out_at_every_cut(cut: int) -> None:
    whole_bytes = max(b for b in BOUNDARIES if b <= cut)
    count = BOUNDARIES.index(whole_bytes)
    entries, whole = read_entries(SET[:cut])
    assert (len(entries), whole) == (count, whole_bytes)
    messages, whole = decode_messages(SET[:cut])
    assert ([m.offset for m in messages], whole) == (list(range(count)), whole_bytes)


# ----------------------------------------------------------------------- detecting damage


def flipped(raw: bytes, position: int, mask: int) -> bytes:
    damaged = bytearray(raw)
    damaged[position] ^= mask
    return bytes(damaged)


MIDDLE = v1(11, b"key", b"value-in-the-middle", 77)
FIRST, LAST = v1(10, None, b"before", 76), v1(12, None, b"after", 78)


@pytest.mark.parametrize("position", range(12, len(MIDDLE)))  # from the CRC onwards
@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_flipping_any_byte_from_the_crc_on_is_detected(position: int, mask: int) -> None:
    damaged = FIRST + flipped(MIDDLE, position, mask) + LAST
    for decode in (read_entries, decode_messages):
        with pytest.raises(CorruptMessageError) as info:
            decode(damaged)
        assert info.value.offset == 11 and info.value.position == len(FIRST)
        assert f"offset 11 at byte position {len(FIRST)}" in str(info.value)


@pytest.mark.parametrize("position", range(8, 12))
@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_a_damaged_size_is_an_error_or_leaves_the_entry_unread(position: int, mask: int) -> None:
    """The size is outside the CRC: damage either breaks the CRC or the minimum size, or makes
    the entry run past the end of the buffer (then it is not whole and is fetched again)."""
    damaged = FIRST + flipped(MIDDLE, position, mask)
    for decode in (read_entries, decode_messages):
        try:
            found, whole = decode(damaged)
        except MessageFormatError as exc:
            assert exc.offset == 11 and exc.position == len(FIRST)
        else:
            assert (len(found), whole) == (1, len(FIRST))


def entry_with_body(body: bytes, offset: int = 3) -> bytes:
    """An entry around an arbitrary body, with a correct CRC: only format checks can catch it."""
    return struct.pack(">qiI", offset, 4 + len(body), seed_crc32(body)) + body


MALFORMED = [
    pytest.param(struct.pack(">qi", 3, 9) + b"\x00" * 9, "entry size 9 is below the minimum 14",
                 id="size-below-minimum"),
    pytest.param(entry_with_body(struct.pack(">bbii", 1, 0, -1, -1)),
                 "v1 entry size 14 is below the minimum 22", id="v1-too-short"),
    pytest.param(entry_with_body(struct.pack(">bbii", 2, 0, -1, -1)), "unknown magic 2",
                 id="unknown-magic"),
    pytest.param(entry_with_body(struct.pack(">bbqii", 1, 5, 0, -1, -1)),
                 "unknown compression codec 5", id="unknown-codec"),
    pytest.param(entry_with_body(struct.pack(">bbqi", 1, 0, 0, -2) + struct.pack(">i", -1)),
                 "key length -2 does not fit the entry", id="key-length-below-minus-one"),
    pytest.param(entry_with_body(struct.pack(">bbqi", 1, 0, 0, 50) + struct.pack(">i", -1)),
                 "key length 50 does not fit the entry", id="key-longer-than-entry"),
    pytest.param(entry_with_body(struct.pack(">bbqii", 1, 0, 0, -1, 3) + b"ab"),
                 "value length 3 does not fit the entry", id="value-longer-than-entry"),
    pytest.param(entry_with_body(struct.pack(">bbqii", 1, 0, 0, -1, 1) + b"abc"),
                 "value length 1 does not fit the entry", id="bytes-after-value"),
    pytest.param(entry_with_body(struct.pack(">bbqii", 1, 0, 0, -1, -7)),
                 "value length -7 does not fit the entry", id="value-length-below-minus-one"),
]


@pytest.mark.parametrize(("raw", "reason"), MALFORMED)
def test_malformed_entries_are_named_with_offset_and_position(raw: bytes, reason: str) -> None:
    data = FIRST + raw
    for decode in (read_entries, decode_messages):
        with pytest.raises(MessageFormatError) as info:
            decode(data)
        assert not isinstance(info.value, CorruptMessageError)
        assert str(info.value) == f"{reason} (offset 3 at byte position {len(FIRST)})"
        assert (info.value.offset, info.value.position) == (3, len(FIRST))


def test_crc_checks_can_be_skipped_for_trusted_data() -> None:
    damaged = flipped(MIDDLE, len(MIDDLE) - 1, 0x01)
    (message,), _ = decode_messages(damaged, verify_crc=False)
    assert message.value == b"value-in-the-middld"
    with pytest.raises(CorruptMessageError, match="CRC mismatch: stored 0x"):
        decode_messages(damaged)
