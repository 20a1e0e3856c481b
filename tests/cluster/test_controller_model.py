"""The controller's decisions without I/O (``broker.cluster.controller_model``): first states of
new partitions, elections after broker deaths and returns, controlled shutdown, preferred
election, imbalance, the partition machine, and the request bodies sent to brokers.

Every test is deterministic: no ZooKeeper, no sockets, no clocks. ``write`` stands in for the
driver's conditional ZooKeeper write: a create gets version 0, a set the expected version + 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from broker.cluster.controller_model import (
    Change,
    ControllerModel,
    ShutdownDecision,
    TopicPartition,
)
from broker.cluster.partition_state import (
    PARTITION_MACHINE,
    STATE_DESCRIPTIONS,
    PartitionEvent,
    PartitionState,
)
from broker.cluster.replica_state import ReplicaDeletion, ReplicaState
from broker.cluster.zk_layout import NO_LEADER, BrokerRegistration, LeaderIsr
from protocol.apis import ApiKey
from protocol.framing import FrameDecoder
from protocol.statemachine import IllegalTransition
from protocol.wire import decode_request, encode_request

CONTROLLER_ID = 0
CONTROLLER_EPOCH = 7


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, "127.0.0.1", 9092 + broker_id,
                              rack=None, directory_id=f"dir-{broker_id}",
                              timestamp="1520798874231")


def make_model(
    live: Iterable[int],
    topics: Mapping[str, Mapping[int, Sequence[int]]] | None = None,
    configs: Mapping[str, Mapping[str, str]] | None = None,
) -> ControllerModel:
    """A controller that knows ``live`` and has created (and written) ``topics``."""
    model = ControllerModel(CONTROLLER_ID, CONTROLLER_EPOCH)
    model.live = {b: registration(b) for b in live}
    for topic, assignment in (topics or {}).items():
        new = model.add_topic(topic, assignment, (configs or {}).get(topic, {}))
        write(model, model.elect_new(new))
    return model


def write(model: ControllerModel, changes: Iterable[Change]) -> list[Change]:
    """Check the changes against the table, then adopt each as the driver does once ZooKeeper
    accepted it."""
    done = list(changes)
    model.check(done)
    for change in done:
        model.written(change, 0 if change.create else change.state.zk_version + 1)
    return done


def set_state(model: ControllerModel, tp: TopicPartition, leader: int, isr: Sequence[int],
              leader_epoch: int = 3) -> None:
    """Put a partition in a given written state (as if earlier elections led there); its
    znode is then at version 5."""
    write(model, [Change(tp, LeaderIsr(leader, leader_epoch, tuple(isr), CONTROLLER_EPOCH, 4))])


def kill(model: ControllerModel, *brokers: int) -> list[Change]:
    model.brokers_gone(brokers)
    return write(model, model.elect_after_broker_change())


def revive(model: ControllerModel, *brokers: int) -> list[Change]:
    model.brokers_came({b: registration(b) for b in brokers})
    return write(model, model.elect_after_broker_change())


def through_the_wire(api_key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    """Send ``body`` as the controller's client would, and decode it as a broker does: msgpack,
    framing and the API's request schema (``decode_request`` raises RequestSchemaError)."""
    frame = encode_request(api_key, 0, 1, f"controller-{CONTROLLER_ID}", body)
    decoder = FrameDecoder()
    decoder.receive_data(frame)
    payload = decoder.next_frame()
    assert payload is not None
    request = decode_request(payload)
    assert request.api.key is api_key
    return request.body


# ----------------------------------------------------------------------- new partitions

def test_new_partition_is_led_by_its_first_live_replica_with_the_live_replicas_in_sync():
    model = make_model(live=[1, 2, 3])
    new = model.add_topic("t", {0: (4, 2, 1), 1: (1, 3, 2)}, {})
    assert new == [("t", 0), ("t", 1)]
    assert all(model.machine[tp] is PartitionState.NEW for tp in new)
    changes = model.elect_new(new)
    assert changes == [
        Change(("t", 0), LeaderIsr(2, 0, (2, 1), CONTROLLER_EPOCH), create=True),
        Change(("t", 1), LeaderIsr(1, 0, (1, 3, 2), CONTROLLER_EPOCH), create=True),
    ]
    write(model, changes)
    assert model.states[("t", 0)].zk_version == 0
    assert model.machine[("t", 0)] is PartitionState.ONLINE


def test_new_partition_with_no_live_replica_has_no_leader_and_every_replica_in_sync():
    """No replica has data yet, so each may lead once it comes: the ISR is all of them."""
    model = make_model(live=[9])
    new = model.add_topic("t", {0: (1, 2, 3)}, {})
    [change] = model.elect_new(new)
    assert change == Change(("t", 0), LeaderIsr(NO_LEADER, 0, (1, 2, 3), CONTROLLER_EPOCH),
                            create=True)
    write(model, [change])
    assert model.machine[("t", 0)] is PartitionState.OFFLINE
    # the first replica to come leads it
    [led] = revive(model, 2)
    assert (led.state.leader, led.state.isr, led.state.leader_epoch) == (2, (2,), 1)
    assert model.machine[("t", 0)] is PartitionState.ONLINE


def test_new_partition_skips_a_replica_that_is_shutting_down():
    model = make_model(live=[1, 2])
    model.shutting_down.add(1)
    [change] = model.elect_new(model.add_topic("t", {0: (1, 2)}, {}))
    assert (change.state.leader, change.state.isr) == (2, (2,))


def test_a_grown_topic_creates_only_its_new_partitions():
    model = make_model(live=[1, 2], topics={"t": {0: (1, 2)}})
    before = model.states[("t", 0)]
    new = model.add_topic("t", {0: (1, 2), 1: (2, 1)}, {"retention_ms": "1000"})
    assert new == [("t", 1)]
    assert model.states[("t", 0)] is before
    assert model.configs["t"] == {"retention_ms": "1000"}
    assert model.partitions() == [("t", 0), ("t", 1)]


# ------------------------------------------------------------------------- broker death

def test_a_dead_leader_is_replaced_by_the_first_live_in_sync_replica_in_assignment_order():
    """Assignment order, not ISR order, picks the new leader: replicas (2, 0, 1), ISR [1, 0, 2]:
    when 2 dies, 0 leads (it comes before 1 in the assignment)."""
    model = make_model(live=[0, 1, 2], topics={"t": {0: (2, 0, 1)}})
    set_state(model, ("t", 0), leader=2, isr=[1, 0, 2], leader_epoch=5)
    [change] = kill(model, 2)
    assert change.state == LeaderIsr(0, 6, (1, 0), CONTROLLER_EPOCH, 5)
    assert change.state.zk_version == 5  # the conditional write expects the version we read
    assert model.states[("t", 0)].zk_version == 6
    assert model.machine[("t", 0)] is PartitionState.ONLINE


def test_an_out_of_sync_follower_is_not_elected():
    """Seed 003: "followers which are out of sync will NOT be eligible to become leader if the
    leader broker goes down"."""
    model = make_model(live=[0, 1, 2], topics={"t": {0: (0, 1, 2)}})
    set_state(model, ("t", 0), leader=0, isr=[0, 2])  # 1 fell behind
    [change] = kill(model, 0)
    assert (change.state.leader, change.state.isr) == (2, (2,))


def test_a_dead_follower_leaves_every_isr_and_each_change_bumps_the_leader_epoch():
    model = make_model(live=[0, 1, 2], topics={"t": {0: (0, 1, 2), 1: (1, 2, 0), 2: (1, 2)}})
    epochs = {tp: s.leader_epoch for tp, s in model.states.items()}
    changes = kill(model, 2)
    assert [c.tp for c in changes] == [("t", 0), ("t", 1), ("t", 2)]
    assert {tp: (s.leader, s.isr) for tp, s in model.states.items()} == {
        ("t", 0): (0, (0, 1)),
        ("t", 1): (1, (1, 0)),
        ("t", 2): (1, (1,)),
    }
    assert all(c.state.leader_epoch == epochs[c.tp] + 1 for c in changes)
    assert all(c.state.controller_epoch == CONTROLLER_EPOCH for c in changes)


def test_the_last_isr_member_is_kept_leaderless_and_leads_again_when_it_comes_back():
    """An ISR is never emptied: with no live in-sync replica the partition has no leader
    (no unclean election; seed 003: out-of-sync followers are "NOT eligible to become
    leader"), and its last in-sync member leads when it returns."""
    model = make_model(live=[0, 1], topics={"t": {0: (0, 1)}})
    set_state(model, ("t", 0), leader=0, isr=[0], leader_epoch=2)
    [lost] = kill(model, 0)
    assert lost.state == LeaderIsr(NO_LEADER, 3, (0,), CONTROLLER_EPOCH, 5)
    assert model.machine[("t", 0)] is PartitionState.OFFLINE
    assert 1 in model.live  # live but out of sync: still not the leader
    # other brokers coming and going change nothing more
    assert revive(model, 5) == []
    assert kill(model, 1) == []
    [back] = revive(model, 0)
    assert back.state == LeaderIsr(0, 4, (0,), CONTROLLER_EPOCH, 6)
    assert model.machine[("t", 0)] is PartitionState.ONLINE


def test_brokers_that_hold_nothing_change_nothing():
    model = make_model(live=[0, 1, 7], topics={"t": {0: (0, 1)}})
    assert kill(model, 7) == []
    assert revive(model, 7) == []
    assert model.states[("t", 0)].leader_epoch == 0


def test_a_returning_replica_does_not_rejoin_the_isr_by_itself():
    """Only the leader adds a follower back to the ISR once it has caught up."""
    model = make_model(live=[0, 1], topics={"t": {0: (0, 1)}})
    kill(model, 1)
    assert revive(model, 1) == []
    assert model.states[("t", 0)].isr == (0,)


# -------------------------------------------------------------------- controlled shutdown

def test_controlled_shutdown_moves_leadership_to_a_live_isr_member_not_itself_stopping():
    model = make_model(live=[0, 1, 2], topics={"t": {0: (0, 1, 2), 1: (1, 0, 2)}})
    model.shutting_down.add(1)  # 1 is stopping too: it is passed over
    decision = model.elect_for_shutdown(0)
    changes = decision.changes
    assert decision.remaining == decision.unmovable == []
    assert [(c.tp, c.state.leader, c.state.isr, c.state.leader_epoch) for c in changes] == [
        (("t", 0), 2, (1, 2), 1),  # 0 led it: 2 takes over
        (("t", 1), 1, (1, 2), 1),  # 0 followed: it only leaves the ISR
    ]
    write(model, changes)
    assert all(0 not in s.isr and s.leader != 0 for s in model.states.values())
    assert model.shutting_down == {0, 1}


def test_controlled_shutdown_returns_the_partitions_nobody_else_can_lead_yet():
    """1 is live but out of sync: it may catch up before the broker asks again."""
    model = make_model(live=[0, 1, 2], topics={"t": {0: (0, 1), 1: (0, 2)}})
    set_state(model, ("t", 0), leader=0, isr=[0])  # 1 is out of sync
    before = model.states[("t", 0)]
    decision = model.elect_for_shutdown(0)
    assert decision.remaining == [("t", 0)]
    assert decision.unmovable == []
    assert [c.tp for c in decision.changes] == [("t", 1)]
    write(model, decision.changes)
    assert model.states[("t", 0)] is before  # still led by the stopping broker
    # when it really stops, the partition is leaderless with it as the last ISR member
    [lost] = kill(model, 0)
    assert (lost.tp, lost.state.leader, lost.state.isr) == (("t", 0), NO_LEADER, (0,))


def test_controlled_shutdown_when_every_other_replica_is_stopping_or_down_moves_nothing():
    """A whole-cluster stop: the last broker to ask finds every other replica stopping (or
    gone); no later attempt can move its partitions, so they are not "remaining" -- the
    broker does not wait and ask again for them. A partition with one replica is the same."""
    model = make_model(live=[0, 1, 2], topics={"t": {0: (0, 1, 2), 1: (0, 1)}, "solo": {0: (0,)}})
    model.shutting_down.update({1, 2})
    decision = model.elect_for_shutdown(0)
    assert decision.remaining == []
    assert decision.unmovable == [("solo", 0), ("t", 0), ("t", 1)]
    assert decision.changes == []
    # broker 1 gone rather than stopping: the same
    model = make_model(live=[0, 1], topics={"t": {0: (0, 1)}})
    del model.live[1]
    write(model, model.elect_after_broker_change())
    assert model.elect_for_shutdown(0) == ShutdownDecision([], [], [("t", 0)])


def test_controlled_shutdown_of_a_broker_that_holds_nothing():
    model = make_model(live=[0, 1, 5], topics={"t": {0: (0, 1)}})
    assert model.elect_for_shutdown(5) == ShutdownDecision([], [], [])


def test_controlled_shutdown_never_empties_the_isr_of_a_leaderless_partition():
    """A partition created while its only replica was already stopping has that replica as
    its whole ISR and no leader; a retried ControlledShutdown must leave the ISR alone."""
    model = make_model(live=[0, 1])
    model.shutting_down.add(1)
    write(model, model.elect_new(model.add_topic("t", {0: (1,)}, {})))
    assert model.states[("t", 0)] == LeaderIsr(NO_LEADER, 0, (1,), CONTROLLER_EPOCH, 0)
    assert model.elect_for_shutdown(1) == ShutdownDecision([], [], [])
    assert model.states[("t", 0)].isr == (1,)


# -------------------------------------------------------------------- preferred election

def test_preferred_election_moves_leadership_back_to_the_first_replica():
    model = make_model(live=[0, 1, 2], topics={"t": {0: (0, 1, 2)}})
    kill(model, 0)
    revive(model, 0)
    set_state(model, ("t", 0), leader=1, isr=[1, 2, 0], leader_epoch=3)  # 0 caught up
    [change] = model.elect_preferred()
    assert change.state == LeaderIsr(0, 4, (1, 2, 0), CONTROLLER_EPOCH, 5)


@pytest.mark.parametrize(
    ("live", "isr", "stopping"),
    [
        pytest.param([1, 2], [1, 2], set(), id="first replica dead"),
        pytest.param([0, 1, 2], [1, 2], set(), id="first replica out of sync"),
        pytest.param([0, 1, 2], [1, 2, 0], {0}, id="first replica shutting down"),
        pytest.param([0, 1, 2], [0, 1, 2], set(), id="already leads"),
    ],
)
def test_preferred_election_only_when_the_first_replica_is_live_and_in_sync(
        live: list[int], isr: list[int], stopping: set[int]):
    model = make_model(live=[0, 1, 2], topics={"t": {0: (0, 1, 2)}})
    leader = 0 if 0 in isr and not stopping and 0 in live else 1
    set_state(model, ("t", 0), leader=leader, isr=isr)
    for b in set(model.live) - set(live):
        model.live.pop(b)
    model.shutting_down |= stopping
    assert model.elect_preferred() == []


def test_preferred_election_of_chosen_partitions_ignores_unknown_ones():
    model = make_model(live=[0, 1], topics={"t": {0: (0, 1), 1: (0, 1)}})
    for p in (0, 1):
        set_state(model, ("t", p), leader=1, isr=[1, 0])
    changes = model.elect_preferred([("t", 1), ("nope", 0), ("t", 9)])
    assert [(c.tp, c.state.leader) for c in changes] == [(("t", 1), 0)]


def test_imbalance_is_the_share_of_preferred_partitions_a_broker_does_not_lead():
    """Kafka's leader imbalance ratio, per broker: not-led / should-lead (first replica)."""
    model = make_model(live=[0, 1, 2], topics={
        "a": {0: (0, 1), 1: (0, 2), 2: (0, 1), 3: (0, 2)},
        "b": {0: (1, 0), 1: (2, 0)},
    })
    assert model.imbalance() == {0: 0.0, 1: 0.0, 2: 0.0}
    kill(model, 0)
    assert model.imbalance() == {0: 1.0, 1: 0.0, 2: 0.0}
    revive(model, 0)
    assert model.imbalance() == {0: 1.0, 1: 0.0, 2: 0.0}  # back, but in no ISR yet
    set_state(model, ("a", 0), leader=0, isr=[1, 0])
    assert model.imbalance() == {0: 0.75, 1: 0.0, 2: 0.0}
    set_state(model, ("a", 1), leader=2, isr=[2, 0])  # 0 caught up: a preferred election
    write(model, model.elect_preferred())
    assert model.imbalance() == {0: 0.5, 1: 0.0, 2: 0.0}


# ------------------------------------------------------------------- the partition machine

def test_the_partition_table_walks_and_refuses_everything_else():
    listed = {(row.source, row.event): row.target for row in PARTITION_MACHINE.rows}
    for state in PartitionState:
        for event in PartitionEvent:
            if (state, event) in listed:
                assert PARTITION_MACHINE.next_state(state, event) is listed[(state, event)]
            else:
                with pytest.raises(IllegalTransition, match=f"{state.name} on {event.name}"):
                    PARTITION_MACHINE.next_state(state, event)
    assert PARTITION_MACHINE.initial is PartitionState.NON_EXISTENT
    assert all(row.guard and row.effect for row in PARTITION_MACHINE.rows)
    assert set(STATE_DESCRIPTIONS) == set(PartitionState)


def test_the_partition_table_has_kafkas_predecessors():
    """Kafka's PartitionStateMachine: New from NonExistent; Online from New, Online, Offline;
    Offline from New, Online, Offline. Ours deletes from New, Online or Offline (Kafka goes
    through Offline first, a step with no decision in it)."""
    predecessors: dict[PartitionState, set[PartitionState]] = {s: set() for s in PartitionState}
    for row in PARTITION_MACHINE.rows:
        predecessors[row.target].add(row.source)
    s = PartitionState
    assert predecessors == {
        s.NEW: {s.NON_EXISTENT},
        s.ONLINE: {s.NEW, s.ONLINE, s.OFFLINE},
        s.OFFLINE: {s.NEW, s.ONLINE, s.OFFLINE},
        s.NON_EXISTENT: {s.NEW, s.ONLINE, s.OFFLINE},
    }


def test_a_written_change_moves_the_partition_machine_and_logs_a_state_change():
    model = make_model(live=[0, 1])
    new = model.add_topic("t", {0: (0, 1)}, {})
    with structlog.testing.capture_logs() as logs:
        write(model, model.elect_new(new))
        kill(model, 0, 1)
        revive(model, 1)  # not the ISR's kept member: the last leader is
        revive(model, 0)
    assert model.machine[("t", 0)] is PartitionState.ONLINE
    moves = [(e["from_state"], e["to_state"], e["trigger"], e["leader"]) for e in logs
             if e["event"] == "controller.state_change"]
    assert moves == [
        ("New", "Online", "leader elected", 0),
        ("Online", "Offline", "leader lost", NO_LEADER),
        ("Offline", "Online", "leader elected", 0),
    ]
    assert all(e["topic"] == "t" and e["partition"] == 0 and
               e["controller_epoch"] == CONTROLLER_EPOCH
               for e in logs if e["event"] == "controller.state_change")


def test_a_second_created_is_an_illegal_transition():
    """A driver that adopts a partition's state before creating its topic is refused by the
    table (h11's rule: a move not listed is a bug, raised); so is a second Created."""
    model = make_model(live=[0])
    with pytest.raises(IllegalTransition,
                       match=r"NON_EXISTENT on LEADER_ELECTED \(partition t-0\)"):
        model.adopt_state(("t", 0), LeaderIsr(0, 3, (0,), CONTROLLER_EPOCH - 1, 9))
    assert ("t", 0) not in model.machine and ("t", 0) not in model.states
    model.add_topic("t", {0: (0,)}, {})
    model.adopt_state(("t", 0), LeaderIsr(0, 3, (0,), CONTROLLER_EPOCH - 1, 9))
    assert model.machine[("t", 0)] is PartitionState.ONLINE
    with pytest.raises(IllegalTransition, match="NEW on CREATED"):
        PARTITION_MACHINE.next_state(PartitionState.NEW, PartitionEvent.CREATED)


def test_a_change_to_a_partition_that_was_never_created_is_refused_before_the_write():
    """The table is checked when a change is checked, before any write; writing it anyway is
    refused too, and changes nothing."""
    model = make_model(live=[0])
    ghost = Change(("ghost", 0), LeaderIsr(0, 0, (0,), CONTROLLER_EPOCH))
    assert ghost.event is PartitionEvent.LEADER_ELECTED
    with pytest.raises(IllegalTransition, match="NON_EXISTENT on LEADER_ELECTED"):
        model.check([ghost])
    with pytest.raises(IllegalTransition, match="NON_EXISTENT on LEADER_ELECTED"):
        model.written(ghost, 0)
    assert model.states == {} and model.machine == {}


def test_every_change_the_model_decides_is_checked_against_the_table_first():
    """A decision over a partition the table would not let move is refused at once, not after
    its write: here a state known for a partition the machine forgot (a bug in the driver)."""
    model = make_model(live=[0, 1], topics={"t": {0: (0, 1)}})
    del model.machine[("t", 0)]
    with pytest.raises(IllegalTransition,
                       match=r"NON_EXISTENT on LEADER_ELECTED \(partition t-0\)"):
        kill(model, 1)


def test_adopted_states_are_online_only_with_a_live_leader():
    model = make_model(live=[0, 1], topics={"t": {0: (0, 1), 1: (2, 1)}})
    model.adopt_state(("t", 0), LeaderIsr(1, 4, (1, 0), CONTROLLER_EPOCH - 1, 11))
    model.adopt_state(("t", 1), LeaderIsr(2, 4, (2,), CONTROLLER_EPOCH - 1, 11))
    assert model.machine[("t", 0)] is PartitionState.ONLINE
    assert model.machine[("t", 1)] is PartitionState.OFFLINE


def test_a_deleted_topic_leaves_at_once_and_its_replicas_once_each_is_deleted():
    model = make_model(live=[0, 1], topics={"t": {0: (0, 1), 1: (1, 0)}, "u": {0: (0,)}})
    kill(model, 0)  # ("u", 0) is Offline, the others Online: all three rows are used
    # broker 0 is down: its replicas are ineligible for deletion until it returns
    assert model.begin_deletion("t") == [ReplicaDeletion(1, "t", (("t", 0), ("t", 1)))]
    assert model.begin_deletion("u") == []
    assert model.deletion_waits_for("t") == model.deletion_waits_for("u") == [0]
    assert model.states == {} and model.machine == {} and model.assignments == {}
    assert model.configs == {}
    assert model.deleting == {"t", "u"}
    assert model.begin_deletion("t") == []  # nothing of it left to begin with
    assert model.replicas_deleted(1, [("t", 0), ("t", 1)]) == []  # 0 still holds its own
    assert model.brokers_came({0: registration(0)}) == [
        ReplicaDeletion(0, "t", (("t", 0), ("t", 1))), ReplicaDeletion(0, "u", (("u", 0),))]
    assert model.replicas_deleted(0, [("u", 0)]) == ["u"]
    assert model.replicas_deleted(0, [("t", 0), ("t", 1), ("t", 1)]) == ["t"]
    assert (model.topic_deleted("t"), model.topic_deleted("u")) == (2, 1)
    assert model.replica_states.states == {} and model.deleting == set()
    # created again from scratch: NonExistent -> New once more
    assert model.add_topic("t", {0: (1,)}, {}) == [("t", 0)]


# ------------------------------------------------------------- requests sent to brokers

def test_leader_and_isr_goes_to_each_live_replica_and_fits_the_schema():
    """Seed 003: the controller "will select a new broker and send that information the new
    leaders of the partitions and also its followers"."""
    model = make_model(live=[0, 1, 2], topics={"t": {0: (0, 1, 2), 1: (1, 2)}})
    kill(model, 2)
    bodies = model.leader_and_isr([("t", 0), ("t", 1), ("missing", 0)], new=True)
    assert sorted(bodies) == [0, 1]  # 2 is dead: nothing is queued for it
    for broker_id, body in bodies.items():
        decoded = through_the_wire(ApiKey.LEADER_AND_ISR, body)
        assert decoded["controller_id"] == CONTROLLER_ID
        assert decoded["controller_epoch"] == CONTROLLER_EPOCH
        assert all(p["is_new"] is True for p in decoded["partitions"])
        assert [n["node_id"] for n in decoded["live_leaders"]] == [0, 1]
        assert all(broker_id in p["replicas"] for p in decoded["partitions"])
    assert [(p["topic"], p["partition"]) for p in bodies[0]["partitions"]] == [("t", 0)]
    [entry] = [p for p in bodies[1]["partitions"] if p["partition"] == 0]
    state = model.states[("t", 0)]
    assert entry == {
        "topic": "t", "partition": 0, "controller_epoch": CONTROLLER_EPOCH,
        "leader": 0, "leader_epoch": state.leader_epoch, "isr": [0, 1],
        "zk_version": state.zk_version, "replicas": [0, 1, 2], "is_new": True,
    }


def test_leader_and_isr_of_a_leaderless_partition_fits_the_schema():
    model = make_model(live=[0, 1], topics={"t": {0: (0, 1)}})
    kill(model, 0)
    kill(model, 1)
    assert model.states[("t", 0)].isr == (1,)
    assert revive(model, 0) == []  # out of sync: it hears of the partition, does not lead it
    [(broker_id, body)] = model.leader_and_isr([("t", 0)]).items()
    assert broker_id == 0
    decoded = through_the_wire(ApiKey.LEADER_AND_ISR, body)
    assert decoded["live_leaders"] == []
    assert decoded["partitions"][0]["leader"] == NO_LEADER


def test_update_metadata_carries_the_whole_view_and_fits_the_schema():
    model = make_model(live=[0, 1, 2], topics={"b": {0: (2, 0)}, "a": {1: (1, 2), 0: (0, 1)}},
                       configs={"a": {"cleanup_policy": "compact"}})
    model.live[2] = BrokerRegistration(2, "10.0.0.2", 9094, rack="r2", timestamp="1")
    body = through_the_wire(ApiKey.UPDATE_METADATA, model.update_metadata())
    assert (body["controller_id"], body["controller_epoch"]) == (CONTROLLER_ID, CONTROLLER_EPOCH)
    assert [(p["topic"], p["partition"], p["leader"]) for p in body["partitions"]] == [
        ("a", 0, 0), ("a", 1, 1), ("b", 0, 2)]
    assert body["live_brokers"] == [
        {"node_id": n, "host": h, "port": p, "rack": r,
         "endpoints": [{"listener": "PLAINTEXT", "host": h, "port": p}]}
        for n, h, p, r in [(0, "127.0.0.1", 9092, None), (1, "127.0.0.1", 9093, None),
                           (2, "10.0.0.2", 9094, "r2")]
    ]
    assert body["topics"] == [{"name": "a", "configs": {"cleanup_policy": "compact"}},
                              {"name": "b", "configs": {}}]


def test_update_metadata_of_an_empty_cluster_fits_the_schema():
    model = make_model(live=[])
    body = through_the_wire(ApiKey.UPDATE_METADATA, model.update_metadata())
    assert body["partitions"] == body["live_brokers"] == body["topics"] == []


@pytest.mark.parametrize("delete", [True, False])
def test_stop_replica_goes_to_live_replicas_and_fits_the_schema(delete: bool):
    model = make_model(live=[0, 1, 2], topics={"t": {0: (0, 1), 1: (1, 2)}})
    kill(model, 2)
    bodies = model.stop_replica([("t", 0), ("t", 1), ("gone", 0)], delete=delete)
    assert sorted(bodies) == [0, 1]
    for body in bodies.values():
        decoded = through_the_wire(ApiKey.STOP_REPLICA, body)
        assert decoded["delete_partitions"] is delete
        assert decoded["controller_epoch"] == CONTROLLER_EPOCH
    assert bodies[0]["partitions"] == [{"topic": "t", "partition": 0}]
    assert bodies[1]["partitions"] == [{"topic": "t", "partition": 0},
                                       {"topic": "t", "partition": 1}]


def test_requests_carry_the_controllers_id_and_epoch():
    """Seed 003: "The broker which joins the cluster first becomes the controller"; brokers
    fence a replaced one by the epoch every request carries (DESIGN "Cluster")."""
    model = make_model(live=[0, 1], topics={"t": {0: (0, 1)}})
    model.broker_id, model.epoch = 1, CONTROLLER_EPOCH + 1  # the next controller
    kill(model, 0)
    fields = [model.update_metadata(),
              *model.leader_and_isr([("t", 0)]).values(),
              *model.stop_replica([("t", 0)], delete=False).values()]
    assert [(f["controller_id"], f["controller_epoch"]) for f in fields] == [
        (1, CONTROLLER_EPOCH + 1)] * 3
    # the partition's own controller_epoch is that of the controller that wrote its state
    assert model.states[("t", 0)].controller_epoch == CONTROLLER_EPOCH + 1


# ---------------------------------------------------------------- the model as a whole


@st.composite
def clusters(draw: st.DrawFn) -> tuple[int, dict[str, dict[int, tuple[int, ...]]], set[int]]:
    brokers = draw(st.integers(1, 5))
    ids = list(range(brokers))
    replica_lists = st.lists(st.sampled_from(ids), min_size=1, max_size=brokers, unique=True)
    topics = draw(st.dictionaries(
        st.sampled_from(["a", "b", "c"]),
        st.lists(replica_lists, min_size=1, max_size=4).map(
            lambda rs: {p: tuple(r) for p, r in enumerate(rs)}),
        min_size=1, max_size=3))
    live = draw(st.sets(st.sampled_from(ids)))
    return brokers, topics, live


class ControllerMachine(RuleBasedStateMachine):
    """Random broker deaths, returns, controlled shutdowns, preferred elections, new topics and
    deletions (their StopReplica answers coming in any order, late ones included) over a random
    assignment; the invariants are checked after every step and every write."""

    def __init__(self) -> None:
        super().__init__()
        self.model = ControllerModel(CONTROLLER_ID, CONTROLLER_EPOCH)
        self.brokers = 0
        self.topics_made = 0
        self.epochs: dict[TopicPartition, int] = {}  # the highest leader epoch seen
        self.sent: list[ReplicaDeletion] = []  # StopReplica (delete) not answered yet

    # every write goes through here: each change is checked against what it replaces
    def write(self, changes: list[Change]) -> None:
        for change in changes:
            before = self.model.states.get(change.tp)
            if change.create:
                assert before is None
                assert change.state.leader_epoch == 0
            else:
                assert before is not None
                assert change.state.leader_epoch == before.leader_epoch + 1, "bump by one"
                assert change.state.zk_version == before.zk_version, "conditional on our read"
                assert (change.state.leader, change.state.isr) != (before.leader, before.isr), (
                    "a write that changes nothing")
            assert change.state.controller_epoch == CONTROLLER_EPOCH
            write(self.model, [change])
        assert len({c.tp for c in changes}) == len(changes), "one change per partition"

    @initialize(cluster=clusters())
    def start(self, cluster: tuple[int, dict[str, dict[int, tuple[int, ...]]], set[int]]
              ) -> None:
        self.brokers, topics, live = cluster
        self.model.live = {b: registration(b) for b in live}
        for topic, assignment in sorted(topics.items()):
            self.write(self.model.elect_new(self.model.add_topic(topic, assignment, {})))

    def dead(self) -> list[int]:
        return [b for b in range(self.brokers) if b not in self.model.live]

    @precondition(lambda self: self.model.live)
    @rule(data=st.data())
    def broker_dies(self, data: st.DataObject) -> None:
        broker = data.draw(st.sampled_from(sorted(self.model.live)))
        self.model.brokers_gone([broker])
        self.sent = [d for d in self.sent if d.broker_id != broker or data.draw(st.booleans())]
        self.write(self.model.elect_after_broker_change())
        assert all(broker not in s.isr or s.isr == (broker,) for s in self.model.states.values())

    @precondition(lambda self: self.dead())
    @rule(data=st.data())
    def broker_returns(self, data: st.DataObject) -> None:
        broker = data.draw(st.sampled_from(self.dead()))
        self.sent += self.model.brokers_came({broker: registration(broker)})
        self.write(self.model.elect_after_broker_change())

    @precondition(lambda self: self.model.live)
    @rule(data=st.data())
    def controlled_shutdown(self, data: st.DataObject) -> None:
        broker = data.draw(st.sampled_from(sorted(self.model.live)))
        decision = self.model.elect_for_shutdown(broker)
        remaining, unmovable = set(decision.remaining), set(decision.unmovable)
        assert not {c.tp for c in decision.changes} & (remaining | unmovable)
        assert not remaining & unmovable
        self.write(decision.changes)
        for tp, state in self.model.states.items():
            others = [r for r in self.model.replicas(tp) if r != broker]
            if tp in remaining | unmovable:
                assert state.leader == broker
                assert not [r for r in state.isr if r != broker and self.model._eligible(r)]
                # unmovable: no other replica could ever take it; remaining: one may yet
                assert any(self.model._eligible(r) for r in others) == (tp in remaining)
            elif state.leader != NO_LEADER:
                assert broker != state.leader and broker not in state.isr

    @rule(data=st.data())
    def preferred_election(self, data: st.DataObject) -> None:
        tps = data.draw(st.none() | st.lists(st.sampled_from(
            [*sorted(self.model.states), ("nope", 0)]), unique=True))
        changes = self.model.elect_preferred(tps)
        for change in changes:
            assert change.state.leader == self.model.replicas(change.tp)[0]
        self.write(changes)

    @precondition(lambda self: self.brokers > 0)
    @rule(data=st.data())
    def topic_created(self, data: st.DataObject) -> None:
        ids = list(range(self.brokers))
        replicas = data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=len(ids),
                                      unique=True))
        self.topics_made += 1
        new = self.model.add_topic(f"new-{self.topics_made}", {0: tuple(replicas)}, {})
        assert self.model.machine[new[0]] is PartitionState.NEW
        self.write(self.model.elect_new(new))

    @precondition(lambda self: self.model.assignments)
    @rule(data=st.data())
    def topic_deleted(self, data: st.DataObject) -> None:
        topic = data.draw(st.sampled_from(sorted(self.model.assignments)))
        self.sent += self.model.begin_deletion(topic)
        assert topic not in self.model.assignments and topic in self.model.deleting

    @precondition(lambda self: self.sent)
    @rule(data=st.data())
    def deletion_answered(self, data: st.DataObject) -> None:
        # an answer may come twice (asked again after a restart) or late (its broker went,
        # or the topic is gone already): it counts once, or not at all
        answer = self.sent.pop(data.draw(st.integers(0, len(self.sent) - 1)))
        for topic in self.model.replicas_deleted(answer.broker_id, answer.partitions):
            assert topic == answer.topic
            self.model.topic_deleted(topic)
            assert topic not in self.model.deleting

    @invariant()
    def partitions_are_consistent(self) -> None:
        model = self.model
        assert set(model.states) == set(model.partitions())
        for tp, state in model.states.items():
            assert state.leader_epoch >= self.epochs.get(tp, 0), f"{tp}: leader epoch went back"
            self.epochs[tp] = state.leader_epoch
            replicas = model.replicas(tp)
            assert state.isr, f"{tp}: empty ISR"
            assert len(set(state.isr)) == len(state.isr)
            assert set(state.isr) <= set(replicas)
            if state.leader == NO_LEADER:
                assert model.machine[tp] is PartitionState.OFFLINE
            else:
                assert state.leader in model.live, f"{tp}: dead leader {state.leader}"
                assert state.leader in state.isr and state.leader in replicas
                assert model.machine[tp] is PartitionState.ONLINE
        assert all(0.0 <= r <= 1.0 for r in model.imbalance().values())

    @invariant()
    def replicas_follow_their_brokers(self) -> None:
        """Every assigned replica is Online on a live broker, Offline on a dead one; every
        other one is of a topic being deleted, asked on a live broker, waiting for a dead one,
        or deleted; the deletion of a topic is over once none is left."""
        model = self.model
        expected = {(*tp, b): ReplicaState.ONLINE if b in model.live else ReplicaState.OFFLINE
                    for tp in model.partitions() for b in model.replicas(tp)}
        deleting = {r: s for r, s in model.replica_states.states.items() if r not in expected}
        assert {r: model.replica_states.states[r] for r in expected} == expected
        assert {r[0] for r in deleting} == model.deleting
        for (_, _, broker), state in deleting.items():
            assert state is not ReplicaState.DELETION_STARTED or broker in model.live
            assert state is not ReplicaState.DELETION_INELIGIBLE or broker not in model.live
            assert state in (ReplicaState.DELETION_STARTED, ReplicaState.DELETION_INELIGIBLE,
                             ReplicaState.DELETION_SUCCESSFUL)


ControllerMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
test_controller_model_keeps_its_invariants = ControllerMachine.TestCase


# ------------------------------------------------------------- the ISR's last member, unclean

def test_when_every_isr_member_dies_the_last_leader_is_the_one_kept():
    """Any ISR member has every acks=all message; the last leader has the acks=1 ones too, so
    it is the member the partition waits for."""
    model = make_model(live=[0, 1, 2], topics={"t": {0: (0, 1, 2)}})
    kill(model, 2, 0, 1)
    state = model.states[("t", 0)]
    assert (state.leader, state.isr) == (NO_LEADER, (0,))
    revive(model, 1, 2)
    assert model.states[("t", 0)].leader == NO_LEADER  # no unclean election by default
    revive(model, 0)
    assert model.states[("t", 0)].leader == 0


def test_unclean_election_lets_an_out_of_sync_replica_lead_when_the_topic_allows_it():
    model = make_model(live=[0, 1], topics={"t": {0: (0, 1)}, "u": {0: (0, 1)}},
                       configs={"u": {"unclean.leader.election.enable": "true"}})
    set_state(model, ("t", 0), leader=0, isr=[0])
    set_state(model, ("u", 0), leader=0, isr=[0])
    with structlog.testing.capture_logs() as logs:
        kill(model, 0)
    assert model.states[("t", 0)].leader == NO_LEADER
    assert (model.states[("u", 0)].leader, model.states[("u", 0)].isr) == (1, (1,))
    assert [e["topic"] for e in logs if e["event"] == "controller.unclean_election"] == ["u"]


def test_the_broker_default_for_unclean_election_applies_to_topics_that_do_not_set_it():
    model = make_model(live=[0, 1], topics={"t": {0: (0, 1)}})
    model.unclean_default = True
    set_state(model, ("t", 0), leader=0, isr=[0])
    kill(model, 0)
    assert model.states[("t", 0)].leader == 1


# -------------------------------------------------------------------------- reassignment

def test_reassignment_adds_the_new_replicas_then_drops_the_old_once_they_are_in_sync():
    """Kafka's steps: assign old + new, wait for the new ones in the ISR, lead from a new one,
    shrink the ISR and the assignment to the new replicas."""
    model = make_model(live=[0, 1, 2, 3], topics={"t": {0: (0, 1)}})
    start = model.start_reassignment(("t", 0), [2, 3])
    assert start is not None
    assert model.replicas(("t", 0)) == (2, 3, 0, 1)
    write(model, [start])
    assert model.states[("t", 0)].leader == 0  # the old leader leads while they catch up
    assert model.finish_reassignments() == []  # 2 and 3 are not in sync yet
    set_state(model, ("t", 0), leader=0, isr=[0, 1, 2, 3], leader_epoch=8)
    ((change, removed),) = model.finish_reassignments()
    assert removed == (0, 1)
    assert (change.state.leader, change.state.isr) == (2, (2, 3))
    assert change.state.leader_epoch == 9
    write(model, [change])
    model.reassignment_done(("t", 0))
    assert model.replicas(("t", 0)) == (2, 3)
    assert ("t", 0) not in model.reassigning


def test_a_reassignment_keeps_a_leader_that_is_among_the_new_replicas():
    model = make_model(live=[0, 1, 2], topics={"t": {0: (0, 1)}})
    write(model, [model.start_reassignment(("t", 0), [1, 0, 2])])  # type: ignore[list-item]
    set_state(model, ("t", 0), leader=0, isr=[0, 1, 2])
    ((change, removed),) = model.finish_reassignments()
    assert removed == ()
    assert change.state.leader == 0


# ------------------------------------------------------- what the driver asks the model

def test_the_partitions_a_returning_broker_hears_of_and_those_never_written():
    model = make_model(live=[0, 1, 2], topics={"t": {0: (0, 1), 1: (1, 2), 2: (2, 0)}})
    assert model.partitions_on([1]) == [("t", 0), ("t", 1)]
    assert model.partitions_on([0, 2]) == [("t", 0), ("t", 1), ("t", 2)]
    assert model.partitions_on([7]) == []
    assert model.partitions_without_state() == []
    model.add_topic("u", {0: (0,)}, {})  # a controller died before writing its state
    assert model.partitions_without_state() == [("u", 0)]
    assert model.known_partitions([("t", 1), ("u", 0), ("t", 1), ("x", 0), ("t", 0)]) == [
        ("t", 1), ("t", 0)]


def test_a_written_change_holds_until_the_state_moves_under_it():
    model = make_model(live=[0, 1], topics={"t": {0: (0, 1)}})
    [change] = kill(model, 1)
    assert model.holds(change)
    set_state(model, ("t", 0), leader=0, isr=[0, 1], leader_epoch=change.state.leader_epoch + 3)
    assert not model.holds(change)
    model.begin_deletion("t")
    assert not model.holds(change)


def test_configs_read_again_adopt_only_changes_of_known_topics():
    model = make_model(live=[0], topics={"a": {0: (0,)}, "b": {0: (0,)}},
                       configs={"a": {"retention_ms": "1"}})
    with structlog.testing.capture_logs() as logs:
        changed = model.configs_read({"a": {"retention_ms": "2"}, "b": {}, "gone": {"x": "y"}})
    assert changed == ["a"]
    assert model.configs == {"a": {"retention_ms": "2"}, "b": {}}
    assert [e["topic"] for e in logs if e["event"] == "controller.topic_configs_changed"] == ["a"]


def test_reassignments_asked_answer_each_partition_and_start_only_real_moves():
    model = make_model(live=[0, 1, 2], topics={"t": {0: (0, 1), 1: (1, 2)}})
    answers, started = model.start_reassignments([
        (("t", 0), (2, 1)), (("t", 1), (1, 2)), (("t", 9), (0,)), (("t", 0), (0,))])
    assert answers == {("t", 0): "t-0 is being reassigned already", ("t", 1): None,
                       ("t", 9): "t-9 does not exist"}
    assert [c.tp for c in started] == [("t", 0)]  # t-1 is on its target already
    assert model.reassigning == {("t", 0): (2, 1)}
    model.resume_reassignments({("t", 1): [2, 0], ("gone", 0): [1]})
    assert model.reassigning == {("t", 1): (2, 0)}


def test_a_stopping_broker_is_told_to_stop_following_what_moved_away():
    model = make_model(live=[0, 1], topics={"t": {0: (0, 1), 1: (1,)}})
    body = model.stop_following(0, [("t", 0), ("t", 1)])
    assert body is not None and body["delete_partitions"] is False
    assert body["partitions"] == [{"topic": "t", "partition": 0}]
    assert model.stop_following(5, [("t", 0)]) is None
