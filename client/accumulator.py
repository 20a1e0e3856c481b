"""Per-partition queues of producer batches, and the rule for when a batch may go out.

Sans-IO: time comes in as ``now``. A partition's head batch is *sendable* when

- it is full (``batch_bytes`` reached, or more batches are queued behind it), or
- it has waited ``linger_ms`` since its first message, or
- a flush is in progress,

and it is not waiting out a retry backoff. The producer adds one more condition: no request for
that partition is in flight, which keeps every partition's messages in order even across retries.

Only partitions with queued batches have a queue: ``sendable``, ``next_deadline`` and ``expired``
run on every producer I/O round, so their cost must follow the partitions in use, not every
partition ever written to (a producer that has written to 500 topics is not 500 times slower).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from client.batch import Drive, ProducerBatch, SetBatch
from client.records import TopicPartition


class RecordAccumulator:
    def __init__(self, *, batch_bytes: int, linger_ms: float, drive: Drive) -> None:
        self.batch_bytes = batch_bytes
        self.linger = linger_ms / 1000
        self.buffered_bytes = 0  # bytes held in batches not yet settled or dropped
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}  # none empty
        self._queued = 0  # batches in all queues
        self._drive = drive

    def append(
        self,
        tp: TopicPartition,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        size: int,
        now: float,
    ) -> ProducerBatch:
        """Add a message of ``size`` bytes to ``tp``'s open batch, or to a new batch when the
        open one has no room (or was already sent); return the batch it went into."""
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        batch = queue[-1] if queue else None
        # A batch that was already sent once stays as it is: a retry resends the same bytes.
        if batch is None or not batch.open or batch.size + size > self.batch_bytes:
            if batch is not None:
                batch.open = False
            batch = ProducerBatch(tp, now, self._drive)
            queue.append(batch)
            self._queued += 1
        batch.records.append((key, value, timestamp))
        batch.size += size
        self.buffered_bytes += size
        return batch

    def append_set(self, tp: TopicPartition, data: bytes, now: float) -> SetBatch:
        """Queue a stored message set for ``tp``, after (and closing) its open batch."""
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        elif queue:
            queue[-1].open = False
        batch = SetBatch(tp, now, self._drive, data)
        queue.append(batch)
        self._queued += 1
        self.buffered_bytes += batch.size
        return batch

    def append_if_room(
        self, tp: TopicPartition, key: bytes | None, value: bytes | None, timestamp: int, size: int
    ) -> ProducerBatch | None:
        """Add the message to ``tp``'s open batch if that has room; else change nothing and
        return None (the sticky partitioner then moves on)."""
        queue = self._queues.get(tp)
        if not queue:
            return None
        batch = queue[-1]
        if not batch.open or batch.size + size > self.batch_bytes:
            return None
        batch.records.append((key, value, timestamp))
        batch.size += size
        self.buffered_bytes += size
        return batch

    def due_at_once(self, batch: ProducerBatch) -> bool:
        """Whether ``batch``, just started, makes its partition sendable now: a batch is queued
        before it (so that one is full), or nothing lingers."""
        return not self.linger or batch.whole or len(self._queues[batch.tp]) > 1

    def extend(
        self, batch: ProducerBatch, records: Iterable[tuple[bytes | None, bytes | None, int]],
        size: int,
    ) -> None:
        """Add messages of ``size`` bytes in all to ``batch``, an open one the caller has
        checked has room for them."""
        batch.records.extend(records)
        batch.size += size
        self.buffered_bytes += size

    def sendable(
        self, now: float, *, flushing: bool, busy: set[TopicPartition]
    ) -> list[TopicPartition]:
        """Partitions whose head batch may be sent now (see the module docstring)."""
        ready = []
        linger = self.linger
        for tp, queue in self._queues.items():
            if not queue or tp in busy:
                continue
            head = queue[0]
            if head.retry_at > now:
                continue
            if (
                flushing
                or head.whole
                or len(queue) > 1
                or head.size >= self.batch_bytes
                or now - head.created >= linger
            ):
                ready.append(tp)
        return ready

    def next_deadline(self, busy: set[TopicPartition]) -> float | None:
        """The earliest time a head batch becomes sendable by waiting (linger or backoff)."""
        times = [
            max(q[0].created + self.linger, q[0].retry_at)
            for tp, q in self._queues.items()
            if q and tp not in busy
        ]
        return min(times, default=None)

    def drain(
        self, tp: TopicPartition, max_bytes: int, now: float, *, flushing: bool,
        max_batches: int | None = None,
    ) -> list[ProducerBatch]:
        """Take batches from the head of ``tp``'s queue: the head, then as many more as fit in
        ``max_bytes`` (and ``max_batches``) -- none waiting out a retry backoff, and the open
        (last) batch only if it is due by itself (full, lingered long enough, or flushing). A
        stored message set goes alone."""
        queue = self._queues[tp]
        batches = [queue.popleft()]
        total = batches[0].size
        while (
            (max_batches is None or len(batches) < max_batches)
            and queue
            and not queue[0].attempts
            and not batches[0].whole
            and not queue[0].whole
            and total + queue[0].size <= max_bytes
        ):
            batch = queue[0]
            if len(queue) == 1 and not (
                flushing or batch.size >= self.batch_bytes or now - batch.created >= self.linger
            ):
                break
            total += batch.size
            batches.append(queue.popleft())
        if not queue:
            del self._queues[tp]
        self._queued -= len(batches)
        for batch in batches:
            batch.open = False
        return batches

    def reenqueue(self, batches: list[ProducerBatch], retry_at: float) -> None:
        """Put batches back at the head of their queue, in order, to be retried at ``retry_at``."""
        queue = self._queues.setdefault(batches[0].tp, deque())
        for batch in reversed(batches):
            batch.retry_at = retry_at
            queue.appendleft(batch)
        self._queued += len(batches)

    def release(self, batches: Iterable[ProducerBatch]) -> None:
        """Batches settled (acknowledged or failed): their bytes no longer count."""
        self.buffered_bytes -= sum(b.size for b in batches)

    def expired(self, now: float, timeout: float) -> list[ProducerBatch]:
        """Remove and return queued batches created more than ``timeout`` seconds ago."""
        out = []
        emptied = []
        for tp, queue in self._queues.items():
            while queue and now - queue[0].created >= timeout:
                batch = queue.popleft()
                batch.open = False
                out.append(batch)
            if not queue:
                emptied.append(tp)
        for tp in emptied:
            del self._queues[tp]
        self._queued -= len(out)
        return out

    def take_queue(self, tp: TopicPartition) -> list[ProducerBatch]:
        """Remove and return every batch queued for ``tp``."""
        queue = self._queues.pop(tp, None)
        if not queue:
            return []
        self._queued -= len(queue)
        for batch in queue:
            batch.open = False
        return list(queue)

    def queued_batches(self) -> int:
        return self._queued

    def abort_all(self) -> list[ProducerBatch]:
        """Remove and return every queued batch (closing without a flush)."""
        out = [b for q in self._queues.values() for b in q]
        for batch in out:
            batch.open = False
        self._queues.clear()
        self._queued = 0
        return out
