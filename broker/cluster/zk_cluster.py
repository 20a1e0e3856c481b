"""A member of a ZooKeeper cluster (``zookeeper_connect`` set), as the request path sees it
(``broker.cluster.Cluster``): three parts with a job each, and the client paths between them.

- ``membership.Membership``: the session, the registration, the controller election and this
  broker's controlled shutdown;
- ``controller_requests.ControllerRequests``: LeaderAndIsr, UpdateMetadata and StopReplica
  applied to the logs, the replicas (its ``ReplicaManager``) and the metadata cache;
- ``topic_admin.ZkTopicAdmin``: topic changes asked of any broker, through ZooKeeper.

Built in two steps: ZooKeeper is reached first (``connect``: the cluster id, which the data
directory must share), and the broker joins once it listens (``attach``: its id and advertised
addresses are known then); ``register`` and ``serve`` follow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import trio

from broker.cluster import ReplicaStats
from broker.cluster import zk_layout as zk
from broker.cluster.controller_model import ShutdownDecision
from broker.cluster.controller_requests import ControllerRequests
from broker.cluster.membership import Membership, connect
from broker.cluster.metadata_cache import LiveBroker, MetadataCache, PartitionView
from broker.cluster.replicas import ReplicaManager
from broker.cluster.topic_admin import ZkTopicAdmin
from broker.cluster.zookeeper import ZooKeeper
from broker.group_driver import GroupDriver
from broker.purgatory import FetchPurgatory
from broker.settings import BrokerSettings
from broker.topics import Topic, Topics
from coordinator import OFFSETS_TOPIC
from protocol.errors import (
    LeaderNotAvailableError,
    NotLeaderForPartitionError,
    OffsetNotAvailableError,
    UnknownTopicOrPartitionError,
)
from protocol.partitions import TopicPartition


class ZooKeeperCluster:
    """``broker.cluster.Cluster`` for one broker of a ZooKeeper cluster."""

    def __init__(self, settings: BrokerSettings, topics: Topics) -> None:
        assert settings.zookeeper_connect is not None
        self.settings = settings
        self.zoo = ZooKeeper(settings.zookeeper_connect,
                             session_timeout_ms=settings.zookeeper_session_timeout_ms,
                             connection_timeout_ms=settings.zookeeper_connection_timeout_ms)
        #: what this broker knows of the cluster, from the controller's UpdateMetadata
        self.cache = MetadataCache()
        self.admin = ZkTopicAdmin(settings, self.zoo, self.cache, topics)
        self._topics = topics
        self._member: Membership | None = None  # set by ``attach``
        self._applied: ControllerRequests | None = None  # set by ``attach``
        self._produces_waiting = 0  # acks=all produces waiting for their ISR

    # ========================================================================= life cycle

    async def connect(self) -> str:
        """Reach ZooKeeper (retrying until it answers); the cluster id."""
        return await connect(self.zoo, self.settings)

    def attach(self, *, broker_id: int, directory_id: str, host: str, port: int,
               endpoints: tuple[tuple[str, str, int], ...] = (),
               groups: GroupDriver, purgatory: FetchPurgatory) -> None:
        """``host``/``port``: the inter-broker listener's address; ``endpoints`` every listener
        (name, host, port), as advertised; none: only PLAINTEXT at host:port."""
        registration = zk.BrokerRegistration(broker_id, host, port, self.settings.broker_rack,
                                             directory_id, endpoints=endpoints)
        self._member = Membership(self.settings, self.zoo, self.cache, registration)
        self._applied = ControllerRequests(
            self.settings, self.zoo, self.cache, broker_id=broker_id, topics=self._topics,
            groups=groups, purgatory=purgatory)

    async def register(self) -> None:
        """Register in ``/brokers/ids`` (ClusterStartError when the id is another's)."""
        await self._membership.register()

    async def serve(self) -> None:
        """Follow and lead partitions, and take part in controller elections, until
        cancelled (after ``register``)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.replicas.run)
            await self._membership.run()

    async def first_metadata(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until an UpdateMetadata has filled the cache."""
        with trio.move_on_after(timeout):
            while not self.cache.brokers:
                await self.cache.changed()

    @property
    def shutting_down(self) -> bool:
        return self._member is not None and self._member.shutting_down

    async def shut_down_controlled(self) -> None:
        """SIGTERM: leaderships move to other replicas first (``Membership``)."""
        await self._membership.shut_down_controlled()

    async def stop(self) -> None:
        if self._member is not None:
            self._member.stop()
        with trio.CancelScope(shield=True):
            await self.zoo.stop()

    @property
    def _membership(self) -> Membership:
        assert self._member is not None, "attach() first"
        return self._member

    @property
    def _requests(self) -> ControllerRequests:
        assert self._applied is not None, "attach() first"
        return self._applied

    @property
    def replicas(self) -> ReplicaManager:
        return self._requests.replicas

    @property
    def broker_id(self) -> int:
        return self._requests.broker_id

    # ======================================================= leadership and replication

    def check_leader(self, topic: str, partition: int) -> None:
        """Produce, Fetch and ListOffsets are for the leader (seed 003: "Consumers and
        Producers can only fetch and produce requests to leader brokers")."""
        if self.replicas.leading(TopicPartition(topic, partition)) is not None:
            return
        view = self.cache.partition(topic, partition)
        if view is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
        if view.leader < 0:
            raise LeaderNotAvailableError(f"{topic}-{partition} has no leader right now")
        raise NotLeaderForPartitionError(
            f"broker {self.broker_id} does not lead {topic}-{partition} "
            f"(broker {view.leader} does)")

    def check_high_watermark_known(self, topic: str, partition: int) -> None:
        if self.replicas.high_watermark_pending(TopicPartition(topic, partition)):
            raise OffsetNotAvailableError(
                f"{topic}-{partition}: the new leader (broker {self.broker_id}) does not know "
                "its high watermark yet")

    def min_insync(self, topic: str) -> int:
        configs = self.cache.configs.get(topic, {})
        value = configs.get("min_insync_replicas", configs.get("min.insync.replicas"))
        return self.settings.min_insync_replicas if value is None else int(value)

    def check_min_isr(self, topic: str, partition: int) -> None:
        self.replicas.check_min_isr(TopicPartition(topic, partition), self.min_insync(topic))

    def prepare_produce(self, topic: str, may_create: Callable[[], bool]) -> None:
        """A produce creates no topic in a cluster: it goes to a partition's leader."""

    def appended(self, topic: str, partition: int) -> None:
        self.replicas.appended(TopicPartition(topic, partition))

    async def await_replication(self, topic: str, partition: int, last_offset: int,
                                deadline: float) -> None:
        self._produces_waiting += 1  # the produce purgatory's size, for the metrics
        try:
            await self.replicas.wait_for_replication(
                TopicPartition(topic, partition), last_offset, self.min_insync(topic), deadline)
        finally:
            self._produces_waiting -= 1

    @property
    def produces_waiting(self) -> int:
        return self._produces_waiting

    def follower_fetched(self, follower: int, topic: str, partition: int,
                         fetch_offset: int, log_start_offset: int = -1) -> None:
        self.replicas.follower_fetched(follower, TopicPartition(topic, partition), fetch_offset, -1,
                                       log_start_offset)

    async def await_low_watermark(self, topic: str, partition: int, offset: int,
                                  deadline: float) -> int:
        """DeleteRecords: until every live replica's log start has reached ``offset``."""
        return await self.replicas.wait_for_low_watermark(
            TopicPartition(topic, partition), offset, deadline)

    def replica_stats(self) -> ReplicaStats:
        if self._applied is None:  # not a member yet: it leads and follows nothing
            return ReplicaStats(partitions=0, leaders=0, under_replicated=0, isr_shrinks=0,
                                isr_expands=0, controller=False, offline=0)
        replicas = self.replicas
        led = [r for r in replicas.replicas.values() if r.leader == replicas.broker_id]
        controller = self._membership.controller is not None
        # as in Kafka, the controller alone reports offline partitions
        offline = 0 if not controller else sum(
            1 for views in self.cache.partitions.values() for v in views.values()
            if v.leader not in self.cache.brokers)
        return ReplicaStats(
            partitions=len(replicas.replicas), leaders=len(led),
            under_replicated=sum(1 for r in led if len(r.isr) < len(r.replicas)),
            isr_shrinks=replicas.isr_shrinks, isr_expands=replicas.isr_expands,
            controller=controller, offline=offline)

    # ==================================================================== metadata view

    def topic_names(self) -> list[str]:
        return sorted(self.cache.partitions)

    def topic(self, name: str) -> Topic | None:
        return self.cache.get(name)

    def partitions(self, name: str) -> Mapping[int, PartitionView] | None:
        return self.cache.partitions.get(name)

    def brokers(self) -> Mapping[int, LiveBroker]:
        return self.cache.brokers

    @property
    def controller_id(self) -> int:
        return self.cache.controller_id

    async def auto_create(self, name: str, *, requested: bool
                          ) -> Mapping[int, PartitionView] | None:
        await self.admin.auto_create(name, requested=requested)
        return None

    # =============================================================== group coordination

    async def ensure_offsets_topic(self, partitions: int) -> None:
        await self.admin.ensure_offsets_topic(partitions)

    def coordinator_for(self, partition: int) -> LiveBroker | None:
        """The live broker leading ``__consumer_offsets`` partition ``partition``, if any."""
        return self.cache.leader(OFFSETS_TOPIC, partition)

    # ===================================================================== topic admin

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: Mapping[str, str], *, validate_only: bool,
                           timeout_ms: int,
                           assignment: Mapping[int, list[int]] | None = None) -> None:
        await self.admin.create_topic(name, partitions, replication_factor, configs,
                                      validate_only=validate_only, timeout_ms=timeout_ms,
                                      assignment=assignment)

    async def delete_topic(self, name: str, *, timeout_ms: int) -> None:
        await self.admin.delete_topic(name, timeout_ms=timeout_ms)

    async def create_partitions(self, name: str, count: int,
                                assignments: list[list[int]] | None, *, validate_only: bool,
                                timeout_ms: int) -> None:
        await self.admin.create_partitions(name, count, assignments,
                                           validate_only=validate_only, timeout_ms=timeout_ms)

    async def alter_topic_configs(self, name: str, set_: Mapping[str, str],
                                  delete: list[str], *, validate_only: bool,
                                  timeout_ms: int) -> None:
        await self.admin.alter_topic_configs(name, set_, delete,
                                             validate_only=validate_only, timeout_ms=timeout_ms)

    # ========================================================= the controller's requests

    async def leader_and_isr(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._requests.leader_and_isr(body)

    async def update_metadata(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._requests.update_metadata(body)

    async def stop_replica(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._requests.stop_replica(body)

    def offsets_for_leader_epoch(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.replicas.offsets_for_leader_epoch(body)

    async def controlled_shutdown(self, broker_id: int) -> ShutdownDecision:
        return await self._membership.controlled_shutdown(broker_id)

    async def preferred_election(self, tps: list[TopicPartition] | None
                                 ) -> list[TopicPartition]:
        return await self._membership.preferred_election(tps)

    async def reassign(self, wanted: list[tuple[TopicPartition, list[int]]]
                       ) -> dict[TopicPartition, str | None]:
        return await self._membership.reassign(wanted)
