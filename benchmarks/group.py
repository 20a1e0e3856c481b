"""Rebalance time with real consumers: ``python -m benchmarks.group [--quick]``.

Starts one broker (default settings) and a topic of 60 partitions, one message in each, then
for N = 3, 10 and 30 (3 and 10 with ``--quick``) starts N ``Consumer`` processes of one group
(``python -m benchmarks.group member ...``). Once they share the topic in one generation, one
member leaves -- first by ``close()`` (SIGTERM: commit, LeaveGroup), then another by SIGKILL
(nothing said: the coordinator notices when its session times out) -- and the line reports the
milliseconds from the signal until every remaining member is consuming its new assignment: its
``on_partitions_assigned`` has run, which happens once the new partitions' committed offsets are
known and fetching starts.

Each line carries what to compare with: the members' ``session_timeout_ms`` and
``heartbeat_interval_ms`` (members learn of a rebalance from their next heartbeat, which only
``poll()`` sends), and ``kafka_classic_floor_ms``, a lower bound for Kafka's classic protocol on
the same event: the 3 s group.initial.rebalance.delay.ms plus a round trip for each of its two
phases (JoinGroup, SyncGroup) -- and for SIGKILL the session timeout before any of it. The round
trip is measured here (ApiVersions to the same broker).

``python -m benchmarks.group failover [--quick]`` measures coordinator failover on a cluster
instead: kill -9 and SIGTERM of the broker coordinating 10 groups of 10 members (3 of 5 with
``--quick``) until every member is Steady with its partitions at the new coordinator, and the
Catch-up of an offsets partition holding 1,000,000 offset records (benchmarks/group_failover.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from benchmarks.processes import ChildLines
from benchmarks.servers import REPO_ROOT, start_odradek
from client import Admin, Consumer, ConsumerRebalanceListener, Producer, TopicPartition

TOPIC = "group-bench"
PARTITIONS = 60
SESSION_MS = 6_000  # the broker's default group_min_session_timeout_ms
HEARTBEAT_MS = 500
KAFKA_INITIAL_DELAY_MS = 3_000
SETTLE_S = 120.0


# ------------------------------------------------------------------------------ member


class _Report(ConsumerRebalanceListener):
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        # everything it owns now: an incremental rebalance names only the new partitions
        owned = self.consumer.assignment()
        print(json.dumps({"generation": self.consumer.generation, "t": time.monotonic(),
                          "partitions": sorted(f"{tp.partition}" for tp in owned)}),
              flush=True)


def member(bootstrap: str, group: str) -> int:
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    consumer = Consumer(bootstrap, group_id=group, auto_offset_reset="latest",
                        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                        fetch_max_wait_ms=100)
    consumer.subscribe([TOPIC], listener=_Report(consumer))
    try:
        while not stop:
            consumer.poll(timeout_ms=100)
    finally:
        consumer.close()
    return 0


# ------------------------------------------------------------------------------ driver


class Members:
    """N member processes and the assignments they report (read through one selector)."""

    def __init__(self, bootstrap: str, group: str, count: int) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-m", "benchmarks.group", "member", bootstrap, group],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env, cwd=REPO_ROOT,
            )
            for _ in range(count)
        ]
        self.latest: dict[int, dict[str, Any]] = {}  # member index -> its last assignment
        self._lines = ChildLines()
        for index, proc in enumerate(self.procs):
            self._lines.add(index, proc)

    def read(self, timeout: float) -> None:
        for index, report in self._lines.read(timeout):
            if report is not None:
                self.latest[cast(int, index)] = report

    def wait(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + SETTLE_S
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not within {SETTLE_S} s")
            self.read(0.05)

    def settled(self, alive: Sequence[int]) -> int | None:
        """The generation in which ``alive`` share every partition, else None."""
        reports = [self.latest.get(i) for i in alive]
        if any(r is None for r in reports):
            return None
        generations: set[int] = {r["generation"] for r in reports if r is not None}
        owned = [p for r in reports if r is not None for p in r["partitions"]]
        if len(generations) != 1 or sorted(owned, key=int) != [str(p) for p in range(PARTITIONS)]:
            return None
        return generations.pop()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs:
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        self._lines.close()


def rebalance_after(members: Members, alive: list[int], leaver: int, signum: int) -> float:
    """Milliseconds from signalling ``leaver`` until the others consume a new generation."""
    before = members.settled(alive)
    assert before is not None
    rest = [i for i in alive if i != leaver]
    started = time.monotonic()
    members.procs[leaver].send_signal(signum)
    members.wait(lambda: (members.settled(rest) or 0) > before, "the rebalance")
    finished: float = max(members.latest[i]["t"] for i in rest)
    alive.remove(leaver)
    return (finished - started) * 1000


def round_trip_ms(bootstrap: str) -> float:
    with Admin(bootstrap) as admin:
        admin.api_versions()
        samples = []
        for _ in range(20):
            started = time.perf_counter()
            admin.api_versions()
            samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def measure(bootstrap: str, count: int, rtt_ms: float) -> list[dict[str, Any]]:
    group = f"bench-{count}-{os.getpid()}"
    members = Members(bootstrap, group, count)
    try:
        alive = list(range(count))
        members.wait(lambda: members.settled(alive) is not None, f"{count} members to settle")
        lines = []
        for trigger, signum, floor in (
            ("close", signal.SIGTERM, KAFKA_INITIAL_DELAY_MS + 2 * rtt_ms),
            ("kill", signal.SIGKILL, SESSION_MS + KAFKA_INITIAL_DELAY_MS + 2 * rtt_ms),
        ):
            elapsed = rebalance_after(members, alive, alive[0], signum)
            lines.append({
                "bench": "group_rebalance", "members": count, "trigger": trigger,
                "rebalance_ms": round(elapsed, 1), "session_timeout_ms": SESSION_MS,
                "heartbeat_interval_ms": HEARTBEAT_MS,
                "kafka_classic_floor_ms": round(floor, 1),
            })
        return lines
    finally:
        members.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["member"]:
        return member(args_list[1], args_list[2])
    if args_list[:1] in (["failover"], ["failover-members"]):
        from benchmarks import group_failover  # kazoo and the cluster only for this

        if args_list[0] == "failover":
            return group_failover.main(args_list[1:])
        bootstrap, topic, group, members = args_list[1:5]
        return group_failover.host_members(bootstrap, topic, group, int(members))
    parser = argparse.ArgumentParser(prog="python -m benchmarks.group")
    parser.add_argument("--quick", action="store_true", help="N = 3 and 10 only")
    args = parser.parse_args(args_list)
    sizes = (3, 10) if args.quick else (3, 10, 30)
    with (
        tempfile.TemporaryDirectory(prefix="odradek-bench-group-") as tmp,
        start_odradek(Path(tmp)) as server,
    ):
        with Admin(server.address) as admin:
            admin.create_topic(TOPIC, PARTITIONS)
        with Producer(server.address) as producer:  # something to fetch everywhere
            for p in range(PARTITIONS):
                producer.send(TOPIC, b"x", partition=p)
            producer.flush()
        rtt = round_trip_ms(server.address)
        for count in sizes:
            for line in measure(server.address, count, rtt):
                print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
