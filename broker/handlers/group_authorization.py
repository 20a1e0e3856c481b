"""What the authorizer lets through to the group coordinator (``API_ACLS``), and the answers
for what it does not: the coordinator only ever sees what the principal may do.

- JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit: Read on the group; OffsetFetch:
  Describe; OffsetDelete: Delete -- else the whole request gets GROUP_AUTHORIZATION_FAILED;
- OffsetCommit (Read), OffsetFetch (Describe) and OffsetDelete (Read) on each partition's topic
  -- else that partition gets TOPIC_AUTHORIZATION_FAILED and is not touched;
- DescribeGroups (Describe) and DeleteGroups (Delete) per group -- else that group's entry gets
  GROUP_AUTHORIZATION_FAILED;
- ListGroups: every group with Describe on the cluster, else only the groups it may Describe.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.context import BrokerContext
from protocol.acls import CLUSTER_NAME, ResourceType
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, GroupAuthorizationFailedError

Ask = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
_TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
_GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)


async def authorized(ctx: BrokerContext, api: ApiKey, body: dict[str, Any], ask: Ask
                     ) -> dict[str, Any]:
    """The coordinator's answer (``ask``) to what of ``body`` the principal may do, merged
    with the refusals of the rest."""
    if ctx.security.authorizer is None:
        return await ask(body)
    if api in _BY_GROUP_ID:
        group_id = body["group_id"]
        if not ctx.security.allowed(api, ResourceType.GROUP, group_id):
            raise GroupAuthorizationFailedError(
                f"not authorized to {_BY_GROUP_ID[api]} group {group_id!r}")
    if api in (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.OFFSET_DELETE):
        return await _per_topic(ctx, api, body, ask)
    if api == ApiKey.LIST_GROUPS:
        answer = await ask(body)
        if not ctx.security.allowed(api, ResourceType.CLUSTER, CLUSTER_NAME):
            answer["groups"] = [g for g in answer["groups"]
                                if ctx.security.allowed(api, ResourceType.GROUP, g["group_id"])]
        return answer
    if api in (ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS):
        return await _per_group(ctx, api, body, ask)
    return await ask(body)


_BY_GROUP_ID = {
    ApiKey.JOIN_GROUP: "join", ApiKey.SYNC_GROUP: "sync with", ApiKey.HEARTBEAT: "heartbeat in",
    ApiKey.LEAVE_GROUP: "leave", ApiKey.OFFSET_COMMIT: "commit offsets of",
    ApiKey.OFFSET_FETCH: "fetch offsets of", ApiKey.OFFSET_DELETE: "delete offsets of",
}


async def _per_topic(ctx: BrokerContext, api: ApiKey, body: dict[str, Any], ask: Ask
                     ) -> dict[str, Any]:
    topics = body["topics"]
    if topics is None:  # OffsetFetch of everything committed: only the topics it may describe
        answer = await ask(body)
        answer["topics"] = [t for t in answer["topics"]
                            if ctx.security.allowed(api, ResourceType.TOPIC, t["name"])]
        return answer
    allowed = [t for t in topics if ctx.security.allowed(api, ResourceType.TOPIC, t["name"])]
    denied = [t for t in topics if t not in allowed]
    if denied and not allowed:
        answer = {"topics": []}
        if api != ApiKey.OFFSET_COMMIT:
            answer["error_code"] = int(ErrorCode.NONE)
    else:
        answer = await ask({**body, "topics": allowed})
    answer["topics"] = [*answer["topics"], *(
        {"name": t["name"], "partitions": [_denied_partition(api, p) for p in t["partitions"]]}
        for t in denied)]
    return answer


def _denied_partition(api: ApiKey, requested: Any) -> dict[str, Any]:
    if api == ApiKey.OFFSET_COMMIT:
        return {"partition": requested["partition"], "error_code": _TOPIC_DENIED}
    if api == ApiKey.OFFSET_FETCH:
        return {"partition": requested, "offset": -1, "metadata": None,
                "error_code": _TOPIC_DENIED}
    return {"partition": requested, "error_code": _TOPIC_DENIED}  # OffsetDelete


async def _per_group(ctx: BrokerContext, api: ApiKey, body: dict[str, Any], ask: Ask
                     ) -> dict[str, Any]:
    ids = body["group_ids"]
    allowed = [g for g in ids if ctx.security.allowed(api, ResourceType.GROUP, g)]
    answered = (await ask({"group_ids": allowed})) if allowed else {}
    key = "groups" if api == ApiKey.DESCRIBE_GROUPS else "results"
    by_id = {entry["group_id"]: entry for entry in answered.get(key, [])}
    denied = {
        "error_code": _GROUP_DENIED, "state": "", "state_since_ms": -1,
        "assignment_strategy": "", "generation_id": -1, "members": [], "protocol_type": "",
    } if api == ApiKey.DESCRIBE_GROUPS else {"error_code": _GROUP_DENIED}
    return {key: [by_id.get(g) or {"group_id": g, **denied} for g in ids]}
