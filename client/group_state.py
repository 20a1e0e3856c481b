"""The group consumer's state machine (seed 001 "State diagram", Consumer), as a table.

``CONSUMER_MACHINE`` lists every move with its guard and effect, ``STATE_DESCRIPTIONS`` what
each state means; docs/state-machines is generated from them. ``transition`` raises
``IllegalTransition`` on any move the table does not list.
"""

from __future__ import annotations

from enum import Enum

from protocol.errors import ErrorCode
from protocol.statemachine import IllegalTransition, Transition, TransitionTable

__all__ = ["IllegalTransition"]  # raised by transition()


class ConsumerState(Enum):
    DOWN = "Down"
    DISCOVER_COORDINATOR = "Start up & discover coordinator"
    PART_OF_GROUP = "Part of a group"
    REDISCOVER_COORDINATOR = "Re-discover coordinator"
    STOPPED_CONSUMPTION = "Stopped consumption"
    REJOINING = "Rejoining while consuming"


# seed 001 "State diagram", Consumer
STATE_DESCRIPTIONS: dict[ConsumerState, str] = {
    ConsumerState.DOWN: "Seed: \"The consumer process is down\".",
    ConsumerState.DISCOVER_COORDINATOR:
        "Seed: \"the consumer discovers the co-ordinator for it's group. The consumer sends a "
        "JoinGroupRequest (with no consumer id) once it discovers the co-ordinator\".",
    ConsumerState.PART_OF_GROUP:
        "Seed: \"the consumer is part of a group if it receives a JoinGroupResponse with no "
        "error code, a consumer id and the generation id for it's group\". It fetches and "
        "heartbeats.",
    ConsumerState.REDISCOVER_COORDINATOR:
        "Seed: \"the consumer does not stop consumption but tries to re-discover the "
        "co-ordinator\".",
    ConsumerState.STOPPED_CONSUMPTION:
        "Seed: \"the consumer stops consumption and commits offsets, until it joins the group "
        "again\". An eager member's rebalance; an incremental member's only when it lost its "
        "place in the group.",
    ConsumerState.REJOINING:
        "Not in the seed: an incremental member's rebalance. It keeps fetching every "
        "partition it owns while its JoinGroup (naming them as owned_partitions) is held; the "
        "answer says which to let go of and which are new. The coordinator gives none of "
        "them to another member before it has rejoined without them.",
}


class ConsumerEvent(Enum):
    START = "start"
    COORDINATOR_FOUND = "coordinator found"
    JOINED = "joined"
    JOIN_REJECTED = "join rejected"
    HEARTBEAT_OK = "heartbeat ok"
    REJOIN_NEEDED = "rejoin needed"
    REJOIN_CONSUMING = "rejoin needed, still consuming"
    COORDINATOR_LOST = "coordinator lost"
    BACK_OFF = "back off"
    FENCED = "fenced"
    CLOSE = "close"


_S = ConsumerState
_E = ConsumerEvent

_T = Transition[ConsumerState, ConsumerEvent]
_FENCED = ("JoinGroup, Heartbeat or OffsetCommit: FENCED_INSTANCE_ID (KIP-345: a newer "
           "process took this static member's group_instance_id)")
_FENCED_EFFECT = ("stop fetching; raise FencedInstanceIdError to the caller: never two owners "
                  "of one instance's partitions")

CONSUMER_MACHINE: TransitionTable[ConsumerState, ConsumerEvent] = TransitionTable(
    "consumer", ConsumerState.DOWN, ConsumerState, ConsumerEvent, [
    _T(_S.DOWN, _E.START, _S.DISCOVER_COORDINATOR,
               "subscribe() then poll()", "send FindCoordinator to a bootstrap broker"),
    _T(_S.DISCOVER_COORDINATOR, _E.COORDINATOR_FOUND, _S.DISCOVER_COORDINATOR,
               "FindCoordinator answered",
               "send JoinGroup (empty member id on first start; after a rebalance, once the "
               "revoked partitions are committed and the listener told)"),
    _T(_S.DISCOVER_COORDINATOR, _E.JOINED, _S.PART_OF_GROUP,
               "JoinGroup answered without error",
               "keep member id and generation; fetch the partitions to own; heartbeat"),
    _T(_S.DISCOVER_COORDINATOR, _E.JOIN_REJECTED, _S.DOWN,
               "JoinGroup: INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_ASSIGNMENT_STRATEGY, "
               "INVALID_SESSION_TIMEOUT or INVALID_GROUP_ID",
               "raise to the caller: it cannot join"),
    _T(_S.DISCOVER_COORDINATOR, _E.REJOIN_NEEDED, _S.DISCOVER_COORDINATOR,
               "JoinGroup: UNKNOWN_MEMBER_ID or REBALANCE_IN_PROGRESS",
               "forget the member id if unknown; send JoinGroup again"),
    _T(_S.DISCOVER_COORDINATOR, _E.COORDINATOR_LOST, _S.DISCOVER_COORDINATOR,
               "NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, no answer, or connection closed",
               "back off; send FindCoordinator again"),
    _T(_S.DISCOVER_COORDINATOR, _E.BACK_OFF, _S.DISCOVER_COORDINATOR,
               "COORDINATOR_LOAD_IN_PROGRESS or another retriable error",
               "retry after the backoff"),
    _T(_S.DISCOVER_COORDINATOR, _E.FENCED, _S.DOWN, _FENCED, _FENCED_EFFECT),
    _T(_S.DISCOVER_COORDINATOR, _E.CLOSE, _S.DOWN, "close() or unsubscribe()",
               "send LeaveGroup if the member has an id"),
    _T(_S.PART_OF_GROUP, _E.HEARTBEAT_OK, _S.PART_OF_GROUP,
               "Heartbeat answered without error", "keep fetching"),
    _T(_S.PART_OF_GROUP, _E.REJOIN_NEEDED, _S.STOPPED_CONSUMPTION,
               "Heartbeat or OffsetCommit: REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or "
               "UNKNOWN_MEMBER_ID; or the subscription changed (subscribe(), or the topics a "
               "pattern matches). An incremental member: ILLEGAL_GENERATION or "
               "UNKNOWN_MEMBER_ID only (its partitions may have new owners already)",
               "stop fetching; commit offsets (unless the member is unknown); revoke the "
               "partitions (listener); send JoinGroup with the member id (empty if unknown)"),
    _T(_S.PART_OF_GROUP, _E.REJOIN_CONSUMING, _S.REJOINING,
               "an incremental member: Heartbeat or OffsetCommit: REBALANCE_IN_PROGRESS; the "
               "subscription changed; or it has just let go of partitions its last answer "
               "left out (the coordinator's next round waits for it)",
               "keep fetching every partition it owns; send JoinGroup with the member id and "
               "those partitions (owned_partitions) once the ones let go of are committed and "
               "the listener told"),
    _T(_S.PART_OF_GROUP, _E.COORDINATOR_LOST, _S.REDISCOVER_COORDINATOR,
               "NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, no heartbeat answer within the "
               "session timeout, or connection closed",
               "keep fetching; send FindCoordinator"),
    _T(_S.PART_OF_GROUP, _E.BACK_OFF, _S.PART_OF_GROUP,
               "COORDINATOR_LOAD_IN_PROGRESS or another retriable error",
               "keep fetching; heartbeat again after the backoff"),
    _T(_S.PART_OF_GROUP, _E.FENCED, _S.DOWN, _FENCED, _FENCED_EFFECT),
    _T(_S.PART_OF_GROUP, _E.CLOSE, _S.DOWN,
               "close() or unsubscribe()",
               "commit offsets (auto-commit); revoke the partitions (listener); send LeaveGroup"),
    _T(_S.REDISCOVER_COORDINATOR, _E.COORDINATOR_FOUND, _S.PART_OF_GROUP,
               "FindCoordinator answered", "heartbeat the new coordinator"),
    _T(_S.REDISCOVER_COORDINATOR, _E.COORDINATOR_LOST, _S.REDISCOVER_COORDINATOR,
               "no coordinator yet", "keep fetching; back off; ask again"),
    _T(_S.REDISCOVER_COORDINATOR, _E.BACK_OFF, _S.REDISCOVER_COORDINATOR,
               "COORDINATOR_LOAD_IN_PROGRESS", "keep fetching; retry after the backoff"),
    _T(_S.REDISCOVER_COORDINATOR, _E.FENCED, _S.DOWN, _FENCED, _FENCED_EFFECT),
    _T(_S.REDISCOVER_COORDINATOR, _E.CLOSE, _S.DOWN,
               "close() or unsubscribe()",
               "commit offsets (auto-commit) if a coordinator answers in time; leave"),
    _T(_S.STOPPED_CONSUMPTION, _E.JOINED, _S.PART_OF_GROUP,
               "JoinGroup answered without error",
               "assign the new partitions (listener); fetch from their committed offsets"),
    _T(_S.STOPPED_CONSUMPTION, _E.REJOIN_NEEDED, _S.STOPPED_CONSUMPTION,
               "JoinGroup: UNKNOWN_MEMBER_ID or REBALANCE_IN_PROGRESS",
               "forget the member id if unknown; send JoinGroup again"),
    _T(_S.STOPPED_CONSUMPTION, _E.JOIN_REJECTED, _S.DOWN,
               "JoinGroup: INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_ASSIGNMENT_STRATEGY, "
               "INVALID_SESSION_TIMEOUT or INVALID_GROUP_ID",
               "raise to the caller"),
    _T(_S.STOPPED_CONSUMPTION, _E.COORDINATOR_LOST, _S.DISCOVER_COORDINATOR,
               "NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, no answer, or connection closed",
               "find the coordinator, then JoinGroup with the member id"),
    _T(_S.STOPPED_CONSUMPTION, _E.BACK_OFF, _S.STOPPED_CONSUMPTION,
               "COORDINATOR_LOAD_IN_PROGRESS or another retriable error",
               "send JoinGroup again after the backoff"),
    _T(_S.STOPPED_CONSUMPTION, _E.FENCED, _S.DOWN, _FENCED, _FENCED_EFFECT),
    _T(_S.STOPPED_CONSUMPTION, _E.CLOSE, _S.DOWN,
               "close() or unsubscribe()", "send LeaveGroup"),
    _T(_S.REJOINING, _E.JOINED, _S.PART_OF_GROUP,
               "JoinGroup answered without error",
               "stop fetching the partitions the answer leaves out, commit them, tell the "
               "listener of just those, then rejoin at once; start the new ones from their "
               "committed offsets and tell the listener of just those; the others never stop"),
    _T(_S.REJOINING, _E.REJOIN_CONSUMING, _S.REJOINING,
               "JoinGroup: REBALANCE_IN_PROGRESS", "keep fetching; send JoinGroup again"),
    _T(_S.REJOINING, _E.REJOIN_NEEDED, _S.STOPPED_CONSUMPTION,
               "JoinGroup: UNKNOWN_MEMBER_ID (the group went on without this member: its "
               "partitions may have new owners)",
               "stop fetching; revoke every partition (listener); join as a new member"),
    _T(_S.REJOINING, _E.COORDINATOR_LOST, _S.REJOINING,
               "NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, no answer, or connection closed",
               "keep fetching; send FindCoordinator"),
    _T(_S.REJOINING, _E.COORDINATOR_FOUND, _S.REJOINING,
               "FindCoordinator answered", "send JoinGroup again, still fetching"),
    _T(_S.REJOINING, _E.BACK_OFF, _S.REJOINING,
               "COORDINATOR_LOAD_IN_PROGRESS or another retriable error",
               "keep fetching; send JoinGroup again after the backoff"),
    _T(_S.REJOINING, _E.JOIN_REJECTED, _S.DOWN,
               "JoinGroup: INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_ASSIGNMENT_STRATEGY, "
               "INVALID_SESSION_TIMEOUT, INVALID_GROUP_ID or INVALID_REQUEST",
               "stop fetching; raise to the caller"),
    _T(_S.REJOINING, _E.FENCED, _S.DOWN, _FENCED, _FENCED_EFFECT),
    _T(_S.REJOINING, _E.CLOSE, _S.DOWN,
               "close() or unsubscribe()",
               "commit offsets (auto-commit); revoke the partitions (listener); send LeaveGroup"),
])

#: the event an error in a JoinGroup, Heartbeat or OffsetCommit answer means to the consumer
EVENT_FOR_ERROR: dict[ErrorCode, ConsumerEvent] = {
    ErrorCode.REBALANCE_IN_PROGRESS: ConsumerEvent.REJOIN_NEEDED,
    ErrorCode.ILLEGAL_GENERATION: ConsumerEvent.REJOIN_NEEDED,
    ErrorCode.UNKNOWN_MEMBER_ID: ConsumerEvent.REJOIN_NEEDED,
    ErrorCode.NOT_COORDINATOR: ConsumerEvent.COORDINATOR_LOST,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ConsumerEvent.COORDINATOR_LOST,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ConsumerEvent.BACK_OFF,
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL: ConsumerEvent.JOIN_REJECTED,
    ErrorCode.UNKNOWN_ASSIGNMENT_STRATEGY: ConsumerEvent.JOIN_REJECTED,
    ErrorCode.INVALID_SESSION_TIMEOUT: ConsumerEvent.JOIN_REJECTED,
    ErrorCode.INVALID_GROUP_ID: ConsumerEvent.JOIN_REJECTED,
}


def transition(state: ConsumerState, event: ConsumerEvent) -> ConsumerState:
    """The state after ``event`` in ``state``; raises ``IllegalTransition`` if not listed."""
    return CONSUMER_MACHINE.next_state(state, event)


def event_for(code: ErrorCode, *, joining: bool) -> ConsumerEvent | None:
    """The event a coordinator's answer means: success is JOINED for a JoinGroup and
    HEARTBEAT_OK otherwise; None for codes that do not concern membership."""
    if code is ErrorCode.NONE:
        return ConsumerEvent.JOINED if joining else ConsumerEvent.HEARTBEAT_OK
    return EVENT_FOR_ERROR.get(code)
