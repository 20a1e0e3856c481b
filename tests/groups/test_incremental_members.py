"""Incremental rebalancing end to end: a group of member processes on 60 partitions while a
stream flows at a fixed rate; a member joins, one leaves (SIGTERM), one is killed (SIGKILL).

Checked from the members' own logs (``tests/groups/member.py``; every event carries the
machine's monotonic clock, shared by the processes):

- no partition ever has two owners: each member's ownership of a partition runs from the
  listener's ``assigned`` (which names only the new partitions) to its ``revoked`` (or its death),
  and these intervals never overlap across members -- every delivery lies in its member's;
- the partitions that do not move are never revoked, and are consumed while their owners rejoin
  (Rejoining while consuming): they do not stop;
- committed offsets never go backwards, and every message is delivered (twice only where no
  commit covered it).

The longest delivery gap of an unmoved and of a moved partition is printed for the record; speed
is measured in benchmarks/rebalance.py, not asserted here.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Callable

import pytest

from client import Producer
from tests.groups.support import (
    GROUP_BROKER_SETTINGS,
    Event,
    Ledger,
    MemberProcess,
    Members,
    create_topic,
    of_kind,
    owns,
    partition_names,
    wait_for_ownership,
)

pytestmark = pytest.mark.integration

TOPIC = "flow"
PARTITIONS = 60
SESSION_MS = 2_000
RATE = 300  # messages per second, round robin over the partitions
MOVE_TIMEOUT = SESSION_MS / 1000 + 20.0
REJOINING = "Rejoining while consuming"

Interval = tuple[float, float, str]  # start, end, member


class PacedStream:
    """Sends ``str(i)`` to partition ``i % partitions`` at ``RATE``/s until stopped."""

    def __init__(self, bootstrap: str, partitions: int = PARTITIONS) -> None:
        self.partitions = partitions
        self.sent: list[str] = []
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(bootstrap,), daemon=True)
        self._thread.start()

    def _run(self, bootstrap: str) -> None:
        try:
            with Producer(bootstrap, linger_ms=5) as producer:
                started, i = time.monotonic(), 0
                while not self._stop.is_set():
                    due = started + i / RATE
                    if due > time.monotonic():
                        self._stop.wait(due - time.monotonic())
                        continue
                    producer.send(TOPIC, str(i).encode(), partition=i % self.partitions)
                    self.sent.append(str(i))
                    i += 1
                producer.flush()
        except BaseException as exc:  # reported by stop()
            self._error = exc

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(30)
        if self._error is not None:
            raise self._error
        return list(self.sent)


def drain(stream: PacedStream, started: list[MemberProcess]) -> list[str]:
    """Stop the stream and wait until the members consumed all it sent; what it sent."""
    sent = stream.stop()
    wait_until(lambda: set(Ledger(started).values()) >= set(sent), "every message consumed")
    return sent


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def shared(group: list[MemberProcess], everything: set[str], timeout: float) -> None:
    """Wait until every member of ``group`` owns a share of ``everything``, disjointly."""
    deadline = time.monotonic() + timeout
    while True:
        wait_for_ownership(group, everything, max(deadline - time.monotonic(), 0.1))
        if all(owns(m.snapshot()) for m in group):
            return
        time.sleep(0.05)


def ownership(events: list[Event], member: str, died_at: float | None,
              end: float) -> dict[str, list[Interval]]:
    """Per partition, the member's ownership intervals from its listener events."""
    out: dict[str, list[Interval]] = defaultdict(list)
    since: dict[str, float] = {}
    for e in events:
        if e["event"] == "assigned":
            for p in e["added"]:
                since[p] = e["t"]
        elif e["event"] == "revoked":
            for p in e["partitions"]:
                out[p].append((since.pop(p), e["t"], member))
    for p, start in since.items():  # still owned when it died or the test ended
        out[p].append((start, died_at if died_at is not None else end, member))
    return out


def test_ten_members_rebalance_incrementally_through_a_join_a_leave_and_a_kill(
    make_broker,
) -> None:
    broker = make_broker(settings=GROUP_BROKER_SETTINGS)
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    everything = partition_names(TOPIC, PARTITIONS)
    members = Members(broker.bootstrap, "incremental", "--topics", TOPIC, "--strategy",
                      "sticky", "--session-timeout-ms", str(SESSION_MS),
                      "--heartbeat-interval-ms", "300")
    died: dict[str, float] = {}
    stream: PacedStream | None = None
    try:
        group = [members.start() for _ in range(10)]
        shared(group, everything, timeout=90)
        formed = time.monotonic()  # moves before this were the group forming
        stream = PacedStream(broker.bootstrap)
        wait_until(lambda: len(Ledger(group).values()) >= RATE, "the stream flowing")

        group.append(members.start())  # a member joins
        shared(group, everything, MOVE_TIMEOUT)

        leaving = group.pop(0)  # one leaves: it commits, revokes, sends LeaveGroup
        leaving.terminate()
        shared(group, everything, MOVE_TIMEOUT)

        victim = group.pop(0)  # one is killed: the coordinator notices from its session
        died[victim.name] = time.monotonic()
        victim.kill()
        shared(group, everything, MOVE_TIMEOUT)

        sent, stream = drain(stream, members.started), None
    finally:
        if stream is not None:
            stream.stop()
        members.stop_all()
    end = time.monotonic()
    ledger = Ledger(members.started)
    duplicates = ledger.check_complete(sent)

    intervals = never_two_owners(members.started, died, end)

    # The partitions that never moved once the group had formed were never revoked, and were
    # consumed during the rebalances.
    unmoved = {p for p, spans in intervals.items()
               if len([s for s in spans if s[1] > formed]) == 1}
    moved = everything - unmoved
    assert len(unmoved) >= PARTITIONS // 2, f"only {len(unmoved)} partitions stayed put"
    assert moved, "the join, the leave and the kill moved partitions"
    while_rejoining = 0
    for m in members.started:
        state = None
        for e in m.snapshot():
            if e["event"] == "state":
                state = e["state"]
            elif e["event"] == "records" and state == REJOINING:
                while_rejoining += sum(1 for p, _, _ in e["records"] if p in unmoved)
    assert while_rejoining > 0, "nothing consumed while members rejoined"

    commits_never_go_back(members.started)
    gaps = {p: _longest_gap(members.started, p) for p in everything}
    print(f"incremental: {len(unmoved)} partitions never moved, {len(moved)} moved; "
          f"{while_rejoining} records of unmoved partitions consumed while rejoining; "
          f"longest delivery gap: unmoved {max(gaps[p] for p in unmoved):.3f} s, moved "
          f"{max(gaps[p] for p in moved):.3f} s; {duplicates} duplicate deliveries")


def never_two_owners(started: list[MemberProcess], died: dict[str, float],
                     end: float) -> dict[str, list[Interval]]:
    """Per partition, the members' ownership intervals do not overlap, and every delivery lies
    in its member's; the intervals."""
    intervals: dict[str, list[Interval]] = defaultdict(list)
    for m in started:
        for p, spans in ownership(m.snapshot(), m.name, died.get(m.name), end).items():
            intervals[p] += spans
    for p, spans in intervals.items():
        spans.sort()
        for (_, end_a, a), (start_b, _, b) in itertools.pairwise(spans):
            assert end_a <= start_b, f"{p}: {a} owned it until {end_a}, {b} from {start_b}"
    for m in started:
        mine = {p: [s for s in spans if s[2] == m.name] for p, spans in intervals.items()}
        for e in of_kind(m.snapshot(), "records"):
            for p, _, _ in e["records"]:
                assert any(s <= e["t"] <= t for s, t, _ in mine[p]), (m.name, p, e["t"])
    return intervals


def commits_never_go_back(started: list[MemberProcess]) -> None:
    """Per partition, the offsets members committed, in the order they were stored."""
    commits: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for m in started:
        for e in of_kind(m.snapshot(), "committed"):
            for p, offset in e["offsets"].items():
                commits[p].append((e["t"], offset))
    for p, seq in commits.items():
        offsets = [o for _, o in sorted(seq)]
        assert offsets == sorted(offsets), f"{p}: committed offsets went back: {offsets}"


def test_eager_and_incremental_members_share_a_group(make_broker) -> None:
    """As docs/consumer-groups.md says: an eager member lets go of everything at every
    rebalance, an incremental one only of what moves; the coordinator withholds what an
    incremental member still holds, so mixing them never gives a partition two owners."""
    broker = make_broker(settings=GROUP_BROKER_SETTINGS)
    create_topic(broker.bootstrap, TOPIC, 12)
    everything = partition_names(TOPIC, 12)
    common = ("--topics", TOPIC, "--strategy", "sticky", "--session-timeout-ms",
              str(SESSION_MS), "--heartbeat-interval-ms", "300")
    members = Members(broker.bootstrap, "mixed", *common)
    stream: PacedStream | None = None
    try:
        eager = [members.start("--rebalance-protocol", "eager") for _ in range(2)]
        incremental = [members.start() for _ in range(2)]
        shared([*eager, *incremental], everything, timeout=90)
        formed = time.monotonic()
        stream = PacedStream(broker.bootstrap, partitions=12)
        wait_until(lambda: len(Ledger(members.started).values()) >= 100, "the stream flowing")
        newcomer = members.start()
        shared([*eager, *incremental, newcomer], everything, MOVE_TIMEOUT)
        sent, stream = drain(stream, members.started), None
    finally:
        if stream is not None:
            stream.stop()
        members.stop_all()
    Ledger(members.started).check_complete(sent)
    never_two_owners(members.started, {}, time.monotonic())
    commits_never_go_back(members.started)
    for m in eager:  # each rebalance took everything it had
        revocations = [e for e in of_kind(m.snapshot(), "revoked") if e["t"] > formed]
        assert revocations and all(e["owned"] == [] for e in revocations), revocations
    for m in incremental:  # only what moved was taken, the rest kept throughout
        revocations = [e for e in of_kind(m.snapshot(), "revoked") if e["t"] > formed]
        assert all(e["owned"] for e in revocations), revocations
        assert owns(m.snapshot()), f"{m.name} kept nothing"


def _longest_gap(started: list[MemberProcess], partition: str) -> float:
    times = sorted(e["t"] for m in started for e in of_kind(m.snapshot(), "records")
                   for p, _, _ in e["records"] if p == partition)
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)
