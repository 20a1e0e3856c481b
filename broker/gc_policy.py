"""The broker's garbage collection policy: a collection scans only what is new.

CPython's collections stop the process for a time proportional to the container objects they
scan. A broker holding 100,000 group members has millions of them: its full collections took
0.2-0.5 s (up to 1.1 s on a busy machine), every connection's requests waiting that long,
several times a minute while members heartbeat (docs/performance.md).

So the survivors of every collection, young or full, are frozen (``gc.freeze``): the next
collection scans only the objects made since, and no object is scanned twice. Frozen objects
are still freed by reference counting the moment nothing refers to them; only garbage cycles
among them wait. That wait is bounded: once the process's peak RSS has grown by
``FULL_GROWTH`` since the last collection that scanned everything, the heap is unfrozen and the
next collection scans (and frees) it whole -- so a heap of steady size pays for the whole scan
once, and a growing one each time it has grown by half, as CPython itself does with its 25%
rule. A whole collection that freed next to nothing (``SCARCE_GARBAGE``) says the heap grew with
live objects -- 100,000 members joining -- and the next waits for ``FULL_GROWTH`` times as much
growth, up to ``MAX_GROWTH``; one that freed more brings it back to ``FULL_GROWTH``. In the
full-size scale benchmark the whole collections with growth by half alone came at 61, 94 and
143 MB of peak RSS, the last taking 0.4 s and none freeing anything, and the broker ended at
203 MB, 5% short of the next; in two runs of eleven, the p99 while 1,000 groups rebalanced
was 405 and 451 ms. With the wait growing, they came at 63 and 144 MB, the next due at 486.

Freezing only the survivors of full collections was not enough: the young and middle
generations then held what survived since, and a rebalance of 1,000 groups, replacing members,
assignments and timer entries with new ones, left 50,000-70,000 young objects alive at each
young collection -- the threshold counts allocations net of deallocations -- for pauses of
33-66 ms that freed nothing, and a middle one of 90-150 ms every tenth (benchmarks/scale.py).

The broker's own loop (``run``) makes two collections CPython would not: the whole one when it
is due, since CPython's full collections wait for a quarter more long-lived objects, which a
frozen heap never reports; and a young one every ``YOUNG_EVERY_S``, since objects made in place
of freed ones do not count towards the threshold and piled up between two rebalances into a
first young collection of 37 ms. Made there, a collection runs the finalizers of what it frees
on trio's thread, between two task steps, as CPython's own automatic ones do.
"""

from __future__ import annotations

import gc
import resource
from collections.abc import Callable
from typing import Any

import trio

#: peak RSS growth since the last whole-heap collection that makes the next one whole again
FULL_GROWTH = 1.5
#: the most that growth becomes after whole collections that found next to no garbage
MAX_GROWTH = 4.0
#: next to no garbage: fewer freed objects than this share of the ones a collection scanned
SCARCE_GARBAGE = 0.001
#: new container objects (allocations less deallocations) that start a young collection
YOUNG_THRESHOLD = 5_000
#: the longest the broker's loop leaves the young generation uncollected: each collection scans
#: what was made since the last, so more often is shorter, not more. Every 0.5 s, those around a
#: rebalance of 1,000 groups took 8-11 ms (the heartbeats waiting that long); every 0.1 s, 4-6
YOUNG_EVERY_S = 0.1


def peak_rss() -> int:
    """The process's peak RSS in the platform's unit (only ratios of it are used)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class GcPolicy:
    """``install()`` once at start-up; ``uninstall()`` restores CPython's own behaviour.
    ``run()`` is the broker's task; without it, the next ``gc.collect()`` makes a whole
    collection that is due."""

    def __init__(self, rss: Callable[[], int] = peak_rss, growth: float = FULL_GROWTH,
                 young: int = YOUNG_THRESHOLD, every: float = YOUNG_EVERY_S,
                 max_growth: float = MAX_GROWTH) -> None:
        self._rss = rss
        self._full_growth = growth
        self._max_growth = max_growth
        self.growth = growth  # the peak RSS growth that makes the next collection whole
        self._young = young
        self._every = every
        self._thresholds: tuple[int, int, int] | None = None  # CPython's, while installed
        self._whole_at = 0  # peak RSS after the last collection that scanned the whole heap
        self._frozen = False
        self.whole_due = False  # the heap is unfrozen: the next full collection scans it whole
        self.whole_collections = 0  # collections that scanned everything

    def install(self) -> None:
        gc.callbacks.append(self._collected)
        self._thresholds = gc.get_threshold()
        gc.set_threshold(self._young, *self._thresholds[1:])

    def uninstall(self) -> None:
        if self._collected in gc.callbacks:
            gc.callbacks.remove(self._collected)
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
        gc.unfreeze()
        self._frozen = False
        self.whole_due = False
        self.growth = self._full_growth

    def collect(self) -> None:
        """The whole heap if its collection is due, else the young generation."""
        gc.collect(2 if self.whole_due else 0)

    async def run(self) -> None:
        while True:
            await trio.sleep(self._every)
            self.collect()

    def _collected(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop":
            return
        rss = self._rss()
        whole = info["generation"] == 2 and not self._frozen
        if whole:
            self._whole_at = rss
            self.whole_collections += 1
            self.whole_due = False
        if rss >= self._whole_at * self.growth:
            gc.unfreeze()  # the next full collection frees the garbage cycles frozen meanwhile
            self._frozen = False
            self.whole_due = True
        elif not self.whole_due:
            gc.freeze()
            self._frozen = True
            if whole:  # what it scanned: what it freed and what it froze just now
                freed = info["collected"]
                scarce = freed < SCARCE_GARBAGE * (freed + gc.get_freeze_count())
                self.growth = (min(self.growth * self._full_growth, self._max_growth) if scarce
                               else self._full_growth)
