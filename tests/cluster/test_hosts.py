"""Hosts, not ports: three brokers and ZooKeeper, each on a host of its own -- a network
namespace with its own address on a private bridge (tests/netns.py, tests/cluster/hosts.py) --
so advertised listeners, racks and the inter-broker traffic go between distinct addresses, and
a partition is a real one: a host detached from the bridge, or the bridge split in two sides,
drops frames, and peers find out by timeouts, never by a closed connection.

The clients (producer, consumer group, the test's ZooKeeper session) run in the root
namespace, which reaches every host that is attached. A durability figure is printed for each
fault: acknowledged messages, and how many of them were lost (0).

Needs root (``ip netns``, veth pairs, a bridge): skipped, with the reason, where they cannot be
made. One network and one ZooKeeper serve the module; each test has its own brokers and chroot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from client.consumer import Consumer
from client.producer import Producer
from client.records import TopicPartition
from tests.broker_process import REPO_ROOT
from tests.cluster.conftest import Cluster, replica_log, until
from tests.cluster.hosts import (
    ZOOKEEPER_HOST,
    HostCluster,
    broker_host,
    established,
    host_names,
    zookeeper_on,
)
from tests.cluster.test_durability import (
    SETTINGS,
    NumberedProducer,
    all_in_sync,
    final_check,
    replicas_identical,
)
from tests.netns import TEST_PROCESS, NetworkUnavailableError, PrivateNetwork
from tooling.local.zookeeper import ZooKeeperServer, ZooKeeperUnavailableError

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

BROKERS = 3
#: one rack per side of the split below: broker 0 alone, brokers 1 and 2 together
RACKS = {0: "rack-a", 1: "rack-b", 2: "rack-b"}
#: the broker started first, so the controller
CONTROLLER = 0
ZOMBIE_VALUE = b"zombie-acks-all"


@pytest.fixture(scope="module")
def network() -> Iterator[PrivateNetwork]:
    try:
        net = PrivateNetwork(host_names(BROKERS)).open()
    except NetworkUnavailableError as exc:
        pytest.skip(f"brokers on hosts of their own need network namespaces: {exc}")
    try:
        yield net
    finally:
        net.close()


@pytest.fixture(scope="module")
def zookeeper_host(network: PrivateNetwork, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[ZooKeeperServer]:
    server = zookeeper_on(network, tmp_path_factory.mktemp("zookeeper-host"))
    try:
        server.start()
    except ZooKeeperUnavailableError as exc:
        pytest.fail(f"cluster tests need ZooKeeper: {exc}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def host_cluster(network: PrivateNetwork, zookeeper_host: ZooKeeperServer, tmp_path: Path
                 ) -> Iterator[Callable[[], HostCluster]]:
    """``host_cluster()``: brokers 0..2 on their hosts in this test's own chroot, not started
    (broker 0 first makes it the controller). Stopped by PID at the end, their logs printed,
    and every host attached and every split healed for the next test."""
    made: list[HostCluster] = []

    def factory() -> HostCluster:
        chroot = f"{zookeeper_host.connect}/t-{uuid.uuid4().hex}"
        cluster = HostCluster(tmp_path / "cluster", chroot, SETTINGS, network, RACKS)
        made.append(cluster)
        for broker_id in range(BROKERS):
            cluster.broker(broker_id)
        return cluster

    yield factory
    try:
        network.heal()  # first: a broker cut off would wait out its controlled shutdown
    finally:
        for cluster in made:
            cluster.stop_all()
            for broker_id, process in sorted(cluster.brokers.items()):
                print(f"===== broker {broker_id} log ({process.data_dir}) =====\n"
                      f"{process.log_text()}")


def _started(host_cluster: Callable[[], HostCluster]) -> HostCluster:
    cluster = host_cluster()
    cluster.start([CONTROLLER])
    cluster.start([i for i in range(BROKERS) if i != CONTROLLER])
    assert cluster.controller_id() == CONTROLLER, "the broker started first is the controller"
    return cluster


def _bootstrap(cluster: Cluster) -> str:
    return ",".join(p.bootstrap for p in cluster.brokers.values())


@pytest.mark.timeout(150)
def test_brokers_on_their_own_hosts_replicate_between_them_and_serve_clients(
    host_cluster: Callable[[], HostCluster],
) -> None:
    cluster = _started(host_cluster)
    addresses = {i: cluster.address(i) for i in range(BROKERS)}
    assert len(set(addresses.values())) == BROKERS
    # each broker registered, and every broker names it, by its own host's address and rack
    for broker_id in range(BROKERS):
        registration = cluster.json(f"/brokers/ids/{broker_id}")
        assert (registration["host"], registration["rack"]) == (
            addresses[broker_id], RACKS[broker_id]), registration
        view = cluster.metadata(broker_id)
        assert {i: (b.host, b.port) for i, b in view.brokers.items()} == {
            i: (addresses[i], cluster.brokers[i].port) for i in range(BROKERS)}
    # rack-aware placement: two replicas of each partition, one in each rack
    cluster.create_topic("racked", partitions=6, replication_factor=2)
    for partition, replicas in cluster.assignment("racked").items():
        assert {RACKS[r] for r in replicas} == {"rack-a", "rack-b"}, (partition, replicas)

    topic, partitions, count = "spread", [0, 1, 2], 300
    cluster.create_topic(topic, partitions=len(partitions), replication_factor=3)
    until(lambda: all_in_sync(cluster, topic), 20, "a full ISR to start with")
    leaders = cluster.leaders(topic)
    assert sorted(leaders.values()) == [0, 1, 2], f"one partition led by each broker: {leaders}"
    with Producer(_bootstrap(cluster), acks="all", request_timeout_ms=10_000) as producer:
        futures = [producer.send(topic, f"{i}".encode(), partition=i % 3) for i in range(count)]
        producer.flush(60)
    assert all(f.exception() is None for f in futures)
    until(lambda: replicas_identical(cluster, topic, partitions), 30,
          f"every replica of {topic} holds the same messages")

    # each broker fetches from the other two: connections from its own address to theirs
    def fetching_between_hosts() -> bool:
        for broker_id, process in cluster.brokers.items():
            remote = {there for (here, there) in established(process.pid)
                      if here[0] == addresses[broker_id]}
            if not {cluster.brokers[j].address for j in addresses if j != broker_id} <= remote:
                return False
        return True

    until(fetching_between_hosts, 20, "each broker connected to the other brokers' hosts")

    # a consumer group in the root namespace reads everything and commits
    group = Consumer(_bootstrap(cluster), group_id="hosts", auto_offset_reset="earliest",
                     enable_auto_commit=False, session_timeout_ms=6_000,
                     heartbeat_interval_ms=500, default_api_timeout_ms=30_000)
    try:
        group.subscribe([topic])
        seen: list[bytes | None] = []

        def read_all() -> bool:
            seen.extend(record.value for record in group.poll(200))
            return len(seen) >= count

        until(read_all, 60, f"the group read {count} messages")
        group.commit()
        committed = {p: group.committed(TopicPartition(topic, p)) for p in partitions}
    finally:
        group.close()
    assert sorted(seen, key=lambda v: int(v or b"0")) == [f"{i}".encode() for i in range(count)]
    assert committed == {p: count // 3 for p in partitions}


def _replaced(cluster: Cluster, topic: str, victim: int,
              before: dict[int, dict[str, Any]]) -> bool:
    """Every partition led by another broker with a higher leader epoch, the victim in no
    ISR (its session expired: the controller acted on it)."""
    now = cluster.states(topic)
    return all(now[p]["leader"] not in (victim, -1)
               and now[p]["leader_epoch"] > before[p]["leader_epoch"]
               and victim not in now[p]["isr"] for p in before)


def _isolate_a_leader(cluster: HostCluster, victim: int, fault: str,
                      isolate: Callable[[], None], restore: Callable[[], None], *,
                      beside: bool) -> None:
    """The victim leads both partitions of a topic while an acks=all producer writes; it is
    cut off by ``isolate``: ZooKeeper expires its session, new leaders come from the ISR and
    acknowledgements go on through them; after ``restore`` it rejoins every ISR and its log
    is the leader's; no acknowledged message is lost. ``beside``: the victim's side has a
    client of its own, which sends it an acks=all produce it must not acknowledge alone."""
    others = [i for i in range(BROKERS) if i != victim]
    topic, partitions = f"{fault}-leader", [0, 1]
    cluster.create_topic(topic, len(partitions), 3, replica_assignment={
        0: [victim, *others], 1: [victim, *reversed(others)]})
    until(lambda: all_in_sync(cluster, topic), 20, "a full ISR to start with")
    producer = NumberedProducer(_bootstrap(cluster), topic, partitions)
    producer.start()
    zombie: dict[str, Any] | None = None
    try:
        until(lambda: producer.acked_count() >= 100, 30, f"acknowledged sends before the {fault}")
        before = cluster.states(topic)
        epoch = cluster.controller_epoch()
        session = cluster.zk.exists(f"/brokers/ids/{victim}")
        assert session is not None
        acked_before = producer.acked_count()
        isolated_at = time.monotonic()
        isolate()
        until(lambda: cluster.registered() == others, cluster.failover_bound,
              f"ZooKeeper expired broker {victim}'s session")
        expired_after = time.monotonic() - isolated_at
        until(lambda: _replaced(cluster, topic, victim, before), cluster.failover_bound,
              f"new leaders of {topic} from the ISR after the {fault}")
        replaced_after = time.monotonic() - isolated_at
        if victim == CONTROLLER:
            assert cluster.controller_id() in others
            assert cluster.controller_epoch() > epoch
        until(lambda: producer.acked_count() >= acked_before + 50, cluster.failover_bound,
              f"acks=all acknowledgements through the new leaders after the {fault}")
        if beside:
            zombie = _zombie_write(cluster, victim, topic)
        assert cluster.brokers[victim].running, f"broker {victim} exited"
        acked_during = producer.acked_count() - acked_before
        restored_at = time.monotonic()
        restore()
        until(lambda: all_in_sync(cluster, topic), cluster.failover_bound + 30,
              f"broker {victim} back in every ISR of {topic}")
        rejoined_after = time.monotonic() - restored_at
        stat = cluster.zk.exists(f"/brokers/ids/{victim}")
        assert stat is not None and stat.ephemeralOwner != session.ephemeralOwner, \
            "registered again, in a new session"
        cluster.wait_ready(30)
        acked_healed = producer.acked_count()
        until(lambda: producer.acked_count() >= acked_healed + 50, 30,
              f"acknowledgements after the {fault} healed")
    finally:
        cluster.network.heal()
        outcome = producer.stop(240)
    verdict = final_check(cluster, topic, partitions, outcome, f"{fault} of leader {victim}",
                          f"{fault}=1")
    print(f"{fault} of leader {victim}: session expired after {expired_after:.1f} s, new "
          f"leaders after {replaced_after:.1f} s (session timeout {cluster.session_timeout:g} "
          f"s); {acked_during} acknowledged through them while it was cut off; back in every "
          f"ISR {rejoined_after:.1f} s after the {fault} healed")
    assert verdict.acknowledged >= acked_healed + 50
    if zombie is not None:
        print(f"{fault}: a client beside the cut-off leader sent it an acks=all produce: "
              f"{zombie}")
        assert zombie["exit"] != 0 and zombie["sent"] == 0, \
            "the cut-off leader acknowledged acks=all alone"
        for broker_id, process in cluster.brokers.items():  # what it took alone is gone
            assert ZOMBIE_VALUE not in {v for _, v in replica_log(process, topic, 1)}, \
                f"broker {broker_id} kept what the cut-off leader took alone"


def _zombie_write(cluster: HostCluster, victim: int, topic: str) -> dict[str, Any]:
    """What ``odradek produce --acks all`` reports when run on the cut-off leader's own
    side of a split -- on its host -- sending one message straight to it."""
    host = cluster.network.hosts[broker_host(victim)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        host.command(sys.executable, "-m", "tooling.cli", "produce", topic, "--json",
                     "--bootstrap", cluster.brokers[victim].bootstrap, "--acks", "all",
                     "--partition", "1", "--api-timeout-ms", "10000",
                     "-X", "request_timeout_ms=3000", "-X", "delivery_timeout_ms=10000"),
        input=ZOMBIE_VALUE + b"\n", capture_output=True, timeout=60, env=env, check=False)
    report: dict[str, Any] = json.loads(done.stdout or b"{}")
    report["exit"] = done.returncode
    return report


@pytest.mark.timeout(180)
def test_a_leader_detached_from_the_bridge_is_replaced_and_rejoins_losing_nothing(
    host_cluster: Callable[[], HostCluster],
) -> None:
    cluster = _started(host_cluster)
    victim = 2  # a leader that is not the controller
    host = broker_host(victim)
    _isolate_a_leader(cluster, victim, "detach", lambda: cluster.network.detach(host),
                      lambda: cluster.network.attach(host), beside=False)


@pytest.mark.timeout(180)
def test_a_split_of_the_bridge_replaces_the_leader_on_the_small_side_losing_nothing(
    host_cluster: Callable[[], HostCluster],
) -> None:
    cluster = _started(host_cluster)
    small = [broker_host(CONTROLLER)]  # the controller, and the leader of the topic
    # the test's clients are on the large side: one that still reached the old leader would
    # keep taking its stale Metadata (it names itself leader) and send it everything
    large = [broker_host(1), broker_host(2), ZOOKEEPER_HOST, TEST_PROCESS]
    _isolate_a_leader(cluster, CONTROLLER, "split",
                      lambda: cluster.network.split(small, large), cluster.network.heal,
                      beside=True)
