"""Fetched sets waiting for their partition's send to be answered, to go to the target joined.

A partition has one send at the target at a time (the producer sends one request per
partition at a time), and a fetched set is whatever the source had since the last fetch --
often a few dozen messages. Sent one by one, a backlog (the target failing over, the mirror
starting behind) drains at one such set per round trip. So the sets fetched while their
partition waits are held here and go as one: stored sets are runs of whole entries, so
consecutive sets of a partition joined are a stored set too, and the target appends the entries
as they are. Sans-IO."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from client.message_sets import FetchedSet
from client.records import TopicPartition


def join(sets: Sequence[FetchedSet]) -> FetchedSet:
    """Consecutive sets of one partition as one."""
    first, last = sets[0], sets[-1]
    return FetchedSet(first.topic, first.partition, first.offset, last.next_offset,
                      b"".join(s.data for s in sets))


class WaitingSets:
    def __init__(self, join_bytes: int) -> None:
        """``join_bytes``: joined sets stay within this size (a larger set goes alone)."""
        self.join_bytes = join_bytes
        self.bytes = 0  # held, not handed to the producer yet
        self._sets: dict[TopicPartition, list[FetchedSet]] = {}

    def __contains__(self, tp: TopicPartition) -> bool:
        return tp in self._sets

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(list(self._sets))

    def add(self, s: FetchedSet) -> None:
        self._sets.setdefault(TopicPartition(s.topic, s.partition), []).append(s)
        self.bytes += len(s.data)

    def take(self, tp: TopicPartition) -> list[FetchedSet]:
        """The partition's held sets, in order, joined into as few as ``join_bytes`` allows."""
        held = self._sets.pop(tp, [])
        out: list[FetchedSet] = []
        run: list[FetchedSet] = []
        size = 0
        for s in held:
            if run and size + len(s.data) > self.join_bytes:
                out.append(join(run))
                run, size = [], 0
            run.append(s)
            size += len(s.data)
        if run:
            out.append(join(run))
        self.bytes -= sum(len(s.data) for s in held)
        return out
