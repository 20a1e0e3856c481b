"""Coordinator failover and Catch-up: ``python -m benchmarks.group failover [--quick]``.

Two measurements, one JSON line each (``--quick``: 3 groups of 5 members instead of 10 of 10):

- ``group_failover``, trigger=kill and trigger=sigterm. A standalone ZooKeeper and three brokers
  (benchmarks/cluster.py's ``Cluster``: ``zookeeper_session_timeout_ms`` = 6000 unless
  ``--session-timeout-ms``, automatic leader rebalance off, everything else at its default). A
  topic with one partition per member of a group (RF 3, one message in each). The broker that
  is not the controller and leads the most ``__consumer_offsets`` partitions is the victim;
  the groups are named so that the victim coordinates every one of them. Each group's members
  are ``Consumer`` objects with their default settings (session 10 s, heartbeats every 3 s),
  polled in turn by one process per group (``python -m benchmarks.group failover-members``),
  which reports every change of a member's state, coordinator, generation or partitions with
  its time (``time.monotonic``, one clock for all processes on Linux; the process polls every
  ~10 ms, which bounds the precision). Once every member is in "Part of a group" at the victim,
  in one generation per group with every partition owned, the victim gets SIGKILL (or SIGTERM:
  controlled shutdown) at once -- the members have just joined, so their next heartbeats are a
  whole interval away: the worst case for noticing. The line reports, in ms after the signal:
  every member has noticed
  (left "Part of a group", ``noticed_max_ms``); the controller acted (``controller_time_ms``:
  its log's broker change -- the victim's ZooKeeper registration gone -- or controlled
  shutdown); the last of the groups' offsets partitions
  started loading at its new leader (``catch_up_start_max_ms``, from the brokers' logs) and the
  longest load took ``catch_up_max_ms``; every member knows the new coordinator
  (``rediscovered_max_ms``); and every member is back in "Part of a group" at it with its
  partitions (``failover_time_ms``). ``rebalanced_groups`` counts groups whose generation
  changed (none should: the new coordinator loads the groups Steady).
- ``offsets_catch_up``: one broker on its own. 1,000,000 offset records (10,000 keys: 100
  groups of one offsets partition x 100 partitions, each committed 100 times -- a partition
  log compaction has not reached yet) are written straight into its ``__consumer_offsets``
  log with the coordinator's record encoding while it is stopped; then it starts and loads the
  partition. ``catch_up_time_ms``: its Down -> Catch-up and Catch-up -> Ready log lines;
  ``load_time_ms``: the loader's own figure (``coordinator.partition_loaded``).

Beside each failover line, Kafka (ZooKeeper mode, classic protocol) on the same event:
``kafka_classic_floor_ms`` is 2/3 of the ZooKeeper session (the earliest a kill can be noticed:
the broker's last ping may be that old) or nothing for SIGTERM, plus a FindCoordinator and a
heartbeat round trip. Kafka's new coordinator also loads its groups Stable with their members;
a member whose session ran out during the outage rejoins there in two rounds (JoinGroup,
SyncGroup) where odradek needs one.

Everything started here is stopped by its PID at the end, also on an error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from benchmarks.cluster import BROKERS, Broker, Cluster, start_or_report_missing, stop_on_signals
from benchmarks.group import round_trip_ms
from benchmarks.processes import ChildLines
from benchmarks.servers import REPO_ROOT, start_odradek
from client import Admin, Consumer, Producer, TopicPartition
from client.group_admin import GroupAdmin
from protocol.partitions import OFFSETS_TOPIC

SESSION_MS = 6_000  # the brokers' zookeeper_session_timeout_ms, as benchmarks/cluster.py
CONSUMER_SESSION_MS = 10_000  # Consumer defaults, stated in the lines
CONSUMER_HEARTBEAT_MS = 3_000
SETTLE_S = 120.0
HOST_POLL_S = 0.010
RECORDS = 1_000_000
CATCH_UP_GROUPS = 100
CATCH_UP_TOPIC_PARTITIONS = 100
CATCH_UP_TARGET_MS = 5_000
PART_OF_GROUP = "Part of a group"
_FOUND = re.compile(r"coordinator is broker (\d+)")
_TRANSITION = re.compile(
    r"timestamp='([^']+)' level='\w+' event='offsets_partition_transition' "
    r"partition=(\d+) from='([^']+)' to='([^']+)'"
)
_CONTROLLER = re.compile(r"timestamp='([^']+)' level='\w+' "
                         r"event='controller\.(brokers_changed|controlled_shutdown)'")
_LOADED = re.compile(r"event='coordinator.partition_loaded' partition=(\d+) records=(\d+) "
                     r"ms=(\d+)")
NOTES = {
    "kill": "Kafka (ZooKeeper mode, classic protocol): the same ZooKeeper session expiry before "
            "the offsets partition moves, the same load; groups are loaded Stable, but a member "
            "whose session lapsed rejoins in two rounds (JoinGroup, SyncGroup)",
    "sigterm": "Kafka: controlled shutdown moves the offsets partitions in milliseconds too; "
               "its members learn of it at their next heartbeat (heartbeat.interval.ms, 3 s by "
               "default); ours when the old coordinator's connection closes",
}


class FailoverError(RuntimeError):
    pass


# ------------------------------------------------------------------------- member host


def host_members(bootstrap: str, topic: str, group: str, count: int) -> int:
    """``count`` members of ``group``, polled in turn; one JSON line per change of a member's
    state, coordinator, generation or partitions. SIGTERM closes them."""
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    current = [0]
    coordinators: dict[int, int | None] = {}

    class CoordinatorFound(logging.Handler):
        """The consumer logs "coordinator is broker N" when FindCoordinator answers: a state
        change (info) when it re-discovers, an event without one (debug) at start."""

        def emit(self, record: logging.LogRecord) -> None:
            if found := _FOUND.search(record.getMessage()):
                coordinators[current[0]] = int(found[1])

    log = logging.getLogger("odradek.consumer")
    log.addHandler(CoordinatorFound())
    log.setLevel(logging.DEBUG)
    log.propagate = False
    consumers = [
        Consumer(bootstrap, group_id=group, client_id=f"{group}-{i}",
                 auto_offset_reset="latest", fetch_max_wait_ms=100)
        for i in range(count)
    ]
    reported: dict[int, tuple[Any, ...]] = {}
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        while not stop:
            for i, consumer in enumerate(consumers):
                current[0] = i
                consumer.poll(timeout_ms=0)
                seen = (consumer.state.value, coordinators.get(i), consumer.generation,
                        sorted(tp.partition for tp in consumer.assignment()))
                if reported.get(i) != seen:
                    reported[i] = seen
                    state, coordinator, generation, partitions = seen
                    print(json.dumps({"m": i, "state": state, "coordinator": coordinator,
                                      "generation": generation, "partitions": partitions,
                                      "t": time.monotonic()}), flush=True)
            time.sleep(HOST_POLL_S)
    finally:
        for consumer in consumers:
            with contextlib.suppress(Exception):
                consumer.close(timeout_ms=1_000)
    return 0


@dataclass
class MemberView:
    state: str = ""
    coordinator: int | None = None
    generation: int = -1
    partitions: tuple[int, ...] = ()
    t: float = 0.0
    noticed: float | None = None  # first time out of "Part of a group" after the signal
    rediscovered: float | None = None  # first time with another coordinator after the signal


class Hosts:
    """One member-host process per group; what they report, through one selector."""

    def __init__(self, bootstrap: str, topic: str, groups: Sequence[str], count: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        self.count = count
        self.views = {(g, m): MemberView() for g in groups for m in range(count)}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._lines = ChildLines()
        self.signalled_at: float | None = None
        self.victim: int | None = None
        for group in groups:
            proc = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.group", "failover-members", bootstrap, topic,
                 group, str(count)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env, cwd=REPO_ROOT,
            )
            self.procs[group] = proc
            self._lines.add(group, proc)

    def read(self, timeout: float) -> None:
        for key, event in self._lines.read(timeout):
            group = cast(str, key)
            if event is None:
                raise FailoverError(f"the members of {group} exited: "
                                    f"{self.procs[group].wait()}")
            self._update(group, event)

    def _update(self, group: str, event: dict[str, Any]) -> None:
        view = self.views[(group, event["m"])]
        view.state, view.coordinator = event["state"], event["coordinator"]
        view.generation, view.partitions = event["generation"], tuple(event["partitions"])
        view.t = event["t"]
        if self.signalled_at is not None and view.t >= self.signalled_at:
            if view.noticed is None and view.state != PART_OF_GROUP:
                view.noticed = view.t
            if view.rediscovered is None and view.coordinator not in (None, self.victim):
                view.rediscovered = view.t

    def wait(self, done: Any, what: str, timeout: float = SETTLE_S) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise FailoverError(f"{what} not within {timeout:g} s")
            self.read(0.05)

    def settled_at(self, coordinator_ok: Any, partitions: int) -> bool:
        """Every member in "Part of a group" at an acceptable coordinator, each group in one
        generation with every partition owned once."""
        for group in self.procs:
            views = [self.views[(group, m)] for m in range(self.count)]
            if any(v.state != PART_OF_GROUP or not coordinator_ok(v.coordinator)
                   for v in views):
                return False
            if len({v.generation for v in views}) != 1:
                return False
            if sorted(p for v in views for p in v.partitions) != list(range(partitions)):
                return False
        return True

    def generations(self) -> dict[str, int]:
        return {g: self.views[(g, 0)].generation for g in self.procs}

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs.values():
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        self._lines.close()


# ------------------------------------------------------------------------ failover


def _offsets_leaders(cluster: Cluster) -> tuple[dict[int, int], int]:
    view = cluster.wait_ready(OFFSETS_TOPIC)
    leaders = {p: info.leader for p, info in view.topics[OFFSETS_TOPIC].partitions.items()}
    return leaders, view.controller_id


def _groups_led_by(victim: int, leaders: dict[int, int], prefix: str, count: int) -> list[str]:
    groups: list[str] = []
    i = 0
    while len(groups) < count:
        name = f"{prefix}-{i}"
        if leaders[zlib.crc32(name.encode()) % len(leaders)] == victim:
            groups.append(name)
        i += 1
    return groups


def _log_transitions(broker: Broker, since_wall: float) -> list[tuple[float, int, str, str]]:
    """(wall time, partition, from, to) of the broker's loader moves after ``since_wall``."""
    out = []
    for match in _TRANSITION.finditer(broker.log.read_text(errors="replace")):
        at = datetime.fromisoformat(match[1]).timestamp()
        if at >= since_wall:
            out.append((at, int(match[2]), match[3], match[4]))
    return out


def failover(cluster: Cluster, trigger: str, groups: int, members: int,
             rtt_ms: float) -> dict[str, Any]:
    topic = f"failover-{trigger}"
    cluster.create_topic(topic, members, 3)
    bootstrap = ",".join(b.address for b in cluster.live().values())
    with Producer(bootstrap) as producer:  # something to fetch in every partition
        for p in range(members):
            producer.send(topic, b"x", partition=p)
        producer.flush()
    leaders, controller = _offsets_leaders(cluster)
    led: dict[int, int] = {}
    for leader in leaders.values():
        led[leader] = led.get(leader, 0) + 1
    candidates = [b for b in led if b != controller]
    if not candidates:
        raise FailoverError(f"only the controller leads {OFFSETS_TOPIC}: {leaders}")
    victim = max(candidates, key=lambda b: led[b])
    names = _groups_led_by(victim, leaders, f"{trigger}-group", groups)
    print(f"group failover: {trigger} broker {victim} (leads {led[victim]} of {len(leaders)} "
          f"offsets partitions; controller {controller}); groups {names}", file=sys.stderr,
          flush=True)
    hosts = Hosts(bootstrap, topic, names, members)
    try:
        hosts.wait(lambda: hosts.settled_at(lambda c: c == victim, members),
                   f"{groups} x {members} members to settle at broker {victim}")
        before = hosts.generations()
        hosts.victim = victim
        process = cluster.brokers[victim].proc
        assert process is not None
        exited: list[float] = []

        def moved() -> bool:
            if not exited and process.poll() is not None:
                exited.append(time.monotonic())
            return hosts.settled_at(lambda c: c not in (None, victim), members)

        wall = time.time()
        hosts.signalled_at = t0 = time.monotonic()
        cluster.brokers[victim].signal(signal.SIGKILL if trigger == "kill" else signal.SIGTERM)
        hosts.wait(moved, f"the groups to move from broker {victim}",
                   cluster.session_ms / 1000 + SETTLE_S)
        views = list(hosts.views.values())
        after = hosts.generations()
        if trigger == "sigterm":  # how long the controlled shutdown took
            hosts.wait(lambda: moved() and bool(exited), "the broker to exit", 60.0)
    finally:
        hosts.stop()
    exited_ms = round((exited[0] - t0) * 1000, 1) if trigger == "sigterm" and exited else None
    partitions = {zlib.crc32(n.encode()) % len(leaders) for n in names}
    starts: dict[int, float] = {}
    ready: dict[int, float] = {}
    for broker_id, broker in cluster.brokers.items():
        if broker_id == victim:
            continue
        for at, partition, old, new in _log_transitions(broker, wall):
            if partition in partitions and new == "Catch-up":
                starts.setdefault(partition, at)
            elif partition in partitions and old == "Catch-up" and new == "Ready":
                ready.setdefault(partition, at)
    acted = [
        datetime.fromisoformat(m[1]).timestamp()
        for broker_id, broker in cluster.brokers.items() if broker_id != victim
        for m in _CONTROLLER.finditer(broker.log.read_text(errors="replace"))
        if datetime.fromisoformat(m[1]).timestamp() >= wall
    ]
    if set(starts) != partitions or set(ready) != partitions:
        raise FailoverError(f"no Catch-up/Ready lines for partitions {sorted(partitions)} in the "
                            f"surviving brokers' logs: {starts}, {ready}")

    def ms(at: float) -> float:
        return round((at - t0) * 1000, 1)

    done = [v.t for v in views]
    line: dict[str, Any] = {
        "bench": "group_failover", "trigger": trigger, "brokers": BROKERS, "groups": groups,
        "members_per_group": members, "offsets_partitions": len(partitions),
        "victim": "not the controller",
        "zookeeper_session_timeout_ms": cluster.session_ms,
        "zookeeper_tick_ms": cluster.zookeeper.tick_time_ms,
        "session_timeout_ms": CONSUMER_SESSION_MS,
        "heartbeat_interval_ms": CONSUMER_HEARTBEAT_MS,
        "noticed_max_ms": ms(max(v.noticed or t0 for v in views)),
        "noticed_median_ms": ms(statistics.median(v.noticed or t0 for v in views)),
        "controller_time_ms": round((min(acted) - wall) * 1000, 1) if acted else None,
        "catch_up_start_max_ms": round((max(starts.values()) - wall) * 1000, 1),
        "catch_up_max_ms": round(max((ready[p] - starts[p]) * 1000 for p in partitions), 1),
        "rediscovered_max_ms": ms(max(v.rediscovered or t0 for v in views)),
        "failover_time_ms": ms(max(done)),
        "failover_median_ms": ms(statistics.median(done)),
        "rebalanced_groups": sum(before[g] != after[g] for g in before),
    }
    if exited_ms is not None:
        line["shutdown_time_ms"] = exited_ms
    floor = (cluster.session_ms * 2 / 3 if trigger == "kill" else 0.0) + 2 * rtt_ms
    line["kafka_classic_floor_ms"] = round(floor, 1)
    line["note"] = NOTES[trigger]
    cluster.restart(victim)
    with Admin(",".join(b.address for b in cluster.live().values())) as admin:
        admin.elect_leaders()  # leadership back to preferred replicas for the next trigger
    cluster.wait_ready(OFFSETS_TOPIC)
    return line


# ------------------------------------------------------------------------ Catch-up


def catch_up(workdir: Path, records: int) -> dict[str, Any]:
    """Write ``records`` offset records into one offsets partition of a stopped broker, start
    it, and read how long it took to load them from its log."""
    # The broker's own modules, only to write its log files while it is stopped.
    from broker.log import PartitionLog
    from broker.log.config import LogConfig
    from coordinator.offsets_topic import OffsetKey, OffsetValue, offset_record
    from protocol.messageset import encode_message_set

    server = start_odradek(workdir)
    try:
        with Admin(server.address) as admin:
            admin.create_topic("catch-up", CATCH_UP_TOPIC_PARTITIONS)
        with Consumer(server.address, group_id="catch-up-seed") as consumer:
            seed = TopicPartition("catch-up", 0)
            consumer.assign([seed])
            consumer.commit(offsets={seed: 1})  # creates __consumer_offsets
        with GroupAdmin(server.address) as admin:
            partitions = len(admin.describe_topics([OFFSETS_TOPIC])[0].partitions)
    finally:
        server.stop()
    partition = zlib.crc32(b"catch-up-seed") % partitions
    groups = [g for g in (f"catch-up-{i}" for i in range(100 * CATCH_UP_GROUPS * partitions))
              if zlib.crc32(g.encode()) % partitions == partition][:CATCH_UP_GROUPS]
    keys = [OffsetKey(g, "catch-up", p) for g in groups for p in range(CATCH_UP_TOPIC_PARTITIONS)]
    directory = workdir / "data" / f"{OFFSETS_TOPIC}-{partition}"
    config = LogConfig.from_mapping({"cleanup_policy": "compact",
                                     "segment_bytes": str(100 * 1024 * 1024)})
    plog = PartitionLog.open(directory, config)
    try:
        now = int(time.time() * 1000)
        for start in range(0, records, 2000):
            plog.append(encode_message_set([
                (*offset_record(keys[i % len(keys)], OffsetValue(i, None, now)), now)
                for i in range(start, min(start + 2000, records))
            ]))
        size = plog.size_bytes()
    finally:
        plog.close()
    wall = time.time()
    server = start_odradek(workdir)
    try:
        deadline = time.monotonic() + SETTLE_S
        # the second start writes a new log
        while not (loaded := _LOADED.search(server.log.read_text(errors="replace"))) \
                or int(loaded[1]) != partition:
            if time.monotonic() > deadline:
                raise FailoverError(f"partition {partition} not loaded within {SETTLE_S:g} s")
            time.sleep(0.05)
    finally:
        server.stop()
    moves = [
        (datetime.fromisoformat(m[1]).timestamp(), m[3], m[4])
        for m in _TRANSITION.finditer(server.log.read_text(errors="replace"))
        if int(m[2]) == partition and datetime.fromisoformat(m[1]).timestamp() >= wall
    ]
    began = next(at for at, _, new in moves if new == "Catch-up")
    ended = next(at for at, old, new in moves if old == "Catch-up" and new == "Ready")
    catch_up_ms = (ended - began) * 1000
    return {
        "bench": "offsets_catch_up", "records": int(loaded[2]), "keys": len(keys),
        "log_mb": round(size / 1e6, 1), "catch_up_time_ms": round(catch_up_ms, 1),
        "load_time_ms": int(loaded[3]),
        "records_per_s": round(int(loaded[2]) / (catch_up_ms / 1000)),
        "target_ms": CATCH_UP_TARGET_MS,
    }


# ------------------------------------------------------------------------------ main


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.group failover",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 groups of 5 members")
    parser.add_argument("--groups", type=int, help="groups (default: 10, quick 3)")
    parser.add_argument("--members", type=int, help="members per group (default: 10, quick 5)")
    parser.add_argument("--records", type=int, default=RECORDS,
                        help="offset records for the Catch-up line (default: %(default)s)")
    parser.add_argument("--session-timeout-ms", type=int, default=SESSION_MS,
                        help="the brokers' zookeeper_session_timeout_ms (default %(default)s)")
    parser.add_argument("--only", choices=("kill", "sigterm", "catch-up"), action="append",
                        help="run only this part (repeatable)")
    args = parser.parse_args(argv)
    groups = args.groups or (3 if args.quick else 10)
    members = args.members or (5 if args.quick else 10)
    parts = args.only or ["kill", "sigterm", "catch-up"]
    stop_on_signals()
    with tempfile.TemporaryDirectory(prefix="odradek-bench-group-failover-") as tmp:
        triggers = [t for t in ("kill", "sigterm") if t in parts]
        if triggers:
            cluster = Cluster(Path(tmp) / "cluster", BROKERS, args.session_timeout_ms)
            try:
                if not start_or_report_missing(cluster, "group_failover"):
                    triggers = []
                bootstrap = ",".join(b.address for b in cluster.live().values())
                rtt = 0.0
                if triggers:
                    with GroupAdmin(bootstrap, timeout_ms=30_000) as admin:
                        admin.find_coordinator("bench")  # the first creates __consumer_offsets
                    rtt = round_trip_ms(bootstrap)
                for trigger in triggers:
                    cluster.emit(failover(cluster, trigger, groups, members, rtt))
            finally:
                cluster.close()
        if "catch-up" in parts:
            print(json.dumps(catch_up(Path(tmp) / "catch-up", args.records)), flush=True)
    return 0
