"""Group membership against a real broker process, over raw protocol connections."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.broker.raw import RawClient
from tests.broker_process import BrokerProcess
from tests.coordinator_broker.members import Member, describe, owned, wait_for

pytestmark = pytest.mark.integration

ALL_OF_T = {("t", p) for p in range(6)}


@pytest.fixture
def address(broker: BrokerProcess) -> tuple[str, int]:
    with RawClient(broker.address) as client:
        client.create_topic("t", 6)
    return broker.address


def rejoined(member: Member) -> bool:
    """One heartbeat; rejoin if it asks for that. Whether the member is settled (no error)."""
    code = member.heartbeat()
    if code is ErrorCode.REBALANCE_IN_PROGRESS:
        member.join()
    return code is ErrorCode.NONE


def test_find_coordinator_names_this_broker(broker: BrokerProcess) -> None:
    """DESIGN "Coordinator": one broker leads every __consumer_offsets partition, so it
    coordinates every group (seed 001 ConsumerMetadataRequest)."""
    with RawClient(broker.address) as client:
        for group in ("g", "another group", "ü"):
            answer = client.request(ApiKey.FIND_COORDINATOR, {"group_id": group})
            assert answer == {"error_code": 0, "error_message": None, "node_id": 0,
                              "host": "127.0.0.1", "port": broker.port}
        empty = client.request(ApiKey.FIND_COORDINATOR, {"group_id": ""})
        assert empty["error_code"] == ErrorCode.INVALID_GROUP_ID


def test_two_members_joining_together_share_every_partition(address: tuple[str, int]) -> None:
    """Two members started together land in one round (group_initial_rebalance_delay_ms) and
    each JoinGroup answer carries that member's share: disjoint, together every partition."""
    with Member(address, "g", ["t"]) as a, Member(address, "g", ["t"]) as b:
        a.send_join()
        b.send_join()
        answers = [a.finish_join(), b.finish_join()]
        assert [x["error_code"] for x in answers] == [0, 0]
        assert a.generation == b.generation == 1
        assert a.member_id != b.member_id and a.member_id.startswith("g-")
        assert a.partitions and b.partitions and not a.partitions & b.partitions
        assert a.partitions | b.partitions == ALL_OF_T
        assert a.heartbeat() is b.heartbeat() is ErrorCode.NONE
        group = describe(a.client, "g")
        assert (group["state"], group["generation_id"]) == ("Steady", 1)
        assert {m["member_id"]: owned(m["assignment"]) for m in group["members"]} == {
            a.member_id: a.partitions, b.member_id: b.partitions,
        }


def test_heartbeats_say_rebalance_in_progress_until_the_member_rejoins(
    address: tuple[str, int],
) -> None:
    """Seed 001 "Heartbeats during rebalance", as DESIGN decides: a member of a group that is
    rebalancing gets REBALANCE_IN_PROGRESS and rejoins; its old generation is then stale."""
    with Member(address, "g", ["t"]) as a, Member(address, "g", ["t"]) as b:
        a.join()
        assert (a.generation, a.partitions) == (1, ALL_OF_T)
        b.send_join()  # held until a rejoins
        wait_for(lambda: a.heartbeat() is ErrorCode.REBALANCE_IN_PROGRESS, what="b's join")
        assert a.heartbeat() is ErrorCode.REBALANCE_IN_PROGRESS
        old = a.generation
        a.join()
        assert b.finish_join()["error_code"] == 0
        assert a.generation == b.generation == old + 1
        assert not a.partitions & b.partitions and a.partitions | b.partitions == ALL_OF_T
        assert a.heartbeat() is ErrorCode.NONE
        assert a.heartbeat(generation=old) is ErrorCode.ILLEGAL_GENERATION
        assert b.leave() is ErrorCode.NONE
        # the rest rebalance at once: a's next heartbeat tells it to rejoin
        assert a.heartbeat() is ErrorCode.REBALANCE_IN_PROGRESS
        a.join()
        assert (a.generation, a.partitions) == (old + 2, ALL_OF_T)


def test_a_lost_first_answer_leaves_no_zombie_member(address: tuple[str, int]) -> None:
    """DESIGN (KAFKA-7610): a new member whose connection closed before its first JoinGroup
    answer cannot know its id; the broker tells the coordinator when the connection closes, so
    that member is removed at once rather than holding partitions for its whole session."""
    with Member(address, "g", ["t"]) as a:
        a.join()
        lost = Member(address, "g", ["t"], session_timeout_ms=120_000)
        lost.send_join()
        lost.close()  # before its answer
        wait_for(lambda: a.heartbeat() is ErrorCode.REBALANCE_IN_PROGRESS, what="the new join")
        a.join()  # the round that gives the lost member an id and half the partitions

        assert a.partitions != ALL_OF_T
        wait_for(lambda: rejoined(a) and a.partitions == ALL_OF_T, what="the zombie's removal")
        assert [m["member_id"] for m in describe(a.client, "g")["members"]] == [a.member_id]


def test_a_topic_created_after_subscribing_is_assigned(address: tuple[str, int]) -> None:
    """Seed 001 "Partition changes for subscribed topics": creating a topic a member subscribed
    to by name starts a rebalance that assigns its partitions."""
    with Member(address, "g", ["t", "later"]) as a:
        a.join()
        assert a.partitions == ALL_OF_T
        a.client.create_topic("later", 2)
        assert a.heartbeat() is ErrorCode.REBALANCE_IN_PROGRESS
        a.join()
        assert a.partitions == ALL_OF_T | {("later", 0), ("later", 1)}


def test_session_timeout_removes_a_silent_member(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    """Seed 001 "Failure detection protocol": a member that stops heartbeating is removed after
    its session timeout (a trio timer in the broker); the survivor owns everything."""
    broker = make_broker(settings={"group_min_session_timeout_ms": 200})
    with RawClient(broker.address) as client:
        client.create_topic("t", 6)
    with Member(broker.address, "g", ["t"], session_timeout_ms=10_000) as a, \
            Member(broker.address, "g", ["t"], session_timeout_ms=300) as silent:
        a.send_join()
        silent.send_join()
        a.finish_join()
        silent.finish_join()
        assert a.partitions != ALL_OF_T

        wait_for(lambda: rejoined(a) and a.partitions == ALL_OF_T, what="the session's end")
        assert silent.heartbeat() is ErrorCode.UNKNOWN_MEMBER_ID
