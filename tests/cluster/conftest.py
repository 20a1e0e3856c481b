"""Fixtures for cluster integration tests: ``make_cluster`` starts N real brokers (ids 0..N-1)
registered in one ZooKeeper chroot, and ``Cluster`` reads what they wrote there.

    cluster = make_cluster(3)
    cluster.create_topic("t", partitions=6, replication_factor=3)
    cluster.brokers[cluster.controller_id()].kill()
    until(lambda: ..., cluster.failover_bound, "a new controller")

Every broker started through a cluster is stopped by its PID at the end of the test (SIGCONT
first, in case the test left one paused), and its log printed, as ``make_broker`` does.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from client.admin import Admin
from client.metadata import METADATA_VERSION, ClusterMetadata
from client.network import NetworkClient, parse_bootstrap
from protocol.apis import ApiKey
from tests.broker_process import BrokerProcess
from tests.cluster.link_proxy import LinkProxy
from tooling.local.cluster import ZooKeeperUnavailableError
from tooling.local.zookeeper_ensemble import ZooKeeperEnsemble

#: short sessions, so that a dead broker's registration goes within seconds
SESSION_TIMEOUT_MS = 4000
#: what every cluster broker gets unless a test overrides it
CLUSTER_SETTINGS: dict[str, Any] = {
    "zookeeper_session_timeout_ms": SESSION_TIMEOUT_MS,
    "zookeeper_connection_timeout_ms": 3000,
    "controlled_shutdown_retry_backoff_ms": 200,
    "controller_socket_timeout_ms": 5000,
    # no surprise preferred elections in the middle of a test
    "auto_leader_rebalance_enable": False,
    # a small __consumer_offsets: fewer logs to create on three brokers
    "offsets_topic_partitions": 3,
}


def until(condition: Callable[[], Any], timeout: float, what: str,
          interval: float = 0.05) -> Any:
    """Poll ``condition`` until it returns something truthy (returned); fail naming
    ``what`` after ``timeout`` seconds. Exceptions count as "not yet" (a broker restarting
    refuses connections) and the last one is named in the failure."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = condition()
        except Exception as exc:
            value, last_error = None, exc
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = f" (last error: {type(last_error).__name__}: {last_error})" if (
                last_error is not None) else ""
            raise AssertionError(f"not within {timeout:g} s: {what}{detail}")
        time.sleep(interval)


def metadata_from(bootstrap: str, topics: list[str] | None = None,
                  timeout: float = 10.0) -> ClusterMetadata:
    """One Metadata request answered by exactly the broker at ``bootstrap`` (the admin client
    would move on to whichever broker it likes)."""
    network = NetworkClient(bootstrap, client_id="cluster-test", request_timeout_ms=int(
        timeout * 1000))
    try:
        body = network.send(-1, ApiKey.METADATA, {
            "topics": topics, "allow_auto_topic_creation": False},
            api_version=METADATA_VERSION).result(timeout)
        return ClusterMetadata.from_response(body)
    finally:
        network.close()


class Cluster:
    """N brokers sharing ``zk_connect``, and a kazoo client of the test's own on it."""

    def __init__(self, root: Path, zk_connect: str, settings: Mapping[str, Any], *,
                 env: Mapping[str, str] | None = None, module: str = "broker") -> None:
        """``env`` and ``module`` go to every broker process (``tests.coordinator_faults``)."""
        self.root = root
        self.zk_connect = zk_connect
        self.settings = {**CLUSTER_SETTINGS, **settings, "zookeeper_connect": zk_connect}
        self.env = dict(env or {})
        self.module = module
        self.brokers: dict[int, BrokerProcess] = {}
        self.extra: list[BrokerProcess] = []  # processes outside the id map (a duplicate id)
        self._zk: KazooClient | None = None

    @property
    def session_timeout(self) -> float:
        return int(self.settings["zookeeper_session_timeout_ms"]) / 1000

    @property
    def failover_bound(self) -> float:
        """How long a kill -9 may take to be noticed and acted on: the session timeout, then
        a generous margin for the election and the requests (two cores, several brokers)."""
        return self.session_timeout + 10.0

    # ------------------------------------------------------------------------- brokers

    def broker(self, broker_id: int, **settings: Any) -> BrokerProcess:
        """A broker process for ``broker_id`` (not started), with this cluster's settings."""
        process = BrokerProcess(self.root / f"broker-{broker_id}", broker_id=broker_id,
                                settings={**self.settings, **settings}, env=self.env,
                                module=self.module)
        self.brokers[broker_id] = process
        return process

    def start(self, ids: list[int] | None = None) -> None:
        """Start brokers (all of them by default) in parallel: each prints its listening line
        once registered in ZooKeeper."""
        todo = [self.brokers[i] for i in (sorted(self.brokers) if ids is None else ids)]
        with ThreadPoolExecutor(max_workers=len(todo) or 1) as pool:
            for future in [pool.submit(p.start) for p in todo]:
                future.result()
        self.wait_ready()

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Until every running broker's Metadata names every running broker and the same
        controller: a broker prints its listening line once registered, before the
        controller's UpdateMetadata has reached it (and CreateTopics places replicas on the
        brokers its own metadata knows)."""
        def agreed() -> bool:
            running = sorted(self.running())
            controllers = set()
            for broker_id in running:
                view = self.metadata(broker_id)
                if sorted(view.brokers) != running:
                    return False
                controllers.add(view.controller_id)
            return len(controllers) == 1 and controllers <= set(running)

        until(agreed, timeout, f"brokers {sorted(self.running())} agree on the cluster")

    def running(self) -> dict[int, BrokerProcess]:
        return {i: p for i, p in self.brokers.items() if p.running}

    def any_running(self, but: int | None = None) -> BrokerProcess:
        return next(p for i, p in sorted(self.running().items()) if i != but)

    def stop_all(self) -> None:
        processes = [*self.brokers.values(), *self.extra]
        for process in processes:
            if process.running:
                os.kill(process.pid, signal.SIGCONT)  # a paused one would ignore SIGTERM
        with ThreadPoolExecutor(max_workers=len(processes) or 1) as pool:
            list(pool.map(lambda p: p.stop(), processes))
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None

    # ------------------------------------------------------------------------- ZooKeeper

    @property
    def zk(self) -> KazooClient:
        """The test's own ZooKeeper session on the cluster's chroot (made on first use)."""
        if self._zk is None:
            client = KazooClient(hosts=self.zk_connect, timeout=10)
            client.start(timeout=10)
            self._zk = client
        return self._zk

    def reset_zk(self) -> None:
        """Forget the kazoo client (after the test restarted ZooKeeper under it)."""
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None

    def json(self, path: str) -> Any:
        data, _ = self.zk.get(path)
        return json.loads(data)

    def controller_id(self) -> int | None:
        try:
            return int(self.json("/controller")["brokerid"])
        except NoNodeError:
            return None

    def controller_epoch(self) -> int:
        data, _ = self.zk.get("/controller_epoch")
        return int(data)

    def registered(self) -> list[int]:
        return sorted(int(i) for i in self.zk.get_children("/brokers/ids"))

    def assignment(self, topic: str) -> dict[int, list[int]]:
        doc = self.json(f"/brokers/topics/{topic}")
        return {int(p): list(r) for p, r in doc["partitions"].items()}

    def state(self, topic: str, partition: int) -> dict[str, Any]:
        return dict(self.json(f"/brokers/topics/{topic}/partitions/{partition}/state"))

    def states(self, topic: str) -> dict[int, dict[str, Any]]:
        return {p: self.state(topic, p) for p in sorted(self.assignment(topic))}

    def state_versions(self, topic: str) -> dict[int, tuple[bytes, int]]:
        """Each partition's state znode as (data, version)."""
        out = {}
        for p in sorted(self.assignment(topic)):
            data, stat = self.zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")
            out[p] = (data, stat.version)
        return out

    def leaders(self, topic: str) -> dict[int, int]:
        return {p: s["leader"] for p, s in self.states(topic).items()}

    # ------------------------------------------------------------------------- clients

    def metadata(self, broker_id: int, topics: list[str] | None = None) -> ClusterMetadata:
        return metadata_from(self.brokers[broker_id].bootstrap, topics)

    def create_topic(self, name: str, partitions: int, replication_factor: int, *,
                     via: int | None = None,
                     replica_assignment: Mapping[int, list[int]] | None = None) -> None:
        """CreateTopics through a running broker; returns once every partition has a leader
        in ZooKeeper and in the Metadata of every running broker. ``replica_assignment``
        places the replicas (the first of each list leads) instead of the broker."""
        process = self.brokers[via] if via is not None else self.any_running()
        with Admin(process.bootstrap, timeout_ms=20_000) as admin:
            admin.create_topic(name, partitions, replication_factor,
                               replica_assignment=replica_assignment)
        self.wait_for_leaders(name, partitions)

    def wait_for_leaders(self, name: str, partitions: int, timeout: float = 20.0) -> None:
        def led_everywhere() -> bool:
            for broker_id in self.running():
                topic = self.metadata(broker_id, [name]).topics.get(name)
                if topic is None or len(topic.partitions) != partitions or any(
                        p.leader < 0 for p in topic.partitions.values()):
                    return False
            return True

        until(led_everywhere, timeout, f"every partition of {name!r} led, as every broker says")


@pytest.fixture
def make_cluster(tmp_path: Path, zk_connect: str) -> Iterator[Callable[..., Cluster]]:
    """``make_cluster(n, settings={...}, per_broker={id: {...}}, start=True, env={...},
    module=...)``: brokers 0..n-1 in the test's own chroot (or ``zk_connect=`` another
    ZooKeeper), started in parallel."""
    clusters: list[Cluster] = []

    def factory(n: int, *, settings: Mapping[str, Any] | None = None,
                per_broker: Mapping[int, Mapping[str, Any]] | None = None,
                zk_connect: str = zk_connect, start: bool = True,
                env: Mapping[str, str] | None = None, module: str = "broker") -> Cluster:
        cluster = Cluster(tmp_path / f"cluster-{len(clusters)}", zk_connect, settings or {},
                          env=env, module=module)
        clusters.append(cluster)
        for broker_id in range(n):
            cluster.broker(broker_id, **(per_broker or {}).get(broker_id, {}))
        if start:
            cluster.start()
        return cluster

    yield factory
    for cluster in clusters:
        cluster.stop_all()
        for broker_id, process in sorted(cluster.brokers.items()):
            print(f"===== broker {broker_id} log ({process.data_dir}) =====\n"
                  f"{process.log_text()}")
        for process in cluster.extra:
            print(f"===== extra broker log ({process.data_dir}) =====\n{process.log_text()}")


# ------------------------------------------------------------------- a ZooKeeper ensemble

@pytest.fixture
def zookeeper_ensemble(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
    """Three ZooKeeper servers forming an ensemble for this test alone, started, for tests that
    kill its leader, a minority or a majority (the session's standalone ZooKeeper is shared by
    every other test). Stopped by PID at the end -- after ``make_cluster``'s brokers when the
    test asks for this fixture first; each server's log is printed then."""
    ensemble = ZooKeeperEnsemble(tmp_path / "ensemble")
    try:
        ensemble.start()
    except ZooKeeperUnavailableError as exc:
        pytest.fail(f"cluster tests need ZooKeeper: {exc}", pytrace=False)
    yield ensemble
    ensemble.stop()
    for server in ensemble:
        log = server.log_path.read_text(errors="replace") if server.log_path.exists() else ""
        print(f"===== zookeeper {server.server_id} log (last 4000 characters) =====\n"
              f"{log[-4000:]}")


# ------------------------------------------------------------------------------ cut links

@pytest.fixture
def make_link() -> Iterator[Callable[[tuple[str, int]], LinkProxy]]:
    """``make_link((host, port))``: a link to that address that the test can cut
    (tests/cluster/link_proxy.py). Asked for before ``make_cluster``, the links outlive the
    brokers: closed after they have stopped."""
    made: list[LinkProxy] = []

    def factory(upstream: tuple[str, int]) -> LinkProxy:
        made.append(LinkProxy(upstream))
        return made[-1]

    yield factory
    for link in made:
        link.close()


@pytest.fixture
def zk_links(make_link: Callable[[tuple[str, int]], LinkProxy], zk_connect: str
             ) -> dict[int, LinkProxy]:
    """A link to ZooKeeper for each of brokers 0..2 (``zookeeper_through`` gives the
    settings that make them use it)."""
    upstream = parse_bootstrap(zk_connect.split("/", 1)[0])[0]
    return {i: make_link(upstream) for i in range(3)}


def zookeeper_through(links: Mapping[int, LinkProxy], zk_connect: str
                      ) -> dict[int, dict[str, Any]]:
    """``make_cluster``'s ``per_broker``: broker i reaches ZooKeeper (same chroot) through
    ``links[i]``."""
    chroot = "/" + zk_connect.split("/", 1)[1]
    return {i: {"zookeeper_connect": link.address + chroot} for i, link in links.items()}


def free_port() -> int:
    """A port free on 127.0.0.1 now (for a process that must be told its port up front)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------ replication test helpers

class paused:
    """SIGSTOP the brokers for the block; SIGCONT them however it ends."""

    def __init__(self, *processes: BrokerProcess) -> None:
        self.processes = processes
        self.stopped: list[int] = []

    def __enter__(self) -> None:
        try:
            for process in self.processes:
                os.kill(process.pid, signal.SIGSTOP)
                self.stopped.append(process.pid)
            for pid in self.stopped:  # stopped for sure before the block goes on
                until(lambda pid=pid: _process_state(pid) in ("T", None), 5,
                      f"process {pid} stopped by SIGSTOP")
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc: object) -> None:
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                continue  # it died meanwhile
        self.stopped = []


def _process_state(pid: int) -> str | None:
    """The state letter of /proc/PID/stat ("T": stopped); None where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def replica_log(process: BrokerProcess, topic: str, partition: int
                ) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every whole message in one broker's own copy of a partition, read
    from its data directory (the broker may be running or dead; a partial tail is left out)."""
    from broker.log import layout
    from client.fetched_records import decode_chunk
    from client.records import TopicPartition

    directory = process.data_dir / layout.partition_dir_name(topic, partition)
    tp = TopicPartition(topic, partition)
    out: list[tuple[int, bytes | None]] = []
    for path in sorted(directory.glob("*.log")):  # every magic, as stored
        chunk = decode_chunk(tp, path.read_bytes(), 0)
        out += [(r.offset, r.value) for r in chunk.records]
    return out


def read_partitions(bootstrap: str, topic: str, partitions: list[int], timeout: float = 30.0
                    ) -> dict[int, list[tuple[int, bytes | None]]]:
    """Everything a fresh consumer reads from each partition, from the earliest offset up to
    the latest (the high watermark) as the leaders answer when it starts."""
    from client.consumer import Consumer
    from client.records import TopicPartition

    tps = [TopicPartition(topic, p) for p in partitions]
    consumer = Consumer(bootstrap, auto_offset_reset="earliest", retry_backoff_ms=100,
                        request_timeout_ms=5_000, default_api_timeout_ms=int(timeout * 1000))
    try:
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        got: dict[int, list[tuple[int, bytes | None]]] = {p: [] for p in partitions}
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout:g} s: {topic} read up to {ends}")
            for record in consumer.poll(200):
                if record.offset < ends[TopicPartition(topic, record.partition)]:
                    got[record.partition].append((record.offset, record.value))
        return got
    finally:
        consumer.close()
