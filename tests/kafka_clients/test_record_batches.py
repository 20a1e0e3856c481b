"""The Kafka listener's 0.11 record APIs, raw: Produce v3 takes exactly one record batch per
partition (Kafka's ProduceRequest validation), Fetch v4-5 give the stored batches with the last
stable offset and the log start offset, and kafka-python left to infer the release (0.11) writes
record batches that odradek's own Consumer reads with their headers."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from client import Consumer, TopicPartition
from protocol.compression import BatchCodec
from protocol.errors import ErrorCode
from protocol.kafka.apis import FETCH, PRODUCE
from protocol.messageset import encode_message_set
from protocol.record_batch import decode_batches, encode_batch
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.kafka_clients.conftest import KAFKA_SETTINGS, unique_topic
from tests.kafka_clients.raw_kafka import call, connect

pytestmark = pytest.mark.integration

NOW = 1_700_000_000_000
TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("record-batches") / "data"
    with BrokerProcess(data, settings=KAFKA_SETTINGS) as started:
        yield started


def produce_v3(sock: socket.socket, topic: str, records: bytes | None,
               transactional_id: str | None = None) -> dict[str, Any]:
    answer = call(sock, PRODUCE, 3, {
        "transactional_id": transactional_id, "acks": 1, "timeout_ms": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    ((partition,),) = [t["partition_responses"] for t in answer["responses"]]
    return dict(partition)


def fetch(sock: socket.socket, topic: str, version: int, isolation_level: int = 0
          ) -> dict[str, Any]:
    answer = call(sock, FETCH, version, {
        "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": isolation_level,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "fetch_offset": 0, "log_start_offset": -1,
             "partition_max_bytes": 1 << 20}]}]})
    ((partition,),) = [t["partitions"] for t in answer["responses"]]
    return dict(partition)


def new_topic(broker: BrokerProcess, prefix: str) -> str:
    topic = unique_topic(prefix)
    with RawClient(broker.address) as client:
        client.create_topic(topic, 1)
    return topic


def test_produce_v3_takes_exactly_one_record_batch(broker: BrokerProcess) -> None:
    topic = new_topic(broker, "produce-v3")
    one = encode_batch([(b"k", b"v", NOW, [("h", b"1")])])
    two = encode_batch([(b"k2", b"v2", NOW)])
    with connect(broker.kafka_ports["PLAINTEXT"]) as sock:
        refused = {
            "a message set": produce_v3(sock, topic, encode_message_set([(b"k", b"v", NOW)])),
            "two batches": produce_v3(sock, topic, one + two),
            "bytes after the batch": produce_v3(sock, topic, one + b"\0"),
            "a cut batch": produce_v3(sock, topic, one[:-1]),
            "no records": produce_v3(sock, topic, None),
        }
        zstd = produce_v3(sock, topic, encode_batch([(b"k", b"z", NOW)],
                                                    codec=BatchCodec.ZSTD))
        transactional = produce_v3(sock, topic, one, transactional_id="txn")
        written = produce_v3(sock, topic, one)
        v4 = fetch(sock, topic, 4)
    assert {what: r["error_code"] for what, r in refused.items()} == dict.fromkeys(
        refused, ErrorCode.CORRUPT_MESSAGE)
    assert zstd["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert transactional["error_code"] == ErrorCode.INVALID_REQUEST
    assert (written["error_code"], written["base_offset"]) == (0, 0)  # nothing else was written
    (batch,) = decode_batches(bytes(v4["records"]))
    assert [(r.key, r.value, r.headers) for r in batch.records] == [(b"k", b"v", (("h", b"1"),))]


@pytest.mark.parametrize("version", [4, 5])
@pytest.mark.parametrize("isolation_level", [0, 1])
def test_fetch_v4_and_v5_read_batches_as_stored(broker: BrokerProcess, version: int,
                                                isolation_level: int) -> None:
    topic = new_topic(broker, f"fetch-v{version}")
    batches = [encode_batch([(b"a", b"1", NOW), (b"b", b"2", NOW)], codec=BatchCodec.GZIP),
               encode_batch([(b"c", b"3", NOW)])]
    with connect(broker.kafka_ports["PLAINTEXT"]) as sock:
        for batch in batches:
            assert produce_v3(sock, topic, batch)["error_code"] == 0
        result = fetch(sock, topic, version, isolation_level)
    assert result["error_code"] == 0
    assert result["high_watermark"] == result["last_stable_offset"] == 3
    assert result["aborted_transactions"] == (None if isolation_level == 0 else [])
    if version >= 5:
        assert result["log_start_offset"] == 0
    stored = decode_batches(bytes(result["records"]))
    assert [(b.header.base_offset, [r.value for r in b.records]) for b in stored] == [
        (0, [b"1", b"2"]), (2, [b"3"])]


def test_kafka_python_at_0_11_writes_batches_with_headers(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer  # type: ignore[import-untyped]

    topic = new_topic(broker, "kafka-python-v2")
    producer = KafkaProducer(bootstrap_servers=broker.kafka_bootstrap, acks="all")
    try:
        assert producer.config["api_version"] >= (0, 11)
        futures = [producer.send(topic, value=b"v%d" % i, partition=0,
                                 headers=[("n", b"%d" % i)]) for i in range(10)]
        producer.flush(TIMEOUT_S)
        for future in futures:
            future.get(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=5)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 10 and time.monotonic() < deadline:
            got += consumer.poll(timeout_ms=500)
    assert [(r.value, tuple(r.headers)) for r in got] == [
        (b"v%d" % i, (("n", b"%d" % i),)) for i in range(10)]
