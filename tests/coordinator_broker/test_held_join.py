"""A JoinGroup held for its round delays nothing but the requests behind it on its own
connection: answers on other connections, and answers queued before it on its own, leave at
once (broker/response_writer.py)."""

from __future__ import annotations

import select

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.wire import decode_response_body
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.coordinator_broker.members import Member, wait_for

pytestmark = pytest.mark.integration


def nothing_to_read(client: RawClient) -> bool:
    return not select.select([client.sock], [], [], 0)[0]


@pytest.fixture
def address(broker: BrokerProcess) -> tuple[str, int]:
    with RawClient(broker.address) as client:
        client.create_topic("t", 2)
    return broker.address


def test_a_held_join_does_not_delay_a_heartbeat_on_another_connection(
    address: tuple[str, int],
) -> None:
    with (
        Member(address, "g", ["t"]) as a, Member(address, "g", ["t"]) as b,
        Member(address, "other", ["t"]) as c,
    ):
        a.join()
        c.join()
        b.send_join()  # held until a rejoins
        wait_for(lambda: a.heartbeat() is ErrorCode.REBALANCE_IN_PROGRESS, what="b's join")
        for _ in range(20):  # answered while b's JoinGroup is held
            assert c.heartbeat() is ErrorCode.NONE
        assert nothing_to_read(b.client)
        a.join()
        assert b.finish_join()["error_code"] == 0


def test_answers_queued_before_a_held_join_leave_while_it_is_held(
    address: tuple[str, int],
) -> None:
    with Member(address, "g", ["t"]) as a, RawClient(address) as x:
        a.join()
        sent = [
            x.send(ApiKey.HEARTBEAT, {"group_id": "g", "member_id": a.member_id,
                                      "generation_id": a.generation}),
            x.send(ApiKey.JOIN_GROUP, {
                "group_id": "g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
                "topics": ["t"], "member_id": "", "assignment_strategy": "range",
            }),
        ]
        correlation_id, body = x.receive()  # while the JoinGroup is held
        assert correlation_id == sent[0]
        assert decode_response_body(ApiKey.HEARTBEAT, 0, body)["error_code"] == ErrorCode.NONE
        wait_for(lambda: a.heartbeat() is ErrorCode.REBALANCE_IN_PROGRESS, what="x's join")
        assert nothing_to_read(x)
        a.join()
        correlation_id, body = x.receive()
        assert correlation_id == sent[1]
        assert decode_response_body(ApiKey.JOIN_GROUP, 0, body)["error_code"] == ErrorCode.NONE
