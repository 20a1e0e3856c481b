"""The controller's replica machine: one per replica (a partition on one broker).

Kafka's ReplicaStateMachine, as a table (``protocol.statemachine``): a replica is created
New with its partition, Online or Offline with its broker, and a replica that must go (its topic
is deleted, or a reassignment moved the partition away) is Offline, then ReplicaDeletionStarted
once the broker is sent StopReplica with delete, ReplicaDeletionSuccessful once it answers, and
NonExistent once the controller is done with it. A replica whose broker is down cannot be
deleted yet: ReplicaDeletionIneligible, until the broker returns. A topic being deleted keeps its
name -- its znodes -- until every replica of it is ReplicaDeletionSuccessful: a broker that kept
the old log under a name created again would serve the deleted messages.
``docs/state-machines/`` draws it from these rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import structlog

from protocol.partitions import TopicPartition
from protocol.statemachine import IllegalTransition, Transition, TransitionTable

log = structlog.get_logger(__name__)

#: (topic, partition, broker id)
Replica = tuple[str, int, int]


class ReplicaState(Enum):
    NON_EXISTENT = "NonExistentReplica"
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"


STATE_DESCRIPTIONS: dict[ReplicaState, str] = {
    ReplicaState.NON_EXISTENT: "Not assigned, or deleted and forgotten.",
    ReplicaState.NEW: "Assigned (a new partition, or a reassignment's new replica); its "
                      "partition has no state written yet.",
    ReplicaState.ONLINE: "Assigned, and its broker is live.",
    ReplicaState.OFFLINE: "Its broker is down, or it is to be deleted and not asked yet.",
    ReplicaState.DELETION_STARTED: "Its broker was sent StopReplica with delete and has not "
                                   "answered yet.",
    ReplicaState.DELETION_SUCCESSFUL: "Its broker deleted its log.",
    ReplicaState.DELETION_INELIGIBLE: "To be deleted, but its broker is down: asked again when "
                                      "the broker registers again.",
}


class ReplicaEvent(Enum):
    CREATED = "created"
    BROKER_LIVE = "broker live"
    BROKER_DOWN = "broker down"
    STOPPED = "to be deleted"
    DELETION_SENT = "deletion sent"
    INELIGIBLE = "deletion ineligible"
    DELETED = "deleted"
    FORGOTTEN = "forgotten"


_S = ReplicaState
_E = ReplicaEvent

_DELETION_STARTED = ("StopReplica (delete) is queued to its live broker; its topic's "
                     "znodes stay until every replica is deleted")

REPLICA_MACHINE: TransitionTable[ReplicaState, ReplicaEvent] = TransitionTable(
    "replica",
    ReplicaState.NON_EXISTENT,
    ReplicaState,
    ReplicaEvent,
    [
        Transition(_S.NON_EXISTENT, _E.CREATED, _S.NEW,
                   "its partition was created, or a reassignment (or a deletion carried on "
                   "after a change of controller) assigns it",
                   "remember it"),
        Transition(_S.NEW, _E.BROKER_LIVE, _S.ONLINE,
                   "its partition's state is written (or read at start-up) and its broker is "
                   "live",
                   "LeaderAndIsr names it among the partition's replicas"),
        Transition(_S.NEW, _E.BROKER_DOWN, _S.OFFLINE,
                   "its partition's state is written (or read) and its broker is down",
                   "none: it hears of the partition when its broker registers"),
        Transition(_S.ONLINE, _E.BROKER_DOWN, _S.OFFLINE,
                   "its broker's registration went (or was replaced: a restarted process)",
                   "the broker leaves the partition's ISR; a new leader if it led"),
        Transition(_S.OFFLINE, _E.BROKER_LIVE, _S.ONLINE,
                   "its broker registered again",
                   "LeaderAndIsr for every replica it holds"),
        Transition(_S.NEW, _E.STOPPED, _S.OFFLINE,
                   "its topic is deleted before its state was written",
                   "its partition leaves the metadata"),
        Transition(_S.ONLINE, _E.STOPPED, _S.OFFLINE,
                   "its topic is deleted, or a finished reassignment dropped it",
                   "its partition leaves the metadata (deletion), or the ISR and assignment "
                   "(reassignment)"),
        Transition(_S.OFFLINE, _E.STOPPED, _S.OFFLINE,
                   "its topic is deleted while its broker is down",
                   "its partition leaves the metadata"),
        Transition(_S.DELETION_INELIGIBLE, _E.STOPPED, _S.OFFLINE,
                   "its broker registered again",
                   "asked again, as Kafka retries ineligible replicas"),
        Transition(_S.OFFLINE, _E.DELETION_SENT, _S.DELETION_STARTED,
                   "its broker is live", _DELETION_STARTED),
        Transition(_S.OFFLINE, _E.INELIGIBLE, _S.DELETION_INELIGIBLE,
                   "to be deleted, and its broker is down",
                   "wait for the broker to register again"),
        Transition(_S.DELETION_STARTED, _E.BROKER_DOWN, _S.DELETION_INELIGIBLE,
                   "its broker went (or restarted) before it answered",
                   "wait for the broker to register again"),
        Transition(_S.DELETION_STARTED, _E.DELETED, _S.DELETION_SUCCESSFUL,
                   "its broker answered the StopReplica without error",
                   "when every replica of a deleted topic is here: remove the topic's znodes"),
        Transition(_S.DELETION_INELIGIBLE, _E.DELETED, _S.DELETION_SUCCESSFUL,
                   "its broker's answer came after the controller saw it go (Kafka's table "
                   "has no such row: the log is gone all the same)",
                   "as from ReplicaDeletionStarted"),
        Transition(_S.DELETION_SUCCESSFUL, _E.FORGOTTEN, _S.NON_EXISTENT,
                   "its topic's znodes are removed, or its reassignment is done",
                   "forget it"),
    ],
)


@dataclass(frozen=True)
class ReplicaDeletion:
    """StopReplica with delete, to send: ``broker_id``'s replicas of ``partitions``, all of
    ``topic``; its answer moves them on (ReplicaDeletionSuccessful)."""

    broker_id: int
    topic: str
    partitions: tuple[TopicPartition, ...]


@dataclass
class ReplicaStates:
    """Every replica's state, each move checked against ``REPLICA_MACHINE`` and logged as a
    "state change" line; a replica back at NonExistent is forgotten."""

    controller_epoch: int
    states: dict[Replica, ReplicaState] = field(default_factory=dict)

    def get(self, replica: Replica) -> ReplicaState:
        return self.states.get(replica, REPLICA_MACHINE.initial)

    def on(self, broker_id: int) -> list[Replica]:
        return sorted(r for r in self.states if r[2] == broker_id)

    def of_topic(self, topic: str) -> list[Replica]:
        return sorted(r for r in self.states if r[0] == topic)

    def in_state(self, replicas: Iterable[Replica], *states: ReplicaState) -> list[Replica]:
        return [r for r in replicas if self.get(r) in states]

    def move(self, replicas: Iterable[Replica], event: ReplicaEvent, **detail: Any) -> None:
        """Move each of ``replicas`` on ``event``; IllegalTransition (naming the replica) if
        the table has no such move from its state, before any of them moves."""
        replicas = list(replicas)
        targets = [self._check(r, event) for r in replicas]
        for replica, after in zip(replicas, targets, strict=True):
            before = self.get(replica)
            if after is ReplicaState.NON_EXISTENT:
                self.states.pop(replica, None)
            else:
                self.states[replica] = after
            log.info("controller.replica_state_change", topic=replica[0],
                     partition=replica[1], broker_id=replica[2], from_state=before.value,
                     to_state=after.value, trigger=event.value,
                     controller_epoch=self.controller_epoch, **detail)

    def deletions(self, replicas: Iterable[Replica]) -> Iterator[ReplicaDeletion]:
        """One StopReplica (delete) per broker and topic for ``replicas``."""
        grouped: dict[tuple[int, str], list[TopicPartition]] = {}
        for topic, partition, broker_id in sorted(replicas):
            grouped.setdefault((broker_id, topic), []).append(TopicPartition(topic, partition))
        for (broker_id, topic), tps in sorted(grouped.items()):
            yield ReplicaDeletion(broker_id, topic, tuple(tps))

    def _check(self, replica: Replica, event: ReplicaEvent) -> ReplicaState:
        try:
            return REPLICA_MACHINE.next_state(self.get(replica), event)
        except IllegalTransition as exc:
            raise IllegalTransition(
                f"{exc} (replica of {replica[0]}-{replica[1]} on broker {replica[2]})") from None
