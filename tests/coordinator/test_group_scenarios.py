"""Issue #5 scenarios 1-16 and 22-24: membership, rounds, failure detection and loading.

Deterministic: a fake clock and a fake driver (tests/coordinator/harness.py), no network, no
sleeps. Where the seed gives the rule, the docstring quotes it.
"""

from __future__ import annotations

import re
import uuid

from coordinator import CoordinatorConfig, GroupState, LoaderState, RequestContext, Respond
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.coordinator.harness import (
    SESSION_MS,
    Consumer,
    FakeDriver,
    committed_errors,
    form_group,
    make_config,
    steady_group,
)

E = ErrorCode
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def test_01_first_join_creates_group_with_generation_1_and_all_partitions():
    """Seed 001 "Consumer id assignment": "it assigns a new id <group>-<uuid> to every consumer
    that did not have a consumer id in the JoinGroupRequest". With the default config the first
    round waits group_initial_rebalance_delay_ms for more members first."""
    driver = FakeDriver(CoordinatorConfig(), {"t0": 3, "t1": 2}, new_uuid=lambda: str(uuid.uuid4()))
    c = Consumer(driver, "g", ["t0", "t1"])
    c.join()
    assert c.joined() is None
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    driver.advance(driver.config.group_initial_rebalance_delay_ms)
    answer = c.joined()
    assert answer is not None and answer["error_code"] == 0
    assert re.fullmatch(f"g-{UUID}", answer["member_id"])
    assert answer["generation_id"] == 1
    assert answer["assignment_strategy"] == "range"
    assert c.partitions == {("t0", 0), ("t0", 1), ("t0", 2), ("t1", 0), ("t1", 1)}
    assert driver.describe("g")["state"] == "Steady"


def test_initial_delay_puts_members_starting_together_in_one_round():
    """Each new member extends the initial delay, so a staggered start is still one round."""
    driver = FakeDriver(CoordinatorConfig(), {"t": 4})
    delay = driver.config.group_initial_rebalance_delay_ms
    first, second = Consumer(driver, "g", ["t"]), Consumer(driver, "g", ["t"])
    first.join()
    driver.advance(delay - 1)
    second.join()
    driver.advance(delay - 1)
    assert first.joined() is None and second.joined() is None
    driver.advance(1)
    assert first.joined()["generation_id"] == second.joined()["generation_id"] == 1
    assert len(first.partitions) == len(second.partitions) == 2


def test_02_unknown_member_id_is_rejected_without_rebalance():
    """Seed 001: "If a consumer id is specified in the JoinGroupRequest but it does not match the
    ids in the current group membership, the co-ordinator sends an UnknownConsumer error code in
    the JoinGroupResponse and prevents the consumer from joining the group. This does not cause
    a rebalance operation for the rest of the consumers in the group"."""
    driver = FakeDriver(topics={"t": 2})
    stranger = Consumer(driver, "new-group", ["t"], member_id="new-group-bogus")
    assert stranger.join_now()["error_code"] == E.UNKNOWN_MEMBER_ID
    assert driver.coordinator.group("new-group") is None

    (member,) = steady_group(driver, 1, ["t"])
    intruder = Consumer(driver, "g", ["t"], member_id="g-bogus")
    assert intruder.join_now()["error_code"] == E.UNKNOWN_MEMBER_ID
    assert driver.group("g").state is GroupState.STEADY
    assert driver.group("g").generation == 1
    assert member.heartbeat() is E.NONE


def test_03_invalid_group_id_and_session_timeouts_change_nothing():
    driver = FakeDriver(topics={"t": 2})
    assert Consumer(driver, "", ["t"]).join_now()["error_code"] == E.INVALID_GROUP_ID
    low = driver.config.group_min_session_timeout_ms
    high = driver.config.group_max_session_timeout_ms
    for bad in (low - 1, high + 1):
        answer = Consumer(driver, "g", ["t"], session_timeout_ms=bad).join_now()
        assert answer["error_code"] == E.INVALID_SESSION_TIMEOUT
        assert driver.coordinator.group("g") is None
    (member,) = steady_group(driver, 1, ["t"])
    answer = Consumer(driver, "g", ["t"], session_timeout_ms=high + 1).join_now()
    assert answer["error_code"] == E.INVALID_SESSION_TIMEOUT
    assert driver.group("g").state is GroupState.STEADY and len(driver.group("g").members) == 1
    assert member.heartbeat() is E.NONE


def test_04_unknown_and_inconsistent_strategies_are_rejected():
    """Seed 001: "It can receive an UnknownPartitioningStrategy error code if the friendly name
    of the strategy in the JoinGroupRequest is unknown to the brokers" and
    "InconsistentPartitioningStrategy error code if some consumers in the same group specify
    conflicting partition assignment strategies"."""
    driver = FakeDriver(topics={"t": 2})
    answer = Consumer(driver, "g", ["t"], strategy="bogus").join_now()
    assert answer["error_code"] == E.UNKNOWN_ASSIGNMENT_STRATEGY
    (first,) = steady_group(driver, 1, ["t"], strategy="range")
    answer = Consumer(driver, "g", ["t"], strategy="roundrobin").join_now()
    assert answer["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert driver.group("g").state is GroupState.STEADY
    assert first.heartbeat() is E.NONE
    assert first.partitions == {("t", 0), ("t", 1)}


def test_04b_a_strategy_the_server_does_not_allow_is_unknown():
    driver = FakeDriver(make_config(partition_assignment_strategies=("range",)), {"t": 1})
    answer = Consumer(driver, "g", ["t"], strategy="sticky").join_now()
    assert answer["error_code"] == E.UNKNOWN_ASSIGNMENT_STRATEGY


def test_05_second_member_triggers_a_rebalance_signalled_in_heartbeats():
    """Seed 001: "Rebalance is triggered by returning the IllegalGeneration error code in the
    HeartbeatResponse. Once all alive consumers re-register with the co-ordinator via
    JoinGroupRequests, it communicates the new partition ownership to each of the consumers in
    the JoinGroupResponse". Decision (DESIGN.md): the signal is REBALANCE_IN_PROGRESS."""
    driver = FakeDriver(topics={"t": 4})
    (first,) = steady_group(driver, 1, ["t"])
    second = Consumer(driver, "g", ["t"])
    second.join()
    assert second.joined() is None
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    assert first.heartbeat() is E.REBALANCE_IN_PROGRESS
    first.join()
    a, b = first.joined(), second.joined()
    assert a["generation_id"] == b["generation_id"] == 2
    assert first.partitions | second.partitions == {("t", p) for p in range(4)}
    assert not first.partitions & second.partitions
    assert len(first.partitions) == len(second.partitions) == 2
    assert driver.group("g").state is GroupState.STEADY


def test_06_heartbeats_and_commits_keep_a_member_alive():
    """Seed 001: "If the co-ordinator does not receive a HeartbeatRequest from a consumer for
    session.timeout.ms, it marks the consumer dead"; an offset commit shows it alive too."""
    driver = FakeDriver(topics={"t": 2})
    (member,) = steady_group(driver, 1, ["t"])
    almost = SESSION_MS - 1_000
    driver.advance(almost)
    assert member.heartbeat() is E.NONE
    driver.advance(almost)
    assert member.commit({("t", 0): 5}) == {("t", 0): E.NONE}
    driver.advance(almost)
    assert member.heartbeat() is E.NONE
    assert driver.group("g").state is GroupState.STEADY
    driver.advance(SESSION_MS)  # silence for a whole session: gone
    assert member.heartbeat() is E.UNKNOWN_MEMBER_ID


def test_07_heartbeat_errors():
    """Seed 001: "If the consumer specifies an invalid or stale generation id, it send an
    IllegalGeneration error code"; "If the co-ordinator receives a HeartbeatRequest ... with a
    consumer id that is different from the ones in the group, it sends an UnknownConsumer"."""
    driver = FakeDriver(topics={"t": 2})
    first, second = steady_group(driver, 2, ["t"])
    assert first.generation == 2
    assert first.heartbeat(generation=1) is E.ILLEGAL_GENERATION
    assert Consumer(driver, "g", ["t"], member_id="g-nobody").heartbeat() is E.UNKNOWN_MEMBER_ID
    assert Consumer(driver, "nope", ["t"], member_id="nope-x").heartbeat() is E.UNKNOWN_MEMBER_ID
    first.leave()
    assert second.heartbeat() is E.REBALANCE_IN_PROGRESS
    second.leave()
    assert driver.group("g").state is GroupState.EMPTY
    assert second.heartbeat() is E.UNKNOWN_MEMBER_ID


def test_the_brokers_heartbeat_path_answers_as_handle_does():
    """The broker answers native Heartbeats with ``GroupCoordinator.heartbeat`` (no token, no
    Respond); the Kafka listener's go through ``handle``. Every answer is the same."""
    driver = FakeDriver(topics={"t": 2})
    first, second = steady_group(driver, 2, ["t"])
    asked = [  # (group, member, generation): the answers of test_07 and of the states around
        ("g", first.member_id, first.generation), ("g", first.member_id, 1),
        ("g", "g-nobody", first.generation), ("nope", "nope-x", 0), ("", "x", 0),
    ]

    def both(group: str, member: str, generation: int) -> ErrorCode:
        handled = driver.call(ApiKey.HEARTBEAT, {
            "group_id": group, "member_id": member, "generation_id": generation})
        direct = driver.heartbeat(group, member, generation)
        assert direct is ErrorCode(handled["error_code"]), (group, member, generation)
        return direct

    assert [both(*a) for a in asked] == [E.NONE, E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID,
                                         E.UNKNOWN_MEMBER_ID, E.INVALID_GROUP_ID]
    first.leave()
    assert both("g", second.member_id, second.generation) is E.REBALANCE_IN_PROGRESS
    driver.apply(driver.coordinator.resign(driver.partition_of("g"), driver.now))
    assert both("g", second.member_id, second.generation) is E.NOT_COORDINATOR


def test_08_silent_member_is_removed_and_survivors_own_everything():
    """Seed 001: "If the co-ordinator does not receive a HeartbeatRequest from a consumer at
    least once in session.timeout.ms, it marks the consumer dead and triggers a rebalance
    process for the group"."""
    driver = FakeDriver(topics={"t": 4})
    alive, silent = steady_group(driver, 2, ["t"])
    for _ in range(3):
        driver.advance(3_000)
        assert alive.heartbeat() is E.NONE
    assert driver.group("g").state is GroupState.STEADY
    driver.advance(1_000)  # silent's session (10 s) is over
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    assert alive.heartbeat() is E.REBALANCE_IN_PROGRESS
    answer = alive.join_now()
    assert answer["generation_id"] == 3
    assert alive.partitions == {("t", p) for p in range(4)}
    assert silent.heartbeat() is E.UNKNOWN_MEMBER_ID


def test_09_member_not_rejoining_within_the_rebalance_timeout_is_dropped():
    """Seed 001: "If the consumer pauses before it sends a JoinGroupRequest, the co-ordinator
    will mark it dead during the rebalance and complete the rebalance operation by including
    the rest of the consumers in the new generation"."""
    driver = FakeDriver(topics={"t": 6})
    a, b, laggard = steady_group(driver, 3, ["t"])
    newcomer = Consumer(driver, "g", ["t"])
    newcomer.join()
    a.join()
    b.join()
    for _ in range(9):  # heartbeating, so alive, but never rejoining
        driver.advance(3_000)
        assert laggard.heartbeat() is E.REBALANCE_IN_PROGRESS
    assert a.joined() is None
    driver.advance(3_000)  # the 30 s rebalance timeout passes
    for c in (a, b, newcomer):
        assert c.joined()["generation_id"] == 4
    assert a.partitions | b.partitions | newcomer.partitions == {("t", p) for p in range(6)}
    assert laggard.heartbeat() is E.UNKNOWN_MEMBER_ID
    assert len(driver.group("g").members) == 3


def test_10_slow_consumer_returning_first_cancels_the_rebalance():
    """Seed 001 "Slow consumers": "If the slow consumer sends a HeartbeatRequest before the
    co-ordinator receives a HeartbeatRequest from any of the rest of the consumers, it cancels
    the rebalance attempt and sends the HeartbeatResponses with no error code. If not, the
    co-ordinator proceeds with the rebalance and sends the slow consumer the IllegalGeneration
    error code as well. ... If the slow consumer also happens to send a JoinGroupRequest, the
    co-ordinator includes it in the current generation if it has not already sent a
    JoinGroupResponse excluding this slow consumer." Decision: we do not break the slow
    consumer's connection (the coordinator has none); REBALANCE_IN_PROGRESS stands for
    IllegalGeneration as everywhere."""
    driver = FakeDriver(topics={"t": 4})
    patient, slow = form_group([
        Consumer(driver, "g", ["t"], session_timeout_ms=3 * SESSION_MS),
        Consumer(driver, "g", ["t"], session_timeout_ms=SESSION_MS),
    ])
    driver.advance(SESSION_MS)
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    # the slow member is first: the rebalance is cancelled
    assert slow.heartbeat() is E.NONE
    assert driver.group("g").state is GroupState.STEADY
    assert patient.heartbeat() is E.NONE
    assert driver.group("g").generation == 2

    # again, but another member reacts first: the rebalance goes on, with the slow one
    # included because it rejoins before the round ends
    driver.advance(SESSION_MS)
    assert patient.heartbeat() is E.REBALANCE_IN_PROGRESS
    assert slow.heartbeat() is E.REBALANCE_IN_PROGRESS
    slow.join()
    patient.join()
    assert slow.joined()["generation_id"] == patient.joined()["generation_id"] == 3
    assert len(slow.partitions) == len(patient.partitions) == 2


def test_11_rejoin_unchanged_returns_current_assignment_changed_rebalances():
    driver = FakeDriver(topics={"t0": 2, "t1": 2})
    first, second = steady_group(driver, 2, ["t0"])
    before = set(first.partitions)
    answer = first.join_now()
    assert answer["generation_id"] == 2 and first.partitions == before
    assert driver.group("g").state is GroupState.STEADY
    assert second.heartbeat() is E.NONE
    first.join(topics=["t0", "t1"])
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    assert second.heartbeat() is E.REBALANCE_IN_PROGRESS
    second.join()
    assert first.joined()["generation_id"] == 3
    assert second.joined()["generation_id"] == 3
    assert {tp for tp in first.partitions if tp[0] == "t1"} == {("t1", 0), ("t1", 1)}


def test_12_retried_join_of_a_new_member_leaves_no_zombie():
    """DESIGN.md (KAFKA-7610): a new member's retried empty-id joins must not leave zombie
    members behind. Decision: a new member has no id until its round ends, so a retry while the
    first join is held only replaces it once the driver reports the first connection closed;
    a member whose first answer went to a connection that closed before it ever used its id is
    removed at once instead of holding partitions until its session expires."""
    driver = FakeDriver(topics={"t": 4})
    (old,) = steady_group(driver, 1, ["t"], connection="old")
    # the first answer is lost: the round completes, then the connection closes
    lost = Consumer(driver, "g", ["t"], connection="lost")
    lost.join()
    old.join()
    assert old.joined()["generation_id"] == 2
    zombie_id = driver.answer(lost.pending)["member_id"]
    assert zombie_id in driver.group("g").members
    driver.apply(driver.coordinator.on_disconnect("lost", driver.now))
    assert zombie_id not in driver.group("g").members
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    retry = Consumer(driver, "g", ["t"], connection="retry")
    retry.join()
    assert old.heartbeat() is E.REBALANCE_IN_PROGRESS
    old.join()
    assert retry.joined()["error_code"] == 0 and old.joined()["error_code"] == 0
    assert set(driver.group("g").members) == {old.member_id, retry.member_id}
    assert len(retry.partitions) == len(old.partitions) == 2

    # a retry while the first join is still held: only one new member comes out of the round
    held = Consumer(driver, "g", ["t"], connection="held")
    held.join()
    driver.apply(driver.coordinator.on_disconnect("held", driver.now))
    again = Consumer(driver, "g", ["t"], connection="again")
    again.join()
    old.join()
    retry.join()
    assert again.joined()["error_code"] == 0
    assert len(driver.group("g").members) == 3


def test_13_leave_rebalances_at_once_and_last_leave_empties_the_group():
    """Seed 001 discusses only session timeouts; LeaveGroup (Kafka) lets the rest rebalance
    without waiting for one. The last member leaving leaves an Empty group with its offsets."""
    driver = FakeDriver(topics={"t": 3})
    a, b, c = steady_group(driver, 3, ["t"])
    assert c.leave() is E.NONE
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    assert a.heartbeat() is E.REBALANCE_IN_PROGRESS
    a.join()
    b.join()
    assert a.joined()["generation_id"] == b.joined()["generation_id"] == 4
    assert a.partitions | b.partitions == {("t", 0), ("t", 1), ("t", 2)}
    assert a.commit({("t", 0): 42}) == {("t", 0): E.NONE}
    assert a.leave() is E.NONE
    assert b.leave() is E.NONE
    assert driver.group("g").state is GroupState.EMPTY
    assert driver.fetch_offsets("g", [("t", 0)]) == {("t", 0): (42, None)}
    assert c.leave() is E.UNKNOWN_MEMBER_ID


def test_14_generation_increments_even_when_membership_is_unchanged():
    """Seed 001: "Note that the generation id is incremented even if the group membership does
    not change"."""
    driver = FakeDriver(topics={"t": 2})
    (member,) = steady_group(driver, 1, ["t"])
    assert member.generation == 1
    driver.topics["t"] = 3
    driver.apply(driver.coordinator.on_topic_partitions_changed("t", 3, driver.now))
    assert member.heartbeat() is E.REBALANCE_IN_PROGRESS
    assert member.join_now()["generation_id"] == 2
    assert member.partitions == {("t", 0), ("t", 1), ("t", 2)}


def test_15_partition_changes_and_topic_creation_trigger_a_rebalance():
    """Seed 001: "If it detects a new partition for any topic, it triggers a rebalance
    operation ... The creation of new topics can also trigger a rebalance operation as consumers
    can register for topics before they are created"."""
    driver = FakeDriver(topics={"t": 2})
    first, second = steady_group(driver, 2, ["t", "later"])
    driver.topics["unrelated"] = 5
    driver.apply(driver.coordinator.on_topic_partitions_changed("unrelated", 5, driver.now))
    assert driver.group("g").state is GroupState.STEADY
    driver.topics["later"] = 2
    driver.apply(driver.coordinator.on_topic_partitions_changed("later", 2, driver.now))
    assert first.heartbeat() is E.REBALANCE_IN_PROGRESS
    first.join()
    second.join()
    first.joined()
    second.joined()
    assert first.partitions | second.partitions == {
        ("t", 0), ("t", 1), ("later", 0), ("later", 1)}
    driver.topics["t"] = 4
    driver.apply(driver.coordinator.on_topic_partitions_changed("t", 4, driver.now))
    assert second.heartbeat() is E.REBALANCE_IN_PROGRESS


def test_16_join_during_rebalancing_waits_for_the_round_then_starts_another():
    """Seed 001 "Slow consumers": "If the co-ordinator has already sent a JoinGroupResponse, it
    let's the current rebalance round complete before triggering another rebalance attempt
    right after". Rebalancing lasts while the new generation's record is being written."""
    driver = FakeDriver(topics={"t": 2}, auto_ack=False)
    first = Consumer(driver, "g", ["t"])
    first.join()
    assert driver.group("g").state is GroupState.REBALANCING
    late = Consumer(driver, "g", ["t"])
    late.join()
    assert driver.group("g").state is GroupState.REBALANCING
    driver.ack()
    assert first.joined()["generation_id"] == 1
    assert late.joined() is None
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    assert first.heartbeat() is E.REBALANCE_IN_PROGRESS
    first.join()
    driver.ack()
    assert first.joined()["generation_id"] == late.joined()["generation_id"] == 2
    assert len(first.partitions) == len(late.partitions) == 1


def test_22_requests_during_catch_up_get_load_in_progress():
    """Seed 001: "Until the co-ordinator finishes loading the group membership information for
    all groups that it is responsible for, it returns the CoordinatorStartupNotComplete error
    code in the responses of HearbeatRequests, OffsetCommitRequests and JoinGroupRequests";
    seed 000: "the offset fetch will fail with an OffsetsLoadInProgress exception"."""
    driver = FakeDriver(topics={"t": 2})
    (member,) = steady_group(driver, 1, ["t"])
    partition = driver.partition_of("g")
    records = list(driver.log[partition])
    driver.apply(driver.coordinator.resign(partition, driver.now))
    driver.apply(driver.coordinator.start_loading(partition))
    assert driver.coordinator.partition_state(partition) is LoaderState.CATCH_UP
    loading = E.COORDINATOR_LOAD_IN_PROGRESS
    assert Consumer(driver, "g", ["t"]).join_now()["error_code"] == loading
    assert member.heartbeat() is loading
    assert set(member.commit({("t", 0): 1}).values()) == {loading}
    fetched = driver.call(ApiKey.OFFSET_FETCH, {"group_id": "g", "topics": None})
    assert fetched["error_code"] == loading
    assert driver.describe("g")["error_code"] == loading
    assert driver.call(ApiKey.LIST_GROUPS, {})["error_code"] == loading
    driver.coordinator.load_records(partition, records[:1])
    driver.coordinator.load_records(partition, records[1:])
    driver.apply(driver.coordinator.finish_loading(partition, driver.now))
    assert member.join_now()["error_code"] == E.NONE
    assert member.heartbeat() is E.NONE
    assert member.commit({("t", 0): 1}) == {("t", 0): E.NONE}
    assert driver.fetch_offsets("g", [("t", 0)]) == {("t", 0): (1, None)}
    assert driver.describe("g")["state"] == "Steady"


def test_23_groups_of_partitions_not_led_get_not_coordinator():
    """Seed 001: "The consumer will receive NotCoordinatorForGroup error code on the
    heartbeat/commit offset responses"."""
    probe = FakeDriver()
    partition = probe.partition_of("g")
    others = [p for p in range(probe.config.offsets_topic_partitions) if p != partition]
    driver = FakeDriver(topics={"t": 2}, lead=others)
    c = Consumer(driver, "g", ["t"], member_id="g-x", generation=1)
    nc = E.NOT_COORDINATOR
    assert Consumer(driver, "g", ["t"]).join_now()["error_code"] == nc
    assert c.heartbeat() is nc
    assert c.leave() is nc
    assert set(c.commit({("t", 0): 1}).values()) == {nc}
    assert driver.call(ApiKey.OFFSET_FETCH, {"group_id": "g", "topics": None})["error_code"] == nc
    assert driver.describe("g")["error_code"] == nc
    deleted = driver.call(ApiKey.DELETE_GROUPS, {"group_ids": ["g"]})
    assert deleted["results"] == [{"group_id": "g", "error_code": nc}]


def test_24_resign_and_reload_restores_groups_exactly():
    """Seed 001: "As part of becoming the leader for a subset of the offset topic partitions,
    the co-ordinator reads metadata for each group that it is responsible for ... The metadata
    includes the group's consumer ids, the generation id and the subscribed list of topics"; and
    "Upon election or startup, the co-ordinator also starts failure detection for all consumers
    in a group"."""
    driver = FakeDriver(topics={"t0": 3, "t1": 2})
    a, b = steady_group(driver, 2, ["t0", "t1"])
    assert a.commit({("t0", 0): 7, ("t1", 1): 9}, metadata="m") == {("t0", 0): 0, ("t1", 1): 0}
    before = driver.describe("g")
    offsets = driver.fetch_offsets("g")
    driver.reload(driver.partition_of("g"))
    assert driver.describe("g") == before
    assert driver.fetch_offsets("g") == offsets == {("t0", 0): (7, "m"), ("t1", 1): (9, "m")}
    assert a.heartbeat() is E.NONE and b.heartbeat() is E.NONE
    # session timers restarted at load time: silence after the reload still expires
    driver.advance(SESSION_MS)
    assert a.heartbeat() is E.UNKNOWN_MEMBER_ID


def test_heartbeat_costs_one_response_and_resign_cancels_the_groups_timers():
    """The driver's load: a heartbeat only moves a deadline (the armed timer catches up when it
    fires), and resigning a partition leaves no timer of its groups behind."""
    driver = FakeDriver(topics={"t": 2})
    a, _b = steady_group(driver, 2, ["t"])
    effects = driver.coordinator.handle(
        ApiKey.HEARTBEAT,
        {"group_id": "g", "generation_id": a.generation, "member_id": a.member_id},
        RequestContext(token="hb", now_ms=driver.now),
    )
    assert [type(e) for e in effects] == [Respond]
    assert any(key.group_id == "g" for key in driver.timers)
    driver.apply(driver.coordinator.resign(driver.partition_of("g"), driver.now))
    assert not [key for key in driver.timers if key.group_id == "g"]
    assert not [key for key in driver.timers if key.partition == driver.partition_of("g")]


def test_a_commit_held_for_replication_pauses_the_members_session():
    """A commit is answered once written (in a cluster: once the ISR has it, which waits for a
    dead follower until the controller drops it). The member's heartbeats wait behind it on
    its connection, so its session pauses while the commit is held -- as during a JoinGroup --
    and restarts when the commit is answered; silence after that still expires it."""
    driver = FakeDriver(topics={"t": 2})
    (member,) = steady_group(driver, 1, ["t"])
    driver.auto_ack = False
    token = driver.commit("g", member.generation, member.member_id, {("t", 0): 3})
    driver.advance(2 * SESSION_MS)  # held longer than a session: the member stays
    assert driver.answer(token) is None
    assert member.member_id in driver.group("g").members
    driver.ack()
    assert committed_errors(driver.answers[token]) == {("t", 0): 0}
    driver.auto_ack = True
    driver.advance(SESSION_MS - 1)
    assert member.heartbeat() is E.NONE  # the session restarted when the commit was answered
    driver.advance(SESSION_MS)
    assert member.heartbeat() is E.UNKNOWN_MEMBER_ID
