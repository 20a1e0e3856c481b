"""Kafka's v0/v1 message format, written and read here from its description alone -- nothing of
odradek's codec is used -- to hold odradek's encoder, reader and broker to it.

Fixtures are byte for byte what Kafka's own producers and brokers write: xerial-framed snappy,
lz4 frames of independent blocks (magic 0 ones with the header checksum of KAFKA-3160), magic 0
wrappers with absolute inner offsets, magic 1 wrappers with relative ones (KIP-31). Compressed
data is built from uncompressed pieces where the formats allow it (snappy literals, stored lz4
blocks), so no compressor is involved; gzip comes from the standard library.

``read_set`` is an independent reader applying Kafka's rules.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import NamedTuple

import lz4.block
import snappy

GZIP, SNAPPY, LZ4 = 1, 2, 3
LZ4_MAGIC = b"\x04\x22\x4d\x18"
# FLG 0x60: version 01, independent blocks, no checksums, no content size; BD 0x40: 64 KiB
# blocks -- what Kafka's KafkaLZ4BlockOutputStream writes. The header checksum is byte 1 of
# xxHash32 over FLG and BD (0x82), or, as Kafka 0.8/0.9 computed it (KAFKA-3160), over the
# magic number too (0x1a).
LZ4_HEADER = LZ4_MAGIC + b"\x60\x40\x82"
LZ4_HEADER_KAFKA_3160 = LZ4_MAGIC + b"\x60\x40\x1a"
LZ4_BLOCK_MAX = 64 * 1024
XERIAL_MAGIC = b"\x82SNAPPY\x00"


# ---------------------------------------------------------------------------------- writing


def message(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    *,
    magic: int = 1,
    attributes: int = 0,
    timestamp: int = 0,
) -> bytes:
    """offset int64, size int32, crc uint32, magic int8, attributes int8, [timestamp int64],
    key length int32 (-1 null), key, value length int32 (-1 null), value."""
    body = struct.pack(">bb", magic, attributes)
    if magic:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">i", -1 if key is None else len(key)) + (key or b"")
    body += struct.pack(">i", -1 if value is None else len(value)) + (value or b"")
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


def snappy_literals(data: bytes) -> bytes:
    """A raw snappy block holding ``data`` as literals: varint length, then literal elements
    (tag 0xf4 + 2-byte little-endian length-1, for up to 64 KiB each)."""
    out = bytearray()
    n = len(data)
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            break
    for start in range(0, len(data), 1 << 16):
        chunk = data[start : start + (1 << 16)]
        out += b"\xf4" + struct.pack("<H", len(chunk) - 1) + chunk
    return bytes(out)


def xerial(data: bytes, block: int = 32 * 1024) -> bytes:
    """snappy-java's stream: magic, version 1, compatible version 1, then for each block its
    big-endian int32 length and the raw block."""
    out = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    for start in range(0, len(data), block):
        raw = snappy_literals(data[start : start + block])
        out += struct.pack(">i", len(raw)) + raw
    return out


def lz4_stored(data: bytes, *, kafka_3160: bool = False) -> bytes:
    """An LZ4 frame of stored (uncompressed) independent blocks: each a little-endian uint32
    size with the high bit set, then the bytes; a zero uint32 ends the frame."""
    out = LZ4_HEADER_KAFKA_3160 if kafka_3160 else LZ4_HEADER
    for start in range(0, len(data), LZ4_BLOCK_MAX):
        chunk = data[start : start + LZ4_BLOCK_MAX]
        out += struct.pack("<I", len(chunk) | 0x80000000) + chunk
    return out + b"\x00\x00\x00\x00"


Triples = list[tuple[int, bytes | None, bytes | None]]


class Fixture(NamedTuple):
    name: str
    data: bytes  # the entry as Kafka stores it
    magic: int
    codec: int
    messages: Triples  # (offset, key, value) as Kafka reads them


def _v0(offsets: range, codec: int, payload_of: Callable[[bytes], bytes]) -> tuple[bytes, Triples]:
    triples = [(o, b"k%d" % o, b"v0 value %d" % o) for o in offsets]
    inner = b"".join(message(o, k, v, magic=0) for o, k, v in triples)
    return message(offsets[-1], None, payload_of(inner), magic=0, attributes=codec), triples


def _v1(
    last: int, count: int, codec: int, payload_of: Callable[[bytes], bytes], value_size: int = 0
) -> tuple[bytes, Triples]:
    values = [bytes([48 + i]) * value_size if value_size else b"v1 %d" % i for i in range(count)]
    keys = [None if i % 2 else b"key-%d" % i for i in range(count)]
    inner = b"".join(
        message(i, keys[i], values[i], timestamp=1_700_000_000_000 + i) for i in range(count)
    )
    wrapper = message(last, None, payload_of(inner), attributes=codec,
                      timestamp=1_700_000_000_000 + count - 1)
    first = last - count + 1
    return wrapper, [(first + i, keys[i], values[i]) for i in range(count)]


def fixtures() -> list[Fixture]:
    """One log's worth, offsets 97..111 in order: xerial snappy v0 (97-99), gzip v0 (100-102),
    lz4 v0 with the KAFKA-3160 checksum (103-105), xerial snappy v1 (106-108, two blocks), lz4
    v1 over 64 KiB (109-111, several blocks)."""
    out = []
    data, triples = _v0(range(97, 100), SNAPPY, xerial)
    out.append(Fixture("snappy-v0", data, 0, SNAPPY, triples))
    data, triples = _v0(range(100, 103), GZIP, lambda b: gzip.compress(b, mtime=0))
    out.append(Fixture("gzip-v0", data, 0, GZIP, triples))
    data, triples = _v0(range(103, 106), LZ4, lambda b: lz4_stored(b, kafka_3160=True))
    out.append(Fixture("lz4-v0-kafka-3160", data, 0, LZ4, triples))
    data, triples = _v1(108, 3, SNAPPY, lambda b: xerial(b, block=64))
    out.append(Fixture("snappy-v1", data, 1, SNAPPY, triples))
    data, triples = _v1(111, 3, LZ4, lz4_stored, value_size=30_000)
    assert len(data) > 64 * 1024
    out.append(Fixture("lz4-v1-over-64k", data, 1, LZ4, triples))
    return out


# ---------------------------------------------------------------------------------- reading


class Read(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    magic: int
    codec: int


class Lz4Frame(NamedTuple):
    flg: int
    bd: int
    checksum: int


def read_set(data: bytes, *, lz4_frames: list[Lz4Frame] | None = None) -> list[Read]:
    """Every message of ``data`` (which must hold whole entries only), wrappers opened with
    Kafka's rules; each LZ4 frame's header is appended to ``lz4_frames``."""
    out: list[Read] = []
    for offset, magic, attributes, key, value in _entries(data):
        codec = attributes & 0x07
        if not codec:
            out.append(Read(offset, key, value, magic, 0))
            continue
        assert key is None, "compressed outer message should not have key"
        assert value is not None
        payload = _decompress(codec, value, magic, lz4_frames)
        inner = list(_entries(payload))
        assert inner, "a wrapper holds at least one message"
        assert all(m == magic for _, m, _, _, _ in inner), "inner magic is the wrapper's"
        assert not any(a & 0x07 for _, _, a, _, _ in inner), "no nested compression"
        assert inner[-1][0] == offset or magic == 1, "a v0 wrapper's offset is its last message's"
        if magic == 1:
            assert [o for o, *_ in inner] == list(range(len(inner))), "v1 inner offsets 0..n-1"
            shift = offset - inner[-1][0]
        else:
            shift = 0  # v0: absolute, as stored
        out.extend(Read(o + shift, k, v, magic, codec) for o, _, _, k, v in inner)
    return out


def _entries(data: bytes) -> Iterator[tuple[int, int, int, bytes | None, bytes | None]]:
    pos = 0
    while pos < len(data):
        offset, size, crc = struct.unpack_from(">qiI", data, pos)
        end = pos + 12 + size
        assert end <= len(data), "whole entries only"
        assert zlib.crc32(data[pos + 16 : end]) == crc, f"CRC of the entry at {offset}"
        magic, attributes = struct.unpack_from(">bb", data, pos + 16)
        p = pos + 18 + (8 if magic else 0)
        assert magic in (0, 1)
        key, p = _bytes(data, p)
        value, p = _bytes(data, p)
        assert p == end
        yield offset, magic, attributes, key, value
        pos = end


def _bytes(data: bytes, p: int) -> tuple[bytes | None, int]:
    (length,) = struct.unpack_from(">i", data, p)
    if length < 0:
        return None, p + 4
    return data[p + 4 : p + 4 + length], p + 4 + length


def _decompress(codec: int, data: bytes, magic: int, lz4_frames: list[Lz4Frame] | None) -> bytes:
    if codec == GZIP:
        return gzip.decompress(data)
    if codec == SNAPPY:
        if not data.startswith(XERIAL_MAGIC):
            return bytes(snappy.decompress(data))
        _version, compatible = struct.unpack_from(">ii", data, 8)
        assert compatible == 1
        out, pos = b"", 16
        while pos < len(data):
            (length,) = struct.unpack_from(">i", data, pos)
            out += bytes(snappy.decompress(data[pos + 4 : pos + 4 + length]))
            pos += 4 + length
        return out
    assert codec == LZ4
    return _lz4(data, magic, lz4_frames)


def _lz4(data: bytes, magic: int, frames: list[Lz4Frame] | None) -> bytes:
    """Kafka's KafkaLZ4BlockInputStream: version 01, independent blocks only ("Dependent block
    stream is unsupported"); the header checksum checked for magic 1 only. Each block is
    decompressed on its own, which only independent blocks allow."""
    assert data[:4] == LZ4_MAGIC
    flg, bd = data[4], data[5]
    assert flg >> 6 == 0b01, "frame version 01"
    assert flg & 0x20, "Dependent block stream is unsupported"
    pos = 6 + (8 if flg & 0x08 else 0)
    checksum = data[pos]
    if frames is not None:
        frames.append(Lz4Frame(flg, bd, checksum))
    if magic == 1 and data[4:6] == b"\x60\x40":
        assert checksum == LZ4_HEADER[6], "magic 1 frames have the correct header checksum"
    pos += 1
    block_max = 1 << (8 + 2 * ((bd >> 4) & 0x07))
    out = bytearray()
    while True:
        (size,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if size == 0:
            break
        raw = data[pos : pos + (size & 0x7FFFFFFF)]
        pos += size & 0x7FFFFFFF
        if size & 0x80000000:
            out += raw
        else:
            out += lz4.block.decompress(raw, uncompressed_size=block_max)
        if flg & 0x10:
            pos += 4  # block checksum
    if flg & 0x04:
        pos += 4  # content checksum
    assert pos == len(data), "nothing follows the frame"
    return bytes(out)
