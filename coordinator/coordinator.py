"""The group coordinator: group APIs, rounds, timers and ``__consumer_offsets`` records.

Deterministic and sans-IO: every entry point takes the time as an argument and returns the
effects (responses, appends, timers) for the driver to carry out; see ``coordinator/__init__``
for the contract. Moves of the group and loader machines go through their tables, so an
unlisted move raises ``IllegalTransition``; every state change is logged and counted.
"""

from __future__ import annotations

import functools
import uuid
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import structlog

from coordinator.assignors import BUILTIN_STRATEGIES, Assignment, AssignmentStrategy, TopicPartition
from coordinator.config import CoordinatorConfig
from coordinator.effects import (
    AppendRecords,
    CancelTimer,
    Effect,
    RequestContext,
    Respond,
    SetTimer,
    TimerKey,
    TimerKind,
)
from coordinator.group import (
    DeferredLeave,
    DeferredTopicsCheck,
    Group,
    JoinRequest,
    Member,
    Round,
)
from coordinator.group_state import (
    COMMIT_ANSWER,
    GROUP_MACHINE,
    HEARTBEAT_ANSWER,
    GroupEvent,
    GroupState,
)
from coordinator.loader import OffsetsPartition
from coordinator.loader_state import LOADER_MACHINE, REQUEST_ANSWER, LoaderEvent, LoaderState
from coordinator.offsets_topic import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    Record,
    group_record,
    offset_record,
    offsets_partition_for,
)
from coordinator.statemachine import IllegalTransition
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

log = structlog.get_logger("odradek.coordinator")

#: partitions of a topic, or None if the topic does not exist (injected by the broker)
TopicPartitionsLookup = Callable[[str], int | None]

_E = ErrorCode
_S = GroupState
_G = GroupEvent

#: how a failed append to __consumer_offsets is reported to the client (Kafka's mapping)
APPEND_ERROR_ANSWER: dict[ErrorCode, ErrorCode] = {
    _E.NOT_LEADER_FOR_PARTITION: _E.NOT_COORDINATOR,
    _E.NOT_COORDINATOR: _E.NOT_COORDINATOR,
    _E.UNKNOWN_TOPIC_OR_PARTITION: _E.COORDINATOR_NOT_AVAILABLE,
    _E.LEADER_NOT_AVAILABLE: _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_ENOUGH_REPLICAS: _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: _E.COORDINATOR_NOT_AVAILABLE,
    _E.REQUEST_TIMED_OUT: _E.COORDINATOR_NOT_AVAILABLE,
    _E.COORDINATOR_NOT_AVAILABLE: _E.COORDINATOR_NOT_AVAILABLE,
    _E.COORDINATOR_LOAD_IN_PROGRESS: _E.COORDINATOR_LOAD_IN_PROGRESS,
    _E.MESSAGE_TOO_LARGE: _E.INVALID_COMMIT_OFFSET_SIZE,
    _E.RECORD_LIST_TOO_LARGE: _E.INVALID_COMMIT_OFFSET_SIZE,
}


def append_error_answer(error: ErrorCode) -> ErrorCode:
    return APPEND_ERROR_ANSWER.get(error, _E.UNKNOWN_SERVER_ERROR)


def _new_uuid() -> str:
    return str(uuid.uuid4())


@dataclass(slots=True)
class _PendingAppend:
    partition: int
    on_done: Callable[[ErrorCode, int], None]


def assignment_body(assignment: Assignment) -> list[dict[str, Any]]:
    """An assignment as the wire's ``[{topic, partitions}]``, topics and partitions sorted."""
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())]


def _join_error(code: ErrorCode, member_id: str, message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": int(code), "error_message": message, "generation_id": -1,
        "member_id": member_id, "assignment_strategy": "", "partitions_to_own": [],
    }


def _changes_member(member: Member, join: JoinRequest) -> bool:
    """Whether a known member's JoinGroup changes what the group record holds about the
    member's subscription and timeouts -- which takes a round."""
    return (
        member.subscription != join.subscription
        or member.session_timeout_ms != join.session_timeout_ms
        or member.rebalance_timeout_ms != join.rebalance_timeout_ms
    )


def _error_body(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"error_code": int(code), "error_message": message}


class GroupCoordinator:
    """Every consumer group whose ``__consumer_offsets`` partition this broker leads."""

    HANDLED_APIS: ClassVar[frozenset[ApiKey]] = frozenset({
        ApiKey.JOIN_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH, ApiKey.LIST_GROUPS, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS,
        ApiKey.OFFSET_DELETE,
    })

    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        topic_partitions: TopicPartitionsLookup = lambda topic: None,
        *,
        strategies: Iterable[AssignmentStrategy] = BUILTIN_STRATEGIES,
        new_uuid: Callable[[], str] = _new_uuid,
    ) -> None:
        self.config = config = config or CoordinatorConfig()
        known = {s.name: s for s in strategies}
        unknown = [n for n in config.partition_assignment_strategies if n not in known]
        if unknown:
            raise ValueError(f"partition_assignment_strategies names unknown strategies {unknown}")
        self._strategies = {n: known[n] for n in config.partition_assignment_strategies}
        self._topic_partitions = topic_partitions
        self._new_uuid = new_uuid
        self._partitions = {
            p: OffsetsPartition(p) for p in range(config.offsets_topic_partitions)
        }
        self._appends: dict[int, _PendingAppend] = {}
        self._next_append_id = 0
        # connection -> groups holding a new member's join, or a member not yet using its id
        self._watched: dict[Hashable, set[str]] = {}
        self._out: list[Effect] = []
        #: state changes and events by name, e.g. "group.Steady->PrepareRebalance"
        self.counters: Counter[str] = Counter()
        #: called with (group, from, to, now_ms) on every group state change (the broker's
        #: metrics time rebalances with it)
        self.transition_listeners: list[
            Callable[[Group, GroupState, GroupState, int], None]
        ] = []
        self._handlers: dict[ApiKey, Callable[[dict[str, Any], RequestContext], None]] = {
            ApiKey.JOIN_GROUP: self._join_group,
            ApiKey.HEARTBEAT: self._heartbeat,
            ApiKey.LEAVE_GROUP: self._leave_group,
            ApiKey.OFFSET_COMMIT: self._offset_commit,
            ApiKey.OFFSET_FETCH: self._offset_fetch,
            ApiKey.LIST_GROUPS: self._list_groups,
            ApiKey.DESCRIBE_GROUPS: self._describe_groups,
            ApiKey.DELETE_GROUPS: self._delete_groups,
            ApiKey.OFFSET_DELETE: self._offset_delete,
        }

    # ======================================================================= driver entry points

    def handle(self, api_key: ApiKey, body: dict[str, Any], ctx: RequestContext) -> list[Effect]:
        """A validated request body of one of ``HANDLED_APIS``."""
        handler = self._handlers.get(api_key)
        if handler is None:
            raise ValueError(f"{api_key!r} is not a group API (FindCoordinator is the driver's)")
        handler(body, ctx)
        return self._flush()

    def on_append_done(self, append_id: int, error: ErrorCode, now_ms: int) -> list[Effect]:
        """An ``AppendRecords`` finished. Appends of a resigned partition are already settled."""
        pending = self._appends.pop(append_id, None)
        if pending is not None:
            pending.on_done(ErrorCode(error), now_ms)
        return self._flush()

    def on_timer(self, key: TimerKey, now_ms: int) -> list[Effect]:
        """A timer set by ``SetTimer`` is due. Stale keys are ignored."""
        if key.kind is TimerKind.OFFSETS_EXPIRY:
            partition = self._partitions.get(key.partition)
            if partition is not None and partition.state is LoaderState.READY:
                self._expire_offsets(partition, now_ms)
            return self._flush()
        group = self._loaded_group(key.group_id)
        if group is not None:
            if key.kind is TimerKind.SESSION:
                self._session_timer(group, key.member_id, now_ms)
            elif key.kind is TimerKind.REBALANCE:
                self._rebalance_timer(group, now_ms)
            else:
                self._initial_delay_timer(group, now_ms)
        return self._flush()

    def on_topic_partitions_changed(
        self, topic: str, count: int | None, now_ms: int
    ) -> list[Effect]:
        """A topic was created, gained partitions or was deleted (``count`` None or 0). The
        injected lookup must already give the new count."""
        for partition in self._partitions.values():
            if partition.state is not LoaderState.READY:
                continue
            for group in list(partition.groups.values()):
                if topic in group.subscribed_topics():
                    self._check_topics(group, now_ms, f"topic {topic} has {count} partitions")
        return self._flush()

    def on_disconnect(self, connection: Hashable, now_ms: int) -> list[Effect]:
        """A client connection closed. A new member's join held on it is dropped, and a member
        whose first JoinGroup answer went to it but who never used its id since is removed: its
        client cannot know its id, so it would otherwise hold partitions until its session
        expired (Kafka's KAFKA-7610 zombies)."""
        for group_id in sorted(self._watched.pop(connection, ())):
            group = self._loaded_group(group_id)
            if group is None:
                continue
            dropped = [j for j in group.new_joins if j.connection == connection]
            dropped += [
                d for d in group.deferred
                if isinstance(d, JoinRequest) and not d.member_id and d.connection == connection
            ]
            for join in dropped:  # answered all the same: every token gets one answer
                self._respond(join.token, _join_error(_E.UNKNOWN_MEMBER_ID, "",
                                                      "connection closed"))
            group.new_joins = [j for j in group.new_joins if j not in dropped]
            group.deferred = [d for d in group.deferred if d not in dropped]
            for member in [
                m for m in group.members.values() if m.unconfirmed_connection == connection
            ]:
                self._leave(group, member, "connection closed before the member used its id",
                            now_ms)
            self._maybe_end_join_phase(group, now_ms)
        return self._flush()

    # -------------------------------------------------------------------------------- loading

    def start_loading(self, partition: int) -> list[Effect]:
        """This broker now leads ``partition``: Down -> Catch-up."""
        self._move_loader(self._partitions[partition], LoaderEvent.BECAME_LEADER)
        return self._flush()

    def load_records(self, partition: int, records: Iterable[Record]) -> None:
        """Feed the partition's records, in log order, in as many batches as convenient."""
        loader = self._partitions[partition]
        if loader.state is not LoaderState.CATCH_UP:
            raise IllegalTransition(f"load_records on partition {partition} in {loader.state}")
        loader.read(records)

    def finish_loading(self, partition: int, now_ms: int) -> list[Effect]:
        """Every record is read: Catch-up -> Ready. Members' session timers start now."""
        loader = self._partitions[partition]
        self._move_loader(loader, LoaderEvent.LOAD_FINISHED)
        loader.groups = loader.build_groups(now_ms)
        for group_id in sorted(loader.groups):
            group = loader.groups[group_id]
            self.counters["group.loaded"] += 1
            log.info("group_loaded", group=group_id, generation=group.generation,
                     state=group.state.value, members=len(group.members))
            for member in group.members.values():
                self._touch_session(group, member, now_ms)
            if group.state is _S.STEADY:
                self._check_topics(group, now_ms, "loaded assignment differs from the topics")
        self._set_timer(
            TimerKey(TimerKind.OFFSETS_EXPIRY, partition=partition),
            now_ms + self.config.offsets_retention_check_interval_ms,
        )
        return self._flush()

    def become_leader(
        self, partition: int, records: Iterable[Record], now_ms: int
    ) -> list[Effect]:
        """``start_loading``, ``load_records`` and ``finish_loading`` in one call."""
        self._move_loader(self._partitions[partition], LoaderEvent.BECAME_LEADER)
        self.load_records(partition, records)
        return self.finish_loading(partition, now_ms)

    def resign(self, partition: int, now_ms: int) -> list[Effect]:
        """This broker no longer leads ``partition``: its groups are unloaded, held requests get
        NOT_COORDINATOR, and appends still in flight are settled as failed."""
        loader = self._partitions[partition]
        was_ready = loader.state is LoaderState.READY
        self._move_loader(loader, LoaderEvent.RESIGNED)
        groups, loader.groups = loader.groups, {}
        loader.discard_read()
        for group_id in sorted(groups):
            self._unload(groups[group_id], now_ms)
        if was_ready:
            self._cancel_timer(TimerKey(TimerKind.OFFSETS_EXPIRY, partition=partition))
        for append_id in sorted(self._appends):
            if self._appends[append_id].partition == partition:
                self._appends.pop(append_id).on_done(ErrorCode.NOT_COORDINATOR, now_ms)
        return self._flush()

    # -------------------------------------------------------------------------------- queries

    def partition_for(self, group_id: str) -> int:
        return offsets_partition_for(group_id, self.config.offsets_topic_partitions)

    def partition_state(self, partition: int) -> LoaderState:
        return self._partitions[partition].state

    def group(self, group_id: str) -> Group | None:
        """The loaded group, for inspection (tests, metrics); never modify it."""
        return self._loaded_group(group_id)

    def groups(self) -> list[Group]:
        return [
            g for p in self._partitions.values() if p.state is LoaderState.READY
            for g in p.groups.values()
        ]

    # ======================================================================== effects plumbing

    def _flush(self) -> list[Effect]:
        out, self._out = self._out, []
        return out

    def _respond(self, token: Hashable, body: dict[str, Any]) -> None:
        self._out.append(Respond(token, body))

    def _set_timer(self, key: TimerKey, deadline_ms: int) -> None:
        self._out.append(SetTimer(key, deadline_ms))

    def _cancel_timer(self, key: TimerKey) -> None:
        self._out.append(CancelTimer(key))

    def _append(
        self, partition: int, records: tuple[Record, ...],
        on_done: Callable[[ErrorCode, int], None],
    ) -> None:
        self._next_append_id += 1
        self._appends[self._next_append_id] = _PendingAppend(partition, on_done)
        self._out.append(AppendRecords(self._next_append_id, partition, records))

    @staticmethod
    def _log_failure(what: str) -> Callable[[ErrorCode, int], None]:
        def on_done(error: ErrorCode, now_ms: int) -> None:
            if error is not ErrorCode.NONE:
                log.warning("offsets_append_failed", what=what, error=error.name)

        return on_done

    # ============================================================================ state moves

    def _move(self, group: Group, event: GroupEvent, reason: str, now_ms: int) -> None:
        old = group.state
        new = GROUP_MACHINE.next_state(old, event)
        group.state = new
        if old is _S.PREPARE_REBALANCE and event is not _G.SLOW_MEMBER_RETURNED:
            group.cancellable_by = None  # anything else happening means someone has reacted
        self.counters[f"group.{event.name.lower()}"] += 1
        if new is not old:
            group.state_since_ms = now_ms
            self.counters[f"group.{old.value}->{new.value}"] += 1
            log.info("group_transition", group=group.group_id, generation=group.generation,
                     reason=reason, **{"from": old.value, "to": new.value})
            for listener in self.transition_listeners:
                listener(group, old, new, now_ms)

    def _move_loader(self, loader: OffsetsPartition, event: LoaderEvent) -> None:
        old = loader.state
        loader.state = LOADER_MACHINE.next_state(old, event)
        self.counters[f"loader.{old.value}->{loader.state.value}"] += 1
        log.info("offsets_partition_transition", partition=loader.partition,
                 **{"from": old.value, "to": loader.state.value})

    # ================================================================================ lookups

    def _gate(self, group_id: str) -> tuple[OffsetsPartition, ErrorCode]:
        """The group's offsets partition and how its state answers (NONE: go ahead)."""
        loader = self._partitions[self.partition_for(group_id)]
        if not group_id:
            return loader, ErrorCode.INVALID_GROUP_ID
        return loader, REQUEST_ANSWER[loader.state]

    def _loaded_group(self, group_id: str) -> Group | None:
        loader = self._partitions[self.partition_for(group_id)]
        if loader.state is not LoaderState.READY:
            return None
        return loader.groups.get(group_id)

    def _is_live(self, group: Group) -> bool:
        return self._loaded_group(group.group_id) is group

    def _watch(self, connection: Hashable | None, group: Group) -> None:
        if connection is not None:
            self._watched.setdefault(connection, set()).add(group.group_id)

    # ================================================================================ timers

    def _session_key(self, group: Group, member_id: str) -> TimerKey:
        return TimerKey(TimerKind.SESSION, group.group_id, member_id)

    def _touch_session(self, group: Group, member: Member, now_ms: int) -> None:
        """Start or extend the session. Heartbeats only move the deadline; the armed timer
        catches up when it fires, so a heartbeat costs no timer effect."""
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if member.session_timer_ms is None or member.session_deadline_ms < member.session_timer_ms:
            member.session_timer_ms = member.session_deadline_ms
            self._set_timer(self._session_key(group, member.member_id), member.session_timer_ms)

    def _pause_session(self, group: Group, member: Member) -> None:
        member.session_deadline_ms = None
        if member.session_timer_ms is not None:
            member.session_timer_ms = None
            self._cancel_timer(self._session_key(group, member.member_id))

    def _clear_join_timers(self, group: Group) -> None:
        if group.rebalance_deadline_ms is not None:
            group.rebalance_deadline_ms = None
            self._cancel_timer(TimerKey(TimerKind.REBALANCE, group.group_id))
        if group.initial_delay_until_ms is not None:
            group.initial_delay_until_ms = None
            self._cancel_timer(TimerKey(TimerKind.INITIAL_DELAY, group.group_id))

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
            self._set_timer(self._session_key(group, member_id), deadline)
            return
        member.session_deadline_ms = None
        del group.members[member_id]
        group.expired[member_id] = member
        was_steady = group.state is _S.STEADY
        self._move(group, _G.SESSION_EXPIRED,
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
            self._set_timer(TimerKey(TimerKind.INITIAL_DELAY, group.group_id), until)
            return
        group.initial_delay_until_ms = None
        self._maybe_end_join_phase(group, now_ms)

    # ============================================================================ join phase

    def _begin_join_phase(self, group: Group, now_ms: int, *, first_round: bool) -> None:
        timeouts = [m.rebalance_timeout_ms for m in group.members.values()]
        timeouts += [j.rebalance_timeout_ms for j in group.new_joins]
        group.rebalance_deadline_ms = now_ms + max(timeouts, default=0)
        self._set_timer(TimerKey(TimerKind.REBALANCE, group.group_id), group.rebalance_deadline_ms)
        delay = self.config.group_initial_rebalance_delay_ms
        if first_round and delay > 0:
            group.initial_delay_until_ms = min(now_ms + delay, group.rebalance_deadline_ms)
            self._set_timer(
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
            self._pause_session(group, member)
            log.info("member_dropped", group=group.group_id, member=member.member_id,
                     reason="did not rejoin in time")
        group.expired.clear()
        if not group.members and not group.new_joins:
            # no generation to bump: nobody would hold it, and the generation in memory stays
            # the one in the log whether or not this write lands
            self._move(group, _G.JOIN_PHASE_ENDED_EMPTY, reason, now_ms)
            value = GroupValue(group.generation, group.strategy, now_ms, ())
            self._append(group.partition, (group_record(GroupKey(group.group_id), value),),
                         self._log_failure("empty group record"))
            return
        new_ids = []
        for join in group.new_joins:
            member_id = f"{group.group_id}-{self._new_uuid()}"
            group.members[member_id] = Member.from_join(member_id, join)
            new_ids.append(member_id)
        group.new_joins = []
        subscriptions = {mid: m.subscription for mid, m in group.members.items()}
        assignments = self._strategies[group.strategy].assign(
            subscriptions,
            self._partition_counts(group.subscribed_topics()),
            {mid: m.assignment for mid, m in group.members.items()},
        )
        this_round = Round(group.generation + 1, assignments, frozenset(new_ids))
        group.round = this_round
        self._move(group, _G.JOIN_PHASE_ENDED, reason, now_ms)
        value = GroupValue(
            this_round.generation, group.strategy, now_ms,
            tuple(group.members[mid].to_value(assignments[mid]) for mid in sorted(group.members)),
        )
        self._append(
            group.partition, (group_record(GroupKey(group.group_id), value),),
            lambda error, now: self._generation_written(group, this_round, error, now),
        )

    def _generation_written(
        self, group: Group, this_round: Round, error: ErrorCode, now_ms: int
    ) -> None:
        if not self._is_live(group) or group.round is not this_round:
            return
        group.round = None
        if error is ErrorCode.NONE:
            group.generation = this_round.generation
            self._move(group, _G.GENERATION_WRITTEN, f"generation {group.generation}", now_ms)
            for member in group.members.values():
                member.assignment = this_round.assignments[member.member_id]
                if member.join is not None:
                    self._respond(member.join.token, self._join_answer(group, member))
                    member.join = None
                self._touch_session(group, member, now_ms)
        else:
            answer = append_error_answer(error)
            self._move(group, _G.GENERATION_WRITE_FAILED, f"write failed: {error.name}", now_ms)
            for member in list(group.members.values()):
                is_new = member.member_id in this_round.new_member_ids
                if member.join is not None:
                    self._respond(member.join.token,
                                  _join_error(answer, "" if is_new else member.member_id))
                    member.join = None
                if is_new:  # its client never learned the id
                    del group.members[member.member_id]
                else:
                    self._touch_session(group, member, now_ms)
            self._begin_join_phase(group, now_ms, first_round=False)
        self._replay_deferred(group, now_ms)
        self._maybe_end_join_phase(group, now_ms)

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
                self._check_topics(group, now_ms, "deferred topic change")

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        counts = {}
        for topic in topics:
            count = self._topic_partitions(topic)
            if count:
                counts[topic] = count
        return counts

    def _assignment_outdated(self, group: Group) -> bool:
        owned: dict[str, set[int]] = {}
        for assignment in group.current_assignments().values():
            for tp in assignment:
                owned.setdefault(tp.topic, set()).add(tp.partition)
        counts = self._partition_counts(group.subscribed_topics())
        return any(
            owned.get(topic, set()) != set(range(counts.get(topic, 0)))
            for topic in group.subscribed_topics() | set(owned)
        )

    def _check_topics(self, group: Group, now_ms: int, reason: str) -> None:
        if group.state is _S.PREPARE_REBALANCE:
            self._move(group, _G.TOPICS_CHANGED, reason, now_ms)
        elif group.state in (_S.STEADY, _S.REBALANCING) and self._assignment_outdated(group):
            if group.state is _S.REBALANCING:
                group.deferred.append(DeferredTopicsCheck())
                self._move(group, _G.TOPICS_CHANGED, reason + " (deferred)", now_ms)
            else:
                self._move(group, _G.TOPICS_CHANGED, reason, now_ms)
                self._begin_join_phase(group, now_ms, first_round=False)

    # ========================================================================== group changes

    def _confirm(self, group: Group, member: Member) -> None:
        """The member sent a request with its id: it knows it, and it has reacted."""
        member.unconfirmed_connection = None
        if group.cancellable_by not in (None, member.member_id):
            group.cancellable_by = None

    def _accept_join(self, group: Group, join: JoinRequest, now_ms: int) -> None:
        """A JoinGroup that passed validation (or a deferred one, replayed)."""
        state = group.state
        member = None
        if join.member_id:
            member = group.members.get(join.member_id)
            if member is None and state is _S.PREPARE_REBALANCE:
                member = group.expired.pop(join.member_id, None)  # seed: Slow consumers
                if member is not None:
                    group.members[member.member_id] = member
            if member is None:
                self._respond(join.token, _join_error(_E.UNKNOWN_MEMBER_ID, join.member_id))
                return
            self._confirm(group, member)
        if state is _S.EMPTY:
            group.strategy = join.strategy
            group.new_joins.append(join)
            self._watch(join.connection, group)
            self._move(group, _G.MEMBER_JOINED, "first member", now_ms)
            self._begin_join_phase(group, now_ms, first_round=True)
            self._maybe_end_join_phase(group, now_ms)
            return
        if state is _S.REBALANCING:
            if member is not None and not _changes_member(member, join):
                self._hold_join(member, join)
                self._move(group, _G.MEMBER_REJOINED, f"{member.member_id} retried", now_ms)
            else:
                if member is not None:
                    self._hold_join(member, None)
                else:
                    self._watch(join.connection, group)
                group.deferred.append(join)
                self._move(group, _G.MEMBER_JOINED, "deferred to the next round", now_ms)
            return
        if member is None:
            group.new_joins.append(join)
            self._watch(join.connection, group)
            self._move(group, _G.MEMBER_JOINED, "new member", now_ms)
            if group.initial_delay_until_ms is not None and group.rebalance_deadline_ms:
                group.initial_delay_until_ms = min(
                    now_ms + self.config.group_initial_rebalance_delay_ms,
                    group.rebalance_deadline_ms,
                )
        else:
            changed = _changes_member(member, join)
            if state is _S.STEADY and not changed:
                self._move(group, _G.MEMBER_REJOINED, "subscription unchanged", now_ms)
                self._respond(join.token, self._join_answer(group, member))
                self._touch_session(group, member, now_ms)
                return
            # what the group record holds about a member changes only through a round
            member.client_id, member.client_host = join.client_id, join.client_host
            member.session_timeout_ms = join.session_timeout_ms
            member.rebalance_timeout_ms = join.rebalance_timeout_ms
            member.subscription = join.subscription
            self._hold_join(member, join)
            self._pause_session(group, member)
            if changed:
                self._move(group, _G.MEMBER_JOINED, f"{member.member_id} changed", now_ms)
            else:
                self._move(group, _G.MEMBER_REJOINED, f"{member.member_id} rejoined", now_ms)
        if state is _S.STEADY:
            self._begin_join_phase(group, now_ms, first_round=False)
        self._maybe_end_join_phase(group, now_ms)

    def _hold_join(self, member: Member, join: JoinRequest | None) -> None:
        """Hold ``join`` for the member; a join it replaces is answered at once."""
        if member.join is not None:
            self._respond(member.join.token,
                          _join_error(_E.REBALANCE_IN_PROGRESS, member.member_id,
                                      "superseded by a newer JoinGroup"))
        member.join = join

    def _join_answer(self, group: Group, member: Member) -> dict[str, Any]:
        return {
            "error_code": 0, "error_message": None, "generation_id": group.generation,
            "member_id": member.member_id, "assignment_strategy": group.strategy,
            "partitions_to_own": assignment_body(member.assignment),
        }

    def _leave(self, group: Group, member: Member, reason: str, now_ms: int) -> None:
        """Remove a member (LeaveGroup, or a zombie); deferred while a round is written."""
        if group.state is _S.REBALANCING:
            group.deferred.append(DeferredLeave(member.member_id))
            self._move(group, _G.MEMBER_LEFT, reason + " (deferred)", now_ms)
            return
        del group.members[member.member_id]
        self._pause_session(group, member)
        if member.join is not None:
            self._respond(member.join.token, _join_error(_E.UNKNOWN_MEMBER_ID, member.member_id))
            member.join = None
        was_steady = group.state is _S.STEADY
        self._move(group, _G.MEMBER_LEFT, f"{member.member_id}: {reason}", now_ms)
        if was_steady:
            self._begin_join_phase(group, now_ms, first_round=False)
        self._maybe_end_join_phase(group, now_ms)

    def _unload(self, group: Group, now_ms: int) -> None:
        held = [m.join for m in group.members.values() if m.join is not None]
        held += group.new_joins
        held += [d for d in group.deferred if isinstance(d, JoinRequest)]
        for join in held:
            self._respond(join.token, _join_error(_E.NOT_COORDINATOR, join.member_id))
        for member in group.members.values():
            self._pause_session(group, member)
        self._clear_join_timers(group)
        self._move(group, _G.UNLOADED, "offsets partition resigned", now_ms)

    # ============================================================================== JoinGroup

    def _join_group(self, body: dict[str, Any], ctx: RequestContext) -> None:
        group_id, member_id = body["group_id"], body["member_id"]
        loader, code = self._gate(group_id)
        if code is not _E.NONE:
            self._respond(ctx.token, _join_error(code, member_id))
            return
        session = body["session_timeout_ms"]
        low = self.config.group_min_session_timeout_ms
        high = self.config.group_max_session_timeout_ms
        if not low <= session <= high:
            self._respond(ctx.token, _join_error(
                _E.INVALID_SESSION_TIMEOUT, member_id,
                f"session_timeout_ms {session} is outside [{low}, {high}]"))
            return
        strategy = body["assignment_strategy"]
        if strategy not in self._strategies:
            self._respond(ctx.token, _join_error(
                _E.UNKNOWN_ASSIGNMENT_STRATEGY, member_id,
                f"{strategy!r} is not one of {sorted(self._strategies)}"))
            return
        group = loader.groups.get(group_id)
        if group is None:
            if member_id:  # seed: an unknown consumer id cannot join
                self._respond(ctx.token, _join_error(_E.UNKNOWN_MEMBER_ID, member_id))
                return
            group = loader.groups[group_id] = Group(group_id, loader.partition,
                                                    state_since_ms=ctx.now_ms)
            self.counters["group.created"] += 1
        if group.state is not _S.EMPTY and strategy != group.strategy:
            self._respond(ctx.token, _join_error(
                _E.INCONSISTENT_GROUP_PROTOCOL, member_id,
                f"the group uses {group.strategy!r}"))
            return
        rebalance = body["rebalance_timeout_ms"]
        join = JoinRequest(
            ctx.token, ctx.connection, member_id, ctx.client_id, ctx.client_host, session,
            rebalance if rebalance > 0 else session,
            tuple(sorted(set(body["topics"]))), strategy,
        )
        self._accept_join(group, join, ctx.now_ms)

    # ============================================================================== Heartbeat

    def _heartbeat(self, body: dict[str, Any], ctx: RequestContext) -> None:
        self._respond(ctx.token, _error_body(self._heartbeat_answer(body, ctx.now_ms)))

    def _heartbeat_answer(self, body: dict[str, Any], now_ms: int) -> ErrorCode:
        group_id, member_id, generation = body["group_id"], body["member_id"], body["generation_id"]
        loader, code = self._gate(group_id)
        if code is not _E.NONE:
            return code
        group = loader.groups.get(group_id)
        if group is None:
            return _E.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
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
            self._move(group, _G.SLOW_MEMBER_RETURNED, f"{member_id} heartbeat first", now_ms)
            self._touch_session(group, slow, now_ms)
            return _E.NONE
        self._confirm(group, member)
        if generation != group.generation:
            return _E.ILLEGAL_GENERATION
        if member.session_deadline_ms is not None:
            self._touch_session(group, member, now_ms)
        return HEARTBEAT_ANSWER[group.state]

    # ============================================================================= LeaveGroup

    def _leave_group(self, body: dict[str, Any], ctx: RequestContext) -> None:
        self._respond(ctx.token, _error_body(self._leave_answer(body, ctx.now_ms)))

    def _leave_answer(self, body: dict[str, Any], now_ms: int) -> ErrorCode:
        group_id, member_id = body["group_id"], body["member_id"]
        loader, code = self._gate(group_id)
        if code is not _E.NONE:
            return code
        group = loader.groups.get(group_id)
        if group is None:
            return _E.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            if group.state is _S.PREPARE_REBALANCE and member_id in group.expired:
                del group.expired[member_id]
                if group.cancellable_by == member_id:
                    group.cancellable_by = None
                return _E.NONE
            return _E.UNKNOWN_MEMBER_ID
        self._confirm(group, member)
        self._leave(group, member, "LeaveGroup", now_ms)
        return _E.NONE

    # =========================================================================== OffsetCommit

    def _offset_commit(self, body: dict[str, Any], ctx: RequestContext) -> None:
        now = ctx.now_ms
        requested = [
            (TopicPartition(t["name"], p["partition"]), p)
            for t in body["topics"] for p in t["partitions"]
        ]
        code = self._commit_answer(body, now)
        if code is not _E.NONE or not requested:
            self._respond(ctx.token, self._commit_body(body, lambda tp: code))
            return
        group_id = body["group_id"]
        loader = self._partitions[self.partition_for(group_id)]
        errors: dict[TopicPartition, ErrorCode] = {}
        writes: dict[TopicPartition, OffsetValue] = {}
        limit = self.config.offset_metadata_max_bytes
        for tp, p in requested:
            metadata = p["metadata"]
            if metadata is not None and len(metadata.encode("utf-8")) > limit:
                errors[tp] = _E.OFFSET_METADATA_TOO_LARGE
            else:
                stamp = p["commit_timestamp"]
                writes[tp] = OffsetValue(p["offset"], metadata, stamp if stamp >= 0 else now)
        if not writes:
            self._respond(ctx.token, self._commit_body(body, lambda tp: errors[tp]))
            return
        records = tuple(
            offset_record(OffsetKey(group_id, tp.topic, tp.partition), value)
            for tp, value in writes.items()
        )
        holder = self._hold_session(loader.groups.get(group_id), body["member_id"])

        def written(error: ErrorCode, now_ms: int) -> None:
            if holder is not None:
                self._release_session(*holder, now_ms)
            if error is _E.NONE:
                group = loader.groups.get(group_id)
                if group is None:  # deleted or expired meanwhile: the log has these offsets now
                    group = loader.groups[group_id] = Group(group_id, loader.partition)
                group.offsets.update(writes)
                self.counters["offsets.committed"] += len(writes)
            else:
                answer = append_error_answer(error)
                errors.update((tp, answer) for tp in writes)
            self._respond(ctx.token, self._commit_body(body, lambda tp: errors.get(tp, _E.NONE)))

        self._append(loader.partition, records, written)

    def _hold_session(self, group: Group | None, member_id: str
                      ) -> tuple[Group, Member] | None:
        """A member's commit is held until written (on the ISR, in a cluster): its heartbeats
        wait behind it on its connection, so its session timer pauses meanwhile -- as between
        a JoinGroup and its answer (seed 001: the broker reads one request per connection at a
        time). Else a follower that died, kept in the ISR until the controller notices, would
        get live members of groups whose coordinator is fine expelled."""
        member = None if group is None or not member_id else group.members.get(member_id)
        if group is None or member is None:
            return None
        member.commits_held += 1
        self._pause_session(group, member)
        return group, member

    def _release_session(self, group: Group, member: Member, now_ms: int) -> None:
        """The held commit is answered: the session restarts, unless the member is gone or its
        JoinGroup is held (the round's answer restarts it)."""
        member.commits_held -= 1
        if (member.commits_held == 0 and member.join is None and self._is_live(group)
                and group.members.get(member.member_id) is member):
            self._touch_session(group, member, now_ms)

    def _commit_answer(self, body: dict[str, Any], now_ms: int) -> ErrorCode:
        """Whether this commit may be written, by the group's state and the member's generation."""
        group_id, member_id, generation = body["group_id"], body["member_id"], body["generation_id"]
        loader, code = self._gate(group_id)
        if code is not _E.NONE:
            return code
        manual = generation < 0 and not member_id
        group = loader.groups.get(group_id)
        if group is None:
            if not manual:
                return _E.UNKNOWN_MEMBER_ID
            loader.groups[group_id] = Group(group_id, loader.partition)
            self.counters["group.created"] += 1
            return _E.NONE
        if manual:  # manual assignment: only while the group has no members
            return _E.NONE if group.state is _S.EMPTY else _E.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None and group.state is _S.PREPARE_REBALANCE:
            member = group.expired.get(member_id)
        if member is None:
            return _E.UNKNOWN_MEMBER_ID
        self._confirm(group, member)
        if generation != group.generation:
            if generation > group.generation:
                # seed: "rejects it if the generation id in the request is higher than the
                # generation id on the co-ordinator. This indicates a bug in the consumer code."
                log.warning("offset_commit_generation_ahead", group=group_id, member=member_id,
                            generation=generation, current=group.generation)
            return _E.ILLEGAL_GENERATION
        answer = COMMIT_ANSWER[group.state]
        if answer is _E.NONE and member.session_deadline_ms is not None:
            self._touch_session(group, member, now_ms)  # a commit keeps the member alive too
        return answer

    @staticmethod
    def _commit_body(
        body: dict[str, Any], error_of: Callable[[TopicPartition], ErrorCode]
    ) -> dict[str, Any]:
        return {"topics": [
            {"name": t["name"], "partitions": [
                {"partition": p["partition"],
                 "error_code": int(error_of(TopicPartition(t["name"], p["partition"])))}
                for p in t["partitions"]
            ]}
            for t in body["topics"]
        ]}

    # ============================================================================ OffsetFetch

    def _offset_fetch(self, body: dict[str, Any], ctx: RequestContext) -> None:
        group_id = body["group_id"]
        loader, code = self._gate(group_id)
        if code is not _E.NONE:
            self._respond(ctx.token, {"error_code": int(code), "topics": []})
            return
        group = loader.groups.get(group_id)
        offsets: Mapping[TopicPartition, OffsetValue] = group.offsets if group else {}
        wanted: dict[str, list[int]] = {}
        if body["topics"] is None:
            for tp in sorted(offsets):
                wanted.setdefault(tp.topic, []).append(tp.partition)
        else:
            for t in body["topics"]:
                wanted.setdefault(t["name"], []).extend(t["partitions"])

        def result(topic: str, partition: int) -> dict[str, Any]:
            value = offsets.get(TopicPartition(topic, partition))
            return {
                "partition": partition, "error_code": 0,
                "offset": -1 if value is None else value.offset,
                "metadata": None if value is None else value.metadata,
            }

        self._respond(ctx.token, {"error_code": 0, "topics": [
            {"name": topic, "partitions": [result(topic, p) for p in partitions]}
            for topic, partitions in wanted.items()
        ]})

    # ================================================================ ListGroups / Describe

    def _list_groups(self, body: dict[str, Any], ctx: RequestContext) -> None:
        loading = any(p.state is LoaderState.CATCH_UP for p in self._partitions.values())
        listed = sorted((g.group_id, g.state.value) for g in self.groups())
        self._respond(ctx.token, {
            "error_code": int(_E.COORDINATOR_LOAD_IN_PROGRESS if loading else _E.NONE),
            "groups": [{"group_id": gid, "state": state} for gid, state in listed],
        })

    def _describe_groups(self, body: dict[str, Any], ctx: RequestContext) -> None:
        self._respond(ctx.token, {"groups": [self._describe(gid) for gid in body["group_ids"]]})

    def _describe(self, group_id: str) -> dict[str, Any]:
        loader, code = self._gate(group_id)
        group = loader.groups.get(group_id) if code is _E.NONE else None
        if group is None:
            return {
                "error_code": int(code if code is not _E.NONE else _E.GROUP_ID_NOT_FOUND),
                "group_id": group_id, "state": _S.DEAD.value, "state_since_ms": -1,
                "assignment_strategy": "", "generation_id": -1, "members": [],
            }
        return {
            "error_code": 0, "group_id": group_id, "state": group.state.value,
            # 0: a group made by a manual-assignment commit, which has no state change to date
            "state_since_ms": group.state_since_ms if group.state_since_ms > 0 else -1,
            "assignment_strategy": group.strategy, "generation_id": group.generation,
            "members": [
                {
                    "member_id": m.member_id, "client_id": m.client_id,
                    "client_host": m.client_host, "session_timeout_ms": m.session_timeout_ms,
                    "subscription": list(m.subscription),
                    "assignment": assignment_body(m.assignment),
                }
                for _, m in sorted(group.members.items())
            ],
        }

    # ========================================================================== DeleteGroups

    def _delete_groups(self, body: dict[str, Any], ctx: RequestContext) -> None:
        now = ctx.now_ms
        rows: list[dict[str, Any]] = []
        tombstones: dict[int, list[tuple[int, list[Record]]]] = {}
        for group_id in body["group_ids"]:
            rows.append({"group_id": group_id, "error_code": 0})
            loader, code = self._gate(group_id)
            group = loader.groups.get(group_id) if code is _E.NONE else None
            if code is _E.NONE and group is None:
                code = _E.GROUP_ID_NOT_FOUND
            elif group is not None and group.state is not _S.EMPTY:
                code = _E.NON_EMPTY_GROUP
            if code is not _E.NONE or group is None:
                rows[-1]["error_code"] = int(code)
                continue
            records = [group_record(GroupKey(group_id), None)]
            records += [
                offset_record(OffsetKey(group_id, tp.topic, tp.partition), None)
                for tp in sorted(group.offsets)
            ]
            del loader.groups[group_id]
            self._move(group, _G.DELETED, "DeleteGroups", now)
            tombstones.setdefault(loader.partition, []).append((len(rows) - 1, records))
        outstanding = len(tombstones)
        if not outstanding:
            self._respond(ctx.token, {"results": rows})
            return

        def written(indexes: list[int], error: ErrorCode, now_ms: int) -> None:
            nonlocal outstanding
            if error is not _E.NONE:
                for i in indexes:
                    rows[i]["error_code"] = int(append_error_answer(error))
            outstanding -= 1
            if outstanding == 0:
                self._respond(ctx.token, {"results": rows})

        for partition, entries in sorted(tombstones.items()):
            self._append(
                partition, tuple(r for _, records in entries for r in records),
                functools.partial(written, [i for i, _ in entries]),
            )

    # ========================================================================== OffsetDelete

    def _offset_delete(self, body: dict[str, Any], ctx: RequestContext) -> None:
        """Kafka's rules (KIP-496): the group must exist; while it has members, the offsets of
        topics they subscribe to stay (GROUP_SUBSCRIBED_TO_TOPIC) -- the members would resume
        from them, or reset, at their next rebalance. The others' tombstones are answered once
        written, as commits are, and leave the cache only then, so the cache follows the log's
        order."""
        group_id = body["group_id"]
        loader, code = self._gate(group_id)
        group = loader.groups.get(group_id) if code is _E.NONE else None
        if code is _E.NONE and group is None:
            code = _E.GROUP_ID_NOT_FOUND
        if code is not _E.NONE or group is None:
            self._respond(ctx.token, {"error_code": int(code), "topics": []})
            return
        subscribed = set() if group.state is _S.EMPTY else group.subscribed_topics()
        errors = {
            TopicPartition(t["name"], p): (
                _E.GROUP_SUBSCRIBED_TO_TOPIC if t["name"] in subscribed else _E.NONE)
            for t in body["topics"] for p in t["partitions"]
        }
        deleted = sorted(tp for tp, e in errors.items() if e is _E.NONE and tp in group.offsets)

        def answer() -> None:
            self._respond(ctx.token, {"error_code": 0, "topics": [
                {"name": t["name"], "partitions": [
                    {"partition": p, "error_code": int(errors[TopicPartition(t["name"], p)])}
                    for p in t["partitions"]
                ]}
                for t in body["topics"]
            ]})

        if not deleted:
            answer()
            return

        def written(error: ErrorCode, now_ms: int) -> None:
            if error is _E.NONE:
                current = loader.groups.get(group_id)  # None: deleted or expired meanwhile
                if current is not None:
                    for tp in deleted:
                        current.offsets.pop(tp, None)
                self.counters["offsets.deleted"] += len(deleted)
                log.info("offsets_deleted", group=group_id, partitions=len(deleted))
            else:
                errors.update(dict.fromkeys(deleted, append_error_answer(error)))
            answer()

        self._append(loader.partition, tuple(
            offset_record(OffsetKey(group_id, tp.topic, tp.partition), None) for tp in deleted
        ), written)

    # ======================================================================== offsets expiry

    def _expire_offsets(self, loader: OffsetsPartition, now_ms: int) -> None:
        """Seed 000: the offsets topic is compacted; retention removes what no group needs.
        An Empty group's offsets expire offsets_retention_ms after their commit or after the
        group became Empty, whichever is later; a group with members keeps the offsets of every
        topic it subscribes to, and loses the others' by their commit time."""
        retention = self.config.offsets_retention_ms
        records: list[Record] = []
        for group_id in sorted(loader.groups):
            group = loader.groups[group_id]
            if group.state is _S.EMPTY:
                expired = [
                    tp for tp, v in group.offsets.items()
                    if now_ms >= max(v.commit_timestamp_ms, group.state_since_ms) + retention
                ]
            else:
                subscribed = group.subscribed_topics()
                expired = [
                    tp for tp, v in group.offsets.items()
                    if tp.topic not in subscribed and now_ms >= v.commit_timestamp_ms + retention
                ]
            for tp in sorted(expired):
                del group.offsets[tp]
                records.append(offset_record(OffsetKey(group_id, tp.topic, tp.partition), None))
            if group.state is _S.EMPTY and not group.offsets:
                records.append(group_record(GroupKey(group_id), None))
                del loader.groups[group_id]
                self._move(group, _G.OFFSETS_EXPIRED, "offsets retention", now_ms)
        if records:
            self._append(loader.partition, tuple(records), self._log_failure("offsets expiry"))
        self._set_timer(
            TimerKey(TimerKind.OFFSETS_EXPIRY, partition=loader.partition),
            now_ms + self.config.offsets_retention_check_interval_ms,
        )
