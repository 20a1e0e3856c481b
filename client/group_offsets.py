"""OffsetCommit and OffsetFetch: a group's committed offsets, built and read in one place.

A committed offset is the offset of the next message to consume (Kafka's convention), so a
consumer commits its positions. Manual assignment commits with generation -1 and no member id,
which the coordinator accepts only while the group has no members.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from client.errors import partition_error
from client.records import TopicPartition
from protocol.errors import ErrorCode, error_for
from protocol.partitions import by_topic

#: the generation and member id of commits made without group membership (manual assignment)
NO_GENERATION = -1
NO_MEMBER = ""


def offset_commit_body(
    group_id: str, generation: int, member_id: str, offsets: Mapping[TopicPartition, int]
) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, offset in sorted(offsets.items()):
        topics.setdefault(tp.topic, []).append(
            {"partition": tp.partition, "offset": offset, "metadata": None,
             "commit_timestamp": -1}
        )
    return {
        "group_id": group_id,
        "generation_id": generation,
        "member_id": member_id,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


def read_offset_commit(body: dict[str, Any]) -> dict[TopicPartition, ErrorCode]:
    """Each partition's answer code (``ErrorCode.NONE`` when stored)."""
    return {
        TopicPartition(t["name"], p["partition"]): _code(p["error_code"])
        for t in body["topics"]
        for p in t["partitions"]
    }


def offset_fetch_body(group_id: str, partitions: Iterable[TopicPartition] | None) -> dict[str, Any]:
    """An OffsetFetch for ``partitions``, or for everything the group committed (None)."""
    if partitions is None:
        return {"group_id": group_id, "topics": None}
    return {"group_id": group_id, "topics": [{"name": t, "partitions": ps}
                                             for t, ps in by_topic(partitions).items()]}


def read_offset_fetch(body: dict[str, Any]) -> dict[TopicPartition, int]:
    """Committed offsets, -1 where none was committed. A group-level error code raises its
    typed error (e.g. COORDINATOR_LOAD_IN_PROGRESS, retriable); so does a partition's."""
    code = _code(body["error_code"])
    if code is not ErrorCode.NONE:
        raise error_for(code, f"OffsetFetch: {code.info.meaning}")
    found: dict[TopicPartition, int] = {}
    for t in body["topics"]:
        for p in t["partitions"]:
            tp = TopicPartition(t["name"], p["partition"])
            if p["error_code"]:
                raise partition_error(f"committed offset of {tp}", p["error_code"])
            found[tp] = p["offset"]
    return found


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
