"""DeleteRecords (kafka-delete-records) and DescribeLogDirs (kafka-log-dirs).

DeleteRecords moves partitions' log start offsets up, on their leader; followers follow the
leader's log start through their fetch responses and report their own in their fetches
(``broker.cluster.replicas``). As Kafka's DelayedDeleteRecords, the answer waits, up to the
request's ``timeout_ms``, until the partition's low watermark (the lowest log start among its
replicas on live brokers) has reached the offset: answered before, a follower that became leader
right after could serve the deleted records. DescribeLogDirs lists the partition logs on this
broker's disk, led or followed.
"""

from __future__ import annotations

from typing import Any

import structlog
import trio

from broker.context import BrokerContext
from broker.error_codes import error_code_for
from broker.topics import refuse_internal
from protocol.acls import ResourceType
from protocol.apis import ApiKey
from protocol.errors import (
    BrokerError,
    ErrorCode,
    OffsetOutOfRangeError,
    TopicAuthorizationFailedError,
)
from protocol.wire import Request

log = structlog.get_logger(__name__)

HIGH_WATERMARK = -1  # DeleteRecords' offset -1: up to the high watermark


async def delete_records(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    """Move every partition's log start on this leader first, then wait for the replicas of
    each, all under one deadline (Kafka: one delayed operation for the whole request)."""
    deadline = trio.current_time() + max(0, request.body["timeout_ms"]) / 1000
    moved = [(t["name"], [_delete(ctx, t["name"], p["partition"], p["offset"])
                          for p in t["partitions"]])
             for t in request.body["topics"]]
    topics = []
    for name, results in moved:
        partitions = []
        for result, offset in results:
            if offset is not None:
                result = await _replicated(ctx, name, result["partition"], offset, deadline)
            partitions.append(result)
        topics.append({"name": name, "partitions": partitions})
    return {"topics": topics}


async def _replicated(ctx: BrokerContext, topic: str, partition: int, offset: int,
                      deadline: float) -> dict[str, Any]:
    """The answer for a partition whose leader moved its log start to ``offset``, once its
    live replicas have too; REQUEST_TIMED_OUT at ``deadline``."""
    try:
        low = await ctx.cluster.await_low_watermark(topic, partition, offset, deadline)
    except BrokerError as exc:
        log.info("records.delete_unconfirmed", topic=topic, partition=partition,
                 offset=offset, error=exc.code.name, reason=str(exc))
        return _deleted(partition, exc.code, str(exc))
    return {"partition": partition, "error_code": ErrorCode.NONE, "error_message": None,
            "low_watermark": low}


def _delete(ctx: BrokerContext, topic: str, partition: int, offset: int
            ) -> tuple[dict[str, Any], int | None]:
    """Move the log start on this broker: the answer, and the offset the replicas must reach
    before it is given (None: the answer is final, a refusal)."""
    try:
        if not ctx.security.allowed(ApiKey.DELETE_RECORDS, ResourceType.TOPIC, topic):
            raise TopicAuthorizationFailedError(
                f"not authorized to delete records of topic {topic!r}")
        refuse_internal(topic, "delete records of")
        ctx.cluster.check_leader(topic, partition)
        ctx.cluster.check_high_watermark_known(topic, partition)
        plog = ctx.topics.log(topic, partition)
        if plog is None:
            return _deleted(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            f"topic {topic!r} has no partition {partition}"), None
        high_watermark = plog.high_watermark
        if offset == HIGH_WATERMARK:
            offset = high_watermark
        if not 0 <= offset <= high_watermark:
            raise OffsetOutOfRangeError(
                f"{topic}-{partition}: cannot delete records before offset {offset}: it is "
                f"outside [0, {high_watermark}] (the high watermark; -1 means the high "
                "watermark)")
        if plog.advance_log_start(offset):
            log.info("records.deleted", topic=topic, partition=partition,
                     log_start_offset=plog.log_start_offset)
            ctx.purgatory.appended(topic, partition)  # parked follower fetches answer now
        answer = {"partition": partition, "error_code": ErrorCode.NONE, "error_message": None,
                  "low_watermark": plog.log_start_offset}
        # Kafka waits for the requested offset even when the log start was there already
        return answer, offset
    except BrokerError as exc:
        return _deleted(partition, exc.code, str(exc)), None
    except Exception as exc:  # a log deleted meanwhile, a failed write
        code = error_code_for(exc)
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.error("delete_records.failed", topic=topic, partition=partition, exc_info=exc)
        return _deleted(partition, code, str(exc)), None


def _deleted(partition: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"partition": partition, "error_code": code, "error_message": message,
            "low_watermark": -1}


async def describe_log_dirs(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    ctx.security.require_cluster(ApiKey.DESCRIBE_LOG_DIRS)
    wanted = request.body["topics"]
    wanted_set = None if wanted is None else set(wanted)
    manager = ctx.topics.logs
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, partition in manager.partitions():
        if wanted_set is not None and topic not in wanted_set:
            continue
        plog = manager.get(topic, partition)
        if plog is None:
            continue
        try:
            entry = {
                "partition": partition,
                "size": plog.size_bytes(),
                "log_start_offset": plog.log_start_offset,
                "log_end_offset": plog.log_end_offset,
                "high_watermark": plog.high_watermark,
                "segments": len(plog.segment_base_offsets),
            }
        except Exception:  # closed or deleted meanwhile
            continue
        by_topic.setdefault(topic, []).append(entry)
    return {
        "error_code": ErrorCode.NONE,
        "log_dirs": [{
            "error_code": ErrorCode.NONE,
            "log_dir": str(manager.data_dir),
            "topics": [{"name": name, "partitions": parts}
                       for name, parts in sorted(by_topic.items())],
        }],
    }
