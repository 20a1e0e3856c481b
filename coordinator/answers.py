"""The shapes of the coordinator's answers: response bodies as the API schemas define them, and
how a failed append to ``__consumer_offsets`` is reported to a client."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from coordinator.group import Group, Member
from coordinator.group_state import GroupState
from protocol.errors import ErrorCode
from protocol.partitions import TopicPartition, by_topic

_E = ErrorCode

#: how a failed append to __consumer_offsets is reported to the client (Kafka's mapping)
APPEND_ERROR_ANSWER: dict[ErrorCode, ErrorCode] = {
    _E.NOT_LEADER_FOR_PARTITION: _E.NOT_COORDINATOR,
    _E.NOT_COORDINATOR: _E.NOT_COORDINATOR,
    _E.UNKNOWN_TOPIC_OR_PARTITION: _E.COORDINATOR_NOT_AVAILABLE,
    _E.LEADER_NOT_AVAILABLE: _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_ENOUGH_REPLICAS: _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: _E.COORDINATOR_NOT_AVAILABLE,
    _E.REQUEST_TIMED_OUT: _E.COORDINATOR_NOT_AVAILABLE,
    _E.COORDINATOR_NOT_AVAILABLE: _E.COORDINATOR_NOT_AVAILABLE,
    _E.COORDINATOR_LOAD_IN_PROGRESS: _E.COORDINATOR_LOAD_IN_PROGRESS,
    _E.MESSAGE_TOO_LARGE: _E.INVALID_COMMIT_OFFSET_SIZE,
    _E.RECORD_LIST_TOO_LARGE: _E.INVALID_COMMIT_OFFSET_SIZE,
}


def append_error_answer(error: ErrorCode) -> ErrorCode:
    return APPEND_ERROR_ANSWER.get(error, _E.UNKNOWN_SERVER_ERROR)


def assignment_body(assignment: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    """An assignment as the wire's ``[{topic, partitions}]``, topics and partitions sorted."""
    return [{"topic": t, "partitions": ps} for t, ps in by_topic(assignment).items()]


def error_body(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"error_code": int(code), "error_message": message}


def join_error(code: ErrorCode, member_id: str, message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": int(code), "error_message": message, "generation_id": -1,
        "member_id": member_id, "assignment_strategy": "", "partitions_to_own": [],
        "protocol_name": "", "leader_id": "", "members": [],
    }


def join_answer(group: Group, member: Member) -> dict[str, Any]:
    """This generation's answer to a member's JoinGroup: its partitions when the broker
    assigns; when the leader assigns, the chosen protocol and the leader, and to the leader
    every member's metadata."""
    if not group.leader_assigns:
        return {
            "error_code": 0, "error_message": None, "generation_id": group.generation,
            "member_id": member.member_id, "assignment_strategy": group.strategy,
            "partitions_to_own": assignment_body(member.assignment),
            "protocol_name": "", "leader_id": "", "members": [],
        }
    is_leader = member.member_id == group.leader_id
    return {
        "error_code": 0, "error_message": None, "generation_id": group.generation,
        "member_id": member.member_id, "assignment_strategy": group.strategy,
        "partitions_to_own": [], "protocol_name": group.strategy, "leader_id": group.leader_id,
        "members": [
            {"member_id": m.member_id, "metadata": m.metadata} for m in group.members.values()
        ] if is_leader else [],
    }


def sync_answer(code: ErrorCode, assignment: bytes = b"", message: str | None = None
                ) -> dict[str, Any]:
    return {"error_code": int(code), "error_message": message,
            "assignment": assignment if code is _E.NONE else b""}


def partition_errors_body(
    topics: Iterable[tuple[str, Iterable[int]]], error_of: Callable[[TopicPartition], ErrorCode]
) -> list[dict[str, Any]]:
    """``[{name, partitions: [{partition, error_code}]}]`` in the order the request named them."""
    return [
        {"name": topic, "partitions": [
            {"partition": p, "error_code": int(error_of(TopicPartition(topic, p)))}
            for p in partitions
        ]}
        for topic, partitions in topics
    ]


def describe_body(group_id: str, group: Group | None, code: ErrorCode) -> dict[str, Any]:
    """DescribeGroups' entry for one group; ``code`` is how its offsets partition answers."""
    if group is None:
        return {
            "error_code": int(code if code is not _E.NONE else _E.GROUP_ID_NOT_FOUND),
            "group_id": group_id, "state": GroupState.DEAD.value, "state_since_ms": -1,
            "assignment_strategy": "", "generation_id": -1, "members": [], "protocol_type": "",
        }
    return {
        "error_code": 0, "group_id": group_id, "state": group.state.value,
        # 0: a group made by a manual-assignment commit, which has no state change to date
        "state_since_ms": group.state_since_ms if group.state_since_ms > 0 else -1,
        "assignment_strategy": group.strategy, "generation_id": group.generation,
        "members": [
            {
                "member_id": m.member_id, "client_id": m.client_id,
                "client_host": m.client_host, "session_timeout_ms": m.session_timeout_ms,
                "subscription": list(m.subscription),
                "assignment": assignment_body(m.assignment),
                "metadata": m.metadata, "assignment_bytes": m.assignment_bytes,
                "group_instance_id": m.instance_id,
            }
            for _, m in sorted(group.members.items())
        ],
        "protocol_type": group.protocol_type,
    }
