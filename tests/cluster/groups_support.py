"""Consumer groups on a cluster, for the coordinator failover tests: consumer processes
(``tests/groups/member.py`` through ``tests.groups.support.Members``) that write what they
processed to a file each, a sampler of the group's committed offsets, the ledger that checks
what they processed, and the coordinator's view of the group.

    run = GroupRun(cluster, tmp_path, "billing", messages=5_000)
    run.produce()
    run.start_members(4)
    run.sampler.start()                     # committed offsets, sampled all along
    run.wait_processed(run.messages // 4, 60, "before the fault")
    ... the fault ...
    run.wait_settled(4, 45, not_on=old_coordinator, since=fault_at)
    run.wait_all_processed(60)
    run.stop()
    run.ledger().check(run.expected)        # every message, duplicates only uncommitted
    run.sampler.check()                     # no committed offset went backwards

Message counts: ``ODRADEK_TEST_FAILOVER_MESSAGES`` (default 5,000; the issue's figure is
50,000). Consumers are paced (``--process-ms`` per batch, batches scaled to the count) so a
run consumes for about ``CONSUME_SECONDS`` whatever the count, and a fault injected after a
quarter of the messages lands in the middle of it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from client.consumer import Consumer
from client.group_admin import GroupAdmin, GroupDescription
from client.offsets import LATEST
from client.producer import Producer
from client.records import TopicPartition
from client.subscription import ConsumerRebalanceListener
from tests.cluster.conftest import Cluster, until
from tests.groups.support import MemberProcess, Members, of_kind

MESSAGES = int(os.environ.get("ODRADEK_TEST_FAILOVER_MESSAGES", "5000"))
TOPIC = "numbers"
PARTITIONS = 8
SESSION_MS = 3_000
HEARTBEAT_MS = 300
PROCESS_MS = 100  # work per batch
MEMBERS = 4
#: how long 4 members take to consume every message when nothing goes wrong (roughly)
CONSUME_SECONDS = 8
#: broker settings for these tests (on top of the cluster fixture's): 3 s sessions allowed, a
#: first round that waits a second for more members
GROUP_SETTINGS: dict[str, Any] = {
    "group_min_session_timeout_ms": 200,
    "group_initial_rebalance_delay_ms": 1_000,
}

Offsets = dict[TopicPartition, int]


def bootstrap_of(cluster: Cluster, *, but: int | None = None) -> str:
    """Every broker of the cluster (but one), as a bootstrap list."""
    return ",".join(p.bootstrap for i, p in sorted(cluster.brokers.items())
                    if i != but and p.port)


def live_bootstrap(cluster: Cluster) -> str:
    """The brokers running and not stopped (SIGSTOP), as a bootstrap list: for the test's own
    admin requests, which should not spend their time on a broker known to be gone."""
    return ",".join(p.bootstrap for _, p in sorted(cluster.running().items())
                    if process_state(p.pid) != "T")


def process_state(pid: int) -> str:
    """The kernel's one-letter state of a process (``T``: stopped by a signal)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


# --------------------------------------------------------------------------- the group's view


def describe(bootstrap: str, group: str, timeout_ms: int = 3_000) -> GroupDescription:
    with GroupAdmin(bootstrap, timeout_ms=timeout_ms, request_timeout_ms=timeout_ms) as admin:
        return admin.describe_group(group)


def committed(bootstrap: str, group: str, timeout_ms: int = 3_000) -> Offsets:
    with GroupAdmin(bootstrap, timeout_ms=timeout_ms, request_timeout_ms=timeout_ms) as admin:
        return {tp: c.offset for tp, c in admin.committed_offsets(group).items()}


def steady_with(bootstrap: str, group: str, members: int, *, not_on: int | None = None,
                topic_partitions: int | None = None) -> GroupDescription | None:
    """The group's description if it is Steady with ``members`` members (coordinated by
    another broker than ``not_on``; every partition of TOPIC assigned), else None."""
    found = describe(bootstrap, group)
    if found.state != "Steady" or len(found.members) != members:
        return None
    if not_on is not None and found.coordinator.node_id == not_on:
        return None
    if topic_partitions is not None:
        owned = sorted(tp.partition for m in found.members for tp in m.assignment
                       if tp.topic == TOPIC)
        if owned != list(range(topic_partitions)):
            return None
    return found


class CommittedSampler:
    """Samples the group's committed offsets (OffsetFetch through whichever broker is the
    coordinator) every ``interval`` seconds in a thread, until ``stop``; ``check`` asserts
    that no partition's committed offset ever went backwards."""

    def __init__(self, bootstrap: Callable[[], str], group: str, interval: float = 0.2
                 ) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.interval = interval
        self.samples: list[tuple[float, Offsets]] = []
        self.errors: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="committed-sampler")

    def start(self) -> CommittedSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(30)

    def _run(self) -> None:
        admin: GroupAdmin | None = None
        while not self._stop.is_set():
            try:
                if admin is None:
                    admin = GroupAdmin(self.bootstrap(), timeout_ms=3_000,
                                       request_timeout_ms=2_000)
                offsets = admin.committed_offsets(self.group)
                self.samples.append(
                    (time.monotonic(), {tp: c.offset for tp, c in offsets.items()}))
            except Exception as exc:  # a broker gone, a coordinator moving: sample again
                self.errors[type(exc).__name__] += 1
                if admin is not None:
                    admin.close()
                    admin = None
            self._stop.wait(self.interval)
        if admin is not None:
            admin.close()

    def check(self) -> int:
        """No committed offset went backwards between two samples; the number of samples."""
        last: Offsets = {}
        for _at, offsets in self.samples:
            for tp, offset in offsets.items():
                before = last.get(tp)
                assert before is None or offset >= before, (
                    f"the committed offset of {tp} went back from {before} to {offset}")
                last[tp] = offset
            # a partition that disappears from the answer would be a lost commit too
            missing = set(last) - set(offsets)
            assert not missing, f"committed offsets of {sorted(missing)} vanished"
        return len(self.samples)


# -------------------------------------------------------------------------- what was processed


def read_events(path: Path) -> list[dict[str, Any]]:
    """The JSON events a member wrote to its file (a torn last line left out)."""
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


@dataclass
class Ledger:
    """What the members processed, from their files: each delivery as (partition, offset),
    and which deliveries no successful commit covered (the uncommitted window: a batch whose
    commit failed, or the last batches of a member that stopped before committing them)."""

    deliveries: Counter[tuple[str, int]] = field(default_factory=Counter)
    values: set[str] = field(default_factory=set)
    window: set[tuple[str, int]] = field(default_factory=set)
    commit_failures: int = 0

    @classmethod
    def from_files(cls, paths: Iterable[Path]) -> Ledger:
        ledger = cls()
        for path in paths:
            pending: list[tuple[str, int]] = []
            for event in read_events(path):
                if event["event"] == "records":
                    for partition, offset, value in event["records"]:
                        ledger.deliveries[(partition, offset)] += 1
                        ledger.values.add(value)
                        pending.append((partition, offset))
                elif event["event"] == "committed":
                    pending = []
                elif event["event"] == "commit_failed":
                    ledger.commit_failures += 1
                    ledger.window.update(pending)
                    pending = []
            ledger.window.update(pending)
        return ledger

    def check(self, expected: Iterable[str]) -> int:
        """Every expected value processed at least once; a (partition, offset) processed
        twice only if it was in the uncommitted window. The number of duplicates."""
        missing = sorted(set(expected) - self.values, key=int)
        assert not missing, f"{len(missing)} messages never processed, e.g. {missing[:10]}"
        duplicates = {k: n - 1 for k, n in self.deliveries.items() if n > 1}
        outside = sorted(set(duplicates) - self.window)
        assert not outside, (
            f"{len(outside)} messages processed again although a commit covered them, "
            f"e.g. {outside[:10]}")
        return sum(duplicates.values())


# ------------------------------------------------------------------------------------ the run


class GroupRun:
    """One group of consumer processes on TOPIC, each writing its events to a file."""

    def __init__(self, cluster: Cluster, directory: Path, group: str, *,
                 messages: int = MESSAGES) -> None:
        self.cluster = cluster
        self.directory = directory
        self.group = group
        self.messages = messages
        self.expected = [str(i) for i in range(messages)]
        self.bootstrap = bootstrap_of(cluster)
        # batches sized so that MEMBERS members take about CONSUME_SECONDS
        self.batch = max(5, messages * PROCESS_MS // (MEMBERS * CONSUME_SECONDS * 1000))
        # a commit in every generation: "every member committing again" after a fault holds
        # also for a member whose partitions were consumed to their end before they came to it
        self.members = Members(
            self.bootstrap, group, "--topics", TOPIC, "--commit", "sync",
            "--commit-each-generation",
            "--session-timeout-ms", str(SESSION_MS), "--heartbeat-interval-ms", str(HEARTBEAT_MS),
            "--max-poll-records", str(self.batch), "--process-ms", str(PROCESS_MS),
            "--request-timeout-ms", "10000",
        )
        self.paths: list[Path] = []
        self.sampler = CommittedSampler(self.live_bootstrap, group)

    def live_bootstrap(self) -> str:
        return live_bootstrap(self.cluster)

    # ------------------------------------------------------------------------- set-up

    def produce(self) -> None:
        """TOPIC with PARTITIONS partitions on every broker, and the numbered messages in it
        (acks=all: every one is on the ISR)."""
        self.cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        with Producer(self.bootstrap, acks="all", linger_ms=5,
                      delivery_timeout_ms=60_000) as producer:
            futures = [producer.send(TOPIC, v.encode(), key=v.encode()) for v in self.expected]
            producer.flush(120)
        for future in futures:
            future.result(0)

    def start_member(self, *extra: str) -> MemberProcess:
        path = self.directory / f"{self.group}-member-{len(self.members.started)}.jsonl"
        self.paths.append(path)
        return self.members.start("--out", str(path), *extra)

    def start_members(self, count: int) -> list[MemberProcess]:
        return [self.start_member() for _ in range(count)]

    def stop(self) -> None:
        """Members closed (SIGTERM: they leave the group) and the sampler stopped; a member
        that does not end in time is killed. Safe to call twice."""
        for member in self.members.started:
            member.signal(signal.SIGCONT)  # in case a test left it stopped
            member.signal(signal.SIGTERM)  # all at once: they leave while the others still run
        for member in self.members.started:
            member.terminate()
        self.sampler.stop()

    # ------------------------------------------------------------------------- progress

    def processed(self) -> int:
        """Distinct messages processed so far (from the members' live events)."""
        seen: set[tuple[str, int]] = set()
        for member in self.members.started:
            for event in of_kind(member.snapshot(), "records"):
                seen.update((p, o) for p, o, _ in event["records"])
        return len(seen)

    def wait_processed(self, count: int, timeout: float, what: str) -> None:
        until(lambda: self.processed() >= count, timeout, f"{what}: {count} messages processed")

    def wait_steady(self, members: int, timeout: float, *, not_on: int | None = None
                    ) -> GroupDescription:
        found: GroupDescription = until(
            lambda: steady_with(self.live_bootstrap(), self.group, members, not_on=not_on,
                                topic_partitions=PARTITIONS),
            timeout, f"group {self.group} Steady with {members} members"
                     + ("" if not_on is None else f", not coordinated by broker {not_on}"))
        return found

    def wait_settled(self, members: int, timeout: float, *, not_on: int, since: float
                     ) -> tuple[float, float, GroupDescription]:
        """After a fault at ``since`` (time.monotonic): until the group is Steady with
        ``members`` members under another coordinator than ``not_on`` and every member has had
        a commit accepted since the fault. Returns the seconds from the fault to the first
        Steady seen there (which may be the group as loaded, before its members are back),
        the seconds to the start of the Steady spell it is in at the end (same coordinator
        and generation), and the description."""
        deadline = time.monotonic() + timeout
        first: float | None = None
        spell: tuple[float, int, int] | None = None  # since, coordinator, generation
        last_error: Exception | None = None
        while True:
            now = time.monotonic()
            try:
                found = steady_with(self.live_bootstrap(), self.group, members, not_on=not_on,
                                    topic_partitions=PARTITIONS)
            except Exception as exc:  # no answer is not an answer: the spell goes on
                last_error = exc
            else:
                if found is None:
                    spell = None
                else:
                    first = now if first is None else first
                    key = (found.coordinator.node_id, found.generation)
                    if spell is None or spell[1:] != key:
                        spell = (now, *key)
                    if self.commits_resumed(since) is not None:
                        return first - since, spell[0] - since, found
            if now > deadline:
                raise AssertionError(
                    f"not within {timeout:g} s: group {self.group} Steady with {members} "
                    f"members under another coordinator than {not_on}, every member "
                    f"committing again (last error: {last_error!r})")
            time.sleep(0.05)  # the next look at the group

    def wait_all_processed(self, timeout: float) -> None:
        """Every message processed and committed: the committed offsets are the log ends."""
        self.wait_processed(self.messages, timeout, "the whole topic")

        def all_committed() -> bool:
            offsets = committed(self.live_bootstrap(), self.group)
            ends = self.log_ends()
            return all(offsets.get(tp, -1) == end for tp, end in ends.items())

        until(all_committed, timeout, "every partition committed up to its log end")

    def log_ends(self) -> Offsets:
        with GroupAdmin(self.live_bootstrap(), timeout_ms=5_000) as admin:
            ends = admin.list_offsets({TopicPartition(TOPIC, p): LATEST
                                       for p in range(PARTITIONS)})
        return {tp: answer.offset for tp, answer in ends.items()}

    def ledger(self) -> Ledger:
        return Ledger.from_files(self.paths)

    def commits_resumed(self, since: float) -> float | None:
        """Seconds from ``since`` (time.monotonic) until every member had a commit accepted
        after it; None if one has not yet."""
        firsts = []
        for member in self.members.started:
            after = [e["t"] for e in of_kind(member.snapshot(), "committed") if e["t"] > since]
            if not after:
                return None
            firsts.append(min(after))
        return max(firsts) - since if firsts else None

    def generation_changes(self) -> list[int]:
        """The generations the members were assigned in, in order of first appearance."""
        seen: list[int] = []
        for member in self.members.started:
            for event in of_kind(member.snapshot(), "assigned"):
                if event["generation"] not in seen:
                    seen.append(event["generation"])
        return sorted(seen)


def timed(what: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    value = what()
    return value, time.monotonic() - start


# ------------------------------------------------------------------------ many groups at once


class _Revocations(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.revoked = 0
        self.assigned = 0

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.revoked += 1

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.assigned += 1


class ConsumerPool:
    """One consumer per group, all polled in turn by one thread of the test process (a
    consumer only needs ``poll()`` to be called often enough: heartbeats go out from it)."""

    def __init__(self, bootstrap: str, topic: str, groups: Iterable[str]) -> None:
        self.consumers: dict[str, Consumer] = {}
        self.listeners: dict[str, _Revocations] = {}
        for group in groups:
            consumer = Consumer(
                bootstrap, group_id=group, client_id=f"pool-{group}",
                auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=HEARTBEAT_MS, auto_commit_interval_ms=500,
                request_timeout_ms=10_000, fetch_max_wait_ms=100, retry_backoff_ms=100,
            )
            self.listeners[group] = _Revocations()
            consumer.subscribe([topic], listener=self.listeners[group])
            self.consumers[group] = consumer
        self.errors: list[BaseException] = []
        self.slowest: tuple[str, float, float] = ("", 0.0, 0.0)  # the longest poll()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="consumer-pool")

    def start(self) -> ConsumerPool:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for group, consumer in self.consumers.items():
                    with self._lock:
                        started = time.monotonic()
                        consumer.poll(5)
                        took = time.monotonic() - started
                        if took > self.slowest[1]:
                            self.slowest = (group, took, started)
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)

    def view(self, group: str) -> tuple[str, int, int]:
        """A consumer's state, generation and how many times it revoked its partitions."""
        with self._lock:
            consumer = self.consumers[group]
            return consumer.state.value, consumer.generation, self.listeners[group].revoked

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        for consumer in self.consumers.values():
            try:
                consumer.close(5_000)
            except Exception:  # the test's result stands; its brokers may be gone
                continue
