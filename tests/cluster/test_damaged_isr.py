"""``broker.cluster.damaged.leave_isrs``: which ISRs a broker whose replicas were cut leaves
before registering, against a ZooKeeper of dicts."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import pytest
from kazoo.exceptions import BadVersionError, NoNodeError

from broker.cluster import zk_layout as zk
from broker.cluster.damaged import Damaged, leave_isrs
from broker.cluster.zookeeper import ZooKeeper
from broker.log.partition_log import RecoveryLoss

pytestmark = pytest.mark.timeout(30)

T = TypeVar("T")
ME = 2
LOSS = RecoveryLoss(first_offset=40, old_end=90, bytes_removed=4000, segments_deleted=2,
                    reason="CRC mismatch")


@dataclass
class Stat:
    version: int


class FakeKazoo:
    """The few kazoo calls ``leave_isrs`` makes, on a dict of znodes."""

    def __init__(self, live: list[int]) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self.live = live
        self.created: list[tuple[str, bytes]] = []
        self.moves_before_set = 0  # times another writer changes the node between get and set

    def get(self, path: str) -> tuple[bytes, Stat]:
        if path not in self.nodes:
            raise NoNodeError(path)
        data, version = self.nodes[path]
        return data, Stat(version)

    def get_children(self, path: str) -> list[str]:
        assert path == zk.BROKER_IDS
        return [str(b) for b in self.live]

    def set(self, path: str, data: bytes, version: int) -> Stat:
        current, at = self.nodes[path]
        if self.moves_before_set:
            self.moves_before_set -= 1
            self.nodes[path] = (current, at + 1)
            raise BadVersionError(path)
        if version != at:
            raise BadVersionError(path)
        self.nodes[path] = (data, at + 1)
        return Stat(at + 1)

    def create(self, path: str, data: bytes, *, sequence: bool, makepath: bool) -> str:
        self.created.append((path, data))
        return path


class FakeZoo:
    def __init__(self, kazoo: FakeKazoo) -> None:
        self.kazoo = kazoo

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return fn(*args, **kwargs)


def _zoo(states: dict[tuple[str, int], tuple[int, list[int]]], live: list[int]) -> FakeZoo:
    kazoo = FakeKazoo(live)
    for (topic, partition), (leader, isr) in states.items():
        state = zk.LeaderIsr(leader, 5, tuple(isr), 3)
        kazoo.nodes[zk.state_path(topic, partition)] = (state.encode(), 7)
    return FakeZoo(kazoo)


async def _leave(zoo: FakeZoo, damaged: Damaged) -> list[tuple[str, int]]:
    return await leave_isrs(cast(ZooKeeper, zoo), ME, damaged)


def _state(zoo: FakeZoo, topic: str, partition: int) -> zk.LeaderIsr:
    data, stat = zoo.kazoo.get(zk.state_path(topic, partition))
    return zk.LeaderIsr.decode(topic, partition, data, stat.version)


async def test_a_damaged_last_leader_leaves_the_isr_and_the_leadership() -> None:
    zoo = _zoo({("t", 0): (ME, [0, 1, ME])}, live=[])
    left = await _leave(zoo, {("t", 0): (LOSS, 80)})
    assert left == [("t", 0)]
    state = _state(zoo, "t", 0)
    assert (state.leader, state.isr, state.leader_epoch) == (zk.NO_LEADER, (0, 1), 5)
    (path, body), = zoo.kazoo.created
    assert path.startswith(f"{zk.ISR_CHANGES}/{zk.ISR_CHANGE_PREFIX}")
    assert json.loads(body)["partitions"] == [{"topic": "t", "partition": 0}]


async def test_a_damaged_follower_of_a_dead_leader_leaves_the_isr() -> None:
    zoo = _zoo({("t", 0): (0, [0, ME, 1])}, live=[1])
    left = await _leave(zoo, {("t", 0): (LOSS, 80)})
    assert left == [("t", 0)]
    state = _state(zoo, "t", 0)
    assert (state.leader, state.isr) == (0, (0, 1))


async def test_a_live_leaders_isr_is_left_to_it() -> None:
    zoo = _zoo({("t", 0): (1, [1, ME])}, live=[1])
    assert await _leave(zoo, {("t", 0): (LOSS, 80)}) == []
    assert _state(zoo, "t", 0).isr == (1, ME)
    assert zoo.kazoo.created == []


async def test_the_only_in_sync_copy_stays_and_its_loss_is_logged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    zoo = _zoo({("t", 0): (ME, [ME]), ("t", 1): (0, [0, 1])}, live=[])
    damaged = {("t", 0): (LOSS, 80), ("t", 1): (LOSS, 80), ("gone", 0): (LOSS, 80)}
    assert await _leave(zoo, damaged) == []
    assert _state(zoo, "t", 0).isr == (ME,)
    assert _state(zoo, "t", 1).isr == (0, 1)  # out of sync already
    out = capsys.readouterr().out
    assert "replica.damaged_only_copy" in out and "first_offset_dropped=40" in out


async def test_a_state_written_meanwhile_is_read_again() -> None:
    zoo = _zoo({("t", 0): (ME, [ME, 0])}, live=[])
    zoo.kazoo.moves_before_set = 1
    assert await _leave(zoo, {("t", 0): (LOSS, 80)}) == [("t", 0)]
    assert _state(zoo, "t", 0).isr == (0,)
