"""The broker's garbage collection policy (broker/gc_policy.py): after a full collection the
survivors are frozen, new garbage cycles are still collected, and frozen garbage cycles are
freed once the peak RSS has grown by half."""

from __future__ import annotations

import gc
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
    policy = GcPolicy(rss=rss, growth=1.5)
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


def test_young_collections_wait_for_more_new_objects_while_installed() -> None:
    before = gc.get_threshold()
    policy = GcPolicy(young=12_345)
    policy.install()
    try:
        assert gc.get_threshold() == (12_345, *before[1:])
    finally:
        policy.uninstall()
    assert gc.get_threshold() == before
