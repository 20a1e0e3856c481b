"""Kafka's PartitionLeaderElectionAlgorithms (``broker.cluster.elections``), one rule at a time:
who leads after the leader dies, after a reassignment, on a preferred election and when a broker
shuts down, and what a dead broker's leaving does to the ISR."""

from __future__ import annotations

import pytest

from broker.cluster.elections import (
    controlled_shutdown_leader,
    offline_leader,
    preferred_leader,
    reassignment_leader,
    shrink_isr,
)


@pytest.mark.parametrize(
    ("replicas", "isr", "eligible", "unclean", "leader"),
    [
        pytest.param((2, 0, 1), (1, 0), {0, 1}, False, 0, id="assignment order, not ISR order"),
        pytest.param((0, 1, 2), (0, 2), {1, 2}, False, 2, id="out of sync replica passed over"),
        pytest.param((0, 1), (0,), {1}, False, None, id="no eligible ISR member: nobody"),
        pytest.param((0, 1, 2), (0,), {2, 1}, True, 1, id="unclean: first eligible replica"),
        pytest.param((0, 1, 2), (0, 2), {1, 2}, True, 2, id="unclean allowed, clean preferred"),
        pytest.param((0, 1), (0,), set(), True, None, id="unclean, nobody live"),
    ],
)
def test_offline_leader(replicas: tuple[int, ...], isr: tuple[int, ...], eligible: set[int],
                        unclean: bool, leader: int | None) -> None:
    assert offline_leader(replicas, isr, eligible, unclean_allowed=unclean) == leader


def test_an_unclean_leader_is_the_only_pick_outside_the_isr() -> None:
    """The controller tells an unclean election by the leader's not being in the ISR."""
    assert offline_leader((0, 1), (0,), {1}, unclean_allowed=True) not in (0,)
    assert offline_leader((0, 1), (0, 1), {1}, unclean_allowed=True) in (0, 1)


@pytest.mark.parametrize(
    ("target", "isr", "eligible", "current", "leader"),
    [
        pytest.param((1, 0, 2), (0, 1, 2), {0, 1, 2}, 0, 0, id="current leader among new: kept"),
        pytest.param((2, 3), (0, 1, 2, 3), {0, 1, 2, 3}, 0, 2, id="old leader: first new one"),
        pytest.param((2, 3), (0, 2, 3), {0, 3}, 0, 3, id="first new one not live: the next"),
        pytest.param((2, 3), (0, 2, 3), {0, 1}, 0, None, id="no new one live"),
        pytest.param((1, 2), (0, 1, 2), {0, 2}, 1, 2, id="current one stopping"),
    ],
)
def test_reassignment_leader(target: tuple[int, ...], isr: tuple[int, ...], eligible: set[int],
                             current: int, leader: int | None) -> None:
    assert reassignment_leader(target, isr, eligible, current) == leader


@pytest.mark.parametrize(
    ("replicas", "isr", "eligible", "leader"),
    [
        pytest.param((0, 1, 2), (1, 2, 0), {0, 1, 2}, 0, id="first replica in sync and live"),
        pytest.param((0, 1, 2), (1, 2), {0, 1, 2}, None, id="first replica out of sync"),
        pytest.param((0, 1, 2), (0, 1, 2), {1, 2}, None, id="first replica not eligible"),
        pytest.param((), (), {0}, None, id="no replicas"),
    ],
)
def test_preferred_leader(replicas: tuple[int, ...], isr: tuple[int, ...], eligible: set[int],
                          leader: int | None) -> None:
    assert preferred_leader(replicas, isr, eligible) == leader


@pytest.mark.parametrize(
    ("replicas", "isr", "eligible", "leader"),
    [
        pytest.param((0, 1, 2), (0, 1, 2), {1, 2}, 1, id="first other in-sync replica"),
        pytest.param((0, 1, 2), (0, 1, 2), {2}, 2, id="one stopping too: passed over"),
        pytest.param((0, 1), (0,), {1}, None, id="the other is out of sync"),
        pytest.param((0,), (0,), {0}, None, id="only replica: never itself"),
    ],
)
def test_controlled_shutdown_leader(replicas: tuple[int, ...], isr: tuple[int, ...],
                                    eligible: set[int], leader: int | None) -> None:
    assert controlled_shutdown_leader(replicas, isr, eligible, stopping=0) == leader


@pytest.mark.parametrize(
    ("leader", "isr", "live", "shrunk"),
    [
        pytest.param(0, (0, 1, 2), {0, 2}, [0, 2], id="a dead follower leaves"),
        pytest.param(0, (1, 0, 2), set(), [0], id="all dead: the last leader stays"),
        pytest.param(-1, (1, 2), set(), [2], id="all dead, no leader in it: the last member"),
        pytest.param(0, (0, 1), {0, 1}, [0, 1], id="nobody dead: unchanged"),
    ],
)
def test_shrink_isr_never_empties_it(leader: int, isr: tuple[int, ...], live: set[int],
                                     shrunk: list[int]) -> None:
    assert shrink_isr(leader, isr, live) == shrunk
