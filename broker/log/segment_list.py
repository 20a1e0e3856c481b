"""An immutable snapshot of a log's segments, replaced whole on every change.

Seed 000 "Deletes": "a copy-on-write style segment list implementation that provides consistent
views to allow a binary search to proceed on an immutable static snapshot view of the log
segments while deletes are progressing". Rolling, retention and compaction build a new list and
swap the attribute; a reader takes the attribute once and sees either the old or the new list.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from broker.log.segment import Segment


class SegmentList:
    __slots__ = ("bases", "segments")

    def __init__(self, segments: Sequence[Segment]) -> None:
        if not segments:
            raise ValueError("a log always has at least its active segment")
        self.segments: tuple[Segment, ...] = tuple(segments)
        self.bases: tuple[int, ...] = tuple(s.base_offset for s in self.segments)

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def closed(self) -> tuple[Segment, ...]:
        return self.segments[:-1]

    @property
    def log_start_offset(self) -> int:
        return self.bases[0]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    def floor(self, offset: int) -> int:
        """The index of the segment whose range holds ``offset`` (0 below the first base)."""
        return max(bisect_right(self.bases, offset) - 1, 0)

    def rolled(self, new_active: Segment) -> SegmentList:
        return SegmentList((*self.segments, new_active))

    def without_first(self, count: int) -> SegmentList:
        return SegmentList(self.segments[count:])

    def replacing_first(self, count: int, replacements: Sequence[Segment]) -> SegmentList:
        return SegmentList((*replacements, *self.segments[count:]))

    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)
