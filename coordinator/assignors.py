"""Partition assignment strategies: ``range``, ``roundrobin`` and ``sticky``.

A strategy is a small class with a ``name`` and one pure method, ``assign``, from the members'
subscriptions, the partition counts of the subscribed topics and the previous generation's
assignment to the new one. Members are ordered by member id. ``range`` and ``roundrobin`` give
exactly Kafka's RangeAssignor and RoundRobinAssignor results for the same members and partitions;
``sticky`` is ours. The coordinator runs whichever the group's members named, if the server's
``partition_assignment_strategies`` allows it (seed 001: the consumer names the strategy by its
"friendly name").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping
from functools import lru_cache
from typing import ClassVar, NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int


Assignment = tuple[TopicPartition, ...]


@lru_cache(maxsize=1 << 16)
def shared(tp: TopicPartition) -> TopicPartition:
    """The one ``TopicPartition`` object kept for a partition. Every member's assignment holds
    them: 100,000 members owning ten partitions each would otherwise hold a million copies,
    a third of the coordinator's memory per member."""
    return tp
Subscriptions = Mapping[str, Collection[str]]


class AssignmentStrategy(ABC):
    """Maps member id -> subscribed topics to member id -> partitions to own.

    Every member in ``subscriptions`` appears in the result (with ``()`` if it gets nothing);
    every partition of ``partitions`` (topic -> count) that some member subscribes to is owned
    by exactly one member subscribed to its topic. ``previous`` is the last generation's result.
    """

    name: ClassVar[str]

    @abstractmethod
    def assign(
        self,
        subscriptions: Subscriptions,
        partitions: Mapping[str, int],
        previous: Mapping[str, Assignment],
    ) -> dict[str, Assignment]: ...


def _subscribed_topics(subscriptions: Subscriptions, partitions: Mapping[str, int]) -> list[str]:
    topics = {t for subscribed in subscriptions.values() for t in subscribed}
    return sorted(t for t in topics if partitions.get(t, 0) > 0)


def _result(
    subscriptions: Subscriptions, owned: Mapping[str, Iterable[TopicPartition]]
) -> dict[str, Assignment]:
    return {m: tuple(sorted(map(shared, owned.get(m, ())))) for m in subscriptions}


class RangeStrategy(AssignmentStrategy):
    """Kafka's RangeAssignor (seed 000/004's range rebalance): per topic, its partitions in
    consecutive ranges over the subscribed members in member-id order; the first
    ``partitions % members`` members get one more."""

    name = "range"

    def assign(
        self,
        subscriptions: Subscriptions,
        partitions: Mapping[str, int],
        previous: Mapping[str, Assignment],
    ) -> dict[str, Assignment]:
        owned: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        for topic in _subscribed_topics(subscriptions, partitions):
            members = sorted(m for m, subscribed in subscriptions.items() if topic in subscribed)
            per_member, extra = divmod(partitions[topic], len(members))
            for i, member in enumerate(members):
                start = per_member * i + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                owned[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return _result(subscriptions, owned)


class RoundRobinStrategy(AssignmentStrategy):
    """Kafka's RoundRobinAssignor: every partition of every subscribed topic in (topic,
    partition) order, dealt to members in member-id order, skipping members not subscribed to
    the partition's topic."""

    name = "roundrobin"

    def assign(
        self,
        subscriptions: Subscriptions,
        partitions: Mapping[str, int],
        previous: Mapping[str, Assignment],
    ) -> dict[str, Assignment]:
        members = sorted(subscriptions)
        owned: dict[str, list[TopicPartition]] = {m: [] for m in members}
        turn = 0
        for topic in _subscribed_topics(subscriptions, partitions):
            for p in range(partitions[topic]):
                while topic not in subscriptions[members[turn]]:
                    turn = (turn + 1) % len(members)
                owned[members[turn]].append(TopicPartition(topic, p))
                turn = (turn + 1) % len(members)
        return _result(subscriptions, owned)


class StickyStrategy(AssignmentStrategy):
    """Balanced, and moving as few partitions as possible from the previous generation.

    Balanced: no partition's owner holds two or more partitions more than another member
    subscribed to its topic (with equal subscriptions: sizes differ by at most one). Each member
    keeps what it owned and still may own; the rest is dealt to the least-loaded subscribers.
    """

    name = "sticky"

    def assign(
        self,
        subscriptions: Subscriptions,
        partitions: Mapping[str, int],
        previous: Mapping[str, Assignment],
    ) -> dict[str, Assignment]:
        members = sorted(subscriptions)
        topics = _subscribed_topics(subscriptions, partitions)
        owner: dict[TopicPartition, str] = {}
        for member in members:
            for tp in previous.get(member, ()):
                if (
                    tp.topic in subscriptions[member]
                    and 0 <= tp.partition < partitions.get(tp.topic, 0)
                    and tp not in owner
                ):
                    owner[tp] = member
        held: dict[str, list[TopicPartition]] = {m: [] for m in members}
        for tp, member in owner.items():
            held[member].append(tp)
        everything = [TopicPartition(t, p) for t in topics for p in range(partitions[t])]
        if len({frozenset(s) for s in subscriptions.values()}) == 1:
            return _result(subscriptions, self._by_quota(members, held, everything, owner))
        return _result(subscriptions, self._by_moves(subscriptions, held, everything, owner))

    @staticmethod
    def _by_quota(
        members: list[str],
        held: dict[str, list[TopicPartition]],
        everything: list[TopicPartition],
        owner: dict[TopicPartition, str],
    ) -> dict[str, list[TopicPartition]]:
        """Equal subscriptions: quotas of n or n + 1, the larger ones going to the members that
        already hold the most, so only the excess moves."""
        base, extra = divmod(len(everything), len(members))
        by_holding = sorted(members, key=lambda m: (-len(held[m]), m))
        quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_holding)}
        for member in members:
            mine = sorted(held[member])
            for tp in mine[quota[member]:]:
                del owner[tp]
            held[member] = mine[: quota[member]]
        free = iter(tp for tp in everything if tp not in owner)
        for member in members:
            while len(held[member]) < quota[member]:
                held[member].append(next(free))
        return held

    @staticmethod
    def _by_moves(
        subscriptions: Subscriptions,
        held: dict[str, list[TopicPartition]],
        everything: list[TopicPartition],
        owner: dict[TopicPartition, str],
    ) -> dict[str, list[TopicPartition]]:
        """Different subscriptions: deal free partitions to the least-loaded subscriber, then move
        single partitions from a member to a subscriber holding two or more fewer until none
        can; the sum of squared sizes falls with every move, so this ends."""
        subscribers = {
            topic: sorted(m for m, s in subscriptions.items() if topic in s)
            for topic in {tp.topic for tp in everything}
        }

        def least_loaded(topic: str) -> str:
            return min(subscribers[topic], key=lambda m: (len(held[m]), m))

        for tp in everything:
            if tp not in owner:
                member = least_loaded(tp.topic)
                owner[tp] = member
                held[member].append(tp)
        moved = True
        while moved:
            moved = False
            for tp in everything:
                source, target = owner[tp], least_loaded(tp.topic)
                if len(held[target]) < len(held[source]) - 1:
                    held[source].remove(tp)
                    held[target].append(tp)
                    owner[tp] = target
                    moved = True
        return held


BUILTIN_STRATEGIES: tuple[AssignmentStrategy, ...] = (
    RangeStrategy(),
    RoundRobinStrategy(),
    StickyStrategy(),
)
