"""The consumer against the in-memory fake broker: positions, partial chunks, large messages,
compressed wrappers, resets."""

from __future__ import annotations

import re
import time

import pytest

from client import (
    Consumer,
    ConsumerRecord,
    NoOffsetForPartitionError,
    Producer,
    RecordTooLargeError,
    TopicPartition,
)
from client.errors import ConfigError, CorruptRecordError, IllegalStateError
from protocol.errors import OffsetOutOfRangeError
from tests.client.fake_broker import FakeBroker

T0 = TopicPartition("t", 0)


def produce(fake: FakeBroker, values: list[bytes], topic: str = "t", **settings) -> None:
    with Producer(fake.bootstrap, **settings) as producer:
        for value in values:
            producer.send(topic, value, partition=0 if topic == "t" else None)


def poll_until(consumer: Consumer, n: int, timeout: float = 10.0) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(records) < n:
        assert time.monotonic() < deadline, f"only {len(records)} of {n} records in time"
        records += consumer.poll(timeout_ms=200)
    return records


def test_reads_everything_in_order_with_positions(fake: FakeBroker) -> None:
    values = [b"m%03d" % i for i in range(300)]
    produce(fake, values, batch_bytes=1000)
    with Consumer(fake.bootstrap, auto_offset_reset="earliest", max_poll_records=70) as consumer:
        consumer.assign([T0])
        first = consumer.poll(timeout_ms=5000)
        assert 0 < len(first) <= 70
        assert consumer.position(T0) == first[-1].offset + 1
        records = first + poll_until(consumer, 300 - len(first))
    assert [r.value for r in records] == values
    assert [r.offset for r in records] == list(range(300))
    assert {(r.topic, r.partition, r.key) for r in records} == {("t", 0, None)}


def test_partial_trailing_messages_are_fetched_again(fake: FakeBroker) -> None:
    values = [b"v" * (i % 50) for i in range(200)]
    produce(fake, values)
    # 100-byte chunks: nearly every chunk ends in the middle of a message.
    with Consumer(
        fake.bootstrap, auto_offset_reset="earliest", partition_fetch_bytes=100
    ) as consumer:
        consumer.assign([T0])
        records = poll_until(consumer, 200)
    assert [r.value for r in records] == values


def test_a_message_larger_than_the_fetch_size_is_fetched_with_a_bigger_one(
    fake: FakeBroker,
) -> None:
    produce(fake, [b"small", b"L" * 5000, b"after"])
    with Consumer(
        fake.bootstrap,
        auto_offset_reset="earliest",
        partition_fetch_bytes=64,
        max_partition_fetch_bytes=8192,
    ) as consumer:
        consumer.assign([T0])
        records = poll_until(consumer, 3)
    assert [len(r.value or b"") for r in records] == [5, 5000, 5]


def test_a_message_larger_than_max_partition_fetch_bytes_is_a_clear_error(
    fake: FakeBroker,
) -> None:
    produce(fake, [b"small", b"L" * 5000])
    with Consumer(
        fake.bootstrap,
        auto_offset_reset="earliest",
        partition_fetch_bytes=64,
        max_partition_fetch_bytes=1024,
    ) as consumer:
        consumer.assign([T0])
        assert [r.value for r in poll_until(consumer, 1)] == [b"small"]
        with pytest.raises(RecordTooLargeError, match=r"t-0 offset 1 needs \d+ bytes") as info:
            for _ in range(50):
                consumer.poll(timeout_ms=200)
        assert (info.value.partition, info.value.offset) == (0, 1)


def test_a_position_inside_a_compressed_wrapper_skips_earlier_messages(fake: FakeBroker) -> None:
    produce(fake, [b"%d" % i for i in range(100)], compression="lz4", linger_ms=60_000)
    with Consumer(fake.bootstrap) as consumer:
        consumer.assign([T0])
        consumer.seek(T0, 42)
        records = poll_until(consumer, 58)
    assert [r.offset for r in records] == list(range(42, 100))
    assert records[0].value == b"42"


@pytest.mark.parametrize(("reset", "first"), [("earliest", 0), ("latest", None)])
def test_an_out_of_range_position_resets(fake: FakeBroker, reset: str, first: int | None) -> None:
    produce(fake, [b"a", b"b"])
    with Consumer(fake.bootstrap, auto_offset_reset=reset) as consumer:
        consumer.assign([T0])
        consumer.seek(T0, 1000)
        if first is None:
            assert consumer.poll(timeout_ms=300) == []
            assert consumer.position(T0) == 2
            produce(fake, [b"c"])
            assert [r.value for r in poll_until(consumer, 1)] == [b"c"]
        else:
            assert [r.offset for r in poll_until(consumer, 2)] == [0, 1]


def test_out_of_range_with_reset_none_raises_naming_the_partition(fake: FakeBroker) -> None:
    produce(fake, [b"a"])
    with Consumer(fake.bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([T0])
        consumer.seek(T0, 99)
        with pytest.raises(OffsetOutOfRangeError, match="t-0: offset 99"):
            for _ in range(50):
                consumer.poll(timeout_ms=200)


def test_no_position_with_reset_none_raises(fake: FakeBroker) -> None:
    with Consumer(fake.bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([T0])
        with pytest.raises(NoOffsetForPartitionError, match="t-0"):
            consumer.poll(timeout_ms=10)
        consumer.seek_to_beginning()
        assert consumer.position(T0) == 0


def test_seek_discards_buffered_records(fake: FakeBroker) -> None:
    produce(fake, [b"%d" % i for i in range(50)])
    with Consumer(fake.bootstrap, auto_offset_reset="earliest", max_poll_records=5) as consumer:
        consumer.assign([T0])
        assert [r.offset for r in poll_until(consumer, 5)] == [0, 1, 2, 3, 4]
        consumer.seek(T0, 30)
        assert poll_until(consumer, 1)[0].offset == 30
        consumer.seek_to_beginning(T0)
        assert poll_until(consumer, 1)[0].offset == 0
        consumer.seek_to_end()
        assert consumer.position(T0) == 50


def test_offsets_lookups(fake: FakeBroker) -> None:
    produce(fake, [b"x"] * 7)
    with Consumer(fake.bootstrap) as consumer:
        assert consumer.beginning_offsets([T0]) == {T0: 0}
        assert consumer.end_offsets([T0]) == {T0: 7}
        assert consumer.partitions_for("three") == [0, 1, 2]


def test_reads_several_partitions(fake: FakeBroker) -> None:
    with Producer(fake.bootstrap) as producer:
        for i in range(90):
            producer.send("three", b"%d" % i, key=b"%d" % i)
    with Consumer(fake.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("three", p) for p in range(3)])
        records = poll_until(consumer, 90)
        assert consumer.assignment() == {TopicPartition("three", p) for p in range(3)}
    assert sorted(int(r.value or b"") for r in records) == list(range(90))
    for p in range(3):
        offsets = [r.offset for r in records if r.partition == p]
        assert offsets == list(range(len(offsets)))


def test_reassigning_keeps_positions_of_kept_partitions(fake: FakeBroker) -> None:
    produce(fake, [b"a", b"b", b"c"])
    with Consumer(fake.bootstrap) as consumer:
        consumer.assign([T0])
        consumer.seek(T0, 2)
        consumer.assign([T0, TopicPartition("three", 0)])
        assert consumer.position(T0) == 2
        with pytest.raises(IllegalStateError, match="not assigned"):
            consumer.seek(TopicPartition("three", 9), 0)


def test_bad_settings_are_named() -> None:
    with pytest.raises(ConfigError, match="auto_offset_reset"):
        Consumer(auto_offset_reset="middle")
    with pytest.raises(ConfigError, match="max_partition_fetch_bytes"):
        Consumer(partition_fetch_bytes=1000, max_partition_fetch_bytes=10)


def test_polling_with_a_zero_timeout_still_makes_progress(fake: FakeBroker) -> None:
    produce(fake, [b"%d" % i for i in range(20)])
    with Consumer(fake.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([T0])
        records: list[ConsumerRecord] = []
        deadline = time.monotonic() + 10
        while len(records) < 20:
            assert time.monotonic() < deadline, "poll(0) never returned the records"
            records += consumer.poll(timeout_ms=0)
    assert [r.offset for r in records] == list(range(20))


def test_a_damaged_message_comes_after_the_records_before_it(fake: FakeBroker) -> None:
    """As Kafka's consumer: the good records first, then the error at the next poll -- and
    at every poll until a seek past it -- naming the partition and the offset once."""
    produce(fake, [b"%d" % i for i in range(5)])
    fake.logs[("t", 0)].damage(2)
    with Consumer(fake.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([T0])
        assert [r.value for r in poll_until(consumer, 2)] == [b"0", b"1"]
        for _ in range(2):
            with pytest.raises(CorruptRecordError) as caught:
                poll_until(consumer, 1)
            error = caught.value
            assert (error.tp, error.offset) == (T0, 2)
            assert re.fullmatch(
                r"t-0: CRC mismatch: stored 0x\w+, computed 0x\w+ "
                r"\(offset 2 at byte position \d+\)",
                str(error),
            )
        consumer.seek(T0, error.offset + 1)
        assert [r.value for r in poll_until(consumer, 2)] == [b"3", b"4"]
