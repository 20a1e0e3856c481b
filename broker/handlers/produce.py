"""Produce: validate and append each partition's message set, then wake fetches waiting on it.

Each partition succeeds or fails on its own; a rejected set writes nothing. acks=0 gets no
response at all. acks=-1 (all) waits until every in-sync replica has the data: a single broker
is its own in-sync set, so the append itself completes it; in a cluster the request waits until the
partition's high watermark passes the batch (or its timeout_ms: REQUEST_TIMED_OUT), and is
refused before anything is written while the ISR is smaller than min_insync_replicas
(NOT_ENOUGH_REPLICAS; NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrinks so meanwhile). Internal
topics (``__consumer_offsets``) are written by the broker's coordinator alone: a client's
produce to one gets INVALID_TOPIC.

With an authorizer, a topic the principal may not Write gets TOPIC_AUTHORIZATION_FAILED in each
of its partitions, and nothing is written to it. The request's record bytes count against the
client's produce quota: over it, the response (v1: with ``throttle_time_ms``) is held back --
and, since a connection's requests are read one at a time, so is the client.
"""

from __future__ import annotations

from typing import Any

import structlog
import trio

from broker.cluster import Cluster
from broker.context import BrokerContext
from broker.error_codes import error_code_for
from broker.security.quotas import PRODUCER_BYTE_RATE
from broker.topics import refuse_internal
from protocol.acls import ResourceType
from protocol.apis import ApiKey
from protocol.errors import (
    BrokerError,
    ErrorCode,
    InvalidRequiredAcksError,
    TopicAuthorizationFailedError,
)
from protocol.wire import Request

log = structlog.get_logger(__name__)

VALID_ACKS = (0, 1, -1)


async def produce(ctx: BrokerContext, request: Request) -> dict[str, Any] | None:
    acks = request.body["acks"]
    results = [
        {"name": entry["name"], "partitions": _append_topic(ctx, entry, acks)}
        for entry in request.body["topics"]
    ]
    if acks == -1:
        await _await_replication(ctx.cluster, results, request.body["timeout_ms"])
    for entry in results:
        for result in entry["partitions"]:
            result.pop("last_offset", None)
    size = sum(len(p["records"]) for t in request.body["topics"] for p in t["partitions"])
    throttle_ms = ctx.security.record_bytes(PRODUCER_BYTE_RATE, size)
    if throttle_ms:
        await trio.sleep(throttle_ms / 1000)
    if acks == 0:
        return None
    if request.header.api_version >= 1:
        return {"topics": results, "throttle_time_ms": throttle_ms}
    return {"topics": results}


async def _await_replication(
    cluster: Cluster, results: list[dict[str, Any]], timeout_ms: int
) -> None:
    """acks=all: each written partition answers once its ISR has the batch (seed 003: the
    request waits in the purgatory "untill all the followers are upto date")."""
    deadline = trio.current_time() + max(0, timeout_ms) / 1000
    for entry in results:
        for i, result in enumerate(entry["partitions"]):
            if result["error_code"] != ErrorCode.NONE:
                continue
            try:
                await cluster.await_replication(
                    entry["name"], result["partition"], result["last_offset"], deadline)
            except BrokerError as exc:
                entry["partitions"][i] = _result(result["partition"], exc.code, str(exc))


def _append_topic(ctx: BrokerContext, entry: dict[str, Any], acks: int) -> list[dict[str, Any]]:
    name = entry["name"]
    try:
        if acks not in VALID_ACKS:
            raise InvalidRequiredAcksError(f"acks must be 0, 1 or -1, got {acks}")
        if not ctx.security.allowed(ApiKey.PRODUCE, ResourceType.TOPIC, name):
            raise TopicAuthorizationFailedError(f"not authorized to write to topic {name!r}")
        refuse_internal(name, "append to")
        ctx.cluster.prepare_produce(
            name, lambda: ctx.security.may_create_topic(ApiKey.PRODUCE, name))
    except BrokerError as exc:
        return [_result(p["partition"], exc.code, str(exc)) for p in entry["partitions"]]
    return [_append(ctx, name, p["partition"], p["records"], acks) for p in entry["partitions"]]


def _append(
    ctx: BrokerContext, topic: str, partition: int, records: bytes, acks: int
) -> dict[str, Any]:
    try:
        ctx.cluster.check_leader(topic, partition)
        if acks == -1:
            ctx.cluster.check_min_isr(topic, partition)
    except BrokerError as exc:
        return _result(partition, exc.code, str(exc))
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
        return _result(partition, code, f"{topic}-{partition}: {exc}")
    ctx.purgatory.appended(topic, partition)
    if ctx.metrics is not None:
        ctx.metrics.produced(topic, len(records), appended.last_offset - appended.first_offset + 1)
    ctx.cluster.appended(topic, partition)
    return {
        "partition": partition,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "base_offset": appended.first_offset,
        "log_append_time": appended.log_append_time,
        "last_offset": appended.last_offset,  # for acks=all; not sent
    }


def _result(partition: int, code: ErrorCode, message: str) -> dict[str, Any]:
    return {
        "partition": partition,
        "error_code": code,
        "error_message": message,
        "base_offset": -1,
        "log_append_time": -1,
    }
