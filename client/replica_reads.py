"""Reading one broker's own replica of a partition, leader or follower: Kafka's debugging
fetch (replica_id -2, ``DEBUGGING_REPLICA_ID``), answered up to that replica's high watermark.

Consumers read from leaders only; replica verification (tooling/replica_verification.py)
must read every replica to compare them, so it asks each broker for its own copy. The bytes
come back as stored (message sets, compressed wrappers as they are), never decoded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from client.future import Future
from client.network import NetworkClient
from client.records import TopicPartition
from protocol.apis import DEBUGGING_REPLICA_ID, ApiKey
from protocol.errors import ErrorCode, OdradekError

#: no long poll: a debugging read takes what the replica has now
_MAX_WAIT_MS = 0
#: Fetch v4: each replica's high watermark and log start offset (v2), and record batches as
#: stored (below v4 the broker would convert them)
FETCH_VERSION = 4
_INT32_MAX = 0x7FFFFFFF


@dataclass(frozen=True)
class ReplicaRead:
    """One broker's answer for its replica of one partition: ``records`` holds the stored
    entries from the one holding the asked offset, up to the replica's high watermark (or
    ``max_bytes``; it may end in a partial entry). ``error`` is the partition's answer
    (NONE, or OFFSET_OUT_OF_RANGE with the real range in ``log_start_offset`` and
    ``high_watermark``, UNKNOWN_TOPIC_OR_PARTITION where the broker has no replica ...)."""

    broker_id: int
    tp: TopicPartition
    error: ErrorCode
    high_watermark: int
    log_start_offset: int
    records: bytes


#: per broker: {partition: (fetch offset, max bytes)}
ReplicaReads = Mapping[int, Mapping[TopicPartition, tuple[int, int]]]


def read_replicas(network: NetworkClient, reads: ReplicaReads, timeout: float
                  ) -> dict[int, dict[TopicPartition, ReplicaRead] | OdradekError]:
    """Send every broker its debugging fetch at once, then wait for each answer: per broker,
    its replicas' reads, or the error that kept it from answering (a broker that cannot be
    reached, a timeout)."""
    futures = {node: _send(network, node, wanted, timeout) for node, wanted in reads.items()}
    out: dict[int, dict[TopicPartition, ReplicaRead] | OdradekError] = {}
    for node, future in futures.items():
        try:
            body = future.result(timeout + 5)
        except OdradekError as exc:
            out[node] = exc
            continue
        out[node] = {
            read.tp: read
            for t in body["topics"]
            for p in t["partitions"]
            for read in [ReplicaRead(
                node, TopicPartition(t["name"], p["partition"]), ErrorCode(p["error_code"]),
                p["high_watermark"], p["log_start_offset"], bytes(p["records"]))]
        }
    return out


def _send(network: NetworkClient, node: int, wanted: Mapping[TopicPartition, tuple[int, int]],
          timeout: float) -> Future[dict[str, Any]]:
    topics: dict[str, list[dict[str, int]]] = {}
    for tp, (offset, max_bytes) in wanted.items():
        topics.setdefault(tp.topic, []).append(
            {"partition": tp.partition, "fetch_offset": offset, "max_bytes": max_bytes,
             "log_start_offset": -1})  # v3's: a follower's, not a debugging read's
    body = {
        "replica_id": DEBUGGING_REPLICA_ID, "max_wait_ms": _MAX_WAIT_MS, "min_bytes": 0,
        # room for every partition's whole max_bytes: a shorter answer is the replica's end
        "max_bytes": min(_INT32_MAX, sum(max_bytes for _, max_bytes in wanted.values())),
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
    return network.send(node, ApiKey.FETCH, body, api_version=FETCH_VERSION, timeout=timeout)
