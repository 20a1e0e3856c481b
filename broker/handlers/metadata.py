"""ApiVersions and Metadata: what the broker speaks, and where every partition lives."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.client_connection import CLIENT_CONNECTION
from broker.cluster.metadata_cache import LiveBroker, PartitionView
from broker.context import BrokerContext
from broker.topics import is_internal
from protocol.acls import ResourceType
from protocol.apis import REGISTRY, ApiKey
from protocol.errors import BrokerError, ErrorCode
from protocol.wire import Request


def client_listener() -> str:
    """The listener the request's connection came in on: brokers are named by their address
    on that same listener, as Kafka does."""
    connection = CLIENT_CONNECTION.get()
    return "PLAINTEXT" if connection is None else connection.listener


def broker_address(broker: LiveBroker) -> dict[str, Any]:
    """A live broker on the client's listener."""
    host, port = broker.address_for(client_listener())
    return {"node_id": broker.node_id, "host": host, "port": port}


async def api_versions(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    return supported_apis(ErrorCode.NONE)


def supported_apis(error_code: ErrorCode) -> dict[str, Any]:
    """An ApiVersions v0 answer: every API with its versions. Also the answer to ApiVersions
    asked at a version the broker does not know, with UNSUPPORTED_VERSION (Kafka's KIP-511), so
    that a client can still learn which versions to use."""
    return {
        "error_code": error_code,
        "apis": [
            {
                "api_key": int(api.key),
                "name": api.name,
                "min_version": api.min_version,
                "max_version": api.max_version,
            }
            for api in REGISTRY.values()
        ],
    }


def _describable(ctx: BrokerContext, name: str) -> bool:
    return ctx.security.allowed(ApiKey.METADATA, ResourceType.TOPIC, name)


def _refused(ctx: BrokerContext, name: str, exists: bool, requested: bool) -> bool:
    """With an authorizer, a topic named in the request is answered TOPIC_AUTHORIZATION_FAILED
    when the principal may not Describe it, or (missing, to be auto-created) not Create it."""
    if not _describable(ctx, name):
        return True
    return (not exists and requested and ctx.settings.auto_create_topics_enable
            and not ctx.security.may_create_topic(ApiKey.METADATA, name))


async def metadata(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    """Topics named in the request (all of them for null), auto-created when both the request
    and the broker allow it. With an authorizer, only topics the principal may Describe.
    Everything comes from the cluster's metadata view (in cluster mode the cache the controller
    keeps current; a topic being auto-created there is answered LEADER_NOT_AVAILABLE, as Kafka
    does, so the client asks again)."""
    names: list[str] | None = request.body["topics"]
    requested = request.body["allow_auto_topic_creation"]
    cluster = ctx.cluster
    brokers = cluster.brokers()
    described = []
    for name in cluster.topic_names() if names is None else dict.fromkeys(names):
        parts = cluster.partitions(name)
        if names is None and not _describable(ctx, name):
            continue
        if names is not None and _refused(ctx, name, parts is not None, requested):
            described.append(_topic_error(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        if parts is None:
            try:
                parts = await cluster.auto_create(name, requested=requested)
            except BrokerError as exc:
                described.append(_topic_error(name, exc.code))
                continue
            if parts is None:
                described.append(_topic_error(name, ErrorCode.LEADER_NOT_AVAILABLE))
                continue
        described.append(_topic_metadata(name, parts, brokers,
                                         epochs=request.header.api_version >= 1))
    return {
        "brokers": [broker_address(b) for _, b in sorted(brokers.items())],
        "cluster_id": ctx.identity.cluster_id,
        "controller_id": cluster.controller_id,
        "topics": described,
    }


def _topic_metadata(name: str, parts: Mapping[int, PartitionView],
                    brokers: Mapping[int, LiveBroker], epochs: bool) -> dict[str, Any]:
    """``epochs``: each partition's leader epoch too (v1)."""
    return {
        "error_code": ErrorCode.NONE,
        "name": name,
        "is_internal": is_internal(name),
        "partitions": [
            {
                "error_code": ErrorCode.NONE if v.leader >= 0 and v.leader in brokers
                else ErrorCode.LEADER_NOT_AVAILABLE,
                "partition": p,
                "leader": v.leader,
                "replicas": list(v.replicas),
                "isr": list(v.isr),
                **({"leader_epoch": v.leader_epoch} if epochs else {}),
            }
            for p, v in sorted(parts.items())
        ],
    }


def _topic_error(name: str, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "is_internal": is_internal(name),
        "partitions": [],
    }
