"""The broker-wide request memory pool (queued_max_request_bytes): bounds, order, cancellation.

Waits are synchronised with ``wait_all_tasks_blocked``; tests that could hang run on trio's
autojump clock, so a deadlock fails at once at its ``fail_after`` instead of stalling the run.
"""

from __future__ import annotations

import random

import pytest
import trio
import trio.testing

from broker.memory_pool import RequestMemoryPool


async def reserve_in_background(
    nursery: trio.Nursery, pool: RequestMemoryPool, size: int, granted: list[int]
) -> trio.CancelScope:
    """Start a task waiting for ``size`` bytes (appended to ``granted`` once it has them);
    return its cancel scope, once it waits."""
    scope = trio.CancelScope()

    async def wait() -> None:
        with scope:
            await pool.reserve(size)
            granted.append(size)

    nursery.start_soon(wait)
    await trio.testing.wait_all_tasks_blocked()
    return scope


def test_reservations_up_to_capacity_are_immediate() -> None:
    pool = RequestMemoryPool(100, small_bytes=10)
    assert pool.try_reserve(60) and pool.try_reserve(40)
    assert not pool.try_reserve(1)
    pool.release(60)
    assert pool.used == 40
    assert pool.try_reserve(60)


async def test_a_waiter_resumes_when_bytes_are_released() -> None:
    pool = RequestMemoryPool(100, small_bytes=10)
    await pool.reserve(80)
    granted: list[int] = []
    async with trio.open_nursery() as nursery:
        await reserve_in_background(nursery, pool, 50, granted)
        assert (granted, pool.waiting, pool.used) == ([], 1, 80)
        pool.release(80)
    assert (granted, pool.waiting, pool.used) == ([50], 0, 50)


async def test_big_waiters_are_served_in_arrival_order() -> None:
    pool = RequestMemoryPool(100, small_bytes=10)
    await pool.reserve(100)
    granted: list[int] = []
    async with trio.open_nursery() as nursery:
        await reserve_in_background(nursery, pool, 70, granted)
        await reserve_in_background(nursery, pool, 20, granted)
        pool.release(30)  # room for the 20, but it may not pass the 70 ahead of it
        await trio.testing.wait_all_tasks_blocked()
        assert not pool.try_reserve(20)  # nor may a newcomer
        assert (granted, pool.used) == ([], 70)
        pool.release(70)  # room for both (trio runs woken tasks in any order)
    assert (sorted(granted), pool.used) == ([20, 70], 90)


async def test_small_reservations_pass_waiting_big_ones_and_go_first() -> None:
    pool = RequestMemoryPool(100, small_bytes=10)
    await pool.reserve(95)
    granted: list[int] = []
    async with trio.open_nursery() as nursery:
        await reserve_in_background(nursery, pool, 50, granted)
        assert pool.try_reserve(5)  # small: passes the waiting 50
        await reserve_in_background(nursery, pool, 10, granted)
        pool.release(50)  # the small waiter came second but is served first
        await trio.testing.wait_all_tasks_blocked()
        assert (granted, pool.used) == ([10], 60)
        pool.release(60)
    assert (granted, pool.used) == ([10, 50], 50)


def test_big_reservations_leave_the_small_share_free() -> None:
    pool = RequestMemoryPool(100, small_share=20, small_bytes=10)
    assert not pool.try_reserve(81)
    assert pool.try_reserve(80)
    assert not pool.try_reserve(11)  # big: the share is not for it
    assert pool.try_reserve(10) and pool.try_reserve(10)
    assert not pool.try_reserve(1)  # full


async def test_read_ahead_is_only_taken_from_room_nobody_needs() -> None:
    pool = RequestMemoryPool(100, small_share=20, small_bytes=10)
    assert pool.try_reserve_spare(70)
    assert not pool.try_reserve_spare(11)  # would eat into the small share
    assert pool.try_reserve_spare(10)
    pool.release(10)
    granted: list[int] = []
    async with trio.open_nursery() as nursery:
        await reserve_in_background(nursery, pool, 15, granted)  # big: 85 > 80, waits
        assert not pool.try_reserve_spare(5)  # it would fit, but someone waits
        assert pool.try_reserve(4)  # a length prefix still gets in
        pool.release(74)
    assert (granted, pool.used) == ([15], 15)


async def test_a_cancelled_waiter_holds_nothing_and_unblocks_those_behind() -> None:
    pool = RequestMemoryPool(100, small_bytes=10)
    await pool.reserve(60)
    granted: list[int] = []
    async with trio.open_nursery() as nursery:
        first = await reserve_in_background(nursery, pool, 70, granted)
        await reserve_in_background(nursery, pool, 30, granted)
        first.cancel()  # the 30 fitted all along; only the 70 kept it waiting
    assert (granted, pool.used, pool.waiting) == ([30], 90, 0)


async def test_impossible_reservations_and_releases_are_errors() -> None:
    pool = RequestMemoryPool(100, small_share=20, small_bytes=10)
    with pytest.raises(ValueError, match="can never be reserved"):
        await pool.reserve(81)
    pool.try_reserve(5)
    with pytest.raises(ValueError, match="cannot release 6 bytes"):
        pool.release(6)
    with pytest.raises(ValueError):
        RequestMemoryPool(100, small_share=100)


async def test_many_readers_never_exceed_the_bound_and_all_finish(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Random sizes, small and big, each held for a while: the bound is never passed, no
    one is left waiting, and everything is given back."""
    pool = RequestMemoryPool(1000, small_share=100, small_bytes=50)
    rng = random.Random(7)
    peak = 0

    async def reader(size: int, hold: float) -> None:
        nonlocal peak
        await pool.reserve(size)
        peak = max(peak, pool.used)
        assert pool.used <= pool.capacity
        await trio.sleep(hold)  # the request being read and handled (simulated time)
        pool.release(size)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for _ in range(300):
                size = rng.choice([rng.randint(1, 50), rng.randint(51, 900)])
                nursery.start_soon(reader, size, rng.random())
    assert (pool.used, pool.waiting) == (0, 0)
    assert peak > pool.big_capacity  # small ones did use the share
