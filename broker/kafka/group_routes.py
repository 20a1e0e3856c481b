"""The group APIs from Kafka's clients, onto the native coordinator.

Kafka's clients run the classic group protocol: they assign partitions themselves (the
coordinator hands the leader every member's subscription in JoinGroup, and the leader's
SyncGroup carries everyone's assignment), which the coordinator runs beside its own one-round
assignment (docs/state-machines/group.md). Offsets are one namespace: what a Kafka client
commits, a native consumer of the same group resumes from, and the other way round.
"""

from __future__ import annotations

from typing import Any

from broker.kafka.route import Body, Route, same_body
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka import consumer_protocol

#: Kafka's names for the group states (0.10.2 calls Rebalancing "AwaitingSync")
KAFKA_GROUP_STATES = {
    "Steady": "Stable",
    "PrepareRebalance": "PreparingRebalance",
    "Rebalancing": "AwaitingSync",
    "Empty": "Empty",
    "Dead": "Dead",
}
#: what Kafka's tools call a group of consumers; odradek's own groups are shown as such too
CONSUMER = "consumer"


def _error_only(reply: Body, body: Body, version: int) -> Body:
    return {"error_code": reply["error_code"]}


def _error_refusal(body: Body, version: int, code: int) -> Body:
    return {"error_code": code}


# --------------------------------------------------------------------------- FindCoordinator


#: FindCoordinator v1's key types: 0 a group's coordinator (1, a transactional id's: none here)
GROUP_KEY_TYPE = 0


def _find_coordinator_response(reply: Body, body: Body, version: int) -> Body:
    if body.get("key_type", GROUP_KEY_TYPE) != GROUP_KEY_TYPE:
        return {"error_code": ErrorCode.INVALID_REQUEST, "node_id": -1, "host": "", "port": -1,
                "error_message": "no transaction coordinators: there are no transactions yet"}
    return {"error_code": reply["error_code"], "node_id": reply["node_id"],
            "host": reply["host"], "port": reply["port"]}


def _find_coordinator_refusal(body: Body, version: int, code: int) -> Body:
    return {"error_code": code, "node_id": -1, "host": "", "port": -1}


FIND_COORDINATOR = Route(
    ApiKey.FIND_COORDINATOR, 0, lambda body, version: {"group_id": body["key"]},
    _find_coordinator_response, _find_coordinator_refusal)

# -------------------------------------------------------------------------- JoinGroup & co.


def _join_group_request(body: Body, version: int) -> Body:
    return {
        "group_id": body["group_id"],
        "session_timeout_ms": body["session_timeout_ms"],
        # v0 has none: the session timeout is the rebalance timeout, as in Kafka
        "rebalance_timeout_ms": body.get("rebalance_timeout_ms", -1),
        "topics": [],
        "member_id": body["member_id"],
        "assignment_strategy": "",
        "protocol_type": body["protocol_type"],
        "protocols": [{"name": p["name"], "metadata": bytes(p["metadata"])}
                      for p in body["protocols"]],
    }


def _join_group_response(reply: Body, body: Body, version: int) -> Body:
    return {
        "error_code": reply["error_code"],
        "generation_id": reply["generation_id"],
        "protocol_name": reply.get("protocol_name", ""),
        "leader": reply.get("leader_id", ""),
        "member_id": reply["member_id"],
        "members": reply.get("members", []),
    }


def _join_group_refusal(body: Body, version: int, code: int) -> Body:
    return {"error_code": code, "generation_id": -1, "protocol_name": "", "leader": "",
            "member_id": body["member_id"], "members": []}


JOIN_GROUP = Route(ApiKey.JOIN_GROUP, 1, _join_group_request, _join_group_response,
                   _join_group_refusal)


def _sync_group_request(body: Body, version: int) -> Body:
    return {
        "group_id": body["group_id"],
        "generation_id": body["generation_id"],
        "member_id": body["member_id"],
        "assignments": [{"member_id": a["member_id"], "assignment": bytes(a["assignment"])}
                        for a in body["assignments"]],
    }


def _sync_group_response(reply: Body, body: Body, version: int) -> Body:
    return {"error_code": reply["error_code"], "assignment": reply["assignment"]}


SYNC_GROUP = Route(ApiKey.SYNC_GROUP, 0, _sync_group_request, _sync_group_response,
                   lambda body, version, code: {"error_code": code, "assignment": b""})
HEARTBEAT = Route(ApiKey.HEARTBEAT, 0, same_body, _error_only, _error_refusal)
LEAVE_GROUP = Route(ApiKey.LEAVE_GROUP, 0, same_body, _error_only, _error_refusal)

# ------------------------------------------------------------------------------ OffsetCommit


def _offset_commit_request(body: Body, version: int) -> Body:
    # v2's retention_time_ms is not kept per commit: offsets_retention_ms applies to all
    return {
        "group_id": body["group_id"],
        "generation_id": body.get("generation_id", -1),  # v0: no group membership
        "member_id": body.get("member_id", ""),
        "topics": [
            {"name": t["name"],
             "partitions": [{"partition": p["partition_index"], "offset": p["committed_offset"],
                             "metadata": p["committed_metadata"],
                             "commit_timestamp": p.get("commit_timestamp", -1)}
                            for p in t["partitions"]]}
            for t in body["topics"]
        ],
    }


def _offset_commit_response(reply: Body, body: Body, version: int) -> Body:
    return {"topics": [
        {"name": t["name"],
         "partitions": [{"partition_index": p["partition"], "error_code": p["error_code"]}
                        for p in t["partitions"]]}
        for t in reply["topics"]
    ]}


def _offset_commit_refusal(body: Body, version: int, code: int) -> Body:
    return {"topics": [
        {"name": t["name"],
         "partitions": [{"partition_index": p["partition_index"], "error_code": code}
                        for p in t["partitions"]]}
        for t in body["topics"]
    ]}


OFFSET_COMMIT = Route(ApiKey.OFFSET_COMMIT, 0, _offset_commit_request, _offset_commit_response,
                      _offset_commit_refusal)

# ------------------------------------------------------------------------------- OffsetFetch


def _offset_fetch_request(body: Body, version: int) -> Body:
    topics = body["topics"]
    return {
        "group_id": body["group_id"],
        "topics": None if topics is None else [
            {"name": t["name"], "partitions": t["partition_indexes"]} for t in topics],
    }


def _offset_fetch_refusal(body: Body, version: int, code: int) -> Body:
    """Below v2 there is no group-level error: each partition asked for carries it."""
    return {
        "error_code": code,
        "topics": [
            {"name": t["name"],
             "partitions": [{"partition_index": p, "committed_offset": -1, "metadata": None,
                             "error_code": code} for p in t["partition_indexes"]]}
            for t in body["topics"] or []
        ],
    }


def _offset_fetch_response(reply: Body, body: Body, version: int) -> Body:
    if reply["error_code"] and (version < 2 or not reply["topics"]):
        return _offset_fetch_refusal(body, version, reply["error_code"])
    return {
        "error_code": reply["error_code"],
        "topics": [
            {"name": t["name"],
             "partitions": [{"partition_index": p["partition"], "committed_offset": p["offset"],
                             "metadata": p["metadata"], "error_code": p["error_code"]}
                            for p in t["partitions"]]}
            for t in reply["topics"]
        ],
    }


OFFSET_FETCH = Route(ApiKey.OFFSET_FETCH, 0, _offset_fetch_request, _offset_fetch_response,
                     _offset_fetch_refusal)

# ---------------------------------------------------------------- ListGroups, DescribeGroups


def _list_groups_response(reply: Body, body: Body, version: int) -> Body:
    return {"error_code": reply["error_code"],
            "groups": [{"group_id": g["group_id"], "protocol_type": CONSUMER}
                       for g in reply["groups"]]}


LIST_GROUPS = Route(ApiKey.LIST_GROUPS, 0, same_body, _list_groups_response,
                    lambda body, version, code: {"error_code": code, "groups": []})


def _described_member(member: Body, native: bool) -> Body:
    """A member as Kafka's tools read it: for odradek's own groups, the subscription and
    assignment written as Kafka's ConsumerProtocol bytes."""
    if native:
        metadata = consumer_protocol.encode_subscription(
            consumer_protocol.Subscription(tuple(member["subscription"])))
        assignment = consumer_protocol.encode_assignment(consumer_protocol.Assignment(
            tuple((a["topic"], tuple(a["partitions"])) for a in member["assignment"])))
    else:
        metadata, assignment = member["metadata"], member["assignment_bytes"]
    return {"member_id": member["member_id"], "client_id": member["client_id"],
            "client_host": member["client_host"], "member_metadata": metadata,
            "member_assignment": assignment}


def _described_group(group: Body) -> dict[str, Any]:
    native = not group.get("protocol_type")
    return {
        "error_code": group["error_code"],
        "group_id": group["group_id"],
        "group_state": KAFKA_GROUP_STATES.get(group["state"], group["state"]),
        "protocol_type": CONSUMER if native else group["protocol_type"],
        "protocol_data": group["assignment_strategy"],
        "members": [_described_member(m, native) for m in group["members"]],
    }


def _describe_groups_response(reply: Body, body: Body, version: int) -> Body:
    return {"groups": [_described_group(g) for g in reply["groups"]]}


def _describe_groups_refusal(body: Body, version: int, code: int) -> Body:
    return {"groups": [{"error_code": code, "group_id": g, "group_state": "",
                        "protocol_type": "", "protocol_data": "", "members": []}
                       for g in body["groups"]]}


DESCRIBE_GROUPS = Route(ApiKey.DESCRIBE_GROUPS, 2,
                        lambda body, version: {"group_ids": body["groups"]},
                        _describe_groups_response, _describe_groups_refusal)
