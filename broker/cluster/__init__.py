"""The cluster: which brokers are live, where replicas go, and who leads each partition.

``Cluster`` is all the request path asks of it -- whether this broker leads a partition, when a
write is replicated, topic changes, the metadata view, who coordinates a group -- so that the
handlers read the same with or without ZooKeeper. Two answer it:

- ``broker.cluster.single.SingleBroker``: a cluster of one (no ``zookeeper_connect``), which
  leads every partition and makes topic changes in its own data directory;
- ``broker.cluster.zk_cluster.ZooKeeperCluster``: a member of a ZooKeeper cluster, told by the
  controller what it leads and asking ZooKeeper for topic changes.

Each also says where the ACLs, quotas and SCRAM credentials are kept (the data directory, or
ZooKeeper), so that the broker's start-up never asks which cluster it is in to find them, and
hands out the idempotent producers' ids from the same place.

Handlers take and give plain values here (names, counts, ``LiveBroker``, ``PartitionView``,
``ShutdownDecision``); shaping them into a response body is the handler's job, so that another
wire codec can reuse the same calls. Only the controller's own requests (LeaderAndIsr,
UpdateMetadata, StopReplica, OffsetsForLeaderEpoch) pass their bodies through: they come from
brokers, never from another front door.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from broker.cluster.controller_model import ShutdownDecision
    from broker.cluster.metadata_cache import LiveBroker, PartitionView
    from broker.security.credentials import CredentialStore
    from broker.security.store import SecurityStore
    from broker.topics import Topic
    from protocol.partitions import TopicPartition


@dataclass(frozen=True)
class ReplicaStats:
    """This broker's replicas as the metrics report them (Kafka's ReplicaManager and
    KafkaController gauges)."""

    partitions: int
    leaders: int
    under_replicated: int
    isr_shrinks: int
    isr_expands: int
    controller: bool
    #: reported by the controller alone, as in Kafka
    offline: int


class Cluster(Protocol):
    """What the request path needs from the cluster this broker is part of."""

    # ------------------------------------------------------- leadership and replication

    def check_leader(self, topic: str, partition: int) -> None:
        """Raise (NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION)
        unless this broker leads the partition: Produce, Fetch, ListOffsets, DeleteRecords."""

    def check_high_watermark_known(self, topic: str, partition: int) -> None:
        """Raise OFFSET_NOT_AVAILABLE while a new leader does not know its high watermark."""

    def check_min_isr(self, topic: str, partition: int) -> None:
        """acks=all: raise NOT_ENOUGH_REPLICAS while the ISR is under min_insync_replicas."""

    def prepare_produce(self, topic: str, may_create: Callable[[], bool]) -> None:
        """Before a produce to ``topic``: create it if this cluster creates topics on produce
        (``may_create``: whether the principal may), or raise the error to answer."""

    def appended(self, topic: str, partition: int) -> None:
        """A leader's log grew: followers waiting for it may fetch."""

    async def await_replication(self, topic: str, partition: int, last_offset: int,
                                deadline: float) -> None:
        """acks=all: return once the ISR has ``last_offset`` (raise at ``deadline``)."""

    def follower_fetched(self, follower: int, topic: str, partition: int,
                         fetch_offset: int, log_start_offset: int = -1) -> None:
        """A follower's fetch: it has everything before ``fetch_offset``."""

    async def await_low_watermark(self, topic: str, partition: int, offset: int,
                                  deadline: float) -> int:
        """DeleteRecords: the low watermark once every live replica's log start has reached
        ``offset`` (raise at ``deadline``)."""

    @property
    def produces_waiting(self) -> int:
        """acks=all produces waiting for their ISR (the produce purgatory's size)."""

    def replica_stats(self) -> ReplicaStats: ...

    # ----------------------------------------------------------- where security is kept

    def security_store(self) -> SecurityStore:
        """Where the ACLs and quotas are kept."""

    def credential_store(self) -> CredentialStore:
        """Where the SCRAM credentials are kept."""

    # ---------------------------------------------------------------------- producer ids

    async def new_producer_id(self) -> int:
        """A producer id no producer of the cluster has had (InitProducerId): from blocks
        claimed in ZooKeeper, or in the data directory (``broker.cluster.producer_ids``)."""

    # ---------------------------------------------------------------- the metadata view

    def topic_names(self) -> list[str]:
        """Every topic, in the order Metadata lists them."""

    def topic(self, name: str) -> Topic | None:
        """The topic (partition count, configs) as this broker knows it."""

    def partitions(self, name: str) -> Mapping[int, PartitionView] | None:
        """Each partition's leader, replicas and ISR; None: no such topic."""

    def brokers(self) -> Mapping[int, LiveBroker]:
        """The live brokers, by id."""

    @property
    def controller_id(self) -> int: ...

    async def auto_create(self, name: str, *, requested: bool
                          ) -> Mapping[int, PartitionView] | None:
        """Metadata's auto-creation of a missing topic: its partitions once it exists, None
        when it is asked for but not there yet (LEADER_NOT_AVAILABLE, the client asks again);
        raises the error to answer when it may not be created."""

    # ---------------------------------------------------------------- group coordination

    async def ensure_offsets_topic(self, partitions: int) -> None:
        """``__consumer_offsets`` exists after this (Kafka creates it on first use)."""

    def coordinator_for(self, partition: int) -> LiveBroker | None:
        """The live broker leading ``__consumer_offsets`` partition ``partition``."""

    # ---------------------------------------------------------------------- topic admin

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: Mapping[str, str], *, validate_only: bool,
                           timeout_ms: int,
                           assignment: Mapping[int, list[int]] | None = None) -> None: ...

    async def delete_topic(self, name: str, *, timeout_ms: int) -> None: ...

    async def create_partitions(self, name: str, count: int,
                                assignments: list[list[int]] | None, *, validate_only: bool,
                                timeout_ms: int) -> None: ...

    async def alter_topic_configs(self, name: str, set_: Mapping[str, str],
                                  delete: list[str], *, validate_only: bool,
                                  timeout_ms: int) -> None: ...

    # ---------------------------------------------------------- the controller's requests

    async def leader_and_isr(self, body: dict[str, Any]) -> dict[str, Any]: ...

    async def update_metadata(self, body: dict[str, Any]) -> dict[str, Any]: ...

    async def stop_replica(self, body: dict[str, Any]) -> dict[str, Any]: ...

    def offsets_for_leader_epoch(self, body: dict[str, Any]) -> dict[str, Any]: ...

    async def controlled_shutdown(self, broker_id: int) -> ShutdownDecision:
        """Move ``broker_id``'s leaderships away (answered by the controller only)."""

    async def preferred_election(self, tps: list[TopicPartition] | None
                                 ) -> list[TopicPartition]:
        """Move leadership back to preferred replicas; which moved."""

    async def reassign(self, wanted: list[tuple[TopicPartition, list[int]]]
                       ) -> dict[TopicPartition, str | None]:
        """Start moving partitions to new replicas: a problem per partition, or None."""
