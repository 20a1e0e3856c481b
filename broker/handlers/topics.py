"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs and IncrementalAlterConfigs:
each topic in a request succeeds or fails on its own. The changes are the cluster's
(``ctx.cluster``): in cluster mode they go through ZooKeeper and the controller; a single broker
makes them in its own data directory.

Internal topics cannot be deleted by clients (INVALID_TOPIC): deleting ``__consumer_offsets``
would lose every group and its committed offsets at the next start. Nor can their configs be
altered (the coordinator relies on ``__consumer_offsets`` being compacted).

With an authorizer each topic needs what ``API_ACLS`` lists (Create on the cluster or the topic,
Delete, Alter, DescribeConfigs, AlterConfigs); a topic without it gets
TOPIC_AUTHORIZATION_FAILED and is left as it was.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from broker.cluster.placement import PlacementError, check_assignment
from broker.context import BrokerContext
from broker.topics import config_aliases, refuse_internal
from broker.topics import describe_configs as describe_topic_configs
from protocol.acls import ResourceType
from protocol.apis import ApiKey
from protocol.errors import (
    BrokerError,
    ErrorCode,
    InvalidConfigError,
    InvalidRequestError,
    TopicAuthorizationFailedError,
    error_class,
)
from protocol.wire import Request


def _authorize(ctx: BrokerContext, api: ApiKey, name: str, what: str) -> None:
    if not ctx.security.allowed(api, ResourceType.TOPIC, name):
        raise TopicAuthorizationFailedError(f"not authorized to {what} topic {name!r}")


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
            if not ctx.security.may_create_topic(ApiKey.CREATE_TOPICS, name):
                raise TopicAuthorizationFailedError(
                    f"not authorized to create topic {name!r} (needs Create on the cluster or "
                    "the topic)")
            partitions, rf = entry["num_partitions"], entry["replication_factor"]
            assignment = _explicit_assignment(entry)
            if assignment is not None:
                partitions, rf = len(assignment), len(assignment[0])
            await ctx.cluster.create_topic(
                name, partitions, rf, entry["configs"],
                validate_only=request.body["validate_only"],
                timeout_ms=request.body["timeout_ms"], assignment=assignment)
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
            _authorize(ctx, ApiKey.DELETE_TOPICS, name, "delete")
            refuse_internal(name, "delete")
            await ctx.cluster.delete_topic(name, timeout_ms=request.body["timeout_ms"])
        except BrokerError as exc:
            results.append(_result(name, exc.code, str(exc)))
            continue
        results.append(_result(name, ErrorCode.NONE, None))
    return {"topics": results}


async def create_partitions(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    results = []
    for entry in request.body["topics"]:
        name = entry["name"]
        try:
            _authorize(ctx, ApiKey.CREATE_PARTITIONS, name, "add partitions to")
            refuse_internal(name, "add partitions to")
            await ctx.cluster.create_partitions(
                name, entry["count"], entry["assignments"],
                validate_only=request.body["validate_only"],
                timeout_ms=request.body["timeout_ms"])
        except BrokerError as exc:
            results.append(_result(name, exc.code, str(exc)))
            continue
        results.append(_result(name, ErrorCode.NONE, None))
    return {"topics": results}


#: DescribeConfigs / IncrementalAlterConfigs resource types (Kafka's): only topics have configs
RESOURCE_TOPIC = 2
#: IncrementalAlterConfigs operations
CONFIG_SET, CONFIG_DELETE = 0, 1


async def describe_configs(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    results = []
    for entry in request.body["resources"]:
        name, wanted = entry["resource_name"], entry["config_names"]
        result: dict[str, Any] = {"error_code": ErrorCode.NONE, "error_message": None,
                                  "resource_type": entry["resource_type"],
                                  "resource_name": name, "configs": []}
        results.append(result)
        if entry["resource_type"] != RESOURCE_TOPIC:
            result.update(error_code=ErrorCode.INVALID_REQUEST,
                          error_message=f"resource type {entry['resource_type']} has no "
                          f"configs here; only topics ({RESOURCE_TOPIC}) do")
            continue
        if not ctx.security.allowed(ApiKey.DESCRIBE_CONFIGS, ResourceType.TOPIC, name):
            result.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                          error_message=f"not authorized to describe the configs of topic "
                          f"{name!r} (needs DescribeConfigs on the topic)")
            continue
        topic = ctx.cluster.topic(name)
        if topic is None:
            result.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                          error_message=f"topic {name!r} does not exist")
            continue
        result["configs"] = [
            {"name": key, "value": value, "source": source}
            for key, value, source in describe_topic_configs(topic.configs, ctx.settings)
            if wanted is None or any(a in wanted for a in config_aliases(key))
        ]
    return {"results": results}


async def incremental_alter_configs(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    results = []
    for entry in request.body["resources"]:
        name = entry["resource_name"]
        try:
            if entry["resource_type"] != RESOURCE_TOPIC:
                raise InvalidRequestError(
                    f"resource type {entry['resource_type']} has no configs here; only "
                    f"topics ({RESOURCE_TOPIC}) do")
            _authorize(ctx, ApiKey.INCREMENTAL_ALTER_CONFIGS, name, "alter the configs of")
            refuse_internal(name, "alter configs of")
            set_, delete = _config_operations(name, entry["configs"])
            await ctx.cluster.alter_topic_configs(
                name, set_, delete, validate_only=request.body["validate_only"],
                timeout_ms=request.body["timeout_ms"])
        except BrokerError as exc:
            results.append(_config_result(entry, exc.code, str(exc)))
            continue
        results.append(_config_result(entry, ErrorCode.NONE, None))
    return {"results": results}


def _config_operations(name: str, ops: list[dict[str, Any]]) -> tuple[dict[str, str], list[str]]:
    set_: dict[str, str] = {}
    delete: list[str] = []
    for op in ops:
        key = op["name"]
        if op["config_operation"] == CONFIG_SET:
            if op["value"] is None:
                raise InvalidConfigError(f"topic {name!r}: config {key!r} is set to null")
            set_[key] = op["value"]
        elif op["config_operation"] == CONFIG_DELETE:
            delete.append(key)
        else:
            raise InvalidRequestError(
                f"topic {name!r}: config {key!r}: unknown operation {op['config_operation']} "
                f"(0 set, 1 delete)")
    if len({*set_, *delete}) < len(ops):
        raise InvalidRequestError(f"topic {name!r}: a config is named more than once")
    return set_, delete


def _config_result(entry: dict[str, Any], code: ErrorCode, message: str | None
                   ) -> dict[str, Any]:
    return {"error_code": code, "error_message": message,
            "resource_type": entry["resource_type"], "resource_name": entry["resource_name"]}


def _result(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"name": name, "error_code": code, "error_message": message}
