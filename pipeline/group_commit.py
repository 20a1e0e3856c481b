"""Committing a stream's processed offsets to a consumer group.

Spark keeps a stream's real progress in its checkpoint; the group commit is for people and
tools: with the option ``groupId`` set, ``odradek groups describe`` shows the Spark job's
committed offsets and lag like any other group's. The stream commits as a manual-assignment
client does (seed 001): generation -1 and an empty member id, which the coordinator accepts
while the group has no members. Written against the wire protocol (FindCoordinator, then
OffsetCommit to the coordinator) over the client's ``NetworkClient``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from client.durations import seconds_text
from client.errors import ClientTimeoutError, partition_error
from client.group_offsets import offset_commit_body
from client.network import NetworkClient
from client.records import TopicPartition
from client.security import SecurityConfig
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, OdradekError, error_for

# Answers that mean "ask again, perhaps elsewhere": the coordinator moved or is loading.
_FIND_AGAIN = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
    }
)
_BACKOFF = 0.1


class GroupCommitter:
    def __init__(self, bootstrap: str, group_id: str, *, timeout_ms: int = 10_000,
                 security: SecurityConfig | None = None) -> None:
        self.group_id = group_id
        self._timeout = timeout_ms / 1000
        self._network = NetworkClient(
            bootstrap, client_id="odradek-spark", request_timeout_ms=timeout_ms,
            security=security,
        )
        self._coordinator: int | None = None

    def close(self) -> None:
        self._network.close()

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Store ``offsets`` (each the next offset to read) for the group; waits until the
        coordinator has written them, retrying while it moves or loads, up to the timeout."""
        deadline = time.monotonic() + self._timeout
        pending = dict(offsets)
        last_error: BaseException | None = None
        while pending:
            if time.monotonic() >= deadline:
                raise ClientTimeoutError(
                    f"group {self.group_id!r}: offsets not committed within "
                    f"{seconds_text(self._timeout)}: {last_error or 'no answer'}"
                )
            try:
                node = self._find_coordinator(deadline)
                # generation -1 and no member id: a manual-assignment commit, as Spark's is
                body = offset_commit_body(self.group_id, -1, "", pending)
                answer = self._network.send(node, ApiKey.OFFSET_COMMIT, body)
                results = answer.result(max(deadline - time.monotonic(), 0.001))
            except OdradekError as exc:
                if not getattr(exc, "retriable", False):
                    raise
                last_error = exc
                self._coordinator = None
                self._network.poll(_BACKOFF)
                continue
            for topic in results["topics"]:
                for p in topic["partitions"]:
                    tp = TopicPartition(topic["name"], p["partition"])
                    code = p["error_code"]
                    if code == ErrorCode.NONE:
                        pending.pop(tp, None)
                    elif code in _FIND_AGAIN:
                        last_error = partition_error(f"group {self.group_id!r} {tp}", code)
                        self._coordinator = None
                    else:
                        raise partition_error(f"group {self.group_id!r} commit of {tp}", code)
            if pending:
                self._network.poll(_BACKOFF)

    def _find_coordinator(self, deadline: float) -> int:
        while self._coordinator is None:
            node = self._network.least_loaded_node()
            future = self._network.send(
                node, ApiKey.FIND_COORDINATOR, {"group_id": self.group_id}
            )
            body = future.result(max(deadline - time.monotonic(), 0.001))
            code = body["error_code"]
            if code == ErrorCode.NONE:
                self._network.set_brokers({body["node_id"]: (body["host"], body["port"])})
                self._coordinator = body["node_id"]
            else:
                raise error_for(code, f"group {self.group_id!r}: {body['error_message'] or ''}")
        return self._coordinator
