"""The coordinator's way out: the effects of one call, the appends awaiting their result, and
the record of every state move (log line, counter, listeners).

Membership, offsets and the dispatcher share one ``Outbox``; the dispatcher hands its effects to
the driver at the end of each entry point (``flush``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import structlog

from coordinator.effects import AppendRecords, CancelTimer, Effect, Respond, SetTimer, TimerKey
from coordinator.group import Group
from coordinator.group_state import GroupEvent, GroupState
from coordinator.loader import OffsetsPartition
from coordinator.loader_state import LOADER_MACHINE, LoaderEvent
from coordinator.offsets_topic import Record
from protocol.errors import ErrorCode

log = structlog.get_logger("odradek.coordinator")

#: called with the result of an append to __consumer_offsets and the time it came back
AppendDone = Callable[[ErrorCode, int], None]
#: called with (group, from, to, now_ms) on every group state change
TransitionListener = Callable[[Group, GroupState, GroupState, int], None]


@dataclass(slots=True)
class _PendingAppend:
    partition: int
    on_done: AppendDone


class Outbox:
    def __init__(self) -> None:
        self._out: list[Effect] = []
        self._appends: dict[int, _PendingAppend] = {}
        self._next_append_id = 0
        #: state changes and events by name, e.g. "group.Steady->PrepareRebalance"
        self.counters: Counter[str] = Counter()
        #: told of every group state change (the broker's metrics time rebalances with it)
        self.transition_listeners: list[TransitionListener] = []

    # ------------------------------------------------------------------------------- effects

    def flush(self) -> list[Effect]:
        out, self._out = self._out, []
        return out

    def respond(self, token: Hashable, body: dict[str, Any]) -> None:
        self._out.append(Respond(token, body))

    def set_timer(self, key: TimerKey, deadline_ms: int) -> None:
        self._out.append(SetTimer(key, deadline_ms))

    def cancel_timer(self, key: TimerKey) -> None:
        self._out.append(CancelTimer(key))

    def append(self, partition: int, records: tuple[Record, ...], on_done: AppendDone) -> None:
        self._next_append_id += 1
        self._appends[self._next_append_id] = _PendingAppend(partition, on_done)
        self._out.append(AppendRecords(self._next_append_id, partition, records))

    def append_done(self, append_id: int, error: ErrorCode, now_ms: int) -> None:
        """Appends of a resigned partition are already settled: their ids are ignored."""
        pending = self._appends.pop(append_id, None)
        if pending is not None:
            pending.on_done(error, now_ms)

    def fail_appends(self, partition: int, error: ErrorCode, now_ms: int) -> None:
        """Settle every append still in flight to ``partition`` as failed with ``error``."""
        for append_id in sorted(self._appends):
            if self._appends[append_id].partition == partition:
                self._appends.pop(append_id).on_done(error, now_ms)

    @staticmethod
    def log_failure(what: str) -> AppendDone:
        """For appends nobody waits on: a failure is logged, and the next check writes again."""
        def on_done(error: ErrorCode, now_ms: int) -> None:
            if error is not ErrorCode.NONE:
                log.warning("offsets_append_failed", what=what, error=error.name)

        return on_done

    # ---------------------------------------------------------------------------- state moves

    def move(self, group: Group, event: GroupEvent, reason: str, now_ms: int) -> None:
        """Move ``group`` through its table, then log, count and tell the listeners."""
        old = group.move(event, now_ms)
        new = group.state
        self.counters[f"group.{event.name.lower()}"] += 1
        if new is not old:
            self.counters[f"group.{old.value}->{new.value}"] += 1
            log.info("group_transition", group=group.group_id, generation=group.generation,
                     reason=reason, **{"from": old.value, "to": new.value})
            for listener in self.transition_listeners:
                listener(group, old, new, now_ms)

    def move_loader(self, loader: OffsetsPartition, event: LoaderEvent) -> None:
        old = loader.state
        loader.state = LOADER_MACHINE.next_state(old, event)
        self.counters[f"loader.{old.value}->{loader.state.value}"] += 1
        log.info("offsets_partition_transition", partition=loader.partition,
                 **{"from": old.value, "to": loader.state.value})
