"""Record batches: Kafka's message format v2 (magic 2), read and written, sans IO.

One batch, big-endian, exactly as stored on disk and sent on the wire::

    baseOffset            int64   offset of the first record (the broker assigns it)
    batchLength           int32   bytes that follow: 49 + the records section
    partitionLeaderEpoch  int32   the leader's epoch when it was written (the broker sets it)
    magic                 int8    2
    crc                   uint32  CRC-32C of every byte from attributes to the end
    attributes            int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
    lastOffsetDelta       int32   offset of the last record minus baseOffset
    baseTimestamp         int64   timestamp of the first record
    maxTimestamp          int64   largest timestamp (LogAppendTime: the broker's clock)
    producerId            int64   -1 unless idempotent or transactional
    producerEpoch         int16   -1 likewise
    baseSequence          int32   sequence number of the first record, -1 likewise
    recordsCount          int32
    records                       compressed as one stream when the codec is not 0

Each record (all of it zigzag varints, as protocol buffers' sint32/sint64, but attributes)::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint (-1: null), key, valueLength varint (-1: null), value,
    headersCount varint, then per header: keyLength varint, key (UTF-8),
    valueLength varint (-1: null), value

The CRC does not cover baseOffset, batchLength, partitionLeaderEpoch or magic, so the broker
sets the first and third without recomputing it; setting maxTimestamp and the timestamp type
(LogAppendTime) does recompute it, over the header only: the records are never re-encoded
(``with_base_offset`` and its siblings).

Records are parsed by the C accelerator where it is built (protocol.speedups), which gives the
same records as the Python code here or hands anything it does not take back to it.

Readers stop cleanly at a partial trailing batch (a fetch chunk may end mid-batch), as
protocol.messageset's do; anything else that is wrong raises ``MessageFormatError`` (or, for a
CRC that does not match, ``CorruptMessageError``) with the base offset and byte position of the
batch and, for a record, which one and where.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from enum import IntEnum
from typing import Any, NamedTuple, TypeVar

import google_crc32c

from protocol import speedups
from protocol.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, BatchCodec, compress, decompress
from protocol.errors import CorruptMessageError, MessageFormatError
from protocol.messageset import NO_TIMESTAMP, TimestampType

_T = TypeVar("_T", bound=tuple[Any, ...])

MAGIC = 2
LOG_OVERHEAD = 12  # baseOffset + batchLength, the bytes batchLength does not count
HEADER_BYTES = 61  # the whole batch header, records count included
MIN_BATCH_LENGTH = HEADER_BYTES - LOG_OVERHEAD  # batchLength of a batch without records

# where each field of the header starts
BASE_OFFSET_AT = 0
BATCH_LENGTH_AT = 8
PARTITION_LEADER_EPOCH_AT = 12
MAGIC_AT = 16  # the same place in every format: the byte to tell them apart by
CRC_AT = 17
ATTRIBUTES_AT = 21  # the CRC covers from here to the end
LAST_OFFSET_DELTA_AT = 23
BASE_TIMESTAMP_AT = 27
MAX_TIMESTAMP_AT = 35
PRODUCER_ID_AT = 43
PRODUCER_EPOCH_AT = 51
BASE_SEQUENCE_AT = 53
RECORDS_COUNT_AT = 57
RECORDS_AT = HEADER_BYTES

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_COVERED = struct.Struct(">hiqqqhii")  # attributes .. records count: the header's CRC'd part
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
assert _HEADER.size == HEADER_BYTES

_MAX_CODEC = max(BatchCodec)
#: fewest bytes one record can take besides its length: attributes, and one byte each for
#: timestampDelta, offsetDelta, keyLength, valueLength and headersCount
_MIN_RECORD_BODY = 6


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli), the checksum of record batches, in C (google-crc32c; it takes
    ``bytes`` only, so anything else is copied first)."""
    return int(google_crc32c.value(data if isinstance(data, bytes) else bytes(data)))


class ControlRecordType(IntEnum):
    """The key of a control batch's one record says which (Kafka's ControlRecordType)."""

    ABORT = 0
    COMMIT = 1


Header = tuple[str, bytes | None]


class BatchHeader(NamedTuple):
    """The 61-byte header of one batch, and where it was read."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    position: int = 0  # byte position of the batch in the buffer it was read from

    @property
    def codec(self) -> BatchCodec:
        return BatchCodec(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & TIMESTAMP_TYPE_BIT) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        """The sequence number of the last record; sequences wrap from 2**31 - 1 to 0."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)

    @property
    def size(self) -> int:
        """Bytes of the whole batch."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def end(self) -> int:
        return self.position + self.size


class Record(NamedTuple):
    """What a producer sends. Any ``(key, value, timestamp)`` or ``(key, value, timestamp,
    headers)`` tuple is accepted where a Record is."""

    key: bytes | None
    value: bytes | None
    timestamp: int = NO_TIMESTAMP
    headers: tuple[Header, ...] = ()


class BatchRecord(NamedTuple):
    """One record as a reader sees it: absolute offset, and the batch's timestamp where the
    batch has LogAppendTime."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


class RecordBatch(NamedTuple):
    header: BatchHeader
    records: list[BatchRecord]


# --------------------------------------------------------------------------------------------
# Varints: zigzag (sint32/sint64 of protocol buffers), at most 5 bytes for an int32 and 10 for
# an int64, as Kafka's ByteUtils reads them.

_VARINT_TABLE_SIZE = 1 << 14  # every value of one or two bytes


def _uvarint_slow(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


_UVARINTS = [_uvarint_slow(u) for u in range(_VARINT_TABLE_SIZE)]


def encode_varint(n: int) -> bytes:
    """``n`` zigzag-encoded as a varint (int32 and int64 alike)."""
    u = (n << 1) ^ (n >> 63)
    return _UVARINTS[u] if 0 <= u < _VARINT_TABLE_SIZE else _uvarint_slow(u)


class _Malformed(Exception):
    """Something in a record is wrong: the message says what (the caller adds where)."""


def decode_varint(data: bytes, pos: int, end: int, *, long: bool = False) -> tuple[int, int]:
    """The zigzag varint at ``pos`` (not reading at or past ``end``) and the position after
    it. Raises MessageFormatError when it runs past ``end``, is longer than 5 bytes (10 with
    ``long``) or does not fit an int32 (int64)."""
    try:
        return _varint(data, pos, end, 10 if long else 5)
    except _Malformed as exc:
        raise MessageFormatError(str(exc), position=pos) from None


def _varint(data: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    result = shift = 0
    for p in range(pos, min(pos + max_bytes, end)):
        byte = data[p]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if result >> (32 if max_bytes == 5 else 64):
                kind = "int32" if max_bytes == 5 else "int64"
                raise _Malformed(f"a varint does not fit an {kind}")
            return (result >> 1) ^ -(result & 1), p + 1
        shift += 7
    if pos + max_bytes <= end:
        raise _Malformed(f"a varint is longer than {max_bytes} bytes")
    raise _Malformed("a varint runs past the end of the record")


# --------------------------------------------------------------------------------------------
# Writing


def _py_encode_records(
    records: Iterable[Sequence[Any]], base_timestamp: int
) -> tuple[bytes, int, int]:
    """The records section (uncompressed) of ``(key, value, timestamp[, headers])`` records
    numbered 0..n-1, with how many there are and their largest timestamp."""
    parts: list[bytes] = []
    append = parts.append
    uvarints = _UVARINTS
    table = _VARINT_TABLE_SIZE
    max_timestamp = NO_TIMESTAMP
    delta = 0
    for record in records:
        key, value, timestamp = record[0], record[1], record[2]
        headers = record[3] if len(record) > 3 else ()
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        u = ((timestamp - base_timestamp) << 1) ^ ((timestamp - base_timestamp) >> 63)
        body = [
            b"\x00",
            uvarints[u] if 0 <= u < table else _uvarint_slow(u),
            uvarints[delta << 1] if delta < table >> 1 else _uvarint_slow(delta << 1),
        ]
        if key is None:
            body.append(b"\x01")
        else:
            body.append(encode_varint(len(key)))
            body.append(key)
        if value is None:
            body.append(b"\x01")
        else:
            body.append(encode_varint(len(value)))
            body.append(value)
        if headers:
            body.append(encode_varint(len(headers)))
            for name, content in headers:
                raw = name.encode("utf-8", "surrogateescape")
                body.append(encode_varint(len(raw)))
                body.append(raw)
                if content is None:
                    body.append(b"\x01")
                else:
                    body.append(encode_varint(len(content)))
                    body.append(content)
        else:
            body.append(b"\x00")
        joined = b"".join(body)
        append(encode_varint(len(joined)))
        append(joined)
        delta += 1
    return b"".join(parts), delta, max_timestamp


def _native_encode_records(
    records: Iterable[Sequence[Any]], base_timestamp: int
) -> tuple[bytes, int, int]:
    """``_py_encode_records`` through the C accelerator: the same bytes, or None for records it
    does not take (then the Python code runs)."""
    assert _encode_records_v2 is not None
    out = _encode_records_v2(records, base_timestamp)
    return _py_encode_records(records, base_timestamp) if out is None else out


# The C accelerator's encoder where it is built (protocol.speedups chooses, once; an older build
# without it counts as none), else the Python above.
_encode_records_v2: Callable[..., tuple[bytes, int, int] | None] | None = getattr(
    speedups.native, "encode_records_v2", None
)
encode_records = _py_encode_records if _encode_records_v2 is None else _native_encode_records


def encode_batch(
    records: Sequence[Sequence[Any]],
    *,
    base_offset: int = 0,
    codec: BatchCodec = BatchCodec.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytes:
    """One batch of ``(key, value, timestamp[, headers])`` records, offsets
    ``base_offset``..``base_offset + n - 1``; the base timestamp is the first record's, the
    max timestamp the largest. A batch holds at least one record."""
    if not records:
        raise ValueError("a record batch holds at least one record")
    base_timestamp = records[0][2]
    raw, count, max_timestamp = encode_records(records, base_timestamp)
    attributes = (
        int(codec)
        | (TIMESTAMP_TYPE_BIT if timestamp_type is TimestampType.LOG_APPEND_TIME else 0)
        | (TRANSACTIONAL_BIT if is_transactional else 0)
        | (CONTROL_BIT if is_control else 0)
    )
    section = compress(codec, raw, magic=MAGIC)
    covered = _COVERED.pack(attributes, count - 1, base_timestamp, max_timestamp, producer_id,
                            producer_epoch, base_sequence, count)
    crc = google_crc32c.extend(google_crc32c.value(covered), section)
    head = struct.pack(">qiibI", base_offset, MIN_BATCH_LENGTH + len(section),
                       partition_leader_epoch, MAGIC, crc)
    return b"".join((head, covered, section))


def encode_retained(header: BatchHeader, records: Sequence[BatchRecord]) -> bytes:
    """The batch ``header`` heads, holding only ``records`` (some of its own): what compaction
    writes, as Kafka's cleaner does. The base offset, lastOffsetDelta, producer id and epoch,
    base sequence, partition leader epoch and attributes (codec, timestamp type) are kept, so
    the batch spans the same offsets and the producer's last sequence stays; each record keeps
    its offset; the base timestamp becomes the first record's and the max timestamp the largest
    (with LogAppendTime, the batch's). No records: the header alone, uncompressed, both
    timestamps the batch's max (Kafka's empty batch)."""
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_BIT)
    if records:
        base_timestamp = records[0].timestamp
        max_timestamp = (header.max_timestamp if log_append_time
                         else max(r.timestamp for r in records))
        raw = b"".join(
            _encode_record(r.offset - header.base_offset, r.timestamp - base_timestamp, r.key,
                           r.value, r.headers)
            for r in records
        )
        attributes = header.attributes
        section = compress(header.codec, raw, magic=MAGIC)
    else:
        base_timestamp = max_timestamp = header.max_timestamp
        attributes = header.attributes & ~CODEC_MASK
        section = b""
    covered = _COVERED.pack(attributes, header.last_offset_delta, base_timestamp, max_timestamp,
                            header.producer_id, header.producer_epoch, header.base_sequence,
                            len(records))
    crc = google_crc32c.extend(google_crc32c.value(covered), section)
    head = struct.pack(">qiibI", header.base_offset, MIN_BATCH_LENGTH + len(section),
                       header.partition_leader_epoch, MAGIC, crc)
    return b"".join((head, covered, section))


def _encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None,
                   value: bytes | None, headers: Sequence[Header]) -> bytes:
    """One record, with its length, at any offset delta."""
    body = [b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta)]
    for field in (key, value):
        body += (b"\x01",) if field is None else (encode_varint(len(field)), field)
    body.append(encode_varint(len(headers)))
    for name, content in headers:
        raw = name.encode("utf-8", "surrogateescape")
        body += (encode_varint(len(raw)), raw)
        body += (b"\x01",) if content is None else (encode_varint(len(content)), content)
    joined = b"".join(body)
    return encode_varint(len(joined)) + joined


# --------------------------------------------------------------------------------------------
# Reading


def peek_magic(buf: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """The magic byte of the entry or batch at ``pos`` (every format has it at byte 16), or
    None when the buffer ends before it: which reader takes it from here."""
    return buf[pos + MAGIC_AT] if pos + MAGIC_AT < len(buf) else None


def read_batch_header(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, base_position: int = 0
) -> BatchHeader | None:
    """The header of the batch at ``pos``, without reading its records or checking its CRC;
    None when the buffer ends before the header does. Raises MessageFormatError for a header
    no batch can have (magic not 2, batchLength below the minimum, unknown codec, negative
    record count). Whether the whole batch is in ``buf``: ``header.end <= len(buf)``."""
    header = _frame_at(buf, pos, base_position)
    if header is not None:
        _check_fields(header)
    return header


def _frame_at(
    buf: bytes | bytearray | memoryview, pos: int, base_position: int
) -> BatchHeader | None:
    """The header at ``pos`` with what the CRC does not cover checked (magic, batchLength)."""
    if pos + HEADER_BYTES > len(buf):
        return None
    h = BatchHeader._make((*_HEADER.unpack_from(buf, pos), base_position + pos))
    if h.magic != MAGIC:
        raise MessageFormatError(
            f"magic {h.magic} is not a record batch's (2)", offset=h.base_offset,
            position=h.position,
        )
    if h.batch_length < MIN_BATCH_LENGTH:
        raise MessageFormatError(
            f"batchLength {h.batch_length} is below the minimum {MIN_BATCH_LENGTH}",
            offset=h.base_offset, position=h.position,
        )
    return h


def _check_fields(h: BatchHeader) -> None:
    """What the CRC covers: checked after the CRC, so that damage is reported as such."""
    if h.attributes & CODEC_MASK > _MAX_CODEC:
        raise MessageFormatError(
            f"unknown compression codec {h.attributes & CODEC_MASK}", offset=h.base_offset,
            position=h.position,
        )
    if h.record_count < 0:
        raise MessageFormatError(
            f"record count {h.record_count} is negative", offset=h.base_offset,
            position=h.position,
        )
    # Compaction leaves fewer records than offsets (lastOffsetDelta is kept): fewer is fine,
    # more cannot be. A produced batch must fill its range (broker.log.batch_validation).
    if h.record_count > h.last_offset_delta + 1:
        raise MessageFormatError(
            f"lastOffsetDelta {h.last_offset_delta} leaves no room for the record count "
            f"{h.record_count} (it should be {h.record_count - 1} at least)",
            offset=h.base_offset, position=h.position,
        )


def check_crc(buf: bytes | bytearray | memoryview, header: BatchHeader, pos: int) -> None:
    """Raise CorruptMessageError unless the batch at ``pos`` (whole in ``buf``) matches its
    stored CRC-32C."""
    computed = crc32c(buf[pos + ATTRIBUTES_AT : pos + header.size])
    if computed != header.crc:
        raise CorruptMessageError(
            f"CRC-32C mismatch: stored {header.crc:#010x}, computed {computed:#010x}",
            offset=header.base_offset, position=header.position,
        )


def check_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = True
) -> BatchHeader | None:
    """The header of the batch at ``pos`` with everything but its records checked, the CRC
    first (damage is reported as such); None when the batch is not whole in ``buf``."""
    header = _frame_at(buf, pos, 0)
    if header is None or pos + header.size > len(buf):
        return None
    if verify_crc:
        check_crc(buf, header, pos)
    _check_fields(header)
    return header


def scan_batches(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True, base_position: int = 0
) -> tuple[list[BatchHeader], int]:
    """The headers of the whole batches at the start of ``buf`` (CRCs checked, records not
    read) and how many bytes they span; stops at a partial trailing batch. For recovery and
    indexes, which need offsets and positions, not records."""
    headers: list[BatchHeader] = []
    pos = 0
    n = len(buf)
    while (header := _frame_at(buf, pos, base_position)) is not None:
        if pos + header.size > n:
            break
        if verify_crc:
            check_crc(buf, header, pos)
        _check_fields(header)
        headers.append(header)
        pos += header.size
    return headers, pos


def decode_batches(
    buf: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    base_position: int = 0,
) -> Iterator[RecordBatch]:
    """Each whole batch in ``buf`` with its records, one at a time (a batch's records are
    decoded when it is reached), checked as Kafka's LogValidator checks a produced batch. Stops
    at a partial trailing batch: the last batch's ``header.end`` is how many bytes were whole
    (0 if none)."""
    data = buf if isinstance(buf, bytes) else bytes(buf)
    pos = 0
    while (header := _frame_at(data, pos, base_position)) is not None:
        if pos + header.size > len(data):
            return
        if verify_crc:
            check_crc(data, header, pos)
        _check_fields(header)
        yield RecordBatch(header, _records_at(data, pos, header, limit, BatchRecord, (), None))
        pos += header.size


def decode_records(
    buf: bytes | bytearray | memoryview,
    header: BatchHeader,
    pos: int = 0,
    *,
    limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> list[BatchRecord]:
    """The records of the batch at ``pos`` whose header was read (``read_batch_header``; its
    CRC is not checked again here)."""
    data = buf if isinstance(buf, bytes) else bytes(buf)
    if pos + header.size > len(data):
        raise MessageFormatError(
            f"the batch needs {header.size} bytes, {len(data) - pos} are there",
            offset=header.base_offset, position=header.position,
        )
    return _records_at(data, pos, header, limit, BatchRecord, (), None)


def decode_records_as(
    cls: type[_T],
    prefix: tuple[Any, ...],
    buf: bytes | bytearray | memoryview,
    header: BatchHeader,
    pos: int = 0,
    *,
    limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> list[_T]:
    """``decode_records``, each record built as ``cls(*prefix, offset, timestamp,
    timestamp_type, key, value, headers)`` (the batch's timestamp type) -- the tuple type a
    reader hands out (the consumer's records) made once, as the record is parsed, instead of
    from a ``BatchRecord`` afterwards."""
    data = buf if isinstance(buf, bytes) else bytes(buf)
    if pos + header.size > len(data):
        raise MessageFormatError(
            f"the batch needs {header.size} bytes, {len(data) - pos} are there",
            offset=header.base_offset, position=header.position,
        )
    ts_type = 1 if header.attributes & TIMESTAMP_TYPE_BIT else 0
    return _records_at(data, pos, header, limit, cls, prefix, ts_type)


def _records_at(
    data: bytes,
    pos: int,
    header: BatchHeader,
    limit: int,
    cls: type[_T],
    prefix: tuple[Any, ...],
    ts_type: int | None,
) -> list[_T]:
    end = pos + header.size
    start = pos + RECORDS_AT
    if header.attributes & CODEC_MASK:
        data = decompress(header.codec, data[start:end], limit=limit, offset=header.base_offset,
                          position=header.position, magic=MAGIC)
        start, end = 0, len(data)
    ts_override = (
        header.max_timestamp if header.attributes & TIMESTAMP_TYPE_BIT else None
    )
    # positions in the errors count from the batch's start, or in the decompressed records
    origin = 0 if header.attributes & CODEC_MASK else pos
    inside = " of the decompressed records" if header.attributes & CODEC_MASK else ""
    try:
        records = _parse_records(data, start, end, origin, header.record_count,
                                 header.base_offset, header.base_timestamp, ts_override, cls,
                                 prefix, ts_type)
    except _Malformed as exc:
        raise MessageFormatError(
            str(exc).replace(" at byte ", f" at byte{inside} ", 1),
            offset=header.base_offset, position=header.position,
        ) from None
    if records and (last := records[-1][len(prefix)]) > header.last_offset:
        raise MessageFormatError(
            f"record {len(records) - 1}{inside}: offsetDelta "
            f"{last - header.base_offset} is past lastOffsetDelta "
            f"{header.last_offset_delta}",
            offset=header.base_offset, position=header.position,
        )
    return records


def _py_parse_records(
    data: bytes,
    p: int,
    end: int,
    origin: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    ts_override: int | None,
    cls: type[_T],
    prefix: tuple[Any, ...],
    ts_type: int | None,
) -> list[_T]:
    """``count`` records from ``data[p:end]``, which they must fill exactly; positions in the
    errors count from ``origin``. Each is built as ``cls(*prefix, offset, timestamp, key, value,
    headers)``, ``ts_type`` after the timestamp unless it is None (``BatchRecord``: none).

    The consumer's and the broker's hot path: each varint of one or two bytes (values up to
    +-8191: nearly all of them) is read inline, the rest by ``_varint``."""
    out: list[_T] = []
    append = out.append
    new = tuple.__new__
    varint = _varint
    typed = ts_type is not None
    previous_delta = -1  # deltas increase; compaction leaves gaps between them
    for i in range(count):
        at = p
        if p >= end:
            raise _Malformed(f"the records end after {i} of the {count} the header counts")
        try:
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            elif (c := data[p + 1]) < 0x80:
                u = (b & 0x7F) | (c << 7)
                length = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                length, p = varint(data, p, end, 5)
        except IndexError:
            raise _Malformed(f"record {i} at byte {at - origin}: its length runs past the end"
                             ) from None
        except _Malformed as exc:
            raise _Malformed(f"record {i} at byte {at - origin}: length: {exc}") from None
        rend = p + length
        if length < _MIN_RECORD_BODY or rend > end:
            raise _Malformed(
                f"record {i} at byte {at - origin}: length {length} does not fit the "
                f"{end - p} bytes left (minimum {_MIN_RECORD_BODY})"
            )
        try:
            p += 1  # attributes: unused in v2
            b = data[p]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 1
            elif (c := data[p + 1]) < 0x80:
                u = (b & 0x7F) | (c << 7)
                ts_delta = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                ts_delta, p = varint(data, p, rend, 10)
            b = data[p]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                p += 1
            elif (c := data[p + 1]) < 0x80:
                u = (b & 0x7F) | (c << 7)
                offset_delta = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                offset_delta, p = varint(data, p, rend, 5)
            if offset_delta <= previous_delta:
                raise _Malformed(
                    f"offsetDelta {offset_delta} does not follow {previous_delta}")
            previous_delta = offset_delta
            b = data[p]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                p += 1
            elif (c := data[p + 1]) < 0x80:
                u = (b & 0x7F) | (c << 7)
                klen = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                klen, p = varint(data, p, rend, 5)
            if klen >= 0:
                key: bytes | None = data[p : p + klen]
                p += klen
            elif klen == -1:
                key = None
            else:
                raise _Malformed(f"key length {klen}")
            b = data[p]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                p += 1
            elif (c := data[p + 1]) < 0x80:
                u = (b & 0x7F) | (c << 7)
                vlen = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                vlen, p = varint(data, p, rend, 5)
            if vlen >= 0:
                value: bytes | None = data[p : p + vlen]
                p += vlen
            elif vlen == -1:
                value = None
            else:
                raise _Malformed(f"value length {vlen}")
            b = data[p]
            if b < 0x80:
                hcount = (b >> 1) ^ -(b & 1)
                p += 1
            elif (c := data[p + 1]) < 0x80:
                u = (b & 0x7F) | (c << 7)
                hcount = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                hcount, p = varint(data, p, rend, 5)
            headers: tuple[Header, ...] = ()
            if hcount:
                headers, p = _parse_headers(data, p, rend, hcount)
        except IndexError:
            p = len(data) + 1  # ran off the data: reported below as the overrun it is
        except _Malformed as exc:
            raise _Malformed(f"record {i} at byte {at - origin}: {exc}") from None
        if p != rend:
            taken = "run past it" if p > rend else f"take {p - (rend - length)} bytes"
            raise _Malformed(
                f"record {i} at byte {at - origin}: length {length} does not match its fields"
                f" (they {taken})"
            )
        timestamp = base_timestamp + ts_delta if ts_override is None else ts_override
        if typed:
            append(new(cls, (
                *prefix, base_offset + offset_delta, timestamp, ts_type, key, value, headers)))
        else:
            append(new(cls, (*prefix, base_offset + offset_delta, timestamp, key, value, headers)))
    if p != end:
        raise _Malformed(
            f"{end - p} bytes follow the last of the {count} records the header counts"
        )
    return out


def _native_parse_records(
    data: bytes,
    p: int,
    end: int,
    origin: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    ts_override: int | None,
    cls: type[_T],
    prefix: tuple[Any, ...],
    ts_type: int | None,
) -> list[_T]:
    """``_py_parse_records`` through the C accelerator, which gives the same records or, for
    anything that is not a whole, valid records section, None: then the Python code runs and
    names what is wrong."""
    assert _parse_records_v2 is not None
    records = _parse_records_v2(data, p, end, count, base_offset, base_timestamp, ts_override,
                                cls, prefix, ts_type)
    if records is None:
        return _py_parse_records(data, p, end, origin, count, base_offset, base_timestamp,
                                 ts_override, cls, prefix, ts_type)
    return records


# The C accelerator's parse where it is built (protocol.speedups chooses, once; an older build
# without it counts as none), else the Python above.
_parse_records_v2: Callable[..., list[Any] | None] | None = getattr(
    speedups.native, "parse_records_v2", None
)
_parse_records = _py_parse_records if _parse_records_v2 is None else _native_parse_records


def _parse_headers(data: bytes, p: int, end: int, count: int) -> tuple[tuple[Header, ...], int]:
    if count < 0 or count > (end - p) // 2:  # a header takes 2 bytes at least
        raise _Malformed(f"headers count {count} does not fit the record")
    headers: list[Header] = []
    for _ in range(count):
        klen, p = _varint(data, p, end, 5)
        if klen < 0 or p + klen > end:
            raise _Malformed(f"header key length {klen}")
        name = data[p : p + klen].decode("utf-8", "surrogateescape")
        p += klen
        vlen, p = _varint(data, p, end, 5)
        if vlen >= 0:
            if p + vlen > end:
                raise _Malformed(f"header {name!r}'s value length {vlen}")
            headers.append((name, data[p : p + vlen]))
            p += vlen
        elif vlen == -1:
            headers.append((name, None))
        else:
            raise _Malformed(f"header {name!r}'s value length {vlen}")
    return tuple(headers), p


# --------------------------------------------------------------------------------------------
# Patching a stored batch's header: what the broker sets, the records untouched


def with_base_offset(batch: bytes | bytearray, base_offset: int, pos: int = 0) -> bytes:
    """The batch at ``pos`` with its baseOffset set (outside the CRC: nothing else changes)."""
    out = bytearray(batch)
    set_base_offset(out, base_offset, pos)
    return bytes(out)


def with_partition_leader_epoch(batch: bytes | bytearray, epoch: int, pos: int = 0) -> bytes:
    """The batch at ``pos`` with its partitionLeaderEpoch set (outside the CRC)."""
    out = bytearray(batch)
    set_partition_leader_epoch(out, epoch, pos)
    return bytes(out)


def with_log_append_time(batch: bytes | bytearray, timestamp: int, pos: int = 0) -> bytes:
    """The batch at ``pos`` given LogAppendTime: timestamp type bit set and maxTimestamp
    ``timestamp`` (which then stands for every record), CRC recomputed."""
    out = bytearray(batch)
    set_log_append_time(out, timestamp, pos)
    return bytes(out)


def without_producer(batch: bytes, pos: int = 0) -> bytes:
    """The batch at ``pos`` (whole in ``batch``) as no producer's: producer id, epoch and base
    sequence set to none and the transactional bit cleared, CRC recomputed -- a batch another
    log may take from a client of its own (a mirror's), whose producer state must not see the
    source's producer ids. The records are copied once and not read."""
    h = _frame_at(batch, pos, 0)
    if h is None or pos + h.size > len(batch):
        raise MessageFormatError("the batch is not whole", position=pos)
    covered = _COVERED.pack(h.attributes & ~TRANSACTIONAL_BIT, h.last_offset_delta,
                            h.base_timestamp, h.max_timestamp, NO_PRODUCER_ID,
                            NO_PRODUCER_EPOCH, NO_SEQUENCE, h.record_count)
    section = batch[pos + RECORDS_AT : pos + h.size]
    crc = google_crc32c.extend(google_crc32c.value(covered), section)
    head = struct.pack(">qiibI", h.base_offset, h.batch_length, h.partition_leader_epoch, MAGIC,
                       crc)
    return b"".join((head, covered, section))


def read_base_offset(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    offset: int = _INT64.unpack_from(buf, pos + BASE_OFFSET_AT)[0]
    return offset


def set_base_offset(buf: bytearray, base_offset: int, pos: int = 0) -> None:
    _INT64.pack_into(buf, pos + BASE_OFFSET_AT, base_offset)


def set_partition_leader_epoch(buf: bytearray, epoch: int, pos: int = 0) -> None:
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_AT, epoch)


def set_max_timestamp(buf: bytearray, timestamp: int, pos: int = 0) -> None:
    """Set maxTimestamp and recompute the CRC of the batch at ``pos`` (whole in ``buf``)."""
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_AT, timestamp)
    _update_crc(buf, pos)


def set_log_append_time(buf: bytearray, timestamp: int, pos: int = 0) -> None:
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_AT)
    _INT16.pack_into(buf, pos + ATTRIBUTES_AT, attributes | TIMESTAMP_TYPE_BIT)
    set_max_timestamp(buf, timestamp, pos)


def _update_crc(buf: bytearray, pos: int) -> None:
    (length,) = _INT32.unpack_from(buf, pos + BATCH_LENGTH_AT)
    end = pos + LOG_OVERHEAD + length
    if length < MIN_BATCH_LENGTH or end > len(buf):
        raise MessageFormatError(
            f"batchLength {length} does not fit the {len(buf) - pos} bytes there",
            position=pos,
        )
    _UINT32.pack_into(buf, pos + CRC_AT, crc32c(memoryview(buf)[pos + ATTRIBUTES_AT : end]))


# --------------------------------------------------------------------------------------------
# Control records (transaction markers): key version int16 + type int16, value version int16 +
# coordinator epoch int32, as Kafka writes them


def control_record(kind: ControlRecordType, coordinator_epoch: int, timestamp: int) -> Record:
    """The one record of a control batch (write it with ``is_control=True``)."""
    return Record(struct.pack(">hh", 0, kind), struct.pack(">hi", 0, coordinator_epoch),
                  timestamp)


def control_record_type(record: BatchRecord | Record) -> ControlRecordType:
    """What a control batch's record marks; MessageFormatError if its key is not a control
    key."""
    if record.key is None or len(record.key) < 4:
        raise MessageFormatError(f"control record key {record.key!r} is not version + type")
    _version, kind = struct.unpack_from(">hh", record.key)
    try:
        return ControlRecordType(kind)
    except ValueError:
        raise MessageFormatError(f"unknown control record type {kind}") from None
