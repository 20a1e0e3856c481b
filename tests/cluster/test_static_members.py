"""Static group membership (KIP-345) on a 3-broker cluster, with real Consumers (one thread
each, manual commits after processing) and a producer writing a steady numbered stream.

- A rolling restart of six static members: each closed and started again with its instance
  id in turn. The generation never changes, no other member's listener is ever called, no
  acknowledged message is lost, each partition is only ever processed by its own member's
  instance id, and it goes on being processed while any other member is away: its only
  pause is its own member's restart (the order of recorded times, no durations compared).
- A coordinator failover in the middle of a restart: a static member closed, its group's
  coordinator killed (SIGKILL), the member started again. The new coordinator loads the
  group record with the instance ids and the member takes its partitions back at the same
  generation; the other member is never revoked.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from client.batch import RecordFuture
from client.consumer import Consumer
from client.group_admin import GroupAdmin, GroupDescription
from client.producer import Producer
from client.records import ConsumerRecord, TopicPartition
from client.subscription import ConsumerRebalanceListener
from tests.cluster.conftest import Cluster, until
from tests.cluster.groups_support import GROUP_SETTINGS, bootstrap_of, live_bootstrap

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TOPIC = "stream"
#: long enough to cover a restart, and a coordinator failover in the middle of one
SESSION_MS = 10_000
#: the producer's pace: one message to each partition per tick
TICK_S = 0.02


# ------------------------------------------------------------------------------ what happened


@dataclass
class Ledger:
    """Every record processed, by any member: when and by which instance each partition's
    records were processed (time.monotonic, one clock for every thread), and how often each
    one was."""

    times: dict[int, list[float]] = field(default_factory=dict)
    by: dict[int, set[str]] = field(default_factory=dict)  # partition -> instances
    deliveries: Counter[tuple[int, int]] = field(default_factory=Counter)
    values: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, records: list[ConsumerRecord], at: float, instance: str) -> None:
        with self.lock:
            for record in records:
                self.times.setdefault(record.partition, []).append(at)
                self.by.setdefault(record.partition, set()).add(instance)
                self.deliveries[(record.partition, record.offset)] += 1
                assert record.value is not None
                self.values.add(int(record.value))

    def processed(self) -> set[int]:
        with self.lock:
            return set(self.values)

    def duplicates(self) -> int:
        with self.lock:
            return sum(n - 1 for n in self.deliveries.values())

    def polls_between(self, partition: int, moment: float, end: float = float("inf")) -> int:
        """How many polls processed records of ``partition`` after ``moment`` and before
        ``end``."""
        with self.lock:
            return len({t for t in self.times.get(partition, []) if moment < t < end})

    def polled(self, partitions: list[int], polls: int, since: float) -> Callable[[], bool]:
        """A condition: each of ``partitions`` processed by ``polls`` polls after ``since``."""
        return lambda: all(self.polls_between(p, since) >= polls for p in partitions)


class Told(ConsumerRebalanceListener):
    """The listener calls a consumer got, with when (time.monotonic)."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str, frozenset[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.calls.append((time.monotonic(), "revoked", frozenset(revoked)))

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.calls.append((time.monotonic(), "assigned", frozenset(assigned)))

    def after(self, moment: float) -> list[tuple[str, frozenset[TopicPartition]]]:
        return [(kind, parts) for t, kind, parts in list(self.calls) if t >= moment]


class StaticMember:
    """One process's worth of a static member: a Consumer in its own thread that polls,
    processes (into the ledger), and commits what it processed before polling again."""

    def __init__(self, bootstrap: str, group: str, instance: str, ledger: Ledger) -> None:
        self.bootstrap, self.group, self.instance, self.ledger = (
            bootstrap, group, instance, ledger)
        self.told = Told()
        self.generations: list[tuple[float, int]] = []  # (when first seen, generation)
        self.owned: frozenset[TopicPartition] = frozenset()
        self.first_processed: dict[int, float] = {}  # partition -> first time
        self.stop_requested: float | None = None
        self.stopped: float | None = None  # its last batch processed and committed
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"member-{instance}")

    def start(self) -> StaticMember:
        self._thread.start()
        return self

    def _run(self) -> None:
        consumer = Consumer(
            self.bootstrap, group_id=self.group, group_instance_id=self.instance,
            client_id=self.instance, enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500, fetch_max_wait_ms=100,
            request_timeout_ms=10_000, retry_backoff_ms=100, max_poll_records=500,
        )
        try:
            consumer.subscribe([TOPIC], listener=self.told)
            while not self._stop.is_set():
                records = consumer.poll(100)
                now = time.monotonic()
                owned = frozenset(consumer.assignment())
                if owned:
                    self.owned = owned
                    if not self.generations or self.generations[-1][1] != consumer.generation:
                        self.generations.append((now, consumer.generation))
                if records:
                    self.ledger.add(records, now, self.instance)
                    for record in records:
                        self.first_processed.setdefault(record.partition, now)
                    consumer.commit()  # what was processed, before anything else is
            self.stopped = time.monotonic()
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            consumer.close(10_000)

    def stop(self) -> None:
        """Stop after the batch in hand (processed and committed), and close: a static
        member's LeaveGroup, which keeps its place."""
        self.stop_requested = time.monotonic()
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"member {self.instance} did not stop"

    def generations_since(self, moment: float) -> set[int]:
        """The generations it was in at ``moment`` and after."""
        before = [g for t, g in self.generations if t < moment][-1:]
        return {*before, *(g for t, g in self.generations if t >= moment)}

    def processing(self) -> bool:
        """It has processed records of every partition it owns."""
        return bool(self.owned) and all(
            tp.partition in self.first_processed for tp in self.owned)


class Stream:
    """A producer thread writing numbered messages (acks=all), one to each partition per
    tick; ``stop`` returns the numbers the cluster acknowledged."""

    def __init__(self, bootstrap: str, partitions: int) -> None:
        self.partitions = partitions
        self.producer = Producer(bootstrap, acks="all", linger_ms=2, delivery_timeout_ms=60_000)
        self.futures: list[tuple[int, RecordFuture]] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="stream")

    def start(self) -> Stream:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):  # the stream's pace
            for partition in range(self.partitions):
                value = str(self.sent).encode()
                self.futures.append(
                    (self.sent, self.producer.send(TOPIC, value, partition=partition)))
                self.sent += 1

    def stop(self) -> tuple[set[int], int]:
        """(the acknowledged numbers, how many sends failed)."""
        self._stop.set()
        self._thread.join(30)
        self.producer.flush(60)
        acknowledged, failed = set(), 0
        for number, future in self.futures:
            try:
                future.result(0)
            except Exception:
                failed += 1
            else:
                acknowledged.add(number)
        self.producer.close()
        return acknowledged, failed


def describe(cluster: Cluster, group: str) -> GroupDescription:
    with GroupAdmin(live_bootstrap(cluster), timeout_ms=3_000,
                    request_timeout_ms=3_000) as admin:
        return admin.describe_group(group)


def steady(cluster: Cluster, group: str, instances: list[str], partitions: int,
           not_on: int | None = None, generation: int | None = None
           ) -> GroupDescription | None:
    """The group's description if Steady with exactly ``instances``, every partition owned
    (and coordinated by another broker than ``not_on``); it must be at ``generation``."""
    found = describe(cluster, group)
    assert generation is None or found.generation == generation, (
        f"the group rebalanced: generation {found.generation}, not {generation}")
    owned = sorted(tp.partition for m in found.members for tp in m.assignment)
    if (found.state != "Steady" or sorted(m.instance_id or "" for m in found.members)
            != instances or owned != list(range(partitions))
            or found.coordinator.node_id == not_on):
        return None
    return found


@pytest.fixture
def members() -> Iterator[list[StaticMember]]:
    """Every member a test starts; those still running are stopped at the end."""
    started: list[StaticMember] = []
    yield started
    for member in started:
        if member.stop_requested is None:
            member.stop()


def start_member(started: list[StaticMember], bootstrap: str, group: str, instance: str,
                 ledger: Ledger) -> StaticMember:
    member = StaticMember(bootstrap, group, instance, ledger)
    started.append(member)
    return member.start()


def wait_joined(cluster: Cluster, group: str, live: list[StaticMember], partitions: int,
                what: str, timeout: float = 60.0, not_on: int | None = None,
                generation: int | None = None) -> GroupDescription:
    """Until the group is Steady with these members, each of them processing its partitions
    at the group's generation (``generation`` if given); the description."""
    instances = sorted(m.instance for m in live)

    def joined() -> GroupDescription | None:
        for member in live:
            assert member.error is None, f"{member.instance}: {member.error!r}"
        found = steady(cluster, group, instances, partitions, not_on=not_on,
                       generation=generation)
        if found is None or not all(m.processing() and m.generations
                                    and m.generations[-1][1] == found.generation
                                    for m in live):
            return None
        return found

    found: GroupDescription = until(joined, timeout, what)
    return found


# ------------------------------------------------------------------------------ rolling restart

ROLLING_MEMBERS = 6
ROLLING_PARTITIONS = 12
#: polls of every other member's partitions between a member's close and its new start
AWAY_POLLS = 5


@pytest.mark.timeout(150)
def test_a_rolling_restart_of_static_members_never_rebalances(
    make_cluster: Callable[..., Cluster], members: list[StaticMember],
) -> None:
    cluster = make_cluster(3, settings=GROUP_SETTINGS)
    cluster.create_topic(TOPIC, partitions=ROLLING_PARTITIONS, replication_factor=3)
    bootstrap, group, ledger = bootstrap_of(cluster), "rolling", Ledger()
    stream = Stream(bootstrap, ROLLING_PARTITIONS).start()
    try:
        live = {f"m{i}": start_member(members, bootstrap, group, f"m{i}", ledger)
                for i in range(ROLLING_MEMBERS)}
        joined = wait_joined(cluster, group, list(live.values()), ROLLING_PARTITIONS,
                             "six static members joined, each processing its partitions")
        generation, began = joined.generation, time.monotonic()
        first = dict(live)
        owner = {tp.partition: i for i, m in live.items() for tp in m.owned}
        windows: dict[str, tuple[float, float]] = {}  # instance -> (stopped, back)

        for instance in sorted(live):
            old = live[instance]
            old.stop()
            assert old.error is None, f"{instance}: {old.error!r}"
            # closed, yet still a member at the same generation: no rebalance started
            kept = describe(cluster, group)
            assert kept.state == "Steady" and kept.generation == generation, kept
            assert sorted(m.instance_id or "" for m in kept.members) == sorted(live)
            # the others go on meanwhile: a restart spans several of their polls, as a real
            # one (a new process) would
            others = [p for p, i in owner.items() if i != instance]
            until(ledger.polled(others, AWAY_POLLS, since=time.monotonic()), 30,
                  f"the other members processing while {instance} is away")
            new = start_member(members, bootstrap, group, instance, ledger)
            live[instance] = new
            wait_joined(cluster, group, list(live.values()), ROLLING_PARTITIONS,
                        f"{instance} back, processing its partitions", generation=generation)
            assert new.owned == old.owned, (instance, new.owned, old.owned)
            assert old.stopped is not None
            windows[instance] = (old.stopped, max(new.first_processed.values()))
        ended = time.monotonic()
        final = describe(cluster, group)
    finally:
        acknowledged, failed = stream.stop()

    # every acknowledged message processed, then the members closed
    until(lambda: not acknowledged - ledger.processed(), 60,
          "every acknowledged message processed")
    for member in list(live.values()):
        member.stop()
    errors = {m.instance: repr(m.error) for m in members if m.error is not None}
    assert not errors, errors

    # the generation never changed, by the coordinator or by any member
    assert final.state == "Steady" and final.generation == generation, final
    seen = set().union(*(m.generations_since(began) for m in members))
    assert seen == {generation}, seen
    # listeners: a member's own close (revoked) and its successor's join (assigned, the same
    # partitions); nobody else's, ever
    for instance, old in first.items():
        assert old.stop_requested is not None
        assert old.told.after(began) == [("revoked", old.owned)], (instance, old.told.calls)
        assert all(t >= old.stop_requested for t, _, _ in old.told.calls if t >= began)
        successor = live[instance]
        calls = [(kind, parts) for t, kind, parts in successor.told.calls
                 if t < ended and parts]  # a first join may revoke nothing first
        assert calls == [("assigned", old.owned)], (instance, successor.told.calls)
    # each partition's only pause is its owner's restart: processed by its owner's instance id
    # alone, and on and on while each other member was away
    for partition in range(ROLLING_PARTITIONS):
        mine = owner[partition]
        assert ledger.by[partition] == {mine}, (partition, mine, ledger.by[partition])
        for instance, (stopped, back) in windows.items():
            away = ledger.polls_between(partition, stopped, back)
            assert instance == mine or away >= AWAY_POLLS, (
                f"partition {partition} (owner {mine}) processed by {away} polls while "
                f"{instance} restarted")
    duplicates = ledger.duplicates()
    assert duplicates == 0, f"{duplicates} messages processed again after their commit"
    print(f"\nROLLING RESTART: {ROLLING_MEMBERS} static members restarted one by one over "
          f"{ended - began:.2f} s, generation {generation} throughout; {len(acknowledged)} "
          f"messages acknowledged ({failed} sends failed), all processed, 0 lost, "
          f"{duplicates} duplicates; restarts took "
          + ", ".join(f"{i} {b - a:.2f} s" for i, (a, b) in sorted(windows.items())))


# ---------------------------------------------------------------------- failover mid-restart

FAILOVER_PARTITIONS = 4


@pytest.mark.timeout(120)
def test_a_static_member_restarted_across_a_coordinator_failover_keeps_its_place(
    make_cluster: Callable[..., Cluster], members: list[StaticMember],
) -> None:
    cluster = make_cluster(3, settings=GROUP_SETTINGS)
    cluster.create_topic(TOPIC, partitions=FAILOVER_PARTITIONS, replication_factor=3)
    bootstrap, group, ledger = bootstrap_of(cluster), "failover", Ledger()
    stream = Stream(bootstrap, FAILOVER_PARTITIONS).start()
    try:
        m0 = start_member(members, bootstrap, group, "m0", ledger)
        m1 = start_member(members, bootstrap, group, "m1", ledger)
        joined = wait_joined(cluster, group, [m0, m1], FAILOVER_PARTITIONS,
                             "m0 and m1 joined, each processing its partitions")
        generation, began = joined.generation, time.monotonic()
        old = joined.coordinator.node_id

        m0.stop()  # a static member's leave: kept
        cluster.brokers[old].kill()
        again = start_member(members, bootstrap, group, "m0", ledger)
        back = wait_joined(cluster, group, [again, m1], FAILOVER_PARTITIONS,
                           "m0 back under the new coordinator, both members processing",
                           timeout=cluster.failover_bound + 30, not_on=old,
                           generation=generation)
        processed_after = len(ledger.processed())
        until(lambda: len(ledger.processed()) > processed_after, 30,
              "processing goes on after the restart")
    finally:
        acknowledged, failed = stream.stop()
    until(lambda: not acknowledged - ledger.processed(), 60,
          "every acknowledged message processed")
    final = describe(cluster, group)
    again.stop()
    m1.stop()
    errors = {m.instance: repr(m.error) for m in members if m.error is not None}
    assert not errors, errors

    assert back.generation == generation and final.generation == generation, (
        generation, back, final)
    assert again.owned == m0.owned
    assert again.generations_since(0) == {generation}
    assert m1.generations_since(began) == {generation}
    # m1's only call since the group was Steady: its own close at the end
    assert m1.told.after(began) == [("revoked", m1.owned)], m1.told.calls
    assert m1.stop_requested is not None and m1.told.calls[-1][0] >= m1.stop_requested
    print(f"\nSTATIC RESTART ACROSS A FAILOVER: coordinator {old} -> "
          f"{back.coordinator.node_id}, generation {generation} throughout; m0 back with "
          f"{sorted(tp.partition for tp in again.owned)}; {len(acknowledged)} messages "
          f"acknowledged ({failed} sends failed), all processed, "
          f"{ledger.duplicates()} duplicates")
