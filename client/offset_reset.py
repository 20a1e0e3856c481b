"""Where ``odradek groups reset-offsets`` moves a group's committed offsets (Kafka's
``kafka-consumer-groups --reset-offsets``): to the earliest or latest offset, to a given offset,
shifted by N, or to the first message at or after a point in time.

Targets outside a partition's stored range are clamped into it, as Kafka does, so a reset never
leaves a group pointing at offsets that are gone or not yet written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from client.consumer import Consumer
from client.errors import ClientError
from client.records import TopicPartition


class ResetTo(Enum):
    EARLIEST = "to-earliest"
    LATEST = "to-latest"
    OFFSET = "to-offset"
    SHIFT = "shift-by"
    DATETIME = "to-datetime"


@dataclass(frozen=True)
class ResetSpec:
    to: ResetTo
    value: int = 0  # the offset, the shift, or the timestamp in ms


class OffsetResetError(ClientError):
    """The reset cannot be planned: a bad --topic, a shift with nothing committed."""


def parse_topic_partitions(spec: str) -> tuple[str, list[int] | None]:
    """``T`` (every partition) or ``T:0,1,2`` (Kafka's --topic syntax)."""
    topic, sep, numbers = spec.partition(":")
    if not topic:
        raise OffsetResetError(f"--topic {spec!r}: no topic name")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(n) for n in numbers.split(",")})
    except ValueError:
        raise OffsetResetError(f"--topic {spec!r}: partitions must be numbers, T:0,1,2") from None
    if not partitions or partitions[0] < 0:
        raise OffsetResetError(f"--topic {spec!r}: partitions must be numbers >= 0")
    return topic, partitions


def parse_datetime_ms(text: str) -> int:
    """An ISO 8601 date and time (``2026-11-23T10:00:00``, with or without a UTC offset; local
    time without one, as Kafka reads it) in milliseconds since the epoch."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise OffsetResetError(
            f"--to-datetime {text!r} is not an ISO date and time, e.g. 2026-11-23T10:00:00"
        ) from None
    return int(moment.timestamp() * 1000)  # naive: local time


def partitions_to_reset(consumer: Consumer, topics: Sequence[str]) -> list[TopicPartition]:
    """The partitions ``--topic`` options name, checked against metadata."""
    wanted: list[TopicPartition] = []
    for spec in topics:
        topic, partitions = parse_topic_partitions(spec)
        existing = consumer.partitions_for(topic)
        missing = sorted(set(partitions or ()) - set(existing))
        if missing:
            raise OffsetResetError(
                f"topic {topic!r} has no partition {', '.join(map(str, missing))} "
                f"(it has {len(existing)})"
            )
        wanted += [TopicPartition(topic, p) for p in (partitions or existing)]
    return sorted(set(wanted))


def plan_reset(
    consumer: Consumer,
    partitions: Sequence[TopicPartition],
    committed: Mapping[TopicPartition, int],
    spec: ResetSpec,
) -> dict[TopicPartition, int]:
    """The new committed offset of each partition."""
    earliest = consumer.beginning_offsets(partitions)
    latest = consumer.end_offsets(partitions)

    def clamp(tp: TopicPartition, offset: int) -> int:
        return min(max(offset, earliest[tp]), latest[tp])

    if spec.to is ResetTo.EARLIEST:
        return dict(earliest)
    if spec.to is ResetTo.LATEST:
        return dict(latest)
    if spec.to is ResetTo.OFFSET:
        return {tp: clamp(tp, spec.value) for tp in partitions}
    if spec.to is ResetTo.SHIFT:
        uncommitted = [str(tp) for tp in partitions if tp not in committed]
        if uncommitted:
            raise OffsetResetError(
                f"--shift-by needs committed offsets to shift; none for {', '.join(uncommitted)}"
            )
        return {tp: clamp(tp, committed[tp] + spec.value) for tp in partitions}
    found = consumer.offsets_for_times(dict.fromkeys(partitions, spec.value))
    return {
        tp: latest[tp] if (hit := found.get(tp)) is None else hit.offset for tp in partitions
    }
