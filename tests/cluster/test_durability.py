"""Durability of acknowledged messages under real faults (DESIGN "Replication"; seed 003: "your
data in a partition will be there until N-1 brokers fails").

A producer thread sends numbered messages (value ``"<partition>:<seq>"``, explicit partition)
with acks=all, retries and a generous delivery timeout, while the test kills brokers with
SIGKILL. Afterwards a fresh consumer reads every partition from the beginning, and every
acknowledged message must be there, at the offset it was acknowledged with, in send order
within its partition. Retries after an unknown outcome (the leader died before answering)
store nothing twice with the idempotent producer (the default with acks=all, as Kafka 3.0+): its
duplicates must be 0. Without it they may, and are counted and printed, not failed.

``ODRADEK_FAULT_ROUNDS`` (default 3; 10 for the full run) sets how many leader kills the first
test makes in a row, with idempotence and without.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from client.batch import RecordFuture
from client.producer import Producer
from tests.cluster.conftest import Cluster, read_partitions, replica_log, until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: leader kills in a row (ODRADEK_FAULT_ROUNDS; 3 by default, 10 for the full run)
FAULT_ROUNDS = max(1, int(os.environ.get("ODRADEK_FAULT_ROUNDS", "3")))

#: short sessions and lag bounds: each kill is noticed within seconds
SETTINGS = {
    "zookeeper_session_timeout_ms": 3000,
    "replica_lag_time_max_ms": 3000,
    "min_insync_replicas": 2,
    "maintenance_interval_ms": 500,
}


@dataclass
class Outcome:
    """What the producer thread learnt about each message: (partition, seq) -> offset."""

    acked: dict[tuple[int, int], int] = field(default_factory=dict)
    failed: dict[tuple[int, int], str] = field(default_factory=dict)
    sent: int = 0


class ProducerThread(threading.Thread):
    """A producer in a thread of its own, ``rate`` messages (or rounds) a second with at most
    ``max_unsettled`` unanswered, until ``stop()``: what it learnt is its ``Outcome``, read from
    the test's thread under a lock. Subclasses send (``run``)."""

    def __init__(self, name: str, *, rate: float, max_unsettled: int) -> None:
        super().__init__(name=name, daemon=True)
        self.interval = 1 / rate
        self.max_unsettled = max_unsettled
        self.outcome = Outcome()
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._settled = 0

    def acked_count(self) -> int:
        with self._lock:
            return len(self.outcome.acked)

    def stop(self, timeout: float) -> Outcome:
        self._halt.set()
        self.join(timeout)
        assert not self.is_alive(), f"the producer did not finish within {timeout} s"
        if self.error is not None:
            raise self.error
        return self.outcome


class NumberedProducer(ProducerThread):
    """Sends ``"<p>:<seq>"`` to every partition, ``rate`` rounds a second, with acks=all, until
    ``stop()``; then flushes. The Producer lives in this thread only (it is single-threaded)."""

    def __init__(self, bootstrap: str, topic: str, partitions: list[int], *,
                 rate: float = 50.0, max_unsettled: int = 400,
                 idempotent: bool = True) -> None:
        super().__init__(f"producer-{topic}", rate=rate, max_unsettled=max_unsettled)
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.idempotent = idempotent

    def _settle(self, key: tuple[int, int], future: RecordFuture) -> None:
        with self._lock:
            self._settled += 1
            error = future.exception()
            if error is None:
                self.outcome.acked[key] = future.value.offset
            else:
                self.outcome.failed[key] = f"{type(error).__name__}: {error}"

    def run(self) -> None:
        try:
            producer = Producer(self.bootstrap, acks="all", retry_backoff_ms=100,
                                request_timeout_ms=5_000, delivery_timeout_ms=180_000,
                                max_block_ms=60_000, enable_idempotence=self.idempotent)
            try:
                self._produce(producer)
            finally:
                producer.close(120)
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def _produce(self, producer: Producer) -> None:
        seq = 0
        next_round = time.monotonic()
        while not self._halt.is_set():
            now = time.monotonic()
            if now < next_round:  # the pace: answers are read meanwhile
                producer.poll(min(next_round - now, 0.05))
                continue
            if self.outcome.sent - self._settled < self.max_unsettled:
                for p in self.partitions:
                    key = (p, seq)
                    future = producer.send(self.topic, f"{p}:{seq}".encode(), partition=p)
                    future.add_done_callback(lambda f, key=key: self._settle(key, f))
                    self.outcome.sent += 1
                seq += 1
                next_round = max(next_round + self.interval, now - 1.0)  # no burst to catch up
            else:
                next_round = now + self.interval  # let the backlog drain
            producer.poll(0)
        producer.flush(180)


@dataclass
class Verdict:
    acknowledged: int
    lost: list[tuple[int, int]]
    moved: list[tuple[int, int, int, bytes | None]]
    out_of_order: list[tuple[int, int]]
    duplicates: int


def check_log(outcome: Outcome, logs: dict[int, list[tuple[int, bytes | None]]]) -> Verdict:
    """Every acknowledged message in the final logs, at its acknowledged offset, in order."""
    lost: list[tuple[int, int]] = []
    moved: list[tuple[int, int, int, bytes | None]] = []
    out_of_order: list[tuple[int, int]] = []
    duplicates = 0
    for p, entries in logs.items():
        at = dict(entries)
        first: dict[bytes | None, int] = {}
        for offset, value in entries:
            first.setdefault(value, offset)
        duplicates += sum(n - 1 for n in Counter(v for _, v in entries).values() if n > 1)
        acked = sorted((seq, offset) for (q, seq), offset in outcome.acked.items() if q == p)
        previous = -1
        for seq, offset in acked:
            value = f"{p}:{seq}".encode()
            if value not in first:
                lost.append((p, seq))
                continue
            if at.get(offset) != value:
                moved.append((p, seq, offset, at.get(offset)))
            if first[value] < previous:
                out_of_order.append((p, seq))
            previous = first[value]
    return Verdict(len(outcome.acked), lost, moved, out_of_order, duplicates)


def all_in_sync(cluster: Cluster, topic: str) -> bool:
    return all(sorted(s["isr"]) == sorted(cluster.brokers) and s["leader"] >= 0
               for s in cluster.states(topic).values())


def replicas_identical(cluster: Cluster, topic: str, partitions: list[int]) -> bool:
    for p in partitions:
        copies = [replica_log(process, topic, p) for process in cluster.brokers.values()]
        if any(copy != copies[0] for copy in copies[1:]):
            return False
    return True


def final_check(cluster: Cluster, topic: str, partitions: list[int], outcome: Outcome,
                what: str, faults: str, *, idempotent: bool = True) -> Verdict:
    until(lambda: all_in_sync(cluster, topic), cluster.failover_bound + 20,
          f"every broker back in the ISR of every {topic} partition")
    logs = read_partitions(cluster.any_running().bootstrap, topic, partitions, timeout=60)
    verdict = check_log(outcome, logs)
    print(f"{what}: acknowledged={verdict.acknowledged} lost={len(verdict.lost)} "
          f"duplicates={verdict.duplicates} idempotent={idempotent} {faults}")
    if outcome.failed:
        reasons = Counter(outcome.failed.values())
        print(f"{what}: {len(outcome.failed)} sends failed (never acknowledged): "
              f"{reasons.most_common(3)}")
    assert not verdict.lost, f"acknowledged messages lost: {verdict.lost[:20]}"
    assert not verdict.moved, f"acknowledged offsets hold something else: {verdict.moved[:20]}"
    assert not verdict.out_of_order, f"out of send order: {verdict.out_of_order[:20]}"
    if idempotent:
        assert not verdict.duplicates, "the idempotent producer's retries stored duplicates"
    # and each replica holds exactly the same log (compared on disk, once caught up)
    until(lambda: replicas_identical(cluster, topic, partitions), 30,
          f"every replica of {topic} holds the same messages at the same offsets")
    for p in partitions:
        on_disk = replica_log(cluster.any_running(), topic, p)
        assert on_disk[:len(logs[p])] == logs[p], f"{topic}-{p}: the consumer read another log"
    return verdict


@pytest.mark.timeout(120 + 45 * FAULT_ROUNDS)
@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "not-idempotent"])
def test_no_acknowledged_message_is_lost_when_leaders_are_killed_again_and_again(
    make_cluster: Callable[..., Cluster], idempotent: bool,
) -> None:
    cluster = make_cluster(3, settings=SETTINGS)
    topic, partitions = "durable", [0, 1, 2]
    cluster.create_topic(topic, partitions=len(partitions), replication_factor=3)
    until(lambda: all_in_sync(cluster, topic), 20, "a full ISR to start with")
    bootstrap = ",".join(p.bootstrap for p in cluster.brokers.values())
    producer = NumberedProducer(bootstrap, topic, partitions, idempotent=idempotent)
    producer.start()
    try:
        until(lambda: producer.acked_count() >= 100, 30, "acknowledged sends before any kill")
        for round_ in range(FAULT_ROUNDS):
            until(lambda: all_in_sync(cluster, topic), cluster.failover_bound + 20,
                  f"round {round_}: the last victim back in every ISR")
            state = cluster.state(topic, 0)
            victim_id = state["leader"]
            victim = cluster.brokers[victim_id]
            port = victim.port
            acked_before = producer.acked_count()
            killed_at = time.monotonic()
            victim.kill()

            def moved_on(victim_id: int = victim_id, epoch: int = state["leader_epoch"]) -> bool:
                s = cluster.state(topic, 0)
                return s["leader"] not in (victim_id, -1) and s["leader_epoch"] > epoch

            until(moved_on, cluster.failover_bound, f"round {round_}: a new leader of "
                  f"{topic}-0 after kill -9 of broker {victim_id}")
            # acks=all goes on with two in-sync replicas of three (min_insync_replicas 2)
            until(lambda n=acked_before + 50: producer.acked_count() >= n,
                  cluster.failover_bound, f"round {round_}: acknowledgements after the kill")
            victim.start(port=port, timeout=cluster.failover_bound + 10)
            print(f"round {round_}: killed leader {victim_id}; "
                  f"{producer.acked_count() - acked_before} acknowledged since, "
                  f"restarted after {time.monotonic() - killed_at:.1f} s")
        until(lambda: all_in_sync(cluster, topic), cluster.failover_bound + 20,
              "the last victim back in every ISR")
        until(lambda: producer.acked_count() >= acked_before + 100, 30,
              "acknowledgements after the last restart")
    finally:
        outcome = producer.stop(240)
    final_check(cluster, topic, partitions, outcome, "durability", f"kills={FAULT_ROUNDS}",
                idempotent=idempotent)


@pytest.mark.timeout(180)
def test_every_acknowledged_message_survives_killing_the_whole_cluster_at_once(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3, settings=SETTINGS)
    topic, partitions = "blackout", [0, 1]
    cluster.create_topic(topic, partitions=len(partitions), replication_factor=3)
    until(lambda: all_in_sync(cluster, topic), 20, "a full ISR to start with")
    bootstrap = ",".join(p.bootstrap for p in cluster.brokers.values())
    producer = NumberedProducer(bootstrap, topic, partitions)
    producer.start()
    try:
        until(lambda: producer.acked_count() >= 200, 30, "acknowledged sends before the kill")
        processes = list(cluster.brokers.values())
        for process in processes:  # all at once: signals first, reaping after
            os.kill(process.pid, signal.SIGKILL)
        for process in processes:
            process.kill()
        acked_at_kill = producer.acked_count()
        ports = {process: process.port for process in processes}
        with ThreadPoolExecutor(len(processes)) as pool:
            for future in [pool.submit(p.start, port=ports[p],
                                       timeout=cluster.failover_bound + 10) for p in processes]:
                future.result()
        cluster.wait_ready(30)
        until(lambda: producer.acked_count() >= acked_at_kill + 100, cluster.failover_bound + 30,
              "acknowledgements after the whole cluster came back")
    finally:
        outcome = producer.stop(240)
    verdict = final_check(cluster, topic, partitions, outcome, "blackout",
                          f"kills={len(processes)}")
    assert verdict.acknowledged >= acked_at_kill
