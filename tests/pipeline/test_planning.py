"""Offset-range planning: splitting for minPartitions and sharing maxOffsetsPerTrigger."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from client import TopicPartition
from pipeline.planning import OffsetRange, apportion, cap_offsets, plan_ranges, split_ranges


@given(st.integers(0, 10_000), st.lists(st.integers(0, 5_000), max_size=20))
def test_apportion_shares_exactly_and_in_proportion(amount: int, sizes: list[int]) -> None:
    shares = apportion(amount, sizes)
    total = sum(sizes)
    assert sum(shares) == min(amount, total)
    for share, size in zip(shares, sizes, strict=True):
        assert 0 <= share <= size
        if total:
            assert abs(share - min(amount, total) * size / total) < 1


ranges_lists = st.lists(
    st.builds(
        lambda p, start, size: OffsetRange("t", p, start, start + size),
        st.integers(0, 50),
        st.integers(0, 1_000),
        st.integers(0, 300),
    ),
    max_size=8,
    unique_by=lambda r: r.partition,
)


@given(ranges_lists, st.one_of(st.none(), st.integers(1, 40)))
def test_split_ranges_cover_every_offset_once(
    ranges: list[OffsetRange], min_partitions: int | None
) -> None:
    pieces = split_ranges(ranges, min_partitions)
    assert all(p.size > 0 for p in pieces)
    covered = sorted((p.partition, o) for p in pieces for o in range(p.start, p.end))
    assert covered == sorted((r.partition, o) for r in ranges for o in range(r.start, r.end))
    messages = sum(r.size for r in ranges)
    non_empty = sum(1 for r in ranges if r.size)
    wanted = max(min_partitions or 0, non_empty)
    assert len(pieces) == min(wanted, messages)


def test_split_gives_bigger_ranges_more_pieces() -> None:
    pieces = split_ranges([OffsetRange("t", 0, 0, 300), OffsetRange("t", 1, 0, 100)], 4)
    assert [(p.partition, p.start, p.end) for p in pieces] == [
        (0, 0, 100), (0, 100, 200), (0, 200, 300), (1, 0, 100)
    ]


def test_plan_ranges_pairs_start_and_end_per_partition() -> None:
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    ranges = plan_ranges({b0: 4, a1: 0, a0: 3}, {a0: 3, a1: 5, b0: 9})
    assert ranges == [OffsetRange("a", 1, 0, 5), OffsetRange("b", 0, 4, 9)]


@given(
    st.lists(st.tuples(st.integers(0, 1_000), st.integers(0, 500)), min_size=1, max_size=10),
    st.integers(1, 2_000),
)
def test_cap_offsets_reads_at_most_the_limit(pairs: list[tuple[int, int]], limit: int) -> None:
    start = {TopicPartition("t", i): s for i, (s, _) in enumerate(pairs)}
    latest = {TopicPartition("t", i): s + n for i, (s, n) in enumerate(pairs)}
    capped = cap_offsets(start, latest, limit)
    assert sum(capped[tp] - start[tp] for tp in start) == min(limit, sum(n for _, n in pairs))
    assert all(start[tp] <= capped[tp] <= latest[tp] for tp in start)


def test_cap_offsets_leaves_a_partition_that_went_back_alone() -> None:
    tp = TopicPartition("t", 0)
    assert cap_offsets({tp: 10}, {tp: 4}, 100) == {tp: 4}
