"""What the controller's one event queue carries (Kafka's ControllerEventManager): one frozen
value per kind of event, with exactly the data its handler needs.

ZooKeeper watches, brokers' requests and the controller's own follow-ups are all turned into
these and handled one at a time by the controller task, so it holds no locks. Watches carry no
data: a watch fires once, and its handler re-reads (and re-arms) in the controller task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from protocol.partitions import TopicPartition


@dataclass(frozen=True)
class Resign:
    """Stop being the controller (a broker refused our epoch, or the broker is stopping)."""

    reason: str


@dataclass(frozen=True)
class BrokersChanged:
    """``/brokers/ids`` changed: brokers registered or went."""


@dataclass(frozen=True)
class TopicsChanged:
    """``/brokers/topics`` changed: topics were created."""


@dataclass(frozen=True)
class RewatchAssignments:
    """The ZooKeeper connection dropped and every watch was forgotten: read every topic's
    assignment again, which sets its watch again."""


@dataclass(frozen=True)
class AssignmentChanged:
    """One topic's assignment changed (CreatePartitions added partitions)."""

    topic: str


@dataclass(frozen=True)
class DeletionsFired:
    """``/admin/delete_topics`` changed."""


@dataclass(frozen=True)
class DeleteTopics:
    """These topics are asked to be deleted."""

    topics: tuple[str, ...]


@dataclass(frozen=True)
class IsrChanges:
    """Leaders announced ISR changes under ``/isr_change_notification``."""


@dataclass(frozen=True)
class ConfigChanges:
    """Brokers announced topic config changes under ``/config/changes``."""


@dataclass(frozen=True)
class Reassign:
    """Move partitions to new replicas; the answer: per partition, None or why it cannot."""

    partitions: tuple[tuple[TopicPartition, tuple[int, ...]], ...]


@dataclass(frozen=True)
class ControlledShutdown:
    """A broker asks to stop: move its leaderships away; the answer: a ShutdownDecision."""

    broker_id: int


@dataclass(frozen=True)
class PreferredElection:
    """Lead these partitions (None: all) from their first replica; the answer: those moved."""

    partitions: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True)
class ReplicaDeleted:
    """A broker answered a StopReplica (delete): its replicas of these partitions are gone
    (of a topic being deleted, or dropped by a reassignment)."""

    broker_id: int
    partitions: tuple[TopicPartition, ...]


ControllerEvent = (
    Resign | BrokersChanged | TopicsChanged | RewatchAssignments | AssignmentChanged
    | DeletionsFired | DeleteTopics | IsrChanges | ConfigChanges | Reassign
    | ControlledShutdown | PreferredElection | ReplicaDeleted
)

#: every kind of event, for the check that each has a handler
EVENT_KINDS: tuple[type, ...] = get_args(ControllerEvent)
