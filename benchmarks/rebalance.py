"""What a rebalance costs a group that is consuming: ``python -m benchmarks.rebalance [--quick]``.

For N = 10 and 100 members (10 only with ``--quick``), eager, incremental and static members
side by side in one run, on one broker with a topic per N (6 partitions per member at N = 10, 2
at N = 100: 60 and 200 partitions, what two cores keep fetching) into which a producer process
writes a steady 2,000 msgs/s round robin over the partitions. Every member uses the sticky
strategy, so eager and incremental are told the same assignments and differ only in what they
stop while rejoining:

- ``eager``: ``rebalance_protocol="eager"``, dynamic members: every member stops fetching
  everything, commits and rejoins;
- ``incremental``: ``rebalance_protocol="incremental"``, dynamic members: only the partitions
  that move are let go of; the coordinator holds a partition back from its new owner until
  the old one revoked it, and a follow-up round hands it over;
- ``static``: incremental members with a ``group_instance_id``: a member that closes keeps its
  place, and its restart within the session timeout gets its partitions back without a
  rebalance.

The members are ``Consumer`` objects polled in turn (``poll(timeout_ms=0)``) by host processes
of up to 25 members each (``python -m benchmarks.rebalance host ...``; session 6 s, heartbeats
every 500 ms, fetches wait at most 100 ms). A host reports every delivery (per member and
poll: the partitions that had records and how many, with ``time.monotonic``, one clock for
all processes on Linux), every listener call and every change of a member's state, generation
or partitions. The driver restarts a member by a line on the host's stdin: the host closes that
consumer in a thread of its own (commit, revoke, LeaveGroup -- the other members keep being
polled meanwhile) and 1 s later (``down_ms``: a process restarting) creates a new one in its
place, with the same ``group_instance_id`` for static members. Without the pause a dynamic
member's join would land in the round its leave started, and the restart would look like one
rebalance where a real one is two.

Once the group is stable (every member "Part of a group" in one generation, every partition
owned once, for 1.5 s), the steady stream is measured for a few seconds; then member 0
restarts, and one ``rebalance`` line per protocol says, from the restart command on:

- ``rebalances``: how many generations the group went through;
- ``partitions_paused``: the partitions whose owner let go of them (listener's revoked, the
  closing member's too), summed over the event;
- ``unmoved_max_pause_ms``: the longest gap between two deliveries of a partition whose owner
  was the same before and after (``unmoved_partitions``; an eager member's partition that it
  gets back counts: it is paused all the same), up to 1 s after the group is stable again;
  ``steady_p99_gap_ms``: the p99 of every partition's gaps between deliveries in the steady
  window before; ``ratio_unmoved_pause_to_steady_p99``: the one over the other;
- ``throughput_dip_pct``: how far the group's slowest 200 ms of deliveries in that window fell
  below the steady window's mean 200 ms;
- ``time_to_stable_ms``: until the group was last seen changing before it stayed stable (the
  new member in it) -- the down time included;
- ``kafka_classic_floor_ms``: the suite's floor for Kafka's classic protocol (see
  benchmarks/group.py): the down time, then 3 s of group.initial.rebalance.delay.ms plus a
  JoinGroup and a SyncGroup round trip per rebalance, two for a restart (leave, join); a static
  restart rejoins in the two round trips alone.

Then a ``rebalance_rolling`` line per protocol: every member restarted in turn, each once the
group is stable again (held for 0.5 s): ``rebalances`` (eager: 2 per member, static: none),
``partitions_paused``, ``total_time_ms`` (the sum of the restarts' times to stable) and
``unmoved_max_pause_ms`` (the longest pause of a partition unmoved by the restart under way).
At N = 100 a protocol's rolling restart stops after 120 s (``restarted`` says how many: the
whole of it would take 5-10 minutes per protocol). At N = 100 the members, the producer and
the broker share the machine's cores: a member's pause there includes waiting for its host
process to be scheduled and to poll its 24 neighbours, which the steady p99 gap shows too; the
aims read N = 10.

After each protocol the hosts are killed, and the next protocol starts once the coordinator
has expired their members (a session timeout later): 100 expiring members are the
coordinator's work, which must not fall into the next protocol's steady window.

The aims (benchmarks/aims.py): an unmoved partition's longest pause during an incremental
rebalance at most 2x its steady p99 delivery gap (``ratio_unmoved_pause_to_steady_p99``); a
static rolling restart: 0 rebalances. As an area of benchmarks.run (``area``), the counts, the
dip and the floor become measurement lines of their own (``as_measurements``): named like
figures they could not be read as such.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from benchmarks.areas import Earlier, RawLine, TimeLimits, script
from benchmarks.group import KAFKA_INITIAL_DELAY_MS, round_trip_ms
from benchmarks.measurements import unit_of
from benchmarks.processes import ChildLines
from benchmarks.servers import REPO_ROOT, start_odradek
from client import Admin, Consumer, ConsumerRebalanceListener, Producer, TopicPartition
from client.group_admin import GroupAdmin
from protocol.errors import OdradekError

TOPIC = "rebalance-bench"
PARTITIONS = {10: 60, 100: 200}  # by members
RATE = 2_000  # messages per second, round robin over the partitions
SESSION_MS = 6_000  # the broker's default group_min_session_timeout_ms
HEARTBEAT_MS = 500
FETCH_WAIT_MS = 100
PROTOCOLS = ("eager", "incremental", "static")
MEMBERS_PER_HOST = 25
HOST_POLL_S = 0.005
FLUSH_S = 0.1  # how often a host prints the deliveries it saw
BUCKET_S = 0.2
DOWN_S = 1.0  # between a member's close and its new start: a process restart
HOLD_S = 1.5  # stable means stable this long
ROLLING_HOLD_S = 0.5
TAIL_S = 1.0  # the event's window goes on this long after the group is stable
SETTLE_S = 180.0
ROLLING_LIMIT_S = 120.0  # N = 100
PART_OF_GROUP = "Part of a group"


#: the fields of a line that are figures but not named like one (benchmarks/measurements.py),
#: with their units: the area turns each into a measurement line of its own
COUNTS = {"rebalances": "rebalances", "partitions_paused": "partitions",
          "unmoved_partitions": "partitions", "restarted": "members",
          "throughput_dip_pct": "%", "kafka_classic_floor_ms": "ms"}
LIMITS = TimeLimits(quick=240.0, full=1_500.0)


# -------------------------------------------------------------------------------- area


def as_measurements(line: RawLine) -> list[RawLine]:
    """One line of the script as the suite reads it: the counts, the dip and Kafka's floor as
    measurements with the line's parameters (else they would be parameters, and the aims and
    ``--compare`` could not read them), the rest as it was."""
    if "bench" not in line:
        return [line]
    rest = {k: v for k, v in line.items() if k not in COUNTS}
    params = {k: v for k, v in rest.items() if k != "bench" and unit_of(k) is None}
    return [rest, *({"name": f"{line['bench']}.{k}", "value": v, "unit": COUNTS[k],
                     "params": params}
                    for k, v in line.items() if k in COUNTS and v is not None)]


def area(quick: bool, earlier: Earlier) -> Iterator[RawLine]:
    """The ``rebalance`` area of benchmarks.run."""
    for line in script("benchmarks.rebalance", LIMITS)(quick, earlier):
        yield from as_measurements(line)


# ------------------------------------------------------------------------------ producer


def produce(bootstrap: str, topic: str, partitions: int, rate: int) -> int:
    """``str(i)`` to partition ``i % partitions`` at ``rate`` per second until SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    with Producer(bootstrap, linger_ms=5) as producer:
        started, i = time.monotonic(), 0
        while not stop.is_set():
            due = started + i / rate
            if due > time.monotonic():
                stop.wait(due - time.monotonic())
                continue
            producer.send(topic, str(i).encode(), partition=i % partitions)
            i += 1
            if i % 50 == 0:
                producer.poll()
    return 0


# ------------------------------------------------------------------------- member host


class _Out:
    """The host's JSON lines, from the polling loop and the closing threads alike."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __call__(self, line: dict[str, Any]) -> None:
        text = json.dumps(line)
        with self._lock:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()


class _Listener(ConsumerRebalanceListener):
    def __init__(self, out: _Out, member: int, incarnation: int) -> None:
        self.out, self.member, self.incarnation = out, member, incarnation

    def _say(self, kind: str, partitions: list[TopicPartition]) -> None:
        self.out({"m": self.member, "inc": self.incarnation, "ev": kind, "t": time.monotonic(),
                  "p": sorted(tp.partition for tp in partitions)})

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self._say("revoked", revoked)

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self._say("assigned", assigned)


def host(bootstrap: str, topic: str, group: str, protocol: str, first: int, count: int) -> int:
    """Members ``first`` .. ``first + count - 1`` of ``group``, polled in turn. A line ``restart
    M`` on stdin closes member M (in a thread) and starts it again; SIGTERM ends the host."""
    out = _Out()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    commands: queue.Queue[int] = queue.Queue()
    reopen: queue.Queue[int] = queue.Queue()

    def read_commands() -> None:
        for line in sys.stdin:
            words = line.split()
            if words[:1] == ["restart"]:
                commands.put(int(words[1]))

    threading.Thread(target=read_commands, daemon=True).start()
    incarnations = dict.fromkeys(range(first, first + count), 0)

    def start(member: int) -> Consumer:
        consumer = Consumer(
            bootstrap, group_id=group, client_id=f"{group}-{member}",
            group_instance_id=f"{group}-{member}" if protocol == "static" else None,
            rebalance_protocol="eager" if protocol == "eager" else "incremental",
            partition_assignment_strategy="sticky", auto_offset_reset="latest",
            session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
            fetch_max_wait_ms=FETCH_WAIT_MS)
        consumer.subscribe([topic], listener=_Listener(out, member, incarnations[member]))
        return consumer

    def close(member: int, consumer: Consumer) -> None:
        with contextlib.suppress(Exception):
            consumer.close(timeout_ms=10_000)
        out({"m": member, "inc": incarnations[member], "ev": "closed", "t": time.monotonic()})
        time.sleep(DOWN_S)  # the process restarting
        reopen.put(member)

    polled = {m: start(m) for m in incarnations}
    reported: dict[int, tuple[Any, ...]] = {}
    deliveries: list[list[Any]] = []
    flushed = time.monotonic()
    try:
        while not stop.is_set():
            while not commands.empty():
                member = commands.get()
                threading.Thread(target=close, args=(member, polled.pop(member)),
                                 daemon=True).start()
            while not reopen.empty():
                member = reopen.get()
                incarnations[member] += 1
                polled[member] = start(member)
            for member, consumer in polled.items():
                try:
                    records = consumer.poll(timeout_ms=0)
                except OdradekError as exc:  # the member goes on, as an application's would
                    print(f"member {member}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    continue
                now = time.monotonic()
                if records:
                    counts = Counter(r.partition for r in records)
                    deliveries.append([member, now, sorted(counts.items())])
                seen = (incarnations[member], consumer.state.value, consumer.generation,
                        sorted(tp.partition for tp in consumer.assignment()))
                if reported.get(member) != seen:
                    reported[member] = seen
                    inc, state, generation, partitions = seen
                    out({"m": member, "inc": inc, "state": state, "gen": generation,
                         "p": partitions, "t": now})
            if time.monotonic() - flushed >= FLUSH_S:
                if deliveries:
                    out({"d": deliveries})
                deliveries, flushed = [], time.monotonic()
            time.sleep(HOST_POLL_S)
    finally:
        if deliveries:
            out({"d": deliveries})
    return 0


# ------------------------------------------------------------------------------ driver


@dataclass
class MemberView:
    inc: int = -1
    state: str = ""
    gen: int = -1
    partitions: tuple[int, ...] = ()
    t: float = 0.0


@dataclass
class Recorded:
    """Everything the hosts said, in the driver's terms."""

    deliveries: dict[int, list[float]] = field(default_factory=dict)  # partition -> times
    buckets: Counter[int] = field(default_factory=Counter)  # 200 ms bucket -> messages
    revoked: list[tuple[float, int, int, tuple[int, ...]]] = field(default_factory=list)
    generations: list[tuple[float, int]] = field(default_factory=list)  # first seen


class Group:
    """One group's host processes and what they report, read through one selector."""

    def __init__(self, bootstrap: str, topic: str, group: str, protocol: str, members: int,
                 partitions: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        self.members, self.partitions = members, partitions
        self.views = {m: MemberView() for m in range(members)}
        self.rec = Recorded()
        self.host_of: dict[int, subprocess.Popen[bytes]] = {}
        self.procs: list[subprocess.Popen[bytes]] = []
        self._lines = ChildLines()
        self._seen_generations: set[int] = set()
        for first in range(0, members, MEMBERS_PER_HOST):
            count = min(MEMBERS_PER_HOST, members - first)
            proc = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.rebalance", "host", bootstrap, topic, group,
                 protocol, str(first), str(count)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=REPO_ROOT,
            )
            self._lines.add(len(self.procs), proc)
            self.procs.append(proc)
            for m in range(first, first + count):
                self.host_of[m] = proc

    def read(self, timeout: float) -> bool:
        """Take in what the hosts printed within ``timeout``; True if a member's view changed."""
        changed = False
        for key, line in self._lines.read(timeout):
            if line is None:
                raise RuntimeError(f"member host {key} exited: "
                                   f"{self.procs[cast(int, key)].wait()}")
            if "d" in line:
                for _, t, counts in line["d"]:
                    for p, n in counts:
                        self.rec.deliveries.setdefault(p, []).append(t)
                        self.rec.buckets[int(t / BUCKET_S)] += n
            elif line.get("ev") == "revoked" and line["p"]:
                self.rec.revoked.append((line["t"], line["m"], line["inc"], tuple(line["p"])))
            elif "state" in line:
                view = self.views[line["m"]]
                if line["inc"] < view.inc:
                    continue
                view.inc, view.state, view.gen = line["inc"], line["state"], line["gen"]
                view.partitions, view.t = tuple(line["p"]), line["t"]
                if view.gen >= 0 and view.gen not in self._seen_generations:
                    self._seen_generations.add(view.gen)
                    self.rec.generations.append((line["t"], view.gen))
                changed = True
        return changed

    def read_for(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            self.read(min(left, 0.05))

    def is_stable(self, incarnations: dict[int, int]) -> bool:
        views = self.views.values()
        if any(v.state != PART_OF_GROUP for v in views) or len({v.gen for v in views}) != 1:
            return False
        if any(self.views[m].inc != inc for m, inc in incarnations.items()):
            return False
        owned = sorted(p for v in views for p in v.partitions)
        return owned == list(range(self.partitions))

    def wait_stable(self, incarnations: dict[int, int], hold: float) -> float:
        """The time of the last change before the group stayed stable for ``hold`` seconds."""
        deadline = time.monotonic() + SETTLE_S
        since: float | None = None
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the group was not stable within {SETTLE_S:g} s")
            changed = self.read(0.05)
            now = time.monotonic()
            if not self.is_stable(incarnations):
                since = None
            elif changed or since is None:
                since = now
            elif now - since >= hold:
                return max(v.t for v in self.views.values())

    def owners(self) -> dict[int, tuple[int, int]]:
        """partition -> (member, incarnation) now."""
        return {p: (m, v.inc) for m, v in self.views.items() for p in v.partitions}

    def generation(self) -> int:
        return max(v.gen for v in self.views.values())

    def restart(self, member: int) -> None:
        stdin = self.host_of[member].stdin
        assert stdin is not None
        stdin.write(f"restart {member}\n".encode())
        stdin.flush()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs:
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        self._lines.close()


# ---------------------------------------------------------------------------- figures


def gaps_within(times: Sequence[float], start: float, end: float) -> list[float]:
    """The gaps between consecutive deliveries that end within ``start`` .. ``end``, and the
    one still open at ``end`` (nothing delivered since)."""
    times = sorted(times)  # two owners' hosts report apart
    gaps = [b - a for a, b in itertools.pairwise(times) if start < b <= end]
    before = [t for t in times if t <= end]
    if before:
        gaps.append(end - before[-1])
    return gaps


def p99(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0


def steady_gap_p99(rec: Recorded, start: float, end: float) -> float:
    gaps = [b - a for times in rec.deliveries.values()
            for a, b in itertools.pairwise(sorted(times)) if start < a and b <= end]
    return p99(gaps)


def unmoved_max_pause(rec: Recorded, unmoved: Sequence[int], start: float, end: float) -> float:
    return max((g for p in unmoved for g in gaps_within(rec.deliveries.get(p, []), start, end)),
               default=0.0)


def bucket_mean(rec: Recorded, start: float, end: float) -> float:
    keys = range(int(start / BUCKET_S) + 1, int(end / BUCKET_S))  # whole buckets only
    return sum(rec.buckets[k] for k in keys) / len(keys) if keys else 0.0


def throughput_dip_pct(rec: Recorded, steady: tuple[float, float], start: float,
                       end: float) -> float:
    mean = bucket_mean(rec, *steady)
    keys = range(int(start / BUCKET_S) + 1, int(end / BUCKET_S))
    lowest = min((rec.buckets[k] for k in keys), default=mean)
    return round(max(0.0, 100 * (1 - lowest / mean)), 1) if mean else 0.0


def unmoved_partitions(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]],
                       restarted: int) -> list[int]:
    return [p for p, owner in before.items() if after.get(p) == owner and owner[0] != restarted]


def paused(rec: Recorded, start: float, end: float) -> int:
    return sum(len(ps) for t, _, _, ps in rec.revoked if start <= t <= end)


def kafka_floor_ms(protocol: str, rtt_ms: float, restarts: int = 1) -> float:
    """Per restart: the member's down time, then benchmarks/group.py's floor per rebalance
    (group.initial.rebalance.delay.ms and a JoinGroup and a SyncGroup round trip), two
    rebalances for a dynamic member (it leaves, it joins); a static member's restart is its
    JoinGroup and SyncGroup alone."""
    rounds = 2 * rtt_ms if protocol == "static" else 2 * (KAFKA_INITIAL_DELAY_MS + 2 * rtt_ms)
    return round(restarts * (DOWN_S * 1000 + rounds), 1)


# ---------------------------------------------------------------------------- scenarios


@dataclass(frozen=True)
class Sizes:
    members: int
    steady_s: float
    rolling_limit_s: float | None


def restart_once(group: Group, incarnations: dict[int, int], member: int,
                 hold: float) -> tuple[float, float, float, dict[int, tuple[int, int]]]:
    """Restart ``member``; (command time, stable time, generation before, owners before)."""
    before, generation = group.owners(), group.generation()
    incarnations[member] += 1
    t0 = time.monotonic()
    group.restart(member)
    stable = group.wait_stable(incarnations, hold)
    return t0, stable, generation, before


def measure(bootstrap: str, topic: str, sizes: Sizes, protocol: str, partitions: int,
            rtt_ms: float) -> list[dict[str, Any]]:
    members = sizes.members
    name = f"rebalance-{protocol}-{members}-{os.getpid()}"
    group = Group(bootstrap, topic, name, protocol, members, partitions)
    common = {"members": members, "partitions": partitions, "protocol": protocol,
              "strategy": "sticky", "rate_per_s": RATE, "session_timeout_ms": SESSION_MS,
              "heartbeat_interval_ms": HEARTBEAT_MS, "down_ms": round(DOWN_S * 1000)}
    try:
        incarnations = dict.fromkeys(range(members), 0)
        group.wait_stable(incarnations, HOLD_S)
        steady_start = time.monotonic()
        group.read_for(sizes.steady_s)
        steady = (steady_start, time.monotonic())
        steady_p99 = steady_gap_p99(group.rec, *steady)
        t0, stable, generation, before = restart_once(group, incarnations, 0, HOLD_S)
        group.read_for(max(0.0, stable + TAIL_S + 2 * FLUSH_S - time.monotonic()))
        end = stable + TAIL_S
        unmoved = unmoved_partitions(before, group.owners(), 0)
        pause = unmoved_max_pause(group.rec, unmoved, t0, end)
        event = {
            "bench": "rebalance", **common,
            "rebalances": group.generation() - generation,
            "partitions_paused": paused(group.rec, t0, end),
            "unmoved_partitions": len(unmoved),
            "unmoved_max_pause_ms": round(pause * 1000, 1),
            "steady_p99_gap_ms": round(steady_p99 * 1000, 1),
            "ratio_unmoved_pause_to_steady_p99":
                round(pause / steady_p99, 2) if steady_p99 else None,
            "throughput_dip_pct": throughput_dip_pct(group.rec, steady, t0, end),
            "time_to_stable_ms": round((stable - t0) * 1000, 1),
            "kafka_classic_floor_ms": kafka_floor_ms(protocol, rtt_ms),
        }
        print(json.dumps(event), flush=True)
        started, first_generation = time.monotonic(), group.generation()
        total, worst, restarted, rolling_paused = 0.0, 0.0, 0, 0
        for member in range(members):
            if sizes.rolling_limit_s is not None and \
                    time.monotonic() - started > sizes.rolling_limit_s:
                break
            t0, stable, _, before = restart_once(group, incarnations, member, ROLLING_HOLD_S)
            total += stable - t0
            unmoved = unmoved_partitions(before, group.owners(), member)
            worst = max(worst, unmoved_max_pause(group.rec, unmoved, t0, stable))
            rolling_paused += paused(group.rec, t0, stable)
            restarted += 1
        rolling = {
            "bench": "rebalance_rolling", **common, "restarted": restarted,
            "rebalances": group.generation() - first_generation,
            "partitions_paused": rolling_paused,
            "total_time_ms": round(total * 1000, 1),
            "unmoved_max_pause_ms": round(worst * 1000, 1),
            "kafka_classic_floor_ms": kafka_floor_ms(protocol, rtt_ms, restarted),
        }
        print(json.dumps(rolling), flush=True)
        return [event, rolling]
    finally:
        group.stop()
        wait_expired(bootstrap, name)


def wait_expired(bootstrap: str, group: str) -> None:
    """Wait until the coordinator has expired the stopped members' sessions: their expiry is
    the coordinator's work, and must not fall into the next case's steady window."""
    stopped = time.monotonic()
    with GroupAdmin(bootstrap) as admin:
        while admin.describe_group(group).members:
            if time.monotonic() - stopped > SESSION_MS / 1000 + SETTLE_S:
                raise TimeoutError(f"the members of {group} did not expire")
            time.sleep(0.2)
    print(f"rebalance: {group}'s members expired {time.monotonic() - stopped:.1f} s after they "
          f"stopped", file=sys.stderr, flush=True)


@contextlib.contextmanager
def producing(bootstrap: str, topic: str, partitions: int
              ) -> Iterator[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.rebalance", "produce", bootstrap, topic,
         str(partitions), str(RATE)], stdin=subprocess.DEVNULL, env=env, cwd=REPO_ROOT)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run(sizes: Sequence[Sizes], protocols: Sequence[str]) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="odradek-bench-rebalance-") as tmp,
        start_odradek(Path(tmp)) as server,
    ):
        rtt = round_trip_ms(server.address)
        for size in sizes:
            partitions = PARTITIONS.get(size.members, 2 * size.members)
            topic = f"{TOPIC}-{size.members}"
            with Admin(server.address) as admin:
                admin.create_topic(topic, partitions)
            with producing(server.address, topic, partitions) as producer:
                for protocol in protocols:
                    if producer.poll() is not None:
                        raise RuntimeError(f"the producer exited: {producer.returncode}")
                    measure(server.address, topic, size, protocol, partitions, rtt)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["host"]:
        bootstrap, topic, group, protocol, first, count = args_list[1:7]
        return host(bootstrap, topic, group, protocol, int(first), int(count))
    if args_list[:1] == ["produce"]:
        return produce(args_list[1], args_list[2], int(args_list[3]), int(args_list[4]))
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rebalance", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10 members only, shorter phases")
    parser.add_argument("--members", type=int, action="append",
                        help="group size (repeatable; default 10 and 100, quick 10)")
    parser.add_argument("--protocol", choices=PROTOCOLS, action="append",
                        help="only this protocol (repeatable)")
    args = parser.parse_args(args_list)
    counts = args.members or ([10] if args.quick else [10, 100])
    steady = 3.0 if args.quick else 5.0
    sizes = [Sizes(n, steady, None if n <= 10 else ROLLING_LIMIT_S) for n in counts]
    run(sizes, args.protocol or PROTOCOLS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
