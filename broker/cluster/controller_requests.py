"""The controller's requests to one broker, applied: LeaderAndIsr makes it leader or follower
of partitions (creating their logs; for ``__consumer_offsets`` that starts or stops the group
coordinator of the partition), UpdateMetadata replaces its metadata cache, StopReplica stops
(and maybe deletes) replicas.

Each is fenced by the controller epoch: one older than the newest seen gets
STALE_CONTROLLER_EPOCH, so a deposed controller changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import structlog
from kazoo.exceptions import NoNodeError

from broker.cluster import zk_layout as zk
from broker.cluster.metadata_cache import MetadataCache
from broker.cluster.replicas import ReplicaManager
from broker.cluster.zookeeper import ZooKeeper
from broker.group_driver import GroupDriver
from broker.purgatory import FetchPurgatory
from broker.settings import BrokerSettings
from broker.topics import Topics
from coordinator import OFFSETS_TOPIC
from protocol.errors import BrokerError, StaleBrokerEpochError, StaleControllerEpochError
from protocol.partitions import TopicPartition

log = structlog.get_logger(__name__)


class ControllerRequests:
    """Applies the controller's requests to this broker's logs, replicas, metadata cache and
    group coordinator; owns the broker's ``ReplicaManager``, which they steer."""

    def __init__(self, settings: BrokerSettings, zoo: ZooKeeper, cache: MetadataCache, *,
                 broker_id: int, topics: Topics, groups: GroupDriver,
                 purgatory: FetchPurgatory,
                 broker_epoch: Callable[[], int] = lambda: -1) -> None:
        """``broker_epoch``: this broker's registration now (its czxid)."""
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self.zoo = zoo
        self.cache = cache
        self._topics = topics
        self._groups = groups
        self._purgatory = purgatory
        self._epoch_seen = -1
        self._leader_addresses: dict[int, tuple[str, int]] = {}
        self._offsets_epochs: dict[int, int] = {}  # the epoch each offsets partition is led at
        self.replicas = ReplicaManager(
            broker_id, zoo=zoo, settings=settings,
            on_high_watermark=purgatory.appended, broker_address=self._broker_address)

    def _broker_address(self, broker_id: int) -> tuple[str, int] | None:
        """From the last LeaderAndIsr's live leaders (it comes before UpdateMetadata), else
        from the metadata cache."""
        found = self._leader_addresses.get(broker_id)
        if found is not None:
            return found
        broker = self.cache.brokers.get(broker_id)
        return None if broker is None else (broker.host, broker.port)

    def _check_epoch(self, body: Mapping[str, Any]) -> None:
        """Refuse a request from an older controller, or one meant for an older registration
        of this broker (KIP-380): sent before the broker registered again, it lay in a cut
        link and would roll the broker's state back -- an UpdateMetadata naming the leaders of
        before."""
        sent_for, mine = body.get("broker_epoch", -1), self._broker_epoch()
        if 0 <= sent_for < mine:
            raise StaleBrokerEpochError(
                f"controller {body['controller_id']} (epoch {body['controller_epoch']}) sent a "
                f"request for broker {self.broker_id}'s registration {sent_for}; it has "
                f"registered again since ({mine})")
        epoch = body["controller_epoch"]
        if epoch < self._epoch_seen:
            raise StaleControllerEpochError(
                f"controller {body['controller_id']} sent epoch {epoch}; broker "
                f"{self.broker_id} has seen epoch {self._epoch_seen}")
        self._epoch_seen = epoch

    async def leader_and_isr(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_epoch(body)
        for b in body["live_leaders"]:
            self._leader_addresses[b["node_id"]] = (b["host"], b["port"])
        results = []
        for p in body["partitions"]:
            tp = TopicPartition(p["topic"], p["partition"])
            code = 0
            known = self.replicas.replicas.get(tp)
            if known is not None and p["leader_epoch"] < known.leader_epoch:
                code = int(StaleControllerEpochError.code)
            else:
                try:
                    await self._become(tp, p)
                except BrokerError as exc:
                    code = int(exc.code)
            results.append({"topic": tp[0], "partition": tp[1], "error_code": code})
        return {"error_code": 0, "partitions": results}

    async def _become(self, tp: TopicPartition, p: dict[str, Any]) -> None:
        topic, partition = tp
        if self._topics.log(topic, partition) is None:
            configs = await self.zoo.call(self._read_configs, topic)
            partitions = max(partition + 1, len(self.cache.partitions.get(topic, {})))
            self._topics.host(topic, partition, partitions, len(p["replicas"]), configs)
        plog = self._topics.log(topic, partition)
        assert plog is not None
        was_leader = self.replicas.leading(tp) is not None
        self.replicas.become(tp, plog, p)
        leader = p["leader"] == self.broker_id
        if leader != was_leader:
            log.info("cluster.partition_role", topic=topic, partition=partition,
                     role="leader" if leader else "follower", leader_epoch=p["leader_epoch"])
            if not leader:
                self._purgatory.appended(topic, partition)  # parked fetches answer now
        if topic == OFFSETS_TOPIC:
            self._lead_groups(partition, p["leader_epoch"] if leader else None)

    def _lead_groups(self, partition: int, leader_epoch: int | None) -> None:
        """Group ownership follows the offsets partition's leadership (Down -> Catch-up ->
        Ready, and back to Down). A new leader epoch while still loading restarts the load:
        the log may have been truncated under it."""
        if leader_epoch is None:
            self._offsets_epochs.pop(partition, None)
            self._groups.resign(partition)
            return
        before = self._offsets_epochs.get(partition)
        self._offsets_epochs[partition] = leader_epoch
        if before is not None and before != leader_epoch and self._groups.loading(partition):
            self._groups.resign(partition)
        self._groups.become_leader(partition)

    def _read_configs(self, topic: str) -> dict[str, str]:
        try:
            data, _ = self.zoo.kazoo.get(zk.topic_config_path(topic))
        except NoNodeError:
            return {}
        return zk.decode_topic_config(topic, data)

    async def update_metadata(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_epoch(body)
        before = self.cache.configs
        self.cache.apply(body)
        # a leader whose address was unknown may be known now
        self.replicas.retry_fetching()
        self.replicas.live_brokers_changed(self.cache.brokers)
        for topic, configs in self.cache.configs.items():
            if before.get(topic) != configs and self._topics.get(topic) is not None:
                self._reconfigure(topic, configs)
        return {"error_code": 0}

    def _reconfigure(self, topic: str, configs: Mapping[str, str]) -> None:
        """Apply a topic's changed configs to its local logs (and topics.json)."""
        try:
            self._topics.set_configs(topic, configs)
        except BrokerError as exc:  # another broker accepted what this one cannot use
            log.warning("cluster.topic_configs_refused", topic=topic, reason=str(exc))

    async def stop_replica(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_epoch(body)
        results = []
        for p in body["partitions"]:
            tp = TopicPartition(p["topic"], p["partition"])
            self.replicas.stop(tp)
            if tp[0] == OFFSETS_TOPIC:
                self._lead_groups(tp[1], None)
            if body["delete_partitions"]:
                self._topics.unhost(*tp)
            self._purgatory.appended(*tp)
            results.append({"topic": tp[0], "partition": tp[1], "error_code": 0})
        return {"error_code": 0, "partitions": results}
