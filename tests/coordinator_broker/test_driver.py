"""The coordinator's driver in-process: real topics and logs in a temporary directory, trio
timers (on trio's mock clock where time matters), loading in chunks, resign / lead again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from broker.group_driver import GroupDriver
from broker.purgatory import FetchPurgatory
from broker.settings import BrokerSettings
from broker.topics import Topics
from coordinator import OFFSETS_TOPIC, CoordinatorConfig, LoaderState
from coordinator.offsets_topic import GroupKey, OffsetKey, decode_key
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messageset import decode_messages

PARTITIONS = 4


@pytest.fixture
def topics(tmp_path: Path) -> Iterator[Topics]:
    topics = Topics(BrokerSettings(data_dir=str(tmp_path)))
    topics.create("t", 2, 1, {})
    yield topics
    topics.close()


def make_driver(topics: Topics, load_chunk_bytes: int = 1 << 20, **config: Any) -> GroupDriver:
    settings: dict[str, Any] = {
        "offsets_topic_partitions": PARTITIONS, "group_initial_rebalance_delay_ms": 0,
        "group_min_session_timeout_ms": 100,
    }
    settings.update(config)
    return GroupDriver(
        CoordinatorConfig(**settings), topics, FetchPurgatory(),
        clock=lambda: 1_000 + trio.current_time(), load_chunk_bytes=load_chunk_bytes,
    )


def join_body(group: str, member_id: str = "", session_ms: int = 1_000) -> dict[str, Any]:
    return {"group_id": group, "session_timeout_ms": session_ms, "rebalance_timeout_ms": 60_000,
            "topics": ["t"], "member_id": member_id, "assignment_strategy": "range"}


def commit_body(group: str, offsets: dict[int, int], generation: int = -1,
                member_id: str = "") -> dict[str, Any]:
    partitions = [{"partition": p, "offset": o, "metadata": None, "commit_timestamp": -1}
                  for p, o in offsets.items()]
    return {"group_id": group, "generation_id": generation, "member_id": member_id,
            "topics": [{"name": "t", "partitions": partitions}]}


async def fetch(driver: GroupDriver, group: str) -> tuple[ErrorCode, dict[int, int]]:
    answer = await driver.request(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": None})
    return ErrorCode(answer["error_code"]), {
        p["partition"]: p["offset"] for t in answer["topics"] for p in t["partitions"]
    }


def stored(topics: Topics, partition: int) -> list[tuple[object, bytes | None]]:
    """Every (decoded key, value) in one __consumer_offsets partition, in log order."""
    plog = topics.log(OFFSETS_TOPIC, partition)
    assert plog is not None
    messages, _ = decode_messages(plog.read(plog.log_start_offset, 1 << 24).bytes())
    return [(decode_key(m.key), m.value) for m in messages if m.key is not None]


async def test_a_commit_is_answered_once_it_is_in_the_log(topics: Topics) -> None:
    """Issue #5: "A commit is answered only after its record is written"; __consumer_offsets is
    created on first use, compacted, with offsets_topic_partitions partitions."""
    driver = make_driver(topics)
    assert topics.get(OFFSETS_TOPIC) is None
    answer = await driver.request(ApiKey.OFFSET_COMMIT, commit_body("g", {0: 5, 1: 9}))
    assert [p["error_code"] for p in answer["topics"][0]["partitions"]] == [0, 0]
    created = topics.get(OFFSETS_TOPIC)
    assert created is not None and created.partitions == PARTITIONS
    assert created.configs["cleanup_policy"] == "compact"
    keys = [key for key, _ in stored(topics, driver.coordinator.partition_for("g"))]
    assert keys == [OffsetKey("g", "t", 0), OffsetKey("g", "t", 1)]


async def test_timers_end_rounds_and_sessions(
    topics: Topics, autojump_clock: trio.testing.MockClock
) -> None:
    """SetTimer effects become trio timers: the first round waits
    group_initial_rebalance_delay_ms, and a silent member is removed after its session."""
    driver = make_driver(topics, group_initial_rebalance_delay_ms=300)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        started = trio.current_time()
        joined = await driver.request(ApiKey.JOIN_GROUP, join_body("g", session_ms=1_000))
        assert joined["error_code"] == 0 and joined["generation_id"] == 1
        assert trio.current_time() - started == pytest.approx(0.3, abs=0.01)
        await trio.sleep(1.1)
        group = await driver.request(ApiKey.DESCRIBE_GROUPS, {"group_ids": ["g"]})
        assert (group["groups"][0]["state"], group["groups"][0]["members"]) == ("Empty", [])
        beat = await driver.request(ApiKey.HEARTBEAT, {
            "group_id": "g", "member_id": joined["member_id"], "generation_id": 1})
        assert beat["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
        nursery.cancel_scope.cancel()


async def test_offsets_of_an_empty_group_expire(
    topics: Topics, autojump_clock: trio.testing.MockClock
) -> None:
    """Offsets expiry timers: an Empty group's offsets older than offsets_retention_ms are
    tombstoned and the group is gone."""
    driver = make_driver(topics, offsets_retention_ms=10_000,
                         offsets_retention_check_interval_ms=1_000)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await driver.request(ApiKey.OFFSET_COMMIT, commit_body("g", {0: 5}))
        assert await fetch(driver, "g") == (ErrorCode.NONE, {0: 5})
        await trio.sleep(12)
        assert await fetch(driver, "g") == (ErrorCode.NONE, {})
        listed = await driver.request(ApiKey.LIST_GROUPS, {})
        assert listed["groups"] == []
        nursery.cancel_scope.cancel()
    records = stored(topics, driver.coordinator.partition_for("g"))
    assert records[-2:] == [(OffsetKey("g", "t", 0), None), (GroupKey("g"), None)]


async def fill(topics: Topics, group: str, commits: int) -> dict[int, int]:
    """``commits`` one-offset commits of ``group`` written by a first coordinator."""
    writer = make_driver(topics)
    for i in range(commits):
        await writer.request(ApiKey.OFFSET_COMMIT, commit_body(group, {i: i + 1}))
    return {i: i + 1 for i in range(commits)}


async def test_loading_goes_in_chunks_and_answers_load_in_progress(topics: Topics) -> None:
    """The offsets partitions are loaded at start in chunks, so requests are answered while a
    partition loads -- COORDINATOR_LOAD_IN_PROGRESS until it is Ready, then the whole truth."""
    committed = await fill(topics, "g", 200)
    driver = make_driver(topics, load_chunk_bytes=256)
    partition = driver.coordinator.partition_for("g")
    assert driver.coordinator.partition_state(partition) is LoaderState.CATCH_UP
    loading_answers = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        while (answer := await fetch(driver, "g"))[0] is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            loading_answers += 1
            await trio.lowlevel.checkpoint()
        nursery.cancel_scope.cancel()
    assert answer == (ErrorCode.NONE, committed)
    assert loading_answers > 5  # requests got turns between the chunks


async def test_resign_stops_a_load_and_leading_again_reloads(topics: Topics) -> None:
    committed = await fill(topics, "g", 100)
    driver = make_driver(topics, load_chunk_bytes=256)
    partition = driver.coordinator.partition_for("g")
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        await trio.lowlevel.checkpoint()
        assert driver.coordinator.partition_state(partition) is LoaderState.CATCH_UP
        driver.resign(partition)
        await trio.testing.wait_all_tasks_blocked()
        assert driver.coordinator.partition_state(partition) is LoaderState.DOWN
        assert not driver.coordinates("g")
        assert (await fetch(driver, "g"))[0] is ErrorCode.NOT_COORDINATOR
        driver.become_leader(partition)
        assert driver.coordinates("g")
        await trio.testing.wait_all_tasks_blocked()
        assert await fetch(driver, "g") == (ErrorCode.NONE, committed)
        nursery.cancel_scope.cancel()


async def test_close_answers_held_joins(topics: Topics) -> None:
    """Shutdown resigns every partition, so a JoinGroup held for its round is answered at once
    (NOT_COORDINATOR: the client finds the coordinator again) instead of holding the
    connection open until the shutdown deadline."""
    driver = make_driver(topics)
    first = await driver.request(ApiKey.JOIN_GROUP, join_body("g"))
    answers: list[dict[str, Any]] = []

    async def second_member() -> None:
        answers.append(await driver.request(ApiKey.JOIN_GROUP, join_body("g")))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(second_member)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == []  # held until the first member rejoins
        driver.close()
    assert answers[0]["error_code"] == ErrorCode.NOT_COORDINATOR
    beat = await driver.request(ApiKey.HEARTBEAT, {
        "group_id": "g", "member_id": first["member_id"], "generation_id": 1})
    assert beat["error_code"] == ErrorCode.NOT_COORDINATOR
