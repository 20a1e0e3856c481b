"""The leader's low watermark, which DeleteRecords waits for (Kafka's
``Partition.lowWatermarkIfLeader`` and DelayedDeleteRecords): the lowest log start offset among
the leader and the assigned replicas on live brokers -- in the ISR or not -- as each follower's
fetches report it. No ZooKeeper: the manager alone, leading a real log."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from broker.cluster.replicas import ReplicaManager
from broker.log import LogConfig, PartitionLog
from broker.settings import BrokerSettings
from protocol.errors import NotLeaderForPartitionError, RequestTimedOutError
from protocol.messageset import encode_message_set

TP = ("t", 0)
FAR = 3600.0


def _leader(tmp_path: Path, *, isr: list[int]) -> ReplicaManager:
    """Broker 0 leading ``t-0`` (replicas 0, 1, 2) with 20 messages, its log start moved to
    11 as DeleteRecords does before it waits."""
    manager = ReplicaManager(0, zoo=None, settings=BrokerSettings(),
                             on_high_watermark=lambda topic, partition: None,
                             broker_address=lambda broker_id: None)
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), replicated=True)
    manager.become(TP, plog, _state(leader=0, epoch=1, isr=isr))
    plog.append(encode_message_set([(None, b"m%d" % i, 0) for i in range(20)]))
    plog.high_watermark = 20
    assert plog.advance_log_start(11)
    return manager


def _state(*, leader: int, epoch: int, isr: list[int]) -> dict[str, object]:
    return {"leader": leader, "leader_epoch": epoch, "isr": isr, "replicas": [0, 1, 2],
            "zk_version": epoch, "controller_epoch": 1}


def _reports(manager: ReplicaManager, follower: int, log_start: int) -> None:
    """A fetch from ``follower`` at the log end, reporting its log start."""
    manager.follower_fetched(follower, TP, 20, 1, log_start)


def _low(manager: ReplicaManager) -> int:
    replica = manager.leading(TP)
    assert replica is not None
    return manager.low_watermark(replica)


def test_every_assigned_replica_on_a_live_broker_counts_in_the_isr_or_not(
        tmp_path: Path) -> None:
    manager = _leader(tmp_path, isr=[0, 1])  # 2 has left the ISR: it still counts
    assert _low(manager) == -1  # neither follower has reported under this leader
    _reports(manager, 1, 11)
    assert _low(manager) == -1
    _reports(manager, 2, 5)
    assert _low(manager) == 5
    _reports(manager, 2, 11)
    assert _low(manager) == 11


def test_a_replica_on_a_broker_that_is_not_live_does_not_count(tmp_path: Path) -> None:
    manager = _leader(tmp_path, isr=[0, 1, 2])
    _reports(manager, 1, 11)
    manager.live_brokers_changed([0, 1])
    assert _low(manager) == 11
    manager.live_brokers_changed([0, 1, 2])
    assert _low(manager) == -1


def test_a_follower_fetching_below_v3_reports_no_log_start_and_holds_it(
        tmp_path: Path) -> None:
    manager = _leader(tmp_path, isr=[0, 1, 2])
    _reports(manager, 1, 11)
    manager.follower_fetched(2, TP, 20, 1)  # Fetch v1: no log_start_offset
    assert _low(manager) == -1


async def test_delete_records_returns_once_every_live_replica_reported_the_offset(
        tmp_path: Path) -> None:
    manager = _leader(tmp_path, isr=[0, 1, 2])
    answers: list[int] = []

    async def wait() -> None:
        answers.append(await manager.wait_for_low_watermark(TP, 11, trio.current_time() + FAR))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            _reports(manager, 1, 11)
            await trio.testing.wait_all_tasks_blocked()
            assert answers == []  # follower 2 has not moved yet
            _reports(manager, 2, 12)
    assert answers == [11]


async def test_a_broker_leaving_the_live_set_releases_the_wait(tmp_path: Path) -> None:
    manager = _leader(tmp_path, isr=[0, 1, 2])
    _reports(manager, 1, 11)
    answers: list[int] = []

    async def wait() -> None:
        answers.append(await manager.wait_for_low_watermark(TP, 11, trio.current_time() + FAR))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            assert answers == []
            manager.live_brokers_changed([0, 1])  # UpdateMetadata: broker 2 is gone
    assert answers == [11]


async def test_the_deadline_answers_request_timed_out_naming_the_replicas_behind(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    manager = _leader(tmp_path, isr=[0, 1])
    _reports(manager, 1, 11)
    _reports(manager, 2, 3)
    start = trio.current_time()
    with pytest.raises(RequestTimedOutError) as raised:
        await manager.wait_for_low_watermark(TP, 11, start + 5)
    assert trio.current_time() == start + 5
    message = str(raised.value)
    assert "t-0" in message and "2 (at 3)" in message and "11" in message
    assert "1 (at" not in message


async def test_losing_the_leadership_while_waiting_answers_not_leader(tmp_path: Path) -> None:
    manager = _leader(tmp_path, isr=[0, 1, 2])
    replica = manager.leading(TP)
    assert replica is not None
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            async def wait() -> None:
                with pytest.raises(NotLeaderForPartitionError):
                    await manager.wait_for_low_watermark(TP, 11, trio.current_time() + FAR)

            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            manager.become(TP, replica.plog, _state(leader=1, epoch=2, isr=[1, 2]))
