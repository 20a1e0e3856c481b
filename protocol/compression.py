"""The compression codecs a wrapper message may use (attribute bits 0-2).

End-to-end batch compression (seed 002): the producer compresses a whole inner message set, the
broker stores it as it came, and only the consumer decompresses. Each decompressor takes a limit so
that a small hostile payload cannot expand into gigabytes ("nothing lost on bad input" includes the
broker's memory).

Formats on the wire, as Kafka's own producers and readers use them:

- gzip: RFC 1952.
- snappy: written in the xerial stream framing Kafka's Java producer writes (the 8 bytes
  ``\\x82SNAPPY\\x00``, big-endian int32 version 1 and compatible version 1, then blocks of at most
  32 KiB, each a big-endian int32 length and a raw snappy block). Read in that framing and as one
  raw block (a varint of the uncompressed length, then the block), as Kafka's reader does.
- zstd (record batches only: Kafka's KIP-110 allows it from message format v2 on, so ``Codec``,
  the codecs of v0/v1 message sets, does not list it and ``BatchCodec`` does): one or more
  Zstandard frames, written as one frame at zstd's default level 3 (Kafka's default).
- lz4: one LZ4 frame of independent 64 KiB blocks (FLG ``0x60``, BD ``0x40``), the only kind
  Kafka's reader accepts ("Dependent block stream is unsupported"). Inside magic 0 wrappers the
  frame's header checksum is the one Kafka 0.8/0.9 wrote (KAFKA-3160: xxHash32 over the magic
  number too), and either checksum is read; magic 1 uses and requires the correct one.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from enum import IntEnum
from typing import TypeVar

import lz4.frame
import snappy
import zstandard

from protocol.errors import MessageFormatError

DEFAULT_MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024


class Codec(IntEnum):
    """The codecs of message sets (formats v0 and v1)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3

    @classmethod
    def parse(cls, name: str | int | Codec) -> Codec:
        """Accept ``"lz4"``, ``3`` or ``Codec.LZ4``; raise ValueError naming the choices."""
        return _parse(cls, name)


class BatchCodec(IntEnum):
    """The codecs of record batches (format v2): ``Codec``'s, same numbers, and zstd."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, name: str | int | BatchCodec) -> BatchCodec:
        """Accept ``"zstd"``, ``4`` or ``BatchCodec.ZSTD``; raise ValueError naming the choices."""
        return _parse(cls, name)


_E = TypeVar("_E", Codec, BatchCodec)


def _parse(cls: type[_E], name: str | int | IntEnum) -> _E:
    if isinstance(name, cls):
        return name
    if isinstance(name, int):
        return cls(name)
    try:
        return cls[str(name).strip().upper()]
    except KeyError:
        choices = ", ".join(c.name.lower() for c in cls)
        raise ValueError(f"unknown compression {name!r}; choose one of {choices}") from None


class PayloadError(ValueError):
    """A compressed payload breaks its format: the message says how."""


def _gzip_compress(data: bytes, magic: int) -> bytes:
    # Level 1: ~3x faster than the default 6 for a few percent in size on message batches.
    return zlib.compress(data, 1, wbits=31)


def _gzip_decompress(data: bytes, limit: int, magic: int) -> bytes:
    d = zlib.decompressobj(wbits=31)
    out = d.decompress(data, limit)
    if not d.eof:
        if d.unconsumed_tail or len(out) >= limit:
            raise PayloadError(f"gzip payload expands beyond {limit} bytes")
        raise PayloadError("gzip payload is truncated")
    if d.unused_data:
        raise PayloadError(f"{len(d.unused_data)} bytes follow the gzip stream")
    return out


# --- snappy ---------------------------------------------------------------------------------

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_VERSION = 1  # both the version and the compatible version Kafka's producers write
XERIAL_BLOCK_BYTES = 32 * 1024  # snappy-java's default block size
_XERIAL_HEADER = struct.Struct(">8sii")
_INT32 = struct.Struct(">i")


def _snappy_compress(data: bytes, magic: int) -> bytes:
    """The xerial framing: header, then each block of the input as length + raw block."""
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, XERIAL_VERSION, XERIAL_VERSION)]
    view = memoryview(data)
    for start in range(0, len(data), XERIAL_BLOCK_BYTES):
        block = bytes(snappy.compress(view[start : start + XERIAL_BLOCK_BYTES]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes, limit: int, magic: int) -> bytes:
    """Xerial-framed or one raw block, told apart by the framing's magic bytes (as snappy-java
    tells them)."""
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_block(data, limit)
    if len(data) < _XERIAL_HEADER.size:
        raise PayloadError("xerial snappy header is truncated")
    _, _version, compatible = _XERIAL_HEADER.unpack_from(data)
    if compatible != XERIAL_VERSION:
        raise PayloadError(f"xerial snappy compatible version {compatible} is not 1")
    out: list[bytes] = []
    total = 0
    pos = _XERIAL_HEADER.size
    while pos < len(data):
        if pos + 4 > len(data):
            raise PayloadError(f"xerial snappy block length at byte {pos} is truncated")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise PayloadError(f"xerial snappy block of {length} bytes at byte {pos} is truncated")
        block = _snappy_block(data[pos : pos + length], limit - total)
        total += len(block)
        out.append(block)
        pos += length
    return b"".join(out)


def _snappy_length(data: bytes) -> int:
    """The uncompressed length varint that opens a raw snappy block."""
    result = shift = 0
    for i, byte in enumerate(data[:5]):
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result
        shift += 7
        if i == 4:
            break
    raise PayloadError("snappy block has no valid length header")


def _snappy_block(data: bytes, limit: int) -> bytes:
    if _snappy_length(data) > limit:
        raise PayloadError(f"snappy payload expands beyond {limit} bytes")
    return bytes(snappy.decompress(data))


# --- lz4 ------------------------------------------------------------------------------------

LZ4_MAGIC = b"\x04\x22\x4d\x18"
LZ4_FLG_BLOCK_INDEPENDENCE = 0x20  # Kafka's readers refuse frames without it
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_DICT_ID = 0x01
_LZ4_HC_POSITION = 6  # of the header checksum, in the frames written here (no optional fields)


def _lz4_compress(data: bytes, magic: int) -> bytes:
    frame = lz4.frame.compress(
        data,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        store_size=False,
        return_bytearray=magic == 0,
    )
    if magic == 0:
        frame[_LZ4_HC_POSITION] = lz4_header_checksum(frame[:_LZ4_HC_POSITION])  # KAFKA-3160
    return bytes(frame)


def _lz4_decompress(data: bytes, limit: int, magic: int) -> bytes:
    if magic == 0:
        data = _with_correct_checksum(data)
    d = lz4.frame.LZ4FrameDecompressor()
    out = d.decompress(data, max_length=limit)
    if not d.eof:
        if len(out) >= limit:
            raise PayloadError(f"lz4 payload expands beyond {limit} bytes")
        raise PayloadError("lz4 payload is truncated")
    if d.unused_data:
        raise PayloadError(f"{len(d.unused_data)} bytes follow the lz4 frame")
    return bytes(out)


def _with_correct_checksum(frame: bytes) -> bytes:
    """A magic 0 frame with the header checksum KAFKA-3160 describes (computed over the magic
    number too) given the correct one instead, for the frame reader; other frames unchanged."""
    if len(frame) <= _LZ4_HC_POSITION or not frame.startswith(LZ4_MAGIC):
        return frame  # the frame reader names what is wrong
    flg = frame[4]
    at = _LZ4_HC_POSITION + (8 if flg & _LZ4_FLG_CONTENT_SIZE else 0)
    at += 4 if flg & _LZ4_FLG_DICT_ID else 0
    if len(frame) <= at or frame[at] != lz4_header_checksum(frame[:at]):  # KAFKA-3160's?
        return frame
    return frame[:at] + bytes((lz4_header_checksum(frame[4:at]),)) + frame[at + 1 :]


def lz4_header_checksum(data: bytes | bytearray) -> int:
    """Byte 1 of xxHash32 (seed 0) over ``data``: the LZ4 frame header checksum over FLG..the
    last optional field, or the one Kafka 0.8/0.9 wrote (KAFKA-3160) over the magic number too,
    that is over the header from its first byte."""
    return (xxh32(data) >> 8) & 0xFF


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes | bytearray, seed: int = 0) -> int:
    """xxHash32, for the few bytes of an LZ4 frame header (the frame library does not expose
    it)."""
    n = len(data)
    p = 0
    if n >= 16:
        lanes = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed, (seed - _P1) & _M32]
        while p + 16 <= n:
            for i in range(4):
                word = int.from_bytes(data[p + 4 * i : p + 4 * i + 4], "little")
                lanes[i] = _rotl((lanes[i] + word * _P2) & _M32, 13) * _P1 & _M32
            p += 16
        h = _rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)
    else:
        h = seed + _P5
    h = (h + n) & _M32
    while p + 4 <= n:
        h = _rotl((h + int.from_bytes(data[p : p + 4], "little") * _P3) & _M32, 17) * _P4 & _M32
        p += 4
    while p < n:
        h = _rotl((h + data[p] * _P5) & _M32, 11) * _P1 & _M32
        p += 1
    h = ((h ^ (h >> 15)) * _P2) & _M32
    h = ((h ^ (h >> 13)) * _P3) & _M32
    return h ^ (h >> 16)


# --- zstd -----------------------------------------------------------------------------------

ZSTD_LEVEL = 3  # zstd's default, and Kafka's (compression.zstd.level)
_ZSTD_COMPRESSOR = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
_ZSTD_DECOMPRESSOR = zstandard.ZstdDecompressor()


def _zstd_compress(data: bytes, magic: int) -> bytes:
    return _ZSTD_COMPRESSOR.compress(data)


def _zstd_decompress(data: bytes, limit: int, magic: int) -> bytes:
    """A frame that states its size (ours do) is checked against the limit first and read to
    its end, trailing bytes refused; one that does not (a streaming writer's) is read into at
    most ``limit`` bytes."""
    size = zstandard.frame_content_size(data)
    if size > limit:
        raise PayloadError(f"zstd payload expands beyond {limit} bytes")
    if size < 0:
        return _ZSTD_DECOMPRESSOR.decompress(data, max_output_size=limit)
    d = _ZSTD_DECOMPRESSOR.decompressobj()
    out = d.decompress(data)
    if not d.eof:
        raise PayloadError("zstd payload is truncated")
    if d.unused_data:
        raise PayloadError(f"{len(d.unused_data)} bytes follow the zstd frame")
    return out


# --- the codec table --------------------------------------------------------------------------

# keyed by the codec's number, so that a Codec and a BatchCodec find the same entry
_COMPRESS: dict[int, Callable[[bytes, int], bytes]] = {
    BatchCodec.GZIP: _gzip_compress,
    BatchCodec.SNAPPY: _snappy_compress,
    BatchCodec.LZ4: _lz4_compress,
    BatchCodec.ZSTD: _zstd_compress,
}
_DECOMPRESS: dict[int, Callable[[bytes, int, int], bytes]] = {
    BatchCodec.GZIP: _gzip_decompress,
    BatchCodec.SNAPPY: _snappy_decompress,
    BatchCodec.LZ4: _lz4_decompress,
    BatchCodec.ZSTD: _zstd_decompress,
}


def compress(codec: Codec | BatchCodec, data: bytes, *, magic: int = 1) -> bytes:
    """The payload of a wrapper of ``magic`` (it decides the lz4 header checksum), or with
    ``magic=2`` the records section of a record batch."""
    if codec == 0:
        return data
    return _COMPRESS[codec](data, magic)


def decompress(
    codec: Codec | BatchCodec,
    data: bytes,
    *,
    limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    offset: int | None = None,
    position: int = 0,
    magic: int = 1,
) -> bytes:
    """Decompress one wrapper's payload (or a record batch's records); any failure is a
    MessageFormatError naming the codec, why (or at least the library's exception type) and
    where."""
    if codec == 0:
        return data
    try:
        return _DECOMPRESS[codec](data, limit, magic)
    except MessageFormatError:
        raise
    except Exception as exc:  # each library raises its own types; all mean "bad payload"
        raise MessageFormatError(
            f"cannot decompress {codec.name.lower()} payload: {_reason(exc)}",
            offset=offset,
            position=position,
        ) from None


def _reason(exc: Exception) -> str:
    """Our own errors say what is wrong; a library's may say nothing (python-snappy's), so its
    type is named too."""
    text = str(exc)
    if isinstance(exc, PayloadError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
