"""Availability across broker failures in a cluster: ``python -m benchmarks.cluster [--quick]``.

Starts a standalone ZooKeeper (``tooling.local.cluster.ZooKeeperServer``) and three brokers with
``zookeeper_session_timeout_ms`` = 6000 (``--session-timeout-ms``; automatic leader rebalance
off, every other setting at its default), then prints one JSON line per scenario:

- ``leader_failover`` trigger=kill: a topic of 100 partitions (30 with ``--quick``), RF 3. The
  broker leading most of them, other than the controller, gets SIGKILL. For each partition it
  led: milliseconds from the signal until a produce (acks=1, one record) succeeds at another
  broker (``produce_*_ms``); until a Metadata answer from a live broker names a live leader
  (``metadata_*_ms``); and the gap between the last produce the old leader accepted (probed
  since before the signal) and the first the new leader accepted (``gap_*_ms``). Max and median
  over those partitions. The killed broker is restarted afterwards.
- ``leader_failover`` trigger=sigterm: the same on a new topic with SIGTERM (controlled
  shutdown: the controller moves the broker's leaderships, then it exits;
  ``shutdown_time_ms`` is SIGTERM until the process has exited). ``overlap_partitions`` counts
  partitions the old leader still accepted a produce for after the new one had.
- ``controller_failover`` trigger=kill: SIGKILL of the controller. Milliseconds until
  ``/controller`` names another broker with a higher ``/controller_epoch`` (read with kazoo every
  10 ms), and until a CreateTopics request (1 partition, RF 2) sent to a surviving broker at the
  moment of the kill is answered without error (the broker writes the topic to ZooKeeper at once
  and answers when its metadata shows a leader, which needs the new controller).

Probing: raw Produce and Metadata requests through ``client.network``; to each broker at most
one request in flight and at most one every 10 ms, so the figures are good to about 10 ms plus
a round trip. Times are taken when the answer arrives. This measures availability (acks=1),
not what data survives a change of leader.

Each line carries Kafka's documented behaviour in ``note``, and a kill line the window in which
ZooKeeper can notice the kill (``zk_detection_window_ms``), which binds Kafka in ZooKeeper mode
with the same settings just as it binds odradek: a session expires ``zookeeper_session_timeout_ms``
after the server last heard from the client, which pings when idle for a third of the timeout
(kazoo and ZooKeeper's Java client alike), and the server expires sessions in buckets of its
``tickTime`` (``zookeeper_tick_ms``, 2000 as in ZooKeeper's sample configuration). So a kill is
noticed between 2/3 of the session timeout and the timeout plus a tick after the signal.

Every process started here (ZooKeeper, the brokers) is stopped by its PID at the end, also on
an error or Ctrl-C; the brokers get SIGKILL then (their data is thrown away anyway, and a
controlled shutdown with the controller already gone would wait out its retries).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from benchmarks.processes import peak_rss_mb
from benchmarks.servers import REPO_ROOT
from client.admin import Admin
from client.future import Future
from client.metadata import ClusterMetadata
from client.network import NetworkClient, parse_bootstrap
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messageset import encode_message_set
from tooling.local.cluster import LocalClusterError, ZooKeeperServer, ZooKeeperUnavailableError

BROKERS = 3
REPLICATION_FACTOR = 3
PARTITIONS = 100
QUICK_PARTITIONS = 30
SESSION_MS = 6_000
CHROOT = "/odradek-bench"
PROBE_INTERVAL = 0.010  # s: at most one request per broker this often
BEFORE_SIGNAL = 0.2  # s of probing the old leader before the signal
AFTER_RECOVERY = 2.0  # s to keep probing the old leader once every partition is back
START_TIMEOUT = 30.0
READY_TIMEOUT = 30.0
REQUEST_TIMEOUT_MS = 5_000
EXTRA_WAIT = 60.0  # s beyond the session timeout before a failover counts as never completed
CLIENT_ID = "bench-cluster"
_LISTENING = re.compile(r"odradek broker (\d+) listening on (\S+):(\d+)")

KAFKA_KILL = ("Kafka (ZooKeeper mode): a dead broker is noticed when its session expires "
              "(zookeeper.session.timeout.ms: 18 s default since 2.5, 6 s before), then leaders "
              "are elected from the ISR")
KAFKA_SIGTERM = "Kafka: controlled shutdown moves leaders first, milliseconds per partition"
KAFKA_CONTROLLER = ("Kafka (ZooKeeper mode): /controller goes when the session expires "
                    "(zookeeper.session.timeout.ms: 18 s default since 2.5, 6 s before)")


class BenchError(RuntimeError):
    pass


# ------------------------------------------------------------------------------ processes


class Broker:
    """``python -m broker start`` in cluster mode; stdout and stderr appended to
    ``broker-N.log``, restartable on the same data directory (a new port each time)."""

    def __init__(self, workdir: Path, broker_id: int, zk_connect: str, session_ms: int) -> None:
        self.broker_id = broker_id
        self.data_dir = workdir / f"broker-{broker_id}"
        self.log = workdir / f"broker-{broker_id}.log"
        self.zk_connect = zk_connect
        self.session_ms = session_ms
        self.proc: subprocess.Popen[bytes] | None = None
        self.address = ""
        self._log_from = 0

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env["ODRADEK_ZOOKEEPER_SESSION_TIMEOUT_MS"] = str(self.session_ms)
        env["ODRADEK_AUTO_LEADER_REBALANCE_ENABLE"] = "false"
        args = [
            sys.executable, "-m", "broker", "start", "--host", "127.0.0.1", "--port", "0",
            "--data-dir", str(self.data_dir), "--broker-id", str(self.broker_id),
            "--zookeeper-connect", self.zk_connect,
        ]
        self._log_from = self.log.stat().st_size if self.log.exists() else 0
        self.address = ""
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(args, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT)

    def wait_listening(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while True:
            match = _LISTENING.search(self._log_since_start())
            if match is not None:
                self.address = f"{match[2]}:{match[3]}"
                return
            if not self.running or time.monotonic() > deadline:
                raise BenchError(f"broker {self.broker_id} did not start:\n{self.log_tail()}")
            time.sleep(0.02)

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def _log_since_start(self) -> str:
        try:
            with open(self.log, "rb") as f:
                f.seek(self._log_from)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 25) -> str:
        return "".join(self._log_since_start().splitlines(keepends=True)[-lines:])


def metadata_from(address: str, topics: list[str] | None = None) -> ClusterMetadata:
    """One Metadata request answered by the broker at ``address`` itself."""
    network = NetworkClient(address, client_id=CLIENT_ID, request_timeout_ms=REQUEST_TIMEOUT_MS)
    try:
        body = network.send(-1, ApiKey.METADATA, {
            "topics": topics, "allow_auto_topic_creation": False,
        }).result(REQUEST_TIMEOUT_MS / 1000)
        return ClusterMetadata.from_response(body)
    finally:
        network.close()


class Cluster:
    """A ZooKeeper, ``count`` brokers (ids 0..count-1) and a kazoo session of our own."""

    def __init__(self, workdir: Path, count: int, session_ms: int) -> None:
        self.workdir = workdir
        self.count = count
        self.session_ms = session_ms
        self.zookeeper = ZooKeeperServer(workdir / "zookeeper")
        self.brokers: dict[int, Broker] = {}
        self.zk: KazooClient | None = None

    def start(self) -> None:
        self.zookeeper.start()
        connect = self.zookeeper.connect + CHROOT
        self.brokers = {i: Broker(self.workdir, i, connect, self.session_ms)
                        for i in range(self.count)}
        for broker in self.brokers.values():
            broker.spawn()
        for broker in self.brokers.values():
            broker.wait_listening()
        self.wait_ready()
        self.zk = KazooClient(hosts=connect, timeout=10)
        self.zk.start(timeout=10)

    def close(self) -> None:
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
            self.zk = None
        for broker in self.brokers.values():
            broker.kill()
        self.zookeeper.stop()

    def live(self) -> dict[int, Broker]:
        return {i: b for i, b in self.brokers.items() if b.running}

    def emit(self, line: Mapping[str, Any]) -> None:
        """Print ``line`` with the live brokers' peak RSS since the last line. The script
        measures it itself: the suite's runner would read the last line only after ``close``
        has killed the brokers."""
        peaks = [p for b in self.live().values() if b.proc is not None
                 and (p := peak_rss_mb(b.proc.pid)) is not None]
        print(json.dumps({**line, "peak_rss_mb": max(peaks)} if peaks else line), flush=True)

    def restart(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        broker.kill()
        broker.spawn()
        broker.wait_listening()
        self.wait_ready()

    def wait_ready(self, topic: str | None = None) -> ClusterMetadata:
        """Until every live broker's metadata names every live broker and one live controller
        (and, with ``topic``, a live leader for each of its partitions); returns one view."""
        deadline = time.monotonic() + READY_TIMEOUT
        last = ""
        while True:
            live = self.live()
            try:
                views = [metadata_from(b.address, None if topic is None else [topic])
                         for b in live.values()]
                controllers = {v.controller_id for v in views}
                if (all(sorted(v.brokers) == sorted(live) for v in views)
                        and len(controllers) == 1 and controllers <= set(live)
                        and (topic is None or all(v.is_complete_for(topic) for v in views))):
                    return views[0]
                last = f"views: {[(sorted(v.brokers), v.controller_id) for v in views]}"
            except Exception as exc:  # a broker still starting: not ready yet
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                raise BenchError(f"brokers {sorted(live)} did not agree on the cluster within "
                                 f"{READY_TIMEOUT:g} s ({last})")
            time.sleep(0.05)

    def create_topic(self, name: str, partitions: int, replication_factor: int) -> ClusterMetadata:
        bootstrap = ",".join(b.address for b in self.live().values())
        with Admin(bootstrap, client_id=CLIENT_ID) as admin:
            admin.create_topic(name, partitions, replication_factor)
        return self.wait_ready(name)

    def controller(self) -> tuple[int, int] | None:
        """``/controller``'s broker id and ``/controller_epoch``, or None while there is none."""
        assert self.zk is not None
        try:
            data, _ = self.zk.get("/controller")
        except NoNodeError:
            return None
        epoch, _ = self.zk.get("/controller_epoch")
        return int(json.loads(data)["brokerid"]), int(epoch)

    def logs(self) -> str:
        return "".join(f"----- broker {i} log (end) -----\n{b.log_tail()}"
                       for i, b in self.brokers.items())


# -------------------------------------------------------------------------------- probing


@dataclass
class Times:
    """One partition's probe results (monotonic seconds)."""

    last_old_ok: float | None = None  # the last produce the old leader accepted
    old_done: bool = False  # the old leader refused or went away after the signal
    new_ok: float | None = None  # the first produce another broker accepted after the signal
    new_leader: int | None = None
    metadata: float | None = None  # the first Metadata answer naming a live leader


class FailoverProbe:
    """Produce probes to every broker for the partitions one broker (``victim``) leads, and
    Metadata probes to the others, each broker at most once per ``PROBE_INTERVAL``."""

    def __init__(self, addresses: Mapping[int, str], topic: str, partitions: Sequence[int],
                 victim: Broker) -> None:
        self.topic = topic
        self.victim = victim
        self.others = sorted(i for i in addresses if i != victim.broker_id)
        self.network = NetworkClient(
            ",".join(addresses.values()), client_id=CLIENT_ID,
            request_timeout_ms=REQUEST_TIMEOUT_MS, reconnect_backoff_ms=10,
            reconnect_backoff_max_ms=100,
        )
        self.network.set_brokers({i: parse_bootstrap(a)[0] for i, a in addresses.items()})
        self.times = {p: Times() for p in partitions}
        self.signalled_at: float | None = None
        self.exited_at: float | None = None
        self.errors: Counter[str] = Counter()
        self._busy: set[str] = set()
        self._next: dict[str, float] = {}
        self._metadata_turn = 0
        self.victim_exits = False  # SIGTERM: also wait (within the bound) for it to exit

    def close(self) -> None:
        self.network.close()

    # ------------------------------------------------------------------------------ running

    def run(self, send_signal: Callable[[], None], bound: float) -> None:
        """Probe the old leader until it has accepted every partition (and at least
        ``BEFORE_SIGNAL``), signal, then probe until every partition is back or ``bound``
        seconds have passed."""
        started = time.monotonic()
        while (time.monotonic() - started < BEFORE_SIGNAL
               or any(t.last_old_ok is None for t in self.times.values())):
            if time.monotonic() - started > 15.0:
                missing = [p for p, t in self.times.items() if t.last_old_ok is None]
                raise BenchError(f"broker {self.victim.broker_id} did not accept produce for "
                                 f"partitions {missing} before the signal: {dict(self.errors)}")
            self._step()
        self.errors.clear()
        self.signalled_at = time.monotonic()
        send_signal()
        deadline = self.signalled_at + bound
        while not self._finished() and time.monotonic() < deadline:
            self._step()

    def _finished(self) -> bool:
        times = self.times.values()
        if any(t.new_ok is None or t.metadata is None for t in times):
            return False
        last = max(t.new_ok for t in times if t.new_ok is not None)
        old_gone = all(t.old_done for t in times) or time.monotonic() > last + AFTER_RECOVERY
        return old_gone and (self.exited_at is not None or not self.victim_exits)

    def _step(self) -> None:
        now = time.monotonic()
        if self.signalled_at is not None and self.exited_at is None and not self.victim.running:
            self.exited_at = now
        self._send_due(now)
        wake = min([now + PROBE_INTERVAL, *(t for k, t in self._next.items()
                                            if k not in self._busy)])
        self.network.poll(max(0.0, wake - time.monotonic()))

    def _send_due(self, now: float) -> None:
        victim = self.victim.broker_id
        self._produce(victim, [p for p, t in self.times.items() if not t.old_done], now)
        if self.signalled_at is None:
            return
        pending = [p for p, t in self.times.items() if t.new_ok is None]
        for broker in self.others:
            self._produce(broker, pending, now)
        if any(t.metadata is None for t in self.times.values()) and self._due("metadata", now):
            broker = self.others[self._metadata_turn % len(self.others)]
            self._metadata_turn += 1
            future = self.network.send(broker, ApiKey.METADATA, {
                "topics": [self.topic], "allow_auto_topic_creation": False})
            future.add_done_callback(self._on_metadata)

    def _due(self, key: str, now: float) -> bool:
        if key in self._busy or now < self._next.get(key, 0.0):
            return False
        self._busy.add(key)
        self._next[key] = now + PROBE_INTERVAL
        return True

    def _produce(self, broker: int, partitions: list[int], now: float) -> None:
        if not partitions or not self._due(f"produce-{broker}", now):
            return
        records = encode_message_set([(None, b"probe", int(time.time() * 1000))])
        body = {
            "acks": 1, "timeout_ms": REQUEST_TIMEOUT_MS,
            "topics": [{"name": self.topic,
                        "partitions": [{"partition": p, "records": records} for p in partitions]}],
        }
        future = self.network.send(broker, ApiKey.PRODUCE, body)
        future.add_done_callback(partial(self._on_produce, broker, partitions))

    def _on_produce(self, broker: int, partitions: list[int],
                    future: Future[dict[str, Any]]) -> None:
        at = time.monotonic()
        self._busy.discard(f"produce-{broker}")
        old = broker == self.victim.broker_id
        signalled = self.signalled_at is not None
        who = "old leader" if old else "others"
        error = future.exception()
        if error is not None:
            self.errors[f"{who}: {type(error).__name__}"] += 1
            if old and signalled:
                for p in partitions:
                    self.times[p].old_done = True
            return
        for topic in future.value["topics"]:
            for answer in topic["partitions"]:
                times = self.times[answer["partition"]]
                if answer["error_code"] != 0:
                    self.errors[f"{who}: {_error_name(answer['error_code'])}"] += 1
                    if old and signalled:
                        times.old_done = True
                elif old:
                    times.last_old_ok = at
                elif signalled and times.new_ok is None:
                    times.new_ok = at
                    times.new_leader = broker

    def _on_metadata(self, future: Future[dict[str, Any]]) -> None:
        at = time.monotonic()
        self._busy.discard("metadata")
        if future.exception() is not None:
            self.errors[f"metadata: {type(future.exception()).__name__}"] += 1
            return
        view = ClusterMetadata.from_response(future.value)
        info = view.topics.get(self.topic)
        if info is None:
            return
        for p, times in self.times.items():
            known = info.partitions.get(p)
            if (times.metadata is None and known is not None and known.leader >= 0
                    and known.leader != self.victim.broker_id and known.leader in view.brokers):
                times.metadata = at

    # ------------------------------------------------------------------------------ results

    def results(self) -> dict[str, Any]:
        assert self.signalled_at is not None
        t0 = self.signalled_at
        times = self.times.values()
        back = [t for t in times if t.new_ok is not None]
        produce = [(t.new_ok - t0) * 1000 for t in back if t.new_ok is not None]
        metadata = [(t.metadata - t0) * 1000 for t in times if t.metadata is not None]
        gaps = [(t.new_ok - t.last_old_ok) * 1000 for t in back
                if t.new_ok is not None and t.last_old_ok is not None]
        line: dict[str, Any] = {}
        for name, values in (("produce", produce), ("gap", gaps), ("metadata", metadata)):
            if values:
                line[f"{name}_max_ms"] = round(max(values), 1)
                line[f"{name}_median_ms"] = round(statistics.median(values), 1)
        line["overlap_partitions"] = sum(1 for g in gaps if g < 0)
        return line

    def new_leaders(self) -> dict[int, int]:
        """How many of the partitions each broker took over."""
        return dict(sorted(Counter(t.new_leader for t in self.times.values()
                                   if t.new_leader is not None).items()))

    def missing(self) -> list[int]:
        return [p for p, t in self.times.items() if t.new_ok is None or t.metadata is None]


def detection_window(cluster: Cluster) -> str:
    """When ZooKeeper may notice a kill, in ms after it: from 2/3 of the session timeout (the
    client's last ping may be that old) to the timeout plus a tick (expiry buckets)."""
    earliest = cluster.session_ms * 2 // 3
    return f"{earliest}-{cluster.session_ms + cluster.zookeeper.tick_time_ms}"


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


# ------------------------------------------------------------------------------ scenarios


def leader_failover(cluster: Cluster, trigger: str, partitions: int) -> dict[str, Any]:
    """Create a topic, signal the non-controller broker leading most of it, probe."""
    topic = f"failover-{trigger}"
    view = cluster.create_topic(topic, partitions, REPLICATION_FACTOR)
    led: dict[int, list[int]] = {}
    for p, info in view.topics[topic].partitions.items():
        led.setdefault(info.leader, []).append(p)
    candidates = [b for b in led if b != view.controller_id]
    if not candidates:
        raise BenchError(f"only the controller leads {topic}: {led}")
    victim_id = max(candidates, key=lambda b: len(led[b]))
    victim = cluster.brokers[victim_id]
    signum = signal.SIGKILL if trigger == "kill" else signal.SIGTERM
    bound = cluster.session_ms / 1000 + EXTRA_WAIT
    probe = FailoverProbe({i: b.address for i, b in cluster.live().items()}, topic,
                          sorted(led[victim_id]), victim)
    probe.victim_exits = trigger == "sigterm"
    print(f"cluster: {trigger} broker {victim_id} (leads {len(led[victim_id])} of {partitions} "
          f"partitions; controller {view.controller_id})", file=sys.stderr, flush=True)
    try:
        probe.run(lambda: victim.signal(signum), bound)
    finally:
        probe.close()
    missing = probe.missing()
    if missing:
        raise BenchError(
            f"{trigger} of broker {victim_id}: partitions {missing} of {topic} had no working "
            f"leader within {bound:g} s; probe errors {dict(probe.errors)}\n{cluster.logs()}")
    line: dict[str, Any] = {
        "bench": "leader_failover", "trigger": trigger, "brokers": BROKERS,
        "partitions": partitions, "replication_factor": REPLICATION_FACTOR,
        "led_partitions": len(led[victim_id]), "victim": "not the controller",
        "zookeeper_session_timeout_ms": cluster.session_ms,
        "zookeeper_tick_ms": cluster.zookeeper.tick_time_ms,
        "probe_interval_ms": round(PROBE_INTERVAL * 1000), **probe.results(),
    }
    if trigger == "kill":
        line["zk_detection_window_ms"] = detection_window(cluster)
        line["note"] = KAFKA_KILL
    else:
        exit_deadline = time.monotonic() + 30.0
        while probe.exited_at is None and time.monotonic() < exit_deadline:
            if not victim.running:
                probe.exited_at = time.monotonic()
            time.sleep(0.01)
        if probe.exited_at is not None and probe.signalled_at is not None:
            line["shutdown_time_ms"] = round((probe.exited_at - probe.signalled_at) * 1000, 1)
        line["note"] = KAFKA_SIGTERM
    print(f"cluster: new leaders {probe.new_leaders()}; probe errors after the signal: "
          f"{dict(probe.errors)}", file=sys.stderr, flush=True)
    cluster.restart(victim_id)
    return line


def controller_failover(cluster: Cluster) -> dict[str, Any]:
    """Kill the controller; time a new ``/controller`` with a higher epoch and a topic
    creation sent at the moment of the kill."""
    before = cluster.controller()
    if before is None:
        raise BenchError("no /controller before the kill")
    old_id, old_epoch = before
    survivors = sorted(i for i in cluster.live() if i != old_id)
    target = cluster.brokers[survivors[0]]
    bound = cluster.session_ms / 1000 + EXTRA_WAIT
    network = NetworkClient(target.address, client_id=CLIENT_ID,
                            request_timeout_ms=int((bound + 5) * 1000))
    print(f"cluster: kill controller {old_id} (epoch {old_epoch}); CreateTopics to broker "
          f"{target.broker_id}", file=sys.stderr, flush=True)
    attempts = 0
    errors: list[str] = []

    def create() -> Future[dict[str, Any]]:
        nonlocal attempts
        attempts += 1
        return network.send(-1, ApiKey.CREATE_TOPICS, {
            "topics": [{"name": f"after-controller-kill-{attempts}", "num_partitions": 1,
                        "replication_factor": 2, "configs": {}}],
            "timeout_ms": int(bound * 1000), "validate_only": False,
        })

    elected: tuple[float, int, int] | None = None
    created_at: float | None = None
    try:
        killed_at = time.monotonic()
        cluster.brokers[old_id].signal(signal.SIGKILL)
        future = create()
        retry_at: float | None = None
        next_zk = killed_at
        deadline = killed_at + bound
        while (elected is None or created_at is None) and time.monotonic() < deadline:
            network.poll(PROBE_INTERVAL)
            now = time.monotonic()
            if elected is None and now >= next_zk:
                current = cluster.controller()
                if current is not None and current[0] != old_id and current[1] > old_epoch:
                    elected = (time.monotonic(), *current)
                next_zk = now + PROBE_INTERVAL
            if created_at is None and retry_at is not None and now >= retry_at:
                future, retry_at = create(), None
            if created_at is None and retry_at is None and future.done():
                error = future.exception()
                code = 0 if error is not None else future.value["topics"][0]["error_code"]
                if error is None and code == 0:
                    created_at = time.monotonic()
                else:
                    errors.append(type(error).__name__ if error is not None
                                  else _error_name(code))
                    retry_at = now + PROBE_INTERVAL
    finally:
        network.close()
    if elected is None or created_at is None:
        raise BenchError(
            f"kill of controller {old_id}: new controller {elected}, topic created "
            f"{created_at is not None} within {bound:g} s; CreateTopics errors {errors}\n"
            f"{cluster.logs()}")
    print(f"cluster: CreateTopics attempts {attempts}, errors {errors}", file=sys.stderr,
          flush=True)
    return {
        "bench": "controller_failover", "trigger": "kill", "brokers": BROKERS,
        "zookeeper_session_timeout_ms": cluster.session_ms,
        "zookeeper_tick_ms": cluster.zookeeper.tick_time_ms,
        "probe_interval_ms": round(PROBE_INTERVAL * 1000),
        "old_controller": old_id, "new_controller": elected[1],
        "old_epoch": old_epoch, "new_epoch": elected[2],
        "new_controller_time_ms": round((elected[0] - killed_at) * 1000, 1),
        "topic_create_time_ms": round((created_at - killed_at) * 1000, 1),
        "zk_detection_window_ms": detection_window(cluster),
        "note": KAFKA_CONTROLLER,
    }


def bench_workdir(stack: contextlib.ExitStack, keep: Path | None, name: str,
                  parser: argparse.ArgumentParser) -> Path:
    """A temporary directory for the run, or ``--keep DIR`` (new or empty) to look at later."""
    if keep is None:
        return Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix=f"odradek-bench-{name}-")))
    workdir = keep.absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    if any(workdir.iterdir()):
        parser.error(f"--keep {workdir}: not empty")
    return workdir


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def stop_on_signals() -> None:
    """Ctrl-C (the suite's stop) and SIGTERM end the run through its clean-up, even when
    started with SIGINT ignored (a background job of a shell)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _exit_on_signal)


def start_or_report_missing(cluster: Cluster, name: str) -> bool:
    """Start ``cluster``; False, with the area's ``missing`` line printed, when ZooKeeper or
    Java is not installed (the suite reports it rather than failing)."""
    try:
        cluster.start()
    except (ZooKeeperUnavailableError, FileNotFoundError) as exc:
        print(json.dumps({"status": "missing", "name": name, "reason": str(exc)}), flush=True)
        return False
    except LocalClusterError as exc:
        raise BenchError(f"ZooKeeper did not start: {exc}") from None
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_PARTITIONS} partitions instead of {PARTITIONS}")
    parser.add_argument("--partitions", type=int, help="partitions of each failover topic")
    parser.add_argument("--session-timeout-ms", type=int, default=SESSION_MS,
                        help="the brokers' zookeeper_session_timeout_ms (default %(default)s)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="work in DIR (new or empty) and keep it: ZooKeeper's and the "
                             "brokers' logs and data, for a look afterwards")
    args = parser.parse_args(argv)
    partitions = args.partitions or (QUICK_PARTITIONS if args.quick else PARTITIONS)
    stop_on_signals()
    with contextlib.ExitStack() as stack:
        workdir = bench_workdir(stack, args.keep, "cluster", parser)
        cluster = Cluster(workdir, BROKERS, args.session_timeout_ms)
        try:
            if not start_or_report_missing(cluster, "cluster"):
                return 0
            for trigger in ("kill", "sigterm"):
                cluster.emit(leader_failover(cluster, trigger, partitions))
            cluster.emit(controller_failover(cluster))
        finally:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
