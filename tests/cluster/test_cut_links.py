"""Cut links (DESIGN "Replication": faults are real -- SIGKILL, SIGSTOP/SIGCONT, and cut links
through a loopback proxy the test controls). A ``LinkProxy`` stands between a broker and
ZooKeeper, or between a broker and everyone who reaches it by its advertised address; a cut
holds the traffic both ways without closing anything, as a network partition does.

- A broker cut from ZooKeeper but still reachable by clients and by the other brokers is the
  zombie of a split: it is alive and believes it leads, while ZooKeeper expires its session and
  the controller elects new leaders from the ISR. Seed 003: acknowledged data "will be there
  until N-1 brokers fails"; so with acks=all nothing the zombie takes alone is acknowledged
  (its ISR still names followers that now fetch elsewhere, and it cannot shrink that ISR
  without ZooKeeper), and when the link heals it finds its session gone, registers again,
  follows, cuts away what it took alone and rejoins every ISR. With the controller as the
  victim, another broker becomes controller with a higher epoch first.
- A cut from ZooKeeper shorter than the session timeout: the session lives on, nothing moves.
- A leader cut off from its followers, still in ZooKeeper: it stays leader, they leave the ISR
  by lag, and acks=all is refused below min_insync_replicas, also for a batch that was waiting.

A durability figure is printed: acknowledged messages, and how many of them were lost (0).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from client.future import Future
from client.network import NetworkClient
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.cluster.conftest import Cluster, free_port, replica_log, until, zookeeper_through
from tests.cluster.link_proxy import LinkProxy
from tests.cluster.test_durability import NumberedProducer, all_in_sync, final_check
from tests.cluster.test_replication import _produce_body, _send_all

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

BROKERS = 3
#: short sessions and lag bounds: a cut is acted on within seconds
SETTINGS = {
    "zookeeper_session_timeout_ms": 3000,
    "replica_lag_time_max_ms": 3000,
    "min_insync_replicas": 2,
    "maintenance_interval_ms": 500,
}


def _linked_cluster(make_cluster: Callable[..., Cluster], zk_connect: str,
                    links: dict[int, LinkProxy], settings: dict[str, Any]) -> Cluster:
    """Brokers 0..2, each on its own link; broker 0 starts first, so it is the controller."""
    cluster = make_cluster(BROKERS, settings=settings, start=False,
                           per_broker=zookeeper_through(links, zk_connect))
    cluster.start([0])
    cluster.start([1, 2])
    assert cluster.controller_id() == 0, "the broker started first is the controller"
    return cluster


def _session(cluster: Cluster, broker_id: int) -> int:
    stat = cluster.zk.exists(f"/brokers/ids/{broker_id}")
    assert stat is not None, f"broker {broker_id} is not registered"
    return int(stat.ephemeralOwner)


def _answer(future: Future[dict[str, Any]]) -> dict[str, Any] | BaseException:
    """The response, or what stopped it (an error, or no answer within the request timeout:
    not acknowledged either)."""
    try:
        return future.result(40)
    except Exception as exc:
        return exc


def _outcome(body: dict[str, Any] | BaseException) -> str:
    if isinstance(body, BaseException):
        return type(body).__name__
    return ErrorCode(body["topics"][0]["partitions"][0]["error_code"]).name


@pytest.mark.timeout(240)
@pytest.mark.parametrize("victim_role", ["leader", "controller"])
def test_a_broker_cut_from_zookeeper_is_replaced_acknowledges_nothing_alone_and_rejoins(
    victim_role: str, zk_links: dict[int, LinkProxy], make_cluster: Callable[..., Cluster],
    zk_connect: str,
) -> None:
    cluster = _linked_cluster(make_cluster, zk_connect, zk_links, SETTINGS)
    victim_id = 0 if victim_role == "controller" else 2
    others = [i for i in range(BROKERS) if i != victim_id]
    topic, partitions = f"cut-{victim_role}", [0, 1]
    # the victim leads both partitions
    cluster.create_topic(topic, len(partitions), 3, replica_assignment={
        0: [victim_id, *others], 1: [victim_id, *reversed(others)]})
    until(lambda: all_in_sync(cluster, topic), 20, "a full ISR to start with")
    victim = cluster.brokers[victim_id]
    producer = NumberedProducer(",".join(cluster.brokers[i].bootstrap for i in others),
                                topic, partitions)
    producer.start()
    zombie = NetworkClient(victim.bootstrap, client_id="zombie-writer",
                           request_timeout_ms=30_000)
    try:
        until(lambda: producer.acked_count() >= 100, 30, "acknowledged sends before the cut")
        before = cluster.states(topic)
        controller_epoch = cluster.controller_epoch()
        session = _session(cluster, victim_id)
        acked_before = producer.acked_count()
        zk_links[victim_id].cut()

        def replaced() -> bool:
            now = cluster.states(topic)
            return all(now[p]["leader"] not in (victim_id, -1)
                       and now[p]["leader_epoch"] > before[p]["leader_epoch"]
                       and victim_id not in now[p]["isr"] for p in partitions)

        until(replaced, cluster.failover_bound,
              f"new leaders of {topic} once broker {victim_id}'s session expired")

        def followers_moved() -> bool:  # UpdateMetadata follows LeaderAndIsr to each broker
            return all(cluster.metadata(i, [topic]).topics[topic].partitions[p].leader
                       not in (victim_id, -1) for i in others for p in partitions)

        # once the others act on it, no follower fetches from the zombie any more (before, a
        # batch they copied from it was rightly acknowledged: they had it)
        until(followers_moved, 20, f"brokers {others} following the new leaders")
        if victim_role == "controller":
            assert cluster.controller_id() in others
            assert cluster.controller_epoch() > controller_epoch
        # clients still reach the zombie, and it still believes it leads
        acks_one = zombie.send(-1, ApiKey.PRODUCE, _produce_body(
            topic, 0, [b"zombie-acks-1"], acks=1))
        acks_all = zombie.send(-1, ApiKey.PRODUCE, _produce_body(
            topic, 1, [b"zombie-acks-all"], acks=-1, timeout_ms=3000))
        # acks=all goes on at the new leaders: two in-sync replicas of three
        until(lambda: producer.acked_count() >= acked_before + 50, cluster.failover_bound,
              "acknowledgements through the new leaders")
        answers = {"acks=1": _answer(acks_one), "acks=all": _answer(acks_all)}
        assert _outcome(answers["acks=all"]) != "NONE", \
            f"the zombie acknowledged an acks=all produce alone: {answers['acks=all']}"
        assert victim.running, f"the cut broker exited:\n{victim.log_text()[-3000:]}"

        zk_links[victim_id].restore()
        until(lambda: all_in_sync(cluster, topic), cluster.failover_bound + 20,
              f"broker {victim_id} back in every ISR of {topic}")
        assert _session(cluster, victim_id) != session, "registered again, in a new session"
        cluster.wait_ready()  # every broker names the same, one controller
        assert cluster.controller_id() in others
        acked_healed = producer.acked_count()
        until(lambda: producer.acked_count() >= acked_healed + 50, 30,
              "acknowledgements after the link healed")
    finally:
        zk_links[victim_id].restore()
        zombie.close()
        outcome = producer.stop(240)
    verdict = final_check(cluster, topic, partitions, outcome, f"cut {victim_role}", "cuts=1")
    print(f"cut {victim_role}: the zombie answered acks=1 {_outcome(answers['acks=1'])}, "
          f"acks=all {_outcome(answers['acks=all'])}")
    final = {v for p in partitions for _, v in replica_log(cluster.any_running(), topic, p)}
    # what it took alone is gone from every replica (final_check: all replicas are identical)
    assert not {b"zombie-acks-1", b"zombie-acks-all"} & final
    assert verdict.acknowledged >= acked_healed + 50


@pytest.mark.timeout(120)
def test_a_zookeeper_cut_shorter_than_the_session_stops_no_produce_and_moves_nothing(
    zk_links: dict[int, LinkProxy], make_cluster: Callable[..., Cluster], zk_connect: str,
) -> None:
    # sessions of 10 s; kazoo pings after a third of that without traffic, and gives up a
    # connection after two thirds without an answer: the cut is restored as soon as every
    # broker's link has held something (a ping at the latest), well before either
    cluster = _linked_cluster(make_cluster, zk_connect, zk_links,
                              {**SETTINGS, "zookeeper_session_timeout_ms": 10_000})
    topic = "blip"
    cluster.create_topic(topic, 3, 3)
    until(lambda: all_in_sync(cluster, topic), 20, "a full ISR to start with")
    sessions = {i: _session(cluster, i) for i in range(BROKERS)}
    states = cluster.state_versions(topic)
    controller_epoch = cluster.controller_epoch()
    bootstrap = ",".join(p.bootstrap for p in cluster.brokers.values())
    for link in zk_links.values():
        link.cut()
    try:
        until(lambda: all(link.held for link in zk_links.values()), 6,
              "every broker's ZooKeeper traffic held by the cut")
        # produce and fetch need no ZooKeeper: acks=all is answered during the cut
        acked = _send_all(bootstrap, topic, 0, [f"during-{i}".encode() for i in range(20)],
                          timeout=10)
    finally:
        for link in zk_links.values():
            link.restore()
    assert len(acked) == 20
    # the same sessions, so the same registrations, leaders, ISRs and controller
    cluster.create_topic("after-the-blip", 1, 3)  # the controller and every broker still work
    assert {i: _session(cluster, i) for i in range(BROKERS)} == sessions
    assert cluster.state_versions(topic) == states
    assert cluster.controller_epoch() == controller_epoch
    print(f"ZooKeeper cut: {sum(link.held for link in zk_links.values())} reads held; "
          f"{len(acked)} acks=all produces answered meanwhile")


@pytest.mark.timeout(180)
def test_a_leader_cut_from_its_followers_acknowledges_nothing_below_min_insync(
    make_link: Callable[[tuple[str, int]], LinkProxy], make_cluster: Callable[..., Cluster],
) -> None:
    """The other split: the leader keeps its ZooKeeper session, but its followers (and the
    clients that learnt its address from Metadata) reach it through a link that is cut. It
    stays leader, its followers fall out of the ISR by lag, and acks=all is then refused
    (min_insync_replicas 2) -- also for a batch written before the ISR shrank, which the
    shrink lets past the high watermark with the leader alone holding it (Kafka:
    NOT_ENOUGH_REPLICAS_AFTER_APPEND). A client on the leader's side still writes with acks=1;
    those messages stay, for the leader never changed. When the link heals the followers
    catch up and rejoin."""
    port = free_port()  # the leader's own: its link forwards there
    link = make_link(("127.0.0.1", port))
    cluster = make_cluster(BROKERS, settings=SETTINGS, start=False, per_broker={
        2: {"advertised_listeners": f"PLAINTEXT://{link.address}"}})
    cluster.start([0, 1])
    leader = cluster.brokers[2].start(port=port)
    cluster.wait_ready()
    topic = "island"
    cluster.create_topic(topic, 1, 3, replica_assignment={0: [2, 0, 1]})
    until(lambda: all_in_sync(cluster, topic), 20, "a full ISR to start with")
    producer = NumberedProducer(f"{cluster.brokers[0].bootstrap},{cluster.brokers[1].bootstrap}",
                                topic, [0])
    producer.start()
    near = NetworkClient(leader.bootstrap, client_id="near-side", request_timeout_ms=30_000)
    try:
        near.send(-1, ApiKey.API_VERSIONS, {}).result(10)  # connected: a send leaves at once
        until(lambda: producer.acked_count() >= 100, 30, "acknowledged sends before the cut")
        before = cluster.state(topic, 0)
        link.cut()
        written_first = near.send(-1, ApiKey.PRODUCE, _produce_body(
            topic, 0, [b"island-before-shrink"], acks=-1, timeout_ms=25_000))
        until(lambda: cluster.state(topic, 0)["isr"] == [2], cluster.failover_bound,
              "the followers out of the ISR by lag")
        assert {k: cluster.state(topic, 0)[k] for k in ("leader", "leader_epoch")} == {
            "leader": 2, "leader_epoch": before["leader_epoch"]}, "the leader never changed"
        answers = {
            "written first": _answer(written_first),
            "after the shrink": _answer(near.send(-1, ApiKey.PRODUCE, _produce_body(
                topic, 0, [b"island-after-shrink"], acks=-1))),
            "acks=1": _answer(near.send(-1, ApiKey.PRODUCE, _produce_body(
                topic, 0, [b"island-acks-1"], acks=1))),
        }
        outcomes = {name: _outcome(answer) for name, answer in answers.items()}
        print(f"cut followers: the leader answered {outcomes}")
        assert outcomes == {"written first": "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                            "after the shrink": "NOT_ENOUGH_REPLICAS", "acks=1": "NONE"}
        acked_cut = producer.acked_count()
        link.restore()
        until(lambda: all_in_sync(cluster, topic), cluster.failover_bound + 20,
              "the followers caught up and back in the ISR")
        until(lambda: producer.acked_count() >= acked_cut + 50, 30,
              "acknowledgements after the link healed")
    finally:
        link.restore()
        near.close()
        outcome = producer.stop(240)
    final_check(cluster, topic, [0], outcome, "cut followers", "cuts=1")
    final = {v for _, v in replica_log(leader, topic, 0)}
    # written, never acknowledged with acks=all; kept, as the leader kept leading
    assert {b"island-before-shrink", b"island-acks-1"} <= final
    assert b"island-after-shrink" not in final  # refused before it was written
