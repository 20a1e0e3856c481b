"""Brokers die (kill -9) or pause (SIGSTOP) under a running cluster: a new controller is elected
with a higher epoch, partitions get new leaders from their ISR, a restarted broker comes back
through its stale registration, and a paused old controller overwrites nothing.

Nothing here depends on replication: whether a restarted broker rejoins the ISRs is not
checked, nor is data across a change of leader."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest

from tests.cluster.conftest import Cluster, until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def _led_by(cluster: Cluster, topic: str, broker_id: int) -> list[int]:
    return [p for p, leader in cluster.leaders(topic).items() if leader == broker_id]


def _new_controller(cluster: Cluster, old: int, old_epoch: int) -> tuple[int, int] | None:
    """(id, epoch) once ``/controller`` names another broker than ``old`` with a higher
    ``/controller_epoch``."""
    now = cluster.controller_id()
    epoch = cluster.controller_epoch()
    return (now, epoch) if now is not None and now != old and epoch > old_epoch else None


def _failed_over(cluster: Cluster, topic: str, dead: int,
                 before: dict[int, dict[str, object]], *, isr: bool = True) -> bool:
    """Every partition is led by another broker than ``dead``, ``dead`` is in no ISR (unless
    not ``isr``: once restarted it may catch up and rejoin), and each partition the dead broker
    led has a higher leader epoch."""
    states = cluster.states(topic)
    for partition, state in states.items():
        if state["leader"] in (dead, -1) or (isr and dead in state["isr"]):
            return False
        if before[partition]["leader"] == dead:
            old_epoch = before[partition]["leader_epoch"]
            assert isinstance(old_epoch, int)
            assert state["leader_epoch"] > old_epoch
    return True


#: rounds of "kill -9 the controller, check, restart it" (ODRADEK_FAULT_ROUNDS; 1 by default)
FAULT_ROUNDS = max(1, int(os.environ.get("ODRADEK_FAULT_ROUNDS", "1")))


@pytest.mark.timeout(60 + 30 * FAULT_ROUNDS)
def test_kill_9_of_the_controller_elects_another_and_moves_its_leaders(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    for round_ in range(FAULT_ROUNDS):
        if round_:  # the broker killed last round comes back (it rejoins no ISR: a new topic)
            cluster.start([b for b, p in cluster.brokers.items() if not p.running])
        _kill_the_controller(cluster, f"f{round_}")


def _kill_the_controller(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, partitions=6, replication_factor=3)
    controller, epoch = cluster.controller_id(), cluster.controller_epoch()
    assert controller is not None
    before = cluster.states(topic)
    led = _led_by(cluster, topic, controller)
    assert led, f"controller {controller} leads none of {before}"

    killed_at = time.monotonic()
    cluster.brokers[controller].kill()
    new, new_epoch = until(lambda: _new_controller(cluster, controller, epoch),
                           cluster.failover_bound, "a new controller after kill -9")
    elected_after = time.monotonic() - killed_at
    until(lambda: _failed_over(cluster, topic, controller, before), cluster.failover_bound,
          f"new leaders for partitions {led} of dead controller {controller}")
    moved_after = time.monotonic() - killed_at
    print(f"controller kill -9: new controller {new} (epoch {epoch} -> {new_epoch}) after "
          f"{elected_after:.2f} s, its partitions led again after {moved_after:.2f} s "
          f"(session timeout {cluster.session_timeout:g} s)")
    assert new_epoch == epoch + 1
    assert cluster.registered() == sorted(set(range(3)) - {controller})

    after = cluster.states(topic)
    for partition in led:
        assert after[partition]["leader"] != controller
        assert after[partition]["controller_epoch"] == new_epoch
    # what every survivor answers: the new controller and the new leaders, without the dead
    for broker_id in cluster.running():
        def updated(broker_id: int = broker_id) -> bool:
            view = cluster.metadata(broker_id, [topic])
            return (view.controller_id == new and controller not in view.brokers
                    and all(p.leader == after[p.partition]["leader"]
                            and controller not in p.isr
                            for p in view.topics[topic].partitions.values()))

        until(updated, 10, f"broker {broker_id}'s Metadata shows controller {new}")


@pytest.mark.timeout(90)
def test_kill_9_of_a_leader_moves_its_partitions_and_a_restart_rejoins(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    cluster.create_topic("f", partitions=6, replication_factor=3)
    # RF 1, one partition per broker: the victim's goes offline and comes back with it
    cluster.create_topic("solo", partitions=3, replication_factor=1)
    controller = cluster.controller_id()
    victim = next(b for b in range(3) if b != controller and _led_by(cluster, "f", b))
    before = cluster.states("f")
    led = _led_by(cluster, "f", victim)
    (solo,) = _led_by(cluster, "solo", victim)
    solo_before = cluster.state("solo", solo)
    process = cluster.brokers[victim]
    port = process.port

    killed_at = time.monotonic()
    process.kill()
    # restart at once: the new process finds its own registration still there and waits for
    # ZooKeeper to expire it before registering (and printing its listening line)
    process.start(port=port, timeout=cluster.failover_bound + 10)
    restarted_after = time.monotonic() - killed_at
    log = process.log_text()
    assert "cluster.waiting_for_stale_registration" in log.split("--- start:")[-1]
    assert process.node_id == victim and process.port == port

    until(lambda: _failed_over(cluster, "f", victim, before, isr=False),
          cluster.failover_bound, f"new leaders for partitions {led} of killed broker {victim}")
    moved_after = time.monotonic() - killed_at
    print(f"leader kill -9: partitions {led} led by others {moved_after:.2f} s after the "
          f"kill; the restart registered after {restarted_after:.2f} s "
          f"(session timeout {cluster.session_timeout:g} s)")
    assert cluster.controller_id() == controller  # the controller did not move
    assert cluster.registered() == [0, 1, 2]

    # the restarted broker gets LeaderAndIsr for its replicas: its RF-1 partition, offline
    # while it was away, is its own again
    process.wait_for_log(rf"cluster.partition_role.*topic='solo' partition={solo} "
                         r"role='leader'", count=2, timeout=cluster.failover_bound)
    state = until(lambda: (s := cluster.state("solo", solo))["leader"] == victim and s,
                  10, f"solo-{solo} led by {victim} again")
    assert state["leader_epoch"] > solo_before["leader_epoch"]
    assert state["isr"] == [victim]

    # every broker (the restarted one too) lists it, with its replicas; it leads none of "f"
    # (no automatic preferred election here; whether it is back in the ISRs is not checked)
    for broker_id in range(3):
        def listed(broker_id: int = broker_id) -> bool:
            view = cluster.metadata(broker_id, ["f", "solo"])
            parts = view.topics["f"].partitions
            return (victim in view.brokers
                    and all(victim in p.replicas for p in parts.values())
                    and all(p.leader != victim for p in parts.values())
                    and view.topics["solo"].partitions[solo].leader == victim)

        until(listed, 10, f"broker {broker_id}'s Metadata lists broker {victim} again")

    # and every broker names each partition's leader epoch as ZooKeeper has it (Metadata v1):
    # what lets a client tell an answer that has not heard of the new leaders
    epochs = {p: s["leader_epoch"] for p, s in cluster.states("f").items()}
    assert any(epochs[p] > before[p]["leader_epoch"] for p in led)
    for broker_id in range(3):
        def told(broker_id: int = broker_id) -> bool:
            parts = cluster.metadata(broker_id, ["f"]).topics["f"].partitions
            return {p: i.leader_epoch for p, i in parts.items()} == epochs

        until(told, 10, f"broker {broker_id}'s Metadata names the leader epochs {epochs}")


@pytest.mark.timeout(120)
def test_a_paused_controller_is_replaced_and_overwrites_nothing_when_it_resumes(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3)
    cluster.create_topic("z", partitions=6, replication_factor=3)
    old, old_epoch = cluster.controller_id(), cluster.controller_epoch()
    assert old is not None
    zombie = cluster.brokers[old]
    before = cluster.states("z")
    _, old_session_stat = cluster.zk.get(f"/brokers/ids/{old}")

    paused_at = time.monotonic()
    os.kill(zombie.pid, signal.SIGSTOP)
    try:
        new, new_epoch = until(lambda: _new_controller(cluster, old, old_epoch),
                               cluster.failover_bound, "a new controller while the old is paused")
        print(f"paused controller {old} replaced by {new} (epoch {new_epoch}) after "
              f"{time.monotonic() - paused_at:.2f} s")
        until(lambda: _failed_over(cluster, "z", old, before), cluster.failover_bound,
              f"the paused controller {old} out of every ISR and leadership")
        taken_over = cluster.state_versions("z")
        epoch_stat = cluster.zk.get("/controller_epoch")[1]
    finally:
        os.kill(zombie.pid, signal.SIGCONT)

    # the old controller learns its session is gone and steps down, then registers again
    zombie.wait_for_log(r"event='controller\.resigned'", timeout=cluster.failover_bound)

    def reregistered() -> bool:
        stat = cluster.zk.exists(f"/brokers/ids/{old}")
        return stat is not None and stat.ephemeralOwner != old_session_stat.ephemeralOwner

    until(reregistered, cluster.failover_bound, f"broker {old} registered again")
    # its metadata now comes from the new controller (it took the higher epoch)
    until(lambda: cluster.metadata(old).controller_id == new, 10,
          f"the resumed broker {old} names controller {new}")

    assert cluster.controller_id() == new
    assert cluster.controller_epoch() == new_epoch
    assert cluster.zk.get("/controller_epoch")[1].version == epoch_stat.version
    for partition, (data, version) in cluster.state_versions("z").items():
        state = cluster.state("z", partition)
        assert (data, version) == taken_over[partition] or (
            state["controller_epoch"] >= new_epoch), (
            f"z-{partition} was written by epoch {state['controller_epoch']} after "
            f"epoch {new_epoch} took over")
        assert state["controller_epoch"] >= new_epoch or before[partition]["leader"] != old
    # and nothing written under the old epoch after it resumed
    resumed = zombie.log_text().split("controller.resigned")[-1]
    assert "controller.state_change" not in resumed
