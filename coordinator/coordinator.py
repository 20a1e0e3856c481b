"""The group coordinator's front: the driver's entry points, dispatched to the part that does
the job, with the effects of each call handed back from the shared outbox.

Deterministic and sans-IO: every entry point takes the time as an argument and returns the
effects (responses, appends, timers) for the driver to carry out; see ``coordinator/__init__``
for the contract. The jobs live in their own modules: ``membership`` (joins, heartbeats,
leaves, rounds, timers), ``offsets`` (commits, fetches, deletes, expiry), ``loader`` (the
offsets partitions and their loading), ``answers`` (response bodies). Moves of the group and
loader machines go through their tables, so an unlisted move raises ``IllegalTransition``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from typing import Any, ClassVar

import structlog

from coordinator.answers import describe_body
from coordinator.assignors import BUILTIN_STRATEGIES, AssignmentStrategy
from coordinator.config import CoordinatorConfig
from coordinator.effects import Effect, RequestContext, TimerKey, TimerKind
from coordinator.group import Group
from coordinator.loader import OffsetsPartitions
from coordinator.loader_state import LoaderEvent, LoaderState
from coordinator.membership import Membership, TopicPartitionsLookup, new_uuid
from coordinator.offsets import GroupOffsets
from coordinator.offsets_topic import Record
from coordinator.outbox import Outbox, TransitionListener
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.partitions import offsets_partition_for
from protocol.statemachine import IllegalTransition

log = structlog.get_logger("odradek.coordinator")

__all__ = ["GroupCoordinator", "TopicPartitionsLookup"]


class GroupCoordinator:
    """Every consumer group whose ``__consumer_offsets`` partition this broker leads."""

    HANDLED_APIS: ClassVar[frozenset[ApiKey]] = frozenset({
        ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH, ApiKey.LIST_GROUPS, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS,
        ApiKey.OFFSET_DELETE,
    })

    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        topic_partitions: TopicPartitionsLookup = lambda topic: None,
        *,
        strategies: Iterable[AssignmentStrategy] = BUILTIN_STRATEGIES,
        new_uuid: Callable[[], str] = new_uuid,
    ) -> None:
        self.config = config = config or CoordinatorConfig()
        known = {s.name: s for s in strategies}
        unknown = [n for n in config.partition_assignment_strategies if n not in known]
        if unknown:
            raise ValueError(f"partition_assignment_strategies names unknown strategies {unknown}")
        self._partitions = OffsetsPartitions(config.offsets_topic_partitions)
        self._out = Outbox()
        self._membership = Membership(
            config, self._partitions, self._out,
            {n: known[n] for n in config.partition_assignment_strategies},
            topic_partitions, new_uuid,
        )
        self._offsets = GroupOffsets(config, self._partitions, self._out, self._membership)
        self._handlers: dict[ApiKey, Callable[[dict[str, Any], RequestContext], None]] = {
            ApiKey.JOIN_GROUP: self._membership.join_group,
            ApiKey.SYNC_GROUP: self._membership.sync_group,
            ApiKey.HEARTBEAT: self._membership.heartbeat,
            ApiKey.LEAVE_GROUP: self._membership.leave_group,
            ApiKey.OFFSET_COMMIT: self._offsets.commit,
            ApiKey.OFFSET_FETCH: self._offsets.fetch,
            ApiKey.LIST_GROUPS: self._list_groups,
            ApiKey.DESCRIBE_GROUPS: self._describe_groups,
            ApiKey.DELETE_GROUPS: self._offsets.delete_groups,
            ApiKey.OFFSET_DELETE: self._offsets.delete,
        }

    @property
    def counters(self) -> Counter[str]:
        """State changes and events by name, e.g. "group.Steady->PrepareRebalance"."""
        return self._out.counters

    @property
    def transition_listeners(self) -> list[TransitionListener]:
        """Called with (group, from, to, now_ms) on every group state change (the broker's
        metrics time rebalances with it)."""
        return self._out.transition_listeners

    # ======================================================================= driver entry points

    def handle(self, api_key: ApiKey, body: dict[str, Any], ctx: RequestContext) -> list[Effect]:
        """A validated request body of one of ``HANDLED_APIS``."""
        handler = self._handlers.get(api_key)
        if handler is None:
            raise ValueError(f"{api_key!r} is not a group API (FindCoordinator is the driver's)")
        handler(body, ctx)
        return self._out.flush()

    def heartbeat(self, group_id: str, member_id: str, generation: int,
                  now_ms: int) -> tuple[ErrorCode, list[Effect]]:
        """A Heartbeat's error code, without a token or a ``Respond`` (``handle`` answers it
        the same way): the broker answers 33,000 a second on its idle lane at full size, and
        what a token, a context and a response effect cost was a fifth of each. The effects
        are the timers it moved, if any."""
        code = self._membership.heartbeat_answer(group_id, member_id, generation, now_ms)
        return code, self._out.flush()

    def on_append_done(self, append_id: int, error: ErrorCode, now_ms: int) -> list[Effect]:
        """An ``AppendRecords`` finished. Appends of a resigned partition are already settled."""
        self._out.append_done(append_id, ErrorCode(error), now_ms)
        return self._out.flush()

    def on_timer(self, key: TimerKey, now_ms: int) -> list[Effect]:
        """A timer set by ``SetTimer`` is due. Stale keys are ignored."""
        if key.kind is TimerKind.OFFSETS_EXPIRY:
            partition = self._partitions.get(key.partition)
            if partition is not None and partition.state is LoaderState.READY:
                self._offsets.expire(partition, now_ms)
        else:
            self._membership.on_timer(key, now_ms)
        return self._out.flush()

    def on_topic_partitions_changed(
        self, topic: str, count: int | None, now_ms: int
    ) -> list[Effect]:
        """A topic was created, gained partitions or was deleted (``count`` None or 0). The
        injected lookup must already give the new count."""
        self._membership.on_topic_changed(topic, count, now_ms)
        return self._out.flush()

    def on_disconnect(self, connection: Hashable, now_ms: int) -> list[Effect]:
        """A client connection closed (see ``Membership.on_disconnect``)."""
        self._membership.on_disconnect(connection, now_ms)
        return self._out.flush()

    # -------------------------------------------------------------------------------- loading

    def start_loading(self, partition: int) -> list[Effect]:
        """This broker now leads ``partition``: Down -> Catch-up."""
        self._out.move_loader(self._partitions[partition], LoaderEvent.BECAME_LEADER)
        return self._out.flush()

    def load_records(self, partition: int, records: Iterable[Record]) -> None:
        """Feed the partition's records, in log order, in as many batches as convenient."""
        loader = self._partitions[partition]
        if loader.state is not LoaderState.CATCH_UP:
            raise IllegalTransition(f"load_records on partition {partition} in {loader.state}")
        loader.read(records)

    def finish_loading(self, partition: int, now_ms: int) -> list[Effect]:
        """Every record is read: Catch-up -> Ready. Members' session timers start now."""
        loader = self._partitions[partition]
        self._out.move_loader(loader, LoaderEvent.LOAD_FINISHED)
        loader.groups = loader.build_groups(now_ms)
        loaded = [loader.groups[group_id] for group_id in sorted(loader.groups)]
        for group in loaded:
            self._out.counters["group.loaded"] += 1
            log.info("group_loaded", group=group.group_id, generation=group.generation,
                     state=group.state.value, members=len(group.members))
        self._membership.loaded(loaded, now_ms)
        self._offsets.schedule_expiry(partition, now_ms)
        return self._out.flush()

    def become_leader(
        self, partition: int, records: Iterable[Record], now_ms: int
    ) -> list[Effect]:
        """``start_loading``, ``load_records`` and ``finish_loading`` in one call."""
        self._out.move_loader(self._partitions[partition], LoaderEvent.BECAME_LEADER)
        self.load_records(partition, records)
        return self.finish_loading(partition, now_ms)

    def resign(self, partition: int, now_ms: int) -> list[Effect]:
        """This broker no longer leads ``partition``: its groups are unloaded, held requests get
        NOT_COORDINATOR, and appends still in flight are settled as failed."""
        loader = self._partitions[partition]
        was_ready = loader.state is LoaderState.READY
        self._out.move_loader(loader, LoaderEvent.RESIGNED)
        groups, loader.groups = loader.groups, {}
        loader.discard_read()
        for group_id in sorted(groups):
            self._membership.unload(groups[group_id], now_ms)
        if was_ready:
            self._out.cancel_timer(TimerKey(TimerKind.OFFSETS_EXPIRY, partition=partition))
        self._out.fail_appends(partition, ErrorCode.NOT_COORDINATOR, now_ms)
        return self._out.flush()

    # -------------------------------------------------------------------------------- queries

    def partition_for(self, group_id: str) -> int:
        return offsets_partition_for(group_id, self.config.offsets_topic_partitions)

    def partition_state(self, partition: int) -> LoaderState:
        return self._partitions[partition].state

    def group(self, group_id: str) -> Group | None:
        """The loaded group, for inspection (tests, metrics); never modify it."""
        return self._partitions.loaded_group(group_id)

    def groups(self) -> list[Group]:
        return self._partitions.groups()

    # ================================================================ ListGroups / Describe

    def _list_groups(self, body: dict[str, Any], ctx: RequestContext) -> None:
        listed = sorted((g.group_id, g.state.value) for g in self.groups())
        self._out.respond(ctx.token, {
            "error_code": int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                              if self._partitions.loading() else ErrorCode.NONE),
            "groups": [{"group_id": gid, "state": state} for gid, state in listed],
        })

    def _describe_groups(self, body: dict[str, Any], ctx: RequestContext) -> None:
        groups = []
        for group_id in body["group_ids"]:
            loader, code = self._partitions.gate(group_id)
            group = loader.groups.get(group_id) if code is ErrorCode.NONE else None
            groups.append(describe_body(group_id, group, code))
        self._out.respond(ctx.token, {"groups": groups})
