"""Compressed wrappers: each codec round trips, inner offsets, v0 wrappers, bad payloads, bombs."""

from __future__ import annotations

import re

import pytest

from protocol.compression import Codec, compress, decompress
from protocol.errors import CorruptMessageError, MessageFormatError
from protocol.messageset import (
    Message,
    TimestampType,
    count_messages,
    decode_messages,
    encode_message,
    encode_message_set,
    open_wrapper,
    read_entries,
    set_offset,
)

CODECS = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4]
RECORDS = [
    (b"user-1", b"clicked /home " * 5, 1_000),
    (None, b"viewed /cart", 1_003),
    (b"user-2", None, 1_001),
    (b"", b"", 1_002),
]


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name.lower())
def test_codec_round_trip(codec: Codec) -> None:
    data = bytes(range(256)) * 40
    assert decompress(codec, compress(codec, data)) == data
    assert decompress(codec, compress(codec, b"")) == b""


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_message_set_round_trip(codec: Codec) -> None:
    raw = encode_message_set(RECORDS, codec=codec, base_offset=500)
    messages, whole = decode_messages(raw)
    assert whole == len(raw)
    assert messages == [Message(500 + i, ts, 0, k, v) for i, (k, v, ts) in enumerate(RECORDS)]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_wrapper_carries_the_last_offset_and_inner_offsets_are_relative(codec: Codec) -> None:
    raw = encode_message_set(RECORDS, codec=codec, base_offset=500)
    (wrapper,), _ = read_entries(raw)
    assert (wrapper.offset, wrapper.codec, wrapper.key) == (503, codec, None)
    assert wrapper.magic == 1 and wrapper.attributes == int(codec)
    assert wrapper.timestamp == 1_003  # the largest inner timestamp
    payload = decompress(codec, wrapper.value or b"")
    inner, whole = read_entries(payload)
    assert whole == len(payload)
    assert [e.offset for e in inner] == [0, 1, 2, 3]
    assert [e.attributes for e in inner] == [0, 0, 0, 0]
    assert [e.offset for e in open_wrapper(wrapper)] == [500, 501, 502, 503]
    assert count_messages(wrapper) == 4


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_assigning_offsets_rewrites_only_the_wrapper(codec: Codec) -> None:
    """What the broker does on append: one 8-byte write; no recompression, the CRC still holds."""
    raw = bytearray(encode_message_set(RECORDS, codec=codec))
    set_offset(raw, 0, 9_003)
    assert [m.offset for m in decode_messages(raw)[0]] == [9_000, 9_001, 9_002, 9_003]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_log_append_time_wrapper_timestamp_stands_for_all(codec: Codec) -> None:
    raw = bytearray(encode_message_set(RECORDS, codec=codec,
                                       timestamp_type=TimestampType.LOG_APPEND_TIME))
    (wrapper,), _ = read_entries(raw)
    assert wrapper.timestamp_type is TimestampType.LOG_APPEND_TIME
    # The broker would set the wrapper's timestamp; re-encode with the same payload to do so.
    stamped = encode_message(wrapper.offset, None, wrapper.value, 5_555,
                             attributes=wrapper.attributes)
    assert {(m.timestamp, m.timestamp_type) for m in decode_messages(stamped)[0]} == {(5_555, 1)}


def test_mixed_plain_and_compressed_entries() -> None:
    raw = (encode_message_set(RECORDS[:2], base_offset=0)
           + encode_message_set(RECORDS, codec=Codec.LZ4, base_offset=2)
           + encode_message_set(RECORDS[2:], base_offset=6))
    assert [m.offset for m in decode_messages(raw)[0]] == list(range(8))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_v0_wrapper_with_absolute_inner_offsets(codec: Codec) -> None:
    inner = b"".join(encode_message(offset, None, b"m%d" % offset, magic=0)
                     for offset in (100, 101, 102))
    wrapper = encode_message(102, None, compress(codec, inner), attributes=int(codec), magic=0)
    assert decode_messages(wrapper)[0] == [Message(o, -1, 0, None, b"m%d" % o)
                                           for o in (100, 101, 102)]
    (entry,), _ = read_entries(wrapper)
    assert [e.offset for e in open_wrapper(entry)] == [100, 101, 102]


def wrap(codec: Codec, payload: bytes | None, offset: int = 7) -> bytes:
    """A wrapper with a valid CRC around any payload: only the payload checks can catch it."""
    return encode_message(offset, None, payload, 1, attributes=int(codec))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize(
    ("make_payload", "reason"),
    [
        (lambda c: compress(c, encode_message_set([(None, b"x", 1)]))[:-4], "cannot decompress"),
        (lambda c: compress(c, encode_message_set([(None, b"x", 1)])) + b"junk",
         "cannot decompress"),
        (lambda c: b"\x00not compressed at all", "cannot decompress"),
        (lambda c: compress(c, b""), "partial or empty"),
        (lambda c: compress(c, encode_message_set([(None, b"x", 1)])[:-1]), "partial or empty"),
        (lambda c: compress(c, encode_message_set([(None, b"x", 1)], codec=Codec.GZIP)),
         "nested compression"),
    ],
    ids=["truncated", "trailing-bytes", "garbage", "empty-inner-set", "partial-inner-set",
         "nested"],
)
def test_bad_payloads_are_format_errors(codec: Codec, make_payload, reason: str) -> None:
    head = encode_message_set([(None, b"ok", 1)])
    raw = head + wrap(codec, make_payload(codec))
    with pytest.raises(MessageFormatError, match=reason) as info:
        decode_messages(raw)
    assert (info.value.offset, info.value.position) == (7, len(head))
    (_, wrapper), _ = read_entries(raw)
    with pytest.raises(MessageFormatError, match=reason):
        open_wrapper(wrapper)


def test_wrapper_with_null_value() -> None:
    (entry,), _ = read_entries(wrap(Codec.GZIP, None))
    with pytest.raises(MessageFormatError, match="null value"):
        open_wrapper(entry)
    with pytest.raises(MessageFormatError):
        decode_messages(wrap(Codec.GZIP, None))


def test_corrupt_inner_message_names_the_wrapper() -> None:
    inner = bytearray(encode_message_set([(None, b"abc", 1), (None, b"def", 2)]))
    inner[-1] ^= 0x01
    raw = wrap(Codec.SNAPPY, compress(Codec.SNAPPY, bytes(inner)))
    with pytest.raises(CorruptMessageError, match="inside the wrapper") as info:
        decode_messages(raw)
    assert (info.value.offset, info.value.position) == (7, 0)
    # the wrapper's place, once (not the inner one's too)
    assert re.fullmatch(
        r"inside the wrapper: CRC mismatch: stored 0x\w+, computed 0x\w+ "
        r"\(offset 7 at byte position 0\)",
        str(info.value),
    )


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_decompression_bomb_beyond_the_limit(codec: Codec) -> None:
    limit = 1 << 16
    bomb = compress(codec, b"\x00" * (limit * 64))
    assert len(bomb) < limit * 64 // 16  # far smaller on the wire than what it expands to
    with pytest.raises(MessageFormatError, match="beyond"):
        decompress(codec, bomb, limit=limit)
    with pytest.raises(MessageFormatError, match="beyond"):
        decode_messages(wrap(codec, bomb), limit=limit)
    (entry,), _ = read_entries(wrap(codec, bomb))
    with pytest.raises(MessageFormatError, match="beyond"):
        open_wrapper(entry, limit=limit)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_a_payload_of_exactly_the_limit_is_accepted(codec: Codec) -> None:
    inner = encode_message_set([(None, b"v" * 1_000, 1)])
    assert decode_messages(wrap(codec, compress(codec, inner)), limit=len(inner))[0][0].value


@pytest.mark.parametrize(("name", "codec"), [("lz4", Codec.LZ4), (" GZIP ", Codec.GZIP),
                                             (2, Codec.SNAPPY), (Codec.NONE, Codec.NONE)])
def test_codec_parse(name: str | int | Codec, codec: Codec) -> None:
    assert Codec.parse(name) is codec


def test_codec_parse_names_the_choices() -> None:
    with pytest.raises(ValueError, match="none, gzip, snappy, lz4"):
        Codec.parse("zstd")
