"""Batch reads against a real broker: exactly what was produced, and exactly the rows the
starting and ending offsets select."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

from client import Producer
from tests.broker_process import BrokerProcess
from tests.pipeline.support import Sent, create_topic, produce, rows_of

pytestmark = pytest.mark.timeout(180)


def _read(spark: SparkSession, bootstrap: str, **options: str):  # type: ignore[no-untyped-def]
    reader = spark.read.format("odradek").option("bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _fill(bootstrap: str) -> list[Sent]:
    """300 messages over 4 partitions: 100 uncompressed, then 100 gzip, then 100 lz4."""
    create_topic(bootstrap, "events", 4)
    sent = []
    for n, codec in enumerate(("none", "gzip", "lz4")):
        sent += produce(bootstrap, "events", 100, partitions=4, compression=codec, first=n * 100)
    return sent


def test_reads_every_message_exactly_once(spark: SparkSession, broker: BrokerProcess) -> None:
    sent = _fill(broker.bootstrap)
    df = _read(spark, broker.bootstrap, subscribe="events")
    rows = rows_of(df)
    assert len(rows) == len(sent) == 300
    assert sorted(rows) == sorted(sent)
    assert {r.timestampType for r in df.select("timestampType").collect()} == {0}

    # minPartitions splits the four ranges into ten tasks that still read each message once.
    split = _read(spark, broker.bootstrap, subscribe="events", minPartitions="10")
    assert split.rdd.getNumPartitions() == 10
    assert sorted(rows_of(split)) == sorted(sent)


def test_offsets_select_exactly_the_right_rows(spark: SparkSession, broker: BrokerProcess) -> None:
    sent = _fill(broker.bootstrap)
    latest = {p: max(s.offset for s in sent if s.partition == p) + 1 for p in range(4)}
    starting = {"events": {"0": 5, "1": -2, "2": 70, "3": -2}}
    ending = {"events": {"0": 10, "1": 3, "2": -1, "3": latest[3]}}
    df = _read(
        spark,
        broker.bootstrap,
        subscribe="events",
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
    )
    bounds = {0: (5, 10), 1: (0, 3), 2: (70, latest[2]), 3: (0, latest[3])}
    expected = [s for s in sent if bounds[s.partition][0] <= s.offset < bounds[s.partition][1]]
    assert sorted(rows_of(df)) == sorted(expected)

    # earliest / latest by name, through assign: two whole partitions.
    df = _read(
        spark,
        broker.bootstrap,
        assign=json.dumps({"events": [1, 3]}),
        startingOffsets="earliest",
        endingOffsets="latest",
    )
    assert sorted(rows_of(df)) == sorted(s for s in sent if s.partition in (1, 3))


def test_subscribe_pattern_reads_matching_topics(
    spark: SparkSession, broker: BrokerProcess
) -> None:
    create_topic(broker.bootstrap, "logs-a", 1)
    create_topic(broker.bootstrap, "logs-b", 2)
    create_topic(broker.bootstrap, "other-logs", 1)
    sent = produce(broker.bootstrap, "logs-a", 5, partitions=1)
    sent += produce(broker.bootstrap, "logs-b", 6, partitions=2)
    produce(broker.bootstrap, "other-logs", 3, partitions=1)
    df = _read(spark, broker.bootstrap, subscribePattern="logs-.*")
    assert sorted(rows_of(df)) == sorted(sent)


def test_include_headers_gives_sparks_headers_column(
    spark: SparkSession, broker: BrokerProcess
) -> None:
    create_topic(broker.bootstrap, "tagged", 2)
    with Producer(broker.bootstrap, compression="zstd") as producer:
        producer.send("tagged", b"h", partition=0, headers=[("a", b"1"), ("a", None), ("b", b"")])
        producer.send("tagged", b"bare", partition=1)
        producer.flush(10)
    df = _read(spark, broker.bootstrap, subscribe="tagged", includeHeaders="true")
    assert df.schema.simpleString().endswith(",headers:array<struct<key:string,value:binary>>>")
    rows = {r.value: r.headers for r in df.collect()}
    assert rows[b"bare"] is None  # as Spark's Kafka source: null, not an empty array
    assert [(h.key, h.value) for h in rows[b"h"]] == [("a", b"1"), ("a", None), ("b", b"")]
    assert "headers" not in _read(spark, broker.bootstrap, subscribe="tagged").columns
