"""The codec against Kafka's format as its own producers write it and its own readers read it:
hand-built fixtures decode, and everything odradek writes decodes with an independent reader."""

from __future__ import annotations

import re

import lz4.frame
import pytest

from protocol.compression import (
    Codec,
    compress,
    decompress,
    lz4_header_checksum,
    xxh32,
)
from protocol.errors import MessageFormatError
from protocol.messageset import (
    count_messages,
    decode_messages,
    encode_message_set,
    open_wrapper,
    read_entries,
)
from tests.kafka_format import (
    LZ4_HEADER,
    LZ4_HEADER_KAFKA_3160,
    LZ4_MAGIC,
    XERIAL_MAGIC,
    Fixture,
    Lz4Frame,
    fixtures,
    lz4_stored,
    message,
    read_set,
    snappy_literals,
)

FIXTURES = fixtures()
CODECS = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f.name)
def test_a_kafka_fixture_decodes_with_its_offsets_keys_and_values(fixture: Fixture) -> None:
    messages, whole = decode_messages(fixture.data)
    assert whole == len(fixture.data)
    assert [(m.offset, m.key, m.value) for m in messages] == fixture.messages
    (wrapper,), _ = read_entries(fixture.data)
    assert [(e.offset, e.key, e.value) for e in open_wrapper(wrapper)] == fixture.messages
    assert count_messages(wrapper) == len(fixture.messages)
    # the fixture itself is what Kafka's rules read
    assert [(m.offset, m.key, m.value) for m in read_set(fixture.data)] == fixture.messages


def test_fixtures_together_decode_as_one_log() -> None:
    data = b"".join(f.data for f in FIXTURES)
    assert [m.offset for m in decode_messages(data)[0]] == list(range(97, 112))


def test_xxh32_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F  # past 16 bytes
    assert xxh32(b"abc", seed=1) != xxh32(b"abc")


def test_lz4_header_checksums_are_the_fixtures() -> None:
    assert lz4_header_checksum(LZ4_HEADER[4:6]) == LZ4_HEADER[6]
    assert lz4_header_checksum(LZ4_HEADER_KAFKA_3160[:6]) == LZ4_HEADER_KAFKA_3160[6]
    # the lz4 library agrees about the correct one, and refuses the old one
    assert lz4.frame.decompress(lz4_stored(b"abc")) == b"abc"
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(lz4_stored(b"abc", kafka_3160=True))


def records(count: int, value_size: int) -> list[tuple[bytes | None, bytes | None, int]]:
    return [
        (None if i % 3 == 0 else b"key-%d" % i, bytes([65 + i % 26]) * value_size, 1_000 + i)
        for i in range(count)
    ]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name.lower())
@pytest.mark.parametrize("size", ["small", "over-64k"])
def test_everything_odradek_writes_reads_with_kafkas_rules(
    magic: int, codec: Codec, size: str
) -> None:
    sent = records(5, 10) if size == "small" else records(40, 5_000)
    data = encode_message_set(sent, codec=codec, magic=magic, base_offset=500)
    frames: list[Lz4Frame] = []
    read = read_set(data, lz4_frames=frames)
    assert [(m.offset, m.key, m.value) for m in read] == [
        (500 + i, k, v) for i, (k, v, _) in enumerate(sent)
    ]
    assert {m.magic for m in read} == {magic}
    if codec is Codec.LZ4:
        # one frame, independent blocks, Kafka's header; the KAFKA-3160 checksum in magic 0
        assert frames == [Lz4Frame(0x60, 0x40, 0x1A if magic == 0 else 0x82)]
    if codec is Codec.SNAPPY:
        (wrapper,), _ = read_entries(data)
        assert (wrapper.value or b"").startswith(XERIAL_MAGIC + b"\x00\x00\x00\x01" * 2)


def test_xerial_blocks_hold_at_most_32_kib() -> None:
    payload = compress(Codec.SNAPPY, bytes(range(256)) * 1000)
    pos, sizes = 16, []
    while pos < len(payload):
        length = int.from_bytes(payload[pos : pos + 4], "big")
        sizes.append(len(decompress(Codec.SNAPPY, payload[:16] + payload[pos : pos + 4 + length])))
        pos += 4 + length
    assert sizes == [32 * 1024] * 7 + [256_000 - 7 * 32 * 1024]


@pytest.mark.parametrize("magic", [0, 1])
def test_a_raw_snappy_block_is_still_read(magic: int) -> None:
    inner = b"".join(message(i, None, b"raw %d" % i, magic=magic) for i in range(3))
    wrapper = message(2, None, snappy_literals(inner), magic=magic, attributes=2)
    assert [(m.offset, m.value) for m in decode_messages(wrapper)[0]] == [
        (i, b"raw %d" % i) for i in range(3)
    ]


def test_linked_lz4_blocks_written_before_are_still_read() -> None:
    """Segments written before held frames of linked blocks (FLG 0x48)."""
    inner = b"".join(message(i, None, b"x" * 30_000, timestamp=i) for i in range(3))
    payload = lz4.frame.compress(inner)
    assert payload[4] == 0x48
    wrapper = message(2, None, payload, attributes=3)
    assert [m.offset for m in decode_messages(wrapper)[0]] == [0, 1, 2]


def test_a_magic_0_lz4_frame_with_the_correct_checksum_is_read_too() -> None:
    inner = b"".join(message(o, None, b"v", magic=0) for o in (7, 8))
    wrapper = message(8, None, lz4_stored(inner), magic=0, attributes=3)
    assert [m.offset for m in decode_messages(wrapper)[0]] == [7, 8]


def test_a_magic_1_lz4_frame_needs_the_correct_checksum() -> None:
    inner = b"".join(message(i, None, b"v") for i in range(2))
    wrapper = message(1, None, lz4_stored(inner, kafka_3160=True), attributes=3)
    with pytest.raises(MessageFormatError, match="cannot decompress lz4 payload"):
        decode_messages(wrapper)


def test_magic_0_inner_offsets_are_read_as_stored() -> None:
    """A v0 set whose inner offsets are not absolute reads as Kafka reads it: as stored."""
    inner = b"".join(message(i, None, b"v%d" % i, magic=0) for i in range(3))
    for codec in CODECS:
        wrapper = message(102, None, compress(codec, inner, magic=0), magic=0,
                          attributes=int(codec))
        assert [m.offset for m in decode_messages(wrapper)[0]] == [0, 1, 2]
        # Kafka's reader, given the wrapper at its last inner offset as Kafka stores v0
        assert [m.offset for m in read_set((2).to_bytes(8, "big") + wrapper[8:])] == [0, 1, 2]


@pytest.mark.parametrize(
    ("codec", "payload", "reason"),
    [
        (Codec.SNAPPY, b"\x05abc", "UncompressError"),
        (Codec.SNAPPY, XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x02", "compatible version 2"),
        (Codec.SNAPPY, XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x09ab",
         "block of 9 bytes at byte 20 is truncated"),
        (Codec.LZ4, LZ4_MAGIC + b"\x60\x40\x00", "RuntimeError: LZ4F_decompress failed"),
        (Codec.GZIP, b"\x1f\x8b junk", "error: Error -3"),
    ],
    ids=["snappy-empty-exception", "xerial-version", "xerial-truncated", "lz4", "gzip"],
)
def test_a_decompression_failure_names_codec_reason_and_offset(
    codec: Codec, payload: bytes, reason: str
) -> None:
    wrapper = message(42, None, payload, attributes=int(codec))
    with pytest.raises(MessageFormatError) as info:
        decode_messages(wrapper)
    text = str(info.value)
    assert re.fullmatch(
        rf"cannot decompress {codec.name.lower()} payload: .*{re.escape(reason)}.* "
        r"\(offset 42 at byte position 0\)",
        text,
    ), text
    assert ":  " not in text  # never an empty reason
