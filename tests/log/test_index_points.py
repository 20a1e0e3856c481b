"""Where a segment's sparse indexes get entries: the per-index-entry helpers against a plain
walk over every entry, for entries of one size (placed by arithmetic) and of several."""

from __future__ import annotations

from itertools import accumulate

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.log.segment import Segment, index_points, largest_timestamps
from protocol.entry_scan import Scan


def plain_index_points(
    sizes: list[int], since_index: int, interval: int
) -> tuple[list[int], int, int]:
    """Entry by entry: an index entry for the first entry after ``interval`` more bytes;
    positions counted from the last index entry before these entries."""
    found: list[int] = []
    written = since_index  # before this entry
    indexed_at = 0
    for i, size in enumerate(sizes):
        if written - (indexed_at if found else 0) >= interval:
            found.append(i)
            indexed_at = written
        written += size
    return found, indexed_at, written


def plain_largest(
    timestamps: list[int], indexed: list[int], largest: int
) -> tuple[list[int], int]:
    at: list[int] = []
    for i, timestamp in enumerate(timestamps):
        largest = max(largest, timestamp)
        if i in indexed:
            at.append(largest)
    return at, largest


sizes = st.one_of(
    st.builds(lambda size, n: [size] * n, st.integers(26, 20_000), st.integers(1, 300)),
    st.lists(st.integers(26, 20_000), min_size=1, max_size=300),
)


@given(sizes=sizes, since_index=st.integers(0, 20_000), interval=st.integers(0, 20_000))
def test_index_points_are_those_of_a_walk_over_every_entry(
    sizes: list[int], since_index: int, interval: int
) -> None:
    indexed, indexed_at, end = index_points(sizes, since_index, interval)
    assert (list(indexed), indexed_at, end) == plain_index_points(sizes, since_index, interval)


@given(
    timestamps=st.one_of(
        st.lists(st.integers(-1, 10**13), min_size=1, max_size=300).map(sorted),
        st.lists(st.integers(-1, 10**13), min_size=1, max_size=300),
    ),
    largest=st.integers(-1, 10**13),
    data=st.data(),
)
def test_largest_timestamps_are_the_running_maximum(
    timestamps: list[int], largest: int, data: st.DataObject
) -> None:
    indexed = data.draw(st.sets(st.integers(0, len(timestamps) - 1)).map(sorted))
    assert largest_timestamps(timestamps, indexed, largest) == plain_largest(
        timestamps, indexed, largest
    )


def plain_indexes(
    batches: list[list[tuple[int, int]]], interval: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Offset-index and time-index entries of batches of (size, timestamp) entries appended in
    turn, walking every entry: an offset-index entry for the first entry after ``interval``
    more bytes, and a time-index entry with it when the largest timestamp grew."""
    index: list[tuple[int, int]] = []
    time_index: list[tuple[int, int]] = []
    position = offset = 0
    since = 0
    largest = -1
    for batch in batches:
        for size, timestamp in batch:
            largest = max(largest, timestamp)
            if since >= interval:
                index.append((offset, position))
                if largest > (time_index[-1][0] if time_index else -1):
                    time_index.append((largest, offset))
                since = 0
            since += size
            position += size
            offset += 1
    return index, time_index


@given(
    batches=st.lists(
        st.one_of(
            st.builds(
                lambda size, timestamps: [(size, t) for t in sorted(timestamps)],
                st.integers(26, 5000),
                st.lists(st.integers(-1, 10**6), min_size=1, max_size=50),
            ),
            st.lists(st.tuples(st.integers(26, 5000), st.integers(-1, 10**6)), min_size=1),
        ),
        min_size=1,
        max_size=8,
    ),
    interval=st.integers(0, 8000),
)
def test_a_segment_indexes_appended_entries_as_a_walk_over_every_entry(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[tuple[int, int]]], interval: int
) -> None:
    segment = Segment.create(tmp_path_factory.mktemp("segment"), 0, interval)
    position = offset = 0
    for batch in batches:
        sizes = [size for size, _ in batch]
        positions = list(accumulate(sizes, initial=0))[:-1]
        segment._account(
            Scan(
                positions,
                list(range(offset, offset + len(batch))),
                sizes,
                [1] * len(batch),
                [0] * len(batch),
                [timestamp for _, timestamp in batch],
                [-1] * len(batch),
                sum(sizes),
                None,
                False,
            ),
            position,
        )
        position += sum(sizes)
        offset += len(batch)
    index, time_index = plain_indexes(batches, interval)
    assert list(zip(segment.index._keys, segment.index._values, strict=True)) == index
    assert list(zip(segment.time_index._keys, segment.time_index._values, strict=True)) == (
        time_index
    )
    segment.close_indexes()
