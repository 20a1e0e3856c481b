"""The controller's replica machine (``broker.cluster.replica_state``) and the model's use of it:
replicas follow their brokers, and a topic's deletion -- or a reassignment's dropped replica --
is tracked replica by replica until each broker has deleted its log (Kafka's
ReplicaStateMachine and TopicDeletionManager)."""

from __future__ import annotations

import pytest
import structlog

from broker.cluster.controller_model import ControllerModel
from broker.cluster.replica_state import (
    REPLICA_MACHINE,
    STATE_DESCRIPTIONS,
    ReplicaDeletion,
    ReplicaEvent,
    ReplicaState,
)
from broker.cluster.zk_layout import BrokerRegistration
from protocol.statemachine import IllegalTransition

S = ReplicaState


def registration(broker_id: int, timestamp: str = "1") -> BrokerRegistration:
    return BrokerRegistration(broker_id, "127.0.0.1", 9092 + broker_id, timestamp=timestamp)


def make_model(live: list[int], topics: dict[str, dict[int, tuple[int, ...]]]) -> ControllerModel:
    model = ControllerModel(0, 7)
    model.live = {b: registration(b) for b in live}
    for topic, assignment in topics.items():
        changes = model.elect_new(model.add_topic(topic, assignment, {}))
        model.check(changes)
        for change in changes:
            model.written(change, 0)
    return model


def states(model: ControllerModel) -> dict[tuple[str, int, int], ReplicaState]:
    return dict(model.replica_states.states)


# ---------------------------------------------------------------------------- the table

def test_the_replica_table_walks_and_refuses_everything_else() -> None:
    listed = {(row.source, row.event): row.target for row in REPLICA_MACHINE.rows}
    for state in ReplicaState:
        for event in ReplicaEvent:
            if (state, event) in listed:
                assert REPLICA_MACHINE.next_state(state, event) is listed[(state, event)]
            else:
                with pytest.raises(IllegalTransition, match=f"{state.name} on {event.name}"):
                    REPLICA_MACHINE.next_state(state, event)
    assert REPLICA_MACHINE.initial is S.NON_EXISTENT
    assert all(row.guard and row.effect for row in REPLICA_MACHINE.rows)
    assert set(STATE_DESCRIPTIONS) == set(ReplicaState)


def test_the_replica_table_has_kafkas_predecessors_but_two() -> None:
    """Kafka's ReplicaStateMachine.validPreviousStates. Ours has no Online from Online (a
    broker registers once) nor from ReplicaDeletionIneligible (such a replica is asked again,
    through Offline, as Kafka's TopicDeletionManager does), and takes a deletion's answer that
    comes after its broker was seen to go (Ineligible -> Successful)."""
    predecessors: dict[ReplicaState, set[ReplicaState]] = {s: set() for s in ReplicaState}
    for row in REPLICA_MACHINE.rows:
        predecessors[row.target].add(row.source)
    assert predecessors == {
        S.NEW: {S.NON_EXISTENT},
        S.ONLINE: {S.NEW, S.OFFLINE},
        S.OFFLINE: {S.NEW, S.ONLINE, S.OFFLINE, S.DELETION_INELIGIBLE},
        S.DELETION_STARTED: {S.OFFLINE},
        S.DELETION_SUCCESSFUL: {S.DELETION_STARTED, S.DELETION_INELIGIBLE},
        S.DELETION_INELIGIBLE: {S.OFFLINE, S.DELETION_STARTED},
        S.NON_EXISTENT: {S.DELETION_SUCCESSFUL},
    }


def test_an_illegal_replica_move_names_the_replica_and_moves_none() -> None:
    model = make_model([0, 1], {"t": {0: (0, 1)}})
    before = states(model)
    with pytest.raises(IllegalTransition,
                       match=r"ONLINE on CREATED \(replica of t-0 on broker 1\)"):
        model.replica_states.move([("t", 0, 2), ("t", 0, 1)], ReplicaEvent.CREATED)
    assert states(model) == before


# ------------------------------------------------------------------- following brokers

def test_replicas_are_online_with_their_broker_and_every_move_is_logged() -> None:
    with structlog.testing.capture_logs() as logs:
        model = make_model([0], {"t": {0: (0, 1)}})
        assert states(model) == {("t", 0, 0): S.ONLINE, ("t", 0, 1): S.OFFLINE}
        model.brokers_came({1: registration(1)})
        model.brokers_gone([0])
    assert states(model) == {("t", 0, 0): S.OFFLINE, ("t", 0, 1): S.ONLINE}
    moves = [(e["broker_id"], e["from_state"], e["to_state"], e["trigger"]) for e in logs
             if e["event"] == "controller.replica_state_change"]
    assert moves == [
        (0, "NonExistentReplica", "NewReplica", "created"),
        (1, "NonExistentReplica", "NewReplica", "created"),
        (0, "NewReplica", "OnlineReplica", "broker live"),
        (1, "NewReplica", "OfflineReplica", "broker down"),
        (1, "OfflineReplica", "OnlineReplica", "broker live"),
        (0, "OnlineReplica", "OfflineReplica", "broker down"),
    ]


def test_a_restarted_broker_is_told_apart_by_its_registration() -> None:
    model = make_model([0, 1, 2], {})
    change = model.compare_brokers({0: registration(0), 1: registration(1, "2"),
                                    3: registration(3)})
    assert (change.dead, change.came, change.bounced) == ([2], [1, 3], [1])
    assert not model.compare_brokers({b: registration(b) for b in (0, 1, 2)})


def test_brokers_stop_shutting_down_when_they_go_or_come() -> None:
    model = make_model([0, 1], {"t": {0: (0, 1)}})
    model.elect_for_shutdown(0)
    model.elect_for_shutdown(1)
    assert model.shutting_down == {0, 1}
    model.brokers_gone([0])
    model.brokers_came({1: registration(1, "2")})
    assert model.shutting_down == set()


# ------------------------------------------------------------------------ topic deletion

def test_a_deletion_carried_on_by_a_new_controller_waits_for_every_replica() -> None:
    """The new controller never added the topic: it knows its assignment alone, and does
    not know which replicas the last one saw deleted."""
    model = make_model([0], {})
    assert model.begin_deletion("gone", {0: (0, 1), 1: (1,)}) == [
        ReplicaDeletion(0, "gone", (("gone", 0),))]
    assert states(model) == {("gone", 0, 0): S.DELETION_STARTED,
                             ("gone", 0, 1): S.DELETION_INELIGIBLE,
                             ("gone", 1, 1): S.DELETION_INELIGIBLE}
    assert model.deletion_waits_for("gone") == [1]
    assert model.replicas_deleted(0, [("gone", 0)]) == []


def test_a_broker_that_restarts_before_answering_is_asked_again() -> None:
    model = make_model([0, 1], {"t": {0: (0, 1)}})
    sent = model.begin_deletion("t")
    assert [d.broker_id for d in sent] == [0, 1]
    model.brokers_gone([1])  # restarted: first gone ...
    assert model.replica_states.get(("t", 0, 1)) is S.DELETION_INELIGIBLE
    # ... then registered again: asked again
    assert model.brokers_came({1: registration(1, "2")}) == [
        ReplicaDeletion(1, "t", (("t", 0),))]
    assert model.replica_states.get(("t", 0, 1)) is S.DELETION_STARTED


def test_an_answer_that_comes_after_its_broker_went_still_counts() -> None:
    model = make_model([0, 1], {"t": {0: (0, 1)}})
    model.begin_deletion("t")
    model.brokers_gone([1])
    assert model.replicas_deleted(0, [("t", 0)]) == []
    assert model.replicas_deleted(1, [("t", 0)]) == ["t"]
    assert model.replicas_deleted(1, [("t", 0)]) == []  # answered twice: nothing more
    assert model.topic_deleted("t") == 1


# -------------------------------------------------------------------------- reassignment

def test_a_reassignment_deletes_the_replicas_it_drops_and_forgets_them_once_deleted() -> None:
    model = make_model([0, 1, 2, 3], {"t": {0: (0, 1)}})
    model.brokers_gone([1])
    start = model.start_reassignment(("t", 0), [2, 3])
    assert start is not None
    assert states(model)[("t", 0, 2)] is S.ONLINE
    model.written(start, 1)
    assert model.reassignment_done(("t", 0)) == [ReplicaDeletion(0, "t", (("t", 0),))]
    assert states(model) == {("t", 0, 0): S.DELETION_STARTED, ("t", 0, 1): S.DELETION_INELIGIBLE,
                             ("t", 0, 2): S.ONLINE, ("t", 0, 3): S.ONLINE}
    assert model.replicas_deleted(0, [("t", 0)]) == []
    assert ("t", 0, 0) not in states(model)
    # broker 1 is asked when it returns; moving the partition back onto it waits until it
    # has deleted its old replica
    assert model.brokers_came({1: registration(1, "2")}) == [ReplicaDeletion(1, "t", (("t", 0),))]
    problem = model.reassignment_problem(("t", 0), [1, 2])
    assert problem == ("brokers [1] have not yet deleted the replica of t-0 an earlier "
                       "reassignment took from them")
    model.replicas_deleted(1, [("t", 0)])
    assert model.reassignment_problem(("t", 0), [1, 2]) is None


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ([1, 1], "replicas [1, 1] must be distinct broker ids, at least one"),
        ([], "replicas [] must be distinct broker ids, at least one"),
        ([1, 5], "brokers [5] are not live"),
    ],
)
def test_reassignment_problems_name_what_is_wrong(target: list[int], problem: str) -> None:
    model = make_model([0, 1], {"t": {0: (0,)}})
    assert model.reassignment_problem(("t", 0), target) == problem
    assert model.reassignment_problem(("u", 0), [0]) == "u-0 does not exist"
    model.start_reassignment(("t", 0), [1])
    assert model.reassignment_problem(("t", 0), [0]) == "t-0 is being reassigned already"
