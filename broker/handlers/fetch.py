"""Fetch: stored bytes by offset, long-polling in the purgatory until ``min_bytes`` are there.

Each partition reads up to its own ``max_bytes`` from the entry holding ``fetch_offset``, up to
the high watermark; the chunk may end in a partial entry (the client drops it). The request's
``max_bytes`` bounds the sum, softly as in Kafka: the first partition with data may take its
whole ``max_bytes`` even past that bound, so that a response always makes progress.

When fewer than ``min_bytes`` are available and no partition has an error, the fetch parks
until an append to one of its partitions, its ``max_wait_ms``, or shutdown, then reads again.
"""

from __future__ import annotations

from typing import Any

import structlog
import trio

from broker.context import BrokerContext
from broker.error_codes import error_code_for
from broker.frames import WithFileSlices, sendable
from broker.log import ReadResult
from protocol.errors import ErrorCode
from protocol.wire import Request

log = structlog.get_logger(__name__)

NO_DATA = ReadResult(None, 0, 0, -1)


async def fetch(ctx: BrokerContext, request: Request) -> dict[str, Any] | WithFileSlices:
    body = request.body
    deadline = trio.current_time() + max(0, body["max_wait_ms"]) / 1000
    partitions = [(t["name"], p["partition"]) for t in body["topics"] for p in t["partitions"]]
    while True:
        topics, available, failed = _read(ctx, body["topics"], max(0, body["max_bytes"]))
        if (
            available >= body["min_bytes"]
            or failed
            or ctx.stopping
            or trio.current_time() >= deadline
        ):
            return _response(topics)
        log.debug("fetch.parked", partitions=len(partitions), available=available)
        await ctx.purgatory.wait(partitions, deadline)


def _response(topics: list[dict[str, Any]]) -> dict[str, Any] | WithFileSlices:
    """The body, with large reads left as file slices for sendfile and small ones as bytes."""
    slices = False
    for entry in topics:
        for partition in entry["partitions"]:
            partition["records"] = sendable(partition["records"])
            slices = slices or isinstance(partition["records"], ReadResult)
    body = {"topics": topics}
    return WithFileSlices(body) if slices else body


def _read(
    ctx: BrokerContext, topics: list[dict[str, Any]], budget: int
) -> tuple[list[dict[str, Any]], int, bool]:
    """Read every partition once: (response topics, bytes available, whether any failed)."""
    available = 0
    failed = False
    out = []
    for entry in topics:
        name = entry["name"]
        partitions = []
        for p in entry["partitions"]:
            limit = p["max_bytes"]
            if available and limit > 0:  # the first partition with data may exceed the budget
                limit = min(limit, max(0, budget - available))
            result = _read_partition(ctx, name, p["partition"], p["fetch_offset"], limit)
            failed = failed or result["error_code"] != ErrorCode.NONE
            available += result["records"].length
            partitions.append(result)
        out.append({"name": name, "partitions": partitions})
    return out, available, failed


def _read_partition(
    ctx: BrokerContext, topic: str, partition: int, offset: int, max_bytes: int
) -> dict[str, Any]:
    plog = ctx.topics.log(topic, partition)
    if plog is None:
        return _result(partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if max_bytes < 0:
        return _result(partition, ErrorCode.INVALID_FETCH_SIZE)
    try:
        high_watermark = plog.high_watermark
        log_start = plog.log_start_offset
        records = plog.read(offset, max_bytes, max_offset=high_watermark)
    except Exception as exc:  # an out-of-range offset, a log deleted meanwhile, a disk error
        code = error_code_for(exc)
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.error("fetch.failed", topic=topic, partition=partition, exc_info=exc)
        return _result(partition, code)
    return {
        "partition": partition,
        "error_code": ErrorCode.NONE,
        "high_watermark": high_watermark,
        "log_start_offset": log_start,
        "records": records,
    }


def _result(partition: int, code: ErrorCode) -> dict[str, Any]:
    return {
        "partition": partition,
        "error_code": code,
        "high_watermark": -1,
        "log_start_offset": -1,
        "records": NO_DATA,
    }
