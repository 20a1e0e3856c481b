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
"""

from __future__ import annotations

import gc
import resource
from collections.abc import Callable
from typing import Any

#: peak RSS growth since the last whole-heap collection that makes the next one whole again
FULL_GROWTH = 1.5


def peak_rss() -> int:
    """The process's peak RSS in the platform's unit (only ratios of it are used)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class GcPolicy:
    """``install()`` once at start-up; ``uninstall()`` restores CPython's own behaviour."""

    def __init__(self, rss: Callable[[], int] = peak_rss, growth: float = FULL_GROWTH) -> None:
        self._rss = rss
        self._growth = growth
        self._whole_at = 0  # peak RSS after the last collection that scanned the whole heap
        self._frozen = False
        self.whole_collections = 0  # full collections that scanned everything

    def install(self) -> None:
        gc.callbacks.append(self._collected)

    def uninstall(self) -> None:
        if self._collected in gc.callbacks:
            gc.callbacks.remove(self._collected)
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
