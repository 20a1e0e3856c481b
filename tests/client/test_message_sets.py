"""Stored message sets handed on unopened: ``cut_from`` (sans-IO), then ``Consumer.poll_sets``
and ``Producer.send_set`` against a real broker -- the pass-through a mirror is built on."""

from __future__ import annotations

import time
import zlib

import pytest

from client import Admin, Consumer, FetchedSet, IllegalStateError, Producer, TopicPartition
from client.batch import SetBatch
from client.errors import PrecedingSetFailedError
from client.message_sets import cut_from
from protocol.compression import BatchCodec, Codec
from protocol.errors import CorruptMessageError, MessageTooLargeError
from protocol.messageset import (
    TimestampType,
    decode_messages,
    encode_message_set,
    read_entries,
)
from protocol.record_batch import (
    MAGIC,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORDS_AT,
    ControlRecordType,
    RecordBatch,
    control_record,
    decode_batches,
    encode_batch,
    encode_retained,
    with_log_append_time,
)

RECORDS = [(b"k%d" % i, b"value-%d" % i, 1_700_000_000_000 + i) for i in range(5)]


def stored(codec: Codec, base_offset: int, records=RECORDS, **kw) -> bytes:
    """A message set as a log stores it at ``base_offset``."""
    return encode_message_set(records, codec=codec, base_offset=base_offset, **kw)


def offsets_of(data: bytes) -> list[int]:
    return [m.offset for m in decode_messages(data)[0]]


# --------------------------------------------------------------------------------- cut_from


def test_plain_entries_before_the_position_are_dropped() -> None:
    data = stored(Codec.NONE, 10)
    cut = cut_from(data, 12, aligned=False, verify_crc=True)
    assert offsets_of(cut.data) == [12, 13, 14]
    assert cut.next_offset == 15 and cut.whole == len(data) and cut.damage is None


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.SNAPPY])
def test_a_wrapper_at_the_position_is_passed_on_byte_for_byte(codec: Codec) -> None:
    data = stored(codec, 0) + stored(codec, 5)
    cut = cut_from(data, 0, aligned=False, verify_crc=True)
    assert cut.data == data and cut.next_offset == 10
    later = cut_from(data, 5, aligned=True, verify_crc=True)
    assert later.data == stored(codec, 5)


@pytest.mark.parametrize("magic", [0, 1])
def test_a_wrapper_straddling_the_position_keeps_only_the_messages_from_it(magic: int) -> None:
    data = stored(Codec.GZIP, 0, magic=magic) + stored(Codec.LZ4, 5)
    cut = cut_from(data, 3, aligned=False, verify_crc=True)
    messages = decode_messages(cut.data)[0]
    assert [m.offset for m in messages] == [3, 4, 5, 6, 7, 8, 9]
    assert [(m.key, m.value) for m in messages[:2]] == [(k, v) for k, v, _ in RECORDS[3:]]
    (head, *_), _ = read_entries(cut.data)
    assert head.codec is Codec.GZIP and head.magic == magic  # compressed again, same codec
    assert cut.data.endswith(stored(Codec.LZ4, 5))  # the next wrapper untouched


def test_an_aligned_position_is_trusted_without_opening_the_wrapper() -> None:
    data = stored(Codec.GZIP, 0)
    # offset 3 is not a wrapper's start, but "aligned" says it is: nothing is opened
    assert cut_from(data, 3, aligned=True, verify_crc=True).data == data


def test_a_partial_trailing_entry_is_left_for_the_next_fetch() -> None:
    whole = stored(Codec.NONE, 0)
    data = whole + stored(Codec.NONE, 5)[:20]
    cut = cut_from(data, 0, aligned=True, verify_crc=True)
    assert cut.data == whole and cut.whole == len(whole) and cut.next_offset == 5


def test_a_first_entry_larger_than_the_chunk_has_no_whole_bytes() -> None:
    cut = cut_from(stored(Codec.LZ4, 0)[:30], 0, aligned=True, verify_crc=True)
    assert (cut.data, cut.whole, cut.next_offset, cut.damage) == (b"", 0, 0, None)


def test_a_damaged_entry_ends_the_set_and_names_its_offset() -> None:
    first, second = stored(Codec.NONE, 0, RECORDS[:2]), bytearray(stored(Codec.NONE, 2))
    second[-1] ^= 0xFF  # the last value byte of offset 6
    data = first + bytes(second)
    cut = cut_from(data, 0, aligned=True, verify_crc=True)
    assert offsets_of(cut.data) == [0, 1, 2, 3, 4, 5]
    assert isinstance(cut.damage, CorruptMessageError) and cut.damage.offset == 6


def test_log_append_time_is_rewritten_as_create_time_keeping_the_time() -> None:
    appended = 1_800_000_000_000
    plain = bytearray(stored(Codec.NONE, 0, RECORDS[:1],
                             timestamp_type=TimestampType.LOG_APPEND_TIME))
    plain[18:26] = appended.to_bytes(8, "big")  # the broker's stamp: time, then the CRC
    plain[12:16] = zlib.crc32(plain[16:]).to_bytes(4, "big")
    wrapper = stored(Codec.GZIP, 1, RECORDS[1:], timestamp_type=TimestampType.LOG_APPEND_TIME)
    cut = cut_from(bytes(plain) + wrapper, 0, aligned=True, verify_crc=True)
    entries, _ = read_entries(cut.data)  # CRCs checked
    assert [e.timestamp_type for e in entries] == [TimestampType.CREATE_TIME] * 2
    messages = decode_messages(cut.data)[0]
    assert messages[0].timestamp == appended
    assert {m.timestamp for m in messages[1:]} == {max(t for _, _, t in RECORDS[1:])}
    assert [m.value for m in messages] == [v for _, v, _ in RECORDS]


# ------------------------------------------------------------------ cut_from: record batches

HEADERS = (("trace", b"t-1"), ("empty", None))
BATCH_RECORDS = [(b"k%d" % i, b"value-%d" % i, 1_700_000_000_000 + i, HEADERS) for i in range(5)]


def batch(base_offset: int, codec: BatchCodec = BatchCodec.LZ4, records=BATCH_RECORDS,
          **kw) -> bytes:
    """A record batch as a log stores it, an idempotent producer's unless told otherwise."""
    kw = {"producer_id": 7, "producer_epoch": 2, "base_sequence": base_offset, **kw}
    return encode_batch(records, base_offset=base_offset, codec=codec, **kw)


def batches_of(data: bytes) -> list[RecordBatch]:
    return list(decode_batches(data))  # every CRC-32C checked


def test_batches_go_on_unopened_but_for_the_producer_identity() -> None:
    data = batch(0) + batch(5, BatchCodec.ZSTD)
    cut = cut_from(data, 0, aligned=True, verify_crc=True)
    assert cut.next_offset == 10 and cut.whole == len(data) and cut.damage is None
    out = batches_of(cut.data)
    assert [(b.header.producer_id, b.header.producer_epoch, b.header.base_sequence)
            for b in out] == [(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)] * 2
    assert [b.header.codec for b in out] == [BatchCodec.LZ4, BatchCodec.ZSTD]
    # the records section is the source's, byte for byte: nothing was compressed again
    assert cut.data[RECORDS_AT:len(batch(0))] == data[RECORDS_AT:len(batch(0))]
    records = [r for b in out for r in b.records]
    assert [(r.offset, r.key, r.timestamp, r.headers) for r in records] == [
        (i, k, t, h) for i, (k, _, t, h) in enumerate(BATCH_RECORDS * 2)]


def test_a_batch_of_no_producer_is_passed_on_byte_for_byte() -> None:
    data = batch(0, producer_id=-1, producer_epoch=-1, base_sequence=-1)
    assert cut_from(data, 0, aligned=True, verify_crc=True).data == data


def test_batches_before_the_position_are_dropped() -> None:
    data = batch(0) + batch(5)
    cut = cut_from(data, 5, aligned=True, verify_crc=True)
    assert [r.offset for b in batches_of(cut.data) for r in b.records] == [5, 6, 7, 8, 9]


@pytest.mark.parametrize("aligned", [False, True])
def test_a_straddled_batch_keeps_the_records_from_the_position(aligned: bool) -> None:
    data = batch(0, BatchCodec.GZIP) + batch(5)
    cut = cut_from(data, 3, aligned=aligned, verify_crc=True)
    head, tail = batches_of(cut.data)
    assert head.header.codec is BatchCodec.GZIP and head.header.producer_id == NO_PRODUCER_ID
    assert [(r.offset, r.key, r.timestamp, r.headers) for r in head.records] == [
        (3 + i, k, t, h) for i, (k, _, t, h) in enumerate(BATCH_RECORDS[3:])]
    assert [r.offset for r in tail.records] == [5, 6, 7, 8, 9]
    assert cut.next_offset == 10


def test_log_append_time_batches_are_written_as_create_time_with_the_batch_time() -> None:
    appended = 1_800_000_000_000
    data = with_log_append_time(batch(0), appended)
    (out,) = batches_of(cut_from(data, 0, aligned=True, verify_crc=True).data)
    assert out.header.timestamp_type is TimestampType.CREATE_TIME
    assert out.header.codec is BatchCodec.LZ4 and out.header.producer_id == NO_PRODUCER_ID
    assert [(r.timestamp, r.headers) for r in out.records] == [(appended, HEADERS)] * 5


def test_a_compacted_batch_is_written_again_with_offsets_without_gaps() -> None:
    source = batches_of(batch(0, BatchCodec.SNAPPY))[0]
    kept = [source.records[1], source.records[3]]
    data = encode_retained(source.header, kept) + batch(5)
    cut = cut_from(data, 0, aligned=True, verify_crc=True)
    head, tail = batches_of(cut.data)
    assert head.header.record_count == head.header.last_offset_delta + 1 == 2
    assert head.header.codec is BatchCodec.SNAPPY and head.header.producer_id == NO_PRODUCER_ID
    assert [(r.key, r.timestamp, r.headers) for r in head.records] == [
        (r.key, r.timestamp, r.headers) for r in kept]
    assert head.header.last_offset < tail.header.base_offset  # the set's offsets ascend
    assert cut.next_offset == 10


def test_control_and_empty_batches_are_dropped_and_passed() -> None:
    marker = encode_batch([control_record(ControlRecordType.COMMIT, 0, 1)], base_offset=5,
                          is_control=True, producer_id=7, producer_epoch=2)
    empty = encode_retained(batches_of(batch(6))[0].header, [])
    data = batch(0) + marker + empty + batch(11)
    cut = cut_from(data, 0, aligned=True, verify_crc=True)
    assert [r.offset for b in batches_of(cut.data) for r in b.records] == [
        0, 1, 2, 3, 4, 11, 12, 13, 14, 15]
    only_dropped = cut_from(marker + empty, 5, aligned=True, verify_crc=True)
    assert only_dropped.data == b"" and only_dropped.next_offset == 11  # moved past them


def test_a_set_ends_where_the_format_changes() -> None:
    v1, v2 = stored(Codec.NONE, 0), batch(5)
    first = cut_from(v1 + v2, 0, aligned=True, verify_crc=True)
    assert first.data == v1 and first.next_offset == 5
    second = cut_from(v2 + stored(Codec.NONE, 10), 5, aligned=True, verify_crc=True)
    assert [r.offset for b in batches_of(second.data) for r in b.records] == [5, 6, 7, 8, 9]
    assert second.next_offset == 10


@pytest.mark.parametrize("verify_crc", [True, False], ids=["crcs-checked", "crcs-not-checked"])
def test_a_damaged_batch_ends_the_set_and_names_its_offset(verify_crc: bool) -> None:
    """Without CRC checks too: a damaged batch is never given a new, valid CRC."""
    damaged = bytearray(batch(5))
    damaged[-1] ^= 0xFF
    cut = cut_from(batch(0) + bytes(damaged), 0, aligned=True, verify_crc=verify_crc)
    assert [r.offset for b in batches_of(cut.data) for r in b.records] == [0, 1, 2, 3, 4]
    assert isinstance(cut.damage, CorruptMessageError) and cut.damage.offset == 5


def test_a_set_of_batches_for_a_v1_leader_is_down_converted() -> None:
    data = cut_from(batch(0) + batch(5, BatchCodec.ZSTD), 0, aligned=True,
                    verify_crc=True).data
    sent = SetBatch(TopicPartition("t", 0), 0.0, lambda _: None, data)
    assert sent.encode(BatchCodec.NONE, MAGIC) == data
    v1 = sent.encode(BatchCodec.NONE, 1)
    entries, _ = read_entries(v1)  # CRCs checked
    assert {e.magic for e in entries} == {1}
    assert [(m.offset, m.key, m.timestamp) for m in decode_messages(v1)[0]] == [
        (i, k, t) for i, (k, _, t, _) in enumerate(BATCH_RECORDS * 2)]


# ----------------------------------------------------------------------- against a broker


def poll_sets_until(consumer: Consumer, ends: dict[TopicPartition, int],
                    timeout: float = 30.0) -> list[FetchedSet]:
    sets: list[FetchedSet] = []
    reached: dict[TopicPartition, int] = {}
    deadline = time.monotonic() + timeout
    while any(reached.get(tp, -1) < end for tp, end in ends.items()):
        assert time.monotonic() < deadline, f"reached {reached} of {ends} in time"
        for s in consumer.poll_sets(timeout_ms=200):
            sets.append(s)
            reached[TopicPartition(s.topic, s.partition)] = s.next_offset
    return sets


@pytest.mark.integration
@pytest.mark.parametrize("codec", ["none", "gzip", "lz4"])
def test_sets_copied_between_topics_are_the_same_bytes(broker, codec: str) -> None:
    with Producer(broker.bootstrap, compression=codec, linger_ms=5, acks="all") as producer:
        for i in range(3_000):
            producer.send("source", b"v%d" % i, key=b"k%d" % (i % 17))
        producer.flush()
        ends = {TopicPartition("source", p): -1 for p in producer.partitions_for("source")}
    consumer = Consumer(broker.bootstrap, message_sets=True, auto_offset_reset="earliest",
                        partition_fetch_bytes=4096)
    with consumer:
        consumer.assign(list(ends))
        ends = {tp: end for tp, end in consumer.end_offsets(list(ends)).items() if end}
        sets = poll_sets_until(consumer, ends)
        with pytest.raises(IllegalStateError, match="poll_sets"):
            consumer.poll()
    copied: dict[int, bytes] = {}
    with Producer(broker.bootstrap, acks="all", compression="snappy") as producer:
        futures = [producer.send_set("target", s.partition, s.data) for s in sets]
        for s, future in zip(sets, futures, strict=True):
            assert future.result(30).offset == s.offset  # both logs start at 0
            copied[s.partition] = copied.get(s.partition, b"") + s.data
    target_ends = {TopicPartition("target", p): end for p, end in
                   ((tp.partition, end) for tp, end in ends.items())}
    with Consumer(broker.bootstrap, message_sets=True, auto_offset_reset="earliest") as reader:
        reader.assign(list(target_ends))
        back: dict[int, bytes] = {}
        for s in poll_sets_until(reader, target_ends):
            back[s.partition] = back.get(s.partition, b"") + s.data
    assert back == copied  # offsets, wrappers and all: the target stored the source's bytes


@pytest.mark.integration
def test_a_seek_into_a_batch_hands_out_the_records_from_there(broker) -> None:
    with Producer(broker.bootstrap, compression="gzip", linger_ms=50) as producer:
        futures = [producer.send("one", b"v%d" % i, partition=0) for i in range(50)]
        producer.flush()
    assert futures[-1].result().offset == 49
    with Consumer(broker.bootstrap, message_sets=True) as consumer:
        tp = TopicPartition("one", 0)
        consumer.assign([tp])
        consumer.seek(tp, 17)
        sets = poll_sets_until(consumer, {tp: 50})
    records = [r for s in sets for b in batches_of(s.data) for r in b.records]
    assert [r.offset for r in records] == list(range(17, 50))
    assert sets[0].offset == 17


@pytest.mark.integration
def test_sets_queued_after_a_refused_set_fail_with_it(broker) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("small", 1, configs={"max_message_bytes": "1000"})
    fits, too_large = stored(Codec.NONE, 0), encode_message_set([(None, b"x" * 2000, 1)])
    with Producer(broker.bootstrap, acks="all") as producer:
        futures = [producer.send_set("small", 0, data) for data in (fits, too_large, fits)]
        producer.flush()
    assert futures[0].result().offset == 0
    with pytest.raises(MessageTooLargeError):
        futures[1].result()
    with pytest.raises(PrecedingSetFailedError, match="small-0") as raised:
        futures[2].result()
    assert isinstance(raised.value.__cause__, MessageTooLargeError)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("small", 0)])
        assert consumer.end_offsets([TopicPartition("small", 0)]) == {
            TopicPartition("small", 0): 5}  # the first set only: nothing after the gap
