"""Record batches (message format v2): hand-built batches from the format description, round
trips, every kind of damage, header patching, and Kafka's own Python client reading ours and
writing what we read."""

from __future__ import annotations

import gzip
import struct
from typing import NamedTuple

import google_crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.compression import BatchCodec, compress
from protocol.errors import CorruptMessageError, MessageFormatError
from protocol.messageset import TimestampType, encode_message_set
from protocol.record_batch import (
    CONTROL_BIT,
    HEADER_BYTES,
    BatchHeader,
    BatchRecord,
    ControlRecordType,
    Record,
    control_record,
    control_record_type,
    decode_batches,
    decode_records,
    decode_records_as,
    decode_varint,
    encode_batch,
    encode_varint,
    peek_magic,
    read_batch_header,
    scan_batches,
    set_log_append_time,
    with_base_offset,
    with_log_append_time,
    with_partition_leader_epoch,
    without_producer,
)

# --- a batch built byte by byte from the format description, not by the encoder ------------


def zigzag(n: int) -> bytes:
    """A zigzag varint, written out as the description says (not the codec's table)."""
    u = (n << 1) ^ (n >> 63)
    out = b""
    while True:
        byte = u & 0x7F
        u >>= 7
        if u:
            out += bytes((byte | 0x80,))
        else:
            return out + bytes((byte,))


def sized(data: bytes | None) -> bytes:
    return zigzag(-1) if data is None else zigzag(len(data)) + data


def hand_record(
    offset_delta: int,
    ts_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[bytes, bytes | None], ...] = (),
) -> bytes:
    body = b"\x00" + zigzag(ts_delta) + zigzag(offset_delta) + sized(key) + sized(value)
    body += zigzag(len(headers)) + b"".join(sized(k) + sized(v) for k, v in headers)
    return zigzag(len(body)) + body


def hand_batch(
    records: list[bytes],
    *,
    base_offset: int = 0,
    attributes: int = 0,
    base_ts: int = 1_700_000_000_000,
    max_ts: int = 1_700_000_000_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    leader_epoch: int = -1,
    section: bytes | None = None,
    count: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    n = len(records) if count is None else count
    raw = b"".join(records) if section is None else section
    after_crc = struct.pack(
        ">hiqqqhii", attributes, n - 1 if last_offset_delta is None else last_offset_delta,
        base_ts, max_ts, producer_id, producer_epoch, base_sequence, n,
    ) + raw
    crc = google_crc32c.value(after_crc)
    # batchLength counts partitionLeaderEpoch (4), magic (1), crc (4) and what the CRC covers
    return struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(after_crc), leader_epoch, 2,
                       crc) + after_crc


TS = 1_700_000_000_000


def test_an_uncompressed_batch_with_headers_and_nulls() -> None:
    records = [
        hand_record(0, 0, b"k", b"hello", ((b"trace", b"abc"), (b"empty", None))),
        hand_record(1, 5, None, b"v"),
        hand_record(2, -3, b"tomb", None),  # timestamps need not rise
    ]
    data = hand_batch(records, base_offset=100, max_ts=TS + 5, producer_id=7, producer_epoch=1,
                      base_sequence=40, leader_epoch=3)
    (batch,) = decode_batches(data)
    assert batch.header == BatchHeader(
        base_offset=100, batch_length=len(data) - 12, partition_leader_epoch=3, magic=2,
        crc=batch.header.crc, attributes=0, last_offset_delta=2, base_timestamp=TS,
        max_timestamp=TS + 5, producer_id=7, producer_epoch=1, base_sequence=40,
        record_count=3, position=0,
    )
    assert batch.header.crc == google_crc32c.value(data[21:])
    assert (batch.header.last_offset, batch.header.next_offset, batch.header.last_sequence) == (
        102, 103, 42)
    assert batch.records == [
        BatchRecord(100, TS, b"k", b"hello", (("trace", b"abc"), ("empty", None))),
        BatchRecord(101, TS + 5, None, b"v", ()),
        BatchRecord(102, TS - 3, b"tomb", None, ()),
    ]


def test_the_encoder_writes_the_hand_built_bytes() -> None:
    records = [
        hand_record(0, 0, b"k", b"hello", ((b"trace", b"abc"), (b"empty", None))),
        hand_record(1, 5, None, b"v"),
        hand_record(2, -3, b"tomb", None),
    ]
    expected = hand_batch(records, base_offset=100, max_ts=TS + 5, producer_id=7,
                          producer_epoch=1, base_sequence=40, leader_epoch=3)
    encoded = encode_batch(
        [Record(b"k", b"hello", TS, (("trace", b"abc"), ("empty", None))),
         Record(None, b"v", TS + 5), (b"tomb", None, TS - 3)],
        base_offset=100, codec=BatchCodec.NONE, timestamp_type=TimestampType.CREATE_TIME,
        producer_id=7, producer_epoch=1, base_sequence=40, partition_leader_epoch=3,
    )
    assert encoded == expected


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


@pytest.mark.parametrize("codec", [c for c in BatchCodec if c], ids=lambda c: c.name.lower())
def test_a_compressed_batch_is_one_stream_of_its_records(codec: BatchCodec) -> None:
    records = [hand_record(i, i, None, b"value %d" % i, ((b"h", b"%d" % i),)) for i in range(5)]
    raw = b"".join(records)
    # gzip through the standard library; the others through the codec's own library
    section = _gzip(raw) if codec is BatchCodec.GZIP else compress(codec, raw, magic=2)
    data = hand_batch(records, attributes=int(codec), base_offset=10, max_ts=TS + 4,
                      section=section)
    (batch,) = decode_batches(data)
    assert batch.header.codec is codec
    assert [(r.offset, r.timestamp, r.value, r.headers) for r in batch.records] == [
        (10 + i, TS + i, b"value %d" % i, (("h", b"%d" % i),)) for i in range(5)
    ]


def test_zstd_is_codec_4_and_reads_a_frame_without_a_content_size() -> None:
    import zstandard

    raw = b"".join(hand_record(i, 0, None, b"x" * 50) for i in range(3))
    section = zstandard.ZstdCompressor(write_content_size=False).compress(raw)
    (batch,) = decode_batches(hand_batch([raw], count=3, attributes=4, section=section))
    assert batch.header.codec is BatchCodec.ZSTD and len(batch.records) == 3


def test_a_control_batch() -> None:
    key = struct.pack(">hh", 0, 1)  # version 0, COMMIT
    value = struct.pack(">hi", 0, 9)  # version 0, coordinator epoch 9
    data = hand_batch([hand_record(0, 0, key, value)], attributes=CONTROL_BIT | 0x10,
                      producer_id=5, producer_epoch=2)
    (batch,) = decode_batches(data)
    assert batch.header.is_control and batch.header.is_transactional
    assert control_record_type(batch.records[0]) is ControlRecordType.COMMIT
    assert encode_batch([control_record(ControlRecordType.COMMIT, 9, TS)], is_control=True,
                        is_transactional=True, producer_id=5, producer_epoch=2) == data


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    data = hand_batch([hand_record(0, 0, None, b"a"), hand_record(1, 9, None, b"b")],
                      attributes=0x08, max_ts=TS + 1000)
    (batch,) = decode_batches(data)
    assert batch.header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records] == [TS + 1000, TS + 1000]


# --- round trips ------------------------------------------------------------------------------

timestamps = st.integers(0, 1 << 45)
headers = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)),
                   max_size=3).map(tuple)
records = st.lists(
    st.builds(Record, st.none() | st.binary(max_size=300), st.none() | st.binary(max_size=300),
              timestamps, headers),
    min_size=1, max_size=20,
)


@settings(max_examples=150, deadline=None)
@given(records=records, codec=st.sampled_from(BatchCodec), base_offset=st.integers(0, 1 << 40),
       producer_id=st.integers(-1, 1 << 40), base_sequence=st.integers(-1, (1 << 31) - 1))
def test_round_trip(records: list[Record], codec: BatchCodec, base_offset: int,
                    producer_id: int, base_sequence: int) -> None:
    data = encode_batch(records, base_offset=base_offset, codec=codec, producer_id=producer_id,
                        producer_epoch=0 if producer_id >= 0 else -1,
                        base_sequence=base_sequence)
    (batch,) = decode_batches(data)
    assert batch.header.codec is codec
    assert batch.header.record_count == len(records)
    assert batch.header.max_timestamp == max(r.timestamp for r in records)
    assert batch.header.base_sequence == base_sequence
    assert batch.records == [
        BatchRecord(base_offset + i, r.timestamp, r.key, r.value, r.headers)
        for i, r in enumerate(records)
    ]
    headers_only, whole = scan_batches(data)
    assert headers_only == [batch.header] and whole == len(data)


@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_varint_round_trip(n: int) -> None:
    raw = encode_varint(n)
    assert decode_varint(raw + b"\xff", 0, len(raw), long=True) == (n, len(raw))
    if -(1 << 31) <= n < 1 << 31:
        assert decode_varint(raw, 0, len(raw)) == (n, len(raw))
        assert len(raw) <= 5


def test_several_batches_and_a_partial_tail() -> None:
    first = encode_batch([(None, b"a", TS)], base_offset=0)
    second = encode_batch([(None, b"b", TS), (None, b"c", TS)], base_offset=1)
    data = first + second
    for cut in range(len(first), len(data)):
        batches = list(decode_batches(data[:cut]))
        assert [b.header.base_offset for b in batches] == [0]
        assert scan_batches(data[:cut]) == ([batches[0].header], len(first))
    batches = list(decode_batches(data))
    assert [b.header.position for b in batches] == [0, len(first)]
    assert batches[-1].header.end == len(data)
    assert list(decode_batches(data[: HEADER_BYTES - 1])) == []


def test_header_only_reading_does_not_touch_the_records() -> None:
    data = encode_batch([(None, b"a", TS), (None, b"b", TS + 1)], base_offset=3)
    damaged = data[:HEADER_BYTES] + b"\x7f" * (len(data) - HEADER_BYTES)
    header = read_batch_header(damaged)
    assert header is not None and header.record_count == 2 and header.last_offset == 4
    assert read_batch_header(data[: HEADER_BYTES - 1]) is None
    assert peek_magic(data) == 2
    assert peek_magic(encode_message_set([(None, b"a", TS)])) == 1
    (batch,) = decode_batches(data)
    assert decode_records(data, header) == batch.records


class Tagged(NamedTuple):
    """A reader's record type: fields before the record's and its timestamp type, as the
    consumer's records have."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@settings(max_examples=150, deadline=None)
@given(records=records, codec=st.sampled_from(BatchCodec), base_offset=st.integers(0, 1 << 40),
       log_append=st.booleans())
def test_decode_records_as_builds_the_records_decode_records_reads(
    records: list[Record], codec: BatchCodec, base_offset: int, log_append: bool
) -> None:
    data = encode_batch(records, base_offset=base_offset, codec=codec)
    if log_append:
        data = with_log_append_time(data, TS + 7)
    at = 5  # a batch after other bytes, as in a fetched chunk
    chunk = b"\x00" * at + data
    header = read_batch_header(chunk, at)
    assert header is not None
    tagged = decode_records_as(Tagged, ("t", 3), chunk, header, at)
    assert all(type(r) is Tagged for r in tagged)
    ts_type = 1 if log_append else 0
    assert tagged == [Tagged("t", 3, r.offset, r.timestamp, ts_type, r.key, r.value, r.headers)
                      for r in decode_records(chunk, header, at)]


@settings(max_examples=300, deadline=None)
@given(section=st.binary(max_size=80), count=st.integers(0, 6), gaps=st.integers(0, 3))
def test_decode_records_as_refuses_what_decode_records_refuses(
    section: bytes, count: int, gaps: int
) -> None:
    data = hand_batch([], count=count, last_offset_delta=max(count - 1, 0) + gaps,
                      section=section)
    header = read_batch_header(data)
    assert header is not None
    try:
        plain = decode_records(data, header)
    except MessageFormatError as exc:
        with pytest.raises(MessageFormatError) as raised:
            decode_records_as(Tagged, ("t", 3), data, header)
        assert str(raised.value) == str(exc)
        return
    assert decode_records_as(Tagged, ("t", 3), data, header) == [
        Tagged("t", 3, r.offset, r.timestamp, 0, r.key, r.value, r.headers) for r in plain]


def test_decode_records_as_names_an_offset_delta_past_the_last_one() -> None:
    # the last record's offset is found after the prefix, not where a BatchRecord keeps it
    data = hand_batch([hand_record(0, 0, None, b"a"), hand_record(2, 0, None, b"b")])
    header = read_batch_header(data)
    assert header is not None
    with pytest.raises(MessageFormatError, match="offsetDelta 2 is past lastOffsetDelta 1"):
        decode_records_as(Tagged, ("t", 3), data, header)
    with pytest.raises(MessageFormatError, match="needs"):
        decode_records_as(Tagged, ("t", 3), data[:-1], header)


# --- damage -----------------------------------------------------------------------------------

GOOD = encode_batch([Record(b"key", b"value", TS, (("h", b"v"),)), Record(None, b"v2", TS + 1)],
                    base_offset=50)


def _raises(data: bytes, error: type[MessageFormatError], *words: str,
            verify_crc: bool = True) -> MessageFormatError:
    with pytest.raises(error) as info:
        list(decode_batches(data, verify_crc=verify_crc))
    for word in words:
        assert word in str(info.value)
    return info.value


@pytest.mark.parametrize("at", [21, 30, 60, 61, 70, len(GOOD) - 1])
def test_a_flipped_byte_under_the_crc_is_a_crc_error(at: int) -> None:
    data = bytearray(GOOD)
    data[at] ^= 0x40
    exc = _raises(bytes(data), CorruptMessageError, "CRC-32C mismatch")
    assert exc.offset == 50 and exc.position == 0


def test_damage_outside_the_crc_is_named_without_it() -> None:
    data = bytearray(GOOD)
    data[16] = 3
    _raises(bytes(data), MessageFormatError, "magic 3")


def test_a_record_count_the_records_do_not_match() -> None:
    records = [hand_record(0, 0, None, b"a"), hand_record(1, 0, None, b"b")]
    _raises(hand_batch(records, count=3, last_offset_delta=2), MessageFormatError,
            "the records end after 2 of the 3")
    _raises(hand_batch(records, count=1, last_offset_delta=0), MessageFormatError,
            "bytes follow the last of the 1 records")
    _raises(hand_batch(records, count=-1), MessageFormatError, "record count -1")


def test_a_last_offset_delta_too_small_for_the_count() -> None:
    records = [hand_record(0, 0, None, b"a"), hand_record(1, 0, None, b"b")]
    exc = _raises(hand_batch(records, last_offset_delta=0), MessageFormatError,
                  "lastOffsetDelta 0", "record count 2")
    assert exc.offset == 0


def test_a_compacted_batch_keeps_its_offset_range_with_gaps_between_records() -> None:
    # what compaction leaves: records 1 and 4 of five, lastOffsetDelta still 4
    records = [hand_record(1, 0, b"k", b"a"), hand_record(4, 0, b"j", b"b")]
    (batch,) = decode_batches(hand_batch(records, last_offset_delta=4))
    assert [r.offset for r in batch.records] == [1, 4]
    assert batch.header.last_offset == 4 and batch.header.record_count == 2


def test_offset_deltas_must_increase_and_stay_within_the_last_offset_delta() -> None:
    records = [hand_record(2, 0, None, b"a"), hand_record(2, 0, None, b"b")]
    _raises(hand_batch(records, last_offset_delta=3), MessageFormatError, "record 1",
            "offsetDelta 2 does not follow 2")
    records = [hand_record(0, 0, None, b"a"), hand_record(2, 0, None, b"b")]
    _raises(hand_batch(records), MessageFormatError, "record 1", "offsetDelta 2 is past "
            "lastOffsetDelta 1")


def test_a_bad_varint_is_named() -> None:
    record = b"\x0c\x00" + b"\xff" * 6  # a timestamp delta that never ends inside the record
    _raises(hand_batch([record]), MessageFormatError,
            "record 0 at byte 61: a varint runs past the end of the record")
    too_long = b"\x00\x00" + b"\xff" * 5 + b"\x01" + b"\x01\x01\x00"
    _raises(hand_batch([zigzag(len(too_long)) + too_long]), MessageFormatError,
            "longer than 5 bytes")
    with pytest.raises(MessageFormatError, match="does not fit an int32"):
        decode_varint(b"\xff\xff\xff\xff\x7f", 0, 5)


def test_a_record_length_that_does_not_match_its_fields() -> None:
    body = b"\x00\x00\x00\x01" + sized(b"abc") + b"\x00"
    _raises(hand_batch([zigzag(len(body) + 1) + body + b"\x00"]), MessageFormatError,
            "record 0", "length 10 does not match its fields (they take 9 bytes)")
    _raises(hand_batch([zigzag(len(body) - 1) + body]), MessageFormatError,
            "record 0", "length 8 does not match its fields (they run past it)")
    _raises(hand_batch([zigzag(len(body) + 50) + body]), MessageFormatError,
            "record 0 at byte 61", "length 59 does not fit")


@pytest.mark.parametrize("delta", [-1, -20, 1, 30])
def test_a_batch_length_too_small_or_too_large(delta: int) -> None:
    data = bytearray(GOOD + GOOD)
    struct.pack_into(">i", data, 8, len(GOOD) - 12 + delta)
    _raises(bytes(data), CorruptMessageError, "CRC-32C")
    exc = _raises(bytes(data), MessageFormatError, verify_crc=False)
    assert exc.offset == 50 and exc.position == 0


def test_a_batch_length_below_the_minimum_and_a_too_large_one_at_the_end() -> None:
    data = bytearray(GOOD)
    struct.pack_into(">i", data, 8, 48)
    _raises(bytes(data), MessageFormatError, "batchLength 48 is below the minimum 49")
    struct.pack_into(">i", data, 8, len(GOOD))  # past the end: a partial batch, left for later
    assert list(decode_batches(bytes(data))) == []


def test_a_compressed_section_that_does_not_decompress() -> None:
    data = hand_batch([b""], count=1, attributes=int(BatchCodec.ZSTD), section=b"nonsense")
    _raises(data, MessageFormatError, "cannot decompress zstd")
    bad = hand_batch([b""], count=1, attributes=int(BatchCodec.GZIP),
                     section=_gzip(hand_record(3, 0, None, b"a")))
    _raises(bad, MessageFormatError, "decompressed records", "offsetDelta 3")
    _raises(hand_batch([b""], count=1, attributes=6), MessageFormatError, "unknown compression")


@settings(max_examples=300, deadline=None)
@given(section=st.binary(max_size=80), count=st.integers(0, 6),
       codec=st.sampled_from([BatchCodec.NONE, BatchCodec.GZIP]))
def test_any_records_section_decodes_or_is_a_format_error(section: bytes, count: int,
                                                           codec: BatchCodec) -> None:
    """Garbage under a valid CRC and header: records, or a MessageFormatError -- nothing
    else escapes (no IndexError, no ValueError)."""
    stored = _gzip(section) if codec is BatchCodec.GZIP else section
    data = hand_batch([], count=count, last_offset_delta=max(count - 1, 0), section=stored,
                      attributes=int(codec))
    try:
        (batch,) = decode_batches(data)
    except MessageFormatError:
        return
    assert len(batch.records) == count


@settings(max_examples=200, deadline=None)
@given(at=st.integers(0, len(GOOD) - 1), byte=st.integers(0, 255))
def test_any_damaged_byte_is_found_or_harmless_without_the_crc(at: int, byte: int) -> None:
    data = bytearray(GOOD)
    data[at] = byte
    try:
        batches = list(decode_batches(bytes(data), verify_crc=False))
    except MessageFormatError:
        return
    assert len(batches) <= 1


# --- header patching ----------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(BatchCodec), ids=lambda c: c.name.lower())
def test_patching_keeps_the_crc_valid_and_the_records_as_they_were(codec: BatchCodec) -> None:
    data = encode_batch([(None, b"a", TS), (b"k", b"b", TS + 7)], codec=codec)
    patched = with_log_append_time(with_partition_leader_epoch(with_base_offset(data, 900), 4),
                                   TS + 99)
    assert patched[HEADER_BYTES:] == data[HEADER_BYTES:]
    (batch,) = decode_batches(patched)  # the CRC is checked
    assert (batch.header.base_offset, batch.header.partition_leader_epoch) == (900, 4)
    assert batch.header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [(r.offset, r.timestamp, r.value) for r in batch.records] == [
        (900, TS + 99, b"a"), (901, TS + 99, b"b")]


def test_patching_in_place_in_the_middle_of_a_buffer() -> None:
    buf = bytearray(GOOD + GOOD)
    set_log_append_time(buf, TS + 5, len(GOOD))
    first, second = decode_batches(bytes(buf))
    assert first.records[0].timestamp == TS and second.records[0].timestamp == TS + 5


@pytest.mark.parametrize("codec", [BatchCodec.NONE, BatchCodec.ZSTD], ids=lambda c: c.name.lower())
def test_without_producer_clears_the_identity_and_keeps_the_rest(codec: BatchCodec) -> None:
    data = encode_batch([(None, b"a", TS, (("h", b"v"),)), (b"k", b"b", TS + 7)], codec=codec,
                        base_offset=40, producer_id=12, producer_epoch=3, base_sequence=99,
                        partition_leader_epoch=6, is_transactional=True)
    plain = without_producer(GOOD + data, len(GOOD))
    assert plain[HEADER_BYTES:] == data[HEADER_BYTES:]  # the records as they were
    (batch,) = decode_batches(plain)  # the new CRC-32C is checked
    (source,) = decode_batches(data)
    h = batch.header
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (
        -1, -1, -1, False)
    assert (h.base_offset, h.partition_leader_epoch, h.codec, h.max_timestamp) == (
        40, 6, codec, TS + 7)
    assert batch.records == source.records


def test_an_empty_batch_is_read_but_not_written() -> None:
    empty = hand_batch([], count=0, last_offset_delta=4, producer_id=3)
    (batch,) = decode_batches(empty)
    assert batch.records == [] and batch.header.last_offset_delta == 4
    with pytest.raises(ValueError, match="at least one record"):
        encode_batch([])


# --- Kafka's own Python client ----------------------------------------------------------------

kafka_records = pytest.importorskip("kafka.record.default_records")

_KAFKA_CODECS = {BatchCodec.NONE: 0, BatchCodec.GZIP: 1, BatchCodec.SNAPPY: 2,
                 BatchCodec.LZ4: 3, BatchCodec.ZSTD: 4}


@pytest.mark.parametrize("codec", list(BatchCodec), ids=lambda c: c.name.lower())
def test_kafka_pythons_batches_are_read_as_it_wrote_them(codec: BatchCodec) -> None:
    builder = kafka_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=_KAFKA_CODECS[codec], is_transactional=False,
        producer_id=11, producer_epoch=2, base_sequence=30, batch_size=1 << 20)
    written = [(i, TS + i, b"k%d" % i if i % 2 else None, b"value %d" % i,
                [("h", b"x")] if i % 3 else []) for i in range(8)]
    for offset, ts, key, value, hdrs in written:
        builder.append(offset, timestamp=ts, key=key, value=value, headers=hdrs)
    data = bytes(builder.build())
    (batch,) = decode_batches(data)
    assert (batch.header.producer_id, batch.header.producer_epoch,
            batch.header.base_sequence, batch.header.codec) == (11, 2, 30, codec)
    assert batch.records == [BatchRecord(o, t, k, v, tuple(h)) for o, t, k, v, h in written]


@pytest.mark.parametrize("codec", list(BatchCodec), ids=lambda c: c.name.lower())
def test_our_batches_are_read_by_kafka_python(codec: BatchCodec) -> None:
    records = [Record(b"k" if i % 2 else None, b"v%d" % i, TS + i, (("h", b"%d" % i),))
               for i in range(6)]
    data = encode_batch(records, base_offset=77, codec=codec, producer_id=4, producer_epoch=0,
                        base_sequence=12)
    theirs = kafka_records.DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert (theirs.base_offset, theirs.producer_id, theirs.base_sequence,
            theirs.compression_type) == (77, 4, 12, int(codec))
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs] == [
        (77 + i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(records)]


def test_the_docs_worked_example_is_a_batch_kafka_python_reads() -> None:
    from protocol.record_batch_docs import example_batch

    data = example_batch()
    (batch,) = decode_batches(data)
    assert batch.records == [BatchRecord(41, 1_700_000_000_000, b"k1", b"hello",
                                         (("trace", b"t1"),))]
    (theirs,) = kafka_records.DefaultRecordBatch(data)
    assert (theirs.offset, theirs.key, theirs.value, list(theirs.headers)) == (
        41, b"k1", b"hello", [("trace", b"t1")])
