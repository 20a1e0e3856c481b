"""Issue #5 scenario 24: seed 001 "Co-ordinator failure during rebalance", one test per step.

A rebalance goes through: (1) the coordinator learns a rebalance is needed, (2) tells members in
heartbeats, (3) receives their JoinGroups, (4) writes the new generation, (5) answers the joins.
Each test fails over (resign, then load the partition from the log) at one step and checks the
group ends consistent: Steady, one generation, every subscribed partition owned exactly once.
"""

from __future__ import annotations

from coordinator import GroupState
from protocol.errors import ErrorCode
from tests.coordinator.harness import SESSION_MS, Consumer, FakeDriver, form_group, steady_group

E = ErrorCode


def assert_consistent(driver: FakeDriver, consumers: list[Consumer], group_id: str = "g") -> None:
    group = driver.group(group_id)
    assert group.state is GroupState.STEADY
    assert {c.member_id for c in consumers} == set(group.members)
    assert {c.generation for c in consumers} == {group.generation}
    owned = [tp for c in consumers for tp in c.partitions]
    expected = {(t, p) for t in group.subscribed_topics() for p in range(driver.topics.get(t, 0))}
    assert sorted(owned) == sorted(expected)
    for c in consumers:
        assert c.heartbeat() is E.NONE


def test_24_step1_notification_lost_is_detected_on_load():
    """Seed 001: "If the # of topics or # of partitions for the subscribed topics are different
    from the ones in the previous partition ownership decision, the new co-ordinator detects the
    need for a rebalance and initiates one for the group." And "if the consumers that connect to
    the new co-ordinator are different from the ones in the group's generation metadata", the
    missing ones are dropped by their session timeout, which restarts at load."""
    driver = FakeDriver(topics={"t": 2})
    a, b, _gone = steady_group(driver, 3, ["t"])
    driver.topics["t"] = 6  # partitions added; the coordinator fails before it is told
    driver.reload(driver.partition_of("g"))
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    assert a.heartbeat() is E.REBALANCE_IN_PROGRESS
    a.join()
    b.join()
    driver.advance(SESSION_MS)  # the third never comes back: its session ends, the round completes
    a.joined()
    b.joined()
    assert_consistent(driver, [a, b])
    assert a.generation == 4


def test_24_step2_rebalance_signalled_to_some_then_failover():
    """Seed 001: "If a rebalance was initiated due to a consumer failure and the consumer
    recovers before the co-ordinator failover completes, the co-ordinator will not initiate a
    rebalance. However, if any consumer (with an empty or unknown consumer id) sends it a
    JoinGroupRequest, it will initiate a rebalance for the entire group." Decision: a member that
    was told to rejoin and does so with its id and an unchanged subscription gets the current
    assignment back without a new round."""
    driver = FakeDriver(topics={"t": 3})
    told, slow, untold = form_group([
        Consumer(driver, "g", ["t"], session_timeout_ms=3 * SESSION_MS),
        Consumer(driver, "g", ["t"], session_timeout_ms=SESSION_MS),
        Consumer(driver, "g", ["t"], session_timeout_ms=3 * SESSION_MS),
    ])
    driver.advance(SESSION_MS)  # `slow` expires: a rebalance starts
    assert told.heartbeat() is E.REBALANCE_IN_PROGRESS
    driver.reload(driver.partition_of("g"))
    assert slow.heartbeat() is E.NONE  # recovered: no rebalance
    assert untold.heartbeat() is E.NONE
    assert told.join_now()["generation_id"] == 3
    assert_consistent(driver, [told, slow, untold])
    newcomer = Consumer(driver, "g", ["t"])
    newcomer.join()
    assert told.heartbeat() is E.REBALANCE_IN_PROGRESS
    for c in (told, slow, untold):
        c.join()
    for c in (told, slow, untold, newcomer):
        assert c.joined()["generation_id"] == 4
    assert_consistent(driver, [told, slow, untold, newcomer])


def test_24_step3_joins_from_a_subset_then_failover():
    """Seed 001: "If a co-ordinator fails at step #3, it might receive JoinGroupRequests from
    only a subset of consumers in the group. After failover, the co-ordinator might receive a
    HeartbeatRequest from all alive consumers OR JoinGroupRequests from some." Held joins are
    answered NOT_COORDINATOR at resignation; the new member's retry starts the round again."""
    driver = FakeDriver(topics={"t": 3})
    a, b = steady_group(driver, 2, ["t"])
    newcomer = Consumer(driver, "g", ["t"])
    newcomer.join()
    a.join()
    driver.reload(driver.partition_of("g"))
    assert newcomer.joined()["error_code"] == E.NOT_COORDINATOR
    assert a.joined()["error_code"] == E.NOT_COORDINATOR
    assert b.heartbeat() is E.NONE
    assert a.join_now()["generation_id"] == 2  # its id and subscription: the current assignment
    assert_consistent(driver, [a, b])
    newcomer.join()
    a.join()
    b.join()
    for c in (a, b, newcomer):
        assert c.joined()["generation_id"] == 3
    assert_consistent(driver, [a, b, newcomer])


def test_24_step4_generation_written_but_not_answered():
    """Seed 001: "If a co-ordinator fails at step #4, it might fail after writing the new
    generation id and group membership ... After failover, the consumer will send
    HeartbeatRequests to the new co-ordinator with an older generation id. The co-ordinator
    triggers a rebalance by returning an IllegalGeneration error code in the response that causes
    the consumer to send it a JoinGroupRequest." Decision: that JoinGroup (with the member's id)
    gets the written generation's assignment at once."""
    driver = FakeDriver(topics={"t": 2})
    a, b = steady_group(driver, 2, ["t"])
    driver.auto_ack = False
    driver.topics["t"] = 4
    driver.apply(driver.coordinator.on_topic_partitions_changed("t", 4, driver.now))
    a.join()
    b.join()
    assert driver.group("g").state is GroupState.REBALANCING
    driver.reload(driver.partition_of("g"), in_flight_written=True)
    driver.auto_ack = True
    assert a.joined()["error_code"] == b.joined()["error_code"] == E.NOT_COORDINATOR
    assert driver.group("g").generation == 3
    assert a.heartbeat() is E.ILLEGAL_GENERATION
    assert a.join_now()["generation_id"] == 3
    assert b.join_now()["generation_id"] == 3
    assert_consistent(driver, [a, b])


def test_24_step5_answers_reach_only_some_members():
    """Seed 001: "A consumer that received a JoinGroupResponse will detect the failed
    co-ordinator while sending a heartbeat or committing offsets. At this point, it will discover
    the new co-ordinator and send it a heartbeat with the new generation id. The co-ordinator
    will send it a HeartbeatResponse with no error code at this point. A consumer that did not
    receive a JoinGroupResponse will discover the new co-ordinator and send it a
    JoinGroupRequest." Decision: with its id and unchanged subscription, that JoinGroup gets
    the written assignment at once instead of another round."""
    driver = FakeDriver(topics={"t": 4})
    lucky, unlucky = steady_group(driver, 2, ["t"])
    driver.topics["t"] = 6
    driver.apply(driver.coordinator.on_topic_partitions_changed("t", 6, driver.now))
    lucky.join()
    unlucky.join()
    lucky.joined()
    unlucky.pending = None  # its answer is lost with the coordinator
    driver.reload(driver.partition_of("g"))
    assert lucky.heartbeat() is E.NONE
    assert unlucky.heartbeat() is E.ILLEGAL_GENERATION
    assert unlucky.join_now()["generation_id"] == 3
    assert_consistent(driver, [lucky, unlucky])


def test_describe_says_since_when_a_group_is_in_its_state_also_after_a_failover():
    """DescribeGroups v1's ``state_since_ms``: the time of the group's last move; a new
    coordinator takes it from the group's record (when its generation was written), so a
    Steady group does not look new after a failover."""
    driver = FakeDriver(topics={"t": 2})
    assert driver.describe("g")["state_since_ms"] == -1  # no such group
    steady_group(driver, 2, ["t"])
    steady_at = driver.now
    assert driver.describe("g")["state_since_ms"] == steady_at
    driver.advance(SESSION_MS // 2)
    driver.reload(driver.partition_of("g"))
    assert driver.describe("g")["state"] == "Steady"
    assert driver.describe("g")["state_since_ms"] == steady_at
