"""A model-based test of the coordinator: random joins, leaves, heartbeats, commits, clock
advances, topic changes, disconnects, acknowledged and failed writes, and partition reloads.

After every step: generations never decrease; in Steady every subscribed partition is owned by
exactly one member, subscribed to its topic; no commit with another generation is accepted; and
a reload (with every write acknowledged) gives back the same groups and offsets.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from coordinator import GroupState
from protocol.errors import ErrorCode
from tests.coordinator.harness import Consumer, FakeDriver, answered_write, make_config

GROUPS = {"g1": "range", "g2": "sticky"}
TOPICS = ["a", "b", "c"]
E = ErrorCode


class CoordinatorModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.driver = FakeDriver(
            make_config(group_initial_rebalance_delay_ms=200, offsets_topic_partitions=4,
                        offsets_retention_ms=120_000, offsets_retention_check_interval_ms=20_000),
            {"a": 2, "b": 3},
            auto_ack=False,
        )
        self.consumers: list[Consumer] = []
        self.connections = 0
        self.highest: dict[str, int] = {}
        # commit token -> (generation sent, group's generation then, manual?)
        self.commits: dict[int, tuple[int, int, bool]] = {}

    # ------------------------------------------------------------------------------ helpers

    def _connection(self) -> str:
        self.connections += 1
        return f"conn-{self.connections}"

    def _pick(self, index: int) -> Consumer:
        return self.consumers[index % len(self.consumers)]

    def _settle(self) -> None:
        """Consumers read the answers that have come in."""
        for c in self.consumers:
            if c.pending is not None:
                answer = c.joined()
                if answer is not None and answer["error_code"] == E.UNKNOWN_MEMBER_ID:
                    c.member_id, c.generation, c.partitions = "", -1, set()
        for token, (sent, current, manual) in list(self.commits.items()):
            answer = self.driver.answer(token)
            if answer is None:
                continue
            del self.commits[token]
            codes = {p["error_code"] for t in answer["topics"] for p in t["partitions"]}
            if E.NONE in codes and not manual:
                assert sent == current, f"commit with generation {sent} accepted at {current}"

    def _group_state(self, group_id: str) -> GroupState | None:
        group = self.driver.coordinator.group(group_id)
        return None if group is None else group.state

    # -------------------------------------------------------------------------------- rules

    @rule(group=st.sampled_from(sorted(GROUPS)),
          topics=st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True),
          session=st.sampled_from([6_000, 10_000, 25_000]))
    def new_consumer(self, group: str, topics: list[str], session: int) -> None:
        c = Consumer(self.driver, group, topics, strategy=GROUPS[group],
                     session_timeout_ms=session, connection=self._connection())
        self.consumers.append(c)
        c.join()

    @precondition(lambda self: self.consumers)
    @rule(index=st.integers(0, 50), change=st.booleans())
    def rejoin(self, index: int, change: bool) -> None:
        c = self._pick(index)
        if c.pending is None:
            if change:
                c.topics = sorted(set(c.topics) ^ {"c"}) or ["a"]
            c.join()

    def _heartbeat(self, c: Consumer) -> None:
        """Heartbeat, and react as the consumer does: rejoin when told to."""
        if c.pending is not None or not c.member_id:
            return
        code = c.heartbeat()
        if code is E.NONE:
            group = self.driver.group(c.group_id)
            assert group.state is GroupState.STEADY and group.generation == c.generation
            return
        if code is E.UNKNOWN_MEMBER_ID:
            c.member_id, c.generation, c.partitions = "", -1, set()
        c.join()

    @precondition(lambda self: self.consumers)
    @rule(index=st.integers(0, 50))
    def heartbeat(self, index: int) -> None:
        self._heartbeat(self._pick(index))

    @precondition(lambda self: self.consumers)
    @rule(ms=st.sampled_from([200, 2_000]))
    def everyone_heartbeats_then_time_passes(self, ms: int) -> None:
        for c in list(self.consumers):
            self._heartbeat(c)
        self.driver.ack()
        self.driver.advance(ms)

    @precondition(lambda self: self.consumers)
    @rule(index=st.integers(0, 50))
    def leave(self, index: int) -> None:
        c = self._pick(index)
        if c.pending is None and c.member_id:
            c.leave()
            self.consumers.remove(c)

    @precondition(lambda self: self.consumers)
    @rule(index=st.integers(0, 50), skew=st.sampled_from([0, 0, -1, 1]), manual=st.booleans())
    def commit(self, index: int, skew: int, manual: bool) -> None:
        c = self._pick(index)
        if c.pending is not None:
            return
        group = self.driver.coordinator.group(c.group_id)
        current = -1 if group is None else group.generation
        generation, member_id = (-1, "") if manual else (c.generation + skew, c.member_id)
        token = self.driver.commit(c.group_id, generation, member_id, {("a", 0): self.connections})
        # generation < 0 without a member id is manual assignment, whatever the consumer meant
        self.commits[token] = (generation, current, generation < 0 and not member_id)

    @rule(ms=st.sampled_from([50, 200, 3_000, 11_000, 31_000]))
    def advance(self, ms: int) -> None:
        self.driver.advance(ms)

    @rule(count=st.integers(1, 3))
    def ack(self, count: int) -> None:
        self.driver.ack(count=count)

    @precondition(lambda self: any(map(answered_write, self.driver.in_flight)))
    @rule()
    def fail_one_write(self) -> None:
        """A commit's or a generation's write fails. (Other writes -- an empty group's record,
        tombstones -- are not retried: their failure leaves the log behind until the group's
        next write, which the reload check would rightly see.)"""
        append = next(filter(answered_write, self.driver.in_flight))
        self.driver.finish(append, E.NOT_LEADER_FOR_PARTITION)

    @rule(topic=st.sampled_from(TOPICS), more=st.integers(1, 2))
    def add_partitions(self, topic: str, more: int) -> None:
        count = self.driver.topics.get(topic, 0) + more
        self.driver.topics[topic] = count
        self.driver.apply(self.driver.coordinator.on_topic_partitions_changed(
            topic, count, self.driver.now))

    @precondition(lambda self: self.consumers)
    @rule(index=st.integers(0, 50))
    def disconnect(self, index: int) -> None:
        c = self._pick(index)
        self.driver.apply(self.driver.coordinator.on_disconnect(c.connection, self.driver.now))
        c.connection, c.pending = self._connection(), None

    @rule(group=st.sampled_from(sorted(GROUPS)))
    def reload_after_writes(self, group: str) -> None:
        """With every write acknowledged, a reload gives back exactly the same groups."""
        self.driver.ack()
        self._settle()
        partition = self.driver.partition_of(group)
        before = {g.group_id: _snapshot(g) for g in self.driver.coordinator.groups()
                  if g.partition == partition}
        self.driver.reload(partition)
        for group_id, old in before.items():
            loaded = self.driver.coordinator.group(group_id)
            if loaded is None:  # nothing of it was ever written
                assert old["generation"] == 0 and not old["offsets"], old
                continue
            new = _snapshot(loaded)
            assert new["generation"] == old["generation"]
            assert new["offsets"] == old["offsets"]
            if old["state"] in (GroupState.STEADY, GroupState.EMPTY):
                assert new == old

    @rule(group=st.sampled_from(sorted(GROUPS)), written=st.booleans())
    def crash_reload(self, group: str, written: bool) -> None:
        """Fail over with writes in flight, which may or may not have reached the log."""
        self.driver.reload(self.driver.partition_of(group), in_flight_written=written)

    # ---------------------------------------------------------------------------- invariants

    @invariant()
    def answers_are_read(self) -> None:
        self._settle()

    @invariant()
    def generations_never_decrease(self) -> None:
        for group_id in GROUPS:
            group = self.driver.coordinator.group(group_id)
            if group is None:
                self.highest.pop(group_id, None)
                continue
            assert group.generation >= self.highest.get(group_id, 0)
            self.highest[group_id] = group.generation

    @invariant()
    def steady_groups_own_each_partition_once(self) -> None:
        for group_id in GROUPS:
            group = self.driver.coordinator.group(group_id)
            if group is None or group.state is not GroupState.STEADY:
                continue
            owners: dict[tuple[str, int], list[str]] = {}
            for member in group.members.values():
                for tp in member.assignment:
                    assert tp.topic in member.subscription, (member.member_id, tp)
                    owners.setdefault(tuple(tp), []).append(member.member_id)
            expected = {
                (t, p) for t in group.subscribed_topics()
                for p in range(self.driver.topics.get(t, 0))
            }
            assert set(owners) == expected
            assert all(len(o) == 1 for o in owners.values()), owners


def _snapshot(group: Any) -> dict[str, Any]:
    return {
        "state": group.state,
        "generation": group.generation,
        "strategy": group.strategy,
        "members": {
            mid: (m.client_id, m.client_host, m.session_timeout_ms, m.rebalance_timeout_ms,
                  m.subscription, m.assignment)
            for mid, m in group.members.items()
        },
        "offsets": dict(group.offsets),
    }


CoordinatorModel.TestCase.settings = settings(stateful_step_count=60)
test_coordinator_model = CoordinatorModel.TestCase
