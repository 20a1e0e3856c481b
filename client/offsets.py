"""ListOffsets: earliest, latest or by-timestamp offsets of partitions.

The request is built and read here once; the consumer's offset resets send it asynchronously,
``list_offsets`` (used by ``Admin`` and the consumer's ``beginning_offsets`` / ``end_offsets``)
waits for the answers, asking each partition's leader.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from client.durations import seconds_text
from client.errors import ClientTimeoutError, partition_error
from client.metadata import MetadataTracker
from client.records import TopicPartition
from protocol.apis import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ApiKey
from protocol.errors import BrokerError, ErrorCode, OdradekError

EARLIEST = EARLIEST_TIMESTAMP
LATEST = LATEST_TIMESTAMP


class OffsetAndTimestamp(NamedTuple):
    offset: int  # -1 when no message is that recent
    timestamp: int  # the found message's timestamp, or -1


def list_offsets_body(specs: Mapping[TopicPartition, int]) -> dict[str, Any]:
    """A ListOffsets request for ``{tp: EARLIEST | LATEST | timestamp_ms}``."""
    topics: dict[str, list[dict[str, int]]] = {}
    for tp, when in specs.items():
        topics.setdefault(tp.topic, []).append({"partition": tp.partition, "timestamp": when})
    return {
        "replica_id": -1,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    }


def read_list_offsets(
    body: dict[str, Any],
) -> dict[TopicPartition, OffsetAndTimestamp | BrokerError]:
    """Each partition's answer: its offset and timestamp, or the typed error naming it."""
    out: dict[TopicPartition, OffsetAndTimestamp | BrokerError] = {}
    for topic in body["topics"]:
        for p in topic["partitions"]:
            tp = TopicPartition(topic["name"], p["partition"])
            code = p["error_code"]
            if code:
                out[tp] = partition_error(tp, code)
            else:
                out[tp] = OffsetAndTimestamp(p["offset"], p["timestamp"])
    return out


def list_offsets(
    metadata: MetadataTracker, specs: Mapping[TopicPartition, int], timeout: float
) -> dict[TopicPartition, OffsetAndTimestamp]:
    """Ask each partition's leader and wait. Retriable errors (no leader yet, a lost
    connection) are retried until ``timeout`` seconds; others raise at once."""
    deadline = time.monotonic() + timeout
    remaining_specs = dict(specs)
    found: dict[TopicPartition, OffsetAndTimestamp] = {}
    last_error: BaseException | None = None
    metadata.add_topics({tp.topic for tp in specs})
    while remaining_specs:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ClientTimeoutError(
                f"offsets of {', '.join(map(str, remaining_specs))} not found within "
                f"{seconds_text(timeout)}: {last_error or 'no leader'}"
            )
        metadata.poll()  # send the update an error asked for: the leader may have moved
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, when in remaining_specs.items():
            info = metadata.current.topics.get(tp.topic)
            if info is not None and info.error is not ErrorCode.NONE and not info.error.retriable:
                raise info.error_for_topic()
            leader = metadata.current.leader_for(tp.topic, tp.partition)
            if leader is None:
                metadata.request_update()
            else:
                by_leader.setdefault(leader, {})[tp] = when
        if not by_leader:
            metadata.refresh(left)
            continue
        futures = [
            metadata.network.send(node, ApiKey.LIST_OFFSETS, list_offsets_body(part))
            for node, part in by_leader.items()
        ]
        for future in futures:
            try:
                answers = read_list_offsets(future.result(max(deadline - time.monotonic(), 0.001)))
            except OdradekError as exc:
                if not getattr(exc, "retriable", False):
                    raise
                last_error = exc
                metadata.request_update()
                continue
            for tp, answer in answers.items():
                if isinstance(answer, BrokerError):
                    if not answer.retriable:
                        raise answer
                    last_error = answer
                    metadata.request_update()
                elif tp in remaining_specs:
                    found[tp] = answer
                    del remaining_specs[tp]
        if remaining_specs:
            metadata.network.poll(min(0.1, max(deadline - time.monotonic(), 0)))
    return found
