"""Issue #5 scenarios 27-29 and issue #17 item 6: assignment strategies, and their properties
under hypothesis."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Mapping

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from coordinator import (
    BUILTIN_STRATEGIES,
    RangeStrategy,
    RoundRobinStrategy,
    StickyStrategy,
    TopicPartition,
)
from coordinator.assignors import Assignment
from protocol.errors import ErrorCode
from tests.coordinator.harness import Consumer, FakeDriver, form_group


def tps(*names: str) -> tuple[TopicPartition, ...]:
    """``tps("t0p1", "t1p0")`` -> the TopicPartitions, sorted."""
    out = []
    for name in names:
        topic, partition = name.split("p")
        out.append(TopicPartition(topic, int(partition)))
    return tuple(sorted(out))


def test_27_range_matches_kafkas_range_assignor():
    """Seed 004 / Kafka RangeAssignor: per topic, partitions divided in consecutive ranges over
    the members in order; the first members get one more when it does not divide evenly."""
    both = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    assert RangeStrategy().assign(both, {"t0": 3, "t1": 3}, {}) == {
        "C0": tps("t0p0", "t0p1", "t1p0", "t1p1"),
        "C1": tps("t0p2", "t1p2"),
    }
    three = {"C0": ["t"], "C1": ["t"], "C2": ["t"]}
    assert RangeStrategy().assign(three, {"t": 7}, {}) == {
        "C0": tps("tp0", "tp1", "tp2"), "C1": tps("tp3", "tp4"), "C2": tps("tp5", "tp6"),
    }


def test_27_roundrobin_matches_kafkas_roundrobin_assignor():
    both = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    assert RoundRobinStrategy().assign(both, {"t0": 3, "t1": 3}, {}) == {
        "C0": tps("t0p0", "t0p2", "t1p1"),
        "C1": tps("t0p1", "t1p0", "t1p2"),
    }
    mixed = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    assert RoundRobinStrategy().assign(mixed, {"t0": 1, "t1": 2, "t2": 3}, {}) == {
        "C0": tps("t0p0"),
        "C1": tps("t1p0"),
        "C2": tps("t1p1", "t2p0", "t2p1", "t2p2"),
    }


def test_27_members_are_ordered_by_member_id_not_by_arrival():
    arrival_order = {"C1": ["t"], "C0": ["t"]}
    assert RangeStrategy().assign(arrival_order, {"t": 3}, {}) == {
        "C0": tps("tp0", "tp1"), "C1": tps("tp2"),
    }


def test_28_different_subscriptions_and_more_members_than_partitions():
    """Members get only partitions of their own topics; extra members get nothing and stay."""
    for strategy in ("range", "roundrobin", "sticky"):
        driver = FakeDriver(topics={"a": 2, "b": 1})
        consumers = form_group([
            Consumer(driver, "g", ["a"], strategy=strategy),
            Consumer(driver, "g", ["a", "b"], strategy=strategy),
            Consumer(driver, "g", ["b"], strategy=strategy),
            Consumer(driver, "g", ["b"], strategy=strategy),
        ])
        owned = [tp for c in consumers for tp in c.partitions]
        assert sorted(owned) == [("a", 0), ("a", 1), ("b", 0)], strategy
        for c in consumers:
            assert all(topic in c.topics for topic, _ in c.partitions), strategy
            assert c.heartbeat() is ErrorCode.NONE
        assert sum(1 for c in consumers if not c.partitions) >= 1
        assert len(driver.group("g").members) == 4


def _moves(before: dict[str, Assignment], after: dict[str, Assignment]) -> int:
    """Partitions whose owner changed (including those whose owner left)."""
    old = {tp: m for m, a in before.items() for tp in a}
    new = {tp: m for m, a in after.items() for tp in a}
    return sum(1 for tp, m in new.items() if tp in old and old[tp] != m)


def _fewest_moves(previous: dict[str, Assignment], members: list[str],
                  partitions: dict[str, int]) -> int:
    """The fewest owner changes any balanced assignment needs when every member subscribes to
    everything: the partitions of members who left, plus each member's excess over its quota,
    the larger quotas going to those holding most."""
    total = sum(partitions.values())
    orphaned = sum(len(a) for m, a in previous.items() if m not in members)
    held = sorted((len(previous.get(m, ())) for m in members), reverse=True)
    base, extra = divmod(total, len(members))
    excess = sum(max(0, h - (base + (1 if i < extra else 0))) for i, h in enumerate(held))
    return orphaned + excess


def test_29_sticky_moves_fewer_partitions_than_range():
    """Over random sequences of joins and leaves, each strategy following its own assignments,
    sticky moves fewer partitions in total than range. On every step it stays balanced (sizes
    differ by at most one) and moves no more than any balanced assignment must. (Range can move
    fewer on one step only by being unbalanced: t0 with 3 and t1 with 9 partitions over two
    members gives 7 and 5.)"""
    for seed in range(20):
        rng = random.Random(seed)
        partitions = {"t0": rng.randint(4, 24), "t1": rng.randint(4, 24)}
        members = [f"m{i:03d}" for i in range(rng.randint(1, 4))]
        next_id = len(members)
        range_prev: dict[str, Assignment] = {}
        sticky_prev: dict[str, Assignment] = {}
        range_total = sticky_total = 0
        for _ in range(30):
            if len(members) == 8 or (len(members) > 1 and rng.random() < 0.5):
                members.remove(rng.choice(members))
            else:
                members.append(f"m{next_id:03d}")
                next_id += 1
            subscriptions = {m: ["t0", "t1"] for m in members}
            range_next = RangeStrategy().assign(subscriptions, partitions, range_prev)
            sticky_next = StickyStrategy().assign(subscriptions, partitions, sticky_prev)
            sizes = [len(a) for a in sticky_next.values()]
            assert max(sizes) - min(sizes) <= 1
            sticky_moves = _moves(sticky_prev, sticky_next)
            assert sticky_moves == _fewest_moves(sticky_prev, members, partitions), seed
            range_total += _moves(range_prev, range_next)
            sticky_total += sticky_moves
            range_prev, sticky_prev = range_next, sticky_next
        assert sticky_total < range_total, seed


@st.composite
def assignment_inputs(draw):
    topics = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, unique=True))
    partitions = {t: draw(st.integers(0, 8)) for t in topics}
    member_ids = draw(st.lists(st.text("xyz", min_size=1, max_size=3), min_size=1, max_size=6,
                               unique=True))
    subscriptions = {
        m: draw(st.lists(st.sampled_from([*topics, "missing"]), unique=True))
        for m in member_ids
    }
    previous = {
        m: tuple(sorted({TopicPartition(t, draw(st.integers(0, 9)))
                         for t in draw(st.lists(st.sampled_from(topics), max_size=4))}))
        for m in member_ids if draw(st.booleans())
    }
    return subscriptions, partitions, previous


@given(assignment_inputs())
def test_every_strategy_assigns_each_subscribed_partition_once_to_a_subscriber(inputs):
    subscriptions, partitions, previous = inputs
    expected = sorted(
        TopicPartition(t, p) for t, n in partitions.items() for p in range(n)
        if any(t in s for s in subscriptions.values())
    )
    for strategy in BUILTIN_STRATEGIES:
        result = strategy.assign(subscriptions, partitions, previous)
        assert set(result) == set(subscriptions), strategy.name
        owned = sorted(tp for a in result.values() for tp in a)
        assert owned == expected, strategy.name
        for member, assignment in result.items():
            assert all(tp.topic in subscriptions[member] for tp in assignment), strategy.name


@given(assignment_inputs())
def test_sticky_is_balanced_among_subscribers(inputs):
    """Kafka's StickyAssignor definition: no member has two or more partitions fewer than a
    member owning a partition of a topic it subscribes to."""
    subscriptions, partitions, previous = inputs
    result = StickyStrategy().assign(subscriptions, partitions, previous)
    for member, assignment in result.items():
        for tp in assignment:
            for other, subscribed in subscriptions.items():
                if tp.topic in subscribed:
                    assert len(result[other]) >= len(assignment) - 1, (member, other, tp)


def test_sticky_moves_only_the_partitions_of_the_member_that_left():
    """Issue #17 item 6: with different subscriptions, C0 leaving moves its three partitions
    and nothing else; the result is balanced (C2 cannot take any of C1's t2 partitions)."""
    previous = {
        "C0": tps("t1p0", "t2p0", "t2p2"),
        "C1": tps("t0p1", "t2p1"),
        "C2": tps("t0p0", "t0p2"),
    }
    subscriptions = {"C1": ["t0", "t1", "t2"], "C2": ["t0", "t1"]}
    result = StickyStrategy().assign(subscriptions, {"t0": 3, "t1": 1, "t2": 3}, previous)
    assert result == {
        "C1": tps("t0p1", "t2p0", "t2p1", "t2p2"),
        "C2": tps("t0p0", "t0p2", "t1p0"),
    }


def test_sticky_evens_sizes_a_chain_of_moves_can_even():
    """Balance is about chains of moves, not only single ones: sizes 3, 2, 1 where A cannot
    give C anything directly still move (A gives B an x, B gives C a y) to 2, 2, 2."""
    previous = {"A": tps("xp0", "xp1", "xp2"), "B": tps("yp0", "yp1"), "C": tps("yp2")}
    subscriptions = {"A": ["x"], "B": ["x", "y"], "C": ["y"]}
    result = StickyStrategy().assign(subscriptions, {"x": 3, "y": 3}, previous)
    assert sorted(len(a) for a in result.values()) == [2, 2, 2]
    assert _moves(previous, result) == 2


def _keepers(subscriptions: dict[str, list[str]], partitions: dict[str, int],
             previous: dict[str, Assignment]) -> dict[TopicPartition, str]:
    """Partitions whose previous owner is still a member, subscribed to its topic."""
    return {
        tp: member for member, assignment in previous.items() for tp in assignment
        if member in subscriptions and tp.topic in subscriptions[member]
        and tp.partition < partitions.get(tp.topic, 0)
    }


def _evenness_and_kept_moves(assignment: Mapping[TopicPartition, str],
                             keepers: Mapping[TopicPartition, str]) -> tuple[int, int]:
    """(sum of squared member sizes, kept partitions moved): lower is better, in that order."""
    sizes = Counter(assignment.values())
    moved = sum(1 for tp, member in keepers.items() if assignment[tp] != member)
    return sum(n * n for n in sizes.values()), moved


@st.composite
def sticky_inputs(draw):
    """Up to 4 members (one maybe gone) over at most 7 partitions, each previously owned at most
    once, so every assignment can be tried."""
    topics = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, unique=True))
    partitions = {t: draw(st.integers(0, 3)) for t in topics}
    assume(sum(partitions.values()) <= 7)
    members = draw(st.lists(st.sampled_from(["m0", "m1", "m2", "m3"]), min_size=1, unique=True))
    subscriptions = {
        m: draw(st.lists(st.sampled_from(topics), min_size=1, unique=True)) for m in members
    }
    previous: dict[str, list[TopicPartition]] = {}
    for topic, count in partitions.items():
        for p in range(count):
            holder = draw(st.sampled_from([None, "gone", *members]))
            if holder is not None:
                previous.setdefault(holder, []).append(TopicPartition(topic, p))
    return subscriptions, partitions, {m: tuple(a) for m, a in previous.items()}


@settings(max_examples=1000, deadline=None)
@given(sticky_inputs())
def test_sticky_moves_a_kept_partition_only_when_balance_requires_it(inputs):
    """Balance requires a move when every assignment as even as the subscriptions allow (the
    smallest sum of squared sizes) moves it: among those, sticky moves the fewest partitions
    whose owner stays and is still subscribed. Checked against every possible assignment."""
    subscriptions, partitions, previous = inputs
    keepers = _keepers(subscriptions, partitions, previous)
    everything = [TopicPartition(t, p) for t, n in partitions.items() for p in range(n)
                  if any(t in s for s in subscriptions.values())]
    choices = [[m for m, s in subscriptions.items() if tp.topic in s] for tp in everything]
    best = min(
        _evenness_and_kept_moves(dict(zip(everything, owners, strict=True)), keepers)
        for owners in itertools.product(*choices)
    )
    result = StickyStrategy().assign(subscriptions, partitions, previous)
    got = {tp: member for member, assignment in result.items() for tp in assignment}
    assert _evenness_and_kept_moves(got, keepers) == best
