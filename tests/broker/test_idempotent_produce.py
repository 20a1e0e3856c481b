"""The idempotent producer's batches through a running broker (native Produce v2): a retry of
a written batch is answered with its first write's offsets and writes nothing, after a clean
restart and after a kill -9 too; a sequence gap and an older epoch are refused with Kafka's
codes. Seed issue 27: without this, retries after an unknown outcome wrote duplicates."""

from __future__ import annotations

import time
from typing import Any

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.record_batch import decode_batches, encode_batch
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

PRODUCE_V2 = 2
FETCH_V4 = 4
PID = 4242


def idempotent(values: list[bytes], seq: int, *, epoch: int = 0) -> bytes:
    now = int(time.time() * 1000)  # older ones would be expired producers at a restart
    records = [(b"k", value, now, (("seq", b"%d" % (seq + i)),))
               for i, value in enumerate(values)]
    return encode_batch(records, producer_id=PID, producer_epoch=epoch, base_sequence=seq)


def produce(client: RawClient, data: bytes) -> dict[str, Any]:
    response = client.request(ApiKey.PRODUCE, {
        "acks": -1, "timeout_ms": 10_000,
        "topics": [{"name": "idem", "partitions": [{"partition": 0, "records": data}]}],
    }, version=PRODUCE_V2)
    (topic,) = response["topics"]
    (partition,) = topic["partitions"]
    return dict(partition)


def stored_values(client: RawClient) -> list[bytes | None]:
    response = client.request(ApiKey.FETCH, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "topics": [{"name": "idem", "partitions": [
            {"partition": 0, "fetch_offset": 0, "max_bytes": 1 << 20, "log_start_offset": -1}]}],
    }, version=FETCH_V4)
    data = bytes(response["topics"][0]["partitions"][0]["records"])
    return [r.value for b in decode_batches(data) for r in b.records]


def test_retries_are_answered_with_their_first_offsets_across_restarts(
    broker: BrokerProcess,
) -> None:
    with RawClient(broker.address) as client:
        client.create_topic("idem", 1)
        first = produce(client, idempotent([b"a", b"b", b"c"], 0))
        assert (first["error_code"], first["base_offset"]) == (ErrorCode.NONE, 0)
        assert produce(client, idempotent([b"d"], 3))["base_offset"] == 3
        retry = produce(client, idempotent([b"a", b"b", b"c"], 0))
        assert (retry["error_code"], retry["base_offset"]) == (ErrorCode.NONE, 0)
        gap = produce(client, idempotent([b"x"], 9))
        assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, gap
        assert "sequence 9 does not follow 3" in gap["error_message"]
        assert stored_values(client) == [b"a", b"b", b"c", b"d"]

    broker.restart()  # clean: the state comes back from the snapshot written on close
    with RawClient(broker.address) as client:
        assert produce(client, idempotent([b"d"], 3))["base_offset"] == 3
        assert produce(client, idempotent([b"e"], 4))["base_offset"] == 4

    broker.kill()  # unclean: rebuilt from the log after the last snapshot
    broker.start(port=broker.port)
    with RawClient(broker.address) as client:
        retry = produce(client, idempotent([b"e"], 4))
        assert (retry["error_code"], retry["base_offset"]) == (ErrorCode.NONE, 4)
        restarted = produce(client, idempotent([b"f"], 0))  # the same epoch cannot restart
        assert restarted["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, restarted
        bumped = produce(client, idempotent([b"f"], 0, epoch=1))
        assert (bumped["error_code"], bumped["base_offset"]) == (ErrorCode.NONE, 5)
        old = produce(client, idempotent([b"g"], 5, epoch=0))
        assert old["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH, old
        assert stored_values(client) == [b"a", b"b", b"c", b"d", b"e", b"f"]
