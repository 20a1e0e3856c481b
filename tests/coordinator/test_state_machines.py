"""The state tables themselves: every row walked, every unlisted move refused, the group table
cross-checked against Kafka's, moves logged and counted, and docs/state-machines in sync."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import structlog

from broker.cluster.partition_state import PARTITION_MACHINE
from broker.cluster.replica_state import REPLICA_MACHINE
from broker.security.sasl_state import SASL_MACHINE
from client import group_state as consumer
from coordinator import GroupEvent, GroupState, IllegalTransition, LoaderEvent, LoaderState
from coordinator.group_state import GROUP_MACHINE
from coordinator.loader_state import LOADER_MACHINE
from protocol.errors import ErrorCode
from tests.coordinator.harness import Consumer, FakeDriver

DOCS = Path(__file__).resolve().parents[2] / "docs" / "state-machines"


@pytest.mark.parametrize("table", [GROUP_MACHINE, LOADER_MACHINE], ids=lambda t: t.name)
def test_every_row_is_a_move_and_nothing_else_is(table):
    listed = {(row.source, row.event): row.target for row in table.rows}
    for state in table.states:
        for event in table.events:
            if (state, event) in listed:
                assert table.next_state(state, event) is listed[(state, event)]
            else:
                with pytest.raises(IllegalTransition, match=f"{state.name} on {event.name}"):
                    table.next_state(state, event)
    assert {row.event for row in table.rows} == set(table.events), "an event no row uses"
    assert all(row.guard and row.effect for row in table.rows), "rows document guard and effect"


def test_group_table_matches_kafkas_predecessors():
    """Kafka's GroupMetadata: PreparingRebalance from Stable, CompletingRebalance or Empty;
    CompletingRebalance (our Rebalancing) from PreparingRebalance; Stable from
    CompletingRebalance; Empty from PreparingRebalance; Dead from any. Ours differs in one place,
    the seed's slow-consumer rule: PrepareRebalance -> Steady when the rebalance is cancelled."""
    predecessors: dict[GroupState, set[GroupState]] = {s: set() for s in GroupState}
    for row in GROUP_MACHINE.rows:
        if row.source is not row.target:
            predecessors[row.target].add(row.source)
    s = GroupState
    assert predecessors == {
        s.PREPARE_REBALANCE: {s.STEADY, s.REBALANCING, s.EMPTY},
        s.REBALANCING: {s.PREPARE_REBALANCE},
        s.STEADY: {s.REBALANCING, s.PREPARE_REBALANCE},
        s.EMPTY: {s.PREPARE_REBALANCE},
        s.DEAD: {s.EMPTY, s.PREPARE_REBALANCE, s.REBALANCING, s.STEADY},
    }
    assert not [row for row in GROUP_MACHINE.rows if row.source is s.DEAD]


def test_consumer_table_walk_and_refusals():
    listed = {(row.source, row.event): row.target for row in consumer.CONSUMER_MACHINE.rows}
    for state in consumer.ConsumerState:
        for event in consumer.ConsumerEvent:
            if (state, event) in listed:
                assert consumer.transition(state, event) is listed[(state, event)]
            else:
                with pytest.raises(consumer.IllegalTransition):
                    consumer.transition(state, event)
    # a whole life: start, join, rebalance, coordinator moves, close
    events = [
        consumer.ConsumerEvent.START, consumer.ConsumerEvent.COORDINATOR_FOUND,
        consumer.event_for(ErrorCode.NONE, joining=True),
        consumer.event_for(ErrorCode.REBALANCE_IN_PROGRESS, joining=False),
        consumer.event_for(ErrorCode.NONE, joining=True),
        consumer.event_for(ErrorCode.NOT_COORDINATOR, joining=False),
        consumer.ConsumerEvent.COORDINATOR_FOUND,
        consumer.event_for(ErrorCode.NONE, joining=False),
        consumer.ConsumerEvent.CLOSE,
    ]
    state = consumer.CONSUMER_MACHINE.initial
    visited = [state]
    for event in events:
        assert event is not None
        state = consumer.transition(state, event)
        visited.append(state)
    S = consumer.ConsumerState
    assert visited == [
        S.DOWN, S.DISCOVER_COORDINATOR, S.DISCOVER_COORDINATOR, S.PART_OF_GROUP,
        S.STOPPED_CONSUMPTION, S.PART_OF_GROUP, S.REDISCOVER_COORDINATOR, S.PART_OF_GROUP,
        S.PART_OF_GROUP, S.DOWN,
    ]
    assert consumer.event_for(ErrorCode.OFFSET_METADATA_TOO_LARGE, joining=False) is None
    assert consumer.event_for(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, joining=True) is (
        consumer.ConsumerEvent.JOIN_REJECTED)


def test_loader_misuse_raises():
    driver = FakeDriver(lead=[0])
    with pytest.raises(IllegalTransition, match="READY on BECAME_LEADER"):
        driver.coordinator.become_leader(0, [], driver.now)
    with pytest.raises(IllegalTransition, match="DOWN on RESIGNED"):
        driver.coordinator.resign(1, driver.now)
    with pytest.raises(IllegalTransition):
        driver.coordinator.load_records(1, [])
    driver.apply(driver.coordinator.resign(0, driver.now))
    assert driver.coordinator.partition_state(0) is LoaderState.DOWN
    assert driver.coordinator.counters["loader.Ready->Down"] == 1
    assert LoaderEvent.RESIGNED in LoaderEvent


def test_transitions_are_logged_and_counted():
    driver = FakeDriver(topics={"t": 1})
    with structlog.testing.capture_logs() as logs:
        Consumer(driver, "g", ["t"]).join_now()
    moves = [e for e in logs if e["event"] == "group_transition"]
    assert [(e["from"], e["to"]) for e in moves] == [
        ("Empty", "PrepareRebalance"), ("PrepareRebalance", "Rebalancing"),
        ("Rebalancing", "Steady"),
    ]
    assert all(e["group"] == "g" and e["reason"] for e in moves)
    assert [e["generation"] for e in moves] == [0, 0, 1]
    counters = driver.coordinator.counters
    assert counters["group.Empty->PrepareRebalance"] == 1
    assert counters["group.Rebalancing->Steady"] == 1
    assert counters[f"group.{GroupEvent.GENERATION_WRITTEN.name.lower()}"] == 1


def test_docs_are_generated_from_the_tables():
    spec = importlib.util.spec_from_file_location("generate", DOCS / "generate.py")
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    pages = generate.render()
    assert set(pages) == {"README.md", "loader.md", "group.md", "consumer.md", "partition.md",
                          "replica.md", "sasl.md"}
    for name, text in pages.items():
        assert (DOCS / name).read_text(encoding="utf-8") == text, (
            f"docs/state-machines/{name} is out of date: run "
            "python docs/state-machines/generate.py")
    for row in GROUP_MACHINE.rows:
        assert f"{row.source.name} --> {row.target.name} : {row.event.value}" in pages["group.md"]
    for row in PARTITION_MACHINE.rows:
        assert (f"{row.source.name} --> {row.target.name} : {row.event.value}"
                in pages["partition.md"])
        assert f"| {row.guard} |" in pages["partition.md"]
    assert "(partition.md)" in pages["README.md"]
    for replica_row in REPLICA_MACHINE.rows:
        assert (f"{replica_row.source.name} --> {replica_row.target.name} : "
                f"{replica_row.event.value}" in pages["replica.md"])
        assert f"| {replica_row.guard} |" in pages["replica.md"]
    assert "(replica.md)" in pages["README.md"]
    for row in SASL_MACHINE.rows:
        assert f"{row.source.name} --> {row.target.name} : {row.event.value}" in pages["sasl.md"]
    assert "(sasl.md)" in pages["README.md"]
