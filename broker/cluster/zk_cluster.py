"""A member of a ZooKeeper cluster (``zookeeper_connect`` set), as the request path sees it
(``broker.cluster.Cluster``): three parts with a job each, and the client paths between them.

- ``membership.Membership``: the registration, the controller election and this broker's
  controlled shutdown;
- ``controller_requests.ControllerRequests``: LeaderAndIsr, UpdateMetadata and StopReplica
  applied to the logs, the replicas (its ``ReplicaManager``), the metadata cache and the group
  driver;
- ``topic_admin.ZkTopicAdmin``: topic changes asked of any broker, through ZooKeeper.

It is built once the broker's identity is known, on the session that read the cluster id
(``zk_session.ZooKeeperSession``, which its maker keeps and closes). It makes the group driver
it steers, as only a cluster member knows how to feed one: the offsets partitions it leads are
the ones LeaderAndIsr gives it, a record it appends is done once the ISR has it, and subscribed
topics are counted in the metadata cache. ``register`` follows once the broker listens (the
addresses it advertises need the ports it listens on), then ``serve``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

from broker.cluster import ReplicaStats
from broker.cluster import zk_layout as zk
from broker.cluster.controller_model import ShutdownDecision
from broker.cluster.controller_requests import ControllerRequests
from broker.cluster.damaged import leave_isrs
from broker.cluster.membership import Membership
from broker.cluster.metadata_cache import LiveBroker, MetadataCache, PartitionView
from broker.cluster.producer_ids import zookeeper_producer_ids
from broker.cluster.replicas import ReplicaManager
from broker.cluster.topic_admin import ZkTopicAdmin
from broker.cluster.zk_session import ZooKeeperSession
from broker.cluster.zookeeper import KazooException
from broker.group_driver import GroupDriver
from broker.identity import BrokerIdentity
from broker.purgatory import FetchPurgatory
from broker.security.credentials import CredentialStore
from broker.security.store import SecurityStore
from broker.topics import Topic, Topics
from coordinator import OFFSETS_TOPIC
from protocol.errors import (
    CoordinatorLoadInProgressError,
    LeaderNotAvailableError,
    NotLeaderForPartitionError,
    OffsetNotAvailableError,
    UnknownTopicOrPartitionError,
)
from protocol.partitions import TopicPartition


class ZooKeeperCluster:
    """``broker.cluster.Cluster`` for one broker of a ZooKeeper cluster."""

    def __init__(self, session: ZooKeeperSession, identity: BrokerIdentity, topics: Topics,
                 purgatory: FetchPurgatory, *, clock: Callable[[], float] = time.time) -> None:
        """``session``: connected; ``clock``: the group driver's."""
        settings = session.settings
        self.settings = settings
        self.zoo = session.zoo
        self._session = session
        self._directory_id = identity.directory_id
        #: what this broker knows of the cluster, from the controller's UpdateMetadata
        self.cache = MetadataCache()
        self.admin = ZkTopicAdmin(settings, self.zoo, self.cache, topics)
        self.groups = GroupDriver(settings.coordinator_config(), topics, purgatory, clock=clock,
                                  catalog=self.cache, lead_all=False, replication=self)
        self._membership = Membership(settings, self.zoo, self.cache, identity.broker_id)
        self._requests = ControllerRequests(
            settings, self.zoo, self.cache, broker_id=identity.broker_id, topics=topics,
            groups=self.groups, purgatory=purgatory,
            broker_epoch=lambda: self._membership.broker_epoch)
        self._produces_waiting = 0  # acks=all produces waiting for their ISR
        self._damaged = topics.logs.damaged  # logs that opening found damaged and cut
        self._producer_ids = zookeeper_producer_ids(self.zoo, identity.broker_id)

    # ========================================================================= life cycle

    async def register(self, *, host: str, port: int,
                       endpoints: tuple[tuple[str, str, int], ...] = ()) -> None:
        """Register in ``/brokers/ids`` (ClusterStartError when the id is another's).
        ``host``/``port``: the inter-broker listener's address; ``endpoints`` every listener
        (name, host, port), as advertised; none: only PLAINTEXT at host:port. A replica
        that lost entries to damage first leaves the ISRs nobody else can update
        (``damaged.leave_isrs``), so that it is not elected with the hole."""
        await leave_isrs(self.zoo, self.broker_id, self._damaged)
        await self._membership.register(zk.BrokerRegistration(
            self.broker_id, host, port, self.settings.broker_rack, self._directory_id,
            endpoints=endpoints))

    async def serve(self) -> None:
        """Follow and lead partitions, and take part in controller elections, until
        cancelled (after ``register``)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.replicas.run)
            nursery.start_soon(self._producer_ids.keep_a_block_ready)
            await self._membership.run()

    async def first_metadata(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until an UpdateMetadata has filled the cache."""
        with trio.move_on_after(timeout):
            while not self.cache.brokers:
                await self.cache.changed()

    @property
    def shutting_down(self) -> bool:
        return self._membership.shutting_down

    async def shut_down_controlled(self) -> None:
        """SIGTERM: leaderships move to other replicas first (``Membership``)."""
        await self._membership.shut_down_controlled()

    def stop(self) -> None:
        """The broker stops: a session lost from now on is not registered again (closing the
        session is its maker's)."""
        self._membership.stop()

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

    # ============================================================ where security is kept

    def security_store(self) -> SecurityStore:
        return self._session.security_store()

    def credential_store(self) -> CredentialStore:
        return self._session.credential_store()

    # ==================================================================== producer ids

    async def new_producer_id(self) -> int:
        """From blocks claimed in ``/latest_producer_id_block``, shared with every broker.
        Without ZooKeeper no block can be claimed: COORDINATOR_LOAD_IN_PROGRESS, which a
        producer retries (Kafka's answer while a broker waits for its next block)."""
        try:
            return await self._producer_ids.next_id()
        except KazooException as exc:
            raise CoordinatorLoadInProgressError(
                "no producer id can be handed out: claiming a block in ZooKeeper failed "
                f"({type(exc).__name__}); try again") from exc

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
