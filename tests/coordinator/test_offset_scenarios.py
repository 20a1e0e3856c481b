"""Issue #5 scenarios 17-21, 25 and 26: offset commits and fetches, retention, DeleteGroups."""

from __future__ import annotations

import structlog

from coordinator import GroupState
from coordinator.offsets_topic import GroupKey, OffsetKey, decode_key
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.coordinator.harness import Consumer, FakeDriver, make_config, steady_group

E = ErrorCode


def test_17_commit_in_steady_is_stored_and_fetched():
    """Seed 000 §5.6: "The offset manager also caches the offsets in an in-memory table in order
    to serve offset fetches quickly"; seed 001: "the co-ordinator accepts OffsetCommitRequests
    and heartbeats from all consumers" in Steady."""
    driver = FakeDriver(topics={"t": 2})
    (member,) = steady_group(driver, 1, ["t"])
    assert member.commit({("t", 0): 10, ("t", 1): 20}, metadata="where") == {
        ("t", 0): E.NONE, ("t", 1): E.NONE}
    assert driver.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 5), ("other", 0)]) == {
        ("t", 0): (10, "where"), ("t", 1): (20, "where"), ("t", 5): (-1, None),
        ("other", 0): (-1, None),
    }
    assert driver.fetch_offsets("g") == {("t", 0): (10, "where"), ("t", 1): (20, "where")}
    assert driver.fetch_offsets("never-seen", [("t", 0)]) == {("t", 0): (-1, None)}


def test_17b_a_commit_is_answered_only_once_written():
    """Seed 000 §5.6: "The offset manager sends a successful offset commit response to the
    consumer only after all the replicas of the offsets topic receive the offsets"."""
    driver = FakeDriver(topics={"t": 1})
    (member,) = steady_group(driver, 1, ["t"])
    driver.auto_ack = False
    token = driver.commit("g", member.generation, member.member_id, {("t", 0): 3})
    assert driver.answer(token) is None
    assert driver.fetch_offsets("g") == {}
    driver.ack()
    assert driver.answer(token)["topics"][0]["partitions"][0]["error_code"] == 0
    assert driver.fetch_offsets("g") == {("t", 0): (3, None)}
    failed = driver.commit("g", member.generation, member.member_id, {("t", 0): 4})
    driver.ack(ErrorCode.NOT_LEADER_FOR_PARTITION)
    assert driver.answer(failed)["topics"][0]["partitions"][0]["error_code"] == E.NOT_COORDINATOR
    assert driver.fetch_offsets("g") == {("t", 0): (3, None)}


def test_18_commits_with_another_generation_are_illegal():
    """Seed 001: "The co-ordinator checks the generation id in the OffsetCommitRequest and
    rejects it if the generation id in the request is higher than the generation id on the
    co-ordinator. This indicates a bug in the consumer code." and "The co-ordinator does not
    allow offset commit requests with generation ids older than the current group generation"."""
    driver = FakeDriver(topics={"t": 2})
    first, _ = steady_group(driver, 2, ["t"])
    assert first.generation == 2
    assert first.commit({("t", 0): 1}, generation=1) == {("t", 0): E.ILLEGAL_GENERATION}
    with structlog.testing.capture_logs() as logs:
        assert first.commit({("t", 0): 1}, generation=3) == {("t", 0): E.ILLEGAL_GENERATION}
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [e["event"] for e in warnings] == ["offset_commit_generation_ahead"]
    assert warnings[0]["generation"] == 3 and warnings[0]["current"] == 2
    assert driver.fetch_offsets("g") == {}


def test_19_current_members_commit_during_prepare_rebalance():
    """Seed 001: "If a consumer receives an IllegalGeneration error code, it stops fetching and
    commits existing offsets before sending a JoinGroupRequest to the co-ordinator"."""
    driver = FakeDriver(topics={"t": 2})
    (member,) = steady_group(driver, 1, ["t"])
    Consumer(driver, "g", ["t"]).join()
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    assert member.heartbeat() is E.REBALANCE_IN_PROGRESS
    assert member.commit({("t", 1): 99}) == {("t", 1): E.NONE}
    assert driver.fetch_offsets("g", [("t", 1)]) == {("t", 1): (99, None)}


def test_20_manual_assignment_commits_only_to_groups_without_members():
    """Manual assignment (seed 001 Consumer API "subscribe(partitions)") commits with generation
    -1 and no member id."""
    driver = FakeDriver(topics={"t": 2})
    manual = Consumer(driver, "manual", ["t"], generation=-1)
    assert manual.commit({("t", 0): 5}) == {("t", 0): E.NONE}
    assert driver.describe("manual")["state"] == "Empty"
    assert driver.fetch_offsets("manual") == {("t", 0): (5, None)}
    steady_group(driver, 1, ["t"])
    intruder = Consumer(driver, "g", ["t"], generation=-1)
    assert intruder.commit({("t", 0): 5}) == {("t", 0): E.UNKNOWN_MEMBER_ID}


def test_21_oversized_metadata_fails_only_its_partition():
    driver = FakeDriver(make_config(offset_metadata_max_bytes=8), {"t": 2})
    (member,) = steady_group(driver, 1, ["t"])
    token = driver.send(ApiKey.OFFSET_COMMIT, {
        "group_id": "g", "generation_id": member.generation, "member_id": member.member_id,
        "topics": [{"name": "t", "partitions": [
            {"partition": 0, "offset": 1, "metadata": "x" * 9, "commit_timestamp": -1},
            {"partition": 1, "offset": 2, "metadata": "é" * 4, "commit_timestamp": -1},
        ]}],
    })
    answer = driver.answer(token)
    assert answer["topics"][0]["partitions"] == [
        {"partition": 0, "error_code": E.OFFSET_METADATA_TOO_LARGE},
        {"partition": 1, "error_code": E.NONE},
    ]
    assert driver.fetch_offsets("g") == {("t", 1): (2, "é" * 4)}


def _tombstoned_keys(driver: FakeDriver, partition: int) -> set[object]:
    return {decode_key(k) for k, v in driver.log[partition] if v is None}


def test_25_offsets_of_empty_groups_expire_steady_subscriptions_never_do():
    retention = 60_000
    driver = FakeDriver(
        make_config(offsets_retention_ms=retention, offsets_retention_check_interval_ms=5_000),
        {"t": 1, "gone": 1},
    )
    Consumer(driver, "idle", ["t"], generation=-1).commit({("t", 0): 1})
    (live,) = steady_group(driver, 1, ["t"], group="live")
    assert live.commit({("t", 0): 2, ("gone", 0): 3}) == {("t", 0): 0, ("gone", 0): 0}
    for _ in range(retention // 3_000 + 5):  # well past retention, heartbeating all along
        driver.advance(3_000)
        assert live.heartbeat() is E.NONE
    assert "idle" not in driver.list_groups()
    assert driver.describe("idle")["error_code"] == E.GROUP_ID_NOT_FOUND
    assert driver.fetch_offsets("idle") == {}
    assert driver.fetch_offsets("live") == {("t", 0): (2, None)}
    idle_partition = driver.partition_of("idle")
    assert {OffsetKey("idle", "t", 0), GroupKey("idle")} <= _tombstoned_keys(driver, idle_partition)
    assert OffsetKey("live", "gone", 0) in _tombstoned_keys(driver, driver.partition_of("live"))
    driver.reload(idle_partition)
    assert driver.coordinator.group("idle") is None


def test_25b_retention_counts_from_when_the_group_became_empty():
    """Offsets committed long ago are not lost the moment their group empties (Kafka KIP-211)."""
    retention = 60_000
    driver = FakeDriver(
        make_config(offsets_retention_ms=retention, offsets_retention_check_interval_ms=5_000),
        {"t": 1},
    )
    (member,) = steady_group(driver, 1, ["t"])
    member.commit({("t", 0): 4})
    for _ in range(retention // 3_000 + 5):
        driver.advance(3_000)
        member.heartbeat()
    member.leave()
    assert driver.group("g").state is GroupState.EMPTY
    driver.advance(retention - 5_000)
    assert driver.fetch_offsets("g") == {("t", 0): (4, None)}
    driver.advance(10_000)
    assert driver.coordinator.group("g") is None


def test_26_delete_groups_only_when_empty_and_writes_tombstones():
    driver = FakeDriver(topics={"t": 1})
    (member,) = steady_group(driver, 1, ["t"])
    member.commit({("t", 0): 8})
    body = driver.call(ApiKey.DELETE_GROUPS, {"group_ids": ["g", "nope"]})
    assert body["results"] == [
        {"group_id": "g", "error_code": E.NON_EMPTY_GROUP},
        {"group_id": "nope", "error_code": E.GROUP_ID_NOT_FOUND},
    ]
    member.leave()
    driver.auto_ack = False
    token = driver.send(ApiKey.DELETE_GROUPS, {"group_ids": ["g"]})
    assert driver.answer(token) is None  # answered once the tombstones are written
    driver.ack()
    assert driver.answer(token)["results"] == [{"group_id": "g", "error_code": 0}]
    partition = driver.partition_of("g")
    assert {GroupKey("g"), OffsetKey("g", "t", 0)} <= _tombstoned_keys(driver, partition)
    assert "g" not in driver.list_groups()
    driver.reload(partition)
    assert driver.coordinator.group("g") is None
    assert driver.fetch_offsets("g", [("t", 0)]) == {("t", 0): (-1, None)}
