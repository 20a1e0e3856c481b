"""The record-batch (message format v2) part of docs/protocol.md's message-format section, its
worked example made by ``protocol.record_batch``'s encoder (the doc generator includes it, and
its test checks the committed doc holds it as made here)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from protocol.record_batch import (
    ATTRIBUTES_AT,
    CONTROL_BIT,
    HEADER_BYTES,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    Record,
    crc32c,
    encode_batch,
)

EXAMPLE_TIMESTAMP = 1_700_000_000_000


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _hex(data: bytes) -> str:
    return " ".join(f"{b:02x}" for b in data)


def example_batch() -> bytes:
    """Offset 41, one record: key "k1", value "hello", header trace = "t1", create time."""
    record = Record(b"k1", b"hello", EXAMPLE_TIMESTAMP, (("trace", b"t1"),))
    return encode_batch([record], base_offset=41, partition_leader_epoch=0)


def _example_rows(b: bytes) -> list[tuple[str, str, object]]:
    def i(lo: int, hi: int) -> int:
        return int.from_bytes(b[lo:hi], "big", signed=True)

    r = HEADER_BYTES  # the record starts here
    return [
        (_hex(b[0:8]), "baseOffset", i(0, 8)),
        (_hex(b[8:12]), "batchLength", f"{i(8, 12)} (= 49 + the record's {len(b) - r} bytes)"),
        (_hex(b[12:16]), "partitionLeaderEpoch", i(12, 16)),
        (_hex(b[16:17]), "magic", 2),
        (_hex(b[17:21]), "crc", f"0x{crc32c(b[ATTRIBUTES_AT:]):08x}, CRC-32C of bytes 21.."),
        (_hex(b[21:23]), "attributes", "0: no compression, create time, not transactional"),
        (_hex(b[23:27]), "lastOffsetDelta", i(23, 27)),
        (_hex(b[27:35]), "baseTimestamp", i(27, 35)),
        (_hex(b[35:43]), "maxTimestamp", i(35, 43)),
        (_hex(b[43:51]), "producerId", "-1 (not idempotent)"),
        (_hex(b[51:53]), "producerEpoch", -1),
        (_hex(b[53:57]), "baseSequence", -1),
        (_hex(b[57:61]), "recordsCount", i(57, 61)),
        (_hex(b[r : r + 1]), "record: length", f"{b[r] >> 1} (varint; zigzag: 2 x {b[r] >> 1})"),
        (_hex(b[r + 1 : r + 2]), "attributes", "0 (unused)"),
        (_hex(b[r + 2 : r + 3]), "timestampDelta", 0),
        (_hex(b[r + 3 : r + 4]), "offsetDelta", 0),
        (_hex(b[r + 4 : r + 5]), "keyLength", 2),
        (_hex(b[r + 5 : r + 7]), "key", '"k1"'),
        (_hex(b[r + 7 : r + 8]), "valueLength", 5),
        (_hex(b[r + 8 : r + 13]), "value", '"hello"'),
        (_hex(b[r + 13 : r + 14]), "headersCount", 1),
        (_hex(b[r + 14 : r + 15]), "headerKeyLength", 5),
        (_hex(b[r + 15 : r + 20]), "headerKey", '"trace"'),
        (_hex(b[r + 20 : r + 21]), "headerValueLength", 2),
        (_hex(b[r + 21 : r + 23]), "headerValue", '"t1"'),
    ]


def record_batch_section() -> str:
    """Markdown: the v2 layout, its rules and the worked example."""
    example = example_batch()
    dump = "\n".join(
        f"{i:04x}  {_hex(example[i : i + 16])}" for i in range(0, len(example), 16)
    )
    return f"""
### Record batches (message format v2)

Kafka 0.11's format (magic 2), which Kafka's clients write by default: a **batch header** then
the records, each record varint-encoded and carrying optional **headers**. odradek's codec reads
and writes it (`protocol/record_batch.py`); the broker's log, listeners and clients do not take
it yet. All fixed-size integers are big-endian. A batch:

{_table(("field", "bytes", "meaning"), [
    ("baseOffset", "8 (int64)", "offset of the first record; the broker assigns it"),
    ("batchLength", "4 (int32)", f"bytes that follow: {MIN_BATCH_LENGTH} + the records section"),
    ("partitionLeaderEpoch", "4 (int32)", "the leader's epoch when written (broker); -1 unset"),
    ("magic", "1 (int8)", "2 (byte 16, as in v0/v1: a reader tells the formats apart by it)"),
    ("crc", "4 (uint32)", "CRC-32C (Castagnoli) of every byte from `attributes` to the end"),
    ("attributes", "2 (int16)",
     "bits 0-2: codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd); bit 3: timestamp type "
     f"(`0x{TIMESTAMP_TYPE_BIT:02x}`, log-append time); bit 4: transactional "
     f"(`0x{TRANSACTIONAL_BIT:02x}`); bit 5: control batch (`0x{CONTROL_BIT:02x}`)"),
    ("lastOffsetDelta", "4 (int32)", "offset of the last record - baseOffset"),
    ("baseTimestamp", "8 (int64)", "timestamp of the first record"),
    ("maxTimestamp", "8 (int64)", "largest timestamp; with log-append time, the broker's clock"),
    ("producerId", "8 (int64)", "-1 unless the producer is idempotent or transactional"),
    ("producerEpoch", "2 (int16)", "-1 likewise"),
    ("baseSequence", "4 (int32)", "sequence number of the first record, -1 likewise"),
    ("recordsCount", "4 (int32)", "how many records follow"),
    ("records", "the rest", "the records, one after another; compressed as one stream with "
     "the codec (the header is never compressed)"),
])}
A record (varint and varlong are zigzag-encoded base-128 varints, as protocol buffers' sint32
and sint64, at most 5 and 10 bytes):

{_table(("field", "type", "meaning"), [
    ("length", "varint", "bytes of the record after this field"),
    ("attributes", "int8", "unused, 0"),
    ("timestampDelta", "varlong", "timestamp - baseTimestamp (may be negative)"),
    ("offsetDelta", "varint", "offset - baseOffset, increasing: 0, 1, ..., recordsCount - 1 "
     "as produced, with gaps after compaction"),
    ("keyLength, key", "varint, bytes", "-1 for a null key"),
    ("valueLength, value", "varint, bytes", "-1 for a null value (a tombstone)"),
    ("headersCount", "varint", "then per header: keyLength varint, key (UTF-8), valueLength "
     "varint (-1: null), value"),
])}
- The CRC does not cover `baseOffset`, `batchLength`, `partitionLeaderEpoch` or `magic`: the
  broker assigns offsets and sets the leader epoch by rewriting those fields alone. Setting
  log-append time changes `attributes` and `maxTimestamp` and recomputes the CRC over the
  header's 40 covered bytes and the records as they are: the records are never re-encoded.
- With log-append time every record's timestamp is `maxTimestamp`.
- The checks on a batch, as Kafka's: the CRC; `batchLength` at least {MIN_BATCH_LENGTH} (a
  batch that runs past the end of a buffer is a partial one, fetched again); a known codec;
  `recordsCount` at most `lastOffsetDelta` + 1; exactly `recordsCount` records filling the
  records section (decompressed, for a compressed batch); offset deltas increasing, the last at
  most `lastOffsetDelta` (a produced batch: 0..n-1, and `lastOffsetDelta` = `recordsCount` - 1;
  compaction leaves gaps and keeps `lastOffsetDelta`); each record's
  `length` equal to the bytes its fields take; varints no longer than 5 (10) bytes and within
  int32 (int64). An empty batch (`recordsCount` 0) is valid: compaction keeps such batches for
  the producer state they carry.
- A control batch (bit 5) holds one record whose key is version (int16, 0) and type (int16: 0
  abort, 1 commit) and whose value is version (int16, 0) and coordinator epoch (int32).
- zstd exists in v2 only (KIP-110): a v0/v1 wrapper with codec 4 is malformed.

**Down-conversion.** A reader that cannot take v2 (Kafka's Fetch v2 and v3 read v1, Fetch v0 and
v1 read v0) is sent the fetched range converted, as Kafka converts it
(`protocol/down_conversion.py`): each v2 record becomes a v1 (v0) message with the same offset,
key, value and timestamp (timestamp type kept; v0 has none); headers are dropped; records before
the fetch offset, control batches and empty batches are left out; a gzip, snappy or lz4 batch
becomes one wrapper of the same codec (relative inner offsets and the last offset on the wrapper
for v1, absolute inner offsets for v0). v0 and v1 entries pass through as stored, except that a
v0 reader gets v1 entries converted to v0. v0/v1 have no zstd: as Kafka, a zstd batch is refused
with UNSUPPORTED_COMPRESSION_TYPE (76) when it is the first thing to send, and ends the range
when something comes before it (a caller may ask for its records uncompressed instead). Only
whole entries are sent: a partial trailing batch is fetched again, and the converted range stops
before the entry that would take it past the fetch's byte limit, the first entry excepted (it is
sent whole, so that a reader always makes progress); the answer carries how much of the range
was converted, so the next fetch starts after it.

### Worked example (v2)

Offset 41, one record: key `"k1"`, value `"hello"`, header `trace` = `"t1"`, create time
{EXAMPLE_TIMESTAMP} ms, no compression, partition leader epoch 0:

{_table(("bytes", "field", "value"), _example_rows(example))}
```
{dump}
```"""
