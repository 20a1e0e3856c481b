"""One chaos run: a cluster, its clients, overlapping faults drawn from a seed, then the
cluster healed and what happened written down for the checker (tests/chaos/checker.py).

One seed reproduces one run's schedule: which faults, on which targets, when and for how long
(what the cluster does meanwhile is up to it). The run directory holds the history files the
checker reads, every client's own file, the brokers' and ZooKeeper's logs, and
``schedule.jsonl`` (faults.jsonl in the history: each start and end).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from client.group_admin import GroupAdmin
from client.records import TopicPartition
from tests.chaos import history
from tests.chaos.faults import MENU, Fault, Stage, zookeeper_host
from tests.chaos.history import (
    FinalLog,
    GroupOutcome,
    ReplicaVerdict,
    StaleMetadata,
    append_record,
    write_records,
)
from tests.chaos.workload import GROUPS, Workload, last_member_id, write_history
from tests.cluster.conftest import Cluster, free_port, metadata_from, read_partitions, until
from tests.cluster.hosts import HostCluster, broker_host
from tests.cluster.link_proxy import LinkProxy
from tests.netns import PrivateNetwork
from tooling.local.zookeeper_ensemble import ZooKeeperEnsemble
from tooling.replica_verification import verify_replicas

TOPIC = "chaos"
#: the ports brokers listen on in hosts mode, each host having its own
NATIVE_PORT, KAFKA_PORT = 9092, 9093
#: what describe_group calls a group that is not rebalancing
STABLE = ("Stable", "Steady")
#: short sessions and lag bounds, so a fault is acted on within seconds
SETTINGS: dict[str, Any] = {
    "zookeeper_session_timeout_ms": 3000,
    "replica_lag_time_max_ms": 3000,
    "min_insync_replicas": 2,
    "default_replication_factor": 3,
    "offsets_topic_replication_factor": 3,
    "maintenance_interval_ms": 500,
    "group_min_session_timeout_ms": 200,
    "group_initial_rebalance_delay_ms": 500,
    "unclean_leader_election_enable": False,
}


@dataclass
class Config:
    seed: int
    faults: int = 8
    brokers: int = 3
    zookeepers: int = 3  # servers in the ensemble
    #: each broker and ZooKeeper server on a host of its own (network namespaces, as root)
    hosts: bool = False
    partitions: int = 6
    max_partitions: int = 8
    producers: int = 2
    members: int = 3  # per group
    rate: float = 100.0  # messages a second, per producer
    mean_gap_s: float = 3.0  # between fault starts
    max_overlap: int = 2  # faults under way at once
    log: Callable[[str], None] = field(default=print)


@dataclass
class Running:
    fault: Fault
    started: float
    ends: float


class Campaign:
    """``Campaign(config, run_dir).run()``: the run; the history is in ``run_dir``."""

    def __init__(self, config: Config, run_dir: Path) -> None:
        self.config = config
        self.run_dir = run_dir
        self.rng = random.Random(config.seed)
        self.ends: dict[TopicPartition, int] = {}  # the logs' ends once producers stopped
        self.started = 0

    def _record(self, fault: Fault, phase: Literal["start", "end"], detail: str) -> None:
        append_record(self.run_dir, history.Fault(
            t=time.monotonic(), fault=fault.kind, target=fault.target, phase=phase,
            detail=detail))
        self.config.log(f"  {phase:5} {fault.kind:18} {fault.target:16} {detail}")

    # ------------------------------------------------------------------------------ run

    def run(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        links: list[LinkProxy] = []
        network: PrivateNetwork | None = None
        zookeeper: ZooKeeperEnsemble | None = None
        workload: Workload | None = None
        cluster: Cluster | None = None
        try:
            if self.config.hosts:
                network = PrivateNetwork(self._host_names()).open()
            zookeeper = self._zookeeper(network).start()
            if network is None:
                stage = self._stage_on_loopback(zookeeper, links)
            else:
                stage = self._stage_on_hosts(zookeeper, network)
            cluster, workload = stage.cluster, stage.workload
            self._clients(stage)
            self._faults(stage)
            self._heal(stage)
            self._final(stage)
        finally:
            if workload is not None:
                workload.stop_everything()
                write_history(workload)
            if cluster is not None:
                cluster.stop_all()
                for broker_id, process in sorted(cluster.brokers.items()):
                    (self.run_dir / f"broker-{broker_id}.log").write_text(process.log_text())
            for link in links:
                link.close()
            if zookeeper is not None:
                zookeeper.stop()
            if network is not None:
                network.close()

    def _host_names(self) -> list[str]:
        return [*(zookeeper_host(n) for n in range(1, self.config.zookeepers + 1)),
                *(broker_host(b) for b in range(self.config.brokers))]

    def _zookeeper(self, network: PrivateNetwork | None) -> ZooKeeperEnsemble:
        hosts = None if network is None else [
            (network.hosts[zookeeper_host(n)].address, network.hosts[zookeeper_host(n)].command())
            for n in range(1, self.config.zookeepers + 1)]
        return ZooKeeperEnsemble(self.run_dir / "zookeeper", self.config.zookeepers,
                                 tick_time_ms=500, hosts=hosts)

    def _stage_on_loopback(self, zookeeper: ZooKeeperEnsemble, links: list[LinkProxy]
                           ) -> Stage:
        """Every process on 127.0.0.1; the links it can cut are loopback proxies: one from
        each broker to each ZooKeeper server, and one in front of each of its listeners."""
        config = self.config
        chroot = f"/chaos-{config.seed}"
        cluster = Cluster(self.run_dir / "cluster", zookeeper.connect + chroot, SETTINGS)
        zk_links: dict[int, list[LinkProxy]] = {}
        broker_links: dict[int, list[LinkProxy]] = {}
        ports = {}
        for broker_id in range(config.brokers):
            zk_links[broker_id] = [LinkProxy(("127.0.0.1", server.port))
                                   for server in zookeeper.servers]
            ports[broker_id] = free_port()
            kafka_port = free_port()
            native, kafka = (LinkProxy(("127.0.0.1", ports[broker_id])),
                             LinkProxy(("127.0.0.1", kafka_port)))
            broker_links[broker_id] = [native, kafka]
            links += [*zk_links[broker_id], native, kafka]
            zk_connect = ",".join(link.address for link in zk_links[broker_id])
            cluster.broker(broker_id, zookeeper_connect=zk_connect + chroot,
                           advertised_listeners=f"PLAINTEXT://{native.address}",
                           kafka_listeners=f"PLAINTEXT://127.0.0.1:{kafka_port}",
                           kafka_advertised_listeners=f"PLAINTEXT://{kafka.address}")
        for broker_id, process in cluster.brokers.items():
            process.start(port=ports[broker_id])
        bootstrap = ",".join(links_[0].address for links_ in broker_links.values())
        kafka_bootstrap = ",".join(links_[1].address for links_ in broker_links.values())
        workload = Workload(self.run_dir, bootstrap, TOPIC, kafka_bootstrap, rate=config.rate)
        return Stage(cluster, zookeeper, zk_links, broker_links, workload, TOPIC,
                     config.partitions, config.max_partitions)

    def _stage_on_hosts(self, zookeeper: ZooKeeperEnsemble, network: PrivateNetwork) -> Stage:
        """Each broker and ZooKeeper server on a host of its own (tests/netns.py), listening
        on Kafka's ports at its own address, in a rack of its own; the clients run here. The
        network's faults are real partitions: a host detached, or split from some peers."""
        config = self.config
        chroot = f"/chaos-{config.seed}"
        racks = {b: f"rack-{'abc'[b % 3]}" for b in range(config.brokers)}
        cluster = HostCluster(self.run_dir / "cluster", zookeeper.connect + chroot, SETTINGS,
                              network, racks)
        for broker_id in range(config.brokers):
            address = cluster.address(broker_id)
            cluster.broker(broker_id, kafka_listeners=f"PLAINTEXT://{address}:{KAFKA_PORT}")
        for process in cluster.brokers.values():
            process.start(port=NATIVE_PORT)
        addresses = [cluster.address(b) for b in sorted(cluster.brokers)]
        workload = Workload(self.run_dir, ",".join(f"{a}:{NATIVE_PORT}" for a in addresses),
                            TOPIC, ",".join(f"{a}:{KAFKA_PORT}" for a in addresses),
                            rate=config.rate)
        return Stage(cluster, zookeeper, {}, {}, workload, TOPIC, config.partitions,
                     config.max_partitions, network=network)

    def _clients(self, stage: Stage) -> None:
        """The topic, the producers and both groups, once every broker is up."""
        config, cluster, workload = self.config, stage.cluster, stage.workload
        cluster.wait_ready()
        cluster.create_topic(TOPIC, config.partitions, 3)
        until(lambda: _all_in_sync(cluster), 30, "a full ISR to start with")
        for index in range(config.producers):
            workload.start_producer(kafka=index % 2 == 1)  # every other one is librdkafka
        for group in GROUPS:
            for _ in range(config.members):
                workload.start_member(group)
        self._wait_groups(workload, 60, "both groups formed")

    def _faults(self, stage: Stage) -> None:
        """Start ``config.faults`` faults at random gaps, overlapping up to ``max_overlap``,
        each ended after its drawn duration."""
        config, rng = self.config, self.rng
        running: list[Running] = []
        next_start = time.monotonic() + rng.expovariate(1 / config.mean_gap_s)
        kinds, weights = zip(*MENU, strict=True)
        while self.started < config.faults or running:
            now = time.monotonic()
            for item in [r for r in running if r.ends <= now]:
                running.remove(item)
                self._end(stage, item.fault)
            if self.started < config.faults and now >= next_start:
                next_start = now + rng.expovariate(1 / config.mean_gap_s)
                if len(running) < config.max_overlap:
                    kind = rng.choices(kinds, weights)[0]
                    low, high = kind.duration
                    duration = rng.uniform(low, high)
                    fault = kind.start(stage, rng)
                    if fault is not None:
                        self.started += 1
                        stage.busy.add(fault.target)
                        self._record(fault, "start", fault.detail)
                        if fault.end is None:
                            stage.busy.discard(fault.target)
                        else:
                            running.append(Running(fault, now, now + duration))
            time.sleep(0.05)  # the schedule's resolution

    def _end(self, stage: Stage, fault: Fault) -> None:
        assert fault.end is not None
        stage.busy.discard(fault.target)
        self._record(fault, "end", fault.end())  # a deferred start keeps its target busy
        for started in stage.start_waiting():
            self.config.log(f"        {started}")

    # --------------------------------------------------------------------------- the end

    def _heal(self, stage: Stage) -> None:
        """Every broker running and in every ISR, the clients stopped and the groups drained:
        the state the checker's final reads are taken in."""
        cluster, workload = stage.cluster, stage.workload
        self.config.log("healing: every broker in every ISR")

        def all_started() -> bool:
            for started in stage.start_waiting():
                self.config.log(f"        {started}")
            return not stage.to_start

        until(all_started, 120, "every broker started again")
        until(lambda: _all_in_sync(cluster), cluster.failover_bound + 90,
              "every broker back in every ISR")
        # every broker names the leaders ZooKeeper names, or the stale ones are a finding
        stale: list[StaleMetadata] = []

        def agreed() -> bool:
            stale[:] = _stale_metadata(stage)
            return not stale

        _waited(agreed, 60)
        write_records(self.run_dir / StaleMetadata.FILE, stale)
        for producer in workload.producers:
            producer.stop()
        ends = _end_offsets(workload.bootstrap, TOPIC)
        self.config.log(f"producers stopped; end offsets {sum(ends.values())}")
        self.ends = ends
        # a group that does not settle or drain is a finding: the checker reports it from
        # groups.jsonl, so these waits end quietly
        _waited(lambda: _groups_stable(workload), 120)
        _waited(lambda: not any(_behind(workload.bootstrap, g, ends) for g in GROUPS), 120)

    def _wait_groups(self, workload: Workload, timeout: float, what: str) -> None:
        until(lambda: _groups_stable(workload), timeout, what)

    def _final(self, stage: Stage) -> None:
        """final_logs.jsonl, replicas.jsonl and groups.jsonl, from the healed cluster."""
        workload = stage.workload
        groups = [replace(_group_state(workload, g),
                          behind=_behind(workload.bootstrap, g, self.ends)) for g in GROUPS]
        for member in workload.live_members():
            workload.close_member(member)
        ends = _end_offsets(workload.bootstrap, TOPIC)
        partitions = sorted(tp.partition for tp in ends)
        logs = read_partitions(workload.bootstrap, TOPIC, partitions, timeout=120)
        starts = _start_offsets(workload.bootstrap, TOPIC)
        write_records(self.run_dir / FinalLog.FILE, [
            FinalLog(topic=TOPIC, partition=p,
                     log_start_offset=starts[TopicPartition(TOPIC, p)],
                     high_watermark=ends[TopicPartition(TOPIC, p)],
                     records=tuple((o, (v or b"").decode()) for o, v in logs[p]))
            for p in partitions])
        write_records(self.run_dir / ReplicaVerdict.FILE,
                      compare_replicas(workload.bootstrap, TOPIC))
        write_records(self.run_dir / GroupOutcome.FILE, groups)


# ------------------------------------------------------------------------------ reading

def _all_in_sync(cluster: Cluster) -> bool:
    try:
        topics = cluster.zk.get_children("/brokers/topics")
        return all(sorted(s["isr"]) == sorted(cluster.brokers) and s["leader"] >= 0
                   for t in topics for s in cluster.states(t).values())
    except Exception:  # ZooKeeper restarting: not yet
        cluster.reset_zk()
        return False


def _end_offsets(bootstrap: str, topic: str) -> dict[TopicPartition, int]:
    return _offsets(bootstrap, topic, latest=True)


def _start_offsets(bootstrap: str, topic: str) -> dict[TopicPartition, int]:
    return _offsets(bootstrap, topic, latest=False)


def _offsets(bootstrap: str, topic: str, *, latest: bool) -> dict[TopicPartition, int]:
    """Every partition's log end (``latest``) or log start offset, as its leader says."""
    from client import Consumer

    with Consumer(bootstrap, request_timeout_ms=5_000) as consumer:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for(topic))]
        return consumer.end_offsets(tps) if latest else consumer.beginning_offsets(tps)


def _stale_metadata(stage: Stage) -> list[StaleMetadata]:
    """Each broker's Metadata, asked of it alone, against ZooKeeper's partition states: the
    partitions where a broker names another leader or leader epoch."""
    states = {(topic, p): s for topic in stage.cluster.zk.get_children("/brokers/topics")
              for p, s in stage.cluster.states(topic).items()}
    addresses = stage.workload.bootstrap.split(",")  # broker i's is the i-th
    stale = []
    for broker, address in enumerate(addresses):
        try:
            view = metadata_from(address, sorted({t for t, _ in states}))
        except Exception:
            view = None
        for (topic, p), state in sorted(states.items()):
            info = None if view is None else view.topics.get(topic)
            part = None if info is None else info.partitions.get(p)
            leader, epoch = (-1, -1) if part is None else (part.leader, part.leader_epoch)
            if (leader, epoch) != (state["leader"], state["leader_epoch"]):
                stale.append(StaleMetadata(
                    broker=broker, topic=topic, partition=p, leader=leader, leader_epoch=epoch,
                    zookeeper_leader=state["leader"],
                    zookeeper_leader_epoch=state["leader_epoch"]))
    return stale


def _behind(bootstrap: str, group: str, ends: dict[TopicPartition, int]
            ) -> tuple[tuple[str, int, int, int], ...]:
    """The partitions the group has not committed up to ``ends``: (topic, partition,
    committed, end)."""
    try:
        with GroupAdmin(bootstrap, timeout_ms=5_000, request_timeout_ms=5_000) as admin:
            committed = admin.committed_offsets(group)
    except Exception:  # asked again; at the end, every partition counts as behind
        committed = {}
    found = {tp: -1 if committed.get(tp) is None else committed[tp].offset for tp in ends}
    return tuple((tp.topic, tp.partition, found[tp], end)
                 for tp, end in sorted(ends.items()) if end > 0 and found[tp] < end)


def _waited(condition: Callable[[], bool], timeout: float) -> bool:
    """Whether ``condition`` came true within ``timeout`` (asked every 0.2 s)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _group_state(workload: Workload, group: str) -> GroupOutcome:
    """The group as its coordinator describes it, beside the member ids the run's live
    members last had."""
    expected = tuple(sorted(filter(None, map(last_member_id, workload.live_members(group)))))
    try:
        with GroupAdmin(workload.bootstrap, timeout_ms=5_000,
                        request_timeout_ms=5_000) as admin:
            found = admin.describe_group(group)
    except Exception as exc:
        return GroupOutcome(group=group, state=f"unknown ({type(exc).__name__})",
                            generation=-1, members=(), expected_members=expected)
    return GroupOutcome(group=group, state=found.state, generation=found.generation,
                        members=tuple(sorted(m.member_id for m in found.members)),
                        expected_members=expected)


def _groups_stable(workload: Workload) -> bool:
    return all(_stable(_group_state(workload, g)) for g in GROUPS)


def _stable(outcome: GroupOutcome) -> bool:
    return (outcome.state in STABLE and outcome.members == outcome.expected_members
            and len(outcome.members) > 0)


def compare_replicas(bootstrap: str, topic: str) -> list[ReplicaVerdict]:
    """Each partition's replicas compared byte for byte below the high watermark by the
    operator's tool (``odradek cluster verify-replicas``), as checker records."""
    return [ReplicaVerdict(topic=v.topic, partition=v.partition, agree=v.difference is None,
                           first_difference=None if v.difference is None else str(v.difference),
                           unanswered=tuple(sorted(v.not_answering)))
            for v in verify_replicas(bootstrap, [topic])]
