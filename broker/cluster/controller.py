"""The controller: the one broker that holds ``/controller`` watches the cluster in ZooKeeper
and decides leadership (seed 003 "Controller").

One task reads one event channel (Kafka's ControllerEventManager): broker and topic changes
from ZooKeeper watches, controlled-shutdown and election requests, each a typed value
(``controller_events``). Each event is decided by ``ControllerModel`` (sans-IO), its partition
states written to ZooKeeper, and the brokers told through one ordered ``RequestQueue`` each.
This class reads (in batches, ``zk_reads``), writes and sends what the model decided.

Fencing: every write is one ZooKeeper transaction that also checks ``/controller_epoch`` is
still at the version this controller wrote; a controller that was paused and replaced fails
that check and steps down, so it overwrites nothing. Brokers refuse its requests by epoch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog
import trio
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.protocol.states import WatchedEvent

from broker.cluster import zk_layout as zk
from broker.cluster.controller_events import (
    EVENT_KINDS,
    AssignmentChanged,
    BrokersChanged,
    ConfigChanges,
    ControlledShutdown,
    ControllerEvent,
    DeleteTopics,
    DeletionsFired,
    IsrChanges,
    PreferredElection,
    Reassign,
    ReplicaDeleted,
    Resign,
    RewatchAssignments,
    TopicsChanged,
)
from broker.cluster.controller_model import (
    Change,
    ControllerModel,
    ShutdownDecision,
)
from broker.cluster.links import CONTROL_VERSION, Answer, LinkSecurity, RequestQueue
from broker.cluster.replica_state import ReplicaDeletion
from broker.cluster.zk_reads import delete_many, get_many
from broker.cluster.zookeeper import ZooKeeper
from broker.settings import BrokerSettings
from protocol.apis import ApiKey
from protocol.errors import StaleControllerEpochError
from protocol.partitions import TopicPartition

log = structlog.get_logger(__name__)

#: partition writes per ZooKeeper transaction (each stays far below jute.maxbuffer)
WRITES_PER_TRANSACTION = 200
#: how often one event re-decides partitions whose state moved under its writes
DECISION_ROUNDS = 5
#: how often a topic's znodes are read and deleted again when they changed under the deletion
DELETE_ATTEMPTS = 5


class NotControllerAnyMore(Exception):
    """The epoch check failed or the session ended: another controller has taken over."""


#: a ZooKeeper call failed because the connection dropped or the session is over: the
#: controller steps down (the broker gives ``/controller`` up if its session still holds it)
SESSION_ENDED = (SessionExpiredError, ConnectionClosedError, ConnectionLoss)


def _session_ended(exc: BaseException) -> str:
    return f"the ZooKeeper connection or session was lost ({type(exc).__name__})"


@dataclass
class _Queued:
    """An event in the queue, with whom to answer when it was asked (``ask``)."""

    event: ControllerEvent
    reply: Callable[[Any], None] | None = None


@dataclass
class _Elected:
    epoch: int
    epoch_zk_version: int


async def try_to_become_controller(zoo: ZooKeeper, broker_id: int) -> _Elected | None:
    """Seed 003: "The broker which joins the cluster first becomes the controller and it
    creates a controller ephermal node." Creating ``/controller`` and increasing
    ``/controller_epoch`` are one transaction. None when another broker holds it."""

    def attempt() -> _Elected | None:
        client = zoo.kazoo
        while True:
            try:
                data, stat = client.get(zk.CONTROLLER_EPOCH)
                epoch, version = zk.decode_epoch(data), stat.version
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    client.create(zk.CONTROLLER_EPOCH, zk.encode_epoch(0))
                continue
            tx = client.transaction()
            tx.create(zk.CONTROLLER, zk.encode_controller(broker_id), ephemeral=True)
            tx.set_data(zk.CONTROLLER_EPOCH, zk.encode_epoch(epoch + 1), version=version)
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                return _Elected(epoch + 1, version + 1)
            if isinstance(results[0], NodeExistsError):
                return None
            # the epoch moved under us (another broker won and already left): read it again

    return await zoo.call(attempt)


@dataclass
class Controller:
    zoo: ZooKeeper
    settings: BrokerSettings
    broker_id: int
    elected: _Elected
    model: ControllerModel = field(init=False)
    _queues: dict[int, RequestQueue] = field(default_factory=dict)
    _nursery: trio.Nursery | None = None
    _rewatch_pending: bool = False

    def __post_init__(self) -> None:
        self.model = ControllerModel(self.broker_id, self.elected.epoch)
        self._send, self._events = trio.open_memory_channel[_Queued](math.inf)

    @property
    def epoch(self) -> int:
        return self.elected.epoch

    # ============================================================================ running

    async def run(self) -> None:
        """Serve as controller until another takes over (returns) or cancelled."""
        log.info("controller.elected", broker_id=self.broker_id, epoch=self.epoch)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    try:
                        await self._start()
                    except SESSION_ENDED as exc:
                        raise NotControllerAnyMore(_session_ended(exc)) from None
                    if self.settings.auto_leader_rebalance_enable:
                        nursery.start_soon(self._check_imbalance)
                    async for queued in self._events:
                        await self._handle(queued)
                except NotControllerAnyMore as exc:
                    log.warning("controller.resigned", broker_id=self.broker_id,
                                epoch=self.epoch, reason=str(exc))
                nursery.cancel_scope.cancel()
        finally:
            for queue in self._queues.values():
                queue.close()
            self._send.close()
            # whoever still waits for an answer (``ask``) hears that this reign is over
            with contextlib.suppress(trio.WouldBlock, trio.EndOfChannel):
                while True:
                    queued = self._events.receive_nowait()
                    if queued.reply is not None:
                        queued.reply(NotControllerAnyMore(
                            "this broker is not the controller any more"))

    def submit(self, event: ControllerEvent, reply: Callable[[Any], None] | None = None
               ) -> None:
        try:
            self._send.send_nowait(_Queued(event, reply))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            if reply is not None:
                reply(NotControllerAnyMore("this broker is not the controller any more"))

    def resign(self, reason: str) -> None:
        self.submit(Resign(reason))

    async def controlled_shutdown(self, broker_id: int) -> ShutdownDecision:
        """Move ``broker_id``'s leaderships away; what moved and what could not."""
        decision: ShutdownDecision = await self.ask(ControlledShutdown(broker_id))
        return decision

    async def reassign(self, wanted: Iterable[tuple[TopicPartition, Iterable[int]]]
                       ) -> dict[TopicPartition, str | None]:
        """Start moving partitions to new replicas: per partition, None or why it cannot."""
        answer: dict[TopicPartition, str | None] = await self.ask(Reassign(
            tuple((tp, tuple(target)) for tp, target in wanted)))
        return answer

    async def elect_preferred(self, tps: Iterable[TopicPartition] | None
                              ) -> list[TopicPartition]:
        """Lead ``tps`` (None: every partition) from their first replica: those moved."""
        moved: list[TopicPartition] = await self.ask(
            PreferredElection(None if tps is None else tuple(tps)))
        return moved

    async def ask(self, event: ControllerEvent) -> Any:
        """Submit an event and wait for its result (NotControllerAnyMore if it resigned)."""
        done = trio.Event()
        answer: list[Any] = []

        def reply(value: Any) -> None:
            answer.append(value)
            done.set()

        self.submit(event, reply)
        await done.wait()
        if isinstance(answer[0], BaseException):
            raise answer[0]
        return answer[0]

    # ========================================================================== start-up

    async def _start(self) -> None:
        """Read the whole cluster from ZooKeeper, set the watches, and tell every broker."""
        registrations = await self.zoo.call(self._read_brokers_and_watch)
        self.model.live = registrations
        topics = await self.zoo.call(self._read_topics_and_watch)
        deleting = await self.zoo.call(self.zoo.kazoo.get_children, zk.DELETE_TOPICS)
        deletions: list[ReplicaDeletion] = []
        for topic, (assignment, configs, states) in topics.items():
            if topic in deleting:  # a deletion the last controller began: carry it on
                deletions += self.model.begin_deletion(topic, assignment)
                continue
            self.model.add_topic(topic, assignment, configs)
            for partition, state in states.items():
                self.model.adopt_state(TopicPartition(topic, partition), state)
        for broker_id, reg in registrations.items():
            self._open_queue(broker_id, reg)
        await self._write(self.model.elect_new(self.model.partitions_without_state()))
        await self._settle(self.model.elect_after_broker_change)
        self._tell(self.model.partitions())
        self._send_deletions(deletions)
        await self.zoo.call(self._watch_deletions)
        self.model.resume_reassignments(await self.zoo.call(self._read_reassignments))
        await self._on_isr_changes(IsrChanges())
        await self._on_config_changes(ConfigChanges())
        await self._advance_reassignments()
        log.info("controller.started", epoch=self.epoch, brokers=sorted(registrations),
                 topics=len(topics), partitions=len(self.model.states))

    def _read_brokers_and_watch(self) -> dict[int, zk.BrokerRegistration]:
        client = self.zoo.kazoo
        ids = client.get_children(zk.BROKER_IDS, watch=self.zoo.forward(self._brokers_fired))
        return self._read_registrations(int(i) for i in ids)

    def _read_registrations(self, ids: Iterable[int]) -> dict[int, zk.BrokerRegistration]:
        client = self.zoo.kazoo
        pending = {i: client.get_async(zk.broker_path(i)) for i in ids}
        found = {}
        for broker_id, result in pending.items():
            try:
                data, stat = result.get()
            except NoNodeError:
                continue
            found[broker_id] = dataclasses.replace(
                zk.BrokerRegistration.decode(broker_id, data), epoch=stat.czxid)
        return found

    def _read_topics_and_watch(
        self,
    ) -> dict[str, tuple[dict[int, tuple[int, ...]], dict[str, str],
                         dict[int, zk.LeaderIsr]]]:
        client = self.zoo.kazoo
        names = client.get_children(zk.TOPICS, watch=self.zoo.forward(self._topics_fired))
        return self._read_topics(names)

    def _read_topics(
        self, names: Iterable[str]
    ) -> dict[str, tuple[dict[int, tuple[int, ...]], dict[str, str],
                         dict[int, zk.LeaderIsr]]]:
        """Topics' assignments (watched), configs and partition states, in three batched
        round trips however many topics and partitions; a topic already gone is left out."""
        client = self.zoo.kazoo
        names = sorted(names)
        watch = self.zoo.forward(self._assignment_fired)
        found = get_many(client, [zk.topic_path(n) for n in names], watch=watch)
        assignments = {n: zk.decode_assignment(n, got[0]) for n in names
                       if (got := found[zk.topic_path(n)]) is not None}
        config_data = get_many(client, [zk.topic_config_path(n) for n in assignments])
        state_data = get_many(client, [zk.state_path(n, p) for n, a in assignments.items()
                                       for p in a])
        topics = {}
        for name, assignment in assignments.items():
            got = config_data[zk.topic_config_path(name)]
            configs = {} if got is None else zk.decode_topic_config(name, got[0])
            states = {}
            for partition in assignment:
                if (state := state_data[zk.state_path(name, partition)]) is not None:
                    states[partition] = zk.LeaderIsr.decode(name, partition, state[0],
                                                            state[1].version)
            topics[name] = (assignment, configs, states)
        return topics

    def _watch_deletions(self) -> None:
        names = self.zoo.kazoo.get_children(
            zk.DELETE_TOPICS, watch=self.zoo.forward(self._deletions_fired))
        if names:
            self.submit(DeleteTopics(tuple(names)))

    def _isr_changes_fired(self, event: WatchedEvent) -> None:
        self.submit(IsrChanges())

    def _config_changes_fired(self, event: WatchedEvent) -> None:
        # with no path (the connection dropped, every watch forgotten) as with one: reading
        # the notifications again sets the watch again and misses none
        self.submit(ConfigChanges())

    # watches fire once; each handler re-reads (and re-arms) in the controller task
    def _brokers_fired(self, event: WatchedEvent) -> None:
        self.submit(BrokersChanged())

    def _topics_fired(self, event: WatchedEvent) -> None:
        self.submit(TopicsChanged())

    def _assignment_fired(self, event: WatchedEvent) -> None:
        if event.path is None:
            # kazoo fires every watch with no path when the connection drops, and forgets
            # them all: read every topic again (once), which sets their watches again
            if not self._rewatch_pending:
                self._rewatch_pending = True
                self.submit(RewatchAssignments())
            return
        topic = event.path.rsplit("/", 1)[-1]
        self.submit(AssignmentChanged(topic))

    def _deletions_fired(self, event: WatchedEvent) -> None:
        self.submit(DeletionsFired())

    # ============================================================================ events

    async def _handle(self, queued: _Queued) -> None:
        event = queued.event
        if isinstance(event, Resign):
            raise NotControllerAnyMore(event.reason)
        try:
            try:
                result = await _HANDLERS[type(event)](self, event)
            except SESSION_ENDED as exc:
                raise NotControllerAnyMore(_session_ended(exc)) from None
        except NotControllerAnyMore as exc:
            if queued.reply is not None:
                queued.reply(exc)
            raise
        if queued.reply is not None:
            queued.reply(result)

    async def _on_brokers_changed(self, _: BrokersChanged) -> None:
        def read() -> dict[int, zk.BrokerRegistration]:
            ids = self.zoo.kazoo.get_children(
                zk.BROKER_IDS, watch=self.zoo.forward(self._brokers_fired))
            return self._read_registrations(int(i) for i in ids)

        live = await self.zoo.call(read)
        change = self.model.compare_brokers(live)
        if not change:
            return
        dead, came, bounced = change.dead, change.came, change.bounced
        log.info("controller.brokers_changed", dead=dead, came=came, bounced=bounced,
                 live=sorted(live))
        for broker_id in dead + came:
            queue = self._queues.pop(broker_id, None)
            if queue is not None:
                queue.close()
        for broker_id in came:
            self._open_queue(broker_id, live[broker_id])
        self.model.brokers_gone(dead + bounced)
        deletions = self.model.brokers_came({b: live[b] for b in came if b not in bounced})
        changes: list[Change] = []
        if bounced:  # first as failed (its leaderships move, it leaves the ISRs) ...
            changes = await self._settle(self.model.elect_after_broker_change)
            deletions += self.model.brokers_came({b: live[b] for b in bounced})
        self.model.live = dict(live)  # ... then as started
        changes += await self._settle(self.model.elect_after_broker_change)
        if came:  # the brokers that came (back) hear about every replica they hold
            self._send_leader_and_isr(self.model.partitions_on(came), only=set(came))
            self._send_deletions(deletions)  # and delete what they hold of a deleted one
        self._tell([c.tp for c in changes])
        await self._advance_reassignments()

    async def _on_topics_changed(self, _: TopicsChanged) -> None:
        def read() -> dict[str, Any]:
            names = self.zoo.kazoo.get_children(
                zk.TOPICS, watch=self.zoo.forward(self._topics_fired))
            return self._read_topics(n for n in names if n not in self.model.assignments
                                     and n not in self.model.deleting)

        await self._add(await self.zoo.call(read))

    async def _on_rewatch_assignments(self, _: RewatchAssignments) -> None:
        self._rewatch_pending = False
        for topic in sorted(self.model.assignments):
            await self._on_assignment_changed(AssignmentChanged(topic))

    async def _on_assignment_changed(self, event: AssignmentChanged) -> None:
        topic = event.topic
        if topic not in self.model.assignments:
            return
        # a topic deleted meanwhile is left out: the deletion handles it
        await self._add(await self.zoo.call(self._read_topics, [topic]))

    async def _add(self, topics: dict[str, Any]) -> None:
        new: list[TopicPartition] = []
        for topic, (assignment, configs, _) in sorted(topics.items()):
            new += self.model.add_topic(topic, assignment, configs)
        if not new:
            return
        await self._write(self.model.elect_new(new))
        self._tell(new, new_replicas=True)

    async def _on_deletions_fired(self, _: DeletionsFired) -> None:
        names = await self.zoo.call(
            self.zoo.kazoo.get_children, zk.DELETE_TOPICS,
            watch=self.zoo.forward(self._deletions_fired))
        if names:
            await self._on_delete_topics(DeleteTopics(tuple(names)))

    async def _on_delete_topics(self, event: DeleteTopics) -> None:
        """The topic leaves the model and every broker's metadata at once; each replica is
        told to delete its log, and the znodes -- the name -- go once all have (a replica on a
        dead broker waits for its return: that broker must not keep the old log under a name
        that may be created again)."""
        for topic in sorted(event.topics):
            if topic in self.model.deleting:
                continue
            assignment = self.model.assignments.get(topic)
            if assignment is None:  # nothing of it left but the request
                await self._fenced(self._delete_topic_znodes, topic)
                continue
            partitions = len(assignment)
            deletions = self.model.begin_deletion(topic)
            log.info("controller.topic_deletion_started", topic=topic, partitions=partitions,
                     waiting_for_dead=self.model.deletion_waits_for(topic))
            self._send_deletions(deletions)
        self._broadcast_metadata()

    def _send_deletions(self, deletions: Iterable[ReplicaDeletion]) -> None:
        """StopReplica (delete) for replicas the model moved to ReplicaDeletionStarted; each
        answer is an event (``ReplicaDeleted``)."""
        for deletion in deletions:
            body = self.model.stop_replica_request(deletion.partitions, delete=True)
            self._queue(deletion.broker_id, ApiKey.STOP_REPLICA, body, functools.partial(
                self._replica_deleted, deletion.broker_id, deletion.partitions))

    def _replica_deleted(self, broker_id: int, tps: tuple[TopicPartition, ...],
                         result: dict[str, Any] | BaseException) -> None:
        if isinstance(result, dict) and not result["error_code"] and not any(
                p["error_code"] for p in result["partitions"]):
            self.submit(ReplicaDeleted(broker_id, tps))
        else:  # retried when the broker registers again, or by the next controller
            self._answered(broker_id, ApiKey.STOP_REPLICA, result)

    async def _on_replica_deleted(self, event: ReplicaDeleted) -> None:
        for topic in self.model.replicas_deleted(event.broker_id, event.partitions):
            await self._fenced(self._delete_topic_znodes, topic)
            partitions = self.model.topic_deleted(topic)
            log.info("controller.topic_deleted", topic=topic, partitions=partitions)

    def _delete_topic_znodes(self, topic: str) -> None:
        """Delete the topic's znodes, fenced like every other write: each transaction checks
        the epoch first, so a replaced controller deletes nothing (NotControllerAnyMore).
        ZooKeeper has no recursive delete in a transaction: the partitions' nodes go first,
        in batches, then in one last transaction the topic's own node, its configs and the
        deletion request -- a controller replaced half-way leaves the request for the next
        one to finish. A node that appeared or went meanwhile: read the tree again."""
        for _ in range(DELETE_ATTEMPTS):
            under, last = self._topic_znodes(topic)
            batches = [under[i:i + WRITES_PER_TRANSACTION]
                       for i in range(0, len(under), WRITES_PER_TRANSACTION)]
            if all(self._delete_fenced(paths) for paths in [*batches, last] if paths):
                return
        raise RuntimeError(f"the znodes of topic {topic!r} kept changing while the controller "
                           f"deleted them ({DELETE_ATTEMPTS} attempts)")

    def _topic_znodes(self, topic: str) -> tuple[list[str], list[str]]:
        """The nodes under ``/brokers/topics/<topic>`` (children before parents), and the
        topic's own node, config node and deletion request, those that exist."""
        client = self.zoo.kazoo
        under: list[str] = []
        level = [zk.topic_path(topic)]
        while level:
            pending = [(path, client.get_children_async(path)) for path in level]
            level = []
            for path, result in pending:
                try:
                    children = result.get()
                except NoNodeError:
                    continue
                under.append(path)
                level += [f"{path}/{child}" for child in children]
        under.reverse()
        last = under[-1:]  # the topic's own node, when it is there
        last += [path for path in (zk.topic_config_path(topic), zk.delete_topic_path(topic))
                 if client.exists(path) is not None]
        return under[:-1], last

    def _delete_fenced(self, paths: list[str]) -> bool:
        """Delete ``paths`` in order, in one transaction behind the epoch check; False when
        one of them was not there or had gained a child (nothing is deleted then)."""
        tx = self._transaction()
        for path in paths:
            tx.delete(path)
        return not any(isinstance(r, Exception) for r in self._commit(tx))

    async def _on_isr_changes(self, _: IsrChanges) -> None:
        """Leaders changed ISRs: adopt the states they wrote and tell every broker."""

        def read() -> list[TopicPartition]:
            client = self.zoo.kazoo
            names = client.get_children(zk.ISR_CHANGES,
                                        watch=self.zoo.forward(self._isr_changes_fired))
            found = get_many(client, [f"{zk.ISR_CHANGES}/{name}" for name in sorted(names)])
            changed: list[TopicPartition] = []
            for path, got in found.items():
                if got is None:
                    continue
                try:
                    changed += [TopicPartition(*tp) for tp in zk.decode_isr_change(path, got[0])]
                except zk.ZkFormatError as exc:
                    log.warning("controller.bad_isr_change", reason=str(exc))
            delete_many(client, [path for path, got in found.items() if got is not None])
            return changed

        changed = self.model.known_partitions(await self.zoo.call(read))
        await self._reread(changed, quiet=True)
        if changed:
            self._broadcast_metadata()
            await self._advance_reassignments()

    async def _on_config_changes(self, _: ConfigChanges) -> None:
        """Brokers changed topics' configs: read them again and tell every broker."""

        def read() -> dict[str, dict[str, str]]:
            client = self.zoo.kazoo
            names = client.get_children(zk.CONFIG_CHANGES,
                                        watch=self.zoo.forward(self._config_changes_fired))
            found = get_many(client, [f"{zk.CONFIG_CHANGES}/{n}" for n in sorted(names)])
            topics: list[str] = []
            for path, got in found.items():
                if got is None:
                    continue
                try:
                    topics += zk.decode_config_change(path, got[0])
                except zk.ZkFormatError as exc:
                    log.warning("controller.bad_config_change", reason=str(exc))
            known = [t for t in dict.fromkeys(topics) if t in self.model.configs]
            config_data = get_many(client, [zk.topic_config_path(t) for t in known])
            configs = {t: {} if (got := config_data[zk.topic_config_path(t)]) is None
                       else zk.decode_topic_config(t, got[0]) for t in known}
            # deleted once the configs they announce are read: no change is lost
            delete_many(client, [path for path, got in found.items() if got is not None])
            return configs

        configs = await self.zoo.call(read)
        if self.model.configs_read(configs):
            self._broadcast_metadata()

    # ====================================================================== reassignment

    async def _on_reassign(self, event: Reassign) -> dict[TopicPartition, str | None]:
        """Start moving partitions to new replicas (Kafka's reassignment): the answer per
        partition is None, or why it cannot move."""
        answers, started = self.model.start_reassignments(event.partitions)
        if not started:
            return answers
        await self._fenced(self._save_reassignments)
        for topic in sorted({c.tp[0] for c in started}):
            await self._fenced(self._write_assignment, topic)
        await self._write(started)
        self._tell([c.tp for c in started], new_replicas=True)
        await self._advance_reassignments()
        return answers

    async def _advance_reassignments(self) -> None:
        """Finish the moves whose new replicas have all caught up."""
        for change, _ in self.model.finish_reassignments():
            await self._write([change])
            if not self.model.holds(change):
                continue  # the state moved under us: the next ISR change tries again
            deletions = self.model.reassignment_done(change.tp)
            await self._fenced(self._write_assignment, change.tp[0])
            await self._fenced(self._save_reassignments)
            self._send_deletions(deletions)
            self._tell([change.tp])

    def _write_assignment(self, topic: str) -> None:
        tx = self._transaction()
        tx.set_data(zk.topic_path(topic), zk.encode_assignment(self.model.assignments[topic]))
        self._commit(tx)

    def _transaction(self) -> Any:
        """A ZooKeeper transaction whose first step checks ``/controller_epoch`` is still at the
        version this controller wrote: a replaced controller's writes all fail with it."""
        tx = self.zoo.kazoo.transaction()
        tx.check(zk.CONTROLLER_EPOCH, self.elected.epoch_zk_version)
        return tx

    def _commit(self, tx: Any) -> list[Any]:
        """Commit a ``_transaction``; NotControllerAnyMore if the epoch check failed."""
        results: list[Any] = tx.commit()
        if isinstance(results[0], BadVersionError | NoNodeError):
            raise NotControllerAnyMore(
                f"/controller_epoch moved past epoch {self.epoch}: another controller took over")
        return results

    def _save_reassignments(self) -> None:
        """``/admin/reassign_partitions`` as the model has it (gone once nothing moves), in a
        ``_transaction`` like every other write of ours: a replaced controller's save fails
        with NotControllerAnyMore and leaves the node as its successor has it."""
        client = self.zoo.kazoo
        path = zk.REASSIGN_PARTITIONS
        exists = client.exists(path) is not None
        if not exists and not self.model.reassigning:
            return
        tx = self._transaction()
        if not exists:
            client.ensure_path(path.rsplit("/", 1)[0])
            tx.create(path, zk.encode_reassignments(self.model.reassigning))
        elif self.model.reassigning:
            tx.set_data(path, zk.encode_reassignments(self.model.reassigning))
        else:
            tx.delete(path)
        _, result = self._commit(tx)
        if isinstance(result, Exception):
            raise result  # the node changed under us: as the plain write raised it

    def _read_reassignments(self) -> dict[TopicPartition, tuple[int, ...]]:
        try:
            data, _ = self.zoo.kazoo.get(zk.REASSIGN_PARTITIONS)
        except NoNodeError:
            return {}
        return {TopicPartition(*tp): replicas
                for tp, replicas in zk.decode_reassignments(data).items()}

    async def _on_controlled_shutdown(self, event: ControlledShutdown) -> ShutdownDecision:
        broker_id = event.broker_id
        if broker_id not in self.model.live:
            return ShutdownDecision([], [], [])
        decisions: list[ShutdownDecision] = []

        def decide() -> list[Change]:
            decisions.append(self.model.elect_for_shutdown(broker_id))
            return decisions[-1].changes

        changes = await self._settle(decide)
        moved = [c.tp for c in changes]
        # the stopping broker is told to stop its replicas instead of following the new
        # leaders: a follower that kept fetching would be taken back into the ISRs it just left
        self._tell(moved, only=set(self.model.live) - {broker_id})
        body = self.model.stop_following(broker_id, moved)
        if body is not None:
            self._queue(broker_id, ApiKey.STOP_REPLICA, body)
        last = decisions[-1]
        log.info("controller.controlled_shutdown", broker_id=broker_id, moved=len(changes),
                 remaining=len(last.remaining), unmovable=len(last.unmovable))
        return ShutdownDecision(changes, last.remaining, last.unmovable)

    async def _on_preferred_election(self, event: PreferredElection) -> list[TopicPartition]:
        changes = await self._settle(lambda: self.model.elect_preferred(event.partitions))
        self._tell([c.tp for c in changes])
        if changes:
            log.info("controller.preferred_election", moved=len(changes))
        return [c.tp for c in changes]

    async def _check_imbalance(self) -> None:
        """Kafka's auto leader rebalance: a broker leading less than its share of preferred
        partitions by more than the threshold gets a preferred election."""
        threshold = self.settings.leader_imbalance_per_broker_percentage / 100
        while True:
            await trio.sleep(self.settings.leader_imbalance_check_interval_ms / 1000)
            if any(ratio > threshold for ratio in self.model.imbalance().values()):
                self.submit(PreferredElection())

    # ============================================================================ writes

    async def _settle(self, decide: Callable[[], list[Change]]) -> list[Change]:
        """Decide, write, and decide again for partitions whose state znode moved under us (a
        leader changed its ISR meanwhile): the written changes."""
        written: list[Change] = []
        for _ in range(DECISION_ROUNDS):
            changes = decide()
            moved = await self._write(changes)
            written += [c for c in changes if c.tp not in moved]
            if not moved:
                break
        return written

    async def _write(self, changes: list[Change]) -> set[TopicPartition]:
        """Write partition states, each transaction fenced by the epoch check; a partition
        whose znode moved under us is read again and adopted as it is. Returns those."""
        moved: set[TopicPartition] = set()
        self.model.check(changes)  # the table first: nothing is written that it refuses
        for start in range(0, len(changes), WRITES_PER_TRANSACTION):
            batch = changes[start:start + WRITES_PER_TRANSACTION]
            results = await self._fenced(self._write_batch, batch)
            for change, version in zip(batch, results, strict=True):
                if version is None:
                    moved.add(change.tp)
                else:
                    self.model.written(change, version)
            await self._reread([c.tp for c in batch if c.tp in moved])
        return moved

    def _write_batch(self, batch: list[Change]) -> list[int | None]:
        client = self.zoo.kazoo
        for change in batch:
            if change.create:
                client.ensure_path(zk.partition_path(*change.tp))
        tx = self._transaction()
        for change in batch:
            path = zk.state_path(*change.tp)
            if change.create:
                tx.create(path, change.state.encode())
            else:
                tx.set_data(path, change.state.encode(), version=change.state.zk_version)
        results = self._commit(tx)
        if not any(isinstance(r, Exception) for r in results):
            return [0 if c.create else c.state.zk_version + 1 for c in batch]
        if len(batch) == 1:
            return [None]
        # one partition failed and the transaction rolled back: try them one by one
        return [v for change in batch for v in self._write_batch([change])]

    async def _reread(self, tps: list[TopicPartition], *, quiet: bool = False) -> None:
        """Read partition states again, in one batched round trip, and adopt them."""
        if not tps:
            return
        paths = {tp: zk.state_path(*tp) for tp in tps}
        found = await self.zoo.call(get_many, self.zoo.kazoo, paths.values())
        for tp, path in paths.items():
            if (got := found[path]) is None:
                continue
            state = zk.LeaderIsr.decode(tp[0], tp[1], got[0], got[1].version)
            if not quiet:
                log.warning("controller.state_moved", topic=tp[0], partition=tp[1],
                            leader=state.leader, leader_epoch=state.leader_epoch,
                            isr=list(state.isr))
            self.model.adopt_state(tp, state)

    async def _fenced(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a ZooKeeper step unless the epoch moved on; session loss ends the reign too."""
        if self.zoo.client is None or not self.zoo.kazoo.connected:
            raise NotControllerAnyMore("the ZooKeeper session is not connected")
        return await self.zoo.call(fn, *args)

    # ========================================================================== requests

    def _tell(self, tps: Iterable[TopicPartition], *, only: Collection[int] | None = None,
              new_replicas: bool = False) -> None:
        """LeaderAndIsr for ``tps`` to their replicas (``only``: to these brokers alone),
        then the whole view to every broker."""
        self._send_leader_and_isr(tps, only=only, new_replicas=new_replicas)
        self._broadcast_metadata()

    def _send_leader_and_isr(self, tps: Iterable[TopicPartition], *,
                             only: Collection[int] | None = None,
                             new_replicas: bool = False) -> None:
        unique = list(dict.fromkeys(tps))
        for broker_id, body in self.model.leader_and_isr(unique, new=new_replicas).items():
            if only is None or broker_id in only:
                self._queue(broker_id, ApiKey.LEADER_AND_ISR, body)

    def _broadcast_metadata(self) -> None:
        body = self.model.update_metadata()
        for broker_id in self.model.live:
            self._queue(broker_id, ApiKey.UPDATE_METADATA, body)

    def _queue(self, broker_id: int, api: ApiKey, body: dict[str, Any],
               on_answer: Answer | None = None) -> None:
        """Queue a control request for ``broker_id``, naming the registration it is for
        (KIP-380's broker epoch): one that reaches the broker after it registered again --
        held in a cut link -- is refused rather than rolling its state back."""
        queue = self._queues.get(broker_id)
        registration = self.model.live.get(broker_id)
        if queue is not None:
            epoch = -1 if registration is None else registration.epoch
            queue.put(api, {**body, "broker_epoch": epoch},
                      on_answer or functools.partial(self._answered, broker_id, api),
                      version=CONTROL_VERSION)

    def _answered(self, broker_id: int, api: ApiKey, result: dict[str, Any] | BaseException
                  ) -> None:
        # a refusal for lack of ClusterAction never gets here: the queue says so and asks
        # again until an operator fixes super_users or the ACLs
        if isinstance(result, StaleControllerEpochError):
            self.resign(f"a broker refused epoch {self.epoch}: {result}")

    def _open_queue(self, broker_id: int, reg: zk.BrokerRegistration) -> None:
        queue = RequestQueue(broker_id, reg.host, reg.port,
                             client_id=f"controller-{self.broker_id}",
                             timeout=self.settings.controller_socket_timeout_ms / 1000,
                             security=LinkSecurity.of(self.settings))
        self._queues[broker_id] = queue
        assert self._nursery is not None
        self._nursery.start_soon(queue.run)


_HANDLERS: dict[type, Callable[[Controller, Any], Awaitable[Any]]] = {
    BrokersChanged: Controller._on_brokers_changed,
    TopicsChanged: Controller._on_topics_changed,
    RewatchAssignments: Controller._on_rewatch_assignments,
    AssignmentChanged: Controller._on_assignment_changed,
    DeletionsFired: Controller._on_deletions_fired,
    DeleteTopics: Controller._on_delete_topics,
    IsrChanges: Controller._on_isr_changes,
    ConfigChanges: Controller._on_config_changes,
    Reassign: Controller._on_reassign,
    ControlledShutdown: Controller._on_controlled_shutdown,
    PreferredElection: Controller._on_preferred_election,
    ReplicaDeleted: Controller._on_replica_deleted,
}
assert set(_HANDLERS) == set(EVENT_KINDS) - {Resign}, "every controller event needs a handler"
