"""Fixed-rate schedules measure from the intended send time (no coordinated omission)."""

from __future__ import annotations

import pytest

from benchmarks.pacing import (
    SPIN_NS,
    PacedSchedule,
    intended_of,
    latency_summary,
    stamped_value,
    wait_until,
)

MS = 1_000_000


def test_a_late_sender_gets_every_overdue_message_with_its_intended_time() -> None:
    schedule = PacedSchedule(count=10, rate=1000)  # one message per ms
    schedule.start(100 * MS)
    assert schedule.take(100 * MS) == [100 * MS]
    assert schedule.take(100 * MS) == []
    assert schedule.wait_s(100 * MS) == pytest.approx(0.001)
    # stalled for 4.5 ms: messages 1..5 are due, each still stamped with its own time
    assert schedule.take(int(104.5 * MS)) == [101 * MS, 102 * MS, 103 * MS, 104 * MS]
    assert schedule.wait_s(int(104.5 * MS)) == pytest.approx(0.0005)


def test_take_is_bounded_and_stops_at_count() -> None:
    schedule = PacedSchedule(count=5, rate=1000)
    schedule.start(0)
    assert schedule.take(10 * MS, limit=2) == [0, MS]
    assert schedule.take(10 * MS) == [2 * MS, 3 * MS, 4 * MS]
    assert schedule.done and schedule.take(20 * MS) == [] and schedule.wait_s(20 * MS) == 0.0


def test_values_carry_their_intended_time() -> None:
    value = stamped_value(123_456_789, 100)
    assert len(value) == 100
    assert intended_of(value) == 123_456_789


def test_latency_summary_uses_nearest_rank_percentiles() -> None:
    summary = latency_summary([i * MS for i in range(1, 1001)])  # 1 .. 1000 ms
    assert summary == {"p50_ms": 500.0, "p99_ms": 990.0, "p999_ms": 999.0, "max_ms": 1000.0}


class FakeClock:
    """A clock that moves 1 µs per reading and by what is asked of ``sleep``; records the
    sleeps asked for."""

    def __init__(self) -> None:
        self.now = 0
        self.sleeps: list[float] = []

    def now_ns(self) -> int:
        self.now += 1_000
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += round(seconds * 1e9)


def test_wait_until_sleeps_on_the_timer_and_spins_only_the_last_stretch() -> None:
    clock = FakeClock()
    wait_until(10 * MS, clock.sleep, clock.now_ns)
    assert clock.sleeps == [pytest.approx((10 * MS - 1_000 - SPIN_NS) / 1e9)]
    assert clock.now >= 10 * MS


@pytest.mark.parametrize("due_ns", [SPIN_NS // 2, 0])
def test_wait_until_never_sleeps_for_a_time_within_the_spin_or_past(due_ns: int) -> None:
    clock = FakeClock()
    wait_until(due_ns, clock.sleep, clock.now_ns)
    assert clock.sleeps == []
    assert clock.now >= due_ns
