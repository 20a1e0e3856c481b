"""A LeaderAndIsr can reach a broker before its replica manager runs: a restarted broker
registers in ZooKeeper, and is told what to follow, before it serves. It can also name a leader
whose address is not known yet. Either way the follower must start fetching once it can,
rather than stay out of the ISR for good. No ZooKeeper: the manager alone, real logs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import trio
import trio.testing

from broker.cluster.replicas import ReplicaManager
from broker.log import LogConfig, PartitionLog
from broker.settings import BrokerSettings

FOLLOWED = ("t", 0)


def _manager(addresses: dict[int, tuple[str, int]]) -> ReplicaManager:
    return ReplicaManager(1, zoo=None, settings=BrokerSettings(),
                          on_high_watermark=lambda topic, partition: None,
                          broker_address=addresses.get)


def _follow(manager: ReplicaManager, tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), replicated=True)
    manager.become(FOLLOWED, plog, {"leader": 0, "leader_epoch": 0, "isr": [0, 1],
                                    "replicas": [0, 1], "zk_version": 0, "controller_epoch": 1})


def _fetching(manager: ReplicaManager) -> bool:
    return any(FOLLOWED in f.partitions for f in manager._fetchers.values())


async def _until(condition: Callable[[], bool]) -> None:
    with trio.fail_after(5):
        while not condition():
            await trio.sleep(0.01)


async def test_a_follower_told_before_the_manager_runs_fetches_once_it_runs(
        tmp_path: Path) -> None:
    manager = _manager({0: ("127.0.0.1", 9)})
    _follow(manager, tmp_path)
    assert not _fetching(manager)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(manager.run)
        await _until(lambda: _fetching(manager))
        nursery.cancel_scope.cancel()


async def test_a_follower_of_an_unknown_leader_fetches_once_its_address_is_known(
        tmp_path: Path) -> None:
    addresses: dict[int, tuple[str, int]] = {}
    manager = _manager(addresses)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(manager.run)
        await trio.testing.wait_all_tasks_blocked()
        _follow(manager, tmp_path)
        assert not _fetching(manager)
        addresses[0] = ("127.0.0.1", 9)  # UpdateMetadata brought it
        manager.retry_fetching()
        assert _fetching(manager)
        nursery.cancel_scope.cancel()
