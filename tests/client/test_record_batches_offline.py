"""Producer and consumer against the fake broker speaking today's versions (record batches,
Produce v2 and Fetch v4) or only those before them: the versions each side negotiates, headers,
zstd, and the clear errors where a v1 broker cannot carry them."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from client import Producer, TopicPartition
from protocol.apis import ApiKey
from protocol.compression import BatchCodec
from protocol.errors import MessageFormatError, UnsupportedVersionError
from protocol.record_batch import decode_batches, encode_batch, peek_magic
from tests.client.fake_broker import DROP, FakeBroker, once
from tests.client.reading import read_records

T0 = TopicPartition("t", 0)


@pytest.fixture
def today() -> Iterator[FakeBroker]:
    broker = FakeBroker({"t": 1})
    broker.api_versions = {}  # the protocol's own table: Produce v2, Fetch v4
    try:
        yield broker
    finally:
        broker.close()


def versions_used(fake: FakeBroker, api: ApiKey) -> set[int]:
    return {r.header.api_version for r in fake.requests if r.header.api_key == api}


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_a_broker_of_today_gets_record_batches_with_headers(today: FakeBroker, codec) -> None:
    with Producer(today.bootstrap, compression=codec, linger_ms=50) as producer:
        futures = [producer.send("t", b"v%d" % i, key=b"k", headers=[("i", b"%d" % i),
                                                                     ("nothing", None)])
                   for i in range(20)]
        producer.send("t", b"plain")
        producer.flush(5)
    assert [f.result().offset for f in futures] == list(range(20))
    stored = today.messages("t", 0)
    assert peek_magic(stored) == 2
    assert sum(b.header.record_count for b in decode_batches(stored)) == 21
    assert versions_used(today, ApiKey.PRODUCE) == {2}
    records = read_records(today.bootstrap, T0, 21, timeout=10.0)
    assert versions_used(today, ApiKey.FETCH) == {4}
    assert [(r.offset, r.value, r.headers) for r in records[:2]] == [
        (0, b"v0", (("i", b"0"), ("nothing", None))), (1, b"v1", (("i", b"1"), ("nothing", None)))]
    assert (records[20].value, records[20].headers) == (b"plain", ())


def test_each_producer_batch_is_one_record_batch(today: FakeBroker) -> None:
    with Producer(today.bootstrap, batch_bytes=200, linger_ms=60_000) as producer:
        futures = [producer.send("t", b"%03d" % i, partition=0) for i in range(40)]
        producer.flush(5)
    assert [f.result().offset for f in futures] == list(range(40))
    counts = [b.header.record_count
              for r in today.requests if r.header.api_key == ApiKey.PRODUCE
              for p in r.body["topics"][0]["partitions"]
              for b in decode_batches(p["records"])]
    # a message takes 34 bytes and more as the producer counts: at most 5 in 200 bytes
    assert max(counts) <= 5
    assert sum(counts) == 40
    records = read_records(today.bootstrap, T0, 40, timeout=10.0)
    assert [r.value for r in records] == [b"%03d" % i for i in range(40)]


def test_a_v1_broker_gets_message_sets_and_is_read_at_fetch_v3(fake: FakeBroker) -> None:
    with Producer(fake.bootstrap, compression="lz4") as producer:
        assert producer.send("t", b"old").result(5).offset == 0
    assert peek_magic(fake.messages("t", 0)) == 1
    assert versions_used(fake, ApiKey.PRODUCE) == {1}
    (record,) = read_records(fake.bootstrap, T0, 1, timeout=10.0)
    assert (record.value, record.headers) == (b"old", ())
    assert versions_used(fake, ApiKey.FETCH) == {3}


def test_headers_to_a_v1_broker_fail_naming_the_topic(fake: FakeBroker) -> None:
    with Producer(fake.bootstrap) as producer:
        with_headers = producer.send("t", b"h", headers=[("a", b"b")])
        with pytest.raises(UnsupportedVersionError, match=r"headers.*topic 't'.*Produce v1"):
            with_headers.result(5)
        assert producer.send("t", b"no headers").result(5).offset == 0


def test_zstd_to_a_v1_broker_fails_clearly(fake: FakeBroker) -> None:
    with (Producer(fake.bootstrap, compression="zstd") as producer,
          pytest.raises(UnsupportedVersionError, match=r"zstd.*topic 't'.*Produce v1")):
        producer.send("t", b"z").result(5)
    assert fake.messages("t", 0) == b""


def test_a_set_that_cannot_be_converted_for_a_v1_broker_fails_its_future(
    fake: FakeBroker,
) -> None:
    """A mirror's pass-through set of record batches is down-converted for a v1 leader; one
    whose payload is damaged fails that send, naming the partition, and the producer goes on
    (the error is not raised out of its I/O)."""
    damaged = bytearray(encode_batch([(b"k", b"value", 0)], codec=BatchCodec.LZ4))
    damaged[-5:] = b"\xff" * 5
    with Producer(fake.bootstrap) as producer:
        future = producer.send_set("t", 0, bytes(damaged))
        with pytest.raises(MessageFormatError, match=r"t-0: .*message format v1.*lz4"):
            future.result(5)
        assert producer.send("t", b"after", partition=0).result(5).offset == 0


def test_headers_must_be_str_and_bytes_pairs(today: FakeBroker) -> None:
    with Producer(today.bootstrap) as producer:
        for bad in ([("k", "text")], [(b"k", b"v")], [("k",)], ["kv"]):
            with pytest.raises(TypeError, match="headers"):
                producer.send("t", b"v", headers=bad)


def test_a_broker_is_asked_what_it_speaks_once_per_connection(today: FakeBroker) -> None:
    with Producer(today.bootstrap) as producer:
        for i in range(5):
            producer.send("t", b"%d" % i).result(5)
    asked = [r for r in today.requests if r.header.api_key == ApiKey.API_VERSIONS]
    assert len(asked) == 1


def test_a_broker_gone_while_asked_its_versions_sends_the_producer_to_metadata(
    today: FakeBroker,
) -> None:
    with Producer(today.bootstrap, retry_backoff_ms=10) as producer:
        producer.partitions_for("t")
        today.faults.append(once(ApiKey.API_VERSIONS, lambda request: DROP))
        asked_before = len(metadata_requests(today))
        assert producer.send("t", b"v").result(5).offset == 0
        # where is the leader now? (asked on another connection than the produce's, so it
        # may reach the broker after the produce was answered)
        deadline = time.monotonic() + 5
        while len(metadata_requests(today)) == asked_before and time.monotonic() < deadline:
            producer.poll(0.01)
    assert len(metadata_requests(today)) > asked_before


def test_a_broker_gone_while_asked_its_versions_sends_the_consumer_to_metadata(
    today: FakeBroker,
) -> None:
    with Producer(today.bootstrap) as producer:
        producer.send("t", b"v").result(5)
    today.faults.append(once(ApiKey.API_VERSIONS, lambda request: DROP))
    today.requests.clear()
    (record,) = read_records(today.bootstrap, T0, 1, timeout=10.0)
    assert record.value == b"v"
    kinds = [r.header.api_key for r in today.requests]
    dropped = kinds.index(ApiKey.API_VERSIONS)
    assert ApiKey.METADATA in kinds[dropped + 1:]


def metadata_requests(fake: FakeBroker) -> list:
    return [r for r in fake.requests if r.header.api_key == ApiKey.METADATA]
