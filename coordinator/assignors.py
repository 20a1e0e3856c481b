"""Partition assignment strategies: ``range``, ``roundrobin`` and ``sticky``.

A strategy is a small class with a ``name`` and one pure method, ``assign``, from the members'
subscriptions, the partition counts of the subscribed topics and the previous generation's
assignment to the new one. Members are ordered by member id. ``range`` and ``roundrobin`` give
exactly Kafka's RangeAssignor and RoundRobinAssignor results for the same members and partitions;
``sticky`` is ours: balanced (at least as Kafka's StickyAssignor defines it), and moving the
fewest partitions any balanced assignment can. The coordinator runs whichever the group's
members named, if the server's ``partition_assignment_strategies`` allows it (seed 001: the
consumer names the strategy by its "friendly name").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping
from functools import lru_cache
from typing import ClassVar

from protocol.partitions import TopicPartition

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
    """Balanced, and among the balanced assignments one that moves the fewest partitions.

    Balanced: the member sizes are as even as the subscriptions allow -- no chain of moves, each
    handing one partition to another member subscribed to its topic, takes a partition from a
    member to one holding two or more fewer (equivalently: no assignment has a smaller sum of
    squared sizes; with equal subscriptions: sizes differ by at most one). This implies Kafka's
    StickyAssignor definition ("a consumer with 2+ fewer partitions than another cannot get any
    of that consumer's partitions"), which looks at single moves only; the chain version is the
    one under which "the fewest moves" has one answer that can be computed exactly.

    Sticky: a partition is *kept* when its previous owner is still a member, still subscribed to
    its topic and the partition still exists; the result moves the fewest kept partitions of any
    balanced assignment, so a kept partition moves only when balance requires it.
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
        keeper: dict[TopicPartition, str] = {}
        for member in members:
            for tp in previous.get(member, ()):
                if (
                    tp.topic in subscriptions[member]
                    and 0 <= tp.partition < partitions.get(tp.topic, 0)
                    and tp not in keeper
                ):
                    keeper[tp] = member
        everything = [TopicPartition(t, p) for t in topics for p in range(partitions[t])]
        if len({frozenset(s) for s in subscriptions.values()}) == 1:
            return _result(subscriptions, self._by_quota(members, keeper, everything))
        return _result(subscriptions, _ByCycles(subscriptions, keeper, everything).assign())

    @staticmethod
    def _by_quota(
        members: list[str], keeper: Mapping[TopicPartition, str], everything: list[TopicPartition]
    ) -> dict[str, list[TopicPartition]]:
        """Equal subscriptions: quotas of n or n + 1, the larger ones going to the members that
        already hold the most, so only the excess moves."""
        held: dict[str, list[TopicPartition]] = {m: [] for m in members}
        for tp, member in keeper.items():
            held[member].append(tp)
        base, extra = divmod(len(everything), len(members))
        by_holding = sorted(members, key=lambda m: (-len(held[m]), m))
        quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_holding)}
        taken: set[TopicPartition] = set()
        for member in members:
            held[member] = sorted(held[member])[: quota[member]]
            taken.update(held[member])
        free = iter(tp for tp in everything if tp not in taken)
        for member in members:
            while len(held[member]) < quota[member]:
                held[member].append(next(free))
        return held


_SINK = None  # the cycle search's extra node, beside the member ids


class _ByCycles:
    """Different subscriptions: a minimum-cost assignment, by cancelling negative cycles.

    The cost of an assignment is ``weight * sum of squared sizes + moved kept partitions``, with
    ``weight`` above any possible number of moves, so it is minimal exactly when the assignment is
    balanced and, among balanced ones, moves the fewest kept partitions. Start from every kept
    partition with its keeper and the others dealt to the least-loaded subscriber (the partitions
    with fewest subscribers first), then apply cost-lowering cycles until there are none, which
    proves the minimum (the optimality condition of a convex-cost flow). A cycle is a ring of
    single moves among members (member ``u`` -> ``v``: ``u`` hands one of its partitions to ``v``),
    optionally through a sink node that lets one member lose a partition and another gain one:
    ``v`` -> sink costs the rise of ``v``'s squared size, sink -> ``u`` the fall of ``u``'s.
    """

    def __init__(
        self,
        subscriptions: Subscriptions,
        keeper: Mapping[TopicPartition, str],
        everything: list[TopicPartition],
    ) -> None:
        self.members = sorted(subscriptions)
        self.keeper = keeper
        self.subscribers = {
            topic: [m for m in self.members if topic in subscriptions[m]]
            for topic in {tp.topic for tp in everything}
        }
        self.weight = len(everything) + 1
        self.owner: dict[TopicPartition, str] = dict(keeper)
        self.size = dict.fromkeys(self.members, 0)
        for member in keeper.values():
            self.size[member] += 1
        free = [tp for tp in everything if tp not in keeper]
        for tp in sorted(free, key=lambda tp: (len(self.subscribers[tp.topic]), tp)):
            member = min(self.subscribers[tp.topic], key=lambda m: (self.size[m], m))
            self.owner[tp] = member
            self.size[member] += 1

    def assign(self) -> dict[str, list[TopicPartition]]:
        while (cycle := self._negative_cycle()) is not None:
            for source, target, tp in cycle:
                self.owner[tp] = target
                self.size[source] -= 1
                self.size[target] += 1
        held: dict[str, list[TopicPartition]] = {m: [] for m in self.members}
        for tp, member in self.owner.items():
            held[member].append(tp)
        return held

    def _move_cost(self, tp: TopicPartition, source: str, target: str) -> int:
        """+1 if the move takes ``tp`` from its keeper, -1 if it returns it, else 0."""
        return (self.keeper.get(tp) == source) - (self.keeper.get(tp) == target)

    def _edges(self) -> dict[tuple[str | None, str | None], tuple[int, TopicPartition | None]]:
        """(from, to) -> (cost, the partition moved): the cheapest move between each pair."""
        edges: dict[tuple[str | None, str | None], tuple[int, TopicPartition | None]] = {}
        for tp, source in sorted(self.owner.items()):
            for target in self.subscribers[tp.topic]:
                if target != source:
                    cost = self._move_cost(tp, source, target)
                    if (source, target) not in edges or cost < edges[source, target][0]:
                        edges[source, target] = (cost, tp)
        for member in self.members:
            edges[member, _SINK] = (self.weight * (2 * self.size[member] + 1), None)
            if self.size[member]:
                edges[_SINK, member] = (-self.weight * (2 * self.size[member] - 1), None)
        return edges

    def _negative_cycle(self) -> list[tuple[str, str, TopicPartition]] | None:
        """The moves of one negative-cost cycle (Bellman-Ford), or None if there is none."""
        edges = self._edges()
        nodes: list[str | None] = [*self.members, _SINK]
        distance = dict.fromkeys(nodes, 0)
        before: dict[str | None, str | None] = {}
        relaxed: list[str | None] = []
        for _ in nodes:
            relaxed = []
            for (u, v), (cost, _tp) in edges.items():
                if distance[u] + cost < distance[v]:
                    distance[v] = distance[u] + cost
                    before[v] = u
                    relaxed.append(v)
            if not relaxed:
                return None
        node = relaxed[-1]  # still relaxing after |nodes| rounds: a cycle precedes it
        for _ in nodes:
            node = before[node]
        cycle: list[tuple[str, str, TopicPartition]] = []
        v = node
        while True:
            u = before[v]
            tp = edges[u, v][1]
            if tp is not None:
                assert u is not None and v is not None
                cycle.append((u, v, tp))
            v = u
            if v == node:
                return cycle


BUILTIN_STRATEGIES: tuple[AssignmentStrategy, ...] = (
    RangeStrategy(),
    RoundRobinStrategy(),
    StickyStrategy(),
)
