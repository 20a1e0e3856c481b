"""The controller's partition machine: NonExistent -> New -> Online <-> Offline -> NonExistent.

Kafka's PartitionStateMachine, as a table (``protocol.statemachine``): every move the
controller makes checks a row, and one that is not listed is a bug raised with the partition,
state and event. ``docs/state-machines/`` draws it from these rows.
"""

from __future__ import annotations

from enum import Enum

from protocol.statemachine import Transition, TransitionTable


class PartitionState(Enum):
    NON_EXISTENT = "NonExistent"
    NEW = "New"
    ONLINE = "Online"
    OFFLINE = "Offline"


STATE_DESCRIPTIONS: dict[PartitionState, str] = {
    PartitionState.NON_EXISTENT: "Never created, or deleted.",
    PartitionState.NEW: "Its replicas are assigned in /brokers/topics but it has no leader yet.",
    PartitionState.ONLINE: "A live replica from its ISR leads it.",
    PartitionState.OFFLINE: "Its leader died and no live in-sync replica could take over.",
}


class PartitionEvent(Enum):
    CREATED = "created"
    LEADER_ELECTED = "leader elected"
    LEADER_LOST = "leader lost"
    DELETED = "deleted"


_S = PartitionState
_E = PartitionEvent

PARTITION_MACHINE: TransitionTable[PartitionState, PartitionEvent] = TransitionTable(
    "partition",
    PartitionState.NON_EXISTENT,
    PartitionState,
    PartitionEvent,
    [
        Transition(_S.NON_EXISTENT, _E.CREATED, _S.NEW,
                   "the topic's assignment appeared in /brokers/topics",
                   "remember the replicas"),
        Transition(_S.NEW, _E.LEADER_ELECTED, _S.ONLINE,
                   "a replica is live",
                   "create the state znode (leader: first live replica, ISR: the live "
                   "replicas); LeaderAndIsr to the replicas, UpdateMetadata to every broker"),
        Transition(_S.NEW, _E.LEADER_LOST, _S.OFFLINE,
                   "no replica is live",
                   "create the state znode (leader -1, ISR: every replica, as none has data "
                   "yet); UpdateMetadata: no leader"),
        Transition(_S.ONLINE, _E.LEADER_ELECTED, _S.ONLINE,
                   "the leader died, stops (controlled shutdown) or is not the preferred "
                   "replica, and another in-sync replica is live; or a follower died or stops "
                   "and leaves the ISR",
                   "conditional write of the state znode with leader_epoch + 1; LeaderAndIsr "
                   "to the replicas, UpdateMetadata to every broker"),
        Transition(_S.ONLINE, _E.LEADER_LOST, _S.OFFLINE,
                   "the leader died and no other in-sync replica is live",
                   "state znode: leader -1, the ISR keeps its last member; UpdateMetadata"),
        Transition(_S.OFFLINE, _E.LEADER_ELECTED, _S.ONLINE,
                   "an in-sync replica came back",
                   "conditional write with leader_epoch + 1; LeaderAndIsr, UpdateMetadata"),
        Transition(_S.OFFLINE, _E.LEADER_LOST, _S.OFFLINE,
                   "still no live in-sync replica, and dead brokers left the ISR (its last "
                   "member stays)",
                   "conditional write with leader_epoch + 1; UpdateMetadata"),
        Transition(_S.NEW, _E.DELETED, _S.NON_EXISTENT,
                   "the topic is in /admin/delete_topics",
                   "StopReplica (delete) to the replicas; remove the topic's znodes"),
        Transition(_S.ONLINE, _E.DELETED, _S.NON_EXISTENT,
                   "the topic is in /admin/delete_topics",
                   "StopReplica (delete) to the replicas; remove the topic's znodes"),
        Transition(_S.OFFLINE, _E.DELETED, _S.NON_EXISTENT,
                   "the topic is in /admin/delete_topics",
                   "StopReplica (delete) to the live replicas; remove the topic's znodes"),
    ],
)
