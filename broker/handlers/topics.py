"""CreateTopics, DeleteTopics and CreatePartitions: each topic in a request succeeds or fails on
its own. In cluster mode the topic changes go through ZooKeeper and the controller
(``ctx.cluster``); a single broker makes them itself (``ctx.topics``).

Internal topics cannot be deleted by clients (INVALID_TOPIC): deleting ``__consumer_offsets``
would lose every group and its committed offsets at the next start.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from broker.cluster.placement import PlacementError, check_assignment
from broker.context import BrokerContext
from broker.topics import refuse_internal
from protocol.errors import (
    BrokerError,
    ErrorCode,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    error_class,
)
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
            partitions, rf = entry["num_partitions"], entry["replication_factor"]
            assignment = _explicit_assignment(entry)
            if assignment is not None:
                partitions, rf = len(assignment), len(assignment[0])
            if ctx.cluster is not None:
                await ctx.cluster.create_topic(
                    name, partitions, rf, entry["configs"],
                    validate_only=request.body["validate_only"],
                    timeout_ms=request.body["timeout_ms"], assignment=assignment)
            else:
                if assignment is not None:
                    check_single_broker_assignment(list(assignment.values()), ctx.broker_id)
                ctx.topics.create(
                    name, partitions, rf, entry["configs"],
                    validate_only=request.body["validate_only"],
                )
        except BrokerError as exc:
            results.append(_result(name, exc.code, str(exc)))
            continue
        results.append(_result(name, ErrorCode.NONE, None))
    return {"topics": results}


def _explicit_assignment(entry: dict[str, Any]) -> dict[int, list[int]] | None:
    """CreateTopics v1's replica assignment, checked for shape (Kafka: with one, the partition
    count and replication factor must be -1)."""
    given = entry.get("assignments")
    if given is None:
        return None
    if entry["num_partitions"] != -1 or entry["replication_factor"] != -1:
        raise InvalidRequestError(
            f"topic {entry['name']!r}: with a replica assignment, num_partitions and "
            "replication_factor must be -1")
    assignment = {a["partition"]: list(a["broker_ids"]) for a in given}
    try:
        check_assignment(assignment, {b for r in assignment.values() for b in r})
    except PlacementError as exc:
        raise error_class(exc.code)(str(exc)) from None
    return assignment


async def delete_topics(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    results = []
    for name in dict.fromkeys(request.body["topic_names"]):
        try:
            refuse_internal(name, "delete")
            if ctx.cluster is not None:
                await ctx.cluster.delete_topic(name, timeout_ms=request.body["timeout_ms"])
                results.append(_result(name, ErrorCode.NONE, None))
                continue
            topic = ctx.topics.delete(name)
        except BrokerError as exc:
            results.append(_result(name, exc.code, str(exc)))
            continue
        for partition in range(topic.partitions):  # parked fetches answer: it is gone
            ctx.purgatory.appended(name, partition)
        results.append(_result(name, ErrorCode.NONE, None))
    return {"topics": results}


async def create_partitions(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    results = []
    for entry in request.body["topics"]:
        name = entry["name"]
        try:
            refuse_internal(name, "add partitions to")
            if ctx.cluster is not None:
                await ctx.cluster.create_partitions(
                    name, entry["count"], entry["assignments"],
                    validate_only=request.body["validate_only"],
                    timeout_ms=request.body["timeout_ms"])
            else:
                if entry["assignments"] is not None:
                    check_single_broker_assignment(entry["assignments"], ctx.broker_id)
                ctx.topics.add_partitions(
                    name, entry["count"], validate_only=request.body["validate_only"])
        except BrokerError as exc:
            results.append(_result(name, exc.code, str(exc)))
            continue
        results.append(_result(name, ErrorCode.NONE, None))
    return {"topics": results}


def check_single_broker_assignment(assignments: list[list[int]], broker_id: int) -> None:
    for replicas in assignments:
        if replicas != [broker_id]:
            raise InvalidReplicaAssignmentError(
                f"replica list {replicas} names brokers other than this single broker "
                f"({broker_id})")


def _result(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"name": name, "error_code": code, "error_message": message}
