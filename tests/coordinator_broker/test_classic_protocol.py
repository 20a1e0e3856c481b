"""Kafka's classic group protocol through a real broker process: JoinGroup v1 with a protocol
type, the leader's SyncGroup, DescribeGroups v2 -- and older versions of both still answered in
their own shapes."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka.consumer_protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from protocol.wire import decode_response_body
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.coordinator_broker.members import SESSION_MS

pytestmark = pytest.mark.integration

SUBSCRIPTION = encode_subscription(Subscription(("t",)))


def join_body(member_id: str = "") -> dict[str, Any]:
    return {
        "group_id": "k", "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": SESSION_MS,
        "topics": [], "member_id": member_id, "assignment_strategy": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": SUBSCRIPTION}],
    }


def sync(client: RawClient, member_id: str, generation: int,
         assignments: dict[str, bytes]) -> dict[str, Any]:
    return client.request(ApiKey.SYNC_GROUP, {
        "group_id": "k", "member_id": member_id, "generation_id": generation,
        "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()],
    })


def test_two_kafka_consumers_join_sync_and_are_described(broker: BrokerProcess) -> None:
    with RawClient(broker.address) as a, RawClient(broker.address) as b:
        a.create_topic("t", 2)
        sent = [a.send(ApiKey.JOIN_GROUP, join_body(), version=1),
                b.send(ApiKey.JOIN_GROUP, join_body(), version=1)]
        answers = []
        for client, correlation_id in zip((a, b), sent, strict=True):
            got, body = client.receive()
            assert got == correlation_id
            answers.append(decode_response_body(ApiKey.JOIN_GROUP, 1, body))
        assert [x["error_code"] for x in answers] == [0, 0]
        assert answers[0]["leader_id"] == answers[1]["leader_id"]
        assert {x["protocol_name"] for x in answers} == {"range"}
        leader_index = 0 if answers[0]["member_id"] == answers[0]["leader_id"] else 1
        leader, follower = answers[leader_index], answers[1 - leader_index]
        assert {m["member_id"] for m in leader["members"]} == {
            leader["member_id"], follower["member_id"]}
        assert follower["members"] == []
        generation = leader["generation_id"]
        plan = {
            leader["member_id"]: encode_assignment(Assignment((("t", (0,)),))),
            follower["member_id"]: encode_assignment(Assignment((("t", (1,)),))),
        }
        leader_client = (a, b)[leader_index]
        follower_client = (a, b)[1 - leader_index]
        synced = sync(leader_client, leader["member_id"], generation, plan)
        assert synced["error_code"] == 0 and synced["assignment"] == plan[leader["member_id"]]
        followed = sync(follower_client, follower["member_id"], generation, {})
        assert followed["assignment"] == plan[follower["member_id"]]

        v2 = a.request(ApiKey.DESCRIBE_GROUPS, {"group_ids": ["k"]}, version=2)["groups"][0]
        assert (v2["state"], v2["protocol_type"], v2["assignment_strategy"]) == \
            ("Steady", "consumer", "range")
        by_id = {m["member_id"]: m for m in v2["members"]}
        assert by_id[follower["member_id"]]["assignment"] == [{"topic": "t", "partitions": [1]}]
        assert by_id[follower["member_id"]]["assignment_bytes"] == plan[follower["member_id"]]
        assert by_id[leader["member_id"]]["subscription"] == ["t"]
        v1 = a.request(ApiKey.DESCRIBE_GROUPS, {"group_ids": ["k"]}, version=1)["groups"][0]
        assert "protocol_type" not in v1 and "metadata" not in v1["members"][0]

        native = a.request(ApiKey.JOIN_GROUP, {
            "group_id": "k", "session_timeout_ms": SESSION_MS,
            "rebalance_timeout_ms": SESSION_MS, "topics": ["t"], "member_id": "",
            "assignment_strategy": "range"})
        assert native["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert set(native) == {"error_code", "error_message", "generation_id", "member_id",
                               "assignment_strategy", "partitions_to_own"}  # v0's shape
