"""Topic changes in a ZooKeeper cluster, asked of any broker: written to ZooKeeper as Kafka's
admin tools write them (``/brokers/topics``, ``/config/topics``, ``/admin/delete_topics``), carried
out by the controller; a request waits until this broker's metadata cache shows the result (or
its ``timeout_ms``: REQUEST_TIMED_OUT)."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Mapping
from typing import Any

import structlog
import trio
from kazoo.exceptions import NodeExistsError, NoNodeError

from broker.cluster import zk_layout as zk
from broker.cluster.metadata_cache import MetadataCache
from broker.cluster.placement import (
    BrokerSlot,
    PlacementError,
    assign_added_partitions,
    assign_replicas,
    check_assignment,
)
from broker.cluster.zookeeper import ZooKeeper
from broker.settings import BrokerSettings
from broker.topics import Topics, changed_configs, check_topic_name, is_internal
from coordinator import OFFSETS_TOPIC
from protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    error_class,
)

log = structlog.get_logger(__name__)

#: Kafka's offsets topic configs: compacted, 100 MiB segments
OFFSETS_TOPIC_CONFIGS = {"cleanup_policy": "compact", "segment_bytes": str(100 * 1024 * 1024)}
#: min_insync_replicas of __consumer_offsets when it has at least this many replicas + 1
OFFSETS_MIN_INSYNC = 2
#: tries of a topic config change whose znode another change moved under it
CONFIG_WRITE_ATTEMPTS = 5


class ZkTopicAdmin:
    """CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs, Metadata's
    auto-creation and the offsets topic's creation on first use, for one broker."""

    def __init__(self, settings: BrokerSettings, zoo: ZooKeeper, cache: MetadataCache,
                 topics: Topics) -> None:
        """``topics``: this broker's own, for checking configs as every broker will."""
        self.settings = settings
        self.zoo = zoo
        self.cache = cache
        self._topics = topics

    async def ensure_offsets_topic(self, partitions: int) -> None:
        """Create ``__consumer_offsets`` on first use (Kafka: on the first FindCoordinator),
        with ``offsets_topic_replication_factor`` replicas."""
        if OFFSETS_TOPIC in self.cache.partitions:
            return
        with contextlib.suppress(TopicAlreadyExistsError):
            rf = self.settings.offsets_topic_replication_factor
            configs = dict(OFFSETS_TOPIC_CONFIGS)
            if rf > OFFSETS_MIN_INSYNC:  # a commit survives a broker, and one may be down
                configs["min_insync_replicas"] = str(OFFSETS_MIN_INSYNC)
            await self._create(OFFSETS_TOPIC, partitions, rf, configs, internal=True)

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: Mapping[str, str], *, validate_only: bool,
                           timeout_ms: int,
                           assignment: Mapping[int, list[int]] | None = None) -> None:
        check_topic_name(name)
        if name in self.cache.partitions:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        await self._create(name, partitions, replication_factor, configs,
                           validate_only=validate_only, timeout_ms=timeout_ms,
                           assignment=assignment)

    async def auto_create(self, name: str, *, requested: bool) -> None:
        """Metadata's auto-creation, with the broker's defaults, when the request and the
        broker allow it and the cluster has brokers (else UNKNOWN_TOPIC_OR_PARTITION); asked
        for, not waited for: the client asks again, as Kafka's do after
        LEADER_NOT_AVAILABLE."""
        check_topic_name(name)
        if not (requested and self.settings.auto_create_topics_enable) or is_internal(
                name) or not self.cache.brokers:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        with contextlib.suppress(TopicAlreadyExistsError):
            await self._create(name, self.settings.num_partitions,
                               self.settings.default_replication_factor, {}, timeout_ms=0)

    async def _create(self, name: str, partitions: int, replication_factor: int,
                      configs: Mapping[str, str], *, validate_only: bool = False,
                      timeout_ms: int = 0, internal: bool = False,
                      assignment: Mapping[int, list[int]] | None = None) -> None:
        if partitions == -1:
            partitions = self.settings.num_partitions
        if replication_factor == -1:
            replication_factor = self.settings.default_replication_factor
        if not 1 <= partitions <= self.settings.max_partitions_per_topic:
            raise InvalidPartitionsError(
                f"partition count must be between 1 and max_partitions_per_topic="
                f"{self.settings.max_partitions_per_topic}, got {partitions}")
        if replication_factor < 1:
            raise InvalidReplicationFactorError(
                f"replication factor must be at least 1, got {replication_factor}")
        try:
            self._topics.check_configs(name, configs)
        except ValueError as exc:
            raise InvalidConfigError(f"topic {name!r}: {exc}") from None
        slots = await self.zoo.call(self._live_slots)
        try:
            if assignment is None:
                assignment = assign_replicas(slots, partitions, replication_factor,
                                             rng=random.Random())
            else:
                check_assignment(assignment, [slot.broker_id for slot in slots])
        except PlacementError as exc:
            raise error_class(exc.code)(f"topic {name!r}: {exc}") from None
        if validate_only:
            return

        def write() -> None:
            client = self.zoo.kazoo
            client.ensure_path(zk.TOPIC_CONFIGS)
            tx = client.transaction()
            tx.create(zk.topic_config_path(name), zk.encode_topic_config(configs))
            tx.create(zk.topic_path(name), zk.encode_assignment(assignment))
            results = tx.commit()
            if any(isinstance(r, NodeExistsError) for r in results):
                if client.exists(zk.delete_topic_path(name)):
                    raise TopicAlreadyExistsError(
                        f"topic {name!r} is marked for deletion; the name is free once "
                        "every replica has deleted its log (a broker that is down does so "
                        "when it returns)")
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            for r in results:
                if isinstance(r, Exception):
                    raise r

        await self.zoo.call(write)
        log.info("cluster.topic_requested", topic=name, partitions=partitions,
                 replication_factor=replication_factor, internal=internal)
        await self._wait_until(lambda: self._has_leaders(name, partitions), timeout_ms,
                               f"topic {name!r} was created but not every partition has a "
                               "leader yet")

    def _live_slots(self) -> list[BrokerSlot]:
        """The live brokers as ZooKeeper lists them (not this broker's cache, which a broker
        that just started may not have yet): placement must see every one."""
        client = self.zoo.kazoo
        slots = []
        for name in client.get_children(zk.BROKER_IDS):
            try:
                data, _ = client.get(zk.broker_path(int(name)))
            except NoNodeError:
                continue
            reg = zk.BrokerRegistration.decode(int(name), data)
            slots.append(BrokerSlot(reg.broker_id, reg.rack))
        return slots

    def _has_leaders(self, name: str, partitions: int) -> bool:
        found = self.cache.partitions.get(name, {})
        return len(found) >= partitions and all(v.leader >= 0 for v in found.values())

    async def delete_topic(self, name: str, *, timeout_ms: int) -> None:
        if name not in self.cache.partitions:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")

        def write() -> None:
            with contextlib.suppress(NodeExistsError):
                self.zoo.kazoo.create(zk.delete_topic_path(name), b"", makepath=True)

        await self.zoo.call(write)
        await self._wait_until(lambda: name not in self.cache.partitions, timeout_ms,
                               f"topic {name!r} is marked for deletion but not deleted yet")

    async def create_partitions(self, name: str, count: int,
                                assignments: list[list[int]] | None, *, validate_only: bool,
                                timeout_ms: int) -> None:
        existing = self.cache.partitions.get(name)
        if existing is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        if count <= len(existing):
            raise InvalidPartitionsError(
                f"topic {name!r} has {len(existing)} partitions; the new count must be "
                f"larger, got {count}")
        if count > self.settings.max_partitions_per_topic:
            raise InvalidPartitionsError(
                f"topic {name!r}: {count} partitions exceed max_partitions_per_topic="
                f"{self.settings.max_partitions_per_topic}")
        current = {p: list(v.replicas) for p, v in existing.items()}
        slots = await self.zoo.call(self._live_slots)
        try:
            if assignments is None:
                added = assign_added_partitions(slots, current, count)
            else:
                added = {len(current) + i: list(r) for i, r in enumerate(assignments)}
                check_assignment({**current, **added}, [s.broker_id for s in slots])
        except PlacementError as exc:
            raise error_class(exc.code)(f"topic {name!r}: {exc}") from None
        if validate_only:
            return

        def write() -> None:
            data, stat = self.zoo.kazoo.get(zk.topic_path(name))
            stored = zk.decode_assignment(name, data)
            if len(stored) != len(current):
                raise InvalidPartitionsError(
                    f"topic {name!r} changed while its partitions were being added")
            self.zoo.kazoo.set(zk.topic_path(name),
                               zk.encode_assignment({**stored, **added}), version=stat.version)

        await self.zoo.call(write)
        await self._wait_until(lambda: self._has_leaders(name, count), timeout_ms,
                               f"topic {name!r}: the new partitions have no leader yet")

    async def alter_topic_configs(self, name: str, set_: Mapping[str, str],
                                  delete: list[str], *, validate_only: bool,
                                  timeout_ms: int) -> None:
        """Change a topic's config overrides: ``/config/topics/<name>`` (conditional on its
        version) and a change notification for the controller, in one transaction; answered
        once this broker's cache has the new configs (or after ``timeout_ms``)."""
        if name not in self.cache.partitions:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        topics = self._topics

        def write() -> dict[str, str]:
            client = self.zoo.kazoo
            for _ in range(CONFIG_WRITE_ATTEMPTS):
                try:
                    data, stat = client.get(zk.topic_config_path(name))
                    current, version = zk.decode_topic_config(name, data), stat.version
                except NoNodeError:
                    current, version = {}, -1
                configs = changed_configs(current, set_, delete)
                try:
                    topics.check_configs(name, configs)
                except ValueError as exc:
                    raise InvalidConfigError(f"topic {name!r}: {exc}") from None
                if validate_only:
                    return configs
                tx = client.transaction()
                encoded = zk.encode_topic_config(configs)
                if version < 0:
                    tx.create(zk.topic_config_path(name), encoded)
                else:
                    tx.set_data(zk.topic_config_path(name), encoded, version=version)
                tx.create(f"{zk.CONFIG_CHANGES}/{zk.CONFIG_CHANGE_PREFIX}",
                          zk.encode_config_change([name]), sequence=True)
                results = tx.commit()
                if not any(isinstance(r, Exception) for r in results):
                    return configs
                # another change came first (or the node appeared): read it again
            raise RequestTimedOutError(
                f"topic {name!r}: its configs kept changing under this change; try again")

        configs = await self.zoo.call(write)
        if validate_only:
            return
        log.info("cluster.topic_configs_requested", topic=name, configs=configs)
        await self._wait_until(lambda: self.cache.configs.get(name) == configs, timeout_ms,
                               f"topic {name!r}: its configs are changed but not every "
                               "broker may have them yet")

    async def _wait_until(self, done: Any, timeout_ms: int, message: str) -> None:
        if timeout_ms <= 0:
            return
        with trio.move_on_after(timeout_ms / 1000):
            while not done():
                await self.cache.changed()
            return
        raise RequestTimedOutError(message)
