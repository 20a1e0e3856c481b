"""The broker's garbage collection policy (broker/gc_policy.py): after every collection the
survivors are frozen, new garbage cycles are still collected, and frozen garbage cycles are
freed once the peak RSS has grown by half -- by the policy's own thread in the broker."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator

import pytest

from broker.gc_policy import GcPolicy


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
    policy = GcPolicy(rss=rss, growth=1.5, background=False)
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
    """A young collection's survivors are not scanned again by the next young or middle one
    (a rebalance left 50,000-70,000 of them in the young generation)."""
    gc.collect()
    kept = Cyclic()
    frozen = gc.get_freeze_count()
    gc.collect(0)
    assert gc.get_freeze_count() > frozen
    assert not any(kept in gc.get_objects(generation=g) for g in range(3))
    made_after = garbage_cycle()
    gc.collect(0)
    assert made_after() is None and policy.whole_collections == 1


def test_the_policys_thread_scans_the_heap_whole_once_rss_grew_by_half(rss: Rss) -> None:
    """CPython's own full collections wait for a quarter more long-lived objects, which a
    frozen heap never reports: the policy's thread makes the whole collection."""
    policy = GcPolicy(rss=rss, growth=1.5)
    policy.install()
    try:
        deadline = time.monotonic() + 10
        gc.collect(0)  # the first collection finds the heap never scanned whole
        while policy.whole_collections < 1:
            assert time.monotonic() < deadline, "the first whole collection never came"
            time.sleep(0.01)
        kept = [Cyclic()]
        gc.collect(0)
        frozen = weakref.ref(kept.pop())
        rss.value = 150
        gc.collect(0)  # notices the growth: unfreezes, and the thread scans everything
        while policy.whole_collections < 2 or frozen() is not None:
            assert time.monotonic() < deadline, "the frozen cycle was never freed"
            time.sleep(0.01)
    finally:
        policy.uninstall()
    assert gc.get_freeze_count() == 0


def test_the_policys_thread_collects_the_young_generation_though_the_count_stays_low(
        rss: Rss) -> None:
    """Objects made in place of freed ones do not count towards the young threshold: between
    two rebalances they piled up into a first young collection of 37 ms."""
    policy = GcPolicy(rss=rss, young=10_000_000)  # the threshold alone would never collect
    policy.install()
    try:
        gc.collect()
        kept = Cyclic()
        deadline = time.monotonic() + 10
        while kept in gc.get_objects(generation=0):
            assert time.monotonic() < deadline, "the young generation was never collected"
            time.sleep(0.05)
    finally:
        policy.uninstall()


def test_young_collections_wait_for_more_new_objects_while_installed() -> None:
    before = gc.get_threshold()
    policy = GcPolicy(young=12_345, background=False)
    policy.install()
    try:
        assert gc.get_threshold() == (12_345, *before[1:])
    finally:
        policy.uninstall()
    assert gc.get_threshold() == before
