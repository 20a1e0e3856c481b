"""The group machine: Empty, PrepareRebalance, Rebalancing, Steady, Dead.

``GROUP_MACHINE`` lists every move with its guard and effect; ``STATE_DESCRIPTIONS`` says what each
state means and ``HEARTBEAT_ANSWER`` / ``COMMIT_ANSWER`` how it answers members. Together they are
the spec (Kafka's GroupMetadata documents its states this way); docs/state-machines is generated
from them, and the coordinator checks every move against the table.
"""

from __future__ import annotations

from enum import Enum

from protocol.errors import ErrorCode
from protocol.statemachine import IdentityHashed, Transition, TransitionTable


class GroupState(IdentityHashed):
    EMPTY = "Empty"
    PREPARE_REBALANCE = "PrepareRebalance"
    REBALANCING = "Rebalancing"
    STEADY = "Steady"
    DEAD = "Dead"


STATE_DESCRIPTIONS: dict[GroupState, str] = {
    GroupState.EMPTY:
        "No members; committed offsets may remain. Only manual-assignment commits (generation "
        "-1, no member id) are accepted; a JoinGroup with an empty member id starts the first "
        "round.",
    GroupState.PREPARE_REBALANCE:
        "Seed: \"waits for the consumers to send it a JoinGroupRequest\". Members are told "
        "REBALANCE_IN_PROGRESS in heartbeats; they may still commit with the current generation "
        "before rejoining; JoinGroups are held until the join phase ends.",
    GroupState.REBALANCING:
        "Seed: \"increments the group generation id, assigns consumer ids where required and "
        "does the partition assignment\". The new generation's record is being written; the "
        "held JoinGroups are answered once it is (seed step 4 before step 5). Joins and leaves "
        "that would change the round are deferred to a round that starts right after. In a "
        "group whose leader assigns (Kafka's classic protocol) this is Kafka's AwaitingSync "
        "(CompletingRebalance): the JoinGroups are answered at once, the leader with every "
        "member's metadata, and the group waits for the leader's SyncGroup; only then is the "
        "generation written, and until then a join or a leave starts the round over.",
    GroupState.STEADY:
        "Seed: \"accepts OffsetCommitRequests and heartbeats from all consumers\".",
    GroupState.DEAD:
        "The group is gone: deleted, expired, or unloaded with its offsets partition. Nothing "
        "leaves this state.",
}


class GroupEvent(Enum):
    MEMBER_JOINED = "new or changed member joins"
    MEMBER_REJOINED = "member rejoins unchanged"
    STATIC_MEMBER_RETURNED = "static member restarts"
    MEMBER_LEFT = "member leaves"
    SESSION_EXPIRED = "session timeout"
    SLOW_MEMBER_RETURNED = "expired member heartbeats"
    TOPICS_CHANGED = "subscribed topic changed"
    JOIN_PHASE_ENDED = "join phase ends"
    JOIN_PHASE_ENDED_EMPTY = "join phase ends with no member"
    LEADER_SYNCED = "leader's SyncGroup taken"
    MEMBER_JOINED_BEFORE_SYNC = "new or changed member joins before the leader's SyncGroup"
    MEMBER_LEFT_BEFORE_SYNC = "member leaves or expires before the leader's SyncGroup"
    GENERATION_WRITTEN = "generation written"
    PARTITIONS_WITHHELD = "generation withholds partitions"
    GENERATION_WRITE_FAILED = "generation write failed"
    OFFSETS_EXPIRED = "offsets expired"
    DELETED = "DeleteGroups"
    UNLOADED = "partition unloaded"


_S = GroupState
_E = GroupEvent

_NEW_OR_CHANGED = (
    "JoinGroup with an empty member id, or from a member whose subscription or timeouts changed"
)
_UNCHANGED = "JoinGroup from a member, with its id, subscription and timeouts unchanged"
_UNLOAD = "forget the group; held JoinGroups get NOT_COORDINATOR; cancel its timers"
_UNLOADED = "the group's offsets partition is resigned"
_LEAVE = "LeaveGroup, or the connection of a new member closed before it used its id"

GROUP_MACHINE: TransitionTable[GroupState, GroupEvent] = TransitionTable(
    "group",
    GroupState.EMPTY,
    GroupState,
    GroupEvent,
    [
        # ------------------------------------------------------------------------------ Empty
        Transition(
            _S.EMPTY, _E.MEMBER_JOINED, _S.PREPARE_REBALANCE,
            "JoinGroup with an empty member id (adopts its strategy)",
            "hold the response; wait group_initial_rebalance_delay_ms for more members "
            "(each new member extends the wait, capped by the rebalance timeout)",
        ),
        Transition(
            _S.EMPTY, _E.OFFSETS_EXPIRED, _S.DEAD,
            "no offsets left: each is older than offsets_retention_ms, counted from its commit "
            "or from when the group became Empty, whichever is later",
            "append tombstones for the offsets and the group record",
        ),
        Transition(
            _S.EMPTY, _E.DELETED, _S.DEAD,
            "DeleteGroups",
            "append tombstones for the offsets and the group record; answer once written",
        ),
        Transition(_S.EMPTY, _E.UNLOADED, _S.DEAD, _UNLOADED, _UNLOAD),
        # ------------------------------------------------------------------- PrepareRebalance
        Transition(
            _S.PREPARE_REBALANCE, _E.MEMBER_JOINED, _S.PREPARE_REBALANCE,
            _NEW_OR_CHANGED + "; or a member expired in this round rejoins with its id",
            "hold the response; pause the member's session timer",
        ),
        Transition(
            _S.PREPARE_REBALANCE, _E.MEMBER_REJOINED, _S.PREPARE_REBALANCE,
            _UNCHANGED,
            "hold the response; pause the member's session timer",
        ),
        Transition(
            _S.PREPARE_REBALANCE, _E.MEMBER_LEFT, _S.PREPARE_REBALANCE,
            _LEAVE,
            "remove the member; its held JoinGroup gets UNKNOWN_MEMBER_ID",
        ),
        Transition(
            _S.PREPARE_REBALANCE, _E.SESSION_EXPIRED, _S.PREPARE_REBALANCE,
            "a member that has not rejoined is silent for its session timeout",
            "set the member aside: it may still rejoin with its id in this round",
        ),
        Transition(
            _S.PREPARE_REBALANCE, _E.SLOW_MEMBER_RETURNED, _S.STEADY,
            "the round was started only by this member's session timeout, and no other member "
            "has sent a request since (seed: Slow consumers)",
            "cancel the round; restore the member; its heartbeat gets no error",
        ),
        Transition(
            _S.PREPARE_REBALANCE, _E.TOPICS_CHANGED, _S.PREPARE_REBALANCE,
            "a subscribed topic was created or gained partitions",
            "nothing more: the assignment reads the topics when the join phase ends",
        ),
        Transition(
            _S.PREPARE_REBALANCE, _E.JOIN_PHASE_ENDED, _S.REBALANCING,
            "every member has rejoined and any initial delay is over, or the rebalance timeout "
            "passed; someone joined",
            "drop members that did not rejoin; give new members ids <group>-<uuid>; compute "
            "generation + 1 and its assignment; append the group record. A partition that an "
            "incremental member still holds (its owned_partitions) goes to nobody else in "
            "this generation: the strategy's target waits for its revocation. When the leader "
            "assigns: generation + 1, the leader (the current one if still a member, else the "
            "first to have joined) and the protocol (each member votes for its first one that "
            "all support; ties go to the leader's preference) are chosen, every held JoinGroup "
            "is answered at once (the leader's with every member's metadata), session timers "
            "run, and nothing is written yet",
        ),
        Transition(
            _S.PREPARE_REBALANCE, _E.JOIN_PHASE_ENDED_EMPTY, _S.EMPTY,
            "as above, but no member is left",
            "append the group record with no members (the generation stays: nobody holds it)",
        ),
        Transition(_S.PREPARE_REBALANCE, _E.UNLOADED, _S.DEAD, _UNLOADED, _UNLOAD),
        # ------------------------------------------------------------------------ Rebalancing
        Transition(
            _S.REBALANCING, _E.MEMBER_JOINED, _S.REBALANCING,
            _NEW_OR_CHANGED,
            "defer it to a round that starts once this one is written (seed: let the current "
            "round complete before triggering another)",
        ),
        Transition(
            _S.REBALANCING, _E.MEMBER_REJOINED, _S.REBALANCING,
            _UNCHANGED + " (a retry)",
            "this round's answer goes to the new request; the older one gets "
            "REBALANCE_IN_PROGRESS. Before the leader's SyncGroup, in a group whose leader "
            "assigns: this generation's JoinGroup answer at once (the leader's with members)",
        ),
        Transition(
            _S.REBALANCING, _E.MEMBER_JOINED_BEFORE_SYNC, _S.PREPARE_REBALANCE,
            "the leader assigns and its SyncGroup has not come: " + _NEW_OR_CHANGED
            + " (or other protocols)",
            "held SyncGroups get REBALANCE_IN_PROGRESS; hold the JoinGroup; a new join phase "
            "starts (Kafka: CompletingRebalance to PreparingRebalance)",
        ),
        Transition(
            _S.REBALANCING, _E.MEMBER_LEFT_BEFORE_SYNC, _S.PREPARE_REBALANCE,
            "the leader assigns and its SyncGroup has not come: " + _LEAVE
            + ", or a member is silent for its session timeout",
            "remove the member (an expired one may still rejoin with its id); held SyncGroups "
            "get REBALANCE_IN_PROGRESS; a new join phase starts",
        ),
        Transition(
            _S.REBALANCING, _E.LEADER_SYNCED, _S.REBALANCING,
            "the leader's SyncGroup, with this generation, before any other change",
            "take its assignments (members it left out get empty bytes); hold its SyncGroup; "
            "append the group record with every member's metadata and assignment; from now "
            "on joins and leaves are deferred as above",
        ),
        Transition(
            _S.REBALANCING, _E.MEMBER_LEFT, _S.REBALANCING,
            _LEAVE,
            "defer it: the member is removed, and a new round starts, once this one is written",
        ),
        Transition(
            _S.REBALANCING, _E.TOPICS_CHANGED, _S.REBALANCING,
            "a subscribed topic's partitions differ from those being assigned (never when the "
            "leader assigns: its clients watch the metadata and rejoin)",
            "defer it: a new round starts once this one is written",
        ),
        Transition(
            _S.REBALANCING, _E.GENERATION_WRITTEN, _S.STEADY,
            "the group record of the new generation is written",
            "answer every held JoinGroup with generation, member id and the member's partitions "
            "(when the leader assigns: every held SyncGroup with its member's assignment bytes); "
            "start session timers; replay deferred requests (which may start the next round)",
        ),
        Transition(
            _S.REBALANCING, _E.GENERATION_WRITE_FAILED, _S.PREPARE_REBALANCE,
            "the write failed",
            "answer held JoinGroups (and SyncGroups) with the error; drop members new in this "
            "round unless the leader assigns (they know their ids then); the generation stays; "
            "members rejoin",
        ),
        Transition(_S.REBALANCING, _E.UNLOADED, _S.DEAD, _UNLOADED, _UNLOAD),
        # ----------------------------------------------------------------------------- Steady
        Transition(
            _S.STEADY, _E.MEMBER_JOINED, _S.PREPARE_REBALANCE,
            _NEW_OR_CHANGED + "; or the leader's, when the leader assigns (Kafka: it rejoins "
            "when it sees the topics change)",
            "hold its response; other members get REBALANCE_IN_PROGRESS in heartbeats",
        ),
        Transition(
            _S.STEADY, _E.MEMBER_REJOINED, _S.STEADY,
            _UNCHANGED,
            "answer at once with the current generation and assignment; no rebalance",
        ),
        Transition(
            _S.STEADY, _E.STATIC_MEMBER_RETURNED, _S.STEADY,
            "JoinGroup with an empty member id and the group_instance_id of a static member "
            "(KIP-345: a restart), its subscription and timeouts unchanged",
            "the member takes a new id (requests naming the old one get FENCED_INSTANCE_ID) "
            "and keeps its assignment; append the group record with the new id (same "
            "generation) and answer once written; no rebalance",
        ),
        Transition(
            _S.STEADY, _E.MEMBER_LEFT, _S.PREPARE_REBALANCE,
            _LEAVE + " (a static member's own LeaveGroup keeps it, until its session times "
            "out; an admin's removal by instance id does not)",
            "remove the member; the others rebalance at once",
        ),
        Transition(
            _S.STEADY, _E.SESSION_EXPIRED, _S.PREPARE_REBALANCE,
            "a member is silent for its session timeout",
            "set the member aside (it may return first: seed Slow consumers)",
        ),
        Transition(
            _S.STEADY, _E.TOPICS_CHANGED, _S.PREPARE_REBALANCE,
            "a subscribed topic was created or gained partitions, or a loaded assignment no "
            "longer matches the topics (not when the leader assigns)",
            "members are told in heartbeats",
        ),
        Transition(
            _S.STEADY, _E.PARTITIONS_WITHHELD, _S.PREPARE_REBALANCE,
            "the generation just written withholds partitions from their new owners, because "
            "incremental members still hold them (right after generation written)",
            "start the next join phase at once; heartbeats tell members to rejoin. The members "
            "that lost partitions commit them, stop fetching them and rejoin without them; the "
            "others rejoin still fetching; the withheld partitions go to their new owners when "
            "the phase ends",
        ),
        Transition(_S.STEADY, _E.UNLOADED, _S.DEAD, _UNLOADED, _UNLOAD),
    ],
)

# A heartbeat from a current member with the current generation, by state. (Unknown members get
# UNKNOWN_MEMBER_ID and other generations ILLEGAL_GENERATION before this is consulted.)
HEARTBEAT_ANSWER: dict[GroupState, ErrorCode] = {
    GroupState.STEADY: ErrorCode.NONE,
    GroupState.PREPARE_REBALANCE: ErrorCode.REBALANCE_IN_PROGRESS,
    GroupState.REBALANCING: ErrorCode.REBALANCE_IN_PROGRESS,
}

# The same for a group whose leader assigns: in Rebalancing its members have their JoinGroup
# answers and heartbeat while the leader assigns (Kafka 2.x answers NONE there too; some clients
# rejoin in a loop when told REBALANCE_IN_PROGRESS right after their JoinGroup answer).
HEARTBEAT_ANSWER_LEADER_ASSIGNS: dict[GroupState, ErrorCode] = {
    **HEARTBEAT_ANSWER,
    GroupState.REBALANCING: ErrorCode.NONE,
}

# An offset commit from a current member with the current generation, by state. In Empty only
# generation -1 without a member id reaches this table (manual assignment).
COMMIT_ANSWER: dict[GroupState, ErrorCode] = {
    GroupState.EMPTY: ErrorCode.NONE,
    GroupState.STEADY: ErrorCode.NONE,
    GroupState.PREPARE_REBALANCE: ErrorCode.NONE,
    GroupState.REBALANCING: ErrorCode.REBALANCE_IN_PROGRESS,
}
