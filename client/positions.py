"""Which partitions a consumer reads and where it stands in each.

This is all the state fetching needs, and nothing about how the partitions were chosen: manual
``assign`` sets them today; group membership will set them on each rebalance by calling the
same ``assign``. A partition without a position waits for an offset reset (earliest or latest,
looked up with ListOffsets) -- or, with a group, for its committed offset.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from client.errors import ConfigError, IllegalStateError
from client.records import TopicPartition


class OffsetReset(Enum):
    """Where to start when a partition has no valid position (Kafka's auto.offset.reset)."""

    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"

    @classmethod
    def parse(cls, value: str | OffsetReset) -> OffsetReset:
        if isinstance(value, OffsetReset):
            return value
        try:
            return cls(value.strip().lower())
        except ValueError:
            raise ConfigError(
                f"auto_offset_reset={value!r} is invalid; use earliest, latest or none"
            ) from None


@dataclass
class PartitionState:
    position: int | None = None  # the offset of the next message poll() returns
    reset: OffsetReset | None = None  # a reset waiting to be looked up
    high_watermark: int = -1
    log_start_offset: int = -1


class FetchPositions:
    def __init__(self, default_reset: OffsetReset) -> None:
        self.default_reset = default_reset
        self._states: dict[TopicPartition, PartitionState] = {}

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions; ones kept from before keep their positions."""
        wanted = list(dict.fromkeys(partitions))
        self._states = {tp: self._states.get(tp) or PartitionState() for tp in wanted}

    def assigned(self) -> list[TopicPartition]:
        return list(self._states)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._states

    def state(self, tp: TopicPartition) -> PartitionState:
        try:
            return self._states[tp]
        except KeyError:
            raise IllegalStateError(f"{tp} is not assigned to this consumer") from None

    def position(self, tp: TopicPartition) -> int | None:
        return self.state(tp).position

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"cannot seek {tp} to negative offset {offset}")
        state = self.state(tp)
        state.position = offset
        state.reset = None

    def request_reset(self, tp: TopicPartition, reset: OffsetReset) -> None:
        """Forget the position; look it up again (``reset`` is EARLIEST or LATEST)."""
        state = self.state(tp)
        state.position = None
        state.reset = reset

    def awaiting_reset(self) -> dict[TopicPartition, OffsetReset]:
        """Partitions with a reset to look up, including ones that never had a position
        (they get ``default_reset``; with NONE they are left out and reported elsewhere)."""
        out: dict[TopicPartition, OffsetReset] = {}
        for tp, state in self._states.items():
            if state.position is not None:
                continue
            reset = state.reset or self.default_reset
            if reset is not OffsetReset.NONE:
                out[tp] = reset
        return out

    def without_position(self) -> list[TopicPartition]:
        return [tp for tp, s in self._states.items() if s.position is None]

    def fetchable(self) -> list[TopicPartition]:
        return [tp for tp, s in self._states.items() if s.position is not None]
