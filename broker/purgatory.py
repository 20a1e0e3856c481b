"""Where long-polling fetches wait for appends (seed 003's "purgatory").

A fetch that found fewer than ``min_bytes`` parks here with one ``trio.Event``, registered under
every partition it reads. An append to a partition sets the events registered under it, so a
parked fetch wakes on the first append to any of its partitions or at its deadline, whichever
comes first -- no polling.
"""

from __future__ import annotations

from collections.abc import Iterable

import trio

TopicPartition = tuple[str, int]


class FetchPurgatory:
    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, set[trio.Event]] = {}
        self._closed = False

    async def wait(self, partitions: Iterable[TopicPartition], deadline: float) -> None:
        """Return once one of ``partitions`` is appended to, at ``deadline`` (trio time), or
        when the broker shuts down."""
        if self._closed:
            return
        event = trio.Event()
        keys = list(partitions)
        for key in keys:
            self._waiting.setdefault(key, set()).add(event)
        try:
            with trio.move_on_at(deadline):
                await event.wait()
        finally:
            for key in keys:
                waiting = self._waiting.get(key)
                if waiting is not None:
                    waiting.discard(event)
                    if not waiting:
                        del self._waiting[key]

    @property
    def parked(self) -> int:
        """How many fetches are waiting (each is registered under all its partitions)."""
        return len({event for waiting in self._waiting.values() for event in waiting})

    def appended(self, topic: str, partition: int) -> None:
        """Wake every fetch waiting on this partition (new data, or the partition is gone)."""
        for event in self._waiting.pop((topic, partition), ()):
            event.set()

    def close(self) -> None:
        """Wake every parked fetch and let no new one park (shutdown: answer what there is)."""
        self._closed = True
        for waiting in self._waiting.values():
            for event in waiting:
                event.set()
        self._waiting.clear()
