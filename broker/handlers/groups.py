"""Group APIs: FindCoordinator is answered here; every other one goes to the group coordinator
(``broker.group_driver``), which answers when it is ready to -- a JoinGroup when its round ends,
a commit once it is written."""

from __future__ import annotations

from typing import Any

from broker.client_connection import CLIENT_CONNECTION
from broker.context import BrokerContext
from broker.handlers.group_authorization import authorized
from broker.handlers.metadata import broker_address
from coordinator import OFFSETS_TOPIC
from protocol.acls import ResourceType
from protocol.apis import ApiKey
from protocol.errors import BrokerError, ErrorCode
from protocol.schema import for_version
from protocol.wire import Request


async def find_coordinator(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    """Seed 001 ConsumerMetadataRequest: the leader of the group's ``__consumer_offsets``
    partition -- this broker, while it leads that partition (even while loading it: the group
    requests themselves then say COORDINATOR_LOAD_IN_PROGRESS)."""
    group_id = request.body["group_id"]
    if not group_id:
        return _no_coordinator(ErrorCode.INVALID_GROUP_ID, "the group id is empty")
    if not ctx.security.allowed(ApiKey.FIND_COORDINATOR, ResourceType.GROUP, group_id):
        return _no_coordinator(ErrorCode.GROUP_AUTHORIZATION_FAILED,
                               f"not authorized to describe group {group_id!r}")
    return await _coordinator(ctx, group_id)


async def _coordinator(ctx: BrokerContext, group_id: str) -> dict[str, Any]:
    """The live leader of the group's offsets partition. The first FindCoordinator of a
    cluster creates ``__consumer_offsets`` (as Kafka does); until it has leaders the answer is
    COORDINATOR_NOT_AVAILABLE, which clients retry."""
    cluster = ctx.cluster
    try:
        await cluster.ensure_offsets_topic(ctx.groups.partitions)
    except BrokerError as exc:
        return _no_coordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                               f"{OFFSETS_TOPIC} cannot be created yet: {exc}")
    partition = ctx.groups.coordinator.partition_for(group_id)
    leader = cluster.coordinator_for(partition)
    if leader is None:
        return _no_coordinator(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"{OFFSETS_TOPIC} partition {partition} of group {group_id!r} has no live leader",
        )
    return {"error_code": ErrorCode.NONE, "error_message": None, **broker_address(leader)}


async def coordinated(ctx: BrokerContext, request: Request) -> dict[str, Any]:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
    DescribeGroups, DeleteGroups and OffsetDelete: the coordinator's answer."""
    client = CLIENT_CONNECTION.get()

    async def ask(body: dict[str, Any]) -> dict[str, Any]:
        return await ctx.groups.request(
            request.api.key,
            body,
            client_id=request.header.client_id or "",
            client_host="" if client is None else client.host,
            connection=None if client is None else client.id,
        )

    answer = await authorized(ctx, request.api.key, request.body, ask)
    version = request.header.api_version
    if version < request.api.max_version:
        # the coordinator answers in the newest version (DescribeGroups v1's state_since_ms);
        # an older client gets only the fields its version has
        answer = for_version(request.api.response, answer, version)
    return answer


def _no_coordinator(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "node_id": -1, "host": "", "port": -1}
