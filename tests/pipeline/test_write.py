"""Writes: rows produced to topics, then read back through the source."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from tests.broker_process import BrokerProcess
from tests.pipeline.support import create_topic, produce

pytestmark = pytest.mark.timeout(180)


def _read_back(spark: SparkSession, bootstrap: str, topics: str) -> list[tuple[object, ...]]:
    df = (
        spark.read.format("odradek")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topics)
        .load()
    )
    return sorted(
        (r.topic, r.partition, r.offset, r.key, r.value) for r in df.collect()
    )


def test_write_then_read_back(spark: SparkSession, broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "out", 3)
    rows = [(f"k{i}", f"value {i}".encode(), i % 3) for i in range(30)]
    df = spark.createDataFrame(rows, "key string, value binary, partition int")
    (
        df.write.format("odradek")
        .mode("append")
        .option("bootstrap.servers", broker.bootstrap)
        .option("topic", "out")
        .option("kafka.compression.type", "gzip")
        .save()
    )
    back = _read_back(spark, broker.bootstrap, "out")
    assert len(back) == 30
    by_value = {value: (partition, key) for _, partition, _, key, value in back}
    assert by_value == {value: (p, key.encode()) for key, value, p in rows}
    # Each partition holds its rows at offsets 0..n-1: nothing written twice.
    for p in range(3):
        assert sorted(o for _, q, o, _, _ in back if q == p) == list(range(10))


def test_write_takes_the_topic_from_a_column(spark: SparkSession, broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "left", 1)
    create_topic(broker.bootstrap, "right", 2)
    rows = [("left" if i % 3 else "right", f"v{i}") for i in range(12)]
    df = spark.createDataFrame(rows, "topic string, value string")
    df.write.format("odradek").mode("append").option("bootstrap.servers", broker.bootstrap).save()
    back = _read_back(spark, broker.bootstrap, "left,right")
    assert sorted((topic, value) for topic, _, _, _, value in back) == sorted(
        (topic, value.encode()) for topic, value in rows
    )
    assert all(key is None for _, _, _, key, _ in back)


@pytest.mark.parametrize(
    ("ddl", "mode", "problem"),
    [
        ("key string", "append", "column 'value' is required"),
        ("value string", "overwrite", "a topic is append-only"),
    ],
)
def test_bad_writes_say_what_is_wrong(
    spark: SparkSession, broker: BrokerProcess, ddl: str, mode: str, problem: str
) -> None:
    df = spark.createDataFrame([("k",)], ddl)
    writer = df.write.format("odradek").mode(mode).option("bootstrap.servers", broker.bootstrap)
    with pytest.raises(PySparkException, match=problem):
        writer.option("topic", "out").save()


def test_streaming_write_copies_a_topic(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, "events", 2)
    create_topic(broker.bootstrap, "copy", 1)
    sent = produce(broker.bootstrap, "events", 60, partitions=2, compression="gzip")
    query = (
        spark.readStream.format("odradek")
        .option("bootstrap.servers", broker.bootstrap)
        .option("subscribe", "events")
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
        .writeStream.format("odradek")
        .option("bootstrap.servers", broker.bootstrap)
        .option("topic", "copy")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    back = _read_back(spark, broker.bootstrap, "copy")
    assert sorted((value, key) for _, _, _, key, value in back) == sorted(
        (s.value, s.key) for s in sent
    )
