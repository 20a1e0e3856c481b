"""Replication of a partition holding record batches (magic 2) beside v1 message sets, on a
real 3-broker cluster: batches of every codec, with headers, some idempotent (a retry
answered with its first offset, written once), sent as native Produce v2 requests with
acks=-1; every replica's copy, read as stored (Fetch v4, replica_id -2: each broker's own
replica), is the leader's byte for byte. DeleteRecords to an offset inside a batch moves every
replica's log start there: each serves that batch from it, and ListOffsets' earliest is it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from client.admin import Admin
from client.network import NetworkClient
from client.records import TopicPartition
from protocol.apis import DEBUGGING_REPLICA_ID, ApiKey
from protocol.compression import BatchCodec, Codec
from protocol.errors import ErrorCode
from protocol.messageset import encode_message_set
from protocol.record_batch import encode_batch
from tests.broker_process import BrokerProcess
from tests.cluster.conftest import Cluster, until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TOPIC = "batches"


def _send(process: BrokerProcess, api: ApiKey, body: dict[str, Any], version: int) -> Any:
    """One request of this version answered by exactly this broker."""
    network = NetworkClient(process.bootstrap, client_id="batch-replication",
                            request_timeout_ms=20_000)
    try:
        return network.send(-1, api, body, api_version=version).result(25)
    finally:
        network.close()


def _produce(process: BrokerProcess, records: bytes) -> dict[str, Any]:
    body = _send(process, ApiKey.PRODUCE, {"acks": -1, "timeout_ms": 10_000, "topics": [
        {"name": TOPIC, "partitions": [{"partition": 0, "records": records}]}]}, 2)
    result: dict[str, Any] = body["topics"][0]["partitions"][0]
    assert result["error_code"] == ErrorCode.NONE, result
    return result


def _stored(process: BrokerProcess, offset: int = 0) -> tuple[bytes, int, int]:
    """This broker's own replica from ``offset`` to its high watermark, as stored (Fetch v4
    takes batches as they are), with its high watermark and log start."""
    data = b""
    high_watermark = log_start = -1
    while True:
        body = _send(process, ApiKey.FETCH, {
            "replica_id": DEBUGGING_REPLICA_ID, "max_wait_ms": 0, "min_bytes": 0,
            "max_bytes": 1 << 20, "topics": [{"name": TOPIC, "partitions": [
                {"partition": 0, "fetch_offset": offset, "max_bytes": 1 << 20,
                 "log_start_offset": -1}]}]}, 4)
        result = body["topics"][0]["partitions"][0]
        assert result["error_code"] == ErrorCode.NONE, result
        high_watermark, log_start = result["high_watermark"], result["log_start_offset"]
        whole = _entries(result["records"])  # a chunk may end in a partial entry
        if not whole or offset >= high_watermark:
            return data, high_watermark, log_start
        data += b"".join(entry for _, _, entry in whole)
        offset = whole[-1][1] + 1


def _entries(data: bytes) -> list[tuple[int, int, bytes]]:
    """The whole entries of a stored range: first and last offsets (a batch's base offset and
    base + lastOffsetDelta; a v1 entry's own, a wrapper's last) and bytes."""
    pos, found = 0, []
    while pos + 27 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
        if pos + size > len(data):
            break
        offset = int.from_bytes(data[pos : pos + 8], "big")
        last = offset + int.from_bytes(data[pos + 23 : pos + 27], "big") if (
            data[pos + 16] == 2) else offset
        found.append((offset, last, data[pos : pos + size]))
        pos += size
    return found


def _last_offset(data: bytes) -> int:
    return _entries(data)[-1][1]


@pytest.mark.timeout(150)
def test_replicas_of_record_batches_are_the_leaders_bytes(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    bootstrap = cluster.brokers[0].bootstrap
    with Admin(bootstrap, timeout_ms=20_000) as admin:
        admin.create_topic(TOPIC, 1, 3, configs={"segment_bytes": "2048"})
    cluster.wait_for_leaders(TOPIC, 1)
    leader = cluster.brokers[cluster.leaders(TOPIC)[0]]
    now = int(time.time() * 1000)
    sent: dict[int, bytes] = {}  # base offset -> batch as sent
    idempotent_retry = b""
    for i in range(24):
        if i % 6 == 5:
            _produce(leader, encode_message_set([(b"k", b"v1 %d" % i, now)] * 2,
                                                codec=Codec.GZIP))
            continue
        records = [(b"k%d" % j, b"value %d-%d" % (i, j) * 4, now + j,
                    (("trace", b"%d" % i), ("none", None))) for j in range(4)]
        fields = {"producer_id": 7, "producer_epoch": 0, "base_sequence": 4 * (i // 2)} \
            if i % 2 == 0 else {}
        batch = encode_batch(records, codec=list(BatchCodec)[i % len(BatchCodec)],
                             **fields)  # type: ignore[arg-type]
        sent[_produce(leader, batch)["base_offset"]] = batch
        if fields:
            idempotent_retry = batch
    end = _last_offset(_stored(leader)[0]) + 1
    retried = _produce(leader, idempotent_retry)  # the last idempotent batch, again
    assert sent[retried["base_offset"]] == idempotent_retry

    def copies() -> dict[int, bytes] | None:
        found = {}
        for broker_id, process in cluster.brokers.items():
            data, high_watermark, _ = _stored(process)
            if high_watermark != end:
                return None
            found[broker_id] = data
        return found

    stored = until(copies, 30, "every replica's high watermark at the log end")
    assert stored[0] == stored[1] == stored[2]
    # the batches are stored as sent but for the base offset and leader epoch (outside the CRC)
    entries = _entries(stored[0])
    batches = {first: entry for first, _, entry in entries if entry[16] == 2}
    assert sorted(batches) == sorted(sent) and len(sent) == 20
    assert all(batches[base][16:] == batch[16:] for base, batch in sent.items())

    # DeleteRecords to the second record of the fifth batch: every replica starts there and
    # serves from the batch holding it
    base = sorted(sent)[4]
    cut = base + 1
    from_batch = b"".join(entry for first, _, entry in entries if first >= base)
    with Admin(bootstrap, timeout_ms=20_000) as admin:
        tp = TopicPartition(TOPIC, 0)
        assert admin.delete_records({tp: cut}) == {tp: cut}
        assert {r.log_start_offset for r in admin.describe_log_dirs([TOPIC])} == {cut}
        assert admin.list_offsets({tp: -2})[tp].offset == cut
    for process in cluster.brokers.values():
        data, _, log_start = _stored(process, cut)
        assert log_start == cut
        assert data == from_batch
