"""Group membership: JoinGroup, Heartbeat and LeaveGroup, the join phase and its rounds, and the
session, rebalance and initial-delay timers.

Seed 001's rebalance: the coordinator "waits for the consumers to send it a JoinGroupRequest",
then "increments the group generation id, assigns consumer ids where required and does the
partition assignment" -- the new generation is written to ``__consumer_offsets`` and the held
JoinGroups are answered once it is. Every move goes through ``Outbox.move``, checked against
``GROUP_MACHINE``.

A group whose members send a protocol type (Kafka's classic protocol, which Kafka's clients
speak) takes two steps instead: the JoinGroups are answered when the join phase ends, the
leader's with every member's metadata, and the generation is written once the leader's SyncGroup
brings the assignments (Kafka's AwaitingSync, our Rebalancing). ``coordinator.protocols`` has
the rules about the protocols themselves.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Iterable
from dataclasses import replace
from typing import Any

import structlog

from coordinator import protocols
from coordinator.answers import (
    append_error_answer,
    error_body,
    join_answer,
    join_error,
    sync_answer,
)
from coordinator.assignors import AssignmentStrategy
from coordinator.config import CoordinatorConfig
from coordinator.effects import RequestContext, TimerKey, TimerKind
from coordinator.group import (
    DeferredLeave,
    DeferredTopicsCheck,
    Group,
    JoinRequest,
    Member,
    Protocols,
    Round,
)
from coordinator.group_state import (
    HEARTBEAT_ANSWER,
    HEARTBEAT_ANSWER_LEADER_ASSIGNS,
    GroupEvent,
    GroupState,
)
from coordinator.loader import OffsetsPartitions
from coordinator.offsets_topic import GroupKey, GroupValue, group_record
from coordinator.outbox import Outbox
from protocol.errors import ErrorCode
from protocol.partitions import TopicPartition

log = structlog.get_logger("odradek.coordinator")

#: JoinGroup v3's rebalance protocols: the member lets go of everything before it rejoins, or
#: keeps fetching what it owns and lets go only of what its answer leaves out
EAGER, INCREMENTAL = "eager", "incremental"

#: partitions of a topic, or None if the topic does not exist (injected by the broker)
TopicPartitionsLookup = Callable[[str], int | None]

_E = ErrorCode
_S = GroupState
_G = GroupEvent


def new_uuid() -> str:
    return str(uuid.uuid4())


class Membership:
    def __init__(
        self,
        config: CoordinatorConfig,
        partitions: OffsetsPartitions,
        outbox: Outbox,
        strategies: dict[str, AssignmentStrategy],
        topic_partitions: TopicPartitionsLookup,
        new_uuid: Callable[[], str] = new_uuid,
    ) -> None:
        self.config = config
        self.strategies = strategies
        self._partitions = partitions
        self._out = outbox
        self._topic_partitions = topic_partitions
        self._new_uuid = new_uuid
        # connection -> groups holding a new member's join, or a member not yet using its id
        self._watched: dict[Hashable, set[str]] = {}

    # ============================================================================== requests

    def join_group(self, body: dict[str, Any], ctx: RequestContext) -> None:
        group_id, member_id = body["group_id"], body["member_id"]
        loader, code = self._partitions.gate(group_id)
        if code is not _E.NONE:
            self._out.respond(ctx.token, join_error(code, member_id))
            return
        refusal = self._refuse_join(body)
        if refusal is not None:
            code, message = refusal
            self._out.respond(ctx.token, join_error(code, member_id, message))
            return
        group = loader.groups.get(group_id)
        if group is None:
            if member_id:  # seed: an unknown consumer id cannot join
                self._out.respond(ctx.token, join_error(_E.UNKNOWN_MEMBER_ID, member_id))
                return
            group = loader.groups[group_id] = Group(group_id, loader.partition,
                                                    state_since_ms=ctx.now_ms)
            self._out.counters["group.created"] += 1
        protocol_type = body.get("protocol_type", "")
        offered = tuple((p["name"], p["metadata"]) for p in body.get("protocols", ()))
        inconsistent = self._inconsistent(group, member_id, protocol_type, offered,
                                          body["assignment_strategy"])
        if inconsistent is not None:
            self._out.respond(ctx.token, join_error(
                _E.INCONSISTENT_GROUP_PROTOCOL, member_id, inconsistent))
            return
        session, rebalance = body["session_timeout_ms"], body["rebalance_timeout_ms"]
        if protocol_type:  # the leader assigns: topics and strategy are not used
            subscription = protocols.subscription_of(protocol_type, offered[0][1])
            strategy = ""
        else:
            subscription = tuple(sorted(set(body["topics"])))
            strategy, offered = body["assignment_strategy"], ()
        join = JoinRequest(
            ctx.token, ctx.connection, member_id, ctx.client_id, ctx.client_host, session,
            rebalance if rebalance > 0 else session, subscription, strategy, protocol_type,
            offered, body.get("group_instance_id"),
            body.get("rebalance_protocol", EAGER) == INCREMENTAL,
            tuple(TopicPartition(t["topic"], p)
                  for t in body.get("owned_partitions", ()) for p in t["partitions"]),
        )
        self._accept_join(group, join, ctx.now_ms)

    def _inconsistent(self, group: Group, member_id: str, protocol_type: str,
                      offered: Protocols, strategy: str) -> str | None:
        """Why a JoinGroup cannot join this group as it is, or None. A group with members
        takes only members of its own kind; one whose leader assigns, only members that leave
        it a protocol every member supports."""
        if group.state is _S.EMPTY:
            return None
        if protocol_type != group.protocol_type:
            return protocols.mixed_kinds_message(group, protocol_type)
        if not protocol_type:
            return None if strategy == group.strategy else f"the group uses {group.strategy!r}"
        if not protocols.fits(group, member_id, offered):
            return (f"none of the protocols {[name for name, _ in offered]} is supported by "
                    f"every member of group {group.group_id!r}")
        return None

    def _refuse_join(self, body: dict[str, Any]) -> tuple[ErrorCode, str] | None:
        """A JoinGroup whose settings this coordinator does not accept, whatever the group."""
        session = body["session_timeout_ms"]
        instance_id = body.get("group_instance_id")
        if instance_id is not None and (not instance_id or body.get("protocol_type", "")):
            return (_E.INVALID_REQUEST,
                    "group_instance_id must be non-empty, in a group the broker assigns")
        rebalance_protocol = body.get("rebalance_protocol", EAGER)
        if rebalance_protocol not in (EAGER, INCREMENTAL) or (
                rebalance_protocol == INCREMENTAL and body.get("protocol_type", "")):
            return (_E.INVALID_REQUEST,
                    f"rebalance_protocol {rebalance_protocol!r} is not {EAGER!r} or "
                    f"{INCREMENTAL!r} ({INCREMENTAL!r} only in a group the broker assigns)")
        low = self.config.group_min_session_timeout_ms
        high = self.config.group_max_session_timeout_ms
        if not low <= session <= high:
            return (_E.INVALID_SESSION_TIMEOUT,
                    f"session_timeout_ms {session} is outside [{low}, {high}]")
        if body.get("protocol_type", ""):
            if not body["protocols"]:
                return (_E.INCONSISTENT_GROUP_PROTOCOL,
                        f"protocol type {body['protocol_type']!r} needs at least one protocol")
            return None
        strategy = body["assignment_strategy"]
        if strategy not in self.strategies:
            return (_E.UNKNOWN_ASSIGNMENT_STRATEGY,
                    f"{strategy!r} is not one of {sorted(self.strategies)}")
        return None

    def _member_group(self, group_id: str) -> Group | ErrorCode:
        """The loaded group a member's request names, or how to answer the request."""
        loader, code = self._partitions.gate(group_id)
        if code is not _E.NONE:
            return code
        return loader.groups.get(group_id, _E.UNKNOWN_MEMBER_ID)

    def heartbeat(self, body: dict[str, Any], ctx: RequestContext) -> None:
        code = self.heartbeat_answer(body["group_id"], body["member_id"], body["generation_id"],
                                     ctx.now_ms)
        self._out.respond(ctx.token, error_body(code))

    def heartbeat_answer(self, group_id: str, member_id: str, generation: int,
                         now_ms: int) -> ErrorCode:
        """A Heartbeat's answer: it is always answered at once."""
        group = self._member_group(group_id)
        if isinstance(group, ErrorCode):
            return group
        member = group.members.get(member_id)
        if member is None:
            if group.fenced(member_id):
                return _E.FENCED_INSTANCE_ID
            return self._slow_member_heartbeat(group, member_id, generation, now_ms)
        group.confirm(member)
        if generation != group.generation:
            return _E.ILLEGAL_GENERATION
        if member.session_deadline_ms is not None:
            self.touch_session(group, member, now_ms)
        if group.leader_assigns:
            return HEARTBEAT_ANSWER_LEADER_ASSIGNS[group.state]
        return HEARTBEAT_ANSWER[group.state]

    def _slow_member_heartbeat(
        self, group: Group, member_id: str, generation: int, now_ms: int
    ) -> ErrorCode:
        slow = group.expired.get(member_id) if group.state is _S.PREPARE_REBALANCE else None
        if slow is None:
            return _E.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return _E.ILLEGAL_GENERATION
        if group.cancellable_by != member_id:
            return _E.REBALANCE_IN_PROGRESS
        # seed: "If the slow consumer sends a HeartbeatRequest before the co-ordinator
        # receives a HeartbeatRequest from any of the rest of the consumers, it cancels the
        # rebalance attempt and sends the HeartbeatResponses with no error code"
        del group.expired[member_id]
        group.members[member_id] = slow
        self._clear_join_timers(group)
        self._out.move(group, _G.SLOW_MEMBER_RETURNED, f"{member_id} heartbeat first", now_ms)
        self.touch_session(group, slow, now_ms)
        return _E.NONE

    def sync_group(self, body: dict[str, Any], ctx: RequestContext) -> None:
        """Kafka's SyncGroup: the leader's assignments are taken and written; every member's
        SyncGroup is answered with its own once they are."""
        group = self._member_group(body["group_id"])
        if isinstance(group, ErrorCode):
            self._out.respond(ctx.token, sync_answer(group))
            return
        member = group.members.get(body["member_id"])
        if member is None:
            self._out.respond(ctx.token, sync_answer(_E.UNKNOWN_MEMBER_ID))
            return
        group.confirm(member)
        if not group.leader_assigns:
            self._out.respond(ctx.token, sync_answer(
                _E.INCONSISTENT_GROUP_PROTOCOL,
                message=f"group {group.group_id!r} is assigned by the broker (protocol type "
                        "''): its members get their partitions in the JoinGroup answer"))
            return
        if body["generation_id"] != group.generation:
            self._out.respond(ctx.token, sync_answer(_E.ILLEGAL_GENERATION))
            return
        if group.state is _S.STEADY:
            self._out.respond(ctx.token, sync_answer(_E.NONE, member.assignment_bytes))
            if member.session_deadline_ms is not None:
                self.touch_session(group, member, ctx.now_ms)
            return
        if group.state is not _S.REBALANCING:
            self._out.respond(ctx.token, sync_answer(_E.REBALANCE_IN_PROGRESS))
            return
        if member.sync is not None:
            self._out.respond(member.sync, sync_answer(
                _E.REBALANCE_IN_PROGRESS, message="superseded by a newer SyncGroup"))
        member.sync = ctx.token
        if group.awaiting_sync and member.member_id == group.leader_id:
            self._take_leader_sync(group, body["assignments"], ctx.now_ms)

    def _take_leader_sync(self, group: Group, sent: list[dict[str, Any]], now_ms: int) -> None:
        """The leader's assignments become the generation's; its record is appended (members
        the leader left out get empty bytes)."""
        by_member = {a["member_id"]: a["assignment"] for a in sent}
        assignment_bytes = {mid: by_member.get(mid, b"") for mid in group.members}
        this_round = Round(
            group.generation,
            {mid: protocols.assignment_of(group.protocol_type, data)
             for mid, data in assignment_bytes.items()},
            frozenset(), assignment_bytes,
        )
        group.round = this_round
        self._out.move(group, _G.LEADER_SYNCED, f"{group.leader_id} assigned", now_ms)
        value = GroupValue(
            this_round.generation, group.strategy, now_ms,
            tuple(group.members[mid].to_value(this_round.assignments[mid],
                                              assignment_bytes[mid])
                  for mid in sorted(group.members)),
            group.protocol_type, group.leader_id,
        )
        self._out.append(
            group.partition, (group_record(GroupKey(group.group_id), value),),
            lambda error, now: self._generation_written(group, this_round, error, now),
        )

    def leave_group(self, body: dict[str, Any], ctx: RequestContext) -> None:
        self._out.respond(ctx.token, error_body(self._leave_answer(body, ctx.now_ms)))

    def _leave_answer(self, body: dict[str, Any], now_ms: int) -> ErrorCode:
        member_id = body["member_id"]
        group = self._member_group(body["group_id"])
        if isinstance(group, ErrorCode):
            return group
        instance_id = body.get("group_instance_id")
        if instance_id is not None:
            return self._static_leave(group, member_id, instance_id, now_ms)
        if group.fenced(member_id):
            return _E.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            if group.state is _S.PREPARE_REBALANCE and member_id in group.expired:
                del group.expired[member_id]
                if group.cancellable_by == member_id:
                    group.cancellable_by = None
                return _E.NONE
            return _E.UNKNOWN_MEMBER_ID
        group.confirm(member)
        self._leave(group, member, "LeaveGroup", now_ms)
        return _E.NONE

    def _static_leave(self, group: Group, member_id: str, instance_id: str,
                      now_ms: int) -> ErrorCode:
        """KIP-345: a static member's own LeaveGroup (on a clean shutdown) keeps it in the
        group -- a restart within its session takes its place with no rebalance, and its
        session timeout starts one if it never comes back. With an empty member id (an
        admin's RemoveMembersFromGroup) the member is removed at once."""
        owner = group.member_of_instance(instance_id)
        if owner is None:
            return _E.UNKNOWN_MEMBER_ID
        if not member_id:
            if owner.member_id in group.expired:
                del group.expired[owner.member_id]
                return _E.NONE
            self._leave(group, owner, f"instance {instance_id} removed", now_ms)
            return _E.NONE
        if owner.member_id != member_id:
            return _E.FENCED_INSTANCE_ID if group.fenced(member_id) else _E.UNKNOWN_MEMBER_ID
        group.confirm(owner)
        log.info("static_member_left", group=group.group_id, member=member_id,
                 instance=instance_id, kept_for_ms=owner.session_timeout_ms)
        return _E.NONE

    # ================================================================= events from the driver

    def on_timer(self, key: TimerKey, now_ms: int) -> None:
        group = self._partitions.loaded_group(key.group_id)
        if group is None:
            return
        if key.kind is TimerKind.SESSION:
            self._session_timer(group, key.member_id, now_ms)
        elif key.kind is TimerKind.REBALANCE:
            self._rebalance_timer(group, now_ms)
        else:
            self._initial_delay_timer(group, now_ms)

    def on_topic_changed(self, topic: str, count: int | None, now_ms: int) -> None:
        for partition in self._partitions.ready():
            for group in list(partition.groups.values()):
                if not group.leader_assigns and topic in group.subscribed_topics():
                    self.check_topics(group, now_ms, f"topic {topic} has {count} partitions")

    def on_disconnect(self, connection: Hashable, now_ms: int) -> None:
        """A new member's join held on the closed connection is dropped, and a member whose
        first JoinGroup answer went to it but who never used its id since is removed: its client
        cannot know its id, so it would otherwise hold partitions until its session expired
        (Kafka's KAFKA-7610 zombies)."""
        for group_id in sorted(self._watched.pop(connection, ())):
            group = self._partitions.loaded_group(group_id)
            if group is None:
                continue
            dropped = [j for j in group.new_joins if j.connection == connection]
            dropped += [
                d for d in group.deferred
                if isinstance(d, JoinRequest) and not d.member_id and d.connection == connection
            ]
            for join in dropped:  # answered all the same: every token gets one answer
                self._out.respond(join.token, join_error(_E.UNKNOWN_MEMBER_ID, "",
                                                         "connection closed"))
            group.new_joins = [j for j in group.new_joins if j not in dropped]
            group.deferred = [d for d in group.deferred if d not in dropped]
            for member in [
                m for m in group.members.values() if m.unconfirmed_connection == connection
            ]:
                self._leave(group, member, "connection closed before the member used its id",
                            now_ms)
            self._maybe_end_join_phase(group, now_ms)

    def loaded(self, groups: Iterable[Group], now_ms: int) -> None:
        """Groups just loaded: members' sessions start now, and a stored assignment that no
        longer matches the topics starts a round."""
        for group in groups:
            for member in group.members.values():
                self.touch_session(group, member, now_ms)
            if group.state is _S.STEADY:
                self.check_topics(group, now_ms, "loaded assignment differs from the topics")

    def unload(self, group: Group, now_ms: int) -> None:
        for join in group.held_joins():
            self._out.respond(join.token, join_error(_E.NOT_COORDINATOR, join.member_id))
        self._answer_syncs(group, _E.NOT_COORDINATOR)
        for member in group.members.values():
            self.pause_session(group, member)
        self._clear_join_timers(group)
        self._out.move(group, _G.UNLOADED, "offsets partition resigned", now_ms)

    # ============================================================================== sessions

    def _session_key(self, group: Group, member_id: str) -> TimerKey:
        return TimerKey(TimerKind.SESSION, group.group_id, member_id)

    def touch_session(self, group: Group, member: Member, now_ms: int) -> None:
        """Start or extend the session. Heartbeats only move the deadline; the armed timer
        catches up when it fires, so a heartbeat costs no timer effect."""
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if member.session_timer_ms is None or member.session_deadline_ms < member.session_timer_ms:
            member.session_timer_ms = member.session_deadline_ms
            self._out.set_timer(self._session_key(group, member.member_id),
                                member.session_timer_ms)

    def pause_session(self, group: Group, member: Member) -> None:
        member.session_deadline_ms = None
        if member.session_timer_ms is not None:
            member.session_timer_ms = None
            self._out.cancel_timer(self._session_key(group, member.member_id))

    def hold_session(self, group: Group | None, member_id: str) -> tuple[Group, Member] | None:
        """A member's commit is held until written (on the ISR, in a cluster): its heartbeats
        wait behind it on its connection, so its session timer pauses meanwhile -- as between
        a JoinGroup and its answer (seed 001: the broker reads one request per connection at a
        time). Else a follower that died, kept in the ISR until the controller notices, would
        get live members of groups whose coordinator is fine expelled."""
        member = None if group is None or not member_id else group.members.get(member_id)
        if group is None or member is None:
            return None
        member.commits_held += 1
        self.pause_session(group, member)
        return group, member

    def release_session(self, group: Group, member: Member, now_ms: int) -> None:
        """The held commit is answered: the session restarts, unless the member is gone or its
        JoinGroup is held (the round's answer restarts it)."""
        member.commits_held -= 1
        if (member.commits_held == 0 and member.join is None and self._partitions.is_live(group)
                and group.members.get(member.member_id) is member):
            self.touch_session(group, member, now_ms)

    def _clear_join_timers(self, group: Group) -> None:
        if group.rebalance_deadline_ms is not None:
            group.rebalance_deadline_ms = None
            self._out.cancel_timer(TimerKey(TimerKind.REBALANCE, group.group_id))
        if group.initial_delay_until_ms is not None:
            group.initial_delay_until_ms = None
            self._out.cancel_timer(TimerKey(TimerKind.INITIAL_DELAY, group.group_id))

    def _session_timer(self, group: Group, member_id: str, now_ms: int) -> None:
        member = group.members.get(member_id)
        if member is None or member.session_timer_ms is None:
            return
        member.session_timer_ms = None
        deadline = member.session_deadline_ms
        if deadline is None:
            return
        if deadline > now_ms:  # heartbeats moved it on
            member.session_timer_ms = deadline
            self._out.set_timer(self._session_key(group, member_id), deadline)
            return
        member.session_deadline_ms = None
        if group.state is _S.REBALANCING:  # only when the leader assigns: sessions run there
            reason = f"{member_id} silent for {member.session_timeout_ms} ms"
            if group.awaiting_sync:  # it may still rejoin with its id in the next join phase
                self._answer_syncs(group, _E.REBALANCE_IN_PROGRESS)
                del group.members[member_id]
                group.expired[member_id] = member
                self._restart_before_sync(group, reason, now_ms)
            else:
                self._leave(group, member, reason, now_ms)
            return
        del group.members[member_id]
        group.expired[member_id] = member
        was_steady = group.state is _S.STEADY
        self._out.move(group, _G.SESSION_EXPIRED,
                       f"{member_id} silent for {member.session_timeout_ms} ms", now_ms)
        if was_steady:
            self._begin_join_phase(group, now_ms, first_round=False)
            group.cancellable_by = member_id
        self._maybe_end_join_phase(group, now_ms)

    def _rebalance_timer(self, group: Group, now_ms: int) -> None:
        deadline = group.rebalance_deadline_ms
        if group.state is not _S.PREPARE_REBALANCE or deadline is None:
            return
        group.initial_delay_until_ms = None
        self._end_join_phase(group, now_ms, "rebalance timeout")

    def _initial_delay_timer(self, group: Group, now_ms: int) -> None:
        until = group.initial_delay_until_ms
        if group.state is not _S.PREPARE_REBALANCE or until is None:
            return
        if until > now_ms:  # a later member extended the wait
            self._out.set_timer(TimerKey(TimerKind.INITIAL_DELAY, group.group_id), until)
            return
        group.initial_delay_until_ms = None
        self._maybe_end_join_phase(group, now_ms)

    # ============================================================================ join phase

    def _begin_join_phase(self, group: Group, now_ms: int, *, first_round: bool) -> None:
        timeouts = [m.rebalance_timeout_ms for m in group.members.values()]
        timeouts += [j.rebalance_timeout_ms for j in group.new_joins]
        group.rebalance_deadline_ms = now_ms + max(timeouts, default=0)
        self._out.set_timer(TimerKey(TimerKind.REBALANCE, group.group_id),
                            group.rebalance_deadline_ms)
        delay = self.config.group_initial_rebalance_delay_ms
        if first_round and delay > 0:
            group.initial_delay_until_ms = min(now_ms + delay, group.rebalance_deadline_ms)
            self._out.set_timer(
                TimerKey(TimerKind.INITIAL_DELAY, group.group_id), group.initial_delay_until_ms
            )

    def _maybe_end_join_phase(self, group: Group, now_ms: int) -> None:
        if group.state is not _S.PREPARE_REBALANCE or group.initial_delay_until_ms is not None:
            return
        if all(m.join is not None for m in group.members.values()):
            self._end_join_phase(group, now_ms, "every member has joined")

    def _end_join_phase(self, group: Group, now_ms: int, reason: str) -> None:
        self._clear_join_timers(group)
        for member in [m for m in group.members.values() if m.join is None]:
            del group.members[member.member_id]
            self.pause_session(group, member)
            log.info("member_dropped", group=group.group_id, member=member.member_id,
                     reason="did not rejoin in time")
        group.expired.clear()
        if not group.members and not group.new_joins:
            # no generation to bump: nobody would hold it, and the generation in memory stays
            # the one in the log whether or not this write lands
            self._out.move(group, _G.JOIN_PHASE_ENDED_EMPTY, reason, now_ms)
            value = GroupValue(group.generation, group.strategy, now_ms, (),
                               group.protocol_type, "")
            self._out.append(group.partition, (group_record(GroupKey(group.group_id), value),),
                             self._out.log_failure("empty group record"))
            return
        if group.leader_assigns:
            self._hand_out_generation(group, reason, now_ms)
            return
        this_round = self._assign(group)
        group.round = this_round
        self._out.move(group, _G.JOIN_PHASE_ENDED, reason, now_ms)
        value = GroupValue(
            this_round.generation, group.strategy, now_ms,
            tuple(group.members[mid].to_value(this_round.assignments[mid])
                  for mid in sorted(group.members)),
        )
        self._out.append(
            group.partition, (group_record(GroupKey(group.group_id), value),),
            lambda error, now: self._generation_written(group, this_round, error, now),
        )

    def _assign(self, group: Group) -> Round:
        """New members get their ids; the group's strategy assigns the next generation.

        Revoke, then assign (KIP-848's rule): a partition an incremental member still holds
        is withheld from a new owner until the holder has rejoined without it, so no
        partition ever has two owners while the ones that stay put never stop."""
        new_ids = []
        for join in group.new_joins:
            member_id = f"{group.group_id}-{self._new_uuid()}"
            group.members[member_id] = Member.from_join(member_id, join)
            new_ids.append(member_id)
        group.new_joins = []
        subscriptions = {mid: m.subscription for mid, m in group.members.items()}
        targets = self.strategies[group.strategy].assign(
            subscriptions,
            self._partition_counts(group.subscribed_topics()),
            {mid: m.assignment if m.target is None else m.target
             for mid, m in group.members.items()},
        )
        holder = {tp: mid for mid, m in group.members.items() if m.join is not None
                  for tp in m.join.holds()}
        assignments = {
            mid: tuple(tp for tp in target if holder.get(tp, mid) == mid)
            for mid, target in targets.items()
        }
        return Round(group.generation + 1, assignments, frozenset(new_ids), targets=targets)

    def _generation_written(
        self, group: Group, this_round: Round, error: ErrorCode, now_ms: int
    ) -> None:
        if not self._partitions.is_live(group) or group.round is not this_round:
            return
        group.round = None
        if error is ErrorCode.NONE:
            group.generation = this_round.generation
            self._out.move(group, _G.GENERATION_WRITTEN, f"generation {group.generation}",
                           now_ms)
            for member in group.members.values():
                member.assignment = this_round.assignments[member.member_id]
                member.target = this_round.targets.get(member.member_id)
                if group.leader_assigns:
                    member.assignment_bytes = this_round.assignment_bytes[member.member_id]
                if member.sync is not None:
                    self._out.respond(member.sync, sync_answer(_E.NONE, member.assignment_bytes))
                    member.sync = None
                if member.join is not None:
                    self._out.respond(member.join.token, join_answer(group, member))
                    member.join = None
                self.touch_session(group, member, now_ms)
        else:
            self._round_failed(group, this_round, error, now_ms)
        self._replay_deferred(group, now_ms)
        if error is ErrorCode.NONE and group.state is _S.STEADY and this_round.withheld:
            self._out.move(group, _G.PARTITIONS_WITHHELD,
                           f"generation {group.generation} waits for revocations", now_ms)
            self._begin_join_phase(group, now_ms, first_round=False)
        self._maybe_end_join_phase(group, now_ms)

    def _round_failed(self, group: Group, this_round: Round, error: ErrorCode,
                      now_ms: int) -> None:
        """The generation was not written: its JoinGroups get the append's error, new members
        are forgotten (their clients never learned their ids), and the round starts over."""
        answer = append_error_answer(error)
        self._out.move(group, _G.GENERATION_WRITE_FAILED, f"write failed: {error.name}", now_ms)
        self._answer_syncs(group, answer)
        for member in list(group.members.values()):
            is_new = member.member_id in this_round.new_member_ids
            if member.join is not None:
                self._out.respond(member.join.token,
                                  join_error(answer, "" if is_new else member.member_id))
                member.join = None
            if is_new:
                del group.members[member.member_id]
            else:
                self.touch_session(group, member, now_ms)
        self._begin_join_phase(group, now_ms, first_round=False)

    def _replay_deferred(self, group: Group, now_ms: int) -> None:
        deferred, group.deferred = group.deferred, []
        for item in deferred:
            if isinstance(item, JoinRequest):
                self._accept_join(group, item, now_ms)
            elif isinstance(item, DeferredLeave):
                member = group.members.get(item.member_id)
                if member is not None:
                    self._leave(group, member, "deferred leave", now_ms)
            else:
                self.check_topics(group, now_ms, "deferred topic change")

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        counts = {}
        for topic in topics:
            count = self._topic_partitions(topic)
            if count:
                counts[topic] = count
        return counts

    def check_topics(self, group: Group, now_ms: int, reason: str) -> None:
        if group.leader_assigns:  # its clients watch the metadata and rejoin themselves
            return
        if group.state is _S.PREPARE_REBALANCE:
            self._out.move(group, _G.TOPICS_CHANGED, reason, now_ms)
        elif group.state in (_S.STEADY, _S.REBALANCING) and group.assignment_outdated(
            self._partition_counts(group.subscribed_topics())
        ):
            if group.state is _S.REBALANCING:
                group.deferred.append(DeferredTopicsCheck())
                self._out.move(group, _G.TOPICS_CHANGED, reason + " (deferred)", now_ms)
            else:
                self._out.move(group, _G.TOPICS_CHANGED, reason, now_ms)
                self._begin_join_phase(group, now_ms, first_round=False)

    # ========================================================================= member changes

    def _watch(self, connection: Hashable | None, group: Group) -> None:
        if connection is not None:
            self._watched.setdefault(connection, set()).add(group.group_id)

    def _accept_join(self, group: Group, join: JoinRequest, now_ms: int) -> None:
        """A JoinGroup that passed validation (or a deferred one, replayed)."""
        if join.instance_id is not None and self._static_join(group, join, now_ms):
            return
        state = group.state
        member = None
        if join.member_id:
            member = group.members.get(join.member_id)
            if member is None and state is _S.PREPARE_REBALANCE:
                member = group.expired.pop(join.member_id, None)  # seed: Slow consumers
                if member is not None:
                    group.members[member.member_id] = member
            if member is None:
                self._out.respond(join.token, join_error(_E.UNKNOWN_MEMBER_ID, join.member_id))
                return
            group.confirm(member)
        if state is _S.EMPTY:
            group.strategy = join.strategy
            group.protocol_type, group.leader_id = join.protocol_type, ""
            group.new_joins.append(join)
            self._watch(join.connection, group)
            self._out.move(group, _G.MEMBER_JOINED, "first member", now_ms)
            self._begin_join_phase(group, now_ms, first_round=True)
            self._maybe_end_join_phase(group, now_ms)
        elif group.awaiting_sync:
            self._join_before_sync(group, member, join, now_ms)
        elif state is _S.REBALANCING:
            self._join_while_written(group, member, join, now_ms)
        elif member is None:
            self._new_member_joins(group, join, now_ms)
        else:
            self._member_rejoins(group, member, join, now_ms)

    def _static_join(self, group: Group, join: JoinRequest, now_ms: int) -> bool:
        """KIP-345's rules for a JoinGroup with an instance id; False when the ordinary rules
        apply (a new static member, or the current one rejoining with its id)."""
        assert join.instance_id is not None
        owner = group.member_of_instance(join.instance_id)
        if join.member_id:
            if group.fenced(join.member_id) or (
                    owner is not None and owner.member_id != join.member_id):
                self._out.respond(join.token, join_error(
                    _E.FENCED_INSTANCE_ID, join.member_id,
                    f"instance {join.instance_id!r} of group {group.group_id!r} is held by a "
                    "newer member"))
                return True
            return False
        if owner is None:
            return False
        if group.state is _S.REBALANCING:  # after the round being written
            self._join_while_written(group, None, join, now_ms)
            return True
        member = self._replace_static(group, owner, join)
        if group.state is _S.STEADY and not member.changed_by(join):
            self._static_member_returns(group, member, join, now_ms)
        else:
            self._member_rejoins(group, member, join, now_ms)
        return True

    def _replace_static(self, group: Group, owner: Member, join: JoinRequest) -> Member:
        """The restarted static member takes a new id, fencing the old one, and keeps the old
        one's place: its assignment, subscription and timeouts."""
        assert join.instance_id is not None
        if owner.join is not None:
            self._out.respond(owner.join.token, join_error(
                _E.FENCED_INSTANCE_ID, owner.member_id, "a newer member took the instance id"))
        self.pause_session(group, owner)
        group.members.pop(owner.member_id, None)
        group.expired.pop(owner.member_id, None)
        if group.cancellable_by == owner.member_id:
            group.cancellable_by = None
        member_id = f"{group.group_id}-{self._new_uuid()}"
        member = replace(owner, member_id=member_id, client_id=join.client_id,
                         client_host=join.client_host, join=None, session_deadline_ms=None,
                         session_timer_ms=None, unconfirmed_connection=join.connection,
                         commits_held=0)
        group.members[member_id] = member
        group.replaced[join.instance_id] = owner.member_id
        self._watch(join.connection, group)
        log.info("static_member_replaced", group=group.group_id, instance=join.instance_id,
                 old=owner.member_id, new=member_id)
        return member

    def _static_member_returns(self, group: Group, member: Member, join: JoinRequest,
                               now_ms: int) -> None:
        """Steady, unchanged: no rebalance. The group record is written with the member's new
        id (the same generation), and the JoinGroup answered with its assignment once it is."""
        member.join = join
        self._out.move(group, _G.STATIC_MEMBER_RETURNED,
                       f"instance {join.instance_id} is {member.member_id}", now_ms)
        value = GroupValue(
            group.generation, group.strategy, now_ms,
            tuple(m.to_value(m.assignment) for _, m in sorted(group.members.items())),
        )

        def written(error: ErrorCode, now: int) -> None:
            if member.join is not join or group.members.get(member.member_id) is not member:
                return  # a round or a newer restart took the join over
            member.join = None
            if error is _E.NONE:
                self._out.respond(join.token, join_answer(group, member))
                self.touch_session(group, member, now)
            else:  # it rejoins; the replacement stands (the record is written again then)
                self._out.respond(join.token, join_error(append_error_answer(error), ""))
                self.touch_session(group, member, now)

        self._out.append(group.partition, (group_record(GroupKey(group.group_id), value),),
                         written)

    def _join_while_written(self, group: Group, member: Member | None, join: JoinRequest,
                            now_ms: int) -> None:
        """A round is being written: an unchanged member's retry waits for it; anything that
        would change it is deferred to a round that starts right after."""
        if member is not None and not member.changed_by(join):
            self._hold_join(member, join)
            self._out.move(group, _G.MEMBER_REJOINED, f"{member.member_id} retried", now_ms)
            return
        if member is not None:
            self._hold_join(member, None)
        else:
            self._watch(join.connection, group)
        group.deferred.append(join)
        self._out.move(group, _G.MEMBER_JOINED, "deferred to the next round", now_ms)

    def _new_member_joins(self, group: Group, join: JoinRequest, now_ms: int) -> None:
        was_steady = group.state is _S.STEADY
        group.new_joins.append(join)
        self._watch(join.connection, group)
        self._out.move(group, _G.MEMBER_JOINED, "new member", now_ms)
        if group.initial_delay_until_ms is not None and group.rebalance_deadline_ms:
            group.initial_delay_until_ms = min(
                now_ms + self.config.group_initial_rebalance_delay_ms,
                group.rebalance_deadline_ms,
            )
        if was_steady:
            self._begin_join_phase(group, now_ms, first_round=False)
        self._maybe_end_join_phase(group, now_ms)

    def _member_rejoins(self, group: Group, member: Member, join: JoinRequest,
                        now_ms: int) -> None:
        was_steady = group.state is _S.STEADY
        # Kafka's rule: a Steady group's leader rejoins when it sees the topics change (these
        # groups start no round on topic changes themselves), so its JoinGroup starts one
        changed = member.changed_by(join) or (
            was_steady and group.leader_assigns and member.member_id == group.leader_id)
        if was_steady and not changed:
            self._out.move(group, _G.MEMBER_REJOINED, "subscription unchanged", now_ms)
            self._out.respond(join.token, join_answer(group, member))
            self.touch_session(group, member, now_ms)
            return
        member.take_join(join)
        self._hold_join(member, join)
        self.pause_session(group, member)
        if changed:
            self._out.move(group, _G.MEMBER_JOINED, f"{member.member_id} changed", now_ms)
        else:
            self._out.move(group, _G.MEMBER_REJOINED, f"{member.member_id} rejoined", now_ms)
        if was_steady:
            self._begin_join_phase(group, now_ms, first_round=False)
        self._maybe_end_join_phase(group, now_ms)

    def _hold_join(self, member: Member, join: JoinRequest | None) -> None:
        """Hold ``join`` for the member; a join it replaces is answered at once."""
        if member.join is not None:
            self._out.respond(member.join.token,
                              join_error(_E.REBALANCE_IN_PROGRESS, member.member_id,
                                         "superseded by a newer JoinGroup"))
        member.join = join

    def _leave(self, group: Group, member: Member, reason: str, now_ms: int) -> None:
        """Remove a member (LeaveGroup, or a zombie); deferred while a round is written."""
        if group.awaiting_sync:
            self._answer_syncs(group, _E.REBALANCE_IN_PROGRESS)
            del group.members[member.member_id]
            self.pause_session(group, member)
            self._restart_before_sync(group, f"{member.member_id}: {reason}", now_ms)
            return
        if group.state is _S.REBALANCING:
            group.deferred.append(DeferredLeave(member.member_id))
            self._out.move(group, _G.MEMBER_LEFT, reason + " (deferred)", now_ms)
            return
        del group.members[member.member_id]
        self.pause_session(group, member)
        if member.join is not None:
            self._out.respond(member.join.token,
                              join_error(_E.UNKNOWN_MEMBER_ID, member.member_id))
            member.join = None
        was_steady = group.state is _S.STEADY
        self._out.move(group, _G.MEMBER_LEFT, f"{member.member_id}: {reason}", now_ms)
        if was_steady:
            self._begin_join_phase(group, now_ms, first_round=False)
        self._maybe_end_join_phase(group, now_ms)

    # ============================================================== when the leader assigns

    def _answer_syncs(self, group: Group, code: ErrorCode) -> None:
        for member in group.held_syncs():
            assert member.sync is not None
            self._out.respond(member.sync, sync_answer(code))
            member.sync = None

    def _restart_before_sync(self, group: Group, reason: str, now_ms: int,
                             event: GroupEvent = _G.MEMBER_LEFT_BEFORE_SYNC) -> None:
        """A join or a leave before the leader's SyncGroup: the generation is abandoned and a
        new join phase starts (held SyncGroups are answered by the caller)."""
        self._out.move(group, event, reason, now_ms)
        self._begin_join_phase(group, now_ms, first_round=False)
        self._maybe_end_join_phase(group, now_ms)

    def _join_before_sync(self, group: Group, member: Member | None, join: JoinRequest,
                          now_ms: int) -> None:
        """Kafka's AwaitingSync: an unchanged member gets this generation's answer again; a
        new or changed one starts the round over."""
        if member is not None and not member.changed_by(join):
            self._out.move(group, _G.MEMBER_REJOINED, f"{member.member_id} rejoined", now_ms)
            self._out.respond(join.token, join_answer(group, member))
            self.touch_session(group, member, now_ms)
            return
        self._answer_syncs(group, _E.REBALANCE_IN_PROGRESS)
        if member is None:
            group.new_joins.append(join)
            self._watch(join.connection, group)
            reason = "new member"
        else:
            member.take_join(join)
            self._hold_join(member, join)
            self.pause_session(group, member)
            reason = f"{member.member_id} changed"
        self._restart_before_sync(group, reason, now_ms, _G.MEMBER_JOINED_BEFORE_SYNC)

    def _hand_out_generation(self, group: Group, reason: str, now_ms: int) -> None:
        """The join phase of a group whose leader assigns ends: generation + 1 with its leader
        and protocol, and every held JoinGroup answered at once; nothing is written until the
        leader's SyncGroup."""
        for join in group.new_joins:
            member_id = f"{group.group_id}-{self._new_uuid()}"
            group.members[member_id] = Member.from_join(member_id, join)
        group.new_joins = []
        group.leader_id = protocols.choose_leader(group)
        group.strategy = protocols.choose_protocol(group.members, group.leader_id)
        for member in group.members.values():
            member.metadata = protocols.metadata_for(member.protocols, group.strategy)
            member.subscription = protocols.subscription_of(group.protocol_type, member.metadata)
        group.generation += 1
        self._out.move(group, _G.JOIN_PHASE_ENDED, reason, now_ms)
        for member in group.members.values():
            if member.join is not None:
                self._out.respond(member.join.token, join_answer(group, member))
                member.join = None
            self.touch_session(group, member, now_ms)
