"""One consumer group seen over time: what ``odradek groups watch`` draws and the console's
group page shows.

``GroupView.poll`` asks the group's coordinator (DescribeGroups, OffsetFetch) and the partition
leaders (ListOffsets) through ``GroupAdmin`` and keeps the newest ``GroupSnapshot``; each change
of state or generation it sees goes on a timeline, with the members that joined or left between
the two looks (``12:00:03.120 PrepareRebalance (member c3 left)``). Moves faster than the poll
interval (a round's Rebalancing lasts as long as one write) may be missed: the timeline is what
was seen. A broker that cannot be reached makes the snapshot ``disconnected`` with the reason;
the next poll that gets answers recovers.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from client.group_admin import GroupAdmin, GroupDescription, PartitionLag
from protocol.errors import GroupIdNotFoundError, OdradekError

#: state changes kept on a timeline
TIMELINE_LENGTH = 20


@dataclass(frozen=True)
class TimelineEntry:
    at: float  # time.time() of the poll that saw it
    state: str
    generation: int
    note: str = ""

    def text(self) -> str:
        clock = time.strftime("%H:%M:%S", time.localtime(self.at))
        millis = int(self.at * 1000) % 1000
        generation = f" gen {self.generation}" if self.state == "Steady" else ""
        note = f" ({self.note})" if self.note else ""
        return f"{clock}.{millis:03d} {self.state}{generation}{note}"


@dataclass(frozen=True)
class GroupSnapshot:
    """The group at one poll. ``group`` is None when it does not exist (``missing``); when
    it could not be asked, ``error`` says why and ``group`` and ``lag`` are the last known."""

    group_id: str
    at: float
    group: GroupDescription | None = None
    lag: tuple[PartitionLag, ...] = ()
    missing: bool = False
    error: str | None = None

    @property
    def disconnected(self) -> bool:
        return self.error is not None

    @property
    def state(self) -> str:
        if self.disconnected:
            return "disconnected"
        return "none" if self.group is None else self.group.state

    @property
    def total_lag(self) -> int:
        return total_lag(self.lag)


def total_lag(lags: Iterable[PartitionLag]) -> int:
    """A group's lag over its partitions (those without a commit or a log end count 0)."""
    return sum(p.lag or 0 for p in lags)


def member_name(group_id: str, member_id: str) -> str:
    """A member id without its group prefix, shortened to its uuid's first block."""
    rest = member_id.removeprefix(group_id + "-")
    return rest.split("-")[0] if rest else member_id


@dataclass
class GroupView:
    admin: GroupAdmin
    group_id: str
    snapshot: GroupSnapshot | None = None
    timeline: deque[TimelineEntry] = field(
        default_factory=lambda: deque(maxlen=TIMELINE_LENGTH))

    def poll(self) -> bool:
        """Take a new snapshot; whether anything shown changed."""
        now = time.time()
        try:
            group = self.admin.describe_group(self.group_id)
            new = GroupSnapshot(self.group_id, now, group, tuple(self.admin.group_lag(group)))
        except GroupIdNotFoundError:
            new = GroupSnapshot(self.group_id, now, missing=True)
        except (OdradekError, OSError) as exc:  # the last answers stay shown meanwhile
            last = self.snapshot
            new = GroupSnapshot(self.group_id, now, None if last is None else last.group,
                                () if last is None else last.lag,
                                error=f"{type(exc).__name__}: {exc}")
        old, self.snapshot = self.snapshot, new
        self._note_change(old, new)
        return old is None or _shown(old) != _shown(new)

    def _note_change(self, old: GroupSnapshot | None, new: GroupSnapshot) -> None:
        if new.group is None or new.disconnected:
            return  # the timeline holds the group's states, not the watcher's troubles
        previous = self.timeline[-1] if self.timeline else None
        if (previous is not None and previous.state == new.group.state
                and previous.generation == new.group.generation):
            return
        note = ""
        if old is not None and old.group is not None:
            before = {m.member_id for m in old.group.members}
            after = {m.member_id for m in new.group.members}
            changes = [f"member {member_name(self.group_id, m)} left"
                       for m in sorted(before - after)]
            changes += [f"member {member_name(self.group_id, m)} joined"
                        for m in sorted(after - before)]
            note = ", ".join(changes)
        self.timeline.append(
            TimelineEntry(new.at, new.group.state, new.group.generation, note))


def _shown(snapshot: GroupSnapshot) -> object:
    """What a redraw shows, to tell whether one is needed."""
    return (snapshot.group, snapshot.lag, snapshot.missing, snapshot.error)
