"""ListOffsets: the earliest offset (-2), the latest (-1, the high watermark), or the first
offset whose timestamp is at or after a given time. With an authorizer, each topic needs
Describe (else TOPIC_AUTHORIZATION_FAILED in its partitions)."""

from __future__ import annotations

from typing import Any

import structlog

from broker.context import BrokerContext
from broker.error_codes import error_code_for
from protocol.acls import ResourceType
from protocol.apis import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ApiKey
from protocol.errors import BrokerError, ErrorCode
from protocol.wire import Request

log = structlog.get_logger(__name__)


async def list_offsets(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    return {"topics": [_topic(ctx, t) for t in request.body["topics"]]}


def _topic(ctx: BrokerContext, t: dict[str, Any]) -> dict[str, Any]:
    name = t["name"]
    if not ctx.security.allowed(ApiKey.LIST_OFFSETS, ResourceType.TOPIC, name):  # once a topic
        return {"name": name, "partitions": [
            _result(p["partition"], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for p in t["partitions"]]}
    return {"name": name, "partitions": [
        _lookup(ctx, name, p["partition"], p["timestamp"]) for p in t["partitions"]]}


def _lookup(ctx: BrokerContext, topic: str, partition: int, timestamp: int) -> dict[str, Any]:
    try:
        ctx.cluster.check_leader(topic, partition)
        if timestamp == LATEST_TIMESTAMP:
            ctx.cluster.check_high_watermark_known(topic, partition)
    except BrokerError as exc:
        return _result(partition, exc.code)
    plog = ctx.topics.log(topic, partition)
    if plog is None:
        return _result(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if timestamp < 0 and timestamp not in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
        return _result(partition, ErrorCode.INVALID_REQUEST)
    try:
        if timestamp == LATEST_TIMESTAMP:
            found: tuple[int, int] | None = (plog.high_watermark, -1)
        elif timestamp == EARLIEST_TIMESTAMP:
            found = (plog.log_start_offset, -1)
        else:
            found = plog.offset_for_timestamp(timestamp)
    except Exception as exc:  # a log deleted meanwhile, a damaged segment
        code = error_code_for(exc)
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.error("list_offsets.failed", topic=topic, partition=partition, exc_info=exc)
        return _result(partition, code)
    offset, found_timestamp = found if found is not None else (-1, -1)
    return {
        "partition": partition,
        "error_code": ErrorCode.NONE,
        "timestamp": found_timestamp,
        "offset": offset,
    }


def _result(partition: int, code: ErrorCode) -> dict[str, Any]:
    return {"partition": partition, "error_code": code, "timestamp": -1, "offset": -1}
