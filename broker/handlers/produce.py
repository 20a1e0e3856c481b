"""Produce: validate and append each partition's message set, then wake fetches waiting on it.

Each partition succeeds or fails on its own; a rejected set writes nothing. acks=0 gets no
response at all. acks=-1 (all) waits until every in-sync replica has the data: with replication
factor 1 the in-sync set is this broker alone, so the append itself completes it.
"""

from __future__ import annotations

from typing import Any

import structlog

from broker.context import BrokerContext
from broker.error_codes import error_code_for
from protocol.errors import BrokerError, ErrorCode, InvalidRequiredAcksError
from protocol.wire import Request

log = structlog.get_logger(__name__)

VALID_ACKS = (0, 1, -1)


async def produce(ctx: BrokerContext, request: Request) -> dict[str, Any] | None:
    acks = request.body["acks"]
    results = [
        {"name": entry["name"], "partitions": _append_topic(ctx, entry, acks)}
        for entry in request.body["topics"]
    ]
    return None if acks == 0 else {"topics": results}


def _append_topic(ctx: BrokerContext, entry: dict[str, Any], acks: int) -> list[dict[str, Any]]:
    name = entry["name"]
    try:
        if acks not in VALID_ACKS:
            raise InvalidRequiredAcksError(f"acks must be 0, 1 or -1, got {acks}")
        ctx.topics.get_or_auto_create(name)
    except BrokerError as exc:
        return [_result(p["partition"], exc.code, str(exc)) for p in entry["partitions"]]
    return [_append(ctx, name, p["partition"], p["records"]) for p in entry["partitions"]]


def _append(ctx: BrokerContext, topic: str, partition: int, records: bytes) -> dict[str, Any]:
    plog = ctx.topics.log(topic, partition)
    if plog is None:
        return _result(
            partition,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"topic {topic!r} has no partition {partition}",
        )
    try:
        appended = plog.append(records)
    except Exception as exc:  # every failure is this partition's answer, not the request's
        code = error_code_for(exc)
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.error("produce.failed", topic=topic, partition=partition, exc_info=exc)
        else:
            log.info("produce.rejected", topic=topic, partition=partition, error=code.name,
                     reason=str(exc))
        return _result(partition, code, str(exc))
    ctx.purgatory.appended(topic, partition)
    return {
        "partition": partition,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "base_offset": appended.first_offset,
        "log_append_time": appended.log_append_time,
    }


def _result(partition: int, code: ErrorCode, message: str) -> dict[str, Any]:
    return {
        "partition": partition,
        "error_code": code,
        "error_message": message,
        "base_offset": -1,
        "log_append_time": -1,
    }
