"""Offsets as JSON: ``{"topic": {"partition": offset}}``, the shape Spark's Kafka source uses.

The same shape serves the ``startingOffsets`` / ``endingOffsets`` options (where -2 means the
earliest and -1 the latest offset) and the streaming source's offsets, which Spark writes to the
checkpoint and hands back as parsed JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from client.records import TopicPartition

PartitionOffsets = dict[TopicPartition, int]


class OffsetsFormatError(ValueError):
    """Offsets JSON that is not ``{"topic": {"partition": offset}}``."""


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The JSON-ready form, topics and partitions in order so equal offsets compare equal."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def offsets_from_json(value: str | Mapping[str, Any], *, lowest: int = 0) -> PartitionOffsets:
    """Parse offsets given as JSON text or as the parsed value. Offsets below ``lowest`` are
    rejected (``lowest=-2`` accepts the earliest / latest markers, -2 and -1)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise OffsetsFormatError(f"malformed JSON ({exc})") from None
    if not isinstance(value, Mapping):
        raise OffsetsFormatError('expected an object {"topic": {"partition": offset}}')
    offsets: PartitionOffsets = {}
    for topic, partitions in value.items():
        if not isinstance(topic, str) or not topic:
            raise OffsetsFormatError(f"topic name {topic!r} is not a non-empty string")
        if not isinstance(partitions, Mapping) or not partitions:
            raise OffsetsFormatError(
                f'topic {topic!r}: expected a non-empty object {{"partition": offset}}'
            )
        for partition, offset in partitions.items():
            number = _partition_number(partition)
            if number is None:
                raise OffsetsFormatError(
                    f"topic {topic!r}: partition {partition!r} is not a number"
                )
            if type(offset) is not int or offset < lowest:
                raise OffsetsFormatError(
                    f"{topic}-{number}: offset {offset!r} is not an integer >= {lowest}"
                )
            offsets[TopicPartition(topic, number)] = offset
    return offsets


def _partition_number(value: object) -> int | None:
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if type(value) is int and value >= 0:
        return value
    return None
