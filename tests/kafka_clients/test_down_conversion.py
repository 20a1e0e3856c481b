"""Kafka's readers below Fetch v4 never receive record batches: the listener converts them as
Kafka does, to magic 0 for Fetch v0-1 and magic 1 for v2-3, and refuses a zstd batch with
UNSUPPORTED_COMPRESSION_TYPE; kafka-python pinned to 0.10.1 (Fetch v3) consumes every record
of a partition holding both formats."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from protocol.compression import BatchCodec
from protocol.framing import encode_frame
from protocol.kafka.apis import FETCH
from protocol.kafka.header import decode_response, encode_request
from protocol.record_batch import encode_batch
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.kafka_clients.conftest import KAFKA_SETTINGS, unique_topic
from tests.kafka_clients.raw_kafka import connect, read_frame
from tests.kafka_format import read_set
from tests.mixed_magics import BASE_TIME, produce_records, write_mixed

pytestmark = pytest.mark.integration

UNSUPPORTED_COMPRESSION_TYPE = 76
#: the Fetch versions below v4, with the magic Kafka converts record batches to for each
OLD_FETCH_MAGICS = {0: 0, 1: 0, 2: 1, 3: 1}
TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("down-conversion") / "data"
    with BrokerProcess(data, settings=KAFKA_SETTINGS) as started:
        yield started


def kafka_fetch(sock: socket.socket, topic: str, offset: int, version: int) -> dict[str, Any]:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]}
    sock.sendall(encode_frame(encode_request(FETCH, version, offset, "down-conversion", body)))
    frame = read_frame(sock)
    assert frame is not None, "the listener closed the connection"
    correlation_id, answer = decode_response(FETCH, version, frame)
    assert correlation_id == offset
    ((partition,),) = [t["partitions"] for t in answer["responses"]]
    return dict(partition)


def mixed_topic(broker: BrokerProcess) -> tuple[str, list[tuple[int, bytes | None, bytes | None]]]:
    topic = unique_topic("mixed")
    with RawClient(broker.address) as client:
        client.create_topic(topic, 1)
        expected = write_mixed(client, topic)
    return topic, [(e.offset, e.key, e.value) for e in expected]


@pytest.mark.parametrize("version", sorted(OLD_FETCH_MAGICS))
def test_old_fetch_versions_read_batches_in_their_magic(broker: BrokerProcess,
                                                        version: int) -> None:
    topic, expected = mixed_topic(broker)
    with connect(broker.kafka_ports["PLAINTEXT"]) as sock:
        for offset in range(len(expected)):
            result = kafka_fetch(sock, topic, offset, version)
            assert result["error_code"] == 0, (offset, result)
            messages = read_set(bytes(result["records"]))
            # converted batches take the version's magic; v1 sets are passed as stored
            assert {m.magic for m in messages} <= {OLD_FETCH_MAGICS[version], 1}, offset
            got = [(m.offset, m.key, m.value) for m in messages if m.offset >= offset]
            assert got == expected[offset:], offset


def test_kafka_python_at_0_10_1_consumes_every_record(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, TopicPartition  # type: ignore[import-untyped]

    topic, expected = mixed_topic(broker)
    consumer = KafkaConsumer(bootstrap_servers=broker.kafka_bootstrap, api_version=(0, 10, 1),
                             enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < len(expected) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [(r.offset, r.key, r.value) for r in records]
    finally:
        consumer.close()
    assert got == expected


def test_a_zstd_batch_gets_unsupported_compression_type(broker: BrokerProcess) -> None:
    topic = unique_topic("zstd")
    with RawClient(broker.address) as client:
        client.create_topic(topic, 1)
        result = produce_records(client, topic, encode_batch(
            [(b"k", b"z", BASE_TIME)], codec=BatchCodec.ZSTD))
        assert result["error_code"] == 0, result
    with connect(broker.kafka_ports["PLAINTEXT"]) as sock:
        for version in OLD_FETCH_MAGICS:
            assert kafka_fetch(sock, topic, 0, version)["error_code"] == \
                UNSUPPORTED_COMPRESSION_TYPE, version
