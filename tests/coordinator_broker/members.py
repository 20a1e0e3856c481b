"""Group members over raw protocol connections, for tests against a real broker process.

Each member has its own connection: the broker handles one request per connection at a time,
and a JoinGroup holds its connection until the round ends (as in Kafka), so members that must
rejoin together cannot share one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.wire import decode_response_body
from tests.broker.raw import RawClient

SESSION_MS = 10_000
T = TypeVar("T")


def wait_for(condition: Callable[[], T | None], *, timeout: float = 20.0, what: str = "") -> T:
    """Call ``condition`` until it returns something other than None (or False); give up with
    an AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.02)  # a pause between polls of the condition, not a synchronisation


def owned(assignment: list[dict[str, Any]]) -> set[tuple[str, int]]:
    return {(a["topic"], p) for a in assignment for p in a["partitions"]}


class Member:
    def __init__(
        self,
        address: tuple[str, int],
        group: str,
        topics: list[str],
        *,
        session_timeout_ms: int = SESSION_MS,
        rebalance_timeout_ms: int = SESSION_MS,
        strategy: str = "range",
    ) -> None:
        self.client = RawClient(address)
        self.group = group
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.strategy = strategy
        self.member_id = ""
        self.generation = -1
        self.partitions: set[tuple[str, int]] = set()
        self._join_sent: int | None = None

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Member:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------- joining

    def send_join(self) -> None:
        """Send a JoinGroup (with the member id once it has one); ``finish_join`` reads it."""
        self._join_sent = self.client.send(ApiKey.JOIN_GROUP, {
            "group_id": self.group, "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms, "topics": self.topics,
            "member_id": self.member_id, "assignment_strategy": self.strategy,
        })

    def finish_join(self) -> dict[str, Any]:
        """The JoinGroup answer; on success the member adopts its id, generation, partitions."""
        correlation_id, body = self.client.receive()
        assert correlation_id == self._join_sent
        answer = decode_response_body(ApiKey.JOIN_GROUP, 0, body)
        if answer["error_code"] == 0:
            self.member_id = answer["member_id"]
            self.generation = answer["generation_id"]
            self.partitions = owned(answer["partitions_to_own"])
        return answer

    def join(self) -> dict[str, Any]:
        self.send_join()
        return self.finish_join()

    # ----------------------------------------------------------------------- other requests

    def heartbeat(self, generation: int | None = None) -> ErrorCode:
        answer = self.client.request(ApiKey.HEARTBEAT, {
            "group_id": self.group, "member_id": self.member_id,
            "generation_id": self.generation if generation is None else generation,
        })
        return ErrorCode(answer["error_code"])

    def leave(self) -> ErrorCode:
        answer = self.client.request(
            ApiKey.LEAVE_GROUP, {"group_id": self.group, "member_id": self.member_id}
        )
        return ErrorCode(answer["error_code"])

    def commit(
        self, offsets: dict[tuple[str, int], int], metadata: str | None = None
    ) -> dict[tuple[str, int], ErrorCode]:
        return commit(self.client, self.group, self.generation, self.member_id, offsets, metadata)


def commit(
    client: RawClient, group: str, generation: int, member_id: str,
    offsets: dict[tuple[str, int], int], metadata: str | None = None,
) -> dict[tuple[str, int], ErrorCode]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append({
            "partition": partition, "offset": offset, "metadata": metadata,
            "commit_timestamp": -1,
        })
    answer = client.request(ApiKey.OFFSET_COMMIT, {
        "group_id": group, "generation_id": generation, "member_id": member_id,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    })
    return {
        (t["name"], p["partition"]): ErrorCode(p["error_code"])
        for t in answer["topics"] for p in t["partitions"]
    }


def fetch_offsets(client: RawClient, group: str) -> tuple[ErrorCode, dict[tuple[str, int], Any]]:
    """The OffsetFetch error code and every committed ``(offset, metadata)`` of the group."""
    answer = client.request(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": None})
    return ErrorCode(answer["error_code"]), {
        (t["name"], p["partition"]): (p["offset"], p["metadata"])
        for t in answer["topics"] for p in t["partitions"]
    }


def describe(client: RawClient, group: str) -> dict[str, Any]:
    answer = client.request(ApiKey.DESCRIBE_GROUPS, {"group_ids": [group]})
    (described,) = answer["groups"]
    return dict(described)
