"""The producer against the in-memory fake broker: batching moments, retries, errors."""

from __future__ import annotations

import time

import pytest

from client import ConfigError, Producer, RecordMetadata
from client.errors import ClientTimeoutError
from protocol.apis import ApiKey
from protocol.compression import Codec
from protocol.errors import (
    ErrorCode,
    MessageTooLargeError,
    NotLeaderForPartitionError,
    UnknownTopicOrPartitionError,
)
from protocol.messageset import decode_messages, read_entries
from tests.client.fake_broker import (
    DROP,
    SILENT,
    FakeBroker,
    always,
    once,
    produce_error,
)


def stored_values(fake: FakeBroker, topic: str = "t", partition: int = 0) -> list[bytes | None]:
    messages, _ = decode_messages(fake.messages(topic, partition))
    return [m.value for m in messages]


def count(fake: FakeBroker, api: ApiKey) -> int:
    return sum(1 for r in fake.requests if r.header.api_key == api)


def metadata_asked(fake: FakeBroker, since: int = 0) -> list[list[str] | None]:
    """The topics named by each Metadata request from the ``since``-th request on."""
    return [r.body["topics"] for r in fake.requests[since:] if r.header.api_key == ApiKey.METADATA]


def wait_until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def test_futures_resolve_to_the_offsets_that_hold_the_messages(fake: FakeBroker) -> None:
    with Producer(fake.bootstrap) as producer:
        futures = [producer.send("three", b"v%d" % i, key=b"k%d" % (i % 5)) for i in range(200)]
        producer.flush(5)
    for topic_partition in range(3):
        stored = decode_messages(fake.messages("three", topic_partition))[0]
        by_offset = {m.offset: m for m in stored}
        mine = [(i, f.result()) for i, f in enumerate(futures)]
        mine = [(i, md) for i, md in mine if md.partition == topic_partition]
        assert [md.offset for _, md in mine] == sorted(md.offset for _, md in mine)
        for i, md in mine:
            assert by_offset[md.offset].value == b"v%d" % i
            assert by_offset[md.offset].key == b"k%d" % (i % 5)


def test_a_lingering_batch_stays_until_flush(fake: FakeBroker) -> None:
    producer = Producer(fake.bootstrap, linger_ms=60_000)
    try:
        future = producer.send("t", b"held")
        producer.poll(0.05)
        assert not future.done()
        assert producer._accumulator.queued_batches() == 1
        producer.flush(5)
        assert future.result() == RecordMetadata("t", 0, 0)
    finally:
        producer.close()


def test_a_full_batch_goes_out_without_waiting_for_linger(fake: FakeBroker) -> None:
    with Producer(fake.bootstrap, linger_ms=60_000, batch_bytes=500) as producer:
        futures = [producer.send("t", b"x" * 100) for _ in range(8)]
        assert futures[0].result(timeout=5).offset == 0  # its batch filled up
        assert not futures[-1].done()  # the last batch is still lingering
    assert futures[-1].result().offset == 7  # close() flushed it


def test_not_leader_refreshes_metadata_and_retries_in_order(fake: FakeBroker) -> None:
    fake.faults.append(once(ApiKey.PRODUCE, produce_error(ErrorCode.NOT_LEADER_FOR_PARTITION)))
    with Producer(fake.bootstrap, retry_backoff_ms=10, batch_bytes=200) as producer:
        futures = [producer.send("t", b"%03d" % i) for i in range(20)]
        producer.flush(5)
    assert [f.result().offset for f in futures] == list(range(20))
    assert stored_values(fake) == [b"%03d" % i for i in range(20)]
    assert count(fake, ApiKey.METADATA) >= 2


def test_a_dropped_connection_is_retried(fake: FakeBroker) -> None:
    fake.faults.append(once(ApiKey.PRODUCE, lambda request: DROP))
    with Producer(fake.bootstrap, retry_backoff_ms=10) as producer:
        future = producer.send("t", b"again")
        assert future.result(timeout=5).offset == 0
    assert stored_values(fake) == [b"again"]


def test_a_non_retriable_error_fails_the_future_with_its_type_and_partition(
    fake: FakeBroker,
) -> None:
    fake.faults.append(always(ApiKey.PRODUCE, produce_error(ErrorCode.MESSAGE_TOO_LARGE)))
    with Producer(fake.bootstrap) as producer:
        future = producer.send("t", b"big")
        with pytest.raises(MessageTooLargeError, match="t-0"):
            future.result(timeout=5)
    assert count(fake, ApiKey.PRODUCE) == 1


def _refuse_sets_over(limit: int, code: ErrorCode = ErrorCode.MESSAGE_TOO_LARGE):
    """A broker's max_message_bytes: a Produce whose message set is over ``limit`` bytes is
    refused with ``code``; others are stored."""

    def answer(request):
        sizes = [len(p["records"]) for t in request.body["topics"] for p in t["partitions"]]
        return produce_error(code)(request) if max(sizes) > limit else None

    return always(ApiKey.PRODUCE, answer)


@pytest.mark.parametrize("code", [ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE])
def test_a_batch_refused_as_too_large_is_split_and_sent_in_order(
    fake: FakeBroker, code: ErrorCode
) -> None:
    fake.faults.append(_refuse_sets_over(300, code))
    callbacks: list[int] = []
    with Producer(fake.bootstrap, linger_ms=60_000, retries=0) as producer:
        futures = [producer.send("t", b"%d" % i + b"v" * 60) for i in range(8)]
        futures[5].add_done_callback(lambda f: callbacks.append(f.result().offset))
        producer.flush(5)
        offsets = [f.result(timeout=5).offset for f in futures]
    assert offsets == list(range(8))
    assert callbacks == [5]
    assert stored_values(fake) == [b"%d" % i + b"v" * 60 for i in range(8)]
    assert count(fake, ApiKey.PRODUCE) > 2  # refused whole, then sent in parts


def test_a_single_message_too_large_fails_and_the_rest_of_its_batch_is_stored(
    fake: FakeBroker,
) -> None:
    fake.faults.append(_refuse_sets_over(300))
    with Producer(fake.bootstrap, linger_ms=60_000) as producer:
        small = [producer.send("t", b"s%d" % i) for i in range(3)]
        big = producer.send("t", b"b" * 400)
        producer.flush(5)
        with pytest.raises(MessageTooLargeError, match="t-0"):
            big.result(timeout=5)
        assert [f.result(timeout=5).offset for f in small] == [0, 1, 2]
    assert stored_values(fake) == [b"s0", b"s1", b"s2"]


def test_retries_stop_after_the_configured_number(fake: FakeBroker) -> None:
    fake.faults.append(always(ApiKey.PRODUCE, produce_error(ErrorCode.NOT_LEADER_FOR_PARTITION)))
    with Producer(fake.bootstrap, retries=2, retry_backoff_ms=1) as producer:
        future = producer.send("t", b"never")
        with pytest.raises(NotLeaderForPartitionError, match="t-0"):
            future.result(timeout=5)
    assert count(fake, ApiKey.PRODUCE) == 3


@pytest.mark.timeout(30)
def test_a_leader_spoken_with_before_is_not_waited_for_on_a_new_connection(
    fake: FakeBroker,
) -> None:
    """A leader cut off: its connection ends, and a new one goes unanswered. The producer
    asks it its versions again but does not wait for them (request_timeout_ms here outlasts
    the test) -- meanwhile metadata may name a new leader, and other leaders' batches go on."""
    producer = Producer(fake.bootstrap, request_timeout_ms=120_000, retry_backoff_ms=10)
    try:
        assert producer.send("t", b"before").result(timeout=5).offset == 0
        fake.faults += [once(ApiKey.PRODUCE, lambda request: DROP),
                        always(ApiKey.API_VERSIONS, lambda request: SILENT)]
        versions_asked = count(fake, ApiKey.API_VERSIONS)
        cut_off = producer.send("t", b"cut off")
        wait_until(lambda: (producer.poll(0.01),
                            count(fake, ApiKey.API_VERSIONS) > versions_asked)[1])
        later = producer.send("t", b"later")
        producer.poll(0.1)
        assert not cut_off.done() and not later.done()
    finally:
        producer.close(0)
    assert stored_values(fake) == [b"before"]


def test_an_unanswered_request_times_out(fake: FakeBroker) -> None:
    fake.faults.append(always(ApiKey.PRODUCE, lambda request: SILENT))
    with Producer(fake.bootstrap, retries=0, request_timeout_ms=200) as producer:
        future = producer.send("t", b"lost")
        with pytest.raises(ClientTimeoutError):
            future.result(timeout=10)


def test_acks_zero_resolves_without_offsets_and_still_delivers(fake: FakeBroker) -> None:
    with Producer(fake.bootstrap, acks=0) as producer:
        futures = [producer.send("t", b"fire%d" % i) for i in range(3)]
        producer.flush(5)
    assert [f.result() for f in futures] == [RecordMetadata("t", 0, -1)] * 3
    wait_until(lambda: len(stored_values(fake)) == 3)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4])
def test_the_broker_stores_the_batch_as_the_producer_compressed_it(
    fake: FakeBroker, codec: Codec
) -> None:
    with Producer(fake.bootstrap, compression=codec.name.lower(), linger_ms=60_000) as producer:
        for i in range(50):
            producer.send("t", b"value %d" % i)
    entries, _ = read_entries(fake.messages("t", 0))
    assert [(e.codec, e.offset) for e in entries] == [(codec, 49)]
    assert stored_values(fake) == [b"value %d" % i for i in range(50)]


def test_a_user_partitioner_decides(fake: FakeBroker) -> None:
    seen = []

    def last(topic: str, key: bytes | None, partitions) -> int:
        seen.append((topic, key))
        return partitions[-1]

    with Producer(fake.bootstrap, partitioner=last) as producer:
        metadata = producer.send("three", b"v", key=b"k").result(timeout=5)
    assert metadata.partition == 2
    assert seen == [("three", b"k")]


def test_an_explicit_partition_must_exist_within_max_block(fake: FakeBroker) -> None:
    # metadata is asked again for a partition it does not show (the topic may have just
    # grown): one that never appears raises at max_block_ms, naming the partition
    with Producer(fake.bootstrap, max_block_ms=300, retry_backoff_ms=20) as producer:
        with pytest.raises(UnknownTopicOrPartitionError, match="three-7"):
            producer.send("three", b"v", partition=7)
        assert producer.send("three", b"v", partition=1).result(timeout=5).partition == 1


def test_an_unknown_topic_raises_after_max_block(fake: FakeBroker) -> None:
    with (
        Producer(fake.bootstrap, max_block_ms=300, retry_backoff_ms=20) as producer,
        pytest.raises(UnknownTopicOrPartitionError, match="nope"),
    ):
        producer.send("nope", b"v")


def test_callbacks_run_once_and_a_failing_one_breaks_nothing(fake: FakeBroker) -> None:
    calls = []
    with Producer(fake.bootstrap, linger_ms=60_000) as producer:
        first = producer.send("t", b"a")
        second = producer.send("t", b"b")
        first.add_done_callback(lambda f: 1 / 0)
        second.add_done_callback(lambda f: calls.append(f.result()))
        producer.flush(5)
        second.add_done_callback(lambda f: calls.append("late"))
    assert calls == [RecordMetadata("t", 0, 1), "late"]


def test_values_must_be_bytes(fake: FakeBroker) -> None:
    with Producer(fake.bootstrap) as producer:
        with pytest.raises(TypeError, match="value must be bytes"):
            producer.send("t", "text")  # type: ignore[arg-type]
        assert producer.send("t", bytearray(b"ok"), key=memoryview(b"k")).result(5).offset == 0


@pytest.mark.parametrize(
    ("setting", "match"),
    [
        ({"acks": 2}, "acks"),
        ({"compression": "brotli"}, "compression"),
        ({"linger_ms": -1}, "linger_ms"),
        ({"bootstrap": "no-port"}, "bootstrap"),
    ],
)
def test_bad_settings_are_named(setting: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Producer(**setting)


def test_a_closed_producer_refuses_sends(fake: FakeBroker) -> None:
    producer = Producer(fake.bootstrap)
    producer.close()
    producer.close()  # twice is fine
    with pytest.raises(Exception, match="closed"):
        producer.send("t", b"v")


def test_each_new_topic_costs_one_metadata_request_naming_only_it() -> None:
    """Learning topic N must not re-ask for the N-1 known ones (each new topic used to cost
    a request naming every known topic: quadratic in the number of topics)."""
    names = [f"topic-{i:03}" for i in range(60)]
    fake = FakeBroker(dict.fromkeys(names, 2))
    try:
        with Producer(fake.bootstrap) as producer:
            for name in names:
                before = len(fake.requests)
                producer.send(name, b"first").result(timeout=5)
                assert metadata_asked(fake, before) == [[name]]
            before = len(fake.requests)
            for name in names:  # every topic learned so far is still known
                assert producer.send(name, b"second").result(timeout=5).topic == name
            assert metadata_asked(fake, before) == []
    finally:
        fake.close()


def test_not_leader_for_one_topic_refreshes_only_that_topic() -> None:
    names = [f"topic-{i}" for i in range(20)]
    fake = FakeBroker(dict.fromkeys(names, 1))
    try:
        with Producer(fake.bootstrap, retry_backoff_ms=10) as producer:
            for name in names:
                producer.send(name, b"v").result(timeout=5)
            before = len(fake.requests)
            fake.faults.append(
                once(ApiKey.PRODUCE, produce_error(ErrorCode.NOT_LEADER_FOR_PARTITION))
            )
            assert producer.send("topic-7", b"moved").result(timeout=5).offset == 1
            assert metadata_asked(fake, before) == [["topic-7"]]
    finally:
        fake.close()
