"""Streaming reads with ``trigger(availableNow=True)``: every message exactly once, offsets
committed to a consumer group, and a restart from the checkpoint that reads only what is new."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from client import TopicPartition
from tests.broker_process import BrokerProcess
from tests.pipeline.support import (
    Sent,
    committed_offsets,
    create_topic,
    produce,
    row_to_sent,
)

pytestmark = pytest.mark.timeout(180)
QUERY_TIMEOUT_S = 120


def _stream(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    reader = (
        spark.readStream.format("odradek")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", "events")
        .option("startingOffsets", "earliest")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _run_to_list(df: DataFrame, checkpoint: Path) -> tuple[list[Sent], StreamingQuery]:
    """Run an availableNow query collecting every batch's rows on the driver."""
    collected: list[Sent] = []

    def collect(batch: DataFrame, batch_id: int) -> None:
        collected.extend(row_to_sent(row) for row in batch.collect())

    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    _finish(query)
    return collected, query


def _finish(query: StreamingQuery) -> None:
    assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish in time"
    assert query.exception() is None


def _batch_sizes(query: StreamingQuery) -> list[int]:
    progress: list[Any] = query.recentProgress
    return [p.numInputRows for p in progress if p.numInputRows]


def test_available_now_reads_each_message_once_and_resumes_from_its_checkpoint(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, "events", 3)
    first = produce(broker.bootstrap, "events", 150, partitions=3, compression="gzip")
    checkpoint = tmp_path / "checkpoint"

    rows, _ = _run_to_list(_stream(spark, broker.bootstrap), checkpoint)
    assert sorted(rows) == sorted(first)

    second = produce(broker.bootstrap, "events", 40, partitions=3, first=150)
    rows, _ = _run_to_list(_stream(spark, broker.bootstrap), checkpoint)
    assert sorted(rows) == sorted(second)


def test_max_offsets_per_trigger_splits_the_run_into_batches(
    spark: SparkSession, broker: BrokerProcess
) -> None:
    create_topic(broker.bootstrap, "events", 2)
    sent = produce(broker.bootstrap, "events", 250, partitions=2, compression="lz4")
    query = (
        _stream(spark, broker.bootstrap, maxOffsetsPerTrigger="100")
        .writeStream.format("memory")
        .queryName("capped")
        .trigger(availableNow=True)
        .start()
    )
    _finish(query)
    assert _batch_sizes(query) == [100, 100, 50]
    rows = [row_to_sent(row) for row in spark.sql("SELECT * FROM capped").collect()]
    assert sorted(rows) == sorted(sent)


def test_stream_commits_processed_offsets_to_its_group(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, "events", 2)
    sent = produce(broker.bootstrap, "events", 90, partitions=2)
    df = _stream(spark, broker.bootstrap, groupId="spark-job", maxOffsetsPerTrigger="40")
    rows, query = _run_to_list(df, tmp_path / "checkpoint")
    assert sorted(rows) == sorted(sent)
    assert len(_batch_sizes(query)) == 3  # the last batch's offsets are committed too
    ends = {TopicPartition("events", p): sum(s.partition == p for s in sent) for p in range(2)}
    assert committed_offsets(broker.bootstrap, "spark-job") == ends


def test_stream_options_are_checked_when_the_query_starts(
    spark: SparkSession, broker: BrokerProcess
) -> None:
    create_topic(broker.bootstrap, "events", 1)
    with pytest.raises(PySparkException, match="option 'endingOffsets'"):
        query = (
            _stream(spark, broker.bootstrap, endingOffsets=json.dumps({"events": {"0": 1}}))
            .writeStream.format("memory")
            .queryName("never")
            .start()
        )
        query.awaitTermination(QUERY_TIMEOUT_S)
