"""A cluster of one: the broker without ``zookeeper_connect``. It leads every partition, is its
own in-sync replica set and its own controller, and makes topic changes in its own data
directory (``Topics``), answered at once. Its ACLs, quotas and credentials are kept there too,
and the last block of producer ids it claimed.

It takes none of a controller's requests: they are answered STALE_CONTROLLER_EPOCH, which no
controller can get past; ControlledShutdown is INVALID_REQUEST (there is no controller to ask).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from broker.cluster import ReplicaStats
from broker.cluster.controller_model import ShutdownDecision
from broker.cluster.metadata_cache import LiveBroker, PartitionView
from broker.cluster.producer_ids import file_producer_ids
from broker.group_driver import GroupDriver
from broker.purgatory import FetchPurgatory
from broker.security.credentials import CredentialStore, FileCredentialStore
from broker.security.store import FileSecurityStore, SecurityStore
from broker.settings import BrokerSettings
from broker.topics import Topic, Topics
from coordinator import LoaderState
from protocol.errors import (
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    StaleControllerEpochError,
    UnknownTopicOrPartitionError,
)
from protocol.partitions import TopicPartition


class SingleBroker:
    """``broker.cluster.Cluster`` for a broker that is the whole cluster."""

    def __init__(self, settings: BrokerSettings, broker_id: int, topics: Topics,
                 purgatory: FetchPurgatory, groups: GroupDriver, *,
                 listener_ports: Mapping[str, int]) -> None:
        """``listener_ports``: the port each listener really listens on, filled in once the
        broker listens (the context's own mapping), for this broker's advertised address."""
        self._settings = settings
        self.broker_id = broker_id
        self._topics = topics
        self._purgatory = purgatory
        self._groups = groups
        self._listener_ports = listener_ports
        self._producer_ids = file_producer_ids(settings.data_path, broker_id)

    # ------------------------------------------------------- leadership and replication

    def check_leader(self, topic: str, partition: int) -> None:
        """It leads every partition."""

    def check_high_watermark_known(self, topic: str, partition: int) -> None:
        """Its high watermark is its log end: always known."""

    def check_min_isr(self, topic: str, partition: int) -> None:
        """Its ISR is itself, which min_insync_replicas does not exceed on one broker."""

    def prepare_produce(self, topic: str, may_create: Callable[[], bool]) -> None:
        """A produce to a missing topic creates it (auto_create_topics_enable), when the
        principal may create it."""
        if self._topics.get(topic) is None and not may_create():
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} does not exist (and creating it needs Create on the "
                "cluster or the topic)")
        self._topics.get_or_auto_create(topic)

    def appended(self, topic: str, partition: int) -> None:
        """No follower waits for it."""

    async def await_replication(self, topic: str, partition: int, last_offset: int,
                                deadline: float) -> None:
        """The append itself replicated it: the broker is its own in-sync replica set."""

    def follower_fetched(self, follower: int, topic: str, partition: int,
                         fetch_offset: int, log_start_offset: int = -1) -> None:
        """It has no follower to track."""

    async def await_low_watermark(self, topic: str, partition: int, offset: int,
                                  deadline: float) -> int:
        """Its own log start is the low watermark (already moved to ``offset``)."""
        plog = self._topics.log(topic, partition)
        if plog is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
        return plog.log_start_offset

    @property
    def produces_waiting(self) -> int:
        return 0

    def replica_stats(self) -> ReplicaStats:
        partitions = sum(t.partitions for t in self._topics.all())
        return ReplicaStats(partitions=partitions, leaders=partitions, under_replicated=0,
                            isr_shrinks=0, isr_expands=0, controller=True, offline=0)

    # ----------------------------------------------------------- where security is kept

    def security_store(self) -> SecurityStore:
        """In its own data directory."""
        return FileSecurityStore(self._settings.data_path)

    def credential_store(self) -> CredentialStore:
        """In its own data directory."""
        return FileCredentialStore(self._settings.data_path)

    # ---------------------------------------------------------------------- producer ids

    async def new_producer_id(self) -> int:
        """From blocks claimed in its own data directory."""
        return await self._producer_ids.next_id()

    # ---------------------------------------------------------------- the metadata view

    def topic_names(self) -> list[str]:
        return [t.name for t in self._topics.all()]

    def topic(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def partitions(self, name: str) -> Mapping[int, PartitionView] | None:
        topic = self._topics.get(name)
        return None if topic is None else self._led(topic)

    def _led(self, topic: Topic) -> dict[int, PartitionView]:
        me = (self.broker_id,)
        return {p: PartitionView(self.broker_id, 0, me, me) for p in range(topic.partitions)}

    def brokers(self) -> Mapping[int, LiveBroker]:
        return {self.broker_id: self._me()}

    def _me(self) -> LiveBroker:
        """This broker on each listener, as advertised."""
        advertised = self._settings.advertised_endpoint
        endpoints = {name: advertised(name, port) for name, port in self._listener_ports.items()}
        first = next(iter(self._listener_ports.items()), ("PLAINTEXT", 0))
        host, port = advertised(*first)
        return LiveBroker(self.broker_id, host, port, self._settings.broker_rack, endpoints)

    @property
    def controller_id(self) -> int:
        return self.broker_id

    async def auto_create(self, name: str, *, requested: bool
                          ) -> Mapping[int, PartitionView] | None:
        """Created at once, with the broker's defaults, when the request and the broker
        allow it."""
        return self._led(self._topics.get_or_auto_create(name, requested=requested))

    # ---------------------------------------------------------------- group coordination

    async def ensure_offsets_topic(self, partitions: int) -> None:
        """The group driver creates ``__consumer_offsets`` itself when it starts."""

    def coordinator_for(self, partition: int) -> LiveBroker | None:
        """This broker, once its coordinator has the partition (loading counts: the group
        requests then say COORDINATOR_LOAD_IN_PROGRESS)."""
        if self._groups.coordinator.partition_state(partition) is LoaderState.DOWN:
            return None
        return self._me()

    # ---------------------------------------------------------------------- topic admin

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: Mapping[str, str], *, validate_only: bool,
                           timeout_ms: int,
                           assignment: Mapping[int, list[int]] | None = None) -> None:
        if assignment is not None:
            self._check_assignment(list(assignment.values()))
        self._topics.create(name, partitions, replication_factor, configs,
                            validate_only=validate_only)

    async def delete_topic(self, name: str, *, timeout_ms: int) -> None:
        topic = self._topics.delete(name)
        for partition in range(topic.partitions):  # parked fetches answer: it is gone
            self._purgatory.appended(name, partition)

    async def create_partitions(self, name: str, count: int,
                                assignments: list[list[int]] | None, *, validate_only: bool,
                                timeout_ms: int) -> None:
        if assignments is not None:
            self._check_assignment(assignments)
        self._topics.add_partitions(name, count, validate_only=validate_only)

    async def alter_topic_configs(self, name: str, set_: Mapping[str, str],
                                  delete: list[str], *, validate_only: bool,
                                  timeout_ms: int) -> None:
        self._topics.alter_configs(name, set_, delete, validate_only=validate_only)

    def _check_assignment(self, assignments: list[list[int]]) -> None:
        for replicas in assignments:
            if replicas != [self.broker_id]:
                raise InvalidReplicaAssignmentError(
                    f"replica list {replicas} names brokers other than this single broker "
                    f"({self.broker_id})")

    # ---------------------------------------------------------- the controller's requests

    def _no_controller_requests(self) -> StaleControllerEpochError:
        return StaleControllerEpochError(
            f"broker {self.broker_id} runs without zookeeper_connect and takes no controller "
            "requests")

    async def leader_and_isr(self, body: dict[str, Any]) -> dict[str, Any]:
        raise self._no_controller_requests()

    async def update_metadata(self, body: dict[str, Any]) -> dict[str, Any]:
        raise self._no_controller_requests()

    async def stop_replica(self, body: dict[str, Any]) -> dict[str, Any]:
        raise self._no_controller_requests()

    def offsets_for_leader_epoch(self, body: dict[str, Any]) -> dict[str, Any]:
        raise self._no_controller_requests()

    async def controlled_shutdown(self, broker_id: int) -> ShutdownDecision:
        raise InvalidRequestError(
            f"broker {self.broker_id} runs without zookeeper_connect: there is no controller")

    async def preferred_election(self, tps: list[TopicPartition] | None
                                 ) -> list[TopicPartition]:
        """It leads everything: nothing to elect."""
        return []

    async def reassign(self, wanted: list[tuple[TopicPartition, list[int]]]
                       ) -> dict[TopicPartition, str | None]:
        """Only "all on this broker" is a valid assignment, and nothing moves."""
        return {tp: None if replicas == [self.broker_id] else
                f"a single broker ({self.broker_id}) holds every replica"
                for tp, replicas in wanted}
