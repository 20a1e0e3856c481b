"""One broker's membership of a ZooKeeper cluster, over its session (``zk_session``): its
registration, the controller election, and its controlled shutdown.

- Registration (seed 003): ``/brokers/ids/<id>``, ephemeral. A registration already there from
  another data directory is a live broker with the same id: refuse to start. One from this data
  directory (a kill -9 before its session expired) is stale: wait for ZooKeeper to expire it,
  as Kafka does, then register. A session lost and found again registers again.
- Election: every broker watches ``/controller``; when it goes, each tries to create it and the
  first wins (``controller.try_to_become_controller``); the winner runs the ``Controller``
  until its reign ends, and answers what only the controller answers (ControlledShutdown,
  elections and reassignments an admin asks for).
- Controlled shutdown (SIGTERM): ask the controller to move this broker's leaderships away
  before it stops.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import structlog
import trio
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState

from broker.cluster import zk_layout as zk
from broker.cluster.controller import (
    Controller,
    NotControllerAnyMore,
    try_to_become_controller,
)
from broker.cluster.controller_model import ShutdownDecision
from broker.cluster.links import BrokerLink, LinkError, LinkSecurity
from broker.cluster.metadata_cache import MetadataCache
from broker.cluster.zookeeper import ZooKeeper
from broker.settings import BrokerSettings
from protocol.apis import ApiKey
from protocol.errors import BrokerError, NotControllerError
from protocol.partitions import TopicPartition

log = structlog.get_logger(__name__)

RETRY_BACKOFF = 1.0


class ClusterStartError(RuntimeError):
    """The broker cannot join the cluster (its id is taken, its data is another cluster's)."""


class Membership:
    """Registration, elections and controlled shutdown of broker ``broker_id``, over a
    connected ``zoo``."""

    def __init__(self, settings: BrokerSettings, zoo: ZooKeeper, cache: MetadataCache,
                 broker_id: int) -> None:
        self.settings = settings
        self.zoo = zoo
        self.cache = cache
        self.broker_id = broker_id
        #: what ``register`` registered, registered again when a lost session is found again
        self.registration: zk.BrokerRegistration | None = None
        #: this broker's controller, while it is the controller
        self.controller: Controller | None = None
        #: the czxid of this broker's registration node: Kafka's broker epoch (KIP-380). A
        #: controller request naming an older one was meant for a registration gone since.
        self.broker_epoch = -1
        self._registered = trio.Event()
        self._session_lost = False
        self._stopping = False
        self._nursery: trio.Nursery | None = None
        zoo.on_state = self._session_changed

    async def register(self, registration: zk.BrokerRegistration) -> None:
        """Register in ``/brokers/ids`` (ClusterStartError when the id is another's). The
        addresses are known only once the broker listens, so they come now, not at birth."""
        assert registration.broker_id == self.broker_id
        self.registration = registration
        await self._register()

    async def run(self) -> None:
        """Take part in controller elections until cancelled (after ``register``)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self._elect_forever()

    def stop(self) -> None:
        """The broker stops: a session lost from now on is not registered again."""
        self._stopping = True

    async def _register(self) -> None:
        r = self.registration  # stamped anew each time, as a new registration is
        assert r is not None, "register() first"
        registration = zk.BrokerRegistration(r.broker_id, r.host, r.port, r.rack,
                                             r.directory_id, endpoints=r.endpoints)
        path = zk.broker_path(self.broker_id)
        deadline = trio.current_time() + self.settings.zookeeper_session_timeout_ms / 1000 + 10
        while True:
            with contextlib.suppress(NodeExistsError):  # ours already, or another's: read
                await self.zoo.call(self.zoo.kazoo.create, path, registration.encode(),
                                    ephemeral=True)
            try:
                data, stat = await self.zoo.call(self.zoo.kazoo.get, path)
            except NoNodeError:
                continue
            if stat.ephemeralOwner == self.zoo.session_id:
                self.broker_epoch = stat.czxid
                break
            existing = zk.BrokerRegistration.decode(self.broker_id, data)
            if existing.directory_id != registration.directory_id:
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
        log.info("cluster.registered", broker_id=self.broker_id, host=registration.host,
                 port=registration.port, rack=registration.rack)

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

    async def reassign(self, wanted: list[tuple[TopicPartition, list[int]]]
                       ) -> dict[TopicPartition, str | None]:
        """Start moving partitions to new replicas (the controller's answer per partition)."""
        with self._as_controller() as controller:
            return await controller.reassign(wanted)

    async def preferred_election(
        self, tps: list[TopicPartition] | None
    ) -> list[TopicPartition]:
        """Move leadership back to preferred replicas (the controller's answer: which moved)."""
        with self._as_controller() as controller:
            return await controller.elect_preferred(tps)

    @contextlib.contextmanager
    def _as_controller(self) -> Iterator[Controller]:
        """This broker's controller, for a request only the controller answers: NOT_CONTROLLER
        if it is not (or stops being) the controller meanwhile."""
        if self.controller is None:
            raise NotControllerError(
                f"broker {self.broker_id} is not the controller "
                f"(the controller is {self.cache.controller_id})")
        try:
            yield self.controller
        except NotControllerAnyMore as exc:
            raise NotControllerError(str(exc)) from None
