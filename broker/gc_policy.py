"""The broker's garbage collection policy: full collections scan only what is new.

CPython's full (generation 2) collection stops the process for a time proportional to every
container object alive. A broker holding 100,000 group members has millions of them, and its
full collections took 0.2-0.5 s (up to 1.1 s on a busy machine) -- every connection's requests
waited that long, several times a minute while members heartbeat (docs/performance.md).

So after each full collection the survivors are frozen (``gc.freeze``): the next ones scan only
the objects that survived since, a few thousand, not the whole heap. Frozen objects are still
freed by reference counting the moment nothing refers to them; only garbage cycles among them
wait. That wait is bounded: once the process's peak RSS has grown by ``FULL_GROWTH`` since the
last collection that scanned everything, the heap is unfrozen and the next full collection
scans (and frees) everything again -- so a heap of steady size pays for the whole scan once,
and a growing one each time it has grown by half, as CPython itself does with its 25% rule.

Young collections start after ``YOUNG_THRESHOLD`` new container objects instead of CPython's
700. A busy broker always has tens of thousands of young objects alive for a moment -- each
connection's wait for its next request (coroutines, cancel scopes), trio's stale deadline
entries -- which every young collection traversed again: at 33,000 heartbeats a second on
100,000 members (benchmarks/scale.py) that was 17-26 young collections a second, 50-90 ms of
each second of the broker's one core, with one to three middle-generation pauses of 10-20 ms.
Almost all of it dies by reference counting, so with the larger threshold the collections
nearly stop (0-6 ms a second), and a garbage cycle still waits for at most that many
allocations.
"""

from __future__ import annotations

import gc
import resource
from collections.abc import Callable
from typing import Any

#: peak RSS growth since the last whole-heap collection that makes the next one whole again
FULL_GROWTH = 1.5
#: new container objects (allocations less deallocations) that start a young collection
YOUNG_THRESHOLD = 20_000


def peak_rss() -> int:
    """The process's peak RSS in the platform's unit (only ratios of it are used)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class GcPolicy:
    """``install()`` once at start-up; ``uninstall()`` restores CPython's own behaviour."""

    def __init__(self, rss: Callable[[], int] = peak_rss, growth: float = FULL_GROWTH,
                 young: int = YOUNG_THRESHOLD) -> None:
        self._rss = rss
        self._growth = growth
        self._young = young
        self._thresholds: tuple[int, int, int] | None = None  # CPython's, while installed
        self._whole_at = 0  # peak RSS after the last collection that scanned the whole heap
        self._frozen = False
        self.whole_collections = 0  # full collections that scanned everything

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

    def _collected(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or info["generation"] != 2:
            return
        rss = self._rss()
        if not self._frozen:
            self._whole_at = rss
            self.whole_collections += 1
        if rss >= self._whole_at * self._growth:
            gc.unfreeze()  # the next full collection frees the garbage cycles frozen meanwhile
            self._frozen = False
        else:
            gc.freeze()
            self._frozen = True
