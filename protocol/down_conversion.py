"""Down-conversion: a fetched byte range, as the log holds it, rewritten for a reader that
cannot take record batches (message format v2), sans IO.

Readers of Fetch below v4 on the Kafka listener, and native clients asking for v1, read message
sets of format v1 (or v0: Kafka's Fetch v0 and v1). A log may hold all three formats, so the
range is walked entry by entry, each told apart by its magic byte (``peek_magic``), as Kafka's
``RecordsUtil.downConvert`` does:

- A v2 batch becomes v1 (v0) messages with the same offsets, keys, values and timestamps
  (timestamp type kept; v0 has none). Headers are dropped: v0/v1 cannot carry them. Records
  below ``fetch_offset`` (a batch is read whole, and may start before it) are left out -- from
  compressed batches too, where Kafka keeps them for the reader to skip: fewer bytes to send.
- A compressed v2 batch (gzip, snappy, lz4) becomes one wrapper with the same codec: inner
  offsets 0..n-1 and the wrapper's offset the last record's for v1, absolute inner offsets for
  v0 (protocol.messageset's layouts). zstd cannot be carried by v0/v1: as Kafka, which answers
  old readers of a zstd topic UNSUPPORTED_COMPRESSION_TYPE, the default is to refuse
  (``UnsupportedCompressionError``); ``zstd=ZstdPolicy.DECOMPRESS`` writes its records
  uncompressed instead, for readers of our own protocol that would rather have the data.
- Control batches (transaction markers) disappear, and so do empty batches (they only carry
  producer state). There are no transactions yet, so no aborted data to leave out; Kafka does
  not either for these readers (Fetch below v4 reads uncommitted).
- v0 and v1 entries at or below the target format pass through byte for byte. For a v0 reader a
  v1 entry is converted to v0 as well (Kafka does so); a v0 entry passes through to a v1 reader.

What comes out is whole message sets only: a partial trailing entry of the range is left out
(the reader fetches it next time), and output stops before an entry whose conversion would take
it past ``max_bytes`` -- except the first, which is always given whole however large (Kafka's
"at least one message", KIP-74), so that a reader always makes progress. ``consumed`` says how
many bytes of the range were handled (converted, passed through or skipped) and
``next_offset`` where the next fetch starts.

A damaged v2 batch raises what ``record_batch.decode_batches`` raises for it
(``CorruptMessageError`` for a CRC mismatch, ``MessageFormatError`` for the rest); a v0/v1
entry that is converted is checked as ``messageset.read_entries`` checks it; one passed through
is framed (offset, size) but not read, as the broker serves it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from enum import Enum
from typing import NamedTuple

from protocol.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    BatchCodec,
    Codec,
    compress,
)
from protocol.errors import MessageFormatError, OdradekError
from protocol.messageset import (
    CODEC_MASK,
    LOG_OVERHEAD,
    MIN_SIZE,
    TIMESTAMP_TYPE_BIT,
    Entry,
    TimestampType,
    encode_message,
    encode_message_set,
    open_wrapper,
    read_entries,
)
from protocol.record_batch import (
    HEADER_BYTES,
    MIN_BATCH_LENGTH,
    BatchRecord,
    decode_batches,
    peek_magic,
)

#: Kafka's error code for a fetch whose data the reader's format cannot carry (UNSUPPORTED_
#: COMPRESSION_TYPE): what the Kafka listener answers for ``UnsupportedCompressionError``.
UNSUPPORTED_COMPRESSION_TYPE = 76

_OFFSET_SIZE = struct.Struct(">qi")

#: triples as protocol.messageset's encoders take them
_Triple = tuple[bytes | None, bytes | None, int]


class ZstdPolicy(Enum):
    """What to do with a zstd batch, which no v0/v1 wrapper can hold."""

    REFUSE = "refuse"  # Kafka's answer to old readers: UNSUPPORTED_COMPRESSION_TYPE
    DECOMPRESS = "decompress"  # its records as uncompressed messages


class UnsupportedCompressionError(OdradekError):
    """The range starts with a batch the reader's format cannot carry (zstd, refused). The
    bytes are well formed; the reader is too old for them."""

    def __init__(self, *, offset: int, position: int) -> None:
        super().__init__(
            f"zstd batch at offset {offset} (byte position {position}) cannot be "
            "down-converted: message formats v0 and v1 have no zstd"
        )
        self.offset = offset
        self.position = position
        self.error_code = UNSUPPORTED_COMPRESSION_TYPE


class DownConverted(NamedTuple):
    """A down-converted range: the message set to send and where the source stands."""

    records: bytes  # v0/v1 message set, whole entries only
    consumed: int  # bytes of the source range handled: the next read starts after them
    next_offset: int  # the offset after the last entry handled (``fetch_offset`` if none)
    converted: int  # messages written by conversion (not counting passed-through entries)


def down_convert(
    buf: bytes | bytearray | memoryview,
    *,
    to_magic: int,
    fetch_offset: int,
    max_bytes: int | None = None,
    zstd: ZstdPolicy = ZstdPolicy.REFUSE,
    verify_crc: bool = True,
    limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    base_position: int = 0,
) -> DownConverted:
    """The entries at the start of ``buf`` (any mix of magics 0, 1 and 2) as a message set of
    format ``to_magic`` (0 or 1), for a reader fetching from ``fetch_offset``: see the module's
    docstring for the rules. ``max_bytes`` (None: no limit) bounds the output, the first entry
    excepted. ``base_position`` is added to the byte positions errors report.

    Raises UnsupportedCompressionError for a zstd batch under ``ZstdPolicy.REFUSE`` when it is
    the first thing to send; after other output, the range ends before it instead (that output
    is sent, and the next fetch, starting at the zstd batch, is the one refused)."""
    if to_magic not in (0, 1):
        raise ValueError(f"cannot down-convert to magic {to_magic}; only 0 and 1 exist")
    data = buf if isinstance(buf, bytes) else bytes(buf)
    out: list[bytes] = []
    out_bytes = 0
    converted = 0
    pos = 0
    next_offset = fetch_offset
    while (magic := peek_magic(data, pos)) is not None:
        if magic == 2:
            end = _batch_end(data, pos)
            if end is None:
                break  # partial trailing batch
            (batch,) = decode_batches(data[pos:end], verify_crc=verify_crc, limit=limit,
                                      base_position=base_position + pos)
            header = batch.header
            if header.codec is BatchCodec.ZSTD and zstd is ZstdPolicy.REFUSE and (
                not header.is_control and _kept(batch.records, fetch_offset)
            ):
                if out:
                    break
                raise UnsupportedCompressionError(offset=header.base_offset,
                                                  position=base_position + pos)
            piece, count = _convert_batch(batch.records, header.codec, header.timestamp_type,
                                          header.is_control, to_magic, fetch_offset)
            entry_next = header.next_offset
        elif magic in (0, 1):
            end = _entry_end(data, pos, base_position)
            if end is None:
                break  # partial trailing entry
            (entry_offset,) = struct.unpack_from(">q", data, pos)
            entry_next = entry_offset + 1  # a wrapper's offset is its last inner one's
            if magic <= to_magic:
                piece, count = data[pos:end], 0
            else:
                piece, count = _entry_to_v0(data, pos, end, verify_crc, limit, base_position,
                                            fetch_offset)
        else:
            (entry_offset,) = struct.unpack_from(">q", data, pos)
            raise MessageFormatError(f"unknown magic {magic}", offset=entry_offset,
                                     position=base_position + pos)
        if piece and out and max_bytes is not None and out_bytes + len(piece) > max_bytes:
            break
        if piece:
            out.append(piece)
            out_bytes += len(piece)
            converted += count
        pos = end
        next_offset = max(next_offset, entry_next)
    return DownConverted(b"".join(out), pos, next_offset, converted)


def _batch_end(data: bytes, pos: int) -> int | None:
    """Where the v2 batch at ``pos`` ends, or None when it is not whole in ``data``. A
    batchLength below the minimum gives the header's end, so that the decoder names it."""
    if pos + HEADER_BYTES > len(data):
        return None
    (length,) = struct.unpack_from(">i", data, pos + 8)
    if length < MIN_BATCH_LENGTH:
        return pos + HEADER_BYTES
    end = pos + LOG_OVERHEAD + length
    return end if end <= len(data) else None


def _entry_end(data: bytes, pos: int, base_position: int) -> int | None:
    """Where the v0/v1 entry at ``pos`` ends, or None when it is not whole in ``data``."""
    offset, size = _OFFSET_SIZE.unpack_from(data, pos)
    if size < MIN_SIZE[0]:
        raise MessageFormatError(f"entry size {size} is below the minimum {MIN_SIZE[0]}",
                                 offset=offset, position=base_position + pos)
    end = pos + LOG_OVERHEAD + size
    return end if end <= len(data) else None


def _kept(records: Sequence[BatchRecord], fetch_offset: int) -> bool:
    return bool(records) and records[-1].offset >= fetch_offset


def _convert_batch(
    records: list[BatchRecord],
    codec: BatchCodec,
    timestamp_type: TimestampType,
    is_control: bool,
    to_magic: int,
    fetch_offset: int,
) -> tuple[bytes, int]:
    """One v2 batch's records (already decoded) as a v0/v1 message set, and how many."""
    if is_control or not _kept(records, fetch_offset):
        return b"", 0
    if records[0].offset < fetch_offset:
        records = [r for r in records if r.offset >= fetch_offset]
    # v0/v1 codecs are v2's minus zstd, with the same numbers
    out_codec = Codec.NONE if codec is BatchCodec.ZSTD else Codec(int(codec))
    triples: list[_Triple] = [(r.key, r.value, r.timestamp) for r in records]
    if to_magic == 1:
        if records[-1].offset - records[0].offset == len(records) - 1:
            # offsets without gaps, as produced: numbered from the first, as the encoder does
            return encode_message_set(triples, codec=out_codec, base_offset=records[0].offset,
                                      timestamp_type=timestamp_type), len(triples)
        return _v1_set_with_gaps(records, out_codec, timestamp_type), len(triples)
    return _v0_set([(r.offset, r.key, r.value) for r in records], out_codec), len(triples)


def _entry_to_v0(
    data: bytes, pos: int, end: int, verify_crc: bool, limit: int, base_position: int,
    fetch_offset: int,
) -> tuple[bytes, int]:
    """A v1 entry (plain or wrapper) as v0, for a v0 reader: timestamps dropped, a wrapper's
    inner offsets made absolute, the codec kept."""
    entries: list[Entry]
    entries, _ = read_entries(data[pos:end], verify_crc=verify_crc,
                              base_position=base_position + pos)
    (entry,) = entries
    if not entry.attributes & CODEC_MASK:
        return encode_message(entry.offset, entry.key, entry.value, magic=0), 1
    inner = [(e.offset, e.key, e.value)
             for e in open_wrapper(entry, verify_crc=verify_crc, limit=limit)
             if e.offset >= fetch_offset]
    return (_v0_set(inner, entry.codec), len(inner)) if inner else (b"", 0)


def _v1_set_with_gaps(
    records: Sequence[BatchRecord], codec: Codec, timestamp_type: TimestampType
) -> bytes:
    """A v1 message set of a compacted batch's records, each at its own offset; with a codec,
    one wrapper whose inner offsets are relative to the first and whose own offset is the
    last one's (magic 1's layout, as compaction writes a v1 wrapper)."""
    ts_bit = TIMESTAMP_TYPE_BIT if timestamp_type is TimestampType.LOG_APPEND_TIME else 0
    if codec is Codec.NONE:
        return b"".join(encode_message(r.offset, r.key, r.value, r.timestamp, attributes=ts_bit)
                        for r in records)
    first = records[0].offset
    inner = b"".join(encode_message(r.offset - first, r.key, r.value, r.timestamp,
                                    attributes=ts_bit) for r in records)
    return encode_message(records[-1].offset, None, compress(codec, inner, magic=1),
                          max(r.timestamp for r in records), attributes=int(codec) | ts_bit)


def _v0_set(messages: Sequence[tuple[int, bytes | None, bytes | None]], codec: Codec) -> bytes:
    """A v0 message set of ``(offset, key, value)``; with a codec, one wrapper whose inner
    offsets are absolute and whose own offset is the last one's (magic 0's layout)."""
    plain = b"".join(encode_message(o, k, v, magic=0) for o, k, v in messages)
    if codec is Codec.NONE:
        return plain
    return encode_message(messages[-1][0], None, compress(codec, plain, magic=0),
                          attributes=int(codec), magic=0)
