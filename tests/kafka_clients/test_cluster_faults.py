"""Kafka's clients on a 3-broker cluster whose brokers die by SIGKILL (seed 003: "your data in a
partition will be there until N-1 brokers fails"; seed 001: "Co-ordinator failover").

A confluent-kafka (librdkafka) producer sends a numbered stream to a topic of replication
factor 3 with acks=all and retries (no idempotence), while a confluent-kafka consumer of one
group (subscribe, a synchronous commit after each batch) reads it. Each round SIGKILLs the
partition's leader, waits for both to make progress again and restarts it; then SIGKILLs the
group's coordinator (the leader of the group's ``__consumer_offsets`` partition), waits for
the group to be Steady under another broker and for progress, and restarts it too, as
tests/cluster/test_durability.py restarts its victims. Afterwards odradek's own Consumer reads
the partition from the beginning: every message whose delivery report said it was written must
be there, at the offset the report gave; a retry after an unknown outcome may store a message
twice, and those duplicates are counted and printed, not failed. The consumer must have
processed every acknowledged message, and the group must be Steady with its commits at the
log end.

``ODRADEK_FAULT_ROUNDS`` (default 3) sets the number of rounds, as for the durability tests.

And the addresses Kafka's clients are given: each broker registers its Kafka listener in
``/brokers/ids/N`` beside its own, and kcat asking one broker is told every broker's.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import subprocess
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer

from protocol.partitions import offsets_partition_for
from tests.cluster import conftest as cluster_fixtures
from tests.cluster.conftest import Cluster, free_port, read_partitions, until
from tests.cluster.test_durability import ProducerThread, all_in_sync, check_log
from tooling.cli import main as cli

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

# The cluster tests' fixture (brokers 0..n-1 in this test's own ZooKeeper chroot, stopped by
# PID at the end), registered in this module too: its conftest is not this directory's.
make_cluster = cluster_fixtures.make_cluster

#: rounds of two kills each (ODRADEK_FAULT_ROUNDS; 3 by default, as the durability tests)
FAULT_ROUNDS = max(1, int(os.environ.get("ODRADEK_FAULT_ROUNDS", "3")))
OFFSETS_TOPIC = "__consumer_offsets"
TOPIC = "numbered"
GROUP = "numbered-readers"
#: short ZooKeeper sessions and lag bounds, so that each kill is acted on within seconds; the
#: group's first round starts at once
SETTINGS: dict[str, Any] = {
    "zookeeper_session_timeout_ms": 3000,
    "replica_lag_time_max_ms": 3000,
    "min_insync_replicas": 2,
    "maintenance_interval_ms": 500,
    "group_initial_rebalance_delay_ms": 0,
}
#: progress the producer and the consumer must both make after each kill
PROGRESS = 100


class NumberedProducer(ProducerThread):
    """librdkafka sends ``"<seq>"`` to partition 0, ``rate`` a second, acks=all, until
    ``stop()``; then flushes. Its delivery reports (run by ``poll`` in this thread) fill the
    ``Outcome`` keyed (0, seq) -> offset."""

    def __init__(self, bootstrap: str, topic: str, *, rate: float = 200.0,
                 max_unsettled: int = 1000) -> None:
        super().__init__(f"librdkafka-producer-{topic}", rate=rate, max_unsettled=max_unsettled)
        self.config = {
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
            "retries": 2_147_483_647, "retry.backoff.ms": 100, "request.timeout.ms": 5_000,
            "message.timeout.ms": 180_000, "linger.ms": 5,
        }
        self.topic = topic

    def _report(self, seq: int, error: KafkaError | None, message: Message) -> None:
        with self._lock:
            self._settled += 1
            offset = message.offset()
            if error is None and offset is not None:
                self.outcome.acked[(0, seq)] = offset
            else:
                self.outcome.failed[(0, seq)] = str(error)

    def run(self) -> None:
        try:
            producer = Producer(self.config)
            seq = 0
            while not self._halt.is_set():
                if self.outcome.sent - self._settled < self.max_unsettled:
                    producer.produce(self.topic, f"0:{seq}".encode(), partition=0,
                                     on_delivery=functools.partial(self._report, seq))
                    self.outcome.sent += 1
                    seq += 1
                producer.poll(self.interval)
            left = producer.flush(180)
            assert left == 0, f"{left} messages neither delivered nor failed after the flush"
        except BaseException as exc:  # reported by stop()
            self.error = exc


class GroupReader(threading.Thread):
    """A librdkafka member of ``group`` subscribed to ``topic``: each batch it is given is
    counted as processed, then its offsets committed synchronously. A commit refused while the
    coordinator moves is counted; the next batch's commit covers it."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(name=f"librdkafka-consumer-{group}", daemon=True)
        self.config = {
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 6_000,
            "heartbeat.interval.ms": 500,
        }
        self.topic = topic
        self.processed: Counter[bytes] = Counter()
        self.commit_failures: Counter[str] = Counter()
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._halt = threading.Event()

    def processed_count(self) -> int:
        with self._lock:
            return len(self.processed)

    def seen(self) -> set[bytes]:
        with self._lock:
            return set(self.processed)

    def stop(self, timeout: float) -> None:
        self._halt.set()
        self.join(timeout)
        assert not self.is_alive(), f"the consumer did not close within {timeout} s"
        if self.error is not None:
            raise self.error

    def run(self) -> None:
        try:
            consumer = Consumer(self.config)
            try:
                consumer.subscribe([self.topic])
                while not self._halt.is_set():
                    batch = [m for m in consumer.consume(200, timeout=0.2) if not m.error()]
                    if not batch:
                        continue
                    with self._lock:
                        self.processed.update(m.value() or b"" for m in batch)
                    try:
                        consumer.commit(asynchronous=False)
                    except KafkaException as exc:
                        self.commit_failures[exc.args[0].name()] += 1
            finally:
                consumer.close()
        except BaseException as exc:  # reported by stop()
            self.error = exc


def kafka_cluster(make_cluster: Callable[..., Cluster]) -> Cluster:
    """Three brokers, each with a Kafka listener on a port of its own fixed up front, so a
    broker restarted after a kill listens where Kafka's clients last saw it."""
    ports: set[int] = set()
    while len(ports) < 3:
        ports.add(free_port())
    return make_cluster(3, settings=SETTINGS, per_broker={
        i: {"kafka_listeners": f"PLAINTEXT://127.0.0.1:{port}"}
        for i, port in enumerate(sorted(ports))})


def kafka_bootstrap(cluster: Cluster) -> str:
    return ",".join(p.kafka_bootstrap for _, p in sorted(cluster.brokers.items()))


def native_bootstrap(cluster: Cluster) -> str:
    return ",".join(p.bootstrap for _, p in sorted(cluster.running().items()))


def describe_group(cluster: Cluster) -> dict[str, Any]:
    """``odradek groups describe GROUP --json`` through the running brokers."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["groups", "describe", GROUP, "--json", "--bootstrap",
                         native_bootstrap(cluster), "--api-timeout-ms", "5000"])
    assert code == 0, err.getvalue()
    described: dict[str, Any] = json.loads(out.getvalue())
    return described


def steady(cluster: Cluster, *, not_on: int | None = None) -> dict[str, Any] | None:
    """The group's description if it is Steady with its one member, coordinated by the leader
    of its ``__consumer_offsets`` partition (and not by ``not_on``); else None."""
    described = describe_group(cluster)
    coordinator = described["coordinator"]["node_id"]
    leader = cluster.state(OFFSETS_TOPIC, offsets_partition_for(GROUP, 3))["leader"]
    if (described["state"] != "Steady" or described["member_count"] != 1
            or coordinator != leader or coordinator == not_on):
        return None
    return described


def kill_and_restart(cluster: Cluster, topic: str, partition: int, producer: NumberedProducer,
                     reader: GroupReader, what: str, *, group_moves: bool = False) -> None:
    """SIGKILL the leader of ``topic``-``partition``; once another broker leads it (and, if
    ``group_moves``, the group is Steady there) and both clients made progress, restart the
    victim and wait until it is back in every ISR."""
    state = cluster.state(topic, partition)
    victim_id: int = state["leader"]
    victim = cluster.brokers[victim_id]
    port = victim.port
    acked, processed = producer.acked_count(), reader.processed_count()
    victim.kill()

    def moved_on() -> bool:
        now = cluster.state(topic, partition)
        return now["leader"] not in (victim_id, -1) and now["leader_epoch"] > state[
            "leader_epoch"]

    until(moved_on, cluster.failover_bound, f"{what}: a new leader of {topic}-{partition} "
          f"after kill -9 of broker {victim_id}")
    if group_moves:
        until(lambda: steady(cluster, not_on=victim_id), cluster.failover_bound + 30,
              f"{what}: the group Steady under a new coordinator")
    until(lambda: producer.acked_count() >= acked + PROGRESS, cluster.failover_bound + 30,
          f"{what}: acknowledgements after the kill")
    until(lambda: reader.processed_count() >= processed + PROGRESS, cluster.failover_bound + 30,
          f"{what}: the group consuming after the kill")
    victim.start(port=port, timeout=cluster.failover_bound + 10)
    until(lambda: all_in_sync(cluster, topic) and all_in_sync(cluster, OFFSETS_TOPIC),
          cluster.failover_bound + 30, f"{what}: broker {victim_id} back in every ISR")
    print(f"{what}: killed broker {victim_id}; {producer.acked_count() - acked} acknowledged "
          f"and {reader.processed_count() - processed} processed since, restarted")


@pytest.mark.timeout(150 + 100 * FAULT_ROUNDS)
def test_librdkafka_loses_no_acknowledged_message_when_leader_and_coordinator_are_killed(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = kafka_cluster(make_cluster)
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    until(lambda: all_in_sync(cluster, TOPIC), 30, f"a full ISR of {TOPIC}")
    producer = NumberedProducer(kafka_bootstrap(cluster), TOPIC)
    reader = GroupReader(kafka_bootstrap(cluster), GROUP, TOPIC)
    producer.start()
    reader.start()
    try:
        try:
            until(lambda: producer.acked_count() >= 2 * PROGRESS
                  and reader.processed_count() >= PROGRESS, 60,
                  "acknowledged and processed messages before any kill")
            # the group's first commits made __consumer_offsets
            until(lambda: steady(cluster), 30, "the group Steady before any kill")
            until(lambda: all_in_sync(cluster, OFFSETS_TOPIC), 30,
                  f"a full ISR of {OFFSETS_TOPIC}")
            for round_ in range(FAULT_ROUNDS):
                kill_and_restart(cluster, TOPIC, 0, producer, reader,
                                 f"round {round_}, the partition's leader")
                # FindCoordinator (odradek's own) names the leader of the group's partition
                until(lambda: steady(cluster), 30, f"round {round_}: the group Steady")
                kill_and_restart(cluster, OFFSETS_TOPIC, offsets_partition_for(GROUP, 3),
                                 producer, reader, f"round {round_}, the group's coordinator",
                                 group_moves=True)
        finally:
            outcome = producer.stop(240)
        wanted = {f"0:{seq}".encode() for (_, seq) in outcome.acked}
        until(lambda: wanted <= reader.seen(), 60, "every acknowledged message processed")

        def caught_up() -> dict[str, Any] | None:
            described = steady(cluster)
            if described is None or [(o["partition"], o["committed_offset"] == o[
                    "log_end_offset"]) for o in described["offsets"]] != [(0, True)]:
                return None
            return described

        final = until(caught_up, 60, "the group Steady with its commit at the log end")
    finally:
        reader.stop(60)
    logs = read_partitions(native_bootstrap(cluster), TOPIC, [0], timeout=60)
    verdict = check_log(outcome, logs)
    reordered = len(verdict.out_of_order)
    print(f"librdkafka on a cluster: acknowledged={verdict.acknowledged} "
          f"lost={len(verdict.lost)} duplicates={verdict.duplicates} reordered={reordered} "
          f"kills={2 * FAULT_ROUNDS}; the group Steady on broker "
          f"{final['coordinator']['node_id']} at generation {final['generation']}, "
          f"{sum(reader.processed.values())} processed ({len(reader.processed)} distinct), "
          f"commits refused {dict(reader.commit_failures)}")
    if outcome.failed:
        print(f"{len(outcome.failed)} sends failed (never acknowledged): "
              f"{Counter(outcome.failed.values()).most_common(3)}")
    assert verdict.acknowledged >= PROGRESS * (2 + 2 * FAULT_ROUNDS)
    assert not verdict.lost, f"acknowledged messages lost: {verdict.lost[:20]}"
    assert not verdict.moved, f"acknowledged offsets hold something else: {verdict.moved[:20]}"


@pytest.mark.timeout(90)
def test_each_broker_registers_its_kafka_listener_and_kcat_is_told_every_one(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3, settings={"kafka_listeners": "PLAINTEXT://127.0.0.1:0"})
    kafka_addresses = {i: p.kafka_bootstrap for i, p in cluster.brokers.items()}
    assert len(set(kafka_addresses.values())) == 3
    for broker_id, process in cluster.brokers.items():
        registration = cluster.json(f"/brokers/ids/{broker_id}")
        endpoints = registration["endpoints"]
        assert f"KAFKA_PLAINTEXT://{kafka_addresses[broker_id]}" in endpoints, registration
        assert f"PLAINTEXT://{process.bootstrap}" in endpoints, registration
    for asked in cluster.brokers.values():
        run = subprocess.run(["kcat", "-L", "-J", "-b", asked.kafka_bootstrap, "-m", "20"],
                             capture_output=True, timeout=30)
        assert run.returncode == 0, run.stderr.decode()
        listed = json.loads(run.stdout)
        assert {b["id"]: b["name"] for b in listed["brokers"]} == kafka_addresses, listed
        assert listed["controllerid"] == cluster.controller_id()
