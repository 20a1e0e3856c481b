"""Fixed-rate sending with latency measured from the *intended* send time.

A sender that falls behind (the system under test stalled it) must not quietly send later and
measure from then: that hides exactly the stalls a latency benchmark is for ("coordinated
omission"). So message ``i`` of a run at ``rate``/s is *intended* for ``start + i / rate``; its
value carries that time, and the receiver's latency is ``arrival - intended``, however late the
sender really got to it. Times are ``time.monotonic_ns()`` (CLOCK_MONOTONIC, one clock for every
process of the machine), so the sender and the receiver may be different processes.

Between sends a sender waits on a timer or on its socket, not in a loop: on a 2-core machine the
broker and the receiver share the other core, and a sender spinning all the while would take its
share from them -- the latency measured would be the contention. ``wait_until`` sleeps, then spins
only the last ``SPIN_NS``.
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

STAMP = struct.Struct(">q")
# How long before a send time the sender stops sleeping and spins: time.sleep (clock_nanosleep on
# Linux) wakes up to the timer slack (50 µs) late, later on a busy machine, and each microsecond
# late is measured as latency of the system under test.
SPIN_NS = 100_000


@dataclass
class PacedSchedule:
    """The intended send times of ``count`` messages at ``rate`` per second."""

    count: int
    rate: float
    start_ns: int | None = None
    taken: int = 0

    def start(self, now_ns: int) -> None:
        self.start_ns = now_ns

    @property
    def done(self) -> bool:
        return self.taken >= self.count

    def intended_ns(self, index: int) -> int:
        assert self.start_ns is not None, "start() the schedule first"
        return self.start_ns + round(index * 1e9 / self.rate)

    def take(self, now_ns: int, limit: int = 1_000) -> list[int]:
        """The intended times of the messages due by ``now_ns`` and not taken yet (at most
        ``limit``, oldest first). A sender that is behind gets all its overdue messages, each
        still stamped with the time it was meant to go."""
        assert self.start_ns is not None, "start() the schedule first"
        if now_ns < self.start_ns:
            return []
        due = min(self.count, (now_ns - self.start_ns) * self.rate // 1e9 + 1, self.taken + limit)
        times = [self.intended_ns(i) for i in range(self.taken, int(due))]
        self.taken += len(times)
        return times

    def next_ns(self) -> int | None:
        """The intended time of the next message not taken yet (None when all are taken)."""
        return None if self.done else self.intended_ns(self.taken)

    def wait_s(self, now_ns: int) -> float:
        """Seconds until the next message is due (0 when one is due or all are taken)."""
        if self.done:
            return 0.0
        return max(0.0, (self.intended_ns(self.taken) - now_ns) / 1e9)


def wait_until(
    due_ns: int,
    sleep: Callable[[float], None] = time.sleep,
    now_ns: Callable[[], int] = time.monotonic_ns,
    spin_ns: int = SPIN_NS,
) -> None:
    """Return at ``due_ns`` (on ``now_ns``'s clock): ``sleep`` until ``spin_ns`` before it,
    then spin only the rest."""
    left = due_ns - now_ns()
    if left > spin_ns:
        sleep((left - spin_ns) / 1e9)
    while now_ns() < due_ns:
        pass


def stamped_value(intended_ns: int, value_bytes: int) -> bytes:
    """A ``value_bytes`` long value that starts with its intended send time."""
    return STAMP.pack(intended_ns) + b"x" * max(0, value_bytes - STAMP.size)


def intended_of(value: bytes | memoryview) -> int:
    (intended,) = STAMP.unpack_from(value)
    return int(intended)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (``q`` in 0..1)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


def latency_summary(latencies_ns: list[int]) -> dict[str, float]:
    """p50 / p99 / p99.9 / max in milliseconds."""
    ms = sorted(x / 1e6 for x in latencies_ns)
    return {
        "p50_ms": round(percentile(ms, 0.50), 3),
        "p99_ms": round(percentile(ms, 0.99), 3),
        "p999_ms": round(percentile(ms, 0.999), 3),
        "max_ms": round(ms[-1], 3) if ms else math.nan,
    }
