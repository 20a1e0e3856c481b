"""The broker's garbage collection policy (broker/gc_policy.py): after every collection the
survivors are frozen, new garbage cycles are still collected, frozen garbage cycles are freed
once the peak RSS has grown by half, and the broker's loop makes a young collection at least
every ``YOUNG_EVERY_S`` and the whole one when it is due."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
import trio
import trio.testing

from broker.gc_policy import YOUNG_EVERY_S, GcPolicy


class Cyclic:
    def __init__(self) -> None:
        self.me = self


class Rss:
    def __init__(self) -> None:
        self.value = 100

    def __call__(self) -> int:
        return self.value


@pytest.fixture
def rss() -> Iterator[Rss]:
    yield Rss()


@pytest.fixture
def policy(rss: Rss) -> Iterator[GcPolicy]:
    policy = GcPolicy(rss=rss, growth=1.5, max_growth=1.5)  # whatever a collection frees
    policy.install()
    yield policy
    policy.uninstall()


def garbage_cycle() -> weakref.ref[Cyclic]:
    """A reference cycle nothing else refers to, and a weak reference that says it is freed."""
    return weakref.ref(Cyclic())


def test_survivors_are_frozen_and_new_garbage_cycles_still_collected(policy: GcPolicy) -> None:
    kept = Cyclic()
    gc.collect()
    assert policy.whole_collections == 1 and gc.get_freeze_count() > 0
    assert gc.is_tracked(kept) and kept not in gc.get_objects(generation=2)
    made_after = garbage_cycle()
    gc.collect()
    assert made_after() is None
    assert policy.whole_collections == 1  # that one scanned only what was new


def test_frozen_garbage_cycles_are_freed_once_rss_grew_by_half(
    policy: GcPolicy, rss: Rss
) -> None:
    kept = [Cyclic()]
    gc.collect()  # scans everything, then freezes ``kept``
    frozen = weakref.ref(kept.pop())  # now garbage, but frozen
    gc.collect()
    assert frozen() is not None
    rss.value = 149
    gc.collect()
    assert frozen() is not None and policy.whole_collections == 1
    rss.value = 150
    gc.collect()  # notices the growth: unfreezes
    gc.collect()  # scans everything again
    assert frozen() is None and policy.whole_collections == 2


def test_survivors_of_a_young_collection_are_frozen_too(policy: GcPolicy) -> None:
    """The next young or middle collection does not scan them again (a rebalance left
    50,000-70,000 of them in the young generation)."""
    gc.collect()
    kept = Cyclic()
    frozen = gc.get_freeze_count()
    gc.collect(0)
    assert gc.get_freeze_count() > frozen
    assert not any(kept in gc.get_objects(generation=g) for g in range(3))
    made_after = garbage_cycle()
    gc.collect(0)
    assert made_after() is None and policy.whole_collections == 1


async def test_the_broker_loop_collects_the_young_generation_and_the_whole_heap_when_due(
    rss: Rss, autojump_clock: trio.testing.MockClock
) -> None:
    """CPython's own full collections wait for a quarter more long-lived objects, which a
    frozen heap never reports: the loop makes the whole collection. Its young ones come at
    least every YOUNG_EVERY_S, however few objects were made."""
    # no automatic collections meanwhile, and the growth stays 1.5 whatever a collection frees
    policy = GcPolicy(rss=rss, growth=1.5, young=1 << 30, max_growth=1.5)
    policy.install()
    collections: list[tuple[float, int]] = []

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            collections.append((trio.current_time(), info["generation"]))

    gc.collect()
    kept = [Cyclic()]
    gc.collect(0)
    frozen = weakref.ref(kept.pop())
    gc.callbacks.append(timed)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(policy.run)
            await trio.sleep(YOUNG_EVERY_S * 3.5)
            assert [at for at, _ in collections] == pytest.approx(
                [YOUNG_EVERY_S, 2 * YOUNG_EVERY_S, 3 * YOUNG_EVERY_S])
            assert frozen() is not None and policy.whole_collections == 1
            rss.value = 150
            await trio.sleep(YOUNG_EVERY_S)  # notices the growth: unfreezes
            assert policy.whole_due and frozen() is not None
            await trio.sleep(YOUNG_EVERY_S)  # scans everything
            nursery.cancel_scope.cancel()
    finally:
        gc.callbacks.remove(timed)
        policy.uninstall()
    assert frozen() is None and policy.whole_collections == 2 and not policy.whole_due
    assert [generation for _, generation in collections] == [0, 0, 0, 0, 2]


def test_whole_collections_that_free_next_to_nothing_wait_for_more_growth(rss: Rss) -> None:
    """The heap grew with live objects (100,000 members joining): the next whole collection
    waits for FULL_GROWTH times as much growth, up to the most; one that frees garbage cycles
    brings it back."""
    gc.collect()  # no garbage left for the policy's first collection
    policy = GcPolicy(rss=rss, growth=1.5, max_growth=4.0)
    policy.install()
    try:
        gc.disable()  # the collections here are the test's own
        grown = []
        for _ in range(4):
            gc.collect()  # due: unfreezes
            gc.collect()  # whole, freeing next to nothing
            grown.append(policy.growth)
            rss.value = round(rss.value * policy.growth) + 1
        assert grown == [2.25, 3.375, 4.0, 4.0]
        assert policy.whole_collections == 4
        gc.collect()  # due again: unfreezes
        garbage = [garbage_cycle() for _ in range(50_000)]  # half the objects it will scan
        gc.collect()
        assert all(cycle() is None for cycle in garbage)
        assert policy.whole_collections == 5 and policy.growth == 1.5
    finally:
        gc.enable()
        policy.uninstall()


def test_young_collections_wait_for_more_new_objects_while_installed() -> None:
    before = gc.get_threshold()
    policy = GcPolicy(young=12_345)
    policy.install()
    try:
        assert gc.get_threshold() == (12_345, *before[1:])
    finally:
        policy.uninstall()
    assert gc.get_threshold() == before
