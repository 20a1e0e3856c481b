"""``odradek demo``: a consumer group at work, narrated as it happens.

It starts a broker in a temporary directory (unless given ``--bootstrap``), creates a topic, starts
consumers of one group -- each a process of its own running
``python -m tooling.local.demo member`` -- and produces a steady stream. Then it stops one
consumer (it closes, so it leaves the group and the others rebalance at once) and starts it
again. Each member's state changes and partitions, and the group's state and generation as the
coordinator reports them, are printed when they change; the run ends with ``odradek groups
describe``. Everything it started is stopped by PID, and the temporary directory removed, however
it ends.

The brokers it starts also speak Kafka's protocol (``kafka_listeners``, a free loopback port);
the narration says where, and when ``kcat`` is installed the demo reads a few of its messages
back through that listener with it, as any Kafka client would.

With ``--cluster`` it runs on a local cluster instead: a ZooKeeper and three brokers
(tooling.local.cluster) with a short ZooKeeper session, the topic replicated three times. Once
the group is steady it kills (SIGKILL) the broker coordinating the group and narrates the
failover as a consumer lives it: FindCoordinator still naming the dead broker until its session
expires, then the new leader of the group's ``__consumer_offsets`` partition; the group loaded
there, state and generation unchanged; the members finding it while they keep fetching. Then
the usual leave and rejoin, on the new coordinator.

One thread: child output is read through ``selectors`` between the producer's sends.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from client.admin import Admin
from client.consumer import Consumer
from client.durations import seconds_text
from client.errors import ClientError
from client.future import Future
from client.group_admin import GroupAdmin, GroupDescription
from client.metadata import BrokerInfo
from client.network import NetworkClient
from client.producer import Producer
from client.records import TopicPartition
from client.subscription import ConsumerRebalanceListener
from protocol.apis import ApiKey
from protocol.errors import GroupIdNotFoundError, OdradekError, TopicAlreadyExistsError, error_for
from protocol.partitions import OFFSETS_TOPIC, offsets_partition_for
from tooling.cli.args import client_options, json_option
from tooling.cli.groups import add_groups_parser
from tooling.cli.output import Output
from tooling.local.cluster import KAFKA_LISTENERS, BrokerRecord, LocalCluster, ZooKeeperServer

STOP_TIMEOUT = 15.0
SETTLE_TIMEOUT = 60.0
_BROKER_START_TIMEOUT = 30.0
_LISTENING = " listening on "
_KAFKA_LISTENING = re.compile(r" kafka listener \S+ on (\S+:\d+)$")
#: what kcat prints of each message it reads back (kcat expands the \n), and how long it may take
_KCAT_FORMAT = r"partition %p, offset %o: key %k, value %s\n"
_KCAT_TIMEOUT = 20.0
CLUSTER_BROKERS = 3
#: --cluster: what the brokers get besides the ZooKeeper session timeout. The last broker to
#: stop cannot hand its leaderships to anyone, so it should not retry for long; no automatic
#: preferred-leader moves to blur the story.
CLUSTER_BROKER_SETTINGS = {
    "controlled_shutdown_max_retries": 0,
    "controlled_shutdown_retry_backoff_ms": 200,
    "auto_leader_rebalance_enable": False,
}
#: how often --cluster asks a broker which broker coordinates the group
_FIND_INTERVAL = 0.2


class DemoError(ClientError):
    """The demo could not run: the broker did not start, a consumer died, a phase timed out."""


def add_demo_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser(
        "demo",
        help="watch a consumer group rebalance: a broker, a topic, consumers, a stream",
        description="Start a broker in a temporary directory (or use --bootstrap), create a "
        "topic, start consumers of one group as processes, produce a steady stream, stop one "
        "consumer and start it again -- printing each state change -- and end with the "
        "group's describe table. The broker it starts also listens for Kafka's clients (the "
        "address is printed); with kcat installed, a few messages are read back through "
        "that listener. Cleans up everything it started.",
    )
    where = demo.add_mutually_exclusive_group()
    where.add_argument("--bootstrap", metavar="HOST:PORT",
                       help="use this broker instead of starting one")
    demo.add_argument("--kafka-bootstrap", metavar="HOST:PORT",
                      help="with --bootstrap: that broker's Kafka-protocol listener, for kcat "
                      "to read the topic through at the end (when kcat is installed)")
    where.add_argument("--cluster", action="store_true",
                       help=f"run on a local cluster of {CLUSTER_BROKERS} brokers and a "
                       "ZooKeeper (needs the zookeeper package) and, midway, kill -9 the "
                       "broker coordinating the group: watch the group move to its new "
                       "coordinator")
    demo.add_argument("--zookeeper-session-timeout-ms", type=int, default=6_000, metavar="MS",
                      help="--cluster: the brokers' ZooKeeper session timeout, so how long "
                      "the killed broker goes unnoticed (default: %(default)s; Kafka's "
                      "default is 18000)")
    demo.add_argument("--topic", default="demo", help="topic to use (default: %(default)s)")
    demo.add_argument("--group", default="demo-group", help="group id (default: %(default)s)")
    demo.add_argument("--partitions", type=int, default=6, help="partitions (default: 6)")
    demo.add_argument("--consumers", type=int, default=3, help="consumers (default: 3)")
    demo.add_argument("--rate", type=int, default=200,
                      help="messages produced per second (default: %(default)s)")
    demo.add_argument("--phase-seconds", type=float, default=3.0,
                      help="how long each phase streams once the group is steady (default: 3)")
    demo.set_defaults(run=cmd_demo)


def cmd_demo(args: argparse.Namespace, output: Output) -> int:
    if args.partitions < 1 or args.consumers < 2 or args.rate < 1:
        output.note("odradek: error: the demo needs --partitions >= 1, --consumers >= 2 and "
                    "--rate >= 1")
        return 1
    if args.zookeeper_session_timeout_ms < 1000:
        output.note("odradek: error: --zookeeper-session-timeout-ms must be at least 1000")
        return 1
    if args.kafka_bootstrap and not args.bootstrap:
        output.note("odradek: error: --kafka-bootstrap goes with --bootstrap (the demo's own "
                    "brokers get a Kafka listener of their own)")
        return 1
    with Demo(args, output) as demo:
        demo.run()
    return 0


# --------------------------------------------------------------------------- processes


class Child:
    """A process whose stdout lines are read without blocking; stopped by its PID only."""

    def __init__(
        self, name: str, argv: Sequence[str], stderr: IO[bytes] | int,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, env=env
        )
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout
        os.set_blocking(self.stdout.fileno(), False)
        self._partial = b""

    def read_lines(self) -> list[str]:
        try:
            data = os.read(self.stdout.fileno(), 65536)
        except BlockingIOError:
            return []
        if not data:
            return []
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        return [line.decode("utf-8", "replace") for line in lines]

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT) -> list[str]:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout``; the lines it wrote
        meanwhile."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
        os.set_blocking(self.stdout.fileno(), True)
        rest = (self._partial + self.stdout.read()).decode("utf-8", "replace")
        self._partial = b""
        self.stdout.close()
        return rest.splitlines()


class Demo:
    def __init__(self, args: argparse.Namespace, output: Output) -> None:
        self.args = args
        self.output = output
        self.bootstrap: str = args.bootstrap or ""
        self.kafka_bootstrap: str = args.kafka_bootstrap or ""  # its Kafka-protocol listeners
        self._selector = selectors.DefaultSelector()
        self._children: dict[str, Child] = {}
        self._broker: Child | None = None
        self._tmp: str | None = None
        self._started = time.monotonic()
        self._owned: dict[str, tuple[int, list[str]]] = {}  # member -> generation, partitions
        self._consumed: dict[str, int] = {}  # by the member's current process
        self._consumed_before: dict[str, int] = {}  # by its earlier processes
        self._next_lag_look = 0.0
        self._group_seen: tuple[str, int, int, int] | None = None
        self._group: GroupDescription | None = None
        self._next_group_look = 0.0
        self._produced = 0
        self._producer: Producer | None = None
        self._admin: GroupAdmin | None = None
        # --cluster
        self._zookeeper: ZooKeeperServer | None = None
        self._cluster: LocalCluster | None = None
        self._broker_pids: dict[int, int] = {}
        self._member_states: dict[str, str] = {}
        self._flaps: dict[str, int] = {}  # state changes not printed, by member
        self._finder: NetworkClient | None = None
        self._finding: Future[dict[str, Any]] | None = None
        self._next_find = 0.0
        self._found: str | None = None  # the last FindCoordinator answer, as printed
        self._found_broker: int | None = None

    # ------------------------------------------------------------------------- phases

    def run(self) -> None:
        args = self.args
        if args.cluster:
            self._start_cluster()
        elif not self.bootstrap:
            self._start_broker()
        self._create_topic()
        self._producer = Producer(self.bootstrap, linger_ms=20)
        # short waits on a cluster: a look at the group must not stall the stream while its
        # coordinator is dead
        self._admin = GroupAdmin(self.bootstrap, timeout_ms=1_000 if args.cluster else 10_000)
        names = [f"c{i + 1}" for i in range(args.consumers)]
        self.say("demo", f"starting {len(names)} consumers of group {args.group!r}")
        for name in names:
            self._start_member(name)
        self._stream_until(lambda: self._steady_with(names), "all consumers to share the topic")
        self._stream_for(args.phase_seconds)
        if args.cluster:
            self._kill_coordinator(names)
            self._stream_for(args.phase_seconds)

        leaving, staying = names[-1], names[:-1]
        self.say("demo", f"stopping {leaving}: it commits and leaves, so the others rebalance "
                         "at once")
        self._stop_member(leaving)
        self._stream_until(lambda: self._steady_with(staying), f"{leaving}'s partitions to move")
        self._stream_for(args.phase_seconds)

        self.say("demo", f"starting {leaving} again")
        self._start_member(leaving)
        self._stream_until(lambda: self._steady_with(names), f"{leaving} to get partitions back")
        self._stream_for(args.phase_seconds)

        self._producer.flush()
        self._stream_until(self._caught_up, "the consumers to catch up", produce=False,
                           timeout=15.0, required=False)
        self.say("demo", f"produced {self._produced} messages; consumed " + ", ".join(
            f"{n}={self._consumed_total(n)}" for n in sorted(self._consumed)))
        self._read_with_kcat()
        self.output.out.write("\n")
        self.output.out.flush()
        self._describe()

    def _steady_with(self, names: list[str]) -> bool:
        group = self._group
        if group is None or group.state != "Steady" or len(group.members) != len(names):
            return False
        generations = {self._owned.get(n, (-1, []))[0] for n in names}
        return generations == {group.generation}

    def _caught_up(self) -> bool:
        """Every partition's committed offset has reached its log end (auto-commit runs
        every second)."""
        assert self._admin is not None
        if self._group is None or time.monotonic() < self._next_lag_look:
            return False
        self._next_lag_look = time.monotonic() + 0.5
        lags = [p.lag for p in self._admin.group_lag(self._group)]
        return len(lags) == self.args.partitions and all(lag == 0 for lag in lags)

    def _kill_coordinator(self, names: list[str]) -> None:
        """SIGKILL the broker coordinating the group; stream until the group is Steady at
        another broker with every member back in it."""
        assert self._admin is not None and self._cluster is not None
        group = self.args.group
        dead = self._admin.find_coordinator(group)
        offsets = self._admin.cluster_metadata().topics[OFFSETS_TOPIC].partitions
        partition = offsets_partition_for(group, len(offsets))
        self.say("demo", f"group {group!r} is coordinated by broker {dead.node_id} "
                         f"({dead.host}:{dead.port}), the leader of {OFFSETS_TOPIC} partition "
                         f"{partition}")
        self._found_broker = dead.node_id
        self._found = self._found_text(dead)
        pid = self._broker_pids[dead.node_id]
        session = self.args.zookeeper_session_timeout_ms
        self.say("demo", f"kill -9 broker {dead.node_id} (pid {pid}); ZooKeeper notices when "
                         f"its session expires ({session} ms), then the controller elects new "
                         "leaders. The consumers keep fetching meanwhile")
        consumed_before = sum(self._consumed_total(n) for n in names)
        generation_before = self._group.generation if self._group is not None else -1
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        with contextlib.suppress(ChildProcessError):  # LocalCluster started it: our child
            os.waitpid(pid, 0)
        del self._broker_pids[dead.node_id]
        alive = [b for b in self._cluster_brokers() if b.broker_id in self._broker_pids]
        self.bootstrap = ",".join(b.address for b in alive)
        self.kafka_bootstrap = ",".join(b.kafka_address for b in alive if b.kafka_address)
        # a new admin: the old one would keep asking the dead broker's address first
        self._admin.close()
        self._admin = GroupAdmin(self.bootstrap, timeout_ms=1_000)
        self._finder = NetworkClient(self.bootstrap, client_id="odradek-demo")

        def moved() -> bool:
            group_now = self._group
            return (
                self._found_broker not in (None, dead.node_id)
                and group_now is not None and group_now.coordinator.node_id != dead.node_id
                and self._steady_with(names)
                and all(self._member_states.get(n) == "Part of a group" for n in names)
            )

        self._stream_until(moved, "the group to move to a new coordinator")
        assert self._group is not None
        read = sum(self._consumed_total(n) for n in names) - consumed_before
        generation = self._group.generation
        how = (f"generation {generation} unchanged (loaded from {OFFSETS_TOPIC}, no rebalance)"
               if generation == generation_before else
               f"generation {generation_before} -> {generation} (the new coordinator asked "
               "for a rebalance)")
        self.say("demo", f"the group moved from broker {dead.node_id} to broker "
                         f"{self._group.coordinator.node_id} in "
                         f"{time.monotonic() - killed_at:.1f} s, {how}; the consumers read "
                         f"{read} messages meanwhile")

    def _read_with_kcat(self) -> None:
        """Three messages of partition 0 read back by kcat (librdkafka) through the Kafka
        listener: the same log, Kafka's protocol. Skipped without kcat or a known listener."""
        kcat = shutil.which("kcat")
        if kcat is None or not self.kafka_bootstrap:
            return
        argv = ["kcat", "-b", self.kafka_bootstrap, "-C", "-t", self.args.topic, "-p", "0",
                "-c", "3", "-e", "-f", _KCAT_FORMAT]
        self.say("kcat", f"$ {shlex.join(argv)}")
        try:
            done = subprocess.run([kcat, *argv[1:]], stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=_KCAT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.say("kcat", f"read nothing within {seconds_text(_KCAT_TIMEOUT)}")
            return
        for line in done.stdout.splitlines():
            self.say("kcat", line)
        if done.returncode != 0:
            said = done.stderr.strip().splitlines()
            self.say("kcat", f"exited with status {done.returncode}"
                             + (f": {said[-1]}" if said else ""))

    def _consumed_total(self, name: str) -> int:
        return self._consumed_before.get(name, 0) + self._consumed.get(name, 0)

    def _describe(self) -> None:
        """``odradek groups describe GROUP``, parsed as the command's own parser does it."""
        parser = argparse.ArgumentParser(prog="odradek")
        commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
        add_groups_parser(commands, [client_options(), json_option()])
        args = parser.parse_args(
            ["groups", "describe", self.args.group, "--bootstrap", self.bootstrap]
        )
        args.run(args, self.output)

    # ----------------------------------------------------------------------- plumbing

    def say(self, who: str, text: str) -> None:
        elapsed = time.monotonic() - self._started
        self.output.out.write(f"[{elapsed:5.1f}s] {who:<6} {text}\n")
        self.output.out.flush()

    def _start_broker(self) -> None:
        self._tmp = tempfile.mkdtemp(prefix="odradek-demo-")
        log = open(os.path.join(self._tmp, "broker.log"), "wb")  # noqa: SIM115 - the child's
        argv = [sys.executable, "-m", "broker", "start", "--host", "127.0.0.1", "--port", "0",
                "--data-dir", os.path.join(self._tmp, "data")]
        env = {**os.environ, "ODRADEK_KAFKA_LISTENERS": KAFKA_LISTENERS}
        self._broker = Child("broker", argv, log, env)
        log.close()
        deadline = time.monotonic() + _BROKER_START_TIMEOUT
        lines: list[str] = []
        kafka: re.Match[str] | None = None
        while kafka is None:  # the listening line, then the Kafka listener's
            if not self._broker.running or time.monotonic() > deadline:
                raise DemoError(f"the broker did not start; see {self._tmp}/broker.log")
            if select_readable(self._broker.stdout, 0.1):
                lines += self._broker.read_lines()
            if lines and _LISTENING not in lines[0]:
                raise DemoError(f"unexpected first line from the broker: {lines[0]!r}")
            kafka = next(filter(None, map(_KAFKA_LISTENING.search, lines)), None)
        self.bootstrap = lines[0].split(_LISTENING, 1)[1].strip()
        self.kafka_bootstrap = kafka[1]
        self.say("broker", f"started in {self._tmp} (pid {self._broker.proc.pid}), "
                           f"listening on {self.bootstrap}; Kafka clients: {self.kafka_bootstrap}")

    def _start_cluster(self) -> None:
        """A ZooKeeper and ``CLUSTER_BROKERS`` brokers in a temporary directory. Both in
        sessions of their own (Ctrl-C at the terminal reaches only the demo and its
        consumers): the demo stops them, brokers first, when it ends."""
        self._tmp = tempfile.mkdtemp(prefix="odradek-demo-")
        zookeeper = self._zookeeper = ZooKeeperServer(
            Path(self._tmp) / "zookeeper", detached=True)
        zookeeper.start()
        self.say("zk", f"ZooKeeper started in {self._tmp} (pid {zookeeper.pid}), serving "
                       f"{zookeeper.connect}")
        config = Path(self._tmp) / "broker.toml"
        settings = {**CLUSTER_BROKER_SETTINGS,
                    "zookeeper_session_timeout_ms": self.args.zookeeper_session_timeout_ms}
        config.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()))
        self._cluster = LocalCluster(Path(self._tmp) / "cluster",
                                     broker_args=["--config", str(config)])
        record = self._cluster.up(CLUSTER_BROKERS, zookeeper=zookeeper.connect)
        for broker in record.brokers:
            self._broker_pids[broker.broker_id] = broker.process.pid
            self.say("broker", f"broker {broker.broker_id} started (pid {broker.process.pid}), "
                               f"listening on {broker.address}; Kafka clients: "
                               f"{broker.kafka_address}")
        self.bootstrap = record.bootstrap
        self.kafka_bootstrap = record.kafka_bootstrap

    def _cluster_brokers(self) -> list[BrokerRecord]:
        assert self._cluster is not None
        record = self._cluster.read()
        return [] if record is None else list(record.brokers)

    def _create_topic(self) -> None:
        args = self.args
        replicas = CLUSTER_BROKERS if args.cluster else 1
        with Admin(self.bootstrap, timeout_ms=20_000) as admin:
            try:
                admin.create_topic(args.topic, args.partitions, replicas)
                copies = f", {replicas} copies of each" if replicas > 1 else ""
                self.say("demo", f"created topic {args.topic!r} with {args.partitions} "
                                 f"partitions{copies}")
            except TopicAlreadyExistsError:
                self.say("demo", f"topic {args.topic!r} exists already; using it")

    def _start_member(self, name: str) -> None:
        argv = [sys.executable, "-m", "tooling.local.demo", "member", "--bootstrap", self.bootstrap,
                "--group", self.args.group, "--topic", self.args.topic, "--name", name]
        child = Child(name, argv, subprocess.DEVNULL)
        self._children[name] = child
        self._selector.register(child.stdout, selectors.EVENT_READ, child)

    def _stop_member(self, name: str) -> None:
        child = self._children.pop(name)
        self._selector.unregister(child.stdout)
        for line in child.stop():
            self._on_member_line(name, line)

    def _stream_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        self._stream_until(lambda: time.monotonic() >= end, "", timeout=seconds + 5.0)

    def _stream_until(
        self,
        done: Callable[[], bool],
        what: str,
        *,
        produce: bool = True,
        timeout: float = SETTLE_TIMEOUT,
        required: bool = True,
    ) -> None:
        """Produce at ``--rate``, print what children and the group report, until ``done()``."""
        assert self._producer is not None
        deadline = time.monotonic() + timeout
        interval = 1.0 / self.args.rate
        next_send = time.monotonic()
        while not done():
            now = time.monotonic()
            if now > deadline:
                if required:
                    raise DemoError(f"gave up waiting for {what} after {seconds_text(timeout)}")
                return
            for name, child in list(self._children.items()):
                if not child.running:
                    raise DemoError(f"consumer {name} exited with status {child.proc.poll()}")
            if produce:
                while next_send <= now:
                    self._producer.send(self.args.topic, b"message %d" % self._produced,
                                        key=str(self._produced).encode())
                    self._produced += 1
                    next_send += interval
            self._producer.poll(0)
            for key, _ in self._selector.select(min(0.02, max(next_send - now, 0.0))):
                child = key.data
                for line in child.read_lines():
                    self._on_member_line(child.name, line)
            self._look_at_group()

    def _on_member_line(self, name: str, line: str) -> None:
        try:
            event: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError:
            return
        kind = event.get("event")
        if kind == "state":
            self._on_member_state(name, event)
        elif kind == "assigned":
            self._owned[name] = (event["generation"], event["partitions"])
            owned = ", ".join(event["partitions"]) or "nothing"
            self.say(name, f"owns {owned} (generation {event['generation']})")
        elif kind == "progress":
            self._consumed[name] = event["consumed"]
        elif kind == "closed":
            self._owned.pop(name, None)
            self._consumed_before[name] = self._consumed_before.get(name, 0) + event["consumed"]
            self._consumed[name] = 0
            self.say(name, f"closed after consuming {event['consumed']} messages")

    def _on_member_state(self, name: str, event: dict[str, Any]) -> None:
        """Print a member's state change -- except the round trips of a member whose
        FindCoordinator answer names a broker that is dead (Re-discover coordinator -> Part of a
        group -> Re-discover coordinator ...), which are counted and summed up once it is back."""
        before = self._member_states.get(name)
        self._member_states[name] = event["to"]
        reason = event["reason"] or ""
        found = re.search(r"coordinator is broker (\d+)", reason)
        if before == "Re-discover coordinator" and event["to"] == "Part of a group" and (
                found is not None and int(found[1]) in self._dead_broker_ids()):
            self._flaps[name] = self._flaps.get(name, 0) + 1
            return
        if self._flaps.get(name) and event["from"] == "Part of a group" and (
                event["to"] == "Re-discover coordinator"):
            return  # the other half of a round trip not printed
        flaps = self._flaps.pop(name, 0)
        if flaps:
            self.say(name, f"(tried the dead broker {flaps} more time(s), "
                           f"{self.args.zookeeper_session_timeout_ms} ms session timeout)")
        self.say(name, f"{event['from']} -> {event['to']}" + (f" ({reason})" if reason else ""))

    def _dead_broker_ids(self) -> set[int]:
        if self._cluster is None:
            return set()
        return {b.broker_id for b in self._cluster_brokers()} - set(self._broker_pids)

    def _look_at_group(self) -> None:
        now = time.monotonic()
        self._look_for_coordinator(now)
        if now < self._next_group_look or self._admin is None:
            return
        self._next_group_look = now + 0.2
        try:
            group = self._admin.describe_group(self.args.group)
        except GroupIdNotFoundError:
            return
        except OdradekError as exc:
            if not self.args.cluster:
                raise
            if self._group_seen is not None:
                self._group_seen = None
                self.say("group", f"cannot be described: {type(exc).__name__}: {exc}")
            return
        self._group = group
        seen = (group.state, group.generation, len(group.members), group.coordinator.node_id)
        if seen != self._group_seen:
            self._group_seen = seen
            where = f", coordinator broker {group.coordinator.node_id}" if self.args.cluster \
                else ""
            self.say("group", f"{group.state}, generation {group.generation}, "
                              f"{len(group.members)} member(s){where}")

    def _look_for_coordinator(self, now: float) -> None:
        """--cluster, after the kill: ask which broker coordinates the group every
        ``_FIND_INTERVAL`` (one request at a time, never waiting), printing each new answer."""
        finder = self._finder
        if finder is None:
            return
        finder.poll(0)
        if self._finding is not None and self._finding.done():
            future, self._finding = self._finding, None
            error = future.exception()
            if error is None and future.value["error_code"]:
                error = error_for(future.value["error_code"], future.value["error_message"] or "")
            if error is not None:
                text = f"{type(error).__name__}: {error}"
            else:
                body = future.value
                self._found_broker = body["node_id"]
                text = self._found_text(BrokerInfo(body["node_id"], body["host"], body["port"]))
            if text != self._found:
                self._found = text
                self.say("coord", f"FindCoordinator: {text}")
        if self._finding is None and now >= self._next_find:
            self._next_find = now + _FIND_INTERVAL
            self._finding = finder.send(finder.least_loaded_node(), ApiKey.FIND_COORDINATOR,
                                        {"group_id": self.args.group}, timeout=2.0)

    def _found_text(self, broker: BrokerInfo) -> str:
        dead = " (dead: the surviving brokers' metadata still names it)" if (
            broker.node_id in self._dead_broker_ids()) else ""
        return f"broker {broker.node_id} ({broker.host}:{broker.port}){dead}"

    # ------------------------------------------------------------------------ cleanup

    def __enter__(self) -> Demo:
        return self

    def __exit__(self, *exc: object) -> None:
        for child in self._children.values():  # all at once: each may take a while to close
            if child.running:
                child.proc.send_signal(signal.SIGTERM)
        for child in self._children.values():
            child.stop()
        self._children.clear()
        with contextlib.suppress(ClientError):
            if self._producer is not None:
                self._producer.close(timeout=5.0)
        if self._admin is not None:
            self._admin.close()
        if self._finder is not None:
            self._finder.close()
        if self._broker is not None:
            self._broker.stop()
            self.say("broker", "stopped")
        if self._cluster is not None and self._cluster.read() is not None:
            for name, pid, how in self._cluster.down():  # brokers, by PID, highest id first
                self.say("broker", f"{name} (pid {pid}): {how}")
        if self._zookeeper is not None and self._zookeeper.running:
            self._zookeeper.stop()
            self.say("zk", "ZooKeeper stopped")
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
        self._selector.close()


def select_readable(stream: IO[bytes], timeout: float) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        return bool(selector.select(timeout))


# ------------------------------------------------------------------------------ member


class _Narrator(ConsumerRebalanceListener):
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        # incremental rebalancing names only the new partitions: report all it owns now
        _emit(event="assigned", generation=self.consumer.generation,
              partitions=[str(tp) for tp in sorted(self.consumer.assignment())])


def run_member(argv: Sequence[str]) -> int:
    """One demo consumer: poll, report state changes, assignments and progress as JSON lines;
    SIGTERM closes it (commit, leave the group)."""
    parser = argparse.ArgumentParser(prog="python -m tooling.local.demo member")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--name", required=True)
    args = parser.parse_args(argv)
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    consumed = 0
    narrate_state_changes()
    # Heartbeats every half second: the others hear of a rebalance within that.
    consumer = Consumer(args.bootstrap, group_id=args.group, client_id=args.name,
                        auto_offset_reset="earliest", auto_commit_interval_ms=1_000,
                        session_timeout_ms=6_000, heartbeat_interval_ms=500)
    try:
        consumer.subscribe([args.topic], listener=_Narrator(consumer))
        next_report = 0.0
        while not stopping:
            consumed += len(consumer.poll(timeout_ms=100))
            if time.monotonic() >= next_report:
                next_report = time.monotonic() + 0.5
                _emit(event="progress", consumed=consumed)
    finally:
        consumer.close()
        _emit(event="progress", consumed=consumed)
        _emit(event="closed", consumed=consumed)
    return 0


class _StateChanges(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        change = getattr(record, "consumer_state", None)
        if change is not None:
            _emit(event="state", **{"from": change["from_state"], "to": change["to_state"],
                                    "reason": change["reason"]})


def narrate_state_changes() -> None:
    """Print each of this process's consumer state changes as an event line."""
    log = logging.getLogger("odradek.consumer")
    log.addHandler(_StateChanges())
    log.setLevel(logging.INFO)
    log.propagate = False


def _emit(**event: Any) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:2] != ["member"]:
        sys.exit("usage: python -m tooling.local.demo member --bootstrap ... "
                 "(started by odradek demo)")
    sys.exit(run_member(sys.argv[2:]))
