"""Which source offsets a mirror may commit: per partition, its sends to the target in order,
and the offset after the last one acknowledged. Sans-IO: a send is anything with ``done()``,
``failed()`` and ``exception()`` (the producer's futures)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Protocol

from client.records import TopicPartition


class SendOutcome(Protocol):
    def done(self) -> bool: ...
    def failed(self) -> bool: ...
    def exception(self) -> BaseException | None: ...


class RefusedSend(Exception):
    """A send the target refused for good; the partition's offsets before it stay committable."""

    def __init__(self, tp: TopicPartition, error: BaseException) -> None:
        super().__init__(f"{tp}: {error}")
        self.tp = tp
        self.error = error


class _Partition:
    __slots__ = ("acknowledged", "committed", "sends")

    def __init__(self) -> None:
        # (first offset, next offset, the outcomes of the messages between), in send order
        self.sends: deque[tuple[int, int, Sequence[SendOutcome]]] = deque()
        self.acknowledged: int | None = None  # the offset after the last acknowledged message
        self.committed: int | None = None


class Acknowledgements:
    def __init__(self) -> None:
        self._partitions: dict[TopicPartition, _Partition] = {}

    def sent(self, tp: TopicPartition, first: int, next_offset: int,
             outcomes: Sequence[SendOutcome]) -> None:
        """Messages ``first`` up to ``next_offset`` of ``tp`` went out as ``outcomes``."""
        partition = self._partitions.get(tp)
        if partition is None:
            partition = self._partitions[tp] = _Partition()
        partition.sends.append((first, next_offset, outcomes))

    @property
    def waiting(self) -> bool:
        """Whether any send is still unanswered."""
        return any(p.sends for p in self._partitions.values())

    def unanswered(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` has a send not settled yet."""
        partition = self._partitions.get(tp)
        return partition is not None and bool(partition.sends)

    def settle(self) -> int:
        """Move each partition's acknowledged offset past its sends that are done, in order
        (a partition's sends settle in order: the producer keeps them so); the offsets newly
        acknowledged. ``RefusedSend`` for the first send that failed: it and those after it
        stay unacknowledged."""
        count = 0
        for tp, partition in self._partitions.items():
            sends = partition.sends
            while sends and sends[0][2][-1].done():
                first, next_offset, outcomes = sends[0]
                failed = next((o for o in outcomes if o.failed()), None)
                if failed is not None:
                    error = failed.exception()
                    assert error is not None
                    raise RefusedSend(tp, error)
                sends.popleft()
                count += next_offset - first
                partition.acknowledged = next_offset
        return count

    def acknowledged(self, tp: TopicPartition) -> int | None:
        partition = self._partitions.get(tp)
        return None if partition is None else partition.acknowledged

    def to_commit(self, partitions: Iterable[TopicPartition] | None = None
                  ) -> dict[TopicPartition, int]:
        """The acknowledged offsets not committed yet (of ``partitions``, default all)."""
        chosen = self._partitions if partitions is None else {
            tp: self._partitions[tp] for tp in partitions if tp in self._partitions}
        return {tp: p.acknowledged for tp, p in chosen.items()
                if p.acknowledged is not None and p.acknowledged != p.committed}

    def committed(self, offsets: dict[TopicPartition, int]) -> None:
        for tp, offset in offsets.items():
            self._partitions[tp].committed = offset

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions handed to another member: their next sends start anew."""
        for tp in partitions:
            self._partitions.pop(tp, None)
