"""Where long-polling fetches wait for appends (seed 003's "purgatory").

A fetch that found fewer than ``min_bytes`` parks here in one cancel scope, registered under
every partition it reads. An append to a partition cancels the scopes registered under it, so a
parked fetch wakes on the first append to any of its partitions or at its deadline (the scope's
own), whichever comes first -- no polling. While parked the fetch may also wait for something
of its own (``until``: its client closing the connection), in the same task: waking a parked
fetch is one cancellation, with no second task to start, cancel and join (that cost about 50 us
per wake-up, on the path of every message a long-polling consumer receives).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

import trio

from protocol.partitions import TopicPartition


class FetchPurgatory:
    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, set[trio.CancelScope]] = {}
        self._closed = False

    async def wait(
        self,
        partitions: Iterable[TopicPartition],
        deadline: float,
        until: Callable[[], Awaitable[object]] = trio.sleep_forever,
    ) -> bool:
        """Return once one of ``partitions`` is appended to, at ``deadline`` (trio time), when
        the broker shuts down, or once ``until()`` returns -- True only in that last case."""
        if self._closed:
            return False
        keys = list(partitions)
        with trio.CancelScope(deadline=deadline) as scope:
            for key in keys:
                self._waiting.setdefault(key, set()).add(scope)
            try:
                await until()
                return True
            finally:
                for key in keys:
                    waiting = self._waiting.get(key)
                    if waiting is not None:
                        waiting.discard(scope)
                        if not waiting:
                            del self._waiting[key]
        return False

    @property
    def parked(self) -> int:
        """How many fetches are waiting (each is registered under all its partitions)."""
        return len({scope for waiting in self._waiting.values() for scope in waiting})

    def appended(self, topic: str, partition: int) -> None:
        """Wake every fetch waiting on this partition (new data, or the partition is gone)."""
        for scope in self._waiting.pop(TopicPartition(topic, partition), ()):
            scope.cancel()

    def close(self) -> None:
        """Wake every parked fetch and let no new one park (shutdown: answer what there is)."""
        self._closed = True
        for waiting in self._waiting.values():
            for scope in waiting:
                scope.cancel()
        self._waiting.clear()
