"""``Producer.send_many`` and the null-key fast path of ``send``: the same messages, in the
same order, as one ``send`` each, with every check ``send`` makes."""

from __future__ import annotations

import time

import pytest

from client import Producer
from client.partitioner import partition_for_key
from protocol.errors import MessageTooLargeError
from protocol.messageset import decode_messages
from tests.client.fake_broker import FakeBroker


def stored(fake: FakeBroker, topic: str, partition: int) -> list[tuple[bytes | None, bytes]]:
    return [(m.key, m.value or b"") for m in decode_messages(fake.messages(topic, partition))[0]]


def test_send_many_stores_every_value_where_its_future_says(fake: FakeBroker) -> None:
    values = [b"value %d " % i * (1 + i % 7) for i in range(3000)]
    with Producer(fake.bootstrap, batch_bytes=4096, linger_ms=5) as producer:
        futures = producer.send_many("three", values)
        producer.flush(10)
    assert len(futures) == len(values)
    logs = {p: stored(fake, "three", p) for p in range(3)}
    assert sum(map(len, logs.values())) == len(values)
    for value, future in zip(values, futures, strict=True):
        where = future.result()
        assert logs[where.partition][where.offset] == (None, value)
    # the sticky partitioner keeps runs together: each partition holds its values in order
    for partition, messages in logs.items():
        indexes = [values.index(v) for _, v in messages]
        assert indexes == sorted(indexes), partition


def test_send_many_with_keys_partitions_as_send_does(fake: FakeBroker) -> None:
    keys = [b"k%d" % (i % 11) for i in range(200)]
    values = [b"v%d" % i for i in range(200)]
    with Producer(fake.bootstrap) as producer:
        futures = producer.send_many("three", values, keys=keys)
        producer.flush(5)
    for key, value, future in zip(keys, values, futures, strict=True):
        where = future.result()
        assert where.partition == partition_for_key(key, 3)
        assert stored(fake, "three", where.partition)[where.offset] == (key, value)


def test_send_many_in_small_buffers_waits_for_room(fake: FakeBroker) -> None:
    values = [b"x" * 100] * 2000
    with Producer(fake.bootstrap, batch_bytes=2048, buffer_bytes=8192) as producer:
        futures = producer.send_many("t", values)
        assert producer._accumulator.buffered_bytes <= 8192
        producer.flush(10)
    assert [f.result().offset for f in futures] == list(range(2000))


def test_send_many_checks_what_send_checks(fake: FakeBroker) -> None:
    with Producer(fake.bootstrap, max_request_bytes=10_000) as producer:
        with pytest.raises(ValueError, match="2 keys for 3 values"):
            producer.send_many("t", [b"a", b"b", b"c"], keys=[b"1", b"2"])
        with pytest.raises(TypeError, match="value must be bytes"):
            producer.send_many("t", [b"a", "text"])  # type: ignore[list-item]
        with pytest.raises(MessageTooLargeError, match="10000"):
            producer.send_many("t", [b"before", b"x" * 20_000])
        last = producer.send_many("t", [bytearray(b"c"), None])[-1]
        assert last.result(5).offset == 3
    assert stored(fake, "t", 0) == [(None, b"a"), (None, b"before"), (None, b"c"), (None, b"")]


def test_a_message_too_big_for_the_open_batch_keeps_its_place(fake: FakeBroker) -> None:
    """A message that starts a new batch is followed by the next, never overtaken by a small
    one slipping into the batch before."""
    with Producer(fake.bootstrap, batch_bytes=1000, linger_ms=60_000) as producer:
        producer.send("t", b"a" * 800)
        producer.send("t", b"b" * 500)  # no room: a new batch
        producer.send("t", b"c" * 10)  # would fit the first batch
    assert [v[:1] for _, v in stored(fake, "t", 0)] == [b"a", b"b", b"c"]


def test_a_producer_closed_after_sending_refuses_sends(fake: FakeBroker) -> None:
    producer = Producer(fake.bootstrap, linger_ms=60_000)
    producer.send("t", b"v")
    producer.close()
    with pytest.raises(Exception, match="closed"):
        producer.send("t", b"after")
    with pytest.raises(Exception, match="closed"):
        producer.send_many("t", [b"after"])


def _counting_runs(producer: Producer) -> list[int]:
    """Freeze the producer's clock (no millisecond tick) and count its I/O rounds."""
    runs = [0]
    run_once = producer._run_once

    def counted(timeout: float) -> None:
        runs[0] += 1
        run_once(timeout)

    producer._run_once = counted  # type: ignore[method-assign]
    producer._clock = lambda: 1_000_000.0
    producer._next_io = 1_000_000.001
    return runs


def test_starting_lingering_batches_on_many_partitions_costs_no_io_round() -> None:
    """Each I/O round looks at every partition with batches: one per message spread over many
    partitions made sending O(partitions) per message."""
    fake = FakeBroker({"wide": 100})
    try:
        with Producer(fake.bootstrap, linger_ms=5) as producer:
            producer.partitions_for("wide")
            runs = _counting_runs(producer)
            for i in range(100):
                producer.send("wide", b"v", partition=i)
            assert runs == [0]
            producer._clock = time.monotonic
        assert sum(len(stored(fake, "wide", p)) for p in range(100)) == 100
    finally:
        fake.close()


def test_a_batch_due_at_once_still_goes_out_at_once(fake: FakeBroker) -> None:
    with Producer(fake.bootstrap, linger_ms=0) as producer:
        runs = _counting_runs(producer)
        producer.send("three", b"v", partition=0)
        producer.send("three", b"v", partition=1)
        assert runs == [2]  # nothing lingers: each new batch is due
    with Producer(fake.bootstrap, linger_ms=60_000, batch_bytes=200) as producer:
        runs = _counting_runs(producer)
        producer.send("t", b"x" * 100)
        assert runs == [0]
        producer.send("t", b"x" * 100)  # the first batch is full
        assert runs == [1]


def test_send_many_futures_index_slice_and_iterate_alike(fake: FakeBroker) -> None:
    """The futures are made when asked for: by index (negative too), by slice and by iterating
    they name the same places, and an index past the end raises as a list's does."""
    values = [b"v%04d" % i for i in range(500)]
    with Producer(fake.bootstrap, batch_bytes=1024, linger_ms=5) as producer:
        futures = producer.send_many("three", values)
        producer.flush(10)
    assert len(futures) == 500
    places = [(f.result().partition, f.result().offset) for f in futures]
    assert len(set(places)) == 500
    assert [(f.value.partition, f.value.offset) for f in futures[:]] == places
    assert [(futures[i].value.partition, futures[i].value.offset) for i in range(500)] == places
    assert (futures[-1].value.partition, futures[-1].value.offset) == places[-1]
    assert [(f.value.partition, f.value.offset) for f in futures[10:20:3]] == places[10:20:3]
    with pytest.raises(IndexError):
        futures[500]
    with pytest.raises(IndexError):
        futures[-501]
