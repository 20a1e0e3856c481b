"""The fetch purgatory wakes a parked fetch on an append to one of its partitions, at its
deadline, or at shutdown -- and forgets it afterwards."""

from __future__ import annotations

import trio
import trio.testing

from broker.purgatory import FetchPurgatory


async def test_an_append_wakes_only_fetches_on_that_partition() -> None:
    purgatory = FetchPurgatory()
    woken: list[str] = []
    far = trio.current_time() + 3600

    async def park(name: str, partitions: list[tuple[str, int]]) -> None:
        await purgatory.wait(partitions, far)
        woken.append(name)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(park, "a", [("t", 0), ("t", 1)])
            nursery.start_soon(park, "b", [("u", 0)])
            await trio.testing.wait_all_tasks_blocked()
            purgatory.appended("t", 1)
            await trio.testing.wait_all_tasks_blocked()
            assert woken == ["a"]
            assert ("t", 0) not in purgatory._waiting  # a woken fetch leaves every partition
            purgatory.appended("u", 0)
    assert woken == ["a", "b"]
    assert purgatory._waiting == {}


async def test_the_deadline_ends_the_wait(autojump_clock: trio.testing.MockClock) -> None:
    purgatory = FetchPurgatory()
    start = trio.current_time()
    await purgatory.wait([("t", 0)], start + 5)
    assert trio.current_time() == start + 5
    assert purgatory._waiting == {}


async def test_close_wakes_everyone_and_parks_no_one_after() -> None:
    purgatory = FetchPurgatory()
    far = trio.current_time() + 3600
    answers: list[bool] = []

    async def park() -> None:
        answers.append(await purgatory.wait([("t", 0)], far))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(park)
            await trio.testing.wait_all_tasks_blocked()
            assert purgatory.parked == 1
            purgatory.close()
            await trio.testing.wait_all_tasks_blocked()
            assert answers == [False]  # woken, nothing of its own ended it
            assert purgatory._waiting == {}
            # after close: a fetch that comes to wait is answered at once, parked nowhere
            nursery.start_soon(park)
            await trio.testing.wait_all_tasks_blocked()
            assert answers == [False, False]
            assert purgatory.parked == 0 and purgatory._waiting == {}


async def test_until_returning_ends_the_wait_and_says_so() -> None:
    purgatory = FetchPurgatory()
    far = trio.current_time() + 3600
    closed = trio.Event()
    answers: list[bool] = []

    async def park(until: trio.Event | None) -> None:
        if until is None:
            answers.append(await purgatory.wait([("t", 0)], far))
        else:
            answers.append(await purgatory.wait([("t", 0)], far, until=until.wait))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(park, closed)
            await trio.testing.wait_all_tasks_blocked()
            closed.set()  # the peer went away: that fetch alone ends, True
            await trio.testing.wait_all_tasks_blocked()
            assert answers == [True]
            assert purgatory._waiting == {}
            nursery.start_soon(park, trio.Event())
            nursery.start_soon(park, None)
            await trio.testing.wait_all_tasks_blocked()
            assert purgatory.parked == 2
            purgatory.appended("t", 0)  # an append wakes both, False: nothing closed
    assert answers == [True, False, False]
    assert purgatory._waiting == {}
