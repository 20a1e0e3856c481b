"""Stored message sets handed on unopened: ``cut_from`` (sans-IO), then ``Consumer.poll_sets``
and ``Producer.send_set`` against a real broker -- the pass-through a mirror is built on."""

from __future__ import annotations

import time
import zlib

import pytest

from client import Admin, Consumer, FetchedSet, IllegalStateError, Producer, TopicPartition
from client.errors import PrecedingSetFailedError
from client.message_sets import cut_from
from protocol.compression import Codec
from protocol.errors import CorruptMessageError, MessageTooLargeError
from protocol.messageset import (
    TimestampType,
    decode_messages,
    encode_message_set,
    read_entries,
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
def test_a_seek_into_a_wrapper_hands_out_the_messages_from_there(broker) -> None:
    with Producer(broker.bootstrap, compression="gzip", linger_ms=50) as producer:
        futures = [producer.send("one", b"v%d" % i, partition=0) for i in range(50)]
        producer.flush()
    assert futures[-1].result().offset == 49
    with Consumer(broker.bootstrap, message_sets=True) as consumer:
        tp = TopicPartition("one", 0)
        consumer.assign([tp])
        consumer.seek(tp, 17)
        sets = poll_sets_until(consumer, {tp: 50})
    messages = [m for s in sets for m in decode_messages(s.data)[0]]
    assert [m.offset for m in messages] == list(range(17, 50))
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
