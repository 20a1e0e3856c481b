"""Kafka's clients' record batches are stored as they were sent (issue #27): a batch built by
kafka-python's own builder, produced through the Kafka listener (Produce v3), is read back with
Fetch v4 byte for byte -- but for the two fields the broker owns and the CRC does not cover,
the base offset (assigned) and the partition leader epoch -- and its CRC-32C still holds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka.record import default_records as kafka_records

from protocol.kafka.apis import FETCH, PRODUCE
from protocol.record_batch import MAGIC_AT, decode_batches
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.kafka_clients.conftest import KAFKA_SETTINGS, unique_topic
from tests.kafka_clients.raw_kafka import call, connect

pytestmark = pytest.mark.integration

#: Kafka's codec numbers, as kafka-python's builder takes them (zstd needs Produce v7)
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
BASE_TIME = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("as-sent") / "data"
    with BrokerProcess(data, settings=KAFKA_SETTINGS) as started:
        yield started


def kafka_python_batch(codec: int, idempotent: bool) -> bytes:
    builder = kafka_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False,
        producer_id=77 if idempotent else -1, producer_epoch=0 if idempotent else -1,
        base_sequence=0 if idempotent else -1, batch_size=1 << 20)
    for i in range(6):
        builder.append(i, timestamp=BASE_TIME + i, key=b"k%d" % i if i % 2 else None,
                       value=b"value %d " % i * (i + 1), headers=[("h", b"%d" % i)] * (i % 3))
    return bytes(builder.build())


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", sorted(CODECS))
def test_a_kafka_python_batch_is_stored_as_sent(broker: BrokerProcess, codec: str,
                                                idempotent: bool) -> None:
    topic = unique_topic(f"as-sent-{codec}")
    with RawClient(broker.address) as client:
        client.create_topic(topic, 1)
    sent = kafka_python_batch(CODECS[codec], idempotent)
    port = next(iter(broker.kafka_ports.values()))
    with connect(port) as sock:
        call(sock, PRODUCE, 3, {  # a first batch of ours, so the client's lands at 1
            "transactional_id": None, "acks": -1, "timeout_ms": 10_000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": 0, "records": _one_record()}]}]})
        produced = call(sock, PRODUCE, 3, {
            "transactional_id": None, "acks": -1, "timeout_ms": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": sent}]}]})
        ((result,),) = [t["partition_responses"] for t in produced["responses"]]
        assert (result["error_code"], result["base_offset"]) == (0, 1), result
        fetched = call(sock, FETCH, 4, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 1, "partition_max_bytes": 1 << 20}]}]})
    ((partition,),) = [t["partitions"] for t in fetched["responses"]]
    stored = bytes(partition["records"])  # from the batch holding offset 1: the client's
    assert len(stored) == len(sent)
    assert stored[:8] == (1).to_bytes(8, "big")  # base offset: the broker's
    assert stored[8:12] == sent[8:12] and stored[MAGIC_AT:] == sent[MAGIC_AT:]
    (batch,) = decode_batches(stored)  # its CRC-32C holds
    assert [(r.offset, r.key, r.headers) for r in batch.records] == [
        (1 + i, b"k%d" % i if i % 2 else None, (("h", b"%d" % i),) * (i % 3)) for i in range(6)]


def _one_record() -> bytes:
    builder = kafka_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=BASE_TIME, key=None, value=b"first", headers=[])
    return bytes(builder.build())
