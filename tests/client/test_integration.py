"""Producer, Consumer, Admin and the CLI against a real broker process on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from client import (
    EARLIEST,
    LATEST,
    Admin,
    Consumer,
    ConsumerRecord,
    Producer,
    RecordTooLargeError,
    TopicPartition,
    partition_for_key,
)
from protocol.errors import (
    InvalidRecordError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

pytestmark = pytest.mark.integration


def poll_until(consumer: Consumer, n: int, timeout: float = 20.0) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(records) < n:
        assert time.monotonic() < deadline, f"only {len(records)} of {n} records in time"
        records += consumer.poll(timeout_ms=200)
    return records


# ------------------------------------------------------------------------------------- admin


def test_topics_are_created_described_listed_and_deleted(broker) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("orders", partitions=3, configs={"cleanup_policy": "delete"})
        assert "orders" in admin.list_topics()
        [info] = admin.describe_topics(["orders"])
        assert sorted(info.partitions) == [0, 1, 2]
        cluster = admin.describe_cluster()
        assert len(cluster.cluster_id or "") == 22
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster.cluster_id or "")
        [node] = cluster.brokers
        assert cluster.controller_id == node.node_id
        for p in info.partitions.values():
            assert (p.leader, p.replicas, p.isr) == (node.node_id, (node.node_id,), (node.node_id,))
        with pytest.raises(TopicAlreadyExistsError, match="orders"):
            admin.create_topic("orders")
        with pytest.raises(InvalidTopicError, match="bad/name"):
            admin.create_topic("bad/name")
        with pytest.raises(InvalidReplicationFactorError, match="many"):
            admin.create_topic("many", replication_factor=2)
        admin.delete_topic("orders")
        assert "orders" not in admin.list_topics()
        with pytest.raises(UnknownTopicOrPartitionError, match="orders"):
            admin.describe_topics(["orders"])
        assert {a.name for a in admin.api_versions()} >= {"Produce", "Fetch", "Metadata"}


def test_list_offsets_earliest_latest_and_by_time(broker) -> None:
    tp = TopicPartition("times", 0)
    with Producer(broker.bootstrap) as producer:
        for i in range(10):
            producer.send("times", b"%d" % i, timestamp=1_000 + i * 100)
    with Admin(broker.bootstrap) as admin:
        found = admin.list_offsets({tp: EARLIEST})
        assert found[tp].offset == 0
        assert admin.list_offsets({tp: LATEST})[tp].offset == 10
        by_time = admin.list_offsets({tp: 1_450})[tp]
        assert (by_time.offset, by_time.timestamp) == (5, 1_500)


# ------------------------------------------------------------------------ produce and consume


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_what_is_produced_is_consumed_in_order(broker, codec: str, acks) -> None:
    topic = f"round-{codec}-{acks}"
    with Admin(broker.bootstrap) as admin:
        admin.create_topic(topic, partitions=2)
    sent = [(b"key-%d" % (i % 9), b"value %d " % i + b"x" * (i % 50)) for i in range(500)]
    with Producer(broker.bootstrap, acks=acks, compression=codec, linger_ms=2) as producer:
        futures = [producer.send(topic, v, key=k) for k, v in sent]
        producer.flush(20)
    for (key, _), future in zip(sent, futures, strict=True):
        metadata = future.result()
        assert metadata.partition == partition_for_key(key, 2)
        assert (metadata.offset >= 0) == (acks != 0)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        records = poll_until(consumer, len(sent))
    for p in (0, 1):
        got = [(r.key, r.value) for r in records if r.partition == p]
        assert got == [kv for kv in sent if partition_for_key(kv[0], 2) == p]
        assert [r.offset for r in records if r.partition == p] == list(range(len(got)))


def test_a_large_message_is_read_with_a_bigger_fetch_or_named(broker) -> None:
    tp = TopicPartition("big", 0)
    with Producer(broker.bootstrap, max_request_bytes=1 << 20) as producer:
        producer.send("big", b"small")
        producer.send("big", b"B" * 300_000)
        producer.send("big", b"after")
    with Consumer(
        broker.bootstrap,
        auto_offset_reset="earliest",
        partition_fetch_bytes=1024,
        max_partition_fetch_bytes=512 * 1024,
    ) as consumer:
        consumer.assign([tp])
        assert [len(r.value or b"") for r in poll_until(consumer, 3)] == [5, 300_000, 5]
    with Consumer(
        broker.bootstrap,
        auto_offset_reset="earliest",
        partition_fetch_bytes=1024,
        max_partition_fetch_bytes=64 * 1024,
    ) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1)
        with pytest.raises(RecordTooLargeError, match="big-0 offset 1"):
            for _ in range(100):
                consumer.poll(timeout_ms=100)


def test_a_message_over_the_brokers_limit_is_refused_by_type(broker) -> None:
    with Producer(broker.bootstrap, max_request_bytes=4 << 20, batch_bytes=4 << 20) as producer:
        future = producer.send("huge", b"H" * (2 << 20))
        with pytest.raises(MessageTooLargeError, match="huge-0"):
            future.result(timeout=20)
        assert producer.send("huge", b"fine").result(timeout=20).offset == 0


@pytest.mark.timeout(60)
def test_a_keyless_message_to_a_compacted_topic_fails_at_once(broker) -> None:
    """A refusal that retrying cannot change fails the future on the first answer; with an hour
    of delivery timeout, retrying would run into the 20 s wait below (it used to: the broker
    answered CORRUPT_MESSAGE, which is retriable)."""
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("compacted", configs={"cleanup_policy": "compact"})
    producer = Producer(broker.bootstrap, delivery_timeout_ms=3_600_000, retry_backoff_ms=10)
    try:
        started = time.monotonic()
        future = producer.send("compacted", b"no key")
        with pytest.raises(InvalidRecordError, match=r"^compacted-0: .*without a key"):
            future.result(timeout=20)
        assert time.monotonic() - started < 10
        assert not future.exception().retriable  # type: ignore[union-attr]
        keyed = producer.send("compacted", b"keyed", key=b"k").result(timeout=20)
        assert keyed.offset == 0  # nothing of the refused message was written
    finally:
        producer.close(timeout=1)


def test_out_of_range_resets_or_raises(broker) -> None:
    tp = TopicPartition("range", 0)
    with Producer(broker.bootstrap) as producer:
        for i in range(3):
            producer.send("range", b"%d" % i)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 50)
        assert [r.offset for r in poll_until(consumer, 3)] == [0, 1, 2]
        assert consumer.end_offsets([tp]) == {tp: 3}
        assert consumer.beginning_offsets([tp]) == {tp: 0}
    with Consumer(broker.bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 50)
        with pytest.raises(
            OffsetOutOfRangeError, match=r"range-0: offset 50 is out of range \[0, 3\]"
        ):
            for _ in range(100):
                consumer.poll(timeout_ms=100)


def test_a_consumer_at_the_end_sees_only_new_messages(broker) -> None:
    tp = TopicPartition("tail", 0)
    with Producer(broker.bootstrap) as producer:
        producer.send("tail", b"old").result(timeout=20)
        with Consumer(broker.bootstrap) as consumer:  # auto_offset_reset="latest"
            consumer.assign([tp])
            assert consumer.position(tp) == 1
            assert consumer.poll(timeout_ms=100) == []
            producer.send("tail", b"new").result(timeout=20)
            assert [r.value for r in poll_until(consumer, 1)] == [b"new"]
            assert consumer.highwater(tp) == 2


# ---------------------------------------------------------------------------------------- CLI


def odradek(broker, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tooling.cli", *args, "--bootstrap", broker.bootstrap],
        input=stdin.decode(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_topics_produce_consume(broker) -> None:
    created = odradek(broker, "topics", "create", "cli", "--partitions", "2", "--json",
                      "--config", "retention_ms=3600000")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["partitions"] == 2
    listed = odradek(broker, "topics", "list", "--json")
    assert "cli" in json.loads(listed.stdout)
    produced = odradek(broker, "produce", "cli", "--key-separator", "\t", "--acks", "all",
                       "--compression", "snappy", stdin=b"a\tone\nb\ttwo\nc\tthree\n")
    assert produced.returncode == 0, produced.stderr
    assert re.search(r"sent 3 messages to 'cli' in [\d.]+ s \([\d,]+ msgs/s\)", produced.stderr)
    consumed = odradek(broker, "consume", "cli", "--from-beginning", "--max-messages", "3",
                       "--json")
    assert consumed.returncode == 0, consumed.stderr
    records = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert sorted((r["key"], r["value"]) for r in records) == [
        ("a", "one"), ("b", "two"), ("c", "three")
    ]
    for r in records:
        assert r["partition"] == partition_for_key(r["key"].encode(), 2)
    described = odradek(broker, "topics", "describe", "cli", "--json")
    [topic] = json.loads(described.stdout)
    assert sum(p["latest_offset"] for p in topic["partitions"]) == 3
    table = odradek(broker, "topics", "describe", "cli")
    assert table.returncode == 0 and "earliest" in table.stdout
    deleted = odradek(broker, "topics", "delete", "cli")
    assert deleted.returncode == 0, deleted.stderr
    gone = odradek(broker, "topics", "describe", "cli")
    assert gone.returncode == 1
    assert "cli" in gone.stderr and "Traceback" not in gone.stderr


def test_cli_tombstones_offsets_print_properties_and_failures(broker) -> None:
    produced = odradek(broker, "produce", "cli-more", "--key-separator", ":", "--null-marker",
                       "NULL", "-X", "acks=all", "-X", "linger.ms=0",
                       stdin=b"a:one\nb:NULL\na:three\n")
    assert produced.returncode == 0, produced.stderr
    consumed = odradek(broker, "consume", "cli-more", "--offset", "earliest", "--max-messages",
                       "3", "--print", "partition,offset,key", "-X", "max.poll.records=1")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == "0\t0\ta\tone\n0\t1\tb\tnull\n0\t2\ta\tthree\n"
    hexed = odradek(broker, "consume", "cli-more", "--partition", "0", "--offset", "2",
                    "--max-messages", "1", "--format", "hex", "--json")
    record = json.loads(hexed.stdout)
    assert (record["offset"], record["key"], record["value"]) == (2, "61", b"three".hex())
    # over the broker's message limit: the producer lets it go, the broker refuses it
    big = odradek(broker, "produce", "cli-more", "-X", "max.request.size=4194304",
                  "-X", "batch.size=4194304", stdin=b"H" * (2 << 20) + b"\n")
    assert big.returncode == 1
    assert re.search(r"stopped after reading 1 lines: 0 sent, 1 failed; stopped by a message "
                     r"failed: .*cli-more-0", big.stderr), big.stderr
    unknown = odradek(broker, "produce", "cli-more", "-X", "batch.sise=1")
    assert unknown.returncode == 2 and "unknown producer property 'batch.sise'" in unknown.stderr


def test_cli_errors_name_the_topic(broker) -> None:
    assert odradek(broker, "topics", "create", "dup").returncode == 0
    again = odradek(broker, "topics", "create", "dup")
    assert again.returncode == 1
    assert again.stderr == "odradek: error: topic 'dup' already exists\n"  # named once
    config = odradek(broker, "topics", "create", "cfg1", "--config", "retention_ms=soon")
    assert config.returncode == 1
    assert config.stderr.startswith("odradek: error: topic 'cfg1': ")
    assert config.stderr.count("cfg1") == 1, config.stderr
    bad = odradek(broker, "topics", "create", "x" * 250)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr


def test_cli_refuses_to_delete_or_produce_to_the_offsets_topic(broker) -> None:
    """``topics delete __consumer_offsets`` lost every group at the next restart, and a
    produced line could rewrite a group's offsets: both fail, naming the topic."""
    tp = TopicPartition("t", 0)
    with Consumer(broker.bootstrap, group_id="g", enable_auto_commit=False) as consumer:
        consumer.assign([tp])
        consumer.commit({tp: 5})  # the coordinator creates __consumer_offsets
        deleted = odradek(broker, "topics", "delete", "__consumer_offsets")
        produced = odradek(broker, "produce", "__consumer_offsets", "--key-separator", ",",
                           stdin=b"k,v\n")
        assert consumer.committed(tp) == 5
        consumer.commit({tp: 6})
        assert consumer.committed(tp) == 6
    for result in (deleted, produced):
        assert result.returncode == 1, result.stderr
        assert "internal topic '__consumer_offsets'" in result.stderr
        assert "Traceback" not in result.stderr
    listed = odradek(broker, "topics", "list", "--internal", "--json")
    assert "__consumer_offsets" in json.loads(listed.stdout)


def test_odradek_broker_start_runs_the_broker_in_the_same_process(tmp_path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tooling.cli", "broker", "start", "--host", "127.0.0.1",
         "--port", "0", "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the broker prints it at once, flushed
        match = re.fullmatch(r"odradek broker (\d+) listening on 127\.0\.0\.1:(\d+)\n", line)
        assert match, line
        with Admin(f"127.0.0.1:{match.group(2)}") as admin:
            assert admin.describe_cluster().brokers[0].node_id == int(match.group(1))
        os.kill(proc.pid, signal.SIGTERM)  # the PID we started is the broker's
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
