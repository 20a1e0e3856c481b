"""OffsetDelete (Kafka's key 47, KIP-496): a group's committed offsets of some partitions are
tombstoned in ``__consumer_offsets`` -- unless the group has members subscribed to the topic."""

from __future__ import annotations

from typing import Any

from coordinator import GroupState
from coordinator.offsets_topic import OffsetKey, decode_key
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.coordinator.harness import Consumer, FakeDriver, make_config, steady_group

E = ErrorCode


def delete_offsets(driver: FakeDriver, group_id: str, partitions: dict[str, list[int]]) -> int:
    return driver.send(ApiKey.OFFSET_DELETE, {
        "group_id": group_id,
        "topics": [{"name": t, "partitions": ps} for t, ps in partitions.items()],
    })


def partition_errors(body: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {
        (t["name"], p["partition"]): p["error_code"]
        for t in body["topics"] for p in t["partitions"]
    }


def tombstoned(driver: FakeDriver, group_id: str) -> set[object]:
    return {decode_key(k) for k, v in driver.log[driver.partition_of(group_id)] if v is None}


def empty_group_with_offsets(driver: FakeDriver) -> None:
    """Group "g" had one member, which committed t-0, t-1 and u-0 and left: Empty."""
    (member,) = steady_group(driver, 1, ["t", "u"])
    assert set(member.commit({("t", 0): 5, ("t", 1): 6, ("u", 0): 7}).values()) == {E.NONE}
    assert member.leave() is E.NONE
    assert driver.group("g").state is GroupState.EMPTY


def test_an_empty_groups_offsets_are_deleted_once_written_and_stay_gone_after_a_reload():
    driver = FakeDriver(topics={"t": 2, "u": 1})
    empty_group_with_offsets(driver)
    driver.auto_ack = False
    token = delete_offsets(driver, "g", {"t": [0, 1, 2]})
    assert driver.answer(token) is None  # answered once the tombstones are written
    assert driver.fetch_offsets("g", [("t", 0)]) == {("t", 0): (5, None)}
    driver.ack()
    body = driver.answer(token)
    assert body is not None and body["error_code"] == 0
    # t-2 had no committed offset: nothing to delete, no error (as Kafka answers)
    assert partition_errors(body) == {("t", 0): E.NONE, ("t", 1): E.NONE, ("t", 2): E.NONE}
    assert tombstoned(driver, "g") == {OffsetKey("g", "t", 0), OffsetKey("g", "t", 1)}
    assert driver.fetch_offsets("g") == {("u", 0): (7, None)}
    driver.reload(driver.partition_of("g"))
    assert driver.group("g").state is GroupState.EMPTY
    assert driver.fetch_offsets("g") == {("u", 0): (7, None)}


def test_a_group_with_members_keeps_the_offsets_of_topics_they_subscribe_to():
    driver = FakeDriver(topics={"t": 2, "old": 1})
    member, _ = steady_group(driver, 2, ["t"])
    member.commit({("t", 0): 3})
    # a topic the group no longer subscribes to (manual commits are refused with members, so
    # the offset comes from the member, as after a subscription change)
    member.commit({("old", 0): 9})
    body = driver.call(ApiKey.OFFSET_DELETE, {"group_id": "g", "topics": [
        {"name": "t", "partitions": [0, 1]}, {"name": "old", "partitions": [0]},
    ]})
    assert body["error_code"] == 0
    assert partition_errors(body) == {
        ("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("t", 1): E.GROUP_SUBSCRIBED_TO_TOPIC,
        ("old", 0): E.NONE,
    }
    assert driver.fetch_offsets("g") == {("t", 0): (3, None)}
    assert tombstoned(driver, "g") == {OffsetKey("g", "old", 0)}
    assert driver.group("g").state is GroupState.STEADY  # no rebalance


def test_a_group_still_forming_counts_its_first_joins_subscriptions():
    # the first join waits out the initial delay for more members
    driver = FakeDriver(make_config(group_initial_rebalance_delay_ms=3_000), {"t": 1})
    driver.commit("g", -1, "", {("t", 0): 4})  # manual assignment: an Empty group
    Consumer(driver, "g", ["t"]).join()
    assert driver.group("g").state is GroupState.PREPARE_REBALANCE
    assert not driver.group("g").members  # only its held first join subscribes
    body = driver.call(ApiKey.OFFSET_DELETE,
                       {"group_id": "g", "topics": [{"name": "t", "partitions": [0]}]})
    assert partition_errors(body) == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC}
    assert driver.fetch_offsets("g") == {("t", 0): (4, None)}


def test_an_unknown_group_is_not_found_and_nothing_is_written():
    driver = FakeDriver(topics={"t": 1})
    body = driver.call(ApiKey.OFFSET_DELETE,
                       {"group_id": "nobody", "topics": [{"name": "t", "partitions": [0]}]})
    assert body == {"error_code": E.GROUP_ID_NOT_FOUND, "topics": []}
    assert not any(driver.log.values())
    assert driver.call(ApiKey.OFFSET_DELETE, {"group_id": "", "topics": []})["error_code"] == (
        E.INVALID_GROUP_ID)


def test_a_failed_write_keeps_the_offsets_and_says_why():
    driver = FakeDriver(topics={"t": 2, "u": 1})
    empty_group_with_offsets(driver)
    driver.auto_ack = False
    token = delete_offsets(driver, "g", {"t": [0, 1]})
    driver.ack(E.NOT_LEADER_FOR_PARTITION)
    body = driver.answer(token)
    assert body is not None
    assert partition_errors(body) == {("t", 0): E.NOT_COORDINATOR, ("t", 1): E.NOT_COORDINATOR}
    assert driver.fetch_offsets("g", [("t", 0), ("t", 1)]) == {
        ("t", 0): (5, None), ("t", 1): (6, None)}


def test_a_partition_this_broker_does_not_lead_answers_not_coordinator():
    driver = FakeDriver(topics={"t": 1}, lead=[])
    body = driver.call(ApiKey.OFFSET_DELETE,
                       {"group_id": "g", "topics": [{"name": "t", "partitions": [0]}]})
    assert body["error_code"] == E.NOT_COORDINATOR
