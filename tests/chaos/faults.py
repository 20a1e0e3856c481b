"""The campaign's fault menu. Each fault has a target, a start and (for most) an end that
undoes it; the scheduler (tests/chaos/campaign.py) overlaps them. Faults are real: SIGKILL,
SIGSTOP/SIGCONT, SIGTERM, links held by the loopback proxy, ZooKeeper killed, clients killed,
and admin requests (a reassignment, a preferred election, more partitions) sent while other
faults are under way."""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from client import Admin
from client.records import TopicPartition
from tests.broker_process import BrokerStartError
from tests.chaos.workload import GROUPS, Workload
from tests.cluster.conftest import Cluster
from tests.cluster.hosts import broker_host
from tests.cluster.link_proxy import LinkProxy
from tests.netns import TEST_PROCESS, PrivateNetwork
from tooling.local.zookeeper_ensemble import EnsembleServer, ZooKeeperEnsemble


@dataclass
class Stage:
    """Everything a fault acts on."""

    cluster: Cluster
    zookeeper: ZooKeeperEnsemble
    zk_links: dict[int, list[LinkProxy]]  # broker -> its links to each ZooKeeper server
    #: broker -> the links everyone reaches it by (its listener, its Kafka listener)
    broker_links: dict[int, list[LinkProxy]]
    workload: Workload
    topic: str
    partitions: int  # the topic's, as far as this run knows (ZooKeeper may be down)
    max_partitions: int
    #: targets a running fault holds ("broker:1", "zookeeper", "group:auto", ...)
    busy: set[str] = field(default_factory=set)
    #: brokers to start again once they can register (ZooKeeper back to a quorum)
    to_start: set[int] = field(default_factory=set)
    quorum_lost: bool = False
    #: hosts mode: every broker and ZooKeeper server on a host of its own
    network: PrivateNetwork | None = None

    def cut(self, broker: int, from_zookeeper: bool) -> Callable[[], str] | None:
        """Cut a broker off from ZooKeeper (``from_zookeeper``) or from everyone else (its
        clients and the other brokers); the function that heals it, or None when the network
        is busy with another fault. On loopback the broker's proxies hold their bytes; on
        hosts the network is split, so one such fault runs at a time."""
        if self.network is None:
            links = self.zk_links[broker] if from_zookeeper else self.broker_links[broker]
            for link in links:
                link.cut()

            def restore() -> str:
                for link in links:
                    link.restore()
                return "restored"

            return restore
        if "network" in self.busy:
            return None
        here = broker_host(broker)
        there = ([zookeeper_host(s.server_id) for s in self.zookeeper.servers]
                 if from_zookeeper else
                 [*(broker_host(b) for b in self.cluster.brokers if b != broker), TEST_PROCESS])
        self.network.split([here], there)
        return self.hold_network()

    def hold_network(self) -> Callable[[], str]:
        """Mark the network busy; the function that heals it and frees it."""
        self.busy.add("network")

        def heal() -> str:
            assert self.network is not None
            self.network.heal()
            self.busy.discard("network")
            return "healed"

        return heal

    def start_broker(self, broker: int) -> str:
        """Start a stopped broker again, or leave it to ``start_waiting`` when it cannot
        register now (no ZooKeeper quorum): its target stays busy until it runs."""
        process = self.cluster.brokers[broker]
        if not self.quorum_lost:
            try:
                process.start(port=process.port)
                self.to_start.discard(broker)
                return "started again"
            except BrokerStartError as exc:
                reason = str(exc).splitlines()[0]
        else:
            reason = "ZooKeeper has no quorum"
        self.to_start.add(broker)
        self.busy.add(f"broker:{broker}")
        return f"start deferred: {reason}"

    def start_waiting(self) -> list[str]:
        """Start the brokers whose start was deferred, if ZooKeeper has a quorum again."""
        done = []
        for broker in sorted(self.to_start):
            if self.quorum_lost:
                break
            detail = self.start_broker(broker)
            if broker not in self.to_start:
                self.busy.discard(f"broker:{broker}")
                done.append(f"broker {broker} {detail}")
        return done

    def admin(self) -> Admin:
        return Admin(self.workload.bootstrap, timeout_ms=10_000, request_timeout_ms=5_000)

    def brokers_down(self) -> int:
        return sum(1 for t in self.busy if t.startswith("broker:"))


@dataclass
class Fault:
    """A fault under way: ``end`` undoes it (None for one that is over at once)."""

    kind: str
    target: str
    detail: str
    end: Callable[[], str] | None


class Kind:
    """One entry of the menu: ``start`` picks a free target (or returns None) and starts."""

    name = ""
    #: how long it lasts, drawn uniformly (seconds); (0, 0) for a one-off request
    duration: tuple[float, float] = (0.0, 0.0)

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        raise NotImplementedError


def _free_broker(stage: Stage, rng: random.Random, max_down: int) -> int | None:
    if stage.brokers_down() >= max_down:
        return None
    free = [b for b in sorted(stage.cluster.brokers) if f"broker:{b}" not in stage.busy]
    return rng.choice(free) if free else None


class BrokerKill(Kind):
    """kill -9, then the same broker started again on its data."""

    name, duration = "broker_kill", (2.0, 8.0)

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        broker = _free_broker(stage, rng, max_down=2)
        if broker is None:
            return None
        stage.cluster.brokers[broker].kill()
        return Fault(self.name, f"broker:{broker}", "SIGKILL",
                     lambda: stage.start_broker(broker))


class BrokerPause(Kind):
    """SIGSTOP past the ZooKeeper session, then SIGCONT: a zombie that wakes up."""

    name, duration = "broker_pause", (4.0, 8.0)

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        broker = _free_broker(stage, rng, max_down=2)
        if broker is None:
            return None
        pid = stage.cluster.brokers[broker].pid
        os.kill(pid, signal.SIGSTOP)

        def end() -> str:
            os.kill(pid, signal.SIGCONT)
            return "SIGCONT"

        return Fault(self.name, f"broker:{broker}", "SIGSTOP", end)


class BrokerTerm(Kind):
    """SIGTERM (controlled shutdown), then started again."""

    name, duration = "broker_term", (2.0, 6.0)

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        broker = _free_broker(stage, rng, max_down=1)
        if broker is None:
            return None
        process = stage.cluster.brokers[broker]
        os.kill(process.pid, signal.SIGTERM)

        def end() -> str:
            code = process.wait(60)  # a controlled shutdown that hangs is killed
            return f"exited {code}, {stage.start_broker(broker)}"

        return Fault(self.name, f"broker:{broker}", "SIGTERM", end)


class ZooKeeperCut(Kind):
    """A broker cut off from every ZooKeeper server (clients and the other brokers still
    reach it)."""

    name, duration = "zookeeper_cut", (1.0, 8.0)

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        broker = _free_broker(stage, rng, max_down=2)
        heal = None if broker is None else stage.cut(broker, from_zookeeper=True)
        if broker is None or heal is None:
            return None
        return Fault(self.name, f"broker:{broker}", "cut from ZooKeeper", heal)


class BrokerCut(Kind):
    """A broker cut off from its clients (native and Kafka's) and the other brokers, while
    it keeps its ZooKeeper session."""

    name, duration = "broker_cut", (2.0, 8.0)

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        broker = _free_broker(stage, rng, max_down=1)
        heal = None if broker is None else stage.cut(broker, from_zookeeper=False)
        if broker is None or heal is None:
            return None
        return Fault(self.name, f"broker:{broker}", "cut from clients and brokers", heal)


class HostDetach(Kind):
    """Hosts mode: a broker's host taken off the network -- from ZooKeeper, its peers and
    its clients at once; their connections time out, none is closed."""

    name, duration = "host_detach", (2.0, 8.0)

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        if stage.network is None or "network" in stage.busy:
            return None
        broker = _free_broker(stage, rng, max_down=1)
        if broker is None:
            return None
        stage.network.detach(broker_host(broker))
        return Fault(self.name, f"broker:{broker}", "host detached",
                     stage.hold_network())


def _zookeeper_back(stage: Stage, servers: list[EnsembleServer]) -> str:
    """Start ``servers`` again on their data, together (one alone has no quorum to join)."""
    for server in servers:
        server.spawn()
    for server in servers:
        server.wait_serving()
    stage.cluster.reset_zk()
    return f"{', '.join(str(s.server_id) for s in servers)} started again"


class ZooKeeperKill(Kind):
    """kill -9 of one ZooKeeper server -- its leader half of the time -- then started again:
    the ensemble keeps its quorum."""

    name, duration = "zookeeper_kill", (1.0, 6.0)

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        if "zookeeper" in stage.busy:
            return None
        leader = stage.zookeeper.leader()
        server = leader if leader is not None and rng.random() < 0.5 else rng.choice(
            stage.zookeeper.servers)
        role = "the leader" if server is leader else "a follower"
        server.kill()
        return Fault(self.name, "zookeeper", f"server {server.server_id} ({role}) SIGKILL",
                     lambda: _zookeeper_back(stage, [server]))


class ZooKeeperMajorityKill(Kind):
    """kill -9 of a majority of the ensemble: no quorum, so nothing can be elected or
    written to ZooKeeper until it returns; brokers keep serving the leaders they have."""

    name, duration = "zookeeper_majority_kill", (2.0, 6.0)

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        if "zookeeper" in stage.busy:
            return None
        servers = rng.sample(stage.zookeeper.servers, stage.zookeeper.quorum)
        for server in servers:
            server.kill()
        stage.quorum_lost = True

        def end() -> str:
            detail = _zookeeper_back(stage, servers)
            stage.quorum_lost = False
            return detail

        ids = ", ".join(str(s.server_id) for s in servers)
        return Fault(self.name, "zookeeper", f"servers {ids} SIGKILL", end)


class MemberKill(Kind):
    """kill -9 of a consumer group member; a new member joins in its place."""

    name, duration = "member_kill", (1.0, 6.0)

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        live = [m for m in stage.workload.live_members()
                if f"group:{m.group}" not in stage.busy]
        if not live:
            return None
        member = rng.choice(live)
        stage.workload.kill_member(member)

        def end() -> str:
            new = stage.workload.start_member(member.group)
            return f"{new.name} started"

        return Fault(self.name, f"group:{member.group}", f"{member.name} SIGKILL", end)


class ProducerKill(Kind):
    """kill -9 of a producer (what it had in flight has no outcome); a new one starts."""

    name, duration = "producer_kill", (0.5, 3.0)

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        live = [p for p in stage.workload.live_producers()
                if f"producer:{p.name}" not in stage.busy]
        if not live:
            return None
        producer = rng.choice(live)
        producer.kill()

        def end() -> str:
            return f"{stage.workload.start_producer(kafka=producer.kafka).name} started"

        return Fault(self.name, f"producer:{producer.name}", "SIGKILL", end)


def _request(stage: Stage, name: str, what: str, send: Callable[[Admin], Any]) -> Fault:
    """A one-off admin request; refused or timed out is part of the story, not a failure."""
    try:
        with stage.admin() as admin:
            send(admin)
        outcome = "accepted"
    except Exception as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    return Fault(name, "cluster", f"{what}: {outcome}", None)


class Reassignment(Kind):
    """A partition's replicas reordered or moved (a new preferred leader) mid-fault."""

    name = "reassignment"

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        partition = rng.randrange(stage.partitions)
        replicas = rng.sample(sorted(stage.cluster.brokers), 3)
        return _request(stage, self.name, f"{stage.topic}-{partition} to {replicas}",
                        lambda admin: admin.reassign_partitions(
                            {(stage.topic, partition): replicas}))


class PreferredElection(Kind):
    """A preferred-leader election of every partition of the topic."""

    name = "preferred_election"

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        tps = [TopicPartition(stage.topic, p) for p in range(stage.partitions)]
        return _request(stage, self.name, f"{stage.topic} ({stage.partitions} partitions)",
                        lambda admin: admin.elect_leaders(tps))


class AddPartitions(Kind):
    """The topic grows by one partition (up to a bound), while producers and groups run."""

    name = "add_partitions"

    def start(self, stage: Stage, rng: random.Random) -> Fault | None:
        if stage.partitions >= stage.max_partitions:
            return None
        stage.partitions += 1  # asked for: a request that timed out may still be carried out
        return _request(stage, self.name, f"{stage.topic} to {stage.partitions}",
                        lambda admin: admin.create_partitions(stage.topic, stage.partitions))


def zookeeper_host(server_id: int) -> str:
    """Hosts mode: the host of ZooKeeper server ``server_id``."""
    return f"zk-{server_id}"


#: the menu, with how often each kind is drawn
MENU: list[tuple[Kind, int]] = [
    (BrokerKill(), 4), (BrokerPause(), 2), (BrokerTerm(), 2), (ZooKeeperCut(), 2),
    (BrokerCut(), 2), (HostDetach(), 2), (ZooKeeperKill(), 2), (ZooKeeperMajorityKill(), 1),
    (MemberKill(), 3), (ProducerKill(), 1),
    (Reassignment(), 1), (PreferredElection(), 1), (AddPartitions(), 1),
]
assert len(GROUPS) == 2  # MemberKill holds one group at a time, so each keeps members
