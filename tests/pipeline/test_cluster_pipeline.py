"""The Spark source on a three-broker cluster, through a leader change: with every broker in
``kafka.bootstrap.servers`` it reads every message, commits a stream's offsets to its group and
writes every row, before and after a partition leader is killed with SIGKILL (and, in the last
test, while leadership moves between live brokers).

The topic has three partitions with three replicas each and ``min.insync.replicas`` 2, and its
messages are produced with acks=all, so each one is on at least two brokers when acknowledged:
a leader's death loses none of them. The broker killed leads at least one partition and is
neither the controller nor (for the stream) its group's coordinator: what is tested here is the
clients following partitions to their new leaders, not a controller or coordinator failover
(tests/cluster has those). The dead broker stays in the bootstrap list, as it would in a job's
configuration.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from client.admin import Admin
from client.group_admin import GroupAdmin
from client.producer import Producer
from client.records import TopicPartition
from tests.cluster import conftest as cluster_fixtures
from tests.cluster.conftest import Cluster, until
from tests.pipeline.support import BASE_TIME_MS, Sent, committed_offsets, row_to_sent, rows_of

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.timeout(240)]

# The cluster tests' fixture (brokers 0..n-1 in this test's own ZooKeeper chroot, stopped by
# PID at the end), registered in this module too: its conftest is not this directory's.
make_cluster = cluster_fixtures.make_cluster

TOPIC = "events"
PARTITIONS = 3
QUERY_TIMEOUT_S = 120


# ----------------------------------------------------------------------------------- helpers


def _cluster_with_topic(make_cluster: Callable[..., Cluster]) -> tuple[Cluster, str]:
    """Three brokers and the topic, every partition led everywhere; and the bootstrap list of
    all three brokers."""
    cluster = make_cluster(3)
    bootstrap = ",".join(cluster.brokers[i].bootstrap for i in sorted(cluster.brokers))
    with Admin(bootstrap, timeout_ms=20_000) as admin:
        admin.create_topic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"})
    cluster.wait_for_leaders(TOPIC, PARTITIONS)
    until(lambda: all(len(s["isr"]) == 3 for s in cluster.states(TOPIC).values()), 20,
          f"every replica of {TOPIC!r} in sync")
    return cluster, bootstrap


def _producer(bootstrap: str) -> Producer:
    return Producer(bootstrap, acks="all", linger_ms=5, retry_backoff_ms=100,
                    request_timeout_ms=5_000, delivery_timeout_ms=90_000)


def _send(producer: Producer, first: int, count: int) -> list[Sent]:
    """Messages ``first .. first+count-1``: value ``v<i>``, key ``k<i>``, partition
    ``i % PARTITIONS``; returns where each was stored once every one is acknowledged."""
    pending = []
    for i in range(first, first + count):
        key, value, timestamp = b"k%d" % i, b"v%d" % i, BASE_TIME_MS + i * 1000
        future = producer.send(TOPIC, value, key=key, partition=i % PARTITIONS,
                               timestamp=timestamp)
        pending.append((future, key, value, timestamp))
    producer.flush(90)
    sent = []
    for future, key, value, timestamp in pending:
        meta = future.result(0)  # raises the send's error, if any
        sent.append(Sent(meta.topic, meta.partition, meta.offset, key, value, timestamp))
    return sent


def _assert_complete(rows: list[Sent], total: int) -> None:
    """``rows`` are messages 0..total-1 exactly once each, every partition's at offsets
    0..n-1 with no gap."""
    assert sorted(int(r.value[1:]) for r in rows) == list(range(total))
    offsets: dict[int, list[int]] = defaultdict(list)
    for r in rows:
        offsets[r.partition].append(r.offset)
    for partition, found in offsets.items():
        assert sorted(found) == list(range(len(found))), f"partition {partition}"


def _batch_read(spark: SparkSession, bootstrap: str) -> list[Sent]:
    df = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .load()
    )
    return rows_of(df)


def _victim(cluster: Cluster) -> int:
    """A broker leading a partition of the topic that is not the controller."""
    controller = cluster.controller_id()
    leaders = cluster.leaders(TOPIC)
    candidates = sorted(set(leaders.values()) - {controller})
    assert candidates, f"leaders {leaders}, controller {controller}"
    return candidates[0]


def _kill_leader(cluster: Cluster, victim: int) -> list[int]:
    """SIGKILL ``victim`` (by its PID) and return the partitions it led, without waiting for
    their new leaders."""
    moved = sorted(p for p, leader in cluster.leaders(TOPIC).items() if leader == victim)
    assert moved
    cluster.brokers[victim].kill()
    return moved


def _wait_for_new_leaders(cluster: Cluster, victim: int, moved: list[int]) -> None:
    """Until ZooKeeper and every live broker's metadata name leaders other than ``victim``
    for every partition."""
    def elected() -> bool:
        if any(s["leader"] in (victim, -1) for s in cluster.states(TOPIC).values()):
            return False
        for broker_id in cluster.running():
            partitions = cluster.metadata(broker_id, [TOPIC]).topics[TOPIC].partitions
            if any(p.leader in (victim, -1) for p in partitions.values()):
                return False
        return True

    until(elected, cluster.failover_bound, f"new leaders for partitions {moved}")


def _live_bootstrap(cluster: Cluster) -> str:
    return ",".join(p.bootstrap for _, p in sorted(cluster.running().items()))


# ------------------------------------------------------------------------------------- tests


def test_batch_read_with_every_broker_reads_everything_before_and_after_a_leader_dies(
    spark: SparkSession, make_cluster: Callable[..., Cluster]
) -> None:
    cluster, bootstrap = _cluster_with_topic(make_cluster)
    with _producer(bootstrap) as producer:
        sent = _send(producer, 0, 300)

    rows = _batch_read(spark, bootstrap)
    assert sorted(rows) == sorted(sent)

    victim = _victim(cluster)
    moved = _kill_leader(cluster, victim)
    print(f"killed broker {victim}, the leader of partitions {moved}")
    # at once, while the dead broker is still registered and named as their leader: the
    # planning (ListOffsets) and the tasks' fetches wait for the new leaders
    rows = _batch_read(spark, bootstrap)
    assert sorted(rows) == sorted(sent)  # acks=all: nothing lost with the leader

    _wait_for_new_leaders(cluster, victim, moved)
    rows = _batch_read(spark, bootstrap)
    assert sorted(rows) == sorted(sent)
    _assert_complete(rows, 300)


def test_stream_commits_to_its_group_and_resumes_across_a_leader_change(
    spark: SparkSession, make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    """Three availableNow runs of one stream (one checkpoint, one group): before the kill,
    through it (the leader dies after the run's first batch), and after it."""
    cluster, bootstrap = _cluster_with_topic(make_cluster)
    victim = _victim(cluster)
    # a group whose coordinator lives on: its __consumer_offsets partition is not the victim's
    with GroupAdmin(bootstrap, timeout_ms=30_000) as admin:
        group = next(g for g in (f"spark-job-{i}" for i in range(50))
                     if admin.find_coordinator(g).node_id != victim)
        coordinator = admin.find_coordinator(group).node_id
    checkpoint = tmp_path / "checkpoint"
    killed: list[int] = []

    def run(*, kill_after_first_batch: bool = False) -> list[Sent]:
        """One availableNow run from the checkpoint, in batches of at most 100 rows, every
        batch's rows collected on the driver."""
        collected: list[Sent] = []

        def collect(batch: DataFrame, batch_id: int) -> None:
            collected.extend(row_to_sent(row) for row in batch.collect())
            if kill_after_first_batch and not killed:
                killed.extend(_kill_leader(cluster, victim))
                print(f"group {group} (coordinator {coordinator}): killed broker {victim}, "
                      f"the leader of partitions {killed}, after batch {batch_id}")

        query = (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .option("groupId", group)
            .option("maxOffsetsPerTrigger", "100")
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(QUERY_TIMEOUT_S), "the query did not finish in time"
        assert query.exception() is None
        return collected

    def committed() -> dict[TopicPartition, int]:
        return committed_offsets(_live_bootstrap(cluster), group)

    def ends(sent: list[Sent]) -> dict[TopicPartition, int]:
        return {TopicPartition(TOPIC, p): max(s.offset for s in sent if s.partition == p) + 1
                for p in range(PARTITIONS)}

    def starts(rows: list[Sent]) -> dict[TopicPartition, int]:
        return {TopicPartition(TOPIC, p): min(r.offset for r in rows if r.partition == p)
                for p in range(PARTITIONS)}

    # one producer throughout: after the kill it has to find the new leaders by itself
    with _producer(bootstrap) as producer:
        first = _send(producer, 0, 150)
        rows_before = run()
        assert sorted(rows_before) == sorted(first)
        assert committed() == ends(first)

        second = _send(producer, 150, 150)
        rows_through = run(kill_after_first_batch=True)
        assert killed, "the run had no batch to kill the leader after"
        # it went on from where the group's commits said the first run stopped
        assert starts(rows_through) == ends(first)
        assert sorted(rows_through) == sorted(second)
        assert committed() == ends(first + second)  # committed after the leader died

        third = _send(producer, 300, 120)  # acks=all, to the new leaders
    _wait_for_new_leaders(cluster, victim, killed)
    rows_after = run()
    assert starts(rows_after) == ends(first + second)
    assert sorted(rows_after) == sorted(third)
    _assert_complete(rows_before + rows_through + rows_after, 420)
    assert committed() == ends(first + second + third)


def test_batch_write_with_a_broker_down_lands_every_row(
    spark: SparkSession, make_cluster: Callable[..., Cluster]
) -> None:
    cluster, bootstrap = _cluster_with_topic(make_cluster)
    victim = _victim(cluster)
    moved = _kill_leader(cluster, victim)  # the write starts at once
    print(f"killed broker {victim}, the leader of partitions {moved}")

    rows = [(f"k{i}", f"w{i}".encode(), i % PARTITIONS) for i in range(300)]
    df = spark.createDataFrame(rows, "key string, value binary, partition int")
    (
        df.write.format("odradek")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", TOPIC)
        .save()
    )

    back = _batch_read(spark, bootstrap)
    assert sorted((r.partition, r.key, r.value) for r in back) == sorted(
        (p, key.encode(), value) for key, value, p in rows
    )
    for p in range(PARTITIONS):  # nothing written twice: offsets 0..99 in every partition
        assert sorted(r.offset for r in back if r.partition == p) == list(range(100))


def test_running_stream_follows_leadership_moving_between_live_brokers(
    spark: SparkSession, make_cluster: Callable[..., Cluster]
) -> None:
    """Leadership moves while the ex-leader lives on (a preferred-leader election back to the
    restarted broker), so a client that still sends to it gets NOT_LEADER_FOR_PARTITION rather
    than a dead connection: the producer, made before the move, does (it refreshes its metadata
    and sends again), and the running stream (a processing-time trigger: ListOffsets for every
    batch, fetches from the leaders) reads on across the move, nothing lost or read twice."""
    cluster, bootstrap = _cluster_with_topic(make_cluster)
    victim = _victim(cluster)
    moved = _kill_leader(cluster, victim)
    _wait_for_new_leaders(cluster, victim, moved)
    cluster.brokers[victim].restart()
    until(lambda: all(len(s["isr"]) == 3 for s in cluster.states(TOPIC).values()),
          cluster.failover_bound, f"broker {victim} back in every ISR")
    interim = cluster.leaders(TOPIC)

    query = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("memory")
        .queryName("moving")
        .trigger(processingTime="500 milliseconds")
        .start()
    )

    def read_so_far() -> list[Sent]:
        assert query.exception() is None, query.exception()
        return [row_to_sent(row) for row in spark.sql("SELECT * FROM moving").collect()]

    try:
        with _producer(bootstrap) as producer:
            first = _send(producer, 0, 90)
            until(lambda: len(read_so_far()) >= 90, QUERY_TIMEOUT_S, "the first 90 messages")

            # back to the preferred replica, the restarted broker: the interim leaders live on
            with Admin(_live_bootstrap(cluster), timeout_ms=20_000) as admin:
                admin.elect_leaders([(TOPIC, p) for p in moved])
            until(lambda: all(cluster.leaders(TOPIC)[p] == victim for p in moved),
                  cluster.failover_bound, f"broker {victim} leading {moved} again")
            print(f"leaders {interim} -> {cluster.leaders(TOPIC)}")

            second = _send(producer, 90, 90)
        until(lambda: len(read_so_far()) >= 180, QUERY_TIMEOUT_S, "all 180 messages")
        rows = read_so_far()
    finally:
        query.stop()
    assert sorted(rows) == sorted(first + second)
    _assert_complete(rows, 180)
