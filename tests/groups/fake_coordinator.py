"""The in-memory fake broker (tests/client/fake_broker.py) with a scripted group coordinator, for
answers a real coordinator will not give on demand: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
an unknown member, a heartbeat that never comes back.

The coordinator is deliberately simple: one member at a time; every JoinGroup is answered at
once with the next generation and every partition of the subscribed topics (but those in
``withhold``); heartbeats and
commits from the current member and generation succeed. ``faults`` (from ``FakeBroker``) decide
the exceptions: ``answer_code(api, code)`` makes one answer carry an error code.
"""

from __future__ import annotations

import uuid
from typing import Any

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.wire import Request
from tests.client.fake_broker import FakeBroker, Fault, once


class FakeCoordinatorBroker(FakeBroker):
    def __init__(self, topics: dict[str, int]) -> None:
        super().__init__(topics)
        self.generation = 0
        self.member_id = ""
        self.committed: dict[tuple[str, int], int] = {}
        self.left: list[str] = []
        #: partitions every JoinGroup answer leaves out (an incremental member lets go of them)
        self.withhold: set[tuple[str, int]] = set()

    def group_requests(self, api: ApiKey) -> list[dict[str, Any]]:
        with self._lock:
            return [r.body for r in self.requests if r.header.api_key == api]

    def _handle(self, request: Request) -> dict[str, Any] | None:
        key = ApiKey(request.header.api_key)
        body = request.body
        if key is ApiKey.FIND_COORDINATOR:
            return {"error_code": 0, "error_message": None, "node_id": self.node_id,
                    "host": "127.0.0.1", "port": self.port}
        if key is ApiKey.JOIN_GROUP:
            if body["member_id"] and body["member_id"] != self.member_id:
                return join_error(ErrorCode.UNKNOWN_MEMBER_ID, body["member_id"])
            self.generation += 1
            self.member_id = body["member_id"] or f"{body['group_id']}-{uuid.uuid4()}"
            owned = [{"topic": t, "partitions": [p for p in range(self.partition_counts[t])
                                                 if (t, p) not in self.withhold]}
                     for t in body["topics"] if t in self.partition_counts]
            return {"error_code": 0, "error_message": None, "generation_id": self.generation,
                    "member_id": self.member_id, "assignment_strategy": "range",
                    "partitions_to_own": owned, "protocol_name": "", "leader_id": "",
                    "members": []}
        if key is ApiKey.HEARTBEAT:
            return error_body(self._membership_code(body))
        if key is ApiKey.LEAVE_GROUP:
            self.left.append(body["member_id"])
            self.member_id = ""
            return error_body(ErrorCode.NONE)
        if key is ApiKey.OFFSET_COMMIT:
            manual = body["generation_id"] < 0 and not body["member_id"]
            code = ErrorCode.NONE if manual else self._membership_code(body)
            if code is ErrorCode.NONE:
                for t in body["topics"]:
                    for p in t["partitions"]:
                        self.committed[(t["name"], p["partition"])] = p["offset"]
            return commit_answer(body, code)
        if key is ApiKey.OFFSET_FETCH:
            return {"error_code": 0, "topics": [
                {"name": t["name"], "partitions": [
                    {"partition": p, "offset": self.committed.get((t["name"], p), -1),
                     "metadata": None, "error_code": 0}
                    for p in t["partitions"]]}
                for t in body["topics"] or []]}
        return super()._handle(request)

    def _membership_code(self, body: dict[str, Any]) -> ErrorCode:
        if body["member_id"] != self.member_id:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if body["generation_id"] != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE


def error_body(code: ErrorCode) -> dict[str, Any]:
    return {"error_code": int(code), "error_message": None}


def join_error(code: ErrorCode, member_id: str = "") -> dict[str, Any]:
    return {"error_code": int(code), "error_message": None, "generation_id": -1,
            "member_id": member_id, "assignment_strategy": "", "partitions_to_own": [],
            "protocol_name": "", "leader_id": "", "members": []}


def commit_answer(body: dict[str, Any], code: ErrorCode) -> dict[str, Any]:
    return {"topics": [
        {"name": t["name"], "partitions": [
            {"partition": p["partition"], "error_code": int(code)} for p in t["partitions"]]}
        for t in body["topics"]]}


def answer_code(api: ApiKey, code: ErrorCode) -> Fault:
    """A fault answering the next ``api`` request with ``code`` (in that API's body shape)."""

    def answer(request: Request) -> dict[str, Any]:
        if api is ApiKey.JOIN_GROUP:
            return join_error(code, request.body["member_id"])
        if api is ApiKey.OFFSET_COMMIT:
            return commit_answer(request.body, code)
        if api is ApiKey.FIND_COORDINATOR:
            return {"error_code": int(code), "error_message": None, "node_id": -1,
                    "host": "", "port": -1}
        return error_body(code)

    return once(api, answer)

