"""Offset-range planning: which Spark partition reads which messages.

Like the seed's "Hadoop consumer" -- parallel loaders that each own an offset range of one
partition -- a read becomes one Spark partition per topic partition and range, split further
when ``minPartitions`` asks for more parallelism than the topic has partitions. A stream's
``maxOffsetsPerTrigger`` is shared among partitions in proportion to what each has waiting.
Both use one apportionment rule (largest remainder), so the numbers always add up exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from client.records import TopicPartition


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Messages ``start`` (inclusive) to ``end`` (exclusive) of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def apportion(amount: int, sizes: Sequence[int]) -> list[int]:
    """Shares of ``min(amount, sum(sizes))`` proportional to ``sizes``, each at most its size,
    summing exactly (largest remainder; ties go to the earlier size)."""
    total = sum(sizes)
    amount = min(amount, total)
    if amount <= 0:
        return [0] * len(sizes)
    shares = [amount * size // total for size in sizes]
    leftover = amount - sum(shares)
    by_remainder = sorted(range(len(sizes)), key=lambda i: (-(amount * sizes[i] % total), i))
    for i in by_remainder[:leftover]:
        shares[i] += 1
    return shares


def split_ranges(ranges: Sequence[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """The non-empty ranges, split so there are at least ``min_partitions`` of them (as far as
    there are messages to go round); bigger ranges are split into more pieces."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    # Every range keeps one piece; the extra pieces go where the messages are.
    extra = apportion(min_partitions - len(ranges), [r.size - 1 for r in ranges])
    out = []
    for r, more in zip(ranges, extra, strict=True):
        pieces = more + 1
        start = r.start
        for i in range(pieces):
            end = start + (r.end - start) // (pieces - i)
            out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return out


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    min_partitions: int | None = None,
) -> list[OffsetRange]:
    """Ranges from ``start`` to ``end`` for every partition both name, split per
    ``min_partitions``; ordered by topic and partition."""
    ranges = [
        OffsetRange(tp.topic, tp.partition, start[tp], end[tp])
        for tp in sorted(start.keys() & end.keys())
    ]
    return split_ranges(ranges, min_partitions)


def cap_offsets(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """``latest``, moved back so that at most ``limit`` messages lie past ``start`` in all;
    each partition gets a share in proportion to its backlog. ``start`` must name every
    partition of ``latest``; one whose latest is behind its start is left alone."""
    tps = sorted(latest)
    backlog = [max(latest[tp] - start[tp], 0) for tp in tps]
    shares = apportion(limit, backlog)
    return {
        tp: start[tp] + share if waiting else latest[tp]
        for tp, waiting, share in zip(tps, backlog, shares, strict=True)
    }
