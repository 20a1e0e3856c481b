"""The controller's decisions, without I/O: what it knows of the cluster and what each event
makes it change.

Shaped like the group coordinator (DESIGN "Cluster"): the trio side (``controller.py``) reads
ZooKeeper and tells the model what happened; the methods here answer with ``Change``\\ s --
new partition states to write, conditionally, to ZooKeeper, each one's partition-machine move
checked against ``PARTITION_MACHINE`` before it leaves the model and made once the write
succeeded (``written``) -- and with the requests to send to brokers. Replicas follow their
own machine (``replica_state``), a topic's deletion progress included. Every move is logged
as a "state change" line an operator can follow.

Election rules (Kafka's, seed 003: "followers which are out of sync will NOT be eligible to
become leader"), each a pure function in ``elections``:

- offline election: the first replica, in assignment order, that is live and in the ISR;
- a dead broker leaves every ISR it was in; an ISR is never emptied -- its last member stays,
  so that it can lead again when it comes back (no unclean election, unless the topic's
  ``unclean_leader_election_enable`` allows one: then the first live replica);
- controlled shutdown: the first other live in-sync replica not itself shutting down; a
  partition with no other replica that is live and not stopping has nobody to move to (a
  whole-cluster stop, replication factor 1): it stays led by the stopping broker and goes
  offline with it;
- preferred election: the first replica, if it is live and in the ISR.

Every change of leader or ISR made here increments the leader epoch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from broker.cluster.elections import (
    controlled_shutdown_leader,
    offline_leader,
    preferred_leader,
    reassignment_leader,
    shrink_isr,
)
from broker.cluster.partition_state import PARTITION_MACHINE, PartitionEvent, PartitionState
from broker.cluster.replica_state import (
    Replica,
    ReplicaDeletion,
    ReplicaEvent,
    ReplicaState,
    ReplicaStates,
)
from broker.cluster.zk_layout import NO_LEADER, BrokerRegistration, LeaderIsr
from protocol.partitions import TopicPartition
from protocol.statemachine import IllegalTransition

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Change:
    """A partition state to write; ``create``: the state znode does not exist yet.

    The partition machine's event it makes is fixed with it, before the write (Kafka's
    PartitionStateMachine checks each move against the valid previous states first): a state
    with a leader elects it, one without loses it."""

    tp: TopicPartition
    state: LeaderIsr
    create: bool = False

    @property
    def event(self) -> PartitionEvent:
        return leadership_event(self.state.leader)


def leadership_event(leader: int) -> PartitionEvent:
    """The partition machine's event for a state led by ``leader`` (or by nobody)."""
    return PartitionEvent.LEADER_ELECTED if leader != NO_LEADER else PartitionEvent.LEADER_LOST


@dataclass(frozen=True)
class ShutdownDecision:
    """What a controlled shutdown of one broker does to the partitions it leads or follows."""

    #: new states: its leaderships moved to other in-sync replicas, it out of every ISR
    changes: list[Change]
    #: led by it still, but another replica is live and not stopping: once that one is in
    #: sync, another attempt moves the partition (Kafka's "partitions remaining")
    remaining: Sequence[tuple[str, int]]
    #: led by it, and no other replica is live and not stopping (all down or stopping too,
    #: or it is the only replica): no attempt will move it, it goes offline with the broker
    unmovable: Sequence[tuple[str, int]]


@dataclass(frozen=True)
class BrokerChange:
    """What a new read of ``/brokers/ids`` changed."""

    dead: list[int]
    #: registered, or registered again (``bounced``)
    came: list[int]
    #: registered again before the old registration's deletion was seen (kill -9 and a quick
    #: restart): a new process that lost its state (Kafka's "bounced" brokers)
    bounced: list[int]

    def __bool__(self) -> bool:
        return bool(self.dead or self.came)


@dataclass
class ControllerModel:
    broker_id: int
    epoch: int
    live: dict[int, BrokerRegistration] = field(default_factory=dict)
    assignments: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    states: dict[TopicPartition, LeaderIsr] = field(default_factory=dict)
    machine: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    #: unclean_leader_election_enable for topics that do not set it
    unclean_default: bool = False
    #: partitions being moved: the replicas they are moving to (Kafka's RAR)
    reassigning: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    #: topics being deleted: their replicas' progress is in ``replica_states``
    deleting: set[str] = field(default_factory=set)
    replica_states: ReplicaStates = field(init=False)

    def __post_init__(self) -> None:
        self.replica_states = ReplicaStates(self.epoch)

    # -------------------------------------------------------------------------- knowledge

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignments.get(tp[0], {}).get(tp[1], ())

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p)
                for t in sorted(self.assignments) for p in sorted(self.assignments[t])]

    def partitions_without_state(self) -> list[TopicPartition]:
        """Partitions whose state znode was never written (a controller died in between)."""
        return [tp for tp in self.partitions() if tp not in self.states]

    def partitions_on(self, broker_ids: Iterable[int]) -> list[TopicPartition]:
        """The partitions with a replica on one of ``broker_ids``."""
        brokers = set(broker_ids)
        return [tp for tp in self.partitions() if brokers & set(self.replicas(tp))]

    def known_partitions(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """``tps`` this model holds a state for, once each, in order."""
        return [tp for tp in dict.fromkeys(tps) if tp in self.states]

    def holds(self, change: Change) -> bool:
        """Whether ``change`` is the partition's state now (not moved under its write)."""
        state = self.states.get(change.tp)
        return state is not None and state.leader_epoch == change.state.leader_epoch

    def configs_read(self, configs: Mapping[str, Mapping[str, str]]) -> list[str]:
        """Topic configs read again: adopt those that changed, of topics still known; the
        topics whose configs changed (every broker needs the new view)."""
        changed = []
        for topic, topic_configs in sorted(configs.items()):
            if topic in self.configs and self.configs[topic] != topic_configs:
                self.configs[topic] = dict(topic_configs)
                log.info("controller.topic_configs_changed", topic=topic,
                         configs=self.configs[topic])
                changed.append(topic)
        return changed

    def add_topic(self, topic: str, assignment: Mapping[int, Sequence[int]],
                  configs: Mapping[str, str]) -> list[TopicPartition]:
        """A topic (or new partitions of one) appeared in ZooKeeper; the new partitions."""
        known = self.assignments.setdefault(topic, {})
        self.configs[topic] = dict(configs)
        new = []
        for partition, replicas in sorted(assignment.items()):
            if partition not in known:
                known[partition] = tuple(replicas)
                tp = TopicPartition(topic, partition)
                self._move(tp, PartitionEvent.CREATED)
                self.replica_states.move(self._replicas_of(tp), ReplicaEvent.CREATED)
                new.append(tp)
        return new

    def adopt_state(self, tp: TopicPartition, state: LeaderIsr) -> None:
        """A state read from ZooKeeper (at controller start-up, or written by a leader under
        ours): Online only with a live leader. The move is the table's, checked first."""
        event = leadership_event(state.leader if state.leader in self.live else NO_LEADER)
        self._check(tp, event)
        self.states[tp] = state
        self._move(tp, event, leader=state.leader, leader_epoch=state.leader_epoch,
                   isr=list(state.isr))
        self._place_new_replicas(tp)

    def _remove_partitions(self, topic: str) -> list[TopicPartition]:
        """The topic leaves the partition machine (its replicas stay, to be deleted)."""
        removed = [TopicPartition(topic, p) for p in sorted(self.assignments.pop(topic, {}))]
        self.configs.pop(topic, None)
        for tp in removed:
            self._move(tp, PartitionEvent.DELETED)
            self.states.pop(tp, None)
        return removed

    # --------------------------------------------------------------------------- brokers

    def compare_brokers(self, live: Mapping[int, BrokerRegistration]) -> BrokerChange:
        """What changed since the brokers this model knows: gone, come, and come again -- a
        registration whose timestamp changed is a restarted process (Kafka's "bounced")."""
        before = self.live
        dead = sorted(set(before) - set(live))
        bounced = sorted(b for b in live if b in before
                         and live[b].timestamp != before[b].timestamp)
        came = sorted(b for b in live if b not in before or b in bounced)
        return BrokerChange(dead, came, bounced)

    def brokers_gone(self, broker_ids: Iterable[int]) -> None:
        """Brokers died (or restarted): their replicas go Offline, a deletion sent to them and
        unanswered becomes ineligible until they return. They stop shutting down."""
        for broker_id in broker_ids:
            self.live.pop(broker_id, None)
            self.shutting_down.discard(broker_id)
            mine = self.replica_states.on(broker_id)
            self.replica_states.move(self.replica_states.in_state(
                mine, ReplicaState.NEW, ReplicaState.ONLINE, ReplicaState.DELETION_STARTED),
                ReplicaEvent.BROKER_DOWN)

    def brokers_came(self, registrations: Mapping[int, BrokerRegistration]
                     ) -> list[ReplicaDeletion]:
        """Brokers registered (again): their assigned replicas are Online, and the deletions
        that waited for them are sent again -- the StopReplica requests to send."""
        again: list[Replica] = []
        for broker_id, registration in sorted(registrations.items()):
            self.live[broker_id] = registration
            self.shutting_down.discard(broker_id)
            mine = self.replica_states.on(broker_id)
            self.replica_states.move(self.replica_states.in_state(mine, ReplicaState.OFFLINE),
                                     ReplicaEvent.BROKER_LIVE)
            waiting = self.replica_states.in_state(mine, ReplicaState.DELETION_INELIGIBLE)
            self.replica_states.move(waiting, ReplicaEvent.STOPPED)
            again += waiting
        return self._delete_replicas(again)

    # -------------------------------------------------------------------------- deletion

    def begin_deletion(self, topic: str,
                       assignment: Mapping[int, Sequence[int]] | None = None
                       ) -> list[ReplicaDeletion]:
        """Delete a topic: it leaves the partition machine (and so every broker's metadata)
        at once, and each of its replicas is to be deleted -- asked now on a live broker,
        ineligible on a dead one. ``assignment``: a deletion a previous controller began, of
        a topic this model never added. Returns the StopReplica requests to send."""
        if topic in self.assignments:
            assignment = self.assignments[topic]
            self._remove_partitions(topic)
        if not assignment:
            return []
        replicas = [(topic, p, b) for p, brokers in sorted((assignment or {}).items())
                    for b in brokers]
        self.deleting.add(topic)
        self.replica_states.move(
            self.replica_states.in_state(replicas, ReplicaState.NON_EXISTENT),
            ReplicaEvent.CREATED)
        self.replica_states.move(replicas, ReplicaEvent.STOPPED)
        return self._delete_replicas(replicas)

    def deletion_waits_for(self, topic: str) -> list[int]:
        """The brokers, down, whose replicas of ``topic`` wait for them to be deleted."""
        return sorted({r[2] for r in self.replica_states.in_state(
            self.replica_states.of_topic(topic), ReplicaState.DELETION_INELIGIBLE)})

    def replicas_deleted(self, broker_id: int, tps: Iterable[TopicPartition]) -> list[str]:
        """``broker_id`` answered a StopReplica (delete) for ``tps``: those replicas are
        deleted. The topics being deleted whose every replica now is (their znodes can go);
        a replica a reassignment dropped is forgotten at once."""
        replicas = self.replica_states.in_state(
            [(t, p, broker_id) for t, p in tps],
            ReplicaState.DELETION_STARTED, ReplicaState.DELETION_INELIGIBLE)
        self.replica_states.move(replicas, ReplicaEvent.DELETED)
        done = []
        for topic in sorted({r[0] for r in replicas}):
            if topic not in self.deleting:
                self.replica_states.move([r for r in replicas if r[0] == topic],
                                         ReplicaEvent.FORGOTTEN)
            elif all(self.replica_states.get(r) is ReplicaState.DELETION_SUCCESSFUL
                     for r in self.replica_states.of_topic(topic)):
                done.append(topic)
        return done

    def topic_deleted(self, topic: str) -> int:
        """The topic's znodes are gone: forget its replicas; how many partitions it had."""
        replicas = self.replica_states.of_topic(topic)
        self.replica_states.move(replicas, ReplicaEvent.FORGOTTEN)
        self.deleting.discard(topic)
        return len({r[1] for r in replicas})

    # -------------------------------------------------------------------------- decisions

    def elect_new(self, tps: Iterable[TopicPartition]) -> list[Change]:
        """First states of new partitions: leader the first live replica, ISR the live ones.
        With no replica live the ISR is every replica (none has data yet) and there is no
        leader until one comes."""
        changes = []
        for tp in tps:
            replicas = self.replicas(tp)
            alive = [r for r in replicas if self._eligible(r)]
            if alive:
                state = LeaderIsr(alive[0], 0, tuple(alive), self.epoch)
            else:
                state = LeaderIsr(NO_LEADER, 0, replicas, self.epoch)
            changes.append(self._change(tp, state, create=True))
        return changes

    def elect_after_broker_change(self) -> list[Change]:
        """After brokers died or came back: dead brokers leave the ISRs (``shrink_isr``), then
        every partition whose leader is not live gets one (``offline_leader``)."""
        changes = []
        for tp, state in sorted(self.states.items()):
            isr = shrink_isr(state.leader, state.isr, self.live)
            leader = state.leader
            if leader not in self.live:
                leader = self._offline_election(tp, state, isr)
                if leader != NO_LEADER and leader not in isr:
                    isr = [leader]  # unclean: the old ISR's data is not on it
            if leader != NO_LEADER and leader not in isr:
                isr.insert(0, leader)
            if leader != state.leader or tuple(isr) != state.isr:
                changes.append(self._change(tp, self._next(state, leader, isr)))
        return changes

    def _offline_election(self, tp: TopicPartition, state: LeaderIsr, isr: Sequence[int]
                          ) -> int:
        unclean = self.unclean_allowed(tp[0])
        leader = offline_leader(self.replicas(tp), isr, self._eligible_set(),
                                unclean_allowed=unclean)
        if leader is None:
            return NO_LEADER
        if leader not in isr:
            # what the old ISR had and this replica lacks is lost
            log.warning("controller.unclean_election", topic=tp[0], partition=tp[1],
                        leader=leader, lost_isr=list(state.isr))
        return leader

    def elect_for_shutdown(self, broker_id: int) -> ShutdownDecision:
        """Controlled shutdown of ``broker_id``: lead its partitions elsewhere and take it out
        of every ISR. The partitions nobody else can lead now are kept apart by whether a
        later attempt could move them (``ShutdownDecision``)."""
        self.shutting_down.add(broker_id)
        changes: list[Change] = []
        remaining: list[TopicPartition] = []
        unmovable: list[TopicPartition] = []
        eligible = self._eligible_set()
        for tp, state in sorted(self.states.items()):
            if broker_id not in state.isr and state.leader != broker_id:
                continue
            isr = [r for r in state.isr if r != broker_id]
            leader = state.leader
            if leader == broker_id:
                elected = controlled_shutdown_leader(self.replicas(tp), isr, eligible, broker_id)
                if elected is None:
                    if any(r in eligible for r in self.replicas(tp) if r != broker_id):
                        remaining.append(tp)  # that replica may yet join the ISR
                    else:
                        unmovable.append(tp)
                    continue
                leader = elected
            if not isr:  # leaderless, with it as the last ISR member: keep it (never empty)
                continue
            changes.append(self._change(tp, self._next(state, leader, isr)))
        return ShutdownDecision(changes, remaining, unmovable)

    def elect_preferred(self, tps: Iterable[TopicPartition] | None = None) -> list[Change]:
        """Move leadership back to each partition's first replica where it can take it."""
        changes = []
        eligible = self._eligible_set()
        for tp in sorted(self.states if tps is None else tps):
            state = self.states.get(tp)
            replicas = self.replicas(tp)
            if state is None or not replicas:
                continue
            preferred = preferred_leader(replicas, state.isr, eligible)
            if preferred is not None and preferred != state.leader:
                changes.append(self._change(tp, self._next(state, preferred, list(state.isr))))
        return changes

    def reassignment_problem(self, tp: TopicPartition, target: Sequence[int]) -> str | None:
        """Why ``tp`` cannot move to ``target`` (Kafka's checks), or None."""
        if tp not in self.states:
            return f"{tp[0]}-{tp[1]} does not exist"
        if tp in self.reassigning:
            return f"{tp[0]}-{tp[1]} is being reassigned already"
        if not target or len(set(target)) != len(target):
            return f"replicas {list(target)} must be distinct broker ids, at least one"
        dead = [b for b in target if b not in self.live]
        if dead:
            return f"brokers {dead} are not live"
        deleting = [b for b in target if b not in self.replicas(tp) and
                    self.replica_states.get((*tp, b)) is not ReplicaState.NON_EXISTENT]
        if deleting:
            return (f"brokers {deleting} have not yet deleted the replica of {tp[0]}-{tp[1]} "
                    "an earlier reassignment took from them")
        return None

    def start_reassignments(self, wanted: Iterable[tuple[TopicPartition, Sequence[int]]]
                            ) -> tuple[dict[TopicPartition, str | None], list[Change]]:
        """Reassignments asked for: per partition None or why it cannot move, and the changes
        that start the moves (none for a partition already on its target replicas)."""
        answers: dict[TopicPartition, str | None] = {}
        started: list[Change] = []
        for tp, target in wanted:
            answers[tp] = self.reassignment_problem(tp, target)
            if answers[tp] is None and tuple(target) != self.replicas(tp):
                change = self.start_reassignment(tp, target)
                if change is not None:
                    started.append(change)
        return answers, started

    def resume_reassignments(self, found: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Moves a previous controller began (``/admin/reassign_partitions``), of partitions
        that still exist."""
        self.reassigning = {tp: tuple(target) for tp, target in found.items()
                            if tp in self.states}

    def start_reassignment(self, tp: TopicPartition, target: Sequence[int]) -> Change | None:
        """Kafka's reassignment, step 1: the partition is assigned the union of its old and
        new replicas (new ones first, so the preferred leader is a new one), and its leader
        epoch grows so every replica hears of it. The new replicas start as followers; the
        move finishes when all of them are in the ISR (``finish_reassignments``)."""
        state = self.states.get(tp)
        if state is None:
            return None
        old = self.replicas(tp)
        self.reassigning[tp] = tuple(target)
        union = (*target, *(r for r in old if r not in target))
        self.assignments[tp[0]][tp[1]] = union
        self.replica_states.move([(*tp, b) for b in target if b not in old],
                                 ReplicaEvent.CREATED)
        self._place_new_replicas(tp)
        log.info("controller.reassignment_started", topic=tp[0], partition=tp[1],
                 old=list(old), target=list(target))
        return self._change(tp, self._next(state, state.leader, list(state.isr)))

    def finish_reassignments(self) -> list[tuple[Change, tuple[int, ...]]]:
        """Reassignment, last step, for each moving partition whose new replicas are all in
        sync: lead it from a new replica, drop the old ones from its ISR and assignment.
        Returns the changes and the replicas each partition sheds."""
        done = []
        for tp, target in sorted(self.reassigning.items()):
            state = self.states.get(tp)
            if state is None:
                del self.reassigning[tp]
                continue
            if not set(target) <= set(state.isr):
                continue
            leader = reassignment_leader(target, state.isr, self._eligible_set(), state.leader)
            if leader is None:
                continue  # wait for a new replica to be live
            isr = [r for r in state.isr if r in target]
            removed = tuple(r for r in self.replicas(tp) if r not in target)
            done.append((self._change(tp, self._next(state, leader, isr)), removed))
        return done

    def reassignment_done(self, tp: TopicPartition) -> list[ReplicaDeletion]:
        """The partition's new state is written: it is assigned its new replicas alone, and
        the old ones are deleted (the StopReplica requests to send)."""
        target = self.reassigning.pop(tp)
        dropped = [(*tp, b) for b in self.replicas(tp) if b not in target]
        self.assignments[tp[0]][tp[1]] = target
        log.info("controller.reassignment_finished", topic=tp[0], partition=tp[1],
                 replicas=list(target))
        self.replica_states.move(dropped, ReplicaEvent.STOPPED)
        return self._delete_replicas(dropped)

    def imbalance(self) -> dict[int, float]:
        """Per broker: the share of the partitions it should lead (first replica) that it does
        not lead -- Kafka's leader imbalance ratio."""
        should: dict[int, int] = {}
        lost: dict[int, int] = {}
        for tp, state in self.states.items():
            replicas = self.replicas(tp)
            if not replicas:
                continue
            should[replicas[0]] = should.get(replicas[0], 0) + 1
            if state.leader != replicas[0]:
                lost[replicas[0]] = lost.get(replicas[0], 0) + 1
        return {b: lost.get(b, 0) / n for b, n in should.items()}

    # ------------------------------------------------------------------- before and after

    def check(self, changes: Iterable[Change]) -> None:
        """Before any write: each change's move must be in the partition table from the
        partition's state now (IllegalTransition names the partition, state and event)."""
        for change in changes:
            self._check(change.tp, change.event)

    def written(self, change: Change, zk_version: int) -> None:
        """``change`` -- checked before the write -- is in ZooKeeper now, at ``zk_version``:
        the partition takes its state and makes the move decided with it."""
        self._check(change.tp, change.event)
        state = replace(change.state, zk_version=zk_version)
        self.states[change.tp] = state
        self._move(change.tp, change.event, leader=state.leader,
                   leader_epoch=state.leader_epoch, isr=list(state.isr))
        if change.create:
            self._place_new_replicas(change.tp)

    # --------------------------------------------------------------------------- requests

    def leader_and_isr(self, tps: Iterable[TopicPartition], *, new: bool = False
                       ) -> dict[int, dict[str, Any]]:
        """LeaderAndIsr bodies, per live broker that holds a replica of one of ``tps``."""
        per_broker: dict[int, list[dict[str, Any]]] = {}
        leaders: set[int] = set()
        for tp in tps:
            state = self.states.get(tp)
            if state is None:
                continue
            entry = {**self._partition_entry(tp, state), "is_new": new}
            leaders.add(state.leader)
            for replica in self.replicas(tp):
                if replica in self.live:
                    per_broker.setdefault(replica, []).append(entry)
        live_leaders = [self._broker_entry(self.live[b]) for b in sorted(leaders)
                        if b in self.live]
        return {
            broker: {**self._controller_fields(), "partitions": entries,
                     "live_leaders": live_leaders}
            for broker, entries in per_broker.items()
        }

    def update_metadata(self) -> dict[str, Any]:
        """The whole cluster view, for every broker's metadata cache."""
        return {
            **self._controller_fields(),
            "partitions": [self._partition_entry(tp, self.states[tp])
                           for tp in self.partitions() if tp in self.states],
            "live_brokers": [self._broker_entry(b) for _, b in sorted(self.live.items())],
            "topics": [{"name": t, "configs": self.configs.get(t, {})}
                       for t in sorted(self.assignments)],
        }

    def stop_replica(self, tps: Iterable[TopicPartition], *, delete: bool
                     ) -> dict[int, dict[str, Any]]:
        per_broker: dict[int, list[TopicPartition]] = {}
        for topic, partition in tps:
            for replica in self.assignments.get(topic, {}).get(partition, ()):
                if replica in self.live:
                    per_broker.setdefault(replica, []).append(TopicPartition(topic, partition))
        return {b: self.stop_replica_request(found, delete=delete)
                for b, found in per_broker.items()}

    def stop_following(self, broker_id: int, moved: Iterable[TopicPartition]
                       ) -> dict[str, Any] | None:
        """A broker shutting down is told to stop its replicas of the partitions moved away
        from it (without deleting them) instead of following the new leaders: a follower that
        kept fetching would be taken back into the ISRs it just left."""
        return self.stop_replica(moved, delete=False).get(broker_id)

    def stop_replica_request(self, tps: Iterable[TopicPartition], *, delete: bool
                             ) -> dict[str, Any]:
        """One broker's StopReplica for ``tps`` (also for a topic no longer in the model:
        a deletion still waiting for a replica)."""
        return {**self._controller_fields(), "delete_partitions": delete,
                "partitions": [{"topic": t, "partition": p} for t, p in tps]}

    def unclean_allowed(self, topic: str) -> bool:
        """unclean_leader_election_enable: the topic's config, else the broker default."""
        configs = self.configs.get(topic, {})
        value = configs.get("unclean_leader_election_enable",
                            configs.get("unclean.leader.election.enable"))
        if value is None:
            return self.unclean_default
        return value.strip().lower() in ("true", "1", "yes", "on")

    # ---------------------------------------------------------------------------- helpers

    def _replicas_of(self, tp: TopicPartition) -> list[Replica]:
        return [(*tp, b) for b in self.replicas(tp)]

    def _place_new_replicas(self, tp: TopicPartition) -> None:
        """The partition has a state now: its New replicas follow their brokers."""
        new = self.replica_states.in_state(self._replicas_of(tp), ReplicaState.NEW)
        self.replica_states.move([r for r in new if r[2] in self.live], ReplicaEvent.BROKER_LIVE)
        self.replica_states.move([r for r in new if r[2] not in self.live],
                                 ReplicaEvent.BROKER_DOWN)

    def _delete_replicas(self, replicas: Sequence[Replica]) -> list[ReplicaDeletion]:
        """Offline replicas to delete: asked now where their broker is live (the requests),
        ineligible where it is down."""
        live = [r for r in replicas if r[2] in self.live]
        self.replica_states.move([r for r in replicas if r[2] not in self.live],
                                 ReplicaEvent.INELIGIBLE)
        self.replica_states.move(live, ReplicaEvent.DELETION_SENT)
        return list(self.replica_states.deletions(live))

    def _eligible(self, broker_id: int) -> bool:
        return broker_id in self.live and broker_id not in self.shutting_down

    def _eligible_set(self) -> set[int]:
        """The brokers that may lead: live and not shutting down."""
        return set(self.live) - self.shutting_down

    def _next(self, state: LeaderIsr, leader: int, isr: Sequence[int]) -> LeaderIsr:
        return LeaderIsr(leader, state.leader_epoch + 1, tuple(isr), self.epoch,
                         state.zk_version)

    def _change(self, tp: TopicPartition, state: LeaderIsr, create: bool = False) -> Change:
        """A decided change, its move checked against the partition table before it leaves
        the model: no write is ever made that the table would refuse afterwards."""
        change = Change(tp, state, create)
        self._check(tp, change.event)
        return change

    def _check(self, tp: TopicPartition, event: PartitionEvent) -> PartitionState:
        """The state ``event`` moves ``tp`` to; IllegalTransition, naming the partition, if the
        table has no such move from its state now."""
        before = self.machine.get(tp, PARTITION_MACHINE.initial)
        try:
            return PARTITION_MACHINE.next_state(before, event)
        except IllegalTransition as exc:
            raise IllegalTransition(f"{exc} (partition {tp[0]}-{tp[1]})") from None

    def _move(self, tp: TopicPartition, event: PartitionEvent, **detail: Any) -> None:
        before = self.machine.get(tp, PARTITION_MACHINE.initial)
        after = self._check(tp, event)
        if after is PartitionState.NON_EXISTENT:
            self.machine.pop(tp, None)
        else:
            self.machine[tp] = after
        if before is not after or detail:
            log.info("controller.state_change", topic=tp[0], partition=tp[1],
                     from_state=before.value, to_state=after.value, trigger=event.value,
                     controller_epoch=self.epoch, **detail)

    def _controller_fields(self) -> dict[str, int]:
        return {"controller_id": self.broker_id, "controller_epoch": self.epoch}

    def _partition_entry(self, tp: TopicPartition, state: LeaderIsr) -> dict[str, Any]:
        return {
            "topic": tp[0],
            "partition": tp[1],
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
            "zk_version": state.zk_version,
            "replicas": list(self.replicas(tp)),
        }

    @staticmethod
    def _broker_entry(b: BrokerRegistration) -> dict[str, Any]:
        return {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack,
                "endpoints": [{"listener": name, "host": host, "port": port}
                              for name, host, port in b.listeners]}
