"""Brokers on a three-server ZooKeeper ensemble while its servers die (kill -9), with an acks=all
producer of numbered messages running throughout (tests.cluster.test_durability's).

- The ensemble's leader killed: the other two elect a leader among themselves; the brokers
  reconnect within their sessions and carry on, nothing restarts, nothing is lost.
- A minority (one follower) killed: nothing changes for the brokers.
- A majority killed: ZooKeeper serves nobody. The brokers go on serving the leaders they have
  (acks=all still completes while every ISR member fetches), and elect nothing: a broker
  killed meanwhile keeps its partitions, as Kafka's controller cannot learn of its death or
  write a new leader. When the majority returns the controller elects what is needed, and the
  brokers carry on without restarting, under the sessions they had.
- The ensemble tool itself: a paused leader (SIGSTOP) is replaced and rejoins as a follower.

Each test prints how many acknowledged messages it found lost (``final_check``: must be 0).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.cluster.conftest import Cluster, metadata_from, until
from tests.cluster.test_durability import NumberedProducer, all_in_sync, final_check
from tooling.local.zookeeper_ensemble import EnsembleServer, ZooKeeperEnsemble

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: short sessions and lag bounds (as test_durability's): each fault is noticed within seconds
SETTINGS = {
    "zookeeper_session_timeout_ms": 3000,
    "replica_lag_time_max_ms": 3000,
    "min_insync_replicas": 2,
    "maintenance_interval_ms": 500,
}
TOPIC, PARTITIONS = "ensemble", [0, 1, 2]


def _cluster(make_cluster: Callable[..., Cluster], ensemble: ZooKeeperEnsemble
             ) -> tuple[Cluster, NumberedProducer]:
    """Three brokers on the ensemble, a fully replicated topic, and its producer running."""
    cluster = make_cluster(3, settings=SETTINGS, zk_connect=f"{ensemble.connect}/odradek")
    cluster.create_topic(TOPIC, partitions=len(PARTITIONS), replication_factor=3)
    until(lambda: all_in_sync(cluster, TOPIC), 20, "a full ISR to start with")
    bootstrap = ",".join(p.bootstrap for p in cluster.brokers.values())
    producer = NumberedProducer(bootstrap, TOPIC, PARTITIONS)
    producer.start()
    until(lambda: producer.acked_count() >= 100, 30, "acknowledged sends before any fault")
    return cluster, producer


def _sessions(cluster: Cluster) -> dict[int, int]:
    """Each registered broker's ZooKeeper session (the owner of its ephemeral node)."""
    return {b: cluster.zk.exists(f"/brokers/ids/{b}").ephemeralOwner
            for b in cluster.registered()}


def _pids(cluster: Cluster) -> dict[int, int]:
    return {b: p.pid for b, p in cluster.running().items()}


def _more_acks(producer: NumberedProducer, than: int, n: int = 100) -> Callable[[], bool]:
    return lambda: producer.acked_count() >= than + n


def _unchanged_brokers(cluster: Cluster, pids: dict[int, int]) -> None:
    """The same broker processes still run, and none has crashed into a traceback."""
    for broker_id, pid in pids.items():
        process = cluster.brokers[broker_id]
        assert process.running and process.pid == pid, f"broker {broker_id} restarted or died"
        assert "Traceback" not in process.log_text(), f"broker {broker_id} logged a traceback"


def _kill(server: EnsembleServer) -> None:
    server.kill()
    print(f"killed zookeeper {server.server_id}")


@pytest.mark.timeout(90)
def test_the_ensembles_leader_killed_another_is_elected_and_brokers_carry_on(
    zookeeper_ensemble: ZooKeeperEnsemble, make_cluster: Callable[..., Cluster],
) -> None:
    ensemble = zookeeper_ensemble
    cluster, producer = _cluster(make_cluster, ensemble)
    try:
        sessions, pids = _sessions(cluster), _pids(cluster)
        controller, epoch = cluster.controller_id(), cluster.controller_epoch()
        leader = ensemble.wait_for_leader()
        acked = producer.acked_count()
        killed_at = time.monotonic()
        _kill(leader)
        new_leader = ensemble.wait_for_leader(cluster.failover_bound, besides=[leader])
        elected_after = time.monotonic() - killed_at
        until(_more_acks(producer, acked), cluster.failover_bound,
              "acknowledgements after the ensemble's leader was killed")
        print(f"zookeeper leader {leader.server_id} killed: {new_leader.server_id} leads after "
              f"{elected_after:.2f} s; 100 more acknowledged after "
              f"{time.monotonic() - killed_at:.2f} s")
        # every broker reconnected within its session: the same sessions hold the
        # registrations, the same controller reigns in the same epoch
        until(lambda: _sessions(cluster) == sessions, cluster.failover_bound,
              f"brokers registered under their sessions {sessions}")
        assert (cluster.controller_id(), cluster.controller_epoch()) == (controller, epoch)
        _unchanged_brokers(cluster, pids)
        leader.restart()
        until(lambda: len(ensemble.followers()) == 2, 30, "the old leader back as a follower")
        until(_more_acks(producer, producer.acked_count()), cluster.failover_bound,
              "acknowledgements with the ensemble whole again")
    finally:
        outcome = producer.stop(120)
    final_check(cluster, TOPIC, PARTITIONS, outcome, "zookeeper leader killed",
                "faults=kill -9 of the ensemble's leader")
    cluster.stop_all()  # before this test's ensemble goes


@pytest.mark.timeout(90)
def test_a_minority_of_the_ensemble_killed_changes_nothing(
    zookeeper_ensemble: ZooKeeperEnsemble, make_cluster: Callable[..., Cluster],
) -> None:
    ensemble = zookeeper_ensemble
    cluster, producer = _cluster(make_cluster, ensemble)
    try:
        sessions, pids = _sessions(cluster), _pids(cluster)
        controller, epoch = cluster.controller_id(), cluster.controller_epoch()
        states = cluster.states(TOPIC)
        leader = ensemble.wait_for_leader()
        follower = ensemble.followers()[0]
        acked = producer.acked_count()
        _kill(follower)
        until(_more_acks(producer, acked), cluster.failover_bound,
              "acknowledgements with one ZooKeeper server of three dead")
        assert ensemble.leader() is leader
        until(lambda: _sessions(cluster) == sessions, cluster.failover_bound,
              f"brokers registered under their sessions {sessions}")
        assert (cluster.controller_id(), cluster.controller_epoch()) == (controller, epoch)
        assert cluster.states(TOPIC) == states, "a partition's leader or ISR moved"
        _unchanged_brokers(cluster, pids)
        follower.restart()
        until(_more_acks(producer, producer.acked_count()), cluster.failover_bound,
              "acknowledgements with the ensemble whole again")
    finally:
        outcome = producer.stop(120)
    final_check(cluster, TOPIC, PARTITIONS, outcome, "zookeeper minority killed",
                "faults=kill -9 of 1 of 3 ZooKeeper servers")
    cluster.stop_all()  # before this test's ensemble goes


def _leaders_as_brokers_say(cluster: Cluster) -> dict[int, dict[int, int]]:
    """Each running broker's Metadata: partition -> leader (ZooKeeper cannot be read now)."""
    out = {}
    for broker_id, process in cluster.running().items():
        topic = metadata_from(process.bootstrap, [TOPIC]).topics[TOPIC]
        out[broker_id] = {p.partition: p.leader for p in topic.partitions.values()}
    return out


def _watch_leaders(cluster: Cluster, window: float) -> dict[int, dict[int, int]]:
    """What every running broker names as leaders, asked again and again for ``window``
    seconds; fails at the first answer that differs from the first."""
    first = _leaders_as_brokers_say(cluster)
    end = time.monotonic() + window
    while time.monotonic() < end:
        now = _leaders_as_brokers_say(cluster)
        assert now == first, f"leaders moved: {first} -> {now}"
        time.sleep(0.2)  # the pace of the watch, not a wait for anything
    return first


@pytest.mark.timeout(120)
def test_a_majority_of_the_ensemble_killed_brokers_serve_their_leaders_and_elect_nothing(
    zookeeper_ensemble: ZooKeeperEnsemble, make_cluster: Callable[..., Cluster],
) -> None:
    ensemble = zookeeper_ensemble
    cluster, producer = _cluster(make_cluster, ensemble)
    try:
        pids, sessions = _pids(cluster), _sessions(cluster)
        controller, epoch = cluster.controller_id(), cluster.controller_epoch()
        states = cluster.states(TOPIC)
        leaders = {p: s["leader"] for p, s in states.items()}
        victim = next(b for b in sorted(set(leaders.values())) if b != controller)
        survivors = {b: pid for b, pid in pids.items() if b != victim}
        cluster.reset_zk()  # the test reads nothing from ZooKeeper until the quorum is back
        # the leader and a follower: the one left serves nobody
        majority = [ensemble.wait_for_leader(), ensemble.followers()[0]]
        acked = producer.acked_count()
        for server in majority:
            _kill(server)
        assert ensemble.serving() == []
        # no ZooKeeper, every ISR member fetching: acks=all still completes
        until(_more_acks(producer, acked), cluster.failover_bound,
              "acknowledgements with the ensemble's majority dead")
        print(f"majority dead: {producer.acked_count() - acked} acknowledged meanwhile")

        port = cluster.brokers[victim].port
        cluster.brokers[victim].kill()
        acked = producer.acked_count()
        print(f"killed broker {victim}, leader of "
              f"{sorted(p for p, b in leaders.items() if b == victim)}")
        # Nobody elects new leaders: no controller learns of the death (its session cannot
        # expire) and no leader can take it out of an ISR (a ZooKeeper write). Watched for
        # as long as an election would take with a quorum: the session timeout, then the
        # lag bound; every survivor keeps naming the old leaders throughout.
        window = cluster.session_timeout + int(SETTINGS["replica_lag_time_max_ms"]) / 1000
        watched = _watch_leaders(cluster, window)
        assert watched == {b: leaders for b in survivors}, "a leader moved without a quorum"
        _unchanged_brokers(cluster, survivors)
        print(f"broker {victim} dead without a quorum: {producer.acked_count() - acked} "
              f"acknowledged (its partitions' ISRs still name it)")

        ensemble.start()  # the majority returns
        back_at = time.monotonic()

        def reelected() -> bool:
            now = cluster.states(TOPIC)
            return all(s["leader"] not in (victim, -1) and victim not in s["isr"]
                       for s in now.values())

        until(reelected, cluster.failover_bound + 10,
              f"broker {victim}'s partitions led by others once the quorum is back")
        print(f"zookeeper majority back: broker {victim}'s partitions led by others after "
              f"{time.monotonic() - back_at:.2f} s (session timeout "
              f"{cluster.session_timeout:g} s)")
        until(_more_acks(producer, producer.acked_count()), cluster.failover_bound,
              "acknowledgements once the quorum is back")
        _unchanged_brokers(cluster, survivors)
        # the survivors reconnected within their sessions: no re-registration, same reign
        assert {b: s for b, s in _sessions(cluster).items() if b in survivors} == {
            b: sessions[b] for b in survivors}, "a broker's session expired"
        assert (cluster.controller_id(), cluster.controller_epoch()) == (controller, epoch)
        cluster.brokers[victim].start(port=port, timeout=cluster.failover_bound + 10)
        until(lambda: all_in_sync(cluster, TOPIC), cluster.failover_bound + 20,
              f"broker {victim} back in every ISR")
    finally:
        outcome = producer.stop(120)
    final_check(cluster, TOPIC, PARTITIONS, outcome, "zookeeper majority killed",
                f"faults=kill -9 of 2 of 3 ZooKeeper servers, then of broker {victim}")
    cluster.stop_all()  # before this test's ensemble goes


@pytest.mark.timeout(60)
def test_a_paused_leader_of_the_ensemble_is_replaced_and_rejoins_as_a_follower(
    zookeeper_ensemble: ZooKeeperEnsemble,
) -> None:
    ensemble = zookeeper_ensemble
    leader = ensemble.wait_for_leader()
    leader.pause()  # no socket closes: the followers give up on it after syncLimit ticks
    try:
        new_leader = ensemble.wait_for_leader(30, besides=[leader])
    finally:
        leader.resume()
    assert new_leader is not leader
    until(lambda: leader.mode() == "follower", 30, "the resumed old leader following")
    assert sorted(s.mode() or "-" for s in ensemble) == ["follower", "follower", "leader"]
