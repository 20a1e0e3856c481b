"""Fetched chunks of any mix of message formats decoded into records (client.fetched_records):
v0/v1 message sets and v2 record batches, partial tails, control batches, fetch offsets inside
a batch, damage."""

from __future__ import annotations

import pytest

from client.fetched_records import decode_chunk
from client.records import ConsumerRecord, TopicPartition
from protocol.compression import BatchCodec, Codec
from protocol.errors import CorruptMessageError
from protocol.messageset import encode_message_set
from protocol.record_batch import ControlRecordType, control_record, encode_batch

TP = TopicPartition("t", 2)


def v1(base: int, n: int, codec: Codec = Codec.NONE, magic: int = 1) -> bytes:
    return encode_message_set([(b"k%d" % i, b"v1-%d" % (base + i), 100 + base + i)
                               for i in range(n)], codec=codec, base_offset=base, magic=magic)


def v2(base: int, n: int, codec: BatchCodec = BatchCodec.NONE, **kw) -> bytes:
    return encode_batch([(b"k%d" % i, b"v2-%d" % (base + i), 100 + base + i,
                          (("n", b"%d" % (base + i)), ("none", None))) for i in range(n)],
                        codec=codec, base_offset=base, **kw)


def values(records: list[ConsumerRecord]) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in records]


def test_a_record_batch_gives_records_with_their_headers() -> None:
    chunk = decode_chunk(TP, v2(5, 3), 5)
    assert chunk.records[0] == ConsumerRecord(
        "t", 2, 5, 105, 0, b"k0", b"v2-5", (("n", b"5"), ("none", None)))
    assert values(chunk.records) == [(5, b"v2-5"), (6, b"v2-6"), (7, b"v2-7")]
    assert (chunk.next_offset, chunk.damage) == (8, None)


def test_v0_and_v1_messages_have_no_headers() -> None:
    for magic in (0, 1):
        (record,) = decode_chunk(TP, v1(0, 1, magic=magic), 0).records
        assert record.headers == ()
        assert record.value == b"v1-0"


@pytest.mark.parametrize("codec", list(BatchCodec))
def test_every_codec_of_record_batches_is_read(codec: BatchCodec) -> None:
    chunk = decode_chunk(TP, v2(0, 50, codec), 0)
    assert values(chunk.records) == [(i, b"v2-%d" % i) for i in range(50)]
    assert chunk.records[49].headers == (("n", b"49"), ("none", None))


def test_every_mix_of_formats_in_one_chunk_is_read_in_offset_order() -> None:
    data = (v1(0, 2) + v2(2, 3) + v1(5, 2, Codec.GZIP) + v2(7, 2, BatchCodec.ZSTD)
            + v1(9, 1, magic=0) + v2(10, 1, BatchCodec.LZ4))
    chunk = decode_chunk(TP, data, 0)
    assert [r.offset for r in chunk.records] == list(range(11))
    assert [r.value[:2] for r in chunk.records] == [b"v1"] * 2 + [b"v2"] * 3 + [b"v1"] * 2 + [
        b"v2"] * 2 + [b"v1", b"v2"]
    assert [bool(r.headers) for r in chunk.records] == [r.value.startswith(b"v2")
                                                       for r in chunk.records]
    assert (chunk.whole, chunk.next_offset, chunk.damage) == (len(data), 11, None)


@pytest.mark.parametrize("cut", [1, 12, 17, 30, 39])
def test_a_partial_batch_or_entry_at_the_end_is_left_for_the_next_fetch(cut: int) -> None:
    for head, tail in ((v1(0, 2), v2(2, 1)), (v2(0, 2), v1(2, 1)), (v2(0, 2), v2(2, 1))):
        assert cut < len(tail)
        chunk = decode_chunk(TP, head + tail[:cut], 0)
        assert [r.offset for r in chunk.records] == [0, 1]
        assert (chunk.whole, chunk.next_offset, chunk.damage) == (len(head), 2, None)


def test_a_chunk_holding_only_part_of_its_first_batch_is_not_whole() -> None:
    chunk = decode_chunk(TP, v2(0, 3)[:40], 0)
    assert (chunk.records, chunk.whole, chunk.next_offset) == ([], 0, 0)


def test_records_below_the_fetch_offset_in_a_batch_are_left_out() -> None:
    data = v2(0, 10, BatchCodec.GZIP) + v1(10, 2)
    chunk = decode_chunk(TP, data, 7)
    assert [r.offset for r in chunk.records] == [7, 8, 9, 10, 11]
    assert chunk.next_offset == 12


def test_control_and_empty_batches_are_skipped_but_move_the_position() -> None:
    marker = encode_batch([control_record(ControlRecordType.COMMIT, 0, 1)], base_offset=3,
                          producer_id=9, producer_epoch=0, is_transactional=True,
                          is_control=True)
    chunk = decode_chunk(TP, v2(0, 3) + marker, 0)
    assert [r.offset for r in chunk.records] == [0, 1, 2]
    assert chunk.next_offset == 4
    only = decode_chunk(TP, marker, 3)
    assert (only.records, only.whole, only.next_offset) == ([], len(marker), 4)


def test_log_append_time_batches_say_so() -> None:
    from protocol.messageset import TimestampType
    from protocol.record_batch import with_log_append_time
    batch = with_log_append_time(v2(0, 2), 999)
    records = decode_chunk(TP, batch, 0).records
    assert [(r.timestamp, r.timestamp_type) for r in records] == [(999, 1), (999, 1)]
    assert TimestampType.LOG_APPEND_TIME == 1


def test_a_damaged_batch_ends_the_records_and_is_reported_with_its_offset() -> None:
    good = v1(0, 2) + v2(2, 2)
    bad = bytearray(v2(4, 3))
    bad[-1] ^= 0x01
    chunk = decode_chunk(TP, good + bytes(bad) + v2(7, 1), 0)
    assert [r.offset for r in chunk.records] == [0, 1, 2, 3]
    assert isinstance(chunk.damage, CorruptMessageError)
    assert "CRC-32C" in str(chunk.damage)
    assert chunk.damage.offset == 4
    assert (chunk.whole, chunk.next_offset) == (len(good), 4)


def test_crcs_are_not_checked_when_the_consumer_says_not_to() -> None:
    bad = bytearray(v2(0, 3))
    bad[-1] ^= 0x01  # a value byte: still a well-formed batch
    chunk = decode_chunk(TP, bytes(bad), 0, verify_crc=False)
    assert [r.offset for r in chunk.records] == [0, 1, 2]
    assert chunk.damage is None


def test_a_damaged_v1_entry_after_a_batch_keeps_the_records_before_it() -> None:
    bad = bytearray(v1(3, 2))
    bad[-1] ^= 0x01  # the second message's value: its CRC no longer matches
    chunk = decode_chunk(TP, v2(0, 3) + bytes(bad), 0)
    assert [r.offset for r in chunk.records] == [0, 1, 2, 3]
    assert isinstance(chunk.damage, CorruptMessageError)
    assert chunk.damage.offset == 4
