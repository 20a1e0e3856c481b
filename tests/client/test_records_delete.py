"""``odradek records delete`` (DeleteRecords) and ``odradek log-dirs`` (DescribeLogDirs)
against a real broker process on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from client import EARLIEST, LATEST, Admin, Consumer, Producer, TopicPartition
from protocol.errors import OffsetOutOfRangeError

pytestmark = pytest.mark.integration


def odradek(broker, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tooling.cli", *args, "--bootstrap", broker.bootstrap],
        capture_output=True, text=True, timeout=60,
    )


def log_dirs(broker, *args: str) -> dict[tuple[str, int], dict]:
    listed = odradek(broker, "log-dirs", "--json", *args)
    assert listed.returncode == 0, listed.stderr
    return {(r["topic"], r["partition"]): r for r in json.loads(listed.stdout)}


def produce_one_by_one(broker, topic: str, n: int) -> None:
    with Producer(broker.bootstrap) as producer:
        for i in range(n):
            producer.send(topic, b"message %02d" % i).result(timeout=20)


@pytest.mark.timeout(120)
def test_records_delete_moves_the_log_start_durably(broker) -> None:
    tp = TopicPartition("trimmed", 0)
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("trimmed", configs={"segment_bytes": "120"})  # ~2 entries each
    produce_one_by_one(broker, "trimmed", 20)
    before = log_dirs(broker, "--topic", "trimmed")[("trimmed", 0)]
    assert (before["log_start_offset"], before["log_end_offset"]) == (0, 20)
    assert before["high_watermark"] == 20 and before["segments"] > 5

    deleted = odradek(broker, "records", "delete", "--topic", "trimmed", "--partition", "0",
                      "--before", "11", "--json")
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(deleted.stdout) == {"topic": "trimmed", "partition": 0,
                                          "low_watermark": 11}
    after = log_dirs(broker, "--topic", "trimmed")[("trimmed", 0)]
    assert after["log_start_offset"] == 11 and after["log_end_offset"] == 20
    assert after["segments"] < before["segments"]  # whole segments below 11 went at once
    assert after["size"] < before["size"]
    with Admin(broker.bootstrap) as admin:
        assert admin.list_offsets({tp: EARLIEST})[tp].offset == 11
        assert admin.list_offsets({tp: LATEST})[tp].offset == 20
    with Consumer(broker.bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 5)
        with pytest.raises(OffsetOutOfRangeError, match=r"offset 5 is out of range \[11, 20\]"):
            for _ in range(100):
                consumer.poll(timeout_ms=100)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        records = []
        for _ in range(100):
            records += consumer.poll(timeout_ms=100)
            if len(records) >= 9:
                break
        assert [r.offset for r in records] == list(range(11, 20))

    # a lower offset changes nothing; past the high watermark is refused, by name
    lower = odradek(broker, "records", "delete", "--topic", "trimmed", "--partition", "0",
                    "--before", "3")
    assert lower.returncode == 0 and "log start offset is now 11" in lower.stdout
    past = odradek(broker, "records", "delete", "--topic", "trimmed", "--partition", "0",
                   "--before", "21")
    assert past.returncode == 1
    assert "trimmed-0" in past.stderr and "high watermark" in past.stderr
    assert "Traceback" not in past.stderr

    # the new log start survives a restart, clean or not
    broker.restart()
    assert log_dirs(broker)[("trimmed", 0)]["log_start_offset"] == 11
    broker.kill()
    broker.start(port=broker.port)
    with Admin(broker.bootstrap) as admin:
        assert admin.list_offsets({tp: EARLIEST})[tp].offset == 11

    # -1 / latest: up to the high watermark, the log then empty for consumers
    latest = odradek(broker, "records", "delete", "--topic", "trimmed", "--partition", "0",
                     "--before", "latest", "--json")
    assert latest.returncode == 0, latest.stderr
    assert json.loads(latest.stdout)["low_watermark"] == 20
    with Admin(broker.bootstrap) as admin:
        assert admin.list_offsets({tp: EARLIEST})[tp].offset == 20


def test_records_delete_refuses_internal_topics_and_unknown_partitions(broker) -> None:
    with Consumer(broker.bootstrap, group_id="g") as consumer:
        tp = TopicPartition("t", 0)
        consumer.assign([tp])
        consumer.commit({tp: 0})  # the coordinator creates __consumer_offsets
    internal = odradek(broker, "records", "delete", "--topic", "__consumer_offsets",
                       "--partition", "0", "--before", "0")
    assert internal.returncode == 1
    assert "internal topic '__consumer_offsets'" in internal.stderr
    unknown = odradek(broker, "records", "delete", "--topic", "t", "--partition", "7",
                      "--before", "0")
    assert unknown.returncode == 1 and "t-7" in unknown.stderr
    bad = odradek(broker, "records", "delete", "--topic", "t", "--partition", "0",
                  "--before", "-5")
    assert bad.returncode == 2 and "-5" in bad.stderr


def test_log_dirs_lists_every_partition_on_disk(broker) -> None:
    with Admin(broker.bootstrap) as admin:
        admin.create_topic("dirs-a", partitions=2)
        admin.create_topic("dirs-b")
    produce_one_by_one(broker, "dirs-b", 3)
    found = log_dirs(broker)
    assert {("dirs-a", 0), ("dirs-a", 1), ("dirs-b", 0)} <= set(found)
    b = found[("dirs-b", 0)]
    assert b["broker_id"] == broker.node_id
    assert (b["log_start_offset"], b["log_end_offset"], b["high_watermark"]) == (0, 3, 3)
    assert b["segments"] == 1 and b["size"] > 0
    assert found[("dirs-a", 1)]["size"] == 0
    assert set(log_dirs(broker, "--topic", "dirs-a")) == {("dirs-a", 0), ("dirs-a", 1)}
    table = odradek(broker, "log-dirs", "--topic", "dirs-b")
    assert table.returncode == 0, table.stderr
    assert "dirs-b" in table.stdout and "HIGH-WATERMARK" in table.stdout
    assert "dirs-a" not in table.stdout
