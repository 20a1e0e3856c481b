"""The small value types the clients hand to and take from their users."""

from __future__ import annotations

from typing import NamedTuple

from protocol.partitions import TopicPartition

__all__ = ["ConsumerRecord", "TopicPartition"]


class ConsumerRecord(NamedTuple):
    """One message as ``Consumer.poll`` returns it. ``timestamp_type`` is 0 for create time and
    1 for log-append time. The fields after ``partition`` are those of
    ``protocol.messageset.Message``, in its order, then ``headers``: so the message decoder
    builds a record at once, the topic and partition before and ``headers`` after the message's
    fields (kafka-python's ConsumerRecord has the same order). ``headers`` are the record's
    ``(key, value)`` pairs, in the order they were sent; messages of format v0/v1 have none."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class RecordMetadata(NamedTuple):
    """Where an acknowledged message was stored: what a producer future resolves to. With
    ``acks=0`` the broker answers nothing, so ``offset`` is -1."""

    topic: str
    partition: int
    offset: int
