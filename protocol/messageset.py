"""The message-set codec: message formats v1 and v0 (read and write), seed 000 section 5.4.

One log entry, big-endian, exactly as stored on disk and sent on the wire::

    offset          int64
    size            int32   bytes that follow: 4 + 1 + 1 (+ 8 if magic > 0) + 4 + K + 4 + V
    crc             uint32  CRC32 of everything from magic to the end of the value
    magic           int8    0 or 1
    attributes      int8    bits 0-2 codec, bit 3 timestamp type (v1 only)
    timestamp       int64   only when magic > 0
    key length      int32   -1 for a null key
    key             K bytes
    value length    int32   -1 for a null value
    value           V bytes

A compressed *wrapper* is one entry whose value is a whole inner message set, compressed with the
codec in its attributes (protocol.compression gives each codec's framing), and the offset of its
last inner message. Inner offsets depend on the wrapper's magic, as Kafka's readers take them:

- magic 1 (KIP-31): relative, 0..n-1 as a producer writes them; the absolute offset of an inner
  message is ``wrapper.offset - inner[-1].offset + inner.offset``. The broker assigns offsets by
  rewriting only the wrapper's 8-byte offset field (which the CRC does not cover).
- magic 0: absolute, read as stored. The broker assigns them by rewriting every inner offset and
  recompressing, as Kafka's broker does for magic 0.

Readers stop cleanly at a partial trailing entry (a fetch chunk may end mid-message) and report how
many bytes were whole; anything else that is wrong raises ``MessageFormatError`` or
``CorruptMessageError`` with the offset and byte position.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from enum import IntEnum
from functools import lru_cache
from itertools import repeat
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar

from protocol import speedups
from protocol.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, Codec, compress, decompress
from protocol.errors import CorruptMessageError, MessageFormatError

# CRC32 implementation, chosen by measurement on this project's 2-core machine
# (`python -m benchmarks.codec`, its "crc32" line):
#   100-byte buffers: crcmod (C extension) 2.9M calls/s,  zlib.crc32 6.5M calls/s
#   1 MiB buffers:    crcmod (C extension)   482 MB/s,    zlib.crc32 6,158 MB/s
# Same polynomial and results; zlib.crc32 also continues a running CRC, which the encoder uses to
# checksum header and value without concatenating them.
crc32 = zlib.crc32


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


NO_TIMESTAMP = -1
CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08

LOG_OVERHEAD = 12  # offset + size
# size field minimums: crc + magic + attributes + key length + value length (+ timestamp in v1)
MIN_SIZE = {0: 4 + 1 + 1 + 4 + 4, 1: 4 + 1 + 1 + 8 + 4 + 4}
HEADER_V1 = LOG_OVERHEAD + MIN_SIZE[1]  # bytes of an entry besides its key and value

_OFFSET_SIZE = struct.Struct(">qi")
_OFFSET = struct.Struct(">q")
_CRC_MAGIC_ATTR = struct.Struct(">IBb")
# through the value length, correct when the key is null (the common case)
_ENTRY_V1_NULL_KEY = struct.Struct(">qiIbbqii")
_INT32 = struct.Struct(">i")
_CRC = struct.Struct(">I")
_PREFIX = struct.Struct(">qiI")  # offset, size, crc
_BODY_V1 = struct.Struct(">bbqi")  # magic, attributes, timestamp, key length
_BODY_V1_NULL_KEY = struct.Struct(">bbqii")  # ... key length -1, value length


#: a tuple type messages are decoded as (``decode_as``)
_T = TypeVar("_T", bound=tuple[Any, ...])


class Entry(NamedTuple):
    """One stored entry: a plain message, or a compressed wrapper holding an inner set."""

    offset: int
    position: int  # byte position of the entry in the buffer it was read from
    size: int  # the size field: bytes after offset and size
    crc: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def codec(self) -> Codec:
        return Codec(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & TIMESTAMP_TYPE_BIT) >> 3 if self.magic else 0)

    @property
    def end(self) -> int:
        return self.position + LOG_OVERHEAD + self.size


class Message(NamedTuple):
    """One message as a consumer sees it, wrappers already opened."""

    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None


class Record(NamedTuple):
    """What a producer sends (the broker assigns the offset). Any ``(key, value, timestamp)``
    tuple is accepted where a Record is."""

    key: bytes | None
    value: bytes | None
    timestamp: int = NO_TIMESTAMP


# --------------------------------------------------------------------------------------------
# Writing


def encode_message(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    timestamp: int = NO_TIMESTAMP,
    *,
    attributes: int = 0,
    magic: int = 1,
) -> bytes:
    """One entry. ``magic=0`` writes the v0 layout (no timestamp), for tests and old data."""
    klen = -1 if key is None else len(key)
    vlen = -1 if value is None else len(value)
    if magic == 1:
        head = _BODY_V1.pack(1, attributes, timestamp, klen)
    elif magic == 0:
        head = struct.pack(">bbi", 0, attributes, klen)
    else:
        raise ValueError(f"cannot write magic {magic}; only 0 and 1 exist")
    body = b"".join((head, key or b"", _INT32.pack(vlen), value or b""))
    return _PREFIX.pack(offset, len(body) + 4, crc32(body)) + body


def _py_encode_records(
    records: Iterable[tuple[bytes | None, bytes | None, int]],
    *,
    base_offset: int = 0,
    attributes: int = 0,
) -> bytes:
    """An uncompressed v1 message set from ``(key, value, timestamp)`` triples.

    The hot path of the producer. A null-keyed message with a value -- the common case -- is one
    pack of its whole header and one CRC continuing from the CRC of the header's covered part,
    which is computed again only when the timestamp or the value length changes (a batch is
    filled in a few milliseconds, and log-like values often share a length).
    """
    parts: list[bytes] = []
    append = parts.append
    body_pack = _BODY_V1.pack
    null_key_pack = _BODY_V1_NULL_KEY.pack
    entry_pack = _ENTRY_V1_NULL_KEY.pack
    prefix_pack = _PREFIX.pack
    int_pack = _INT32.pack
    offset = base_offset
    last_timestamp = last_vlen = head_crc = -1
    for key, value, timestamp in records:
        if key is None and value is not None:
            vlen = len(value)
            if timestamp != last_timestamp or vlen != last_vlen:
                last_timestamp, last_vlen = timestamp, vlen
                head_crc = crc32(null_key_pack(1, attributes, timestamp, -1, vlen))
            append(entry_pack(offset, 22 + vlen, crc32(value, head_crc), 1, attributes,
                              timestamp, -1, vlen))
            append(value)
        else:
            head = body_pack(1, attributes, timestamp, -1 if key is None else len(key))
            if key is not None:
                head += key
            tail = b"\xff\xff\xff\xff" if value is None else int_pack(len(value))
            crc = crc32(tail, crc32(head))
            size = 8 + len(head)  # the crc and the value length besides the head
            if value is not None:
                crc = crc32(value, crc)
                size += len(value)
            append(prefix_pack(offset, size, crc))
            append(head)
            append(tail)
            if value is not None:
                append(value)
        offset += 1
    return b"".join(parts)


def encode_message_set(
    records: Sequence[tuple[bytes | None, bytes | None, int]],
    *,
    codec: Codec = Codec.NONE,
    base_offset: int = 0,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    magic: int = 1,
) -> bytes:
    """A v1 message set of ``(key, value, timestamp)`` records; with a codec, one wrapper around
    the whole compressed inner set, whose offset is ``base_offset + n - 1`` and whose timestamp is
    the largest inner timestamp. ``magic=0`` writes v0 (no timestamps; inner offsets absolute)."""
    if not records:
        return b""
    if magic == 0:
        return _encode_v0_message_set(records, codec, base_offset)
    ts_bit = TIMESTAMP_TYPE_BIT if timestamp_type is TimestampType.LOG_APPEND_TIME else 0
    if codec is Codec.NONE:
        return encode_records(records, base_offset=base_offset, attributes=ts_bit)
    inner = encode_records(records, base_offset=0, attributes=ts_bit)
    return encode_message(
        base_offset + len(records) - 1,
        None,
        compress(codec, inner),
        max(r[2] for r in records),
        attributes=int(codec) | ts_bit,
    )


def _encode_v0_message_set(
    records: Sequence[tuple[bytes | None, bytes | None, int]], codec: Codec, base_offset: int
) -> bytes:
    plain = b"".join(
        encode_message(base_offset + i, key, value, magic=0)
        for i, (key, value, _) in enumerate(records)
    )
    if codec is Codec.NONE:
        return plain
    return encode_message(
        base_offset + len(records) - 1,
        None,
        compress(codec, plain, magic=0),
        attributes=int(codec),
        magic=0,
    )


# --------------------------------------------------------------------------------------------
# Reading


def read_entries(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True, base_position: int = 0
) -> tuple[list[Entry], int]:
    """The whole entries at the start of ``buf`` and how many bytes they span.

    Wrappers are returned as they are stored (see ``decode_messages`` to open them). Stops at a
    partial trailing entry. ``base_position`` is added to every reported position (for a buffer
    read from the middle of a file).
    """
    data = buf if isinstance(buf, bytes) else bytes(buf)
    view = memoryview(data)
    n = len(data)
    entries: list[Entry] = []
    append = entries.append
    new = Entry.__new__
    pos = 0
    while pos + LOG_OVERHEAD <= n:
        offset, size = _OFFSET_SIZE.unpack_from(data, pos)
        end = pos + LOG_OVERHEAD + size
        if size < MIN_SIZE[0]:
            raise _below_minimum("entry", size, MIN_SIZE[0], offset, base_position + pos)
        if end > n:
            break  # a partial trailing entry: the caller fetches it again
        crc, magic, attributes = _CRC_MAGIC_ATTR.unpack_from(data, pos + 12)
        # The CRC covers everything from the magic byte on, so it is checked first: a damaged
        # magic, attribute or length byte is reported as the corruption it is.
        if verify_crc and (computed := crc32(view[pos + 16 : end])) != crc:
            raise _crc_mismatch(crc, computed, offset, base_position + pos)
        if magic == 1:
            if size < MIN_SIZE[1]:
                raise _below_minimum("v1 entry", size, MIN_SIZE[1], offset, base_position + pos)
            timestamp, klen = struct.unpack_from(">qi", data, pos + 18)
            p = pos + 30
        elif magic == 0:
            timestamp = NO_TIMESTAMP
            (klen,) = _INT32.unpack_from(data, pos + 18)
            p = pos + 22
        else:
            raise MessageFormatError(
                f"unknown magic {magic}", offset=offset, position=base_position + pos
            )
        if klen < 0:
            key = None
            if klen != -1:
                raise _bad_length("key", klen, offset, base_position + pos)
        else:
            key = data[p : p + klen]
            p += klen
        if p + 4 > end:
            raise _bad_length("key", klen, offset, base_position + pos)
        (vlen,) = _INT32.unpack_from(data, p)
        p += 4
        if vlen < 0:
            value = None
            if vlen != -1:
                raise _bad_length("value", vlen, offset, base_position + pos)
        else:
            value = data[p : p + vlen]
            p += vlen
        if p != end:
            raise _bad_length("value", vlen, offset, base_position + pos)
        if attributes & CODEC_MASK > Codec.LZ4:
            raise _unknown_codec(attributes & CODEC_MASK, offset, base_position + pos)
        append(
            new(Entry, offset, base_position + pos, size, crc, magic, attributes, timestamp, key,
                value)
        )
        pos = end
    return entries, pos


# The errors ``read_entries`` raises, built out of its loop so that the loop stays short.


def _bad_length(what: str, length: int, offset: int, position: int) -> MessageFormatError:
    return MessageFormatError(
        f"{what} length {length} does not fit the entry", offset=offset, position=position
    )


def _below_minimum(
    what: str, size: int, minimum: int, offset: int, position: int
) -> MessageFormatError:
    return MessageFormatError(
        f"{what} size {size} is below the minimum {minimum}", offset=offset, position=position
    )


def _crc_mismatch(stored: int, computed: int, offset: int, position: int) -> CorruptMessageError:
    return CorruptMessageError(
        f"CRC mismatch: stored {stored:#010x}, computed {computed:#010x}",
        offset=offset,
        position=position,
    )


def _unknown_codec(codec: int, offset: int, position: int) -> MessageFormatError:
    return MessageFormatError(
        f"unknown compression codec {codec}", offset=offset, position=position
    )


def open_wrapper(
    entry: Entry, *, verify_crc: bool = True, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> list[Entry]:
    """The inner entries of a compressed wrapper, with absolute offsets."""
    inner = inner_entries(entry, verify_crc=verify_crc, limit=limit)
    if not entry.magic:
        return inner
    shift = entry.offset - inner[-1].offset
    return [e._replace(offset=e.offset + shift) for e in inner]


def inner_entries(
    entry: Entry, *, verify_crc: bool = True, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> list[Entry]:
    """The checked inner entries of a compressed wrapper, their offsets as stored."""
    if entry.value is None:
        raise MessageFormatError(
            "compressed wrapper has a null value", offset=entry.offset, position=entry.position
        )
    raw = decompress(
        entry.codec,
        entry.value,
        limit=limit,
        offset=entry.offset,
        position=entry.position,
        magic=entry.magic,
    )
    try:
        inner, whole = read_entries(raw, verify_crc=verify_crc)
    except MessageFormatError as exc:
        # named by the wrapper's place only: the inner one is in a payload nobody can see
        raise type(exc)(
            f"inside the wrapper: {exc.reason}", offset=entry.offset, position=entry.position
        ) from None
    if whole != len(raw) or not inner:
        raise MessageFormatError(
            "compressed wrapper holds a partial or empty message set",
            offset=entry.offset,
            position=entry.position,
        )
    if any(map(CODEC_MASK.__and__, map(attrgetter("attributes"), inner))):
        raise MessageFormatError(
            "nested compression is not allowed", offset=entry.offset, position=entry.position
        )
    return inner


def _py_decode_plain(
    data: bytes, verify_crc: bool, cls: type[_T], prefix: tuple[Any, ...], suffix: tuple[Any, ...]
) -> tuple[list[_T], int]:
    """Decode plain (uncompressed) v1 messages from the start of ``data``, as far as they go.

    The consumer's hot path: one precompiled unpack per message (it also reads the value length
    when the key is null) and a CRC over a memoryview. Whenever the next entry has the same size
    as the one just read, ``_decode_run`` takes over for the stretch of same-shaped entries.
    Stops at the first entry that is not a whole, valid, plain v1 message -- the general reader
    then takes over and names what is wrong.
    """
    view = memoryview(data)
    n = len(data)
    out: list[_T] = []
    append = out.append
    new = tuple.__new__  # skips NamedTuple's Python-level __new__: a third faster
    unpack = _ENTRY_V1_NULL_KEY.unpack_from
    unpack32 = _INT32.unpack_from
    pos = 0
    while pos + 34 <= n:
        offset, size, crc, magic, attributes, timestamp, klen, vlen = unpack(data, pos)
        end = pos + LOG_OVERHEAD + size
        if (
            magic != 1
            or attributes & CODEC_MASK
            or size < MIN_SIZE[1]
            or end > n
            or (verify_crc and crc32(view[pos + 16 : end]) != crc)
        ):
            break
        if klen == -1:
            key = None
            p = pos + 34
        else:
            if klen < 0 or pos + 34 + klen > end:
                break
            key = data[pos + 30 : pos + 30 + klen]
            p = pos + 30 + klen
            (vlen,) = unpack32(data, p)
            p += 4
        if vlen == -1 and p == end:
            value = None
        elif vlen >= 0 and p + vlen == end:
            value = data[p:end]
        else:
            break
        ts_type = (attributes & TIMESTAMP_TYPE_BIT) >> 3
        append(new(cls, (*prefix, offset, timestamp, ts_type, key, value, *suffix)))
        pos = end
        if value is not None and end + LOG_OVERHEAD <= n and unpack32(data, end + 8)[0] == size:
            run, pos = _decode_run(data, pos, _run_layout(attributes, klen, vlen), verify_crc,
                                   cls, prefix, suffix)
            out.extend(run)
    return out, pos


class _RunLayout(NamedTuple):
    """How entries of one shape (plain v1; attributes, key and value lengths alike) lie."""

    stride: int  # the bytes of one whole entry
    fields: str  # struct format of what differs between them: offset, timestamp, (key,) value
    width: int  # how many fields that is
    shape: tuple[tuple[int, bytes], ...]  # (position in an entry, the byte every one has there)
    ts_type: int


@lru_cache(maxsize=256)
def _run_layout(attributes: int, klen: int, vlen: int) -> _RunLayout:
    if klen == -1:  # offset, [size crc magic attributes] timestamp [key and value length] value
        fields, width = f"q10xq8x{vlen}s", 3
    else:
        fields, width = f"q10xq4x{klen}s4x{vlen}s", 4
    stride = struct.calcsize(">" + fields)
    sample = bytearray(stride)
    _INT32.pack_into(sample, 8, stride - LOG_OVERHEAD)
    sample[16:18] = bytes((1, attributes & 0xFF))  # attributes are signed
    _INT32.pack_into(sample, 26, klen)
    value_length_at = 30 + max(klen, 0)
    _INT32.pack_into(sample, value_length_at, vlen)
    shape_at = (*range(8, 12), 16, 17, *range(26, 30), *range(value_length_at, value_length_at + 4))
    return _RunLayout(
        stride,
        fields,
        width,
        tuple((i, bytes(sample[i : i + 1])) for i in shape_at),
        (attributes & TIMESTAMP_TYPE_BIT) >> 3,
    )


@lru_cache(maxsize=64)
def _fields_of(fields: str, count: int) -> struct.Struct:
    """One struct reading the fields of ``count`` entries as one flat tuple: a tuple per entry
    would double the objects the garbage collector has to look at."""
    return struct.Struct(">" + fields * count)


_RUN_FIRST_CHUNK = 8
_RUN_MAX_CHUNK = 1024


def _decode_run(
    data: bytes,
    pos: int,
    layout: _RunLayout,
    verify_crc: bool,
    cls: type[_T],
    prefix: tuple[Any, ...],
    suffix: tuple[Any, ...],
) -> tuple[list[_T], int]:
    """Decode the stretch of entries at ``pos`` shaped like the one before it (``layout``), as
    far as it goes, and where it ends.

    Entries of one shape sit at a fixed stride, so a whole chunk of them is checked with a few C
    calls over all of it: each byte every entry must share (size, magic, attributes, key and
    value lengths) as one strided slice, and every CRC at once (``_crcs_hold``); then one unpack
    reads the fields that differ, and the result tuples are built from their columns. Every
    check of the one-at-a-time loop is made; the first entry that fails one ends the stretch.
    Chunks start small and double (powers of two, so their structs are reused), so an input
    whose shapes keep changing costs little more than the loop.
    """
    stride = layout.stride
    width = layout.width
    new = tuple.__new__
    constants = tuple(map(repeat, prefix))
    trailing = tuple(map(repeat, suffix))
    out: list[_T] = []
    chunk = _RUN_FIRST_CHUNK
    while (left := (len(data) - pos) // stride) > 0:
        count = min(chunk, 1 << (left.bit_length() - 1))
        end = pos + count * stride
        good = count - max(
            len(data[pos + at : end : stride].lstrip(byte)) for at, byte in layout.shape
        )
        if verify_crc and good and not _crcs_hold(data, pos, good, stride):
            good = _first_bad_crc(data, pos, good, stride)
        if good:
            flat = _fields_of(layout.fields, good).unpack_from(data, pos)
            keys = repeat(None) if width == 3 else flat[2::4]
            out.extend(map(new, repeat(cls, good), zip(
                *constants, flat[0::width], flat[1::width], repeat(layout.ts_type), keys,
                flat[width - 1 :: width], *trailing)))
        pos += good * stride
        if good < count:
            break
        chunk = min(chunk * 2, _RUN_MAX_CHUNK)
    return out, pos


def _crcs_hold(data: bytes, pos: int, count: int, stride: int) -> bool:
    """Whether every one of ``count`` entries at ``pos``, ``stride`` bytes apart, matches its
    stored CRC -- with one CRC pass over them all instead of a call per entry.

    CRC-32 is affine over GF(2), and a message followed by its own CRC (little-endian) leaves the
    CRC register at a value that does not depend on the message. So in a copy of the entries
    with each stored CRC moved to just after the bytes it covers, byte-reversed, and every other
    byte outside the covered spans zeroed (or, as the size is, the same in every entry of the
    run), the CRC of the whole is a constant when every entry matches (``_crcs_residue``). An
    entry that does not changes the result by its own error times a power of x -- never zero
    modulo the polynomial, so any one entry whose CRC fails is caught; two or more cancel only
    when their errors line up exactly (for random damage one chance in 2**32, what a single
    CRC-32 over a whole batch gives). On a mismatch the entries are checked one by one to find
    the first damaged one.
    """
    return crc32(_crc_check_bytes(data, pos, count, stride)) == _crcs_residue(count, stride)


def _crc_check_bytes(data: bytes, pos: int, count: int, stride: int) -> bytearray:
    """The bytes ``_crcs_hold`` takes the CRC of: the entries with their offsets and CRCs
    zeroed, then each CRC written reversed over the four bytes after its entry (the next one's
    offset; four more bytes at the end for the last)."""
    end = pos + count * stride
    out = bytearray(count * stride + 4)
    out[: count * stride] = memoryview(data)[pos:end]
    zeros = bytes(count)
    out[0:4] = b"\0\0\0\0"  # the first entry's; the later ones' are overwritten below
    for at in (4, 5, 6, 7, 12, 13, 14, 15):  # the offset's low half and the CRC
        out[at : count * stride : stride] = zeros
    for i in range(4):
        out[stride + i :: stride] = data[pos + 15 - i : end : stride]
    return out


@lru_cache(maxsize=1024)
def _crcs_residue(count: int, stride: int) -> int:
    """What ``_crcs_hold`` finds for ``count`` good entries of ``stride`` bytes: the result for
    entries of zeros, each with its right CRC (any good ones give the same)."""
    body = stride - 16
    entry = _PREFIX.pack(0, stride - LOG_OVERHEAD, crc32(bytes(body))) + bytes(body)
    return crc32(_crc_check_bytes(entry * count, 0, count, stride))


def _first_bad_crc(data: bytes, pos: int, count: int, stride: int) -> int:
    """Index of the first of ``count`` entries at ``pos`` whose CRC does not match its bytes."""
    view = memoryview(data)
    for i in range(count):
        at = pos + i * stride
        if crc32(view[at + 16 : at + stride]) != _CRC.unpack_from(data, at + 12)[0]:
            return i
    return count


def decode_messages(
    buf: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> tuple[list[Message], int]:
    """Every message in ``buf`` with wrappers opened (absolute offsets), and how many bytes
    were whole. A partial trailing entry is left out; anything malformed raises."""
    return decode_as(Message, (), buf, verify_crc=verify_crc, limit=limit)


def decode_as(
    cls: type[_T],
    prefix: tuple[Any, ...],
    buf: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    suffix: tuple[Any, ...] = (),
) -> tuple[list[_T], int]:
    """``decode_messages``, each message built as ``cls(*prefix, offset, timestamp,
    timestamp_type, key, value, *suffix)`` -- the tuple type a reader hands out (the consumer's
    records, whose ``headers`` come last) made once, as the message is decoded, instead of from
    a ``Message`` afterwards."""
    data = buf if isinstance(buf, bytes) else bytes(buf)
    out, pos = _decode_plain(data, verify_crc, cls, prefix, suffix)
    if pos + LOG_OVERHEAD > len(data):
        return out, pos
    entries, whole = read_entries(memoryview(data)[pos:], verify_crc=verify_crc, base_position=pos)
    new = tuple.__new__
    for e in entries:
        ts_type = (e.attributes & TIMESTAMP_TYPE_BIT) >> 3 if e.magic else 0
        if e.attributes & CODEC_MASK:
            out.extend(
                _open_wrapper_messages(e, ts_type, verify_crc, limit, cls, prefix, suffix)
            )
        else:
            out.append(
                new(cls, (*prefix, e.offset, e.timestamp, ts_type, e.key, e.value, *suffix))
            )
    return out, pos + whole


def _open_wrapper_messages(
    wrapper: Entry,
    ts_type: int,
    verify_crc: bool,
    limit: int,
    cls: type[_T],
    prefix: tuple[Any, ...],
    suffix: tuple[Any, ...],
) -> list[_T]:
    new = tuple.__new__
    if not wrapper.magic:  # v0 messages inside, offsets as stored: the general path reads them
        entries = open_wrapper(wrapper, verify_crc=verify_crc, limit=limit)
        return [
            new(cls, (*prefix, e.offset, e.timestamp, 0, e.key, e.value, *suffix))
            for e in entries
        ]
    raw = decompress(
        wrapper.codec,
        wrapper.value or b"",
        limit=limit,
        offset=wrapper.offset,
        position=wrapper.position,
    )
    inner: list[Message]
    inner, whole = _decode_plain(raw, verify_crc, Message, (), ())
    if whole != len(raw) or not inner:
        # Not a clean set of plain v1 messages: the general path finds and names the problem.
        entries = open_wrapper(wrapper, verify_crc=verify_crc, limit=limit)
        inner = [Message(e.offset, e.timestamp, ts_type, e.key, e.value) for e in entries]
        shift = 0
    else:
        shift = wrapper.offset - inner[-1].offset
    if ts_type:
        # With log-append time the wrapper's timestamp is authoritative for all inside.
        ts = wrapper.timestamp
        return [new(cls, (*prefix, m[0] + shift, ts, 1, m[3], m[4], *suffix)) for m in inner]
    return [new(cls, (*prefix, m[0] + shift, m[1], 0, m[3], m[4], *suffix)) for m in inner]


def count_messages(entry: Entry, *, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> int:
    """How many offsets an entry occupies: 1, or the size of a wrapper's inner set."""
    if not entry.attributes & CODEC_MASK:
        return 1
    return len(inner_entries(entry, limit=limit))  # checked, but not renumbered


def set_offset(buf: bytearray | memoryview, position: int, offset: int) -> None:
    """Rewrite one entry's offset in place; the CRC does not cover it."""
    _OFFSET.pack_into(buf, position, offset)


# The producer's and the consumer's hot paths: the C accelerator's when it is built (the same
# bytes and records for every input; protocol.speedups chooses, once), else the Python above.
if speedups.native is None:
    encode_records = _py_encode_records
    _decode_plain = _py_decode_plain
else:
    speedups.native.set_encode_fallback(_py_encode_records)
    encode_records = speedups.native.encode_records
    _decode_plain = speedups.native.decode_plain
