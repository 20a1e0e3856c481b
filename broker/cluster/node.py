"""One broker's part in a cluster: its ZooKeeper session and registration, the controller
election, the controller's requests, and the topic changes clients ask any broker for.

- Registration (seed 003): ``/brokers/ids/<id>``, ephemeral. A registration already there from
  another data directory is a live broker with the same id: refuse to start. One from this data
  directory (a kill -9 before its session expired) is stale: wait for ZooKeeper to expire it,
  as Kafka does, then register.
- Election: every broker watches ``/controller``; when it goes, each tries to create it and the
  first wins (``controller.try_to_become_controller``).
- Controller requests are fenced by epoch: one older than the newest seen gets
  STALE_CONTROLLER_EPOCH. LeaderAndIsr makes this broker leader or follower of partitions
  (creating their logs); for ``__consumer_offsets`` that starts or stops the group coordinator
  of the partition. UpdateMetadata replaces the metadata cache.
- Topic changes go to ZooKeeper as Kafka's admin tools write them (``/brokers/topics``,
  ``/config/topics``, ``/admin/delete_topics``); the controller carries them out, and the
  request waits until the metadata cache shows the result.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Mapping
from typing import Any

import structlog
import trio
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState

from broker.cluster import ReplicaStats
from broker.cluster import zk_layout as zk
from broker.cluster.controller import (
    Controller,
    NotControllerAnyMore,
    try_to_become_controller,
)
from broker.cluster.controller_model import ShutdownDecision
from broker.cluster.links import BrokerLink, LinkError, LinkSecurity
from broker.cluster.metadata_cache import LiveBroker, MetadataCache, PartitionView
from broker.cluster.placement import (
    BrokerSlot,
    PlacementError,
    assign_added_partitions,
    assign_replicas,
    check_assignment,
)
from broker.cluster.replicas import ReplicaManager
from broker.cluster.zookeeper import ZooKeeper, ZooKeeperUnavailableError
from broker.group_driver import GroupDriver
from broker.identity import new_cluster_id
from broker.purgatory import FetchPurgatory
from broker.settings import BrokerSettings
from broker.topics import Topic, Topics, changed_configs, check_topic_name, is_internal
from coordinator import OFFSETS_TOPIC
from protocol.apis import ApiKey
from protocol.errors import (
    BrokerError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    LeaderNotAvailableError,
    NotControllerError,
    NotLeaderForPartitionError,
    OffsetNotAvailableError,
    RequestTimedOutError,
    StaleControllerEpochError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    error_class,
)

log = structlog.get_logger(__name__)

#: Kafka's offsets topic configs: compacted, 100 MiB segments
OFFSETS_TOPIC_CONFIGS = {"cleanup_policy": "compact", "segment_bytes": str(100 * 1024 * 1024)}
#: min_insync_replicas of __consumer_offsets when it has at least this many replicas + 1
OFFSETS_MIN_INSYNC = 2
RETRY_BACKOFF = 1.0
#: tries of a topic config change whose znode another change moved under it
CONFIG_WRITE_ATTEMPTS = 5


class ClusterStartError(RuntimeError):
    """The broker cannot join the cluster (its id is taken, its data is another cluster's)."""


class ClusterNode:
    def __init__(self, settings: BrokerSettings) -> None:
        assert settings.zookeeper_connect is not None
        self.settings = settings
        self.zoo = ZooKeeper(settings.zookeeper_connect,
                             session_timeout_ms=settings.zookeeper_session_timeout_ms,
                             connection_timeout_ms=settings.zookeeper_connection_timeout_ms)
        self.cache = MetadataCache()
        self.broker_id = -1
        self.directory_id = ""
        self.host = ""
        self.port = 0
        self.endpoints: tuple[tuple[str, str, int], ...] = ()
        self.controller: Controller | None = None
        self._topics: Topics | None = None
        self._groups: GroupDriver | None = None  # set by ``attach``
        self._purgatory: FetchPurgatory | None = None
        self._epoch_seen = -1
        self.replicas: ReplicaManager | None = None
        self._leader_addresses: dict[int, tuple[str, int]] = {}
        self._offsets_epochs: dict[int, int] = {}  # the epoch each offsets partition is led at
        self._registered = trio.Event()
        self._session_lost = False
        self._stopping = False
        self._nursery: trio.Nursery | None = None
        self._produces_waiting = 0  # acks=all produces waiting for their ISR

    # ========================================================================== start-up

    async def connect(self) -> str:
        """Reach ZooKeeper (retrying, with a clear line each time, until it answers), make the
        cluster's persistent nodes, and return the cluster id (``/cluster/id``, created by the
        first broker)."""
        while True:
            try:
                await self.zoo.start()
                break
            except ZooKeeperUnavailableError as exc:
                # a clear line and another try, not a crash loop
                log.error("zookeeper.unreachable", connect=self.settings.zookeeper_connect,
                          reason=str(exc), retry_in_s=RETRY_BACKOFF)
                await trio.sleep(RETRY_BACKOFF)
        self.zoo.on_state = self._session_changed
        return await self.zoo.call(self._prepare_cluster)

    def _prepare_cluster(self) -> str:
        client = self.zoo.kazoo
        for path in zk.PERSISTENT_PATHS:
            client.ensure_path(path)
        with contextlib.suppress(NodeExistsError):
            client.create(zk.CLUSTER_ID, zk.encode_cluster_id(new_cluster_id()))
        data, _ = client.get(zk.CLUSTER_ID)
        return zk.decode_cluster_id(data)

    def attach(self, *, broker_id: int, directory_id: str, host: str, port: int,
               endpoints: tuple[tuple[str, str, int], ...] = (),
               topics: Topics, groups: GroupDriver, purgatory: FetchPurgatory) -> None:
        """``host``/``port``: the inter-broker listener's address; ``endpoints`` every listener
        (name, host, port), as advertised; none: only PLAINTEXT at host:port."""
        self.broker_id = broker_id
        self.directory_id = directory_id
        self.host = host
        self.port = port
        self.endpoints = endpoints
        self._topics = topics
        self._groups = groups
        self._purgatory = purgatory
        self.replicas = ReplicaManager(
            broker_id, zoo=self.zoo, settings=self.settings,
            on_high_watermark=purgatory.appended, broker_address=self._broker_address)

    def _broker_address(self, broker_id: int) -> tuple[str, int] | None:
        """From the last LeaderAndIsr's live leaders (it comes before UpdateMetadata), else
        from the metadata cache."""
        found = self._leader_addresses.get(broker_id)
        if found is not None:
            return found
        broker = self.cache.brokers.get(broker_id)
        return None if broker is None else (broker.host, broker.port)

    async def first_metadata(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until an UpdateMetadata has filled the cache."""
        with trio.move_on_after(timeout):
            while not self.cache.brokers:
                await self.cache.changed()

    async def register(self) -> None:
        """Register in ``/brokers/ids`` (ClusterStartError when the id is another's)."""
        await self._register()

    async def serve(self) -> None:
        """Take part in controller elections until cancelled (after ``register``)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._replicas.run)
            await self._elect_forever()

    async def _elect_forever(self) -> None:
        while True:
            try:
                await self._elect_once()
            except KazooException as exc:
                # the connection dropped or the session expired in the middle of a call:
                # wait for a session again (a new one registers again) and take part anew
                log.warning("cluster.election_interrupted", broker_id=self.broker_id,
                            reason=f"{type(exc).__name__}: {exc}")
                await trio.sleep(RETRY_BACKOFF)
                await self._wait_for_session()

    async def _elect_once(self) -> None:
        elected = await try_to_become_controller(self.zoo, self.broker_id)
        if elected is not None:
            self.controller = Controller(self.zoo, self.settings, self.broker_id, elected)
            try:
                await self.controller.run()
            except Exception as exc:  # a bug: lose the controllership, never the broker
                log.error("controller.crashed", broker_id=self.broker_id, exc_info=exc)
                await trio.sleep(RETRY_BACKOFF)
            finally:
                self.controller = None
            # the reign is over; if this session still holds /controller (the connection
            # dropped, or a bug), give it up so that an election follows
            with contextlib.suppress(KazooException):
                await self.zoo.call(self.zoo.kazoo.retry, self._give_up_controller,
                                    elected.epoch)
            await self._wait_for_session()
            return
        changed = await self.zoo.watch_existing(zk.CONTROLLER)
        if changed is not None:
            await changed.wait()

    def _give_up_controller(self, epoch: int) -> None:
        """Delete ``/controller`` if it is still ours, so another broker takes over."""
        try:
            _, stat = self.zoo.kazoo.get(zk.CONTROLLER)
        except NoNodeError:
            return
        if stat.ephemeralOwner == self.zoo.session_id:
            self.zoo.kazoo.delete(zk.CONTROLLER, version=stat.version)
            log.warning("controller.gave_up", broker_id=self.broker_id, epoch=epoch)

    async def _register(self) -> None:
        registration = zk.BrokerRegistration(
            self.broker_id, self.host, self.port, self.settings.broker_rack, self.directory_id,
            endpoints=self.endpoints)
        path = zk.broker_path(self.broker_id)
        deadline = trio.current_time() + self.settings.zookeeper_session_timeout_ms / 1000 + 10
        while True:
            try:
                await self.zoo.call(self.zoo.kazoo.create, path, registration.encode(),
                                    ephemeral=True)
                break
            except NodeExistsError:
                pass
            try:
                data, stat = await self.zoo.call(self.zoo.kazoo.get, path)
            except NoNodeError:
                continue
            if stat.ephemeralOwner == self.zoo.session_id:
                break
            existing = zk.BrokerRegistration.decode(self.broker_id, data)
            if existing.directory_id != self.directory_id:
                raise ClusterStartError(
                    f"broker id {self.broker_id} is already registered in ZooKeeper by a live "
                    f"broker at {existing.host}:{existing.port} (another data directory); "
                    "give this broker another broker_id")
            if trio.current_time() > deadline:
                raise ClusterStartError(
                    f"the registration of broker {self.broker_id} left by this data "
                    "directory's previous process did not expire in time")
            log.info("cluster.waiting_for_stale_registration", broker_id=self.broker_id,
                     session=hex(stat.ephemeralOwner))
            changed = await self.zoo.watch_existing(path)
            if changed is not None:
                with trio.move_on_at(deadline):
                    await changed.wait()
        self._registered.set()
        log.info("cluster.registered", broker_id=self.broker_id, host=self.host,
                 port=self.port, rack=self.settings.broker_rack)

    def _session_changed(self, state: str) -> None:
        if state == KazooState.LOST:
            # our ephemeral nodes are gone: stop acting as controller, register again
            self._session_lost = True
            if self.controller is not None:
                self.controller.resign("the ZooKeeper session expired")
        elif state == KazooState.CONNECTED and self._session_lost and not self._stopping:
            self._session_lost = False
            if self._nursery is not None:
                self._nursery.start_soon(self._register)

    async def _wait_for_session(self) -> None:
        while self._session_lost or not self.zoo.kazoo.connected:
            await trio.sleep(0.1)

    async def stop(self) -> None:
        self._stopping = True
        with trio.CancelScope(shield=True):
            await self.zoo.stop()

    # ========================================================================= controller

    def _check_epoch(self, body: Mapping[str, Any]) -> None:
        epoch = body["controller_epoch"]
        if epoch < self._epoch_seen:
            raise StaleControllerEpochError(
                f"controller {body['controller_id']} sent epoch {epoch}; broker "
                f"{self.broker_id} has seen epoch {self._epoch_seen}")
        self._epoch_seen = epoch

    async def leader_and_isr(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_epoch(body)
        assert self._topics is not None
        for b in body["live_leaders"]:
            self._leader_addresses[b["node_id"]] = (b["host"], b["port"])
        results = []
        for p in body["partitions"]:
            tp = (p["topic"], p["partition"])
            code = 0
            known = self._replicas.replicas.get(tp)
            if known is not None and p["leader_epoch"] < known.leader_epoch:
                code = int(StaleControllerEpochError.code)
            else:
                try:
                    await self._become(tp, p)
                except BrokerError as exc:
                    code = int(exc.code)
            results.append({"topic": tp[0], "partition": tp[1], "error_code": code})
        return {"error_code": 0, "partitions": results}

    async def _become(self, tp: tuple[str, int], p: dict[str, Any]) -> None:
        assert self._topics is not None
        topic, partition = tp
        if self._topics.log(topic, partition) is None:
            configs = await self.zoo.call(self._read_configs, topic)
            partitions = max(partition + 1, len(self.cache.partitions.get(topic, {})))
            self._topics.host(topic, partition, partitions, len(p["replicas"]), configs)
        plog = self._topics.log(topic, partition)
        assert plog is not None
        was_leader = self._replicas.leading(tp) is not None
        self._replicas.become(tp, plog, p)
        leader = p["leader"] == self.broker_id
        if leader != was_leader:
            log.info("cluster.partition_role", topic=topic, partition=partition,
                     role="leader" if leader else "follower", leader_epoch=p["leader_epoch"])
            if not leader and self._purgatory is not None:
                self._purgatory.appended(topic, partition)  # parked fetches answer now
        if topic == OFFSETS_TOPIC and self._groups is not None:
            self._lead_groups(partition, p["leader_epoch"] if leader else None)

    def _lead_groups(self, partition: int, leader_epoch: int | None) -> None:
        """Group ownership follows the offsets partition's leadership (Down -> Catch-up ->
        Ready, and back to Down). A new leader epoch while still loading restarts the load:
        the log may have been truncated under it."""
        assert self._groups is not None
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
        if self.replicas is not None:  # a leader whose address was unknown may be known now
            self.replicas.retry_fetching()
            self.replicas.live_brokers_changed(self.cache.brokers)
        if self._topics is not None:
            for topic, configs in self.cache.configs.items():
                if before.get(topic) != configs and self._topics.get(topic) is not None:
                    self._reconfigure(topic, configs)
        return {"error_code": 0}

    def _reconfigure(self, topic: str, configs: Mapping[str, str]) -> None:
        """Apply a topic's changed configs to its local logs (and topics.json)."""
        assert self._topics is not None
        try:
            self._topics.set_configs(topic, configs)
        except BrokerError as exc:  # another broker accepted what this one cannot use
            log.warning("cluster.topic_configs_refused", topic=topic, reason=str(exc))

    async def stop_replica(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_epoch(body)
        assert self._topics is not None
        results = []
        for p in body["partitions"]:
            tp = (p["topic"], p["partition"])
            self._replicas.stop(tp)
            if tp[0] == OFFSETS_TOPIC and self._groups is not None:
                self._lead_groups(tp[1], None)
            if body["delete_partitions"]:
                self._topics.unhost(*tp)
            if self._purgatory is not None:
                self._purgatory.appended(*tp)
            results.append({"topic": tp[0], "partition": tp[1], "error_code": 0})
        return {"error_code": 0, "partitions": results}

    async def controlled_shutdown(self, broker_id: int) -> ShutdownDecision:
        controller = self.controller
        if controller is None:
            raise NotControllerError(
                f"broker {self.broker_id} is not the controller "
                f"(the controller is {self.cache.controller_id})")
        try:
            return await controller.controlled_shutdown(broker_id)
        except NotControllerAnyMore as exc:
            raise NotControllerError(str(exc)) from None

    @property
    def shutting_down(self) -> bool:
        return self._stopping

    async def shut_down_controlled(self) -> None:
        """SIGTERM: ask the controller to move this broker's leaderships away before the broker
        closes (Kafka's ControlledShutdown), and ask again after
        ``controlled_shutdown_retry_backoff_ms`` while partitions remain that another live
        replica may take once in sync. A partition no other replica can lead -- every other
        one is down or stopping too (a whole-cluster stop), or it has no other -- is not
        waited for: it goes offline with this broker, said in one line."""
        self._stopping = True
        if not self.settings.controlled_shutdown_enable or not self._registered.is_set():
            return
        attempts = self.settings.controlled_shutdown_max_retries + 1
        decision: ShutdownDecision | None = None
        for attempt in range(attempts):
            controller_id = self.cache.controller_id
            answer = await self._ask_controlled_shutdown(attempt + 1)
            if answer is not None:
                decision = answer
                if not answer.remaining:
                    break
            if attempt + 1 < attempts:
                await self._pause_controlled_shutdown(controller_id, answered=answer is not None)
        else:
            log.warning("cluster.controlled_shutdown_incomplete", attempts=attempts,
                        remaining=None if decision is None else len(decision.remaining))
            return
        assert decision is not None
        if decision.unmovable:
            log.warning("cluster.controlled_shutdown_unmovable", broker_id=self.broker_id,
                        partitions=len(decision.unmovable),
                        reason="no other replica is live and not stopping: offline until "
                               "one of their replicas starts again")
        log.info("cluster.controlled_shutdown_done", broker_id=self.broker_id)

    async def _ask_controlled_shutdown(self, attempt: int) -> ShutdownDecision | None:
        """One ControlledShutdown, to this broker's own controller or over the wire; None when
        no controller answered."""
        if self.controller is not None:
            try:
                return await self.controller.controlled_shutdown(self.broker_id)
            except NotControllerAnyMore as exc:
                log.warning("cluster.controlled_shutdown_failed", attempt=attempt,
                            reason=str(exc))
                return None
        target = self.cache.brokers.get(self.cache.controller_id)
        if target is None:
            log.warning("cluster.controlled_shutdown_failed", attempt=attempt,
                        reason="no live controller is known")
            return None
        link = BrokerLink(target.host, target.port, client_id=f"broker-{self.broker_id}",
                          timeout=self.settings.controller_socket_timeout_ms / 1000,
                          security=LinkSecurity.of(self.settings))
        try:
            answer = await link.request(ApiKey.CONTROLLED_SHUTDOWN,
                                        {"broker_id": self.broker_id}, version=1)
        except (LinkError, BrokerError) as exc:
            log.warning("cluster.controlled_shutdown_failed", attempt=attempt,
                        controller=target.node_id, reason=str(exc))
            return None
        finally:
            await link.aclose()
        return ShutdownDecision(
            [], [(p["topic"], p["partition"]) for p in answer["remaining_partitions"]],
            [(p["topic"], p["partition"]) for p in answer["unmovable_partitions"]])

    async def _pause_controlled_shutdown(self, controller_id: int, *, answered: bool) -> None:
        """Before another attempt: the retry backoff after an answer (an out-of-sync replica
        may catch up meanwhile); after no answer, only until another controller is known
        (one that stopped is replaced within moments: in a whole-cluster stop, waiting out
        the backoff for it is most of the stop)."""
        with trio.move_on_after(self.settings.controlled_shutdown_retry_backoff_ms / 1000):
            if answered:
                await trio.sleep_forever()
            while self.cache.controller_id == controller_id:
                await self.cache.changed()

    # ====================================================================== client paths

    def prepare_produce(self, topic: str, may_create: Callable[[], bool]) -> None:
        """A produce creates no topic in a cluster: it goes to a partition's leader."""

    def replica_stats(self) -> ReplicaStats:
        replicas = self.replicas
        if replicas is None:  # not a member yet: it leads and follows nothing
            return ReplicaStats(partitions=0, leaders=0, under_replicated=0, isr_shrinks=0,
                                isr_expands=0, controller=False, offline=0)
        me = replicas.broker_id
        led = [r for r in replicas.replicas.values() if r.leader == me]
        controller = self.controller is not None
        # as in Kafka, the controller alone reports offline partitions
        offline = 0 if not controller else sum(
            1 for views in self.cache.partitions.values() for v in views.values()
            if v.leader not in self.cache.brokers)
        return ReplicaStats(
            partitions=len(replicas.replicas), leaders=len(led),
            under_replicated=sum(1 for r in led if len(r.isr) < len(r.replicas)),
            isr_shrinks=replicas.isr_shrinks, isr_expands=replicas.isr_expands,
            controller=controller, offline=offline)

    # ====================================================================== metadata view

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

    def check_leader(self, topic: str, partition: int) -> None:
        """Produce, Fetch and ListOffsets are for the leader (seed 003: "Consumers and
        Producers can only fetch and produce requests to leader brokers")."""
        if self._replicas.leading((topic, partition)) is not None:
            return
        view = self.cache.partition(topic, partition)
        if view is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
        if view.leader < 0:
            raise LeaderNotAvailableError(f"{topic}-{partition} has no leader right now")
        raise NotLeaderForPartitionError(
            f"broker {self.broker_id} does not lead {topic}-{partition} "
            f"(broker {view.leader} does)")

    def offsets_for_leader_epoch(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._replicas.offsets_for_leader_epoch(body)

    def min_insync(self, topic: str) -> int:
        configs = self.cache.configs.get(topic, {})
        value = configs.get("min_insync_replicas", configs.get("min.insync.replicas"))
        return self.settings.min_insync_replicas if value is None else int(value)

    def check_high_watermark_known(self, topic: str, partition: int) -> None:
        if self._replicas.high_watermark_pending((topic, partition)):
            raise OffsetNotAvailableError(
                f"{topic}-{partition}: the new leader (broker {self.broker_id}) does not know "
                "its high watermark yet")

    def check_min_isr(self, topic: str, partition: int) -> None:
        self._replicas.check_min_isr((topic, partition), self.min_insync(topic))

    def appended(self, topic: str, partition: int) -> None:
        self._replicas.appended((topic, partition))

    async def await_replication(self, topic: str, partition: int, last_offset: int,
                                deadline: float) -> None:
        self._produces_waiting += 1  # the produce purgatory's size, for the metrics
        try:
            await self._replicas.wait_for_replication(
                (topic, partition), last_offset, self.min_insync(topic), deadline)
        finally:
            self._produces_waiting -= 1

    @property
    def produces_waiting(self) -> int:
        return self._produces_waiting

    def follower_fetched(self, follower: int, topic: str, partition: int,
                         fetch_offset: int, log_start_offset: int = -1) -> None:
        self._replicas.follower_fetched(follower, (topic, partition), fetch_offset, -1,
                                        log_start_offset)

    async def await_low_watermark(self, topic: str, partition: int, offset: int,
                                  deadline: float) -> int:
        """DeleteRecords: until every live replica's log start has reached ``offset``."""
        return await self._replicas.wait_for_low_watermark((topic, partition), offset, deadline)

    @property
    def _replicas(self) -> ReplicaManager:
        assert self.replicas is not None, "attach() first"
        return self.replicas

    def coordinator_for(self, partition: int) -> LiveBroker | None:
        """The live broker leading ``__consumer_offsets`` partition ``partition``, if any."""
        return self.cache.leader(OFFSETS_TOPIC, partition)

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

    async def auto_create(self, name: str, *, requested: bool
                          ) -> Mapping[int, PartitionView] | None:
        """Metadata's auto-creation, with the broker's defaults, when the request and the
        broker allow it and the cluster has brokers; asked for, not waited for (None: the
        client asks again, as Kafka's do after LEADER_NOT_AVAILABLE)."""
        check_topic_name(name)
        if not (requested and self.settings.auto_create_topics_enable) or is_internal(
                name) or not self.cache.brokers:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        with contextlib.suppress(TopicAlreadyExistsError):
            await self._create(name, self.settings.num_partitions,
                               self.settings.default_replication_factor, {}, timeout_ms=0)
        return None

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
            assert self._topics is not None
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
        assert self._topics is not None
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

    async def reassign(self, wanted: list[tuple[tuple[str, int], list[int]]]
                       ) -> dict[tuple[str, int], str | None]:
        """Start moving partitions to new replicas (the controller's answer per partition)."""
        if self.controller is None:
            raise NotControllerError(
                f"broker {self.broker_id} is not the controller "
                f"(the controller is {self.cache.controller_id})")
        try:
            answer = await self.controller.reassign(wanted)
        except NotControllerAnyMore as exc:
            raise NotControllerError(str(exc)) from None
        return answer

    async def preferred_election(
        self, tps: list[tuple[str, int]] | None
    ) -> list[tuple[str, int]]:
        """Move leadership back to preferred replicas (the controller's answer: which moved)."""
        if self.controller is None:
            raise NotControllerError(
                f"broker {self.broker_id} is not the controller "
                f"(the controller is {self.cache.controller_id})")
        try:
            moved = await self.controller.elect_preferred(tps)
        except NotControllerAnyMore as exc:
            raise NotControllerError(str(exc)) from None
        return moved

    async def _wait_until(self, done: Any, timeout_ms: int, message: str) -> None:
        if timeout_ms <= 0:
            return
        with trio.move_on_after(timeout_ms / 1000):
            while not done():
                await self.cache.changed()
            return
        raise RequestTimedOutError(message)

