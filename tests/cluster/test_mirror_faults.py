"""``odradek mirror`` under real faults: nothing the source acknowledged is missing from the
target (tooling/mirror/stream.py: a source offset is committed only once the target acknowledged
every message before it).

A numbered producer (tests/cluster/test_durability.py's ``NumberedProducer``: ``"<p>:<seq>"``,
acks=all) writes to the source cluster all along, while a mirror process copies the topic to a
target cluster (its own ZooKeeper chroot of the session's ZooKeeper) and the test injects a
fault. Then the producer stops, a mirror catches up (``odradek mirror status --json``: lag 0
everywhere), and a fresh consumer reads both clusters. Every test prints ``lost=N
duplicates=M`` -- lost: acknowledged source messages missing from the target (must be 0);
duplicates: copies the target holds beyond the source's -- and the bound it checked them
against, the mirror's uncommitted window at each fault: per partition, the source's end read
right after the fault minus the group's committed offset read just before it (a mirror that
lives on commits more; a killed one commits nothing more, so that one is read after the kill).
A duplicate is a message the target holds from a send it was not known to have acknowledged,
and every such send lies in that window.

- the mirror killed with SIGKILL mid-stream and started again, ``ODRADEK_FAULT_ROUNDS`` times
  (at least 5, the default);
- the leader of a target partition killed with SIGKILL (three target brokers, replication
  factor 3, min ISR 2), then started again: the mirror's producer retries; the mirror goes on;
- the broker coordinating the mirror's group on the source (the leader of its
  ``__consumer_offsets`` partition) killed with SIGKILL: the mirror goes on under the new
  coordinator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from client.group_admin import GroupAdmin
from tests.cluster.conftest import Cluster, read_partitions, until
from tests.cluster.groups_support import GROUP_SETTINGS, bootstrap_of, live_bootstrap
from tests.cluster.mirror_process import ROOT, MirrorProcess
from tests.cluster.test_durability import (
    SETTINGS,
    NumberedProducer,
    Outcome,
    all_in_sync,
    check_log,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: mirror kills in a row (ODRADEK_FAULT_ROUNDS, never fewer than 5)
MIRROR_KILLS = max(5, int(os.environ.get("ODRADEK_FAULT_ROUNDS", "5")))

TOPIC = "orders"
PARTITIONS = [0, 1, 2]
GROUP = "mirror-faults"
#: a lone source broker: its own __consumer_offsets, 3 s group sessions allowed
LONE_SOURCE = {**GROUP_SETTINGS, "offsets_topic_replication_factor": 1}
#: commits every 500 ms keep the uncommitted window (and so the duplicates) small; a 3 s
#: session lets a killed mirror's partitions go to the next one within seconds
MIRROR_ARGS = [
    "--topic", TOPIC, "--commit-interval-ms", "500", "--progress-interval-s", "0",
    "--source-property", "session_timeout_ms=3000",
    "--source-property", "heartbeat_interval_ms=300",
]
#: ``odradek mirror status --json`` rows of TOPIC, by source partition
Rows = dict[int, dict[str, int]]


# ------------------------------------------------------------------------------- fixtures


@dataclass
class Mirrored:
    """A source and a target cluster, and how to start mirrors between them."""

    source: Cluster
    target: Cluster
    start_mirror: Callable[[], MirrorProcess]

    def status(self) -> Rows:
        """``odradek mirror status --json`` of the group, by source partition (asked through
        the running brokers only)."""
        out = subprocess.run(
            [sys.executable, "-m", "tooling.cli", "mirror", "status", "--json",
             "--source", live_bootstrap(self.source), "--target", live_bootstrap(self.target),
             "--group", GROUP, "--api-timeout-ms", "30000"],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
        ).stdout
        return {row["partition"]: row for row in json.loads(out) if row["topic"] == TOPIC}

    def committed(self) -> int:
        """Source messages the group has committed, summed over the partitions."""
        return sum(row["committed"] for row in self.status().values())

    def window(self, before: Rows) -> tuple[int, int]:
        """The uncommitted window of a fault: per partition, the source's end now minus the
        committed offset in ``before`` (read just before the fault, when the mirror may go on
        committing after it; every partition must have a commit); and the source's ends now,
        summed."""
        after = self.status()
        assert sorted(before) == sorted(after) == PARTITIONS, (before, after)
        ends = sum(after[p]["source_end"] for p in PARTITIONS)
        return ends - sum(before[p]["committed"] for p in PARTITIONS), ends

    def wait_committed(self, at_least: int, timeout: float, what: str) -> int:
        """Until every partition has a commit and they add up to ``at_least``."""
        def enough() -> int | None:
            rows = self.status()
            total = sum(row["committed"] for row in rows.values())
            return total if sorted(rows) == PARTITIONS and total >= at_least else None

        return int(until(enough, timeout, what, interval=0.2))

    def wait_caught_up(self, stalled: float = 30.0) -> None:
        """Until the group has committed the source's end of every partition (lag 0); fails
        once its commits have not moved for ``stalled`` seconds (this asks for progress, not
        speed: the backlog left by a fault may be large)."""
        best, deadline = -1, 0.0
        while True:
            rows = self.status()
            if sorted(rows) == PARTITIONS and all(r["lag"] == 0 for r in rows.values()):
                return
            committed = sum(r["committed"] for r in rows.values())
            if committed > best:
                best, deadline = committed, time.monotonic() + stalled
            assert time.monotonic() < deadline, (
                f"the mirror's commits stood still for {stalled:g} s short of the source's "
                f"ends: {rows}")
            time.sleep(0.2)  # the pace of the status polls


@pytest.fixture
def mirrored(make_cluster: Callable[..., Cluster], zk_connect: str
             ) -> Iterator[Callable[..., Mirrored]]:
    """``mirrored(source_brokers, target_brokers, source_settings=..., target_settings=...)``:
    the two clusters, the target in a ZooKeeper chroot of its own; every mirror started is
    killed at the end (its output printed)."""
    started: list[MirrorProcess] = []

    def factory(source_brokers: int, target_brokers: int, *,
                source_settings: dict[str, object], target_settings: dict[str, object]
                ) -> Mirrored:
        source = make_cluster(source_brokers, settings=source_settings)
        target = make_cluster(target_brokers, settings=target_settings,
                              zk_connect=f"{zk_connect}-target")

        def start_mirror() -> MirrorProcess:
            process = MirrorProcess(bootstrap_of(source), bootstrap_of(target), MIRROR_ARGS,
                                    group=GROUP)
            started.append(process)
            return process.start()

        return Mirrored(source, target, start_mirror)

    yield factory
    for n, process in enumerate(started):
        if process.running():
            process.kill()
        print(f"===== mirror {n} (exit {process.returncode}) =====\n{process.text()}")


# ------------------------------------------------------------------------------- the checks


def finish(mirrored: Mirrored, producer: NumberedProducer, mirror: MirrorProcess,
           what: str, bound: int, faults: str) -> None:
    """Stop the producer, let the mirror that lived through the fault catch up and stop it
    cleanly, then check the target against what the source acknowledged."""
    outcome = producer.stop(240)
    mirrored.wait_caught_up()
    assert mirror.stop() == 0, mirror.text()
    check(mirrored, outcome, what, bound, faults)


def check(mirrored: Mirrored, outcome: Outcome, what: str, bound: int, faults: str) -> None:
    """Every acknowledged source message on the target, first copies in send order, nothing
    that the source does not hold, and no more duplicates than ``bound``."""
    source_logs = read_partitions(live_bootstrap(mirrored.source), TOPIC, PARTITIONS, 60)
    target_logs = read_partitions(live_bootstrap(mirrored.target), TOPIC, PARTITIONS, 60)
    verdict = check_log(outcome, target_logs)  # target offsets are its own: "moved" is moot
    duplicates, strangers = 0, []
    for p in PARTITIONS:
        on_source = Counter(value for _, value in source_logs[p])
        on_target = Counter(value for _, value in target_logs[p])
        strangers += [(p, v) for v in on_target if v not in on_source]
        duplicates += sum(max(n - on_source[v], 0) for v, n in on_target.items())
    print(f"{what}: acknowledged={verdict.acknowledged} lost={len(verdict.lost)} "
          f"duplicates={duplicates} bound={bound} (uncommitted window at the faults) "
          f"source={sum(map(len, source_logs.values()))} "
          f"target={sum(map(len, target_logs.values()))} {faults}")
    assert not verdict.lost, f"acknowledged messages missing on the target: {verdict.lost[:20]}"
    assert not verdict.out_of_order, f"out of send order: {verdict.out_of_order[:20]}"
    assert not strangers, f"on the target but not the source: {strangers[:20]}"
    assert duplicates <= bound, f"{duplicates} duplicates, more than the window {bound}"


def start_producer(source: Cluster) -> NumberedProducer:
    producer = NumberedProducer(bootstrap_of(source), TOPIC, PARTITIONS)
    producer.start()
    until(lambda: producer.acked_count() >= 100, 30, "acknowledged sends on the source")
    return producer


# ------------------------------------------------------------------------------- the tests


@pytest.mark.timeout(90 + 25 * MIRROR_KILLS)
def test_a_mirror_killed_again_and_again_loses_nothing(
    mirrored: Callable[..., Mirrored],
) -> None:
    clusters = mirrored(1, 1, source_settings=LONE_SOURCE, target_settings={})
    clusters.source.create_topic(TOPIC, partitions=len(PARTITIONS), replication_factor=1)
    producer = start_producer(clusters.source)
    bound = 0
    try:
        committed = 0
        for round_ in range(MIRROR_KILLS):
            mirror = clusters.start_mirror()
            # mid-stream: this mirror has copied and committed a hundred more messages
            committed = clusters.wait_committed(
                committed + 100, 60, f"round {round_}: the mirror copying and committing")
            mirror.kill()
            window, _ = clusters.window(clusters.status())  # it commits nothing more
            bound += window
            print(f"round {round_}: killed the mirror with {committed} or more committed; "
                  f"uncommitted window {window}")
            committed = clusters.committed()
    finally:
        outcome = producer.stop(240)
    last = clusters.start_mirror()
    clusters.wait_caught_up()
    assert last.stop() == 0, last.text()
    check(clusters, outcome, "mirror kills", bound, f"kills={MIRROR_KILLS}")


@pytest.mark.timeout(240)
def test_the_target_partition_leader_killed_while_mirroring_loses_nothing(
    mirrored: Callable[..., Mirrored],
) -> None:
    clusters = mirrored(1, 3, source_settings=LONE_SOURCE, target_settings=SETTINGS)
    clusters.source.create_topic(TOPIC, partitions=len(PARTITIONS), replication_factor=1)
    # made before the mirror, with three replicas (the mirror would copy the source's one)
    target = clusters.target
    target.create_topic(TOPIC, partitions=len(PARTITIONS), replication_factor=3)
    until(lambda: all_in_sync(target, TOPIC), 20, "a full target ISR to start with")
    producer = start_producer(clusters.source)
    try:
        mirror = clusters.start_mirror()
        clusters.wait_committed(200, 60, "the mirror copying and committing")
        state = target.state(TOPIC, 0)
        victim = target.brokers[state["leader"]]
        port = victim.port
        before = clusters.status()
        victim.kill()
        bound, ends_at_kill = clusters.window(before)
        until(lambda: target.state(TOPIC, 0)["leader"] not in (state["leader"], -1),
              target.failover_bound, f"a new leader of the target's {TOPIC}-0")
        # everything the source held at the kill is acknowledged by the target and committed
        clusters.wait_committed(ends_at_kill, target.failover_bound + 30,
                                "the mirror committing past the kill")
        assert mirror.running(), mirror.text()
        victim.start(port=port, timeout=target.failover_bound + 10)
        until(lambda: all_in_sync(target, TOPIC), target.failover_bound + 20,
              "the restarted broker back in every target ISR")
    except BaseException:
        producer.stop(240)
        raise
    finish(clusters, producer, mirror, "target leader kill", bound,
           f"killed target broker {state['leader']}")


@pytest.mark.timeout(240)
def test_the_source_group_coordinator_killed_while_mirroring_loses_nothing(
    mirrored: Callable[..., Mirrored],
) -> None:
    clusters = mirrored(3, 1, source_settings={**SETTINGS, **GROUP_SETTINGS},
                        target_settings={"offsets_topic_replication_factor": 1})
    source = clusters.source
    source.create_topic(TOPIC, partitions=len(PARTITIONS), replication_factor=3)
    until(lambda: all_in_sync(source, TOPIC), 20, "a full source ISR to start with")
    producer = start_producer(source)
    try:
        mirror = clusters.start_mirror()
        clusters.wait_committed(200, 60, "the mirror copying and committing")
        with GroupAdmin(live_bootstrap(source), timeout_ms=10_000) as admin:
            coordinator = admin.find_coordinator(GROUP).node_id
        before = clusters.status()
        source.brokers[coordinator].kill()
        bound, ends_at_kill = clusters.window(before)
        # the same mirror commits everything the source held at the kill, under the new
        # coordinator
        clusters.wait_committed(ends_at_kill, source.failover_bound + 30,
                                "the mirror committing past the kill")
        assert mirror.running(), mirror.text()
        with GroupAdmin(live_bootstrap(source), timeout_ms=10_000) as admin:
            assert admin.find_coordinator(GROUP).node_id != coordinator
    except BaseException:
        producer.stop(240)
        raise
    finish(clusters, producer, mirror, "source coordinator kill", bound,
           f"killed source broker {coordinator}")
