"""One consumer group in memory: its members, held joins, round in progress and offsets.

Mostly data, with the rules that read or change nothing but the group itself: its moves are
checked against ``coordinator.group_state.GROUP_MACHINE`` here; membership rounds live in
``coordinator.membership`` and offsets in ``coordinator.offsets``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from coordinator.assignors import Assignment
from coordinator.group_state import GROUP_MACHINE, GroupEvent, GroupState
from coordinator.offsets_topic import MemberValue, OffsetValue
from protocol.partitions import TopicPartition

Protocols = tuple[tuple[str, bytes], ...]


@dataclass(slots=True)
class JoinRequest:
    """A JoinGroup the coordinator holds until its round ends (``member_id`` empty if new)."""

    token: Hashable
    connection: Hashable | None
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    subscription: tuple[str, ...]
    strategy: str
    #: "" for the broker's assignment; else Kafka's classic protocol (the leader assigns)
    protocol_type: str = ""
    #: the protocols the member supports, preferred first, with its metadata for each
    protocols: Protocols = ()
    #: KIP-345: a static member's name across restarts; None for a dynamic member
    instance_id: str | None = None
    #: an incremental member keeps fetching while it rejoins: ``owned`` is what it still holds
    incremental: bool = False
    owned: Assignment = ()

    def holds(self) -> Assignment:
        """What the member may still be fetching: an eager member let go of everything
        before it rejoined."""
        return self.owned if self.incremental else ()


@dataclass(frozen=True, slots=True)
class DeferredLeave:
    """A leave that arrived while a round was being written: applied right after it."""

    member_id: str


@dataclass(frozen=True, slots=True)
class DeferredTopicsCheck:
    """A topic change that arrived while a round was being written: rechecked right after it."""


Deferred = JoinRequest | DeferredLeave | DeferredTopicsCheck


@dataclass(slots=True)
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    subscription: tuple[str, ...]
    assignment: Assignment = ()
    #: the JoinGroup held for the current round, if the member has sent one
    join: JoinRequest | None = None
    #: when the member's session ends; None while paused (between JoinGroup and its response)
    session_deadline_ms: int | None = None
    #: the deadline the driver's session timer is armed for (heartbeats move the deadline only;
    #: the timer catches up when it fires), None when no timer is armed
    session_timer_ms: int | None = None
    #: the connection its first JoinGroup came on, until the member uses its id (zombie guard)
    unconfirmed_connection: Hashable | None = None
    #: its commits held until written; its session timer is paused while there are any
    commits_held: int = 0
    #: groups whose leader assigns: the protocols it supports, its metadata for the chosen
    #: one, the assignment the leader sent, and its SyncGroup held until that is written
    protocols: Protocols = ()
    metadata: bytes = b""
    assignment_bytes: bytes = b""
    sync: Hashable | None = None
    #: KIP-345: a static member's name across restarts; None for a dynamic member
    instance_id: str | None = None
    #: what the strategy last meant the member to own; ``assignment`` lags behind it while
    #: other members revoke (incremental rounds). Kept in memory only: the next round's
    #: strategy starts from it, so a follow-up round does not move the target again
    target: Assignment | None = None

    @classmethod
    def from_join(cls, member_id: str, join: JoinRequest) -> Member:
        return cls(
            member_id, join.client_id, join.client_host, join.session_timeout_ms,
            join.rebalance_timeout_ms, join.subscription, join=join,
            unconfirmed_connection=join.connection, protocols=join.protocols,
            instance_id=join.instance_id,
        )

    @classmethod
    def from_value(cls, value: MemberValue) -> Member:
        return cls(
            value.member_id, value.client_id, value.client_host, value.session_timeout_ms,
            value.rebalance_timeout_ms, value.subscription, value.assignment,
            protocols=value.protocols, metadata=value.metadata,
            assignment_bytes=value.assignment_bytes, instance_id=value.instance_id,
        )

    def to_value(self, assignment: Assignment, assignment_bytes: bytes = b"") -> MemberValue:
        return MemberValue(
            self.member_id, self.client_id, self.client_host, self.session_timeout_ms,
            self.rebalance_timeout_ms, self.subscription, assignment, self.metadata,
            assignment_bytes, self.protocols, self.instance_id,
        )

    def changed_by(self, join: JoinRequest) -> bool:
        """Whether this JoinGroup changes what the group record holds about the member's
        subscription and timeouts -- which takes a round."""
        return (
            self.subscription != join.subscription
            or self.protocols != join.protocols
            or self.session_timeout_ms != join.session_timeout_ms
            or self.rebalance_timeout_ms != join.rebalance_timeout_ms
        )

    def take_join(self, join: JoinRequest) -> None:
        """What the group record holds about a member changes only through a round: the
        JoinGroup that starts it brings the new values."""
        self.client_id, self.client_host = join.client_id, join.client_host
        self.session_timeout_ms = join.session_timeout_ms
        self.rebalance_timeout_ms = join.rebalance_timeout_ms
        self.subscription = join.subscription
        self.protocols = join.protocols


@dataclass(slots=True)
class Round:
    """A generation being written (state Rebalancing). In a group whose leader assigns, the
    leader's SyncGroup starts it: ``assignment_bytes`` is what the leader sent, and
    ``assignments`` those bytes decoded (for describe and metrics)."""

    generation: int
    assignments: dict[str, Assignment]
    new_member_ids: frozenset[str]
    assignment_bytes: dict[str, bytes] = field(default_factory=dict)
    #: what the strategy meant each member to own; partitions of it missing from
    #: ``assignments`` are still held by members that must revoke them first
    targets: dict[str, Assignment] = field(default_factory=dict)

    @property
    def withheld(self) -> bool:
        """Whether some partition waits for its owner to revoke it (incremental rounds): the
        next round starts as soon as this one is written."""
        return any(len(self.assignments[mid]) != len(target)
                   for mid, target in self.targets.items())


@dataclass(slots=True)
class Group:
    group_id: str
    partition: int
    state: GroupState = GroupState.EMPTY
    #: the last generation written to __consumer_offsets
    generation: int = 0
    #: the assignment strategy; in a group whose leader assigns, the chosen protocol
    strategy: str = ""
    #: "" when the broker assigns; else the members' protocol type (Kafka's classic protocol)
    protocol_type: str = ""
    #: the member that assigns, in a group whose leader assigns
    leader_id: str = ""
    state_since_ms: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    #: JoinGroups with an empty member id held for the current round, in arrival order
    new_joins: list[JoinRequest] = field(default_factory=list)
    #: members whose session expired in this join phase: they may still rejoin with their id
    expired: dict[str, Member] = field(default_factory=dict)
    #: the member whose expiry alone started this round while nobody else has reacted
    cancellable_by: str | None = None
    rebalance_deadline_ms: int | None = None
    initial_delay_until_ms: int | None = None
    round: Round | None = None
    deferred: list[Deferred] = field(default_factory=list)
    offsets: dict[TopicPartition, OffsetValue] = field(default_factory=dict)
    #: KIP-345: per instance id, the member id a restart of that static member replaced --
    #: requests still naming it are answered FENCED_INSTANCE_ID (one per instance: bounded)
    replaced: dict[str, str] = field(default_factory=dict)

    @property
    def leader_assigns(self) -> bool:
        """Kafka's classic protocol: the leader assigns and sends it with SyncGroup."""
        return bool(self.protocol_type)

    @property
    def awaiting_sync(self) -> bool:
        """Kafka's AwaitingSync: a generation whose JoinGroups are answered, waiting for the
        leader's SyncGroup (nothing is being written yet)."""
        return self.state is GroupState.REBALANCING and self.leader_assigns and self.round is None

    def held_syncs(self) -> list[Member]:
        return [m for m in self.members.values() if m.sync is not None]

    def subscribed_topics(self) -> set[str]:
        topics = {t for m in self.members.values() for t in m.subscription}
        topics.update(t for j in self.new_joins for t in j.subscription)
        return topics

    def move(self, event: GroupEvent, now_ms: int) -> GroupState:
        """Take ``event`` through the table (``IllegalTransition`` if it lists no such move);
        returns the state before."""
        old = self.state
        self.state = GROUP_MACHINE.next_state(old, event)
        if old is GroupState.PREPARE_REBALANCE and event is not GroupEvent.SLOW_MEMBER_RETURNED:
            self.cancellable_by = None  # anything else happening means someone has reacted
        if self.state is not old:
            self.state_since_ms = now_ms
        return old

    def confirm(self, member: Member) -> None:
        """The member sent a request with its id: it knows it, and it has reacted."""
        member.unconfirmed_connection = None
        if self.cancellable_by not in (None, member.member_id):
            self.cancellable_by = None

    def member_or_slow(self, member_id: str) -> Member | None:
        """A member, or one whose session expired in this join phase (it may still rejoin or
        commit with its id: seed 001's slow consumers)."""
        member = self.members.get(member_id)
        if member is None and self.state is GroupState.PREPARE_REBALANCE:
            member = self.expired.get(member_id)
        return member

    def member_of_instance(self, instance_id: str) -> Member | None:
        """The static member holding ``instance_id`` (also one whose session expired in this
        join phase), if any."""
        for member in (*self.members.values(), *self.expired.values()):
            if member.instance_id == instance_id:
                return member
        return None

    def fenced(self, member_id: str) -> bool:
        """Whether ``member_id`` is a static member's id that a restart replaced."""
        return member_id in self.replaced.values()

    def held_joins(self) -> list[JoinRequest]:
        """Every JoinGroup the group holds an answer for."""
        held = [m.join for m in self.members.values() if m.join is not None]
        held += self.new_joins
        held += [d for d in self.deferred if isinstance(d, JoinRequest)]
        return held

    def assignment_outdated(self, partition_counts: dict[str, int]) -> bool:
        """Whether what members own (or will own) differs from every partition of the
        subscribed topics, counted as ``partition_counts`` says."""
        owned: dict[str, set[int]] = {}
        for assignment in self.current_assignments().values():
            for tp in assignment:
                owned.setdefault(tp.topic, set()).add(tp.partition)
        return any(
            owned.get(topic, set()) != set(range(partition_counts.get(topic, 0)))
            for topic in self.subscribed_topics() | set(owned)
        )

    def current_assignments(self) -> dict[str, Assignment]:
        """What members own now, or will own once the round being written is."""
        if self.round is not None:
            return self.round.assignments
        return {mid: m.assignment for mid, m in self.members.items()}
