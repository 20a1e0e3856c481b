"""Where ``odradek groups reset-offsets`` moves a group's committed offsets (Kafka's
``kafka-consumer-groups --reset-offsets``): to the earliest or latest offset, to a given offset,
shifted by N, to the first message at or after a point in time, to where it is now
(``--to-current``), or to the offsets of a plan file (``--from-file``, CSV lines
``topic,partition,offset`` as ``--export`` prints them, Kafka's format).

Targets outside a partition's stored range are clamped into it, as Kafka does, so a reset never
leaves a group pointing at offsets that are gone or not yet written -- a plan file's offsets
too (it may have been written before retention removed them). ``--to-current`` is the
exception, as in Kafka: it keeps each committed offset as it is, and a partition the group has
not committed gets the log end (Kafka's choice: where a consumer with nothing committed and
``auto.offset.reset=latest`` would start).
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
    CURRENT = "to-current"
    FILE = "from-file"


@dataclass(frozen=True)
class ResetSpec:
    to: ResetTo
    value: int = 0  # the offset, the shift, or the timestamp in ms
    #: FILE: the plan file's offsets
    plan: Mapping[TopicPartition, int] | None = None


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


def parse_reset_plan(text: str, group_id: str, source: str = "plan") -> dict[TopicPartition, int]:
    """A reset plan: CSV lines ``topic,partition,offset`` (what ``--export`` prints), or
    ``group,topic,partition,offset`` as Kafka exports several groups -- those lines must name
    ``group_id``. Blank lines are skipped; a partition named twice is an error."""
    plan: dict[TopicPartition, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        where = f"{source} line {number}"
        if len(fields) == 4:
            group, *fields = fields
            if group != group_id:
                raise OffsetResetError(f"{where}: group {group!r}, not {group_id!r}")
        if len(fields) != 3 or not fields[0]:
            raise OffsetResetError(
                f"{where}: {line!r} is not topic,partition,offset (or group,topic,partition,"
                "offset)"
            )
        try:
            partition, offset = int(fields[1]), int(fields[2])
        except ValueError:
            raise OffsetResetError(f"{where}: partition and offset must be numbers") from None
        if partition < 0 or offset < 0:
            raise OffsetResetError(f"{where}: partition and offset must be numbers >= 0")
        tp = TopicPartition(fields[0], partition)
        if tp in plan:
            raise OffsetResetError(f"{where}: {tp} appears twice")
        plan[tp] = offset
    if not plan:
        raise OffsetResetError(f"{source}: no topic,partition,offset lines")
    return plan


def plan_topics(plan: Mapping[TopicPartition, int]) -> list[str]:
    """The ``--topic`` specs (``T:0,1``) naming a plan's partitions, for
    ``partitions_to_reset`` to check."""
    by_topic: dict[str, list[int]] = {}
    for tp in plan:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items())]


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
    if spec.to is ResetTo.FILE:
        assert spec.plan is not None
        return {tp: clamp(tp, spec.plan[tp]) for tp in partitions}
    if spec.to is ResetTo.CURRENT:
        return {tp: committed[tp] if tp in committed else latest[tp] for tp in partitions}
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
