"""Kafka's classic group protocol (client-side assignment) beside the native one: JoinGroup v1
with a protocol type, the leader's SyncGroup, AwaitingSync and its restarts, protocol votes,
the two kinds refusing each other while a group has members, the v2 group record and a
failover, and DescribeGroups decoding Kafka's ConsumerProtocol bytes.

Deterministic: the fake driver and clock of tests/coordinator/harness.py.
"""

from __future__ import annotations

from coordinator import GroupState
from coordinator.offsets_topic import (
    GroupKey,
    GroupValue,
    MemberValue,
    decode_group_value,
    decode_key,
    encode_group_value,
)
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.partitions import TopicPartition
from tests.coordinator.harness import SESSION_MS, Consumer, FakeDriver
from tests.coordinator.kafka_members import (
    DELAY,
    KafkaMember,
    assignment,
    consumers,
    join_all,
    kafka_driver,
    leader_of,
    subscription,
)

E = ErrorCode
S = GroupState


def three_awaiting_sync(driver: FakeDriver) -> list[KafkaMember]:
    """Three Kafka consumers in one round: generation 1, every JoinGroup answered, no sync."""
    members = consumers(driver, 3, "t")
    for m in members:
        m.join()
    for m in members:
        assert m.joined() is None  # held until the join phase ends
    driver.advance(DELAY)
    for m in members:
        answer = m.joined()
        assert answer is not None and answer["error_code"] == 0, answer
    return members


def native_member(driver: FakeDriver, group: str = "g") -> Consumer:
    """A member of the native (broker-side) kind, alone in its first round."""
    member = Consumer(driver, group, ["t"])
    member.join()
    driver.advance(DELAY)
    answer = member.joined()
    assert answer is not None and answer["error_code"] == 0, answer
    return member


def plan(members: list[KafkaMember]) -> dict[str, bytes]:
    return {m.member_id: assignment(t=[i]) for i, m in enumerate(members)}


def steady_kafka_group(driver: FakeDriver) -> list[KafkaMember]:
    members = three_awaiting_sync(driver)
    leader_of(members).sync(plan(members))
    for m in members:
        if not m.is_leader:
            m.sync()
    assert driver.group("g").state is S.STEADY
    return members


def test_three_members_leader_sync_makes_the_group_steady_with_its_assignments():
    driver = kafka_driver(topics={"t": 3})
    members = three_awaiting_sync(driver)
    group = driver.group("g")
    assert group.state is S.REBALANCING and group.generation == 1
    assert not driver.log[driver.partition_of("g")], "nothing is written before the sync"
    leader = leader_of(members)
    assert leader.member_id == members[0].member_id  # the first to have joined
    assert {m.leader_id for m in members} == {leader.member_id}
    assert {m.protocol for m in members} == {"range"}
    assert leader.members == {m.member_id: subscription("t") for m in members}
    assert all(not m.members for m in members if not m.is_leader)

    wanted = plan(members)
    leader.sync(wanted)
    assert group.state is S.STEADY
    assert leader.synced() == {"error_code": 0, "error_message": None,
                               "assignment": wanted[leader.member_id]}
    for m in members:
        if not m.is_leader:
            answer = m.driver.call(ApiKey.SYNC_GROUP, {
                "group_id": "g", "member_id": m.member_id, "generation_id": 1,
                "assignments": []})
            assert answer["assignment"] == wanted[m.member_id]  # Steady: at once
    assert {mid: mem.assignment_bytes for mid, mem in group.members.items()} == wanted
    assert all(m.heartbeat() is E.NONE for m in members)


def test_followers_syncing_before_the_leader_are_held_until_the_generation_is_written():
    driver = kafka_driver(topics={"t": 3}, auto_ack=False)
    members = three_awaiting_sync(driver)
    leader = leader_of(members)
    followers = [m for m in members if not m.is_leader]
    for f in followers:
        f.sync()
        assert f.synced() is None
    wanted = plan(members)
    leader.sync(wanted)
    assert leader.synced() is None and driver.group("g").state is S.REBALANCING
    driver.ack()
    for m in members:
        assert m.synced() == {"error_code": 0, "error_message": None,
                              "assignment": wanted[m.member_id]}
    assert driver.group("g").state is S.STEADY


def test_members_the_leader_left_out_get_empty_bytes():
    driver = kafka_driver(topics={"t": 3})
    members = three_awaiting_sync(driver)
    leader = leader_of(members)
    follower = next(m for m in members if not m.is_leader)
    follower.sync()
    leader.sync({leader.member_id: assignment(t=[0, 1, 2]), "someone-else": b"x"})
    assert follower.synced()["assignment"] == b""
    stored = {mid: m.assignment_bytes for mid, m in driver.group("g").members.items()}
    assert stored == {m.member_id: (assignment(t=[0, 1, 2]) if m.is_leader else b"")
                      for m in members}


def test_heartbeats_in_awaiting_sync_are_answered_none_and_commits_wait():
    driver = kafka_driver(topics={"t": 3})
    members = three_awaiting_sync(driver)
    driver.advance(SESSION_MS - 1)
    assert all(m.heartbeat() is E.NONE for m in members)  # sessions extended
    driver.advance(SESSION_MS - 1)
    assert driver.group("g").state is S.REBALANCING and len(driver.group("g").members) == 3
    token = driver.commit("g", 1, members[0].member_id, {("t", 0): 5})
    assert driver.answer(token)["topics"][0]["partitions"][0]["error_code"] == \
        E.REBALANCE_IN_PROGRESS


def test_leader_leaving_before_sync_restarts_the_round_with_a_new_leader():
    driver = kafka_driver(topics={"t": 3})
    members = three_awaiting_sync(driver)
    leader = leader_of(members)
    rest = [m for m in members if m is not leader]
    rest[0].sync()
    assert leader.leave() is E.NONE
    assert driver.group("g").state is S.PREPARE_REBALANCE
    assert rest[0].synced()["error_code"] == E.REBALANCE_IN_PROGRESS
    assert rest[1].heartbeat() is E.REBALANCE_IN_PROGRESS
    join_all(rest)
    new_leader = leader_of(rest)
    assert new_leader is rest[0] and new_leader.generation == 2
    new_leader.sync({m.member_id: assignment(t=[0]) for m in rest})
    assert driver.group("g").state is S.STEADY
    assert set(driver.group("g").members) == {m.member_id for m in rest}


def test_leader_stays_leader_while_it_is_a_member():
    driver = kafka_driver(topics={"t": 3})
    members = steady_kafka_group(driver)
    leader = leader_of(members)
    newcomer = KafkaMember(driver, "g", [("range", subscription("t"))])
    newcomer.join()
    join_all(list(reversed(members)))  # the leader rejoins last
    assert newcomer.joined()["leader_id"] == leader.member_id
    assert len(leader.members) == 4


def test_session_expiry_in_awaiting_sync_restarts_the_round():
    driver = kafka_driver(topics={"t": 3})
    members = three_awaiting_sync(driver)
    silent = members[2]
    members[1].sync()
    driver.advance(SESSION_MS // 2)
    assert members[0].heartbeat() is E.NONE and members[1].heartbeat() is E.NONE
    driver.advance(SESSION_MS // 2)
    group = driver.group("g")
    assert group.state is S.PREPARE_REBALANCE
    assert silent.member_id not in group.members
    assert members[1].synced()["error_code"] == E.REBALANCE_IN_PROGRESS
    join_all(members[:2])
    leader_of(members[:2]).sync(plan(members[:2]))
    assert group.state is S.STEADY and group.generation == 2


def test_rejoin_unchanged_in_awaiting_sync_gets_the_same_answer_again():
    driver = kafka_driver(topics={"t": 3})
    members = three_awaiting_sync(driver)
    leader = leader_of(members)
    again = leader.join_now()
    assert again["generation_id"] == 1 and again["leader_id"] == leader.member_id
    assert len(again["members"]) == 3
    follower = members[1]
    assert follower.join_now()["members"] == []
    assert driver.group("g").state is S.REBALANCING and driver.group("g").generation == 1


def test_a_new_or_changed_member_in_awaiting_sync_starts_the_round_over():
    driver = kafka_driver(topics={"t": 3, "u": 1})
    members = three_awaiting_sync(driver)
    members[1].sync()
    members[2].protocols = [("range", subscription("t", "u"))]
    members[2].join()
    assert driver.group("g").state is S.PREPARE_REBALANCE
    assert members[1].synced()["error_code"] == E.REBALANCE_IN_PROGRESS
    join_all(members[:2])
    assert members[2].joined()["generation_id"] == 2
    assert driver.group("g").members[members[2].member_id].subscription == ("t", "u")

    newcomer = KafkaMember(driver, "g", [("range", subscription("t"))])
    newcomer.join()
    assert driver.group("g").state is S.PREPARE_REBALANCE
    join_all(members)
    assert newcomer.joined()["generation_id"] == 3


def test_protocol_is_chosen_by_votes_among_those_every_member_supports():
    driver = kafka_driver(topics={"t": 3})
    sub = subscription("t")
    members = [
        KafkaMember(driver, "g", [("sticky", sub), ("roundrobin", sub), ("range", sub)]),
        KafkaMember(driver, "g", [("range", sub), ("roundrobin", sub)]),
        KafkaMember(driver, "g", [("range", sub), ("roundrobin", sub)]),
    ]
    join_all(members)  # sticky is not supported by all; range has two votes
    assert {m.protocol for m in members} == {"range"}
    assert driver.describe("g")["assignment_strategy"] == "range"

    tie = kafka_driver(topics={"t": 3})
    pair = [KafkaMember(tie, "g", [("roundrobin", sub), ("range", sub)]),
            KafkaMember(tie, "g", [("range", sub), ("roundrobin", sub)])]
    join_all(pair)  # one vote each: the leader's preference wins
    assert pair[0].is_leader and {m.protocol for m in pair} == {"roundrobin"}


def test_a_member_sharing_no_protocol_with_the_group_is_refused():
    driver = kafka_driver(topics={"t": 3})
    members = steady_kafka_group(driver)
    odd = KafkaMember(driver, "g", [("sticky", subscription("t"))])
    answer = odd.join_now()
    assert answer["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert driver.group("g").state is S.STEADY
    empty = KafkaMember(driver, "g2", [])
    assert empty.join_now()["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert all(m.heartbeat() is E.NONE for m in members)


def test_native_member_cannot_join_a_kafka_group_nor_the_other_way_round():
    driver = kafka_driver(topics={"t": 3})
    steady_kafka_group(driver)
    native = Consumer(driver, "g", ["t"])
    answer = native.join_now()
    assert answer["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert answer["error_message"] == (
        "group 'g' has members using protocol type 'consumer' (Kafka client-side assignment); "
        "a member with protocol type '' (odradek broker-side assignment) cannot join until it "
        "is Empty")

    native_member(driver, "n")
    kafka = KafkaMember(driver, "n", [("range", subscription("t"))])
    answer = kafka.join_now()
    assert answer["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert "protocol type 'consumer'" in answer["error_message"]
    assert "protocol type ''" in answer["error_message"]
    assert driver.group("n").state is S.STEADY


def test_an_empty_group_taken_over_by_the_other_kind_keeps_its_offsets():
    driver = kafka_driver(topics={"t": 3})
    native = native_member(driver)
    assert native.commit({("t", 0): 42}) == {("t", 0): 0}
    assert native.leave() is E.NONE
    assert driver.group("g").state is S.EMPTY

    (kafka,) = consumers(driver, 1, "t")
    join_all([kafka])
    kafka.sync({kafka.member_id: assignment(t=[0, 1, 2])})
    assert driver.group("g").protocol_type == "consumer"
    assert driver.fetch_offsets("g")[("t", 0)] == (42, None)
    token = driver.commit("g", kafka.generation, kafka.member_id, {("t", 1): 7})
    assert driver.answer(token)["topics"][0]["partitions"][0]["error_code"] == 0
    assert kafka.leave() is E.NONE

    native_member(driver)
    assert driver.group("g").protocol_type == ""
    assert driver.fetch_offsets("g") == {("t", 0): (42, None), ("t", 1): (7, None)}


def test_sync_group_errors():
    driver = kafka_driver(topics={"t": 3})
    members = three_awaiting_sync(driver)
    stranger = KafkaMember(driver, "nobody", [], member_id="x", generation=1)
    stranger.sync()
    assert stranger.synced()["error_code"] == E.UNKNOWN_MEMBER_ID
    unknown = KafkaMember(driver, "g", [], member_id="g-unknown", generation=1)
    unknown.sync()
    assert unknown.synced()["error_code"] == E.UNKNOWN_MEMBER_ID
    members[1].sync(generation=7)
    assert members[1].synced() == {"error_code": E.ILLEGAL_GENERATION, "error_message": None,
                                   "assignment": b""}
    KafkaMember(driver, "g", [("range", subscription("t"))]).join()  # back to PrepareRebalance
    members[1].sync()
    assert members[1].synced()["error_code"] == E.REBALANCE_IN_PROGRESS

    native = native_member(driver, "n")
    as_kafka = KafkaMember(driver, "n", [], member_id=native.member_id, generation=1)
    as_kafka.sync()
    assert as_kafka.synced()["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert "broker" in as_kafka.synced()["error_message"]

    elsewhere = kafka_driver(topics={"t": 3}, lead=[])
    lost = KafkaMember(elsewhere, "g", [], member_id="m", generation=1)
    lost.sync()
    assert lost.synced()["error_code"] == E.NOT_COORDINATOR
    elsewhere.apply(elsewhere.coordinator.start_loading(elsewhere.partition_of("g")))
    lost.sync()
    assert lost.synced()["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS


def test_a_failed_write_answers_held_syncs_with_the_error_and_rejoins():
    driver = kafka_driver(topics={"t": 3}, auto_ack=False)
    members = three_awaiting_sync(driver)
    members[1].sync()
    leader_of(members).sync(plan(members))
    driver.ack(E.NOT_LEADER_FOR_PARTITION)
    for m in (members[0], members[1]):
        assert m.synced()["error_code"] == E.NOT_COORDINATOR
    group = driver.group("g")
    assert group.state is S.PREPARE_REBALANCE and len(group.members) == 3
    join_all(members)
    leader_of(members).sync(plan(members))
    driver.ack()
    assert group.state is S.STEADY and group.generation == 2


def test_joins_and_leaves_while_the_generation_is_written_wait_for_it():
    driver = kafka_driver(topics={"t": 3}, auto_ack=False)
    members = three_awaiting_sync(driver)
    leader_of(members).sync(plan(members))
    assert members[2].leave() is E.NONE
    newcomer = KafkaMember(driver, "g", [("range", subscription("t"))])
    newcomer.join()
    assert driver.group("g").state is S.REBALANCING
    driver.ack()
    group = driver.group("g")
    assert group.generation == 1
    assert group.state is S.PREPARE_REBALANCE and members[2].member_id not in group.members
    join_all(members[:2])
    assert newcomer.joined()["generation_id"] == 2


def test_topic_changes_start_no_round_when_the_leader_assigns():
    driver = kafka_driver(topics={"t": 3})
    members = steady_kafka_group(driver)
    driver.topics["t"] = 6
    driver.apply(driver.coordinator.on_topic_partitions_changed("t", 6, driver.now))
    assert driver.group("g").state is S.STEADY
    assert all(m.heartbeat() is E.NONE for m in members)


def test_group_record_v2_round_trip_and_v1_still_read():
    member = MemberValue("g-1", "c", "/h", 10_000, 30_000, ("t",),
                         (TopicPartition("t", 0),), subscription("t"), assignment(t=[0]),
                         (("range", subscription("t")), ("rr", b"\x00")))
    value = GroupValue(3, "range", 123, (member,), "consumer", "g-1")
    assert encode_group_value(value)[:1] == b"\x97"  # a msgpack array of 7: version 2
    assert decode_group_value(encode_group_value(value)) == value
    native = GroupValue(2, "range", 5, (MemberValue("g-2", "c", "/h", 1, 2, ("t",), ()),))
    assert encode_group_value(native)[:2] == b"\x95\x01"  # still version 1
    assert decode_group_value(encode_group_value(native)) == native


def test_a_kafka_group_comes_back_steady_with_its_bytes_after_failover():
    driver = kafka_driver(topics={"t": 3})
    members = steady_kafka_group(driver)
    before = driver.describe("g")
    partition = driver.partition_of("g")
    records = driver.log[partition]
    assert isinstance(decode_key(records[-1][0]), GroupKey)
    driver.reload(partition)
    group = driver.group("g")
    assert group.state is S.STEADY and group.protocol_type == "consumer"
    after = driver.describe("g")
    assert {k: v for k, v in after.items() if k != "state_since_ms"} == \
        {k: v for k, v in before.items() if k != "state_since_ms"}
    for m in members:
        m.sync()
        assert m.synced()["assignment"] == plan(members)[m.member_id]
        assert m.heartbeat() is E.NONE
    follower = next(m for m in members if not m.is_leader)
    answer = follower.join_now()  # unchanged: the current generation again, no round
    assert answer["generation_id"] == 1 and answer["leader_id"] == leader_of(members).member_id
    assert group.state is S.STEADY


def test_the_leader_rejoining_a_steady_group_starts_a_round():
    """Kafka's leader rejoins when it sees a subscribed topic's partitions change; the
    coordinator starts no round on topic changes for these groups, so the leader's JoinGroup
    must start one even with its metadata unchanged."""
    driver = kafka_driver(topics={"t": 3})
    members = steady_kafka_group(driver)
    leader = leader_of(members)
    leader.join()
    assert driver.group("g").state is S.PREPARE_REBALANCE
    assert all(m.heartbeat() is E.REBALANCE_IN_PROGRESS for m in members if m is not leader)
    join_all([m for m in members if m is not leader])
    assert leader.joined()["generation_id"] == 2 and len(leader.members) == 3


def test_describe_decodes_consumer_protocol_bytes():
    driver = kafka_driver(topics={"t": 3, "u": 2})
    members = [KafkaMember(driver, "g", [("range", subscription("u", "t"))]),
               KafkaMember(driver, "g", [("range", b"\x00garbage")])]
    join_all(members)
    leader_of(members).sync({members[0].member_id: assignment(t=[0, 2], u=[1]),
                             members[1].member_id: b"\xff"})
    described = driver.describe("g")
    assert described["protocol_type"] == "consumer"
    assert described["assignment_strategy"] == "range"
    by_id = {m["member_id"]: m for m in described["members"]}
    first, second = by_id[members[0].member_id], by_id[members[1].member_id]
    assert first["subscription"] == ["t", "u"]
    assert first["assignment"] == [{"topic": "t", "partitions": [0, 2]},
                                   {"topic": "u", "partitions": [1]}]
    assert first["metadata"] == subscription("u", "t")
    assert second["subscription"] == [] and second["assignment"] == []
    assert second["assignment_bytes"] == b"\xff"


def test_other_protocol_types_are_opaque_to_describe():
    driver = kafka_driver()
    worker = KafkaMember(driver, "connect-cluster", [("default", b"\x00\x01")],
                         protocol_type="connect")
    join_all([worker])
    worker.sync({worker.member_id: b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"})
    (member,) = driver.describe("connect-cluster")["members"]
    assert driver.describe("connect-cluster")["protocol_type"] == "connect"
    assert member["subscription"] == [] and member["assignment"] == []
    assert member["metadata"] == b"\x00\x01"


def test_native_groups_describe_with_empty_protocol_fields():
    driver = kafka_driver(topics={"t": 1})
    native_member(driver)
    described = driver.describe("g")
    assert described["protocol_type"] == ""
    assert described["members"][0]["metadata"] == b""
    assert described["members"][0]["assignment_bytes"] == b""


def test_failover_before_the_leaders_sync_loses_only_the_unwritten_generation():
    """Nothing is written before the leader's SyncGroup: a new coordinator loads the last
    written generation, and members of the lost one are told to rejoin."""
    driver = kafka_driver(topics={"t": 3})
    members = steady_kafka_group(driver)
    newcomer = KafkaMember(driver, "g", [("range", subscription("t"))])
    newcomer.join()
    join_all(members)
    assert newcomer.joined()["generation_id"] == 2
    driver.reload(driver.partition_of("g"))
    group = driver.group("g")
    assert group.state is S.STEADY and group.generation == 1
    leader_of(members).sync(plan(members))
    assert leader_of(members).synced()["error_code"] == E.ILLEGAL_GENERATION
    assert newcomer.heartbeat() is E.UNKNOWN_MEMBER_ID
