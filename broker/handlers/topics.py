"""CreateTopics and DeleteTopics: each topic in a request succeeds or fails on its own."""

from __future__ import annotations

from collections import Counter
from typing import Any

from broker.context import BrokerContext
from protocol.errors import BrokerError, ErrorCode
from protocol.wire import Request


async def create_topics(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    entries = request.body["topics"]
    counts = Counter(entry["name"] for entry in entries)
    results = []
    for entry in entries:
        name = entry["name"]
        if counts[name] > 1:
            results.append(_result(name, ErrorCode.INVALID_REQUEST, "topic named more than once"))
            continue
        try:
            ctx.topics.create(
                name,
                entry["num_partitions"],
                entry["replication_factor"],
                entry["configs"],
                validate_only=request.body["validate_only"],
            )
        except BrokerError as exc:
            results.append(_result(name, exc.code, str(exc)))
            continue
        results.append(_result(name, ErrorCode.NONE, None))
    return {"topics": results}


async def delete_topics(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    results = []
    for name in dict.fromkeys(request.body["topic_names"]):
        try:
            topic = ctx.topics.delete(name)
        except BrokerError as exc:
            results.append(_result(name, exc.code, str(exc)))
            continue
        for partition in range(topic.partitions):  # parked fetches answer: it is gone
            ctx.purgatory.appended(name, partition)
        results.append(_result(name, ErrorCode.NONE, None))
    return {"topics": results}


def _result(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"name": name, "error_code": code, "error_message": message}
