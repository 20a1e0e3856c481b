"""What goes into the coordinator with a request, and the effects that come out, as values.

The driver (the broker) carries out each effect: ``Respond`` sends a response body for a held
reply token; ``AppendRecords`` appends to a ``__consumer_offsets`` partition and reports back
with ``on_append_done``; ``SetTimer`` / ``CancelTimer`` manage one timer per key, and a due
timer comes back through ``on_timer``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from coordinator.offsets_topic import Record


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What the driver knows about a request besides its body.

    ``token`` is opaque: the coordinator hands it back in exactly one ``Respond``, maybe much
    later (a JoinGroup is held until its round ends). ``connection`` identifies the client's
    connection (None if the driver does not track it); see ``on_disconnect``.
    """

    token: Hashable
    now_ms: int
    client_id: str = ""
    client_host: str = ""
    connection: Hashable | None = None


class TimerKind(Enum):
    SESSION = "session"  # one member's session timeout
    REBALANCE = "rebalance"  # a group's join phase deadline
    INITIAL_DELAY = "initial_delay"  # group_initial_rebalance_delay_ms of a group's first round
    OFFSETS_EXPIRY = "offsets_expiry"  # the periodic retention check of one offsets partition


@dataclass(frozen=True, slots=True)
class TimerKey:
    kind: TimerKind
    group_id: str = ""
    member_id: str = ""
    partition: int = -1


@dataclass(frozen=True, slots=True)
class Respond:
    """Send ``body`` (valid for the request's API response schema) as the reply to ``token``."""

    token: Hashable
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class AppendRecords:
    """Append ``records`` -- (key, value) pairs, value None for a tombstone -- to partition
    ``partition`` of ``__consumer_offsets``, then call ``on_append_done(append_id, ...)``."""

    append_id: int
    partition: int
    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class SetTimer:
    """Arm (or re-arm) the timer ``key`` to call ``on_timer(key, now_ms)`` at ``deadline_ms``."""

    key: TimerKey
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: TimerKey


Effect = Respond | AppendRecords | SetTimer | CancelTimer
