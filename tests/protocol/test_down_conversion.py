"""Down-conversion of fetched ranges for readers of message formats v1 and v0: hand-built and
encoded v2 batches of every codec, mixed magics, offsets before the fetch offset, partial tails,
the size limit, zstd, damage, and Kafka's own Python client reading what comes out."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import record_batch
from protocol.compression import BatchCodec, Codec, compress
from protocol.down_conversion import (
    UNSUPPORTED_COMPRESSION_TYPE,
    DownConverted,
    UnsupportedCompressionError,
    ZstdPolicy,
    down_convert,
)
from protocol.errors import CorruptMessageError, MessageFormatError
from protocol.messageset import (
    CODEC_MASK,
    Message,
    TimestampType,
    decode_messages,
    encode_message,
    encode_message_set,
    inner_entries,
    read_entries,
)
from protocol.record_batch import (
    CONTROL_BIT,
    ControlRecordType,
    Record,
    control_record,
    decode_batches,
    encode_batch,
    encode_retained,
    read_batch_header,
)
from tests.protocol.test_record_batch import hand_batch, hand_record

TS = 1_700_000_000_000
CREATE, APPEND = TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME
V1_CODECS = [BatchCodec.NONE, BatchCodec.GZIP, BatchCodec.SNAPPY, BatchCodec.LZ4]


def convert(
    data: bytes,
    to_magic: int = 1,
    fetch_offset: int = 0,
    *,
    max_bytes: int | None = None,
    zstd: ZstdPolicy = ZstdPolicy.REFUSE,
    base_position: int = 0,
) -> DownConverted:
    return down_convert(data, to_magic=to_magic, fetch_offset=fetch_offset, max_bytes=max_bytes,
                        zstd=zstd, base_position=base_position)


def messages(data: bytes) -> list[Message]:
    """The converted set read back by the v0/v1 decoder, which checks every CRC; it must be
    whole."""
    out, whole = decode_messages(data)
    assert whole == len(data)
    return out


# --- one v2 batch ----------------------------------------------------------------------------


def test_a_hand_built_batch_with_headers_and_nulls_becomes_v1_messages() -> None:
    data = hand_batch([
        hand_record(0, 0, b"k", b"hello", ((b"trace", b"abc"), (b"empty", None))),
        hand_record(1, 5, None, b"v"),
        hand_record(2, -3, b"tomb", None),
        hand_record(3, 7, None, None),
    ], base_offset=100, max_ts=TS + 7, producer_id=7, producer_epoch=1, base_sequence=40)
    result = convert(data, fetch_offset=100)
    assert (result.consumed, result.next_offset, result.converted) == (len(data), 104, 4)
    assert messages(result.records) == [
        Message(100, TS, 0, b"k", b"hello"),  # headers dropped: v1 cannot carry them
        Message(101, TS + 5, 0, None, b"v"),
        Message(102, TS - 3, 0, b"tomb", None),
        Message(103, TS + 7, 0, None, None),
    ]
    entries, _ = read_entries(result.records)  # plain v1 messages, one per record
    assert [(e.offset, e.magic, e.attributes) for e in entries] == [(100 + i, 1, 0)
                                                                   for i in range(4)]


@pytest.mark.parametrize("codec", V1_CODECS[1:], ids=lambda c: c.name.lower())
def test_a_hand_built_compressed_batch_becomes_a_wrapper_of_the_same_codec(
    codec: BatchCodec,
) -> None:
    records = [hand_record(i, i, None, b"value %d" % i, ((b"h", b"%d" % i),)) for i in range(5)]
    data = hand_batch(records, attributes=int(codec), base_offset=10, max_ts=TS + 4,
                      section=compress(codec, b"".join(records), magic=2))
    result = convert(data)
    (wrapper,), whole = read_entries(result.records)
    assert whole == len(result.records)
    assert (wrapper.magic, wrapper.codec, wrapper.offset, wrapper.timestamp) == (
        1, Codec(int(codec)), 14, TS + 4)
    # inner offsets relative, as v1 requires; the wrapper's is the last record's
    assert [e.offset for e in inner_entries(wrapper)] == [0, 1, 2, 3, 4]
    assert messages(result.records) == [Message(10 + i, TS + i, 0, None, b"value %d" % i)
                                        for i in range(5)]


@pytest.mark.parametrize("codec", V1_CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("ts_type", [CREATE, APPEND], ids=["create", "append"])
def test_an_encoded_batch_keeps_offsets_keys_values_and_timestamps(
    codec: BatchCodec, ts_type: TimestampType,
) -> None:
    records = [Record(b"k%d" % i if i % 2 else None, b"v%d" % i if i % 3 else None, TS + i,
                      (("h", b"x"),)) for i in range(7)]
    data = encode_batch(records, base_offset=500, codec=codec, timestamp_type=ts_type)
    if ts_type is APPEND:
        (batch,) = decode_batches(data)
        assert batch.header.max_timestamp == TS + 6
    result = convert(data, fetch_offset=500)
    expected_ts = [TS + 6] * 7 if ts_type is APPEND else [TS + i for i in range(7)]
    assert messages(result.records) == [
        Message(500 + i, expected_ts[i], int(ts_type), r.key, r.value)
        for i, r in enumerate(records)
    ]
    (first, *_), _ = read_entries(result.records)
    assert first.codec == Codec(int(codec))
    assert first.timestamp_type is ts_type


def test_a_control_batch_disappears_and_is_passed_over() -> None:
    marker = encode_batch([control_record(ControlRecordType.COMMIT, 3, TS)], base_offset=5,
                          is_control=True, is_transactional=True, producer_id=9,
                          producer_epoch=0)
    data = encode_batch([Record(None, b"a", TS)], base_offset=4) + marker + encode_batch(
        [Record(None, b"b", TS)], base_offset=6)
    result = convert(data, fetch_offset=4)
    assert [(m.offset, m.value) for m in messages(result.records)] == [(4, b"a"), (6, b"b")]
    only_marker = convert(marker, fetch_offset=5)
    assert only_marker == DownConverted(b"", len(marker), 6, 0)


def test_a_hand_built_control_batch_disappears() -> None:
    key, value = struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 1)  # ABORT
    data = hand_batch([hand_record(0, 0, key, value)], base_offset=8,
                      attributes=CONTROL_BIT | 0x10, producer_id=5, producer_epoch=2)
    assert convert(data, fetch_offset=8) == DownConverted(b"", len(data), 9, 0)


def test_records_before_the_fetch_offset_are_left_out() -> None:
    for codec in V1_CODECS:
        data = encode_batch([Record(None, b"%d" % i, TS + i) for i in range(10)],
                            base_offset=20, codec=codec)
        result = convert(data, fetch_offset=26)
        assert [(m.offset, m.value) for m in messages(result.records)] == [
            (26 + i, b"%d" % (6 + i)) for i in range(4)], codec
        assert (result.next_offset, result.converted) == (30, 4)
        # a batch wholly before the fetch offset gives nothing but is passed over
        assert convert(data, fetch_offset=30) == DownConverted(b"", len(data), 30, 0)


# --- zstd -------------------------------------------------------------------------------------


def test_zstd_is_refused_as_kafka_refuses_it_unless_asked_to_decompress() -> None:
    zstd = encode_batch([Record(b"k", b"z%d" % i, TS) for i in range(3)], base_offset=3,
                        codec=BatchCodec.ZSTD)
    with pytest.raises(UnsupportedCompressionError) as caught:
        convert(zstd, fetch_offset=3, base_position=4096)
    assert (caught.value.offset, caught.value.position, caught.value.error_code) == (
        3, 4096, UNSUPPORTED_COMPRESSION_TYPE)
    # after something that can be sent, the range ends before it: the next fetch is refused
    before = encode_batch([Record(None, b"a", TS)], base_offset=2)
    result = convert(before + zstd, fetch_offset=2)
    assert (result.consumed, result.next_offset, messages(result.records)) == (
        len(before), 3, [Message(2, TS, 0, None, b"a")])
    decompressed = convert(before + zstd, fetch_offset=2, zstd=ZstdPolicy.DECOMPRESS)
    entries, _ = read_entries(decompressed.records)
    assert not any(e.attributes & CODEC_MASK for e in entries)
    assert [(m.offset, m.key, m.value) for m in messages(decompressed.records)] == [
        (2, None, b"a"), (3, b"k", b"z0"), (4, b"k", b"z1"), (5, b"k", b"z2")]


def test_a_zstd_batch_before_the_fetch_offset_is_not_refused() -> None:
    zstd = encode_batch([Record(None, b"z", TS)], base_offset=0, codec=BatchCodec.ZSTD)
    after = encode_batch([Record(None, b"a", TS)], base_offset=1)
    result = convert(zstd + after, fetch_offset=1)
    assert messages(result.records) == [Message(1, TS, 0, None, b"a")]


# --- mixed magics -----------------------------------------------------------------------------


def mixed_log(
    v1_codec: Codec = Codec.LZ4,
) -> tuple[bytes, list[tuple[int, bytes | None, bytes | None, int]], list[int]]:
    """A range holding every format as a log may: v0 plain, v0 gzip wrapper, v1 plain, v1 lz4
    (``v1_codec``) wrapper, v2 snappy, a control batch, v2 plain with headers. Returns the
    bytes, the expected (offset, key, value, timestamp) of every message (v1 reader), and where
    each entry starts."""
    parts = [
        encode_message(0, b"a", b"v0 plain", magic=0),
        encode_message_set([(None, b"v0 in gzip %d" % i, -1) for i in range(2)],
                           codec=Codec.GZIP, base_offset=1, magic=0),
        encode_message(3, None, b"v1 plain", TS + 3),
        encode_message_set([(b"k", b"v1 in lz4 %d" % i, TS + 4 + i) for i in range(3)],
                           codec=v1_codec, base_offset=4),
        encode_batch([Record(b"s", b"v2 snappy %d" % i, TS + 7 + i, (("h", b"1"),))
                      for i in range(2)], base_offset=7, codec=BatchCodec.SNAPPY),
        encode_batch([control_record(ControlRecordType.ABORT, 0, TS + 9)], base_offset=9,
                     is_control=True, is_transactional=True, producer_id=1, producer_epoch=0),
        encode_batch([Record(None, b"v2 plain", TS + 10, (("h", None),))], base_offset=10),
    ]
    expected: list[tuple[int, bytes | None, bytes | None, int]] = [
        (0, b"a", b"v0 plain", -1), (1, None, b"v0 in gzip 0", -1),
                (2, None, b"v0 in gzip 1", -1), (3, None, b"v1 plain", TS + 3)]
    expected += [(4 + i, b"k", b"v1 in lz4 %d" % i, TS + 4 + i) for i in range(3)]
    expected += [(7 + i, b"s", b"v2 snappy %d" % i, TS + 7 + i) for i in range(2)]
    expected += [(10, None, b"v2 plain", TS + 10)]
    starts = [0]
    for part in parts:
        starts.append(starts[-1] + len(part))
    return b"".join(parts), expected, starts


def test_mixed_magics_for_a_v1_reader_pass_v0_and_v1_through_byte_for_byte() -> None:
    data, expected, starts = mixed_log()
    result = convert(data)
    assert (result.consumed, result.next_offset, result.converted) == (len(data), 11, 3)
    assert [(m.offset, m.key, m.value, m.timestamp) for m in messages(result.records)] == expected
    assert result.records.startswith(data[: starts[4]])  # the v0 and v1 entries, untouched
    assert peek_magics(result.records) == [0, 0, 1, 1, 1, 1]


def test_mixed_magics_for_a_v0_reader_are_all_v0() -> None:
    data, expected, starts = mixed_log()
    result = convert(data, to_magic=0)
    assert (result.consumed, result.next_offset) == (len(data), 11)
    assert [(m.offset, m.key, m.value, m.timestamp) for m in messages(result.records)] == [
        (o, k, v, -1) for o, k, v, _ in expected]
    assert result.records.startswith(data[: starts[2]])  # the v0 entries, untouched
    entries, _ = read_entries(result.records)
    assert [e.magic for e in entries] == [0] * len(entries)
    for wrapper in (e for e in entries if e.attributes & CODEC_MASK):
        inner = inner_entries(wrapper)  # absolute offsets inside, as magic 0 has them
        assert {e.magic for e in inner} == {0} and inner[-1].offset == wrapper.offset
    assert [e.codec for e in entries if e.attributes & CODEC_MASK] == [
        Codec.GZIP, Codec.LZ4, Codec.SNAPPY]


def peek_magics(data: bytes) -> list[int]:
    entries, _ = read_entries(data)
    return [e.magic for e in entries]


def test_a_v1_wrapper_for_a_v0_reader_leaves_out_what_is_before_the_fetch_offset() -> None:
    data = encode_message_set([(None, b"%d" % i, TS) for i in range(4)], codec=Codec.GZIP,
                              base_offset=40)
    result = convert(data, to_magic=0, fetch_offset=42)
    assert [(m.offset, m.value) for m in messages(result.records)] == [(42, b"2"), (43, b"3")]
    assert convert(data, to_magic=1, fetch_offset=42).records == data  # v1 reader: untouched


@pytest.mark.parametrize("to_magic", [0, 1])
def test_every_cut_of_the_range_gives_the_whole_entries_before_it(to_magic: int) -> None:
    data, _, starts = mixed_log()
    whole = convert(data, to_magic=to_magic)
    for cut in range(len(data) + 1):
        result = convert(data[:cut], to_magic=to_magic)
        boundary = max(s for s in starts if s <= cut)
        assert result.consumed == boundary, cut
        assert result == convert(data[:boundary], to_magic=to_magic), cut
        assert whole.records.startswith(result.records), cut


# --- the size limit ---------------------------------------------------------------------------


def test_max_bytes_bounds_the_output_but_the_first_entry_is_always_whole() -> None:
    batches = [encode_batch([Record(None, b"x" * 100, TS)] * 5, base_offset=5 * i)
               for i in range(4)]
    data = b"".join(batches)
    one = len(convert(batches[0]).records)
    tiny = convert(data, max_bytes=1)
    assert (len(tiny.records), tiny.consumed, tiny.next_offset) == (one, len(batches[0]), 5)
    two = convert(data, max_bytes=2 * one + one - 1)
    assert (len(two.records), two.consumed, two.next_offset) == (
        2 * one, len(batches[0]) + len(batches[1]), 10)
    assert convert(data, max_bytes=4 * one).consumed == len(data)
    # the rest, fetched next from where it stopped, completes it
    rest = convert(data[two.consumed :], fetch_offset=two.next_offset)
    assert two.records + rest.records == convert(data).records


# --- damage -----------------------------------------------------------------------------------

GOOD = encode_batch([Record(b"k", b"value %d" % i, TS + i, (("h", b"x"),)) for i in range(3)],
                    base_offset=50, codec=BatchCodec.LZ4)


def test_a_damaged_batch_raises_what_the_v2_decoder_raises() -> None:
    damaged = bytearray(GOOD)
    damaged[-1] ^= 0xFF
    with pytest.raises(CorruptMessageError) as ours:
        convert(bytes(damaged))
    with pytest.raises(CorruptMessageError) as decoders:
        list(decode_batches(bytes(damaged)))
    assert str(ours.value) == str(decoders.value)


@settings(max_examples=300, deadline=None)
@given(at=st.integers(0, len(GOOD) - 1), byte=st.integers(0, 255))
def test_any_damaged_byte_gives_the_decoders_error_or_its_records(at: int, byte: int) -> None:
    damaged = bytearray(GOOD)
    damaged[at] = byte
    prefix = encode_message(0, None, b"before", TS)  # positions count from the range's start
    data = prefix + bytes(damaged)
    if at == 16 and byte != 2:
        # the magic byte is what tells the formats apart (and no CRC covers it): the entry is
        # taken for what it now says, and read as that format or refused as unknown
        if byte > 2:
            with pytest.raises(MessageFormatError, match=f"unknown magic {byte}"):
                convert(data)
        return
    try:
        batches = list(decode_batches(bytes(damaged), base_position=len(prefix)))
    except MessageFormatError as exc:
        with pytest.raises(type(exc)) as caught:
            convert(data)
        assert str(caught.value) == str(exc)
        return
    result = convert(data)  # the damage was outside the CRC: the batch reads as it now says
    assert result.consumed == len(prefix) + sum(b.header.size for b in batches)


def test_an_unknown_magic_and_a_bad_size_are_format_errors() -> None:
    bad_magic = bytearray(encode_message(7, None, b"v", TS))
    bad_magic[16] = 3
    with pytest.raises(MessageFormatError, match="unknown magic 3"):
        convert(bytes(bad_magic))
    tiny = struct.pack(">qi", 7, 2) + bytes(20)
    tiny = tiny[:16] + b"\x01" + tiny[17:]
    with pytest.raises(MessageFormatError, match="below the minimum"):
        convert(tiny)
    with pytest.raises(ValueError, match="magic 2"):
        down_convert(GOOD, to_magic=2, fetch_offset=0)


# --- round trip -------------------------------------------------------------------------------

timestamps = st.integers(0, 1 << 45)
headers = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)),
                   max_size=3).map(tuple)
records = st.lists(
    st.builds(Record, st.none() | st.binary(max_size=200), st.none() | st.binary(max_size=200),
              timestamps, headers),
    min_size=1, max_size=20,
)


@settings(max_examples=150, deadline=None)
@given(batches=st.lists(st.tuples(records, st.sampled_from(V1_CODECS),
                                  st.sampled_from([CREATE, APPEND])), min_size=1, max_size=4),
       base_offset=st.integers(0, 1 << 40), to_magic=st.sampled_from([0, 1]))
def test_round_trip(batches: list[tuple[list[Record], BatchCodec, TimestampType]],
                    base_offset: int, to_magic: int) -> None:
    data = b""
    expected: list[Message] = []
    offset = base_offset
    for recs, codec, ts_type in batches:
        data += encode_batch(recs, base_offset=offset, codec=codec, timestamp_type=ts_type)
        max_ts = max(r.timestamp for r in recs)
        for r in recs:
            if to_magic == 0:
                expected.append(Message(offset, -1, 0, r.key, r.value))
            else:
                ts = max_ts if ts_type is APPEND else r.timestamp
                expected.append(Message(offset, ts, int(ts_type), r.key, r.value))
            offset += 1
    result = convert(data, to_magic=to_magic, fetch_offset=base_offset)
    assert messages(result.records) == expected
    assert (result.consumed, result.next_offset, result.converted) == (
        len(data), offset, len(expected))


# --- Kafka's own client reads what comes out --------------------------------------------------

legacy = pytest.importorskip("kafka.record.legacy_records")
memory_records = pytest.importorskip("kafka.record.memory_records")


def kafka_python_reads(data: bytes) -> list[tuple[int, int, int, bytes | None, bytes | None]]:
    """Every record kafka-python's MemoryRecords finds, each batch's CRC checked by it."""
    out = []
    theirs = memory_records.MemoryRecords(data)
    while (batch := theirs.next_batch()) is not None:
        assert isinstance(batch, legacy.LegacyRecordBatch)
        assert batch.validate_crc()
        out += [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value) for r in batch]
    return out


@pytest.mark.parametrize("codec", V1_CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("ts_type", [CREATE, APPEND], ids=["create", "append"])
def test_kafka_python_reads_the_converted_set(codec: BatchCodec, ts_type: TimestampType) -> None:
    recs = [Record(b"k" if i % 2 else None, b"v%d" % i, TS + i, (("h", b"%d" % i),))
            for i in range(6)]
    data = encode_batch(recs, base_offset=77, codec=codec, timestamp_type=ts_type)
    result = convert(data, fetch_offset=77)
    timestamps_ = [TS + 5] * 6 if ts_type is APPEND else [TS + i for i in range(6)]
    assert kafka_python_reads(result.records) == [
        (77 + i, timestamps_[i], int(ts_type), r.key, r.value) for i, r in enumerate(recs)]


@pytest.mark.parametrize("to_magic", [0, 1])
def test_kafka_python_reads_a_converted_mixed_range(to_magic: int) -> None:
    # kafka-python reads lz4 inside magic 0 only with the optional xxhash module: gzip there
    data, expected, _ = mixed_log(Codec.LZ4 if to_magic else Codec.GZIP)
    result = convert(data, to_magic=to_magic)
    theirs = kafka_python_reads(result.records)
    assert [(o, k, v) for o, _, _, k, v in theirs] == [(o, k, v) for o, k, v, _ in expected]
    if to_magic == 1:
        assert [t for _, t, _, _, _ in theirs][3:] == [t for _, _, _, t in expected][3:]


# --- the benchmark's line ---------------------------------------------------------------------


def test_the_codec_benchmark_measures_down_conversion(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from benchmarks.codec import down_conversion_cases

    down_conversion_cases(0.05)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {line["codec"] for line in lines if line["bench"] == "down_conversion"} == {
        "none", "lz4"}
    assert all(line["mb_per_s"] > 0 and line["us_per_fetched_mb"] > 0 for line in lines)


# --- compacted batches: gaps between offsets, empty batches ----------------------------------


@pytest.mark.parametrize("codec", V1_CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("ts_type", [CREATE, APPEND], ids=["create", "append"])
@pytest.mark.parametrize("to_magic", [1, 0])
def test_a_compacted_batch_keeps_each_records_offset(
    codec: BatchCodec, ts_type: TimestampType, to_magic: int,
) -> None:
    full = encode_batch([Record(b"k%d" % i, b"v%d" % i, TS + i) for i in range(6)],
                        base_offset=200, codec=codec, timestamp_type=ts_type)
    header = read_batch_header(full)
    assert header is not None
    (batch,) = decode_batches(full)
    kept = [batch.records[i] for i in (1, 2, 4)]
    data = encode_retained(header, kept) + encode_batch([Record(b"z", b"after", TS)],
                                                        base_offset=206)
    result = convert(data, to_magic=to_magic, fetch_offset=201)
    got = messages(result.records)
    assert [(m.offset, m.key, m.value) for m in got] == [
        (201, b"k1", b"v1"), (202, b"k2", b"v2"), (204, b"k4", b"v4"), (206, b"z", b"after")]
    if to_magic == 1:
        expected_ts = TS + 5 if ts_type is APPEND else None
        assert [m.timestamp for m in got[:3]] == (
            [expected_ts] * 3 if expected_ts else [TS + 1, TS + 2, TS + 4])
    assert result.next_offset == 207


def test_an_empty_batch_compaction_left_converts_to_nothing_and_is_passed_over() -> None:
    full = encode_batch([Record(b"k", b"v", TS)] * 3, base_offset=10, producer_id=4,
                        producer_epoch=0, base_sequence=0)
    header = read_batch_header(full)
    assert header is not None
    data = encode_retained(header, []) + encode_batch([Record(b"k", b"w", TS)], base_offset=13)
    result = convert(data, fetch_offset=10)
    assert [(m.offset, m.value) for m in messages(result.records)] == [(13, b"w")]
    empty_only = convert(encode_retained(header, []), fetch_offset=10)
    assert (empty_only.records, empty_only.converted) == (b"", 0)
    assert empty_only.consumed == record_batch.HEADER_BYTES
